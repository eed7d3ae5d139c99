// SPDX-License-Identifier: BSD-3-Clause
// The geometry of the sm90-bf16 attention forward kernel (fwd_bf16.cuh):
// a query tile of BM = 128
// rows and the key tiles it visits, and which of a tile's keys each row
// sees. Host and device code.
//
// A query tile is the reference's (docs/NUMERICS.md, "Attention forward"):
// 128 rows, key tiles of the call's block_n in increasing order, causal
// masks bottom-right aligned. Two consumer warpgroups take 64 rows each,
// and the leak-free mask's rule reads the whole tile's first and last rows.
#ifndef MXFA_GPU_SM90_FWD_TILE_CUH
#define MXFA_GPU_SM90_FWD_TILE_CUH

#include "attn_seqs.cuh"
#include "module.cuh"

namespace mxfa_gpu {
namespace fwd90 {

constexpr int BM = 128;      // query rows a tile (two warpgroups of 64)
constexpr int KEY_PAD = 128; // a sequence's keys start on a multiple of this in the packed K and V

// A query tile's rows and key limits. A row's limit is the last key it sees
// (bottom-right causal: i + lk - lq), clamped to [-1, lk - 1].
struct q_tile {
    int r0, nr;                 // first row in the sequence, rows (1..BM)
    int lq, lk;                 // the sequence's lengths
    int lim_first, lim_last;    // the first and last row's limits
    bool causal;
    __host__ __device__ int limit(int i) const
    {
        const int64_t v = causal ? (int64_t)i + lk - lq : lk - 1;
        return (int)(v < -1 ? -1 : v > lk - 1 ? lk - 1 : v);
    }
    // key tiles of bn keys that some row sees, in order from 0
    __host__ __device__ int key_tiles(int bn) const { return (lim_last + 1 + bn - 1) / bn; }
    // the leak-free mask: a 32-key block from kb0 that some row of the tile
    // sees only in part (the first row not all of it, the last some of it)
    __host__ __device__ bool diagonal(int kb0) const
    {
        const int klast = kb0 + 31 < lk - 1 ? kb0 + 31 : lk - 1;
        return kb0 < lk && lim_first < klast && lim_last >= kb0;
    }
};

__host__ __device__ inline q_tile make_q_tile(int r0, int lq, int lk, bool causal)
{
    q_tile t;
    t.r0 = r0, t.nr = lq - r0 < BM ? lq - r0 : BM, t.lq = lq, t.lk = lk, t.causal = causal;
    t.lim_first = t.limit(r0), t.lim_last = t.limit(r0 + t.nr - 1);
    return t;
}

// The named barriers of the kernel (0 is __syncthreads'): the consumer
// warpgroups' turns to issue their products (ping-pong: 256 threads each,
// one warpgroup waiting, the other arriving).
enum fwd_barrier : uint32_t { BAR_TURN0 = 1, BAR_TURN1 = 2 };

} // namespace fwd90
} // namespace mxfa_gpu

#endif
