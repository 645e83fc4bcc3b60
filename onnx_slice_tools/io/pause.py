"""Test hook: stop a process at a named point of its work, so that a test delivers a signal
(SIGINT, SIGTERM, SIGKILL) at a known point instead of racing a running process.

``ONNX_SLICE_TOOLS_PAUSE=POINT[@N]:FIFO`` (tests only, not for users): the process that reaches
POINT for the N-th time (default 1; counted per process) writes its pid as one line into the
FIFO, then blocks reading a second FIFO, ``FIFO.go``, until the test closes its end of it
(release) -- or sends a signal, which lands right there.  The test opens both FIFOs read-write
first (so neither side ever blocks in ``open``; tests/helpers.py ``Pause``).  Points:

* ``save-written``: :func:`io.files.save_model` has written and fsynced the model (and its
  ``.data``) in its temporary folder; nothing renamed yet;
* ``save-data-landed``: the new ``.data`` is renamed into place, the model not yet;
* ``write-written``: :func:`io.files.write_atomically` (reports) wrote its temporary file;
* ``batch-recorded``: a batch recorded a finished model in its journal (cli/batch.py).
"""

from __future__ import annotations

import os

#: the environment variable that names the point and the FIFO
PAUSE_ENV = "ONNX_SLICE_TOOLS_PAUSE"
POINTS = ("save-written", "save-data-landed", "write-written", "batch-recorded")
_reached: dict[str, int] = {}


def pause_point(name: str) -> None:
    """Stop here when :data:`PAUSE_ENV` names this point (see the module doc); else nothing."""
    spec = os.environ.get(PAUSE_ENV)
    if not spec:
        return
    point, _, fifo = spec.partition(":")
    point, _, nth = point.partition("@")
    if point != name or not fifo:
        return
    _reached[name] = _reached.get(name, 0) + 1
    if _reached[name] != int(nth or 1):
        return
    # .go is opened before the pid is told: a release that comes at once is then an end of
    # file, not an open() waiting for a writer that is gone
    go = os.open(fifo + ".go", os.O_RDONLY | os.O_NONBLOCK)
    try:
        os.set_blocking(go, True)
        with open(fifo, "w") as f:
            f.write(f"{os.getpid()}\n")
        while os.read(go, 64):  # until the test closes its end; a signal lands here
            pass
    finally:
        os.close(go)
