// SPDX-License-Identifier: BSD-3-Clause
// What the Hopper kernels of the cuda module share (gpu/sm90/*.cu) beyond
// common/tma.cuh: the wgmma descriptors and register fences (device code
// for sm_90a only).
#ifndef MXFA_GPU_SM90_HOPPER_CUH
#define MXFA_GPU_SM90_HOPPER_CUH

#include "common/tma.cuh"

namespace mxfa_gpu {
namespace sm90 {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900
#define MXFA_SM90_CODE 1

// The wgmma descriptor of a K-major operand in 128-byte swizzle: rows of 128
// bytes, 8-row atoms 1024 bytes apart (stride byte offset), the leading
// offset unused; the start address steps 32 bytes (k32 of fp8, k16 of
// bf16) inside the atom.
__device__ __forceinline__ uint64_t desc_sw128(const void *p)
{
    return (uint64_t)((smem_addr(p) & 0x3FFFF) >> 4) | (uint64_t)1 << 16 | (uint64_t)(1024 >> 4) << 32 |
           (uint64_t)1 << 62;
}

// The wgmma descriptor of an MN-major operand (B with imm-trans-b = 1) in
// 128-byte swizzle: 128-byte rows along K, each 64 elements of N (M) in a
// row; 8-row groups along K 1024 bytes apart (the stride byte offset), the
// next 64 columns of N `panel` bytes on (the leading byte offset).
__device__ __forceinline__ uint64_t desc_sw128_mn(const void *p, uint32_t panel)
{
    return (uint64_t)((smem_addr(p) & 0x3FFFF) >> 4) | (uint64_t)(panel >> 4) << 16 | (uint64_t)(1024 >> 4) << 32 |
           (uint64_t)1 << 62;
}

// The same for rows of 64 bytes in 64-byte swizzle: 8-row atoms of 512
// bytes.
__device__ __forceinline__ uint64_t desc_sw64(const void *p)
{
    return (uint64_t)((smem_addr(p) & 0x3FFFF) >> 4) | (uint64_t)1 << 16 | (uint64_t)(512 >> 4) << 32 |
           (uint64_t)2 << 62;
}

// The same for rows of 32 bytes (one k32 step of fp8) in 32-byte swizzle:
// 8-row atoms of 256 bytes.
__device__ __forceinline__ uint64_t desc_sw32(const void *p)
{
    return (uint64_t)((smem_addr(p) & 0x3FFFF) >> 4) | (uint64_t)1 << 16 | (uint64_t)(256 >> 4) << 32 |
           (uint64_t)3 << 62;
}

// A descriptor kept opaque to the compiler, so that the ones made from it
// by adding offsets are made where they are used, not hoisted out of the
// loop into registers that the softmax needs. A descriptor's address field
// counts 16 bytes, and a shared-memory address stays below 2^18 bytes, so
// the descriptor of base + k is that of base plus k / 16 (k a multiple of
// 16): one addition in place of the masks and shifts of desc_sw128.
__device__ __forceinline__ uint64_t opaque(uint64_t d)
{
    asm volatile("" : "+l"(d));
    return d;
}

// Registers the asynchronous wgmma writes: nothing that reads them may be
// moved above the wait (the empty asm, after it, ties each one to it).
template <int N> __device__ __forceinline__ void fence_regs(float (&d)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++)
        asm volatile("" : "+f"(d[i]));
}

// Four 8 x 8 matrices of 16-bit elements stored transposed (stmatrix
// .trans): register m of each lane holds row lane / 4, columns 2 (lane % 4)
// and one more of matrix m (the layout of an mma fragment); lanes 8m ..
// 8m + 7 give the shared-memory addresses of the rows of matrix m's
// transpose, 16 bytes each.
__device__ __forceinline__ void stmatrix_x4_trans(uint32_t addr, const uint32_t (&r)[4])
{
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r[0]),
                 "r"(r[1]), "r"(r[2]), "r"(r[3])
                 : "memory");
}

// The same stored as they are (stmatrix without .trans): lanes 8m .. 8m + 7
// give the addresses of matrix m's rows.
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, const uint32_t (&r)[4])
{
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r[0]), "r"(r[1]),
                 "r"(r[2]), "r"(r[3])
                 : "memory");
}

#endif // sm_90a

} // namespace sm90
} // namespace mxfa_gpu

#endif
