/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mxfa: MXFP8 block-scaled attention, with a bit-exact CPU emulator as the
 * reference that every backend reproduces.
 *
 * Conventions of the whole API
 * - Every function that can fail returns an mxfa_status. MXFA_OK is 0.
 * - On failure nothing is written to the caller's outputs, and
 *   mxfa_last_error(ctx) says what was wrong in words.
 * - Sizes and strides are int64_t counts of elements (not bytes).
 * - A context is used by one thread at a time; distinct contexts are
 *   independent.
 * - The numerics contract of each operation is in docs/NUMERICS.md.
 */
#ifndef MXFA_H
#define MXFA_H

#include <stddef.h>
#include <stdint.h>

#include "mxfa_version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The one export macro: only functions marked MXFA_API leave the library. */
#if defined(_WIN32) && defined(MXFA_BUILDING)
#define MXFA_API __declspec(dllexport)
#elif defined(_WIN32)
#define MXFA_API
#elif defined(MXFA_BUILDING) && defined(__GNUC__)
#define MXFA_API __attribute__((visibility("default")))
#else
#define MXFA_API
#endif

/* ------------------------------------------------------------------ */
/* Versions and status codes                                          */

/* The library's version string ("major.minor.patch"), which may differ from
 * MXFA_VERSION_STRING of the header a program was compiled with. */
MXFA_API const char *mxfa_version(void);
/* major * 10000 + minor * 100 + patch of the library. */
MXFA_API int mxfa_version_number(void);

typedef enum mxfa_status {
    MXFA_OK = 0,
    MXFA_ERR_NULL = 1,        /* a required pointer is NULL */
    MXFA_ERR_INVALID = 2,     /* an argument's value is out of its domain */
    MXFA_ERR_SHAPE = 3,       /* sizes <= 0, or shapes that do not match */
    MXFA_ERR_OVERFLOW = 4,    /* a size product or offset overflows */
    MXFA_ERR_UNSUPPORTED = 5, /* valid request this backend or format does not do */
    MXFA_ERR_ALIAS = 6,       /* an output overlaps an input or another output */
    MXFA_ERR_NO_BACKEND = 7,  /* the backend asked for is not built or not usable */
    MXFA_ERR_NO_MEMORY = 8,   /* an allocation failed */
    MXFA_ERR_IO = 9,          /* reading or writing a file failed */
    MXFA_ERR_FORMAT = 10,     /* a file is malformed (for example a bad .npy header) */
    MXFA_ERR_NEEDS_SOURCE = 11, /* the result needs the high-precision data */
    MXFA_ERR_DEVICE = 12,     /* the GPU runtime reported an error */
    MXFA_ERR_INTERNAL = 13    /* a bug in mxfa: please report it */
} mxfa_status;

/* A fixed English sentence for a status; never NULL. */
MXFA_API const char *mxfa_strerror(mxfa_status status);

/* ------------------------------------------------------------------ */
/* Contexts and backends                                              */

typedef struct mxfa_ctx mxfa_ctx;

/*
 * Open a context on a backend: "auto", "ref", "cpu" or "cuda" (NULL means
 * "auto"). The environment variable MXFA_BACKEND, when set and not empty,
 * overrides the name given here. "auto" picks cpu when built, else ref
 * (the cuda backend, which does quantization and the scale layouts so far,
 * is opened by name). A named backend that is not built
 * or not usable is an error (MXFA_ERR_NO_BACKEND), never a silent fallback;
 * the reason is then in mxfa_last_error(NULL).
 */
MXFA_API mxfa_status mxfa_open(mxfa_ctx **ctx, const char *backend);
MXFA_API void mxfa_close(mxfa_ctx *ctx);

/*
 * The CUDA stream (a cudaStream_t) on which a cuda context does its work;
 * NULL, the default, is CUDA's default stream. A call whose tensors are all
 * in device memory is enqueued on the stream and returns without waiting
 * for it: errors found when launching are returned, errors of the running
 * work show at the next call that waits (cudaStreamSynchronize, or an mxfa
 * call with a host tensor). A call with a host tensor copies it through the
 * device on the stream and returns when its outputs are back. Other
 * backends keep the stream and ignore it.
 */
MXFA_API mxfa_status mxfa_set_stream(mxfa_ctx *ctx, void *stream);
MXFA_API void *mxfa_get_stream(const mxfa_ctx *ctx);

/*
 * Device memory without linking CUDA: bytes on the context's device
 * (MXFA_ERR_UNSUPPORTED on backends without one); freeing waits for the
 * device. mxfa_memcpy copies between host and device memory in any
 * direction (the cuda backend tells them apart by their addresses): a copy
 * to or from the host returns when the bytes are there, one between two
 * device buffers is enqueued on the stream like any call on device memory.
 * mxfa_synchronize waits for the work enqueued on the context's stream and
 * returns its errors.
 */
MXFA_API mxfa_status mxfa_device_alloc(mxfa_ctx *ctx, size_t bytes, void **ptr);
MXFA_API mxfa_status mxfa_device_free(mxfa_ctx *ctx, void *ptr);
MXFA_API mxfa_status mxfa_memcpy(mxfa_ctx *ctx, void *dst, const void *src, size_t bytes);
MXFA_API mxfa_status mxfa_synchronize(mxfa_ctx *ctx);
/* The name of the backend a context runs on ("ref", "cpu", "cuda"). */
MXFA_API const char *mxfa_backend_name(const mxfa_ctx *ctx);

/*
 * The device a context computes on: *arch is the GPU's compute capability
 * as 10 * major + minor (90 for Hopper, 100 for Blackwell) and name its name
 * (at most name_len bytes, NUL-terminated); 0 and "cpu" for the ref and cpu
 * backends. arch and name may each be NULL.
 */
MXFA_API mxfa_status mxfa_device_info(mxfa_ctx *ctx, int *arch, char *name, size_t name_len);

/*
 * The most scratch memory, in bytes, that the library's calls held at once
 * on the context's device since the last reset (reset != 0 resets the mark
 * after reading it): the working memory a call allocates beyond the
 * caller's tensors, and the device copies of host tensors that a call on
 * host memory stages. One mark per device and process, shared by every
 * context on it. MXFA_ERR_UNSUPPORTED on the ref and cpu backends.
 */
MXFA_API mxfa_status mxfa_scratch_peak(mxfa_ctx *ctx, size_t *bytes, int reset);

/* The instruction set the cpu backend runs on this context ("avx512",
 * "avx2" or "scalar": the best the CPU has, or the one the environment
 * variable MXFA_CPU_ISA names), or NULL for another backend. Every
 * instruction set gives the same bits. */
MXFA_API const char *mxfa_cpu_isa(const mxfa_ctx *ctx);

/*
 * The detailed message of the last failed call on ctx ("" when none).
 * With ctx == NULL: the last failure on this thread of a call that had no
 * context (mxfa_open, mxfa_backend_usable, the jagged offset helper). The
 * pointer is valid until the next call on the same context or thread.
 */
MXFA_API const char *mxfa_last_error(const mxfa_ctx *ctx);

/* Whether a backend is built for this library (compiled in, or for cuda: its
 * module found and loaded), and whether it can run here (1 or 0). When not
 * usable and why != NULL, the reason is copied into why (at most why_len
 * bytes, NUL-terminated). */
MXFA_API int mxfa_backend_built(const char *name);
MXFA_API int mxfa_backend_usable(const char *name, char *why, size_t why_len);

/* ------------------------------------------------------------------ */
/* Tensors                                                            */

typedef enum mxfa_dtype {
    MXFA_F32 = 0,  /* IEEE binary32 */
    MXFA_BF16 = 1, /* bfloat16, stored as uint16_t */
    MXFA_E4M3 = 2, /* OCP FP8 E4M3 (e4m3fn), one byte */
    MXFA_E5M2 = 3, /* OCP FP8 E5M2, one byte */
    MXFA_E8M0 = 4, /* OCP E8M0 power-of-two scale, one byte */
    MXFA_F64 = 5,  /* IEEE binary64 */
    MXFA_I32 = 6   /* int32_t */
} mxfa_dtype;
/* Each enum's values run from 0 to its count - 1: the one place that says
 * how many there are (every table of the library is checked against it). */
#define MXFA_DTYPE_COUNT 7

typedef enum mxfa_memory {
    MXFA_MEM_HOST = 0,  /* CPU memory (the cuda backend copies it through the device) */
    MXFA_MEM_DEVICE = 1 /* GPU memory of the context's device (cuda backend only) */
} mxfa_memory;

#define MXFA_MAX_DIMS 4

/*
 * A view of memory the caller owns. shape[i] > 0 for i < ndim. stride[i] is
 * the distance, in elements, between neighbours along dimension i; a stride
 * of 0 in every dimension means "contiguous row-major" (filled in by the
 * library). An output must not overlap itself or any input.
 */
typedef struct mxfa_tensor {
    void *data;
    mxfa_dtype dtype;
    mxfa_memory memory;
    int ndim;
    int64_t shape[MXFA_MAX_DIMS];
    int64_t stride[MXFA_MAX_DIMS];
} mxfa_tensor;

/* A contiguous row-major host matrix. */
MXFA_API mxfa_tensor mxfa_tensor_2d(void *data, mxfa_dtype dtype, int64_t rows, int64_t cols);
/* Size in bytes of one element (0 for an unknown dtype). */
MXFA_API size_t mxfa_dtype_size(mxfa_dtype dtype);
MXFA_API const char *mxfa_dtype_name(mxfa_dtype dtype);

/* ------------------------------------------------------------------ */
/* Scalar codecs (integer-only: independent of the FPU's rounding mode  */
/* and flush-to-zero state)                                            */

typedef enum mxfa_overflow {
    /* Finite overflow and +-Inf go to +-max; NaN stays NaN (PTX satfinite). */
    MXFA_SATFINITE = 0,
    /* OFP8 non-saturating mode: overflow gives NaN in E4M3, +-Inf in E5M2. */
    MXFA_NONSAT = 1
} mxfa_overflow;

/* fp32 -> FP8, round to nearest, ties to even. NaN becomes the code 0x7F
 * with the input's sign bit (0x7F or 0xFF) in both formats; -0 stays -0. */
MXFA_API uint8_t mxfa_f32_to_e4m3(float x, mxfa_overflow overflow);
MXFA_API uint8_t mxfa_f32_to_e5m2(float x, mxfa_overflow overflow);
/* FP8 -> fp32, exact. */
MXFA_API float mxfa_e4m3_to_f32(uint8_t code);
MXFA_API float mxfa_e5m2_to_f32(uint8_t code);

typedef enum mxfa_e8m0_rounding {
    MXFA_E8M0_CEIL = 0, /* smallest power of two >= |x| (PTX cvt.rp ... ue8m0x2) */
    MXFA_E8M0_FLOOR = 1 /* largest power of two <= |x| (OCP MX: floor(log2 x)) */
} mxfa_e8m0_rounding;

/*
 * fp32 -> E8M0, from |x| (the format has no sign). Results below 2^-127 give
 * 0x00 (2^-127, the smallest scale; also for 0); results above 2^127 and Inf
 * give 0xFE under MXFA_SATFINITE and 0xFF (NaN) under MXFA_NONSAT; NaN gives
 * 0xFF.
 */
MXFA_API uint8_t mxfa_f32_to_e8m0(float x, mxfa_e8m0_rounding rounding, mxfa_overflow overflow);
/* E8M0 -> fp32: 2^(code-127); code 0x00 is 2^-127 (a subnormal), 0xFF NaN. */
MXFA_API float mxfa_e8m0_to_f32(uint8_t code);

/* bf16 <-> fp32: widening is exact; narrowing rounds to nearest even, keeps
 * NaN a (quiet) NaN of the same sign. */
MXFA_API float mxfa_bf16_to_f32(uint16_t x);
MXFA_API uint16_t mxfa_f32_to_bf16(float x);

/* f16 (IEEE binary16) <-> fp32, the same rules: widening exact, narrowing
 * to nearest even with subnormals kept and overflow to Inf. */
MXFA_API float mxfa_f16_to_f32(uint16_t x);
MXFA_API uint16_t mxfa_f32_to_f16(float x);

/* ------------------------------------------------------------------ */
/* Block quantization                                                 */

typedef enum mxfa_block {
    MXFA_BLOCK_ROW = 0,   /* 1x32: 32 neighbours along the last dimension */
    MXFA_BLOCK_COL = 1,   /* 32x1: 32 neighbours along the first dimension */
    MXFA_BLOCK_SQUARE = 2 /* 32x32: one scale for a whole tile */
} mxfa_block;
#define MXFA_BLOCK_COUNT 3

/* How a block's scale and elements are chosen; see docs/NUMERICS.md. */
typedef enum mxfa_preset {
    MXFA_PRESET_RCEIL = 0,        /* NVIDIA's rule: ceil(amax * fl(1/max)) */
    MXFA_PRESET_OCP = 1,          /* OCP MX v1.0: floor(log2 amax) - emax */
    MXFA_PRESET_TORCHAO_RCEIL = 2,/* rceil without saturation; NaN/Inf poison */
    MXFA_PRESET_MICROXCALING = 3  /* ocp with elements rounded ties-away */
} mxfa_preset;
#define MXFA_PRESET_COUNT 4

typedef enum mxfa_layout {
    MXFA_LAYOUT_COMPACT = 0, /* row-major scale matrix */
    MXFA_LAYOUT_SWIZZLED = 1 /* 128x4 atoms of 512 bytes (tcgen05, cuBLAS) */
} mxfa_layout;
#define MXFA_LAYOUT_COUNT 2

/*
 * An MXFP8 matrix: data holds one FP8 byte (dtype MXFA_E4M3 or MXFA_E5M2) per
 * element of the source matrix [rows, cols]; scales holds E8M0 bytes (dtype
 * MXFA_E8M0). In the compact layout the scale matrix is
 *   row:    [rows, ceil(cols/32)]
 *   col:    [ceil(rows/32), cols]
 *   square: [ceil(rows/32), ceil(cols/32)]
 * In the swizzled layout (row and col only) see mxfa_scales_swizzle.
 */
typedef struct mxfa_mx {
    mxfa_tensor data;
    mxfa_tensor scales;
    mxfa_block block;
    mxfa_layout layout;
} mxfa_mx;

/* Names <-> enums ("row", "rceil", "e4m3", "swizzled", ...). The parsers
 * return MXFA_ERR_INVALID for an unknown name. */
MXFA_API const char *mxfa_block_name(mxfa_block block);
MXFA_API const char *mxfa_preset_name(mxfa_preset preset);
MXFA_API const char *mxfa_layout_name(mxfa_layout layout);
MXFA_API mxfa_status mxfa_block_parse(const char *name, mxfa_block *block);
MXFA_API mxfa_status mxfa_preset_parse(const char *name, mxfa_preset *preset);
MXFA_API mxfa_status mxfa_layout_parse(const char *name, mxfa_layout *layout);
MXFA_API mxfa_status mxfa_format_parse(const char *name, mxfa_dtype *format);

/* The compact scale matrix shape for a source matrix [rows, cols]. */
MXFA_API mxfa_status mxfa_scales_shape(mxfa_block block, int64_t rows, int64_t cols,
                                       int64_t *scale_rows, int64_t *scale_cols);

/*
 * Quantize x ([rows, cols], MXFA_F32 or MXFA_BF16) into out, which the caller
 * describes: out->data of x's shape with dtype MXFA_E4M3 or MXFA_E5M2 (the
 * element format), out->scales in the compact layout, out->block the block
 * shape. A dimension that is not a multiple of 32 is padded with zeros for
 * the amax; padding is never stored.
 */
MXFA_API mxfa_status mxfa_quantize(mxfa_ctx *ctx, const mxfa_tensor *x, mxfa_preset preset,
                                   mxfa_mx *out);

/*
 * Quantize a jagged batch: x is [total_tokens, cols], sequence i holds rows
 * cu_seqlens[i] .. cu_seqlens[i+1]-1 (cu_seqlens[0] == 0, non-decreasing,
 * cu_seqlens[batch] == total_tokens). Blocks never span two sequences: col
 * and square blocks restart at every sequence start, so sequence i owns
 * ceil(len_i/32) scale rows starting at scale row sum_{j<i} ceil(len_j/32).
 * For row blocks this equals mxfa_quantize.
 */
MXFA_API mxfa_status mxfa_quantize_jagged(mxfa_ctx *ctx, const mxfa_tensor *x,
                                          const int32_t *cu_seqlens, int batch,
                                          mxfa_preset preset, mxfa_mx *out);

/* The number of compact scale rows a jagged col or square quantization
 * needs: sum_i ceil(len_i/32). */
MXFA_API mxfa_status mxfa_jagged_scale_rows(const int32_t *cu_seqlens, int batch,
                                            int64_t *scale_rows);

/*
 * Dequantize in (compact scales) into out (MXFA_F32 or MXFA_BF16, the shape
 * of in->data): out = element * 2^(scale - 127), computed exactly and rounded
 * once (fp32: exact except that values beyond FLT_MAX become +-Inf; bf16:
 * round to nearest even). A NaN element or a NaN scale (0xFF) gives NaN.
 */
MXFA_API mxfa_status mxfa_dequantize(mxfa_ctx *ctx, const mxfa_mx *in, mxfa_tensor *out);

/*
 * The MXFP8 form of X^T from the MXFP8 form of X, as a byte permutation (no
 * rounding). out->block names the blocks of the result relative to X^T:
 *   square -> square: exact, because square blocks are transpose-invariant;
 *   row -> col and col -> row: exact (the same blocks, seen transposed);
 *   row -> row and col -> col: MXFA_ERR_NEEDS_SOURCE, because those blocks
 *   span other elements than in's: quantize the high-precision X^T instead.
 * Compact layout only. out->data is [cols, rows] of in->data.
 */
MXFA_API mxfa_status mxfa_transpose(mxfa_ctx *ctx, const mxfa_mx *in, mxfa_mx *out);

/*
 * Square scales as row or col scales: a square-quantized matrix is also a
 * valid row-quantized (and col-quantized) one whose scales repeat along the
 * block. square_scales is [ceil(rows/32), ceil(cols/32)] for the source
 * [rows, cols]; out is the compact scale matrix of `block` (row or col).
 */
MXFA_API mxfa_status mxfa_scales_expand_square(mxfa_ctx *ctx, const mxfa_tensor *square_scales,
                                               int64_t rows, int64_t cols, mxfa_block block,
                                               mxfa_tensor *out);

/* ------------------------------------------------------------------ */
/* Scale-factor layouts                                               */

/*
 * The swizzled layout. Its index space is the compact scale matrix for row
 * blocks ([rows, ceil(cols/32)]) and the transposed compact matrix for col
 * blocks ([cols, ceil(rows/32)]): index (r, c). The index space is padded
 * with zero bytes to multiples of (128, 4) and cut into 512-byte atoms of
 * 128 x 4, atoms row-major; inside an atom (r, c) sits at byte
 *   (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4.
 * A swizzled scale tensor is described as [round_up(R, 128), round_up(C, 4)]
 * contiguous bytes for index space [R, C].
 */
MXFA_API mxfa_status mxfa_swizzled_shape(mxfa_block block, int64_t rows, int64_t cols,
                                         int64_t *sw_rows, int64_t *sw_cols);
/* Byte offset of index (r, c) in a swizzled buffer whose padded index space
 * has sw_cols columns (a positive multiple of 4); -1 when r or c is
 * negative, c >= sw_cols, sw_cols is not such a multiple, or the offset
 * overflows. */
MXFA_API int64_t mxfa_swizzle_offset(int64_t r, int64_t c, int64_t sw_cols);

/* compact -> swizzled (padding written as zero) and back, for the scales of
 * a source matrix [rows, cols] quantized with `block` (row or col). */
MXFA_API mxfa_status mxfa_scales_swizzle(mxfa_ctx *ctx, const mxfa_tensor *compact,
                                         mxfa_block block, int64_t rows, int64_t cols,
                                         mxfa_tensor *swizzled);
MXFA_API mxfa_status mxfa_scales_unswizzle(mxfa_ctx *ctx, const mxfa_tensor *swizzled,
                                           mxfa_block block, int64_t rows, int64_t cols,
                                           mxfa_tensor *compact);

/* ------------------------------------------------------------------ */
/* Jagged (variable-length) batches                                   */

/*
 * cu_seqlens_sf[i] = sum_{j<i} round_up(len_j, 128) for i = 0..batch: where
 * sequence i's scale rows start in the padded layout. cu_seqlens has
 * batch + 1 entries, starts at 0 and is non-decreasing.
 */
MXFA_API mxfa_status mxfa_jagged_sf_offsets(const int32_t *cu_seqlens, int batch,
                                            int64_t *cu_seqlens_sf);

/*
 * Scatter compact jagged scales into the padded swizzled layout, and gather
 * them back. The source is a jagged matrix [total_tokens, cols] with tokens
 * as rows, quantized with `block`:
 *   row: compact [total_tokens, ceil(cols/32)]; swizzled index space
 *        [cu_seqlens_sf[batch], ceil(cols/32)], sequence i's rows from
 *        cu_seqlens_sf[i];
 *   col: compact [sum ceil(len_i/32), cols] (as mxfa_quantize_jagged makes
 *        it); swizzled index space [cols, cu_seqlens_sf[batch] / 32],
 *        sequence i's blocks from cu_seqlens_sf[i] / 32.
 * The swizzled tensor is [round_up(R,128), round_up(C,4)] for index space
 * [R, C]; every byte of it is written (padding zero).
 */
MXFA_API mxfa_status mxfa_scales_scatter(mxfa_ctx *ctx, const mxfa_tensor *compact,
                                         const int32_t *cu_seqlens, int batch,
                                         mxfa_block block, int64_t cols,
                                         mxfa_tensor *swizzled);
MXFA_API mxfa_status mxfa_scales_gather(mxfa_ctx *ctx, const mxfa_tensor *swizzled,
                                        const int32_t *cu_seqlens, int batch,
                                        mxfa_block block, int64_t cols,
                                        mxfa_tensor *compact);

/* ------------------------------------------------------------------ */
/* Block-scaled matrix products and tensor-core models                 */

/*
 * How a product's additions are carried out; docs/NUMERICS.md gives each
 * model's definition and how it was checked.
 *   ideal      exact sums of each 32-block, scaled, added into an fp32
 *              accumulator with round-to-nearest-even, block by block in K order
 *   sm100      Blackwell tcgen05.mma kind::mxf8f6f4.block_scale: scales added to
 *              every product's exponent, the accumulator fused into each
 *              32-product sum (taken from published models; not verified on
 *              hardware here)
 *   sm90-fp8   Hopper: one wgmma e4m3/e5m2 k32 per 32-block into a zero
 *              accumulator, then acc = fma(partial, 2^(sa+sb), acc) in fp32
 *   sm90-bf16  Hopper: operands widened to bf16 with their scales, wgmma bf16
 *              k16 steps chained on the accumulator
 */
typedef enum mxfa_model {
    MXFA_MODEL_IDEAL = 0,
    MXFA_MODEL_SM100 = 1,
    MXFA_MODEL_SM90_FP8 = 2,
    MXFA_MODEL_SM90_BF16 = 3
} mxfa_model;
#define MXFA_MODEL_COUNT 4

MXFA_API const char *mxfa_model_name(mxfa_model model);
MXFA_API mxfa_status mxfa_model_parse(const char *name, mxfa_model *model);

/*
 * D = A * B^T + C. A is [M, K] and B is [N, K], both MXFP8 with row blocks
 * (scales along K, compact layout, E4M3 or E5M2, the two formats may
 * differ); when K is not a multiple of 32 the last block is padded with
 * zeros. C is fp32 [M, N], or NULL for zero. D is fp32 [M, N]; it may be the
 * very same view as C (in place), but must not overlap anything else.
 */
MXFA_API mxfa_status mxfa_gemm(mxfa_ctx *ctx, const mxfa_mx *a, const mxfa_mx *b, const mxfa_tensor *c,
                               mxfa_model model, mxfa_tensor *d);

/* Single tensor-core instructions, for testing kernels and hardware. */
typedef enum mxfa_instr {
    /* wgmma.mma_async ... .f32.e4m3|e5m2.e4m3|e5m2, K = 32 */
    MXFA_INSTR_SM90_WGMMA_FP8 = 0,
    /* wgmma.mma_async ... .f32.bf16.bf16, K = 16 */
    MXFA_INSTR_SM90_WGMMA_BF16 = 1
} mxfa_instr;

/* The K of one instruction (32 or 16), or 0 for an unknown instruction. */
MXFA_API int mxfa_instr_k(mxfa_instr instr);

/*
 * A chain of instructions along K: D = C, then for each K-step s of the
 * instruction, D = instr(A[:, s], B[:, s], D), each step one fused sum of
 * its products and the accumulator. A [M, K] and B [N, K] hold E4M3 or E5M2
 * codes (fp8 instruction) or bf16 (bf16 instruction); K is a multiple of the
 * instruction's K; C and D are fp32 [M, N] (C may be NULL for zero, and D
 * may be the same view as C).
 */
MXFA_API mxfa_status mxfa_mma_chain(mxfa_ctx *ctx, mxfa_instr instr, const mxfa_tensor *a,
                                    const mxfa_tensor *b, const mxfa_tensor *c, mxfa_tensor *d);

/* ------------------------------------------------------------------ */
/* The softmax's exp2 and log2                                         */

/*
 * The library's own exp2 and log2, bit-identical on every backend (fp32
 * operations in a fixed order, fixed polynomials with explicit fma).
 * exp2: a degree-3 polynomial times 2^n, n = x rounded to an integer;
 * exp2(0) is 0.99993 (C0 in docs/NUMERICS.md), not 1; +Inf for x >= 127.5,
 * +0 for x < -126.5, subnormal results below 2^-126 kept, NaN for NaN. log2: -Inf for
 * +-0, NaN for negative x and NaN, +Inf for +Inf. Their definitions and
 * measured accuracy are in docs/NUMERICS.md.
 */
MXFA_API float mxfa_exp2(float x);
MXFA_API float mxfa_log2(float x);

/*
 * The forward softmax's exponential, in f16 (bits in, bits out): 2^h
 * rounded toward zero to f16, for every h but one: h = -2^-24 (0x8001)
 * gives 1.0 (0x3C00) where the rounding gives 0x3BFF, as Hopper's
 * ex2.approx.f16 does. -Inf gives +0, +Inf gives +Inf, finite results past
 * the largest f16 give 65504 (0x7BFF), a NaN gives the quiet NaN 0x7E00. Exact on
 * every input (docs/NUMERICS.md section 6; tests/t-exp2 checks all 65536).
 */
MXFA_API uint16_t mxfa_exp2_f16(uint16_t h);

/* ------------------------------------------------------------------ */
/* Attention                                                           */

/* How P (the softmax numerators, in [0, 256]) is quantized to E4M3. */
typedef enum mxfa_p_scale {
    MXFA_P_CONST = 0,  /* one fixed scale 2^-8 (byte 0x77) for all of P */
    MXFA_P_DYNAMIC = 1 /* row blocks of 32 keys, scale by the rceil rule */
} mxfa_p_scale;
#define MXFA_P_SCALE_COUNT 2

typedef enum mxfa_causal {
    MXFA_CAUSAL_NONE = 0,
    /* causal, bottom-right aligned, leak-free: a query never depends on a
     * later key, not even through a block scale (key blocks that cross the
     * diagonal of a query tile multiply P by V in bf16) */
    MXFA_CAUSAL = 1,
    /* causal with V scaled per 32 keys across the diagonal, as published
     * kernels do: the scale of the block holding key i also depends on later
     * keys. For studies of that leak. */
    MXFA_CAUSAL_PLAIN = 2
} mxfa_causal;
#define MXFA_CAUSAL_COUNT 3

typedef struct mxfa_attn_params {
    mxfa_model model;      /* the MMA numerics (default sm100) */
    mxfa_preset preset;    /* scale rule for Q, K and V (default rceil) */
    mxfa_p_scale p_scale;  /* default MXFA_P_CONST */
    mxfa_causal causal;    /* default MXFA_CAUSAL_NONE */
    float softmax_scale;   /* 0: D^-1/2 */
    int block_m, block_n;  /* query and key tile sizes, multiples of 32 (0: 128) */
} mxfa_attn_params;

MXFA_API void mxfa_attn_params_default(mxfa_attn_params *p);
/* The softmax scale a call with parameters p (NULL: the defaults) uses at
 * head dimension head_dim: p->softmax_scale, or where that is 0,
 * 1/sqrt(head_dim) rounded once to fp32. */
MXFA_API float mxfa_attn_softmax_scale(const mxfa_attn_params *p, int64_t head_dim);
MXFA_API const char *mxfa_p_scale_name(mxfa_p_scale p);
MXFA_API mxfa_status mxfa_p_scale_parse(const char *name, mxfa_p_scale *p);

/*
 * MXFP8 attention forward (docs/NUMERICS.md section 6).
 *   q: [tokens_q, Hq, D], k and v: [tokens_k, Hkv, D], MXFA_F32 or MXFA_BF16;
 *      Hq a multiple of Hkv (GQA, MQA); D = 64, 128 or 256.
 *   cu_seqlens_q, cu_seqlens_k: batch + 1 token offsets of the sequences
 *      (both NULL with batch 1: one sequence of all tokens).
 *   o: [tokens_q, Hq, D], MXFA_F32 or MXFA_BF16.
 *   lse: [tokens_q, Hq] MXFA_F32 (natural log of the softmax denominator,
 *      with the scale), or NULL. A query that sees no key gets O = 0 and
 *      LSE = -Inf.
 * On the cuda backend under sm100 with dynamic P, the call waits for its own
 * quantization of V before it returns, also on device memory, and refuses
 * (MXFA_ERR_UNSUPPORTED) a V with a block of non-zero values whose scale is
 * below 2^-119: the hardware's scale bytes cannot carry P's 2^-8 there
 * (docs/BLACKWELL.md).
 */
MXFA_API mxfa_status mxfa_attn_fwd(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_tensor *q,
                                   const mxfa_tensor *k, const mxfa_tensor *v, const int32_t *cu_seqlens_q,
                                   const int32_t *cu_seqlens_k, int batch, mxfa_tensor *o, mxfa_tensor *lse);

/*
 * The truth: the same attention in float64 without any quantization
 * (softmax_scale, causal and the sequences as in p; its model, preset,
 * p_scale and tiles are ignored). o is MXFA_F64 [tokens_q, Hq, D], lse
 * MXFA_F64 [tokens_q, Hq] or NULL.
 */
MXFA_API mxfa_status mxfa_attn_fwd_f64(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_tensor *q,
                                       const mxfa_tensor *k, const mxfa_tensor *v, const int32_t *cu_seqlens_q,
                                       const int32_t *cu_seqlens_k, int batch, mxfa_tensor *o, mxfa_tensor *lse);

/*
 * MXFP8 attention backward (docs/NUMERICS.md section 7), with every option
 * of the forward pass. q, k, v as for mxfa_attn_fwd; o and lse are the
 * forward outputs (o [tokens_q, Hq, D] f32 or bf16, lse [tokens_q, Hq] f32);
 * dout is dO [tokens_q, Hq, D] f32 or bf16. Outputs: dq [tokens_q, Hq, D],
 * dk and dv [tokens_k, Hkv, D], each MXFA_F32 or MXFA_BF16. Deterministic:
 * dQ sums key tiles in increasing order, and the dK and dV of a shared
 * key/value head sum the group's query heads in increasing head order.
 * On the cuda backend a causal call waits for its own quantization of Q, K
 * and dO before it returns, also on device memory: whether one of them
 * holds a NaN decides how its products run (gpu/README.md).
 */
MXFA_API mxfa_status mxfa_attn_bwd(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_tensor *q,
                                   const mxfa_tensor *k, const mxfa_tensor *v, const mxfa_tensor *o,
                                   const mxfa_tensor *dout, const mxfa_tensor *lse, const int32_t *cu_seqlens_q,
                                   const int32_t *cu_seqlens_k, int batch, mxfa_tensor *dq, mxfa_tensor *dk,
                                   mxfa_tensor *dv);

/*
 * The same, with dK and dV returned as MXFP8 in 32x32 square blocks (ready to
 * feed the next products in either orientation). dk->data and dv->data are
 * [tokens_k, Hkv, D] of MXFA_E4M3 or MXFA_E5M2; their scales are MXFA_E8M0
 * [sum_i ceil(len_k_i / 32), Hkv, D / 32]: blocks restart at every sequence
 * and never mix heads. The block fields must be MXFA_BLOCK_SQUARE, the
 * layouts compact; the preset is p->preset. dQ is as in mxfa_attn_bwd.
 */
MXFA_API mxfa_status mxfa_attn_bwd_mx(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_tensor *q,
                                      const mxfa_tensor *k, const mxfa_tensor *v, const mxfa_tensor *o,
                                      const mxfa_tensor *dout, const mxfa_tensor *lse, const int32_t *cu_seqlens_q,
                                      const int32_t *cu_seqlens_k, int batch, mxfa_tensor *dq, mxfa_mx *dk,
                                      mxfa_mx *dv);

/* The float64 gradients of the float64 forward pass (no quantization);
 * dq, dk, dv MXFA_F64. */
MXFA_API mxfa_status mxfa_attn_bwd_f64(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_tensor *q,
                                       const mxfa_tensor *k, const mxfa_tensor *v, const mxfa_tensor *dout,
                                       const int32_t *cu_seqlens_q, const int32_t *cu_seqlens_k, int batch,
                                       mxfa_tensor *dq, mxfa_tensor *dk, mxfa_tensor *dv);

/*
 * Error metrics of a result against a reference (docs/NUMERICS.md,
 * "Accuracy against the float64 truth"). Only pairs of values that
 * are both finite are measured. Where some value is NaN or infinite and
 * its counterpart differs (a NaN output where the reference is finite, for
 * example), or where no pair is finite, the error cannot be measured:
 * rel_l2, max_abs, cosine and sqnr_db are then NaN, never a score, and
 * mismatched_nonfinite or count says why. A perfect score (rel_l2 0,
 * sqnr_db +Inf) means that count > 0 pairs were measured and all are equal.
 */
typedef struct mxfa_metrics {
    double rel_l2;   /* |out - ref|_2 / |ref|_2 */
    double max_abs;  /* max |out - ref| */
    double cosine;   /* <out, ref> / (|out| |ref|) */
    double sqnr_db;  /* 10 log10(|ref|^2 / |out - ref|^2) */
    int64_t count;   /* pairs measured (both finite) */
    int64_t skipped; /* pairs equal and not finite (for example -Inf LSE of empty rows): not measured, not an error */
    int64_t mismatched_nonfinite; /* pairs that differ where either is NaN or infinite: the metrics are NaN */
} mxfa_metrics;

/* Compare out with ref: tensors of the same shape (any ndim up to 4), each
 * MXFA_F32, MXFA_BF16 or MXFA_F64, in host memory. count + skipped +
 * mismatched_nonfinite is the number of elements. */
MXFA_API mxfa_status mxfa_compare(const mxfa_tensor *out, const mxfa_tensor *ref, mxfa_metrics *m);

#ifdef __cplusplus
}
#endif

#endif /* MXFA_H */
