#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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
