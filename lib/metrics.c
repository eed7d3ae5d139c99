/* SPDX-License-Identifier: BSD-3-Clause */
/* Error metrics of a result against a reference (docs/NUMERICS.md,
 * "Accuracy against the float64 truth"), in double precision. */
#include <math.h>

#include "internal.h"

static double load_any(const mxfa_view_nd *v, const int64_t *idx)
{
    const void *p = view_nd_at(v, idx);
    switch (v->dtype) {
    case MXFA_F64: {
        double d;
        memcpy(&d, p, 8);
        return d;
    }
    case MXFA_BF16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return (double)f32_from_bits(bf16_to_f32_bits(h));
    }
    default: {
        float f;
        memcpy(&f, p, 4);
        return (double)f;
    }
    }
}

static mxfa_status compare_in_env(const mxfa_tensor *out, const mxfa_tensor *ref, mxfa_metrics *m)
{
    mxfa_clear_error(NULL);
    if (!out || !ref || !m)
        return mxfa_fail(NULL, MXFA_ERR_NULL, "mxfa_compare: NULL argument");
    const unsigned types = DT(MXFA_F32) | DT(MXFA_BF16) | DT(MXFA_F64);
    if (out->ndim < 1 || out->ndim > MXFA_MAX_DIMS)
        return mxfa_fail(NULL, MXFA_ERR_SHAPE, "mxfa_compare: out has %d dimensions (1 to %d)", out->ndim,
                         MXFA_MAX_DIMS);
    if (out->memory != MXFA_MEM_HOST || ref->memory != MXFA_MEM_HOST)
        return mxfa_fail(NULL, MXFA_ERR_UNSUPPORTED, "mxfa_compare: tensors must be in host memory");
    mxfa_view_nd ov, rv;
    CHECK(mxfa_check_tensor(NULL, "out", out, types, out->ndim, NULL, 0, &ov));
    CHECK(mxfa_check_tensor(NULL, "ref", ref, types, out->ndim, ov.shape, 0, &rv));
    double err2 = 0, ref2 = 0, out2 = 0, dot = 0, maxabs = 0;
    int64_t count = 0, skipped = 0, bad = 0, idx[MXFA_MAX_DIMS] = {0};
    for (;;) {
        double a = load_any(&ov, idx), r = load_any(&rv, idx);
        if (isfinite(a) && isfinite(r)) {
            double e = a - r;
            err2 += e * e;
            ref2 += r * r;
            out2 += a * a;
            dot += a * r;
            maxabs = fabs(e) > maxabs ? fabs(e) : maxabs;
            count++;
        } else if (a == r || (isnan(a) && isnan(r))) {
            skipped++;
        } else {
            bad++;
        }
        int dim = ov.ndim - 1;
        while (dim >= 0 && ++idx[dim] == ov.shape[dim])
            idx[dim--] = 0;
        if (dim < 0)
            break;
    }
    if (bad > 0 || count == 0) {
        /* A NaN or Inf where the reference differs is an unbounded error,
         * and nothing finite is no measurement: no score, rather than the
         * finite rest's (which would read as exact when nothing is left). */
        m->rel_l2 = m->max_abs = m->cosine = m->sqnr_db = NAN;
    } else {
        m->rel_l2 = ref2 > 0 ? sqrt(err2 / ref2) : (err2 > 0 ? INFINITY : 0.0);
        m->max_abs = maxabs;
        m->cosine = ref2 > 0 && out2 > 0 ? dot / sqrt(ref2 * out2) : (ref2 == out2 ? 1.0 : 0.0);
        m->sqnr_db = err2 > 0 ? 10.0 * log10(ref2 / err2) : INFINITY;
    }
    m->count = count;
    m->skipped = skipped;
    m->mismatched_nonfinite = bad;
    return MXFA_OK;
}

MXFA_API mxfa_status mxfa_compare(const mxfa_tensor *out, const mxfa_tensor *ref, mxfa_metrics *m)
{
    MXFA_RETURN_IN_DEFAULT_FPENV(compare_in_env(out, ref, m));
}
