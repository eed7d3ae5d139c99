// SPDX-License-Identifier: BSD-3-Clause
// The sm90-fp8 attention forward's scores (attn_fwd.cuh): S = Q K^T for a
// consumer warpgroup's 64 rows and a key tile, block of D by block, each
// block's fp8 wgmma k32 into a zero accumulator promoted exactly into the
// fp32 S (the sm90-fp8 model's order: docs/NUMERICS.md, section 5).
#ifndef MXFA_GPU_SM90_FWD8_SCORES_CUH
#define MXFA_GPU_SM90_FWD8_SCORES_CUH

#include "sm90/fwd8_layout.cuh"
#include "sm90/wgmma.cuh"

namespace mxfa_gpu {
namespace {

#ifdef MXFA_SM90_CODE

// The descriptor of Q and K rows of D bytes in D-byte swizzle
template <int D> __device__ __forceinline__ uint64_t desc_qk(const uint8_t *ptr)
{
    return PW<D> == 128 ? desc_sw128(ptr) : desc_sw64(ptr);
}

// Block db of D of row r of a Q or K tile of `rows` rows in panels: its
// byte offset in the tile
template <int D> __device__ __forceinline__ uint64_t qk_off(int rows, int r, int db)
{
    return (uint64_t)((db * 32 / PW<D>) * rows * PW<D> + r * PW<D> + db * 32 % PW<D>);
}

// x: the thread's 64 scores of the tile (rows row0 and row0 + 8 of the
// tile, keys 8q + 2t and 8q + 2t + 1 at x[4q + 2hh] and x[4q + 2hh + 1]);
// st: the key tile's stage; fast_s: whether every product of the tile's
// scales is a normal float (the promotion a bare fma); wg: the warpgroup's
// 64 rows of the tile; wi, tid: its index and the thread's among the
// CTA's consumers (the stash).
template <int D, bool LEAK>
__device__ __forceinline__ void scores_tile(float (&x)[64], attn_shared<D, LEAK> &sh, const kv_stage<D> &st,
                                            bool fast_s, int wg, int wi, int tid, int row0, int t)
{
    constexpr int DB = D / 32;
    // S = Q K^T block by block, promoted exactly: products of NW keys
    // and one block of D through two partials, the next one running
    // while one is promoted; KP keys at a time in registers (at D = 256
    // the first 64 keys wait in s_stash while the next 64 are made).
    constexpr int NW = D == 256 ? 32 : 64, KP = D == 256 ? 64 : BN, NC = KP / NW, NPS = DB * NC;
    float pa[NW / 2], pb[NW / 2];
    // product j of pass kp: block j / NC of D, keys kp KP + (j % NC) NW ..
    // (the descriptors of the tiles' first bytes, each product's made
    // from them by one addition: opaque, after hopper.cuh)
    const uint64_t q_desc = opaque(desc_qk<D>(sh.q)) + (qk_off<D>(BM, wg * 64, 0) >> 4),
                   k_desc = opaque(desc_qk<D>(st.k));
    auto issue_s = [&](float(&p)[NW / 2], int kp, int j) {
        const int db = j / NC, k0 = kp * KP + (j % NC) * NW;
        const uint64_t a = q_desc + (qk_off<D>(BM, 0, db) >> 4), b = k_desc + (qk_off<D>(BN, k0, db) >> 4);
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
        if constexpr (NW == 64)
            wgmma_k32_n64(p, a, b);
        else
            wgmma_k32_n32(p, a, b);
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    };
    // the scales that promotion j of a pass starts with: its two rows'
    // and its first four keys' (loaded before the wait for the product
    // where PREFETCH<D>); the other keys' follow in the promotion, behind
    // its arithmetic.
    struct first_scales {
        float2 a;
        float4 b;
    };
    auto s_first = [&](int kp, int j) {
        const int db = j / NC, k16 = (kp * KP + (j % NC) * NW) / 16;
        return first_scales{*reinterpret_cast<const float2 *>(&sh.qs[db][scale_pos_a(row0)]),
                            *reinterpret_cast<const float4 *>(&st.ks[db][16 * k16 + 4 * t])};
    };
    // partial element i is element (j % NC) NW / 2 + i of the pass
    auto promote_s = [&](float(&p)[NW / 2], float(&xs)[KP / 2], int kp, int j, const first_scales &f) {
        const int db = j / NC, c = j % NC, k16 = (kp * KP + c * NW) / 16;
        fence_regs(p);
        const first_scales g = PREFETCH<D> ? f : s_first(kp, j);
        const float2 a = g.a;
        // the bare fma for the whole product, or the general promotion
        // for the whole product: two loops, not a test a value (which
        // interleaves the rare case's long code with the common one's,
        // and the instruction cache misses)
        if (fast_s) {
#pragma unroll
            for (int j2 = 0; j2 < NW / 16; j2++) {
                const float4 bq =
                    j2 == 0 ? g.b : *reinterpret_cast<const float4 *>(&st.ks[db][16 * (k16 + j2) + 4 * t]);
                const float bs[4] = {bq.x, bq.y, bq.z, bq.w};
#pragma unroll
                for (int hj = 0; hj < 2; hj++) {
                    const int i = 4 * (2 * j2 + hj), I = c * NW / 2 + i;
                    xs[I + 0] = promote_fast(p[i + 0], a.x, bs[2 * hj], xs[I + 0]);
                    xs[I + 1] = promote_fast(p[i + 1], a.x, bs[2 * hj + 1], xs[I + 1]);
                    xs[I + 2] = promote_fast(p[i + 2], a.y, bs[2 * hj], xs[I + 2]);
                    xs[I + 3] = promote_fast(p[i + 3], a.y, bs[2 * hj + 1], xs[I + 3]);
                }
            }
            return;
        }
#pragma unroll
        for (int j2 = 0; j2 < NW / 16; j2++) {
            const float4 bq = *reinterpret_cast<const float4 *>(&st.ks[db][16 * (k16 + j2) + 4 * t]);
            const float bs[4] = {bq.x, bq.y, bq.z, bq.w};
#pragma unroll
            for (int hj = 0; hj < 2; hj++) {
                const int i = 4 * (2 * j2 + hj), I = c * NW / 2 + i;
                xs[I + 0] = promote_exact(p[i + 0], a.x, bs[2 * hj], xs[I + 0]);
                xs[I + 1] = promote_exact(p[i + 1], a.x, bs[2 * hj + 1], xs[I + 1]);
                xs[I + 2] = promote_exact(p[i + 2], a.y, bs[2 * hj], xs[I + 2]);
                xs[I + 3] = promote_exact(p[i + 3], a.y, bs[2 * hj + 1], xs[I + 3]);
            }
        }
    };
    auto s_pass = [&](float(&xs)[KP / 2], int kp) {
#pragma unroll
        for (int i = 0; i < KP / 2; i++)
            xs[i] = 0.0f;
        issue_s(pa, kp, 0);
        issue_s(pb, kp, 1);
#pragma unroll
        for (int j = 0; j < NPS; j++) {
            const first_scales f = PREFETCH<D> ? s_first(kp, j) : first_scales{};
            if (j + 1 < NPS)
                asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
            else
                asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
            if (j % 2 == 0) {
                promote_s(pa, xs, kp, j, f);
                if (j + 2 < NPS)
                    issue_s(pa, kp, j + 2);
            } else {
                promote_s(pb, xs, kp, j, f);
                if (j + 2 < NPS)
                    issue_s(pb, kp, j + 2);
            }
        }
    };
    if constexpr (KP == BN) {
        s_pass(x, 0);
    } else {
        float(&lo)[KP / 2] = *reinterpret_cast<float(*)[KP / 2]>(&x[0]);
        float(&hi)[KP / 2] = *reinterpret_cast<float(*)[KP / 2]>(&x[KP / 2]);
        s_pass(lo, 0);
        static_assert(KP / 2 == sizeof sh.s_stash[0] / sizeof sh.s_stash[0][0], "the stash holds a pass");
#pragma unroll
        for (int I = 0; I < KP / 2; I++)
            sh.s_stash[wi][I][tid] = lo[I];
        s_pass(hi, 1);
#pragma unroll
        for (int I = 0; I < KP / 2; I++)
            lo[I] = sh.s_stash[wi][I][tid];
    }
}

#endif // MXFA_SM90_CODE

} // namespace
} // namespace mxfa_gpu

#endif
