/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Backends built as modules: libmxfa opens the cuda backend with dlopen
 * when a context first asks for it, so that libmxfa itself links no CUDA
 * library and runs where there is none. The module exports one function,
 * MXFA_CUDA_MODULE_ENTRY, which checks that it was built from the same
 * source (the ABI number and the sizes of the shared structures) and
 * returns its backend.
 */
#ifndef MXFA_MODULE_H
#define MXFA_MODULE_H

#include "internal.h"

/* Raised whenever mxfa_ctx, mxfa_backend or mxfa_view change. */
#define MXFA_MODULE_ABI 3
#define MXFA_CUDA_MODULE_ENTRY "mxfa_cuda_module_entry"
#define MXFA_CUDA_MODULE_FILE "mxfa-cuda.so"

typedef struct mxfa_module_abi {
    int abi;
    int version; /* MXFA_VERSION_NUMBER */
    size_t ctx_size, backend_size, view_size;
} mxfa_module_abi;

#define MXFA_MODULE_ABI_HERE                                                                                           \
    {MXFA_MODULE_ABI, MXFA_VERSION_NUMBER, sizeof(mxfa_ctx), sizeof(mxfa_backend), sizeof(mxfa_view)}

/* The module's entry: its backend, or NULL with the reason in why. */
typedef const mxfa_backend *(*mxfa_module_entry_fn)(const mxfa_module_abi *abi, char *why, size_t why_len);

/* The cuda backend from its module (lib/module.c): NULL with the reason in
 * why when this build has none or the module cannot be loaded. The module
 * is looked up once per process: MXFA_CUDA_MODULE names its file, else
 * MXFA_MODULEDIR/mxfa-cuda.so. */
const mxfa_backend *mxfa_cuda_module(char *why, size_t why_len);

#endif
