/* SPDX-License-Identifier: BSD-3-Clause */
/* t-cuda: the block-scaled product under the Hopper models. */
#include <math.h>

#include "harness.h"

static int64_t gemm_dim(int64_t hi)
{
    return rng_below(3) == 0 ? 1 + rng_below(40) : 1 + rng_below((uint32_t)hi);
}

int gemm_case(int trial, int device, char *what, size_t what_len)
{
    const int64_t M = gemm_dim(300), N = gemm_dim(300);
    const int64_t K = rng_below(3) == 0 ? 1 + rng_below(70) : rng_below(2) ? 32 * (1 + rng_below(24)) : 1 + rng_below(800);
    const int64_t nkb = (K + 31) / 32;
    const mxfa_dtype fa = rng_below(2) ? MXFA_E5M2 : MXFA_E4M3, fb = rng_below(2) ? MXFA_E5M2 : MXFA_E4M3;
    const int calm = rng_below(4) != 0, mode = (int)rng_below(3), cmode = (int)rng_below(3); /* C: none, own, D */
    const mxfa_model model = rng_below(2) ? MXFA_MODEL_SM90_BF16 : MXFA_MODEL_SM90_FP8;
    const layout2 al = pick_layout(M, K, (int)rng_below(3)), bl = pick_layout(N, K, (int)rng_below(3));
    const layout2 dl = pick_layout(M, N, (int)rng_below(2));
    snprintf(what, what_len, "trial %d: %s, M %lld N %lld K %lld, %s x %s, scales %s, C %s, A strides (%lld, %lld), "
             "B strides (%lld, %lld), %s memory", trial, mxfa_model_name(model), (long long)M, (long long)N, (long long)K,
             mxfa_dtype_name(fa), mxfa_dtype_name(fb), mode == 0 ? "near 1" : mode == 1 ? "anywhere" : "with NaN",
             cmode == 0 ? "none" : cmode == 1 ? "separate" : "is D", (long long)al.rs, (long long)al.cs,
             (long long)bl.rs, (long long)bl.cs, device ? "device" : "host");
    buf a = buf_new(al.elements, 0), b = buf_new(bl.elements, 0);
    buf sa = buf_new((size_t)(M * nkb), 0), sb = buf_new((size_t)(N * nkb), 0);
    buf c = buf_new(dl.elements * 4, 0);
    for (size_t i = 0; i < al.elements; i++)
        a.host[i] = draw_fp8_code(&rng_state, fa, calm);
    for (size_t i = 0; i < bl.elements; i++)
        b.host[i] = draw_fp8_code(&rng_state, fb, calm);
    for (size_t i = 0; i < sa.bytes; i++)
        sa.host[i] = draw_scale_code(&rng_state, mode);
    for (size_t i = 0; i < sb.bytes; i++)
        sb.host[i] = draw_scale_code(&rng_state, mode);
    for (size_t i = 0; i < dl.elements; i++) {
        uint32_t v = special_f32();
        if (calm && (v & 0x7F800000u) == 0x7F800000u)
            v &= 0x3FFFFFFFu;
        memcpy(c.host + 4 * i, &v, 4);
    }
    buf d[2] = {buf_new(dl.elements * 4, 0xA5), buf_new(dl.elements * 4, 0xA5)};
    if (cmode == 2)
        for (int i = 0; i < 2; i++)
            memcpy(d[i].host, c.host, c.bytes);
    mxfa_ctx *ctx[2] = {ref, gpu};
    mxfa_status st[2];
    for (int i = 0; i < 2; i++) {
        const int dev = i && device;
        mxfa_mx A = {t2(&a, dev, fa, M, K, al.rs, al.cs), t2(&sa, dev, MXFA_E8M0, M, nkb, nkb, 1), MXFA_BLOCK_ROW,
                     MXFA_LAYOUT_COMPACT};
        mxfa_mx B = {t2(&b, dev, fb, N, K, bl.rs, bl.cs), t2(&sb, dev, MXFA_E8M0, N, nkb, nkb, 1), MXFA_BLOCK_ROW,
                     MXFA_LAYOUT_COMPACT};
        mxfa_tensor D = t2(&d[i], dev, MXFA_F32, M, N, dl.rs, dl.cs);
        mxfa_tensor C = cmode == 1 ? t2(&c, dev, MXFA_F32, M, N, dl.rs, dl.cs) : D;
        st[i] = mxfa_gemm(ctx[i], &A, &B, cmode ? &C : NULL, model, &D);
        if (st[i] != MXFA_OK)
            snprintf(what + strlen(what), what_len - strlen(what), "; %s: %s", i ? "cuda" : "ref",
                     mxfa_last_error(ctx[i]));
    }
    fetch(&d[1]);
    int good = st[0] == MXFA_OK && st[1] == MXFA_OK && same(&d[0], &d[1]);
    if (!good && st[0] == MXFA_OK && st[1] == MXFA_OK)
        for (size_t i = 0; i < dl.elements; i++)
            if (memcmp(d[0].host + 4 * i, d[1].host + 4 * i, 4)) {
                uint32_t x, y;
                memcpy(&x, d[0].host + 4 * i, 4), memcpy(&y, d[1].host + 4 * i, 4);
                snprintf(what + strlen(what), what_len - strlen(what), "; first difference at element %zu: ref "
                         "%08x, cuda %08x", i, (unsigned)x, (unsigned)y);
                break;
            }
    buf_free(&a), buf_free(&b), buf_free(&sa), buf_free(&sb), buf_free(&c);
    buf_free(&d[0]), buf_free(&d[1]);
    return good;
}

/* Whether the device runs the sm90-fp8 product: a one-element product
 * either runs or is refused for want of a Hopper GPU. */
int gpu_is_hopper(void)
{
    uint8_t a[32] = {0x38}, s[1] = {127};
    float d[1] = {0};
    mxfa_mx A = {mxfa_tensor_2d(a, MXFA_E4M3, 1, 32), mxfa_tensor_2d(s, MXFA_E8M0, 1, 1), MXFA_BLOCK_ROW,
                 MXFA_LAYOUT_COMPACT};
    mxfa_tensor D = mxfa_tensor_2d(d, MXFA_F32, 1, 1);
    mxfa_status st = mxfa_gemm(gpu, &A, &A, NULL, MXFA_MODEL_SM90_FP8, &D);
    if (st == MXFA_ERR_UNSUPPORTED && strstr(mxfa_last_error(gpu), "Hopper"))
        return 0;
    ok(st == MXFA_OK && d[0] == 1.0f, "a one-element product on the GPU: 1 * 1 = %g (%s)", (double)d[0],
       st == MXFA_OK ? "ok" : mxfa_last_error(gpu));
    return 1;
}

/* Many tiles, many turns of the kernel's ring of stages and a ragged K:
 * against the cpu backend, which t-cpu holds to ref's bits,
 * because ref would take minutes here. */
void big_gemm(mxfa_model model)
{
    char name[64];
    snprintf(name, sizeof name, "gemm %s 700 x 900 x 2085", mxfa_model_name(model));
    if (!wanted(name))
        return;
    const int64_t M = 700, N = 900, K = 2085, nkb = (K + 31) / 32;
    buf a = buf_new((size_t)(M * K), 0), b = buf_new((size_t)(N * K), 0);
    buf sa = buf_new((size_t)(M * nkb), 0), sb = buf_new((size_t)(N * nkb), 0);
    buf d[2] = {buf_new((size_t)(M * N) * 4, 0), buf_new((size_t)(M * N) * 4, 0)};
    for (size_t i = 0; i < a.bytes; i++)
        a.host[i] = draw_fp8_code(&rng_state, MXFA_E4M3, 1);
    for (size_t i = 0; i < b.bytes; i++)
        b.host[i] = draw_fp8_code(&rng_state, MXFA_E4M3, 1);
    for (size_t i = 0; i < sa.bytes; i++)
        sa.host[i] = draw_scale_code(&rng_state, 0);
    for (size_t i = 0; i < sb.bytes; i++)
        sb.host[i] = draw_scale_code(&rng_state, 0);
    mxfa_ctx *ctx[2] = {cpu, gpu};
    int good = 1;
    for (int i = 0; i < 2; i++) {
        mxfa_mx A = {t2(&a, i, MXFA_E4M3, M, K, K, 1), t2(&sa, i, MXFA_E8M0, M, nkb, nkb, 1), MXFA_BLOCK_ROW,
                     MXFA_LAYOUT_COMPACT};
        mxfa_mx B = {t2(&b, i, MXFA_E4M3, N, K, K, 1), t2(&sb, i, MXFA_E8M0, N, nkb, nkb, 1), MXFA_BLOCK_ROW,
                     MXFA_LAYOUT_COMPACT};
        mxfa_tensor D = t2(&d[i], i, MXFA_F32, M, N, N, 1);
        if (mxfa_gemm(ctx[i], &A, &B, NULL, model, &D) != MXFA_OK) {
            diag("%s: %s", i ? "cuda" : "cpu", mxfa_last_error(ctx[i]));
            good = 0;
        }
    }
    fetch(&d[1]);
    ok(good && same(&d[0], &d[1]), "gemm %s %lld x %lld x %lld in device memory: every bit as the cpu backend's",
       mxfa_model_name(model), (long long)M, (long long)N, (long long)K);
    buf_free(&a), buf_free(&b), buf_free(&sa), buf_free(&sb), buf_free(&d[0]), buf_free(&d[1]);
}
