#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""What a Hopper user can run today for MXFP8 attention studies, to set
beside `mxfa bench --backend cuda`: Q, K and V fake-quantized to MXFP8
(E4M3, blocks of 32 with rceil scales: Q and K along D, V along the keys,
as mxfa quantizes them; back to bf16), then PyTorch's bf16
scaled_dot_product_attention through cuDNN. P is not quantized, and the
products are bf16, not block-scaled: the numbers are not mxfa's. The
backward pass goes straight through the fake quantization.

Each shape is measured twice, plain cuDNN and with the fake quantization,
so the cost of the quantization shows. TFLOP/s count FLOPs as mxfa bench
does: 4 B H S^2 D forward, half of it causal, 2.5 times that backward. Each
call is timed alone between two CUDA events, median of --reps: the forward
pass with its fake quantization, and the backward pass alone (autograd
through the graph of one forward call).
"""

import argparse

import common

SHAPES = ("4,16,4096,128", "4,16,4096,128,c", "8,16,2048,64", "2,16,8192,256")


def parse_args():
    p = argparse.ArgumentParser(
        description="MXFP8 fake quantization of Q, K and V in PyTorch, then bf16 cuDNN attention, forward and "
        "backward, beside plain cuDNN, on a CUDA GPU. TFLOP/s count 4 B H S^2 D forward (half causal), "
        "2.5 times that backward.")
    p.add_argument("--shape", type=common.shape, action="append", metavar="B,H,S,D[,c]",
                   help="a shape to measure, ',c' for causal; repeat for more (default: %s)" % " ".join(SHAPES))
    p.add_argument("--reps", type=common.positive, default=20, help="timed calls, median reported (default 20)")
    a = p.parse_args()
    a.shape = a.shape or [common.shape(s) for s in SHAPES]
    for sh in a.shape:
        if sh[2] % 32 or sh[3] % 32:
            p.error("--shape: S and D must be multiples of 32, got %s" % common.shape_name(sh))
    return a


def measure(torch, sh, reps):
    """Print the rows of plain cuDNN and of the fake quantization at one shape."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    class FakeMX(torch.autograd.Function):
        """MXFP8 quantization and back along dim; the gradient passes as it is."""

        @staticmethod
        def forward(ctx, x, dim):
            return common.fake_mx(x, dim).to(x.dtype)

        @staticmethod
        def backward(ctx, grad):
            return grad, None

    b, h, s, d, causal = sh
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
    variants = (
        ("cudnn", lambda: sdpa(q, k, v, is_causal=causal)),
        ("fakequant+cudnn", lambda: sdpa(FakeMX.apply(q, -1), FakeMX.apply(k, -1), FakeMX.apply(v, -2),
                                         is_causal=causal)),
    )
    for name, forward in variants:
        try:
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                times = common.attention_seconds(torch, forward, (q, k, v), dout, reps)
        except RuntimeError as e:  # cuDNN does not take this shape or GPU
            print("%-26s %-16s unavailable: %s" % (common.shape_name(sh), name, str(e).splitlines()[0][:80]))
            continue
        print(common.attention_row(sh, name, 16, *times))


def main():
    a = parse_args()
    torch = common.import_torch()
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU is visible to PyTorch")
    torch.manual_seed(0)
    print("torch %s, %s, cuDNN %s; bf16 [B, H, S, D], median of %d" %
          (torch.__version__, torch.cuda.get_device_name(), torch.backends.cudnn.version(), a.reps))
    print(common.ATTENTION_HEADER)
    print(common.attention_columns(16, "baseline"))
    for sh in a.shape:
        measure(torch, sh, a.reps)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
