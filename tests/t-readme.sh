#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The C example of README.md, as it stands there: the first ```c block is
# taken out of the README, compiled as a user would (C11, every warning an
# error, only mxfa.h and libc) against the build's libmxfa through its
# libtool, and run; it checks its own result and must exit 0, and print
# what the README says it prints (every backend gives the same numbers).
src=${MXFA_SRCDIR:-..}
top=${MXFA_BUILDDIR:-..}
cc=${CC:-cc}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t-readme.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
echo "1..4"
awk '/^```c$/ { inside = 1; next } /^```/ { if (inside) exit } inside' "$src/README.md" > "$tmp/example.c"
if grep -q 'int main' "$tmp/example.c"; then
    echo "ok 1 - README.md has a C example with a main ($(wc -l < "$tmp/example.c") lines)"
else
    echo "not ok 1 - README.md has no C example with a main"
fi
# MXFA_CFLAGS and MXFA_LDFLAGS: the build's own flags (Makefile.am), the
# sanitizers' among them, whose runtime a sanitized libmxfa needs in the
# program too
if out=$("$top/libtool" --mode=link $cc -std=c11 -Wall -Wextra -Werror -pedantic ${MXFA_CFLAGS:-} \
        -I"$src/lib" -I"$top/lib" ${MXFA_LDFLAGS:-} -o "$tmp/example" "$tmp/example.c" "$top/libmxfa.la" 2>&1); then
    echo "ok 2 - the example compiles with warnings as errors and links with libmxfa ($cc)"
else
    echo "not ok 2 - the example does not compile or link"
    printf '%s\n' "$out" | sed 's/^/#   /'
fi
if [ ! -x "$tmp/example" ]; then
    echo "not ok 3 - the example runs (it was not built)"
elif out=$("$tmp/example" 2>&1); then
    echo "ok 3 - the example runs and checks its own result: $out"
else
    echo "not ok 3 - the example failed (exit $?)"
    printf '%s\n' "$out" | sed 's/^/#   /'
fi
said=$(tr '\n' ' ' < "$src/README.md" | tr -s ' ')
line=$(printf '%s\n' "$out" | sed 's/on the [a-z]* backend/on the cpu backend/')
if [ -n "$line" ] && case $said in *"\`$line\`"*) true ;; *) false ;; esac; then
    echo "ok 4 - README.md quotes what the example prints"
else
    echo "not ok 4 - README.md does not quote what the example prints: '$line'"
fi
