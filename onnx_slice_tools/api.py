"""``convert``: load -> rewrite pass -> verification -> ONNX model and report."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace

from .verification.checks import check_model, kind, static_checks, verdict  # noqa: F401 - check_model: API
from .verification.checks import NOT_RUN, PASSED, detail, failed, passed, skipped
from .errors import ModelError
from .graphs.allocation import paused_gc
from .errors import first_line as _first_line
from .io.files import adopt_files, input_files, load_ir, load_model_proto, model_weight_bytes, proto_weight_bytes, save_model
from .io.files import PROTO_LIMIT
from .io.files import has_external_tensors as _external_tensors
from .io.files import source_kind
from .io.files import with_external_data as _with_external_data
from .rewrite.core import RewriteRecord
from .verification.runtimes import NOT_ASKED
from .semantics.spec import FLAVORS
from .verification.lowerings import DEFAULT_VERIFY_MEMORY  # memory every check may use (--verify-memory)


#: the verdict of a conversion that changed nothing (see Report.verdict)
NOTHING_TO_REWRITE = "nothing to rewrite"


@dataclass
class Report:
    """What a conversion did, per StridedSlice node and for the whole model."""

    source: str | None
    opset: int | None = None
    records: list[RewriteRecord] = field(default_factory=list)
    verify: bool = True             # False: verification off (convert(verify=False), --no-verify)
    strict: bool = False            # a skipped check fails the conversion
    model_checks: dict = field(default_factory=dict)   # name -> passed | failed: .. | skipped: ..
    timings: dict = field(default_factory=dict)
    signatures_checked: int = 0
    inplace_sizes: dict = field(default_factory=dict)  # symbolic dim -> size of the in-place run
    # per-rewrite verification results, keyed by the record's position in ``records`` (the records
    # stay as the rewrite pass made them): its CheckResult, its in-place status
    record_checks: dict = field(default_factory=dict)
    record_inplace: dict = field(default_factory=dict)
    cleanup: dict | None = None   # cleanup.cleanup's report: nodes before/after, removed per pass
    target: str = "onnxruntime"                # lowering/targets.py
    verify_on: tuple = ()                      # runtimes of the per-rewrite checks
    path: str | None = None  # the representation the rewrite ran on: "protobuf" | "onnx-ir" (rewrite/core.py)
    # graph output -> why onnxruntime's as-shipped run disagreed with the checked run on it (those that did)
    shipped_problems: dict = field(default_factory=dict)

    def tally(self) -> tuple[int, int, int, int]:
        """(found, rewritten, fixable, fixed): the four counts in one pass over the records."""
        found = rewritten = fixable = fixed = 0
        for r in self.records:
            done = r.lowering is not None
            if r.op_type == "StridedSlice":
                found += 1
                rewritten += done
            else:
                fixable += 1
                fixed += done
        return found, rewritten, fixable, fixed

    @property
    def found(self) -> int:
        """StridedSlice nodes found (the model's own Slice/Gather that ``fix_slices`` rewrote:
        :attr:`fixable`)."""
        return self.tally()[0]

    @property
    def rewritten(self) -> int:
        return self.tally()[1]

    @property
    def fixable(self) -> int:
        """Slice/Gather nodes that broke the target and that ``fix_slices`` read as slices."""
        return self.tally()[2]

    @property
    def fixed(self) -> int:
        return self.tally()[3]

    def check_of(self, i: int):
        """The per-rewrite CheckResult of ``records[i]`` (None: not checked)."""
        return self.record_checks.get(i)

    def inplace_of(self, i: int) -> str | None:
        """The in-place status of ``records[i]``: passed | failed: .. | skipped: .. (None: not run)."""
        return self.record_inplace.get(i)

    @property
    def failed_records(self) -> list[RewriteRecord]:
        out = []
        for i, r in enumerate(self.records):
            check, inplace = self.check_of(i), self.inplace_of(i)
            if r.error is not None or (check is not None and not check.ok) or inplace is not None and kind(inplace) == "failed":
                out.append(r)
        return out

    @property
    def invalid_records(self) -> list[RewriteRecord]:
        return [r for r in self.records if r.error_kind == "invalid"]

    def statuses(self) -> list[tuple[str, str]]:
        """Every check as (name, status), the input of :attr:`verdict`."""
        if not self.verify:
            return [("checks", skipped("verification off"))]
        out = list(self.model_checks.items())
        if "shipped" not in self.model_checks:  # "verified" never stands without the as-shipped run
            out.append(("shipped", skipped("the as-shipped run did not run")))
        checks, inplaces, model_run = self.record_checks, self.record_inplace, self.model_checks.get("model_run")
        rewrite_status: dict = {}  # id(CheckResult) -> its status: records of one signature share one
        for i, r in enumerate(self.records):
            if r.error is not None:
                out.append((f"node {r.node!r}", failed(str(r.error))))
                continue
            check = checks.get(i)
            status = rewrite_status.get(id(check))
            if status is None:
                status = rewrite_status[id(check)] = _rewrite_status(check)
            out.append((f"node {r.node!r} rewrite check", status))
            inplace = inplaces.get(i)
            if inplace is not None and not (inplace == model_run and inplace != NOT_RUN and kind(inplace) == "skipped"):
                out.append((f"node {r.node!r} in place", inplace))
        return out

    def _all_passed(self) -> bool:
        """Whether every status :meth:`statuses` lists passed, asked of each distinct status once
        (records share their signature's check and, mostly, one in-place status): the verdict of
        a verified conversion without a (name, status) per rewrite."""
        if not self.verify or "shipped" not in self.model_checks or \
                any(kind(s) != "passed" for s in self.model_checks.values()):
            return False
        if any(r.error is not None for r in self.records):
            return False
        checks = self.record_checks
        if any(i not in checks for i in range(len(self.records))):
            return False  # a record without a per-rewrite check: "skipped: not checked"
        distinct = {id(c): c for c in checks.values()}.values()  # (shared per signature)
        if any(kind(_rewrite_status(c)) != "passed" for c in distinct):
            return False
        return all(kind(s) == "passed" for s in set(self.record_inplace.values()))

    def problem(self) -> str:
        """One line: the first failed (or, with ``strict``, skipped) check of a failed conversion."""
        statuses = self.statuses()
        bad = [(n, s) for n, s in statuses if kind(s) == "failed"] or \
              [(n, s) for n, s in statuses if kind(s) == "skipped"]
        if not bad:
            return "no failed check"
        name, status = bad[0]
        more = f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""
        strict = " (--strict)" if kind(status) == "skipped" else ""
        return f"{name}: {status}{strict}{more}"

    @property
    def verdict(self) -> str:
        """"verified" | "nothing to rewrite" | "unverified (<what was skipped and why>)" |
        "failed": the one answer that convert, batch, verify and report.json give.  "nothing
        to rewrite": every check passed, but the conversion replaced nothing, converted no
        opset and read no framework file (the output is the input): nothing was verified
        because nothing was done."""
        v = "verified" if self._all_passed() else verdict(self.statuses(), strict=self.strict)
        _, rewritten, _, fixed = self.tally()
        changed = rewritten or fixed or {"opset_conversion", "framework"} & set(self.model_checks)
        if v == "verified" and not changed:  # (framework inputs: tf2onnx converted them, the framework check ran)
            return NOTHING_TO_REWRITE
        return v

    @property
    def verified(self) -> bool:
        return self.verdict == "verified"

    @property
    def ok(self) -> bool:
        return self.verdict != "failed"

    def to_json(self, indent: int | None = 2) -> str:
        """:meth:`to_dict` as JSON text (what ``convert --report`` writes)."""
        import json
        return json.dumps(self.to_dict(), indent=indent)

    def rewrites_json(self) -> list[dict]:
        """Every rewrite as report.json shows it, with its verification results."""
        return [r.to_json(self.check_of(i), self.inplace_of(i)) for i, r in enumerate(self.records)]

    def to_dict(self) -> dict:
        """The report as plain data (JSON types only): checks, verdict, and every rewrite."""
        return {
            "source": self.source, "opset": self.opset, "target": self.target, "verify_on": list(self.verify_on),
                "ok": self.ok, "verified": self.verified,
            "verdict": self.verdict, "strict": self.strict,
            "strided_slice_nodes": self.found, "rewritten": self.rewritten, "path": self.path,
            "fixable_slice_nodes": self.fixable, "fixed": self.fixed,
            "failed": len(self.failed_records), "signatures_checked": self.signatures_checked,
            "model_checks": self.model_checks, "inplace_sizes": self.inplace_sizes,
            "cleanup": self.cleanup,
            "timings_s": {k: round(v, 4) for k, v in self.timings.items()},
            "rewrites": self.rewrites_json(),
        }


def _rewrite_status(check) -> str:
    """A per-rewrite CheckResult (verification/lowerings.py) as one status."""
    if check is None:
        return skipped("not checked")
    if not check.ok:
        parts = [("shape inference", check.shape_inference), ("onnxruntime", check.onnxruntime),
                 ("onnx reference", check.reference_evaluator), *check.runtimes.items()]
        problems = [f"{name}: {status}" for name, status in parts if kind(status) == "failed"]
        return failed("; ".join(problems))
    values = [check.onnxruntime]
    if check.onnxruntime == NOT_ASKED and check.runtimes:  # --verify-on without onnxruntime: the others'
        values = list(check.runtimes.values())
    for status in values:
        if kind(status) == "skipped":
            return status if status != NOT_RUN else skipped("not run")
    if kind(check.run_time_errors) == "skipped" and check.run_time_errors != NOT_RUN:
        return check.run_time_errors
    return PASSED


@dataclass
class ConvertResult:
    model: object  # onnx.ModelProto (external weights stay references to the input's files)
    report: Report
    ir_model: object = None  # the onnx_ir.Model behind ``model`` (None: the protobuf path, see rewrite/proto_pass.py)
    source_folder: object = None  # framework inputs: the private folder holding the external weights (kept with the result)
    inputs: list | None = None  # files.FileId of the files the model was read from (None: ``ir_model``'s)

    def input_files(self) -> list:
        """The files the converted model was read from (model and data files): never written over."""
        return list(self.inputs) if self.inputs is not None else input_files(self.ir_model)

    @property
    def ok(self) -> bool:
        return self.report.ok

    def save(self, path, *, external_data: bool | None = None, protect=()):
        """Write the converted model atomically (see files.save_model): never over an input
        file, weights the input kept in external data streamed to ``<path>.data``.
        Returns a files.SavedModel.  ``model`` is ``ir_model`` serialized: written as it is when
        no weights move.  A framework input's weights (external data in our private folder, not
        the user's layout) are written into the one file unless they pass protobuf's limit or
        ``external_data`` is True."""
        if external_data is None and self.source_folder is not None:
            weights = model_weight_bytes(self.ir_model) if self.ir_model is not None else proto_weight_bytes(self.model)
            external_data = weights > PROTO_LIMIT
        if self.ir_model is None:  # the protobuf path: it takes no model with external data
            return save_model(self.model, path, external_data=external_data, protect=[*protect, *self.input_files()],
                              no_external=self.inputs is not None)
        return save_model(self.ir_model, path, external_data=external_data, protect=protect, proto=self.model)


#: parameters of :func:`convert` that describe its caller, not a conversion option (a batch
#: run's recorded options leave them out): the label of a framework input, and that its
#: caller holds the weights
CALLER_OPTIONS = frozenset({"source", "weights_held", "calibration"})


def convert(model, *, flavor: str | None = None, opset: int | None = None, verify: bool = True,
            source: str | None = None, strict: bool = False,
            verify_memory: int | None = None, cleanup: bool = True,
            target: str | None = None, verify_on=None, fix_slices: bool = False,
            weights_held: bool = False, calibration: dict | None = None) -> ConvertResult:
    """Replace every StridedSlice in ``model`` (a ModelProto or a path) by standard ONNX.

    ``target``: onnxruntime (default: the minimal lowering), portable or openvino (lowering/targets.py).
    ``verify_on``: runtimes the per-rewrite checks run on ("onnxruntime,openvino,reference" or a
    sequence; default: the target's).  ``fix_slices``: also rewrite the model's own Slice/Gather
    nodes that break the target's constraints (rewrite/fixslices.py), verified like every rewrite.

    Returns a :class:`ConvertResult` with ``.model`` (a new ModelProto; the input is never
    modified) and ``.report`` (``report.verdict``: verified | unverified (why) | failed).
    A path to a ``.tflite``, SavedModel folder or Keras file goes through
    :func:`frontends.sources.convert_source` (tf2onnx, then this, then the framework check).
    ``strict``: a skipped check fails the conversion.  ``verify_memory``: bytes the checks may
    add to converting the model (default ``DEFAULT_VERIFY_MEMORY``, 256 MiB: the tensors a run
    holds, one more copy of the weights in memory, two of external ones, see
    inplace.budget_weight_bytes); a check that needs more is skipped with its reason.
    ``weights_held``: the caller holds the model's weights in memory (a framework input:
    convert_source), so its external ones count as held.  ``calibration``: {graph output name:
    (largest, |median|) disagreement in quantization steps} of the framework's own two kernel
    sets (convert_source measures it on a .tflite): the as-shipped run compares quantized
    outputs under that allowance (verification/tolerance.py, ``steps_rule``).  Raises
    :class:`ModelError` for
    an unusable model.  Invalid specs and failed checks are reported (``result.ok`` is False).
    ``cleanup``: run the cleanup passes (cleanup/passes.py) after the rewrite; with ``verify`` the
    model before and after cleanup are compared in onnxruntime (``model_checks["cleanup"]``).
    """
    from .verification.runtimes import parse_runtimes, require
    from .lowering.targets import get_target
    if isinstance(model, (str, os.PathLike)) and source_kind(model) is not None and source is None:
        from .frontends.sources import convert_source  # a .tflite, SavedModel or Keras file: tf2onnx first
        return convert_source(model, flavor=flavor, opset=opset, verify=verify, strict=strict,
                              verify_memory=verify_memory, cleanup=cleanup, target=target, verify_on=verify_on,
                              fix_slices=fix_slices)
    target_spec = get_target(target)
    runtimes = parse_runtimes(verify_on) if verify_on else target_spec.verify_on
    if verify:
        for name in runtimes:
            require(name)
    if flavor not in (None, "auto", *FLAVORS):
        raise ValueError(f"unknown flavor {flavor!r}; expected auto, tf, openvino or tflite")
    flavor = None if flavor == "auto" else flavor
    if verify:  # (shape inference runs in a helper process: forked before the model is read)
        from .graphs.shape_inference import start_helper
        start_helper()
    verify_memory = DEFAULT_VERIFY_MEMORY if verify_memory is None else verify_memory
    label = source or (str(model) if isinstance(model, (str, os.PathLike)) else None)
    report = Report(label, verify=verify, strict=strict, target=target_spec.name,
                    verify_on=tuple(runtimes) if verify else ())
    options = dict(flavor=flavor, opset=opset, verify=verify, verify_memory=verify_memory, cleanup=cleanup,
                   target_spec=target_spec, calibration=calibration)
    read = None
    if not fix_slices:  # the protobuf path (rewrite/proto_pass.py) when it applies, else onnx-ir
        done, read = _convert_proto(model, report, label, **options)
        if done is not None:
            return done
    return _convert_ir(model, report, label, fix_slices=fix_slices, read=read, weights_held=weights_held, **options)


def _convert_proto(model, report: Report, label, *, flavor, opset, verify, verify_memory, cleanup, target_spec,
                   calibration=None):
    """:func:`convert` on the ModelProto (rewrite/proto_pass.py): the same rewrite, checks, cleanup
    and report without onnx-ir's round trip, for models it applies to.  Returns (result or None,
    the proto read and validated from a path, for the onnx-ir path)."""
    from .io.files import load_plain_proto
    from .rewrite.shapes import derive_shapes
    from .rewrite.proto_pass import ProtoStridedSliceRewritePass, declines, proto_default_opset, scan
    from .rewrite.proto_pass import set_proto_opset
    t0 = time.perf_counter()
    proto, inputs, external = load_plain_proto(model, path_hint=label)
    read = (proto, external) if isinstance(model, (str, os.PathLike)) else None
    if external:  # onnx-ir reads external data lazily
        return None, read
    report.timings["load"] = time.perf_counter() - t0
    current = proto_default_opset(proto)
    if current is None or current < 11 or opset not in (None, current):
        return None, read
    walked = scan(proto.graph)
    if declines(proto, walked.holders):
        return None, read
    target, lower_opset = opsets(current, opset, label)
    report.opset = target
    t1 = time.perf_counter()
    found = walked.found  # (one in a subgraph or function: declined above)
    baseline = None
    if found and verify:  # the model before the rewrite: the structural proof's baseline
        import onnx
        baseline = onnx.ModelProto()
        baseline.CopyFrom(proto)
    # (a StridedSlice holding a subgraph is declined by the pass: then the onnx-ir path derives again)
    shapes = derive_shapes(proto, names=walked.inputs, has_subgraphs=bool(walked.holders), flavor=flavor) if found else {}
    domains_before = {o.domain for o in proto.opset_import}
    try:
        with paused_gc():  # (many small acyclic objects: see graphs/allocation.py)
            result = ProtoStridedSliceRewritePass(flavor=flavor, opset=lower_opset, target=target_spec.name)(
                proto, shapes, walked.holders)
    except ValueError:  # declined after all: nothing was changed
        return None, read
    report.records = result.records
    report.path = "protobuf"
    set_proto_opset(proto, lower_opset)
    proto.ir_version = _runnable_ir_version(proto.ir_version, lower_opset)
    report.timings["rewrite"] = time.perf_counter() - t1
    inplace = None
    weights = 0
    if verify:
        from .verification.inplace import budget_weight_bytes
        weights = budget_weight_bytes(proto, held=True)  # (this path holds every weight inline)
    clean = _provably_clean(report, proto, cleanup and result.modified and verify, result.table)
    final = (clean[1] or not cleanup) and weights * _AHEAD_WEIGHTS <= verify_memory  # nothing below changes it
    final = final and available_cpus() >= _AHEAD_CPUS
    if verify:
        inplace = _verify(report, proto, baseline, result, lower_opset, verify_memory, ship_ahead=final,
                          removed_domains=domains_before - {o.domain for o in proto.opset_import},
                          weight_bytes=weights, load_weights=lambda p: p, keep_session=cleanup and not clean[1],
                          baseline_holders=walked.positions)
    checked = _checked_run(inplace, proto, verify_memory, weights, lambda p: p) if verify else None
    m = None
    if cleanup and result.modified:
        m, proto = _cleanup(report, None, proto, model, verify, verify_memory, inplace, clean)
    if verify:  # last: the bytes ConvertResult.save writes
        _check_shipped(report, proto, checked, verify_memory, weights, lambda p: p, inplace, calibration)
    return ConvertResult(proto, report, m, inputs=inputs), None


def _convert_ir(model, report: Report, label, *, flavor, opset, verify, verify_memory, cleanup, target_spec,
                fix_slices, read=None, weights_held: bool = False, calibration=None) -> ConvertResult:
    """:func:`convert` through onnx-ir (every model the protobuf path declines).  ``read``: what
    files.load_plain_proto read of the path ``model`` (see files.load_ir)."""
    import onnx_ir as ir

    from .rewrite.ir_pass import StridedSliceRewritePass, has_strided_slice, default_opset, derive_shapes
    from .rewrite.ir_pass import set_default_opset
    t0 = time.perf_counter()
    m = load_ir(model, path_hint=label, read=read)
    report.timings["load"] = time.perf_counter() - t0

    current = default_opset(m)
    target, lower_opset = opsets(current, opset, label)
    upgraded = current is not None and current < 11
    if upgraded:
        m = _upgrade_opset(m, target, label)
    report.opset = target

    t1 = time.perf_counter()
    found = has_strided_slice(m) or fix_slices
    # The model before the rewrite, as a proto without external data: the baseline of the
    # structural proof and the input of shape derivation (declared shapes are not trusted).
    baseline = _baseline_proto(model, m, upgraded) if found else None
    shapes = derive_shapes(baseline, flavor=flavor) if found else {}
    domains_before = set(m.opset_imports)
    result = StridedSliceRewritePass(flavor=flavor, opset=lower_opset, target=target_spec.name, shapes=shapes)(m)
    if fix_slices:  # the model's own Slice/Gather that break the target, rewritten (and proven) alike
        from .rewrite.fixslices import FixSlicesPass
        result = result.merged(FixSlicesPass(target_spec, opset=lower_opset)(m, shapes=shapes))
    report.records = result.records
    report.path = "onnx-ir"
    set_default_opset(m, lower_opset)
    report.timings["rewrite"] = time.perf_counter() - t1

    # the IR version onnxruntime runs (a model saved by a newer onnx says 14): the checks run
    # the model as it is saved
    m.ir_version = _runnable_ir_version(m.ir_version, lower_opset)
    t3 = time.perf_counter()
    proto = ir.to_proto(m)
    report.timings["serialize"] = time.perf_counter() - t3
    inplace = None  # the in-place run, its session kept for the cleanup check
    from .verification.inplace import budget_weight_bytes
    weights = budget_weight_bytes(m, held=weights_held) if verify else 0
    external = _external_tensors(m)

    def load_weights(p):
        return _with_external_data(p, model) if external else p
    converting = lower_opset != target and all(r.lowering is not None for r in result.records)
    clean = _provably_clean(report, proto, cleanup and result.modified and verify and not converting)
    if verify:
        inplace = _verify(report, proto, baseline, result, lower_opset, verify_memory,
                          removed_domains=domains_before - set(m.opset_imports), weight_bytes=weights,
                          load_weights=load_weights, keep_session=cleanup and not converting and not clean[1])
    checked = None
    if verify and (converting or result.modified or not result.records):
        checked = _checked_run(inplace, proto, verify_memory, weights, load_weights)
    if converting:
        m = _upgrade_opset(m, target, label)
        set_default_opset(m, target)
    m.ir_version = _runnable_ir_version(m.ir_version, target)
    if converting or m.ir_version != proto.ir_version:
        proto = ir.to_proto(m)
        if verify and converting:
            _check_conversion(report, proto, baseline, checked, load_weights)
    if cleanup and result.modified:  # what is saved is what the cleanup check ran
        m, proto = _cleanup(report, m, proto, model, verify, verify_memory, inplace, clean, weights)
    if verify:  # last: the bytes ConvertResult.save writes
        _check_shipped(report, proto, checked, verify_memory, weights, load_weights, inplace, calibration)
    return ConvertResult(proto, report, m)


# --------------------------------------------------------------------------- the checked run, as shipped


def _checked_run(inplace, proto, budget: int, weight_bytes: int, load_weights):
    """The run the later whole-model checks agree with: the in-place run's first run (its
    inputs and graph outputs), else -- nothing was rewritten in place -- ``proto`` run untapped
    in a fast session (shipped.baseline_run).  Returns a CheckedRun or a ``skipped: ...`` status."""
    from .verification.shipped import baseline_run
    if inplace is not None:
        if inplace.checked is not None:
            return inplace.checked
        return skipped(f"no checked run to compare with (model_run {inplace.last.status})")
    return baseline_run(proto, memory_budget=budget, weight_bytes=weight_bytes, load_weights=load_weights)


def _check_conversion(report: Report, proto, baseline, checked, load_weights) -> None:
    """``--opset N``: the converted ``proto`` by the checker and strict shape inference, and run
    in a fast onnxruntime session on the checked run's inputs (shipped.converted_check)."""
    from .verification.shipped import converted_check
    t = time.perf_counter()
    report.model_checks.update(static_checks(proto, baseline))
    run, why = (None, detail(checked)) if isinstance(checked, str) else (checked, None)
    report.model_checks["opset_conversion"] = converted_check(proto, run, load_weights=load_weights, why_none=why)
    report.timings["verify_opset"] = time.perf_counter() - t


@paused_gc()
def _check_shipped(report: Report, proto, checked, budget: int, weight_bytes: int, load_weights,
                   inplace=None, calibration=None) -> None:
    """The as-shipped run of the final ``proto`` in each runtime's default configuration
    (verification/shipped.py): model_checks ``shipped`` (onnxruntime) and ``shipped_openvino``;
    then the rewrites the in-place run left to it (``inplace``: the InplaceRun) get their status.
    Its onnxruntime session may have been started by the in-place run (``inplace.ahead``)."""
    from .verification.shipped import shipped_checks
    t = time.perf_counter()
    run, why = (None, detail(checked)) if isinstance(checked, str) else (checked, None)
    compared: dict = {}
    liveness = inplace.liveness if inplace is not None and inplace.proto is proto else None  # (cleanup: a new proto)
    ahead = getattr(inplace, "ahead", None)
    try:
        report.model_checks.update(shipped_checks(proto, run, runtimes=report.verify_on, memory_budget=budget,
                                                  weight_bytes=weight_bytes, load_weights=load_weights, why_none=why,
                                                  compared=compared, liveness=liveness, ahead=ahead,
                                                  calibration=calibration))
    finally:
        if ahead is not None:
            ahead.close()
    report.shipped_problems = {k: v for k, v in compared.items() if v is not None}
    if inplace is not None and getattr(inplace, "awaiting", None):
        settled = inplace.settle(compared or None, detail(report.model_checks["shipped"]))
        report.model_checks["model_run"] = settled.status
        report.record_inplace = settled.inplace
    report.timings["verify_shipped"] = time.perf_counter() - t


def opsets(current: int | None, opset: int | None, label) -> tuple[int, int]:
    """(the opset to write, the opset to rewrite at) for a model importing ``current`` when
    ``opset`` is asked; ModelError for an opset below 11 or newer than onnxruntime runs.  The
    opset is converted after the rewrite, when no StridedSlice is left for onnx's version
    converter to trip on (it has no schema for them in subgraphs); models below opset 11 first."""
    from .verification.lowerings import max_supported_opset
    target = opset or current or 17
    if target < 11:
        raise ModelError(f"the model imports opset {target}; onnx-slice-tools emits opset 11 or newer "
                         "(convert with --opset 11 or more on the command line, opset=11 in Python)", path=label)
    if target > max_supported_opset():
        raise ModelError(f"opset {target} is newer than the installed onnxruntime runs "
                         f"(up to {max_supported_opset()})", path=label)
    return target, current if current is not None and current >= 11 else target


def _runnable_ir_version(current: int | None, opset: int) -> int:
    """At least the IR version ``opset`` needs, at most what onnxruntime runs (unless the opset
    needs more)."""
    from .verification.lowerings import ir_version_for, max_supported_ir_version
    need = ir_version_for(opset)
    return min(max(current or 0, need), max(max_supported_ir_version(), need))


#: the as-shipped session is built ahead (two sessions with their weights alive at once) only
#: when this many times the weights fit the budget
_AHEAD_WEIGHTS = 8
#: ... and only when the process may use this many CPUs: with fewer, the session's thread takes
#: a core the other checks need (on two, it saves no wall time and costs CPU: docs/benchmarks.md §8)
_AHEAD_CPUS = 4


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity, where the platform has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (not Linux)
        return os.cpu_count() or 1


def _provably_clean(report: Report, proto, asked: bool, table=None) -> tuple:
    """(``proto``, whether the cleanup's pre-check (cleanup/scan.py) proves no pass can change
    it): asked before the in-place run (``asked``), whose tapped session is kept for the
    cleanup check only when a pass may change the model; answered again by :func:`_cleanup`.
    ``table``: the rewrite's node table of ``proto``'s main graph (RewriteResult.table), if it
    made one.  (The checks read the converted model themselves: they never take the rewrite's word.)"""
    if not asked:
        return None, False
    from .cleanup.scan import nothing_to_clean
    t = time.perf_counter()
    clean = nothing_to_clean(proto, table)
    report.timings["cleanup"] = time.perf_counter() - t
    return proto, clean


def _cleanup(report: Report, m, before, source, verify: bool, budget: int, inplace=None, clean=(None, False),
             weight_bytes: int = 0):
    """The cleanup passes (cleanup/passes.py) on the rewritten ``m``, after its verification, and --
    with ``verify`` -- their own check: the model before and after cleanup run in onnxruntime
    on the same random inputs (cleanup.cleanup_check).  Returns (model, proto) after; when
    the cleanup changed nothing or stopped, the model as it was before (``before``): onnx-ir's
    passes may still have touched it (e.g. trailing empty inputs dropped).  ``inplace``: the
    in-place run of ``before`` (``_verify``), whose session then runs the model before cleanup.
    ``m`` None (the protobuf path): ``before`` is deserialized for the passes, and returned as
    it is, with no onnx-ir model, when they change nothing.  ``weight_bytes``: the weights the
    check's runs count against ``budget`` (inplace.budget_weight_bytes).  When the proto-level pre-check
    (cleanup/scan.py) proves no pass can change ``before``, the passes do not run: the report is
    the one they would give (``clean``: :func:`_provably_clean`'s answer, used when it is of ``before``)."""
    from .cleanup.scan import nothing_to_clean, unchanged_report
    same = inplace is not None and inplace.proto is before
    run_before, sized = (inplace.run_outputs(), inplace.sized()) if same else (None, None)
    if inplace is not None:
        inplace.release()  # run_before holds the session until the check is done
    t = time.perf_counter() - report.timings.get("cleanup", 0.0)
    if clean[1] and clean[0] is before or clean[0] is not before and nothing_to_clean(before):
        report.cleanup = unchanged_report(before, inplace.table.holders if same else None)
        report.timings["cleanup"] = time.perf_counter() - t
        if verify:
            report.model_checks["cleanup"] = passed("nothing to clean")
        return m, before
    import onnx_ir as ir  # the passes run on onnx-ir (imported only now: a proven-clean model needs none)

    from .cleanup.passes import cleanup as run_cleanup
    from .cleanup.passes import cleanup_check
    from .verification.input_ranges import index_vectors
    plain = m is None
    try:
        if plain:
            m = ir.from_proto(before)
        report.cleanup = run_cleanup(m, proto=before)
    except Exception as exc:  # reported as a cleanup failure (exit 1), never a traceback
        report.cleanup = {"changed": True, "error": f"{type(exc).__name__}: {_first_line(exc)}"}
        report.model_checks["cleanup"] = failed(f"the cleanup stopped ({report.cleanup['error']}); "
                                                                   "convert with --no-cleanup")
        return (None if plain else adopt_files(ir.from_proto(before), m)), before
    report.timings["cleanup"] = time.perf_counter() - t
    if not report.cleanup["changed"]:
        if verify:
            report.model_checks["cleanup"] = passed("nothing to clean")
        return (None if plain else _as_before(m, before)), before
    after = ir.to_proto(m)
    if verify:
        t = time.perf_counter()
        report.model_checks["cleanup"] = cleanup_check(
            before, after, memory_budget=budget, weight_bytes=weight_bytes,
            load_weights=lambda p: _with_external_data(p, source) if _external_tensors(m) else p,
            run_before=run_before, sized=sized, vectors=index_vectors(before, report.records)[0])
        report.timings["verify_cleanup"] = time.perf_counter() - t
    return m, after


def _as_before(m, before):
    """``m`` after a cleanup that changed nothing: itself when it still serializes to ``before``
    (the cleanup took back the shapes it inferred), else ``before`` deserialized (onnx-ir's
    dead-node pass may have trimmed trailing empty inputs).  One serialization instead of a
    deserialization: 3x cheaper."""
    import onnx_ir as ir
    if ir.to_proto(m).SerializeToString() == before.SerializeToString():
        return m
    return adopt_files(ir.from_proto(before), m)


def _baseline_proto(model, m, upgraded: bool):
    import onnx
    import onnx_ir as ir
    from .io.files import loaded_proto
    if upgraded:
        return ir.to_proto(m)
    if isinstance(model, onnx.ModelProto):
        return model
    read = loaded_proto(m)  # the proto load_ir read and validated: not read a second time
    return read if read is not None else onnx.load(str(model), load_external_data=False)


@paused_gc()  # (many small acyclic objects: see graphs/allocation.py)
def _verify(report: Report, proto, baseline, result, opset: int, budget: int, removed_domains, *,
            weight_bytes: int, load_weights, keep_session: bool = False, ship_ahead: bool = False,
            baseline_holders: list | None = None):
    """Per-rewrite checks, the structural proof and the in-place run (see docs/design.md,
    "Verification").  The in-place run's session (the one whole-model session) builds in a
    thread from the start; the other checks run meanwhile.  Returns the in-place run (None when
    nothing was replaced); with ``keep_session`` its session is kept for the cleanup check (``_cleanup``),
    else the rewrites whose output the as-shipped run gives are left to it (inplace.start_inplace, ``defer``).
    The static checks run first: their strict shape inference, when it passed, gives the
    in-place run its shapes (inplace.start_inplace, ``inferred``).  ``ship_ahead``: ``proto`` is
    the model that ships (nothing after the checks changes it): once that inference passed, its
    as-shipped session (shipped.SessionAhead, onnxruntime's default configuration) builds in a
    thread of its own while the other checks run (the in-place run holds it: ``.ahead``).
    ``baseline_holders``: the positions of ``baseline``'s main-graph nodes that hold subgraphs,
    when the input's read found them (rewrite.proto_pass.scan of the model ``baseline`` copies)."""
    from .verification.inplace import start_inplace, structural_diff
    statics, ahead = None, None
    inferred: list = []
    if result.modified:  # first: their strict shape inference gives the in-place run its shapes and
        # guards the session of the bytes that ship (onnxruntime's inference would abort ours where onnx's aborts)
        t4 = time.perf_counter()
        statics = static_checks(proto, baseline, inferred=inferred)
        report.timings["verify_static"] = time.perf_counter() - t4
        if ship_ahead and inferred:
            from .verification.shipped import SessionAhead, serialized
            ahead = SessionAhead(serialized(proto, load_weights))
    t2 = time.perf_counter()
    pending = None
    if result.modified:  # taps added, session started: counted in verify_model
        pending = start_inplace(proto, report.records, memory_budget=budget, weight_bytes=weight_bytes,
                                load_weights=load_weights, keep_session=keep_session, defer=not keep_session,
                                ahead=ahead, inferred=inferred[0] if inferred else None)
    started = time.perf_counter() - t2
    t2 = time.perf_counter()
    report.signatures_checked, report.record_checks = verify_records(report.records, opset, memory_budget=budget,
                                               runtimes=report.verify_on or ("onnxruntime",))
    report.timings["verify_rewrites"] = time.perf_counter() - t2
    if pending is None:  # nothing replaced: the model is the input (its opset aside)
        return None
    t4 = time.perf_counter()
    problem = structural_diff(baseline, proto, result.changes, removed_domains, pending.table, baseline_holders)
    report.model_checks["structure"] = PASSED if problem is None else failed(problem)
    report.model_checks.update(statics or {})  # (after the structural proof's: the order reports give)
    report.timings["verify_static"] = report.timings.get("verify_static", 0.0) + time.perf_counter() - t4
    t5 = time.perf_counter()
    inplace = pending.result()
    report.model_checks["model_run"] = inplace.status
    report.inplace_sizes = inplace.sizes
    report.record_inplace = inplace.inplace
    report.timings["verify_model"] = started + time.perf_counter() - t5
    return pending


def _upgrade_opset(m, target: int, label):
    """``m`` (an onnx_ir model) moved to default-domain opset ``target`` by onnx's version
    converter: the main graph with its subgraphs in one call, each model-local function's body
    on its own (the converter drops functions).  ModelError in one line naming the op it
    cannot convert."""
    import onnx_ir as ir
    proto = ir.to_proto(m)  # external tensors stay references
    functions = list(proto.functions)
    del proto.functions[:]
    converted = _convert_version(proto, target, label)
    for f in functions:
        converted.functions.append(_convert_function(f, target, label))
    return adopt_files(ir.from_proto(converted), m)


def _convert_version(proto, target: int, label):
    import re

    import onnx
    try:
        return onnx.version_converter.convert_version(proto, target)
    except Exception as exc:
        text = _first_line(exc)
        found = re.search(r"No Adapter (From|To) Version \$?(\d+) for (\S+)", text)
        if found:
            way, version, op = found.groups()
            text = f"no adapter for {op} {'from' if way == 'From' else 'to'} opset {version}"
        else:
            text = re.sub(r"^\S*BaseConverter\.h:\d+: \w+: Assertion `false` failed: ", "", text)
        raise ModelError(f"cannot convert to opset {target}: {text}", path=label) from None


def _convert_function(f, target: int, label):
    """A function's body converted as a graph of its own (inputs and outputs typeless)."""
    import onnx
    from onnx import helper
    version = next((o.version for o in f.opset_import if o.domain in ("", "ai.onnx")), None)
    if version is None or version == target:
        return f
    graph = helper.make_graph(list(f.node), f.name, [helper.make_value_info(n, onnx.TypeProto()) for n in f.input],
                              [helper.make_value_info(n, onnx.TypeProto()) for n in f.output])
    body = helper.make_model(graph, opset_imports=list(f.opset_import))
    body.ir_version = 8
    converted = _convert_version(body, target, label)
    out = onnx.FunctionProto()
    out.CopyFrom(f)
    del out.node[:]
    out.node.extend(converted.graph.node)
    for o in out.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = target
    return out


def verify_records(records: list[RewriteRecord], opset: int, memory_budget: int | None = None,
                   runtimes=("onnxruntime",)) -> tuple[int, dict]:
    """Check each distinct rewrite once (see verification/lowerings.py) within ``memory_budget`` bytes (default
    ``verify.DEFAULT_VERIFY_MEMORY``) on each of ``runtimes`` (verification/runtimes.py); returns the number of
    signatures checked and each record's CheckResult by its position in ``records``."""
    from .verification.lowerings import CheckCase, check_on_runtimes, declared_conflict, np_dtype
    groups: dict = {}
    for i, r in enumerate(records):
        if r.lowering is None:
            continue
        elem = r.elem_type or 1  # slicing does not depend on the dtype: float32 when unknown
        key = (r.spec, r.input_shape, elem, tuple(sorted(r.index_types.items())))
        groups.setdefault(key, []).append((i, r))
    cases = []
    for (spec, shape, elem, _), recs in groups.items():
        first = recs[0][1]
        cases.append(CheckCase(first.lowering, np_dtype(elem), elem, declared_output=first.declared_output,
                               index_types=first.index_types))
    check_on_runtimes(cases, opset, runtimes, memory_budget=memory_budget or DEFAULT_VERIFY_MEMORY)
    checks: dict = {}
    for case, recs in zip(cases, groups.values()):
        for i, r in recs:
            checks[i] = case.result
            if r.declared_output != recs[0][1].declared_output:  # same op, other declared shape
                problem = declared_conflict(r.declared_output, r.output_shape) if r.output_shape else None
                if problem:
                    checks[i] = replace(case.result, shape_inference=failed(f"declared output shape: {problem}"))
    return len(cases), checks


def _max_compare_bytes() -> int:
    from .verification.compare import DEFAULT_MAX_WEIGHT_BYTES
    return DEFAULT_MAX_WEIGHT_BYTES


def verify_model_file(path) -> dict:
    """Validate an exported model file: the checker (full), strict shape inference, onnxruntime
    loads it, and no StridedSlice is left (any domain, subgraphs and functions included).
    Returns check name -> "passed" | "failed: <why>".  Raises ModelError for an unreadable file."""
    from pathlib import Path

    import onnx

    from .graphs.shape_inference import infer
    from .graphs.walk import all_nodes
    from .verification.runtimes import SHIPPED, onnxruntime_session
    m = load_ir(path)  # readable, external data inside the folder
    checks = {}
    try:
        onnx.checker.check_model(str(path), full_check=True)
        checks["checker_full"] = PASSED
    except Exception as exc:
        checks["checker_full"] = failed(_first_line(exc))
    try:
        infer(Path(path).read_bytes(), strict=True)
        checks["strict_shape_inference"] = PASSED
    except Exception as exc:
        checks["strict_shape_inference"] = failed(_first_line(exc))
    try:
        onnxruntime_session(path, SHIPPED)  # as users load it
        checks["onnxruntime_load"] = PASSED
    except Exception as exc:
        checks["onnxruntime_load"] = failed(_first_line(exc))
    left = [f"{node.name or node.outputs[0].name} ({label})" for node, label in all_nodes(m)
            if node.op_type == "StridedSlice"]
    checks["no_strided_slice"] = PASSED if not left else failed(f"{len(left)} left: " + ", ".join(left[:5]))
    return checks


def compare_model_files(original, converted, *, trials: int = 3, flavor: str | None = None,
                        rtol: float | None = None, input_shapes: dict | None = None):
    """:func:`verification.compare.compare_models` of two model files (weights above the limit:
    skipped); ModelError naming the file when they cannot be compared (inputs that do not line
    up, ``input_shapes`` that do not fit the original, a bad ``rtol``)."""
    from .verification.compare import InputShapesError, compare_models, weight_bytes
    protos = []
    for p in (original, converted):
        head = load_model_proto(p, external_data=False)  # readable, external data checked
        base = os.path.dirname(os.path.abspath(p))
        protos.append(load_model_proto(p) if weight_bytes(head, base) <= _max_compare_bytes() else head)
    try:
        return compare_models(protos[0], protos[1], trials=trials, flavor=None if flavor == "auto" else flavor,
                              max_weight_bytes=_max_compare_bytes(),
                              base_dir=os.path.dirname(os.path.abspath(original)), rtol=rtol,
                              input_shapes=input_shapes)
    except InputShapesError as exc:
        raise InputShapesError(exc.reason, path=str(original)) from None
    except ModelError as exc:
        if exc.path is not None:
            raise
        reason = exc.reason.replace("the original", str(original), 1)
        raise ModelError(reason, path=None if reason.startswith("rtol") else str(converted)) from None
