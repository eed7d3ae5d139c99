/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Strict .npy (NumPy format 1.0, 2.0 and 3.0) reading, and atomic writing.
 * Little-endian, C order only. Not part of libmxfa's interface: the
 * command-line program and the tests link it.
 */
#ifndef MXFA_NPY_H
#define MXFA_NPY_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "mxfa.h"

#define NPY_MAX_DIMS 8

typedef enum npy_dtype {
    NPY_F32, /* '<f4' */
    NPY_F64, /* '<f8' */
    NPY_U8,  /* '|u1' */
    NPY_I32, /* '<i4' */
    NPY_I64, /* '<i8' */
    NPY_F16  /* '<f2' */
} npy_dtype;

typedef struct npy_array {
    npy_dtype dtype;
    int ndim;
    int64_t shape[NPY_MAX_DIMS];
    int64_t count; /* product of shape */
    void *data;    /* malloc'ed, count * npy_itemsize(dtype) bytes */
} npy_array;

size_t npy_itemsize(npy_dtype dtype);
const char *npy_descr(npy_dtype dtype);

/*
 * Parse a whole .npy image held in memory. On failure returns
 * MXFA_ERR_FORMAT (malformed, truncated, unsupported dtype, byte order or
 * Fortran order, shape that does not match the data), MXFA_ERR_OVERFLOW or
 * MXFA_ERR_NO_MEMORY, with a message in err; *a is untouched.
 */
mxfa_status npy_parse(const uint8_t *buf, size_t len, npy_array *a, char *err, size_t errlen);
/* Read and parse a file (MXFA_ERR_IO when it cannot be read). */
mxfa_status npy_read(const char *path, npy_array *a, char *err, size_t errlen);
void npy_free(npy_array *a);

/*
 * Turn a float64 or float16 array into float32 in place (a float32 array
 * is left as it is): float64 rounds to nearest, ties to even, as a C cast
 * and numpy's astype(float32) do in the default floating-point environment,
 * so magnitudes from 2^128 - 2^103 up become +-Inf, those between FLT_MAX
 * and that bound +-FLT_MAX, and those of 2^-150 and less +-0; float16 is
 * exact (every half is a float). NaN stays NaN. MXFA_ERR_INVALID for other
 * dtypes, MXFA_ERR_NO_MEMORY, with a message; *a untouched then.
 */
mxfa_status npy_to_f32(npy_array *a, char *err, size_t errlen);

/*
 * Atomic writing: npy_write_temp writes the array into a new temporary file
 * beside `path` and returns its name in tmp (tmplen bytes); npy_commit
 * renames it over `path`; npy_discard removes it. A failure leaves no file.
 */
mxfa_status npy_write_temp(const char *path, npy_dtype dtype, int ndim, const int64_t *shape,
                           const void *data, char *tmp, size_t tmplen, char *err, size_t errlen);
mxfa_status npy_commit(const char *tmp, const char *path, char *err, size_t errlen);
void npy_discard(const char *tmp);
/* The same for any file: npy_create_temp opens a new temporary beside
 * `path` (its name in tmp; NULL with a message on failure), npy_close_temp
 * flushes it to disk and closes it (removing it on any write error); then
 * npy_commit or npy_discard. */
FILE *npy_create_temp(const char *path, char *tmp, size_t tmplen, char *err, size_t errlen);
mxfa_status npy_close_temp(FILE *f, const char *tmp, const char *path, char *err, size_t errlen);

#endif
