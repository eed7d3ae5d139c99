// Byte permutations of the cuda backend, as cpu/ref/layout.c defines them:
// element copies between views (the transposes), square-scale expansion,
// and the swizzled scale layout with its jagged scatter and gather.
#include "module.cuh"

namespace mxfa_gpu {
namespace {

__device__ __forceinline__ uint8_t *at(const dview &v, int64_t r, int64_t c, int es)
{
    return v.base + (r * v.rs + c * v.cs) * es;
}

// One thread per element: grid x along the destination's columns, grid y
// over its rows.
__global__ void copy_elems(dview src, dview dst, int es)
{
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= dst.cols)
        return;
    for (int64_t r = blockIdx.y; r < dst.rows; r += gridDim.y) {
        const uint8_t *s = at(src, r, c, es);
        uint8_t *d = at(dst, r, c, es);
        for (int i = 0; i < es; i++)
            d[i] = s[i];
    }
}

__global__ void expand(dview src, int64_t rdiv, int64_t cdiv, dview dst)
{
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= dst.cols)
        return;
    for (int64_t r = blockIdx.y; r < dst.rows; r += gridDim.y)
        *at(dst, r, c, 1) = *at(src, r / rdiv, c / cdiv, 1);
}

// Atoms of 128 x 4 in row-major order, (r % 32) * 16 + ((r % 128) / 32) * 4
// + c % 4 inside an atom (mxfa_swizzle_offset).
__device__ __forceinline__ int64_t swizzled_offset(int64_t r, int64_t c, int64_t sw_cols)
{
    return ((r / 128) * (sw_cols / 4) + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
}

// The segment holding padded position p (by dst), or -1 for padding.
__device__ __forceinline__ int64_t unpad(const mxfa_segment *segs, int nsegs, int64_t p)
{
    const int lo = last_at_or_below(nsegs, p, [&](int s) { return segs[s].dst; });
    if (p < segs[lo].dst || p >= segs[lo].dst + segs[lo].count)
        return -1;
    return segs[lo].src + (p - segs[lo].dst);
}

// The padded position of compact position q (by src).
__device__ __forceinline__ int64_t pad(const mxfa_segment *segs, int nsegs, int64_t q)
{
    const int lo = last_at_or_below(nsegs, q, [&](int s) { return segs[s].src; });
    // among segments of one src (empty sequences share their successor's),
    // the last is the non-empty one that holds q
    return segs[lo].dst + (q - segs[lo].src);
}

// One thread per swizzled byte, every byte written once (padding as zero):
// grid x along a row of atoms (512 bytes each), grid y over the rows of
// atoms.
__global__ void swizzle(dview index, int axis, const mxfa_segment *segs, int nsegs, uint8_t *sw, int64_t sw_rows,
                        int64_t sw_cols)
{
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, row_bytes = sw_cols * 128;
    if (t >= row_bytes)
        return;
    const int64_t in = t & 511, ac = t >> 9;
    for (int64_t ar = blockIdx.y; ar < sw_rows / 128; ar += gridDim.y) {
        const int64_t pr = ar * 128 + ((in % 16) / 4) * 32 + in / 16, pc = ac * 4 + in % 4;
        int64_t r = pr, c = pc;
        if (segs) {
            if (axis == 0)
                r = unpad(segs, nsegs, pr);
            else
                c = unpad(segs, nsegs, pc);
        }
        const bool inside = r >= 0 && c >= 0 && r < index.rows && c < index.cols;
        sw[ar * row_bytes + t] = inside ? *at(index, r, c, 1) : 0;
    }
}

// One thread per element of the index view: grid x along its columns,
// grid y over its rows.
__global__ void unswizzle(const uint8_t *sw, int64_t sw_cols, int axis, const mxfa_segment *segs, int nsegs,
                          dview index)
{
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= index.cols)
        return;
    for (int64_t r = blockIdx.y; r < index.rows; r += gridDim.y) {
        int64_t pr = r, pc = c;
        if (segs) {
            if (axis == 0)
                pr = pad(segs, nsegs, r);
            else
                pc = pad(segs, nsegs, c);
        }
        *at(index, r, c, 1) = sw[swizzled_offset(pr, pc, sw_cols)];
    }
}

} // namespace

cudaError_t launch_copy(const dview &src, const dview &dst, cudaStream_t stream)
{
    const int es = esize(src.dtype);
    copy_elems<<<dim3(blocks_for(dst.cols, 256), rows_for(dst.rows)), 256, 0, stream>>>(src, dst, es);
    return cudaGetLastError();
}

cudaError_t launch_expand(const dview &src, int64_t rdiv, int64_t cdiv, const dview &dst, cudaStream_t stream)
{
    expand<<<dim3(blocks_for(dst.cols, 256), rows_for(dst.rows)), 256, 0, stream>>>(src, rdiv, cdiv, dst);
    return cudaGetLastError();
}

cudaError_t launch_swizzle(const dview &index, int axis, const mxfa_segment *segs, int nsegs, uint8_t *swizzled,
                           int64_t sw_rows, int64_t sw_cols, cudaStream_t stream)
{
    device_segments ds;
    cudaError_t e = ds.upload(segs, nsegs, stream);
    if (e != cudaSuccess)
        return e;
    swizzle<<<dim3(blocks_for(sw_cols * 128, 256), rows_for(sw_rows / 128)), 256, 0, stream>>>(
        index, axis, ds.p, nsegs, swizzled, sw_rows, sw_cols);
    return cudaGetLastError();
}

cudaError_t launch_unswizzle(const uint8_t *swizzled, int64_t sw_rows, int64_t sw_cols, int axis,
                             const mxfa_segment *segs, int nsegs, const dview &index, cudaStream_t stream)
{
    (void)sw_rows;
    device_segments ds;
    cudaError_t e = ds.upload(segs, nsegs, stream);
    if (e != cudaSuccess)
        return e;
    unswizzle<<<dim3(blocks_for(index.cols, 256), rows_for(index.rows)), 256, 0, stream>>>(swizzled, sw_cols, axis,
                                                                                          ds.p, nsegs, index);
    return cudaGetLastError();
}

} // namespace mxfa_gpu
