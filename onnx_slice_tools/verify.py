"""Verification of lowerings: ONNX shape inference and onnxruntime against the numpy reference.

Each distinct rewrite (flavour, spec, declared input shape, dtype, opset) is
checked once.  All checks of a batch go into **one** ONNX model -- one input and
one output per rewrite -- so one onnxruntime session and a few runs check
thousands of rewrites:

* shape inference (strict) must give each output the plan's shape (a symbolic
  dim may stay symbolic or become unknown, never a different number);
* onnxruntime, run on concrete shapes -- several sizes for every symbolic or
  unknown dim, including 1, 0 where allowed, and sizes where clamping changes the
  result -- must equal the reference of the flavour exactly: shape, dtype, bytes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from .errors import StridedSliceError
from .lower import ConstantPool, Lowering, emit
from .plan import INDEX, RANGE, Dim, Plan, make_plan
from .reference import apply_plan

def session_options():
    """Cheap onnxruntime sessions: no graph optimisation, one thread, no spinning."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.log_severity_level = 3
    return so


def make_session(model_bytes: bytes):
    import onnxruntime as ort
    return ort.InferenceSession(model_bytes, sess_options=session_options(), providers=["CPUExecutionProvider"])


@functools.lru_cache(maxsize=None)
def max_supported_opset() -> int:
    """The newest default-domain opset that the installed onnxruntime loads (probed once)."""
    import onnx
    from onnx import TensorProto, helper
    for opset in range(onnx.defs.onnx_opset_version(), 10, -1):
        graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "probe",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = ir_version_for(opset)
        try:
            make_session(model.SerializeToString())
        except Exception:
            continue
        return opset
    return 11


@functools.lru_cache(maxsize=None)
def max_supported_ir_version() -> int:
    import onnx
    from onnx import TensorProto, helper
    for ir in range(onnx.IR_VERSION, 6, -1):
        graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "probe",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = ir
        try:
            make_session(model.SerializeToString())
        except Exception:
            continue
        return ir
    return 7


def ir_version_for(opset: int) -> int:
    from onnx import helper
    return helper.find_min_ir_version_for([helper.make_opsetid("", opset)], ignore_unknown=True)


# --------------------------------------------------------------------------- concrete shapes

def _candidate_sizes(plan: Plan, k: int) -> list[int]:
    """Sizes to try for input axis ``k`` whose declared dim is not a known int."""
    a = next((a for a in plan.axes if a.axis == k), None)
    sizes = [1, 3, 0, 2, 6]
    if a is not None and a.kind in (RANGE, INDEX):
        for v in (a.begin, a.end):
            if v is not None and abs(v) <= 64:
                sizes += [abs(v) - 1, abs(v), abs(v) + 1]
    out = []
    for s in sizes:
        if s < 0 or s in out:
            continue
        if a is not None and a.kind == INDEX and a.begin is not None and not (
                -s <= a.begin < s):
            continue  # the framework would reject this size: not a conversion check
        out.append(s)
    if not out and a is not None and a.kind == INDEX and a.begin is not None and abs(a.begin) <= 4096:
        out = [a.begin + 1 if a.begin >= 0 else -a.begin]
    return out  # empty: no size small enough to test (e.g. shrink index 2**40)


def concrete_shapes(plan: Plan, limit: int = 6) -> list[tuple[int, ...]]:
    """Concrete input shapes that exercise the plan's unknown dims."""
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
    choices = [[d] if isinstance(d, int) else _candidate_sizes(plan, k) for k, d in enumerate(shape)]
    if any(not c for c in choices):
        return []
    trials = max((len(c) for c in choices), default=1)
    trials = min(trials, limit) if any(len(c) > 1 for c in choices) else 1
    return [tuple(c[t % len(c)] for c in choices) for t in range(trials)]


def random_input(shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    """Distinct values where the dtype allows it, so a wrong permutation cannot pass."""
    size = int(np.prod(shape)) if shape else 1
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size).astype(bool).reshape(shape)
    if dtype.kind in "OUS":
        return np.array([f"s{v}" for v in rng.permutation(size)], dtype=object).reshape(shape)
    vals = rng.permutation(size)
    if dtype.kind in "iu":
        vals = vals % (np.iinfo(dtype).max if np.iinfo(dtype).max < size else size + 1)
    return vals.astype(dtype).reshape(shape)


# --------------------------------------------------------------------------- checks

@dataclass
class CheckResult:
    shape_inference: str = "not run"       # "ok" or the mismatch
    inferred_shape: tuple | None = None
    onnxruntime: str = "not run"           # "ok" or the mismatch
    tried_shapes: list = field(default_factory=list)
    tried_values: list = field(default_factory=list)  # runtime begin/end/strides tried (dicts)
    rejected_values: int = 0                # runtime values the framework rejects: redrawn
    runtimes: dict = field(default_factory=dict)  # other runtimes checked (runtimes.py): name -> status

    @property
    def ok(self) -> bool:
        return self.shape_inference == "ok" and all(
            s == "ok" or s.startswith("skipped") for s in (self.onnxruntime, *self.runtimes.values()))


@dataclass
class CheckCase:
    lowering: Lowering
    dtype: np.dtype                         # numpy dtype of the data input
    elem_type: int                          # ONNX element type
    declared_output: tuple | None = None    # the original node's declared output shape
    index_types: dict = field(default_factory=dict)  # runtime fields -> "int32" | "int64" | None
    result: CheckResult = field(default_factory=CheckResult)

    @property
    def runtime_fields(self) -> list[str]:
        spec = self.lowering.plan.spec
        return [f for f in ("begin", "end", "strides") if getattr(spec, f) is None]


def _dims_compatible(inferred: Dim, planned: Dim, lenient: bool = False) -> bool:
    if isinstance(planned, int):
        # lenient (runtime indices): ONNX infers no dims for a Slice with runtime starts;
        # less information is fine, a different number is not
        return inferred == planned or lenient and not isinstance(inferred, int)
    if isinstance(inferred, int):
        return False  # plan says symbolic/unknown, inference made up a number
    return True


def declared_conflict(declared: tuple | None, planned: tuple | None) -> str | None:
    """A shape the original model declared for the node's output contradicts the plan: another
    rank, or another number for a dim both know.  (Exporters name unknown dims ``unk__7``:
    a name where the plan knows the size is less information, not a contradiction.)"""
    if declared is None or planned is None:
        return None
    if len(declared) != len(planned):
        return f"rank {len(declared)} != planned {len(planned)}"
    for i, (a, b) in enumerate(zip(declared, planned)):
        if isinstance(a, int) and isinstance(b, int) and a != b:
            return f"dim {i}: declared {a} != planned {b}"
    return None


def _shape_problem(inferred: tuple | None, planned: tuple | None, lenient: bool = False) -> str | None:
    if planned is None or inferred is None:
        return None
    if len(inferred) != len(planned):
        return f"rank {len(inferred)} != planned {len(planned)}"
    for i, (a, b) in enumerate(zip(inferred, planned)):
        if not _dims_compatible(a, b, lenient):
            return f"dim {i}: inferred {a} != planned {b}"
    return None


def _build_model(cases: list[CheckCase], opset: int):
    import onnx_ir as ir
    graph = ir.Graph([], [], nodes=[], name="onnx_slice_tools_checks",
                     opset_imports={"": opset})
    consts = ConstantPool(graph, "k/")
    for i, case in enumerate(cases):
        shape = case.lowering.plan.input_shape
        x = ir.Value(name=f"x{i}", type=ir.TensorType(ir.DataType(case.elem_type)),
                     shape=None if shape is None else ir.Shape(
                         [d if d is not None else None for d in shape]))
        graph.inputs.append(x)
        runtime = {}
        for f in case.runtime_fields:
            dtype = ir.DataType.INT32 if case.index_types.get(f) == "int32" else ir.DataType.INT64
            runtime[f] = ir.Value(name=f"{f[0]}{i}", type=ir.TensorType(dtype),
                                  shape=ir.Shape([case.lowering.plan.spec.n]))
            graph.inputs.append(runtime[f])
        nodes, y = emit(case.lowering, x, opset, consts, f"r{i}", runtime)
        graph.extend(nodes)
        y.name = f"y{i}"
        graph.outputs.append(y)
    model = ir.Model(graph, ir_version=ir_version_for(opset))
    return ir.to_proto(model)


def check_lowerings(cases: list[CheckCase], opset: int, seed: int = 0, runtime: str = "onnxruntime") -> None:
    """Run shape inference and onnxruntime checks on all cases; fills ``case.result``.

    ``runtime``: run the checks on another runtime of runtimes.py instead (its status then
    goes into ``result.onnxruntime``; runtimes.check_on_runtimes files it under its name)."""
    from .runtimes import make_session as runtime_session
    import onnx
    if not cases:
        return
    proto = _build_model(cases, opset)
    try:
        inferred = onnx.shape_inference.infer_shapes(proto, check_type=True, strict_mode=True)
        shapes = {}
        for vi in inferred.graph.output:
            dims = []
            for d in vi.type.tensor_type.shape.dim:
                dims.append(d.dim_value if d.HasField("dim_value") else (d.dim_param or None))
            shapes[vi.name] = tuple(dims) if vi.type.tensor_type.HasField("shape") else None
        for i, case in enumerate(cases):
            got = shapes.get(f"y{i}")
            case.result.inferred_shape = got
            plan_shape = case.lowering.plan.output_shape
            problem = (_shape_problem(got, plan_shape, lenient=case.lowering.dynamic) if got is not None
                       else "no shape inferred")
            if plan_shape is None and got is None:
                problem = None  # unknown rank: nothing to infer
            if problem is None and case.declared_output is not None and plan_shape is not None:
                declared = declared_conflict(case.declared_output, plan_shape)
                problem = f"declared output shape {case.declared_output}: {declared}" if declared else None
            case.result.shape_inference = problem or "ok"
    except Exception as exc:  # strict shape inference failed: blame every case of the batch
        for case in cases:
            case.result.shape_inference = f"shape inference failed: {str(exc).splitlines()[0]}"

    try:
        session = runtime_session(runtime, proto.SerializeToString())
    except Exception as exc:
        for case in cases:
            case.result.onnxruntime = f"{runtime} could not load the checks: {str(exc).splitlines()[0]}"
        return
    rng = np.random.default_rng(seed)
    per_case = [concrete_shapes(c.lowering.plan) for c in cases]
    for case, shapes in zip(cases, per_case):
        if not shapes:
            case.result.onnxruntime = "skipped: no input size small enough to test (indices beyond 4096)"
    active = [i for i, shapes in enumerate(per_case) if shapes]
    trials = max((len(per_case[i]) for i in active), default=0)
    if any(cases[i].runtime_fields for i in active):
        trials = max(trials, RUNTIME_TRIALS)
    last_feed: dict = {}  # case -> its last valid feed (every input must be fed on every run)
    for t in range(trials):
        feeds, expected, shapes_now, compared = {}, {}, {}, []
        for i in active:
            case = cases[i]
            shape = per_case[i][t % len(per_case[i])]
            feed = _draw(case, i, shape, rng)
            if feed is None:  # no valid runtime values for this shape: feed the last ones, compare nothing
                if i not in last_feed:
                    continue
                feeds.update(last_feed[i])
                continue
            feed, exp, values = feed
            last_feed[i] = feed
            feeds.update(feed)
            expected[i] = exp
            shapes_now[i] = shape
            compared.append(i)
            if shape not in case.result.tried_shapes:
                case.result.tried_shapes.append(shape)
            if values and len(case.result.tried_values) < RUNTIME_TRIALS:
                case.result.tried_values.append({"shape": list(shape), **values})
        fed = [i for i in active if f"x{i}" in feeds]
        try:
            outs = _run(session, proto, feeds, fed, runtime)
        except _RunFailed as exc:
            outs = exc.partial
        for i in compared:
            case = cases[i]
            if case.result.onnxruntime not in ("not run", "ok"):
                continue
            got = outs.get(i)
            if isinstance(got, Exception):
                case.result.onnxruntime = (f"input {shapes_now[i]}{_values_text(case, feeds, i)}: "
                                           f"{runtime} failed: {str(got).splitlines()[0]}")
                continue
            problem = _compare_arrays(np.asarray(got), expected[i], shapes_now[i])
            case.result.onnxruntime = (problem + _values_text(case, feeds, i)) if problem else "ok"
    for i in active:
        case = cases[i]
        if case.result.onnxruntime == "not run" and case.runtime_fields:
            case.result.onnxruntime = "skipped: the framework rejects every runtime index value tried"


#: onnxruntime runs of a batch holding runtime-index rewrites (fresh random values each run).
RUNTIME_TRIALS = 24


def _values_text(case: CheckCase, feeds: dict, i: int) -> str:
    if not case.runtime_fields:
        return ""
    return " with " + ", ".join(f"{f}={feeds[f'{f[0]}{i}'].tolist()}" for f in case.runtime_fields)


def _index_candidates(dim) -> list[int]:
    d = dim if isinstance(dim, int) else 3
    return [-d - 2, -d - 1, -d, -d + 1, -2, -1, 0, 1, 2, d - 1, d, d + 1, d + 3]


def _draw(case: CheckCase, i: int, shape: tuple, rng: np.random.Generator, tries: int = 30):
    """(feed, expected output, runtime values) for one run of a case, or None when the framework
    rejects every draw of runtime values (e.g. a shrink index on a size-0 dim)."""
    from dataclasses import replace
    spec = case.lowering.plan.spec
    x = random_input(shape, case.dtype, rng)
    fields = case.runtime_fields
    if not fields:
        try:
            return {f"x{i}": x}, apply_plan(make_plan(spec, shape), x), None
        except StridedSliceError as exc:  # not expected: sizes are chosen valid
            return {f"x{i}": x}, exc, None
    try:
        dims = {a.index: a.dim for a in make_plan(spec, shape).axes if a.index is not None}
    except StridedSliceError:
        return None
    for _ in range(tries):
        values = {}
        for f in fields:
            if f == "strides":
                values[f] = [int(rng.choice([-3, -2, -1, 1, 1, 2, 3])) for _ in range(spec.n)]
            else:
                values[f] = [int(rng.choice(_index_candidates(dims.get(k)))) for k in range(spec.n)]
        full = replace(spec, runtime_length=None, **values)
        try:
            exp = apply_plan(make_plan(full, shape), x)
        except StridedSliceError:
            case.result.rejected_values += 1
            continue
        feed = {f"x{i}": x}
        for f in fields:
            dtype = np.int32 if case.index_types.get(f) == "int32" else np.int64
            feed[f"{f[0]}{i}"] = np.array(values[f], dtype=dtype)
        return feed, exp, values
    return None


class _RunFailed(Exception):
    def __init__(self, partial):
        self.partial = partial


def _run(session, proto, feeds: dict, active: list[int], runtime: str = "onnxruntime") -> dict:
    """Outputs by case index.  When the batched run fails, each case is run on its own so
    the failure is attributed to the case(s) that cause it."""
    names = [f"y{i}" for i in active]
    try:
        return dict(zip(active, session.run(names, feeds)))
    except Exception:
        pass
    import onnx
    from .runtimes import make_session as runtime_session
    outs = {}
    for i in active:
        names = [k for k in feeds if k[1:] == str(i)]
        single = onnx.utils.Extractor(proto).extract_model(names, [f"y{i}"])
        single.ir_version = proto.ir_version
        try:
            outs[i] = runtime_session(runtime, single.SerializeToString()).run(None, {k: feeds[k] for k in names})[0]
        except Exception as exc:
            outs[i] = exc
    raise _RunFailed(outs)


def _compare_arrays(got: np.ndarray, exp, shape) -> str | None:
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
