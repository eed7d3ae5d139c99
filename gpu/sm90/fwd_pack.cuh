// SPDX-License-Identifier: BSD-3-Clause
// The operands of the sm90-bf16 attention forward kernel (fwd_bf16.cuh),
// made before it runs in one pass over the inputs: Q, K and V quantized with
// the call's preset (Q and K in row blocks along D, V in col blocks of 32
// keys restarting at every sequence), as gpu/common/quantize.cu does, and
// every code widened at once with its block's scale to bf16 as the model
// does (docs/NUMERICS.md, "The models": the exact value rounded once to
// nearest even); the codes never reach memory. Laid out for the
// tensor-memory accelerator:
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

// Four codes of a word (first in the low byte) widened with their block's
// scale 2^(scale - 127) = unit to the bf16 pairs widen_e4m3 gives, for a
// block with no NaN or Inf code and a scale below 0xFF: each code's value
// exact in f16 and in f32, its product with the unit the same fp32
// multiplication as widen_e4m3's (exact: a code's value is a multiple of
// 2^-9, so the product is a multiple of 2^-136, where fp32 keeps every bit;
// +-Inf past fp32's range), then rounded once to bf16 at nearest even by
// the paired conversion, which does what f32_to_bf16 does for a value that
// is not NaN. Low pair first.
__device__ __forceinline__ uint2 widen4_plain(uint32_t codes, float unit)
{
    uint32_t h[2], w[2];
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h[0]) : "h"((uint16_t)codes));
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h[1]) : "h"((uint16_t)(codes >> 16)));
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const float lo = __half2float(__ushort_as_half((unsigned short)(h[i] & 0xFFFFu)));
        const float hi = __half2float(__ushort_as_half((unsigned short)(h[i] >> 16)));
        // (the first operand goes to the upper half)
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w[i]) : "f"(__fmul_rn(hi, unit)), "f"(__fmul_rn(lo, unit)));
    }
    return make_uint2(w[0], w[1]);
}

__device__ __forceinline__ bool bf16_finite(uint32_t h)
{
    return (h & 0x7F80u) != 0x7F80u;
}

// Q or K: x [tokens][H][D] (fp32 or bf16, any strides) to bf16 [H][rows][D],
// quantized in row blocks of 32 along D and widened. 8 elements (16 bytes
// out) a thread, four threads a block, consecutive threads on consecutive
// pieces of a row, so that reads and writes are whole lines. Grid x over
// rows * D / 8 / 256 blocks of 256 threads (rows is a multiple of 128, so
// every lane of every warp is in the grid and takes part in the block's
// shuffles), y the heads.
template <int D>
__global__ void __launch_bounds__(256) pack_rows_bf16(nd3 x, int preset, const seq_info *seqs, int batch, bool keys,
                                                      uint16_t *out, int64_t rows)
{
    const int64_t at = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, h = blockIdx.y;
    const int64_t p = at / (D / 8);
    const int c = (int)(at % (D / 8)) * 8;
    int64_t token = 0;
    const bool real = packed_token(seqs, batch, keys, p, &token) >= 0; // the same for a block's four lanes
    uint32_t v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (real)
        load8_bits(x, token, h, c, v);
    const fp8_fmt f = fp8_e4m3();
    bool plain;
    const block_rule rule = warp_rule<8>(f, preset, reduce_max(lane_top(v), 4), v, 4, &plain);
    uint32_t w[4] = {0, 0, 0, 0};
    if (real) {
        const uint32_t codes[2] = {encode4(f, rule, plain, v), encode4(f, rule, plain, v + 4)};
        if (plain && !rule.poisoned && rule.scale < 0xFFu) { // no NaN in the block, no NaN scale
            const float unit = e8m0_value(rule.scale);
            const uint2 a = widen4_plain(codes[0], unit), b = widen4_plain(codes[1], unit);
            w[0] = a.x, w[1] = a.y, w[2] = b.x, w[3] = b.y;
        } else {
#pragma unroll
            for (int e = 0; e < 8; e++)
                w[e / 2] |= (uint32_t)widen_e4m3(codes[e / 4] >> (8 * (e % 4)) & 0xFFu, rule.scale) << (16 * (e % 2));
        }
    }
    *reinterpret_cast<uint4 *>(out + (h * rows + p) * D + c) = make_uint4(w[0], w[1], w[2], w[3]);
}

// V: x [tokens][H][D] to bf16 V^T [H][D][rows], quantized in col blocks of
// 32 keys (a sequence's keys start on a multiple of KEY_PAD, so each half of
// a 64-key piece is one block, or padding) and widened; with raw (the
// leak-free mask), also the input itself rounded to bf16, V^T the same way.
// bad[h][rows / 32]: 1 where a block of 32 keys holds a NaN or Inf in
// either; *any_bad: 1 where any does. A transpose through shared memory: a
// block of 256 threads takes 64 packed keys and 64 columns of a head, reads
// them a key's row at a time and writes them a column's row at a time, 128
// bytes a row either way; a column's block of 32 keys is two threads' 16
// (lanes l and l ^ 1). Grid x over rows / 64, y over D / 64, z over the
// heads.
template <int D>
__global__ void __launch_bounds__(256) pack_vt_bf16(nd3 x, int preset, bool raw, const seq_info *seqs, int batch,
                                                    uint16_t *vt, uint16_t *vraw, int *bad, int *any_bad,
                                                    int64_t rows)
{
    __shared__ uint32_t val_t[64][64 + 1]; // [key][column] as fp32 bits, padded against bank conflicts
    const int64_t p0 = (int64_t)blockIdx.x * 64, h = blockIdx.z;
    const int e0 = (int)blockIdx.y * 64, tid = (int)threadIdx.x;
    {
        const int k = tid / 4, c = (tid % 4) * 16; // 16 values of a key's row
        int64_t token;
        uint32_t v[16] = {};
        if (packed_token(seqs, batch, true, p0 + k, &token) >= 0) {
            load8_bits(x, token, h, e0 + c, v);
            load8_bits(x, token, h, e0 + c + 8, v + 8);
        }
#pragma unroll
        for (int i = 0; i < 16; i++)
            val_t[k][c + i] = v[i];
    }
    __syncthreads();
    const int col = tid / 4, k0 = (tid % 4) * 16; // 16 keys of a column's row
    uint32_t v[16];
#pragma unroll
    for (int i = 0; i < 16; i++)
        v[i] = val_t[k0 + i][col];
    const fp8_fmt f = fp8_e4m3();
    bool plain;
    const uint32_t top = reduce_max(umax(lane_top(v), lane_top(v + 8)), 2);
    const block_rule rule = warp_rule<16>(f, preset, top, v, 2, &plain);
    uint32_t w[8], r[8];
    bool finite = true;
    // a plain block whose scale is at most 2^119 widens to finite values
    // (448 2^119 < 2^128) without a test an element
    const bool fast = plain && !rule.poisoned && rule.scale <= 246u;
    const float unit = e8m0_value(fast ? rule.scale : 0x7Fu);
#pragma unroll
    for (int q = 0; q < 4; q++) {
        const uint32_t codes = encode4(f, rule, plain, v + 4 * q);
        if (fast) {
            const uint2 y = widen4_plain(codes, unit);
            w[2 * q] = y.x, w[2 * q + 1] = y.y;
        } else {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int i = 4 * q + e;
                const uint32_t y = widen_e4m3(codes >> (8 * e) & 0xFFu, rule.scale);
                finite &= bf16_finite(y);
                w[i / 2] = i % 2 ? w[i / 2] | y << 16 : y;
            }
        }
        if (raw) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int i = 4 * q + e;
                const uint32_t z = f32_to_bf16(v[i]);
                finite &= bf16_finite(z);
                r[i / 2] = i % 2 ? r[i / 2] | z << 16 : z;
            }
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
        if (bad0 || bad1)
            *any_bad = 1;
    }
}

// ---- host side ----

// The packed operands of one call, in one scratch allocation.
struct operands {
    seq_info *seqs;             // device copy of the table
    uint16_t *q, *k, *vt, *vraw;
    int *bad;              // [Hkv][k_rows / 32]
    int *any_bad;          // whether any of them is set
    int64_t q_rows, k_rows, tiles;
};

// Quantizes and packs Q, K and V (raw: also V rounded to bf16 for the
// leak-free mask) into scratch; ops gets the pointers.
template <int D>
cudaError_t pack_operands(const attn_fwd_args &a, bool raw, scratch &mem, cudaStream_t stream, operands *ops)
{
    const int64_t tk = a.k.n0, hq = a.q.n1, hkv = a.k.n1;
    const int batch = a.batch;
    seq_info *seqs = static_cast<seq_info *>(malloc(sizeof(seq_info) * (size_t)batch));
    if (!seqs)
        return cudaErrorMemoryAllocation;
    const seq_layout n = layout_seqs(a.cu_q, a.cu_k, batch, BM, KEY_PAD, BM, seqs);
    const int64_t tiles = n.tiles;
    const int64_t q_rows = n.q_rows < BM ? BM : n.q_rows, k_rows = n.k_rows < KEY_PAD ? KEY_PAD : n.k_rows;
    ops->q_rows = q_rows, ops->k_rows = k_rows, ops->tiles = tiles;
    // the accelerator's coordinates and the grid are 32-bit
    cudaError_t e = cudaSuccess;
    if (tiles > INT32_MAX || hq > 65535 || hkv > 65535 || hq * q_rows > INT32_MAX || hkv * k_rows > INT32_MAX ||
        hkv * D > INT32_MAX || k_rows > INT32_MAX)
        e = cudaErrorInvalidValue;
    // scratch: one allocation in 1024-byte aligned pieces
    const size_t sizes[] = {(size_t)(hq * q_rows * D) * 2, (size_t)(hkv * k_rows * D) * 2,
                            (size_t)(hkv * D * k_rows) * 2, raw ? (size_t)(hkv * D * k_rows) * 2 : 16,
                            (size_t)(hkv * (k_rows / 32) + 1) * 4, sizeof(seq_info) * (size_t)batch};
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
        free(seqs);
        return e;
    }
    ops->q = reinterpret_cast<uint16_t *>(base + at[0]), ops->k = reinterpret_cast<uint16_t *>(base + at[1]);
    ops->vt = reinterpret_cast<uint16_t *>(base + at[2]), ops->vraw = reinterpret_cast<uint16_t *>(base + at[3]);
    ops->bad = reinterpret_cast<int *>(base + at[4]), ops->seqs = reinterpret_cast<seq_info *>(base + at[5]);
    ops->any_bad = ops->bad + hkv * (k_rows / 32);
    // from pageable memory: the copy has taken the bytes when it returns
    e = cudaMemcpyAsync(ops->seqs, seqs, sizeof(seq_info) * (size_t)batch, cudaMemcpyHostToDevice, stream);
    free(seqs);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(ops->bad, 0, sizes[4], stream);
    if (e != cudaSuccess)
        return e;
    const int preset = (int)a.preset;
    pack_rows_bf16<D><<<dim3((unsigned)(q_rows * D / 8 / 256), (unsigned)hq), 256, 0, stream>>>(
        a.q, preset, ops->seqs, batch, false, ops->q, q_rows);
    if (tk > 0) {
        pack_rows_bf16<D><<<dim3((unsigned)(k_rows * D / 8 / 256), (unsigned)hkv), 256, 0, stream>>>(
            a.k, preset, ops->seqs, batch, true, ops->k, k_rows);
        pack_vt_bf16<D><<<dim3((unsigned)(k_rows / 64), D / 64, (unsigned)hkv), 256, 0, stream>>>(
            a.v, preset, raw, ops->seqs, batch, ops->vt, ops->vraw, ops->bad, ops->any_bad, k_rows);
    } else { // no key anywhere: K and V are zeros the kernel never reads past a limit
        if ((e = cudaMemsetAsync(ops->k, 0, sizes[1], stream)) != cudaSuccess ||
            (e = cudaMemsetAsync(ops->vt, 0, sizes[2], stream)) != cudaSuccess)
            return e;
    }
    return cudaGetLastError();
}

} // namespace fwd90
} // namespace mxfa_gpu

#endif
