/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared pieces of the mxfa command-line program. */
#ifndef MXFA_CLI_H
#define MXFA_CLI_H

#include "bench_shapes.h"
#include "mxfa.h"
#include "npy.h"

/* Exit statuses: 0 success, 1 failure, 2 usage error. */
#define EXIT_USAGE 2

/* Print "mxfa CMD: message" and a hint to stderr; return EXIT_USAGE. */
int cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print "mxfa CMD: message" to stderr; return EXIT_FAILURE. */
int cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print "mxfa CMD: warning: message" to stderr: something the user must
 * know about a run that still succeeds. */
void cli_warn(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The number of NaN and infinite values among x[0 .. n-1]. */
int64_t cli_count_nonfinite(const float *x, int64_t n);
/* Warn when the input `what` (x[0 .. n-1]) holds NaN or Inf values, which
 * make the outputs they reach NaN; returns whether it warned. */
int cli_warn_nonfinite_input(const char *cmd, const char *what, const float *x, int64_t n);
/* Warn when m, the metrics of `what` against `against`, are no score
 * (mxfa_compare: values NaN/Inf where the reference differs, or nothing
 * finite to measure); returns whether it warned. */
int cli_warn_no_score(const char *cmd, const char *what, const char *against, const mxfa_metrics *m);
/* Open a context or say why not; returns 0 or an exit status. */
int cli_open(const char *cmd, const char *backend, mxfa_ctx **ctx);

/*
 * Read `path` as a non-empty .npy array of `dtype` with `ndim` dimensions
 * whose sizes equal shape[i] where shape[i] >= 0 (shape may be NULL). A
 * float32 input may also be a float64 or float16 file: it is rounded to
 * float32 once (npy_to_f32 says how) and returned as float32. On failure
 * print why, leave *a freed and return EXIT_FAILURE; else 0.
 */
int cli_read_npy(const char *cmd, const char *what, const char *path, npy_dtype dtype, int ndim,
                 const int64_t *shape, npy_array *a);

/*
 * The offsets of a jagged batch, from --cu-seqlens-q and --cu-seqlens-k:
 * each a list like "0,37,100" or a 1-D int32/int64 .npy file, with as
 * many offsets each. Returns 0 with *cuq and *cuk malloc'ed and *batch
 * their length less one; else an exit status (usage for a malformed list)
 * with *cuq and *cuk NULL.
 */
int cli_read_cu_seqlens(const char *cmd, const char *qarg, const char *karg, int32_t **cuq, int32_t **cuk,
                        int *batch);

/*
 * The options mxfa attn and mxfa compare share: the files (Q, K, V, the
 * outputs, and with --backward dO, O, LSE and the gradients), the batch's
 * offsets, the mask and the attention parameters. A command's option table
 * lists CLI_ATTN_OPTIONS and its own options from CLI_ATTN_END on; its
 * loop hands every option to cli_attn_option first.
 */
enum {
    CLI_ATTN_Q = 256, CLI_ATTN_K, CLI_ATTN_V, CLI_ATTN_OUT, CLI_ATTN_LSE, CLI_ATTN_CUQ, CLI_ATTN_CUK,
    CLI_ATTN_CAUSAL, CLI_ATTN_CAUSAL_PLAIN, CLI_ATTN_MODEL, CLI_ATTN_PRESET, CLI_ATTN_PSCALE, CLI_ATTN_SCALE,
    CLI_ATTN_BM, CLI_ATTN_BN, CLI_ATTN_ODT, CLI_ATTN_BACKEND, CLI_ATTN_BWD, CLI_ATTN_DO, CLI_ATTN_O, CLI_ATTN_DQ,
    CLI_ATTN_DK, CLI_ATTN_DV, CLI_ATTN_END
};
#define CLI_ATTN_OPTIONS                                                                                              \
    {"q", required_argument, NULL, CLI_ATTN_Q}, {"k", required_argument, NULL, CLI_ATTN_K},                          \
        {"v", required_argument, NULL, CLI_ATTN_V}, {"out", required_argument, NULL, CLI_ATTN_OUT},                  \
        {"lse", required_argument, NULL, CLI_ATTN_LSE}, {"cu-seqlens-q", required_argument, NULL, CLI_ATTN_CUQ},     \
        {"cu-seqlens-k", required_argument, NULL, CLI_ATTN_CUK}, {"causal", no_argument, NULL, CLI_ATTN_CAUSAL},     \
        {"causal-plain", no_argument, NULL, CLI_ATTN_CAUSAL_PLAIN},                                                  \
        {"model", required_argument, NULL, CLI_ATTN_MODEL}, {"preset", required_argument, NULL, CLI_ATTN_PRESET},    \
        {"p-scale", required_argument, NULL, CLI_ATTN_PSCALE}, {"scale", required_argument, NULL, CLI_ATTN_SCALE},   \
        {"block-m", required_argument, NULL, CLI_ATTN_BM}, {"block-n", required_argument, NULL, CLI_ATTN_BN},        \
        {"out-dtype", required_argument, NULL, CLI_ATTN_ODT}, {"backend", required_argument, NULL, CLI_ATTN_BACKEND}, \
        {"backward", no_argument, NULL, CLI_ATTN_BWD}, {"do", required_argument, NULL, CLI_ATTN_DO},                 \
        {"o", required_argument, NULL, CLI_ATTN_O}, {"dq", required_argument, NULL, CLI_ATTN_DQ},                    \
        {"dk", required_argument, NULL, CLI_ATTN_DK}, {"dv", required_argument, NULL, CLI_ATTN_DV}

typedef struct cli_attn_args {
    const char *q, *k, *v, *out, *lse, *cuq, *cuk; /* files (cuq, cuk: lists or files) */
    const char *dout, *o, *dq, *dk, *dv;            /* with --backward */
    const char *backend;
    int backward, out_bf16;
    mxfa_attn_params p;
} cli_attn_args;

/* Defaults: the library's attention parameters, the backend given. */
void cli_attn_args_init(cli_attn_args *a, const char *backend);
/* Take option id (from getopt_long) with its argument: 1 if it is one of
 * the shared options, 0 if not; a usage error sets *rc (nonzero) and
 * returns 1. */
int cli_attn_option(const char *cmd, int id, const char *arg, cli_attn_args *a, int *rc);
/* After the options: the files a pass needs are given and those of the
 * other pass are not, O with LSE, both offsets or neither. `candidate`:
 * the outputs named are another implementation's (mxfa compare's
 * wording). 0, or a usage error's exit status. */
int cli_attn_check(const char *cmd, const cli_attn_args *a, int candidate);
/* Read Q, K and V (float32 [tokens, heads, D]) and the offsets when
 * given (else *cuq = *cuk = NULL and *batch = 1). 0, or an exit status
 * with what was read freed by the caller's npy_free and free. */
int cli_attn_read(const char *cmd, const cli_attn_args *a, npy_array *q, npy_array *k, npy_array *v, int32_t **cuq,
                  int32_t **cuk, int *batch);

/* A standard normal sample (Box-Muller on two halves of a splitmix64
 * step of *state): the synthetic data of bench and study. */
double cli_gauss(uint64_t *state);

/* Seconds on the monotonic clock, for timing. */
double cli_now(void);
/* The median of t[0 .. n-1] (upper median for even n); sorts t. */
double cli_median(double *t, int n);
/* Seconds per call of run(arg) on a backend that enqueues its work (cuda):
 * one call and a wait, then five rounds of reps calls back to back, each
 * waited for once; the median of the rounds. < 0 when a call or a wait
 * fails (mxfa_last_error(ctx) says why). */
double cli_time_enqueued(mxfa_ctx *ctx, mxfa_status (*run)(void *arg), void *arg, int reps);

int cmd_info(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_dequantize(int argc, char **argv);
int cmd_gemm(int argc, char **argv);
int cmd_attn(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_study(int argc, char **argv);
int cmd_selftest(int argc, char **argv);

/* mxfa bench on a backend with device memory (tools/bench_device.c):
 * quantize, the quantization and layout rows; gemm, the block-scaled
 * products (at least one of them). */
int bench_device(const char *cmd, mxfa_ctx *ctx, int reps, int quantize, int gemm);
/* The baselines' attention shapes that the options leave (tools/bench_shapes.h)
 * into shapes[]: how many, or -1 with a message where none is left. */
int bench_attn_device_shapes(const char *cmd, const int *dims, int ndims, int causal, int64_t seqlen, int64_t heads,
                             attn_shape shapes[BENCH_SHAPES]);
/* Its attention at shapes[0 .. nshapes - 1] (tools/bench_attn_device.c),
 * under models[0 .. nmodels - 1] (none: those the GPU's kernels compute)
 * with key tiles of block_n, forward and, with backward, backward. */
int bench_attn_device(const char *cmd, mxfa_ctx *ctx, int reps, const int *models, int nmodels, int block_n,
                      int backward, const attn_shape *shapes, int nshapes);

#endif
