/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Quantization and dequantization on the cpu backend: the matrix cut into
 * independent pieces (rows for row blocks; 32-row groups of each sequence
 * for col and square blocks), the pieces run in parallel.
 */
#include <stdlib.h>

#include "cpu.h"

#define ROWS_PER_TASK 64 /* a multiple of 32 */

/* rows [r0, r0 + n) of v as a view of their own */
static mxfa_view rows_of(const mxfa_view *v, int64_t r0, int64_t n)
{
    mxfa_view s = *v;
    s.base = view_at(v, r0, 0);
    s.rows = n;
    return s;
}

mxfa_status mxfa_cpu_quantize(mxfa_ctx *ctx, const mxfa_view *x, const mxfa_segment *segs, int nsegs,
                              mxfa_preset preset, mxfa_block block, const mxfa_view *data, const mxfa_view *scales)
{
    const cpu_kernels *kern = cpu_kern(ctx);
    if (block == MXFA_BLOCK_ROW) {
        int64_t rows = x->rows;
#pragma omp parallel
        {
            CPU_FPENV_ENTER;
#pragma omp for schedule(dynamic)
            for (int64_t r0 = 0; r0 < rows; r0 += ROWS_PER_TASK) {
                int64_t n = rows - r0 < ROWS_PER_TASK ? rows - r0 : ROWS_PER_TASK;
                mxfa_view xs = rows_of(x, r0, n), ds = rows_of(data, r0, n), ss = rows_of(scales, r0, n);
                kern->quantize_rows(&xs, preset, &ds, &ss);
            }
            CPU_FPENV_LEAVE;
        }
        return MXFA_OK;
    }
    /* col and square: units of up to ROWS_PER_TASK rows inside one sequence */
    int64_t units = 0;
    for (int s = 0; s < nsegs; s++)
        units += ceil_div(segs[s].count, ROWS_PER_TASK);
#pragma omp parallel
    {
        CPU_FPENV_ENTER;
#pragma omp for schedule(dynamic)
        for (int64_t u = 0; u < units; u++) {
            int64_t left = u;
            int s = 0;
            while (left >= ceil_div(segs[s].count, ROWS_PER_TASK))
                left -= ceil_div(segs[s++].count, ROWS_PER_TASK);
            int64_t off = left * ROWS_PER_TASK,
                    n = segs[s].count - off < ROWS_PER_TASK ? segs[s].count - off : ROWS_PER_TASK;
            mxfa_segment piece = {segs[s].src + off, n, segs[s].dst + off / 32};
            kern->quantize_blocks(x, &piece, preset, block, data, scales);
        }
        CPU_FPENV_LEAVE;
    }
    return MXFA_OK;
}

int mxfa_cpu_quantize_codes(const cpu_kernels *kern, const mxfa_view *src, mxfa_block block, mxfa_preset preset,
                            uint8_t **codes, uint8_t **scales)
{
    int64_t sr, sc;
    mxfa_scales_shape(block, src->rows, src->cols, &sr, &sc);
    *codes = malloc((size_t)(src->rows * src->cols));
    *scales = malloc((size_t)(sr * sc));
    if (!*codes || !*scales) {
        free(*codes), free(*scales);
        *codes = *scales = NULL;
        return 0;
    }
    mxfa_view dv = {*codes, MXFA_E4M3, src->rows, src->cols, src->cols, 1, MXFA_MEM_HOST};
    mxfa_view sv = {*scales, MXFA_E8M0, sr, sc, sc, 1, MXFA_MEM_HOST};
    if (block == MXFA_BLOCK_ROW) {
        kern->quantize_rows(src, preset, &dv, &sv);
    } else {
        mxfa_segment seg = {0, src->rows, 0};
        kern->quantize_blocks(src, &seg, preset, block, &dv, &sv);
    }
    return 1;
}

mxfa_status mxfa_cpu_dequantize(mxfa_ctx *ctx, const mxfa_view *data, const mxfa_view *scales, mxfa_block block,
                                const mxfa_view *out)
{
    int64_t rows = data->rows;
#pragma omp parallel
    {
        CPU_FPENV_ENTER;
#pragma omp for schedule(dynamic)
        for (int64_t r0 = 0; r0 < rows; r0 += ROWS_PER_TASK) {
            int64_t n = rows - r0 < ROWS_PER_TASK ? rows - r0 : ROWS_PER_TASK;
            mxfa_view ds = rows_of(data, r0, n), os = rows_of(out, r0, n);
            mxfa_view ss = rows_of(scales, block == MXFA_BLOCK_ROW ? r0 : r0 / 32,
                                   block == MXFA_BLOCK_ROW ? n : ceil_div(n, 32));
            mxfa_ref_dequantize(ctx, &ds, &ss, block, &os);
        }
        CPU_FPENV_LEAVE;
    }
    return MXFA_OK;
}
