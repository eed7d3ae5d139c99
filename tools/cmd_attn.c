/* SPDX-License-Identifier: BSD-3-Clause */
/* mxfa attn: MXFP8 attention forward on .npy files, with the error against
 * the float64 truth on request. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "outset.h"

static const char attn_help[] =
    "usage: mxfa attn --q Q.npy --k K.npy --v V.npy --out O.npy [options]\n"
    "       mxfa attn --backward --q Q.npy --k K.npy --v V.npy --do dO.npy\n"
    "                 --dq dQ.npy --dk dK.npy --dv dV.npy [--o O.npy --lse LSE.npy] [options]\n"
    "\n"
    "MXFP8 attention forward (docs/NUMERICS.md section 6). Q is float32\n"
    "[tokens_q, Hq, D], K and V float32 [tokens_k, Hkv, D]; Hq a multiple of Hkv;\n"
    "D = 64, 128 or 256. O is written as [tokens_q, Hq, D].\n"
    "  --lse FILE              forward: also write LSE, float32 [tokens_q, Hq];\n"
    "                          backward: read it (with --o; both are recomputed when not given)\n"
    "  --backward              gradients dQ, dK, dV of sum(O * dO) (docs/NUMERICS.md section 7)\n"
    "  --cu-seqlens-q LIST|FILE, --cu-seqlens-k LIST|FILE\n"
    "                          jagged batch: token offsets \"0,37,100\" or an int32/int64 .npy\n"
    "  --causal                causal, bottom-right aligned, leak-free\n"
    "  --causal-plain          causal with V scaled across the diagonal (leaks; for studies)\n"
    "  --model ideal|sm100|sm90-fp8|sm90-bf16           (default sm100)\n"
    "  --preset rceil|ocp|torchao-rceil|microxcaling    (default rceil)\n"
    "  --p-scale const|dynamic                          (default const)\n"
    "  --scale X               softmax scale (default D^-1/2)\n"
    "  --block-m N, --block-n N  tile sizes, multiples of 32 (default 128)\n"
    "  --out-dtype f32|bf16    O's precision before it is written as float32 (default f32)\n"
    "  --compare-truth         print the error of the outputs against the float64 truth\n"
    "                          (warns of NaN/Inf; --compare-ideal is its older name)\n"
    "  --backend auto|ref|cpu|cuda                      (default auto)\n";

enum { OPT_CMP = CLI_ATTN_END };

static const struct option options[] = {
    CLI_ATTN_OPTIONS,
    {"compare-truth", no_argument, NULL, OPT_CMP},
    {"compare-ideal", no_argument, NULL, OPT_CMP}, /* the older name of --compare-truth */
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* The --compare-truth table: its header, and one row per output. */
static void metrics_header(void)
{
    printf("%-4s %12s %12s %10s %10s\n", "", "rel L2", "max abs", "cosine", "SQNR dB");
}

static void metrics_row(const char *name, const mxfa_metrics *m)
{
    printf("%-4s %12.4e %12.4e %10.6f %10.2f\n", name, m->rel_l2, m->max_abs, m->cosine, m->sqnr_db);
}

/* After the table: the warnings that say why a row is no score. */
static void warn_no_scores(const char *cmd, int n, const char *const *names, const mxfa_metrics *m)
{
    fflush(stdout);
    for (int i = 0; i < n; i++)
        cli_warn_no_score(cmd, names[i], "the float64 truth", &m[i]);
}

/* Write n float32 arrays as a set (outset.h): all files appear, or none. */
static int write_set(const char *cmd, int n, const char *const *paths, const int *ndims, const int64_t (*shapes)[3],
                     float *const *data)
{
    static outset set; /* large: not on the stack */
    set.n = 0;
    for (int i = 0; i < n; i++)
        if (outset_npy(&set, paths[i], NPY_F32, ndims[i], shapes[i], data[i])) {
            outset_discard(&set);
            return cli_error(cmd, "%s", set.err);
        }
    return outset_commit(&set) ? cli_error(cmd, "%s", set.err) : 0;
}

/* The backward pass: dO read, O and LSE read or recomputed, dQ, dK, dV
 * written as a set. */
static int attn_backward(const char *cmd, mxfa_ctx *ctx, const mxfa_attn_params *p, npy_array *q, npy_array *k,
                         npy_array *v, const int32_t *cuq, const int32_t *cuk, int batch, const char *pdo,
                         const char *po, const char *plse, const char *pdq, const char *pdk, const char *pdv,
                         int out_bf16, int compare)
{
    const int64_t tq = q->shape[0], hq = q->shape[1], d = q->shape[2], tk = k->shape[0], hkv = k->shape[1];
    const int64_t qshape[3] = {tq, hq, d}, lshape[2] = {tq, hq};
    npy_array dO = {0}, oa = {0}, la = {0};
    float *o = NULL, *lse = NULL, *g[3] = {NULL, NULL, NULL};
    uint16_t *gb[3] = {NULL, NULL, NULL};
    double *t[3] = {NULL, NULL, NULL};
    int rc;
    if ((rc = cli_read_npy(cmd, "dO", pdo, NPY_F32, 3, qshape, &dO)))
        goto out;
    if (po && ((rc = cli_read_npy(cmd, "O", po, NPY_F32, 3, qshape, &oa)) || (rc = cli_read_npy(cmd, "LSE", plse, NPY_F32, 2, lshape, &la))))
        goto out;
    const int64_t counts[3] = {tq * hq * d, tk * hkv * d, tk * hkv * d};
    for (int i = 0; i < 3; i++) {
        g[i] = malloc((size_t)counts[i] * sizeof(float));
        gb[i] = out_bf16 ? malloc((size_t)counts[i] * sizeof(uint16_t)) : NULL;
        if (!g[i] || (out_bf16 && !gb[i])) {
            rc = cli_error(cmd, "out of memory");
            goto out;
        }
    }
    mxfa_tensor Q = {q->data, MXFA_F32, MXFA_MEM_HOST, 3, {tq, hq, d}, {0}};
    mxfa_tensor K = {k->data, MXFA_F32, MXFA_MEM_HOST, 3, {tk, hkv, d}, {0}};
    mxfa_tensor V = {v->data, MXFA_F32, MXFA_MEM_HOST, 3, {tk, hkv, d}, {0}};
    mxfa_tensor DO = {dO.data, MXFA_F32, MXFA_MEM_HOST, 3, {tq, hq, d}, {0}};
    if (!po) { /* recompute O and LSE with the same options */
        o = malloc((size_t)counts[0] * sizeof *o);
        lse = malloc((size_t)(tq * hq) * sizeof *lse);
        if (!o || !lse) {
            rc = cli_error(cmd, "out of memory");
            goto out;
        }
        mxfa_tensor O = {o, MXFA_F32, MXFA_MEM_HOST, 3, {tq, hq, d}, {0}};
        mxfa_tensor L = {lse, MXFA_F32, MXFA_MEM_HOST, 2, {tq, hq}, {0}};
        if (mxfa_attn_fwd(ctx, p, &Q, &K, &V, cuq, cuk, batch, &O, &L) != MXFA_OK) {
            rc = cli_error(cmd, "%s", mxfa_last_error(ctx));
            goto out;
        }
    }
    mxfa_tensor O = {po ? oa.data : o, MXFA_F32, MXFA_MEM_HOST, 3, {tq, hq, d}, {0}};
    mxfa_tensor L = {po ? la.data : lse, MXFA_F32, MXFA_MEM_HOST, 2, {tq, hq}, {0}};
    mxfa_dtype odt = out_bf16 ? MXFA_BF16 : MXFA_F32;
    mxfa_tensor DQ = {out_bf16 ? (void *)gb[0] : (void *)g[0], odt, MXFA_MEM_HOST, 3, {tq, hq, d}, {0}};
    mxfa_tensor DK = {out_bf16 ? (void *)gb[1] : (void *)g[1], odt, MXFA_MEM_HOST, 3, {tk, hkv, d}, {0}};
    mxfa_tensor DV = {out_bf16 ? (void *)gb[2] : (void *)g[2], odt, MXFA_MEM_HOST, 3, {tk, hkv, d}, {0}};
    if (mxfa_attn_bwd(ctx, p, &Q, &K, &V, &O, &DO, &L, cuq, cuk, batch, &DQ, &DK, &DV) != MXFA_OK) {
        rc = cli_error(cmd, "%s", mxfa_last_error(ctx));
        goto out;
    }
    for (int i = 0; i < 3 && out_bf16; i++)
        for (int64_t x = 0; x < counts[i]; x++)
            g[i][x] = mxfa_bf16_to_f32(gb[i][x]);
    if (compare) {
        for (int i = 0; i < 3; i++)
            if (!(t[i] = malloc((size_t)counts[i] * sizeof(double)))) {
                rc = cli_error(cmd, "out of memory");
                goto out;
            }
        mxfa_tensor TQ = {t[0], MXFA_F64, MXFA_MEM_HOST, 3, {tq, hq, d}, {0}};
        mxfa_tensor TK = {t[1], MXFA_F64, MXFA_MEM_HOST, 3, {tk, hkv, d}, {0}};
        mxfa_tensor TV = {t[2], MXFA_F64, MXFA_MEM_HOST, 3, {tk, hkv, d}, {0}};
        if (mxfa_attn_bwd_f64(ctx, p, &Q, &K, &V, &DO, cuq, cuk, batch, &TQ, &TK, &TV) != MXFA_OK) {
            rc = cli_error(cmd, "%s", mxfa_last_error(ctx));
            goto out;
        }
        mxfa_tensor F[3] = {DQ, DK, DV}, R[3] = {TQ, TK, TV};
        static const char *const names[3] = {"dQ", "dK", "dV"};
        mxfa_metrics m[3];
        printf("backward against the float64 truth: model %s, preset %s, P %s, %s, backend %s\n",
               mxfa_model_name(p->model), mxfa_preset_name(p->preset), mxfa_p_scale_name(p->p_scale),
               p->causal == MXFA_CAUSAL ? "causal" : p->causal == MXFA_CAUSAL_PLAIN ? "causal (plain)" : "non-causal",
               mxfa_backend_name(ctx));
        metrics_header();
        for (int i = 0; i < 3; i++) {
            mxfa_compare(&F[i], &R[i], &m[i]);
            metrics_row(names[i], &m[i]);
        }
        fflush(stdout);
        cli_warn_nonfinite_input(cmd, "Q", q->data, q->count);
        cli_warn_nonfinite_input(cmd, "K", k->data, k->count);
        cli_warn_nonfinite_input(cmd, "V", v->data, v->count);
        cli_warn_nonfinite_input(cmd, "dO", dO.data, dO.count);
        if (po) {
            cli_warn_nonfinite_input(cmd, "O", oa.data, oa.count);
            cli_warn_nonfinite_input(cmd, "LSE", la.data, la.count);
        }
        warn_no_scores(cmd, 3, names, m);
    }
    {
        const char *paths[3] = {pdq, pdk, pdv};
        const int ndims[3] = {3, 3, 3};
        const int64_t shapes[3][3] = {{tq, hq, d}, {tk, hkv, d}, {tk, hkv, d}};
        float *const datas[3] = {g[0], g[1], g[2]};
        rc = write_set(cmd, 3, paths, ndims, shapes, datas);
    }
out:
    npy_free(&dO);
    npy_free(&oa);
    npy_free(&la);
    free(o);
    free(lse);
    for (int i = 0; i < 3; i++) {
        free(g[i]);
        free(gb[i]);
        free(t[i]);
    }
    return rc;
}

int cmd_attn(int argc, char **argv)
{
    const char *cmd = "attn";
    int compare = 0, ch, rc;
    cli_attn_args a;
    cli_attn_args_init(&a, "auto");
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        if (cli_attn_option(cmd, ch, optarg, &a, &rc)) {
            if (rc)
                return rc;
            continue;
        }
        switch (ch) {
        case OPT_CMP: compare = 1; break;
        case 'h': fputs(attn_help, stdout); return 0;
        default: return cli_usage(cmd, "unknown option or missing value: '%s'", argv[optind - 1]);
        }
    }
    const char *pout = a.out, *plse = a.lse;
    const char *backend = a.backend, *pdo = a.dout, *po = a.o, *pdq = a.dq, *pdk = a.dk, *pdv = a.dv;
    const int out_bf16 = a.out_bf16, backward = a.backward;
    mxfa_attn_params p = a.p;
    if (optind < argc)
        return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    if ((rc = cli_attn_check(cmd, &a, 0)))
        return rc;
    if (backward && (!strcmp(pdq, pdk) || !strcmp(pdq, pdv) || !strcmp(pdk, pdv)))
        return cli_usage(cmd, "--dq, --dk and --dv must name different files");
    if (!backward && plse && !strcmp(plse, pout))
        return cli_usage(cmd, "--out and --lse name the same file");

    npy_array q = {0}, k = {0}, v = {0};
    int32_t *cuq = NULL, *cuk = NULL;
    int batch = 1;
    mxfa_ctx *ctx = NULL;
    float *o = NULL, *lse = NULL;
    uint16_t *obf = NULL;
    double *o64 = NULL, *l64 = NULL;
    if ((rc = cli_attn_read(cmd, &a, &q, &k, &v, &cuq, &cuk, &batch)) || (rc = cli_open(cmd, backend, &ctx)))
        goto done;
    int64_t tq = q.shape[0], hq = q.shape[1], d = q.shape[2];
    if (backward) {
        rc = attn_backward(cmd, ctx, &p, &q, &k, &v, cuq, cuk, batch, pdo, po, plse, pdq, pdk, pdv, out_bf16, compare);
        goto done;
    }
    o = malloc((size_t)q.count * sizeof *o);
    lse = malloc((size_t)(tq * hq) * sizeof *lse);
    obf = out_bf16 ? malloc((size_t)q.count * sizeof *obf) : NULL;
    if (!o || !lse || (out_bf16 && !obf)) {
        rc = cli_error(cmd, "out of memory");
        goto done;
    }
    mxfa_tensor Q = {q.data, MXFA_F32, MXFA_MEM_HOST, 3, {q.shape[0], q.shape[1], q.shape[2]}, {0}};
    mxfa_tensor K = {k.data, MXFA_F32, MXFA_MEM_HOST, 3, {k.shape[0], k.shape[1], k.shape[2]}, {0}};
    mxfa_tensor V = {v.data, MXFA_F32, MXFA_MEM_HOST, 3, {v.shape[0], v.shape[1], v.shape[2]}, {0}};
    mxfa_tensor O = {out_bf16 ? (void *)obf : (void *)o, out_bf16 ? MXFA_BF16 : MXFA_F32, MXFA_MEM_HOST, 3,
                     {tq, hq, d}, {0}};
    mxfa_tensor L = {lse, MXFA_F32, MXFA_MEM_HOST, 2, {tq, hq}, {0}};
    if (mxfa_attn_fwd(ctx, &p, &Q, &K, &V, cuq, cuk, batch, &O, &L) != MXFA_OK) {
        rc = cli_error(cmd, "%s", mxfa_last_error(ctx));
        goto done;
    }
    if (out_bf16)
        for (int64_t i = 0; i < q.count; i++)
            o[i] = mxfa_bf16_to_f32(obf[i]);
    if (compare) {
        o64 = malloc((size_t)q.count * sizeof *o64);
        l64 = malloc((size_t)(tq * hq) * sizeof *l64);
        if (!o64 || !l64) {
            rc = cli_error(cmd, "out of memory");
            goto done;
        }
        mxfa_tensor O64 = {o64, MXFA_F64, MXFA_MEM_HOST, 3, {tq, hq, d}, {0}};
        mxfa_tensor L64 = {l64, MXFA_F64, MXFA_MEM_HOST, 2, {tq, hq}, {0}};
        mxfa_metrics mo, ml;
        if (mxfa_attn_fwd_f64(ctx, &p, &Q, &K, &V, cuq, cuk, batch, &O64, &L64) != MXFA_OK) {
            rc = cli_error(cmd, "%s", mxfa_last_error(ctx));
            goto done;
        }
        mxfa_compare(&O, &O64, &mo);
        mxfa_compare(&L, &L64, &ml);
        printf("forward against the float64 truth: model %s, preset %s, P %s, %s, scale %g, tiles %dx%d, "
               "backend %s\n", mxfa_model_name(p.model),
               mxfa_preset_name(p.preset), mxfa_p_scale_name(p.p_scale),
               p.causal == MXFA_CAUSAL ? "causal" : p.causal == MXFA_CAUSAL_PLAIN ? "causal (plain)" : "non-causal",
               (double)mxfa_attn_softmax_scale(&p, d), p.block_m, p.block_n,
               mxfa_backend_name(ctx));
        metrics_header();
        metrics_row("O", &mo);
        metrics_row("LSE", &ml);
        fflush(stdout);
        cli_warn_nonfinite_input(cmd, "Q", q.data, q.count);
        cli_warn_nonfinite_input(cmd, "K", k.data, k.count);
        cli_warn_nonfinite_input(cmd, "V", v.data, v.count);
        static const char *const names[2] = {"O", "LSE"};
        const mxfa_metrics m[2] = {mo, ml};
        warn_no_scores(cmd, 2, names, m);
    }
    /* write O (and LSE) atomically, both or neither */
    {
        const char *paths[2] = {pout, plse};
        const int ndims[2] = {3, 2};
        const int64_t shapes[2][3] = {{tq, hq, d}, {tq, hq, 0}};
        float *const datas[2] = {o, lse};
        rc = write_set(cmd, plse ? 2 : 1, paths, ndims, shapes, datas);
    }
done:
    npy_free(&q);
    npy_free(&k);
    npy_free(&v);
    free(cuq);
    free(cuk);
    free(o);
    free(obf);
    free(lse);
    free(o64);
    free(l64);
    mxfa_close(ctx);
    return rc;
}
