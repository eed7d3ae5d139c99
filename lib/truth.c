/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The truth: attention in float64 with no quantization, for measuring what
 * MXFP8 does (docs/NUMERICS.md, "Accuracy against the float64 truth").
 * Inputs are read exactly (bf16 and fp32 widen exactly to double);
 * softmax(scale * Q K^T) V with the row max subtracted, causal
 * bottom-right, GQA by head groups. A query that sees no key gets O = 0
 * and LSE = -Inf; a NaN anywhere in a row's scores makes its outputs NaN.
 */
#include <math.h>
#include <stdlib.h>

#include "internal.h"

/* Rows t0 .. t0 + n - 1 of head h of a 3-D view, widened to double into
 * x [n][d]: the loops below then run on plain arrays. */
static void gather(const mxfa_view_nd *v, int64_t t0, int64_t n, int64_t h, double *x)
{
    const int64_t d = v->shape[2];
    for (int64_t t = 0; t < n; t++)
        for (int64_t e = 0; e < d; e++)
            x[t * d + e] = (double)view_nd_load_f32(v, t0 + t, h, e);
}

/*
 * One query row's softmax numerators: w[j] = exp(s_j - m) over the visible
 * keys j < nvis (the return value), s_j = scale * q . k_j (q one row, k
 * [lk][d]), m the row max, l the sum of w in key order. A NaN score makes
 * every w and l NaN; a row with no visible key, or only -Inf scores, has
 * l = 0.
 */
static int64_t truth_row(const mxfa_attn_params *p, const double *q, const double *k, int64_t d, int64_t i,
                         int64_t lq, int64_t lk, double *w, double *m, double *l)
{
    int64_t lim = p->causal == MXFA_CAUSAL_NONE ? lk - 1 : i + lk - lq;
    int64_t nvis = lim + 1 < lk ? (lim + 1 > 0 ? lim + 1 : 0) : lk;
    int nan = 0;
    *m = -INFINITY;
    *l = 0;
    for (int64_t j = 0; j < nvis; j++) {
        double dot = 0;
        for (int64_t e = 0; e < d; e++)
            dot += q[e] * k[j * d + e];
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
    maxk = maxk > 0 ? maxk : 1;
    double *s = malloc((size_t)maxk * sizeof *s), *acc = malloc((size_t)d * sizeof *acc);
    double *qr = malloc((size_t)d * sizeof *qr), *kg = malloc((size_t)(maxk * d) * sizeof *kg);
    double *vg = malloc((size_t)(maxk * d) * sizeof *vg);
    if (!s || !acc || !qr || !kg || !vg) {
        free(s), free(acc), free(qr), free(kg), free(vg);
        return mxfa_fail(ctx, MXFA_ERR_NO_MEMORY, "mxfa_attn_fwd_f64: out of memory");
    }
    for (int b = 0; b < batch; b++) {
        int64_t lq = (int64_t)cu_q[b + 1] - cu_q[b], lk = (int64_t)cu_k[b + 1] - cu_k[b];
        for (int64_t h = 0; h < hq; h++) {
            int64_t g = h / group;
            if (h % group == 0) {
                gather(k, cu_k[b], lk, g, kg);
                gather(v, cu_k[b], lk, g, vg);
            }
            for (int64_t i = 0; i < lq; i++) {
                double m, l, out_lse;
                gather(q, cu_q[b] + i, 1, h, qr);
                int64_t nvis = truth_row(p, qr, kg, d, i, lq, lk, s, &m, &l);
                for (int64_t e = 0; e < d; e++)
                    acc[e] = 0;
                for (int64_t j = 0; j < nvis && l != 0; j++)
                    for (int64_t e = 0; e < d; e++)
                        acc[e] += s[j] * vg[j * d + e];
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
    free(s), free(acc), free(qr), free(kg), free(vg);
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
    double *gq = malloc((size_t)d * sizeof *gq), *qr = malloc((size_t)d * sizeof *qr);
    double *dor = malloc((size_t)d * sizeof *dor), *kg = malloc((size_t)(maxk * d) * sizeof *kg);
    double *vg = malloc((size_t)(maxk * d) * sizeof *vg);
    if (!pr || !o || !gk || !gv || !gq || !qr || !dor || !kg || !vg) {
        free(pr), free(o), free(gk), free(gv), free(gq), free(qr), free(dor), free(kg), free(vg);
        return mxfa_fail(ctx, MXFA_ERR_NO_MEMORY, "mxfa_attn_bwd_f64: out of memory");
    }
    for (int b = 0; b < batch; b++) {
        int64_t lq = (int64_t)cu_q[b + 1] - cu_q[b], lk = (int64_t)cu_k[b + 1] - cu_k[b];
        for (int64_t h = 0; h < hq; h++) {
            int64_t g = h / group;
            if (h % group == 0) {
                gather(k, cu_k[b], lk, g, kg);
                gather(v, cu_k[b], lk, g, vg);
            }
            for (int64_t i = 0; i < lq; i++) {
                int64_t qi = cu_q[b] + i;
                double m, l;
                gather(q, qi, 1, h, qr);
                gather(dout, qi, 1, h, dor);
                int64_t nvis = truth_row(p, qr, kg, d, i, lq, lk, pr, &m, &l);
                for (int64_t e = 0; e < d; e++)
                    o[e] = gq[e] = 0;
                for (int64_t j = 0; j < nvis; j++) {
                    pr[j] /= l;
                    for (int64_t e = 0; e < d; e++)
                        o[e] += pr[j] * vg[j * d + e];
                }
                double delta = 0;
                for (int64_t e = 0; e < d; e++)
                    delta += dor[e] * o[e];
                for (int64_t j = 0; j < nvis; j++) {
                    int64_t kj = cu_k[b] + j;
                    double dp = 0;
                    for (int64_t e = 0; e < d; e++)
                        dp += dor[e] * vg[j * d + e];
                    double ds = pr[j] * (dp - delta);
                    double *gkj = &gk[(kj * hkv + g) * d], *gvj = &gv[(kj * hkv + g) * d];
                    for (int64_t e = 0; e < d; e++) {
                        gq[e] += ds * kg[j * d + e];
                        gkj[e] += ds * qr[e];
                        gvj[e] += pr[j] * dor[e];
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
    free(pr), free(o), free(gk), free(gv), free(gq), free(qr), free(dor), free(kg), free(vg);
    return MXFA_OK;
}
