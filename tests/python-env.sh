# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the Python tests' scripts (t-python.sh, t-torch.sh,
# t-train-study.sh) before they run their Python: picks the Python
# (PYTHON, as configure found it, else python3) and ends the test with a
# SKIP where it cannot run: no Python 3, no numpy 1.19 or later, none of the
# modules the script names in need_modules (with need_hint, what installs
# them), no shared libmxfa in the build, or one built with AddressSanitizer
# (which a Python process cannot load unless the sanitizer's runtime comes
# first). Sets py, top, src and lib; exports MXFA_LIBRARY, PYTHONPATH and
# PYTHONDONTWRITEBYTECODE.
py=${PYTHON:-python3}
if [ "$py" = ":" ]; then
    py=python3
fi
if ! command -v "$py" > /dev/null 2>&1 || ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 6))' 2> /dev/null; then
    echo "1..0 # SKIP no Python 3"
    exit 0
fi
if ! "$py" -c 'import sys, numpy; sys.exit(tuple(int(v) for v in numpy.__version__.split(".")[:2]) < (1, 19))' 2> /dev/null; then
    echo "1..0 # SKIP numpy 1.19 or later is not installed for $py"
    exit 0
fi
for m in ${need_modules:-}; do
    if ! "$py" -c "import $m" 2> /dev/null; then
        echo "1..0 # SKIP no $m for $py${need_hint:+ ($need_hint)}"
        exit 0
    fi
done
top=${MXFA_BUILDDIR:-..}
src=${MXFA_SRCDIR:-..}
lib=$top/.libs/libmxfa.so.0
if [ ! -f "$lib" ]; then
    echo "1..0 # SKIP no shared libmxfa in this build ($lib)"
    exit 0
fi
if command -v ldd > /dev/null 2>&1 && ldd "$lib" 2> /dev/null | grep -q 'libasan'; then
    echo "1..0 # SKIP libmxfa is built with AddressSanitizer, which a Python process cannot load"
    exit 0
fi
MXFA_LIBRARY=$lib
PYTHONPATH=$src/python${PYTHONPATH:+:$PYTHONPATH}
PYTHONDONTWRITEBYTECODE=1
export MXFA_LIBRARY PYTHONPATH PYTHONDONTWRITEBYTECODE
