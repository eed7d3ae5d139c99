#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# What the Hopper GPU's half-precision exponential computes: runs
# gpu/sm90/ex2-probe (built with --with-cuda) when an sm_90 GPU is usable,
# and reports SKIP otherwise. The probe passes when ex2.approx.f16 and
# .f16x2 give the exact 2^x rounded toward zero to f16 on every input but
# the one known exception (gpu/sm90/ex2_probe.cu).
. "${MXFA_SRCDIR:-..}/tests/gpu-probe.sh"
gpu_probe ex2-probe "ex2.approx.f16 and .f16x2 give RZ_f16(2^x) on all 65536 inputs but 0x8001" \
    "ex2.approx.f16 differs from RZ_f16(2^x)"
