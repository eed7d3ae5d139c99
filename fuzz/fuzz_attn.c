/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The argument checking of the attention and product entry points: tensor
 * descriptors, cu_seqlens, head counts, head dims and parameters chosen by
 * the fuzzer (descriptors backed by memory or invalid by the contract).
 * Every call must either refuse with a message, leaving its outputs as they
 * were, or compute; where it computes, ref and cpu must write the same
 * bytes.
 */
#include <stdio.h>

#include "fuzz.h"

static mxfa_ctx *ref, *cpu;

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_attn: %s\n", what);
    abort();
}

static void forward(fuzz_in *in)
{
    fuzz_attn_problem a;
    if (!take_attn_problem(in, &a))
        return;
    const int64_t qs[3] = {a.tq, a.hq, a.d}, ks[3] = {a.tk, a.hkv, a.d}, ls[2] = {a.tq, a.hq};
    int64_t bq, bk, bv, bo, bl;
    mxfa_tensor q = take_tensor_nd(in, MXFA_F32, 3, qs, 0, &bq), k = take_tensor_nd(in, MXFA_F32, 3, ks, 0, &bk);
    mxfa_tensor v = take_tensor_nd(in, MXFA_F32, 3, ks, 0, &bv);
    mxfa_tensor o[2], l[2];
    o[0] = take_tensor_nd(in, take8(in) & 1 ? MXFA_BF16 : MXFA_F32, 3, qs, 1, &bo);
    l[0] = take_tensor_nd(in, MXFA_F32, 2, ls, 1, &bl);
    if (bq == -2 || bk == -2 || bv == -2 || bo == -2 || bl == -2 || (bq > 0 && bq + bk + bv > (1 << 20)))
        goto done;
    tame_floats(&q, bq), tame_floats(&k, bk), tame_floats(&v, bv);
    o[1] = o[0], l[1] = l[0];
    o[1].data = malloc(bo > 0 ? (size_t)bo : 1), l[1].data = malloc(bl > 0 ? (size_t)bl : 1);
    memset(o[1].data, 0xA5, bo > 0 ? (size_t)bo : 1), memset(l[1].data, 0xA5, bl > 0 ? (size_t)bl : 1);
    int alias = take8(in) == 1; /* O over Q: must be refused */
    mxfa_status st[2];
    mxfa_ctx *ctx[2] = {ref, cpu};
    for (int i = 0; i < 2; i++) {
        mxfa_tensor oi = o[i];
        if (alias)
            oi.data = q.data;
        st[i] = mxfa_attn_fwd(ctx[i], &a.p, &q, &k, &v, a.jagged ? a.cuq : NULL, a.jagged ? a.cuk : NULL,
                              a.jagged ? a.batch : 1, &oi, &l[i]);
        if (st[i] != MXFA_OK && !mxfa_last_error(ctx[i])[0])
            fail("a refusal without a message");
    }
    if (st[0] != st[1])
        fail("ref and cpu disagree on the status");
    if (alias && st[0] == MXFA_OK)
        fail("O aliasing Q was accepted");
    if (st[0] != MXFA_OK && (!untouched(&o[0], bo) || !untouched(&l[0], bl) || !untouched(&o[1], bo)))
        fail("a refused call wrote its output");
    if (st[0] == MXFA_OK && !alias &&
        ((bo > 0 && memcmp(o[0].data, o[1].data, (size_t)bo)) || (bl > 0 && memcmp(l[0].data, l[1].data, (size_t)bl))))
        fail("ref and cpu wrote different bytes");
    free(o[1].data), free(l[1].data);
done:
    free(q.data), free(k.data), free(v.data), free(o[0].data), free(l[0].data);
}

static void product(fuzz_in *in)
{
    int64_t m = take8(in) % 50 + 1, n = take8(in) % 50 + 1, kk = take8(in) % 80 + 1;
    mxfa_model model = (mxfa_model)(take8(in) % 5);
    mxfa_dtype fa = take8(in) & 1 ? MXFA_E5M2 : MXFA_E4M3, fb = take8(in) & 1 ? MXFA_E5M2 : MXFA_E4M3;
    int64_t kb = (kk + 31) / 32 + (take8(in) == 2);
    int64_t b1, b2, b3, b4, b5, b6;
    mxfa_tensor ad = take_tensor(in, fa, m, kk, 0, &b1), as = take_tensor(in, MXFA_E8M0, m, kb, 0, &b2);
    mxfa_tensor bd = take_tensor(in, fb, n, kk, 0, &b3), bs = take_tensor(in, MXFA_E8M0, n, kb, 0, &b4);
    mxfa_tensor c = take_tensor(in, MXFA_F32, m, n, 0, &b5), dd = take_tensor(in, MXFA_F32, m, n, 1, &b6);
    if (b1 == -2 || b2 == -2 || b3 == -2 || b4 == -2 || b5 == -2 || b6 == -2)
        goto done;
    tame_floats(&c, b5);
    mxfa_mx A = {ad, as, take8(in) % 4 == 3 ? MXFA_BLOCK_COL : MXFA_BLOCK_ROW, MXFA_LAYOUT_COMPACT};
    mxfa_mx B = {bd, bs, MXFA_BLOCK_ROW, take8(in) == 4 ? MXFA_LAYOUT_SWIZZLED : MXFA_LAYOUT_COMPACT};
    mxfa_tensor d2 = dd;
    d2.data = malloc(b6 > 0 ? (size_t)b6 : 1);
    memset(d2.data, 0xA5, b6 > 0 ? (size_t)b6 : 1);
    int withc = take8(in) & 1;
    mxfa_status s1 = mxfa_gemm(ref, &A, &B, withc ? &c : NULL, model, &dd);
    mxfa_status s2 = mxfa_gemm(cpu, &A, &B, withc ? &c : NULL, model, &d2);
    if (s1 != s2)
        fail("gemm: ref and cpu disagree on the status");
    if (s1 != MXFA_OK && (!untouched(&dd, b6) || !untouched(&d2, b6)))
        fail("gemm: a refused call wrote its output");
    if (s1 == MXFA_OK && b6 > 0 && memcmp(dd.data, d2.data, (size_t)b6))
        fail("gemm: ref and cpu wrote different bytes");
    free(d2.data);
done:
    free(ad.data), free(as.data), free(bd.data), free(bs.data), free(c.data), free(dd.data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ref && (mxfa_open(&ref, "ref") != MXFA_OK || mxfa_open(&cpu, "cpu") != MXFA_OK))
        fail("cannot open the backends");
    fuzz_in in = {data, size};
    if (take8(&in) & 1)
        forward(&in);
    else
        product(&in);
    return 0;
}
