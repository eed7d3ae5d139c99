// SPDX-License-Identifier: BSD-3-Clause
// Quantization and dequantization kernels of the cuda backend, for every
// block shape, preset and format, bit-identical to cpu/ref/quantize.c.
//
// The amax of a block is first taken as an integer maximum of |x| bits,
// which orders like the values and puts NaN above Inf; only a warp with a
// NaN in one of its blocks computes it again, ignoring NaN, as the presets
// ask. Codes of blocks without NaN or Inf come from the paired conversion
// instruction; the rest go through the exact encoder.
//
// Row blocks: four threads share a block of 32 elements, eight each (16-byte
// loads when rows are contiguous and aligned), four rows at a time. Col and
// square blocks of such rows: a warp per 32 columns of a 32-row group, each
// lane four columns of eight rows (32 values in registers); a col block's
// amax is reduced over four lanes, a square block's over the warp. Other
// layouts take one column per thread. Groups of 32 rows restart at every segment
// (sequence). Dequantization converts codes in pairs to f16 (exact) and
// multiplies by the scale, which is exact too (or overflows to Inf, as the
// emulator does); NaN is written as the emulator writes it.
#include <type_traits>

#include "module.cuh"
#include "mx.cuh"

namespace mxfa_gpu {
namespace {

constexpr unsigned kFull = 0xFFFFFFFFu;

__device__ __forceinline__ uint32_t load_f32_bits(const dview &v, int64_t r, int64_t c)
{
    const uint8_t *p = v.base + (r * v.rs + c * v.cs) * (v.dtype == MXFA_BF16 ? 2 : 4);
    if (v.dtype == MXFA_BF16)
        return (uint32_t)*reinterpret_cast<const uint16_t *>(p) << 16;
    return *reinterpret_cast<const uint32_t *>(p);
}

// Four neighbouring elements (c .. c + 3) of a contiguous, aligned row.
__device__ __forceinline__ void load4(const dview &v, int64_t r, int64_t c, uint32_t *w)
{
    if (v.dtype == MXFA_BF16) {
        const uint2 q = *reinterpret_cast<const uint2 *>(v.base + (r * v.rs + c) * 2);
        w[0] = q.x << 16, w[1] = q.x & 0xFFFF0000u, w[2] = q.y << 16, w[3] = q.y & 0xFFFF0000u;
    } else {
        const uint4 q = *reinterpret_cast<const uint4 *>(v.base + (r * v.rs + c) * 4);
        w[0] = q.x, w[1] = q.y, w[2] = q.z, w[3] = q.w;
    }
}

__device__ __forceinline__ uint8_t *byte_at(const dview &v, int64_t r, int64_t c)
{
    return v.base + r * v.rs + c * v.cs;
}

// The largest |x| bits (as fp32 bits) of eight bf16 packed in four words,
// two at a time (SIMD 16-bit maximum): one instruction a pair, not two a value.
__device__ __forceinline__ uint32_t lane_top_bf16(uint32_t h0, uint32_t h1, uint32_t h2, uint32_t h3)
{
    constexpr uint32_t abs2 = 0x7FFF7FFFu;
    const uint32_t m = __vmaxu2(__vmaxu2(h0 & abs2, h1 & abs2), __vmaxu2(h2 & abs2, h3 & abs2));
    return umax(m << 16, m & 0xFFFF0000u);
}

// One row block's share of a thread (eight values v, n of them real, the
// largest |x| bits among them top): the rule over the block's four threads,
// the scale byte, the codes. Every lane of the warp calls it.
template <bool MX>
__device__ __forceinline__ void row_block(const fp8_fmt &f, int preset, const uint32_t *v, uint32_t top, int n,
                                          int part, int64_t r, int64_t cb, int64_t c0, bool vec, const dview &data,
                                          const dview &scales)
{
    top = reduce_max(top, 4);
    bool plain;
    const block_rule rule = warp_rule<8>(f, preset, top, v, 4, &plain);
    if (n == 0)
        return;
    if (part == 0)
        *byte_at(scales, r, cb) = (uint8_t)rule.scale;
    const uint32_t lo = encode4<MX>(f, rule, plain, v), hi = encode4<MX>(f, rule, plain, v + 4);
    if (vec) {
        *reinterpret_cast<uint2 *>(byte_at(data, r, c0)) = make_uint2(lo, hi);
    } else {
        for (int i = 0; i < n; i++)
            *byte_at(data, r, c0 + i) = (uint8_t)((i < 4 ? lo >> (8 * i) : hi >> (8 * (i - 4))) & 0xFFu);
    }
}

// Row blocks: 4 threads per block of 32 columns, 8 columns each; grid x
// along the row's blocks, grid y over groups of four rows, whose loads are
// all issued before the first is used (no 64-bit division).
// At most 80 registers, for three blocks of 256 threads per SM: the loads
// those threads keep in flight took the kernel from 73% to 92% of a device
// copy on an H200.
// The format and the preset are template parameters (as in the other row
// kernel): the rule and the encoding compile to the few instructions of the
// one case (with the bf16 kernel's six rows in flight, bf16 input went from
// 51% to 74% of a device copy on an H200).
template <bool E4M3, int PRESET>
__global__ void __launch_bounds__(256, 3) quantize_rows(dview x, dview data, dview scales, bool vec)
{
    const fp8_fmt f = E4M3 ? fp8_e4m3() : fp8_e5m2();
    constexpr int preset = PRESET;
    constexpr bool MX = PRESET == MXFA_PRESET_MICROXCALING; // ties away: code of its own
    const int64_t nb = (x.cols + 31) / 32;
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, cb = t >> 2;
    const int part = (int)(t & 3);
    const int64_t c0 = cb * 32 + part * 8;
    const int n = cb < nb ? (int)(x.cols - c0 < 8 ? (x.cols - c0 > 0 ? x.cols - c0 : 0) : 8) : 0;
    for (int64_t r0 = (int64_t)blockIdx.y * 4; r0 < x.rows; r0 += (int64_t)gridDim.y * 4) {
        uint32_t v[4][8];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int64_t r = r0 + k;
            if (r < x.rows && vec && n == 8 && x.dtype == MXFA_BF16) {
                const uint4 q = *reinterpret_cast<const uint4 *>(x.base + (r * x.rs + c0) * 2);
                const uint32_t h[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
                for (int i = 0; i < 4; i++)
                    v[k][2 * i] = h[i] << 16, v[k][2 * i + 1] = h[i] & 0xFFFF0000u;
            } else if (r < x.rows && vec && n == 8) {
                load4(x, r, c0, v[k]);
                load4(x, r, c0 + 4, v[k] + 4);
            } else {
#pragma unroll
                for (int i = 0; i < 8; i++)
                    v[k][i] = r < x.rows && i < n ? load_f32_bits(x, r, c0 + i) : 0u;
            }
        }
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int64_t r = r0 + k;
            if (r >= x.rows) // the same for the whole block
                break;
            row_block<MX>(f, preset, v[k], lane_top(v[k]), n, part, r, cb, c0, vec && n == 8, data, scales);
        }
    }
}

// The first n of sixteen bf16 (packed in lo and hi, element 2i in the low
// half of word i) encoded the general way and stored byte by byte: the rare
// case, out of line so that no register of the kernel's rows in flight
// lives across a call.
static __device__ __noinline__ void encode16_bf16_general(fp8_fmt f, block_rule r, uint4 lo, uint4 hi, int n,
                                                          uint8_t *out)
{
    const uint32_t h[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    for (int i = 0; i < n; i++)
        out[i] = (uint8_t)encode_element(f, r, i % 2 ? h[i / 2] & 0xFFFF0000u : h[i / 2] << 16);
}

// The same for contiguous aligned bf16 rows: two threads share a block,
// sixteen values each (two 16-byte loads, one 16-byte store when the codes'
// rows are 16-byte aligned), BF16_ROWS rows at a time, kept packed (eight
// words a row) until used. Half the threads of the kernel above share each
// block's rule, so the rule's instructions cost half as much per element.
template <bool E4M3, int PRESET, int BF16_ROWS>
__global__ void __launch_bounds__(256, 2) quantize_rows_bf16(dview x, dview data, dview scales, bool store16)
{
    const fp8_fmt f = E4M3 ? fp8_e4m3() : fp8_e5m2();
    constexpr int preset = PRESET;
    constexpr bool MX = PRESET == MXFA_PRESET_MICROXCALING;
    const int64_t nb = (x.cols + 31) / 32;
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, cb = t >> 1;
    const int part = (int)(t & 1);
    const int64_t c0 = cb * 32 + part * 16;
    const int n = cb < nb ? (int)(x.cols - c0 < 16 ? (x.cols - c0 > 0 ? x.cols - c0 : 0) : 16) : 0;
    for (int64_t r0 = (int64_t)blockIdx.y * BF16_ROWS; r0 < x.rows; r0 += (int64_t)gridDim.y * BF16_ROWS) {
        uint4 raw[BF16_ROWS][2];
#pragma unroll
        for (int k = 0; k < BF16_ROWS; k++)
            if (r0 + k < x.rows && n == 16) {
                const uint4 *p = reinterpret_cast<const uint4 *>(x.base + ((r0 + k) * x.rs + c0) * 2);
                raw[k][0] = p[0], raw[k][1] = p[1];
            }
#pragma unroll
        for (int k = 0; k < BF16_ROWS; k++) {
            const int64_t r = r0 + k;
            if (r >= x.rows) // the same for the whole block
                break;
            uint32_t h[8]; // packed pairs: element 2i in the low half of h[i]
            if (n == 16) {
                h[0] = raw[k][0].x, h[1] = raw[k][0].y, h[2] = raw[k][0].z, h[3] = raw[k][0].w;
                h[4] = raw[k][1].x, h[5] = raw[k][1].y, h[6] = raw[k][1].z, h[7] = raw[k][1].w;
            } else {
#pragma unroll
                for (int i = 0; i < 8; i++)
                    h[i] = (2 * i < n ? load_f32_bits(x, r, c0 + 2 * i) >> 16 : 0u) |
                           (2 * i + 1 < n ? load_f32_bits(x, r, c0 + 2 * i + 1) & 0xFFFF0000u : 0u);
            }
            const uint32_t top = reduce_max(
                umax(lane_top_bf16(h[0], h[1], h[2], h[3]), lane_top_bf16(h[4], h[5], h[6], h[7])), 2);
            bool plain;
            block_rule rule;
            if (__any_sync(kFull, top > kF32Inf)) { // a NaN in some block of the warp: exact statistics
                uint32_t v[16];
#pragma unroll
                for (int i = 0; i < 8; i++)
                    v[2 * i] = h[i] << 16, v[2 * i + 1] = h[i] & 0xFFFF0000u;
                rule = warp_rule<16>(f, preset, top, v, 2, &plain);
            } else {
                plain = top < kF32Inf;
                rule = rule_from_amax(f, preset, top, false, top == kF32Inf);
            }
            if (n == 0)
                continue;
            if (part == 0)
                *byte_at(scales, r, cb) = (uint8_t)rule.scale;
            uint8_t *out = byte_at(data, r, c0);
            const uint4 lo = make_uint4(h[0], h[1], h[2], h[3]), hi = make_uint4(h[4], h[5], h[6], h[7]);
            if (n == 16 && plain && !rule.poisoned && (!rule.away || MX)) {
                uint32_t q[4];
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const uint32_t v[4] = {h[2 * i] << 16, h[2 * i] & 0xFFFF0000u, h[2 * i + 1] << 16,
                                           h[2 * i + 1] & 0xFFFF0000u};
                    q[i] = encode4<MX>(f, rule, true, v);
                }
                if (store16) {
                    *reinterpret_cast<uint4 *>(out) = make_uint4(q[0], q[1], q[2], q[3]);
                } else {
                    reinterpret_cast<uint2 *>(out)[0] = make_uint2(q[0], q[1]);
                    reinterpret_cast<uint2 *>(out)[1] = make_uint2(q[2], q[3]);
                }
            } else {
                encode16_bf16_general(f, rule, lo, hi, n, out);
            }
        }
    }
}

// The 32-row group g of the segments: its first source row, its row count
// and its scale row. groups[s]: the first group of segment s (nsegs + 1
// entries, prefix sums).
__device__ __forceinline__ void find_group(const mxfa_segment *segs, const int64_t *groups, int nsegs, int64_t g,
                                           int64_t *r0, int *nr, int64_t *srow)
{
    const int lo = last_at_or_below(nsegs, g, [&](int s) { return groups[s]; });
    const int64_t k = g - groups[lo];
    *r0 = segs[lo].src + 32 * k;
    const int64_t left = segs[lo].count - 32 * k;
    *nr = (int)(left < 32 ? left : 32);
    *srow = segs[lo].dst + k;
}

// Col blocks, any layout: one thread per (group, column), the column's 32
// values in registers; grid x along the columns, grid y over the groups.
__global__ void quantize_cols(dview x, dview data, dview scales, fp8_fmt f, int preset, const mxfa_segment *segs,
                              const int64_t *groups, int nsegs, int64_t ngroups)
{
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= x.cols)
        return;
    for (int64_t g = blockIdx.y; g < ngroups; g += gridDim.y) {
        int64_t r0, srow;
        int nr;
        find_group(segs, groups, nsegs, g, &r0, &nr, &srow);
        uint32_t v[32];
        amax_acc acc;
#pragma unroll
        for (int i = 0; i < 32; i++) {
            v[i] = i < nr ? load_f32_bits(x, r0 + i, c) : 0u;
            if (i < nr)
                acc.add(v[i]);
        }
        const block_rule rule = rule_from_amax(f, preset, acc.amax, acc.nan, acc.inf);
        *byte_at(scales, srow, c) = (uint8_t)rule.scale;
#pragma unroll
        for (int i = 0; i < 32; i++)
            if (i < nr)
                *byte_at(data, r0 + i, c) = (uint8_t)encode_element(f, rule, v[i]);
    }
}

// Col blocks of contiguous aligned rows, the column count a multiple of 4:
// a warp per 32 columns of a group, lane l holding columns 4 (l % 8) .. + 3
// of rows l / 8, l / 8 + 4, ... (eight rows); a column's 32 rows are in the
// four lanes l % 8 + {0, 8, 16, 24}.
__global__ void quantize_cols_warp(dview x, dview data, dview scales, fp8_fmt f, int preset,
                                   const mxfa_segment *segs, const int64_t *groups, int nsegs, int64_t ngroups,
                                   bool scales4)
{
    const int lane = threadIdx.x % 32, rr = lane / 8;
    const int64_t cb = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32, c0 = cb * 32 + (lane % 8) * 4;
    if (cb * 32 >= x.cols)
        return; // whole warps
    const bool live = c0 < x.cols;
    for (int64_t g = blockIdx.y; g < ngroups; g += gridDim.y) {
        int64_t r0, srow;
        int nr;
        find_group(segs, groups, nsegs, g, &r0, &nr, &srow);
        uint32_t v[32], top[4] = {0, 0, 0, 0};
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const int i = 4 * k + rr;
            if (live && i < nr)
                load4(x, r0 + i, c0, v + 4 * k);
            else
                v[4 * k] = v[4 * k + 1] = v[4 * k + 2] = v[4 * k + 3] = 0u;
#pragma unroll
            for (int j = 0; j < 4; j++)
                top[j] = umax(top[j], v[4 * k + j] & 0x7FFFFFFFu);
        }
        block_rule rule[4];
        bool plain = true;
        const bool any_nan = __any_sync(kFull, top[0] > kF32Inf || top[1] > kF32Inf || top[2] > kF32Inf ||
                                                   top[3] > kF32Inf);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            if (any_nan) { // some column of the warp holds a NaN: exact statistics
                amax_acc acc;
#pragma unroll
                for (int k = 0; k < 8; k++)
                    acc.add(v[4 * k + j]);
                for (int o = 8; o < 32; o <<= 1) {
                    uint32_t a = __shfl_xor_sync(kFull, acc.amax, o);
                    int flags = __shfl_xor_sync(kFull, (int)acc.nan | (int)acc.inf << 1, o);
                    acc.amax = umax(a, acc.amax);
                    acc.nan |= flags & 1;
                    acc.inf |= (flags >> 1) & 1;
                }
                rule[j] = rule_from_amax(f, preset, acc.amax, acc.nan, acc.inf);
                plain &= !acc.nan && !acc.inf;
            } else {
                uint32_t m = umax(top[j], __shfl_xor_sync(kFull, top[j], 8));
                m = umax(m, __shfl_xor_sync(kFull, m, 16));
                rule[j] = rule_from_amax(f, preset, m, false, m == kF32Inf);
                plain &= m < kF32Inf;
            }
            plain &= !rule[j].poisoned && !rule[j].away;
        }
        if (!live)
            continue;
        if (rr == 0) {
            const uint32_t sb = rule[0].scale | rule[1].scale << 8 | rule[2].scale << 16 | rule[3].scale << 24;
            if (scales4) {
                *reinterpret_cast<uint32_t *>(byte_at(scales, srow, c0)) = sb;
            } else {
                for (int j = 0; j < 4; j++)
                    *byte_at(scales, srow, c0 + j) = (uint8_t)(sb >> (8 * j));
            }
        }
        float rcp[4];
#pragma unroll
        for (int j = 0; j < 4; j++)
            rcp[j] = e8m0_reciprocal(rule[j].scale == 0xFFu ? 0u : rule[j].scale);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const int i = 4 * k + rr;
            if (i >= nr)
                break;
            const uint32_t *w = v + 4 * k;
            uint32_t codes;
            if (plain) {
                const __nv_fp8_interpretation_t kind = f.e4m3 ? __NV_E4M3 : __NV_E5M2;
                const float2 a = make_float2(__fmul_rn(__uint_as_float(w[0]), rcp[0]),
                                             __fmul_rn(__uint_as_float(w[1]), rcp[1]));
                const float2 b = make_float2(__fmul_rn(__uint_as_float(w[2]), rcp[2]),
                                             __fmul_rn(__uint_as_float(w[3]), rcp[3]));
                codes = (uint32_t)__nv_cvt_float2_to_fp8x2(a, __NV_SATFINITE, kind) |
                        (uint32_t)__nv_cvt_float2_to_fp8x2(b, __NV_SATFINITE, kind) << 16;
            } else {
                codes = encode_element(f, rule[0], w[0]) | encode_element(f, rule[1], w[1]) << 8 |
                        encode_element(f, rule[2], w[2]) << 16 | encode_element(f, rule[3], w[3]) << 24;
            }
            *reinterpret_cast<uint32_t *>(byte_at(data, r0 + i, c0)) = codes;
        }
    }
}

// Square blocks, any layout: one warp per (group, 32-column block), a lane
// per column; grid x along the column blocks, grid y over the groups.
__global__ void quantize_squares(dview x, dview data, dview scales, fp8_fmt f, int preset, const mxfa_segment *segs,
                                 const int64_t *groups, int nsegs, int64_t ngroups)
{
    const int lane = threadIdx.x % 32;
    const int64_t cb = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32, c = cb * 32 + lane;
    if (cb * 32 >= x.cols)
        return; // whole warps
    const bool col_live = c < x.cols;
    for (int64_t g = blockIdx.y; g < ngroups; g += gridDim.y) {
        int64_t r0, srow;
        int nr;
        find_group(segs, groups, nsegs, g, &r0, &nr, &srow);
        uint32_t v[32];
        amax_acc acc;
#pragma unroll
        for (int i = 0; i < 32; i++) {
            v[i] = col_live && i < nr ? load_f32_bits(x, r0 + i, c) : 0u;
            if (col_live && i < nr)
                acc.add(v[i]);
        }
        acc.reduce(32);
        const block_rule rule = rule_from_amax(f, preset, acc.amax, acc.nan, acc.inf);
        if (lane == 0)
            *byte_at(scales, srow, cb) = (uint8_t)rule.scale;
        if (col_live) {
#pragma unroll
            for (int i = 0; i < 32; i++)
                if (i < nr)
                    *byte_at(data, r0 + i, c) = (uint8_t)encode_element(f, rule, v[i]);
        }
    }
}

// Square blocks of contiguous aligned rows, the column count a multiple of
// 4: a warp per block, lane l takes columns 4 (l % 8) .. + 3 of rows
// l / 8, l / 8 + 4, ... (eight rows), all 32 values in registers.
__global__ void quantize_squares4(dview x, dview data, dview scales, fp8_fmt f, int preset, const mxfa_segment *segs,
                                  const int64_t *groups, int nsegs, int64_t ngroups)
{
    const int lane = threadIdx.x % 32, rr = lane / 8;
    const int64_t cb = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32, c0 = cb * 32 + (lane % 8) * 4;
    if (cb * 32 >= x.cols)
        return; // whole warps
    const bool live = c0 < x.cols;
    for (int64_t g = blockIdx.y; g < ngroups; g += gridDim.y) {
        int64_t r0, srow;
        int nr;
        find_group(segs, groups, nsegs, g, &r0, &nr, &srow);
        uint32_t v[32];
        uint32_t top = 0;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const int i = 4 * k + rr;
            if (live && i < nr) {
                load4(x, r0 + i, c0, v + 4 * k);
            } else {
                v[4 * k] = v[4 * k + 1] = v[4 * k + 2] = v[4 * k + 3] = 0u;
            }
#pragma unroll
            for (int j = 0; j < 4; j++)
                top = umax(top, v[4 * k + j] & 0x7FFFFFFFu);
        }
        top = reduce_max(top, 32);
        bool plain;
        const block_rule rule = warp_rule<32>(f, preset, top, v, 32, &plain);
        if (lane == 0)
            *byte_at(scales, srow, cb) = (uint8_t)rule.scale;
        if (live) {
#pragma unroll
            for (int k = 0; k < 8; k++)
                if (4 * k + rr < nr)
                    *reinterpret_cast<uint32_t *>(byte_at(data, r0 + 4 * k + rr, c0)) =
                        encode4(f, rule, plain, v + 4 * k);
        }
    }
}

// The fp32 bits of a code times a scale (the scale byte, with its fp32
// value sv): a NaN scale gives a NaN of the code's sign, a NaN code the
// quiet NaN of its sign (bits a multiply would not keep), anything else the
// exact unscaled value u times sv, exact or overflowing to Inf.
__device__ __forceinline__ uint32_t scale_value(const fp8_fmt &f, uint32_t code, float u, uint32_t s, float sv)
{
    const uint32_t mag = code & 0x7Fu;
    if (s == 0xFFu || (f.has_inf ? mag > 0x7Cu : mag == 0x7Fu))
        return (code >> 7) << 31 | kF32QNaN;
    return __float_as_uint(__fmul_rn(u, sv));
}

// Whether none of the four codes in w is a NaN (e4m3: magnitude 0x7F;
// e5m2: above 0x7C): the magnitude plus the bias carries into a byte's top
// bit exactly then, and never into the next byte.
template <bool E4M3> __device__ __forceinline__ bool no_nan_code(uint32_t w)
{
    return (((w & 0x7F7F7F7Fu) + (E4M3 ? 0x01010101u : 0x03030303u)) & 0x80808080u) == 0;
}

// W consecutive codes of a row (n of them real, packed four to a word in
// w) with the scale byte s0 of their block (row and square blocks),
// dequantized to p. Codes with no NaN among them (nor a NaN scale) take a
// short path: the f16 values times the scale, exact in fp32 (or Inf). For
// a bf16 output the scale must also be at least 2^-110: then every non-zero
// product is a normal fp32 of at most four significant bits, so its top
// half is its bf16, exactly.
template <bool E4M3, bool BF16_OUT, int BLOCK, int W>
__device__ __forceinline__ void dequantize_run(const uint32_t (&w)[W / 4], uint32_t s0, int n, bool vec,
                                               const dview &scales, int64_t sr, const dview &out, int64_t r,
                                               int64_t c)
{
    const fp8_fmt f = E4M3 ? fp8_e4m3() : fp8_e5m2();
    constexpr int es = BF16_OUT ? 2 : 4;
    constexpr __nv_fp8_interpretation_t kind = E4M3 ? __NV_E4M3 : __NV_E5M2;
    const bool whole = vec && n == W;
    uint8_t *p = out.base + (r * out.rs + c * out.cs) * es;
    const float sv0 = e8m0_value(s0);
    float u[W];
#pragma unroll
    for (int q = 0; q < W / 2; q++) {
        const __half2_raw h =
            __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)((w[q / 2] >> (16 * (q % 2))) & 0xFFFFu), kind);
        u[2 * q] = __half2float(__half(__half_raw{h.x}));
        u[2 * q + 1] = __half2float(__half(__half_raw{h.y}));
    }
    bool plain = BLOCK != MXFA_BLOCK_COL && whole && (BF16_OUT ? s0 - 17u <= 254u - 17u : s0 != 0xFFu);
#pragma unroll
    for (int i = 0; i < W / 4; i++)
        plain = plain && no_nan_code<E4M3>(w[i]);
    uint32_t v[W];
    if (plain) {
#pragma unroll
        for (int i = 0; i < W; i++)
            v[i] = __float_as_uint(__fmul_rn(u[i], sv0));
    } else {
#pragma unroll
        for (int i = 0; i < W; i++) {
            const uint32_t s = BLOCK == MXFA_BLOCK_COL ? (i < n ? *byte_at(scales, sr, c + i) : 0u) : s0;
            v[i] = scale_value(f, (w[i / 4] >> (8 * (i % 4))) & 0xFFu, u[i], s,
                               BLOCK == MXFA_BLOCK_COL ? e8m0_value(s) : sv0);
        }
    }
    if (whole && BF16_OUT) {
        uint32_t h[W / 2];
#pragma unroll
        for (int i = 0; i < W / 2; i++)
            h[i] = plain ? __byte_perm(v[2 * i], v[2 * i + 1], 0x7632)
                         : f32_to_bf16(v[2 * i]) | f32_to_bf16(v[2 * i + 1]) << 16;
        if constexpr (W == 8)
            *reinterpret_cast<uint4 *>(p) = make_uint4(h[0], h[1], h[2], h[3]);
        else
            *reinterpret_cast<uint2 *>(p) = make_uint2(h[0], h[1]);
    } else if (whole) {
#pragma unroll
        for (int i = 0; i < W / 4; i++)
            reinterpret_cast<uint4 *>(p)[i] = make_uint4(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]);
    } else {
#pragma unroll
        for (int i = 0; i < W; i++) {
            if (i >= n)
                break;
            uint8_t *q = out.base + (r * out.rs + (c + i) * out.cs) * es;
            if (BF16_OUT)
                *reinterpret_cast<uint16_t *>(q) = (uint16_t)f32_to_bf16(v[i]);
            else
                *reinterpret_cast<uint32_t *>(q) = v[i];
        }
    }
}

// A warp per 256 columns of a row, each lane eight of them in runs of W:
// for bf16 output one run of eight (a 16-byte store), for f32 two runs of
// four, at 4l and 128 + 4l for lane l, so that each 16-byte store of the
// warp is one contiguous 512 bytes (eight columns a lane wrote every other
// half-sector per store: 63% of a device copy, 94% now). Four rows' codes
// and scales are loaded before the first is used. Grid x along the row,
// grid y over the rows. Format, output type and block shape are template
// parameters. At most 64 registers, for four blocks per SM.
template <bool E4M3, bool BF16_OUT, int BLOCK>
__global__ void __launch_bounds__(256, 4) dequantize(dview data, dview scales, dview out, bool vec)
{
    constexpr int W = BF16_OUT ? 8 : 4, RUNS = 8 / W;
    const int lane = (int)threadIdx.x % 32;
    const int64_t base = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x - lane) * 8;
    int64_t c[RUNS];
    int n[RUNS];
#pragma unroll
    for (int h = 0; h < RUNS; h++) {
        c[h] = base + h * 32 * W + W * lane;
        n[h] = data.cols - c[h] >= W ? W : data.cols - c[h] > 0 ? (int)(data.cols - c[h]) : 0;
    }
    if (n[0] == 0)
        return;
    for (int64_t r0 = (int64_t)blockIdx.y * 4; r0 < data.rows; r0 += (int64_t)gridDim.y * 4) {
        uint32_t codes[4][RUNS][W / 4], sc[4][RUNS];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int64_t r = r0 + k;
#pragma unroll
            for (int h = 0; h < RUNS; h++) {
                const bool live = r < data.rows && n[h] > 0;
                sc[k][h] = BLOCK == MXFA_BLOCK_COL || !live
                               ? 0u
                               : *byte_at(scales, BLOCK == MXFA_BLOCK_ROW ? r : r / 32, c[h] / 32);
                uint32_t *w = codes[k][h];
#pragma unroll
                for (int i = 0; i < W / 4; i++)
                    w[i] = 0u;
                if (live && vec && n[h] == W) {
                    if constexpr (W == 8) {
                        const uint2 q = *reinterpret_cast<const uint2 *>(byte_at(data, r, c[h]));
                        w[0] = q.x, w[W / 4 - 1] = q.y;
                    } else {
                        w[0] = *reinterpret_cast<const uint32_t *>(byte_at(data, r, c[h]));
                    }
                } else if (live) {
#pragma unroll
                    for (int i = 0; i < W; i++)
                        if (i < n[h])
                            w[i / 4] |= (uint32_t)*byte_at(data, r, c[h] + i) << (8 * (i % 4));
                }
            }
        }
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int64_t r = r0 + k;
            if (r >= data.rows)
                break;
            const int64_t sr = BLOCK == MXFA_BLOCK_ROW ? r : r / 32;
#pragma unroll
            for (int h = 0; h < RUNS; h++)
                if (n[h] > 0)
                    dequantize_run<E4M3, BF16_OUT, BLOCK, W>(codes[k][h], sc[k][h], n[h], vec, scales, sr, out, r,
                                                             c[h]);
        }
    }
}

// fn(std::true_type{}) or fn(std::false_type{}): b as a compile-time constant.
template <typename F> cudaError_t with_bool(bool b, F &&fn)
{
    return b ? fn(std::true_type{}) : fn(std::false_type{});
}

// fn(e4m3, preset) with both as compile-time constants (std::integral_constant).
template <typename F> cudaError_t with_format_and_preset(bool e4m3, int preset, F &&fn)
{
    auto with_preset = [&](auto pr) { return with_bool(e4m3, [&](auto e) { return fn(e, pr); }); };
    switch (preset) {
    case MXFA_PRESET_RCEIL:
        return with_preset(std::integral_constant<int, MXFA_PRESET_RCEIL>{});
    case MXFA_PRESET_OCP:
        return with_preset(std::integral_constant<int, MXFA_PRESET_OCP>{});
    case MXFA_PRESET_TORCHAO_RCEIL:
        return with_preset(std::integral_constant<int, MXFA_PRESET_TORCHAO_RCEIL>{});
    case MXFA_PRESET_MICROXCALING:
        return with_preset(std::integral_constant<int, MXFA_PRESET_MICROXCALING>{});
    }
    return cudaErrorInvalidValue; // the library checks presets before it calls the backend
}

} // namespace

// A narrow matrix whose rows follow each other in memory (input, codes and
// scales), as k rows of a wider one: the row kernels give a row's blocks to
// neighbouring threads, so a row of a few blocks leaves most of a block of
// threads idle. Row blocks do not see the seam when the width is a
// multiple of 32; the bytes written are the same.
static void widen_rows(dview &x, dview &data, dview &scales)
{
    if (x.rows <= 0 || x.cols <= 0 || x.cs != 1 || data.cs != 1 || scales.cs != 1 || x.cols % 32 != 0 ||
        x.rs != x.cols || data.rs != x.cols || scales.rs != x.cols / 32)
        return;
    int64_t k = 1;
    while (x.rows % (2 * k) == 0 && x.cols * 2 * k <= 8192)
        k *= 2;
    x.rows /= k, x.cols *= k, x.rs *= k;
    data.rows /= k, data.cols *= k, data.rs *= k;
    scales.rows /= k, scales.cols *= k, scales.rs *= k;
}

cudaError_t launch_quantize(const dview &x_in, const mxfa_segment *segs, int nsegs, int preset, int block,
                            const dview &data_in, const dview &scales_in, cudaStream_t stream)
{
    dview x = x_in, data = data_in, scales = scales_in;
    const fp8_fmt f = data.dtype == MXFA_E5M2 ? fp8_e5m2() : fp8_e4m3();
    const int threads = 256;
    if (block == MXFA_BLOCK_ROW) {
        widen_rows(x, data, scales);
        const size_t es = x.dtype == MXFA_BF16 ? 2 : 4;
        const bool vec = x.cs == 1 && data.cs == 1 && reinterpret_cast<uintptr_t>(x.base) % 16 == 0 &&
                         (x.rs * (int64_t)es) % 16 == 0 && reinterpret_cast<uintptr_t>(data.base) % 8 == 0 &&
                         data.rs % 8 == 0;
        const bool store16 = reinterpret_cast<uintptr_t>(data.base) % 16 == 0 && data.rs % 16 == 0;
        const unsigned gx = blocks_for(((x.cols + 31) / 32) * 4, threads);
        const dim3 grid4(gx, rows_for((x.rows + 3) / 4));
        return with_format_and_preset(data.dtype != MXFA_E5M2, preset, [&](auto e4m3, auto pr) {
            if (vec && x.dtype == MXFA_BF16)
            {
                constexpr int rows = pr.value == MXFA_PRESET_MICROXCALING ? 4 : 6;
                quantize_rows_bf16<e4m3.value, pr.value, rows>
                    <<<dim3(blocks_for(((x.cols + 31) / 32) * 2, threads), rows_for((x.rows + rows - 1) / rows)),
                       threads, 0, stream>>>(x, data, scales, store16);
            }
            else
                quantize_rows<e4m3.value, pr.value><<<grid4, threads, 0, stream>>>(x, data, scales, vec);
            return cudaGetLastError();
        });
    }
    // 32-row groups of each segment
    int64_t *groups = static_cast<int64_t *>(malloc(sizeof(int64_t) * (size_t)(nsegs + 1)));
    if (!groups)
        return cudaErrorMemoryAllocation;
    groups[0] = 0;
    for (int s = 0; s < nsegs; s++)
        groups[s + 1] = groups[s] + (segs[s].count + 31) / 32;
    const int64_t ngroups = groups[nsegs];
    device_segments ds;
    device_array<int64_t> dg;
    cudaError_t e = ds.upload(segs, nsegs, stream);
    if (e == cudaSuccess)
        e = dg.upload(groups, nsegs + 1, stream);
    free(groups);
    const int64_t *dgroups = dg.p;
    if (e == cudaSuccess && ngroups > 0) {
        const size_t es = x.dtype == MXFA_BF16 ? 2 : 4;
        const bool vec4 = x.cs == 1 && data.cs == 1 && x.cols % 4 == 0 &&
                          reinterpret_cast<uintptr_t>(x.base) % (4 * es) == 0 && (x.rs * (int64_t)es) % (4 * es) == 0 &&
                          reinterpret_cast<uintptr_t>(data.base) % 4 == 0 && data.rs % 4 == 0;
        const unsigned ny = rows_for(ngroups);
        if (block == MXFA_BLOCK_COL && vec4) {
            const bool scales4 =
                scales.cs == 1 && reinterpret_cast<uintptr_t>(scales.base) % 4 == 0 && scales.rs % 4 == 0;
            quantize_cols_warp<<<dim3(blocks_for((x.cols + 31) / 32 * 32, threads), ny), threads, 0, stream>>>(
                x, data, scales, f, preset, ds.p, dgroups, nsegs, ngroups, scales4);
        } else if (block == MXFA_BLOCK_COL) {
            quantize_cols<<<dim3(blocks_for(x.cols, threads), ny), threads, 0, stream>>>(x, data, scales, f, preset,
                                                                                        ds.p, dgroups, nsegs, ngroups);
        } else if (vec4) {
            quantize_squares4<<<dim3(blocks_for((x.cols + 31) / 32 * 32, threads), ny), threads, 0, stream>>>(
                x, data, scales, f, preset, ds.p, dgroups, nsegs, ngroups);
        } else {
            quantize_squares<<<dim3(blocks_for((x.cols + 31) / 32 * 32, threads), ny), threads, 0, stream>>>(
                x, data, scales, f, preset, ds.p, dgroups, nsegs, ngroups);
        }
        e = cudaGetLastError();
    }
    return e;
}

cudaError_t launch_dequantize(const dview &data, const dview &scales, int block, const dview &out,
                              cudaStream_t stream)
{
    const int threads = 256;
    const int es = out.dtype == MXFA_BF16 ? 2 : 4;
    const bool vec = data.cs == 1 && out.cs == 1 && reinterpret_cast<uintptr_t>(data.base) % 8 == 0 &&
                     data.rs % 8 == 0 && reinterpret_cast<uintptr_t>(out.base) % 16 == 0 && (out.rs * es) % 16 == 0;
    const dim3 grid(blocks_for((data.cols + 7) / 8, threads), rows_for((data.rows + 3) / 4));
    auto go = [&](auto e4m3, auto bf16_out) {
        constexpr bool E4M3 = e4m3.value, BF16_OUT = bf16_out.value;
        if (block == MXFA_BLOCK_ROW)
            dequantize<E4M3, BF16_OUT, MXFA_BLOCK_ROW><<<grid, threads, 0, stream>>>(data, scales, out, vec);
        else if (block == MXFA_BLOCK_COL)
            dequantize<E4M3, BF16_OUT, MXFA_BLOCK_COL><<<grid, threads, 0, stream>>>(data, scales, out, vec);
        else
            dequantize<E4M3, BF16_OUT, MXFA_BLOCK_SQUARE><<<grid, threads, 0, stream>>>(data, scales, out, vec);
        return cudaGetLastError();
    };
    return with_bool(data.dtype != MXFA_E5M2, [&](auto e4m3) {
        return with_bool(out.dtype == MXFA_BF16, [&](auto bf16) { return go(e4m3, bf16); });
    });
}

} // namespace mxfa_gpu
