/* SPDX-License-Identifier: BSD-3-Clause */
/* Reads tests/data/mma_hand.txt: single-instruction cases with results
 * worked out by hand (the derivations are in the file). */
#ifndef MXFA_MMA_HAND_H
#define MXFA_MMA_HAND_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HAND_KMAX 32

typedef struct hand_case {
    char instr[16], name[48];
    unsigned a[HAND_KMAX], b[HAND_KMAX]; /* element codes, zero-padded */
    uint32_t c, d;
} hand_case;

static __attribute__((unused)) int hand_codes(const char *tok, const char *key, unsigned *out)
{
    size_t kl = strlen(key);
    if (strncmp(tok, key, kl) != 0)
        return 0;
    memset(out, 0, HAND_KMAX * sizeof *out);
    const char *p = tok + kl;
    for (int i = 0; i < HAND_KMAX && *p; i++) {
        char *end;
        out[i] = (unsigned)strtoul(p, &end, 16);
        if (end == p)
            return 0;
        p = *end == ',' ? end + 1 : end;
    }
    return *p == '\0';
}

/* Load the cases from path; returns how many (0 with a message on error). */
static int __attribute__((unused)) hand_load(const char *path, hand_case *cases, int max)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("# cannot open %s\n", path);
        return 0;
    }
    char line[1024], ta[512], tb[256], tc[32], td[32];
    int n = 0;
    while (n < max && fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        hand_case *h = &cases[n];
        if (sscanf(line, "%15s %47s %511s %255s %31s %31s", h->instr, h->name, ta, tb, tc, td) != 6 ||
            !hand_codes(ta, "a=", h->a) || !hand_codes(tb, "b=", h->b) || strncmp(tc, "c=", 2) != 0 ||
            strncmp(td, "d=", 2) != 0) {
            printf("# %s: cannot parse: %s", path, line);
            fclose(f);
            return 0;
        }
        h->c = (uint32_t)strtoul(tc + 2, NULL, 16);
        h->d = (uint32_t)strtoul(td + 2, NULL, 16);
        n++;
    }
    fclose(f);
    return n;
}

#endif
