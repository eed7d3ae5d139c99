// SPDX-License-Identifier: BSD-3-Clause
// MXFP8 attention forward on Hopper under the sm90-fp8 model: the entry
// the backend calls, by head dim (the kernel: attn_fwd.cuh; an instance a
// file, attn_fwd_d64.cu, _d128.cu and _d256.cu).
#include "attn_fwd.cuh"

namespace mxfa_gpu {

cudaError_t launch_attn_fwd_sm90(const attn_fwd_args &a, cudaStream_t stream)
{
    switch (a.q.n2) {
    case 64: return launch_attn_fwd_d64(a, stream);
    case 128: return launch_attn_fwd_d128(a, stream);
    case 256: return launch_attn_fwd_d256(a, stream);
    }
    return cudaErrorInvalidValue; // the backend refuses other head dims first
}

} // namespace mxfa_gpu
