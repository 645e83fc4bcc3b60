"""Batch conversion of a folder of models, in parallel worker processes.

``batch_convert(input_dir, output_dir)`` converts and verifies every ``.onnx`` file
under ``input_dir`` (recursively), writing the converted models to the same
relative paths under ``output_dir`` and ``output_dir/report.json``.  One bad model
never stops the batch: each model's outcome is an entry of the report.

A model is ``unchanged`` (skipped) only when the previous report shows it converted from
the same input bytes and external data files (path, size, mtime), with the same options,
and its output on disk still has the sha256 (and ``.data`` size) recorded when it was
written; ``force`` converts everything again.  The output of a model that now fails, or
whose input was deleted since, is removed (only a file the previous report records as
ours, with its recorded sha256).

Each worker slot is its own one-process pool: a worker that dies (a native crash) costs
only its model; the slot is restarted.  Workers die with the parent (PR_SET_PDEATHSIG);
SIGTERM of the parent terminates them.  One batch at a time writes into an output folder
(``fcntl.flock`` on ``OUTPUT/.onnx-slice-tools.lock``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ModelError
from ..errors import first_line as _line
from ..io.files import (TEMP_PREFIX, FileId, FileSet, check_output, data_path, file_sha256, fingerprint, termination_raises,
                    write_text)

REPORT_NAME = "report.json"
LOCK_NAME = ".onnx-slice-tools.lock"
#: Test hook, not for users: ``abort:NAME`` makes the worker converting the model file NAME
#: call os.abort() (a crash in native code), ``hang:NAME`` makes it sleep for an hour (a
#: native hang); for the tests of crash isolation and of signals.
TEST_HOOK_ENV = "ONNX_SLICE_TOOLS_TEST_HOOK"

CONVERTED, UNCHANGED, FAILED, INVALID, ERROR = "converted", "unchanged", "failed", "invalid", "error"
#: exit code contribution of each status (the batch exits with the largest)
STATUS_EXIT = {CONVERTED: 0, UNCHANGED: 0, FAILED: 1, ERROR: 1, INVALID: 2}


@dataclass
class BatchReport:
    input_dir: str
    output_dir: str
    entries: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    #: inputs of the previous run that are gone now, each with the outputs of theirs removed
    deleted_inputs: list[dict] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return max((STATUS_EXIT[e["status"]] for e in self.entries), default=0)

    def counts(self) -> dict:
        out: dict = {}
        for e in self.entries:
            out[e["status"]] = out.get(e["status"], 0) + 1
        return out

    def to_json(self) -> dict:
        from .. import __version__
        return {"tool": "onnx-slice-tools", "version": __version__, "input_dir": self.input_dir,
                "input_dir_real": os.path.realpath(self.input_dir),
                "output_dir": self.output_dir, "seconds": round(self.seconds, 3), "summary": self.counts(),
                "models": sorted(self.entries, key=lambda e: e["input"]), "deleted_inputs": self.deleted_inputs}


def find_models(input_dir: Path, output_dir: Path | None = None) -> list[Path]:
    """Every model under ``input_dir``, sorted: ``.onnx`` files and framework inputs
    (``.tflite``, ``.keras``/``.h5`` files, SavedModel directories, whose insides are not
    searched); the output folder is left out when it lies inside the input folder."""
    from ..io.files import source_kind
    input_dir = Path(input_dir)
    out = Path(output_dir).resolve() if output_dir is not None else None
    found, saved_models = [], []
    for p in sorted(input_dir.rglob("*")):
        if any(part.startswith(TEMP_PREFIX) for part in p.parts):
            continue
        if any(d in p.parents for d in saved_models):
            continue
        if out is not None:
            real = p.resolve()
            if out == real or out in real.parents:
                continue
        if p.is_dir():
            if source_kind(p) == "saved_model":
                saved_models.append(p)
                found.append(p)
        elif p.is_file() and (p.suffix == ".onnx" or source_kind(p)):
            found.append(p)
    return found


def output_for(src: Path, input_dir: Path, output_dir: Path) -> Path:
    """Where the converted model of ``src`` goes: the same relative path, ending in ``.onnx``."""
    rel = Path(src).relative_to(input_dir)
    return output_dir / (rel if rel.suffix == ".onnx" else rel.with_name(rel.name + ".onnx")
                         if Path(src).is_dir() else rel.with_suffix(".onnx"))


def _output_owners(models: list[Path], input_dir: Path, output_dir: Path) -> dict:
    """output path -> the one model that writes it: when several map to one output
    (``m.onnx``, ``m.tflite``, ``m.keras``, a SavedModel ``m``), the ``.onnx`` file, else the
    first by name; the others are refused (never two models into one file)."""
    owners: dict = {}
    for src in sorted(models, key=lambda p: (p.suffix != ".onnx" or p.is_dir(), str(p))):
        owners.setdefault(output_for(src, input_dir, output_dir), src)
    return owners


def convert_one(src: str, dst: str, options: dict, protect=()) -> dict:
    """Convert one model (runs in a worker process).  Never raises: the outcome is the entry.
    ``options`` are :func:`api.convert` keyword arguments; ``protect``: input files (FileId)
    never to write over."""
    from ..api import convert
    from ..errors import ConversionError, StridedSliceError
    hook, _, name = os.environ.get(TEST_HOOK_ENV, "").partition(":")
    if name == Path(src).name:
        os.abort() if hook == "abort" else time.sleep(3600) if hook == "hang" else None
    t0 = time.perf_counter()
    entry = {"input": src, "output": dst, "status": ERROR, "strided_slice_nodes": None, "rewritten": None,
             "error": None, "checks": None, "timings_s": None, "output_sha256": None, "output_data_size": None}
    from .capture import collect_warnings
    try:
        from ..frontends.sources import convert_source, source_kind
        with collect_warnings() as warned:  # into the entry, never stderr
            entry["warnings"] = warned
            result = convert_source(src, **options) if source_kind(src) else convert(src, **options)
        rep = result.report
        entry["verdict"] = rep.verdict
        entry.update(strided_slice_nodes=rep.found, rewritten=rep.rewritten, checks=rep.model_checks,
                     signatures_checked=rep.signatures_checked,
                     timings_s={k: round(v, 4) for k, v in rep.timings.items()},
                     rewrites=[r.to_json() for r in rep.records])
        if rep.invalid_records:
            entry["status"] = INVALID
            entry["error"] = "; ".join(f"node {r.node!r}: {r.error}" for r in rep.invalid_records[:3])
        elif not rep.ok:
            entry["status"] = FAILED
            entry["error"] = rep.problem()
        else:
            saved = result.save(dst, protect=protect)
            entry.update(status=CONVERTED, output_sha256=saved.sha256, output_data_size=saved.data_size,
                         removed_stale_output=saved.removed)
    except (ModelError, StridedSliceError) as exc:
        entry["status"], entry["error"] = INVALID, _line(exc)
    except ConversionError as exc:  # a readable input the tool cannot convert
        entry["status"], entry["error"] = FAILED, _line(exc)
    except Exception as exc:  # noqa: BLE001 - one bad model never stops the batch
        entry["status"], entry["error"] = ERROR, f"{type(exc).__name__}: {_line(exc)}"
    entry["seconds"] = round(time.perf_counter() - t0, 4)
    return entry


def _convert_defaults() -> dict:
    """Every option of api.convert with its default: a run that spells out a default and one
    that leaves it out have the same options (and find each other's outputs unchanged)."""
    import inspect
    from ..api import convert
    return {k: p.default for k, p in inspect.signature(convert).parameters.items()
            if p.default is not inspect.Parameter.empty and k != "source"}


def _previous(output_dir: Path) -> tuple[dict, str | None]:
    """The previous report's entries by input path, and the real path of its input folder."""
    try:
        data = json.loads((output_dir / REPORT_NAME).read_text())
        entries = {e["input"]: e for e in data.get("models", []) if isinstance(e, dict)}
        real = data.get("input_dir_real")
        return entries, real if isinstance(real, str) else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}, None


def _data_size(dst) -> int | None:
    try:
        return data_path(dst).stat().st_size
    except OSError:
        return None


def _unchanged(prev: dict | None, fp: str, options: dict, dst: Path) -> bool:
    """The previous run converted this very input with these options into the output that is
    still on disk."""
    return bool(prev) and prev.get("status") in (CONVERTED, UNCHANGED) and prev.get("fingerprint") == fp \
        and prev.get("options") == options and prev.get("output") == str(dst) \
        and prev.get("output_sha256") is not None and file_sha256(dst) == prev["output_sha256"] \
        and _data_size(dst) == prev.get("output_data_size")


def _ours(path: Path, output_dir: Path) -> bool:
    """A regular file (not a symlink) inside ``output_dir``."""
    real = Path(os.path.realpath(path.parent)) / path.name
    base = Path(os.path.realpath(output_dir))
    return base in real.parents and path.is_file() and not path.is_symlink()


def _remove_stale(prev: dict | None, output_dir: Path, *, data_only: bool = False) -> list[str]:
    """Remove the output the previous run recorded writing (only when the file is still the
    one we wrote: same sha256 / .data size); returns the removed paths."""
    if not prev or prev.get("status") not in (CONVERTED, UNCHANGED) or not prev.get("output"):
        return []
    out = Path(prev["output"])
    removed = []
    candidates = [] if data_only else [(out, lambda p: file_sha256(p) == prev.get("output_sha256"))]
    if prev.get("output_data_size") is not None:
        candidates.append((data_path(out), lambda p: p.stat().st_size == prev["output_data_size"]))
    for p, same in candidates:
        try:
            if _ours(p, output_dir) and same(p):
                p.unlink()
                removed.append(str(p))
        except OSError:
            pass
    return removed


def _outputs_of_deleted_inputs(previous: dict, current: set, input_dir: Path, output_dir: Path) -> list[dict]:
    """Remove the outputs of the previous run's inputs (under ``input_dir``) that no longer
    exist -- only files the previous report records as ours and that still have the recorded
    sha256 (``.data``: size); returns one ``{"input", "removed"}`` per deleted input."""
    gone = []
    for src, prev in sorted(previous.items()):
        if not isinstance(src, str) or src in current or not Path(src).is_relative_to(input_dir) \
                or os.path.lexists(src):
            continue
        gone.append({"input": src, "removed": _remove_stale(prev, output_dir)})
    return gone


@contextlib.contextmanager
def _output_lock(output_dir: Path):
    """Hold ``OUTPUT/.onnx-slice-tools.lock``: one batch at a time writes into a folder."""
    import fcntl
    path = output_dir / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise ModelError(f"cannot open the lock file: {exc.strerror}", path=str(path)) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ModelError(f"another batch is writing into {output_dir}") from None
        yield
    finally:
        os.close(fd)


def batch_convert(input_dir, output_dir, *, jobs: int | None = None, force: bool = False,
                  flavor: str | None = None, opset: int | None = None, verify: bool = True,
                  on_start=None, on_result=None, **more_options) -> BatchReport:
    """Convert every model under ``input_dir`` into ``output_dir`` (see module doc).

    ``flavor``, ``opset``, ``verify`` and ``more_options`` go to :func:`api.convert` and are
    recorded per model (a change of any converts again).  ``on_start(n_models)`` and
    ``on_result(entry)`` report progress.  ``report.json`` is written atomically at the end.
    Raises ModelError when there is no model under ``input_dir``, when another batch is
    writing into ``output_dir``, or when an output would overwrite an input."""
    input_dir, output_dir = Path(input_dir), Path(output_dir)
    if not input_dir.is_dir():
        raise ModelError("not a folder", path=str(input_dir))
    real_in, real_out = input_dir.resolve(), output_dir.resolve()
    if real_out == real_in or real_out in real_in.parents:
        raise ModelError(f"the output folder is or contains the input folder {input_dir}; choose another "
                         "output folder", path=str(output_dir))
    t0 = time.perf_counter()
    models = find_models(input_dir, output_dir)
    if not models:
        raise ModelError(f"no .onnx files under {input_dir}")
    if output_dir.exists() and not output_dir.is_dir():
        raise ModelError("is not a folder", path=str(output_dir))
    output_dir.mkdir(parents=True, exist_ok=True)
    options = {**_convert_defaults(), "flavor": flavor, "opset": opset, "verify": verify, **more_options}
    options = json.loads(json.dumps(options))  # as the report will store it
    report = BatchReport(str(input_dir), str(output_dir))
    with _output_lock(output_dir), termination_raises():
        fingerprints, protect = {}, FileSet()
        for src in models:
            fingerprints[src], data_files = fingerprint(src)
            for f in [src, *data_files]:
                protect.add(FileId.of(f))
        check_output(output_dir / REPORT_NAME, protect, what="report")
        previous, previous_input = _previous(output_dir)
        if on_start:
            on_start(len(models))
        todo = []

        def finish(entry: dict) -> None:
            prev = previous.get(entry["input"])
            entry.setdefault("removed_stale_output", [])
            if entry["status"] not in (CONVERTED, UNCHANGED):
                entry["removed_stale_output"] = _remove_stale(prev, output_dir)
            elif entry["status"] == CONVERTED and entry.get("output_data_size") is None:
                entry["removed_stale_output"] += _remove_stale(prev, output_dir, data_only=True)
            report.entries.append(entry)
            if on_result:
                on_result(entry)

        owner = _output_owners(models, input_dir, output_dir)
        for src in models:
            dst = output_for(src, input_dir, output_dir)
            fp, prev = fingerprints[src], previous.get(str(src))
            if owner[dst] != src:
                finish(dict(_crash_entry(str(src), str(dst)), status=INVALID, seconds=0.0, fingerprint=fp,
                            options=options, error=f"{src}: its output {dst} is the output of {owner[dst]} "
                            "(same name, another kind of model); rename one of them"))
                continue
            if not force and _unchanged(prev, fp, options, dst):
                finish(dict(prev, status=UNCHANGED, seconds=0.0, removed_stale_output=[]))
                continue
            try:  # every input of the run here; the worker checks again against its model's own
                for p in (dst, data_path(dst)):
                    check_output(p, protect, what="output")
            except ModelError as exc:
                finish(dict(_crash_entry(str(src), str(dst)), status=INVALID, error=_line(exc), seconds=0.0,
                            fingerprint=fp, options=options))
                continue
            todo.append((str(src), str(dst), options))
        for entry in _run_all(todo, jobs or os.cpu_count() or 1):
            entry.update(fingerprint=fingerprints[Path(entry["input"])], options=options)
            finish(entry)
        if previous_input == str(real_in):  # the same input folder: a missing input was deleted
            report.deleted_inputs = _outputs_of_deleted_inputs(previous, {str(m) for m in models}, input_dir,
                                                               output_dir)
        report.seconds = time.perf_counter() - t0
        write_text(output_dir / REPORT_NAME, json.dumps(report.to_json(), indent=1), protect=protect)
    return report


def _worker_init(parent: int, cwd: str | None = None, environ: dict | None = None) -> None:
    """In each worker: die with its parent process (Linux PR_SET_PDEATHSIG; elsewhere
    nothing) and with the batch process ``parent``; then take the batch's working folder and
    environment (a fork-server worker has the fork server's, from when it started)."""
    spawner = os.getppid()  # the batch process, or the fork server (which exits with the batch)
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != spawner or not _alive(parent):  # a parent died before prctl took effect
        os._exit(1)
    if spawner != parent:
        _exit_with(parent)
    if cwd is not None and os.getcwd() != cwd:
        os.chdir(cwd)
    if environ is not None and dict(os.environ) != environ:
        os.environ.clear()
        os.environ.update(environ)


def _exit_with(parent: int) -> None:
    """A fork-server worker ends when the batch process ``parent`` ends: the fork server is its
    parent, and it outlives the batch while one of its workers lives.  A thread waits on a
    pidfd of the batch process (Linux 5.3+; elsewhere it polls twice a second)."""
    import select
    import threading
    try:
        fd = os.pidfd_open(parent)
    except ProcessLookupError:
        os._exit(1)
    except (AttributeError, OSError):
        fd = None

    def watch() -> None:
        try:
            if fd is not None:
                waiter = select.poll()
                waiter.register(fd, select.POLLIN)
                while not waiter.poll():
                    pass
        except (OSError, ValueError):
            pass
        while _alive(parent):  # no pidfd (or it failed): poll the pid
            time.sleep(0.5)
        os._exit(1)
    threading.Thread(target=watch, name="onnx-slice-tools batch watchdog", daemon=True).start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. EPERM: it exists
        pass
    return True


#: What every worker imports, loaded once in the fork server: each worker is then a fork of a
#: process that has them (~0.3 s of CPU saved per worker start-up).  Not onnxruntime (its
#: import starts a thread, and a fork copies none of a process's threads) nor TensorFlow.
_PRELOAD = ("onnx_slice_tools.api", "onnx_slice_tools.verification.lowerings", "onnx_slice_tools.verification.inplace",
            "onnx_slice_tools.cleanup.passes", "onnx_slice_tools.frontends.sources", "onnx_ir")


def _context():
    """``forkserver`` with :data:`_PRELOAD` where the platform has it, else ``spawn``: never a
    plain fork of the batch process (onnxruntime's threads may run there)."""
    import multiprocessing
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(list(_PRELOAD))
    return ctx


def _crash_entry(src: str, dst: str) -> dict:
    """The entry of a model whose worker died (also the skeleton of a model refused up front)."""
    return {"input": src, "output": dst, "status": ERROR, "strided_slice_nodes": None, "rewritten": None,
            "error": "the worker process died converting this model (a crash in native code)",
            "checks": None, "timings_s": None, "output_sha256": None, "output_data_size": None, "seconds": None}


def _stop(pools, *, kill: bool) -> None:
    for pool in pools:
        if pool is None:
            continue
        procs = list((getattr(pool, "_processes", None) or {}).values())
        if kill:
            for p in procs:
                with contextlib.suppress(Exception):
                    p.terminate()
        pool.shutdown(wait=not kill, cancel_futures=True)
        for p in procs:
            with contextlib.suppress(Exception):
                p.join(5)
                if p.is_alive():
                    p.kill()
                    p.join(5)


def _run_all(todo: list, jobs: int):
    """Yield entries as workers finish.  Each of ``jobs`` slots is a one-process pool running
    one model at a time: a worker that dies costs its model only, and the slot restarts."""
    if not todo:
        return
    ctx = _context()
    try:
        cwd = os.getcwd()
    except OSError:  # the working folder was removed: the workers keep the fork server's
        cwd = None
    init_args = (os.getpid(), cwd, dict(os.environ))
    queue = deque(todo)
    slots: list = [None] * min(jobs, len(todo))
    running: dict = {}
    finished = False
    try:
        while queue or running:
            busy = {i for i, _ in running.values()}
            for i in range(len(slots)):
                if queue and i not in busy:
                    if slots[i] is None:
                        slots[i] = ProcessPoolExecutor(1, mp_context=ctx, initializer=_worker_init,
                                                       initargs=init_args)
                    args = queue.popleft()
                    running[slots[i].submit(convert_one, *args)] = (i, args)
            done, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for fut in done:
                i, args = running.pop(fut)
                try:
                    entry = fut.result()
                except BrokenProcessPool:
                    entry = _crash_entry(args[0], args[1])
                    _stop([slots[i]], kill=True)
                    slots[i] = None
                yield entry
        finished = True
    finally:
        _stop(slots, kill=not finished)
