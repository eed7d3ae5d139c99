// SPDX-License-Identifier: BSD-3-Clause
/*
 * mma-probe: checks the emulator's models of Hopper tensor-core arithmetic
 * against the hardware, bit for bit.
 *
 * Each thread block (one warpgroup) issues a chain of 1 to 4 single
 * wgmma.mma_async instructions, m64n8k32 with FP8 operands (every pairing of
 * e4m3 and e5m2) or m64n8k16 with bf16, on an fp32 accumulator that starts
 * at a run-time C. Operands and C come from device memory (never
 * compile-time constants), drawn by seeded random and adversarial
 * generators on the host. Every one of the 64 x 8 outputs is a case, and
 * each is compared, all 32 bits, with mxfa_mma_chain on the ref backend.
 *
 * The hand-worked cases of tests/data/mma_hand.txt (--hand FILE) run first,
 * each filling a whole 64 x 8 tile, and must equal both the hand-derived
 * value and the emulator.
 *
 * usage: mma-probe [--cases N] [--seed S] [--kind fp8|bf16|all] [--hand FILE] [--verbose]
 * Exit status: 0 when every case matched, 1 on a mismatch, 77 when no
 * usable GPU is present (automake's SKIP), 2 for usage errors.
 */
#include <cuda_runtime.h>

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mma_hand.h"
#include "mxfa.h"

#define MAX_STEPS 4
#define ROWS_A 64
#define ROWS_B 8
#define STEP_BYTES 32 /* bytes of K per row per instruction: 32 fp8 or 16 bf16 */

enum kind { KIND_E4E4, KIND_E4E5, KIND_E5E4, KIND_E5E5, KIND_BF16, NKINDS };

static const char *const kind_names[NKINDS] = {"e4m3 x e4m3", "e4m3 x e5m2", "e5m2 x e4m3", "e5m2 x e5m2",
                                               "bf16 x bf16"};

#define CUDA_CHECK(call)                                                                           \
    do {                                                                                           \
        cudaError_t err_ = (call);                                                                 \
        if (err_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "mma-probe: %s: %s\n", #call, cudaGetErrorString(err_));               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* ---- device side ---- */

/* The 64-bit shared-memory matrix descriptor of sm_90 wgmma, no swizzle:
 * start address, leading byte offset (between core matrices adjacent along
 * K) and stride byte offset (between 8-row groups), each in 16-byte units. */
__device__ static uint64_t smem_desc(const void *p, uint32_t lbo, uint32_t sbo)
{
    uint32_t addr = (uint32_t)__cvta_generic_to_shared(p);
    return (uint64_t)((addr & 0x3FFFF) >> 4) | (uint64_t)(lbo >> 4) << 16 | (uint64_t)(sbo >> 4) << 32;
}

template <int KIND> __device__ static void wgmma(float d[4], uint64_t da, uint64_t db);

#define WGMMA_FP8(KIND, TA, TB)                                                                    \
    template <> __device__ void wgmma<KIND>(float d[4], uint64_t da, uint64_t db)                  \
    {                                                                                              \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"                                   \
                     "wgmma.mma_async.sync.aligned.m64n8k32.f32." TA "." TB                        \
                     " {%0, %1, %2, %3}, %4, %5, p, 1, 1;\n}\n"                                    \
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                              \
                     : "l"(da), "l"(db), "r"(1)                                                    \
                     : "memory");                                                                  \
    }

WGMMA_FP8(KIND_E4E4, "e4m3", "e4m3")
WGMMA_FP8(KIND_E4E5, "e4m3", "e5m2")
WGMMA_FP8(KIND_E5E4, "e5m2", "e4m3")
WGMMA_FP8(KIND_E5E5, "e5m2", "e5m2")

template <> __device__ void wgmma<KIND_BF16>(float d[4], uint64_t da, uint64_t db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16"
                 " {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "l"(da), "l"(db), "r"(1)
                 : "memory");
}

/* One problem per block: D = chain of `steps` instructions on C.
 * A is [problem][step][64][32 bytes], B [problem][step][8][32 bytes], K-major. */
template <int KIND>
__global__ void __launch_bounds__(128) probe_kernel(int steps, const uint8_t *A, const uint8_t *B, const float *C,
                                                    float *D)
{
    /* Core matrices of 8 rows x 16 bytes: A byte (m, kb) at
     * (m/8)*256 + (kb/16)*128 + (m%8)*16 + kb%16 (LBO 128, SBO 256);
     * B byte (n, kb) at (kb/16)*128 + n*16 + kb%16. */
    __shared__ __align__(128) uint8_t sa[MAX_STEPS][ROWS_A * STEP_BYTES];
    __shared__ __align__(128) uint8_t sb[MAX_STEPS][ROWS_B * STEP_BYTES];
    const int tid = threadIdx.x, p = blockIdx.x;
    const uint8_t *ga = A + (size_t)p * MAX_STEPS * ROWS_A * STEP_BYTES;
    const uint8_t *gb = B + (size_t)p * MAX_STEPS * ROWS_B * STEP_BYTES;
    for (int s = 0; s < steps; s++) {
        for (int i = tid; i < ROWS_A * STEP_BYTES; i += 128) {
            int m = i / STEP_BYTES, kb = i % STEP_BYTES;
            sa[s][(m / 8) * 256 + (kb / 16) * 128 + (m % 8) * 16 + kb % 16] = ga[s * ROWS_A * STEP_BYTES + i];
        }
        for (int i = tid; i < ROWS_B * STEP_BYTES; i += 128) {
            int n = i / STEP_BYTES, kb = i % STEP_BYTES;
            sb[s][(kb / 16) * 128 + n * 16 + kb % 16] = gb[s * ROWS_B * STEP_BYTES + i];
        }
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();

    /* accumulator fragment: d[i] is row 16w + g + 8*(i/2), column 2t + i%2 */
    const int w = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    float d[4];
    for (int i = 0; i < 4; i++)
        d[i] = C[(size_t)p * ROWS_A * ROWS_B + (16 * w + g + 8 * (i / 2)) * ROWS_B + 2 * t + i % 2];
    asm volatile("" : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])::"memory");
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    for (int s = 0; s < steps; s++)
        wgmma<KIND>(d, smem_desc(sa[s], 128, 256), smem_desc(sb[s], 128, 256));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    asm volatile("" : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])::"memory");
    for (int i = 0; i < 4; i++)
        D[(size_t)p * ROWS_A * ROWS_B + (16 * w + g + 8 * (i / 2)) * ROWS_B + 2 * t + i % 2] = d[i];
}

/* ---- host side: case generators ---- */

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static uint32_t rng_below(uint32_t n)
{
    return (uint32_t)(((rng_next() >> 32) * n) >> 32);
}

typedef struct elem_fmt {
    int ebits, mbits, bias;
    int is_bf16, e4m3;
} elem_fmt;

static elem_fmt fmt_of(int e4m3)
{
    elem_fmt f = {e4m3 ? 4 : 5, e4m3 ? 3 : 2, e4m3 ? 7 : 15, 0, e4m3};
    return f;
}

static const elem_fmt bf16_fmt = {8, 7, 127, 1, 0};

/* A code with unbiased exponent e (clamped into the format's normal range,
 * or a subnormal when below it), random fraction and sign. */
static uint32_t code_with_exp(const elem_fmt *f, int e)
{
    int field = e + f->bias;
    int fmax = (1 << f->ebits) - 1 - (f->e4m3 ? 0 : 1); /* e4m3 uses field 15 (but not 0x7F) */
    uint32_t frac = rng_below(1u << f->mbits);
    if (field <= 0)
        field = 0;
    if (field > fmax)
        field = fmax;
    if (f->e4m3 && field == 15 && frac == 7)
        frac = 6; /* 0x7F is NaN */
    return (rng_below(2) << (f->ebits + f->mbits)) | ((uint32_t)field << f->mbits) | frac;
}

static uint32_t random_code(const elem_fmt *f)
{
    uint32_t bits = f->ebits + f->mbits + 1;
    uint32_t c = (uint32_t)rng_next() & ((1u << bits) - 1);
    uint32_t field = (c >> f->mbits) & ((1u << f->ebits) - 1), top = (1u << f->ebits) - 1;
    int special = f->e4m3 ? (c & 0x7F) == 0x7F : field == top;
    if (special && rng_below(32) != 0)
        c &= ~(1u << (f->mbits + f->ebits - 1)); /* mostly keep specials out */
    return c;
}

static void put_elem(uint8_t *row, int k, const elem_fmt *f, uint32_t code)
{
    if (f->is_bf16) {
        row[2 * k] = (uint8_t)code;
        row[2 * k + 1] = (uint8_t)(code >> 8);
    } else {
        row[k] = (uint8_t)code;
    }
}

static uint32_t get_elem(const uint8_t *row, int k, const elem_fmt *f)
{
    return f->is_bf16 ? (uint32_t)row[2 * k] | (uint32_t)row[2 * k + 1] << 8 : row[k];
}

/*
 * Fill one row of K elements (across all steps: `row` points at step 0 and
 * successive steps are `step_stride` bytes apart) by a randomly chosen
 * family. ebase is the row's typical exponent.
 */
static void gen_row(uint8_t *row, size_t step_stride, int steps, int kper, const elem_fmt *f, int family,
                    const uint8_t *partner, const elem_fmt *pf)
{
    int emin = 1 - f->bias, emax = (1 << f->ebits) - 2 - f->bias;
    if (f->is_bf16 && rng_below(8) != 0) { /* mostly keep bf16 products clear of fp32 overflow */
        emin = -80;
        emax = 60;
    }
    int span = emax - emin;
    int ebase = emin + (int)rng_below((uint32_t)span + 1);
    int big_at = (int)rng_below((uint32_t)(steps * kper));
    for (int s = 0; s < steps; s++)
        for (int k = 0; k < kper; k++) {
            int idx = s * kper + k;
            uint32_t c;
            switch (family) {
            case 0: /* uniform codes (bf16: mostly within the row's exponent range) */
                c = f->is_bf16 && emax < 100 ? code_with_exp(f, emin + (int)rng_below((uint32_t)span + 1))
                                             : random_code(f);
                break;
            case 1: { /* one big element, the others lower by half of F give or take
                       * two: products around F binades below the largest */
                int top = f->is_bf16 ? (ebase > 60 ? 60 : ebase < -60 ? -60 : ebase) : emax;
                int lo = f->is_bf16 ? 11 : 5, w = f->is_bf16 ? 4 : 5;
                c = idx == big_at ? code_with_exp(f, top) : code_with_exp(f, top - lo - (int)rng_below((uint32_t)w));
                break;
            }
            case 2: /* narrow spread around a random exponent */
                c = code_with_exp(f, ebase - 2 + (int)rng_below(5));
                break;
            case 3: /* subnormals and the smallest normals */
                c = rng_below(3) ? (rng_below(2) << (f->ebits + f->mbits)) | rng_below(1u << f->mbits)
                                 : code_with_exp(f, emin + (int)rng_below(3));
                break;
            case 4: /* zeros beside large values (a zero must not lift emax) */
                c = rng_below(2) ? (rng_below(2) << (f->ebits + f->mbits)) : code_with_exp(f, emax - (int)rng_below(3));
                break;
            case 5: /* the negation of the partner row: exact cancellation */
                if (partner && pf->is_bf16 == f->is_bf16 && pf->e4m3 == f->e4m3 && rng_below(8) != 0)
                    c = get_elem(partner + s * step_stride, k, f) ^ (1u << (f->ebits + f->mbits));
                else
                    c = code_with_exp(f, ebase - (int)rng_below(12));
                break;
            default: /* wide spread over the whole range */
                c = code_with_exp(f, emin + (int)rng_below((uint32_t)span + 1));
                break;
            }
            put_elem(row + s * step_stride, k, f, c);
        }
}

static float gen_acc(int eref)
{
    unsigned kind = rng_below(16);
    uint32_t sign = rng_below(2) << 31, bits;
    if (kind == 0)
        bits = sign; /* +-0 */
    else if (kind == 1)
        bits = sign | (uint32_t)(rng_next() & 0x7FFFFF); /* subnormal */
    else if (kind == 2 && rng_below(4) == 0)
        bits = (uint32_t)rng_next(); /* anything, specials included */
    else {
        int e = eref - 30 + (int)rng_below(48);
        e = e < -126 ? -126 : e > 127 ? 127 : e;
        bits = sign | (uint32_t)(e + 127) << 23 | (uint32_t)(rng_next() & 0x7FFFFF);
    }
    float x;
    memcpy(&x, &bits, 4);
    return x;
}

/* ---- host side: the comparison ---- */

typedef struct tally {
    uint64_t cases, mismatches;
    uint64_t nan, inf, zero, subnormal, negative; /* what the hardware returned */
} tally;

static void count_kind(tally *tl, uint32_t bits)
{
    uint32_t mag = bits & 0x7FFFFFFFu;
    tl->nan += mag > 0x7F800000u;
    tl->inf += mag == 0x7F800000u;
    tl->zero += mag == 0;
    tl->subnormal += mag != 0 && mag < 0x00800000u;
    tl->negative += (bits >> 31) && mag <= 0x7F800000u;
}

static void print_row(const char *name, const uint8_t *row, size_t stride, int steps, int kper, const elem_fmt *f)
{
    fprintf(stderr, "    %s:", name);
    for (int s = 0; s < steps; s++)
        for (int k = 0; k < kper; k++)
            fprintf(stderr, f->is_bf16 ? " %04X" : " %02X", get_elem(row + s * stride, k, f));
    fprintf(stderr, "\n");
}

static void launch(int kind, int problems, int steps, const uint8_t *A, const uint8_t *B, const float *C, float *D)
{
    const size_t a_per = (size_t)MAX_STEPS * ROWS_A * STEP_BYTES, b_per = (size_t)MAX_STEPS * ROWS_B * STEP_BYTES;
    const size_t cd_per = ROWS_A * ROWS_B;
    uint8_t *dA, *dB;
    float *dC, *dD;
    CUDA_CHECK(cudaMalloc(&dA, (size_t)problems * a_per));
    CUDA_CHECK(cudaMalloc(&dB, (size_t)problems * b_per));
    CUDA_CHECK(cudaMalloc(&dC, (size_t)problems * cd_per * 4));
    CUDA_CHECK(cudaMalloc(&dD, (size_t)problems * cd_per * 4));
    CUDA_CHECK(cudaMemcpy(dA, A, (size_t)problems * a_per, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dB, B, (size_t)problems * b_per, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dC, C, (size_t)problems * cd_per * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(dD, 0xFF, (size_t)problems * cd_per * 4)); /* poison: every output must be written */
    switch (kind) {
    case KIND_E4E4: probe_kernel<KIND_E4E4><<<problems, 128>>>(steps, dA, dB, dC, dD); break;
    case KIND_E4E5: probe_kernel<KIND_E4E5><<<problems, 128>>>(steps, dA, dB, dC, dD); break;
    case KIND_E5E4: probe_kernel<KIND_E5E4><<<problems, 128>>>(steps, dA, dB, dC, dD); break;
    case KIND_E5E5: probe_kernel<KIND_E5E5><<<problems, 128>>>(steps, dA, dB, dC, dD); break;
    default: probe_kernel<KIND_BF16><<<problems, 128>>>(steps, dA, dB, dC, dD); break;
    }
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(D, dD, (size_t)problems * cd_per * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(dA));
    CUDA_CHECK(cudaFree(dB));
    CUDA_CHECK(cudaFree(dC));
    CUDA_CHECK(cudaFree(dD));
}

static int run_kind(mxfa_ctx *ctx, int kind, int problems, int verbose, tally *tl)
{
    const int is_bf16 = kind == KIND_BF16;
    const elem_fmt fa = is_bf16 ? bf16_fmt : fmt_of(kind == KIND_E4E4 || kind == KIND_E4E5);
    const elem_fmt fb = is_bf16 ? bf16_fmt : fmt_of(kind == KIND_E4E4 || kind == KIND_E5E4);
    const int kper = is_bf16 ? 16 : 32;
    const size_t a_per = (size_t)MAX_STEPS * ROWS_A * STEP_BYTES, b_per = (size_t)MAX_STEPS * ROWS_B * STEP_BYTES;
    const size_t cd_per = ROWS_A * ROWS_B;
    int steps = 1 + (int)rng_below(MAX_STEPS);
    uint8_t *A = (uint8_t *)calloc((size_t)problems, a_per), *B = (uint8_t *)calloc((size_t)problems, b_per);
    float *C = (float *)malloc((size_t)problems * cd_per * 4), *D = (float *)malloc((size_t)problems * cd_per * 4);
    float *R = (float *)malloc(cd_per * 4);
    for (int p = 0; p < problems; p++) {
        uint8_t *pa = A + p * a_per, *pb = B + p * b_per;
        for (int n = 0; n < ROWS_B; n++)
            gen_row(pb + n * STEP_BYTES, ROWS_B * STEP_BYTES, steps, kper, &fb, (int)rng_below(7), NULL, NULL);
        for (int m = 0; m < ROWS_A; m++)
            gen_row(pa + m * STEP_BYTES, ROWS_A * STEP_BYTES, steps, kper, &fa, (int)rng_below(7),
                    pb + (m % ROWS_B) * STEP_BYTES, &fb);
        int eref = is_bf16 ? (int)rng_below(200) - 100 : (int)rng_below(40) - 20;
        for (size_t i = 0; i < cd_per; i++)
            C[p * cd_per + i] = gen_acc(eref);
    }
    launch(kind, problems, steps, A, B, C, D);

    /* the emulator on the same inputs: A as [64, K] and B as [8, K] */
    const int K = steps * kper;
    const mxfa_dtype dta = is_bf16 ? MXFA_BF16 : fa.e4m3 ? MXFA_E4M3 : MXFA_E5M2;
    const mxfa_dtype dtb = is_bf16 ? MXFA_BF16 : fb.e4m3 ? MXFA_E4M3 : MXFA_E5M2;
    const size_t es = is_bf16 ? 2 : 1;
    uint8_t *ea = (uint8_t *)malloc((size_t)ROWS_A * K * es), *eb = (uint8_t *)malloc((size_t)ROWS_B * K * es);
    uint64_t before = tl->mismatches;
    for (int p = 0; p < problems; p++) {
        const uint8_t *pa = A + p * a_per, *pb = B + p * b_per;
        for (int s = 0; s < steps; s++) {
            for (int m = 0; m < ROWS_A; m++)
                memcpy(ea + ((size_t)m * K + (size_t)s * kper) * es, pa + (s * ROWS_A + m) * STEP_BYTES, STEP_BYTES);
            for (int n = 0; n < ROWS_B; n++)
                memcpy(eb + ((size_t)n * K + (size_t)s * kper) * es, pb + (s * ROWS_B + n) * STEP_BYTES, STEP_BYTES);
        }
        mxfa_tensor at = mxfa_tensor_2d(ea, dta, ROWS_A, K), bt = mxfa_tensor_2d(eb, dtb, ROWS_B, K);
        mxfa_tensor ct = mxfa_tensor_2d(C + p * cd_per, MXFA_F32, ROWS_A, ROWS_B);
        mxfa_tensor rt = mxfa_tensor_2d(R, MXFA_F32, ROWS_A, ROWS_B);
        if (mxfa_mma_chain(ctx, is_bf16 ? MXFA_INSTR_SM90_WGMMA_BF16 : MXFA_INSTR_SM90_WGMMA_FP8, &at, &bt, &ct, &rt) !=
            MXFA_OK) {
            fprintf(stderr, "mma-probe: mxfa_mma_chain: %s\n", mxfa_last_error(ctx));
            exit(1);
        }
        for (int m = 0; m < ROWS_A; m++)
            for (int n = 0; n < ROWS_B; n++) {
                uint32_t got, want;
                memcpy(&got, &D[p * cd_per + m * ROWS_B + n], 4);
                memcpy(&want, &R[m * ROWS_B + n], 4);
                tl->cases++;
                count_kind(tl, got);
                if (got == want)
                    continue;
                if (tl->mismatches++ < (uint64_t)(verbose ? 40 : 8)) {
                    uint32_t cb;
                    memcpy(&cb, &C[p * cd_per + m * ROWS_B + n], 4);
                    fprintf(stderr, "  mismatch %s, %d step(s), problem %d row %d col %d: hardware 0x%08X (%a), "
                                    "emulator 0x%08X (%a), C 0x%08X\n",
                            kind_names[kind], steps, p, m, n, got, (double)D[p * cd_per + m * ROWS_B + n], want,
                            (double)R[m * ROWS_B + n], cb);
                    print_row("a", pa + m * STEP_BYTES, ROWS_A * STEP_BYTES, steps, kper, &fa);
                    print_row("b", pb + n * STEP_BYTES, ROWS_B * STEP_BYTES, steps, kper, &fb);
                }
            }
    }
    printf("%-12s %d step(s): %8d x 512 cases, %" PRIu64 " mismatches\n", kind_names[kind], steps, problems,
           tl->mismatches - before);
    free(ea);
    free(eb);
    free(A);
    free(B);
    free(C);
    free(D);
    free(R);
    return 0;
}

/* The hand-worked cases: each fills one whole tile; every output must be the
 * hand value, which the emulator also gives (tests/t-mma checks that). */
static int run_hand(mxfa_ctx *ctx, const char *path, uint64_t *failures)
{
    hand_case cases[128];
    int n = hand_load(path, cases, 128);
    if (n == 0)
        return 0;
    const size_t a_per = (size_t)MAX_STEPS * ROWS_A * STEP_BYTES, b_per = (size_t)MAX_STEPS * ROWS_B * STEP_BYTES;
    const size_t cd_per = ROWS_A * ROWS_B;
    uint8_t *A = (uint8_t *)calloc(1, a_per), *B = (uint8_t *)calloc(1, b_per);
    float C[ROWS_A * ROWS_B], D[ROWS_A * ROWS_B];
    for (int i = 0; i < n; i++) {
        const hand_case *h = &cases[i];
        int bf16 = !strcmp(h->instr, "bf16");
        int kind = bf16 ? KIND_BF16
                        : (!strncmp(h->instr, "e4m3", 4) ? (!strcmp(h->instr + 5, "e4m3") ? KIND_E4E4 : KIND_E4E5)
                                                          : (!strcmp(h->instr + 5, "e4m3") ? KIND_E5E4 : KIND_E5E5));
        const elem_fmt f = bf16 ? bf16_fmt : fmt_of(1);
        int kper = bf16 ? 16 : 32;
        for (int m = 0; m < ROWS_A; m++)
            for (int k = 0; k < kper; k++)
                put_elem(A + m * STEP_BYTES, k, &f, h->a[k]);
        for (int nn = 0; nn < ROWS_B; nn++)
            for (int k = 0; k < kper; k++)
                put_elem(B + nn * STEP_BYTES, k, &f, h->b[k]);
        for (size_t j = 0; j < cd_per; j++)
            memcpy(&C[j], &h->c, 4);
        launch(kind, 1, 1, A, B, C, D);
        int bad = 0;
        uint32_t got = 0;
        for (size_t j = 0; j < cd_per; j++) {
            memcpy(&got, &D[j], 4);
            bad += got != h->d;
        }
        printf("hand case %-12s %-20s expect 0x%08X: %s", h->instr, h->name, h->d, bad ? "DIFFERS" : "ok");
        if (bad)
            printf(" (hardware 0x%08X in %d of 512 outputs)", got, bad);
        printf("\n");
        *failures += bad != 0;
    }
    (void)ctx;
    free(A);
    free(B);
    return n;
}

int main(int argc, char **argv)
{
    long long want = 1100000;
    uint64_t seed = 20261129;
    int verbose = 0, only = -1; /* -1 all, 0 fp8, 1 bf16 */
    const char *hand = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cases") && i + 1 < argc)
            want = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--kind") && i + 1 < argc) {
            const char *k = argv[++i];
            only = !strcmp(k, "fp8") ? 0 : !strcmp(k, "bf16") ? 1 : !strcmp(k, "all") ? -1 : -2;
            if (only == -2) {
                fprintf(stderr, "mma-probe: --kind takes fp8, bf16 or all\n");
                return 2;
            }
        } else if (!strcmp(argv[i], "--hand") && i + 1 < argc)
            hand = argv[++i];
        else if (!strcmp(argv[i], "--verbose"))
            verbose = 1;
        else {
            fprintf(stderr, "usage: mma-probe [--cases N] [--seed S] [--kind fp8|bf16|all] [--hand FILE] [--verbose]\n");
            return 2;
        }
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("mma-probe: no usable CUDA device; nothing checked\n");
        return 77;
    }
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    if (prop.major != 9) {
        printf("mma-probe: %s is sm_%d%d, not Hopper (sm_90); nothing checked\n", prop.name, prop.major, prop.minor);
        return 77;
    }
    mxfa_ctx *ctx;
    if (mxfa_open(&ctx, "ref") != MXFA_OK) {
        fprintf(stderr, "mma-probe: %s\n", mxfa_last_error(NULL));
        return 1;
    }
    rng_state = seed;
    printf("mma-probe: %s, seed %" PRIu64 ", at least %lld cases per instruction family\n", prop.name, seed, want);
    uint64_t hand_failures = 0;
    int nhand = hand ? run_hand(ctx, hand, &hand_failures) : 0;
    if (hand && nhand == 0) {
        fprintf(stderr, "mma-probe: no hand cases read from %s\n", hand);
        return 1;
    }
    tally fp8, bf16;
    memset(&fp8, 0, sizeof fp8);
    memset(&bf16, 0, sizeof bf16);
    const int problems = 512; /* 262144 cases per launch */
    if (only != 1)
        while ((long long)fp8.cases < want)
            for (int kind = KIND_E4E4; kind <= KIND_E5E5; kind++)
                run_kind(ctx, kind, problems / 4, verbose, &fp8);
    if (only != 0)
        while ((long long)bf16.cases < want)
            run_kind(ctx, KIND_BF16, problems, verbose, &bf16);
    printf("wgmma fp8 k32 vs sm90-fp8 instruction model:  %" PRIu64 " cases, %" PRIu64 " mismatches\n", fp8.cases,
           fp8.mismatches);
    printf("wgmma bf16 k16 vs sm90-bf16 instruction model: %" PRIu64 " cases, %" PRIu64 " mismatches\n", bf16.cases,
           bf16.mismatches);
    const tally *both[2] = {&fp8, &bf16};
    for (int i = 0; i < 2; i++)
        printf("  %s outputs: %" PRIu64 " NaN, %" PRIu64 " Inf, %" PRIu64 " zero, %" PRIu64 " subnormal, %" PRIu64
               " negative\n",
               i ? "bf16" : "fp8 ", both[i]->nan, both[i]->inf, both[i]->zero, both[i]->subnormal, both[i]->negative);
    if (hand)
        printf("hand-worked cases on hardware: %d, %" PRIu64 " differ from the hand value\n", nhand, hand_failures);
    mxfa_close(ctx);
    return fp8.mismatches || bf16.mismatches || hand_failures ? 1 : 0;
}
