/* SPDX-License-Identifier: BSD-3-Clause */
/* Device memory and streams through the context's backend (mxfa.h). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

MXFA_API mxfa_status mxfa_set_stream(mxfa_ctx *ctx, void *stream)
{
    if (!ctx)
        return mxfa_fail(NULL, MXFA_ERR_NULL, "mxfa_set_stream: ctx is NULL");
    mxfa_clear_error(ctx);
    ctx->stream = stream;
    return MXFA_OK;
}

MXFA_API void *mxfa_get_stream(const mxfa_ctx *ctx)
{
    return ctx ? ctx->stream : NULL;
}

MXFA_API mxfa_status mxfa_device_alloc(mxfa_ctx *ctx, size_t bytes, void **ptr)
{
    if (!ctx)
        return mxfa_fail(NULL, MXFA_ERR_NULL, "mxfa_device_alloc: ctx is NULL");
    mxfa_clear_error(ctx);
    if (!ptr)
        return mxfa_fail(ctx, MXFA_ERR_NULL, "mxfa_device_alloc: ptr is NULL");
    if (bytes == 0)
        return mxfa_fail(ctx, MXFA_ERR_SHAPE, "mxfa_device_alloc: zero bytes");
    if (!ctx->backend->device_alloc)
        return mxfa_fail(ctx, MXFA_ERR_UNSUPPORTED, "mxfa_device_alloc: the '%s' backend has no device memory",
                         ctx->backend->name);
    return ctx->backend->device_alloc(ctx, bytes, ptr);
}

MXFA_API mxfa_status mxfa_device_free(mxfa_ctx *ctx, void *ptr)
{
    if (!ctx)
        return mxfa_fail(NULL, MXFA_ERR_NULL, "mxfa_device_free: ctx is NULL");
    mxfa_clear_error(ctx);
    if (!ptr)
        return MXFA_OK;
    if (!ctx->backend->device_free)
        return mxfa_fail(ctx, MXFA_ERR_UNSUPPORTED, "mxfa_device_free: the '%s' backend has no device memory",
                         ctx->backend->name);
    return ctx->backend->device_free(ctx, ptr);
}

MXFA_API mxfa_status mxfa_memcpy(mxfa_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    if (!ctx)
        return mxfa_fail(NULL, MXFA_ERR_NULL, "mxfa_memcpy: ctx is NULL");
    mxfa_clear_error(ctx);
    if (bytes == 0)
        return MXFA_OK;
    if (!dst || !src)
        return mxfa_fail(ctx, MXFA_ERR_NULL, "mxfa_memcpy: %s is NULL", dst ? "src" : "dst");
    uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
    if (d < s + bytes && s < d + bytes)
        return mxfa_fail(ctx, MXFA_ERR_ALIAS, "mxfa_memcpy: dst and src overlap");
    if (!ctx->backend->copy_bytes) {
        memcpy(dst, src, bytes);
        return MXFA_OK;
    }
    return ctx->backend->copy_bytes(ctx, dst, src, bytes);
}

MXFA_API mxfa_status mxfa_synchronize(mxfa_ctx *ctx)
{
    if (!ctx)
        return mxfa_fail(NULL, MXFA_ERR_NULL, "mxfa_synchronize: ctx is NULL");
    mxfa_clear_error(ctx);
    return ctx->backend->synchronize ? ctx->backend->synchronize(ctx) : MXFA_OK;
}

MXFA_API mxfa_status mxfa_scratch_peak(mxfa_ctx *ctx, size_t *bytes, int reset)
{
    if (!ctx)
        return mxfa_fail(NULL, MXFA_ERR_NULL, "mxfa_scratch_peak: ctx is NULL");
    mxfa_clear_error(ctx);
    if (!bytes)
        return mxfa_fail(ctx, MXFA_ERR_NULL, "mxfa_scratch_peak: bytes is NULL");
    if (!ctx->backend->scratch_peak)
        return mxfa_fail(ctx, MXFA_ERR_UNSUPPORTED, "mxfa_scratch_peak: the %s backend has no device scratch memory",
                         mxfa_backend_name(ctx));
    return ctx->backend->scratch_peak(ctx, bytes, reset);
}

MXFA_API mxfa_status mxfa_device_info(mxfa_ctx *ctx, int *arch, char *name, size_t name_len)
{
    if (!ctx)
        return mxfa_fail(NULL, MXFA_ERR_NULL, "mxfa_device_info: ctx is NULL");
    mxfa_clear_error(ctx);
    if (ctx->backend->device_info)
        return ctx->backend->device_info(ctx, arch, name, name_len);
    if (arch)
        *arch = 0;
    if (name && name_len > 0)
        snprintf(name, name_len, "cpu");
    return MXFA_OK;
}
