# SPDX-License-Identifier: BSD-3-Clause
"""make installcheck: python.sh runs this from outside the source and build
trees, with PYTHONPATH naming the site directory of an install:

    python3 use_mxfa.py SITE LIBDIR

The package imported must be SITE's, and it must load the libmxfa installed
in LIBDIR (not the build tree's, nor one on the library path) and quantize
through it as docs/NUMERICS.md says: a row block of 448s, E4M3's largest
value, gets the scale 2^0 (0x7F) under rceil and every element the code 0x7E,
which dequantizes to 448 again. Prints what it found; exit status 1 on any
difference."""

import os
import sys

import numpy as np

import mxfa
from mxfa import _capi


def same_file(a, b):
    return os.path.realpath(a) == os.path.realpath(b)


def main():
    site, libdir = sys.argv[1:3]
    package = os.path.dirname(mxfa.__file__)
    if not same_file(package, os.path.join(site, "mxfa")):
        print("imported the package from %s, not from %s" % (package, site))
        return 1
    want = os.path.join(libdir, _capi._SONAME)
    if not same_file(_capi.lib._name, want):
        print("the package loaded %s, not %s" % (_capi.lib._name, want))
        return 1
    x = np.full((3, 32), 448.0, dtype=np.float32)
    q = mxfa.quantize(x, block="row", preset="rceil")
    back = mxfa.dequantize(q)
    if q.scales.shape != (3, 1) or (q.scales != 0x7F).any() or (q.data != 0x7E).any() or (back != 448.0).any():
        print("a block of 448s quantized to scales %s, elements %s, back to %s; docs/NUMERICS.md says 0x7F, 0x7E, 448"
              % (np.unique(q.scales), np.unique(q.data), np.unique(back)))
        return 1
    print("mxfa %s from %s, with %s: a block of 448s quantized as the contract says"
          % (mxfa.__version__, package, _capi.lib._name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
