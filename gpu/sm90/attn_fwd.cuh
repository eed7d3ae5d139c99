// SPDX-License-Identifier: BSD-3-Clause
// MXFP8 attention forward on Hopper under the sm90-fp8 model, bit for bit
// the algorithm of cpu/ref/attn_fwd.c (docs/NUMERICS.md, "Attention
// forward") with its geometry of 128-row query tiles and 128-key tiles.
//
// Before the kernel, in one pass over each input (the codes reach memory
// only packed): Q and K are quantized along D (row blocks), V along the
// keys (col blocks restarting at every sequence), as the backend's
// quantization kernels do, and packed so that every sequence starts on a
// 128-row boundary of its head's rows (zeros between): Q and K codes
// [heads][rows][D], V transposed to [heads][D][keys], the scales as floats
// 2^(e - 127) in the order the threads read them, and each 128-row tile's
// smallest and largest scale. Inside each block of 32 keys, V's keys are
// stored in the order in which a thread's share of the score accumulator
// becomes its share of the A operand of P * V (`key_of_column`): the
// products of one block are summed as a set, so the order within it
// changes nothing, and P never moves between threads.
//
// The kernel: one CTA per (query tile, query head), a producer warpgroup
// (tensor-memory-accelerator copies of the Q tile once, then K, V^T and
// their scales per key tile through a ring of stages) and two consumer
// warpgroups of 64 query rows. Per key tile a consumer warpgroup makes S
// block by block (one wgmma k32 into a zero accumulator, then the exact
// promotion: a bare fma where the tiles' scale ranges allow it), the
// online softmax with the contract's f16 exponential, the row sums as the
// reference's eight partials of f16 block sums (a thread holds keys 8j + 2t
// and 8j + 2t + 1 of its two rows, so it keeps partials 2t and 2t + 1 of
// each, in shared memory between tiles, and the quad combines them at the
// end), P quantized in
// registers, and O += P V block by block (wgmma k32 with P from registers,
// then the promotion; V's float scales carry P's 2^-8, so that const P's
// promotion is one fma). Products go through two partials, one promoted
// while the next runs.
//
// It takes D = 64 (Q and K in 64-byte swizzle), 128 and 256 (two 128-byte
// panels; S made 64 keys at a time, one K and V stage), no mask, the plain
// causal mask or the leak-free one (whose diagonal blocks take P / 256 and
// V in bf16, two wgmma k16 steps on O itself, as the reference does; at
// D = 256 one consumer warpgroup a CTA, for room), const or dynamic P; the
// backend refuses other models and geometries.
//
// The geometry and shared memory are in fwd8_layout.cuh, the packing in
// fwd8_pack.cuh; this file holds the kernel and its launch.
#ifndef MXFA_GPU_SM90_ATTN_FWD_CUH
#define MXFA_GPU_SM90_ATTN_FWD_CUH

#include "exp2.cuh"
#include "hopper.cuh"
#include "mx.cuh"
#include "nd3.cuh"
#include "wgmma.cuh"
#include "sm90/fwd8_epilogue.cuh"
#include "sm90/fwd8_pack.cuh"
#include "sm90/fwd8_producer.cuh"
#include "sm90/fwd8_scores.cuh"
#include "sm90/fwd8_softmax.cuh"

namespace mxfa_gpu {
namespace {

using namespace sm90;

// ---- the kernel ----

#ifdef MXFA_SM90_CODE
constexpr int PRODUCER_REGS = 24, CONSUMER_REGS = 240;

// A row's block of 32 P values spread over the four threads of a quad:
// the largest |x| bits (NaN ignored), and whether it holds NaN or Inf.
struct p_amax {
    uint32_t amax = 0;
    bool nan = false, inf = false;
    __device__ __forceinline__ void add(uint32_t x)
    {
        const uint32_t a = x & 0x7FFFFFFFu;
        if (a > kF32Inf) {
            nan = true;
            return;
        }
        inf |= a == kF32Inf;
        amax = a > amax ? a : amax;
    }
    __device__ __forceinline__ void reduce4()
    {
        for (int o = 1; o < 4; o <<= 1) {
            const uint32_t a = __shfl_xor_sync(0xFFFFFFFFu, amax, o);
            const int fl = __shfl_xor_sync(0xFFFFFFFFu, (int)nan | (int)inf << 1, o);
            amax = a > amax ? a : amax;
            nan |= fl & 1;
            inf |= (fl >> 1) & 1;
        }
    }
};
// Whether every product of a scale in [lo_a, hi_a] and one in [lo_b, hi_b]
// (powers of two) is a normal float, so that the promotion is a bare fma
// (promote_exact's first case); false for a NaN bound.
__device__ __forceinline__ bool normal_products(float lo_a, float hi_a, float lo_b, float hi_b)
{
    return __fmul_rn(lo_a, lo_b) >= 0x1p-126f && __fmul_rn(hi_a, hi_b) <= 0x1p127f;
}

#endif // MXFA_SM90_CODE

// P_DYNAMIC: P in row blocks of 32 keys under the rceil rule, else const
// P (a kernel each, so that neither carries the other's code).
template <int D, bool LEAK, bool P_DYNAMIC>
__global__ void __launch_bounds__(THREADS<D, LEAK>, 1)
    attn_fwd_sm90(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                  const __grid_constant__ CUtensorMap map_vt, const __grid_constant__ CUtensorMap map_qs,
                  const __grid_constant__ CUtensorMap map_ks, const __grid_constant__ CUtensorMap map_vs,
                  const __grid_constant__ CUtensorMap map_vbf,
                  const seq_info *seqs, const scale_range *q_range, const scale_range *k_range,
                  const scale_range *v_range, int batch, int group, int64_t q_rows, int64_t k_rows, float c,
                  bool causal, attn_out out)
{
#ifdef MXFA_SM90_CODE
    constexpr int DH = D / 64; // halves of 64 columns of O
    extern __shared__ uint8_t raw[];
    attn_shared<D, LEAK> &sh = aligned_shared<attn_shared<D, LEAK>>(raw);
    constexpr int NCONS = CONSUMERS<D, LEAK>;
    // with one consumer warpgroup, CTAs 2i and 2i + 1 take rows 0..63 and
    // 64..127 of a tile (the rule of the leak-free mask still reads the
    // whole tile's first and last rows); the longest query tiles first
    // (under a causal mask, a sequence's last), so that the short ones
    // fill the grid's tail
    const int tile = (int)(gridDim.x - 1 - blockIdx.x) / (2 / NCONS), h = (int)blockIdx.y, hk = h / group;
    const int b = last_at_or_below(batch, tile, [&](int s) { return seqs[s].first_tile; });
    const seq_info sq = seqs[b];
    const query_tile<LEAK> qt = make_query_tile<LEAK>(sq, tile, causal);
    const int lk = qt.lk, r0 = qt.r0, nkt = qt.nkt;
    auto limit = [&](int i) { return qt.limit(i); };
    auto diagonal = [&](int kb0) { return qt.diagonal(kb0); };
    auto tile_diagonal = [&](int c0) { return qt.tile_diagonal(c0); };
    // the query tile's scale range (each key tile's comes with its stage)
    const scale_range qr = q_range[h * (q_rows / BM) + (sq.q_off + r0) / BM];
    const int64_t kt0 = hk * (k_rows / BN) + sq.k_off / BN; // the sequence's first key tile

    if (threadIdx.x == 0) {
        bar_init(&sh.q_full, 1);
        init_ring(sh.full, sh.empty, NCONS * 128);
    }
    __syncthreads();

    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    if (warp < 4) { // the producer
        if constexpr (NCONS == 2)
            asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(PRODUCER_REGS));
        if (threadIdx.x == 0)
            produce<D, LEAK>(sh, kv_maps{&map_q, &map_k, &map_vt, &map_qs, &map_ks, &map_vs, &map_vbf}, qt, sq, h, hk,
                             q_rows, k_rows, k_range + kt0, v_range + kt0);
        return;
    }
    if constexpr (NCONS == 2) // (with one, the kernel has the registers of 256 threads from the start)
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(CONSUMER_REGS));

    // wi: the warpgroup among the CTA's consumers (shared arrays, barrier);
    // wg: its 64 rows of the tile
    const int wi = warp / 4 - 1, wg = NCONS == 2 ? wi : (int)blockIdx.x % 2;
    const int w = warp % 4, g = lane / 4, t = lane % 4, tid = (int)threadIdx.x - 128 * (wi + 1);
    const int row0 = wg * 64 + w * 16 + g;    // the tile rows of this thread: row0 and row0 + 8
    const int lim[2] = {limit(r0 + row0), limit(r0 + row0 + 8)};
    float m[2] = {NEG_INF, NEG_INF};
#pragma unroll
    for (int k = 0; k < 4; k++)
        sh.lsum[wi][k][tid] = 0.0f;
    float o[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; i++)
        o[i] = 0.0f;
    const fp8_fmt f8 = fp8_e4m3();
    const int lim_min = lim[0] < lim[1] ? lim[0] : lim[1];

    bar_wait(&sh.q_full, 0);
    for (int kt = 0, s = 0, phase = 0; kt < nkt; kt++) {
        const int c0 = kt * BN;
        bar_wait(&sh.full[s], phase);
        const kv_stage<D> &st = sh.st[s];
        const scale_range kr = sh.krange[s];
        const bool fast_s = normal_products(__uint_as_float(qr.lo), __uint_as_float(qr.hi), __uint_as_float(kr.lo),
                                            __uint_as_float(kr.hi));

        // S = Q K^T, promoted exactly
        float x[64];
        scores_tile<D, LEAK>(x, sh, st, fast_s, wg, wi, tid, row0, t);
        // element I of x: row g + 8 ((I / 2) % 2), key 8 (I / 4) + 2t + I % 2
        auto x_key = [&](int I) { return 8 * (I / 4) + 2 * t + I % 2; };

        // x holds S. The keys a row does not see take S = -Inf, whatever
        // they hold, so that the same code serves every tile: -Inf is no
        // row's maximum, and its P is E(-Inf) = +0, which adds nothing to
        // the row sums. A tile the thread's rows see whole
        // needs no test. (Separate forms of the softmax for whole and
        // masked tiles made the code of a tile on the diagonal cold: under
        // a causal mask a third of the warps' samples waited for
        // instructions.)
        const bool whole = c0 + BN - 1 <= lim_min;
        if (!whole) {
#pragma unroll
            for (int i = 0; i < 64; i++)
                x[i] = c0 + x_key(i) <= lim[(i / 2) % 2] ? x[i] : NEG_INF;
        }
        // the online softmax: m, O and the row sums to this tile, x to P
        bool vis[2];
        softmax_tile<D>(x, m, o, sh.lsum[wi], tid, c, vis);

        // P to E4M3 (const: scale 2^0, the -8 at the promotion; dynamic: the
        // rceil rule per row and 32 keys), as the A fragments of the four
        // blocks; then O += P V, a product per block of keys and half of D,
        // through two partials as above
        uint32_t af[BN / 32][4];
        // P * V: products of one block of keys and NV columns of V (32 at
        // D = 256, where O takes more than half the registers), PVH a block
        constexpr int NV = D == 256 ? 32 : 64, PVH = D / NV;
        float va[NV / 2], vb[NV / 2];
        float pscale[BN / 32][2];
        // two P values (keys next to each other) to two E4M3 codes
        auto cvt2 = [](float u, float v) {
            return (uint32_t)__nv_cvt_float2_to_fp8x2(make_float2(u, v), __NV_SATFINITE, __NV_E4M3);
        };
        // every P is >= 0, Inf or a positive NaN, and the rule never poisons
        // (rceil): the conversion of P / 2^scale gives the encoder's code
        // for each (Inf saturates, NaN is 0x7F)
        // the A fragment of block kb from its codes two[q][hh] (row g + 8 hh,
        // keys 8 q + 2 t and one more): register 0 holds row g's columns
        // 4t .. 4t + 3 (keys 2t, 2t + 1, 8 + 2t, 9 + 2t), 1 row g + 8's, 2
        // and 3 the same rows' keys 16 higher
        auto fragment = [&](int kb, const uint32_t(&two)[4][2]) {
            af[kb][0] = two[0][0] | two[1][0] << 16;
            af[kb][1] = two[0][1] | two[1][1] << 16;
            af[kb][2] = two[2][0] | two[3][0] << 16;
            af[kb][3] = two[2][1] | two[3][1] << 16;
        };
        // P's scales as the promotion takes them: 2^(scale - 127), the -8
        // being in V's (v_scale_float); 1 for const P
        if constexpr (P_DYNAMIC) {
#pragma unroll
            for (int kb = 0; kb < BN / 32; kb++) {
                uint32_t two[4][2];
#pragma unroll
                for (int hh = 0; hh < 2; hh++) {
                    p_amax acc;
#pragma unroll
                    for (int q = 0; q < 4; q++) {
                        acc.add(__float_as_uint(x[16 * kb + 4 * q + 2 * hh]));
                        acc.add(__float_as_uint(x[16 * kb + 4 * q + 2 * hh + 1]));
                    }
                    acc.reduce4();
                    const block_rule rule = rule_from_amax(f8, MXFA_PRESET_RCEIL, acc.amax, acc.nan, acc.inf);
                    const float rcp = e8m0_reciprocal(rule.scale);
#pragma unroll
                    for (int q = 0; q < 4; q++) {
                        const int i = 16 * kb + 4 * q + 2 * hh;
                        two[q][hh] = cvt2(__fmul_rn(x[i], rcp), __fmul_rn(x[i + 1], rcp));
                    }
                    pscale[kb][hh] = scale_float(rule.scale);
                }
                fragment(kb, two);
            }
        } else { // the scale 2^0 for every block, the -8 in V's scales
#pragma unroll
            for (int kb = 0; kb < BN / 32; kb++) {
                uint32_t two[4][2];
#pragma unroll
                for (int hh = 0; hh < 2; hh++) {
#pragma unroll
                    for (int q = 0; q < 4; q++)
                        two[q][hh] = cvt2(x[16 * kb + 4 * q + 2 * hh], x[16 * kb + 4 * q + 2 * hh + 1]);
                    pscale[kb][hh] = 1.0f;
                }
                fragment(kb, two);
            }
        }
        // whether every P scale times every V scale of the tile is normal
        // (const P: every V scale is a float, and the promotion an fma)
        bool fast_pv = true;
        if constexpr (P_DYNAMIC) {
            const scale_range vr = sh.vrange[s];
            uint32_t lo = 0xFFFFFFFFu, hi = 0;
#pragma unroll
            for (int kb = 0; kb < BN / 32; kb++)
#pragma unroll
                for (int hh = 0; hh < 2; hh++)
                    lo = min(lo, __float_as_uint(pscale[kb][hh])), hi = max(hi, __float_as_uint(pscale[kb][hh]));
            fast_pv = normal_products(__uint_as_float(lo), __uint_as_float(hi), __uint_as_float(vr.lo),
                                      __uint_as_float(vr.hi));
        }
        // product j: block j / PVH of keys, columns NV (j % PVH) .. of V
        // (V^T rows 1024-byte atoms apart)
        const uint64_t vt_desc = opaque(desc_sw128(st.vt));
        auto issue_pv = [&](float(&p)[NV / 2], int j) {
            const uint64_t b = vt_desc + (uint64_t)(((j % PVH) * NV * BN + (j / PVH) * 32) >> 4);
            asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
            if constexpr (NV == 64)
                wgmma_k32_rs_n64(p, af[j / PVH], b);
            else
                wgmma_k32_rs_n32(p, af[j / PVH], b);
            asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        };
        // V's scales of product j's columns, four a load (columns 4 j2 +
        // 4 t .. of its NV: element 2 hj + e % 2 is the column of element
        // 4 (2 j2 + hj) + e of the partial). Loaded one product ahead, as the
        // promotion before starts, so that their latency passes under its
        // arithmetic (loaded in the promotion that uses them, 40
        // instructions ahead of their use, they were still the largest
        // stall in P V in a profile on the H200); not at D = 256, whose
        // registers are spent.
        struct pv_scales {
            float4 v[NV / 16];
        };
        auto v_scale4 = [&](int j, int j2) {
            return *reinterpret_cast<const float4 *>(&st.vs[j / PVH][16 * ((j % PVH) * NV / 16 + j2) + 4 * t]);
        };
        auto pv_ahead = [&](int j) {
            pv_scales r;
#pragma unroll
            for (int j2 = 0; j2 < NV / 16; j2++)
                r.v[j2] = v_scale4(j, j2);
            return r;
        };
        // partial element i is element (j % PVH) NV / 2 + i of O
        auto promote_pv = [&](float(&p)[NV / 2], int j, const pv_scales &pre) {
            const int kb = j / PVH, c = j % PVH;
            const int kb0 = c0 + 32 * kb;
            const bool use[2] = {vis[0] && kb0 <= lim[0], vis[1] && kb0 <= lim[1]};
            fence_regs(p);
            auto v_scales = [&](int j2) { return PREFETCH<D> ? pre.v[j2] : v_scale4(j, j2); };
            // f(o, p, hh, sv) for every element of the partial: its O
            // element, its value, its row (0, 1) and its column's V scale
            auto each = [&](auto &&f) {
#pragma unroll
                for (int j2 = 0; j2 < NV / 16; j2++) {
                    const float4 vq = v_scales(j2);
                    const float vsc[4] = {vq.x, vq.y, vq.z, vq.w};
#pragma unroll
                    for (int hj = 0; hj < 2; hj++)
#pragma unroll
                        for (int e = 0; e < 4; e++) {
                            const int i = 4 * (2 * j2 + hj) + e;
                            f(o[c * NV / 2 + i], p[i], e / 2, vsc[2 * hj + e % 2]);
                        }
                }
            };
            if constexpr (!P_DYNAMIC) {
                // P's scale is 1: one fma with V's scale, exact for every
                // scale; a row that skips the block keeps its O (the same
                // code for every tile: one predicated fma an element). At
                // D = 256 the blocks every row uses take an unpredicated
                // copy: with the predicated one alone, ptxas spilled.
                if (D == 256 && use[0] && use[1])
                    each([](float &oi, float pi, int, float sv) { oi = __fmaf_rn(pi, sv, oi); });
                else
                    each([&](float &oi, float pi, int hh, float sv) {
                        if (use[hh])
                            oi = __fmaf_rn(pi, sv, oi);
                    });
            } else if (fast_pv && use[0] && use[1]) {
                each([&](float &oi, float pi, int hh, float sv) { oi = promote_fast(pi, pscale[kb][hh], sv, oi); });
            } else {
                each([&](float &oi, float pi, int hh, float sv) {
                    if (use[hh])
                        oi = promote_exact(pi, pscale[kb][hh], sv, oi);
                });
            }
        };
        constexpr int NPV = (BN / 32) * PVH;
        auto pv_pipeline = [&] {
            issue_pv(va, 0);
            issue_pv(vb, 1);
            pv_scales cur = PREFETCH<D> ? pv_ahead(0) : pv_scales{};
#pragma unroll
            for (int j = 0; j < NPV; j++) {
                if (j + 1 < NPV)
                    asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
                else
                    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
                const pv_scales next = PREFETCH<D> && j + 1 < NPV ? pv_ahead(j + 1) : cur;
                if (j % 2 == 0) {
                    promote_pv(va, j, cur);
                    if (j + 2 < NPV)
                        issue_pv(va, j + 2);
                } else {
                    promote_pv(vb, j, cur);
                    if (j + 2 < NPV)
                        issue_pv(vb, j + 2);
                }
                cur = next;
            }
        };
        if constexpr (!LEAK) {
            pv_pipeline();
        } else if (!tile_diagonal(c0)) {
            pv_pipeline();
        } else {
            // a tile on the diagonal: block by block, each product waited for;
            // diagonal blocks as two bf16 k16 steps on O itself
#pragma unroll
            for (int kb = 0; kb < BN / 32; kb++) {
                const int kb0 = c0 + 32 * kb;
                if (!diagonal(kb0)) {
#pragma unroll
                    for (int c = 0; c < PVH; c++) {
                        issue_pv(va, kb * PVH + c);
                        const pv_scales pre = PREFETCH<D> ? pv_ahead(kb * PVH + c) : pv_scales{};
                        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
                        promote_pv(va, kb * PVH + c, pre);
                    }
                    continue;
                }
                const bool use[2] = {vis[0] && kb0 <= lim[0], vis[1] && kb0 <= lim[1]};
                // P / 256 in bf16 (the code's value times 2^pexp, rounded
                // once), as the fragments of the block's two k16 steps
                auto widen = [&](uint32_t code, float scale) {
                    const float v = __half2float(__nv_cvt_fp8_to_halfraw((uint8_t)code, __NV_E4M3));
                    return v != v || scale != scale ? 0x7FC0u : f32_to_bf16(__float_as_uint(__fmul_rn(v, scale)));
                };
                auto pair = [&](uint32_t word, int byte, float scale) {
                    return widen((word >> (8 * byte)) & 0xFFu, scale) |
                           widen((word >> (8 * byte + 8)) & 0xFFu, scale) << 16;
                };
                // (P / 256: the scale's 2^-8 back, exact: 2^-135 at least)
                const float s0 = __fmul_rn(pscale[kb][0], 0x1p-8f), s1 = __fmul_rn(pscale[kb][1], 0x1p-8f);
                const uint32_t bfa[2][4] = {
                    {pair(af[kb][0], 0, s0), pair(af[kb][1], 0, s1), pair(af[kb][0], 2, s0), pair(af[kb][1], 2, s1)},
                    {pair(af[kb][2], 0, s0), pair(af[kb][3], 0, s1), pair(af[kb][2], 2, s0), pair(af[kb][3], 2, s1)},
                };
#pragma unroll
                for (int hf = 0; hf < DH; hf++) {
                    float *oh = &o[32 * hf];
                    float(&oh32)[32] = *reinterpret_cast<float(*)[32]>(oh);
                    float keep[32];
#pragma unroll
                    for (int i = 0; i < 32; i++)
                        keep[i] = oh[i]; // rows that skip this block keep their O (as the reference skips them)
                    // the copy and every other write of O's registers before
                    // the fence, every read after the wait (PTX's rule for
                    // the accumulator of a wgmma in flight)
                    fence_regs(oh32);
                    fence_regs(keep);
                    const uint16_t *panel = sh.vbf[s][kb / 2] + hf * 64 * 64 + (kb % 2) * 32;
                    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
                    wgmma_bf16_rs_acc_n64(oh, bfa[0], desc_sw128(panel));
                    wgmma_bf16_rs_acc_n64(oh, bfa[1], desc_sw128(panel + 16));
                    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
                    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
                    fence_regs(oh32);
#pragma unroll
                    for (int i = 0; i < 32; i++)
                        if (!use[(i / 2) % 2])
                            oh[i] = keep[i];
                }
            }
        }
        bar_arrive(&sh.empty[s]); // this thread is done with the stage
        if (++s == STAGES<D>)
            s = 0, phase ^= 1;
    }

    write_rows<D>(sh.lsum[wi], tid, o, m, r0 + row0, sq, h, t, out);
#endif
}

// ---- host side ----

template <int D, bool LEAK> cudaError_t launch_attn_fwd(const attn_fwd_args &a, cudaStream_t stream)
{
    constexpr int DB = D / 32;
    const int64_t tk = a.k.n0, hq = a.q.n1, hkv = a.k.n1;
    const int batch = a.batch;
    seq_info *seqs = static_cast<seq_info *>(malloc(sizeof(seq_info) * (size_t)batch));
    if (!seqs)
        return cudaErrorMemoryAllocation;
    const seq_layout n = layout_seqs(a.cu_q, a.cu_k, batch, BM, BN, BM, seqs);
    const int64_t tiles = n.tiles;
    const int64_t q_rows = n.q_rows < BM ? BM : n.q_rows, k_rows = n.k_rows < BN ? BN : n.k_rows;
    cudaError_t e = cudaSuccess;
    // the accelerator's coordinates and the grid are 32-bit
    if (tiles > INT32_MAX / 2 || hq > 65535 || hq * q_rows > INT32_MAX || hkv * k_rows > INT32_MAX ||
        hkv * D > INT32_MAX)
        e = cudaErrorInvalidValue;
    if (tiles == 0 || e != cudaSuccess) {
        free(seqs);
        return e;
    }
    // scratch: one allocation, cut in 1024-byte aligned pieces
    const size_t sizes[] = {(size_t)(hq * q_rows * D),
                            (size_t)(hq * DB * q_rows) * 4,
                            (size_t)(hkv * k_rows * D),
                            (size_t)(hkv * DB * k_rows) * 4,
                            (size_t)(hkv * D * k_rows),
                            (size_t)(hkv * (k_rows / 32) * D) * 4,
                            sizeof(seq_info) * (size_t)batch,
                            LEAK ? (size_t)(hkv * D * k_rows) * 2 : 16,
                            sizeof(scale_range) * (size_t)(hq * (q_rows / BM)),
                            sizeof(scale_range) * (size_t)(hkv * (k_rows / BN)),
                            sizeof(scale_range) * (size_t)(hkv * (k_rows / BN))};
    constexpr int NBUF = sizeof sizes / sizeof sizes[0];
    size_t total = 0, at[NBUF];
    for (int i = 0; i < NBUF; i++) {
        at[i] = total;
        total += (sizes[i] + 1023) / 1024 * 1024;
    }
    scratch mem(stream);
    uint8_t *base = nullptr;
    if ((e = mem.get(&base, total)) != cudaSuccess) {
        free(seqs);
        return e;
    }
    uint8_t *qp = base + at[0], *kp = base + at[2], *vt = base + at[4];
    float *qf = reinterpret_cast<float *>(base + at[1]), *kf = reinterpret_cast<float *>(base + at[3]),
          *vf = reinterpret_cast<float *>(base + at[5]);
    seq_info *dseqs = reinterpret_cast<seq_info *>(base + at[6]);
    uint16_t *vbf = reinterpret_cast<uint16_t *>(base + at[7]);
    scale_range *q_range = reinterpret_cast<scale_range *>(base + at[8]),
                *k_range = reinterpret_cast<scale_range *>(base + at[9]),
                *v_range = reinterpret_cast<scale_range *>(base + at[10]);
    // from pageable memory: the copy has taken the bytes when it returns
    e = cudaMemcpyAsync(dseqs, seqs, sizeof(seq_info) * (size_t)batch, cudaMemcpyHostToDevice, stream);
    free(seqs);
    if (e != cudaSuccess)
        return e;

    // Q, K and V quantized and packed, each in one pass over the input
    // (fp32 or bf16, any strides)
    const int preset = (int)a.preset;
    pack_rows<D><<<dim3((unsigned)(q_rows / 128), (unsigned)hq), 256, 0, stream>>>(a.q, preset, dseqs, batch, false,
                                                                                qp, qf, q_range, q_rows);
    if (tk > 0) {
        pack_rows<D><<<dim3((unsigned)(k_rows / 128), (unsigned)hkv), 256, 0, stream>>>(a.k, preset, dseqs, batch,
                                                                                     true, kp, kf, k_range, k_rows);
        // V's ranges start empty: lo above every scale (bytes 0x7F), hi 0
        const size_t nv = (size_t)(hkv * (k_rows / BN));
        if ((e = cudaMemsetAsync(v_range, 0, sizeof(scale_range) * nv, stream)) != cudaSuccess ||
            (e = cudaMemset2DAsync(v_range, sizeof(scale_range), 0x7F, sizeof(uint32_t), nv, stream)) != cudaSuccess)
            return e;
        pack_v<D><<<dim3((unsigned)(k_rows / 64), D / 64, (unsigned)hkv), 256, 0, stream>>>(
            a.v, preset, LEAK, dseqs, batch, vt, vf, v_range, vbf, k_rows);
    }
    if ((e = cudaGetLastError()) != cudaSuccess)
        return e;

    CUtensorMap maps[7];
    memset(maps, 0, sizeof maps);
    const CUtensorMapSwizzle qk_swizzle = PW<D> == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
    if ((e = tensor_map(&maps[0], CU_TENSOR_MAP_DATA_TYPE_UINT8, qp, D, (uint64_t)(hq * q_rows), D, PW<D>, BM,
                        qk_swizzle)) != cudaSuccess ||
        (e = tensor_map(&maps[1], CU_TENSOR_MAP_DATA_TYPE_UINT8, kp, D, (uint64_t)(hkv * k_rows), D, PW<D>, BN,
                        qk_swizzle)) != cudaSuccess ||
        (e = tensor_map(&maps[2], CU_TENSOR_MAP_DATA_TYPE_UINT8, vt, (uint64_t)k_rows, (uint64_t)(hkv * D),
                        (uint64_t)k_rows, BN, D, CU_TENSOR_MAP_SWIZZLE_128B)) != cudaSuccess ||
        (e = tensor_map(&maps[3], CU_TENSOR_MAP_DATA_TYPE_FLOAT32, qf, (uint64_t)q_rows, (uint64_t)(hq * DB),
                        (uint64_t)q_rows * 4, BM, DB, CU_TENSOR_MAP_SWIZZLE_NONE)) != cudaSuccess ||
        (e = tensor_map(&maps[4], CU_TENSOR_MAP_DATA_TYPE_FLOAT32, kf, (uint64_t)k_rows, (uint64_t)(hkv * DB),
                        (uint64_t)k_rows * 4, BN, DB, CU_TENSOR_MAP_SWIZZLE_NONE)) != cudaSuccess ||
        (e = tensor_map(&maps[5], CU_TENSOR_MAP_DATA_TYPE_FLOAT32, vf, D, (uint64_t)(hkv * (k_rows / 32)), D * 4, D,
                        BN / 32, CU_TENSOR_MAP_SWIZZLE_NONE)) != cudaSuccess ||
        (LEAK && (e = tensor_map(&maps[6], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, vbf, (uint64_t)k_rows, (uint64_t)(hkv * D),
                                 (uint64_t)k_rows * 2, 64, D, CU_TENSOR_MAP_SWIZZLE_128B)) != cudaSuccess))
        return e;
    const uint32_t log2e_bits = 0x3FB8AA3Bu; // fl(log2 e)
    float log2e;
    memcpy(&log2e, &log2e_bits, 4);
    const float c = a.softmax_scale * log2e; // one fp32 product, as the reference computes it
    const attn_out out = {a.o.base, a.o.s0, a.o.s1, a.o.s2, a.o.dtype == MXFA_BF16, a.lse, a.ls0, a.ls1};
    auto kernel = a.p_dynamic ? attn_fwd_sm90<D, LEAK, true> : attn_fwd_sm90<D, LEAK, false>;
    // on every launch: the attribute belongs to the current device
    if ((e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES<D, LEAK>)) !=
        cudaSuccess)
        return e;
    kernel<<<dim3((unsigned)(tiles * (2 / CONSUMERS<D, LEAK>)), (unsigned)hq), THREADS<D, LEAK>, SMEM_BYTES<D, LEAK>,
             stream>>>(maps[0], maps[1], maps[2], maps[3], maps[4], maps[5], maps[6], dseqs, q_range, k_range, v_range,
                       batch, (int)(hq / hkv), q_rows, k_rows, c, a.causal, out);
    return cudaGetLastError();
}

} // namespace

// One per head dim, each in a file of its own so that they compile in
// parallel (attn_fwd_d64.cu, _d128.cu, _d256.cu).
cudaError_t launch_attn_fwd_d64(const attn_fwd_args &a, cudaStream_t stream);
cudaError_t launch_attn_fwd_d128(const attn_fwd_args &a, cudaStream_t stream);
cudaError_t launch_attn_fwd_d256(const attn_fwd_args &a, cudaStream_t stream);

} // namespace mxfa_gpu

#endif
