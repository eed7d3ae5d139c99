// SPDX-License-Identifier: BSD-3-Clause
// Device code for the MX formats, integer-exact like the emulator
// (lib/fp8.c, lib/e8m0.c, cpu/ref/scale_rules.c): FP8 encoding with a
// power-of-two scale, the E8M0 scale rules of the presets, bf16 rounding.
// (Decoding uses the exact fp8x2 -> f16x2 instruction: quantize.cu.) docs/NUMERICS.md is the contract; the cuda backend's tests
// compare every byte with the ref backend.
#ifndef MXFA_GPU_MX_CUH
#define MXFA_GPU_MX_CUH

#include <cstdint>

#include <cuda_fp16.h>
#include <cuda_fp8.h>

namespace mxfa_gpu {

// An FP8 element format as data (the same numbers as lib/fp8.c's tables).
struct fp8_fmt {
    int mbits, emin, emax;
    uint32_t max_code, has_inf, rcp_max; // rcp_max: fl(1/max) as fp32 bits
    bool e4m3;
};

__host__ __device__ inline fp8_fmt fp8_e4m3() { return {3, -6, 8, 0x7Eu, 0u, 0x3B124925u, true}; }
__host__ __device__ inline fp8_fmt fp8_e5m2() { return {2, -14, 15, 0x7Bu, 1u, 0x37924925u, false}; }

constexpr uint32_t kF32Inf = 0x7F800000u, kF32QNaN = 0x7FC00000u, kNaNCode = 0x7Fu;

__device__ __forceinline__ bool f32_is_nan(uint32_t b) { return (b & 0x7FFFFFFFu) > kF32Inf; }

// floor(log2 |x|) of a finite non-zero fp32, subnormals included.
__device__ __forceinline__ int f32_ilogb(uint32_t b)
{
    uint32_t e = (b >> 23) & 0xFFu;
    if (e != 0)
        return (int)e - 127;
    return -149 + 31 - __clz((int)(b & 0x7FFFFFu));
}

// FP8 code of x * 2^scale_exp (x as fp32 bits), rounded once: to nearest
// even, or ties away from zero; saturating to the largest finite value.
// The same steps as mxfa_fp8_encode with MXFA_SATFINITE.
__device__ __forceinline__ uint32_t fp8_encode_exact(const fp8_fmt &f, uint32_t x, int scale_exp, bool away)
{
    uint32_t sign = (x >> 31) << 7, mag = x & 0x7FFFFFFFu;
    if (mag > kF32Inf)
        return sign | kNaNCode;
    if (mag == kF32Inf)
        return sign | f.max_code;
    uint32_t e8 = mag >> 23, sig = mag & 0x7FFFFFu;
    int exp;
    if (e8 == 0) {
        exp = -149;
    } else {
        exp = (int)e8 - 150;
        sig |= 0x800000u;
    }
    if (sig == 0)
        return sign;
    exp += scale_exp;
    int e = 31 - __clz((int)sig) + exp;
    if (e > f.emax + 1)
        return sign | f.max_code;
    int ebin = e < f.emin ? f.emin : e;
    int shift = ebin - f.mbits - exp;
    uint32_t q;
    if (shift <= 0) {
        q = sig << -shift;
    } else if (shift > 25) {
        q = 0;
    } else {
        uint32_t rem = sig & ((1u << shift) - 1u), half = 1u << (shift - 1);
        q = sig >> shift;
        if (rem > half || (rem == half && (away || (q & 1u))))
            q++;
    }
    uint32_t code = ((uint32_t)(ebin - f.emin) << f.mbits) + q;
    if (code > f.max_code)
        return sign | f.max_code;
    return sign | code;
}

// The same for nearest-even, with the conversion instruction: x * 2^scale_exp
// is exact in fp32 whenever it is at least 2^-126, and anything smaller
// rounds to a signed zero in either format, so one rounding happens, in
// the instruction (cvt.rn.satfinite). NaN and Inf are done here: the
// instruction returns the one NaN code without the input's sign.
__device__ __forceinline__ uint32_t fp8_encode_rne(const fp8_fmt &f, uint32_t x, float scale)
{
    if ((x & 0x7FFFFFFFu) >= kF32Inf) // NaN keeps its sign, Inf saturates
        return ((x >> 31) << 7) | (f32_is_nan(x) ? kNaNCode : f.max_code);
    float v = __fmul_rn(__uint_as_float(x), scale);
    return f.e4m3 ? (uint32_t)__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3)
                  : (uint32_t)__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E5M2);
}

// 2^(code - 127) as an fp32, the value of a scale, for codes 0x00 to 0xFE:
// 0x00's 2^-127 is the subnormal 0x00400000. 0xFF (NaN) is the caller's.
__device__ __forceinline__ float e8m0_value(uint32_t code)
{
    return __uint_as_float(code ? code << 23 : 0x00400000u);
}

// 2^(127 - code) as an fp32, the reciprocal of a scale, for codes 0x00 to
// 0xFE: a normal number except for 0xFE, whose 2^-127 is the subnormal
// 0x00400000. 0xFF (NaN) never reaches here.
__device__ __forceinline__ float e8m0_reciprocal(uint32_t code)
{
    return __uint_as_float(code == 0xFEu ? 0x00400000u : (254u - code) << 23);
}

// E8M0 of fp32 bits x, rounded up to a power of two (mxfa_e8m0_encode_bits
// with MXFA_E8M0_CEIL); too_big is the code for overflow (0xFE saturating,
// 0xFF not).
__device__ __forceinline__ uint32_t e8m0_ceil(uint32_t x, uint32_t too_big)
{
    // A normal x is 2^(e8 - 127) times 1.m: its code is e8, one more unless
    // m is zero (the common case, in a few instructions; the general code
    // below gives the same for every such x, checked for all 2^32 inputs).
    const uint32_t e8 = (x & 0x7FFFFFFFu) >> 23;
    if (e8 - 1u < 254u) {
        const uint32_t code = e8 + ((x & 0x7FFFFFu) != 0);
        return code > 254u ? too_big : code;
    }
    if (f32_is_nan(x))
        return 0xFFu;
    x &= 0x7FFFFFFFu;
    if (x == kF32Inf)
        return too_big;
    if (x == 0)
        return 0;
    int e = f32_ilogb(x);
    uint32_t sig = (x >> 23) ? ((x & 0x7FFFFFu) | 0x800000u) : (x & 0x7FFFFFu);
    if (sig & (sig - 1u))
        e++;
    if (e < -127)
        return 0;
    if (e > 127)
        return too_big;
    return (uint32_t)(e + 127);
}

__device__ __forceinline__ uint32_t umax(uint32_t a, uint32_t b) { return a > b ? a : b; }

// The exact statistics of a block: amax of |x| bits with NaN ignored, and
// whether it holds NaN or Inf.
struct amax_acc {
    uint32_t amax = 0;
    bool nan = false, inf = false;
    __device__ __forceinline__ void add(uint32_t x)
    {
        uint32_t a = x & 0x7FFFFFFFu;
        if (a > kF32Inf) {
            nan = true;
            return;
        }
        inf |= a == kF32Inf;
        amax = umax(a, amax);
    }
    // combine with the lanes lane ^ 1, lane ^ 2, ... lane ^ (width / 2)
    __device__ __forceinline__ void reduce(int width)
    {
        for (int o = 1; o < width; o <<= 1) {
            uint32_t a = __shfl_xor_sync(0xFFFFFFFFu, amax, o);
            int flags = __shfl_xor_sync(0xFFFFFFFFu, (int)nan | (int)inf << 1, o);
            amax = umax(a, amax);
            nan |= flags & 1;
            inf |= (flags >> 1) & 1;
        }
    }
};

// What a block's elements decide: its scale byte, whether its elements are
// all NaN (a poisoned block), and how they round.
struct block_rule {
    uint32_t scale;
    bool poisoned, away;
};

// presets: 0 rceil, 1 ocp, 2 torchao-rceil, 3 microxcaling (mxfa_preset).
// amax: the largest |x| bits, NaN ignored; has_nan, has_inf of the block.
__device__ __forceinline__ block_rule rule_from_amax(const fp8_fmt &f, int preset, uint32_t amax, bool has_nan,
                                                     bool has_inf)
{
    block_rule r = {0u, false, preset == 3};
    if (preset == 0 || preset == 2) {
        if (preset == 2 && (has_nan || has_inf)) {
            r.poisoned = true;
        } else if (amax == kF32Inf) {
            r.scale = e8m0_ceil(kF32Inf, preset == 0 ? 0xFEu : 0xFFu);
        } else {
            // fl(amax * fl(1/max)): the fp32 product, rounded to nearest even
            // with gradual underflow, as the emulator's integer product does
            uint32_t prod = __float_as_uint(__fmul_rn(__uint_as_float(amax), __uint_as_float(f.rcp_max)));
            r.scale = e8m0_ceil(prod, preset == 0 ? 0xFEu : 0xFFu);
        }
    } else {
        if (has_nan || has_inf) {
            r.poisoned = true;
        } else if (amax != 0) {
            int e = f32_ilogb(amax) - f.emax;
            e = e < -127 ? -127 : e > 127 ? 127 : e;
            r.scale = (uint32_t)(e + 127);
        }
    }
    if (r.poisoned)
        r.scale = 0xFFu;
    return r;
}

// One element's code under its block's rule (mxfa_ref_encode_element).
__device__ __forceinline__ uint32_t encode_element(const fp8_fmt &f, const block_rule &r, uint32_t x)
{
    if (r.poisoned)
        return kNaNCode;
    if (r.away)
        return fp8_encode_exact(f, x, 127 - (int)r.scale, true);
    return fp8_encode_rne(f, x, e8m0_reciprocal(r.scale));
}

// Four codes of x0..x3 (fp32 bits) packed in a word, first in the low byte,
// when their block holds no NaN or Inf and rounds to nearest even: the
// scaling and the paired conversion instruction, nothing else.
__device__ __forceinline__ uint32_t encode4_plain(const fp8_fmt &f, float rcp, uint32_t x0, uint32_t x1, uint32_t x2,
                                                  uint32_t x3)
{
    const float2 a = make_float2(__fmul_rn(__uint_as_float(x0), rcp), __fmul_rn(__uint_as_float(x1), rcp));
    const float2 b = make_float2(__fmul_rn(__uint_as_float(x2), rcp), __fmul_rn(__uint_as_float(x3), rcp));
    const __nv_fp8_interpretation_t kind = f.e4m3 ? __NV_E4M3 : __NV_E5M2;
    return (uint32_t)__nv_cvt_float2_to_fp8x2(a, __NV_SATFINITE, kind) |
           (uint32_t)__nv_cvt_float2_to_fp8x2(b, __NV_SATFINITE, kind) << 16;
}

// v (finite fp32) rounded to the fp8 grid with ties away from zero, as an
// fp32 that the nearest-even conversion takes exactly (or, beyond the
// largest finite value, saturates): half an fp8 unit in the last place at
// v's binade added to the magnitude's bits, then the bits below that unit
// cleared. Below half the smallest subnormal the result is a signed zero;
// from there up to it, the smallest subnormal. Checked on the CPU against
// the exact encoder for every finite fp32 v, in both formats.
__device__ __forceinline__ float fp8_round_away(const fp8_fmt &f, float v)
{
    const uint32_t b = __float_as_uint(v), sign = b & 0x80000000u, mag = b & 0x7FFFFFFFu;
    const int e = (int)(mag >> 23) - 127, under = f.emin - e;
    const int kept = f.mbits - (under > 0 ? under : 0); // fraction bits the fp8 value keeps here
    if ((mag >> 23) == 0 || kept < -1)
        return __uint_as_float(sign);
    if (kept == -1)
        return __uint_as_float(sign | (uint32_t)(127 + f.emin - f.mbits) << 23);
    const int shift = 22 - kept;
    return __uint_as_float(sign | ((mag + (1u << shift)) & ~((2u << shift) - 1u)));
}

// fp8_round_away where |v| is at least the format's smallest normal: there
// the fp8 value keeps mbits fraction bits whatever the binade, so the half
// unit and the mask are constants, and adding to the signed bits cannot
// carry into the sign (v is at most a few times the largest finite value).
__device__ __forceinline__ float fp8_round_away_normal(const fp8_fmt &f, float v)
{
    const int shift = 22 - f.mbits;
    return __uint_as_float((__float_as_uint(v) + (1u << shift)) & ~((2u << shift) - 1u));
}

// encode4_plain for ties away from zero (microxcaling): each scaled value
// rounded by fp8_round_away (by fp8_round_away_normal when all four are
// normal in the format, the common case), then the same exact conversion.
__device__ __forceinline__ uint32_t encode4_away_plain(const fp8_fmt &f, float rcp, uint32_t x0, uint32_t x1,
                                                       uint32_t x2, uint32_t x3)
{
    const float v[4] = {__fmul_rn(__uint_as_float(x0), rcp), __fmul_rn(__uint_as_float(x1), rcp),
                        __fmul_rn(__uint_as_float(x2), rcp), __fmul_rn(__uint_as_float(x3), rcp)};
    const float min_normal = __uint_as_float((uint32_t)(127 + f.emin) << 23);
    float2 a, b;
    if (fminf(fminf(fabsf(v[0]), fabsf(v[1])), fminf(fabsf(v[2]), fabsf(v[3]))) >= min_normal) {
        a = make_float2(fp8_round_away_normal(f, v[0]), fp8_round_away_normal(f, v[1]));
        b = make_float2(fp8_round_away_normal(f, v[2]), fp8_round_away_normal(f, v[3]));
    } else {
        a = make_float2(fp8_round_away(f, v[0]), fp8_round_away(f, v[1]));
        b = make_float2(fp8_round_away(f, v[2]), fp8_round_away(f, v[3]));
    }
    const __nv_fp8_interpretation_t kind = f.e4m3 ? __NV_E4M3 : __NV_E5M2;
    return (uint32_t)__nv_cvt_float2_to_fp8x2(a, __NV_SATFINITE, kind) |
           (uint32_t)__nv_cvt_float2_to_fp8x2(b, __NV_SATFINITE, kind) << 16;
}

// Four codes the general way, element by element: the rare case (NaN or
// Inf in the block, poisoned, ties away outside the microxcaling kernels),
// kept out of line so that the kernels' common path stays short in the
// instruction cache.
static __device__ __noinline__ uint32_t encode4_general(fp8_fmt f, block_rule r, uint32_t x0, uint32_t x1,
                                                        uint32_t x2, uint32_t x3)
{
    return encode_element(f, r, x0) | encode_element(f, r, x1) << 8 | encode_element(f, r, x2) << 16 |
           encode_element(f, r, x3) << 24;
}

// Four codes under a rule, packed like encode4_plain; plain: the block holds
// no NaN or Inf. AWAY_FAST: ties away from zero through encode4_away_plain
// (kernels for the microxcaling preset; elsewhere the code would only cost
// registers).
template <bool AWAY_FAST = false>
__device__ __forceinline__ uint32_t encode4(const fp8_fmt &f, const block_rule &r, bool plain, const uint32_t *x)
{
    if (plain && !r.poisoned && !r.away)
        return encode4_plain(f, e8m0_reciprocal(r.scale), x[0], x[1], x[2], x[3]);
    if (AWAY_FAST && plain && !r.poisoned)
        return encode4_away_plain(f, e8m0_reciprocal(r.scale), x[0], x[1], x[2], x[3]);
    return encode4_general(f, r, x[0], x[1], x[2], x[3]);
}

// The largest of v over `width` neighbouring lanes (lane ^ 1, ^ 2, ...).
__device__ __forceinline__ uint32_t reduce_max(uint32_t v, int width)
{
    for (int o = 1; o < width; o <<= 1)
        v = umax(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
    return v;
}

// The rule of a block whose |x| bits reduce (over `width` lanes) to top;
// the whole warp calls it. Where some lane's block holds a NaN (top above
// Inf), the warp takes the exact statistics of the N values in v (missing
// elements are zeros, which change nothing).
template <int N>
__device__ __forceinline__ block_rule warp_rule(const fp8_fmt &f, int preset, uint32_t top, const uint32_t *v,
                                                int width, bool *plain)
{
    if (__any_sync(0xFFFFFFFFu, top > kF32Inf)) {
        amax_acc acc;
#pragma unroll
        for (int i = 0; i < N; i++)
            acc.add(v[i]);
        acc.reduce(width);
        *plain = !acc.nan && !acc.inf;
        return rule_from_amax(f, preset, acc.amax, acc.nan, acc.inf);
    }
    *plain = top < kF32Inf;
    return rule_from_amax(f, preset, top, false, top == kF32Inf);
}

// The largest |x| bits of eight values.
__device__ __forceinline__ uint32_t lane_top(const uint32_t *v)
{
    uint32_t top = 0;
#pragma unroll
    for (int i = 0; i < 8; i++)
        top = umax(top, v[i] & 0x7FFFFFFFu);
    return top;
}

// bf16 of fp32 bits, nearest even; NaN stays a quiet NaN with its sign
// (mxfa_f32_bits_to_bf16).
__device__ __forceinline__ uint32_t f32_to_bf16(uint32_t b)
{
    if (f32_is_nan(b))
        return (b >> 16) | 0x0040u;
    return (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
}

} // namespace mxfa_gpu

#endif
