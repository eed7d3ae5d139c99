/* SPDX-License-Identifier: BSD-3-Clause */
/* The kernels of one instruction set as the backend's table (cpu_kernels,
 * kern.h): built once per instruction set, as the kernels are. */
#include "kern_vec.h"

const cpu_kernels KERN_NAME = {
    .name = KERN_ISA,
    .dot = KERN_FN(dot),
    .combine = KERN_FN(combine),
    .fix = KERN_FN(fix),
    .lsb_bound = KERN_FN(lsb_bound),
    .row_max = KERN_FN(row_max),
    .softmax_p = KERN_FN(softmax_p),
    .encode = KERN_FN(encode),
    .decode_e4m3 = KERN_FN(decode_e4m3),
    .quantize_rows = KERN_FN(quantize_rows),
    .quantize_blocks = KERN_FN(quantize_blocks),
};
