/* SPDX-License-Identifier: BSD-3-Clause */
/* mxfa compare: another implementation's attention outputs against the
 * emulator's, word by word: the golden test of a kernel. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* The outputs lie outside --max-ulp (0: within; 1: an error; 2: usage). */
#define EXIT_DIFFERS 3

static const char compare_help[] =
    "usage: mxfa compare --q Q.npy --k K.npy --v V.npy --out O.npy [--lse LSE.npy] [options]\n"
    "       mxfa compare --backward --q Q.npy --k K.npy --v V.npy --do dO.npy\n"
    "                    --dq dQ.npy --dk dK.npy --dv dV.npy [--o O.npy --lse LSE.npy] [options]\n"
    "\n"
    "Compares a candidate's attention outputs (O and LSE, or with --backward dQ,\n"
    "dK and dV: .npy files written by any implementation, for example a GPU kernel\n"
    "under test) with the emulator's for the same inputs and options, which are\n"
    "those of mxfa attn. --out, --lse, --dq, --dk and --dv name the candidate's\n"
    "files; with --backward, --o and --lse are the forward outputs the candidate's\n"
    "backward pass used (recomputed by the emulator when not given). For each\n"
    "output it prints the words identical to the emulator's, the distance in\n"
    "float32 ULPs (max, median, a histogram; one bf16 ULP is 2^16 of them), the\n"
    "largest absolute and relative differences, each side's error against the\n"
    "float64 truth, and the positions (token, head, column) that differ most.\n"
    "Exit status: 0 when every word is within --max-ulp of the emulator's (NaN\n"
    "matching NaN), 3 when one is not, 1 on an error, 2 on a usage error.\n"
    "  --max-ulp N             the tolerance (default 0: bit-exact)\n"
    "  --worst N               positions to list (default 5)\n"
    "  --cu-seqlens-q LIST|FILE, --cu-seqlens-k LIST|FILE, --causal, --causal-plain,\n"
    "  --model, --preset, --p-scale, --scale, --block-m, --block-n, --out-dtype\n"
    "                          as mxfa attn takes them (--out-dtype bf16: the emulator's\n"
    "                          outputs rounded to bf16, as a bf16 kernel's are)\n"
    "  --backend auto|ref|cpu|cuda   the emulator's (default cpu)\n";

enum { OPT_MAXULP = CLI_ATTN_END, OPT_WORST };

static const struct option options[] = {
    CLI_ATTN_OPTIONS,
    {"max-ulp", required_argument, NULL, OPT_MAXULP},
    {"worst", required_argument, NULL, OPT_WORST},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* A float's bits as an integer that orders as the floats do (-0 and +0
 * adjacent, one apart). */
static int64_t ordered(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b & 0x80000000u ? -(int64_t)(b & 0x7FFFFFFFu) - 1 : (int64_t)b;
}

/* The distance in ULPs of two floats; 0 for two NaNs; -1 where one side is
 * NaN or infinite and the other is not the same. */
static int64_t ulp_distance(float a, float b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b) ? 0 : -1;
    if (isinf(a) || isinf(b))
        return a == b ? 0 : -1;
    int64_t d = ordered(a) - ordered(b);
    return d < 0 ? -d : d;
}

static int cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

typedef struct output {
    const char *name;
    const float *cand, *emu; /* the candidate's and the emulator's */
    const double *truth;     /* the float64 truth */
    int64_t n, heads, d;     /* d = 1 for LSE [tokens, heads] */
} output;

/* One output's report; returns its largest distance (INT64_MAX where a
 * NaN or an Inf is not matched), or -1 when memory ran out. */
static int64_t report(const char *cmd, const output *o, int worst)
{
    int64_t *dist = malloc((size_t)o->n * sizeof *dist), *sorted = malloc((size_t)o->n * sizeof *sorted);
    if (!dist || !sorted) {
        free(dist);
        free(sorted);
        cli_error(cmd, "out of memory");
        return -1;
    }
    int64_t same = 0, unmatched = 0, maxd = 0, finite = 0;
    double max_abs = 0.0, max_rel = 0.0;
    for (int64_t i = 0; i < o->n; i++) {
        uint32_t a, b;
        memcpy(&a, &o->cand[i], 4);
        memcpy(&b, &o->emu[i], 4);
        same += a == b;
        dist[i] = ulp_distance(o->cand[i], o->emu[i]);
        if (dist[i] < 0) {
            unmatched++;
            continue;
        }
        sorted[finite++] = dist[i];
        maxd = dist[i] > maxd ? dist[i] : maxd;
        if (isfinite(o->emu[i])) {
            const double e = fabs((double)o->cand[i] - (double)o->emu[i]);
            max_abs = e > max_abs ? e : max_abs;
            if (o->emu[i] != 0.0f && e / fabs((double)o->emu[i]) > max_rel)
                max_rel = e / fabs((double)o->emu[i]);
        }
    }
    qsort(sorted, (size_t)finite, sizeof *sorted, cmp_i64);
    printf("%s: %lld values, %lld words identical (%.4f%%)", o->name, (long long)o->n, (long long)same,
           100.0 * (double)same / (double)o->n);
    if (unmatched)
        printf(", %lld NaN or Inf not matched", (long long)unmatched);
    printf("\n  ULPs: max %lld, median %lld; max abs diff %.6g, max rel diff %.6g\n", (long long)maxd,
           (long long)(finite ? sorted[finite / 2] : 0), max_abs, max_rel);
    /* the histogram: 0, 1, 2, 3-4, 5-8, ..., the buckets that hold any */
    printf("  histogram:");
    for (int64_t lo = 0, hi = 0, at = 0; at < finite; lo = hi + 1, hi = hi ? 2 * hi : 1) {
        int64_t c = 0;
        while (at < finite && sorted[at] <= hi)
            at++, c++;
        if (c && lo == hi)
            printf(" [%lld] %lld", (long long)lo, (long long)c);
        else if (c)
            printf(" [%lld-%lld] %lld", (long long)lo, (long long)hi, (long long)c);
    }
    printf("\n");
    mxfa_tensor C = {(void *)o->cand, MXFA_F32, MXFA_MEM_HOST, 1, {o->n}, {0}};
    mxfa_tensor E = {(void *)o->emu, MXFA_F32, MXFA_MEM_HOST, 1, {o->n}, {0}};
    mxfa_tensor T = {(void *)o->truth, MXFA_F64, MXFA_MEM_HOST, 1, {o->n}, {0}};
    mxfa_metrics mc, me;
    mxfa_compare(&C, &T, &mc);
    mxfa_compare(&E, &T, &me);
    printf("  against the float64 truth, rel L2: candidate %.6e, emulator %.6e\n", mc.rel_l2, me.rel_l2);
    /* the positions that differ most (unmatched NaN/Inf first) */
    int shown = 0;
    for (int k = 0; k < worst; k++) {
        int64_t best = -1;
        for (int64_t i = 0; i < o->n; i++) {
            const int64_t di = dist[i] < 0 ? INT64_MAX : dist[i];
            if (di > 0 && (best < 0 || di > (dist[best] < 0 ? INT64_MAX : dist[best])))
                best = i;
        }
        if (best < 0)
            break;
        if (!shown++)
            printf("  most different (token, head%s):\n", o->d > 1 ? ", column" : "");
        const int64_t tok = best / (o->heads * o->d), h = best / o->d % o->heads, col = best % o->d;
        if (o->d > 1)
            printf("    (%lld, %lld, %lld): candidate %.9g, emulator %.9g, ", (long long)tok, (long long)h,
                   (long long)col, o->cand[best], o->emu[best]);
        else
            printf("    (%lld, %lld): candidate %.9g, emulator %.9g, ", (long long)tok, (long long)h, o->cand[best],
                   o->emu[best]);
        if (dist[best] < 0)
            printf("not matched\n");
        else
            printf("%lld ULPs\n", (long long)dist[best]);
        dist[best] = 0; /* (taken) */
    }
    free(dist);
    free(sorted);
    return unmatched ? INT64_MAX : maxd;
}

static int parse_count(const char *cmd, const char *opt, const char *s, int64_t max, int64_t *out)
{
    char *end;
    const long long v = strtoll(s, &end, 10);
    if (*s == '\0' || *end || v < 0 || v > max)
        return cli_usage(cmd, "%s takes an integer from 0 to %lld, got '%s'", opt, (long long)max, s);
    *out = v;
    return 0;
}

/* The emulator's outputs in float32 (widened from bf16 where out_bf16). */
static void widen(const uint16_t *b, float *f, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        f[i] = mxfa_bf16_to_f32(b[i]);
}

int cmd_compare(int argc, char **argv)
{
    const char *cmd = "compare";
    int ch, rc;
    int64_t max_ulp = 0, worst = 5;
    cli_attn_args a;
    cli_attn_args_init(&a, "cpu");
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        if (cli_attn_option(cmd, ch, optarg, &a, &rc)) {
            if (rc)
                return rc;
            continue;
        }
        switch (ch) {
        case OPT_MAXULP: if ((rc = parse_count(cmd, "--max-ulp", optarg, INT64_MAX / 2, &max_ulp))) return rc; break;
        case OPT_WORST: if ((rc = parse_count(cmd, "--worst", optarg, 1000, &worst))) return rc; break;
        case 'h': fputs(compare_help, stdout); return 0;
        default: return cli_usage(cmd, "unknown option or missing value: '%s'", argv[optind - 1]);
        }
    }
    const char *pout = a.out, *plse = a.lse;
    const char *backend = a.backend, *pdo = a.dout, *po = a.o, *pdq = a.dq, *pdk = a.dk, *pdv = a.dv;
    const int out_bf16 = a.out_bf16, backward = a.backward;
    mxfa_attn_params p = a.p;
    if (optind < argc)
        return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    if ((rc = cli_attn_check(cmd, &a, 1)))
        return rc;

    npy_array q = {0}, k = {0}, v = {0}, dO = {0}, oa = {0}, la = {0}, c[3] = {{0}, {0}, {0}};
    int32_t *cuq = NULL, *cuk = NULL;
    int batch = 1;
    mxfa_ctx *ctx = NULL;
    float *e[3] = {NULL, NULL, NULL}, *o = NULL, *lse = NULL;
    uint16_t *eb[3] = {NULL, NULL, NULL};
    double *t[3] = {NULL, NULL, NULL};
    if ((rc = cli_attn_read(cmd, &a, &q, &k, &v, &cuq, &cuk, &batch)))
        goto done;
    const int64_t tq = q.shape[0], hq = q.shape[1], d = q.shape[2], tk = k.shape[0], hkv = k.shape[1];
    const int64_t qshape[3] = {tq, hq, d}, kshape[3] = {tk, hkv, d}, lshape[2] = {tq, hq};
    /* the candidate's files */
    if (backward) {
        if ((rc = cli_read_npy(cmd, "dO", pdo, NPY_F32, 3, qshape, &dO)) ||
            (po && ((rc = cli_read_npy(cmd, "O", po, NPY_F32, 3, qshape, &oa)) ||
                    (rc = cli_read_npy(cmd, "LSE", plse, NPY_F32, 2, lshape, &la)))) ||
            (rc = cli_read_npy(cmd, "the candidate's dQ", pdq, NPY_F32, 3, qshape, &c[0])) ||
            (rc = cli_read_npy(cmd, "the candidate's dK", pdk, NPY_F32, 3, kshape, &c[1])) ||
            (rc = cli_read_npy(cmd, "the candidate's dV", pdv, NPY_F32, 3, kshape, &c[2])))
            goto done;
    } else if ((rc = cli_read_npy(cmd, "the candidate's O", pout, NPY_F32, 3, qshape, &c[0])) ||
               (plse && (rc = cli_read_npy(cmd, "the candidate's LSE", plse, NPY_F32, 2, lshape, &c[1]))))
        goto done;
    if ((rc = cli_open(cmd, backend, &ctx)))
        goto done;
    const int nout = backward ? 3 : plse ? 2 : 1;
    const int64_t counts[3] = {tq * hq * d, backward ? tk * hkv * d : tq * hq, tk * hkv * d};
    for (int i = 0; i < 3; i++) {
        e[i] = malloc((size_t)counts[i] * sizeof(float));
        eb[i] = malloc((size_t)counts[i] * sizeof(uint16_t));
        t[i] = malloc((size_t)counts[i] * sizeof(double));
        if (!e[i] || !eb[i] || !t[i]) {
            rc = cli_error(cmd, "out of memory");
            goto done;
        }
    }
    mxfa_tensor Q = {q.data, MXFA_F32, MXFA_MEM_HOST, 3, {tq, hq, d}, {0}};
    mxfa_tensor K = {k.data, MXFA_F32, MXFA_MEM_HOST, 3, {tk, hkv, d}, {0}};
    mxfa_tensor V = {v.data, MXFA_F32, MXFA_MEM_HOST, 3, {tk, hkv, d}, {0}};
    const mxfa_dtype odt = out_bf16 ? MXFA_BF16 : MXFA_F32;
    output outs[3];
    if (!backward) {
        mxfa_tensor O = {out_bf16 ? (void *)eb[0] : (void *)e[0], odt, MXFA_MEM_HOST, 3, {tq, hq, d}, {0}};
        mxfa_tensor L = {e[1], MXFA_F32, MXFA_MEM_HOST, 2, {tq, hq}, {0}};
        mxfa_tensor O64 = {t[0], MXFA_F64, MXFA_MEM_HOST, 3, {tq, hq, d}, {0}};
        mxfa_tensor L64 = {t[1], MXFA_F64, MXFA_MEM_HOST, 2, {tq, hq}, {0}};
        if (mxfa_attn_fwd(ctx, &p, &Q, &K, &V, cuq, cuk, batch, &O, &L) != MXFA_OK ||
            mxfa_attn_fwd_f64(ctx, &p, &Q, &K, &V, cuq, cuk, batch, &O64, &L64) != MXFA_OK) {
            rc = cli_error(cmd, "%s", mxfa_last_error(ctx));
            goto done;
        }
        if (out_bf16)
            widen(eb[0], e[0], counts[0]);
        outs[0] = (output){"O", c[0].data, e[0], t[0], counts[0], hq, d};
        outs[1] = (output){"LSE", plse ? c[1].data : NULL, e[1], t[1], counts[1], hq, 1};
    } else {
        mxfa_tensor DO = {dO.data, MXFA_F32, MXFA_MEM_HOST, 3, {tq, hq, d}, {0}};
        if (!po) { /* the forward outputs, the emulator's */
            o = malloc((size_t)counts[0] * sizeof *o);
            lse = malloc((size_t)(tq * hq) * sizeof *lse);
            if (!o || !lse) {
                rc = cli_error(cmd, "out of memory");
                goto done;
            }
            mxfa_tensor O = {o, MXFA_F32, MXFA_MEM_HOST, 3, {tq, hq, d}, {0}};
            mxfa_tensor L = {lse, MXFA_F32, MXFA_MEM_HOST, 2, {tq, hq}, {0}};
            if (mxfa_attn_fwd(ctx, &p, &Q, &K, &V, cuq, cuk, batch, &O, &L) != MXFA_OK) {
                rc = cli_error(cmd, "%s", mxfa_last_error(ctx));
                goto done;
            }
        }
        mxfa_tensor O = {po ? oa.data : o, MXFA_F32, MXFA_MEM_HOST, 3, {tq, hq, d}, {0}};
        mxfa_tensor L = {po ? la.data : lse, MXFA_F32, MXFA_MEM_HOST, 2, {tq, hq}, {0}};
        mxfa_tensor G[3], T[3];
        for (int i = 0; i < 3; i++) {
            const int64_t *s = i ? kshape : qshape;
            G[i] = (mxfa_tensor){out_bf16 ? (void *)eb[i] : (void *)e[i], odt, MXFA_MEM_HOST, 3, {s[0], s[1], s[2]}, {0}};
            T[i] = (mxfa_tensor){t[i], MXFA_F64, MXFA_MEM_HOST, 3, {s[0], s[1], s[2]}, {0}};
        }
        if (mxfa_attn_bwd(ctx, &p, &Q, &K, &V, &O, &DO, &L, cuq, cuk, batch, &G[0], &G[1], &G[2]) != MXFA_OK ||
            mxfa_attn_bwd_f64(ctx, &p, &Q, &K, &V, &DO, cuq, cuk, batch, &T[0], &T[1], &T[2]) != MXFA_OK) {
            rc = cli_error(cmd, "%s", mxfa_last_error(ctx));
            goto done;
        }
        static const char *const names[3] = {"dQ", "dK", "dV"};
        for (int i = 0; i < 3; i++) {
            if (out_bf16)
                widen(eb[i], e[i], counts[i]);
            outs[i] = (output){names[i], c[i].data, e[i], t[i], counts[i], i ? hkv : hq, d};
        }
    }
    printf("%s against the emulator: model %s, preset %s, P %s, %s, outputs %s, backend %s\n",
           backward ? "backward" : "forward", mxfa_model_name(p.model), mxfa_preset_name(p.preset),
           mxfa_p_scale_name(p.p_scale),
           p.causal == MXFA_CAUSAL ? "causal" : p.causal == MXFA_CAUSAL_PLAIN ? "causal (plain)" : "non-causal",
           out_bf16 ? "bf16" : "f32", mxfa_backend_name(ctx));
    int64_t worst_seen = 0;
    for (int i = 0; i < nout; i++) {
        const int64_t m = report(cmd, &outs[i], (int)worst);
        if (m < 0) {
            rc = EXIT_FAILURE;
            goto done;
        }
        worst_seen = m > worst_seen ? m : worst_seen;
    }
    if (worst_seen <= max_ulp) {
        printf("within the tolerance: every word within %lld ULPs of the emulator's\n", (long long)max_ulp);
        rc = 0;
    } else {
        printf("OUTSIDE the tolerance of %lld ULPs: ", (long long)max_ulp);
        if (worst_seen == INT64_MAX)
            printf("a NaN or an Inf is not matched\n");
        else
            printf("a word is %lld ULPs from the emulator's\n", (long long)worst_seen);
        rc = EXIT_DIFFERS;
    }
done:
    npy_free(&q);
    npy_free(&k);
    npy_free(&v);
    npy_free(&dO);
    npy_free(&oa);
    npy_free(&la);
    for (int i = 0; i < 3; i++) {
        npy_free(&c[i]);
        free(e[i]);
        free(eb[i]);
        free(t[i]);
    }
    free(o);
    free(lse);
    free(cuq);
    free(cuk);
    mxfa_close(ctx);
    return rc;
}
