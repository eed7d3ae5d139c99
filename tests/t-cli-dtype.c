/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The float inputs of every command may be float64 (numpy's default) or
 * float16 files: each is rounded to float32 once, float64 to nearest even
 * and float16 exactly. A run on such files must write, byte for byte, what
 * the same run writes on float32 files of the values they must round to,
 * which this test writes from tests/narrowing.h (ties, their neighbours,
 * subnormals, the top of fp32's range and beyond it, NaN; all 65536
 * halves). `mxfa gemm` on zero A and B passes C through to D, so it shows
 * every converted value itself.
 */
#include "cli_run.h"
#include "narrowing.h"

enum { COLS = 32 };

/* Write the float64 inputs of cases (rows x COLS, the tail padded with
 * zeros) as name64 and the float32 each must become as name32. */
static void write_pair64(const char *name64, const char *name32, const narrow_case *c, int n, int64_t rows)
{
    double *x = calloc((size_t)(rows * COLS), sizeof *x);
    uint32_t *want = calloc((size_t)(rows * COLS), sizeof *want);
    for (int i = 0; i < n; i++)
        x[i] = c[i].x, want[i] = c[i].want;
    const int64_t shape[2] = {rows, COLS};
    write_npy(path(name64), NPY_F64, 2, shape, x);
    write_npy(path(name32), NPY_F32, 2, shape, want);
    free(x);
    free(want);
}

/* The same for a 3-D tensor of near-tie-free values: float64 inputs a
 * fraction of the way between two floats of a normal sample. */
static void write_near3(const char *name64, const char *name32, const int64_t shape[3])
{
    const int64_t n = shape[0] * shape[1] * shape[2];
    double *x = malloc((size_t)n * sizeof *x);
    uint32_t *want = malloc((size_t)n * sizeof *want);
    for (int64_t i = 0; i < n; i++) {
        const double t = 0.05 + 0.4 * rng_below(1000) / 1000.0;
        const narrow_case c = narrow_near((float)gauss(), rng_below(2) ? t : 1 - t);
        x[i] = c.x, want[i] = c.want;
    }
    write_npy(path(name64), NPY_F64, 3, shape, x);
    write_npy(path(name32), NPY_F32, 3, shape, want);
    free(x);
    free(want);
}

/* A float16 tensor of normal samples (their halves' values, exactly) and
 * its float32 twin. */
static void write_half3(const char *name16, const char *name32, const int64_t shape[3])
{
    const int64_t n = shape[0] * shape[1] * shape[2];
    uint16_t *h = malloc((size_t)n * sizeof *h);
    float *want = malloc((size_t)n * sizeof *want);
    for (int64_t i = 0; i < n; i++) {
        /* a sign, an exponent from 2^-4 to 2^1, ten random significand bits */
        h[i] = (uint16_t)(rng_below(2) << 15 | (11 + rng_below(6)) << 10 | rng_below(1024));
        want[i] = narrow_half(h[i]);
    }
    write_npy(path(name16), NPY_F16, 3, shape, h);
    write_npy(path(name32), NPY_F32, 3, shape, want);
    free(h);
    free(want);
}

/* Zero operands for D = A * B^T + C with K = 32: A [rows, 32], B [32, 32]. */
static void write_zero_operands(int64_t rows)
{
    uint8_t *z = calloc((size_t)(rows * COLS), 1), *s = malloc((size_t)rows);
    memset(s, 127, (size_t)rows);
    const int64_t a[2] = {rows, COLS}, sa[2] = {rows, 1}, b[2] = {COLS, COLS}, sb[2] = {COLS, 1};
    write_npy(path("za.npy"), NPY_U8, 2, a, z);
    write_npy(path("zsa.npy"), NPY_U8, 2, sa, s);
    write_npy(path("zb.npy"), NPY_U8, 2, b, z);
    write_npy(path("zsb.npy"), NPY_U8, 2, sb, s);
    free(z);
    free(s);
}

static int gemm_c(const char *c, const char *d)
{
    const char *args[] = {"gemm", "--a", path("za.npy"), "--a-scales", path("zsa.npy"), "--b", path("zb.npy"),
                          "--b-scales", path("zsb.npy"), "--c", path(c), "--model", "ideal", "--out", path(d), NULL};
    return run(args, NULL, 0);
}

/* D of the pass-through holds the float32 file's finite non-zero values
 * themselves (zeros come out +0, NaN as the canonical NaN): the
 * comparison of the two runs can see any value converted wrongly. */
static int passes_through(const char *d, const char *c32, int64_t n)
{
    npy_array dd = {0}, cc = {0};
    char err[1200];
    int good = npy_read(path(d), &dd, err, sizeof err) == MXFA_OK && npy_read(path(c32), &cc, err, sizeof err) == MXFA_OK &&
               dd.count == n && cc.count == n;
    int64_t finite = 0;
    for (int64_t i = 0; good && i < n; i++) {
        const float want = ((const float *)cc.data)[i], got = ((const float *)dd.data)[i];
        if (isfinite(want) && want != 0) {
            good = bits_of(got) == bits_of(want);
            finite++;
        }
    }
    npy_free(&dd);
    npy_free(&cc);
    return good && finite > 0;
}

static void gemm_float64_c(void)
{
    static narrow_case cases[NARROW_EDGE_CASES + 10 * 400];
    const int n = narrow_cases(cases, 400);
    const int64_t rows = (n + COLS - 1) / COLS;
    write_zero_operands(rows);
    write_pair64("c64.npy", "c32.npy", cases, n, rows);
    int rc64 = gemm_c("c64.npy", "d64.npy"), rc32 = gemm_c("c32.npy", "d32.npy");
    if (!ok(rc64 == 0 && rc32 == 0 && same_file(path("d64.npy"), path("d32.npy")),
            "gemm with a float64 C of %d values (ties, neighbours, subnormals, beyond fp32's range, NaN) writes the "
            "bytes of its float32 rounding",
            n))
        diag("exit %d and %d: %s", rc64, rc32, errtext);
    ok(passes_through("d32.npy", "c32.npy", rows * COLS), "... D = 0 * 0 + C holds each finite non-zero value of C");
}

static void gemm_float16_c(void)
{
    const int64_t rows = 65536 / COLS, shape[2] = {rows, COLS};
    uint16_t *h = malloc(65536 * sizeof *h);
    float *want = malloc(65536 * sizeof *want);
    for (int i = 0; i < 65536; i++)
        h[i] = (uint16_t)i, want[i] = narrow_half((uint16_t)i);
    write_npy(path("c16.npy"), NPY_F16, 2, shape, h);
    write_npy(path("c16as32.npy"), NPY_F32, 2, shape, want);
    free(h);
    free(want);
    write_zero_operands(rows);
    int rc16 = gemm_c("c16.npy", "e16.npy"), rc32 = gemm_c("c16as32.npy", "e32.npy");
    if (!ok(rc16 == 0 && rc32 == 0 && same_file(path("e16.npy"), path("e32.npy")),
            "gemm with a float16 C of all 65536 halves writes the bytes of their float32 values"))
        diag("exit %d and %d: %s", rc16, rc32, errtext);
    ok(passes_through("e32.npy", "c16as32.npy", 65536), "... D = 0 * 0 + C holds each finite non-zero half");

    const char *q16[] = {"quantize", path("c16.npy"), "--data", path("qd16.npy"), "--scales", path("qs16.npy"), NULL};
    const char *q32[] = {"quantize", path("c16as32.npy"), "--data", path("qd32.npy"), "--scales", path("qs32.npy"),
                         NULL};
    int good = run(q16, NULL, 0) == 0 && run(q32, NULL, 0) == 0 && same_file(path("qd16.npy"), path("qd32.npy")) &&
               same_file(path("qs16.npy"), path("qs32.npy"));
    if (!ok(good, "quantize of all 65536 halves writes the codes and scales of their float32 values"))
        diag("%s", errtext);
}

static void quantize_float64(void)
{
    static narrow_case cases[NARROW_EDGE_CASES + 10 * 400];
    const int n = narrow_cases(cases, 400);
    const int64_t rows = (n + COLS - 1) / COLS;
    write_pair64("x64.npy", "x32.npy", cases, n, rows);
    const char *q64[] = {"quantize", path("x64.npy"), "--data", path("xd64.npy"), "--scales", path("xs64.npy"),
                         "--block", "col", "--format", "e5m2", NULL};
    const char *q32[] = {"quantize", path("x32.npy"), "--data", path("xd32.npy"), "--scales", path("xs32.npy"),
                         "--block", "col", "--format", "e5m2", NULL};
    int good = run(q64, NULL, 0) == 0 && run(q32, NULL, 0) == 0 && same_file(path("xd64.npy"), path("xd32.npy")) &&
               same_file(path("xs64.npy"), path("xs32.npy"));
    if (!ok(good, "quantize of %d float64 values writes the codes and scales of their float32 rounding", n))
        diag("%s", errtext);
}

static void attention(void)
{
    const int64_t qs[3] = {40, 2, 64}, ks[3] = {50, 1, 64};
    write_near3("q64.npy", "q32.npy", qs);
    write_half3("k16.npy", "k32.npy", ks);
    write_near3("v64.npy", "v32.npy", ks);
    write_near3("do64.npy", "do32.npy", qs);
    const char *f1[] = {"attn", "--q", path("q64.npy"), "--k", path("k16.npy"), "--v", path("v64.npy"), "--out",
                        path("o1.npy"), "--lse", path("l1.npy"), "--causal", NULL};
    const char *f2[] = {"attn", "--q", path("q32.npy"), "--k", path("k32.npy"), "--v", path("v32.npy"), "--out",
                        path("o2.npy"), "--lse", path("l2.npy"), "--causal", NULL};
    int good = run(f1, NULL, 0) == 0 && run(f2, NULL, 0) == 0 && same_file(path("o1.npy"), path("o2.npy")) &&
               same_file(path("l1.npy"), path("l2.npy"));
    if (!ok(good, "attn on float64 Q and V and float16 K writes the O and LSE of their float32 values"))
        diag("%s", errtext);

    const char *b1[] = {"attn", "--backward", "--q", path("q64.npy"), "--k", path("k16.npy"), "--v", path("v64.npy"),
                        "--do", path("do64.npy"), "--dq", path("gq1.npy"), "--dk", path("gk1.npy"), "--dv",
                        path("gv1.npy"), NULL};
    const char *b2[] = {"attn", "--backward", "--q", path("q32.npy"), "--k", path("k32.npy"), "--v", path("v32.npy"),
                        "--do", path("do32.npy"), "--dq", path("gq2.npy"), "--dk", path("gk2.npy"), "--dv",
                        path("gv2.npy"), NULL};
    good = run(b1, NULL, 0) == 0 && run(b2, NULL, 0) == 0 && same_file(path("gq1.npy"), path("gq2.npy")) &&
           same_file(path("gk1.npy"), path("gk2.npy")) && same_file(path("gv1.npy"), path("gv2.npy"));
    if (!ok(good, "attn --backward on a float64 dO writes the dQ, dK and dV of the float32 values"))
        diag("%s", errtext);

    const char *s1[] = {"study", "--q", path("q64.npy"), "--k", path("k16.npy"), "--v", path("v64.npy"), "--do",
                        path("do64.npy"), "--models", "sm100", "--out", path("st1"), NULL};
    const char *s2[] = {"study", "--q", path("q32.npy"), "--k", path("k32.npy"), "--v", path("v32.npy"), "--do",
                        path("do32.npy"), "--models", "sm100", "--out", path("st2"), NULL};
    good = run(s1, NULL, 0) == 0 && run(s2, NULL, 0) == 0 &&
           same_file(path("st1/results.csv"), path("st2/results.csv"));
    if (!ok(good, "study on float64 and float16 tensors writes the results of their float32 values"))
        diag("%s", errtext);
}

int main(void)
{
    cli_start("t-cli-dtype");
    rng_seed_from_env(28);
    gemm_float64_c();
    gemm_float16_c();
    quantize_float64();
    attention();
    cli_finish();
    return done_testing();
}
