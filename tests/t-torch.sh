#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# mxfa.torch (python/mxfa/torch.py), attention under PyTorch's autograd:
# runs tests/t-torch.py with the build's libmxfa. SKIP without a Python 3
# with numpy and PyTorch (Debian: python3-numpy, python3-torch).
py=${PYTHON:-python3}
if [ "$py" = ":" ]; then
    py=python3
fi
if ! command -v "$py" > /dev/null 2>&1 || ! "$py" -c 'import numpy, torch' 2> /dev/null; then
    echo "1..0 # SKIP no PyTorch and numpy for $py (Debian: apt-get install python3-torch)"
    exit 0
fi
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
MXFA_LIBRARY=$lib PYTHONPATH=$src/python${PYTHONPATH:+:$PYTHONPATH} PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} \
    exec "$py" "$src/tests/t-torch.py"
