/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fused truncated sum of tensor-core products, written once, with each
 * architecture's behaviour as a row of data (struct mma_step, struct
 * mma_model_def).
 *
 * One fused step adds a group of exact products and, where the architecture
 * does so, the accumulator: every term is aligned at the largest exponent
 * emax of the group's non-zero terms, truncated toward zero on the grid
 * 2^(emax - F), the truncated terms are summed exactly, and the sum is
 * normalized once and cut (toward zero) to the output width. A product's
 * exponent is the sum of its operands' exponents (not renormalized: its
 * significand lies in [0, 4)); a subnormal operand has the format's minimum
 * exponent and a significand below 1.
 */
#ifndef MXFA_REF_MMA_H
#define MXFA_REF_MMA_H

#include "ref.h"

#define MMA_EXACT (-1)

typedef enum mma_class { MMA_ZERO = 0, MMA_FINITE, MMA_INF, MMA_NAN } mma_class;

/* An exact value: (-1)^sign * sig * 2^exp, or a special. raw is the
 * exponent the hardware aligns by (the operand exponents' sum for a
 * product, the fp32 exponent for the accumulator). */
typedef struct mma_term {
    mma_class cls;
    int sign;
    mxfa_u128 sig;
    int exp;
    int raw;
} mma_term;

/* One decoded operand: (-1)^sign * sig * 2^(raw - frac_bits). */
typedef struct mma_operand {
    mma_class cls;
    int sign;
    uint32_t sig;
    int raw;
    int frac_bits;
} mma_operand;

/* One fused step: what one tensor-core instruction does with its products
 * and, when it is given one, the accumulator. */
/* The tensor cores' constants, named once: the rows of mma.c are built
 * from them, and the cpu backend's vector kernels (cpu/opt/kern_gemm.c) build
 * them into their code. */
#define MMA_EMAX_FLOOR (-133) /* a zero term's exponent in the alignment */
#define MMA_F_SM100 25        /* F of tcgen05.mma, both kinds */
#define MMA_F_SM90_FP8 13     /* F of wgmma's fp8 kinds */
#define MMA_F_SM90_BF16 25    /* F of wgmma's bf16 kind */

typedef struct mma_step {
    const char *name;
    int group;           /* products per step (the instruction's K) */
    int frac_bits;       /* F: the alignment grid is 2^(emax - F); MMA_EXACT: none */
    int sum_bits;        /* significant bits kept of the normalized sum, cut toward
                            zero; MMA_EXACT: the exact sum goes on to promotion */
    int overflow_inf;    /* a sum beyond FLT_MAX gives Inf (1) or FLT_MAX (0) */
    int emax_floor;      /* emax is at least this (zeros sit at this exponent) */
    int zero_positive;   /* every zero result is +0 (1), or IEEE's sign rules (0) */
} mma_step;

/* How a model applies the E8M0 block scales, which also says where the
 * accumulator goes. */
typedef enum mma_scaling {
    /* partial = step(products of a 32-block, no accumulator);
     * acc = RNE(acc + partial * 2^(sa+sb)) on the CUDA cores */
    MMA_SCALE_AT_PROMOTION,
    /* 2^(sa+sb) joins every product's exponent; the accumulator is a term
     * of every step */
    MMA_SCALE_IN_EXPONENT,
    /* operands widened to bf16 with their scales first; the accumulator is
     * a term of every step */
    MMA_SCALE_INTO_BF16
} mma_scaling;

typedef struct mma_model_def {
    const mma_step *step;
    mma_scaling scaling;
    /* the step used where bf16 operands are multiplied (sm90-bf16, and the
     * diagonal key blocks of leak-free causal attention) */
    const mma_step *bf16_step;
} mma_model_def;

extern const mma_step mxfa_step_sm90_wgmma_fp8;
extern const mma_step mxfa_step_sm90_wgmma_bf16;
/* The models, indexed by mxfa_model. */
extern const mma_model_def mxfa_mma_models[MXFA_MODEL_COUNT];

/* Decode an E4M3/E5M2 code or a bf16 value into an operand. */
mma_operand mxfa_mma_operand_fp8(const fp8_format *fmt, uint8_t code);
mma_operand mxfa_mma_operand_bf16(uint16_t h);

/* The exact product of two operands, with scale_exp added to its exponent. */
mma_term mxfa_mma_product(const mma_operand *a, const mma_operand *b, int scale_exp);

/* The accumulator as a term (its raw exponent is its fp32 exponent, -126
 * for subnormals). */
mma_term mxfa_mma_f32_term(uint32_t bits);

/*
 * One fused step over n terms (the products and, where the model says so,
 * the accumulator). Returns fp32 bits, or, when step->sum_bits is
 * MMA_EXACT, stores the exact sum in *exact_out (and returns 0).
 */
uint32_t mxfa_mma_fused(const mma_step *step, const mma_term *terms, int n, mma_term *exact_out);

/* acc + value * 2^scale_exp, rounded once to fp32 (nearest even): the
 * promotion of a partial sum on the CUDA cores (an fma with a power of two). */
uint32_t mxfa_mma_promote(const mma_term *value, int scale_exp, uint32_t acc);

/*
 * One block of up to 32 products a[k] * b[k] with their scale exponents
 * (a_nan, b_nan: the scale is NaN), accumulated into acc as the model does.
 */
uint32_t mxfa_mma_block(const mma_model_def *m, const mma_operand *a, int sa, int a_nan, const mma_operand *b,
                        int sb, int b_nan, int n, uint32_t acc);

/* An operand times 2^scale_exp widened to bf16, as the sm90-bf16 model and
 * the leak-free diagonal blocks feed the tensor cores: the exact value
 * rounded once to nearest even (exact unless beyond bf16's range); a NaN
 * scale gives NaN. */
mma_operand mxfa_mma_widen_bf16(const mma_operand *x, int scale_exp, int nan_scale);
/* The same as a bf16 code. */
uint16_t mxfa_mma_widen_bf16_code(const mma_operand *x, int scale_exp, int nan_scale);

/* n bf16 products accumulated into acc by the model's bf16 step. */
uint32_t mxfa_mma_bf16_steps(const mma_model_def *m, const mma_operand *a, const mma_operand *b, int n, uint32_t acc);

#define MMA_NAN_BITS 0x7FFFFFFFu /* the canonical NaN of the products */

#endif
