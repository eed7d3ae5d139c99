#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The Hopper tensor-core models against the hardware: runs gpu/sm90/mma-probe
# (built with --with-cuda) when an sm_90 GPU is usable, and reports SKIP
# otherwise. MXFA_PROBE_ARGS passes options (for example --cases 100000).
top=${MXFA_BUILDDIR:-..}
probe="$top/gpu/sm90/mma-probe"
if [ ! -x "$probe" ]; then
    echo "1..0 # SKIP the GPU probe is not built (configure --with-cuda)"
    exit 0
fi
src=${MXFA_SRCDIR:-..}
out=$("$probe" --hand "$src/tests/data/mma_hand.txt" ${MXFA_PROBE_ARGS:-} 2>&1)
rc=$?
if [ $rc -eq 77 ]; then
    echo "1..0 # SKIP $(printf '%s\n' "$out" | tail -n 1)"
    exit 0
fi
echo "1..1"
printf '%s\n' "$out" | sed 's/^/# /'
if [ $rc -eq 0 ]; then
    echo "ok 1 - wgmma fp8 and bf16 outputs equal the emulator's instruction models bit for bit"
else
    echo "not ok 1 - wgmma outputs differ from the emulator's instruction models (exit $rc)"
fi
