/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mxfa bench: throughput of the operations that studies spend their time
 * in, on one backend, with a progress line on stderr and a table on
 * stdout. FLOPs count as 2 M N K for a product and 4 H S^2 D for attention
 * forward (half of it causal), 2.5 times that backward, as the baseline
 * scripts of bench/ count them, so that ratios are fair. Each measurement
 * allocates what it needs, so that any setting, however small, runs.
 * Peak memory is the high-water mark of resident memory during each
 * operation (Linux resets it through /proc/self/clear_refs).
 */
#include "config.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef MXFA_HAVE_OPENMP
#include <omp.h>
#endif

#include "cli.h"

static const char bench_help[] =
    "usage: mxfa bench [options]\n"
    "\n"
    "Measures the quantization of a 4096 x 4096 matrix (GB/s of fp32 input), the\n"
    "block-scaled product (GFLOP/s per model) and attention forward and backward\n"
    "(GFLOP/s per model, head dim and causal mode) on random normal data, the median\n"
    "of --reps runs, and the peak resident memory of each operation. With --backend\n"
    "cuda: quantization, dequantization and the swizzled layout of a 16384 x 8192\n"
    "matrix in device memory, in GB/s against a device-to-device copy measured in the\n"
    "same run, the block-scaled products at 8192^3 (unless --gemm 0), and attention\n"
    "forward and backward at the shapes of the H200 baselines (B,H,S,D 4,16,4096,128\n"
    "with no mask and both causal masks, 1,16,16384,128, 8,16,2048,64, 2,16,8192,256),\n"
    "those that --dims, --no-causal and, where given, --seqlen and --heads leave,\n"
    "or those --shape names, with the library's scratch memory for each call,\n"
    "under the models the GPU's kernels compute (Hopper: sm90-bf16 and sm90-fp8;\n"
    "Blackwell: sm100) or those --models names; --no-backward skips the backward pass,\n"
    "--no-quantize the quantization (with --backend cuda, and its layouts).\n"
    "  --backend auto|ref|cpu|cuda   (default auto)\n"
    "  --heads H                     (default 4)\n"
    "  --seqlen S                    (default 2048)\n"
    "  --dims LIST                   head dims, from 64,128,256 (default all three)\n"
    "  --shape B,H,S,D[,c|,cp]       attention at this shape (--backend cuda; c: the\n"
    "                                leak-free causal mask, cp: the plain one); repeat\n"
    "                                for more, up to 6\n"
    "  --models LIST|all             ideal,sm100,sm90-fp8,sm90-bf16 (default all)\n"
    "  --gemm N                      product size N x N x N (default 1024; 0 skips)\n"
    "  --reps N                      runs per measurement, median reported (default 3)\n"
    "  --block-n N                   attention's key tiles, a multiple of 32 (default\n"
    "                                128); the kernels take only some (see mxfa attn)\n"
    "  --no-backward, --no-causal, --no-quantize\n"
    "                                skip those measurements\n";

enum {
    OPT_BACKEND = 256,
    OPT_HEADS,
    OPT_SEQLEN,
    OPT_DIMS,
    OPT_MODELS,
    OPT_GEMM,
    OPT_REPS,
    OPT_NOBWD,
    OPT_NOCAUSAL,
    OPT_NOQUANT,
    OPT_SHAPE,
    OPT_BLOCK_N
};

static const struct option options[] = {
    {"backend", required_argument, NULL, OPT_BACKEND}, {"heads", required_argument, NULL, OPT_HEADS},
    {"seqlen", required_argument, NULL, OPT_SEQLEN},   {"dims", required_argument, NULL, OPT_DIMS},
    {"models", required_argument, NULL, OPT_MODELS},   {"gemm", required_argument, NULL, OPT_GEMM},
    {"reps", required_argument, NULL, OPT_REPS},       {"no-backward", no_argument, NULL, OPT_NOBWD},
    {"no-causal", no_argument, NULL, OPT_NOCAUSAL},    {"no-quantize", no_argument, NULL, OPT_NOQUANT},
    {"shape", required_argument, NULL, OPT_SHAPE},     {"block-n", required_argument, NULL, OPT_BLOCK_N},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Reset the resident-memory high-water mark (Linux); 0 when unsupported. */
static int peak_reset(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return 0;
    int good = fputs("5", f) >= 0;
    return fclose(f) == 0 && good;
}

/* The high-water mark of resident memory in MiB (VmHWM), or -1. */
static double peak_mib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0)
            kib = atof(line + 6);
    if (f)
        fclose(f);
    return kib < 0 ? -1 : kib / 1024.0;
}

/* At most one row per measurement: quantization, a product per model, and
 * attention per model, head dim, mask and pass. */
enum { MAX_RESULTS = 1 + 4 + 4 * 3 * 2 * 2 };

typedef struct result {
    char what[96];
    double value, seconds, peak;
    const char *unit;
} result;

/* One run of the benchmark on a host-memory backend: its context, the
 * progress line on stderr and the rows of the table. */
typedef struct bench {
    const char *cmd;
    mxfa_ctx *ctx;
    int reps;
    int block_n; /* attention's key tiles */
    int step, steps, tty;
    result results[MAX_RESULTS];
    int nresults;
} bench;

static void progress(bench *b, const char *what)
{
    b->step++;
    if (b->tty)
        fprintf(stderr, "\r\033[K[%d/%d] %s", b->step, b->steps, what);
    else
        fprintf(stderr, "[%d/%d] %s\n", b->step, b->steps, what);
    fflush(stderr);
}

/* Clear the progress line before anything else goes to stderr. */
static void progress_done(bench *b)
{
    if (b->tty)
        fprintf(stderr, "\r\033[K");
}

static uint64_t rng = 0x9E3779B97F4A7C15u;

/* n floats, uninitialized; NULL when n * 4 bytes do not fit in size_t or
 * are not there */
static float *alloc_floats(int64_t n)
{
    return (uint64_t)n <= SIZE_MAX / sizeof(float) ? malloc((size_t)n * sizeof(float)) : NULL;
}

/* n standard normal floats, or NULL */
static float *randn(int64_t n)
{
    float *x = alloc_floats(n);
    for (int64_t i = 0; x && i < n; i++)
        x[i] = (float)cli_gauss(&rng);
    return x;
}

static int out_of_memory(bench *b, const char *what, double bytes)
{
    progress_done(b);
    return cli_error(b->cmd, "out of memory for %s (%.1f MiB)", what, bytes / 1048576.0);
}

typedef mxfa_status (*bench_fn)(void *arg);

/* Median seconds of reps runs of fn (after one warm-up), and the peak
 * resident memory while it ran; < 0 on failure. */
static double measure(bench_fn fn, void *arg, int reps, double *peak)
{
    double t[64];
    if (reps > 64)
        reps = 64;
    int have_peak = peak_reset();
    if (fn(arg) != MXFA_OK)
        return -1;
    for (int r = 0; r < reps; r++) {
        double t0 = cli_now();
        if (fn(arg) != MXFA_OK)
            return -1;
        t[r] = cli_now() - t0;
    }
    *peak = have_peak ? peak_mib() : -1;
    return cli_median(t, reps);
}

/* Measure fn as the row `what`, whose rate is amount per second (in units
 * of 10^9); 0, or an exit status with the library's reason printed. */
static int bench_row(bench *b, const char *what, bench_fn fn, void *arg, double amount, const char *unit)
{
    progress(b, what);
    double peak, t = measure(fn, arg, b->reps, &peak);
    if (t < 0) {
        progress_done(b);
        return cli_error(b->cmd, "%s: %s", what, mxfa_last_error(b->ctx));
    }
    result *r = &b->results[b->nresults++];
    snprintf(r->what, sizeof r->what, "%s", what);
    r->seconds = t;
    r->value = amount / t * 1e-9;
    r->unit = unit;
    r->peak = peak;
    return 0;
}

typedef struct quant_arg {
    mxfa_ctx *ctx;
    mxfa_tensor x;
    mxfa_mx out;
} quant_arg;

static mxfa_status run_quant(void *p)
{
    quant_arg *a = p;
    return mxfa_quantize(a->ctx, &a->x, MXFA_PRESET_RCEIL, &a->out);
}

/* Quantization: row blocks, rceil, E4M3, of a QUANT_N x QUANT_N fp32
 * matrix, whatever the other settings. */
enum { QUANT_N = 4096 };

static int bench_quantize(bench *b)
{
    const int64_t n = (int64_t)QUANT_N * QUANT_N;
    float *x = randn(n);
    uint8_t *codes = malloc((size_t)n), *scales = malloc((size_t)n / 32);
    int rc;
    if (!x || !codes || !scales) {
        rc = out_of_memory(b, "the quantization's matrix", (double)n * (4 + 1 + 1.0 / 32));
    } else {
        quant_arg qa = {b->ctx, mxfa_tensor_2d(x, MXFA_F32, QUANT_N, QUANT_N),
                        {mxfa_tensor_2d(codes, MXFA_E4M3, QUANT_N, QUANT_N),
                         mxfa_tensor_2d(scales, MXFA_E8M0, QUANT_N, QUANT_N / 32), MXFA_BLOCK_ROW,
                         MXFA_LAYOUT_COMPACT}};
        rc = bench_row(b, "quantize 4096x4096 (GB/s of fp32 in)", run_quant, &qa, (double)n * 4, "GB/s");
    }
    free(x), free(codes), free(scales);
    return rc;
}

typedef struct gemm_arg {
    mxfa_ctx *ctx;
    mxfa_mx a, b;
    mxfa_tensor d;
    mxfa_model model;
} gemm_arg;

static mxfa_status run_gemm(void *p)
{
    gemm_arg *a = p;
    return mxfa_gemm(a->ctx, &a->a, &a->b, NULL, a->model, &a->d);
}

/* The block-scaled product D = A * B^T of two n x n matrices (K = n) of
 * normal values quantized to E4M3 in row blocks, under each model. */
static int bench_gemm(bench *b, int64_t n, const int *models, int nmodels)
{
    const int64_t kb = (n + 31) / 32;
    const int64_t nn = n * n, ns = n * kb; /* n <= 16384: the bytes below fit a 32-bit size_t */
    float *x = randn(2 * nn), *d = alloc_floats(nn);
    uint8_t *codes = malloc((size_t)(2 * nn)), *scales = malloc((size_t)(2 * ns));
    int rc = 0;
    if (!x || !d || !codes || !scales) {
        rc = out_of_memory(b, "the product's matrices", (double)nn * (8 + 2 + 4) + 2.0 * (double)ns);
        goto done;
    }
    gemm_arg ga = {b->ctx,
                   {mxfa_tensor_2d(codes, MXFA_E4M3, n, n), mxfa_tensor_2d(scales, MXFA_E8M0, n, kb), MXFA_BLOCK_ROW,
                    MXFA_LAYOUT_COMPACT},
                   {mxfa_tensor_2d(codes + nn, MXFA_E4M3, n, n), mxfa_tensor_2d(scales + ns, MXFA_E8M0, n, kb),
                    MXFA_BLOCK_ROW, MXFA_LAYOUT_COMPACT},
                   mxfa_tensor_2d(d, MXFA_F32, n, n), MXFA_MODEL_IDEAL};
    mxfa_tensor xa = mxfa_tensor_2d(x, MXFA_F32, n, n), xb = mxfa_tensor_2d(x + nn, MXFA_F32, n, n);
    if (mxfa_quantize(b->ctx, &xa, MXFA_PRESET_RCEIL, &ga.a) != MXFA_OK ||
        mxfa_quantize(b->ctx, &xb, MXFA_PRESET_RCEIL, &ga.b) != MXFA_OK) {
        progress_done(b);
        rc = cli_error(b->cmd, "quantizing the product's operands: %s", mxfa_last_error(b->ctx));
        goto done;
    }
    for (int mi = 0; !rc && mi < nmodels; mi++) {
        char what[96];
        ga.model = (mxfa_model)models[mi];
        snprintf(what, sizeof what, "gemm %lld^3 %s", (long long)n, mxfa_model_name(ga.model));
        rc = bench_row(b, what, run_gemm, &ga, 2.0 * (double)n * (double)n * (double)n, "GFLOP/s");
    }
done:
    free(x), free(d), free(codes), free(scales);
    return rc;
}

typedef struct attn_arg {
    mxfa_ctx *ctx;
    mxfa_attn_params p;
    mxfa_tensor q, k, v, o, lse, dout, dq, dk, dv;
    int backward;
} attn_arg;

static mxfa_status run_attn(void *p)
{
    attn_arg *a = p;
    if (a->backward)
        return mxfa_attn_bwd(a->ctx, &a->p, &a->q, &a->k, &a->v, &a->o, &a->dout, &a->lse, NULL, NULL, 1, &a->dq,
                             &a->dk, &a->dv);
    return mxfa_attn_fwd(a->ctx, &a->p, &a->q, &a->k, &a->v, NULL, NULL, 1, &a->o, &a->lse);
}

static mxfa_tensor t3(void *data, mxfa_dtype dt, int64_t a, int64_t b, int64_t c)
{
    mxfa_tensor t = {data, dt, MXFA_MEM_HOST, 3, {a, b, c}, {0}};
    return t;
}

/* The attention's buffers: Q, K, V and dO (normal samples), then O, dQ, dK
 * and dV, each [S, H, D] for the largest head dim asked for; the tensors
 * of a smaller D are views of their first S * H * D elements. */
enum { ATTN_IN = 4, ATTN_BUFS = 8 };

/* Attention forward (and backward) of H heads of S tokens, under each
 * model, head dim and mask. */
static int bench_attn(bench *b, int64_t h, int64_t s, const int *dims, int ndims, const int *models, int nmodels,
                      int causal, int backward)
{
    int64_t dmax = 0;
    for (int di = 0; di < ndims; di++)
        dmax = dims[di] > dmax ? dims[di] : dmax;
    const int64_t n = h * s * dmax;
    float *buf[ATTN_BUFS] = {NULL}, *lse = alloc_floats(h * s);
    int have = lse != NULL, rc = 0;
    for (int i = 0; i < ATTN_BUFS && have; i++)
        have = (buf[i] = i < ATTN_IN ? randn(n) : alloc_floats(n)) != NULL;
    if (!have) {
        rc = out_of_memory(b, "the attention's tensors", ((double)n * ATTN_BUFS + (double)(h * s)) * 4);
        goto done;
    }
    for (int mi = 0; !rc && mi < nmodels; mi++)
        for (int di = 0; !rc && di < ndims; di++)
            for (int c = 0; !rc && c <= causal; c++)
                for (int bwd = 0; !rc && bwd <= backward; bwd++) {
                    const int64_t d = dims[di];
                    attn_arg aa = {.ctx = b->ctx};
                    mxfa_attn_params_default(&aa.p);
                    aa.p.model = (mxfa_model)models[mi];
                    aa.p.block_n = b->block_n;
                    aa.p.causal = c ? MXFA_CAUSAL : MXFA_CAUSAL_NONE;
                    aa.q = t3(buf[0], MXFA_F32, s, h, d), aa.k = t3(buf[1], MXFA_F32, s, h, d);
                    aa.v = t3(buf[2], MXFA_F32, s, h, d), aa.dout = t3(buf[3], MXFA_F32, s, h, d);
                    aa.o = t3(buf[4], MXFA_F32, s, h, d), aa.dq = t3(buf[5], MXFA_F32, s, h, d);
                    aa.dk = t3(buf[6], MXFA_F32, s, h, d), aa.dv = t3(buf[7], MXFA_F32, s, h, d);
                    aa.lse = mxfa_tensor_2d(lse, MXFA_F32, s, h);
                    char what[96];
                    snprintf(what, sizeof what, "attn %s %s D=%lld%s", bwd ? "bwd" : "fwd", mxfa_model_name(aa.p.model),
                             (long long)d, c ? " causal" : "");
                    if (bwd && run_attn(&aa) != MXFA_OK) { /* O and LSE for the backward pass */
                        progress_done(b);
                        rc = cli_error(b->cmd, "%s: the forward pass before it: %s", what, mxfa_last_error(b->ctx));
                        break;
                    }
                    aa.backward = bwd;
                    const double flops = 4.0 * (double)h * (double)s * (double)s * (double)d * (c ? 0.5 : 1.0) *
                                         (bwd ? 2.5 : 1.0);
                    rc = bench_row(b, what, run_attn, &aa, flops, "GFLOP/s");
                }
done:
    for (int i = 0; i < ATTN_BUFS; i++)
        free(buf[i]);
    free(lse);
    return rc;
}

/* The table on stdout: a row a measurement. */
static void print_table(const bench *b, int64_t h, int64_t s, const int *dims, int ndims)
{
    int threads = 1, dmax = 0;
#ifdef MXFA_HAVE_OPENMP
    threads = omp_get_max_threads();
#endif
    for (int di = 0; di < ndims; di++)
        dmax = dims[di] > dmax ? dims[di] : dmax;
    const char *isa = mxfa_cpu_isa(b->ctx);
    printf("mxfa %s bench: backend %s%s%s, %d thread%s, H=%lld S=%lld, key tiles of %d, median of %d\n",
           mxfa_version(), mxfa_backend_name(b->ctx), isa ? " " : "", isa ? isa : "", threads, threads == 1 ? "" : "s",
           (long long)h, (long long)s, b->block_n, b->reps);
    printf("%-40s %10s %-8s %10s %14s\n", "operation", "rate", "", "seconds", "peak RSS MiB");
    for (int i = 0; i < b->nresults; i++)
        printf("%-40s %10.4g %-8s %10.4g %14.1f\n", b->results[i].what, b->results[i].value, b->results[i].unit,
               b->results[i].seconds, b->results[i].peak);
    printf("inputs and outputs of one attention call at D=%d: %.3g MiB; one S x S fp32 matrix per head: %.3g MiB\n",
           dmax, 9.0 * (double)(h * s * dmax) * 4 / 1048576.0, (double)s * (double)s * 4 / 1048576.0);
}

static int parse_list(const char *s, int *out, int max, int (*item)(const char *, int *))
{
    char buf[256];
    int n = 0;
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (n == max || !item(tok, &out[n]))
            return -1;
        n++;
    }
    return n;
}

static int parse_dim(const char *s, int *d)
{
    char *end;
    long v = strtol(s, &end, 10);
    *d = (int)v;
    return *s && !*end && (v == 64 || v == 128 || v == 256);
}

static int parse_model(const char *s, int *m)
{
    mxfa_model x;
    if (mxfa_model_parse(s, &x) != MXFA_OK)
        return 0;
    *m = (int)x;
    return 1;
}

static int parse_count(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo || v > hi)
        return 0;
    *out = v;
    return 1;
}

int cmd_bench(int argc, char **argv)
{
    const char *cmd = "bench", *backend = "auto";
    long heads = 4, seqlen = 2048, gemm_n = 1024, reps = 3;
    mxfa_attn_params attn_default;
    mxfa_attn_params_default(&attn_default);
    long block_n = attn_default.block_n;
    int dims[3] = {64, 128, 256}, ndims = 3, models[4] = {0, 1, 2, 3}, nmodels = 4, backward = 1, causal = 1, ch;
    int quantize = 1;
    int heads_given = 0, seqlen_given = 0;
    int models_given = 0;
    attn_shape shapes[BENCH_SHAPES];
    int nshapes = 0;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (ch) {
        case OPT_BACKEND: backend = optarg; break;
        case OPT_HEADS:
            if (!parse_count(optarg, 1, 1024, &heads))
                return cli_usage(cmd, "--heads: expected a count from 1 to 1024, got '%s'", optarg);
            heads_given = 1;
            break;
        case OPT_SEQLEN:
            if (!parse_count(optarg, 1, 1 << 20, &seqlen))
                return cli_usage(cmd, "--seqlen: expected a length from 1 to 1048576, got '%s'", optarg);
            seqlen_given = 1;
            break;
        case OPT_GEMM:
            if (!parse_count(optarg, 0, 16384, &gemm_n))
                return cli_usage(cmd, "--gemm: expected a size from 0 to 16384, got '%s'", optarg);
            break;
        case OPT_REPS:
            if (!parse_count(optarg, 1, 64, &reps))
                return cli_usage(cmd, "--reps: expected a count from 1 to 64, got '%s'", optarg);
            break;
        case OPT_DIMS:
            if ((ndims = parse_list(optarg, dims, 3, parse_dim)) <= 0)
                return cli_usage(cmd, "--dims: expected a list of 64, 128 and 256, got '%s'", optarg);
            break;
        case OPT_MODELS:
            if (strcmp(optarg, "all") == 0)
                for (nmodels = 0; nmodels < 4; nmodels++)
                    models[nmodels] = nmodels;
            else if ((models_given = 1, nmodels = parse_list(optarg, models, 4, parse_model)) <= 0)
                return cli_usage(cmd, "--models: expected 'all' or a list of ideal, sm100, sm90-fp8, sm90-bf16, got '%s'",
                                 optarg);
            break;
        case OPT_BLOCK_N:
            if (!parse_count(optarg, 32, 1024, &block_n) || block_n % 32)
                return cli_usage(cmd, "--block-n: expected a multiple of 32 from 32 to 1024, got '%s'", optarg);
            break;
        case OPT_NOBWD: backward = 0; break;
        case OPT_NOCAUSAL: causal = 0; break;
        case OPT_NOQUANT: quantize = 0; break;
        case OPT_SHAPE:
            if (nshapes == BENCH_SHAPES)
                return cli_usage(cmd, "--shape: at most %d shapes", BENCH_SHAPES);
            if (!bench_shape_parse(optarg, &shapes[nshapes++]))
                return cli_usage(cmd, "--shape: expected B,H,S,D with an optional ,c or ,cp (each at least 1, at "
                                      "most 2^31 - 1 tokens and 2^40 elements), got '%s'", optarg);
            break;
        case 'h': fputs(bench_help, stdout); return 0;
        default: return cli_usage(cmd, "unknown option or missing value: '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    mxfa_ctx *ctx;
    int rc = cli_open(cmd, backend, &ctx);
    if (rc)
        return rc;
    if (strcmp(mxfa_backend_name(ctx), "cuda") == 0) { /* device memory: tools/bench_device.c */
        /* the attention shapes, checked before anything runs */
        if (!nshapes)
            nshapes = bench_attn_device_shapes(cmd, dims, ndims, causal, seqlen_given ? seqlen : 0,
                                               heads_given ? heads : 0, shapes);
        rc = nshapes < 0                  ? EXIT_FAILURE
             : quantize || gemm_n > 0 ? bench_device(cmd, ctx, (int)reps, quantize, gemm_n > 0)
                                      : 0;
        if (!rc)
            rc = bench_attn_device(cmd, ctx, (int)reps, models, models_given ? nmodels : 0, (int)block_n, backward, shapes,
                                   nshapes);
        mxfa_close(ctx);
        return rc;
    }
    if (nshapes) {
        rc = cli_usage(cmd, "--shape measures attention in device memory: it needs --backend cuda (this is %s)",
                       mxfa_backend_name(ctx));
        mxfa_close(ctx);
        return rc;
    }
    bench b = {.cmd = cmd, .ctx = ctx, .reps = (int)reps, .block_n = (int)block_n, .tty = isatty(2)};
    b.steps = quantize + (gemm_n > 0 ? nmodels : 0) + nmodels * ndims * (causal ? 2 : 1) * (backward ? 2 : 1);
    rc = quantize ? bench_quantize(&b) : 0;
    if (!rc && gemm_n > 0)
        rc = bench_gemm(&b, gemm_n, models, nmodels);
    if (!rc)
        rc = bench_attn(&b, heads, seqlen, dims, ndims, models, nmodels, causal, backward);
    if (!rc) {
        progress_done(&b);
        print_table(&b, heads, seqlen, dims, ndims);
    }
    mxfa_close(ctx);
    return rc;
}
