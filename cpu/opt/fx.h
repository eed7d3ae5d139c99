/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Operands decoded for the fast block products, and the block step that
 * runs the vector kernels on a tile and the reference step (cpu/ref/mma.c)
 * wherever the kernels cannot decide. That fallback is what makes the
 * optimized backend exact by construction: the fast path only ever answers
 * for groups whose every addition it can prove exact.
 */
#ifndef MXFA_CPU_FX_H
#define MXFA_CPU_FX_H

#include "kern.h"
#include "mma.h"

/* A matrix of operands: element (r, c) at index r * ld + c of each array. */
typedef struct fx_mat {
    double *v;       /* the value without its block scale */
    uint16_t *e;     /* exponent fields (kern.h) */
    uint16_t *code;  /* the fp8 or bf16 code, for the reference fallback */
    int64_t rows, cols, ld;
    mxfa_dtype dtype; /* E4M3, E5M2 or BF16 */
} fx_mat;

/* Zero-filled space for rows x cols (ld = cols rounded up to KERN_NR, and
 * padded off multiples of 4 KiB);
 * 0 when out of memory (nothing left allocated). */
int fx_alloc(fx_mat *m, int64_t rows, int64_t cols, mxfa_dtype dtype);
void fx_free(fx_mat *m);

/* Flags of a row (A) or column (B) within one block. */
#define FX_NAN_SCALE 1 /* the block's scale is NaN */
#define FX_SPECIAL 2   /* an operand only the reference takes (NaN, Inf, a bf16 subnormal out of range) */
#define FX_WIDE 4      /* a normal operand whose fields are out of range: the truncation step takes it,
                          reading its exponent from its double */

/* Decoded fp8 codes: value, fields and whether the fast path takes them.
 * `normalized` gives the raw exponent of the normalized value (operands
 * widened to bf16), else the format's (subnormals at emin). */
typedef struct fx_table {
    double v[256];
    uint16_t e[256];
    uint8_t special[256];
} fx_table;

const fx_table *fx_table_fp8(mxfa_dtype dtype, int normalized);

/* Store an fp8 code (returns FX_SPECIAL or 0) or a bf16 value (the same). */
static inline int fx_put_fp8(fx_mat *m, const fx_table *t, int64_t r, int64_t c, uint8_t code)
{
    int64_t i = r * m->ld + c;
    m->v[i] = t->v[code];
    m->e[i] = t->e[code];
    m->code[i] = code;
    return t->special[code] ? FX_SPECIAL : 0;
}
int fx_put_bf16(fx_mat *m, int64_t r, int64_t c, uint16_t h);
/* A bf16 value stored as h * 2^-shift, to be used with the scale exponent
 * `shift`: that keeps the fields of small values (gradients) in range. */
int fx_put_bf16_shifted(fx_mat *m, int64_t r, int64_t c, uint16_t h, int shift);
/* The raw exponent of a finite non-zero bf16 value, else INT_MIN. */
int fx_bf16_raw(uint16_t h);

/*
 * A matrix x [rows, K] of fp8 codes with its compact row-block scales s,
 * decoded into m as the A side (m[r][k]) or, transposed, the B side
 * (m[k][r]); the scale exponent and flags of row r in block kb land at
 * [kb * ld_s + r].
 */
void fx_decode_rows(const cpu_kernels *kern, const mxfa_view *x, const mxfa_view *s, const fx_table *t, int transposed,
                    fx_mat *m, int *sexp, uint8_t *flag, int64_t ld_s);

/* How one block of products meets the accumulator under a model. */
typedef struct fx_step {
    const mma_model_def *model;
    kern_combine how;
    int group;   /* products per fused step; 0: the whole block at once */
    int bf16;    /* bf16 operands (scales applied): the model's bf16 step */
    int widen;   /* fp8 operands widened to bf16 with their scales (sm90-bf16) */
} fx_step;

fx_step fx_step_block(mxfa_model model); /* fp8 operands with block scales */
fx_step fx_step_bf16(mxfa_model model);  /* bf16 operands */

/*
 * One block of products into a tile of accumulators (fp32 bits):
 * acc[i * ldc + j] for i < m, j < n (n a multiple of KERN_NR) steps with the
 * kn products of A row ar0 + i (columns ak0 ..) and B column bc0 + j (rows
 * bk0 ..). sa, fa: scale exponent and flags per A row; sb, fb per B column
 * (fb and sb indexed from bc0). active: the rows to update (NULL: all).
 */
void fx_block(const cpu_kernels *kern, const fx_step *st, const fx_mat *a, int64_t ar0, int64_t ak0, const fx_mat *b,
              int64_t bk0, int64_t bc0, int kn, int m, int n, const int *sa, const uint8_t *fa, const int *sb,
              const uint8_t *fb, uint32_t *acc, int64_t ldc, const uint8_t *active);

#endif
