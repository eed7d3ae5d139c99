/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A command's output files as one set: every output or none. Each file is
 * written beside its final name as a temporary (npy.h's), and the set is
 * renamed into place together at the end. A failure at any point leaves
 * none of them: the temporaries are removed and the files already renamed
 * are removed again.
 */
#ifndef MXFA_OUTSET_H
#define MXFA_OUTSET_H

#include <limits.h>
#include <stdio.h>

#include "npy.h"

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

enum { OUTSET_MAX = 8 };

typedef struct outset {
    int n; /* temporaries written and closed */
    char path[OUTSET_MAX][PATH_MAX], tmp[OUTSET_MAX][PATH_MAX + 16];
    char err[PATH_MAX + 256]; /* why the last call failed */
} outset;

/* Add an .npy file (the array written out now). 0, or -1 with err set and
 * nothing added. */
int outset_npy(outset *s, const char *path, npy_dtype dtype, int ndim, const int64_t *shape, const void *data);
/* Add a file the caller writes: a stream to its temporary (NULL with err
 * set), to be handed to outset_close. */
FILE *outset_open(outset *s, const char *path);
/* Close the stream of the newest file; 0, or -1 with err set and that file
 * dropped when anything failed to be written. */
int outset_close(outset *s, FILE *f);
/* Remove every temporary: nothing is written. */
void outset_discard(outset *s);
/* Rename every file into place: 0, or -1 with err set and no file of the
 * set left. */
int outset_commit(outset *s);

#endif
