/* SPDX-License-Identifier: BSD-3-Clause */
/* The cpu backend's vector kernels: quantization to fp8 codes and scales
 * (kern_vec.h says how they are built). */
#include "kern_vec.h"

/* The encoding parameters of one element format and rounding. */
typedef struct enc_params {
    int32_t mbits, emin, emax;
    uint32_t maxc, nanc, away;
} enc_params;

static enc_params enc_params_of(const fp8_format *fmt, fp8_rounding rounding)
{
    enc_params e = {fmt->mbits, fmt->emin, fmt->emax, fmt->max_code, fmt->nan_code,
                    rounding == FP8_ROUND_NEAREST_AWAY};
    return e;
}

/* mxfa_fp8_encode (lib/fp8.c) of x * 2^se with satfinite overflow, for every
 * x but fp32 subnormals (which the callers send to the reference). */
static inline v16su encode16(v16su x, v16si se, const enc_params *p)
{
    v16su a = x & 0x7FFFFFFFu, sign = (x >> 24) & 0x80u;
    v16si e = (v16si)(a >> 23) - 127 + se;
    v16si ebin = (v16si)sel16(e < p->emin, (v16su){0} + (uint32_t)p->emin, (v16su)e);
    v16si shift = ebin - e + 23 - p->mbits;
    v16su sh = sel16(shift > 31, (v16su){0} + 31u, (v16su)shift);
    v16su sig = (a & 0x7FFFFFu) | 0x800000u;
    v16su q = sig >> sh, rem = sig & ((1u << sh) - 1), half = 1u << (sh - 1);
    q += (v16su)(rem > half) & 1u;
    q += (v16su)(rem == half) & (p->away | (q & 1u));
    v16su code = ((v16su)(ebin - p->emin) << p->mbits) + q;
    code = sel16((e > p->emax + 1) | (v16si)(code > p->maxc), (v16su){0} + p->maxc, code);
    code = sel16((v16si)(a == 0u), (v16su){0}, code);
    code = sel16((v16si)(a == F32_INF), (v16su){0} + p->maxc, code);
    code = sel16((v16si)(a > F32_INF), (v16su){0} + p->nanc, code);
    return code | sign;
}

static inline v16su load16(const uint32_t *x)
{
    v16su v;
    memcpy(&v, x, sizeof v);
    return v;
}

static inline void store16(uint8_t *out, v16su code)
{
    v16qu b = __builtin_convertvector(code, v16qu);
    memcpy(out, &b, sizeof b);
}

/* 1 in the lanes holding an fp32 subnormal */
static inline v16su subnormal16(v16su x)
{
    return (v16su)(((x & 0x7F800000u) == 0u) & ((x & 0x7FFFFFu) != 0u)) & 1u;
}

static inline uint32_t hmax16(v16su v)
{
    uint32_t m = 0;
    for (int i = 0; i < 16; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

static inline uint32_t hor16(v16su v)
{
    uint32_t m = 0;
    for (int i = 0; i < 16; i++)
        m |= v[i];
    return m;
}

/* The rule of a block from its amax: the table where it decides. */
static inline mxfa_block_rule rule_of(const rule_table *t, const fp8_format *fmt, mxfa_preset preset, uint32_t amax,
                                      int has_nan, int has_inf)
{
    uint32_t f = amax >> 23;
    if (__builtin_expect(!has_nan && !has_inf && (amax == 0 || t->decided[f]), 1)) {
        mxfa_block_rule r = {amax == 0 ? t->zero_scale : (uint8_t)(t->lo[f] + (amax >= t->thr[f])), 0, t->rounding};
        return r;
    }
    return mxfa_ref_rule_from_amax(fmt, preset, amax, has_nan, has_inf);
}

/* n fp32 values of one block encoded under its rule (as
 * mxfa_ref_encode_element), sixteen at a time. */
void KERN_FN(encode)(const fp8_format *fmt, const mxfa_block_rule *rule, const uint32_t *x, int n, uint8_t *out)
{
    if (rule->poisoned) {
        memset(out, fmt->nan_code, (size_t)n);
        return;
    }
    const enc_params ep = enc_params_of(fmt, rule->rounding);
    const v16si se = (v16si){0} + (127 - (int32_t)rule->scale);
    int i = 0;
    uint32_t sub = 0;
    for (; i + 16 <= n; i += 16) {
        v16su v = load16(x + i);
        sub |= hor16(subnormal16(v));
        store16(out + i, encode16(v, se, &ep));
    }
    if (i < n) {
        uint32_t t[16] = {0};
        uint8_t c[16];
        memcpy(t, x + i, (size_t)(n - i) * 4);
        v16su v = load16(t);
        sub |= hor16(subnormal16(v));
        store16(c, encode16(v, se, &ep));
        memcpy(out + i, c, (size_t)(n - i));
    }
    if (sub) /* fp32 subnormals (rare) through the reference encoder */
        for (i = 0; i < n; i++)
            if ((x[i] & 0x7F800000u) == 0)
                out[i] = mxfa_ref_encode_element(fmt, rule, x[i]);
}

/* |x| bits of the lanes that are not NaN (0 there, since a NaN does not
 * count for the amax); NaN and Inf lanes flagged */
static inline v16su finite_abs16(v16su x, v16su *nan, v16su *inf)
{
    v16su a = x & 0x7FFFFFFFu;
    *nan |= (v16su)(a > F32_INF);
    *inf |= (v16su)(a == F32_INF);
    return a & (v16su)(a <= F32_INF);
}

/* One row block of n <= 32 fp32 values (zero-padded to 32 in x). */
static uint8_t quantize_block32(const rule_table *t, const fp8_format *fmt, mxfa_preset preset, const uint32_t *x,
                                int n, uint8_t *out)
{
    v16su v0 = load16(x), v1 = load16(x + 16), nan = {0}, inf = {0};
    v16su a0 = finite_abs16(v0, &nan, &inf), a1 = finite_abs16(v1, &nan, &inf);
    v16su am = a0 > a1;
    uint32_t amax = hmax16((am & a0) | (~am & a1));
    mxfa_block_rule rule = rule_of(t, fmt, preset, amax, hor16(nan) != 0, hor16(inf) != 0);
    if (rule.poisoned || hor16(subnormal16(v0) | subnormal16(v1))) {
        KERN_FN(encode)(fmt, &rule, x, n, out);
        return rule.scale;
    }
    const enc_params ep = enc_params_of(fmt, rule.rounding);
    const v16si se = (v16si){0} + (127 - (int32_t)rule.scale);
    if (n == 32) {
        store16(out, encode16(v0, se, &ep));
        store16(out + 16, encode16(v1, se, &ep));
    } else {
        uint8_t c[32];
        store16(c, encode16(v0, se, &ep));
        store16(c + 16, encode16(v1, se, &ep));
        memcpy(out, c, (size_t)n);
    }
    return rule.scale;
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

void KERN_FN(quantize_rows)(const mxfa_view *x, mxfa_preset preset, const mxfa_view *data, const mxfa_view *scales)
{
    const fp8_format *fmt = mxfa_fp8_format(data->dtype);
    const rule_table *t = mxfa_cpu_rule_table(data->dtype, preset);
    const int direct = x->dtype == MXFA_F32 && x->cs == 1 && data->cs == 1;
    uint32_t v[32];
    uint8_t q[32];
    for (int64_t r = 0; r < x->rows; r++) {
        const uint32_t *xr = direct ? (const uint32_t *)view_at(x, r, 0) : NULL;
        uint8_t *dr = direct ? (uint8_t *)view_at(data, r, 0) : NULL, *sr = (uint8_t *)view_at(scales, r, 0);
        for (int64_t c0 = 0; c0 < x->cols; c0 += 32) {
            int n = (int)(x->cols - c0 < 32 ? x->cols - c0 : 32);
            if (direct && n == 32) {
                sr[(c0 / 32) * scales->cs] = quantize_block32(t, fmt, preset, xr + c0, 32, dr + c0);
                continue;
            }
            memset(v, 0, sizeof v);
            load_bits(x, r, c0, n, v);
            sr[(c0 / 32) * scales->cs] = quantize_block32(t, fmt, preset, v, n, q);
            for (int i = 0; i < n; i++)
                *(uint8_t *)view_at(data, r, c0 + i) = q[i];
        }
    }
}

/* Col blocks of 32 rows (or fewer, the last of a sequence) over 16
 * columns at a time: the amax down each column, a scale per lane, then the
 * rows encoded with each lane's own scale exponent. x holds nr rows of 16
 * fp32 values (ld 16), zero rows past nr. */
static void quantize_cols16(const rule_table *t, const fp8_format *fmt, mxfa_preset preset, const uint32_t *x,
                            int nr, uint8_t *codes, uint8_t *sc)
{
    v16su amax = {0}, nan = {0}, inf = {0}, sub = {0};
    for (int r = 0; r < nr; r++) {
        v16su v = load16(x + r * 16), a = finite_abs16(v, &nan, &inf);
        v16su m = a > amax;
        amax = (m & a) | (~m & amax);
        sub |= subnormal16(v);
    }
    int slow = 0;
    v16si se;
    fp8_rounding rounding = t->rounding;
    for (int l = 0; l < 16; l++) {
        mxfa_block_rule rule = rule_of(t, fmt, preset, amax[l], nan[l] != 0, inf[l] != 0);
        sc[l] = rule.scale;
        se[l] = 127 - (int32_t)rule.scale;
        slow |= rule.poisoned || sub[l] || rule.rounding != rounding;
    }
    if (slow) { /* every lane through the one-block path */
        for (int l = 0; l < 16; l++) {
            uint32_t col[32];
            uint8_t q[32];
            for (int r = 0; r < nr; r++)
                col[r] = x[r * 16 + l];
            mxfa_block_rule rule = rule_of(t, fmt, preset, amax[l], nan[l] != 0, inf[l] != 0);
            KERN_FN(encode)(fmt, &rule, col, nr, q);
            for (int r = 0; r < nr; r++)
                codes[r * 16 + l] = q[r];
        }
        return;
    }
    const enc_params ep = enc_params_of(fmt, rounding);
    for (int r = 0; r < nr; r++)
        store16(codes + r * 16, encode16(load16(x + r * 16), se, &ep));
}

void KERN_FN(quantize_blocks)(const mxfa_view *x, const mxfa_segment *seg, mxfa_preset preset, mxfa_block block,
                            const mxfa_view *data, const mxfa_view *scales)
{
    const fp8_format *fmt = mxfa_fp8_format(data->dtype);
    const rule_table *t = mxfa_cpu_rule_table(data->dtype, preset);
    uint32_t v[32 * 32];
    uint8_t q[32 * 32];
    for (int64_t rb = 0; rb * 32 < seg->count; rb++) {
        int64_t r0 = seg->src + rb * 32, nr = seg->count - rb * 32 < 32 ? seg->count - rb * 32 : 32;
        if (block == MXFA_BLOCK_COL) {
            for (int64_t c0 = 0; c0 < x->cols; c0 += 16) {
                int64_t nc = x->cols - c0 < 16 ? x->cols - c0 : 16;
                uint8_t sc[16];
                memset(v, 0, sizeof v);
                for (int64_t r = 0; r < nr; r++)
                    load_bits(x, r0 + r, c0, nc, &v[r * 16]);
                quantize_cols16(t, fmt, preset, v, (int)nr, q, sc);
                for (int64_t c = 0; c < nc; c++)
                    *(uint8_t *)view_at(scales, seg->dst + rb, c0 + c) = sc[c];
                for (int64_t r = 0; r < nr; r++) {
                    uint8_t *d = (uint8_t *)view_at(data, r0 + r, c0);
                    if (data->cs == 1)
                        memcpy(d, &q[r * 16], (size_t)nc);
                    else
                        for (int64_t c = 0; c < nc; c++)
                            *(uint8_t *)view_at(data, r0 + r, c0 + c) = q[r * 16 + c];
                }
            }
            continue;
        }
        for (int64_t c0 = 0; c0 < x->cols; c0 += 32) { /* square 32 x 32 blocks */
            int64_t nc = x->cols - c0 < 32 ? x->cols - c0 : 32;
            int n = 0;
            for (int64_t r = r0; r < r0 + nr; r++, n += (int)nc)
                load_bits(x, r, c0, nc, &v[n]);
            v16su amx = {0}, nan = {0}, inf = {0};
            int i = 0;
            for (; i + 16 <= n; i += 16) {
                v16su a = finite_abs16(load16(v + i), &nan, &inf), m = a > amx;
                amx = (m & a) | (~m & amx);
            }
            uint32_t amax = hmax16(amx);
            for (; i < n; i++) {
                uint32_t a = v[i] & 0x7FFFFFFFu;
                nan[0] |= a > F32_INF;
                inf[0] |= a == F32_INF;
                amax = a <= F32_INF && a > amax ? a : amax;
            }
            mxfa_block_rule rule = rule_of(t, fmt, preset, amax, hor16(nan) != 0, hor16(inf) != 0);
            KERN_FN(encode)(fmt, &rule, v, n, q);
            *(uint8_t *)view_at(scales, seg->dst + rb, c0 / 32) = rule.scale;
            n = 0;
            for (int64_t r = r0; r < r0 + nr; r++, n += (int)nc) {
                if (data->cs == 1)
                    memcpy(view_at(data, r, c0), &q[n], (size_t)nc);
                else
                    for (int64_t c = 0; c < nc; c++)
                        *(uint8_t *)view_at(data, r, c0 + c) = q[n + c];
            }
        }
    }
}
