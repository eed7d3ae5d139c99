/* SPDX-License-Identifier: BSD-3-Clause */
/* mxfa study: one configuration, the plan, and the driver that runs it (study.h). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "study.h"

const char *const tensor_names[NTENSORS] = {"O", "LSE", "dQ", "dK", "dV"};
const double demo_outliers[4] = {1, 4, 16, 64};

/* ---- one configuration ---- */



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
int no_score(const mxfa_metrics *m)
{
    return m->mismatched_nonfinite > 0 || m->count == 0;
}


void outputs_free(outputs *r)
{
    free(r->o), free(r->lse), free(r->dq), free(r->dk), free(r->dv);
    memset(r, 0, sizeof *r);
}

const char *causal_name(mxfa_causal c)
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




void plan_free(plan *p)
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
mxfa_model lead_model(const study_opts *o)
{
    for (int m = 0; m < o->nmodels; m++)
        if (o->models[m] == MXFA_MODEL_SM100)
            return MXFA_MODEL_SM100;
    return o->models[0];
}


demo_sizes demo_sizes_of(int quick)
{
    return quick ? (demo_sizes){{64, 128}, 2, 128} : (demo_sizes){{256, 512, 1024, 2048}, 4, 512};
}


/* The demo: 1. sequence length, 2. outlier channels in K, 3. const
 * against dynamic P on each kind of data (Blackwell and Hopper), 4. the
 * presets, 5. the causal leak of both causal modes. 0 or an exit status. */
int plan_demo(plan *p, const study_opts *o)
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
int plan_user(plan *p, const study_opts *o, const inputs *in)
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




/* "k-outliers x16 S=512 sm100 rceil none P const", or for a leak check
 * "causal leak: normal S=512 sm100 rceil causal-plain". */
void step_label(const step *s, char *buf, size_t len)
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
int run_plan(study *st, const plan *p, uint64_t seed, inputs *in)
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
