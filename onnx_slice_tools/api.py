"""``convert``: load -> rewrite pass -> verification -> ONNX model and report."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from .errors import ModelError
from .errors import first_line as _first_line
from .rewrite import RewriteRecord, StridedSliceRewritePass, default_opset, set_default_opset
from .spec import FLAVORS


def check_passed(status: str) -> bool:
    """A model check's status that does not fail a conversion: ok (possibly with a note),
    not run, skipped (with its reason), or a failure the original model already had."""
    return status in ("ok", "not run") or status.startswith(("ok (", "skipped", "pre-existing"))


@dataclass
class Report:
    """What a conversion did, per StridedSlice node and for the whole model."""

    source: str | None
    opset: int | None = None
    records: list[RewriteRecord] = field(default_factory=list)
    verified: bool = False
    model_checks: dict = field(default_factory=dict)   # name -> "ok" | problem | "not run"
    timings: dict = field(default_factory=dict)
    signatures_checked: int = 0
    model_comparison: object | None = None   # evaluate.ModelComparison once run
    target: str = "onnxruntime"                # targets.py
    verify_on: tuple = ()                      # runtimes of the per-rewrite checks

    @property
    def found(self) -> int:
        return len(self.records)

    @property
    def rewritten(self) -> int:
        return sum(r.lowering is not None for r in self.records)

    @property
    def failed_records(self) -> list[RewriteRecord]:
        return [r for r in self.records if r.error is not None or (r.check is not None and not r.check.ok)]

    @property
    def invalid_records(self) -> list[RewriteRecord]:
        return [r for r in self.records if r.error_kind == "invalid"]

    @property
    def ok(self) -> bool:
        return not self.failed_records and all(check_passed(v) for v in self.model_checks.values())

    def to_json(self) -> dict:
        return {
            "source": self.source, "opset": self.opset, "target": self.target, "verify_on": list(self.verify_on),
            "ok": self.ok, "verified": self.verified,
            "strided_slice_nodes": self.found, "rewritten": self.rewritten,
            "failed": len(self.failed_records), "signatures_checked": self.signatures_checked,
            "model_checks": self.model_checks,
            "model_comparison": None if self.model_comparison is None else self.model_comparison.to_json(),
            "timings_s": {k: round(v, 4) for k, v in self.timings.items()},
            "rewrites": [r.to_json() for r in self.records],
        }


@dataclass
class ConvertResult:
    model: object  # onnx.ModelProto (external weights stay references to the input's files)
    report: Report
    ir_model: object = None  # the onnx_ir.Model behind ``model``

    @property
    def ok(self) -> bool:
        return self.report.ok

    def save(self, path, *, external_data: bool | None = None) -> None:
        """Write the converted model atomically (temporary files, then rename).

        Weights the input kept in external data go to ``<path>.data`` next to it (streamed from
        the input's files, never all in memory); so does a model too big for one protobuf.
        ``external_data`` forces either layout."""
        save_model(self.ir_model if self.ir_model is not None else self.model, path, external_data=external_data)


#: Above this many bytes of weights, a model is saved with external data.
_PROTO_LIMIT = 1_800_000_000


def _external_tensors(m) -> list:
    import onnx_ir as ir
    return [v for v in m.graph.initializers.values() if isinstance(v.const_value, ir.ExternalTensor)]


def model_weight_bytes(m) -> int:
    """Bytes of the initializers of an onnx_ir model (external data sizes from its records)."""
    return sum(v.const_value.nbytes for v in m.graph.initializers.values() if v.const_value is not None)


def save_model(model, path, *, external_data: bool | None = None) -> None:
    """Save a ModelProto or an onnx_ir.Model to ``path`` atomically.

    A model with external weights (or above ~1.8 GB) is written as ``path`` plus
    ``path.data``: both files are written in a temporary folder beside ``path`` and renamed
    into place, data first."""
    import shutil
    import tempfile

    import onnx
    import onnx_ir as ir
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(model, onnx.ModelProto):
        m = None
        use_external = bool(external_data)
    else:
        m = model
        use_external = external_data if external_data is not None else bool(
            _external_tensors(m) or model_weight_bytes(m) > _PROTO_LIMIT)
    tmpdir = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        tmp_model = tmpdir / path.name
        data_name = path.name + ".data"
        if use_external:
            ir.save(m if m is not None else ir.from_proto(model), tmp_model, external_data=data_name)
        elif m is not None:
            onnx.save(ir.to_proto(m), str(tmp_model))
        else:
            onnx.save(model, str(tmp_model))
        if (tmpdir / data_name).exists():
            os.replace(tmpdir / data_name, path.parent / data_name)
        os.replace(tmp_model, path)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def load_ir(source, *, path_hint: str | None = None):
    """An onnx_ir.Model from a path (external data stays on disk, read lazily) or a ModelProto."""
    import onnx
    import onnx_ir as ir
    if isinstance(source, (str, os.PathLike)):
        p = Path(source)
        if not p.is_file():
            raise ModelError("no such file" if not p.exists() else "not a file", path=str(p))
        try:
            m = ir.load(p)
        except Exception as exc:
            raise ModelError(f"cannot read the model: {_first_line(exc)}", path=str(p)) from None
        _check_external_locations(m, p)
        return m
    if isinstance(source, onnx.ModelProto):
        try:
            return ir.from_proto(source)
        except Exception as exc:
            raise ModelError(f"cannot read the model: {_first_line(exc)}", path=path_hint) from None
    raise TypeError(f"model must be an onnx.ModelProto or a path, got {type(source).__name__}")


def _check_external_locations(m, path: Path) -> None:
    """Refuse external-data locations that resolve outside the model's folder (absolute paths,
    ``..``, symlinks pointing out) and missing data files: a model must not make the tool read
    arbitrary files."""
    import onnx_ir as ir
    base = Path(path).resolve().parent
    tensors = [v.const_value for v in m.graph.initializers.values()]
    from .rewrite import _all_graphs
    for g, _, _ in _all_graphs(m):
        for node in ir.traversal.RecursiveGraphIterator(g):
            for attr in node.attributes.values():
                if attr.type == ir.AttributeType.TENSOR:
                    tensors.append(attr.value)
    for t in tensors:
        if not isinstance(t, ir.ExternalTensor):
            continue
        location = str(t.location)
        target = (base / location).resolve()
        if Path(location).is_absolute() or (target != base and base not in target.parents):
            raise ModelError(f"tensor {t.name!r}: external data location {location!r} resolves outside the "
                             "model's folder; refusing to read it", path=str(path))
        if not target.is_file():
            raise ModelError(f"tensor {t.name!r}: external data file {location!r} not found", path=str(path))


def convert(model, *, flavor: str | None = None, opset: int | None = None, verify: bool = True,
            source: str | None = None, target: str | None = None, verify_on=None,
            fix_slices: bool = False) -> ConvertResult:
    """Replace every StridedSlice in ``model`` (a ModelProto or a path) by standard ONNX.

    ``target``: onnxruntime (default: the minimal lowering), portable or openvino (targets.py).
    ``verify_on``: runtimes the per-rewrite checks run on ("onnxruntime,openvino,reference" or a
    sequence; default: the target's).  ``fix_slices``: also rewrite the model's own Slice/Gather
    nodes that break the target's constraints (fixslices.py), verified like every rewrite.

    Returns a :class:`ConvertResult` with ``.model`` (a new ModelProto; the input is never
    modified) and ``.report``.  Raises :class:`ModelError` for an unusable model.
    Invalid specs and failed checks are reported (``result.ok`` is False), not raised.
    """
    import onnx_ir as ir
    from .runtimes import parse_runtimes, require
    from .targets import get_target
    from .verify import ir_version_for, max_supported_ir_version, max_supported_opset
    target_spec = get_target(target)
    runtimes = parse_runtimes(verify_on) if verify_on else target_spec.verify_on
    if verify:
        for name in runtimes:
            require(name)
    if flavor not in (None, "auto", *FLAVORS):
        raise ValueError(f"unknown flavor {flavor!r}; expected auto, tf or openvino")
    flavor = None if flavor == "auto" else flavor
    label = source or (str(model) if isinstance(model, (str, os.PathLike)) else None)
    t0 = time.perf_counter()
    m = load_ir(model, path_hint=label)
    report = Report(label, target=target_spec.name, verify_on=tuple(runtimes) if verify else ())
    report.timings["load"] = time.perf_counter() - t0

    current = default_opset(m)
    target = opset or current or 17
    if target < 11:
        raise ModelError(f"the model imports opset {target}; onnx-slice-tools emits opset 11 or newer "
                         "(pass opset=11 or more to upgrade it)", path=label)
    if target > max_supported_opset():
        raise ModelError(f"opset {target} is newer than the installed onnxruntime runs "
                         f"(up to {max_supported_opset()})", path=label)
    if current is not None and target != current:
        m = _upgrade_opset(m, target, label)
    report.opset = target

    t1 = time.perf_counter()
    result = StridedSliceRewritePass(flavor=flavor, opset=target, target=target_spec.name)(m)
    report.records = result.records
    if fix_slices:
        from .fixslices import FixSlicesPass
        report.records += FixSlicesPass(target_spec, opset=target)(m).records
    set_default_opset(m, target)
    m.ir_version = min(max(m.ir_version or 0, ir_version_for(target)), max(max_supported_ir_version(),
                                                                           ir_version_for(target)))
    report.timings["rewrite"] = time.perf_counter() - t1

    t3 = time.perf_counter()
    proto = ir.to_proto(m)
    report.timings["serialize"] = time.perf_counter() - t3
    if verify:
        # Whole-model runs read every weight: above the limit they are skipped (the per-rewrite
        # checks need no weights); below it, external weights are read in for them.  onnxruntime
        # builds the whole model's session (its cost grows fastest with model size) in a thread
        # -- it releases the GIL -- while the rest of the verification runs.
        weights = model_weight_bytes(m)
        whole = weights <= _max_compare_bytes()
        full = proto if not _external_tensors(m) or not whole else _with_external_data(proto, model)
        with (_background_session(full) if whole else contextlib.nullcontext()) as session:
            t2 = time.perf_counter()
            report.signatures_checked = verify_records(report.records, target, runtimes)
            report.verified = True
            report.timings["verify_rewrites"] = time.perf_counter() - t2
            t4 = time.perf_counter()
            if whole:
                report.model_checks, report.model_comparison = check_model(
                    full, original=model, compare=True, flavor=flavor, session=session)
            else:
                why = (f"skipped: {weights / 2 ** 20:.0f} MiB of weights, above the "
                       f"{_max_compare_bytes() // 2 ** 20} MiB limit for whole-model runs")
                report.model_checks = _static_checks(proto, model)
                report.model_checks["onnxruntime_load"] = why
                report.model_checks["model_run"] = why
            report.timings["verify_model"] = time.perf_counter() - t4
    return ConvertResult(proto, report, m)


def _static_checks(proto, original) -> dict:
    """The checker and strict shape inference only, on the model with its external weights
    turned into typed graph inputs (no weight is read)."""
    import onnx
    from .rewrite import weightless
    skeleton = onnx.ModelProto()
    skeleton.CopyFrom(proto)
    proto = weightless(skeleton)
    checks = {}
    for name, fn in (("checker", onnx.checker.check_model),
                     ("strict_shape_inference",
                      lambda p: onnx.shape_inference.infer_shapes(p, check_type=True, strict_mode=True))):
        try:
            fn(proto)
            checks[name] = "ok"
        except Exception as exc:
            checks[name] = _first_line(exc)
    return checks


def _with_external_data(proto, source):
    """A copy of ``proto`` with its external weights read in (from the input model's folder)."""
    import onnx
    from onnx.external_data_helper import load_external_data_for_model
    full = onnx.ModelProto()
    full.CopyFrom(proto)
    base = os.path.dirname(os.path.abspath(source)) if isinstance(source, (str, os.PathLike)) else "."
    load_external_data_for_model(full, base)
    return full


class _background_session:
    """Context manager: a Future of an onnxruntime session of ``proto``, built in a thread."""

    def __init__(self, proto):
        self.proto = proto

    def __enter__(self):
        from concurrent.futures import ThreadPoolExecutor
        from .verify import make_session
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="onnx-slice-tools-ort")
        return self.pool.submit(lambda: make_session(self.proto.SerializeToString()))

    def __exit__(self, *exc):
        self.pool.shutdown(wait=True)
        return False


def _upgrade_opset(m, target: int, label):
    import onnx
    import onnx_ir as ir
    try:
        return ir.from_proto(onnx.version_converter.convert_version(ir.to_proto(m), target))
    except Exception as exc:
        raise ModelError(f"cannot convert the model to opset {target}: {_first_line(exc)}", path=label) from None


def verify_records(records: list[RewriteRecord], opset: int, runtimes=("onnxruntime",)) -> int:
    """Check each distinct rewrite once (see verify.py) on each of ``runtimes`` (runtimes.py);
    returns the number of signatures."""
    from onnx import helper
    from .runtimes import check_on_runtimes
    from .verify import CheckCase, declared_conflict
    groups: dict = {}
    for r in records:
        if r.lowering is None:
            continue
        elem = r.elem_type or 1  # slicing does not depend on the dtype: float32 when unknown
        key = (r.spec, r.input_shape, elem, tuple(sorted(r.index_types.items())))
        groups.setdefault(key, []).append(r)
    cases = []
    for (spec, shape, elem, _), recs in groups.items():
        dtype = np.dtype(object) if elem == 8 else helper.tensor_dtype_to_np_dtype(elem)
        cases.append(CheckCase(recs[0].lowering, dtype, elem, declared_output=recs[0].declared_output,
                               index_types=recs[0].index_types))
    check_on_runtimes(cases, opset, runtimes)
    for case, recs in zip(cases, groups.values()):
        for r in recs:
            r.check = case.result
            if r.declared_output != recs[0].declared_output:  # same op, other declared shape
                problem = declared_conflict(r.declared_output, r.output_shape) if r.output_shape else None
                if problem:
                    r.check = replace(case.result, shape_inference=f"declared output shape: {problem}")
    return len(cases)


def check_model(proto, original=None, *, compare: bool = False, flavor: str | None = None, session=None):
    """Whole-model checks of a converted model: onnx.checker, strict shape inference (the two
    together are the checker's ``full_check``, run once), onnxruntime loads it, and -- with
    ``compare`` -- the original and the converted model agree on random inputs
    (:func:`evaluate.compare_models`).

    ``original`` (a ModelProto or a path) is the model before conversion: a check failure
    it has too is reported as ``pre-existing: ...`` and does not fail the conversion.
    ``session``: a Future of an onnxruntime session of ``proto`` (built here when None).
    Returns ``(checks, comparison)``: name -> "ok" | problem, and the ModelComparison or None."""
    import onnx
    from .evaluate import compare_models, weight_bytes
    from .verify import make_session
    loaded = []
    is_path = isinstance(original, (str, os.PathLike))

    def original_proto():  # read only when needed, without external data
        if not loaded:
            loaded.append(original if not is_path else onnx.load(str(original), load_external_data=False))
        return loaded[0]

    def run(name: str, check) -> None:
        try:
            check(proto)
            checks[name] = "ok"
        except Exception as exc:
            checks[name] = _first_line(exc)
            if original is None:
                return
            try:
                check(original_proto())
            except Exception as orig_exc:
                if _first_line(orig_exc) == checks[name]:
                    checks[name] = "pre-existing: " + checks[name]

    checks: dict = {}
    run("checker", onnx.checker.check_model)
    run("strict_shape_inference",
        lambda m: onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True))
    loaded_session = []

    def get_session():  # waits for the background build, if any
        if not loaded_session:
            try:
                loaded_session.append(session.result() if session is not None
                                      else make_session(proto.SerializeToString()))
                checks["onnxruntime_load"] = "ok"
            except Exception as exc:
                loaded_session.append(None)
                checks["onnxruntime_load"] = _first_line(exc)
        return loaded_session[0]

    comparison = None
    if compare and original is not None:
        base_dir = os.path.dirname(os.path.abspath(original)) if is_path else None
        orig = original_proto()
        if is_path and weight_bytes(orig, base_dir) <= _max_compare_bytes():
            orig = onnx.load(str(original))
        comparison = compare_models(orig, proto, session=get_session, flavor=flavor,
                                    max_weight_bytes=_max_compare_bytes(), base_dir=base_dir)
    get_session()
    checks = {k: checks[k] for k in ("checker", "strict_shape_inference", "onnxruntime_load")}
    if comparison is not None:
        checks["model_run"] = comparison.status
    return checks, comparison


def _max_compare_bytes() -> int:
    from .evaluate import DEFAULT_MAX_WEIGHT_BYTES
    return DEFAULT_MAX_WEIGHT_BYTES


def verify_model_file(path) -> dict:
    """Validate an exported model file: the checker (full), strict shape inference, onnxruntime
    loads it, and no StridedSlice is left (any domain, subgraphs and functions included).
    Returns check name -> "ok" | problem.  Raises ModelError for an unreadable file."""
    import onnx
    import onnxruntime as ort
    import onnx_ir as ir
    from .rewrite import _all_graphs
    from .verify import session_options
    m = load_ir(path)  # readable, external data inside the folder
    checks = {}
    try:
        onnx.checker.check_model(str(path), full_check=True)
        checks["checker_full"] = "ok"
    except Exception as exc:
        checks["checker_full"] = _first_line(exc)
    try:
        onnx.shape_inference.infer_shapes_path(str(path), os.devnull, check_type=True, strict_mode=True)
        checks["strict_shape_inference"] = "ok"
    except Exception as exc:
        checks["strict_shape_inference"] = _first_line(exc)
    try:
        ort.InferenceSession(str(path), sess_options=session_options(), providers=["CPUExecutionProvider"])
        checks["onnxruntime_load"] = "ok"
    except Exception as exc:
        checks["onnxruntime_load"] = _first_line(exc)
    left = []
    for graph, label, _ in _all_graphs(m):
        for node in ir.traversal.RecursiveGraphIterator(graph):
            if node.op_type == "StridedSlice":
                left.append(f"{node.name or node.outputs[0].name} ({label})")
    checks["no_strided_slice"] = "ok" if not left else f"{len(left)} left: " + ", ".join(left[:5])
    return checks


def compare_model_files(original, converted, *, trials: int = 3, flavor: str | None = None):
    """:func:`evaluate.compare_models` of two model files (weights above the limit: skipped)."""
    import onnx
    from .evaluate import compare_models, weight_bytes
    protos = []
    for p in (original, converted):
        load_ir(p)  # readable, external data inside the folder
        head = onnx.load(str(p), load_external_data=False)
        base = os.path.dirname(os.path.abspath(p))
        protos.append(onnx.load(str(p)) if weight_bytes(head, base) <= _max_compare_bytes() else head)
    return compare_models(protos[0], protos[1], trials=trials, flavor=None if flavor == "auto" else flavor,
                          max_weight_bytes=_max_compare_bytes(),
                          base_dir=os.path.dirname(os.path.abspath(original)))
