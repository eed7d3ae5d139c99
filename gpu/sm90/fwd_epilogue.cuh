// SPDX-License-Identifier: BSD-3-Clause
// The sm90-bf16 attention forward's output (fwd_bf16.cuh): each consumer
// thread's two rows of O and their LSE, from its registers.
#ifndef MXFA_GPU_SM90_FWD_EPILOGUE_CUH
#define MXFA_GPU_SM90_FWD_EPILOGUE_CUH

#include "sm90/fwd_layout.cuh"
#include "sm90/fwd_softmax.cuh"
#include "sm90/hopper.cuh"

namespace mxfa_gpu {
namespace fwd90 {

using namespace sm90;

#ifdef MXFA_SM90_CODE

// The output of a thread's two rows: O / l and LSE = (m + log2 l) ln 2;
// a row that saw no key (l = 0) writes 0 and -Inf. Every NaN the canonical
// 0x7FFFFFFF (bf16 0x7FFF).
template <int D>
__device__ __forceinline__ void write_rows(const float (&o)[D / 2], const rows2 &r, const fwd_params &p, const seq_info &sq,
                                           int h, int row0)
{
    const int t = (int)threadIdx.x % 4;
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
        const float l = row_sum(r, hh); // every thread of the quad takes part
        const int64_t i = row0 + 8 * hh;
        if (i >= sq.lq)
            continue;
        const bool any = l != 0.0f || l != l;
        const int64_t token = sq.q0 + i;
#pragma unroll
        for (int j = 0; j < D / 8; j++) {
            float v[2];
#pragma unroll
            for (int e = 0; e < 2; e++) {
                v[e] = any ? __fdiv_rn(o[4 * j + 2 * hh + e], l) : 0.0f;
                v[e] = v[e] != v[e] ? __uint_as_float(0x7FFFFFFFu) : v[e];
            }
            p.out.store_o(token, h, 8 * j + 2 * t, v[0]);
            p.out.store_o(token, h, 8 * j + 2 * t + 1, v[1]);
        }
        if (p.out.lse && t == 0) {
            float lse = any ? __fmul_rn(__fadd_rn(r.m[hh], mx_log2(l)), __uint_as_float(0x3F317218u)) : NEG_INF;
            p.out.store_lse(token, h, lse != lse ? __uint_as_float(0x7FFFFFFFu) : lse);
        }
    }
}

#endif // MXFA_SM90_CODE

} // namespace fwd90
} // namespace mxfa_gpu

#endif
