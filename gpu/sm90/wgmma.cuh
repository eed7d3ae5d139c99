// SPDX-License-Identifier: BSD-3-Clause
// The wgmma instructions and the promotion the sm90-fp8 kernels share
// (gpu/sm90/gemm_fp8.cu, gpu/sm90/attn_fwd.cu): fp8 k32 products into a
// zero accumulator, the exact promotion acc = fma(partial, 2^(sa + sb), acc),
// and the order in which a tile's float scales are stored for its threads.
#ifndef MXFA_GPU_SM90_WGMMA_CUH
#define MXFA_GPU_SM90_WGMMA_CUH

#include "hopper.cuh"
#include "mx.cuh"

namespace mxfa_gpu {
namespace sm90 {

constexpr uint32_t NAN_BITS = 0x7FFFFFFFu; // the canonical NaN of the models

// A scale byte as the float the promotion multiplies by: 2^(code - 127),
// the canonical NaN for 0xFF.
__device__ __forceinline__ float scale_float(uint32_t code)
{
    return code == 0xFFu ? __uint_as_float(NAN_BITS) : e8m0_value(code);
}

// Accumulator fragment of m64n128 (per warpgroup):
// element i of warp w, lane (g = lane / 4, t = lane % 4) is row
// 16w + g + 8 * ((i / 2) % 2), column 8 * (i / 4) + 2t + i % 2.
//
// The float scales of a 128-row or 128-column tile are stored in the order
// its threads read them (prepare_scales writes them so): the two rows of a
// thread side by side (one 8-byte load), the 32 columns of a thread in
// eight 16-byte loads.
__host__ __device__ constexpr int scale_pos_a(int r) // r: a row of the tile
{
    return (r & ~15) + (r & 7) * 2 + ((r >> 3) & 1);
}
__host__ __device__ constexpr int scale_pos_b(int c) // c: a column of the tile
{
    // thread t = (c / 2) % 4 reads columns 8j + 2t, 8j + 2t + 1 (j = 0..15)
    // as eight float4s, the q-th of them (j = 2q, 2q + 1) at float 16q + 4t:
    // the four threads of a load read 64 consecutive bytes, no bank conflict
    return (c >> 4) * 16 + ((c >> 1) & 3) * 4 + ((c >> 3) & 1) * 2 + (c & 1);
}

#ifdef MXFA_SM90_CODE

#define MXFA_WGMMA_REGS                                                                                                \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                          \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                                 \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                                 \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define MXFA_WGMMA_OUT(d)                                                                                              \
    "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]), "=f"(d[4]), "=f"(d[5]), "=f"(d[6]), "=f"(d[7]), "=f"(d[8]),        \
        "=f"(d[9]), "=f"(d[10]), "=f"(d[11]), "=f"(d[12]), "=f"(d[13]), "=f"(d[14]), "=f"(d[15]), "=f"(d[16]),         \
        "=f"(d[17]), "=f"(d[18]), "=f"(d[19]), "=f"(d[20]), "=f"(d[21]), "=f"(d[22]), "=f"(d[23]), "=f"(d[24]),        \
        "=f"(d[25]), "=f"(d[26]), "=f"(d[27]), "=f"(d[28]), "=f"(d[29]), "=f"(d[30]), "=f"(d[31]), "=f"(d[32]),        \
        "=f"(d[33]), "=f"(d[34]), "=f"(d[35]), "=f"(d[36]), "=f"(d[37]), "=f"(d[38]), "=f"(d[39]), "=f"(d[40]),        \
        "=f"(d[41]), "=f"(d[42]), "=f"(d[43]), "=f"(d[44]), "=f"(d[45]), "=f"(d[46]), "=f"(d[47]), "=f"(d[48]),        \
        "=f"(d[49]), "=f"(d[50]), "=f"(d[51]), "=f"(d[52]), "=f"(d[53]), "=f"(d[54]), "=f"(d[55]), "=f"(d[56]),        \
        "=f"(d[57]), "=f"(d[58]), "=f"(d[59]), "=f"(d[60]), "=f"(d[61]), "=f"(d[62]), "=f"(d[63])
#define MXFA_WGMMA_K32(types, d, da, db)                                                                               \
    asm volatile("{\n.reg .pred zero_acc;\nsetp.ne.b32 zero_acc, %66, 0;\n"                                            \
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32." types " " MXFA_WGMMA_REGS                              \
                 ", %64, %65, zero_acc, 1, 1;\n}\n"                                                                    \
                 : MXFA_WGMMA_OUT(d)                                                                                   \
                 : "l"(da), "l"(db), "n"(0)                                                                            \
                 : "memory")

// One m64n128k32 product into a zero accumulator (scale-d 0): d = A * B^T.
// The outputs are write-only: what d held before is not an input.
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

// acc = fma(p, 2^(sa + sb), acc) with a = 2^sa, b = 2^sb: see the top of the file.
__device__ __forceinline__ float promote_fast(float p, float a, float b, float acc)
{
    return fmaf(p, a * b, acc);
}

__device__ __forceinline__ float promote_wide(float p, float a, float b, float acc)
{
    float r = __double2float_rn(fma((double)p, (double)a * (double)b, (double)acc));
    return r != r ? __uint_as_float(NAN_BITS) : r;
}

// Either, chosen per element: while 2^sa * 2^sb is neither 0 nor Inf (the
// float product of two powers of two is then exact), the fma; otherwise the
// double fma. A NaN scale gives NaN either way.
__device__ __forceinline__ float promote_exact(float p, float a, float b, float acc)
{
    const float s = __fmul_rn(a, b);
    if (s != 0.0f && fabsf(s) != __uint_as_float(0x7F800000u))
        return __fmaf_rn(p, s, acc);
    return promote_wide(p, a, b, acc);
}

// d = A * B^T, m64n128k32 e4m3 into a zero accumulator, A from registers
// (the warpgroup's fragment: register 0 holds row g's columns 4t .. 4t + 3,
// 1 row g + 8's, 2 and 3 the same rows' columns 16 higher), B from shared
// memory. Write-only outputs as above.
__device__ __forceinline__ void wgmma_k32_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t db)
{
    asm volatile("{\n.reg .pred zero_acc;\nsetp.ne.b32 zero_acc, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " MXFA_WGMMA_REGS
                 ", {%64, %65, %66, %67}, %68, zero_acc, 1, 1;\n}\n"
                 : MXFA_WGMMA_OUT(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(0)
                 : "memory");
}

// The same two products at n64 (32 accumulator registers a thread, element
// i being element i of the m64n128 fragment's first 64 columns).
#define MXFA_WGMMA_REGS32                                                                                              \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                          \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define MXFA_WGMMA_OUT32(d)                                                                                            \
    "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]), "=f"(d[4]), "=f"(d[5]), "=f"(d[6]), "=f"(d[7]), "=f"(d[8]),        \
        "=f"(d[9]), "=f"(d[10]), "=f"(d[11]), "=f"(d[12]), "=f"(d[13]), "=f"(d[14]), "=f"(d[15]), "=f"(d[16]),         \
        "=f"(d[17]), "=f"(d[18]), "=f"(d[19]), "=f"(d[20]), "=f"(d[21]), "=f"(d[22]), "=f"(d[23]), "=f"(d[24]),        \
        "=f"(d[25]), "=f"(d[26]), "=f"(d[27]), "=f"(d[28]), "=f"(d[29]), "=f"(d[30]), "=f"(d[31])

__device__ __forceinline__ void wgmma_k32_n64(float (&d)[32], uint64_t da, uint64_t db)
{
    asm volatile("{\n.reg .pred zero_acc;\nsetp.ne.b32 zero_acc, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 " MXFA_WGMMA_REGS32
                 ", %32, %33, zero_acc, 1, 1;\n}\n"
                 : MXFA_WGMMA_OUT32(d)
                 : "l"(da), "l"(db), "n"(0)
                 : "memory");
}

// The same at n32 (16 registers a thread, element i being element i of the
// m64n128 fragment's first 32 columns).
#define MXFA_WGMMA_REGS16 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define MXFA_WGMMA_OUT16(d)                                                                                            \
    "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]), "=f"(d[4]), "=f"(d[5]), "=f"(d[6]), "=f"(d[7]), "=f"(d[8]),        \
        "=f"(d[9]), "=f"(d[10]), "=f"(d[11]), "=f"(d[12]), "=f"(d[13]), "=f"(d[14]), "=f"(d[15])

__device__ __forceinline__ void wgmma_k32_n32(float (&d)[16], uint64_t da, uint64_t db)
{
    asm volatile("{\n.reg .pred zero_acc;\nsetp.ne.b32 zero_acc, %18, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 " MXFA_WGMMA_REGS16
                 ", %16, %17, zero_acc, 1, 1;\n}\n"
                 : MXFA_WGMMA_OUT16(d)
                 : "l"(da), "l"(db), "n"(0)
                 : "memory");
}

// The same at n16 into d's first 8 registers (element i being element i of
// the m64n128 fragment's first 16 columns; a piece of a ring of n32 ones).
__device__ __forceinline__ void wgmma_k32_n16(float (&d)[16], uint64_t da, uint64_t db)
{
    asm volatile("{\n.reg .pred zero_acc;\nsetp.ne.b32 zero_acc, %10, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, "
                 "zero_acc, 1, 1;\n}\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]), "=f"(d[4]), "=f"(d[5]), "=f"(d[6]), "=f"(d[7])
                 : "l"(da), "l"(db), "n"(0)
                 : "memory");
}

__device__ __forceinline__ void wgmma_k32_rs_n64(float (&d)[32], const uint32_t (&a)[4], uint64_t db)
{
    asm volatile("{\n.reg .pred zero_acc;\nsetp.ne.b32 zero_acc, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 " MXFA_WGMMA_REGS32
                 ", {%32, %33, %34, %35}, %36, zero_acc, 1, 1;\n}\n"
                 : MXFA_WGMMA_OUT32(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(0)
                 : "memory");
}

__device__ __forceinline__ void wgmma_k32_rs_n32(float (&d)[16], const uint32_t (&a)[4], uint64_t db)
{
    asm volatile("{\n.reg .pred zero_acc;\nsetp.ne.b32 zero_acc, %21, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 " MXFA_WGMMA_REGS16
                 ", {%16, %17, %18, %19}, %20, zero_acc, 1, 1;\n}\n"
                 : MXFA_WGMMA_OUT16(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(0)
                 : "memory");
}

// d += A * B^T, m64n64k16 bf16 with the accumulator d (scale-d 1), A from
// registers (register 0: row g, columns 2t and 2t + 1; 1: row g + 8; 2 and
// 3: columns 8 higher), B from shared memory.
__device__ __forceinline__ void wgmma_bf16_rs_acc_n64(float *d, const uint32_t (&a)[4], uint64_t db)
{
    asm volatile("{\n.reg .pred add_acc;\nsetp.ne.b32 add_acc, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " MXFA_WGMMA_REGS32
                 ", {%32, %33, %34, %35}, %36, add_acc, 1, 1, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
                   "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),
                   "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),
                   "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(1)
                 : "memory");
}

#endif // MXFA_SM90_CODE

} // namespace sm90
} // namespace mxfa_gpu

#endif
