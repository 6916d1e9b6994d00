"""The cyclic garbage collector, tuned for a process that holds a long-lived view.

Both processes read thousands of objects at startup that live for hours, and then make
short-lived ones on every watch event or admission request. With the default thresholds
(700 allocations) the collector runs many times a second, and each older-generation pass
walks everything imported and held: tens of milliseconds in the middle of a request.
"""

from __future__ import annotations

import gc

THRESHOLDS = (50_000, 20, 50)


def tune() -> None:
    """Collect young objects far less often (call once, at process start)."""
    gc.set_threshold(*THRESHOLDS)


def settle() -> None:
    """Everything allocated so far lives long: keep the collector from walking it again."""
    gc.freeze()
