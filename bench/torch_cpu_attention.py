#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The CPU baseline of `mxfa bench --backend cpu`: what a study without mxfa
runs. Q, K and V are fake-quantized to MXFP8 (E4M3, blocks of 32 with rceil
scales: Q and K along D, V along the keys, as mxfa quantizes them), then
attention runs in float32 PyTorch, softmax(Q K^T / sqrt(D)) V, no mask; the
backward pass goes straight through the fake quantization.

Rates count FLOPs as mxfa bench does: 4 H S^2 D forward, 2.5 times that
backward. Each time is the median of --reps calls: the forward pass with its fake
quantization, and the backward pass alone (autograd through the graph of
one forward call, which mxfa_attn_bwd's given O and LSE correspond to). Run
it right after `mxfa bench --backend cpu --no-causal` with the same
--heads, --seqlen and thread count, and divide the rates.

PyTorch's float32 products run in its BLAS: a PyTorch that loads the
reference BLAS is about ten times slower than one that loads OpenBLAS (on
Debian, install libopenblas0-pthread), so the first line names the BLAS
library the process loaded.
"""

import argparse
import os

import common


def parse_args():
    p = argparse.ArgumentParser(
        description="Fake-quantized MXFP8 attention in float32 PyTorch on the CPU, forward and backward: "
        "the baseline of mxfa bench --backend cpu. GFLOP/s count 4 H S^2 D forward, 2.5 times that backward.")
    p.add_argument("--heads", type=common.positive, default=4, help="H (default 4)")
    p.add_argument("--seqlen", type=common.positive, default=2048, help="S, a multiple of 32 (default 2048)")
    p.add_argument("--dims", default="64,128,256", help="head dims D, a list of multiples of 32 (default 64,128,256)")
    p.add_argument("--threads", type=common.positive, help="torch.set_num_threads (default: PyTorch's own choice)")
    p.add_argument("--reps", type=common.positive, default=3, help="timed runs, median reported (default 3)")
    p.add_argument("--no-backward", action="store_true", help="skip the backward pass")
    a = p.parse_args()
    try:
        dims = [int(d) for d in a.dims.split(",")]
    except ValueError:
        dims = []
    if not dims or any(d < 32 or d % 32 for d in dims):
        p.error("--dims: expected a list of multiples of 32, got '%s'" % a.dims)
    a.dims = dims
    if a.seqlen % 32:
        p.error("--seqlen: expected a multiple of 32, got %d" % a.seqlen)
    return a


def blas_name():
    """The file name of the BLAS library this process has loaded, from the
    Linux process map: a PyTorch package can say which BLAS it was built
    against but not which one the system's alternatives supply."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "/" in line}
    except OSError:
        return "BLAS unknown"
    names = sorted({os.path.join(*os.path.realpath(p).split(os.sep)[-2:]) for p in paths
                    if any(key in os.path.basename(p).lower() for key in ("blas", "mkl_rt", "libmkl", "blis"))})
    return ", ".join(names) or "BLAS unknown"


def main():
    a = parse_args()
    torch = common.import_torch()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    h, s = a.heads, a.seqlen

    def straight_through(x, dim):
        return x + (common.fake_mx(x.detach(), dim) - x.detach())

    def forward(q, k, v):
        qq, kk, vv = straight_through(q, -1), straight_through(k, -1), straight_through(v, -2)
        scores = torch.matmul(qq, kk.transpose(-1, -2)) * q.shape[-1] ** -0.5
        return torch.matmul(torch.softmax(scores, -1), vv)

    torch.matmul(torch.ones(64, 64), torch.ones(64, 64))  # loads the BLAS
    print("torch %s (%s) on the CPU, %d thread%s, H=%d S=%d, median of %d" %
          (torch.__version__, blas_name(), torch.get_num_threads(),
           "" if torch.get_num_threads() == 1 else "s", h, s, a.reps))
    print("%-40s %10s %-8s %10s" % ("operation", "rate", "", "seconds"))
    for d in a.dims:
        q, k, v, dout = (torch.randn(h, s, d) for _ in range(4))
        flops = common.attention_flops(1, h, s, d, False)
        t_fwd = common.cpu_seconds(lambda: forward(q, k, v), a.reps)
        print("%-40s %10s %-8s %10.4f" % ("attn fwd torch-fakequant D=%d" % d, common.rate(flops, t_fwd, 1e-9, 2),
                                          "GFLOP/s", t_fwd))
        if a.no_backward:
            continue
        qg, kg, vg = (x.clone().requires_grad_() for x in (q, k, v))
        out = forward(qg, kg, vg)
        t_bwd = common.cpu_seconds(lambda: torch.autograd.grad(out, (qg, kg, vg), dout, retain_graph=True), a.reps)
        print("%-40s %10s %-8s %10.4f" % ("attn bwd torch-fakequant D=%d" % d, common.rate(2.5 * flops, t_bwd, 1e-9, 2),
                                          "GFLOP/s", t_bwd))


if __name__ == "__main__":
    main()
