# SPDX-License-Identifier: BSD-3-Clause
"""MXFP8 attention as a PyTorch operation: forward and backward through
autograd, for training with MXFP8 attention in place of a model's own.

- `attention(q, k, v, is_causal=..., scale=...)` takes the layout and
  conventions of `torch.nn.functional.scaled_dot_product_attention`:
  q [B, Hq, Sq, D], k and v [B, Hkv, Sk, D], GQA where Hkv divides Hq;
- `varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, ...)` those of
  flash-attn's `flash_attn_varlen_func`: [tokens, H, D] with the batch's
  token offsets;
- `scaled_dot_product_attention` has SDPA's own signature, for a model that
  calls SDPA (`sdpa_patched()` swaps it in for a block of code), and
  `Attention` is the same as an `nn.Module`.

The forward pass is `mxfa.attn_fwd` and saves O and LSE; the backward pass
is `mxfa.attn_bwd` on them (nothing of the forward is recomputed in
Python), so the gradients are the library's bytes. CUDA tensors stay on
their device and run on the cuda backend on the current stream; CPU
tensors run on the cpu backend. float32 and bfloat16 go to the library as
they are, float16 widened to float32 (exactly); O and the gradients come
back in the inputs' dtype.

Where PyTorch has `torch.library.custom_op` (2.4 and later), the forward
and backward passes are the operators `torch.ops.mxfa.attn_fwd` and
`torch.ops.mxfa.attn_bwd`, with shape functions and the autograd formula
registered, so that `torch.compile` traces a model through them (without a
graph break in `attention`); before 2.4 they are a `torch.autograd.Function`
that computes the same bytes. `CUSTOM_OPS` says which.

The model and its options are mxfa's (`model`, `preset`, `p_scale`, and
`causal_mode`: "leak-free", the library's default, or "plain"), docs/NUMERICS.md
says what each computes. A causal mask with Sq != Sk is refused by
`attention` (SDPA aligns it to the top left, mxfa, as flash-attn, to the
bottom right); `varlen_attention` takes it bottom-right aligned, as
flash-attn does.
"""

import contextlib
from typing import List, Optional, Tuple

import numpy as np
import torch

import mxfa as _mx

__all__ = ["attention", "varlen_attention", "scaled_dot_product_attention", "Attention", "sdpa_patched",
           "CUSTOM_OPS"]

_CAUSAL_MODES = ("leak-free", "plain")


def _check_float(x, name):
    if not isinstance(x, torch.Tensor):
        raise TypeError("mxfa: %s must be a torch.Tensor, got %s" % (name, type(x).__name__))
    if x.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise TypeError("mxfa: %s must be float32, bfloat16 or float16, got %s" % (name, x.dtype))


def _options(model, preset, p_scale, causal, causal_mode, scale, backend):
    _mx._choice(_mx._capi.MODELS, model, "model")
    _mx._choice(_mx._capi.PRESETS, preset, "preset")
    _mx._choice(_mx._capi.P_SCALES, p_scale, "p_scale")
    if causal_mode not in _CAUSAL_MODES:
        raise ValueError("mxfa: causal_mode must be one of %s, got %r" % (", ".join(_CAUSAL_MODES), causal_mode))
    if scale is not None:
        scale = float(scale)
        if not scale > 0 or scale == float("inf"):
            raise ValueError("mxfa: scale must be a positive finite number, got %r" % scale)
    return dict(model=model, preset=preset, p_scale=p_scale, causal=causal_mode if causal else "none",
                softmax_scale=scale or 0.0, backend=backend)


# The options of one call, in the order the operators take them.
_OPTION_NAMES = ("model", "preset", "p_scale", "causal", "softmax_scale", "backend")


def _kind(t):
    return "bf16" if t.dtype == torch.bfloat16 else "f32"


def _forward(q, k, v, cu_q, cu_k, opts):
    """O, LSE = mxfa.attn_fwd on [tokens, H, D] tensors of one dtype (float32
    or bfloat16), O in that dtype."""
    return _mx.attn_fwd(q, k, v, cu_q, cu_k, out_dtype=_kind(q), **opts)


def _backward(q, k, v, o, do, lse, cu_q, cu_k, opts):
    """dQ, dK, dV = mxfa.attn_bwd on the saved O and LSE, in q's dtype."""
    return _mx.attn_bwd(q, k, v, o, do.to(o.dtype), lse, cu_q, cu_k, grad_dtype=_kind(q), **opts)


class _AttentionFn(torch.autograd.Function):
    """The operators' autograd for a PyTorch without torch.library.custom_op."""

    @staticmethod
    def forward(ctx, q, k, v, cu_q, cu_k, opts):
        o, lse = _forward(q, k, v, cu_q, cu_k, opts)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.cu, ctx.opts = (cu_q, cu_k), opts
        ctx.mark_non_differentiable(lse)
        return o, lse

    @staticmethod
    def backward(ctx, do, _dlse):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = _backward(q, k, v, o, do, lse, ctx.cu[0], ctx.cu[1], ctx.opts)
        return dq, dk, dv, None, None, None


CUSTOM_OPS = hasattr(torch, "library") and hasattr(torch.library, "custom_op")

if CUSTOM_OPS:
    # Schemas: the tensors, the batch's token offsets (None for one
    # sequence) and the options by name. The outputs are new tensors,
    # contiguous, on the inputs' device: what the shape functions say.

    @torch.library.custom_op("mxfa::attn_fwd", mutates_args=())
    def _attn_fwd_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_q: Optional[List[int]],
                     cu_k: Optional[List[int]], model: str, preset: str, p_scale: str, causal: str,
                     softmax_scale: float, backend: str) -> Tuple[torch.Tensor, torch.Tensor]:
        opts = dict(zip(_OPTION_NAMES, (model, preset, p_scale, causal, softmax_scale, backend)))
        o, lse = _forward(q, k, v, cu_q, cu_k, opts)
        return o, lse

    @_attn_fwd_op.register_fake
    def _attn_fwd_shapes(q, k, v, cu_q, cu_k, *options):
        return q.new_empty(q.shape), q.new_empty(q.shape[:2], dtype=torch.float32)

    @torch.library.custom_op("mxfa::attn_bwd", mutates_args=())
    def _attn_bwd_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, do: torch.Tensor,
                     lse: torch.Tensor, cu_q: Optional[List[int]], cu_k: Optional[List[int]], model: str,
                     preset: str, p_scale: str, causal: str, softmax_scale: float,
                     backend: str) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        opts = dict(zip(_OPTION_NAMES, (model, preset, p_scale, causal, softmax_scale, backend)))
        dq, dk, dv = _backward(q, k, v, o, do, lse, cu_q, cu_k, opts)
        return dq, dk, dv

    @_attn_bwd_op.register_fake
    def _attn_bwd_shapes(q, k, v, o, do, lse, cu_q, cu_k, *options):
        return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)

    def _attn_fwd_setup(ctx, inputs, output):
        q, k, v, cu_q, cu_k = inputs[:5]
        o, lse = output
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.rest = inputs[3:]
        ctx.mark_non_differentiable(lse)

    def _attn_fwd_grad(ctx, do, _dlse):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = _attn_bwd_op(q, k, v, o, do.to(o.dtype), lse, *ctx.rest)
        return (dq, dk, dv) + (None,) * len(ctx.rest)

    _attn_fwd_op.register_autograd(_attn_fwd_grad, setup_context=_attn_fwd_setup)


def _apply(q, k, v, cu_q, cu_k, opts):
    """(O, LSE) through the registered operators where PyTorch has them and
    the backend is named (an mxfa.Context object is not an operator's
    argument: it goes through the autograd.Function, as CUSTOM_OPS = False
    sends every call)."""
    if CUSTOM_OPS and isinstance(opts["backend"], str):
        return torch.ops.mxfa.attn_fwd(q, k, v, cu_q, cu_k, *(opts[n] for n in _OPTION_NAMES))
    return _AttentionFn.apply(q, k, v, cu_q, cu_k, opts)


def _run(q, k, v, cu_q, cu_k, opts):
    """(O, LSE) of [tokens, H, D] tensors, in q's dtype (LSE float32)."""
    dtypes = {q.dtype, k.dtype, v.dtype}
    if len(dtypes) != 1:
        raise TypeError("mxfa: q, k and v must have one dtype, got %s" % ", ".join(sorted(map(str, dtypes))))
    if len({q.device, k.device, v.device}) != 1:
        raise ValueError("mxfa: q, k and v must be on one device")
    if opts["backend"] is None:
        opts = dict(opts, backend="cuda" if q.is_cuda else "cpu")
    dtype = q.dtype
    if dtype == torch.float16:  # widened exactly; O and the gradients rounded back by the casts' autograd
        q, k, v = q.float(), k.float(), v.float()
    o, lse = _apply(q, k, v, cu_q, cu_k, opts)
    return o.to(dtype), lse


def _offsets(batch, length):
    """The token offsets of `batch` sequences of `length` (a list: the
    operators' schema, and traceable)."""
    return None if batch == 1 else [i * length for i in range(batch + 1)]


def attention(q, k, v, *, is_causal=False, scale=None, model="sm100", preset="rceil", p_scale="const",
              causal_mode="leak-free", backend=None, return_lse=False):
    """MXFP8 attention in SDPA's layout: q [B, Hq, Sq, D], k and v [B, Hkv,
    Sk, D] (Hkv dividing Hq: GQA), softmax scale `scale` (default
    1/sqrt(D)), a causal mask where is_causal (causal_mode: "leak-free" or
    "plain"). Returns O [B, Hq, Sq, D] in q's dtype, and with return_lse the
    log-sum-exp [B, Hq, Sq] (float32, not differentiable)."""
    for x, n in ((q, "q"), (k, "k"), (v, "v")):
        _check_float(x, n)
        if x.dim() != 4:
            raise ValueError("mxfa: %s must be [B, H, S, D], got %d dimensions" % (n, x.dim()))
    b, hq, sq, d = q.shape
    if k.shape != v.shape:
        raise ValueError("mxfa: k and v must have one shape, got %s and %s" % (tuple(k.shape), tuple(v.shape)))
    if k.shape[0] != b or k.shape[3] != d:
        raise ValueError("mxfa: k and v must be [%d, H, S, %d] as q is [B, H, S, D], got %s" %
                         (b, d, tuple(k.shape)))
    hkv, sk = k.shape[1], k.shape[2]
    if hq % hkv:
        raise ValueError("mxfa: k's and v's %d heads must divide q's %d (GQA)" % (hkv, hq))
    if is_causal and sq != sk:
        raise ValueError("mxfa: is_causal with %d queries and %d keys: SDPA aligns that mask to the top left, mxfa "
                         "to the bottom right; call varlen_attention for the bottom-right mask" % (sq, sk))
    opts = _options(model, preset, p_scale, is_causal, causal_mode, scale, backend)

    def tokens(x):  # [B, H, S, D] -> [B S, H, D]
        return x.transpose(1, 2).reshape(x.shape[0] * x.shape[2], x.shape[1], x.shape[3])

    o, lse = _run(tokens(q), tokens(k), tokens(v), _offsets(b, sq), _offsets(b, sk), opts)
    o = o.reshape(b, sq, hq, d).transpose(1, 2)
    return (o, lse.reshape(b, sq, hq).transpose(1, 2)) if return_lse else o


def varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None, max_seqlen_k=None, dropout_p=0.0,
                     softmax_scale=None, causal=False, *, model="sm100", preset="rceil", p_scale="const",
                     causal_mode="leak-free", backend=None, return_lse=False):
    """MXFP8 attention on a packed batch, as flash-attn's
    flash_attn_varlen_func takes it: q [tokens_q, Hq, D], k and v [tokens_k,
    Hkv, D], cu_seqlens_q/_k the batch + 1 token offsets (int32 or int64,
    any device), a causal mask aligned to the bottom right. max_seqlen_q/_k
    are checked when given; dropout_p must be 0. Returns O [tokens_q, Hq, D]
    in q's dtype, and with return_lse the log-sum-exp [tokens_q, Hq]."""
    for x, n in ((q, "q"), (k, "k"), (v, "v")):
        _check_float(x, n)
        if x.dim() != 3:
            raise ValueError("mxfa: %s must be [tokens, H, D], got %d dimensions" % (n, x.dim()))
    if dropout_p:
        raise ValueError("mxfa: dropout is not supported (dropout_p must be 0, got %r)" % dropout_p)
    cu = []
    for c, n, mx in ((cu_seqlens_q, "cu_seqlens_q", max_seqlen_q), (cu_seqlens_k, "cu_seqlens_k", max_seqlen_k)):
        a = np.asarray(c.detach().cpu().numpy() if isinstance(c, torch.Tensor) else c)
        if a.ndim != 1 or a.size < 2 or a.dtype.kind not in "iu":
            raise ValueError("mxfa: %s must be a 1-D integer array of batch + 1 token offsets" % n)
        if mx is not None and a.size > 1 and int(np.max(np.diff(a))) > int(mx):
            raise ValueError("mxfa: %s holds a sequence of %d tokens, longer than max_seqlen %d" %
                             (n, int(np.max(np.diff(a))), int(mx)))
        cu.append([int(x) for x in a])
    opts = _options(model, preset, p_scale, causal, causal_mode, softmax_scale, backend)
    o, lse = _run(q, k, v, cu[0], cu[1], opts)
    return (o, lse) if return_lse else o


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False, **options):
    """torch.nn.functional.scaled_dot_product_attention's signature over
    `attention` (options: attention's keywords). attn_mask and dropout are
    refused; GQA is taken whatever enable_gqa says."""
    if attn_mask is not None:
        raise ValueError("mxfa: attn_mask is not supported (only is_causal's mask)")
    if dropout_p:
        raise ValueError("mxfa: dropout is not supported (dropout_p must be 0, got %r)" % dropout_p)
    return attention(query, key, value, is_causal=is_causal, scale=scale, **options)


class Attention(torch.nn.Module):
    """`attention` as a module: Attention(model="sm90-fp8")(q, k, v,
    is_causal=True). The keywords are attention's options."""

    def __init__(self, **options):
        super().__init__()
        _options(options.get("model", "sm100"), options.get("preset", "rceil"), options.get("p_scale", "const"),
                 False, options.get("causal_mode", "leak-free"), options.get("scale"), options.get("backend"))
        self.options = options

    def forward(self, q, k, v, is_causal=False):
        return attention(q, k, v, is_causal=is_causal, **self.options)

    def extra_repr(self):
        return ", ".join("%s=%r" % kv for kv in sorted(self.options.items()))


@contextlib.contextmanager
def sdpa_patched(**options):
    """Within the block, torch.nn.functional.scaled_dot_product_attention is
    mxfa's (with these options): a model that calls SDPA computes its
    attention in MXFP8 with no change to its code.

        with mxfa.torch.sdpa_patched(model="sm100"):
            loss = model(x).loss
        loss.backward()   # (the backward pass needs no patch: autograd has it)
    """
    functional = torch.nn.functional
    had = hasattr(functional, "scaled_dot_product_attention")
    saved = getattr(functional, "scaled_dot_product_attention", None)

    def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        return scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa,
                                            **options)

    functional.scaled_dot_product_attention = sdpa
    try:
        yield sdpa
    finally:
        if had:
            functional.scaled_dot_product_attention = saved
        else:
            del functional.scaled_dot_product_attention
