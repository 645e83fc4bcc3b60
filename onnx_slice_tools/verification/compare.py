"""Whole-model equivalence on random inputs.

The *original* model runs in ``onnx.reference.ReferenceEvaluator`` with a
StridedSlice implementation for its flavour (our numpy reference, so the
frameworks' exact rules), the raw slice-update nodes tf2onnx leaves by the same
reference (semantics/update.py), and a ``Loop`` that stacks its scan outputs as the ONNX
spec says (onnx's own concatenates them); the *converted* model runs in
onnxruntime, every input fed through ``OrtValue`` with its element type
(bfloat16, float8, int4 ...).  Every graph output must agree under the one
float-comparison rule (:func:`.tolerance.agree`): shape and dtype exactly; values
bitwise, or -- only for floating outputs computed by float arithmetic (an op other
than data movement on their path), where two engines may round differently --
within the tolerance relative to the output's largest magnitude, which the result
then states with its figures.  The two models' inputs must line up (names, element
types, ranks); otherwise nothing can be compared and :class:`ModelError` says why.

Random inputs stay within one memory budget: symbolic dims get small sizes, and
when a StridedSlice rejects them (a shrink index beyond a small dim) only the dims
that feed that axis grow (traced by ONNX shape inference), never all of them.
numpy warnings of the reference evaluator are collected into the result, never
printed; an evaluator that crashes is a skip that says so, not a mismatch.
"""

from __future__ import annotations

import functools
import os
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..errors import ModelError, StridedSliceError
from ..errors import first_line as _line
from .checks import PASSED, failed, kind, skipped
from .quantized import output_steps
from ..semantics.plan import make_plan
from ..semantics.reference import apply_plan
from ..semantics.spec import MASK_NAMES, OPENVINO, TF, TFLITE, from_openvino, from_tf, from_tflite
from .tolerance import agree, check_rtol

#: Models whose weights exceed this are not run by the (pure numpy) reference evaluator.
DEFAULT_MAX_WEIGHT_BYTES = 256 * 2 ** 20
#: Bytes of random inputs one comparison may allocate (the same default as the per-rewrite checks).
DEFAULT_INPUT_BUDGET = 256 * 2 ** 20
#: Ops that move data without arithmetic: outputs reached only through them are compared bitwise.
MOVEMENT_OPS = frozenset({
    "Slice", "Gather", "GatherElements", "GatherND", "Squeeze", "Unsqueeze", "Reshape", "Flatten", "Identity",
    "Transpose", "Concat", "Split", "Expand", "Tile", "Pad", "Shape", "Size", "Cast", "CastLike",
    "DepthToSpace", "SpaceToDepth", "StridedSlice", "Constant", "ConstantOfShape", "Where", "Equal",
    "Less", "Greater", "Not", "And", "Or", "Neg", "Abs", "Min", "Max", "ReverseSequence", "Compress",
    "Range", "OneHot", "NonZero", "TopK", "ArgMax", "ArgMin", "Trilu", "ScatterND", "ScatterElements",
})
_INDEX_VALUES = (-3, -2, -1, 0, 1, 2, 3)


@dataclass
class ModelComparison:
    status: str                                   # "ok" | "mismatch" | "skipped: ..." | "failed: ..."
    outputs: dict = field(default_factory=dict)   # output name -> "ok (bitwise)" | "ok (within tolerance: ...)" | problem
    tried: list = field(default_factory=list)     # the input shapes of each trial, {name: shape}
    warnings: list = field(default_factory=list)  # numpy warnings of the reference evaluator (distinct)

    @property
    def ok(self) -> bool:
        return kind(self.status) != "failed"  # ("ok", or skipped; "mismatch" reads as failed)

    @property
    def verdict(self) -> str:
        """The status in the checks' vocabulary: "passed" | "failed: <why>" | "skipped: <reason>"."""
        if self.status == "ok":
            return PASSED
        if self.status == "mismatch":
            bad = next(((k, v) for k, v in self.outputs.items() if not v.startswith("ok")), None)
            return failed(f"output {bad[0]!r}: {bad[1]}" if bad else "mismatch")
        return self.status

    def to_json(self) -> dict:
        out = {"status": self.status, "outputs": self.outputs,
               "tried_input_shapes": [{k: list(v) for k, v in t.items()} for t in self.tried]}
        if self.warnings:
            out["reference_warnings"] = self.warnings
        return out


class InputShapesError(ModelError):
    """The input shapes given for a comparison do not fit the model (unknown input, rank, a
    fixed dim)."""


# --------------------------------------------------------------------------- StridedSlice for the reference

class NeedsLarger(StridedSliceError):
    """A StridedSlice rejected its input because a dim is too small for a shrink index:
    ``needs`` maps the axes of input ``name`` to the smallest size they accept."""

    def __init__(self, exc: StridedSliceError, name: str, needs: dict):
        super().__init__(str(exc))
        self.name, self.needs = name, needs


def _shrink_needs(plan_key, rank: int) -> dict:
    """Smallest size of each axis holding a shrink index (empty when none is known)."""
    fl, attrs, begin, end, strides, _ = plan_key
    try:
        plan = _cached_plan((fl, attrs, begin, end, strides, (None,) * rank))
    except StridedSliceError:
        return {}
    return {a.axis: (a.begin + 1 if a.begin >= 0 else -a.begin) for a in plan.axes
            if a.kind == "index" and a.begin is not None and a.axis >= 0}


def strided_slice_ops(domains, flavor: str | None = None) -> list:
    """``OpRun`` classes computing StridedSlice in each of ``domains`` (flavour from the
    attribute types unless given)."""
    from onnx.reference.op_run import OpRun

    def _run(self, x, begin, end, strides=None, **_):
        attrs = {m: getattr(self, m, None) for m in MASK_NAMES}
        offset = getattr(self, "offset", None)
        fl = flavor or (TFLITE if offset is not None else
                        OPENVINO if any(isinstance(v, (list, tuple, str, bytes)) for v in attrs.values())
                        else TF)
        if fl == TFLITE:
            attrs["offset"] = offset or 0
        x = np.asarray(x)
        key = (fl, tuple((m, tuple(v) if isinstance(v, list) else v) for m, v in attrs.items()),
               tuple(np.asarray(begin).tolist()), tuple(np.asarray(end).tolist()),
               None if strides is None else tuple(np.asarray(strides).tolist()), x.shape)
        try:
            plan = _cached_plan(key)
        except StridedSliceError as exc:
            needs = {k: v for k, v in _shrink_needs(key, x.ndim).items() if k < x.ndim and x.shape[k] < v}
            if needs:
                raise NeedsLarger(exc, self.onnx_node.input[0], needs) from None
            raise
        return (apply_plan(plan, x),)

    classes = []
    for domain in sorted(set(domains)):
        cls = type("StridedSlice", (OpRun,), {"op_domain": domain, "_run": _run})
        classes.append(cls)
    return classes


def slice_update_ops(op_types) -> list:
    """``OpRun`` classes computing the raw slice-update nodes tf2onnx leaves in the default domain
    (rewrite/updates.py ``SEAMS``) that ``op_types`` names, by the numpy reference of
    semantics/update.py: an ``.onnx`` input holding them runs in the reference evaluator as its
    framework would run it (errors included), so ``verify ORIGINAL CONVERTED`` compares their rewrite."""
    from onnx.reference.op_run import OpRun

    from ..semantics import update as su

    def spec(attrs, begin, end, strides):
        return from_tf(*(np.asarray(v).reshape(-1).tolist() for v in (begin, end, strides)),
                       **{m: int(attrs.get(m) or 0) for m in MASK_NAMES})

    runs = {
        "XlaDynamicUpdateSlice": lambda attrs, x, u, i: su.dynamic_update_slice(x, u, i),
        "TFL_DYNAMIC_UPDATE_SLICE": lambda attrs, x, u, i: su.dynamic_update_slice(x, u, i),
        "XlaDynamicSlice": lambda attrs, x, s, n: su.dynamic_slice(x, s, n),
        "TensorStridedSliceUpdate": lambda attrs, x, b, e, s, v: su.strided_slice_update(x, spec(attrs, b, e, s), v),
        "StridedSliceGrad": lambda attrs, sh, b, e, s, dy: su.strided_slice_grad(sh, spec(attrs, b, e, s), dy),
        "TFL_GELU": lambda attrs, x: su.gelu(x, bool(attrs.get("approximate") or 0)),
        "Erfc": lambda attrs, x: su.erfc(x),
    }
    classes = []
    for op in sorted(set(op_types) & set(runs)):
        def _run(self, *inputs, _op=op, **attrs):
            return (runs[_op](attrs, *inputs),)
        classes.append(type(op, (OpRun,), {"op_domain": "", "_run": _run}))
    return classes


@functools.lru_cache(maxsize=None)
def stacking_loop():
    """onnx's reference ``Loop`` with its scan outputs stacked along a new first axis, as the
    ONNX spec says (onnx 1.23 concatenates them: ``np.vstack``)."""
    from onnx.reference.ops.op_loop import Loop

    class StackingLoop(Loop):
        op_domain = ""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            run_body = self._run_body  # set per instance by OpRun for the ``body`` attribute
            self._scans: list = []

            def recording(*a, **kw):
                outs = run_body(*a, **kw)
                if self.K:
                    self._scans.append([np.asarray(o) for o in outs[len(outs) - self.K:]])
                return outs
            self._run_body = recording

        def _run(self, *args, **kwargs):
            self._scans = []
            res = list(super()._run(*args, **kwargs))
            if self.K and self._scans:
                for k in range(self.K):
                    res[self.N + k] = np.stack([it[k] for it in self._scans])
            self._scans = []
            return tuple(res)

    StackingLoop.__name__ = "Loop"
    return StackingLoop


@functools.lru_cache(maxsize=4096)
def _cached_plan(key):
    """The plan of one StridedSlice call (models repeat the same slices many times)."""
    fl, attrs, begin, end, strides, shape = key
    attrs = dict(attrs)
    if fl == TF:
        spec = from_tf(begin, end, strides, **{m: (v or 0) for m, v in attrs.items()})
    elif fl == TFLITE:
        spec = from_tflite(begin, end, strides, **{m: (v or 0) for m, v in attrs.items()})
    else:
        spec = from_openvino(begin, end, strides, **{m: (() if v is None else v) for m, v in attrs.items()})
    return make_plan(spec, shape)


def _strided_slice_domains(proto) -> set[str]:
    from ..graphs.walk import proto_nodes
    return {n.domain for n, _ in proto_nodes(proto) if n.op_type == "StridedSlice"}


def _default_domain_ops(proto) -> set[str]:
    from ..graphs.walk import proto_nodes
    return {n.op_type for n, _ in proto_nodes(proto) if n.domain in ("", "ai.onnx")}


def _reference_evaluator(original, flavor):
    """A ReferenceEvaluator of ``original`` whose StridedSlice nodes -- in model-local
    functions too, which ``new_ops`` alone does not reach -- run our reference, and whose
    Loops stack their scan outputs."""
    from onnx.reference import ReferenceEvaluator
    ops = strided_slice_ops(_strided_slice_domains(original), flavor) + [stacking_loop()] + \
        slice_update_ops(_default_domain_ops(original))
    if not original.functions:
        return ReferenceEvaluator(original, new_ops=ops)
    functions: list = []
    for f in original.functions:  # a function may call the ones before it
        functions.append(ReferenceEvaluator(f, new_ops=ops, functions=list(functions)))
    return ReferenceEvaluator(original.graph, opsets={o.domain: o.version for o in original.opset_import},
                              functions=functions, new_ops=ops)


# --------------------------------------------------------------------------- inputs

def weight_bytes(proto, base_dir: str | None = None) -> int:
    """Bytes of initializer data, external data included (read from the tensor records)."""
    total = 0
    for t in proto.graph.initializer:
        if t.data_location == t.EXTERNAL:
            info = {e.key: e.value for e in t.external_data}
            if "length" in info:
                total += int(info["length"])
            elif base_dir and "location" in info:
                try:
                    total += os.path.getsize(os.path.join(base_dir, info["location"]))
                except OSError:
                    pass
        else:
            total += t.ByteSize()
    return total


def value_shapes(proto) -> dict:
    """Value name -> dims (int, dim name or None) from ONNX shape inference on a copy of the
    model without its large weights (they become typed inputs); {} when inference fails."""
    import onnx
    from onnx import helper

    from ..graphs.shape_inference import infer
    sk = onnx.ModelProto()
    sk.ir_version, sk.producer_name = proto.ir_version, proto.producer_name
    sk.opset_import.extend(proto.opset_import)
    sk.functions.extend(proto.functions)
    g = sk.graph
    g.name = proto.graph.name
    g.node.extend(proto.graph.node)
    g.input.extend(proto.graph.input)
    g.output.extend(proto.graph.output)
    g.value_info.extend(proto.graph.value_info)
    inputs = {i.name for i in proto.graph.input}
    for t in proto.graph.initializer:
        if t.data_location != t.EXTERNAL and t.ByteSize() <= 4096:
            g.initializer.append(t)
        elif t.name not in inputs:
            g.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    try:
        inferred = infer(sk)
    except Exception:
        return {}
    out = {}
    for vi in list(inferred.graph.input) + list(inferred.graph.value_info) + list(inferred.graph.output):
        tt = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and tt.HasField("shape"):
            out[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                                 for d in tt.shape.dim)
    return out


#: Default sizes of symbolic dims, one per trial (every dim of one trial the same size unless
#: grown: exporters name one batch dim differently on each input, ``unk__0`` and ``unk__1``).
_DEFAULT_SIZES = (3, 2, 5, 4)


class Sizes:
    """Sizes for symbolic dims: a default per trial, and dims grown by name after a rejection."""

    def __init__(self, given: dict | None = None):
        self.grown: dict = {}       # dim name -> size
        self.floor = 0              # every symbolic dim at least this (when no name was traced)
        self.given = dict(given or {})  # input name -> the user's concrete shape (never grown)

    def size(self, key: str, trial: int) -> int:
        return max(self.grown.get(key, _DEFAULT_SIZES[trial % len(_DEFAULT_SIZES)]), self.floor)

    def grow(self, exc: NeedsLarger, shapes: dict, input_dims: set) -> bool:
        """Grow the dims behind ``exc`` (names of graph-input dims in ``input_dims``); False
        when there is nothing left to grow."""
        dims = shapes.get(exc.name)
        changed = False
        for axis, need in exc.needs.items():
            name = dims[axis] if dims is not None and axis < len(dims) else None
            if isinstance(name, str) and name in input_dims:
                if self.grown.get(name, 0) < need:
                    self.grown[name] = need
                    changed = True
            elif self.floor < need:  # not traced to a graph input's dim: every symbolic dim
                self.floor = need
                changed = True
        return changed


def input_shapes(proto, sizes: Sizes, trial: int) -> dict:
    """Concrete shapes of every graph input that is not an initializer."""
    inits = {t.name for t in proto.graph.initializer}
    shapes = {}
    for vi in proto.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type"):
            raise ValueError(f"input {vi.name!r} is not a tensor")
        if vi.name in sizes.given:
            shapes[vi.name] = tuple(sizes.given[vi.name])
            continue
        if not tt.HasField("shape"):
            raise ValueError(f"input {vi.name!r} has an unknown rank (give its shape: --input-shapes)")
        shapes[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else sizes.size(d.dim_param or f"{vi.name}:{k}", trial)
                                for k, d in enumerate(tt.shape.dim))
    return shapes


def _elem_types(values) -> dict:
    return {vi.name: vi.type.tensor_type.elem_type for vi in values if vi.type.HasField("tensor_type")}


def feed_bytes(proto, shapes: dict) -> int:
    from .lowerings import np_dtype
    elem = _elem_types(proto.graph.input)
    total = 0
    for name, shape in shapes.items():
        dtype = np_dtype(elem[name])
        total += int(np.prod(shape)) * (64 if dtype.kind == "O" else dtype.itemsize)
    return total


def random_feeds(proto, rng: np.random.Generator, shapes: dict, ranges: dict | None = None) -> dict:
    """Random values of the given shapes: integers small (they are often indices) or, for an
    input that reaches a Gather's indices, inside its table (``ranges``: input_ranges.
    index_input_ranges of ``proto``, computed when not given), floats standard normals, strings
    distinct; every ONNX element type (``ml_dtypes`` types too)."""
    from .input_ranges import index_input_ranges
    from .inputs import random_values
    from .lowerings import np_dtype
    elem = _elem_types(proto.graph.input)
    ranges = index_input_ranges(proto) if ranges is None else ranges
    feeds = {}
    for name, shape in shapes.items():
        dtype = np_dtype(elem[name])
        low = 0 if dtype.kind == "u" or dtype.name.startswith("uint") else _INDEX_VALUES[0]
        high = 1 if dtype.name.endswith("2") else _INDEX_VALUES[-1]
        feeds[name] = random_values(rng, shape, dtype, ints=ranges.get(name, (low, high)))
    return feeds


# --------------------------------------------------------------------------- the comparison

class _Warnings:
    """Collects the warnings of a block (numpy's RuntimeWarnings: log of 0, mean of an
    empty slice ...) instead of printing them."""

    def __init__(self, into: list):
        self.into = into

    def __enter__(self):
        self.ctx = warnings.catch_warnings(record=True)
        self.caught = self.ctx.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc):
        self.ctx.__exit__(*exc)
        for w in self.caught:
            text = f"{w.category.__name__}: {w.message}"
            if text not in self.into and len(self.into) < 20:
                self.into.append(text)
        return False


def graph_inputs(proto) -> list:
    """The graph inputs that are not initializers (what a caller feeds)."""
    inits = {t.name for t in proto.graph.initializer}
    return [vi for vi in proto.graph.input if vi.name not in inits]


def _rank(vi) -> int | None:
    tt = vi.type.tensor_type
    return len(tt.shape.dim) if vi.type.HasField("tensor_type") and tt.HasField("shape") else None


def inputs_mismatch(original, converted) -> str | None:
    """Why the two models cannot be fed the same inputs (names, element types, ranks), or None."""
    from onnx import TensorProto
    a = {vi.name: vi for vi in graph_inputs(original)}
    b = {vi.name: vi for vi in graph_inputs(converted)}
    if set(a) != set(b):
        only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
        return "inputs do not line up: " + "; ".join(
            part for part in (f"only the original has {only_a}" if only_a else "",
                              f"only the converted model has {only_b}" if only_b else "") if part)
    for name, va in a.items():
        vb = b[name]
        ta, tb = va.type.tensor_type.elem_type, vb.type.tensor_type.elem_type
        if ta != tb:
            return (f"input {name!r}: element type {TensorProto.DataType.Name(ta)} in the original, "
                    f"{TensorProto.DataType.Name(tb)} in the converted model")
        ra, rb = _rank(va), _rank(vb)
        if ra is not None and rb is not None and ra != rb:
            return f"input {name!r}: rank {ra} in the original, {rb} in the converted model"
    return None


def checked_input_shapes(proto, shapes: dict | None) -> dict:
    """``shapes`` ({input name: concrete dims}) checked against ``proto``'s inputs: a known
    input, its rank, its fixed dims; ValueError naming what is wrong."""
    inputs = {vi.name: vi for vi in graph_inputs(proto)}
    out = {}
    for name, dims in (shapes or {}).items():
        if name not in inputs:
            raise ValueError(f"no input {name!r} (inputs: {', '.join(inputs) or 'none'})")
        dims = tuple(dims)
        if any(not isinstance(d, int) or d < 0 for d in dims):
            raise ValueError(f"input {name!r}: sizes must be integers >= 0, got {list(dims)}")
        rank = _rank(inputs[name])
        if rank is not None:
            if rank != len(dims):
                raise ValueError(f"input {name!r} has rank {rank}, got {len(dims)} sizes")
            for k, (d, decl) in enumerate(zip(dims, inputs[name].type.tensor_type.shape.dim)):
                if decl.HasField("dim_value") and decl.dim_value != d:
                    raise ValueError(f"input {name!r}: dim {k} is fixed at {decl.dim_value}, got {d}")
        out[name] = dims
    return out


def _load(model, label: str):
    """A ModelProto as is; a path loaded (validated, external data read in)."""
    if isinstance(model, (str, os.PathLike)):
        from ..io.files import load_model_proto
        return load_model_proto(model), str(model)
    return model, label


def compare_models(original, converted, *, session=None, trials: int = 3, seed: int = 0,
                   flavor: str | None = None, max_weight_bytes: int = DEFAULT_MAX_WEIGHT_BYTES,
                   base_dir: str | None = None, memory_budget: int = DEFAULT_INPUT_BUDGET,
                   rtol: float | None = None, input_shapes: dict | None = None) -> ModelComparison:
    """Run ``original`` (with its StridedSlice nodes) in the reference evaluator and ``converted``
    in onnxruntime on the same random inputs; compare every output with :func:`.tolerance.agree`.

    ``original``, ``converted``: ModelProtos or model file paths.  ``session``: an onnxruntime
    session of ``converted``, or a callable returning one (or None when it cannot be built),
    asked for only after the reference runs.  ``memory_budget``: bytes of random inputs of one
    trial.  ``rtol``: the float tolerance (default: per dtype, ``tolerance.default_rtol``).
    ``input_shapes``: {input name: concrete dims} used instead of random sizes for symbolic dims.

    Raises :class:`ModelError` when the models' inputs do not line up (names, element types,
    ranks) or ``input_shapes``/``rtol`` do not fit: nothing could be compared."""
    from .lowerings import make_session
    if isinstance(original, (str, os.PathLike)) and base_dir is None:
        base_dir = os.path.dirname(os.path.abspath(original))
    original, orig_label = _load(original, "the original")
    converted, conv_label = _load(converted, "the converted model")
    try:
        rtol = None if rtol is None else check_rtol(rtol)
    except ValueError as exc:
        raise ModelError(str(exc)) from None
    problem = inputs_mismatch(original, converted)
    if problem:
        raise ModelError(f"cannot be compared with {orig_label}: {problem}",
                         path=conv_label if conv_label != "the converted model" else None)
    try:
        given = checked_input_shapes(original, input_shapes)
    except ValueError as exc:
        raise InputShapesError(str(exc), path=orig_label if orig_label != "the original" else None) from None
    if weight_bytes(original, base_dir) > max_weight_bytes or weight_bytes(converted, base_dir) > max_weight_bytes:
        return ModelComparison(skipped(f"weights above {max_weight_bytes // 2 ** 20} MiB are not run "
                                       "by the reference evaluator"))
    out_names = [o.name for o in original.graph.output]
    conv_names = [o.name for o in converted.graph.output]
    if out_names != conv_names:
        return ModelComparison(failed(f"outputs differ: {out_names} vs {conv_names}"))
    caught: list = []
    try:
        with _Warnings(caught):
            ref = _reference_evaluator(original, flavor)
    except Exception as exc:
        return ModelComparison(skipped(f"onnx's reference evaluator cannot run the original: {_line(exc)}"),
                               warnings=caught)
    rng = np.random.default_rng(seed)
    runs, problem = _reference_runs(original, ref, rng, trials, memory_budget, caught, given)
    if not runs:
        return ModelComparison(skipped(problem), warnings=caught)

    if callable(session):
        session = session()
    elif session is None:
        try:
            session = make_session(converted.SerializeToString())
        except Exception as exc:
            session = None
            problem = _line(exc)
    if session is None:
        if problem and ("NOT_IMPLEMENTED" in problem or "is not currently registered" in problem):
            return ModelComparison(skipped(f"onnxruntime has no kernel for the converted model: {problem}"),
                                   warnings=caught)
        return ModelComparison(failed("onnxruntime cannot load the converted model"
                                      + (f": {problem}" if problem else "")), warnings=caught)
    result = ModelComparison("ok", {name: "ok (bitwise)" for name in out_names}, warnings=caught)
    input_names = [i.name for i in session.get_inputs()]
    elem = _elem_types(converted.graph.input)
    out_types = _elem_types(converted.graph.output)
    out_elem = [out_types.get(n, 0) for n in out_names]
    arithmetic = float_arithmetic_outputs(converted)
    steps = output_steps(converted)  # quantized outputs: in steps (no framework to calibrate: the floor)
    for feeds, expected in runs:
        result.tried.append({k: tuple(v.shape) for k, v in feeds.items()})
        try:
            got = _ort_run(session, {k: feeds[k] for k in input_names}, elem, out_names, out_elem)
        except Exception as exc:
            result.status = "mismatch"
            for name in out_names:
                result.outputs[name] = f"onnxruntime failed on {_shapes(feeds)}: {_line(exc)}"
            return result
        for name, g, e in zip(out_names, got, expected):
            if not result.outputs[name].startswith("ok"):
                continue  # the first mismatch of an output is the one reported
            verdict = agree(np.asarray(e), np.asarray(g), exact=name not in arithmetic, rtol=rtol,
                            steps=steps.get(name))
            if not verdict.ok:
                result.outputs[name] = f"inputs {_shapes(feeds)}: {verdict.detail} (reference vs onnxruntime)"
                result.status = "mismatch"
            elif not verdict.bitwise:
                what = "quantized arithmetic" if name in steps else "float arithmetic"
                result.outputs[name] = f"ok ({verdict.detail}: {what} in two engines)"
    return result


def _reference_runs(original, ref, rng, trials: int, budget: int, caught: list, given: dict | None = None):
    """(feeds, expected outputs) of up to ``trials`` random input sets the original accepts,
    and the last problem.  A StridedSlice that rejects a dim as too small grows only that dim
    (never the shapes in ``given``, the user's)."""
    shapes_of: dict | None = None
    input_dims: set = set()
    sizes = Sizes(given)
    runs: list = []
    problem = None
    ranges: dict | None = None  # input -> the table its values index (once, when first drawn)
    failures = attempts = 0
    trial = 0
    while len(runs) < trials and failures < 4 + 2 * trials and attempts < 64:
        attempts += 1
        try:
            shapes = input_shapes(original, sizes, trial)
        except ValueError as exc:
            return runs, str(exc)
        need = feed_bytes(original, shapes)
        if need > budget:
            problem = (f"random inputs need {need / 2 ** 20:.0f} MiB, budget {budget / 2 ** 20:.0f} MiB"
                       + (f" (after: {problem})" if problem else ""))
            return runs, problem
        if ranges is None:
            from .input_ranges import index_input_ranges
            ranges = index_input_ranges(original)
        feeds = random_feeds(original, rng, shapes, ranges)
        try:
            with _Warnings(caught):
                runs.append((feeds, ref.run(None, feeds)))
            trial += 1
            continue
        except NeedsLarger as exc:
            problem = f"the original rejects random inputs: {_line(exc)}"
            if shapes_of is None:
                shapes_of = value_shapes(original)
                input_dims = {d.dim_param for vi in original.graph.input
                              for d in vi.type.tensor_type.shape.dim if d.dim_param}
            if not sizes.given and sizes.grow(exc, shapes_of, input_dims):
                continue  # not a failure: the dims it points at are larger now
            trial += 1
        except StridedSliceError as exc:
            problem = f"the original rejects random inputs: {_line(exc)}"
            trial += 1
        except Exception as exc:  # another op rejects these sizes, or the evaluator crashes
            problem = f"onnx's reference evaluator cannot run the original: {type(exc).__name__}: {_line(exc)}"
            trial += 1
        failures += 1
    return runs, problem


def _ort_run(session, feeds: dict, elem: dict, names: list, out_elem: list) -> list:
    """onnxruntime outputs as numpy (``ml_dtypes`` where numpy has no type); inputs through
    ``OrtValue`` with their element types unless a string input makes that impossible."""
    from .lowerings import STRING, fetch, ort_value
    if any(elem.get(k) == STRING for k in feeds):
        return session.run(names, feeds)
    values = {k: ort_value(v, elem[k]) for k, v in feeds.items()}
    return [fetch(v, t) for v, t in zip(session.run_with_ort_values(names, values), out_elem)]


def float_arithmetic_outputs(proto) -> set[str]:
    """Graph outputs with an op other than data movement (``MOVEMENT_OPS``) on their path
    (a node with subgraphs or a function call counts as arithmetic)."""
    producer = {}
    for n in proto.graph.node:
        for o in n.output:
            producer[o] = n
    memo: dict = {}

    def computes(name: str) -> bool:
        if name in memo:
            return memo[name]
        memo[name] = False
        n = producer.get(name)
        if n is None:
            return False
        custom = n.domain not in ("", "ai.onnx") and n.op_type != "StridedSlice"
        own = n.op_type not in MOVEMENT_OPS or custom or any(
            a.type in (a.GRAPH, a.GRAPHS) for a in n.attribute)
        memo[name] = own or any(computes(i) for i in n.input if i)
        return memo[name]

    return {o.name for o in proto.graph.output if computes(o.name)}


def _shapes(feeds: dict) -> str:
    return ", ".join(f"{k}{list(v.shape)}" for k, v in feeds.items())
