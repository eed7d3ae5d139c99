/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mxfa study's parts (tools/cmd_study.c says what the command does): the
 * inputs and the float64 truth (study_data.c), the plan and the driver
 * that runs it (study_run.c), and the report, files and plots
 * (study_report.c). The types they share and their functions.
 */
#ifndef MXFA_STUDY_H
#define MXFA_STUDY_H

#include <stdint.h>
#include <stdio.h>

#include "cli.h"
#include "svg.h"

static const char *const cmd = "study";

/* What a study was asked for. */
typedef struct study_opts {
    int demo, quick;
    uint64_t seed;
    mxfa_model models[MXFA_MODEL_COUNT]; /* in enum order: ideal, when there, comes first */
    int nmodels;
    mxfa_preset presets[MXFA_PRESET_COUNT]; /* with tensors: the presets, in the order given */
    int npresets;
    mxfa_causal causal; /* with tensors */
} study_opts;

/* The synthetic data sets. */
typedef enum data_kind {
    DATA_NORMAL,  /* Q, K, V, dO standard normal */
    DATA_OUTLIER, /* K with two outlier channels `outlier` times larger */
    DATA_SINK,    /* key 0 a sink: every query's score with it about 12 above the rest */
    DATA_USER
} data_kind;

extern const char *const data_names[];

typedef struct inputs {
    int64_t sq, sk, hq, hkv, d; /* tokens of Q and of K and V (all sequences), heads, head dim */
    float *q, *k, *v, *dout;
    int32_t *cuq, *cuk; /* a packed batch's offsets, or NULL for one sequence */
    int batch;
    data_kind data; /* what they are, so that a step knows whether they fit */
    double outlier;
} inputs;

enum { DEMO_HEADS = 2, DEMO_DIM = 64 };

typedef struct truth {
    double *o, *lse, *dq, *dk, *dv;
    int gen;            /* the inputs it belongs to (study.gen) */
    mxfa_causal causal; /* and its causal mode */
} truth;

enum { T_O, T_LSE, T_DQ, T_DK, T_DV, NTENSORS };

extern const char *const tensor_names[NTENSORS];

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

typedef struct outputs {
    float *o, *lse, *dq, *dk, *dv;
} outputs;

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

typedef struct demo_sizes {
    int64_t seqlens[4];
    int nseq;
    int64_t s_mid; /* the length of the other sweeps */
} demo_sizes;

extern const double demo_outliers[4];

#define DEMO_PSCALE_OUTLIER 16.0 /* the outlier data of the P scaling section */

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

/* The causal leak: V changed only at the keys from leak_key on in each
 * sequence (scaled by LEAK_FACTOR, like a token with massive activations)
 * must not change O at the rows that see none of them (bottom-right
 * aligned: row i of a sequence of sq queries and sk keys sees the keys up
 * to i + sk - sq); with per-32-key V scales across the diagonal it does
 * for the rows that share a block with a changed key. */
#define LEAK_FACTOR 1024.0f

/* study_data.c: the inputs and the truth */
int load_user(const char *pq, const char *pk, const char *pv, const char *pdo, const char *cu_q,
              const char *cu_k, inputs *in);
void inputs_free(inputs *in);
int make_truth(mxfa_ctx *ctx, const inputs *in, mxfa_causal causal, truth *t);
int make_inputs(data_kind kind, int64_t s, double outlier, uint64_t seed, inputs *in);
void truth_free(truth *t);
void input_tensors(const inputs *in, mxfa_tensor t[4]);
void output_tensors(const inputs *in, mxfa_dtype dt, void *o, void *lse, void *dq, void *dk, void *dv,
                    mxfa_tensor t[5]);

/* study_run.c: the plan and the driver */
int plan_demo(plan *p, const study_opts *o);
int plan_user(plan *p, const study_opts *o, const inputs *in);
int run_plan(study *st, const plan *p, uint64_t seed, inputs *in);
void plan_free(plan *p);
void outputs_free(outputs *r);
demo_sizes demo_sizes_of(int quick);
mxfa_model lead_model(const study_opts *o);
const char *causal_name(mxfa_causal c);
int no_score(const mxfa_metrics *m);
void step_label(const step *s, char *buf, size_t len);

/* study_report.c: the report and the files */
void print_section(const study *st, const char *section, const char *title);
void print_demo_findings(const study *st, int quick);
void print_user_findings(const study *st, const study_opts *o);
int print_no_scores(const study *st);
int write_files(const study *st, const study_opts *o, const char *out_dir, const char **names);
#endif
