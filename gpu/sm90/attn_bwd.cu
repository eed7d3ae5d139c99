// SPDX-License-Identifier: BSD-3-Clause
// The attention backward on Hopper: the fused kernels, sm90-bf16's
// (bwd_bf16.cuh) and sm90-fp8's (bwd_fp8.cuh), where they serve, with their
// packing before them and their stores after; the composition of GEMM calls
// (gpu/common/attn_bwd_composed.cu) everywhere else: with tiles other than
// 128 x 128, and under sm90-fp8 at D = 256, which the fused kernels do not
// take.
#include <cstdlib>

#include "hopper.cuh"
#include "mx.cuh"
#include "nd3.cuh"
#include "sm90/bwd_bf16.cuh"
#include "sm90/bwd_fp8.cuh"

namespace mxfa_gpu {
namespace {

using namespace sm90;

// ---- the fused sm90-bf16 path: its packing and stores ----

// The 32 packed rows from p0 (a multiple of 32) of a head: the packing
// pads a sequence's rows to a multiple of 128 (packed_rows), so all of them
// are one sequence's. *token0: the token of row p0 (if it holds one); returns how
// many rows from p0 on hold tokens (rows p0 + r with r below it; none where
// it is at most 0, and it may exceed 32).
__device__ __forceinline__ int64_t packed_rows32(const seq_info *seqs, int batch, bool keys, int64_t p0,
                                                 int64_t *token0)
{
    const int b = last_at_or_below(batch, p0, [&](int s) { return keys ? seqs[s].k_off : seqs[s].q_off; });
    const int64_t j = p0 - (keys ? seqs[b].k_off : seqs[b].q_off), len = keys ? seqs[b].lk : seqs[b].lq;
    *token0 = (keys ? seqs[b].k0 : seqs[b].q0) + j;
    return len - j;
}

// Whether x is bf16 rows whose every piece of 8 elements from a multiple
// of 8 is 16-byte aligned (one vector load).
__device__ __forceinline__ bool bf16_rows16(const nd3 &x)
{
    return x.dtype == MXFA_BF16 && x.s2 == 1 && x.s0 % 8 == 0 && x.s1 % 8 == 0 &&
           reinterpret_cast<uintptr_t>(x.base) % 16 == 0;
}

// A warp's 32 x 32 block: packed rows p0 .. p0 + 31 (p0 a multiple of 32),
// columns c0 .. c0 + 31 of head h, as fp32 bits (bf16 widened). Lane l
// takes the 8 columns c0 + 8 (l % 4) of rows p0 + l / 4 + 8 k into
// v[8 k .. 8 k + 7], k = 0 .. 3, zeros where the row holds no token
// (real[k] false): each load of the warp covers eight whole 64-byte pieces
// of rows, and the batch's table is searched once a warp. (A lane a row,
// and a search a row, made each load a gather of 32 pieces of 16 bytes:
// 74 against 59 us a tensor at 4,16,4096,128 on the H200.)
__device__ __forceinline__ void load_block(const nd3 &x, const seq_info *seqs, int batch, bool keys, int64_t h,
                                           int64_t p0, int c0, int lane, uint32_t v[32], bool real[4])
{
    int64_t token0 = 0;
    const int64_t n = packed_rows32(seqs, batch, keys, p0, &token0);
    const int c = c0 + 8 * (lane % 4);
#pragma unroll
    for (int k = 0; k < 32; k++)
        v[k] = 0;
    const bool rows16 = bf16_rows16(x); // (then one address and a stride)
    const int64_t at = (token0 + lane / 4) * x.s0 + h * x.s1 + c; // (row p0 + l / 4's piece)
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const int r = lane / 4 + 8 * k;
        real[k] = r < n;
        if (!real[k])
            continue;
        if (rows16) {
            const uint4 q = *reinterpret_cast<const uint4 *>(reinterpret_cast<const uint16_t *>(x.base) + at +
                                                             8 * k * x.s0);
            const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
            for (int i = 0; i < 4; i++)
                v[8 * k + 2 * i] = w[i] << 16, v[8 * k + 2 * i + 1] = w[i] & 0xFFFF0000u;
        } else {
            load8_bits(x, token0 + r, h, c, v + 8 * k);
        }
    }
}

// The rule of a square block that load_block loaded (the whole warp calls it).
__device__ __forceinline__ block_rule square_rule(const fp8_fmt &f, int preset, const uint32_t v[32], bool *plain)
{
    uint32_t top = 0;
#pragma unroll
    for (int k = 0; k < 4; k++)
        top = umax(top, lane_top(v + 8 * k));
    return warp_rule<32>(f, preset, reduce_max(top, 32), v, 32, plain);
}

// Q, K or dO: x [tokens][H][D] (fp32 or bf16, any strides) quantized in
// square blocks of 32 tokens x 32 columns (each sequence's blocks from its
// first token) and widened to bf16 rows [H][rows][D] (packed rows; padding
// rows zero). A warp a block, loaded by load_block and stored the same
// way; the block's rule from the warp's statistics. Grid x over rows / 32
// * D / 32 / 4 blocks of 4 warps, y over the heads.
template <int D>
__global__ void __launch_bounds__(128) bwd_pack_square(nd3 x, int preset, const seq_info *seqs, int batch,
                                                       bool keys, uint16_t *rows_out, int64_t rows)
{
    const int64_t wgl = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32, h = blockIdx.y;
    const int lane = (int)threadIdx.x % 32;
    const int64_t p0 = (wgl / (D / 32)) * 32;
    const int c0 = (int)(wgl % (D / 32)) * 32;
    bool real[4];
    uint32_t v[32];
    load_block(x, seqs, batch, keys, h, p0, c0, lane, v, real);
    const fp8_fmt f = fp8_e4m3();
    bool plain;
    const block_rule rule = square_rule(f, preset, v, &plain);
    uint32_t w[16];
    const bool fast = plain && !rule.poisoned && rule.scale < 0xFFu; // no NaN code, no NaN scale
#pragma unroll
    for (int k = 0; k < 8; k++) {
        const uint32_t codes = encode4(f, rule, plain, v + 4 * k);
        if (fast) {
            const uint2 two = fwd90::widen4_plain(codes, e8m0_value(rule.scale));
            w[2 * k] = two.x, w[2 * k + 1] = two.y;
        } else {
            uint32_t hh[4];
#pragma unroll
            for (int e = 0; e < 4; e++)
                hh[e] = fwd90::widen_e4m3(codes >> (8 * e) & 0xFFu, rule.scale);
            w[2 * k] = hh[0] | hh[1] << 16, w[2 * k + 1] = hh[2] | hh[3] << 16;
        }
    }
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const int64_t p = p0 + lane / 4 + 8 * k;
        if (p >= rows)
            continue;
        uint4 *dst = reinterpret_cast<uint4 *>(rows_out + (h * rows + p) * D + c0 + 8 * (lane % 4));
        *dst = real[k] ? make_uint4(w[4 * k], w[4 * k + 1], w[4 * k + 2], w[4 * k + 3]) : make_uint4(0, 0, 0, 0);
    }
}

// The fused sm90-fp8 path's operands: x [tokens][H][D] (fp32 or bf16, any
// strides) quantized in 32 x 32 square blocks (SQUARE; each sequence's
// blocks from its first token) or in row blocks of 32 along D, to codes
// rows [H][rows][D] (packed rows; padding rows zero) and, where t_out is
// given, the same codes transposed [H][D][rows] with the rows of each
// 32-block in the order `order` gives (bwd_fp8.cuh: 1 query_of_column, 2
// key_of_pair); the scales as floats 2^(e - 127), [H][rows / 32][SW]
// (SQUARE) or [H][rows][SW] (SW = D / 32, at least 4: bwd8_config). A warp a 32 x 32 block, a lane a token;
// the transpose through shared memory. Grid x over rows / 32 * D / 32 / 4
// blocks of 4 warps, y over the heads.
template <int D, bool SQUARE>
__global__ void __launch_bounds__(128) bwd_pack_fp8(nd3 x, int preset, const seq_info *seqs, int batch, bool keys,
                                                    int order, uint8_t *rows_out, uint8_t *t_out, float *scales,
                                                    int64_t rows)
{
    __shared__ uint32_t tile[4][32][9]; // a warp's codes [token][word], padded against bank conflicts
    const int64_t wgl = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32, h = blockIdx.y;
    const int lane = (int)threadIdx.x % 32, wb = (int)threadIdx.x / 32;
    const int64_t p0 = (wgl / (D / 32)) * 32, p = p0 + lane;
    const int c0 = (int)(wgl % (D / 32)) * 32;
    int64_t token = 0;
    const bool real = p < rows && packed_token(seqs, batch, keys, p, &token) >= 0;
    uint32_t v[32];
#pragma unroll
    for (int k = 0; k < 32; k++)
        v[k] = 0;
    if (real)
#pragma unroll
        for (int k = 0; k < 4; k++)
            load8_bits(x, token, h, c0 + 8 * k, v + 8 * k);
    uint32_t top = 0;
#pragma unroll
    for (int k = 0; k < 4; k++)
        top = umax(top, lane_top(v + 8 * k));
    const fp8_fmt f = fp8_e4m3();
    bool plain;
    const block_rule rule = SQUARE ? warp_rule<32>(f, preset, reduce_max(top, 32), v, 32, &plain)
                                   : warp_rule<32>(f, preset, top, v, 1, &plain);
    uint32_t w[8];
#pragma unroll
    for (int k = 0; k < 8; k++)
        w[k] = real ? encode4(f, rule, plain, v + 4 * k) : 0u;
    if (p0 >= rows)
        return; // (the whole warp)
    uint4 *dst = reinterpret_cast<uint4 *>(rows_out + (h * rows + p) * D + c0);
    dst[0] = make_uint4(w[0], w[1], w[2], w[3]), dst[1] = make_uint4(w[4], w[5], w[6], w[7]);
    constexpr int SW = bwd90::bwd8_config<D>::SW;
    if (SQUARE) {
        const bool any = __any_sync(0xFFFFFFFFu, real);
        if (lane == 0)
            scales[(h * (rows / 32) + p0 / 32) * SW + c0 / 32] = scale_float(any ? rule.scale : 0x7Fu);
    } else {
        scales[(h * rows + p) * SW + c0 / 32] = scale_float(real ? rule.scale : 0x7Fu);
    }
    if (!t_out)
        return;
#pragma unroll
    for (int k = 0; k < 8; k++)
        tile[wb][lane][k] = w[k];
    __syncwarp();
    // lane: column c0 + lane; position f of its row holds token order(f)
    uint32_t o[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
    for (int f = 0; f < 32; f++) {
        const int r = order == 1 ? bwd90::query_of_column(f) : order == 2 ? bwd90::key_of_pair(f) : f;
        o[f / 4] |= (tile[wb][r][lane / 4] >> (8 * (lane % 4)) & 0xFFu) << (8 * (f % 4));
    }
    uint4 *tdst = reinterpret_cast<uint4 *>(t_out + (h * D + c0 + lane) * rows + p0);
    tdst[0] = make_uint4(o[0], o[1], o[2], o[3]), tdst[1] = make_uint4(o[4], o[5], o[6], o[7]);
}

// K for the leak-free mask: x [tokens][H][D] rounded to bf16 at nearest
// even (the reference's f32_as_bf16), rows [H][rows][D], padding rows zero.
// A thread eight columns of a row; grid x over rows * D / 8, y the heads.
template <int D>
__global__ void __launch_bounds__(256) bwd_pack_bf16(nd3 x, const seq_info *seqs, int batch, uint16_t *out,
                                                     int64_t rows)
{
    const int64_t at = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, h = blockIdx.y;
    const int64_t p = at / (D / 8);
    const int c = (int)(at % (D / 8)) * 8;
    if (p >= rows)
        return;
    int64_t token = 0;
    uint32_t v[8] = {0, 0, 0, 0, 0, 0, 0, 0}, w[4];
    if (packed_token(seqs, batch, true, p, &token) >= 0)
        load8_bits(x, token, h, c, v);
#pragma unroll
    for (int e = 0; e < 4; e++)
        w[e] = f32_to_bf16(v[2 * e]) | f32_to_bf16(v[2 * e + 1]) << 16;
    *reinterpret_cast<uint4 *>(out + (h * rows + p) * D + c) = make_uint4(w[0], w[1], w[2], w[3]);
}

// Per query row and head: P's offset pofs = fl(2^-11 - fl(LSE log2 e))
// (POFS_UNSEEN where LSE is -Inf) and delta = sum over d of dO O, products
// and sums rounded in increasing d (the reference's loop), into packed rows
// [H][rows]. A warp 32 tokens of a head, a lane a token's sums. For bf16
// rows the warp loads 64 columns of four tokens at once, so that each load
// is whole 128-byte lines, and their products reach the lanes that sum
// them through shared memory (a lane a token's row of 256 bytes, loaded by
// itself, made each load a gather of 32 pieces: 55 us at 4,16,4096,128 on
// the H200, 2.4 TB/s). Grid x over tokens / 128, y over the heads.
template <int D>
__global__ void __launch_bounds__(128) bwd_prep_rows(const float *lse, int64_t ls0, int64_t ls1, nd3 dout, nd3 o,
                                                     const seq_info *seqs, int batch, int64_t tokens, float log2e,
                                                     float *pofs, float *delta, int64_t rows)
{
    __shared__ float prod[4][32][65]; // a warp's products [token][column], padded against bank conflicts
    const int wb = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    const int64_t t0 = ((int64_t)blockIdx.x * 4 + wb) * 32, h = blockIdx.y, tok = t0 + lane;
    if (t0 >= tokens)
        return; // (the whole warp)
    float acc = 0.0f;
    if (bf16_rows16(dout) && bf16_rows16(o)) {
        const uint16_t *du = reinterpret_cast<const uint16_t *>(dout.base);
        const uint16_t *ou = reinterpret_cast<const uint16_t *>(o.base);
#pragma unroll 1
        for (int c0 = 0; c0 < D; c0 += 64) {
            // lane: columns c0 + 8 (l % 8) .. + 7 of tokens t0 + l / 8 + 4 j
            uint4 a[8], b[8];
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const int64_t t = t0 + lane / 8 + 4 * j, c = c0 + 8 * (lane % 8);
                a[j] = b[j] = make_uint4(0, 0, 0, 0);
                if (t < tokens) {
                    a[j] = *reinterpret_cast<const uint4 *>(du + t * dout.s0 + h * dout.s1 + c);
                    b[j] = *reinterpret_cast<const uint4 *>(ou + t * o.s0 + h * o.s1 + c);
                }
            }
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const uint32_t x[4] = {a[j].x, a[j].y, a[j].z, a[j].w}, y[4] = {b[j].x, b[j].y, b[j].z, b[j].w};
#pragma unroll
                for (int e = 0; e < 8; e++) {
                    const uint32_t xe = e % 2 ? x[e / 2] & 0xFFFF0000u : x[e / 2] << 16;
                    const uint32_t ye = e % 2 ? y[e / 2] & 0xFFFF0000u : y[e / 2] << 16;
                    prod[wb][lane / 8 + 4 * j][8 * (lane % 8) + e] = __fmul_rn(__uint_as_float(xe), __uint_as_float(ye));
                }
            }
            __syncwarp();
#pragma unroll 16
            for (int c = 0; c < 64; c++)
                acc = __fadd_rn(acc, prod[wb][lane][c]);
            __syncwarp();
        }
    } else if (tok < tokens) {
#pragma unroll 1
        for (int c = 0; c < D; c += 8) {
            uint32_t u[8], v[8];
            load8_bits(dout, tok, h, c, u);
            load8_bits(o, tok, h, c, v);
#pragma unroll
            for (int k = 0; k < 8; k++)
                acc = __fadd_rn(acc, __fmul_rn(__uint_as_float(u[k]), __uint_as_float(v[k])));
        }
    }
    if (tok >= tokens)
        return;
    const int b = last_at_or_below(batch, tok, [&](int s) { return seqs[s].q0; });
    const int64_t j = tok - seqs[b].q0;
    if (j < 0 || j >= seqs[b].lq)
        return; // (a token of no sequence)
    const float l = lse[tok * ls0 + h * ls1];
    const int64_t at = h * rows + seqs[b].q_off + j;
    pofs[at] = l == -__builtin_huge_valf() ? __uint_as_float(bwd90::POFS_UNSEEN) : bwd_p_offset(l, log2e);
    delta[at] = acc;
}

// dQ = fl(dQ scale) from the packed rows [H][rows][D] into the output; a
// thread four columns of a row. A query tile whose semaphore (sem[H][rows /
// BMQ]) is still 0 was visited by no item: its dQ is +0, and its rows of
// dq were never written. Grid x over rows * D / 4, y the heads.
template <int D>
__global__ void bwd_finish_q(const float *dq, const int *sem, const seq_info *seqs, int batch, int64_t rows,
                             float scale, nd3 out)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, h = blockIdx.y;
    const int64_t p = i / (D / 4);
    const int c = (int)(i % (D / 4)) * 4;
    int64_t token;
    if (p >= rows || packed_token(seqs, batch, false, p, &token) < 0)
        return;
    const bool visited = sem[h * (rows / bwd90::BMQ) + p / bwd90::BMQ] != 0;
    const float4 v = visited ? *reinterpret_cast<const float4 *>(dq + (h * rows + p) * D + c)
                             : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (out.dtype == MXFA_BF16 && out.s2 == 1) {
        uint16_t *ob = reinterpret_cast<uint16_t *>(out.base) + token * out.s0 + h * out.s1 + c;
        if (reinterpret_cast<uintptr_t>(ob) % 8 == 0) { // (a bf16 row: the four as one store)
            const float x[4] = {v.x, v.y, v.z, v.w};
            uint32_t b[4];
#pragma unroll
            for (int k = 0; k < 4; k++)
                b[k] = f32_to_bf16(__float_as_uint(canonical_nan(__fmul_rn(x[k], scale)))) & 0xFFFFu;
            *reinterpret_cast<uint2 *>(ob) = make_uint2(b[0] | b[1] << 16, b[2] | b[3] << 16);
            return;
        }
    }
    store3(out, token, h, c, __fmul_rn(v.x, scale));
    store3(out, token, h, c + 1, __fmul_rn(v.y, scale));
    store3(out, token, h, c + 2, __fmul_rn(v.z, scale));
    store3(out, token, h, c + 3, __fmul_rn(v.w, scale));
}

// dK and dV of a GQA group: each query head's fl(dK scale) and dV (packed
// rows [Hq][rows][D]) summed in increasing head order, the first head's as
// it is, into the outputs. Grid x over rows * D, y the key heads.
template <int D>
__global__ void bwd_finish_kv(const float *dk, const float *dv, const seq_info *seqs, int batch, int64_t rows,
                              int group, float scale, nd3 dk_out, nd3 dv_out)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, g = blockIdx.y;
    const int64_t p = i / D;
    const int c = (int)(i % D);
    int64_t token;
    if (p >= rows || packed_token(seqs, batch, true, p, &token) < 0)
        return;
    float sk = 0.0f, sv = 0.0f;
    for (int k = 0; k < group; k++) {
        const int64_t at = ((g * group + k) * rows + p) * D + c;
        const float vk = __fmul_rn(dk[at], scale), vv = dv[at];
        sk = k == 0 ? vk : __fadd_rn(sk, vk);
        sv = k == 0 ? vv : __fadd_rn(sv, vv);
    }
    store3(dk_out, token, g, c, sk);
    store3(dv_out, token, g, c, sv);
}

__global__ void fill_u32(uint32_t *x, int64_t n, uint32_t v)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = v;
}

} // namespace

// ---- the fused sm90-bf16 backward (bwd_bf16.cuh) ----

namespace {

// The packed rows of the queries and keys: each sequence from a multiple of
// 128 (none: one tile, so that every tensor map is valid).
void packed_rows(const attn_bwd_args &a, int64_t *q_rows, int64_t *k_rows)
{
    *q_rows = *k_rows = 0;
    for (int b = 0; b < a.batch; b++) {
        *q_rows += round_up((int64_t)a.cu_q[b + 1] - a.cu_q[b], bwd90::BMQ);
        *k_rows += round_up((int64_t)a.cu_k[b + 1] - a.cu_k[b], bwd90::BN);
    }
    *q_rows = *q_rows ? *q_rows : bwd90::BMQ, *k_rows = *k_rows ? *k_rows : bwd90::BN;
}

// The fused kernel's instance for a call: D, P's quantization, the mask.
using bwd_kernel_fn = decltype(&bwd90::attn_bwd_bf16<64, false, false>);
template <int D> bwd_kernel_fn bwd_kernel(const attn_bwd_args &a)
{
    using namespace bwd90;
    if (a.leak_free)
        return a.p_dynamic ? attn_bwd_bf16<D, true, true> : attn_bwd_bf16<D, false, true>;
    return a.p_dynamic ? attn_bwd_bf16<D, true, false> : attn_bwd_bf16<D, false, false>;
}

// Where the fused kernel serves: sm90-bf16 on Hopper, D = 64, 128 or 256, the
// default tiles, coordinates within 32 bits,
// items with room for a grid's stride below 2^31, heads within a grid's y
// (the packing's), a kernel image with the registers its warpgroups share
// out (a setmaxnreg.inc beyond them would wait forever). MXFA_BWD_COMPOSED=1 keeps
// the composition (for measuring one against the other, and for testing it).
bool fused_bf16_serves(const attn_bwd_args &a)
{
    const int64_t d = a.q.n2, hq = a.q.n1, hkv = a.k.n1;
    const char *env = getenv("MXFA_BWD_COMPOSED");
    if (!a.bf16_model || a.sm100 || (d != 64 && d != 128 && d != 256) || a.block_m != 128 || a.block_n != 128 ||
        (env && env[0] == '1'))
        return false;
    int64_t q_rows, k_rows;
    packed_rows(a, &q_rows, &k_rows);
    const int64_t lim = (int64_t)1 << 31;
    const int64_t keys = d == 64    ? bwd90::bwd_config<64>::KEYS
                         : d == 128 ? bwd90::bwd_config<128>::KEYS
                                    : bwd90::bwd_config<256>::KEYS; // an item's
    if (hq > 65535 || hkv > 65535 || hq * q_rows >= lim || hkv * k_rows >= lim || (k_rows / keys) * hq >= lim - 65536)
        return false;
    cudaFuncAttributes fa;
    const int need = (128 * bwd90::PRODUCER_REGS + 256 * bwd90::CONSUMER_REGS) / bwd90::THREADS;
    const bwd_kernel_fn kernel = d == 64 ? bwd_kernel<64>(a) : d == 128 ? bwd_kernel<128>(a) : bwd_kernel<256>(a);
    if (cudaFuncGetAttributes(&fa, (const void *)kernel) != cudaSuccess || fa.numRegs < need) {
        cudaGetLastError(); // (cleared: the composition runs instead)
        return false;
    }
    return true;
}

template <int D> cudaError_t fused_bf16(const attn_bwd_args &a, cudaStream_t stream)
{
    using namespace bwd90;
    constexpr int KEYS = bwd_config<D>::KEYS, BQ = bwd_config<D>::BQ;
    const int64_t hq = a.q.n1, hkv = a.k.n1, group = hq / hkv, tq = a.q.n0;
    const int batch = a.batch;
    seq_info *hs = static_cast<seq_info *>(malloc(sizeof(seq_info) * (size_t)batch));
    if (!hs)
        return cudaErrorMemoryAllocation;
    const seq_layout n = layout_seqs(a.cu_q, a.cu_k, batch, BMQ, BN, BMQ, hs);
    int64_t q_rows = n.q_rows, k_rows = n.k_rows;
    packed_rows(a, &q_rows, &k_rows);
    const bool direct = group == 1;
    // scratch: the bf16 operands (and K rounded to bf16 under the leak-free
    // mask), pofs and delta, dQ's accumulator, the semaphores, the sequences, and under GQA
    // each query head's dK and dV
    auto piece = [](size_t bytes) { return (bytes + 1023) / 1024 * 1024; };
    const size_t qbf = (size_t)(hq * q_rows * D) * 2, kbf = (size_t)(hkv * k_rows * D) * 2;
    const size_t partial = direct ? 0 : (size_t)(hq * k_rows * D) * 4;
    const size_t sizes[] = {(size_t)(hq * q_rows * D) * 4, (size_t)(hq * (q_rows / BMQ)) * 4,
                            (size_t)(hq * q_rows) * 4,      (size_t)(hq * q_rows) * 4,
                            qbf,
                            qbf,
                            kbf,
                            a.leak_free ? kbf : 0,
                            kbf,
                            sizeof(seq_info) * (size_t)batch,
                            partial,
                            partial};
    constexpr int N = sizeof sizes / sizeof sizes[0];
    size_t at[N], total = 0;
    for (int i = 0; i < N; i++)
        at[i] = total, total += piece(sizes[i]);
    scratch mem(stream);
    uint8_t *base = nullptr;
    cudaError_t e = mem.get(&base, total);
    if (e != cudaSuccess) {
        free(hs);
        return e;
    }
    float *dq = reinterpret_cast<float *>(base + at[0]);
    int *sem = reinterpret_cast<int *>(base + at[1]);
    float *pofs = reinterpret_cast<float *>(base + at[2]), *delta = reinterpret_cast<float *>(base + at[3]);
    uint16_t *qw = reinterpret_cast<uint16_t *>(base + at[4]), *ow = reinterpret_cast<uint16_t *>(base + at[5]);
    uint16_t *kw = reinterpret_cast<uint16_t *>(base + at[6]), *kr = reinterpret_cast<uint16_t *>(base + at[7]);
    uint16_t *vw = reinterpret_cast<uint16_t *>(base + at[8]);
    seq_info *dseqs = reinterpret_cast<seq_info *>(base + at[9]);
    float *dk = direct ? nullptr : reinterpret_cast<float *>(base + at[10]);
    float *dv = direct ? nullptr : reinterpret_cast<float *>(base + at[11]);
    // zeros: the semaphores, delta (padding rows) (dQ's accumulator needs
    // none: each chain's first item starts from +0); pofs unseen (padding
    // rows); then the packing, each tensor in one launch
    e = cudaMemsetAsync(base + at[1], 0, at[4] - at[1], stream);
    if (e == cudaSuccess) {
        fill_u32<<<blocks_for(hq * q_rows, 256), 256, 0, stream>>>(reinterpret_cast<uint32_t *>(pofs), hq * q_rows,
                                                                   POFS_UNSEEN);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(dseqs, hs, sizeof(seq_info) * (size_t)batch, cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess) {
        const unsigned qsq = (unsigned)(q_rows / 32 * (D / 32) / 4), ksq = (unsigned)(k_rows / 32 * (D / 32) / 4);
        bwd_pack_square<D><<<dim3(qsq, (unsigned)hq), 128, 0, stream>>>(a.q, a.preset, dseqs, batch, false, qw,
                                                                        q_rows);
        bwd_pack_square<D><<<dim3(qsq, (unsigned)hq), 128, 0, stream>>>(a.dout, a.preset, dseqs, batch, false, ow,
                                                                        q_rows);
        bwd_pack_square<D><<<dim3(ksq, (unsigned)hkv), 128, 0, stream>>>(a.k, a.preset, dseqs, batch, true, kw,
                                                                         k_rows);
        if (a.leak_free)
            bwd_pack_bf16<D><<<dim3(blocks_for(k_rows * D / 8, 256), (unsigned)hkv), 256, 0, stream>>>(
                a.k, dseqs, batch, kr, k_rows);
        fwd90::pack_rows_bf16<D><<<dim3((unsigned)(k_rows * D / 8 / 256), (unsigned)hkv), 256, 0, stream>>>(
            a.v, a.preset, dseqs, batch, true, vw, k_rows);
        if (tq > 0)
            bwd_prep_rows<D><<<dim3((unsigned)((tq + 127) / 128), (unsigned)hq), 128, 0, stream>>>(
                a.lse, a.ls0, a.ls1, a.dout, a.o, dseqs, batch, tq, a.log2e, pofs, delta, q_rows);
        e = cudaGetLastError();
    }
    CUtensorMap m[8];
    memset(m, 0, sizeof m);
    const CUtensorMapDataType bf16 = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, f32 = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    const CUtensorMapSwizzle sw = CU_TENSOR_MAP_SWIZZLE_128B;
    if (e == cudaSuccess &&
        ((e = tensor_map(&m[0], bf16, kw, D, (uint64_t)(hkv * k_rows), D * 2, 64, KEYS, sw)) != cudaSuccess ||
         (e = tensor_map(&m[1], bf16, vw, D, (uint64_t)(hkv * k_rows), D * 2, 64, KEYS, sw)) != cudaSuccess ||
         (e = tensor_map(&m[2], bf16, a.leak_free ? kr : kw, D, (uint64_t)(hkv * k_rows), D * 2, 64, KEYS, sw)) !=
             cudaSuccess ||
         (e = tensor_map(&m[3], bf16, qw, D, (uint64_t)(hq * q_rows), D * 2, 64, BQ, sw)) != cudaSuccess ||
         (e = tensor_map(&m[4], bf16, ow, D, (uint64_t)(hq * q_rows), D * 2, 64, BQ, sw)) != cudaSuccess ||
         (e = tensor_map(&m[5], f32, pofs, (uint64_t)q_rows, (uint64_t)hq, (uint64_t)q_rows * 4, BQ, 1,
                         CU_TENSOR_MAP_SWIZZLE_NONE)) != cudaSuccess ||
         (e = tensor_map(&m[6], f32, delta, (uint64_t)q_rows, (uint64_t)hq, (uint64_t)q_rows * 4, BQ, 1,
                         CU_TENSOR_MAP_SWIZZLE_NONE)) != cudaSuccess ||
         (e = tensor_map(&m[7], f32, dq, D, (uint64_t)(hq * q_rows), D * 4, 32, BQ, sw)) != cudaSuccess))
        ; // e says which
    bwd_params p;
    p.seqs = dseqs, p.batch = batch, p.group = (int)group, p.hq = (int)hq;
    p.q_rows = q_rows, p.k_rows = k_rows, p.items = (int)((k_rows / KEYS) * hq);
    p.c = a.c, p.causal = a.causal, p.preset = a.preset;
    p.dq = dq, p.sem = sem;
    p.direct = direct, p.scale = a.softmax_scale, p.dk_out = a.dk, p.dv_out = a.dv, p.dk = dk, p.dv = dv;
    // Every CTA must be resident at once (an item waits on another CTA's
    // dQ): at most one an SM, launched cooperatively, which fails rather
    // than start fewer; where the device holds fewer at once than it has
    // SMs (an MPS client's share, for one), half as many, down to one, for
    // the kernel is exact on any grid. MXFA_BWD_MAX_CTAS caps the grid, so
    // that a test gives each CTA several items.
    int dev = 0, sms = 0, per_sm = 0;
    const bwd_kernel_fn kernel = bwd_kernel<D>(a);
    if (e == cudaSuccess && (e = cudaGetDevice(&dev)) == cudaSuccess &&
        (e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) == cudaSuccess &&
        (e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, BWD_SMEM_BYTES<D>)) ==
            cudaSuccess &&
        (e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, THREADS, BWD_SMEM_BYTES<D>)) ==
            cudaSuccess) {
        int64_t ctas = (int64_t)(sms > 1 ? sms : 1) * (per_sm > 1 ? 1 : per_sm);
        const char *cap = getenv("MXFA_BWD_MAX_CTAS");
        if (cap && atoi(cap) > 0 && atoi(cap) < ctas)
            ctas = atoi(cap);
        ctas = ctas < p.items ? ctas : p.items;
        if (ctas < 1) {
            e = cudaErrorLaunchOutOfResources; // no CTA fits an SM
        } else {
            cudaLaunchConfig_t cfg = {};
            cfg.gridDim = dim3((unsigned)ctas), cfg.blockDim = dim3(THREADS);
            cfg.dynamicSmemBytes = BWD_SMEM_BYTES<D>, cfg.stream = stream;
            cudaLaunchAttribute coop;
            coop.id = cudaLaunchAttributeCooperative, coop.val.cooperative = 1;
            cfg.attrs = &coop, cfg.numAttrs = 1;
            while ((e = cudaLaunchKernelEx(&cfg, kernel, m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7], p)) ==
                       cudaErrorCooperativeLaunchTooLarge &&
                   cfg.gridDim.x > 1) {
                cudaGetLastError();
                cfg.gridDim.x /= 2;
            }
            if (e != cudaSuccess)
                cudaGetLastError(); // (returned, not left for the next call's check)
        }
    }
    // dQ = fl(dQ scale); under GQA, dK and dV summed over each key head's
    // query heads
    if (e == cudaSuccess) {
        bwd_finish_q<D><<<dim3(blocks_for(q_rows * D / 4, 256), (unsigned)hq), 256, 0, stream>>>(
            dq, sem, dseqs, batch, q_rows, a.softmax_scale, a.dq);
        if (!direct)
            bwd_finish_kv<D><<<dim3(blocks_for(k_rows * D, 256), (unsigned)hkv), 256, 0, stream>>>(
                dk, dv, dseqs, batch, k_rows, (int)group, a.softmax_scale, a.dk, a.dv);
        e = cudaGetLastError();
    }
    free(hs);
    return e;
}

// ---- the fused sm90-fp8 backward (bwd_fp8.cuh) ----

using bwd8_kernel_fn = decltype(&bwd90::attn_bwd_fp8<128, false, false>);
template <int D> bwd8_kernel_fn bwd8_kernel(const attn_bwd_args &a)
{
    using namespace bwd90;
    if (a.leak_free)
        return a.p_dynamic ? attn_bwd_fp8<D, true, true> : attn_bwd_fp8<D, false, true>;
    return a.p_dynamic ? attn_bwd_fp8<D, true, false> : attn_bwd_fp8<D, false, false>;
}

// Where it serves: sm90-fp8 on Hopper, D = 64 or 128, every mask, the
// default tiles, and fused_bf16_serves' bounds.
bool fused_fp8_serves(const attn_bwd_args &a)
{
    const int64_t d = a.q.n2, hq = a.q.n1, hkv = a.k.n1;
    const char *env = getenv("MXFA_BWD_COMPOSED");
    if (a.bf16_model || a.sm100 || (d != 64 && d != 128) || a.block_m != 128 || a.block_n != 128 ||
        (env && env[0] == '1'))
        return false;
    int64_t q_rows, k_rows;
    packed_rows(a, &q_rows, &k_rows);
    const int64_t lim = (int64_t)1 << 31, keys = bwd90::bwd8_config<128>::KEYS;
    if (hq > 65535 || hkv > 65535 || hq * q_rows >= lim || hkv * k_rows >= lim || hq * d >= lim || hkv * d >= lim ||
        (k_rows / keys) * hq >= lim - 65536)
        return false;
    cudaFuncAttributes fa;
    const int need = (128 * bwd90::PRODUCER_REGS + 256 * bwd90::CONSUMER_REGS) / bwd90::THREADS;
    const bwd8_kernel_fn kernel = d == 64 ? bwd8_kernel<64>(a) : bwd8_kernel<128>(a);
    if (cudaFuncGetAttributes(&fa, (const void *)kernel) != cudaSuccess || fa.numRegs < need) {
        cudaGetLastError();
        return false;
    }
    return true;
}

template <int D> cudaError_t fused_fp8(const attn_bwd_args &a, cudaStream_t stream)
{
    using namespace bwd90;
    using cf = bwd8_config<D>;
    constexpr int KEYS = cf::KEYS, BQ = cf::BQ, DB = cf::DB, SW = cf::SW;
    const int64_t hq = a.q.n1, hkv = a.k.n1, group = hq / hkv, tq = a.q.n0;
    const int batch = a.batch;
    seq_info *hs = static_cast<seq_info *>(malloc(sizeof(seq_info) * (size_t)batch));
    if (!hs)
        return cudaErrorMemoryAllocation;
    const seq_layout n = layout_seqs(a.cu_q, a.cu_k, batch, BMQ, BN, BMQ, hs);
    int64_t q_rows = n.q_rows, k_rows = n.k_rows;
    packed_rows(a, &q_rows, &k_rows);
    const bool direct = group == 1;
    // scratch: dQ's accumulator, the semaphores, pofs and delta (the zeroed
    // part); then the codes of Q, dO (rows and transposed), K (rows and
    // transposed) and V, their scales, the sequences, under GQA each query
    // head's dK and dV, and under the leak-free mask K rounded to bf16
    auto piece = [](size_t bytes) { return (bytes + 1023) / 1024 * 1024; };
    const size_t q8 = (size_t)(hq * q_rows * D), k8 = (size_t)(hkv * k_rows * D);
    const size_t qsq = (size_t)(hq * (q_rows / 32) * SW) * 4, ksq = (size_t)(hkv * (k_rows / 32) * SW) * 4;
    const size_t partial = direct ? 0 : (size_t)(hq * k_rows * D) * 4;
    const size_t sizes[] = {q8 * 4, (size_t)(hq * (q_rows / BMQ)) * 4, (size_t)(hq * q_rows) * 4,
                            (size_t)(hq * q_rows) * 4, q8, q8, q8, q8, k8, k8, k8, qsq, qsq, ksq,
                            (size_t)(hkv * k_rows * SW) * 4, sizeof(seq_info) * (size_t)batch, partial, partial,
                            a.leak_free ? k8 * 2 : 0};
    constexpr int N = sizeof sizes / sizeof sizes[0];
    size_t at[N], total = 0;
    for (int i = 0; i < N; i++)
        at[i] = total, total += piece(sizes[i]);
    scratch mem(stream);
    uint8_t *base = nullptr;
    cudaError_t e = mem.get(&base, total);
    if (e != cudaSuccess) {
        free(hs);
        return e;
    }
    float *dq = reinterpret_cast<float *>(base + at[0]);
    int *sem = reinterpret_cast<int *>(base + at[1]);
    float *pofs = reinterpret_cast<float *>(base + at[2]), *delta = reinterpret_cast<float *>(base + at[3]);
    uint8_t *qc = base + at[4], *qt = base + at[5], *oc = base + at[6], *ot = base + at[7];
    uint8_t *kc = base + at[8], *kt = base + at[9], *vc = base + at[10];
    float *qs = reinterpret_cast<float *>(base + at[11]), *os = reinterpret_cast<float *>(base + at[12]);
    float *ks = reinterpret_cast<float *>(base + at[13]), *vs = reinterpret_cast<float *>(base + at[14]);
    seq_info *dseqs = reinterpret_cast<seq_info *>(base + at[15]);
    float *dk = direct ? nullptr : reinterpret_cast<float *>(base + at[16]);
    float *dv = direct ? nullptr : reinterpret_cast<float *>(base + at[17]);
    uint16_t *kraw = reinterpret_cast<uint16_t *>(base + at[18]);
    e = cudaMemsetAsync(base + at[1], 0, at[4] - at[1], stream); // (not dQ's: as the sm90-bf16 path)
    if (e == cudaSuccess && SW > DB) // (the rows' padding, which no thread reads, defined all the same)
        e = cudaMemsetAsync(base + at[11], 0, at[15] - at[11], stream);
    if (e == cudaSuccess) {
        fill_u32<<<blocks_for(hq * q_rows, 256), 256, 0, stream>>>(reinterpret_cast<uint32_t *>(pofs), hq * q_rows,
                                                                   POFS_UNSEEN);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(dseqs, hs, sizeof(seq_info) * (size_t)batch, cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess) {
        const unsigned qb = (unsigned)(q_rows / 32 * DB / 4), kb = (unsigned)(k_rows / 32 * DB / 4);
        bwd_pack_fp8<D, true><<<dim3(qb, (unsigned)hq), 128, 0, stream>>>(a.q, a.preset, dseqs, batch, false, 1, qc,
                                                                          qt, qs, q_rows);
        bwd_pack_fp8<D, true><<<dim3(qb, (unsigned)hq), 128, 0, stream>>>(a.dout, a.preset, dseqs, batch, false, 1,
                                                                          oc, ot, os, q_rows);
        bwd_pack_fp8<D, true><<<dim3(kb, (unsigned)hkv), 128, 0, stream>>>(a.k, a.preset, dseqs, batch, true, 2, kc,
                                                                           kt, ks, k_rows);
        bwd_pack_fp8<D, false><<<dim3(kb, (unsigned)hkv), 128, 0, stream>>>(a.v, a.preset, dseqs, batch, true, 0, vc,
                                                                            nullptr, vs, k_rows);
        if (a.leak_free)
            bwd_pack_bf16<D><<<dim3(blocks_for(k_rows * D / 8, 256), (unsigned)hkv), 256, 0, stream>>>(
                a.k, dseqs, batch, kraw, k_rows);
        if (tq > 0)
            bwd_prep_rows<D><<<dim3((unsigned)((tq + 127) / 128), (unsigned)hq), 128, 0, stream>>>(
                a.lse, a.ls0, a.ls1, a.dout, a.o, dseqs, batch, tq, a.log2e, pofs, delta, q_rows);
        e = cudaGetLastError();
    }
    CUtensorMap m[15];
    memset(m, 0, sizeof m);
    const CUtensorMapDataType u8 = CU_TENSOR_MAP_DATA_TYPE_UINT8, f32 = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    const CUtensorMapSwizzle sw = CU_TENSOR_MAP_SWIZZLE_128B, none = CU_TENSOR_MAP_SWIZZLE_NONE;
    const CUtensorMapSwizzle rows_sw = D == 128 ? sw : CU_TENSOR_MAP_SWIZZLE_64B; // K, V, Q and dO rows
    const uint64_t qr = (uint64_t)(hq * q_rows), kr = (uint64_t)(hkv * k_rows);
    if (e == cudaSuccess &&
        ((e = tensor_map(&m[0], u8, kc, D, kr, D, D, KEYS, rows_sw)) != cudaSuccess ||
         (e = tensor_map(&m[1], u8, vc, D, kr, D, D, KEYS, rows_sw)) != cudaSuccess ||
         (e = tensor_map(&m[2], u8, kt, (uint64_t)k_rows, (uint64_t)(hkv * D), (uint64_t)k_rows, KEYS, D, sw)) !=
             cudaSuccess ||
         (e = tensor_map(&m[3], u8, qc, D, qr, D, D, BQ, rows_sw)) != cudaSuccess ||
         (e = tensor_map(&m[4], u8, oc, D, qr, D, D, BQ, rows_sw)) != cudaSuccess ||
         (e = tensor_map(&m[5], u8, qt, (uint64_t)q_rows, (uint64_t)(hq * D), (uint64_t)q_rows, BQ, D,
                         CU_TENSOR_MAP_SWIZZLE_32B)) != cudaSuccess ||
         (e = tensor_map(&m[6], u8, ot, (uint64_t)q_rows, (uint64_t)(hq * D), (uint64_t)q_rows, BQ, D,
                         CU_TENSOR_MAP_SWIZZLE_32B)) != cudaSuccess ||
         (e = tensor_map(&m[7], f32, pofs, (uint64_t)q_rows, (uint64_t)hq, (uint64_t)q_rows * 4, BQ, 1, none)) !=
             cudaSuccess ||
         (e = tensor_map(&m[8], f32, delta, (uint64_t)q_rows, (uint64_t)hq, (uint64_t)q_rows * 4, BQ, 1, none)) !=
             cudaSuccess ||
         (e = tensor_map(&m[9], f32, dq, D, qr, D * 4, 32, BQ, sw)) != cudaSuccess ||
         (e = tensor_map(&m[10], f32, qs, SW, qr / 32, SW * 4, SW, 1, none)) != cudaSuccess ||
         (e = tensor_map(&m[11], f32, os, SW, qr / 32, SW * 4, SW, 1, none)) != cudaSuccess ||
         (e = tensor_map(&m[12], f32, ks, SW, kr / 32, SW * 4, SW, KEYS / 32, none)) != cudaSuccess ||
         (e = tensor_map(&m[13], f32, vs, SW, kr, SW * 4, SW, KEYS, none)) != cudaSuccess ||
         (e = tensor_map(&m[14], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, a.leak_free ? (const void *)kraw : (const void *)kc, D,
                         kr, D * 2, 64, KEYS, sw)) != cudaSuccess))
        ; // e says which
    bwd8_params p8;
    bwd_params &p = p8.b;
    p.seqs = dseqs, p.batch = batch, p.group = (int)group, p.hq = (int)hq;
    p.q_rows = q_rows, p.k_rows = k_rows, p.items = (int)((k_rows / KEYS) * hq);
    p.c = a.c, p.causal = a.causal, p.preset = a.preset;
    p.dq = dq, p.sem = sem;
    p.direct = direct, p.scale = a.softmax_scale, p.dk_out = a.dk, p.dv_out = a.dv, p.dk = dk, p.dv = dv;
    p8.qs = qs, p8.os = os, p8.ks = ks, p8.vs = vs;
    // the grid as fused_bf16's: every CTA resident, launched cooperatively
    int dev = 0, sms = 0, per_sm = 0;
    const bwd8_kernel_fn kernel = bwd8_kernel<D>(a);
    const size_t smem = a.leak_free ? BWD8_SMEM_BYTES<D, true> : BWD8_SMEM_BYTES<D, false>;
    if (e == cudaSuccess && (e = cudaGetDevice(&dev)) == cudaSuccess &&
        (e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) == cudaSuccess &&
        (e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)) == cudaSuccess &&
        (e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, THREADS, smem)) == cudaSuccess) {
        int64_t ctas = (int64_t)(sms > 1 ? sms : 1) * (per_sm > 1 ? 1 : per_sm);
        const char *cap = getenv("MXFA_BWD_MAX_CTAS");
        if (cap && atoi(cap) > 0 && atoi(cap) < ctas)
            ctas = atoi(cap);
        ctas = ctas < p.items ? ctas : p.items;
        if (ctas < 1) {
            e = cudaErrorLaunchOutOfResources;
        } else {
            cudaLaunchConfig_t cfg = {};
            cfg.gridDim = dim3((unsigned)ctas), cfg.blockDim = dim3(THREADS);
            cfg.dynamicSmemBytes = smem, cfg.stream = stream;
            cudaLaunchAttribute coop;
            coop.id = cudaLaunchAttributeCooperative, coop.val.cooperative = 1;
            cfg.attrs = &coop, cfg.numAttrs = 1;
            while ((e = cudaLaunchKernelEx(&cfg, kernel, m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7], m[8], m[9],
                                           m[10], m[11], m[12], m[13], m[14], p8)) == cudaErrorCooperativeLaunchTooLarge &&
                   cfg.gridDim.x > 1) {
                cudaGetLastError();
                cfg.gridDim.x /= 2;
            }
            if (e != cudaSuccess)
                cudaGetLastError();
        }
    }
    if (e == cudaSuccess) {
        bwd_finish_q<D><<<dim3(blocks_for(q_rows * D / 4, 256), (unsigned)hq), 256, 0, stream>>>(
            dq, sem, dseqs, batch, q_rows, a.softmax_scale, a.dq);
        if (!direct)
            bwd_finish_kv<D><<<dim3(blocks_for(k_rows * D, 256), (unsigned)hkv), 256, 0, stream>>>(
                dk, dv, dseqs, batch, k_rows, (int)group, a.softmax_scale, a.dk, a.dv);
        e = cudaGetLastError();
    }
    free(hs);
    return e;
}

} // namespace

cudaError_t launch_attn_bwd_sm90(const attn_bwd_args &a, cudaStream_t stream)
{
    const bool fused8 = fused_fp8_serves(a), fused = fused8 || fused_bf16_serves(a);
    // MXFA_BWD_FUSED=1: a call the fused kernel does not take fails (tests
    // of the kernel must not pass on the composition)
    const char *want_fused = getenv("MXFA_BWD_FUSED");
    if (want_fused && want_fused[0] == '1' && !fused)
        return cudaErrorNotSupported;
    if (!fused)
        return launch_attn_bwd_composed(a, stream);
    if (fused8)
        return a.q.n2 == 64 ? fused_fp8<64>(a, stream) : fused_fp8<128>(a, stream);
    return a.q.n2 == 64 ? fused_bf16<64>(a, stream) : a.q.n2 == 128 ? fused_bf16<128>(a, stream) : fused_bf16<256>(a, stream);
}

} // namespace mxfa_gpu
