/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A fuzz target's kept inputs run through the target itself, built with the
 * normal compiler: the inputs that once found bugs, named for what they
 * found (tests/fuzz/FUZZ_TARGET/, where the target has any), and the
 * corpus that covers the target's paths (tests/fuzz/FUZZ_TARGET.tar.gz,
 * which `make check` unpacks into the build tree's tests/fuzz-corpus/
 * before the tests run). The target aborts on any violated check, so a
 * regression fails the test.
 */
#include <dirent.h>
#include <errno.h>

#include "tap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_INPUTS = 4096 };

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The paths of dir's files into paths[*n ...], sorted by name. A missing
 * directory is no error where `optional`. */
static int list(const char *dir, int optional, char **paths, int *n)
{
    DIR *d = opendir(dir);
    if (!d) {
        if (optional && errno == ENOENT)
            return 1;
        printf("Bail out! %s: %s\n", dir, strerror(errno));
        return 0;
    }
    const int first = *n;
    struct dirent *e;
    while ((e = readdir(d)) && *n < MAX_INPUTS)
        if (e->d_name[0] != '.') {
            const size_t len = strlen(dir) + strlen(e->d_name) + 2;
            if (!(paths[*n] = malloc(len)))
                break;
            snprintf(paths[(*n)++], len, "%s/%s", dir, e->d_name);
        }
    closedir(d);
    qsort(paths + first, (size_t)(*n - first), sizeof paths[0], by_name);
    return 1;
}

int main(void)
{
    const char *src = getenv("MXFA_SRCDIR"), *build = getenv("MXFA_BUILDDIR");
    char named[1024], corpus[1024];
    snprintf(named, sizeof named, "%s/tests/fuzz/%s", src && *src ? src : "..", FUZZ_TARGET);
    snprintf(corpus, sizeof corpus, "%s/tests/fuzz-corpus/%s", build && *build ? build : "..", FUZZ_TARGET);
    static char *paths[MAX_INPUTS];
    int n = 0;
    if (!list(named, 1, paths, &n))
        return 1;
    const int n_named = n;
    if (!list(corpus, 0, paths, &n))
        return 1;
    ok(n - n_named > 0, "%d inputs of the %s target's corpus, and %d named ones", n - n_named, FUZZ_TARGET, n_named);
    size_t bytes = 0;
    for (int i = 0; i < n; i++) {
        FILE *f = fopen(paths[i], "rb");
        uint8_t *buf = NULL;
        size_t len = 0;
        if (f) {
            fseek(f, 0, SEEK_END);
            long sz = ftell(f);
            fseek(f, 0, SEEK_SET);
            buf = malloc(sz > 0 ? (size_t)sz : 1);
            len = buf && sz > 0 ? fread(buf, 1, (size_t)sz, f) : 0;
            fclose(f);
        }
        if (!buf) {
            ok(0, "%s: readable", paths[i]);
            continue;
        }
        LLVMFuzzerTestOneInput(buf, len); /* aborts on a violated check */
        bytes += len;
        free(buf);
        free(paths[i]);
    }
    ok(1, "all %d inputs (%zu bytes) passed through the target's checks", n, bytes);
    return done_testing();
}
