# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the tests that run a hardware probe (tests/t-*-gpu.sh):
#   gpu_probe NAME OK NOT_OK [ARGS...]
# runs gpu/sm90/NAME (built with --with-cuda) with ARGS and writes its TAP:
# SKIP where the probe is not built or finds no usable GPU (its exit 77),
# else one test point (OK, or NOT_OK with the exit status) after the
# probe's output as diagnostics.
gpu_probe() {
    probe="${MXFA_BUILDDIR:-..}/gpu/sm90/$1"
    ok_text=$2
    not_ok_text=$3
    shift 3
    if [ ! -x "$probe" ]; then
        echo "1..0 # SKIP the GPU probe is not built (configure --with-cuda)"
        return 0
    fi
    out=$("$probe" "$@" 2>&1)
    rc=$?
    if [ $rc -eq 77 ]; then
        echo "1..0 # SKIP $(printf '%s\n' "$out" | tail -n 1)"
        return 0
    fi
    echo "1..1"
    printf '%s\n' "$out" | sed 's/^/# /'
    if [ $rc -eq 0 ]; then
        echo "ok 1 - $ok_text"
    else
        echo "not ok 1 - $not_ok_text (exit $rc)"
    fi
}
