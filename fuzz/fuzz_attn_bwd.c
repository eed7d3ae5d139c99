/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The argument checking of attention backward (mxfa_attn_bwd with dense or
 * MXFP8 dK and dV) and of the float64 truths (mxfa_attn_fwd_f64,
 * mxfa_attn_bwd_f64): shapes, strides, head counts, head dims, cu_seqlens,
 * parameters, output dtypes and outputs aliasing inputs or each other, all
 * chosen by the fuzzer. Every call must either refuse with a message,
 * leaving all of its outputs as they were, or compute; ref and cpu must
 * agree on the status and on every byte written.
 */
#include <stdio.h>

#include "fuzz.h"

static mxfa_ctx *ref, *cpu;

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_attn_bwd: %s\n", what);
    abort();
}

enum { CALL_BWD, CALL_BWD_MX, CALL_BWD_F64, CALL_FWD_F64, NCALLS };
enum { NOUT = 5 }; /* dq, dk data, dk scales, dv data, dv scales (or o, lse) */

static mxfa_dtype take_float_type(fuzz_in *in, int call)
{
    if (call == CALL_BWD_F64 || call == CALL_FWD_F64)
        return take8(in) == 2 ? MXFA_F32 : MXFA_F64; /* f32: refused */
    uint8_t b = take8(in);
    return b == 2 ? MXFA_E4M3 : b & 1 ? MXFA_BF16 : MXFA_F32; /* e4m3: refused */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ref && (mxfa_open(&ref, "ref") != MXFA_OK || mxfa_open(&cpu, "cpu") != MXFA_OK))
        fail("cannot open the backends");
    fuzz_in in = {data, size};
    int call = take8(&in) % NCALLS;
    fuzz_attn_problem a;
    if (!take_attn_problem(&in, &a))
        return 0;
    /* the reference emulates every product: keep an input under ~0.1 s */
    if (a.tq * a.tk * a.hq * (a.d > 0 ? a.d : 1) > (1 << 20))
        return 0;
    const int64_t qs[3] = {a.tq, a.hq, a.d}, ks[3] = {a.tk, a.hkv, a.d}, ls[2] = {a.tq, a.hq};
    /* square-block scale rows of dK and dV: ceil(len / 32) per sequence */
    int64_t srows = 0;
    for (int b = 0; b < (a.jagged ? a.batch : 1); b++) {
        int64_t len = a.jagged ? a.cuk[b + 1] - a.cuk[b] : a.tk;
        srows += len > 0 ? (len + 31) / 32 : 0;
    }
    srows += take8(&in) == 6; /* one scale row too many */
    const int64_t ss[3] = {srows > 0 ? srows : 1, a.hkv, a.d / 32 > 0 ? a.d / 32 : 1};

    int64_t nin[6];
    mxfa_tensor x[6]; /* q, k, v, o, dout, lse */
    x[0] = take_tensor_nd(&in, take_float_type(&in, CALL_BWD), 3, qs, 0, &nin[0]);
    x[1] = take_tensor_nd(&in, take_float_type(&in, CALL_BWD), 3, ks, 0, &nin[1]);
    x[2] = take_tensor_nd(&in, take_float_type(&in, CALL_BWD), 3, ks, 0, &nin[2]);
    x[3] = take_tensor_nd(&in, take_float_type(&in, CALL_BWD), 3, qs, 0, &nin[3]);
    x[4] = take_tensor_nd(&in, take_float_type(&in, CALL_BWD), 3, qs, 0, &nin[4]);
    x[5] = take_tensor_nd(&in, take8(&in) == 3 ? MXFA_BF16 : MXFA_F32, 2, ls, 0, &nin[5]);

    int64_t nout[NOUT];
    mxfa_tensor out[2][NOUT];
    mxfa_dtype fp8 = take8(&in) & 1 ? MXFA_E5M2 : MXFA_E4M3;
    if (call == CALL_FWD_F64) {
        out[0][0] = take_tensor_nd(&in, take_float_type(&in, call), 3, qs, 1, &nout[0]);
        out[0][1] = take_tensor_nd(&in, take_float_type(&in, call), 2, ls, 1, &nout[1]);
    } else {
        out[0][0] = take_tensor_nd(&in, take_float_type(&in, call), 3, qs, 1, &nout[0]);
        for (int j = 1; j < NOUT; j += 2) {
            if (call == CALL_BWD_MX) {
                out[0][j] = take_tensor_nd(&in, fp8, 3, ks, 1, &nout[j]);
                out[0][j + 1] = take_tensor_nd(&in, MXFA_E8M0, 3, ss, 1, &nout[j + 1]);
            } else {
                out[0][j] = take_tensor_nd(&in, take_float_type(&in, call), 3, ks, 1, &nout[j]);
            }
        }
    }
    int used = call == CALL_FWD_F64 ? 2 : call == CALL_BWD_MX ? NOUT : 3;
    if (call == CALL_BWD_F64 || call == CALL_BWD)
        out[0][2] = out[0][3], nout[2] = nout[3]; /* dense dk, dv at 1, 2 */
    int64_t total = 0;
    for (int i = 0; i < 6; i++)
        total |= nin[i] == -2 ? -2 : 0;
    for (int j = 0; j < used; j++)
        total |= nout[j] == -2 ? -2 : 0;
    if (total == -2)
        goto done;
    for (int i = 0; i < 6; i++)
        tame_floats(&x[i], nin[i]);
    mxfa_block block = take8(&in) == 4 ? MXFA_BLOCK_ROW : MXFA_BLOCK_SQUARE; /* row: refused */
    /* an output over an input (dQ over dO) or over another output (dV over
     * dK): refused in either case */
    uint8_t alias = take8(&in);
    int no_lse = take8(&in) & 1;

    for (int j = 0; j < used; j++) {
        out[1][j] = out[0][j];
        size_t n = nout[j] > 0 ? (size_t)nout[j] : 1;
        out[1][j].data = malloc(n);
        memset(out[1][j].data, 0xA5, n);
    }
    mxfa_ctx *ctx[2] = {ref, cpu};
    mxfa_status st[2];
    const int32_t *cq = a.jagged ? a.cuq : NULL, *ck = a.jagged ? a.cuk : NULL;
    int nb = a.jagged ? a.batch : 1;
    for (int i = 0; i < 2; i++) {
        mxfa_tensor o[NOUT];
        memcpy(o, out[i], sizeof o);
        if (alias == 1)
            o[0].data = x[4].data;
        if (alias == 2 && call != CALL_FWD_F64)
            o[call == CALL_BWD_MX ? 3 : 2].data = o[1].data;
        mxfa_mx dk = {o[1], o[2], block, MXFA_LAYOUT_COMPACT}, dv = {o[3], o[4], block, MXFA_LAYOUT_COMPACT};
        switch (call) {
        case CALL_BWD:
            st[i] = mxfa_attn_bwd(ctx[i], &a.p, &x[0], &x[1], &x[2], &x[3], &x[4], &x[5], cq, ck, nb, &o[0], &o[1],
                                  &o[2]);
            break;
        case CALL_BWD_MX:
            st[i] = mxfa_attn_bwd_mx(ctx[i], &a.p, &x[0], &x[1], &x[2], &x[3], &x[4], &x[5], cq, ck, nb, &o[0],
                                     &dk, &dv);
            break;
        case CALL_BWD_F64:
            st[i] = mxfa_attn_bwd_f64(ctx[i], &a.p, &x[0], &x[1], &x[2], &x[4], cq, ck, nb, &o[0], &o[1], &o[2]);
            break;
        default:
            st[i] = mxfa_attn_fwd_f64(ctx[i], &a.p, &x[0], &x[1], &x[2], cq, ck, nb, &o[0], no_lse ? NULL : &o[1]);
            break;
        }
        if (st[i] != MXFA_OK && !mxfa_last_error(ctx[i])[0])
            fail("a refusal without a message");
    }
    if (st[0] != st[1])
        fail("ref and cpu disagree on the status");
    if (alias == 1 && st[0] == MXFA_OK)
        fail("dQ over dO was accepted");
    if (alias == 2 && call != CALL_FWD_F64 && st[0] == MXFA_OK)
        fail("dV over dK was accepted");
    for (int j = 0; j < used; j++) {
        if (st[0] != MXFA_OK && (!untouched(&out[0][j], nout[j]) || !untouched(&out[1][j], nout[j])))
            fail("a refused call wrote an output");
        if (st[0] == MXFA_OK && nout[j] > 0 && memcmp(out[0][j].data, out[1][j].data, (size_t)nout[j]))
            fail("ref and cpu wrote different bytes");
    }
    for (int j = 0; j < used; j++)
        free(out[1][j].data);
done:
    for (int i = 0; i < 6; i++)
        free(x[i].data);
    for (int j = 0; j < used; j++)
        free(out[0][j].data);
    return 0;
}
