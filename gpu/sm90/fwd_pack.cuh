// SPDX-License-Identifier: BSD-3-Clause
// The operands of the sm90-bf16 attention forward kernel (fwd_bf16.cuh),
// made before it runs: Q, K and V quantized with the call's preset (Q and
// K in row blocks along D, V in col blocks of 32 keys restarting at every
// sequence), then every element widened with its block's scale to bf16 as
// the model does (docs/NUMERICS.md, "The models": the exact value rounded
// once to nearest even), laid out for the tensor-memory accelerator:
//   Q  [Hq][q_rows][D]   each sequence's rows from a multiple of BM, zeros between;
//   K  [Hkv][k_rows][D]  each sequence's keys from a multiple of KEY_PAD;
//   V^T [Hkv][D][k_rows] likewise, keys contiguous (the B operand of P V is K-major);
// and, for the leak-free mask, V^T again as the input rounded to bf16, the
// operand of its diagonal blocks. A flag a block of 32 packed keys says
// whether its V (either form) holds a NaN or an Inf: rows that skip a block
// must not see 0 x Inf.
#ifndef MXFA_GPU_SM90_FWD_PACK_CUH
#define MXFA_GPU_SM90_FWD_PACK_CUH

#include <cstdlib>

#include "mx.cuh"
#include "nd3.cuh"
#include "tma.cuh"
#include "sm90/fwd_tile.cuh"

namespace mxfa_gpu {
namespace fwd90 {

// An E4M3 code with its block's scale byte as bf16 bits: the code decoded
// exactly, one fp32 multiplication by 2^(scale - 127) (exact wherever the
// result is at least 2^-149, and anything smaller is 0 in bf16 too), then
// to bf16 at nearest even. A NaN code or scale gives the quiet NaN 0x7FC0.
__device__ __forceinline__ uint16_t widen_e4m3(uint32_t code, uint32_t scale)
{
    const float v = __half2float(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)code, __NV_E4M3));
    if (scale == 0xFFu || v != v)
        return 0x7FC0;
    return (uint16_t)f32_to_bf16(__float_as_uint(__fmul_rn(v, e8m0_value(scale))));
}

__device__ __forceinline__ bool bf16_finite(uint32_t h)
{
    return (h & 0x7F80u) != 0x7F80u;
}

// The sequence that packed row p (of a head) belongs to and the token it
// holds (*token), or -1 for padding. keys: K and V's rows, else Q's.
__device__ __forceinline__ int64_t packed_token(const seq *seqs, int batch, bool keys, int64_t p, int64_t *token)
{
    const int b = last_at_or_below(batch, p, [&](int s) { return keys ? seqs[s].k_off : seqs[s].q_off; });
    const int64_t j = p - (keys ? seqs[b].k_off : seqs[b].q_off), len = keys ? seqs[b].lk : seqs[b].lq;
    if (j < 0 || j >= len)
        return -1;
    *token = (keys ? seqs[b].k0 : seqs[b].q0) + j;
    return j;
}

// Q or K: codes [tokens][H][D] and scale bytes [tokens][H][D / 32] to bf16
// [H][rows][D], 8 elements (16 bytes out) a thread, consecutive threads on
// consecutive pieces of a row, so that reads and writes are whole lines.
// Grid x over rows * D / 8 / 256 blocks of 256 threads, y the heads.
template <int D>
__global__ void pack_rows_bf16(const uint8_t *codes, const uint8_t *scales, const seq *seqs, int batch, bool keys,
                               uint16_t *out, int64_t rows)
{
    const int64_t at = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, h = blockIdx.y, heads = gridDim.y;
    const int64_t p = at / (D / 8);
    const int c = (int)(at % (D / 8)) * 8;
    if (p >= rows)
        return;
    int64_t token = 0;
    uint32_t w[4] = {0, 0, 0, 0};
    if (packed_token(seqs, batch, keys, p, &token) >= 0) {
        const uint2 c8 = *reinterpret_cast<const uint2 *>(codes + (token * heads + h) * D + c);
        const uint32_t sc = scales[(token * heads + h) * (D / 32) + c / 32], in[2] = {c8.x, c8.y};
#pragma unroll
        for (int e = 0; e < 8; e++)
            w[e / 2] |= (uint32_t)widen_e4m3(in[e / 4] >> (8 * (e % 4)) & 0xFFu, sc) << (16 * (e % 2));
    }
    *reinterpret_cast<uint4 *>(out + (h * rows + p) * D + c) = make_uint4(w[0], w[1], w[2], w[3]);
}

// V: codes [tokens][H][D] and col-block scale bytes [vblocks][H][D] to
// bf16 V^T [H][D][rows]; with raw (the leak-free mask), also the input
// itself rounded to bf16, V^T the same way. bad[h][rows / 32]: 1 where a
// block of 32 keys holds a NaN or Inf in either. A transpose through
// shared memory: a block of 256 threads takes 64 packed keys and 64 columns
// of a head, reads them a key's row at a time and writes them a column's
// row at a time, 128 bytes a row either way. Grid x over rows / 64, y over
// D / 64, z over the heads.
template <int D>
__global__ void pack_vt_bf16(const uint8_t *codes, const uint8_t *scales, nd3 v, bool raw, const seq *seqs, int batch,
                             uint16_t *vt, uint16_t *vraw, int *bad, int64_t rows)
{
    __shared__ uint8_t code_t[64][64 + 4]; // [key][column], padded against bank conflicts
    __shared__ uint8_t scale_t[2][64];     // [block of 32 keys][column]
    __shared__ uint16_t raw_t[64][64 + 2];
    const int64_t p0 = (int64_t)blockIdx.x * 64, h = blockIdx.z, heads = gridDim.z;
    const int e0 = (int)blockIdx.y * 64, tid = (int)threadIdx.x;
    {
        const int k = tid / 4, c = (tid % 4) * 16; // 16 bytes of a key's row
        int64_t token;
        const bool real = packed_token(seqs, batch, true, p0 + k, &token) >= 0;
        uint4 q = make_uint4(0, 0, 0, 0);
        if (real)
            q = *reinterpret_cast<const uint4 *>(codes + (token * heads + h) * D + e0 + c);
        const uint32_t in[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
        for (int i = 0; i < 16; i++)
            code_t[k][c + i] = (uint8_t)(in[i / 4] >> (8 * (i % 4)));
        if (raw)
#pragma unroll
            for (int i = 0; i < 16; i++)
                raw_t[k][c + i] = real ? (uint16_t)f32_to_bf16(__float_as_uint(load3(v, token, h, e0 + c + i))) : 0;
        if (tid < 128) { // the scales of the two blocks of 32 keys
            const int blk = tid / 64, col = tid % 64;
            const int64_t pb = p0 + 32 * blk;
            const int b = last_at_or_below(batch, pb, [&](int s) { return seqs[s].k_off; });
            const int64_t j0 = pb - seqs[b].k_off;
            scale_t[blk][col] = j0 >= 0 && j0 < seqs[b].lk
                                    ? scales[((seqs[b].v_block + j0 / 32) * heads + h) * D + e0 + col]
                                    : (uint8_t)0x7F;
        }
    }
    __syncthreads();
    const int col = tid / 4, k0 = (tid % 4) * 16; // 16 keys of a column's row
    uint32_t w[8], r[8];
    bool finite = true;
#pragma unroll
    for (int i = 0; i < 16; i++) {
        const uint32_t x = widen_e4m3(code_t[k0 + i][col], scale_t[(k0 + i) / 32][col]);
        finite &= bf16_finite(x);
        w[i / 2] = i % 2 ? w[i / 2] | x << 16 : x;
        if (raw) {
            const uint32_t y = raw_t[k0 + i][col];
            finite &= bf16_finite(y);
            r[i / 2] = i % 2 ? r[i / 2] | y << 16 : y;
        }
    }
    uint4 *dst = reinterpret_cast<uint4 *>(vt + (h * D + e0 + col) * rows + p0 + k0);
    dst[0] = make_uint4(w[0], w[1], w[2], w[3]), dst[1] = make_uint4(w[4], w[5], w[6], w[7]);
    if (raw) {
        uint4 *rdst = reinterpret_cast<uint4 *>(vraw + (h * D + e0 + col) * rows + p0 + k0);
        rdst[0] = make_uint4(r[0], r[1], r[2], r[3]), rdst[1] = make_uint4(r[4], r[5], r[6], r[7]);
    }
    // a block of 32 keys is bad when any of its values in any column is
    const int bad0 = __syncthreads_or(!finite && k0 < 32), bad1 = __syncthreads_or(!finite && k0 >= 32);
    if (tid == 0) {
        if (bad0)
            bad[h * (rows / 32) + p0 / 32] = 1;
        if (bad1)
            bad[h * (rows / 32) + p0 / 32 + 1] = 1;
    }
}

// ---- host side ----

// The packed operands of one call, in one scratch allocation.
struct operands {
    seq *seqs;             // device copy of the table
    uint16_t *q, *k, *vt, *vraw;
    int *bad;              // [Hkv][k_rows / 32]
    int64_t q_rows, k_rows, tiles;
};

// Quantizes and packs Q, K and V (raw: also V rounded to bf16 for the
// leak-free mask) into scratch; ops gets the pointers.
template <int D>
cudaError_t pack_operands(const attn_fwd_args &a, bool raw, scratch &mem, cudaStream_t stream, operands *ops)
{
    constexpr int DB = D / 32;
    const int64_t tq = a.q.n0, tk = a.k.n0, hq = a.q.n1, hkv = a.k.n1;
    const int batch = a.batch;
    seq *seqs = static_cast<seq *>(malloc(sizeof(seq) * (size_t)batch));
    mxfa_segment *vsegs = static_cast<mxfa_segment *>(malloc(sizeof(mxfa_segment) * (size_t)batch));
    if (!seqs || !vsegs) {
        free(seqs), free(vsegs);
        return cudaErrorMemoryAllocation;
    }
    int64_t q_rows = 0, k_rows = 0, vblocks = 0, tiles = 0;
    for (int b = 0; b < batch; b++) {
        seq &s = seqs[b];
        s.q0 = a.cu_q[b], s.k0 = a.cu_k[b];
        s.lq = (int64_t)a.cu_q[b + 1] - a.cu_q[b], s.lk = (int64_t)a.cu_k[b + 1] - a.cu_k[b];
        s.q_off = q_rows, s.k_off = k_rows, s.v_block = vblocks, s.first_tile = (int)tiles;
        q_rows += round_up(s.lq, BM), k_rows += round_up(s.lk, KEY_PAD), vblocks += (s.lk + 31) / 32;
        tiles += (s.lq + BM - 1) / BM;
        vsegs[b] = {s.k0, s.lk, s.v_block};
    }
    q_rows = q_rows < BM ? BM : q_rows, k_rows = k_rows < KEY_PAD ? KEY_PAD : k_rows;
    ops->q_rows = q_rows, ops->k_rows = k_rows, ops->tiles = tiles;
    // the accelerator's coordinates and the grid are 32-bit
    cudaError_t e = cudaSuccess;
    if (tiles > INT32_MAX || hq > 65535 || hq * q_rows > INT32_MAX || hkv * k_rows > INT32_MAX || hkv * D > INT32_MAX ||
        k_rows > INT32_MAX)
        e = cudaErrorInvalidValue;
    // scratch: one allocation in 1024-byte aligned pieces
    const size_t sizes[] = {(size_t)(hq * tq * D),       (size_t)(hq * tq * DB),       (size_t)(hkv * tk * D),
                            (size_t)(hkv * tk * DB),     (size_t)(hkv * tk * D),       (size_t)(hkv * vblocks * D),
                            (size_t)(hq * q_rows * D) * 2, (size_t)(hkv * k_rows * D) * 2, (size_t)(hkv * D * k_rows) * 2,
                            raw ? (size_t)(hkv * D * k_rows) * 2 : 16, (size_t)(hkv * (k_rows / 32)) * 4,
                            sizeof(seq) * (size_t)batch};
    constexpr int NBUF = sizeof sizes / sizeof sizes[0];
    size_t total = 0, at[NBUF];
    for (int i = 0; i < NBUF; i++) {
        at[i] = total;
        total += (sizes[i] + 1023) / 1024 * 1024;
    }
    uint8_t *base = nullptr;
    if (e == cudaSuccess)
        e = mem.get(&base, total);
    if (e != cudaSuccess) {
        free(seqs), free(vsegs);
        return e;
    }
    uint8_t *qc = base + at[0], *qsb = base + at[1], *kc = base + at[2], *ksb = base + at[3], *vc = base + at[4],
            *vsb = base + at[5];
    ops->q = reinterpret_cast<uint16_t *>(base + at[6]), ops->k = reinterpret_cast<uint16_t *>(base + at[7]);
    ops->vt = reinterpret_cast<uint16_t *>(base + at[8]), ops->vraw = reinterpret_cast<uint16_t *>(base + at[9]);
    ops->bad = reinterpret_cast<int *>(base + at[10]), ops->seqs = reinterpret_cast<seq *>(base + at[11]);
    // from pageable memory: the copy has taken the bytes when it returns
    e = cudaMemcpyAsync(ops->seqs, seqs, sizeof(seq) * (size_t)batch, cudaMemcpyHostToDevice, stream);
    free(seqs);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(ops->bad, 0, sizes[10], stream);

    // quantization into codes [tokens][H][D] and scales [tokens][H][D / 32]
    // (Q, K) or [vblocks][H][D] (V): one launch where a token's heads (Q, K)
    // or all heads' columns (V) are evenly spaced, as in a packed
    // [tokens][H][D] tensor, else a head at a time
    auto esz = [](const nd3 &x) { return (int64_t)(x.dtype == MXFA_BF16 ? 2 : 4); };
    auto head = [&](const nd3 &x, int64_t hh) { return dview{x.base + hh * x.s1 * esz(x), x.n0, D, x.s0, x.s2, x.dtype}; };
    auto rows_q = [&](const nd3 &x, int64_t heads, const mxfa_segment *seg, uint8_t *codes, uint8_t *sc) {
        const int64_t n = x.n0;
        if (x.s0 == heads * x.s1)
            return launch_quantize(dview{x.base, n * heads, D, x.s1, x.s2, x.dtype}, seg, 1, a.preset, MXFA_BLOCK_ROW,
                                   dview{codes, n * heads, D, D, 1, MXFA_E4M3},
                                   dview{sc, n * heads, DB, DB, 1, MXFA_E8M0}, stream);
        cudaError_t r = cudaSuccess;
        for (int64_t hh = 0; hh < heads && r == cudaSuccess; hh++)
            r = launch_quantize(head(x, hh), seg, 1, a.preset, MXFA_BLOCK_ROW,
                                dview{codes + hh * D, n, D, heads * D, 1, MXFA_E4M3},
                                dview{sc + hh * DB, n, DB, heads * DB, 1, MXFA_E8M0}, stream);
        return r;
    };
    const mxfa_segment all_q = {0, tq, 0}, all_k = {0, tk, 0};
    if (e == cudaSuccess)
        e = rows_q(a.q, hq, &all_q, qc, qsb);
    if (e == cudaSuccess && tk > 0)
        e = rows_q(a.k, hkv, &all_k, kc, ksb);
    if (e == cudaSuccess && tk > 0 && a.v.s1 == D * a.v.s2) {
        e = launch_quantize(dview{a.v.base, tk, hkv * D, a.v.s0, a.v.s2, a.v.dtype}, vsegs, batch, a.preset,
                            MXFA_BLOCK_COL, dview{vc, tk, hkv * D, hkv * D, 1, MXFA_E4M3},
                            dview{vsb, vblocks, hkv * D, hkv * D, 1, MXFA_E8M0}, stream);
    } else {
        for (int64_t hh = 0; hh < hkv && tk > 0 && e == cudaSuccess; hh++)
            e = launch_quantize(head(a.v, hh), vsegs, batch, a.preset, MXFA_BLOCK_COL,
                                dview{vc + hh * D, tk, D, hkv * D, 1, MXFA_E4M3},
                                dview{vsb + hh * D, vblocks, D, hkv * D, 1, MXFA_E8M0}, stream);
    }
    free(vsegs);
    if (e != cudaSuccess)
        return e;
    pack_rows_bf16<D><<<dim3((unsigned)(q_rows * D / 8 / 256), (unsigned)hq), 256, 0, stream>>>(
        qc, qsb, ops->seqs, batch, false, ops->q, q_rows);
    if (tk > 0) {
        pack_rows_bf16<D><<<dim3((unsigned)(k_rows * D / 8 / 256), (unsigned)hkv), 256, 0, stream>>>(
            kc, ksb, ops->seqs, batch, true, ops->k, k_rows);
        pack_vt_bf16<D><<<dim3((unsigned)(k_rows / 64), D / 64, (unsigned)hkv), 256, 0, stream>>>(
            vc, vsb, a.v, raw, ops->seqs, batch, ops->vt, ops->vraw, ops->bad, k_rows);
    } else { // no key anywhere: K and V are zeros the kernel never reads past a limit
        if ((e = cudaMemsetAsync(ops->k, 0, sizes[7], stream)) != cudaSuccess ||
            (e = cudaMemsetAsync(ops->vt, 0, sizes[8], stream)) != cudaSuccess)
            return e;
    }
    return cudaGetLastError();
}

} // namespace fwd90
} // namespace mxfa_gpu

#endif
