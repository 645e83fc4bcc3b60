"""Batch conversion of a folder of models, in parallel worker processes.

``batch_convert(input_dir, output_dir)`` converts and verifies every ``.onnx`` file
under ``input_dir`` (recursively), writing the converted models to the same
relative paths under ``output_dir`` and ``output_dir/report.json``.  One bad model
never stops the batch: each model's outcome is an entry of the report.  A model is
skipped when the previous report shows it converted from the same input bytes
(and its output is still there), unless ``force``.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path

from .errors import first_line as _line

REPORT_NAME = "report.json"

CONVERTED, UNCHANGED, FAILED, INVALID, ERROR = "converted", "unchanged", "failed", "invalid", "error"
#: exit code contribution of each status (the batch exits with the largest)
STATUS_EXIT = {CONVERTED: 0, UNCHANGED: 0, FAILED: 1, ERROR: 1, INVALID: 2}


@dataclass
class BatchReport:
    input_dir: str
    output_dir: str
    entries: list[dict] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        return max((STATUS_EXIT[e["status"]] for e in self.entries), default=0)

    def counts(self) -> dict:
        out: dict = {}
        for e in self.entries:
            out[e["status"]] = out.get(e["status"], 0) + 1
        return out

    def to_json(self) -> dict:
        from . import __version__
        return {"tool": "onnx-slice-tools", "version": __version__, "input_dir": self.input_dir,
                "output_dir": self.output_dir, "seconds": round(self.seconds, 3), "summary": self.counts(),
                "models": sorted(self.entries, key=lambda e: e["input"])}


def find_models(input_dir: Path, output_dir: Path | None = None) -> list[Path]:
    """Every ``.onnx`` file under ``input_dir``, sorted; the output folder is left out when it
    lies inside the input folder."""
    input_dir = Path(input_dir)
    out = Path(output_dir).resolve() if output_dir is not None else None
    found = []
    for p in sorted(input_dir.rglob("*.onnx")):
        if not p.is_file():
            continue
        if out is not None and (out == p.resolve().parent or out in p.resolve().parents):
            continue
        found.append(p)
    return found


def fingerprint(path: Path) -> str:
    """sha256 of the model file, plus size and mtime of each external data file it names."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    try:
        import onnx
        model = onnx.load(str(path), load_external_data=False)
        locations = sorted({e.value for t in model.graph.initializer for e in t.external_data if e.key == "location"})
        for loc in locations:
            st = (path.parent / loc).stat()
            h.update(f"{loc}:{st.st_size}:{st.st_mtime_ns}".encode())
    except Exception:  # unreadable models are fingerprinted by their bytes alone
        pass
    return h.hexdigest()


def convert_one(src: str, dst: str, options: dict) -> dict:
    """Convert one model (runs in a worker process).  Never raises: the outcome is the entry."""
    from .api import check_passed, convert
    from .errors import ModelError, StridedSliceError
    t0 = time.perf_counter()
    entry = {"input": src, "output": dst, "status": ERROR, "strided_slice_nodes": None, "rewritten": None,
             "error": None, "checks": None, "timings_s": None, "fingerprint": options.get("fingerprint")}
    try:
        from .sources import load_source, source_kind, verify_against_source
        kind = source_kind(src)  # .tflite / SavedModel / Keras: through tf2onnx first
        model = load_source(src, opset=options.get("opset")) if kind else src
        result = convert(model, flavor=options.get("flavor"), opset=options.get("opset"),
                         verify=options.get("verify", True), source=src)
        rep = result.report
        if kind and options.get("verify", True) and rep.ok:
            framework = verify_against_source(src, result.model)
            rep.model_checks["framework"] = "ok" if framework.ok else "differs: " + ", ".join(
                f"{k}: {v}" for k, v in framework.outputs.items())
        entry.update(strided_slice_nodes=rep.found, rewritten=rep.rewritten, checks=rep.model_checks,
                     signatures_checked=rep.signatures_checked,
                     timings_s={k: round(v, 4) for k, v in rep.timings.items()},
                     rewrites=[r.to_json() for r in rep.records])
        if rep.invalid_records:
            entry["status"] = INVALID
            entry["error"] = "; ".join(f"node {r.node!r}: {r.error}" for r in rep.invalid_records[:3])
        elif not rep.ok:
            entry["status"] = FAILED
            problems = [f"node {r.node!r}: {r.error or _check_text(r.check)}" for r in rep.failed_records[:3]]
            problems += [f"{k}: {v}" for k, v in rep.model_checks.items() if not check_passed(v)]
            entry["error"] = "; ".join(problems)
        else:
            result.save(dst)
            entry["status"] = CONVERTED
    except (ModelError, StridedSliceError) as exc:
        entry["status"], entry["error"] = INVALID, _line(exc)
    except Exception as exc:  # noqa: BLE001 - one bad model never stops the batch
        entry["status"], entry["error"] = ERROR, f"{type(exc).__name__}: {_line(exc)}"
    entry["seconds"] = round(time.perf_counter() - t0, 4)
    return entry


def _check_text(check) -> str:
    if check is None:
        return "not verified"
    return f"shape inference: {check.shape_inference}; onnxruntime: {check.onnxruntime}"


def _previous(output_dir: Path) -> dict:
    try:
        data = json.loads((output_dir / REPORT_NAME).read_text())
        return {e["input"]: e for e in data.get("models", [])}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def batch_convert(input_dir, output_dir, *, jobs: int | None = None, force: bool = False,
                  flavor: str | None = None, opset: int | None = None, verify: bool = True,
                  on_start=None, on_result=None) -> BatchReport:
    """Convert every model under ``input_dir`` into ``output_dir`` (see module doc).

    ``on_start(n_models)`` and ``on_result(entry)`` report progress.  ``report.json`` is
    written atomically at the end."""
    from .cli import write_atomically
    input_dir, output_dir = Path(input_dir), Path(output_dir)
    if not input_dir.is_dir():
        from .errors import ModelError
        raise ModelError("not a folder", path=str(input_dir))
    output_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    report = BatchReport(str(input_dir), str(output_dir))
    models = find_models(input_dir, output_dir)
    previous = {} if force else _previous(output_dir)
    if on_start:
        on_start(len(models))
    todo = []
    for src in models:
        dst = output_dir / src.relative_to(input_dir)
        fp = fingerprint(src)
        prev = previous.get(str(src))
        if prev and prev.get("status") in (CONVERTED, UNCHANGED) and prev.get("fingerprint") == fp and dst.exists():
            entry = dict(prev, status=UNCHANGED, seconds=0.0)
            report.entries.append(entry)
            if on_result:
                on_result(entry)
            continue
        todo.append((str(src), str(dst), {"flavor": flavor, "opset": opset, "verify": verify, "fingerprint": fp}))
    for entry in _run_all(todo, jobs or os.cpu_count() or 1):
        report.entries.append(entry)
        if on_result:
            on_result(entry)
    report.seconds = time.perf_counter() - t0
    text = json.dumps(report.to_json(), indent=1)
    write_atomically(output_dir / REPORT_NAME, lambda tmp: tmp.write_text(text))
    return report


def _run_all(todo: list, jobs: int):
    """Yield entries as workers finish.  A worker that dies (a crash in native code) costs only
    the models it was running: the rest are retried in a fresh pool, one at a time."""
    import multiprocessing
    if not todo:
        return
    ctx = multiprocessing.get_context("spawn")  # no fork after onnxruntime started threads
    pending = list(todo)
    workers = min(jobs, len(pending))
    while pending:
        broken = []
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            futures = {pool.submit(convert_one, *args): args for args in pending}
            for fut in as_completed(futures):
                args = futures[fut]
                try:
                    yield fut.result()
                except BrokenProcessPool:
                    broken.append(args)
        if not broken:
            return
        if workers == 1 and len(broken) == 1:  # alone in its pool: this one crashed
            src, dst, opts = broken[0]
            yield {"input": src, "output": dst, "status": ERROR, "error": "the worker process died converting "
                   "this model (a crash in native code)", "fingerprint": opts.get("fingerprint"), "seconds": None}
            return
        pending, workers = broken, 1
        if len(pending) == 1:
            continue
        # isolate: one model per pool until the crasher is found
        for args in pending:
            yield from _run_all([args], 1)
        return
