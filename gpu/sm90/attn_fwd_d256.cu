// Attention forward on Hopper at D = 256 (the kernel: attn_fwd.cuh).
#include "attn_fwd.cuh"

namespace mxfa_gpu {

cudaError_t launch_attn_fwd_d256(const attn_fwd_args &a, cudaStream_t stream)
{
    // the leak-free mask's bf16 V does not fit beside the rest at D = 256
    // (the backend refuses it first)
    return a.leak_free ? cudaErrorInvalidValue : launch_attn_fwd<256, false>(a, stream);
}

} // namespace mxfa_gpu
