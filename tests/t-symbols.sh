#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The shared library exports the public API and nothing else: every
# defined dynamic symbol starts with mxfa_, and every function declared
# MXFA_API in mxfa.h is exported.
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
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDRBVW]$/ {print $3}' | sed 's/@.*//' | sort -u)
stray=$(printf '%s\n' "$exported" | grep -v '^mxfa_' | grep -v '^_init$' | grep -v '^_fini$' | grep -v '^$')
if [ -z "$stray" ]; then
    echo "ok 1 - only mxfa_* symbols are exported ($(printf '%s\n' "$exported" | grep -c '^mxfa_') of them)"
else
    echo "not ok 1 - symbols exported besides mxfa_*:"
    printf '%s\n' "$stray" | sed 's/^/#   /'
fi
declared=$(sed -n 's/^MXFA_API [^(]*[ *]\(mxfa_[a-z0-9_]*\)(.*/\1/p' "$src/lib/mxfa.h" | sort -u)
missing=$(printf '%s\n' "$declared" | while read -r f; do
    printf '%s\n' "$exported" | grep -qx "$f" || echo "$f"
done)
if [ -n "$declared" ] && [ -z "$missing" ]; then
    echo "ok 2 - all $(printf '%s\n' "$declared" | wc -l) functions declared MXFA_API in mxfa.h are exported"
else
    echo "not ok 2 - declared in mxfa.h but not exported:"
    printf '%s\n' "$missing" "(declared: $(printf '%s ' $declared))" | sed 's/^/#   /'
fi
