/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internals shared by the API layer and the backends: contexts, the backend
 * table, validated matrix views and error reporting. Nothing here is
 * exported; the API layer checks every argument once, so backends receive
 * only valid, non-overlapping views.
 */
#ifndef MXFA_INTERNAL_H
#define MXFA_INTERNAL_H

#include <fenv.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>

#include "formats.h"
#include "mxfa.h"

#define MXFA_ERRMSG_LEN 512

/* A validated 2-D view: element (r, c) is at base + (r * rs + c * cs) * esize.
 * memory: where base points, as the caller declared it (host unless set). */
typedef struct mxfa_view {
    void *base;
    mxfa_dtype dtype;
    int64_t rows, cols;
    int64_t rs, cs;
    mxfa_memory memory;
} mxfa_view;

static inline void *view_at(const mxfa_view *v, int64_t r, int64_t c)
{
    return (uint8_t *)v->base + (size_t)(r * v->rs + c * v->cs) * mxfa_dtype_size(v->dtype);
}

/* A validated view of up to MXFA_MAX_DIMS dimensions, strides in elements. */
typedef struct mxfa_view_nd {
    void *base;
    mxfa_dtype dtype;
    int ndim;
    int64_t shape[MXFA_MAX_DIMS];
    int64_t stride[MXFA_MAX_DIMS];
    mxfa_memory memory;
} mxfa_view_nd;

/* The same memory seen transposed. */
static inline mxfa_view view_transposed(mxfa_view v)
{
    mxfa_view t = v;
    t.rows = v.cols;
    t.cols = v.rows;
    t.rs = v.cs;
    t.cs = v.rs;
    return t;
}

/* One sequence of a jagged batch in a layout operation: `count` index
 * rows (row blocks) or columns (col blocks) from `src` in the compact matrix
 * go to `dst` in the padded index space. */
typedef struct mxfa_segment {
    int64_t src, count, dst;
} mxfa_segment;

typedef struct mxfa_backend mxfa_backend;

struct mxfa_ctx {
    const mxfa_backend *backend;
    void *state;  /* the backend's own */
    void *stream; /* mxfa_set_stream: a cudaStream_t for the cuda backend */
    char error[MXFA_ERRMSG_LEN];
};

/*
 * A backend: every operation of the API, on arguments the API layer has
 * already checked. Quantization gets the row segments of the source (one
 * segment for a dense matrix; blocks never cross a segment boundary).
 */
struct mxfa_backend {
    const char *name;
    /* 1 when it can run here; otherwise 0 and a reason in why */
    int (*usable)(char *why, size_t why_len);
    int takes_device_memory;
    mxfa_status (*open)(mxfa_ctx *ctx);
    void (*close)(mxfa_ctx *ctx);

    mxfa_status (*quantize)(mxfa_ctx *ctx, const mxfa_view *x, const mxfa_segment *segs,
                            int nsegs, mxfa_preset preset, mxfa_block block,
                            const mxfa_view *data, const mxfa_view *scales);
    mxfa_status (*dequantize)(mxfa_ctx *ctx, const mxfa_view *data, const mxfa_view *scales,
                              mxfa_block block, const mxfa_view *out);
    /* copy src to dst element by element (same shape and element size) */
    mxfa_status (*copy)(mxfa_ctx *ctx, const mxfa_view *src, const mxfa_view *dst);
    /* expand square scales: dst(r, c) = src(r / rdiv, c / cdiv) */
    mxfa_status (*expand)(mxfa_ctx *ctx, const mxfa_view *src, int64_t rdiv, int64_t cdiv,
                          const mxfa_view *dst);
    /* index space [rows, cols] (already oriented) <-> swizzled bytes; the
     * segments map index rows (axis 0) or columns (axis 1) for jagged batches;
     * NULL segments mean the identity. */
    mxfa_status (*swizzle)(mxfa_ctx *ctx, const mxfa_view *index, int axis,
                           const mxfa_segment *segs, int nsegs, uint8_t *swizzled,
                           int64_t sw_rows, int64_t sw_cols);
    mxfa_status (*unswizzle)(mxfa_ctx *ctx, const uint8_t *swizzled, int64_t sw_rows,
                             int64_t sw_cols, int axis, const mxfa_segment *segs, int nsegs,
                             const mxfa_view *index);
    /* D = A * B^T + C under a model; c may be NULL (zero) */
    mxfa_status (*gemm)(mxfa_ctx *ctx, mxfa_model model, const mxfa_view *a, const mxfa_view *sa,
                        const mxfa_view *b, const mxfa_view *sb, const mxfa_view *c, const mxfa_view *d);
    /* attention forward on checked views; p is complete (no zero defaults),
     * cu_seqlens always given; lse may be NULL */
    mxfa_status (*attn_fwd)(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_view_nd *q,
                            const mxfa_view_nd *k, const mxfa_view_nd *v, const int32_t *cu_q, const int32_t *cu_k,
                            int batch, const mxfa_view_nd *o, const mxfa_view_nd *lse);
    /* attention backward on checked views (p complete, cu_seqlens given) */
    mxfa_status (*attn_bwd)(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_view_nd *q,
                            const mxfa_view_nd *k, const mxfa_view_nd *v, const mxfa_view_nd *o,
                            const mxfa_view_nd *dout, const mxfa_view_nd *lse, const int32_t *cu_q,
                            const int32_t *cu_k, int batch, const mxfa_view_nd *dq, const mxfa_view_nd *dk,
                            const mxfa_view_nd *dv);
    /* a chain of single instructions along K; c may be NULL (zero) */
    mxfa_status (*mma_chain)(mxfa_ctx *ctx, mxfa_instr instr, const mxfa_view *a, const mxfa_view *b,
                             const mxfa_view *c, const mxfa_view *d);
    /* device memory (NULL for backends without it): allocation on the
     * context's stream, copies between any memories that return when done,
     * and waiting for the stream */
    mxfa_status (*device_alloc)(mxfa_ctx *ctx, size_t bytes, void **ptr);
    mxfa_status (*device_free)(mxfa_ctx *ctx, void *ptr);
    mxfa_status (*copy_bytes)(mxfa_ctx *ctx, void *dst, const void *src, size_t bytes);
    mxfa_status (*synchronize)(mxfa_ctx *ctx);
    /* the device's compute capability (10 * major + minor) and name; NULL
     * for backends that run on the CPU */
    mxfa_status (*device_info)(mxfa_ctx *ctx, int *arch, char *name, size_t name_len);
    /* the high-water mark of the device's scratch memory (mxfa_scratch_peak);
     * NULL for backends that run on the CPU */
    mxfa_status (*scratch_peak)(mxfa_ctx *ctx, size_t *bytes, int reset);
};

extern const mxfa_backend mxfa_backend_ref;
extern const mxfa_backend mxfa_backend_cpu;

/* The float64 truth of attention (lib/truth.c), on checked views: not a
 * backend, the measure every backend is held against. */
mxfa_status mxfa_truth_attn_fwd(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_view_nd *q,
                                const mxfa_view_nd *k, const mxfa_view_nd *v, const int32_t *cu_q,
                                const int32_t *cu_k, int batch, const mxfa_view_nd *o, const mxfa_view_nd *lse);

mxfa_status mxfa_truth_attn_bwd(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_view_nd *q,
                                const mxfa_view_nd *k, const mxfa_view_nd *v, const mxfa_view_nd *dout,
                                const int32_t *cu_q, const int32_t *cu_k, int batch, const mxfa_view_nd *dq,
                                const mxfa_view_nd *dk, const mxfa_view_nd *dv);

/* Element access of an N-D view: a pointer to element idx. */
static inline void *view_nd_at(const mxfa_view_nd *v, const int64_t *idx)
{
    int64_t off = 0;
    for (int i = 0; i < v->ndim; i++)
        off += idx[i] * v->stride[i];
    return (uint8_t *)v->base + (size_t)off * mxfa_dtype_size(v->dtype);
}

/* Element (i0, i1, i2) of a 3-D f32 or bf16 view as a float (bf16 widened
 * exactly). */
static inline float view_nd_load_f32(const mxfa_view_nd *v, int64_t i0, int64_t i1, int64_t i2)
{
    int64_t idx[3] = {i0, i1, i2};
    const void *p = view_nd_at(v, idx);
    uint32_t b;
    if (v->dtype == MXFA_BF16) {
        uint16_t h;
        memcpy(&h, p, 2);
        b = bf16_to_f32_bits(h);
    } else {
        memcpy(&b, p, 4);
    }
    return f32_from_bits(b);
}

/* Record a failure on ctx (or, for ctx == NULL, on this thread) and return
 * status, so that checks read `return mxfa_fail(ctx, MXFA_ERR_..., "...")`. */
mxfa_status mxfa_fail(mxfa_ctx *ctx, mxfa_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void mxfa_clear_error(mxfa_ctx *ctx);

/* ---- argument checking (lib/check.c) ---- */

/* Return the status of expr from the calling function unless it is MXFA_OK. */
#define CHECK(expr)                                                                                \
    do {                                                                                           \
        mxfa_status st_ = (expr);                                                                  \
        if (st_ != MXFA_OK)                                                                        \
            return st_;                                                                            \
    } while (0)

/* Allowed dtypes as a bit mask of (1 << dtype). */
#define DT(d) (1u << (d))

/*
 * Check that t is a host-or-device (per ctx) 2-D tensor of an allowed dtype
 * whose shape is [rows, cols] (pass -1 to accept any positive size), with
 * strides that stay inside int64 and do not make an output overlap itself.
 * On success *v is its view.
 */
mxfa_status mxfa_check_matrix(mxfa_ctx *ctx, const char *what, const mxfa_tensor *t,
                              unsigned dtypes, int64_t rows, int64_t cols, int is_output,
                              mxfa_view *v);
/*
 * The same for a tensor of `ndim` dimensions whose shape must equal `shape`
 * (entries -1 accept any positive size; a NULL shape accepts any).
 */
mxfa_status mxfa_check_tensor(mxfa_ctx *ctx, const char *what, const mxfa_tensor *t, unsigned dtypes, int ndim,
                              const int64_t *shape, int is_output, mxfa_view_nd *v);
mxfa_status mxfa_check_disjoint_nd(mxfa_ctx *ctx, const char *a_what, const mxfa_view_nd *a, const char *b_what,
                                   const mxfa_view_nd *b);
/* A 2-D view of dimensions d0 and d1 of v at the given offset (elements). */
mxfa_view mxfa_view_slice(const mxfa_view_nd *v, int d0, int d1, int64_t offset, int64_t rows, int64_t cols);

/* MXFA_ERR_ALIAS when the memory spans of two views overlap. */
int mxfa_views_identical(const mxfa_view *a, const mxfa_view *b);
mxfa_status mxfa_check_disjoint(mxfa_ctx *ctx, const char *a_what, const mxfa_view *a,
                                const char *b_what, const mxfa_view *b);
/* Checked arithmetic for sizes. */
int mxfa_mul_ok(int64_t a, int64_t b, int64_t *out);
int mxfa_add_ok(int64_t a, int64_t b, int64_t *out);
/* For a >= 0 and b > 0, without the overflow of (a + b - 1) / b near INT64_MAX. */
static inline int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }
static inline int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

/* Check cu_seqlens (batch + 1 entries, from 0, non-decreasing, the last equal
 * to total when total >= 0). */
mxfa_status mxfa_check_cu_seqlens(mxfa_ctx *ctx, const int32_t *cu_seqlens, int batch,
                                  int64_t total);

/* The context's backend must be able to see `memory`. */
mxfa_status mxfa_check_memory(mxfa_ctx *ctx, const char *what, const mxfa_tensor *t);

/*
 * The library computes in the default floating-point environment (round to
 * nearest even, subnormals neither flushed nor treated as zero), whatever
 * the caller's: each computing entry point (quantization, products,
 * attention, metrics) runs between mxfa_fpenv_enter, which sets that
 * environment, and mxfa_fpenv_leave, which restores the caller's, exception
 * flags included. Threads the backends start set it themselves
 * (cpu/opt/cpu.h).
 */
static inline void mxfa_fpenv_enter(fenv_t *saved)
{
    fegetenv(saved);
    fesetenv(FE_DFL_ENV);
}

static inline void mxfa_fpenv_leave(const fenv_t *saved)
{
    fesetenv(saved);
}

/* The body of an entry point: return `call` (an mxfa_status expression)
 * evaluated in the default environment. */
#define MXFA_RETURN_IN_DEFAULT_FPENV(call)                                                                            \
    do {                                                                                                              \
        fenv_t saved_env_;                                                                                            \
        mxfa_fpenv_enter(&saved_env_);                                                                                \
        mxfa_status status_ = (call);                                                                                 \
        mxfa_fpenv_leave(&saved_env_);                                                                                \
        return status_;                                                                                               \
    } while (0)


#endif
