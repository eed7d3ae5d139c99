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
    return (double)ref_load_f32_3d(v, i0, i1, i2);
}

/*
 * One query row's softmax numerators: w[j] = exp(s_j - m) over the visible
 * keys j < nvis (the return value), s_j = scale * q_i . k_j, m the row max,
 * l the sum of w in key order. A NaN score makes every w and l NaN; a row
 * with no visible key, or only -Inf scores, has l = 0.
 */
static int64_t truth_row(const mxfa_attn_params *p, const mxfa_view_nd *q, const mxfa_view_nd *k, int64_t qi,
                         int64_t h, int64_t k0, int64_t g, int64_t i, int64_t lq, int64_t lk, double *w, double *m,
                         double *l)
{
    const int64_t d = q->shape[2];
    int64_t lim = p->causal == MXFA_CAUSAL_NONE ? lk - 1 : i + lk - lq;
    int64_t nvis = lim + 1 < lk ? (lim + 1 > 0 ? lim + 1 : 0) : lk;
    int nan = 0;
    *m = -INFINITY;
    *l = 0;
    for (int64_t j = 0; j < nvis; j++) {
        double dot = 0;
        for (int64_t e = 0; e < d; e++)
            dot += load_d(q, qi, h, e) * load_d(k, k0 + j, g, e);
        w[j] = dot * (double)p->softmax_scale;
        nan |= isnan(w[j]);
        if (w[j] > *m)
            *m = w[j];
    }
    for (int64_t j = 0; j < nvis; j++) {
        w[j] = nan ? NAN : *m == -INFINITY ? 0.0 : exp(w[j] - *m);
        *l += w[j];
    }
    return nvis;
}

mxfa_status mxfa_truth_attn_fwd(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_view_nd *q,
                                const mxfa_view_nd *k, const mxfa_view_nd *v, const int32_t *cu_q,
                                const int32_t *cu_k, int batch, const mxfa_view_nd *o, const mxfa_view_nd *lse)
{
    const int64_t hq = q->shape[1], hkv = k->shape[1], d = q->shape[2], group = hq / hkv;
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
                double m, l, out_lse;
                int64_t nvis = truth_row(p, q, k, cu_q[b] + i, h, cu_k[b], g, i, lq, lk, s, &m, &l);
                for (int64_t e = 0; e < d; e++)
                    acc[e] = 0;
                for (int64_t j = 0; j < nvis && l != 0; j++)
                    for (int64_t e = 0; e < d; e++)
                        acc[e] += s[j] * load_d(v, cu_k[b] + j, g, e);
                if (l > 0 || isnan(l)) {
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

/* The float64 gradients: P = softmax(scale * Q K^T) per row, O = P V,
 * dV = P^T dO, dP = dO V^T, delta = rowsum(dO * O), dS = P * (dP - delta),
 * dQ = scale * dS K, dK = scale * dS^T Q; a shared key/value head sums its
 * query heads. */
mxfa_status mxfa_truth_attn_bwd(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_view_nd *q,
                                const mxfa_view_nd *k, const mxfa_view_nd *v, const mxfa_view_nd *dout,
                                const int32_t *cu_q, const int32_t *cu_k, int batch, const mxfa_view_nd *dq,
                                const mxfa_view_nd *dk, const mxfa_view_nd *dv)
{
    const int64_t hq = q->shape[1], hkv = k->shape[1], d = q->shape[2], group = hq / hkv, tk = k->shape[0];
    const double scale = (double)p->softmax_scale;
    int64_t maxk = 1;
    for (int b = 0; b < batch; b++)
        if (cu_k[b + 1] - cu_k[b] > maxk)
            maxk = cu_k[b + 1] - cu_k[b];
    double *pr = malloc((size_t)maxk * sizeof *pr), *o = malloc((size_t)d * sizeof *o);
    double *gk = calloc((size_t)(tk * hkv * d), sizeof *gk), *gv = calloc((size_t)(tk * hkv * d), sizeof *gv);
    double *gq = malloc((size_t)d * sizeof *gq);
    if (!pr || !o || !gk || !gv || !gq) {
        free(pr), free(o), free(gk), free(gv), free(gq);
        return mxfa_fail(ctx, MXFA_ERR_NO_MEMORY, "mxfa_attn_bwd_f64: out of memory");
    }
    for (int b = 0; b < batch; b++) {
        int64_t lq = (int64_t)cu_q[b + 1] - cu_q[b], lk = (int64_t)cu_k[b + 1] - cu_k[b];
        for (int64_t h = 0; h < hq; h++) {
            int64_t g = h / group;
            for (int64_t i = 0; i < lq; i++) {
                int64_t qi = cu_q[b] + i;
                double m, l;
                int64_t nvis = truth_row(p, q, k, qi, h, cu_k[b], g, i, lq, lk, pr, &m, &l);
                for (int64_t e = 0; e < d; e++)
                    o[e] = gq[e] = 0;
                for (int64_t j = 0; j < nvis; j++) {
                    pr[j] /= l;
                    for (int64_t e = 0; e < d; e++)
                        o[e] += pr[j] * load_d(v, cu_k[b] + j, g, e);
                }
                double delta = 0;
                for (int64_t e = 0; e < d; e++)
                    delta += load_d(dout, qi, h, e) * o[e];
                for (int64_t j = 0; j < nvis; j++) {
                    int64_t kj = cu_k[b] + j;
                    double dp = 0;
                    for (int64_t e = 0; e < d; e++)
                        dp += load_d(dout, qi, h, e) * load_d(v, kj, g, e);
                    double ds = pr[j] * (dp - delta);
                    for (int64_t e = 0; e < d; e++) {
                        gq[e] += ds * load_d(k, kj, g, e);
                        gk[(kj * hkv + g) * d + e] += ds * load_d(q, qi, h, e);
                        gv[(kj * hkv + g) * d + e] += pr[j] * load_d(dout, qi, h, e);
                    }
                }
                for (int64_t e = 0; e < d; e++) {
                    int64_t idx[3] = {qi, h, e};
                    double val = gq[e] * scale;
                    memcpy(view_nd_at(dq, idx), &val, sizeof val);
                }
            }
        }
    }
    for (int64_t j = 0; j < tk; j++)
        for (int64_t g = 0; g < hkv; g++)
            for (int64_t e = 0; e < d; e++) {
                int64_t idx[3] = {j, g, e};
                double vk = gk[(j * hkv + g) * d + e] * scale, vv = gv[(j * hkv + g) * d + e];
                memcpy(view_nd_at(dk, idx), &vk, sizeof vk);
                memcpy(view_nd_at(dv, idx), &vv, sizeof vv);
            }
    free(pr), free(o), free(gk), free(gv), free(gq);
    return MXFA_OK;
}
