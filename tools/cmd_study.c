/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mxfa study: MXFP8 attention forward and backward against the float64
 * truth, across numerics models, presets, P scalings and causal modes, on
 * built-in synthetic data or the user's tensors. Writes a table to stdout
 * and, into --out DIR, results.csv and SVG plots, all or none of them.
 *
 * A study is a plan (a list of steps, made before anything runs, so that
 * the progress counter knows its total), a driver that runs it, and a
 * report: the table, the findings and the files. docs/STUDY.md describes
 * what it prints and writes.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "outset.h"
#include "svg.h"

static const char study_help[] =
    "usage: mxfa study --demo --out DIR [options]\n"
    "       mxfa study --q Q.npy --k K.npy --v V.npy [--do dO.npy] --out DIR [options]\n"
    "\n"
    "Runs MXFP8 attention forward and backward and measures the error of O, LSE,\n"
    "dQ, dK and dV against the float64 truth (relative L2, cosine, SQNR, max abs),\n"
    "and each model's outputs against the ideal model's (its arithmetic alone).\n"
    "--demo sweeps built-in synthetic data shaped like LLM attention: sequence\n"
    "length, outlier channels in K, an attention sink, every model, const against\n"
    "dynamic P, the presets, and the causal leak of per-32-key V scales. With\n"
    "tensors (float32, Q [tokens, Hq, D], K and V [tokens, Hkv, D], dO like Q,\n"
    "random when not given) it runs every model, preset and P scaling on them.\n"
    "Writes DIR/results.csv (every number), DIR/*.svg (plots) and the table and\n"
    "findings on stdout; the files appear together or not at all. docs/STUDY.md\n"
    "explains every column, plot and finding.\n"
    "  --models LIST|all       ideal,sm100,sm90-fp8,sm90-bf16 (default all)\n"
    "  --presets LIST|all      with tensors: scale rules, rceil,ocp,torchao-rceil,\n"
    "                          microxcaling (default rceil; --preset is the same)\n"
    "  --cu-seqlens-q LIST|FILE, --cu-seqlens-k LIST|FILE\n"
    "                          with tensors: a packed batch, offsets \"0,37,100\" or an\n"
    "                          int32/int64 .npy, as mxfa attn takes them\n"
    "  --causal, --causal-plain  with tensors: causal masking (default none); also\n"
    "                          checks the causal leak of both modes\n"
    "  --quick                 --demo at smaller sizes (seconds; for tests)\n"
    "  --seed N                synthetic data seed (default 1)\n"
    "  --backend auto|ref|cpu|cuda                      (default auto)\n";

enum { OPT_DEMO = 256, OPT_OUT, OPT_Q, OPT_K, OPT_V, OPT_DO, OPT_MODELS, OPT_PRESETS, OPT_CUQ, OPT_CUK, OPT_CAUSAL,
       OPT_CAUSAL_PLAIN, OPT_QUICK, OPT_SEED, OPT_BACKEND };

static const struct option options[] = {
    {"demo", no_argument, NULL, OPT_DEMO},
    {"out", required_argument, NULL, OPT_OUT},
    {"q", required_argument, NULL, OPT_Q},
    {"k", required_argument, NULL, OPT_K},
    {"v", required_argument, NULL, OPT_V},
    {"do", required_argument, NULL, OPT_DO},
    {"models", required_argument, NULL, OPT_MODELS},
    {"presets", required_argument, NULL, OPT_PRESETS},
    {"preset", required_argument, NULL, OPT_PRESETS}, /* the older name of --presets */
    {"cu-seqlens-q", required_argument, NULL, OPT_CUQ},
    {"cu-seqlens-k", required_argument, NULL, OPT_CUK},
    {"causal", no_argument, NULL, OPT_CAUSAL},
    {"causal-plain", no_argument, NULL, OPT_CAUSAL_PLAIN},
    {"quick", no_argument, NULL, OPT_QUICK},
    {"seed", required_argument, NULL, OPT_SEED},
    {"backend", required_argument, NULL, OPT_BACKEND},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static const char *const cmd = "study";

/* What a study was asked for. */
typedef struct study_opts {
    int demo, quick;
    uint64_t seed;
    mxfa_model models[4]; /* in enum order: ideal, when there, comes first */
    int nmodels;
    mxfa_preset presets[4]; /* with tensors: the presets, in the order given */
    int npresets;
    mxfa_causal causal; /* with tensors */
} study_opts;

/* ---- inputs ---- */

/* The synthetic data sets. */
typedef enum data_kind {
    DATA_NORMAL,  /* Q, K, V, dO standard normal */
    DATA_OUTLIER, /* K with two outlier channels `outlier` times larger */
    DATA_SINK,    /* key 0 a sink: every query's score with it about 12 above the rest */
    DATA_USER
} data_kind;

static const char *const data_names[] = {"normal", "k-outliers", "sink", "user"};

typedef struct inputs {
    int64_t sq, sk, hq, hkv, d; /* tokens of Q and of K and V (all sequences), heads, head dim */
    float *q, *k, *v, *dout;
    int32_t *cuq, *cuk; /* a packed batch's offsets, or NULL for one sequence */
    int batch;
    data_kind data; /* what they are, so that a step knows whether they fit */
    double outlier;
} inputs;

static void inputs_free(inputs *in)
{
    free(in->q), free(in->k), free(in->v), free(in->dout), free(in->cuq), free(in->cuk);
    memset(in, 0, sizeof *in);
}

static uint64_t rng_state;

static double gauss(void)
{
    return cli_gauss(&rng_state);
}

static float *randn(int64_t n)
{
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; x && i < n; i++)
        x[i] = (float)gauss();
    return x;
}

enum { DEMO_HEADS = 2, DEMO_DIM = 64 };

/* 0, or an exit status */
static int make_inputs(data_kind kind, int64_t s, double outlier, uint64_t seed, inputs *in)
{
    rng_state = seed * 0x2545F4914F6CDD1Du + 1;
    in->sq = in->sk = s;
    in->hq = in->hkv = DEMO_HEADS;
    in->d = DEMO_DIM;
    in->batch = 1;
    in->data = kind, in->outlier = outlier;
    int64_t n = s * DEMO_HEADS * DEMO_DIM;
    in->q = randn(n), in->k = randn(n), in->v = randn(n), in->dout = randn(n);
    if (!in->q || !in->k || !in->v || !in->dout) {
        inputs_free(in);
        return cli_error(cmd, "out of memory");
    }
    const int64_t d = DEMO_DIM;
    if (kind == DATA_OUTLIER) /* channels 5 and 40 of every key and head */
        for (int64_t t = 0; t < s * DEMO_HEADS; t++) {
            in->k[t * d + 5] *= (float)outlier;
            in->k[t * d + 40] *= (float)outlier;
        }
    if (kind == DATA_SINK) { /* a shared direction u: queries lean on it, key 0 lies along it */
        double u[DEMO_DIM], norm = 0;
        for (int64_t e = 0; e < d; e++) {
            u[e] = gauss();
            norm += u[e] * u[e];
        }
        for (int64_t e = 0; e < d; e++)
            u[e] /= sqrt(norm);
        for (int64_t h = 0; h < DEMO_HEADS; h++) {
            for (int64_t e = 0; e < d; e++)
                in->k[h * d + e] = (float)(48 * u[e]);
            for (int64_t t = 0; t < s; t++)
                for (int64_t e = 0; e < d; e++)
                    in->q[(t * DEMO_HEADS + h) * d + e] += (float)(2 * u[e]);
        }
    }
    return 0;
}

/* The user's tensors, and the offsets of a packed batch (cu_q and cu_k
 * both given or both NULL). 0 or an exit status. */
static int load_user(const char *pq, const char *pk, const char *pv, const char *pdo, const char *cu_q,
                     const char *cu_k, inputs *in)
{
    npy_array q = {0}, k = {0}, v = {0}, dout = {0};
    int rc = cli_read_npy(cmd, "Q", pq, NPY_F32, 3, NULL, &q);
    if (!rc) {
        int64_t kshape[3] = {-1, -1, q.shape[2]};
        rc = cli_read_npy(cmd, "K", pk, NPY_F32, 3, kshape, &k);
    }
    if (!rc)
        rc = cli_read_npy(cmd, "V", pv, NPY_F32, 3, k.shape, &v);
    if (!rc && pdo)
        rc = cli_read_npy(cmd, "dO", pdo, NPY_F32, 3, q.shape, &dout);
    if (!rc && q.shape[2] != 64 && q.shape[2] != 128 && q.shape[2] != 256)
        rc = cli_error(cmd, "%s: head dimension %lld is not supported (64, 128 or 256)", pq, (long long)q.shape[2]);
    if (!rc && q.shape[1] % k.shape[1] != 0)
        rc = cli_error(cmd, "%s: %lld query heads are not a multiple of the %lld key/value heads of %s", pq,
                       (long long)q.shape[1], (long long)k.shape[1], pk);
    in->batch = 1;
    if (!rc && cu_q)
        rc = cli_read_cu_seqlens(cmd, cu_q, cu_k, &in->cuq, &in->cuk, &in->batch);
    if (!rc) {
        in->sq = q.shape[0], in->hq = q.shape[1], in->d = q.shape[2], in->sk = k.shape[0], in->hkv = k.shape[1];
        in->data = DATA_USER, in->outlier = 0;
        in->q = q.data, in->k = k.data, in->v = v.data;
        q.data = k.data = v.data = NULL;
        if (pdo) {
            in->dout = dout.data;
            dout.data = NULL;
        } else {
            rng_state = 0x5EED;
            if (!(in->dout = randn(in->sq * in->hq * in->d)))
                rc = cli_error(cmd, "out of memory");
        }
    }
    npy_free(&q), npy_free(&k), npy_free(&v), npy_free(&dout);
    if (rc)
        inputs_free(in);
    return rc;
}

static mxfa_tensor t3(void *data, mxfa_dtype dt, int64_t a, int64_t b, int64_t c)
{
    mxfa_tensor t = {data, dt, MXFA_MEM_HOST, 3, {a, b, c}, {b * c, c, 1}};
    return t;
}

static mxfa_tensor t2(void *data, mxfa_dtype dt, int64_t a, int64_t b)
{
    mxfa_tensor t = {data, dt, MXFA_MEM_HOST, 2, {a, b}, {b, 1}};
    return t;
}

/* Descriptors of the inputs (q, k, v, dout) and of the five outputs of
 * dtype dt (O, LSE, dQ, dK, dV, in the order of the T_ indices below). */
static void input_tensors(const inputs *in, mxfa_tensor t[4])
{
    t[0] = t3(in->q, MXFA_F32, in->sq, in->hq, in->d);
    t[1] = t3(in->k, MXFA_F32, in->sk, in->hkv, in->d);
    t[2] = t3(in->v, MXFA_F32, in->sk, in->hkv, in->d);
    t[3] = t3(in->dout, MXFA_F32, in->sq, in->hq, in->d);
}

static void output_tensors(const inputs *in, mxfa_dtype dt, void *o, void *lse, void *dq, void *dk, void *dv,
                           mxfa_tensor t[5])
{
    t[0] = t3(o, dt, in->sq, in->hq, in->d);
    t[1] = t2(lse, dt, in->sq, in->hq);
    t[2] = t3(dq, dt, in->sq, in->hq, in->d);
    t[3] = t3(dk, dt, in->sk, in->hkv, in->d);
    t[4] = t3(dv, dt, in->sk, in->hkv, in->d);
}

/* ---- the float64 truth, once per (inputs, causal mode) ---- */

typedef struct truth {
    double *o, *lse, *dq, *dk, *dv;
    int gen;            /* the inputs it belongs to (study.gen) */
    mxfa_causal causal; /* and its causal mode */
} truth;

static void truth_free(truth *t)
{
    free(t->o), free(t->lse), free(t->dq), free(t->dk), free(t->dv);
    memset(t, 0, sizeof *t);
}

static int make_truth(mxfa_ctx *ctx, const inputs *in, mxfa_causal causal, truth *t)
{
    mxfa_attn_params p;
    mxfa_attn_params_default(&p);
    p.causal = causal;
    int64_t nq = in->sq * in->hq * in->d, nk = in->sk * in->hkv * in->d;
    t->o = malloc((size_t)nq * 8), t->dq = malloc((size_t)nq * 8), t->lse = malloc((size_t)(in->sq * in->hq) * 8);
    t->dk = malloc((size_t)nk * 8), t->dv = malloc((size_t)nk * 8);
    t->causal = causal;
    if (!t->o || !t->dq || !t->lse || !t->dk || !t->dv) {
        truth_free(t);
        return cli_error(cmd, "out of memory");
    }
    mxfa_tensor x[4], y[5];
    input_tensors(in, x);
    output_tensors(in, MXFA_F64, t->o, t->lse, t->dq, t->dk, t->dv, y);
    if (mxfa_attn_fwd_f64(ctx, &p, &x[0], &x[1], &x[2], in->cuq, in->cuk, in->batch, &y[0], &y[1]) != MXFA_OK ||
        mxfa_attn_bwd_f64(ctx, &p, &x[0], &x[1], &x[2], &x[3], in->cuq, in->cuk, in->batch, &y[2], &y[3], &y[4]) !=
            MXFA_OK) {
        truth_free(t);
        return cli_error(cmd, "float64 truth: %s", mxfa_last_error(ctx));
    }
    return 0;
}

/* ---- one configuration ---- */

enum { T_O, T_LSE, T_DQ, T_DK, T_DV, NTENSORS };
static const char *const tensor_names[NTENSORS] = {"O", "LSE", "dQ", "dK", "dV"};

typedef struct record {
    const char *section;
    data_kind data;
    int64_t seqlen;
    double outlier;
    mxfa_model model;
    mxfa_preset preset;
    mxfa_p_scale pscale;
    mxfa_causal causal;
    mxfa_metrics m[NTENSORS];  /* against the float64 truth */
    int has_ideal;
    mxfa_metrics mi[NTENSORS]; /* against the ideal model on the same inputs: the arithmetic alone */
} record;

static record mkrec(const char *section, data_kind data, int64_t seqlen, double outlier, mxfa_model model,
                    mxfa_preset preset, mxfa_p_scale pscale, mxfa_causal causal)
{
    record r;
    memset(&r, 0, sizeof r);
    r.section = section, r.data = data, r.seqlen = seqlen, r.outlier = outlier;
    r.model = model, r.preset = preset, r.pscale = pscale, r.causal = causal;
    return r;
}

/* Whether a measurement is no score (mxfa_compare: NaN/Inf where the
 * reference differs, or nothing finite). */
static int no_score(const mxfa_metrics *m)
{
    return m->mismatched_nonfinite > 0 || m->count == 0;
}

typedef struct outputs {
    float *o, *lse, *dq, *dk, *dv;
} outputs;

static void outputs_free(outputs *r)
{
    free(r->o), free(r->lse), free(r->dq), free(r->dk), free(r->dv);
    memset(r, 0, sizeof *r);
}

static const char *causal_name(mxfa_causal c)
{
    return c == MXFA_CAUSAL ? "causal" : c == MXFA_CAUSAL_PLAIN ? "causal-plain" : "none";
}

/* Forward and backward of rec's configuration on ctx into out (allocated
 * here); with `backward` 0 the forward only. 0 or an exit status. */
/* One configuration's forward (and backward) pass on ctx. refused_ok: a
 * backend that does not compute the configuration (MXFA_ERR_UNSUPPORTED,
 * the cuda backend under ideal, say) returns -1 quietly; any other failure
 * says why and returns 1. */
static int run_attn_or_refused(mxfa_ctx *ctx, const inputs *in, const record *rec, int backward, int refused_ok,
                               outputs *out)
{
    mxfa_attn_params p;
    mxfa_attn_params_default(&p);
    p.model = rec->model, p.preset = rec->preset, p.p_scale = rec->pscale, p.causal = rec->causal;
    int64_t nq = in->sq * in->hq * in->d, nk = in->sk * in->hkv * in->d;
    out->o = malloc((size_t)nq * 4), out->lse = malloc((size_t)(in->sq * in->hq) * 4);
    out->dq = malloc((size_t)nq * 4), out->dk = malloc((size_t)nk * 4), out->dv = malloc((size_t)nk * 4);
    if (!out->o || !out->lse || !out->dq || !out->dk || !out->dv) {
        outputs_free(out);
        return cli_error(cmd, "out of memory");
    }
    mxfa_tensor x[4], y[5];
    input_tensors(in, x);
    output_tensors(in, MXFA_F32, out->o, out->lse, out->dq, out->dk, out->dv, y);
    mxfa_status st = mxfa_attn_fwd(ctx, &p, &x[0], &x[1], &x[2], in->cuq, in->cuk, in->batch, &y[0], &y[1]);
    if (st == MXFA_OK && backward)
        st = mxfa_attn_bwd(ctx, &p, &x[0], &x[1], &x[2], &y[0], &x[3], &y[1], in->cuq, in->cuk, in->batch, &y[2],
                           &y[3], &y[4]);
    if (st != MXFA_OK) {
        outputs_free(out);
        if (refused_ok && st == MXFA_ERR_UNSUPPORTED)
            return -1;
        return cli_error(cmd, "%s backend, model %s: %s", mxfa_backend_name(ctx), mxfa_model_name(rec->model),
                         mxfa_last_error(ctx));
    }
    return 0;
}

static int run_attn(mxfa_ctx *ctx, const inputs *in, const record *rec, int backward, outputs *out)
{
    return run_attn_or_refused(ctx, in, rec, backward, 0, out);
}

/* The metrics of each output against a reference's; against: its name. */
static int compare_outputs(const inputs *in, const outputs *out, mxfa_dtype ref_dt, void *o, void *lse, void *dq,
                           void *dk, void *dv, const char *against, mxfa_metrics m[NTENSORS])
{
    mxfa_tensor got[NTENSORS], want[NTENSORS];
    output_tensors(in, MXFA_F32, out->o, out->lse, out->dq, out->dk, out->dv, got);
    output_tensors(in, ref_dt, o, lse, dq, dk, dv, want);
    for (int i = 0; i < NTENSORS; i++)
        if (mxfa_compare(&got[i], &want[i], &m[i]) != MXFA_OK)
            return cli_error(cmd, "comparing %s with %s: %s", tensor_names[i], against, mxfa_last_error(NULL));
    return 0;
}

/* ---- the plan: every step of a study, known before the first runs ---- */

typedef enum step_kind {
    STEP_MEASURE, /* run a configuration and measure it (a record) */
    STEP_LEAK     /* the causal leak check of cfg's causal mode */
} step_kind;

typedef struct step {
    step_kind kind;
    record cfg;       /* the configuration; its data, seqlen and outlier name the inputs */
    const char *hist; /* STEP_MEASURE: the name of its dQ histogram series, or NULL */
} step;

typedef struct plan {
    step *step;
    int n, cap;
    int failed; /* an allocation failed (and was reported) */
} plan;

static void plan_free(plan *p)
{
    free(p->step);
    memset(p, 0, sizeof *p);
}

/* 0, or an exit status (reported once). */
static int plan_add(plan *p, step_kind kind, record cfg, const char *hist)
{
    if (p->failed)
        return EXIT_FAILURE;
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 64;
        step *s = realloc(p->step, (size_t)cap * sizeof *s);
        if (!s) {
            p->failed = 1;
            return cli_error(cmd, "out of memory");
        }
        p->step = s, p->cap = cap;
    }
    p->step[p->n++] = (step){kind, cfg, hist};
    return 0;
}

/* The model a study leads with in its plots and leak check: sm100 when it
 * is among the models, else the first. */
static mxfa_model lead_model(const study_opts *o)
{
    for (int m = 0; m < o->nmodels; m++)
        if (o->models[m] == MXFA_MODEL_SM100)
            return MXFA_MODEL_SM100;
    return o->models[0];
}

typedef struct demo_sizes {
    int64_t seqlens[4];
    int nseq;
    int64_t s_mid; /* the length of the other sweeps */
} demo_sizes;

static demo_sizes demo_sizes_of(int quick)
{
    return quick ? (demo_sizes){{64, 128}, 2, 128} : (demo_sizes){{256, 512, 1024, 2048}, 4, 512};
}

static const double demo_outliers[4] = {1, 4, 16, 64};
#define DEMO_PSCALE_OUTLIER 16.0 /* the outlier data of the P scaling section */

/* The demo: 1. sequence length, 2. outlier channels in K, 3. const
 * against dynamic P on each kind of data (Blackwell and Hopper), 4. the
 * presets, 5. the causal leak of both causal modes. 0 or an exit status. */
static int plan_demo(plan *p, const study_opts *o)
{
    const demo_sizes z = demo_sizes_of(o->quick);
    const mxfa_model pm[2] = {MXFA_MODEL_SM100, MXFA_MODEL_SM90_FP8};
    const data_kind pdata[3] = {DATA_NORMAL, DATA_OUTLIER, DATA_SINK};
    const mxfa_preset rceil = MXFA_PRESET_RCEIL;
    int err = 0;
    for (int i = 0; i < z.nseq; i++)
        for (int m = 0; m < o->nmodels; m++)
            err |= plan_add(p, STEP_MEASURE,
                            mkrec("seqlen", DATA_NORMAL, z.seqlens[i], 0, o->models[m], rceil, MXFA_P_CONST,
                                  MXFA_CAUSAL_NONE),
                            z.seqlens[i] == z.s_mid ? mxfa_model_name(o->models[m]) : NULL);
    for (int i = 0; i < 4; i++)
        for (int m = 0; m < o->nmodels; m++)
            err |= plan_add(p, STEP_MEASURE,
                            mkrec("outlier", DATA_OUTLIER, z.s_mid, demo_outliers[i], o->models[m], rceil, MXFA_P_CONST,
                                  MXFA_CAUSAL_NONE),
                            NULL);
    for (int i = 0; i < 3; i++)
        for (int m = 0; m < 2; m++)
            for (int ps = 0; ps < 2; ps++)
                err |= plan_add(p, STEP_MEASURE,
                                mkrec("p-scale", pdata[i], z.s_mid, pdata[i] == DATA_OUTLIER ? DEMO_PSCALE_OUTLIER : 0,
                                      pm[m], rceil, (mxfa_p_scale)ps, MXFA_CAUSAL_NONE),
                                NULL);
    for (int ps = 0; ps < 4; ps++)
        err |= plan_add(p, STEP_MEASURE,
                        mkrec("preset", DATA_NORMAL, z.s_mid, 0, MXFA_MODEL_SM100, (mxfa_preset)ps, MXFA_P_CONST,
                              MXFA_CAUSAL_NONE),
                        NULL);
    for (int c = 0; c < 2; c++)
        err |= plan_add(p, STEP_LEAK,
                        mkrec("leak", DATA_NORMAL, z.s_mid, 0, MXFA_MODEL_SM100, rceil, MXFA_P_CONST,
                              c ? MXFA_CAUSAL_PLAIN : MXFA_CAUSAL),
                        NULL);
    return err ? EXIT_FAILURE : 0;
}

/* The user's tensors: every preset, P scaling and model (ideal first, so
 * that the others are measured against it), then, when causal, the leak
 * check of both causal modes. The histogram shows the first preset under
 * const P. 0 or an exit status. */
static int plan_user(plan *p, const study_opts *o, const inputs *in)
{
    int err = 0;
    for (int ps = 0; ps < o->npresets; ps++)
        for (int pc = 0; pc < 2; pc++)
            for (int m = 0; m < o->nmodels; m++)
                err |= plan_add(p, STEP_MEASURE,
                                mkrec("user", DATA_USER, in->sq, 0, o->models[m], o->presets[ps], (mxfa_p_scale)pc,
                                      o->causal),
                                ps == 0 && pc == 0 ? mxfa_model_name(o->models[m]) : NULL);
    for (int c = 0; o->causal != MXFA_CAUSAL_NONE && c < 2; c++)
        err |= plan_add(p, STEP_LEAK,
                        mkrec("leak", DATA_USER, in->sq, 0, lead_model(o), o->presets[0], MXFA_P_CONST,
                              c ? MXFA_CAUSAL_PLAIN : MXFA_CAUSAL),
                        NULL);
    return err ? EXIT_FAILURE : 0;
}

/* ---- the driver: records, progress, the golden test ---- */

typedef struct leak {
    int ran;
    int64_t key;       /* the first changed key of the first sequence */
    int64_t rows;      /* rows that see no changed key */
    int64_t moved;     /* of them, rows whose O changed */
    double max_rel;    /* largest relative change of such a row (L2) */
} leak;

enum { HIST_BINS = 48 };
#define HIST_LO (-10.0)
#define HIST_STEP 0.25

typedef struct study {
    mxfa_ctx *ctx, *gpu; /* gpu: a GPU backend to check against ctx bit for bit, or NULL */
    int gen, ideal_gen;  /* the inputs in use, and those `ideal` was computed on */
    int64_t batch, heads, dim; /* of the inputs, for the CSV */
    outputs ideal;       /* the ideal model's outputs, for the other models' arithmetic error */
    record ideal_cfg;    /* and its configuration */
    record *rec;
    int nrec, cap;
    int step, steps, tty;
    double t0;
    int64_t golden_runs, golden_diff;
    leak lk[2];          /* the causal leak: [0] leak-free causal, [1] plain */
    int64_t input_bad[4], input_n[4]; /* NaN/Inf values in the user's Q, K, V, dO */
    /* dQ error histograms (log10 |dQ - truth|), for the plot */
    int nhist;
    char hist_name[SVG_MAX_SERIES][48];
    double hist[SVG_MAX_SERIES][HIST_BINS];
} study;

/* "k-outliers x16 S=512 sm100 rceil none P const", or for a leak check
 * "causal leak: normal S=512 sm100 rceil causal-plain". */
static void step_label(const step *s, char *buf, size_t len)
{
    const record *r = &s->cfg;
    char outl[32] = "", size[48];
    if (r->data == DATA_OUTLIER)
        snprintf(outl, sizeof outl, " x%g", r->outlier);
    if (r->data == DATA_USER)
        snprintf(size, sizeof size, "%lld tokens", (long long)r->seqlen);
    else
        snprintf(size, sizeof size, "S=%lld", (long long)r->seqlen);
    if (s->kind == STEP_LEAK)
        snprintf(buf, len, "causal leak: %s %s %s %s %s", data_names[r->data], size, mxfa_model_name(r->model),
                 mxfa_preset_name(r->preset), causal_name(r->causal));
    else
        snprintf(buf, len, "%s%s %s %s %s %s P %s", data_names[r->data], outl, size, mxfa_model_name(r->model),
                 mxfa_preset_name(r->preset), causal_name(r->causal), mxfa_p_scale_name(r->pscale));
}

static void progress(study *st, const step *s)
{
    char label[160];
    step_label(s, label, sizeof label);
    st->step++;
    fprintf(stderr, "%s[%d/%d %5.1fs] %s%s", st->tty ? "\r\033[K" : "", st->step, st->steps, cli_now() - st->t0,
            label, st->tty ? "" : "\n");
    fflush(stderr);
}

static void add_histogram(study *st, const char *name, const float *x, const double *ref, const float *ref32,
                          int64_t n)
{
    if (st->nhist >= SVG_MAX_SERIES)
        return;
    double *h = st->hist[st->nhist];
    memset(h, 0, HIST_BINS * sizeof *h);
    snprintf(st->hist_name[st->nhist], sizeof st->hist_name[0], "%s", name);
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)x[i] - (ref ? ref[i] : (double)ref32[i]));
        if (!isfinite(e))
            continue;
        int b = e == 0 ? 0 : (int)floor((log10(e) - HIST_LO) / HIST_STEP);
        b = b < 0 ? 0 : b >= HIST_BINS ? HIST_BINS - 1 : b;
        h[b] += 100.0 / (double)n; /* percent of the elements */
    }
    st->nhist++;
}

/* Run one configuration, measure it against the truth and, with a GPU
 * backend, check the GPU's bytes against ctx's. hist: a histogram name,
 * or NULL. */
static int run_one(study *st, const inputs *in, const truth *t, record r, const char *hist)
{
    if (st->nrec == st->cap) {
        int cap = st->cap ? 2 * st->cap : 64;
        record *nr = realloc(st->rec, (size_t)cap * sizeof *nr);
        if (!nr)
            return cli_error(cmd, "out of memory");
        st->rec = nr, st->cap = cap;
    }
    outputs out;
    int rc = run_attn(st->ctx, in, &r, 1, &out);
    if (!rc)
        rc = compare_outputs(in, &out, MXFA_F64, t->o, t->lse, t->dq, t->dk, t->dv, "the truth", r.m);
    /* the ideal model's outputs are kept for the models after it */
    const int64_t nq = in->sq * in->hq * in->d, nk = in->sk * in->hkv * in->d;
    int against_ideal = !rc && r.model != MXFA_MODEL_IDEAL && st->ideal_gen == st->gen && st->ideal.o &&
                        st->ideal_cfg.pscale == r.pscale && st->ideal_cfg.preset == r.preset &&
                        st->ideal_cfg.causal == r.causal;
    if (against_ideal) {
        const outputs *id = &st->ideal;
        rc = compare_outputs(in, &out, MXFA_F32, id->o, id->lse, id->dq, id->dk, id->dv, "the ideal model's", r.mi);
        r.has_ideal = 1;
    }
    if (!rc && hist) {
        char name[48];
        if (against_ideal) {
            snprintf(name, sizeof name, "%s vs ideal", hist);
            add_histogram(st, name, out.dq, NULL, st->ideal.dq, nq);
        } else {
            snprintf(name, sizeof name, "%s vs float64", hist);
            add_histogram(st, name, out.dq, t->dq, NULL, nq);
        }
    }
    if (!rc && st->gpu) { /* the configurations the GPU's kernels compute; the others are left out */
        outputs g;
        const int grc = run_attn_or_refused(st->gpu, in, &r, 1, 1, &g);
        rc = grc > 0 ? grc : 0;
        if (grc == 0) {
            int same = !memcmp(g.o, out.o, (size_t)nq * 4) && !memcmp(g.lse, out.lse, (size_t)(in->sq * in->hq) * 4) &&
                       !memcmp(g.dq, out.dq, (size_t)nq * 4) && !memcmp(g.dk, out.dk, (size_t)nk * 4) &&
                       !memcmp(g.dv, out.dv, (size_t)nk * 4);
            st->golden_runs++;
            st->golden_diff += !same;
            outputs_free(&g);
        }
    }
    if (!rc && r.model == MXFA_MODEL_IDEAL) {
        outputs_free(&st->ideal);
        st->ideal = out;
        st->ideal_gen = st->gen;
        st->ideal_cfg = r;
    } else {
        outputs_free(&out);
    }
    if (!rc)
        st->rec[st->nrec++] = r;
    return rc;
}

/* The first key of sequence b that the leak check changes: the middle of
 * its keys, 16 keys into a 32-key block so that earlier rows share that
 * block's V scale; 0 when it has too few keys. */
static int64_t leak_key(int64_t keys)
{
    int64_t t = 32 * (keys / 64) + 16;
    return t < keys ? t : keys / 2;
}

/* The causal leak: V changed only at the keys from leak_key on in each
 * sequence (scaled by LEAK_FACTOR, like a token with massive activations)
 * must not change O at the rows that see none of them (bottom-right
 * aligned: row i of a sequence of sq queries and sk keys sees the keys up
 * to i + sk - sq); with per-32-key V scales across the diagonal it does
 * for the rows that share a block with a changed key. */
#define LEAK_FACTOR 1024.0f
static int causal_leak(study *st, const inputs *in, const record *r, leak *out)
{
    const int64_t row = in->hq * in->d, kv_row = in->hkv * in->d, n = in->sk * kv_row;
    inputs in2 = *in;
    in2.v = malloc((size_t)n * 4);
    if (!in2.v)
        return cli_error(cmd, "out of memory");
    memcpy(in2.v, in->v, (size_t)n * 4);
    for (int b = 0; b < in->batch; b++) {
        int64_t k0 = in->cuk ? in->cuk[b] : 0, k1 = in->cuk ? in->cuk[b + 1] : in->sk;
        for (int64_t i = (k0 + leak_key(k1 - k0)) * kv_row; i < k1 * kv_row; i++)
            in2.v[i] *= LEAK_FACTOR;
    }
    outputs a, c;
    int rc = run_attn(st->ctx, in, r, 0, &a);
    if (!rc && (rc = run_attn(st->ctx, &in2, r, 0, &c)) != 0)
        outputs_free(&a);
    free(in2.v);
    if (rc)
        return rc;
    memset(out, 0, sizeof *out);
    out->ran = 1;
    for (int b = 0; b < in->batch; b++) {
        int64_t q0 = in->cuq ? in->cuq[b] : 0, q1 = in->cuq ? in->cuq[b + 1] : in->sq;
        int64_t k0 = in->cuk ? in->cuk[b] : 0, k1 = in->cuk ? in->cuk[b + 1] : in->sk, t = leak_key(k1 - k0);
        if (b == 0)
            out->key = t;
        for (int64_t i = 0; i < q1 - q0 && i + (k1 - k0) - (q1 - q0) < t; i++) {
            const float *x = &a.o[(q0 + i) * row], *y = &c.o[(q0 + i) * row];
            double num = 0, den = 0;
            for (int64_t e = 0; e < row; e++) {
                num += ((double)x[e] - y[e]) * ((double)x[e] - y[e]);
                den += (double)x[e] * x[e];
            }
            out->rows++;
            out->moved += memcmp(x, y, (size_t)row * 4) != 0;
            double rel = den > 0 ? sqrt(num / den) : 0;
            out->max_rel = rel > out->max_rel ? rel : out->max_rel;
        }
    }
    outputs_free(&a);
    outputs_free(&c);
    return 0;
}

/* Make in and t fit step s: new synthetic inputs when s names other data
 * (the user's tensors always fit), and, for a measurement, the truth of
 * its causal mode on them. 0 or an exit status. */
static int prepare(study *st, const step *s, uint64_t seed, inputs *in, truth *t)
{
    const record *r = &s->cfg;
    int rc;
    if (!(in->q && in->data == r->data && in->sq == r->seqlen && in->outlier == r->outlier)) {
        truth_free(t);
        inputs_free(in);
        if ((rc = make_inputs(r->data, r->seqlen, r->outlier, seed, in)) != 0)
            return rc;
        st->gen++;
    }
    st->batch = in->batch, st->heads = in->hq, st->dim = in->d;
    if (s->kind == STEP_MEASURE && !(t->o && t->gen == st->gen && t->causal == r->causal)) {
        truth_free(t);
        if ((rc = make_truth(st->ctx, in, r->causal, t)) != 0)
            return rc;
        t->gen = st->gen;
    }
    return 0;
}

/* Run every step of p on in (the user's tensors, or empty for the demo,
 * which makes its own). 0 or an exit status. */
static int run_plan(study *st, const plan *p, uint64_t seed, inputs *in)
{
    truth t = {0};
    int rc = 0;
    st->steps = p->n;
    for (int i = 0; !rc && i < p->n; i++) {
        const step *s = &p->step[i];
        progress(st, s);
        rc = prepare(st, s, seed, in, &t);
        if (!rc && s->kind == STEP_MEASURE)
            rc = run_one(st, in, &t, s->cfg, s->hist);
        else if (!rc)
            rc = causal_leak(st, in, &s->cfg, &st->lk[s->cfg.causal == MXFA_CAUSAL_PLAIN]);
    }
    truth_free(&t);
    return rc;
}

/* ---- the report: table and findings ---- */

static void print_section(const study *st, const char *section, const char *title)
{
    printf("\n== %s\n", title);
    printf("%-10s %5s %6s %-9s %-13s %-12s %-7s %-4s %10s %9s %8s %10s %9s\n", "data", "S", "outl.", "model",
           "preset", "causal", "P", "out", "rel_l2", "cosine", "SQNR_dB", "max_abs", "vs_ideal");
    for (int i = 0; i < st->nrec; i++) {
        const record *r = &st->rec[i];
        if (strcmp(r->section, section) != 0)
            continue;
        for (int t = 0; t < NTENSORS; t++) {
            char vi[16] = "-";
            if (r->has_ideal)
                snprintf(vi, sizeof vi, "%.1f", r->mi[t].sqnr_db);
            printf("%-10s %5lld %6g %-9s %-13s %-12s %-7s %-4s %10.3e %9.6f %8.2f %10.3e %9s\n", data_names[r->data],
                   (long long)r->seqlen, r->outlier, mxfa_model_name(r->model), mxfa_preset_name(r->preset),
                   causal_name(r->causal), mxfa_p_scale_name(r->pscale), tensor_names[t], r->m[t].rel_l2,
                   r->m[t].cosine, r->m[t].sqnr_db, r->m[t].max_abs, vi);
        }
    }
}

static const record *find(const study *st, const char *section, data_kind data, int64_t s, double outlier,
                          mxfa_model model, mxfa_p_scale ps)
{
    for (int i = 0; i < st->nrec; i++) {
        const record *r = &st->rec[i];
        if (!strcmp(r->section, section) && r->data == data && r->seqlen == s && r->outlier == outlier &&
            r->model == model && r->pscale == ps)
            return r;
    }
    return NULL;
}

/* The user study's record of a model, preset and P scaling. */
static const record *find_user(const study *st, mxfa_model model, mxfa_preset preset, mxfa_p_scale ps)
{
    for (int i = 0; i < st->nrec; i++) {
        const record *r = &st->rec[i];
        if (r->data == DATA_USER && r->model == model && r->preset == preset && r->pscale == ps)
            return r;
    }
    return NULL;
}

/* "causal leak (...): plain causal moved O at ..., leak-free causal moved
 * N"; where: which keys changed, and under which model. */
static void print_leak(const leak lk[2], const char *where)
{
    printf("causal leak (V x%g from %s): plain causal moved O at %lld of the %lld earlier rows, by up to %.3g "
           "relative; leak-free causal moved %lld\n",
           (double)LEAK_FACTOR, where, (long long)lk[1].moved, (long long)lk[1].rows, lk[1].max_rel,
           (long long)lk[0].moved);
}

/* The findings' flags: NaN/Inf in the inputs, and every configuration
 * whose outputs cannot be measured (NaN/Inf where the float64 truth
 * differs, or nothing finite). Returns the number of such configurations. */
static int print_no_scores(const study *st)
{
    static const char *const input_names[4] = {"Q", "K", "V", "dO"};
    for (int i = 0; i < 4; i++)
        if (st->input_bad[i])
            printf("NaN/Inf input: %s holds %lld NaN/Inf values of %lld\n", input_names[i],
                   (long long)st->input_bad[i], (long long)st->input_n[i]);
    int flagged = 0;
    for (int i = 0; i < st->nrec; i++) {
        const record *r = &st->rec[i];
        int any = 0;
        for (int t = 0; t < NTENSORS; t++)
            any |= no_score(&r->m[t]);
        if (!any)
            continue;
        char label[160];
        step_label(&(step){STEP_MEASURE, *r, NULL}, label, sizeof label);
        flagged++;
        printf("NO SCORE (values NaN/Inf where the float64 truth differs, metrics nan): %s:", label);
        for (int t = 0; t < NTENSORS; t++) {
            const mxfa_metrics *m = &r->m[t];
            if (m->mismatched_nonfinite)
                printf(" %s %lld/%lld", tensor_names[t], (long long)m->mismatched_nonfinite,
                       (long long)(m->count + m->skipped + m->mismatched_nonfinite));
            else if (m->count == 0)
                printf(" %s (nothing finite)", tensor_names[t]);
        }
        printf("\n");
    }
    return flagged;
}

static void print_demo_findings(const study *st, int quick)
{
    const demo_sizes z = demo_sizes_of(quick);
    const int64_t s_lo = z.seqlens[0], s_hi = z.seqlens[z.nseq - 1], mid = z.s_mid;
    const record *a = find(st, "seqlen", DATA_NORMAL, s_lo, 0, MXFA_MODEL_SM100, MXFA_P_CONST);
    const record *b = find(st, "seqlen", DATA_NORMAL, s_hi, 0, MXFA_MODEL_SM100, MXFA_P_CONST);
    if (a && b)
        printf("sequence length: sm100 dQ SQNR %.1f dB at S=%lld, %.1f dB at S=%lld (O: %.1f -> %.1f dB)\n",
               a->m[T_DQ].sqnr_db, (long long)s_lo, b->m[T_DQ].sqnr_db, (long long)s_hi, a->m[T_O].sqnr_db,
               b->m[T_O].sqnr_db);
    const record *id = find(st, "seqlen", DATA_NORMAL, mid, 0, MXFA_MODEL_IDEAL, MXFA_P_CONST);
    if (id) {
        printf("quantization alone (ideal arithmetic, S=%lld): dQ SQNR %.1f dB; each model's arithmetic on top, dQ "
               "against ideal's:",
               (long long)mid, id->m[T_DQ].sqnr_db);
        for (int m = MXFA_MODEL_SM100; m <= MXFA_MODEL_SM90_BF16; m++) {
            const record *r = find(st, "seqlen", DATA_NORMAL, mid, 0, (mxfa_model)m, MXFA_P_CONST);
            if (r && r->has_ideal)
                printf(" %s %.1f dB", mxfa_model_name((mxfa_model)m), r->mi[T_DQ].sqnr_db);
        }
        printf("\n");
    }
    a = find(st, "outlier", DATA_OUTLIER, mid, 64, MXFA_MODEL_SM90_FP8, MXFA_P_CONST);
    if (a && a->has_ideal)
        printf("with K outliers x64, sm90-fp8's arithmetic alone leaves dQ at %.1f dB SQNR against ideal's "
               "(quantization: %.1f dB against float64)\n",
               a->mi[T_DQ].sqnr_db, a->m[T_DQ].sqnr_db);
    a = find(st, "outlier", DATA_OUTLIER, mid, 1, MXFA_MODEL_SM100, MXFA_P_CONST);
    b = find(st, "outlier", DATA_OUTLIER, mid, 64, MXFA_MODEL_SM100, MXFA_P_CONST);
    if (a && b)
        printf("K outlier channels x1 -> x64: sm100 dK SQNR %.1f -> %.1f dB, O %.1f -> %.1f dB\n",
               a->m[T_DK].sqnr_db, b->m[T_DK].sqnr_db, a->m[T_O].sqnr_db, b->m[T_O].sqnr_db);
    for (int d = 0; d < 3; d++) {
        double outl = d == DATA_OUTLIER ? DEMO_PSCALE_OUTLIER : 0;
        const record *c0 = find(st, "p-scale", (data_kind)d, mid, outl, MXFA_MODEL_SM100, MXFA_P_CONST);
        const record *c1 = find(st, "p-scale", (data_kind)d, mid, outl, MXFA_MODEL_SM100, MXFA_P_DYNAMIC);
        if (c0 && c1)
            printf("P scaling on %-10s: sm100 dQ SQNR %.2f dB const, %.2f dB dynamic (%+.3f dB); O %.2f / %.2f dB "
                   "(a power-of-two scale changes only P's subnormal and saturated values)\n",
                   data_names[d], c0->m[T_DQ].sqnr_db, c1->m[T_DQ].sqnr_db, c1->m[T_DQ].sqnr_db - c0->m[T_DQ].sqnr_db,
                   c0->m[T_O].sqnr_db, c1->m[T_O].sqnr_db);
    }
    if (st->lk[0].ran && st->lk[1].ran) {
        char where[64];
        snprintf(where, sizeof where, "key %lld on, sm100", (long long)st->lk[1].key);
        print_leak(st->lk, where);
    }
}

/* One table of the user findings: the SQNR of every output of every
 * preset and model under const P, against the float64 truth or (vs_ideal)
 * against the ideal model's outputs. */
static void print_user_sqnr(const study *st, const study_opts *o, int vs_ideal)
{
    printf("  %-13s %-9s", "preset", "model");
    for (int t = 0; t < NTENSORS; t++)
        printf(" %7s", tensor_names[t]);
    printf("\n");
    for (int p = 0; p < o->npresets; p++)
        for (int m = 0; m < o->nmodels; m++) {
            const record *r = find_user(st, o->models[m], o->presets[p], MXFA_P_CONST);
            if (!r || (vs_ideal && !r->has_ideal))
                continue;
            printf("  %-13s %-9s", mxfa_preset_name(r->preset), mxfa_model_name(r->model));
            for (int t = 0; t < NTENSORS; t++)
                printf(" %7.2f", vs_ideal ? r->mi[t].sqnr_db : r->m[t].sqnr_db);
            printf("\n");
        }
}

static void print_user_findings(const study *st, const study_opts *o)
{
    printf("against the float64 truth (SQNR dB, const P): quantization and arithmetic together\n");
    print_user_sqnr(st, o, 0);
    if (o->models[0] == MXFA_MODEL_IDEAL && o->nmodels > 1) {
        printf("against the ideal model's outputs (SQNR dB, const P): each model's arithmetic alone\n");
        print_user_sqnr(st, o, 1);
    }
    printf("P scaling, const -> dynamic (dQ SQNR dB against the truth):\n");
    for (int p = 0; p < o->npresets; p++)
        for (int m = 0; m < o->nmodels; m++) {
            const record *c0 = find_user(st, o->models[m], o->presets[p], MXFA_P_CONST);
            const record *c1 = find_user(st, o->models[m], o->presets[p], MXFA_P_DYNAMIC);
            if (c0 && c1)
                printf("  %-13s %-9s %7.2f -> %7.2f (%+.3f)\n", mxfa_preset_name(c0->preset),
                       mxfa_model_name(c0->model), c0->m[T_DQ].sqnr_db, c1->m[T_DQ].sqnr_db,
                       c1->m[T_DQ].sqnr_db - c0->m[T_DQ].sqnr_db);
        }
    if (st->lk[0].ran && st->lk[1].ran) {
        char where[96];
        if (st->batch == 1)
            snprintf(where, sizeof where, "key %lld on, %s %s", (long long)st->lk[1].key,
                     mxfa_model_name(lead_model(o)), mxfa_preset_name(o->presets[0]));
        else
            snprintf(where, sizeof where, "mid-sequence on in each of the %lld sequences, %s %s",
                     (long long)st->batch, mxfa_model_name(lead_model(o)), mxfa_preset_name(o->presets[0]));
        print_leak(st->lk, where);
    }
}

/* ---- output files: a set (outset.h), all written or none ---- */

/* Open dir/name as the set's next file; NULL with the set's err set. */
static FILE *open_in(outset *set, const char *dir, const char *name)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
        snprintf(set->err, sizeof set->err, "%s/%s: path too long", dir, name);
        return NULL;
    }
    return outset_open(set, path);
}

/* results.csv: one row per configuration and output; docs/STUDY.md
 * describes every column. */
static void csv_write(FILE *f, const study *st)
{
    fprintf(f, "section,data,batch,seqlen,heads,dim,outlier,model,preset,p_scale,causal,tensor,rel_l2,cosine,sqnr_db,"
               "max_abs,count,nonfinite,vs_ideal_rel_l2,vs_ideal_sqnr_db,vs_ideal_max_abs\n");
    for (int i = 0; i < st->nrec; i++) {
        const record *r = &st->rec[i];
        for (int t = 0; t < NTENSORS; t++) {
            fprintf(f, "%s,%s,%lld,%lld,%lld,%lld,%g,%s,%s,%s,%s,%s,%.9g,%.9g,%.6g,%.9g,%lld,%lld", r->section,
                    data_names[r->data], (long long)st->batch, (long long)r->seqlen, (long long)st->heads,
                    (long long)st->dim, r->outlier, mxfa_model_name(r->model), mxfa_preset_name(r->preset),
                    mxfa_p_scale_name(r->pscale), causal_name(r->causal), tensor_names[t], r->m[t].rel_l2,
                    r->m[t].cosine, r->m[t].sqnr_db, r->m[t].max_abs, (long long)r->m[t].count,
                    (long long)r->m[t].mismatched_nonfinite);
            if (r->has_ideal)
                fprintf(f, ",%.9g,%.6g,%.9g\n", r->mi[t].rel_l2, r->mi[t].sqnr_db, r->mi[t].max_abs);
            else
                fputs(",,,\n", f);
        }
    }
}

/* ---- the plots ---- */

/* The x axis of a sweep chart: sequence length or outlier magnitude (in
 * powers of two), or the place of a record's preset among the study's. */
typedef enum x_kind { X_SEQLEN, X_OUTLIER, X_PRESET } x_kind;

static double x_of(const record *r, x_kind x, const study_opts *o)
{
    if (x == X_SEQLEN)
        return (double)r->seqlen;
    if (x == X_OUTLIER)
        return r->outlier;
    for (int p = 0; p < o->npresets; p++)
        if (o->presets[p] == r->preset)
            return p;
    return NAN;
}

enum { SWEEP_POINTS = 16 };

/* Add to panel p the series of the records of `section` under const P
 * and the given model: the SQNR of tensor t against the float64 truth, or
 * with vs_ideal against the ideal model's; xs and ys hold its points. */
static void sweep_series(svg_panel *p, const study *st, const char *section, x_kind x, const study_opts *o,
                         int model, int t, int vs_ideal, const char *name, double *xs, double *ys)
{
    int n = 0;
    for (int i = 0; i < st->nrec && n < SWEEP_POINTS; i++) {
        const record *r = &st->rec[i];
        if (strcmp(r->section, section) || r->pscale != MXFA_P_CONST || (int)r->model != model ||
            (vs_ideal && !r->has_ideal))
            continue;
        xs[n] = x_of(r, x, o);
        ys[n++] = vs_ideal ? r->mi[t].sqnr_db : r->m[t].sqnr_db;
    }
    if (n > 0 && p->nseries < SVG_MAX_SERIES)
        p->series[p->nseries++] = (svg_series){name, n, xs, ys, 0};
}

/* A chart against x from a section's records, in three panels: the SQNR
 * against float64 of O, dQ, dK and dV under the lead model (the
 * quantization, mostly); that of LSE, which is far more accurate, under
 * each model; and that of each model's dQ against the ideal model's (the
 * arithmetic alone), when ideal ran. */
static int sweep_chart(FILE *f, const study *st, const char *section, x_kind x, const study_opts *o,
                       const char *title)
{
    static double xs[3][SVG_MAX_SERIES][SWEEP_POINTS], ys[3][SVG_MAX_SERIES][SWEEP_POINTS];
    static const char *cats[4];
    static char lead_title[64];
    const char *xlabel = x == X_SEQLEN ? "sequence length" : x == X_OUTLIER ? "outlier channel magnitude (x std)"
                                                                             : "scale preset";
    const mxfa_model lead = lead_model(o);
    snprintf(lead_title, sizeof lead_title, "%s against float64", mxfa_model_name(lead));
    svg_chart c = {title, 0, {{0}}};
    svg_panel *p = &c.panel[c.npanels++];
    *p = (svg_panel){lead_title, xlabel, "SQNR (dB)", x != X_PRESET, 0, {{0}}, NULL, 0};
    for (int t = 0; t < NTENSORS; t++)
        if (t != T_LSE)
            sweep_series(p, st, section, x, o, lead, t, 0, tensor_names[t], xs[0][p->nseries], ys[0][p->nseries]);
    p = &c.panel[c.npanels++];
    *p = (svg_panel){"LSE against float64", xlabel, "SQNR (dB)", x != X_PRESET, 0, {{0}}, NULL, 0};
    for (int m = 0; m < o->nmodels; m++)
        sweep_series(p, st, section, x, o, o->models[m], T_LSE, 0, mxfa_model_name(o->models[m]), xs[1][p->nseries],
                     ys[1][p->nseries]);
    p = &c.panel[c.npanels];
    *p = (svg_panel){"dQ: each model against ideal", xlabel, "SQNR (dB)", x != X_PRESET, 0, {{0}}, NULL, 0};
    for (int m = 0; m < o->nmodels; m++)
        if (o->models[m] != MXFA_MODEL_IDEAL)
            sweep_series(p, st, section, x, o, o->models[m], T_DQ, 1, mxfa_model_name(o->models[m]),
                         xs[2][p->nseries], ys[2][p->nseries]);
    c.npanels += p->nseries > 0;
    if (x == X_PRESET) {
        for (int i = 0; i < o->npresets; i++)
            cats[i] = mxfa_preset_name(o->presets[i]);
        for (int i = 0; i < c.npanels; i++)
            c.panel[i].xcat = cats, c.panel[i].ncat = o->npresets;
    }
    return svg_write(f, &c);
}

/* The dQ error histograms: ideal's against float64 (the quantization)
 * and each other model's against ideal's (its arithmetic), or, when ideal
 * did not run, each model's against float64. */
static int histogram_chart(FILE *f, const study *st, const char *title)
{
    static double edges[HIST_BINS + 1];
    for (int b = 0; b <= HIST_BINS; b++)
        edges[b] = HIST_LO + b * HIST_STEP;
    svg_chart c = {title, 1, {{0}}};
    svg_panel *p = &c.panel[0];
    p->title = "per-element difference";
    p->xlabel = "log10 |dQ - reference| (leftmost bin: equal, or below 1e-10)";
    p->ylabel = "% of elements";
    p->nseries = st->nhist;
    for (int s = 0; s < st->nhist; s++)
        p->series[s] = (svg_series){st->hist_name[s], HIST_BINS, edges, st->hist[s], 1};
    return svg_write(f, &c);
}

/* Write results.csv and the plots into out_dir, all or none; *names gets
 * the list of their names for the message. 0 or an exit status. */
static int write_files(const study *st, const study_opts *o, const char *out_dir, const char **names)
{
    static outset fs; /* large: not on the stack */
    FILE *f;
    int bad = 0;
    char hist_title[96];
    fs.n = 0;
    fs.err[0] = '\0';
    if ((f = open_in(&fs, out_dir, "results.csv")) != NULL) {
        csv_write(f, st);
        bad |= outset_close(&fs, f);
    } else {
        bad = 1;
    }
    if (o->demo) {
        if (!bad && (f = open_in(&fs, out_dir, "error_vs_seqlen.svg")) != NULL) {
            bad |= sweep_chart(f, st, "seqlen", X_SEQLEN, o,
                               "MXFP8 attention: error against sequence length (normal data)");
            bad |= outset_close(&fs, f);
        } else {
            bad = 1;
        }
        if (!bad && (f = open_in(&fs, out_dir, "error_vs_outlier.svg")) != NULL) {
            bad |= sweep_chart(f, st, "outlier", X_OUTLIER, o,
                               "MXFP8 attention: error against outlier channels in K");
            bad |= outset_close(&fs, f);
        } else {
            bad = 1;
        }
        snprintf(hist_title, sizeof hist_title, "dQ error: normal data, S=%lld, rceil, const P",
                 (long long)demo_sizes_of(o->quick).s_mid);
        *names = "results.csv, error_vs_seqlen.svg, error_vs_outlier.svg, error_histogram.svg";
    } else {
        if (!bad && (f = open_in(&fs, out_dir, "error_by_preset.svg")) != NULL) {
            bad |= sweep_chart(f, st, "user", X_PRESET, o, "MXFP8 attention on the given tensors: error by preset");
            bad |= outset_close(&fs, f);
        } else {
            bad = 1;
        }
        snprintf(hist_title, sizeof hist_title, "dQ error: the given tensors, %s, const P",
                 mxfa_preset_name(o->presets[0]));
        *names = "results.csv, error_by_preset.svg, error_histogram.svg";
    }
    if (!bad && (f = open_in(&fs, out_dir, "error_histogram.svg")) != NULL) {
        bad |= histogram_chart(f, st, hist_title);
        bad |= outset_close(&fs, f);
    } else {
        bad = 1;
    }
    if (bad) {
        outset_discard(&fs);
        return cli_error(cmd, "%s: could not write the results: %s", out_dir, fs.err);
    }
    return outset_commit(&fs) ? cli_error(cmd, "%s: could not write the results: %s", out_dir, fs.err) : 0;
}

/* ---- the command line ---- */

/* A name of a --models or --presets list: its enum value, or -1. */
static int model_of(const char *name)
{
    mxfa_model m;
    return mxfa_model_parse(name, &m) == MXFA_OK ? (int)m : -1;
}

static int preset_of(const char *name)
{
    mxfa_preset p;
    return mxfa_preset_parse(name, &p) == MXFA_OK ? (int)p : -1;
}

/* A comma-separated list of distinct names of an enum of 4 values (0 to
 * 3), or "all": their values in out, in the order given, *n of them.
 * choices: the names, for the message. 0 or an exit status. */
static int parse_list(const char *opt, const char *arg, int (*value_of)(const char *), const char *choices, int *out,
                      int *n)
{
    if (!strcmp(arg, "all")) {
        for (*n = 0; *n < 4; (*n)++)
            out[*n] = *n;
        return 0;
    }
    char buf[256];
    if (snprintf(buf, sizeof buf, "%s", arg) >= (int)sizeof buf)
        return cli_usage(cmd, "%s: list too long", opt);
    *n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int v = value_of(tok);
        if (v < 0 || *n == 4)
            return cli_usage(cmd, "%s: '%s' is not one of %s (each once)", opt, tok, choices);
        for (int i = 0; i < *n; i++)
            if (out[i] == v)
                return cli_usage(cmd, "%s: '%s' is given twice", opt, tok);
        out[(*n)++] = v;
    }
    return *n ? 0 : cli_usage(cmd, "%s: empty list", opt);
}

static int parse_models(const char *arg, study_opts *o)
{
    int v[4], rc = parse_list("--models", arg, model_of, "ideal, sm100, sm90-fp8, sm90-bf16", v, &o->nmodels);
    /* in enum order: ideal first, the others measured against it */
    for (int m = 0, k = 0; !rc && m < 4; m++)
        for (int i = 0; i < o->nmodels; i++)
            if (v[i] == m)
                o->models[k++] = (mxfa_model)m;
    return rc;
}

static int parse_presets(const char *arg, study_opts *o)
{
    int v[4], rc = parse_list("--presets", arg, preset_of, "rceil, ocp, torchao-rceil, microxcaling", v,
                              &o->npresets);
    for (int i = 0; !rc && i < o->npresets; i++)
        o->presets[i] = (mxfa_preset)v[i];
    return rc;
}

/* Whether dir exists as a directory, or was made. 0 or an exit status. */
static int ensure_dir(const char *dir)
{
    struct stat sb;
    if (stat(dir, &sb) == 0)
        return S_ISDIR(sb.st_mode) ? 0 : cli_error(cmd, "--out %s: exists and is not a directory", dir);
    if (mkdir(dir, 0777) != 0)
        return cli_error(cmd, "--out %s: %s", dir, strerror(errno));
    return 0;
}

/* Count (and warn of) the NaN/Inf values of the user's tensors. */
static void check_user_inputs(study *st, const inputs *in)
{
    static const char *const names[4] = {"Q", "K", "V", "dO"};
    const float *x[4] = {in->q, in->k, in->v, in->dout};
    const int64_t n[4] = {in->sq * in->hq * in->d, in->sk * in->hkv * in->d, in->sk * in->hkv * in->d,
                          in->sq * in->hq * in->d};
    for (int i = 0; i < 4; i++) {
        st->input_n[i] = n[i];
        st->input_bad[i] = cli_count_nonfinite(x[i], n[i]);
        if (st->input_bad[i])
            cli_warn(cmd, "%s holds %lld NaN/Inf values of %lld: the outputs they reach are NaN too", names[i],
                     (long long)st->input_bad[i], (long long)n[i]);
    }
}

int cmd_study(int argc, char **argv)
{
    const char *out_dir = NULL, *pq = NULL, *pk = NULL, *pv = NULL, *pdo = NULL, *backend = "auto";
    const char *cu_q = NULL, *cu_k = NULL;
    study_opts o = {0, 0, 1, {MXFA_MODEL_IDEAL, MXFA_MODEL_SM100, MXFA_MODEL_SM90_FP8, MXFA_MODEL_SM90_BF16}, 4,
                    {MXFA_PRESET_RCEIL}, 1, MXFA_CAUSAL_NONE};
    int given_presets = 0, given_causal = 0, c, rc;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (c) {
        case OPT_DEMO: o.demo = 1; break;
        case OPT_QUICK: o.quick = 1; break;
        case OPT_OUT: out_dir = optarg; break;
        case OPT_Q: pq = optarg; break;
        case OPT_K: pk = optarg; break;
        case OPT_V: pv = optarg; break;
        case OPT_DO: pdo = optarg; break;
        case OPT_CUQ: cu_q = optarg; break;
        case OPT_CUK: cu_k = optarg; break;
        case OPT_BACKEND: backend = optarg; break;
        case OPT_CAUSAL: o.causal = MXFA_CAUSAL, given_causal = 1; break;
        case OPT_CAUSAL_PLAIN: o.causal = MXFA_CAUSAL_PLAIN, given_causal = 1; break;
        case OPT_MODELS:
            if ((rc = parse_models(optarg, &o)) != 0)
                return rc;
            break;
        case OPT_PRESETS:
            if ((rc = parse_presets(optarg, &o)) != 0)
                return rc;
            given_presets = 1;
            break;
        case OPT_SEED: {
            char *end;
            errno = 0;
            long seed = strtol(optarg, &end, 10);
            if (*end || end == optarg || errno || seed < 0)
                return cli_usage(cmd, "--seed: '%s' is not a non-negative integer", optarg);
            o.seed = (uint64_t)seed;
            break;
        }
        case 'h': fputs(study_help, stdout); return 0;
        default: return cli_usage(cmd, "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    int user = pq || pk || pv || pdo;
    if (o.demo == user)
        return cli_usage(cmd, "give either --demo or the tensors --q, --k and --v");
    if (user && (!pq || !pk || !pv))
        return cli_usage(cmd, "--q, --k and --v are all needed");
    if (!out_dir)
        return cli_usage(cmd, "--out DIR is needed");
    if (o.quick && !o.demo)
        return cli_usage(cmd, "--quick goes with --demo");
    if (o.demo && (given_presets || given_causal || cu_q || cu_k))
        return cli_usage(cmd, "--presets, --causal, --causal-plain and --cu-seqlens-q/-k go with tensors "
                              "(the demo sweeps presets and causal modes itself)");
    if (!cu_q != !cu_k)
        return cli_usage(cmd, "give both --cu-seqlens-q and --cu-seqlens-k, or neither");

    study st = {0};
    inputs in = {0};
    plan p = {0};
    if ((rc = cli_open(cmd, backend, &st.ctx)) != 0)
        return rc;
    /* the golden test: a usable GPU backend checked against this one */
    char why[256] = "";
    if (strcmp(mxfa_backend_name(st.ctx), "cuda") != 0 && mxfa_backend_usable("cuda", why, sizeof why) &&
        mxfa_open(&st.gpu, "cuda") != MXFA_OK) {
        snprintf(why, sizeof why, "%s", mxfa_last_error(NULL));
        st.gpu = NULL;
    }
    if (user && (rc = load_user(pq, pk, pv, pdo, cu_q, cu_k, &in)) != 0)
        goto done;
    if ((rc = ensure_dir(out_dir)) != 0)
        goto done;
    if ((rc = o.demo ? plan_demo(&p, &o) : plan_user(&p, &o, &in)) != 0)
        goto done;
    st.tty = isatty(fileno(stderr));
    st.t0 = cli_now();
    printf("mxfa %s study: %s backend, %s\n", mxfa_version(), mxfa_backend_name(st.ctx),
           o.demo ? "synthetic data (heads 2, head dim 64)" : "the given tensors");
    if (user) {
        check_user_inputs(&st, &in);
        st.gen = 1;
    }
    rc = run_plan(&st, &p, o.seed, &in);
    if (st.tty)
        fputs("\r\033[K", stderr);
    if (rc)
        goto done;
    fprintf(stderr, "%d steps in %.1f s: %d configurations measured, %d causal-leak checks\n", st.step,
            cli_now() - st.t0, st.nrec, st.step - st.nrec);

    if (o.demo) {
        print_section(&st, "seqlen", "1. error against sequence length (normal data, rceil, const P)");
        print_section(&st, "outlier", "2. error against outlier channels in K");
        print_section(&st, "p-scale", "3. const against dynamic P scaling");
        print_section(&st, "preset", "4. scale presets (sm100, const P)");
    } else {
        print_section(&st, "user", "error of each model, preset and P scaling on the given tensors");
    }
    printf("\n== findings\n");
    if (o.demo)
        print_demo_findings(&st, o.quick);
    else
        print_user_findings(&st, &o);
    int flagged = print_no_scores(&st);
    if (st.gpu)
        printf("golden test: %s backend against %s on every configuration its kernels compute: %lld of %lld "
               "bit-identical\n",
               mxfa_backend_name(st.gpu), mxfa_backend_name(st.ctx), (long long)(st.golden_runs - st.golden_diff),
               (long long)st.golden_runs);
    else
        printf("golden test: no GPU backend usable here (%s)\n", why[0] ? why : "cuda");
    fflush(stdout);
    if (flagged)
        cli_warn(cmd, "%d of %d configurations have outputs that are NaN/Inf where the float64 truth differs, or "
                 "nothing finite: no score (nan), see NO SCORE in the findings and the nonfinite column",
                 flagged, st.nrec);

    const char *names = "";
    if ((rc = write_files(&st, &o, out_dir, &names)) == 0)
        printf("wrote %s/%s\n", out_dir, names);
done:
    plan_free(&p);
    inputs_free(&in);
    free(st.rec);
    outputs_free(&st.ideal);
    if (st.gpu)
        mxfa_close(st.gpu);
    mxfa_close(st.ctx);
    return rc;
}
