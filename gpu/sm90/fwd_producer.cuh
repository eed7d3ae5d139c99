// SPDX-License-Identifier: BSD-3-Clause
// The sm90-bf16 attention forward's producer (fwd_bf16.cuh): one thread of
// the CTA's first warpgroup issues the tensor-memory accelerator's copies,
// the Q tile once, then K and V^T a key tile at a time through the rings
// of stages, each stage refilled once the consumers release it. V^T comes
// a block of 32 keys a copy, from the quantized V or, for the leak-free
// mask's diagonal blocks, from V rounded to bf16.
#ifndef MXFA_GPU_SM90_FWD_PRODUCER_CUH
#define MXFA_GPU_SM90_FWD_PRODUCER_CUH

#include "tma.cuh"
#include "sm90/fwd_layout.cuh"
#include "sm90/hopper.cuh"

namespace mxfa_gpu {
namespace fwd90 {

#ifdef MXFA_SM90_CODE

// The leak-free mask's diagonal blocks of key tile j (bit b: block b)
template <int BN> __device__ __forceinline__ unsigned diagonal_blocks(const fwd_params &p, const q_tile &qt, int j)
{
    unsigned bits = 0;
    if (p.leak_free)
        for (int b = 0; b < BN / 32; b++)
            bits |= (unsigned)qt.diagonal(j * BN + 32 * b) << b;
    return bits;
}

// Query tile qt of sequence sq, head h (kv head hk), its nkt key tiles.
template <int D, int BN>
__device__ __forceinline__ void produce(fwd_shared<D, BN> &sh, const CUtensorMap &map_q, const CUtensorMap &map_k,
                                        const CUtensorMap &map_v, const CUtensorMap &map_vraw, const fwd_params &p,
                                        const seq_info &sq, const q_tile &qt, int h, int hk, int nkt)
{
    using cf = config<D, BN>;
    constexpr int STAGES = cf::STAGES;
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
        const unsigned diag = diagonal_blocks<BN>(p, qt, j);
        bar_expect(&sh.v_full[s], sizeof sh.v[0]);
        for (int pn = 0; pn < cf::VP; pn++)
            tma_load(sh.v[s][pn], diag >> pn & 1u ? &map_vraw : &map_v, key + 32 * pn, hk * D, &sh.v_full[s]);
    }
}

#endif // MXFA_SM90_CODE

} // namespace fwd90
} // namespace mxfa_gpu

#endif
