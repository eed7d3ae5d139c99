// SPDX-License-Identifier: BSD-3-Clause
// The layout of the sm90-bf16 attention forward kernel (fwd_bf16.cuh): its
// threads and their registers, its tiles and stages, its shared memory and
// its parameters. Host and device code.
#ifndef MXFA_GPU_SM90_FWD_LAYOUT_CUH
#define MXFA_GPU_SM90_FWD_LAYOUT_CUH

#include <cstddef>
#include <cstdint>

#include "attn_seqs.cuh"
#include "sm90/fwd_tile.cuh"

namespace mxfa_gpu {
namespace fwd90 {

constexpr int THREADS = 384;
constexpr int PRODUCER_REGS = 24, CONSUMER_REGS = 240; // 128 x 24 + 256 x 240 <= 64K

// OVERLAP: a tile's softmax overlaps the last tile's P V within the
// warpgroup, which holds two sets of P for it; at D = 256, O's 128
// registers a thread leave room for one, and the two warpgroups overlap
// each other only. STAGES: K and V tiles in flight (D = 256: one each).
template <int D, int BN> struct config {
    static_assert(D == 64 || D == 128 || D == 256, "head dim");
    static_assert(BN == 64 || BN == 128, "key tile");
    static constexpr int QP = D / 64; // 64-column (128-byte) panels of Q and K rows
    static constexpr int VP = BN / 32; // 32-key (64-byte) panels of V^T rows: a panel a block of keys
    static constexpr int STAGES = D == 256 ? 1 : 2;
    static constexpr bool OVERLAP = D < 256;
};

// Shared memory: Q and K in panels of 128-byte rows in 128-byte swizzle, V^T
// in panels of 64-byte rows (a block of 32 keys) in 64-byte swizzle (the
// accelerator writes them so, the wgmma descriptors read them so), each
// panel 1024-byte aligned. A block of V^T comes from the quantized V or,
// for the leak-free mask's diagonal blocks, from V rounded to bf16: a copy
// a panel, each from its own tensor.
template <int D, int BN> struct __align__(1024) fwd_shared {
    using cf = config<D, BN>;
    uint16_t q[cf::QP][BM * 64];
    uint16_t k[cf::STAGES][cf::QP][BN * 64];
    uint16_t v[cf::STAGES][cf::VP][D * 32]; // V^T: D rows of 32 keys a panel
    uint64_t q_full, k_full[cf::STAGES], k_empty[cf::STAGES], v_full[cf::STAGES], v_empty[cf::STAGES];
};
template <int D, int BN> constexpr size_t SMEM_BYTES = sizeof(fwd_shared<D, BN>) + 1024;
static_assert(SMEM_BYTES<256, 128> <= 227 * 1024 && SMEM_BYTES<128, 128> <= 227 * 1024,
              "shared memory of an H100 or H200 CTA");

struct fwd_params {
    const seq_info *seqs;
    const int *bad;     // [Hkv][k_rows / 32]
    const int *any_bad; // whether any of them is set
    int batch, group, tiles;
    int64_t q_rows, k_rows;
    float c;
    bool causal, leak_free;
    attn_out out;
};

} // namespace fwd90
} // namespace mxfa_gpu

#endif
