#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The Python package (python/mxfa) against the CLI and the C API: runs
# tests/t-python.py with the build's libmxfa and tools/mxfa. SKIP without a
# Python 3 or without numpy (tests/python-env.sh).
. "${MXFA_SRCDIR:-..}/tests/python-env.sh"
MXFA_CLI=$top/tools/mxfa exec "$py" "$src/tests/t-python.py"
