// SPDX-License-Identifier: BSD-3-Clause
// Attention forward on Hopper at D = 128 (the kernel: attn_fwd.cuh).
#include "attn_fwd.cuh"

namespace mxfa_gpu {

cudaError_t launch_attn_fwd_d128(const attn_fwd_args &a, cudaStream_t stream)
{
    return a.leak_free ? launch_attn_fwd<128, true>(a, stream) : launch_attn_fwd<128, false>(a, stream);
}

} // namespace mxfa_gpu
