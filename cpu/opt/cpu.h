/* SPDX-License-Identifier: BSD-3-Clause */
/* The optimized CPU backend: OpenMP threads over the vector kernels. */
#ifndef MXFA_CPU_H
#define MXFA_CPU_H

#include "fx.h"
#include "ref.h"

/* Each thread of a parallel region computes in the default floating-point
 * environment (lib/internal.h): a team's threads keep the one they started
 * with, whatever the caller has set since, so every region sets it for its
 * own threads and restores it on the way out. */
#define CPU_FPENV_ENTER                                                                                               \
    fenv_t cpu_fpenv_saved_;                                                                                          \
    mxfa_fpenv_enter(&cpu_fpenv_saved_)
#define CPU_FPENV_LEAVE mxfa_fpenv_leave(&cpu_fpenv_saved_)

typedef struct cpu_state {
    const cpu_kernels *kern;
} cpu_state;

static inline const cpu_kernels *cpu_kern(const mxfa_ctx *ctx)
{
    return ((const cpu_state *)ctx->state)->kern;
}

/* The kernels for an instruction set name ("scalar", "avx2", "avx512"), or
 * NULL with a reason when this CPU cannot run them. */
const cpu_kernels *mxfa_cpu_pick(const char *isa, char *why, size_t why_len);

/* src quantized by the kernels to E4M3 codes [rows, cols] and compact
 * scales, both newly allocated; 0 when out of memory (nothing allocated). */
int mxfa_cpu_quantize_codes(const cpu_kernels *kern, const mxfa_view *src, mxfa_block block, mxfa_preset preset,
                            uint8_t **codes, uint8_t **scales);
mxfa_status mxfa_cpu_quantize(mxfa_ctx *ctx, const mxfa_view *x, const mxfa_segment *segs, int nsegs,
                              mxfa_preset preset, mxfa_block block, const mxfa_view *data, const mxfa_view *scales);
mxfa_status mxfa_cpu_dequantize(mxfa_ctx *ctx, const mxfa_view *data, const mxfa_view *scales, mxfa_block block,
                                const mxfa_view *out);
mxfa_status mxfa_cpu_gemm(mxfa_ctx *ctx, mxfa_model model, const mxfa_view *a, const mxfa_view *sa,
                          const mxfa_view *b, const mxfa_view *sb, const mxfa_view *c, const mxfa_view *d);
mxfa_status mxfa_cpu_mma_chain(mxfa_ctx *ctx, mxfa_instr instr, const mxfa_view *a, const mxfa_view *b,
                               const mxfa_view *c, const mxfa_view *d);
mxfa_status mxfa_cpu_attn_fwd(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_view_nd *q,
                              const mxfa_view_nd *k, const mxfa_view_nd *v, const int32_t *cu_q, const int32_t *cu_k,
                              int batch, const mxfa_view_nd *o, const mxfa_view_nd *lse);
mxfa_status mxfa_cpu_attn_bwd(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_view_nd *q,
                              const mxfa_view_nd *k, const mxfa_view_nd *v, const mxfa_view_nd *o,
                              const mxfa_view_nd *dout, const mxfa_view_nd *lse, const int32_t *cu_q,
                              const int32_t *cu_k, int batch, const mxfa_view_nd *dq, const mxfa_view_nd *dk,
                              const mxfa_view_nd *dv);

#endif
