/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The attention shapes of `mxfa bench` on a device: those of the H200
 * baseline scripts (bench/common.py's DEVICE_SHAPES), so that each rate has its
 * cuDNN and flash counterpart, narrowed by the command's options.
 */
#ifndef MXFA_TOOLS_BENCH_SHAPES_H
#define MXFA_TOOLS_BENCH_SHAPES_H

#include <stddef.h>
#include <stdint.h>

#include "mxfa.h"

typedef struct attn_shape {
    int64_t b, h, s, d;
    mxfa_causal causal;
} attn_shape;

#define BENCH_SHAPES 6
extern const attn_shape bench_shapes[BENCH_SHAPES];

/* The shapes whose head dim is one of dims[0 .. ndims - 1], with no mask
 * unless causal, with S = seqlen and H = heads where those are not 0, into
 * picked[] as indices into bench_shapes, in its order; returns how many. */
int bench_shapes_pick(const int *dims, int ndims, int causal, int64_t seqlen, int64_t heads,
                      int picked[BENCH_SHAPES]);

/* A shape from "B,H,S,D", "B,H,S,D,c" (the leak-free causal mask) or
 * "B,H,S,D,cp" (the plain one): each size at least 1, B S at most 2^31 - 1
 * tokens (cu_seqlens are int32), B S H D at most 2^40 elements; 0 when the
 * text is not such a shape. */
int bench_shape_parse(const char *text, attn_shape *out);

/* The shape as a table row names it: "B,H,S,D", then ",c" for the leak-free
 * causal mask and ",cp" for the plain one. */
void bench_shape_name(const attn_shape *s, char *out, size_t len);

#endif
