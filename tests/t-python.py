#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The Python package against independent references, TAP output: the CLI
(tools/mxfa, a separate program over the same library) for quantization,
layouts, products and attention, byte for byte; a numpy decoder of E4M3,
E5M2 and E8M0 written here for dequantization; the format's own identities
(square blocks are transpose-invariant, jagged quantization is per-sequence
quantization); numpy's float64 arithmetic for the metrics; and the errors a
caller must get. Run by tests/t-python.sh with the build's library."""

import atexit
import itertools
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings

import numpy as np

import mxfa
from tap import done, ok, skip


def same(a, b):
    """Bitwise equality of two arrays (NaN payloads included)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


CLI = os.environ["MXFA_CLI"]
TMP = tempfile.mkdtemp(prefix="t-python.")
atexit.register(shutil.rmtree, TMP, True)


def path(name):
    return os.path.join(TMP, name)


def cli(*args):
    r = subprocess.run([CLI] + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise RuntimeError("mxfa %s: %s" % (" ".join(map(str, args)), r.stderr.decode()))
    return r.stdout.decode()


def save(name, x):
    np.save(path(name), x)
    return path(name)


rng = np.random.default_rng(20261201)


def matrix(rows, cols, wild=False):
    """Gaussian rows at magnitudes 2^-20 .. 2^20; wild: NaN, +-Inf, a zero row."""
    x = (rng.standard_normal((rows, cols)) * np.exp2(rng.integers(-20, 21, (rows, 1)))).astype(np.float32)
    if wild:
        x[0, 0], x[1, 3], x[2, 5] = np.nan, np.inf, -np.inf
        x[3, :] = 0
    return x


# ---- the package and the library

ok(cli("--version").strip() == "mxfa " + mxfa.__version__, "mxfa.__version__ is the CLI's version")
# python/pyproject.toml (pip's metadata) states the version too: the same one
pyproject = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(mxfa.__file__))), "pyproject.toml")
if os.path.exists(pyproject):
    with open(pyproject) as f:
        stated = [line.split("=", 1)[1].strip().strip('"') for line in f if line.startswith("version")]
    ok(stated == [mxfa.__version__], "python/pyproject.toml's version %s is the library's %s" %
       (stated, mxfa.__version__))
else:
    skip("python/pyproject.toml is not beside the package (an installed package)")
# the package's enum tables (python/mxfa/_capi.py) are the library's: each
# value's name from mxfa_*_name, and the value after the last is unknown
import ctypes  # noqa: E402 (only here: the name functions are not in the package's prototypes)
for fn, table in (("mxfa_dtype_name", mxfa._capi.DTYPES), ("mxfa_block_name", mxfa._capi.BLOCKS),
                  ("mxfa_preset_name", mxfa._capi.PRESETS), ("mxfa_layout_name", mxfa._capi.LAYOUTS),
                  ("mxfa_model_name", mxfa._capi.MODELS), ("mxfa_p_scale_name", mxfa._capi.P_SCALES)):
    name = getattr(mxfa._capi.lib, fn)
    name.restype, name.argtypes = ctypes.c_char_p, [ctypes.c_int]
    lib_names = {name(i).decode(): i for i in range(len(table))}
    ok(lib_names == table and name(len(table)).decode() == "unknown",
       "%s: the package's table %s is the library's %s" % (fn, table, lib_names))
b = mxfa.backends()
ok(b["ref"]["built"] and b["ref"]["usable"] and b["cpu"]["built"] and b["cpu"]["usable"] and
   (b["cuda"]["usable"] or b["cuda"]["why"] != ""),
   "backends(): ref and cpu are built and usable; cuda is usable or says why not (%s)" % (b["cuda"]["why"] or "usable"))
with mxfa.Context(None) as c:
    ok(c.name in ("cpu", "ref") and c.device() == (0, "cpu"), "Context(None) is auto: %s, device %r" % (c.name, c.device()))

# ---- quantization against the CLI, every block, preset and format

X = matrix(70, 100, wild=True)
xin = save("x.npy", X)
for block, preset, fmt in itertools.product(("row", "col", "square"), ("rceil", "ocp", "torchao-rceil", "microxcaling"),
                                            ("e4m3", "e5m2")):
    q = mxfa.quantize(X, block, preset, fmt, backend="ref")
    cli("quantize", xin, "--data", path("d.npy"), "--scales", path("s.npy"), "--block", block, "--preset", preset,
        "--format", fmt, "--backend", "ref")
    ok(same(q.data, np.load(path("d.npy"))) and same(q.scales, np.load(path("s.npy"))),
       "quantize %s %s %s: the CLI's bytes" % (block, preset, fmt))

q_cpu = mxfa.quantize(X, "square", "ocp", backend="cpu")
q_ref = mxfa.quantize(X, "square", "ocp", backend="ref")
ok(same(q_cpu.data, q_ref.data) and same(q_cpu.scales, q_ref.scales), "quantize: the cpu backend's bytes are ref's")

for block in ("row", "col"):
    q = mxfa.quantize(X, block, backend="ref")
    cli("quantize", xin, "--data", path("d.npy"), "--scales", path("s.npy"), "--block", block, "--layout", "swizzled",
        "--backend", "ref")
    sw = mxfa.swizzle(q.scales, block, 70, 100)
    ok(same(sw, np.load(path("s.npy"))), "swizzle (%s): the CLI's swizzled layout" % block)
    ok(same(mxfa.unswizzle(sw, block, 70, 100), q.scales), "unswizzle (%s) inverts swizzle" % block)

# ---- dequantization against a decoder written here


def decode(codes, fmt):
    c = codes.astype(np.int64)
    sign = np.where(c >> 7, -1.0, 1.0)
    if fmt == "e4m3":
        e, m = (c >> 3) & 15, c & 7
        v = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * np.exp2(e - 7.0))
        v = np.where((e == 15) & (m == 7), np.nan, v)
    else:
        e, m = (c >> 2) & 31, c & 3
        v = np.where(e == 0, m / 4.0 * 2.0 ** -14, (1 + m / 4.0) * np.exp2(e - 15.0))
        v = np.where(e == 31, np.where(m == 0, np.inf, np.nan), v)
    return sign * v


def expand(scales, block, rows, cols):
    s = scales.astype(np.float64)
    s = np.where(scales == 255, np.nan, np.exp2(s - 127))
    r = np.arange(rows)[:, None] // (32 if block != "row" else 1)
    c = np.arange(cols)[None, :] // (32 if block != "col" else 1)
    return s[r, c]


with np.errstate(invalid="ignore", over="ignore"):
    for block, fmt in itertools.product(("row", "col", "square"), ("e4m3", "e5m2")):
        q = mxfa.quantize(X, block, "ocp", fmt, backend="ref")
        want = (decode(q.data, fmt) * expand(q.scales, block, 70, 100)).astype(np.float32)
        want = np.where(np.isnan(want), np.float32(np.nan), want)
        got = mxfa.dequantize(q, backend="ref")
        ok(got.dtype == np.float32 and np.array_equal(got, want, equal_nan=True),
           "dequantize %s %s: code x 2^(scale - 127), rounded once" % (block, fmt))
    bf = mxfa.dequantize(mxfa.quantize(X, "row", backend="ref"), "bf16", backend="ref")
    f = mxfa.dequantize(mxfa.quantize(X, "row", backend="ref"), backend="ref")
    widened = (bf.astype(np.uint32) << 16).view(np.float32)
    ok(bf.dtype == np.uint16 and np.array_equal(widened, f, equal_nan=True),
       "dequantize to bf16: the f32 values (exact in bf16: 4 significant bits) as bf16 bits")

# ---- transposes: square blocks are transpose-invariant

for block, tblock in (("square", "square"), ("row", "col"), ("col", "row")):
    q = mxfa.quantize(X, block, backend="ref")
    t = mxfa.transpose(q, backend="ref")
    want = mxfa.quantize(np.ascontiguousarray(X.T), tblock, backend="ref")
    ok(t.block == tblock and same(t.data, want.data) and same(t.scales, want.scales),
       "transpose %s -> %s: the quantization of X^T" % (block, tblock))
t = mxfa.transpose_square(mxfa.quantize(X, "square", backend="ref"))
ok(same(t.data, np.ascontiguousarray(mxfa.quantize(X, "square").data.T)), "transpose_square: the codes transposed")
try:
    mxfa.transpose(mxfa.quantize(X, "row"), "row")
    ok(False, "transpose row -> row is refused")
except mxfa.Error as e:
    ok(e.name == "NEEDS_SOURCE" and str(e), "transpose row -> row: Error NEEDS_SOURCE (%s)" % e)

# ---- jagged batches

cu = np.array([0, 37, 37, 170], dtype=np.int32)
J = matrix(170, 64)
for block in ("col", "square"):
    q = mxfa.quantize(J, block, cu_seqlens=cu, backend="ref")
    parts = [mxfa.quantize(J[a:b], block, backend="ref") for a, b in zip(cu[:-1], cu[1:]) if b > a]
    ok(same(q.data, np.concatenate([p.data for p in parts])) and
       same(q.scales, np.concatenate([p.scales for p in parts])),
       "quantize jagged (%s): each sequence quantized alone" % block)
for block in ("row", "col"):
    q = mxfa.quantize(J, block, cu_seqlens=cu, backend="ref")
    sw = mxfa.scatter(q.scales, cu, block, 64, backend="ref")
    ok(same(mxfa.gather(sw, cu, block, 64, backend="ref"), q.scales), "gather (%s) inverts scatter" % block)
one = np.array([0, 170], dtype=np.int32)
q = mxfa.quantize(J, "row", backend="ref")
ok(same(mxfa.scatter(q.scales, one, "row", 64), mxfa.swizzle(q.scales, "row", 170, 64)),
   "scatter of one sequence is swizzle")

# ---- products against the CLI

A = mxfa.quantize(matrix(50, 100), "row", backend="ref")
B = mxfa.quantize(matrix(40, 100), "row", "ocp", "e5m2", backend="ref")
Cm = matrix(50, 40)
for model in ("ideal", "sm100", "sm90-fp8", "sm90-bf16"):
    d = mxfa.gemm(A, B, Cm, model, backend="ref")
    cli("gemm", "--a", save("a.npy", A.data), "--a-scales", save("sa.npy", A.scales), "--b", save("b.npy", B.data),
        "--b-scales", save("sb.npy", B.scales), "--format-b", "e5m2", "--c", save("c.npy", Cm), "--model", model,
        "--out", path("d.npy"), "--backend", "ref")
    ok(same(d, np.load(path("d.npy"))), "gemm %s: the CLI's D" % model)
ok(same(mxfa.gemm(A, B, backend="cpu"), mxfa.gemm(A, B, backend="ref")), "gemm without C: cpu's bits are ref's")

# ---- attention against the CLI

Q = rng.standard_normal((200, 2, 64)).astype(np.float32)
K = rng.standard_normal((150, 1, 64)).astype(np.float32)
V = rng.standard_normal((150, 1, 64)).astype(np.float32)
G = rng.standard_normal((200, 2, 64)).astype(np.float32)
cq, ck = np.array([0, 120, 200], dtype=np.int32), np.array([0, 50, 150], dtype=np.int32)
files = ["--q", save("q.npy", Q), "--k", save("k.npy", K), "--v", save("v.npy", V), "--cu-seqlens-q", "0,120,200",
         "--cu-seqlens-k", "0,50,150", "--backend", "ref"]
for causal, p_scale, flag in (("none", "const", []), ("leak-free", "dynamic", ["--causal"]),
                              ("plain", "const", ["--causal-plain"])):
    o, lse = mxfa.attn_fwd(Q, K, V, cq, ck, causal=causal, p_scale=p_scale, backend="ref")
    cli("attn", *files, *flag, "--p-scale", p_scale, "--out", path("o.npy"), "--lse", path("l.npy"))
    ok(same(o, np.load(path("o.npy"))) and same(lse, np.load(path("l.npy"))),
       "attn_fwd (%s, %s P, jagged, GQA): the CLI's O and LSE" % (causal, p_scale))
    dq, dk, dv = mxfa.attn_bwd(Q, K, V, o, G, lse, cq, ck, causal=causal, p_scale=p_scale, backend="ref")
    cli("attn", "--backward", *files, *flag, "--p-scale", p_scale, "--o", save("o.npy", o), "--lse",
        save("l.npy", lse), "--do", save("g.npy", G), "--dq", path("dq.npy"), "--dk", path("dk.npy"), "--dv",
        path("dv.npy"))
    ok(same(dq, np.load(path("dq.npy"))) and same(dk, np.load(path("dk.npy"))) and same(dv, np.load(path("dv.npy"))),
       "attn_bwd (%s, %s P): the CLI's dQ, dK and dV" % (causal, p_scale))

# ---- the float64 truth and the metrics

o, lse = mxfa.attn_fwd(Q, K, V, cq, ck, backend="cpu")
ot, lt = mxfa.attn_fwd_truth(Q, K, V, cq, ck)
m = mxfa.compare(o, ot)
o64 = o.astype(np.float64)
rel = np.linalg.norm(o64 - ot) / np.linalg.norm(ot)
cos = np.sum(o64 * ot) / (np.linalg.norm(o64) * np.linalg.norm(ot))


def attention64(q, k, v, cq, ck, causal):
    """Softmax attention in numpy float64, per sequence and head (GQA)."""
    out, lse = np.zeros(q.shape), np.full(q.shape[:2], -np.inf)
    group, scale = q.shape[1] // k.shape[1], 1 / np.sqrt(q.shape[2])
    for b in range(len(cq) - 1):
        qs, ks, vs = q[cq[b]:cq[b + 1]], k[ck[b]:ck[b + 1]], v[ck[b]:ck[b + 1]]
        lq, lk = len(qs), len(ks)
        for h in range(q.shape[1]):
            s = qs[:, h].astype(np.float64) @ ks[:, h // group].astype(np.float64).T * scale
            if causal:
                s[np.arange(lk)[None, :] > np.arange(lq)[:, None] + lk - lq] = -np.inf
            seen = np.isfinite(s).any(axis=1)
            mx = np.where(seen, s.max(axis=1, initial=-np.inf), 0)
            p = np.exp(s - mx[:, None])
            den = p.sum(axis=1)
            out[cq[b]:cq[b + 1], h] = np.where(seen[:, None], p @ vs[:, h // group] / np.where(seen, den, 1)[:, None], 0)
            lse[cq[b]:cq[b + 1], h] = np.where(seen, mx + np.log(np.where(seen, den, 1)), -np.inf)
    return out, lse


for causal in (False, True):
    ot2, lt2 = mxfa.attn_fwd_truth(Q, K, V, cq, ck, causal=causal)
    want_o, want_l = attention64(Q, K, V, cq, ck, causal)
    fin = np.isfinite(want_l)
    ok(np.abs(ot2 - want_o).max() < 1e-12 and np.array_equal(np.isfinite(lt2), fin) and
       np.abs(lt2[fin] - want_l[fin]).max() < 1e-12,
       "attn_fwd_truth (causal %s): numpy's float64 attention to 1e-12" % causal)
ok(ot.dtype == np.float64 and lt.shape == (200, 2), "attn_fwd_truth: float64 O and LSE")
ok(abs(m["rel_l2"] - rel) <= 1e-12 * rel and abs(m["cosine"] - cos) <= 1e-12 and m["count"] == o.size,
   "compare: rel_l2 %.6f and cosine as numpy's float64 computes them" % m["rel_l2"])
ok(0.01 < m["rel_l2"] < 0.2, "the MXFP8 forward's error on Gaussian data is a few percent (%.4f)" % m["rel_l2"])
dq, dk, dv = mxfa.attn_bwd(Q, K, V, o, G, lse, cq, ck, backend="cpu")
dqt, dkt, dvt = mxfa.attn_bwd_truth(Q, K, V, G, cq, ck)
errs = [mxfa.compare(a, t)["rel_l2"] for a, t in ((dq, dqt), (dk, dkt), (dv, dvt))]
ok(all(0.01 < e < 0.3 for e in errs), "attn_bwd against attn_bwd_truth: %.4f %.4f %.4f" % tuple(errs))
ok(mxfa.compare(o, o)["rel_l2"] == 0.0 and mxfa.compare(o, o)["cosine"] == 1.0, "compare(x, x): no error")
# ULPs: words stepped here by a known count (their bits plus n), a NaN
o32 = np.ascontiguousarray(o, dtype=np.float32)
p32 = o32.copy()
flat = p32.reshape(-1)
flat.view(np.int32)[7] += 5
flat.view(np.int32)[9] += 1
m = mxfa.compare(p32, o32)
ok(m["identical"] == o32.size - 2 and m["max_ulp"] == 5 and m["median_ulp"] == 0 and m["ulp_unmatched"] == 0,
   "compare: two words 5 and 1 ULPs off: identical %d of %d, max_ulp %d" % (m["identical"], o32.size, m["max_ulp"]))
flat[11] = np.nan
with warnings.catch_warnings():
    warnings.simplefilter("ignore", RuntimeWarning)
    m = mxfa.compare(p32, o32)
ok(m["ulp_unmatched"] == 1 and m["max_ulp"] == 5, "compare: a NaN where the reference has a number is unmatched")
m = mxfa.compare(np.array([-0.0, 1.0], np.float32), np.array([0.0, np.nextafter(np.float32(1), np.float32(2))]).astype(np.float32))
ok(m["max_ulp"] == 1 and m["identical"] == 0, "compare: -0 and +0 are one ULP apart, as are neighbours")
# compare_attention: the emulator's own outputs (ref backend) pass; one word
# stepped by 3 ULPs fails there, with its position; the backward likewise
co, cl = mxfa.attn_fwd(Q, K, V, cq, ck, causal="leak-free", backend="ref")
rep = mxfa.compare_attention(Q, K, V, co, cl, cq, ck, causal="leak-free")
ok(rep["within"] and rep["outputs"]["O"]["identical"] == co.size and rep["outputs"]["LSE"]["identical"] == cl.size,
   "compare_attention: the emulator's own O and LSE are bit-exact")
bad = co.copy()
bad.reshape(-1).view(np.int32)[(5 * co.shape[1] + 1) * co.shape[2] + 3] += 3
rep = mxfa.compare_attention(Q, K, V, bad, None, cq, ck, causal="leak-free")
w = rep["outputs"]["O"]["worst"]
ok(not rep["within"] and rep["outputs"]["O"]["max_ulp"] == 3 and len(w) == 1 and w[0][:3] == (5, 1, 3) and
   w[0][5] == 3, "compare_attention: a word 3 ULPs off fails, at (5, 1, 3): %s" % (w,))
ok(mxfa.compare_attention(Q, K, V, bad, None, cq, ck, causal="leak-free", max_ulp=3)["within"],
   "compare_attention: within max_ulp=3")
gd = np.asarray(rng.standard_normal(co.shape), dtype=np.float32)
g3 = mxfa.attn_bwd(Q, K, V, co, gd, cl, cq, ck, causal="leak-free", backend="ref")
rep = mxfa.compare_attention(Q, K, V, None, cl, cq, ck, dout=gd, dq=g3[0], dk=g3[1], dv=g3[2], o=co,
                             causal="leak-free")
ok(rep["within"] and all(rep["outputs"][n]["identical"] == g.size for n, g in zip(("dQ", "dK", "dV"), g3)),
   "compare_attention --backward: the emulator's own gradients are bit-exact")
try:
    mxfa.compare_attention(Q, K, V, co[:, :1], None, cq, ck)
    ok(False, "compare_attention: a candidate of another shape is refused")
except ValueError as e:
    ok("shape" in str(e), "compare_attention: a candidate of another shape is refused: %s" % e)


def compare_warned(out, ref):
    """compare(out, ref) and the RuntimeWarnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = mxfa.compare(out, ref)
    return m, [w for w in caught if issubclass(w.category, RuntimeWarning)]


def no_score(m):
    return not m["measured"] and all(np.isnan(m[k]) for k in ("rel_l2", "max_abs", "cosine", "sqnr_db"))


m, w = compare_warned(o, ot)
ok(m["measured"] and not w, "compare of finite results: measured, no warning")
# inputs times 1e30 overflow the float32 scores: O is NaN where the float64 truth is finite
big = [x * np.float32(1e30) for x in (Q, K, V)]
ob, _ = mxfa.attn_fwd(*big, cq, ck, backend="cpu")
obt, _ = mxfa.attn_fwd_truth(*big, cq, ck)
want = int(np.sum(~np.isfinite(ob) & np.isfinite(obt)))
m, w = compare_warned(ob, obt)
ok(want > 0 and no_score(m) and m["mismatched_nonfinite"] == want and m["count"] == ob.size - want and len(w) == 1
   and ("%d of %d values" % (want, ob.size)) in str(w[0].message),
   "compare, inputs x1e30: %d of %d values NaN/Inf where the truth is finite, counted; metrics nan, measured False, "
   "a RuntimeWarning" % (want, ob.size))
nan = np.full((4, 3), np.nan, np.float32)
m, w = compare_warned(nan, nan.astype(np.float64))
ok(no_score(m) and m["count"] == 0 and m["skipped"] == 12 and len(w) == 1,
   "compare of all-NaN against all-NaN: nothing measured, no perfect score, a RuntimeWarning")

# ---- arguments: copies, dtypes, errors

x = matrix(64, 64)
op = mxfa._operand(x, "x", ("f32",), 2)
ok(op.ptr == x.ctypes.data, "a contiguous float32 array is passed without a copy")
strided = matrix(64, 128)[:, ::2]
ok(same(mxfa.quantize(strided).data, mxfa.quantize(np.ascontiguousarray(strided)).data),
   "a strided array is taken (through a contiguous copy)")
bits = (x.view(np.uint32) >> 16).astype(np.uint16)
ok(same(mxfa.quantize(bits).data, mxfa.quantize((bits.astype(np.uint32) << 16).view(np.float32)).data),
   "uint16 arrays are bf16: the same codes as their exact widening")


def raises(kind, fn, what, check=None):
    try:
        fn()
    except kind as e:
        return ok(check is None or check(e), "%s: %s" % (what, e))
    except Exception as e:  # the wrong kind
        return ok(False, "%s: raised %s (%s)" % (what, type(e).__name__, e))
    return ok(False, "%s: nothing raised" % what)


raises(TypeError, lambda: mxfa.quantize(np.zeros((4, 4), dtype=np.int64)), "an int64 matrix is a TypeError")
raises(ValueError, lambda: mxfa.quantize(np.zeros(32, dtype=np.float32)), "a vector is a ValueError")
raises(ValueError, lambda: mxfa.quantize(x, preset="nearest"), "an unknown preset is a ValueError")
raises(mxfa.Error, lambda: mxfa.attn_fwd(Q[:, :, :48], K[:, :, :48], V[:, :, :48]),
       "D = 48 is the library's refusal, with its message", lambda e: e.status != 0 and "48" in str(e))
raises(mxfa.Error, lambda: mxfa.attn_fwd(Q, K[:, :, :32], V), "mismatched head dims are refused",
       lambda e: e.name in ("SHAPE", "INVALID"))
raises(mxfa.Error, lambda: mxfa.quantize(x, backend="gpu9"), "an unknown backend is refused",
       lambda e: e.name in ("NO_BACKEND", "INVALID"))
raises(ValueError, lambda: mxfa.attn_fwd(Q, K, V, cq, None), "cu_seqlens_q without cu_seqlens_k is a ValueError")
raises(ValueError, lambda: mxfa.attn_fwd_truth(Q, K, V, [0, 100, 200], [0, 150]),
       "cu_seqlens of different batches are a ValueError (the truth too)")
raises(TypeError, lambda: mxfa.attn_fwd(Q, K, V, [0.0, 200.0], [0, 150]), "float offsets are a TypeError")
raises(ValueError, lambda: mxfa.attn_fwd(Q, K, V, [0, 2 ** 32 + 200], [0, 150]),
       "offsets past 2^31 - 1 are a ValueError (not wrapped)")
raises(mxfa.Error, lambda: mxfa.attn_fwd(Q, K, V, [0, 300], [0, 150]), "offsets past the tokens are refused",
       lambda e: e.name in ("SHAPE", "INVALID"))
raises(ValueError, lambda: mxfa.swizzle(mxfa.quantize(X).scales, "row", 2 ** 64 + 70, 100),
       "a size past the library's range is a ValueError (not wrapped)")
raises(ValueError, lambda: mxfa.attn_fwd(Q, K, V, block_m=2 ** 32 + 128), "a tile past 2^31 - 1 is a ValueError")
raises(ValueError, lambda: mxfa.unswizzle(mxfa.quantize(X).scales, "diag", 70, 100), "an unknown block is a ValueError")
raises(ValueError, lambda: mxfa.gather(mxfa.quantize(X).scales, None, "row", 100), "gather without offsets")
raises(mxfa.Error, lambda: mxfa.gather(np.zeros((128, 4), np.uint8), [0, 64, 32], "row", 100),
       "decreasing offsets are the library's refusal")
e = pickle.loads(pickle.dumps(mxfa.Error(3, "x: bad")))
ok(isinstance(e, mxfa.Error) and e.status == 3 and e.name == "SHAPE" and str(e) == "x: bad (MXFA_ERR_SHAPE)",
   "mxfa.Error survives pickling (multiprocessing)")

# threads: each has its own contexts, so a refusal's message is its own
messages, good = [], []


def refused():
    for _ in range(300):
        try:
            mxfa.attn_fwd(Q[:, :, :48], K[:, :, :48], V[:, :, :48], backend="ref")
        except mxfa.Error as err:
            messages.append(str(err))


def accepted():
    for _ in range(300):
        good.append(same(mxfa.quantize(x, backend="ref").data, mxfa.quantize(x, backend="ref").data))


threads = [threading.Thread(target=refused), threading.Thread(target=accepted)]
for th in threads:
    th.start()
for th in threads:
    th.join()
ok(len(messages) == 300 and all("head dimension 48" in msg for msg in messages) and all(good) and len(good) == 300,
   "two threads at once: every refusal carries its own message, every result is right")

env = dict(os.environ, MXFA_LIBRARY=path("no-such-libmxfa.so"))
r = subprocess.run([sys.executable, "-c", "import mxfa"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
ok(r.returncode != 0 and b"cannot load libmxfa" in r.stderr and b"MXFA_LIBRARY" in r.stderr,
   "without libmxfa, import mxfa fails and says where it looked")

# ---- PyTorch (CPU tensors here; CUDA tensors need the cuda backend and a GPU)

try:
    import torch
except ImportError:
    torch = None
if torch is None:
    skip("PyTorch is not installed: tensors not checked")
    skip("PyTorch is not installed: bf16 tensors not checked")
else:
    tq = mxfa.quantize(torch.from_numpy(X), "square", backend="ref")
    ok(isinstance(tq.data, torch.Tensor) and same(tq.data.numpy(), mxfa.quantize(X, "square").data),
       "a CPU tensor gives tensors, with numpy's bytes")
    tb = torch.from_numpy(x).to(torch.bfloat16)
    o1, _ = mxfa.attn_fwd(tb.reshape(64, 1, 64), tb.reshape(64, 1, 64), tb.reshape(64, 1, 64), backend="ref")
    nb = tb.view(torch.int16).numpy().view(np.uint16).reshape(64, 1, 64)
    o2, _ = mxfa.attn_fwd(nb, nb, nb, backend="ref")
    ok(same(o1.numpy(), o2), "a bf16 tensor is taken as bf16")

cuda_ok = torch is not None and torch.cuda.is_available() and mxfa.backends()["cuda"]["usable"]
if not cuda_ok:
    for _ in range(3):
        skip("no PyTorch with a CUDA device and the cuda backend: device tensors not checked")
else:
    arch = mxfa.Context("cuda").device()[0]
    model = "sm100" if arch == 100 else "sm90-fp8"
    qd, kd, vd = (torch.from_numpy(a).cuda() for a in (Q, K, V))
    o_d, l_d = mxfa.attn_fwd(qd, kd, vd, cq, ck, model=model, backend="cuda")
    o_h, l_h = mxfa.attn_fwd(Q, K, V, cq, ck, model=model, backend="cpu")
    ok(o_d.is_cuda and same(o_d.cpu().numpy(), o_h) and same(l_d.cpu().numpy(), l_h),
       "attn_fwd on CUDA tensors (cuda backend, %s): the cpu backend's O and LSE" % model)
    qx = mxfa.quantize(torch.from_numpy(X).cuda(), "square", "microxcaling", backend="cuda")
    qh = mxfa.quantize(X, "square", "microxcaling", backend="cpu")
    ok(qx.data.is_cuda and same(qx.data.cpu().numpy(), qh.data) and same(qx.scales.cpu().numpy(), qh.scales),
       "quantize on a CUDA tensor: the cpu backend's bytes")
    # the backward pass on a stream of its own: mxfa's work is ordered on the current stream
    gd = torch.from_numpy(G).cuda()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        grads = mxfa.attn_bwd(qd, kd, vd, o_d, gd, l_d, cq, ck, model=model, backend="cuda")
        grads = [g.clone() for g in grads]  # more work queued behind it on the same stream
    side.synchronize()
    want = mxfa.attn_bwd(Q, K, V, o_h, G, l_h, cq, ck, model=model, backend="cpu")
    ok(all(g.is_cuda and same(g.cpu().numpy(), w) for g, w in zip(grads, want)),
       "attn_bwd on CUDA tensors, on a side stream: the cpu backend's dQ, dK and dV")

done()
