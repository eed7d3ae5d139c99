/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Allocation failures are reported, not crashed on: this program supplies
 * malloc, calloc, realloc and the aligned allocators itself (on glibc, over
 * its __libc_* entry points), counts the allocations mxfa makes in a call,
 * and then makes each one fail in turn. Every such call must return
 * MXFA_ERR_NO_MEMORY with a message and free what it had allocated; the
 * same call succeeds again afterwards. (What the outputs hold after an
 * allocation failure is unspecified: docs/ERRORS.md.)
 *
 * Only allocations made from mxfa's own code fail: those of the C library
 * and the OpenMP runtime (which aborts when it cannot allocate) are passed
 * through, found by the object that holds the caller's address.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>

#include "mxfa.h"
#include "tap.h"

#if defined(__GLIBC__) && !defined(MXFA_SANITIZED)

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);
extern void __libc_free(void *p);

static long armed = -1;     /* fail mxfa's allocation with this index; -1: none */
static long counted = -1;   /* mxfa's allocations since counting began; -1: not counting */
static __thread int inside; /* dladdr may allocate: no recursion */

/* 1 when the allocation at return address ra comes from mxfa. */
static int from_mxfa(const void *ra)
{
    if (inside)
        return 0;
    inside = 1;
    Dl_info info;
    int ours = 1;
    if (dladdr(ra, &info) && info.dli_fname)
        ours = !strstr(info.dli_fname, "libc.so") && !strstr(info.dli_fname, "libgomp") &&
               !strstr(info.dli_fname, "ld-linux") && !strstr(info.dli_fname, "libm.so");
    inside = 0;
    return ours;
}

/* mxfa's live allocations while counting: what a call leaves here leaked. */
#define LIVE_MAX 8192
static void *live[LIVE_MAX];
static long nlive, live_overflow;
static int live_lock;

static void live_update(void *gone, void *born)
{
    while (__atomic_exchange_n(&live_lock, 1, __ATOMIC_ACQUIRE))
        ;
    if (gone)
        for (long i = 0; i < nlive; i++)
            if (live[i] == gone) {
                live[i] = live[--nlive];
                break;
            }
    if (born) {
        if (nlive < LIVE_MAX)
            live[nlive++] = born;
        else
            live_overflow = 1;
    }
    __atomic_store_n(&live_lock, 0, __ATOMIC_RELEASE);
}

/* -1: not mxfa's (pass it through); 0: it must fail; 1: mxfa's, tracked. */
static int decide(const void *ra)
{
    if (__atomic_load_n(&counted, __ATOMIC_RELAXED) < 0 || !from_mxfa(ra))
        return -1;
    long i = __atomic_fetch_add(&counted, 1, __ATOMIC_RELAXED);
    return i != armed;
}

static void *born(int how, void *p)
{
    if (how == 1 && p)
        live_update(NULL, p);
    return p;
}

void *malloc(size_t n)
{
    int how = decide(__builtin_return_address(0));
    if (!how) {
        errno = ENOMEM;
        return NULL;
    }
    return born(how, __libc_malloc(n));
}

void *calloc(size_t n, size_t size)
{
    int how = decide(__builtin_return_address(0));
    if (!how) {
        errno = ENOMEM;
        return NULL;
    }
    return born(how, __libc_calloc(n, size));
}

void *realloc(void *p, size_t n)
{
    int how = decide(__builtin_return_address(0));
    if (!how) {
        errno = ENOMEM;
        return NULL;
    }
    void *q = __libc_realloc(p, n);
    if (q && p)
        live_update(p, NULL);
    return born(how, q);
}

void *aligned_alloc(size_t align, size_t n)
{
    int how = decide(__builtin_return_address(0));
    if (!how) {
        errno = ENOMEM;
        return NULL;
    }
    return born(how, __libc_memalign(align, n));
}

int posix_memalign(void **p, size_t align, size_t n)
{
    int how = decide(__builtin_return_address(0));
    void *q = how ? born(how, __libc_memalign(align, n)) : NULL;
    if (!q)
        return ENOMEM;
    *p = q;
    return 0;
}

void free(void *p)
{
    if (p && __atomic_load_n(&nlive, __ATOMIC_RELAXED) > 0)
        live_update(p, NULL);
    __libc_free(p);
}

#define TQ 40
#define TK 72
#define H 2
#define D 64
#define SENT 0xA5
#define OUT_BYTES (TK * H * D * 8)

static mxfa_ctx *ctx;
static float q[TQ * H * D], k[TK * H * D], v[TK * H * D], o[TQ * H * D], dout[TQ * H * D], lse[TQ * H];
static uint8_t out[4][OUT_BYTES];

static mxfa_tensor t3(void *data, mxfa_dtype dt, int64_t a, int64_t b, int64_t c)
{
    mxfa_tensor t = {data, dt, MXFA_MEM_HOST, 3, {a, b, c}, {0}};
    return t;
}

static mxfa_status call_quantize(void)
{
    mxfa_tensor x = mxfa_tensor_2d(q, MXFA_F32, TQ, H * D);
    mxfa_mx m = {mxfa_tensor_2d(out[0], MXFA_E4M3, TQ, H * D), mxfa_tensor_2d(out[1], MXFA_E8M0, 2, H * D),
                 MXFA_BLOCK_COL, MXFA_LAYOUT_COMPACT};
    return mxfa_quantize(ctx, &x, MXFA_PRESET_RCEIL, &m);
}

static mxfa_status call_gemm(void)
{
    static uint8_t a[TQ * D], b[TK * D], sa[TQ * 2], sb[TK * 2];
    memset(a, 0x38, sizeof a), memset(b, 0x38, sizeof b), memset(sa, 127, sizeof sa), memset(sb, 127, sizeof sb);
    mxfa_mx A = {mxfa_tensor_2d(a, MXFA_E4M3, TQ, D), mxfa_tensor_2d(sa, MXFA_E8M0, TQ, 2), MXFA_BLOCK_ROW,
                 MXFA_LAYOUT_COMPACT};
    mxfa_mx B = {mxfa_tensor_2d(b, MXFA_E4M3, TK, D), mxfa_tensor_2d(sb, MXFA_E8M0, TK, 2), MXFA_BLOCK_ROW,
                 MXFA_LAYOUT_COMPACT};
    mxfa_tensor Dt = mxfa_tensor_2d(out[0], MXFA_F32, TQ, TK);
    return mxfa_gemm(ctx, &A, &B, NULL, MXFA_MODEL_SM100, &Dt);
}

static mxfa_status call_fwd(void)
{
    mxfa_tensor Q = t3(q, MXFA_F32, TQ, H, D), K = t3(k, MXFA_F32, TK, H, D), V = t3(v, MXFA_F32, TK, H, D);
    mxfa_tensor O = t3(out[0], MXFA_F32, TQ, H, D), L = mxfa_tensor_2d(out[1], MXFA_F32, TQ, H);
    mxfa_attn_params p;
    mxfa_attn_params_default(&p);
    p.causal = MXFA_CAUSAL;
    return mxfa_attn_fwd(ctx, &p, &Q, &K, &V, NULL, NULL, 1, &O, &L);
}

static mxfa_status call_fwd_f64(void)
{
    mxfa_tensor Q = t3(q, MXFA_F32, TQ, H, D), K = t3(k, MXFA_F32, TK, H, D), V = t3(v, MXFA_F32, TK, H, D);
    mxfa_tensor O = t3(out[0], MXFA_F64, TQ, H, D), L = mxfa_tensor_2d(out[1], MXFA_F64, TQ, H);
    return mxfa_attn_fwd_f64(ctx, NULL, &Q, &K, &V, NULL, NULL, 1, &O, &L);
}

static mxfa_status call_bwd(void)
{
    mxfa_tensor Q = t3(q, MXFA_F32, TQ, H, D), K = t3(k, MXFA_F32, TK, H, D), V = t3(v, MXFA_F32, TK, H, D);
    mxfa_tensor O = t3(o, MXFA_F32, TQ, H, D), DO = t3(dout, MXFA_F32, TQ, H, D), L = mxfa_tensor_2d(lse, MXFA_F32, TQ, H);
    mxfa_tensor DQ = t3(out[0], MXFA_F32, TQ, H, D), DK = t3(out[1], MXFA_BF16, TK, H, D),
                DV = t3(out[2], MXFA_F32, TK, H, D);
    return mxfa_attn_bwd(ctx, NULL, &Q, &K, &V, &O, &DO, &L, NULL, NULL, 1, &DQ, &DK, &DV);
}

static mxfa_status call_bwd_mx(void)
{
    mxfa_tensor Q = t3(q, MXFA_F32, TQ, H, D), K = t3(k, MXFA_F32, TK, H, D), V = t3(v, MXFA_F32, TK, H, D);
    mxfa_tensor O = t3(o, MXFA_F32, TQ, H, D), DO = t3(dout, MXFA_F32, TQ, H, D), L = mxfa_tensor_2d(lse, MXFA_F32, TQ, H);
    mxfa_tensor DQ = t3(out[0], MXFA_F32, TQ, H, D);
    mxfa_mx DK = {t3(out[1], MXFA_E4M3, TK, H, D), t3(out[2], MXFA_E8M0, 3, H, D / 32), MXFA_BLOCK_SQUARE,
                  MXFA_LAYOUT_COMPACT};
    mxfa_mx DV = {t3(out[3], MXFA_E4M3, TK, H, D), t3(out[2] + 1024, MXFA_E8M0, 3, H, D / 32), MXFA_BLOCK_SQUARE,
                  MXFA_LAYOUT_COMPACT};
    return mxfa_attn_bwd_mx(ctx, NULL, &Q, &K, &V, &O, &DO, &L, NULL, NULL, 1, &DQ, &DK, &DV);
}

static mxfa_status call_bwd_f64(void)
{
    mxfa_tensor Q = t3(q, MXFA_F32, TQ, H, D), K = t3(k, MXFA_F32, TK, H, D), V = t3(v, MXFA_F32, TK, H, D);
    mxfa_tensor DO = t3(dout, MXFA_F32, TQ, H, D);
    mxfa_tensor DQ = t3(out[0], MXFA_F64, TQ, H, D), DK = t3(out[1], MXFA_F64, TK, H, D),
                DV = t3(out[2], MXFA_F64, TK, H, D);
    return mxfa_attn_bwd_f64(ctx, NULL, &Q, &K, &V, &DO, NULL, NULL, 1, &DQ, &DK, &DV);
}

/* The call once to count mxfa's allocations, then each failing in turn:
 * the call reports it, or (an allocation with a fallback) computes the
 * same bytes without it. */
static void sweep(const char *backend, const char *name, mxfa_status (*call)(void))
{
    static uint8_t want[4][OUT_BYTES];
    memset(out, SENT, sizeof out);
    counted = 0;
    mxfa_status st = call();
    long n = counted;
    counted = -1;
    memcpy(want, out, sizeof out);
    if (!ok(st == MXFA_OK, "%s %s: succeeds, with %ld allocations of its own", backend, name, n))
        diag("%s", mxfa_last_error(ctx));
    long bad = 0, fallbacks = 0;
    for (long i = 0; i < n; i++) {
        memset(out, SENT, sizeof out);
        nlive = 0, live_overflow = 0;
        counted = 0, armed = i;
        st = call();
        armed = -1, counted = -1;
        int same = !memcmp(out, want, sizeof out);
        int good = (st == MXFA_ERR_NO_MEMORY && mxfa_last_error(ctx)[0]) || (st == MXFA_OK && same);
        good &= nlive == 0 && !live_overflow;
        fallbacks += st == MXFA_OK;
        if (!good && bad++ < 3)
            diag("allocation %ld failing: %s (%s), outputs %s, %ld allocations left unfreed", i, mxfa_strerror(st),
                 mxfa_last_error(ctx), same ? "as without the failure" : "different", nlive);
    }
    nlive = 0;
    ok(bad == 0,
       "%s %s: each of its %ld allocations failing -> no memory and a message (or, %ld with a fallback, the same "
       "bytes), nothing leaked",
       backend, name, n, fallbacks);
    memset(out, SENT, sizeof out);
    ok(call() == MXFA_OK && !memcmp(out, want, sizeof out), "%s %s: succeeds again afterwards, with the same bytes",
       backend, name);
}

int main(void)
{
    rng_seed_from_env(3);
    for (size_t i = 0; i < sizeof q / sizeof *q; i++)
        q[i] = (float)rng_below(1000) / 500.0f - 1.0f, o[i] = 0.5f, dout[i] = (float)rng_below(100) / 100.0f;
    for (size_t i = 0; i < sizeof k / sizeof *k; i++)
        k[i] = (float)rng_below(1000) / 500.0f - 1.0f, v[i] = (float)rng_below(1000) / 500.0f - 1.0f;
    for (size_t i = 0; i < sizeof lse / sizeof *lse; i++)
        lse[i] = 4.0f;

    /* opening a context */
    {
        mxfa_ctx *c = (mxfa_ctx *)0x1;
        counted = 0, armed = 0;
        mxfa_status st = mxfa_open(&c, "ref");
        armed = -1, counted = -1;
        ok(st == MXFA_ERR_NO_MEMORY && c == (mxfa_ctx *)0x1 && mxfa_last_error(NULL)[0],
           "mxfa_open with its allocation failing -> no memory, *ctx untouched");
    }

    static const char *const backends[] = {"ref", "cpu"};
    for (int b = 0; b < 2; b++) {
        if (!mxfa_backend_usable(backends[b], NULL, 0)) {
            skip("the cpu backend is not built");
            continue;
        }
        if (!ok(mxfa_open(&ctx, backends[b]) == MXFA_OK, "open %s", backends[b]))
            continue;
        sweep(backends[b], "mxfa_quantize", call_quantize);
        sweep(backends[b], "mxfa_gemm", call_gemm);
        sweep(backends[b], "mxfa_attn_fwd", call_fwd);
        sweep(backends[b], "mxfa_attn_fwd_f64", call_fwd_f64);
        sweep(backends[b], "mxfa_attn_bwd", call_bwd);
        sweep(backends[b], "mxfa_attn_bwd_mx", call_bwd_mx);
        sweep(backends[b], "mxfa_attn_bwd_f64", call_bwd_f64);
        mxfa_close(ctx);
    }
    return done_testing();
}

#else

int main(void)
{
    skip_all("replacing malloc needs glibc, and a build without AddressSanitizer (which replaces it itself)");
}

#endif
