/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Vector kernels, compiled once per instruction set: KERN_NAME names the
 * table (kern_table.c) and prefixes its functions, and the build gives the
 * flags (Makefile.am). The kernels live in a file per job: products
 * (kern_gemm.c), softmax (kern_softmax.c), quantization (kern_quantize.c),
 * decoding (kern_decode.c); this header holds what they share. Written with GCC's
 * generic vectors, which each target lowers to its own instructions; the
 * unsigned byte maximum and, under AVX-512, the 512-bit lane conversions
 * use the target's intrinsics.
 *
 * Exactness. A product of two fp8 (or bf16) operands has at most 16
 * significant bits, and the combine accepts a group only when every
 * product lies on the grid of its step (so at most 27 + 5 bits wide in
 * total); the truncation step sums integers below 2^27 in grid units. Every
 * addition below is then exact, in any order, whether or not the compiler
 * fuses a multiply and an add, and the few roundings the kernels rely on
 * (to fp32, and the round-to-odd sum) are to nearest in the default
 * floating-point environment, which the callers set (lib/internal.h).
 */
#ifndef MXFA_CPU_KERN_VEC_H
#define MXFA_CPU_KERN_VEC_H

#include <math.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "kern.h"
#include "mma.h"

/* The table entries of this instruction set: KERN_FN(dot) is
 * mxfa_kern_avx2_dot under KERN_NAME mxfa_kern_avx2. */
#define KERN_CAT_(a, b) a##_##b
#define KERN_CAT(a, b) KERN_CAT_(a, b)
#define KERN_FN(name) KERN_CAT(KERN_NAME, name)

/* This instruction set's kernels, of the table's types (kern.h). */
kern_dot_fn KERN_FN(dot);
kern_combine_fn KERN_FN(combine);
kern_fix_fn KERN_FN(fix);
kern_lsb_bound_fn KERN_FN(lsb_bound);
kern_row_max_fn KERN_FN(row_max);
kern_softmax_p_fn KERN_FN(softmax_p);
kern_encode_fn KERN_FN(encode);
kern_decode_e4m3_fn KERN_FN(decode_e4m3);
kern_quantize_rows_fn KERN_FN(quantize_rows);
kern_quantize_blocks_fn KERN_FN(quantize_blocks);

typedef double v8df __attribute__((vector_size(64)));
typedef uint8_t v64qu __attribute__((vector_size(64)));
typedef uint16_t v32hu __attribute__((vector_size(64)));
typedef uint32_t v16su __attribute__((vector_size(64)));

static inline v8df load8(const double *p)
{
    v8df v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline v64qu max_u8(v64qu a, v64qu b)
{
#if defined(__AVX512BW__)
    return (v64qu)_mm512_max_epu8((__m512i)a, (__m512i)b);
#elif defined(__AVX2__)
    __m256i lo[2], hi[2];
    memcpy(lo, &a, 64);
    memcpy(hi, &b, 64);
    lo[0] = _mm256_max_epu8(lo[0], hi[0]);
    lo[1] = _mm256_max_epu8(lo[1], hi[1]);
    v64qu r;
    memcpy(&r, lo, 64);
    return r;
#elif defined(__SSE2__)
    __m128i x[4], y[4];
    memcpy(x, &a, 64);
    memcpy(y, &b, 64);
    for (int i = 0; i < 4; i++)
        x[i] = _mm_max_epu8(x[i], y[i]);
    v64qu r;
    memcpy(&r, x, 64);
    return r;
#else
    v64qu m = a > b;
    return (a & m) | (b & ~m);
#endif
}

typedef int64_t v8di __attribute__((vector_size(64)));
typedef float v8sf __attribute__((vector_size(32)));
typedef int32_t v8si __attribute__((vector_size(32)));
typedef uint32_t v8su __attribute__((vector_size(32)));

#define SPLAT(x) ((v8di){0} + (x))

/* m ? x : y, lane by lane, for masks of all ones or zeros */
static inline v8di sel(v8di m, v8di x, v8di y)
{
    return (m & x) | (~m & y);
}

typedef int32_t v16si __attribute__((vector_size(64)));
typedef uint8_t v16qu __attribute__((vector_size(16)));
typedef uint16_t v16hu __attribute__((vector_size(32)));
typedef uint16_t v8hu __attribute__((vector_size(16)));
typedef float v16sf __attribute__((vector_size(64)));


static inline v16su sel16(v16si m, v16su x, v16su y)
{
    return ((v16su)m & x) | (~(v16su)m & y);
}

static inline v16si max16(v16si a, v16si b)
{
    v16si m = a > b;
    return (m & a) | (~m & b);
}

static inline v16si sel16i(v16si m, v16si x, v16si y)
{
    return (m & x) | (~m & y);
}

/* Lane conversions. GCC 12 splits the 512-bit ones of generic vectors into
 * 128-bit pieces; with AVX-512 the intrinsics give one instruction each. */
static inline v16si cvt_u16_i32(v16hu x)
{
#if defined(__AVX512F__)
    return (v16si)_mm512_cvtepu16_epi32((__m256i)x);
#else
    return __builtin_convertvector(x, v16si);
#endif
}

static inline v8di cvt_i32_i64(v8si x)
{
#if defined(__AVX512F__)
    return (v8di)_mm512_cvtepi32_epi64((__m256i)x);
#else
    return __builtin_convertvector(x, v8di);
#endif
}

static inline v8df cvt_ps_pd(v8sf x)
{
#if defined(__AVX512F__)
    return (v8df)_mm512_cvtps_pd((__m256)x);
#else
    return __builtin_convertvector(x, v8df);
#endif
}

static inline v8sf cvt_pd_ps(v8df x)
{
#if defined(__AVX512F__)
    return (v8sf)_mm512_cvtpd_ps((__m512d)x);
#else
    return __builtin_convertvector(x, v8sf);
#endif
}

#endif
