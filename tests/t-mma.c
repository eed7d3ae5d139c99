/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The numerics models on cases whose results are worked out by hand, the
 * derivation beside each: the single-instruction cases of
 * tests/data/mma_hand.txt (alignment width, truncation toward zero, the
 * accumulator in the alignment, unnormalized products, per-term
 * truncation, one group of 32, the 14-bit sum of sm90 fp8, the emax floor,
 * subnormals, zeros, NaN, Inf, overflow), then whole products under each
 * model with block scales (RZ against RNE, promotion, bf16 widening, groups
 * of 16 against 32, K not a multiple of 32), and the argument checks.
 */
#include <math.h>

#include "mma_hand.h"
#include "mxfa.h"
#include "tap.h"

static mxfa_ctx *ctx;

static void check_hand_cases(void)
{
    const char *srcdir = getenv("MXFA_SRCDIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/mma_hand.txt", srcdir && *srcdir ? srcdir : "..");
    hand_case cases[128];
    int n = hand_load(path, cases, 128);
    ok(n >= 30, "read %d hand-worked instruction cases", n);
    for (int i = 0; i < n; i++) {
        const hand_case *h = &cases[i];
        int bf16 = strcmp(h->instr, "bf16") == 0;
        int k = bf16 ? 16 : 32;
        uint8_t a8[32], b8[32];
        uint16_t ah[16], bh[16];
        for (int j = 0; j < k; j++) {
            a8[j] = (uint8_t)h->a[j];
            b8[j] = (uint8_t)h->b[j];
            if (bf16) {
                ah[j] = (uint16_t)h->a[j];
                bh[j] = (uint16_t)h->b[j];
            }
        }
        mxfa_dtype ta = strncmp(h->instr, "e4m3", 4) == 0 ? MXFA_E4M3 : MXFA_E5M2;
        mxfa_dtype tb = strcmp(h->instr + 5, "e4m3") == 0 ? MXFA_E4M3 : MXFA_E5M2;
        mxfa_tensor at = bf16 ? mxfa_tensor_2d(ah, MXFA_BF16, 1, k) : mxfa_tensor_2d(a8, ta, 1, k);
        mxfa_tensor bt = bf16 ? mxfa_tensor_2d(bh, MXFA_BF16, 1, k) : mxfa_tensor_2d(b8, tb, 1, k);
        uint32_t c = h->c, d = 0xDEADBEEF;
        mxfa_tensor ct = mxfa_tensor_2d(&c, MXFA_F32, 1, 1), dt = mxfa_tensor_2d(&d, MXFA_F32, 1, 1);
        mxfa_status st = mxfa_mma_chain(ctx, bf16 ? MXFA_INSTR_SM90_WGMMA_BF16 : MXFA_INSTR_SM90_WGMMA_FP8, &at, &bt,
                                        &ct, &dt);
        if (!ok(st == MXFA_OK && d == h->d, "%s %s: 0x%08X", h->instr, h->name, h->d))
            diag("got status %d, 0x%08X", st, d);
    }
}

/* One dot product of length K under a model: a and b E4M3 codes, one scale
 * byte per 32-block for each, C as bits. */
static uint32_t dot(mxfa_model model, const uint8_t *a, const uint8_t *b, int K, uint8_t sa, uint8_t sb, uint32_t c)
{
    uint8_t sca[4] = {sa, sa, sa, sa}, scb[4] = {sb, sb, sb, sb};
    int nb = (K + 31) / 32;
    mxfa_mx am = {mxfa_tensor_2d((void *)a, MXFA_E4M3, 1, K), mxfa_tensor_2d(sca, MXFA_E8M0, 1, nb), MXFA_BLOCK_ROW,
                  MXFA_LAYOUT_COMPACT};
    mxfa_mx bm = {mxfa_tensor_2d((void *)b, MXFA_E4M3, 1, K), mxfa_tensor_2d(scb, MXFA_E8M0, 1, nb), MXFA_BLOCK_ROW,
                  MXFA_LAYOUT_COMPACT};
    uint32_t d = 0xDEADBEEF;
    mxfa_tensor ct = mxfa_tensor_2d(&c, MXFA_F32, 1, 1), dt = mxfa_tensor_2d(&d, MXFA_F32, 1, 1);
    if (mxfa_gemm(ctx, &am, &bm, &ct, model, &dt) != MXFA_OK)
        diag("gemm: %s", mxfa_last_error(ctx));
    return d;
}

/* expected bits per model, in the order ideal, sm100, sm90-fp8, sm90-bf16 */
static void expect4(const char *what, const uint8_t *a, const uint8_t *b, int K, uint8_t sa, uint8_t sb, uint32_t c,
                    const uint32_t want[4])
{
    for (int m = 0; m < 4; m++) {
        uint32_t got = dot((mxfa_model)m, a, b, K, sa, sb, c);
        if (!ok(got == want[m], "%s under %s: 0x%08X", what, mxfa_model_name((mxfa_model)m), want[m]))
            diag("got 0x%08X", got);
    }
}

static void check_models(void)
{
    uint8_t a[64], b[64];

    /* Scales 2^3 and 2^-1 (s = 2) on 2^16 - 2^16 + 2^-9 (2^-6 x 2^-3):
     * ideal: exact 2^-9, times 2^2: 2^-7.
     * sm100: scaled products 2^18, -2^18, 2^-7; grid 2^(18-25) = 2^-7: kept, 2^-7.
     * sm90-fp8: partial grid 2^(16-13) = 2^3 drops 2^-9: 0, promoted: +0.
     * sm90-bf16: operands 2^11, -2^11 and 2^-3 x 2^-3... products 2^18, -2^18,
     *   2^-7 in one k16 step, grid 2^-7: kept, 2^-7. */
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    a[0] = 0x78, a[1] = 0xF8, a[2] = 0x08;
    b[0] = 0x78, b[1] = 0x78, b[2] = 0x20;
    expect4("2^16 - 2^16 + 2^-9, scales 2^3 and 2^-1", a, b, 32, 0x82, 0x7E, 0,
            (const uint32_t[4]){0x3C000000, 0x3C000000, 0x00000000, 0x3C000000});

    /* The same with 2^-10 (2^-5 x 2^-5) scaled to 2^-8: below the sm100 grid 2^-7. */
    a[2] = 0x10, b[2] = 0x10;
    expect4("2^16 - 2^16 + 2^-10, scales 2^3 and 2^-1", a, b, 32, 0x82, 0x7E, 0,
            (const uint32_t[4]){0x3B800000, 0x00000000, 0x00000000, 0x00000000});

    /* RZ against RNE: C = 2^24 and one product 1.5 x 2 = 3 (scales 2^0):
     * 2^24 + 3 lies halfway between 2^24 + 2 and 2^24 + 4.
     * ideal and sm90-fp8 add it on the CUDA cores, nearest even: 2^24 + 4;
     * sm100 and sm90-bf16 fuse C into the sum and cut toward zero: 2^24 + 2. */
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    a[0] = 0x3C, b[0] = 0x40;
    expect4("2^24 + 3", a, b, 32, 0x7F, 0x7F, 0x4B800000,
            (const uint32_t[4]){0x4B800002, 0x4B800001, 0x4B800002, 0x4B800001});

    /* 2^16 + 7.5 ulp (2^-5 + 2^-6 + 2^-7 + 2^-8 beside 2^16), C = 0:
     * sm100 and sm90-bf16 cut toward zero: 7 ulp (0x47800007);
     * ideal rounds the exact sum to nearest: 8 ulp (0x47800008);
     * sm90-fp8: grid 2^3 drops the small terms: 2^16. */
    a[0] = 0x78, b[0] = 0x78;
    a[1] = 0x28, b[1] = 0x20; /* 2^-2 x 2^-3 */
    a[2] = 0x20, b[2] = 0x20; /* 2^-3 x 2^-3 */
    a[3] = 0x20, b[3] = 0x18; /* 2^-3 x 2^-4 */
    a[4] = 0x18, b[4] = 0x18; /* 2^-4 x 2^-4 */
    expect4("2^16 + 7.5 ulp", a, b, 32, 0x7F, 0x7F, 0,
            (const uint32_t[4]){0x47800008, 0x47800007, 0x47800000, 0x47800007});

    /* Groups: 2^16 - 2^16 at positions 0-1, sixteen 2^-10 (2^-5 x 2^-5) at 16-31.
     * sm90-bf16 sums groups of 16: the first gives +0, the second 16 x 2^-10 = 2^-6.
     * sm100 sums all 32 at once: grid 2^-9 drops them: +0. sm90-fp8: +0.
     * ideal: exact 2^-6. */
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    a[0] = 0x78, a[1] = 0xF8, b[0] = 0x78, b[1] = 0x78;
    for (int k = 16; k < 32; k++)
        a[k] = 0x10, b[k] = 0x10;
    expect4("groups of 16 against 32", a, b, 32, 0x7F, 0x7F, 0,
            (const uint32_t[4]){0x3C800000, 0x00000000, 0x00000000, 0x3C800000});

    /* bf16 widening: 2^-9 (subnormal 0x01) with scale 2^-127 is 2^-136, below
     * half of bf16's smallest subnormal 2^-133: it widens to 0. Times
     * 2^8 x 2^118 (a bf16 normal): the exact product is 2^-10 for ideal,
     * sm100 and sm90-fp8; 0 for sm90-bf16. */
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    a[0] = 0x01, b[0] = 0x78;
    expect4("bf16 widening underflow", a, b, 32, 0x00, 0xF5, 0,
            (const uint32_t[4]){0x3A800000, 0x3A800000, 0x3A800000, 0x00000000});

    /* Overflow: 448 x 448 x 2^127 x 2^127 is beyond fp32 in every model: +Inf
     * (sm90-bf16: 448 x 2^127 already overflows bf16 to Inf). */
    a[0] = 0x7E, b[0] = 0x7E;
    expect4("overflow", a, b, 32, 0xFE, 0xFE, 0, (const uint32_t[4]){0x7F800000, 0x7F800000, 0x7F800000, 0x7F800000});

    /* A NaN scale (0xFF) makes the block NaN in every model. */
    a[0] = 0x38, b[0] = 0x38;
    expect4("NaN scale", a, b, 32, 0xFF, 0x7F, 0, (const uint32_t[4]){0x7FFFFFFF, 0x7FFFFFFF, 0x7FFFFFFF, 0x7FFFFFFF});

    /* K = 40: the second block has 8 elements and is zero-padded. All ones
     * (0x38) with scales 2^0: 32 + 8 = 40 in every model. */
    for (int k = 0; k < 40; k++)
        a[k] = 0x38, b[k] = 0x38;
    expect4("K = 40, all ones", a, b, 40, 0x7F, 0x7F, 0,
            (const uint32_t[4]){0x42200000, 0x42200000, 0x42200000, 0x42200000});

    /* Promotion is an fma with a power of two: a partial of 3 with scales
     * 2^-130 (bytes 0x00 and 0x7C) into C = 0 gives 3 x 2^-130, an fp32
     * subnormal, exactly: 0x00180000 (3 x 2^19 ulps of 2^-149). */
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    a[0] = 0x3C, b[0] = 0x40;
    expect4("subnormal result", a, b, 32, 0x00, 0x7C, 0,
            (const uint32_t[4]){0x00180000, 0x00180000, 0x00180000, 0x00180000});
}

static void check_arguments(void)
{
    uint8_t a[64] = {0}, b[64] = {0}, sa[2] = {0x7F, 0x7F}, sb[2] = {0x7F, 0x7F};
    float c[4] = {1, 2, 3, 4}, d[4];
    mxfa_mx am = {mxfa_tensor_2d(a, MXFA_E4M3, 2, 32), mxfa_tensor_2d(sa, MXFA_E8M0, 2, 1), MXFA_BLOCK_ROW,
                  MXFA_LAYOUT_COMPACT};
    mxfa_mx bm = {mxfa_tensor_2d(b, MXFA_E4M3, 2, 32), mxfa_tensor_2d(sb, MXFA_E8M0, 2, 1), MXFA_BLOCK_ROW,
                  MXFA_LAYOUT_COMPACT};
    mxfa_tensor ct = mxfa_tensor_2d(c, MXFA_F32, 2, 2), dt = mxfa_tensor_2d(d, MXFA_F32, 2, 2);
    memset(d, 0x5A, sizeof d);
    ok(mxfa_gemm(ctx, &am, &bm, &ct, MXFA_MODEL_SM100, &ct) == MXFA_OK && c[0] == 1 && c[3] == 4,
       "D may be C itself (in place): zero products leave C");
    ok(mxfa_gemm(ctx, &am, &bm, NULL, (mxfa_model)7, &dt) == MXFA_ERR_INVALID, "an unknown model is refused");
    mxfa_mx bad = bm;
    bad.data = mxfa_tensor_2d(b, MXFA_E4M3, 2, 31);
    ok(mxfa_gemm(ctx, &am, &bad, NULL, MXFA_MODEL_IDEAL, &dt) == MXFA_ERR_SHAPE, "A and B with different K are refused");
    bad = bm;
    bad.block = MXFA_BLOCK_SQUARE;
    ok(mxfa_gemm(ctx, &am, &bad, NULL, MXFA_MODEL_IDEAL, &dt) == MXFA_ERR_UNSUPPORTED,
       "square-blocked operands are refused with a hint: %s", mxfa_last_error(ctx));
    mxfa_tensor over = mxfa_tensor_2d(a, MXFA_F32, 2, 2);
    ok(mxfa_gemm(ctx, &am, &bm, NULL, MXFA_MODEL_IDEAL, &over) == MXFA_ERR_ALIAS, "D over A is refused");
    mxfa_tensor part = mxfa_tensor_2d(c + 1, MXFA_F32, 1, 2);
    mxfa_tensor c1 = mxfa_tensor_2d(c, MXFA_F32, 1, 2);
    mxfa_mx a1 = {mxfa_tensor_2d(a, MXFA_E4M3, 1, 32), mxfa_tensor_2d(sa, MXFA_E8M0, 1, 1), MXFA_BLOCK_ROW,
                  MXFA_LAYOUT_COMPACT};
    ok(mxfa_gemm(ctx, &a1, &bm, &c1, MXFA_MODEL_IDEAL, &part) == MXFA_ERR_ALIAS, "D overlapping C partly is refused");
    int untouched = 1;
    for (int i = 0; i < 4; i++)
        untouched &= bits_of(d[i]) == 0x5A5A5A5A;
    ok(untouched, "refused calls leave D untouched");
    mxfa_tensor a16 = mxfa_tensor_2d(a, MXFA_E4M3, 2, 16);
    mxfa_tensor b16 = mxfa_tensor_2d(b, MXFA_E4M3, 2, 16);
    ok(mxfa_mma_chain(ctx, MXFA_INSTR_SM90_WGMMA_FP8, &a16, &b16, NULL, &dt) == MXFA_ERR_SHAPE,
       "a chain of k32 instructions with K = 16 is refused");
    ok(mxfa_mma_chain(ctx, MXFA_INSTR_SM90_WGMMA_BF16, &a16, &b16, NULL, &dt) == MXFA_ERR_INVALID,
       "fp8 operands for the bf16 instruction are refused");
    mxfa_model m;
    ok(mxfa_model_parse("sm90-fp8", &m) == MXFA_OK && m == MXFA_MODEL_SM90_FP8 &&
           mxfa_model_parse("sm89", &m) == MXFA_ERR_INVALID,
       "model names parse");
}

int main(void)
{
    if (mxfa_open(&ctx, "ref") != MXFA_OK) {
        printf("Bail out! %s\n", mxfa_last_error(NULL));
        return 1;
    }
    check_hand_cases();
    check_models();
    check_arguments();
    mxfa_close(ctx);
    return done_testing();
}
