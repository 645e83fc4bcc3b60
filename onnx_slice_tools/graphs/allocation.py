"""Python's cyclic garbage collector paused over work that only makes acyclic objects.

Walking a graph of 10,000 nodes makes hundreds of thousands of small tuples, dicts and
records that hold no cycles; each allocation burst triggers collections that rescan every
live object (the caller's too) and free nothing.  :func:`paused_gc` pauses the collector for
such a stretch and restores its previous state after it (never enabling a collector the host
process disabled); reference counting frees everything as usual meanwhile.
"""

from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def paused_gc():
    """Pause the cyclic collector inside the ``with`` block (see the module doc)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
