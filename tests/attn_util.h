/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers shared by the attention tests: tensor views (normal samples are tap.h's gauss). */
#ifndef MXFA_ATTN_UTIL_H
#define MXFA_ATTN_UTIL_H

#include "mxfa.h"
#include "tap.h"

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
