#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The GPU attention baselines of `mxfa bench --backend cuda`: PyTorch's
scaled_dot_product_attention in bf16 through its cuDNN and flash backends,
forward and backward, at the shapes of mxfa bench's attention tables.

Q, K and V are [B, H, S, D] bf16 tensors drawn from a standard normal;
",c" after a shape asks for the causal mask. TFLOP/s count FLOPs as mxfa
bench does: 4 B H S^2 D forward, half of it causal, 2.5 times that
backward. Each call is timed alone between two CUDA events, median of --reps:
the forward pass, and the backward pass alone (autograd through the graph
of one forward call, as mxfa_attn_bwd takes O and LSE). Run it on the same
GPU right after `mxfa bench --backend cuda` and divide the rates.
"""

import argparse

import common

BACKENDS = ("cudnn", "flash")


def parse_args():
    p = argparse.ArgumentParser(
        description="bf16 attention in PyTorch (scaled_dot_product_attention, cuDNN and flash backends), "
        "forward and backward, on a CUDA GPU: the attention baselines of mxfa bench --backend cuda. "
        "TFLOP/s count 4 B H S^2 D forward (half causal), 2.5 times that backward.")
    p.add_argument("--shape", type=common.shape, action="append", metavar="B,H,S,D[,c]",
                   help="a shape to measure, ',c' for causal; repeat for more (default: mxfa bench's, %s)" %
                   " ".join(common.DEVICE_SHAPES))
    p.add_argument("--backends", default=",".join(BACKENDS), help="a list of cudnn, flash (default both)")
    p.add_argument("--reps", type=common.positive, default=20, help="timed calls, median reported (default 20)")
    p.add_argument("--no-backward", action="store_true", help="skip the backward pass")
    a = p.parse_args()
    a.shape = a.shape or [common.shape(s) for s in common.DEVICE_SHAPES]
    a.backends = a.backends.split(",")
    if not a.backends or any(b not in BACKENDS for b in a.backends):
        p.error("--backends: expected a list of cudnn and flash, got '%s'" % ",".join(a.backends))
    return a


def measure(torch, sh, backends, reps, backward):
    """Print a row for each backend at one shape."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa
    kernels = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}
    b, h, s, d, causal = sh
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
    for name in backends:
        try:
            with sdpa_kernel(kernels[name]):
                times = common.attention_seconds(torch, lambda: sdpa(q, k, v, is_causal=causal), (q, k, v), dout,
                                                 reps, backward)
        except RuntimeError as e:  # a backend that does not take this shape or GPU
            print("%-26s %-8s unavailable: %s" % (common.shape_name(sh), name, str(e).splitlines()[0][:80]))
            continue
        print(common.attention_row(sh, name, 8, *times))


def main():
    a = parse_args()
    torch = common.import_torch()
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU is visible to PyTorch")
    torch.manual_seed(0)
    print("torch %s, %s, cuDNN %s; bf16 [B, H, S, D], median of %d" %
          (torch.__version__, torch.cuda.get_device_name(), torch.backends.cudnn.version(), a.reps))
    print(common.ATTENTION_HEADER)
    print(common.attention_columns(8, "backend"))
    for sh in a.shape:
        measure(torch, sh, a.backends, a.reps, not a.no_backward)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
