/*
 * The truth: attention in float64 with no quantization, for measuring what
 * MXFP8 does (SPEC section 8). Inputs are read exactly (bf16 and fp32 widen
 * exactly to double); softmax(scale * Q K^T) V with the row max subtracted,
 * causal bottom-right, GQA by head groups. A query that sees no key gets
 * O = 0 and LSE = -Inf; a NaN anywhere in a row's scores makes its outputs
 * NaN.
 */
#include <math.h>
#include <stdlib.h>

#include "ref.h"

static double load_d(const mxfa_view_nd *v, int64_t i0, int64_t i1, int64_t i2)
{
    int64_t idx[3] = {i0, i1, i2};
    const void *p = view_nd_at(v, idx);
    if (v->dtype == MXFA_BF16) {
        uint16_t h;
        memcpy(&h, p, 2);
        return (double)f32_from_bits(bf16_to_f32_bits(h));
    }
    float f;
    memcpy(&f, p, 4);
    return (double)f;
}

mxfa_status mxfa_truth_attn_fwd(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_view_nd *q,
                                const mxfa_view_nd *k, const mxfa_view_nd *v, const int32_t *cu_q,
                                const int32_t *cu_k, int batch, const mxfa_view_nd *o, const mxfa_view_nd *lse)
{
    const int64_t hq = q->shape[1], hkv = k->shape[1], d = q->shape[2], group = hq / hkv;
    const double scale = (double)p->softmax_scale;
    int64_t maxk = 0;
    for (int b = 0; b < batch; b++)
        if (cu_k[b + 1] - cu_k[b] > maxk)
            maxk = cu_k[b + 1] - cu_k[b];
    double *s = malloc((size_t)(maxk > 0 ? maxk : 1) * sizeof *s);
    double *acc = malloc((size_t)d * sizeof *acc);
    if (!s || !acc) {
        free(s);
        free(acc);
        return mxfa_fail(ctx, MXFA_ERR_NO_MEMORY, "mxfa_attn_fwd_f64: out of memory");
    }
    for (int b = 0; b < batch; b++) {
        int64_t lq = (int64_t)cu_q[b + 1] - cu_q[b], lk = (int64_t)cu_k[b + 1] - cu_k[b];
        for (int64_t h = 0; h < hq; h++) {
            int64_t g = h / group;
            for (int64_t i = 0; i < lq; i++) {
                int64_t lim = p->causal == MXFA_CAUSAL_NONE ? lk - 1 : i + lk - lq;
                int64_t nvis = lim + 1 < lk ? (lim + 1 > 0 ? lim + 1 : 0) : lk;
                double m = -INFINITY;
                int nan = 0;
                for (int64_t j = 0; j < nvis; j++) {
                    double dot = 0;
                    for (int64_t e = 0; e < d; e++)
                        dot += load_d(q, cu_q[b] + i, h, e) * load_d(k, cu_k[b] + j, g, e);
                    s[j] = dot * scale;
                    nan |= isnan(s[j]);
                    if (s[j] > m)
                        m = s[j];
                }
                double l = 0, out_lse;
                for (int64_t e = 0; e < d; e++)
                    acc[e] = 0;
                if (nan) {
                    l = NAN;
                    for (int64_t e = 0; e < d; e++)
                        acc[e] = NAN;
                } else if (nvis > 0 && m != -INFINITY) {
                    for (int64_t j = 0; j < nvis; j++) {
                        double w = exp(s[j] - m);
                        l += w;
                        for (int64_t e = 0; e < d; e++)
                            acc[e] += w * load_d(v, cu_k[b] + j, g, e);
                    }
                }
                if (nan || l > 0 || isnan(l)) {
                    for (int64_t e = 0; e < d; e++)
                        acc[e] /= l;
                    out_lse = m + log(l);
                } else {
                    out_lse = -INFINITY; /* no key visible: O = 0 */
                }
                for (int64_t e = 0; e < d; e++) {
                    int64_t idx[3] = {cu_q[b] + i, h, e};
                    memcpy(view_nd_at(o, idx), &acc[e], sizeof(double));
                }
                if (lse) {
                    int64_t idx[2] = {cu_q[b] + i, h};
                    memcpy(view_nd_at(lse, idx), &out_lse, sizeof(double));
                }
            }
        }
    }
    free(s);
    free(acc);
    return MXFA_OK;
}
