/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The Blackwell kernels' operand descriptions (gpu/sm100/tcgen05_desc.h),
 * built on the host and checked against the PTX ISA's definitions:
 *   - each descriptor against an independent packing of the ISA's field
 *     tables (transcribed below, field by field), over every legal value
 *     the kernels can ask for, with every bit outside the fields zero;
 *   - worked values of an independent implementation (CUTLASS's UMMA
 *     descriptor structs, CUTLASS 4.x, compiled on the host);
 *   - the scales: the library's swizzled layout, copied into a model of
 *     tensor memory as tcgen05.cp .32x128b .warpx4 is defined to copy, puts
 *     the scale of every (row, block) where the block-scaled MMA reads it.
 * None of this needs a GPU; `mxfa selftest` checks the kernels on one.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mxfa.h"
#include "sm100/tcgen05_desc.h"
#include "tap.h"

typedef struct {
    const char *name;
    int lo, width;
} field;

/* Pack named values into a word of the table's fields; -1 if a value does
 * not fit its field. */
static int64_t pack(const field *t, int n, const uint64_t *v, uint64_t *word)
{
    *word = 0;
    for (int i = 0; i < n; i++) {
        if (t[i].width < 64 && v[i] >> t[i].width)
            return -1;
        *word |= v[i] << t[i].lo;
    }
    return 0;
}

/* The bits that no field of the table covers. */
static uint64_t uncovered(const field *t, int n, int bits)
{
    uint64_t all = bits == 64 ? ~0ull : (1ull << bits) - 1;
    for (int i = 0; i < n; i++)
        all &= ~(((t[i].width == 64 ? ~0ull : (1ull << t[i].width) - 1)) << t[i].lo);
    return all;
}

/* Instruction descriptor, block-scaled kinds (kind::mxf8f6f4 and others):
 * the ISA's table, in bit order. Reserved bits are not fields. */
static const field idesc_mx[] = {
    {"sparsity selector", 0, 2}, {"sparsity", 2, 1}, {"scale factor B id", 4, 2}, {"A type", 7, 3},
    {"B type", 10, 3},          {"negate A", 13, 1}, {"negate B", 14, 1},         {"transpose A", 15, 1},
    {"transpose B", 16, 1},     {"N >> 3", 17, 6},   {"scale type", 23, 1},       {"M >> 7", 27, 2},
    {"scale factor A id", 29, 2},
};
/* Instruction descriptor, kind::f16 and kind::tf32. */
static const field idesc_f16[] = {
    {"sparsity selector", 0, 2}, {"sparsity", 2, 1},    {"saturate", 3, 1},    {"D type", 4, 2},
    {"A type", 7, 3},            {"B type", 10, 3},     {"negate A", 13, 1},   {"negate B", 14, 1},
    {"transpose A", 15, 1},      {"transpose B", 16, 1}, {"N >> 3", 17, 6},    {"M >> 4", 24, 5},
    {"max shift", 30, 2},
};
/* Shared memory descriptor. */
static const field sdesc[] = {
    {"start address >> 4", 0, 14}, {"leading byte offset >> 4", 16, 14}, {"stride byte offset >> 4", 32, 14},
    {"fixed 0b001", 46, 3},         {"base offset", 49, 3},              {"leading offset mode", 52, 1},
    {"swizzle mode", 61, 3},
};
#define NF(t) ((int)(sizeof(t) / sizeof((t)[0])))

static void check_idesc_mxf8(void)
{
    /* the ISA's codes: E4M3 0, E5M2 1; UE8M0 scale type 1; M = 128 as 1 */
    int bad = 0, n_checked = 0;
    const uint64_t free_bits = uncovered(idesc_mx, NF(idesc_mx), 32);
    for (int at = 0; at < 2; at++)
        for (int bt = 0; bt < 2; bt++)
            for (int n = 8; n <= 256; n += 8)
                for (int sa = 0; sa < 4; sa++)
                    for (int sb = 0; sb < 4; sb++) {
                        const uint64_t v[] = {0, 0, (uint64_t)sb, (uint64_t)at, (uint64_t)bt, 0, 0, 0, 0,
                                              (uint64_t)n >> 3, 1, 128 >> 7, (uint64_t)sa};
                        uint64_t want;
                        const uint32_t got = mxfa_tc_idesc_mxf8(at, bt, 128, n, sa, sb);
                        n_checked++;
                        if (pack(idesc_mx, NF(idesc_mx), v, &want) || got != want || (got & free_bits)) {
                            if (bad++ < 3)
                                diag("A %d B %d N %d ids %d/%d: %08x, the table gives %08llx", at, bt, n, sa, sb,
                                     (unsigned)got, (unsigned long long)want);
                        }
                    }
    ok(bad == 0, "kind::mxf8f6f4 instruction descriptors: %d of %d (E4M3/E5M2 each side, N 8..256, both scale "
       "bytes) as the ISA's table packs them, reserved bits zero", n_checked - bad, n_checked);
    /* worked values from CUTLASS's InstrDescriptorBlockScaled */
    ok(mxfa_tc_idesc_mxf8(MXFA_TC_E4M3, MXFA_TC_E4M3, 128, 256, 0, 0) == 0x08C00000u &&
           mxfa_tc_idesc_mxf8(MXFA_TC_E4M3, MXFA_TC_E4M3, 128, 128, 0, 0) == 0x08A00000u &&
           mxfa_tc_idesc_mxf8(MXFA_TC_E4M3, MXFA_TC_E4M3, 128, 128, 3, 2) == 0x68A00020u &&
           mxfa_tc_idesc_mxf8(MXFA_TC_E5M2, MXFA_TC_E4M3, 128, 64, 0, 0) == 0x08900080u,
       "kind::mxf8f6f4 descriptors equal CUTLASS's for four shapes, types and scale bytes");
}

static void check_idesc_bf16(void)
{
    int bad = 0, n_checked = 0;
    const uint64_t free_bits = uncovered(idesc_f16, NF(idesc_f16), 32);
    const int ms[] = {64, 128};
    for (int i = 0; i < 2; i++)
        for (int n = ms[i] == 64 ? 8 : 16; n <= 256; n += ms[i] == 64 ? 8 : 16) {
            /* D type F32 = 1, A and B type BF16 = 1 */
            const uint64_t v[] = {0, 0, 0, 1, 1, 1, 0, 0, 0, 0, (uint64_t)n >> 3, (uint64_t)ms[i] >> 4, 0};
            uint64_t want;
            const uint32_t got = mxfa_tc_idesc_bf16(ms[i], n);
            n_checked++;
            if (pack(idesc_f16, NF(idesc_f16), v, &want) || got != want || (got & free_bits))
                if (bad++ < 3)
                    diag("M %d N %d: %08x, the table gives %08llx", ms[i], n, (unsigned)got, (unsigned long long)want);
        }
    ok(bad == 0, "kind::f16 (bf16, f32 D) instruction descriptors: %d of %d legal M = 64, 128 shapes as the ISA's "
       "table packs them", n_checked - bad, n_checked);
    ok(mxfa_tc_idesc_bf16(128, 256) == 0x08400490u, "kind::f16 M 128 N 256 equals CUTLASS's InstrDescriptor");
}

static void check_sdesc(void)
{
    int bad = 0, n_checked = 0;
    const uint64_t free_bits = uncovered(sdesc, NF(sdesc), 64);
    const int swz[] = {MXFA_TC_SWIZZLE_NONE, MXFA_TC_SWIZZLE_128B_BASE32B, MXFA_TC_SWIZZLE_128B, MXFA_TC_SWIZZLE_64B,
                       MXFA_TC_SWIZZLE_32B};
    const int isa_code[] = {0, 1, 2, 4, 6}; /* the ISA's swizzle codes, in the same order */
    const uint32_t offs[] = {0, 16, 128, 1024, 4096, 0x3FFF0};
    for (uint32_t addr = 0; addr < (1u << 18); addr += 16)
        for (int s = 0; s < 5; s++)
            for (int o = 0; o < 6; o++) {
                const uint32_t lbo = offs[o], sbo = offs[5 - o];
                const uint64_t v[] = {addr >> 4, lbo >> 4, sbo >> 4, 1, 0, 0, (uint64_t)isa_code[s]};
                uint64_t want;
                const uint64_t got = mxfa_tc_sdesc(addr, lbo, sbo, swz[s]);
                n_checked++;
                if (pack(sdesc, NF(sdesc), v, &want) || got != want || (got & free_bits))
                    if (bad++ < 3)
                        diag("address %#x swizzle %d lbo %u sbo %u: %016llx, the table gives %016llx", addr, swz[s],
                             lbo, sbo, (unsigned long long)got, (unsigned long long)want);
            }
    ok(bad == 0, "shared memory descriptors: %d of %d (every 16-byte address of 256 KiB, five swizzles, six offsets) "
       "as the ISA's table packs them", n_checked - bad, n_checked);
    ok(mxfa_tc_sdesc(0x1000, 16, 1024, MXFA_TC_SWIZZLE_128B) == 0x4000404000010100ull &&
           mxfa_tc_sdesc_sf(0x2000) == 0x0000400800000200ull,
       "a 128-byte swizzled operand and a scale atom: the same descriptors as CUTLASS's SmemDescriptor");
    ok(mxfa_tc_sdesc(0x1000, 16, 1024, MXFA_TC_SWIZZLE_128B) + 2 ==
           mxfa_tc_sdesc(0x1000 + 32, 16, 1024, MXFA_TC_SWIZZLE_128B),
       "a step of 32 bytes along K adds 2 to the descriptor (its start address field)");
}

static void check_tmem_addr(void)
{
    int bad = 0;
    for (uint32_t lane = 0; lane < 128; lane++)
        for (uint32_t col = 0; col < 512; col++) {
            const uint32_t a = mxfa_tc_tmem_addr(lane, col);
            bad += (a >> 16) != lane || (a & 0xFFFF) != col;
        }
    ok(bad == 0, "tensor-memory addresses: lane in bits 16-31, column in bits 0-15, all 128 x 512");
}

/*
 * The scales' path: compact [rows, blocks] -> the library's swizzled
 * layout (mxfa_scales_swizzle on ref) -> one tcgen05.cp .32x128b .warpx4 a
 * 512-byte atom, modelled from the ISA's definition of the copy (shared row
 * i of 16 bytes into lanes i + 32 q, byte j into column j / 4, byte j % 4)
 * -> the MMA's read of block k of row r (column mxfa_tc_sf_column(r),
 * byte k, in each lane r % 32 + 32 q).
 */
static void check_scale_path(void)
{
    enum { ROWS = 300, BLOCKS = 11, QUARTERS = 4 };
    mxfa_ctx *ref;
    if (!ok(mxfa_open(&ref, "ref") == MXFA_OK, "open ref"))
        return;
    static uint8_t compact[ROWS * BLOCKS];
    for (int i = 0; i < ROWS * BLOCKS; i++)
        compact[i] = (uint8_t)rng_below(256);
    int64_t sw_rows, sw_cols;
    mxfa_swizzled_shape(MXFA_BLOCK_ROW, ROWS, BLOCKS * 32, &sw_rows, &sw_cols);
    uint8_t *sw = malloc((size_t)(sw_rows * sw_cols));
    mxfa_tensor ct = mxfa_tensor_2d(compact, MXFA_E8M0, ROWS, BLOCKS);
    mxfa_tensor st = mxfa_tensor_2d(sw, MXFA_E8M0, sw_rows, sw_cols);
    if (!ok(sw && mxfa_scales_swizzle(ref, &ct, MXFA_BLOCK_ROW, ROWS, BLOCKS * 32, &st) == MXFA_OK,
            "swizzle %d x %d scales on ref", ROWS, BLOCKS)) {
        free(sw);
        mxfa_close(ref);
        return;
    }
    int bad = 0, checked = 0;
    const int64_t atoms_k = sw_cols / 4;
    for (int64_t tile = 0; tile < sw_rows / 128; tile++)
        for (int64_t ks = 0; ks < atoms_k; ks++) {
            const uint8_t *atom = sw + (tile * atoms_k + ks) * 512;
            uint32_t tmem[128][4]; /* lanes x the four columns the copy fills */
            memset(tmem, 0, sizeof tmem);
            for (int i = 0; i < 32; i++)
                for (int q = 0; q < QUARTERS; q++)
                    for (int j = 0; j < 16; j++)
                        tmem[i + 32 * q][j / 4] |= (uint32_t)atom[i * 16 + j] << (8 * (j % 4));
            for (int r = 0; r < 128; r++)
                for (int k = 0; k < 4; k++) {
                    const int64_t row = tile * 128 + r, blk = ks * 4 + k;
                    const uint8_t want = row < ROWS && blk < BLOCKS ? compact[row * BLOCKS + blk] : 0;
                    for (int q = 0; q < QUARTERS; q++) {
                        const uint8_t got =
                            (uint8_t)(tmem[r % 32 + 32 * q][mxfa_tc_sf_column(r)] >> (8 * k));
                        checked++;
                        if (got != want && bad++ < 3)
                            diag("row %lld block %lld lane %d: %02x, want %02x", (long long)row, (long long)blk,
                                 r % 32 + 32 * q, got, want);
                    }
                }
        }
    ok(bad == 0, "scales swizzled, copied by the ISA's tcgen05.cp .32x128b .warpx4 and read where the MMA reads "
       "them: %d of %d (row, block, lane quarter) as the compact scales, padding zero", checked - bad, checked);
    free(sw);
    mxfa_close(ref);
}

int main(void)
{
    rng_seed_from_env(12);
    check_idesc_mxf8();
    check_idesc_bf16();
    check_sdesc();
    check_tmem_addr();
    check_scale_path();
    return done_testing();
}
