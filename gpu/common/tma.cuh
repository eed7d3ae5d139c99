// SPDX-License-Identifier: BSD-3-Clause
// What the kernels of both architectures share for asynchronous copies
// (Hopper and Blackwell): the PTX of mbarriers and tensor-memory-accelerator
// copies (device code for sm_90a and sm_100a), and on the host the tensor
// maps, scratch memory and operands laid out for the accelerator.
#ifndef MXFA_GPU_COMMON_TMA_CUH
#define MXFA_GPU_COMMON_TMA_CUH

#include <cstring>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "module.cuh"

namespace mxfa_gpu {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

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
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(b)), "r"(bytes) : "memory");
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

// The same for a thread with nothing else to do until the phase completes
// (a producer waiting for a stage to be freed): with a time hint the
// hardware may suspend it until then (or for at most 1 ms) rather than
// return at once. Polled without it, a waiting producer issued two
// instructions about every nine cycles on its warp scheduler, issue slots
// that the consumer warps beside it need.
__device__ __forceinline__ void bar_wait_idle(uint64_t *b, uint32_t parity)
{
    asm volatile("{\n"
                 ".reg .pred done;\n"
                 "retry:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1, %2;\n"
                 "@!done bra retry;\n"
                 "}\n" ::"r"(smem_addr(b)),
                 "r"(parity), "r"(1000000u)
                 : "memory");
}

__device__ __forceinline__ void tma_load(void *dst, const CUtensorMap *map, int c0, int c1, uint64_t *bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
                 "[%4];" ::"r"(smem_addr(dst)),
                 "l"(map), "r"(c0), "r"(c1), "r"(smem_addr(bar))
                 : "memory");
}

// A flag in global memory read with acquire and written with release at
// the GPU's scope: the backward kernels' turns on dQ, passed between CTAs.
__device__ __forceinline__ int ld_acquire(const int *p)
{
    int v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void st_release(int *p, int v)
{
    asm volatile("st.release.gpu.global.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// The box of `map` at (c0, c1) from shared memory, through the async proxy,
// in the thread's current bulk group; tma_store_commit closes the group and
// tma_store_wait_all waits until every group's writes are done.
__device__ __forceinline__ void tma_store(const CUtensorMap *map, int c0, int c1, const void *src)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(map), "r"(c0),
                 "r"(c1), "r"(smem_addr(src))
                 : "memory");
}
__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
__device__ __forceinline__ void tma_store_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

// The tile of D that block `id` of the grid makes, as (tile row, tile
// column): tiles go in groups of eight rows of tiles, down each column of a
// group first, so that a wave of blocks reuses B's tiles from L2.
__device__ __forceinline__ int2 grouped_tile(int id, int tiles_m, int tiles_n)
{
    const int group = 8, per_group = group * tiles_n;
    const int first_m = (id / per_group) * group, rows_in_group = min(tiles_m - first_m, group);
    return make_int2(first_m + (id % per_group) % rows_in_group, (id % per_group) / rows_in_group);
}

// The mbarriers of a ring of N stages: `full` completes on the producer's
// one arrive (with the bytes it expects), `empty` on every consumer
// thread's. One thread calls it; the block synchronizes after.
template <int N>
__device__ __forceinline__ void init_ring(uint64_t (&full)[N], uint64_t (&empty)[N], uint32_t consumer_threads)
{
    for (int s = 0; s < N; s++) {
        bar_init(&full[s], 1);
        bar_init(&empty[s], consumer_threads);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// The first 1024-byte-aligned address of dynamic shared memory at raw
// (128-byte swizzle needs it), reached by pointer arithmetic on raw so that
// the compiler still knows the pointer is shared: loads through it are
// shared-memory loads, not generic ones.
template <typename T> __device__ __forceinline__ T &aligned_shared(uint8_t *raw)
{
    return *reinterpret_cast<T *>(raw + ((1024u - (smem_addr(raw) & 1023u)) & 1023u));
}

// A named barrier for `count` threads (id 0 is __syncthreads'), e.g. one
// warpgroup's: every thread of them waits until all have arrived.
__device__ __forceinline__ void named_sync(uint32_t id, uint32_t count)
{
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}

// An arrival at named barrier `id` (of `count` threads, those that wait at
// it with named_sync and those that arrive), without waiting.
__device__ __forceinline__ void named_arrive(uint32_t id, uint32_t count)
{
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
}

#endif // sm_90a, sm_100a

// ---- host side ----

inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder()
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
inline cudaError_t tensor_map(CUtensorMap *map, CUtensorMapDataType type, const void *base, uint64_t cols, uint64_t rows,
                       uint64_t stride, uint32_t box_cols, uint32_t box_rows, CUtensorMapSwizzle swizzle)
{
    PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
    if (!encode)
        return cudaErrorNotSupported;
    const cuuint64_t dims[2] = {cols, rows}, strides[1] = {stride};
    const cuuint32_t box[2] = {box_cols, box_rows}, elem[2] = {1, 1};
    CUresult r = encode(map, type, 2, const_cast<void *>(base), dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                        swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
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
        cudaError_t e = scratch_alloc(&p[n], bytes, stream);
        if (e == cudaSuccess)
            *out = static_cast<T *>(p[n++]);
        return e;
    }
};

inline int64_t round_up(int64_t x, int64_t m)
{
    return (x + m - 1) / m * m;
}

// An operand's bytes as the tensor-memory accelerator takes them: K
// contiguous, rows 16-byte aligned; a view that is not gets a packed copy.
inline cudaError_t tma_operand(const dview &x, scratch &mem, cudaStream_t stream, const uint8_t **base, int64_t *stride)
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

} // namespace mxfa_gpu

#endif
