// SPDX-License-Identifier: BSD-3-Clause
// The fused sm100 attention backward kernel: one CTA per SM walks the work
// items (key tile x query head) and keeps dK and dV in tensor memory for
// the whole of an item, bit for bit the algorithm of cpu/ref/attn_bwd.c
// under the sm100 model (docs/NUMERICS.md, "Attention backward") for
// D = 64 and 128, no mask or the plain causal one, const or dynamic P.
// attn_bwd.cu packs the operands and launches it; what it does not take
// goes to the composition (gpu/sm90/attn_bwd.cu on Blackwell's GEMMs).
//
// The reference loops over key tiles, and for each over the query tiles it
// visits, in order. An item here is one key tile of one query head, so its
// chains of dV and dK over the query blocks are the reference's own, one
// instruction a 32-block in tensor memory. For each visited query tile:
//   S^T  = K Q^T     (M = 128 keys, N = 128 queries, along D, from zero)
//   dP^T = V dO^T    (the same shape)
//   P = E(RN_f16(min(fma(S, c, 2^-11 - LSE log2 e), 0))), quantized const or
//       dynamic (square blocks)
//   dS = P (dP - delta), quantized in square blocks with the call's preset
//   dV += P^T dO, dK += dS^T Q   (M = 128 keys, N = D, along the queries)
//   dQ  = dQ + dS K             (M = 128 queries, N = D, along the keys)
// With keys as M, a thread owns a key's row of P and dS; their square
// blocks are a warp's 32 lanes x 32 columns, whose maximum is a shuffle.
//
// dQ is where this differs from the published design, which adds each key
// tile's fp32 partial into global memory. The reference carries one chain
// per query row over the key blocks in order, each step rounded, so here
// the dQ product starts from the running dQ as its C: a semaphore per
// (head, query tile) counts the key tiles done, the item of key tile t
// waits for the value t, loads dQ into tensor memory, runs its steps,
// stores dQ back and sets t + 1. The items are handed out in the order
// (key tile, head) to a grid of at most one CTA an SM, each CTA taking its
// items in increasing order, so the smallest unfinished item never waits
// for a larger one: no deadlock.
//
// Warps (512 threads, four warpgroups for setmaxnreg):
// - 0-7: the key rows. Warp w owns lanes 32 (w % 4) .. + 31 of tensor
//   memory (keys) and the queries 64 (w / 4) .. + 63 of the tile: it makes
//   P and dS, their codes and scales in shared memory, and at the end of an
//   item reads dK and dV out.
// - 8-11: dQ, a query row a thread: the semaphore, dQ into and out of
//   tensor memory.
// - 12: the producer (the tensor-memory accelerator and bulk copies).
// - 13: allocates tensor memory and issues the MMAs and scale copies.
// - 14-15: only complete the warpgroup.
//
// Tensor memory (512 columns, 128 lanes): S^T in [0, 128), dP^T in
// [128, 256), dV in [256, 256 + D), dK in [256 + D, 256 + 2D), dQ after
// them at D = 64. At D = 128 that is all of it, so dQ takes S's columns
// once S has been read. The scale factors go where an accumulator is dead,
// behind the barriers that already order the accumulators:
// - S's (K, Q) in dP's columns: dP's last reading (the dS of the previous
//   tile) is done before the MMA warp gets here;
// - dP's (V, dO) and dV's (P, dO^T) in S's columns, once the key rows have
//   loaded S (`s_read`: one barrier more than the products need);
// - dK's (dS, Q^T) and dQ's (dS^T, K^T) in dP's columns, once dS is made.
// The ISA orders an MMA after a tcgen05.cp, and after an MMA on the same
// accumulator, nothing else: where a copy or a product overwrites columns
// that an earlier product reads, the MMA warp has waited for that product's
// commit, directly or through the barrier chain (docs/BLACKWELL.md).
//
// Not yet run on Blackwell hardware; `mxfa selftest` checks it there.
#ifndef MXFA_GPU_SM100_ATTN_BWD_CUH
#define MXFA_GPU_SM100_ATTN_BWD_CUH

#include "attn_fwd.cuh"

namespace mxfa_gpu {
namespace {

constexpr int BWD_THREADS = 512;
constexpr int BWD_ROW_REGS = 176, BWD_DQ_REGS = 96, BWD_OTHER_REGS = 64;
// The kernel's named barrier (id 0 is __syncthreads'): the BM threads that
// store dQ meet at BAR_DQ_STORED before its semaphore is released.
enum bwd100_barrier : uint32_t { BAR_DQ_STORED = 1 };
// setmaxnreg moves registers between the warpgroups inside the CTA's
// allocation (128 a thread at 512 threads): the counts times the warps must
// add up to it exactly, or an increase would wait forever. A key-row thread
// holds 64 values of P while it makes dS; at 128 registers ptxas spills.
static_assert(8 * BWD_ROW_REGS + 4 * BWD_DQ_REGS + 4 * BWD_OTHER_REGS == 16 * 128, "register split");

// What the kernel reads and writes besides the tensor maps: the scale
// atoms of the packed operands (a 512-byte atom a 128-row tile), the packed
// LSE and delta, the fp32 accumulators, and the semaphores of dQ.
struct bwd_buffers {
    const uint8_t *q_sf, *o_sf, *qt_sf, *ot_sf; // [Hq][q_rows / 128] atoms
    const uint8_t *k_sf, *v_sf, *kt_sf;         // [Hkv][k_rows / 128] atoms
    const float *lse, *delta;                   // [Hq][q_rows]; padding: -Inf, 0
    float *dq;                                  // [Hq][q_rows][D], zero at the start
    float *dk, *dv;                             // [Hq][k_rows][D], one query head's
    int *sem;                                   // [Hq][q_rows / 128], zero at the start
};

// An item: key tile `tile` (global, over the packed keys) of query head h.
struct bwd_item {
    int h, kvh, b;
    int64_t c0;   // first key of the tile in its sequence
    int64_t t;    // its index among the sequence's key tiles
    int64_t i0;   // first query tile it visits (in the sequence)
    int nq;       // query tiles it visits
    int nkb;      // 32-key blocks of the tile that hold keys
    seq_info sq;
};

__device__ __forceinline__ bwd_item make_item(int64_t w, int64_t hq, int group, const seq_info *seqs, int batch,
                                              bool causal)
{
    bwd_item it;
    const int64_t tile = w / hq;
    it.h = (int)(w % hq), it.kvh = it.h / group;
    it.b = last_at_or_below(batch, tile * BN, [&](int s) { return seqs[s].k_off; });
    it.sq = seqs[it.b];
    it.c0 = tile * BN - it.sq.k_off, it.t = it.c0 / BN;
    const int64_t lq = it.sq.lq, lk = it.sq.lk, nqt = (lq + BM - 1) / BM;
    // the reference visits query tile r0 when its last row sees key c0
    auto visits = [&](int64_t i) {
        const int64_t last = min(i * BM + BM, lq) - 1;
        return !causal || last + lk - lq >= it.c0;
    };
    int64_t i0 = 0;
    if (causal) { // the visited tiles are a suffix: start near the first, then settle
        i0 = max((int64_t)0, (it.c0 - (lk - lq) - (BM - 1)) / BM);
        i0 = min(i0, nqt);
        while (i0 > 0 && visits(i0 - 1))
            i0--;
        while (i0 < nqt && !visits(i0))
            i0++;
    }
    it.i0 = i0;
    it.nq = it.c0 < lk ? (int)(nqt - i0) : 0;
    it.nkb = (int)min((int64_t)(BN / 32), (lk - it.c0 + 31) / 32);
    return it;
}

template <int D> struct bwd_layout {
    static constexpr uint32_t S_COL = 0, DP_COL = 128, DV_COL = 256, DK_COL = 256 + D, TMEM_COLS = 512;
    // dQ: columns of its own where they are left (D = 64), else S's
    static constexpr bool DQ_OWN = DK_COL + 2 * D <= TMEM_COLS;
    static constexpr uint32_t DQ_COL = DQ_OWN ? DK_COL + D : S_COL;
    // the scale words of each product (4 columns an atom)
    static constexpr uint32_t SF_S_A = DP_COL, SF_S_B = DP_COL + 4;        // K, Q
    static constexpr uint32_t SF_DP_A = S_COL, SF_DP_B = S_COL + 4;        // V, dO
    static constexpr uint32_t SF_DV_A = S_COL + 8, SF_DV_B = S_COL + 12;   // P^T, dO^T
    static constexpr uint32_t SF_DK_A = DP_COL, SF_DK_B = DP_COL + 4;      // dS^T, Q^T
    static constexpr uint32_t SF_DQ_A = DP_COL + 8, SF_DQ_B = DP_COL + 12; // dS, K^T
    static_assert(DK_COL + D <= TMEM_COLS, "tensor memory layout");
    // at D = 128 dV's scales live in S's columns, which dQ then takes: dQ's
    // C is stored only after dV has finished (dv_done)
};

template <int D> struct __align__(1024) bwd_shared {
    // [128 rows][D] K-major (D = 128: 128-byte swizzle; 64: 64-byte), and
    // [D rows][128] K-major along the tile (128-byte swizzle)
    uint8_t k[BN * D], v[BN * D], kt[D * BN];
    uint8_t q[BM * D], o[BM * D], qt[D * BM], ot[D * BM];
    uint8_t pt[BN * BM];  // P^T codes: a key row of 128 queries
    uint8_t dst[BN * BM]; // dS^T codes, the same
    uint8_t ds[BM * BN];  // dS codes: a query row of 128 keys
    alignas(128) uint8_t sf_k[SF_ATOM], sf_v[SF_ATOM], sf_kt[SF_ATOM];
    alignas(128) uint8_t sf_q[SF_ATOM], sf_o[SF_ATOM], sf_qt[SF_ATOM], sf_ot[SF_ATOM];
    // the scales of pt, dst (rows: keys) and ds (rows: queries)
    alignas(128) uint8_t sf_p[SF_ATOM], sf_dst[SF_ATOM], sf_ds[SF_ATOM];
    alignas(16) float lse[2][BM], delta[2][BM]; // by iteration parity
    uint64_t kv_full, kv_empty, q_full, q_empty, qt_full, qt_empty;
    uint64_t s_full, s_read, dp_full, p_ready, dv_done, ds_ready, dq_loaded, dq_done, dq_read, dkdv_read;
    uint32_t tmem;
};
// At least half of an SM's shared memory, so that one CTA runs on an SM:
// two would share 512 tensor-memory columns, and the second's allocation
// would wait for the first, which may wait for the second's dQ. (512
// threads at 128 registers fill the register file as well; this does not
// rest on that alone.)
template <int D> constexpr size_t BWD_SMEM = sizeof(bwd_shared<D>) + 1024 > 120 * 1024
                                                 ? sizeof(bwd_shared<D>) + 1024
                                                 : 120 * 1024;
template <int D> constexpr bool bwd_aligned()
{
    using sh = bwd_shared<D>;
    return offsetof(sh, k) % 1024 == 0 && offsetof(sh, v) % 1024 == 0 && offsetof(sh, kt) % 1024 == 0 &&
           offsetof(sh, q) % 1024 == 0 && offsetof(sh, o) % 1024 == 0 && offsetof(sh, qt) % 1024 == 0 &&
           offsetof(sh, ot) % 1024 == 0 && offsetof(sh, pt) % 1024 == 0 && offsetof(sh, dst) % 1024 == 0 &&
           offsetof(sh, ds) % 1024 == 0;
}
static_assert(bwd_aligned<64>() && bwd_aligned<128>(), "shared memory layout");

// Byte of (r, c) inside a 512-byte scale atom (128 rows x 4 blocks).
__host__ __device__ __forceinline__ int sf_byte(int r, int c)
{
    return (r % 32) * 16 + (r / 32) * 4 + c;
}

#ifdef MXFA_SM100_CODE
// Two 16-byte chunks (32 codes) into row `row` of a 128-byte-swizzled
// operand of 128-byte rows, at chunks c and c + 1 of the row.
__device__ __forceinline__ void store_chunks(uint8_t *base, int row, int c, const uint32_t (&w)[8])
{
    uint4 *r = reinterpret_cast<uint4 *>(base + row * 128);
    r[c ^ (row % 8)] = make_uint4(w[0], w[1], w[2], w[3]);
    r[(c + 1) ^ (row % 8)] = make_uint4(w[4], w[5], w[6], w[7]);
}

// The same 32 codes down column `col` of rows r0 .. r0 + 31 (the transpose).
__device__ __forceinline__ void store_column(uint8_t *base, int r0, int col, const uint32_t (&w)[8])
{
#pragma unroll
    for (int x = 0; x < 32; x++) {
        const int r = r0 + x;
        base[r * 128 + (((col / 16) ^ (r % 8)) * 16) + col % 16] = (uint8_t)(w[x / 4] >> (8 * (x % 4)));
    }
}

// Codes of 32 fp32 values (bits) of one square block, whose other values
// the warp's other lanes hold, under `preset`; the block's scale byte.
__device__ __forceinline__ uint32_t quantize_square(const uint32_t (&x)[32], int preset, uint32_t (&w)[8])
{
    amax_acc acc;
#pragma unroll
    for (int i = 0; i < 32; i++)
        acc.add(x[i]);
    acc.reduce(32);
    const fp8_fmt f = fp8_e4m3();
    const block_rule rule = rule_from_amax(f, preset, acc.amax, acc.nan, acc.inf);
    const bool plain = !acc.nan && !acc.inf;
#pragma unroll
    for (int i = 0; i < 8; i++)
        w[i] = encode4(f, rule, plain, &x[4 * i]);
    return rule.scale;
}
#endif

template <int D, bool P_DYNAMIC>
__global__ void __launch_bounds__(BWD_THREADS, 1)
    attn_bwd_fused(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_o,
                   const __grid_constant__ CUtensorMap map_qt, const __grid_constant__ CUtensorMap map_ot,
                   const __grid_constant__ CUtensorMap map_k, const __grid_constant__ CUtensorMap map_v,
                   const __grid_constant__ CUtensorMap map_kt, bwd_buffers buf, const seq_info *seqs, int batch,
                   int group, int64_t hq, int64_t n_work, int64_t q_rows, int64_t k_rows, bool causal, float c,
                   float log2e, int preset)
{
#ifdef MXFA_SM100_CODE
    using hd = head_dims<D>;
    using ly = bwd_layout<D>;
    constexpr int KB = D / 32;
    extern __shared__ uint8_t raw[];
    bwd_shared<D> &sh = aligned_shared<bwd_shared<D>>(raw);
    const int tid = (int)threadIdx.x, warp = tid / 32, lane = tid % 32;

    if (tid == 0) {
        bar_init(&sh.kv_full, 1), bar_init(&sh.kv_empty, 1), bar_init(&sh.q_full, 1), bar_init(&sh.q_empty, 1);
        bar_init(&sh.qt_full, 1), bar_init(&sh.qt_empty, 1), bar_init(&sh.s_full, 1), bar_init(&sh.dp_full, 1);
        bar_init(&sh.dv_done, 1), bar_init(&sh.dq_done, 1);
        bar_init(&sh.s_read, 256), bar_init(&sh.p_ready, 256), bar_init(&sh.ds_ready, 256);
        bar_init(&sh.dkdv_read, 256);
        bar_init(&sh.dq_loaded, BM), bar_init(&sh.dq_read, BM);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    if (tid < 256 && !P_DYNAMIC) // const P: every scale of P^T is 2^-8
        reinterpret_cast<uint16_t *>(sh.sf_p)[tid] = 0x7777u;
    if (warp == 13)
        tmem_alloc(&sh.tmem, ly::TMEM_COLS);
    fence_to_async_proxy();
    tc_fence_before();
    __syncthreads();
    tc_fence_after();
    const uint32_t tmem = sh.tmem;
    auto item_of = [&](int64_t w) { return make_item(w, hq, group, seqs, batch, causal); };

    if (warp >= 12) {
        regs_dec<BWD_OTHER_REGS>();
    }
    if (tid == 12 * 32) { // the producer
        uint32_t it = 0, items = 0;
        for (int64_t w = blockIdx.x; w < n_work; w += gridDim.x) {
            const bwd_item item = item_of(w);
            if (item.nq == 0)
                continue;
            const int64_t krow = item.kvh * k_rows + item.sq.k_off + item.c0; // packed row of the key tile
            if (items > 0)
                bar_wait(&sh.kv_empty, (items - 1) & 1);
            bar_expect(&sh.kv_full, 3 * BN * D + 3 * SF_ATOM);
            tma_load(sh.k, &map_k, 0, (int)krow, &sh.kv_full);
            tma_load(sh.v, &map_v, 0, (int)krow, &sh.kv_full);
            tma_load(sh.kt, &map_kt, (int)(item.sq.k_off + item.c0), item.kvh * D, &sh.kv_full);
            bulk_load(sh.sf_k, buf.k_sf + krow / BN * SF_ATOM, SF_ATOM, &sh.kv_full);
            bulk_load(sh.sf_v, buf.v_sf + krow / BN * SF_ATOM, SF_ATOM, &sh.kv_full);
            bulk_load(sh.sf_kt, buf.kt_sf + krow / BN * SF_ATOM, SF_ATOM, &sh.kv_full);
            for (int n = 0; n < item.nq; n++, it++) {
                const int64_t qcol = item.sq.q_off + (item.i0 + n) * BM, qrow = item.h * q_rows + qcol;
                if (it > 0)
                    bar_wait(&sh.q_empty, (it - 1) & 1);
                bar_expect(&sh.q_full, 2 * BM * D + 2 * SF_ATOM + 2 * BM * 4);
                tma_load(sh.q, &map_q, 0, (int)qrow, &sh.q_full);
                tma_load(sh.o, &map_o, 0, (int)qrow, &sh.q_full);
                bulk_load(sh.sf_q, buf.q_sf + qrow / BM * SF_ATOM, SF_ATOM, &sh.q_full);
                bulk_load(sh.sf_o, buf.o_sf + qrow / BM * SF_ATOM, SF_ATOM, &sh.q_full);
                bulk_load(sh.lse[it & 1], buf.lse + qrow, BM * 4, &sh.q_full);
                bulk_load(sh.delta[it & 1], buf.delta + qrow, BM * 4, &sh.q_full);
                if (it > 0)
                    bar_wait(&sh.qt_empty, (it - 1) & 1);
                bar_expect(&sh.qt_full, 2 * D * BM + 2 * SF_ATOM);
                tma_load(sh.qt, &map_qt, (int)qcol, item.h * D, &sh.qt_full);
                tma_load(sh.ot, &map_ot, (int)qcol, item.h * D, &sh.qt_full);
                bulk_load(sh.sf_qt, buf.qt_sf + qrow / BM * SF_ATOM, SF_ATOM, &sh.qt_full);
                bulk_load(sh.sf_ot, buf.ot_sf + qrow / BM * SF_ATOM, SF_ATOM, &sh.qt_full);
            }
            items++;
        }
    } else if (tid == 13 * 32) { // the MMA thread
        uint32_t it = 0, items = 0;
        auto sf = [&](uint32_t col, const uint8_t *atom) { copy_scales(tmem + col, mxfa_tc_sdesc_sf(smem_addr(atom))); };
        // [128][D] operands: 32 bytes of D a step; [rows][128] ones: 32 of the tile a step
        auto rows_desc = [&](const uint8_t *p) { return mxfa_tc_sdesc(smem_addr(p), 16, hd::SBO, hd::SWIZZLE); };
        auto tile_desc = [&](const uint8_t *p) { return mxfa_tc_sdesc(smem_addr(p), 16, 1024, MXFA_TC_SWIZZLE_128B); };
        // D[col] (+)= A B^T (N columns), one block-scaled instruction a 32-block
        // of K (32 bytes, 2 in the descriptors' address field) for `steps`
        // blocks of one 128-deep slice; from zero unless `chained` (then from D)
        auto product = [&](uint32_t col, uint64_t a, uint64_t b, int n, int steps, uint32_t sfa, uint32_t sfb,
                           bool chained) {
            for (int kb = 0; kb < steps; kb++)
                mma_mxf8(tmem + col, a + 2 * kb, b + 2 * kb, mxfa_tc_idesc_mxf8(MXFA_TC_E4M3, MXFA_TC_E4M3, 128, n, kb, kb),
                         tmem + sfa, tmem + sfb, chained || kb != 0);
        };
        for (int64_t w = blockIdx.x; w < n_work; w += gridDim.x) {
            const bwd_item item = item_of(w);
            if (item.nq == 0)
                continue;
            bar_wait(&sh.kv_full, items & 1);
            tc_fence_after();
            for (int n = 0; n < item.nq; n++, it++) {
                const int nqb = (int)((min((int64_t)BM, item.sq.lq - (item.i0 + n) * BM) + 31) / 32);
                // S^T = K Q^T, once the last dV (its scales in S's columns),
                // dK and dQ (theirs where S's go) have finished; where dQ
                // takes S's columns, once the dQ warps have read it out
                if (it > 0) {
                    bar_wait(ly::DQ_OWN ? &sh.dq_done : &sh.dq_read, (it - 1) & 1);
                    tc_fence_after();
                }
                bar_wait(&sh.q_full, it & 1);
                tc_fence_after();
                sf(ly::SF_S_A, sh.sf_k), sf(ly::SF_S_B, sh.sf_q);
                product(ly::S_COL, rows_desc(sh.k), rows_desc(sh.q), BM, KB, ly::SF_S_A, ly::SF_S_B, false);
                mma_commit(&sh.s_full);
                // dP^T = V dO^T, its scales over S once the key rows hold S in registers
                bar_wait(&sh.s_read, it & 1);
                tc_fence_after();
                sf(ly::SF_DP_A, sh.sf_v), sf(ly::SF_DP_B, sh.sf_o);
                product(ly::DP_COL, rows_desc(sh.v), rows_desc(sh.o), BM, KB, ly::SF_DP_A, ly::SF_DP_B, false);
                mma_commit(&sh.q_empty);
                mma_commit(&sh.dp_full);
                // dV += P^T dO: the chain of the item starts at its first query block
                bar_wait(&sh.p_ready, it & 1);
                tc_fence_after();
                if (n == 0 && items > 0) { // the last item's dK and dV have been read
                    bar_wait(&sh.dkdv_read, (items - 1) & 1);
                    tc_fence_after();
                }
                bar_wait(&sh.qt_full, it & 1);
                tc_fence_after();
                sf(ly::SF_DV_A, sh.sf_p), sf(ly::SF_DV_B, sh.sf_ot);
                product(ly::DV_COL, tile_desc(sh.pt), tile_desc(sh.ot), D, nqb, ly::SF_DV_A, ly::SF_DV_B, n != 0);
                mma_commit(&sh.dv_done);
                // dK += dS^T Q, its scales over dP once dS is made
                bar_wait(&sh.ds_ready, it & 1);
                tc_fence_after();
                sf(ly::SF_DK_A, sh.sf_dst), sf(ly::SF_DK_B, sh.sf_qt);
                product(ly::DK_COL, tile_desc(sh.dst), tile_desc(sh.qt), D, nqb, ly::SF_DK_A, ly::SF_DK_B, n != 0);
                mma_commit(&sh.qt_empty);
                // dQ = dQ + dS K, from the running dQ the dQ warps have put in S's columns
                bar_wait(&sh.dq_loaded, it & 1);
                tc_fence_after();
                sf(ly::SF_DQ_A, sh.sf_ds), sf(ly::SF_DQ_B, sh.sf_kt);
                product(ly::DQ_COL, tile_desc(sh.ds), tile_desc(sh.kt), D, item.nkb, ly::SF_DQ_A, ly::SF_DQ_B, true);
                if (n == item.nq - 1)
                    mma_commit(&sh.kv_empty);
                mma_commit(&sh.dq_done);
            }
            items++;
        }
    } else if (warp < 8) { // a key row a thread, half of the tile's queries
        regs_inc<BWD_ROW_REGS>();
        const int qd = warp % 4, hf = warp / 4, j = 32 * qd + lane;
        const uint32_t lanes = tmem + ((uint32_t)(32 * qd) << 16);
        uint32_t it = 0;
        for (int64_t w = blockIdx.x; w < n_work; w += gridDim.x) {
            const bwd_item item = item_of(w);
            if (item.nq == 0)
                continue; // dK and dV stay the zeros they start as
            const int64_t lq = item.sq.lq, lk = item.sq.lk, key = item.c0 + j;
            for (int n = 0; n < item.nq; n++, it++) {
                const int64_t r0 = (item.i0 + n) * BM;
                // P = E(RN_f16(min(fma(S, c, fl(2^-11 - fl(LSE log2 e))), 0))) (the
                // f16 exponential's portable exact form, exp2.cuh), 0 where
                // masked: a key past the sequence, a query past it, a key the
                // query does not see, LSE -Inf
                bar_wait(&sh.s_full, it & 1);
                tc_fence_after();
                bar_wait(&sh.q_full, it & 1);
                __syncwarp(); // converged for the .sync.aligned loads
                uint32_t s[64];
                tmem_ld32(lanes + ly::S_COL + 64 * hf, *reinterpret_cast<uint32_t(*)[32]>(s));
                tmem_ld32(lanes + ly::S_COL + 64 * hf + 32, *reinterpret_cast<uint32_t(*)[32]>(s + 32));
                tmem_wait_ld();
                tc_fence_before();
                bar_arrive(&sh.s_read);
                // the queries x of this half that see the key: [x_lo, x_hi)
                const int64_t q_first = r0 + 64 * hf;
                const int x_hi = key < lk ? (int)min((int64_t)64, lq - q_first) : 0;
                const int x_lo = causal ? (int)max((int64_t)0, min((int64_t)64, key - (lk - lq) - q_first)) : 0;
                float p[64];
#pragma unroll
                for (int x = 0; x < 64; x += 2) {
                    const float l0 = sh.lse[it & 1][64 * hf + x], l1 = sh.lse[it & 1][64 * hf + x + 1];
                    p[x] = __uint_as_float(s[x]), p[x + 1] = __uint_as_float(s[x + 1]);
                    bwd_p2_exact(p[x], p[x + 1], c, bwd_p_offset(l0, log2e), bwd_p_offset(l1, log2e));
                    p[x] = x < x_lo || x >= x_hi || l0 == NEG_INF ? 0.0f : p[x];
                    p[x + 1] = x + 1 < x_lo || x + 1 >= x_hi || l1 == NEG_INF ? 0.0f : p[x + 1];
                }
                // P's codes into P^T once the last dV has read them
                if (it > 0)
                    bar_wait(&sh.dv_done, (it - 1) & 1);
#pragma unroll
                for (int blk = 0; blk < 2; blk++) {
                    uint32_t cw[8];
                    if constexpr (P_DYNAMIC) { // square blocks, the rceil rule
                        uint32_t x[32];
#pragma unroll
                        for (int i = 0; i < 32; i++)
                            x[i] = __float_as_uint(p[32 * blk + i]);
                        sh.sf_p[sf_byte(j, 2 * hf + blk)] = (uint8_t)quantize_square(x, MXFA_PRESET_RCEIL, cw);
                    } else { // E4M3 of P * 256 under the scale 2^-8
#pragma unroll
                        for (int i = 0; i < 32; i += 4) {
                            const float *v = &p[32 * blk + i];
                            cw[i / 4] = (uint32_t)__nv_cvt_float2_to_fp8x2(
                                            make_float2(__fmul_rn(v[0], 256.0f), __fmul_rn(v[1], 256.0f)),
                                            __NV_SATFINITE, __NV_E4M3) |
                                        (uint32_t)__nv_cvt_float2_to_fp8x2(
                                            make_float2(__fmul_rn(v[2], 256.0f), __fmul_rn(v[3], 256.0f)),
                                            __NV_SATFINITE, __NV_E4M3)
                                            << 16;
                        }
                    }
                    store_chunks(sh.pt, j, 4 * hf + 2 * blk, cw);
                }
                fence_to_async_proxy(); // no tcgen05 access since s_read's fence: no tc_fence_before
                bar_arrive(&sh.p_ready);
                // dS = P (dP - delta), exactly 0 where P is (the reference
                // skips those scores); quantized into dS^T and dS once the
                // last dK and dQ have read them
                bar_wait(&sh.dp_full, it & 1);
                tc_fence_after();
                if (it > 0)
                    bar_wait(&sh.dq_done, (it - 1) & 1);
                __syncwarp();
#pragma unroll
                for (int blk = 0; blk < 2; blk++) {
                    uint32_t x[32], cw[8];
                    tmem_ld32(lanes + ly::DP_COL + 64 * hf + 32 * blk, x);
                    tmem_wait_ld();
#pragma unroll
                    for (int i = 0; i < 32; i++) {
                        const float pv = p[32 * blk + i], dl = sh.delta[it & 1][64 * hf + 32 * blk + i];
                        x[i] = pv == 0.0f ? 0u : __float_as_uint(__fmul_rn(pv, __fsub_rn(__uint_as_float(x[i]), dl)));
                    }
                    const int kq = 2 * hf + blk; // the query block
                    const uint32_t scale = quantize_square(x, preset, cw);
                    store_chunks(sh.dst, j, 2 * kq, cw);
                    store_column(sh.ds, 32 * kq, j, cw);
                    sh.sf_dst[sf_byte(j, kq)] = (uint8_t)scale;
                    sh.sf_ds[sf_byte(32 * kq + lane, qd)] = (uint8_t)scale;
                }
                fence_to_async_proxy();
                tc_fence_before();
                bar_arrive(&sh.ds_ready);
            }
            // the item's dK and dV (unscaled) into this query head's rows
            bar_wait(&sh.dq_done, (it - 1) & 1);
            tc_fence_after();
            __syncwarp();
            float *dk = buf.dk + ((int64_t)item.h * k_rows + item.sq.k_off + key) * D;
            float *dv = buf.dv + ((int64_t)item.h * k_rows + item.sq.k_off + key) * D;
#pragma unroll
            for (int cb = 0; cb < D / 64; cb++) {
                const int col = (D / 2) * hf + 32 * cb;
                uint32_t a[32], b[32];
                tmem_ld32(lanes + ly::DK_COL + col, a);
                tmem_ld32(lanes + ly::DV_COL + col, b);
                tmem_wait_ld();
                if (key < lk)
#pragma unroll
                    for (int i = 0; i < 32; i += 4) {
                        *reinterpret_cast<float4 *>(dk + col + i) = make_float4(
                            __uint_as_float(a[i]), __uint_as_float(a[i + 1]), __uint_as_float(a[i + 2]),
                            __uint_as_float(a[i + 3]));
                        *reinterpret_cast<float4 *>(dv + col + i) = make_float4(
                            __uint_as_float(b[i]), __uint_as_float(b[i + 1]), __uint_as_float(b[i + 2]),
                            __uint_as_float(b[i + 3]));
                    }
            }
            tc_fence_before();
            bar_arrive(&sh.dkdv_read);
        }
    } else if (warp >= 8 && warp < 12) { // dQ, a query row a thread
        regs_dec<BWD_DQ_REGS>();
        const int qd = warp % 4, i = 32 * qd + lane;
        const uint32_t lanes = tmem + ((uint32_t)(32 * qd) << 16);
        uint32_t it = 0;
        for (int64_t w = blockIdx.x; w < n_work; w += gridDim.x) {
            const bwd_item item = item_of(w);
            for (int n = 0; n < item.nq; n++, it++) {
                const int64_t qrow = item.h * q_rows + item.sq.q_off + (item.i0 + n) * BM;
                int *sem = buf.sem + qrow / BM;
                float *dq = buf.dq + (qrow + i) * D;
                // the key tiles before this one have added theirs
                // (one lane polls; the warp's barrier passes its acquire on,
                // and reconverges the warp for the .sync.aligned stores)
                if (lane == 0)
                    while (ld_acquire(sem) != (int)item.t)
                        __nanosleep(64);
                __syncwarp();
                if (!ly::DQ_OWN) { // S read, dP and dV done (their scales): S's columns are free
                    bar_wait(&sh.dv_done, it & 1);
                    tc_fence_after();
                    __syncwarp();
                }
#pragma unroll 1
                for (int cb = 0; cb < D / 32; cb++) {
                    uint32_t v[32];
#pragma unroll
                    for (int x = 0; x < 32; x += 4) {
                        const float4 f = *reinterpret_cast<const float4 *>(dq + 32 * cb + x);
                        v[x] = __float_as_uint(f.x), v[x + 1] = __float_as_uint(f.y);
                        v[x + 2] = __float_as_uint(f.z), v[x + 3] = __float_as_uint(f.w);
                    }
                    tmem_st32(lanes + ly::DQ_COL + 32 * cb, v);
                }
                tmem_wait_st();
                tc_fence_before();
                bar_arrive(&sh.dq_loaded);
                bar_wait(&sh.dq_done, it & 1);
                tc_fence_after();
                __syncwarp();
#pragma unroll 1
                for (int cb = 0; cb < D / 32; cb++) {
                    uint32_t v[32];
                    tmem_ld32(lanes + ly::DQ_COL + 32 * cb, v);
                    tmem_wait_ld();
#pragma unroll
                    for (int x = 0; x < 32; x += 4)
                        *reinterpret_cast<float4 *>(dq + 32 * cb + x) =
                            make_float4(__uint_as_float(v[x]), __uint_as_float(v[x + 1]), __uint_as_float(v[x + 2]),
                                        __uint_as_float(v[x + 3]));
                }
                tc_fence_before();
                if (!ly::DQ_OWN)
                    bar_arrive(&sh.dq_read);
                // every row's dQ stored before the next key tile may start
                __threadfence();
                named_sync(BAR_DQ_STORED, BM);
                if (i == 0)
                    st_release(sem, (int)item.t + 1);
            }
        }
    }
    __syncwarp();
    tc_fence_before();
    __syncthreads();
    if (warp == 13) {
        tc_fence_after();
        tmem_free(tmem, ly::TMEM_COLS);
    }
#endif
}

} // namespace
} // namespace mxfa_gpu

#endif
