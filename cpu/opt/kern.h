/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The vector kernels of the optimized backend, compiled once per instruction
 * set (kern_*.c with their own flags: scalar x86-64, AVX2+FMA, AVX-512) and
 * chosen at run time (backend.c). Every kernel is exact: where it cannot
 * give the reference's bits it says so (a pending mark), and the exact
 * truncation step (fix) or, failing that, the reference step decides that
 * element.
 */
#ifndef MXFA_CPU_KERN_H
#define MXFA_CPU_KERN_H

#include <stdint.h>

#include "ref.h"

/* The tile of one microkernel call: KERN_MR rows of A by KERN_NR columns of B. */
#define KERN_MR 4
#define KERN_NR 32

/*
 * Exponent fields of one operand, one byte each, biased by 64 so that
 * products can be tracked with unsigned byte adds and maxima: low byte the
 * raw exponent (the exponent the tensor core aligns by), high byte minus
 * the exponent of the lowest set bit. Both lie in [-21, 21] for every
 * operand the fast path takes; a zero operand has the field 0x0000, so a
 * product with a zero never lifts a maximum (a real sum is at least 86).
 */
#define FX_BIAS 64
#define FX_FIELD_LIMIT 21
#define FX_PROD_MIN 86 /* the smallest biased sum of two real fields */

/* Per (row, column) result of a microkernel call over one group of k. */
typedef struct kern_partial {
    double sum[KERN_MR][KERN_NR];      /* exact when the combine accepts it */
    /* low byte: max over k of the biased raw sums (128 + raw); high byte:
     * max over k of the biased -(lowest bit) sums */
    uint16_t fields[KERN_MR][KERN_NR];
    /* Left by a combine that hands columns to the truncation step with
     * their work done (AVX-512, KERN_IN_EXPONENT): for a column marked
     * KERN_TRUNCATE, the exponent of its grid in units of the unscaled
     * products and the accumulator cut to that grid; bit r of `dense`:
     * a marked column of row r whose products span more than 46 bits. */
    int32_t grid[KERN_MR][KERN_NR];
    uint32_t acc_cut[KERN_MR][KERN_NR];
    unsigned dense;
} kern_partial;

/* The pending mark of a column whose products need truncating: the fast
 * sum cannot be used, but the exact truncation step can (any other nonzero
 * mark leaves the column to the reference). */
#define KERN_TRUNCATE 2
/* The same where an operand's fields are out of range (fx.h, FX_WIDE): the
 * truncation step finds the largest exponent from the doubles. */
#define KERN_TRUNCATE_WIDE 3

/* How a group's sum meets the accumulator (cpu/ref/mma.h, mma_scaling). */
typedef enum kern_combine {
    KERN_IN_EXPONENT, /* scales in the exponent, accumulator in the group, F = 25, 24 bits */
    KERN_EXACT_PROMOTE, /* exact block sum, acc = RNE(acc + sum 2^s) */
    KERN_TRUNC13_PROMOTE /* sm90 fp8: sum cut to F = 13, 14 bits, then promoted */
} kern_combine;

/*
 * A preset's scale rule for one element format, as a table over the fp32
 * exponent field f of a block's amax (rule_table.c): the scale is lo[f] for
 * amax below thr[f] and lo[f] + 1 from it on, where decided[f]; other
 * amaxes (zero aside), and blocks holding a NaN or an Inf, take the
 * reference rule.
 */
typedef struct rule_table {
    uint32_t thr[256];
    uint8_t lo[256];
    uint8_t decided[256];
    uint8_t zero_scale; /* the scale of an all-zero block */
    fp8_rounding rounding;
} rule_table;

const rule_table *mxfa_cpu_rule_table(mxfa_dtype dtype, mxfa_preset preset);

/* The kernels' function types: the table's fields below, and each
 * instruction set's functions (kern_vec.h), are declared with them. */
typedef void kern_dot_fn(int kn, const double *a, const uint16_t *ae, int64_t lda, const double *b,
                         const uint16_t *be, int64_t ldb, kern_partial *out);
typedef unsigned kern_combine_fn(kern_combine how, kern_partial *p, int mr, unsigned rows, const int *sa,
                                 const int *sb, uint32_t *acc, int64_t ldc, uint32_t (*pending)[KERN_NR]);
typedef unsigned kern_fix_fn(kern_combine how, int kn, const double *a, const uint16_t *ae, int64_t lda,
                             const double *b, int64_t ldb, const uint8_t *bhi, const kern_partial *p, int mr,
                             unsigned rows, const int *sa, const int *sb, uint32_t *acc, int64_t ldc,
                             uint32_t (*pending)[KERN_NR]);
typedef void kern_lsb_bound_fn(int kn, const uint16_t *be, int64_t ldb, uint8_t *bhi);
typedef float kern_row_max_fn(const uint32_t *s, int nvis, float c, float m);
typedef void kern_softmax_p_fn(const uint32_t *s, int nvis, int n, float c, float b, const float *ptab, float *p);
/* The softmax's weights by the f16 code |h| of the exponent -|h|, |h| in
 * [0, 0x8000), built once from mxfa_exp2_f16 (NaN for the NaN codes): the
 * forward's P = 256 E(-|h|), and the backward's P = E(-|h|). */
const float *cpu_softmax_p_table(void);
const float *cpu_softmax_e_table(void);
typedef void kern_encode_fn(const fp8_format *fmt, const mxfa_block_rule *rule, const uint32_t *x, int n,
                            uint8_t *out);
typedef int kern_decode_e4m3_fn(const uint8_t *codes, int n, double *v, uint16_t *e, uint16_t *code);
typedef void kern_quantize_rows_fn(const mxfa_view *x, mxfa_preset preset, const mxfa_view *data,
                                   const mxfa_view *scales);
typedef void kern_quantize_blocks_fn(const mxfa_view *x, const mxfa_segment *seg, mxfa_preset preset,
                                     mxfa_block block, const mxfa_view *data, const mxfa_view *scales);

typedef struct cpu_kernels {
    const char *name;
    /* A: KERN_MR rows of kn values (row stride lda), fields alongside;
     * B: kn rows of KERN_NR values (row stride ldb). */
    kern_dot_fn *dot;
    /* One group step for the rows r < mr of a partial whose bit r is set
     * in `rows`: acc[r * ldc + j] for j < KERN_NR, scale exponent
     * sa[r] + sb[j]; pending[r][j] set (and that accumulator left alone)
     * where the fast path cannot decide, and already pending columns left
     * alone. Returns the rows with a pending column, as bits. */
    kern_combine_fn *combine;
    /* The exact truncation step (fix in kern_gemm.c) for the columns marked
     * KERN_TRUNCATE in the rows of `rows`, after a combine over the same
     * group: A row r at a + r * lda (kn values, fields at ae), B rows at
     * b + k * ldb, bhi from lsb_bound over the same B rows.
     * Marks 0 where it decides and 1 where only the reference can; returns
     * the rows with a column still pending, as bits. */
    kern_fix_fn *fix;
    /* bhi[k] for k < kn: the largest high field byte over the KERN_NR
     * columns of B row k (fields at be + k * ldb), a bound on their lowest
     * set bits for fix. */
    kern_lsb_bound_fn *lsb_bound;
    /* A row's new running maximum over the scores x = S[j] c of its first
     * nvis keys: NaN if a score is NaN, else max(m, x). */
    kern_row_max_fn *row_max;
    /* P of a row: ptab[|h|] with h = RN_f16(min(fma(S[j], c, b), 0)) for
     * the first nvis of n keys, 0 for the others; ptab is
     * cpu_softmax_p_table() (the forward, cpu/ref/attn_fwd.c) or
     * cpu_softmax_e_table() (the backward, cpu/ref/attn_bwd.c). */
    kern_softmax_p_fn *softmax_p;
    /* fp8 codes of n fp32 values of one block under its rule (as
     * mxfa_ref_encode_element). */
    kern_encode_fn *encode;
    /* n (a multiple of 8) E4M3 codes decoded as fx_put_fp8 does with the
     * table that is not normalized; nonzero if one is NaN. */
    kern_decode_e4m3_fn *decode_e4m3;
    /* Quantization with row blocks of whole rows of x. */
    kern_quantize_rows_fn *quantize_rows;
    /* Col or square blocks of one piece of a sequence (seg: whole 32-row
     * groups, scales from row seg->dst). */
    kern_quantize_blocks_fn *quantize_blocks;
} cpu_kernels;

extern const cpu_kernels mxfa_kern_scalar;
extern const cpu_kernels mxfa_kern_avx2;
extern const cpu_kernels mxfa_kern_avx512;

#endif
