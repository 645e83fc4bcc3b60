"""Stop a child process at a known point of its work (onnx_slice_tools/io/pause.py) and
deliver a signal there: no test races a signal against a running process.

    pause = Pause(tmp_path, "save-written")
    proc = subprocess.Popen([...], env=dict(os.environ, **pause.env))
    pid = pause.wait(proc)        # the process that stopped (proc itself, or a batch worker)
    os.kill(pid, signal.SIGTERM)  # lands at the point
    # or pause.release(): it carries on
"""

from __future__ import annotations

import os
import select
import subprocess
from pathlib import Path

from onnx_slice_tools.io.pause import PAUSE_ENV

#: Safety net only, never a verdict: how long a test waits for a stop that should come in
#: seconds, before failing instead of hanging the suite.
HANG_GUARD_S = 900


class Pause:
    def __init__(self, folder: Path, point: str, nth: int = 1):
        self.fifo = Path(folder) / f"pause-{point}.fifo"
        os.mkfifo(self.fifo)
        os.mkfifo(str(self.fifo) + ".go")
        # read-write: opening never blocks, and the child's read of .go blocks until we close
        self.fd = os.open(self.fifo, os.O_RDWR)
        self.go = os.open(str(self.fifo) + ".go", os.O_RDWR)
        self.env = {PAUSE_ENV: f"{point}@{nth}:{self.fifo}"}

    def wait(self, proc: subprocess.Popen) -> int:
        """The pid of the process stopped at the point; fails if ``proc`` ends first."""
        watch = os.pidfd_open(proc.pid)
        try:
            line = b""
            while not line.endswith(b"\n"):
                ready, _, _ = select.select([self.fd, watch], [], [], HANG_GUARD_S)
                if self.fd in ready:
                    line += os.read(self.fd, 64)
                elif watch in ready:
                    proc.wait()
                    err = proc.stderr.read() if proc.stderr else b""
                    raise AssertionError(f"the process ended (exit {proc.returncode}) before the pause point: {err!r}")
                else:
                    raise AssertionError(f"no pause in {HANG_GUARD_S} s (hang guard)")
            return int(line)
        finally:
            os.close(watch)

    def release(self) -> None:
        """Let the stopped process carry on (and close our ends)."""
        for fd in (self.go, self.fd):
            try:
                os.close(fd)
            except OSError:
                pass
        self.go = self.fd = -1


def wait_gone(pid: int) -> None:
    """Block until process ``pid`` (not necessarily our child) has ended."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        ready, _, _ = select.select([fd], [], [], HANG_GUARD_S)
        assert ready, f"process {pid} still alive after {HANG_GUARD_S} s (hang guard)"
    finally:
        os.close(fd)
