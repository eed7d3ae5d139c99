/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared pieces of the libFuzzer targets (configure --enable-fuzzing, with
 * clang): reading choices from the fuzzer's bytes, and tensor descriptors
 * that are either fully backed by memory or invalid by the API's contract,
 * so that any read or write the sanitizers catch is the library's fault.
 */
#ifndef MXFA_FUZZ_H
#define MXFA_FUZZ_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mxfa.h"

typedef struct fuzz_in {
    const uint8_t *p;
    size_t n;
} fuzz_in;

static inline uint8_t take8(fuzz_in *in)
{
    if (!in->n)
        return 0;
    in->n--;
    return *in->p++;
}

static inline uint32_t take32(fuzz_in *in)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v = v << 8 | take8(in);
    return v;
}

/* A size or stride: mostly small and meaningful, sometimes hostile. */
static inline int64_t take_dim(fuzz_in *in)
{
    static const int64_t odd[] = {0, -1, -32, INT64_MAX, INT64_MIN, (int64_t)1 << 40, (int64_t)1 << 31, 3 << 20};
    uint8_t b = take8(in);
    if (b >= 0xF8)
        return odd[b - 0xF8];
    return b % 97;
}

/* Bytes needed for a descriptor, -1 if the API must refuse it (a size or
 * stride not positive, all-zero strides meaning contiguous), -2 if it is
 * valid but larger than the fuzzer should allocate. */
static inline int64_t desc_bytes(const mxfa_tensor *t)
{
    int contiguous = 1;
    for (int i = 0; i < t->ndim; i++)
        contiguous &= t->stride[i] == 0;
    __int128 count = 1, last = 0;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] <= 0)
            return -1;
        __int128 stride = contiguous ? count : t->stride[i];
        if (stride < 0 || (stride == 0 && t->shape[i] > 1))
            return -1;
        count *= t->shape[i];
        last += (__int128)(t->shape[i] - 1) * stride;
        if (count > ((__int128)1 << 62) || last > ((__int128)1 << 62))
            return -1; /* the API reports the overflow */
    }
    __int128 bytes = (last + 1) * (__int128)mxfa_dtype_size(t->dtype);
    return bytes > (4 << 20) ? -2 : (int64_t)bytes;
}

/* A descriptor of dtype and the given shape from the fuzzer's bytes, its
 * memory allocated (filled with the fuzzer's bytes, or the pattern 0xA5 for
 * outputs) when it is valid; a one-byte buffer when it must be refused.
 * *bytes: the size allocated, or -2 when the call should be skipped. */
static inline mxfa_tensor take_tensor_nd(fuzz_in *in, mxfa_dtype dtype, int ndim, const int64_t *shape, int output,
                                         int64_t *bytes)
{
    mxfa_tensor t = {NULL, dtype, MXFA_MEM_HOST, ndim, {0}, {0}};
    for (int i = 0; i < ndim; i++)
        t.shape[i] = shape[i];
    uint8_t how = take8(in);
    if (how & 1) { /* explicit strides, padded or hostile */
        int64_t st = how & 2 ? take_dim(in) : 1;
        for (int i = ndim - 1; i >= 0; i--) {
            t.stride[i] = st;
            __int128 next = (__int128)st * shape[i] + (i == ndim - 1 ? (how >> 4) : 0);
            st = how & 4 ? take_dim(in) : next > INT64_MAX ? INT64_MAX : next < INT64_MIN ? INT64_MIN : (int64_t)next;
        }
    }
    if (how >= 0xF0) /* a hostile size instead */
        t.shape[take8(in) % ndim] = take_dim(in);
    int64_t n = desc_bytes(&t);
    *bytes = n;
    if (n == -2)
        return t;
    size_t alloc = n > 0 ? (size_t)n : 1;
    uint8_t *m = malloc(alloc);
    if (!m)
        abort();
    for (size_t i = 0; i < alloc; i++)
        m[i] = output ? 0xA5 : take8(in);
    t.data = m;
    return t;
}

static inline mxfa_tensor take_tensor(fuzz_in *in, mxfa_dtype dtype, int64_t rows, int64_t cols, int output,
                                      int64_t *bytes)
{
    const int64_t shape[2] = {rows, cols};
    return take_tensor_nd(in, dtype, 2, shape, output, bytes);
}

/* 1 when an output still holds the pattern it was allocated with. */
static inline int untouched(const mxfa_tensor *t, int64_t bytes)
{
    for (int64_t i = 0; i < bytes; i++)
        if (((const uint8_t *)t->data)[i] != 0xA5)
            return 0;
    return 1;
}

/* Float data that is mostly ordinary numbers: the fuzzer's bytes decide
 * where NaN, Inf, huge and tiny values go. */
static inline void tame_floats(mxfa_tensor *t, int64_t bytes)
{
    if (t->dtype != MXFA_F32 || bytes <= 0)
        return;
    float *f = (float *)t->data;
    for (int64_t i = 0; i < bytes / 4; i++) {
        uint32_t u;
        memcpy(&u, &f[i], 4);
        if ((u & 0x7) != 0) /* seven in eight: a modest value */
            f[i] = (float)((int32_t)(u >> 8) % 4096) / 512.0f;
    }
}

/* The shape of an attention problem from the fuzzer's bytes: head dims
 * supported or not, head counts that divide or not, up to four sequences
 * whose offsets may decrease or not match the tokens, and parameters of
 * every kind (unknown models, presets, P scalings, causal modes, tiles that
 * are not multiples of 32). 0 when there is nothing to call (no tokens). */
typedef struct fuzz_attn_problem {
    int64_t d, hq, hkv, tq, tk;
    int batch, jagged;
    int32_t cuq[5], cuk[5];
    mxfa_attn_params p;
} fuzz_attn_problem;

static inline int take_attn_problem(fuzz_in *in, fuzz_attn_problem *a)
{
    static const int64_t dims[] = {64, 128, 256, 32, 0, 96};
    memset(a, 0, sizeof *a);
    a->d = dims[take8(in) % 6];
    a->hkv = take8(in) % 3 + 1;
    a->hq = a->hkv * (take8(in) % 2 + 1);
    a->hq += take8(in) == 7; /* a head count that does not divide */
    a->batch = take8(in) % 4;
    for (int b = 1; b <= a->batch; b++) {
        a->cuq[b] = a->cuq[b - 1] + take8(in) % 40;
        a->cuq[b] -= take8(in) == 3; /* may decrease */
        a->cuk[b] = a->cuk[b - 1] + take8(in) % 40;
    }
    a->jagged = a->batch > 0;
    a->tq = a->jagged ? a->cuq[a->batch] : take8(in) % 40 + 1;
    a->tk = a->jagged ? a->cuk[a->batch] : take8(in) % 40 + 1;
    a->tq += take8(in) == 5; /* tokens that do not match the offsets */
    if (a->tq <= 0 || a->tk <= 0)
        return 0;
    mxfa_attn_params_default(&a->p);
    a->p.model = (mxfa_model)(take8(in) % 5);
    a->p.preset = (mxfa_preset)(take8(in) % 5);
    a->p.p_scale = (mxfa_p_scale)(take8(in) % 3);
    a->p.causal = (mxfa_causal)(take8(in) % 4);
    a->p.block_m = 32 * (take8(in) % 5);
    a->p.block_m += take8(in) == 9;
    a->p.block_n = 32 * (take8(in) % 5);
    return 1;
}

#endif
