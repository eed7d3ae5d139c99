/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every command of the mxfa program says why it fails: each case provokes
 * one failure (a missing or unreadable input, an unwritable output, an
 * input the library refuses, memory that runs out, a lost standard
 * output) and checks the exit status, that standard error names the cause
 * (the system's words for a system call, the library's message for a
 * refused call) and that no file is left behind.
 */
#include "cli_run.h"

/* Whether stderr has a line of the program's ("mxfa ...") that says cause
 * (progress lines may come before it). */
static int says(const char *cause)
{
    const char *at = strstr(errtext, cause), *line = at;
    while (line && line > errtext && line[-1] != '\n')
        line--;
    return at && strncmp(line, "mxfa", 4) == 0;
}

/* A run that must exit with `want` and say `cause` on stderr; a failure
 * leaves no temporary file. */
static void expect_cause(const char *what, int want, const char *cause, const run_how *how, const char *const *args)
{
    static const run_how plain = {NULL, 0};
    int rc = run_as(how ? how : &plain, args, NULL, 0);
    int said = says(cause);
    if (!ok(rc == want && said && no_temporaries(), "%s: exit %d, and stderr says '%s'", what, want, cause))
        diag("exit %d, stderr '%s'%s", rc, errtext, no_temporaries() ? "" : ", temporaries left behind");
}

static void write_f32(const char *name, int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)gauss();
    write_npy(path(name), NPY_F32, ndim, shape, x);
    free(x);
}

static void write_u8(const char *name, int64_t rows, int64_t cols, uint8_t fill)
{
    uint8_t *x = malloc((size_t)(rows * cols));
    memset(x, fill, (size_t)(rows * cols));
    const int64_t shape[2] = {rows, cols};
    write_npy(path(name), NPY_U8, 2, shape, x);
    free(x);
}

static void info_and_output(void)
{
    const char *i1[] = {"info", "extra", NULL};
    expect_cause("info with an extra argument", 2, "unexpected argument 'extra'", NULL, i1);
    if (access("/dev/full", W_OK) == 0) {
        const run_how full = {"/dev/full", 0};
        const char *i2[] = {"info", NULL};
        const char *i3[] = {"--version", NULL};
        const char *q[] = {"quantize", path("x.npy"), "--data", path("sd.npy"), "--scales", path("ss.npy"), "--stats",
                           NULL};
        expect_cause("info with its standard output on a full device", 1, "standard output: No space left on device",
                     &full, i2);
        expect_cause("--version on a full device", 1, "No space left on device", &full, i3);
        expect_cause("quantize --stats on a full device", 1, "No space left on device", &full, q);
    } else {
        skip("no /dev/full here");
        skip("no /dev/full here");
        skip("no /dev/full here");
    }
}

static void quantize_and_dequantize(const char *no_cuda)
{
    const char *q1[] = {"quantize", path("missing.npy"), "--data", path("d.npy"), "--scales", path("s.npy"), NULL};
    const char *q2[] = {"quantize", path("x.npy"), "--data", path("nodir/d.npy"), "--scales", path("s.npy"), NULL};
    const char *q3[] = {"quantize", path("i32.npy"), "--data", path("d.npy"), "--scales", path("s.npy"), NULL};
    const char *q4[] = {"quantize", path("x.npy"), "--data", path("d.npy"), "--scales", path("s.npy"), "--backend",
                        "cuda", NULL};
    expect_cause("quantize a missing file", 1, "missing.npy: No such file or directory", NULL, q1);
    expect_cause("quantize into a missing directory", 1, "cannot create a temporary file: No such file or directory",
                 NULL, q2);
    expect_cause("quantize an int32 array", 1, "must be a 2-D float32 (or float64, float16) array (got 2-D int32)",
                 NULL, q3);
    if (no_cuda)
        expect_cause("quantize on an unusable cuda backend", 1, "backend 'cuda'", NULL, q4);
    else
        skip("the cuda backend is usable here");

    const char *d1[] = {"dequantize", "--data", path("codes.npy"), "--scales", path("codes.npy"), "--out",
                        path("y.npy"), NULL};
    const char *d2[] = {"dequantize", "--data", path("missing.npy"), "--scales", path("rs.npy"), "--out", path("y.npy"),
                        NULL};
    const char *d3[] = {"dequantize", "--data", path("codes.npy"), "--scales", path("rs.npy"), "--out",
                        path("nodir/y.npy"), NULL};
    expect_cause("dequantize with scales that do not fit", 1, "do not fit data [4, 64]", NULL, d1);
    expect_cause("dequantize a missing file", 1, "No such file or directory", NULL, d2);
    expect_cause("dequantize into a missing directory", 1, "No such file or directory", NULL, d3);
}

static void gemm(void)
{
    const char *g1[] = {"gemm", "--a", path("codes.npy"), "--a-scales", path("rs.npy"), "--b", path("codes65.npy"),
                        "--b-scales", path("rs.npy"), "--model", "ideal", "--out", path("dd.npy"), NULL};
    const char *g2[] = {"gemm", "--a", path("codes.npy"), "--a-scales", path("rs.npy"), "--b", path("codes.npy"),
                        "--b-scales", path("rs.npy"), "--c", path("x.npy"), "--model", "ideal", "--out", path("dd.npy"),
                        NULL};
    const char *g3[] = {"gemm", "--a", path("codes.npy"), "--a-scales", path("rs.npy"), "--b", path("codes.npy"),
                        "--b-scales", path("rs.npy"), "--model", "sm95", "--out", path("dd.npy"), NULL};
    const char *g4[] = {"gemm", "--a", path("codes.npy"), "--a-scales", path("rs.npy"), "--b", path("codes.npy"),
                        "--b-scales", path("rs.npy"), "--model", "ideal", "--out", path("nodir/dd.npy"), NULL};
    expect_cause("gemm with K of B not K of A", 1, "has shape [4, 65], expected [*, 64]", NULL, g1);
    expect_cause("gemm with C of the wrong shape", 1, "C has shape [4, 64], expected [4, 4]", NULL, g2);
    expect_cause("gemm with an unknown model", 2, "sm95", NULL, g3);
    expect_cause("gemm into a missing directory", 1, "No such file or directory", NULL, g4);
}

static void attn(void)
{
    const char *a1[] = {"attn", "--q", path("q48.npy"), "--k", path("q48.npy"), "--v", path("q48.npy"), "--out",
                        path("o.npy"), NULL};
    const char *a2[] = {"attn", "--q", path("q3.npy"), "--k", path("k2.npy"), "--v", path("k2.npy"), "--out",
                        path("o.npy"), NULL};
    const char *a3[] = {"attn", "--q", path("q.npy"), "--k", path("q.npy"), "--v", path("q.npy"), "--out",
                        path("o.npy"), "--scale", "-1", NULL};
    const char *a4[] = {"attn", "--q", path("q.npy"), "--k", path("q.npy"), "--v", path("q.npy"), "--out",
                        path("o.npy"), "--cu-seqlens-q", path("missing.npy"), "--cu-seqlens-k", "0,40", NULL};
    const char *a5[] = {"attn", "--backward", "--q", path("q.npy"), "--k", path("q.npy"), "--v", path("q.npy"), "--do",
                        path("q.npy"), "--o", path("q3.npy"), "--lse", path("x.npy"), "--dq", path("g1.npy"), "--dk",
                        path("g2.npy"), "--dv", path("g3.npy"), NULL};
    expect_cause("attn at head dim 48", 1, "head dimension 48 is not supported", NULL, a1);
    expect_cause("attn with query heads not a multiple of the key heads", 1, "3 query heads are not a multiple of 2",
                 NULL, a2);
    expect_cause("attn with a negative softmax scale", 2, "--scale takes a positive number", NULL, a3);
    expect_cause("attn with a missing offsets file", 1, "missing.npy: No such file or directory", NULL, a4);
    expect_cause("attn --backward with O of the wrong shape", 1, "O has shape [40, 3, 64], expected [40, 1, 64]", NULL,
                 a5);
}

static void study(void)
{
    write_raw(path("plain-file"), "x", 1);
    const char *s1[] = {"study", "--q", path("q.npy"), "--k", path("q.npy"), "--v", path("q.npy"), "--out",
                        path("plain-file"), NULL};
    const char *s2[] = {"study", "--q", path("q.npy"), "--k", path("q.npy"), "--v", path("q.npy"), "--out",
                        path("nodir/out"), NULL};
    const char *s3[] = {"study", "--q", path("q48.npy"), "--k", path("q48.npy"), "--v", path("q48.npy"), "--out",
                        path("sdir"), NULL};
    const char *s4[] = {"study", "--q", path("q.npy"), "--k", path("missing.npy"), "--v", path("q.npy"), "--out",
                        path("sdir"), NULL};
    expect_cause("study into a plain file", 1, "exists and is not a directory", NULL, s1);
    expect_cause("study under a missing directory", 1, "No such file or directory", NULL, s2);
    expect_cause("study at head dim 48", 1, "head dimension 48 is not supported", NULL, s3);
    expect_cause("study with a missing K", 1, "missing.npy: No such file or directory", NULL, s4);
}

static void bench_and_selftest(const char *no_cuda)
{
    const char *b1[] = {"bench", "--backend", "cuda", NULL};
    const char *b2[] = {"bench", "--dims", "64x", NULL};
    const char *b3[] = {"bench", "--heads", "0", NULL};
    if (no_cuda)
        expect_cause("bench on an unusable cuda backend", 1, "backend 'cuda'", NULL, b1);
    else
        skip("the cuda backend is usable here");
    expect_cause("bench --dims 64x", 2, "--dims: expected a list of 64, 128 and 256, got '64x'", NULL, b2);
    expect_cause("bench --heads 0", 2, "--heads: expected a count from 1 to 1024", NULL, b3);
    const char *b6[] = {"bench", "--shape", "4,16,4096", NULL};
    const char *b7[] = {"bench", "--backend", "cpu", "--shape", "1,16,131072,128", NULL};
    expect_cause("bench --shape 4,16,4096", 2, "--shape: expected B,H,S,D with an optional ,c or ,cp", NULL, b6);
    expect_cause("bench --shape on the cpu backend", 2, "--shape measures attention in device memory: it needs "
                 "--backend cuda (this is cpu)", NULL, b7);
#ifdef MXFA_SANITIZED
    skip("a memory limit and the sanitizers' shadow memory do not mix");
    skip("a memory limit and the sanitizers' shadow memory do not mix");
#else
    /* within 1 GiB of address space the 4096 x 4096 quantization runs,
     * then the product's 2 GiB, or the attention's 8 GiB, are not there */
    const run_how small = {NULL, (rlim_t)1 << 30};
    const char *b4[] = {"bench", "--gemm", "16384", "--models", "ideal", "--reps", "1", NULL};
    const char *b5[] = {"bench", "--gemm", "0", "--heads", "64", "--seqlen", "65536", "--dims", "64", "--models",
                        "ideal", "--reps", "1", "--no-backward", "--no-causal", NULL};
    expect_cause("bench with too little memory for the product", 1, "out of memory for the product's matrices", &small,
                 b4);
    expect_cause("bench with too little memory for the attention", 1, "out of memory for the attention's tensors",
                 &small, b5);
#endif
    const char *t1[] = {"selftest", "--seed", "x", NULL};
    expect_cause("selftest --seed x", 2, "--seed: expected a non-negative integer", NULL, t1);
}

int main(void)
{
    cli_start("t-cli-errors");
    rng_seed_from_env(28);
    const int64_t x[2] = {4, 64}, q[3] = {40, 1, 64}, q3[3] = {40, 3, 64}, k2[3] = {40, 2, 64}, q48[3] = {40, 1, 48};
    write_f32("x.npy", 2, x);
    write_f32("q.npy", 3, q);
    write_f32("q3.npy", 3, q3);
    write_f32("k2.npy", 3, k2);
    write_f32("q48.npy", 3, q48);
    write_u8("codes.npy", 4, 64, 0x38);  /* E4M3 1.0 */
    write_u8("codes65.npy", 4, 65, 0x38);
    write_u8("rs.npy", 4, 2, 127);       /* row scales 2^0 */
    const int32_t i32[4 * 64] = {0};
    write_npy(path("i32.npy"), NPY_I32, 2, x, i32);
    const char *no_cuda = mxfa_backend_usable("cuda", NULL, 0) ? NULL : "cuda";

    info_and_output();
    quantize_and_dequantize(no_cuda);
    gemm();
    attn();
    study();
    bench_and_selftest(no_cuda);

    cli_finish();
    return done_testing();
}
