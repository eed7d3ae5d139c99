/* SPDX-License-Identifier: BSD-3-Clause */
/* Output files written as a set (outset.h). */
#include <stdio.h>
#include <string.h>

#include "outset.h"

static int full(outset *s, const char *path)
{
    if (s->n < OUTSET_MAX)
        return 0;
    snprintf(s->err, sizeof s->err, "%s: more than %d output files", path, OUTSET_MAX);
    return 1;
}

int outset_npy(outset *s, const char *path, npy_dtype dtype, int ndim, const int64_t *shape, const void *data)
{
    if (full(s, path))
        return -1;
    if (npy_write_temp(path, dtype, ndim, shape, data, s->tmp[s->n], sizeof s->tmp[s->n], s->err, sizeof s->err) !=
        MXFA_OK)
        return -1;
    snprintf(s->path[s->n], sizeof s->path[s->n], "%s", path);
    s->n++;
    return 0;
}

FILE *outset_open(outset *s, const char *path)
{
    if (full(s, path))
        return NULL;
    if (strlen(path) >= sizeof s->path[s->n]) {
        snprintf(s->err, sizeof s->err, "%.64s...: path too long", path);
        return NULL;
    }
    FILE *f = npy_create_temp(path, s->tmp[s->n], sizeof s->tmp[s->n], s->err, sizeof s->err);
    if (f)
        snprintf(s->path[s->n++], sizeof s->path[0], "%s", path);
    return f;
}

int outset_close(outset *s, FILE *f)
{
    const int i = s->n - 1;
    if (npy_close_temp(f, s->tmp[i], s->path[i], s->err, sizeof s->err) == MXFA_OK)
        return 0;
    s->n--; /* npy_close_temp removed the temporary */
    return -1;
}

void outset_discard(outset *s)
{
    for (int i = 0; i < s->n; i++)
        npy_discard(s->tmp[i]);
    s->n = 0;
}

int outset_commit(outset *s)
{
    for (int i = 0; i < s->n; i++)
        if (npy_commit(s->tmp[i], s->path[i], s->err, sizeof s->err) != MXFA_OK) {
            /* the failed temporary is gone: undo the renamed files, drop the rest */
            for (int j = 0; j < i; j++)
                remove(s->path[j]);
            for (int j = i + 1; j < s->n; j++)
                npy_discard(s->tmp[j]);
            s->n = 0;
            return -1;
        }
    s->n = 0;
    return 0;
}
