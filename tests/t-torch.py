#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""mxfa.torch, MXFP8 attention under PyTorch's autograd, TAP output, against
independent references: the package's own attn_fwd/attn_bwd called by hand
on the same inputs in the token layout (the gradients autograd hands back
must be those bytes), the float64 truth of the library (the errors of O and
of the gradients within the bands of tests/t-attn and t-attn-bwd), a float64
attention written here in PyTorch for the layout and mask conventions, and
the errors a caller must get. Run by tests/t-torch.sh with the build's
library, on the CPU (and on a GPU where PyTorch has one)."""

import math
import sys

import numpy as np
import torch

import mxfa
import mxfa.torch as mt
from tap import done, ok, skip

def same(a, b):
    """Byte equality of two tensors (dtype and shape too)."""
    a = a.detach().cpu().contiguous()
    b = b.detach().cpu().contiguous()
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype == torch.bfloat16:
        a, b = a.view(torch.int16), b.view(torch.int16)
    return a.numpy().tobytes() == b.numpy().tobytes()


torch.manual_seed(20261203)
g = torch.Generator().manual_seed(7)


def randn(*shape, dtype=torch.float32, device="cpu"):
    return torch.randn(*shape, generator=g).to(dtype=dtype, device=device).requires_grad_(True)


def tokens(x):  # [B, H, S, D] -> [B S, H, D], as mxfa.torch lays them out
    b, h, s, d = x.shape
    return x.detach().transpose(1, 2).reshape(b * s, h, d).contiguous()


def untokens(x, b, s):  # [B S, H, D] -> [B, H, S, D]
    return x.reshape(b, s, x.shape[1], x.shape[2]).transpose(1, 2)


def sdpa64(q, k, v, causal, scale=None):
    """float64 attention in SDPA's layout, GQA by repeating heads; causal
    masks key j > query i (Sq = Sk)."""
    q, k, v = (x.detach().double() for x in (q, k, v))
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    s = (q @ k.transpose(-1, -2)) * (scale if scale is not None else 1 / math.sqrt(q.shape[-1]))
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), -math.inf)
    return torch.softmax(s, -1) @ v


def rel(a, b):
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    return ((a - b).norm() / b.norm()).item()


# ------------------------------------------------------------ the gradients are attn_bwd's bytes

def check_bytes(b, hq, hkv, s, d, dtype, causal, model, causal_mode="leak-free", device="cpu"):
    q, k, v = randn(b, hq, s, d, dtype=dtype, device=device), randn(b, hkv, s, d, dtype=dtype, device=device), \
        randn(b, hkv, s, d, dtype=dtype, device=device)
    o = mt.attention(q, k, v, is_causal=causal, model=model, causal_mode=causal_mode)
    do = torch.randn(o.shape, generator=g).to(dtype=dtype, device=device)
    o.backward(do)
    what = "B,Hq,Hkv,S,D = %d,%d,%d,%d,%d %s %s%s %s" % (b, hq, hkv, s, d, str(dtype)[6:], model,
                                                       " causal " + causal_mode if causal else "", device)
    # by hand: the package's functions on the token layout
    wide = dtype == torch.float16
    qt, kt, vt = (tokens(x).float() if wide else tokens(x) for x in (q, k, v))
    cu = None if b == 1 else np.arange(b + 1) * s
    kind = "bf16" if dtype == torch.bfloat16 else "f32"
    opts = dict(model=model, causal=causal_mode if causal else "none", backend="cuda" if device != "cpu" else "cpu")
    o2, lse2 = mxfa.attn_fwd(qt, kt, vt, cu, cu, out_dtype=kind, **opts)
    ok(same(o, untokens(o2, b, s).to(dtype)), "%s: O is attn_fwd's" % what)
    dot = tokens(do).float() if wide else tokens(do)
    dq2, dk2, dv2 = mxfa.attn_bwd(qt, kt, vt, o2, dot.to(o2.dtype), lse2, cu, cu, grad_dtype=kind, **opts)
    ok(same(q.grad, untokens(dq2, b, s).to(dtype)) and same(k.grad, untokens(dk2, b, s).to(dtype)) and
       same(v.grad, untokens(dv2, b, s).to(dtype)), "%s: dQ, dK and dV are attn_bwd's" % what)
    return q, k, v, o, do


for args in ((1, 2, 2, 64, 64, torch.float32, False, "sm100"),
             (2, 4, 2, 96, 64, torch.float32, True, "sm100"),
             (2, 4, 1, 64, 128, torch.bfloat16, True, "ideal"),
             (1, 2, 2, 80, 64, torch.float16, False, "sm100"),
             (2, 2, 2, 64, 64, torch.float32, True, "sm90-fp8", "plain"),
             (1, 2, 1, 64, 64, torch.bfloat16, False, "sm90-bf16")):
    check_bytes(*args)

# the dtype in is the dtype out, the gradients' too
for dt in (torch.float32, torch.bfloat16, torch.float16):
    q, k, v = randn(1, 2, 32, 64, dtype=dt), randn(1, 2, 32, 64, dtype=dt), randn(1, 2, 32, 64, dtype=dt)
    o = mt.attention(q, k, v)
    o.float().sum().backward()
    ok(o.dtype == dt and q.grad.dtype == dt and k.grad.dtype == dt and o.shape == q.shape,
       "%s in: O and the gradients in %s" % (dt, dt))

# ------------------------------------------------------------ errors against the float64 truth

b, h, s, d = 2, 2, 128, 64
q, k, v = randn(b, h, s, d), randn(b, h, s, d), randn(b, h, s, d)
for causal in (False, True):
    for x in (q, k, v):
        x.grad = None
    o = mt.attention(q, k, v, is_causal=causal)
    do = torch.randn(o.shape, generator=g)
    o.backward(do)
    cu = np.arange(b + 1) * s
    ot, _ = mxfa.attn_fwd_truth(tokens(q), tokens(k), tokens(v), cu, cu, causal="leak-free" if causal else "none")
    gt = mxfa.attn_bwd_truth(tokens(q), tokens(k), tokens(v), tokens(do), cu, cu,
                             causal="leak-free" if causal else "none")
    eo = rel(o, untokens(torch.from_numpy(ot), b, s))
    # the same truth by another route: float64 attention written here
    ok(rel(untokens(torch.from_numpy(ot), b, s), sdpa64(q, k, v, causal)) < 1e-12,
       "causal %s: the library's float64 truth is PyTorch's float64 attention" % causal)
    # the bands of tests/t-attn.c and t-attn-bwd.c on normal data (docs/NUMERICS.md, section 6)
    ok(0.03 <= eo <= 0.08, "causal %s: O's error against the float64 truth %.4f in [0.03, 0.08]" % (causal, eo))
    errs = [rel(gr, untokens(torch.from_numpy(t), b, s)) for gr, t in zip((q.grad, k.grad, v.grad), gt)]
    ok(0.03 <= errs[0] <= 0.10 and 0.03 <= errs[1] <= 0.10 and 0.018 <= errs[2] <= 0.10,
       "causal %s: dQ, dK, dV errors %.4f %.4f %.4f in [0.03, 0.10] ([0.018, 0.10] for dV)" % ((causal,) + tuple(errs)))

# ------------------------------------------------------------ varlen: flash-attn's packed layout

cu = torch.tensor([0, 37, 37, 137, 200], dtype=torch.int32)
qv, kv_, vv = randn(200, 4, 64), randn(200, 2, 64), randn(200, 2, 64)
ov = mt.varlen_attention(qv, kv_, vv, cu, cu, 100, 100, causal=True)
ov.sum().backward()
o2, _ = mxfa.attn_fwd(qv.detach(), kv_.detach(), vv.detach(), cu.numpy(), cu.numpy(), causal="leak-free",
                      backend="cpu")
ok(same(ov, o2), "varlen (an empty sequence, GQA, causal): O is attn_fwd's")
per = []
for i in range(4):  # each sequence alone, through the 4-D route
    a, e = int(cu[i]), int(cu[i + 1])
    if e > a:
        oi = mt.attention(qv.detach()[a:e].transpose(0, 1)[None], kv_.detach()[a:e].transpose(0, 1)[None],
                          vv.detach()[a:e].transpose(0, 1)[None], is_causal=True)
        per.append(same(oi[0].transpose(0, 1), ov[a:e]))
ok(all(per) and len(per) == 3, "varlen: each sequence's O is that sequence's alone")
ok(qv.grad is not None and qv.grad.shape == qv.shape and torch.isfinite(qv.grad).all().item(),
   "varlen: gradients reach q")

# ------------------------------------------------------------ the SDPA drop-in, the module

q, k, v = randn(1, 2, 64, 64), randn(1, 2, 64, 64), randn(1, 2, 64, 64)
with mt.sdpa_patched(model="ideal"):
    o1 = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
o2 = mt.attention(q, k, v, is_causal=True, model="ideal")
ok(same(o1, o2), "sdpa_patched: SDPA's calls are mxfa's")
ok(not hasattr(torch.nn.functional, "scaled_dot_product_attention") or
   torch.nn.functional.scaled_dot_product_attention is not None and
   "mxfa" not in getattr(torch.nn.functional.scaled_dot_product_attention, "__module__", ""),
   "sdpa_patched: SDPA is PyTorch's again after the block")
m = mt.Attention(model="ideal")
ok(same(m(q, k, v, is_causal=True), o2) and "ideal" in repr(m), "Attention module: attention's result")
ok(same(mt.attention(q, k, v, scale=0.05), mt.attention(q, k, v, scale=0.05)) and
   rel(mt.attention(q, k, v, scale=0.05, model="ideal"), sdpa64(q, k, v, False, 0.05)) < 0.1,
   "scale: the softmax scale given")

# ------------------------------------------------------------ bad input: an error, nothing written


def raises(fn, kinds, what, needle=""):
    try:
        fn()
    except kinds as e:
        return ok(needle in str(e), "%s: %s" % (what, str(e)[:100]))
    except Exception as e:  # noqa: BLE001 (the test reports what else came)
        return ok(False, "%s: %s %s" % (what, type(e).__name__, e))
    return ok(False, "%s: no error" % what)


q, k, v = randn(1, 4, 64, 64), randn(1, 3, 64, 64), randn(1, 3, 64, 64)
raises(lambda: mt.attention(q, k, v), ValueError, "3 key heads for 4 query heads", "divide")
q, k, v = randn(1, 2, 64, 64), randn(1, 2, 80, 64), randn(1, 2, 80, 64)
raises(lambda: mt.attention(q, k, v, is_causal=True), ValueError, "is_causal with Sq != Sk", "bottom right")
raises(lambda: mt.attention(q[0], k[0], v[0]), ValueError, "3-D tensors to attention", "[B, H, S, D]")
raises(lambda: mt.attention(q.double(), k, v), TypeError, "float64 q", "float32, bfloat16 or float16")
raises(lambda: mt.attention(q, k.bfloat16(), v), TypeError, "mixed dtypes", "one dtype")
raises(lambda: mt.attention(q, k, v, model="fp4"), ValueError, "an unknown model", "model")
raises(lambda: mt.attention(q, k, v, causal_mode="strict", is_causal=False), ValueError, "an unknown causal mode",
       "causal_mode")
raises(lambda: mt.attention(q, k, v, scale=-1.0), ValueError, "a negative scale", "scale")
raises(lambda: mt.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(64, 80)), ValueError, "attn_mask",
       "attn_mask")
raises(lambda: mt.scaled_dot_product_attention(q, k, v, dropout_p=0.1), ValueError, "dropout", "dropout")
qd = randn(1, 2, 64, 72)
raises(lambda: mt.attention(qd, randn(1, 2, 64, 72), randn(1, 2, 64, 72)), mxfa.Error, "D = 72 (the library's "
       "refusal)")
qv = randn(10, 2, 64)
raises(lambda: mt.varlen_attention(qv, qv, qv, [0, 4, 3], [0, 4, 10]), mxfa.Error,
       "cu_seqlens out of order (the library's refusal)")
raises(lambda: mt.varlen_attention(qv, qv, qv, [0, 4, 10], [0, 4, 10], 5, 5), ValueError, "max_seqlen exceeded",
       "max_seqlen")
raises(lambda: mt.varlen_attention(qv, qv, qv, [0, 4, 10], [0, 4, 10], dropout_p=0.5), ValueError,
       "varlen dropout", "dropout")
# a refused call leaves the caller's tensors as they were
q = randn(1, 2, 64, 72)
before = q.detach().clone()
raises(lambda: mt.attention(q, q, q).sum().backward(), mxfa.Error, "a refused forward pass")
ok(q.grad is None and same(q, before), "after it q is unchanged and has no gradient")

# ------------------------------------------------------------ the registered operators and torch.compile


def grads_of(fn, xs, do):
    """fn's output and the gradients it hands back to fresh copies of xs."""
    xs = [x.detach().clone().requires_grad_(True) for x in xs]
    o = fn(*xs)
    o.backward(do)
    return [o] + [x.grad for x in xs]


def check_ops(device, model):
    b, hq, hkv, s, d = 2, 4, 2, 64, 64
    xs = [randn(b, hq, s, d, device=device), randn(b, hkv, s, d, device=device), randn(b, hkv, s, d, device=device)]
    do = torch.randn(b, hq, s, d, generator=g).to(device)
    eager = lambda q, k, v: mt.attention(q, k, v, is_causal=True, model=model)
    want = grads_of(eager, xs, do)
    mt.CUSTOM_OPS = False
    try:
        fn_path = grads_of(eager, xs, do)
    finally:
        mt.CUSTOM_OPS = True
    ok(all(same(a, b_) for a, b_ in zip(want, fn_path)), "%s %s: the operators' O and gradients are the "
       "autograd.Function's bytes" % (device, model))
    tq, tk, tv = (tokens(x).requires_grad_(True) for x in xs)
    args = (tq, tk, tv, [0, s, 2 * s], [0, s, 2 * s], model, "rceil", "const", "leak-free", 0.0,
            "cuda" if device != "cpu" else "cpu")
    try:
        torch.library.opcheck(torch.ops.mxfa.attn_fwd.default, args)
        ok(True, "%s %s: torch.library.opcheck passes mxfa::attn_fwd (schema, fake tensors, autograd, "
           "AOT dispatch)" % (device, model))
    except Exception as e:  # noqa: BLE001 (reported)
        ok(False, "%s %s: torch.library.opcheck: %s" % (device, model, str(e)[:300]))
    for backend in ("aot_eager", "inductor"):
        torch._dynamo.reset()
        try:
            got = grads_of(torch.compile(eager, fullgraph=True, backend=backend), xs, do)
        except Exception as e:  # noqa: BLE001 (reported)
            ok(False, "%s %s: torch.compile(fullgraph=True, backend=%s): %s" % (device, model, backend, str(e)[:300]))
            continue
        ok(all(same(a, b_) for a, b_ in zip(want, got)), "%s %s: torch.compile(fullgraph=True, backend=%s) traces "
           "attention through the operators: O and the gradients are eager's bytes" % (device, model, backend))


if mt.CUSTOM_OPS:
    check_ops("cpu", "sm100")
else:
    for what in ("the operators' bytes", "opcheck", "torch.compile aot_eager", "torch.compile inductor"):
        skip("%s: PyTorch %s has no torch.library.custom_op (2.4 and later)" % (what, torch.__version__))

# ------------------------------------------------------------ CUDA, where PyTorch has a GPU and mxfa its module

if torch.cuda.is_available() and mxfa.backends()["cuda"]["usable"]:
    arch, _ = mxfa.Context("cuda").device()
    model = "sm100" if arch >= 100 else "sm90-bf16"
    check_bytes(2, 4, 2, 128, 128, torch.bfloat16, True, model, device="cuda")
    q = randn(1, 2, 64, 64, device="cuda")
    o = mt.attention(q, q, q, model=model)
    ok(o.is_cuda and o.device == q.device, "CUDA in, CUDA out (%s)" % model)
    if mt.CUSTOM_OPS:
        check_ops("cuda", model)
else:
    skip("no CUDA device with mxfa's cuda backend")

done()
