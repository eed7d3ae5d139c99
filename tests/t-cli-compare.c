/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `mxfa compare`, the golden test of another implementation, run as a user
 * would: the emulator's own outputs (written by `mxfa attn` on the ref
 * backend, a separate run on another backend) pass bit for bit, forward and
 * backward; outputs perturbed here by a known number of ULPs (the float's
 * bits stepped, an independent count) fail with that distance, at the
 * perturbed position, and pass under a tolerance that covers it; a NaN
 * where the emulator has a number fails under any tolerance; bad input is
 * a usage error (2) or an error (1) with a message.
 */
#include "cli_run.h"

#include <math.h>
#include <string.h>

enum { T = 96, HQ = 2, HKV = 1, D = 64, NQ = T * HQ * D, NK = T * HKV * D };

/* x stepped by n ULPs away from zero (its bits plus n: the same binade
 * for the small n used here). */
static float step_ulps(float x, uint32_t n)
{
    uint32_t b;
    memcpy(&b, &x, 4);
    b += n;
    memcpy(&x, &b, 4);
    return x;
}

/* Read an .npy the program wrote, copy it, perturb element `at` with f,
 * and write it as `name`. */
static void perturbed(const char *from, const char *name, int64_t at, float value, int set_value, uint32_t ulps)
{
    npy_array a = {0};
    char err[512];
    if (npy_read(from, &a, err, sizeof err) != MXFA_OK) {
        diag("%s", err);
        return;
    }
    float *x = a.data;
    x[at] = set_value ? value : step_ulps(x[at], ulps);
    write_npy(path(name), NPY_F32, a.ndim, a.shape, x);
    npy_free(&a);
}

static int has(const char *text, const char *needle)
{
    if (strstr(text, needle))
        return 1;
    diag("'%s' not in: %s", needle, text);
    return 0;
}

int main(void)
{
    cli_start("t-cli-compare");
    static float q[NQ], k[NK], v[NK], dout[NQ];
    for (int i = 0; i < NQ; i++)
        q[i] = (float)gauss(), dout[i] = (float)gauss();
    for (int i = 0; i < NK; i++)
        k[i] = (float)gauss(), v[i] = (float)gauss();
    const int64_t qs[3] = {T, HQ, D}, ks[3] = {T, HKV, D};
    write_npy(path("q.npy"), NPY_F32, 3, qs, q);
    write_npy(path("k.npy"), NPY_F32, 3, ks, k);
    write_npy(path("v.npy"), NPY_F32, 3, ks, v);
    write_npy(path("do.npy"), NPY_F32, 3, qs, dout);
    char out[16384];

    /* the emulator's own outputs, from mxfa attn on the ref backend */
    const char *fw[] = {"attn", "--q", path("q.npy"), "--k", path("k.npy"), "--v", path("v.npy"), "--out", path("o.npy"),
                        "--lse", path("lse.npy"), "--causal", "--model", "sm90-fp8", "--cu-seqlens-q", "0,40,96",
                        "--cu-seqlens-k", "0,40,96", "--backend", "ref", NULL};
    ok(run(fw, NULL, 0) == 0, "mxfa attn writes the reference outputs (ref backend)");
    const char *bw[] = {"attn", "--backward", "--q", path("q.npy"), "--k", path("k.npy"), "--v", path("v.npy"), "--do",
                        path("do.npy"), "--dq", path("dq.npy"), "--dk", path("dk.npy"), "--dv", path("dv.npy"),
                        "--causal", "--model", "sm90-fp8", "--cu-seqlens-q", "0,40,96", "--cu-seqlens-k", "0,40,96",
                        "--backend", "ref", NULL};
    ok(run(bw, NULL, 0) == 0, "mxfa attn --backward writes the reference gradients");

#define FWD(O, ...)                                                                                                    \
    {"compare", "--q", path("q.npy"), "--k", path("k.npy"), "--v", path("v.npy"), "--out", O, "--causal", "--model",     \
     "sm90-fp8", "--cu-seqlens-q", "0,40,96", "--cu-seqlens-k", "0,40,96", __VA_ARGS__ NULL}
    {
        const char *a[] = FWD(path("o.npy"), "--lse", path("lse.npy"), );
        const int rc = run(a, out, sizeof out);
        ok(rc == 0 && has(out, "O: 12288 values, 12288 words identical (100.0000%)") &&
               has(out, "LSE: 192 values, 192 words identical") && has(out, "within the tolerance"),
           "the emulator's own O and LSE: bit-exact, exit 0 (%d)", rc);
        ok(has(out, "against the float64 truth, rel L2: candidate"), "each side's error against the float64 truth");
    }
    /* element (token 50, head 1, column 7) three ULPs off */
    const int64_t at = (50 * HQ + 1) * D + 7;
    perturbed(path("o.npy"), "o3.npy", at, 0, 0, 3);
    {
        const char *a[] = FWD(path("o3.npy"), );
        const int rc = run(a, out, sizeof out);
        ok(rc == 3 && has(out, "12287 words identical") && has(out, "ULPs: max 3, median 0") &&
               has(out, "(50, 1, 7):") && has(out, "3 ULPs") && has(out, "histogram: [0] 12287 [3-4] 1") && has(out, "OUTSIDE"),
           "O with one word 3 ULPs off: exit 3, the distance and the position (%d)", rc);
        const char *b[] = FWD(path("o3.npy"), "--max-ulp", "3", );
        ok(run(b, out, sizeof out) == 0 && has(out, "within the tolerance"), "the same under --max-ulp 3: exit 0");
        const char *c[] = FWD(path("o3.npy"), "--max-ulp", "2", );
        ok(run(c, out, sizeof out) == 3, "and under --max-ulp 2: exit 3");
    }
    perturbed(path("o.npy"), "onan.npy", 5, NAN, 1, 0);
    {
        const char *a[] = FWD(path("onan.npy"), "--max-ulp", "1000000", );
        const int rc = run(a, out, sizeof out);
        ok(rc == 3 && has(out, "1 NaN or Inf not matched") && has(out, "(0, 0, 5):") && has(out, "not matched"),
           "a NaN where the emulator has a number: exit 3 under any tolerance (%d)", rc);
    }
    /* backward */
#define BWD(DK, ...)                                                                                                   \
    {"compare", "--backward", "--q", path("q.npy"), "--k", path("k.npy"), "--v", path("v.npy"), "--do", path("do.npy"),  \
     "--dq", path("dq.npy"), "--dk", DK, "--dv", path("dv.npy"), "--causal", "--model", "sm90-fp8", "--cu-seqlens-q",    \
     "0,40,96", "--cu-seqlens-k", "0,40,96", __VA_ARGS__ NULL}
    {
        const char *a[] = BWD(path("dk.npy"), );
        const int rc = run(a, out, sizeof out);
        ok(rc == 0 && has(out, "dQ: 12288 values, 12288 words identical") && has(out, "dK: 6144 values, 6144 words") &&
               has(out, "dV: 6144 values, 6144 words"),
           "the emulator's own gradients: bit-exact, exit 0 (%d)", rc);
        perturbed(path("dk.npy"), "dk1.npy", (70 * HKV + 0) * D + 63, 0, 0, 1);
        const char *b[] = BWD(path("dk1.npy"), );
        const int rb = run(b, out, sizeof out);
        ok(rb == 3 && has(out, "dK: 6144 values, 6143 words identical") && has(out, "(70, 0, 63):") &&
               has(out, "1 ULPs"),
           "dK with one word 1 ULP off: exit 3, at its position (%d)", rb);
    }
    /* bad input */
    {
        const char *a[] = {"compare", "--q", path("q.npy"), "--k", path("k.npy"), "--v", path("v.npy"), NULL};
        expect_fail("no candidate output", 2, a, NULL);
        const char *b[] = FWD(path("dk.npy"), );
        expect_fail("a candidate O of another shape", 1, b, NULL);
        const char *c[] = FWD(path("o.npy"), "--max-ulp", "-1", );
        expect_fail("a negative tolerance", 2, c, NULL);
        const char *d[] = BWD(path("dk.npy"), "--o", path("o.npy"), );
        expect_fail("--o without --lse", 2, d, NULL);
    }
    cli_finish();
    return done_testing();
}
