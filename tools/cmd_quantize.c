/* SPDX-License-Identifier: BSD-3-Clause */
/* mxfa quantize / mxfa dequantize: MXFP8 from and to .npy files. */
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "outset.h"

static const char quantize_help[] =
    "usage: mxfa quantize IN.npy --data OUT.npy --scales OUT.npy [options]\n"
    "\n"
    "Quantizes a 2-D float32 matrix IN [rows, cols] to MXFP8.\n"
    "  --data FILE     element bytes: uint8 [rows, cols]\n"
    "  --scales FILE   E8M0 scale bytes, uint8: compact [rows, ceil(cols/32)] (row),\n"
    "                  [ceil(rows/32), cols] (col), [ceil(rows/32), ceil(cols/32)] (square);\n"
    "                  swizzled: [round_up(R,128), round_up(C,4)] of the index space\n"
    "  --format e4m3|e5m2                               (default e4m3)\n"
    "  --block row|col|square                           (default row)\n"
    "  --preset rceil|ocp|torchao-rceil|microxcaling    (default rceil)\n"
    "  --layout compact|swizzled                        (default compact)\n"
    "  --backend auto|ref|cpu|cuda                      (default auto)\n"
    "  --stats         also print what quantization did to the values: scale range,\n"
    "                  saturated and flushed elements, error of the round trip\n"
    "Outputs are written atomically: on any failure neither file is created.\n";

static const char dequantize_help[] =
    "usage: mxfa dequantize --data IN.npy --scales IN.npy --out OUT.npy [options]\n"
    "\n"
    "Turns MXFP8 element bytes and E8M0 scales (uint8 .npy files, as written by\n"
    "'mxfa quantize') back into a float32 matrix, exactly (values beyond the fp32\n"
    "range become +-Inf).\n"
    "  --format e4m3|e5m2  --block row|col|square  --layout compact|swizzled\n"
    "  --backend auto|ref|cpu|cuda\n";

enum { OPT_DATA = 256, OPT_SCALES, OPT_OUT, OPT_FORMAT, OPT_BLOCK, OPT_PRESET, OPT_LAYOUT, OPT_BACKEND, OPT_STATS };

static const struct option long_options[] = {
    {"data", required_argument, NULL, OPT_DATA},     {"scales", required_argument, NULL, OPT_SCALES},
    {"out", required_argument, NULL, OPT_OUT},       {"format", required_argument, NULL, OPT_FORMAT},
    {"block", required_argument, NULL, OPT_BLOCK},   {"preset", required_argument, NULL, OPT_PRESET},
    {"layout", required_argument, NULL, OPT_LAYOUT}, {"backend", required_argument, NULL, OPT_BACKEND},
    {"stats", no_argument, NULL, OPT_STATS},         {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

typedef struct options {
    const char *in, *data, *scales, *out, *backend;
    mxfa_dtype format;
    mxfa_block block;
    mxfa_preset preset;
    mxfa_layout layout;
    int help, stats;
} options;

/* Parse the options of either command; returns 0 or an exit status. */
static int parse_options(const char *cmd, int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->format = MXFA_E4M3;
    o->block = MXFA_BLOCK_ROW;
    o->preset = MXFA_PRESET_RCEIL;
    o->layout = MXFA_LAYOUT_COMPACT;
    o->backend = "auto";
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", long_options, NULL)) != -1) {
        mxfa_status st = MXFA_OK;
        switch (ch) {
        case OPT_DATA: o->data = optarg; break;
        case OPT_SCALES: o->scales = optarg; break;
        case OPT_OUT: o->out = optarg; break;
        case OPT_BACKEND: o->backend = optarg; break;
        case OPT_STATS: o->stats = 1; break;
        case OPT_FORMAT: st = mxfa_format_parse(optarg, &o->format); break;
        case OPT_BLOCK: st = mxfa_block_parse(optarg, &o->block); break;
        case OPT_PRESET: st = mxfa_preset_parse(optarg, &o->preset); break;
        case OPT_LAYOUT: st = mxfa_layout_parse(optarg, &o->layout); break;
        case 'h': o->help = 1; return 0;
        case ':': return cli_usage(cmd, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage(cmd, "unknown option '%s'", argv[optind - 1]);
        }
        if (st != MXFA_OK)
            return cli_usage(cmd, "%s", mxfa_last_error(NULL));
    }
    if (optind < argc)
        o->in = argv[optind++];
    if (optind < argc)
        return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    if (o->layout == MXFA_LAYOUT_SWIZZLED && o->block == MXFA_BLOCK_SQUARE)
        return cli_usage(cmd, "square scales have no swizzled layout (use --layout compact)");
    return 0;
}

/* The scale matrix shape for the chosen block and layout. */
static int scale_shape(const char *cmd, const options *o, int64_t rows, int64_t cols, int64_t shape[2])
{
    mxfa_status st = o->layout == MXFA_LAYOUT_COMPACT ? mxfa_scales_shape(o->block, rows, cols, &shape[0], &shape[1])
                                                      : mxfa_swizzled_shape(o->block, rows, cols, &shape[0], &shape[1]);
    if (st != MXFA_OK)
        return cli_error(cmd, "%s", mxfa_last_error(NULL));
    return 0;
}

/* Write two arrays as a pair (outset.h): both files appear, or neither. */
static int write_pair(const char *cmd, const char *path1, npy_dtype t1, const int64_t *s1, const void *d1,
                      const char *path2, npy_dtype t2, const int64_t *s2, const void *d2)
{
    static outset set; /* large: not on the stack */
    set.n = 0;
    if (outset_npy(&set, path1, t1, 2, s1, d1) || (path2 && outset_npy(&set, path2, t2, 2, s2, d2))) {
        outset_discard(&set);
        return cli_error(cmd, "%s", set.err);
    }
    return outset_commit(&set) ? cli_error(cmd, "%s", set.err) : 0;
}

/* What quantization did: scale range, saturated and flushed elements, and
 * the error of the round trip against the input (in double precision). */
static int print_stats(const char *cmd, mxfa_ctx *ctx, const options *o, const mxfa_tensor *x, const mxfa_mx *q)
{
    int64_t rows = x->shape[0], cols = x->shape[1], n = rows * cols;
    int64_t ns = q->scales.shape[0] * q->scales.shape[1];
    float *y = malloc((size_t)n * sizeof *y);
    if (!y)
        return cli_error(cmd, "out of memory");
    mxfa_tensor yt = mxfa_tensor_2d(y, MXFA_F32, rows, cols);
    if (mxfa_dequantize(ctx, q, &yt) != MXFA_OK) {
        free(y);
        return cli_error(cmd, "%s", mxfa_last_error(ctx));
    }
    const float *xv = x->data;
    const uint8_t *d = q->data.data, *s = q->scales.data;
    uint8_t max_code = o->format == MXFA_E4M3 ? 0x7E : 0x7B;
    int smin = 255, smax = 0;
    for (int64_t i = 0; i < ns; i++) {
        smin = s[i] < smin ? s[i] : smin;
        smax = s[i] > smax ? s[i] : smax;
    }
    int64_t saturated = 0, flushed = 0, nonfinite = 0;
    double err2 = 0, ref2 = 0, maxabs = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(xv[i]) || !isfinite(y[i])) {
            nonfinite++;
            continue;
        }
        saturated += (d[i] & 0x7F) == max_code;
        flushed += xv[i] != 0 && (d[i] & 0x7F) == 0;
        double e = (double)y[i] - (double)xv[i];
        err2 += e * e;
        ref2 += (double)xv[i] * xv[i];
        maxabs = fabs(e) > maxabs ? fabs(e) : maxabs;
    }
    printf("quantized %lld x %lld float32 to %s with %s blocks (%s preset, %s backend)\n", (long long)rows,
           (long long)cols, o->format == MXFA_E4M3 ? "E4M3" : "E5M2", mxfa_block_name(o->block),
           mxfa_preset_name(o->preset), mxfa_backend_name(ctx));
    printf("  scales:     %lld blocks, 2^%d .. 2^%d\n", (long long)ns, smin - 127, smax - 127);
    printf("  elements:   %lld at the format's largest magnitude, %lld non-zero flushed to zero, %lld not finite\n",
           (long long)saturated, (long long)flushed, (long long)nonfinite);
    if (ref2 > 0)
        printf("  round trip: relative L2 error %.4g, SQNR %.2f dB, max abs error %.4g\n", sqrt(err2 / ref2),
               err2 > 0 ? 10 * log10(ref2 / err2) : INFINITY, maxabs);
    free(y);
    return 0;
}

int cmd_quantize(int argc, char **argv)
{
    const char *cmd = "quantize";
    options o;
    int rc = parse_options(cmd, argc, argv, &o);
    if (rc || o.help) {
        if (o.help)
            fputs(quantize_help, stdout);
        return rc;
    }
    if (!o.in)
        return cli_usage(cmd, "missing the input file IN.npy");
    if (!o.data || !o.scales)
        return cli_usage(cmd, "--data and --scales are required");
    if (o.out)
        return cli_usage(cmd, "--out belongs to 'mxfa dequantize'");
    if (strcmp(o.data, o.scales) == 0)
        return cli_usage(cmd, "--data and --scales name the same file");

    npy_array in;
    if ((rc = cli_read_npy(cmd, "the input", o.in, NPY_F32, 2, NULL, &in)))
        return rc;
    int64_t rows = in.shape[0], cols = in.shape[1], cshape[2], oshape[2];
    mxfa_ctx *ctx = NULL;
    uint8_t *data = NULL, *scales = NULL, *swizzled = NULL;
    if ((rc = scale_shape(cmd, &o, rows, cols, oshape)))
        goto done;
    mxfa_scales_shape(o.block, rows, cols, &cshape[0], &cshape[1]);
    if ((rc = cli_open(cmd, o.backend, &ctx)))
        goto done;
    data = malloc((size_t)(rows * cols));
    scales = malloc((size_t)(cshape[0] * cshape[1]));
    swizzled = o.layout == MXFA_LAYOUT_SWIZZLED ? malloc((size_t)(oshape[0] * oshape[1])) : NULL;
    if (!data || !scales || (o.layout == MXFA_LAYOUT_SWIZZLED && !swizzled)) {
        rc = cli_error(cmd, "out of memory");
        goto done;
    }
    mxfa_tensor x = mxfa_tensor_2d(in.data, MXFA_F32, rows, cols);
    mxfa_mx q = {mxfa_tensor_2d(data, o.format, rows, cols), mxfa_tensor_2d(scales, MXFA_E8M0, cshape[0], cshape[1]),
                 o.block, MXFA_LAYOUT_COMPACT};
    if (mxfa_quantize(ctx, &x, o.preset, &q) != MXFA_OK) {
        rc = cli_error(cmd, "%s", mxfa_last_error(ctx));
        goto done;
    }
    if (swizzled) {
        mxfa_tensor sw = mxfa_tensor_2d(swizzled, MXFA_E8M0, oshape[0], oshape[1]);
        if (mxfa_scales_swizzle(ctx, &q.scales, o.block, rows, cols, &sw) != MXFA_OK) {
            rc = cli_error(cmd, "%s", mxfa_last_error(ctx));
            goto done;
        }
    }
    int64_t dshape[2] = {rows, cols};
    if (o.stats && (rc = print_stats(cmd, ctx, &o, &x, &q)))
        goto done;
    rc = write_pair(cmd, o.data, NPY_U8, dshape, data, o.scales, NPY_U8, oshape, swizzled ? swizzled : scales);
done:
    free(data);
    free(scales);
    free(swizzled);
    npy_free(&in);
    mxfa_close(ctx);
    return rc;
}

int cmd_dequantize(int argc, char **argv)
{
    const char *cmd = "dequantize";
    options o;
    int rc = parse_options(cmd, argc, argv, &o);
    if (rc || o.help) {
        if (o.help)
            fputs(dequantize_help, stdout);
        return rc;
    }
    if (o.in)
        return cli_usage(cmd, "unexpected argument '%s' (use --data and --scales)", o.in);
    if (!o.data || !o.scales || !o.out)
        return cli_usage(cmd, "--data, --scales and --out are required");

    npy_array d, s;
    if ((rc = cli_read_npy(cmd, "--data", o.data, NPY_U8, 2, NULL, &d)))
        return rc;
    if ((rc = cli_read_npy(cmd, "--scales", o.scales, NPY_U8, 2, NULL, &s))) {
        npy_free(&d);
        return rc;
    }
    int64_t rows = d.shape[0], cols = d.shape[1], cshape[2], sshape[2];
    mxfa_ctx *ctx = NULL;
    uint8_t *compact = NULL;
    float *out = NULL;
    if ((rc = scale_shape(cmd, &o, rows, cols, sshape)))
        goto done;
    if (s.shape[0] != sshape[0] || s.shape[1] != sshape[1]) {
        rc = cli_error(cmd, "%s: scales of shape [%lld, %lld] do not fit data [%lld, %lld] with %s blocks in the %s "
                            "layout (expected [%lld, %lld])",
                       o.scales, (long long)s.shape[0], (long long)s.shape[1], (long long)rows, (long long)cols,
                       mxfa_block_name(o.block), mxfa_layout_name(o.layout), (long long)sshape[0],
                       (long long)sshape[1]);
        goto done;
    }
    mxfa_scales_shape(o.block, rows, cols, &cshape[0], &cshape[1]);
    if ((rc = cli_open(cmd, o.backend, &ctx)))
        goto done;
    out = malloc((size_t)(rows * cols) * sizeof *out);
    compact = o.layout == MXFA_LAYOUT_SWIZZLED ? malloc((size_t)(cshape[0] * cshape[1])) : NULL;
    if (!out || (o.layout == MXFA_LAYOUT_SWIZZLED && !compact)) {
        rc = cli_error(cmd, "out of memory");
        goto done;
    }
    if (compact) {
        mxfa_tensor sw = mxfa_tensor_2d(s.data, MXFA_E8M0, sshape[0], sshape[1]);
        mxfa_tensor c = mxfa_tensor_2d(compact, MXFA_E8M0, cshape[0], cshape[1]);
        if (mxfa_scales_unswizzle(ctx, &sw, o.block, rows, cols, &c) != MXFA_OK) {
            rc = cli_error(cmd, "%s", mxfa_last_error(ctx));
            goto done;
        }
    }
    mxfa_mx q = {mxfa_tensor_2d(d.data, o.format, rows, cols),
                 mxfa_tensor_2d(compact ? compact : s.data, MXFA_E8M0, cshape[0], cshape[1]), o.block,
                 MXFA_LAYOUT_COMPACT};
    mxfa_tensor y = mxfa_tensor_2d(out, MXFA_F32, rows, cols);
    if (mxfa_dequantize(ctx, &q, &y) != MXFA_OK) {
        rc = cli_error(cmd, "%s", mxfa_last_error(ctx));
        goto done;
    }
    int64_t oshape[2] = {rows, cols};
    rc = write_pair(cmd, o.out, NPY_F32, oshape, out, NULL, NPY_F32, NULL, NULL);
done:
    free(out);
    free(compact);
    npy_free(&d);
    npy_free(&s);
    mxfa_close(ctx);
    return rc;
}
