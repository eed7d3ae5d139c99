// SPDX-License-Identifier: BSD-3-Clause
// MXFP8 attention forward on Hopper under the sm90-bf16 model: the entry
// the backend calls, by head dim (the kernel: fwd_bf16.cuh; an instance a
// file, fwd_bf16_d64.cu, _d128.cu and _d256.cu).
#include "module.cuh"

namespace mxfa_gpu {

cudaError_t launch_fwd_bf16_d64(const attn_fwd_args &a, int bn, cudaStream_t stream);
cudaError_t launch_fwd_bf16_d128(const attn_fwd_args &a, int bn, cudaStream_t stream);
cudaError_t launch_fwd_bf16_d256(const attn_fwd_args &a, int bn, cudaStream_t stream);

cudaError_t launch_attn_fwd_sm90_bf16(const attn_fwd_args &a, cudaStream_t stream)
{
    switch (a.q.n2) {
    case 64: return launch_fwd_bf16_d64(a, a.block_n, stream);
    case 128: return launch_fwd_bf16_d128(a, a.block_n, stream);
    case 256: return launch_fwd_bf16_d256(a, a.block_n, stream);
    }
    return cudaErrorInvalidValue; // the backend refuses other head dims first
}

} // namespace mxfa_gpu
