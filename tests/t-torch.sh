#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# mxfa.torch (python/mxfa/torch.py), attention under PyTorch's autograd:
# runs tests/t-torch.py with the build's libmxfa. SKIP without a Python 3
# with numpy and PyTorch (Debian: python3-numpy, python3-torch).
need_modules=torch
need_hint="Debian: apt-get install python3-torch"
. "${MXFA_SRCDIR:-..}/tests/python-env.sh"
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} exec "$py" "$src/tests/t-torch.py"
