#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes tests/data/example_k.npy: a [128, 256] float32 matrix shaped like the
keys of an attention layer: standard normal values with two outlier channels
(columns 17 and 130) twenty times larger, the pattern that makes per-block
scales matter. Deterministic (seeded), standard library only."""
import random, struct, sys
rows, cols = 128, 256
rng = random.Random(2026)
vals = []
for r in range(rows):
    for c in range(cols):
        v = rng.gauss(0.0, 1.0)
        if c in (17, 130):
            v *= 20.0
        vals.append(v)
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
header += ' ' * ((64 - (10 + len(header) + 1) % 64) % 64) + '\n'
out = sys.argv[1] if len(sys.argv) > 1 else 'example_k.npy'
with open(out, 'wb') as f:
    f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(header)) + header.encode('ascii'))
    f.write(struct.pack('<%df' % len(vals), *vals))
