/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The instructions that the sm100 attention forward kernels issue for
 * O += P V over one key tile (gpu/sm100/attn_fwd_single.cuh,
 * attn_fwd_pingpong.cuh), as a plan that the kernels follow step by step
 * and tests/t-tcgen05-plan.c walks. Plain C, also compiled by nvcc.
 *
 * Why a plan: the PTX ISA (section "Pipelined tcgen05 instructions")
 * executes two tcgen05.mma of one thread in issue order only when they have
 * the same accumulator and the same shape. Under the leak-free causal mask
 * a key tile can mix both kinds on O: a block that some row of the query
 * tile sees only in part is two kind::f16 k16 steps (P / 256 and V in
 * bf16), every other block one kind::mxf8f6f4 .block_scale k32 step. The
 * reference chains them in key order, each step reading the sum the one
 * before left in O, and that read is not ordered across a change of kind.
 * So wherever the kind changes with no completed commit between the two
 * steps, the plan puts an ORDER: a commit of every step issued so far to an
 * mbarrier, and a wait on it.
 */
#ifndef MXFA_GPU_SM100_PV_PLAN_H
#define MXFA_GPU_SM100_PV_PLAN_H

#include <stdint.h>

#ifdef __CUDACC__
#define MXFA_PV_FN static __host__ __device__ __forceinline__
#else
#define MXFA_PV_FN static inline
#endif

/* The plan's operations, four bits each, the first in the lowest bits of
 * the plan word; 0 ends it. The blocks come in key order, one MXF8 or F16
 * operation each. */
enum {
    MXFA_PV_END = 0,
    MXFA_PV_MXF8 = 1,  /* the next block: one kind::mxf8f6f4 .block_scale k32 step */
    MXFA_PV_F16 = 2,   /* the next block in bf16: two kind::f16 k16 steps */
    MXFA_PV_ORDER = 3, /* commit every step issued so far to an mbarrier, and wait for it */
    MXFA_PV_BLOCK = 4  /* the slow path: commit to o_block and wait until the rows have read O (o_read) */
};
#define MXFA_PV_OP_BITS 4
#define MXFA_PV_MAX_BLOCKS 5 /* 3 operations a block at most: 15 fit a 64-bit plan */

/*
 * The blocks of key tile j (of `bn` keys, `bn` / 32 blocks) that the
 * leak-free mask takes in bf16, bit b for block b: those that some row of
 * the query tile sees only in part. Rows see keys up to their limit
 * (bottom-right aligned: the first row's limit lim_first, the last row's
 * lim_last); nt is the query tile's count of key tiles, lk the keys of the
 * sequence. A block some rows see whole and others not at all is such a
 * block too.
 */
MXFA_PV_FN unsigned mxfa_pv_diagonal_blocks(int64_t lim_first, int64_t lim_last, int nt, int64_t lk, int j, int bn)
{
    unsigned bits = 0;
    for (int bk = 0; bk < bn / 32 && j < nt; bk++) {
        const int64_t kb0 = (int64_t)j * bn + 32 * bk, klast = kb0 + 31 < lk - 1 ? kb0 + 31 : lk - 1;
        if (kb0 < lk && lim_first < klast && lim_last >= kb0)
            bits |= 1u << bk;
    }
    return bits;
}

/*
 * The plan of O += P V for `nblocks` blocks of 32 keys (at most
 * MXFA_PV_MAX_BLOCKS), bit b of `bf16_blocks` set for a block taken in
 * bf16, `by_block` for the slow path (the rows read O after every block).
 * It assumes what both kernels ensure before a key tile's P V: every step
 * on O issued before has completed (the thread waited on a commit that
 * covers it: p_full and o_ready wait for o_done). ORDER comes exactly where
 * the kind changes since the last completed commit.
 */
MXFA_PV_FN uint64_t mxfa_pv_plan(unsigned bf16_blocks, int nblocks, int by_block)
{
    uint64_t plan = 0;
    int at = 0, last = MXFA_PV_END; /* the kind of the steps issued since the last completed commit */
    for (int b = 0; b < nblocks; b++) {
        const int kind = bf16_blocks >> b & 1u ? MXFA_PV_F16 : MXFA_PV_MXF8;
        if (last != MXFA_PV_END && last != kind)
            plan |= (uint64_t)MXFA_PV_ORDER << at, at += MXFA_PV_OP_BITS;
        plan |= (uint64_t)kind << at, at += MXFA_PV_OP_BITS;
        last = kind;
        if (by_block) {
            plan |= (uint64_t)MXFA_PV_BLOCK << at, at += MXFA_PV_OP_BITS;
            last = MXFA_PV_END;
        }
    }
    return plan;
}

#endif
