"""Keep Python warnings and logging records out of stderr and in the report.

``cli._Quiet`` uses :func:`collecting_handler` for a whole command (native output on file
descriptor 2 included); ``batch.convert_one`` uses :func:`collect_warnings` per model, so each
report entry carries the warnings its own conversion raised.
"""

from __future__ import annotations

import contextlib


def collecting_handler(records: list):
    """A logging handler that keeps records (so logging's last-resort handler never prints)."""
    import logging

    class Collect(logging.Handler):
        def emit(self, record):
            records.append(record)
    return Collect(logging.WARNING)


@contextlib.contextmanager
def collect_warnings():
    """Yields a list that receives, one line each and without repeats, the Python warnings and
    logging records (WARNING and above) raised inside the block."""
    import logging
    import warnings
    out: list[str] = []
    records: list = []
    handler = collecting_handler(records)
    logging.getLogger().addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            try:
                yield out
            finally:
                lines = [f"{w.category.__name__}: {w.message}" for w in caught]
                lines += [f"{r.name}: {r.getMessage()}" for r in records]
                for line in lines:
                    line = " ".join(str(line).split())
                    if line not in out:
                        out.append(line)
    finally:
        logging.getLogger().removeHandler(handler)
