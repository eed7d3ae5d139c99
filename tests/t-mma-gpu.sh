#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The Hopper tensor-core models against the hardware: runs gpu/sm90/mma-probe
# (built with --with-cuda) when an sm_90 GPU is usable, and reports SKIP
# otherwise. MXFA_PROBE_ARGS passes options (for example --cases 100000).
src=${MXFA_SRCDIR:-..}
. "$src/tests/gpu-probe.sh"
gpu_probe mma-probe "wgmma fp8 and bf16 outputs equal the emulator's instruction models bit for bit" \
    "wgmma outputs differ from the emulator's instruction models" \
    --hand "$src/tests/data/mma_hand.txt" ${MXFA_PROBE_ARGS:-}
