/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mxfa selftest: the Blackwell (sm_100a) kernels of the cuda backend
 * against the emulator's sm100 model, bit for bit, for whoever has the
 * hardware. Every case is drawn at random (seeded), run on the backend
 * under test and on ref (or, for the large ones, on the cpu backend, which
 * the test suite holds to ref bit for bit), and every output byte compared.
 * Every call on the backend under test runs under a time limit (a watchdog,
 * tools/watchdog.h): a kernel that hangs is reported with its case.
 */
#include "config.h"

#include <dlfcn.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "draws.h"
#include "watchdog.h"

#define EXIT_SKIP 77

static const char selftest_help[] =
    "usage: mxfa selftest [--backend cuda|cpu] [--cases N] [--seed N] [--timeout S] [--stall-test]\n"
    "\n"
    "Runs every sm_100a (Blackwell) kernel of the cuda backend on random inputs,\n"
    "special values included, and compares every output bit with the emulator's\n"
    "sm100 model (the ref backend). Prints a line a kernel and a summary. Every\n"
    "call on the backend under test runs under a time limit: a call that does\n"
    "not finish in time is reported as a hang, with its case, and ends the run.\n"
    "Exit status: 0 all agree, 1 a difference or an error, 3 a hang, 77\n"
    "nothing to check here (no cuda backend, or its GPU is not of compute\n"
    "capability 10.0).\n"
    "  --backend     the backend under test (default cuda); cpu runs the same\n"
    "                comparisons on the cpu backend, a check of the comparisons\n"
    "                that needs no GPU\n"
    "  --cases       random cases a kernel (default 60)\n"
    "  --seed        the first random state (default 1)\n"
    "  --timeout     seconds a call may take (default 60)\n"
    "  --stall-test  instead of the cases, run a test kernel that does not\n"
    "                finish in time, on any GPU of the cuda backend: a check of\n"
    "                the time limit itself, which must report a hang (exit 3)\n";

enum { OPT_BACKEND = 256, OPT_CASES, OPT_SEED, OPT_TIMEOUT, OPT_STALL };

static const struct option options[] = {
    {"backend", required_argument, NULL, OPT_BACKEND},
    {"cases", required_argument, NULL, OPT_CASES},
    {"seed", required_argument, NULL, OPT_SEED},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"stall-test", no_argument, NULL, OPT_STALL},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* ---- random draws (splitmix64) ---- */

static uint64_t rng;

static uint32_t below(uint32_t n)
{
    return draw_below(&rng, n);
}

/* fp32 bits for C: ordinary values, signed zeros, subnormals, extremes, and
 * (when not calm) Inf and NaN. */
static uint32_t c_bits(int calm)
{
    static const uint32_t special[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x807FFFFFu,
                                       0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F800000u, 0x7FC00000u};
    if (below(10) == 0) {
        uint32_t v = special[below(8)];
        return calm && (v & 0x7F800000u) == 0x7F800000u ? 0x3F800000u : v;
    }
    const uint32_t e = 100 + below(56);
    return (uint32_t)below(2) << 31 | e << 23 | (below(1u << 23));
}

/* ---- cases ---- */

/* One comparison: what it was (for the report) and whether it agreed. */
typedef struct {
    char what[512];
    int agreed; /* 1 agree, 0 differ, -1 the backend under test refused */
    char why[256];
} outcome;

static int64_t dim(int64_t hi)
{
    return below(3) == 0 ? 1 + below(40) : 1 + below((uint32_t)hi);
}

/* The first differing element of two byte arrays of elements es bytes
 * (4: fp32, 2: bf16), into o->what under the tensor's name. */
static int same_elements(const char *name, const void *want, const void *got, int64_t n, int es, outcome *o)
{
    if (memcmp(want, got, (size_t)(n * es)) == 0)
        return 1;
    for (int64_t i = 0; i < n; i++)
        if (memcmp((const uint8_t *)want + i * es, (const uint8_t *)got + i * es, (size_t)es)) {
            uint32_t x = 0, y = 0;
            memcpy(&x, (const uint8_t *)want + i * es, (size_t)es), memcpy(&y, (const uint8_t *)got + i * es, (size_t)es);
            size_t l = strlen(o->what);
            snprintf(o->what + l, sizeof o->what - l, "; %s differs first at element %lld: emulator %08x, kernel %08x",
                     name, (long long)i, (unsigned)x, (unsigned)y);
            break;
        }
    return 0;
}

/* Before a call on the oracle (i = 0) or on the backend under test (i = 1):
 * the latter runs under the time limit from here until call_ok, with the
 * case as the report of a hang. */
static void call_begin(int i, const outcome *o)
{
    if (i == 1)
        watchdog_arm(o->what);
}

/* After a call on the oracle (i = 0) or on the backend under test (i = 1,
 * whose work is waited for): 1 when it succeeded; else 0 with o->why, and
 * o->agreed -1 when the backend under test refused (it does not do that). */
static int call_ok(mxfa_status st, int i, mxfa_ctx *ctx, outcome *o)
{
    if (st == MXFA_OK && i == 1)
        st = mxfa_synchronize(ctx);
    if (i == 1)
        watchdog_disarm();
    if (st == MXFA_OK)
        return 1;
    o->agreed = i == 1 && st == MXFA_ERR_UNSUPPORTED ? -1 : 0;
    snprintf(o->why, sizeof o->why, "%s: %s", i ? "under test" : "emulator", mxfa_last_error(ctx));
    return 0;
}

/* What an attention case draws first: the head dim (64, 128, 256), the
 * heads (GQA), up to three sequences of up to `most` tokens each (an eighth
 * of them empty; one token at least in all: the API takes no empty tensor),
 * and sm100 with any preset, mask and P scaling; and its description. */
typedef struct attn_draw {
    int64_t d, tq, tk;
    int batch, hq, hkv;
    int32_t cq[4], ck[4];
    mxfa_attn_params p;
} attn_draw;

/* The case's description: enough to draw it again by hand. */
static void draw_name(const attn_draw *a, outcome *o)
{
    int n = snprintf(o->what, sizeof o->what, "%s, %s P, D %lld, heads %d/%d, preset %s, sequences (q, k):",
                     a->p.causal == MXFA_CAUSAL ? "leak-free causal" : a->p.causal ? "plain causal" : "no mask",
                     mxfa_p_scale_name(a->p.p_scale), (long long)a->d, a->hq, a->hkv, mxfa_preset_name(a->p.preset));
    for (int b = 0; b < a->batch && n > 0 && (size_t)n < sizeof o->what; b++)
        n += snprintf(o->what + n, sizeof o->what - (size_t)n, " (%d, %d)", (int)(a->cq[b + 1] - a->cq[b]),
                      (int)(a->ck[b + 1] - a->ck[b]));
}

/* A sequence's key count for `lq` queries under a causal mask, half the
 * time: lq plus an offset that is neither 0 nor 127 modulo the key tile of
 * 128, so that the leak-free mask's key tiles mix bf16 and block-scaled
 * steps on O (gpu/sm100/pv_plan.h says where; with two query tiles or more
 * some always do). -1 the other half. */
static int32_t mixed_tiles_lk(int32_t lq)
{
    if (below(2))
        return -1;
    const int32_t off = 1 + (int32_t)below(126) + (below(2) ? 128 : 0); /* 1..126 or 129..254 */
    return lq + off;
}

/* many: three sequences of two or three pairs of query tiles, 64 to 144
 * heads, D = 64 or 128: 384 work tiles or more, so that each CTA of the
 * persistent kernel (one an SM, 148 on a B200) takes several one after
 * another. The backward pass's items, key tiles times heads, are
 * usually several hundred as well. Under a causal mask, half the
 * sequences have at least two query tiles and the offsets of
 * mixed_tiles_lk. */
static void draw_attn(uint32_t most, int many, attn_draw *a, outcome *o)
{
    memset(a, 0, sizeof *a);
    mxfa_attn_params_default(&a->p);
    a->p.model = MXFA_MODEL_SM100;
    a->p.preset = (mxfa_preset)below(4);
    a->p.causal = (mxfa_causal)below(3);
    a->p.p_scale = below(2) ? MXFA_P_DYNAMIC : MXFA_P_CONST;
    a->d = 64 << below(many ? 2 : 3);
    a->batch = many ? 3 : 1 + (int)below(3);
    a->hkv = many ? 32 + (int)below(17) : 1 + (int)below(2);
    a->hq = a->hkv * (many ? 2 + (int)below(2) : 1 + (int)below(2));
    for (int b = 0; b < a->batch; b++) {
        int32_t lq = many ? 257 + (int32_t)below(most - 256) : below(8) == 0 ? 0 : 1 + (int32_t)below(most);
        int32_t lk = below(8) == 0 ? 0 : 1 + (int32_t)below(most);
        if (a->p.causal != MXFA_CAUSAL_NONE) {
            const int32_t at_least_two = lq > 256 ? lq : 257 + (int32_t)below(most > 256 ? most - 256 : 44);
            const int32_t mixed = mixed_tiles_lk(at_least_two);
            if (mixed > 0)
                lq = at_least_two, lk = mixed;
        }
        a->cq[b + 1] = a->cq[b] + lq, a->ck[b + 1] = a->ck[b] + lk;
    }
    if (a->cq[a->batch] == 0)
        a->cq[a->batch] = 1;
    if (a->ck[a->batch] == 0)
        a->ck[a->batch] = 1;
    a->tq = a->cq[a->batch], a->tk = a->ck[a->batch];
    draw_name(a, o);
}

/* D = A * B^T + C under sm100: shapes with ragged edges, both element
 * formats on each side, scales near 1, anywhere or with NaN, C absent,
 * separate or D itself. big: sizes that run many tiles and stages, checked
 * against the cpu backend. */
static void gemm_case(mxfa_ctx *test, mxfa_ctx *oracle, int big, outcome *o)
{
    const int64_t M = big ? 700 + below(200) : dim(300), N = big ? 600 + below(400) : dim(300);
    const int64_t K = big ? 2000 + below(200)
                    : below(3) == 0 ? 1 + below(70)
                    : below(2)      ? 32 * (1 + below(24))
                                    : 1 + below(800);
    const int64_t nkb = (K + 31) / 32;
    const mxfa_dtype fa = below(2) ? MXFA_E5M2 : MXFA_E4M3, fb = below(2) ? MXFA_E5M2 : MXFA_E4M3;
    const int calm = big || below(4) != 0, mode = big ? 0 : (int)below(3), cmode = (int)below(3);
    snprintf(o->what, sizeof o->what, "M %lld N %lld K %lld, %s x %s, scales %s, C %s", (long long)M, (long long)N,
             (long long)K, mxfa_dtype_name(fa), mxfa_dtype_name(fb),
             mode == 0 ? "near 1" : mode == 1 ? "anywhere" : "with NaN",
             cmode == 0 ? "none" : cmode == 1 ? "separate" : "is D");
    uint8_t *a = malloc((size_t)(M * K)), *b = malloc((size_t)(N * K));
    uint8_t *sa = malloc((size_t)(M * nkb)), *sb = malloc((size_t)(N * nkb));
    float *c = malloc((size_t)(M * N) * 4), *d[2] = {malloc((size_t)(M * N) * 4), malloc((size_t)(M * N) * 4)};
    o->agreed = 0;
    if (!a || !b || !sa || !sb || !c || !d[0] || !d[1]) {
        snprintf(o->why, sizeof o->why, "out of host memory");
        goto done;
    }
    for (int64_t i = 0; i < M * K; i++)
        a[i] = draw_fp8_code(&rng, fa, calm);
    for (int64_t i = 0; i < N * K; i++)
        b[i] = draw_fp8_code(&rng, fb, calm);
    for (int64_t i = 0; i < M * nkb; i++)
        sa[i] = draw_scale_code(&rng, mode);
    for (int64_t i = 0; i < N * nkb; i++)
        sb[i] = draw_scale_code(&rng, mode);
    for (int64_t i = 0; i < M * N; i++) {
        const uint32_t v = c_bits(calm);
        memcpy(c + i, &v, 4);
    }
    mxfa_ctx *ctx[2] = {oracle, test};
    for (int i = 0; i < 2; i++) {
        memcpy(d[i], c, (size_t)(M * N) * 4);
        mxfa_mx A = {mxfa_tensor_2d(a, fa, M, K), mxfa_tensor_2d(sa, MXFA_E8M0, M, nkb), MXFA_BLOCK_ROW,
                     MXFA_LAYOUT_COMPACT};
        mxfa_mx B = {mxfa_tensor_2d(b, fb, N, K), mxfa_tensor_2d(sb, MXFA_E8M0, N, nkb), MXFA_BLOCK_ROW,
                     MXFA_LAYOUT_COMPACT};
        mxfa_tensor D = mxfa_tensor_2d(d[i], MXFA_F32, M, N), C = mxfa_tensor_2d(c, MXFA_F32, M, N);
        call_begin(i, o);
        if (!call_ok(mxfa_gemm(ctx[i], &A, &B, cmode == 0 ? NULL : cmode == 1 ? &C : &D, MXFA_MODEL_SM100, &D), i,
                     ctx[i], o))
            goto done;
    }
    o->agreed = same_elements("D", d[0], d[1], M * N, 4, o);
done:
    free(a), free(b), free(sa), free(sb), free(c), free(d[0]), free(d[1]);
}

static mxfa_tensor tensor3(void *p, mxfa_dtype dt, int64_t n0, int64_t n1, int64_t n2)
{
    mxfa_tensor t = {p, dt, MXFA_MEM_HOST, 3, {n0, n1, n2}, {n1 * n2, n2, 1}};
    return t;
}

/* n Gaussian values as f32 or bf16 (nearest even), times 2^mag, with NaN or
 * Inf now and then when wild. */
static void fill_values(void *p, mxfa_dtype dt, int64_t n, int mag, int wild)
{
    const float scale = ldexpf(1.0f, mag);
    for (int64_t i = 0; i < n; i++) {
        double u1 = (below(1u << 24) + 1.0) / 16777217.0, u2 = below(1u << 24) / 16777216.0;
        float v = (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2)) * scale;
        uint32_t b;
        memcpy(&b, &v, 4);
        if (wild && below(500) == 0)
            b = below(2) ? 0x7FC00000u : (uint32_t)below(2) << 31 | 0x7F800000u;
        if (dt == MXFA_BF16) {
            uint16_t h = (b & 0x7FFFFFFFu) > 0x7F800000u ? 0x7FC0 : (uint16_t)((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
            memcpy((uint16_t *)p + i, &h, 2);
        } else {
            memcpy((float *)p + i, &b, 4);
        }
    }
}

/* Attention forward under sm100 (draw_attn), f32 or bf16 in and out, small
 * and large magnitudes, NaN and Inf now and then. big: long sequences, or
 * (every second one) many heads, against the cpu backend. */
static void attn_case(mxfa_ctx *test, mxfa_ctx *oracle, int big, outcome *o)
{
    attn_draw a;
    const int many = big > 0 && big % 2 == 0; /* every second large case */
    draw_attn(big ? many ? 600 : 1500 : 300, many, &a, o);
    const mxfa_dtype din = below(2) ? MXFA_BF16 : MXFA_F32, dout = below(2) ? MXFA_BF16 : MXFA_F32;
    const int es = din == MXFA_BF16 ? 2 : 4, eo = dout == MXFA_BF16 ? 2 : 4;
    /* NaN and Inf: a fifth of the small cases, and the second many-heads case (the slow path's
     * block steps in CTAs that take several work tiles) */
    const int mag = below(6) == 0 ? -60 + (int)below(120) : 0, wild = big ? big == 4 : below(5) == 0;
    size_t l = strlen(o->what);
    snprintf(o->what + l, sizeof o->what - l, ", %s in, %s out, magnitude 2^%d%s", mxfa_dtype_name(din),
             mxfa_dtype_name(dout), mag, wild ? ", NaN and Inf" : "");
    const int64_t nq = a.tq * a.hq * a.d, nk = a.tk * a.hkv * a.d;
    void *q = malloc((size_t)(nq * es)), *k = malloc((size_t)(nk * es)), *v = malloc((size_t)(nk * es));
    void *out[2] = {malloc((size_t)(nq * eo)), malloc((size_t)(nq * eo))};
    float *lse[2] = {malloc((size_t)(a.tq * a.hq * 4)), malloc((size_t)(a.tq * a.hq * 4))};
    o->agreed = 0;
    if (!q || !k || !v || !out[0] || !out[1] || !lse[0] || !lse[1]) {
        snprintf(o->why, sizeof o->why, "out of host memory");
        goto done;
    }
    fill_values(q, din, nq, mag, 0);
    fill_values(k, din, nk, mag, wild);
    fill_values(v, din, nk, mag, wild);
    mxfa_ctx *ctx[2] = {oracle, test};
    for (int i = 0; i < 2; i++) {
        memset(out[i], 0xA5, (size_t)(nq * eo));
        memset(lse[i], 0xA5, (size_t)(a.tq * a.hq * 4));
        mxfa_tensor Q = tensor3(q, din, a.tq, a.hq, a.d), K = tensor3(k, din, a.tk, a.hkv, a.d),
                    V = tensor3(v, din, a.tk, a.hkv, a.d), O = tensor3(out[i], dout, a.tq, a.hq, a.d);
        mxfa_tensor L = mxfa_tensor_2d(lse[i], MXFA_F32, a.tq, a.hq);
        call_begin(i, o);
        if (!call_ok(mxfa_attn_fwd(ctx[i], &a.p, &Q, &K, &V, a.cq, a.ck, a.batch, &O, &L), i, ctx[i], o))
            goto done;
    }
    o->agreed = same_elements("O", out[0], out[1], nq, eo, o) & same_elements("LSE", lse[0], lse[1], a.tq * a.hq, 4, o);
done:
    free(q), free(k), free(v), free(out[0]), free(out[1]), free(lse[0]), free(lse[1]);
}

/* Attention backward under sm100 (draw_attn), f32 or bf16 in and out, NaN
 * and Inf now and then. O and LSE come from the oracle's forward pass; dQ,
 * dK and dV are compared. big: long sequences, or (the second) many heads
 * without the leak-free mask, so that each CTA of the fused kernel takes
 * several items and dQ passes between CTAs. */
static void bwd_case(mxfa_ctx *test, mxfa_ctx *oracle, int big, outcome *o)
{
    attn_draw a;
    const int many = big > 0 && big % 2 == 0;
    draw_attn(big ? many ? 600 : 1200 : 200, many, &a, o);
    if (many && a.p.causal == MXFA_CAUSAL) { /* the leak-free mask takes the composition */
        a.p.causal = MXFA_CAUSAL_PLAIN;
        draw_name(&a, o);
    }
    const mxfa_dtype din = below(2) ? MXFA_BF16 : MXFA_F32, dg = below(2) ? MXFA_BF16 : MXFA_F32;
    const int es = din == MXFA_BF16 ? 2 : 4, eg = dg == MXFA_BF16 ? 2 : 4;
    const int wild = !big && below(5) == 0;
    size_t l = strlen(o->what);
    snprintf(o->what + l, sizeof o->what - l, ", %s in, %s gradients%s", mxfa_dtype_name(din), mxfa_dtype_name(dg),
             wild ? ", NaN and Inf" : "");
    const size_t nq = (size_t)(a.tq * a.hq * a.d), nk = (size_t)(a.tk * a.hkv * a.d);
    void *q = malloc(nq * es), *k = malloc(nk * es), *v = malloc(nk * es), *dout = malloc(nq * es);
    float *out = malloc(nq * 4), *lse = malloc((size_t)(a.tq * a.hq) * 4);
    void *g[2][3] = {{malloc(nq * eg), malloc(nk * eg), malloc(nk * eg)}, {malloc(nq * eg), malloc(nk * eg), malloc(nk * eg)}};
    o->agreed = 0;
    int ready = q && k && v && dout && out && lse;
    for (int i = 0; i < 2; i++)
        for (int t = 0; t < 3; t++)
            ready &= g[i][t] != NULL;
    if (!ready) {
        snprintf(o->why, sizeof o->why, "out of host memory");
        goto done;
    }
    fill_values(q, din, (int64_t)nq, 0, 0);
    fill_values(k, din, (int64_t)nk, 0, wild);
    fill_values(v, din, (int64_t)nk, 0, wild);
    fill_values(dout, din, (int64_t)nq, 0, wild);
    mxfa_tensor Q = tensor3(q, din, a.tq, a.hq, a.d), K = tensor3(k, din, a.tk, a.hkv, a.d),
                V = tensor3(v, din, a.tk, a.hkv, a.d), G = tensor3(dout, din, a.tq, a.hq, a.d),
                O = tensor3(out, MXFA_F32, a.tq, a.hq, a.d);
    mxfa_tensor L = mxfa_tensor_2d(lse, MXFA_F32, a.tq, a.hq);
    if (mxfa_attn_fwd(oracle, &a.p, &Q, &K, &V, a.cq, a.ck, a.batch, &O, &L) != MXFA_OK) {
        snprintf(o->why, sizeof o->why, "emulator, forward: %s", mxfa_last_error(oracle));
        goto done;
    }
    mxfa_ctx *ctx[2] = {oracle, test};
    for (int i = 0; i < 2; i++) {
        for (int t = 0; t < 3; t++)
            memset(g[i][t], 0xA5, (t ? nk : nq) * eg);
        mxfa_tensor DQ = tensor3(g[i][0], dg, a.tq, a.hq, a.d), DK = tensor3(g[i][1], dg, a.tk, a.hkv, a.d),
                    DV = tensor3(g[i][2], dg, a.tk, a.hkv, a.d);
        call_begin(i, o);
        if (!call_ok(mxfa_attn_bwd(ctx[i], &a.p, &Q, &K, &V, &O, &G, &L, a.cq, a.ck, a.batch, &DQ, &DK, &DV), i,
                     ctx[i], o))
            goto done;
    }
    o->agreed = same_elements("dQ", g[0][0], g[1][0], (int64_t)nq, eg, o) &
                same_elements("dK", g[0][1], g[1][1], (int64_t)nk, eg, o) &
                same_elements("dV", g[0][2], g[1][2], (int64_t)nk, eg, o);
done:
    free(q), free(k), free(v), free(dout), free(out), free(lse);
    for (int i = 0; i < 2; i++)
        for (int t = 0; t < 3; t++)
            free(g[i][t]);
}

/* --stall-test: the cuda module's test kernel (gpu/stall.cu), asked to spin
 * four times the limit and more, under the watchdog, which must report it
 * and end the process with WATCHDOG_EXIT. The module is the one libmxfa
 * opened (the same file, so the same instance). */
static int stall_test(const char *cmd, double timeout)
{
    const char *env = getenv("MXFA_CUDA_MODULE");
    const char *path = env && *env ? env : MXFA_CUDA_MODULE_PATH;
    void *module = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!module)
        return cli_error(cmd, "--stall-test: cannot open the cuda module: %s", dlerror());
    int (*stall)(double, char *, size_t);
    *(void **)&stall = dlsym(module, "mxfa_cuda_test_stall");
    if (!stall) {
        dlclose(module);
        return cli_error(cmd, "--stall-test: the cuda module %s has no test kernel (mxfa_cuda_test_stall)", path);
    }
    const double spin = 4 * timeout + 5;
    printf("mxfa selftest: the stall test: a kernel that spins for %g s, under a limit of %g s; a hang must be "
           "reported\n", spin, timeout);
    fflush(stdout);
    char why[256] = "";
    watchdog_arm("the stall test kernel, which spins on purpose (--stall-test)");
    const int r = stall(spin, why, sizeof why);
    watchdog_disarm();
    dlclose(module);
    if (r)
        return cli_error(cmd, "--stall-test: %s", why);
    return cli_error(cmd, "--stall-test: the kernel ran its %g s: the limit of %g s did not stop it", spin, timeout);
}

/* A kernel's cases: n small ones against ref and a few large ones against
 * the cpu backend (`big` is the large case's number, from 1). Returns 1
 * agreed, 0 differed or failed, -1 refused. */
static int run_kernel(const char *name, void (*run)(mxfa_ctx *, mxfa_ctx *, int, outcome *), mxfa_ctx *test,
                      mxfa_ctx *ref, mxfa_ctx *cpu, int n, int n_big)
{
    int agreed = 0, shown = 0, total = n + n_big;
    printf("  %s: ", name);
    fflush(stdout);
    for (int i = 0; i < total; i++) {
        outcome o;
        memset(&o, 0, sizeof o);
        const int big = i >= n ? 1 + i - n : 0;
        run(test, big ? cpu : ref, big, &o);
        if (o.agreed < 0) {
            printf("not done by this backend (%s)\n", o.why);
            return -1;
        }
        agreed += o.agreed == 1;
        if (o.agreed != 1 && shown++ < 3)
            printf("\n    case %d differs: %s%s%s", i, o.what, o.why[0] ? "; " : "", o.why);
    }
    printf("%s%d of %d cases bit for bit (%d against ref, %d large ones against the cpu backend)\n", shown ? "\n    " : "",
           agreed, total, n, n_big);
    return agreed == total;
}

int cmd_selftest(int argc, char **argv)
{
    const char *cmd = "selftest", *backend = "cuda";
    long cases = 60;
    unsigned long long seed = 1;
    double timeout = 60;
    int ch, stall = 0;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        char *end = NULL;
        switch (ch) {
        case OPT_BACKEND: backend = optarg; break;
        case OPT_CASES:
            cases = strtol(optarg, &end, 10);
            if (!*optarg || *end || cases < 1 || cases > 100000)
                return cli_usage(cmd, "--cases: expected a count in [1, 100000], got '%s'", optarg);
            break;
        case OPT_SEED:
            seed = strtoull(optarg, &end, 10);
            if (!*optarg || *end)
                return cli_usage(cmd, "--seed: expected a non-negative integer, got '%s'", optarg);
            break;
        case OPT_TIMEOUT:
            timeout = strtod(optarg, &end);
            if (!*optarg || *end || !(timeout >= 0.1 && timeout <= 86400))
                return cli_usage(cmd, "--timeout: expected seconds in [0.1, 86400], got '%s'", optarg);
            break;
        case OPT_STALL: stall = 1; break;
        case 'h': fputs(selftest_help, stdout); return 0;
        default: return cli_usage(cmd, "unknown option or missing value: '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    if (strcmp(backend, "cuda") && strcmp(backend, "cpu"))
        return cli_usage(cmd, "--backend: expected cuda or cpu, got '%s'", backend);
    if (stall && strcmp(backend, "cuda"))
        return cli_usage(cmd, "--stall-test runs on the cuda backend, not on %s", backend);

    char why[512];
    if (!mxfa_backend_usable(backend, why, sizeof why)) {
        printf("mxfa selftest: nothing to check here: the %s backend is not usable (%s)\n", backend, why);
        return EXIT_SKIP;
    }
    mxfa_ctx *test = NULL, *ref = NULL, *cpu = NULL;
    int rc = cli_open(cmd, backend, &test);
    if (rc)
        return rc;
    if (watchdog_start(cmd, timeout)) {
        rc = cli_error(cmd, "cannot start the thread that watches the time limit");
        goto done;
    }
    if (stall) {
        rc = stall_test(cmd, timeout);
        goto done;
    }
    int arch = 0;
    char name[256] = "";
    if (mxfa_device_info(test, &arch, name, sizeof name) != MXFA_OK) {
        rc = cli_error(cmd, "%s", mxfa_last_error(test));
        goto done;
    }
    if (!strcmp(backend, "cuda") && arch != 100) {
        printf("mxfa selftest: nothing to check here: the GPU is %s (compute capability %d.%d); the sm_100a kernels "
               "need compute capability 10.0 (Blackwell)\n", name, arch / 10, arch % 10);
        rc = EXIT_SKIP;
        goto done;
    }
    if ((rc = cli_open(cmd, "ref", &ref)) || (rc = cli_open(cmd, "cpu", &cpu)))
        goto done;
    rng = seed;
    printf("mxfa selftest %s: the %s backend on %s against the emulator's sm100 model, seed %llu, %g s a call at "
           "most\n", mxfa_version(), backend, name, seed, timeout);
    int checked = 0, failed = 0;
    static const struct {
        const char *name;
        void (*run)(mxfa_ctx *, mxfa_ctx *, int, outcome *);
        int big;
    } kernels[] = {
        {"gemm (tcgen05.mma kind::mxf8f6f4.block_scale)", gemm_case, 2},
        {"attention forward (D = 64, 128, 256; every mask; const and dynamic P)", attn_case, 4},
        {"attention backward (fused: D = 64, 128 without the leak-free mask; composed: the rest)", bwd_case, 2},
    };
    for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++) {
        // the large cases' oracle is the cpu backend: none when it is the one under test
        const int big = strcmp(backend, "cpu") ? kernels[k].big : 0;
        const int r = run_kernel(kernels[k].name, kernels[k].run, test, ref, cpu, (int)cases, big);
        checked += r >= 0;
        failed += r == 0;
    }
    if (failed)
        rc = cli_error(cmd, "%d of %d kernels DIFFER from the emulator (report the lines above with this GPU's "
                            "name and driver version)", failed, checked);
    else if (!checked)
        rc = cli_error(cmd, "no kernel was checked: the %s backend refused every one (the lines above say why)",
                       backend);
    else
        printf("mxfa selftest: all %d kernels agree with the emulator bit for bit\n", checked);
done:
    mxfa_close(cpu);
    mxfa_close(ref);
    mxfa_close(test);
    return rc;
}
