/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A few-line TAP producer for the test programs (read by automake's
 * tap-driver.sh), with the seeded random generator every test uses.
 *
 * Reproducible randomness: the seed is fixed unless MXFA_SEED is set; a
 * seed that is not the default is printed. MXFA_CHECK_EXPENSIVE=1 turns on
 * the exhaustive sweeps.
 *
 * A test written in several files defines TAP_SHARED before including this
 * in each, and TAP_SHARED_DEFINE as well in the one that holds main(): then
 * all count one series of test points and draw from one generator.
 */
#ifndef MXFA_TAP_H
#define MXFA_TAP_H

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(TAP_SHARED_DEFINE)
#define TAP_STATE
#elif defined(TAP_SHARED)
#define TAP_STATE extern
#else
#define TAP_STATE static
#endif

TAP_STATE int tap_count, tap_failed;

static void diag(const char *fmt, ...) __attribute__((format(printf, 1, 2), unused));
static void diag(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("# ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

/* One test point; returns cond so that callers can add diagnostics. */
static int ok(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3), unused));
static int ok(int cond, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%sok %d - ", cond ? "" : "not ", ++tap_count);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    if (!cond)
        tap_failed++;
    return cond;
}

static void skip_all(const char *reason) __attribute__((unused, noreturn));
static void skip_all(const char *reason)
{
    printf("1..0 # SKIP %s\n", reason);
    exit(0);
}

/* One test point that cannot run here (hardware this machine lacks). */
static void skip(const char *reason) __attribute__((unused));
static void skip(const char *reason)
{
    printf("ok %d # SKIP %s\n", ++tap_count, reason);
    fflush(stdout);
}

static int done_testing(void) __attribute__((unused));
static int done_testing(void)
{
    printf("1..%d\n", tap_count);
    return tap_failed ? 1 : 0;
}

static int expensive(void) __attribute__((unused));
static int expensive(void)
{
    const char *e = getenv("MXFA_CHECK_EXPENSIVE");
    return e && *e && strcmp(e, "0") != 0;
}

/* splitmix64: small, fast, good enough for test inputs */
TAP_STATE uint64_t rng_state;

static uint64_t rng_next(void) __attribute__((unused));
static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* uniform in [0, n) */
static uint32_t rng_below(uint32_t n) __attribute__((unused));
static uint32_t rng_below(uint32_t n)
{
    return (uint32_t)((rng_next() >> 32) * n >> 32);
}

/* a standard normal sample from the seeded generator (Box-Muller) */
static double gauss(void) __attribute__((unused));
static double gauss(void)
{
    double u = ((double)(rng_next() >> 11) + 0.5) / 9007199254740992.0;
    double v = ((double)(rng_next() >> 11) + 0.5) / 9007199254740992.0;
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

static void rng_seed_from_env(uint64_t default_seed) __attribute__((unused));
static void rng_seed_from_env(uint64_t default_seed)
{
    const char *s = getenv("MXFA_SEED");
    rng_state = default_seed;
    if (s && *s) {
        rng_state = strtoull(s, NULL, 0);
        diag("seed %" PRIu64 " (from MXFA_SEED)", rng_state);
    } else {
        diag("seed %" PRIu64 " (default; set MXFA_SEED to change)", rng_state);
    }
}

static float f32_of(uint32_t b) __attribute__((unused));
static float f32_of(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static uint32_t bits_of(float f) __attribute__((unused));
static uint32_t bits_of(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

#endif
