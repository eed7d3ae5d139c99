/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The cuda backend against ref, byte for byte: quantization of every block
 * shape, preset, element format and source dtype on random sizes (ragged
 * ones included), on contiguous, padded and transposed views, with NaN,
 * Inf, zeros, subnormals, huge values and rounding ties in the data;
 * dequantization to f32 and bf16; jagged quantization; the layouts
 * (transpose, square-scale expansion, swizzle, unswizzle, jagged scatter
 * and gather); the block-scaled product under sm90-fp8 and sm90-bf16 (every pairing of
 * E4M3 and E5M2, scales near 1, anywhere and NaN, C absent, separate or
 * D itself); attention forward and backward against the cpu backend.
 * Each case runs once on device memory and once on host
 * memory (which the backend stages through the device). Every output
 * buffer, including the bytes between strided elements, must match.
 * Reports SKIP where no usable cuda backend is built.
 *
 * MXFA_TCUDA_ONLY=TEXT runs only the groups of cases whose name holds TEXT
 * (the others are reported as skipped), for a device run with one purpose;
 * the groups share one random stream, so a narrowed run draws other cases
 * than the whole one.
 *
 * The families of cases live in tests/cuda/, one file each; this file runs
 * them in a fixed order and holds the checks of the backend's contract.
 */
#define TAP_SHARED_DEFINE
#include "cuda/harness.h"

static void run_cases_against(const char *name, case_fn f, int n, const char *against)
{
    char what[1024];
    int failed = 0;
    if (!wanted(name))
        return;
    for (int t = 0; t < n; t++)
        for (int device = 0; device < 2; device++)
            if (!f(t, device, what, sizeof what) && failed++ < 5)
                diag("%s", what);
    ok(failed == 0, "%s: %d random cases on device and host memory, every byte as %s (%d differ)", name, 2 * n,
       against, failed);
}

static void run_cases(const char *name, case_fn f, int n)
{
    run_cases_against(name, f, n, "ref's");
}

int main(void)
{
    char why[512];
    if (!mxfa_backend_usable("cuda", why, sizeof why))
        skip_all(why);
    rng_seed_from_env(11);
    if (!ok(mxfa_open(&ref, "ref") == MXFA_OK && mxfa_open(&gpu, "cuda") == MXFA_OK && mxfa_open(&cpu, "cpu") == MXFA_OK,
            "open ref, cpu and cuda"))
        return done_testing();
    char gpu_name[256] = "";
    const mxfa_status info = mxfa_device_info(gpu, &gpu_arch, gpu_name, sizeof gpu_name);
    ok(info == MXFA_OK && (gpu_arch == 90 || gpu_arch == 100) && gpu_name[0],
       "the device: %s, compute capability %d.%d", gpu_name, gpu_arch / 10, gpu_arch % 10);
    run_cases("quantize and dequantize", quantize_case, 400);
    run_cases("jagged quantize, scatter and gather", jagged_case, 100);
    run_cases("transpose, expand, swizzle and unswizzle", layout_case, 100);
    run_cases("wide swizzle, unswizzle, scatter, gather and transposes", wide_layout_case, 40);
    if (gpu_is_hopper()) {
        run_cases("gemm under sm90-fp8 and sm90-bf16", gemm_case, 80);
        run_cases_against("attention forward under sm90-fp8 (D = 64, 128, 256)", attn_case, 40, "the cpu backend's");
        run_cases_against("attention forward under sm90-bf16 (D = 64, 128, 256; key tiles of 64 and 128)", attn_bf16_case, 60,
                          "the cpu backend's");
        run_cases_against("attention forward, a row whose first tiles' scores are all -Inf and a NaN or Inf in "
                          "their V (the reference skips those tiles for that row)", attn_unseen_case, 12,
                          "the cpu backend's");
        setenv("MXFA_BWD_COMPOSED", "1", 1); /* the composition under both models */
        run_cases_against("attention backward under sm90-fp8 and sm90-bf16 (D = 64, 128, 256)", bwd_case, 40,
                          "the cpu backend's");
        /* the passes a long sequence takes, one query tile each: dV's and
         * dK's chains carried from pass to pass */
        setenv("MXFA_BWD_PASS_TILES", "1", 1);
        run_cases_against("attention backward composed in passes of one query tile", bwd_case, 30,
                          "the cpu backend's");
        unsetenv("MXFA_BWD_PASS_TILES");
        unsetenv("MXFA_BWD_COMPOSED");
        setenv("MXFA_BWD_FUSED", "1", 1); /* each of these calls must take the fused kernel */
        run_cases_against("attention backward under sm90-bf16, the fused kernel's cases (D = 64, 128, 256; every mask)",
                          bwd_fused_bf16_case, 60,
                          "the cpu backend's (and two runs on different grids, every byte the same)");
        run_cases_against("attention backward under sm90-fp8, the fused kernel's cases (D = 64, 128; every mask)",
                          bwd_fused_fp8_case, 60,
                          "the cpu backend's (and two runs on different grids, every byte the same)");
        unsetenv("MXFA_BWD_MAX_CTAS");
        unsetenv("MXFA_BWD_FUSED");
        big_gemm(MXFA_MODEL_SM90_FP8);
        big_gemm(MXFA_MODEL_SM90_BF16);
    } else {
        skip("gemm under sm90-fp8 and sm90-bf16: the device is not a Hopper GPU");
    }

    /* a large aligned matrix: the vector path of row blocks */
    {
        const int64_t rows = 512, cols = 4096;
        buf x = buf_new((size_t)(rows * cols) * 4, 0);
        fill_source(&x, MXFA_F32, (size_t)(rows * cols));
        buf d[2] = {buf_new((size_t)(rows * cols), 0), buf_new((size_t)(rows * cols), 0)};
        buf s[2] = {buf_new((size_t)(rows * cols / 32), 0), buf_new((size_t)(rows * cols / 32), 0)};
        int good = 1;
        for (int p = 0; p < 4; p++) {
            mxfa_ctx *ctx[2] = {ref, gpu};
            for (int i = 0; i < 2; i++) {
                mxfa_tensor xt = t2(&x, i, MXFA_F32, rows, cols, cols, 1);
                mxfa_mx q = {t2(&d[i], i, MXFA_E4M3, rows, cols, cols, 1),
                             t2(&s[i], i, MXFA_E8M0, rows, cols / 32, cols / 32, 1), MXFA_BLOCK_ROW,
                             MXFA_LAYOUT_COMPACT};
                good &= mxfa_quantize(ctx[i], &xt, (mxfa_preset)p, &q) == MXFA_OK;
            }
            fetch(&d[1]), fetch(&s[1]);
            good &= same(&d[0], &d[1]) && same(&s[0], &s[1]);
        }
        ok(good, "a 512 x 4096 f32 matrix in row blocks, every preset: every byte as ref's");
        buf_free(&x);
        for (int i = 0; i < 2; i++)
            buf_free(&d[i]), buf_free(&s[i]);
    }

    /* mxfa_scratch_peak: a call on host memory stages its tensors through the
     * device's scratch, all held at once, so the mark after it is at least
     * their bytes; a mark reset with no call since reads 0 */
    {
        const int64_t rows = 256, cols = 4096;
        float *hx = malloc((size_t)(rows * cols) * 4);
        uint8_t *hc = malloc((size_t)(rows * cols)), *hs = malloc((size_t)(rows * cols / 32));
        size_t after = 0, idle = 1;
        int good = hx && hc && hs && mxfa_synchronize(gpu) == MXFA_OK && mxfa_scratch_peak(gpu, &after, 1) == MXFA_OK;
        if (good) {
            for (int64_t i = 0; i < rows * cols; i++)
                hx[i] = (float)(i % 97) - 48.0f;
            mxfa_tensor xt = mxfa_tensor_2d(hx, MXFA_F32, rows, cols);
            mxfa_mx q = {mxfa_tensor_2d(hc, MXFA_E4M3, rows, cols), mxfa_tensor_2d(hs, MXFA_E8M0, rows, cols / 32),
                         MXFA_BLOCK_ROW, MXFA_LAYOUT_COMPACT};
            good = mxfa_quantize(gpu, &xt, MXFA_PRESET_RCEIL, &q) == MXFA_OK && mxfa_synchronize(gpu) == MXFA_OK &&
                   mxfa_scratch_peak(gpu, &after, 1) == MXFA_OK && mxfa_scratch_peak(gpu, &idle, 0) == MXFA_OK;
        }
        const size_t staged = (size_t)(rows * cols) * 5 + (size_t)(rows * cols / 32);
        ok(good && after >= staged && idle == 0,
           "mxfa_scratch_peak: a quantization on host memory held at least its %zu staged bytes (%zu), none since "
           "the reset (%zu)", staged, after, idle);
        free(hx), free(hc), free(hs);
    }

    /* the contract on this backend */
    {
        float h[64] = {0};
        uint8_t c[64], sc[2];
        mxfa_tensor xt = mxfa_tensor_2d(h, MXFA_F32, 1, 64);
        mxfa_mx q = {mxfa_tensor_2d(c, MXFA_E4M3, 1, 64), mxfa_tensor_2d(sc, MXFA_E8M0, 1, 2), MXFA_BLOCK_ROW,
                     MXFA_LAYOUT_COMPACT};
        q.data.memory = MXFA_MEM_DEVICE; /* a lie: host memory */
        mxfa_status st = mxfa_quantize(gpu, &xt, MXFA_PRESET_RCEIL, &q);
        ok(st == MXFA_ERR_INVALID && strstr(mxfa_last_error(gpu), "device"),
           "host memory declared as device memory -> %s (%s)", mxfa_strerror(st), mxfa_last_error(gpu));
        uint8_t a[64] = {0}, sa[2] = {127, 127};
        float dd[1] = {1.0f};
        mxfa_mx A = {mxfa_tensor_2d(a, MXFA_E4M3, 1, 64), mxfa_tensor_2d(sa, MXFA_E8M0, 1, 2), MXFA_BLOCK_ROW,
                     MXFA_LAYOUT_COMPACT};
        mxfa_tensor D = mxfa_tensor_2d(dd, MXFA_F32, 1, 1);
        st = mxfa_gemm(gpu, &A, &A, NULL, MXFA_MODEL_IDEAL, &D);
        ok(st == MXFA_ERR_UNSUPPORTED && dd[0] == 1.0f, "a model the backend does not compute is refused: %s",
           mxfa_last_error(gpu));
        if (gpu_arch != 100) {
            st = mxfa_gemm(gpu, &A, &A, NULL, MXFA_MODEL_SM100, &D);
            ok(st == MXFA_ERR_UNSUPPORTED && dd[0] == 1.0f && strstr(mxfa_last_error(gpu), "Blackwell"),
               "the sm100 product on a GPU of compute capability %d.%d is refused: %s", gpu_arch / 10, gpu_arch % 10,
               mxfa_last_error(gpu));
        }
        uint16_t h16[16] = {0};
        mxfa_tensor H = mxfa_tensor_2d(h16, MXFA_BF16, 1, 16);
        st = mxfa_mma_chain(gpu, MXFA_INSTR_SM90_WGMMA_BF16, &H, &H, NULL, &D);
        ok(st == MXFA_ERR_UNSUPPORTED && dd[0] == 1.0f, "what the backend does not do yet is refused: %s",
           mxfa_last_error(gpu));
        /* attention under a model the kernel does not compute: refused, O untouched */
        buf x3 = buf_new(256 * 4, 0), o3 = buf_new(256 * 4, 0xA5), o3_before = buf_new(256 * 4, 0xA5);
        mxfa_attn_params ap;
        mxfa_attn_params_default(&ap);
        ap.model = MXFA_MODEL_IDEAL;
        const int32_t cu1[2] = {0, 1};
        mxfa_tensor xq = t3(&x3, 0, MXFA_F32, 1, 1, 256), xo = t3(&o3, 0, MXFA_F32, 1, 1, 256);
        st = mxfa_attn_fwd(gpu, &ap, &xq, &xq, &xq, cu1, cu1, 1, &xo, NULL);
        ok(st == MXFA_ERR_UNSUPPORTED && same(&o3, &o3_before) && strstr(mxfa_last_error(gpu), "sm90-fp8"),
           "attention under ideal is refused and O untouched: %s", mxfa_last_error(gpu));
        /* the sm100 kernel runs on Blackwell only */
        ap.model = MXFA_MODEL_SM100;
        if (gpu_arch != 100) {
            st = mxfa_attn_fwd(gpu, &ap, &xq, &xq, &xq, cu1, cu1, 1, &xo, NULL);
            ok(st == MXFA_ERR_UNSUPPORTED && same(&o3, &o3_before) && strstr(mxfa_last_error(gpu), "Blackwell") &&
                   (gpu_arch != 90 || strstr(mxfa_last_error(gpu), "sm90-bf16")),
               "attention under sm100 on a GPU of compute capability %d.%d is refused (on Hopper naming sm90-bf16) "
               "and O untouched: %s", gpu_arch / 10, gpu_arch % 10, mxfa_last_error(gpu));
        }
        /* the backward pass under a model it does not compute: refused, dQ untouched */
        float lse1[1] = {0.0f};
        mxfa_tensor xl = mxfa_tensor_2d(lse1, MXFA_F32, 1, 1);
        buf k3 = buf_new(256 * 4, 0xA5), v3 = buf_new(256 * 4, 0xA5);
        mxfa_tensor xk = t3(&k3, 0, MXFA_F32, 1, 1, 256), xv = t3(&v3, 0, MXFA_F32, 1, 1, 256);
        ap.model = MXFA_MODEL_IDEAL;
        st = mxfa_attn_bwd(gpu, &ap, &xq, &xq, &xq, &xq, &xq, &xl, cu1, cu1, 1, &xo, &xk, &xv);
        ok(st == MXFA_ERR_UNSUPPORTED && same(&o3, &o3_before) && strstr(mxfa_last_error(gpu), "ideal"),
           "attention backward under ideal is refused and dQ untouched: %s", mxfa_last_error(gpu));
        if (gpu_arch != 100) {
            ap.model = MXFA_MODEL_SM100;
            st = mxfa_attn_bwd(gpu, &ap, &xq, &xq, &xq, &xq, &xq, &xl, cu1, cu1, 1, &xo, &xk, &xv);
            ok(st == MXFA_ERR_UNSUPPORTED && same(&o3, &o3_before) && strstr(mxfa_last_error(gpu), "Blackwell"),
               "attention backward under sm100 on a GPU of compute capability %d.%d is refused and dQ untouched: %s",
               gpu_arch / 10, gpu_arch % 10, mxfa_last_error(gpu));
        }
        buf_free(&k3), buf_free(&v3);
        buf_free(&x3), buf_free(&o3), buf_free(&o3_before);
        ok(mxfa_synchronize(gpu) == MXFA_OK, "the stream ends without an error");
    }
    mxfa_close(ref);
    mxfa_close(cpu);
    mxfa_close(gpu);
    return done_testing();
}
