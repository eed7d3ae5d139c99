/* SPDX-License-Identifier: BSD-3-Clause */
/* The cpu backend's vector kernels: the softmax numerators and the row
 * maximum (kern_vec.h says how they are built). */
#include "kern_vec.h"

/* a b + c rounded once in every lane, as fmaf */
static inline v16sf fma16(v16sf a, v16sf b, v16sf c)
{
#if defined(__AVX512F__)
    return (v16sf)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#elif defined(__FMA__)
    __m256 x[2], y[2], z[2];
    memcpy(x, &a, 64);
    memcpy(y, &b, 64);
    memcpy(z, &c, 64);
    x[0] = _mm256_fmadd_ps(x[0], y[0], z[0]);
    x[1] = _mm256_fmadd_ps(x[1], y[1], z[1]);
    v16sf r;
    memcpy(&r, x, 64);
    return r;
#else
    for (int i = 0; i < 16; i++)
        a[i] = fmaf(a[i], b[i], c[i]);
    return a;
#endif
}

/* The softmax's P (cpu/ref/attn_fwd.c, attn_bwd.c): h = RN_f16(w) with w =
 * min(fma(S, c, b), 0), and P = ptab[|h|] (kern.h's tables). f16_index gives |h|'s bits: mxfa_f32_bits_to_f16 of |w|
 * (lib/f16.c) without its sign, every NaN sent to 0x7E00. */
static inline uint32_t f16_index(float w)
{
    const uint32_t a = f32_bits(w) & 0x7FFFFFFFu;
    if (a > 0x7F800000u)
        return 0x7E00u;
    if (a >= 0x477FF000u)
        return 0x7C00u;
    if (a >= 0x38800000u) {
        const uint32_t r = a - 0x38000000u;
        return (r + 0xFFFu + (r >> 13 & 1u)) >> 13;
    }
    return f32_bits(f32_from_bits(a) + 0.5f) - 0x3F000000u;
}

/* f16_index in sixteen lanes */
static inline v16su f16_index16(v16sf w)
{
    const v16su a = (v16su)w & 0x7FFFFFFFu;
    const v16su r = a - 0x38000000u;
    const v16su normal = (r + 0xFFFu + (r >> 13 & 1u)) >> 13;
    const v16su sub = (v16su)((v16sf)a + 0.5f) - 0x3F000000u;
    v16su idx = sel16(a >= 0x38800000u, normal, sub);
    idx = sel16(a >= 0x477FF000u, (v16su){0} + 0x7C00u, idx);
    return sel16(a > 0x7F800000u, (v16su){0} + 0x7E00u, idx);
}

void KERN_FN(softmax_p)(const uint32_t *s, int nvis, int n, float c, float b, const float *ptab, float *p)
{
    int j = 0;
    for (; j + 16 <= nvis; j += 16) {
        v16sf v;
        memcpy(&v, s + j, 64);
        v16sf w = fma16(v, (v16sf){0} + c, (v16sf){0} + b);
        w = (v16sf)sel16(w > 0.0f, (v16su){0}, (v16su)w); /* a NaN stays */
        const v16su idx = f16_index16(w);
        for (int i = 0; i < 16; i++)
            p[j + i] = ptab[idx[i]];
    }
    for (; j < nvis; j++) {
        float w = fmaf(f32_from_bits(s[j]), c, b);
        p[j] = ptab[f16_index(w > 0.0f ? 0.0f : w)];
    }
    for (; j < n; j++)
        p[j] = 0.0f;
}

/*
 * Block quantization, sixteen fp32 lanes at a time: the amax, the scale from
 * the preset's table (or the reference rule for the rare blocks the table
 * leaves to it), the encoding with a scale exponent per lane.
 */

/* The running maximum over a row's scores x = S c of its nvis visible
 * keys: NaN if a score is NaN, else the largest of m and the scores. */
float KERN_FN(row_max)(const uint32_t *s, int nvis, float c, float m)
{
    v16sf mx = (v16sf){0} + m;
    v16si nan = {0};
    int j = 0;
    for (; j + 16 <= nvis; j += 16) {
        v16sf v;
        memcpy(&v, s + j, sizeof v);
        v *= c;
        nan |= v != v;
        v16si take = v > mx;
        mx = (v16sf)sel16i(take, (v16si)v, (v16si)mx);
    }
    float r = m;
    int any_nan = m != m;
    for (int l = 0; l < 16; l++) {
        any_nan |= nan[l] != 0;
        r = mx[l] > r ? mx[l] : r;
    }
    for (; j < nvis; j++) {
        float x = f32_from_bits(s[j]) * c;
        any_nan |= x != x;
        r = x > r ? x : r;
    }
    return any_nan ? NAN : r;
}
