// SPDX-License-Identifier: BSD-3-Clause
// The sm90-bf16 attention forward's consumers (fwd_bf16.cuh) before and
// around their softmax: S = Q K^T issued, O += P V issued, and O += P V a
// block of keys at a time for the tiles whose V holds a NaN or an Inf.
#ifndef MXFA_GPU_SM90_FWD_PRODUCTS_CUH
#define MXFA_GPU_SM90_FWD_PRODUCTS_CUH

#include "sm90/fwd_layout.cuh"
#include "sm90/hopper.cuh"
#include "sm90/wgmma_bf16.cuh"

namespace mxfa_gpu {
namespace fwd90 {

using namespace sm90;

#ifdef MXFA_SM90_CODE

// S = Q K^T for a consumer's 64 rows: D / 16 steps, the first from zero.
template <int D, int BN>
__device__ __forceinline__ void issue_s(float (&s)[BN / 2], const fwd_shared<D, BN> &sh, int stage, int wg)
{
    const uint64_t qd = opaque(desc_sw128(&sh.q[0][wg * 64 * 64])), kd = opaque(desc_sw128(sh.k[stage][0]));
    chain_sw128<BN, D, BM, true>(s, qd, kd);
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

#endif // MXFA_SM90_CODE

} // namespace fwd90
} // namespace mxfa_gpu

#endif
