/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * t-cuda's shared parts: the backends every case compares, host-and-device
 * buffers, the data generators, and each family's cases. The families live
 * one to a file (quantize.c, gemm.c, attn_fwd.c, attn_bwd.c); all of them
 * count test points and draw from the one TAP state and generator that
 * t-cuda.c defines (tap.h's TAP_SHARED), so a run draws the same cases
 * however the files are cut.
 */
#ifndef MXFA_TCUDA_HARNESS_H
#define MXFA_TCUDA_HARNESS_H

#define TAP_SHARED
#include "mxfa.h"
#include "tap.h"
#include "draws.h"

extern mxfa_ctx *ref, *gpu, *cpu;
extern int gpu_arch; /* 10 * major + minor */

/* Whether MXFA_TCUDA_ONLY leaves the group `name`; if not, its skip. */
int wanted(const char *name);

/* ---- buffers that live on the host, and on the device for device runs ---- */

typedef struct buf {
    uint8_t *host;
    void *dev;
    size_t bytes;
} buf;

buf buf_new(size_t bytes, int fill);
void *where(buf *b, int device); /* the device copy for device runs */
void fetch(buf *b);              /* the host copy of what the device holds */
void buf_free(buf *b);
int same(const buf *a, const buf *b);
mxfa_tensor t2(buf *b, int device, mxfa_dtype dt, int64_t rows, int64_t cols, int64_t rs, int64_t cs);
mxfa_tensor t3(buf *b, int device, mxfa_dtype dt, int64_t n0, int64_t n1, int64_t n2);

/* ---- data ---- */

uint32_t special_f32(void);
void fill_source(buf *b, mxfa_dtype dt, size_t n);
int64_t rand_dim(void);

typedef struct layout2 {
    int64_t rs, cs;  /* strides of the view (elements) */
    size_t elements; /* the buffer */
} layout2;

layout2 pick_layout(int64_t rows, int64_t cols, int kind);

/* How Q, K and V lie in memory: packed [tokens][H][D], heads padded by 32
 * elements (the kernel quantizes a head at a time, without the wide row
 * path), or head-major [H][tokens][D]. */
enum { PACKED, PADDED, HEAD_MAJOR };

void fill_normal(buf *b, mxfa_dtype dt, int64_t rows, int64_t cols, int loud_channel, int mag);
size_t view_elems(int layout, int64_t n0, int64_t n1, int64_t d);
mxfa_tensor t3_layout(buf *b, int device, mxfa_dtype dt, int layout, int64_t n0, int64_t n1, int64_t d);
void poke(buf *b, mxfa_dtype dt, const mxfa_tensor *t, int64_t tok, int64_t h, int64_t c, int e, float v);
void draw_seqlens(int batch, uint32_t most, int32_t cq[4], int32_t ck[4]);

/* ---- the families: a case draws its inputs, runs them on ref (or the cpu
 * backend) and on cuda, and returns whether every byte agrees, else says
 * what differs in `what` ---- */

typedef int (*case_fn)(int trial, int device, char *what, size_t what_len);

int quantize_case(int trial, int device, char *what, size_t what_len);
int jagged_case(int trial, int device, char *what, size_t what_len);
int layout_case(int trial, int device, char *what, size_t what_len);
int wide_layout_case(int trial, int device, char *what, size_t what_len);
int gemm_case(int trial, int device, char *what, size_t what_len);
int attn_case(int trial, int device, char *what, size_t what_len);
int attn_bf16_case(int trial, int device, char *what, size_t what_len);
int attn_unseen_case(int trial, int device, char *what, size_t what_len);
int bwd_case(int trial, int device, char *what, size_t what_len);
int bwd_fused_bf16_case(int trial, int device, char *what, size_t what_len);
int bwd_fused_fp8_case(int trial, int device, char *what, size_t what_len);

int gpu_is_hopper(void);          /* whether the device runs the sm90 product */
void big_gemm(mxfa_model model);  /* one large product against the cpu backend */

#endif
