/* SPDX-License-Identifier: BSD-3-Clause */
/* The device bench's attention shapes (bench_shapes.h). */
#include "bench_shapes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const attn_shape bench_shapes[BENCH_SHAPES] = {
    {4, 16, 4096, 128, MXFA_CAUSAL_NONE}, {4, 16, 4096, 128, MXFA_CAUSAL},    {4, 16, 4096, 128, MXFA_CAUSAL_PLAIN},
    {1, 16, 16384, 128, MXFA_CAUSAL_NONE}, {8, 16, 2048, 64, MXFA_CAUSAL_NONE}, {2, 16, 8192, 256, MXFA_CAUSAL_NONE},
};

int bench_shapes_pick(const int *dims, int ndims, int causal, int64_t seqlen, int64_t heads,
                      int picked[BENCH_SHAPES])
{
    int n = 0;
    for (int i = 0; i < BENCH_SHAPES; i++) {
        const attn_shape *s = &bench_shapes[i];
        int dim = 0;
        for (int j = 0; j < ndims; j++)
            dim |= dims[j] == s->d;
        const int mask = causal || s->causal == MXFA_CAUSAL_NONE;
        if (dim && mask && (!seqlen || s->s == seqlen) && (!heads || s->h == heads))
            picked[n++] = i;
    }
    return n;
}

int bench_shape_parse(const char *text, attn_shape *out)
{
    int64_t v[4];
    const char *at = text;
    for (int i = 0; i < 4; i++) {
        if (*at < '0' || *at > '9')
            return 0;
        char *end;
        errno = 0;
        const long long x = strtoll(at, &end, 10);
        if (errno || x < 1 || x > ((int64_t)1 << 31))
            return 0;
        v[i] = x, at = end;
        if (i < 3 && *at++ != ',')
            return 0;
    }
    mxfa_causal causal = MXFA_CAUSAL_NONE;
    if (strcmp(at, ",c") == 0)
        causal = MXFA_CAUSAL;
    else if (strcmp(at, ",cp") == 0)
        causal = MXFA_CAUSAL_PLAIN;
    else if (*at)
        return 0;
    const int64_t tokens = v[0] * v[2]; /* (each below 2^32: no overflow) */
    if (tokens > INT32_MAX || v[1] > ((int64_t)1 << 40) / tokens || v[3] > ((int64_t)1 << 40) / (tokens * v[1]))
        return 0;
    out->b = v[0], out->h = v[1], out->s = v[2], out->d = v[3], out->causal = causal;
    return 1;
}

void bench_shape_name(const attn_shape *s, char *out, size_t len)
{
    snprintf(out, len, "%lld,%lld,%lld,%lld%s", (long long)s->b, (long long)s->h, (long long)s->s, (long long)s->d,
             s->causal == MXFA_CAUSAL ? ",c" : s->causal == MXFA_CAUSAL_PLAIN ? ",cp" : "");
}
