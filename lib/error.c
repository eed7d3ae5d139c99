/* SPDX-License-Identifier: BSD-3-Clause */
/* Status strings and the per-context (or per-thread) last-error message. */
#include <stdio.h>

#include "internal.h"

static _Thread_local char thread_error[MXFA_ERRMSG_LEN];

MXFA_API const char *mxfa_strerror(mxfa_status status)
{
    switch (status) {
    case MXFA_OK: return "success";
    case MXFA_ERR_NULL: return "a required pointer is NULL";
    case MXFA_ERR_INVALID: return "invalid argument";
    case MXFA_ERR_SHAPE: return "invalid or mismatched shape";
    case MXFA_ERR_OVERFLOW: return "size overflows";
    case MXFA_ERR_UNSUPPORTED: return "not supported";
    case MXFA_ERR_ALIAS: return "an output overlaps another tensor";
    case MXFA_ERR_NO_BACKEND: return "backend not available";
    case MXFA_ERR_NO_MEMORY: return "out of memory";
    case MXFA_ERR_IO: return "input/output error";
    case MXFA_ERR_FORMAT: return "malformed file";
    case MXFA_ERR_NEEDS_SOURCE: return "needs the high-precision source data";
    case MXFA_ERR_DEVICE: return "GPU error";
    case MXFA_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

mxfa_status mxfa_fail(mxfa_ctx *ctx, mxfa_status status, const char *fmt, ...)
{
    char *buf = ctx ? ctx->error : thread_error;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, MXFA_ERRMSG_LEN, fmt, ap);
    va_end(ap);
    return status;
}

void mxfa_clear_error(mxfa_ctx *ctx)
{
    (ctx ? ctx->error : thread_error)[0] = '\0';
}

MXFA_API const char *mxfa_last_error(const mxfa_ctx *ctx)
{
    return ctx ? ctx->error : thread_error;
}
