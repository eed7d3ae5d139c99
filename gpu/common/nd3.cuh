// SPDX-License-Identifier: BSD-3-Clause
// Elements of the caller's 3-D tensors (tokens, heads, D) in device code:
// fp32 or bf16 in, fp32 or bf16 out, as the reference reads and writes them.
#ifndef MXFA_GPU_COMMON_ND3_CUH
#define MXFA_GPU_COMMON_ND3_CUH

#include "module.cuh"
#include "mx.cuh"

namespace mxfa_gpu {

// x[tok][h][c] widened to fp32 (bf16 exactly).
__device__ __forceinline__ float load3(const nd3 &x, int64_t tok, int64_t h, int64_t c)
{
    const int64_t at = tok * x.s0 + h * x.s1 + c * x.s2;
    if (x.dtype == MXFA_BF16)
        return __uint_as_float((uint32_t)reinterpret_cast<const uint16_t *>(x.base)[at] << 16);
    return reinterpret_cast<const float *>(x.base)[at];
}

// v, or for a NaN the canonical 0x7FFFFFFF: how the reference stores a NaN.
__device__ __forceinline__ float canonical_nan(float v) { return v != v ? __uint_as_float(0x7FFFFFFFu) : v; }

// x[tok][h][c] = canonical_nan(v), as fp32 or as bf16 at nearest even.
__device__ __forceinline__ void store3(const nd3 &x, int64_t tok, int64_t h, int64_t c, float v)
{
    const int64_t at = tok * x.s0 + h * x.s1 + c * x.s2;
    v = canonical_nan(v);
    if (x.dtype == MXFA_BF16)
        reinterpret_cast<uint16_t *>(x.base)[at] = (uint16_t)f32_to_bf16(__float_as_uint(v));
    else
        reinterpret_cast<float *>(x.base)[at] = v;
}

// Eight elements x[token][h][c .. c + 7] as fp32 bits (bf16 widened):
// 16-byte loads where the row is contiguous and aligned.
__device__ __forceinline__ void load8_bits(const nd3 &x, int64_t token, int64_t h, int c, uint32_t *v)
{
    const int64_t at = token * x.s0 + h * x.s1 + c * x.s2;
    if (x.dtype == MXFA_BF16) {
        const uint16_t *src = reinterpret_cast<const uint16_t *>(x.base) + at;
        if (x.s2 == 1 && reinterpret_cast<uintptr_t>(src) % 16 == 0) {
            const uint4 q = *reinterpret_cast<const uint4 *>(src);
            const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
            for (int i = 0; i < 4; i++)
                v[2 * i] = w[i] << 16, v[2 * i + 1] = w[i] & 0xFFFF0000u;
            return;
        }
#pragma unroll
        for (int i = 0; i < 8; i++)
            v[i] = (uint32_t)src[i * x.s2] << 16;
        return;
    }
    const uint32_t *src = reinterpret_cast<const uint32_t *>(x.base) + at;
    if (x.s2 == 1 && reinterpret_cast<uintptr_t>(src) % 16 == 0) {
        const uint4 q0 = reinterpret_cast<const uint4 *>(src)[0], q1 = reinterpret_cast<const uint4 *>(src)[1];
        v[0] = q0.x, v[1] = q0.y, v[2] = q0.z, v[3] = q0.w, v[4] = q1.x, v[5] = q1.y, v[6] = q1.z, v[7] = q1.w;
        return;
    }
#pragma unroll
    for (int i = 0; i < 8; i++)
        v[i] = src[i * x.s2];
}

// sum over c of a[tok][h][c] * b[tok][h][c], each product and each sum
// rounded to fp32 in increasing c (the reference's delta = rowsum(dO * O)).
__device__ __forceinline__ float dot3(const nd3 &a, const nd3 &b, int64_t tok, int64_t h)
{
    float acc = 0.0f;
    for (int64_t c = 0; c < a.n2; c++)
        acc = __fadd_rn(acc, __fmul_rn(load3(a, tok, h, c), load3(b, tok, h, c)));
    return acc;
}

} // namespace mxfa_gpu

#endif
