"""The ONNX runtimes a converted model can be checked on: onnxruntime, OpenVINO, onnx's reference.

Each runtime is a factory ``make(model_bytes) -> session`` whose session has
``run(output_names, feeds) -> list of arrays`` (onnxruntime's interface), so the
per-rewrite checks (verify.py) run the same check model on any of them.
OpenVINO is imported only when asked for; when it is missing the error is one
line naming the ``openvino`` extra.
"""

from __future__ import annotations

import numpy as np

from .errors import OnnxSliceToolsError

ONNXRUNTIME, OPENVINO, REFERENCE = "onnxruntime", "openvino", "reference"
#: onnxruntime's status when ``--verify-on`` leaves it out (the other runtimes' statuses then count)
NOT_ASKED = "skipped: not asked for (--verify-on)"
RUNTIMES = (ONNXRUNTIME, OPENVINO, REFERENCE)


class RuntimeUnavailable(OnnxSliceToolsError):
    """A runtime asked for is not installed."""


def parse_runtimes(text) -> tuple[str, ...]:
    """``"onnxruntime,openvino"`` (or a sequence) -> a tuple of known runtime names, in order."""
    names = [t.strip() for t in (text.split(",") if isinstance(text, str) else text) if t and t.strip()]
    unknown = [n for n in names if n not in RUNTIMES]
    if unknown or not names:
        raise ValueError(f"unknown runtime {', '.join(unknown) or '(none)'!s}; expected a comma-separated list "
                         f"of {', '.join(RUNTIMES)}")
    return tuple(dict.fromkeys(names))


def _onnxruntime(model_bytes: bytes):
    from .verify import make_session
    return make_session(model_bytes)


class _OpenVINOSession:
    """OpenVINO's ONNX reader and CPU plugin behind onnxruntime's ``run`` interface.

    The CPU plugin refuses inputs of unknown rank: such inputs get the fed rank with every dim
    still dynamic (one compiled model per combination of ranks)."""

    def __init__(self, model_bytes: bytes):
        ov = _import_openvino()
        self.core = ov.Core()
        with _one_line("OpenVINO could not read the model"):
            self.model = self.core.read_model(model_bytes, b"")
        self.unranked = [p.get_any_name() for p in self.model.inputs if p.get_partial_shape().rank.is_dynamic]
        self.compiled: dict = {}
        if not self.unranked:
            self._compiled(())

    def _compiled(self, ranks: tuple):
        if ranks not in self.compiled:
            ov = _import_openvino()
            model = self.model
            if ranks:
                model = self.model.clone()
                model.reshape({name: ov.PartialShape.dynamic(r) for name, r in zip(self.unranked, ranks)})
            with _one_line("OpenVINO could not compile the model"):
                self.compiled[ranks] = self.core.compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": 1})
        return self.compiled[ranks]

    def run(self, output_names, feeds: dict) -> list:
        compiled = self._compiled(tuple(np.ndim(feeds[n]) for n in self.unranked))
        inputs = {p.get_any_name() for p in compiled.inputs}
        request = compiled.create_infer_request()  # owns the output buffers: alive until copied
        with _one_line("OpenVINO failed"):
            out = request.infer({k: v for k, v in feeds.items() if k in inputs})
        by_name = {}
        for port, value in out.items():
            for name in port.get_names():
                by_name[name] = np.array(value, copy=True)
        names = output_names or [p.get_any_name() for p in compiled.outputs]
        return [by_name[n] for n in names]


class _one_line:
    """Context manager: an OpenVINO exception (a many-line C++ trace) as one RuntimeError line."""

    def __init__(self, what: str):
        self.what = what

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if exc is None or not isinstance(exc, Exception):
            return False
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        useful = [ln for ln in lines if not ln.startswith(("Exception from", "Check '", "FrontEnd API failed",
                                                               "Model wasn't fully", "Failed operations", "Summary"))]
        raise RuntimeError(f"{self.what}: {useful[0] if useful else (lines[0] if lines else kind.__name__)}") from None


class _ReferenceSession:
    """onnx's ``ReferenceEvaluator`` behind onnxruntime's ``run`` interface."""

    def __init__(self, model_bytes: bytes):
        import onnx
        from onnx.reference import ReferenceEvaluator
        self.evaluator = ReferenceEvaluator(onnx.load_from_string(model_bytes))
        self.inputs = set(self.evaluator.input_names)

    def run(self, output_names, feeds: dict) -> list:
        return [np.asarray(v) for v in self.evaluator.run(output_names, {k: v for k, v in feeds.items()
                                                                         if k in self.inputs})]


def _import_openvino():
    try:
        import openvino as ov  # noqa: PLC0415 - optional dependency
    except ImportError:
        raise RuntimeUnavailable("OpenVINO is not installed; install the openvino extra "
                                 "(pip install 'onnx-slice-tools[openvino]')") from None
    return ov


def require(name: str) -> None:
    """Raise RuntimeUnavailable (one line) when runtime ``name`` cannot be imported."""
    if name == OPENVINO:
        _import_openvino()


_FACTORIES = {ONNXRUNTIME: _onnxruntime, OPENVINO: _OpenVINOSession, REFERENCE: _ReferenceSession}


def make_session(name: str, model_bytes: bytes):
    """A session of ``model_bytes`` on runtime ``name`` (one of :data:`RUNTIMES`)."""
    return _FACTORIES[name](model_bytes)


def check_on_runtimes(cases: list, opset: int, runtimes=(ONNXRUNTIME,), seed: int = 0,
                      memory_budget: int | None = None) -> None:
    """The per-rewrite checks of verify.py on each runtime listed: onnxruntime's status stays in
    ``result.onnxruntime``, every other runtime's goes to ``result.runtimes[name]``
    (each runtime sees the same input sizes and index values: same seed)."""
    from dataclasses import replace

    from .verify import DEFAULT_VERIFY_MEMORY, CheckResult, check_lowerings
    budget = memory_budget or DEFAULT_VERIFY_MEMORY
    for name in runtimes:
        require(name)
    if ONNXRUNTIME in runtimes or not runtimes:
        check_lowerings(cases, opset, seed, memory_budget=budget)
        for case in cases:
            _add_run_time_errors(case.result, ONNXRUNTIME, case.result.run_time_errors)
    for name in runtimes:
        if name == ONNXRUNTIME:
            continue
        copies = [replace(c, result=CheckResult()) for c in cases]
        for batch in _batches(copies, name):
            check_lowerings(batch, opset, seed, memory_budget=budget, runtime=name)
            if len(batch) > 1 and all("could not load" in c.result.onnxruntime for c in batch):
                for case in batch:  # one case the runtime cannot load: find it, check the others
                    case.result = CheckResult()
                    check_lowerings([case], opset, seed, memory_budget=budget, runtime=name)
        for case, copy in zip(cases, copies):
            case.result.runtimes[name] = copy.result.onnxruntime
            _add_run_time_errors(case.result, name, copy.result.run_time_errors)
            if case.result.shape_inference == "not run":
                case.result.shape_inference = copy.result.shape_inference
                case.result.inferred_shape = copy.result.inferred_shape
                case.result.tried_shapes = copy.result.tried_shapes
                case.result.tried_values = copy.result.tried_values
    if ONNXRUNTIME not in runtimes:
        for case in cases:
            case.result.onnxruntime = NOT_ASKED


def _add_run_time_errors(result, runtime: str, status: str) -> None:
    """File one runtime's must-fail status in ``result.run_time_errors_on`` and set
    ``result.run_time_errors`` to their summary: a skip on any runtime names it (and where they
    passed); else "passed"."""
    if status == "not run":
        return
    result.run_time_errors_on[runtime] = status
    runs = result.run_time_errors_on
    skipped = [v.removeprefix("skipped: ") for v in runs.values() if v.startswith("skipped")]
    passed = [k for k, v in runs.items() if v == "passed"]
    if not skipped:
        result.run_time_errors = "passed"
        return
    result.run_time_errors = f"skipped: {'; '.join(skipped)}" + (f" (passed on {', '.join(passed)})" if passed else "")


def _batches(cases: list, runtime: str) -> list:
    """OpenVINO checks one case per model: with many independent outputs in one model its CPU
    plugin returned wrong shapes and stale buffers for cases that are right alone (measured on
    2026.4: x[None, ...] on [4, 5] came out as garbage values in a 50-case model); it also
    compiles a model per combination of input ranks."""
    if runtime != OPENVINO:
        return [cases]
    return [[c] for c in cases]
