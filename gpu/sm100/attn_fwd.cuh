// SPDX-License-Identifier: BSD-3-Clause
// What the two sm100 attention forward kernels share (attn_fwd_single.cuh,
// one query tile a CTA; attn_fwd_pingpong.cuh, two): the sequences' table,
// the output, the geometry of a head dim, a query tile's key range, and the
// per-row steps of the algorithm of cpu/ref/attn_fwd.c (docs/NUMERICS.md,
// "Attention forward"), each written once so that both kernels compute the
// same bits.
//
// A softmax thread owns one query row: the lane of tensor memory that holds
// its row of S (and of O). Every tensor-memory load and store here is a
// warp's, so each function is called by a whole warp; `mine` says whether
// this thread's row takes part.
//
// Not yet run on Blackwell hardware; `mxfa selftest` checks it there.
#ifndef MXFA_GPU_SM100_ATTN_FWD_CUH
#define MXFA_GPU_SM100_ATTN_FWD_CUH

#include <cstddef>

#include <cuda_fp8.h>

#include "attn_seqs.cuh"
#include "blackwell.cuh"
#include "exp2.cuh"
#include "mx.cuh"
#include "sm100/pv_plan.h"

namespace mxfa_gpu {
namespace {

using namespace sm100;

constexpr int BM = 128, BN = 128; // the reference's query and key tiles
constexpr int SF_ATOM = 512;      // a scale atom: 128 rows x 4 blocks, tcgen05.cp's unit

// What depends on the head dim: Q and K rows in panels of PW bytes (one
// 128-byte panel at D = 128, two at 256, one of 64 bytes at 64), KB blocks
// of 32 along D, QA scale atoms a 128-row tile of Q or K (4 blocks an
// atom), VA atoms a key tile of V (128 rows of V^T an atom).
template <int D> struct head_dims {
    static constexpr int PW = D < 128 ? D : 128, PANELS = D / PW, KB = D / 32, QA = (KB + 3) / 4, VA = (D + 127) / 128;
    // the swizzle of Q and K: 128 bytes (atoms of 8 rows: 1024 bytes), or 64 bytes at D = 64 (512)
    static constexpr int SWIZZLE = PW == 128 ? MXFA_TC_SWIZZLE_128B : MXFA_TC_SWIZZLE_64B, SBO = 8 * PW;
};

// A query tile of a sequence and the key tiles it visits, in order up to
// its last row's limit (causal: bottom-right, query i sees keys up to
// i + lk - lq). Every row sees all of the tiles before jd; from tile jd on
// (the one that holds the first row's limit) some rows take a block's step
// and others skip it, and every row's last step is in one of them. A skipped
// step runs with P = 0, a no-op unless V holds a NaN (or, in bf16, an Inf)
// in the tile; then (slow) the P V steps of those tiles go one block at a
// time, and each row writes its output right after its last step.
struct q_tile {
    int64_t r0, nr;              // first row in the sequence, rows (none: nr <= 0, nt = 0)
    int64_t lim_first, lim_last; // the first and last row's last key
    int nt, jd;
    bool slow;
};

// nan_tiles: the flags of the sequence's key tiles for this KV head.
__device__ __forceinline__ q_tile make_q_tile(const seq_info &sq, int64_t r0, bool causal, const int *nan_tiles)
{
    q_tile t;
    t.r0 = r0, t.nr = min((int64_t)BM, sq.lq - r0);
    t.lim_first = r0 + sq.lk - sq.lq, t.lim_last = t.lim_first + t.nr - 1;
    const int64_t tiles_k = (sq.lk + BN - 1) / BN;
    t.nt = t.nr <= 0 ? 0 : (int)(!causal ? tiles_k : t.lim_last < 0 ? 0 : min(tiles_k, t.lim_last / BN + 1));
    t.jd = !causal ? t.nt : t.lim_first < 0 ? 0 : (int)min((int64_t)t.nt, t.lim_first / BN);
    t.slow = false;
    for (int j = t.jd; j < t.nt; j++)
        t.slow |= nan_tiles[j] != 0;
    return t;
}

// The leak-free mask: a block of keys that some row of the query tile sees
// only in part takes P / 256 and V in bf16 (kind::f16 k16 steps on the same
// accumulator), so that no V scale spans the diagonal. Bit b: block b of
// key tile j (pv_plan.h, which also orders the two kinds on O).
__device__ __forceinline__ unsigned diagonal_blocks(const q_tile &t, int64_t lk, int j)
{
    return mxfa_pv_diagonal_blocks(t.lim_first, t.lim_last, t.nt, lk, j, BN);
}

#ifdef MXFA_SM100_CODE
constexpr uint32_t P_SCALE_WORD = 0x77777777u; // const P: every block's scale 2^-8
constexpr float NEG_INF = -__builtin_huge_valf();
constexpr int PARTIALS = 8; // the row sum's partial sums (cpu/ref/attn_fwd.c), all in the row's thread
// The forward kernels' named barriers (id 0 is __syncthreads'): the
// softmax threads of tile group g exchange dynamic P's scale words at
// BAR_P_WORDS + g (store_p_words).
enum fwd100_barrier : uint32_t { BAR_P_WORDS = 1 };

__device__ __forceinline__ void tmem_st4(uint32_t taddr, const uint32_t (&v)[4])
{
    asm volatile("tcgen05.st.sync.aligned.32x32b.x4.b32 [%0], {%1, %2, %3, %4};" ::"r"(taddr), "r"(v[0]), "r"(v[1]),
                 "r"(v[2]), "r"(v[3])
                 : "memory");
}

// Makes this thread's writes to shared memory visible to the tensor cores.
__device__ __forceinline__ void fence_to_async_proxy()
{
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// A P code (E4M3, never negative) with its block's scale byte s, times the
// 2^-8 of P, widened to bf16 as the reference does: the code's value times
// 2^(s - 135) rounded to fp32, then to bf16, both to nearest even; NaN for
// 0x7F. Const P (s = 0x7F) is exact: four significant bits, 2^-17 at least.
__device__ __forceinline__ uint32_t widen_p(uint32_t code, uint32_t s)
{
    if ((code & 0x7Fu) == 0x7Fu)
        return 0x7FC0u;
    const uint32_t e = code >> 3 & 0xFu, m = code & 7u;
    const float v = e ? __uint_as_float((e + 120u) << 23 | m << 20) : __uint_as_float(0x3B000000u) * (float)m; // exact
    const int k = (int)s - 135;
    const float unit = k >= -126 ? __uint_as_float((uint32_t)(k + 127) << 23) : __uint_as_float(1u << (k + 149));
    return f32_to_bf16(__float_as_uint(__fmul_rn(v, unit)));
}

// ---- a softmax thread's row of one key tile ----

// The row of S (BN columns at s) into registers, in one go: four loads of
// 32 columns and one wait, so that S's columns are free for what comes next
// as soon as it returns.
__device__ __forceinline__ void load_row(uint32_t s, uint32_t (&v)[BN])
{
#pragma unroll
    for (int q = 0; q < BN / 32; q++)
        tmem_ld32(s + 32 * q, *reinterpret_cast<uint32_t(*)[32]>(v + 32 * q));
    tmem_wait_ld();
}

// The steps below take the row's scores a block of 32 keys at a time from
// `block(q, w)`, which puts S's columns 32q .. 32q + 31 into w: from
// registers that load_row filled (the ping-pong kernel, which frees S's
// columns early), or straight from tensor memory (the one-tile kernel, which
// so holds no more than a block of scores).

// Key 32 q + i's score x = S * c, -Inf from `valid` on (keys the row does
// not see).
__device__ __forceinline__ float score(const uint32_t (&w)[32], int q, int i, int64_t valid, float c)
{
    return 32 * q + i < valid ? __fmul_rn(__uint_as_float(w[i]), c) : NEG_INF;
}

// The running maximum m over the tile, in key order as the reference takes
// it: a NaN score makes it NaN. HELD: the scores are in registers, whose
// index must be known when compiling (the blocks unrolled); else one block
// is loaded at a time.
template <bool HELD, typename Block>
__device__ __forceinline__ float row_max(Block block, int64_t valid, float c, float m)
{
    auto max_of = [&](int q) {
        uint32_t w[32];
        block(q, w);
#pragma unroll
        for (int i = 0; i < 32; i++) {
            const float x = score(w, q, i, valid, c);
            if (x > m || x != x)
                m = x;
        }
    };
    if constexpr (HELD) {
#pragma unroll
        for (int q = 0; q < BN / 32; q++)
            max_of(q);
    } else {
#pragma unroll 1
        for (int q = 0; q < BN / 32; q++)
            max_of(q);
    }
    return m;
}

// The offset b of P's exponent for the tile: 2^-11 - m with m the updated
// running maximum; -Inf for a row that sees no finite score yet (m_new =
// -Inf: its S are -Inf, and so is fma(S, c, -Inf), which makes its P 0, as
// the reference's skipped step leaves them).
__device__ __forceinline__ float p_offset(float m, float m_new)
{
    return m_new != NEG_INF ? __fsub_rn(0x1p-11f, m) : NEG_INF;
}

// P = 256 E(RN_f16(min(fma(S, c, b), 0))) in [0, 256] for the keys the row
// sees, 0 for the others (E by the portable exact form of exp2.cuh: whether
// Blackwell's ex2.approx.f16 is E is not known), added into the row sum's partials (partial k takes
// the block's f16 sum (P_k + P_k+8) + (P_k+16 + P_k+24), as mxfa_ref_row_sum_block), and its E4M3
// codes, four a word. Const P:
// the codes of P itself, its 2^-8 in the scale byte 0x77. Dynamic P: each
// block of 32 keys by the rceil rule, whose byte goes into byte kb of
// *pword (V's scale bytes carry the 2^-8: see pack_v). P >= 0, Inf or NaN,
// and rceil never poisons: the saturating conversion of P / 2^scale is the
// encoder's code (Inf -> 448, NaN -> 0x7F).
template <bool P_DYNAMIC, typename Block>
__device__ __forceinline__ void make_p(Block block, int64_t valid, float c, float b, float (&lsum)[PARTIALS],
                                       uint32_t (&codes)[BN / 4], uint32_t *pword)
{
    *pword = P_DYNAMIC ? 0u : P_SCALE_WORD;
#pragma unroll
    for (int kb = 0; kb < BN / 32; kb++) {
        uint32_t w[32];
        block(kb, w);
        float xs[32];
        uint32_t amax = 0;
        bool has_nan = false, has_inf = false;
#pragma unroll
        for (int i = 0; i < 32; i += 2)
            f16x2_to_f32(p_from_exponent2_exact(p_exponent2(__uint_as_float(w[i]), __uint_as_float(w[i + 1]), c, b, b)),
                         xs[i], xs[i + 1]);
#pragma unroll
        for (int i = 0; i < 32; i++)
            xs[i] = 32 * kb + i < valid ? xs[i] : 0.0f;
#pragma unroll
        for (int k = 0; k < PARTIALS; k++) {
            const float lo = round_f16(__fadd_rn(xs[k], xs[k + 8])), hi = round_f16(__fadd_rn(xs[k + 16], xs[k + 24]));
            lsum[k] = __fadd_rn(lsum[k], round_f16(__fadd_rn(lo, hi)));
        }
#pragma unroll
        for (int i = 0; i < 32; i++) {
            const uint32_t a = __float_as_uint(xs[i]) & 0x7FFFFFFFu;
            has_nan |= a > 0x7F800000u, has_inf |= a == 0x7F800000u;
            amax = a <= 0x7F800000u && a > amax ? a : amax;
        }
        float rcp = 1.0f;
        if constexpr (P_DYNAMIC) {
            const block_rule rule = rule_from_amax(fp8_e4m3(), MXFA_PRESET_RCEIL, amax, has_nan, has_inf);
            rcp = e8m0_reciprocal(rule.scale);
            *pword |= rule.scale << (8 * kb);
        }
#pragma unroll
        for (int i = 0; i < 32; i += 2) {
            const uint32_t two = (uint32_t)__nv_cvt_float2_to_fp8x2(
                make_float2(__fmul_rn(xs[i], rcp), __fmul_rn(xs[i + 1], rcp)), __NV_SATFINITE, __NV_E4M3);
            if (i % 4 == 0)
                codes[(32 * kb + i) / 4] = two;
            else
                codes[(32 * kb + i) / 4] |= two << 16;
        }
    }
}

// P's codes into its row of the A operand (128 bytes a row, 128-byte
// swizzle: 16-byte chunk k of the row at chunk k ^ (row % 8)).
__device__ __forceinline__ void store_p(uint8_t *p, int row, const uint32_t (&codes)[BN / 4])
{
    uint4 *prow = reinterpret_cast<uint4 *>(p + row * BN);
#pragma unroll
    for (int k = 0; k < BN / 16; k++)
        prow[k ^ (row % 8)] = make_uint4(codes[4 * k], codes[4 * k + 1], codes[4 * k + 2], codes[4 * k + 3]);
}

// Dynamic P's scale words into tensor memory at column `col`: row r's word
// in column r / 32 of every lane quarter (lane r % 32). A warp can write
// only its own quarter, so the tile's 128 softmax threads exchange the
// words through pw (two halves, alternating by key tile j, so that one
// barrier suffices) at named barrier `bar` (BAR_P_WORDS + the group).
__device__ __forceinline__ void store_p_words(uint32_t col, uint32_t (*pw)[BM], int j, int row, uint32_t pword,
                                              uint32_t bar)
{
    pw[j & 1][row] = pword;
    named_sync(bar, BM);
    const uint32_t w4[4] = {pw[j & 1][row % 32], pw[j & 1][row % 32 + 32], pw[j & 1][row % 32 + 64],
                            pw[j & 1][row % 32 + 96]};
    tmem_st4(col, w4);
    tmem_wait_st();
}

// Const P's scale words (the same for every row) into tensor memory at `col`.
__device__ __forceinline__ void store_p_const_words(uint32_t col)
{
    const uint32_t w4[4] = {P_SCALE_WORD, P_SCALE_WORD, P_SCALE_WORD, P_SCALE_WORD};
    tmem_st4(col, w4);
    tmem_wait_st();
}

// The leak-free mask's diagonal blocks (bits of diag) of P / 256 in bf16,
// from this row's codes in p (store_p's layout, read back so that the
// registers that made them are free by now): 64-byte rows, 16-byte chunk c
// at c ^ (row / 2 % 4). Block bk's scale byte is pword's byte bk (dynamic)
// or 0x7F (const: 2^0, the 2^-8 is in widen_p).
__device__ __forceinline__ void store_p_bf16(uint8_t (*bf)[BM * 64], const uint8_t *p, int row, unsigned diag,
                                             uint32_t pword, bool dynamic)
{
    const uint4 *prow = reinterpret_cast<const uint4 *>(p + row * BN);
    for (int bk = 0; bk < BN / 32; bk++) {
        if (!(diag >> bk & 1u))
            continue;
        const uint32_t ps = dynamic ? pword >> (8 * bk) & 0xFFu : 0x7Fu;
        uint4 *brow = reinterpret_cast<uint4 *>(bf[bk] + row * 64);
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const uint4 q4 = prow[(2 * bk + half) ^ (row % 8)];
            const uint32_t in[4] = {q4.x, q4.y, q4.z, q4.w};
#pragma unroll
            for (int c4 = 0; c4 < 2; c4++) { // 16 bytes of bf16: 8 keys
                uint32_t w[4];
#pragma unroll
                for (int t = 0; t < 4; t++) {
                    const uint32_t two = in[2 * c4 + t / 2] >> (16 * (t % 2));
                    w[t] = widen_p(two & 0xFFu, ps) | widen_p(two >> 8 & 0xFFu, ps) << 16;
                }
                brow[(2 * half + c4) ^ (row / 2 % 4)] = make_uint4(w[0], w[1], w[2], w[3]);
            }
        }
    }
}

// How a row's state moves to a tile's maximum m_new: O and the row sum are
// scaled by alpha = exp2(m - m_new) when the maximum grows, and a row whose
// maximum first becomes finite sets O to +0 instead (the reference's O is +0
// there, having skipped every step before; exp2(-Inf) * NaN would not be).
struct max_step {
    float alpha;
    bool grows, clear;
};

__device__ __forceinline__ max_step step_max(float *m, float m_new)
{
    max_step st;
    st.grows = m_new > *m;
    st.alpha = st.grows ? mx_exp2(__fsub_rn(*m, m_new)) : 1.0f;
    st.clear = st.grows && *m == NEG_INF;
    if (st.grows)
        *m = m_new;
    return st;
}

// The row sum's partials scaled by alpha where the maximum grows, before
// make_p adds the tile's P, as the reference orders it.
__device__ __forceinline__ void scale_sums(float (&lsum)[PARTIALS], const max_step &st)
{
    if (st.grows)
#pragma unroll
        for (int r = 0; r < PARTIALS; r++)
            lsum[r] = __fmul_rn(lsum[r], st.alpha);
}

// l from the partials: mxfa_ref_row_sum's tree, times 2^-8.
__device__ __forceinline__ float row_sum(const float (&lsum)[PARTIALS])
{
    const float lo = __fadd_rn(__fadd_rn(lsum[0], lsum[1]), __fadd_rn(lsum[2], lsum[3]));
    const float hi = __fadd_rn(__fadd_rn(lsum[4], lsum[5]), __fadd_rn(lsum[6], lsum[7]));
    return __fmul_rn(__fadd_rn(lo, hi), 0.00390625f);
}

// O's row (D columns at o) rescaled by max_step; a warp's rows are loaded
// and stored together, and only when one of them grows.
template <int D> __device__ __forceinline__ void rescale_o(uint32_t o, const max_step &st)
{
    if (!__any_sync(0xFFFFFFFFu, st.grows))
        return;
#pragma unroll
    for (int q = 0; q < D / 32; q++) {
        uint32_t v[32];
        tmem_ld32(o + 32 * q, v);
        tmem_wait_ld();
#pragma unroll
        for (int i = 0; i < 32; i++)
            v[i] = st.clear ? 0u : st.grows ? __float_as_uint(__fmul_rn(__uint_as_float(v[i]), st.alpha)) : v[i];
        tmem_st32(o + 32 * q, v);
    }
    tmem_wait_st();
}

// The output of query `token`, head h: O / l and LSE = (m + log2 l) ln 2
// from the row's O at o; a row that saw nothing (l = 0) writes 0 and -Inf
// and does not need its O (a warp none of whose rows does reads nothing).
template <int D>
__device__ __forceinline__ void write_o(uint32_t o, bool mine, float m, float l, int64_t token, int h,
                                       const attn_out &out)
{
    const bool any = l != 0.0f || l != l, load = __any_sync(0xFFFFFFFFu, mine && any);
    for (int q = 0; q < D / 32; q++) {
        uint32_t v[32] = {};
        if (load) {
            tmem_ld32(o + 32 * q, v);
            tmem_wait_ld();
        }
        if (mine)
#pragma unroll
            for (int e = 0; e < 32; e++)
                out.store_o(token, h, 32 * q + e, any ? __fdiv_rn(__uint_as_float(v[e]), l) : 0.0f);
    }
    if (mine && out.lse)
        out.store_lse(token, h, any ? __fmul_rn(__fadd_rn(m, mx_log2(l)), __uint_as_float(0x3F317218u)) : NEG_INF);
}
#endif // MXFA_SM100_CODE

} // namespace
} // namespace mxfa_gpu

#endif
