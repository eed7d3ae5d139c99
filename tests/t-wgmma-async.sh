#!/bin/sh
# The GEMM kernels' wgmma instructions must stay asynchronous. When ptxas
# cannot prove that nothing touches the registers of a wgmma in flight (or
# that no divergent branch runs meanwhile) it waits for each one to finish,
# which leaves every bit of the output as it was and makes the kernel
# several times slower (BENCHMARKS.md); it says so only under -v. This
# compiles the GEMM and attention kernels for sm_90a, as the module does,
# and fails on that remark, and on spills in the attention kernels beyond
# what is stated below (their registers are budgeted to the last few).
# SKIP without nvcc (configure --with-cuda).
if [ -z "${NVCC:-}" ]; then
    echo "1..0 # SKIP nvcc is not configured (configure --with-cuda)"
    exit 0
fi
top=${MXFA_BUILDDIR:-..}
src=${MXFA_SRCDIR:-..}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
files="gemm_fp8 gemm_bf16 attn_fwd_d64 attn_fwd_d128 attn_fwd_d256"
echo "1..13"
n=0
for f in $files; do
    n=$((n + 1))
    if ! $NVCC -gencode=arch=compute_90a,code=sm_90a -fmad=false -O3 -std=c++17 -Xptxas -v \
            -I"$src/lib" -I"$top/lib" -I"$src/gpu" -I"$src/gpu/common" \
            -c "$src/gpu/sm90/$f.cu" -o "$tmp/$f.o" > "$tmp/$f.log" 2>&1; then
        sed 's/^/# /' "$tmp/$f.log"
        echo "not ok $n - gpu/sm90/$f.cu compiles for sm_90a"
        n=$((n + 1))
        echo "ok $n # SKIP not compiled"
        case $f in attn_fwd*) n=$((n + 1)); echo "ok $n # SKIP not compiled" ;; esac
        continue
    fi
    echo "ok $n - gpu/sm90/$f.cu compiles for sm_90a"
    n=$((n + 1))
    if grep -q "serialized" "$tmp/$f.log"; then
        grep "serialized" "$tmp/$f.log" | sed 's/^/# /'
        echo "not ok $n - ptxas serializes the wgmma instructions of $f"
    else
        echo "ok $n - ptxas keeps every wgmma of $f asynchronous (no serialization remark)"
    fi
    # the most bytes a kernel of the file may spill: none, but at D = 256,
    # where O takes 128 of a consumer thread's 240 registers, ptxas stores
    # two values (8 bytes) once and reloads them a few times a tile
    case $f in
    attn_fwd_d256) allowed=8 ;;
    attn_fwd*) allowed=0 ;;
    *) continue ;;
    esac
    n=$((n + 1))
    most=$(sed -n 's/.* \([0-9][0-9]*\) bytes spill stores.*/\1/p' "$tmp/$f.log" | sort -n | tail -n 1)
    if [ "${most:-0}" -gt "$allowed" ]; then
        grep "spill stores" "$tmp/$f.log" | grep -v " 0 bytes spill stores" | sed 's/^/# /'
        echo "not ok $n - ptxas spills more than $allowed bytes in a kernel of $f (${most} bytes)"
    else
        echo "ok $n - $f spills at most $allowed bytes in a kernel (${most:-0})"
    fi
done
