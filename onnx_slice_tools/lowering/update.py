"""Lowering of the slice-update family (semantics/update.py) and TFLite GELU to ONNX nodes.

Each function returns an :class:`OpLowering`: the nodes (and constant initializers) that compute
one framework node's output from its inputs, in the fewest nodes the case allows:

- a dynamic update narrower than its input on one axis only (a KV-cache write):
  ``Concat(Slice(x, :s), update, Slice(x, s + u:))`` with ``s`` clamped in the graph
  (``Clip``; ``Where`` below opset 12, where Clip takes no integers); static starts fold;
- narrower on several axes: ``ScatterND(x, grid(update) + s, update)`` with ``s =
  Min(Max(idx, 0), dim - update_dim)`` (onnxruntime's ScatterND reads a negative index from the
  end and fails on one too large: the clamp is in the graph);
- a clamped read (``XlaDynamicSlice``): ``Slice(x, s, s + size)`` on the narrow axes;
- ``TensorStridedSliceUpdate`` / ``StridedSliceGrad`` (static spec and shape): ``ScatterND`` with
  the StridedSlice plan's positions (per axis ``start + stride * k``; only the leading axes up to
  the last one the slice narrows are indexed, the rest move whole);
- GELU: ``Gelu`` from opset 20, else its definition (Erf form, or the tanh form).

Needs onnx (imported here; the lowering stage builds ONNX nodes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from ..errors import StridedSliceError
from ..semantics.plan import ALL, INDEX, Plan
from ..semantics.update import UpdatePlan, known

_INT_MAX: dict[int, int] = {TensorProto.INT32: 2 ** 31 - 1, TensorProto.INT64: 2 ** 63 - 1}


@dataclass
class OpLowering:
    """The ONNX form of one framework node: ``nodes`` in order, the constants they read, and
    ``form`` (a short name for explain/inspect)."""

    form: str
    nodes: list = field(default_factory=list)
    initializers: list = field(default_factory=list)

    @property
    def node_count(self) -> int:
        return len(self.nodes)

    def describe(self) -> list[str]:
        return [n.op_type for n in self.nodes]


class _Builder:
    def __init__(self, prefix: str, form: str):
        self.prefix, self.out = prefix, OpLowering(form)
        self._n = 0

    def name(self, hint: str) -> str:
        self._n += 1
        return f"{self.prefix}__{hint}{self._n}"

    def const(self, value, hint: str = "c") -> str:
        name = self.name(hint)
        self.out.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op: str, inputs: list, output: str | None = None, **attrs) -> str:
        output = output or self.name(op.lower())
        self.out.nodes.append(helper.make_node(op, inputs, [output], name=self.name(op), **attrs))
        return output


def _np_index(elem: int):
    return np.int32 if elem == TensorProto.INT32 else np.int64


def _clamped(b: _Builder, idx: str, elem: int, axes: list[int], rank: int, hi: list[int], opset: int) -> str:
    """``idx[axes]`` clamped to ``[0, hi]`` per entry (a 1-D tensor of ``idx``'s type)."""
    dt = _np_index(elem)
    sub = idx if axes == list(range(rank)) else b.node("Gather", [idx, b.const(np.array(axes, np.int64), "axes")],
                                                       axis=0)
    if opset >= 12 and len(set(hi)) == 1:
        return b.node("Clip", [sub, b.const(dt(0), "zero"), b.const(dt(hi[0]), "hi")])
    zero, top = b.const(np.zeros(len(axes), dt), "zero"), b.const(np.array(hi, dt), "hi")
    if opset >= 12:
        return b.node("Min", [b.node("Max", [sub, zero]), top])
    low = b.node("Where", [b.node("Less", [sub, zero]), zero, sub])
    return b.node("Where", [b.node("Greater", [low, top]), top, low])


def lower_dynamic_update_slice(x: str, update: str, idx: str, out: str, plan: UpdatePlan, *, index_elem: int,
                               opset: int, prefix: str) -> OpLowering:
    """``XlaDynamicUpdateSlice`` / ``DYNAMIC_UPDATE_SLICE`` planned by :func:`..semantics.update.update_plan`
    (``plan.starts`` set: the indices are constants).  The narrow axes' dims must be known."""
    if plan.is_empty:
        b = _Builder(prefix, "identity")
        b.node("Identity", [x], out)
        return b.out
    if not plan.narrow:
        b = _Builder(prefix, "identity")
        b.node("Identity", [update], out)
        return b.out
    dims = [plan.input_shape[a] for a in plan.narrow]
    wins = [plan.window[a] for a in plan.narrow]
    if not all(isinstance(v, int) for v in dims + wins):
        raise StridedSliceError(f"the input's and update's dims on axes {list(plan.narrow)} must be known "
                                f"(input {list(plan.input_shape)}, update {list(plan.window)})", field="update",
                                unsupported=True)
    hi = [known(d) - known(w) for d, w in zip(dims, wins)]
    dt = _np_index(index_elem)
    if len(plan.narrow) == 1:
        k, d, u = plan.narrow[0], known(dims[0]), known(wins[0])
        b = _Builder(prefix, "concat")
        parts: list[str] = []
        if plan.starts is not None:
            s = plan.starts[k]
            if s > 0:
                parts.append(b.node("Slice", [x, b.const(np.array([0], np.int64)), b.const(np.array([s], np.int64)),
                                              b.const(np.array([k], np.int64), "axes")]))
            parts.append(update)
            if s + u < d:
                parts.append(b.node("Slice", [x, b.const(np.array([s + u], np.int64)),
                                              b.const(np.array([d], np.int64)),
                                              b.const(np.array([k], np.int64), "axes")]))
        else:
            s_name = _clamped(b, idx, index_elem, [k], plan.rank, [hi[0]], opset)
            e_name = b.node("Add", [s_name, b.const(np.array([u], dt), "u")])
            axes = b.const(np.array([k], dt), "axes")
            parts = [b.node("Slice", [x, b.const(np.array([0], dt), "zero"), s_name, axes]), update,
                     b.node("Slice", [x, e_name, b.const(np.array([_INT_MAX[index_elem]], dt), "end"), axes])]
        b.node("Concat", parts, out, axis=k)
        return b.out
    if not all(isinstance(d, int) for d in plan.input_shape + plan.window):
        raise StridedSliceError(f"an update narrower on several axes needs known shapes (input "
                                f"{list(plan.input_shape)}, update {list(plan.window)})", field="update",
                                unsupported=True)
    b = _Builder(prefix, "scatter")
    window = [known(w) for w in plan.window]
    grid = np.stack(np.meshgrid(*[np.arange(w, dtype=np.int64) for w in window], indexing="ij"), axis=-1)
    if plan.starts is not None:
        coords = b.const(grid + np.array(plan.starts, np.int64), "indices")
    else:
        full_hi = [known(d) - w for d, w in zip(plan.input_shape, window)]
        s_name = _clamped(b, idx, index_elem, list(range(plan.rank)), plan.rank, full_hi, opset)
        if index_elem != TensorProto.INT64:
            s_name = b.node("Cast", [s_name], to=TensorProto.INT64)
        coords = b.node("Add", [b.const(grid, "grid"), s_name])
    b.node("ScatterND", [x, coords, update], out)
    return b.out


def lower_dynamic_slice(x: str, idx: str, out: str, plan: UpdatePlan, *, index_elem: int, opset: int,
                        prefix: str) -> OpLowering:
    """``XlaDynamicSlice``: the window ``plan.window`` at clamped starts."""
    b = _Builder(prefix, "slice")
    if not plan.narrow:
        b.node("Identity", [x], out)
        return b.out
    dims = [plan.input_shape[a] for a in plan.narrow]
    wins = [known(plan.window[a]) for a in plan.narrow]
    if not all(isinstance(d, int) for d in dims):
        raise StridedSliceError(f"the input's dims on axes {list(plan.narrow)} must be known (input "
                                f"{list(plan.input_shape)})", field="input",
                                unsupported=True)
    dt = _np_index(index_elem)
    axes = b.const(np.array(plan.narrow, dt), "axes")
    if plan.starts is not None:
        starts = np.array([plan.starts[a] for a in plan.narrow], dt)
        b.node("Slice", [x, b.const(starts, "starts"), b.const(starts + np.array(wins, dt), "ends"), axes], out)
        return b.out
    s_name = _clamped(b, idx, index_elem, list(plan.narrow), plan.rank,
                      [known(d) - w for d, w in zip(dims, wins)], opset)
    e_name = b.node("Add", [s_name, b.const(np.array(wins, dt), "size")])
    b.node("Slice", [x, s_name, e_name, axes], out)
    return b.out


def slice_positions(plan: Plan) -> list[np.ndarray]:
    """Per input axis, the positions a (static) StridedSlice plan reads, in output order."""
    out = []
    for a in plan.axes:
        if a.kind == ALL:
            out.append(np.arange(known(a.dim), dtype=np.int64))
        elif a.kind == INDEX:
            out.append(np.array([a.start], np.int64))
        else:
            out.append(known(a.start) + known(a.stride) * np.arange(known(a.size), dtype=np.int64))
    return out


def lower_slice_write(x: str | None, value: str, out: str, plan: Plan, value_shape: tuple, *, elem: int,
                      prefix: str, shape_name: str | None = None) -> OpLowering:
    """``TensorStridedSliceUpdate(x, spec, value)`` (``x`` given) or ``StridedSliceGrad(shape, spec,
    dy)`` (``x`` None: zeros of the plan's input shape) for a static plan; ``value`` broadcasts to
    the slice's shape (checked by the caller with :func:`..semantics.update.broadcast_shape`)."""
    final = tuple(known(d) for d in plan.output_shape or ())
    shape = tuple(known(d) for d in plan.input_shape or ())
    positions = slice_positions(plan)
    b = _Builder(prefix, "scatter")
    if x is None:
        zero = helper.make_tensor("value", elem, [1], [0])
        x = b.node("ConstantOfShape", [b.const(np.array(shape, np.int64), "shape")], value=zero)
    if int(np.prod(final, dtype=np.int64)) == 0:
        b.out.form = "identity"
        b.node("Identity", [x], out)
        return b.out
    whole = [len(p) == d and (d <= 1 or bool((p == np.arange(d)).all())) for p, d in zip(positions, shape)]
    q = max((i + 1 for i, w in enumerate(whole) if not w), default=0)
    v = value
    if tuple(value_shape) != final:
        if len(value_shape) > len(final):  # extra leading 1s: reshape them away first
            v = b.node("Reshape", [v, b.const(np.array(value_shape[len(value_shape) - len(final):], np.int64))])
            value_shape = tuple(value_shape[len(value_shape) - len(final):])
        if tuple(value_shape) != final:
            v = b.node("Expand", [v, b.const(np.array(final, np.int64), "shape")])
    counts = [len(p) for p in positions]
    if q == 0:
        if tuple(final) != shape:
            v = b.node("Reshape", [v, b.const(np.array(shape, np.int64), "shape")])
        b.out.form = "expand"
        b.node("Identity", [v], out)
        return b.out
    target = tuple(counts[:q]) + shape[q:]
    if target != final:
        v = b.node("Reshape", [v, b.const(np.array(target, np.int64), "shape")])
    grid = np.stack(np.meshgrid(*positions[:q], indexing="ij"), axis=-1)
    b.node("ScatterND", [x, b.const(grid, "indices"), v], out)
    return b.out


def lower_gelu(x: str, out: str, *, approximate: bool, elem: int, opset: int, prefix: str) -> OpLowering:
    """TFLite GELU: ``0.5 x (1 + erf(x / sqrt 2))``, or with ``approximate`` the tanh form
    ``0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))``."""
    b = _Builder(prefix, "gelu-tanh" if approximate else "gelu-erf")
    if opset >= 20:
        b.node("Gelu", [x], out, approximate="tanh" if approximate else "none")
        return b.out
    np_dtype = helper.tensor_dtype_to_np_dtype(elem)

    def dt(v: float):
        return np.array(v, np_dtype)

    if approximate:
        cube = b.node("Mul", [b.node("Mul", [x, x]), x])
        inner = b.node("Add", [x, b.node("Mul", [cube, b.const(dt(0.044715), "k")])])
        t = b.node("Tanh", [b.node("Mul", [inner, b.const(dt(math.sqrt(2 / math.pi)), "k")])])
    else:
        t = b.node("Erf", [b.node("Mul", [x, b.const(dt(1 / math.sqrt(2)), "k")])])
    one_plus = b.node("Add", [t, b.const(dt(1), "one")])
    b.node("Mul", [b.node("Mul", [x, b.const(dt(0.5), "half")]), one_plus], out)
    return b.out


def lower_erfc(x: str, out: str, *, elem: int, prefix: str) -> OpLowering:
    """TensorFlow's ``Erfc``: ``1 - Erf(x)``, its definition (ONNX has no Erfc)."""
    b = _Builder(prefix, "one-minus-erf")
    b.node("Sub", [b.const(np.array(1, helper.tensor_dtype_to_np_dtype(elem)), "one"), b.node("Erf", [x])], out)
    return b.out
