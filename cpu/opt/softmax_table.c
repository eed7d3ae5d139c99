/* SPDX-License-Identifier: BSD-3-Clause */
/* The forward softmax's P for every f16 exponent h <= 0, looked up by the
 * vector kernels: the f16 exponential has no vector form as cheap as a
 * 128 KB table. */
#include <pthread.h>

#include "kern.h"

static float table[0x8000];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void)
{
    for (uint32_t i = 0; i < 0x8000u; i++) /* h = -|h|, its code 0x8000 | i */
        table[i] = 256.0f * mxfa_f16_to_f32(mxfa_exp2_f16((uint16_t)(0x8000u | i)));
}

const float *cpu_softmax_p_table(void)
{
    pthread_once(&table_once, build_table);
    return table;
}
