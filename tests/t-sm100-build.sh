#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The Blackwell (sm_100a) kernels, which no machine of the test suite can
# run, checked as built: each compiles for sm_100a, ptxas spills nothing
# and keeps no stack in them (its report, which the build keeps beside the
# object, or a compile of our own where there is none), their resource use
# is printed as a diagnostic (docs/BLACKWELL.md records it), and where cuobjdump is
# installed the machine code holds the tensor-core instructions the design
# names: the block-scaled MMA (UTCQMMA), the bf16 one of the leak-free
# mask's diagonal blocks (UTCHMMA), the scale copy into tensor memory
# (UTCCP), the commit to an mbarrier (UTCBAR) and the tensor-memory loads
# and stores (LDTM, STTM). SKIP without nvcc (configure --with-cuda).
if [ -z "${NVCC:-}" ]; then
    echo "1..0 # SKIP nvcc is not configured (configure --with-cuda)"
    exit 0
fi
top=${MXFA_BUILDDIR:-..}
src=${MXFA_SRCDIR:-..}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# file, then the SASS mnemonics its sm_100a code must contain
kernels="gemm_mxf8:UTCQMMA,UTCCP,UTCBAR,LDTM,STTM gemm_bf16:UTCHMMA,UTCBAR,LDTM,STTM attn_fwd:UTCQMMA,UTCHMMA,UTCCP,UTCBAR,LDTM,STTM attn_bwd:UTCQMMA,UTCCP,UTCBAR,LDTM,STTM"
# file, then its kernels that move registers between warpgroups with
# setmaxnreg, whose split adds up to 128 a thread: launched with fewer, an
# increase would wait forever
split="attn_fwd:attn_fwd_pingpong attn_bwd:attn_bwd_fused"
echo "1..$(( $(echo $kernels | wc -w) * 3 + $(echo $split | wc -w) ))"
cuobjdump=$(command -v cuobjdump || { [ -n "$NVCC" ] && d=$(dirname "$(command -v "$NVCC")") && [ -x "$d/cuobjdump" ] && echo "$d/cuobjdump"; })
n=0
for k in $kernels; do
    f=${k%%:*}
    want=$(echo "${k#*:}" | tr ',' ' ')
    obj="$top/gpu/sm100/$f.o"
    n=$((n + 1))
    if [ -s "$obj.ptxas" ] && [ -s "$obj" ] && grep -q "sm_100a" "$obj.ptxas"; then
        cp "$obj.ptxas" "$tmp/$f.log"
        echo "ok $n - gpu/sm100/$f.cu compiled for sm_100a by the build (its ptxas report)"
    elif $NVCC -gencode=arch=compute_100a,code=sm_100a -fmad=false -O3 -std=c++17 -Xptxas -v \
            -I"$src/lib" -I"$top/lib" -I"$src/gpu" -I"$src/gpu/common" \
            -c "$src/gpu/sm100/$f.cu" -o "$tmp/$f.o" > "$tmp/$f.log" 2>&1; then
        obj="$tmp/$f.o"
        echo "ok $n - gpu/sm100/$f.cu compiles for sm_100a"
    else
        sed 's/^/# /' "$tmp/$f.log"
        echo "not ok $n - gpu/sm100/$f.cu compiles for sm_100a"
        n=$((n + 1)); echo "ok $n # SKIP not compiled"
        n=$((n + 1)); echo "ok $n # SKIP not compiled"
        continue
    fi
    # the report's sm_100a entries: registers, shared memory and spills
    awk '/Compiling entry function/ { on = ($0 ~ /for .sm_100a./); if (on) { k = $0; sub(/.*function ./, "", k); sub(/. for.*/, "", k) } }
         on && /Used [0-9]+ registers/ { print "# sm_100a " k ": " $0 }
         on && /bytes spill stores/ { print "# sm_100a " k ": " $0 }' "$tmp/$f.log" | sed 's/ptxas info *: //'
    n=$((n + 1))
    # a spill, or a stack frame (an array indexed at run time lives there:
    # the ping-pong softmax's row of scores must stay in registers)
    spills=$(awk '/Compiling entry function/ { on = ($0 ~ /for .sm_100a./) }
        on && / bytes spill stores/ { for (i = 1; i < NF; i++) if ($(i + 1) == "bytes" && ($(i + 2) == "spill" || $(i + 2) == "stack") && $i + 0 > 0) { print; break } }' "$tmp/$f.log")
    if [ -n "$spills" ]; then
        echo "$spills" | sed 's/^/# /'
        echo "not ok $n - ptxas spills or keeps a stack in the sm_100a kernels of $f"
    elif grep -q "for 'sm_100a'" "$tmp/$f.log"; then
        echo "ok $n - no spills and no stack in the sm_100a kernels of $f"
    else
        echo "not ok $n - ptxas's report on $f has no sm_100a entry"
    fi
    for sp in $split; do
        [ "${sp%%:*}" = "$f" ] || continue
        kn=${sp#*:}
        n=$((n + 1))
        odd=$(awk -v kn="$kn" '/Compiling entry function/ { on = ($0 ~ /for .sm_100a./ && index($0, kn) > 0) }
            on && /Used [0-9]+ registers/ { if ($0 !~ /Used 128 registers/) print }' "$tmp/$f.log")
        if [ -n "$odd" ]; then
            echo "$odd" | sed 's/^/# /'
            echo "not ok $n - the $kn kernels of $f are not built for 128 registers a thread"
        elif grep -q "$kn.*for 'sm_100a'" "$tmp/$f.log"; then
            echo "ok $n - the $kn kernels of $f are built for 128 registers a thread (their setmaxnreg split)"
        else
            echo "not ok $n - ptxas's report on $f has no $kn kernel"
        fi
    done
    n=$((n + 1))
    if [ -z "$cuobjdump" ]; then
        echo "ok $n # SKIP cuobjdump is not installed: the SASS of $f is not inspected here"
        continue
    fi
    if ! "$cuobjdump" -sass -arch sm_100a "$obj" > "$tmp/$f.sass" 2>&1; then
        sed 's/^/# /' "$tmp/$f.sass" | head -n 5
        echo "not ok $n - cuobjdump disassembles the sm_100a code of $f"
        continue
    fi
    missing=""
    for m in $want; do
        c=$(grep -c "$m" "$tmp/$f.sass")
        echo "# $f: $m x $c"
        [ "$c" -gt 0 ] || missing="$missing $m"
    done
    if [ -z "$missing" ]; then
        echo "ok $n - the sm_100a code of $f holds$(printf ' %s' $want)"
    else
        echo "not ok $n - the sm_100a code of $f lacks$missing"
    fi
done
