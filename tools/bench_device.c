/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mxfa bench on a backend with device memory (cuda): quantization,
 * dequantization and the swizzled scale layout of one large matrix in
 * device memory, each against a device-to-device copy measured in the same
 * run. Rates count bytes read plus bytes written. Each operation is
 * enqueued reps times back to back and waited for once; the median of five
 * such rounds is reported.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "mxfa.h"

#define ROWS 16384
#define COLS 8192

typedef struct dev_bench dev_bench;

enum {
    OP_COPY, OP_Q_ROW, OP_Q_ROW_BF16, OP_Q_COL, OP_Q_SQUARE, OP_Q_ROW_E5M2_OCP, OP_Q_ROW_TORCHAO, OP_Q_JAGGED_COL,
    OP_Q_ROW_MX, /* the last quantization: its codes and row scales feed the rest */
    OP_DQ_ROW, OP_DQ_ROW_BF16, OP_TRANSPOSE, OP_DQ_COL, OP_DQ_SQUARE,
    OP_COPY_SCALES, OP_SWIZZLE, /* the scales are small: the swizzle is measured against a copy of their size */
    OP_SWIZZLE_BIG, OP_UNSWIZZLE_BIG, OP_SCATTER, OP_GATHER, /* 256 MiB of scales, against the big copy */
    OP_GEMM, OP_GEMM_BF16,                                   /* not copies: reported in TFLOP/s */
    NOPS
};

/* The product: the first GEMM_N rows of the quantized matrix times the next
 * GEMM_N, K = GEMM_N. */
#define GEMM_N 8192

/* The large layouts: the row scales of a [BIG_ROWS, BIG_COLS] matrix, 256
 * MiB, read from one f32 buffer and written to another (the bytes are a
 * permutation's input: any byte is a scale); the jagged ones are
 * JAGGED_BATCH sequences of JAGGED_LEN_A and JAGGED_LEN_B tokens in turn,
 * of the same width. */
#define BIG_ROWS 65536
#define BIG_COLS 131072
#define JAGGED_BATCH 16
#define JAGGED_LEN_A 4000
#define JAGGED_LEN_B 4100
_Static_assert((int64_t)BIG_ROWS * (BIG_COLS / 32) <= (int64_t)ROWS * COLS * 4 && BIG_ROWS % 128 == 0 &&
                   (BIG_COLS / 32) % 4 == 0,
               "the large swizzle fits the f32 buffers without padding");
_Static_assert((int64_t)JAGGED_BATCH * 4224 * (BIG_COLS / 32) <= (int64_t)ROWS * COLS * 4,
               "the jagged scatter's padded rows fit the f32 buffers");

static const char *const op_name[NOPS] = {
    "device copy (the ceiling)", "quantize row f32->e4m3 rceil", "quantize row bf16->e4m3 rceil",
    "quantize col f32->e4m3 rceil", "quantize square f32->e4m3 rceil", "quantize row f32->e5m2 ocp",
    "quantize row f32->e4m3 torchao-rceil", "quantize jagged col f32->e4m3", "quantize row f32->e4m3 microxcaling",
    "dequantize row e4m3->f32", "dequantize row e4m3->bf16", "transpose row -> col", "dequantize col e4m3->f32",
    "dequantize square e4m3->f32", "device copy of the scales (4 MiB)",
    "swizzle row scales (of that copy)", "swizzle row scales, 256 MiB", "unswizzle row scales, 256 MiB",
    "scatter jagged row scales, 253 MiB", "gather jagged row scales, 253 MiB", "gemm sm90-fp8", "gemm sm90-bf16"};

static mxfa_tensor dev2(void *p, mxfa_dtype dt, int64_t rows, int64_t cols)
{
    mxfa_tensor t = mxfa_tensor_2d(p, dt, rows, cols);
    t.memory = MXFA_MEM_DEVICE;
    return t;
}

struct dev_bench {
    mxfa_ctx *ctx;
    int blackwell; /* the GPU's products: sm100 on Blackwell, the sm90 models on Hopper */
    void *x, *xb, *codes, *scales, *out, *copy, *sw; /* device buffers */
    int op;
    /* the jagged batch: its cumulative lengths, its scale rows in the
     * padded layout, and the same lengths scaled to the matrix's rows */
    int32_t cu[JAGGED_BATCH + 1], cu_matrix[JAGGED_BATCH + 1];
    int64_t jagged_rows;
};

static void jagged_init(dev_bench *b)
{
    b->cu[0] = 0;
    for (int i = 0; i < JAGGED_BATCH; i++)
        b->cu[i + 1] = b->cu[i] + (i % 2 ? JAGGED_LEN_B : JAGGED_LEN_A);
    int64_t sf[JAGGED_BATCH + 1];
    mxfa_jagged_sf_offsets(b->cu, JAGGED_BATCH, sf);
    b->jagged_rows = sf[JAGGED_BATCH];
    for (int i = 0; i <= JAGGED_BATCH; i++)
        b->cu_matrix[i] = (int32_t)((int64_t)b->cu[i] * ROWS / b->cu[JAGGED_BATCH]);
}

/* Bytes the operation must read and write, at least. */
static double op_bytes(const dev_bench *b, int op)
{
    const double n = (double)ROWS * COLS, scales = n / 32, big = (double)BIG_ROWS * (BIG_COLS / 32);
    const double padded = (double)b->jagged_rows * (BIG_COLS / 32),
                 compact = (double)b->cu[JAGGED_BATCH] * (BIG_COLS / 32);
    switch (op) {
    case OP_COPY: return 2 * 4 * n;
    case OP_Q_ROW_BF16: return 2 * n + n + scales;
    case OP_DQ_ROW:
    case OP_DQ_COL: return n + scales + 4 * n;
    case OP_DQ_SQUARE: return n + n / 1024 + 4 * n;
    case OP_DQ_ROW_BF16: return n + scales + 2 * n;
    case OP_TRANSPOSE: return 2 * (n + scales);
    case OP_COPY_SCALES:
    case OP_SWIZZLE: return 2 * scales;
    case OP_SWIZZLE_BIG:
    case OP_UNSWIZZLE_BIG: return 2 * big;
    case OP_SCATTER: return compact + padded; /* every byte of the padded layout is written */
    case OP_GATHER: return 2 * compact;
    default: return 4 * n + n + scales;
    }
}

static mxfa_status run(dev_bench *b)
{
    const mxfa_block block = b->op == OP_Q_COL || b->op == OP_Q_JAGGED_COL || b->op == OP_DQ_COL ? MXFA_BLOCK_COL
                             : b->op == OP_Q_SQUARE || b->op == OP_DQ_SQUARE                     ? MXFA_BLOCK_SQUARE
                                                                                                 : MXFA_BLOCK_ROW;
    int64_t sr, sc;
    mxfa_scales_shape(block, ROWS, COLS, &sr, &sc);
    mxfa_mx q = {dev2(b->codes, b->op == OP_Q_ROW_E5M2_OCP ? MXFA_E5M2 : MXFA_E4M3, ROWS, COLS),
                 dev2(b->scales, MXFA_E8M0, sr, sc), block, MXFA_LAYOUT_COMPACT};
    int64_t wr, wc;
    switch (b->op) {
    case OP_COPY: return mxfa_memcpy(b->ctx, b->copy, b->x, (size_t)ROWS * COLS * 4);
    case OP_COPY_SCALES: return mxfa_memcpy(b->ctx, b->copy, b->scales, (size_t)ROWS * COLS / 32);
    case OP_Q_ROW_BF16: {
        mxfa_tensor x = dev2(b->xb, MXFA_BF16, ROWS, COLS);
        return mxfa_quantize(b->ctx, &x, MXFA_PRESET_RCEIL, &q);
    }
    case OP_Q_JAGGED_COL: {
        mxfa_tensor x = dev2(b->x, MXFA_F32, ROWS, COLS);
        mxfa_jagged_scale_rows(b->cu_matrix, JAGGED_BATCH, &sr);
        q.scales = dev2(b->scales, MXFA_E8M0, sr, sc);
        return mxfa_quantize_jagged(b->ctx, &x, b->cu_matrix, JAGGED_BATCH, MXFA_PRESET_RCEIL, &q);
    }
    case OP_DQ_ROW:
    case OP_DQ_ROW_BF16:
    case OP_DQ_COL:
    case OP_DQ_SQUARE: { /* col and square read the row scales as theirs: any byte is a scale */
        mxfa_tensor o = dev2(b->out, b->op == OP_DQ_ROW_BF16 ? MXFA_BF16 : MXFA_F32, ROWS, COLS);
        return mxfa_dequantize(b->ctx, &q, &o);
    }
    case OP_TRANSPOSE: {
        int64_t tr, tc;
        mxfa_scales_shape(MXFA_BLOCK_COL, COLS, ROWS, &tr, &tc);
        mxfa_mx t = {dev2(b->out, MXFA_E4M3, COLS, ROWS), dev2(b->copy, MXFA_E8M0, tr, tc), MXFA_BLOCK_COL,
                     MXFA_LAYOUT_COMPACT};
        return mxfa_transpose(b->ctx, &q, &t);
    }
    case OP_GEMM:
    case OP_GEMM_BF16: {
        const int64_t n = GEMM_N, nkb = GEMM_N / 32;
        uint8_t *codes = b->codes, *scales = b->scales;
        mxfa_mx A = {dev2(codes, MXFA_E4M3, n, n), dev2(scales, MXFA_E8M0, n, nkb), MXFA_BLOCK_ROW,
                     MXFA_LAYOUT_COMPACT};
        mxfa_mx B = {dev2(codes + n * n, MXFA_E4M3, n, n), dev2(scales + n * nkb, MXFA_E8M0, n, nkb), MXFA_BLOCK_ROW,
                     MXFA_LAYOUT_COMPACT};
        mxfa_tensor d = dev2(b->out, MXFA_F32, n, n);
        const mxfa_model model = b->blackwell         ? MXFA_MODEL_SM100
                                 : b->op == OP_GEMM ? MXFA_MODEL_SM90_FP8
                                                    : MXFA_MODEL_SM90_BF16;
        return mxfa_gemm(b->ctx, &A, &B, NULL, model, &d);
    }
    case OP_SWIZZLE: {
        mxfa_swizzled_shape(MXFA_BLOCK_ROW, ROWS, COLS, &wr, &wc);
        mxfa_tensor s = dev2(b->scales, MXFA_E8M0, ROWS, COLS / 32), w = dev2(b->sw, MXFA_E8M0, wr, wc);
        return mxfa_scales_swizzle(b->ctx, &s, MXFA_BLOCK_ROW, ROWS, COLS, &w);
    }
    case OP_SWIZZLE_BIG:
    case OP_UNSWIZZLE_BIG: {
        mxfa_swizzled_shape(MXFA_BLOCK_ROW, BIG_ROWS, BIG_COLS, &wr, &wc);
        mxfa_tensor s = dev2(b->x, MXFA_E8M0, BIG_ROWS, BIG_COLS / 32), w = dev2(b->out, MXFA_E8M0, wr, wc);
        if (b->op == OP_SWIZZLE_BIG)
            return mxfa_scales_swizzle(b->ctx, &s, MXFA_BLOCK_ROW, BIG_ROWS, BIG_COLS, &w);
        s.data = b->copy;
        return mxfa_scales_unswizzle(b->ctx, &w, MXFA_BLOCK_ROW, BIG_ROWS, BIG_COLS, &s);
    }
    case OP_SCATTER:
    case OP_GATHER: {
        mxfa_tensor s = dev2(b->op == OP_SCATTER ? b->x : b->copy, MXFA_E8M0, b->cu[JAGGED_BATCH], BIG_COLS / 32),
                    w = dev2(b->out, MXFA_E8M0, b->jagged_rows, BIG_COLS / 32);
        if (b->op == OP_SCATTER)
            return mxfa_scales_scatter(b->ctx, &s, b->cu, JAGGED_BATCH, MXFA_BLOCK_ROW, BIG_COLS, &w);
        return mxfa_scales_gather(b->ctx, &w, b->cu, JAGGED_BATCH, MXFA_BLOCK_ROW, BIG_COLS, &s);
    }
    default: {
        mxfa_tensor x = dev2(b->x, MXFA_F32, ROWS, COLS);
        const mxfa_preset preset = b->op == OP_Q_ROW_MX         ? MXFA_PRESET_MICROXCALING
                                   : b->op == OP_Q_ROW_E5M2_OCP ? MXFA_PRESET_OCP
                                   : b->op == OP_Q_ROW_TORCHAO  ? MXFA_PRESET_TORCHAO_RCEIL
                                                                : MXFA_PRESET_RCEIL;
        return mxfa_quantize(b->ctx, &x, preset, &q);
    }
    }
}

/* One call, as cli_time_enqueued takes it. */
static mxfa_status run_one(void *arg)
{
    return run((dev_bench *)arg);
}

int bench_device(const char *cmd, mxfa_ctx *ctx, int reps, int quantize, int gemm)
{
    const size_t n = (size_t)ROWS * COLS;
    int64_t wr, wc;
    mxfa_swizzled_shape(MXFA_BLOCK_ROW, ROWS, COLS, &wr, &wc);
    dev_bench b;
    memset(&b, 0, sizeof b);
    b.ctx = ctx;
    int arch = 0;
    b.blackwell = mxfa_device_info(ctx, &arch, NULL, 0) == MXFA_OK && arch == 100;
    jagged_init(&b);
    void **bufs[] = {&b.x, &b.xb, &b.codes, &b.scales, &b.out, &b.copy, &b.sw};
    const size_t sizes[] = {4 * n, 2 * n, n, n, 4 * n, 4 * n, (size_t)(wr * wc)};
    float *host = malloc(4 * n);
    uint16_t *hostb = malloc(2 * n);
    int rc = 0;
    for (int i = 0; i < 7 && !rc; i++)
        if (mxfa_device_alloc(ctx, sizes[i], bufs[i]) != MXFA_OK)
            rc = cli_error(cmd, "%s", mxfa_last_error(ctx));
    if (!rc && (!host || !hostb))
        rc = cli_error(cmd, "out of memory for the benchmark's matrix");
    if (!rc) {
        uint64_t rng = 0x9E3779B97F4A7C15u;
        for (size_t i = 0; i < n; i++) {
            host[i] = (float)cli_gauss(&rng);
            uint32_t u;
            memcpy(&u, &host[i], 4);
            hostb[i] = (uint16_t)(u >> 16);
        }
        if (mxfa_memcpy(ctx, b.x, host, 4 * n) != MXFA_OK || mxfa_memcpy(ctx, b.xb, hostb, 2 * n) != MXFA_OK)
            rc = cli_error(cmd, "%s", mxfa_last_error(ctx));
    }
    if (!rc && !quantize) { /* the products' operands, quantized once, untimed */
        b.op = OP_Q_ROW;
        if (run(&b) != MXFA_OK)
            rc = cli_error(cmd, "%s: %s", op_name[OP_Q_ROW], mxfa_last_error(ctx));
    }
    double secs[NOPS];
    for (int op = 0; op < NOPS && !rc; op++) {
        b.op = op;
        secs[op] = 0;
        if ((op == OP_GEMM_BF16 && b.blackwell) /* Blackwell's product is sm100's, timed as OP_GEMM */ ||
            (op >= OP_GEMM && !gemm) || (op < OP_GEMM && !quantize))
            continue;
        if ((secs[op] = cli_time_enqueued(ctx, run_one, &b, reps < 5 ? 20 : reps * 4)) < 0)
            rc = cli_error(cmd, "%s: %s", op_name[op], mxfa_last_error(ctx));
    }
    if (!rc) {
        printf("mxfa %s bench: backend %s, a %d x %d matrix in device memory, "
               "rates in GB/s of bytes read plus "
               "written\n",
               mxfa_version(), mxfa_backend_name(ctx), ROWS, COLS);
        printf("%-40s %10s %12s %10s\n", "operation", "GB/s", "of the copy", "ms");
        const double copy_rate = op_bytes(&b, OP_COPY) / secs[OP_COPY];
        const double small_rate = op_bytes(&b, OP_COPY_SCALES) / secs[OP_COPY_SCALES];
        for (int op = 0; op < OP_GEMM && quantize; op++) {
            const double rate = op_bytes(&b, op) / secs[op], ceiling = op == OP_SWIZZLE ? small_rate : copy_rate;
            printf("%-40s %10.1f %11.0f%% %10.4f\n", op_name[op], rate / 1e9, 100 * rate / ceiling, secs[op] * 1e3);
        }
        const double flops = 2.0 * GEMM_N * GEMM_N * GEMM_N;
        for (int op = OP_GEMM; op < NOPS; op++)
            if (secs[op] > 0)
                printf("%-40s %10.1f %12s %10.4f   (TFLOP/s: %d^3, e4m3 of the matrix "
                       "above, row scales)\n",
                       op == OP_GEMM && b.blackwell ? "gemm sm100" : op_name[op], flops / secs[op] / 1e12, "",
                       secs[op] * 1e3, GEMM_N);
    }
    for (int i = 0; i < 7; i++)
        mxfa_device_free(ctx, *bufs[i]);
    free(host), free(hostb);
    return rc;
}
