#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The Python package (python/mxfa) against the CLI and the C API: runs
# tests/t-python.py with the build's libmxfa and tools/mxfa. SKIP without a
# Python 3 or without numpy.
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
top=${MXFA_BUILDDIR:-..}
src=${MXFA_SRCDIR:-..}
lib=$top/.libs/libmxfa.so.0
if [ ! -f "$lib" ]; then
    echo "1..0 # SKIP no shared libmxfa in this build ($lib)"
    exit 0
fi
# A library built with AddressSanitizer (configure --enable-sanitizers)
# cannot be loaded into a Python process whose first library is not the
# sanitizer's runtime; the plain build runs this test.
if command -v ldd > /dev/null 2>&1 && ldd "$lib" 2> /dev/null | grep -q 'libasan'; then
    echo "1..0 # SKIP libmxfa is built with AddressSanitizer, which a Python process cannot load"
    exit 0
fi
MXFA_LIBRARY=$lib PYTHONPATH=$src/python${PYTHONPATH:+:$PYTHONPATH} MXFA_CLI=$top/tools/mxfa PYTHONDONTWRITEBYTECODE=1 \
    exec "$py" "$src/tests/t-python.py"
