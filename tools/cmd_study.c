/*
 * mxfa study: MXFP8 attention forward and backward against the float64
 * truth, across numerics models, presets, P scalings and causal modes, on
 * built-in synthetic data or the user's tensors. Writes a table to stdout
 * and, into --out DIR, results.csv and SVG plots, all or none of them.
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
#include "svg.h"

static const char study_help[] =
    "usage: mxfa study --demo --out DIR [options]\n"
    "       mxfa study --q Q.npy --k K.npy --v V.npy [--do dO.npy] --out DIR [options]\n"
    "\n"
    "Runs MXFP8 attention forward and backward and measures the error of O, LSE,\n"
    "dQ, dK and dV against the float64 truth (relative L2, cosine, SQNR, max abs).\n"
    "--demo sweeps built-in synthetic data shaped like LLM attention: sequence\n"
    "length, outlier channels in K, an attention sink, every model, const against\n"
    "dynamic P, the presets, and the causal leak of per-32-key V scales. With\n"
    "tensors (float32, Q [S, Hq, D], K and V [Sk, Hkv, D], dO like Q, random when\n"
    "not given) it sweeps the models and P scalings on them.\n"
    "Writes DIR/results.csv (every number), DIR/*.svg (plots) and the table on\n"
    "stdout; the files appear together or not at all.\n"
    "  --models LIST|all       ideal,sm100,sm90-fp8,sm90-bf16 (default all)\n"
    "  --preset NAME           with tensors: scale rule (default rceil)\n"
    "  --causal, --causal-plain  with tensors: causal masking (default none)\n"
    "  --quick                 --demo at smaller sizes (seconds; for tests)\n"
    "  --seed N                synthetic data seed (default 1)\n"
    "  --backend auto|ref|cpu|cuda                      (default auto)\n";

enum { OPT_DEMO = 256, OPT_OUT, OPT_Q, OPT_K, OPT_V, OPT_DO, OPT_MODELS, OPT_PRESET, OPT_CAUSAL, OPT_CAUSAL_PLAIN,
       OPT_QUICK, OPT_SEED, OPT_BACKEND };

static const struct option options[] = {
    {"demo", no_argument, NULL, OPT_DEMO},
    {"out", required_argument, NULL, OPT_OUT},
    {"q", required_argument, NULL, OPT_Q},
    {"k", required_argument, NULL, OPT_K},
    {"v", required_argument, NULL, OPT_V},
    {"do", required_argument, NULL, OPT_DO},
    {"models", required_argument, NULL, OPT_MODELS},
    {"preset", required_argument, NULL, OPT_PRESET},
    {"causal", no_argument, NULL, OPT_CAUSAL},
    {"causal-plain", no_argument, NULL, OPT_CAUSAL_PLAIN},
    {"quick", no_argument, NULL, OPT_QUICK},
    {"seed", required_argument, NULL, OPT_SEED},
    {"backend", required_argument, NULL, OPT_BACKEND},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static const char *const cmd = "study";

/* ---- inputs ---- */

typedef struct inputs {
    int64_t sq, sk, hq, hkv, d;
    float *q, *k, *v, *dout;
} inputs;

static void inputs_free(inputs *in)
{
    free(in->q), free(in->k), free(in->v), free(in->dout);
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

/* The synthetic data sets. */
typedef enum data_kind {
    DATA_NORMAL,  /* Q, K, V, dO standard normal */
    DATA_OUTLIER, /* K with two outlier channels `outlier` times larger */
    DATA_SINK,    /* key 0 a sink: every query's score with it about 12 above the rest */
    DATA_USER
} data_kind;

static const char *const data_names[] = {"normal", "k-outliers", "sink", "user"};

enum { DEMO_HEADS = 2, DEMO_DIM = 64 };

/* 0, or an exit status */
static int make_inputs(data_kind kind, int64_t s, double outlier, uint64_t seed, inputs *in)
{
    rng_state = seed * 0x2545F4914F6CDD1Du + 1;
    in->sq = in->sk = s;
    in->hq = in->hkv = DEMO_HEADS;
    in->d = DEMO_DIM;
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
    if (!t->o || !t->dq || !t->lse || !t->dk || !t->dv) {
        truth_free(t);
        return cli_error(cmd, "out of memory");
    }
    mxfa_tensor x[4], y[5];
    input_tensors(in, x);
    output_tensors(in, MXFA_F64, t->o, t->lse, t->dq, t->dk, t->dv, y);
    if (mxfa_attn_fwd_f64(ctx, &p, &x[0], &x[1], &x[2], NULL, NULL, 1, &y[0], &y[1]) != MXFA_OK ||
        mxfa_attn_bwd_f64(ctx, &p, &x[0], &x[1], &x[2], &x[3], NULL, NULL, 1, &y[2], &y[3], &y[4]) != MXFA_OK) {
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
static int run_attn(mxfa_ctx *ctx, const inputs *in, const record *rec, int backward, outputs *out)
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
    if (mxfa_attn_fwd(ctx, &p, &x[0], &x[1], &x[2], NULL, NULL, 1, &y[0], &y[1]) != MXFA_OK ||
        (backward && mxfa_attn_bwd(ctx, &p, &x[0], &x[1], &x[2], &y[0], &x[3], &y[1], NULL, NULL, 1, &y[2], &y[3],
                                   &y[4]) != MXFA_OK)) {
        outputs_free(out);
        return cli_error(cmd, "%s backend, model %s: %s", mxfa_backend_name(ctx), mxfa_model_name(rec->model),
                         mxfa_last_error(ctx));
    }
    return 0;
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

/* ---- the study: records, progress, the golden test ---- */

typedef struct study {
    mxfa_ctx *ctx, *gpu; /* gpu: a GPU backend to check against ctx bit for bit, or NULL */
    int gen, ideal_gen;  /* the inputs in use, and those `ideal` was computed on */
    int64_t heads, dim;  /* of the query inputs, for the CSV */
    outputs ideal;       /* the ideal model's outputs, for the other models' arithmetic error */
    record ideal_cfg;    /* and its configuration */
    record *rec;
    int nrec, cap;
    int step, steps, tty;
    double t0;
    int64_t golden_runs, golden_diff;
    /* dQ error histograms (log10 |dQ - truth|), for the plot */
    int nhist;
    char hist_name[SVG_MAX_SERIES][48];
    double hist[SVG_MAX_SERIES][48];
} study;

static void progress(study *st, const record *r)
{
    st->step++;
    fprintf(stderr, "%s[%d/%d %5.1fs] %s S=%lld %s %s %s P %s%s", st->tty ? "\r\033[K" : "", st->step, st->steps,
            cli_now() - st->t0, data_names[r->data], (long long)r->seqlen, mxfa_model_name(r->model),
            mxfa_preset_name(r->preset), causal_name(r->causal), mxfa_p_scale_name(r->pscale), st->tty ? "" : "\n");
    fflush(stderr);
}

enum { HIST_BINS = 48 };
#define HIST_LO (-10.0)
#define HIST_STEP 0.25

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
    progress(st, &r);
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
    if (!rc && st->gpu) {
        outputs g;
        rc = run_attn(st->gpu, in, &r, 1, &g);
        if (!rc) {
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

/* ---- the table ---- */

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

/* ---- output files: written beside their final names (npy.h's temporary
 * files), renamed together ---- */

enum { MAX_FILES = 8 };

typedef struct fileset {
    int n;
    char path[MAX_FILES][PATH_MAX], tmp[MAX_FILES][PATH_MAX + 16];
    char err[PATH_MAX + 256];
} fileset;

static FILE *fileset_open(fileset *fs, const char *dir, const char *name)
{
    if (fs->n == MAX_FILES)
        return NULL;
    int i = fs->n;
    if (snprintf(fs->path[i], PATH_MAX, "%s/%s", dir, name) >= PATH_MAX) {
        snprintf(fs->err, sizeof fs->err, "%s/%s: path too long", dir, name);
        return NULL;
    }
    FILE *f = npy_create_temp(fs->path[i], fs->tmp[i], sizeof fs->tmp[i], fs->err, sizeof fs->err);
    if (f)
        fs->n++;
    return f;
}

/* Close f, the set's newest file; -1 (the file removed) if anything failed
 * to be written. */
static int fileset_close(fileset *fs, FILE *f)
{
    int i = fs->n - 1;
    if (npy_close_temp(f, fs->tmp[i], fs->path[i], fs->err, sizeof fs->err) == MXFA_OK)
        return 0;
    fs->n--;
    return -1;
}

static void fileset_discard(fileset *fs)
{
    for (int i = 0; i < fs->n; i++)
        npy_discard(fs->tmp[i]);
    fs->n = 0;
}

static int fileset_commit(fileset *fs)
{
    for (int i = 0; i < fs->n; i++)
        if (npy_commit(fs->tmp[i], fs->path[i], fs->err, sizeof fs->err) != MXFA_OK) {
            for (int j = i + 1; j < fs->n; j++)
                npy_discard(fs->tmp[j]);
            return cli_error(cmd, "%s", fs->err);
        }
    return 0;
}

static void csv_write(FILE *f, const study *st)
{
    fprintf(f, "section,data,seqlen,heads,dim,outlier,model,preset,p_scale,causal,tensor,rel_l2,cosine,sqnr_db,"
               "max_abs,count,ideal_rel_l2,ideal_sqnr_db,ideal_max_abs\n");
    for (int i = 0; i < st->nrec; i++) {
        const record *r = &st->rec[i];
        for (int t = 0; t < NTENSORS; t++) {
            fprintf(f, "%s,%s,%lld,%lld,%lld,%g,%s,%s,%s,%s,%s,%.9g,%.9g,%.6g,%.9g,%lld", r->section,
                    data_names[r->data], (long long)r->seqlen, (long long)st->heads, (long long)st->dim, r->outlier,
                    mxfa_model_name(r->model), mxfa_preset_name(r->preset), mxfa_p_scale_name(r->pscale),
                    causal_name(r->causal), tensor_names[t], r->m[t].rel_l2, r->m[t].cosine, r->m[t].sqnr_db,
                    r->m[t].max_abs, (long long)r->m[t].count);
            if (r->has_ideal)
                fprintf(f, ",%.9g,%.6g,%.9g\n", r->mi[t].rel_l2, r->mi[t].sqnr_db, r->mi[t].max_abs);
            else
                fputs(",,,\n", f);
        }
    }
}

/* A chart against x (sequence length or outlier magnitude) from a
 * section's records: the SQNR of every output against float64 under
 * sm100 (the quantization), and that of dQ against the ideal model's dQ
 * for the other models (their arithmetic alone). */
static int sweep_chart(FILE *f, const study *st, const char *section, int by_outlier, const mxfa_model *models,
                       int nmodels, const char *title)
{
    svg_chart c = {title, 2, {{0}}};
    static double xs[2][SVG_MAX_SERIES][16], ys[2][SVG_MAX_SERIES][16];
    const char *xlabel = by_outlier ? "outlier channel magnitude (x std)" : "sequence length";
    c.panel[0] = (svg_panel){"sm100 against float64", xlabel, "SQNR (dB)", 1, NTENSORS, {{0}}};
    c.panel[1] = (svg_panel){"dQ: each model against ideal", xlabel, "SQNR (dB)", 1, 0, {{0}}};
    for (int t = 0; t < NTENSORS; t++) {
        int n = 0;
        for (int i = 0; i < st->nrec && n < 16; i++) {
            const record *r = &st->rec[i];
            if (!strcmp(r->section, section) && r->model == MXFA_MODEL_SM100) {
                xs[0][t][n] = by_outlier ? r->outlier : (double)r->seqlen;
                ys[0][t][n++] = r->m[t].sqnr_db;
            }
        }
        c.panel[0].series[t] = (svg_series){tensor_names[t], n, xs[0][t], ys[0][t], 0};
    }
    for (int m = 0; m < nmodels; m++) {
        if (models[m] == MXFA_MODEL_IDEAL)
            continue;
        int n = 0, k = c.panel[1].nseries++;
        for (int i = 0; i < st->nrec && n < 16; i++) {
            const record *r = &st->rec[i];
            if (!strcmp(r->section, section) && r->model == models[m] && r->has_ideal) {
                xs[1][k][n] = by_outlier ? r->outlier : (double)r->seqlen;
                ys[1][k][n++] = r->mi[T_DQ].sqnr_db;
            }
        }
        c.panel[1].series[k] = (svg_series){mxfa_model_name(models[m]), n, xs[1][k], ys[1][k], 0};
    }
    return svg_write(f, &c);
}

static int histogram_chart(FILE *f, const study *st, const char *title)
{
    static double edges[HIST_BINS + 1];
    for (int b = 0; b <= HIST_BINS; b++)
        edges[b] = HIST_LO + b * HIST_STEP;
    svg_chart c = {title, 1, {{0}}};
    svg_panel *p = &c.panel[0];
    p->title = "dQ: per-element difference";
    p->xlabel = "log10 |dQ - reference| (leftmost bin: equal, or below 1e-10)";
    p->ylabel = "% of elements";
    p->nseries = st->nhist;
    for (int s = 0; s < st->nhist; s++)
        p->series[s] = (svg_series){st->hist_name[s], HIST_BINS, edges, st->hist[s], 1};
    return svg_write(f, &c);
}

/* ---- the demo ---- */

static const mxfa_model all_models[] = {MXFA_MODEL_IDEAL, MXFA_MODEL_SM100, MXFA_MODEL_SM90_FP8, MXFA_MODEL_SM90_BF16};

typedef struct leak {
    int64_t rows;      /* rows before the changed keys */
    int64_t moved;     /* of them, rows whose O changed */
    double max_rel;    /* largest relative change of such a row (L2) */
} leak;

/* The causal leak: V changed only at keys >= t (scaled by LEAK_FACTOR,
 * like a token with massive activations) must not change O at rows < t;
 * with per-32-key V scales across the diagonal it does for the rows that
 * share a block with key t. */
#define LEAK_FACTOR 1024.0f
static int causal_leak(study *st, const inputs *in, mxfa_causal causal, int64_t t, leak *out)
{
    inputs in2 = *in;
    int64_t n = in->sk * in->hkv * in->d;
    in2.v = malloc((size_t)n * 4);
    if (!in2.v)
        return cli_error(cmd, "out of memory");
    memcpy(in2.v, in->v, (size_t)n * 4);
    for (int64_t i = t * in->hkv * in->d; i < n; i++)
        in2.v[i] *= LEAK_FACTOR;
    record r = mkrec("leak", DATA_NORMAL, in->sq, 0, MXFA_MODEL_SM100, MXFA_PRESET_RCEIL, MXFA_P_CONST, causal);
    progress(st, &r);
    outputs a, b;
    int rc = run_attn(st->ctx, in, &r, 0, &a);
    if (!rc && (rc = run_attn(st->ctx, &in2, &r, 0, &b)) != 0)
        outputs_free(&a);
    free(in2.v);
    if (rc)
        return rc;
    memset(out, 0, sizeof *out);
    int64_t row = in->hq * in->d;
    for (int64_t i = 0; i < t; i++) {
        const float *x = &a.o[i * row], *y = &b.o[i * row];
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
    outputs_free(&a);
    outputs_free(&b);
    return 0;
}

/* New synthetic inputs and their truth (non-causal). */
static int fresh(study *st, data_kind kind, int64_t s, double outlier, uint64_t seed, inputs *in, truth *t)
{
    truth_free(t), inputs_free(in);
    int rc = make_inputs(kind, s, outlier, seed, in);
    if (!rc)
        rc = make_truth(st->ctx, in, MXFA_CAUSAL_NONE, t);
    st->gen++;
    st->heads = in->hq, st->dim = in->d;
    return rc;
}

typedef struct demo_sizes {
    int64_t seqlens[4];
    int nseq;
    int64_t s_mid; /* the length of the other sweeps */
} demo_sizes;

static int run_demo(study *st, int quick, uint64_t seed, const mxfa_model *models, int nmodels, leak lk[2])
{
    const demo_sizes z = quick ? (demo_sizes){{64, 128}, 2, 128} : (demo_sizes){{256, 512, 1024, 2048}, 4, 512};
    static const double outliers[] = {1, 4, 16, 64};
    const data_kind pdata[3] = {DATA_NORMAL, DATA_OUTLIER, DATA_SINK};
    st->steps = z.nseq * nmodels + 4 * nmodels + 3 * 2 * 2 + 4 + 2;
    int rc = 0;
    inputs in = {0};
    truth t = {0};
    /* 1: sequence length */
    for (int i = 0; !rc && i < z.nseq; i++) {
        if ((rc = fresh(st, DATA_NORMAL, z.seqlens[i], 0, seed, &in, &t)) != 0)
            break;
        for (int m = 0; !rc && m < nmodels; m++)
            rc = run_one(st, &in, &t,
                         mkrec("seqlen", DATA_NORMAL, z.seqlens[i], 0, models[m], MXFA_PRESET_RCEIL, MXFA_P_CONST,
                               MXFA_CAUSAL_NONE),
                         z.seqlens[i] == z.s_mid ? mxfa_model_name(models[m]) : NULL);
        truth_free(&t), inputs_free(&in);
    }
    /* 2: outlier channels in K */
    for (int i = 0; !rc && i < 4; i++) {
        if ((rc = fresh(st, DATA_OUTLIER, z.s_mid, outliers[i], seed, &in, &t)) != 0)
            break;
        for (int m = 0; !rc && m < nmodels; m++)
            rc = run_one(st, &in, &t,
                         mkrec("outlier", DATA_OUTLIER, z.s_mid, outliers[i], models[m], MXFA_PRESET_RCEIL, MXFA_P_CONST, MXFA_CAUSAL_NONE),
                         NULL);
        truth_free(&t), inputs_free(&in);
    }
    /* 3: const against dynamic P, on each kind of data, Blackwell and Hopper */
    const mxfa_model pm[2] = {MXFA_MODEL_SM100, MXFA_MODEL_SM90_FP8};
    for (int i = 0; !rc && i < 3; i++) {
        double outl = pdata[i] == DATA_OUTLIER ? 16 : 0;
        if ((rc = fresh(st, pdata[i], z.s_mid, outl, seed, &in, &t)) != 0)
            break;
        for (int m = 0; !rc && m < 2; m++)
            for (int ps = 0; !rc && ps < 2; ps++)
                rc = run_one(st, &in, &t,
                             mkrec("p-scale", pdata[i], z.s_mid, outl, pm[m], MXFA_PRESET_RCEIL, (mxfa_p_scale)ps,
                                   MXFA_CAUSAL_NONE),
                             NULL);
        truth_free(&t), inputs_free(&in);
    }
    /* 4: the presets, and 5: the causal leak */
    if (!rc && !(rc = fresh(st, DATA_NORMAL, z.s_mid, 0, seed, &in, &t)))
        for (int p = 0; !rc && p < 4; p++)
            rc = run_one(st, &in, &t,
                         mkrec("preset", DATA_NORMAL, z.s_mid, 0, MXFA_MODEL_SM100, (mxfa_preset)p, MXFA_P_CONST, MXFA_CAUSAL_NONE),
                         NULL);
    for (int c = 0; !rc && c < 2; c++)
        rc = causal_leak(st, &in, c ? MXFA_CAUSAL_PLAIN : MXFA_CAUSAL, z.s_mid / 2 + 16, &lk[c]);
    truth_free(&t), inputs_free(&in);
    return rc;
}

static void print_findings(const study *st, int quick, const leak lk[2])
{
    const int64_t s_lo = quick ? 64 : 256, s_hi = quick ? 128 : 2048, mid = quick ? 128 : 512;
    printf("\n== findings\n");
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
        double outl = d == DATA_OUTLIER ? 16 : 0;
        const record *c0 = find(st, "p-scale", (data_kind)d, mid, outl, MXFA_MODEL_SM100, MXFA_P_CONST);
        const record *c1 = find(st, "p-scale", (data_kind)d, mid, outl, MXFA_MODEL_SM100, MXFA_P_DYNAMIC);
        if (c0 && c1)
            printf("P scaling on %-10s: sm100 dQ SQNR %.2f dB const, %.2f dB dynamic (%+.3f dB); O %.2f / %.2f dB "
                   "(a power-of-two scale changes only P's subnormal and saturated values)\n",
                   data_names[d], c0->m[T_DQ].sqnr_db, c1->m[T_DQ].sqnr_db, c1->m[T_DQ].sqnr_db - c0->m[T_DQ].sqnr_db,
                   c0->m[T_O].sqnr_db, c1->m[T_O].sqnr_db);
    }
    printf("causal leak (V x%g from key %lld on, sm100): plain causal moved O at %lld of the %lld earlier rows, by up "
           "to %.3g relative; leak-free causal moved %lld\n",
           (double)LEAK_FACTOR, (long long)(mid / 2 + 16), (long long)lk[1].moved, (long long)lk[1].rows, lk[1].max_rel,
           (long long)lk[0].moved);
}

/* ---- user tensors ---- */

static int load_user(const char *pq, const char *pk, const char *pv, const char *pdo, inputs *in)
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
    if (!rc) {
        in->sq = q.shape[0], in->hq = q.shape[1], in->d = q.shape[2], in->sk = k.shape[0], in->hkv = k.shape[1];
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

static int parse_models(const char *s, mxfa_model *out, int *n)
{
    if (!strcmp(s, "all")) {
        memcpy(out, all_models, sizeof all_models);
        *n = 4;
        return 0;
    }
    char buf[256];
    if (snprintf(buf, sizeof buf, "%s", s) >= (int)sizeof buf)
        return cli_usage(cmd, "--models: list too long");
    *n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (*n == 4 || mxfa_model_parse(tok, &out[*n]) != MXFA_OK)
            return cli_usage(cmd, "--models: '%s' is not one of ideal, sm100, sm90-fp8, sm90-bf16 (each once)", tok);
        for (int i = 0; i < *n; i++)
            if (out[i] == out[*n])
                return cli_usage(cmd, "--models: '%s' is given twice", tok);
        (*n)++;
    }
    return *n ? 0 : cli_usage(cmd, "--models: empty list");
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

int cmd_study(int argc, char **argv)
{
    const char *out_dir = NULL, *pq = NULL, *pk = NULL, *pv = NULL, *pdo = NULL, *backend = "auto";
    int demo = 0, quick = 0, nmodels = 4;
    long seed = 1;
    mxfa_model models[4];
    memcpy(models, all_models, sizeof models);
    mxfa_preset preset = MXFA_PRESET_RCEIL;
    mxfa_causal causal = MXFA_CAUSAL_NONE;
    int c, rc;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (c) {
        case OPT_DEMO: demo = 1; break;
        case OPT_QUICK: quick = 1; break;
        case OPT_OUT: out_dir = optarg; break;
        case OPT_Q: pq = optarg; break;
        case OPT_K: pk = optarg; break;
        case OPT_V: pv = optarg; break;
        case OPT_DO: pdo = optarg; break;
        case OPT_BACKEND: backend = optarg; break;
        case OPT_CAUSAL: causal = MXFA_CAUSAL; break;
        case OPT_CAUSAL_PLAIN: causal = MXFA_CAUSAL_PLAIN; break;
        case OPT_MODELS:
            if ((rc = parse_models(optarg, models, &nmodels)) != 0)
                return rc;
            break;
        case OPT_PRESET:
            if (mxfa_preset_parse(optarg, &preset) != MXFA_OK)
                return cli_usage(cmd, "--preset: '%s' is not one of rceil, ocp, torchao-rceil, microxcaling", optarg);
            break;
        case OPT_SEED: {
            char *end;
            errno = 0;
            seed = strtol(optarg, &end, 10);
            if (*end || end == optarg || errno || seed < 0)
                return cli_usage(cmd, "--seed: '%s' is not a non-negative integer", optarg);
            break;
        }
        case 'h': fputs(study_help, stdout); return 0;
        default: return cli_usage(cmd, "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    for (int i = 1; i < nmodels; i++) /* in enum order: ideal first, the others measured against it */
        for (int j = i; j > 0 && models[j] < models[j - 1]; j--) {
            mxfa_model x = models[j];
            models[j] = models[j - 1];
            models[j - 1] = x;
        }
    int user = pq || pk || pv || pdo;
    if (demo == user)
        return cli_usage(cmd, "give either --demo or the tensors --q, --k and --v");
    if (user && (!pq || !pk || !pv))
        return cli_usage(cmd, "--q, --k and --v are all needed");
    if (!out_dir)
        return cli_usage(cmd, "--out DIR is needed");
    if (quick && !demo)
        return cli_usage(cmd, "--quick goes with --demo");

    study st = {0};
    inputs in = {0};
    if ((rc = cli_open(cmd, backend, &st.ctx)) != 0)
        return rc;
    /* the golden test: a usable GPU backend checked against this one */
    char why[256] = "";
    if (strcmp(mxfa_backend_name(st.ctx), "cuda") != 0 && mxfa_backend_usable("cuda", why, sizeof why) &&
        mxfa_open(&st.gpu, "cuda") != MXFA_OK) {
        snprintf(why, sizeof why, "%s", mxfa_last_error(NULL));
        st.gpu = NULL;
    }
    if (user && (rc = load_user(pq, pk, pv, pdo, &in)) != 0)
        goto done;
    if ((rc = ensure_dir(out_dir)) != 0)
        goto done;
    st.tty = isatty(fileno(stderr));
    st.t0 = cli_now();
    printf("mxfa %s study: %s backend, %s\n", mxfa_version(), mxfa_backend_name(st.ctx),
           demo ? "synthetic data (heads 2, head dim 64)" : "the given tensors");
    leak lk[2];
    if (demo) {
        rc = run_demo(&st, quick, (uint64_t)seed, models, nmodels, lk);
    } else {
        truth t = {0};
        st.steps = nmodels * 2;
        st.gen = 1;
        st.heads = in.hq, st.dim = in.d;
        if (!(rc = make_truth(st.ctx, &in, causal, &t)))
            for (int ps = 0; !rc && ps < 2; ps++)
                for (int m = 0; !rc && m < nmodels; m++)
                    rc = run_one(&st, &in, &t,
                                 mkrec("user", DATA_USER, in.sq, 0, models[m], preset, (mxfa_p_scale)ps, causal),
                                 ps == 0 ? mxfa_model_name(models[m]) : NULL);
        truth_free(&t);
    }
    if (st.tty)
        fputs("\r\033[K", stderr);
    if (rc)
        goto done;
    fprintf(stderr, "%d configurations in %.1f s\n", st.nrec, cli_now() - st.t0);

    if (demo) {
        print_section(&st, "seqlen", "1. error against sequence length (normal data, rceil, const P)");
        print_section(&st, "outlier", "2. error against outlier channels in K");
        print_section(&st, "p-scale", "3. const against dynamic P scaling");
        print_section(&st, "preset", "4. scale presets (sm100, const P)");
        print_findings(&st, quick, lk);
    } else {
        print_section(&st, "user", "error of each model and P scaling on the given tensors");
    }
    if (st.gpu)
        printf("golden test: %s backend against %s on every configuration: %lld of %lld bit-identical\n",
               mxfa_backend_name(st.gpu), mxfa_backend_name(st.ctx), (long long)(st.golden_runs - st.golden_diff),
               (long long)st.golden_runs);
    else
        printf("golden test: no GPU backend usable here (%s)\n", why[0] ? why : "cuda");

    /* the files */
    fileset fs = {0};
    FILE *f;
    int bad = 0;
    if ((f = fileset_open(&fs, out_dir, "results.csv")) != NULL) {
        csv_write(f, &st);
        bad |= fileset_close(&fs, f);
    } else {
        bad = 1;
    }
    if (!bad && demo) {
        if ((f = fileset_open(&fs, out_dir, "error_vs_seqlen.svg")) != NULL) {
            bad |= sweep_chart(f, &st, "seqlen", 0, models, nmodels,
                               "MXFP8 attention: error against sequence length (normal data)");
            bad |= fileset_close(&fs, f);
        } else {
            bad = 1;
        }
        if (!bad && (f = fileset_open(&fs, out_dir, "error_vs_outlier.svg")) != NULL) {
            bad |= sweep_chart(f, &st, "outlier", 1, models, nmodels,
                               "MXFP8 attention: error against outlier channels in K");
            bad |= fileset_close(&fs, f);
        } else {
            bad = 1;
        }
    }
    if (!bad && (f = fileset_open(&fs, out_dir, "error_histogram.svg")) != NULL) {
        bad |= histogram_chart(f, &st, "Quantization and arithmetic error");
        bad |= fileset_close(&fs, f);
    } else {
        bad = 1;
    }
    if (bad) {
        fileset_discard(&fs);
        rc = cli_error(cmd, "%s: could not write the results: %s", out_dir, fs.err[0] ? fs.err : "too many files");
    } else if ((rc = fileset_commit(&fs)) == 0) {
        printf("wrote %s/results.csv%s\n", out_dir,
               demo ? ", error_vs_seqlen.svg, error_vs_outlier.svg, error_histogram.svg" : ", error_histogram.svg");
    }
done:
    inputs_free(&in);
    free(st.rec);
    outputs_free(&st.ideal);
    if (st.gpu)
        mxfa_close(st.gpu);
    mxfa_close(st.ctx);
    return rc;
}
