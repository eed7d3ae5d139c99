/* SPDX-License-Identifier: BSD-3-Clause */
/* The device bench's attention shapes (bench_shapes.h). */
#include "bench_shapes.h"

#include <stdio.h>

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

void bench_shape_name(const attn_shape *s, char *out, size_t len)
{
    snprintf(out, len, "%lld,%lld,%lld,%lld%s", (long long)s->b, (long long)s->h, (long long)s->s, (long long)s->d,
             s->causal == MXFA_CAUSAL ? ",c" : s->causal == MXFA_CAUSAL_PLAIN ? ",cp" : "");
}
