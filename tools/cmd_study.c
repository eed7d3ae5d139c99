/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mxfa study: MXFP8 attention forward and backward against the float64
 * truth, across numerics models, presets, P scalings and causal modes, on
 * built-in synthetic data or the user's tensors. Writes a table to stdout
 * and, into --out DIR, results.csv and SVG plots, all or none of them.
 *
 * A study is a plan (a list of steps, made before anything runs, so that
 * the progress counter knows its total), a driver that runs it, and a
 * report: the table, the findings and the files. The inputs and the truth
 * are in study_data.c, the plan and the driver in study_run.c, the report
 * in study_report.c; this file is the command line. docs/STUDY.md
 * describes what it prints and writes.
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

#include "study.h"

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
