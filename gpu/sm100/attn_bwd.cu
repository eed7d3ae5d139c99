// SPDX-License-Identifier: BSD-3-Clause
// MXFP8 attention backward under the sm100 model on a Blackwell GPU, bit
// for bit the algorithm of cpu/ref/attn_bwd.c (docs/NUMERICS.md,
// "Attention backward").
//
// The reference's geometry (128 x 128 tiles) at D = 64 and 128, without the
// leak-free mask, runs the fused kernel of attn_bwd.cuh; everything else
// (D = 256, whose dK and dV alone would fill tensor memory; the leak-free
// mask's bf16 steps; other tile sizes) runs the composition of
// gpu/sm90/attn_bwd.cu on Blackwell's GEMMs, exact under the same model.
//
// Before the kernel, Q, K and dO are quantized in square blocks restarting
// at every sequence and V in row blocks along D, by the backend's
// quantization kernels. They are then packed so that every sequence starts
// on a 128-row boundary of its head's rows, with zeros between:
// - Q, dO, K and V codes become [heads][rows][D] (D = 64 in 64-byte
//   swizzle, 128 in 128-byte), the A or B operand of a product along D;
// - Q, dO and K are also transposed to [heads][D][rows], the B operand of a
//   product along the sequence (the same codes and scales: square blocks);
// - every tile's scales become 512-byte atoms of the swizzled layout, per
//   row of the operand as tcgen05.cp copies them into tensor memory.
// LSE and delta = rowsum(dO * O) are packed the same way. After it, the
// fp32 accumulators are scaled, the GQA group's dK and dV summed in head
// order, and everything written in the caller's layout and type.
//
// Not yet run on Blackwell hardware; `mxfa selftest` checks it there.
#include <type_traits>

#include "attn_bwd.cuh"
#include "nd3.cuh"

namespace mxfa_gpu {
namespace {

// ---- packing (before the kernel) ----

// The sequence that packed row p (of a head) belongs to.
__device__ __forceinline__ int seq_of(const seq_info *seqs, int batch, int64_t p, bool keys)
{
    return last_at_or_below(batch, p, [&](int s) { return keys ? seqs[s].k_off : seqs[s].q_off; });
}

// Q, dO or K (square: scales [blocks][H][D / 32], a sequence's first block
// at sdst[b]) or V (row: scales [tokens][H][D / 32]), codes [tokens][H][D],
// to codes [H][rows][D] and their atoms [H][rows / 128] (per row, blocks
// along D); square ones also to codes [H][D][rows] and their atoms (per d,
// blocks along the rows). Zeros for padding; the caller zeroes the atoms.
// A block of 32 packed rows of a head, a thread per d.
template <int D>
__global__ void pack_bwd(const uint8_t *codes, const uint8_t *scales, const seq_info *seqs, const int64_t *sdst,
                         int batch, bool keys, bool square, int64_t heads, int64_t rows, uint8_t *out, uint8_t *atoms,
                         uint8_t *out_t, uint8_t *atoms_t)
{
    constexpr int DB = D / 32;
    const int64_t h = blockIdx.y, p0 = (int64_t)blockIdx.x * 32;
    const int e = (int)threadIdx.x;
    const int b = seq_of(seqs, batch, p0, keys);
    const int64_t j0 = p0 - (keys ? seqs[b].k_off : seqs[b].q_off), len = keys ? seqs[b].lk : seqs[b].lq;
    const int64_t tok0 = keys ? seqs[b].k0 : seqs[b].q0;
    uint32_t w[8] = {};
    for (int r = 0; r < 32; r++) {
        const uint32_t v = j0 + r < len ? codes[((tok0 + j0 + r) * heads + h) * D + e] : 0u;
        out[(h * rows + p0 + r) * D + e] = (uint8_t)v;
        w[r / 4] |= v << (8 * (r % 4));
    }
    // row atoms: thread e gives row e % 32 of the block its scale of block e / 32 along D
    const int64_t tile = (h * rows + p0) / 128;
    {
        const int r = e % 32, eb = e / 32;
        const int64_t j = j0 + r;
        uint8_t s = 0;
        if (j < len)
            s = square ? scales[((sdst[b] + j / 32) * heads + h) * DB + eb] : scales[((tok0 + j) * heads + h) * DB + eb];
        atoms[tile * SF_ATOM + sf_byte((int)(p0 % 128) + r, eb)] = s;
    }
    if (!square)
        return;
    uint4 *dst = reinterpret_cast<uint4 *>(out_t + (h * D + e) * rows + p0);
    dst[0] = make_uint4(w[0], w[1], w[2], w[3]);
    dst[1] = make_uint4(w[4], w[5], w[6], w[7]);
    // transposed atoms: row d, the block of these 32 rows (one square block)
    const uint8_t s = j0 < len ? scales[((sdst[b] + j0 / 32) * heads + h) * DB + e / 32] : 0;
    atoms_t[tile * SF_ATOM + sf_byte(e, (int)(p0 % 128) / 32)] = s;
}

// Packed LSE and delta = sum over d of dO * O (fp32 in increasing d, as the
// reference), [H][rows]; padding rows -Inf and 0. A thread per packed row.
__global__ void pack_rows_bwd(nd3 dout, nd3 o, const float *lse, int64_t ls0, int64_t ls1, const seq_info *seqs,
                              int batch, int64_t rows, float *lse_p, float *delta_p)
{
    const int64_t h = blockIdx.y, p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= rows)
        return;
    const int b = seq_of(seqs, batch, p, false);
    const int64_t j = p - seqs[b].q_off;
    float l = -__builtin_huge_valf(), acc = 0.0f;
    if (j < seqs[b].lq) {
        const int64_t tok = seqs[b].q0 + j;
        l = lse[tok * ls0 + h * ls1];
        acc = dot3(dout, o, tok, h);
    }
    lse_p[h * rows + p] = l;
    delta_p[h * rows + p] = acc;
}

// ---- after the kernel ----

// dQ = the accumulator times the softmax scale (0 for a sequence without
// keys), into the caller's tensor. A block a packed row and head, a thread
// per d.
__global__ void dq_out(const float *dq, const seq_info *seqs, int batch, int64_t rows, float scale, nd3 out)
{
    const int64_t p = blockIdx.x, h = blockIdx.y, e = threadIdx.x;
    const int b = seq_of(seqs, batch, p, false);
    const int64_t j = p - seqs[b].q_off;
    if (j >= seqs[b].lq)
        return;
    const float v = seqs[b].lk == 0 ? 0.0f : __fmul_rn(dq[(h * rows + p) * out.n2 + e], scale);
    store3(out, seqs[b].q0 + j, h, e, v);
}

// dK and dV of a key/value head: the sum of its query heads', dK each times
// the softmax scale, added in increasing head order (0 for a sequence
// without queries). A block a packed row and KV head, a thread per d.
__global__ void dkdv_out(const float *dk, const float *dv, const seq_info *seqs, int batch, int64_t rows, int group,
                         float scale, nd3 out_k, nd3 out_v)
{
    const int64_t p = blockIdx.x, g = blockIdx.y, e = threadIdx.x, d = out_k.n2;
    const int b = seq_of(seqs, batch, p, true);
    const int64_t j = p - seqs[b].k_off;
    if (j >= seqs[b].lk)
        return;
    float gk = 0.0f, gv = 0.0f;
    if (seqs[b].lq > 0)
        for (int64_t h = g * group; h < (g + 1) * group; h++) {
            const float sk = __fmul_rn(dk[(h * rows + p) * d + e], scale), sv = dv[(h * rows + p) * d + e];
            gk = h == g * group ? sk : __fadd_rn(gk, sk);
            gv = h == g * group ? sv : __fadd_rn(gv, sv);
        }
    store3(out_k, seqs[b].k0 + j, g, e, gk);
    store3(out_v, seqs[b].k0 + j, g, e, gv);
}

template <int D, bool P_DYNAMIC> cudaError_t launch_fused(const attn_bwd_args &a, cudaStream_t stream)
{
    constexpr int DB = D / 32;
    {
        // the setmaxnreg split adds up to 128 registers a thread: an image
        // built for fewer would wait forever in an increase, so it is refused
        // before any work (tests/t-sm100-build.sh checks the build)
        cudaFuncAttributes fa;
        const cudaError_t r = cudaFuncGetAttributes(&fa, attn_bwd_fused<D, P_DYNAMIC>);
        if (r != cudaSuccess)
            return r;
        if (fa.numRegs != 128)
            return cudaErrorInvalidKernelImage;
    }
    const int64_t tq = a.q.n0, tk = a.k.n0, hq = a.q.n1, hkv = a.k.n1;
    const int batch = a.batch, group = (int)(hq / hkv);
    seq_info *seqs = static_cast<seq_info *>(malloc(sizeof(seq_info) * (size_t)batch));
    mxfa_segment *segs = static_cast<mxfa_segment *>(malloc(sizeof(mxfa_segment) * (size_t)batch * 2));
    int64_t *sdst = static_cast<int64_t *>(malloc(sizeof(int64_t) * (size_t)batch * 2));
    auto release = [&] { free(seqs), free(segs), free(sdst); };
    if (!seqs || !segs || !sdst) {
        release();
        return cudaErrorMemoryAllocation;
    }
    mxfa_segment *qsegs = segs, *ksegs = segs + batch;
    const seq_layout n = layout_seqs(a.cu_q, a.cu_k, batch, BM, BN, BM, seqs);
    const int64_t q_rows = n.q_rows, k_rows = n.k_rows;
    // each sequence's first square block of Q (of K: its v_block)
    int64_t qblocks = 0;
    for (int b = 0; b < batch; b++) {
        const seq_info &s = seqs[b];
        qsegs[b] = {s.q0, s.lq, qblocks}, ksegs[b] = {s.k0, s.lk, s.v_block};
        sdst[b] = qblocks, sdst[batch + b] = s.v_block;
        qblocks += (s.lq + 31) / 32;
    }
    const int64_t kblocks = n.v_blocks;
    // the grid, and the tensor-memory accelerator's coordinates (32-bit)
    const int64_t n_work = k_rows / BN * hq;
    if (hq > 65535 || hkv > 65535 || hq * q_rows > INT32_MAX || hkv * k_rows > INT32_MAX || hq * D > INT32_MAX ||
        q_rows > INT32_MAX || k_rows > INT32_MAX) {
        release();
        return cudaErrorInvalidValue;
    }
    const int64_t qr = q_rows > 0 ? q_rows : BM, kr = k_rows > 0 ? k_rows : BN; // every map valid

    scratch mem(stream);
    cudaError_t e = cudaSuccess;
    // the quantizations' outputs
    uint8_t *qc, *qs, *oc, *os, *kc, *ks, *vc, *vs;
    const size_t qsz[] = {(size_t)(tq * hq * D), (size_t)(qblocks * hq * DB), (size_t)(tq * hq * D),
                          (size_t)(qblocks * hq * DB), (size_t)(tk * hkv * D), (size_t)(kblocks * hkv * DB),
                          (size_t)(tk * hkv * D), (size_t)(tk * hkv * DB)};
    uint8_t **qbufs[] = {&qc, &qs, &oc, &os, &kc, &ks, &vc, &vs};
    // the packed operands, atoms and rows; the accumulators and semaphores
    uint8_t *qp, *op, *qt, *ot, *kp, *vp, *kt, *qa, *oa, *qta, *ota, *ka, *va, *kta;
    const size_t qcodes = (size_t)(hq * qr * D), kcodes = (size_t)(hkv * kr * D);
    const size_t qatoms = (size_t)(hq * qr / BM * SF_ATOM), katoms = (size_t)(hkv * kr / BN * SF_ATOM);
    const size_t psz[] = {qcodes, qcodes, qcodes, qcodes, kcodes, kcodes, kcodes,
                          qatoms, qatoms, qatoms, qatoms, katoms, katoms, katoms};
    uint8_t **pbufs[] = {&qp, &op, &qt, &ot, &kp, &vp, &kt, &qa, &oa, &qta, &ota, &ka, &va, &kta};
    float *lse_p, *delta_p, *dq, *dk, *dv;
    int *sem;
    seq_info *dseqs;
    int64_t *dsdst;
    uint8_t *base = nullptr, *pbase = nullptr, *fbase = nullptr;
    size_t total = 0, packed = 0, atoms_at = 0;
    for (size_t i = 0; i < 8; i++)
        total += (size_t)round_up((int64_t)qsz[i] + 16, 256);
    for (size_t i = 0; i < 14; i++) {
        if (i == 7)
            atoms_at = packed;
        packed += (size_t)round_up((int64_t)psz[i], 256);
    }
    const size_t fsz[] = {(size_t)(hq * qr) * 4, (size_t)(hq * qr) * 4, (size_t)(hq * qr * D) * 4,
                          (size_t)(hq * kr * D) * 4, (size_t)(hq * kr * D) * 4, (size_t)(hq * qr / BM) * 4};
    float **fbufs[] = {&lse_p, &delta_p, &dq, &dk, &dv};
    size_t ftotal = 0;
    for (size_t i = 0; i < 6; i++)
        ftotal += (size_t)round_up((int64_t)fsz[i], 256);
    if ((e = mem.get(&base, total)) != cudaSuccess || (e = mem.get(&pbase, packed)) != cudaSuccess ||
        (e = mem.get(&fbase, ftotal)) != cudaSuccess ||
        (e = mem.get(&dseqs, sizeof(seq_info) * (size_t)batch)) != cudaSuccess ||
        (e = mem.get(&dsdst, sizeof(int64_t) * (size_t)batch * 2)) != cudaSuccess) {
        release();
        return e;
    }
    for (size_t i = 0, at = 0; i < 8; i++) {
        *qbufs[i] = base + at;
        at += (size_t)round_up((int64_t)qsz[i] + 16, 256);
    }
    for (size_t i = 0, at = 0; i < 14; i++) {
        *pbufs[i] = pbase + at;
        at += (size_t)round_up((int64_t)psz[i], 256);
    }
    for (size_t i = 0, at = 0; i < 6; i++) {
        if (i < 5)
            *fbufs[i] = reinterpret_cast<float *>(fbase + at);
        else
            sem = reinterpret_cast<int *>(fbase + at);
        at += (size_t)round_up((int64_t)fsz[i], 256);
    }
    // the atoms' unused rows and blocks, the accumulators and semaphores start at zero
    if ((e = cudaMemcpyAsync(dseqs, seqs, sizeof(seq_info) * (size_t)batch, cudaMemcpyHostToDevice, stream)) !=
            cudaSuccess ||
        (e = cudaMemcpyAsync(dsdst, sdst, sizeof(int64_t) * (size_t)batch * 2, cudaMemcpyHostToDevice, stream)) !=
            cudaSuccess ||
        (e = cudaMemsetAsync(pbase + atoms_at, 0, packed - atoms_at, stream)) != cudaSuccess ||
        (e = cudaMemsetAsync(fbase + 2 * round_up((int64_t)fsz[0], 256), 0,
                             ftotal - 2 * (size_t)round_up((int64_t)fsz[0], 256), stream)) != cudaSuccess) {
        release();
        return e;
    }

    // quantize: square blocks restarting at every sequence, V in rows
    if (tq > 0 && ((e = quantize_heads(a.q, qsegs, batch, qblocks, a.preset, MXFA_BLOCK_SQUARE, qc, qs, stream)) !=
                       cudaSuccess ||
                   (e = quantize_heads(a.dout, qsegs, batch, qblocks, a.preset, MXFA_BLOCK_SQUARE, oc, os, stream)) !=
                       cudaSuccess)) {
        release();
        return e;
    }
    if (tk > 0 && ((e = quantize_heads(a.k, ksegs, batch, kblocks, a.preset, MXFA_BLOCK_SQUARE, kc, ks, stream)) !=
                       cudaSuccess ||
                   (e = quantize_heads(a.v, ksegs, batch, tk, a.preset, MXFA_BLOCK_ROW, vc, vs, stream)) !=
                       cudaSuccess)) {
        release();
        return e;
    }
    free(segs), free(sdst);
    segs = nullptr, sdst = nullptr;
    if (q_rows > 0) {
        const dim3 grid((unsigned)(q_rows / 32), (unsigned)hq);
        pack_bwd<D><<<grid, D, 0, stream>>>(qc, qs, dseqs, dsdst, batch, false, true, hq, q_rows, qp, qa, qt, qta);
        pack_bwd<D><<<grid, D, 0, stream>>>(oc, os, dseqs, dsdst, batch, false, true, hq, q_rows, op, oa, ot, ota);
        pack_rows_bwd<<<dim3((unsigned)(q_rows / 128), (unsigned)hq), 128, 0, stream>>>(
            a.dout, a.o, a.lse, a.ls0, a.ls1, dseqs, batch, q_rows, lse_p, delta_p);
    }
    if (k_rows > 0) {
        const dim3 grid((unsigned)(k_rows / 32), (unsigned)hkv);
        pack_bwd<D><<<grid, D, 0, stream>>>(kc, ks, dseqs, dsdst + batch, batch, true, true, hkv, k_rows, kp, ka, kt,
                                            kta);
        pack_bwd<D><<<grid, D, 0, stream>>>(vc, vs, dseqs, dsdst + batch, batch, true, false, hkv, k_rows, vp, va,
                                            nullptr, nullptr);
    }
    if ((e = cudaGetLastError()) != cudaSuccess) {
        release();
        return e;
    }

    if (n_work > 0 && q_rows > 0) {
        CUtensorMap maps[7];
        memset(maps, 0, sizeof maps);
        const CUtensorMapSwizzle rows_swizzle = D == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
        auto rows_map = [&](CUtensorMap *m, const uint8_t *p, int64_t n) {
            return tensor_map(m, CU_TENSOR_MAP_DATA_TYPE_UINT8, p, D, (uint64_t)n, D, D, 128, rows_swizzle);
        };
        auto cols_map = [&](CUtensorMap *m, const uint8_t *p, int64_t heads, int64_t n) {
            return tensor_map(m, CU_TENSOR_MAP_DATA_TYPE_UINT8, p, (uint64_t)n, (uint64_t)(heads * D), (uint64_t)n, 128,
                              D, CU_TENSOR_MAP_SWIZZLE_128B);
        };
        if ((e = rows_map(&maps[0], qp, hq * q_rows)) != cudaSuccess ||
            (e = rows_map(&maps[1], op, hq * q_rows)) != cudaSuccess ||
            (e = cols_map(&maps[2], qt, hq, q_rows)) != cudaSuccess ||
            (e = cols_map(&maps[3], ot, hq, q_rows)) != cudaSuccess ||
            (e = rows_map(&maps[4], kp, hkv * k_rows)) != cudaSuccess ||
            (e = rows_map(&maps[5], vp, hkv * k_rows)) != cudaSuccess ||
            (e = cols_map(&maps[6], kt, hkv, k_rows)) != cudaSuccess) {
            release();
            return e;
        }
        const bwd_buffers bufs = {qa, oa, qta, ota, ka, va, kta, lse_p, delta_p, dq, dk, dv, sem};
        auto kernel = attn_bwd_fused<D, P_DYNAMIC>;
        int device = 0, sms = 0, per_sm = 0;
        if ((e = cudaGetDevice(&device)) != cudaSuccess ||
            (e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess ||
            (e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)BWD_SMEM<D>)) !=
                cudaSuccess || // on every launch: the attribute belongs to the current device
            (e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, BWD_THREADS, BWD_SMEM<D>)) !=
                cudaSuccess) {
            release();
            return e;
        }
        // Every CTA must be resident at once: one waits on another's dQ.
        // At most one an SM (per_sm is 1), and a cooperative launch, which
        // fails rather than start fewer (under MPS limits, for one).
        const int64_t ctas = min(n_work, (int64_t)max(sms, 1) * (int64_t)max(per_sm, 1));
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3((unsigned)ctas), cfg.blockDim = dim3(BWD_THREADS);
        cfg.dynamicSmemBytes = BWD_SMEM<D>, cfg.stream = stream;
        cudaLaunchAttribute coop;
        coop.id = cudaLaunchAttributeCooperative, coop.val.cooperative = 1;
        cfg.attrs = &coop, cfg.numAttrs = 1;
        if ((e = cudaLaunchKernelEx(&cfg, kernel, maps[0], maps[1], maps[2], maps[3], maps[4], maps[5], maps[6], bufs,
                                    (const seq_info *)dseqs, batch, group, hq, n_work, q_rows, k_rows, (bool)a.causal,
                                    a.c, a.log2e, a.preset)) != cudaSuccess) {
            release();
            return e;
        }
    }
    if (q_rows > 0)
        dq_out<<<dim3((unsigned)q_rows, (unsigned)hq), D, 0, stream>>>(dq, dseqs, batch, q_rows, a.softmax_scale,
                                                                        a.dq);
    if (k_rows > 0)
        dkdv_out<<<dim3((unsigned)k_rows, (unsigned)hkv), D, 0, stream>>>(dk, dv, dseqs, batch, k_rows, group,
                                                                          a.softmax_scale, a.dk, a.dv);
    release();
    return cudaGetLastError();
}

} // namespace

cudaError_t launch_attn_bwd_sm100(const attn_bwd_args &a, cudaStream_t stream)
{
    const int64_t d = a.q.n2;
    if (a.leak_free || a.block_m != BM || a.block_n != BN || (d != 64 && d != 128))
        return launch_attn_bwd_composed(a, stream); // on Blackwell's GEMMs
    auto of = [&](auto dd) {
        constexpr int D = decltype(dd)::value;
        return a.p_dynamic ? launch_fused<D, true>(a, stream) : launch_fused<D, false>(a, stream);
    };
    return d == 64 ? of(std::integral_constant<int, 64>()) : of(std::integral_constant<int, 128>());
}

} // namespace mxfa_gpu
