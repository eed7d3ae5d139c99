#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Every source file of the tree names its licence: an SPDX line in its
# first three lines (after a shebang). Files that configure or the build
# make (config.h and the like) and test data are not sources.
src=${MXFA_SRCDIR:-..}
echo "1..2"
# In a git checkout the tracked files; in a release tarball every file.
list_files() {
    if [ -e "$src/.git" ] && command -v git >/dev/null 2>&1; then
        (cd "$src" && git ls-files | sed 's|^|./|')
    else
        (cd "$src" && find . \( -name '*.dir.*' -o -name '_build' -o -name '_inst' \) -prune -o -type f -print)
    fi
}
missing=$(list_files |
    grep -e '\.c$' -e '\.h$' -e '\.cu$' -e '\.cuh$' -e '\.py$' -e '\.sh$' -e '\.in$' \
        -e '/Makefile\.am$' -e '/configure\.ac$' -e '/bootstrap$' |
    grep -v -e '^\./config\.h' -e '^\./lib/mxfa_version\.h$' -e '^\./python/mxfa/_paths\.py$' \
        -e 'Makefile\.in$' -e '^\./build-aux/' -e '^\./m4/' -e '__pycache__' -e '^\./tests/fuzz/' |
    while read -r f; do
        head -n 3 "$src/$f" | grep -q 'SPDX-License-Identifier: BSD-3-Clause' || echo "$f"
    done)
n=$(cd "$src" && find . -name '*.c' -path './lib/*' | wc -l)
if [ "$n" -gt 0 ] && [ -z "$missing" ]; then
    echo "ok 1 - every source file carries SPDX-License-Identifier: BSD-3-Clause"
else
    echo "not ok 1 - source files without the SPDX line (or no sources found under $src):"
    printf '%s\n' "$missing" | sed 's/^/#   /'
fi
if grep -q 'Redistribution and use in source and binary forms' "$src/LICENSE" 2>/dev/null \
    && grep -q 'Neither the name of the copyright holder' "$src/LICENSE"; then
    echo "ok 2 - LICENSE holds the BSD 3-Clause text"
else
    echo "not ok 2 - LICENSE is missing or is not the BSD 3-Clause text"
fi
