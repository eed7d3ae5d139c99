// SPDX-License-Identifier: BSD-3-Clause
// The sm90-fp8 attention forward's geometry (attn_fwd.cuh): its tiles, a
// query tile's rows and key limits, the scale ranges of a tile, and the
// kernel's shared memory.
#ifndef MXFA_GPU_SM90_FWD8_LAYOUT_CUH
#define MXFA_GPU_SM90_FWD8_LAYOUT_CUH

#include <cstdint>

#include "attn_seqs.cuh"
#include "hopper.cuh"

namespace mxfa_gpu {
namespace {

using namespace sm90;

constexpr int BM = 128, BN = 128;
// K and V stages in the ring: two, one at D = 256 (whose stage of 72 KiB
// beside the rest leaves no room for a second)
template <int D> constexpr int STAGES = D == 256 ? 1 : 2;
// Q and K rows in panels of PW bytes (D-byte swizzle up to 128 bytes;
// D = 256 in two 128-byte panels, each a TMA box of its own)
template <int D> constexpr int PW = D < 128 ? D : 128;
// Consumer warpgroups of 64 query rows a CTA: two, which share the K and V
// stages; one at D = 256 with the leak-free mask, which then has all 255
// registers a thread for the bf16 steps on O beside the rest (each 128-row
// tile takes two CTAs).
template <int D, bool LEAK> constexpr int CONSUMERS = D == 256 && LEAK ? 1 : 2;
template <int D, bool LEAK> constexpr int THREADS = (CONSUMERS<D, LEAK> + 1) * 128;
// Whether the scales a promotion starts with are loaded before the wait for
// its product, so that the load's latency passes under it (loaded after,
// the first multiplication waited for them: the kernel's largest stall in a
// profile on the H200). Not at D = 256, whose registers are spent (ptxas
// spilled).
template <int D> constexpr bool PREFETCH = D < 256;

// A query tile of a sequence: its rows and the key tiles it visits. Positions
// in a sequence are ints (the offsets are int32); a row's key limit (the last
// key it sees, bottom-right causal) is clamped to [-1, lk - 1], which keeps
// every comparison with a key of the sequence.
template <bool LEAK> struct query_tile {
    int lq, lk;
    bool causal;
    int r0, nr;                // first row in the sequence, rows
    int lim_first, lim_last;   // the key limits of its first and last rows
    int nkt;                   // the key tiles its last row sees

    __device__ __forceinline__ int limit(int i) const
    {
        const int64_t v = causal ? (int64_t)i + lk - lq : lk - 1;
        return (int)(v < -1 ? -1 : v > lk - 1 ? lk - 1 : v);
    }
    // leak-free: a block that some row of the query tile sees only in part
    // (the tile's first row sees less than all of it, its last row some of
    // it) is multiplied in bf16, so that no V scale spans the diagonal
    __device__ __forceinline__ bool diagonal(int kb0) const
    {
        const int klast = kb0 + 31 < lk - 1 ? kb0 + 31 : lk - 1;
        return LEAK && kb0 < lk && lim_first < klast && lim_last >= kb0;
    }
    __device__ __forceinline__ bool tile_diagonal(int c0) const
    {
        bool any = false;
        for (int kb = 0; kb < BN / 32; kb++)
            any |= diagonal(c0 + 32 * kb);
        return any;
    }
};

// Query tile `tile` of the grid (sq's first_tile counts from it).
template <bool LEAK>
__device__ __forceinline__ query_tile<LEAK> make_query_tile(const seq_info &sq, int tile, bool causal)
{
    query_tile<LEAK> qt;
    qt.lq = (int)sq.lq, qt.lk = (int)sq.lk, qt.causal = causal;
    qt.r0 = (tile - sq.first_tile) * BM, qt.nr = qt.lq - qt.r0 < BM ? qt.lq - qt.r0 : BM;
    qt.lim_first = qt.limit(qt.r0), qt.lim_last = qt.limit(qt.r0 + qt.nr - 1);
    qt.nkt = (qt.lim_last + 1 + BN - 1) / BN;
    return qt;
}

// The key of column f (0..31) of a 32-key block as P * V's A operand holds
// it: thread t's columns 4t .. 4t + 3 and 16 + 4t .. are the keys 2t, 2t + 1,
// 8 + 2t, 9 + 2t (and 16 more) that its score accumulator holds.
__host__ __device__ constexpr int key_of_column(int f)
{
    return (f / 16) * 16 + 8 * ((f % 4) / 2) + 2 * ((f % 16) / 4) + f % 2;
}

// The smallest and largest scale of a tile of 128 packed rows or keys,
// over its real rows (the float bits, which order as the values: scales
// are positive; a NaN scale sorts above +Inf and so only makes the range
// fail the kernel's test). The kernel multiplies scales with a bare fma
// where every product of the two ranges is a normal power of two, and
// takes the general promotion elsewhere.
struct scale_range {
    uint32_t lo, hi;
};
constexpr uint32_t RANGE_EMPTY_LO = 0x7F7F7F7Fu; // above every scale (2^127 at most): the byte 0x7F repeated

template <int D> struct kv_stage {
    static constexpr int DB = D / 32;
    uint8_t k[BN * D];   // 128 keys x D bytes, panels of PW bytes in PW-byte swizzle
    uint8_t vt[D * BN];  // 128 columns of V x 128 keys, 128-byte swizzle
    float ks[DB][BN];    // K's scales per block of D, scale_pos_b order over the keys
    float vs[BN / 32][D]; // V's scales per block of keys, scale_pos_b order over D
};

// LEAK: the leak-free causal mask, whose diagonal blocks take P * V in
// bf16; their V comes in as bf16 panels of 64 keys (128 bytes) x D.
template <int D, bool LEAK> struct __align__(1024) attn_shared {
    static constexpr int DB = D / 32;
    uint8_t q[BM * D]; // as K's stage
    kv_stage<D> st[STAGES<D>];
    float qs[DB][BM];              // Q's scales per block of D, scale_pos_a order over the rows
    static constexpr int NC = CONSUMERS<D, LEAK>;
    // D = 256 makes S in two passes of 64 keys; the first pass's 32 values
    // a thread wait here while the second is made, each thread's own
    // (written and read by it alone: no barrier), [I][thread] against bank
    // conflicts
    float s_stash[D == 256 ? NC : 1][D == 256 ? 32 : 1][128];
    // the row sums' partials 2t and 2t + 1 of a thread's two rows
    // (cpu/ref/attn_fwd.c), [2 hh + e][thread]: each thread's own (no
    // barrier), kept here between tiles so that they take no registers
    // beside O's (at D = 256, with them in registers, ptxas spilled)
    float lsum[NC][4][128];
    scale_range krange[STAGES<D>], vrange[STAGES<D>]; // the stage's K and V scale ranges
    uint64_t q_full, full[STAGES<D>], empty[STAGES<D>];
    alignas(1024) uint16_t vbf[LEAK ? STAGES<D> : 1][2][LEAK ? D * 64 : 8];
};
static_assert(sizeof(kv_stage<64>) % 1024 == 0 && sizeof(kv_stage<128>) % 1024 == 0 &&
                  sizeof(kv_stage<256>) % 1024 == 0,
              "stages stay 1024-byte aligned");

template <int D, bool LEAK> constexpr size_t SMEM_BYTES = sizeof(attn_shared<D, LEAK>) + 1024;

} // namespace
} // namespace mxfa_gpu

#endif
