// SPDX-License-Identifier: BSD-3-Clause
// D = A * B^T + C under the sm90-bf16 model (docs/NUMERICS.md): every
// element widened exactly to bf16 with its block's scale, then one chain of
// wgmma bf16 k16 steps from C, which the tensor cores accumulate
// themselves: no promotion on the CUDA cores.
//
// The widening is a pass of its own (decode the code exactly, one fp32
// multiplication by 2^(scale - 127), fp32 to bf16 to nearest even; a NaN
// scale or code gives the quiet NaN 0x7FC0), checked on the CPU against the
// emulator's widening for every code and scale of both formats. The product
// then is a plain bf16 GEMM: 128 x 256 tiles, a producer warpgroup streaming
// 64-deep slices (128 bytes a row, 128-byte swizzle) through the
// tensor-memory accelerator into four stages, two consumer warpgroups of 64
// rows, one m64n256k16 wgmma per 16 of K. It exists to measure the model
// against sm90-fp8 (BENCHMARKS.md).
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "hopper.cuh"
#include "mx.cuh"

namespace mxfa_gpu {
namespace {

using namespace sm90;

constexpr int BM = 128, BN = 256, BK = 64, STAGES = 4; // BK: bf16 elements, 128 bytes
constexpr int CONSUMERS = 2, THREADS = (CONSUMERS + 1) * 128;

struct __align__(1024) stage {
    uint16_t a[BM * BK];
    uint16_t b[BN * BK];
};

struct shared {
    stage st[STAGES];
    uint64_t full[STAGES], empty[STAGES];
};

constexpr size_t SMEM_BYTES = sizeof(shared) + 1024;

// One element's bf16: see the top of the file.
__device__ __forceinline__ uint16_t widen_one(uint8_t code, uint8_t scale, bool e5m2)
{
    const __half h = __nv_cvt_fp8_to_halfraw(code, e5m2 ? __NV_E5M2 : __NV_E4M3);
    const float v = __half2float(h);
    if (scale == 0xFF || v != v)
        return 0x7FC0;
    const float s = e8m0_value(scale);
    return (uint16_t)f32_to_bf16(__float_as_uint(__fmul_rn(v, s)));
}

// codes [rows, K] and their scales [rows, ceil(K / 32)] to bf16 rows of
// out_rs elements; grid x along K, grid y over the rows.
__global__ void widen(dview codes, dview scales, bool e5m2, uint16_t *out, int64_t out_rs)
{
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= codes.cols)
        return;
    for (int64_t r = blockIdx.y; r < codes.rows; r += gridDim.y)
        out[r * out_rs + c] = widen_one(codes.base[r * codes.rs + c * codes.cs],
                                        scales.base[r * scales.rs + (c / 32) * scales.cs], e5m2);
}

#ifdef MXFA_SM90_CODE

constexpr int PRODUCER_REGS = 24, CONSUMER_REGS = 240; // as in gemm_fp8.cu

#define MXFA_WGMMA_REGS128 \
    "{" \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
#define MXFA_WGMMA_ACC128(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
    "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
    "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
    "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
    "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
    "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
    "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
    "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
// d += A * B^T for one k16 step (scale-d 1), m64n256, both K-major.
__device__ __forceinline__ void wgmma_k16(float (&d)[128], uint64_t da, uint64_t db)
{
    asm volatile("{\n.reg .pred acc;\nsetp.ne.b32 acc, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " MXFA_WGMMA_REGS128
                 ", %128, %129, acc, 1, 1, 0, 0;\n}\n"
                 : MXFA_WGMMA_ACC128(d)
                 : "l"(da), "l"(db), "n"(1)
                 : "memory");
}

#endif // MXFA_SM90_CODE

// Accumulator fragment of m64n256 (per warpgroup): element i of warp w,
// lane (g = lane / 4, t = lane % 4) is row 16w + g + 8 * ((i / 2) % 2),
// column 8 * (i / 4) + 2t + i % 2.
// HAS_C: C is given. ptxas serializes the chain when the accumulator's
// first value comes from a branch (C or zeros), so each is its own kernel,
// and C's loads are clamped inside the matrix instead of skipped (what
// they bring to rows and columns beyond it is never stored).
template <bool HAS_C>
__global__ void __launch_bounds__(THREADS, 1)
    gemm_sm90_bf16(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b, int64_t M,
                   int64_t N, int64_t K, const float *c, int64_t c_rs, int64_t c_cs, float *d, int64_t d_rs,
                   int64_t d_cs, int tiles_m, int tiles_n)
{
#ifdef MXFA_SM90_CODE
    extern __shared__ uint8_t raw[]; // sizeof(shared) + 1024 bytes
    shared &sh = aligned_shared<shared>(raw);
    const int nks = (int)((K + BK - 1) / BK);

    const int2 tile = grouped_tile((int)blockIdx.x, tiles_m, tiles_n);
    const int64_t m0 = (int64_t)tile.x * BM, n0 = (int64_t)tile.y * BN;
    if (threadIdx.x == 0)
        init_ring(sh.full, sh.empty, CONSUMERS * 128);
    __syncthreads();

    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    if (warp < 4) { // the producer warpgroup
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(PRODUCER_REGS));
        if (threadIdx.x == 0)
            for (int ks = 0; ks < nks; ks++) {
                const int s = ks % STAGES;
                if (ks >= STAGES)
                    bar_wait_idle(&sh.empty[s], ((ks / STAGES) - 1) & 1);
                bar_expect(&sh.full[s], sizeof(stage));
                tma_load(sh.st[s].a, &map_a, ks * BK, (int)m0, &sh.full[s]);
                tma_load(sh.st[s].b, &map_b, ks * BK, (int)n0, &sh.full[s]);
            }
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(CONSUMER_REGS));

    const int wg = warp / 4 - 1, w = warp % 4, g = lane / 4, t = lane % 4;
    const int row0 = wg * 64 + w * 16 + g;
    float acc[128];
#pragma unroll
    for (int i = 0; i < 128; i++) {
        const int64_t r = m0 + row0 + 8 * ((i / 2) % 2), col = n0 + 8 * (i / 4) + 2 * t + i % 2;
        acc[i] = HAS_C ? c[(r < M ? r : M - 1) * c_rs + (col < N ? col : N - 1) * c_cs] : 0.0f;
    }
    // The chain reads and writes acc in the tensor cores until the last
    // wait; the fences keep every other use of it outside.
    fence_regs(acc);
    for (int ks = 0; ks < nks; ks++) {
        const int s = ks % STAGES;
        bar_wait(&sh.full[s], (ks / STAGES) & 1);
        stage &st = sh.st[s];
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < BK / 16; kk++)
            wgmma_k16(acc, desc_sw128(st.a + wg * 64 * BK + kk * 16), desc_sw128(st.b + kk * 16));
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        // the previous stage's products are done: its slot goes back
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
        if (ks > 0)
            bar_arrive(&sh.empty[(ks - 1) % STAGES]);
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    fence_regs(acc);

#pragma unroll
    for (int i = 0; i < 128; i++) {
        const int64_t r = m0 + row0 + 8 * ((i / 2) % 2), col = n0 + 8 * (i / 4) + 2 * t + i % 2;
        if (r < M && col < N)
            d[r * d_rs + col * d_cs] = acc[i];
    }
#endif
}

cudaError_t widen_operand(const dview &codes, const dview &scales, scratch &mem, cudaStream_t stream,
                          uint16_t **out, int64_t *out_rs)
{
    *out_rs = round_up(codes.cols, 8); // rows 16-byte aligned for the accelerator
    cudaError_t e = mem.get(out, (size_t)(codes.rows * *out_rs) * sizeof(uint16_t));
    if (e != cudaSuccess)
        return e;
    return launch_widen(codes, scales, *out, *out_rs, stream);
}

} // namespace

cudaError_t launch_widen(const dview &codes, const dview &scales, uint16_t *out, int64_t out_rs, cudaStream_t stream)
{
    if (codes.rows == 0 || codes.cols == 0)
        return cudaSuccess;
    widen<<<dim3(blocks_for(codes.cols, 256), rows_for(codes.rows)), 256, 0, stream>>>(
        codes, scales, codes.dtype == MXFA_E5M2, out, out_rs);
    return cudaGetLastError();
}

cudaError_t launch_gemm_bf16_rows(const uint16_t *a, int64_t a_rs, const uint16_t *b, int64_t b_rs, int64_t M,
                                  int64_t N, int64_t K, const dview *c, const dview &d, cudaStream_t stream)
{
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX)
        return cudaErrorInvalidValue;
    if (M == 0 || N == 0)
        return cudaSuccess;
    const int tiles_m = (int)((M + BM - 1) / BM), tiles_n = (int)((N + BN - 1) / BN);
    if ((int64_t)tiles_m * tiles_n > INT32_MAX)
        return cudaErrorInvalidValue;
    CUtensorMap maps[2];
    cudaError_t e;
    if ((e = tensor_map(&maps[0], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, a, (uint64_t)K, (uint64_t)M, (uint64_t)a_rs * 2,
                        BK, BM, CU_TENSOR_MAP_SWIZZLE_128B)) != cudaSuccess ||
        (e = tensor_map(&maps[1], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, b, (uint64_t)K, (uint64_t)N, (uint64_t)b_rs * 2,
                        BK, BN, CU_TENSOR_MAP_SWIZZLE_128B)) != cudaSuccess)
        return e;
    // on every launch: the attribute belongs to the current device
    const cudaError_t attr =
        c ? cudaFuncSetAttribute(gemm_sm90_bf16<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES)
          : cudaFuncSetAttribute(gemm_sm90_bf16<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
    if (attr != cudaSuccess)
        return attr;
    const dim3 grid((unsigned)(tiles_m * tiles_n));
    float *dp = reinterpret_cast<float *>(d.base);
    if (c)
        gemm_sm90_bf16<true><<<grid, THREADS, SMEM_BYTES, stream>>>(maps[0], maps[1], M, N, K,
                                                                     reinterpret_cast<const float *>(c->base), c->rs,
                                                                     c->cs, dp, d.rs, d.cs, tiles_m, tiles_n);
    else
        gemm_sm90_bf16<false><<<grid, THREADS, SMEM_BYTES, stream>>>(maps[0], maps[1], M, N, K, nullptr, 0, 0, dp,
                                                                      d.rs, d.cs, tiles_m, tiles_n);
    return cudaGetLastError();
}

cudaError_t launch_gemm_sm90_bf16(const dview &a, const dview &sa, const dview &b, const dview &sb, const dview *c,
                                  const dview &d, cudaStream_t stream)
{
    const int64_t M = a.rows, N = b.rows, K = a.cols;
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX) // the backend refuses these with its own words
        return cudaErrorInvalidValue;
    if (M == 0 || N == 0)
        return cudaSuccess;
    scratch mem(stream);
    uint16_t *wa, *wb;
    int64_t a_rs, b_rs;
    cudaError_t e;
    if ((e = widen_operand(a, sa, mem, stream, &wa, &a_rs)) != cudaSuccess ||
        (e = widen_operand(b, sb, mem, stream, &wb, &b_rs)) != cudaSuccess)
        return e;
    return launch_gemm_bf16_rows(wa, a_rs, wb, b_rs, M, N, K, c, d, stream);
}

} // namespace mxfa_gpu
