"""``convert``: load -> rewrite pass -> verification -> ONNX model and report."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from .errors import ModelError
from .rewrite import RewriteRecord, StridedSliceRewritePass, default_opset, set_default_opset
from .spec import FLAVORS


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
        return not self.failed_records and all(
            v in ("ok", "not run") or v.startswith("pre-existing") for v in self.model_checks.values())

    def to_json(self) -> dict:
        return {
            "source": self.source, "opset": self.opset, "ok": self.ok, "verified": self.verified,
            "strided_slice_nodes": self.found, "rewritten": self.rewritten,
            "failed": len(self.failed_records), "signatures_checked": self.signatures_checked,
            "model_checks": self.model_checks,
            "timings_s": {k: round(v, 4) for k, v in self.timings.items()},
            "rewrites": [r.to_json() for r in self.records],
        }


@dataclass
class ConvertResult:
    model: object  # onnx.ModelProto
    report: Report

    @property
    def ok(self) -> bool:
        return self.report.ok


def load_ir(source, *, path_hint: str | None = None):
    """An onnx_ir.Model from a path (external data stays on disk, read lazily) or a ModelProto."""
    import onnx
    import onnx_ir as ir
    if isinstance(source, (str, os.PathLike)):
        p = Path(source)
        if not p.is_file():
            raise ModelError("no such file" if not p.exists() else "not a file", path=str(p))
        try:
            return ir.load(p)
        except Exception as exc:
            raise ModelError(f"cannot read the model: {_first_line(exc)}", path=str(p)) from None
    if isinstance(source, onnx.ModelProto):
        try:
            return ir.from_proto(source)
        except Exception as exc:
            raise ModelError(f"cannot read the model: {_first_line(exc)}", path=path_hint) from None
    raise TypeError(f"model must be an onnx.ModelProto or a path, got {type(source).__name__}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def convert(model, *, flavor: str | None = None, opset: int | None = None, verify: bool = True,
            source: str | None = None) -> ConvertResult:
    """Replace every StridedSlice in ``model`` (a ModelProto or a path) by standard ONNX.

    Returns a :class:`ConvertResult` with ``.model`` (a new ModelProto; the input is never
    modified) and ``.report``.  Raises :class:`ModelError` for an unusable model.
    Invalid specs and failed checks are reported (``result.ok`` is False), not raised.
    """
    import onnx_ir as ir
    from .verify import ir_version_for, max_supported_ir_version, max_supported_opset
    if flavor not in (None, "auto", *FLAVORS):
        raise ValueError(f"unknown flavor {flavor!r}; expected auto, tf or openvino")
    flavor = None if flavor == "auto" else flavor
    label = source or (str(model) if isinstance(model, (str, os.PathLike)) else None)
    t0 = time.perf_counter()
    m = load_ir(model, path_hint=label)
    report = Report(label)
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
    result = StridedSliceRewritePass(flavor=flavor, opset=target)(m)
    report.records = result.records
    set_default_opset(m, target)
    m.ir_version = min(max(m.ir_version or 0, ir_version_for(target)), max(max_supported_ir_version(),
                                                                           ir_version_for(target)))
    report.timings["rewrite"] = time.perf_counter() - t1

    if verify:
        t2 = time.perf_counter()
        report.signatures_checked = verify_records(report.records, target)
        report.verified = True
        report.timings["verify_rewrites"] = time.perf_counter() - t2
    t3 = time.perf_counter()
    proto = ir.to_proto(m)
    report.timings["serialize"] = time.perf_counter() - t3
    if verify:
        t4 = time.perf_counter()
        report.model_checks = check_model(proto, original=model)
        report.timings["verify_model"] = time.perf_counter() - t4
    return ConvertResult(proto, report)


def _upgrade_opset(m, target: int, label):
    import onnx
    import onnx_ir as ir
    try:
        return ir.from_proto(onnx.version_converter.convert_version(ir.to_proto(m), target))
    except Exception as exc:
        raise ModelError(f"cannot convert the model to opset {target}: {_first_line(exc)}", path=label) from None


def verify_records(records: list[RewriteRecord], opset: int) -> int:
    """Check each distinct rewrite once (see verify.py); returns the number of signatures."""
    from onnx import helper
    from .verify import CheckCase, _shape_problem, check_lowerings
    groups: dict = {}
    for r in records:
        if r.lowering is None:
            continue
        elem = r.elem_type or 1  # slicing does not depend on the dtype: float32 when unknown
        key = (r.spec, r.input_shape, elem)
        groups.setdefault(key, []).append(r)
    cases = []
    for (spec, shape, elem), recs in groups.items():
        dtype = np.dtype(object) if elem == 8 else helper.tensor_dtype_to_np_dtype(elem)
        cases.append(CheckCase(recs[0].lowering, dtype, elem, declared_output=recs[0].declared_output))
    check_lowerings(cases, opset)
    for case, recs in zip(cases, groups.values()):
        for r in recs:
            r.check = case.result
            if r.declared_output != recs[0].declared_output:  # same op, other declared shape
                problem = _shape_problem(r.declared_output, r.output_shape) if r.output_shape else None
                if problem:
                    r.check = replace(case.result, shape_inference=f"declared output shape: {problem}")
    return len(cases)


def check_model(proto, original=None) -> dict:
    """Whole-model checks: onnx.checker, strict shape inference (the two together are the
    checker's ``full_check``, run once), onnxruntime loads it.

    ``original`` (a ModelProto or a path) is the model before conversion: a check failure
    it has too is reported as ``pre-existing: ...`` and does not fail the conversion."""
    import onnx
    from .verify import make_session
    loaded = []

    def original_proto():  # only read when a check fails
        if not loaded:
            loaded.append(original if not isinstance(original, (str, os.PathLike))
                          else onnx.load(str(original), load_external_data=False))
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
    try:
        make_session(proto.SerializeToString())
        checks["onnxruntime_load"] = "ok"
    except Exception as exc:
        checks["onnxruntime_load"] = _first_line(exc)
    return checks
