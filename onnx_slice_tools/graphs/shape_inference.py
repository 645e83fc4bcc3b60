"""ONNX shape inference: the package's one entry (:func:`infer`), run in a helper process.

Two modes, the only two the package uses: *plain* (infer what can be inferred; onnx stops
quietly at what it cannot) and *strict* (check types, raise on any error: the
``strict_shape_inference`` check).  Never data propagation.  ``tests/test_habits.py`` checks that
no other module calls onnx's shape inference.

onnx 1.23 *aborts* the process (a failed C++ assertion) when a negative dim reaches e.g.
Slice's inference, so inference never runs in our process.  A fork per call would do that, but
would pay a fork, a child's exit and its copy-on-write faults each time (four per ``convert``).
One helper, forked on first use (or by :func:`start_helper`; what it runs is imported before
the fork, so it imports nothing itself), serves every call over two pipes; when it dies (an abort)
the call reports it and the next call forks a new helper.  The helper exits when our process
closes its end of the pipe (our exit) and after a large request (its memory is returned); a
helper forked from a process above 512 MiB resident serves one request only (it would keep
that process's memory of the moment alive).
"""

from __future__ import annotations

import atexit
import os
import struct
import threading

#: after a request or answer above this size the helper exits (its peak memory goes with it)
_RECYCLE_BYTES = 16 << 20
#: a helper forked from a process this large serves one request: a long-lived fork would keep
#: the parent's memory of that moment (copy-on-write pages) alive after the parent freed it
_ONE_SHOT_RSS = 512 << 20
_HEADER = struct.Struct("<QB")   # length, strict
_ANSWER = struct.Struct("<Q")

ABORTED = "onnx shape inference aborted (a negative dimension reached an operator's inference)"


def _prepared():
    """What the helper runs, made ready in our process before the fork, so that the helper
    imports nothing: another thread of ours may be importing at the fork (OpenVINO's import
    leaves one), and a module lock it held stays held in the child, which would wait on it
    forever.  What the helper inherits it also does not pay for again: onnx's import and its
    operator schemas (built on first use; our process builds them anyway for its checks)."""
    import faulthandler  # noqa: F401 (the helper's)
    import resource  # noqa: F401 (the helper's)

    import onnx.defs
    from onnx.onnx_cpp2py_export.shape_inference import infer_shapes
    onnx.defs.get_schema("Identity")  # (the schema registry is built on the first ask)
    return infer_shapes


class _Helper:
    def __init__(self):
        import warnings
        infer = _prepared()
        to_child, self.request = os.pipe()
        self.answer, from_child = os.pipe()
        with warnings.catch_warnings():  # Python 3.12+ warns on fork with threads: the child only infers
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # pragma: no cover - the helper
            code = 0
            try:
                _serve(to_child, from_child, infer)
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(to_child)
        os.close(from_child)
        self.pid = pid
        self.one_shot = _resident_bytes() > _ONE_SHOT_RSS

    def close(self) -> None:
        for fd in (self.request, self.answer):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


def _resident_bytes() -> int:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return 0


def _serve(inp: int, out: int, infer) -> None:  # pragma: no cover - runs in the helper
    import faulthandler  # (imported before the fork: see _prepared)
    import resource
    faulthandler.disable()  # an abort prints nothing and dumps no core
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, inp)  # nothing of our parent's (locks, pipes of its callers) stays open here
    os.closerange(inp + 1, out)
    os.closerange(out + 1, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1024)
    while True:
        head = _read(inp, _HEADER.size)
        if head is None:
            return  # our parent closed the pipe: it exited
        size, strict = _HEADER.unpack(head)
        data = _read(inp, size)
        if data is None:
            return
        try:  # bytes in, bytes out: onnx's C++ entry point (its Python wrapper parses and serializes twice more)
            blob = b"O" + infer(data, bool(strict), bool(strict), False)
        except Exception as exc:  # onnx's message goes back to the parent
            blob = b"E" + str(exc).encode("utf-8", "replace")
        _write(out, _ANSWER.pack(len(blob)) + blob)
        if len(data) > _RECYCLE_BYTES or len(blob) > _RECYCLE_BYTES:
            return


def _read(fd: int, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


_helper: _Helper | None = None
_lock = threading.Lock()
#: (request, answer) of the last strict inference that passed, kept for the next call only:
#: a strict inference that passed infers exactly what the plain one infers on the same bytes
#: (strict mode and type checks only turn errors into exceptions), so a plain request of the
#: same model -- the cleanup's shapes after the static checks -- is answered without the helper
_passed: tuple[bytes, bytes] | None = None


def _forget_in_child() -> None:  # a fork of our process must not talk to our helper
    global _helper, _lock, _passed
    _helper, _lock, _passed = None, threading.Lock(), None


def _stop() -> None:
    """At exit: the helper sees its pipe close and exits; we wait for it (nothing outlives us)."""
    global _helper
    if _helper is not None:
        _helper.close()
        _helper = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
atexit.register(_stop)


def start_helper() -> None:
    """Fork the helper now, if it is not running: before the caller reads a large model, the fork
    copies little (its page tables), and the pages parent and helper both hold -- each copied
    on the first write of either -- are few."""
    global _helper
    if not hasattr(os, "fork"):
        return
    with _lock:
        if _helper is None:
            _helper = _Helper()


def infer(model, strict: bool = False, answer: list | None = None):
    """ONNX shape inference of ``model`` (a ModelProto or its bytes): the inferred ModelProto.
    ``strict``: check types and raise on any error; else plain.  Runs in the helper process
    (:func:`infer_bytes`) where the platform can fork.  Raises RuntimeError with onnx's message,
    or :data:`ABORTED`.  ``answer``: a list that gets the inferred model's bytes too (a caller
    that searches them spares a serialization)."""
    import onnx
    if not hasattr(os, "fork"):
        inferred = onnx.shape_inference.infer_shapes(model, check_type=strict, strict_mode=strict, data_prop=False)
        if answer is not None:
            answer.append(inferred.SerializeToString())
        return inferred
    data = infer_bytes(model if isinstance(model, bytes) else model.SerializeToString(), strict)
    if answer is not None:
        answer.append(data)
    return onnx.load_from_string(data)


def infer_bytes(data: bytes, strict: bool) -> bytes:
    """:func:`infer` on bytes, the helper's own protocol: serialized model in, serialized inferred
    model out.  Raises RuntimeError with onnx's message, or :data:`ABORTED` when the inference
    killed the helper (twice: a helper that died for another reason between two calls costs one
    retry, never a wrong answer)."""
    global _helper, _passed
    with _lock:
        passed, _passed = _passed, None
        if passed is not None and passed[0] == data:
            return passed[1][1:]
        for attempt in (0, 1):
            if _helper is None:
                _helper = _Helper()
            helper = _helper
            blob = None
            try:
                _write(helper.request, _HEADER.pack(len(data), int(strict)) + data)
                head = _read(helper.answer, _ANSWER.size)
                if head is not None:
                    blob = _read(helper.answer, _ANSWER.unpack(head)[0])
            except OSError:  # EPIPE: it was gone before this request
                blob = None
            if blob is None or helper.one_shot or len(data) > _RECYCLE_BYTES or len(blob) > _RECYCLE_BYTES:
                helper.close()  # dead, exiting after a large request, or forked from a large process
                _helper = None
            if blob is not None:
                break
        else:
            raise RuntimeError(ABORTED)
        if strict and blob[:1] == b"O" and len(data) <= _RECYCLE_BYTES:
            _passed = (data, blob)
    if blob[:1] == b"E":
        raise RuntimeError(blob[1:].decode("utf-8", "replace"))
    return blob[1:]
