/* SPDX-License-Identifier: BSD-3-Clause */
/* Quantized matrices decoded for the attention passes (mx_decoded.h). */
#include <stdlib.h>

#include "mx_decoded.h"

void mx_decoded_free(mx_decoded *m)
{
    free(m->x);
    free(m->t);
    free(m->sexp);
    free(m->snan);
    m->x = m->t = NULL;
    m->sexp = NULL;
    m->snan = NULL;
}

int mx_decoded_alloc(mx_decoded *m, int64_t rows, int64_t cols, mxfa_block block)
{
    m->rows = rows;
    m->cols = cols;
    m->br = block == MXFA_BLOCK_ROW ? 1 : 32;
    m->bc = block == MXFA_BLOCK_COL ? 1 : 32;
    m->sc = (cols + m->bc - 1) / m->bc;
    int64_t ns = ((rows + m->br - 1) / m->br) * m->sc;
    m->x = malloc((size_t)(rows * cols) * sizeof *m->x);
    m->t = malloc((size_t)(rows * cols) * sizeof *m->t);
    m->sexp = malloc((size_t)ns * sizeof *m->sexp);
    m->snan = malloc((size_t)ns);
    if (!m->x || !m->t || !m->sexp || !m->snan) {
        mx_decoded_free(m);
        return 0;
    }
    return 1;
}

mxfa_status mx_decoded_quantize(mxfa_ctx *ctx, const mxfa_view *src, mxfa_block block, mxfa_preset preset,
                                mx_decoded *m)
{
    int64_t rows = src->rows, cols = src->cols, sr, sc;
    mxfa_scales_shape(block, rows, cols, &sr, &sc);
    uint8_t *data = malloc((size_t)(rows * cols)), *scales = malloc((size_t)(sr * sc));
    if (!data || !scales || !mx_decoded_alloc(m, rows, cols, block)) {
        free(data);
        free(scales);
        return mxfa_fail(ctx, MXFA_ERR_NO_MEMORY, "attention: out of memory quantizing a head");
    }
    mxfa_view dv = {data, MXFA_E4M3, rows, cols, cols, 1, MXFA_MEM_HOST};
    mxfa_view sv = {scales, MXFA_E8M0, sr, sc, sc, 1, MXFA_MEM_HOST};
    mxfa_segment seg = {0, rows, 0};
    mxfa_ref_quantize(ctx, src, &seg, 1, preset, block, &dv, &sv);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            m->x[r * cols + c] = m->t[c * rows + r] = mxfa_mma_operand_fp8(&mxfa_fp8_e4m3, data[r * cols + c]);
    /* the compact scale matrix is [sr, sc] with sr = ceil(rows/br), sc = ceil(cols/bc) */
    for (int64_t i = 0; i < sr * sc; i++) {
        m->sexp[i] = (int)scales[i] - 127;
        m->snan[i] = scales[i] == 0xFF;
    }
    free(data);
    free(scales);
    return MXFA_OK;
}
