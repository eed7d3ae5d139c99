/* SPDX-License-Identifier: BSD-3-Clause */
/* Loading the cuda backend's module (lib/module.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "module.h"

#ifdef MXFA_HAVE_CUDA
#include <dlfcn.h>
#include <pthread.h>

static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static const mxfa_backend *cuda_backend;
static char cuda_why[3 * 1024]; /* a path and dlerror()'s words, each cut at 1 KiB */

static void load_cuda(void)
{
    const char *env = getenv("MXFA_CUDA_MODULE");
    char path[4096];
    if (env && *env)
        snprintf(path, sizeof path, "%s", env);
    else
        snprintf(path, sizeof path, "%s/%s", MXFA_MODULEDIR, MXFA_CUDA_MODULE_FILE);
    /* RTLD_LOCAL: the module's CUDA runtime stays out of the caller's
     * symbol space; the module is never unloaded (CUDA's own threads and
     * handlers may outlive any close). */
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *err = dlerror();
        snprintf(cuda_why, sizeof cuda_why, "cannot load the cuda module %.1024s: %.1024s", path,
                 err ? err : "unknown error");
        return;
    }
    mxfa_module_entry_fn entry;
    void *sym = dlsym(handle, MXFA_CUDA_MODULE_ENTRY);
    memcpy(&entry, &sym, sizeof entry); /* object to function pointer, as POSIX allows */
    if (!sym) {
        snprintf(cuda_why, sizeof cuda_why, "%.1024s is not an mxfa cuda module (no %s)", path, MXFA_CUDA_MODULE_ENTRY);
        return;
    }
    const mxfa_module_abi abi = MXFA_MODULE_ABI_HERE;
    char why[MXFA_ERRMSG_LEN] = "";
    cuda_backend = entry(&abi, why, sizeof why);
    if (!cuda_backend)
        snprintf(cuda_why, sizeof cuda_why, "%.1024s: %s", path, why[0] ? why : "refused to load");
}

const mxfa_backend *mxfa_cuda_module(char *why, size_t why_len)
{
    pthread_once(&cuda_once, load_cuda);
    if (!cuda_backend && why && why_len)
        snprintf(why, why_len, "%s", cuda_why);
    return cuda_backend;
}

#else

const mxfa_backend *mxfa_cuda_module(char *why, size_t why_len)
{
    if (why && why_len)
        snprintf(why, why_len, "not built into this version of libmxfa (configure --with-cuda)");
    return NULL;
}

#endif
