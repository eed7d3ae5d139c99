/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * FP8 codecs: every code of E4M3 and E5M2 decoded and re-encoded, and
 * fp32 -> FP8 in both overflow modes against the slow reference of
 * slowfp8.h: every boundary and tie, walking bits, and seeded random inputs
 * (over 10^7 per format and mode), or all 2^32 inputs with
 * MXFA_CHECK_EXPENSIVE=1.
 */
#include <float.h>

#include "mxfa.h"
#include "slowfp8.h"
#include "tap.h"

typedef uint8_t (*encode_fn)(float, mxfa_overflow);
typedef float (*decode_fn)(uint8_t);

static int same_value(float got, double want)
{
    if (isnan(want))
        return isnan(got);
    return (double)got == want && !signbit(got) == !signbit(want);
}

static void check_codes(const char *name, const slow_fmt *f, encode_fn enc, decode_fn dec)
{
    int bad_decode = 0, bad_roundtrip = 0;
    for (unsigned c = 0; c < 256; c++) {
        double want = slow_decode(f, (uint8_t)c);
        float got = dec((uint8_t)c);
        if (!same_value(got, want)) {
            if (bad_decode++ < 5)
                diag("%s decode 0x%02X: got %a want %a", name, c, (double)got, want);
        }
        /* re-encoding gives the code back; NaN codes give the NaN code 0x7F
         * with their sign; Inf (E5M2) stays Inf without saturation */
        uint8_t expect = isnan(want) ? (uint8_t)((c & 0x80) | 0x7F) : (uint8_t)c;
        uint8_t back = enc(got, MXFA_NONSAT);
        if (back != expect) {
            if (bad_roundtrip++ < 5)
                diag("%s re-encode 0x%02X: got 0x%02X want 0x%02X", name, c, back, expect);
        }
    }
    ok(bad_decode == 0, "%s: all 256 codes decode to the OCP values", name);
    ok(bad_roundtrip == 0, "%s: all 256 codes re-encode to themselves (NaN to 0x7F with sign)", name);
}

typedef struct sweep {
    const char *name;
    const slow_fmt *f;
    encode_fn enc;
    uint64_t checked, bad;
} sweep;

static void check_one(sweep *s, uint32_t bits)
{
    float x = f32_of(bits);
    for (int sat = 0; sat <= 1; sat++) {
        uint8_t got = s->enc(x, sat ? MXFA_SATFINITE : MXFA_NONSAT);
        uint8_t want = slow_encode(s->f, (double)x, 0, sat);
        s->checked++;
        if (got != want && s->bad++ < 8)
            diag("%s %s: fp32 0x%08" PRIX32 " (%a) -> 0x%02X, reference 0x%02X", s->name,
                 sat ? "satfinite" : "nonsat", bits, (double)x, got, want);
    }
}

static void check_sweep(const char *name, const slow_fmt *f, encode_fn enc)
{
    sweep s = {name, f, enc, 0, 0};
    if (expensive()) {
        for (uint64_t b = 0; b <= UINT32_MAX; b++)
            check_one(&s, (uint32_t)b);
        ok(s.bad == 0, "%s: all 2^32 fp32 inputs, both overflow modes, match the reference (%" PRIu64 " checks)",
           name, s.checked);
        return;
    }
    /* Every value, every midpoint (tie) and their fp32 neighbours. */
    uint64_t before = s.checked;
    for (unsigned k = 0; k <= f->max_code + 1u; k++) {
        double pts[2] = {f->value[k], k <= f->max_code ? (f->value[k] + f->value[k + 1]) / 2 : f->value[k] * 2};
        for (int i = 0; i < 2; i++) {
            float p = (float)pts[i];
            float cand[5] = {p, nextafterf(p, 0), nextafterf(p, INFINITY), nextafterf(nextafterf(p, 0), 0),
                             nextafterf(nextafterf(p, INFINITY), INFINITY)};
            for (int j = 0; j < 5; j++) {
                check_one(&s, bits_of(cand[j]));
                check_one(&s, bits_of(-cand[j]));
            }
        }
    }
    static const uint32_t specials[] = {0x00000000, 0x80000000, 0x00000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF,
                                        0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF,
                                        0x3F800000, 0x43E00000, 0x43E80000, 0x43F00000, 0x47600000, 0x47700000};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++)
        check_one(&s, specials[i]);
    ok(s.bad == 0, "%s: every code value, every tie and their neighbours (%" PRIu64 " checks)", name,
       s.checked - before);

    /* Walking bits across every exponent: one bit set, low ones, high ones. */
    before = s.checked;
    for (uint32_t e = 0; e < 256; e++)
        for (int i = 0; i < 23; i++) {
            uint32_t fr[3] = {1u << i, (1u << (i + 1)) - 1, 0x7FFFFFu & ~((1u << i) - 1)};
            for (int j = 0; j < 3; j++) {
                check_one(&s, e << 23 | fr[j]);
                check_one(&s, 0x80000000u | e << 23 | fr[j]);
            }
        }
    ok(s.bad == 0, "%s: walking bits over all exponents (%" PRIu64 " checks)", name, s.checked - before);

    /* Seeded random: uniform bit patterns, and patterns near the format's range. */
    before = s.checked;
    for (int i = 0; i < 5000000; i++)
        check_one(&s, (uint32_t)rng_next());
    for (int i = 0; i < 5000000; i++) {
        uint32_t e = (uint32_t)(127 - f->bias - f->mbits - 4 + (int)rng_below((unsigned)(2 * f->bias + f->mbits + 8)));
        check_one(&s, (uint32_t)(rng_next() & 0x807FFFFFu) | e << 23);
    }
    ok(s.bad == 0, "%s: %" PRIu64 " seeded random inputs match the reference", name, s.checked - before);
    diag("%s: %" PRIu64 " conversions checked in all (each input in both overflow modes)", name, s.checked);
}

int main(void)
{
    rng_seed_from_env(20261129);
    slow_fmt e4m3, e5m2;
    slow_fmt_init(&e4m3, 1);
    slow_fmt_init(&e5m2, 0);
    check_codes("e4m3", &e4m3, mxfa_f32_to_e4m3, mxfa_e4m3_to_f32);
    check_codes("e5m2", &e5m2, mxfa_f32_to_e5m2, mxfa_e5m2_to_f32);

    /* A few hand-checked facts of the formats (docs/NUMERICS.md, "Element formats"). */
    ok(mxfa_f32_to_e4m3(448.0f, MXFA_SATFINITE) == 0x7E && mxfa_f32_to_e4m3(-448.0f, MXFA_SATFINITE) == 0xFE,
       "e4m3: +-448 is 0x7E/0xFE");
    ok(mxfa_f32_to_e4m3(464.0f, MXFA_NONSAT) == 0x7E && mxfa_f32_to_e4m3(464.5f, MXFA_NONSAT) == 0x7F,
       "e4m3: 464 ties down to 448 (even), just above it overflows to NaN without saturation");
    ok(mxfa_f32_to_e4m3(INFINITY, MXFA_SATFINITE) == 0x7E && mxfa_f32_to_e4m3(-INFINITY, MXFA_NONSAT) == 0xFF,
       "e4m3: Inf saturates to max, or becomes NaN (sign kept) without saturation");
    ok(mxfa_f32_to_e5m2(61440.0f, MXFA_NONSAT) == 0x7C && mxfa_f32_to_e5m2(61440.0f, MXFA_SATFINITE) == 0x7B,
       "e5m2: 61440 ties up to 2^16 (even) and overflows: Inf, or max when saturating");
    ok(mxfa_f32_to_e5m2(NAN, MXFA_SATFINITE) == 0x7F && mxfa_f32_to_e5m2(-NAN, MXFA_SATFINITE) == 0xFF,
       "e5m2: NaN is 0x7F with its sign");
    ok(mxfa_f32_to_e4m3(-0.0f, MXFA_SATFINITE) == 0x80 && mxfa_f32_to_e4m3(0x1p-10f, MXFA_SATFINITE) == 0x00 &&
           mxfa_f32_to_e4m3(0x1.000002p-10f, MXFA_SATFINITE) == 0x01,
       "e4m3: -0 kept; 2^-10 (half the smallest subnormal) ties to 0, just above rounds up");
    ok(mxfa_e4m3_to_f32(0x01) == 0x1p-9f && mxfa_e5m2_to_f32(0x01) == 0x1p-16f && mxfa_e5m2_to_f32(0x7B) == 57344.0f,
       "smallest subnormals 2^-9 and 2^-16, e5m2 max 57344");

    check_sweep("e4m3", &e4m3, mxfa_f32_to_e4m3);
    check_sweep("e5m2", &e5m2, mxfa_f32_to_e5m2);

    /* bf16: widening exact, narrowing RNE */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float w = mxfa_bf16_to_f32((uint16_t)h);
        if (bits_of(w) != h << 16)
            bad++;
        else if (!isnan(w) && mxfa_f32_to_bf16(w) != h)
            bad++;
    }
    ok(bad == 0, "bf16: all 65536 values widen exactly and narrow back");
    ok(mxfa_f32_to_bf16(f32_of(0x3F808000)) == 0x3F80 && mxfa_f32_to_bf16(f32_of(0x3F818000)) == 0x3F82 &&
           mxfa_f32_to_bf16(f32_of(0x3F808001)) == 0x3F81 && mxfa_f32_to_bf16(f32_of(0x7F7FFFFF)) == 0x7F80,
       "bf16: ties to even, above the tie rounds up, FLT_MAX rounds to Inf");
    return done_testing();
}
