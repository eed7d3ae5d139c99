// SPDX-License-Identifier: BSD-3-Clause
// MXFP8 attention forward on Hopper under the sm90-bf16 model, one fused
// kernel, bit for bit the algorithm of cpu/ref/attn_fwd.c (docs/NUMERICS.md,
// "Attention forward") with the call's key tile BN (64 or 128) and query
// tiles of 128 rows.
//
// Before it: Q, K and V quantized and widened to bf16 (fwd_pack.cuh). Under
// this model S = Q K^T is a chain of bf16 k16 steps from zero and O += P V a
// chain on O itself, so the tensor cores do all of both products; the CUDA
// cores do the softmax (fwd_softmax.cuh).
//
// A CTA takes a query tile of one head: 384 threads, three warpgroups.
// - Warpgroup 0, the producer (fwd_producer.cuh): one thread issues the
//   tensor-memory accelerator's copies: the Q tile once, then K and V^T a
//   key tile at a time through rings of stages (K and V each their own full
//   and empty barriers). V^T comes a block of 32 keys a copy, each from the
//   quantized V or, where the leak-free mask takes the block in bf16, from V
//   rounded from the input.
// - Warpgroups 1 and 2, the consumers: 64 query rows each. For key tile j a
//   consumer issues S(j) = Q K(j)^T and, right after it, O += P(j-1) V(j-1);
//   it waits for S(j) only and computes its softmax while the tensor cores
//   run the P V product, then waits for that, rescales O by the tile's
//   factor and goes on. P lives in registers (two sets, alternating), never
//   in shared memory. At D = 256 O takes 128 registers a thread and leaves
//   room for one set of P: each warpgroup then goes a tile at a time, and
//   the two overlap each other.
// Every wgmma chain runs in key order, as the model's chains do. Rows that
// see none of a block of keys take a step with P = 0 there, a no-op unless
// that block of V holds a NaN or an Inf (0 x Inf is NaN, where the
// reference skips the block): such blocks are flagged by the packing, and
// a query tile with one in a tile that some row does not see whole goes to
// a second launch of the kernel that takes its P V a block at a time,
// restoring O for the rows that skip the block.
#ifndef MXFA_GPU_SM90_FWD_BF16_CUH
#define MXFA_GPU_SM90_FWD_BF16_CUH

#include "sm90/fwd_epilogue.cuh"
#include "sm90/fwd_layout.cuh"
#include "sm90/fwd_pack.cuh"
#include "sm90/fwd_producer.cuh"
#include "sm90/fwd_products.cuh"
#include "sm90/fwd_softmax.cuh"
#include "sm90/wgmma_bf16.cuh"

namespace mxfa_gpu {
namespace fwd90 {

using namespace sm90;

// CAREFUL: the launch that takes the query tiles with a NaN or an Inf in V
// where a row may skip a block of keys (a tile that some row of the query
// tile does not see whole), a tile at a time with those tiles' P V a block
// at a time; the other launch takes every other query tile, pipelined. Each
// query tile is in exactly one of them, decided before the warpgroups part.
template <int D, int BN, bool P_DYNAMIC, bool CAREFUL>
__global__ void __launch_bounds__(THREADS, 1)
    attn_fwd_bf16(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                  const __grid_constant__ CUtensorMap map_v, const __grid_constant__ CUtensorMap map_vraw,
                  const fwd_params p)
{
#ifdef MXFA_SM90_CODE
    using cf = config<D, BN>;
    constexpr int STAGES = cf::STAGES;
    // no NaN or Inf in V at all (the common case): the careful launch has
    // nothing to take, and each of its CTAs returns after this one load
    // (its CTAs run one an SM, in waves: 12 us at 4,16,4096,128 on the H200
    // with the table's search before this test)
    if (CAREFUL && *p.any_bad == 0)
        return;
    extern __shared__ uint8_t raw[];
    fwd_shared<D, BN> &sh = aligned_shared<fwd_shared<D, BN>>(raw);
    // the longest query tiles first (under a causal mask, a sequence's last)
    const int tile = p.tiles - 1 - (int)blockIdx.x, h = (int)blockIdx.y, hk = h / p.group;
    const seq_info sq = p.seqs[last_at_or_below(p.batch, tile, [&](int s) { return p.seqs[s].first_tile; })];
    const q_tile qt = make_q_tile((tile - sq.first_tile) * BM, (int)sq.lq, (int)sq.lk, p.causal);
    const int nkt = qt.key_tiles(BN);
    // the tiles every row of the query tile sees whole (its first row sees least)
    auto whole = [&](int j) { return j * BN + BN - 1 <= qt.lim_first; };
    const int *bad = p.bad + (int64_t)hk * (p.k_rows / 32) + sq.k_off / 32;
    bool careful = false;
    // (the flags are read only where one is set: the careful launch's
    // CTAs then return at once, where they took 36 us at 4,16,4096,128
    // reading them)
    const bool any_bad = *p.any_bad != 0;
    for (int j = 0; j < nkt && any_bad; j++)
        for (int b = 0; b < BN / 32 && !whole(j); b++)
            careful |= bad[(j * BN) / 32 + b] != 0;
    if (careful != CAREFUL)
        return;

    if (threadIdx.x == 0) {
        bar_init(&sh.q_full, 1);
        init_ring(sh.k_full, sh.k_empty, 256);
        init_ring(sh.v_full, sh.v_empty, 256);
    }
    __syncthreads();

    const int warp = (int)threadIdx.x / 32;
    if (warp < 4) { // the producer
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(PRODUCER_REGS));
        if (threadIdx.x == 0 && nkt > 0)
            produce<D, BN>(sh, map_q, map_k, map_v, map_vraw, p, sq, qt, h, hk, nkt);
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(CONSUMER_REGS));

    // (the warpgroup through a shuffle, which the compiler knows to be the
    // same in every lane: the descriptors made from it stay in uniform
    // registers)
    const int wg = __shfl_sync(0xFFFFFFFFu, warp / 4 - 1, 0), w = warp % 4, lane = (int)threadIdx.x % 32;
    const int row0 = qt.r0 + wg * 64 + w * 16 + lane / 4; // this thread's rows: row0, row0 + 8
    const int lim[2] = {qt.limit(row0), qt.limit(row0 + 8)};
    rows2 r = {{NEG_INF, NEG_INF}, {{0.0f, 0.0f}, {0.0f, 0.0f}}};
    float o[D / 2], s[BN / 2];
    uint32_t pa[2][BN / 16][4];
#pragma unroll
    for (int i = 0; i < D / 2; i++)
        o[i] = 0.0f;

    // S(j) issued and waited for, K's stage released
    auto scores = [&](int j) {
        const int stage = j % STAGES;
        bar_wait(&sh.k_full[stage], (j / STAGES) & 1);
        wgmma_fence();
        issue_s<D, BN>(s, sh, stage, wg);
        wgmma_commit();
        wgmma_wait<0>();
        fence_regs(s);
        bar_arrive(&sh.k_empty[stage]);
    };
    // the softmax of tile j into P set pset; a tile some row does not see
    // whole takes the mask first (the decision is the query tile's,
    // uniform over the CTA), and then the same code as the others: one
    // form of the softmax in the kernel, whose code every tile keeps warm
    // in the instruction cache (with a second, masked form, the tile on the
    // diagonal ran cold code once a query tile)
    auto softmax = [&](int j, uint32_t(&pset)[BN / 16][4]) {
        if (!whole(j)) {
            int vis[2];
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                const int seen = lim[hh] - j * BN + 1;
                vis[hh] = seen < 0 ? 0 : seen > BN ? BN : seen;
            }
            mask_scores<BN>(s, vis);
        }
        return softmax_tile<BN, P_DYNAMIC, D < 256>(s, r, p.c, pset);
    };
    // O += P(j) V(j) from P set pset, waited for, V's stage released
    auto pv = [&](int j, const uint32_t(&pset)[BN / 16][4]) {
        const int stage = j % STAGES;
        bar_wait(&sh.v_full[stage], (j / STAGES) & 1);
        if (CAREFUL && !whole(j)) {
            pv_by_block<D, BN>(o, pset, sh, stage, j * BN, lim);
        } else {
            wgmma_fence();
            issue_pv<D, BN>(o, pset, sh, stage);
            wgmma_commit();
            wgmma_wait<0>();
            fence_regs(o);
            hold_fragments(pset);
        }
        bar_arrive(&sh.v_empty[stage]);
    };

    if (nkt > 0) {
        bar_wait(&sh.q_full, 0);
        if constexpr (CAREFUL || !cf::OVERLAP) {
            scores(0);
            softmax(0, pa[0]); // O is zero: nothing to rescale
            // a tile at a time: P V of tile j - 1, S of tile j, its softmax
            for (int j = 1; j < nkt; j++) {
                pv(j - 1, pa[0]);
                scores(j);
                rescale_o<D>(o, softmax(j, pa[0]));
            }
            pv(nkt - 1, pa[0]);
        } else {
            // Tile j's S issued with tile j - 1's P V right behind it (P in
            // pprev), the softmax of S (into pset) while the P V runs; then O
            // rescaled for tile j. The two warpgroups take turns to issue
            // (ping-pong), so that one's softmax runs while the other's
            // products do: a turn is waited for before each issue and handed
            // over after it, warpgroup 0 first.
            auto my_turn = [&] { named_sync(BAR_TURN0 + wg, 256); };
            auto hand_over = [&] { named_arrive(BAR_TURN0 + (1 - wg), 256); };
            auto step = [&](int j, uint32_t(&pset)[BN / 16][4], const uint32_t(&pprev)[BN / 16][4]) {
                const int stage = j % STAGES, prev = (j - 1) % STAGES;
                bar_wait(&sh.k_full[stage], (j / STAGES) & 1);
                bar_wait(&sh.v_full[prev], ((j - 1) / STAGES) & 1);
                my_turn();
                wgmma_fence();
                issue_s<D, BN>(s, sh, stage, wg);
                wgmma_commit();
                issue_pv<D, BN>(o, pprev, sh, prev);
                wgmma_commit();
                hand_over();
                wgmma_wait<1>();
                fence_regs(s);
                bar_arrive(&sh.k_empty[stage]);
                const max_step st = softmax(j, pset);
                wgmma_wait<0>();
                fence_regs(o);
                hold_fragments(pprev);
                bar_arrive(&sh.v_empty[prev]);
                rescale_o<D>(o, st);
            };
            // the last P V, in its turn; warpgroup 1's is the last turn of all
            auto last_pv = [&](int j, const uint32_t(&pset)[BN / 16][4]) {
                const int stage = j % STAGES;
                bar_wait(&sh.v_full[stage], (j / STAGES) & 1);
                my_turn();
                wgmma_fence();
                issue_pv<D, BN>(o, pset, sh, stage);
                wgmma_commit();
                if (wg == 0)
                    hand_over();
                wgmma_wait<0>();
                fence_regs(o);
                hold_fragments(pset);
                bar_arrive(&sh.v_empty[stage]);
            };
            if (wg == 1)
                hand_over(); // warpgroup 0 takes the first turn
            bar_wait(&sh.k_full[0], 0);
            my_turn();
            wgmma_fence();
            issue_s<D, BN>(s, sh, 0, wg);
            wgmma_commit();
            hand_over();
            wgmma_wait<0>();
            fence_regs(s);
            bar_arrive(&sh.k_empty[0]);
            softmax(0, pa[0]); // O is zero: nothing to rescale
            // Two tiles a round, so that the P sets are named when compiling,
            // the second skipped past the last tile: every tile runs the
            // same code, which stays in the instruction cache. (With the
            // last odd tile and the masked tiles in code of their own, that
            // code ran cold once a query tile, and 13% of the warps' samples
            // in a profile on the H200 waited for instructions.) The last
            // P is in set 0 after a whole round, in set 1 after a half one.
            int j = 1;
            for (; j < nkt; j += 2) {
                step(j, pa[1], pa[0]);
                if (j + 1 < nkt)
                    step(j + 1, pa[0], pa[1]);
            }
            if (j == nkt)
                last_pv(nkt - 1, pa[0]);
            else
                last_pv(nkt - 1, pa[1]);
        }
    }
    write_rows<D>(o, r, p, sq, h, row0);
#endif
}

// ---- host side ----

// Both launches of the kernel: the pipelined one, then the careful one for
// the query tiles it left (most of its CTAs return at once).
template <int D, int BN, bool P_DYNAMIC>
cudaError_t launch_kernel(const CUtensorMap (&maps)[4], const fwd_params &p, int64_t hq, cudaStream_t stream)
{
    cudaError_t e = cudaSuccess;
    for (int careful = 0; careful < 2 && e == cudaSuccess; careful++) {
        auto kernel = careful ? attn_fwd_bf16<D, BN, P_DYNAMIC, true> : attn_fwd_bf16<D, BN, P_DYNAMIC, false>;
        if ((e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES<D, BN>)) !=
            cudaSuccess)
            break;
        kernel<<<dim3((unsigned)p.tiles, (unsigned)hq), THREADS, SMEM_BYTES<D, BN>, stream>>>(maps[0], maps[1],
                                                                                              maps[2], maps[3], p);
        e = cudaGetLastError();
    }
    return e;
}

// The call: packing, tensor maps, the kernel for the key tile bn (64, 128).
template <int D> cudaError_t launch_fwd_bf16(const attn_fwd_args &a, int bn, cudaStream_t stream)
{
    const int64_t hq = a.q.n1, hkv = a.k.n1;
    scratch mem(stream);
    operands ops;
    cudaError_t e = pack_operands<D>(a, a.leak_free, mem, stream, &ops);
    if (e != cudaSuccess || ops.tiles == 0)
        return e;
    CUtensorMap maps[4];
    memset(maps, 0, sizeof maps);
    const CUtensorMapDataType bf16 = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    const CUtensorMapSwizzle sw = CU_TENSOR_MAP_SWIZZLE_128B;
    if ((e = tensor_map(&maps[0], bf16, ops.q, D, (uint64_t)(hq * ops.q_rows), D * 2, 64, BM, sw)) != cudaSuccess ||
        (e = tensor_map(&maps[1], bf16, ops.k, D, (uint64_t)(hkv * ops.k_rows), D * 2, 64, (uint32_t)bn, sw)) !=
            cudaSuccess ||
        (e = tensor_map(&maps[2], bf16, ops.vt, (uint64_t)ops.k_rows, (uint64_t)(hkv * D), (uint64_t)ops.k_rows * 2, 32,
                        D, CU_TENSOR_MAP_SWIZZLE_64B)) != cudaSuccess ||
        (e = tensor_map(&maps[3], bf16, a.leak_free ? ops.vraw : ops.vt, (uint64_t)ops.k_rows, (uint64_t)(hkv * D),
                        (uint64_t)ops.k_rows * 2, 32, D, CU_TENSOR_MAP_SWIZZLE_64B)) != cudaSuccess)
        return e;
    const uint32_t log2e_bits = 0x3FB8AA3Bu; // fl(log2 e)
    float log2e;
    memcpy(&log2e, &log2e_bits, 4);
    fwd_params p;
    p.seqs = ops.seqs, p.bad = ops.bad, p.any_bad = ops.any_bad;
    p.batch = a.batch, p.group = (int)(hq / hkv), p.tiles = (int)ops.tiles;
    p.q_rows = ops.q_rows, p.k_rows = ops.k_rows;
    p.c = a.softmax_scale * log2e; // one fp32 product, as the reference computes it
    p.causal = a.causal, p.leak_free = a.leak_free;
    p.out = {a.o.base, a.o.s0, a.o.s1, a.o.s2, a.o.dtype == MXFA_BF16, a.lse, a.ls0, a.ls1};
    if (bn == 64)
        return a.p_dynamic ? launch_kernel<D, 64, true>(maps, p, hq, stream)
                           : launch_kernel<D, 64, false>(maps, p, hq, stream);
    return a.p_dynamic ? launch_kernel<D, 128, true>(maps, p, hq, stream)
                       : launch_kernel<D, 128, false>(maps, p, hq, stream);
}

} // namespace fwd90
} // namespace mxfa_gpu

#endif
