/* Helpers shared by the attention tests: normal samples and tensor views. */
#ifndef MXFA_ATTN_UTIL_H
#define MXFA_ATTN_UTIL_H

#include <math.h>

#include "mxfa.h"
#include "tap.h"

/* a standard normal sample from the seeded generator (Box-Muller) */
static __attribute__((unused)) double gauss(void)
{
    double u = ((double)(rng_next() >> 11) + 0.5) / 9007199254740992.0;
    double v = ((double)(rng_next() >> 11) + 0.5) / 9007199254740992.0;
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

static __attribute__((unused)) mxfa_tensor t3(void *p, mxfa_dtype dt, int64_t a, int64_t b, int64_t c)
{
    mxfa_tensor t = {p, dt, MXFA_MEM_HOST, 3, {a, b, c}, {0}};
    return t;
}

static __attribute__((unused)) mxfa_tensor t2(void *p, mxfa_dtype dt, int64_t a, int64_t b)
{
    mxfa_tensor t = {p, dt, MXFA_MEM_HOST, 2, {a, b}, {0}};
    return t;
}

#endif
