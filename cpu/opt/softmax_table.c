/* SPDX-License-Identifier: BSD-3-Clause */
/* The softmax's P for every f16 exponent h <= 0, looked up by the vector
 * kernels: the f16 exponential has no vector form as cheap as a 128 KB
 * table (one for the forward's P, 256 E, one for the backward's, E). */
#include <pthread.h>

#include "kern.h"

static float p_table[0x8000], e_table[0x8000];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void build_tables(void)
{
    for (uint32_t i = 0; i < 0x8000u; i++) { /* h = -|h|, its code 0x8000 | i */
        e_table[i] = mxfa_f16_to_f32(mxfa_exp2_f16((uint16_t)(0x8000u | i)));
        p_table[i] = 256.0f * e_table[i];
    }
}

const float *cpu_softmax_p_table(void)
{
    pthread_once(&tables_once, build_tables);
    return p_table;
}

const float *cpu_softmax_e_table(void)
{
    pthread_once(&tables_once, build_tables);
    return e_table;
}
