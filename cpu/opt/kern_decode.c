/* SPDX-License-Identifier: BSD-3-Clause */
/* The cpu backend's vector kernels: decoding E4M3 codes for the products
 * (kern_vec.h says how they are built). */
#include "kern_vec.h"

/*
 * E4M3 codes decoded as fx_put_fp8 does with the format's table that is not
 * normalized (fx.c): the value without its scale, the exponent fields, the
 * code; zero codes give +0 and the field 0, NaN codes 0 and a nonzero
 * return. Every finite E4M3 operand's fields are in range. n is a multiple
 * of 8.
 */
/* Sixteen codes; the NaN lanes as a mask. */
static inline v16si decode_e4m3_16(const uint8_t *codes, double *v, uint16_t *e, uint16_t *code)
{
    v16qu c8;
    memcpy(&c8, codes, sizeof c8);
    v16su c = __builtin_convertvector(c8, v16su);
    v16su E = (c >> 3) & 15u, M = c & 7u, mag = c & 0x7Fu;
    v16si normal = (v16si)(E != 0u), live = (v16si)((mag != 0u) & (mag != 0x7Fu));
    /* the value's fp32 bits: normal ones from the fields, subnormals
     * M 2^-9 by an exact conversion; then widened to double */
    v16sf sub = __builtin_convertvector(M, v16sf) * (1.0f / 512.0f);
    v16su bits = sel16(normal, ((E + 120u) << 23) | (M << 20), (v16su)sub) | ((c >> 7) << 31);
    bits &= (v16su)live;
    v8sf lo = (v8sf)__builtin_shufflevector(bits, bits, 0, 1, 2, 3, 4, 5, 6, 7);
    v8sf hi = (v8sf)__builtin_shufflevector(bits, bits, 8, 9, 10, 11, 12, 13, 14, 15);
    v8df dlo = cvt_ps_pd(lo), dhi = cvt_ps_pd(hi);
    memcpy(v, &dlo, sizeof dlo);
    memcpy(v + 8, &dhi, sizeof dhi);
    /* the raw exponent, and minus the exponent of the lowest set bit
     * (read from the fp32 bits of sig's lowest bit) */
    v16si raw = (v16si)sel16(normal, E, (v16su){0} + 1u) - 7;
    v16su sig = sel16(normal, M + 8u, M), low = sig & -sig;
    v16si tz = (v16si)((v16su)__builtin_convertvector((v16si)low, v16sf) >> 23) - 127;
    v16si f = live & ((raw + FX_BIAS) | ((FX_BIAS - (raw - 3 + tz)) << 8));
    v16hu f16 = __builtin_convertvector(f, v16hu), c16 = __builtin_convertvector(c8, v16hu);
    memcpy(e, &f16, sizeof f16);
    memcpy(code, &c16, sizeof c16);
    return (v16si)(mag == 0x7Fu);
}

int KERN_FN(decode_e4m3)(const uint8_t *codes, int n, double *v, uint16_t *e, uint16_t *code)
{
    v16si nan = {0};
    int j0 = 0;
    for (; j0 + 16 <= n; j0 += 16)
        nan |= decode_e4m3_16(codes + j0, v + j0, e + j0, code + j0);
    if (j0 < n) { /* a tail of eight, through a run padded with zero codes */
        uint8_t c[16] = {0};
        double tv[16];
        uint16_t te[16], tcode[16];
        int m = n - j0;
        memcpy(c, codes + j0, (size_t)m);
        nan |= decode_e4m3_16(c, tv, te, tcode);
        memcpy(v + j0, tv, (size_t)m * sizeof *v);
        memcpy(e + j0, te, (size_t)m * sizeof *e);
        memcpy(code + j0, tcode, (size_t)m * sizeof *code);
    }
    int any = 0;
    for (int l = 0; l < 16; l++)
        any |= nan[l] != 0;
    return any;
}
