#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# What the Hopper GPU's half-precision exponential computes: runs
# gpu/sm90/ex2-probe (built with --with-cuda) when an sm_90 GPU is usable,
# and reports SKIP otherwise. The probe passes when ex2.approx.f16 and
# .f16x2 give the exact 2^x rounded toward zero to f16 on every input but
# the one known exception (gpu/sm90/ex2_probe.cu).
top=${MXFA_BUILDDIR:-..}
probe="$top/gpu/sm90/ex2-probe"
if [ ! -x "$probe" ]; then
    echo "1..0 # SKIP the GPU probe is not built (configure --with-cuda)"
    exit 0
fi
out=$("$probe" 2>&1)
rc=$?
if [ $rc -eq 77 ]; then
    echo "1..0 # SKIP $(printf '%s\n' "$out" | tail -n 1)"
    exit 0
fi
echo "1..1"
printf '%s\n' "$out" | sed 's/^/# /'
if [ $rc -eq 0 ]; then
    echo "ok 1 - ex2.approx.f16 and .f16x2 give RZ_f16(2^x) on all 65536 inputs but 0x8001"
else
    echo "not ok 1 - ex2.approx.f16 differs from RZ_f16(2^x) (exit $rc)"
fi
