/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A program built against an installed libmxfa the way its users build one,
 *     cc prog.c $(pkg-config --cflags --libs [--static] mxfa)
 * which `make installcheck` links shared and static and runs (link.sh).
 *
 * It checks that the library it runs is of the version of the header it was
 * compiled with, then quantizes the contract vectors of
 * tests/data/contract_e4m3.txt (docs/NUMERICS.md, section 2) under every
 * preset on the "auto" backend and compares every byte with the vectors'.
 * Each vector fills many rows of one matrix, so that the cpu backend spreads
 * the call over its OpenMP threads.
 *
 * Exit status 0 when every byte is the contract's, 1 otherwise (the first
 * difference of each preset on stderr).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mxfa.h>

#include "contract.h"

/* 64 rows make one task of the cpu backend: 15 vectors give 15 tasks */
#define ROWS_PER_VECTOR 64
#define BLOCK 32

static float f32_of(unsigned bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Whether a block quantized under preset p holds vector t's bytes. */
static int block_matches(const contract_vec *t, int p, const uint8_t *data, uint8_t scale)
{
    int same = scale == t->scale[p] && data[0] == t->elem0[p];
    for (int i = 1; i < BLOCK; i++)
        same = same && data[i] == t->elem_rest[p];
    return same;
}

/* Rows of a matrix [rows, BLOCK], row r holding vector r % nv. */
static void fill_rows(float *x, int64_t rows, const contract_vec *v, int nv)
{
    for (int64_t r = 0; r < rows; r++) {
        const contract_vec *t = &v[r % nv];
        x[r * BLOCK] = f32_of(t->first);
        for (int i = 1; i < BLOCK; i++)
            x[r * BLOCK + i] = f32_of(t->rest);
    }
}

/* The rows of a quantization of fill_rows' matrix under preset p that
 * differ from the contract; the first one is reported. */
static int64_t count_differences(const contract_vec *v, int nv, int p, int64_t rows, const uint8_t *data,
                                 const uint8_t *scales)
{
    int64_t wrong = 0;
    for (int64_t r = 0; r < rows; r++) {
        const contract_vec *t = &v[r % nv];
        if (block_matches(t, p, &data[r * BLOCK], scales[r]))
            continue;
        if (!wrong++)
            fprintf(stderr, "prog: %s under %s, row %lld: scale 0x%02X elements 0x%02X 0x%02X; the contract says "
                    "0x%02X 0x%02X 0x%02X\n", t->name, mxfa_preset_name((mxfa_preset)p), (long long)r, scales[r],
                    data[r * BLOCK], data[r * BLOCK + 1], t->scale[p], t->elem0[p], t->elem_rest[p]);
    }
    return wrong;
}

/* Quantizes every vector, each over ROWS_PER_VECTOR rows, under preset p;
 * returns the number of rows that differ from the contract (all of them
 * when the call fails). */
static int64_t check_preset(mxfa_ctx *ctx, const contract_vec *v, int nv, int p)
{
    int64_t rows = (int64_t)nv * ROWS_PER_VECTOR, wrong = rows;
    float *x = malloc((size_t)rows * BLOCK * sizeof *x);
    uint8_t *data = malloc((size_t)rows * BLOCK), *scales = malloc((size_t)rows);
    if (!x || !data || !scales) {
        fprintf(stderr, "prog: out of memory\n");
    } else {
        fill_rows(x, rows, v, nv);
        mxfa_tensor xt = mxfa_tensor_2d(x, MXFA_F32, rows, BLOCK);
        mxfa_mx q = {mxfa_tensor_2d(data, MXFA_E4M3, rows, BLOCK), mxfa_tensor_2d(scales, MXFA_E8M0, rows, 1),
                     MXFA_BLOCK_ROW, MXFA_LAYOUT_COMPACT};
        if (mxfa_quantize(ctx, &xt, (mxfa_preset)p, &q) == MXFA_OK)
            wrong = count_differences(v, nv, p, rows, data, scales);
        else
            fprintf(stderr, "prog: mxfa_quantize under %s: %s\n", mxfa_preset_name((mxfa_preset)p),
                    mxfa_last_error(ctx));
    }
    free(x), free(data), free(scales);
    return wrong;
}

int main(void)
{
    if (strcmp(mxfa_version(), MXFA_VERSION_STRING) != 0) {
        fprintf(stderr, "prog: the library is mxfa %s, the header %s\n", mxfa_version(), MXFA_VERSION_STRING);
        return 1;
    }
    contract_vec v[64];
    int nv = contract_load(v, 64);
    if (nv < 15) {
        fprintf(stderr, "prog: %d contract vectors read, 15 expected (MXFA_SRCDIR names the source tree)\n", nv);
        return 1;
    }
    mxfa_ctx *ctx;
    if (mxfa_open(&ctx, "auto") != MXFA_OK) {
        fprintf(stderr, "prog: mxfa_open: %s\n", mxfa_last_error(NULL));
        return 1;
    }
    int64_t wrong = 0;
    for (int p = MXFA_PRESET_RCEIL; p <= MXFA_PRESET_MICROXCALING; p++)
        wrong += check_preset(ctx, v, nv, p);
    const char *isa = mxfa_cpu_isa(ctx);
    printf("prog: libmxfa %s, %s backend%s%s: %d contract vectors x %d rows under 4 presets: ", mxfa_version(),
           mxfa_backend_name(ctx), isa ? " on " : "", isa ? isa : "", nv, ROWS_PER_VECTOR);
    if (wrong)
        printf("%lld rows differ\n", (long long)wrong);
    else
        printf("every byte as the contract says\n");
    mxfa_close(ctx);
    return wrong ? 1 : 0;
}
