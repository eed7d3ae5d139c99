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

typedef struct dev_bench {
    mxfa_ctx *ctx;
    void *x, *xb, *codes, *scales, *out, *copy, *sw; /* device buffers */
    int op;
} dev_bench;

enum {
    OP_COPY, OP_Q_ROW, OP_Q_ROW_BF16, OP_Q_COL, OP_Q_SQUARE, OP_Q_ROW_MX, OP_DQ_ROW, OP_DQ_ROW_BF16,
    OP_COPY_SCALES, OP_SWIZZLE, /* the scales are small: the swizzle is measured against a copy of their size */
    OP_GEMM, OP_GEMM_BF16, /* not copies: reported in TFLOP/s */
    NOPS
};

/* The product: the first GEMM_N rows of the quantized matrix times the next
 * GEMM_N, K = GEMM_N. */
#define GEMM_N 8192

static const char *const op_name[NOPS] = {
    "device copy (the ceiling)", "quantize row f32->e4m3 rceil", "quantize row bf16->e4m3 rceil",
    "quantize col f32->e4m3 rceil", "quantize square f32->e4m3 rceil", "quantize row f32->e4m3 microxcaling",
    "dequantize row e4m3->f32", "dequantize row e4m3->bf16", "device copy of the scales (4 MiB)",
    "swizzle row scales (of that copy)", "gemm sm90-fp8", "gemm sm90-bf16"};

static mxfa_tensor dev2(void *p, mxfa_dtype dt, int64_t rows, int64_t cols)
{
    mxfa_tensor t = mxfa_tensor_2d(p, dt, rows, cols);
    t.memory = MXFA_MEM_DEVICE;
    return t;
}

/* Bytes the operation must read and write, at least. */
static double op_bytes(int op)
{
    const double n = (double)ROWS * COLS, scales = n / 32;
    switch (op) {
    case OP_COPY: return 2 * 4 * n;
    case OP_Q_ROW_BF16: return 2 * n + n + scales;
    case OP_DQ_ROW: return n + scales + 4 * n;
    case OP_DQ_ROW_BF16: return n + scales + 2 * n;
    case OP_COPY_SCALES:
    case OP_SWIZZLE: return 2 * scales;
    default: return 4 * n + n + scales;
    }
}

static mxfa_status run(dev_bench *b)
{
    const mxfa_block block = b->op == OP_Q_COL ? MXFA_BLOCK_COL : b->op == OP_Q_SQUARE ? MXFA_BLOCK_SQUARE
                                                                                          : MXFA_BLOCK_ROW;
    int64_t sr, sc;
    mxfa_scales_shape(block, ROWS, COLS, &sr, &sc);
    mxfa_mx q = {dev2(b->codes, MXFA_E4M3, ROWS, COLS), dev2(b->scales, MXFA_E8M0, sr, sc), block,
                 MXFA_LAYOUT_COMPACT};
    switch (b->op) {
    case OP_COPY: return mxfa_memcpy(b->ctx, b->copy, b->x, (size_t)ROWS * COLS * 4);
    case OP_COPY_SCALES: return mxfa_memcpy(b->ctx, b->copy, b->scales, (size_t)ROWS * COLS / 32);
    case OP_Q_ROW_BF16: {
        mxfa_tensor x = dev2(b->xb, MXFA_BF16, ROWS, COLS);
        return mxfa_quantize(b->ctx, &x, MXFA_PRESET_RCEIL, &q);
    }
    case OP_DQ_ROW:
    case OP_DQ_ROW_BF16: {
        mxfa_tensor o = dev2(b->out, b->op == OP_DQ_ROW ? MXFA_F32 : MXFA_BF16, ROWS, COLS);
        return mxfa_dequantize(b->ctx, &q, &o);
    }
    case OP_GEMM:
    case OP_GEMM_BF16: {
        const int64_t n = GEMM_N, nkb = GEMM_N / 32;
        uint8_t *codes = b->codes, *scales = b->scales;
        mxfa_mx A = {dev2(codes, MXFA_E4M3, n, n), dev2(scales, MXFA_E8M0, n, nkb), MXFA_BLOCK_ROW,
                     MXFA_LAYOUT_COMPACT};
        mxfa_mx B = {dev2(codes + n * n, MXFA_E4M3, n, n), dev2(scales + n * nkb, MXFA_E8M0, n, nkb),
                     MXFA_BLOCK_ROW, MXFA_LAYOUT_COMPACT};
        mxfa_tensor d = dev2(b->out, MXFA_F32, n, n);
        return mxfa_gemm(b->ctx, &A, &B, NULL, b->op == OP_GEMM ? MXFA_MODEL_SM90_FP8 : MXFA_MODEL_SM90_BF16, &d);
    }
    case OP_SWIZZLE: {
        int64_t wr, wc;
        mxfa_swizzled_shape(MXFA_BLOCK_ROW, ROWS, COLS, &wr, &wc);
        mxfa_tensor s = dev2(b->scales, MXFA_E8M0, ROWS, COLS / 32), w = dev2(b->sw, MXFA_E8M0, wr, wc);
        return mxfa_scales_swizzle(b->ctx, &s, MXFA_BLOCK_ROW, ROWS, COLS, &w);
    }
    default: {
        mxfa_tensor x = dev2(b->x, MXFA_F32, ROWS, COLS);
        return mxfa_quantize(b->ctx, &x, b->op == OP_Q_ROW_MX ? MXFA_PRESET_MICROXCALING : MXFA_PRESET_RCEIL, &q);
    }
    }
}

/* Seconds per call, the median of five rounds of reps calls; < 0 on error. */
static double per_call(dev_bench *b, int reps)
{
    double t[5];
    if (run(b) != MXFA_OK || mxfa_synchronize(b->ctx) != MXFA_OK)
        return -1;
    for (int round = 0; round < 5; round++) {
        double t0 = cli_now();
        for (int r = 0; r < reps; r++)
            if (run(b) != MXFA_OK)
                return -1;
        if (mxfa_synchronize(b->ctx) != MXFA_OK)
            return -1;
        t[round] = (cli_now() - t0) / reps;
    }
    return cli_median(t, 5);
}

int bench_device(const char *cmd, mxfa_ctx *ctx, int reps)
{
    const size_t n = (size_t)ROWS * COLS;
    int64_t wr, wc;
    mxfa_swizzled_shape(MXFA_BLOCK_ROW, ROWS, COLS, &wr, &wc);
    dev_bench b = {ctx, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0};
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
    double secs[NOPS];
    for (int op = 0; op < NOPS && !rc; op++) {
        b.op = op;
        if ((secs[op] = per_call(&b, reps < 5 ? 20 : reps * 4)) < 0)
            rc = cli_error(cmd, "%s: %s", op_name[op], mxfa_last_error(ctx));
    }
    if (!rc) {
        printf("mxfa %s bench: backend %s, a %d x %d matrix in device memory, rates in GB/s of bytes read plus "
               "written\n", mxfa_version(), mxfa_backend_name(ctx), ROWS, COLS);
        printf("%-40s %10s %12s %10s\n", "operation", "GB/s", "of the copy", "ms");
        const double copy_rate = op_bytes(OP_COPY) / secs[OP_COPY];
        const double small_rate = op_bytes(OP_COPY_SCALES) / secs[OP_COPY_SCALES];
        for (int op = 0; op < OP_GEMM; op++) {
            const double rate = op_bytes(op) / secs[op], ceiling = op == OP_SWIZZLE ? small_rate : copy_rate;
            printf("%-40s %10.1f %11.0f%% %10.4f\n", op_name[op], rate / 1e9, 100 * rate / ceiling, secs[op] * 1e3);
        }
        const double flops = 2.0 * GEMM_N * GEMM_N * GEMM_N;
        for (int op = OP_GEMM; op < NOPS; op++)
            printf("%-40s %10.1f %12s %10.4f   (TFLOP/s: %d^3, e4m3 of the matrix above, row scales)\n", op_name[op],
                   flops / secs[op] / 1e12, "", secs[op] * 1e3, GEMM_N);
    }
    for (int i = 0; i < 7; i++)
        mxfa_device_free(ctx, *bufs[i]);
    free(host), free(hostb);
    return rc;
}
