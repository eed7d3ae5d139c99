/* SPDX-License-Identifier: BSD-3-Clause */
/* Byte permutations: copies, square-scale expansion, swizzled atoms and the
 * jagged scatter and gather. */
#include "ref.h"

mxfa_status mxfa_ref_copy(mxfa_ctx *ctx, const mxfa_view *src, const mxfa_view *dst)
{
    (void)ctx;
    size_t es = mxfa_dtype_size(src->dtype);
    for (int64_t r = 0; r < src->rows; r++)
        for (int64_t c = 0; c < src->cols; c++)
            memcpy(view_at(dst, r, c), view_at(src, r, c), es);
    return MXFA_OK;
}

mxfa_status mxfa_ref_expand(mxfa_ctx *ctx, const mxfa_view *src, int64_t rdiv, int64_t cdiv,
                            const mxfa_view *dst)
{
    (void)ctx;
    for (int64_t r = 0; r < dst->rows; r++)
        for (int64_t c = 0; c < dst->cols; c++)
            *(uint8_t *)view_at(dst, r, c) = *(const uint8_t *)view_at(src, r / rdiv, c / cdiv);
    return MXFA_OK;
}

/* Where index (r, c) of the compact matrix lands in the padded index space:
 * shifted by its sequence's offset along `axis` for jagged batches. */
static void for_each_mapped(const mxfa_view *index, int axis, const mxfa_segment *segs, int nsegs,
                            void (*visit)(void *arg, int64_t r, int64_t c, int64_t pr, int64_t pc), void *arg)
{
    if (!segs) {
        for (int64_t r = 0; r < index->rows; r++)
            for (int64_t c = 0; c < index->cols; c++)
                visit(arg, r, c, r, c);
        return;
    }
    for (int s = 0; s < nsegs; s++)
        for (int64_t k = 0; k < segs[s].count; k++) {
            int64_t from = segs[s].src + k, to = segs[s].dst + k;
            if (axis == 0)
                for (int64_t c = 0; c < index->cols; c++)
                    visit(arg, from, c, to, c);
            else
                for (int64_t r = 0; r < index->rows; r++)
                    visit(arg, r, from, r, to);
        }
}

struct swz {
    const mxfa_view *index;
    uint8_t *sw;
    const uint8_t *csw;
    int64_t sw_cols;
};

static void put(void *arg, int64_t r, int64_t c, int64_t pr, int64_t pc)
{
    struct swz *z = arg;
    z->sw[mxfa_swizzle_offset(pr, pc, z->sw_cols)] = *(const uint8_t *)view_at(z->index, r, c);
}

static void get(void *arg, int64_t r, int64_t c, int64_t pr, int64_t pc)
{
    struct swz *z = arg;
    *(uint8_t *)view_at(z->index, r, c) = z->csw[mxfa_swizzle_offset(pr, pc, z->sw_cols)];
}

mxfa_status mxfa_ref_swizzle(mxfa_ctx *ctx, const mxfa_view *index, int axis, const mxfa_segment *segs,
                             int nsegs, uint8_t *swizzled, int64_t sw_rows, int64_t sw_cols)
{
    (void)ctx;
    memset(swizzled, 0, (size_t)(sw_rows * sw_cols)); /* padding is zero */
    struct swz z = {index, swizzled, NULL, sw_cols};
    for_each_mapped(index, axis, segs, nsegs, put, &z);
    return MXFA_OK;
}

mxfa_status mxfa_ref_unswizzle(mxfa_ctx *ctx, const uint8_t *swizzled, int64_t sw_rows, int64_t sw_cols,
                               int axis, const mxfa_segment *segs, int nsegs, const mxfa_view *index)
{
    (void)ctx;
    (void)sw_rows;
    struct swz z = {index, NULL, swizzled, sw_cols};
    for_each_mapped(index, axis, segs, nsegs, get, &z);
    return MXFA_OK;
}
