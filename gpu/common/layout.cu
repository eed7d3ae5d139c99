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

// A block per 128 padded rows x 32 padded columns (8 atoms, 4 KiB of
// output): the bytes come in through shared memory a row segment per warp
// (whole sectors of the index view) and leave as 32-bit words of contiguous
// atoms (bytes where the buffer is not 4-byte aligned), every swizzled byte
// written once (padding as zero). Grid x along the columns, grid y over the
// rows of atoms.
constexpr int SW_TILE_COLS = 32;

// words_in: the index view's rows are 4-byte aligned runs of bytes and its
// columns are not unpadded: a tile whose 32 columns all exist is read as
// 32-bit words, eight threads a row.
__global__ void __launch_bounds__(256) swizzle(dview index, int axis, const mxfa_segment *segs, int nsegs, uint8_t *sw,
                                               int64_t sw_rows, int64_t sw_cols, bool words, bool words_in)
{
    __shared__ uint32_t tile[128][SW_TILE_COLS / 4 + 1]; // a row's 32 bytes as 8 words; +1 against bank conflicts
    uint8_t(*bytes)[4 * (SW_TILE_COLS / 4 + 1)] = reinterpret_cast<uint8_t(*)[4 * (SW_TILE_COLS / 4 + 1)]>(tile);
    const int64_t c0 = (int64_t)blockIdx.x * SW_TILE_COLS;
    const int lane = (int)threadIdx.x % 32, warp = (int)threadIdx.x / 32;
    const int64_t pc = c0 + lane;
    int64_t c = pc; // this lane's index column, -1 for padding
    if (segs && axis == 1)
        c = unpad(segs, nsegs, pc);
    const bool col_in = c >= 0 && c < index.cols && pc < sw_cols;
    const int64_t left = (sw_cols - c0) / 4;
    const int atoms = left < SW_TILE_COLS / 4 ? (int)left : SW_TILE_COLS / 4;
    const bool tile_words = words_in && c0 + SW_TILE_COLS <= index.cols; // the same for the whole block
    for (int64_t ar = blockIdx.y; ar < sw_rows / 128; ar += gridDim.y) {
        if (tile_words) {
            for (int k = (int)threadIdx.x; k < 128 * (SW_TILE_COLS / 4); k += 256) {
                const int i = k / (SW_TILE_COLS / 4), q = k % (SW_TILE_COLS / 4);
                const int64_t pr = ar * 128 + i;
                const int64_t r = segs && axis == 0 ? unpad(segs, nsegs, pr) : pr;
                tile[i][q] =
                    r >= 0 && r < index.rows ? *reinterpret_cast<const uint32_t *>(at(index, r, c0 + 4 * q, 1)) : 0u;
            }
        } else {
            for (int i = warp; i < 128; i += 8) {
                const int64_t pr = ar * 128 + i;
                const int64_t r = segs && axis == 0 ? unpad(segs, nsegs, pr) : pr;
                bytes[i][lane] = col_in && r >= 0 && r < index.rows ? *at(index, r, c, 1) : 0;
            }
        }
        __syncthreads();
        // word w of atom j: rows ((w % 4) * 32 + w / 4), the atom's 4 columns
        uint8_t *out = sw + (ar * (sw_cols / 4) + c0 / 4) * 512;
        for (int k = (int)threadIdx.x; k < atoms * 128; k += 256) {
            const int j = k / 128, w = k % 128;
            const uint32_t v = tile[(w % 4) * 32 + w / 4][j];
            if (words)
                reinterpret_cast<uint32_t *>(out)[k] = v;
            else
                for (int b = 0; b < 4; b++)
                    out[4 * k + b] = (uint8_t)(v >> (8 * b));
        }
        __syncthreads();
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
    swizzle<<<dim3(blocks_for(sw_cols, SW_TILE_COLS), rows_for(sw_rows / 128)), 256, 0, stream>>>(
        index, axis, ds.p, nsegs, swizzled, sw_rows, sw_cols, reinterpret_cast<uintptr_t>(swizzled) % 4 == 0,
        index.cs == 1 && index.rs % 4 == 0 && reinterpret_cast<uintptr_t>(index.base) % 4 == 0 && !(segs && axis == 1));
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
