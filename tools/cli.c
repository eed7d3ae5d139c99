/* SPDX-License-Identifier: BSD-3-Clause */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

int cli_usage(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "mxfa %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry 'mxfa %s --help'.\n", cmd);
    va_end(ap);
    return EXIT_USAGE;
}

int cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "mxfa %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return EXIT_FAILURE;
}

void cli_warn(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "mxfa %s: warning: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int64_t cli_count_nonfinite(const float *x, int64_t n)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        bad += !isfinite(x[i]);
    return bad;
}

int cli_warn_nonfinite_input(const char *cmd, const char *what, const float *x, int64_t n)
{
    int64_t bad = cli_count_nonfinite(x, n);
    if (bad)
        cli_warn(cmd, "%s holds %lld NaN/Inf values of %lld: the outputs they reach are NaN too", what,
                 (long long)bad, (long long)n);
    return bad != 0;
}

int cli_warn_no_score(const char *cmd, const char *what, const char *against, const mxfa_metrics *m)
{
    long long n = (long long)(m->count + m->skipped + m->mismatched_nonfinite);
    if (m->mismatched_nonfinite)
        cli_warn(cmd, "%lld of %lld values of %s differ from %s and are NaN/Inf on one side or both: no error can "
                 "be measured, its metrics are nan", (long long)m->mismatched_nonfinite, n, what, against);
    else if (m->count == 0)
        cli_warn(cmd, "no value of %s is finite (%lld NaN/Inf, as in %s): nothing to measure, its metrics are nan",
                 what, n, against);
    return m->mismatched_nonfinite || m->count == 0;
}

int cli_open(const char *cmd, const char *backend, mxfa_ctx **ctx)
{
    mxfa_status st = mxfa_open(ctx, backend);
    if (st == MXFA_OK)
        return 0;
    if (st == MXFA_ERR_INVALID)
        return cli_usage(cmd, "%s", mxfa_last_error(NULL));
    return cli_error(cmd, "%s", mxfa_last_error(NULL));
}

static const char *dtype_words(npy_dtype t)
{
    switch (t) {
    case NPY_F32: return "float32";
    case NPY_F64: return "float64";
    case NPY_U8: return "uint8";
    case NPY_I32: return "int32";
    case NPY_I64: return "int64";
    case NPY_F16: return "float16";
    }
    return "?";
}

/* "[3, 4, 5]" into buf; negative sizes print as "*" */
static const char *shape_words(char *buf, size_t len, int ndim, const int64_t *shape)
{
    size_t n = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < ndim && n < len; i++)
        n += shape[i] < 0 ? (size_t)snprintf(buf + n, len - n, "%s*", i ? ", " : "")
                          : (size_t)snprintf(buf + n, len - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (n < len)
        snprintf(buf + n, len - n, "]");
    return buf;
}

/* Float inputs may come as float64 (numpy's default) or float16: the
 * commands compute on float32, so those are rounded to it once, on reading
 * (npy_to_f32), as the Python package converts its arrays. */
static int is_float(npy_dtype t)
{
    return t == NPY_F32 || t == NPY_F64 || t == NPY_F16;
}

int cli_read_npy(const char *cmd, const char *what, const char *path, npy_dtype dtype, int ndim,
                 const int64_t *shape, npy_array *a)
{
    char err[PATH_MAX + 256], got[160], want[160];
    if (npy_read(path, a, err, sizeof err) != MXFA_OK)
        return cli_error(cmd, "%s", err);
    const int as_float = dtype == NPY_F32 && is_float(a->dtype);
    int rc = 0;
    if ((a->dtype != dtype && !as_float) || a->ndim != ndim)
        rc = cli_error(cmd, "%s: %s must be a %d-D %s array (got %d-D %s)", path, what, ndim,
                       dtype == NPY_F32 ? "float32 (or float64, float16)" : dtype_words(dtype), a->ndim,
                       dtype_words(a->dtype));
    else if (a->count == 0)
        rc = cli_error(cmd, "%s: %s is empty", path, what);
    else
        for (int i = 0; shape && i < ndim && !rc; i++)
            if (shape[i] >= 0 && a->shape[i] != shape[i])
                rc = cli_error(cmd, "%s: %s has shape %s, expected %s", path, what,
                               shape_words(got, sizeof got, ndim, a->shape), shape_words(want, sizeof want, ndim, shape));
    if (!rc && as_float && npy_to_f32(a, err, sizeof err) != MXFA_OK)
        rc = cli_error(cmd, "%s: %s", path, err);
    if (rc)
        npy_free(a);
    return rc;
}

/* cu_seqlens from "0,37,100" or from a 1-D int32/int64 .npy file; returns 0
 * or an exit status; *out is malloc'ed, *n its length. */
static int read_offsets(const char *cmd, const char *what, const char *arg, int32_t **out, int *n)
{
    int looks_list = 1;
    for (const char *c = arg; *c; c++)
        looks_list &= isdigit((unsigned char)*c) || *c == ',' || *c == ' ';
    if (looks_list && *arg) {
        int cap = 1;
        for (const char *c = arg; *c; c++)
            cap += *c == ',';
        int32_t *v = malloc((size_t)cap * sizeof *v);
        if (!v)
            return cli_error(cmd, "out of memory");
        int k = 0;
        const char *p = arg;
        while (*p) {
            char *end;
            errno = 0;
            long x = strtol(p, &end, 10);
            if (end == p || errno || x < 0 || x > INT32_MAX) {
                free(v);
                return cli_usage(cmd, "%s: '%s' is not a list of non-negative offsets", what, arg);
            }
            v[k++] = (int32_t)x;
            p = end;
            while (*p == ' ' || *p == ',')
                p++;
        }
        *out = v;
        *n = k;
        return 0;
    }
    if (strchr(arg, ','))
        return cli_usage(cmd, "%s: '%s' is not a list of non-negative offsets", what, arg);
    npy_array a;
    char err[PATH_MAX + 256];
    if (npy_read(arg, &a, err, sizeof err) != MXFA_OK)
        return cli_error(cmd, "%s", err);
    if (a.ndim != 1 || (a.dtype != NPY_I32 && a.dtype != NPY_I64) || a.count < 2 || a.count > INT32_MAX) {
        npy_free(&a);
        return cli_error(cmd, "%s: %s must be a 1-D int32 or int64 array of at least 2 offsets", arg, what);
    }
    int32_t *v = malloc((size_t)a.count * sizeof *v);
    if (!v) {
        npy_free(&a);
        return cli_error(cmd, "out of memory");
    }
    for (int64_t i = 0; i < a.count; i++) {
        int64_t x = a.dtype == NPY_I32 ? ((int32_t *)a.data)[i] : ((int64_t *)a.data)[i];
        if (x < 0 || x > INT32_MAX) {
            free(v);
            npy_free(&a);
            return cli_error(cmd, "%s: offset %lld of %s is out of range", arg, (long long)x, what);
        }
        v[i] = (int32_t)x;
    }
    *out = v;
    *n = (int)a.count;
    npy_free(&a);
    return 0;
}

int cli_read_cu_seqlens(const char *cmd, const char *qarg, const char *karg, int32_t **cuq, int32_t **cuk,
                        int *batch)
{
    int nq = 0, nk = 0;
    *cuq = *cuk = NULL;
    int rc = read_offsets(cmd, "--cu-seqlens-q", qarg, cuq, &nq);
    if (!rc)
        rc = read_offsets(cmd, "--cu-seqlens-k", karg, cuk, &nk);
    if (!rc && nq != nk)
        rc = cli_error(cmd, "--cu-seqlens-q has %d offsets and --cu-seqlens-k %d: the batch sizes differ", nq, nk);
    if (rc) {
        free(*cuq), free(*cuk);
        *cuq = *cuk = NULL;
        return rc;
    }
    *batch = nq - 1;
    return 0;
}

double cli_gauss(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    z ^= z >> 31;
    double u = ((double)(z >> 11) + 0.5) / 9007199254740992.0, v = ((double)((z << 21) >> 11) + 0.5) / 9007199254740992.0;
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double cli_median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof t[0], cmp_double);
    return t[n / 2];
}

double cli_time_enqueued(mxfa_ctx *ctx, mxfa_status (*run)(void *arg), void *arg, int reps)
{
    double t[5];
    if (run(arg) != MXFA_OK || mxfa_synchronize(ctx) != MXFA_OK)
        return -1;
    for (int round = 0; round < 5; round++) {
        double t0 = cli_now();
        for (int r = 0; r < reps; r++)
            if (run(arg) != MXFA_OK)
                return -1;
        if (mxfa_synchronize(ctx) != MXFA_OK)
            return -1;
        t[round] = (cli_now() - t0) / reps;
    }
    return cli_median(t, 5);
}

void cli_attn_args_init(cli_attn_args *a, const char *backend)
{
    memset(a, 0, sizeof *a);
    a->backend = backend;
    mxfa_attn_params_default(&a->p);
}

/* A tile size: an integer from 0 (the default) to 2^20; the library
 * checks the rest. */
static int tile_size(const char *cmd, const char *opt, const char *s, int *out)
{
    char *end;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (*s == '\0' || *end || errno || v < 0 || v > 1 << 20)
        return cli_usage(cmd, "%s takes a non-negative integer, got '%s'", opt, s);
    *out = (int)v;
    return 0;
}

int cli_attn_option(const char *cmd, int id, const char *arg, cli_attn_args *a, int *rc)
{
    mxfa_status st = MXFA_OK;
    *rc = 0;
    switch (id) {
    case CLI_ATTN_Q: a->q = arg; break;
    case CLI_ATTN_K: a->k = arg; break;
    case CLI_ATTN_V: a->v = arg; break;
    case CLI_ATTN_OUT: a->out = arg; break;
    case CLI_ATTN_LSE: a->lse = arg; break;
    case CLI_ATTN_CUQ: a->cuq = arg; break;
    case CLI_ATTN_CUK: a->cuk = arg; break;
    case CLI_ATTN_CAUSAL: a->p.causal = MXFA_CAUSAL; break;
    case CLI_ATTN_CAUSAL_PLAIN: a->p.causal = MXFA_CAUSAL_PLAIN; break;
    case CLI_ATTN_MODEL: st = mxfa_model_parse(arg, &a->p.model); break;
    case CLI_ATTN_PRESET: st = mxfa_preset_parse(arg, &a->p.preset); break;
    case CLI_ATTN_PSCALE: st = mxfa_p_scale_parse(arg, &a->p.p_scale); break;
    case CLI_ATTN_SCALE: {
        char *end;
        a->p.softmax_scale = strtof(arg, &end);
        if (*arg == '\0' || *end || !(a->p.softmax_scale > 0) || isinf(a->p.softmax_scale))
            *rc = cli_usage(cmd, "--scale takes a positive number, got '%s'", arg);
        break;
    }
    case CLI_ATTN_BM: *rc = tile_size(cmd, "--block-m", arg, &a->p.block_m); break;
    case CLI_ATTN_BN: *rc = tile_size(cmd, "--block-n", arg, &a->p.block_n); break;
    case CLI_ATTN_ODT:
        if (strcmp(arg, "f32") && strcmp(arg, "bf16"))
            *rc = cli_usage(cmd, "--out-dtype takes f32 or bf16, got '%s'", arg);
        a->out_bf16 = !strcmp(arg, "bf16");
        break;
    case CLI_ATTN_BACKEND: a->backend = arg; break;
    case CLI_ATTN_BWD: a->backward = 1; break;
    case CLI_ATTN_DO: a->dout = arg; break;
    case CLI_ATTN_O: a->o = arg; break;
    case CLI_ATTN_DQ: a->dq = arg; break;
    case CLI_ATTN_DK: a->dk = arg; break;
    case CLI_ATTN_DV: a->dv = arg; break;
    default: return 0;
    }
    if (st != MXFA_OK)
        *rc = cli_usage(cmd, "%s", mxfa_last_error(NULL));
    return 1;
}

int cli_attn_check(const char *cmd, const cli_attn_args *a, int candidate)
{
    /* mxfa compare names another implementation's outputs; its wording says so */
    const char *needs = candidate ? "--backward needs --q, --k, --v, --do and the candidate's --dq, --dk and --dv"
                                  : "--backward needs --q, --k, --v, --do, --dq, --dk and --dv";
    const char *no_out = candidate ? "--out belongs to the forward pass (compare the backward's --dq, --dk, --dv)"
                                   : "--out belongs to the forward pass (the backward writes --dq, --dk, --dv)";
    const char *o_lse = candidate ? "give both --o and --lse, or neither (then the emulator recomputes them)"
                                  : "give both --o and --lse, or neither (then they are recomputed)";
    const char *fwd = candidate ? "--q, --k, --v and the candidate's --out are required"
                                : "--q, --k, --v and --out are required";
    if (a->backward) {
        if (!a->q || !a->k || !a->v || !a->dout || !a->dq || !a->dk || !a->dv)
            return cli_usage(cmd, "%s", needs);
        if (a->out)
            return cli_usage(cmd, "%s", no_out);
        if (!a->o != !a->lse)
            return cli_usage(cmd, "%s", o_lse);
    } else {
        if (!a->q || !a->k || !a->v || !a->out)
            return cli_usage(cmd, "%s", fwd);
        if (a->dout || a->o || a->dq || a->dk || a->dv)
            return cli_usage(cmd, "--do, --o, --dq, --dk and --dv belong to --backward");
    }
    if (!a->cuq != !a->cuk)
        return cli_usage(cmd, "give both --cu-seqlens-q and --cu-seqlens-k, or neither");
    return 0;
}

int cli_attn_read(const char *cmd, const cli_attn_args *a, npy_array *q, npy_array *k, npy_array *v, int32_t **cuq,
                  int32_t **cuk, int *batch)
{
    int rc;
    *cuq = *cuk = NULL;
    *batch = 1;
    if ((rc = cli_read_npy(cmd, "Q [tokens, heads, D]", a->q, NPY_F32, 3, NULL, q)) ||
        (rc = cli_read_npy(cmd, "K [tokens, heads, D]", a->k, NPY_F32, 3, NULL, k)) ||
        (rc = cli_read_npy(cmd, "V [tokens, heads, D]", a->v, NPY_F32, 3, NULL, v)))
        return rc;
    return a->cuq ? cli_read_cu_seqlens(cmd, a->cuq, a->cuk, cuq, cuk, batch) : 0;
}
