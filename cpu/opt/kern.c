/*
 * Vector kernels, compiled once per instruction set: KERN_NAME names the
 * table and the build gives the flags (Makefile.am). Written with GCC's
 * generic vectors, which each target lowers to its own instructions; only
 * the unsigned byte maximum needs the target's intrinsic.
 *
 * Exactness. A product of two fp8 (or bf16) operands has at most 16
 * significant bits, and the combine accepts a group only when every
 * product lies on the grid of its step (so at most 27 + 5 bits wide in
 * total): every addition below is then exact, in any order, whether or not
 * the compiler fuses a multiply and an add.
 */
#include <math.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "kern.h"

typedef double v8df __attribute__((vector_size(64)));
typedef uint8_t v64qu __attribute__((vector_size(64)));
typedef uint16_t v32hu __attribute__((vector_size(64)));

static inline v8df load8(const double *p)
{
    v8df v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline v64qu max_u8(v64qu a, v64qu b)
{
#if defined(__AVX512BW__)
    return (v64qu)_mm512_max_epu8((__m512i)a, (__m512i)b);
#elif defined(__AVX2__)
    __m256i lo[2], hi[2];
    memcpy(lo, &a, 64);
    memcpy(hi, &b, 64);
    lo[0] = _mm256_max_epu8(lo[0], hi[0]);
    lo[1] = _mm256_max_epu8(lo[1], hi[1]);
    v64qu r;
    memcpy(&r, lo, 64);
    return r;
#elif defined(__SSE2__)
    __m128i x[4], y[4];
    memcpy(x, &a, 64);
    memcpy(y, &b, 64);
    for (int i = 0; i < 4; i++)
        x[i] = _mm_max_epu8(x[i], y[i]);
    v64qu r;
    memcpy(&r, x, 64);
    return r;
#else
    v64qu m = a > b;
    return (a & m) | (b & ~m);
#endif
}

static void dot(int kn, const double *a, const uint16_t *ae, int64_t lda, const double *b, const uint16_t *be,
                int64_t ldb, kern_partial *out)
{
    v8df s[KERN_MR][4];
    v64qu x[KERN_MR];
    for (int r = 0; r < KERN_MR; r++) {
        for (int c = 0; c < 4; c++)
            s[r][c] = (v8df){0};
        x[r] = (v64qu){0};
    }
    for (int k = 0; k < kn; k++) {
        const double *bk = b + k * ldb;
        v8df b0 = load8(bk), b1 = load8(bk + 8), b2 = load8(bk + 16), b3 = load8(bk + 24);
        v64qu bx;
        memcpy(&bx, be + k * ldb, sizeof bx);
        for (int r = 0; r < KERN_MR; r++) {
            double av = a[r * lda + k];
            v8df va = {av, av, av, av, av, av, av, av};
            s[r][0] += va * b0;
            s[r][1] += va * b1;
            s[r][2] += va * b2;
            s[r][3] += va * b3;
            uint16_t f = ae[r * lda + k];
            v32hu vf = {f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f};
            x[r] = max_u8(x[r], (v64qu)vf + bx);
        }
    }
    for (int r = 0; r < KERN_MR; r++) {
        memcpy(out->sum[r], s[r], sizeof out->sum[r]);
        uint8_t t[64];
        memcpy(t, &x[r], 64);
        for (int j = 0; j < KERN_NR; j++) {
            out->emax[r][j] = t[2 * j];
            out->nlsb[r][j] = t[2 * j + 1];
        }
    }
}

static inline uint64_t dbits(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

static inline double dfrom(uint64_t u)
{
    double d;
    memcpy(&d, &u, 8);
    return d;
}

static inline double pow2d(int e) /* e within the normal double range */
{
    return dfrom((uint64_t)(e + 1023) << 52);
}

/* x + y rounded once to fp32 (nearest even), for exact doubles x and y:
 * the double sum made round-to-odd from its exact error, then narrowed. */
static inline uint32_t add_rne_f32(double x, double y, int *ok)
{
    double s = x + y, bb = s - x;
    double err = (x - (s - bb)) + (y - bb);
    uint64_t u = dbits(s);
    if (err != 0.0) {
        if ((err < 0) != (s < 0))
            u -= 1; /* the sum rounded away from zero: step back */
        u |= 1;
    }
    int e = (int)((u >> 52) & 0x7FF) - 1023;
    *ok = s == 0.0 || (e >= -126 && e <= 127);
    float f = (float)dfrom(u);
    uint32_t r;
    memcpy(&r, &f, 4);
    return s == 0.0 ? 0u : r;
}

typedef int64_t v8di __attribute__((vector_size(64)));
typedef float v8sf __attribute__((vector_size(32)));
typedef int32_t v8si __attribute__((vector_size(32)));
typedef uint32_t v8su __attribute__((vector_size(32)));
typedef uint8_t v8qu __attribute__((vector_size(8)));

#define SPLAT(x) ((v8di){0} + (x))

/* m ? x : y, lane by lane, for masks of all ones or zeros */
static inline v8di sel(v8di m, v8di x, v8di y)
{
    return (m & x) | (~m & y);
}

/* KERN_IN_EXPONENT eight lanes at a time: the scalar case below, written
 * with masks instead of branches. Returns the lanes still pending. */
static int combine_in_exponent(const kern_partial *p, int r, int sa, const int *sb, uint32_t *acc, uint8_t *pending)
{
    int left = 0;
    for (int j0 = 0; j0 < KERN_NR; j0 += 8) {
        v8qu e8, n8, p8;
        v8si sb8;
        v8su a8;
        memcpy(&e8, &p->emax[r][j0], 8);
        memcpy(&n8, &p->nlsb[r][j0], 8);
        memcpy(&p8, &pending[j0], 8);
        memcpy(&sb8, &sb[j0], 32);
        memcpy(&a8, &acc[j0], 32);
        v8di ep = __builtin_convertvector(e8, v8di) - 128, nl = __builtin_convertvector(n8, v8di) - 128;
        v8di s = __builtin_convertvector(sb8, v8di) + sa, a = __builtin_convertvector(a8, v8di);
        v8di pend = __builtin_convertvector(p8, v8di) != 0;
        v8df S = load8(p->sum[r] + j0);
        v8di ef = (a >> 23) & 0xFF;
        v8di anz = (a & 0x7FFFFFFF) != 0, pnz = ep >= (FX_PROD_MIN - 128);
        v8di racc = sel(ef == 0, SPLAT(-126), ef - 127);
        v8di ps = ep + s, emax = SPLAT(-133);
        emax = sel(pnz & (ps > emax), ps, emax);
        emax = sel(anz & (racc > emax), racc, emax);
        v8di g = emax - 25;
        v8di ok = (ef != 0xFF) & (~pnz | (s - nl >= g)) & ~pend;
        /* the accumulator truncated on the grid: its low k bits cleared */
        v8di k = g - (racc - 23);
        v8di kc = sel(k < 0, SPLAT(0), sel(k > 31, SPLAT(31), k));
        v8di at = a & ~((SPLAT(1) << kc) - 1) & ~(k >= 24);
        v8sf af = (v8sf)__builtin_convertvector(at, v8si);
        v8df T = S * (v8df)((s + 1023) << 52) + __builtin_convertvector(af, v8df);
        v8di tb = (v8di)T;
        v8di te = ((tb >> 52) & 0x7FF) - 1023, tz = T == 0.0;
        ok &= tz | ((te >= -126) & (te <= 127));
        /* cut to 24 bits (exact in fp32), every zero +0 */
        v8sf rf = __builtin_convertvector((v8df)(tb & ~SPLAT((INT64_C(1) << 29) - 1)), v8sf);
        v8di res = sel(tz, SPLAT(0), __builtin_convertvector((v8su)rf, v8di));
        v8di out = sel(ok, res, a);
        v8su o8 = __builtin_convertvector(out, v8su);
        v8qu np = __builtin_convertvector(~ok & 1, v8qu);
        memcpy(&acc[j0], &o8, 32);
        memcpy(&pending[j0], &np, 8);
        for (int l = 0; l < 8; l++)
            left += (int)np[l];
    }
    return left;
}

static int combine(kern_combine how, const kern_partial *p, int r, int sa, const int *sb, uint32_t *acc,
                   uint8_t *pending)
{
    if (how == KERN_IN_EXPONENT)
        return combine_in_exponent(p, r, sa, sb, acc, pending);
    int left = 0;
    for (int j = 0; j < KERN_NR; j++) {
        if (pending[j])
            continue;
        int ep = (int)p->emax[r][j] - 128, nl = (int)p->nlsb[r][j] - 128;
        int pnz = p->emax[r][j] >= FX_PROD_MIN, s = sa + sb[j];
        double S = p->sum[r][j];
        uint32_t a = acc[j], ef = (a >> 23) & 0xFF;
        int anz = (a & 0x7FFFFFFFu) != 0, ok = ef != 0xFF;
        uint32_t res = 0;
        float af;
        memcpy(&af, &a, 4);
        switch (how) {
        case KERN_IN_EXPONENT: {
            int racc = ef ? (int)ef - 127 : -126, emax = -133;
            if (pnz && ep + s > emax)
                emax = ep + s;
            if (anz && racc > emax)
                emax = racc;
            int g = emax - 25;
            ok &= !pnz || s - nl >= g; /* every product on the grid */
            int k = g - (racc - 23);   /* accumulator bits below the grid */
            uint32_t mask = k <= 0 ? 0xFFFFFFFFu : k >= 24 ? 0x80000000u : ~((1u << k) - 1);
            uint32_t at = a & mask;
            float atf;
            memcpy(&atf, &at, 4);
            double T = S * pow2d(s) + (double)atf;
            uint64_t tb = dbits(T);
            int te = (int)((tb >> 52) & 0x7FF) - 1023;
            ok &= T == 0.0 || (te >= -126 && te <= 127);
            float rf = (float)dfrom(tb & ~((UINT64_C(1) << 29) - 1)); /* cut to 24 bits: exact */
            memcpy(&res, &rf, 4);
            if (T == 0.0)
                res = 0; /* every zero result is +0 */
            break;
        }
        case KERN_EXACT_PROMOTE: {
            ok &= pnz && ep + nl <= 46; /* the double sum is exact */
            int aok = 1;
            res = add_rne_f32(S * pow2d(s), (double)af, &aok);
            ok &= aok;
            break;
        }
        case KERN_TRUNC13_PROMOTE: {
            if (!pnz) { /* the partial is +0: the accumulator, a zero one +0 */
                res = anz ? a : 0;
                break;
            }
            ok &= ep + nl <= 13; /* every product on the grid 2^(emax - 13) */
            double part = dfrom(dbits(S) & ~((UINT64_C(1) << 39) - 1)); /* cut to 14 bits */
            int aok = 1;
            res = part == 0.0 ? (anz ? a : 0) : add_rne_f32(part * pow2d(s), (double)af, &aok);
            ok &= aok;
            break;
        }
        }
        if (ok)
            acc[j] = res;
        else
            pending[j] = 1;
    }
    for (int j = 0; j < KERN_NR; j++)
        left += pending[j];
    return left;
}

/* mxfa_exp2 (cpu/ref/exp2.c) on (x - m) + 8, element by element, in a form
 * the compiler vectorizes: the same operations in the same order. */
static const uint32_t exp2_coef[7] = {
    0x3F800000u, 0x3F317218u, 0x3E75FDF0u, 0x3D635766u, 0x3C1D950Eu, 0x3AAFA460u, 0x39222000u,
};

static void softmax_p(const float *x, int n, float m, float *p)
{
    float c[7];
    for (int i = 0; i < 7; i++)
        c[i] = f32_from_bits(exp2_coef[i]);
    for (int j = 0; j < n; j++) {
        float xf = (x[j] - m) + 8.0f;
        uint32_t xb = f32_bits(xf);
        int e = (int)((xb >> 23) & 0xFF) - 127;
        int64_t fixed = (int64_t)((xb & 0x7FFFFFu) | 0x800000u) << (e >= -1 && e < 8 ? e + 1 : 0);
        if (xb >> 31)
            fixed = -fixed;
        int32_t nn = e >= -1 ? (int32_t)((fixed + (INT64_C(1) << 23)) >> 24) : 0;
        float f = xf - (float)nn;
        float q = c[6];
        q = fmaf(q, f, c[5]);
        q = fmaf(q, f, c[4]);
        q = fmaf(q, f, c[3]);
        q = fmaf(q, f, c[2]);
        q = fmaf(q, f, c[1]);
        q = fmaf(q, f, c[0]);
        uint32_t qb = f32_bits(q);
        int32_t field = (int32_t)((qb >> 23) & 0xFF) + nn;
        uint32_t r = field <= 0 ? 0u : field >= 255 ? F32_INF : (qb & 0x807FFFFFu) | (uint32_t)field << 23;
        /* the special inputs, as mxfa_exp2 treats them */
        r = (int32_t)xb >= 0x43000000 ? F32_INF : r;
        r = xb > 0xC2FC0000u ? 0u : r;
        r = F32_IS_NAN(xb) ? xb : r;
        r = x[j] == -INFINITY ? 0u : r;
        p[j] = f32_from_bits(r);
    }
}

/* Block quantization: amax and encoding in vectorizable loops over the
 * block's fp32 bits, the scale from the reference's rule. */
static uint32_t amax_of(const uint32_t *x, int n, int *has_nan, int *has_inf)
{
    uint32_t amax = 0, nan = 0, inf = 0;
#pragma omp simd simdlen(16) reduction(max : amax) reduction(| : nan, inf)
    for (int i = 0; i < n; i++) {
        uint32_t a = x[i] & 0x7FFFFFFFu;
        nan |= a > F32_INF;
        inf |= a == F32_INF;
        uint32_t fin = a <= F32_INF ? a : 0;
        amax = fin > amax ? fin : amax;
    }
    *has_nan = (int)nan;
    *has_inf = (int)inf;
    return amax;
}

/* mxfa_fp8_encode (lib/fp8.c) with satfinite overflow, for every input;
 * fp32 subnormals go through the reference encoder afterwards. */
static void encode(const fp8_format *fmt, const mxfa_block_rule *rule, const uint32_t *x, int n, uint8_t *out)
{
    const int32_t se = 127 - (int32_t)rule->scale, mbits = fmt->mbits, emin = fmt->emin, emax = fmt->emax;
    const uint32_t away = rule->rounding == FP8_ROUND_NEAREST_AWAY, maxc = fmt->max_code, nanc = fmt->nan_code;
    /* branch-free, so that the loop vectorizes: every lane computes every
     * case; 16 lanes, since blocks are 32 long */
#pragma omp simd simdlen(16)
    for (int i = 0; i < n; i++) {
        uint32_t a = x[i] & 0x7FFFFFFFu, sign = (x[i] >> 24) & 0x80u;
        int32_t e = (int32_t)(a >> 23) - 127 + se;
        int32_t ebin = e < emin ? emin : e;
        int32_t shift = ebin - e + 23 - mbits;
        uint32_t sh = (uint32_t)(shift > 31 ? 31 : shift);
        uint32_t sig = (a & 0x7FFFFFu) | 0x800000u;
        uint32_t q = sig >> sh, rem = sig & ((1u << sh) - 1), half = 1u << (sh - 1);
        q += (uint32_t)(rem > half) | ((uint32_t)(rem == half) & (away | (q & 1)));
        uint32_t code = ((uint32_t)(ebin - emin) << mbits) + q;
        code = (e > emax + 1) | (code > maxc) ? maxc : code;
        code = a == 0 ? 0 : code;
        code = a == F32_INF ? maxc : code;
        code = a > F32_INF ? nanc : code;
        out[i] = (uint8_t)(code | sign);
    }
    /* fp32 subnormals (rare) through the reference encoder */
    uint32_t sub = 0;
    for (int i = 0; i < n; i++)
        sub |= (uint32_t)((x[i] & 0x7F800000u) == 0) & (uint32_t)((x[i] & 0x7FFFFFu) != 0);
    if (sub)
        for (int i = 0; i < n; i++)
            if ((x[i] & 0x7F800000u) == 0)
                out[i] = mxfa_ref_encode_element(fmt, rule, x[i]);
    if (rule->poisoned)
        memset(out, fmt->nan_code, (size_t)n);
}

/* n fp32 bits of row r of x from column c0 (bf16 widened exactly) */
static void load_bits(const mxfa_view *x, int64_t r, int64_t c0, int64_t n, uint32_t *v)
{
    if (x->dtype == MXFA_F32 && x->cs == 1) {
        memcpy(v, view_at(x, r, c0), (size_t)n * 4);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        v[i] = ref_load_f32(x, r, c0 + i);
}

static void quantize_rows(const mxfa_view *x, mxfa_preset preset, const mxfa_view *data, const mxfa_view *scales)
{
    const fp8_format *fmt = mxfa_fp8_format(data->dtype);
    uint32_t v[32];
    uint8_t q[32];
    for (int64_t r = 0; r < x->rows; r++)
        for (int64_t c0 = 0; c0 < x->cols; c0 += 32) {
            int n = (int)(x->cols - c0 < 32 ? x->cols - c0 : 32);
            load_bits(x, r, c0, n, v);
            int has_nan, has_inf;
            uint32_t amax = amax_of(v, n, &has_nan, &has_inf);
            mxfa_block_rule rule = mxfa_ref_rule_from_amax(fmt, preset, amax, has_nan, has_inf);
            encode(fmt, &rule, v, n, q);
            *(uint8_t *)view_at(scales, r, c0 / 32) = rule.scale;
            if (data->cs == 1)
                memcpy(view_at(data, r, c0), q, (size_t)n);
            else
                for (int i = 0; i < n; i++)
                    *(uint8_t *)view_at(data, r, c0 + i) = q[i];
        }
}

static void quantize_blocks(const mxfa_view *x, const mxfa_segment *seg, mxfa_preset preset, mxfa_block block,
                            const mxfa_view *data, const mxfa_view *scales)
{
    const fp8_format *fmt = mxfa_fp8_format(data->dtype);
    uint32_t v[32 * 32];
    uint8_t q[32 * 32];
    for (int64_t rb = 0; rb * 32 < seg->count; rb++) {
        int64_t r0 = seg->src + rb * 32, nr = seg->count - rb * 32 < 32 ? seg->count - rb * 32 : 32;
        int64_t bw = block == MXFA_BLOCK_COL ? 1 : 32;
        for (int64_t c0 = 0; c0 < x->cols; c0 += bw) {
            int64_t nc = x->cols - c0 < bw ? x->cols - c0 : bw;
            int n = 0;
            for (int64_t r = r0; r < r0 + nr; r++, n += (int)nc)
                load_bits(x, r, c0, nc, &v[n]);
            int has_nan, has_inf;
            uint32_t amax = amax_of(v, n, &has_nan, &has_inf);
            mxfa_block_rule rule = mxfa_ref_rule_from_amax(fmt, preset, amax, has_nan, has_inf);
            encode(fmt, &rule, v, n, q);
            *(uint8_t *)view_at(scales, seg->dst + rb, c0 / bw) = rule.scale;
            n = 0;
            for (int64_t r = r0; r < r0 + nr; r++)
                for (int64_t c = c0; c < c0 + nc; c++)
                    *(uint8_t *)view_at(data, r, c) = q[n++];
        }
    }
}

const cpu_kernels KERN_NAME = {KERN_ISA, dot, combine, softmax_p, encode, quantize_rows, quantize_blocks};
