// SPDX-License-Identifier: BSD-3-Clause
// MXFP8 attention backward composed of GEMM calls, bit for bit the algorithm of
// cpu/ref/attn_bwd.c (docs/NUMERICS.md, "Attention backward") under the
// sm90-fp8 and sm90-bf16 models, for any geometry the library takes, every
// mask, const or dynamic P, jagged batches, GQA. The same composition runs
// under the sm100 model on Blackwell, on its GEMMs (gpu/sm100/gemm_mxf8.cu,
// and gemm_bf16.cu for the bf16 steps): there a skipped step is a fused sum
// of zero products and acc, which is acc (the model never makes -0), and
// the same operands as below make it otherwise. Not yet run on Blackwell
// hardware.
//
// Composed, not fused: each of the five block-scaled products is a call of
// the GEMM of gemm_fp8.cu (gemm_bf16.cu for sm90-bf16), whose results are
// already held bit for bit to the emulator, and the steps between them are
// small elementwise kernels. What makes the composition exact is that every
// accumulation of the reference is one chain along a single axis:
//  - S = Q K^T and dP = dO V^T reduce over D, block by block from zero;
//  - dV = P^T dO and dK = dS^T Q continue each key's accumulator from one
//    query tile to the next, query block after query block: for a key tile,
//    one chain over the query blocks of the tiles the reference visits;
//  - dQ = dS K likewise chains over the key blocks of the visited key tiles.
// A tile the reference skips (causal: no row of the query tile sees the key
// tile) adds nothing to a chain: its P and dS are zero, so its steps are
// fma(+0, 2^(sa + sb), acc) = acc, unless the other operand holds a NaN
// (0 * NaN is NaN) or a value that widens to Inf (sm90-bf16), or acc is -0
// (which such a step makes +0). Without those operands the causal products
// of dV and dK run whole, as unmasked ones (their skipped steps come first,
// while acc is +0), and dQ a query tile at a time up to its last visited
// key tile; with them, dV and dK too a key tile at a time over the visited
// range. Square
// blocks of 32 x 32 of the whole P and dS are the blocks of the reference's
// tiles, whose sides are multiples of 32.
//
// Under the leak-free causal mask the reference takes bf16 operands on each
// query tile's diagonal key blocks (Q and dO widened, K rounded from the
// input, P and dS rounded from fp32) in S, dV, dK and dQ: those entries of S
// come from the bf16 GEMM, the diagonal blocks' fp8 codes are zeroed and
// bf16 copies of P and dS hold those blocks only, and each gradient is a
// bf16 and an fp8 product in the reference's order (or, where a skipped
// step could meet a NaN or an overflow, pieces a tile at a time with the
// accumulator carried from one piece to the next as C).
//
// The scores of one (sequence, head) are materialized in fp32 (S then P,
// dP then dS: 8 bytes a score, 2 more for the codes, 6 more for the
// leak-free mask's bf16 copies), a pass of query tiles at a time where a
// sequence's whole would take more than 256 MiB. dV's and dK's chains run
// on from one pass to the next, the reference's steps in its order (the
// leak-free mask's whole products interleave steps of zeros, exact as
// above), and the memory grows with the sequence (a pass: one query tile
// and every key) rather than with its square. The fused kernels of the
// design (dK and dV resident per key tile, dQ chained in key-tile order:
// gpu/sm100/attn_bwd.cuh on Blackwell, sm90/bwd_bf16.cuh on Hopper under
// sm90-bf16) take the default tiles, on Hopper at D = 64, 128 and 256,
// on Blackwell at D = 64 and 128 without the leak-free mask; the
// composition computes the rest (sm90-fp8, other tiles, and on Blackwell
// D = 256 and the leak-free mask).
#include "exp2.cuh"
#include "sm90/hopper.cuh"
#include "mx.cuh"
#include "nd3.cuh"
namespace mxfa_gpu {
namespace {

using namespace sm90;

// delta[t][h] = sum over d of dO * O, fp32 in increasing d (a product
// rounded, then the sum rounded: the reference's loop). A thread per
// (token, head).
__global__ void bwd_delta(nd3 dout, nd3 o, float *delta, int64_t tokens, int64_t heads)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= tokens * heads)
        return;
    delta[i] = dot3(dout, o, i / heads, i % heads);
}

// The query rows of one pass over a sequence's scores: rows first ..
// first + n - 1 of its lq (first a multiple of the query tile). A score
// matrix [n][lk] holds row first + i at its row i.
struct rows_of {
    int64_t first, n, lq;
};

// S [n][lk] (row stride ld) to P = E(RN_f16(min(fma(S, c, fl(2^-11 - fl(LSE
// log2 e))), 0))) (the f16 exponential, exp2.cuh), 0 where
// the key is masked or the row's LSE is -Inf; with codes, P's E4M3 codes
// under the const scale 2^-8 too (P * 256 rounded to nearest even,
// saturated). lse: the first row's.
// Under the causal mask row i sees the keys up to i + lk - lq (bottom-right
// aligned). Grid x over the columns, y over the rows.
__global__ void bwd_p(float *s, rows_of rows, int64_t lk, int64_t ld, const float *lse, int64_t lse_stride, float c,
                      float log2e, bool causal, uint8_t *codes)
{
    const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= lk)
        return;
    for (int64_t i = blockIdx.y; i < rows.n; i += gridDim.y) {
        const float l = lse[i * lse_stride];
        const bool masked = (causal && j > rows.first + i + lk - rows.lq) || l == -__builtin_huge_valf();
        float p = s[i * ld + j], unused = 0.0f; // P by the f16 exponential's portable exact form
        bwd_p2_exact(p, unused, c, bwd_p_offset(l, log2e), 0.0f);
        p = masked ? 0.0f : p;
        s[i * ld + j] = p;
        if (codes)
            codes[i * ld + j] = (uint8_t)__nv_cvt_float_to_fp8(__fmul_rn(p, 256.0f), __NV_SATFINITE, __NV_E4M3);
    }
}

// dP [lq][lk] in place to dS = P (dP - delta), exactly 0 where P is 0 (the
// reference skips those scores: dP there may be anything, NaN included).
__global__ void bwd_ds(const float *p, float *dp, int64_t lq, int64_t lk, int64_t ld, const float *delta,
                       int64_t delta_stride)
{
    const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= lk)
        return;
    for (int64_t i = blockIdx.y; i < lq; i += gridDim.y) {
        const float pv = p[i * ld + j];
        dp[i * ld + j] = pv == 0.0f ? 0.0f : __fmul_rn(pv, __fsub_rn(dp[i * ld + j], delta[i * delta_stride]));
    }
}

// acc = x * scale (or x) for the group's first head, else acc + that: the
// reference's sum of a GQA group's dK and dV in increasing head order.
__global__ void bwd_group_sum(const float *x, float *acc, int64_t n, float scale, bool scaled, bool first)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const float v = scaled ? __fmul_rn(x[i], scale) : x[i];
    acc[i] = first ? v : __fadd_rn(acc[i], v);
}

// rows x D of fp32 (times scale when scaled) into out's tokens tok0.. of
// head h, as fp32 or bf16 (nearest even). Grid x over D, y over the rows.
__global__ void bwd_store(const float *x, int64_t rows, float scale, bool scaled, nd3 out, int64_t tok0, int64_t h)
{
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= out.n2)
        return;
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const float v = x ? x[r * out.n2 + e] : 0.0f;
        store3(out, tok0 + r, h, e, scaled ? __fmul_rn(v, scale) : v);
    }
}

// *flag = 1 when a code of `codes` is NaN (E4M3 0x7F, 0xFF) or a scale
// byte of `scales` is (0xFF): then a chain step over a skipped tile, 0
// times such an operand, would not leave the accumulator as it was.
// With scale_limit below 0xFF, also a scale at or above it: a code widened
// to bf16 under such a scale may be Inf, and 0 * Inf is NaN too.
__global__ void bwd_any_nan(const uint8_t *codes, int64_t ncodes, const uint8_t *scales, int64_t nscales,
                            uint32_t scale_limit, int *flag)
{
    int found = 0;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < ncodes; i += stride)
        found |= (codes[i] & 0x7F) == 0x7F;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < nscales; i += stride)
        found |= scales[i] >= scale_limit;
    if (__syncthreads_or(found) && threadIdx.x == 0)
        atomicOr(flag, 1);
}

// *flag = 1 when an element of x, rounded to bf16, may not be finite (NaN,
// Inf, or 2^127 and above in magnitude). Grid-stride over the elements.
__global__ void bwd_any_huge(nd3 x, int *flag)
{
    int found = 0;
    const int64_t n = x.n0 * x.n1 * x.n2, stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const uint32_t bits = __float_as_uint(load3(x, i / (x.n1 * x.n2), i / x.n2 % x.n1, i % x.n2));
        found |= ((bits >> 23) & 0xFF) >= 254;
    }
    if (__syncthreads_or(found) && threadIdx.x == 0)
        atomicOr(flag, 1);
}

// The leak-free mask's rule, on the host and the device: key block kb0 of
// the query tile holding row i (tiles of bm rows) is multiplied in bf16
// when the tile's first row sees less than all of it and its last row some
// of it (causal, bottom-right aligned: row i sees keys up to i + lk - lq).
__host__ __device__ __forceinline__ bool diagonal_at(int64_t i, int64_t kb0, int64_t lq, int64_t lk, int64_t bm)
{
    const int64_t r0 = i - i % bm, end = r0 + bm < lq ? r0 + bm : lq;
    const int64_t klast = kb0 + 31 < lk - 1 ? kb0 + 31 : lk - 1;
    return kb0 < lk && r0 + lk - lq < klast && end - 1 + lk - lq >= kb0;
}

// The diagonal blocks' codes to 0 and scales to 2^0 in P or dS [n][lk]
// (their products take bf16 operands instead): a step over them is then an
// exact zero. Grid x over the columns, y over the rows.
__global__ void bwd_mask_diagonal(uint8_t *codes, uint8_t *scales, rows_of rows, int64_t lk, int64_t ld, int64_t nbk,
                                  int64_t bm)
{
    const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= lk)
        return;
    for (int64_t i = blockIdx.y; i < rows.n; i += gridDim.y)
        if (diagonal_at(rows.first + i, j - j % 32, rows.lq, lk, bm)) {
            codes[i * ld + j] = 0;
            if (i % 32 == 0 && j % 32 == 0)
                scales[(i / 32) * nbk + j / 32] = 0x7F;
        }
}

// S [n][lk] takes the entries of t on the diagonal blocks.
__global__ void bwd_take_diagonal(float *s, const float *t, rows_of rows, int64_t lk, int64_t ld, int64_t bm)
{
    const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= lk)
        return;
    for (int64_t i = blockIdx.y; i < rows.n; i += gridDim.y)
        if (diagonal_at(rows.first + i, j - j % 32, rows.lq, lk, bm))
            s[i * ld + j] = t[i * ld + j];
}

// P or dS [n][lk] (row stride ld) to bf16 at nearest even on the
// diagonal blocks (query tiles of bm rows) and +0 elsewhere, rows of
// out_ld. Grid x over the columns, y over the rows.
__global__ void bwd_to_bf16(const float *x, rows_of rows, int64_t cols, int64_t ld, int64_t bm, uint16_t *out,
                            int64_t out_ld)
{
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols)
        return;
    for (int64_t r = blockIdx.y; r < rows.n; r += gridDim.y) {
        const bool dg = diagonal_at(rows.first + r, c - c % 32, rows.lq, cols, bm);
        const uint16_t v = dg ? (uint16_t)f32_to_bf16(__float_as_uint(x[r * ld + c])) : 0;
        out[r * out_ld + c] = v;
    }
}

// The same, transposed, through 32 x 32 tiles in shared memory so that
// both the reads and the writes are coalesced: block (32, 8), grid x over
// the tiles of columns, y over those of rows.
__global__ void bwd_to_bf16_t(const float *x, rows_of rows, int64_t cols, int64_t ld, int64_t bm, uint16_t *out,
                              int64_t out_ld)
{
    __shared__ uint16_t tile[32][33];
    const int64_t c0 = (int64_t)blockIdx.x * 32;
    for (int64_t r0 = (int64_t)blockIdx.y * 32; r0 < rows.n; r0 += (int64_t)gridDim.y * 32) {
        for (int y = (int)threadIdx.y; y < 32; y += 8) {
            const int64_t r = r0 + y, c = c0 + threadIdx.x;
            uint16_t v = 0;
            if (r < rows.n && c < cols && diagonal_at(rows.first + r, c - c % 32, rows.lq, cols, bm))
                v = (uint16_t)f32_to_bf16(__float_as_uint(x[r * ld + c]));
            tile[y][threadIdx.x] = v;
        }
        __syncthreads();
        for (int y = (int)threadIdx.y; y < 32; y += 8) {
            const int64_t c = c0 + y, r = r0 + threadIdx.x;
            if (c < cols && r < rows.n)
                out[c * out_ld + r] = tile[threadIdx.x][y];
        }
        __syncthreads();
    }
}

// K of head h, tokens tok0 .. tok0 + n, rounded to bf16 from the input:
// [n][D] and [D][ldt]. Grid x over D, y over the tokens.
__global__ void bwd_k_bf16(nd3 k, int64_t tok0, int64_t h, int64_t n, uint16_t *rows, uint16_t *cols, int64_t ldt)
{
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= k.n2)
        return;
    for (int64_t j = blockIdx.y; j < n; j += gridDim.y) {
        const uint16_t v = (uint16_t)f32_to_bf16(__float_as_uint(load3(k, tok0 + j, h, e)));
        rows[j * k.n2 + e] = v;
        cols[e * ldt + j] = v;
    }
}

// ---- host side ----

} // namespace

// Q, K or dO quantized in square blocks restarting at every sequence
// (segs), V in row blocks along D, into codes [tokens][H * D] and scales
// [blocks of rows][H * D / 32] (square) or [tokens][H * D / 32] (row): one
// launch when the heads of a token are evenly spaced, else a head at a time.
cudaError_t quantize_heads(const nd3 &x, const mxfa_segment *segs, int nsegs, int64_t block_rows, int preset,
                           int block, uint8_t *codes, uint8_t *scales, cudaStream_t stream)
{
    const int64_t n = x.n0, heads = x.n1, d = x.n2, db = d / 32;
    if (n == 0)
        return cudaSuccess;
    const int64_t es = x.dtype == MXFA_BF16 ? 2 : 4;
    const int64_t srows = block == MXFA_BLOCK_ROW ? n : block_rows;
    if (x.s1 == d * x.s2)
        return launch_quantize(dview{x.base, n, heads * d, x.s0, x.s2, x.dtype}, segs, nsegs, preset, block,
                               dview{codes, n, heads * d, heads * d, 1, MXFA_E4M3},
                               dview{scales, srows, heads * db, heads * db, 1, MXFA_E8M0}, stream);
    cudaError_t e = cudaSuccess;
    for (int64_t h = 0; h < heads && e == cudaSuccess; h++)
        e = launch_quantize(dview{x.base + h * x.s1 * es, n, d, x.s0, x.s2, x.dtype}, segs, nsegs, preset, block,
                            dview{codes + h * d, n, d, heads * d, 1, MXFA_E4M3},
                            dview{scales + h * db, srows, db, heads * db, 1, MXFA_E8M0}, stream);
    return e;
}

namespace {

struct bwd_plan {
    const attn_bwd_args &a;
    cudaStream_t stream;
    int64_t d, db, hq, hkv;
    // buffers
    uint8_t *qc, *qs, *oc, *os, *kc, *ks, *vc, *vs; // codes [tokens][H * D], scales
    float *delta;                                   // [tq][Hq]
    int64_t rows;                                   // query rows a pass (bwd_head)
    float *s, *dp;                                  // scores [rows][lk]
    uint8_t *pc, *ps, *dsc, *dss;                   // P's and dS's codes [rows][lk], square scales
    uint8_t *ea, *eb;                               // operand scales expanded per row for a product
    float *dq, *dk, *dv, *gk, *gv;                  // one head's gradients, a group's sums
    // the leak-free mask's bf16 operands: Q widened [rows][D]; K rounded
    // from the input [lk][D] and [D][ldk]; Q and dO widened [D][ldq]; P^T
    // and dS^T [lk][ldq]; dS [rows][ldk] (ldq, ldk: rows and lk rounded up
    // to 8)
    uint16_t *qw, *kbf, *kbft, *qwt, *owt, *pbft, *dsbft, *dsbf;
    int64_t ldq, ldk;
};

// D = A B^T (+ D when accumulate) under the call's model
cudaError_t gemm(const bwd_plan &pl, const dview &a, const dview &sa, const dview &b, const dview &sb, const dview &d,
                 bool accumulate = false)
{
    const dview *c = accumulate ? &d : nullptr;
    return pl.a.sm100        ? launch_gemm_sm100(a, sa, b, sb, c, d, pl.stream)
           : pl.a.bf16_model ? launch_gemm_sm90_bf16(a, sa, b, sb, c, d, pl.stream)
                             : launch_gemm_sm90_fp8(a, sa, b, sb, c, d, pl.stream);
}

// A product of ready bf16 rows, one chain of the models' bf16 step: Hopper's
// wgmma k16, or Blackwell's tcgen05.mma kind::f16 (the same model row)
cudaError_t gemm_bf16_rows(bool sm100, const uint16_t *a, int64_t a_rs, const uint16_t *b, int64_t b_rs, int64_t M,
                           int64_t N, int64_t K, const dview *c, const dview &d, cudaStream_t stream)
{
    return sm100 ? launch_gemm_sm100_bf16_rows(a, a_rs, b, b_rs, M, N, K, c, d, stream)
                 : launch_gemm_bf16_rows(a, a_rs, b, b_rs, M, N, K, c, d, stream);
}

// One pass of bwd_head: query rows rw.first .. of the sequence's rw.lq.
// Rows of the pass's operands and scores count from rw.first (row r is the
// sequence's rw.first + r); the row ranges below are the sequence's.
cudaError_t bwd_rows(const bwd_plan &pl, const rows_of &rw, int64_t lk, int64_t tq0, int64_t tk0, int64_t qb0,
                     int64_t kb0, int64_t h, bool tiled)
{
    const int64_t lq = rw.lq, lo = rw.first, hi = rw.first + rw.n, n = rw.n;
    const attn_bwd_args &a = pl.a;
    const int64_t d = pl.d, db = pl.db, hq = pl.hq, hkv = pl.hkv, g = h / (hq / hkv);
    const int64_t nbq = (n + 31) / 32, nbk = (lk + 31) / 32, ld = lk;
    const int64_t bm = a.block_m, bn = a.block_n;
    cudaStream_t st = pl.stream;
    cudaError_t e;
    // this head's operands: codes and square scales of rows (tokens)
    // (this pass's rows of Q and dO, and of their scales: lo is a multiple of 32)
    const dview q = {pl.qc + (tq0 + lo) * hq * d + h * d, n, d, hq * d, 1, MXFA_E4M3};
    const dview o = {pl.oc + (tq0 + lo) * hq * d + h * d, n, d, hq * d, 1, MXFA_E4M3};
    const dview k = {pl.kc + tk0 * hkv * d + g * d, lk, d, hkv * d, 1, MXFA_E4M3};
    const dview v = {pl.vc + tk0 * hkv * d + g * d, lk, d, hkv * d, 1, MXFA_E4M3};
    const dview qs = {pl.qs + (qb0 + lo / 32) * hq * db + h * db, nbq, db, hq * db, 1, MXFA_E8M0};
    const dview os = {pl.os + (qb0 + lo / 32) * hq * db + h * db, nbq, db, hq * db, 1, MXFA_E8M0};
    const dview ks = {pl.ks + kb0 * hkv * db + g * db, nbk, db, hkv * db, 1, MXFA_E8M0};
    const dview vs = {pl.vs + tk0 * hkv * db + g * db, lk, db, hkv * db, 1, MXFA_E8M0};
    auto transposed = [](dview x) { return dview{x.base, x.cols, x.rows, x.cs, x.rs, x.dtype}; };
    // a square scale matrix read per row of an operand: element (r, c) of
    // the result is src (r / 32, c)
    auto expand = [&](const dview &src, int64_t rows, uint8_t *dst, dview *out) {
        *out = dview{dst, rows, src.cols, src.cols, 1, MXFA_E8M0};
        return launch_expand(src, 32, 1, *out, st);
    };
    const dview sv = {reinterpret_cast<uint8_t *>(pl.s), n, lk, ld, 1, MXFA_F32};
    const dview dpv = {reinterpret_cast<uint8_t *>(pl.dp), n, lk, ld, 1, MXFA_F32};
    const dview pcv = {pl.pc, n, lk, ld, 1, MXFA_E4M3}, psv = {pl.ps, nbq, nbk, nbk, 1, MXFA_E8M0};
    const dview dcv = {pl.dsc, n, lk, ld, 1, MXFA_E4M3}, dsv = {pl.dss, nbq, nbk, nbk, 1, MXFA_E8M0};
    dview ea, eb;

    const bool leak = a.leak_free;
    const int64_t ldq = pl.ldq, ldk = pl.ldk;
    // the key limit of row i (the last key it sees); the end of the query
    // tile at r0; the reference visits key tile c0 for query tile r0 when
    // c0 <= the limit of the tile's last row
    auto limit = [&](int64_t i) { return a.causal ? i + lk - lq : lk - 1; };
    auto tile_end = [&](int64_t r0) { return r0 + bm < lq ? r0 + bm : lq; };
    auto tile_limit = [&](int64_t r0) { return limit(tile_end(r0) - 1); };
    auto diagonal = [&](int64_t r0, int64_t kb0) { return leak && diagonal_at(r0, kb0, lq, lk, bm); };
    // the diagonal keys of query tile r0, [*k0, *k1) (contiguous: the two
    // conditions are monotone in the key); false when there are none
    auto diagonal_keys = [&](int64_t r0, int64_t *k0, int64_t *k1) {
        bool any = false;
        for (int64_t kb = 0; kb < lk; kb += 32)
            if (diagonal(r0, kb)) {
                *k0 = any ? *k0 : kb;
                *k1 = kb + 32 < lk ? kb + 32 : lk;
                any = true;
            }
        return any;
    };
    auto slice = [](const dview &x, int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
        return dview{x.base + (r0 * x.rs + c0 * x.cs) * esize(x.dtype), nr, nc, x.rs, x.cs, x.dtype};
    };
    const dim3 grid(blocks_for(lk, 256), rows_for(n)), tgrid(blocks_for(lk, 32), rows_for((n + 31) / 32));

    // S = Q K^T (leak-free: the diagonal blocks again, from bf16 operands:
    // Q widened, K rounded from the input); P
    if ((e = expand(qs, n, pl.ea, &ea)) != cudaSuccess || (e = expand(ks, lk, pl.eb, &eb)) != cudaSuccess ||
        (e = gemm(pl, q, ea, k, eb, sv)) != cudaSuccess)
        return e;
    if (leak) {
        if ((e = launch_widen(q, ea, pl.qw, d, st)) != cudaSuccess)
            return e;
        // (K rounded to bf16, kbf and kbft, is made once a KV head by the caller)
        // the whole of Q K^T in bf16 into dP's buffer (not yet in use),
        // its diagonal blocks into S
        if ((e = gemm_bf16_rows(pl.a.sm100, pl.qw, d, pl.kbf, d, n, lk, d, nullptr, dpv, st)) != cudaSuccess)
            return e;
        bwd_take_diagonal<<<grid, 256, 0, st>>>(pl.s, pl.dp, rw, lk, ld, bm);
        if ((e = cudaGetLastError()) != cudaSuccess)
            return e;
    }
    bwd_p<<<grid, 256, 0, st>>>(pl.s, rw, lk, ld, a.lse + (tq0 + lo) * a.ls0 + h * a.ls1, a.ls0, a.c, a.log2e, a.causal,
                                a.p_dynamic ? nullptr : pl.pc);
    if ((e = cudaGetLastError()) != cudaSuccess)
        return e;
    const mxfa_segment whole = {0, n, 0};
    if (a.p_dynamic)
        e = launch_quantize(sv, &whole, 1, MXFA_PRESET_RCEIL, MXFA_BLOCK_SQUARE, pcv, psv, st);
    else
        e = cudaMemsetAsync(pl.ps, 0x77, (size_t)(nbq * nbk), st);
    if (e != cudaSuccess)
        return e;
    if (leak) { // P^T in bf16, from P in fp32 (not from its codes), on the diagonal; its codes off it
        bwd_mask_diagonal<<<grid, 256, 0, st>>>(pl.pc, pl.ps, rw, lk, ld, nbk, bm);
        bwd_to_bf16_t<<<tgrid, dim3(32, 8), 0, st>>>(pl.s, rw, lk, ld, bm, pl.pbft, ldq);
        if ((e = cudaGetLastError()) != cudaSuccess)
            return e;
    }

    // dP = dO V^T (fp8 everywhere, also on the diagonal); dS, quantized
    // with the call's preset (leak-free: also in bf16, as is and transposed)
    if ((e = expand(os, n, pl.ea, &ea)) != cudaSuccess || (e = gemm(pl, o, ea, v, vs, dpv)) != cudaSuccess)
        return e;
    bwd_ds<<<grid, 256, 0, st>>>(pl.s, pl.dp, n, lk, ld, pl.delta + (tq0 + lo) * hq + h, hq);
    if ((e = cudaGetLastError()) != cudaSuccess ||
        (e = launch_quantize(dpv, &whole, 1, a.preset, MXFA_BLOCK_SQUARE, dcv, dsv, st)) != cudaSuccess)
        return e;
    if (leak) {
        bwd_mask_diagonal<<<grid, 256, 0, st>>>(pl.dsc, pl.dss, rw, lk, ld, nbk, bm);
        bwd_to_bf16_t<<<tgrid, dim3(32, 8), 0, st>>>(pl.dp, rw, lk, ld, bm, pl.dsbft, ldq);
        bwd_to_bf16<<<grid, 256, 0, st>>>(pl.dp, rw, lk, ld, bm, pl.dsbf, ldk);
        if ((e = cudaGetLastError()) != cudaSuccess)
            return e;
    }

    // The chains of dV, dK and dQ run whole when every step the reference
    // does not take is an exact no-op (no mask; causal without NaN or
    // overflowing operands), else tile by tile over the visited range, a
    // piece per run of key blocks that share their fp8 and bf16 steps.
    // Whole under the leak-free mask: two products, each over the whole
    // range, one of P or dS in bf16 on the diagonal blocks (zero elsewhere),
    // one of their codes off them (the diagonal blocks' codes zero), in the
    // reference's order: bf16 before fp8 for dV and dK (the diagonal query
    // tiles come before the ones that see a key block whole), fp8 before
    // bf16 for dQ.
    const bool by_tile = tiled;

    // dV = P^T dO and dK = dS^T Q: per key tile, over the visited query
    // tiles; a key block's diagonal query tiles take bf16 steps
    for (int pass = 0; pass < 2; pass++) {
        const dview &ac = pass == 0 ? pcv : dcv, &as = pass == 0 ? psv : dsv, &bc = pass == 0 ? o : q,
                    &bs = pass == 0 ? os : qs;
        const uint16_t *abf = pass == 0 ? pl.pbft : pl.dsbft;
        uint16_t *bbf = pass == 0 ? pl.owt : pl.qwt;
        float *out = pass == 0 ? pl.dv : pl.dk;
        if ((e = expand(transposed(as), lk, pl.ea, &ea)) != cudaSuccess ||
            (e = expand(transposed(bs), d, pl.eb, &eb)) != cudaSuccess)
            return e;
        if (leak && (e = launch_widen(transposed(bc), eb, bbf, ldq, st)) != cudaSuccess)
            return e;
        if (leak && !tiled) { // (a later pass: both products on from the chains so far)
            const dview dd = {reinterpret_cast<uint8_t *>(out), lk, d, d, 1, MXFA_F32};
            if ((e = gemm_bf16_rows(pl.a.sm100, abf, ldq, bbf, ldq, lk, d, n, lo > 0 ? &dd : nullptr, dd, st)) !=
                    cudaSuccess ||
                (e = gemm(pl, transposed(ac), ea, transposed(bc), eb, dd, true)) != cudaSuccess)
                return e;
            continue;
        }
        const int64_t step = by_tile ? bn : lk;
        for (int64_t c0 = 0; c0 < lk; c0 += step) {
            const int64_t nk = lk - c0 < step ? lk - c0 : step;
            int64_t r_first = 0;
            while (by_tile && r_first < lq && tile_limit(r_first) < c0)
                r_first += bm;
            if (r_first >= lq) { // no query tile sees these keys
                if (lo == 0 && (e = cudaMemsetAsync(out + c0 * d, 0, (size_t)(nk * d) * 4, st)) != cudaSuccess)
                    return e;
                continue;
            }
            // this pass's part of the visited rows: [from, hi); the chains
            // start here when the first visited tile is this pass's
            const int64_t from = r_first > lo ? r_first : lo;
            if (from >= hi)
                continue;
            // the diagonal query tiles of key block kb0, [*x0, *x1)
            auto diagonal_rows = [&](int64_t kb0, int64_t *x0, int64_t *x1) {
                bool any = false;
                for (int64_t r0 = r_first; r0 < lq; r0 += bm)
                    if (diagonal(r0, kb0)) {
                        *x0 = any ? *x0 : r0;
                        *x1 = tile_end(r0);
                        any = true;
                    }
                return any;
            };
            for (int64_t g0 = c0; g0 < c0 + nk;) {
                int64_t x0 = 0, x1 = 0, y0 = 0, y1 = 0, g1 = g0 + 32;
                const bool dg = diagonal_rows(g0, &x0, &x1);
                while (g1 < c0 + nk && diagonal_rows(g1, &y0, &y1) == dg && (!dg || (y0 == x0 && y1 == x1)))
                    g1 += 32;
                g1 = g1 < c0 + nk ? g1 : c0 + nk;
                const int64_t ng = g1 - g0;
                const dview dd = {reinterpret_cast<uint8_t *>(out + g0 * d), ng, d, d, 1, MXFA_F32};
                bool first = r_first >= lo;
                // the sequence's query rows [q0, q1) within [from, hi), as
                // rows of this pass
                auto fp8 = [&](int64_t q0, int64_t q1) {
                    q0 = q0 > from ? q0 : from, q1 = q1 < hi ? q1 : hi;
                    if (q1 <= q0)
                        return cudaSuccess;
                    const int64_t r = q0 - lo, qb = r / 32, nb = (q1 - q0 + 31) / 32;
                    const bool acc = !first;
                    first = false;
                    return gemm(pl, slice(transposed(ac), g0, ng, r, q1 - q0), slice(ea, g0, ng, qb, nb),
                                slice(transposed(bc), 0, d, r, q1 - q0), slice(eb, 0, d, qb, nb), dd, acc);
                };
                auto bf16 = [&](int64_t q0, int64_t q1) {
                    q0 = q0 > from ? q0 : from, q1 = q1 < hi ? q1 : hi;
                    if (q1 <= q0)
                        return cudaSuccess;
                    const bool acc = !first;
                    first = false;
                    return gemm_bf16_rows(pl.a.sm100, abf + g0 * ldq + (q0 - lo), ldq, bbf + (q0 - lo), ldq, ng, d,
                                          q1 - q0, acc ? &dd : nullptr, dd, st);
                };
                if (dg) {
                    if ((e = fp8(r_first, x0)) != cudaSuccess || (e = bf16(x0, x1)) != cudaSuccess ||
                        (e = fp8(x1, lq)) != cudaSuccess)
                        return e;
                } else if ((e = fp8(r_first, lq)) != cudaSuccess) {
                    return e;
                }
                g0 = g1;
            }
        }
    }

    // dQ = dS K: per query tile, over the visited key tiles; the diagonal
    // key blocks take bf16 steps
    if ((e = expand(dsv, n, pl.ea, &ea)) != cudaSuccess || (e = expand(transposed(ks), d, pl.eb, &eb)) != cudaSuccess)
        return e;
    if (leak && !tiled) {
        const dview dd = {reinterpret_cast<uint8_t *>(pl.dq + lo * d), n, d, d, 1, MXFA_F32};
        if ((e = gemm(pl, dcv, ea, transposed(k), eb, dd)) != cudaSuccess)
            return e;
        return gemm_bf16_rows(pl.a.sm100, pl.dsbf, ldk, pl.kbft, ldk, n, d, lk, &dd, dd, st);
    }
    // Under the causal mask dQ always ends at the query tile's last visited
    // key tile: a skipped step after the visited ones would turn an
    // accumulator of -0 (a negative product lost to underflow) into +0,
    // fma(+0, s, -0) being +0. (dV and dK meet their skipped steps first,
    // while the accumulator is still +0.)
    const bool dq_by_tile = by_tile || a.causal;
    const int64_t step = dq_by_tile ? bm : n;
    for (int64_t r0 = lo; r0 < hi; r0 += step) {
        const int64_t nr = hi - r0 < step ? hi - r0 : step;
        int64_t kend = lk;
        if (dq_by_tile) {
            const int64_t lim = tile_limit(r0);
            kend = lim < 0 ? 0 : (lim / bn + 1) * bn;
            kend = kend < lk ? kend : lk;
        }
        if (kend == 0) {
            if ((e = cudaMemsetAsync(pl.dq + r0 * d, 0, (size_t)(nr * d) * 4, st)) != cudaSuccess)
                return e;
            continue;
        }
        const dview dd = {reinterpret_cast<uint8_t *>(pl.dq + r0 * d), nr, d, d, 1, MXFA_F32};
        bool first = true;
        auto fp8 = [&](int64_t k0, int64_t k1) {
            if (k1 <= k0)
                return cudaSuccess;
            const int64_t kb = k0 / 32, nb = (k1 - k0 + 31) / 32;
            const bool acc = !first;
            first = false;
            return gemm(pl, slice(dcv, r0 - lo, nr, k0, k1 - k0), slice(ea, r0 - lo, nr, kb, nb),
                        slice(transposed(k), 0, d, k0, k1 - k0), slice(eb, 0, d, kb, nb), dd, acc);
        };
        int64_t k0 = 0, k1 = 0;
        if (leak && diagonal_keys(r0, &k0, &k1)) {
            if ((e = fp8(0, k0)) != cudaSuccess)
                return e;
            const bool acc = !first;
            first = false;
            if ((e = gemm_bf16_rows(pl.a.sm100, pl.dsbf + (r0 - lo) * ldk + k0, ldk, pl.kbft + k0, ldk, nr, d, k1 - k0,
                                           acc ? &dd : nullptr, dd, st)) != cudaSuccess ||
                (e = fp8(k1, kend)) != cudaSuccess)
                return e;
        } else if ((e = fp8(0, kend)) != cudaSuccess) {
            return e;
        }
    }
    return cudaSuccess;
}

// The gradients of query head h for sequence b (its first tokens tq0 and
// tk0, block rows qb0 and kb0 of the square scales) into pl.dq, dk, dv, a
// pass over pl.rows query rows at a time (the scores of those rows and
// every key). A pass adds its query tiles to the chains of dV and dK, each
// key's accumulator carried from the pass before as C: the reference's
// order. dQ's chains, over the keys, lie within a pass.
// tiled: the causal chains run a tile at a time over the visited range.
cudaError_t bwd_head(const bwd_plan &pl, int64_t lq, int64_t lk, int64_t tq0, int64_t tk0, int64_t qb0, int64_t kb0,
                     int64_t h, bool tiled)
{
    for (int64_t first = 0; first < lq; first += pl.rows) {
        const rows_of rw = {first, lq - first < pl.rows ? lq - first : pl.rows, lq};
        const cudaError_t e = bwd_rows(pl, rw, lk, tq0, tk0, qb0, kb0, h, tiled);
        if (e != cudaSuccess)
            return e;
    }
    return cudaSuccess;
}

} // namespace

cudaError_t launch_attn_bwd_composed(const attn_bwd_args &a, cudaStream_t stream)
{
    const int64_t tq = a.q.n0, tk = a.k.n0, hq = a.q.n1, hkv = a.k.n1, d = a.q.n2, db = d / 32;
    const int batch = a.batch;
    // square scales: each sequence's 32-row blocks from its first token
    mxfa_segment *qsegs = static_cast<mxfa_segment *>(malloc(sizeof(mxfa_segment) * (size_t)batch * 2));
    if (!qsegs)
        return cudaErrorMemoryAllocation;
    mxfa_segment *ksegs = qsegs + batch;
    int64_t qblocks = 0, kblocks = 0, max_lq = 0, max_lk = 0, max_pair = 0;
    for (int b = 0; b < batch; b++) {
        const int64_t lq = (int64_t)a.cu_q[b + 1] - a.cu_q[b], lk = (int64_t)a.cu_k[b + 1] - a.cu_k[b];
        qsegs[b] = {a.cu_q[b], lq, qblocks};
        ksegs[b] = {a.cu_k[b], lk, kblocks};
        qblocks += (lq + 31) / 32, kblocks += (lk + 31) / 32;
        max_lq = lq > max_lq ? lq : max_lq, max_lk = lk > max_lk ? lk : max_lk;
        max_pair = lq * lk > max_pair ? lq * lk : max_pair;
    }
    // A pass of bwd_head takes the scores of `rows` query rows and every
    // key of a sequence, 10 bytes each (16 under the leak-free mask): all
    // of a sequence's rows where SCORE_BYTES holds them, else as many query
    // tiles as it holds (one at least), so that the memory grows with the
    // sequence, not with its square. MXFA_BWD_PASS_TILES=n takes n tiles a
    // pass (the tests: many passes on small cases).
    constexpr int64_t SCORE_BYTES = (int64_t)256 << 20;
    const int64_t per_score = a.leak_free ? 16 : 10, bm = a.block_m;
    int64_t rows = max_lq;
    if (max_pair > SCORE_BYTES / per_score) {
        const int64_t tiles = SCORE_BYTES / per_score / (max_lk > 0 ? max_lk : 1) / bm;
        rows = (tiles > 1 ? tiles : 1) * bm;
    }
    if (const char *env = getenv("MXFA_BWD_PASS_TILES")) {
        const long tiles = strtol(env, nullptr, 10);
        if (tiles > 0 && tiles < INT32_MAX / bm)
            rows = tiles * bm;
    }
    rows = rows < max_lq ? rows : max_lq;
    if (rows * max_lk > ((int64_t)1 << 38)) {
        free(qsegs);
        return cudaErrorMemoryAllocation;
    }
    const int64_t mq = (rows + 31) / 32, mk = (max_lk + 31) / 32;
    auto max3 = [](int64_t x, int64_t y, int64_t z) { return x > y ? (x > z ? x : z) : (y > z ? y : z); };
    // the scales expanded per row: A's of S and dP (rows x D / 32), of dV and
    // dK (lk x query blocks) and of dQ (rows x key blocks); B's of S (lk x
    // D / 32), of dV and dK (D x query blocks) and of dQ (D x key blocks)
    const size_t expanded_a = (size_t)max3(rows * db, max_lk * mq, rows * mk);
    const size_t expanded_b = (size_t)max3(max_lk * db, d * mq, d * mk);
    auto piece = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
    // scratch, one allocation cut in 256-byte aligned pieces: the operands
    // of the whole call, then per worker the scores and gradients of one
    // (sequence, query head)
    const size_t shared_sizes[] = {(size_t)(tq * hq * d),     (size_t)(qblocks * hq * db), (size_t)(tq * hq * d),
                                   (size_t)(qblocks * hq * db), (size_t)(tk * hkv * d),    (size_t)(kblocks * hkv * db),
                                   (size_t)(tk * hkv * d),    (size_t)(tk * hkv * db),     (size_t)(tq * hq) * 4,
                                   sizeof(int)};
    const int64_t ldq = round_up(rows, 8), ldk = round_up(max_lk, 8); // bf16 rows 16-byte aligned
    // [rows][lk] of a pass (one pass a sequence: its lq x lk, the largest)
    const size_t scores = (size_t)(rows == max_lq ? max_pair : rows * max_lk);
    const size_t worker_sizes[] = {scores * 4,
                                   scores * 4,
                                   scores,
                                   (size_t)(mq * mk),
                                   scores,
                                   (size_t)(mq * mk),
                                   expanded_a,
                                   expanded_b,
                                   (size_t)(max_lq * d) * 4,
                                   (size_t)(max_lk * d) * 4,
                                   (size_t)(max_lk * d) * 4,
                                   (size_t)(max_lk * d) * 4,
                                   (size_t)(max_lk * d) * 4,
                                   // the leak-free mask's bf16 operands
                                   a.leak_free ? (size_t)(rows * d) * 2 : 0,
                                   a.leak_free ? (size_t)(max_lk * d) * 2 : 0,
                                   a.leak_free ? (size_t)(d * ldk) * 2 : 0,
                                   a.leak_free ? (size_t)(d * ldq) * 2 : 0,
                                   a.leak_free ? (size_t)(d * ldq) * 2 : 0,
                                   a.leak_free ? (size_t)(max_lk * ldq) * 2 : 0,
                                   a.leak_free ? (size_t)(max_lk * ldq) * 2 : 0,
                                   a.leak_free ? (size_t)(rows * ldk) * 2 : 0};
    constexpr int NSHARED = sizeof shared_sizes / sizeof shared_sizes[0];
    constexpr int NWORKER = sizeof worker_sizes / sizeof worker_sizes[0];
    size_t shared_at[NSHARED], worker_at[NWORKER], shared_total = 0, worker_total = 0;
    for (int i = 0; i < NSHARED; i++)
        shared_at[i] = shared_total, shared_total += piece(shared_sizes[i]);
    for (int i = 0; i < NWORKER; i++)
        worker_at[i] = worker_total, worker_total += piece(worker_sizes[i]);
    // Workers: the (sequence, KV head) units go round-robin to up to
    // MAX_WORKERS streams, so that the products of one head, most of them
    // too small to fill the GPU (N = D), run beside another's; a unit's
    // query heads stay in order on one stream (the GQA sums). As many as
    // half the free memory holds, one at least.
    constexpr int MAX_WORKERS = 4;
    const int64_t units = (int64_t)batch * hkv;
    int workers = units < MAX_WORKERS ? (int)units : MAX_WORKERS;
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess)
        while (workers > 1 && shared_total + workers * worker_total > free_bytes / 2)
            workers--;
    workers = workers < 1 ? 1 : workers;

    scratch mem(stream);
    uint8_t *base = nullptr;
    cudaError_t e = mem.get(&base, shared_total + (size_t)workers * worker_total);
    if (e != cudaSuccess) {
        free(qsegs);
        return e;
    }
    bwd_plan pl = {a, stream, d, db, hq, hkv};
    pl.qc = base + shared_at[0], pl.qs = base + shared_at[1], pl.oc = base + shared_at[2], pl.os = base + shared_at[3];
    pl.kc = base + shared_at[4], pl.ks = base + shared_at[5], pl.vc = base + shared_at[6], pl.vs = base + shared_at[7];
    pl.delta = reinterpret_cast<float *>(base + shared_at[8]);
    int *flag = reinterpret_cast<int *>(base + shared_at[9]);

    // preprocess: Q, K and dO in square blocks, V in row blocks; delta
    if ((e = quantize_heads(a.q, qsegs, batch, qblocks, a.preset, MXFA_BLOCK_SQUARE, pl.qc, pl.qs, stream)) ==
            cudaSuccess &&
        (e = quantize_heads(a.dout, qsegs, batch, qblocks, a.preset, MXFA_BLOCK_SQUARE, pl.oc, pl.os, stream)) ==
            cudaSuccess &&
        (e = quantize_heads(a.k, ksegs, batch, kblocks, a.preset, MXFA_BLOCK_SQUARE, pl.kc, pl.ks, stream)) ==
            cudaSuccess)
        e = quantize_heads(a.v, ksegs, batch, tk, a.preset, MXFA_BLOCK_ROW, pl.vc, pl.vs, stream);
    if (e == cudaSuccess && tq > 0) {
        bwd_delta<<<blocks_for(tq * hq, 256), 256, 0, stream>>>(a.dout, a.o, pl.delta, tq, hq);
        e = cudaGetLastError();
    }

    // Under the causal mask the chains may run over the whole range, as
    // without a mask, when every step over a skipped tile is exact: there
    // P^T and dS (A) are zero codes under finite scales, so the partial is
    // +-0 and fma(0, 2^(sa + sb), acc) is acc, unless B (dO and Q for dV
    // and dK, K for dQ) holds a NaN code or scale. Then, a tile at a time.
    // The leak-free mask's bf16 products over the whole range multiply
    // zeros by Q and dO widened and K rounded, which must then be finite.
    bool tiled = false;
    if (e == cudaSuccess && a.causal) {
        int host_flag = 0;
        if ((e = cudaMemsetAsync(flag, 0, sizeof(int), stream)) == cudaSuccess) {
            // Q and dO are widened to bf16 under the leak-free mask and under
            // sm90-bf16, K under sm90-bf16 (the leak-free mask rounds K from
            // the input instead): a scale below 0xF0 keeps every widened code
            // finite (448 * 2^(0xEF - 127) < 2^127)
            const uint32_t qo_limit = a.leak_free || a.bf16_model ? 0xF0u : 0xFFu;
            const uint32_t k_limit = a.bf16_model ? 0xF0u : 0xFFu;
            bwd_any_nan<<<1024, 256, 0, stream>>>(pl.qc, tq * hq * d, pl.qs, qblocks * hq * db, qo_limit, flag);
            bwd_any_nan<<<1024, 256, 0, stream>>>(pl.oc, tq * hq * d, pl.os, qblocks * hq * db, qo_limit, flag);
            bwd_any_nan<<<1024, 256, 0, stream>>>(pl.kc, tk * hkv * d, pl.ks, kblocks * hkv * db, k_limit, flag);
            if (a.leak_free)
                bwd_any_huge<<<1024, 256, 0, stream>>>(a.k, flag);
            if ((e = cudaGetLastError()) == cudaSuccess &&
                (e = cudaMemcpyAsync(&host_flag, flag, sizeof(int), cudaMemcpyDeviceToHost, stream)) == cudaSuccess)
                e = cudaStreamSynchronize(stream);
        }
        tiled = host_flag != 0;
    }

    // the workers' streams start after the preprocessing (an event on the
    // call's stream), and the call's stream waits for all of them before
    // anything after it, the release of the scratch included
    cudaStream_t ws[MAX_WORKERS] = {};
    cudaEvent_t ready = nullptr, done[MAX_WORKERS] = {};
    bwd_plan wp[MAX_WORKERS] = {pl, pl, pl, pl};
    int started = 0;
    if (e == cudaSuccess && (e = cudaEventCreateWithFlags(&ready, cudaEventDisableTiming)) == cudaSuccess)
        e = cudaEventRecord(ready, stream);
    for (; started < workers && e == cudaSuccess; started++) {
        uint8_t *w = base + shared_total + (size_t)started * worker_total;
        bwd_plan &q = wp[started];
        if (workers > 1) {
            if ((e = cudaStreamCreateWithFlags(&ws[started], cudaStreamNonBlocking)) != cudaSuccess)
                break;
            if ((e = cudaEventCreateWithFlags(&done[started], cudaEventDisableTiming)) != cudaSuccess ||
                (e = cudaStreamWaitEvent(ws[started], ready, 0)) != cudaSuccess) {
                started++; // its stream exists: destroyed below
                break;
            }
            q.stream = ws[started];
        }
        q.s = reinterpret_cast<float *>(w + worker_at[0]), q.dp = reinterpret_cast<float *>(w + worker_at[1]);
        q.pc = w + worker_at[2], q.ps = w + worker_at[3], q.dsc = w + worker_at[4], q.dss = w + worker_at[5];
        q.ea = w + worker_at[6], q.eb = w + worker_at[7];
        q.dq = reinterpret_cast<float *>(w + worker_at[8]), q.dk = reinterpret_cast<float *>(w + worker_at[9]);
        q.dv = reinterpret_cast<float *>(w + worker_at[10]), q.gk = reinterpret_cast<float *>(w + worker_at[11]);
        q.gv = reinterpret_cast<float *>(w + worker_at[12]);
        uint16_t *bf[8];
        for (int i = 0; i < 8; i++)
            bf[i] = reinterpret_cast<uint16_t *>(w + worker_at[13 + i]);
        q.qw = bf[0], q.kbf = bf[1], q.kbft = bf[2], q.qwt = bf[3], q.owt = bf[4], q.pbft = bf[5], q.dsbft = bf[6];
        q.dsbf = bf[7], q.ldq = ldq, q.ldk = ldk, q.rows = rows;
    }

    const int64_t group = hq / hkv;
    for (int64_t u = 0; u < units && e == cudaSuccess; u++) {
        const int b = (int)(u / hkv);
        const int64_t g = u % hkv;
        const bwd_plan &q = wp[u % workers];
        cudaStream_t st = q.stream;
        const int64_t lq = qsegs[b].count, lk = ksegs[b].count, tq0 = a.cu_q[b], tk0 = a.cu_k[b];
        if (a.leak_free && lq > 0 && lk > 0) { // K rounded to bf16, shared by the group's query heads
            bwd_k_bf16<<<dim3(blocks_for(d, 128), rows_for(lk)), 128, 0, st>>>(a.k, tk0, g, lk, q.kbf, q.kbft, q.ldk);
            e = cudaGetLastError();
        }
        for (int64_t h = g * group; h < (g + 1) * group && e == cudaSuccess; h++) {
            const dim3 sgrid(blocks_for(d, 128), rows_for(lq));
            if (lq == 0 || lk == 0) { // no pairs: dQ of these queries is zero
                if (lq > 0)
                    bwd_store<<<sgrid, 128, 0, st>>>(nullptr, lq, 1.0f, false, a.dq, tq0, h);
                e = cudaGetLastError();
                continue;
            }
            if ((e = bwd_head(q, lq, lk, tq0, tk0, qsegs[b].dst, ksegs[b].dst, h, tiled)) != cudaSuccess)
                break;
            bwd_store<<<sgrid, 128, 0, st>>>(q.dq, lq, a.softmax_scale, true, a.dq, tq0, h);
            const unsigned n = blocks_for(lk * d, 256);
            bwd_group_sum<<<n, 256, 0, st>>>(q.dk, q.gk, lk * d, a.softmax_scale, true, h == g * group);
            bwd_group_sum<<<n, 256, 0, st>>>(q.dv, q.gv, lk * d, 1.0f, false, h == g * group);
            e = cudaGetLastError();
        }
        if (e != cudaSuccess || lk == 0)
            continue;
        const dim3 kgrid(blocks_for(d, 128), rows_for(lk));
        const bool none = lq == 0; // no query: zero dK and dV
        bwd_store<<<kgrid, 128, 0, st>>>(none ? nullptr : q.gk, lk, 1.0f, false, a.dk, tk0, g);
        bwd_store<<<kgrid, 128, 0, st>>>(none ? nullptr : q.gv, lk, 1.0f, false, a.dv, tk0, g);
        e = cudaGetLastError();
    }
    // the join, also after an error (the scratch is freed on the call's stream)
    for (int i = 0; i < started; i++) {
        if (!ws[i])
            continue;
        cudaError_t j = done[i] ? cudaEventRecord(done[i], ws[i]) : cudaErrorInvalidValue;
        if (j == cudaSuccess)
            j = cudaStreamWaitEvent(stream, done[i], 0);
        if (j != cudaSuccess) // the call's stream cannot wait for it: wait here
            cudaStreamSynchronize(ws[i]);
        e = e == cudaSuccess ? j : e;
        cudaStreamDestroy(ws[i]);
        if (done[i])
            cudaEventDestroy(done[i]);
    }
    if (ready)
        cudaEventDestroy(ready);
    free(qsegs);
    return e;
}

} // namespace mxfa_gpu
