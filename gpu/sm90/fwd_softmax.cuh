// SPDX-License-Identifier: BSD-3-Clause
// The online softmax of the sm90-bf16 attention forward kernel on one key
// tile, in the registers of the score accumulator: a thread of a consumer
// warpgroup holds two rows (g and g + 8 of its warp's 16), BN / 4 scores
// of each, keys 8j + 2t and 8j + 2t + 1 (wgmma_bf16.cuh). The steps and
// their order are the reference's (cpu/ref/attn_fwd.c, docs/NUMERICS.md,
// "Attention forward"):
//   m_new = max(m, fl(max S * c)) (a NaN score: NaN, which does not grow m);
//   when m grows, alpha = exp2(m - m_new) scales O and the row sums;
//   P = 256 E(RN_f16(min(fma(S, c, fl(2^-11 - m)), 0))) for the keys the row
//   sees, else 0, two keys in one ex2.approx.f16x2, the cap folded into
//   the conversion to f16 (exp2_capped_sm90; E: exp2.cuh);
//   the row sum kept as eight partials by key mod 8, each adding a block of
//   32 keys' f16 sum of its class (block_sum_f16x2): this thread's keys are
//   those of partials 2t and 2t + 1, so it keeps those two a row, and the
//   end combines the quad's in the contract's tree;
//   P to E4M3 (const: one scale 2^-8, from the f16 pair; dynamic: rceil a
//   block of 32 keys)
//   and widened to bf16 (P / 256 exactly, or the code times its scale
//   rounded once), straight into the A fragments of the P V steps.
#ifndef MXFA_GPU_SM90_FWD_SOFTMAX_CUH
#define MXFA_GPU_SM90_FWD_SOFTMAX_CUH

#include "exp2.cuh"
#include "mx.cuh"
#include "sm90/wgmma_bf16.cuh"

namespace mxfa_gpu {
namespace fwd90 {

#ifdef MXFA_SM90_CODE

constexpr float NEG_INF = -__builtin_huge_valf();

// A thread's two rows: the running maximum (log2 domain) and the row sum's
// partials, [row][e] for keys j with j mod 8 = 2t + e.
struct rows2 {
    float m[2], part[2][2];
};

// What one tile's maximum did to the rows: alpha, the factor of O where
// the maximum grew; -0 where it first became finite, which sets O to +0
// rather than scaling it (the reference's O is +0 there, having skipped
// the row's every tile before, where the kernel's P V of those tiles, with
// P = 0, may have left 0 x Inf = NaN). alpha is never negative otherwise.
struct max_step {
    float alpha[2];
    bool grows[2];
};

// bf16 bits of P's E4M3 code with its block's scale byte, times 2^-8: the
// code's value, one fp32 multiplication by 2^(scale - 135), then to bf16 at
// nearest even (the reference's widening of P; const P's scale 0x7F makes it
// exact). P is never negative; a NaN code gives 0x7FC0.
__device__ __forceinline__ uint32_t widen_p(uint32_t code, uint32_t scale)
{
    if ((code & 0x7Fu) == 0x7Fu)
        return 0x7FC0u;
    const uint32_t e = code >> 3 & 0xFu, m = code & 7u;
    const float v = e ? __uint_as_float((e + 120u) << 23 | m << 20) : __uint_as_float(0x3B000000u) * (float)m; // exact
    const int k = (int)scale - 135;
    const float unit = k >= -126 ? __uint_as_float((uint32_t)(k + 127) << 23) : __uint_as_float(1u << (k + 149));
    return f32_to_bf16(__float_as_uint(__fmul_rn(v, unit)));
}

// Const P: a pair of codes (the conversion's, first in the low byte) to
// the bf16 pair of their values times 2^-8, as widen_p makes them, in four
// instructions for the two: the conversion to f16 is exact (every E4M3
// value is a normal f16 with three fraction bits, so its low seven bits are
// zero), the pair's bits shifted right by three are the bf16 bits of each
// value times 2^-112 (a normal bf16 too; the high f16's zero low bits are
// what moves into the low one, so no mask is needed), and one bf16
// multiplication by 2^104 is exact. The NaN code comes out finite, and may
// disturb its neighbour, a key of the same row: a NaN P makes that row's
// sum NaN, and so its output, whatever its P V.
__device__ __forceinline__ uint32_t p_pair_const(uint32_t two)
{
    uint32_t h, r;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h) : "h"((uint16_t)two));
    asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(h >> 3), "r"(0x73807380u)); // 2^104 twice
    return r;
}

// The maximum of row hh's scores in column groups [J, J + N) (keys 8j + 2t
// and 8j + 2t + 1 of the thread's), as a tree.
template <int BN, int J, int N> __device__ __forceinline__ float row_max(const float (&s)[BN / 2], int hh)
{
    if constexpr (N == 1)
        return fmax_nan(s[4 * J + 2 * hh], s[4 * J + 2 * hh + 1]);
    else
        return fmax_nan(row_max<BN, J, N / 2>(s, hh), row_max<BN, J + N / 2, N / 2>(s, hh));
}

// The mask of a tile that some row does not see whole: vis[hh] is how
// many of the tile's keys row hh sees, from its first; the others' scores
// become -Inf, whatever they hold. -Inf is no row's maximum, and its P is
// E(-Inf) = +0, which adds nothing to the row sum: the softmax is then the
// same code for every tile.
template <int BN> __device__ __forceinline__ void mask_scores(float (&s)[BN / 2], const int (&vis)[2])
{
    const int t = (int)threadIdx.x % 4;
#pragma unroll
    for (int i = 0; i < BN / 2; i++)
        s[i] = 8 * (i / 4) + 2 * t + i % 2 < vis[(i / 2) % 2] ? s[i] : NEG_INF;
}

// The softmax of one tile. s: the scores (fp32, the accumulator fragment,
// masked by mask_scores where some row does not see the tile whole),
// overwritten; c: fl(scale * log2 e). pa: the bf16 A fragments of P, one a
// k16 step. P_DYNAMIC: P in row blocks of 32 keys under the rceil rule,
// else one scale 2^-8.
template <int BN, bool P_DYNAMIC, bool LATE_ALPHA>
__device__ __forceinline__ max_step softmax_tile(float (&s)[BN / 2], rows2 &r, float c, uint32_t (&pa)[BN / 16][4])
{
    // the maximum, in any order (max is exact; any NaN makes it NaN): a
    // tree, whose depth is log2 of a row's BN / 4 scores, not their count;
    // the two rows side by side through the quad's shuffles
    float mx[2] = {row_max<BN, 0, BN / 8>(s, 0), row_max<BN, 0, BN / 8>(s, 1)};
#pragma unroll
    for (int lane_bit = 1; lane_bit <= 2; lane_bit *= 2)
#pragma unroll
        for (int hh = 0; hh < 2; hh++)
            mx[hh] = fmax_nan(mx[hh], __shfl_xor_sync(0xFFFFFFFFu, mx[hh], lane_bit));
    max_step st;
    float nb[2], m_old[2]; // -b: exp2_capped_sm90's offset
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
        const float m_new = fmax_nan(r.m[hh], __fmul_rn(mx[hh], c));
        m_old[hh] = r.m[hh];
        st.grows[hh] = m_new > r.m[hh];
        if constexpr (!LATE_ALPHA) {
            st.alpha[hh] = st.grows[hh] ? mx_exp2(__fsub_rn(r.m[hh], m_new)) : 1.0f;
#pragma unroll
            for (int e = 0; e < 2; e++)
                r.part[hh][e] = st.grows[hh] ? __fmul_rn(r.part[hh][e], st.alpha[hh]) : r.part[hh][e];
            st.alpha[hh] = st.grows[hh] && r.m[hh] == NEG_INF ? -0.0f : st.alpha[hh];
        }
        if (st.grows[hh])
            r.m[hh] = m_new;
        // nothing seen yet (m -Inf): P is 0 wherever the score is -Inf, and a
        // NaN score stays NaN
        nb[hh] = r.m[hh] == NEG_INF ? -NEG_INF : -__fsub_rn(0x1p-11f, r.m[hh]);
    }
    // LATE_ALPHA: the exponentials need only nb, and alpha and the
    // partials' scaling come after them (below), off the path from S to the
    // first exponential; the block sums wait in y, and join the partials in
    // the reference's order. (At D = 256, where O takes 128 registers, the
    // sixteen of y cost more than the shorter path gains: there alpha comes
    // first and each block's sums go straight into the partials.)
    float y[BN / 32][2][2];
    // a block of 32 keys (four j, two rows) at a time, so that a block's
    // scores turn into its P fragments before the next block's exponentials:
    // P as f16 pairs (keys 8j + 2t and 8j + 2t + 1 of row hh in ph[j][hh]),
    // the block's f16 sums into y, then P to E4M3 and back. s keeps P in
    // fp32 for dynamic P's scales.
#pragma unroll
    for (int kb = 0; kb < BN / 32; kb++) {
        uint32_t ph[4][2];
#pragma unroll
        for (int j = 4 * kb; j < 4 * kb + 4; j++)
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                float &x0 = s[4 * j + 2 * hh], &x1 = s[4 * j + 2 * hh + 1];
                ph[j - 4 * kb][hh] = p_times256(exp2_capped_sm90(x0, x1, -c, nb[hh], nb[hh]));
                if constexpr (P_DYNAMIC)
                    f16x2_to_f32(ph[j - 4 * kb][hh], x0, x1);
            }
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            f16x2_to_f32(block_sum_f16x2(ph[0][hh], ph[1][hh], ph[2][hh], ph[3][hh]), y[kb][hh][0], y[kb][hh][1]);
            if constexpr (!LATE_ALPHA) {
                r.part[hh][0] = __fadd_rn(r.part[hh][0], y[kb][hh][0]);
                r.part[hh][1] = __fadd_rn(r.part[hh][1], y[kb][hh][1]);
            }
        }
        uint32_t scale[2] = {0x7Fu, 0x7Fu};
        float rcp[2] = {1.0f, 1.0f};
        if constexpr (P_DYNAMIC) {
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                amax_acc acc;
#pragma unroll
                for (int j = 4 * kb; j < 4 * kb + 4; j++)
#pragma unroll
                    for (int e = 0; e < 2; e++)
                        acc.add(__float_as_uint(s[4 * j + 2 * hh + e]));
                acc.reduce(4);
                const block_rule rule = rule_from_amax(fp8_e4m3(), MXFA_PRESET_RCEIL, acc.amax, acc.nan, acc.inf);
                scale[hh] = rule.scale, rcp[hh] = e8m0_reciprocal(rule.scale);
            }
        }
#pragma unroll
        for (int j = 4 * kb; j < 4 * kb + 4; j++)
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                // keys 8j + 2t, + 1 of row hh: step j / 2, register hh (+ 2 for odd j)
                uint32_t &a = pa[j / 2][hh + 2 * (j % 2)];
                if constexpr (P_DYNAMIC) {
                    const float p0 = __fmul_rn(s[4 * j + 2 * hh], rcp[hh]);
                    const float p1 = __fmul_rn(s[4 * j + 2 * hh + 1], rcp[hh]);
                    const uint32_t two =
                        (uint32_t)__nv_cvt_float2_to_fp8x2(make_float2(p0, p1), __NV_SATFINITE, __NV_E4M3);
                    a = widen_p(two & 0xFFu, scale[hh]) | widen_p(two >> 8, scale[hh]) << 16;
                } else { // the codes of P itself (scale 1 here; 2^-8 in the widening), from the f16 pair
                    uint16_t two;
                    asm("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(two) : "r"(ph[j - 4 * kb][hh]));
                    a = p_pair_const(two);
                }
            }
    }
    // alpha = exp2(m_old - m_new) where the maximum grew, computed in every
    // lane and selected (a branch here would part the warp's schedule); the
    // partials scaled by it, then the tile's block sums added in key order
    if constexpr (LATE_ALPHA) {
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            const float a = mx_exp2(__fsub_rn(m_old[hh], r.m[hh]));
            st.alpha[hh] = st.grows[hh] ? a : 1.0f;
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float part = st.grows[hh] ? __fmul_rn(r.part[hh][e], a) : r.part[hh][e];
#pragma unroll
                for (int kb = 0; kb < BN / 32; kb++)
                    part = __fadd_rn(part, y[kb][hh][e]);
                r.part[hh][e] = part;
            }
            st.alpha[hh] = st.grows[hh] && m_old[hh] == NEG_INF ? -0.0f : st.alpha[hh];
        }
    }
    return st;
}

// O (the P V accumulator fragment, N = D) scaled by the tile's alpha where
// a row's maximum grew (alpha is 1 elsewhere, and O * 1 is O), and set to
// +0 where alpha is -0 (a warp with such a row, rare past the first tile,
// takes a second loop); a warp none of whose rows grew leaves it. After the
// first tiles the maximum seldom grows, and this is one multiplication a
// score.
template <int D> __device__ __forceinline__ void rescale_o(float (&o)[D / 2], const max_step &st)
{
    if (!__any_sync(0xFFFFFFFFu, st.grows[0] || st.grows[1]))
        return;
    const bool clear[2] = {signbit(st.alpha[0]) != 0, signbit(st.alpha[1]) != 0};
    if (__any_sync(0xFFFFFFFFu, clear[0] || clear[1])) {
#pragma unroll
        for (int i = 0; i < D / 2; i++)
            o[i] = clear[(i / 2) % 2] ? 0.0f : o[i];
    }
    // (|alpha|: +0 * +0 for a cleared row; the same alpha elsewhere)
#pragma unroll
    for (int i = 0; i < D / 2; i++)
        o[i] = __fmul_rn(o[i], fabsf(st.alpha[(i / 2) % 2]));
}

// l of row hh at the end, the contract's tree over the quad's partials:
// thread t holds partials 2t and 2t + 1 of the row.
__device__ __forceinline__ float row_sum(const rows2 &r, int hh)
{
    const float two = __fadd_rn(r.part[hh][0], r.part[hh][1]);
    const float four = __fadd_rn(two, __shfl_xor_sync(0xFFFFFFFFu, two, 1));
    const float eight = __fadd_rn(four, __shfl_xor_sync(0xFFFFFFFFu, four, 2));
    return __fmul_rn(eight, 0.00390625f);
}

#endif // MXFA_SM90_CODE

} // namespace fwd90
} // namespace mxfa_gpu

#endif
