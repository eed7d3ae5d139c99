// D = A * B^T + C under the sm90-fp8 model (docs/NUMERICS.md): for every MX
// block of 32 along K, one wgmma e4m3/e5m2 k32 into a zero accumulator, then
// on the CUDA cores  acc = fma(partial, 2^(sa + sb), acc)  in fp32 RNE.
//
// One CTA makes a 128 x 128 tile of D. Its first thread streams 128-deep
// slices of A and B (128-byte swizzled, as wgmma reads them) and the
// matching scales through the tensor-memory accelerator into a ring of six
// stages, each guarded by a "full" and an "empty" mbarrier. Two warpgroups
// own 64 rows each; per MX block they run one m64n128k32 wgmma and fold its
// partial into fp32 accumulators held in registers. The promotion costs two
// instructions per element and block (the product of the two scales, then
// the fma), which bounds what such a kernel can reach: BENCHMARKS.md has
// the measurements.
//
// The scale 2^(sa + sb) is the product of two floats 2^sa and 2^sb, exact
// while sa + sb lies in [-149, 127]. A block whose scales may leave that
// range (known before the launch from each block column's extreme
// exponents) is promoted through a double fma instead, which is exact: the
// sum of two values of 24 significant bits rounded to 53 bits and then to 24
// cannot land on a float midpoint it did not start on.
#include <algorithm>
#include <cstring>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "module.cuh"

namespace mxfa_gpu {
namespace {

constexpr int BM = 128, BN = 128, BK = 128, STAGES = 6, KB = BK / 32; // KB: MX blocks a stage
constexpr int WARPGROUPS = 2, THREADS = WARPGROUPS * 128;
constexpr uint32_t NAN_BITS = 0x7FFFFFFFu;

struct __align__(1024) stage {
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
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900
#define MXFA_SM90_CODE 1

// ---- PTX wrappers ----

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void bar_init(uint64_t *b, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(b)), "r"(count) : "memory");
}

__device__ __forceinline__ void bar_expect(uint64_t *b, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(b)), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void bar_arrive(uint64_t *b)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(b)) : "memory");
}

__device__ __forceinline__ void bar_wait(uint64_t *b, uint32_t parity)
{
    asm volatile("{\n"
                 ".reg .pred done;\n"
                 "retry:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra retry;\n"
                 "}\n" ::"r"(smem_addr(b)),
                 "r"(parity)
                 : "memory");
}

__device__ __forceinline__ void tma_load(void *dst, const CUtensorMap *map, int c0, int c1, uint64_t *bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
                 "[%4];" ::"r"(smem_addr(dst)),
                 "l"(map), "r"(c0), "r"(c1), "r"(smem_addr(bar))
                 : "memory");
}

// The wgmma descriptor of a K-major operand in 128-byte swizzle: rows of 128
// bytes, 8-row atoms 1024 bytes apart (stride byte offset), the leading
// offset unused; the start address steps 32 bytes per k32 inside the atom.
__device__ __forceinline__ uint64_t desc_sw128(const void *p)
{
    return (uint64_t)((smem_addr(p) & 0x3FFFF) >> 4) | (uint64_t)1 << 16 | (uint64_t)(1024 >> 4) << 32 |
           (uint64_t)1 << 62;
}

#define MXFA_WGMMA_REGS                                                                                            \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                      \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                             \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                             \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define MXFA_WGMMA_OUT(d)                                                                                          \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),   \
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),     \
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),    \
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),    \
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),    \
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),    \
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),    \
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define MXFA_WGMMA_K32(types, d, da, db)                                                                           \
    asm volatile("{\n.reg .pred zero_acc;\nsetp.ne.b32 zero_acc, %66, 0;\n"                                      \
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32." types " " MXFA_WGMMA_REGS                         \
                 ", %64, %65, zero_acc, 1, 1;\n}\n"                                                                \
                 : MXFA_WGMMA_OUT(d)                                                                               \
                 : "l"(da), "l"(db), "n"(0)                                                                        \
                 : "memory")

// One m64n128k32 product into a zero accumulator (scale-d 0): d = A * B^T.
// TA, TB: 0 for e4m3, 1 for e5m2.
template <int TA, int TB> __device__ __forceinline__ void wgmma_k32(float (&d)[64], uint64_t da, uint64_t db)
{
    if constexpr (TA == 0 && TB == 0)
        MXFA_WGMMA_K32("e4m3.e4m3", d, da, db);
    else if constexpr (TA == 0)
        MXFA_WGMMA_K32("e4m3.e5m2", d, da, db);
    else if constexpr (TB == 0)
        MXFA_WGMMA_K32("e5m2.e4m3", d, da, db);
    else
        MXFA_WGMMA_K32("e5m2.e5m2", d, da, db);
}

// Registers the asynchronous wgmma writes: nothing that reads them may be
// moved across the wait (the empty asm ties each one to it).
__device__ __forceinline__ void fence_regs(float (&d)[64])
{
#pragma unroll
    for (int i = 0; i < 64; i++)
        asm volatile("" : "+f"(d[i])::"memory");
}

// acc = fma(p, 2^(sa + sb), acc) with a = 2^sa, b = 2^sb: see the top of the file.
__device__ __forceinline__ float promote_fast(float p, float a, float b, float acc)
{
    return fmaf(p, a * b, acc);
}

__device__ __noinline__ float promote_wide(float p, float a, float b, float acc)
{
    float r = __double2float_rn(fma((double)p, (double)a * (double)b, (double)acc));
    return r != r ? __uint_as_float(NAN_BITS) : r;
}

#endif // sm_90a

// ---- the kernel ----

// Accumulator fragment of m64n128 (per warpgroup):
// element i of warp w, lane (g = lane / 4, t = lane % 4) is row
// 16w + g + 8 * ((i / 2) % 2), column 8 * (i / 4) + 2t + i % 2.
template <int TA, int TB>
__global__ void __launch_bounds__(THREADS, 1)
    gemm_sm90_fp8(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                  const __grid_constant__ CUtensorMap map_sa, const __grid_constant__ CUtensorMap map_sb,
                  const scale_range *__restrict__ ranges, int64_t M, int64_t N, int nkb, const float *c,
                  int64_t c_rs, int64_t c_cs, float *d, int64_t d_rs, int64_t d_cs, int tiles_m, int tiles_n)
{
#ifdef MXFA_SM90_CODE
    extern __shared__ uint8_t raw[]; // sizeof(shared) + 1024 bytes: 128-byte swizzle needs 1024-byte alignment
    shared &sh = *reinterpret_cast<shared *>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~(uintptr_t)1023);
    const int nks = (nkb + KB - 1) / KB;

    // tiles in groups of 8 rows of tiles, so that a wave reuses B from L2
    const int group = 8, id = (int)blockIdx.x, per_group = group * tiles_n;
    const int first_m = (id / per_group) * group, rows_in_group = min(tiles_m - first_m, group);
    const int tile_m = first_m + (id % per_group) % rows_in_group, tile_n = (id % per_group) / rows_in_group;
    const int64_t m0 = (int64_t)tile_m * BM, n0 = (int64_t)tile_n * BN;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            bar_init(&sh.full[s], 1);
            bar_init(&sh.empty[s], WARPGROUPS * 4);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();

    // stage ks into its slot, once every warp has released the slot
    auto produce = [&](int ks) {
        const int s = ks % STAGES;
        if (ks >= STAGES)
            bar_wait(&sh.empty[s], ((ks / STAGES) - 1) & 1);
        bar_expect(&sh.full[s], sizeof(stage)); // the bytes of its four copies
        tma_load(sh.st[s].a, &map_a, ks * BK, (int)m0, &sh.full[s]);
        tma_load(sh.st[s].b, &map_b, ks * BK, (int)n0, &sh.full[s]);
        tma_load(sh.st[s].sa, &map_sa, (int)m0, ks * KB, &sh.full[s]);
        tma_load(sh.st[s].sb, &map_sb, (int)n0, ks * KB, &sh.full[s]);
    };
    if (threadIdx.x == 0)
        for (int ks = 0; ks < min(nks, STAGES); ks++)
            produce(ks);

    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    const int wg = warp / 4, w = warp % 4, g = lane / 4, t = lane % 4;
    const int row0 = wg * 64 + w * 16 + g; // in the tile; the other row is row0 + 8
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; i++) {
        const int64_t r = m0 + row0 + 8 * ((i / 2) % 2), col = n0 + 8 * (i / 4) + 2 * t + i % 2;
        acc[i] = c && r < M && col < N ? c[r * c_rs + col * c_cs] : 0.0f;
    }

    // Block k's product goes into one of two partials while block k - 1's
    // is promoted from the other, so that the tensor cores need not wait for
    // the promotion. In this version they do: ptxas serializes every wgmma
    // (-Xptxas -v says so, C7518), because of the first thread's producer
    // branch and the lane-0 arrive below (BENCHMARKS.md).
    float part0[64] = {}, part1[64] = {};
    auto issue = [&](float(&p)[64], int k) { // block k's product into p
        const int ks = k / KB, kb = k % KB;
        stage &st = sh.st[ks % STAGES];
        if (kb == 0)
            bar_wait(&sh.full[ks % STAGES], (ks / STAGES) & 1);
        fence_regs(p);
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
        wgmma_k32<TA, TB>(p, desc_sw128(st.a + wg * 64 * BK + kb * 32), desc_sw128(st.b + kb * 32));
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    };
    auto promote = [&](float(&p)[64], int k) { // block k's partial into acc, then its stage released
        const int ks = k / KB, kb = k % KB;
        stage &st = sh.st[ks % STAGES];
        fence_regs(p);
        const scale_range rg = ranges[k];
        // 2^(sa + sb) exact as a float product for every pair of this block column
        const bool exact =
            rg.max_e[0] + rg.max_e[1] <= 254u + 127u && 510u - rg.inv_min_e[0] - rg.inv_min_e[1] >= 254u - 149u;
        const float a0 = st.sa[kb][row0], a1 = st.sa[kb][row0 + 8];
        const float *sb = &st.sb[kb][2 * t];
        // fold the 64 partials with the chosen promotion
        auto fold = [&](auto promote) {
#pragma unroll
            for (int j = 0; j < 16; j++) {
                const float2 b = *reinterpret_cast<const float2 *>(sb + 8 * j);
                acc[4 * j + 0] = promote(p[4 * j + 0], a0, b.x, acc[4 * j + 0]);
                acc[4 * j + 1] = promote(p[4 * j + 1], a0, b.y, acc[4 * j + 1]);
                acc[4 * j + 2] = promote(p[4 * j + 2], a1, b.x, acc[4 * j + 2]);
                acc[4 * j + 3] = promote(p[4 * j + 3], a1, b.y, acc[4 * j + 3]);
            }
        };
        if (exact)
            fold([](float x, float a, float b, float c) { return promote_fast(x, a, b, c); });
        else
            fold([](float x, float a, float b, float c) { return promote_wide(x, a, b, c); });
        if (kb == KB - 1 || k == nkb - 1) {
            __syncwarp();
            if (lane == 0)
                bar_arrive(&sh.empty[ks % STAGES]);
            if (threadIdx.x == 0 && ks + STAGES < nks)
                produce(ks + STAGES);
        }
    };
    // one step: the next block's product started, this block's promoted
    auto step = [&](float(&cur)[64], float(&next)[64], int k) {
        if (k + 1 < nkb) {
            issue(next, k + 1);
            asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
        } else {
            asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        }
        promote(cur, k);
    };
    if (nkb > 0)
        issue(part0, 0);
    for (int k = 0; k < nkb; k += 2) {
        step(part0, part1, k);
        if (k + 1 < nkb)
            step(part1, part0, k + 1);
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
// transposed to [nkb, rows_padded] (NaN for 0xFF), and each block column's
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
            if (k < nkb)
                out[(int64_t)k * rows_padded + r] = !real       ? 0.0f
                                                    : e == 0xFF ? __uint_as_float(NAN_BITS)
                                                    : e == 0    ? __uint_as_float(0x00400000u) // 2^-127
                                                                : __uint_as_float(e << 23);
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

// ---- host side ----

PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder()
{
    static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
        void *p = nullptr;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) !=
                cudaSuccess ||
            q != cudaDriverEntryPointSuccess)
            p = nullptr;
        return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
    }();
    return fn;
}

// A 2-D tensor map: inner dimension `cols` contiguous, rows `stride` bytes apart.
cudaError_t tensor_map(CUtensorMap *map, CUtensorMapDataType type, const void *base, uint64_t cols, uint64_t rows,
                       uint64_t stride, uint32_t box_cols, uint32_t box_rows, CUtensorMapSwizzle swizzle)
{
    PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
    if (!encode)
        return cudaErrorNotSupported;
    const cuuint64_t dims[2] = {cols, rows}, strides[1] = {stride};
    const cuuint32_t box[2] = {box_cols, box_rows}, elem[2] = {1, 1};
    CUresult r = encode(map, type, 2, const_cast<void *>(base), dims, strides, box, elem,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// Scratch memory of one launch, freed in stream order.
struct scratch {
    enum { MAX = 8 };
    cudaStream_t stream;
    void *p[MAX] = {};
    int n = 0;
    explicit scratch(cudaStream_t s) : stream(s) {}
    ~scratch()
    {
        for (int i = 0; i < n; i++)
            cudaFreeAsync(p[i], stream);
    }
    template <typename T> cudaError_t get(T **out, size_t bytes)
    {
        if (n == MAX)
            return cudaErrorInvalidValue;
        cudaError_t e = cudaMallocAsync(&p[n], bytes, stream);
        if (e == cudaSuccess)
            *out = static_cast<T *>(p[n++]);
        return e;
    }
};

int64_t round_up(int64_t x, int64_t m)
{
    return (x + m - 1) / m * m;
}

// An operand's bytes as the tensor-memory accelerator takes them: K
// contiguous, rows 16-byte aligned; a view that is not gets a packed copy.
cudaError_t tma_operand(const dview &x, scratch &mem, cudaStream_t stream, const uint8_t **base, int64_t *stride)
{
    if (x.cs == 1 && x.rs % 16 == 0 && reinterpret_cast<uintptr_t>(x.base) % 16 == 0) {
        *base = x.base;
        *stride = x.rs;
        return cudaSuccess;
    }
    const int64_t packed_rs = round_up(x.cols, 16);
    uint8_t *p;
    cudaError_t e = mem.get(&p, (size_t)(x.rows * packed_rs));
    if (e != cudaSuccess)
        return e;
    const dview dst = {p, x.rows, x.cols, packed_rs, 1, x.dtype};
    if ((e = launch_copy(x, dst, stream)) != cudaSuccess)
        return e;
    *base = p;
    *stride = packed_rs;
    return cudaSuccess;
}

template <int TA, int TB> cudaError_t set_smem_limit()
{
    static const cudaError_t e = cudaFuncSetAttribute(gemm_sm90_fp8<TA, TB>,
                                                      cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
    return e;
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
        prepare_scales<<<dim3((unsigned)(Mp / 32), kchunks), block, 0, stream>>>(sa.base, M, nkb, sa.rs, sa.cs, fa,
                                                                                 Mp, ranges, 0);
        prepare_scales<<<dim3((unsigned)(Np / 32), kchunks), block, 0, stream>>>(sb.base, N, nkb, sb.rs, sb.cs, fb,
                                                                                 Np, ranges, 1);
        if ((e = cudaGetLastError()) != cudaSuccess ||
            (e = tensor_map(&maps[0], CU_TENSOR_MAP_DATA_TYPE_UINT8, pa, (uint64_t)K, (uint64_t)M, (uint64_t)a_rs,
                            BK, BM, CU_TENSOR_MAP_SWIZZLE_128B)) != cudaSuccess ||
            (e = tensor_map(&maps[1], CU_TENSOR_MAP_DATA_TYPE_UINT8, pb, (uint64_t)K, (uint64_t)N, (uint64_t)b_rs,
                            BK, BN, CU_TENSOR_MAP_SWIZZLE_128B)) != cudaSuccess ||
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
#define MXFA_LAUNCH(TA, TB)                                                                                        \
    do {                                                                                                           \
        if ((e = set_smem_limit<TA, TB>()) != cudaSuccess)                                                         \
            return e;                                                                                              \
        gemm_sm90_fp8<TA, TB><<<grid, THREADS, SMEM_BYTES, stream>>>(                                          \
            maps[0], maps[1], maps[2], maps[3], ranges, M, N, nkb, cp, c ? c->rs : 0, c ? c->cs : 0, dp, d.rs,    \
            d.cs, tiles_m, tiles_n);                                                                               \
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
