// SPDX-License-Identifier: BSD-3-Clause
// D = A * B^T + C under the sm90-fp8 model (docs/NUMERICS.md): for every MX
// block of 32 along K, one wgmma e4m3/e5m2 k32 into a zero accumulator, then
// on the CUDA cores  acc = fma(partial, 2^(sa + sb), acc)  in fp32 RNE.
//
// One CTA makes a 128 x 128 tile of D. A producer warpgroup streams
// 128-deep slices of A and B (128-byte swizzled, as wgmma reads them) and
// the matching scales through the tensor-memory accelerator into a ring of
// six stages, each guarded by a "full" and an "empty" mbarrier. Two
// consumer warpgroups own 64 rows each; per MX block they run one
// m64n128k32 wgmma and fold its partial into fp32 accumulators held in
// registers, the next block's wgmma running meanwhile. The promotion costs
// two instructions per element and block (the product of the two scales,
// then the fma), which bounds what such a kernel can reach: BENCHMARKS.md
// has the measurements.
//
// The scale 2^(sa + sb) is the product of two floats 2^sa and 2^sb, exact
// while sa + sb lies in [-149, 127]. A product whose scales may leave that
// range (known before the launch from each block column's extreme
// exponents) is promoted through a double fma instead, which is exact: the
// sum of two values of 24 significant bits rounded to 53 bits and then to 24
// cannot land on a float midpoint it did not start on.
#include <algorithm>
#include <type_traits>

#include "hopper.cuh"
#include "wgmma.cuh"

namespace mxfa_gpu {
namespace {

using namespace sm90;

constexpr int BM = 128, BN = 128, BK = 128, STAGES = 6, KB = BK / 32; // KB: MX blocks a stage
// A producer warpgroup and two consumers; setmaxnreg moves registers from
// the producer to the consumers (PRODUCER_REGS).
constexpr int CONSUMERS = 2, THREADS = (CONSUMERS + 1) * 128;

struct __align__(1024) stage
{
    uint8_t a[BM * BK]; // 128 rows of 128 bytes, 128-byte swizzle
    uint8_t b[BN * BK];
    float sa[KB][BM]; // 2^(scale - 127) of A's rows, per MX block
    float sb[KB][BN];
};
static_assert(sizeof(stage) == BM * BK + BN * BK + KB * (BM + BN) * 4, "stage layout");

struct shared {
    stage st[STAGES];
    uint64_t full[STAGES], empty[STAGES];
};

constexpr size_t SMEM_BYTES = sizeof(shared) + 1024;

// Extreme scale exponents of one MX block column over the finite scales of
// A's rows (side 0) and B's (side 1): the largest, and 255 minus the
// smallest, so that zeroed memory means "none" and one atomic max does both.
struct alignas(16) scale_range {
    uint32_t max_e[2], inv_min_e[2];
};

// Device code for sm_90a only: the sm_100a pass of this file compiles the
// kernel empty (wgmma is Hopper's), and the backend never launches it there.
#ifdef MXFA_SM90_CODE

// setmaxnreg: the producer gives back exactly what the consumers take,
// (168 - 24) * 128 = (240 - 168) * 256 registers, 168 being what the launch
// gives each of the 384 threads.
constexpr int PRODUCER_REGS = 24, CONSUMER_REGS = 240;

#endif // sm_90a

// ---- the kernel ----

// Accumulator fragment of m64n128 (per warpgroup):
// element i of warp w, lane (g = lane / 4, t = lane % 4) is row
// 16w + g + 8 * ((i / 2) % 2), column 8 * (i / 4) + 2t + i % 2.
//
template <int TA, int TB, bool EXACT_IN_FLOAT>
__global__ void __launch_bounds__(THREADS, 1)
    gemm_sm90_fp8(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                  const __grid_constant__ CUtensorMap map_sa, const __grid_constant__ CUtensorMap map_sb,
                  const int *in_range, int64_t M, int64_t N, int nkb, const float *c, int64_t c_rs, int64_t c_cs,
                  float *d, int64_t d_rs, int64_t d_cs, int tiles_m, int tiles_n)
{
#ifdef MXFA_SM90_CODE
    // Two launches, one for each way of promoting: the one that does not
    // match the scales ends here.
    if ((*in_range != 0) != EXACT_IN_FLOAT)
        return;
    extern __shared__ uint8_t raw[]; // sizeof(shared) + 1024 bytes
    shared &sh = aligned_shared<shared>(raw);
    const int nks = (nkb + KB - 1) / KB;

    const int2 tile = grouped_tile((int)blockIdx.x, tiles_m, tiles_n);
    const int64_t m0 = (int64_t)tile.x * BM, n0 = (int64_t)tile.y * BN;
    if (threadIdx.x == 0)
        init_ring(sh.full, sh.empty, CONSUMERS * 128);
    __syncthreads();

    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    if (warp < 4) { // the producer warpgroup: its first thread streams the stages
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(PRODUCER_REGS));
        if (threadIdx.x == 0)
            for (int ks = 0, s = 0, phase = 0; ks < nks; ks++) {
                if (ks >= STAGES)
                    bar_wait_idle(&sh.empty[s], phase ^ 1);
                bar_expect(&sh.full[s], sizeof(stage)); // the bytes of its four copies
                tma_load(sh.st[s].a, &map_a, ks * BK, (int)m0, &sh.full[s]);
                tma_load(sh.st[s].b, &map_b, ks * BK, (int)n0, &sh.full[s]);
                tma_load(sh.st[s].sa, &map_sa, (int)m0, ks * KB, &sh.full[s]);
                tma_load(sh.st[s].sb, &map_sb, (int)n0, ks * KB, &sh.full[s]);
                if (++s == STAGES)
                    s = 0, phase ^= 1;
            }
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(CONSUMER_REGS));

    const int wg = warp / 4 - 1, w = warp % 4, g = lane / 4, t = lane % 4;
    const int row0 = wg * 64 + w * 16 + g; // in the tile; the other row is row0 + 8
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; i++) {
        const int64_t r = m0 + row0 + 8 * ((i / 2) % 2), col = n0 + 8 * (i / 4) + 2 * t + i % 2;
        acc[i] = c && r < M && col < N ? c[r * c_rs + col * c_cs] : 0.0f;
    }

    // Block k's product goes into one of two partials while block k - 1's
    // is promoted from the other, so the tensor cores need not wait for the
    // promotion of this warpgroup (nor for the other one's). ptxas
    // serializes every wgmma when an instruction other than a wgmma touches
    // the registers of one in flight, or a branch it cannot prove uniform
    // runs meanwhile: hence the write-only wgmma outputs, the producer in a
    // warpgroup of its own, every thread arriving on the empty barriers, and
    // the choice of promotion made per launch. Stages are walked with a
    // running index and phase: no division in the loop.
    float part0[64], part1[64];
    const uint32_t a_off = (uint32_t)(wg * 64 * BK);
    auto issue = [&](float(&p)[64], const stage &st, int kb) { // block kb of stage st into p
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
        wgmma_k32<TA, TB>(p, desc_sw128(st.a + a_off + kb * 32), desc_sw128(st.b + kb * 32));
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    };
    // A block's first scales, read into registers before its wgmma is
    // waited for, so that the shared-memory latency hides behind the wait
    // (the first half: more spilled in the exact-in-double instances).
    constexpr int EARLY = 4;
    struct block_scales {
        float2 a;
        float4 b[EARLY];
        const float4 *rest;
    };
    auto scales_of = [&](const stage &st, int kb) {
        block_scales sc;
        sc.a = *reinterpret_cast<const float2 *>(&st.sa[kb][scale_pos_a(row0)]);
        sc.rest = reinterpret_cast<const float4 *>(&st.sb[kb][t * 4]);
#pragma unroll
        for (int j2 = 0; j2 < EARLY; j2++)
            sc.b[j2] = sc.rest[4 * j2]; // columns 8j + 2t and + 1 for j = 2 j2 and 2 j2 + 1
        return sc;
    };
    // a block's partial, waited for, into acc
    auto promote = [&](float(&p)[64], const block_scales &sc) {
        const float2 a = sc.a;
        fence_regs(p);
#pragma unroll
        for (int j2 = 0; j2 < 8; j2++) {
            const float4 b = j2 < EARLY ? sc.b[j2] : sc.rest[4 * j2];
            const float bs[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int j = 2 * j2 + h;
                const float bx = bs[2 * h], by = bs[2 * h + 1];
                if constexpr (EXACT_IN_FLOAT) {
                    acc[4 * j + 0] = promote_fast(p[4 * j + 0], a.x, bx, acc[4 * j + 0]);
                    acc[4 * j + 1] = promote_fast(p[4 * j + 1], a.x, by, acc[4 * j + 1]);
                    acc[4 * j + 2] = promote_fast(p[4 * j + 2], a.y, bx, acc[4 * j + 2]);
                    acc[4 * j + 3] = promote_fast(p[4 * j + 3], a.y, by, acc[4 * j + 3]);
                } else {
                    acc[4 * j + 0] = promote_wide(p[4 * j + 0], a.x, bx, acc[4 * j + 0]);
                    acc[4 * j + 1] = promote_wide(p[4 * j + 1], a.x, by, acc[4 * j + 1]);
                    acc[4 * j + 2] = promote_wide(p[4 * j + 2], a.y, bx, acc[4 * j + 2]);
                    acc[4 * j + 3] = promote_wide(p[4 * j + 3], a.y, by, acc[4 * j + 3]);
                }
            }
        }
    };
    // One block: the next one's product issued, this one's waited for and
    // promoted; or, for the last block, only the wait and the promotion.
    auto step = [&](float(&cur)[64], float(&next)[64], const stage &st, int kb, const stage &next_st, int next_kb) {
        const block_scales sc = scales_of(st, kb);
        issue(next, next_st, next_kb);
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
        promote(cur, sc);
    };
    auto step_last = [&](float(&cur)[64], const stage &st, int kb) {
        const block_scales sc = scales_of(st, kb);
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        promote(cur, sc);
    };
    // Blocks go in pairs, k in part0 and k + 1 in part1, and a stage holds
    // whole pairs; the loop body is one pair (ptxas would otherwise hoist the
    // scale loads of a whole stage above its waits and run out of registers).
    static_assert(KB % 2 == 0, "a stage holds whole pairs of blocks");
    if (nkb > 0) {
        bar_wait(&sh.full[0], 0);
        issue(part0, sh.st[0], 0);
        int k = 0, kb = 0, s = 0, phase = 0; // block k is block kb of stage s
        for (; k + 2 < nkb; k += 2) {
            const stage &st = sh.st[s];
            step(part0, part1, st, kb, st, kb + 1);
            if (kb + 2 < KB) {
                step(part1, part0, st, kb + 1, st, kb + 2);
                kb += 2;
            } else {
                const int ns = s + 1 == STAGES ? 0 : s + 1;
                phase ^= ns == 0;
                bar_wait(&sh.full[ns], phase);
                step(part1, part0, st, kb + 1, sh.st[ns], 0);
                bar_arrive(&sh.empty[s]); // this thread has read the stage
                s = ns, kb = 0;
            }
        }
        const stage &st = sh.st[s];
        if (k + 1 < nkb) {
            step(part0, part1, st, kb, st, kb + 1);
            step_last(part1, st, kb + 1);
        } else {
            step_last(part0, st, kb);
        }
    }

#pragma unroll
    for (int i = 0; i < 64; i++) {
        const int64_t r = m0 + row0 + 8 * ((i / 2) % 2), col = n0 + 8 * (i / 4) + 2 * t + i % 2;
        if (r < M && col < N)
            d[r * d_rs + col * d_cs] = acc[i];
    }
#endif
}

// Scales of one operand, [rows, nkb] E8M0 bytes, as floats 2^(e - 127)
// transposed to [nkb, rows_padded] (NaN for 0xFF), each tile of 128 in the
// kernel's order (scale_pos_a, scale_pos_b), and each block column's
// extreme exponents over the finite scales (atomics into ranges).
__global__ void prepare_scales(const uint8_t *s, int64_t rows, int nkb, int64_t rs, int64_t cs, float *out,
                               int64_t rows_padded, scale_range *ranges, int side)
{
    __shared__ uint8_t tile[32][33];
    const int64_t r0 = (int64_t)blockIdx.x * 32;
    for (int k0 = (int)blockIdx.y * 32; k0 < nkb; k0 += (int)gridDim.y * 32) {
        for (int i = (int)threadIdx.y; i < 32; i += 8) {
            const int64_t r = r0 + i;
            const int k = k0 + (int)threadIdx.x;
            tile[i][threadIdx.x] = r < rows && k < nkb ? s[r * rs + (int64_t)k * cs] : 0xFF;
        }
        __syncthreads();
        for (int i = (int)threadIdx.y; i < 32; i += 8) {
            const int k = k0 + i;
            const int64_t r = r0 + threadIdx.x;
            const uint32_t e = tile[threadIdx.x][i];
            const bool real = r < rows && k < nkb;
            const int64_t at = (r & ~(int64_t)127) + (side ? scale_pos_b((int)(r & 127)) : scale_pos_a((int)(r & 127)));
            if (k < nkb)
                out[(int64_t)k * rows_padded + at] = real ? scale_float(e) : 0.0f;
            const bool finite = real && e != 0xFF;
            const uint32_t hi = __reduce_max_sync(0xFFFFFFFFu, finite ? e : 0u);
            const uint32_t inv_lo = __reduce_max_sync(0xFFFFFFFFu, finite ? 255u - e : 0u);
            if (threadIdx.x == 0 && k < nkb) {
                atomicMax(&ranges[k].max_e[side], hi);
                atomicMax(&ranges[k].inv_min_e[side], inv_lo);
            }
        }
        __syncthreads();
    }
}

// in_range = whether 2^(sa + sb) is a float product for every pair of
// scales of every block column: then the whole product takes the fast
// promotion. One block, after both prepare_scales.
__global__ void scales_in_range(const scale_range *ranges, int nkb, int *in_range)
{
    int ok = 1;
    for (int k = (int)threadIdx.x; k < nkb; k += (int)blockDim.x) {
        const scale_range rg = ranges[k];
        ok &= rg.max_e[0] + rg.max_e[1] <= 254u + 127u && 510u - rg.inv_min_e[0] - rg.inv_min_e[1] >= 254u - 149u;
    }
    ok = __syncthreads_and(ok);
    if (threadIdx.x == 0)
        *in_range = ok;
}

// ---- host side ----

// Both ways of promoting, in stream order: the kernel whose way does not
// match the scales (decided on the device by scales_in_range) returns at once.
template <int TA, int TB, typename... Args> cudaError_t launch_both(dim3 grid, cudaStream_t stream, Args... args)
{
    // on every launch: the attribute belongs to the current device
    cudaError_t e =
        cudaFuncSetAttribute(gemm_sm90_fp8<TA, TB, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(gemm_sm90_fp8<TA, TB, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
    if (e != cudaSuccess)
        return e;
    gemm_sm90_fp8<TA, TB, true><<<grid, THREADS, SMEM_BYTES, stream>>>(args...);
    gemm_sm90_fp8<TA, TB, false><<<grid, THREADS, SMEM_BYTES, stream>>>(args...);
    return cudaGetLastError();
}

} // namespace

cudaError_t launch_gemm_sm90_fp8(const dview &a, const dview &sa, const dview &b, const dview &sb, const dview *c,
                                 const dview &d, cudaStream_t stream)
{
    const int64_t M = a.rows, N = b.rows, K = a.cols;
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX) // the backend refuses these with its own words
        return cudaErrorInvalidValue;
    if (M == 0 || N == 0)
        return cudaSuccess;
    const int nkb = (int)((K + 31) / 32);
    const int64_t Mp = round_up(M, BM), Np = round_up(N, BN);
    const int tiles_m = (int)(Mp / BM), tiles_n = (int)(Np / BN); // at most 2^24 each
    if ((int64_t)tiles_m * tiles_n > INT32_MAX) // the grid's x; D would hold 2^45 elements
        return cudaErrorInvalidValue;

    scratch mem(stream);
    cudaError_t e;
    CUtensorMap maps[4];
    memset(maps, 0, sizeof maps);
    scale_range *ranges = nullptr;
    int *in_range = nullptr;
    if ((e = mem.get(&in_range, sizeof(int))) != cudaSuccess)
        return e;
    if (nkb == 0 && (e = cudaMemsetAsync(in_range, 0, sizeof(int), stream)) != cudaSuccess)
        return e;
    if (nkb > 0) {
        const uint8_t *pa, *pb;
        int64_t a_rs, b_rs;
        float *fa, *fb;
        if ((e = tma_operand(a, mem, stream, &pa, &a_rs)) != cudaSuccess ||
            (e = tma_operand(b, mem, stream, &pb, &b_rs)) != cudaSuccess ||
            (e = mem.get(&fa, (size_t)nkb * Mp * sizeof(float))) != cudaSuccess ||
            (e = mem.get(&fb, (size_t)nkb * Np * sizeof(float))) != cudaSuccess ||
            (e = mem.get(&ranges, (size_t)nkb * sizeof(scale_range))) != cudaSuccess)
            return e;
        if ((e = cudaMemsetAsync(ranges, 0, (size_t)nkb * sizeof(scale_range), stream)) != cudaSuccess)
            return e;
        const dim3 block(32, 8);
        const unsigned kchunks = (unsigned)std::min<int64_t>((nkb + 31) / 32, 65535);
        prepare_scales<<<dim3((unsigned)(Mp / 32), kchunks), block, 0, stream>>>(sa.base, M, nkb, sa.rs, sa.cs, fa, Mp,
                                                                                 ranges, 0);
        prepare_scales<<<dim3((unsigned)(Np / 32), kchunks), block, 0, stream>>>(sb.base, N, nkb, sb.rs, sb.cs, fb, Np,
                                                                                 ranges, 1);
        scales_in_range<<<1, 1024, 0, stream>>>(ranges, nkb, in_range);
        if ((e = cudaGetLastError()) != cudaSuccess ||
            (e = tensor_map(&maps[0], CU_TENSOR_MAP_DATA_TYPE_UINT8, pa, (uint64_t)K, (uint64_t)M, (uint64_t)a_rs, BK,
                            BM, CU_TENSOR_MAP_SWIZZLE_128B)) != cudaSuccess ||
            (e = tensor_map(&maps[1], CU_TENSOR_MAP_DATA_TYPE_UINT8, pb, (uint64_t)K, (uint64_t)N, (uint64_t)b_rs, BK,
                            BN, CU_TENSOR_MAP_SWIZZLE_128B)) != cudaSuccess ||
            (e = tensor_map(&maps[2], CU_TENSOR_MAP_DATA_TYPE_FLOAT32, fa, (uint64_t)Mp, (uint64_t)nkb,
                            (uint64_t)Mp * 4, BM, KB, CU_TENSOR_MAP_SWIZZLE_NONE)) != cudaSuccess ||
            (e = tensor_map(&maps[3], CU_TENSOR_MAP_DATA_TYPE_FLOAT32, fb, (uint64_t)Np, (uint64_t)nkb,
                            (uint64_t)Np * 4, BN, KB, CU_TENSOR_MAP_SWIZZLE_NONE)) != cudaSuccess)
            return e;
    }

    const int ta = a.dtype == MXFA_E5M2, tb = b.dtype == MXFA_E5M2;
    const float *cp = c ? reinterpret_cast<const float *>(c->base) : nullptr;
    float *dp = reinterpret_cast<float *>(d.base);
    const dim3 grid((unsigned)(tiles_m * tiles_n));
#define MXFA_LAUNCH(TA, TB)                                                                                            \
    do {                                                                                                               \
        if ((e = launch_both<TA, TB>(grid, stream, maps[0], maps[1], maps[2], maps[3], in_range, M, N, nkb, cp,        \
                                     c ? c->rs : 0, c ? c->cs : 0, dp, d.rs, d.cs, tiles_m, tiles_n)) != cudaSuccess)  \
            return e;                                                                                                  \
    } while (0)
    if (!ta && !tb)
        MXFA_LAUNCH(0, 0);
    else if (!ta)
        MXFA_LAUNCH(0, 1);
    else if (!tb)
        MXFA_LAUNCH(1, 0);
    else
        MXFA_LAUNCH(1, 1);
#undef MXFA_LAUNCH
    return cudaGetLastError();
}

} // namespace mxfa_gpu
