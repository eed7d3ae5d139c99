/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The attention shapes of `mxfa bench` on a device (tools/bench_shapes.c):
 * the same as the baseline scripts' (bench/common.py's DEVICE_SHAPES, read
 * here, the plain causal mask being what those scripts call causal), so
 * that every rate has its cuDNN and flash counterpart; and the options
 * narrow them as the help says, checked against sets worked out by hand
 * from that list.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_shapes.h"
#include "tap.h"

/* The shapes of bench/common.py's DEVICE_SHAPES as "B,H,S,D" or "B,H,S,D,c"
 * strings into out[]; returns how many, or -1 where the file is not read. */
static int baseline_shapes(char out[][40], int max)
{
    const char *srcdir = getenv("MXFA_SRCDIR");
    char path[1024], line[1024];
    snprintf(path, sizeof path, "%s/bench/common.py", srcdir && *srcdir ? srcdir : "..");
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int n = -1;
    while (n < 0 && fgets(line, sizeof line, f)) {
        if (strncmp(line, "DEVICE_SHAPES = (", 17) != 0)
            continue;
        n = 0;
        for (char *p = strchr(line, '"'); p && n < max; p = strchr(p, '"')) {
            char *end = strchr(p + 1, '"');
            if (!end || end - p - 1 >= 40)
                break;
            memcpy(out[n], p + 1, (size_t)(end - p - 1));
            out[n++][end - p - 1] = '\0';
            p = end + 1;
        }
    }
    fclose(f);
    return n;
}

static void check_baselines(void)
{
    char want[16][40];
    const int n = baseline_shapes(want, 16);
    if (!ok(n > 0, "bench/common.py lists the baselines' device shapes (%d)", n))
        return;
    /* every shape of the bench is one of the baselines' (both causal masks
     * to their causal one), and every baseline shape is the bench's */
    int found[16] = {0}, missing = 0;
    for (int i = 0; i < BENCH_SHAPES; i++) {
        const attn_shape *s = &bench_shapes[i];
        char name[40];
        snprintf(name, sizeof name, "%lld,%lld,%lld,%lld%s", (long long)s->b, (long long)s->h, (long long)s->s,
                 (long long)s->d, s->causal == MXFA_CAUSAL_NONE ? "" : ",c");
        int hit = 0;
        for (int j = 0; j < n; j++)
            if (strcmp(name, want[j]) == 0)
                hit = found[j] = 1;
        if (!hit)
            diag("the bench's %s is no baseline shape", name), missing++;
    }
    for (int j = 0; j < n; j++)
        if (!found[j])
            diag("the baselines' %s is not the bench's", want[j]), missing++;
    ok(missing == 0, "the bench's %d shapes are the baselines' %d (the two causal masks as one)", BENCH_SHAPES, n);
}

/* What the options leave, as indices into bench_shapes: 0 4,16,4096,128;
 * 1 the same, causal; 2 the same, plain causal; 3 1,16,16384,128; 4
 * 8,16,2048,64; 5 2,16,8192,256. */
static void check_pick(const char *what, const int *dims, int ndims, int causal, int64_t seqlen, int64_t heads,
                       const int *want, int nwant)
{
    int got[BENCH_SHAPES];
    const int n = bench_shapes_pick(dims, ndims, causal, seqlen, heads, got);
    int same = n == nwant;
    for (int i = 0; same && i < n; i++)
        same = got[i] == want[i];
    if (!ok(same, "%s leaves %d shape%s", what, nwant, nwant == 1 ? "" : "s")) {
        diag("got %d:", n);
        for (int i = 0; i < n; i++)
            diag("  shape %d", got[i]);
    }
}

/* --shape's parser: the fields and the mask as written, and every text
 * that is not such a shape (a field missing, zero, past its limit, or
 * trailing text) refused. */
static void check_parse(void)
{
    attn_shape s;
    ok(bench_shape_parse("1,16,131072,128", &s) && s.b == 1 && s.h == 16 && s.s == 131072 && s.d == 128 &&
           s.causal == MXFA_CAUSAL_NONE,
       "--shape 1,16,131072,128: B 1, H 16, S 131072, D 128, no mask");
    ok(bench_shape_parse("2,3,5,64,c", &s) && s.b == 2 && s.h == 3 && s.s == 5 && s.d == 64 && s.causal == MXFA_CAUSAL,
       "--shape 2,3,5,64,c: the leak-free causal mask");
    ok(bench_shape_parse("1,1,1,32,cp", &s) && s.causal == MXFA_CAUSAL_PLAIN, "--shape 1,1,1,32,cp: the plain one");
    const char *bad[] = {"", "1,2,3", "1,2,3,", "0,1,1,64", "1,1,1,64,", "1,1,1,64,x", "1,1,1,64,cc", "-1,1,1,64",
                         "1,1,1,64 ", " 1,1,1,64", "1,+1,1,64", "65536,1,32768,64", "1,1024,1048576,2048",
                         "1,1,1,99999999999", "1,1,2147483649,64"};
    int refused = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const int got = bench_shape_parse(bad[i], &s);
        refused += !got;
        if (got)
            diag("taken: '%s'", bad[i]);
    }
    ok(refused == (int)(sizeof bad / sizeof bad[0]), "--shape refuses %d texts that are no shape (%d refused)",
       (int)(sizeof bad / sizeof bad[0]), refused);
}

int main(void)
{
    check_baselines();
    check_parse();
    const int all[] = {64, 128, 256}, d64[] = {64}, d128[] = {128}, d256[] = {256}, d64_256[] = {256, 64};
    check_pick("no option", all, 3, 1, 0, 0, (const int[]){0, 1, 2, 3, 4, 5}, 6);
    check_pick("--dims 128", d128, 1, 1, 0, 0, (const int[]){0, 1, 2, 3}, 4);
    check_pick("--dims 64", d64, 1, 1, 0, 0, (const int[]){4}, 1);
    check_pick("--dims 256", d256, 1, 1, 0, 0, (const int[]){5}, 1);
    check_pick("--dims 256,64", d64_256, 2, 1, 0, 0, (const int[]){4, 5}, 2);
    check_pick("--no-causal", all, 3, 0, 0, 0, (const int[]){0, 3, 4, 5}, 4);
    check_pick("--dims 128 --no-causal", d128, 1, 0, 0, 0, (const int[]){0, 3}, 2);
    check_pick("--seqlen 4096", all, 3, 1, 4096, 0, (const int[]){0, 1, 2}, 3);
    check_pick("--seqlen 4096 --no-causal", all, 3, 0, 4096, 0, (const int[]){0}, 1);
    check_pick("--seqlen 2048", all, 3, 1, 2048, 0, (const int[]){4}, 1);
    check_pick("--heads 16", all, 3, 1, 0, 16, (const int[]){0, 1, 2, 3, 4, 5}, 6);
    check_pick("--heads 4", all, 3, 1, 0, 4, NULL, 0);
    check_pick("--seqlen 16384 --dims 64", d64, 1, 1, 16384, 0, NULL, 0);
    check_pick("--seqlen 3000", all, 3, 1, 3000, 0, NULL, 0);
    return done_testing();
}
