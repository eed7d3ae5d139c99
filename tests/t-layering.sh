#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The layering: lib/ (the API, its checks, the float64 truth, the backend
# registry) sits above the backends and reaches them only through the
# mxfa_backend tables. No file of lib/ includes a header of cpu/ or gpu/,
# and none names a function that only cpu/ or gpu/ defines (the ref
# backend's mxfa_ref_*, the cpu backend's mxfa_cpu_*, the product model's
# mxfa_mma_*), as its objects show.
src=${MXFA_SRCDIR:-..}
echo "1..2"
headers=$(cd "$src" && find cpu gpu -name '*.h' -o -name '*.cuh' | sed 's|.*/||' | sort -u)
bad=""
for f in "$src"/lib/*.c "$src"/lib/*.h; do
    for h in $headers; do
        if grep -q "^#include \"$h\"" "$f"; then
            bad="$bad ${f#"$src"/}:$h"
        fi
    done
done
if [ -z "$bad" ] && [ -n "$headers" ]; then
    echo "ok 1 - no file of lib/ includes a header of cpu/ or gpu/"
else
    echo "not ok 1 - lib/ includes backends' headers:$bad"
fi
# The objects say what lib/ calls: its undefined symbols that the backends'
# objects define and lib/'s do not, apart from the two backend tables the
# registry lists.
top=${MXFA_BUILDDIR:-..}
if ! command -v nm > /dev/null 2>&1; then
    echo "ok 2 # SKIP no nm to read the objects"
    exit 0
fi
objs() { find "$top/$1" -name '*.o' ! -path '*/.libs/*' 2> /dev/null; }
lib_objs=$(objs lib)
backend_objs=$(objs cpu; objs gpu)
if [ -z "$lib_objs" ] || [ -z "$backend_objs" ]; then
    echo "not ok 2 - no objects of lib/ or of the backends under $top (build first)"
    exit 0
fi
defined=$(mktemp "${TMPDIR:-/tmp}/t-layering.XXXXXX") || exit 1
trap 'rm -f "$defined" "$defined.lib"' EXIT
nm -g --defined-only $backend_objs 2> /dev/null | awk 'NF == 3 {print $3}' | sort -u > "$defined"
nm -g --defined-only $lib_objs 2> /dev/null | awk 'NF == 3 {print $3}' | sort -u > "$defined.lib"
reach=$(nm -u $lib_objs 2> /dev/null | awk '{print $NF}' | sort -u | grep -x -F -f "$defined" |
        grep -v -x -F -f "$defined.lib" | grep -v -x -e '_*mxfa_backend_ref' -e '_*mxfa_backend_cpu')
if [ -z "$reach" ]; then
    echo "ok 2 - lib/'s objects call no function that only the backends define (the registry's two tables aside)"
else
    echo "not ok 2 - lib/ reaches into the backends:" $reach
fi
