// SPDX-License-Identifier: BSD-3-Clause
// The sm100 attention forward kernel with one query tile a CTA, for D = 256,
// where two tiles' accumulators (2 x (128 + 256) columns) do not fit the
// 512 columns of tensor memory; D = 64 and 128 take attn_fwd_pingpong.cuh.
//
// One CTA per (query tile, query head), six warps:
// - Warp 4 streams the tiles through the tensor-memory accelerator: Q once,
//   then K and V^T a key tile at a time through two stages each (one with
//   the leak-free mask, whose bf16 copies of P and V leave no room for a
//   second).
// - Warp 5 allocates tensor memory and issues the MMAs. For each key tile:
//   - S = Q K^T, D / 32 block-scaled instructions along D, from zero;
//   - after the softmax has made P, O += P V^T, four instructions along
//     the keys (the leak-free mask's diagonal blocks: two kind::f16 k16
//     steps each, on P / 256 and V in bf16).
//
//   Both products accumulate in tensor memory, one instruction per 32-block,
//   which is the model's chain. The scales have columns of their own.
// - Warps 0-3 own one query row per thread. For each tile a thread reads its
//   row of S twice (the maximum, then P), rescales its row of O once the
//   last P V has finished, and writes P's codes into shared memory as the A
//   operand. At the end they divide O by l and write O and LSE.
//
// Not yet run on Blackwell hardware; `mxfa selftest` checks it there.
#ifndef MXFA_GPU_SM100_ATTN_FWD_SINGLE_CUH
#define MXFA_GPU_SM100_ATTN_FWD_SINGLE_CUH

#include "attn_fwd.cuh"

namespace mxfa_gpu {
namespace {

constexpr int SINGLE_THREADS = 192; // warps 0-3 the softmax, the producer, the MMA warp

template <int D, bool LEAK> struct single_layout {
    using hd = head_dims<D>;
    static constexpr int STAGES = LEAK ? 1 : 2;
    // tensor memory: S in columns [0, 128), O in [128, 128 + D), then the
    // scale words of Q, K (a set a stage), P and V (a set a stage)
    static constexpr uint32_t S_COL = 0, O_COL = BN, SFQ_COL = BN + D, SFK_COL = SFQ_COL + 4 * hd::QA,
                              SFP_COL = SFK_COL + 4 * hd::QA * STAGES, SFV_COL = SFP_COL + 4,
                              USED = SFV_COL + 4 * hd::VA * STAGES, TMEM_COLS = 512;
    static_assert(USED <= TMEM_COLS, "tensor memory layout");
};

template <int D, bool LEAK> struct single_bf16 {
    uint8_t p[BN / 32][BM * 64];
    uint8_t v[single_layout<D, LEAK>::STAGES][BN / 32][D * 64];
};
template <int D> struct single_bf16<D, false> {};

template <int D, bool LEAK> struct __align__(1024) single_shared {
    using hd = head_dims<D>;
    static constexpr int STAGES = single_layout<D, LEAK>::STAGES;
    uint8_t q[hd::PANELS][BM * hd::PW]; // panels of 128 rows, swizzled
    uint8_t k[STAGES][hd::PANELS][BN * hd::PW];
    uint8_t v[STAGES][D * BN]; // V^T: D rows of 128 keys, 128-byte swizzle
    uint8_t p[BM * BN];        // P's codes, written by the softmax threads in the same swizzle
    single_bf16<D, LEAK> bf;   // an empty member still takes a byte: what follows is aligned explicitly
    // scale atoms: the bulk copies and tcgen05.cp's descriptor need 16-byte alignment
    alignas(128) uint8_t sfq[hd::QA][SF_ATOM];
    alignas(128) uint8_t sfk[STAGES][hd::QA][SF_ATOM];
    alignas(128) uint8_t sfv[STAGES][hd::VA][SF_ATOM];
    uint64_t q_full, k_full[STAGES], k_empty[STAGES], v_full[STAGES], v_empty[STAGES];
    uint64_t s_full, p_full, o_done, o_block, o_read; // the last two: the slow tiles' block steps
    uint64_t o_order; // a change of MMA kind on O waits for the steps before it (pv_plan.h)
    uint32_t pw[2][BM];                               // dynamic P: the rows' scale words, a tile in two
    uint32_t tmem;
};
template <int D, bool LEAK> constexpr size_t SINGLE_SMEM = sizeof(single_shared<D, LEAK>) + 1024;
// The operands the tensor-memory accelerator and the MMAs read: 1024-byte
// aligned (the swizzle atoms), the scale atoms 16-byte.
template <int D, bool LEAK> constexpr bool single_aligned()
{
    using sh = single_shared<D, LEAK>;
    return offsetof(sh, q) % 1024 == 0 && offsetof(sh, k) % 1024 == 0 && offsetof(sh, v) % 1024 == 0 &&
           offsetof(sh, p) % 1024 == 0 && offsetof(sh, bf) % 1024 == 0 && offsetof(sh, sfq) % 16 == 0 &&
           offsetof(sh, sfk) % 16 == 0 && offsetof(sh, sfv) % 16 == 0;
}
static_assert(single_aligned<256, false>() && single_aligned<256, true>(), "shared memory layout");

template <int D, bool LEAK, bool P_DYNAMIC>
__global__ void __launch_bounds__(SINGLE_THREADS, 1)
    attn_fwd_single(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                    const __grid_constant__ CUtensorMap map_v, const __grid_constant__ CUtensorMap map_vbf,
                    const uint8_t *q_sf, const uint8_t *k_sf, const uint8_t *v_sf, const seq_info *seqs, int batch,
                    int group, int64_t q_rows, int64_t k_rows, const int *v_nan, bool causal, float c, attn_out out)
{
#ifdef MXFA_SM100_CODE
    using hd = head_dims<D>;
    using ly = single_layout<D, LEAK>;
    constexpr int PW = hd::PW, KB = hd::KB, QA = hd::QA, VA = hd::VA, STAGES = ly::STAGES;
    extern __shared__ uint8_t raw[];
    single_shared<D, LEAK> &sh = aligned_shared<single_shared<D, LEAK>>(raw);
    const int cta = (int)blockIdx.x, h = (int)blockIdx.y, kvh = h / group;
    const int b = last_at_or_below(batch, cta, [&](int s) { return seqs[s].first_tile; });
    const seq_info sq = seqs[b];
    const q_tile qt = make_q_tile(sq, (int64_t)(cta - sq.first_tile) * BM, causal,
                                  v_nan + kvh * (k_rows / BN) + sq.k_off / BN);
    const int nt = qt.nt;
    const int tid = (int)threadIdx.x, warp = tid / 32;

    if (tid == 0) {
        bar_init(&sh.q_full, 1);
        for (int s = 0; s < STAGES; s++) {
            bar_init(&sh.k_full[s], 1), bar_init(&sh.k_empty[s], 1);
            bar_init(&sh.v_full[s], 1), bar_init(&sh.v_empty[s], 1);
        }
        bar_init(&sh.s_full, 1), bar_init(&sh.o_done, 1), bar_init(&sh.o_block, 1), bar_init(&sh.o_order, 1);
        bar_init(&sh.o_read, BM);
        bar_init(&sh.p_full, BM);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    if (warp == 5)
        tmem_alloc(&sh.tmem, ly::TMEM_COLS);
    tc_fence_before();
    __syncthreads();
    tc_fence_after();
    const uint32_t tmem = sh.tmem;

    if (tid == 4 * 32) { // the producer
        if (nt > 0) {
            bar_expect(&sh.q_full, BM * D + QA * SF_ATOM);
            for (int pn = 0; pn < hd::PANELS; pn++)
                tma_load(sh.q[pn], &map_q, pn * PW, (int)(h * q_rows + sq.q_off + qt.r0), &sh.q_full);
            bulk_load(sh.sfq, q_sf + (h * (q_rows / BM) + (sq.q_off + qt.r0) / BM) * QA * SF_ATOM, QA * SF_ATOM,
                      &sh.q_full);
        }
        for (int j = 0, s = 0, phase = 0; j < nt; j++) {
            const int64_t key_tile = kvh * (k_rows / BN) + sq.k_off / BN + j;
            if (j >= STAGES)
                bar_wait(&sh.k_empty[s], phase ^ 1);
            bar_expect(&sh.k_full[s], BN * D + QA * SF_ATOM);
            for (int pn = 0; pn < hd::PANELS; pn++)
                tma_load(sh.k[s][pn], &map_k, pn * PW, (int)(kvh * k_rows + sq.k_off + (int64_t)j * BN), &sh.k_full[s]);
            bulk_load(sh.sfk[s], k_sf + key_tile * QA * SF_ATOM, QA * SF_ATOM, &sh.k_full[s]);
            if (j >= STAGES)
                bar_wait(&sh.v_empty[s], phase ^ 1);
            const unsigned diag = LEAK ? diagonal_blocks(qt, sq.lk, j) : 0u;
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
                copy_scales(tmem + ly::SFQ_COL + 4 * a, mxfa_tc_sdesc_sf(smem_addr(sh.sfq[a])));
        }
        const uint64_t dp = mxfa_tc_sdesc(smem_addr(sh.p), 16, 1024, MXFA_TC_SWIZZLE_128B);
        for (int j = 0, s = 0, phase = 0, blocks = 0, orders = 0; j < nt; j++) {
            bar_wait(&sh.k_full[s], phase);
            tc_fence_after();
            for (int a = 0; a < QA; a++)
                copy_scales(tmem + ly::SFK_COL + 4 * (QA * s + a), mxfa_tc_sdesc_sf(smem_addr(sh.sfk[s][a])));
#pragma unroll
            for (int kb = 0; kb < KB; kb++) { // S = Q K^T: 32 of D at a time, from zero
                // block kb: panel 32 kb / PW, 32 bytes (2 in the address field) a block inside it
                const int pn = 32 * kb / PW, step = 2 * (kb % (PW / 32)), a = kb / 4;
                const uint64_t dq = mxfa_tc_sdesc(smem_addr(sh.q[pn]), 16, hd::SBO, hd::SWIZZLE);
                const uint64_t dk = mxfa_tc_sdesc(smem_addr(sh.k[s][pn]), 16, hd::SBO, hd::SWIZZLE);
                mma_mxf8(tmem + ly::S_COL, dq + step, dk + step, mxfa_tc_idesc_mxf8(0, 0, BM, BN, kb % 4, kb % 4),
                         tmem + ly::SFQ_COL + 4 * a, tmem + ly::SFK_COL + 4 * (QA * s + a), kb != 0);
            }
            mma_commit(&sh.k_empty[s]);
            mma_commit(&sh.s_full);
            bar_wait(&sh.p_full, j & 1); // P made, O rescaled, S read
            tc_fence_after();
            bar_wait(&sh.v_full[s], phase);
            tc_fence_after();
            for (int a = 0; a < VA; a++)
                copy_scales(tmem + ly::SFV_COL + 4 * (VA * s + a), mxfa_tc_sdesc_sf(smem_addr(sh.sfv[s][a])));
            const uint64_t dv = mxfa_tc_sdesc(smem_addr(sh.v[s]), 16, 1024, MXFA_TC_SWIZZLE_128B);
            // O += P V^T: 32 keys at a time, in the order pv_plan.h lays out (the rows read O between the
            // slow tiles' steps; a change between the two kinds of step waits for the steps before it)
            const unsigned diag = LEAK ? diagonal_blocks(qt, sq.lk, j) : 0u;
            int kb = 0;
            for (uint64_t plan = mxfa_pv_plan(diag, BN / 32, qt.slow && j >= qt.jd); plan; plan >>= MXFA_PV_OP_BITS) {
                switch ((int)(plan & 0xF)) {
                case MXFA_PV_F16:
                    // two bf16 k16 steps (32 bytes, 2 in the address field, each); the second is a no-op
                    // where the reference takes one (16 keys or fewer): zero products, and O is never -0
                    if constexpr (LEAK) {
                        const uint64_t pa = mxfa_tc_sdesc(smem_addr(sh.bf.p[kb]), 16, 512, MXFA_TC_SWIZZLE_64B);
                        const uint64_t vb = mxfa_tc_sdesc(smem_addr(sh.bf.v[s][kb]), 16, 512, MXFA_TC_SWIZZLE_64B);
                        mma_bf16(tmem + ly::O_COL, pa, vb, mxfa_tc_idesc_bf16(BM, D), 1);
                        mma_bf16(tmem + ly::O_COL, pa + 2, vb + 2, mxfa_tc_idesc_bf16(BM, D), 1);
                    }
                    kb++;
                    break;
                case MXFA_PV_MXF8:
                    mma_mxf8(tmem + ly::O_COL, dp + 2 * kb, dv + 2 * kb, mxfa_tc_idesc_mxf8(0, 0, BM, D, kb, kb),
                             tmem + ly::SFP_COL, tmem + ly::SFV_COL + 4 * VA * s, 1);
                    kb++;
                    break;
                case MXFA_PV_ORDER:
                    mma_commit(&sh.o_order);
                    bar_wait(&sh.o_order, orders++ & 1);
                    tc_fence_after();
                    break;
                default: // MXFA_PV_BLOCK
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
    } else if (tid < BM) { // a query row a thread
        const uint32_t lanes = tmem + ((uint32_t)(warp * 32) << 16);
        const int row = tid;
        // O from +0 (every step of the chain adds into it) and const P's scales
        const uint32_t zero[32] = {};
        for (int j = 0; j < D; j += 32)
            tmem_st32(lanes + ly::O_COL + j, zero);
        tmem_wait_st();
        if (!P_DYNAMIC)
            store_p_const_words(lanes + ly::SFP_COL);
        float m = NEG_INF, lsum[PARTIALS] = {};
        const int64_t i = qt.r0 + row, token = sq.q0 + i;
        const int64_t lim = causal ? i + sq.lk - sq.lq : sq.lk - 1; // this row's last key
        bool written = false;
        for (int j = 0, blocks = 0; j < nt; j++) {
            bar_wait(&sh.s_full, j & 1);
            tc_fence_after();
            const int64_t valid = min(sq.lk - 1, lim) - (int64_t)j * BN + 1; // keys of the tile this row sees
            // S is read twice, once for the maximum and once for P, a block at a time
            auto block = [&](int q, uint32_t(&w)[32]) {
                tmem_ld32(lanes + ly::S_COL + 32 * q, w);
                tmem_wait_ld();
            };
            const float m_new = row_max<false>(block, valid, c, m);
            // The reference rescales O and the row sum, then makes P with
            // the new maximum; P goes before O here, the order of the
            // arithmetic on each value is the reference's.
            const max_step st = step_max(&m, m_new);
            scale_sums(lsum, st);
            uint32_t codes[BN / 4], pword;
            make_p<P_DYNAMIC>(block, valid, c, p_offset(m, m_new), lsum, codes, &pword);
            // the last P V must be done before O is touched and P rewritten
            if (j > 0) {
                bar_wait(&sh.o_done, (j - 1) & 1);
                tc_fence_after();
            }
            store_p(sh.p, row, codes);
            if (P_DYNAMIC)
                store_p_words(lanes + ly::SFP_COL, sh.pw, j, row, pword, BAR_P_WORDS);
            if constexpr (LEAK)
                store_p_bf16(sh.bf.p, sh.p, row, diagonal_blocks(qt, sq.lk, j), pword, P_DYNAMIC);
            rescale_o<D>(lanes + ly::O_COL, st); // last, after the codes have left the registers
            fence_to_async_proxy();
            tc_fence_before();
            bar_arrive(&sh.p_full);
            if (qt.slow && j >= qt.jd) // after each block's step, the rows whose last step it was
#pragma unroll 1
                for (int kb = 0; kb < BN / 32; kb++) {
                    bar_wait(&sh.o_block, blocks++ & 1);
                    tc_fence_after();
                    const bool last = !written && lim >= 0 && min(lim, sq.lk - 1) / 32 == (int64_t)j * (BN / 32) + kb;
                    if (__any_sync(0xFFFFFFFFu, last))
                        write_o<D>(lanes + ly::O_COL, last && i < sq.lq, m, row_sum(lsum), token, h, out);
                    written |= last;
                    tc_fence_before();
                    bar_arrive(&sh.o_read);
                }
        }
        // the rows not written yet (O is +0 where no key was seen, and O / l is not taken then)
        if (nt > 0) {
            bar_wait(&sh.o_done, (nt - 1) & 1);
            tc_fence_after();
        }
        write_o<D>(lanes + ly::O_COL, !written && i < sq.lq, m, row_sum(lsum), token, h, out);
    }
    __syncwarp();
    tc_fence_before();
    __syncthreads();
    if (warp == 5) {
        tc_fence_after();
        tmem_free(tmem, ly::TMEM_COLS);
    }
#endif
}

} // namespace
} // namespace mxfa_gpu

#endif
