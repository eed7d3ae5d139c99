/* SPDX-License-Identifier: BSD-3-Clause */
/* Contexts and the backend registry. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "module.h"

MXFA_API const char *mxfa_version(void)
{
    return MXFA_VERSION_STRING;
}

MXFA_API int mxfa_version_number(void)
{
    return MXFA_VERSION_NUMBER;
}

/* The backends compiled into this library ("auto" prefers cuda, then cpu,
 * then ref). */
static const mxfa_backend *const built_backends[] = {
    &mxfa_backend_ref,
    &mxfa_backend_cpu,
};

static const char *const known_names[] = {"ref", "cpu", "cuda"};

/* The backend of that name, or NULL (with the reason in why when the name is
 * cuda's: its module may be missing or refuse to load). */
static const mxfa_backend *find_backend_why(const char *name, char *why, size_t why_len)
{
    for (size_t i = 0; i < sizeof built_backends / sizeof built_backends[0]; i++)
        if (strcmp(built_backends[i]->name, name) == 0)
            return built_backends[i];
    if (strcmp(name, "cuda") == 0)
        return mxfa_cuda_module(why, why_len);
    return NULL;
}

static const mxfa_backend *find_backend(const char *name)
{
    return find_backend_why(name, NULL, 0);
}

static int known_name(const char *name)
{
    for (size_t i = 0; i < sizeof known_names / sizeof known_names[0]; i++)
        if (strcmp(known_names[i], name) == 0)
            return 1;
    return 0;
}

MXFA_API int mxfa_backend_built(const char *name)
{
    return name && find_backend(name) != NULL;
}

MXFA_API int mxfa_backend_usable(const char *name, char *why, size_t why_len)
{
    const char *reason = NULL;
    char buf[MXFA_ERRMSG_LEN] = "";
    const mxfa_backend *be = name ? find_backend_why(name, buf, sizeof buf) : NULL;
    if (!name)
        reason = "no backend name given";
    else if (!known_name(name))
        reason = "no such backend (known: ref, cpu, cuda)";
    else if (!be)
        reason = buf[0] ? buf : "not built into this version of libmxfa";
    else if (be->usable && !be->usable(buf, sizeof buf))
        reason = buf;
    if (!reason)
        return 1;
    if (why && why_len > 0) {
        strncpy(why, reason, why_len - 1);
        why[why_len - 1] = '\0';
    }
    return 0;
}

MXFA_API mxfa_status mxfa_open(mxfa_ctx **ctx, const char *backend)
{
    mxfa_clear_error(NULL);
    if (!ctx)
        return mxfa_fail(NULL, MXFA_ERR_NULL, "mxfa_open: ctx is NULL");
    const char *name = backend ? backend : "auto";
    const char *env = getenv("MXFA_BACKEND");
    int from_env = env && *env;
    if (from_env)
        name = env;
    const mxfa_backend *be = NULL;
    if (strcmp(name, "auto") == 0) {
        /* cuda joins this list once it does every operation; until then
         * it is opened by name only */
        static const char *const order[] = {"cpu", "ref"};
        for (size_t i = 0; i < 2 && !be; i++)
            if (mxfa_backend_usable(order[i], NULL, 0))
                be = find_backend(order[i]);
    } else {
        char why[MXFA_ERRMSG_LEN];
        if (!mxfa_backend_usable(name, why, sizeof why))
            return mxfa_fail(NULL, known_name(name) ? MXFA_ERR_NO_BACKEND : MXFA_ERR_INVALID,
                             "backend '%s'%s: %s", name,
                             from_env ? " (from MXFA_BACKEND)" : "", why);
        be = find_backend(name);
    }
    if (!be)
        return mxfa_fail(NULL, MXFA_ERR_INTERNAL, "mxfa_open: no usable backend");
    mxfa_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return mxfa_fail(NULL, MXFA_ERR_NO_MEMORY, "mxfa_open: cannot allocate a context");
    c->backend = be;
    if (be->open) {
        mxfa_status st = be->open(c);
        if (st != MXFA_OK) {
            mxfa_fail(NULL, st, "backend '%s': %s", be->name, c->error);
            free(c);
            return st;
        }
    }
    *ctx = c;
    return MXFA_OK;
}

MXFA_API void mxfa_close(mxfa_ctx *ctx)
{
    if (!ctx)
        return;
    if (ctx->backend->close)
        ctx->backend->close(ctx);
    free(ctx);
}

MXFA_API const char *mxfa_backend_name(const mxfa_ctx *ctx)
{
    return ctx ? ctx->backend->name : "";
}
