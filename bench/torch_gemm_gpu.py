#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The GEMM baselines of `mxfa bench --backend cuda`: cuBLAS through
PyTorch at mxfa bench's product size, N x N x N, in bf16 (torch.matmul)
and in E4M3 with one scale per tensor (torch._scaled_mm, bf16 out), the
fp8 product cuBLAS offers on Hopper.

The operands are drawn from a standard normal (the E4M3 ones are those
rounded). TFLOP/s count 2 N^3, as mxfa bench does; each call is timed
alone between two CUDA events, median of --reps. Run it on the same GPU
right after `mxfa bench --backend cuda` and divide the rates.
"""

import argparse

import common


def parse_args():
    p = argparse.ArgumentParser(
        description="cuBLAS GEMMs through PyTorch on a CUDA GPU, bf16 and fp8 with per-tensor scales: "
        "the GEMM baselines of mxfa bench --backend cuda. TFLOP/s count 2 N^3.")
    p.add_argument("--size", type=common.positive, default=8192, help="N of the N x N x N product (default 8192)")
    p.add_argument("--reps", type=common.positive, default=20, help="timed calls, median reported (default 20)")
    return p.parse_args()


def main():
    a = parse_args()
    torch = common.import_torch()
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU is visible to PyTorch")
    torch.manual_seed(0)
    n = a.size
    x = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    # _scaled_mm takes A row-major and B column-major
    x8, y8 = x.to(torch.float8_e4m3fn), y.to(torch.float8_e4m3fn).t().contiguous().t()
    one = torch.ones((), device="cuda")
    products = (
        ("cuBLAS bf16", lambda: x @ y),
        ("cuBLAS e4m3, per-tensor scales", lambda: torch._scaled_mm(x8, y8, scale_a=one, scale_b=one,
                                                                     out_dtype=torch.bfloat16)),
    )
    print("torch %s, %s; median of %d" % (torch.__version__, torch.cuda.get_device_name(), a.reps))
    print("%-40s %10s %10s" % ("operation", "TFLOP/s", "ms"))
    for name, fn in products:
        t = common.cuda_seconds(fn, a.reps)
        print("%-40s %10s %10.4f" % ("gemm %d^3 %s" % (n, name), common.rate(2.0 * n ** 3, t, 1e-12), t * 1e3))


if __name__ == "__main__":
    main()
