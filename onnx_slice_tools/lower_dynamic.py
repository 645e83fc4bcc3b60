"""Lowering of specs whose begin, end or strides are computed at run time.

The masks are attributes, so the structure of the result is known: which input
axes are ranges, which are single indices, where the new axes go.  Only the
numbers arrive at run time.  The lowering is a small graph (:class:`DynOp` list):

* ranges: one ``Slice`` whose starts/ends/steps are assembled from the runtime
  vectors -- picked with ``Gather`` when the sliced indices are not simply all of
  them in order, masked entries filled with ``Where`` (by the runtime stride's sign
  when the stride is a runtime value too);
* ends that are runtime values, where the step may be negative, are capped at
  ``INT32_MAX - 1``: onnxruntime reads ``INT32_MAX``/``INT64_MAX`` as "to the front"
  with a negative step (its issue #11107); any end at or past the last element means
  the same to ``Slice`` for axes shorter than 2**31 - 1 elements;
* TensorFlow only: a reverse range whose begin is below ``-dim`` is empty in
  TensorFlow but starts at element 0 in ONNX; such ends are set to 0 when
  ``begin < -dim`` (the dim from ``Shape`` when not known statically);
* single indices (shrink): ``Gather`` with a scalar index, which removes the axis,
  accepts negative indices and fails at run time on an index out of range -- as
  both frameworks do;
* TensorFlow only, strides given at run time: a shrink whose stride is <= 0 is an
  error in TensorFlow ("only stride 1 allowed on non-range indexing"); the shrink
  indices are replaced by the index type's maximum there (``Where``), so the
  ``Gather`` fails at run time too;
* new axes: one ``Unsqueeze``.

Node inputs refer to ``X`` (the data), ``("in", field)`` (a runtime vector),
``("const", values)`` / ``("scalar", value)`` (index-typed constants), ``("const64", values)``,
``("bool", values)`` and ``("node", k)`` (the output of node ``k``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .plan import INDEX, RANGE, Plan
from .spec import TF

INT32_MAX = 2 ** 31 - 1
INT32_MIN = -(2 ** 31)
#: The cap for runtime ends that may meet a negative step (see the module doc).
END_CAP = INT32_MAX - 1

X = ("x",)


@dataclass(frozen=True)
class DynOp:
    """One node of a dynamic lowering."""

    op_type: str
    inputs: tuple
    attrs: tuple = ()          # ((name, value), ...)
    axes: tuple[int, ...] = ()  # Unsqueeze: the axes (an attribute or an input by opset)

    def describe(self) -> str:
        args = [_describe_ref(r) for r in self.inputs]
        if self.op_type == "Unsqueeze":
            args.append(f"axes={list(self.axes)}")
        args += [f"{k}={v}" for k, v in self.attrs]
        return f"{self.op_type}({', '.join(args)})"


def _describe_ref(ref) -> str:
    kind = ref[0]
    if kind == "x":
        return "x"
    if kind == "in":
        return ref[1]
    if kind == "node":
        return f"%{ref[1]}"
    if kind == "scalar":
        return str(ref[1])
    if kind == "bool":
        return str([int(v) for v in ref[1]])
    return str(list(ref[1]))


class _Builder:
    def __init__(self, opset: int, index_types: dict):
        self.opset = opset
        self.ops: list[DynOp] = []
        known = {t for f, t in index_types.items()}
        # Slice wants starts/ends/axes/steps of one type: the runtime vectors' own when they
        # agree (no Cast), else int64 with a Cast for each vector that is not.
        self.dtype = known.pop() if len(known) == 1 and None not in known else "int64"
        self.types = index_types
        self._inputs: dict = {}

    def inp(self, field: str) -> tuple:
        """The runtime vector ``field`` in the index type (cast once when needed)."""
        if field not in self._inputs:
            ref = ("in", field)
            if self.types.get(field) != self.dtype:
                ref = self.add("Cast", ref, attrs=(("to", self.dtype),))
            self._inputs[field] = ref
        return self._inputs[field]

    def add(self, op_type: str, *inputs, attrs=(), axes=()) -> tuple:
        self.ops.append(DynOp(op_type, tuple(inputs), tuple(attrs), tuple(axes)))
        return ("node", len(self.ops) - 1)


def _const(values) -> tuple:
    return ("const", tuple(int(v) for v in values))


def lower_dynamic(plan: Plan, opset: int = 13, index_types: dict | None = None):
    """(ops, notes, index dtype) computing ``plan`` whose spec has runtime begin/end/strides.

    ``index_types``: "int32"/"int64"/None (unknown) for each runtime field."""
    spec = plan.spec
    runtime = {f: getattr(spec, f) is None for f in ("begin", "end", "strides")}
    index_types = {f: (index_types or {}).get(f) for f, r in runtime.items() if r}
    b = _Builder(opset, index_types)
    notes: list[str] = []
    cur = X

    ranges = [a for a in plan.axes if a.kind == RANGE and not a.is_identity]
    if ranges:
        ranges.sort(key=lambda a: (a.axis < 0, a.axis))
        cur = b.add("Slice", cur, *_slice_inputs(b, plan, ranges, runtime, notes))

    shrinks = [a for a in plan.axes if a.kind == INDEX]
    # Gather removes an axis: positive axes from the last, negative ones from the first,
    # so that the numbers of those still to come stay valid.
    shrinks.sort(key=lambda a: (a.axis < 0, -a.axis if a.axis >= 0 else a.axis))
    begins = _shrink_begins(b, plan, shrinks, runtime) if shrinks else None
    for a in shrinks:
        if begins is not None:
            index = b.add("Gather", begins, ("scalar", a.index), attrs=(("axis", 0),))
        else:
            index = ("scalar", a.begin)
        cur = b.add("Gather", cur, index, attrs=(("axis", a.axis),))

    inserted = plan.inserted_axes
    if inserted:
        cur = b.add("Unsqueeze", cur, axes=tuple(sorted(inserted, key=lambda j: (j < 0, j))))
    if not b.ops:
        b.add("Identity", cur)
    return tuple(b.ops), tuple(notes), b.dtype


def _shrink_begins(b: _Builder, plan: Plan, shrinks: list, runtime: dict):
    """The vector the shrink indices are gathered from (None: constant indices, no vector).

    TensorFlow with runtime strides: where a shrink's stride is <= 0 its index becomes the
    index type's maximum, out of range for any axis, so the ``Gather`` fails at run time as
    TensorFlow does ("only stride 1 allowed on non-range indexing")."""
    spec = plan.spec
    guard = spec.flavor == TF and runtime["strides"]
    if not guard:
        return b.inp("begin") if runtime["begin"] else None
    begins = b.inp("begin") if runtime["begin"] else _const(
        spec.begin[k] if any(a.index == k for a in shrinks) else 0 for k in range(spec.n))
    bad = b.add("Less", b.inp("strides"), ("scalar", 1))
    positions = tuple(any(a.index == k for a in shrinks) for k in range(spec.n))
    if not all(positions):
        bad = b.add("And", bad, ("bool", positions))
    top = INT32_MAX if b.dtype == "int32" else 2 ** 63 - 1
    return b.add("Where", bad, ("scalar", top), begins)


def _vector(b: _Builder, field: str, indices: list[int], n: int) -> tuple:
    """The runtime vector ``field`` at spec ``indices`` (Gather unless it is all of it, in order)."""
    if indices == list(range(n)):
        return b.inp(field)
    return b.add("Gather", b.inp(field), _const(indices), attrs=(("axis", 0),))


def _slice_inputs(b: _Builder, plan: Plan, axes: list, runtime: dict, notes: list) -> tuple:
    spec = plan.spec
    n = spec.n
    idx = [a.index for a in axes]

    # steps, and the sign of each step when it is a runtime value
    if runtime["strides"]:
        steps = _vector(b, "strides", idx, n)
        neg = b.add("Less", steps, ("scalar", 0))
    else:
        steps = _const(a.stride for a in axes)
        neg = None
    may_be_negative = [runtime["strides"] or a.stride < 0 for a in axes]

    def assemble(field: str, masked: list[bool], pos_fill: list[int], neg_fill: list[int],
                 const_values: list[int] | None, cap: bool) -> tuple:
        """starts or ends: runtime/constant values, masked entries filled by the step's sign."""
        fills_differ = any(m and p != q for m, p, q in zip(masked, pos_fill, neg_fill))
        if runtime["strides"] and fills_differ:
            fill = b.add("Where", neg, _const(neg_fill), _const(pos_fill))
        else:  # the sign is known wherever it matters
            fill = _const([q if mn else p for p, q, mn in zip(pos_fill, neg_fill, may_be_negative)])
        if all(masked):
            return fill
        if const_values is not None:  # this field is constant: fill is only needed for masks
            if not runtime["strides"] or not fills_differ:
                return _const([f if m else v for f, m, v in zip(fill[1], masked, const_values)])
            return b.add("Where", ("bool", tuple(masked)), fill, _const(const_values))
        values = _vector(b, field, idx, n)
        if cap and any(may_be_negative[j] and not masked[j] for j in range(len(axes))):
            values = _cap(b, values)
        if any(masked):
            values = b.add("Where", ("bool", tuple(masked)), fill, values)
        return values

    INT64_MAX, INT64_MIN = 2 ** 63 - 1, -(2 ** 63)
    bmask = [a.begin_masked for a in axes]
    emask = [a.end_masked for a in axes]
    starts = assemble("begin", bmask, [0] * len(axes), [-1] * len(axes),
                      None if runtime["begin"] else [a.begin for a in axes], cap=False)
    const_ends = None
    if not runtime["end"]:
        const_ends = [END_CAP if mn and a.end >= INT32_MAX else a.end for a, mn in zip(axes, may_be_negative)]
    ends = assemble("end", emask, [INT64_MAX] * len(axes), [INT64_MIN] * len(axes), const_ends, cap=True)

    if spec.flavor == TF:
        ends = _tf_reverse_begin(b, plan, axes, runtime, starts, ends, neg, may_be_negative, notes)
    axes_ref = _const(a.axis for a in axes)
    return starts, ends, axes_ref, steps


def _cap(b: _Builder, values: tuple) -> tuple:
    """min(values, END_CAP): Min from opset 12 (integer Min); before, Greater + Where."""
    if b.opset >= 12:
        return b.add("Min", values, ("scalar", END_CAP))
    return b.add("Where", b.add("Greater", values, ("scalar", END_CAP)), ("scalar", END_CAP), values)


def _tf_reverse_begin(b: _Builder, plan: Plan, axes: list, runtime: dict, starts, ends, neg,
                      may_be_negative: list[bool], notes: list) -> tuple:
    """TensorFlow clamps a reverse begin below -dim to "before element 0": empty."""
    fix = []
    for a, mn in zip(axes, may_be_negative):
        if a.begin_masked or not mn:
            fix.append(False)
        elif runtime["begin"]:
            fix.append(True)
        else:  # a constant begin only matters when it can be below -dim
            fix.append(a.begin <= -2 and not (isinstance(a.dim, int) and a.begin >= -a.dim))
    if not any(fix):
        return ends
    if all(isinstance(a.dim, int) for a in axes):  # begin < -dim, against constants
        below = b.add("Less", starts, _const(-a.dim for a in axes))
    else:  # the dims read at run time
        if b.opset >= 15 and len(axes) == 1:
            ax = axes[0].axis
            attrs = (("start", ax),) + ((("end", ax + 1),) if ax != -1 else ())
            dims = b.add("Shape", X, attrs=attrs)
        else:
            dims = b.add("Gather", b.add("Shape", X), ("const64", tuple(a.axis for a in axes)),
                         attrs=(("axis", 0),))
        if b.dtype != "int64":
            dims = b.add("Cast", dims, attrs=(("to", b.dtype),))
        # begin < -dim, not begin + dim < 0: the sum overflows for a begin near INT_MAX
        below = b.add("Less", starts, b.add("Neg", dims))
    if neg is not None:
        below = b.add("And", below, neg)
    if not all(fix):
        below = b.add("And", below, ("bool", tuple(fix)))
    notes.append("TensorFlow reverse begin below -dim: the end is set to 0 (empty) when begin < -dim")
    return b.add("Where", below, ("scalar", 0), ends)
