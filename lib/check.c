/* SPDX-License-Identifier: BSD-3-Clause */
/* Argument checking shared by every entry point: descriptors, sizes,
 * strides, overlap and jagged offsets. */
#include "internal.h"

int mxfa_mul_ok(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

int mxfa_add_ok(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}

MXFA_API size_t mxfa_dtype_size(mxfa_dtype dtype)
{
    switch (dtype) {
    case MXFA_F32: return 4;
    case MXFA_BF16: return 2;
    case MXFA_E4M3: case MXFA_E5M2: case MXFA_E8M0: return 1;
    case MXFA_F64: return 8;
    case MXFA_I32: return 4;
    }
    return 0;
}

MXFA_API const char *mxfa_dtype_name(mxfa_dtype dtype)
{
    switch (dtype) {
    case MXFA_F32: return "f32";
    case MXFA_BF16: return "bf16";
    case MXFA_E4M3: return "e4m3";
    case MXFA_E5M2: return "e5m2";
    case MXFA_E8M0: return "e8m0";
    case MXFA_F64: return "f64";
    case MXFA_I32: return "i32";
    }
    return "unknown";
}

MXFA_API mxfa_tensor mxfa_tensor_2d(void *data, mxfa_dtype dtype, int64_t rows, int64_t cols)
{
    mxfa_tensor t = {0};
    t.data = data;
    t.dtype = dtype;
    t.memory = MXFA_MEM_HOST;
    t.ndim = 2;
    t.shape[0] = rows;
    t.shape[1] = cols;
    t.stride[0] = cols;
    t.stride[1] = 1;
    return t;
}

mxfa_status mxfa_check_memory(mxfa_ctx *ctx, const char *what, const mxfa_tensor *t)
{
    if (t->memory == MXFA_MEM_HOST)
        return MXFA_OK;
    if (t->memory == MXFA_MEM_DEVICE) {
        if (ctx->backend->takes_device_memory)
            return MXFA_OK;
        return mxfa_fail(ctx, MXFA_ERR_UNSUPPORTED,
                         "%s is in device memory, which the '%s' backend cannot read",
                         what, ctx->backend->name);
    }
    return mxfa_fail(ctx, MXFA_ERR_INVALID, "%s: unknown memory kind %d", what, (int)t->memory);
}

static int dtype_known(mxfa_dtype d)
{
    return (unsigned)d < MXFA_DTYPE_COUNT;
}

mxfa_status mxfa_check_matrix(mxfa_ctx *ctx, const char *what, const mxfa_tensor *t,
                              unsigned dtypes, int64_t rows, int64_t cols, int is_output,
                              mxfa_view *v)
{
    const int64_t shape[2] = {rows, cols};
    mxfa_view_nd nd;
    CHECK(mxfa_check_tensor(ctx, what, t, dtypes, 2, shape, is_output, &nd));
    v->base = nd.base;
    v->dtype = nd.dtype;
    v->rows = nd.shape[0];
    v->cols = nd.shape[1];
    v->rs = nd.stride[0];
    v->cs = nd.stride[1];
    v->memory = nd.memory;
    return MXFA_OK;
}

int mxfa_views_identical(const mxfa_view *a, const mxfa_view *b)
{
    return a->base == b->base && a->dtype == b->dtype && a->rows == b->rows && a->cols == b->cols &&
           (a->rows == 1 || a->rs == b->rs) && (a->cols == 1 || a->cs == b->cs);
}

/* The bytes [lo, hi) an N-D layout can touch. */
static void span_of(const void *base, mxfa_dtype dtype, int ndim, const int64_t *shape, const int64_t *stride,
                    uintptr_t *lo, uintptr_t *hi)
{
    int64_t last = 0;
    for (int i = 0; i < ndim; i++)
        last += (shape[i] - 1) * stride[i];
    *lo = (uintptr_t)base;
    *hi = *lo + (uintptr_t)((last + 1) * (int64_t)mxfa_dtype_size(dtype));
}

static void view_span(const mxfa_view *v, uintptr_t *lo, uintptr_t *hi)
{
    const int64_t shape[2] = {v->rows, v->cols}, stride[2] = {v->rs, v->cs};
    span_of(v->base, v->dtype, 2, shape, stride, lo, hi);
}

mxfa_status mxfa_check_disjoint(mxfa_ctx *ctx, const char *a_what, const mxfa_view *a,
                                const char *b_what, const mxfa_view *b)
{
    uintptr_t alo, ahi, blo, bhi;
    view_span(a, &alo, &ahi);
    view_span(b, &blo, &bhi);
    if (alo < bhi && blo < ahi)
        return mxfa_fail(ctx, MXFA_ERR_ALIAS, "%s and %s share memory", a_what, b_what);
    return MXFA_OK;
}

mxfa_status mxfa_check_cu_seqlens(mxfa_ctx *ctx, const int32_t *cu_seqlens, int batch,
                                  int64_t total)
{
    if (!cu_seqlens)
        return mxfa_fail(ctx, MXFA_ERR_NULL, "cu_seqlens is NULL");
    if (batch <= 0)
        return mxfa_fail(ctx, MXFA_ERR_SHAPE, "batch must be positive, got %d", batch);
    if (cu_seqlens[0] != 0)
        return mxfa_fail(ctx, MXFA_ERR_INVALID, "cu_seqlens[0] must be 0, got %d", (int)cu_seqlens[0]);
    for (int i = 0; i < batch; i++)
        if (cu_seqlens[i + 1] < cu_seqlens[i])
            return mxfa_fail(ctx, MXFA_ERR_INVALID,
                             "cu_seqlens must be non-decreasing: cu_seqlens[%d] = %d < cu_seqlens[%d] = %d",
                             i + 1, (int)cu_seqlens[i + 1], i, (int)cu_seqlens[i]);
    if (total >= 0 && cu_seqlens[batch] != total)
        return mxfa_fail(ctx, MXFA_ERR_SHAPE, "cu_seqlens[%d] = %d does not match the %lld tokens of the tensor",
                         batch, (int)cu_seqlens[batch], (long long)total);
    return MXFA_OK;
}

mxfa_status mxfa_check_tensor(mxfa_ctx *ctx, const char *what, const mxfa_tensor *t, unsigned dtypes, int ndim,
                              const int64_t *shape, int is_output, mxfa_view_nd *v)
{
    if (!t)
        return mxfa_fail(ctx, MXFA_ERR_NULL, "%s: tensor descriptor is NULL", what);
    if (!t->data)
        return mxfa_fail(ctx, MXFA_ERR_NULL, "%s: data pointer is NULL", what);
    if (!dtype_known(t->dtype) || !(dtypes & DT(t->dtype))) {
        char list[128] = "";
        size_t n = 0;
        for (int d = 0; d < MXFA_DTYPE_COUNT; d++)
            if (dtypes & DT(d))
                n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", n ? ", " : "",
                                      mxfa_dtype_name((mxfa_dtype)d));
        return mxfa_fail(ctx, MXFA_ERR_INVALID, "%s: dtype %s (%d) is not allowed here (allowed: %s)", what,
                         mxfa_dtype_name(t->dtype), (int)t->dtype, list);
    }
    mxfa_status st = mxfa_check_memory(ctx, what, t);
    if (st != MXFA_OK)
        return st;
    if (t->ndim != ndim)
        return mxfa_fail(ctx, MXFA_ERR_SHAPE, "%s: expected %d dimensions, got %d", what, ndim, t->ndim);
    int contiguous = 1;
    for (int i = 0; i < ndim; i++) {
        if (t->shape[i] <= 0)
            return mxfa_fail(ctx, MXFA_ERR_SHAPE, "%s: dimension %d has size %lld; sizes must be positive", what, i,
                             (long long)t->shape[i]);
        if (shape && shape[i] >= 0 && t->shape[i] != shape[i])
            return mxfa_fail(ctx, MXFA_ERR_SHAPE, "%s: dimension %d has size %lld, expected %lld", what, i,
                             (long long)t->shape[i], (long long)shape[i]);
        contiguous &= t->stride[i] == 0;
    }
    v->base = t->data;
    v->dtype = t->dtype;
    v->memory = t->memory;
    v->ndim = ndim;
    int64_t count = 1, last = 0, bytes;
    for (int i = ndim - 1; i >= 0; i--) {
        v->shape[i] = t->shape[i];
        v->stride[i] = contiguous ? count : t->stride[i];
        if (!mxfa_mul_ok(count, t->shape[i], &count))
            return mxfa_fail(ctx, MXFA_ERR_OVERFLOW, "%s: the element count overflows", what);
        if (v->stride[i] < 0 || (v->stride[i] == 0 && t->shape[i] > 1))
            return mxfa_fail(ctx, MXFA_ERR_INVALID, "%s: stride %d (%lld) must be positive", what, i,
                             (long long)v->stride[i]);
        int64_t ext;
        if (!mxfa_mul_ok(t->shape[i] - 1, v->stride[i], &ext) || !mxfa_add_ok(last, ext, &last))
            return mxfa_fail(ctx, MXFA_ERR_OVERFLOW, "%s: strides overflow", what);
    }
    if (!mxfa_add_ok(last, 1, &last) || !mxfa_mul_ok(last, (int64_t)mxfa_dtype_size(t->dtype), &bytes) ||
        (uint64_t)bytes > SIZE_MAX)
        return mxfa_fail(ctx, MXFA_ERR_OVERFLOW, "%s: the memory span overflows", what);
    if (is_output) {
        /* no two elements share memory: sorted by stride, each stride steps
         * over the whole extent of the smaller ones */
        int order[MXFA_MAX_DIMS];
        for (int i = 0; i < ndim; i++)
            order[i] = i;
        for (int i = 1; i < ndim; i++)
            for (int j = i; j > 0 && v->stride[order[j]] < v->stride[order[j - 1]]; j--) {
                int tmp = order[j];
                order[j] = order[j - 1];
                order[j - 1] = tmp;
            }
        int64_t span = 1;
        for (int i = 0; i < ndim; i++) {
            int d = order[i];
            if (v->shape[d] == 1)
                continue;
            if (v->stride[d] < span)
                return mxfa_fail(ctx, MXFA_ERR_ALIAS, "%s: its strides make elements overlap", what);
            if (!mxfa_mul_ok(v->stride[d], v->shape[d], &span))
                return mxfa_fail(ctx, MXFA_ERR_OVERFLOW, "%s: strides overflow", what);
        }
    }
    return MXFA_OK;
}

static void span_nd(const mxfa_view_nd *v, uintptr_t *lo, uintptr_t *hi)
{
    span_of(v->base, v->dtype, v->ndim, v->shape, v->stride, lo, hi);
}

mxfa_status mxfa_check_disjoint_nd(mxfa_ctx *ctx, const char *a_what, const mxfa_view_nd *a, const char *b_what,
                                   const mxfa_view_nd *b)
{
    uintptr_t alo, ahi, blo, bhi;
    span_nd(a, &alo, &ahi);
    span_nd(b, &blo, &bhi);
    if (alo < bhi && blo < ahi)
        return mxfa_fail(ctx, MXFA_ERR_ALIAS, "%s and %s share memory", a_what, b_what);
    return MXFA_OK;
}

mxfa_view mxfa_view_slice(const mxfa_view_nd *v, int d0, int d1, int64_t offset, int64_t rows, int64_t cols)
{
    mxfa_view s;
    s.base = (uint8_t *)v->base + (size_t)offset * mxfa_dtype_size(v->dtype);
    s.dtype = v->dtype;
    s.rows = rows;
    s.cols = cols;
    s.rs = v->stride[d0];
    s.cs = v->stride[d1];
    s.memory = v->memory;
    return s;
}
