// SPDX-License-Identifier: BSD-3-Clause
// The sm90-bf16 attention forward kernel at D = 128 (fwd_bf16.cuh): an
// instance a file, so that they compile in parallel.
#include "sm90/fwd_bf16.cuh"

namespace mxfa_gpu {

cudaError_t launch_fwd_bf16_d128(const attn_fwd_args &a, int bn, cudaStream_t stream)
{
    return fwd90::launch_fwd_bf16<128>(a, bn, stream);
}

} // namespace mxfa_gpu
