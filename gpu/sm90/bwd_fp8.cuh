// SPDX-License-Identifier: BSD-3-Clause
// The fused attention backward on Hopper under the sm90-fp8 model, bit for
// bit the algorithm of cpu/ref/attn_bwd.c (docs/NUMERICS.md, "Attention
// backward") at D = 64 and 128, every mask, const or dynamic P, the
// reference's tiles of 128 queries and 128 keys. Memory O(S): no score
// matrix anywhere.
//
// Every product of the model is a chain of 32-blocks: one fp8 wgmma k32
// into a zero accumulator, then on the CUDA cores acc = fma(partial,
// 2^(sa + sb), acc) in fp32 (a bare fma where the product of the block's
// two scales is a float, the exact promotion of wgmma.cuh, out of line,
// where it is not). fp8 wgmma reads both operands K-major, so the packing
// (attn_bwd.cu) gives each operand in the orientation its product reduces
// along: Q, K and dO quantized in 32 x 32 square blocks as rows [H][rows][D]
// and, the same bytes, transposed [H][D][rows]; V in row blocks along D;
// their scales as floats (2^(e - 127)), one a square block, one a row's
// block of V.
//
// The kernel is bwd_bf16.cuh's (the items, the persistent cooperative grid,
// the producer and its dQ agent, dQ chained under the per-query-tile
// semaphore) with steps of 32 queries, every product made as m64n32k32
// pieces through a ring of partial accumulators: a piece is promoted while
// the next ones run. A consumer warpgroup's 64 keys (the rows of S^T, dP^T,
// dV and dK) and, for dQ^T = K^T dS^T, 64 of D's columns (D = 128) or 16
// of the step's queries (D = 64):
//     S^T  = K Q^T    D / 32 pieces along D, from +0
//     dP^T = V dO^T   D / 32 pieces along D, from +0
//     dV  += P^T dO   D / 32 pieces of 32 of D's columns (A: P's codes in
//                     registers)
//     dK  += dS^T Q   D / 32 pieces of 32 columns (A: dS's codes)
//     dQ^T += K^T dS^T  4 pieces along the item's 128 keys (both
//                     warpgroups' dS, in shared memory)
// The score accumulator's element (key, query) becomes a register A operand
// without leaving its thread: within a 32-query block, the k32 product sums
// its 32 products as a set, so Q^T and dO^T store their queries in the
// order in which a thread's accumulator columns fill its A fragment
// (query_of_column). dS goes to shared memory as dQ^T's B by stmatrix
// .trans, two keys' codes a 16-bit element, which puts a warp's 16 keys in
// the order 0, 8, 1, 9, ... (key_of_pair); K^T stores its keys so.
//
// The leak-free mask: where some row of the query tile sees a 32-key block
// in part, the block's products take bf16 operands, as the reference's do
// (S^T with K rounded to bf16 from the input and Q widened from its codes;
// dV, dK and dQ^T with P and dS rounded to bf16, dO and Q widened, K in
// bf16). Such a step widens the step's Q and dO into shared memory, and a
// warpgroup with such a block makes, beside each fp8 piece of S^T, dV and
// dK, the same rows' bf16 steps on a copy, which the block's rows take
// (wgmma's rows are the warpgroup's 64 keys, two blocks); a diagonal block
// of dQ^T's keys is a piece of its own, its two bf16 steps taken in place
// of the fp8 piece. Those steps wait for the pieces in flight; the ring
// holds two partials under this mask (beside the bf16 paths a third
// spilled).
#ifndef MXFA_GPU_SM90_BWD_FP8_CUH
#define MXFA_GPU_SM90_BWD_FP8_CUH

#include "sm90/bwd_bf16.cuh"
#include "sm90/wgmma.cuh"

namespace mxfa_gpu {
namespace bwd90 {

// Position f (0..31) of a 32-query block of Q^T or dO^T holds query
// query_of_column(f): a thread's A fragment columns 4t .. 4t + 3 (and 16
// more) are its accumulator columns 2t, 2t + 1, 8 + 2t, 9 + 2t.
__host__ __device__ constexpr int query_of_column(int f)
{
    return (f / 16) * 16 + 8 * ((f % 4) / 2) + 2 * ((f % 16) / 4) + f % 2;
}
// Position f of a 32-key block of K^T and of dS in shared memory holds key
// key_of_pair(f): a 16-bit element is the codes of keys g and g + 8.
__host__ __device__ constexpr int key_of_pair(int f) { return (f / 16) * 16 + (f % 16) / 2 + 8 * (f % 2); }

template <int D> struct bwd8_config {
    static_assert(D == 64 || D == 128, "head dim");
    static constexpr int KEYS = 128; // keys an item: a key tile
    static constexpr int BQ = 32;    // queries a step: one square block
    static constexpr int STAGES = 4;
    static constexpr int RING = 3;   // partial accumulators in flight
    static constexpr int DB = D / 32;
    // a row of scales in the packed arrays: DB floats, at least 4 (a tensor
    // copy's row is a multiple of 16 bytes)
    static constexpr int SW = DB < 4 ? 4 : DB;
    // pieces of a step: S^T, dP^T, dV and dK DB each, dQ^T 4 (its keys). At
    // D = 64 dQ^T has one block of 64 rows (D), so each warpgroup makes 16
    // of the step's queries (n16); at 128 each makes 64 of D's rows.
    static constexpr int NP = DB, PIECES = 4 * DB + 4, DQN = D == 128 ? 32 : 16;
    // a piece is issued RING - 1 pieces ahead of its promotion: dV's first
    // (its A, P's codes, made once S^T is promoted), dK's (dS, once dP^T
    // is) and dQ^T's (both warpgroups' dS) are issued after what they need
    static_assert(RING <= NP + 1, "the ring runs ahead of P, dS or dQ's barrier");
};

// Shared memory: K, V, Q and dO rows in D-byte swizzle (128 bytes), K^T and
// dS in 128-byte swizzle (the item's 128 keys a row), Q^T and dO^T in
// 32-byte swizzle (the step's 32 queries a row).
template <int D, bool LEAK> struct __align__(1024) bwd8_shared {
    using cf = bwd8_config<D>;
    static constexpr int KEYS = cf::KEYS, BQ = cf::BQ, STAGES = cf::STAGES, DB = cf::DB, SW = cf::SW;
    uint8_t k[KEYS * D];            // A of S^T
    uint8_t v[KEYS * D];            // A of dP^T
    uint8_t kt[D * KEYS];           // A of dQ^T (keys in pair order)
    uint8_t q[STAGES][BQ * D];      // B of S^T
    uint8_t o[STAGES][BQ * D];      // B of dP^T
    uint8_t qt[STAGES][D * BQ];     // B of dK (queries in column order)
    uint8_t ot[STAGES][D * BQ];     // B of dV
    uint8_t ds[2][BQ * KEYS];       // B of dQ^T: the step's query rows, keys in pair order; by the step's parity
    float dqb[D / 32][BQ * 32];     // dQ of the step's rows, as bwd_shared's
    alignas(128) float pofs[STAGES][BQ];
    alignas(128) float delta[STAGES][BQ];
    // the step's Q and dO scales, one a block of D (DB of each 32; a tensor
    // copy's destination is 128-byte aligned)
    alignas(128) float qs[STAGES][32];
    alignas(128) float os[STAGES][32];
    alignas(128) float ks[KEYS / 32][SW]; // the item's K scales [key block][block of D]
    alignas(128) float vs[KEYS][SW];      // V's [key][block of D]
    float dss[2][KEYS / 32];             // dS's scales of the step's key blocks, by parity
    // the leak-free mask's (one element without it), in 64-column panels:
    // K rounded to bf16 (A of S^T and, MN-major, of dQ^T on the diagonal
    // blocks), the step's Q and dO widened to bf16 (B of S^T, MN-major of dK
    // and dV), dS in bf16 [parity][64 keys][query][64 keys] (B of dQ^T)
    static constexpr int LP = LEAK ? D / 64 : 1, LR = LEAK ? 64 : 1;
    alignas(1024) uint16_t kr[LP][KEYS * LR];
    alignas(1024) uint16_t qw[LP][BQ * LR];
    alignas(1024) uint16_t ow[LP][BQ * LR];
    alignas(1024) uint16_t dsb[2][LEAK ? 2 : 1][BQ * LR];
    // and P and dS in bf16 as A of dV's and dK's steps, [warpgroup][16
    // queries][key][16 queries] in 32-byte swizzle (through shared memory,
    // not held in registers beside the rest: that spilled)
    alignas(1024) uint16_t pbs[LEAK ? 2 : 1][2][LEAK ? 64 * 16 : 8];
    alignas(1024) uint16_t dbs[LEAK ? 2 : 1][2][LEAK ? 64 * 16 : 8];
    uint32_t xtop[2][2][4][2];           // square_rules' exchange (bwd_shared's)
    uint32_t xamax[2][2][4][2];
    uint32_t xflags[2][2][4][2];
    uint64_t kv_full, kv_empty, full[STAGES], empty[STAGES], dq_full, dq_done;
};
template <int D, bool LEAK> constexpr size_t BWD8_SMEM_BYTES = sizeof(bwd8_shared<D, LEAK>) + 1024;
static_assert(BWD8_SMEM_BYTES<128, true> <= 227 * 1024 && BWD8_SMEM_BYTES<64, true> <= 227 * 1024,
              "shared memory of an H100 or H200 CTA");

struct bwd8_params {
    bwd_params b;
    // (the rows of scales SW floats, bwd8_config's)
    const float *qs, *os; // [Hq][q_rows / 32][SW]
    const float *ks;      // [Hkv][k_rows / 32][SW]
    const float *vs;      // [Hkv][k_rows][SW]
};

#ifdef MXFA_SM90_CODE

// a warpgroup's named barrier (bwd_barrier's 2 and 3 are free)
constexpr uint32_t BAR_WG0 = 2;

// A warp's two 16-query bf16 A fragments (f[kk]: rows 16w + g and + 8,
// queries 16kk + 2t ..) stored as rows of tile[kk] ([key][16 queries],
// 32-byte swizzle): the leak-free mask's P and dS.
template <class TILES>
__device__ __forceinline__ void store_bf16_frags(TILES &tile, int w, int lane, const uint32_t (&f)[2][4])
{
    const int mm = lane / 8, row = 16 * w + 8 * (mm % 2) + lane % 8;
#pragma unroll
    for (int kk = 0; kk < 2; kk++)
        stmatrix_x4(smem_addr(tile[kk]) + (uint32_t)row * 32 + ((uint32_t)((mm / 2) ^ ((row >> 2) & 1)) << 4), f[kk]);
}

__device__ __forceinline__ bool fma_exact_scale(float s) { return s != 0.0f && fabsf(s) != __uint_as_float(kF32Inf); }

// A piece's scales: sa's float a0 on the upper row half of the fragment
// ((i / 2) % 2 = 0), a1 on the lower, sb's b; their products, and whether
// the thread's are floats (neither 0 nor Inf), which makes the promotion
// one fma an element (a thread's own choice: the exact promotion gives the
// fma's bits wherever the fma is exact, so a warp that diverges here
// computes what it would together; a warp vote cost 15% of the time). Made
// before the piece's wait, so that their loads overlap the product.
struct piece_scales {
    float a0, a1, b, s0, s1;
    bool fast;
};
__device__ __forceinline__ piece_scales scales_of(float a0, float a1, float b)
{
    piece_scales ps;
    ps.a0 = a0, ps.a1 = a1, ps.b = b, ps.s0 = __fmul_rn(a0, b), ps.s1 = __fmul_rn(a1, b);
    ps.fast = fma_exact_scale(ps.s0) && fma_exact_scale(ps.s1);
    return ps;
}

// The exact promotion of a piece's m elements (x[0]: the partial, x[1]: the
// accumulator, updated), where a scale product is 0 or Inf (scales near
// E8M0's ends): rare, so out of line, through local memory; inlined at
// every piece it made the kernel's code 40% larger, and the instruction
// fetches of the common path slower.
__device__ __noinline__ void promote_slow(float (*x)[16], int m, float a0, float a1, float b)
{
#pragma unroll 1
    for (int i = 0; i < m; i++)
        x[1][i] = promote_exact(x[0][i], (i / 2) % 2 ? a1 : a0, b, x[1][i]);
}

// acc[off + i] = fma(part[i], 2^(sa + sb), acc[off + i]) over a piece's M
// elements (16, or 8 of an n16 piece): the fma, or where the thread's scale
// products are not both floats the exact promotion element by element.
template <int M, int N>
__device__ __forceinline__ void promote(float (&acc)[N], int off, const float (&part)[16], const piece_scales &ps)
{
    if (ps.fast) {
#pragma unroll
        for (int i = 0; i < M; i++)
            acc[off + i] = __fmaf_rn(part[i], (i / 2) % 2 ? ps.s1 : ps.s0, acc[off + i]);
    } else {
        float x[2][16];
#pragma unroll
        for (int i = 0; i < M; i++)
            x[0][i] = part[i], x[1][i] = acc[off + i];
        promote_slow(x, M, ps.a0, ps.a1, ps.b);
#pragma unroll
        for (int i = 0; i < M; i++)
            acc[off + i] = x[1][i];
    }
}

__device__ __forceinline__ void wgmma_wait_n(int n)
{
    if (n <= 0)
        wgmma_wait<0>();
    else if (n == 1)
        wgmma_wait<1>();
    else if (n == 2)
        wgmma_wait<2>();
    else
        wgmma_wait<3>();
}

// A thread's 16 values of one square block as the fp8 A fragment of a k32
// product (accumulator elements 0, 1, 4, 5 in register 0, 2, 3, 6, 7 in 1,
// and 8 higher in 2 and 3: see query_of_column), under the block's rule.
__device__ __forceinline__ void encode_frag(const fp8_fmt &f8, const block_rule &r, bool plain, const float (&x)[16],
                                            uint32_t (&a)[4])
{
#pragma unroll
    for (int m = 0; m < 4; m++) {
        const int i = 8 * (m / 2) + 2 * (m % 2);
        const uint32_t v[4] = {__float_as_uint(x[i]), __float_as_uint(x[i + 1]), __float_as_uint(x[i + 4]),
                               __float_as_uint(x[i + 5])};
        a[m] = encode4<true>(f8, r, plain, v);
    }
}

// The step's rows of Q or dO (BQ rows of D codes in D-byte swizzle) widened
// to bf16 under their square blocks' scales (the floats scales[D / 32], as
// the packing stores them), into 64-column panels in 128-byte swizzle: the
// leak-free mask's operands, made by the 256 consumer threads, 8 elements a
// piece.
template <int D, class PANELS>
__device__ __forceinline__ void widen_rows(const uint8_t *rows, const float *scales, PANELS &out)
{
    constexpr int BQ = 32;
    for (int pc = (int)threadIdx.x - 128; pc < BQ * D / 8; pc += 256) {
        const int r = pc / (D / 8), c = (pc % (D / 8)) * 8;
        const int swz = D == 128 ? (r & 7) : ((r >> 1) & 3);
        const uint2 codes = *reinterpret_cast<const uint2 *>(rows + r * D + (((c >> 4) ^ swz) << 4) + (c & 15));
        const uint32_t sc = __float_as_uint(scales[c / 32]) >> 23 & 0xFFu; // the scale's code (0xFF: NaN)
        uint32_t h[8];
#pragma unroll
        for (int e = 0; e < 8; e++)
            h[e] = fwd90::widen_e4m3((e < 4 ? codes.x : codes.y) >> (8 * (e % 4)) & 0xFFu, sc);
        const int cc = c % 64;
        uint8_t *dst = reinterpret_cast<uint8_t *>(out[c / 64]) + r * 128 + ((((cc * 2) >> 4) ^ (r & 7)) << 4);
        *reinterpret_cast<uint4 *>(dst) = make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16, h[6] | h[7] << 16);
    }
}

#endif // MXFA_SM90_CODE

template <int D, bool P_DYNAMIC, bool LEAK_FREE>
__global__ void __launch_bounds__(THREADS, 1)
    attn_bwd_fp8(const __grid_constant__ CUtensorMap map_k, const __grid_constant__ CUtensorMap map_v,
                 const __grid_constant__ CUtensorMap map_kt, const __grid_constant__ CUtensorMap map_q,
                 const __grid_constant__ CUtensorMap map_o, const __grid_constant__ CUtensorMap map_qt,
                 const __grid_constant__ CUtensorMap map_ot, const __grid_constant__ CUtensorMap map_pofs,
                 const __grid_constant__ CUtensorMap map_delta, const __grid_constant__ CUtensorMap map_dq,
                 const __grid_constant__ CUtensorMap map_qs, const __grid_constant__ CUtensorMap map_os,
                 const __grid_constant__ CUtensorMap map_ks, const __grid_constant__ CUtensorMap map_vs,
                 const __grid_constant__ CUtensorMap map_kr, const bwd8_params p8)
{
#ifdef MXFA_SM90_CODE
    using cf = bwd8_config<D>;
    constexpr int STAGES = cf::STAGES, BQ = cf::BQ, KEYS = cf::KEYS, RING = LEAK_FREE ? 2 : cf::RING, SUBS = BMQ / BQ;
    constexpr int NP = cf::NP, PIECES = cf::PIECES, DQN = cf::DQN;
    const bwd_params &p = p8.b;
    extern __shared__ uint8_t raw[];
    bwd8_shared<D, LEAK_FREE> &sh = aligned_shared<bwd8_shared<D, LEAK_FREE>>(raw);
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
            const int key = (int)(it.sq.k_off + it.c0), krow = (int)(it.kvh * p.k_rows) + key;
            bar_expect(&sh.kv_full, sizeof sh.k + sizeof sh.v + sizeof sh.kt + sizeof sh.ks + sizeof sh.vs +
                                        (LEAK_FREE ? sizeof sh.kr : 0));
            if constexpr (LEAK_FREE)
                for (int pn = 0; pn < D / 64; pn++)
                    tma_load(sh.kr[pn], &map_kr, 64 * pn, krow, &sh.kv_full);
            tma_load(sh.k, &map_k, 0, krow, &sh.kv_full);
            tma_load(sh.v, &map_v, 0, krow, &sh.kv_full);
            tma_load(sh.kt, &map_kt, key, it.kvh * D, &sh.kv_full);
            tma_load(sh.ks, &map_ks, 0, krow / 32, &sh.kv_full);
            tma_load(sh.vs, &map_vs, 0, krow, &sh.kv_full);
            n++;
            for (int i = it.i0; i < it.i0 + it.nq; i++)
                for (int sub = 0; sub < SUBS; sub++, j++) {
                    const int r0 = i * BMQ + sub * BQ;
                    if (r0 >= it.sq.lq)
                        break;
                    const int s = j % STAGES, phase = (j / STAGES) & 1;
                    if (j >= STAGES)
                        bar_wait_idle(&sh.empty[s], phase ^ 1);
                    const int qrow = (int)it.sq.q_off + r0, row = (int)(it.h * p.q_rows) + qrow;
                    bar_expect(&sh.full[s], sizeof sh.q[0] + sizeof sh.o[0] + sizeof sh.qt[0] + sizeof sh.ot[0] +
                                                sizeof sh.pofs[0] + sizeof sh.delta[0] + 2 * cf::SW * 4);
                    tma_load(sh.q[s], &map_q, 0, row, &sh.full[s]);
                    tma_load(sh.o[s], &map_o, 0, row, &sh.full[s]);
                    tma_load(sh.qt[s], &map_qt, qrow, it.h * D, &sh.full[s]);
                    tma_load(sh.ot[s], &map_ot, qrow, it.h * D, &sh.full[s]);
                    tma_load(sh.pofs[s], &map_pofs, qrow, it.h, &sh.full[s]);
                    tma_load(sh.delta[s], &map_delta, qrow, it.h, &sh.full[s]);
                    tma_load(sh.qs[s], &map_qs, 0, row / 32, &sh.full[s]);
                    tma_load(sh.os[s], &map_os, 0, row / 32, &sh.full[s]);
                }
        }
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(CONSUMER_REGS));

    const int wi = __shfl_sync(0xFFFFFFFFu, warp / 4 - 1, 0), w = warp % 4, lane = (int)threadIdx.x % 32, g = lane / 4,
              t = lane % 4;
    const fp8_fmt f8 = fp8_e4m3();
    // this thread's key block (of the item's four: warps w & ~1 and w | 1
    // of warpgroup wi); dQ^T's first row (of D) and query of the
    // warpgroup's, and the thread's block of D as a row of it
    const int kb = 2 * wi + w / 2, d0 = D == 128 ? 64 * wi : 0, q0 = D == 128 ? 0 : 16 * wi,
              db_row = (d0 + 16 * w) / 32;
    int n = 0, j = 0;
    for (int item = (int)blockIdx.x; item < p.items; item += (int)gridDim.x) {
        bwd_item it;
        if (!make_item<KEYS>(p, item, it))
            continue;
        const int lq = (int)it.sq.lq, lk = (int)it.sq.lk;
        float dv[D / 2], dk[D / 2];
#pragma unroll
        for (int i = 0; i < D / 2; i++)
            dv[i] = 0.0f, dk[i] = 0.0f;
        bar_wait(&sh.kv_full, n & 1);
        const int kw0 = wi * 64;
        auto desc_rows = [](const uint8_t *ptr) { return D == 128 ? desc_sw128(ptr) : desc_sw64(ptr); };
        const uint64_t kd = opaque(desc_rows(&sh.k[kw0 * D])), vd = opaque(desc_rows(&sh.v[kw0 * D])),
                       ktd = opaque(desc_sw128(&sh.kt[d0 * KEYS]));
        const int key0 = it.c0 + kw0 + 16 * w + g;
        // dQ^T's element i: column d = d0 + 16w + g + 8 ((i / 2) % 2) of
        // query q0 + 8 (i / 4) + 2t + i % 2, in dqb's panel d / 32
        auto dq_at = [&](int i) -> float & {
            const int d = d0 + 16 * w + g + 8 * ((i / 2) % 2), c = d % 32;
            const int q = q0 + 8 * (i / 4) + 2 * t + i % 2;
            return *reinterpret_cast<float *>(reinterpret_cast<uint8_t *>(sh.dqb[d / 32]) + 128 * q +
                                              16 * ((c / 4) ^ (q % 8)) + 4 * (c % 4));
        };
        for (int qi = it.i0; qi < it.i0 + it.nq; qi++) {
            // the leak-free mask's diagonal blocks of this query tile (bit b:
            // keys c0 + 32b ..): their products take bf16 operands
            unsigned diag = 0;
            if constexpr (LEAK_FREE) {
                const fwd90::q_tile qt = fwd90::make_q_tile(qi * BMQ, lq, lk, true);
#pragma unroll
                for (int b = 0; b < KEYS / 32; b++)
                    diag |= (unsigned)qt.diagonal(it.c0 + 32 * b) << b;
            }
            const bool wdiag = (diag >> kb & 1u) != 0, wgdiag = (diag >> (2 * wi) & 3u) != 0;
            for (int sub = 0; sub < SUBS; sub++) {
                const int r0 = qi * BMQ + sub * BQ;
                if (r0 >= lq)
                    break;
                const int s = j % STAGES;
                bar_wait(&sh.full[s], (j / STAGES) & 1);
                if (LEAK_FREE && diag) {
                    // Q and dO widened to bf16 (from their codes, under their
                    // square blocks' scales) for the diagonal blocks' products,
                    // once both warpgroups are past the previous step's
                    named_sync(BAR_CONSUMERS, 256);
                    widen_rows<D>(sh.q[s], sh.qs[s], sh.qw);
                    widen_rows<D>(sh.o[s], sh.os[s], sh.ow);
                    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                    named_sync(BAR_CONSUMERS, 256);
                }
                const uint64_t qd = opaque(desc_rows(sh.q[s])), od = opaque(desc_rows(sh.o[s])),
                               qtd = opaque(desc_sw32(sh.qt[s])), otd = opaque(desc_sw32(sh.ot[s])),
                               dsd = opaque(desc_sw128(&sh.ds[j & 1][q0 * KEYS]));
                float part[RING][16];
                float sc[16], dp[16], dq[DQN / 2];
                uint32_t pa[1][4], da[1][4];
                float sp = 0.0f, sds = 0.0f; // P's and dS's scales of this thread's block
#pragma unroll
                for (int i = 0; i < 16; i++)
                    sc[i] = 0.0f, dp[i] = 0.0f;
                // the step's pieces: S^T 0 .. NP - 1, dP^T NP .., dV 2 NP ..,
                // dK 3 NP .., dQ^T 4 NP .. 4 NP + 3
                auto issue = [&](int k) {
                    float(&d)[16] = part[k % RING];
                    wgmma_fence();
                    if (k < NP)
                        wgmma_k32_n32(d, kd + 2 * k, qd + 2 * k);
                    else if (k < 2 * NP)
                        wgmma_k32_n32(d, vd + 2 * (k - NP), od + 2 * (k - NP));
                    else if (k < 3 * NP)
                        wgmma_k32_rs_n32(d, pa[0], otd + 64 * (k - 2 * NP));
                    else if (k < 4 * NP)
                        wgmma_k32_rs_n32(d, da[0], qtd + 64 * (k - 3 * NP));
                    else if constexpr (DQN == 32)
                        wgmma_k32_n32(d, ktd + 2 * (k - 4 * NP), dsd + 2 * (k - 4 * NP));
                    else
                        wgmma_k32_n16(d, ktd + 2 * (k - 4 * NP), dsd + 2 * (k - 4 * NP));
                    wgmma_commit();
                };
#pragma unroll
                for (int k = 0; k < RING; k++)
                    issue(k);
#pragma unroll
                for (int k = 0; k < PIECES; k++) {
                    // the piece's scales (P's, dS's and dS's shared ones made
                    // by the hooks of earlier pieces)
                    piece_scales ps;
                    if (k < NP)
                        ps = scales_of(sh.ks[kb][k], sh.ks[kb][k], sh.qs[s][k]);
                    else if (k < 2 * NP)
                        ps = scales_of(sh.vs[kw0 + 16 * w + g][k - NP], sh.vs[kw0 + 16 * w + g + 8][k - NP],
                                       sh.os[s][k - NP]);
                    else if (k < 3 * NP)
                        ps = scales_of(sp, sp, sh.os[s][k - 2 * NP]);
                    else if (k < 4 * NP)
                        ps = scales_of(sds, sds, sh.qs[s][k - 3 * NP]);
                    else
                        ps = scales_of(sh.dss[j & 1][k - 4 * NP], sh.dss[j & 1][k - 4 * NP], sh.ks[k - 4 * NP][db_row]);
                    wgmma_wait_n(k + RING - 1 < PIECES ? RING - 1 : PIECES - 1 - k);
                    float(&d)[16] = part[k % RING];
                    fence_regs(d);
                    if (k < NP) {
                        promote<16>(sc, 0, d, ps);
                    } else if (k < 2 * NP) {
                        promote<16>(dp, 0, d, ps);
                    } else if (k < 4 * NP) {
                        // dV (dK): the fp8 piece promoted; where the warpgroup
                        // has a diagonal block, the same columns' two bf16
                        // steps on a copy, which that block's rows take
                        const bool kv = k < 3 * NP;
                        const int c = kv ? k - 2 * NP : k - 3 * NP;
                        float(&acc)[D / 2] = kv ? dv : dk;
                        float alt[16];
                        if (LEAK_FREE && wgdiag) {
                            wgmma_wait<0>(); // (nothing in flight while alt is written)
#pragma unroll
                            for (int i = 0; i < 16; i++)
                                alt[i] = acc[16 * c + i];
                            const uint64_t bmn = desc_sw128_mn(kv ? &sh.ow[c / 2][32 * (c % 2)] : &sh.qw[c / 2][32 * (c % 2)],
                                                               BQ * 128);
                            wgmma_fence();
#pragma unroll
                            for (int kk = 0; kk < 2; kk++)
                                wgmma_bf16<32>::ss_mn(alt, desc_sw32(kv ? sh.pbs[wi][kk] : sh.dbs[wi][kk]),
                                                      bmn + kk * (16 * 128 / 16));
                            wgmma_commit();
                            wgmma_wait<0>();
                            fence_regs(alt);
                        }
                        promote<16>(acc, 16 * c, d, ps);
                        if (LEAK_FREE && wdiag)
#pragma unroll
                            for (int i = 0; i < 16; i++)
                                acc[16 * c + i] = alt[i];
                    } else {
                        const int b = k - 4 * NP; // the key block
                        if (LEAK_FREE && (diag >> b & 1u)) {
                            // a diagonal block: two bf16 steps on dQ^T (A: K in
                            // bf16, MN-major; B: dS in bf16), in place of the piece
                            // (on a copy made while nothing runs: dQ itself is
                            // written by the promotions while pieces run, and
                            // an accumulator of a wgmma must not be, or ptxas
                            // serializes every wgmma; the copies in asm, which
                            // ptxas does not fold back into dQ)
                            wgmma_wait<0>();
                            float alt[DQN / 2];
#pragma unroll
                            for (int i = 0; i < DQN / 2; i++)
                                asm volatile("mov.b32 %0, %1;" : "=f"(alt[i]) : "f"(dq[i]));
                            const uint64_t kmn = desc_sw128_mn(&sh.kr[d0 / 64][0], KEYS * 128);
                            wgmma_fence();
#pragma unroll
                            for (int e = 0; e < 2; e++) {
                                const int kk = 2 * b + e; // 16 keys
                                const uint64_t bd = desc_sw128(&sh.dsb[j & 1][kk / 4][q0 * 64]) + (kk % 4) * 2;
                                if constexpr (DQN == 32)
                                    wgmma_bf16<32>::ss_tn(alt, kmn + kk * (16 * 128 / 16), bd);
                                else
                                    wgmma_bf16<16>::ss_tn(alt, kmn + kk * (16 * 128 / 16), bd);
                            }
                            wgmma_commit();
                            wgmma_wait<0>();
                            fence_regs(alt);
#pragma unroll
                            for (int i = 0; i < DQN / 2; i++)
                                asm volatile("mov.b32 %0, %1;" : "=f"(dq[i]) : "f"(alt[i]));
                        } else if (it.c0 + 32 * b < lk) {
                            // (a block past the sequence's last key is no step
                            // of the reference's chain: its +0 partial would
                            // turn a -0 dQ into +0)
                            promote<DQN / 2>(dq, 0, d, ps);
                        }
                    }
                    if (k == NP - 1) {
                        if (LEAK_FREE && wgdiag) {
                            // S^T on the diagonal blocks: a bf16 chain along D
                            // from zero (A: K in bf16, B: Q widened), which
                            // their rows take
                            float alt[16];
                            wgmma_wait<0>();
                            const uint64_t krd = desc_sw128(&sh.kr[0][kw0 * 64]), qwd = desc_sw128(sh.qw[0]);
                            wgmma_fence();
                            chain_sw128<32, D, KEYS, true>(alt, krd, qwd);
                            wgmma_commit();
                            wgmma_wait<0>();
                            fence_regs(alt);
                            if (wdiag)
#pragma unroll
                                for (int i = 0; i < 16; i++)
                                    sc[i] = alt[i];
                        }
                        // P in fp32 (kept for dS)
                        bwd_p_frag(sc, sh.pofs[s], p, it.c0 + kw0, key0, r0, t, lq, lk);
                        // P's codes: dV's A fragment (the leak-free mask's
                        // diagonal blocks: P rounded to bf16, both warps of
                        // the pair)
                        if (LEAK_FREE && wdiag) {
                            uint32_t pbf[2][4];
#pragma unroll
                            for (int i = 0; i < 16; i += 2)
                                pbf[i / 8][(i % 8) / 2] = bf16x2(sc[i], sc[i + 1]);
                            store_bf16_frags(sh.pbs[wi], w, lane, pbf);
#pragma unroll
                            for (int m = 0; m < 4; m++)
                                pa[0][m] = 0u; // (the fp8 piece's rows of this block are not taken)
                            sp = 1.0f;
                        } else if constexpr (P_DYNAMIC) {
                            block_rule rule[1];
                            bool plain[1];
                            square_rules(sh, 0, wi, w, f8, 0, sc, rule, plain);
                            encode_frag(f8, rule[0], plain[0], sc, pa[0]);
                            sp = scale_float(rule[0].scale);
                        } else {
                            // E4M3(P * 256) under 2^-8 (a NaN P: the NaN code)
                            auto codes = [&](int i) {
                                return (uint32_t)__nv_cvt_float2_to_fp8x2(
                                    make_float2(__fmul_rn(sc[i], 256.0f), __fmul_rn(sc[i + 1], 256.0f)),
                                    __NV_SATFINITE, __NV_E4M3);
                            };
#pragma unroll
                            for (int m = 0; m < 4; m++) {
                                const int i = 8 * (m / 2) + 2 * (m % 2);
                                pa[0][m] = codes(i) | codes(i + 4) << 16;
                            }
                            sp = 0x1p-8f;
                        }
                        if (LEAK_FREE && wgdiag) {
                            // the diagonal blocks' P in bf16, stored by both
                            // pairs' warps, visible to dV's bf16 steps
                            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                            named_sync(BAR_WG0 + wi, 128);
                        }
                    }
                    if (k == 2 * NP - 1) {
                        // dS = P (dP - delta), 0 where P is 0; its codes
                        // (dK's A fragment) and, transposed, dQ^T's B
#pragma unroll
                        for (int i = 0; i < 16; i += 4) {
                            const float2 dl = *reinterpret_cast<const float2 *>(&sh.delta[s][frag_col(t, i)]);
#pragma unroll
                            for (int e = 0; e < 4; e++)
                                dp[i + e] = sc[i + e] == 0.0f
                                                ? 0.0f
                                                : __fmul_rn(sc[i + e], __fsub_rn(dp[i + e], e % 2 ? dl.y : dl.x));
                        }
                        if (LEAK_FREE && wdiag) {
                            // the leak-free mask's diagonal block: dS rounded
                            // to bf16, dK's A and, transposed (as
                            // bwd_bf16.cuh's), dQ^T's B
                            uint32_t dbf[2][4];
#pragma unroll
                            for (int i = 0; i < 16; i += 2)
                                dbf[i / 8][(i % 8) / 2] = bf16x2(dp[i], dp[i + 1]);
                            store_bf16_frags(sh.dbs[wi], w, lane, dbf);
                            const int m = lane / 8, r = lane % 8;
                            const uint32_t dsa = smem_addr(sh.dsb[j & 1][wi]) + (uint32_t)(8 * (m / 2) + r) * 128 +
                                                 ((uint32_t)((2 * w + m % 2) ^ r) << 4);
#pragma unroll
                            for (int kk = 0; kk < 2; kk++)
                                stmatrix_x4_trans(dsa + kk * (16 * 128), dbf[kk]);
#pragma unroll
                            for (int m = 0; m < 4; m++)
                                da[0][m] = 0u;
                            sds = 1.0f;
                        }
                        block_rule rule[1];
                        bool plain[1];
                        if (!(LEAK_FREE && wdiag)) {
                            square_rules(sh, 1, wi, w, f8, p.preset, dp, rule, plain);
                            encode_frag(f8, rule[0], plain[0], dp, da[0]);
                            sds = scale_float(rule[0].scale);
                            if (lane == 0 && w % 2 == 0)
                                sh.dss[j & 1][kb] = sds;
                        }
                        // dS^T's 8 x 8 matrices of 16-bit pairs (keys g and
                        // g + 8 of the warp's 16; queries 8m .. 8m + 7), each
                        // stored transposed: lane l gives the row of query
                        // 8 (l / 8) + l % 8, the warp's 16 bytes in it
                        uint32_t sb[4];
#pragma unroll
                        for (int m = 0; m < 2; m++) {
                            sb[2 * m] = __byte_perm(da[0][2 * m], da[0][2 * m + 1], 0x5140);
                            sb[2 * m + 1] = __byte_perm(da[0][2 * m], da[0][2 * m + 1], 0x7362);
                        }
                        const int qrow = lane;
                        const uint32_t at = smem_addr(sh.ds[j & 1]) + (uint32_t)qrow * 128 +
                                            ((uint32_t)((4 * wi + w) ^ (qrow % 8)) << 4);
                        stmatrix_x4_trans(at, sb);
                    }
                    if (k == 3 * NP - 1) {
                        // both warpgroups' dS written (and visible to the
                        // tensor cores); dQ from the agent's load
                        hold_fragments(pa);
                        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                        named_sync(BAR_CONSUMERS, 256);
                        bar_wait(&sh.dq_full, j & 1);
#pragma unroll
                        for (int i = 0; i < DQN / 2; i++)
                            dq[i] = it.t == 0 ? 0.0f : dq_at(i);
                    }
                    if (k == 4 * NP - 1)
                        hold_fragments(da);
                    if (k + RING < PIECES)
                        issue(k + RING);
                }
#pragma unroll
                for (int i = 0; i < DQN / 2; i++)
                    dq_at(i) = dq[i];
                asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                bar_arrive(&sh.dq_done);
                bar_arrive(&sh.empty[s]);
                j++;
            }
        }
        if (p.direct) {
#pragma unroll
            for (int h8 = 0; h8 < 2; h8++) {
                const int key = key0 + 8 * h8;
                if (key < lk) {
                    store_frag_row<D, true>(p.dk_out, it.sq.k0 + key, it.kvh, 0, t, h8, dk, p.scale);
                    store_frag_row<D, false>(p.dv_out, it.sq.k0 + key, it.kvh, 0, t, h8, dv, 1.0f);
                }
            }
        } else {
            const int64_t base = ((int64_t)it.h * p.k_rows + it.sq.k_off + it.c0 + kw0) * D;
#pragma unroll
            for (int i = 0; i < D / 2; i += 2) {
                const int64_t at = base + (int64_t)frag_row(w, g, i) * D + frag_col(t, i);
                *reinterpret_cast<float2 *>(p.dk + at) = make_float2(dk[i], dk[i + 1]);
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
