/*
 * mxfa bench: throughput of the operations that studies spend their time
 * in, on one backend, with a progress line on stderr and a table on
 * stdout. FLOPs count as 2 M N K for a product and 4 H S^2 D for attention
 * forward (half of it causal), 2.5 times that backward, as
 * the baseline scripts of bench/ count them, so that ratios are fair.
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
    "Measures quantization (GB/s of fp32 input), the block-scaled product (GFLOP/s per\n"
    "model) and attention forward and backward (GFLOP/s per model, head dim and causal\n"
    "mode) on random normal data, the median of --reps runs, and the peak resident\n"
    "memory of each operation. With --backend cuda: quantization, dequantization and\n"
    "the swizzled layout of a 16384 x 8192 matrix in device memory, in GB/s against a\n"
    "device-to-device copy measured in the same run, the block-scaled products at\n"
    "8192^3, and attention forward and backward (sm90-fp8) at the shapes of the H200\n"
    "baselines.\n"
    "  --backend auto|ref|cpu|cuda   (default auto)\n"
    "  --heads H                     (default 4)\n"
    "  --seqlen S                    (default 2048)\n"
    "  --dims LIST                   head dims, from 64,128,256 (default all three)\n"
    "  --models LIST|all             ideal,sm100,sm90-fp8,sm90-bf16 (default all)\n"
    "  --gemm N                      product size N x N x N (default 1024; 0 skips)\n"
    "  --reps N                      runs per measurement, median reported (default 3)\n"
    "  --no-backward, --no-causal    skip those measurements\n";

enum { OPT_BACKEND = 256, OPT_HEADS, OPT_SEQLEN, OPT_DIMS, OPT_MODELS, OPT_GEMM, OPT_REPS, OPT_NOBWD, OPT_NOCAUSAL };

static const struct option options[] = {
    {"backend", required_argument, NULL, OPT_BACKEND}, {"heads", required_argument, NULL, OPT_HEADS},
    {"seqlen", required_argument, NULL, OPT_SEQLEN},   {"dims", required_argument, NULL, OPT_DIMS},
    {"models", required_argument, NULL, OPT_MODELS},   {"gemm", required_argument, NULL, OPT_GEMM},
    {"reps", required_argument, NULL, OPT_REPS},       {"no-backward", no_argument, NULL, OPT_NOBWD},
    {"no-causal", no_argument, NULL, OPT_NOCAUSAL},    {"help", no_argument, NULL, 'h'},
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

static int progress_tty;
static int step_no, step_total;

static void progress(const char *what)
{
    step_no++;
    if (progress_tty)
        fprintf(stderr, "\r\033[K[%d/%d] %s", step_no, step_total, what);
    else
        fprintf(stderr, "[%d/%d] %s\n", step_no, step_total, what);
    fflush(stderr);
}

static uint64_t rng = 0x9E3779B97F4A7C15u;

static float normal(void)
{
    return (float)cli_gauss(&rng);
}

static float *randn(size_t n)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; x && i < n; i++)
        x[i] = normal();
    return x;
}

typedef struct result {
    char what[96];
    double value, seconds, peak;
    const char *unit;
} result;

static result results[256];
static int nresults;

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

static mxfa_tensor t3(void *data, mxfa_dtype dt, int64_t a, int64_t b, int64_t c)
{
    mxfa_tensor t = {data, dt, MXFA_MEM_HOST, 3, {a, b, c}, {0}};
    return t;
}

static void add_result(const char *what, double secs, double amount, const char *unit, double peak)
{
    result *r = &results[nresults++];
    snprintf(r->what, sizeof r->what, "%s", what);
    r->seconds = secs;
    r->value = amount / secs * 1e-9;
    r->unit = unit;
    r->peak = peak;
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
    *d = atoi(s);
    return *d == 64 || *d == 128 || *d == 256;
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
    int dims[3] = {64, 128, 256}, ndims = 3, models[4] = {0, 1, 2, 3}, nmodels = 4, backward = 1, causal = 1, ch;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (ch) {
        case OPT_BACKEND: backend = optarg; break;
        case OPT_HEADS:
            if (!parse_count(optarg, 1, 1024, &heads))
                return cli_usage(cmd, "--heads: expected a count from 1 to 1024, got '%s'", optarg);
            break;
        case OPT_SEQLEN:
            if (!parse_count(optarg, 1, 1 << 20, &seqlen))
                return cli_usage(cmd, "--seqlen: expected a length from 1 to 1048576, got '%s'", optarg);
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
                nmodels = 4;
            else if ((nmodels = parse_list(optarg, models, 4, parse_model)) <= 0)
                return cli_usage(cmd, "--models: expected 'all' or a list of ideal, sm100, sm90-fp8, sm90-bf16, got '%s'",
                                 optarg);
            break;
        case OPT_NOBWD: backward = 0; break;
        case OPT_NOCAUSAL: causal = 0; break;
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
        rc = bench_device(cmd, ctx, (int)reps);
        if (!rc)
            rc = bench_attn_device(cmd, ctx, (int)reps);
        mxfa_close(ctx);
        return rc;
    }
    int threads = 1;
#ifdef MXFA_HAVE_OPENMP
    threads = omp_get_max_threads();
#endif
    progress_tty = isatty(2);
    const int64_t H = heads, S = seqlen;
    step_total = 1 + (gemm_n > 0 ? nmodels : 0) + nmodels * ndims * (causal ? 2 : 1) * (backward ? 2 : 1);
    size_t n = (size_t)(H * S * 256);
    float *q = randn(n), *k = randn(n), *v = randn(n), *dout = randn(n), *o = malloc(n * 4), *lse = malloc((size_t)(H * S) * 4);
    float *dq = malloc(n * 4), *dk = malloc(n * 4), *dv = malloc(n * 4);
    size_t qn = (size_t)4096 * 4096;
    float *qx = randn(qn);
    uint8_t *qd = malloc(qn), *qs = malloc(qn / 32);
    if (!q || !k || !v || !dout || !o || !lse || !dq || !dk || !dv || !qx || !qd || !qs) {
        mxfa_close(ctx);
        return cli_error(cmd, "out of memory for the benchmark's tensors");
    }
    char what[96];
    double peak, t;
    int failed = 0;

    /* quantization: row blocks, rceil, E4M3, of a 4096 x 4096 fp32 matrix */
    quant_arg qa = {ctx, mxfa_tensor_2d(qx, MXFA_F32, 4096, 4096),
                    {mxfa_tensor_2d(qd, MXFA_E4M3, 4096, 4096), mxfa_tensor_2d(qs, MXFA_E8M0, 4096, 128), MXFA_BLOCK_ROW,
                     MXFA_LAYOUT_COMPACT}};
    progress("quantize 4096x4096 row rceil e4m3");
    if ((t = measure(run_quant, &qa, (int)reps, &peak)) < 0)
        failed = 1;
    else
        add_result("quantize 4096x4096 (GB/s of fp32 in)", t, (double)qn * 4, "GB/s", peak);

    /* products */
    for (int mi = 0; !failed && gemm_n > 0 && mi < nmodels; mi++) {
        int64_t N = gemm_n, kb = (N + 31) / 32;
        uint8_t *ad = malloc((size_t)(N * N)), *as = malloc((size_t)(N * kb)), *bd = malloc((size_t)(N * N));
        uint8_t *bs = malloc((size_t)(N * kb));
        float *d = malloc((size_t)(N * N) * 4);
        gemm_arg ga = {ctx,
                       {mxfa_tensor_2d(ad, MXFA_E4M3, N, N), mxfa_tensor_2d(as, MXFA_E8M0, N, kb), MXFA_BLOCK_ROW,
                        MXFA_LAYOUT_COMPACT},
                       {mxfa_tensor_2d(bd, MXFA_E4M3, N, N), mxfa_tensor_2d(bs, MXFA_E8M0, N, kb), MXFA_BLOCK_ROW,
                        MXFA_LAYOUT_COMPACT},
                       mxfa_tensor_2d(d, MXFA_F32, N, N), (mxfa_model)models[mi]};
        mxfa_tensor x1 = mxfa_tensor_2d(q, MXFA_F32, N, N), x2 = mxfa_tensor_2d(k, MXFA_F32, N, N);
        if (!ad || !as || !bd || !bs || !d || (size_t)(N * N) > n || mxfa_quantize(ctx, &x1, MXFA_PRESET_RCEIL, &ga.a) != MXFA_OK ||
            mxfa_quantize(ctx, &x2, MXFA_PRESET_RCEIL, &ga.b) != MXFA_OK) {
            failed = 1;
        } else {
            snprintf(what, sizeof what, "gemm %lld^3 %s", (long long)N, mxfa_model_name(ga.model));
            progress(what);
            if ((t = measure(run_gemm, &ga, (int)reps, &peak)) < 0)
                failed = 1;
            else
                add_result(what, t, 2.0 * (double)N * N * N, "GFLOP/s", peak);
        }
        free(ad), free(as), free(bd), free(bs), free(d);
    }

    /* attention */
    for (int mi = 0; !failed && mi < nmodels; mi++)
        for (int di = 0; !failed && di < ndims; di++)
            for (int c = 0; !failed && c <= causal; c++)
                for (int bwd = 0; !failed && bwd <= backward; bwd++) {
                    int64_t D = dims[di];
                    attn_arg aa;
                    aa.ctx = ctx;
                    mxfa_attn_params_default(&aa.p);
                    aa.p.model = (mxfa_model)models[mi];
                    aa.p.causal = c ? MXFA_CAUSAL : MXFA_CAUSAL_NONE;
                    aa.q = t3(q, MXFA_F32, S, H, D), aa.k = t3(k, MXFA_F32, S, H, D), aa.v = t3(v, MXFA_F32, S, H, D);
                    aa.o = t3(o, MXFA_F32, S, H, D), aa.dout = t3(dout, MXFA_F32, S, H, D);
                    aa.dq = t3(dq, MXFA_F32, S, H, D), aa.dk = t3(dk, MXFA_F32, S, H, D), aa.dv = t3(dv, MXFA_F32, S, H, D);
                    mxfa_tensor l = {lse, MXFA_F32, MXFA_MEM_HOST, 2, {S, H}, {0}};
                    aa.lse = l;
                    aa.backward = 0;
                    if (bwd && run_attn(&aa) != MXFA_OK) { /* O and LSE for the backward pass */
                        failed = 1;
                        break;
                    }
                    aa.backward = bwd;
                    snprintf(what, sizeof what, "attn %s %s D=%lld%s", bwd ? "bwd" : "fwd", mxfa_model_name(aa.p.model),
                             (long long)D, c ? " causal" : "");
                    progress(what);
                    if ((t = measure(run_attn, &aa, (int)reps, &peak)) < 0) {
                        failed = 1;
                        break;
                    }
                    double flops = 4.0 * (double)H * (double)S * (double)S * (double)D * (c ? 0.5 : 1.0) * (bwd ? 2.5 : 1.0);
                    add_result(what, t, flops, "GFLOP/s", peak);
                }
    if (progress_tty)
        fprintf(stderr, "\r\033[K");
    if (failed) {
        rc = cli_error(cmd, "%s", mxfa_last_error(ctx));
    } else {
        const char *isa = mxfa_cpu_isa(ctx);
        printf("mxfa %s bench: backend %s%s%s, %d thread%s, H=%lld S=%lld, median of %ld\n", mxfa_version(),
               mxfa_backend_name(ctx), isa ? " " : "", isa ? isa : "", threads, threads == 1 ? "" : "s",
               (long long)H, (long long)S, reps);
        printf("%-40s %10s %-8s %10s %14s\n", "operation", "rate", "", "seconds", "peak RSS MiB");
        for (int i = 0; i < nresults; i++)
            printf("%-40s %10.2f %-8s %10.4f %14.1f\n", results[i].what, results[i].value, results[i].unit,
                   results[i].seconds, results[i].peak);
        printf("inputs and outputs of one attention call at D=256: %.1f MiB; one S x S fp32 matrix per head: %.1f MiB\n",
               9.0 * (double)(H * S * 256) * 4 / 1048576.0, (double)S * (double)S * 4 / 1048576.0);
    }
    free(q), free(k), free(v), free(dout), free(o), free(lse), free(dq), free(dk), free(dv), free(qx), free(qd), free(qs);
    mxfa_close(ctx);
    return rc;
}
