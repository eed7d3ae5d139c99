/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The bad-input contract (docs/ERRORS.md) for the attention and product
 * entry points. Each case starts from a call that succeeds, breaks one
 * argument, and expects the specific status, a message naming the reason,
 * every output byte as it was (outputs are filled with a sentinel) and every
 * input byte as it was. The attention cases run against all five attention
 * entry points where they apply.
 */
#include <math.h>

#include "mxfa.h"
#include "tap.h"

#define TQ 40
#define TK 48
#define HQ 4
#define HKV 2
#define D 64
#define SENT 0xA5
#define NSLOT 5
#define SLOT_BYTES (TQ * HQ * 2 * D * 8) /* room for a doubled head dim in f64 */

enum { FWD, FWD_F64, BWD, BWD_MX, BWD_F64, NCALL };
#define ALL ((1u << NCALL) - 1)
#define FWDS (1u << FWD | 1u << FWD_F64)
#define BWDS (1u << BWD | 1u << BWD_MX | 1u << BWD_F64)
#define QUANTIZED (1u << FWD | 1u << BWD | 1u << BWD_MX)
#define F64S (1u << FWD_F64 | 1u << BWD_F64)
static const char *const call_name[NCALL] = {"mxfa_attn_fwd", "mxfa_attn_fwd_f64", "mxfa_attn_bwd",
                                             "mxfa_attn_bwd_mx", "mxfa_attn_bwd_f64"};

static mxfa_ctx *ctx;
/* inputs, with copies to prove they are not written */
static float q_in[TQ * HQ * 2 * D], k_in[TK * HKV * 2 * D], v_in[TK * HKV * 2 * D], o_in[TQ * HQ * 2 * D],
    do_in[TQ * HQ * 2 * D], lse_in[TQ * HQ * 2];
static float q_copy[TQ * HQ * 2 * D], k_copy[TK * HKV * 2 * D], v_copy[TK * HKV * 2 * D];
/* outputs: five slots of sentinel bytes */
static uint8_t slot[NSLOT][SLOT_BYTES];

/* Everything one call takes, built valid by good() and then broken. */
typedef struct problem {
    mxfa_ctx *ctx;
    mxfa_attn_params p;
    const mxfa_attn_params *pp;
    mxfa_tensor q, k, v, o, dout, lse;
    const int32_t *cuq, *cuk;
    int batch;
    mxfa_tensor out[3]; /* fwd: o, lse; bwd: dq, dk, dv */
    mxfa_mx dk, dv;     /* bwd_mx */
    mxfa_tensor *outp[3];
    mxfa_mx *dkp, *dvp;
    const mxfa_tensor *qp, *kp, *vp, *dop;
} problem;

static int32_t cu_q[3] = {0, 16, TQ}, cu_k[3] = {0, 20, TK};

static mxfa_tensor t3(void *data, mxfa_dtype dt, int64_t a, int64_t b, int64_t c)
{
    mxfa_tensor t = {data, dt, MXFA_MEM_HOST, 3, {a, b, c}, {0}};
    return t;
}

static mxfa_tensor t2(void *data, mxfa_dtype dt, int64_t a, int64_t b)
{
    mxfa_tensor t = {data, dt, MXFA_MEM_HOST, 2, {a, b}, {0}};
    return t;
}

static void good(int call, problem *pr)
{
    memset(pr, 0, sizeof *pr);
    memset(slot, SENT, sizeof slot);
    pr->ctx = ctx;
    mxfa_attn_params_default(&pr->p);
    pr->pp = &pr->p;
    pr->q = t3(q_in, MXFA_F32, TQ, HQ, D);
    pr->k = t3(k_in, MXFA_F32, TK, HKV, D);
    pr->v = t3(v_in, MXFA_F32, TK, HKV, D);
    pr->o = t3(o_in, MXFA_F32, TQ, HQ, D);
    pr->dout = t3(do_in, MXFA_F32, TQ, HQ, D);
    pr->lse = t2(lse_in, MXFA_F32, TQ, HQ);
    pr->cuq = cu_q, pr->cuk = cu_k, pr->batch = 2;
    pr->qp = &pr->q, pr->kp = &pr->k, pr->vp = &pr->v, pr->dop = &pr->dout;
    mxfa_dtype f = call == FWD_F64 || call == BWD_F64 ? MXFA_F64 : MXFA_F32;
    if (call == FWD || call == FWD_F64) {
        pr->out[0] = t3(slot[0], f, TQ, HQ, D);
        pr->out[1] = t2(slot[1], f, TQ, HQ);
    } else {
        pr->out[0] = t3(slot[0], f, TQ, HQ, D);
        pr->out[1] = t3(slot[1], call == BWD_MX ? MXFA_E4M3 : f, TK, HKV, D);
        pr->out[2] = t3(slot[2], call == BWD_MX ? MXFA_E4M3 : f, TK, HKV, D);
        /* square-block scales: ceil(20/32) + ceil(28/32) block rows */
        mxfa_mx dk = {pr->out[1], t3(slot[3], MXFA_E8M0, 2, HKV, D / 32), MXFA_BLOCK_SQUARE, MXFA_LAYOUT_COMPACT};
        mxfa_mx dv = {pr->out[2], t3(slot[4], MXFA_E8M0, 2, HKV, D / 32), MXFA_BLOCK_SQUARE, MXFA_LAYOUT_COMPACT};
        pr->dk = dk, pr->dv = dv;
        pr->dkp = &pr->dk, pr->dvp = &pr->dv;
    }
    for (int i = 0; i < 3; i++)
        pr->outp[i] = &pr->out[i];
}

static mxfa_status run(int call, problem *pr)
{
    if (call == BWD_MX) { /* the mx outputs carry the data descriptors */
        if (pr->dkp)
            pr->dk.data = pr->out[1];
        if (pr->dvp)
            pr->dv.data = pr->out[2];
    }
    switch (call) {
    case FWD:
        return mxfa_attn_fwd(pr->ctx, pr->pp, pr->qp, pr->kp, pr->vp, pr->cuq, pr->cuk, pr->batch, pr->outp[0],
                             pr->outp[1]);
    case FWD_F64:
        return mxfa_attn_fwd_f64(pr->ctx, pr->pp, pr->qp, pr->kp, pr->vp, pr->cuq, pr->cuk, pr->batch, pr->outp[0],
                                 pr->outp[1]);
    case BWD:
        return mxfa_attn_bwd(pr->ctx, pr->pp, pr->qp, pr->kp, pr->vp, &pr->o, pr->dop, &pr->lse, pr->cuq, pr->cuk,
                             pr->batch, pr->outp[0], pr->outp[1], pr->outp[2]);
    case BWD_MX:
        return mxfa_attn_bwd_mx(pr->ctx, pr->pp, pr->qp, pr->kp, pr->vp, &pr->o, pr->dop, &pr->lse, pr->cuq,
                                pr->cuk, pr->batch, pr->outp[0], pr->dkp, pr->dvp);
    default:
        return mxfa_attn_bwd_f64(pr->ctx, pr->pp, pr->qp, pr->kp, pr->vp, pr->dop, pr->cuq, pr->cuk, pr->batch,
                                 pr->outp[0], pr->outp[1], pr->outp[2]);
    }
}

/* Every tensor of the head dims / head counts named, resized together. */
static void set_dim(problem *pr, int axis, int64_t qn, int64_t kn)
{
    mxfa_tensor *qs[] = {&pr->q, &pr->o, &pr->dout, &pr->out[0]}, *ks[] = {&pr->k, &pr->v};
    for (int i = 0; i < 4; i++)
        if (qs[i]->ndim == 3)
            qs[i]->shape[axis] = qn;
    for (int i = 0; i < 2; i++)
        ks[i]->shape[axis] = kn;
    if (axis == 1) {
        pr->lse.shape[1] = qn;
        if (pr->out[1].ndim == 2)
            pr->out[1].shape[1] = qn;
    }
}

typedef struct broken {
    const char *what;
    unsigned calls;     /* the entry points it applies to */
    mxfa_status want;
    const char *reason; /* a phrase the message must hold */
} broken;

enum {
    B_CTX, B_Q, B_K, B_V, B_OUT0, B_OUT1, B_DOUT, B_QDATA, B_MODEL, B_PRESET, B_PSCALE, B_CAUSAL, B_SCALE_NAN,
    B_SCALE_NEG, B_SCALE_INF, B_TILE_M, B_TILE_N, B_HEAD_DIM, B_HEADS, B_NDIM, B_NDIM_HUGE, B_KV_TOKENS, B_QK_DIM,
    B_ZERO_TOKENS, B_NEG_STRIDE, B_COUNT_OVERFLOW, B_STRIDE_OVERFLOW, B_TOKENS_INT32, B_OUT_SHAPE, B_OUT_DTYPE,
    B_IN_DTYPE, B_UNKNOWN_DTYPE, B_LSE_DTYPE, B_O_SHAPE, B_CU_ONE, B_CU_DECREASING, B_CU_START, B_CU_END, B_BATCH0,
    B_BATCH_DENSE, B_OUT_OVER_IN, B_OUT_OVER_OUT, B_OUT_SELF, B_DEVICE, B_MX_BLOCK, B_MX_LAYOUT, B_MX_SCALES,
    B_MX_DTYPE, B_MX_OVER_DQ, B_MX_OVER_DOUT, B_MX_SCALES_OVER_Q, B_MX_CROSS, NBROKEN
};

static const broken cases[NBROKEN] = {
    [B_CTX] = {"ctx NULL", ALL, MXFA_ERR_NULL, "ctx is NULL"},
    [B_Q] = {"q NULL", ALL, MXFA_ERR_NULL, "q: tensor descriptor is NULL"},
    [B_K] = {"k NULL", ALL, MXFA_ERR_NULL, "k: tensor descriptor is NULL"},
    [B_V] = {"v NULL", ALL, MXFA_ERR_NULL, "v: tensor descriptor is NULL"},
    [B_OUT0] = {"the first output (o or dq) NULL", ALL, MXFA_ERR_NULL, "is NULL"},
    [B_OUT1] = {"dk NULL", BWDS, MXFA_ERR_NULL, "dk"},
    [B_DOUT] = {"dout NULL", BWDS, MXFA_ERR_NULL, "dout"},
    [B_QDATA] = {"q->data NULL", ALL, MXFA_ERR_NULL, "q: data pointer is NULL"},
    [B_MODEL] = {"an unknown model", ALL, MXFA_ERR_INVALID, "unknown model"},
    [B_PRESET] = {"an unknown preset", ALL, MXFA_ERR_INVALID, "unknown preset"},
    [B_PSCALE] = {"an unknown P scaling", ALL, MXFA_ERR_INVALID, "unknown P scaling"},
    [B_CAUSAL] = {"an unknown causal mode", ALL, MXFA_ERR_INVALID, "unknown causal mode"},
    [B_SCALE_NAN] = {"softmax_scale NaN", ALL, MXFA_ERR_INVALID, "softmax_scale"},
    [B_SCALE_NEG] = {"softmax_scale negative", ALL, MXFA_ERR_INVALID, "softmax_scale"},
    [B_SCALE_INF] = {"softmax_scale infinite", ALL, MXFA_ERR_INVALID, "softmax_scale"},
    [B_TILE_M] = {"a 48-query tile", ALL, MXFA_ERR_INVALID, "tile sizes"},
    [B_TILE_N] = {"a 2048-key tile", ALL, MXFA_ERR_INVALID, "tile sizes"},
    [B_HEAD_DIM] = {"head dim 96", ALL, MXFA_ERR_UNSUPPORTED, "head dimension 96"},
    [B_HEADS] = {"3 query heads over 2 key/value heads", ALL, MXFA_ERR_SHAPE, "not a multiple"},
    [B_NDIM] = {"a 2-D q", ALL, MXFA_ERR_SHAPE, "q: expected 3 dimensions"},
    [B_NDIM_HUGE] = {"q with 99 dimensions", ALL, MXFA_ERR_SHAPE, "q: expected 3 dimensions"},
    [B_KV_TOKENS] = {"v with other tokens than k", ALL, MXFA_ERR_SHAPE, "v: dimension 0"},
    [B_QK_DIM] = {"k with another head dim than q", ALL, MXFA_ERR_SHAPE, "k: dimension 2"},
    [B_ZERO_TOKENS] = {"q with zero tokens", ALL, MXFA_ERR_SHAPE, "sizes must be positive"},
    [B_NEG_STRIDE] = {"k with a negative stride", ALL, MXFA_ERR_INVALID, "must be positive"},
    [B_COUNT_OVERFLOW] = {"q's element count overflows", ALL, MXFA_ERR_OVERFLOW, "overflows"},
    [B_STRIDE_OVERFLOW] = {"q's strides overflow", ALL, MXFA_ERR_OVERFLOW, "overflow"},
    [B_TOKENS_INT32] = {"2^31 tokens (offsets are int32)", ALL, MXFA_ERR_OVERFLOW, "2^31 - 1 tokens"},
    [B_OUT_SHAPE] = {"the first output of the wrong shape", ALL, MXFA_ERR_SHAPE, "expected"},
    [B_OUT_DTYPE] = {"the first output of a dtype not allowed", ALL, MXFA_ERR_INVALID, "is not allowed here"},
    [B_IN_DTYPE] = {"q in f64", ALL, MXFA_ERR_INVALID, "q: dtype f64"},
    [B_UNKNOWN_DTYPE] = {"q of an unknown dtype", ALL, MXFA_ERR_INVALID, "q: dtype"},
    [B_LSE_DTYPE] = {"lse in bf16", ALL & ~(1u << BWD_F64), MXFA_ERR_INVALID, "lse: dtype bf16"},
    [B_O_SHAPE] = {"the forward's o of the wrong shape", 1u << BWD | 1u << BWD_MX, MXFA_ERR_SHAPE, "o: dimension"},
    [B_CU_ONE] = {"cu_seqlens_q without cu_seqlens_k", ALL, MXFA_ERR_NULL, "give both"},
    [B_CU_DECREASING] = {"decreasing cu_seqlens_k", ALL, MXFA_ERR_INVALID, "cu_seqlens_k"},
    [B_CU_START] = {"cu_seqlens_q not starting at 0", ALL, MXFA_ERR_INVALID, "cu_seqlens[0] must be 0"},
    [B_CU_END] = {"cu_seqlens_q not ending at the tokens", ALL, MXFA_ERR_SHAPE, "does not match"},
    [B_BATCH0] = {"batch 0 with cu_seqlens", ALL, MXFA_ERR_SHAPE, "batch must be positive"},
    [B_BATCH_DENSE] = {"batch 2 without cu_seqlens", ALL, MXFA_ERR_INVALID, "batch is one sequence"},
    [B_OUT_OVER_IN] = {"the first output over q", ALL, MXFA_ERR_ALIAS, "share memory"},
    [B_OUT_OVER_OUT] = {"the second output over the first", ALL, MXFA_ERR_ALIAS, "share memory"},
    [B_OUT_SELF] = {"the first output with strides that overlap", ALL, MXFA_ERR_ALIAS, "overlap"},
    [B_DEVICE] = {"q in device memory on the ref backend", ALL, MXFA_ERR_UNSUPPORTED, "device memory"},
    [B_MX_BLOCK] = {"dk in row blocks", 1u << BWD_MX, MXFA_ERR_UNSUPPORTED, "square blocks"},
    [B_MX_LAYOUT] = {"dv's scales swizzled", 1u << BWD_MX, MXFA_ERR_UNSUPPORTED, "compact layout"},
    [B_MX_SCALES] = {"dk's scales with a block row too few", 1u << BWD_MX, MXFA_ERR_SHAPE, "dimension 0"},
    [B_MX_DTYPE] = {"dv's data in f32", 1u << BWD_MX, MXFA_ERR_INVALID, "dtype f32"},
    [B_MX_OVER_DQ] = {"dk's data over dq", 1u << BWD_MX, MXFA_ERR_ALIAS, "dk->data and dq share memory"},
    [B_MX_OVER_DOUT] = {"dv's data over dout", 1u << BWD_MX, MXFA_ERR_ALIAS, "dv->data and dout share memory"},
    [B_MX_SCALES_OVER_Q] = {"dv's scales over q", 1u << BWD_MX, MXFA_ERR_ALIAS, "dv->scales and q share memory"},
    [B_MX_CROSS] = {"dk's scales over dv's data", 1u << BWD_MX, MXFA_ERR_ALIAS, "share memory"},
};

static void breaks(int b, int call, problem *pr)
{
    int fwd = call == FWD || call == FWD_F64;
    switch (b) {
    case B_CTX: pr->ctx = NULL; break;
    case B_Q: pr->qp = NULL; break;
    case B_K: pr->kp = NULL; break;
    case B_V: pr->vp = NULL; break;
    case B_OUT0: pr->outp[0] = NULL; break;
    case B_OUT1: pr->outp[1] = NULL, pr->dkp = NULL; break;
    case B_DOUT: pr->dop = NULL; break;
    case B_QDATA: pr->q.data = NULL; break;
    case B_MODEL: pr->p.model = (mxfa_model)9; break;
    case B_PRESET: pr->p.preset = (mxfa_preset)-1; break;
    case B_PSCALE: pr->p.p_scale = (mxfa_p_scale)2; break;
    case B_CAUSAL: pr->p.causal = (mxfa_causal)3; break;
    case B_SCALE_NAN: pr->p.softmax_scale = NAN; break;
    case B_SCALE_NEG: pr->p.softmax_scale = -0.125f; break;
    case B_SCALE_INF: pr->p.softmax_scale = INFINITY; break;
    case B_TILE_M: pr->p.block_m = 48; break;
    case B_TILE_N: pr->p.block_n = 2048; break;
    case B_HEAD_DIM: set_dim(pr, 2, 96, 96); break;
    case B_HEADS: set_dim(pr, 1, 3, 2); break;
    case B_NDIM: pr->q.ndim = 2; break;
    case B_NDIM_HUGE: pr->q.ndim = 99; break;
    case B_KV_TOKENS: pr->v.shape[0] = TK - 1; break;
    case B_QK_DIM: pr->k.shape[2] = 128, pr->k.shape[0] = TK / 2; break;
    case B_ZERO_TOKENS: pr->q.shape[0] = 0; break;
    case B_NEG_STRIDE: pr->k.stride[0] = -HKV * D, pr->k.stride[1] = D, pr->k.stride[2] = 1; break;
    case B_COUNT_OVERFLOW:
        pr->q.shape[0] = INT64_C(1) << 50, pr->q.shape[1] = INT64_C(1) << 20;
        break;
    case B_STRIDE_OVERFLOW:
        pr->q.stride[0] = INT64_MAX / 4, pr->q.stride[1] = D, pr->q.stride[2] = 1;
        break;
    case B_TOKENS_INT32:
        /* 2^31 query tokens, rows one element apart (an input may
         * overlap itself): more tokens than int32 offsets hold, refused
         * before any element is read */
        pr->cuq = pr->cuk = NULL, pr->batch = 1;
        pr->q.shape[0] = INT64_C(1) << 31;
        pr->q.stride[0] = 1, pr->q.stride[1] = 1, pr->q.stride[2] = 1;
        break;
    case B_OUT_SHAPE: pr->out[0].shape[2] = D / 2; break;
    case B_OUT_DTYPE: pr->out[0].dtype = call == FWD_F64 || call == BWD_F64 ? MXFA_F32 : MXFA_E4M3; break;
    case B_IN_DTYPE: pr->q.dtype = MXFA_F64; break;
    case B_UNKNOWN_DTYPE: pr->q.dtype = (mxfa_dtype)77; break;
    case B_LSE_DTYPE:
        if (fwd)
            pr->out[1].dtype = MXFA_BF16;
        else
            pr->lse.dtype = MXFA_BF16;
        break;
    case B_O_SHAPE: pr->o.shape[1] = HQ / 2; break;
    case B_CU_ONE: pr->cuk = NULL; break;
    case B_CU_DECREASING: {
        static int32_t bad[3] = {0, TK, TK - 1};
        pr->cuk = bad;
        break;
    }
    case B_CU_START: {
        static int32_t bad[3] = {1, 16, TQ};
        pr->cuq = bad;
        break;
    }
    case B_CU_END: {
        static int32_t bad[3] = {0, 16, TQ - 1};
        pr->cuq = bad;
        break;
    }
    case B_BATCH0: pr->batch = 0; break;
    case B_BATCH_DENSE: pr->cuq = pr->cuk = NULL; break;
    case B_OUT_OVER_IN: pr->out[0].data = q_in; break;
    case B_OUT_OVER_OUT: pr->out[1].data = slot[0] + 64; break;
    case B_OUT_SELF:
        pr->out[0].stride[0] = HQ * D, pr->out[0].stride[1] = 1, pr->out[0].stride[2] = 1;
        break;
    case B_DEVICE: pr->q.memory = MXFA_MEM_DEVICE; break;
    case B_MX_BLOCK: pr->dk.block = MXFA_BLOCK_ROW; break;
    case B_MX_LAYOUT: pr->dv.layout = MXFA_LAYOUT_SWIZZLED; break;
    case B_MX_SCALES: pr->dk.scales.shape[0] = 1; break;
    case B_MX_DTYPE: pr->out[2].dtype = MXFA_F32; break;
    case B_MX_OVER_DQ: pr->out[1].data = slot[0] + 8; break;
    case B_MX_OVER_DOUT: pr->out[2].data = do_in; break;
    case B_MX_SCALES_OVER_Q: pr->dv.scales.data = q_in; break;
    case B_MX_CROSS: pr->dk.scales.data = slot[2] + 100; break;
    }
}

static int outputs_untouched(void)
{
    for (int s = 0; s < NSLOT; s++)
        for (size_t i = 0; i < SLOT_BYTES; i++)
            if (slot[s][i] != SENT)
                return 0;
    return 1;
}

static int inputs_untouched(void)
{
    return !memcmp(q_in, q_copy, sizeof q_in) && !memcmp(k_in, k_copy, sizeof k_in) &&
           !memcmp(v_in, v_copy, sizeof v_in);
}

static void attention(void)
{
    for (int call = 0; call < NCALL; call++) {
        problem pr;
        good(call, &pr);
        mxfa_status st = run(call, &pr);
        ok(st == MXFA_OK && !outputs_untouched(), "%s: the unbroken call succeeds and writes its outputs",
           call_name[call]);
        if (st != MXFA_OK)
            diag("%s", mxfa_last_error(ctx));
        for (int b = 0; b < NBROKEN; b++) {
            if (!(cases[b].calls >> call & 1))
                continue;
            good(call, &pr);
            breaks(b, call, &pr);
            st = run(call, &pr);
            const char *msg = mxfa_last_error(pr.ctx);
            int out_ok = outputs_untouched(), in_ok = inputs_untouched();
            if (!ok(st == cases[b].want && strstr(msg, cases[b].reason) && out_ok && in_ok, "%s: %s -> %s",
                    call_name[call], cases[b].what, mxfa_strerror(cases[b].want)))
                diag("got %s, message '%s', outputs %s, inputs %s", mxfa_strerror(st), msg,
                     out_ok ? "untouched" : "WRITTEN", in_ok ? "untouched" : "WRITTEN");
        }
    }
}

/* ---- products: mxfa_gemm and mxfa_mma_chain ---- */

#define M 8
#define N 12
#define K 64

static uint8_t a_codes[M * K], b_codes[N * K], a_scales[M * 2], b_scales[N * 2];
static uint16_t a_bf16[M * K], b_bf16[N * K];
static float c_in[M * N];

static void expect(mxfa_status got, mxfa_status want, const char *reason, const char *what)
{
    const char *msg = mxfa_last_error(ctx);
    int out_ok = outputs_untouched();
    if (!ok(got == want && strstr(msg, reason) && out_ok, "%s -> %s", what, mxfa_strerror(want)))
        diag("got %s, message '%s', output %s", mxfa_strerror(got), msg, out_ok ? "untouched" : "WRITTEN");
    memset(slot, SENT, sizeof slot);
}

static void products(void)
{
    memset(a_codes, 0x38, sizeof a_codes), memset(b_codes, 0x30, sizeof b_codes);
    memset(a_scales, 127, sizeof a_scales), memset(b_scales, 126, sizeof b_scales);
    for (int i = 0; i < M * N; i++)
        c_in[i] = (float)i;
    const mxfa_mx A0 = {t2(a_codes, MXFA_E4M3, M, K), t2(a_scales, MXFA_E8M0, M, 2), MXFA_BLOCK_ROW,
                        MXFA_LAYOUT_COMPACT};
    const mxfa_mx B0 = {t2(b_codes, MXFA_E5M2, N, K), t2(b_scales, MXFA_E8M0, N, 2), MXFA_BLOCK_ROW,
                        MXFA_LAYOUT_COMPACT};
    const mxfa_tensor C0 = t2(c_in, MXFA_F32, M, N), D0 = t2(slot[0], MXFA_F32, M, N);
    mxfa_mx A = A0, B = B0;
    mxfa_tensor C = C0, Dt = D0;
    memset(slot, SENT, sizeof slot);
    ok(mxfa_gemm(ctx, &A, &B, &C, MXFA_MODEL_SM100, &Dt) == MXFA_OK && !outputs_untouched(),
       "mxfa_gemm: the unbroken call succeeds");
    memset(slot, SENT, sizeof slot);
    expect(mxfa_gemm(NULL, &A, &B, &C, MXFA_MODEL_SM100, &Dt), MXFA_ERR_NULL, "", "mxfa_gemm: ctx NULL");
    expect(mxfa_gemm(ctx, NULL, &B, &C, MXFA_MODEL_SM100, &Dt), MXFA_ERR_NULL, "a is NULL", "mxfa_gemm: a NULL");
    expect(mxfa_gemm(ctx, &A, &B, &C, MXFA_MODEL_SM100, NULL), MXFA_ERR_NULL, "d: tensor descriptor is NULL",
           "mxfa_gemm: d NULL");
    expect(mxfa_gemm(ctx, &A, &B, &C, (mxfa_model)4, &Dt), MXFA_ERR_INVALID, "unknown model",
           "mxfa_gemm: an unknown model");
    B.data.shape[1] = K - 1;
    expect(mxfa_gemm(ctx, &A, &B, &C, MXFA_MODEL_SM100, &Dt), MXFA_ERR_SHAPE, "b->data: dimension 1",
           "mxfa_gemm: B's K differs from A's");
    B = B0, A.scales.shape[1] = 3;
    expect(mxfa_gemm(ctx, &A, &B, &C, MXFA_MODEL_SM100, &Dt), MXFA_ERR_SHAPE, "a->scales: dimension 1",
           "mxfa_gemm: A's scales of the wrong shape");
    A = A0, A.block = MXFA_BLOCK_SQUARE;
    expect(mxfa_gemm(ctx, &A, &B, &C, MXFA_MODEL_SM100, &Dt), MXFA_ERR_UNSUPPORTED, "row blocks",
           "mxfa_gemm: square-block A");
    A = A0, A.block = (mxfa_block)7;
    expect(mxfa_gemm(ctx, &A, &B, &C, MXFA_MODEL_SM100, &Dt), MXFA_ERR_INVALID, "row blocks",
           "mxfa_gemm: an unknown block shape");
    A = A0, B.layout = MXFA_LAYOUT_SWIZZLED;
    expect(mxfa_gemm(ctx, &A, &B, &C, MXFA_MODEL_SM100, &Dt), MXFA_ERR_UNSUPPORTED, "compact layout",
           "mxfa_gemm: swizzled B scales");
    B = B0, A.data.dtype = MXFA_BF16;
    expect(mxfa_gemm(ctx, &A, &B, &C, MXFA_MODEL_SM100, &Dt), MXFA_ERR_INVALID, "a->data: dtype bf16",
           "mxfa_gemm: bf16 A");
    A = A0, Dt.dtype = MXFA_BF16;
    expect(mxfa_gemm(ctx, &A, &B, &C, MXFA_MODEL_SM100, &Dt), MXFA_ERR_INVALID, "d: dtype bf16",
           "mxfa_gemm: a bf16 D");
    Dt = D0, Dt.shape[0] = M + 1;
    expect(mxfa_gemm(ctx, &A, &B, &C, MXFA_MODEL_SM100, &Dt), MXFA_ERR_SHAPE, "d: dimension 0",
           "mxfa_gemm: D of the wrong shape");
    Dt = D0, A.data.shape[0] = INT64_C(1) << 40, A.data.shape[1] = INT64_C(1) << 40;
    expect(mxfa_gemm(ctx, &A, &B, &C, MXFA_MODEL_SM100, &Dt), MXFA_ERR_OVERFLOW, "overflows",
           "mxfa_gemm: A's element count overflows");
    A = A0, Dt.data = a_codes;
    expect(mxfa_gemm(ctx, &A, &B, &C, MXFA_MODEL_SM100, &Dt), MXFA_ERR_ALIAS, "share memory",
           "mxfa_gemm: D over A's codes");
    Dt = D0;
    {
        /* D partly over C (not the same view): refused; C stays as it was */
        static float cd[M * N + 4];
        for (int i = 0; i < M * N + 4; i++)
            cd[i] = (float)i;
        mxfa_tensor c2 = t2(cd, MXFA_F32, M, N), d2 = t2(cd + 4, MXFA_F32, M, N);
        mxfa_status st = mxfa_gemm(ctx, &A, &B, &c2, MXFA_MODEL_SM100, &d2);
        int same = 1;
        for (int i = 0; i < M * N + 4; i++)
            same &= cd[i] == (float)i;
        ok(st == MXFA_ERR_ALIAS && same && strstr(mxfa_last_error(ctx), "share memory"),
           "mxfa_gemm: D partly over C -> %s, C untouched", mxfa_strerror(MXFA_ERR_ALIAS));
    }
    Dt = D0, C = C0, Dt.stride[0] = 1, Dt.stride[1] = 1;
    expect(mxfa_gemm(ctx, &A, &B, &C, MXFA_MODEL_SM100, &Dt), MXFA_ERR_ALIAS, "overlap",
           "mxfa_gemm: a D whose strides overlap");
    Dt = D0, C.dtype = MXFA_F64;
    expect(mxfa_gemm(ctx, &A, &B, &C, MXFA_MODEL_SM100, &Dt), MXFA_ERR_INVALID, "c: dtype f64",
           "mxfa_gemm: an f64 C");

    /* chains of single instructions */
    C = C0, Dt = D0;
    mxfa_tensor a8 = t2(a_codes, MXFA_E4M3, M, K), b8 = t2(b_codes, MXFA_E4M3, N, K);
    mxfa_tensor a16 = t2(a_bf16, MXFA_BF16, M, K), b16 = t2(b_bf16, MXFA_BF16, N, K);
    ok(mxfa_mma_chain(ctx, MXFA_INSTR_SM90_WGMMA_FP8, &a8, &b8, &C, &Dt) == MXFA_OK && !outputs_untouched(),
       "mxfa_mma_chain: the unbroken call succeeds");
    memset(slot, SENT, sizeof slot);
    expect(mxfa_mma_chain(NULL, MXFA_INSTR_SM90_WGMMA_FP8, &a8, &b8, &C, &Dt), MXFA_ERR_NULL, "",
           "mxfa_mma_chain: ctx NULL");
    expect(mxfa_mma_chain(ctx, MXFA_INSTR_SM90_WGMMA_FP8, &a8, NULL, &C, &Dt), MXFA_ERR_NULL,
           "b: tensor descriptor is NULL", "mxfa_mma_chain: b NULL");
    expect(mxfa_mma_chain(ctx, (mxfa_instr)2, &a8, &b8, &C, &Dt), MXFA_ERR_INVALID, "unknown instruction",
           "mxfa_mma_chain: an unknown instruction");
    expect(mxfa_mma_chain(ctx, MXFA_INSTR_SM90_WGMMA_BF16, &a8, &b8, &C, &Dt), MXFA_ERR_INVALID, "a: dtype e4m3",
           "mxfa_mma_chain: fp8 operands for the bf16 instruction");
    expect(mxfa_mma_chain(ctx, MXFA_INSTR_SM90_WGMMA_FP8, &a16, &b16, &C, &Dt), MXFA_ERR_INVALID, "a: dtype bf16",
           "mxfa_mma_chain: bf16 operands for the fp8 instruction");
    a8.shape[1] = b8.shape[1] = 48;
    expect(mxfa_mma_chain(ctx, MXFA_INSTR_SM90_WGMMA_FP8, &a8, &b8, &C, &Dt), MXFA_ERR_SHAPE, "not a multiple",
           "mxfa_mma_chain: K = 48 for a K = 32 instruction");
    a8.shape[1] = K, b8.shape[1] = K, Dt.data = b_codes;
    expect(mxfa_mma_chain(ctx, MXFA_INSTR_SM90_WGMMA_FP8, &a8, &b8, &C, &Dt), MXFA_ERR_ALIAS, "share memory",
           "mxfa_mma_chain: D over B");
}

/* The default softmax scale, as every backend and the CLI take it from the
 * library: 1/sqrt(D) computed in double and rounded once to fp32. */
static void softmax_scale(void)
{
    mxfa_attn_params p;
    mxfa_attn_params_default(&p);
    int good = 1;
    for (int64_t d = 1; d <= 512; d++) {
        const float want = (float)(1.0 / sqrt((double)d));
        good &= mxfa_attn_softmax_scale(NULL, d) == want && mxfa_attn_softmax_scale(&p, d) == want;
    }
    ok(good, "default softmax scale: fl(1/sqrt(D)) for D = 1 .. 512, with NULL and default parameters");
    ok(mxfa_attn_softmax_scale(NULL, 64) == 0.125f && mxfa_attn_softmax_scale(NULL, 256) == 0.0625f,
       "default softmax scale: 1/8 at D = 64, 1/16 at D = 256");
    p.softmax_scale = 0.3f;
    ok(mxfa_attn_softmax_scale(&p, 64) == 0.3f, "a given softmax scale is used as it is");
    ok(isnan(mxfa_attn_softmax_scale(NULL, 0)) && isnan(mxfa_attn_softmax_scale(NULL, -4)),
       "no default softmax scale for a head dimension below 1: NaN");
}

int main(void)
{
    rng_seed_from_env(1);
    for (size_t i = 0; i < sizeof q_in / sizeof *q_in; i++)
        q_in[i] = (float)((double)(rng_next() >> 11) * 0x1p-53 - 0.5);
    for (size_t i = 0; i < sizeof k_in / sizeof *k_in; i++) {
        k_in[i] = (float)((double)(rng_next() >> 11) * 0x1p-53 - 0.5);
        v_in[i] = (float)((double)(rng_next() >> 11) * 0x1p-53 - 0.5);
    }
    for (size_t i = 0; i < sizeof o_in / sizeof *o_in; i++)
        o_in[i] = do_in[i] = 0.25f;
    memcpy(q_copy, q_in, sizeof q_in), memcpy(k_copy, k_in, sizeof k_in), memcpy(v_copy, v_in, sizeof v_in);
    if (!ok(mxfa_open(&ctx, "ref") == MXFA_OK, "open ref"))
        return done_testing();
    attention();
    products();
    softmax_scale();
    mxfa_close(ctx);
    return done_testing();
}
