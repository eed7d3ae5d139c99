// SPDX-License-Identifier: BSD-3-Clause
// The sm100 attention forward kernel for D = 64 and 128: two query tiles a
// CTA in ping-pong, after the published design of FlashAttention-4 and its
// MXFP8 variant (docs/BLACKWELL.md), held to the reference's bits.
//
// A work tile is a pair of query tiles of a sequence for one query head. The
// kernel is persistent: one CTA an SM walks the work tiles, with sixteen
// warps:
// - warps 0-3 and 4-7: the softmax of tile 0 and of tile 1, a query row a
//   thread (the lane of tensor memory that holds it);
// - warps 8-11: the correction, which rescales O once the softmax has
//   found a tile's maximum, and writes the output (a thread serves row r of
//   both tiles: its lane quarter is warp % 4 as for the softmax);
// - warp 12: the producer (the tensor-memory accelerator): Q0 and Q1 once
//   a work tile, then K and V^T a key tile at a time, shared by both tiles;
// - warp 13: tensor memory and the MMAs; warps 14-15 only complete the
//   warpgroup that setmaxnreg works on.
//
// Tensor memory (512 columns): S0, S1, O0, O1. The scale factors have no
// columns of their own; they go where an accumulator is not in use:
// - the CTA's first S_g: Q_g's and K's scales in O_g's region, which no
//   product has written yet;
// - every later S_g: over the other tile's S region, once that tile's
//   softmax has read its S (barrier s_read, the one this adds);
// - O_g += P_g V^T: P's and V's scales in S_g's region, which the softmax
//   has read by the time P is ready (barrier p_full).
// The ISA orders an MMA after a tcgen05.cp, and after an MMA on the same
// accumulator with the same shape, but not after an MMA on another
// accumulator: so a product that overwrites the columns another read its
// scales from waits for that one to complete (S_g waits for O_g's last
// product; the softmax's reads cover the rest). Nor does it order the
// leak-free mask's kind::f16 k16 steps on O and its kind::mxf8f6f4 k32
// ones, which differ in shape: pv_plan.h puts a commit and a wait at every
// change of kind within a key tile.
//
// For each key tile j the MMA warp issues S0(j), S1(j), then O0 += P0 V,
// O1 += P1 V; softmax g loads its S_g(j) into registers at once and says so,
// so that the other tile's next S can go ahead while it computes. At the end of a work tile it goes on with the next
// one's S products at once (unroll-KV): their scales take the other S
// region as any later key tile's do, so only the next P V waits, for the
// correction to have written the output out of O (after the row sums).
// P stays in shared memory (the leak-free mask's diagonal blocks need
// P / 256 in bf16 there too), and P V is not split: the block-scaled
// product takes the whole tile.
//
// Exactness where the reference skips a step is as in the one-tile kernel
// (attn_fwd.cuh): a row's O is cleared when its maximum first becomes
// finite (so the scales left in O's region by the first S products never
// reach an output), and a tile whose V holds a NaN runs its P V one block at
// a time, the correction writing each row right after its last step.
//
// Not yet run on Blackwell hardware; `mxfa selftest` checks it there.
#ifndef MXFA_GPU_SM100_ATTN_FWD_PINGPONG_CUH
#define MXFA_GPU_SM100_ATTN_FWD_PINGPONG_CUH

#include "attn_fwd.cuh"

namespace mxfa_gpu {
namespace {

constexpr int PP_THREADS = 512;
constexpr int PP_SOFTMAX_REGS = 184, PP_CORRECTION_REGS = 96, PP_OTHER_REGS = 48;
// setmaxnreg moves registers between the warpgroups inside the CTA's allocation (128 a thread at 512
// threads): the counts times the warps must add up to it exactly, or an increase would wait forever.
// The softmax holds a row of 128 scores; these are the counts at which ptxas spills nothing.
static_assert(8 * PP_SOFTMAX_REGS + 4 * PP_CORRECTION_REGS + 4 * PP_OTHER_REGS == 16 * 128, "register split");

template <int D, bool LEAK> struct pp_layout {
    using hd = head_dims<D>;
    static_assert(D <= 128 && hd::QA == 1 && hd::VA == 1, "two query tiles take D <= 128");
    // K and V stages: one at D = 128 with the leak-free mask, for room
    static constexpr int STAGES = D == 128 && LEAK ? 1 : 2;
    // inside a region hosting scales: Q's then K's at SF_QK, P's then V's at SF_PV (4 columns a set)
    static constexpr uint32_t SF_QK = 0, SF_PV = 64, TMEM_COLS = 512;
    static __device__ __forceinline__ uint32_t s_col(int g) { return (uint32_t)(g * BN); }
    static __device__ __forceinline__ uint32_t o_col(int g) { return (uint32_t)(2 * BN + g * D); }
    static_assert(2 * BN + 2 * D <= (int)TMEM_COLS && SF_PV + 8 <= BN && SF_QK + 8 <= D, "tensor memory layout");
};

template <int D, bool LEAK> struct pp_bf16 {
    uint8_t p[2][BN / 32][BM * 64];
    uint8_t v[pp_layout<D, LEAK>::STAGES][BN / 32][D * 64];
};
template <int D> struct pp_bf16<D, false> {};

template <int D, bool LEAK> struct __align__(1024) pp_shared {
    using hd = head_dims<D>;
    static constexpr int STAGES = pp_layout<D, LEAK>::STAGES;
    uint8_t q[2][BM * D]; // a panel a tile (D <= 128)
    uint8_t k[STAGES][BN * D];
    uint8_t v[STAGES][D * BN]; // V^T: D rows of 128 keys, 128-byte swizzle
    uint8_t p[2][BM * BN];     // P's codes a tile, written by its softmax threads in the same swizzle
    pp_bf16<D, LEAK> bf;       // an empty member still takes a byte: what follows is aligned explicitly
    alignas(128) uint8_t sfq[2][SF_ATOM];
    alignas(128) uint8_t sfk[STAGES][SF_ATOM];
    alignas(128) uint8_t sfv[STAGES][SF_ATOM];
    uint64_t q_full, q_empty, k_full[STAGES], k_empty[STAGES], v_full[STAGES], v_empty[STAGES];
    // a tile each: S computed, S read, P ready, the maximum's step ready, O rescaled, P V done,
    // and the slow tiles' block steps
    uint64_t s_full[2], s_read[2], p_full[2], stat_full[2], o_ready[2], o_done[2], o_block[2], o_read[2];
    uint64_t o_order; // a change of MMA kind on O waits for the steps before it (pv_plan.h)
    // From the softmax to the correction: each row's step (written before stat_full) and m, l
    // (before p_full). One slot a tile suffices for the step: the softmax's next write needs the next
    // S, which the MMA warp issues only after the correction has answered this one (o_ready). m and l
    // take two, alternating by work tile, since the correction reads the last ones for the output
    // while the next work tile's S products go ahead (unroll-KV); a third write would need a P V of
    // the work tile between, which waits for that output.
    float alpha[2][BM], m[2][2][BM], l[2][2][BM];
    uint8_t grows[2][BM], clear[2][BM];
    uint32_t pw[2][2][BM]; // dynamic P: the rows' scale words, a tile, in two
    uint32_t tmem;
};
template <int D, bool LEAK> constexpr size_t PP_SMEM = sizeof(pp_shared<D, LEAK>) + 1024;
template <int D, bool LEAK> constexpr bool pp_aligned()
{
    using sh = pp_shared<D, LEAK>;
    return offsetof(sh, q) % 1024 == 0 && offsetof(sh, k) % 1024 == 0 && offsetof(sh, v) % 1024 == 0 &&
           offsetof(sh, p) % 1024 == 0 && offsetof(sh, bf) % 1024 == 0 && offsetof(sh, sfq) % 16 == 0 &&
           offsetof(sh, sfk) % 16 == 0 && offsetof(sh, sfv) % 16 == 0;
}
static_assert(pp_aligned<64, false>() && pp_aligned<64, true>() && pp_aligned<128, false>() &&
                  pp_aligned<128, true>(),
              "shared memory layout");

// One work tile: a pair of query tiles of a sequence, for one query head.
// Tile 1 may be past the sequence's end (nt = 0); under a causal mask it
// visits at least the key tiles of tile 0.
struct pp_work {
    seq_info sq;
    int h, kvh, nt;
    q_tile qt[2];
};

__device__ __forceinline__ pp_work pp_decode(int64_t w, int64_t heads, const seq_info *seqs, int batch, int group,
                                             int64_t k_rows, const int *v_nan, bool causal)
{
    pp_work k;
    const int pair = (int)(w / heads);
    k.h = (int)(w % heads), k.kvh = k.h / group;
    k.sq = seqs[last_at_or_below(batch, pair, [&](int s) { return seqs[s].first_tile; })];
    const int *nan_tiles = v_nan + k.kvh * (k_rows / BN) + k.sq.k_off / BN;
    const int64_t r0 = (int64_t)(pair - k.sq.first_tile) * 2 * BM;
    k.qt[0] = make_q_tile(k.sq, r0, causal, nan_tiles);
    k.qt[1] = make_q_tile(k.sq, r0 + BM, causal, nan_tiles);
    k.nt = max(k.qt[0].nt, k.qt[1].nt);
    return k;
}

// A persistent kernel: CTA x takes work tiles x, x + gridDim.x, ... (n_work
// = pairs x heads, the heads of a pair adjacent). Every role walks the same
// sequence, and every barrier's phase is a running count over it.
template <int D, bool LEAK, bool P_DYNAMIC>
__global__ void __launch_bounds__(PP_THREADS, 1)
    attn_fwd_pingpong(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                      const __grid_constant__ CUtensorMap map_v, const __grid_constant__ CUtensorMap map_vbf,
                      const uint8_t *q_sf, const uint8_t *k_sf, const uint8_t *v_sf, const seq_info *seqs, int batch,
                      int group, int64_t heads, int64_t n_work, int64_t q_rows, int64_t k_rows, const int *v_nan,
                      bool causal, float c, attn_out out)
{
#ifdef MXFA_SM100_CODE
    using hd = head_dims<D>;
    using ly = pp_layout<D, LEAK>;
    constexpr int KB = hd::KB, STAGES = ly::STAGES;
    extern __shared__ uint8_t raw[];
    pp_shared<D, LEAK> &sh = aligned_shared<pp_shared<D, LEAK>>(raw);
    const int tid = (int)threadIdx.x, warp = tid / 32;
    auto work = [&](int64_t w) { return pp_decode(w, heads, seqs, batch, group, k_rows, v_nan, causal); };

    if (tid == 0) {
        bar_init(&sh.q_full, 1), bar_init(&sh.q_empty, 1), bar_init(&sh.o_order, 1);
        for (int s = 0; s < STAGES; s++) {
            bar_init(&sh.k_full[s], 1), bar_init(&sh.k_empty[s], 1);
            bar_init(&sh.v_full[s], 1), bar_init(&sh.v_empty[s], 1);
        }
        for (int g = 0; g < 2; g++) {
            bar_init(&sh.s_full[g], 1), bar_init(&sh.o_done[g], 1), bar_init(&sh.o_block[g], 1);
            bar_init(&sh.s_read[g], BM), bar_init(&sh.p_full[g], BM), bar_init(&sh.stat_full[g], BM);
            bar_init(&sh.o_ready[g], BM), bar_init(&sh.o_read[g], BM);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    if (warp == 13)
        tmem_alloc(&sh.tmem, ly::TMEM_COLS);
    tc_fence_before();
    __syncthreads();
    tc_fence_after();
    const uint32_t tmem = sh.tmem;

    if (warp >= 12) {
        regs_dec<PP_OTHER_REGS>();
        if (tid == 12 * 32) { // the producer
            int items = 0, n = 0; // work tiles with a key tile, key tiles
            for (int64_t w = blockIdx.x; w < n_work; w += gridDim.x) {
                const pp_work wk = work(w);
                if (wk.nt == 0)
                    continue;
                if (items > 0) // the last work tile's S products have read Q
                    bar_wait(&sh.q_empty, (items - 1) & 1);
                items++;
                bar_expect(&sh.q_full, (wk.qt[0].nt > 0) * (BM * D + SF_ATOM) + (wk.qt[1].nt > 0) * (BM * D + SF_ATOM));
                for (int g = 0; g < 2; g++)
                    if (wk.qt[g].nt > 0) {
                        const int64_t row = wk.sq.q_off + wk.qt[g].r0;
                        tma_load(sh.q[g], &map_q, 0, (int)(wk.h * q_rows + row), &sh.q_full);
                        bulk_load(sh.sfq[g], q_sf + (wk.h * (q_rows / BM) + row / BM) * SF_ATOM, SF_ATOM, &sh.q_full);
                    }
                for (int j = 0; j < wk.nt; j++, n++) {
                    const int s = n % STAGES, phase = n / STAGES & 1;
                    const int64_t key_row = wk.sq.k_off + (int64_t)j * BN, key_tile = wk.kvh * (k_rows / BN) + key_row / BN;
                    if (n >= STAGES)
                        bar_wait(&sh.k_empty[s], phase ^ 1);
                    bar_expect(&sh.k_full[s], BN * D + SF_ATOM);
                    tma_load(sh.k[s], &map_k, 0, (int)(wk.kvh * k_rows + key_row), &sh.k_full[s]);
                    bulk_load(sh.sfk[s], k_sf + key_tile * SF_ATOM, SF_ATOM, &sh.k_full[s]);
                    if (n >= STAGES)
                        bar_wait(&sh.v_empty[s], phase ^ 1);
                    const unsigned diag =
                        LEAK ? diagonal_blocks(wk.qt[0], wk.sq.lk, j) | diagonal_blocks(wk.qt[1], wk.sq.lk, j) : 0u;
                    bar_expect(&sh.v_full[s], D * BN + SF_ATOM + (diag ? BN / 32 * D * 64 : 0));
                    tma_load(sh.v[s], &map_v, (int)key_row, wk.kvh * D, &sh.v_full[s]);
                    bulk_load(sh.sfv[s], v_sf + key_tile * SF_ATOM, SF_ATOM, &sh.v_full[s]);
                    if constexpr (LEAK)
                        if (diag)
                            for (int bk = 0; bk < BN / 32; bk++)
                                tma_load(sh.bf.v[s][bk], &map_vbf, (int)(key_row + 32 * bk), wk.kvh * D, &sh.v_full[s]);
                }
            }
        } else if (tid == 13 * 32) { // the MMA thread
            // S and P V products issued a tile, and whether the last S_g took its scales in S_{1-g}'s region
            int items = 0, n = 0, n_s[2] = {0, 0}, n_pv[2] = {0, 0}, blocks[2] = {0, 0}, orders = 0;
            bool in_s[2] = {false, false};
            for (int64_t w = blockIdx.x; w < n_work; w += gridDim.x) {
                const pp_work wk = work(w);
                if (wk.nt == 0)
                    continue;
                bar_wait(&sh.q_full, items++ & 1);
                tc_fence_after();
                for (int j = 0; j < wk.nt; j++, n++) {
                    const int s = n % STAGES, phase = n / STAGES & 1;
                    bar_wait(&sh.k_full[s], phase);
                    tc_fence_after();
#pragma unroll
                    for (int g = 0; g < 2; g++) { // S_g = Q_g K^T: 32 of D at a time, from zero
                        if (j >= wk.qt[g].nt)
                            continue;
                        // Where the scales go: the CTA's first S_g's in O_g (no product has written
                        // it), later ones' over S_{1-g}, once that S has been read. Before S_g
                        // overwrites its own region: O_g's last product, which took its scales
                        // there, and the last S_{1-g} if it took them there, must be done.
                        const uint32_t host = n_s[g] == 0 ? ly::o_col(g) : ly::s_col(1 - g);
                        if (n_s[1 - g] > 0 && (n_s[g] > 0 || in_s[1 - g]))
                            bar_wait(&sh.s_read[1 - g], (n_s[1 - g] - 1) & 1);
                        if (n_pv[g] > 0)
                            bar_wait(&sh.o_done[g], (n_pv[g] - 1) & 1);
                        tc_fence_after();
                        copy_scales(tmem + host + ly::SF_QK, mxfa_tc_sdesc_sf(smem_addr(sh.sfq[g])));
                        copy_scales(tmem + host + ly::SF_QK + 4, mxfa_tc_sdesc_sf(smem_addr(sh.sfk[s])));
                        const uint64_t dq = mxfa_tc_sdesc(smem_addr(sh.q[g]), 16, hd::SBO, hd::SWIZZLE);
                        const uint64_t dk = mxfa_tc_sdesc(smem_addr(sh.k[s]), 16, hd::SBO, hd::SWIZZLE);
#pragma unroll
                        for (int kb = 0; kb < KB; kb++) // block kb: 32 bytes (2 in the address field) along the row
                            mma_mxf8(tmem + ly::s_col(g), dq + 2 * kb, dk + 2 * kb,
                                     mxfa_tc_idesc_mxf8(0, 0, BM, BN, kb, kb), tmem + host + ly::SF_QK,
                                     tmem + host + ly::SF_QK + 4, kb != 0);
                        mma_commit(&sh.s_full[g]);
                        n_s[g]++, in_s[g] = n_s[g] > 1;
                    }
                    mma_commit(&sh.k_empty[s]);
                    if (j == wk.nt - 1) // Q may take the next work tile's (whose first S products
                        mma_commit(&sh.q_empty); // follow this one's last P V without waiting: unroll-KV)
                    bar_wait(&sh.v_full[s], phase);
                    tc_fence_after();
                    const uint64_t dv = mxfa_tc_sdesc(smem_addr(sh.v[s]), 16, 1024, MXFA_TC_SWIZZLE_128B);
#pragma unroll
                    for (int g = 0; g < 2; g++) { // O_g += P_g V^T: 32 keys at a time
                        if (j >= wk.qt[g].nt)
                            continue;
                        bar_wait(&sh.p_full[g], n_pv[g] & 1);  // P and its scales made, S_g read
                        bar_wait(&sh.o_ready[g], n_pv[g] & 1); // O_g rescaled (or written out and cleared)
                        tc_fence_after();
                        const uint32_t sf = tmem + ly::s_col(g) + ly::SF_PV; // P's words (the softmax's), then V's
                        copy_scales(sf + 4, mxfa_tc_sdesc_sf(smem_addr(sh.sfv[s])));
                        const uint64_t dp = mxfa_tc_sdesc(smem_addr(sh.p[g]), 16, 1024, MXFA_TC_SWIZZLE_128B);
                        // 32 keys at a time, in the order pv_plan.h lays out (the correction reads O
                        // between the slow tiles' steps; a change between the two kinds of step waits for
                        // the steps before it)
                        const unsigned diag = LEAK ? diagonal_blocks(wk.qt[g], wk.sq.lk, j) : 0u;
                        int kb = 0;
                        for (uint64_t plan = mxfa_pv_plan(diag, BN / 32, wk.qt[g].slow && j >= wk.qt[g].jd); plan;
                             plan >>= MXFA_PV_OP_BITS) {
                            switch ((int)(plan & 0xF)) {
                            case MXFA_PV_F16: // two bf16 k16 steps; the second is a no-op where the reference takes one
                                if constexpr (LEAK) {
                                    const uint64_t pa =
                                        mxfa_tc_sdesc(smem_addr(sh.bf.p[g][kb]), 16, 512, MXFA_TC_SWIZZLE_64B);
                                    const uint64_t vb =
                                        mxfa_tc_sdesc(smem_addr(sh.bf.v[s][kb]), 16, 512, MXFA_TC_SWIZZLE_64B);
                                    mma_bf16(tmem + ly::o_col(g), pa, vb, mxfa_tc_idesc_bf16(BM, D), 1);
                                    mma_bf16(tmem + ly::o_col(g), pa + 2, vb + 2, mxfa_tc_idesc_bf16(BM, D), 1);
                                }
                                kb++;
                                break;
                            case MXFA_PV_MXF8:
                                mma_mxf8(tmem + ly::o_col(g), dp + 2 * kb, dv + 2 * kb,
                                         mxfa_tc_idesc_mxf8(0, 0, BM, D, kb, kb), sf, sf + 4, 1);
                                kb++;
                                break;
                            case MXFA_PV_ORDER:
                                mma_commit(&sh.o_order);
                                bar_wait(&sh.o_order, orders++ & 1);
                                tc_fence_after();
                                break;
                            default: // MXFA_PV_BLOCK: the correction reads O_g between the steps
                                mma_commit(&sh.o_block[g]);
                                bar_wait(&sh.o_read[g], blocks[g]++ & 1);
                                tc_fence_after();
                            }
                        }
                        mma_commit(&sh.o_done[g]);
                        n_pv[g]++;
                    }
                    mma_commit(&sh.v_empty[s]);
                }
            }
        }
    } else if (warp < 8) { // the softmax of tile g, a query row a thread
        regs_inc<PP_SOFTMAX_REGS>();
        const int g = warp / 4, row = tid % BM;
        const uint32_t lanes = tmem + ((uint32_t)(warp % 4 * 32) << 16), s_cols = lanes + ly::s_col(g);
        int items = 0, n = 0; // work tiles with a key tile, P_g made
        for (int64_t w = blockIdx.x; w < n_work; w += gridDim.x) {
            const pp_work wk = work(w);
            if (wk.nt == 0)
                continue;
            const int slot = items++ & 1;
            const q_tile t = g ? wk.qt[1] : wk.qt[0]; // not wk.qt[g]: an index known only at run time takes local memory
            const int64_t i = t.r0 + row;
            const int64_t lim = causal ? i + wk.sq.lk - wk.sq.lq : wk.sq.lk - 1; // this row's last key
            float m = NEG_INF, lsum[PARTIALS] = {};
            for (int j = 0; j < t.nt; j++, n++) {
                bar_wait(&sh.s_full[g], n & 1);
                tc_fence_after();
                const int64_t valid = min(wk.sq.lk - 1, lim) - (int64_t)j * BN + 1; // keys of the tile this row sees
                uint32_t v[BN];
                load_row(s_cols, v);
                tc_fence_before();
                bar_arrive(&sh.s_read[g]); // S_g's region may take the other tile's scales now
                auto block = [&](int q, uint32_t(&out32)[32]) {
#pragma unroll
                    for (int e = 0; e < 32; e++)
                        out32[e] = v[32 * q + e];
                };
                const float m_new = row_max<true>(block, valid, c, m);
                const max_step st = step_max(&m, m_new);
                sh.alpha[g][row] = st.alpha, sh.grows[g][row] = st.grows, sh.clear[g][row] = st.clear;
                bar_arrive(&sh.stat_full[g]); // the correction rescales O_g meanwhile
                scale_sums(lsum, st);
                uint32_t codes[BN / 4], pword;
                make_p<P_DYNAMIC>(block, valid, c, p_offset(m, m_new), lsum, codes, &pword);
                if (n > 0) { // the last P_g V must be done before P_g is rewritten
                    bar_wait(&sh.o_done[g], (n - 1) & 1);
                    tc_fence_after();
                }
                store_p(sh.p[g], row, codes);
                if (P_DYNAMIC)
                    store_p_words(s_cols + ly::SF_PV, sh.pw[g], n, row, pword, BAR_P_WORDS + g);
                else
                    store_p_const_words(s_cols + ly::SF_PV);
                if constexpr (LEAK)
                    store_p_bf16(sh.bf.p[g], sh.p[g], row, diagonal_blocks(t, wk.sq.lk, j), pword, P_DYNAMIC);
                sh.m[slot][g][row] = m, sh.l[slot][g][row] = row_sum(lsum);
                fence_to_async_proxy();
                tc_fence_before();
                bar_arrive(&sh.p_full[g]);
            }
        }
    } else { // the correction: row r of both tiles
        regs_dec<PP_CORRECTION_REGS>();
        const int row = tid % BM;
        const uint32_t lanes = tmem + ((uint32_t)(warp % 4 * 32) << 16);
        int items = 0, n_stat[2] = {0, 0}, n_done[2] = {0, 0}, blocks[2] = {0, 0};
        for (int64_t w = blockIdx.x; w < n_work; w += gridDim.x) {
            const pp_work wk = work(w);
            const int slot = items & 1;
            items += wk.nt > 0;
            bool written[2] = {false, false};
            auto row_of = [&](int g, int64_t *lim) {
                const int64_t i = wk.qt[g].r0 + row;
                *lim = causal ? i + wk.sq.lk - wk.sq.lq : wk.sq.lk - 1;
                return i;
            };
            for (int j = 0; j < wk.nt; j++)
#pragma unroll
                for (int g = 0; g < 2; g++) { // in the MMA warp's order
                    if (j >= wk.qt[g].nt)
                        continue;
                    bar_wait(&sh.stat_full[g], n_stat[g]++ & 1);
                    const max_step st = {sh.alpha[g][row], sh.grows[g][row] != 0, sh.clear[g][row] != 0};
                    if (j > 0) // O_g's last product done (the work tile's first: its epilogue waited)
                        bar_wait(&sh.o_done[g], n_done[g]++ & 1);
                    tc_fence_after();
                    rescale_o<D>(lanes + ly::o_col(g), st);
                    tc_fence_before();
                    bar_arrive(&sh.o_ready[g]);
                    if (wk.qt[g].slow && j >= wk.qt[g].jd) { // after each block's step, the rows whose last step it was
                        int64_t lim;
                        const int64_t i = row_of(g, &lim);
#pragma unroll 1
                        for (int kb = 0; kb < BN / 32; kb++) {
                            bar_wait(&sh.o_block[g], blocks[g]++ & 1);
                            tc_fence_after();
                            const bool last =
                                !written[g] && lim >= 0 && min(lim, wk.sq.lk - 1) / 32 == (int64_t)j * (BN / 32) + kb;
                            if (__any_sync(0xFFFFFFFFu, last))
                                write_o<D>(lanes + ly::o_col(g), last && i < wk.sq.lq, sh.m[slot][g][row],
                                           sh.l[slot][g][row], wk.sq.q0 + i, wk.h, out);
                            written[g] |= last;
                            tc_fence_before();
                            bar_arrive(&sh.o_read[g]);
                        }
                    }
                }
            // the rows not written yet (a tile that saw no key tile: O = 0, LSE = -Inf, and O is not
            // read); the wait for O_g's last product comes after the row sum is in
#pragma unroll
            for (int g = 0; g < 2; g++) {
                if (wk.qt[g].nr <= 0)
                    continue;
                int64_t lim;
                const int64_t i = row_of(g, &lim);
                float m = NEG_INF, l = 0.0f;
                if (wk.qt[g].nt > 0) {
                    bar_wait(&sh.o_done[g], n_done[g]++ & 1);
                    tc_fence_after();
                    m = sh.m[slot][g][row], l = sh.l[slot][g][row];
                }
                write_o<D>(lanes + ly::o_col(g), !written[g] && i < wk.sq.lq, m, l, wk.sq.q0 + i, wk.h, out);
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
