// SPDX-License-Identifier: BSD-3-Clause
// The cuda backend: the module's entry point, its context (the device and
// the caller's stream), CUDA errors as mxfa statuses, and host tensors
// staged through device memory. The kernels are in gpu/common/.
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "module.cuh"

extern "C" {
#include "module.h"
}

namespace mxfa_gpu {

// ---- the scratch pool ----

// One pool a device for the life of the process, made at first use. Its
// release threshold is unlimited: memory a call frees stays mapped for the
// next call, as a framework's caching allocator keeps it, where CUDA's
// default pool gives it back at every synchronization and the next call
// maps its scratch (hundreds of MiB at long sequences) afresh while the GPU
// waits. A context's close trims the pool (close_ctx).
namespace {
constexpr int kMaxDevices = 64;
std::mutex pool_lock;
cudaMemPool_t pools[kMaxDevices];

cudaError_t device_pool(int dev, cudaMemPool_t *out)
{
    if (dev < 0 || dev >= kMaxDevices)
        return cudaErrorInvalidDevice;
    std::lock_guard<std::mutex> hold(pool_lock);
    if (!pools[dev]) {
        cudaMemPoolProps props;
        memset(&props, 0, sizeof props);
        props.allocType = cudaMemAllocationTypePinned;
        props.location.type = cudaMemLocationTypeDevice;
        props.location.id = dev;
        cudaMemPool_t pool;
        cudaError_t e = cudaMemPoolCreate(&pool, &props);
        if (e != cudaSuccess)
            return e;
        uint64_t keep_all = UINT64_MAX;
        if ((e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all)) != cudaSuccess) {
            cudaMemPoolDestroy(pool);
            return e;
        }
        pools[dev] = pool;
    }
    *out = pools[dev];
    return cudaSuccess;
}
} // namespace

cudaError_t scratch_alloc(void **p, size_t bytes, cudaStream_t stream)
{
    int dev = 0;
    cudaMemPool_t pool;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess)
        e = device_pool(dev, &pool);
    if (e == cudaSuccess)
        e = cudaMallocFromPoolAsync(p, bytes, pool, stream);
    return e;
}

namespace {

struct cuda_state {
    int device;
};

mxfa_status fail(mxfa_ctx *ctx, mxfa_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
mxfa_status fail(mxfa_ctx *ctx, mxfa_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->error, sizeof ctx->error, fmt, ap);
    va_end(ap);
    return st;
}

// A CUDA error as a status with CUDA's own words; an allocation failure is
// MXFA_ERR_NO_MEMORY, anything else MXFA_ERR_DEVICE.
mxfa_status cuda_fail(mxfa_ctx *ctx, cudaError_t e, const char *what)
{
    return fail(ctx, e == cudaErrorMemoryAllocation ? MXFA_ERR_NO_MEMORY : MXFA_ERR_DEVICE, "cuda: %s: %s (%s)",
                what, cudaGetErrorString(e), cudaGetErrorName(e));
}

int usable(char *why, size_t why_len)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(why, why_len, "no CUDA device: %s", cudaGetErrorString(e));
        return 0;
    }
    int dev = 0, major = 0, minor = 0;
    if ((e = cudaGetDevice(&dev)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev)) != cudaSuccess) {
        snprintf(why, why_len, "cannot query CUDA device: %s", cudaGetErrorString(e));
        return 0;
    }
    // the module carries sm_90a and sm_100a code, or one of them
    // (configure --with-cuda-arch); an "a" target runs on its own compute
    // capability only
#ifdef MXFA_BUILT_SM90a
    if (major == 9 && minor == 0)
        return 1;
#endif
#ifdef MXFA_BUILT_SM100a
    if (major == 10 && minor == 0)
        return 1;
#endif
    const char *built =
#if defined(MXFA_BUILT_SM90a) && defined(MXFA_BUILT_SM100a)
        "9.0 (Hopper) and 10.0 (Blackwell)";
#elif defined(MXFA_BUILT_SM90a)
        "9.0 (Hopper) only (configure --with-cuda-arch)";
#else
        "10.0 (Blackwell) only (configure --with-cuda-arch)";
#endif
    snprintf(why, why_len, "device %d has compute capability %d.%d; this build has code for %s", dev, major, minor,
             built);
    return 0;
}

mxfa_status open_ctx(mxfa_ctx *ctx)
{
    cuda_state *s = static_cast<cuda_state *>(calloc(1, sizeof *s));
    if (!s)
        return fail(ctx, MXFA_ERR_NO_MEMORY, "cannot allocate the cuda state");
    cudaError_t e = cudaGetDevice(&s->device);
    if (e == cudaSuccess)
        e = cudaFree(nullptr); // create the primary context now, not inside a timed call
    if (e != cudaSuccess) {
        free(s);
        return cuda_fail(ctx, e, "starting the device");
    }
    ctx->state = s;
    return MXFA_OK;
}

// The scratch the context's calls left in the pool goes back to the driver
// (what a stream still has to free stays: the trim releases only what the
// allocator can release safely, so no wait on a stream the caller may
// already have destroyed).
void close_ctx(mxfa_ctx *ctx)
{
    cuda_state *s = static_cast<cuda_state *>(ctx->state);
    int saved = 0;
    cudaMemPool_t pool;
    if (cudaGetDevice(&saved) == cudaSuccess && cudaSetDevice(s->device) == cudaSuccess) {
        if (device_pool(s->device, &pool) == cudaSuccess)
            cudaMemPoolTrimTo(pool, 0);
        cudaSetDevice(saved);
    }
    free(s);
}

// ---- staging ----

// Bytes from a view's base to the end of its last element.
size_t span_bytes(const mxfa_view &v)
{
    return (size_t)(((v.rows - 1) * v.rs + (v.cols - 1) * v.cs + 1) * esize((int)v.dtype));
}

// Bytes from an n-D view's base to the end of its last element.
size_t span_bytes(const mxfa_view_nd &v)
{
    int64_t last = 0;
    for (int i = 0; i < v.ndim; i++)
        last += (v.shape[i] - 1) * v.stride[i];
    return (size_t)((last + 1) * esize((int)v.dtype));
}

// Runs on the context's device, the caller's current device restored after.
class on_device {
public:
    explicit on_device(mxfa_ctx *ctx) : e_(cudaGetDevice(&saved_))
    {
        if (e_ == cudaSuccess)
            e_ = cudaSetDevice(static_cast<cuda_state *>(ctx->state)->device);
    }
    ~on_device() { cudaSetDevice(saved_); }
    cudaError_t error() const { return e_; }

private:
    int saved_ = 0;
    cudaError_t e_;
};

// One call's work: the views it touches, those in host memory copied
// through device buffers. Use: add every view (outputs marked), begin(),
// launch on the rewritten views, finish().
class call {
public:
    call(mxfa_ctx *c, const char *what) : ctx_(c), what_(what), device_(c)
    {
        stream_ = static_cast<cudaStream_t>(ctx_->stream);
    }
    ~call()
    {
        for (int i = 0; i < n_; i++)
            if (dev_[i])
                cudaFreeAsync(dev_[i], stream_);
        if (staged_)
            cudaStreamSynchronize(stream_);
    }
    // Where a buffer is: as its tensor declared it, or (a raw buffer whose
    // tensor the backend does not see) found out from CUDA.
    enum where { host, device, ask_cuda };
    void add(void **base, size_t bytes, where w, bool output)
    {
        base_[n_] = base;
        bytes_[n_] = bytes;
        where_[n_] = w;
        output_[n_] = output;
        dev_[n_] = nullptr;
        n_++;
    }
    void add(mxfa_view *v, bool output)
    {
        add(&v->base, span_bytes(*v), v->memory == MXFA_MEM_DEVICE ? device : host, output);
    }
    void add(mxfa_view_nd *v, bool output)
    {
        add(&v->base, span_bytes(*v), v->memory == MXFA_MEM_DEVICE ? device : host, output);
    }
    cudaStream_t stream() const { return stream_; }

    mxfa_status begin()
    {
        int dev = static_cast<cuda_state *>(ctx_->state)->device;
        cudaError_t e = device_.error();
        if (e != cudaSuccess)
            return cuda_fail(ctx_, e, what_);
        for (int i = 0; i < n_; i++) {
            cudaPointerAttributes a;
            if ((e = cudaPointerGetAttributes(&a, *base_[i])) != cudaSuccess)
                return cuda_fail(ctx_, e, what_);
            const bool on_device = a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
            if (where_[i] == device) {
                if (!on_device || a.device != dev)
                    return fail(ctx_, MXFA_ERR_INVALID, "%s: a tensor declared as device memory is not memory of "
                                "device %d (it is %s)", what_, dev,
                                a.type == cudaMemoryTypeDevice ? "on another device" : "host memory");
                continue;
            }
            if (where_[i] == ask_cuda && on_device)
                continue;
            // host memory: a device copy of its span, outputs too (the bytes
            // between strided elements must come back as they were)
            if ((e = scratch_alloc(&dev_[i], bytes_[i], stream_)) != cudaSuccess ||
                (e = cudaMemcpyAsync(dev_[i], *base_[i], bytes_[i], cudaMemcpyHostToDevice, stream_)) != cudaSuccess)
                return cuda_fail(ctx_, e, what_);
            host_[i] = *base_[i];
            *base_[i] = dev_[i];
            staged_ = true;
        }
        return MXFA_OK;
    }

    // After the launch: its error, then the staged outputs copied back
    // (waiting for them), and any error of the work itself.
    mxfa_status finish(cudaError_t launched)
    {
        if (launched != cudaSuccess)
            return cuda_fail(ctx_, launched, what_);
        if (!staged_)
            return MXFA_OK;
        cudaError_t e = cudaSuccess;
        // the kernel's own errors first: an output is copied back only whole
        if ((e = cudaStreamSynchronize(stream_)) != cudaSuccess)
            return cuda_fail(ctx_, e, what_);
        for (int i = 0; i < n_; i++)
            if (dev_[i] && output_[i] &&
                (e = cudaMemcpyAsync(host_[i], dev_[i], bytes_[i], cudaMemcpyDeviceToHost, stream_)) != cudaSuccess)
                return cuda_fail(ctx_, e, what_);
        if ((e = cudaStreamSynchronize(stream_)) != cudaSuccess)
            return cuda_fail(ctx_, e, what_);
        return MXFA_OK;
    }

private:
    enum { MAX = 10 };
    mxfa_ctx *ctx_;
    const char *what_;
    cudaStream_t stream_;
    on_device device_; // the context's device until the call ends
    int n_ = 0;
    bool staged_ = false;
    void **base_[MAX];
    void *host_[MAX], *dev_[MAX];
    size_t bytes_[MAX];
    where where_[MAX];
    bool output_[MAX];
};

// ---- operations ----

mxfa_status quantize(mxfa_ctx *ctx, const mxfa_view *x, const mxfa_segment *segs, int nsegs, mxfa_preset preset,
                     mxfa_block block, const mxfa_view *data, const mxfa_view *scales)
{
    mxfa_view xv = *x, dv = *data, sv = *scales;
    call c(ctx, "quantize");
    c.add(&xv, false), c.add(&dv, true), c.add(&sv, true);
    CHECK(c.begin());
    return c.finish(launch_quantize(dview_of(xv), segs, nsegs, (int)preset, (int)block, dview_of(dv), dview_of(sv),
                                    c.stream()));
}

mxfa_status dequantize(mxfa_ctx *ctx, const mxfa_view *data, const mxfa_view *scales, mxfa_block block,
                       const mxfa_view *out)
{
    mxfa_view dv = *data, sv = *scales, ov = *out;
    call c(ctx, "dequantize");
    c.add(&dv, false), c.add(&sv, false), c.add(&ov, true);
    CHECK(c.begin());
    return c.finish(launch_dequantize(dview_of(dv), dview_of(sv), (int)block, dview_of(ov), c.stream()));
}

mxfa_status copy(mxfa_ctx *ctx, const mxfa_view *src, const mxfa_view *dst)
{
    mxfa_view sv = *src, dv = *dst;
    call c(ctx, "copy");
    c.add(&sv, false), c.add(&dv, true);
    CHECK(c.begin());
    return c.finish(launch_copy(dview_of(sv), dview_of(dv), c.stream()));
}

mxfa_status expand(mxfa_ctx *ctx, const mxfa_view *src, int64_t rdiv, int64_t cdiv, const mxfa_view *dst)
{
    mxfa_view sv = *src, dv = *dst;
    call c(ctx, "expand");
    c.add(&sv, false), c.add(&dv, true);
    CHECK(c.begin());
    return c.finish(launch_expand(dview_of(sv), rdiv, cdiv, dview_of(dv), c.stream()));
}

mxfa_status swizzle(mxfa_ctx *ctx, const mxfa_view *index, int axis, const mxfa_segment *segs, int nsegs,
                    uint8_t *swizzled, int64_t sw_rows, int64_t sw_cols)
{
    mxfa_view iv = *index;
    void *sw = swizzled;
    call c(ctx, "swizzle");
    c.add(&iv, false), c.add(&sw, (size_t)(sw_rows * sw_cols), call::ask_cuda, true);
    CHECK(c.begin());
    return c.finish(launch_swizzle(dview_of(iv), axis, segs, nsegs, static_cast<uint8_t *>(sw), sw_rows, sw_cols,
                                   c.stream()));
}

mxfa_status unswizzle(mxfa_ctx *ctx, const uint8_t *swizzled, int64_t sw_rows, int64_t sw_cols, int axis,
                      const mxfa_segment *segs, int nsegs, const mxfa_view *index)
{
    mxfa_view iv = *index;
    void *sw = const_cast<uint8_t *>(swizzled);
    call c(ctx, "unswizzle");
    c.add(&sw, (size_t)(sw_rows * sw_cols), call::ask_cuda, false), c.add(&iv, true);
    CHECK(c.begin());
    return c.finish(launch_unswizzle(static_cast<const uint8_t *>(sw), sw_rows, sw_cols, axis, segs, nsegs,
                                     dview_of(iv), c.stream()));
}

// What the cuda backend does not do yet is refused, never run elsewhere.
mxfa_status not_yet(mxfa_ctx *ctx, const char *what)
{
    return fail(ctx, MXFA_ERR_UNSUPPORTED, "the cuda backend does not do %s yet (use the cpu or ref backend)", what);
}

// MXFA_OK on a Hopper GPU (the sm90 kernels' wgmma); else the reason,
// "op: <needs> a Hopper GPU".
mxfa_status need_hopper(mxfa_ctx *ctx, const char *op, const char *needs)
{
    int major = 0;
    cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                                           static_cast<cuda_state *>(ctx->state)->device);
    if (e != cudaSuccess)
        return cuda_fail(ctx, e, op);
    if (major != 9)
        return fail(ctx, MXFA_ERR_UNSUPPORTED, "%s: %s a Hopper GPU (wgmma); this device has compute capability %d.x",
                    op, needs, major);
    return MXFA_OK;
}

// MXFA_OK on a Blackwell GPU of compute capability 10.0 (the sm100
// kernels' tcgen05); else the reason, "op: <needs> a Blackwell GPU".
mxfa_status need_blackwell(mxfa_ctx *ctx, const char *op, const char *needs)
{
    int major = 0, minor = 0;
    const int dev = static_cast<cuda_state *>(ctx->state)->device;
    cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    if (e != cudaSuccess)
        return cuda_fail(ctx, e, op);
    if (major == 9 && minor == 0)
        return fail(ctx, MXFA_ERR_UNSUPPORTED, "%s: %s a Blackwell GPU of compute capability 10.0 (tcgen05); this "
                    "device is a Hopper GPU (9.0), whose fast model is sm90-bf16: its arithmetic error, like sm100's, "
                    "is negligible beside the quantization's (docs/NUMERICS.md)", op, needs);
    if (major != 10 || minor != 0)
        return fail(ctx, MXFA_ERR_UNSUPPORTED, "%s: %s a Blackwell GPU of compute capability 10.0 (tcgen05); this "
                    "device has %d.%d", op, needs, major, minor);
    return MXFA_OK;
}

// Each model runs on the architecture whose instructions it describes:
// sm90-fp8 and sm90-bf16 on Hopper's wgmma, sm100 on Blackwell's
// block-scaled tcgen05.mma; ideal is refused.
mxfa_status gemm(mxfa_ctx *ctx, mxfa_model model, const mxfa_view *a, const mxfa_view *sa, const mxfa_view *b,
                 const mxfa_view *sb, const mxfa_view *c, const mxfa_view *d)
{
    if (model == MXFA_MODEL_IDEAL)
        return fail(ctx, MXFA_ERR_UNSUPPORTED, "gemm: the cuda backend computes the sm100, sm90-fp8 and sm90-bf16 "
                    "models (use the cpu or ref backend for ideal)");
    if (model == MXFA_MODEL_SM100)
        CHECK(need_blackwell(ctx, "gemm", "the sm100 product needs"));
    else
        CHECK(need_hopper(ctx, "gemm", "the sm90 products need"));
    if (a->rows > INT32_MAX || b->rows > INT32_MAX || a->cols > INT32_MAX)
        return fail(ctx, MXFA_ERR_UNSUPPORTED, "gemm: the cuda backend takes M, N and K below 2^31 (the tensor-memory "
                    "accelerator's coordinates); got %lld x %lld x %lld", (long long)a->rows, (long long)b->rows,
                    (long long)a->cols);
    mxfa_view av = *a, sav = *sa, bv = *b, sbv = *sb, dv = *d, cv = *d;
    // libmxfa lets C and D overlap only as one view
    const bool in_place = c && c->base == d->base;
    call k(ctx, "gemm");
    k.add(&av, false), k.add(&sav, false), k.add(&bv, false), k.add(&sbv, false), k.add(&dv, true);
    if (c && !in_place) {
        cv = *c;
        k.add(&cv, false);
    }
    CHECK(k.begin());
    const dview cd = dview_of(in_place ? dv : cv);
    auto launch = model == MXFA_MODEL_SM100      ? launch_gemm_sm100
                  : model == MXFA_MODEL_SM90_FP8 ? launch_gemm_sm90_fp8
                                                 : launch_gemm_sm90_bf16;
    return k.finish(launch(dview_of(av), dview_of(sav), dview_of(bv), dview_of(sbv), c ? &cd : nullptr, dview_of(dv),
                           k.stream()));
}

nd3 nd3_of(const mxfa_view_nd &v)
{
    return {static_cast<uint8_t *>(v.base), v.shape[0], v.shape[1], v.shape[2], v.stride[0], v.stride[1], v.stride[2],
            (int)v.dtype};
}

// Attention forward runs on Hopper under the sm90 models and on Blackwell
// under sm100; what a kernel does not do is refused with the reason.
mxfa_status attn_fwd(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_view_nd *q, const mxfa_view_nd *k,
                     const mxfa_view_nd *v, const int32_t *cu_q, const int32_t *cu_k, int batch, const mxfa_view_nd *o,
                     const mxfa_view_nd *lse)
{
    if (p->model == MXFA_MODEL_IDEAL)
        return fail(ctx, MXFA_ERR_UNSUPPORTED, "attention: the cuda backend computes the sm90-fp8, sm90-bf16 and sm100 "
                    "models (ideal is exact arithmetic: use the cpu or ref backend)");
    const bool blackwell = p->model == MXFA_MODEL_SM100, bf16 = p->model == MXFA_MODEL_SM90_BF16;
    const int64_t d = q->shape[2];
    if (d != 64 && d != 128 && d != 256)
        return fail(ctx, MXFA_ERR_UNSUPPORTED, "attention: the cuda backend's kernels take D = 64, 128 and 256 "
                    "(got %lld)", (long long)d);
    if (bf16 && (p->block_m != 128 || (p->block_n != 64 && p->block_n != 128)))
        return fail(ctx, MXFA_ERR_UNSUPPORTED, "attention: the sm90-bf16 kernel has query tiles of 128 and key tiles of "
                    "64 or 128 (got block_m %d, block_n %d)", p->block_m, p->block_n);
    if (!bf16 && (p->block_m != 128 || p->block_n != 128))
        return fail(ctx, MXFA_ERR_UNSUPPORTED, "attention: the cuda backend's %s kernel has the geometry 128 x 128 "
                    "(got block_m %d, block_n %d)", blackwell ? "sm100" : "sm90-fp8", p->block_m, p->block_n);
    if (blackwell)
        CHECK(need_blackwell(ctx, "attention", "the sm100 kernel needs"));
    else
        CHECK(need_hopper(ctx, "attention", "the sm90 kernel needs"));
    mxfa_view_nd qv = *q, kv = *k, vv = *v, ov = *o, lv = lse ? *lse : *o;
    call c(ctx, "attention");
    c.add(&qv, false), c.add(&kv, false), c.add(&vv, false), c.add(&ov, true);
    if (lse)
        c.add(&lv, true);
    CHECK(c.begin());
    attn_fwd_args a;
    a.q = nd3_of(qv), a.k = nd3_of(kv), a.v = nd3_of(vv), a.o = nd3_of(ov);
    a.lse = lse ? static_cast<float *>(lv.base) : nullptr;
    a.ls0 = lse ? lv.stride[0] : 0, a.ls1 = lse ? lv.stride[1] : 0;
    a.cu_q = cu_q, a.cu_k = cu_k, a.batch = batch, a.preset = (int)p->preset;
    a.causal = p->causal != MXFA_CAUSAL_NONE, a.leak_free = p->causal == MXFA_CAUSAL;
    a.p_dynamic = p->p_scale == MXFA_P_DYNAMIC;
    a.softmax_scale = p->softmax_scale;
    a.block_n = p->block_n;
    bool refused = false;
    a.refused = &refused;
    const cudaError_t e = blackwell ? launch_attn_fwd_sm100(a, c.stream())
                          : bf16    ? launch_attn_fwd_sm90_bf16(a, c.stream())
                                    : launch_attn_fwd_sm90(a, c.stream());
    if (e == cudaSuccess && refused)
        return fail(ctx, MXFA_ERR_UNSUPPORTED, "attention: under sm100 with dynamic P, V holds a block with non-zero "
                    "values and a scale below 2^-119, which cannot carry P's factor 2^-8 in the hardware's scale bytes "
                    "(use const P, or the cpu or ref backend)");
    return c.finish(e);
}

// Attention backward runs on Hopper under the sm90 models, composed of
// their block-scaled products (gpu/sm90/attn_bwd.cu).
mxfa_status attn_bwd(mxfa_ctx *ctx, const mxfa_attn_params *p, const mxfa_view_nd *q, const mxfa_view_nd *k,
                     const mxfa_view_nd *v, const mxfa_view_nd *o, const mxfa_view_nd *dout, const mxfa_view_nd *lse,
                     const int32_t *cu_q, const int32_t *cu_k, int batch, const mxfa_view_nd *dq,
                     const mxfa_view_nd *dk, const mxfa_view_nd *dv)
{
    if (p->model == MXFA_MODEL_IDEAL)
        return fail(ctx, MXFA_ERR_UNSUPPORTED, "attention backward: the cuda backend computes the sm100, sm90-fp8 and "
                    "sm90-bf16 models (use the cpu or ref backend for ideal)");
    if (p->model == MXFA_MODEL_SM100)
        CHECK(need_blackwell(ctx, "attention backward", "the sm100 products need"));
    else
        CHECK(need_hopper(ctx, "attention backward", "the sm90 products need"));
    mxfa_view_nd qv = *q, kv = *k, vv = *v, ov = *o, gv = *dout, lv = *lse, dqv = *dq, dkv = *dk, dvv = *dv;
    call c(ctx, "attention backward");
    c.add(&qv, false), c.add(&kv, false), c.add(&vv, false), c.add(&ov, false), c.add(&gv, false);
    c.add(&lv, false), c.add(&dqv, true), c.add(&dkv, true), c.add(&dvv, true);
    CHECK(c.begin());
    attn_bwd_args a;
    a.q = nd3_of(qv), a.k = nd3_of(kv), a.v = nd3_of(vv), a.o = nd3_of(ov), a.dout = nd3_of(gv);
    a.dq = nd3_of(dqv), a.dk = nd3_of(dkv), a.dv = nd3_of(dvv);
    a.lse = static_cast<const float *>(lv.base), a.ls0 = lv.stride[0], a.ls1 = lv.stride[1];
    a.cu_q = cu_q, a.cu_k = cu_k, a.batch = batch, a.preset = (int)p->preset;
    a.block_m = p->block_m, a.block_n = p->block_n;
    a.causal = p->causal != MXFA_CAUSAL_NONE, a.leak_free = p->causal == MXFA_CAUSAL;
    a.p_dynamic = p->p_scale == MXFA_P_DYNAMIC;
    a.bf16_model = p->model == MXFA_MODEL_SM90_BF16;
    a.sm100 = p->model == MXFA_MODEL_SM100;
    const uint32_t log2e_bits = 0x3FB8AA3Bu; // fl(log2 e), as the reference takes it
    memcpy(&a.log2e, &log2e_bits, 4);
    a.softmax_scale = p->softmax_scale;
    a.c = p->softmax_scale * a.log2e;
    return c.finish(a.sm100 ? launch_attn_bwd_sm100(a, c.stream()) : launch_attn_bwd_sm90(a, c.stream()));
}

mxfa_status device_info(mxfa_ctx *ctx, int *arch, char *name, size_t name_len)
{
    cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceProperties(&prop, static_cast<cuda_state *>(ctx->state)->device);
    if (e != cudaSuccess)
        return cuda_fail(ctx, e, "device_info");
    if (arch)
        *arch = 10 * prop.major + prop.minor;
    if (name && name_len > 0)
        snprintf(name, name_len, "%s", prop.name);
    return MXFA_OK;
}

// The pool's high-water mark of memory in use: the scratch of every call
// on the device (the caller's tensors come from cudaMalloc, not the pool).
mxfa_status scratch_peak(mxfa_ctx *ctx, size_t *bytes, int reset)
{
    cudaMemPool_t pool;
    unsigned long long high = 0, zero = 0; // (cuuint64_t, as the attribute takes it)
    cudaError_t e = device_pool(static_cast<cuda_state *>(ctx->state)->device, &pool);
    if (e == cudaSuccess)
        e = cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high);
    if (e == cudaSuccess && reset)
        e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero);
    if (e != cudaSuccess)
        return cuda_fail(ctx, e, "scratch_peak");
    *bytes = (size_t)high;
    return MXFA_OK;
}

mxfa_status mma_chain(mxfa_ctx *ctx, mxfa_instr, const mxfa_view *, const mxfa_view *, const mxfa_view *,
                      const mxfa_view *)
{
    return not_yet(ctx, "mxfa_mma_chain");
}

// ---- device memory ----

mxfa_status device_alloc(mxfa_ctx *ctx, size_t bytes, void **ptr)
{
    on_device d(ctx);
    void *p = nullptr;
    cudaError_t e = d.error();
    if (e == cudaSuccess)
        e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess)
        return cuda_fail(ctx, e, "allocating device memory");
    *ptr = p;
    return MXFA_OK;
}

mxfa_status device_free(mxfa_ctx *ctx, void *ptr)
{
    on_device d(ctx);
    cudaError_t e = d.error();
    if (e == cudaSuccess)
        e = cudaFree(ptr);
    return e == cudaSuccess ? MXFA_OK : cuda_fail(ctx, e, "freeing device memory");
}

bool is_device_memory(const void *p)
{
    cudaPointerAttributes a;
    return cudaPointerGetAttributes(&a, p) == cudaSuccess &&
           (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged);
}

// Device to device: enqueued, like every call on device memory; to or from
// the host: done when it returns.
mxfa_status copy_bytes(mxfa_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    on_device d(ctx);
    cudaStream_t s = static_cast<cudaStream_t>(ctx->stream);
    cudaError_t e = d.error();
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s);
    if (e == cudaSuccess && !(is_device_memory(dst) && is_device_memory(src)))
        e = cudaStreamSynchronize(s);
    return e == cudaSuccess ? MXFA_OK : cuda_fail(ctx, e, "copying");
}

mxfa_status synchronize(mxfa_ctx *ctx)
{
    on_device d(ctx);
    cudaError_t e = d.error();
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(static_cast<cudaStream_t>(ctx->stream));
    return e == cudaSuccess ? MXFA_OK : cuda_fail(ctx, e, "the work on the stream");
}

mxfa_backend make_backend()
{
    mxfa_backend b;
    memset(&b, 0, sizeof b);
    b.name = "cuda";
    b.usable = usable;
    b.takes_device_memory = 1;
    b.open = open_ctx;
    b.close = close_ctx;
    b.quantize = quantize;
    b.dequantize = dequantize;
    b.copy = copy;
    b.expand = expand;
    b.swizzle = swizzle;
    b.unswizzle = unswizzle;
    b.gemm = gemm;
    b.attn_fwd = attn_fwd;
    b.attn_bwd = attn_bwd;
    b.mma_chain = mma_chain;
    b.device_alloc = device_alloc;
    b.device_free = device_free;
    b.copy_bytes = copy_bytes;
    b.synchronize = synchronize;
    b.device_info = device_info;
    b.scratch_peak = scratch_peak;
    return b;
}

const mxfa_backend backend = make_backend();

} // namespace
} // namespace mxfa_gpu

extern "C" __attribute__((visibility("default"))) const mxfa_backend *
mxfa_cuda_module_entry(const mxfa_module_abi *abi, char *why, size_t why_len)
{
    const mxfa_module_abi here = MXFA_MODULE_ABI_HERE;
    if (!abi || abi->abi != here.abi || abi->version != here.version || abi->ctx_size != here.ctx_size ||
        abi->backend_size != here.backend_size || abi->view_size != here.view_size) {
        snprintf(why, why_len, "the module was built from another version of mxfa (module %d, library %d)",
                 here.version, abi ? abi->version : -1);
        return nullptr;
    }
    return &mxfa_gpu::backend;
}
