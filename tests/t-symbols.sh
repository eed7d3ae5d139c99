#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The shared library exports the public API and nothing else: every
# defined dynamic symbol is a function declared MXFA_API in mxfa.h, and
# every such function is exported.
top=${MXFA_BUILDDIR:-..}
src=${MXFA_SRCDIR:-..}
lib=$(ls "$top"/.libs/libmxfa.so.* 2>/dev/null | head -n 1)
if [ -z "$lib" ]; then
    echo "1..0 # SKIP no shared libmxfa was built"
    exit 0
fi
if ! command -v nm >/dev/null 2>&1; then
    echo "1..0 # SKIP nm is not installed"
    exit 0
fi
echo "1..2"
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDRBVW]$/ {print $3}' | sed 's/@.*//' | sort -u |
    grep -v -x -e '_init' -e '_fini' -e '')
declared=$(sed -n 's/^MXFA_API [^(]*[ *]\(mxfa_[a-z0-9_]*\)(.*/\1/p' "$src/lib/mxfa.h" | sort -u)
# Exactly the declared set, as libsodium holds its exports: an internal
# function with the mxfa_ prefix that leaks out of the library fails here.
stray=$(printf '%s\n' "$exported" | while read -r f; do
    printf '%s\n' "$declared" | grep -qx "$f" || echo "$f"
done)
if [ -n "$exported" ] && [ -z "$stray" ]; then
    echo "ok 1 - every exported symbol is declared MXFA_API in mxfa.h ($(printf '%s\n' "$exported" | wc -l) of them)"
else
    echo "not ok 1 - symbols exported but not declared MXFA_API in mxfa.h:"
    printf '%s\n' "$stray" | sed 's/^/#   /'
fi
missing=$(printf '%s\n' "$declared" | while read -r f; do
    printf '%s\n' "$exported" | grep -qx "$f" || echo "$f"
done)
if [ -n "$declared" ] && [ -z "$missing" ]; then
    echo "ok 2 - all $(printf '%s\n' "$declared" | wc -l) functions declared MXFA_API in mxfa.h are exported"
else
    echo "not ok 2 - declared in mxfa.h but not exported:"
    printf '%s\n' "$missing" "(declared: $(printf '%s ' $declared))" | sed 's/^/#   /'
fi
