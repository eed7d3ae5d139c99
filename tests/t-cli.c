/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The mxfa command-line program, run as a user would: the contract vectors
 * byte for byte through `mxfa quantize` under every preset, the round trip
 * through `mxfa dequantize` in both layouts, exit status 2 for usage errors
 * and 1 for other failures, and no output file (nor temporary file) left
 * behind by a failure; an existing output file survives a failed run.
 */
#include "cli_run.h"
#include "contract.h"

/* The row of `name` in a --compare-truth table: four "nan", no number
 * (and so neither an error of 0 nor an SQNR of inf). */
static int row_is_no_score(const char *table, const char *name)
{
    char head[16];
    snprintf(head, sizeof head, "\n%s ", name);
    const char *row = strstr(table, head);
    if (!row)
        return 0;
    char line[256];
    snprintf(line, sizeof line, "%.*s", (int)strcspn(row + 1, "\n"), row + 1);
    int nans = 0;
    for (const char *p = line; (p = strstr(p, "nan")); p += 3)
        nans++;
    return nans == 4 && !strpbrk(line + strlen(name), "0123456789") && !strstr(line, "inf");
}

/* --compare-truth where no error can be measured: Q, K and V times 1e30
 * overflow the float32 scores, so O is NaN where the float64 truth is
 * finite; all-NaN inputs leave nothing finite at all. Either way the run
 * is a report (exit 0, O written), its rows are nan, and warnings count
 * the values, which are counted here from the written O and the truth. */
static void check_compare_nonfinite(const float *q, const float *k, const float *v)
{
    enum { T = 70, H = 2, D = 64, N = T * H * D };
    static float bq[N], bk[N], bv[N];
    static double o64[N], l64[T * H];
    int64_t shp[3] = {T, H, D};
    for (int i = 0; i < N; i++)
        bq[i] = q[i] * 1e30f, bk[i] = k[i] * 1e30f, bv[i] = v[i] * 1e30f;
    write_npy(path("bigq.npy"), NPY_F32, 3, shp, bq);
    write_npy(path("bigk.npy"), NPY_F32, 3, shp, bk);
    write_npy(path("bigv.npy"), NPY_F32, 3, shp, bv);
    const char *a[] = {"attn", "--q", path("bigq.npy"), "--k", path("bigk.npy"), "--v", path("bigv.npy"), "--out",
                       path("bigo.npy"), "--compare-truth", NULL};
    char out[4096], err[512], want[128];
    int rc = run(a, out, sizeof out);
    npy_array o = {0};
    mxfa_ctx *ctx = NULL;
    mxfa_attn_params p;
    mxfa_attn_params_default(&p);
    mxfa_tensor Q = {bq, MXFA_F32, MXFA_MEM_HOST, 3, {T, H, D}, {0}}, K = Q, V = Q;
    K.data = bk, V.data = bv;
    mxfa_tensor O64 = {o64, MXFA_F64, MXFA_MEM_HOST, 3, {T, H, D}, {0}};
    mxfa_tensor L64 = {l64, MXFA_F64, MXFA_MEM_HOST, 2, {T, H}, {0}};
    long long differ = -1;
    if (rc == 0 && npy_read(path("bigo.npy"), &o, err, sizeof err) == MXFA_OK && o.count == N &&
        mxfa_open(&ctx, "ref") == MXFA_OK && mxfa_attn_fwd_f64(ctx, &p, &Q, &K, &V, NULL, NULL, 1, &O64, &L64) == MXFA_OK) {
        differ = 0;
        for (int i = 0; i < N; i++) {
            double x = ((const float *)o.data)[i], t = o64[i];
            differ += (!isfinite(x) || !isfinite(t)) && x != t && !(isnan(x) && isnan(t));
        }
    }
    snprintf(want, sizeof want, "warning: %lld of %d values of O differ from the float64 truth", differ, N);
    if (!ok(rc == 0 && differ > 0 && strstr(errtext, want) && strstr(errtext, "values of LSE differ") &&
                row_is_no_score(out, "O") && row_is_no_score(out, "LSE"),
            "attn --compare-truth, inputs x1e30: exit 0, O and LSE rows nan (no 0, no inf), "
            "a warning that %lld of %d values of O are NaN/Inf where the truth is not", differ, N))
        diag("exit %d, stdout:\n%s\nstderr: %s", rc, out, errtext);
    npy_free(&o);
    mxfa_close(ctx);
    const char *g[] = {"attn", "--backward", "--q", path("bigq.npy"), "--k", path("bigk.npy"), "--v", path("bigv.npy"),
                       "--do", path("bigk.npy"), "--dq", path("bdq.npy"), "--dk", path("bdk.npy"), "--dv", path("bdv.npy"),
                       "--compare-truth", NULL};
    rc = run(g, out, sizeof out);
    if (!ok(rc == 0 && strstr(errtext, "values of dQ differ from the float64 truth") &&
                strstr(errtext, "values of dV differ from the float64 truth") && row_is_no_score(out, "dQ") &&
                row_is_no_score(out, "dK") && row_is_no_score(out, "dV"),
            "attn --backward --compare-truth, inputs x1e30: exit 0, nan rows and a warning for each gradient"))
        diag("exit %d, stdout:\n%s\nstderr: %s", rc, out, errtext);

    for (int i = 0; i < N; i++)
        bq[i] = NAN;
    write_npy(path("nanq.npy"), NPY_F32, 3, shp, bq);
    const char *b[] = {"attn", "--q", path("nanq.npy"), "--k", path("bigk.npy"), "--v", path("bigv.npy"), "--out",
                       path("nano.npy"), "--compare-truth", NULL};
    rc = run(b, out, sizeof out);
    snprintf(want, sizeof want, "warning: Q holds %d NaN/Inf values of %d", N, N);
    if (!ok(rc == 0 && exists(path("nano.npy")) && strstr(errtext, want) &&
                strstr(errtext, "warning: no value of O is finite") && row_is_no_score(out, "O"),
            "attn --compare-truth, an all-NaN Q: exit 0, a warning that Q holds %d NaN/Inf values and that "
            "nothing finite is left to measure, nan rows", N))
        diag("exit %d, stdout:\n%s\nstderr: %s", rc, out, errtext);
}

int main(void)
{
    cli_start("t-cli");

    /* the contract vectors, one per row of a [n, 32] matrix */
    contract_vec v[64];
    int nv = contract_load(v, 64);
    ok(nv >= 15, "read %d contract vectors", nv);
    float *x = malloc((size_t)nv * 32 * sizeof *x);
    for (int i = 0; i < nv; i++)
        for (int j = 0; j < 32; j++)
            x[i * 32 + j] = f32_of(j == 0 ? v[i].first : v[i].rest);
    int64_t shape[2] = {nv, 32};
    write_npy(path("in.npy"), NPY_F32, 2, shape, x);
    for (int p = 0; p < 4; p++) {
        const char *args[] = {"quantize", path("in.npy"), "--data", path("d.npy"), "--scales", path("s.npy"),
                              "--preset", mxfa_preset_name((mxfa_preset)p), NULL};
        int rc = run(args, NULL, 0);
        npy_array d = {0}, s = {0};
        char err[512];
        int good = rc == 0 && npy_read(path("d.npy"), &d, err, sizeof err) == MXFA_OK &&
                   npy_read(path("s.npy"), &s, err, sizeof err) == MXFA_OK && d.dtype == NPY_U8 && s.dtype == NPY_U8 &&
                   d.ndim == 2 && d.shape[0] == nv && d.shape[1] == 32 && s.ndim == 2 && s.shape[0] == nv &&
                   s.shape[1] == 1;
        for (int i = 0; good && i < nv; i++) {
            const uint8_t *dd = (const uint8_t *)d.data + i * 32;
            good = ((const uint8_t *)s.data)[i] == v[i].scale[p] && dd[0] == v[i].elem0[p];
            for (int j = 1; j < 32; j++)
                good = good && dd[j] == v[i].elem_rest[p];
            if (!good)
                diag("vector %s: got scale 0x%02X element 0x%02X", v[i].name, ((const uint8_t *)s.data)[i], dd[0]);
        }
        if (!ok(good, "mxfa quantize --preset %s reproduces all %d contract vectors byte for byte",
                mxfa_preset_name((mxfa_preset)p), nv))
            diag("exit %d: %s", rc, errtext);
        npy_free(&d);
        npy_free(&s);
    }

    /* round trip through both layouts, for row and col blocks */
    for (int b = 0; b < 2; b++) {
        float y[64 * 40];
        for (int i = 0; i < 64 * 40; i++)
            y[i] = (float)ldexp((double)(int32_t)rng_next(), (int)rng_below(20) - 40);
        int64_t ys[2] = {64, 40};
        write_npy(path("y.npy"), NPY_F32, 2, ys, y);
        const char *block = b ? "col" : "row";
        const char *q1[] = {"quantize", path("y.npy"), "--data", path("yd.npy"), "--scales", path("ys.npy"), "--block",
                            block, "--format", "e5m2", NULL};
        const char *q2[] = {"quantize", path("y.npy"), "--data", path("yd2.npy"), "--scales", path("ysw.npy"), "--block",
                            block, "--format", "e5m2", "--layout", "swizzled", NULL};
        const char *d1[] = {"dequantize", "--data", path("yd.npy"), "--scales", path("ys.npy"), "--out", path("o1.npy"),
                            "--block", block, "--format", "e5m2", NULL};
        const char *d2[] = {"dequantize", "--data", path("yd2.npy"), "--scales", path("ysw.npy"), "--out",
                            path("o2.npy"), "--block", block, "--format", "e5m2", "--layout", "swizzled", NULL};
        npy_array o1 = {0}, o2 = {0}, sw = {0};
        char err[512];
        int good = run(q1, NULL, 0) == 0 && run(q2, NULL, 0) == 0 && run(d1, NULL, 0) == 0 && run(d2, NULL, 0) == 0 &&
                   npy_read(path("o1.npy"), &o1, err, sizeof err) == MXFA_OK &&
                   npy_read(path("o2.npy"), &o2, err, sizeof err) == MXFA_OK &&
                   npy_read(path("ysw.npy"), &sw, err, sizeof err) == MXFA_OK && o1.count == 64 * 40 &&
                   o2.count == 64 * 40 && memcmp(o1.data, o2.data, sizeof y) == 0 && sw.shape[0] == 128 &&
                   sw.shape[1] == (b ? 4 : 4);
        /* the dequantized values are within one E5M2 step (2^-2 relative) of the input */
        for (int i = 0; good && i < 64 * 40; i++) {
            float got = ((const float *)o1.data)[i];
            good = fabs((double)got - y[i]) <= fabs((double)y[i]) * 0.125 + 1e-30;
        }
        if (!ok(good, "%s blocks: quantize + dequantize round trip, compact and swizzled layouts agree", block))
            diag("%s", errtext);
        npy_free(&o1);
        npy_free(&o2);
        npy_free(&sw);
    }

    /* mxfa gemm on quantized files equals mxfa_gemm, byte for byte, per model */
    {
        enum { GM = 20, GN = 12, GK = 70 };
        float xa[GM * GK], xb[GN * GK], xc[GM * GN];
        for (int i = 0; i < GM * GK; i++)
            xa[i] = (float)ldexp((double)(int32_t)rng_next(), (int)rng_below(12) - 36);
        for (int i = 0; i < GN * GK; i++)
            xb[i] = (float)ldexp((double)(int32_t)rng_next(), (int)rng_below(12) - 36);
        for (int i = 0; i < GM * GN; i++)
            xc[i] = (float)ldexp((double)(int32_t)rng_next(), -30);
        int64_t sa_[2] = {GM, GK}, sb_[2] = {GN, GK}, sc_[2] = {GM, GN};
        write_npy(path("ga.npy"), NPY_F32, 2, sa_, xa);
        write_npy(path("gb.npy"), NPY_F32, 2, sb_, xb);
        write_npy(path("gc.npy"), NPY_F32, 2, sc_, xc);
        const char *qa[] = {"quantize", path("ga.npy"), "--data", path("qa.npy"), "--scales", path("qsa.npy"), NULL};
        const char *qb[] = {"quantize", path("gb.npy"), "--data", path("qb.npy"), "--scales", path("qsb.npy"),
                            "--format", "e5m2", NULL};
        int good = run(qa, NULL, 0) == 0 && run(qb, NULL, 0) == 0;
        npy_array A = {0}, SA = {0}, B = {0}, SB = {0};
        char err[512];
        good = good && npy_read(path("qa.npy"), &A, err, sizeof err) == MXFA_OK &&
               npy_read(path("qsa.npy"), &SA, err, sizeof err) == MXFA_OK &&
               npy_read(path("qb.npy"), &B, err, sizeof err) == MXFA_OK &&
               npy_read(path("qsb.npy"), &SB, err, sizeof err) == MXFA_OK;
        mxfa_ctx *ctx = NULL;
        good = good && mxfa_open(&ctx, "ref") == MXFA_OK;
        for (int m = 0; good && m < 4; m++) {
            const char *g[] = {"gemm", "--a", path("qa.npy"), "--a-scales", path("qsa.npy"), "--b", path("qb.npy"),
                               "--b-scales", path("qsb.npy"), "--format-b", "e5m2", "--c", path("gc.npy"), "--model",
                               mxfa_model_name((mxfa_model)m), "--out", path("gd.npy"), NULL};
            float want[GM * GN];
            mxfa_mx am = {mxfa_tensor_2d(A.data, MXFA_E4M3, GM, GK), mxfa_tensor_2d(SA.data, MXFA_E8M0, GM, 3),
                          MXFA_BLOCK_ROW, MXFA_LAYOUT_COMPACT};
            mxfa_mx bm = {mxfa_tensor_2d(B.data, MXFA_E5M2, GN, GK), mxfa_tensor_2d(SB.data, MXFA_E8M0, GN, 3),
                          MXFA_BLOCK_ROW, MXFA_LAYOUT_COMPACT};
            mxfa_tensor ct = mxfa_tensor_2d(xc, MXFA_F32, GM, GN), wt = mxfa_tensor_2d(want, MXFA_F32, GM, GN);
            npy_array D = {0};
            int same = run(g, NULL, 0) == 0 && mxfa_gemm(ctx, &am, &bm, &ct, (mxfa_model)m, &wt) == MXFA_OK &&
                       npy_read(path("gd.npy"), &D, err, sizeof err) == MXFA_OK && D.count == GM * GN &&
                       memcmp(D.data, want, sizeof want) == 0;
            if (!ok(same, "mxfa gemm --model %s equals mxfa_gemm on the same files", mxfa_model_name((mxfa_model)m)))
                diag("%s", errtext);
            npy_free(&D);
        }
        mxfa_close(ctx);
        npy_free(&A);
        npy_free(&SA);
        npy_free(&B);
        npy_free(&SB);
        const char *g1[] = {"gemm", "--a", path("qa.npy"), "--a-scales", path("qsa.npy"), "--b", path("qb.npy"),
                            "--b-scales", path("qsb.npy"), "--out", path("gx.npy"), NULL};
        const char *g2[] = {"gemm", "--a", path("qa.npy"), "--a-scales", path("qsa.npy"), "--b", path("qa.npy"),
                            "--b-scales", path("qsb.npy"), "--model", "ideal", "--out", path("gx.npy"), NULL};
        const char *g3[] = {"gemm", "--a", path("qa.npy"), "--a-scales", path("qsa.npy"), "--b", path("gb.npy"),
                            "--b-scales", path("qsb.npy"), "--model", "ideal", "--out", path("gx.npy"), NULL};
        const char *g4[] = {"gemm", "--a", path("qa.npy"), "--a-scales", path("qsa.npy"), "--b", path("qb.npy"),
                            "--b-scales", path("qsb.npy"), "--model", "sm95", "--out", path("gx.npy"), NULL};
        expect_fail("gemm without --model", 2, g1, path("gx.npy"));
        expect_fail("gemm with B's scales not matching B", 1, g2, path("gx.npy"));
        expect_fail("gemm with a float32 B", 1, g3, path("gx.npy"));
        expect_fail("gemm with an unknown model", 2, g4, path("gx.npy"));
    }

    /* mxfa attn equals mxfa_attn_fwd on the same files; --compare-truth prints the metrics */
    {
        enum { AT = 70, AH = 2, AD = 64 };
        static float aq[AT * AH * AD], ak[AT * AH * AD], av[AT * AH * AD], want[AT * AH * AD], wl[AT * AH];
        for (int i = 0; i < AT * AH * AD; i++) {
            aq[i] = (float)ldexp((double)(int32_t)rng_next(), -31);
            ak[i] = (float)ldexp((double)(int32_t)rng_next(), -31);
            av[i] = (float)ldexp((double)(int32_t)rng_next(), -31);
        }
        int64_t shp[3] = {AT, AH, AD};
        write_npy(path("aq.npy"), NPY_F32, 3, shp, aq);
        write_npy(path("ak.npy"), NPY_F32, 3, shp, ak);
        write_npy(path("av.npy"), NPY_F32, 3, shp, av);
        const char *a1[] = {"attn", "--q", path("aq.npy"), "--k", path("ak.npy"), "--v", path("av.npy"), "--out",
                            path("ao.npy"), "--lse", path("al.npy"), "--causal", "--model", "sm90-fp8",
                            "--cu-seqlens-q", "0,30,70", "--cu-seqlens-k", "0,40,70", "--compare-truth", NULL};
        char out[4096];
        int rc = run(a1, out, sizeof out);
        mxfa_ctx *ctx = NULL;
        mxfa_attn_params p;
        mxfa_attn_params_default(&p);
        p.causal = MXFA_CAUSAL;
        p.model = MXFA_MODEL_SM90_FP8;
        int32_t cq[3] = {0, 30, 70}, ck[3] = {0, 40, 70};
        mxfa_tensor Q = {aq, MXFA_F32, MXFA_MEM_HOST, 3, {AT, AH, AD}, {0}}, K = Q, V = Q;
        K.data = ak;
        V.data = av;
        mxfa_tensor O = {want, MXFA_F32, MXFA_MEM_HOST, 3, {AT, AH, AD}, {0}};
        mxfa_tensor L = {wl, MXFA_F32, MXFA_MEM_HOST, 2, {AT, AH}, {0}};
        npy_array o = {0}, l = {0};
        char err[512];
        int good = rc == 0 && mxfa_open(&ctx, "ref") == MXFA_OK &&
                   mxfa_attn_fwd(ctx, &p, &Q, &K, &V, cq, ck, 2, &O, &L) == MXFA_OK &&
                   npy_read(path("ao.npy"), &o, err, sizeof err) == MXFA_OK &&
                   npy_read(path("al.npy"), &l, err, sizeof err) == MXFA_OK && o.ndim == 3 && o.count == AT * AH * AD &&
                   l.ndim == 2 && l.count == AT * AH && memcmp(o.data, want, sizeof want) == 0 &&
                   memcmp(l.data, wl, sizeof wl) == 0;
        if (!ok(good, "mxfa attn (jagged, causal, sm90-fp8) writes the bits of mxfa_attn_fwd"))
            diag("exit %d: %s", rc, errtext);
        ok(rc == 0 && strstr(out, "rel L2") && strstr(out, "SQNR") && strstr(out, "LSE") &&
               strstr(out, "against the float64 truth") && !strstr(out, "nan") && !errtext[0],
           "mxfa attn --compare-truth prints the error metrics of O and LSE against the truth, no warning");
        {
            char old_name[4096];
            a1[sizeof a1 / sizeof a1[0] - 2] = "--compare-ideal"; /* in place of the last option */
            ok(run(a1, old_name, sizeof old_name) == 0 && !strcmp(old_name, out),
               "--compare-ideal, its older name, prints the same table");
        }
        check_compare_nonfinite(aq, ak, av);
        npy_free(&o);
        npy_free(&l);
        mxfa_close(ctx);
        /* the backward pass: recomputed O and LSE, or the forward's files, give the same bits as mxfa_attn_bwd */
        {
            static float ado[AT * AH * AD], gq[AT * AH * AD], gk[AT * AH * AD], gv[AT * AH * AD];
            for (int i = 0; i < AT * AH * AD; i++)
                ado[i] = (float)ldexp((double)(int32_t)rng_next(), -31);
            write_npy(path("ado.npy"), NPY_F32, 3, shp, ado);
            const char *b1[] = {"attn", "--backward", "--q", path("aq.npy"), "--k", path("ak.npy"), "--v",
                                path("av.npy"), "--do", path("ado.npy"), "--dq", path("bq.npy"), "--dk", path("bk.npy"),
                                "--dv", path("bv.npy"), "--causal", "--model", "sm90-fp8", "--cu-seqlens-q", "0,30,70",
                                "--cu-seqlens-k", "0,40,70", NULL};
            const char *b2[] = {"attn", "--backward", "--q", path("aq.npy"), "--k", path("ak.npy"), "--v",
                                path("av.npy"), "--do", path("ado.npy"), "--o", path("ao.npy"), "--lse", path("al.npy"),
                                "--dq", path("cq.npy"), "--dk", path("ck.npy"), "--dv", path("cv.npy"), "--causal",
                                "--model", "sm90-fp8", "--cu-seqlens-q", "0,30,70", "--cu-seqlens-k", "0,40,70", NULL};
            mxfa_tensor DO = {ado, MXFA_F32, MXFA_MEM_HOST, 3, {AT, AH, AD}, {0}};
            mxfa_tensor GQ = DO, GK = DO, GV = DO;
            GQ.data = gq, GK.data = gk, GV.data = gv;
            mxfa_ctx *c2 = NULL;
            int same = run(b1, NULL, 0) == 0 && run(b2, NULL, 0) == 0 && mxfa_open(&c2, "ref") == MXFA_OK &&
                       mxfa_attn_bwd(c2, &p, &Q, &K, &V, &O, &DO, &L, cq, ck, 2, &GQ, &GK, &GV) == MXFA_OK;
            const char *files[6] = {"bq.npy", "bk.npy", "bv.npy", "cq.npy", "ck.npy", "cv.npy"};
            const float *want3[3] = {gq, gk, gv};
            for (int f = 0; f < 6 && same; f++) {
                npy_array g = {0};
                same = npy_read(path(files[f]), &g, err, sizeof err) == MXFA_OK && g.count == AT * AH * AD &&
                       memcmp(g.data, want3[f % 3], sizeof gq) == 0;
                npy_free(&g);
            }
            if (!ok(same, "mxfa attn --backward writes the bits of mxfa_attn_bwd, with O and LSE recomputed or read"))
                diag("%s", errtext);
            mxfa_close(c2);
            const char *b3[] = {"attn", "--backward", "--q", path("aq.npy"), "--k", path("ak.npy"), "--v",
                                path("av.npy"), "--do", path("ado.npy"), "--dq", path("x1.npy"), "--dk", path("x2.npy"),
                                NULL};
            const char *b4[] = {"attn", "--backward", "--q", path("aq.npy"), "--k", path("ak.npy"), "--v",
                                path("av.npy"), "--do", path("ado.npy"), "--o", path("ao.npy"), "--dq", path("x1.npy"),
                                "--dk", path("x2.npy"), "--dv", path("x3.npy"), NULL};
            const char *b5[] = {"attn", "--backward", "--q", path("aq.npy"), "--k", path("ak.npy"), "--v",
                                path("av.npy"), "--do", path("ga.npy"), "--dq", path("x1.npy"), "--dk", path("x2.npy"),
                                "--dv", path("x3.npy"), NULL};
            const char *b6[] = {"attn", "--backward", "--q", path("aq.npy"), "--k", path("ak.npy"), "--v",
                                path("av.npy"), "--do", path("ado.npy"), "--dq", path("x1.npy"), "--dk", path("x2.npy"),
                                "--dv", path("nodir/x3.npy"), NULL};
            expect_fail("attn --backward without --dv", 2, b3, path("x1.npy"));
            expect_fail("attn --backward with --o but no --lse", 2, b4, path("x1.npy"));
            expect_fail("attn --backward with dO of the wrong shape", 1, b5, path("x1.npy"));
            expect_fail("attn --backward with an unwritable dV: dQ and dK are not left either", 1, b6, path("x1.npy"));
            ok(access(path("x2.npy"), F_OK) != 0, "... and no dK file either");
        }
        const char *e1[] = {"attn", "--q", path("aq.npy"), "--k", path("ak.npy"), "--v", path("av.npy"), NULL};
        const char *e2[] = {"attn", "--q", path("aq.npy"), "--k", path("ak.npy"), "--v", path("av.npy"), "--out",
                            path("ax.npy"), "--cu-seqlens-q", "0,30,71", "--cu-seqlens-k", "0,40,70", NULL};
        const char *e3[] = {"attn", "--q", path("ga.npy"), "--k", path("ak.npy"), "--v", path("av.npy"), "--out",
                            path("ax.npy"), NULL};
        const char *e4[] = {"attn", "--q", path("aq.npy"), "--k", path("ak.npy"), "--v", path("av.npy"), "--out",
                            path("ax.npy"), "--cu-seqlens-q", "0,x", "--cu-seqlens-k", "0,70", NULL};
        const char *e5[] = {"attn", "--q", path("aq.npy"), "--k", path("ak.npy"), "--v", path("av.npy"), "--out",
                            path("ax.npy"), "--lse", path("nodir/al.npy"), NULL};
        expect_fail("attn without --out", 2, e1, NULL);
        expect_fail("attn with cu_seqlens that do not match Q", 1, e2, path("ax.npy"));
        expect_fail("attn with a 2-D Q", 1, e3, path("ax.npy"));
        expect_fail("attn with a malformed offset list", 2, e4, path("ax.npy"));
        expect_fail("attn with an unwritable LSE: O is not left either", 1, e5, path("ax.npy"));
    }

    /* usage errors: exit 2 */
    const char *u1[] = {NULL};
    const char *u2[] = {"frobnicate", NULL};
    const char *u3[] = {"quantize", path("in.npy"), "--data", path("u.npy"), NULL};
    const char *u4[] = {"quantize", path("in.npy"), "--data", path("u.npy"), "--scales", path("u2.npy"), "--preset", "nearest", NULL};
    const char *u5[] = {"quantize", path("in.npy"), "--data", path("u.npy"), "--scales", path("u2.npy"), "--bogus", NULL};
    const char *u6[] = {"quantize", path("in.npy"), "--data", path("u.npy"), "--scales", path("u2.npy"), "--block", "square", "--layout", "swizzled", NULL};
    const char *u7[] = {"quantize", path("in.npy"), "--data", path("u.npy"), "--scales", path("u.npy"), NULL};
    const char *u8[] = {"quantize", path("in.npy"), "--data", path("u.npy"), "--scales", path("u2.npy"), "--backend", "gpu9", NULL};
    const char *u9[] = {"quantize", path("in.npy"), "--data", NULL};
    expect_fail("no command", 2, u1, NULL);
    expect_fail("an unknown command", 2, u2, NULL);
    expect_fail("quantize without --scales", 2, u3, path("u.npy"));
    expect_fail("an unknown preset", 2, u4, path("u.npy"));
    expect_fail("an unknown option", 2, u5, path("u.npy"));
    expect_fail("swizzled square scales", 2, u6, path("u.npy"));
    expect_fail("--data and --scales the same file", 2, u7, path("u.npy"));
    expect_fail("an unknown backend", 2, u8, path("u.npy"));
    expect_fail("an option without its value", 2, u9, NULL);

    /* failures: exit 1, nothing written */
    float three[8] = {0};
    int64_t s3[3] = {2, 2, 2};
    write_npy(path("3d.npy"), NPY_F32, 3, s3, three);
    uint8_t bytes[64] = {0};
    int64_t s2[2] = {2, 32};
    write_npy(path("u8.npy"), NPY_U8, 2, s2, bytes);
    {
        /* a truncated copy of in.npy */
        FILE *f = fopen(path("in.npy"), "rb");
        uint8_t buf[4096];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        write_raw(path("trunc.npy"), buf, n - 5);
        write_raw(path("lying.npy"), "\x93NUMPY\x01\x00\xff\xff{'descr'", 18);
    }
    const char *cuda_needed = mxfa_backend_usable("cuda", NULL, 0) ? NULL : "cuda";
    const char *f1[] = {"quantize", path("missing.npy"), "--data", path("f.npy"), "--scales", path("f2.npy"), NULL};
    const char *f2[] = {"quantize", path("3d.npy"), "--data", path("f.npy"), "--scales", path("f2.npy"), NULL};
    const char *f3[] = {"quantize", path("u8.npy"), "--data", path("f.npy"), "--scales", path("f2.npy"), NULL};
    const char *f4[] = {"quantize", path("trunc.npy"), "--data", path("f.npy"), "--scales", path("f2.npy"), NULL};
    const char *f5[] = {"quantize", path("lying.npy"), "--data", path("f.npy"), "--scales", path("f2.npy"), NULL};
    const char *f6[] = {"quantize", path("in.npy"), "--data", path("f.npy"), "--scales", path("nodir/f2.npy"), NULL};
    const char *f7[] = {"dequantize", "--data", path("u8.npy"), "--scales", path("u8.npy"), "--out", path("f.npy"), NULL};
    const char *f8[] = {"quantize", path("in.npy"), "--data", path("f.npy"), "--scales", path("f2.npy"), "--backend", "cuda", NULL};
    expect_fail("a missing input", 1, f1, path("f.npy"));
    expect_fail("a 3-D input", 1, f2, path("f.npy"));
    expect_fail("a uint8 input", 1, f3, path("f.npy"));
    expect_fail("a truncated input", 1, f4, path("f.npy"));
    expect_fail("a header length that lies", 1, f5, path("f.npy"));
    expect_fail("an unwritable second output: the first is not left either", 1, f6, path("f.npy"));
    expect_fail("dequantize with scales of the wrong shape", 1, f7, path("f.npy"));
    if (cuda_needed)
        expect_fail("--backend cuda where it is not usable (no fallback)", 1, f8, path("f.npy"));

    /* hostile .npy files through every command that reads one */
    {
        static const struct {
            const char *name, *header;
            size_t payload;
        } hostile[] = {
            {"h-huge.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000), }", 64},
            {"h-negative.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 64), }", 256},
            {"h-overflow.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 0},
            {"h-bigendian.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 64), }", 512},
            {"h-complex.npy", "{'descr': '<c8', 'fortran_order': False, 'shape': (2, 32), }", 512},
            {"h-short.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 64), }", 511},
            {"h-garbage.npy", "{'descr': '<f4', 'fortran_order': Fals", 0},
        };
        uint8_t buf[1024];
        for (size_t i = 0; i < sizeof hostile / sizeof *hostile; i++) {
            size_t hl = strlen(hostile[i].header), n = 10 + hl + 1;
            memcpy(buf, "\x93NUMPY\x01\x00", 8);
            buf[8] = (uint8_t)(hl + 1), buf[9] = 0;
            memcpy(buf + 10, hostile[i].header, hl);
            buf[10 + hl] = '\n';
            memset(buf + n, 0x3F, hostile[i].payload);
            write_raw(path(hostile[i].name), buf, n + hostile[i].payload);
        }
        write_raw(path("h-empty.npy"), "", 0);
        const char *files[] = {"h-huge.npy", "h-negative.npy", "h-overflow.npy", "h-bigendian.npy", "h-complex.npy",
                               "h-short.npy", "h-garbage.npy", "h-empty.npy", "trunc.npy", "lying.npy"};
        int clean_runs = 0, runs = 0;
        for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
            char h[1100];
            snprintf(h, sizeof h, "%s", path(files[i]));
            const char *q[] = {"quantize", h, "--data", path("hx.npy"), "--scales", path("hs.npy"), NULL};
            const char *d[] = {"dequantize", "--data", h, "--scales", path("qsa.npy"), "--out", path("hx.npy"), NULL};
            const char *g[] = {"gemm", "--a", path("qa.npy"), "--a-scales", h, "--b", path("qb.npy"), "--b-scales",
                               path("qsb.npy"), "--model", "ideal", "--out", path("hx.npy"), NULL};
            const char *a[] = {"attn", "--q", path("aq.npy"), "--k", h, "--v", path("av.npy"), "--out",
                               path("hx.npy"), NULL};
            const char *const *cmds[] = {q, d, g, a};
            for (int c = 0; c < 4; c++) {
                int rc = run(cmds[c], NULL, 0);
                int good = rc == 1 && errtext[0] && !exists(path("hx.npy")) && !exists(path("hs.npy")) &&
                           no_temporaries();
                runs++;
                clean_runs += good;
                if (!good)
                    diag("mxfa %s with %s: exit %d, stderr '%s'", cmds[c][0], files[i], rc, errtext);
            }
        }
        ok(clean_runs == runs,
           "%d runs of quantize, dequantize, gemm and attn on 10 hostile .npy files (truncated, lying lengths, huge, "
           "negative and overflowing shapes, big-endian, complex, empty): exit 1, a message, no file left",
           runs);
    }

    /* an existing output survives a failed run */
    write_raw(path("keep.npy"), "old", 3);
    const char *k1[] = {"quantize", path("trunc.npy"), "--data", path("keep.npy"), "--scales", path("f2.npy"), NULL};
    run(k1, NULL, 0);
    {
        FILE *f = fopen(path("keep.npy"), "rb");
        char buf[8] = "";
        size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
        if (f)
            fclose(f);
        ok(n == 3 && memcmp(buf, "old", 3) == 0, "an existing output file is untouched by a failed run");
    }

    /* info, help, version */
    char out[4096];
    const char *i1[] = {"info", NULL};
    const char *i2[] = {"--version", NULL};
    const char *i3[] = {"quantize", "--help", NULL};
    ok(run(i1, out, sizeof out) == 0 && strstr(out, "ref") && strstr(out, "cpu features"), "mxfa info lists backends and CPU features");
    ok(run(i2, out, sizeof out) == 0 && strstr(out, mxfa_version()), "mxfa --version prints %s", mxfa_version());
    ok(run(i3, out, sizeof out) == 0 && strstr(out, "--preset"), "mxfa quantize --help describes the options");

    /* selftest: its comparisons on the cpu backend; on cuda, the skip status
     * 77 wherever there is no Blackwell GPU (every machine of the suite) */
    const char *st1[] = {"selftest", "--backend", "cpu", "--cases", "6", NULL};
    const char *st2[] = {"selftest", NULL};
    const char *st3[] = {"selftest", "--cases", "0", NULL};
    const char *st4[] = {"selftest", "--backend", "ref", NULL};
    if (!ok(run(st1, out, sizeof out) == 0 && strstr(out, "gemm (") && strstr(out, "attention forward (") &&
                !strstr(out, "differs") && strstr(out, "kernels agree with the emulator bit for bit"),
            "mxfa selftest --backend cpu: the sm100 comparisons run and agree"))
        diag("%s", out);
    int st = run(st2, out, sizeof out);
    char why[256];
    int blackwell = 0;
    mxfa_ctx *gctx;
    if (mxfa_backend_usable("cuda", why, sizeof why) && mxfa_open(&gctx, "cuda") == MXFA_OK) {
        int arch = 0;
        blackwell = mxfa_device_info(gctx, &arch, NULL, 0) == MXFA_OK && arch == 100;
        mxfa_close(gctx);
    }
    if (blackwell) {
        if (!ok(st == 0, "mxfa selftest on a Blackwell GPU: every kernel agrees (exit %d)", st))
            diag("%s", out);
    } else {
        ok(st == 77 && strstr(out, "nothing to check here"), "mxfa selftest without a Blackwell GPU says so and exits 77 "
           "(got %d)", st);
    }
    ok(run(st3, out, sizeof out) == 2 && strstr(errtext, "--cases"), "mxfa selftest --cases 0: exit 2 and a message");
    ok(run(st4, out, sizeof out) == 2 && strstr(errtext, "--backend"), "mxfa selftest --backend ref: exit 2 and a message");
    /* the time limit on device calls: a test kernel that spins past it must be reported as a hang (exit 3)
     * on any GPU of the cuda backend; without one there is nothing to run it on (77) */
    const char *st5[] = {"selftest", "--stall-test", "--timeout", "1", NULL};
    const char *st6[] = {"selftest", "--timeout", "soon", NULL};
    const char *st7[] = {"selftest", "--stall-test", "--backend", "cpu", NULL};
    st = run(st5, out, sizeof out);
    if (mxfa_backend_usable("cuda", why, sizeof why)) {
        if (!ok(st == 3 && strstr(errtext, "HANG") && strstr(errtext, "stall test kernel"),
                "mxfa selftest --stall-test --timeout 1 on this GPU: the spinning kernel is reported as a hang, exit 3 "
                "(got %d)", st))
            diag("%s%s", out, errtext);
    } else {
        ok(st == 77 && strstr(out, "nothing to check here"),
           "mxfa selftest --stall-test without a GPU says so and exits 77 (got %d)", st);
    }
    ok(run(st6, out, sizeof out) == 2 && strstr(errtext, "--timeout"), "mxfa selftest --timeout soon: exit 2 and a message");
    ok(run(st7, out, sizeof out) == 2 && strstr(errtext, "--stall-test"),
       "mxfa selftest --stall-test --backend cpu: exit 2 and a message");

    cli_finish();
    free(x);
    return done_testing();
}
