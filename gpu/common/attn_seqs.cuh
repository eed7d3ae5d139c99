// SPDX-License-Identifier: BSD-3-Clause
// A jagged batch as every attention kernel packs it, and the output the
// forward kernels write: what the Hopper and Blackwell kernels share.
//
// The packing puts each sequence's query rows (and key rows) of a head one
// after the other, each sequence's padded to a multiple of the kernel's
// tile, so that no tile spans two sequences; a kernel finds a packed row's
// sequence by a binary search over their first rows.
#ifndef MXFA_GPU_COMMON_ATTN_SEQS_CUH
#define MXFA_GPU_COMMON_ATTN_SEQS_CUH

#include "module.cuh"
#include "mx.cuh"

namespace mxfa_gpu {

// One sequence of the batch: where its tokens are in the caller's tensors,
// where its rows start in the packed ones, and its first unit of work.
struct seq_info {
    int64_t q0, k0;       // first token in q and in k, v
    int64_t lq, lk;       // lengths
    int64_t q_off, k_off; // first packed row (multiples of the paddings)
    int64_t v_block;      // first row of its V scales (col blocks of 32 keys)
    int first_tile;       // its first unit of work (a query tile of the grid)
};

// The packed sizes of a batch: rows of Q and of K a head, units of work
// and blocks of 32 keys in all.
struct seq_layout {
    int64_t q_rows, k_rows, tiles, v_blocks;
};

// The table of a batch from its cumulative lengths (cu_q, cu_k: batch + 1
// offsets): query rows padded to q_pad, keys to k_pad, a unit of work
// every tile_rows query rows of a sequence.
inline seq_layout layout_seqs(const int32_t *cu_q, const int32_t *cu_k, int batch, int64_t q_pad, int64_t k_pad,
                              int64_t tile_rows, seq_info *seqs)
{
    seq_layout n = {0, 0, 0, 0};
    for (int b = 0; b < batch; b++) {
        seq_info &s = seqs[b];
        s.q0 = cu_q[b], s.k0 = cu_k[b];
        s.lq = (int64_t)cu_q[b + 1] - cu_q[b], s.lk = (int64_t)cu_k[b + 1] - cu_k[b];
        s.q_off = n.q_rows, s.k_off = n.k_rows, s.v_block = n.v_blocks, s.first_tile = (int)n.tiles;
        n.q_rows += (s.lq + q_pad - 1) / q_pad * q_pad, n.k_rows += (s.lk + k_pad - 1) / k_pad * k_pad;
        n.tiles += (s.lq + tile_rows - 1) / tile_rows, n.v_blocks += (s.lk + 31) / 32;
    }
    return n;
}

// The sequence that packed row p (of a head) belongs to and the token it
// holds (*token), or -1 for padding. keys: K and V's rows, else Q's.
__device__ __forceinline__ int64_t packed_token(const seq_info *seqs, int batch, bool keys, int64_t p, int64_t *token)
{
    const int b = last_at_or_below(batch, p, [&](int s) { return keys ? seqs[s].k_off : seqs[s].q_off; });
    const int64_t j = p - (keys ? seqs[b].k_off : seqs[b].q_off), len = keys ? seqs[b].lk : seqs[b].lq;
    if (j < 0 || j >= len)
        return -1;
    *token = (keys ? seqs[b].k0 : seqs[b].q0) + j;
    return j;
}

// Where the forward writes O ([tokens][H][D], fp32 or bf16, strides in
// elements) and LSE ([tokens][H], fp32; may be null).
struct attn_out {
    uint8_t *o;
    int64_t os0, os1, os2;
    bool o_bf16;
    float *lse;
    int64_t ls0, ls1;

    // O of token, head h, column col: v, bf16 rounded to nearest even
    __device__ __forceinline__ void store_o(int64_t token, int h, int col, float v) const
    {
        const int64_t at = token * os0 + (int64_t)h * os1 + (int64_t)col * os2;
        if (o_bf16)
            reinterpret_cast<uint16_t *>(o)[at] = (uint16_t)f32_to_bf16(__float_as_uint(v));
        else
            reinterpret_cast<float *>(o)[at] = v;
    }
    __device__ __forceinline__ void store_lse(int64_t token, int h, float v) const
    {
        lse[token * ls0 + (int64_t)h * ls1] = v;
    }
};

} // namespace mxfa_gpu

#endif
