// SPDX-License-Identifier: BSD-3-Clause
// The sm90-fp8 attention forward's packing (attn_fwd.cuh), before the
// kernel: Q and K quantized along D and V along the keys, in one pass over
// each input, into the packed rows, scales and scale ranges the kernel
// reads (fwd8_layout.cuh).
#ifndef MXFA_GPU_SM90_FWD8_PACK_CUH
#define MXFA_GPU_SM90_FWD8_PACK_CUH

#include "mx.cuh"
#include "nd3.cuh"
#include "sm90/fwd8_layout.cuh"

namespace mxfa_gpu {
namespace {

using namespace sm90;

// The range of the block's threads' lo and hi (a multiple of 32 threads)
// into *r: stored, or with shared: added by atomics to a range that
// several blocks share. red: 2 x threads / 32.
__device__ __forceinline__ void range_add(uint32_t lo, uint32_t hi, scale_range *r, bool shared, uint32_t *red)
{
    for (int o = 16; o > 0; o >>= 1) {
        lo = min(lo, __shfl_xor_sync(0xFFFFFFFFu, lo, o));
        hi = max(hi, __shfl_xor_sync(0xFFFFFFFFu, hi, o));
    }
    const int warps = (int)blockDim.x / 32, w = (int)threadIdx.x / 32;
    if (threadIdx.x % 32 == 0)
        red[2 * w] = lo, red[2 * w + 1] = hi;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int i = 1; i < warps; i++)
            lo = min(lo, red[2 * i]), hi = max(hi, red[2 * i + 1]);
        if (shared) {
            atomicMin(&r->lo, lo);
            atomicMax(&r->hi, hi);
        } else {
            *r = {lo, hi};
        }
    }
}

// Q or K: x [tokens][H][D] (fp32 or bf16, any strides) quantized in row
// blocks of 32 along D to codes [H][rows][D] and float scales
// [H][D / 32][rows] (scale_pos_a or _b order within each 128 rows; a
// padding row's codes 0 and scales 1), and each tile's scale range over its
// real rows [H][rows / 128]. A block of 256 threads a tile of 128 rows: 8
// elements a piece, four lanes a block of 32, consecutive lanes on
// consecutive pieces of a row (whole lines read and written), D / 16
// pieces a thread. Grid x over the rows / 128, y over the heads.
template <int D>
__global__ void __launch_bounds__(256) pack_rows(nd3 x, int preset, const seq_info *seqs, int batch, bool keys,
                                                 uint8_t *out, float *out_scales, scale_range *ranges, int64_t rows)
{
    constexpr int DB = D / 32;
    __shared__ uint32_t red[16];
    const int64_t tile0 = (int64_t)blockIdx.x * 128, h = blockIdx.y;
    const fp8_fmt f = fp8_e4m3();
    uint32_t lo = RANGE_EMPTY_LO, hi = 0;
    for (int i = 0; i < D / 16; i++) {
        const int piece = i * 256 + (int)threadIdx.x, r = piece / (D / 8), c = (piece % (D / 8)) * 8;
        const int64_t p = tile0 + r;
        int64_t token = 0;
        const bool real = packed_token(seqs, batch, keys, p, &token) >= 0; // the same for a block's four lanes
        uint32_t v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        if (real)
            load8_bits(x, token, h, c, v);
        bool plain;
        const block_rule rule = warp_rule<8>(f, preset, reduce_max(lane_top(v), 4), v, 4, &plain);
        uint2 codes = make_uint2(0, 0);
        if (real)
            codes = make_uint2(encode4(f, rule, plain, v), encode4(f, rule, plain, v + 4));
        *reinterpret_cast<uint2 *>(out + (h * rows + p) * D + c) = codes;
        if (c % 32 == 0) {
            const float sf = scale_float(real ? rule.scale : 0x7Fu);
            out_scales[(h * DB + c / 32) * rows + tile0 + (keys ? scale_pos_b(r) : scale_pos_a(r))] = sf;
            if (real)
                lo = min(lo, __float_as_uint(sf)), hi = max(hi, __float_as_uint(sf));
        }
    }
    range_add(lo, hi, &ranges[h * (rows / 128) + blockIdx.x], false, red);
}

// A V scale byte as the float the P V promotion multiplies by: 2^(code -
// 127) times P's 2^-8, that is 2^(code - 135), the canonical NaN for 0xFF.
// Every one is a float (the smallest, 2^-135, a subnormal), so const P's
// promotion acc = fma(partial, 2^(sv - 8), acc) is one fma, exact, with no
// test and no multiplication of scales; dynamic P's scale is then taken
// without its -8.
__device__ __forceinline__ float v_scale_float(uint32_t code)
{
    return __fmul_rn(scale_float(code), 0x1p-8f); // exact (2^-135 at least); the NaN stays the canonical one
}

// V: x [tokens][H][D] quantized in col blocks of 32 keys (a sequence's keys
// start on a multiple of 128, so each block of 32 packed keys is one block
// of the sequence, or padding) to V^T codes [H][D][rows] (keys permuted
// inside each block by key_of_column, padding keys 0) and float scales
// [H][rows / 32][D] (v_scale_float, scale_pos_b order over D; a padding
// block's 2^-8), and each 128-key tile's scale range over its real blocks
// [H][rows / 128] (several blocks add to it: set to RANGE_EMPTY_LO and 0
// before); with raw (the leak-free mask), also V^T [H][D][rows] of the
// input rounded to bf16, keys in their own order. A transpose through
// shared memory: a block of 256 threads takes 64 packed keys and 64
// columns of a head, reads them a key's row at a time and writes them a
// column's row at a time; a column's block of 32 keys is two threads' 16
// (lanes l and l ^ 1), and since key_of_column keeps each half of a block
// in place, each thread's 16 codes are 16 consecutive bytes. Grid x over
// rows / 64, y over D / 64, z over the heads.
template <int D>
__global__ void __launch_bounds__(256) pack_v(nd3 x, int preset, bool raw, const seq_info *seqs, int batch,
                                              uint8_t *out, float *out_scales, scale_range *ranges, uint16_t *vraw,
                                              int64_t rows)
{
    __shared__ uint32_t val_t[64][64 + 1]; // [key][column] as fp32 bits, padded against bank conflicts
    __shared__ bool real_key[64];
    __shared__ uint32_t red[16];
    const int64_t p0 = (int64_t)blockIdx.x * 64, h = blockIdx.z;
    const int e0 = (int)blockIdx.y * 64, tid = (int)threadIdx.x;
    {
        const int k = tid / 4, c = (tid % 4) * 16; // 16 values of a key's row
        int64_t token;
        uint32_t v[16] = {};
        const bool real = packed_token(seqs, batch, true, p0 + k, &token) >= 0;
        if (real) {
            load8_bits(x, token, h, e0 + c, v);
            load8_bits(x, token, h, e0 + c + 8, v + 8);
        }
#pragma unroll
        for (int i = 0; i < 16; i++)
            val_t[k][c + i] = v[i];
        if (c == 0)
            real_key[k] = real;
    }
    __syncthreads();
    const int col = tid / 4, k0 = (tid % 4) * 16; // 16 keys of a column's row, in packed order
    const int kb = k0 - k0 % 32;                  // their block's first key
    // the values in the order of the codes: position k0 + i holds key kb + key_of_column(k0 % 32 + i)
    uint32_t v[16];
#pragma unroll
    for (int i = 0; i < 16; i++)
        v[i] = val_t[kb + key_of_column(k0 % 32 + i)][col];
    const fp8_fmt f = fp8_e4m3();
    bool plain;
    const uint32_t top = reduce_max(umax(lane_top(v), lane_top(v + 8)), 2);
    const block_rule rule = warp_rule<16>(f, preset, top, v, 2, &plain);
    uint32_t w[4];
#pragma unroll
    for (int q = 0; q < 4; q++) {
        w[q] = encode4(f, rule, plain, v + 4 * q);
#pragma unroll
        for (int e = 0; e < 4; e++)
            if (!real_key[kb + key_of_column(k0 % 32 + 4 * q + e)])
                w[q] &= ~(0xFFu << (8 * e));
    }
    *reinterpret_cast<uint4 *>(out + (h * D + e0 + col) * rows + p0 + k0) = make_uint4(w[0], w[1], w[2], w[3]);
    // a block is real when its first key is (the scale is the block's: lane l ^ 1 has the same)
    const bool real_block = real_key[kb];
    const float sf = v_scale_float(real_block ? rule.scale : 0x7Fu);
    if (k0 % 32 == 0)
        out_scales[(h * (rows / 32) + (p0 + kb) / 32) * D + scale_pos_b(e0 + col)] = sf;
    range_add(real_block ? __float_as_uint(sf) : RANGE_EMPTY_LO, real_block ? __float_as_uint(sf) : 0,
              &ranges[h * (rows / 128) + p0 / 128], true, red);
    if (raw) {
        uint32_t r[8];
#pragma unroll
        for (int i = 0; i < 8; i++)
            r[i] = f32_to_bf16(val_t[k0 + 2 * i][col]) | f32_to_bf16(val_t[k0 + 2 * i + 1][col]) << 16;
        uint4 *dst = reinterpret_cast<uint4 *>(vraw + (h * D + e0 + col) * rows + p0 + k0);
        dst[0] = make_uint4(r[0], r[1], r[2], r[3]), dst[1] = make_uint4(r[4], r[5], r[6], r[7]);
    }
}

} // namespace
} // namespace mxfa_gpu

#endif
