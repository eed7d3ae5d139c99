// SPDX-License-Identifier: BSD-3-Clause
// The fused attention backward on Hopper under the sm90-bf16 model, bit for
// bit the algorithm of cpu/ref/attn_bwd.c (docs/NUMERICS.md, "Attention
// backward") for D = 64, 128 and 256, every mask, const or dynamic P, the
// reference's tiles of 128 queries and 128 keys (block_m = block_n = 128).
// Memory O(S): no score matrix anywhere.
//
// Before it, the packing (attn_bwd.cu): Q, K and dO quantized in 32 x 32
// square blocks and V in row blocks along D, with the call's preset, each
// widened exactly to bf16 (the model's operands); under the leak-free mask
// K also rounded to bf16 from the input; LSE as P's offset pofs = fl(2^-11
// - fl(LSE log2 e)) and
// delta = rowsum(dO O) per packed query row (padding rows and LSE = -Inf:
// POFS_UNSEEN; delta 0).
//
// A work item is one key tile (128 keys; at D = 256 half of one, see
// bwd_config) of one query head; a persistent
// grid, a CTA an SM, launched cooperatively (every CTA resident: an item may
// wait on another CTA's), takes the items in increasing order (key tile
// major), each CTA its own in increasing order. The reference loops over key
// tiles and, for each, over the query tiles that see any of its keys, in
// order: an item's chains of dV and dK over the queries are those of the
// reference, made in registers across the whole item. dQ is one chain per
// query row over the key tiles in order: the sequence's item t waits on the
// query tile's semaphore for the value t, loads dQ, adds its steps, stores
// it and sets t + 1 (the smallest unfinished item never waits for a larger
// one: no deadlock). The producer's dQ agent does the waiting, loading,
// storing and releasing, a step ahead where it can; the consumers only
// read and write dQ in shared memory around their product.
//
// 384 threads, three warpgroups.
// - Warpgroup 0, the producer: one thread issues the tensor-memory
//   accelerator's copies: an item's K and V (and K in bf16) once, then per step
//   of queries (64; 32 at D = 256) Q, dO, pofs and delta through a ring of
//   two stages;
//   another, the dQ agent, per step: the semaphore's wait, dQ's load, its
//   store once the consumers are done, and the release.
// - Warpgroups 1 and 2, the consumers: 64 keys each (keys as the rows of
//   every product they make, so that the score tiles are their own A
//   operands; at D = 256 both the item's 64, in two roles, see bwd_config:
//   the first makes S^T, P and dV, the second dP^T, dS and dK, each half
//   of D's columns of dQ, made as dQ^T = K^T dS^T). For each step of 64
//   queries:
//     S^T  = K Q^T                   (N = 64 queries, along D, from zero)
//     P = E(RN_f16(min(fma(S, c, pofs), 0))) (the f16 exponential, two
//         scores an instruction), quantized (const, or square blocks under
//         rceil), widened to bf16 in registers
//     dP^T = V dO^T                  (along D, from an accumulator of +0)
//     dV  += P^T dO                  (A from registers, B = dO MN-major, N = D)
//     dS = P (dP - delta) in fp32, quantized in square blocks with the preset,
//         widened; dK += dS^T Q (A from registers, B = Q MN-major); dS also
//         to shared memory
//     dQ  += dS K                    (both warpgroups' dS, 128 keys in order;
//                                     each warpgroup half of D's columns, B
//                                     K's rows MN-major)
//   An item's end stores dK = fl(dK scale) and dV into the outputs (no GQA
//   group), or each query head's dK and dV for the group's sums.
// A square block of 32 keys x 32 queries is two warps' rows: its largest
// |x| is a warp's shuffle, then an exchange with the neighbouring warp
// through shared memory.
//
// The leak-free mask: where some row of the step's query tile (the
// reference's 128 rows) sees a 32-key block only in part, the block's
// products take bf16 operands: K rounded to bf16 in S^T and dQ, P and dS
// rounded to bf16 in dV, dK and dQ. A block is one warp pair's rows, so the
// choice of P's and dS's fragments is a warp's; the products whose A or B
// spans the block take K from kr, which holds K in bf16 until the first
// query tile that sees the block whole, when the consumers copy K's
// quantized rows over it (a block is unseen, then diagonal for one or two
// query tiles, then whole, in query order).
#ifndef MXFA_GPU_SM90_BWD_BF16_CUH
#define MXFA_GPU_SM90_BWD_BF16_CUH

#include <cstddef>

#include "exp2.cuh"
#include "mx.cuh"
#include "nd3.cuh"
#include "sm90/fwd_pack.cuh"
#include "sm90/fwd_softmax.cuh"
#include "sm90/fwd_tile.cuh"
#include "sm90/wgmma_bf16.cuh"

namespace mxfa_gpu {
namespace bwd90 {

using namespace sm90;

constexpr int BN = 128;  // the reference's key tile
constexpr int BMQ = 128; // the reference's query tile
static_assert(BMQ == fwd90::BM, "the leak-free mask's query tile is the forward's");
constexpr int THREADS = 384;
// pofs of a row whose LSE is -Inf, and of the padding rows: a NaN that no
// arithmetic makes (the GPU's NaNs are 0x7FFFFFFF), so that the mask is
// the reference's (LSE = -Inf), not pofs = +Inf, which a finite LSE below
// -2.4e38 also gives
constexpr uint32_t POFS_UNSEEN = 0xFFC00001u;
constexpr int PRODUCER_REGS = 24, CONSUMER_REGS = 240;
// setmaxnreg moves registers between warpgroups; their sum cannot exceed what
// one CTA of THREADS was given (the SM's 65536 over THREADS, rounded down to
// a multiple of 8: 168 a thread)
constexpr int CTA_REGS = 65536 / THREADS / 8 * 8;
static_assert(128 * PRODUCER_REGS + 256 * CONSUMER_REGS <= CTA_REGS * THREADS, "register split exceeds the CTA's file");
// named barriers (0 is __syncthreads'): both consumer warpgroups'; at D =
// 256, the step's P written by the first warpgroup (which arrives) for the
// second (which waits); and a pair of warps' (the two that share a square
// block's keys): 4 + 2 wi + w / 2
enum bwd_barrier : uint32_t { BAR_CONSUMERS = 1, BAR_P = 2, BAR_PAIR0 = 4 };

// D = 64 and 128: an item is a key tile, 64 keys a warpgroup, each with
// all of D; a step 64 queries. D = 256 (SPLIT): dK and dV of 64 keys and
// all of D do not fit one warpgroup's registers together, so an item is
// half a key tile and the warpgroups take roles: the first makes S^T, P
// and dV, the second dP^T, dS and dK (P, in fp32, passes from the first to
// the second through shared memory), each over all of the item's keys
// and all of D's columns, and each takes half of D's columns of dQ. A
// step is 32 queries (the shared memory of 64 would not fit), and dQ^T =
// K^T dS^T (wgmma's M is 64: D's columns as its rows).
template <int D> struct bwd_config {
    static_assert(D == 64 || D == 128 || D == 256, "head dim");
    static constexpr int P = D / 64; // 64-column (128-byte) panels of K, V, Q and dO rows
    static constexpr int STAGES = 2;
    static constexpr bool SPLIT = D == 256;
    static constexpr int KEYS = SPLIT ? 64 : 128; // keys an item
    static constexpr int BQ = SPLIT ? 32 : 64;    // queries a step
    static constexpr int DW = D;                  // columns of dK and dV a warpgroup's
    static constexpr int ACCS = SPLIT ? 1 : 2;    // its accumulators: dV and dK, or (SPLIT) its role's
    static_assert(BN % KEYS == 0 && BMQ % BQ == 0, "an item within a key tile, steps within a query tile");
};

// Shared memory, every operand in 128-byte rows in 128-byte swizzle, each
// array 1024-byte aligned.
template <int D> struct __align__(1024) bwd_shared {
    using cf = bwd_config<D>;
    uint16_t k[cf::P][cf::KEYS * 64];  // K: the item's keys' rows, A of S^T, B of dQ (A of dQ^T), MN-major
    uint16_t v[cf::P][cf::KEYS * 64];  // V, A of dP^T
    uint16_t kr[cf::P][cf::KEYS * 64]; // the leak-free mask's K (the header): A of S^T, B of dQ
    uint16_t q[cf::STAGES][cf::P][cf::BQ * 64]; // Q: B of S^T (K-major) and of dK (MN-major)
    uint16_t o[cf::STAGES][cf::P][cf::BQ * 64]; // dO: B of dP^T (K-major) and of dV (MN-major)
    // dS: the step's query rows, 64 keys a panel (a warpgroup's), A of dQ;
    // two, by the step's parity, so that a warpgroup writes the next step's
    // while the other's product may still read this one's. SPLIT: the
    // item's 64 keys (the second warpgroup's), B of dQ^T, in ds[0][parity]
    // (split_ds), and ds[1] holds the step's P in fp32 from the first
    // warpgroup for the second's dS (split_p)
    uint16_t ds[2][2][cf::BQ * 64];
    // dQ of the step's query rows, 32 columns a panel in 128-byte swizzle
    // (element (r, c) of a panel at byte 128 r + 16 ((c / 4) xor (r mod 8))
    // + 4 (c mod 4)): loaded and stored by the dQ agent (the tensor-memory
    // accelerator), read and written by the consumers around their product
    float dqb[D / 32][cf::BQ * 32];
    alignas(128) float pofs[cf::STAGES][cf::BQ];
    alignas(128) float delta[cf::STAGES][cf::BQ];
    // a square block's statistics, [P or dS][warpgroup][warp][query block]:
    // the largest |x| bits (NaN above Inf), and where that is not finite the
    // exact ones (amax with NaN ignored, NaN and Inf flags)
    uint32_t xtop[2][2][4][2];
    uint32_t xamax[2][2][4][2];
    uint32_t xflags[2][2][4][2];
    uint64_t kv_full, kv_empty, full[cf::STAGES], empty[cf::STAGES], dq_full, dq_done;

    __device__ uint16_t *split_ds(int parity) { return ds[0][parity]; }
    // element i of the first warpgroup's thread x (of 128)
    __device__ float &split_p(int i, int x) { return reinterpret_cast<float *>(ds[1])[i * 128 + x]; }
    static_assert(!cf::SPLIT || sizeof ds[1] >= cf::BQ / 2 * 128 * sizeof(float), "P in ds[1]");
};
template <int D> constexpr size_t BWD_SMEM_BYTES = sizeof(bwd_shared<D>) + 1024;
static_assert(BWD_SMEM_BYTES<256> <= 227 * 1024 && BWD_SMEM_BYTES<128> <= 227 * 1024 &&
                  BWD_SMEM_BYTES<64> <= 227 * 1024,
              "shared memory of an H100 or H200 CTA");

struct bwd_params {
    const seq_info *seqs;
    int batch, group, hq;
    int64_t q_rows, k_rows; // packed rows a head (multiples of 128)
    int items;              // (k_rows / KEYS) * hq (bwd_config's KEYS)
    float c;                // fl(scale * log2 e)
    bool causal;
    int preset; // dS's (and Q's, K's, dO's, V's in the packing)
    float *dq;  // [Hq][q_rows][D], zero at the start
    // direct (no GQA group): dK = fl(dK scale) and dV into the outputs
    // themselves; else dk, dv [Hq][k_rows][D]: each query head's dK (before
    // the scale) and dV, summed over a group afterwards
    bool direct;
    float scale;
    nd3 dk_out, dv_out;
    float *dk, *dv;
    int *sem;       // [Hq][q_rows / BMQ], zero at the start
};

// An item: keys `tile` (of KEYS each) of the packed keys, query head h.
struct bwd_item {
    int h, kvh;
    seq_info sq;
    int c0;     // its first key in the sequence
    int t;      // its index among the sequence's items (dQ's turn)
    int i0, nq; // the query tiles it visits: i0 .. i0 + nq - 1
};

template <int KEYS> __device__ __forceinline__ bool make_item(const bwd_params &p, int w, bwd_item &it)
{
    const int tile = w / p.hq;
    it.h = w % p.hq, it.kvh = it.h / p.group;
    int lo = 0, hi = p.batch - 1; // the last sequence whose keys start at or before the tile
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (p.seqs[mid].k_off <= (int64_t)tile * KEYS)
            lo = mid;
        else
            hi = mid - 1;
    }
    it.sq = p.seqs[lo];
    it.c0 = (int)((int64_t)tile * KEYS - it.sq.k_off), it.t = it.c0 / KEYS;
    const int lq = (int)it.sq.lq, lk = (int)it.sq.lk;
    if (it.c0 >= lk)
        return false;
    // (a tile of keys that no query sees, of a sequence with no queries, is
    // an item of no steps: its dK and dV are zeros)
    const int nqt = (lq + BMQ - 1) / BMQ;
    // the reference visits query tile i when its last row sees the key
    // tile's first key (an item of half a tile visits what the tile does:
    // its keys' steps where that row does not see them are the reference's)
    const int tile0 = it.c0 - it.c0 % BN;
    int i0 = 0;
    if (p.causal)
        while (i0 < nqt && (int64_t)(i0 * BMQ + BMQ < lq ? i0 * BMQ + BMQ : lq) - 1 + lk - lq < tile0)
            i0++;
    it.i0 = i0, it.nq = nqt - i0;
    return true;
}

#ifdef MXFA_SM90_CODE

// The rules of a thread's NB square blocks (the 32 keys of warps w & ~1
// and w | 1, the 32 queries of block qb < NB; x holds the thread's 16
// values of each, elements 16 qb .. 16 qb + 15): the largest |x| bits, a
// warp's shuffle, then the neighbouring warp's through shared memory (the
// pair's named barrier). Where that is not finite (a NaN or an Inf in the
// block, rare) both warps of the pair take the exact statistics the same
// way. plain: the block holds no NaN or Inf.
template <class SH, int NB>
__device__ __forceinline__ void square_rules(SH &sh, int kind, int wi, int w, const fp8_fmt &f8, int preset,
                                             const float (&x)[16 * NB], block_rule (&rule)[NB], bool (&plain)[NB])
{
    const uint32_t bar = BAR_PAIR0 + 2 * wi + w / 2;
    const bool lead = threadIdx.x % 32 == 0;
    uint32_t top[NB];
#pragma unroll
    for (int qb = 0; qb < NB; qb++) {
        uint32_t m = 0;
#pragma unroll
        for (int i = 16 * qb; i < 16 * qb + 16; i++)
            m = umax(m, __float_as_uint(x[i]) & 0x7FFFFFFFu);
        top[qb] = reduce_max(m, 32);
        if (lead)
            sh.xtop[kind][wi][w][qb] = top[qb];
    }
    named_sync(bar, 64);
#pragma unroll
    for (int qb = 0; qb < NB; qb++) {
        top[qb] = umax(top[qb], sh.xtop[kind][wi][w ^ 1][qb]);
        plain[qb] = top[qb] < kF32Inf;
        if (plain[qb]) {
            rule[qb] = rule_from_amax(f8, preset, top[qb], false, false);
        } else { // (the same branch in both warps: top is the pair's)
            amax_acc a;
#pragma unroll
            for (int i = 16 * qb; i < 16 * qb + 16; i++)
                a.add(__float_as_uint(x[i]));
            a.reduce(32);
            if (lead) {
                sh.xamax[kind][wi][w][qb] = a.amax;
                sh.xflags[kind][wi][w][qb] = (uint32_t)a.nan | (uint32_t)a.inf << 1;
            }
            named_sync(bar, 64);
            const uint32_t fl = sh.xflags[kind][wi][w ^ 1][qb];
            a.amax = umax(a.amax, sh.xamax[kind][wi][w ^ 1][qb]);
            a.nan |= (fl & 1u) != 0;
            a.inf |= (fl & 2u) != 0;
            rule[qb] = rule_from_amax(f8, preset, a.amax, a.nan, a.inf);
        }
    }
}

// Four values of one square block (fragment elements i .. i + 3: a row's
// two columns, then the same columns 8 rows down) quantized under the
// block's rule and widened to bf16: the two bf16 pairs, the upper row's
// first. A plain block: the scaling, the paired conversions and the
// widening of widen4_plain; otherwise element by element, as the reference.
__device__ __forceinline__ uint2 quantize_widen4(const fp8_fmt &f8, const block_rule &r, bool plain, const float *x)
{
    const uint32_t b0 = __float_as_uint(x[0]), b1 = __float_as_uint(x[1]), b2 = __float_as_uint(x[2]),
                   b3 = __float_as_uint(x[3]);
    if (plain && !r.poisoned && r.scale < 0xFFu) {
        const float rcp = e8m0_reciprocal(r.scale);
        const uint32_t codes =
            r.away ? encode4_away_plain(f8, rcp, b0, b1, b2, b3) : encode4_plain(f8, rcp, b0, b1, b2, b3);
        return fwd90::widen4_plain(codes, e8m0_value(r.scale));
    }
    const uint32_t codes = encode4_general(f8, r, b0, b1, b2, b3);
    uint32_t h[4];
#pragma unroll
    for (int k = 0; k < 4; k++)
        h[k] = fwd90::widen_e4m3(codes >> 8 * k & 0xFFu, r.scale);
    return make_uint2(h[0] | h[1] << 16, h[2] | h[3] << 16);
}

// A thread's 16 NB values of its NB square blocks (x, as square_rules
// takes them) quantized under their rules and widened: the A fragments of
// 2 NB steps (elements 8k .. 8k + 7 in a[k]). The branch is the warp's (a
// pair's rules are its two warps'), taken once: where every block is plain
// the code runs straight, with no jump over the general path at every four
// elements (each such jump cost an instruction fetch).
template <int NB>
__device__ __forceinline__ void quantize_widen_frag(const fp8_fmt &f8, const block_rule (&rule)[NB],
                                                    const bool (&plain)[NB], const float (&x)[16 * NB],
                                                    uint32_t (&a)[2 * NB][4])
{
    bool fast = true;
#pragma unroll
    for (int b = 0; b < NB; b++)
        fast = fast && plain[b] && !rule[b].poisoned && rule[b].scale < 0xFFu;
    if (fast && !rule[0].away) { // (away is the preset's: every block or none)
        float rcp[NB], val[NB];
#pragma unroll
        for (int b = 0; b < NB; b++)
            rcp[b] = e8m0_reciprocal(rule[b].scale), val[b] = e8m0_value(rule[b].scale);
#pragma unroll
        for (int i = 0; i < 16 * NB; i += 4) {
            const uint32_t codes = encode4_plain(f8, rcp[i / 16], __float_as_uint(x[i]), __float_as_uint(x[i + 1]),
                                                 __float_as_uint(x[i + 2]), __float_as_uint(x[i + 3]));
            const uint2 two = fwd90::widen4_plain(codes, val[i / 16]);
            a[i / 8][(i % 8) / 2] = two.x, a[i / 8][(i % 8) / 2 + 1] = two.y;
        }
    } else {
#pragma unroll
        for (int i = 0; i < 16 * NB; i += 4) {
            const uint2 two = quantize_widen4(f8, rule[i / 16], plain[i / 16], &x[i]);
            a[i / 8][(i % 8) / 2] = two.x, a[i / 8][(i % 8) / 2 + 1] = two.y;
        }
    }
}

// Rows (keys) and columns (queries) of accumulator element i of a thread
// in an m64nN fragment: row 16w + g + 8 ((i / 2) % 2), column 8 (i / 4) +
// 2t + i % 2.
__device__ __forceinline__ int frag_row(int w, int g, int i) { return 16 * w + g + 8 * ((i / 2) % 2); }
__device__ __forceinline__ int frag_col(int t, int i) { return 8 * (i / 4) + 2 * t + i % 2; }

// P in fp32 in place of a warpgroup's scores x (its 64 keys from kw, this
// thread's first key0; the step's queries from r0, their offsets pofs),
// as cpu/ref's: 0 for a key past the sequence or past the row's limit, and
// for a row with LSE = -Inf (also the padding rows). Elements i .. i + 3
// (i % 4 = 0) share their two columns. An interior step, where no key of
// the warpgroup's is masked and no row is unseen (all but a sequence's
// last keys and, under the causal mask, the diagonal), tests nothing an
// element. Both fused kernels' (bwd_fp8.cuh's too).
template <int N>
__device__ __forceinline__ void bwd_p_frag(float (&x)[N], const float *pofs, const bwd_params &p, int kw, int key0,
                                           int r0, int t, int lq, int lk)
{
    bool unseen = false;
#pragma unroll
    for (int i = 0; i < N; i += 4) {
        const float2 l2 = *reinterpret_cast<const float2 *>(&pofs[frag_col(t, i)]);
        unseen |= __float_as_uint(l2.x) == POFS_UNSEEN || __float_as_uint(l2.y) == POFS_UNSEEN;
    }
    const bool interior = kw + 63 < lk && (!p.causal || kw + 63 <= r0 + lk - lq) && !__any_sync(0xFFFFFFFFu, unseen);
    if (interior) {
#pragma unroll
        for (int i = 0; i < N; i += 4) {
            const float2 l2 = *reinterpret_cast<const float2 *>(&pofs[frag_col(t, i)]);
            bwd_p2_sm90(x[i], x[i + 1], p.c, l2.x, l2.y);
            bwd_p2_sm90(x[i + 2], x[i + 3], p.c, l2.x, l2.y);
        }
    } else {
#pragma unroll
        for (int i = 0; i < N; i += 2) {
            const int key = key0 + 8 * ((i / 2) % 2), qc = frag_col(t, i), q = r0 + qc;
            const float2 l2 = *reinterpret_cast<const float2 *>(&pofs[qc]);
            // (columns qc and qc + 1, the same key)
            const bool m0 = key >= lk || (p.causal && key > q + lk - lq) || __float_as_uint(l2.x) == POFS_UNSEEN;
            const bool m1 = key >= lk || (p.causal && key > q + 1 + lk - lq) || __float_as_uint(l2.y) == POFS_UNSEEN;
            bwd_p2_sm90(x[i], x[i + 1], p.c, l2.x, l2.y);
            x[i] = m0 ? 0.0f : x[i];
            x[i + 1] = m1 ? 0.0f : x[i + 1];
        }
    }
}

// Row h8 of a thread's m64nDW fragment x (key 16w + g, or 8 more:
// elements 4q + 2 h8 and one more, columns col0 + 8q + 2t and one more)
// into row `tok`, head h of out, each value fl(x scale) where SCALED (the
// reference's dK), as store3 stores it. A contiguous row takes a pair a
// store (the pairs are aligned where the row is), from one address;
// otherwise element by element.
template <int DW, bool SCALED>
__device__ __forceinline__ void store_frag_row(const nd3 &out, int64_t tok, int64_t h, int col0, int t, int h8,
                                               const float (&x)[DW / 2], float scale)
{
    auto val = [&](int i) { return canonical_nan(SCALED ? __fmul_rn(x[i], scale) : x[i]); };
    const int64_t at = tok * out.s0 + h * out.s1 + (int64_t)col0 * out.s2;
    if (out.dtype == MXFA_BF16) {
        uint16_t *row = reinterpret_cast<uint16_t *>(out.base) + at;
        if (out.s2 == 1 && reinterpret_cast<uintptr_t>(row) % 4 == 0) {
            uint32_t *pairs = reinterpret_cast<uint32_t *>(row) + t;
#pragma unroll
            for (int q = 0; q < DW / 8; q++)
                pairs[4 * q] = f32_to_bf16(__float_as_uint(val(4 * q + 2 * h8))) |
                               f32_to_bf16(__float_as_uint(val(4 * q + 2 * h8 + 1))) << 16;
            return;
        }
    } else {
        float *row = reinterpret_cast<float *>(out.base) + at;
        if (out.s2 == 1 && reinterpret_cast<uintptr_t>(row) % 8 == 0) {
            float2 *pairs = reinterpret_cast<float2 *>(row) + t;
#pragma unroll
            for (int q = 0; q < DW / 8; q++)
                pairs[4 * q] = make_float2(val(4 * q + 2 * h8), val(4 * q + 2 * h8 + 1));
            return;
        }
    }
#pragma unroll
    for (int q = 0; q < DW / 8; q++)
#pragma unroll
        for (int e = 0; e < 2; e++)
            store3(out, tok, h, col0 + 8 * q + 2 * t + e, val(4 * q + 2 * h8 + e));
}

// The dQ agent (one thread of the producer warpgroup): for each step of
// the CTA's items, in order, the query tile's turn on its semaphore (key
// tile t), dQ's rows loaded into dqb (the acquire ordered before the async
// proxy's reads), the consumers' sums stored back once they are done, and
// after the query tile's last step the turn passed on. Item 0 (t = 0) is
// every query tile's first (an item's query tiles begin no earlier than
// the items before it do): it loads nothing, and the consumers start its
// chain from +0, so that dQ's buffer needs no zeros beforehand (a query
// tile that no item visits is left as it was, and its semaphore at 0 says
// so to bwd_finish_q). The fused kernels'
// (this one's and bwd_fp8.cuh's): KEYS keys an item, BQ queries a step.
template <int KEYS, int BQ, int D>
__device__ __forceinline__ void dq_agent(const bwd_params &p, float (&dqb)[D / 32][BQ * 32], uint64_t *dq_full,
                                         uint64_t *dq_done, const CUtensorMap *map_dq)
{
    constexpr int SUBS = BMQ / BQ;
    int jd = 0;
    for (int w = (int)blockIdx.x; w < p.items; w += (int)gridDim.x) {
        bwd_item it;
        if (!make_item<KEYS>(p, w, it))
            continue;
        for (int i = it.i0; i < it.i0 + it.nq; i++)
            for (int sub = 0; sub < SUBS; sub++, jd++) {
                const int r0 = i * BMQ + sub * BQ;
                if (r0 >= it.sq.lq)
                    break;
                const bool last_step = sub == SUBS - 1 || r0 + BQ >= it.sq.lq;
                int *sem = p.sem + (int64_t)it.h * (p.q_rows / BMQ) + it.sq.q_off / BMQ + i;
                while (ld_acquire(sem) != it.t)
                    __nanosleep(64);
                asm volatile("fence.proxy.async.global;" ::: "memory");
                const int row = (int)(it.h * p.q_rows + it.sq.q_off) + r0;
                if (it.t == 0) {
                    bar_arrive(dq_full); // (the chain's first: the consumers start from +0)
                } else {
                    bar_expect(dq_full, sizeof dqb);
                    for (int pn = 0; pn < D / 32; pn++)
                        tma_load(dqb[pn], map_dq, 32 * pn, row, dq_full);
                }
                bar_wait_idle(dq_done, jd & 1);
                for (int pn = 0; pn < D / 32; pn++)
                    tma_store(map_dq, 32 * pn, row, dqb[pn]);
                tma_store_commit();
                tma_store_wait_all();
                if (last_step) {
                    asm volatile("fence.proxy.async.global;" ::: "memory");
                    __threadfence();
                    st_release(sem, it.t + 1);
                }
            }
    }
}

// lo and hi rounded to bf16 at nearest even, as a pair (lo in the low half)
__device__ __forceinline__ uint32_t bf16x2(float lo, float hi)
{
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

#endif // MXFA_SM90_CODE

template <int D, bool P_DYNAMIC, bool LEAK_FREE>
__global__ void __launch_bounds__(THREADS, 1)
    attn_bwd_bf16(const __grid_constant__ CUtensorMap map_k, const __grid_constant__ CUtensorMap map_v,
                  const __grid_constant__ CUtensorMap map_kr, const __grid_constant__ CUtensorMap map_q,
                  const __grid_constant__ CUtensorMap map_o, const __grid_constant__ CUtensorMap map_pofs,
                  const __grid_constant__ CUtensorMap map_delta, const __grid_constant__ CUtensorMap map_dq,
                  const bwd_params p)
{
#ifdef MXFA_SM90_CODE
    using cf = bwd_config<D>;
    constexpr int STAGES = cf::STAGES, BQ = cf::BQ, KEYS = cf::KEYS, DW = cf::DW, SUBS = BMQ / BQ;
    constexpr bool SPLIT = cf::SPLIT;
    extern __shared__ uint8_t raw[];
    bwd_shared<D> &sh = aligned_shared<bwd_shared<D>>(raw);
    if (threadIdx.x == 0) {
        bar_init(&sh.kv_full, 1);
        bar_init(&sh.kv_empty, 256);
        init_ring(sh.full, sh.empty, 256);
        bar_init(&sh.dq_full, 1);
        bar_init(&sh.dq_done, 256);
    }
    __syncthreads();

    const int warp = (int)threadIdx.x / 32;
    if (warp < 4) { // the producer
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(PRODUCER_REGS));
        if (threadIdx.x == 32) { // the dQ agent
            dq_agent<KEYS, BQ, D>(p, sh.dqb, &sh.dq_full, &sh.dq_done, &map_dq);
            return;
        }
        if (threadIdx.x != 0)
            return;
        int n = 0, j = 0;
        for (int w = (int)blockIdx.x; w < p.items; w += (int)gridDim.x) {
            bwd_item it;
            if (!make_item<KEYS>(p, w, it))
                continue;
            if (n > 0)
                bar_wait_idle(&sh.kv_empty, (n - 1) & 1);
            const int key = (int)(it.sq.k_off + it.c0);
            bar_expect(&sh.kv_full, sizeof sh.k + sizeof sh.v + (LEAK_FREE ? sizeof sh.kr : 0));
            for (int pn = 0; pn < cf::P; pn++) {
                tma_load(sh.k[pn], &map_k, 64 * pn, (int)(it.kvh * p.k_rows) + key, &sh.kv_full);
                tma_load(sh.v[pn], &map_v, 64 * pn, (int)(it.kvh * p.k_rows) + key, &sh.kv_full);
                if constexpr (LEAK_FREE)
                    tma_load(sh.kr[pn], &map_kr, 64 * pn, (int)(it.kvh * p.k_rows) + key, &sh.kv_full);
            }
            n++;
            for (int i = it.i0; i < it.i0 + it.nq; i++)
                for (int sub = 0; sub < SUBS; sub++, j++) {
                    const int r0 = i * BMQ + sub * BQ;
                    if (r0 >= it.sq.lq)
                        break;
                    const int s = j % STAGES, phase = (j / STAGES) & 1;
                    if (j >= STAGES)
                        bar_wait_idle(&sh.empty[s], phase ^ 1);
                    const int row = (int)(it.h * p.q_rows + it.sq.q_off) + r0;
                    bar_expect(&sh.full[s], sizeof sh.q[0] + sizeof sh.o[0] + sizeof sh.pofs[0] + sizeof sh.delta[0]);
                    for (int pn = 0; pn < cf::P; pn++) {
                        tma_load(sh.q[s][pn], &map_q, 64 * pn, row, &sh.full[s]);
                        tma_load(sh.o[s][pn], &map_o, 64 * pn, row, &sh.full[s]);
                    }
                    tma_load(sh.pofs[s], &map_pofs, (int)it.sq.q_off + r0, it.h, &sh.full[s]);
                    tma_load(sh.delta[s], &map_delta, (int)it.sq.q_off + r0, it.h, &sh.full[s]);
                }
        }
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(CONSUMER_REGS));

    // (the warpgroup through a shuffle from lane 0: ptxas then knows it is
    // the same in every lane and keeps the descriptors made from it in
    // uniform registers, one instruction a step of a product, not six)
    const int wi = __shfl_sync(0xFFFFFFFFu, warp / 4 - 1, 0), w = warp % 4, lane = (int)threadIdx.x % 32, g = lane / 4,
              t = lane % 4;
    const fp8_fmt f8 = fp8_e4m3();
    int n = 0, j = 0;
    for (int item = (int)blockIdx.x; item < p.items; item += (int)gridDim.x) {
        bwd_item it;
        if (!make_item<KEYS>(p, item, it))
            continue;
        const int lq = (int)it.sq.lq, lk = (int)it.sq.lk;
        // dV and dK; SPLIT: one array, the first warpgroup's dV, the
        // second's dK
        float acc[cf::ACCS][DW / 2];
        float(&dv)[DW / 2] = acc[0];
        float(&dk)[DW / 2] = acc[cf::ACCS - 1];
#pragma unroll
        for (int i = 0; i < DW / 2; i++)
            dv[i] = 0.0f, dk[i] = 0.0f;
        bar_wait(&sh.kv_full, n & 1);
        // the warpgroup's keys (the item's rows kw0 ..); SPLIT: its role
        // (role_p: S^T, P and dV; role_ds: dP^T, dS and dK)
        const int kw0 = SPLIT ? 0 : wi * 64;
        const bool role_p = !SPLIT || wi == 0, role_ds = !SPLIT || wi == 1;
        // descriptors: kr's are k's plus KR (in the address field's 16 bytes)
        constexpr uint32_t KR = (uint32_t)(offsetof(bwd_shared<D>, kr) - offsetof(bwd_shared<D>, k)) / 16;
        const uint64_t kd = opaque(desc_sw128(&sh.k[0][kw0 * 64])) + (LEAK_FREE ? KR : 0u),
                       vd = opaque(desc_sw128(&sh.v[0][kw0 * 64]));
        // dQ's B: K's rows MN-major, this warpgroup's half of D's columns
        // (at D = 64 half a 128-byte row: the descriptor starts 64 bytes in);
        // SPLIT: dQ^T's A, K's rows MN-major, 64 of the warpgroup's columns
        // a panel (the second panel's descriptor is this one's plus KP)
        const uint64_t kmn = opaque(desc_sw128_mn(SPLIT ? &sh.k[2 * wi][0] : D == 128 ? &sh.k[wi][0] : &sh.k[0][32 * wi],
                                                  KEYS * 128));
        constexpr uint32_t KP = (uint32_t)(sizeof sh.k[0]) / 16;
        // this thread's keys (rows of its fragments) in the sequence
        const int key0 = it.c0 + kw0 + 16 * w + g;
        // the leak-free mask's diagonal blocks of query tile qi (bit b: keys
        // c0 + 32 b ..): where some row of the tile sees the block in part.
        // (Made again where it is used: ptxas keeps no register for it
        // across a step, which at D = 128 it has not.)
        auto diag_bits = [&](int qi) {
            unsigned d = 0;
            if constexpr (LEAK_FREE) {
                asm volatile("" : "+r"(qi));
                const fwd90::q_tile qt = fwd90::make_q_tile(qi * BMQ, lq, lk, true);
#pragma unroll
                for (int b = 0; b < KEYS / 32; b++)
                    d |= (unsigned)qt.diagonal(it.c0 + 32 * b) << b;
            }
            return d;
        };
        unsigned kr_raw = 0xFu; // the leak-free mask: kr's blocks still in bf16
        for (int qi = it.i0; qi < it.i0 + it.nq; qi++) {
            // the leak-free mask: kr's blocks that this query tile sees
            // whole, in K's quantized rows from now on (both warpgroups past
            // every product that read kr before the copy, and past the copy
            // before the next)
            if constexpr (LEAK_FREE) {
                const fwd90::q_tile qt = fwd90::make_q_tile(qi * BMQ, lq, lk, true);
                unsigned whole = 0;
#pragma unroll
                for (int b = 0; b < KEYS / 32; b++) {
                    const int kb0 = it.c0 + 32 * b, klast = kb0 + 31 < lk - 1 ? kb0 + 31 : lk - 1;
                    whole |= (unsigned)(kb0 < lk && klast <= qt.lim_first) << b;
                }
                if (whole & kr_raw) {
                    named_sync(BAR_CONSUMERS, 256);
                    // (each warpgroup copies its half of the item's blocks)
#pragma unroll
                    for (int b = wi * KEYS / 64; b < (wi + 1) * KEYS / 64; b++)
                        if ((whole & kr_raw) >> b & 1u)
#pragma unroll
                            for (int pn = 0; pn < cf::P; pn++) {
                                // 32 rows of 128 bytes: 256 pieces of 16
                                const uint4 *src = reinterpret_cast<const uint4 *>(&sh.k[pn][32 * b * 64]);
                                uint4 *dst = reinterpret_cast<uint4 *>(&sh.kr[pn][32 * b * 64]);
                                const int x = (int)threadIdx.x % 128;
                                dst[x] = src[x], dst[x + 128] = src[x + 128];
                            }
                    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                    named_sync(BAR_CONSUMERS, 256);
                    kr_raw &= ~whole;
                }
            }
            // this warp's block (a pair of warps' 32 keys) in bf16
            const bool wdiag = (diag_bits(qi) >> (kw0 / 32 + w / 2) & 1u) != 0;
            // S^T; SPLIT: the first warpgroup issues the next step's during
            // this one's, where the next step is of the same query tile (the
            // leak-free mask's kr may change between tiles): s_ahead
            float sc[BQ / 2];
            bool s_ahead = false;
            for (int sub = 0; sub < SUBS; sub++) {
                const int r0 = qi * BMQ + sub * BQ;
                if (r0 >= lq)
                    break;
                const int s = j % STAGES;
                bar_wait(&sh.full[s], (j / STAGES) & 1);
                // S^T = K Q^T from zero, then dP^T = V dO^T from an
                // accumulator of +0 (as the reference's chain: a first step
                // without one would make -0 of products that are all -0, and
                // dS = P (dP - delta) with delta = 0 keeps that sign into
                // dS's codes), both along D, in two groups: P is made while
                // dP's product runs (SPLIT: each its role's)
                float dp[BQ / 2];
                const uint64_t qd = opaque(desc_sw128(sh.q[s][0])), od = opaque(desc_sw128(sh.o[s][0]));
#pragma unroll
                for (int i = 0; i < BQ / 2; i++)
                    dp[i] = 0.0f;
                auto issue_s = [&](uint64_t qdesc) {
                    chain_sw128<BQ, D, KEYS, true, SPLIT>(sc, kd, qdesc);
                    wgmma_commit();
                };
                auto issue_dp = [&] {
                    chain_sw128<BQ, D, KEYS, false>(dp, vd, od);
                    wgmma_commit();
                };
                // (SPLIT: each product waited for in its own branch, so
                // that no accumulator in flight meets the other branch's
                // values where the two join)
                if constexpr (SPLIT) {
                    if (role_p) {
                        if (!s_ahead) {
                            wgmma_fence();
                            issue_s(qd);
                            wgmma_wait<0>();
                            fence_regs(sc);
                        }
                    } else {
                        wgmma_fence();
                        issue_dp();
                        wgmma_wait<0>();
                        fence_regs(dp);
                    }
                } else {
                    wgmma_fence();
                    issue_s(qd);
                    issue_dp();
                    wgmma_wait<1>();
                    fence_regs(sc);
                }
                uint32_t pa[BQ / 16][4];
                // P: in place of S (SPLIT: beside it, so that S^T's
                // registers are written by its products only, and the next
                // step's may be in flight where branches join)
                float p_split[BQ / 2];
                float(&pf)[BQ / 2] = SPLIT ? p_split : sc;
                if (role_p) {
                    if constexpr (SPLIT) {
#pragma unroll
                        for (int i = 0; i < BQ / 2; i++)
                            pf[i] = sc[i];
                    }
                    // P in fp32 (kept for dS)
                    bwd_p_frag(pf, sh.pofs[s], p, it.c0 + kw0, key0, r0, t, lq, lk);
                    // P quantized and widened: the A fragments of dV's four
                    // steps (queries 16kk .. 16kk + 15: elements 8kk .. 8kk + 7)
                    if (wdiag) {
                        // the leak-free mask: P rounded to bf16 (both warps of
                        // the pair: no square block's statistics to exchange)
#pragma unroll
                        for (int i = 0; i < BQ / 2; i += 2)
                            pa[i / 8][(i % 8) / 2] = bf16x2(pf[i], pf[i + 1]);
                    } else if constexpr (P_DYNAMIC) {
                        // square blocks under rceil
                        block_rule rule[BQ / 32];
                        bool plain[BQ / 32];
                        square_rules(sh, 0, wi, w, f8, 0, pf, rule, plain);
                        quantize_widen_frag(f8, rule, plain, pf, pa);
                    } else {
                        // E4M3(P * 256) under the scale 2^-8, in four instructions
                        // a pair (p_pair_const); a warp with a NaN P (P is at least
                        // +0 or NaN: its bits' unsigned maximum is above Inf just
                        // when one is NaN) widens code by code, a NaN code to NaN
                        uint32_t top = 0;
#pragma unroll
                        for (int i = 0; i < BQ / 2; i++)
                            top = umax(top, __float_as_uint(pf[i]));
                        // (the warp's choice made once, outside the pairs: the
                        // common path's code then runs straight, with no jump
                        // over the rare one's at every pair)
                        auto codes = [&](int i) {
                            return (uint32_t)__nv_cvt_float2_to_fp8x2(
                                make_float2(__fmul_rn(pf[i], 256.0f), __fmul_rn(pf[i + 1], 256.0f)), __NV_SATFINITE,
                                __NV_E4M3);
                        };
                        if (!__any_sync(0xFFFFFFFFu, top > kF32Inf)) {
#pragma unroll
                            for (int i = 0; i < BQ / 2; i += 2)
                                pa[i / 8][(i % 8) / 2] = fwd90::p_pair_const(codes(i));
                        } else {
#pragma unroll
                            for (int i = 0; i < BQ / 2; i += 2) {
                                const uint32_t two = codes(i);
                                pa[i / 8][(i % 8) / 2] =
                                    fwd90::widen_p(two & 0xFFu, 127) | fwd90::widen_p(two >> 8 & 0xFFu, 127) << 16;
                            }
                        }
                    }
                    // SPLIT: P for the other warpgroup's dS (the barrier's
                    // arrival orders the stores before its reads)
                    if constexpr (SPLIT) {
#pragma unroll
                        for (int i = 0; i < BQ / 2; i++)
                            sh.split_p(i, (int)threadIdx.x % 128) = pf[i];
                        named_arrive(BAR_P, 256);
                    }
                    // dV += P^T dO (dO as B: MN-major, 16 query rows a step, all
                    // of D's columns); dP and dV both waited for before dS
                    // (P's fragments are not held past here: with them ptxas
                    // ran out of registers; SPLIT: held to the step's end)
                    const uint64_t omn = opaque(desc_sw128_mn(sh.o[s][0], BQ * 128));
                    wgmma_fence();
#pragma unroll
                    for (int kk = 0; kk < BQ / 16; kk++)
                        wgmma_bf16<DW>::rs_mn(dv, pa[kk], omn + kk * (16 * 128 / 16));
                    wgmma_commit();
                    if constexpr (SPLIT) { // (waited for with dQ's product)
                        s_ahead = sub + 1 < SUBS && r0 + BQ < lq;
                        if (s_ahead) {
                            const int sn = (j + 1) % STAGES;
                            bar_wait(&sh.full[sn], ((j + 1) / STAGES) & 1);
                            wgmma_fence();
                            issue_s(opaque(desc_sw128(sh.q[sn][0])));
                        }
                    }
                } // role_p

                // dS = P (dP - delta), 0 where P is 0 (the reference skips
                // it); SPLIT: P from the first warpgroup
                if constexpr (SPLIT) {
                    if (role_ds) {
                        named_sync(BAR_P, 256);
#pragma unroll
                        for (int i = 0; i < BQ / 2; i++)
                            pf[i] = sh.split_p(i, (int)threadIdx.x % 128);
                    }
                } else {
                    wgmma_wait<0>();
                    fence_regs(dp);
                    fence_regs(dv);
                    hold_fragments(pa);
                }
                uint32_t da[BQ / 16][4];
                uint64_t dsd; // dQ's operand dS (SPLIT: the second warpgroup's)
                if (role_ds) {
#pragma unroll
                    for (int i = 0; i < BQ / 2; i += 4) {
                        const float2 dl = *reinterpret_cast<const float2 *>(&sh.delta[s][frag_col(t, i)]);
#pragma unroll
                        for (int k = 0; k < 4; k++)
                            dp[i + k] = pf[i + k] == 0.0f ? 0.0f : __fmul_rn(pf[i + k], __fsub_rn(dp[i + k], k % 2 ? dl.y : dl.x));
                    }
                    // dS quantized in square blocks with the preset, widened: the
                    // A fragments of dK's steps, and, transposed, dQ's A in
                    // shared memory (in the buffer of the step's parity, which
                    // the dQ products of two steps back read: both warpgroups
                    // finished them before the previous step's barrier)
                    {
                        if (wdiag) { // the leak-free mask: dS rounded to bf16
#pragma unroll
                            for (int i = 0; i < BQ / 2; i += 4)
                                da[i / 8][(i % 8) / 2] = bf16x2(dp[i], dp[i + 1]),
                                                 da[i / 8][(i % 8) / 2 + 1] = bf16x2(dp[i + 2], dp[i + 3]);
                        } else {
                            block_rule rule[BQ / 32];
                            bool plain[BQ / 32];
                            square_rules(sh, 1, wi, w, f8, p.preset, dp, rule, plain);
                            quantize_widen_frag(f8, rule, plain, dp, da);
                        }
                        // dS^T, queries as rows: da[k]'s registers are four
                        // 8 x 8 blocks (keys 16w + 8 (m % 2), queries 16k + 8
                        // (m / 2)), each stored transposed; this lane gives
                        // row lane % 8 of block lane / 8 (its 8 keys, 16 bytes
                        // at the swizzle's chunk)
                        const int m = lane / 8, r = lane % 8;
                        uint16_t *panel;
                        if constexpr (SPLIT)
                            panel = sh.split_ds(j & 1);
                        else
                            panel = sh.ds[j & 1][wi];
                        const uint32_t dsa = smem_addr(panel) + (uint32_t)(8 * (m / 2) + r) * 128 +
                                             ((uint32_t)((2 * w + m % 2) ^ r) << 4);
#pragma unroll
                        for (int k = 0; k < BQ / 16; k++)
                            stmatrix_x4_trans(dsa + k * (16 * 128), da[k]);
                    }
                    // dK += dS^T Q, issued at once (its A is this thread's); then
                    // this query tile's turn on its semaphore, both warpgroups'
                    // dS written (generic writes made visible to the tensor
                    // cores), dQ loaded and dQ += dS K
                    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                    // (dS: both warpgroups' keys, dQ's A; SPLIT: the item's,
                    // dQ^T's B)
                    const uint64_t qmn = opaque(desc_sw128_mn(sh.q[s][0], BQ * 128));
                    dsd = opaque(desc_sw128(SPLIT ? sh.split_ds(j & 1) : sh.ds[j & 1][0]));
                    wgmma_fence();
#pragma unroll
                    for (int kk = 0; kk < BQ / 16; kk++)
                        wgmma_bf16<DW>::rs_mn(dk, da[kk], qmn + kk * (16 * 128 / 16));
                    wgmma_commit();
                } else {
                    dsd = opaque(desc_sw128(sh.split_ds(j & 1)));
                } // role_ds
                // both warpgroups' dS written; dQ from the agent's load
                named_sync(BAR_CONSUMERS, 256);
                bar_wait(&sh.dq_full, j & 1);
                if constexpr (SPLIT) {
                    // dQ^T += K^T dS^T: the warpgroup's 128 columns of D as
                    // the rows of two products (A: K's rows MN-major, 64
                    // columns a panel; B: dS's query rows), the step's
                    // queries as their columns, the item's keys along K.
                    // Element i of product mi: column d = 128 wi + 64 mi +
                    // 16w + g + 8 ((i / 2) % 2) of query 8 (i / 4) + 2t +
                    // i % 2, in dqb's panel d / 32 (see bwd_shared)
                    float dq[2][BQ / 2];
                    auto dq_at = [&](int mi, int i) -> float & {
                        const int d = D / 2 * wi + 64 * mi + 16 * w + g + 8 * ((i / 2) % 2), c = d % 32;
                        const int q = 8 * (i / 4) + 2 * t + i % 2;
                        return *reinterpret_cast<float *>(reinterpret_cast<uint8_t *>(sh.dqb[d / 32]) + 128 * q +
                                                          16 * ((c / 4) ^ (q % 8)) + 4 * (c % 4));
                    };
#pragma unroll
                    for (int mi = 0; mi < 2; mi++)
#pragma unroll
                        for (int i = 0; i < BQ / 2; i++)
                            dq[mi][i] = it.t == 0 ? 0.0f : dq_at(mi, i);
                    const unsigned diag = diag_bits(qi);
                    wgmma_fence();
#pragma unroll
                    for (int mi = 0; mi < 2; mi++)
#pragma unroll
                        for (int kk = 0; kk < KEYS / 16; kk++) {
                            const uint64_t ka =
                                LEAK_FREE ? opaque(kmn + mi * KP + (uint64_t)((diag >> (kk / 2) & 1u) * KR)) : kmn + mi * KP;
                            wgmma_bf16<BQ>::ss_tn(dq[mi], ka + kk * (16 * 128 / 16), dsd + (kk % 4) * 2);
                        }
                    wgmma_commit();
                    wgmma_wait<0>();
                    fence_regs(dq[0]);
                    fence_regs(dq[1]);
                    fence_regs(dk); // (dV in the first warpgroup: the same array)
                    fence_regs(sc); // (the next step's S^T, where s_ahead)
                    if (role_p)
                        hold_fragments(pa);
                    else
                        hold_fragments(da);
#pragma unroll
                    for (int mi = 0; mi < 2; mi++)
#pragma unroll
                        for (int i = 0; i < BQ / 2; i++)
                            dq_at(mi, i) = dq[mi][i];
                } else {
                    float dq[D / 4];
                    // element pair i of the fragment (row 16w + g + 8 ((i / 2) %
                    // 2), columns wi D / 2 + 8 (i / 4) + 2t and one more): the
                    // thread's base, the panel and the row half as immediate
                    // offsets, and four chunk offsets (the swizzle's xor with the
                    // row's g), so that few addresses stay live over the product
                    uint8_t *dqs = reinterpret_cast<uint8_t *>(sh.dqb) + (wi * (D / 64)) * (BQ * 128) + (16 * w + g) * 128 +
                                   ((((uint32_t)t >> 1) ^ ((uint32_t)g & 1)) << 4) + (t & 1) * 8;
                    uint32_t chunk[4];
#pragma unroll
                    for (int m = 0; m < 4; m++)
                        chunk[m] = ((uint32_t)(2 * m) ^ ((uint32_t)g & 6)) << 4;
                    auto dq_pair = [&](int i) {
                        return reinterpret_cast<float2 *>(dqs + (i / 16) * (BQ * 128) + ((i / 2) % 2) * 1024 + chunk[(i / 4) % 4]);
                    };
#pragma unroll
                    for (int i = 0; i < D / 4; i += 2) {
                        const float2 v2 = it.t == 0 ? make_float2(0.0f, 0.0f) : *dq_pair(i);
                        dq[i] = v2.x, dq[i + 1] = v2.y;
                    }
                    const unsigned diag = diag_bits(qi);
                    wgmma_fence();
#pragma unroll
                    for (int kk = 0; kk < KEYS / 16; kk++) {
                        // (kr for a diagonal block of 32 keys; the base made
                        // where it is used, so that ptxas does not hold four)
                        const uint64_t kb = LEAK_FREE ? opaque(kmn + (uint64_t)((diag >> (kk / 2) & 1u) * KR)) : kmn;
                        wgmma_bf16<D / 2>::ss_mn(dq, dsd + (kk / 4) * (BQ * 128 / 16) + (kk % 4) * 2,
                                                 kb + kk * (16 * 128 / 16));
                    }
                    wgmma_commit();
                    wgmma_wait<0>();
                    fence_regs(dq);
                    fence_regs(dk);
                    hold_fragments(da);
#pragma unroll
                    for (int i = 0; i < D / 4; i += 2)
                        *dq_pair(i) = make_float2(dq[i], dq[i + 1]);
                }
                // (the generic writes made visible to the agent's store)
                asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                bar_arrive(&sh.dq_done);
                // (no barrier here: the next step's dS goes to the other
                // buffer, and the one after it is written only past the
                // next step's barrier, which each warpgroup reaches after
                // this product)
                bar_arrive(&sh.empty[s]);
                j++;
            }
        }
        // the item's keys' dK and dV: the outputs' rows, or this query
        // head's partials (dK before the scale)
        if (p.direct) {
#pragma unroll
            for (int h8 = 0; h8 < 2; h8++) {
                const int key = key0 + 8 * h8;
                if (key < lk) {
                    if (role_ds)
                        store_frag_row<DW, true>(p.dk_out, it.sq.k0 + key, it.kvh, 0, t, h8, dk, p.scale);
                    if (role_p)
                        store_frag_row<DW, false>(p.dv_out, it.sq.k0 + key, it.kvh, 0, t, h8, dv, 1.0f);
                }
            }
        } else {
            const int64_t base = ((int64_t)it.h * p.k_rows + it.sq.k_off + it.c0 + kw0) * D;
#pragma unroll
            for (int i = 0; i < DW / 2; i += 2) {
                const int64_t at = base + (int64_t)frag_row(w, g, i) * D + frag_col(t, i);
                if (role_ds)
                    *reinterpret_cast<float2 *>(p.dk + at) = make_float2(dk[i], dk[i + 1]);
                if (role_p)
                    *reinterpret_cast<float2 *>(p.dv + at) = make_float2(dv[i], dv[i + 1]);
            }
        }
        bar_arrive(&sh.kv_empty);
        n++;
    }
#endif
}

} // namespace bwd90
} // namespace mxfa_gpu

#endif
