#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# mxfa.h stands alone and is clean C99, C11 and C++: a translation unit
# that includes only it and calls through it compiles with every warning
# as an error, under each language standard.
src=${MXFA_SRCDIR:-..}
top=${MXFA_BUILDDIR:-..}
cc=${CC:-cc}
cxx=${CXX:-c++}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t-header.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/use.c" <<'EOT'
#include <mxfa.h>
#include <mxfa.h> /* twice: the include guard */

int use_header(void);
int use_header(void)
{
    mxfa_ctx *ctx = 0;
    mxfa_attn_params p;
    mxfa_metrics m;
    mxfa_attn_params_default(&p);
    m.count = 0;
    if (mxfa_open(&ctx, "ref") != MXFA_OK)
        return (int)m.count;
    mxfa_close(ctx);
    return mxfa_version_number() > 0 && mxfa_strerror(MXFA_ERR_INVALID) != 0;
}
EOT
cp "$tmp/use.c" "$tmp/use.cc"
warn="-Wall -Wextra -Werror -pedantic -pedantic-errors"
inc="-I$src/lib -I$top/lib"
echo "1..3"
n=0
for std in c99 c11; do
    n=$((n + 1))
    if out=$($cc -std=$std $warn -Wstrict-prototypes -Wmissing-prototypes $inc -c "$tmp/use.c" -o "$tmp/use_$std.o" 2>&1); then
        echo "ok $n - mxfa.h compiles as $std with warnings as errors ($cc)"
    else
        echo "not ok $n - mxfa.h does not compile cleanly as $std"
        printf '%s\n' "$out" | sed 's/^/#   /'
    fi
done
if ! command -v "$cxx" >/dev/null 2>&1; then
    echo "ok 3 # SKIP no C++ compiler ($cxx) is installed"
elif out=$($cxx -std=c++11 $warn $inc -c "$tmp/use.cc" -o "$tmp/use_cxx.o" 2>&1); then
    echo "ok 3 - mxfa.h compiles as C++11 with warnings as errors ($cxx)"
else
    echo "not ok 3 - mxfa.h does not compile cleanly as C++11"
    printf '%s\n' "$out" | sed 's/^/#   /'
fi
