/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A matrix quantized to MXFP8 and decoded for the attention passes: every
 * element as an MMA operand in both orientations, and the scale exponent
 * (with a NaN flag) of every block, so that a product can read it along
 * either axis.
 */
#ifndef MXFA_REF_MX_DECODED_H
#define MXFA_REF_MX_DECODED_H

#include "mma.h"

typedef struct mx_decoded {
    mma_operand *x, *t; /* x[r * cols + c] and t[c * rows + r] */
    int *sexp;          /* scale of (r, c) at [(r / br) * sc + c / bc] */
    uint8_t *snan;
    int64_t rows, cols, br, bc, sc;
} mx_decoded;

/* Space for a [rows, cols] matrix with `block` blocks; 0 when out of memory
 * (nothing left allocated). */
int mx_decoded_alloc(mx_decoded *m, int64_t rows, int64_t cols, mxfa_block block);
void mx_decoded_free(mx_decoded *m);

/* Quantize a strided [rows, cols] slice to E4M3 with `block` blocks and the
 * preset, and decode it. */
mxfa_status mx_decoded_quantize(mxfa_ctx *ctx, const mxfa_view *src, mxfa_block block, mxfa_preset preset,
                                mx_decoded *m);

static inline int mxd_sexp(const mx_decoded *m, int64_t r, int64_t c)
{
    return m->sexp[(r / m->br) * m->sc + c / m->bc];
}

static inline int mxd_snan(const mx_decoded *m, int64_t r, int64_t c)
{
    return m->snan[(r / m->br) * m->sc + c / m->bc];
}

#endif
