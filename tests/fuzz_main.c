/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A fuzz target's kept inputs (tests/fuzz/FUZZ_TARGET/: inputs that once
 * found bugs, and a small corpus covering the target's paths) run through
 * the target itself, built with the normal compiler. The target aborts on
 * any violated check, so a regression fails the test.
 */
#include <dirent.h>

#include "tap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(void)
{
    const char *src = getenv("MXFA_SRCDIR");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/%s", src && *src ? src : "..", FUZZ_TARGET);
    DIR *d = opendir(dir);
    if (!d) {
        printf("Bail out! %s: no such directory\n", dir);
        return 1;
    }
    char *names[4096];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 4096)
        if (e->d_name[0] != '.')
            names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], by_name);
    ok(n > 0, "%d kept inputs for the %s target", n, FUZZ_TARGET);
    size_t bytes = 0;
    for (int i = 0; i < n; i++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "rb");
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
            ok(0, "%s: readable", names[i]);
            continue;
        }
        LLVMFuzzerTestOneInput(buf, len); /* aborts on a violated check */
        bytes += len;
        free(buf);
        free(names[i]);
    }
    ok(1, "all %d inputs (%zu bytes) passed through the target's checks", n, bytes);
    return done_testing();
}
