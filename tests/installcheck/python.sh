#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# make installcheck: the Python package installed the ways packagers
# install, with directories given to make rather than to configure, then
# imported from outside the source and build trees with nothing but
# PYTHONPATH (no MXFA_LIBRARY, no LD_LIBRARY_PATH) by use_mxfa.py, which
# checks that it loads the libmxfa of that install and quantizes through it:
#   make install prefix=DIR
#   make install prefix=DIR libdir=DIR/lib64
#   make install DESTDIR=STAGE prefix=DIR, the staged tree then moved to DIR
#
# The Makefile gives MAKE, PYTHON, MXFA_SRCDIR, mxfa_builddir, mxfa_prefix,
# mxfa_libdir and mxfa_pythondir (configure's, expanded) and
# mxfa_instrument_flags (the sanitizer and fuzzer flags the library was
# built with). Exit status 0
# when every install passed, or what cannot be done here said SKIP and why;
# 1 otherwise.
set -u

say() {
    echo "installcheck: python: $*"
}

fail() {
    echo "installcheck: python: FAIL: $*" >&2
    exit 1
}

if [ "$PYTHON" = ":" ] || [ -z "$PYTHON" ]; then
    say "SKIP: the package is not installed (configure found no Python 3, or was given --disable-python)"
    exit 0
fi
if ! "$PYTHON" -c 'import sys, numpy; sys.exit(tuple(int(v) for v in numpy.__version__.split(".")[:2]) < (1, 19))' \
    2> /dev/null; then
    say "SKIP: no numpy 1.19 or later for $PYTHON (install python3-numpy, or numpy for that Python)"
    exit 0
fi
if [ ! -f "$mxfa_builddir/.libs/libmxfa.so.0" ]; then
    say "SKIP: no shared libmxfa in this build (configured with --disable-shared)"
    exit 0
fi
if [ -n "$mxfa_instrument_flags" ]; then
    say "SKIP: libmxfa is built with $mxfa_instrument_flags, which a Python process cannot load"
    exit 0
fi
lib_rel=${mxfa_libdir#"$mxfa_prefix"/}
site_rel=${mxfa_pythondir#"$mxfa_prefix"/}

work=$(mktemp -d "${TMPDIR:-/tmp}/mxfa-installcheck.XXXXXX") || fail "cannot make a temporary directory"
trap 'rm -rf "$work"' EXIT
# the tests must find the library through the package alone
unset MXFA_LIBRARY LD_LIBRARY_PATH PYTHONPATH

# install_with MAKE_ARGUMENT...: make install in the build tree with these
# directories; the make variables of the make that runs this script (its
# MAKEFLAGS) are left out, so that nothing but the arguments names where
# the files go.
install_with() {
    if ! MAKEFLAGS='' MFLAGS='' $MAKE -C "$mxfa_builddir" install "$@" > "$work/install.log" 2>&1; then
        cat "$work/install.log" >&2
        fail "make install $* failed"
    fi
}

# use_from DIR LIBDIR: use_mxfa.py, from an empty directory, with the site
# directory of the install in DIR on PYTHONPATH; its libmxfa must be LIBDIR's.
use_from() {
    mkdir -p "$work/cwd"
    if ! out=$(cd "$work/cwd" && PYTHONPATH=$1/$site_rel PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1 \
        "$PYTHON" "$MXFA_SRCDIR/tests/installcheck/use_mxfa.py" "$1/$site_rel" "$2" 2>&1); then
        echo "$out" >&2
        fail "the package installed in $1 does not work"
    fi
    say "$out"
}

# A prefix given to make moves the directories configure made of the
# prefix, not those it was given on their own (--libdir=/usr/lib64): a
# staged install shows where the files go before any is written outside
# the temporary directory.
install_with DESTDIR="$work/probe" prefix="$work/prefix"
stray=$(find "$work/probe" ! -type d | grep -v -F "$work/probe$work/prefix/" | head -n 1)
if [ -n "$stray" ]; then
    say "SKIP: make install prefix=DIR leaves ${stray#"$work/probe"} where configure put it" \
        "(its directory was given alone)"
    exit 0
fi
rm -rf "$work/probe"

dir=$work/prefix
say "make install prefix=$dir"
install_with DESTDIR= prefix="$dir"
use_from "$dir" "$dir/$lib_rel"

dir=$work/libdir
say "make install prefix=$dir libdir=$dir/lib64"
install_with DESTDIR= prefix="$dir" libdir="$dir/lib64"
use_from "$dir" "$dir/lib64"

dir=$work/moved
say "make install DESTDIR=$work/stage prefix=$dir, then moved to $dir"
install_with DESTDIR="$work/stage" prefix="$dir"
if grep -F "$work/stage" "$work/stage$dir/$site_rel/mxfa/_paths.py" > /dev/null; then
    fail "DESTDIR is written into the installed _paths.py"
fi
mv "$work/stage$dir" "$dir"
use_from "$dir" "$dir/$lib_rel"
