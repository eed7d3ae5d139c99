# SPDX-License-Identifier: BSD-3-Clause
"""mxfa from Python: MXFP8 block-scaled quantization, matrix products and
attention, forward and backward, on numpy arrays and PyTorch tensors.

A thin layer over libmxfa (loaded with ctypes): every result comes from the
C library, bit for bit what its CLI and C API give. Arrays that are already
C-contiguous and of the right dtype are passed without a copy. PyTorch
tensors on the CPU go through numpy; CUDA tensors go to the cuda backend by
device pointer, on the current stream, with outputs allocated on the same
device. docs/PYTHON.md is the tutorial.

dtypes: float32 arrays are f32; uint16 arrays hold bf16 bits (torch.bfloat16
tensors are taken as bf16 directly); FP8 codes and E8M0 scales are uint8.
"""

import atexit
import ctypes
import operator
import sys
import threading
import warnings

import numpy as np

from . import _capi as C

__all__ = [
    "Error", "Context", "MXArray", "backends", "quantize", "dequantize", "transpose", "transpose_square",
    "swizzle", "unswizzle", "scatter", "gather", "gemm", "attn_fwd", "attn_bwd", "attn_fwd_truth",
    "attn_bwd_truth", "compare", "compare_attention", "__version__",
]

__version__ = C.lib.mxfa_version().decode()

_STATUS = {1: "NULL", 2: "INVALID", 3: "SHAPE", 4: "OVERFLOW", 5: "UNSUPPORTED", 6: "ALIAS", 7: "NO_BACKEND",
           8: "NO_MEMORY", 9: "IO", 10: "FORMAT", 11: "NEEDS_SOURCE", 12: "DEVICE", 13: "INTERNAL"}


class Error(Exception):
    """A call that libmxfa refused or that failed. `status` is the mxfa_status
    number, `name` its name without the prefix (for example "SHAPE"), and the
    message is the library's own (mxfa_last_error)."""

    def __init__(self, status, message):
        self.status, self.message = status, message
        self.name = _STATUS.get(status, str(status))
        super().__init__("%s (MXFA_ERR_%s)" % (message, self.name))

    def __reduce__(self):  # picklable, for multiprocessing
        return (Error, (self.status, self.message))


def _check(status, ctx=None):
    if status != 0:
        msg = C.lib.mxfa_last_error(ctx)
        msg = msg.decode() if msg else ""
        if not msg:
            msg = C.lib.mxfa_strerror(status).decode()
        raise Error(status, msg)


def _choice(table, value, what):
    if value not in table:
        raise ValueError("mxfa: %s must be one of %s, got %r" % (what, ", ".join(sorted(table)), value))
    return table[value]


# ---------------------------------------------------------------- contexts

class Context:
    """An open backend ("auto", "ref", "cpu" or "cuda"). Functions take one as
    `backend=`, or a backend's name (then a context of the module is used).
    Usable with `with`; closed at exit otherwise."""

    def __init__(self, backend="auto"):
        if backend is not None and not isinstance(backend, str):
            raise TypeError("mxfa: a backend is named by a string, got %r" % (backend,))
        handle = ctypes.c_void_p()
        _check(C.lib.mxfa_open(ctypes.byref(handle), (backend or "auto").encode()), None)
        self._handle = handle
        # libmxfa takes one call at a time on a context: a stream and a call
        # (and its error message) belong together
        self.lock = threading.Lock()

    @property
    def handle(self):
        if self._handle is None:
            raise ValueError("mxfa: the context is closed")
        return self._handle

    @property
    def name(self):
        """The backend the context runs on ("ref", "cpu", "cuda")."""
        return C.lib.mxfa_backend_name(self.handle).decode()

    def device(self):
        """(compute capability as 10 * major + minor, name); (0, "cpu") off the GPU."""
        arch, name = ctypes.c_int(), ctypes.create_string_buffer(256)
        _check(C.lib.mxfa_device_info(self.handle, ctypes.byref(arch), name, 256), self.handle)
        return arch.value, name.value.decode()

    def close(self):
        if self._handle is not None:
            C.lib.mxfa_close(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "mxfa.Context(%r)" % (self.name if self._handle is not None else "closed")


# The module's contexts: one per thread, backend and CUDA device (a cuda
# context computes on the device current when it is opened).
_local = threading.local()
_all_contexts = []
_all_lock = threading.Lock()


def _context(backend, device=None):
    if isinstance(backend, Context):
        return backend
    if backend is not None and not isinstance(backend, str):
        raise TypeError("mxfa: backend must be a name or an mxfa.Context, got %r" % (backend,))
    key = (backend or "auto", device)
    cache = getattr(_local, "contexts", None)
    if cache is None:
        cache = _local.contexts = {}
    if key not in cache:
        if device is not None:
            with _torch().cuda.device(device):
                cache[key] = Context(key[0])
        else:
            cache[key] = Context(key[0])
        with _all_lock:
            _all_contexts.append(cache[key])
    return cache[key]


@atexit.register
def _close_all():
    with _all_lock:
        for ctx in _all_contexts:
            ctx.close()
        _all_contexts.clear()


def backends():
    """{name: {"built": bool, "usable": bool, "why": str}} for ref, cpu and cuda."""
    out = {}
    for name in ("ref", "cpu", "cuda"):
        why = ctypes.create_string_buffer(512)
        usable = bool(C.lib.mxfa_backend_usable(name.encode(), why, 512))
        out[name] = {"built": bool(C.lib.mxfa_backend_built(name.encode())), "usable": usable,
                     "why": why.value.decode()}
    return out


# ---------------------------------------------------------------- operands

def _torch():
    return sys.modules["torch"]


def _is_torch(x):
    """A PyTorch tensor (torch is never imported here: a tensor means it is)."""
    t = sys.modules.get("torch")
    return t is not None and isinstance(x, t.Tensor)


def _int(name, v, lo=1, hi=2 ** 31 - 1):
    try:
        v = operator.index(v)
    except TypeError:
        raise TypeError("mxfa: %s must be an integer, got %r" % (name, v)) from None
    if not lo <= v <= hi:
        raise ValueError("mxfa: %s must be in [%d, %d], got %d" % (name, lo, hi, v))
    return v


class _Operand:
    """An array as libmxfa sees it: its C view, and what keeps its memory."""

    def __init__(self, keep, ptr, dtype, memory, shape):
        self.keep, self.ptr, self.dtype, self.memory, self.shape = keep, ptr, dtype, memory, tuple(shape)

    def tensor(self):
        t = C.Tensor()
        t.data, t.dtype, t.memory, t.ndim = self.ptr, C.DTYPES[self.dtype], self.memory, len(self.shape)
        for i, n in enumerate(self.shape):
            t.shape[i] = n
        return t  # strides 0: contiguous row-major

    @property
    def cuda(self):
        return self.memory == C.MEM_DEVICE


_NP_CODES = {np.dtype(np.float32): "f32", np.dtype(np.uint16): "bf16", np.dtype(np.float64): "f64",
             np.dtype(np.int32): "i32"}


def _operand(x, name, kinds, ndim=None):
    """x (numpy array, anything numpy takes, or a torch tensor) as an operand
    of one of `kinds` ("f32", "bf16", "u8", "f64"): no copy when it already is
    contiguous and of such a kind; float arrays of another width become f32."""
    if _is_torch(x):
        torch = _torch()
        x = x.detach()
        if x.is_cuda:
            tdt = {torch.float32: "f32", torch.bfloat16: "bf16", torch.uint8: "u8",
                   torch.float64: "f64"}.get(x.dtype)
            if tdt not in kinds and x.dtype.is_floating_point and "f32" in kinds:
                x, tdt = x.float(), "f32"  # as numpy arrays of other float widths are
            if tdt not in kinds:
                raise TypeError("mxfa: %s must be a tensor of %s, got %s" % (name, "/".join(kinds), x.dtype))
            if ndim is not None and x.dim() != ndim:
                raise ValueError("mxfa: %s must have %d dimensions, got %d" % (name, ndim, x.dim()))
            if x.numel() == 0:
                raise ValueError("mxfa: %s is empty" % name)
            x = x.contiguous()
            return _Operand(x, x.data_ptr(), "e4m3" if tdt == "u8" else tdt, C.MEM_DEVICE, x.shape)
        x = x.view(torch.int16).numpy().view(np.uint16) if x.dtype == torch.bfloat16 else x.numpy()
    a = np.asarray(x)
    if a.dtype == np.uint8 and "u8" in kinds:
        kind = "u8"
    elif a.dtype in _NP_CODES and _NP_CODES[a.dtype] in kinds:
        kind = _NP_CODES[a.dtype]
    elif a.dtype.kind == "f" and "f32" in kinds:
        a, kind = a.astype(np.float32), "f32"
    else:
        raise TypeError("mxfa: %s must be an array of %s, got %s" % (name, "/".join(kinds), a.dtype))
    if ndim is not None and a.ndim != ndim:
        raise ValueError("mxfa: %s must have %d dimensions, got %d" % (name, ndim, a.ndim))
    if a.size == 0:
        raise ValueError("mxfa: %s is empty" % name)
    a = np.ascontiguousarray(a)
    return _Operand(a, a.ctypes.data, "e4m3" if kind == "u8" else kind, C.MEM_HOST, a.shape)


_NP_OF = {"f32": np.float32, "bf16": np.uint16, "u8": np.uint8, "f64": np.float64}


def _output(like, shape, kind):
    """A new output of `kind` beside `like` (an _Operand): numpy on the host,
    a torch tensor on like's device."""
    if like.cuda:
        torch = _torch()
        tdt = {"f32": torch.float32, "bf16": torch.bfloat16, "u8": torch.uint8, "f64": torch.float64}[kind]
        t = torch.empty(tuple(shape), dtype=tdt, device=like.keep.device)
        return _Operand(t, t.data_ptr(), "e4m3" if kind == "u8" else kind, C.MEM_DEVICE, shape)
    a = np.empty(tuple(shape), dtype=_NP_OF[kind])
    return _Operand(a, a.ctypes.data, "e4m3" if kind == "u8" else kind, C.MEM_HOST, shape)


def _result(op, torch_like):
    """The array to hand back: a torch tensor when the inputs were torch
    tensors on the CPU (numpy's memory shared), else as made."""
    if op.cuda or not torch_like:
        return op.keep
    torch = _torch()
    if op.dtype == "bf16":
        return torch.from_numpy(op.keep.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(op.keep)


def _run(backend, operands, call):
    """call(handle) on a context of `backend`, its status checked under the
    context's lock. With CUDA tensors: the cuda backend ("auto" picks it) on
    their device, on that device's current stream."""
    devices = {o.keep.device for o in operands if o.cuda}
    if not devices:
        ctx = _context(backend)
        with ctx.lock:
            _check(call(ctx.handle), ctx.handle)
        return
    if len(devices) > 1 or any(not o.cuda for o in operands):
        raise ValueError("mxfa: all tensors of a call must be on one CUDA device")
    device = devices.pop()
    if backend in (None, "auto"):
        backend = "cuda"
    ctx = _context(backend, device.index)
    if ctx.name != "cuda":
        raise ValueError("mxfa: CUDA tensors need the cuda backend, not %s" % ctx.name)
    torch = _torch()
    with torch.cuda.device(device), ctx.lock:
        stream = torch.cuda.current_stream(device).cuda_stream
        _check(C.lib.mxfa_set_stream(ctx.handle, ctypes.c_void_p(stream)), ctx.handle)
        try:
            _check(call(ctx.handle), ctx.handle)
        finally:  # the context's later calls go to the default stream again
            C.lib.mxfa_set_stream(ctx.handle, None)


def _seqlens(cu, name):
    """batch + 1 token offsets as int32 (the library checks their order)."""
    if cu is None:
        return None, 0
    if _is_torch(cu):
        cu = cu.detach().cpu().numpy()
    a = np.asarray(cu)
    if a.ndim != 1 or a.size < 2:
        raise ValueError("mxfa: %s must be a 1-D array of batch + 1 token offsets" % name)
    if a.dtype.kind not in "iu":
        raise TypeError("mxfa: %s must hold integers, got %s" % (name, a.dtype))
    if a.min() < 0 or a.max() > 2 ** 31 - 1:
        raise ValueError("mxfa: %s holds offsets outside [0, 2^31 - 1]" % name)
    return np.ascontiguousarray(a, dtype=np.int32), a.size - 1


def _batch(cu_seqlens_q, cu_seqlens_k):
    cq, bq = _seqlens(cu_seqlens_q, "cu_seqlens_q")
    ck, bk = _seqlens(cu_seqlens_k, "cu_seqlens_k")
    if (cq is None) != (ck is None) or bq != bk:
        raise ValueError("mxfa: cu_seqlens_q and cu_seqlens_k go together, with the same batch")
    return cq, ck, bq if cq is not None else 1


def _i32p(a):
    return None if a is None else a.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))


# ---------------------------------------------------------------- MXFP8 arrays

class MXArray:
    """An MXFP8 matrix: `data` (uint8 codes, the source's shape), `scales`
    (uint8 E8M0 bytes), `block` ("row", "col", "square"), `fmt` ("e4m3" or
    "e5m2") and `layout` ("compact" or "swizzled")."""

    def __init__(self, data, scales, block="row", fmt="e4m3", layout="compact"):
        self.data, self.scales, self.block, self.fmt, self.layout = data, scales, block, fmt, layout

    def _struct(self, name):
        d = _operand(self.data, name + ".data", ("u8",), 2)
        s = _operand(self.scales, name + ".scales", ("u8",), 2)
        d.dtype = _choice({"e4m3": "e4m3", "e5m2": "e5m2"}, self.fmt, name + ".fmt")
        m = C.MX()
        m.data, m.scales = d.tensor(), s.tensor()
        m.scales.dtype = C.DTYPES["e8m0"]
        m.block = _choice(C.BLOCKS, self.block, name + ".block")
        m.layout = _choice(C.LAYOUTS, self.layout, name + ".layout")
        return m, (d, s)

    def __repr__(self):
        return "mxfa.MXArray(%s, %s blocks, %s, data %s, scales %s)" % (
            self.fmt, self.block, self.layout, tuple(self.data.shape), tuple(self.scales.shape))


def _scales_shape(block, rows, cols):
    r, c = ctypes.c_int64(), ctypes.c_int64()
    _check(C.lib.mxfa_scales_shape(C.BLOCKS[block], rows, cols, ctypes.byref(r), ctypes.byref(c)))
    return r.value, c.value


def quantize(x, block="row", preset="rceil", fmt="e4m3", cu_seqlens=None, backend=None):
    """x [rows, cols] (float32, or bf16) to MXFP8 with compact scales. With
    cu_seqlens (batch + 1 token offsets) the rows are a jagged batch: col and
    square blocks restart at every sequence (mxfa_quantize_jagged)."""
    op = _operand(x, "x", ("f32", "bf16"), 2)
    rows, cols = op.shape
    b, p = _choice(C.BLOCKS, block, "block"), _choice(C.PRESETS, preset, "preset")
    _choice({"e4m3": 0, "e5m2": 0}, fmt, "fmt")
    cu, batch = _seqlens(cu_seqlens, "cu_seqlens")
    srows, scols = _scales_shape(block, rows, cols)
    if cu is not None and block != "row":
        n = ctypes.c_int64()
        _check(C.lib.mxfa_jagged_scale_rows(_i32p(cu), batch, ctypes.byref(n)))
        srows = n.value
    data, scales = _output(op, (rows, cols), "u8"), _output(op, (srows, scols), "u8")
    m = C.MX()
    m.data, m.scales = data.tensor(), scales.tensor()
    m.data.dtype, m.scales.dtype, m.block, m.layout = C.DTYPES[fmt], C.DTYPES["e8m0"], b, 0
    t = op.tensor()
    if cu is None:
        _run(backend, [op, data, scales], lambda h: C.lib.mxfa_quantize(h, ctypes.byref(t), p, ctypes.byref(m)))
    else:
        _run(backend, [op, data, scales],
             lambda h: C.lib.mxfa_quantize_jagged(h, ctypes.byref(t), _i32p(cu), batch, p, ctypes.byref(m)))
    tl = _is_torch(x)
    return MXArray(_result(data, tl), _result(scales, tl), block, fmt, "compact")


def dequantize(mx, dtype="f32", backend=None):
    """The values of an MXFP8 matrix (compact scales), as float32 or bf16
    (uint16 bits; torch.bfloat16 for torch input), each rounded once."""
    kind = _choice({"f32": "f32", "bf16": "bf16"}, dtype, "dtype")
    m, keep = mx._struct("mx")
    out = _output(keep[0], keep[0].shape, kind)
    t = out.tensor()
    _run(backend, list(keep) + [out], lambda h: C.lib.mxfa_dequantize(h, ctypes.byref(m), ctypes.byref(t)))
    return _result(out, _is_torch(mx.data))


def transpose(mx, block=None, backend=None):
    """The MXFP8 form of X^T from that of X, a byte permutation (no
    rounding): square -> square, row -> col, col -> row (the default for
    `block`). row -> row and col -> col need the source data: Error
    NEEDS_SOURCE."""
    block = block or {"square": "square", "row": "col", "col": "row"}.get(mx.block, mx.block)
    _choice(C.BLOCKS, block, "block")
    m, keep = mx._struct("mx")
    rows, cols = keep[0].shape
    srows, scols = _scales_shape(block, cols, rows)
    data, scales = _output(keep[0], (cols, rows), "u8"), _output(keep[0], (srows, scols), "u8")
    o = C.MX()
    o.data, o.scales = data.tensor(), scales.tensor()
    o.data.dtype, o.scales.dtype, o.block, o.layout = C.DTYPES[mx.fmt], C.DTYPES["e8m0"], C.BLOCKS[block], 0
    _run(backend, list(keep) + [data, scales], lambda h: C.lib.mxfa_transpose(h, ctypes.byref(m), ctypes.byref(o)))
    tl = _is_torch(mx.data)
    return MXArray(_result(data, tl), _result(scales, tl), block, mx.fmt, "compact")


def transpose_square(mx, backend=None):
    """transpose() of a square-blocked matrix: exact, blocks are transpose-invariant."""
    if mx.block != "square":
        raise ValueError("mxfa: transpose_square takes square blocks, got %s" % mx.block)
    return transpose(mx, "square", backend)


def _layout_call(fn, src, shape, args, backend):
    op = _operand(src, "scales", ("u8",), 2)
    out = _output(op, shape, "u8")
    t, o = op.tensor(), out.tensor()
    t.dtype = o.dtype = C.DTYPES["e8m0"]
    _run(backend, [op, out], lambda h: fn(h, ctypes.byref(t), *args, ctypes.byref(o)))
    return _result(out, _is_torch(src))


def swizzle(scales, block, rows, cols, backend=None):
    """Compact row or col scales of a source [rows, cols] in the swizzled
    layout (128 x 4 atoms of 512 bytes, padding zero)."""
    b = _choice(C.BLOCKS, block, "block")
    rows, cols = _int("rows", rows), _int("cols", cols)
    r, c = ctypes.c_int64(), ctypes.c_int64()
    _check(C.lib.mxfa_swizzled_shape(b, rows, cols, ctypes.byref(r), ctypes.byref(c)))
    return _layout_call(C.lib.mxfa_scales_swizzle, scales, (r.value, c.value), (b, rows, cols), backend)


def unswizzle(swizzled, block, rows, cols, backend=None):
    """The inverse of swizzle()."""
    b = _choice(C.BLOCKS, block, "block")
    rows, cols = _int("rows", rows), _int("cols", cols)
    return _layout_call(C.lib.mxfa_scales_unswizzle, swizzled, _scales_shape(block, rows, cols), (b, rows, cols),
                        backend)


def _jagged(cu_seqlens, block, cols):
    """The checked arguments of scatter and gather, and the padded offsets
    (the library checks the offsets' order here, before any allocation)."""
    if cu_seqlens is None:
        raise ValueError("mxfa: cu_seqlens is required (batch + 1 token offsets)")
    cu, batch = _seqlens(cu_seqlens, "cu_seqlens")
    _choice({"row": 0, "col": 1}, block, "block")
    cols = _int("cols", cols)
    sf = (ctypes.c_int64 * (batch + 1))()
    _check(C.lib.mxfa_jagged_sf_offsets(_i32p(cu), batch, sf))
    return cu, batch, cols, sf[batch]


def scatter(scales, cu_seqlens, block, cols, backend=None):
    """Compact jagged scales (row or col blocks of a jagged [tokens, cols])
    into the padded swizzled layout, each sequence from a 128-aligned row."""
    cu, batch, cols, padded = _jagged(cu_seqlens, block, cols)
    r, c = (padded, (cols + 31) // 32) if block == "row" else (cols, padded // 32)
    return _layout_call(C.lib.mxfa_scales_scatter, scales, ((r + 127) // 128 * 128, (c + 3) // 4 * 4),
                        (_i32p(cu), batch, C.BLOCKS[block], cols), backend)


def gather(swizzled, cu_seqlens, block, cols, backend=None):
    """The inverse of scatter()."""
    cu, batch, cols, _ = _jagged(cu_seqlens, block, cols)
    if block == "row":
        shape = (int(cu[-1]), (cols + 31) // 32)
    else:
        n = ctypes.c_int64()
        _check(C.lib.mxfa_jagged_scale_rows(_i32p(cu), batch, ctypes.byref(n)))
        shape = (n.value, cols)
    return _layout_call(C.lib.mxfa_scales_gather, swizzled, shape, (_i32p(cu), batch, C.BLOCKS[block], cols),
                        backend)


# ---------------------------------------------------------------- products

def gemm(a, b, c=None, model="sm100", backend=None):
    """D = A B^T + C under a tensor-core model ("ideal", "sm100", "sm90-fp8",
    "sm90-bf16"): A [M, K] and B [N, K] MXFP8 row-blocked (compact), C
    float32 [M, N] or None. Returns D, float32 [M, N]."""
    md = _choice(C.MODELS, model, "model")
    ma, ka = a._struct("a")
    mb, kb = b._struct("b")
    ops = list(ka) + list(kb)
    cop = None
    if c is not None:
        cop = _operand(c, "c", ("f32",), 2)
        ops.append(cop)
    d = _output(ka[0], (ka[0].shape[0], kb[0].shape[0]), "f32")
    ct = cop.tensor() if cop is not None else None
    dt = d.tensor()
    _run(backend, ops + [d], lambda h: C.lib.mxfa_gemm(h, ctypes.byref(ma), ctypes.byref(mb),
                                                 ctypes.byref(ct) if ct is not None else None, md, ctypes.byref(dt)))
    return _result(d, _is_torch(a.data))


# ---------------------------------------------------------------- attention

def _params(model, preset, p_scale, causal, softmax_scale, block_m, block_n):
    p = C.AttnParams()
    C.lib.mxfa_attn_params_default(ctypes.byref(p))
    p.model = _choice(C.MODELS, model, "model")
    p.preset = _choice(C.PRESETS, preset, "preset")
    p.p_scale = _choice(C.P_SCALES, p_scale, "p_scale")
    if causal is True:
        causal = "leak-free"
    elif causal is False or causal is None:
        causal = "none"
    p.causal = _choice(C.CAUSAL, causal, "causal")
    p.softmax_scale = float(softmax_scale or 0.0)
    p.block_m = _int("block_m", block_m or 0, 0, 2 ** 31 - 1)  # 0: the default; the library checks the rest
    p.block_n = _int("block_n", block_n or 0, 0, 2 ** 31 - 1)
    return p


def _qkv(q, k, v, kinds=("f32", "bf16")):
    return [_operand(x, n, kinds, 3) for x, n in ((q, "q"), (k, "k"), (v, "v"))]


def attn_fwd(q, k, v, cu_seqlens_q=None, cu_seqlens_k=None, *, model="sm100", preset="rceil", p_scale="const",
             causal="none", softmax_scale=0.0, block_m=0, block_n=0, out_dtype="f32", backend=None):
    """MXFP8 attention forward. q [tokens_q, Hq, D], k and v [tokens_k, Hkv,
    D] (float32 or bf16); a jagged batch with cu_seqlens_q/_k. causal: "none",
    "leak-free" (or True) or "plain". Returns (O [tokens_q, Hq, D] of
    out_dtype, LSE float32 [tokens_q, Hq])."""
    p = _params(model, preset, p_scale, causal, softmax_scale, block_m, block_n)
    qo, ko, vo = _qkv(q, k, v)
    cq, ck, batch = _batch(cu_seqlens_q, cu_seqlens_k)
    o = _output(qo, qo.shape, _choice({"f32": "f32", "bf16": "bf16"}, out_dtype, "out_dtype"))
    lse = _output(qo, qo.shape[:2], "f32")
    t = [x.tensor() for x in (qo, ko, vo, o, lse)]
    _run(backend, [qo, ko, vo, o, lse], lambda h: C.lib.mxfa_attn_fwd(
        h, ctypes.byref(p), ctypes.byref(t[0]), ctypes.byref(t[1]), ctypes.byref(t[2]), _i32p(cq),
        _i32p(ck), batch, ctypes.byref(t[3]), ctypes.byref(t[4])))
    tl = _is_torch(q)
    return _result(o, tl), _result(lse, tl)


def attn_bwd(q, k, v, o, dout, lse, cu_seqlens_q=None, cu_seqlens_k=None, *, model="sm100", preset="rceil",
             p_scale="const", causal="none", softmax_scale=0.0, block_m=0, block_n=0, grad_dtype="f32",
             backend=None):
    """MXFP8 attention backward: the gradients of sum(O * dO) from the
    forward pass's O and LSE. Returns (dQ, dK, dV) of grad_dtype."""
    p = _params(model, preset, p_scale, causal, softmax_scale, block_m, block_n)
    qo, ko, vo = _qkv(q, k, v)
    oo, go = _operand(o, "o", ("f32", "bf16"), 3), _operand(dout, "dout", ("f32", "bf16"), 3)
    lo = _operand(lse, "lse", ("f32",), 2)
    cq, ck, batch = _batch(cu_seqlens_q, cu_seqlens_k)
    kind = _choice({"f32": "f32", "bf16": "bf16"}, grad_dtype, "grad_dtype")
    dq, dk, dv = _output(qo, qo.shape, kind), _output(ko, ko.shape, kind), _output(ko, ko.shape, kind)
    t = [x.tensor() for x in (qo, ko, vo, oo, go, lo, dq, dk, dv)]
    r = [ctypes.byref(x) for x in t]
    _run(backend, [qo, ko, vo, oo, go, lo, dq, dk, dv], lambda h: C.lib.mxfa_attn_bwd(
        h, ctypes.byref(p), r[0], r[1], r[2], r[3], r[4], r[5], _i32p(cq), _i32p(ck), batch, r[6], r[7],
        r[8]))
    tl = _is_torch(q)
    return _result(dq, tl), _result(dk, tl), _result(dv, tl)


def attn_fwd_truth(q, k, v, cu_seqlens_q=None, cu_seqlens_k=None, *, causal="none", softmax_scale=0.0,
                   backend=None):
    """The same attention in float64 without quantization (the truth a study
    measures against): (O, LSE) as float64. Host arrays only."""
    p = _params("sm100", "rceil", "const", causal, softmax_scale, 0, 0)
    qo, ko, vo = _qkv(q, k, v)
    if qo.cuda:
        raise ValueError("mxfa: the float64 truth runs on host arrays")
    cq, ck, batch = _batch(cu_seqlens_q, cu_seqlens_k)
    o, lse = _output(qo, qo.shape, "f64"), _output(qo, qo.shape[:2], "f64")
    t = [x.tensor() for x in (qo, ko, vo, o, lse)]
    _run(backend, [qo, ko, vo, o, lse], lambda h: C.lib.mxfa_attn_fwd_f64(
        h, ctypes.byref(p), ctypes.byref(t[0]), ctypes.byref(t[1]), ctypes.byref(t[2]), _i32p(cq),
        _i32p(ck), batch, ctypes.byref(t[3]), ctypes.byref(t[4])))
    return o.keep, lse.keep


def attn_bwd_truth(q, k, v, dout, cu_seqlens_q=None, cu_seqlens_k=None, *, causal="none", softmax_scale=0.0,
                   backend=None):
    """The float64 gradients of the float64 forward pass: (dQ, dK, dV)."""
    p = _params("sm100", "rceil", "const", causal, softmax_scale, 0, 0)
    qo, ko, vo = _qkv(q, k, v)
    go = _operand(dout, "dout", ("f32", "bf16"), 3)
    if qo.cuda:
        raise ValueError("mxfa: the float64 truth runs on host arrays")
    cq, ck, batch = _batch(cu_seqlens_q, cu_seqlens_k)
    dq, dk, dv = _output(qo, qo.shape, "f64"), _output(ko, ko.shape, "f64"), _output(ko, ko.shape, "f64")
    t = [x.tensor() for x in (qo, ko, vo, go, dq, dk, dv)]
    r = [ctypes.byref(x) for x in t]
    _run(backend, [qo, ko, vo, go, dq, dk, dv], lambda h: C.lib.mxfa_attn_bwd_f64(
        h, ctypes.byref(p), r[0], r[1], r[2], r[3], _i32p(cq), _i32p(ck), batch, r[4], r[5], r[6]))
    return dq.keep, dk.keep, dv.keep


_UNMATCHED = np.iinfo(np.int64).max


def _ulp_distances(x, y):
    """Per element of two float32 arrays, the distance in ULPs (two NaNs are
    0 apart), or _UNMATCHED where a NaN or Inf on one side is not the
    other's (mxfa compare's counts)."""
    bx, by = x.view(np.int32).astype(np.int64), y.view(np.int32).astype(np.int64)
    ox = np.where(bx < 0, -(bx & 0x7FFFFFFF) - 1, bx)
    oy = np.where(by < 0, -(by & 0x7FFFFFFF) - 1, by)
    nx, ny = np.isnan(x), np.isnan(y)
    inf = np.isinf(x) | np.isinf(y)
    unmatched = (nx != ny) | (inf & ~(nx | ny) & (x != y))
    return np.where(unmatched, _UNMATCHED, np.where(nx & ny, 0, np.abs(ox - oy)))


def _ulps(x, y):
    """Identical words and ULP distances of two float32 arrays (mxfa
    compare's counts)."""
    dist = _ulp_distances(x, y)
    d = dist[dist != _UNMATCHED]
    return {"identical": int((x.view(np.int32) == y.view(np.int32)).sum()), "max_ulp": int(d.max()) if d.size else 0,
            "median_ulp": int(np.sort(d)[d.size // 2]) if d.size else 0,
            "ulp_unmatched": int((dist == _UNMATCHED).sum())}


def compare(out, ref):
    """Error metrics of out against ref (same shape; float32, bf16 or
    float64, host), as mxfa_compare gives them, in a dict:
    - "rel_l2", "max_abs", "cosine", "sqnr_db": over the pairs of finite
      values;
    - "count": those pairs; "skipped": pairs equal and not finite (the -Inf
      LSE of an empty row); "mismatched_nonfinite": values that differ from
      ref and are NaN/Inf on one side or both;
    - "measured": False when no error can be measured, because some value is
      NaN/Inf where ref differs or no pair is finite. The four metrics are
      then nan, never a score, and a RuntimeWarning says why;
    - where both are float32, as `mxfa compare` counts them: "identical"
      (words equal bit for bit), "max_ulp" and "median_ulp" (the distance in
      ULPs over the pairs where neither side is NaN/Inf unmatched; two NaNs
      are 0 apart) and "ulp_unmatched" (a NaN or Inf on one side only, or
      Infs of opposite signs)."""
    a, b = _operand(out, "out", ("f32", "bf16", "f64")), _operand(ref, "ref", ("f32", "bf16", "f64"))
    if a.cuda or b.cuda:
        raise ValueError("mxfa: compare takes host arrays")
    if len(a.shape) > C.MAX_DIMS:
        raise ValueError("mxfa: compare takes at most %d dimensions" % C.MAX_DIMS)
    m = C.Metrics()
    ta, tb = a.tensor(), b.tensor()
    _check(C.lib.mxfa_compare(ctypes.byref(ta), ctypes.byref(tb), ctypes.byref(m)))
    r = {name: getattr(m, name) for name, _ in C.Metrics._fields_}
    r["measured"] = m.mismatched_nonfinite == 0 and m.count > 0
    if a.dtype == b.dtype == "f32":
        r.update(_ulps(np.asarray(a.keep).ravel(), np.asarray(b.keep).ravel()))
    n = m.count + m.skipped + m.mismatched_nonfinite
    if m.mismatched_nonfinite:
        warnings.warn("mxfa.compare: %d of %d values differ from ref and are NaN/Inf on one side or both: no error "
                      "can be measured, the metrics are nan" % (m.mismatched_nonfinite, n), RuntimeWarning, 2)
    elif m.count == 0:
        warnings.warn("mxfa.compare: no pair of values is finite (%d NaN/Inf on both sides): nothing to measure, "
                      "the metrics are nan" % n, RuntimeWarning, 2)
    return r


def _host_f32(x, name):
    """x as a float32 numpy array on the host (bf16 widened exactly)."""
    if _is_torch(x):
        torch = _torch()
        x = x.detach().cpu()
        x = x.float() if x.dtype in (torch.bfloat16, torch.float16) else x
        x = x.numpy()
    a = np.asarray(x)
    if a.dtype == np.uint16:  # bf16 bits
        return (a.astype(np.uint32) << 16).view(np.float32)
    if a.dtype.kind != "f":
        raise TypeError("mxfa: %s must hold floats, got %s" % (name, a.dtype))
    return np.ascontiguousarray(a, dtype=np.float32)


def compare_attention(q, k, v, out=None, lse=None, cu_seqlens_q=None, cu_seqlens_k=None, *, dout=None, dq=None,
                      dk=None, dv=None, o=None, max_ulp=0, model="sm100", preset="rceil", p_scale="const",
                      causal="none", softmax_scale=0.0, block_m=0, block_n=0, out_dtype="f32", backend="cpu",
                      worst=5):
    """`mxfa compare` in Python: a candidate's attention outputs against the
    emulator's for the same inputs and options (attn_fwd's). Forward: the
    candidate's `out` (and `lse`); backward: `dout` and the candidate's `dq`,
    `dk`, `dv` (with `o` and `lse`, the forward outputs its backward used, or
    the emulator's). Returns {"outputs": {name: report}, "within": bool}: a
    report holds compare()'s word and ULP counts, "max_abs" and "max_rel"
    (against the emulator's value), "rel_l2_candidate" and "rel_l2_emulator"
    (each against the float64 truth) and "worst", the positions (token,
    head, column) that differ most. "within": every word within max_ulp of
    the emulator's, a NaN only against a NaN."""
    backward = dout is not None
    if backward == (out is not None) or (backward and (dq is None or dk is None or dv is None)):
        raise ValueError("mxfa: give out (and lse) for the forward pass, or dout, dq, dk and dv for the backward")
    if backward and (o is None) != (lse is None):
        raise ValueError("mxfa: give both o and lse for the backward pass, or neither")
    opts = dict(model=model, preset=preset, p_scale=p_scale, causal=causal, softmax_scale=softmax_scale,
                block_m=block_m, block_n=block_n, backend=backend)
    qh, kh, vh = (_host_f32(x, n) for x, n in ((q, "q"), (k, "k"), (v, "v")))
    truth = dict(causal=causal, softmax_scale=softmax_scale, backend=backend)
    if not backward:
        eo, el = attn_fwd(qh, kh, vh, cu_seqlens_q, cu_seqlens_k, out_dtype=out_dtype, **opts)
        to, tl = attn_fwd_truth(qh, kh, vh, cu_seqlens_q, cu_seqlens_k, **truth)
        pairs = [("O", out, eo, to)] + ([("LSE", lse, el, tl)] if lse is not None else [])
    else:
        doh = _host_f32(dout, "dout")
        if o is None:
            oh, lh = attn_fwd(qh, kh, vh, cu_seqlens_q, cu_seqlens_k, **opts)
        else:
            oh, lh = _host_f32(o, "o"), _host_f32(lse, "lse")
        g = attn_bwd(qh, kh, vh, oh, doh, lh, cu_seqlens_q, cu_seqlens_k, grad_dtype=out_dtype, **opts)
        t = attn_bwd_truth(qh, kh, vh, doh, cu_seqlens_q, cu_seqlens_k, **truth)
        pairs = list(zip(("dQ", "dK", "dV"), (dq, dk, dv), g, t))
    reports, within = {}, True
    for name, cand, emu, tru in pairs:
        c, e = _host_f32(cand, name), _host_f32(emu, name)
        if c.shape != e.shape:
            raise ValueError("mxfa: the candidate's %s has shape %s, the emulator's %s" % (name, c.shape, e.shape))
        r = _ulps(c.ravel(), e.ravel())
        fin = np.isfinite(c) & np.isfinite(e)
        diff = np.zeros(c.shape)  # over the finite pairs only: Inf - Inf is no difference to report
        diff[fin] = np.abs(c[fin].astype(np.float64) - e[fin].astype(np.float64))
        r["max_abs"] = float(diff[fin].max()) if fin.any() else 0.0
        nz = fin & (e != 0)
        r["max_rel"] = float((diff[nz] / np.abs(e[nz].astype(np.float64))).max()) if nz.any() else 0.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            r["rel_l2_candidate"] = compare(c, tru)["rel_l2"]
            r["rel_l2_emulator"] = compare(e, tru)["rel_l2"]
        cf, ef = c.ravel(), e.ravel()
        d = _ulp_distances(cf, ef)
        order = [i for i in np.argsort(-d, kind="stable")[:worst] if d[i] > 0]
        r["worst"] = [tuple(int(x) for x in np.unravel_index(i, c.shape)) + (float(cf[i]), float(ef[i]),
                      None if d[i] == _UNMATCHED else int(d[i])) for i in order]
        within &= r["ulp_unmatched"] == 0 and r["max_ulp"] <= max_ulp
        reports[name] = r
    return {"outputs": reports, "within": bool(within)}
