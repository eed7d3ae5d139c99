/* SPDX-License-Identifier: BSD-3-Clause */
/* mxfa study: the inputs, synthetic or the user's, and the float64 truth (study.h). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "study.h"

const char *const data_names[] = {"normal", "k-outliers", "sink", "user"};

/* ---- inputs ---- */




void inputs_free(inputs *in)
{
    free(in->q), free(in->k), free(in->v), free(in->dout), free(in->cuq), free(in->cuk);
    memset(in, 0, sizeof *in);
}

static uint64_t rng_state;

static double gauss(void)
{
    return cli_gauss(&rng_state);
}

static float *randn(int64_t n)
{
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; x && i < n; i++)
        x[i] = (float)gauss();
    return x;
}


/* 0, or an exit status */
int make_inputs(data_kind kind, int64_t s, double outlier, uint64_t seed, inputs *in)
{
    rng_state = seed * 0x2545F4914F6CDD1Du + 1;
    in->sq = in->sk = s;
    in->hq = in->hkv = DEMO_HEADS;
    in->d = DEMO_DIM;
    in->batch = 1;
    in->data = kind, in->outlier = outlier;
    int64_t n = s * DEMO_HEADS * DEMO_DIM;
    in->q = randn(n), in->k = randn(n), in->v = randn(n), in->dout = randn(n);
    if (!in->q || !in->k || !in->v || !in->dout) {
        inputs_free(in);
        return cli_error(cmd, "out of memory");
    }
    const int64_t d = DEMO_DIM;
    if (kind == DATA_OUTLIER) /* channels 5 and 40 of every key and head */
        for (int64_t t = 0; t < s * DEMO_HEADS; t++) {
            in->k[t * d + 5] *= (float)outlier;
            in->k[t * d + 40] *= (float)outlier;
        }
    if (kind == DATA_SINK) { /* a shared direction u: queries lean on it, key 0 lies along it */
        double u[DEMO_DIM], norm = 0;
        for (int64_t e = 0; e < d; e++) {
            u[e] = gauss();
            norm += u[e] * u[e];
        }
        for (int64_t e = 0; e < d; e++)
            u[e] /= sqrt(norm);
        for (int64_t h = 0; h < DEMO_HEADS; h++) {
            for (int64_t e = 0; e < d; e++)
                in->k[h * d + e] = (float)(48 * u[e]);
            for (int64_t t = 0; t < s; t++)
                for (int64_t e = 0; e < d; e++)
                    in->q[(t * DEMO_HEADS + h) * d + e] += (float)(2 * u[e]);
        }
    }
    return 0;
}

/* The user's tensors, and the offsets of a packed batch (cu_q and cu_k
 * both given or both NULL). 0 or an exit status. */
int load_user(const char *pq, const char *pk, const char *pv, const char *pdo, const char *cu_q,
              const char *cu_k, inputs *in)
{
    npy_array q = {0}, k = {0}, v = {0}, dout = {0};
    int rc = cli_read_npy(cmd, "Q", pq, NPY_F32, 3, NULL, &q);
    if (!rc) {
        int64_t kshape[3] = {-1, -1, q.shape[2]};
        rc = cli_read_npy(cmd, "K", pk, NPY_F32, 3, kshape, &k);
    }
    if (!rc)
        rc = cli_read_npy(cmd, "V", pv, NPY_F32, 3, k.shape, &v);
    if (!rc && pdo)
        rc = cli_read_npy(cmd, "dO", pdo, NPY_F32, 3, q.shape, &dout);
    if (!rc && q.shape[2] != 64 && q.shape[2] != 128 && q.shape[2] != 256)
        rc = cli_error(cmd, "%s: head dimension %lld is not supported (64, 128 or 256)", pq, (long long)q.shape[2]);
    if (!rc && q.shape[1] % k.shape[1] != 0)
        rc = cli_error(cmd, "%s: %lld query heads are not a multiple of the %lld key/value heads of %s", pq,
                       (long long)q.shape[1], (long long)k.shape[1], pk);
    in->batch = 1;
    if (!rc && cu_q)
        rc = cli_read_cu_seqlens(cmd, cu_q, cu_k, &in->cuq, &in->cuk, &in->batch);
    if (!rc) {
        in->sq = q.shape[0], in->hq = q.shape[1], in->d = q.shape[2], in->sk = k.shape[0], in->hkv = k.shape[1];
        in->data = DATA_USER, in->outlier = 0;
        in->q = q.data, in->k = k.data, in->v = v.data;
        q.data = k.data = v.data = NULL;
        if (pdo) {
            in->dout = dout.data;
            dout.data = NULL;
        } else {
            rng_state = 0x5EED;
            if (!(in->dout = randn(in->sq * in->hq * in->d)))
                rc = cli_error(cmd, "out of memory");
        }
    }
    npy_free(&q), npy_free(&k), npy_free(&v), npy_free(&dout);
    if (rc)
        inputs_free(in);
    return rc;
}

static mxfa_tensor t3(void *data, mxfa_dtype dt, int64_t a, int64_t b, int64_t c)
{
    mxfa_tensor t = {data, dt, MXFA_MEM_HOST, 3, {a, b, c}, {b * c, c, 1}};
    return t;
}

static mxfa_tensor t2(void *data, mxfa_dtype dt, int64_t a, int64_t b)
{
    mxfa_tensor t = {data, dt, MXFA_MEM_HOST, 2, {a, b}, {b, 1}};
    return t;
}

/* Descriptors of the inputs (q, k, v, dout) and of the five outputs of
 * dtype dt (O, LSE, dQ, dK, dV, in the order of the T_ indices below). */
void input_tensors(const inputs *in, mxfa_tensor t[4])
{
    t[0] = t3(in->q, MXFA_F32, in->sq, in->hq, in->d);
    t[1] = t3(in->k, MXFA_F32, in->sk, in->hkv, in->d);
    t[2] = t3(in->v, MXFA_F32, in->sk, in->hkv, in->d);
    t[3] = t3(in->dout, MXFA_F32, in->sq, in->hq, in->d);
}

void output_tensors(const inputs *in, mxfa_dtype dt, void *o, void *lse, void *dq, void *dk, void *dv,
                    mxfa_tensor t[5])
{
    t[0] = t3(o, dt, in->sq, in->hq, in->d);
    t[1] = t2(lse, dt, in->sq, in->hq);
    t[2] = t3(dq, dt, in->sq, in->hq, in->d);
    t[3] = t3(dk, dt, in->sk, in->hkv, in->d);
    t[4] = t3(dv, dt, in->sk, in->hkv, in->d);
}

/* ---- the float64 truth, once per (inputs, causal mode) ---- */


void truth_free(truth *t)
{
    free(t->o), free(t->lse), free(t->dq), free(t->dk), free(t->dv);
    memset(t, 0, sizeof *t);
}

int make_truth(mxfa_ctx *ctx, const inputs *in, mxfa_causal causal, truth *t)
{
    mxfa_attn_params p;
    mxfa_attn_params_default(&p);
    p.causal = causal;
    int64_t nq = in->sq * in->hq * in->d, nk = in->sk * in->hkv * in->d;
    t->o = malloc((size_t)nq * 8), t->dq = malloc((size_t)nq * 8), t->lse = malloc((size_t)(in->sq * in->hq) * 8);
    t->dk = malloc((size_t)nk * 8), t->dv = malloc((size_t)nk * 8);
    t->causal = causal;
    if (!t->o || !t->dq || !t->lse || !t->dk || !t->dv) {
        truth_free(t);
        return cli_error(cmd, "out of memory");
    }
    mxfa_tensor x[4], y[5];
    input_tensors(in, x);
    output_tensors(in, MXFA_F64, t->o, t->lse, t->dq, t->dk, t->dv, y);
    if (mxfa_attn_fwd_f64(ctx, &p, &x[0], &x[1], &x[2], in->cuq, in->cuk, in->batch, &y[0], &y[1]) != MXFA_OK ||
        mxfa_attn_bwd_f64(ctx, &p, &x[0], &x[1], &x[2], &x[3], in->cuq, in->cuk, in->batch, &y[2], &y[3], &y[4]) !=
            MXFA_OK) {
        truth_free(t);
        return cli_error(cmd, "float64 truth: %s", mxfa_last_error(ctx));
    }
    return 0;
}
