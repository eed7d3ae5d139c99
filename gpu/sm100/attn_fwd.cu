// SPDX-License-Identifier: BSD-3-Clause
// MXFP8 attention forward under the sm100 model on a Blackwell GPU, bit for
// bit the algorithm of cpu/ref/attn_fwd.c (docs/NUMERICS.md, "Attention
// forward"), with its geometry of 128-row query tiles and 128-key tiles:
// D = 64, 128 and 256, no mask, the plain causal mask or the leak-free one
// (whose diagonal blocks take P / 256 and V in bf16, kind::f16 k16 steps
// on the same accumulator), const or dynamic P, jagged batches and GQA.
// This file packs the operands and launches one of two kernels:
// - attn_fwd_pingpong.cuh, D = 64 and 128: two query tiles a CTA in
//   ping-pong, with a correction warpgroup, the scale factors in
//   accumulator regions not in use;
// - attn_fwd_single.cuh, D = 256: one query tile a CTA (two tiles'
//   accumulators do not fit tensor memory), the scales in columns of
//   their own.
// attn_fwd.cuh holds what they share, the per-row steps among it.
//
// Before the kernel, Q and K are quantized along D (row blocks) and V along
// the keys (col blocks restarting at every sequence) by the backend's
// quantization kernels. They are then packed so that every sequence starts
// on a 128-row boundary of its head's rows, with zeros between:
// - Q and K codes become [heads][rows][D] (D = 256 in two 128-byte panels,
//   each a copy of its own; D = 64 in 64-byte swizzle);
// - V is transposed to [heads][D][keys];
// - every tile's scales become 512-byte atoms of the swizzled layout (128
//   rows x 4 blocks each), which is what tcgen05.cp copies into tensor
//   memory.
//
// Rows that have seen no key yet keep O = +0 in the reference, which skips
// their P V steps. Here those steps run with P = 0, and that is an exact
// no-op unless V holds a NaN. So a row whose maximum first becomes finite
// sets O to +0 instead of scaling it by exp2(-Inf) = 0, and a row that never
// sees a key writes O = 0. That gives the reference's bits either way.
//
// Not yet run on Blackwell hardware; `mxfa selftest` checks it there.
#include <cstddef>
#include <type_traits>

#include "attn_fwd_pingpong.cuh"
#include "attn_fwd_single.cuh"

namespace mxfa_gpu {
namespace {

// ---- packing (before the kernel) ----

// Byte of (r, c) inside a 512-byte scale atom (128 rows x 4 columns).
__device__ __forceinline__ int atom_byte(int r, int c)
{
    return (r % 32) * 16 + (r / 32) * 4 + c;
}

// Q or K: codes [tokens][H][D] and scale bytes [tokens][H][D / 32] (the
// quantization's output) to codes [H][rows][D] (zeros for padding) and QA
// atoms a 128-row tile [H][rows / 128][QA] (zeros past D / 32 blocks). A
// thread per packed row; grid x over the tiles, y over the heads.
template <int D>
__global__ void pack_rows(const uint8_t *codes, const uint8_t *scales, const seq_info *seqs, int batch, bool keys,
                          int64_t heads, int64_t rows, uint8_t *out, uint8_t *atoms)
{
    const int64_t h = blockIdx.y, p = (int64_t)blockIdx.x * 128 + threadIdx.x;
    int64_t token = 0;
    const bool real = packed_token(seqs, batch, keys, p, &token) >= 0;
    const uint4 *src = reinterpret_cast<const uint4 *>(codes + (token * heads + h) * D);
    uint4 *dst = reinterpret_cast<uint4 *>(out + (h * rows + p) * D);
#pragma unroll
    for (int i = 0; i < D / 16; i++)
        dst[i] = real ? src[i] : make_uint4(0, 0, 0, 0);
    constexpr int KB = head_dims<D>::KB, QA = head_dims<D>::QA;
    uint8_t *atom = atoms + (h * (rows / 128) + blockIdx.x) * QA * SF_ATOM;
#pragma unroll
    for (int c = 0; c < 4 * QA; c++)
        atom[(c / 4) * SF_ATOM + atom_byte((int)threadIdx.x, c % 4)] =
            real && c < KB ? scales[(token * heads + h) * KB + c] : 0;
}

// V: codes [tokens][H][D] and col-block scales [vblocks][H][D] to V^T codes
// [H][D][rows] (zeros past a sequence's end) and, as the B operand of P V^T
// (rows d, blocks of 32 keys), VA atoms a 128-key tile [H][rows / 128][VA]
// (the caller zeroes them: at D = 64 half of each stays zero). Grid x over
// the blocks of 32 packed keys, y over the heads; a thread per d.
template <int D>
__global__ void pack_v(const uint8_t *codes, const uint8_t *scales, const seq_info *seqs, int batch, int64_t heads,
                       int64_t rows, uint8_t *vt, uint8_t *atoms, int *nan_tiles, bool shift, int *tiny)
{
    const int64_t h = blockIdx.y, p0 = (int64_t)blockIdx.x * 32;
    const int d = (int)threadIdx.x;
    const int b = last_at_or_below(batch, p0, [&](int s) { return seqs[s].k_off; });
    const int64_t j0 = p0 - seqs[b].k_off; // the block's first key in its sequence
    uint32_t w[8];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        uint32_t v = 0;
        for (int e = 0; e < 4; e++) {
            const int64_t j = j0 + 4 * i + e;
            if (j < seqs[b].lk)
                v |= (uint32_t)codes[((seqs[b].k0 + j) * heads + h) * D + d] << (8 * e);
        }
        w[i] = v;
    }
    uint4 *dst = reinterpret_cast<uint4 *>(vt + (h * D + d) * rows + p0);
    dst[0] = make_uint4(w[0], w[1], w[2], w[3]);
    dst[1] = make_uint4(w[4], w[5], w[6], w[7]);
    const int64_t tile = p0 / 128;
    uint8_t sc = j0 < seqs[b].lk ? scales[((seqs[b].v_block + j0 / 32) * heads + h) * D + d] : 0;
    if (shift) { // dynamic P: V's scale carries P's 2^-8 (a column of zero codes takes any scale)
        const bool codes_here = (w[0] | w[1] | w[2] | w[3] | w[4] | w[5] | w[6] | w[7]) != 0;
        if (sc != 0xFF && sc < 8 && codes_here)
            *tiny = 1;
        sc = sc == 0xFF ? 0xFF : sc >= 8 ? sc - 8 : 0;
    }
    atoms[((h * (rows / 128) + tile) * head_dims<D>::VA + d / 128) * SF_ATOM + atom_byte(d % 128, (int)(blockIdx.x % 4))] =
        sc;
    // a NaN code (0x7F, 0xFF) or scale anywhere in the tile: a P = 0 step on it is not a no-op
    bool nan = sc == 0xFF;
#pragma unroll
    for (int i = 0; i < 8; i++)
        for (int e = 0; e < 4; e++)
            nan |= ((w[i] >> (8 * e)) & 0x7Fu) == 0x7Fu;
    if (__syncthreads_or(nan) && d == 0)
        nan_tiles[h * (rows / 128) + tile] = 1;
}

// V as bf16 for the leak-free mask's diagonal blocks: V^T [H][D][rows]
// (zeros past a sequence's end), each value the input's rounded to nearest
// even, as the reference takes it; a tile holding a NaN or an Inf is flagged
// (a P = 0 step on it is not a no-op). Grid x over the blocks of 32 packed
// keys, y over the heads; a thread per d.
template <int D>
__global__ void pack_v_bf16(nd3 v, const seq_info *seqs, int batch, int64_t rows, uint16_t *out, int *nan_tiles)
{
    const int64_t p0 = (int64_t)blockIdx.x * 32, h = blockIdx.y;
    const int d = (int)threadIdx.x;
    const int b = last_at_or_below(batch, p0, [&](int s) { return seqs[s].k_off; });
    const int64_t j0 = p0 - seqs[b].k_off;
    uint32_t w[16] = {};
    bool bad = false;
    for (int j = 0; j < 32; j++) {
        if (j0 + j >= seqs[b].lk)
            break;
        const int64_t at = (seqs[b].k0 + j0 + j) * v.s0 + h * v.s1 + (int64_t)d * v.s2;
        const uint32_t bf = v.dtype == MXFA_BF16 ? reinterpret_cast<const uint16_t *>(v.base)[at]
                                                 : f32_to_bf16(reinterpret_cast<const uint32_t *>(v.base)[at]);
        bad |= (bf & 0x7F80u) == 0x7F80u;
        w[j / 2] |= bf << (16 * (j % 2));
    }
    uint4 *dst = reinterpret_cast<uint4 *>(out + (h * D + d) * rows + p0);
    for (int i = 0; i < 4; i++)
        dst[i] = make_uint4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
    if (__syncthreads_or(bad) && d == 0)
        nan_tiles[h * (rows / 128) + p0 / 128] = 1;
}

int64_t esz(const nd3 &x)
{
    return esize(x.dtype);
}

template <int D, bool LEAK, bool P_DYNAMIC> cudaError_t launch_attn_fwd(const attn_fwd_args &a, cudaStream_t stream)
{
    using hd = head_dims<D>;
    constexpr int KB = hd::KB, QA = hd::QA, VA = hd::VA;
    // the kernel: two query tiles a CTA where their accumulators fit tensor memory
    constexpr bool PINGPONG = D <= 128;
    constexpr int64_t TILES_PER_CTA = PINGPONG ? 2 : 1;
    if constexpr (PINGPONG) {
        // its setmaxnreg split adds up to 128 registers a thread: built for fewer, an increase
        // would wait forever (tests/t-sm100-build.sh checks the build; this, the image loaded),
        // so such an image is refused before any work
        cudaFuncAttributes fa;
        const cudaError_t r = cudaFuncGetAttributes(&fa, attn_fwd_pingpong<D, LEAK, P_DYNAMIC>);
        if (r != cudaSuccess)
            return r;
        if (fa.numRegs != 128)
            return cudaErrorInvalidKernelImage;
    }
    const int64_t tq = a.q.n0, tk = a.k.n0, hq = a.q.n1, hkv = a.k.n1;
    const int batch = a.batch;
    seq_info *seqs = static_cast<seq_info *>(malloc(sizeof(seq_info) * (size_t)batch));
    mxfa_segment *vsegs = static_cast<mxfa_segment *>(malloc(sizeof(mxfa_segment) * (size_t)batch));
    if (!seqs || !vsegs) {
        free(seqs), free(vsegs);
        return cudaErrorMemoryAllocation;
    }
    // a sequence's unit of work: a CTA's TILES_PER_CTA query tiles
    const seq_layout n = layout_seqs(a.cu_q, a.cu_k, batch, BM, BN, TILES_PER_CTA * BM, seqs);
    int64_t q_rows = n.q_rows, k_rows = n.k_rows;
    const int64_t vblocks = n.v_blocks, ctas = n.tiles;
    for (int b = 0; b < batch; b++)
        vsegs[b] = {seqs[b].k0, seqs[b].lk, seqs[b].v_block};
    // the grid, and the tensor-memory accelerator's coordinates (32-bit)
    if (ctas == 0 || ctas > INT32_MAX || hq > 65535 || hq * q_rows > INT32_MAX || hkv * (k_rows + BN) > INT32_MAX ||
        hkv * D > INT32_MAX) {
        free(seqs), free(vsegs);
        return ctas == 0 ? cudaSuccess : cudaErrorInvalidValue;
    }
    k_rows = k_rows > 0 ? k_rows : BN; // no keys at all: a tile that is never read, so that every map is valid

    scratch mem(stream);
    cudaError_t e = cudaSuccess;
    uint8_t *qc, *qsb, *kc, *ksb, *vc, *vsb, *qp, *kp, *vt, *qa, *ka, *va;
    seq_info *dseqs;
    int *v_nan, *tiny;
    uint16_t *vbf = nullptr; // the leak-free mask's bf16 V^T
    const size_t sizes[] = {(size_t)(tq * hq * D), (size_t)(tq * hq * KB), (size_t)(tk * hkv * D),
                            (size_t)(tk * hkv * KB), (size_t)(tk * hkv * D), (size_t)(vblocks * hkv * D)};
    uint8_t **bufs[] = {&qc, &qsb, &kc, &ksb, &vc, &vsb};
    // the quantizations' outputs and the packed operands in two allocations
    const size_t v_atoms = (size_t)(hkv * k_rows / 128 * VA * SF_ATOM);
    size_t total = 0, packed = (size_t)(hq * q_rows * D + hkv * k_rows * D * 2 +
                                        (hq * q_rows / 128 + hkv * k_rows / 128) * QA * SF_ATOM) + v_atoms;
    for (size_t i = 0; i < 6; i++)
        total += round_up((int64_t)sizes[i] + 16, 256);
    uint8_t *base = nullptr, *pbase = nullptr;
    if ((e = mem.get(&base, total)) != cudaSuccess || (e = mem.get(&pbase, packed)) != cudaSuccess ||
        (e = mem.get(&dseqs, sizeof(seq_info) * (size_t)batch)) != cudaSuccess ||
        (e = mem.get(&v_nan, sizeof(int) * (size_t)(hkv * k_rows / BN))) != cudaSuccess ||
        (e = mem.get(&tiny, sizeof(int))) != cudaSuccess ||
        (LEAK && (e = mem.get(&vbf, sizeof(uint16_t) * (size_t)(hkv * D * k_rows))) != cudaSuccess)) {
        free(seqs), free(vsegs);
        return e;
    }
    for (size_t i = 0, at = 0; i < 6; i++) {
        *bufs[i] = base + at;
        at += (size_t)round_up((int64_t)sizes[i] + 16, 256);
    }
    qp = pbase, kp = qp + hq * q_rows * D, vt = kp + hkv * k_rows * D;
    qa = vt + hkv * k_rows * D, ka = qa + hq * q_rows / 128 * QA * SF_ATOM, va = ka + hkv * k_rows / 128 * QA * SF_ATOM;
    e = cudaMemcpyAsync(dseqs, seqs, sizeof(seq_info) * (size_t)batch, cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess) // pack_v leaves the rows of V^T's atoms past D, and sets the flags of tiles with a NaN
        e = cudaMemsetAsync(va, 0, v_atoms, stream);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(v_nan, 0, sizeof(int) * (size_t)(hkv * k_rows / BN), stream);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(tiny, 0, sizeof(int), stream);

    auto head = [&](const nd3 &x, int64_t hh) {
        return dview{x.base + hh * x.s1 * esz(x), x.n0, D, x.s0, x.s2, x.dtype};
    };
    auto rows = [&](const nd3 &x, int64_t heads, const mxfa_segment *seg, uint8_t *codes, uint8_t *sc) {
        cudaError_t r = cudaSuccess;
        for (int64_t hh = 0; hh < heads && r == cudaSuccess; hh++)
            r = launch_quantize(head(x, hh), seg, 1, a.preset, MXFA_BLOCK_ROW,
                                dview{codes + hh * D, x.n0, D, heads * D, 1, MXFA_E4M3},
                                dview{sc + hh * KB, x.n0, KB, heads * KB, 1, MXFA_E8M0}, stream);
        return r;
    };
    const mxfa_segment all_q = {0, tq, 0}, all_k = {0, tk, 0};
    if (e == cudaSuccess)
        e = rows(a.q, hq, &all_q, qc, qsb);
    if (e == cudaSuccess && tk > 0)
        e = rows(a.k, hkv, &all_k, kc, ksb);
    for (int64_t hh = 0; hh < hkv && tk > 0 && e == cudaSuccess; hh++)
        e = launch_quantize(head(a.v, hh), vsegs, batch, a.preset, MXFA_BLOCK_COL,
                            dview{vc + hh * D, tk, D, hkv * D, 1, MXFA_E4M3},
                            dview{vsb + hh * D, vblocks, D, hkv * D, 1, MXFA_E8M0}, stream);
    free(vsegs);
    if (e != cudaSuccess) {
        free(seqs);
        return e;
    }
    pack_rows<D><<<dim3((unsigned)(q_rows / 128), (unsigned)hq), 128, 0, stream>>>(qc, qsb, dseqs, batch, false, hq,
                                                                                 q_rows, qp, qa);
    if (tk > 0) {
        pack_rows<D><<<dim3((unsigned)(k_rows / 128), (unsigned)hkv), 128, 0, stream>>>(kc, ksb, dseqs, batch, true,
                                                                                      hkv, k_rows, kp, ka);
        pack_v<D><<<dim3((unsigned)(k_rows / 32), (unsigned)hkv), D, 0, stream>>>(vc, vsb, dseqs, batch, hkv, k_rows,
                                                                                vt, va, v_nan, a.p_dynamic, tiny);
        if (LEAK)
            pack_v_bf16<D><<<dim3((unsigned)(k_rows / 32), (unsigned)hkv), D, 0, stream>>>(a.v, dseqs, batch, k_rows,
                                                                                     vbf, v_nan);
    }
    if ((e = cudaGetLastError()) != cudaSuccess) {
        free(seqs);
        return e;
    }
    // Dynamic P puts P's 2^-8 on V's scale bytes, which a block of V with
    // non-zero codes and a scale below 8 cannot take: such a call is
    // refused before anything is written, which takes a wait here.
    if (a.p_dynamic && tk > 0) {
        int host_tiny = 0;
        if ((e = cudaMemcpyAsync(&host_tiny, tiny, sizeof(int), cudaMemcpyDeviceToHost, stream)) != cudaSuccess ||
            (e = cudaStreamSynchronize(stream)) != cudaSuccess) {
            free(seqs);
            return e;
        }
        if (host_tiny) {
            free(seqs);
            if (a.refused)
                *a.refused = true;
            return cudaSuccess;
        }
    }

    CUtensorMap maps[4];
    memset(maps, 0, sizeof maps);
    const CUtensorMapSwizzle qk_swizzle = hd::PW == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
    if ((e = tensor_map(&maps[0], CU_TENSOR_MAP_DATA_TYPE_UINT8, qp, D, (uint64_t)(hq * q_rows), D, hd::PW, BM,
                        qk_swizzle)) != cudaSuccess ||
        (e = tensor_map(&maps[1], CU_TENSOR_MAP_DATA_TYPE_UINT8, kp, D, (uint64_t)(hkv * k_rows), D, hd::PW, BN,
                        qk_swizzle)) != cudaSuccess ||
        (e = tensor_map(&maps[2], CU_TENSOR_MAP_DATA_TYPE_UINT8, vt, (uint64_t)k_rows, (uint64_t)(hkv * D),
                        (uint64_t)k_rows, BN, D, CU_TENSOR_MAP_SWIZZLE_128B)) != cudaSuccess ||
        (LEAK && (e = tensor_map(&maps[3], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, vbf, (uint64_t)k_rows, (uint64_t)(hkv * D),
                                 (uint64_t)k_rows * 2, 32, D, CU_TENSOR_MAP_SWIZZLE_64B)) != cudaSuccess)) {
        free(seqs);
        return e;
    }
    free(seqs);
    const uint32_t log2e_bits = 0x3FB8AA3Bu; // fl(log2 e)
    float log2e;
    memcpy(&log2e, &log2e_bits, 4);
    const float c = a.softmax_scale * log2e; // one fp32 product, as the reference computes it
    const attn_out out = {a.o.base, a.o.s0, a.o.s1, a.o.s2, a.o.dtype == MXFA_BF16, a.lse, a.ls0, a.ls1};
    const int group = (int)(hq / hkv);
    if constexpr (PINGPONG) { // persistent: a CTA an SM, each walking the work tiles (pairs x heads)
        auto kernel = attn_fwd_pingpong<D, LEAK, P_DYNAMIC>;
        int device = 0, sms = 0;
        if ((e = cudaGetDevice(&device)) != cudaSuccess ||
            (e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess ||
            (e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)PP_SMEM<D, LEAK>)) !=
                cudaSuccess) // on every launch: the attribute belongs to the current device
            return e;
        const int64_t n_work = ctas * hq;
        kernel<<<(unsigned)min(n_work, (int64_t)max(sms, 1)), PP_THREADS, PP_SMEM<D, LEAK>, stream>>>(
            maps[0], maps[1], maps[2], maps[3], qa, ka, va, dseqs, batch, group, hq, n_work, q_rows, k_rows, v_nan,
            a.causal, c, out);
    } else {
        auto kernel = attn_fwd_single<D, LEAK, P_DYNAMIC>;
        if ((e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      (int)SINGLE_SMEM<D, LEAK>)) != cudaSuccess)
            return e;
        kernel<<<dim3((unsigned)ctas, (unsigned)hq), SINGLE_THREADS, SINGLE_SMEM<D, LEAK>, stream>>>(
            maps[0], maps[1], maps[2], maps[3], qa, ka, va, dseqs, batch, group, q_rows, k_rows, v_nan, a.causal, c,
            out);
    }
    return cudaGetLastError();
}

} // namespace

cudaError_t launch_attn_fwd_sm100(const attn_fwd_args &a, cudaStream_t stream)
{
    // an instance a head dim, mask kind and P scaling
    auto of = [&](auto d) {
        constexpr int D = decltype(d)::value;
        return a.leak_free ? a.p_dynamic ? launch_attn_fwd<D, true, true>(a, stream)
                                         : launch_attn_fwd<D, true, false>(a, stream)
               : a.p_dynamic ? launch_attn_fwd<D, false, true>(a, stream)
                             : launch_attn_fwd<D, false, false>(a, stream);
    };
    switch (a.q.n2) {
    case 64: return of(std::integral_constant<int, 64>());
    case 128: return of(std::integral_constant<int, 128>());
    case 256: return of(std::integral_constant<int, 256>());
    default: return cudaErrorInvalidValue; // the backend refuses other head dims with its own words
    }
}

} // namespace mxfa_gpu
