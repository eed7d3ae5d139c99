/* SPDX-License-Identifier: BSD-3-Clause */
/* Reads tests/data/contract_e4m3.txt (the published contract vectors). */
#ifndef MXFA_CONTRACT_H
#define MXFA_CONTRACT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct contract_vec {
    char name[32];
    unsigned first, rest; /* fp32 bits */
    uint8_t scale[4], elem0[4], elem_rest[4]; /* rceil, ocp, torchao-rceil, microxcaling */
} contract_vec;

/* Returns the number of vectors read (0 on failure, with a message). */
static int contract_load(contract_vec *v, int max) __attribute__((unused));
static int contract_load(contract_vec *v, int max)
{
    const char *srcdir = getenv("MXFA_SRCDIR");
    char path[1024], line[512];
    snprintf(path, sizeof path, "%s/tests/data/contract_e4m3.txt", srcdir && *srcdir ? srcdir : "..");
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("# cannot open %s\n", path);
        return 0;
    }
    int n = 0;
    while (n < max && fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        unsigned b[12];
        contract_vec *c = &v[n];
        if (sscanf(line, "%31s %x %x | %x %x %x %x | %x %x %x %x | %x %x %x %x", c->name, &c->first, &c->rest, &b[0],
                   &b[1], &b[2], &b[3], &b[4], &b[5], &b[6], &b[7], &b[8], &b[9], &b[10], &b[11]) != 15) {
            printf("# %s: cannot parse: %s", path, line);
            fclose(f);
            return 0;
        }
        for (int p = 0; p < 4; p++) {
            c->scale[p] = (uint8_t)b[p];
            c->elem0[p] = (uint8_t)b[4 + p];
            c->elem_rest[p] = (uint8_t)b[8 + p];
        }
        n++;
    }
    fclose(f);
    return n;
}

#endif
