"""The library's entry: ``convert`` (load -> rewrite -> verify -> opset -> cleanup -> ship) and
what it returns (:class:`report.ConvertResult`, :class:`report.Report`); also the single-file
helpers the command line uses (``verify_records``, ``verify_model_file``, ``compare_model_files``)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast
from dataclasses import dataclass, replace
from pathlib import Path

from .verification.budget import Budget
from .verification.checks import check_model, static_checks
from .verification.checks import PASSED, detail, failed, kind, passed, skipped
from .errors import ConversionError, ModelError, StridedSliceError
from .graphs.allocation import paused_gc
from .errors import first_line as _first_line
from .io.files import adopt_files, load_ir, load_model_proto
from .io.files import has_external_tensors as _external_tensors
from .io.files import source_kind
from .io.files import with_external_data as _with_external_data
from .report import NOTHING_TO_REWRITE, ConvertResult, Report
from .rewrite.core import RewriteRecord
from .semantics.spec import check_flavor
from .verification.lowerings import DEFAULT_VERIFY_MEMORY, CheckRun  # memory every check may use (--verify-memory)

if TYPE_CHECKING:
    from .lowering.targets import Target

__all__ = [
    "CALLER_OPTIONS", "NOTHING_TO_REWRITE", "ConvertResult", "Report", "check_model", "compare_model_files", "convert",
    "verify_model_file", "verify_records", "CheckRun",
]


#: parameters of :func:`convert` that a batch run's recorded options leave out: those that describe
#: its caller, not a conversion option (the label of a framework input, and that its caller holds
#: the weights), and a framework input's own options (a batch passes none)
CALLER_OPTIONS = frozenset({"source", "weights_held", "calibration", "input_shapes", "output_names", "signature",
                            "input_ranges"})


def convert(model, *, flavor: str | None = None, opset: int | None = None, verify: bool = True,
            source: str | None = None, strict: bool = False,
            verify_memory: int | None = None, cleanup: bool = True,
            target: str | None = None, verify_on=None, fix_slices: bool = False,
            weights_held: bool = False, input_shapes: dict | None = None, output_names=None,
            signature: str | None = None, input_ranges: dict | None = None,
            calibration: dict | None = None) -> ConvertResult:
    """Replace every StridedSlice in ``model`` (a ModelProto or a path) by standard ONNX.

    ``target``: onnxruntime (default: the minimal lowering), portable or openvino (lowering/targets.py).
    ``verify_on``: runtimes the per-rewrite checks run on ("onnxruntime,openvino,reference" or a
    sequence; default: the target's).  ``fix_slices``: also rewrite the model's own Slice/Gather
    nodes that break the target's constraints (rewrite/fixslices.py), verified like every rewrite.

    Returns a :class:`ConvertResult` with ``.model`` (a new ModelProto; the input is never
    modified) and ``.report`` (``report.verdict``: verified | unverified (why) | failed).
    A path to a ``.tflite``, SavedModel folder or Keras file is exported by tf2onnx first
    (frontends/sources.py), converted by this, then checked against its framework; for those
    only: ``input_shapes`` ({input: dims}), ``output_names``, ``signature`` (a SavedModel's)
    and ``input_ranges`` ({input: (lo, hi)}: the integer inputs' values in the checks).
    ``strict``: a skipped check fails the conversion.  ``verify_memory``: bytes the checks may
    add to converting the model (default ``DEFAULT_VERIFY_MEMORY``, 256 MiB: the tensors a run
    holds, one more copy of the weights in memory, two of external ones, see
    sizing.budget_weight_bytes); a check that needs more is skipped with its reason.
    ``weights_held``: the caller holds the model's weights in memory (a framework input:
    tf2onnx's export), so its external ones count as held.  ``calibration``: {graph output name:
    (largest, |median|) disagreement in quantization steps} of the framework's own two kernel
    sets (measured on a .tflite input): the as-shipped run compares quantized outputs under that
    allowance (verification/tolerance.py, ``steps_rule``).  Raises :class:`ModelError` for
    an unusable model.  Invalid specs and failed checks are reported (``result.ok`` is False).
    ``cleanup``: run the cleanup passes (cleanup/passes.py) after the rewrite; with ``verify`` the
    model before and after cleanup are compared in onnxruntime (``model_checks["cleanup"]``).
    """
    from .verification.runtimes import parse_runtimes, require
    from .lowering.targets import get_target
    if isinstance(model, (str, os.PathLike)) and source_kind(model) is not None and source is None:
        from .frontends.sources import open_source  # (the input and its options checked before any work)
        opened = open_source(model, input_shapes=input_shapes, output_names=output_names, signature=signature,
                             input_ranges=input_ranges)
        return _convert_source(opened, flavor=flavor, opset=opset, verify=verify, strict=strict,  # tf2onnx first
                               verify_memory=verify_memory, cleanup=cleanup, target=target, verify_on=verify_on,
                               fix_slices=fix_slices)
    given = [k for k, v in dict(input_shapes=input_shapes, output_names=output_names, signature=signature,
                                input_ranges=input_ranges).items() if v]
    if given:
        raise ModelError(f"{', '.join(given)} apply to framework inputs (.tflite, SavedModel, Keras) only",
                         path=str(model) if isinstance(model, (str, os.PathLike)) else None)
    target_spec = get_target(target)
    runtimes = parse_runtimes(verify_on) if verify_on else target_spec.verify_on
    if verify:
        for name in runtimes:
            require(name)
    flavor = check_flavor(flavor, auto=True)
    if verify:  # (shape inference runs in a helper process: forked before the model is read)
        from .graphs.shape_inference import start_helper
        start_helper()
    verify_memory = DEFAULT_VERIFY_MEMORY if verify_memory is None else verify_memory
    label = source or (str(model) if isinstance(model, (str, os.PathLike)) else None)
    report = Report(label, verify=verify, strict=strict, target=target_spec.name,
                    verify_on=tuple(runtimes) if verify else ())
    ctx = Context(label, flavor, opset, verify, cleanup, target_spec, verify_memory, fix_slices, weights_held,
                  calibration)
    read = None
    if not fix_slices:  # the protobuf path (rewrite/proto_pass.py) when it applies, else onnx-ir
        holder = _ProtoHolder(model, ctx)
        done = _pipeline(model, report, ctx, holder)
        if done is not None:
            return done
        read = holder.read
        if read is None and report.updates:  # a ModelProto whose copy the holder rewrote the family of
            model = holder.proto
    done = _pipeline(model, report, ctx, _IrHolder(model, ctx, read))
    assert done is not None  # (onnx-ir takes every model)
    return done


def _convert_source(opened, **options):
    """:func:`convert` of a framework input (``opened``: frontends.sources.Source, the input with
    its options, checked and read by ``open_source``): tf2onnx with StridedSlice kept
    (:func:`frontends.sources.export_source`), the normal ONNX path (lowering, verification,
    cleanup), then -- with verification, when nothing failed -- the result against the framework
    itself on random inputs, as ``model_checks["framework"]`` (one check: convert, batch and
    report.json agree)."""
    import tempfile

    from .frontends.sources import export_source, framework_status, tflite_options
    path = opened.path
    folder = tempfile.TemporaryDirectory(prefix="onnx-slice-tools-source-")
    # (the slice-update family tf2onnx leaves raw is rewritten by the pipeline, as in any .onnx input)
    file = export_source(opened, folder.name, opset=options.get("opset"))
    calibration = None
    if opened.kind == "tflite":
        input_ranges, calibration = tflite_options(path, file, opened.input_ranges, options.get("verify", True))
        opened = replace(opened, input_ranges=input_ranges)
    try:
        # (TensorFlow or LiteRT holds the weights for the export and the framework check)
        result = convert(str(file), source=str(path), weights_held=True, calibration=calibration, **options)
    except ModelError as exc:  # name the user's input, not our temporary file
        raise ModelError(exc.reason, path=str(path), node=exc.node) from None
    result.source_folder = folder  # the result's external weights are read from here until it is gone
    rep = result.report
    rep.model_checks["framework"] = framework_status(opened, result, options.get("verify", True), Path(folder.name))
    return result


@dataclass(frozen=True)
class Context:
    """What every stage of one conversion reads, resolved once by :func:`convert`: the input's
    label, the flavour (None: per node), the opset asked, whether to verify and clean up, the
    target (lowering/targets.py), the checks' memory budget in bytes (``--verify-memory``),
    ``fix_slices``, whether the caller holds the weights (a framework input), and the framework's
    own disagreement per quantized output (``calibration``, see :func:`convert`)."""

    label: str | None
    flavor: str | None
    opset: int | None
    verify: bool
    cleanup: bool
    target: Target
    memory: int
    fix_slices: bool = False
    weights_held: bool = False
    calibration: dict | None = None


class _ProtoHolder:
    """The model as a ``ModelProto`` (rewrite/proto_pass.py): no onnx-ir round trip.  Declines
    (``load``/``rewrite`` return False/None) a model with external data, below opset 11, asked
    for another opset, or holding what the protobuf pass does not rewrite; ``read`` then hands
    what it read of a path to the onnx-ir holder."""

    path = "protobuf"
    ships_ahead = True  # nothing after the checks changes the proto: its as-shipped session may start early

    def __init__(self, model, ctx: Context):
        self.source, self.ctx = model, ctx
        self.read: tuple | None = None
        self.model = None  # (no onnx-ir model unless the cleanup makes one)
        self.walked: Any = None  # rewrite.proto_pass.scan of the main graph
        self.table = None  # the main graph's NodeTable as the validation read it (None: not read, or edited since)
        self.baseline_holders: list | None = None

    def load(self) -> bool:
        from .io.files import load_plain_proto
        tables: list = []  # the main graph's NodeTable, when the validation read it
        proto, self.inputs, external = load_plain_proto(self.source, path_hint=self.ctx.label, tables=tables)
        self.read = (proto, external) if isinstance(self.source, (str, os.PathLike)) else None
        self.proto = proto
        self.table = tables[0] if tables else None
        return not external  # onnx-ir reads external data lazily

    def has_family(self) -> bool:
        from .rewrite.updates import SEAMS, has_family
        table = self.table
        if table is not None and not table.holders and not len(self.proto.functions) \
                and SEAMS.keys().isdisjoint(table.ops):
            return False  # (no op of the family in the main graph, no other graph: none anywhere)
        return has_family(self.proto)

    def edit_proto(self, edit):
        """``edit(proto)`` on the model, in place (the holder's own copy or read of the input)."""
        self.table = None  # (the nodes as read no more)
        return edit(self.proto)

    def current_opset(self):
        from .rewrite.proto_pass import proto_default_opset
        return proto_default_opset(self.proto)

    def accepts(self, current) -> bool:
        from .rewrite.proto_pass import declines, scan
        if current is None or current < 11 or self.ctx.opset not in (None, current):
            return False
        self.walked = scan(self.proto.graph, self.table)
        self.baseline_holders = self.walked.positions
        return not declines(self.proto, self.walked.holders)

    def prepare(self, target: int) -> None:
        pass

    def found(self) -> bool:
        return bool(self.walked.found)  # (one in a subgraph or function: declined above)

    def baseline(self, found: bool):
        if not (found and self.ctx.verify):
            return None
        import onnx
        baseline = onnx.ModelProto()  # the model before the rewrite: the structural proof's baseline
        baseline.CopyFrom(self.proto)
        return baseline

    def shapes(self, found: bool, baseline) -> Mapping:
        from .rewrite.shapes import derive_shapes
        # (a StridedSlice holding a subgraph is declined by the pass: then the onnx-ir path derives again)
        return derive_shapes(self.proto, names=self.walked.inputs, has_subgraphs=bool(self.walked.holders),
                             flavor=self.ctx.flavor, table=self.walked.table) if found else {}

    def domains(self) -> set:
        return {o.domain for o in self.proto.opset_import}

    def rewrite(self, opset: int, shapes: Mapping):
        from .rewrite.proto_pass import ProtoStridedSliceRewritePass
        try:
            with paused_gc():  # (many small acyclic objects: see graphs/allocation.py)
                # (the pass reads ``shapes`` by ``.get`` only: derive_shapes's Mapping serves it)
                return ProtoStridedSliceRewritePass(flavor=self.ctx.flavor, opset=opset, target=self.ctx.target.name)(
                    self.proto, cast(dict, shapes), self.walked.holders, self.walked.table)
        except ValueError:  # declined after all: nothing was changed
            return None

    def set_opset(self, opset: int) -> None:
        from .rewrite.proto_pass import set_proto_opset
        set_proto_opset(self.proto, opset)
        self.proto.ir_version = _runnable_ir_version(self.proto.ir_version, opset)

    def to_proto(self, report: Report):
        return self.proto

    def budget(self) -> Budget:
        if not self.ctx.verify:  # (no check counts: verification's modules stay unimported)
            return Budget(self.ctx.memory)
        from .verification.sizing import budget_weight_bytes
        return Budget(self.ctx.memory, budget_weight_bytes(self.proto, held=True))  # (every weight inline)

    def needs_checked_run(self, result, converting: bool) -> bool:
        return True

    def ship_at(self, target: int, converting: bool, proto):
        return proto  # (the protobuf path declines another opset: nothing to convert)

    def cleanup_weight_bytes(self, budget: Budget) -> int:
        return 0

    def result(self, proto, report: Report, m) -> ConvertResult:
        return ConvertResult(proto, report, m, inputs=self.inputs)


class _IrHolder:
    """The model as an ``onnx_ir.Model`` (rewrite/ir_pass.py): every model, subgraphs, functions,
    external data, ``--opset`` and ``--fix-slices``.  ``read``: what files.load_plain_proto
    read of the path (see files.load_ir)."""

    path = "onnx-ir"
    ships_ahead = False
    baseline_holders = None

    def __init__(self, model, ctx: Context, read=None):
        self.source, self.ctx, self.read = model, ctx, read
        self.upgraded = False
        self.edited = False  # the model differs from what was read: its baseline is serialized again

    def load(self) -> bool:
        self.model = load_ir(self.source, path_hint=self.ctx.label, read=self.read)
        return True

    def has_family(self) -> bool:
        from .graphs.walk import all_nodes
        from .rewrite.updates import in_family
        return any(in_family(n.op_type, n.domain) for n, _ in all_nodes(self.model))

    def edit_proto(self, edit):
        """``edit(proto)`` on the model as a ModelProto (external tensors stay references), read
        back into onnx-ir."""
        import onnx_ir as ir
        proto = ir.to_proto(self.model)
        out = edit(proto)
        self.model = adopt_files(ir.from_proto(proto), self.model)
        self.edited = True
        return out

    def current_opset(self):
        from .rewrite.ir_pass import default_opset
        return default_opset(self.model)

    def accepts(self, current) -> bool:
        self.upgraded = current is not None and current < 11
        return True

    def prepare(self, target: int) -> None:
        if self.upgraded:
            self.model = _upgrade_opset(self.model, target, self.ctx.label)

    def found(self) -> bool:
        from .rewrite.ir_pass import has_strided_slice
        return has_strided_slice(self.model) or self.ctx.fix_slices

    def baseline(self, found: bool):
        # The model before the rewrite, as a proto without external data: the baseline of the
        # structural proof and the input of shape derivation (declared shapes are not trusted).
        return _baseline_proto(self.source, self.model, self.upgraded or self.edited) if found else None

    def shapes(self, found: bool, baseline) -> Mapping:
        from .rewrite.ir_pass import derive_shapes
        return derive_shapes(baseline, flavor=self.ctx.flavor) if found else {}

    def domains(self) -> set:
        return set(self.model.opset_imports)

    def rewrite(self, opset: int, shapes: dict):
        from .rewrite.ir_pass import StridedSliceRewritePass
        m, target = self.model, self.ctx.target
        result = StridedSliceRewritePass(flavor=self.ctx.flavor, opset=opset, target=target.name, shapes=shapes)(m)
        if self.ctx.fix_slices:  # the model's own Slice/Gather that break the target, rewritten (and proven) alike
            from .rewrite.fixslices import FixSlicesPass
            result = result.merged(FixSlicesPass(target, opset=opset)(m, shapes=shapes))
        return result

    def set_opset(self, opset: int) -> None:
        from .rewrite.ir_pass import set_default_opset
        set_default_opset(self.model, opset)
        # the IR version onnxruntime runs (a model saved by a newer onnx says 14): the checks run
        # the model as it is saved
        self.model.ir_version = _runnable_ir_version(self.model.ir_version, opset)

    def to_proto(self, report: Report):
        import onnx_ir as ir
        t3 = time.perf_counter()
        proto = ir.to_proto(self.model)
        report.timings["serialize"] = time.perf_counter() - t3
        return proto

    def budget(self) -> Budget:
        m, source = self.model, self.source
        if not self.ctx.verify:  # (no check counts: verification's modules stay unimported)
            return Budget(self.ctx.memory)
        from .verification.sizing import budget_weight_bytes
        weights = budget_weight_bytes(m, held=self.ctx.weights_held)
        if not _external_tensors(m):
            return Budget(self.ctx.memory, weights)
        return Budget(self.ctx.memory, weights, lambda p: _with_external_data(p, source))

    def needs_checked_run(self, result, converting: bool) -> bool:
        return converting or result.modified or not result.records

    def ship_at(self, target: int, converting: bool, proto):
        """The proto that ships: the model moved to the ``target`` opset when ``converting``,
        at the IR version onnxruntime runs; ``proto`` itself when that changes nothing."""
        import onnx_ir as ir
        from .rewrite.ir_pass import set_default_opset
        if converting:
            self.model = _upgrade_opset(self.model, target, self.ctx.label)
            set_default_opset(self.model, target)
        self.model.ir_version = _runnable_ir_version(self.model.ir_version, target)
        if converting or self.model.ir_version != proto.ir_version:
            return ir.to_proto(self.model)
        return proto

    def cleanup_weight_bytes(self, budget: Budget) -> int:
        return budget.weight_bytes

    def result(self, proto, report: Report, m) -> ConvertResult:
        return ConvertResult(proto, report, m)


def _pipeline(source, report: Report, ctx: Context, holder) -> ConvertResult | None:
    """One conversion: load -> rewrite -> verify -> opset -> cleanup -> ship, over ``holder``
    (:class:`_ProtoHolder` or :class:`_IrHolder`: what the two representations differ in).
    None when the holder declines the model (before anything of ``source`` changed)."""
    t0 = time.perf_counter()
    if not holder.load():
        return None
    report.timings["load"] = time.perf_counter() - t0
    _slice_updates(report, ctx, holder)  # before any other stage reads the model
    current = holder.current_opset()
    if not holder.accepts(current):
        return None
    target, lower_opset = opsets(current, ctx.opset, ctx.label)
    holder.prepare(target)
    report.opset = target

    t1 = time.perf_counter()
    found = holder.found()
    baseline = holder.baseline(found)
    shapes = holder.shapes(found, baseline)
    domains_before = holder.domains()
    result = holder.rewrite(lower_opset, shapes)
    if result is None:
        return None
    report.records = result.records
    report.path = holder.path
    holder.set_opset(lower_opset)
    report.timings["rewrite"] = time.perf_counter() - t1
    proto = holder.to_proto(report)

    verify, cleanup = ctx.verify, ctx.cleanup
    budget = holder.budget()
    converting = lower_opset != target and all(r.lowering is not None for r in result.records)
    clean = _provably_clean(report, proto, cleanup and result.modified and verify and not converting, result.table)
    ahead = holder.ships_ahead and (clean[1] or not cleanup) and budget.weight_bytes * _AHEAD_WEIGHTS <= ctx.memory
    ahead = ahead and available_cpus() >= _AHEAD_CPUS  # (nothing below changes the proto)
    inplace = None  # the in-place run, its session kept for the cleanup check
    if verify:
        inplace = _verify(report, proto, baseline, result, lower_opset, budget, ship_ahead=ahead,
                          removed_domains=domains_before - holder.domains(),
                          keep_session=cleanup and result.modified and not converting and not clean[1],
                          settle_checks=not converting,
                          baseline_holders=holder.baseline_holders, label=ctx.label)
    checked = None
    if verify and holder.needs_checked_run(result, converting):
        checked = _checked_run(inplace, proto, budget)
    shipped = holder.ship_at(target, converting, proto)
    if verify and converting and shipped is not proto:
        _check_conversion(report, shipped, baseline, checked, budget.load_weights)
    proto = shipped
    m = holder.model
    if cleanup and (result.modified or report.updates):  # what is saved is what the cleanup check ran
        m, proto = _cleanup(report, m, proto, source, verify, replace(budget, weight_bytes=holder.cleanup_weight_bytes(budget)),
                            inplace, clean)
    if verify:  # last: the bytes ConvertResult.save writes
        _check_shipped(report, proto, checked, budget, inplace, ctx.calibration, opset=lower_opset)
    from .verification.runtimes import release  # (a process that ends next keeps them: freeing costs time)
    release((shapes, result, inplace, checked))
    return holder.result(proto, report, m)


def _slice_updates(report: Report, ctx: Context, holder) -> None:
    """The slice-update family tf2onnx leaves raw (``XlaDynamicUpdateSlice``, TFLite
    ``DYNAMIC_UPDATE_SLICE``, ``XlaDynamicSlice``, ``TensorStridedSliceUpdate``,
    ``StridedSliceGrad``, TFLite ``GELU``; docs/slice_updates.md), rewritten in the model as read
    (rewrite/updates.py) and each rewrite checked alone against the reference in onnxruntime
    (verification/update_checks.py): an ``.onnx`` input and a framework input's export alike.
    From here on the rewritten model is the input: the StridedSlice rewrite derives its shapes
    through it, the structural proof and the whole-model runs take it as their baseline.  The
    records go to ``report.updates`` and ``model_checks["slice_updates"]``.  A node the
    framework rejects is invalid input (StridedSliceError, exit 2: the StridedSlice rule); one
    this cannot rewrite, or a failed check, is a failed conversion (ConversionError, exit 1)."""
    if not holder.has_family():
        return
    from .rewrite.updates import rewrite_updates
    from .verification.update_checks import check_records, updates_status
    t = time.perf_counter()
    try:
        records = holder.edit_proto(rewrite_updates)
    except StridedSliceError as exc:
        if not exc.unsupported:
            raise exc.in_context(path=ctx.label) from None
        raise ConversionError(f"{exc}; not converted, nothing written", path=ctx.label) from None
    except ModelError as exc:
        raise ModelError(exc.reason, path=ctx.label, node=exc.node) from None
    for record, status in zip(records, check_records(records, ctx.memory)):
        if kind(status) == "failed":  # (skipped over the memory budget: named by the model check)
            raise ConversionError(f"node {record.node!r} ({record.op_type}): the rewrite's check {status}; "
                                  "nothing written", path=ctx.label)
    report.updates = records
    report.model_checks["slice_updates"] = updates_status(records)
    report.timings["slice_updates"] = time.perf_counter() - t


# --------------------------------------------------------------------------- the checked run, as shipped


def _checked_run(inplace, proto, budget: Budget):
    """The run the later whole-model checks agree with: the in-place run's first run (its
    inputs and graph outputs), else -- nothing was rewritten in place -- ``proto`` run untapped
    in a fast session (shipped.baseline_run).  Returns a CheckedRun or a ``skipped: ...`` status."""
    from .verification.shipped import baseline_run
    if inplace is not None:
        if inplace.checked is not None:
            return inplace.checked
        return skipped(f"no checked run to compare with (model_run {inplace.last.status})")
    return baseline_run(proto, budget=budget)


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
def _check_shipped(report: Report, proto, checked, budget: Budget, inplace=None, calibration=None,
                   opset: int | None = None) -> None:
    """The as-shipped run of the final ``proto`` in each runtime's default configuration
    (verification/shipped.py): model_checks ``shipped`` (onnxruntime) and ``shipped_openvino``;
    then the rewrites the in-place run left to it (``inplace``: the InplaceRun) get their status,
    and so do the per-rewrite checks left to it (``report.awaiting_checks``): those it did not
    settle are run now, at ``opset`` (verification/settled_checks.py).
    Its onnxruntime session may have been started by the in-place run (``inplace.ahead``)."""
    from .verification.shipped import shipped_checks
    t = time.perf_counter()
    run, why = (None, detail(checked)) if isinstance(checked, str) else (checked, None)
    compared: dict = {}
    liveness = inplace.liveness if inplace is not None and inplace.proto is proto else None  # (cleanup: a new proto)
    ahead = getattr(inplace, "ahead", None)
    try:
        report.model_checks.update(shipped_checks(proto, run, runtimes=report.verify_on, budget=budget, why_none=why,
                                                  compared=compared, liveness=liveness, ahead=ahead,
                                                  calibration=calibration))
    finally:
        if ahead is not None:
            ahead.close()
    report.shipped_problems = {k: v for k, v in compared.items() if v is not None}
    if inplace is not None and getattr(inplace, "awaiting", None):
        settled = inplace.settle(compared or None, detail(report.model_checks["shipped"]))
        report.model_checks["model_run"] = settled.status
        _set_inplace(report, settled.inplace)
    report.timings["verify_shipped"] = time.perf_counter() - t
    if report.awaiting_checks:
        _settle_checks(report, getattr(inplace, "checked", None), budget, opset)


def _settle_checks(report: Report, checked, budget: Budget, opset: int | None) -> None:
    """The per-rewrite checks left to the as-shipped run: passed where it settled them
    (settled_checks.settle_checks), else run now, as :func:`_verify` would have."""
    from .verification.settled_checks import settle_checks
    t = time.perf_counter()
    awaiting, report.awaiting_checks = report.awaiting_checks, {}
    left = settle_checks(report.records, awaiting, report.record_inplace, checked)
    report.checks_as_shipped = frozenset(i for i in awaiting if i not in left)
    if left:
        keep = frozenset(i for i in range(len(report.records)) if i not in left)
        run = CheckRun(opset or report.opset or 17, tuple(report.verify_on or ("onnxruntime",)), budget.memory)
        count, checks = verify_records(report.records, run, skip=keep)
        report.signatures_checked += count
        report.record_checks.update(checks)
    report.timings["verify_rewrites"] = report.timings.get("verify_rewrites", 0.0) + time.perf_counter() - t


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
#: a core the other checks need, so building it ahead would cost CPU without saving time
_AHEAD_CPUS = 4


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity, where the platform has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (not Linux)
        return os.cpu_count() or 1


def _provably_clean(report: Report, proto, asked: bool, table=None) -> tuple:
    """(``proto``, whether the cleanup's pre-check (cleanup/precheck.py) proves no pass can change
    it): asked before the in-place run (``asked``), whose tapped session is kept for the
    cleanup check only when a pass may change the model; answered again by :func:`_cleanup`.
    ``table``: the rewrite's node table of ``proto``'s main graph (RewriteResult.table), if it
    made one.  (The checks read the converted model themselves: they never take the rewrite's word.)"""
    if not asked:
        return None, False
    from .cleanup.precheck import nothing_to_clean
    t = time.perf_counter()
    clean = nothing_to_clean(proto, table)
    report.timings["cleanup"] = time.perf_counter() - t
    return proto, clean


def _cleanup(report: Report, m, before, source, verify: bool, budget: Budget, inplace=None, clean=(None, False)):
    """The cleanup passes (cleanup/passes.py) on the rewritten ``m``, after its verification, and --
    with ``verify`` -- their own check: the model before and after cleanup run in onnxruntime
    on the same random inputs (cleanup.cleanup_check).  Returns (model, proto) after; when
    the cleanup changed nothing or stopped, the model as it was before (``before``): onnx-ir's
    passes may still have touched it (e.g. trailing empty inputs dropped).  ``inplace``: the
    in-place run of ``before`` (``_verify``), whose session then runs the model before cleanup.
    ``m`` None (the protobuf path): ``before`` is deserialized for the passes, and returned as
    it is, with no onnx-ir model, when they change nothing.  ``budget``: what the check's runs
    may hold (its ``weight_bytes``: the weights they count, sizing.budget_weight_bytes).  When the proto-level pre-check
    (cleanup/precheck.py) proves no pass can change ``before``, the passes do not run: the report is
    the one they would give (``clean``: :func:`_provably_clean`'s answer, used when it is of ``before``)."""
    from .cleanup.precheck import nothing_to_clean, unchanged_report
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
            before, after, budget=replace(budget, load_weights=lambda p: _with_external_data(p, source)
                                          if _external_tensors(m) else p),
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
def _verify(report: Report, proto, baseline, result, opset: int, budget: Budget, removed_domains, *,
            keep_session: bool = False, ship_ahead: bool = False, settle_checks: bool = False,
            baseline_holders: list | None = None, label=None):
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
    when the input's read found them (rewrite.proto_pass.scan of the model ``baseline`` copies).
    ModelError (``label``: the input) when the output fails strict shape inference at a node of
    the input's own that contradicts the rewrites' proven shapes (:func:`_contradicting_node`).
    ``settle_checks``: the model checked is the one the as-shipped run loads (no opset
    conversion after): the per-rewrite checks that run would settle are left to it
    (verification/settled_checks.py; ``report.awaiting_checks``, settled by :func:`_check_shipped`)
    -- only onnxruntime's, only after strict shape inference passed, only of rewrites deferred."""
    from .verification.inplace import start_inplace
    from .verification.structure import structural_diff
    statics, ahead = None, None
    inferred: list = []
    modified = result.modified or bool(report.updates)  # (slice updates: rewritten before, checked in place here)
    if modified:  # first: their strict shape inference gives the in-place run its shapes and
        # guards the session of the bytes that ship (onnxruntime's inference would abort ours where onnx's aborts)
        t4 = time.perf_counter()
        statics = static_checks(proto, baseline, inferred=inferred)
        report.timings["verify_static"] = time.perf_counter() - t4
        if ship_ahead and inferred:
            from .verification.shipped import SessionAhead, serialized
            ahead = SessionAhead(serialized(proto, budget.load_weights))
    t2 = time.perf_counter()
    pending = None
    if modified:  # taps added, session started: counted in verify_model
        pending = start_inplace(proto, report.in_place_records(), budget=budget, keep_session=keep_session,
                                defer=not keep_session,
                                ahead=ahead, inferred=inferred[0] if inferred else None)
    started = time.perf_counter() - t2
    t2 = time.perf_counter()
    awaiting: dict = {}
    if pending is not None and settle_checks and inferred and tuple(report.verify_on or ("onnxruntime",)) == ("onnxruntime",):
        from .verification.settled_checks import deferrable_checks
        awaiting = deferrable_checks(report.records, pending.deferred_positions(), inferred[0])
    run = CheckRun(opset, tuple(report.verify_on or ("onnxruntime",)), budget.memory)
    report.signatures_checked, report.record_checks = verify_records(report.records, run, skip=frozenset(awaiting))
    awaiting = {i: c for i, c in awaiting.items() if i not in report.record_checks}  # (a signature checked anyway)
    report.record_checks.update(awaiting)
    report.awaiting_checks = awaiting
    report.timings["verify_rewrites"] = time.perf_counter() - t2
    if pending is None:  # nothing replaced: the model is the input (its opset aside)
        return None
    t4 = time.perf_counter()
    problem = None if not result.modified else \
        structural_diff(baseline, proto, result.changes, removed_domains, pending.table, baseline_holders)
    if result.modified:  # (slice updates only: nothing replaced here, the model is the input)
        report.model_checks["structure"] = PASSED if problem is None else failed(problem)
    corrupt = problem is None and statics is not None and _contradicting_node(report, statics, proto, result.changes, label)
    if corrupt:
        pending.result()  # (its session thread ends before the error leaves)
        raise corrupt
    report.model_checks.update(statics or {})  # (after the structural proof's: the order reports give)
    report.timings["verify_static"] = report.timings.get("verify_static", 0.0) + time.perf_counter() - t4
    t5 = time.perf_counter()
    inplace = pending.result()
    report.model_checks["model_run"] = inplace.status
    report.inplace_sizes = inplace.sizes
    _set_inplace(report, inplace.inplace)
    report.timings["verify_model"] = started + time.perf_counter() - t5
    return pending


def _set_inplace(report: Report, statuses: dict) -> None:
    """The in-place run's statuses onto the report's records and, when the slice-update family
    was rewritten, its model check counts those checked in place."""
    report.set_inplace(statuses)
    if report.updates:
        from .verification.update_checks import updates_status
        report.model_checks["slice_updates"] = updates_status(report.updates, report.update_inplace)


def _contradicting_node(report: Report, statics: dict, proto, changes, label) -> ModelError | None:
    """The input's own inconsistency that only the rewrite made visible, as a ModelError; None
    when the failure may be the rewrite's.  A StridedSlice of a custom domain hides its output's
    shape from onnx's inference, so a node after it whose attributes or declared outputs
    contradict that shape (a Transpose ``perm`` out of range, Conv ``pads`` of another length, a
    declared output of another shape) passes the original's checks.  Once the slice is ONNX,
    strict shape inference of the output fails at that node.  The input is at fault when (a)
    the structural proof passed: the node is the input's own, byte for byte (it is no node the
    rewrite added, nor reads a value the rewrite renamed); and (b) every per-rewrite check
    passed: each rewritten output has the reference's shape at its input's shape, so the shapes
    reaching the node are the slices' true ones.  Any inference failure at such a node is the
    input's (a function call without the outputs its function declares, too).  Otherwise (a
    rewrite failed its check, the node is the rewrite's, onnx names no node or a name several
    nodes share) it stays a failed check (exit 1).  The shapes are trusted as every check
    trusts them: the per-rewrite reference is the plan's (semantics/reference.py), which the
    differential tests hold to the frameworks' runtimes."""
    from .graphs.walk import proto_graphs
    from .verification.checks import kind, node_at_fault
    status = statics.get("strict_shape_inference")
    at = node_at_fault(detail(status)) if kind(status) == "failed" else None
    if at is None or not at[1] or not report.rewrites_passed():
        return None
    op, name, words = at
    nodes = [n for g, _, _ in proto_graphs(proto) for n in g.node if n.name == name and n.op_type == op]
    renamed = set(changes.renamed.values())
    if len(nodes) != 1 or tuple(nodes[0].output) in changes.added_nodes or renamed.intersection(nodes[0].input):
        return None
    return ModelError(f"node {name!r} ({op}): {_field_at_fault(nodes[0], words)}: {words} (onnx shape inference, "
                      "once the StridedSlice nodes that hid its input shapes are rewritten, every rewrite checked)",
                      path=label)


def _field_at_fault(node, words: str) -> str:
    """The field of ``node`` onnx's inference error ``words`` is about: an attribute it names,
    the declared output ("existing shape/type"), an input or output by position."""
    attribute = next((a.name for a in node.attribute if re.search(rf"\b{re.escape(a.name)}\b", words)), None)
    if attribute is not None:
        return f"attribute {attribute!r}"
    if "existing" in words:  # the inferred and the declared shape or type differ
        return f"output {node.output[0]!r} as declared" if len(node.output) == 1 else "outputs as declared"
    position = re.search(r"\b(Input|Output) (\d+)", words)
    return f"{position.group(1).lower()}s[{position.group(2)}]" if position else "inputs, attributes or outputs"


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


def verify_records(records: list[RewriteRecord], run: CheckRun, skip: frozenset = frozenset()) -> tuple[int, dict]:
    """Check each distinct rewrite once (see verification/lowerings.py) as ``run`` says (its opset,
    runtimes, memory budget and seed: ``lowerings.CheckRun``); returns the number of signatures
    checked and each record's CheckResult by its position in ``records``.  ``skip``: positions
    not to check (and not returned): those the as-shipped run settles
    (verification/settled_checks.py); a signature one of them shares with a checked record is checked."""
    from .verification.lowerings import CheckCase, check_on_runtimes, declared_conflict, np_dtype
    if skip and all(r.lowering is None or i in skip for i, r in enumerate(records)):
        check_on_runtimes([], run)  # (every one skipped: no signature to check, none shared)
        return 0, {}
    groups: dict = {}
    for i, r in enumerate(records):
        if r.lowering is None:
            continue
        elem = r.elem_type or 1  # slicing does not depend on the dtype: float32 when unknown
        key = (r.spec, r.input_shape, elem, tuple(sorted(r.index_types.items())))
        groups.setdefault(key, []).append((i, r))
    if skip:
        groups = {k: recs for k, recs in groups.items() if not all(i in skip for i, _ in recs)}
    cases = []
    for (spec, shape, elem, _), recs in groups.items():
        first = recs[0][1]
        cases.append(CheckCase(first.lowering, np_dtype(elem), elem, declared_output=first.declared_output,
                               index_types=first.index_types))
    check_on_runtimes(cases, run)
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
