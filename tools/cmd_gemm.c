/* SPDX-License-Identifier: BSD-3-Clause */
/* mxfa gemm: D = A * B^T + C for MXFP8 A and B under a numerics model. */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char gemm_help[] =
    "usage: mxfa gemm --a A.npy --a-scales SA.npy --b B.npy --b-scales SB.npy [--c C.npy]\n"
    "                 --model ideal|sm100|sm90-fp8|sm90-bf16 --out D.npy [options]\n"
    "\n"
    "Computes D = A * B^T + C with the additions of the chosen model (docs/NUMERICS.md).\n"
    "  --a, --b          element bytes: uint8 [M, K] and [N, K]\n"
    "  --a-scales, --b-scales\n"
    "                    E8M0 scales along K: uint8 [M, ceil(K/32)] and [N, ceil(K/32)]\n"
    "                    (as 'mxfa quantize --block row' writes them)\n"
    "  --c               float32 [M, N] (default: zero)\n"
    "  --out             float32 [M, N], written atomically\n"
    "  --format-a, --format-b e4m3|e5m2                 (default e4m3)\n"
    "  --backend auto|ref|cpu|cuda                      (default auto)\n";

enum { OPT_A = 256, OPT_SA, OPT_B, OPT_SB, OPT_C, OPT_MODEL, OPT_FA, OPT_FB, OPT_OUT, OPT_BACKEND };

static const struct option options[] = {
    {"a", required_argument, NULL, OPT_A},          {"a-scales", required_argument, NULL, OPT_SA},
    {"b", required_argument, NULL, OPT_B},          {"b-scales", required_argument, NULL, OPT_SB},
    {"c", required_argument, NULL, OPT_C},          {"model", required_argument, NULL, OPT_MODEL},
    {"format-a", required_argument, NULL, OPT_FA},  {"format-b", required_argument, NULL, OPT_FB},
    {"out", required_argument, NULL, OPT_OUT},      {"backend", required_argument, NULL, OPT_BACKEND},
    {"help", no_argument, NULL, 'h'},               {NULL, 0, NULL, 0},
};

int cmd_gemm(int argc, char **argv)
{
    const char *cmd = "gemm";
    const char *pa = NULL, *psa = NULL, *pb = NULL, *psb = NULL, *pc = NULL, *pout = NULL, *backend = "auto";
    mxfa_dtype fa = MXFA_E4M3, fb = MXFA_E4M3;
    mxfa_model model = MXFA_MODEL_IDEAL;
    int have_model = 0, ch;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        mxfa_status st = MXFA_OK;
        switch (ch) {
        case OPT_A: pa = optarg; break;
        case OPT_SA: psa = optarg; break;
        case OPT_B: pb = optarg; break;
        case OPT_SB: psb = optarg; break;
        case OPT_C: pc = optarg; break;
        case OPT_OUT: pout = optarg; break;
        case OPT_BACKEND: backend = optarg; break;
        case OPT_MODEL: st = mxfa_model_parse(optarg, &model); have_model = 1; break;
        case OPT_FA: st = mxfa_format_parse(optarg, &fa); break;
        case OPT_FB: st = mxfa_format_parse(optarg, &fb); break;
        case 'h': fputs(gemm_help, stdout); return 0;
        default: return cli_usage(cmd, "unknown option or missing value: '%s'", argv[optind - 1]);
        }
        if (st != MXFA_OK)
            return cli_usage(cmd, "%s", mxfa_last_error(NULL));
    }
    if (optind < argc)
        return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    if (!pa || !psa || !pb || !psb || !pout)
        return cli_usage(cmd, "--a, --a-scales, --b, --b-scales and --out are required");
    if (!have_model)
        return cli_usage(cmd, "--model is required (ideal, sm100, sm90-fp8 or sm90-bf16)");

    npy_array a = {0}, sa = {0}, b = {0}, sb = {0}, c = {0};
    mxfa_ctx *ctx = NULL;
    float *d = NULL;
    int rc;
    if ((rc = cli_read_npy(cmd, "A", pa, NPY_U8, 2, NULL, &a)))
        goto done;
    int64_t M = a.shape[0], K = a.shape[1], nb = (K + 31) / 32;
    const int64_t bshape[2] = {-1, K}, sashape[2] = {M, nb};
    if ((rc = cli_read_npy(cmd, "B", pb, NPY_U8, 2, bshape, &b)) ||
        (rc = cli_read_npy(cmd, "the scales of A", psa, NPY_U8, 2, sashape, &sa)))
        goto done;
    int64_t N = b.shape[0];
    const int64_t sbshape[2] = {N, nb}, cshape[2] = {M, N};
    if ((rc = cli_read_npy(cmd, "the scales of B", psb, NPY_U8, 2, sbshape, &sb)))
        goto done;
    if (pc && (rc = cli_read_npy(cmd, "C", pc, NPY_F32, 2, cshape, &c)))
        goto done;
    if ((rc = cli_open(cmd, backend, &ctx)))
        goto done;
    d = malloc((size_t)(M * N) * sizeof *d);
    if (!d) {
        rc = cli_error(cmd, "out of memory");
        goto done;
    }
    mxfa_mx am = {mxfa_tensor_2d(a.data, fa, M, K), mxfa_tensor_2d(sa.data, MXFA_E8M0, M, nb), MXFA_BLOCK_ROW,
                  MXFA_LAYOUT_COMPACT};
    mxfa_mx bm = {mxfa_tensor_2d(b.data, fb, N, K), mxfa_tensor_2d(sb.data, MXFA_E8M0, N, nb), MXFA_BLOCK_ROW,
                  MXFA_LAYOUT_COMPACT};
    mxfa_tensor ct = mxfa_tensor_2d(c.data, MXFA_F32, M, N), dt = mxfa_tensor_2d(d, MXFA_F32, M, N);
    if (mxfa_gemm(ctx, &am, &bm, pc ? &ct : NULL, model, &dt) != MXFA_OK) {
        rc = cli_error(cmd, "%s", mxfa_last_error(ctx));
        goto done;
    }
    char tmp[PATH_MAX], err[PATH_MAX + 256];
    int64_t shape[2] = {M, N};
    if (npy_write_temp(pout, NPY_F32, 2, shape, d, tmp, sizeof tmp, err, sizeof err) != MXFA_OK ||
        npy_commit(tmp, pout, err, sizeof err) != MXFA_OK)
        rc = cli_error(cmd, "%s", err);
done:
    free(d);
    npy_free(&a);
    npy_free(&sa);
    npy_free(&b);
    npy_free(&sb);
    npy_free(&c);
    mxfa_close(ctx);
    return rc;
}
