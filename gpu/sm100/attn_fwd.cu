// MXFP8 attention forward under the sm100 model on a Blackwell GPU, bit for
// bit the algorithm of cpu/ref/attn_fwd.c (SPEC section 6), with its
// geometry of 128-row query tiles and 128-key tiles. This first kernel
// takes D = 64, 128 and 256, no mask, the plain causal mask or the leak-free
// one (whose diagonal blocks take P / 256 and V in bf16, kind::f16 k16
// steps on the same accumulator), and const P; the backend refuses dynamic P.
//
// Before the kernel, Q and K are quantized along D (row blocks) and V along
// the keys (col blocks restarting at every sequence) by the backend's
// quantization kernels. They are then packed so that every sequence starts
// on a 128-row boundary of its head's rows, with zeros between:
// - Q and K codes become [heads][rows][D] (D = 256 in two 128-byte panels,
//   each a copy of its own; D = 64 in 64-byte swizzle);
// - V is transposed to [heads][D][keys];
// - every tile's scales become 512-byte atoms of the swizzled layout (128
//   rows x 4 blocks each), which is what tcgen05.cp copies into tensor
//   memory.
//
// The kernel runs one CTA per (query tile, query head), with six warps:
// - Warp 4 streams the tiles through the tensor-memory accelerator: Q once,
//   then K and V^T a key tile at a time through two stages each (one at
//   D = 256 with the leak-free mask, for room).
// - Warp 5 allocates tensor memory and issues the MMAs. For each key tile:
//   - S = Q K^T, D / 32 block-scaled instructions along D, from zero;
//   - after the softmax has made P, O += P V^T, four instructions along
//     the keys.
//
//   Both products accumulate in tensor memory, one instruction per 32-block,
//   which is the model's chain. P's scale (the const byte 0x77, 2^-8) is
//   written into tensor memory once.
// - Warps 0-3 own one query row per thread (the lane of tensor memory that
//   holds it). For each tile a thread:
//   - reads its row of S;
//   - makes the running maximum in key order, as the reference does;
//   - rescales its row of O once the last P V has finished;
//   - makes P with the library's exp2 and adds it into l in key order;
//   - writes P's E4M3 codes into shared memory as the A operand.
//
//   At the end they divide O by l and write O and LSE.
//
// Rows that have seen no key yet keep O = +0 in the reference, which skips
// their P V steps. Here those steps run with P = 0, and that is an exact
// no-op unless V holds a NaN. So a row whose maximum first becomes finite
// sets O to +0 instead of scaling it by exp2(-Inf) = 0, and a row that never
// sees a key writes O = 0. That gives the reference's bits either way.
//
// Not yet run on Blackwell hardware; `mxfa selftest` checks it there.
#include <cstddef>
#include <type_traits>

#include <cuda_fp8.h>

#include "blackwell.cuh"
#include "exp2.cuh"
#include "mx.cuh"

namespace mxfa_gpu {
namespace {

using namespace sm100;

constexpr int BM = 128, BN = 128;
constexpr int SOFTMAX_THREADS = 128, THREADS = SOFTMAX_THREADS + 64; // warps 0-3, the producer, the MMA warp
constexpr int SF_ATOM = 512;
// What depends on the head dim: Q and K rows in panels of PW bytes (one
// 128-byte panel at D = 128, two at 256, one of 64 bytes at 64), KB blocks
// of 32 along D, QA scale atoms a 128-row tile of Q or K (4 blocks an atom),
// VA atoms a key tile of V (128 rows of V^T an atom). K and V go through
// two stages, one at D = 256 with the leak-free mask (LEAK), whose bf16
// copies of P and V leave no room for a second.
template <int D, bool LEAK = false> struct dims {
    static constexpr int PW = D < 128 ? D : 128, PANELS = D / PW, KB = D / 32, QA = (KB + 3) / 4, VA = (D + 127) / 128;
    static constexpr int STAGES = D == 256 && LEAK ? 1 : 2;
#ifdef MXFA_SM100_CODE
    // the swizzle of Q and K: 128 bytes (atoms of 8 rows: 1024 bytes), or 64 bytes at D = 64 (512)
    static constexpr int SWIZZLE = PW == 128 ? MXFA_TC_SWIZZLE_128B : MXFA_TC_SWIZZLE_64B, SBO = 8 * PW;
    // tensor memory: S in columns [0, 128), O in [128, 128 + D), then the
    // scale words of Q, K (a set a stage), P and V (a set a stage)
    static constexpr uint32_t S_COL = 0, O_COL = BN, SFQ_COL = BN + D, SFK_COL = SFQ_COL + 4 * QA,
                              SFP_COL = SFK_COL + 4 * QA * STAGES, SFV_COL = SFP_COL + 4,
                              USED = SFV_COL + 4 * VA * STAGES;
    // a power of two (the allocation's unit): 256 at D = 64, so that the
    // CTAs that shared memory lets share an SM need not wait for each other's
    static constexpr uint32_t TMEM_COLS = USED <= 256 ? 256 : 512;
    static_assert(USED <= TMEM_COLS, "tensor memory layout");
#endif
};
#ifdef MXFA_SM100_CODE
constexpr uint32_t P_SCALE_WORD = 0x77777777u; // const P: every block's scale 2^-8
#endif

// One sequence of the batch: where its tokens are in the caller's tensors,
// where its rows start in the packed ones, and its first query tile.
struct seq_info {
    int64_t q0, k0;       // first token in q and in k, v
    int64_t lq, lk;       // lengths
    int64_t q_off, k_off; // first packed row (multiples of 128)
    int64_t v_block;      // first row of its V scales (col blocks of 32 keys)
    int first_tile;       // its first query tile in the grid
};

struct attn_out {
    uint8_t *o;
    int64_t os0, os1, os2; // elements
    bool o_bf16;
    float *lse; // may be null
    int64_t ls0, ls1;
};

// The leak-free mask's diagonal blocks: P / 256 and V in bf16, a block of 32
// keys as 64-byte rows in 64-byte swizzle (P: 128 rows; V^T: D rows).
template <int D, bool LEAK> struct bf16_blocks {
    uint8_t p[BN / 32][BM * 64];
    uint8_t v[dims<D, LEAK>::STAGES][BN / 32][D * 64];
};
template <int D> struct bf16_blocks<D, false> {};

template <int D, bool LEAK> struct __align__(1024) attn_shared {
    using dm = dims<D, LEAK>;
    static constexpr int STAGES = dm::STAGES;
    uint8_t q[dm::PANELS][BM * dm::PW]; // panels of 128 rows, swizzled
    uint8_t k[STAGES][dm::PANELS][BN * dm::PW];
    uint8_t v[STAGES][D * BN]; // V^T: D rows of 128 keys, 128-byte swizzle
    uint8_t p[BM * BN];        // P's codes, written by the softmax threads in the same swizzle
    bf16_blocks<D, LEAK> bf; // an empty member still takes a byte: what follows is aligned explicitly
    // scale atoms: the bulk copies and tcgen05.cp's descriptor need 16-byte alignment
    alignas(128) uint8_t sfq[dm::QA][SF_ATOM];
    alignas(128) uint8_t sfk[STAGES][dm::QA][SF_ATOM];
    alignas(128) uint8_t sfv[STAGES][dm::VA][SF_ATOM];
    uint64_t q_full, k_full[STAGES], k_empty[STAGES], v_full[STAGES], v_empty[STAGES];
    uint64_t s_full, p_full, o_done, o_block, o_read; // the last two: the slow tiles' block steps
    uint32_t pw[2][BM];                               // dynamic P: the rows' scale words, a tile in two
    uint32_t tmem;
};
template <int D, bool LEAK> constexpr size_t SMEM_BYTES = sizeof(attn_shared<D, LEAK>) + 1024;
// The operands the tensor-memory accelerator and the MMAs read: 1024-byte
// aligned (the swizzle atoms), the scale atoms 16-byte.
template <int D, bool LEAK> constexpr bool aligned_layout()
{
    using sh = attn_shared<D, LEAK>;
    return offsetof(sh, q) % 1024 == 0 && offsetof(sh, k) % 1024 == 0 && offsetof(sh, v) % 1024 == 0 &&
           offsetof(sh, p) % 1024 == 0 && offsetof(sh, bf) % 1024 == 0 && offsetof(sh, sfq) % 16 == 0 &&
           offsetof(sh, sfk) % 16 == 0 && offsetof(sh, sfv) % 16 == 0;
}
static_assert(aligned_layout<64, false>() && aligned_layout<128, false>() && aligned_layout<256, false>() &&
                  aligned_layout<64, true>() && aligned_layout<128, true>() && aligned_layout<256, true>(),
              "shared memory layout");

// ---- packing (before the kernel) ----

// The sequence that packed row p (of a head) belongs to and its row in it,
// or -1 for padding. off: first packed row of each sequence.
__device__ __forceinline__ int64_t packed_row(const seq_info *seqs, int batch, int64_t p, bool keys, int64_t *token)
{
    const int b = last_at_or_below(batch, p, [&](int s) { return keys ? seqs[s].k_off : seqs[s].q_off; });
    const int64_t j = p - (keys ? seqs[b].k_off : seqs[b].q_off), len = keys ? seqs[b].lk : seqs[b].lq;
    *token = (keys ? seqs[b].k0 : seqs[b].q0) + j;
    return j < len ? j : -1;
}

// Byte of (r, c) inside a 512-byte scale atom (128 rows x 4 columns).
__device__ __forceinline__ int atom_byte(int r, int c)
{
    return (r % 32) * 16 + (r / 32) * 4 + c;
}

// Q or K: codes [tokens][H][D] and scale bytes [tokens][H][D / 32] (the
// quantization's output) to codes [H][rows][D] (zeros for padding) and QA
// atoms a 128-row tile [H][rows / 128][QA] (zeros past D / 32 blocks). A
// thread per packed row; grid x over the tiles, y over the heads.
template <int D>
__global__ void pack_rows(const uint8_t *codes, const uint8_t *scales, const seq_info *seqs, int batch, bool keys,
                          int64_t heads, int64_t rows, uint8_t *out, uint8_t *atoms)
{
    const int64_t h = blockIdx.y, p = (int64_t)blockIdx.x * 128 + threadIdx.x;
    int64_t token;
    const bool real = packed_row(seqs, batch, p, keys, &token) >= 0;
    const uint4 *src = reinterpret_cast<const uint4 *>(codes + (token * heads + h) * D);
    uint4 *dst = reinterpret_cast<uint4 *>(out + (h * rows + p) * D);
#pragma unroll
    for (int i = 0; i < D / 16; i++)
        dst[i] = real ? src[i] : make_uint4(0, 0, 0, 0);
    constexpr int KB = dims<D>::KB, QA = dims<D>::QA;
    uint8_t *atom = atoms + (h * (rows / 128) + blockIdx.x) * QA * SF_ATOM;
#pragma unroll
    for (int c = 0; c < 4 * QA; c++)
        atom[(c / 4) * SF_ATOM + atom_byte((int)threadIdx.x, c % 4)] =
            real && c < KB ? scales[(token * heads + h) * KB + c] : 0;
}

// V: codes [tokens][H][D] and col-block scales [vblocks][H][D] to V^T codes
// [H][D][rows] (zeros past a sequence's end) and, as the B operand of P V^T
// (rows d, blocks of 32 keys), VA atoms a 128-key tile [H][rows / 128][VA]
// (the caller zeroes them: at D = 64 half of each stays zero). Grid x over
// the blocks of 32 packed keys, y over the heads; a thread per d.
template <int D>
__global__ void pack_v(const uint8_t *codes, const uint8_t *scales, const seq_info *seqs, int batch, int64_t heads,
                       int64_t rows, uint8_t *vt, uint8_t *atoms, int *nan_tiles, bool shift, int *tiny)
{
    const int64_t h = blockIdx.y, p0 = (int64_t)blockIdx.x * 32;
    const int d = (int)threadIdx.x;
    const int b = last_at_or_below(batch, p0, [&](int s) { return seqs[s].k_off; });
    const int64_t j0 = p0 - seqs[b].k_off; // the block's first key in its sequence
    uint32_t w[8];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        uint32_t v = 0;
        for (int e = 0; e < 4; e++) {
            const int64_t j = j0 + 4 * i + e;
            if (j < seqs[b].lk)
                v |= (uint32_t)codes[((seqs[b].k0 + j) * heads + h) * D + d] << (8 * e);
        }
        w[i] = v;
    }
    uint4 *dst = reinterpret_cast<uint4 *>(vt + (h * D + d) * rows + p0);
    dst[0] = make_uint4(w[0], w[1], w[2], w[3]);
    dst[1] = make_uint4(w[4], w[5], w[6], w[7]);
    const int64_t tile = p0 / 128;
    uint8_t sc = j0 < seqs[b].lk ? scales[((seqs[b].v_block + j0 / 32) * heads + h) * D + d] : 0;
    if (shift) { // dynamic P: V's scale carries P's 2^-8 (a column of zero codes takes any scale)
        const bool codes_here = (w[0] | w[1] | w[2] | w[3] | w[4] | w[5] | w[6] | w[7]) != 0;
        if (sc != 0xFF && sc < 8 && codes_here)
            *tiny = 1;
        sc = sc == 0xFF ? 0xFF : sc >= 8 ? sc - 8 : 0;
    }
    atoms[((h * (rows / 128) + tile) * dims<D>::VA + d / 128) * SF_ATOM + atom_byte(d % 128, (int)(blockIdx.x % 4))] =
        sc;
    // a NaN code (0x7F, 0xFF) or scale anywhere in the tile: a P = 0 step on it is not a no-op
    bool nan = sc == 0xFF;
#pragma unroll
    for (int i = 0; i < 8; i++)
        for (int e = 0; e < 4; e++)
            nan |= ((w[i] >> (8 * e)) & 0x7Fu) == 0x7Fu;
    if (__syncthreads_or(nan) && d == 0)
        nan_tiles[h * (rows / 128) + tile] = 1;
}

// V as bf16 for the leak-free mask's diagonal blocks: V^T [H][D][rows]
// (zeros past a sequence's end), each value the input's rounded to nearest
// even, as the reference takes it; a tile holding a NaN or an Inf is flagged
// (a P = 0 step on it is not a no-op). Grid x over the blocks of 32 packed
// keys, y over the heads; a thread per d.
template <int D>
__global__ void pack_v_bf16(nd3 v, const seq_info *seqs, int batch, int64_t rows, uint16_t *out, int *nan_tiles)
{
    const int64_t p0 = (int64_t)blockIdx.x * 32, h = blockIdx.y;
    const int d = (int)threadIdx.x;
    const int b = last_at_or_below(batch, p0, [&](int s) { return seqs[s].k_off; });
    const int64_t j0 = p0 - seqs[b].k_off;
    uint32_t w[16] = {};
    bool bad = false;
    for (int j = 0; j < 32; j++) {
        if (j0 + j >= seqs[b].lk)
            break;
        const int64_t at = (seqs[b].k0 + j0 + j) * v.s0 + h * v.s1 + (int64_t)d * v.s2;
        const uint32_t bf = v.dtype == MXFA_BF16 ? reinterpret_cast<const uint16_t *>(v.base)[at]
                                                 : f32_to_bf16(reinterpret_cast<const uint32_t *>(v.base)[at]);
        bad |= (bf & 0x7F80u) == 0x7F80u;
        w[j / 2] |= bf << (16 * (j % 2));
    }
    uint4 *dst = reinterpret_cast<uint4 *>(out + (h * D + d) * rows + p0);
    for (int i = 0; i < 4; i++)
        dst[i] = make_uint4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
    if (__syncthreads_or(bad) && d == 0)
        nan_tiles[h * (rows / 128) + p0 / 128] = 1;
}

// ---- the kernel ----

#ifdef MXFA_SM100_CODE

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
#endif

template <int D, bool LEAK, bool P_DYNAMIC>
__global__ void __launch_bounds__(THREADS, 1)
    attn_fwd_sm100(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                   const __grid_constant__ CUtensorMap map_v, const __grid_constant__ CUtensorMap map_vbf,
                   const uint8_t *q_sf, const uint8_t *k_sf,
                   const uint8_t *v_sf, const seq_info *seqs, int batch, int group, int64_t q_rows, int64_t k_rows,
                   const int *v_nan, bool causal, float c, attn_out out)
{
#ifdef MXFA_SM100_CODE
    using dm = dims<D, LEAK>;
    constexpr int PW = dm::PW, KB = dm::KB, QA = dm::QA, VA = dm::VA, STAGES = dm::STAGES;
    constexpr bool p_dynamic = P_DYNAMIC;
    constexpr uint32_t TMEM_COLS = dm::TMEM_COLS, S_COL = dm::S_COL, O_COL = dm::O_COL, SFQ_COL = dm::SFQ_COL,
                       SFK_COL = dm::SFK_COL, SFP_COL = dm::SFP_COL, SFV_COL = dm::SFV_COL;
    extern __shared__ uint8_t raw[];
    attn_shared<D, LEAK> &sh = aligned_shared<attn_shared<D, LEAK>>(raw);
    const int tile = (int)blockIdx.x, h = (int)blockIdx.y, kvh = h / group;
    const int b = last_at_or_below(batch, tile, [&](int s) { return seqs[s].first_tile; });
    const seq_info sq = seqs[b];
    const int64_t r0 = (int64_t)(tile - sq.first_tile) * BM;
    // Key tiles in order up to the last row's limit (causal: bottom-right,
    // query i sees keys up to i + lk - lq). Every row sees all of the tiles
    // before jd; from tile jd on (the one that holds the first row's limit)
    // some rows take a block's step and others skip it, and every row's
    // last step is in one of them. A skipped step runs here with P = 0, a no-op unless V holds a
    // NaN in the tile; then (slow) the P V steps of those tiles go one block
    // at a time, and each row writes its output right after its last step.
    const int64_t nr = min((int64_t)BM, sq.lq - r0), lim_first = r0 + sq.lk - sq.lq, lim_last = lim_first + nr - 1;
    const int64_t tiles_k = (sq.lk + BN - 1) / BN;
    const int nt = (int)(!causal ? tiles_k : lim_last < 0 ? 0 : min(tiles_k, lim_last / BN + 1));
    const int jd = !causal ? nt : lim_first < 0 ? 0 : (int)min((int64_t)nt, lim_first / BN);
    bool slow = false;
    for (int j = jd; j < nt; j++)
        slow |= v_nan[(h / group) * (k_rows / BN) + sq.k_off / BN + j] != 0;
    // The leak-free mask: a block of keys that some row of the query tile
    // sees only in part takes P / 256 and V in bf16 (kind::f16 k16 steps on
    // the same accumulator), so that no V scale spans the diagonal. Bit b
    // of diagonal(j): block b of key tile j.
    auto diagonal = [&](int j) {
        unsigned bits = 0;
        for (int bk = 0; LEAK && bk < BN / 32; bk++) {
            const int64_t kb0 = (int64_t)j * BN + 32 * bk, klast = min(kb0 + 31, sq.lk - 1);
            if (kb0 < sq.lk && lim_first < klast && lim_last >= kb0)
                bits |= 1u << bk;
        }
        return bits;
    };
    const int tid = (int)threadIdx.x, warp = tid / 32;

    if (tid == 0) {
        bar_init(&sh.q_full, 1);
        for (int s = 0; s < STAGES; s++) {
            bar_init(&sh.k_full[s], 1), bar_init(&sh.k_empty[s], 1);
            bar_init(&sh.v_full[s], 1), bar_init(&sh.v_empty[s], 1);
        }
        bar_init(&sh.s_full, 1), bar_init(&sh.o_done, 1), bar_init(&sh.o_block, 1);
        bar_init(&sh.o_read, SOFTMAX_THREADS);
        bar_init(&sh.p_full, SOFTMAX_THREADS);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    if (warp == 5)
        tmem_alloc(&sh.tmem, TMEM_COLS);
    tc_fence_before();
    __syncthreads();
    tc_fence_after();
    const uint32_t tmem = sh.tmem;

    if (tid == 4 * 32) { // the producer
        if (nt > 0) {
            bar_expect(&sh.q_full, BM * D + QA * SF_ATOM);
            for (int pn = 0; pn < dm::PANELS; pn++)
                tma_load(sh.q[pn], &map_q, pn * PW, (int)(h * q_rows + sq.q_off + r0), &sh.q_full);
            bulk_load(sh.sfq, q_sf + (h * (q_rows / BM) + (sq.q_off + r0) / BM) * QA * SF_ATOM, QA * SF_ATOM,
                      &sh.q_full);
        }
        for (int j = 0, s = 0, phase = 0; j < nt; j++) {
            const int64_t key_tile = kvh * (k_rows / BN) + sq.k_off / BN + j;
            if (j >= STAGES)
                bar_wait(&sh.k_empty[s], phase ^ 1);
            bar_expect(&sh.k_full[s], BN * D + QA * SF_ATOM);
            for (int pn = 0; pn < dm::PANELS; pn++)
                tma_load(sh.k[s][pn], &map_k, pn * PW, (int)(kvh * k_rows + sq.k_off + (int64_t)j * BN), &sh.k_full[s]);
            bulk_load(sh.sfk[s], k_sf + key_tile * QA * SF_ATOM, QA * SF_ATOM, &sh.k_full[s]);
            if (j >= STAGES)
                bar_wait(&sh.v_empty[s], phase ^ 1);
            const unsigned diag = diagonal(j);
            bar_expect(&sh.v_full[s], D * BN + VA * SF_ATOM + (diag ? BN / 32 * D * 64 : 0));
            tma_load(sh.v[s], &map_v, (int)(sq.k_off + (int64_t)j * BN), kvh * D, &sh.v_full[s]);
            bulk_load(sh.sfv[s], v_sf + key_tile * VA * SF_ATOM, VA * SF_ATOM, &sh.v_full[s]);
            if constexpr (LEAK)
                if (diag)
                    for (int bk = 0; bk < BN / 32; bk++)
                        tma_load(sh.bf.v[s][bk], &map_vbf, (int)(sq.k_off + (int64_t)j * BN + 32 * bk), kvh * D,
                                 &sh.v_full[s]);
            if (++s == STAGES)
                s = 0, phase ^= 1;
        }
    } else if (tid == 5 * 32) { // the MMA thread
        if (nt > 0) {
            bar_wait(&sh.q_full, 0);
            tc_fence_after();
            for (int a = 0; a < QA; a++)
                copy_scales(tmem + SFQ_COL + 4 * a, mxfa_tc_sdesc_sf(smem_addr(sh.sfq[a])));
        }
        const uint64_t dp = mxfa_tc_sdesc(smem_addr(sh.p), 16, 1024, MXFA_TC_SWIZZLE_128B);
        for (int j = 0, s = 0, phase = 0, blocks = 0; j < nt; j++) {
            bar_wait(&sh.k_full[s], phase);
            tc_fence_after();
            for (int a = 0; a < QA; a++)
                copy_scales(tmem + SFK_COL + 4 * (QA * s + a), mxfa_tc_sdesc_sf(smem_addr(sh.sfk[s][a])));
#pragma unroll
            for (int kb = 0; kb < KB; kb++) { // S = Q K^T: 32 of D at a time, from zero
                // block kb: panel 32 kb / PW, 32 bytes (2 in the address field) a block inside it
                const int pn = 32 * kb / PW, step = 2 * (kb % (PW / 32)), a = kb / 4;
                const uint64_t dq = mxfa_tc_sdesc(smem_addr(sh.q[pn]), 16, dm::SBO, dm::SWIZZLE);
                const uint64_t dk = mxfa_tc_sdesc(smem_addr(sh.k[s][pn]), 16, dm::SBO, dm::SWIZZLE);
                mma_mxf8(tmem + S_COL, dq + step, dk + step, mxfa_tc_idesc_mxf8(0, 0, BM, BN, kb % 4, kb % 4),
                         tmem + SFQ_COL + 4 * a, tmem + SFK_COL + 4 * (QA * s + a), kb != 0);
            }
            mma_commit(&sh.k_empty[s]);
            mma_commit(&sh.s_full);
            bar_wait(&sh.p_full, j & 1); // P made, O rescaled, S read
            tc_fence_after();
            bar_wait(&sh.v_full[s], phase);
            tc_fence_after();
            for (int a = 0; a < VA; a++)
                copy_scales(tmem + SFV_COL + 4 * (VA * s + a), mxfa_tc_sdesc_sf(smem_addr(sh.sfv[s][a])));
            const uint64_t dv = mxfa_tc_sdesc(smem_addr(sh.v[s]), 16, 1024, MXFA_TC_SWIZZLE_128B);
            const bool by_block = slow && j >= jd;
            const unsigned diag = diagonal(j);
            for (int kb = 0; kb < BN / 32; kb++) { // O += P V^T: 32 keys at a time
                if (LEAK && (diag >> kb & 1u)) {
                    // two bf16 k16 steps (32 bytes, 2 in the address field, each); the second is a no-op
                    // where the reference takes one (16 keys or fewer): zero products, and O is never -0
                    if constexpr (LEAK) {
                        const uint64_t pa = mxfa_tc_sdesc(smem_addr(sh.bf.p[kb]), 16, 512, MXFA_TC_SWIZZLE_64B);
                        const uint64_t vb = mxfa_tc_sdesc(smem_addr(sh.bf.v[s][kb]), 16, 512, MXFA_TC_SWIZZLE_64B);
                        mma_bf16(tmem + O_COL, pa, vb, mxfa_tc_idesc_bf16(BM, D), 1);
                        mma_bf16(tmem + O_COL, pa + 2, vb + 2, mxfa_tc_idesc_bf16(BM, D), 1);
                    }
                } else {
                    mma_mxf8(tmem + O_COL, dp + 2 * kb, dv + 2 * kb, mxfa_tc_idesc_mxf8(0, 0, BM, D, kb, kb),
                             tmem + SFP_COL, tmem + SFV_COL + 4 * VA * s, 1);
                }
                if (by_block) { // the rows read O between the steps
                    mma_commit(&sh.o_block);
                    bar_wait(&sh.o_read, blocks++ & 1);
                    tc_fence_after();
                }
            }
            mma_commit(&sh.v_empty[s]);
            mma_commit(&sh.o_done);
            if (++s == STAGES)
                s = 0, phase ^= 1;
        }
    } else if (tid < SOFTMAX_THREADS) { // a query row a thread
        const uint32_t lanes = tmem + ((uint32_t)(warp * 32) << 16);
        const int row = tid;
        const uint32_t zero[32] = {};
        // O from +0 (every step of the chain adds into it) and P's scales
        for (int j = 0; j < D; j += 32)
            tmem_st32(lanes + O_COL + j, zero);
        if (!p_dynamic) {
            const uint32_t w4[4] = {P_SCALE_WORD, P_SCALE_WORD, P_SCALE_WORD, P_SCALE_WORD};
            tmem_st4(lanes + SFP_COL, w4);
        }
        tmem_wait_st();
        const float NEG_INF = __uint_as_float(0xFF800000u);
        float m = NEG_INF, l = 0.0f;
        const int64_t i = r0 + row, token = sq.q0 + i;
        const int64_t lim = causal ? i + sq.lk - sq.lq : sq.lk - 1; // this row's last key
        // the output: O / l and LSE = (m + log2 l) ln 2, from this row's O in
        // tensor memory (a warp's rows read together; rows that saw nothing: 0, -Inf)
        bool written = false;
        auto write_out = [&](bool mine) {
            const bool any = l != 0.0f || l != l;
            for (int q = 0; q < D / 32; q++) {
                uint32_t v[32];
                tmem_ld32(lanes + O_COL + 32 * q, v);
                tmem_wait_ld();
                if (mine && i < sq.lq)
#pragma unroll
                    for (int e = 0; e < 32; e++) {
                        const float o = any ? __fdiv_rn(__uint_as_float(v[e]), l) : 0.0f;
                        const int64_t at = token * out.os0 + (int64_t)h * out.os1 + (int64_t)(32 * q + e) * out.os2;
                        if (out.o_bf16)
                            reinterpret_cast<uint16_t *>(out.o)[at] = (uint16_t)f32_to_bf16(__float_as_uint(o));
                        else
                            reinterpret_cast<float *>(out.o)[at] = o;
                    }
            }
            if (mine && out.lse && i < sq.lq)
                out.lse[token * out.ls0 + (int64_t)h * out.ls1] =
                    any ? __fmul_rn(__fadd_rn(m, mx_log2(l)), __uint_as_float(0x3F317218u)) : NEG_INF;
            written |= mine;
        };
        int blocks = 0;
        for (int j = 0; j < nt; j++) {
            bar_wait(&sh.s_full, j & 1);
            tc_fence_after();
            // x = S * c, keys past the row's last key -Inf. S is read from
            // tensor memory twice, 32 columns at a time (it stays there until
            // p_full), so that no more than a block of scores is ever held:
            // once for the maximum, in key order (a NaN score makes the
            // maximum NaN, as in the reference), once for P.
            const int64_t valid = min(sq.lk - 1, lim) - (int64_t)j * BN + 1; // keys of the tile this row sees
            auto scores = [&](int q, float(&xs)[32]) {
                uint32_t v[32];
                tmem_ld32(lanes + S_COL + 32 * q, v);
                tmem_wait_ld();
#pragma unroll
                for (int i = 0; i < 32; i++)
                    xs[i] = 32 * q + i < valid ? __fmul_rn(__uint_as_float(v[i]), c) : NEG_INF;
            };
            float m_new = m;
#pragma unroll 1
            for (int q = 0; q < BN / 32; q++) {
                float xs[32];
                scores(q, xs);
#pragma unroll
                for (int i = 0; i < 32; i++)
                    if (xs[i] > m_new || xs[i] != xs[i])
                        m_new = xs[i];
            }
            // The reference rescales O and l, then makes P with the new
            // maximum; P goes first here, the order of the arithmetic on each
            // value is the reference's.
            const bool grows = m_new > m;
            const float alpha = grows ? mx_exp2(__fsub_rn(m, m_new)) : 1.0f;
            const bool clear = grows && m == NEG_INF; // O is +0 in the reference
            if (grows)
                m = m_new;
            // P = exp2((x - m) + 8) in [0, 256], added in key order, and its
            // E4M3 codes. Const P: the codes of P itself, its 2^-8 in the
            // scale byte 0x77. Dynamic P: each block of 32 keys by the rceil
            // rule, the byte that rule gives (V's scale bytes carry the 2^-8,
            // see pack_v). P >= 0, Inf or NaN, and rceil never poisons: the
            // saturating conversion of P / 2^scale is the encoder's code
            // (Inf -> 448, NaN -> 0x7F).
            float sum = 0.0f;
            uint32_t codes[BN / 4], pword = P_DYNAMIC ? 0u : P_SCALE_WORD;
#pragma unroll
            for (int kb = 0; kb < BN / 32; kb++) {
                float xs[32];
                scores(kb, xs);
                uint32_t amax = 0;
                bool has_nan = false, has_inf = false;
#pragma unroll
                for (int i = 0; i < 32; i++) {
                    xs[i] = xs[i] == NEG_INF ? 0.0f : mx_exp2(__fadd_rn(__fsub_rn(xs[i], m), 8.0f));
                    sum = __fadd_rn(sum, xs[i]);
                    const uint32_t a = __float_as_uint(xs[i]) & 0x7FFFFFFFu;
                    has_nan |= a > 0x7F800000u, has_inf |= a == 0x7F800000u;
                    amax = a <= 0x7F800000u && a > amax ? a : amax;
                }
                float rcp = 1.0f;
                if constexpr (P_DYNAMIC) {
                    const block_rule rule = rule_from_amax(fp8_e4m3(), MXFA_PRESET_RCEIL, amax, has_nan, has_inf);
                    rcp = e8m0_reciprocal(rule.scale);
                    pword |= rule.scale << (8 * kb);
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
            // the last P V must be done before O is touched and P rewritten
            if (j > 0) {
                bar_wait(&sh.o_done, (j - 1) & 1);
                tc_fence_after();
            }
            // P's codes into shared memory, 16-byte chunk k of the row at chunk k ^ (row % 8)
            uint4 *prow = reinterpret_cast<uint4 *>(sh.p + row * BN);
#pragma unroll
            for (int k = 0; k < BN / 16; k++)
                prow[k ^ (row % 8)] = make_uint4(codes[4 * k], codes[4 * k + 1], codes[4 * k + 2], codes[4 * k + 3]);
            if (p_dynamic) { // P's scale words: row r's in column r / 32 of every lane quarter (lane r % 32)
                sh.pw[j & 1][row] = pword;
                named_sync(1, SOFTMAX_THREADS);
                const uint32_t w4[4] = {sh.pw[j & 1][row % 32], sh.pw[j & 1][row % 32 + 32], sh.pw[j & 1][row % 32 + 64],
                                        sh.pw[j & 1][row % 32 + 96]};
                tmem_st4(lanes + SFP_COL, w4);
                tmem_wait_st();
            }
            if constexpr (LEAK) { // the diagonal blocks' P / 256 in bf16: 64-byte rows, chunk c at c ^ (row / 2 % 4)
                const unsigned diag = diagonal(j);
                for (int bk = 0; bk < BN / 32; bk++) {
                    if (!(diag >> bk & 1u))
                        continue;
                    const uint32_t ps = p_dynamic ? pword >> (8 * bk) & 0xFFu : 0x7Fu; // const: 2^0, the 2^-8 in widen_p
                    // the block's codes back from this thread's row of P (chunks 2 bk, 2 bk + 1),
                    // so that the registers that made them are free by now
                    uint4 *brow = reinterpret_cast<uint4 *>(sh.bf.p[bk] + row * 64);
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
            // O's rescale last, after the codes have left the registers
            if (__any_sync(0xFFFFFFFFu, grows)) { // a warp's rows are loaded and stored together
#pragma unroll
                for (int q = 0; q < D / 32; q++) {
                    uint32_t v[32];
                    tmem_ld32(lanes + O_COL + 32 * q, v);
                    tmem_wait_ld();
#pragma unroll
                    for (int i = 0; i < 32; i++)
                        v[i] = clear ? 0u : grows ? __float_as_uint(__fmul_rn(__uint_as_float(v[i]), alpha)) : v[i];
                    tmem_st32(lanes + O_COL + 32 * q, v);
                }
                tmem_wait_st();
            }
            if (grows)
                l = __fmul_rn(l, alpha);
            if (m_new != NEG_INF) // a row that sees no key of the tile adds nothing (the reference returns early)
                l = __fadd_rn(l, __fmul_rn(sum, 0.00390625f));
            fence_to_async_proxy();
            tc_fence_before();
            bar_arrive(&sh.p_full);
            if (slow && j >= jd) // after each block's step, the rows whose last step it was
#pragma unroll 1
                for (int kb = 0; kb < BN / 32; kb++) {
                    bar_wait(&sh.o_block, blocks++ & 1);
                    tc_fence_after();
                    const bool last = !written && lim >= 0 && min(lim, sq.lk - 1) / 32 == (int64_t)j * (BN / 32) + kb;
                    if (__any_sync(0xFFFFFFFFu, last))
                        write_out(last);
                    tc_fence_before();
                    bar_arrive(&sh.o_read);
                }
        }

        // the rows not written yet (O is +0 where no key was seen, and O / l is not taken then)
        if (nt > 0) {
            bar_wait(&sh.o_done, (nt - 1) & 1);
            tc_fence_after();
        }
        write_out(!written);
    }
    __syncwarp();
    tc_fence_before();
    __syncthreads();
    if (warp == 5) {
        tc_fence_after();
        tmem_free(tmem, TMEM_COLS);
    }
#endif
}

int64_t esz(const nd3 &x)
{
    return esize(x.dtype);
}

template <int D, bool LEAK, bool P_DYNAMIC> cudaError_t launch_attn_fwd(const attn_fwd_args &a, cudaStream_t stream)
{
    using dm = dims<D, LEAK>;
    constexpr int KB = dm::KB, QA = dm::QA, VA = dm::VA;
    const int64_t tq = a.q.n0, tk = a.k.n0, hq = a.q.n1, hkv = a.k.n1;
    const int batch = a.batch;
    seq_info *seqs = static_cast<seq_info *>(malloc(sizeof(seq_info) * (size_t)batch));
    mxfa_segment *vsegs = static_cast<mxfa_segment *>(malloc(sizeof(mxfa_segment) * (size_t)batch));
    if (!seqs || !vsegs) {
        free(seqs), free(vsegs);
        return cudaErrorMemoryAllocation;
    }
    int64_t q_rows = 0, k_rows = 0, vblocks = 0, tiles = 0;
    for (int b = 0; b < batch; b++) {
        seq_info &s = seqs[b];
        s.q0 = a.cu_q[b], s.k0 = a.cu_k[b];
        s.lq = (int64_t)a.cu_q[b + 1] - a.cu_q[b], s.lk = (int64_t)a.cu_k[b + 1] - a.cu_k[b];
        s.q_off = q_rows, s.k_off = k_rows, s.v_block = vblocks, s.first_tile = (int)tiles;
        q_rows += round_up(s.lq, BM), k_rows += round_up(s.lk, BN), vblocks += (s.lk + 31) / 32;
        tiles += (s.lq + BM - 1) / BM;
        vsegs[b] = {s.k0, s.lk, s.v_block};
    }
    // the grid, and the tensor-memory accelerator's coordinates (32-bit)
    if (tiles == 0 || tiles > INT32_MAX || hq > 65535 || hq * q_rows > INT32_MAX || hkv * (k_rows + BN) > INT32_MAX ||
        hkv * D > INT32_MAX) {
        free(seqs), free(vsegs);
        return tiles == 0 ? cudaSuccess : cudaErrorInvalidValue;
    }
    k_rows = k_rows > 0 ? k_rows : BN; // no keys at all: a tile that is never read, so that every map is valid

    scratch mem(stream);
    cudaError_t e = cudaSuccess;
    uint8_t *qc, *qsb, *kc, *ksb, *vc, *vsb, *qp, *kp, *vt, *qa, *ka, *va;
    seq_info *dseqs;
    int *v_nan, *tiny;
    uint16_t *vbf = nullptr; // the leak-free mask's bf16 V^T
    const size_t sizes[] = {(size_t)(tq * hq * D), (size_t)(tq * hq * KB), (size_t)(tk * hkv * D),
                            (size_t)(tk * hkv * KB), (size_t)(tk * hkv * D), (size_t)(vblocks * hkv * D)};
    uint8_t **bufs[] = {&qc, &qsb, &kc, &ksb, &vc, &vsb};
    // the quantizations' outputs and the packed operands in two allocations
    const size_t v_atoms = (size_t)(hkv * k_rows / 128 * VA * SF_ATOM);
    size_t total = 0, packed = (size_t)(hq * q_rows * D + hkv * k_rows * D * 2 +
                                        (hq * q_rows / 128 + hkv * k_rows / 128) * QA * SF_ATOM) + v_atoms;
    for (size_t i = 0; i < 6; i++)
        total += round_up((int64_t)sizes[i] + 16, 256);
    uint8_t *base = nullptr, *pbase = nullptr;
    if ((e = mem.get(&base, total)) != cudaSuccess || (e = mem.get(&pbase, packed)) != cudaSuccess ||
        (e = mem.get(&dseqs, sizeof(seq_info) * (size_t)batch)) != cudaSuccess ||
        (e = mem.get(&v_nan, sizeof(int) * (size_t)(hkv * k_rows / BN))) != cudaSuccess ||
        (e = mem.get(&tiny, sizeof(int))) != cudaSuccess ||
        (LEAK && (e = mem.get(&vbf, sizeof(uint16_t) * (size_t)(hkv * D * k_rows))) != cudaSuccess)) {
        free(seqs), free(vsegs);
        return e;
    }
    for (size_t i = 0, at = 0; i < 6; i++) {
        *bufs[i] = base + at;
        at += (size_t)round_up((int64_t)sizes[i] + 16, 256);
    }
    qp = pbase, kp = qp + hq * q_rows * D, vt = kp + hkv * k_rows * D;
    qa = vt + hkv * k_rows * D, ka = qa + hq * q_rows / 128 * QA * SF_ATOM, va = ka + hkv * k_rows / 128 * QA * SF_ATOM;
    e = cudaMemcpyAsync(dseqs, seqs, sizeof(seq_info) * (size_t)batch, cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess) // pack_v leaves the rows of V^T's atoms past D, and sets the flags of tiles with a NaN
        e = cudaMemsetAsync(va, 0, v_atoms, stream);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(v_nan, 0, sizeof(int) * (size_t)(hkv * k_rows / BN), stream);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(tiny, 0, sizeof(int), stream);

    auto head = [&](const nd3 &x, int64_t hh) {
        return dview{x.base + hh * x.s1 * esz(x), x.n0, D, x.s0, x.s2, x.dtype};
    };
    auto rows = [&](const nd3 &x, int64_t heads, const mxfa_segment *seg, uint8_t *codes, uint8_t *sc) {
        cudaError_t r = cudaSuccess;
        for (int64_t hh = 0; hh < heads && r == cudaSuccess; hh++)
            r = launch_quantize(head(x, hh), seg, 1, a.preset, MXFA_BLOCK_ROW,
                                dview{codes + hh * D, x.n0, D, heads * D, 1, MXFA_E4M3},
                                dview{sc + hh * KB, x.n0, KB, heads * KB, 1, MXFA_E8M0}, stream);
        return r;
    };
    const mxfa_segment all_q = {0, tq, 0}, all_k = {0, tk, 0};
    if (e == cudaSuccess)
        e = rows(a.q, hq, &all_q, qc, qsb);
    if (e == cudaSuccess && tk > 0)
        e = rows(a.k, hkv, &all_k, kc, ksb);
    for (int64_t hh = 0; hh < hkv && tk > 0 && e == cudaSuccess; hh++)
        e = launch_quantize(head(a.v, hh), vsegs, batch, a.preset, MXFA_BLOCK_COL,
                            dview{vc + hh * D, tk, D, hkv * D, 1, MXFA_E4M3},
                            dview{vsb + hh * D, vblocks, D, hkv * D, 1, MXFA_E8M0}, stream);
    free(vsegs);
    if (e != cudaSuccess) {
        free(seqs);
        return e;
    }
    pack_rows<D><<<dim3((unsigned)(q_rows / 128), (unsigned)hq), 128, 0, stream>>>(qc, qsb, dseqs, batch, false, hq,
                                                                                 q_rows, qp, qa);
    if (tk > 0) {
        pack_rows<D><<<dim3((unsigned)(k_rows / 128), (unsigned)hkv), 128, 0, stream>>>(kc, ksb, dseqs, batch, true,
                                                                                      hkv, k_rows, kp, ka);
        pack_v<D><<<dim3((unsigned)(k_rows / 32), (unsigned)hkv), D, 0, stream>>>(vc, vsb, dseqs, batch, hkv, k_rows,
                                                                                vt, va, v_nan, a.p_dynamic, tiny);
        if (LEAK)
            pack_v_bf16<D><<<dim3((unsigned)(k_rows / 32), (unsigned)hkv), D, 0, stream>>>(a.v, dseqs, batch, k_rows,
                                                                                     vbf, v_nan);
    }
    if ((e = cudaGetLastError()) != cudaSuccess) {
        free(seqs);
        return e;
    }
    // Dynamic P puts P's 2^-8 on V's scale bytes, which a block of V with
    // non-zero codes and a scale below 8 cannot take: such a call is
    // refused before anything is written, which takes a wait here.
    if (a.p_dynamic && tk > 0) {
        int host_tiny = 0;
        if ((e = cudaMemcpyAsync(&host_tiny, tiny, sizeof(int), cudaMemcpyDeviceToHost, stream)) != cudaSuccess ||
            (e = cudaStreamSynchronize(stream)) != cudaSuccess) {
            free(seqs);
            return e;
        }
        if (host_tiny) {
            free(seqs);
            if (a.refused)
                *a.refused = true;
            return cudaSuccess;
        }
    }

    CUtensorMap maps[4];
    memset(maps, 0, sizeof maps);
    const CUtensorMapSwizzle qk_swizzle = dm::PW == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
    if ((e = tensor_map(&maps[0], CU_TENSOR_MAP_DATA_TYPE_UINT8, qp, D, (uint64_t)(hq * q_rows), D, dm::PW, BM,
                        qk_swizzle)) != cudaSuccess ||
        (e = tensor_map(&maps[1], CU_TENSOR_MAP_DATA_TYPE_UINT8, kp, D, (uint64_t)(hkv * k_rows), D, dm::PW, BN,
                        qk_swizzle)) != cudaSuccess ||
        (e = tensor_map(&maps[2], CU_TENSOR_MAP_DATA_TYPE_UINT8, vt, (uint64_t)k_rows, (uint64_t)(hkv * D),
                        (uint64_t)k_rows, BN, D, CU_TENSOR_MAP_SWIZZLE_128B)) != cudaSuccess ||
        (LEAK && (e = tensor_map(&maps[3], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, vbf, (uint64_t)k_rows, (uint64_t)(hkv * D),
                                 (uint64_t)k_rows * 2, 32, D, CU_TENSOR_MAP_SWIZZLE_64B)) != cudaSuccess)) {
        free(seqs);
        return e;
    }
    free(seqs);
    // on every launch: the attribute belongs to the current device
    if ((e = cudaFuncSetAttribute(attn_fwd_sm100<D, LEAK, P_DYNAMIC>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  SMEM_BYTES<D, LEAK>)) != cudaSuccess)
        return e;
    const uint32_t log2e_bits = 0x3FB8AA3Bu; // fl(log2 e)
    float log2e;
    memcpy(&log2e, &log2e_bits, 4);
    const float c = a.softmax_scale * log2e; // one fp32 product, as the reference computes it
    const attn_out out = {a.o.base, a.o.s0, a.o.s1, a.o.s2, a.o.dtype == MXFA_BF16, a.lse, a.ls0, a.ls1};
    attn_fwd_sm100<D, LEAK, P_DYNAMIC><<<dim3((unsigned)tiles, (unsigned)hq), THREADS, SMEM_BYTES<D, LEAK>, stream>>>(
        maps[0], maps[1], maps[2], maps[3], qa, ka, va, dseqs, batch, (int)(hq / hkv), q_rows, k_rows, v_nan, a.causal,
        c, out);
    return cudaGetLastError();
}

} // namespace

cudaError_t launch_attn_fwd_sm100(const attn_fwd_args &a, cudaStream_t stream)
{
    // an instance a head dim, mask kind and P scaling
    auto of = [&](auto d) {
        constexpr int D = decltype(d)::value;
        return a.leak_free ? a.p_dynamic ? launch_attn_fwd<D, true, true>(a, stream)
                                         : launch_attn_fwd<D, true, false>(a, stream)
               : a.p_dynamic ? launch_attn_fwd<D, false, true>(a, stream)
                             : launch_attn_fwd<D, false, false>(a, stream);
    };
    switch (a.q.n2) {
    case 64: return of(std::integral_constant<int, 64>());
    case 128: return of(std::integral_constant<int, 128>());
    case 256: return of(std::integral_constant<int, 256>());
    default: return cudaErrorInvalidValue; // the backend refuses other head dims with its own words
    }
}

} // namespace mxfa_gpu
