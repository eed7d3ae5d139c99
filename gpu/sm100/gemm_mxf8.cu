// SPDX-License-Identifier: BSD-3-Clause
// D = A * B^T + C under the sm100 model (docs/NUMERICS.md) on a Blackwell
// GPU: the hardware's own block-scaled product, tcgen05.mma
// kind::mxf8f6f4.block_scale with .scale_vec::1X, one instruction per MX
// block of 32 along K, accumulating in tensor memory from C. The model is
// the instruction's, so the kernel adds nothing of its own to the numerics:
// no promotion, no scale arithmetic.
//
// One CTA of four warps makes a 128 x 256 tile of D (the largest shape of
// one instruction on one CTA). Thread 0 streams 128-deep slices of A and B
// (128-byte swizzle, through the tensor-memory accelerator) and their scale
// atoms (512 bytes each, the library's swizzled layout, which is what
// tcgen05.cp 32x128b.warpx4 takes) into a ring of four stages. Thread 32
// copies each stage's scales into tensor memory and issues the stage's
// MMAs, four instructions for the four blocks, each naming its byte of the
// scale words; tcgen05.commit frees the stage for the producer. C goes into
// the accumulator columns first (tcgen05.st), so the first instruction
// already adds it, as the model's chain does; without C the first
// instruction does not read D. At the end all four warps read their 32
// lanes of D out of tensor memory.
//
// Exactly ceil(K / 32) instructions run: an extra one on zero codes would
// still be a step of the chain (it turns a -0 accumulator into +0).
//
// Not yet run on Blackwell hardware; `mxfa selftest` checks it there.
#include <cstddef>

#include "blackwell.cuh"

namespace mxfa_gpu {
namespace {

using namespace sm100;

constexpr int BM = 128, BN = 256, BK = 128, STAGES = 4, KB = BK / 32; // KB: MX blocks a stage
constexpr int THREADS = 128;
constexpr int SF_ATOM = 512; // scales of 128 rows x 4 blocks
// Tensor memory: D in columns [0, BN), then each stage's scale words: A's
// four columns, B's eight.
#ifdef MXFA_SM100_CODE
constexpr uint32_t TMEM_COLS = 512, SFA_COL = BN, SFB_COL = BN + 4 * STAGES;
static_assert(SFB_COL + 8 * STAGES <= TMEM_COLS, "tensor memory layout");
#endif

struct __align__(1024) stage
{
    uint8_t a[BM * BK]; // 128 rows of 128 bytes, 128-byte swizzle
    uint8_t b[BN * BK];
    uint8_t sfa[SF_ATOM];
    uint8_t sfb[BN / 128][SF_ATOM];
};
#ifdef MXFA_SM100_CODE
constexpr uint32_t STAGE_BYTES = BM * BK + BN * BK + SF_ATOM * (1 + BN / 128); // what one stage's copies bring
#endif

static_assert(offsetof(stage, b) % 1024 == 0 && offsetof(stage, sfa) % 16 == 0 && offsetof(stage, sfb) % 16 == 0,
              "the swizzled operands 1024-byte aligned, the scale atoms 16-byte (the bulk copies, tcgen05.cp)");

struct shared {
    stage st[STAGES];
    uint64_t full[STAGES], empty[STAGES], done;
    uint32_t tmem;
};

constexpr size_t SMEM_BYTES = sizeof(shared) + 1024;

// ---- the kernel ----

// sfa, sfb: the swizzled scales, atoms (128 rows x 4 blocks) row-major,
// atoms_k atoms along K; B's rows padded to a multiple of BN.
template <int TA, int TB>
__global__ void __launch_bounds__(THREADS, 1)
    gemm_sm100_mxf8(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                    const uint8_t *sfa, const uint8_t *sfb, int64_t atoms_k, int64_t M, int64_t N, int nkb,
                    const float *c, int64_t c_rs, int64_t c_cs, float *d, int64_t d_rs, int64_t d_cs, int tiles_m,
                    int tiles_n)
{
#ifdef MXFA_SM100_CODE
    extern __shared__ uint8_t raw[]; // sizeof(shared) + 1024 bytes
    shared &sh = aligned_shared<shared>(raw);
    const int nks = (nkb + KB - 1) / KB;
    const int2 tile = grouped_tile((int)blockIdx.x, tiles_m, tiles_n);
    const int64_t m0 = (int64_t)tile.x * BM, n0 = (int64_t)tile.y * BN;
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            bar_init(&sh.full[s], 1);  // the producer's arrive, with the bytes
            bar_init(&sh.empty[s], 1); // the MMA thread's commit
        }
        bar_init(&sh.done, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    if (warp == 0)
        tmem_alloc(&sh.tmem, TMEM_COLS);
    tc_fence_before();
    __syncthreads();
    tc_fence_after();
    const uint32_t tmem = sh.tmem;
    // this thread's row of the tile is its lane of tensor memory
    const int64_t row = m0 + warp * 32 + lane;
    const uint32_t my_lanes = tmem + ((uint32_t)(warp * 32) << 16);

    if (c && nkb > 0)
        accumulator_from_c<BN>(my_lanes, row, n0, M, N, c, c_rs, c_cs);
    tc_fence_before();
    __syncthreads();
    tc_fence_after();

    if (threadIdx.x == 0) { // the producer
        for (int ks = 0, s = 0, phase = 0; ks < nks; ks++) {
            if (ks >= STAGES)
                bar_wait(&sh.empty[s], phase ^ 1);
            bar_expect(&sh.full[s], STAGE_BYTES);
            tma_load(sh.st[s].a, &map_a, ks * BK, (int)m0, &sh.full[s]);
            tma_load(sh.st[s].b, &map_b, ks * BK, (int)n0, &sh.full[s]);
            bulk_load(sh.st[s].sfa, sfa + ((int64_t)tile.x * atoms_k + ks) * SF_ATOM, SF_ATOM, &sh.full[s]);
            for (int h = 0; h < BN / 128; h++)
                bulk_load(sh.st[s].sfb[h], sfb + (((int64_t)tile.y * (BN / 128) + h) * atoms_k + ks) * SF_ATOM,
                          SF_ATOM, &sh.full[s]);
            if (++s == STAGES)
                s = 0, phase ^= 1;
        }
    } else if (threadIdx.x == 32) { // the MMA thread
        for (int ks = 0, s = 0, phase = 0; ks < nks; ks++) {
            bar_wait(&sh.full[s], phase);
            tc_fence_after();
            const stage &st = sh.st[s];
            const uint32_t sfa_t = tmem + SFA_COL + 4 * s, sfb_t = tmem + SFB_COL + 8 * s;
            copy_scales(sfa_t, mxfa_tc_sdesc_sf(smem_addr(st.sfa)));
            for (int h = 0; h < BN / 128; h++)
                copy_scales(sfb_t + 4 * h, mxfa_tc_sdesc_sf(smem_addr(st.sfb[h])));
            // a copy and the MMAs after it, issued by one thread, run in order
            const uint64_t da = mxfa_tc_sdesc(smem_addr(st.a), 16, 1024, MXFA_TC_SWIZZLE_128B);
            const uint64_t db = mxfa_tc_sdesc(smem_addr(st.b), 16, 1024, MXFA_TC_SWIZZLE_128B);
            const int nb = min(KB, nkb - ks * KB);
            for (int kb = 0; kb < nb; kb++) // block kb: 32 bytes along K, 2 in the descriptors' address field
                mma_mxf8(tmem, da + 2 * kb, db + 2 * kb, mxfa_tc_idesc_mxf8(TA, TB, BM, BN, kb, kb), sfa_t, sfb_t,
                         (ks | kb) != 0 || c != nullptr);
            mma_commit(&sh.empty[s]);
            if (++s == STAGES)
                s = 0, phase ^= 1;
        }
        if (nks > 0)
            mma_commit(&sh.done);
    }
    __syncwarp();

    // D out of tensor memory
    if (nks > 0) {
        bar_wait(&sh.done, 0);
        tc_fence_after();
    }
    accumulator_to_d<BN>(my_lanes, row, n0, M, N, nks > 0, c, c_rs, c_cs, d, d_rs, d_cs);
    tc_fence_before();
    __syncthreads();
    if (warp == 0) {
        tc_fence_after();
        tmem_free(tmem, TMEM_COLS);
    }
#endif
}

} // namespace

cudaError_t launch_gemm_sm100(const dview &a, const dview &sa, const dview &b, const dview &sb, const dview *c,
                              const dview &d, cudaStream_t stream)
{
    const int64_t M = a.rows, N = b.rows, K = a.cols;
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX) // the backend refuses these with its own words
        return cudaErrorInvalidValue;
    if (M == 0 || N == 0)
        return cudaSuccess;
    const int nkb = (int)((K + 31) / 32);
    const int64_t Mp = round_up(M, BM), Np = round_up(N, BN), kcols = round_up(nkb, KB);
    const int tiles_m = (int)(Mp / BM), tiles_n = (int)(Np / BN);
    if ((int64_t)tiles_m * tiles_n > INT32_MAX) // the grid's x; D would hold 2^45 elements
        return cudaErrorInvalidValue;

    scratch mem(stream);
    cudaError_t e;
    CUtensorMap maps[2];
    memset(maps, 0, sizeof maps);
    uint8_t *sfa = nullptr, *sfb = nullptr;
    if (nkb > 0) {
        const uint8_t *pa, *pb;
        int64_t a_rs, b_rs;
        if ((e = tma_operand(a, mem, stream, &pa, &a_rs)) != cudaSuccess ||
            (e = tma_operand(b, mem, stream, &pb, &b_rs)) != cudaSuccess ||
            (e = mem.get(&sfa, (size_t)(Mp * kcols))) != cudaSuccess ||
            (e = mem.get(&sfb, (size_t)(Np * kcols))) != cudaSuccess ||
            (e = launch_swizzle(sa, 0, nullptr, 0, sfa, Mp, kcols, stream)) != cudaSuccess ||
            (e = launch_swizzle(sb, 0, nullptr, 0, sfb, Np, kcols, stream)) != cudaSuccess ||
            (e = tensor_map(&maps[0], CU_TENSOR_MAP_DATA_TYPE_UINT8, pa, (uint64_t)K, (uint64_t)M, (uint64_t)a_rs, BK,
                            BM, CU_TENSOR_MAP_SWIZZLE_128B)) != cudaSuccess ||
            (e = tensor_map(&maps[1], CU_TENSOR_MAP_DATA_TYPE_UINT8, pb, (uint64_t)K, (uint64_t)N, (uint64_t)b_rs, BK,
                            BN, CU_TENSOR_MAP_SWIZZLE_128B)) != cudaSuccess)
            return e;
    }

    const float *cp = c ? reinterpret_cast<const float *>(c->base) : nullptr;
    float *dp = reinterpret_cast<float *>(d.base);
    const dim3 grid((unsigned)(tiles_m * tiles_n));
    const int64_t atoms_k = kcols / KB;
#define MXFA_LAUNCH(TA, TB)                                                                                            \
    do {                                                                                                               \
        /* on every launch: the attribute belongs to the current device */                                             \
        if ((e = cudaFuncSetAttribute(gemm_sm100_mxf8<TA, TB>, cudaFuncAttributeMaxDynamicSharedMemorySize,            \
                                      SMEM_BYTES)) != cudaSuccess)                                                     \
            return e;                                                                                                  \
        gemm_sm100_mxf8<TA, TB><<<grid, THREADS, SMEM_BYTES, stream>>>(maps[0], maps[1], sfa, sfb, atoms_k, M, N, nkb, \
                                                                       cp, c ? c->rs : 0, c ? c->cs : 0, dp, d.rs,     \
                                                                       d.cs, tiles_m, tiles_n);                        \
    } while (0)
    const bool ea = a.dtype == MXFA_E5M2, eb = b.dtype == MXFA_E5M2;
    if (!ea && !eb)
        MXFA_LAUNCH(MXFA_TC_E4M3, MXFA_TC_E4M3);
    else if (!ea)
        MXFA_LAUNCH(MXFA_TC_E4M3, MXFA_TC_E5M2);
    else if (!eb)
        MXFA_LAUNCH(MXFA_TC_E5M2, MXFA_TC_E4M3);
    else
        MXFA_LAUNCH(MXFA_TC_E5M2, MXFA_TC_E5M2);
#undef MXFA_LAUNCH
    return cudaGetLastError();
}

} // namespace mxfa_gpu
