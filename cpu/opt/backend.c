/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The cpu backend's entry in the registry, and the choice of instruction
 * set: the best this CPU has, or the one MXFA_CPU_ISA names (scalar, avx2,
 * avx512), which must then be runnable here. Every instruction set gives
 * the same bits; the variable exists so that tests can run each in turn.
 */
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "cpu.h"

#ifdef MXFA_HAVE_X86_KERNELS
static int have_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

static int have_avx512(void)
{
    __builtin_cpu_init();
    return have_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}
#else
static int have_avx2(void) { return 0; }
static int have_avx512(void) { return 0; }
#define mxfa_kern_avx2 mxfa_kern_scalar /* never chosen: have_avx2() is 0 */
#define mxfa_kern_avx512 mxfa_kern_scalar
#endif

const cpu_kernels *mxfa_cpu_pick(const char *isa, char *why, size_t why_len)
{
    if (!isa || !*isa)
        return have_avx512() ? &mxfa_kern_avx512 : have_avx2() ? &mxfa_kern_avx2 : &mxfa_kern_scalar;
    if (strcmp(isa, "scalar") == 0)
        return &mxfa_kern_scalar;
    if (strcmp(isa, "avx2") == 0 || strcmp(isa, "avx512") == 0) {
        int avx512 = isa[3] == '5';
        if (avx512 ? have_avx512() : have_avx2())
            return avx512 ? &mxfa_kern_avx512 : &mxfa_kern_avx2;
        snprintf(why, why_len, "MXFA_CPU_ISA=%s, but this CPU lacks %s", isa,
                 avx512 ? "AVX-512 (F, BW, DQ, VL)" : "AVX2 and FMA");
        return NULL;
    }
    snprintf(why, why_len, "MXFA_CPU_ISA=%s is not one of scalar, avx2, avx512", isa);
    return NULL;
}

static int cpu_usable(char *why, size_t why_len)
{
    return mxfa_cpu_pick(getenv("MXFA_CPU_ISA"), why, why_len) != NULL;
}

static mxfa_status cpu_open(mxfa_ctx *ctx)
{
    char why[256];
    const cpu_kernels *k = mxfa_cpu_pick(getenv("MXFA_CPU_ISA"), why, sizeof why);
    if (!k)
        return mxfa_fail(ctx, MXFA_ERR_NO_BACKEND, "%s", why);
    cpu_state *s = calloc(1, sizeof *s);
    if (!s)
        return mxfa_fail(ctx, MXFA_ERR_NO_MEMORY, "cpu backend: out of memory");
    s->kern = k;
    ctx->state = s;
    return MXFA_OK;
}

static void cpu_close(mxfa_ctx *ctx)
{
    free(ctx->state);
    ctx->state = NULL;
}

extern const mxfa_backend mxfa_backend_cpu;

MXFA_API const char *mxfa_cpu_isa(const mxfa_ctx *ctx)
{
    return ctx && ctx->backend == &mxfa_backend_cpu ? cpu_kern(ctx)->name : NULL;
}

/* Byte permutations of scale matrices are memory-bound and small next to
 * the data they describe: the cpu backend runs the reference loops. */
const mxfa_backend mxfa_backend_cpu = {
    .name = "cpu",
    .usable = cpu_usable,
    .takes_device_memory = 0,
    .open = cpu_open,
    .close = cpu_close,
    .quantize = mxfa_cpu_quantize,
    .dequantize = mxfa_cpu_dequantize,
    .copy = mxfa_ref_copy,
    .expand = mxfa_ref_expand,
    .swizzle = mxfa_ref_swizzle,
    .unswizzle = mxfa_ref_unswizzle,
    .gemm = mxfa_cpu_gemm,
    .mma_chain = mxfa_cpu_mma_chain,
    .attn_fwd = mxfa_cpu_attn_fwd,
    .attn_bwd = mxfa_cpu_attn_bwd,
};
