// SPDX-License-Identifier: BSD-3-Clause
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

// Bytes of a transposed view into a row-major one (the transposes of codes
// and scales): dst(r, c) = M[c][r] where M is the buffer under src (rows of
// M contiguous: src.rs == 1, M's row stride src.cs). A block per tile of
// 128 x 128 bytes. Each thread reads four 4 x 4 byte blocks of M as words
// (a warp's load is one row's 128 bytes), transposes them in registers
// with byte permutes, and puts the words in a shared tile of dst rows,
// which leaves as 16-byte stores (a warp writes four whole rows of 128
// bytes). The tile's word columns are XORed with (row / 32) % 4, which makes
// both the writes (32 rows, one column) and the reads free of bank
// conflicts. Tiles that are not whole take one thread per element.
// Requires 4-byte alignment of src's base and row stride, 16 of dst's.
constexpr int TR = 128;
__device__ __forceinline__ int tr_col(int row, int word) { return word ^ ((row / 32) % 4); }
__global__ void __launch_bounds__(256) transpose_bytes(dview src, dview dst)
{
    __shared__ uint32_t d[TR][TR / 4 + 1]; // dst rows as 32 words
    const int64_t r0 = (int64_t)blockIdx.y * TR, c0 = (int64_t)blockIdx.x * TR;
    const int t = (int)threadIdx.x, warp = t / 32, lane = t % 32;
    if (r0 + TR > dst.rows || c0 + TR > dst.cols) { // an edge tile
        for (int k = t; k < TR * TR; k += 256) {
            const int64_t r = r0 + k / TR, c = c0 + k % TR;
            if (r < dst.rows && c < dst.cols)
                dst.base[r * dst.rs + c] = src.base[r + c * src.cs];
        }
        return;
    }
    uint32_t w[4][4]; // block k: M rows 4g .. 4g + 3 (g = warp + 8k), word `lane` (dst rows 4 lane .. + 3)
#pragma unroll
    for (int k = 0; k < 4; k++)
#pragma unroll
        for (int j = 0; j < 4; j++)
            w[k][j] = *reinterpret_cast<const uint32_t *>(src.base + (c0 + 4 * (warp + 8 * k) + j) * src.cs + r0 +
                                                          4 * lane);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const int g = warp + 8 * k, row = 4 * lane;
        // out b: byte b of each of the four rows
        const uint32_t lo01 = __byte_perm(w[k][0], w[k][1], 0x5140), lo23 = __byte_perm(w[k][2], w[k][3], 0x5140);
        const uint32_t hi01 = __byte_perm(w[k][0], w[k][1], 0x7362), hi23 = __byte_perm(w[k][2], w[k][3], 0x7362);
        d[row][tr_col(row, g)] = __byte_perm(lo01, lo23, 0x5410);
        d[row + 1][tr_col(row + 1, g)] = __byte_perm(lo01, lo23, 0x7632);
        d[row + 2][tr_col(row + 2, g)] = __byte_perm(hi01, hi23, 0x5410);
        d[row + 3][tr_col(row + 3, g)] = __byte_perm(hi01, hi23, 0x7632);
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const int idx = t + 256 * k, i = idx / 8, p = idx % 8; // dst row r0 + i, columns c0 + 16p .. + 15
        *reinterpret_cast<uint4 *>(dst.base + (r0 + i) * dst.rs + c0 + 16 * p) =
            make_uint4(d[i][tr_col(i, 4 * p)], d[i][tr_col(i, 4 * p + 1)], d[i][tr_col(i, 4 * p + 2)],
                       d[i][tr_col(i, 4 * p + 3)]);
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
// written once (padding as zero). Grid x along the columns from col_begin,
// grid y over the rows of atoms.
constexpr int SW_TILE_COLS = 32;

// words_in: the index view's rows are 4-byte aligned runs of bytes and its
// columns are not unpadded: a tile whose 32 columns all exist is read as
// 32-bit words, eight threads a row.
__global__ void __launch_bounds__(256) swizzle(dview index, int axis, const mxfa_segment *segs, int nsegs, uint8_t *sw,
                                               int64_t sw_rows, int64_t sw_cols, bool words, bool words_in,
                                               int64_t col_begin)
{
    __shared__ uint32_t tile[128][SW_TILE_COLS / 4 + 1]; // a row's 32 bytes as 8 words; +1 against bank conflicts
    uint8_t(*bytes)[4 * (SW_TILE_COLS / 4 + 1)] = reinterpret_cast<uint8_t(*)[4 * (SW_TILE_COLS / 4 + 1)]>(tile);
    const int64_t c0 = col_begin + (int64_t)blockIdx.x * SW_TILE_COLS;
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

// The swizzle and its inverse on whole tiles of 128 padded rows x 128
// index columns (32 atoms, 16 KiB contiguous in the swizzled buffer), for
// index views whose rows are 16-byte aligned runs of bytes (rows may be
// unpadded through segments; columns not): the index side moves as 16-byte
// row pieces, the swizzled side as 16-byte chunks (chunk i of an atom holds
// rows i, i + 32, i + 64 and i + 96 of its four columns), through a shared
// tile of words. Grid x over the whole column tiles, grid y over the rows
// of atoms; the other columns go to the kernels above and below.
constexpr int SWF_COLS = 128;
template <bool TO_SWIZZLED>
__global__ void __launch_bounds__(256) swizzle_tiles(dview index, const mxfa_segment *segs, int nsegs, uint8_t *sw,
                                                     int64_t sw_rows, int64_t sw_cols)
{
    __shared__ uint32_t tile[128][SWF_COLS / 4 + 1]; // +1: both access patterns conflict-free
    __shared__ int64_t rowmap[128];                  // with segments: the index row of each padded row
    const int64_t c0 = (int64_t)blockIdx.x * SWF_COLS;
    const int t = (int)threadIdx.x;
    for (int64_t ar = blockIdx.y; ar < sw_rows / 128; ar += gridDim.y) {
        uint4 *chunks = reinterpret_cast<uint4 *>(sw + (ar * (sw_cols / 4) + c0 / 4) * 512);
        if (segs) { // one search a row, not one a thread
            if (t < 128)
                rowmap[t] = unpad(segs, nsegs, ar * 128 + t);
            __syncthreads();
        }
        int64_t r[4];
        uint4 v[4];
#pragma unroll
        for (int k = 0; k < 4; k++) { // index row i = idx / 8, bytes 16q .. 16q + 15 of the tile's row
            const int idx = t + 256 * k, i = idx / 8, q = idx % 8;
            const int64_t pr = ar * 128 + i;
            r[k] = segs ? rowmap[i] : pr;
            if (TO_SWIZZLED)
                v[k] = r[k] >= 0 && r[k] < index.rows
                           ? *reinterpret_cast<const uint4 *>(index.base + r[k] * index.rs + c0 + 16 * q)
                           : make_uint4(0, 0, 0, 0);
            else
                v[k] = chunks[idx]; // chunk idx % 32 of atom idx / 32
        }
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int idx = t + 256 * k;
            if (TO_SWIZZLED) {
                const int i = idx / 8, q = idx % 8;
                tile[i][4 * q] = v[k].x, tile[i][4 * q + 1] = v[k].y, tile[i][4 * q + 2] = v[k].z,
                tile[i][4 * q + 3] = v[k].w;
            } else {
                const int j = idx / 32, i = idx % 32;
                tile[i][j] = v[k].x, tile[i + 32][j] = v[k].y, tile[i + 64][j] = v[k].z, tile[i + 96][j] = v[k].w;
            }
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int idx = t + 256 * k;
            if (TO_SWIZZLED) {
                const int j = idx / 32, i = idx % 32;
                chunks[idx] = make_uint4(tile[i][j], tile[i + 32][j], tile[i + 64][j], tile[i + 96][j]);
            } else {
                const int i = idx / 8, q = idx % 8;
                if (r[k] >= 0 && r[k] < index.rows)
                    *reinterpret_cast<uint4 *>(index.base + r[k] * index.rs + c0 + 16 * q) =
                        make_uint4(tile[i][4 * q], tile[i][4 * q + 1], tile[i][4 * q + 2], tile[i][4 * q + 3]);
            }
        }
        __syncthreads();
    }
}

// One thread per element of the index view: grid x along its columns from
// col_begin, grid y over its rows.
__global__ void unswizzle(const uint8_t *sw, int64_t sw_cols, int axis, const mxfa_segment *segs, int nsegs,
                          dview index, int64_t col_begin)
{
    const int64_t c = col_begin + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
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

// Whole 128-column tiles of the swizzle for this index view and buffer: 0
// when the fast kernel cannot take it.
int64_t swizzle_fast_cols(const dview &index, int axis, const mxfa_segment *segs, const uint8_t *sw)
{
    const bool ok = index.cs == 1 && index.rs % 16 == 0 && reinterpret_cast<uintptr_t>(index.base) % 16 == 0 &&
                    reinterpret_cast<uintptr_t>(sw) % 16 == 0 && !(segs && axis == 1);
    return ok ? index.cols / SWF_COLS * SWF_COLS : 0;
}

cudaError_t launch_copy(const dview &src, const dview &dst, cudaStream_t stream)
{
    const int es = esize(src.dtype);
    if (es == 1 && src.rs == 1 && dst.cs == 1 && reinterpret_cast<uintptr_t>(src.base) % 4 == 0 && src.cs % 4 == 0 &&
        reinterpret_cast<uintptr_t>(dst.base) % 16 == 0 && dst.rs % 16 == 0 && dst.rows > 0 && dst.cols > 0) {
        const int64_t ty = (dst.rows + TR - 1) / TR;
        if (ty <= 65535) {
            transpose_bytes<<<dim3(blocks_for(dst.cols, TR), (unsigned)ty), 256, 0, stream>>>(src, dst);
            return cudaGetLastError();
        }
    }
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
    const int64_t fast = swizzle_fast_cols(index, axis, segs, swizzled);
    if (fast > 0 && sw_rows > 0)
        swizzle_tiles<true><<<dim3(blocks_for(fast, SWF_COLS), rows_for(sw_rows / 128)), 256, 0, stream>>>(
            index, ds.p, nsegs, swizzled, sw_rows, sw_cols);
    if (fast < sw_cols)
        swizzle<<<dim3(blocks_for(sw_cols - fast, SW_TILE_COLS), rows_for(sw_rows / 128)), 256, 0, stream>>>(
            index, axis, ds.p, nsegs, swizzled, sw_rows, sw_cols, reinterpret_cast<uintptr_t>(swizzled) % 4 == 0,
            index.cs == 1 && index.rs % 4 == 0 && reinterpret_cast<uintptr_t>(index.base) % 4 == 0 &&
                !(segs && axis == 1),
            fast);
    return cudaGetLastError();
}

cudaError_t launch_unswizzle(const uint8_t *swizzled, int64_t sw_rows, int64_t sw_cols, int axis,
                             const mxfa_segment *segs, int nsegs, const dview &index, cudaStream_t stream)
{
    device_segments ds;
    cudaError_t e = ds.upload(segs, nsegs, stream);
    if (e != cudaSuccess)
        return e;
    const int64_t fast = swizzle_fast_cols(index, axis, segs, swizzled);
    if (fast > 0 && sw_rows > 0)
        swizzle_tiles<false><<<dim3(blocks_for(fast, SWF_COLS), rows_for(sw_rows / 128)), 256, 0, stream>>>(
            index, ds.p, nsegs, const_cast<uint8_t *>(swizzled), sw_rows, sw_cols);
    if (fast < index.cols)
        unswizzle<<<dim3(blocks_for(index.cols - fast, 256), rows_for(index.rows)), 256, 0, stream>>>(
            swizzled, sw_cols, axis, ds.p, nsegs, index, fast);
    return cudaGetLastError();
}

} // namespace mxfa_gpu
