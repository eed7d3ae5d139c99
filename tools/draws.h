/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Random operands for the checks of a GPU backend against the emulator:
 * one generator, shared by `mxfa selftest` and tests/t-cuda, so that both
 * draw the same kinds of cases (a fix to one is a fix to both). The state
 * is the caller's; the sequence is splitmix64's, as tests/tap.h draws it.
 */
#ifndef MXFA_DRAWS_H
#define MXFA_DRAWS_H

#include <stdint.h>

#include "mxfa.h"

/* Uniform in [0, n). */
static inline uint32_t draw_below(uint64_t *state, uint32_t n)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    z ^= z >> 31;
    return (uint32_t)((z >> 32) * n >> 32);
}

/* An element code of dt: any finite code; zeros of both signs, in runs
 * now and then; NaN (and for E5M2 Inf) only when not calm, and then
 * rarely. */
static inline uint8_t draw_fp8_code(uint64_t *state, mxfa_dtype dt, int calm)
{
    uint8_t v = (uint8_t)draw_below(state, 256);
    if (draw_below(state, 8) == 0)
        return draw_below(state, 2) ? 0x80 : 0;
    const int special = dt == MXFA_E4M3 ? (v & 0x7F) == 0x7F : (v & 0x7F) >= 0x7C;
    if (special && (calm || draw_below(state, 64) != 0))
        v &= 0xBF; /* a finite code of the same sign */
    return v;
}

/* An E8M0 scale byte. mode 0: near 2^0; 1: anywhere in E8M0's range (the
 * product of two leaves fp32's range: the exact promotion path, subnormal
 * results); 2: near 2^0 with a NaN scale now and then. */
static inline uint8_t draw_scale_code(uint64_t *state, int mode)
{
    if (mode == 1)
        return (uint8_t)draw_below(state, 255);
    if (mode == 2 && draw_below(state, 100) == 0)
        return 0xFF;
    return (uint8_t)(117 + draw_below(state, 21));
}

#endif
