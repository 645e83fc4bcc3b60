"""Lowering: a canonical plan -> minimal ONNX ``Slice`` / ``Squeeze`` / ``Unsqueeze``.

:func:`lower` is pure: it returns abstract ops (:class:`Op`) with constant
arguments.  :func:`emit` turns them into onnx-ir nodes for a target opset
(axes as attributes before opset 13, as inputs from 13).

Rules:

* only axes that change go into ``Slice``; no identity ops are emitted;
* known dims: canonical start/end (exact for that size);
* unknown dims: the raw begin/end with masks replaced by sentinels that hold for
  every size -- never an end of ``INT32_MAX``/``INT64_MAX`` with a negative step
  (onnxruntime reverses the whole axis there, issue #11107), ``INT64_MIN`` instead;
* TensorFlow's reverse-begin clamping ("before element 0") on an unknown dim is
  reproduced by first cutting the axis to ``[0, begin + 1)``;
* a shrink (``x[0]``) next to a new axis (``None``) with no kept axis between
  them cancel: the sliced size-1 axis simply stays;
* when both ``Squeeze`` and ``Unsqueeze`` are needed and the output shape is
  static (no zero dims), a single ``Reshape`` replaces them -- only on inputs of at
  most ``RESHAPE_MAX_ELEMENTS`` known elements: a static ``Reshape`` names every dim, so
  its check runs at the declared size, while ``Squeeze``/``Unsqueeze`` are checked with
  the axes they pass through at small sizes (verification/lowerings.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, TypeGuard

from ..semantics.plan import ALL, INDEX, NEW, REST, AxisPlan, Dim, Plan
from ..semantics.spec import TF, TFLITE, made_at_once
from .targets import get_target

if TYPE_CHECKING:
    import onnx_ir as ir

    from .dynamic import Prelude

INT64_MAX = 2 ** 63 - 1
INT64_MIN = -(2 ** 63)
INT32_MAX = 2 ** 31 - 1

SLICE, SQUEEZE, UNSQUEEZE, RESHAPE, IDENTITY = "Slice", "Squeeze", "Unsqueeze", "Reshape", "Identity"
#: Largest input (product of its known dims) given one ``Reshape`` instead of Squeeze + Unsqueeze.
RESHAPE_MAX_ELEMENTS = 2 ** 16


@dataclass(frozen=True)
class Op:
    """One emitted op with constant arguments."""

    op_type: str
    axes: tuple[int, ...] = ()
    starts: tuple[int, ...] = ()
    ends: tuple[int, ...] = ()
    steps: tuple[int, ...] = ()
    shape: tuple[int, ...] = ()

    def describe(self) -> str:
        if self.op_type == SLICE:
            return (f"Slice(starts={list(self.starts)}, ends={list(self.ends)}, axes={list(self.axes)}, "
                    f"steps={list(self.steps)})")
        if self.op_type in (SQUEEZE, UNSQUEEZE):
            return f"{self.op_type}(axes={list(self.axes)})"
        if self.op_type == RESHAPE:
            return f"Reshape(shape={list(self.shape)})"
        return self.op_type


@dataclass(frozen=True)
class Lowering:
    plan: Plan
    ops: tuple  # Op (constant arguments) or, for runtime indices, lower_dynamic.DynOp
    notes: tuple[str, ...] = field(default=())
    index_dtype: str = "int64"  # of the Slice/Gather index constants (runtime indices only)
    target: str = "onnxruntime"  # lowering/targets.py: the constraints the ops respect

    @property
    def dynamic(self) -> bool:
        """True when ``ops`` is a small graph (lower_dynamic.DynOp): runtime indices or a target's
        constraints."""
        return not self.plan.spec.is_static or self.target != "onnxruntime"

    @property
    def is_identity(self) -> bool:
        for op in self.ops:
            if op.op_type != IDENTITY:
                return False
        return True

    @property
    def node_count(self) -> int:
        """Nodes this lowering adds (an identity counts 0: it is a rewiring)."""
        return sum(op.op_type != IDENTITY for op in self.ops)


def _fix_end_for_reverse(end: int) -> int:
    # onnxruntime treats INT32_MAX / INT64_MAX as "to the front" with a negative step; any end at
    # or past the last element means the same, so use a value onnxruntime clamps correctly.
    return INT64_MAX - 1 if end >= INT32_MAX else end


def _known(a: AxisPlan) -> tuple[int, int]:
    """(start, size) of an axis whose dim and values are known: the plan computed both."""
    if a.start is None or not isinstance(a.size, int):
        raise ValueError(f"axis {a.axis}: the plan has no canonical start and size")
    return a.start, a.size


def _slice_args(a: AxisPlan, flavor: str, clamp_below: bool = False) -> tuple[tuple | None, tuple | None,
                                                                             str | None]:
    """(pre-cut args or None, main args or None, note) for one axis of a static spec;
    args = (axis, start, end, step).  ``clamp_below`` (TFLite): a shrink index below ``-dim``
    takes element 0, as LiteRT does (TensorFlow raises)."""
    begin, end, s = a.begin, a.end, a.stride
    if begin is None or end is None or s is None:
        raise ValueError(f"axis {a.axis}: begin, end or strides is given at run time (lower_dynamic's case)")
    if a.kind == INDEX:
        if isinstance(a.dim, int):
            if a.dim == 1:
                return None, None, None  # the only element: nothing to slice
            start = _known(a)[0]
            return None, (a.axis, start, start + 1, 1), None
        if clamp_below and begin <= -2:
            # [begin:] starts at max(begin + dim, 0), as LiteRT's clamped index; then its first element
            return (a.axis, begin, INT64_MAX, 1), (a.axis, 0, 1, 1), None
        # out of range only shows at run time: Slice is then empty and Squeeze fails
        return None, (a.axis, begin, INT64_MAX if begin == -1 or begin >= INT64_MAX else begin + 1, 1), None
    if a.is_identity:
        return None, None, None
    if isinstance(a.dim, int):
        start, size = _known(a)
        if size == 0:
            return None, (a.axis, 0, 0, 1), None
        stop = start + size * s
        if s < 0 and stop < 0:
            stop = INT64_MIN
        return None, (a.axis, start, stop, s), None
    # unknown dim: arguments that are right for every size
    start = (0 if s > 0 else -1) if a.begin_masked else begin
    if a.end_masked:
        stop = INT64_MAX if s > 0 else INT64_MIN
    else:
        stop = end if s > 0 else _fix_end_for_reverse(end)
    if flavor == TF and s < 0 and not a.begin_masked and begin <= -2 and (a.end_masked or end < 0):
        # TF clamps begin + dim < 0 to "before element 0" (empty); ONNX clamps it to 0.
        if not a.end_masked and end >= begin:
            return None, (a.axis, 0, 0, 1), None  # empty for every size
        new_end = INT64_MIN if a.end_masked else end - begin - 1
        note = (f"axis {a.axis}: TensorFlow's reverse begin {begin} on a dim of unknown size: "
                f"cut to [0, {begin + 1}) first")
        return (a.axis, 0, begin + 1, 1), (a.axis, -1, new_end, s), note
    return None, (a.axis, start, stop, s), None


#: id(AxisPlan) -> (that axis plan, flavour, clamp_below, its _slice_args): plans share their axis
#: plans (semantics/plan.py memoizes them by their numbers), so a model of many specs of one
#: structure works out each axis's arguments once.  Bounded: cleared when full.
_AXIS_ARGS: dict[int, tuple] = {}
_AXIS_ARGS_MAX = 1 << 13


def _axis_args(a: AxisPlan, flavor: str, clamp_below: bool) -> tuple[tuple | None, tuple | None, str | None]:
    """:func:`_slice_args`, memoized by the axis plan's identity (a pure function of a frozen
    object; the object is kept with its result, so its id stays its own).  Errors are not kept."""
    hit = _AXIS_ARGS.get(id(a))
    if hit is not None and hit[0] is a and hit[1] == flavor and hit[2] == clamp_below:
        return hit[3]
    made = _slice_args(a, flavor, clamp_below)
    if len(_AXIS_ARGS) >= _AXIS_ARGS_MAX:
        _AXIS_ARGS.clear()
    _AXIS_ARGS[id(a)] = (a, flavor, clamp_below, made)
    return made


def _axis_order(args: tuple) -> tuple[bool, int]:
    """Slice arguments in axis order: known axes first, then those counted from the end."""
    return args[0] < 0, args[0]


def _slice_op(args: list[tuple]) -> Op | None:
    """One Slice of the (axis, start, end, step) of every axis it cuts."""
    if not args:
        return None
    if len(args) > 1:
        order = [_axis_order(a) for a in args]
        if order != sorted(order):
            args = sorted(args, key=_axis_order)  # (a plan lists its axes in this order already)
    axes, starts, ends, steps = zip(*args)
    return made_at_once(Op, op_type=SLICE, axes=axes, starts=starts, ends=ends, steps=steps, shape=())


def _layout(plan: Plan) -> tuple[list[int], list[int]]:
    """(Squeeze axes on the input, Unsqueeze positions on the output) after pairing
    shrinks with new axes that sit next to each other."""
    spec = plan.spec
    if not spec.shrink_axis_mask and not spec.new_axis_mask:
        return [], []  # (no index is a shrink or a new axis)
    if not any(a.kind == INDEX for a in plan.axes) and not any(o.kind == NEW for o in plan.outputs):
        return [], []  # (squeezes come from shrinks only, unsqueezes from new axes only)
    n = spec.n
    ellipsis_at = next((i for i in range(n) if spec.bit("ellipsis_mask", i)), n)
    items: list[tuple[int | None, int, str, AxisPlan | None]] = []  # (position in the spec, tie-break, kind, axis)
    for k, a in enumerate(plan.axes):
        items.append((ellipsis_at if a.kind == ALL else a.index, k, a.kind, a))
    for o in plan.outputs:
        if o.kind == NEW:
            items.append((o.index, 0, NEW, None))
        elif o.kind == REST:
            items.append((ellipsis_at, -1, REST, None))
    items.sort(key=lambda t: (t[0], t[1]))

    layout: list[str] = []  # "keep" | "new" | "rest"
    squeeze: list[int] = []
    run_shrinks: list[AxisPlan] = []
    run_news = 0

    def flush() -> None:
        nonlocal run_shrinks, run_news
        pairable = [a for a in run_shrinks if isinstance(a.dim, int)]
        pairs = min(len(pairable), run_news)
        kept = set(id(a) for a in pairable[:pairs])
        for a in run_shrinks:
            if id(a) not in kept:
                squeeze.append(a.axis)
        layout.extend(["keep"] * pairs + ["new"] * (run_news - pairs))
        run_shrinks, run_news = [], 0

    for _, _, kind, axis in items:
        if axis is not None and axis.kind == INDEX:
            run_shrinks.append(axis)
        elif kind == NEW:
            run_news += 1
        else:
            flush()
            layout.append("rest" if kind == REST else "keep")
    flush()
    rest = layout.index("rest") if "rest" in layout else None
    unsqueeze = [j if rest is None or j < rest else j - len(layout)
                 for j, what in enumerate(layout) if what == "new"]
    return sorted(squeeze, key=lambda ax: (ax < 0, ax)), unsqueeze


def _positive_dims(shape: tuple[Dim, ...] | None) -> TypeGuard[tuple[int, ...]]:
    """True when every dim of ``shape`` is a known int above 0 (a static Reshape can name them)."""
    return shape is not None and all(isinstance(d, int) and d > 0 for d in shape)


def _known_elements(shape: tuple[Dim, ...] | None) -> int:
    """The product of a shape's known dims."""
    known = 1
    for d in shape or ():
        known *= d if isinstance(d, int) else 1
    return known


def lower(plan: Plan, opset: int = 13, index_types: dict | None = None, target=None) -> Lowering:
    """The minimal op sequence for a plan (see module doc).

    Specs with runtime begin/end/strides go to :func:`lower_dynamic.lower_dynamic`
    (``opset`` and ``index_types`` -- "int32"/"int64"/None per runtime field -- matter there).
    ``target`` (a name or targets.Target; default onnxruntime): a target with constraints goes
    to :func:`lower_dynamic.lower_for_target`, which consults them."""
    target = get_target(target)
    prelude: Prelude | None = None
    if plan.source is not None and plan.source.flavor == "tflite" and not plan.spec.is_static:
        from .tflite import seed_indices as prelude  # TFLite's indices, computed in the graph
    if not target.minimal:
        from .dynamic import lower_for_target
        ops, notes, dtype = lower_for_target(plan, target, opset, index_types, prelude=prelude)
        return Lowering(plan, ops, notes, dtype, target=target.name)
    if not plan.spec.is_static:
        from .dynamic import lower_dynamic
        ops, notes, dtype = lower_dynamic(plan, opset, index_types, prelude=prelude)
        return Lowering(plan, ops, notes, dtype)
    pre, main, notes = [], [], []
    clamp_below = plan.source is not None and plan.source.flavor == TFLITE
    flavor = plan.spec.flavor
    for a in plan.axes:
        if a.kind == ALL:
            continue
        p, m, note = _axis_args(a, flavor, clamp_below)
        if p:
            pre.append(p)
        if m:
            main.append(m)
        if note:
            notes.append(note)
    ops = []
    if pre:
        ops.append(_slice_op(pre))
    if main:
        ops.append(_slice_op(main))
    squeeze, unsqueeze = _layout(plan)
    if squeeze and unsqueeze and _known_elements(plan.input_shape) <= RESHAPE_MAX_ELEMENTS \
            and _positive_dims(out_shape := plan.output_shape):
        ops.append(Op(RESHAPE, shape=tuple(out_shape)))
    else:
        if squeeze:
            ops.append(Op(SQUEEZE, axes=tuple(squeeze)))
        if unsqueeze:
            ops.append(Op(UNSQUEEZE, axes=tuple(unsqueeze)))
    if not ops:
        ops.append(Op(IDENTITY))
    return made_at_once(Lowering, plan=plan, ops=tuple(ops), notes=tuple(notes), index_dtype="int64",
                        target="onnxruntime")


# --------------------------------------------------------------------------- emission

class Step(NamedTuple):
    """One node to emit, backend-neutral (onnx-ir here, protobuf in rewrite/proto_pass.py); a
    NamedTuple, not a dataclass: a model of many distinct slices makes one per node.

    ``inputs``: ("x",) the sliced data, ("in", field) a runtime begin/end/strides,
    ("node", k) the output of step k, ("const", values, dtype, scalar) a pooled constant.
    The node is named ``<name>/<suffix>`` and its output ``<node name>:0`` (made unique)."""

    suffix: str
    op_type: str
    inputs: tuple
    attrs: tuple = ()  # ((name, int | tuple of ints), ...)


def _const_ref(values, dtype: str = "int64", scalar: bool = False) -> tuple:
    return ("const", tuple(values), dtype, scalar)


def steps(lowering: Lowering, opset: int) -> tuple:
    """The nodes that compute ``lowering`` at ``opset`` (axes of Squeeze/Unsqueeze as an
    attribute before opset 13, as an input from 13), in emission order.  Pure: callers cache
    it per lowering."""
    if lowering.dynamic:
        return _dynamic_steps(lowering, opset)
    out = []
    cur: tuple = ("x",)
    inputs: tuple
    attrs: tuple
    for k, op in enumerate(lowering.ops):
        attrs = ()
        if op.op_type == SLICE:  # (Op's fields are tuples of ints: the references _const_ref makes)
            inputs = (cur, ("const", op.starts, "int64", False), ("const", op.ends, "int64", False),
                      ("const", op.axes, "int64", False), ("const", op.steps, "int64", False))
        elif op.op_type in (SQUEEZE, UNSQUEEZE):
            if opset >= 13:
                inputs = (cur, _const_ref(op.axes))
            else:
                inputs, attrs = (cur,), (("axes", tuple(op.axes)),)
        elif op.op_type == RESHAPE:
            inputs = (cur, _const_ref(op.shape))
        else:
            inputs = (cur,)
        out.append(Step(f"{op.op_type}_{k}" if k else op.op_type, op.op_type, inputs, attrs))
        cur = ("node", k)
    return tuple(out)


def _dynamic_steps(lowering: Lowering, opset: int) -> tuple:
    """:func:`steps` of a dynamic lowering (its ops are lower_dynamic.DynOp)."""
    out = []
    dtype = lowering.index_dtype
    for k, op in enumerate(lowering.ops):
        inputs = [_dynamic_ref(r, dtype) for r in op.inputs]
        attrs = [(key, _ONNX_INT[v] if key == "to" else v) for key, v in op.attrs]
        if op.op_type in (UNSQUEEZE, SQUEEZE):
            if opset >= 13:
                inputs.append(_const_ref(op.axes))
            else:
                attrs.append(("axes", tuple(op.axes)))
        out.append(Step(f"{op.op_type}" + (f"_{k}" if k else ""), op.op_type, tuple(inputs), tuple(attrs)))
    return tuple(out)


def _dynamic_ref(r, dtype: str) -> tuple:
    kind = r[0]
    if kind in ("x", "in", "node"):
        return r
    if kind == "const":
        return _const_ref(r[1], dtype)
    if kind == "const64":
        return _const_ref(r[1], "int64")
    if kind == "scalar":
        return _const_ref((r[1],), dtype, scalar=True)
    if kind == "bool":
        return _const_ref(tuple(int(v) for v in r[1]), "bool")
    raise ValueError(f"unknown reference {r!r}")


class ConstantPool:
    """Int64 constants for one graph, deduplicated by value: initializers in graphs,
    ``Constant`` nodes in functions (which cannot hold initializers).  Values are onnx-ir
    values; :meth:`_create` is the backend (rewrite_proto.ProtoConstantPool makes protos)."""

    def __init__(self, graph, prefix: str, use_nodes: bool = False, names=None):
        from ..graphs.names import NameAllocator
        self.graph = graph
        self.prefix = prefix
        self.use_nodes = use_nodes
        self.names = names if names is not None else NameAllocator()  # shared with emit()
        self.cache: dict[tuple, object] = {}  # a Step's reference ("const", values, dtype, scalar) -> value
        self.count = 0
        self.nodes: list = []  # Constant nodes created (functions only)

    def get(self, values: tuple[int, ...], dtype: str = "int64", scalar: bool = False):
        key = ("const", tuple(values), dtype, scalar)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        name = self.names.fresh(f"{self.prefix}c{self.count}")
        self.count += 1
        value = self.cache[key] = self._make(name, key[1], dtype, scalar)
        return value

    def _make(self, name: str, values: tuple[int, ...], dtype: str, scalar: bool):
        """The constant ``name`` holding ``values`` as ``dtype`` (0-D when ``scalar``): the array
        :meth:`_create` turns into the backend's value."""
        import numpy as np
        if dtype == "int32":  # same meaning for axes shorter than 2**31
            values = tuple(min(max(v, -(2 ** 31)), 2 ** 31 - 1) for v in values)
        arr = np.array(values, dtype=dtype)
        return self._create(name, arr[0] if scalar else arr)

    def _create(self, name: str, arr):
        import onnx_ir as ir
        tensor = ir.tensor(arr, name=name)
        if self.use_nodes:
            node = ir.node("Constant", [], {"value": tensor}, outputs=[ir.Value(name=name)], name=name)
            self.nodes.append(node)
            return node.outputs[0]
        value = ir.Value(name=name, const_value=tensor, shape=ir.Shape(list(arr.shape)),
                         type=ir.TensorType(tensor.dtype))
        self.graph.register_initializer(value)
        return value


def resolve(ref: tuple, x, runtime: dict, outs: list, consts: ConstantPool):
    """A step input (see :class:`Step`) as a value of the backend ``consts`` belongs to."""
    kind = ref[0]
    if kind == "x":
        return x
    if kind == "node":
        return outs[ref[1]]
    if kind == "in":
        return runtime[ref[1]]
    return consts.get(ref[1], ref[2], ref[3])


def emit(lowering: Lowering, x, opset: int, consts: ConstantPool, name: str,
         runtime: dict | None = None, memo: dict | None = None, plan_steps: tuple | None = None
         ) -> tuple[list[ir.Node], ir.Value]:
    """onnx-ir nodes computing ``lowering`` on value ``x``; returns (nodes, output value).

    Constant inputs come from ``consts`` (Constant nodes it creates are not in the list);
    node and value names come from ``consts.names`` (unique in the model); ``runtime`` maps
    "begin"/"end"/"strides" to the values of runtime indices.  ``memo`` (one per graph, kept by
    the caller): a step other than the last that computes what an earlier emitted node computes
    (same op, inputs and attributes) reads that node's output instead of adding its twin -- the
    common-subexpression rule of the cleanup, applied as the nodes are made.
    ``plan_steps``: :func:`steps` of ``lowering`` at ``opset``, when the caller keeps them."""
    import onnx_ir as ir
    runtime = runtime or {}
    nodes: list = []
    outs: list = []
    if plan_steps is None:
        plan_steps = steps(lowering, opset)
    for k, step in enumerate(plan_steps):
        inputs = [resolve(r, x, runtime, outs, consts) for r in step.inputs]
        key = (step.op_type, tuple(id(v) for v in inputs), step.attrs)
        if memo is not None and k < len(plan_steps) - 1 and key in memo:
            outs.append(memo[key][1])
            continue
        attrs = {a: list(v) if isinstance(v, tuple) else v for a, v in step.attrs}
        node = ir.node(step.op_type, inputs, attrs or None, name=f"{name}/{step.suffix}")
        _name_node(node, consts.names)
        nodes.append(node)
        outs.append(node.outputs[0])
        if memo is not None:
            memo.setdefault(key, (inputs, node.outputs[0]))  # the inputs kept: their ids stay theirs
    return nodes, outs[-1]


_ONNX_INT = {"int32": 6, "int64": 7}


def _name_node(node, names) -> None:
    """Give ``node`` (named ``base``) and its output (``base:0``) names unused in the model."""
    node.name = names.fresh(node.name)
    node.outputs[0].name = names.fresh(f"{node.name}:0")
