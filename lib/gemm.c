/* SPDX-License-Identifier: BSD-3-Clause */
/* Entry points for matrix products: mxfa_gemm under a numerics model, and
 * chains of single tensor-core instructions. Arguments are checked here. */
#include "internal.h"

MXFA_API int mxfa_instr_k(mxfa_instr instr)
{
    switch (instr) {
    case MXFA_INSTR_SM90_WGMMA_FP8: return 32;
    case MXFA_INSTR_SM90_WGMMA_BF16: return 16;
    }
    return 0;
}

/* C (optional, input) and D (output), fp32 [m, n]: D may be C itself. */
static mxfa_status check_cd(mxfa_ctx *ctx, const mxfa_tensor *c, mxfa_tensor *d, int64_t m, int64_t n,
                            mxfa_view *cv, mxfa_view *dv, int *have_c)
{
    CHECK(mxfa_check_matrix(ctx, "d", d, DT(MXFA_F32), m, n, 1, dv));
    *have_c = c != NULL;
    if (c) {
        CHECK(mxfa_check_matrix(ctx, "c", c, DT(MXFA_F32), m, n, 0, cv));
        if (!mxfa_views_identical(cv, dv))
            CHECK(mxfa_check_disjoint(ctx, "d", dv, "c", cv));
    }
    return MXFA_OK;
}

static mxfa_status gemm_in_env(mxfa_ctx *ctx, const mxfa_mx *a, const mxfa_mx *b, const mxfa_tensor *c,
                               mxfa_model model, mxfa_tensor *d)
{
    if (!ctx)
        return mxfa_fail(NULL, MXFA_ERR_NULL, "mxfa_gemm: ctx is NULL");
    mxfa_clear_error(ctx);
    if (!a || !b)
        return mxfa_fail(ctx, MXFA_ERR_NULL, "mxfa_gemm: %s is NULL", a ? "b" : "a");
    if ((unsigned)model >= MXFA_MODEL_COUNT)
        return mxfa_fail(ctx, MXFA_ERR_INVALID, "mxfa_gemm: unknown model %d", (int)model);
    const mxfa_mx *ops[2] = {a, b};
    mxfa_view dv[2], sv[2], cv, outv;
    for (int i = 0; i < 2; i++) {
        const char *what = i ? "b" : "a";
        if (ops[i]->block != MXFA_BLOCK_ROW)
            return mxfa_fail(ctx, ops[i]->block == MXFA_BLOCK_SQUARE || ops[i]->block == MXFA_BLOCK_COL
                                      ? MXFA_ERR_UNSUPPORTED : MXFA_ERR_INVALID,
                             "mxfa_gemm: %s must have row blocks (scales along K), got %s; expand square scales "
                             "with mxfa_scales_expand_square", what, mxfa_block_name(ops[i]->block));
        if (ops[i]->layout != MXFA_LAYOUT_COMPACT)
            return mxfa_fail(ctx, MXFA_ERR_UNSUPPORTED, "mxfa_gemm: %s's scales must be in the compact layout", what);
        CHECK(mxfa_check_matrix(ctx, i ? "b->data" : "a->data", &ops[i]->data, DT(MXFA_E4M3) | DT(MXFA_E5M2), -1,
                                i ? dv[0].cols : -1, 0, &dv[i]));
        CHECK(mxfa_check_matrix(ctx, i ? "b->scales" : "a->scales", &ops[i]->scales, DT(MXFA_E8M0), dv[i].rows,
                                ceil_div(dv[i].cols, 32), 0, &sv[i]));
    }
    int have_c;
    CHECK(check_cd(ctx, c, d, dv[0].rows, dv[1].rows, &cv, &outv, &have_c));
    for (int i = 0; i < 2; i++) {
        CHECK(mxfa_check_disjoint(ctx, "d", &outv, i ? "b->data" : "a->data", &dv[i]));
        CHECK(mxfa_check_disjoint(ctx, "d", &outv, i ? "b->scales" : "a->scales", &sv[i]));
    }
    return ctx->backend->gemm(ctx, model, &dv[0], &sv[0], &dv[1], &sv[1], have_c ? &cv : NULL, &outv);
}

MXFA_API mxfa_status mxfa_gemm(mxfa_ctx *ctx, const mxfa_mx *a, const mxfa_mx *b, const mxfa_tensor *c,
                               mxfa_model model, mxfa_tensor *d)
{
    MXFA_RETURN_IN_DEFAULT_FPENV(gemm_in_env(ctx, a, b, c, model, d));
}

static mxfa_status mma_chain_in_env(mxfa_ctx *ctx, mxfa_instr instr, const mxfa_tensor *a, const mxfa_tensor *b,
                                    const mxfa_tensor *c, mxfa_tensor *d)
{
    if (!ctx)
        return mxfa_fail(NULL, MXFA_ERR_NULL, "mxfa_mma_chain: ctx is NULL");
    mxfa_clear_error(ctx);
    int ik = mxfa_instr_k(instr);
    if (!ik)
        return mxfa_fail(ctx, MXFA_ERR_INVALID, "mxfa_mma_chain: unknown instruction %d", (int)instr);
    unsigned dts = instr == MXFA_INSTR_SM90_WGMMA_BF16 ? DT(MXFA_BF16) : DT(MXFA_E4M3) | DT(MXFA_E5M2);
    mxfa_view av, bv, cv, dv;
    CHECK(mxfa_check_matrix(ctx, "a", a, dts, -1, -1, 0, &av));
    CHECK(mxfa_check_matrix(ctx, "b", b, dts, -1, av.cols, 0, &bv));
    if (av.cols % ik != 0)
        return mxfa_fail(ctx, MXFA_ERR_SHAPE, "mxfa_mma_chain: K = %lld is not a multiple of the instruction's K = %d",
                         (long long)av.cols, ik);
    int have_c;
    CHECK(check_cd(ctx, c, d, av.rows, bv.rows, &cv, &dv, &have_c));
    CHECK(mxfa_check_disjoint(ctx, "d", &dv, "a", &av));
    CHECK(mxfa_check_disjoint(ctx, "d", &dv, "b", &bv));
    return ctx->backend->mma_chain(ctx, instr, &av, &bv, have_c ? &cv : NULL, &dv);
}

MXFA_API mxfa_status mxfa_mma_chain(mxfa_ctx *ctx, mxfa_instr instr, const mxfa_tensor *a, const mxfa_tensor *b,
                                    const mxfa_tensor *c, mxfa_tensor *d)
{
    MXFA_RETURN_IN_DEFAULT_FPENV(mma_chain_in_env(ctx, instr, a, b, c, d));
}
