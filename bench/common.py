# SPDX-License-Identifier: BSD-3-Clause
"""What the baseline scripts of bench/ share: the FLOP counts and shapes of
`mxfa bench`, MXFP8 fake quantization in PyTorch, and the timing loops.

FLOPs are counted as `mxfa bench` counts them (tools/cmd_bench.c): 2 M N K
for a matrix product; 4 B H S^2 D for attention forward, half of it under a
causal mask; 2.5 times the forward count for the backward pass. A ratio of
two rates is then a ratio of times.

torch is imported by the functions that need it, so that every script
answers --help and rejects a bad argument without it.
"""

import argparse
import statistics
import time

# The attention shapes of `mxfa bench --backend cuda` (tools/bench_shapes.c),
# as B,H,S,D with ",c" for the causal mask.
DEVICE_SHAPES = ("4,16,4096,128", "4,16,4096,128,c", "1,16,16384,128", "8,16,2048,64", "2,16,8192,256")

E4M3_MAX = 448.0


def attention_flops(b, h, s, d, causal):
    """The FLOPs of one attention forward call, as mxfa bench counts them
    (the backward pass counts 2.5 times as many)."""
    return 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)


def rate(amount, seconds, unit, digits=1):
    """amount / seconds in units of 1 / unit, as text ("-" for no time: a
    clock too coarse for a tiny shape)."""
    return "%.*f" % (digits, amount / seconds * unit) if seconds > 0 else "-"


def shape(text):
    """An argparse type: "B,H,S,D" or "B,H,S,D,c" to (b, h, s, d, causal)."""
    fields = text.split(",")
    causal = len(fields) == 5 and fields[4] == "c"
    try:
        dims = [int(f) for f in fields[:4]]
    except ValueError:
        dims = []
    if len(dims) != 4 or len(fields) > 4 and not causal or min(dims) < 1:
        raise argparse.ArgumentTypeError("expected B,H,S,D or B,H,S,D,c with positive integers, got '%s'" % text)
    return tuple(dims) + (causal,)


def shape_name(sh):
    b, h, s, d, causal = sh
    return "%d,%d,%d,%d%s" % (b, h, s, d, ",c" if causal else "")


def positive(text):
    """An argparse type: an integer of at least 1."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError("expected a positive integer, got '%s'" % text)
    return n


def import_torch():
    """torch, or SystemExit with a message that names what is missing."""
    try:
        import torch
    except ImportError:
        raise SystemExit("this baseline needs PyTorch (python3 -c 'import torch' fails)")
    return torch


def _e4m3_round(y):
    """y (float32, |y| <= 448 or NaN) rounded to the nearest E4M3 value, ties
    to even: the cast where PyTorch has the format, else the same rounding
    spelled out (3 fraction bits, the quantum 2^-9 below 2^-6)."""
    import torch
    if hasattr(torch, "float8_e4m3fn"):
        return y.to(torch.float8_e4m3fn).float()
    exponent = torch.frexp(y)[1] - 1  # floor(log2 |y|), for y != 0
    quantum = torch.ldexp(torch.ones_like(y), exponent.clamp_min(-6) - 3)
    return torch.round(y / quantum) * quantum  # torch.round ties to even


def fake_mx(x, dim):
    """x quantized to MXFP8 E4M3 and back, in float32: blocks of 32 along dim
    (whose length must be a multiple of 32), each scaled by the rceil rule of
    mxfa's default preset, the power of two at or above fl(amax * fl(1/448));
    an all-zero block gets 2^-127. For finite x this is mxfa's
    dequantize(quantize(x, rceil)) to the bit."""
    import torch
    t = x.float().transpose(dim, -1)
    blocks = t.reshape(*t.shape[:-1], t.shape[-1] // 32, 32)
    r = blocks.abs().amax(-1, keepdim=True) * torch.tensor(1.0 / E4M3_MAX, dtype=torch.float32)
    r = r.clamp_min(2.0 ** -127)
    mant, exponent = torch.frexp(r)  # r = mant 2^exponent, mant in [1/2, 1)
    scale = torch.ldexp(torch.ones_like(r), exponent - (mant == 0.5).int())
    q = _e4m3_round((blocks / scale).clamp(-E4M3_MAX, E4M3_MAX)) * scale
    return q.reshape(t.shape).transpose(dim, -1)


def cpu_seconds(fn, reps, warmup=1):
    """The median wall time of reps calls of fn, after warmup calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def cuda_seconds(fn, reps, warmup=5):
    """The median device time of reps calls of fn on the current CUDA
    stream, each between two events and waited for, after warmup calls."""
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    return statistics.median(times)


def attention_seconds(torch, forward, inputs, dout, reps, backward=True):
    """The median device times of forward() and of its backward pass alone,
    autograd through the graph of one forward call (as mxfa_attn_bwd is
    given O and LSE): (forward, backward), backward None without it."""
    t_fwd = cuda_seconds(forward, reps)
    if not backward:
        return t_fwd, None
    out = forward()
    return t_fwd, cuda_seconds(lambda: torch.autograd.grad(out, inputs, dout, retain_graph=True), reps)


ATTENTION_HEADER = "(TFLOP/s: 4 B H S^2 D forward, half when causal, c; 2.5 times that backward)"


def attention_row(sh, name, width, t_fwd, t_bwd):
    """A row of an attention table: the shape, name in width columns, then
    milliseconds and TFLOP/s forward and backward."""
    flops = attention_flops(*sh)
    bwd = "%10s %10s" % ("-", "-") if t_bwd is None else \
        "%10.3f %10s" % (t_bwd * 1e3, rate(2.5 * flops, t_bwd, 1e-12))
    return "%-26s %-*s %10.3f %10s %s" % (shape_name(sh), width, name, t_fwd * 1e3, rate(flops, t_fwd, 1e-12), bwd)


def attention_columns(width, what):
    return "%-26s %-*s %10s %10s %10s %10s" % ("shape B,H,S,D", width, what, "fwd ms", "TFLOP/s", "bwd ms", "TFLOP/s")
