#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The baseline scripts of bench/, which BENCHMARKS.md's ratios come from,
# cannot rot unnoticed: each compiles, says what it measures under --help
# and refuses a bad argument. With PyTorch the CPU baseline runs on a tiny
# shape, and its fake quantization is held to libmxfa's rceil bytes; with a
# CUDA GPU visible to PyTorch the GPU baselines run on tiny shapes too.
# SKIP without a Python 3; the parts that need PyTorch, numpy, libmxfa or a
# GPU SKIP without them.
src=${MXFA_SRCDIR:-..}
top=${MXFA_BUILDDIR:-..}
py=${PYTHON:-python3}
if [ "$py" = ":" ]; then
    py=python3
fi
if ! command -v "$py" > /dev/null 2>&1 ||
    ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 6))' 2> /dev/null; then
    echo "1..0 # SKIP no Python 3"
    exit 0
fi
# the scripts import bench/common.py: no bytecode in a read-only source tree
PYTHONDONTWRITEBYTECODE=1
export PYTHONDONTWRITEBYTECODE
bench=$src/bench
scripts="torch_cpu_attention.py torch_sdpa_gpu.py torch_gemm_gpu.py torch_fakequant_gpu.py"
echo "1..18"
n=0

# report DESCRIPTION STATUS OUTPUT: one TAP line, with OUTPUT as diagnostics on failure
report() {
    n=$((n + 1))
    if [ "$2" -eq 0 ]; then
        echo "ok $n - $1"
    else
        echo "not ok $n - $1"
        printf '%s\n' "$3" | sed 's/^/#   /'
    fi
}
skip() {
    n=$((n + 1))
    echo "ok $n # SKIP $1"
}

for f in common.py $scripts; do
    out=$("$py" -c 'import sys; compile(open(sys.argv[1]).read(), sys.argv[1], "exec")' "$bench/$f" 2>&1)
    report "bench/$f compiles" $? "$out"
done

for f in $scripts; do
    out=$("$py" "$bench/$f" --help 2>&1)
    status=$?
    case $out in
    usage:*FLOP/s*) ;;
    *) [ $status -eq 0 ] && status=1 ;;
    esac
    report "bench/$f --help says what it measures, without PyTorch" $status "$out"
done

# refused ARGS...: argparse's exit status 2 and a message naming the option
refused() {
    f=$1
    opt=$2
    shift
    out=$("$py" "$bench/$f" "$@" 2>&1)
    status=$?
    case $out in
    *"$opt"*) ;;
    *) status=0 ;;
    esac
    [ $status -eq 2 ]
    report "bench/$f refuses $*" $? "exit status $status: $out"
}
refused torch_cpu_attention.py --dims 48
refused torch_sdpa_gpu.py --shape 1,2,3
refused torch_gemm_gpu.py --size 0
refused torch_fakequant_gpu.py --shape 1,1,40,64

if ! "$py" -c 'import torch' 2> /dev/null; then
    for what in "the CPU baseline on a tiny shape" "fake quantization against libmxfa" "torch_sdpa_gpu.py" \
        "torch_gemm_gpu.py" "torch_fakequant_gpu.py"; do
        skip "PyTorch is not installed for $py: $what"
    done
    exit 0
fi

out=$("$py" "$bench/torch_cpu_attention.py" --heads 1 --seqlen 64 --dims 32,64 --threads 1 --reps 1 2>&1)
status=$?
# four rows, each with a rate and a time
rows=$(printf '%s\n' "$out" | grep -c '^attn [fb]wd torch-fakequant D=[36][24]  *[0-9][0-9.]* GFLOP/s  *[0-9][0-9.]*$')
[ $status -eq 0 ] && [ "$rows" -eq 4 ]
report "the CPU baseline measures forward and backward at D = 32 and 64" $? "$out"

lib=$top/.libs/libmxfa.so.0
if ! "$py" -c 'import numpy' 2> /dev/null; then
    skip "numpy is not installed for $py: fake quantization against libmxfa"
elif [ ! -f "$lib" ]; then
    skip "no shared libmxfa in this build ($lib): fake quantization against libmxfa"
elif command -v ldd > /dev/null 2>&1 && ldd "$lib" 2> /dev/null | grep -q 'libasan'; then
    skip "libmxfa is built with AddressSanitizer, which a Python process cannot load"
else
    # Blocks that reach every part of the rceil rule and of E4M3's rounding:
    # a block of 448s (the product with fl(1/448) rounds to 1), 2^-126,
    # values near FLT_MAX and near the fp32 subnormals, an all-zero block,
    # rounding ties and values that round into the next binade.
    out=$(MXFA_LIBRARY=$lib PYTHONPATH=$src/python:$bench "$py" - 2>&1 <<'EOT'
import numpy as np
import torch

import common
import mxfa

rng = np.random.default_rng(28)
x = rng.standard_normal((64, 256)).astype(np.float32)
x[0] = 448
x[1, :32] = 2.0 ** -126
x[2] *= 1e-38
x[3] *= np.float32(3e38 / 8)
x[4, :32] = 0
x[5] = rng.choice(np.array([1, 1.0625, 1.1875, 15.5, 464, 480, 2.0 ** -10, 3 * 2.0 ** -11], np.float32), 256)
x[6] = np.float32(3.4e38)
x[7:] *= np.exp2(rng.integers(-60, 60, (57, 1))).astype(np.float32)
bad = 0
for dim, block in ((-1, "row"), (0, "col")):
    want = mxfa.dequantize(mxfa.quantize(x, block, "rceil", "e4m3", backend="ref"), backend="ref").view(np.uint32)
    got = common.fake_mx(torch.from_numpy(x), dim).numpy().view(np.uint32)
    for i, j in np.argwhere(got != want)[:5]:
        print("%s blocks: x[%d, %d] = %r gives %08x, libmxfa %08x" % (block, i, j, x[i, j], got[i, j], want[i, j]))
    bad += int((got != want).sum())
raise SystemExit(bad != 0)
EOT
)
    report "fake quantization in bench/common.py gives libmxfa's rceil E4M3 values, row and col blocks" $? "$out"
fi

if ! "$py" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2> /dev/null; then
    for f in torch_sdpa_gpu.py torch_gemm_gpu.py torch_fakequant_gpu.py; do
        skip "no CUDA GPU visible to PyTorch: $f"
    done
    exit 0
fi
# gpu_rows F PATTERN COUNT ARGS...: F runs and prints COUNT rows that match
# the extended regular expression PATTERN
gpu_rows() {
    f=$1
    pattern=$2
    count=$3
    shift 3
    out=$("$py" "$bench/$f" "$@" 2>&1)
    status=$?
    rows=$(printf '%s\n' "$out" | grep -Ec "$pattern")
    [ $status -eq 0 ] && [ "$rows" -eq "$count" ]
    report "bench/$f $* prints $count rows of rates" $? "$out"
}
num=' +[0-9][0-9.]*'
gpu_rows torch_sdpa_gpu.py "^1,2,256,64(,c)? +(cudnn|flash)($num){4}\$" 4 --shape 1,2,256,64 --shape 1,2,256,64,c \
    --reps 3
gpu_rows torch_gemm_gpu.py "^gemm 256\\^3 cuBLAS .*($num){2}\$" 2 --size 256 --reps 3
gpu_rows torch_fakequant_gpu.py "^1,2,256,64 +(cudnn|fakequant\\+cudnn)($num){4}\$" 2 --shape 1,2,256,64 --reps 3
