// SPDX-License-Identifier: BSD-3-Clause
// The cuda backend's module (mxfa-cuda.so): what its host code and kernel
// launchers share. libmxfa has checked every argument before a backend
// operation is called; views here point into device memory (host tensors
// are staged by backend.cu before the launchers see them).
#ifndef MXFA_GPU_MODULE_CUH
#define MXFA_GPU_MODULE_CUH

#include <cstdint>

#include <cuda_runtime.h>

extern "C" {
#include "internal.h"
}

namespace mxfa_gpu {

// A 2-D view on the device: element (r, c) at base + (r * rs + c * cs) * esize.
struct dview {
    uint8_t *base;
    int64_t rows, cols, rs, cs;
    int dtype; // mxfa_dtype
};

// Bytes of one element (the module has its own: it calls nothing in libmxfa).
__host__ __device__ inline int esize(int dtype)
{
    return dtype == MXFA_F64 ? 8 : dtype == MXFA_F32 || dtype == MXFA_I32 ? 4 : dtype == MXFA_BF16 ? 2 : 1;
}

inline dview dview_of(const mxfa_view &v)
{
    return {static_cast<uint8_t *>(v.base), v.rows, v.cols, v.rs, v.cs, (int)v.dtype};
}

// Quantization (gpu/common/quantize.cu). segs: the row segments (one for a
// dense matrix), in host memory; copied to the device on the stream.
cudaError_t launch_quantize(const dview &x, const mxfa_segment *segs, int nsegs, int preset, int block,
                            const dview &data, const dview &scales, cudaStream_t stream);
cudaError_t launch_dequantize(const dview &data, const dview &scales, int block, const dview &out,
                              cudaStream_t stream);

// D = A * B^T + C under the sm90-fp8 model (gpu/sm90/gemm_fp8.cu), on a
// Hopper GPU: A [M, K] and B [N, K] E4M3 or E5M2 with their E8M0 scales
// [rows, ceil(K / 32)]; c may be NULL or D itself.
cudaError_t launch_gemm_sm90_fp8(const dview &a, const dview &sa, const dview &b, const dview &sb, const dview *c,
                                 const dview &d, cudaStream_t stream);
// The same under the sm90-bf16 model (gpu/sm90/gemm_bf16.cu): both
// operands widened (launch_widen), then launch_gemm_bf16_rows.
cudaError_t launch_gemm_sm90_bf16(const dview &a, const dview &sa, const dview &b, const dview &sb, const dview *c,
                                  const dview &d, cudaStream_t stream);
// The same under the sm100 model (gpu/sm100/gemm_mxf8.cu), on a Blackwell
// GPU: the block-scaled tcgen05.mma itself.
cudaError_t launch_gemm_sm100(const dview &a, const dview &sa, const dview &b, const dview &sb, const dview *c,
                              const dview &d, cudaStream_t stream);
// MX codes [rows, K] with their scales [rows, ceil(K / 32)] widened exactly
// to bf16 (nearest even from code * 2^scale; NaN 0x7FC0), rows out_rs apart.
cudaError_t launch_widen(const dview &codes, const dview &scales, uint16_t *out, int64_t out_rs, cudaStream_t stream);
// D = A * B^T + C for bf16 A [M, K] and B [N, K] (K contiguous, rows a_rs and
// b_rs elements apart, 16-byte aligned): one chain of wgmma bf16 k16 steps
// from C (zero when c is NULL), as the models' bf16 step.
cudaError_t launch_gemm_bf16_rows(const uint16_t *a, int64_t a_rs, const uint16_t *b, int64_t b_rs, int64_t M,
                                  int64_t N, int64_t K, const dview *c, const dview &d, cudaStream_t stream);

// A 3-D view [n0, n1, n2] (tokens, heads, D) with strides in elements.
struct nd3 {
    uint8_t *base;
    int64_t n0, n1, n2, s0, s1, s2;
    int dtype; // mxfa_dtype
};

// A [tokens][heads][D] tensor quantized a head at a time, heads side by
// side (gpu/sm90/attn_bwd.cu): codes [tokens][H * D] and scales
// [block_rows][H * D / 32] (square blocks restarting at every segment) or
// [tokens][H * D / 32] (row blocks along D).
cudaError_t quantize_heads(const nd3 &x, const mxfa_segment *segs, int nsegs, int64_t block_rows, int preset,
                           int block, uint8_t *codes, uint8_t *scales, cudaStream_t stream);

// The same on Blackwell (gpu/sm100/gemm_bf16.cu): tcgen05.mma kind::f16
// k16 steps, the same model row.
cudaError_t launch_gemm_sm100_bf16_rows(const uint16_t *a, int64_t a_rs, const uint16_t *b, int64_t b_rs, int64_t M,
                                        int64_t N, int64_t K, const dview *c, const dview &d, cudaStream_t stream);

// Attention forward under the sm90-fp8 model (gpu/sm90/attn_fwd.cu), on a
// Hopper GPU, every view in device memory; cu_q and cu_k in host memory.
struct attn_fwd_args {
    nd3 q, k, v, o;
    float *lse; // [tokens_q, Hq] with strides ls0, ls1, or null
    int64_t ls0, ls1;
    const int32_t *cu_q, *cu_k;
    int batch, preset;
    bool causal, leak_free, p_dynamic; // leak_free: the causal mask without V scales across the diagonal
    float softmax_scale;
    int block_n;   // the key tile (the sm90-bf16 kernel takes 64 and 128; the others 128)
    bool *refused; // set by the sm100 kernel's launcher for inputs it cannot take (may be null)
};
cudaError_t launch_attn_fwd_sm90(const attn_fwd_args &a, cudaStream_t stream);
// The same under the sm90-bf16 model (gpu/sm90/fwd_bf16.cu): one fused
// kernel, D = 64, 128 and 256, key tiles of 64 or 128.
cudaError_t launch_attn_fwd_sm90_bf16(const attn_fwd_args &a, cudaStream_t stream);
// The same under the sm100 model (gpu/sm100/attn_fwd.cu), on a Blackwell
// GPU: every mask, const or dynamic P. With dynamic P, *a.refused is set
// (and nothing launched) when a block of V is too small to take P's 2^-8.
cudaError_t launch_attn_fwd_sm100(const attn_fwd_args &a, cudaStream_t stream);

// Attention backward under sm90-fp8 or sm90-bf16 (gpu/sm90/attn_bwd.cu), on
// a Hopper GPU, as the forward pass: the fused sm90-bf16 kernel where it
// serves, else launch_attn_bwd_composed.
struct attn_bwd_args {
    nd3 q, k, v, o, dout, dq, dk, dv;
    const float *lse; // [tokens_q, Hq] with strides ls0, ls1
    int64_t ls0, ls1;
    const int32_t *cu_q, *cu_k;
    int batch, preset, block_m, block_n;
    bool causal, leak_free, p_dynamic, bf16_model; // leak_free: the causal mask without scales across the diagonal
    bool sm100;                                    // the sm100 model, on Blackwell's products
    float softmax_scale, log2e, c; // c = softmax_scale * log2e, one fp32 product
};
cudaError_t launch_attn_bwd_sm90(const attn_bwd_args &a, cudaStream_t stream);
// The backward composed of GEMM calls (gpu/common/attn_bwd_composed.cu):
// every model's products (sm90-fp8, sm90-bf16, sm100), every feature.
cudaError_t launch_attn_bwd_composed(const attn_bwd_args &a, cudaStream_t stream);
// The same under the sm100 model on Blackwell (gpu/sm100/attn_bwd.cu): the
// fused kernel where it applies, else the composition above on Blackwell's
// GEMMs.
cudaError_t launch_attn_bwd_sm100(const attn_bwd_args &a, cudaStream_t stream);

// Byte permutations (gpu/common/layout.cu).
cudaError_t launch_copy(const dview &src, const dview &dst, cudaStream_t stream);
cudaError_t launch_expand(const dview &src, int64_t rdiv, int64_t cdiv, const dview &dst, cudaStream_t stream);
// index space (already oriented) <-> swizzled bytes; segs map index rows
// (axis 0) or columns (axis 1), NULL for the identity.
cudaError_t launch_swizzle(const dview &index, int axis, const mxfa_segment *segs, int nsegs, uint8_t *swizzled,
                           int64_t sw_rows, int64_t sw_cols, cudaStream_t stream);
cudaError_t launch_unswizzle(const uint8_t *swizzled, int64_t sw_rows, int64_t sw_cols, int axis,
                             const mxfa_segment *segs, int nsegs, const dview &index, cudaStream_t stream);

// Device memory for one call's scratch, in stream order: from the module's
// own pool on the current device (gpu/backend.cu), which keeps what a call
// frees for the calls after it instead of handing it back to the driver at
// every synchronization. Freed with cudaFreeAsync.
cudaError_t scratch_alloc(void **p, size_t bytes, cudaStream_t stream);

// A host array copied to the device for one launch, freed in stream order
// after it. The host array may be freed once upload returns (a copy from
// pageable memory returns after the bytes are staged).
template <typename T> struct device_array {
    T *p = nullptr;
    cudaStream_t stream = nullptr;
    cudaError_t upload(const T *host, int64_t n, cudaStream_t s)
    {
        stream = s;
        if (!host || n <= 0)
            return cudaSuccess;
        cudaError_t e = scratch_alloc(reinterpret_cast<void **>(&p), sizeof(T) * (size_t)n, s);
        if (e != cudaSuccess)
            return e;
        return cudaMemcpyAsync(p, host, sizeof(T) * (size_t)n, cudaMemcpyHostToDevice, s);
    }
    ~device_array()
    {
        if (p)
            cudaFreeAsync(p, stream);
    }
};
using device_segments = device_array<mxfa_segment>;

// The last s in [0, n) whose key(s) <= v, for keys that never decrease
// with s (0 when none is): where a row or group falls among segments.
template <typename Key> __device__ __forceinline__ int last_at_or_below(int n, int64_t v, Key key)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (key(mid) <= v)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

// Blocks for n items at t threads each: grid x, which reaches 2^31 - 1
// blocks, more than any matrix row holds.
inline unsigned blocks_for(int64_t n, int t)
{
    int64_t b = (n + t - 1) / t;
    return (unsigned)(b < 1 ? 1 : b > INT32_MAX ? INT32_MAX : b);
}

// Grid y for n rows: kernels loop over rows with a stride of gridDim.y.
inline unsigned rows_for(int64_t n)
{
    return (unsigned)(n < 1 ? 1 : n > 65535 ? 65535 : n);
}

} // namespace mxfa_gpu

#endif
