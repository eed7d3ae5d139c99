// SPDX-License-Identifier: BSD-3-Clause
// D = A * B^T + C for bf16 A [M, K] and B [N, K] on a Blackwell GPU: one
// chain of tcgen05.mma kind::f16 k16 steps from C (zero when there is none),
// accumulating in fp32 in tensor memory. That is the models' bf16 step on
// Blackwell (group 16, the same row as Hopper's wgmma bf16 k16 in
// cpu/ref/mma.c), which the leak-free causal mask's diagonal blocks take in
// the attention backward pass (gpu/sm90/attn_bwd.cu under sm100).
//
// The kernel is gemm_mxf8.cu's without the scales: one CTA of four warps a
// 128 x 256 tile of D, thread 0 streaming 64-deep slices of A and B (128
// bytes of bf16, 128-byte swizzle) into a ring of four stages, thread 32
// issuing the four k16 steps of each slice, all four warps reading D out of
// tensor memory at the end. Exactly ceil(K / 16) steps run: a step on
// padding zeros is a step of the chain (it would turn a -0 C into +0).
//
// Not yet run on Blackwell hardware; `mxfa selftest` checks the attention
// backward that uses it.
#include <cstddef>

#include "blackwell.cuh"

namespace mxfa_gpu {
namespace {

using namespace sm100;

constexpr int BM = 128, BN = 256, BK = 64, STAGES = 4;
constexpr int THREADS = 128;
#ifdef MXFA_SM100_CODE
constexpr int KS = BK / 16; // k16 steps a stage
constexpr uint32_t TMEM_COLS = 256; // D: BN fp32 columns
constexpr uint32_t STAGE_BYTES = (BM + BN) * BK * 2;
#endif

struct __align__(1024) stage
{
    uint16_t a[BM * BK]; // 128 rows of 128 bytes, 128-byte swizzle
    uint16_t b[BN * BK];
};
static_assert(offsetof(stage, b) % 1024 == 0, "the swizzled operands 1024-byte aligned");

struct shared {
    stage st[STAGES];
    uint64_t full[STAGES], empty[STAGES], done;
    uint32_t tmem;
};

constexpr size_t SMEM_BYTES = sizeof(shared) + 1024;

__global__ void __launch_bounds__(THREADS, 1)
    gemm_sm100_bf16(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b, int64_t M,
                    int64_t N, int64_t K, const float *c, int64_t c_rs, int64_t c_cs, float *d, int64_t d_rs,
                    int64_t d_cs, int tiles_m, int tiles_n)
{
#ifdef MXFA_SM100_CODE
    extern __shared__ uint8_t raw[]; // sizeof(shared) + 1024 bytes
    shared &sh = aligned_shared<shared>(raw);
    const int nks = (int)((K + BK - 1) / BK), nsteps = (int)((K + 15) / 16);
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
    const int64_t row = m0 + warp * 32 + lane; // this thread's row of the tile is its lane of tensor memory
    const uint32_t my_lanes = tmem + ((uint32_t)(warp * 32) << 16);

    if (c && nks > 0)
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
            if (++s == STAGES)
                s = 0, phase ^= 1;
        }
    } else if (threadIdx.x == 32) { // the MMA thread
        for (int ks = 0, s = 0, phase = 0; ks < nks; ks++) {
            bar_wait(&sh.full[s], phase);
            tc_fence_after();
            const uint64_t da = mxfa_tc_sdesc(smem_addr(sh.st[s].a), 16, 1024, MXFA_TC_SWIZZLE_128B);
            const uint64_t db = mxfa_tc_sdesc(smem_addr(sh.st[s].b), 16, 1024, MXFA_TC_SWIZZLE_128B);
            const int n = min(KS, nsteps - ks * KS);
            for (int k = 0; k < n; k++) // step k: 16 bf16, 32 bytes along K, 2 in the address field
                mma_bf16(tmem, da + 2 * k, db + 2 * k, mxfa_tc_idesc_bf16(BM, BN), (ks | k) != 0 || c != nullptr);
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

cudaError_t launch_gemm_sm100_bf16_rows(const uint16_t *a, int64_t a_rs, const uint16_t *b, int64_t b_rs, int64_t M,
                                        int64_t N, int64_t K, const dview *c, const dview &d, cudaStream_t stream)
{
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX) // the tensor-memory accelerator's coordinates
        return cudaErrorInvalidValue;
    if (M == 0 || N == 0)
        return cudaSuccess;
    const int tiles_m = (int)((M + BM - 1) / BM), tiles_n = (int)((N + BN - 1) / BN);
    if ((int64_t)tiles_m * tiles_n > INT32_MAX)
        return cudaErrorInvalidValue;
    cudaError_t e;
    CUtensorMap maps[2];
    memset(maps, 0, sizeof maps);
    if (K > 0 &&
        ((e = tensor_map(&maps[0], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, a, (uint64_t)K, (uint64_t)M, (uint64_t)a_rs * 2,
                         BK, BM, CU_TENSOR_MAP_SWIZZLE_128B)) != cudaSuccess ||
         (e = tensor_map(&maps[1], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, b, (uint64_t)K, (uint64_t)N, (uint64_t)b_rs * 2,
                         BK, BN, CU_TENSOR_MAP_SWIZZLE_128B)) != cudaSuccess))
        return e;
    // on every launch: the attribute belongs to the current device
    if ((e = cudaFuncSetAttribute(gemm_sm100_bf16, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES)) !=
        cudaSuccess)
        return e;
    const float *cp = c ? reinterpret_cast<const float *>(c->base) : nullptr;
    gemm_sm100_bf16<<<dim3((unsigned)(tiles_m * tiles_n)), THREADS, SMEM_BYTES, stream>>>(
        maps[0], maps[1], M, N, K, cp, c ? c->rs : 0, c ? c->cs : 0, reinterpret_cast<float *>(d.base), d.rs, d.cs,
        tiles_m, tiles_n);
    return cudaGetLastError();
}

} // namespace mxfa_gpu
