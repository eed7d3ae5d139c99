/* SPDX-License-Identifier: BSD-3-Clause */
/* E8M0 scales: all 256 codes decoded, both rounding rules and both overflow
 * modes against the slow reference, on boundaries and random inputs. */
#include "mxfa.h"
#include "slowfp8.h"
#include "tap.h"

int main(void)
{
    rng_seed_from_env(20261129);
    int bad = 0;
    for (unsigned c = 0; c < 256; c++) {
        float v = mxfa_e8m0_to_f32((uint8_t)c);
        double want = c == 255 ? NAN : ldexp(1.0, (int)c - 127);
        if (c == 255 ? !isnan(v) : (double)v != want) {
            if (bad++ < 5)
                diag("decode 0x%02X -> %a, want %a", c, (double)v, want);
        }
    }
    ok(bad == 0, "all 256 codes decode to 2^(code-127), 0xFF to NaN");
    ok(bits_of(mxfa_e8m0_to_f32(0)) == 0x00400000, "code 0x00 is 2^-127, an fp32 subnormal, not 0 or 1");

    bad = 0;
    for (unsigned c = 0; c < 255; c++) {
        float v = mxfa_e8m0_to_f32((uint8_t)c);
        if (mxfa_f32_to_e8m0(v, MXFA_E8M0_CEIL, MXFA_SATFINITE) != c ||
            mxfa_f32_to_e8m0(v, MXFA_E8M0_FLOOR, MXFA_SATFINITE) != c)
            bad++;
    }
    ok(bad == 0, "every power of two 2^-127 .. 2^127 encodes to its own code under both rules");

    uint64_t n = 0;
    bad = 0;
    for (int i = 0; i < 2000000; i++) {
        uint32_t b;
        if (i < 256 * 24) { /* each exponent with walking fraction bits */
            uint32_t e = (uint32_t)(i / 24), k = (uint32_t)(i % 24);
            b = e << 23 | (k < 23 ? 1u << k : 0);
        } else {
            b = (uint32_t)rng_next();
        }
        float x = f32_of(b);
        for (int rule = 0; rule < 2; rule++)
            for (int sat = 0; sat < 2; sat++) {
                uint8_t got = mxfa_f32_to_e8m0(x, rule ? MXFA_E8M0_FLOOR : MXFA_E8M0_CEIL,
                                               sat ? MXFA_SATFINITE : MXFA_NONSAT);
                uint8_t want = slow_e8m0((double)x, !rule, sat);
                n++;
                if (got != want && bad++ < 8)
                    diag("0x%08" PRIX32 " rule %s %s -> 0x%02X want 0x%02X", b, rule ? "floor" : "ceil",
                         sat ? "sat" : "nonsat", got, want);
            }
    }
    ok(bad == 0, "%" PRIu64 " conversions (walking bits, random) match the reference", n);
    ok(mxfa_f32_to_e8m0(0.0f, MXFA_E8M0_CEIL, MXFA_SATFINITE) == 0 &&
           mxfa_f32_to_e8m0(0x1.8p-127f, MXFA_E8M0_CEIL, MXFA_SATFINITE) == 1 &&
           mxfa_f32_to_e8m0(INFINITY, MXFA_E8M0_CEIL, MXFA_SATFINITE) == 0xFE &&
           mxfa_f32_to_e8m0(INFINITY, MXFA_E8M0_CEIL, MXFA_NONSAT) == 0xFF &&
           mxfa_f32_to_e8m0(NAN, MXFA_E8M0_FLOOR, MXFA_SATFINITE) == 0xFF &&
           mxfa_f32_to_e8m0(3.0f, MXFA_E8M0_CEIL, MXFA_SATFINITE) == 129 &&
           mxfa_f32_to_e8m0(3.0f, MXFA_E8M0_FLOOR, MXFA_SATFINITE) == 128 &&
           mxfa_f32_to_e8m0(-3.0f, MXFA_E8M0_CEIL, MXFA_SATFINITE) == 129,
       "hand-checked: 0, 1.5*2^-127, Inf, NaN, 3 and -3");
    return done_testing();
}
