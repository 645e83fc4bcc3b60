"""Verification of lowerings: ONNX shape inference and onnxruntime against the numpy reference.

Each distinct rewrite (flavour, spec, declared input shape, dtype, opset) is
checked once.  All checks of a batch go into **one** ONNX model -- one input and
one output per rewrite -- so one onnxruntime session and a few runs check
thousands of rewrites:

* shape inference (strict) must give each output the plan's shape (a symbolic
  dim may stay symbolic or become unknown, never a different number);
* onnxruntime, run on concrete shapes -- several sizes for every symbolic or
  unknown dim the result can depend on (one along an axis neither the emitted ops nor
  the plan read: :func:`size_free_axes`), including 1, 0 where allowed, and sizes where
  clamping changes the result -- must equal the reference of the flavour exactly: shape,
  dtype, bytes.

Memory is bounded by one budget (``memory_budget``): axes a rewrite passes through
whole are fed at small sizes (the emitted constants do not depend on them; the
onnxruntime model declares every data dim symbolic, the shape-inference model keeps
the declared shapes), the inputs and outputs of one run stay within the budget
(several runs of one session when needed), and what cannot fit is
``skipped: needs X MiB, budget Y MiB``.  Every ONNX element type is fed through
``OrtValue`` (:func:`ort_value`) and compared by bytes; a type onnxruntime has no
kernel for is checked by onnx's reference evaluator instead.  Runtime index values
the framework rejects are kept as must-fail cases: onnxruntime must fail on them; so
must every runtime on a runtime vector of unknown length fed one entry longer or shorter
than the others (the frameworks raise on begin, end and strides of different lengths).
"""

from __future__ import annotations

import contextvars
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

import numpy as np

from ..errors import StridedSliceError
from ..errors import first_line
from ..lowering.lower import IDENTITY, RESHAPE, SLICE, SQUEEZE, UNSQUEEZE, Lowering
from ..semantics.plan import ALL, INDEX, RANGE, Dim, Plan, make_plan, shape_conflict
from ..semantics.plan import declared_conflict
from ..semantics.reference import apply_plan
from .runtimes import NOT_ASKED, ONNXRUNTIME, OPENVINO, SHIPPED, onnxruntime_session, require, session_options  # noqa: F401 - re-exported
from .runtimes import make_session as runtime_session
from .runtimes import NATIVE_DTYPES, STRING, fetch, np_dtype, ort_value, type_name, unsigned_of  # noqa: F401 - re-exported
from .probes import (ir_version_for, max_supported_ir_version, max_supported_opset,  # noqa: F401 - re-exported
                     ort_kernel_missing)
from ..semantics.spec import SliceSpec

#: Bytes the per-rewrite checks may hold at once (inputs, outputs and intermediates of a run).
DEFAULT_VERIFY_MEMORY = 256 * 2 ** 20

#: an onnxruntime session of a serialized model with :func:`runtimes.session_options`
make_session = onnxruntime_session


def data_ops(lowering: Lowering) -> list[str]:
    """Op types of the lowering that carry the data (not the index arithmetic)."""
    if not lowering.dynamic:
        return [op.op_type for op in lowering.ops]
    carrying: set = set()
    out = []
    for k, op in enumerate(lowering.ops):
        first = op.inputs[0] if op.inputs else None
        if first == ("x",) or first is not None and first[0] == "node" and first[1] in carrying:
            carrying.add(k)
            out.append(op.op_type)
    return out


# --------------------------------------------------------------------------- concrete shapes

#: Sizes for a symbolic axis the rewrite passes through whole.
_PASS_SIZES = (1, 3, 0, 2)
#: Sizes for an axis of known size the rewrite passes through whole (never above that size).
_PASS_KNOWN = (2, 3, 1)


def _candidate_sizes(plan: Plan, k: int) -> list[int]:
    """Sizes to try for input axis ``k`` whose declared dim is not a known int."""
    a = next((a for a in plan.axes if a.axis == k), None)
    if a is None or a.kind == ALL:
        return list(_PASS_SIZES)
    sizes = [1, 3, 0, 2, 6]
    if a.kind in (RANGE, INDEX):
        for v in (a.begin, a.end):
            if v is not None and abs(v) <= 64:
                sizes += [abs(v) - 1, abs(v), abs(v) + 1]
    tflite = plan.source is not None and plan.source.flavor == "tflite"
    out = []
    for s in sizes:
        if s < 0 or s in out:
            continue
        if a.kind == INDEX and a.begin is not None and (
                max(a.begin + s, 0) >= s if tflite and a.begin < 0 else not (-s <= a.begin < s)):
            continue  # the framework rejects this size (TFLite: it clamps below -dim, is undefined past the dim)
        out.append(s)
    if not out and a.kind == INDEX and a.begin is not None and abs(a.begin) <= 4096:
        out = [a.begin + 1 if a.begin >= 0 else -a.begin]
    return out  # empty: no size small enough to test (e.g. shrink index 2**40)


def relaxed_axes(lowering: Lowering) -> set[int]:
    """Input axes of known size that the emitted graph passes through whole and whose size no
    emitted constant depends on: checked at small sizes.  A ``Reshape`` names every output dim,
    so a lowering with one keeps every declared size (lowering/lower.py emits it only for small inputs).
    None under TFLite's ``offset``: its output sizes come from ``end``, not from the input, so an
    axis passed through whole at the declared size is not passed through at another."""
    return set(free_and_relaxed(lowering)[1])


def size_free_axes(lowering: Lowering) -> frozenset[int]:
    """Input axes along which neither the emitted graph nor the reference can depend on the
    axis's size: one size tries them all (:func:`concrete_shapes`).  Argued from the emitted
    ops, not from the plan alone (a lowering that wrongly touches an axis the plan keeps whole
    is still tried at several sizes there):

    * the lowering is static (constant ``Slice``/``Squeeze``/``Unsqueeze``/``Identity`` ops,
      no computed indices) and holds no ``Reshape`` (a static one names every dim) and no
      other op;
    * no ``Slice`` lists the axis and no ``Squeeze`` removes it (both number the input's axes:
      a ``Slice`` keeps the rank, and none comes after a ``Squeeze`` or ``Unsqueeze``, which
      would number others; negative axes read modulo the rank): ONNX's ``Slice`` keeps
      an unlisted axis whole at every size, ``Squeeze`` and ``Unsqueeze`` remove or insert
      other axes only, so the output along the axis is the input along it;
    * the plan keeps the axis whole (:attr:`AxisPlan.is_identity`: the ellipsis's, or ``:``
      with step 1, begin 0 or masked, end masked; on a known dim, all of it), which the
      flavour's rules do at every size (up to the declared one): the reference is the input
      along it too;
    * not under TFLite's ``offset``, whose output sizes come from ``end``, not the input.

    So the comparison along such an axis is of the same elements at every size: the checks
    feed it one (:func:`concrete_shapes`)."""
    return free_and_relaxed(lowering)[0]


def free_and_relaxed(lowering: Lowering) -> tuple[frozenset[int], frozenset[int]]:
    """(:func:`size_free_axes`, :func:`relaxed_axes`) of ``lowering``, read in one pass over its
    ops and one over its plan's axes (the settled checks ask both of every rewrite)."""
    plan = lowering.plan
    shape = plan.input_shape
    if shape is None or plan.source is not None and plan.source.offset:
        return frozenset(), frozenset()
    rank = len(shape)
    named: set[int] = set()
    free_ok = not lowering.dynamic  # (size-free: a static lowering of only these ops, below)
    reshape = False
    renumbered = False  # after a Squeeze or Unsqueeze, axes no longer number the input's
    for op in lowering.ops:
        kind = op.op_type
        if kind == RESHAPE:
            reshape = True
        if not free_ok:
            continue
        if kind in (SQUEEZE, UNSQUEEZE) and not op.axes:
            free_ok = False  # (no axes: a Squeeze of every size-1 axis depends on the sizes)
        elif kind in (SLICE, SQUEEZE):
            if renumbered:
                free_ok = False
            else:
                named.update(ax % rank if rank else ax for ax in op.axes)
        elif kind not in (UNSQUEEZE, IDENTITY):
            free_ok = False
        renumbered = renumbered or kind in (SQUEEZE, UNSQUEEZE)
    free, relaxed = [], []
    for a in plan.axes:
        identity = a.is_identity
        if free_ok and identity and a.axis not in named:
            free.append(a.axis)
        if not reshape and isinstance(a.dim, int) and a.dim > 1 and (
                a.kind == ALL or a.kind == RANGE and identity and a.stride == 1):
            relaxed.append(a.axis)
    return frozenset(free), frozenset(relaxed)


#: The one size fed to a size-free axis (:func:`size_free_axes`): the cheapest that is not empty
#: (never above a known size; a known 0 stays 0).
_FREE_SIZE = 1


def concrete_shapes(plan: Plan, limit: int = 6, relaxed: frozenset | set = frozenset(),
                    free: frozenset | set = frozenset()) -> list[tuple[int, ...]]:
    """Concrete input shapes that exercise the plan's unknown dims; ``relaxed`` axes (known
    size, passed through whole) get small sizes, ``free`` axes (:func:`size_free_axes`) one
    size.  Each axis cycles through its own few candidates (never a product over axes)."""
    shape = plan.input_shape
    if shape is None:  # unknown rank: the smallest ranks the spec accepts, each with its sizes
        real = sum(a.kind in (RANGE, INDEX) for a in plan.axes)
        out: list = []
        for rank in range(real, real + 3):
            try:
                sub = make_plan(plan.spec, (None,) * rank)
            except StridedSliceError:
                continue
            out += concrete_shapes(sub, limit=max(2, limit // 2))
        return out
    choices: list[list[int]] = []
    for k, d in enumerate(shape):
        if k in free:  # nothing along it depends on its size
            choices.append([min(d, _FREE_SIZE) if isinstance(d, int) else _FREE_SIZE])
        elif isinstance(d, int):  # a relaxed axis is of known size: smaller sizes too
            choices.append(list(dict.fromkeys(min(d, s) for s in _PASS_KNOWN)) if k in relaxed else [d])
        else:
            choices.append(_candidate_sizes(plan, k))
    if any(not c for c in choices):
        return []
    trials = max((len(c) for c in choices), default=1)
    trials = min(trials, limit) if any(len(c) > 1 for c in choices) else 1
    return list(dict.fromkeys(tuple(c[t % len(c)] for c in choices) for t in range(trials)))


#: Bytes per element assumed for a string.
_STRING_BYTES = 64


def run_bytes(shape: tuple[int, ...], dtype: np.dtype, n_ops: int) -> int:
    """Upper bound of the bytes one check of ``shape`` holds: the input, one output per emitted
    data op and the reference's output (a slice never has more elements than its input)."""
    count = math.prod(shape)  # (ints: exact, 1 for a scalar)
    item = _STRING_BYTES if dtype.kind in "OUS" else dtype.itemsize
    return count * item * (2 + n_ops)


def _mib(n: int) -> str:
    return f"{n / 2 ** 20:.0f}" if n >= 2 ** 20 else f"{n / 2 ** 20:.2g}"


# --------------------------------------------------------------------------- random data

_STRIDES_OF_ORDER = (1_000_003, 999_983, 65_537, 7_919, 104_729)
_CHUNK = 1 << 20


@functools.lru_cache(maxsize=None)
def _value_table(dtype: np.dtype) -> np.ndarray | None:
    """Every finite value of a narrow type (float16 and the ``ml_dtypes`` types), one zero
    only; None for the others (computed values)."""
    if dtype in NATIVE_DTYPES and dtype != np.float16:
        return None
    import ml_dtypes
    try:
        info = ml_dtypes.iinfo(dtype)
        return np.arange(int(info.min), int(info.max) + 1).astype(dtype)
    except (ValueError, TypeError):
        pass
    bits = 4 if dtype.name.startswith("float4") else 8 * dtype.itemsize
    values = np.arange(1 << bits, dtype=unsigned_of(dtype.itemsize)).view(dtype)
    as_float = values.astype(np.float32)
    keep = np.isfinite(as_float) & ~((as_float == 0) & np.signbit(as_float))
    return values[keep]


def random_input(shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    """Values in a random order, distinct where the dtype allows it (so a wrong permutation
    cannot pass), finite (no NaN payloads), written chunk by chunk into the result (no
    temporaries of the full size)."""
    size = int(np.prod(shape)) if shape else 1
    dtype = np.dtype(dtype)
    if dtype.kind in "OUS":
        perm = rng.permutation(size)
        return np.array([f"s{v}" for v in perm], dtype=object).reshape(shape)
    out = np.empty(size, dtype=dtype)
    if size == 0:
        return out.reshape(shape)
    mult = next((m for m in _STRIDES_OF_ORDER if size % m), 1)
    offset = int(rng.integers(0, size))
    table = _value_table(dtype)
    for lo in range(0, size, _CHUNK):
        idx = (np.arange(lo, min(size, lo + _CHUNK), dtype=np.int64) * mult + offset) % size
        if dtype == np.bool_:
            out[lo:lo + idx.size] = (idx * 2654435761 >> 7) & 1
        elif table is not None:
            out[lo:lo + idx.size] = table[idx % table.size]
        elif dtype.kind in "iu" and dtype.itemsize == 1:
            out[lo:lo + idx.size] = (idx % 256).astype(np.uint8).view(dtype)
        elif dtype.kind in "iu":
            span = min(np.iinfo(dtype).max // 2 + 1, 2 ** 62)
            out[lo:lo + idx.size] = (idx % span).astype(dtype)
        elif dtype.kind == "c":
            out[lo:lo + idx.size] = idx - size / 2 + 1j * (idx * 0.5)
        else:
            out[lo:lo + idx.size] = (idx - size // 2) * 0.5
    return out.reshape(shape)


# --------------------------------------------------------------------------- checks

from .checks import NOT_RUN, PASSED, detail, failed, kind, skipped  # noqa: E402 - the one status vocabulary


@dataclass
class CheckResult:
    shape_inference: str = NOT_RUN          # "passed" | "failed: <why>" | "skipped: <reason>"
    inferred_shape: tuple | None = None
    onnxruntime: str = NOT_RUN              # "passed" | "failed: <why>" | "skipped: <reason>"
    reference_evaluator: str = NOT_RUN      # onnx's evaluator, where onnxruntime has no kernel
    tried_shapes: list = field(default_factory=list)
    tried_values: list = field(default_factory=list)  # runtime begin/end/strides tried (dicts)
    rejected_values: int = 0                # runtime values the framework rejects
    must_fail_checked: int = 0              # of those, run in onnxruntime: it failed too
    run_time_errors: str = NOT_RUN          # the must-fail runs: "passed" | "skipped: <reason>"
    run_time_errors_on: dict = field(default_factory=dict)  # check_on_runtimes: runtime -> status
    runtimes: dict = field(default_factory=dict)  # other runtimes checked (verification/runtimes.py): name -> status

    @property
    def statuses(self) -> list[str]:
        return [self.shape_inference, self.onnxruntime, self.reference_evaluator, *self.runtimes.values()]

    @property
    def ok(self) -> bool:
        """Nothing failed (a skipped or not-run check is not a failure)."""
        return not any(kind(s) == "failed" for s in self.statuses)

    @property
    def skipped(self) -> list[str]:
        return [detail(s) for s in self.statuses if kind(s) == "skipped" and s != NOT_RUN]


@dataclass
class CheckCase:
    lowering: Lowering
    dtype: np.dtype                         # numpy dtype of the data input
    elem_type: int                          # ONNX element type
    declared_output: tuple | None = None    # the original node's declared output shape
    index_types: dict = field(default_factory=dict)  # runtime fields -> "int32" | "int64" | None
    result: CheckResult = field(default_factory=CheckResult)

    @property
    def written_spec(self) -> SliceSpec:
        """The spec as the node holds it (a TFLite plan's own TF spec may be a rewritten one)."""
        plan = self.lowering.plan
        return plan.source if plan.source is not None else plan.spec

    @functools.cached_property  # (read for every run of the case; ``lowering`` is never reassigned)
    def runtime_fields(self) -> list[str]:
        return [f for f in ("begin", "end", "strides") if getattr(self.written_spec, f) is None]


def _dims_compatible(inferred: Dim, planned: Dim, lenient: bool = False) -> bool:
    if isinstance(planned, int):
        # lenient (runtime indices): ONNX infers no dims for a Slice with runtime starts;
        # less information is fine, a different number is not
        return inferred == planned or lenient and not isinstance(inferred, int)
    if isinstance(inferred, int):  # plan says symbolic/unknown, inference made up a number --
        return lenient and planned is None  # or folded run-time indices the plan left unknown
    return True


def shape_problem(inferred: tuple | None, planned: tuple | None, lenient: bool = False) -> str | None:
    return shape_conflict(inferred, planned, lambda a, b: None if _dims_compatible(a, b, lenient)
                          else f"inferred {a} != planned {b}", "planned ")


def build_model(cases: list[CheckCase], opset: int, ids: list[int] | None = None, parts: list | None = None):
    """One ONNX model checking ``cases`` (input ``x<i>`` and output ``y<i>`` per case, ``i`` from
    ``ids``), with the declared input shapes (NodeProtos from rewrite_proto.emit_proto: the
    rewrite's own emission).  ``parts``: a list that receives, per case, where its graph inputs
    and nodes are in the model's lists (first, end of each) -- what :func:`_part_model` cuts out."""
    from onnx import TensorProto, ValueInfoProto, helper

    from ..graphs.names import NameAllocator
    from ..rewrite.proto_pass import ProtoConstantPool, emit_proto
    types: dict = {}  # (element type, shape) -> its TypeProto: cases repeat a few declarations

    def value_info(name: str, elem: int, shape: tuple | None):
        typ = types.get((elem, shape))
        if typ is None:
            typ = types[elem, shape] = helper.make_tensor_value_info(
                name, elem, None if shape is None else list(shape)).type
        return ValueInfoProto(name=name, type=typ)

    names = NameAllocator()
    consts = ProtoConstantPool("k/", names)
    inputs: list = []
    outputs: list = []
    nodes: list = []
    numbers: Sequence[int] = ids if ids is not None else range(len(cases))
    names.taken.update(f"x{i}" for i in numbers)
    for i, case in zip(numbers, cases):
        shape = case.lowering.plan.input_shape
        first_input, first_node = len(inputs), len(nodes)
        inputs.append(value_info(f"x{i}", case.elem_type, shape))
        runtime = {}
        for f in case.runtime_fields:
            dtype = TensorProto.INT32 if case.index_types.get(f) == "int32" else TensorProto.INT64
            runtime[f] = f"{f[0]}{i}"
            names.taken.add(runtime[f])
            length = f"{runtime[f]}_length" if f in case.written_spec.unsized else case.written_spec.n
            inputs.append(value_info(runtime[f], dtype, (length,)))
        new, y = emit_proto(case.lowering, f"x{i}", opset, consts, f"r{i}", runtime)
        new[-1].output[0] = f"y{i}"
        nodes.extend(new)
        outputs.append(value_info(f"y{i}", case.elem_type, None))
        if parts is not None:
            parts.append((first_input, len(inputs), first_node, len(nodes)))
    graph = helper.make_graph(nodes, "onnx_slice_tools_checks", inputs, outputs, consts.tensors)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version_for(opset)
    return model


def _part_model(full, parts: list, positions: list[int], tensors: dict):
    """The model of the cases at ``positions`` of ``full`` (:func:`build_model` of every case,
    ``parts`` its record, ``tensors`` its initializers by name): their inputs, nodes and outputs
    (copies) and the constants those nodes read -- the model ``build_model`` makes of those cases
    alone, up to the constants' names, without emitting their nodes again."""
    from onnx import helper
    graph = full.graph
    inputs, nodes = [], []
    for k in positions:
        first_input, end_input, first_node, end_node = parts[k]
        inputs.extend(graph.input[first_input:end_input])
        nodes.extend(graph.node[first_node:end_node])
    read = dict.fromkeys(name for node in nodes for name in node.input)
    consts = [tensors[name] for name in read if name in tensors]
    sub = helper.make_graph(nodes, graph.name, inputs, [graph.output[k] for k in positions], consts)
    model = helper.make_model(sub, opset_imports=list(full.opset_import))
    model.ir_version = full.ir_version
    return model


def _any_shape(proto):
    """``proto`` with every data input's dims symbolic: onnxruntime then takes the small sizes
    the checks feed on axes passed through whole (shape inference saw the declared ones)."""
    for vi in proto.graph.input:
        if vi.name.startswith("x") and vi.type.tensor_type.HasField("shape"):
            for k, d in enumerate(vi.type.tensor_type.shape.dim):
                d.Clear()
                d.dim_param = f"{vi.name}_{k}"
    return proto


def _infer(proto) -> dict:
    from ..graphs.shape_inference import infer
    inferred = infer(proto, strict=True)
    shapes = {}
    for vi in inferred.graph.output:
        tt = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim]
        shapes[vi.name] = tuple(dims) if tt.HasField("shape") else None
    return shapes


def _inference_error(exc: Exception, opset: int) -> str:
    """Strict shape inference's error, said plainly when an op's schema lacks the data type."""
    import re

    import onnx
    text = first_line(exc)
    m = re.search(r"op_type:(\w+).*unsupported type: (tensor\(\w+\))", text)
    if m:
        op, typ = m.groups()
        since = onnx.defs.get_schema(op, opset).since_version
        return (f"ONNX's {op}-{since} does not accept {typ}: the rewrite is not valid ONNX for this type "
                f"(shape inference: unsupported type)")
    return f"shape inference: {text}"


def _check_shapes(cases: list[CheckCase], opset: int, proto) -> None:
    """Strict shape inference; when the batch fails, each case alone (to name the culprit)."""
    try:
        shapes = _infer(proto)
    except Exception:
        shapes = None
    for i, case in enumerate(cases):
        if shapes is not None:
            got = shapes.get(f"y{i}")
        else:
            try:
                got = _infer(build_model([case], opset, [i])).get(f"y{i}")
            except Exception as exc:
                case.result.shape_inference = failed(_inference_error(exc, opset))
                continue
        case.result.inferred_shape = got
        plan_shape = case.lowering.plan.output_shape
        problem = (shape_problem(got, plan_shape, lenient=case.lowering.dynamic) if got is not None
                   else "no shape inferred")
        if plan_shape is None and got is None:
            problem = None  # unknown rank: nothing to infer
        if problem is None and case.declared_output is not None and plan_shape is not None:
            declared = declared_conflict(case.declared_output, plan_shape)
            problem = f"declared output shape {case.declared_output}: {declared}" if declared else None
        case.result.shape_inference = failed(problem) if problem else PASSED


#: onnxruntime runs of a batch holding runtime-index rewrites (fresh random values each run).
RUNTIME_TRIALS = 24
#: Runtime index values the framework rejects, kept per rewrite to check onnxruntime fails too.
MUST_FAIL_DRAWS = 3
#: Input sizes the framework rejects, kept per rewrite as must-fail runs (:func:`_keep_rejected_sizes`).
REJECTED_SIZES = 2


@dataclass
class _CaseRun:
    """How one case is run: its shapes within the budget and the bytes each needs."""

    index: int
    case: CheckCase
    shapes: list
    bytes: dict                              # shape -> bytes of one run
    baseline: dict = field(default_factory=dict)  # a valid feed of its smallest shape (once drawn)
    baseline_bytes: int = 0
    baseline_shape: tuple = ()
    must_fail: list = field(default_factory=list)  # (feed, values, reason)
    wrong_lengths: list = field(default_factory=list)  # (feed, values, reason): a vector of another length
    plans: dict = field(default_factory=dict)  # input shape -> the plan there (no runtime fields: one per shape)


#: The runtime the per-rewrite checks run on: onnxruntime, or another of verification/runtimes.py for the
#: duration of a ``check_lowerings(..., runtime=...)`` call.
_RUNTIME = contextvars.ContextVar("onnx_slice_tools_check_runtime", default="onnxruntime")


def _check_session(model_bytes: bytes):
    """A session of the checks' model on the runtime of this ``check_lowerings`` call."""
    return runtime_session(_RUNTIME.get(), model_bytes)


def check_lowerings(cases: list[CheckCase], opset: int, seed: int = 0,
                    memory_budget: int = DEFAULT_VERIFY_MEMORY, runtime: str = "onnxruntime") -> None:
    """Run shape inference and onnxruntime checks on all cases; fills ``case.result``.

    At most ``memory_budget`` bytes of inputs, outputs and intermediates are held at once
    (see the module doc).  ``runtime``: run the checks on another runtime of verification/runtimes.py
    instead (its status then goes into ``result.onnxruntime``; check_on_runtimes
    files it under the runtime's name)."""
    if not cases:
        return
    token = _RUNTIME.set(runtime)
    try:
        parts: list = []
        full = build_model(cases, opset, parts=parts)
        _check_shapes(cases, opset, full)
        rng = np.random.default_rng(seed)
        runnable: list[_CaseRun] = []
        rejected: list[_CaseRun] = []              # every draw of runtime values rejected: must-fail runs only
        by_evaluator: list[_CaseRun] = []
        baselines: dict = {}  # (shape, dtype) -> the random tensor every baseline of that shape reads
        for i, case in enumerate(cases):
            p = _plan_case(i, case, memory_budget)
            if p is None:
                continue
            if case.elem_type not in _COMMON_TYPES and _kernel_gap(p, opset):
                by_evaluator.append(p)
            elif _set_baseline(p, rng, baselines) is not None:
                runnable.append(p)
            else:
                rejected.append(p)
        tensors: dict | None = None
        for group in _groups(runnable, memory_budget):
            if len(group) == len(cases):  # every case: the model built above; else its part of it
                proto = full
            else:
                if tensors is None:
                    tensors = {t.name: t for t in full.graph.initializer}
                proto = _part_model(full, parts, [p.index for p in group], tensors)
            by_evaluator += _run_group(group, opset, rng, memory_budget, proto)
        for p in rejected:
            if not _kernel_gap(p, opset):
                _run_must_fail(p, opset)
        for p in by_evaluator:
            _check_with_evaluator(p, opset, rng)
    finally:
        _RUNTIME.reset(token)


#: Element types onnxruntime's CPU kernels of the emitted ops take (probed only when a session
#: of them fails to load); the others are probed up front.
_COMMON_TYPES = frozenset({1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 16})


def _kernel_gap(p: _CaseRun, opset: int) -> bool:
    """True (and the case's onnxruntime status a skip) when onnxruntime has no kernel of an
    emitted data op for the case's element type."""
    case = p.case
    missing = [op for op in dict.fromkeys(data_ops(case.lowering)) if ort_kernel_missing(op, case.elem_type, opset)]
    if missing:
        case.result.onnxruntime = skipped(f"onnxruntime has no {'/'.join(missing)} kernel for "
                                   f"{type_name(case.elem_type)}")
    return bool(missing)


def _plan_case(i: int, case: CheckCase, budget: int) -> _CaseRun | None:
    lowering = case.lowering
    shapes = concrete_shapes(lowering.plan, relaxed=relaxed_axes(lowering), free=size_free_axes(lowering))
    if not shapes:
        case.result.onnxruntime = skipped("no input size small enough to test (indices beyond 4096)")
        return None
    n_ops = len(data_ops(lowering))
    sizes = {s: run_bytes(s, case.dtype, n_ops) for s in shapes}
    fitting = [s for s in shapes if sizes[s] <= budget]
    if not fitting:
        need = min(sizes.values())
        case.result.onnxruntime = skipped(f"needs {_mib(need)} MiB, budget {_mib(budget)} MiB")
        return None
    return _CaseRun(i, case, fitting, sizes)


def _set_baseline(p: _CaseRun, rng, inputs: dict | None = None) -> dict | None:
    """A valid feed of the case's cheapest shape, fed in every run that does not compare it.
    ``inputs``: (shape, dtype) -> random tensor, shared by the baselines of one call (read only,
    as the tensors of one run are: a baseline is a valid feed, its values are never compared)."""
    for shape in sorted(p.shapes, key=lambda s: p.bytes[s]):
        drawn = _draw(p, shape, rng, inputs=inputs, reference=False)
        if drawn is not None:
            p.baseline, p.baseline_bytes, p.baseline_shape = drawn[0], p.bytes[shape], shape
            p.wrong_lengths = _wrong_lengths(p.case, p.index, drawn[0])
            _keep_rejected_sizes(p, rng)
            return p.baseline
    if p.case.runtime_fields:
        p.case.result.onnxruntime = skipped("the framework rejects every runtime index value tried")
    else:
        p.case.result.onnxruntime = skipped("the framework's result is undefined at every input size tried")
    return None


def checked_lengths(spec: SliceSpec) -> list[str]:
    """The runtime fields of unknown length whose length the framework checks against the
    others': all of them, but TFLite's strides (LiteRT reads their first entries, checks no
    length)."""
    from ..semantics.spec import TFLITE
    return [f for f in spec.unsized if getattr(spec, f) is None and not (f == "strides" and spec.flavor == TFLITE)]


def _wrong_lengths(case: CheckCase, i: int, feed: dict) -> list:
    """Must-fail runs of ``feed`` (a valid one) with one runtime vector of unknown length one
    entry longer, or one shorter: the frameworks raise on begin, end and strides of different
    lengths, the lowering's length check must fail there too."""
    out = []
    spec = case.written_spec
    for f in checked_lengths(spec):
        name = f"{f[0]}{i}"
        vec = np.asarray(feed[name])
        for wrong in ([*vec.tolist(), 0], vec.tolist()[:-1]) if len(vec) else ([0],):
            changed = {**feed, name: np.array(wrong, dtype=vec.dtype)}
            out.append((changed, {f: wrong}, f"{f} of length {len(wrong)}, the others {spec.n}: "
                                             "begin, end and strides of different lengths"))
    return out


def _keep_rejected_sizes(p: _CaseRun, rng) -> None:
    """Input sizes the framework rejects, kept as must-fail runs: for each index (shrink) axis
    whose index is a constant and whose size is unknown at conversion time, the sizes it is out
    of range for (0 and the largest such size; at most ``REJECTED_SIZES`` runs), the other axes
    at the baseline's sizes (at least 1 where unknown, so the index is really read) and runtime
    begin/end/strides at the baseline's values: ``x[:, 5]`` on ``[N, T]`` with ``T <= 5`` at run
    time.  (Rejected runtime index values have their own draws: :func:`_draw`.)"""
    case = p.case
    plan = case.lowering.plan
    shape = plan.input_shape
    if shape is None or not p.baseline_shape or not p.baseline:
        return
    shrinks = [(a.axis, a.begin) for a in plan.axes
               if a.kind == INDEX and a.begin is not None and not isinstance(shape[a.axis], int)]
    if not shrinks:
        return
    i = p.index
    runtime = {f"{f[0]}{i}": p.baseline[f"{f[0]}{i}"] for f in case.runtime_fields}
    spec = with_values(case.written_spec, {f: runtime[f"{f[0]}{i}"].tolist() for f in case.runtime_fields})
    kept = 0
    for axis, begin in shrinks:
        for size in sorted({0, min(begin if begin >= 0 else -begin - 1, 4096)}):
            trial = tuple(size if k == axis else d if isinstance(shape[k], int) else max(d, 1)
                          for k, d in enumerate(p.baseline_shape))
            try:
                make_plan(spec, trial)
                continue  # accepted (a size past 4096 clipped): nothing to fail on
            except StridedSliceError as exc:
                if exc.undefined or exc.unsupported:  # TFLite: no result to fail on (plan_tflite)
                    continue
                reason = first_line(exc)
            if kept >= REJECTED_SIZES or run_bytes(trial, case.dtype, 0) > 2 ** 21:  # sized before it is made
                continue
            p.must_fail.append(({f"x{i}": random_input(trial, case.dtype, rng), **runtime}, {}, reason))
            kept += 1


#: cases per session at most: onnxruntime's Python ``run`` looks up each of a session's inputs in
#: a list of the fed names, a cost quadratic in the inputs of one session (a case has its own)
SESSION_CASES = 256


def _groups(plans: list[_CaseRun], budget: int) -> list[list[_CaseRun]]:
    """Cases sharing one session: strings apart (onnxruntime takes them only as numpy arrays),
    at most half the budget of baseline feeds and :data:`SESSION_CASES` cases per session."""
    groups: list[list[_CaseRun]] = []
    for strings in (False, True):
        cur: list[_CaseRun] = []
        total = 0
        for p in plans:
            if (p.case.elem_type == STRING) != strings:
                continue
            if cur and (total + p.baseline_bytes > budget // 2 or len(cur) >= SESSION_CASES):
                groups.append(cur)
                cur, total = [], 0
            cur.append(p)
            total += p.baseline_bytes
        if cur:
            groups.append(cur)
    return groups


def _run_group(group: list[_CaseRun], opset: int, rng, budget: int, proto=None) -> list[_CaseRun]:
    """Run one session's checks (``proto``: the model of exactly these cases, if built already);
    returns the cases onnxruntime turned out to have no kernel for."""
    proto = _any_shape(proto if proto is not None else build_model(
        [p.case for p in group], opset, [p.index for p in group]))
    try:
        session = _check_session(proto.SerializeToString())
    except Exception as exc:
        gaps = [p for p in group if _kernel_gap(p, opset)]
        rest = [p for p in group if p not in gaps]
        if gaps and rest:
            return gaps + _run_group(rest, opset, rng, budget)
        if gaps:
            return gaps
        for p in group:
            p.case.result.onnxruntime = failed(f"{_RUNTIME.get()} could not load the checks: {first_line(exc)}")
        return []
    base_total = sum(p.baseline_bytes for p in group)
    for p in group:  # every run: all baselines plus the compared cases' extra bytes
        p.shapes = [s for s in p.shapes if base_total - p.baseline_bytes + p.bytes[s] <= budget] or [
            p.baseline_shape]
    trials = max(len(p.shapes) for p in group)
    if any(p.case.runtime_fields for p in group):
        trials = max(trials, RUNTIME_TRIALS)
    for t in range(trials):
        pending = [(p, p.shapes[t % len(p.shapes)]) for p in group
                   if t < len(p.shapes) or p.case.runtime_fields]
        while pending:
            batch: list = []
            extra = 0
            while pending:  # pack runs of this trial within the budget
                p, shape = pending[0]
                more = max(0, p.bytes[shape] - p.baseline_bytes)
                if batch and base_total + extra + more > budget:
                    break
                batch.append(pending.pop(0))
                extra += more
            _run_batch(session, group, batch, rng, opset)
    for p in group:
        p.plans.clear()  # (its runs are done: the plans go before the next group's are made)
        _run_must_fail(p, opset, group, session)
    return []


def _run_batch(session, group: list[_CaseRun], batch: list, rng, opset: int) -> None:
    """One run comparing the cases of ``batch`` (case, input shape); the cases of one input shape
    and element type read one random tensor (each its own graph input): every case is still
    compared with its own reference on distinct values, and the draws cost one per shape."""
    feeds: dict = {}
    inputs: dict = {}  # (shape, dtype) -> the random tensor drawn for it in this run
    for p in group:
        feeds.update(p.baseline)
    compared = {}
    for p, shape in batch:
        if kind(p.case.result.onnxruntime) == "failed":
            continue
        drawn = _draw(p, shape, rng, inputs=inputs)
        if drawn is None:
            continue
        feed, exp, values = drawn
        feeds.update(feed)
        compared[p.index] = (p, shape, exp)
        res = p.case.result
        if shape not in res.tried_shapes:
            res.tried_shapes.append(shape)
        if values and len(res.tried_values) < RUNTIME_TRIALS:
            res.tried_values.append({"shape": list(shape), **values})
    if not compared:
        return
    elem = {f"x{p.index}": p.case.elem_type for p in group}
    try:
        outs = _run(session, feeds, [f"y{i}" for i in compared], elem, {i: p.case.elem_type
                                                                        for i, (p, _, _) in compared.items()})
    except Exception:  # attribute the failure: each compared case alone
        outs = {}
        for i, (p, _, _) in compared.items():
            try:
                single = _check_session(_any_shape(build_model([p.case], opset, [i])).SerializeToString())
                names = [k for k in feeds if k[1:] == str(i)]
                outs.update(_run(single, {k: feeds[k] for k in names}, [f"y{i}"], elem, {i: p.case.elem_type}))
            except Exception as exc:
                outs[i] = exc
    for i, (p, shape, exp) in compared.items():
        res = p.case.result
        got = outs[i]  # every compared case has its output or its exception
        if isinstance(got, Exception):
            res.onnxruntime = failed(f"input {shape}{_values_text(p.case, feeds, i)}: "
                                     f"{_RUNTIME.get()} failed: {first_line(got)}")
            continue
        problem = _compare_arrays(got, exp, shape)
        res.onnxruntime = failed(problem + _values_text(p.case, feeds, i)) if problem else PASSED


def _run(session, feeds: dict, names: list[str], elem: dict, out_elem: dict) -> dict:
    """Outputs (numpy, ``ml_dtypes`` where needed) by case index; every input through
    ``OrtValue`` with its ONNX element type, except strings (numpy arrays)."""
    if any(t == STRING for t in elem.values()) or _RUNTIME.get() != "onnxruntime":
        got = [np.asarray(g) for g in session.run(names, feeds)]
    else:
        values = {k: ort_value(v, elem.get(k, 7 if v.dtype == np.int64 else 6)) for k, v in feeds.items()}
        got = [fetch(v, out_elem[int(n[1:])]) for n, v in zip(names, session.run_with_ort_values(names, values))]
    return {int(n[1:]): g for n, g in zip(names, got)}


#: Why the must-fail runs are not run on OpenVINO (measured on 2026.4's CPU plugin): no
#: construction raises there -- out-of-range Gather indices read zeros or stale memory, Reshape
#: (to a computed shape), Squeeze, Expand, Concat and Add of mismatching shapes return data, its own StridedSlice
#: returns data for an out-of-range shrink, and a step of 0 (Range, StridedSlice) kills the process.
#: (A ``Reshape`` to a constant shape of another size fails in a default compile -- not with
#: INFERENCE_NUM_THREADS 1 --: the length checks run there, in a default compile.)
OPENVINO_NO_ERRORS = skipped("openvino: OpenVINO raises no run-time error (out-of-range indices read zeros or "
                            "stale memory; a step of 0 kills the process)")


def _run_must_fail(p: _CaseRun, opset: int, group: list[_CaseRun] | None = None, session=None) -> None:
    """Runtime values the framework rejects: onnxruntime must fail on them too.  Run in the
    group's session with every other case fed its baseline (known to run) when no case of the
    group failed -- a failure is then this case's; else in a session of this case alone."""
    res = p.case.result
    if not (p.must_fail or p.wrong_lengths) or kind(res.onnxruntime) == "failed":
        return
    runs = p.wrong_lengths + p.must_fail
    if _RUNTIME.get() == "openvino":  # OpenVINO fails a Reshape to a constant shape of another size
        runs = p.wrong_lengths
    elif _RUNTIME.get() != "onnxruntime" and p.case.lowering.target == "onnxruntime":
        runs = p.wrong_lengths  # the minimal lowering's 0-d Gather reads no index of an empty tensor in onnx's reference
    elif _RUNTIME.get() != "onnxruntime":  # rejected sizes (no values) are onnxruntime's: onnx's reference
        runs = p.wrong_lengths + [r for r in p.must_fail if r[1]]  # Gather reads no index of an emptied tensor
    if not runs:
        if _RUNTIME.get() == "openvino":
            res.run_time_errors = OPENVINO_NO_ERRORS
        return
    if _RUNTIME.get() == "openvino":  # a default compile: the one-thread CPU plugin skips Reshape's size check
        group = [p]
        session = runtime_session(OPENVINO, _any_shape(build_model([p.case], opset, [p.index])).SerializeToString(),
                                  SHIPPED)
    elif session is None or group is None or any(kind(q.case.result.onnxruntime) == "failed" for q in group):
        group = [p]
        session = _check_session(_any_shape(build_model([p.case], opset, [p.index])).SerializeToString())
    elem = {f"x{q.index}": q.case.elem_type for q in group}
    base: dict = {}
    for q in group:
        if q is not p:
            base.update(q.baseline)
    for feed, values, reason in runs:
        try:
            got = _run(session, {**base, **feed}, [f"y{p.index}"], elem, {p.index: p.case.elem_type})[p.index]
        except Exception:
            res.must_fail_checked += 1
            res.run_time_errors = PASSED
            continue
        if _RUNTIME.get() == "openvino":  # as with indices out of range: a gap of the runtime, said
            res.run_time_errors = skipped(f"openvino: OpenVINO runs on with {values} ({reason})")
            return
        with_values = f" with {values}" if values else ""
        res.onnxruntime = failed(f"input {list(feed[f'x{p.index}'].shape)}{with_values}: the framework "
                                 f"rejects it ({reason}) but {_RUNTIME.get()} returned shape {list(got.shape)}")
        return
    if _RUNTIME.get() == "openvino" and p.must_fail:
        res.run_time_errors = OPENVINO_NO_ERRORS


def _check_with_evaluator(p: _CaseRun, opset: int, rng) -> None:
    """onnx's reference evaluator runs the emitted nodes where onnxruntime has no kernel."""
    from onnx.reference import ReferenceEvaluator
    res = p.case.result
    proto = _any_shape(build_model([p.case], opset, [p.index]))
    try:
        ev = ReferenceEvaluator(proto)
    except Exception as exc:
        res.reference_evaluator = skipped(f"onnx's reference evaluator cannot load the check: {first_line(exc)}")
        return
    for shape in p.shapes:
        drawn = _draw(p, shape, rng)
        if drawn is None:
            continue
        feed, exp, values = drawn
        try:
            # a list (a dict only with intermediate=True, which onnx's annotation does not tell apart)
            got = np.asarray(cast("list[Any]", ev.run(None, feed))[0])
        except Exception as exc:
            res.reference_evaluator = skipped(f"onnx's reference evaluator failed: {first_line(exc)}")
            return
        res.tried_shapes.append(shape)
        problem = _compare_arrays(got, exp, shape)
        if problem:
            res.reference_evaluator = failed(problem + _values_text(p.case, feed, p.index))
            return
    res.reference_evaluator = PASSED if res.tried_shapes else res.reference_evaluator


def _values_text(case: CheckCase, feeds: dict, i: int) -> str:
    if not case.runtime_fields:
        return ""
    return " with " + ", ".join(f"{f}={np.asarray(feeds[f'{f[0]}{i}']).tolist()}" for f in case.runtime_fields)


#: Runtime strides drawn: positive ones more often (TF rejects a shrink's stride <= 0, both a 0).
_STRIDE_CANDIDATES = (-3, -2, -1, 0, 1, 1, 1, 1, 2, 3)


def _index_candidates(dim) -> list[int]:
    d = dim if isinstance(dim, int) else 3
    return [-d - 2, -d - 1, -d, -d + 1, -2, -1, 0, 1, 2, d - 1, d, d + 1, d + 3]


def _inside_candidates(dim) -> list[int]:
    d = dim if isinstance(dim, int) else 3
    return list(range(-d, d)) or [0]


def _draw(p: _CaseRun, shape: tuple, rng: np.random.Generator, tries: int = 60, inputs: dict | None = None,
          reference: bool = True):
    """(feed, expected output, runtime values) for one run of a case, or None when the framework
    rejects every draw of runtime values (e.g. a shrink index on a size-0 dim).  Rejected
    draws are kept (up to MUST_FAIL_DRAWS) as must-fail cases.  ``inputs``: (shape, dtype) ->
    random tensor, shared by the cases of one run (read only: drawn here when missing).
    ``reference``: False for a feed only (a baseline, never compared): a case without runtime
    fields then gets None as its expected output (its plan is still made: it says whether the
    framework's result is defined there); one with runtime fields draws as usual (the
    reference says which values are valid)."""
    case, i = p.case, p.index
    spec = case.written_spec
    key = (shape, np.dtype(case.dtype))
    x = None if inputs is None else inputs.get(key)
    if x is None:
        x = random_input(shape, case.dtype, rng)
        if inputs is not None:
            inputs[key] = x
    fields = case.runtime_fields
    if not fields:
        try:
            plan = p.plans.get(shape)
            if plan is None:
                plan = p.plans[shape] = make_plan(spec, shape)
            return {f"x{i}": x}, apply_plan(plan, x) if reference else None, None
        except StridedSliceError as exc:  # not expected (sizes are chosen valid) but for TFLite's
            if exc.undefined or exc.unsupported:  # sizes where its result is undefined or no slice
                return None  # (an ``offset`` on dims known only at run time): no result to compare
            return {f"x{i}": x}, exc, None
    try:
        dims = {a.index: a.dim for a in make_plan(spec, shape).axes if a.index is not None}
    except StridedSliceError:
        return None
    for attempt in range(tries):
        values = {}
        inside = attempt % 2 == 1  # every other draw inside the axes, strides positive: valid
        for f in fields:  # for single indices too, which the wide draws rarely are on small axes
            if f == "strides":
                values[f] = [int(rng.choice(_STRIDE_CANDIDATES if not inside else (1, 2))) for _ in range(spec.n)]
            else:
                values[f] = [int(rng.choice(_index_candidates(dims.get(k)) if not inside else
                                            _inside_candidates(dims.get(k)))) for k in range(spec.n)]
        feed = {f"x{i}": x}
        for f in fields:
            dtype = np.int32 if case.index_types.get(f) == "int32" else np.int64
            feed[f"{f[0]}{i}"] = np.array(values[f], dtype=dtype)
        full = with_values(spec, values)
        try:
            exp = apply_plan(make_plan(full, shape), x)
        except StridedSliceError as exc:
            case.result.rejected_values += 1
            if exc.undefined or exc.unsupported:  # TFLite: no result to fail on (plan_tflite)
                continue
            if len(p.must_fail) < MUST_FAIL_DRAWS and x.size * x.dtype.itemsize <= 2 ** 20:
                p.must_fail.append((feed, values, first_line(exc)))
            continue
        return feed, exp, values
    return None


def with_values(spec: SliceSpec, values: Mapping[str, Sequence[int]]) -> SliceSpec:
    """``spec`` with the run-time ``values`` of some of begin/end/strides (``{"begin": [..]}``)
    filled in: the spec the framework runs on that feed."""
    def value(name: str, current: tuple[int, ...] | None) -> tuple[int, ...] | None:
        return tuple(values[name]) if name in values else current
    return replace(spec, runtime_length=None, begin=value("begin", spec.begin), end=value("end", spec.end),
                   strides=value("strides", spec.strides))


def _compare_arrays(got: np.ndarray, exp, shape) -> str | None:
    got = np.asarray(got)
    if isinstance(exp, Exception):
        return f"input {shape}: reference rejected ({exp})"
    if got.shape != exp.shape:
        return f"input {shape}: shape {got.shape} != expected {exp.shape}"
    if exp.dtype.kind in "OUS":
        return None if got.astype(object).tolist() == exp.astype(object).tolist() else \
            f"input {shape}: string values differ"
    if got.dtype != exp.dtype:
        return f"input {shape}: dtype {got.dtype} != expected {exp.dtype}"
    if got.tobytes() != exp.tobytes():
        return f"input {shape}: values differ (first: {got.ravel()[:6]} vs {exp.ravel()[:6]})"
    return None


# --------------------------------------------------------------------------- several runtimes


@dataclass(frozen=True)
class CheckRun:
    """What the per-rewrite checks of one conversion share: the opset of their check models, the
    runtimes they run on (verification/runtimes.py), the memory budget of one run
    (``--verify-memory``) and the seed of their random draws -- one value handed from the
    pipeline (api.verify_records) to :func:`check_on_runtimes`, read field by field only by
    :func:`check_lowerings`."""

    opset: int
    runtimes: tuple = (ONNXRUNTIME,)
    memory_budget: int = DEFAULT_VERIFY_MEMORY
    seed: int = 0


def check_on_runtimes(cases: list, run: CheckRun) -> None:
    """The per-rewrite checks on each runtime of ``run``: onnxruntime's status stays in
    ``result.onnxruntime``, every other runtime's goes to ``result.runtimes[name]``
    (each runtime sees the same input sizes and index values: same seed)."""
    runtimes, opset, seed, budget = run.runtimes, run.opset, run.seed, run.memory_budget
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
            if case.result.shape_inference == NOT_RUN:
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
    if status is NOT_RUN or status == NOT_RUN:
        return
    result.run_time_errors_on[runtime] = status
    runs = result.run_time_errors_on
    reasons = [detail(v) for v in runs.values() if kind(v) == "skipped"]
    passed_on = [k for k, v in runs.items() if kind(v) == "passed"]
    if not reasons:
        result.run_time_errors = PASSED
        return
    result.run_time_errors = skipped("; ".join(reasons) + (f" (passed on {', '.join(passed_on)})" if passed_on else ""))


def _batches(cases: list, runtime: str) -> list:
    """OpenVINO checks one case per model: with many independent outputs in one model its CPU
    plugin returned wrong shapes and stale buffers for cases that are right alone (measured on
    2026.4: x[None, ...] on [4, 5] came out as garbage values in a 50-case model); it also
    compiles a model per combination of input ranks."""
    if runtime != OPENVINO:
        return [cases]
    return [[c] for c in cases]
