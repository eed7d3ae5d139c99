/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Block-scaled products on the cpu backend: A and B decoded once, then
 * tiles of D in parallel, each running the blocks of K in order through
 * the exact block step (fx.h). Raw instruction chains, a testing aid, run
 * the reference loops over row slices in parallel.
 */
#include <stdlib.h>

#include "cpu.h"

#define TILE_M 64
#define TILE_N 128

mxfa_status mxfa_cpu_gemm(mxfa_ctx *ctx, mxfa_model model, const mxfa_view *a, const mxfa_view *sa,
                          const mxfa_view *b, const mxfa_view *sb, const mxfa_view *c, const mxfa_view *d)
{
    const int64_t M = a->rows, N = b->rows, K = a->cols, nkb = ceil_div(K, 32);
    const int64_t Mp = round_up(M, KERN_MR), Np = round_up(N, KERN_NR);
    const fx_step st = fx_step_block(model);
    const cpu_kernels *kern = cpu_kern(ctx);
    fx_mat A = {0}, B = {0};
    int *sexp_a = calloc((size_t)(nkb * Mp), sizeof(int)), *sexp_b = calloc((size_t)(nkb * Np), sizeof(int));
    uint8_t *flag_a = calloc((size_t)(nkb * Mp), 1), *flag_b = calloc((size_t)(nkb * Np), 1);
    mxfa_status status = MXFA_OK;
    if (!sexp_a || !sexp_b || !flag_a || !flag_b || !fx_alloc(&A, Mp, K, a->dtype) || !fx_alloc(&B, K, Np, b->dtype)) {
        status = mxfa_fail(ctx, MXFA_ERR_NO_MEMORY, "mxfa_gemm: out of memory");
        goto done;
    }
    fx_decode_rows(kern, a, sa, fx_table_fp8(a->dtype, st.widen), 0, &A, sexp_a, flag_a, Mp);
    fx_decode_rows(kern, b, sb, fx_table_fp8(b->dtype, st.widen), 1, &B, sexp_b, flag_b, Np);
    const int64_t tm = ceil_div(M, TILE_M), tn = ceil_div(N, TILE_N);
    int failed = 0;
#pragma omp parallel
    {
        CPU_FPENV_ENTER;
        uint32_t *acc = malloc(TILE_M * TILE_N * sizeof *acc);
        if (!acc) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for collapse(2) schedule(dynamic)
        for (int64_t ti = 0; ti < tm; ti++)
            for (int64_t tj = 0; tj < tn; tj++) {
                if (!acc)
                    continue;
                int64_t i0 = ti * TILE_M, j0 = tj * TILE_N;
                int mr = (int)(M - i0 < TILE_M ? M - i0 : TILE_M), nr = (int)(N - j0 < TILE_N ? N - j0 : TILE_N);
                int nrp = (int)round_up(nr, KERN_NR);
                memset(acc, 0, TILE_M * TILE_N * sizeof *acc);
                if (c)
                    for (int i = 0; i < mr; i++)
                        for (int j = 0; j < nr; j++)
                            memcpy(&acc[i * TILE_N + j], view_at(c, i0 + i, j0 + j), 4);
                for (int64_t kb = 0; kb < nkb; kb++) {
                    int kn = (int)(K - kb * 32 < 32 ? K - kb * 32 : 32);
                    fx_block(kern, &st, &A, i0, kb * 32, &B, kb * 32, j0, kn, mr, nrp, &sexp_a[kb * Mp + i0],
                             &flag_a[kb * Mp + i0], &sexp_b[kb * Np + j0], &flag_b[kb * Np + j0], acc, TILE_N, NULL);
                }
                for (int i = 0; i < mr; i++)
                    for (int j = 0; j < nr; j++)
                        memcpy(view_at(d, i0 + i, j0 + j), &acc[i * TILE_N + j], 4);
            }
        free(acc);
        CPU_FPENV_LEAVE;
    }
    if (failed)
        status = mxfa_fail(ctx, MXFA_ERR_NO_MEMORY, "mxfa_gemm: out of memory");
done:
    fx_free(&A);
    fx_free(&B);
    free(sexp_a), free(sexp_b), free(flag_a), free(flag_b);
    return status;
}

mxfa_status mxfa_cpu_mma_chain(mxfa_ctx *ctx, mxfa_instr instr, const mxfa_view *a, const mxfa_view *b,
                               const mxfa_view *c, const mxfa_view *d)
{
    const int64_t M = d->rows, slice = 16;
#pragma omp parallel
    {
        CPU_FPENV_ENTER;
#pragma omp for schedule(dynamic)
        for (int64_t r0 = 0; r0 < M; r0 += slice) {
            int64_t n = M - r0 < slice ? M - r0 : slice;
            mxfa_view as = *a, cs, ds = *d;
            as.base = view_at(a, r0, 0);
            as.rows = n;
            ds.base = view_at(d, r0, 0);
            ds.rows = n;
            if (c) {
                cs = *c;
                cs.base = view_at(c, r0, 0);
                cs.rows = n;
            }
            mxfa_ref_mma_chain(ctx, instr, &as, b, c ? &cs : NULL, &ds);
        }
        CPU_FPENV_LEAVE;
    }
    return MXFA_OK;
}
