/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The operand descriptions that Blackwell's tcgen05 instructions take,
 * built by plain integer code so that the kernels (device) and the tests
 * (host, tests/t-tcgen05-desc.c) share one definition. Plain C, also
 * compiled by nvcc.
 *
 * Each encoding follows the PTX ISA (version 8.8 and later, section
 * "Tensorcore 5th Generation Family Instructions"): the instruction
 * descriptor of the block-scaled kinds and of kind::f16, the shared memory
 * descriptor, the tensor-memory address, and the place of the block scales
 * in tensor memory for .scale_vec::1X. docs/BLACKWELL.md lists the tables
 * and what was checked.
 */
#ifndef MXFA_GPU_SM100_TCGEN05_DESC_H
#define MXFA_GPU_SM100_TCGEN05_DESC_H

#include <stdint.h>

#ifdef __CUDACC__
#define MXFA_TC_FN static __host__ __device__ __forceinline__
#else
#define MXFA_TC_FN static inline
#endif

/* Element types of kind::mxf8f6f4 (instruction descriptor bits 7-9, 10-12). */
enum { MXFA_TC_E4M3 = 0, MXFA_TC_E5M2 = 1 };

/* Swizzle modes of the shared memory descriptor (bits 61-63). */
enum {
    MXFA_TC_SWIZZLE_NONE = 0,
    MXFA_TC_SWIZZLE_128B_BASE32B = 1,
    MXFA_TC_SWIZZLE_128B = 2,
    MXFA_TC_SWIZZLE_64B = 4,
    MXFA_TC_SWIZZLE_32B = 6
};

/*
 * Instruction descriptor of tcgen05.mma kind::mxf8f6f4 .block_scale (the
 * ISA's table for the block-scaled kinds), dense, both operands K-major and
 * not negated, the scales UE8M0 (bit 23), D always fp32:
 *   bits 4-5 the byte of B's scale word, 7-9 A's type, 10-12 B's type,
 *   17-22 N >> 3, 27-28 M >> 7, 29-30 the byte of A's scale word.
 * m is 128 (one CTA), n a multiple of 8 in [8, 256]; sfa_id and sfb_id in
 * [0, 3] pick which byte of the 32-bit tensor-memory word holds the scales
 * of this instruction's 32-wide K block.
 */
MXFA_TC_FN uint32_t mxfa_tc_idesc_mxf8(int a_type, int b_type, int m, int n, int sfa_id, int sfb_id)
{
    return (uint32_t)(sfb_id & 3) << 4 | (uint32_t)(a_type & 7) << 7 | (uint32_t)(b_type & 7) << 10 |
           (uint32_t)((n >> 3) & 0x3F) << 17 | 1u << 23 | (uint32_t)((m >> 7) & 3) << 27 |
           (uint32_t)(sfa_id & 3) << 29;
}

/*
 * Instruction descriptor of tcgen05.mma kind::f16 with bf16 A and B and an
 * fp32 D (the ISA's table for kind::f16 and kind::tf32), dense, K-major,
 * not negated, no max shift:
 *   bits 4-5 D's type (1: f32), 7-9 A's type (1: bf16), 10-12 B's type,
 *   17-22 N >> 3, 24-28 M >> 4.
 */
MXFA_TC_FN uint32_t mxfa_tc_idesc_bf16(int m, int n)
{
    return 1u << 4 | 1u << 7 | 1u << 10 | (uint32_t)((n >> 3) & 0x3F) << 17 | (uint32_t)((m >> 4) & 0x1F) << 24;
}

/*
 * Shared memory descriptor of a matrix operand: the start address, the
 * leading and stride byte offsets, each (x & 0x3FFFF) >> 4 in 14 bits (at
 * bits 0, 16 and 32), the fixed value 0b001 at bits 46-48, the base offset
 * 0 (the swizzle pattern starts on its own boundary), relative leading
 * offsets (bit 52 clear), and the swizzle mode at bits 61-63.
 * For K-major rows of 128 bytes in 128-byte swizzle: lbo unused (16), sbo
 * 1024 (eight rows); a step of k bytes along K inside the row adds k >> 4
 * to the start address.
 */
MXFA_TC_FN uint64_t mxfa_tc_sdesc(uint32_t addr, uint32_t lbo, uint32_t sbo, int swizzle)
{
    return (uint64_t)((addr & 0x3FFFFu) >> 4) | (uint64_t)((lbo & 0x3FFFFu) >> 4) << 16 |
           (uint64_t)((sbo & 0x3FFFFu) >> 4) << 32 | (uint64_t)1 << 46 | (uint64_t)(swizzle & 7) << 61;
}

/* A tensor-memory address: lane in bits 16-31, column in bits 0-15. */
MXFA_TC_FN uint32_t mxfa_tc_tmem_addr(uint32_t lane, uint32_t col)
{
    return lane << 16 | (col & 0xFFFFu);
}

/*
 * Block scales in tensor memory (.scale_vec::1X, M = 128): the scale of
 * row r (of A; of B the same with its row n) and 32-wide K block k of a
 * 128-deep slice sits in column base + r / 32, byte k % 4 of the 32-bit
 * word, in each of the lanes r % 32 + 32 q for q = 0..3. The instruction
 * that uses block k names the byte through sfa_id / sfb_id.
 */
MXFA_TC_FN uint32_t mxfa_tc_sf_column(int r)
{
    return (uint32_t)r / 32u;
}

/*
 * tcgen05.cp .32x128b .warpx4 copies 32 rows of 16 bytes from shared
 * memory into lanes i, i + 32, i + 64 and i + 96 (row i), four columns:
 * byte j of the row goes to column j / 4, byte j % 4. The shared rows that
 * give the layout above hold scale (r, c) at byte (r % 32) * 16 + (r / 32) * 4
 * + c: exactly one 512-byte atom of the library's swizzled scale layout
 * (docs/NUMERICS.md, "Scale-factor layouts"). Its descriptor: no swizzle,
 * 128 bytes between groups of eight rows, the leading offset unused.
 */
MXFA_TC_FN uint64_t mxfa_tc_sdesc_sf(uint32_t addr)
{
    return mxfa_tc_sdesc(addr, 0, 128, MXFA_TC_SWIZZLE_NONE);
}

#endif
