// SPDX-License-Identifier: BSD-3-Clause
// What the Blackwell kernels of the cuda module share (gpu/sm100/*.cu)
// beyond common/tma.cuh: one inline wrapper per tcgen05 instruction
// (tensor memory, the block-scaled and bf16 MMAs, the scale copy, loads and
// stores) and the 1-D bulk copy; device code for sm_100a only. The
// descriptors they take are built by tcgen05_desc.h.
//
// Not yet run on Blackwell hardware: `mxfa selftest` on such a GPU checks
// every kernel built from these against the emulator.
#ifndef MXFA_GPU_SM100_BLACKWELL_CUH
#define MXFA_GPU_SM100_BLACKWELL_CUH

#include "common/tma.cuh"
#include "sm100/tcgen05_desc.h"

namespace mxfa_gpu {
namespace sm100 {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 1000
#define MXFA_SM100_CODE 1

// ---- tensor memory ----

// Allocates `cols` columns (a power of two in [32, 512]) of all 128 lanes
// and writes their address to *dst (shared memory). One whole warp calls it.
__device__ __forceinline__ void tmem_alloc(uint32_t *dst, uint32_t cols)
{
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;" ::"r"(smem_addr(dst)), "r"(cols)
                 : "memory");
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
}

// Frees what tmem_alloc gave; the same warp, after every use has ended.
__device__ __forceinline__ void tmem_free(uint32_t addr, uint32_t cols)
{
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" ::"r"(addr), "r"(cols) : "memory");
}

// Orders tcgen05 work around a thread synchronization (a barrier or an
// mbarrier wait): `before` ahead of the arrive, `after` behind the wait.
__device__ __forceinline__ void tc_fence_before()
{
    asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
}

__device__ __forceinline__ void tc_fence_after()
{
    asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
}

// ---- registers between warpgroups ----

// setmaxnreg: this warpgroup's registers a thread up to N (waiting until the
// CTA's pool has them) or down to N (giving them back). Every warp of the
// warpgroup must make the same call.
template <int N> __device__ __forceinline__ void regs_inc(void)
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}
template <int N> __device__ __forceinline__ void regs_dec(void)
{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}

// ---- the MMAs (issued by one thread) ----

// D[tmem] (+)= A * B^T, A and B fp8 in shared memory (descriptors), their
// block scales in tensor memory (sfa, sfb: the column of the scale words;
// the instruction descriptor names the byte). accumulate = 0 ignores D.
__device__ __forceinline__ void mma_mxf8(uint32_t d, uint64_t a_desc, uint64_t b_desc, uint32_t idesc, uint32_t sfa,
                                         uint32_t sfb, uint32_t accumulate)
{
    asm volatile("{\n"
                 ".reg .pred acc;\n"
                 "setp.ne.u32 acc, %6, 0;\n"
                 "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X [%0], %1, %2, %3, [%4], [%5], "
                 "acc;\n"
                 "}\n" ::"r"(d),
                 "l"(a_desc), "l"(b_desc), "r"(idesc), "r"(sfa), "r"(sfb), "r"(accumulate)
                 : "memory");
}

// D[tmem] (+)= A * B^T, A and B bf16 in shared memory.
__device__ __forceinline__ void mma_bf16(uint32_t d, uint64_t a_desc, uint64_t b_desc, uint32_t idesc,
                                         uint32_t accumulate)
{
    asm volatile("{\n"
                 ".reg .pred acc;\n"
                 "setp.ne.u32 acc, %4, 0;\n"
                 "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, acc;\n"
                 "}\n" ::"r"(d),
                 "l"(a_desc), "l"(b_desc), "r"(idesc), "r"(accumulate)
                 : "memory");
}

// 32 rows of 16 bytes of shared memory (a 512-byte scale atom) into four
// columns of every lane quarter (tcgen05_desc.h says where each byte goes).
__device__ __forceinline__ void copy_scales(uint32_t taddr, uint64_t sdesc)
{
    asm volatile("tcgen05.cp.cta_group::1.32x128b.warpx4 [%0], %1;" ::"r"(taddr), "l"(sdesc) : "memory");
}

// The mbarrier completes (one arrive) once every tcgen05 operation this
// thread issued before has finished.
__device__ __forceinline__ void mma_commit(uint64_t *bar)
{
    asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" ::"r"(smem_addr(bar))
                 : "memory");
}

// ---- loads and stores (a warp: lanes 32 (warp % 4) .. + 31) ----

// 32 consecutive columns of this thread's lane into v; wait with tmem_wait_ld.
__device__ __forceinline__ void tmem_ld32(uint32_t taddr, uint32_t (&v)[32])
{
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x32.b32 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, [%32];"
                 : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]), "=r"(v[4]), "=r"(v[5]), "=r"(v[6]), "=r"(v[7]),
                   "=r"(v[8]), "=r"(v[9]), "=r"(v[10]), "=r"(v[11]), "=r"(v[12]), "=r"(v[13]), "=r"(v[14]),
                   "=r"(v[15]), "=r"(v[16]), "=r"(v[17]), "=r"(v[18]), "=r"(v[19]), "=r"(v[20]), "=r"(v[21]),
                   "=r"(v[22]), "=r"(v[23]), "=r"(v[24]), "=r"(v[25]), "=r"(v[26]), "=r"(v[27]), "=r"(v[28]),
                   "=r"(v[29]), "=r"(v[30]), "=r"(v[31])
                 : "r"(taddr)
                 : "memory");
}

__device__ __forceinline__ void tmem_st32(uint32_t taddr, const uint32_t (&v)[32])
{
    asm volatile("tcgen05.st.sync.aligned.32x32b.x32.b32 [%0], "
                 "{%1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, "
                 "%17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32};" ::"r"(taddr),
                 "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3]), "r"(v[4]), "r"(v[5]), "r"(v[6]), "r"(v[7]), "r"(v[8]),
                 "r"(v[9]), "r"(v[10]), "r"(v[11]), "r"(v[12]), "r"(v[13]), "r"(v[14]), "r"(v[15]), "r"(v[16]),
                 "r"(v[17]), "r"(v[18]), "r"(v[19]), "r"(v[20]), "r"(v[21]), "r"(v[22]), "r"(v[23]), "r"(v[24]),
                 "r"(v[25]), "r"(v[26]), "r"(v[27]), "r"(v[28]), "r"(v[29]), "r"(v[30]), "r"(v[31])
                 : "memory");
}

__device__ __forceinline__ void tmem_wait_ld()
{
    asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
}

__device__ __forceinline__ void tmem_wait_st()
{
    asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory");
}

// ---- a GEMM tile's accumulator (D in columns [0, BN), a row a lane) ----

// C's row `row` (columns n0 .. n0 + BN - 1, zeros past M and N) into this
// thread's lane of the accumulator, before the chain: its first step adds it.
template <int BN>
__device__ __forceinline__ void accumulator_from_c(uint32_t lanes, int64_t row, int64_t n0, int64_t M, int64_t N,
                                                   const float *c, int64_t c_rs, int64_t c_cs)
{
    for (int j = 0; j < BN; j += 32) {
        uint32_t v[32];
#pragma unroll
        for (int i = 0; i < 32; i++) {
            const int64_t col = n0 + j + i;
            v[i] = row < M && col < N ? __float_as_uint(c[row * c_rs + col * c_cs]) : 0u;
        }
        tmem_st32(lanes + j, v);
    }
    tmem_wait_st();
}

// D's row out of this thread's lane of the accumulator, 32 columns at a
// time; a chain of no step (K = 0) gives D = C, or zeros without C.
template <int BN>
__device__ __forceinline__ void accumulator_to_d(uint32_t lanes, int64_t row, int64_t n0, int64_t M, int64_t N,
                                                 bool chained, const float *c, int64_t c_rs, int64_t c_cs, float *d,
                                                 int64_t d_rs, int64_t d_cs)
{
    for (int j = 0; j < BN; j += 32) {
        uint32_t v[32];
        if (chained) {
            tmem_ld32(lanes + j, v);
            tmem_wait_ld();
        }
#pragma unroll
        for (int i = 0; i < 32; i++) {
            const int64_t col = n0 + j + i;
            if (row < M && col < N)
                d[row * d_rs + col * d_cs] = chained ? __uint_as_float(v[i]) : c ? c[row * c_rs + col * c_cs] : 0.0f;
        }
    }
}

// ---- bulk copies ----

// `bytes` (a multiple of 16) from global to shared memory, completing on bar.
__device__ __forceinline__ void bulk_load(void *dst, const void *src, uint32_t bytes, uint64_t *bar)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     smem_addr(dst)),
                 "l"(src), "r"(bytes), "r"(smem_addr(bar))
                 : "memory");
}

#endif // sm_100a

} // namespace sm100
} // namespace mxfa_gpu

#endif
