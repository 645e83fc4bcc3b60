"""Batch conversion of a folder of models, in parallel worker processes.

``batch_convert(input_dir, output_dir)`` converts and verifies every model under
``input_dir`` (recursively: ``.onnx``, ``.tflite``, ``.keras``/``.h5`` files and SavedModel
folders), writing the converted models to the same relative paths under ``output_dir``
(ending in ``.onnx``) and ``output_dir/report.json``.  One bad model never stops the
batch: each model's outcome is an entry of the report.

Never over a file batch did not write itself: an output folder inside the input folder is
left out of the inputs (a note says so); a file already where an output goes that no
report of ours records with its sha256 (``.data``: size) refuses the whole batch before
any work (ModelError); an output folder that is or contains the input folder is refused.

A model is ``unchanged`` (skipped) only when the previous report shows it converted from
the same input bytes and external data files (path, size, mtime), with the same options,
by the same versions of this tool and of the runtimes that checked it, and its output on
disk still has the sha256 (and ``.data`` size) recorded when it was written; ``force``
converts everything again.  The output of a model that now fails, or whose input was
deleted since, is removed (only a file the previous report records as ours, with its
recorded sha256).  Outputs of earlier runs with other inputs into the same folder stay
recorded (``earlier_models``) while they are on disk unchanged.

Framework inputs (TensorFlow imported by the worker) go to one worker slot, which imports
TensorFlow once for all of them; the other slots take the ``.onnx`` models.

Each worker slot is its own one-process pool: a worker that dies (a native crash) costs
only its model; the slot is restarted.  Workers die with the parent (PR_SET_PDEATHSIG);
SIGTERM of the parent terminates them.  One batch at a time writes into an output folder
(``fcntl.flock`` on ``OUTPUT/.onnx-slice-tools.lock``, removed when the batch ends).

A batch stopped by SIGKILL (the OOM killer, a CI timeout) writes no report.json; its journal
``OUTPUT/.onnx-slice-tools.journal`` says what it did (:class:`Journal`): one JSON line per
model as it finishes (its entry, as report.json would record it), and one per output about
to land (sha256 of the model, size of its ``.data``, written by the worker after both files
are fsynced in their temporary folder and before either is renamed into place); each line
appended and fsynced.  The next run reads it with the report: what finished is recorded (and
``unchanged`` if nothing changed), and an output caught mid-write -- a file where a landing
line without its finished line points, with that sha256 (``.data``: size) -- is removed and
converted again.  Any other file is still refused.  The journal is removed once a report is
written.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ModelError
from ..errors import first_line as _line
from ..io.files import (TEMP_PREFIX, FileId, FileSet, check_output, clean_stale_temps, data_path, file_sha256,
                        fingerprint, termination_raises, write_text)
from ..io.pause import pause_point

REPORT_NAME = "report.json"
LOCK_NAME = ".onnx-slice-tools.lock"
JOURNAL_NAME = ".onnx-slice-tools.journal"
#: Test hook, not for users: ``abort:NAME`` makes the worker converting the model file NAME
#: call os.abort() (a crash in native code), ``hang:NAME`` makes it sleep for an hour (a
#: native hang); for the tests of crash isolation and of signals.
TEST_HOOK_ENV = "ONNX_SLICE_TOOLS_TEST_HOOK"

CONVERTED, UNCHANGED, FAILED, INVALID, ERROR = "converted", "unchanged", "failed", "invalid", "error"
#: exit code contribution of each status (the batch exits with the largest)
STATUS_EXIT = {CONVERTED: 0, UNCHANGED: 0, FAILED: 1, ERROR: 1, INVALID: 2}
VERIFIED, UNVERIFIED = "verified", "unverified"
#: the outcomes a summary counts, best first: a converted model is verified or unverified
OUTCOMES = (VERIFIED, UNVERIFIED, UNCHANGED, FAILED, INVALID, ERROR)


def outcome(entry: dict) -> str:
    """What a model's entry amounts to: verified | unverified (converted, some check
    skipped) | unchanged | failed | invalid | error."""
    status = entry.get("status")
    if status == CONVERTED:
        return VERIFIED if entry.get("verdict") == VERIFIED else UNVERIFIED
    return status if status in OUTCOMES else ERROR


@dataclass
class BatchReport:
    input_dir: str
    output_dir: str
    entries: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    #: inputs of the previous run that are gone now, each with the outputs of theirs removed
    deleted_inputs: list[dict] = field(default_factory=list)
    #: one-line remarks on what was left out and why (e.g. the output folder inside the input)
    notes: list[str] = field(default_factory=list)
    #: entries of earlier runs (other inputs) whose outputs are still on disk, as we wrote them
    earlier: list[dict] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return max((STATUS_EXIT[e["status"]] for e in self.entries), default=0)

    def counts(self) -> dict:
        """Models per outcome (:func:`outcome`), in the order of :data:`OUTCOMES`."""
        found = [outcome(e) for e in self.entries]
        return {o: found.count(o) for o in OUTCOMES if o in found}

    def to_json(self) -> dict:
        from .. import __version__
        return {"tool": "onnx-slice-tools", "version": __version__, "input_dir": self.input_dir,
                "input_dir_real": os.path.realpath(self.input_dir),
                "output_dir": self.output_dir, "seconds": round(self.seconds, 3), "summary": self.counts(),
                "notes": self.notes, "models": sorted(self.entries, key=lambda e: e["input"]),
                "deleted_inputs": self.deleted_inputs,
                "earlier_models": sorted(self.earlier, key=lambda e: str(e.get("output")))}


def find_models(input_dir: Path, output_dir: Path | None = None) -> list[Path]:
    """Every model under ``input_dir``, sorted: ``.onnx`` files and framework inputs
    (``.tflite``, ``.keras``/``.h5`` files, SavedModel directories, whose insides are not
    searched); the output folder is left out when it lies inside the input folder."""
    from ..io.files import source_kind
    input_dir = Path(input_dir)
    out = Path(output_dir).resolve() if output_dir is not None else None
    found: list = []
    saved_models: list = []
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


def convert_one(src: str, dst: str, options: dict, protect=(), *, journal: str | None = None) -> dict:
    """Convert one model (runs in a worker process).  Never raises: the outcome is the entry.
    ``options`` are :func:`api.convert` keyword arguments; ``protect``: input files (FileId)
    never to write over; ``journal``: the batch's journal file, which gets the output's
    landing line (:class:`Journal`).  The worker process is the command line's: its garbage
    collector is paused while it converts and saves (:func:`..graphs.allocation.paused_gc`)."""
    from ..graphs.allocation import paused_gc
    with paused_gc():
        return _convert_one(src, dst, options, protect, journal)


def _convert_one(src: str, dst: str, options: dict, protect, journal: str | None = None) -> dict:
    from ..api import convert
    from ..errors import ConversionError, StridedSliceError
    hook, _, name = os.environ.get(TEST_HOOK_ENV, "").partition(":")
    if name == Path(src).name:
        os.abort() if hook == "abort" else time.sleep(3600) if hook == "hang" else None
    t0 = time.perf_counter()
    entry: dict = {"input": src, "output": dst, "status": ERROR, "strided_slice_nodes": None, "rewritten": None,
             "error": None, "checks": None, "timings_s": None, "output_sha256": None, "output_data_size": None,
             "worker_pid": os.getpid()}
    from .capture import collect_warnings
    try:
        with collect_warnings() as warned:  # into the entry, never stderr
            entry["warnings"] = warned
            result = convert(src, **options)  # (a framework input: tf2onnx first)
        rep = result.report
        entry["verdict"] = rep.verdict
        entry.update(strided_slice_nodes=rep.found, rewritten=rep.rewritten, checks=rep.model_checks,
                     signatures_checked=rep.signatures_checked,
                     timings_s={k: round(v, 4) for k, v in rep.timings.items()},
                     rewrites=rep.rewrites_json())
        if rep.invalid_records:
            entry["status"] = INVALID
            entry["error"] = "; ".join(f"node {r.node!r}: {r.error}" for r in rep.invalid_records[:3])
        elif not rep.ok:
            entry["status"] = FAILED
            entry["error"] = rep.problem()
        else:
            def landing(sha256: str, data_size: int | None) -> None:
                if journal is not None:
                    Journal.append_to(journal, {"landing": {"output": dst, "sha256": sha256, "data_size": data_size}})
            saved = result.save(dst, protect=protect, on_landing=landing)
            entry.update(status=CONVERTED, output_sha256=saved.sha256, output_data_size=saved.data_size,
                         removed_stale_output=saved.removed)
    except (ModelError, StridedSliceError) as exc:
        entry["status"], entry["error"] = INVALID, _line(exc)
    except ConversionError as exc:  # a readable input the tool cannot convert
        entry["status"], entry["error"] = FAILED, _line(exc)
    except Exception as exc:  # one bad model never stops the batch
        entry["status"], entry["error"] = ERROR, f"{type(exc).__name__}: {_line(exc)}"
    entry["seconds"] = round(time.perf_counter() - t0, 4)
    return entry


def _convert_defaults() -> dict:
    """Every option of api.convert with its default: a run that spells out a default and one
    that leaves it out have the same options (and find each other's outputs unchanged)."""
    import inspect
    from ..api import CALLER_OPTIONS, convert
    return {k: p.default for k, p in inspect.signature(convert).parameters.items()
            if p.default is not inspect.Parameter.empty and k not in CALLER_OPTIONS}


def _previous(output_dir: Path) -> tuple[dict, str | None, list[dict]]:
    """The previous report's entries by input path (its run's over earlier runs'), the real
    path of its input folder, and every entry it records (its run's and earlier runs').  Entries of a report
    written by another version of this tool lose their ``versions`` (never unchanged)."""
    from .. import __version__
    try:
        data = json.loads((output_dir / REPORT_NAME).read_text())
        if not isinstance(data, dict) or data.get("tool") != "onnx-slice-tools":
            return {}, None, []
        models = [e for e in data.get("models", []) if isinstance(e, dict) and isinstance(e.get("input"), str)]
        earlier = [e for e in data.get("earlier_models", []) if isinstance(e, dict)]
        if data.get("version") != __version__:
            models = [{k: v for k, v in e.items() if k != "versions"} for e in models]
        real = data.get("input_dir_real")
        by_input = {e["input"]: e for e in earlier if isinstance(e.get("input"), str)}
        by_input.update({e["input"]: e for e in models})
        return by_input, real if isinstance(real, str) else None, models + earlier
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}, None, []


class Journal:
    """``OUTPUT/.onnx-slice-tools.journal``: what a batch did, as it happens, for the run after a
    SIGKILL.  JSON lines, each written in one append and fsynced: ``{"done": entry, "version":
    V}`` when a model finishes (written by the batch process), ``{"landing": {"output",
    "sha256", "data_size"}}`` when a worker is about to rename an output into place.  A line
    cut short by the kill is skipped when read (and ended before the next line is appended)."""

    def __init__(self, output_dir: Path) -> None:
        self.path = output_dir / JOURNAL_NAME
        self.done: list[dict] = []
        #: output path -> its landing record, for outputs that landed (or began to) without a
        #: finished line after it
        self.landing: dict[str, dict] = {}
        self._read()

    def _read(self) -> None:
        from .. import __version__
        try:  # never through a symlink, never a FIFO or device (a read that would not end)
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise ModelError(f"cannot read the journal: {exc.strerror}", path=str(self.path)) from None
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ModelError("the journal is not a regular file; refusing to read it", path=str(self.path))
            lines = f.read().split(b"\n")
        for raw in lines:
            try:
                rec = json.loads(raw)
            except ValueError:
                continue  # empty, or cut short by the kill
            if not isinstance(rec, dict):
                continue
            land, entry = rec.get("landing"), rec.get("done")
            if isinstance(land, dict) and isinstance(land.get("output"), str):
                self.landing[land["output"]] = land
            elif isinstance(entry, dict) and isinstance(entry.get("input"), str):
                if rec.get("version") != __version__:
                    entry = {k: v for k, v in entry.items() if k != "versions"}
                self.done.append(entry)
                if isinstance(entry.get("output"), str):
                    self.landing.pop(entry["output"], None)

    @staticmethod
    def append_to(path, record: dict) -> None:
        """Append one line to the journal ``path`` and fsync it (from any process of the batch)."""
        line = (json.dumps(record) + "\n").encode()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)

    def start(self) -> None:
        """Before this run appends: end a line the kill cut short (or create the file)."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as exc:  # a symlink, a folder, a read-only output folder
            raise ModelError(f"cannot write the journal: {exc.strerror}", path=str(self.path)) from None
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                os.write(fd, b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)

    def record(self, entry: dict) -> None:
        from .. import __version__
        self.append_to(self.path, {"done": entry, "version": __version__})

    def caught_mid_write(self, output_dir: Path, protect) -> list[str]:
        """Remove the outputs a killed run was caught writing: a file where a landing line
        without its finished line points, in the output folder, not an input, with the
        landing's sha256 (``.data``: size).  Returns the removed paths."""
        removed = []
        for out, land in sorted(self.landing.items()):
            dst = Path(out)
            checks = [(dst, lambda p, sha=land.get("sha256"): sha is not None and file_sha256(p) == sha)]
            if land.get("data_size") is not None:
                checks.append((data_path(dst), lambda p, size=land["data_size"]: p.stat().st_size == size))
            for p, same in checks:
                try:
                    check_output(p, protect)
                    if _ours(p, output_dir) and same(p):
                        p.unlink()
                        removed.append(str(p))
                except (OSError, ModelError):
                    pass
        return removed

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.path)


def versions(options: dict, framework: bool) -> dict:
    """The versions that made an output what it is: this tool, onnx, the runtimes that check
    it (onnxruntime; OpenVINO when the target or ``verify_on`` asks for it) and, for a
    framework input, TensorFlow, tf2onnx and LiteRT.  Read from the package metadata (no import)."""
    from importlib import metadata

    from .. import __version__
    from ..lowering.targets import get_target
    names = ["onnx", "onnxruntime"]
    runtimes = tuple(options.get("verify_on") or ()) or get_target(options.get("target")).verify_on
    if "openvino" in runtimes:
        names.append("openvino")
    if framework:
        names += ["tensorflow", "tensorflow-cpu", "tf2onnx", "ai-edge-litert"]
    out = {"onnx-slice-tools": __version__}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def _data_size(dst) -> int | None:
    try:
        return data_path(dst).stat().st_size
    except OSError:
        return None


def _unchanged(prev: dict | None, fp: str, options: dict, dst: Path, made_by: dict) -> bool:
    """The previous run converted this very input with these options, by the same versions
    (:func:`versions`), into the output that is still on disk."""
    if not prev:
        return False
    return prev.get("status") in (CONVERTED, UNCHANGED) and prev.get("fingerprint") == fp \
        and prev.get("options") == options and prev.get("versions") == made_by and prev.get("output") == str(dst) \
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


def _still_ours(entry: dict, output_dir: Path) -> bool:
    """The output ``entry`` records is on disk in ``output_dir`` as we wrote it (sha256;
    ``.data``: size, or absent when none was written)."""
    if entry.get("status") not in (CONVERTED, UNCHANGED) or not isinstance(entry.get("output"), str) \
            or entry.get("output_sha256") is None:
        return False
    out = Path(entry["output"])
    return _ours(out, output_dir) and file_sha256(out) == entry["output_sha256"] \
        and (entry.get("output_data_size") is None or _data_size(out) == entry["output_data_size"])


def _recorded(entries: list[dict]) -> dict:
    """real path -> check(path) for every file the entries record writing: an output with its
    sha256, its ``.data`` with its size."""
    out: dict = {}
    for e in entries:
        if e.get("status") not in (CONVERTED, UNCHANGED) or not isinstance(e.get("output"), str) \
                or e.get("output_sha256") is None:
            continue
        dst = Path(e["output"])
        sha, size = e["output_sha256"], e.get("output_data_size")
        out.setdefault(os.path.realpath(dst), []).append(lambda p, sha=sha: file_sha256(p) == sha)
        if size is not None:
            out.setdefault(os.path.realpath(data_path(dst)), []).append(
                lambda p, size=size: os.stat(p).st_size == size)
    return out


def _not_ours(paths, recorded: dict) -> list[str]:
    """The paths among ``paths`` that exist and are no file a report of ours records (with
    the content it recorded): a user's files, never to be written over."""
    clash = []
    for p in paths:
        if not os.path.lexists(p):
            continue
        checks = recorded.get(os.path.realpath(p), [])
        try:
            if not os.path.islink(p) and any(check(p) for check in checks):
                continue
        except OSError:
            pass
        clash.append(str(p))
    return clash


def _outputs_of_deleted_inputs(previous: list[dict], current: set, input_dir: Path, output_dir: Path,
                               same_folder: bool) -> list[dict]:
    """Remove the outputs of earlier inputs under ``input_dir`` that no longer exist -- only
    files a report records as ours and that still have the recorded sha256 (``.data``: size);
    returns one ``{"input", "removed"}`` per deleted input.  An entry that records its input's
    real path is judged by it; an older one only when the previous run read this folder
    (``same_folder``)."""
    real_in = os.path.realpath(input_dir)
    gone = []
    for prev in sorted(previous, key=lambda e: str(e.get("input"))):
        src = prev.get("input")
        if not isinstance(src, str) or src in current or os.path.lexists(src):
            continue
        real = prev.get("input_real")
        if isinstance(real, str):
            if real in current or os.path.lexists(real) or not Path(real).is_relative_to(real_in):
                continue
        elif not (same_folder and Path(src).is_relative_to(input_dir)):
            continue
        gone.append({"input": src, "removed": _remove_stale(prev, output_dir)})
    return gone


@contextlib.contextmanager
def _output_lock(output_dir: Path):
    """Hold ``OUTPUT/.onnx-slice-tools.lock`` (one batch at a time writes into a folder) and
    remove it at the end.  A lock taken on a file another batch removed meanwhile is taken
    again on the new file (the path must still name the locked inode)."""
    import fcntl
    path = output_dir / LOCK_NAME
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise ModelError(f"cannot open the lock file: {exc.strerror}", path=str(path)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ModelError(f"another batch is writing into {output_dir}") from None
        try:
            st, now = os.fstat(fd), os.stat(path, follow_symlinks=False)
            if (st.st_dev, st.st_ino) == (now.st_dev, now.st_ino):
                break
        except OSError:
            pass
        os.close(fd)  # removed by the batch that held it: lock the new one
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)  # still holding the lock: nobody else can be using this file
        os.close(fd)


def check_runtimes(options: dict) -> None:
    """Every runtime the options verify on (``verify_on``, else the target's) is installed:
    RuntimeUnavailable (one line naming the extra) before any work, not once per model."""
    from ..lowering.targets import get_target
    from ..verification import runtimes
    if not options.get("verify", True):
        return
    for name in tuple(options.get("verify_on") or ()) or get_target(options.get("target")).verify_on:
        runtimes.require(name)


def batch_convert(input_dir, output_dir, *, jobs: int | None = None, force: bool = False,
                  flavor: str | None = None, opset: int | None = None, verify: bool = True,
                  on_start=None, on_result=None, on_begin=None, **more_options) -> BatchReport:
    """Convert every model under ``input_dir`` into ``output_dir`` (see module doc).

    ``flavor``, ``opset``, ``verify`` and ``more_options`` go to :func:`api.convert` and are
    recorded per model (a change of any converts again).  ``on_start(n_models)``,
    ``on_begin(input_path)`` (a worker starts a model) and ``on_result(entry)`` report
    progress.  ``report.json`` is written atomically at the end.  Raises ModelError (before
    any work) when there is no model under ``input_dir``, when another batch is writing into
    ``output_dir``, when the output folder is or contains the input folder, or when a file
    no report of ours records is where an output goes; RuntimeUnavailable when a runtime the
    options verify on is not installed."""
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
        raise ModelError(f"no models (.onnx, .tflite, .keras, .h5 or SavedModel folders) under {input_dir}")
    if output_dir.exists() and not output_dir.is_dir():
        raise ModelError("is not a folder", path=str(output_dir))
    options = {**_convert_defaults(), "flavor": flavor, "opset": opset, "verify": verify, **more_options}
    options = json.loads(json.dumps(options))  # as the report will store it
    check_runtimes(options)
    report = BatchReport(str(input_dir), str(output_dir))
    if real_in in real_out.parents and output_dir.is_dir():
        left_out = find_models(output_dir)
        report.notes.append(f"the output folder {output_dir} is inside the input folder: left out of the inputs"
                            + (f" ({len(left_out)} model(s) in it not converted)" if left_out else ""))
    output_dir.mkdir(parents=True, exist_ok=True)
    from ..io.files import source_kind
    with _output_lock(output_dir), termination_raises():
        fingerprints, protect, made_by = {}, FileSet(), {}
        for src in models:
            fingerprints[src], data_files = fingerprint(src)
            made_by[src] = versions(options, bool(source_kind(src)))
            for f in [src, *data_files]:
                protect.add(FileId.of(f))
        check_output(output_dir / REPORT_NAME, protect, what="report")
        previous, previous_input, recorded_entries = _previous(output_dir)
        journal = Journal(output_dir)  # a killed run's: newer than its report
        for e in journal.done:
            previous[e["input"]] = e
        recorded_entries = recorded_entries + journal.done
        removed = journal.caught_mid_write(output_dir, protect)
        if removed:
            report.notes.append(f"removed {len(removed)} output file(s) a stopped batch was caught writing: "
                                + ", ".join(removed[:3]) + (" ..." if len(removed) > 3 else ""))
        for folder in sorted({str(output_for(m, input_dir, output_dir).parent) for m in models}):
            clean_stale_temps(folder)  # a killed worker's temporary (the pid in its name is dead)
        todo, finished, writes = [], [], []

        def finish(entry: dict) -> None:
            prev = previous.get(entry["input"])
            if prev is not None and prev.get("output") != entry["output"]:
                prev = None  # another output (another layout): not this one's stale file
            entry.setdefault("removed_stale_output", [])
            if entry["status"] not in (CONVERTED, UNCHANGED):
                entry["removed_stale_output"] = _remove_stale(prev, output_dir)
            elif entry["status"] == CONVERTED and entry.get("output_data_size") is None:
                entry["removed_stale_output"] += _remove_stale(prev, output_dir, data_only=True)
            entry["outcome"] = outcome(entry)
            report.entries.append(entry)
            if on_result:
                on_result(entry)

        owner = _output_owners(models, input_dir, output_dir)
        for src in models:
            dst = output_for(src, input_dir, output_dir)
            fp, prev = fingerprints[src], previous.get(str(src))
            base = {"fingerprint": fp, "options": options, "versions": made_by[src], "input_real": os.path.realpath(src)}
            if owner[dst] != src:
                finished.append(dict(_crash_entry(str(src), str(dst)), status=INVALID, seconds=0.0, **base,
                                     error=f"{src}: its output {dst} is the output of {owner[dst]} "
                                     "(same name, another kind of model); rename one of them"))
                continue
            if not force and prev and _unchanged(prev, fp, options, dst, made_by[src]):
                finished.append(dict(prev, status=UNCHANGED, seconds=0.0, removed_stale_output=[], **base))
                continue
            try:  # every input of the run here; the worker checks again against its model's own
                for p in (dst, data_path(dst)):
                    check_output(p, protect, what="output")
            except ModelError as exc:
                finished.append(dict(_crash_entry(str(src), str(dst)), status=INVALID, error=_line(exc),
                                     seconds=0.0, **base))
                continue
            writes += [dst, data_path(dst)]
            todo.append((str(src), str(dst), options))
        clash = _not_ours(writes, _recorded(recorded_entries))
        if clash:
            more = f" (and {len(clash) - 1} more)" if len(clash) > 1 else ""
            raise ModelError(f"{clash[0]}: exists and batch did not write it (no report.json of ours records it)"
                             f"{more}; refusing to write over it: move it away or choose another output folder")
        if on_start:
            on_start(len(models))
        journal.start()
        for entry in finished:
            finish(entry)
        heavy = {s for s, _, _ in todo if source_kind(s)}

        def save(final: bool) -> None:
            """report.json: this run's entries and every earlier output still ours (also when
            the batch is stopped: the next run must know what this one wrote)."""
            if final:
                current = {str(m) for m in models} | {os.path.realpath(m) for m in models}
                report.deleted_inputs = _outputs_of_deleted_inputs(recorded_entries, current, input_dir,
                                                                   output_dir, previous_input == str(real_in))
            this_run = {os.path.realpath(e["output"]) for e in report.entries}
            kept: dict = {}
            for e in recorded_entries:
                real = os.path.realpath(e["output"]) if isinstance(e.get("output"), str) else None
                if real and real not in this_run and real not in kept and _still_ours(e, output_dir):
                    kept[real] = e
            report.earlier = list(kept.values())
            report.seconds = time.perf_counter() - t0
            write_text(output_dir / REPORT_NAME, json.dumps(report.to_json(), indent=1), protect=protect)
            journal.remove()  # the report records all of it now

        done = False
        try:
            for entry in _run_all(todo, jobs or os.cpu_count() or 1, heavy=heavy, on_begin=on_begin,
                                  journal=str(journal.path)):
                src = Path(entry["input"])
                entry.update(fingerprint=fingerprints[src], options=options, versions=made_by[src],
                             input_real=os.path.realpath(src))
                finish(entry)
                journal.record(entry)
                pause_point("batch-recorded")
            save(final=True)
            done = True
        finally:
            if not done and any(e["status"] == CONVERTED for e in report.entries):
                with contextlib.suppress(Exception):
                    save(final=False)
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
#: process that has them (no worker imports them again).  Not onnxruntime (its
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


#: a second worker slot imports TensorFlow only when this many framework models still wait
#: and no ``.onnx`` model does (an import costs seconds, a converted model after it far less)
NEW_FRAMEWORK_SLOT_AT = 8


def _run_all(todo: list, jobs: int, *, heavy=frozenset(), on_begin=None, journal: str | None = None):
    """Yield entries as workers finish.  Each of ``jobs`` slots is a one-process pool running
    one model at a time: a worker that dies costs its model only, and the slot restarts.
    The ``heavy`` inputs (framework models: the worker imports TensorFlow) go to one slot,
    which takes them first, so TensorFlow is imported once, not once per slot; another slot
    joins in only when nothing else is left and :data:`NEW_FRAMEWORK_SLOT_AT` of them wait.
    ``on_begin(input)`` is called as a model is handed to a worker; ``journal``: the file the
    workers append their landing lines to (:class:`Journal`)."""
    if not todo:
        return
    ctx = _context()
    try:
        cwd = os.getcwd()
    except OSError:  # the working folder was removed: the workers keep the fork server's
        cwd = None
    init_args = (os.getpid(), cwd, dict(os.environ))
    light = deque(t for t in todo if t[0] not in heavy)
    framework = deque(t for t in todo if t[0] in heavy)
    slots: list = [None] * min(jobs, len(todo))
    tf_slots = {0} if framework else set()
    running: dict = {}
    finished = False

    def pick(i: int):
        if i in tf_slots and framework:
            return framework.popleft()
        if light:
            return light.popleft()
        if framework and (not tf_slots or len(framework) >= NEW_FRAMEWORK_SLOT_AT):
            tf_slots.add(i)
            return framework.popleft()
        return None
    try:
        while light or framework or running:
            busy = {i for i, _ in running.values()}
            for i in range(len(slots)):
                if i in busy:
                    continue
                args = pick(i)
                if args is None:
                    continue
                if slots[i] is None:
                    slots[i] = ProcessPoolExecutor(1, mp_context=ctx, initializer=_worker_init, initargs=init_args)
                running[slots[i].submit(convert_one, *args, journal=journal)] = (i, args)
                if on_begin:
                    on_begin(args[0])
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
