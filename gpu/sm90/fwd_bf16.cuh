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
// - Warpgroup 0, the producer: one thread issues the tensor-memory
//   accelerator's copies: the Q tile once, then K and V^T a key tile at a
//   time through rings of stages (K and V each their own full and empty
//   barriers). V^T comes a block of 32 keys a copy, each from the quantized
//   V or, where the leak-free mask takes the block in bf16, from V rounded
//   from the input.
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

#include "sm90/fwd_pack.cuh"
#include "sm90/fwd_softmax.cuh"
#include "sm90/wgmma_bf16.cuh"

namespace mxfa_gpu {
namespace fwd90 {

using namespace sm90;

constexpr int THREADS = 384;
constexpr int PRODUCER_REGS = 24, CONSUMER_REGS = 240; // 128 x 24 + 256 x 240 <= 64K

// OVERLAP: a tile's softmax overlaps the last tile's P V within the
// warpgroup, which holds two sets of P for it; at D = 256, O's 128
// registers a thread leave room for one, and the two warpgroups overlap
// each other only. STAGES: K and V tiles in flight (D = 256: one each).
template <int D, int BN> struct config {
    static_assert(D == 64 || D == 128 || D == 256, "head dim");
    static_assert(BN == 64 || BN == 128, "key tile");
    static constexpr int QP = D / 64; // 64-column (128-byte) panels of Q and K rows
    static constexpr int VP = BN / 32; // 32-key (64-byte) panels of V^T rows: a panel a block of keys
    static constexpr int STAGES = D == 256 ? 1 : 2;
    static constexpr bool OVERLAP = D < 256;
};

// Shared memory: Q and K in panels of 128-byte rows in 128-byte swizzle, V^T
// in panels of 64-byte rows (a block of 32 keys) in 64-byte swizzle (the
// accelerator writes them so, the wgmma descriptors read them so), each
// panel 1024-byte aligned. A block of V^T comes from the quantized V or,
// for the leak-free mask's diagonal blocks, from V rounded to bf16: a copy
// a panel, each from its own tensor.
template <int D, int BN> struct __align__(1024) fwd_shared {
    using cf = config<D, BN>;
    uint16_t q[cf::QP][BM * 64];
    uint16_t k[cf::STAGES][cf::QP][BN * 64];
    uint16_t v[cf::STAGES][cf::VP][D * 32]; // V^T: D rows of 32 keys a panel
    uint64_t q_full, k_full[cf::STAGES], k_empty[cf::STAGES], v_full[cf::STAGES], v_empty[cf::STAGES];
};
template <int D, int BN> constexpr size_t SMEM_BYTES = sizeof(fwd_shared<D, BN>) + 1024;
static_assert(SMEM_BYTES<256, 128> <= 227 * 1024 && SMEM_BYTES<128, 128> <= 227 * 1024,
              "shared memory of an H100 or H200 CTA");

struct fwd_params {
    const seq_info *seqs;
    const int *bad;     // [Hkv][k_rows / 32]
    const int *any_bad; // whether any of them is set
    int batch, group, tiles;
    int64_t q_rows, k_rows;
    float c;
    bool causal, leak_free;
    attn_out out;
};

#ifdef MXFA_SM90_CODE

// S = Q K^T for a consumer's 64 rows: D / 16 steps, the first from zero.
// Step kk reads 32 bytes into the rows of panel kk / 4 (2 in the
// descriptors' address field, which counts 16 bytes).
template <int D, int BN>
__device__ __forceinline__ void issue_s(float (&s)[BN / 2], const fwd_shared<D, BN> &sh, int stage, int wg)
{
    const uint64_t qd = opaque(desc_sw128(&sh.q[0][wg * 64 * 64])), kd = opaque(desc_sw128(sh.k[stage][0]));
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        const uint64_t da = qd + (kk / 4) * (BM * 128 / 16) + (kk % 4) * 2;
        const uint64_t db = kd + (kk / 4) * (BN * 128 / 16) + (kk % 4) * 2;
        if (kk == 0)
            wgmma_bf16<BN>::ss_zero(s, da, db);
        else
            wgmma_bf16<BN>::ss(s, da, db);
    }
}

// The B operand of P V step kk (16 keys): panel kk / 2 of V^T, 32 bytes in
// for odd kk.
template <int D, int BN> __device__ __forceinline__ uint64_t desc_v(const fwd_shared<D, BN> &sh, int stage, int kk)
{
    const uint64_t d = opaque(desc_sw64(sh.v[stage][0]));
    return d + (kk / 2) * (D * 64 / 16) + (kk % 2) * 2;
}

// O += P V for one key tile, BN / 16 steps in key order.
template <int D, int BN>
__device__ __forceinline__ void issue_pv(float (&o)[D / 2], const uint32_t (&pa)[BN / 16][4], const fwd_shared<D, BN> &sh,
                                         int stage)
{
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++)
        wgmma_bf16<D>::rs(o, pa[kk], desc_v(sh, stage, kk));
}

// The same a block of 32 keys at a time, each waited for, O kept for the
// rows that skip the block (keys from kb0 past their limit): the path of a
// tile whose V holds a NaN or an Inf where some row skips a block.
template <int D, int BN>
__device__ __forceinline__ void pv_by_block(float (&o)[D / 2], const uint32_t (&pa)[BN / 16][4],
                                            const fwd_shared<D, BN> &sh, int stage, int key0, const int (&lim)[2])
{
#pragma unroll
    for (int b = 0; b < BN / 32; b++) {
        const bool skip[2] = {key0 + 32 * b > lim[0], key0 + 32 * b > lim[1]};
        float keep[D / 2];
#pragma unroll
        for (int i = 0; i < D / 2; i++)
            keep[i] = o[i];
        fence_regs(o);
        fence_regs(keep);
        wgmma_fence();
        wgmma_bf16<D>::rs(o, pa[2 * b], desc_v(sh, stage, 2 * b));
        wgmma_bf16<D>::rs(o, pa[2 * b + 1], desc_v(sh, stage, 2 * b + 1));
        wgmma_commit();
        wgmma_wait<0>();
        fence_regs(o);
        asm volatile("" ::"r"(pa[2 * b][0]), "r"(pa[2 * b][1]), "r"(pa[2 * b][2]), "r"(pa[2 * b][3]));
        asm volatile("" ::"r"(pa[2 * b + 1][0]), "r"(pa[2 * b + 1][1]), "r"(pa[2 * b + 1][2]), "r"(pa[2 * b + 1][3]));
#pragma unroll
        for (int i = 0; i < D / 2; i++)
            o[i] = skip[(i / 2) % 2] ? keep[i] : o[i];
    }
}

// The output of a thread's two rows: O / l and LSE = (m + log2 l) ln 2;
// a row that saw no key (l = 0) writes 0 and -Inf. Every NaN the canonical
// 0x7FFFFFFF (bf16 0x7FFF).
template <int D>
__device__ __forceinline__ void write_rows(const float (&o)[D / 2], const rows2 &r, const fwd_params &p, const seq_info &sq,
                                           int h, int row0)
{
    const int t = (int)threadIdx.x % 4;
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
        const float l = row_sum(r, hh); // every thread of the quad takes part
        const int64_t i = row0 + 8 * hh;
        if (i >= sq.lq)
            continue;
        const bool any = l != 0.0f || l != l;
        const int64_t token = sq.q0 + i;
#pragma unroll
        for (int j = 0; j < D / 8; j++) {
            float v[2];
#pragma unroll
            for (int e = 0; e < 2; e++) {
                v[e] = any ? __fdiv_rn(o[4 * j + 2 * hh + e], l) : 0.0f;
                v[e] = v[e] != v[e] ? __uint_as_float(0x7FFFFFFFu) : v[e];
            }
            p.out.store_o(token, h, 8 * j + 2 * t, v[0]);
            p.out.store_o(token, h, 8 * j + 2 * t + 1, v[1]);
        }
        if (p.out.lse && t == 0) {
            float lse = any ? __fmul_rn(__fadd_rn(r.m[hh], mx_log2(l)), __uint_as_float(0x3F317218u)) : NEG_INF;
            p.out.store_lse(token, h, lse != lse ? __uint_as_float(0x7FFFFFFFu) : lse);
        }
    }
}

#endif // MXFA_SM90_CODE

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
    // the leak-free mask's diagonal blocks of key tile j (bit b: block b)
    auto diagonal = [&](int j) {
        unsigned bits = 0;
        if (p.leak_free)
            for (int b = 0; b < BN / 32; b++)
                bits |= (unsigned)qt.diagonal(j * BN + 32 * b) << b;
        return bits;
    };
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
        if (threadIdx.x == 0 && nkt > 0) {
            bar_expect(&sh.q_full, sizeof sh.q);
            for (int pn = 0; pn < cf::QP; pn++)
                tma_load(sh.q[pn], &map_q, 64 * pn, (int)(h * p.q_rows + sq.q_off + qt.r0), &sh.q_full);
            for (int j = 0; j < nkt; j++) {
                const int s = j % STAGES, phase = (j / STAGES) & 1;
                const int key = (int)(sq.k_off + (int64_t)j * BN);
                if (j >= STAGES)
                    bar_wait_idle(&sh.k_empty[s], phase ^ 1);
                bar_expect(&sh.k_full[s], sizeof sh.k[0]);
                for (int pn = 0; pn < cf::QP; pn++)
                    tma_load(sh.k[s][pn], &map_k, 64 * pn, (int)(hk * p.k_rows) + key, &sh.k_full[s]);
                if (j >= STAGES)
                    bar_wait_idle(&sh.v_empty[s], phase ^ 1);
                const unsigned diag = diagonal(j);
                bar_expect(&sh.v_full[s], sizeof sh.v[0]);
                for (int pn = 0; pn < cf::VP; pn++)
                    tma_load(sh.v[s][pn], diag >> pn & 1u ? &map_vraw : &map_v, key + 32 * pn, hk * D, &sh.v_full[s]);
            }
        }
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
