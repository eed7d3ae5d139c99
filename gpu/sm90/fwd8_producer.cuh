// SPDX-License-Identifier: BSD-3-Clause
// The sm90-fp8 attention forward's producer (attn_fwd.cuh): one thread of
// the CTA's first warpgroup issues the tensor-memory accelerator's copies,
// the Q tile and its scales once, then K, V^T, their scales and scale
// ranges a key tile at a time through the ring of stages (and, where the
// leak-free mask takes a tile's diagonal blocks in bf16, V in bf16 too).
#ifndef MXFA_GPU_SM90_FWD8_PRODUCER_CUH
#define MXFA_GPU_SM90_FWD8_PRODUCER_CUH

#include "tma.cuh"
#include "sm90/fwd8_layout.cuh"

namespace mxfa_gpu {
namespace {

// The kernel's tensor maps: Q, K and V^T codes, Q's, K's and V's scales,
// and V in bf16 for the leak-free mask's diagonal blocks.
struct kv_maps {
    const CUtensorMap *q, *k, *vt, *qs, *ks, *vs, *vbf;
};

#ifdef MXFA_SM90_CODE

// Query tile qt of sequence sq, head h (kv head hk); k_range and v_range:
// the sequence's key tiles' scale ranges.
template <int D, bool LEAK>
__device__ __forceinline__ void produce(attn_shared<D, LEAK> &sh, const kv_maps &map, const query_tile<LEAK> &qt,
                                        const seq_info &sq, int h, int hk, int64_t q_rows, int64_t k_rows,
                                        const scale_range *k_range, const scale_range *v_range)
{
    constexpr int DB = D / 32;
    bar_expect(&sh.q_full, sizeof sh.q + sizeof sh.qs);
    for (int pn = 0; pn < D / PW<D>; pn++)
        tma_load(sh.q + pn * BM * PW<D>, map.q, pn * PW<D>, (int)(h * q_rows + sq.q_off + qt.r0), &sh.q_full);
    tma_load(sh.qs, map.qs, (int)(sq.q_off + qt.r0), h * DB, &sh.q_full);
    for (int kt = 0, s = 0, phase = 0; kt < qt.nkt; kt++) {
        if (kt >= STAGES<D>)
            bar_wait_idle(&sh.empty[s], phase ^ 1);
        const int64_t key = sq.k_off + (int64_t)kt * BN;
        kv_stage<D> &st = sh.st[s];
        const bool diag = qt.tile_diagonal(kt * BN);
        // the ranges by plain stores, which the arrival releases to the
        // consumers' wait
        sh.krange[s] = k_range[kt], sh.vrange[s] = v_range[kt];
        bar_expect(&sh.full[s], (uint32_t)(sizeof st + (diag ? sizeof sh.vbf[0] : 0)));
        if (diag) {
            tma_load(sh.vbf[s][0], map.vbf, (int)key, hk * D, &sh.full[s]);
            tma_load(sh.vbf[s][1], map.vbf, (int)key + 64, hk * D, &sh.full[s]);
        }
        for (int pn = 0; pn < D / PW<D>; pn++)
            tma_load(st.k + pn * BN * PW<D>, map.k, pn * PW<D>, (int)(hk * k_rows + key), &sh.full[s]);
        tma_load(st.vt, map.vt, (int)key, hk * D, &sh.full[s]);
        tma_load(st.ks, map.ks, (int)key, hk * DB, &sh.full[s]);
        tma_load(st.vs, map.vs, 0, (int)(hk * (k_rows / 32) + key / 32), &sh.full[s]);
        if (++s == STAGES<D>)
            s = 0, phase ^= 1;
    }
}

#endif // MXFA_SM90_CODE

} // namespace
} // namespace mxfa_gpu

#endif
