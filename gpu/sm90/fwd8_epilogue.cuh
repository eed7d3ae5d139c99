// SPDX-License-Identifier: BSD-3-Clause
// The sm90-fp8 attention forward's epilogue (attn_fwd.cuh): a consumer
// thread's two rows of O and LSE from its O fragment, the rows' maxima and
// the row sums' partials.
#ifndef MXFA_GPU_SM90_FWD8_EPILOGUE_CUH
#define MXFA_GPU_SM90_FWD8_EPILOGUE_CUH

#include "attn_seqs.cuh"
#include "exp2.cuh"
#include "sm90/fwd8_layout.cuh"

namespace mxfa_gpu {
namespace {

#ifdef MXFA_SM90_CODE

// lsum: the warpgroup's partials ([2 hh + e][thread], thread tid's); o and
// m: the thread's fragment and maxima (rows row and row + 8 of the
// sequence, t its lane in the quad).
//
// l: the eight partials of a row, two a thread of its quad, combined by
// mxfa_ref_row_sum's tree a level a shuffle: thread t's L_2t + L_2t+1, then
// with thread t ^ 1's ((L0 + L1) + (L2 + L3) at t = 0 and 1, the other half
// at 2 and 3), then with thread t ^ 2's (addition commutes, so all four get
// the same bits), times 2^-8. Then O = O / l and LSE = (m + log2 l) ln 2;
// rows that saw nothing: 0 and -Inf.
template <int D>
__device__ __forceinline__ void write_rows(const float (&lsum)[4][128], int tid, const float (&o)[D / 2],
                                           const float (&m)[2], int row, const seq_info &sq, int h, int t,
                                           const attn_out &out)
{
    float l[2];
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
        float v = __fadd_rn(lsum[2 * hh][tid], lsum[2 * hh + 1][tid]);
        v = __fadd_rn(v, __shfl_xor_sync(0xFFFFFFFFu, v, 1));
        v = __fadd_rn(v, __shfl_xor_sync(0xFFFFFFFFu, v, 2));
        l[hh] = __fmul_rn(v, 0.00390625f);
    }
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
        const int64_t i = row + 8 * hh;
        if (i >= sq.lq)
            continue;
        const float lr = l[hh];
        const bool any = lr != 0.0f || lr != lr;
        const int64_t token = sq.q0 + i;
        for (int jj = 0; jj < D / 8; jj++)
            for (int e = 0; e < 2; e++)
                out.store_o(token, h, 8 * jj + 2 * t + e, any ? __fdiv_rn(o[4 * jj + 2 * hh + e], lr) : 0.0f);
        if (out.lse && t == 0)
            out.store_lse(token, h,
                          any ? __fmul_rn(__fadd_rn(m[hh], mx_log2(lr)), __uint_as_float(0x3F317218u))
                              : -__builtin_huge_valf());
    }
}

#endif // MXFA_SM90_CODE

} // namespace
} // namespace mxfa_gpu

#endif
