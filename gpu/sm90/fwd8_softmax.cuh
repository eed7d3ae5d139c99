// SPDX-License-Identifier: BSD-3-Clause
// The sm90-fp8 attention forward's online softmax on one key tile
// (attn_fwd.cuh), in the registers of a consumer thread: its two rows
// (g and g + 8 of its warp's 16), 32 scores of each, keys 8q + 2t and
// 8q + 2t + 1 of row hh at x[4q + 2hh] and x[4q + 2hh + 1]. The steps and
// their order are the reference's (cpu/ref/attn_fwd.c, docs/NUMERICS.md,
// "Attention forward").
#ifndef MXFA_GPU_SM90_FWD8_SOFTMAX_CUH
#define MXFA_GPU_SM90_FWD8_SOFTMAX_CUH

#include "exp2.cuh"
#include "sm90/fwd8_layout.cuh"
#include "sm90/wgmma.cuh"

namespace mxfa_gpu {
namespace {

#ifdef MXFA_SM90_CODE

constexpr float NEG_INF = -__builtin_huge_valf();

// The largest of v[0 .. N) (N a power of two), as a tree (NaN wins).
template <int N> __device__ __forceinline__ float tree_max(const float *v)
{
    if constexpr (N == 1)
        return v[0];
    else
        return fmax_nan(tree_max<N / 2>(v), tree_max<N / 2>(v + N / 2));
}

// x: the tile's scores (-Inf for the keys a row does not see), overwritten
// with P in fp32; m: the rows' running maxima (log2 domain); o: the O
// fragment, rescaled where a maximum grows; lsum: the warpgroup's row-sum
// partials in shared memory ([2 hh + e][thread], thread tid's own); c:
// fl(scale log2 e). vis[hh]: whether row hh has seen a finite score.
template <int D>
__device__ __forceinline__ void softmax_tile(float (&x)[64], float (&m)[2], float (&o)[D / 2], float (&lsum)[4][128],
                                             int tid, float c, bool (&vis)[2])
{
    // The rows' maxima of S * c (NaN wins, as in the reference's scan),
    // as fl(c max S): c > 0, and a rounding never reverses an order, so
    // it is the largest fl(S c) with one multiplication a row; the
    // maximum as a tree, whose depth is log2 of a row's 32 scores, not
    // their count.
    // row hh's maximum: W chains over the
    // row's 32 (score k of the row is element 4 (k / 2) + 2 hh + k % 2),
    // then halves. W = 16 is a tree; at D = 256, O's 128 registers leave
    // room for two chains only (ptxas spilled with sixteen and four)
    auto row_max = [&](int hh) {
        constexpr int W = D == 256 ? 2 : 16;
        auto el = [&](int k) { return x[4 * (k / 2) + 2 * hh + k % 2]; };
        float v[W];
#pragma unroll
        for (int q = 0; q < W; q++)
            v[q] = fmax_nan(el(q), el(q + W));
#pragma unroll
        for (int k = 2 * W; k < 32; k++)
            v[k % W] = fmax_nan(v[k % W], el(k));
        return tree_max<W>(v);
    };
    float mx[2] = {row_max(0), row_max(1)};
#pragma unroll
    for (int o2 = 1; o2 < 4; o2 <<= 1)
#pragma unroll
        for (int hh = 0; hh < 2; hh++)
            mx[hh] = fmax_nan(mx[hh], __shfl_xor_sync(0xFFFFFFFFu, mx[hh], o2));
    bool grew[2];
    float m_old[2];
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
        mx[hh] = __fmul_rn(mx[hh], c);
        const float m_new = m[hh] != m[hh] || mx[hh] != mx[hh] ? __uint_as_float(NAN_BITS) : fmaxf(m[hh], mx[hh]);
        vis[hh] = m_new != NEG_INF;
        grew[hh] = m_new > m[hh];
        m_old[hh] = m[hh];
        if (grew[hh])
            m[hh] = m_new;
    }
    // P = 256 E(RN_f16(min(fma(S, c, b), 0))) with b = 2^-11 - m, in [0,
    // 256], two keys in one ex2.approx.f16x2 (E: exp2.cuh); 0 for the
    // keys a row does not see (S = -Inf). A row that sees no finite
    // score (m_new = -Inf: its S are -Inf) takes b = -Inf, so its P are
    // 0 too. The exponentials need only b: alpha, O's rescaling and the
    // partials' come after them (below), off the path from S to the first
    // exponential.
    float b[2];
#pragma unroll
    for (int hh = 0; hh < 2; hh++)
        b[hh] = vis[hh] ? __fsub_rn(0x1p-11f, m[hh]) : NEG_INF;
    // a block of 32 keys at a time, the f16 sums of the block's P
    // (block_sum_f16x2) into y: keys 8q + 2t + e of row hh (the pair at
    // x[4q + 2hh]) go to partial 2 hh + e
    float y[BN / 32][2][2];
#pragma unroll
    for (int kb = 0; kb < BN / 32; kb++) {
        uint32_t ph[4][2];
#pragma unroll
        for (int q = 4 * kb; q < 4 * kb + 4; q++)
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                float &x0 = x[4 * q + 2 * hh], &x1 = x[4 * q + 2 * hh + 1];
                ph[q - 4 * kb][hh] = p_times256(exp2_capped_sm90(x0, x1, -c, -b[hh], -b[hh]));
                f16x2_to_f32(ph[q - 4 * kb][hh], x0, x1);
            }
#pragma unroll
        for (int hh = 0; hh < 2; hh++)
            f16x2_to_f32(block_sum_f16x2(ph[0][hh], ph[1][hh], ph[2][hh], ph[3][hh]), y[kb][hh][0], y[kb][hh][1]);
    }
    // alpha = exp2(m_old - m_new) where the maximum grew, computed in every
    // lane and selected (a branch would part the warp's schedule), else 1:
    // x * 1 is x, and a NaN in O stays a NaN to the end
    float alpha[2];
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
        const float a = mx_exp2(__fsub_rn(m_old[hh], m[hh]));
        alpha[hh] = grew[hh] ? a : 1.0f;
    }
    if (grew[0] || grew[1]) {
#pragma unroll
        for (int i = 0; i < D / 2; i++)
            o[i] = __fmul_rn(o[i], alpha[(i / 2) % 2]);
    }
    // The row sums: each partial scaled by alpha (1 where the max did not
    // grow: L * 1 is L), then the tile's block sums added in key order.
#pragma unroll
    for (int hh = 0; hh < 2; hh++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            float part = __fmul_rn(lsum[2 * hh + e][tid], alpha[hh]);
#pragma unroll
            for (int kb = 0; kb < BN / 32; kb++)
                part = __fadd_rn(part, y[kb][hh][e]);
            lsum[2 * hh + e][tid] = part;
        }
}

#endif // MXFA_SM90_CODE

} // namespace
} // namespace mxfa_gpu

#endif
