# SPDX-License-Identifier: BSD-3-Clause
"""The C library through ctypes: loading libmxfa, its structures and the
prototypes of the functions the package calls. Nothing here computes; every
result comes from libmxfa."""

import ctypes
import ctypes.util
import os
import sys

try:  # written by make: where `make install` puts libmxfa, and its version
    from ._paths import LIBDIR, VERSION
except ImportError:  # the source tree, not built
    LIBDIR, VERSION = None, None

MAX_DIMS = 4

# enums of mxfa.h
DTYPES = {"f32": 0, "bf16": 1, "e4m3": 2, "e5m2": 3, "e8m0": 4, "f64": 5, "i32": 6}
MEM_HOST, MEM_DEVICE = 0, 1
BLOCKS = {"row": 0, "col": 1, "square": 2}
PRESETS = {"rceil": 0, "ocp": 1, "torchao-rceil": 2, "microxcaling": 3}
LAYOUTS = {"compact": 0, "swizzled": 1}
MODELS = {"ideal": 0, "sm100": 1, "sm90-fp8": 2, "sm90-bf16": 3}
P_SCALES = {"const": 0, "dynamic": 1}
CAUSAL = {"none": 0, "leak-free": 1, "plain": 2}


class Tensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int),
        ("memory", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("shape", ctypes.c_int64 * MAX_DIMS),
        ("stride", ctypes.c_int64 * MAX_DIMS),
    ]


class MX(ctypes.Structure):
    _fields_ = [("data", Tensor), ("scales", Tensor), ("block", ctypes.c_int), ("layout", ctypes.c_int)]


class AttnParams(ctypes.Structure):
    _fields_ = [
        ("model", ctypes.c_int),
        ("preset", ctypes.c_int),
        ("p_scale", ctypes.c_int),
        ("causal", ctypes.c_int),
        ("softmax_scale", ctypes.c_float),
        ("block_m", ctypes.c_int),
        ("block_n", ctypes.c_int),
    ]


class Metrics(ctypes.Structure):
    _fields_ = [
        ("rel_l2", ctypes.c_double),
        ("max_abs", ctypes.c_double),
        ("cosine", ctypes.c_double),
        ("sqnr_db", ctypes.c_double),
        ("count", ctypes.c_int64),
        ("skipped", ctypes.c_int64),
        ("mismatched_nonfinite", ctypes.c_int64),
    ]


_SONAME = {"darwin": "libmxfa.0.dylib", "win32": "mxfa.dll"}.get(sys.platform, "libmxfa.so.0")


def _candidates():
    """Where libmxfa may be, in order: $MXFA_LIBRARY, next to the package,
    the library directory it was installed with, the usual search path."""
    env = os.environ.get("MXFA_LIBRARY")
    if env:
        yield env
        return
    yield os.path.join(os.path.dirname(os.path.abspath(__file__)), _SONAME)
    if LIBDIR:
        yield os.path.join(LIBDIR, _SONAME)
    found = ctypes.util.find_library("mxfa")
    if found:
        yield found
    yield _SONAME


def _load():
    tried = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError(
        "mxfa: cannot load libmxfa; tried " + "; ".join(tried) +
        ". Install mxfa (make install), add its library directory to the library path, "
        "or set MXFA_LIBRARY to the library's file")


lib = _load()

_P = ctypes.POINTER
_S = ctypes.c_int  # mxfa_status
_i32p = _P(ctypes.c_int32)
_ctx = ctypes.c_void_p

_PROTOTYPES = {
    "mxfa_version": (ctypes.c_char_p, []),
    "mxfa_strerror": (ctypes.c_char_p, [ctypes.c_int]),
    "mxfa_open": (_S, [_P(ctypes.c_void_p), ctypes.c_char_p]),
    "mxfa_close": (None, [_ctx]),
    "mxfa_set_stream": (_S, [_ctx, ctypes.c_void_p]),
    "mxfa_synchronize": (_S, [_ctx]),
    "mxfa_backend_name": (ctypes.c_char_p, [_ctx]),
    "mxfa_device_info": (_S, [_ctx, _P(ctypes.c_int), ctypes.c_char_p, ctypes.c_size_t]),
    "mxfa_last_error": (ctypes.c_char_p, [_ctx]),
    "mxfa_backend_built": (ctypes.c_int, [ctypes.c_char_p]),
    "mxfa_backend_usable": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]),
    "mxfa_scales_shape": (_S, [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, _P(ctypes.c_int64), _P(ctypes.c_int64)]),
    "mxfa_quantize": (_S, [_ctx, _P(Tensor), ctypes.c_int, _P(MX)]),
    "mxfa_quantize_jagged": (_S, [_ctx, _P(Tensor), _i32p, ctypes.c_int, ctypes.c_int, _P(MX)]),
    "mxfa_jagged_scale_rows": (_S, [_i32p, ctypes.c_int, _P(ctypes.c_int64)]),
    "mxfa_dequantize": (_S, [_ctx, _P(MX), _P(Tensor)]),
    "mxfa_transpose": (_S, [_ctx, _P(MX), _P(MX)]),
    "mxfa_swizzled_shape": (_S, [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, _P(ctypes.c_int64), _P(ctypes.c_int64)]),
    "mxfa_scales_swizzle": (_S, [_ctx, _P(Tensor), ctypes.c_int, ctypes.c_int64, ctypes.c_int64, _P(Tensor)]),
    "mxfa_scales_unswizzle": (_S, [_ctx, _P(Tensor), ctypes.c_int, ctypes.c_int64, ctypes.c_int64, _P(Tensor)]),
    "mxfa_jagged_sf_offsets": (_S, [_i32p, ctypes.c_int, _P(ctypes.c_int64)]),
    "mxfa_scales_scatter": (_S, [_ctx, _P(Tensor), _i32p, ctypes.c_int, ctypes.c_int, ctypes.c_int64, _P(Tensor)]),
    "mxfa_scales_gather": (_S, [_ctx, _P(Tensor), _i32p, ctypes.c_int, ctypes.c_int, ctypes.c_int64, _P(Tensor)]),
    "mxfa_gemm": (_S, [_ctx, _P(MX), _P(MX), _P(Tensor), ctypes.c_int, _P(Tensor)]),
    "mxfa_attn_params_default": (None, [_P(AttnParams)]),
    "mxfa_attn_fwd": (_S, [_ctx, _P(AttnParams), _P(Tensor), _P(Tensor), _P(Tensor), _i32p, _i32p, ctypes.c_int,
                           _P(Tensor), _P(Tensor)]),
    "mxfa_attn_fwd_f64": (_S, [_ctx, _P(AttnParams), _P(Tensor), _P(Tensor), _P(Tensor), _i32p, _i32p, ctypes.c_int,
                               _P(Tensor), _P(Tensor)]),
    "mxfa_attn_bwd": (_S, [_ctx, _P(AttnParams), _P(Tensor), _P(Tensor), _P(Tensor), _P(Tensor), _P(Tensor),
                           _P(Tensor), _i32p, _i32p, ctypes.c_int, _P(Tensor), _P(Tensor), _P(Tensor)]),
    "mxfa_attn_bwd_f64": (_S, [_ctx, _P(AttnParams), _P(Tensor), _P(Tensor), _P(Tensor), _P(Tensor), _i32p, _i32p,
                               ctypes.c_int, _P(Tensor), _P(Tensor), _P(Tensor)]),
    "mxfa_compare": (_S, [_P(Tensor), _P(Tensor), _P(Metrics)]),
}

for _name, (_res, _args) in _PROTOTYPES.items():
    try:
        _fn = getattr(lib, _name)
    except AttributeError:
        raise ImportError("mxfa: %s has no %s: it is not the libmxfa this package was made for" % (lib._name, _name))
    _fn.restype, _fn.argtypes = _res, _args

# The structures above are those of the package's own version: a library of
# another major.minor may lay them out differently.
_found = lib.mxfa_version().decode()
if VERSION and _found.split(".")[:2] != VERSION.split(".")[:2]:
    raise ImportError("mxfa: the package is version %s but %s is libmxfa %s" % (VERSION, lib._name, _found))
