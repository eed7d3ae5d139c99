# SPDX-License-Identifier: BSD-3-Clause
"""TAP for the Python tests (tests/t-*.py), as tests/tap.h is for the C
ones: ok() and skip() number the assertions, done() prints the plan and
exits nonzero when one failed."""

import sys

_count = 0
_failures = 0


def ok(cond, what):
    global _count, _failures
    _count += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", _count, what))
    _failures += not cond
    return cond


def skip(what):
    global _count
    _count += 1
    print("ok %d # SKIP %s" % (_count, what))


def done():
    print("1..%d" % _count)
    sys.exit(1 if _failures else 0)
