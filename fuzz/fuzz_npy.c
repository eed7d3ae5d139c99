/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The .npy reader on arbitrary bytes: it must accept or refuse without
 * reading past the buffer, leaking, or overflowing a size, and what it
 * accepts must write back and read again to the same array.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    npy_array a;
    char err[512];
    if (npy_parse(data, size, &a, err, sizeof err) != MXFA_OK)
        return 0;
    if (a.count > (1 << 20)) { /* accepted but large: no round trip */
        npy_free(&a);
        return 0;
    }
    char path[] = "/tmp/fuzz-npy.XXXXXX", tmp[600];
    int fd = mkstemp(path);
    if (fd < 0)
        abort();
    close(fd);
    npy_array b;
    if (npy_write_temp(path, a.dtype, a.ndim, a.shape, a.data, tmp, sizeof tmp, err, sizeof err) != MXFA_OK ||
        npy_commit(tmp, path, err, sizeof err) != MXFA_OK || npy_read(path, &b, err, sizeof err) != MXFA_OK) {
        fprintf(stderr, "fuzz_npy: an accepted array does not round-trip: %s\n", err);
        abort();
    }
    unlink(path);
    if (b.dtype != a.dtype || b.ndim != a.ndim || b.count != a.count ||
        memcmp(b.shape, a.shape, sizeof a.shape[0] * (size_t)a.ndim) ||
        memcmp(b.data, a.data, (size_t)a.count * npy_itemsize(a.dtype))) {
        fprintf(stderr, "fuzz_npy: the array read back differs\n");
        abort();
    }
    npy_free(&a);
    npy_free(&b);
    return 0;
}
