/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mxfa bench on a backend with device memory: attention forward and
 * backward at the shapes of the H200 baselines (the scripts of bench/, run
 * on the same machine for the ratios; tools/bench_shapes.c, narrowed by
 * --dims, --seqlen, --heads and --no-causal), on bf16 Q, K and V drawn from a
 * standard normal in device memory, under each model the GPU's kernels
 * compute (sm90-bf16 and sm90-fp8 on Hopper, sm100 on Blackwell; --models
 * picks) with const P. The
 * quantization of Q, K and V, done inside each call as the kernel needs it,
 * is also timed on its own: the same quantizations through the public API
 * (Q and K as [tokens x H] rows of D, V as [tokens] x [H x D] in col blocks
 * per sequence, one call each). The backward pass takes O and LSE from one
 * forward call and a dO drawn like the inputs, and is timed whole. Each call
 * is enqueued reps times back to back and waited for once; the median of
 * five such rounds is reported, and the most scratch memory the library
 * held at once meanwhile (mxfa_scratch_peak: its working memory beyond the
 * caller's tensors).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_shapes.h"
#include "cli.h"
#include "mxfa.h"

typedef struct attn_bench {
    mxfa_ctx *ctx;
    const attn_shape *sh;
    mxfa_attn_params p;
    void *q, *k, *v, *o, *lse, *codes, *scales, *dout, *dq, *dk, *dv; /* device */
    int32_t *cu;
    int quantize_only, backward;
} attn_bench;

static mxfa_tensor dev_tensor(void *p, mxfa_dtype dt, int ndim, int64_t a, int64_t b, int64_t c)
{
    mxfa_tensor t = {p, dt, MXFA_MEM_DEVICE, ndim, {a, b, c}, {0}};
    return t;
}

/* Q and K in row blocks, V in col blocks per sequence, all heads at once:
 * what the attention call does before its kernel. */
static mxfa_status quantize_qkv(attn_bench *a)
{
    const attn_shape *s = a->sh;
    const int64_t tokens = s->b * s->s, nkb = s->d / 32;
    void *src[3] = {a->q, a->k, a->v};
    for (int which = 0; which < 3; which++) {
        mxfa_status st;
        if (which < 2) {
            mxfa_tensor x = dev_tensor(src[which], MXFA_BF16, 2, tokens * s->h, s->d, 0);
            mxfa_mx out = {dev_tensor(a->codes, MXFA_E4M3, 2, tokens * s->h, s->d, 0),
                           dev_tensor(a->scales, MXFA_E8M0, 2, tokens * s->h, nkb, 0), MXFA_BLOCK_ROW,
                           MXFA_LAYOUT_COMPACT};
            st = mxfa_quantize(a->ctx, &x, MXFA_PRESET_RCEIL, &out);
        } else {
            int64_t rows;
            mxfa_jagged_scale_rows(a->cu, (int)s->b, &rows);
            mxfa_tensor x = dev_tensor(src[which], MXFA_BF16, 2, tokens, s->h * s->d, 0);
            mxfa_mx out = {dev_tensor(a->codes, MXFA_E4M3, 2, tokens, s->h * s->d, 0),
                           dev_tensor(a->scales, MXFA_E8M0, 2, rows, s->h * s->d, 0), MXFA_BLOCK_COL,
                           MXFA_LAYOUT_COMPACT};
            st = mxfa_quantize_jagged(a->ctx, &x, a->cu, (int)s->b, MXFA_PRESET_RCEIL, &out);
        }
        if (st != MXFA_OK)
            return st;
    }
    return MXFA_OK;
}

static mxfa_status run(attn_bench *a)
{
    if (a->quantize_only)
        return quantize_qkv(a);
    const attn_shape *s = a->sh;
    const int64_t tokens = s->b * s->s;
    mxfa_tensor q = dev_tensor(a->q, MXFA_BF16, 3, tokens, s->h, s->d), k = dev_tensor(a->k, MXFA_BF16, 3, tokens, s->h, s->d),
                v = dev_tensor(a->v, MXFA_BF16, 3, tokens, s->h, s->d), o = dev_tensor(a->o, MXFA_BF16, 3, tokens, s->h, s->d),
                l = dev_tensor(a->lse, MXFA_F32, 2, tokens, s->h, 0);
    if (a->backward) {
        mxfa_tensor g = dev_tensor(a->dout, MXFA_BF16, 3, tokens, s->h, s->d),
                    dq = dev_tensor(a->dq, MXFA_BF16, 3, tokens, s->h, s->d),
                    dk = dev_tensor(a->dk, MXFA_BF16, 3, tokens, s->h, s->d),
                    dv = dev_tensor(a->dv, MXFA_BF16, 3, tokens, s->h, s->d);
        return mxfa_attn_bwd(a->ctx, &a->p, &q, &k, &v, &o, &g, &l, a->cu, a->cu, (int)s->b, &dq, &dk, &dv);
    }
    return mxfa_attn_fwd(a->ctx, &a->p, &q, &k, &v, a->cu, a->cu, (int)s->b, &o, &l);
}

/* One call, as cli_time_enqueued takes it. */
static mxfa_status run_one(void *arg)
{
    return run((attn_bench *)arg);
}

/* The table of one pass under one model, a row for each of shapes[0 ..
 * nshapes - 1]. */
static int bench_pass(const char *cmd, mxfa_ctx *ctx, int reps, mxfa_model model, int block_n, int backward,
                      const attn_shape *shapes, int nshapes)
{
    if (backward)
        printf("\nattention backward, %s, const P, key tiles of %d, bf16 in and out, device memory "
               "(TFLOP/s: 2.5 times the forward pass's count)\n", mxfa_model_name(model), block_n);
    else
        printf("\nattention forward, %s, const P, key tiles of %d, bf16 in and out, device memory "
               "(TFLOP/s: 4 B H S^2 D, half when causal; c: the leak-free causal mask, cp: the plain one)\n",
               mxfa_model_name(model), block_n);
    printf("%-26s %10s %10s %14s %12s %18s %12s\n", "shape B,H,S,D", "ms", "TFLOP/s", "quantize ms", "of the call",
           "TFLOP/s without it", "scratch MiB");
    int rc = 0;
    for (int i = 0; i < nshapes && !rc; i++) {
        const attn_shape *s = &shapes[i];
        const int64_t tokens = s->b * s->s, n = tokens * s->h * s->d;
        attn_bench a;
        memset(&a, 0, sizeof a);
        a.ctx = ctx, a.sh = s;
        mxfa_attn_params_default(&a.p);
        a.p.model = model;
        a.p.block_n = block_n;
        a.p.causal = s->causal;
        void **bufs[] = {&a.q, &a.k, &a.v, &a.o, &a.lse, &a.codes, &a.scales, &a.dout, &a.dq, &a.dk, &a.dv};
        const int nbufs = backward ? 11 : 7;
        const size_t sizes[] = {(size_t)n * 2, (size_t)n * 2, (size_t)n * 2, (size_t)n * 2, (size_t)(tokens * s->h) * 4,
                                (size_t)n,     (size_t)n,     (size_t)n * 2, (size_t)n * 2, (size_t)n * 2,
                                (size_t)n * 2};
        uint16_t *host = malloc((size_t)n * 2);
        a.cu = malloc(sizeof(int32_t) * (size_t)(s->b + 1));
        for (int j = 0; j < nbufs && !rc; j++)
            if (mxfa_device_alloc(ctx, sizes[j], bufs[j]) != MXFA_OK)
                rc = cli_error(cmd, "%s", mxfa_last_error(ctx));
        if (!rc && (!host || !a.cu))
            rc = cli_error(cmd, "out of memory for the attention benchmark's tensors");
        if (!rc) {
            for (int64_t b = 0; b <= s->b; b++)
                a.cu[b] = (int32_t)(b * s->s);
            uint64_t rng = 0x2545F4914F6CDD1Du;
            void *dst[4] = {a.q, a.k, a.v, a.dout};
            for (int which = 0; which < (backward ? 4 : 3) && !rc; which++) {
                for (int64_t j = 0; j < n; j++)
                    host[j] = mxfa_f32_to_bf16((float)cli_gauss(&rng));
                if (mxfa_memcpy(ctx, dst[which], host, (size_t)n * 2) != MXFA_OK)
                    rc = cli_error(cmd, "%s", mxfa_last_error(ctx));
            }
        }
        char name[64];
        bench_shape_name(s, name, sizeof name);
        if (!rc && backward && run(&a) != MXFA_OK) /* O and LSE */
            printf("%-26s forward: %s\n", name, mxfa_last_error(ctx));
        else if (!rc) {
            a.backward = backward;
            const double flops =
                4.0 * s->b * s->h * (double)s->s * s->s * s->d * (s->causal ? 0.5 : 1.0) * (backward ? 2.5 : 1.0);
            size_t scratch = 0;
            mxfa_scratch_peak(ctx, &scratch, 1); /* (the mark reset: the next reading is this row's) */
            const double t = cli_time_enqueued(ctx, run_one, &a, reps);
            char mib[32] = "-";
            if (t >= 0 && mxfa_scratch_peak(ctx, &scratch, 0) == MXFA_OK)
                snprintf(mib, sizeof mib, "%.1f", scratch / 1048576.0);
            if (t < 0) {
                printf("%-26s %s\n", name, mxfa_last_error(ctx)); /* a shape the kernel does not take yet */
            } else if (backward) {
                printf("%-26s %10.3f %10.1f %14s %12s %18s %12s\n", name, t * 1e3, flops / t / 1e12, "-", "-", "-",
                       mib);
            } else {
                a.quantize_only = 1;
                const double tq = cli_time_enqueued(ctx, run_one, &a, reps);
                if (tq < 0)
                    rc = cli_error(cmd, "quantizing Q, K and V: %s", mxfa_last_error(ctx));
                else {
                    /* a quantization timed as long as the whole call (noise on a small shape) leaves no rate */
                    char rest[32] = "-";
                    if (tq < t)
                        snprintf(rest, sizeof rest, "%.1f", flops / (t - tq) / 1e12);
                    printf("%-26s %10.3f %10.1f %14.3f %11.0f%% %18s %12s\n", name, t * 1e3, flops / t / 1e12,
                           tq * 1e3, 100 * tq / t, rest, mib);
                }
            }
        }
        for (int j = 0; j < nbufs; j++)
            if (*bufs[j])
                mxfa_device_free(ctx, *bufs[j]);
        free(host), free(a.cu);
    }
    return rc;
}

int bench_attn_device_shapes(const char *cmd, const int *dims, int ndims, int causal, int64_t seqlen, int64_t heads,
                             attn_shape shapes[BENCH_SHAPES])
{
    int picked[BENCH_SHAPES];
    const int npicked = bench_shapes_pick(dims, ndims, causal, seqlen, heads, picked);
    for (int i = 0; i < npicked; i++)
        shapes[i] = bench_shapes[picked[i]];
    if (npicked > 0)
        return npicked;
    char list[256] = "", name[64];
    for (int i = 0; i < BENCH_SHAPES; i++) {
        bench_shape_name(&bench_shapes[i], name, sizeof name);
        const size_t at = strlen(list);
        snprintf(list + at, sizeof list - at, "%s%s", i ? " " : "", name);
    }
    cli_error(cmd, "no attention shape of the device bench matches --dims, --seqlen, --heads and --no-causal (its "
                   "shapes B,H,S,D, those of the H200 baselines: %s)", list);
    return -1;
}

int bench_attn_device(const char *cmd, mxfa_ctx *ctx, int reps, const int *models, int nmodels, int block_n,
                      int backward, const attn_shape *shapes, int nshapes)
{
    /* by default the models this GPU's kernels compute: sm100 on Blackwell,
     * sm90-bf16 and sm90-fp8 on Hopper */
    int arch = 0;
    const int blackwell = mxfa_device_info(ctx, &arch, NULL, 0) == MXFA_OK && arch == 100;
    const int hopper_models[2] = {MXFA_MODEL_SM90_BF16, MXFA_MODEL_SM90_FP8}, blackwell_models[1] = {MXFA_MODEL_SM100};
    if (nmodels == 0) {
        models = blackwell ? blackwell_models : hopper_models;
        nmodels = blackwell ? 1 : 2;
    }
    int rc = 0;
    for (int pass = 0; pass < (backward ? 2 : 1) && !rc; pass++)
        for (int m = 0; m < nmodels && !rc; m++)
            rc = bench_pass(cmd, ctx, reps, (mxfa_model)models[m], block_n, pass, shapes, nshapes);
    return rc;
}
