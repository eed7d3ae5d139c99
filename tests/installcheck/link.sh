#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# make installcheck: tests/installcheck/prog.c built against the installed
# libmxfa through pkg-config, the way its users build programs, once shared
# and once fully static, and both run:
#     cc prog.c $(pkg-config --cflags --libs mxfa)
#     cc -static prog.c $(pkg-config --cflags --libs --static mxfa)
# The static link needs every library libmxfa uses in mxfa.pc's
# Libs.private (the OpenMP runtime among them).
#
# The Makefile gives CC, CFLAGS, LDFLAGS, PKG_CONFIG, MXFA_SRCDIR (the
# source tree), DESTDIR, mxfa_libdir and mxfa_pkgconfigdir (the installed
# directories, DESTDIR not included) and mxfa_instrument_flags (the
# sanitizer and fuzzer flags the library was built with). Exit status 0
# when both programs linked and passed, or what cannot be done here said
# SKIP and why; 1 otherwise.
set -u

say() {
    echo "installcheck: $*"
}

fail() {
    echo "installcheck: FAIL: $*" >&2
    exit 1
}

if [ -n "$mxfa_instrument_flags" ]; then
    say "SKIP linking against the installed library: it is built with $mxfa_instrument_flags"
    exit 0
fi
if [ -z "$PKG_CONFIG" ]; then
    say "SKIP linking through pkg-config: configure found no pkg-config (install pkg-config)"
    exit 0
fi

libdir=$DESTDIR$mxfa_libdir
prog=$MXFA_SRCDIR/tests/installcheck/prog.c
work=$(mktemp -d "${TMPDIR:-/tmp}/mxfa-installcheck.XXXXXX") || fail "cannot make a temporary directory"
trap 'rm -rf "$work"' EXIT

# The installed mxfa.pc; under DESTDIR, pkg-config puts DESTDIR before the
# directories it names.
PKG_CONFIG_PATH=$DESTDIR$mxfa_pkgconfigdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export PKG_CONFIG_PATH
if [ -n "$DESTDIR" ]; then
    PKG_CONFIG_SYSROOT_DIR=$DESTDIR
    export PKG_CONFIG_SYSROOT_DIR
fi
"$PKG_CONFIG" --exists mxfa || fail "pkg-config finds no mxfa.pc in $DESTDIR$mxfa_pkgconfigdir"
# mxfa.pc holds configure's directories: a prefix given to make install
# moves the files, not what mxfa.pc says (some pkg-config put DESTDIR first)
pc_libdir=$("$PKG_CONFIG" --variable=libdir mxfa)
case $pc_libdir in
"$mxfa_libdir" | "$DESTDIR$mxfa_libdir") ;;
*)
    fail "the installed mxfa.pc names libdir $pc_libdir, the library is in $libdir:" \
        "run installcheck with configure's directories"
    ;;
esac
export MXFA_SRCDIR # prog.c reads the contract vectors from the source tree

# link_prog OUT CCFLAG PKG_CONFIG_OPTION...: prog.c linked into $work/OUT
# with CCFLAG and the flags pkg-config gives with the options; the
# compiler's messages are shown when the link fails.
link_prog() {
    out=$1 ccflag=$2
    shift 2
    pc_flags=$("$PKG_CONFIG" "$@" --cflags --libs mxfa) || fail "$PKG_CONFIG $* --cflags --libs mxfa failed"
    say "$out: $CC $CFLAGS $LDFLAGS $ccflag prog.c $pc_flags"
    # CC and the flags are lists of words, split on purpose
    if ! $CC $CFLAGS $LDFLAGS $ccflag -o "$work/$out" "$prog" -I"$MXFA_SRCDIR/tests" $pc_flags \
        > "$work/$out.log" 2>&1; then
        cat "$work/$out.log" >&2
        fail "prog.c does not link against the installed libmxfa ($out)"
    fi
}

# Shared: the library found through the installed libdir, and ldd (where
# there is one) shows that it is the installed file.
link_prog prog-shared ""
LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
if command -v ldd > /dev/null 2>&1; then
    loaded=$(ldd "$work/prog-shared" | sed -n 's/^[[:space:]]*libmxfa[.][^ ]* => \([^ ]*\).*/\1/p')
    case $loaded in
    "$libdir"/libmxfa.*) ;;
    *) fail "prog-shared loads libmxfa from '$loaded', not from $libdir" ;;
    esac
fi
"$work/prog-shared" || fail "prog-shared failed"

# Static: libmxfa.a and the libraries of Libs.private, the C library's
# static archive too (on Debian in libc6-dev).
if [ ! -f "$libdir/libmxfa.a" ]; then
    say "SKIP the static link: no $libdir/libmxfa.a (configured with --disable-static)"
    exit 0
fi
printf 'int main(void) { return 0; }\n' > "$work/empty.c"
if ! $CC $CFLAGS $LDFLAGS -static -o "$work/empty" "$work/empty.c" > /dev/null 2>&1; then
    say "SKIP the static link: $CC cannot link even an empty program with -static here (no static C library)"
    exit 0
fi
link_prog prog-static -static --static
"$work/prog-static" || fail "prog-static failed"
