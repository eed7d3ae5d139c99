/* SPDX-License-Identifier: BSD-3-Clause */
/* mxfa study: the report: the table, the findings, results.csv and the plots (study.h). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outset.h"
#include "svg.h"

#include "study.h"

/* ---- the report: table and findings ---- */

void print_section(const study *st, const char *section, const char *title)
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
int print_no_scores(const study *st)
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

void print_demo_findings(const study *st, int quick)
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

void print_user_findings(const study *st, const study_opts *o)
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
int write_files(const study *st, const study_opts *o, const char *out_dir, const char **names)
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
