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
from typing import Callable

from ..semantics.plan import INDEX, RANGE, Plan
from ..semantics.spec import TF, TFLITE

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
        if self.op_type in ("Unsqueeze", "Squeeze"):
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


class Builder:
    def __init__(self, opset: int, index_types: dict):
        self.opset = opset
        self.ops: list[DynOp] = []
        known = {t for f, t in index_types.items()}
        # Slice wants starts/ends/axes/steps of one type: the runtime vectors' own when they
        # agree (no Cast), else int64 with a Cast for each vector that is not.
        self.dtype = known.pop() if len(known) == 1 and None not in known else "int64"
        self.types = index_types
        self.lengths: dict = {}  # runtime fields of unknown length -> the length they must have
        self.prefix: frozenset = frozenset()  # of those, fields whose first entries count, longer ones allowed
        self.ties: tuple = ()  # fields of unknown length the output does not depend on ...
        self.tie_into: str | None = None  # ... checked where this field (one it depends on) is read
        self._inputs: dict = {}
        #: ``finish(builder, output) -> output``: a last step a prelude asks for, which gives the
        #: output its shape in place of the layout step (seed_indices)
        self.finish: Callable[[Builder, tuple], tuple] | None = None

    def inp(self, field: str) -> tuple:
        """The runtime vector ``field`` in the index type (cast once when needed), through a
        ``Reshape`` to its length where that is not known statically: the run fails where the
        framework's does (begin, end and strides of different lengths).  ``tie_into`` also
        checks the length of each of ``ties`` (``Reshape`` to its ``Shape``).  A field of
        ``prefix`` is cut to its length instead (``Slice``: TFLite reads the first entries of
        strides and checks no length)."""
        if field not in self._inputs:
            ref = ("in", field)
            if field in self.prefix:
                ref = self.add("Slice", ref, ("const64", (0,)), ("const64", (self.lengths[field],)))
            elif field in self.lengths:
                ref = self.add("Reshape", ref, ("const64", (self.lengths[field],)))
            if self.types.get(field) != self.dtype:
                ref = self.add("Cast", ref, attrs=(("to", self.dtype),))
            if field == self.tie_into:
                for other in self.ties:
                    ref = self._tied(ref, other)
                self.ties = ()
            self._inputs[field] = ref
        return self._inputs[field]

    def _tied(self, ref: tuple, other: str) -> tuple:
        """``ref`` (a vector of the spec's length) as ``Max(ref, Min(g, ref))``, its own values,
        where ``g`` is ``other`` through a ``Reshape`` to that length: the values make the check
        part of the result (a check read only through its shape is folded away by onnxruntime's
        optimiser, and OpenVINO checks no ``Reshape`` to a computed shape)."""
        g = self.add("Reshape", ("in", other), ("const64", (self.lengths[other],)))
        if self.types.get(other) != self.dtype:
            g = self.add("Cast", g, attrs=(("to", self.dtype),))
        return self.add("Max", ref, self.add("Min", g, ref))

    def add(self, op_type: str, *inputs, attrs=(), axes=()) -> tuple:
        self.ops.append(DynOp(op_type, tuple(inputs), tuple(attrs), tuple(axes)))
        return ("node", len(self.ops) - 1)


#: ``prelude(builder, plan)``: puts run-time vectors in the builder before the lowering reads them
#: (lowering/tflite.seed_indices).
Prelude = Callable[[Builder, Plan], None]


def const_input(values) -> tuple:
    return ("const", tuple(int(v) for v in values))


def _start(plan: Plan, opset: int, index_types: dict | None, prelude: Prelude | None, ties: tuple = (),
           tie_into: str | None = None) -> tuple:
    """The builder of a runtime-index lowering and which of begin/end/strides are runtime
    values; ``prelude(builder, plan)`` computes run-time vectors first (lower_tflite.seed_indices)."""
    runtime = {f: getattr(plan.spec, f) is None for f in ("begin", "end", "strides")}
    b = Builder(opset, {f: (index_types or {}).get(f) for f, r in runtime.items() if r})
    written = plan.source if plan.source is not None else plan.spec
    b.lengths = {f: written.n for f in written.unsized if getattr(written, f) is None}
    if written.flavor == TFLITE:
        b.prefix = frozenset(f for f in b.lengths if f == "strides")
    b.ties, b.tie_into = ties, tie_into
    if prelude is not None:
        prelude(b, plan)
    return b, runtime


def _length_checked(lower):
    """``lower(b, plan, runtime, *args) -> (ops, notes, dtype)`` made to check the length of
    every runtime vector of unknown length, the ones the lowering never reads included (the
    end of a single index, strides under masks): the frameworks check them all (TFLite all but
    strides).  When some are not read, the lowering runs again with them tied to the first
    vector it reads (:meth:`Builder.inp`); when it reads none, the result goes through a
    ``Where`` whose condition reads them (:func:`_tie_output`)."""
    import functools

    @functools.wraps(lower)
    def run(plan: Plan, *args, opset: int = 13, index_types: dict | None = None, prelude=None):
        b, runtime = _start(plan, opset, index_types, prelude)
        out = lower(b, plan, runtime, *args)
        used = used_fields(out[0])
        unread = tuple(f for f in b.lengths if f not in used and f not in b.prefix)
        if not unread:
            return out
        into = next((f for f in ("begin", "end", "strides") if f in used), None)
        b, runtime = _start(plan, opset, index_types, prelude, ties=unread, tie_into=into)
        ops, notes, dtype = lower(b, plan, runtime, *args)
        if b.ties:  # no vector read: the output itself waits for the check
            _tie_output(b)
        return tuple(b.ops), notes, dtype
    return run


def used_fields(ops) -> set:
    """The runtime fields (``("in", field)``) the last of ``ops`` (the output) depends on."""
    used: set = set()
    todo, seen = [len(ops) - 1], set()
    while todo:
        k = todo.pop()
        if k in seen or k < 0:
            continue
        seen.add(k)
        for ref in ops[k].inputs:
            if ref[0] == "in":
                used.add(ref[1])
            elif ref[0] == "node":
                todo.append(ref[1])
    return used


def _tie_output(b: Builder) -> None:
    """The lowering's output (its last node) through ``Where(c, y, y)`` with a scalar ``c``
    true, computed from each of ``b.ties`` through a ``Reshape`` to its length: the run fails
    on another length.  The output keeps its shape (a scalar condition broadcasts)."""
    last = ("node", len(b.ops) - 1)
    total = None
    for f in b.ties:
        n = b.lengths[f]
        if n == 0:  # (no entry to read: a length-0 spec's vectors stay unchecked)
            continue
        head = b.add("Slice", b.add("Reshape", ("in", f), ("const64", (n,))), ("const64", (0,)), ("const64", (1,)))
        entry = b.add("Reshape", head, ("const64", ()))
        cond = b.add("Equal", entry, entry)
        total = cond if total is None else b.add("And", total, cond)
    b.ties = ()
    if total is not None:
        b.add("Where", total, last, last)


def lower_dynamic(plan: Plan, opset: int = 13, index_types: dict | None = None, prelude: Prelude | None = None):
    """(ops, notes, index dtype) computing ``plan`` whose spec has runtime begin/end/strides.

    ``index_types``: "int32"/"int64"/None (unknown) for each runtime field.  ``prelude(builder,
    plan)``: computes run-time vectors first (lower_tflite.seed_indices)."""
    return _lower_dynamic(plan, opset=opset, index_types=index_types, prelude=prelude)


@_length_checked
def _lower_dynamic(b: Builder, plan: Plan, runtime: dict):
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
        cur = b.add("Gather", cur, _shrink_index(b, a, begins), attrs=(("axis", a.axis),))

    inserted = plan.inserted_axes
    if b.finish is not None:  # it sets the output's shape itself
        cur = b.finish(b, cur)
    elif inserted:
        cur = b.add("Unsqueeze", cur, axes=tuple(sorted(inserted, key=lambda j: (j < 0, j))))
    if not b.ops:
        b.add("Identity", cur)
    return tuple(b.ops), tuple(notes), b.dtype


def _shrink_begins(b: Builder, plan: Plan, shrinks: list, runtime: dict, top=None):
    """The vector the shrink indices are gathered from (None: constant indices, no vector).

    TensorFlow with runtime strides: where a shrink's stride is <= 0 its index becomes ``top()``
    (a 1-element vector at least as large as each shrunk dim; default: the index type's maximum,
    out of range for any axis), so the ``Gather`` fails at run time as TensorFlow does ("only
    stride 1 allowed on non-range indexing")."""
    spec = plan.spec
    guard = spec.flavor == TF and runtime["strides"]
    if not guard:
        return b.inp("begin") if runtime["begin"] else None
    begins = b.inp("begin") if spec.begin is None else const_input(
        spec.begin[k] if any(a.index == k for a in shrinks) else 0 for k in range(spec.n))
    bad = b.add("Less", b.inp("strides"), ("scalar", 1))
    positions = tuple(any(a.index == k for a in shrinks) for k in range(spec.n))
    if not all(positions):
        bad = b.add("And", bad, ("bool", positions))
    limit = ("scalar", INT32_MAX if b.dtype == "int32" else 2 ** 63 - 1) if top is None else top()
    return b.add("Where", bad, limit, begins)


def _shrink_index(b: Builder, a, begins, scalar: bool = True) -> tuple:
    """The index a shrink axis takes: its entry of ``begins`` (:func:`_shrink_begins`: runtime or
    guarded values) or, without such a vector, the constant begin; a scalar, or (``scalar=False``)
    a 1-element vector."""
    if begins is not None:
        at = ("scalar", a.index) if scalar else const_input([a.index])
        return b.add("Gather", begins, at, attrs=(("axis", 0),))
    return ("scalar", a.begin) if scalar else const_input([a.begin])


def _vector(b: Builder, field: str, indices: list[int], n: int) -> tuple:
    """The runtime vector ``field`` at spec ``indices`` (Gather unless it is all of it, in order)."""
    if indices == list(range(n)):
        return b.inp(field)
    return b.add("Gather", b.inp(field), const_input(indices), attrs=(("axis", 0),))


def _slice_inputs(b: Builder, plan: Plan, axes: list, runtime: dict, notes: list) -> tuple:
    spec = plan.spec
    n = spec.n
    idx = [a.index for a in axes]

    # steps, and the sign of each step when it is a runtime value
    if runtime["strides"]:
        steps = _vector(b, "strides", idx, n)
        neg = b.add("Less", steps, ("scalar", 0))
    else:
        steps = const_input(a.stride for a in axes)
        neg = None
    may_be_negative = [runtime["strides"] or a.stride < 0 for a in axes]

    def assemble(field: str, masked: list[bool], pos_fill: list[int], neg_fill: list[int],
                 const_values: list[int] | None, cap: bool) -> tuple:
        """starts or ends: runtime/constant values, masked entries filled by the step's sign."""
        fills_differ = any(m and p != q for m, p, q in zip(masked, pos_fill, neg_fill))
        if runtime["strides"] and fills_differ:
            fill = b.add("Where", neg, const_input(neg_fill), const_input(pos_fill))
        else:  # the sign is known wherever it matters
            fill = const_input([q if mn else p for p, q, mn in zip(pos_fill, neg_fill, may_be_negative)])
        if all(masked):
            return fill
        if const_values is not None:  # this field is constant: fill is only needed for masks
            if not runtime["strides"] or not fills_differ:
                return const_input([f if m else v for f, m, v in zip(fill[1], masked, const_values)])
            return b.add("Where", ("bool", tuple(masked)), fill, const_input(const_values))
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
    axes_ref = const_input(a.axis for a in axes)
    return starts, ends, axes_ref, steps


def _cap(b: Builder, values: tuple) -> tuple:
    """min(values, END_CAP): Min from opset 12 (integer Min); before, Greater + Where."""
    if b.opset >= 12:
        return b.add("Min", values, ("scalar", END_CAP))
    return b.add("Where", b.add("Greater", values, ("scalar", END_CAP)), ("scalar", END_CAP), values)


def _tf_reverse_begin(b: Builder, plan: Plan, axes: list, runtime: dict, starts, ends, neg,
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
        below = b.add("Less", starts, const_input(-a.dim for a in axes))
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


# --------------------------------------------------------------------------- target constraints
#
# For targets with constraints (lowering/targets.py), every plan -- constant or runtime indices -- is
# lowered here.  Each range axis gets its canonical start and end (the flavour's clamping:
# known dims fold to constants, unknown ones are computed from ``Shape``), so ``Slice`` never
# sees a sentinel or a bound that needs clamping.  Ranges with a constant positive step go
# into one ``Slice``; the others (negative or runtime steps, when the target forbids negative
# steps) become ``Gather`` of ``Range(start, end, step)`` -- exact for either sign, because
# the bounds are already clamped.  Shrinks keep their axis until the layout step: ``Slice(i, i+1)``
# where the index was checked at conversion, else ``Gather`` of a 1-D non-negative index that
# is out of range exactly where the framework raises (and, for runtime values, goes through
# :func:`_guard`), so the run fails as the framework's does.  The shrunk axes are then removed
# and new axes inserted by ``Squeeze``/``Unsqueeze`` or, where a reshape of a possibly empty
# tensor is forbidden, one ``Reshape`` (allowzero) to a shape read from ``Shape``.


def _fold(b: Builder, op_type: str, fn, *refs) -> tuple:
    """``op_type`` of ``refs``, computed here when every input is a constant vector."""
    if all(r[0] in ("const", "bool") for r in refs):
        vals = [r[1] for r in refs]
        n = max(len(v) for v in vals)
        cols = zip(*[v * n if len(v) == 1 else v for v in vals])
        out = tuple(fn(*c) for c in cols)
        return ("bool", out) if all(isinstance(v, bool) for v in out) else ("const", tuple(int(v) for v in out))
    return b.add(op_type, *refs)


def less(b, x, y):
    return _fold(b, "Less", lambda p, q: bool(p < q), x, y)


def add(b, x, y):
    return _fold(b, "Add", lambda p, q: p + q, x, y)


def where(b, c, x, y):
    if c[0] == "bool" and len(set(c[1])) == 1:  # the same choice everywhere
        return x if c[1][0] else y
    return _fold(b, "Where", lambda k, p, q: p if k else q, c, x, y)


def _minmax(b, op: str, x, y):
    """Min or Max as Less + Where: onnxruntime 1.31's int64 Min/Max of two vectors of 2 or 3
    entries return the wrong operand for values beyond int32 (Min([0, 2**31], [0, 0]) gives
    [0, 2**31]); integer Min/Max also need opset 12."""
    if all(r[0] == "const" for r in (x, y)):
        return _fold(b, op, min if op == "Min" else max, x, y)
    first = less(b, x, y) if op == "Min" else less(b, y, x)
    return where(b, first, x, y)


class Dims:
    """Input dims (in the index type): constants when known, else read from ``Shape`` once."""

    def __init__(self, b: Builder, plan: Plan):
        self.b, self.plan = b, plan
        self._shape: tuple | None = None  # the input's Shape node, made once
        self._rank: tuple | None = None   # the Shape of that (unknown rank)
        self._cache: dict[tuple[int, ...], tuple] = {}

    def of(self, axes: list) -> tuple:
        known = [a.dim for a in axes]
        if all(isinstance(d, int) for d in known):
            return const_input(known)
        key = tuple(a.axis for a in axes)
        if key not in self._cache:
            self._cache[key] = self._read(axes)
        return self._cache[key]

    def largest(self, axes: list) -> tuple:
        """A 1-element vector at least as large as the dim of each of ``axes``: an index that is
        out of range on all of them (the largest known dim, else the largest dim of the input,
        from ``Shape``) -- no sentinel (targets.SENTINEL)."""
        known = [a.dim for a in axes]
        if all(isinstance(d, int) for d in known):
            return const_input([max(known)])
        b = self.b
        if self._shape is None:
            self._shape = b.add("Shape", X)
        top = b.add("ReduceMax", self._shape, attrs=(("keepdims", 1),))
        return top if b.dtype == "int64" else b.add("Cast", top, attrs=(("to", b.dtype),))

    def _read(self, axes: list) -> tuple:
        b = self.b
        if len(axes) == 1 and b.opset >= 15:  # Shape(start, end): one node
            ax = axes[0].axis
            dims = b.add("Shape", X, attrs=(("start", ax),) + ((("end", ax + 1),) if ax != -1 else ()))
            return dims if b.dtype == "int64" else b.add("Cast", dims, attrs=(("to", b.dtype),))
        if self._shape is None:
            self._shape = b.add("Shape", X)
        idx = ("const64", tuple(a.axis for a in axes))
        if any(a.axis < 0 for a in axes):  # unknown rank: axis + rank, a non-negative index
            if self._rank is None:
                self._rank = b.add("Shape", self._shape)
            idx = b.add("Add", ("const64", tuple(a.axis for a in axes)),
                        b.add("Mul", self._rank, ("const64", tuple(int(a.axis < 0) for a in axes))))
        dims = b.add("Gather", self._shape, idx, attrs=(("axis", 0),))
        if b.dtype != "int64":
            dims = b.add("Cast", dims, attrs=(("to", b.dtype),))
        return dims


def _values(b: Builder, plan: Plan, field: str, axes: list, runtime: dict) -> tuple:
    if runtime[field]:
        return _vector(b, field, [a.index for a in axes], plan.spec.n)
    return const_input(getattr(a, {"begin": "begin", "end": "end", "strides": "stride"}[field]) or 0 for a in axes)


def _canonical_bounds(b: Builder, plan: Plan, axes: list, runtime: dict, dims: Dims):
    """(starts, ends, steps, negative) of range ``axes``, clamped as the flavour's runtime does:
    step > 0: both into [0, dim]; step < 0: begin into [-1, dim-1] (TensorFlow) or [0, dim-1]
    (OpenVINO, -1 on an empty axis), end into [-1, dim-1]."""
    steps = _values(b, plan, "strides", axes, runtime)
    neg = less(b, steps, const_input([0]))
    dim = dims.of(axes)
    last = add(b, dim, const_input([-1]))
    hi = where(b, neg, last, dim)
    lo = where(b, neg, const_input([-1]), const_input([0]))
    lo_begin = lo if plan.flavor == TF else const_input([0])

    def canon(field: str, masked: list, lower) -> tuple:
        if all(masked):  # no value to clamp (computing it would leave dead nodes)
            return where(b, neg, last, const_input([0])) if field == "begin" else where(b, neg, const_input([-1]), dim)
        raw = _values(b, plan, field, axes, runtime)
        # OpenVINO's reverse begin: [0, dim - 1], so min(0, dim - 1) (-1 on an empty axis) below
        below = None if field == "end" or plan.flavor == TF else (lambda: _minmax(b, "Min", lower, hi))
        value = clamp(b, raw, dim, lower, hi, masked, below)
        if value is not None and not any(masked):
            return value
        fill = where(b, neg, last, const_input([0])) if field == "begin" else where(b, neg, const_input([-1]), dim)
        return fill if value is None else where(b, ("bool", tuple(masked)), fill, value)

    starts = canon("begin", [a.begin_masked for a in axes], lo_begin)
    ends = canon("end", [a.end_masked for a in axes], lo)
    return full(starts, len(axes)), full(ends, len(axes)), full(steps, len(axes)), neg


def clamp(b: Builder, raw: tuple, dim: tuple, lower: tuple, hi: tuple, ignored, below=None) -> tuple | None:
    """``raw`` (+ ``dim`` where negative) clamped into ``[lower, hi]``, entry by entry; ``ignored``
    (one flag per entry): entries the caller replaces (masked), whose values are not read.

    Constant entries beyond int32 (a sentinel written in the model, 2**40) clamp to the same
    bound on every axis shorter than 2**31 - 1: ``hi`` above, ``below()`` (default ``lower``)
    below, taken directly, so no such value reaches the graph (targets.SENTINEL).  None when
    every entry is ignored."""
    n = len(ignored)
    given = (raw[1] * n if len(raw[1]) == 1 else raw[1]) if raw[0] == "const" else (0,) * n
    beyond = [not ig and not INT32_MIN < v < INT32_MAX for ig, v in zip(ignored, given)]
    value = None
    if not all(ig or e for ig, e in zip(ignored, beyond)):
        if raw[0] == "const":  # 0 stands in for the entries not read here
            raw = const_input(0 if ig or e else v for ig, e, v in zip(ignored, beyond, given))
        fwd = where(b, less(b, raw, const_input([0])), add(b, raw, dim), raw)
        value = _minmax(b, "Min", _minmax(b, "Max", fwd, lower), hi)
    if any(beyond):
        up = tuple(e and v > 0 for e, v in zip(beyond, given))
        if all(u or not e for u, e in zip(up, beyond)):
            bound = hi
        else:
            low = lower if below is None else below()
            bound = where(b, ("bool", up), hi, low) if any(up) else low
        value = bound if value is None else where(b, ("bool", tuple(beyond)), bound, value)
    return value


def full(vec: tuple, n: int) -> tuple:
    """A folded constant of one entry, repeated to ``n`` (Slice wants equal lengths)."""
    return (vec[0], vec[1] * n) if vec[0] in ("const", "bool") and len(vec[1]) == 1 else vec


def _element(b: Builder, vec: tuple, j: int, n: int) -> tuple:
    """Entry ``j`` of a vector of ``n`` entries, as a scalar."""
    if vec[0] == "const":
        return ("scalar", vec[1][j if len(vec[1]) > 1 else 0])
    one = vec if n == 1 else b.add("Gather", vec, const_input([j]), attrs=(("axis", 0),))
    return b.add("Reshape", one, ("const64", ()))


def _emit_slices(b: Builder, cur: tuple, groups: list) -> tuple:
    """One Slice per group of (starts, ends, axes, steps) vectors; constant groups share one."""
    const = [g for g in groups if all(r[0] == "const" for r in (g[0], g[1], g[3]))]
    if const:  # first: on the input itself, whose declared shape shows the dims (targets.find_violations)
        starts, ends, axes, steps = [], [], [], []
        for s, e, ax, st in const:
            n = len(ax)
            starts += list(s[1]) * (n if len(s[1]) == 1 else 1)
            ends += list(e[1]) * (n if len(e[1]) == 1 else 1)
            axes += list(ax)
            steps += list(st[1]) * (n if len(st[1]) == 1 else 1)
        order = sorted(range(len(axes)), key=lambda k: (axes[k] < 0, axes[k]))
        cur = b.add("Slice", cur, *(const_input([v[k] for k in order]) for v in (starts, ends, axes, steps)))
    for g in [g for g in groups if g not in const]:
        cur = b.add("Slice", cur, g[0], g[1], const_input(g[2]), g[3])
    return cur


def _layout(b: Builder, plan: Plan, cur: tuple, target, shrunk: list) -> tuple:
    """Remove the shrunk (size-1) axes and insert the new ones: Squeeze + Unsqueeze, or one
    Reshape (allowzero) to a shape read from ``Shape`` where the target forbids reshaping a
    possibly empty tensor with dynamic dims (OpenVINO infers those dims from the element count)."""
    from .targets import RESHAPE_EMPTY
    inserted = plan.inserted_axes
    out_shape = plan.output_shape
    if not shrunk and not inserted:
        return cur
    static = out_shape is not None and all(isinstance(d, int) for d in out_shape)
    if target.forbids(RESHAPE_EMPTY) and out_shape is not None and static and 0 in out_shape and b.opset >= 14:
        # the plan knows the empty output's shape (OpenVINO may not: runtime bounds)
        return b.add("Reshape", cur, ("const64", tuple(out_shape)), attrs=(("allowzero", 1),))
    if target.forbids(RESHAPE_EMPTY) and out_shape is not None and not static:
        copied = _copy_shape(plan, out_shape)
        if copied is not None:  # every dynamic dim stays in place: a constant shape, 0 copies it
            return b.add("Reshape", cur, ("const64", copied))
    if target.forbids(RESHAPE_EMPTY) and out_shape is not None and not static and b.opset >= 14:
        src = []
        for o in plan.outputs:  # known rank: each output is a new axis (no source) or an input axis
            src.append(plan.input_rank if o.source is None else plan.axes[o.source].axis)
        shape = b.add("Shape", cur)
        if inserted:  # new axes read an appended 1
            shape = b.add("Concat", shape, ("const64", (1,)), attrs=(("axis", 0),))
        shape = b.add("Gather", shape, ("const64", tuple(src)), attrs=(("axis", 0),))
        empty = [j for j, d in enumerate(out_shape) if isinstance(d, int) and d == 0]
        if empty:  # OpenVINO fails to compile a Reshape (allowzero) to a computed shape holding a
            # 0 past the input's rank: the empty output is an Expand of a constant-shaped empty
            ones = tuple(0 if j == empty[0] else 1 for j in range(len(out_shape)))
            flat = b.add("Reshape", cur, ("const64", ones), attrs=(("allowzero", 1),))
            return b.add("Expand", flat, shape)
        return b.add("Reshape", cur, shape, attrs=(("allowzero", 1),))
    if shrunk:
        cur = b.add("Squeeze", cur, axes=tuple(sorted(shrunk, key=lambda ax: (ax < 0, ax))))
    if inserted:
        cur = b.add("Unsqueeze", cur, axes=tuple(sorted(inserted, key=lambda j: (j < 0, j))))
    return cur


def _copy_shape(plan: Plan, out_shape) -> tuple | None:
    """A Reshape shape (allowzero 0) for the layout step when every dynamic output dim sits at
    the position of its input axis: 0 there (copy the dim, exact for a size of 0 too), the
    known sizes elsewhere; None otherwise."""
    shape = []
    for j, (o, d) in enumerate(zip(plan.outputs, out_shape)):
        if isinstance(d, int) and d > 0:
            shape.append(d)
        elif o.source is not None and plan.axes[o.source].axis == j and not isinstance(d, int):
            shape.append(0)
        else:
            return None
    return tuple(shape)


def _slice_step_allowed(a, target) -> bool:
    """Whether range axis ``a`` may go into ``Slice`` with its step (else Gather of a Range)."""
    from .targets import NEGATIVE_STEP, NEGATIVE_STEP_MAYBE_EMPTY
    if a.stride is not None and a.stride > 0:
        return True
    if target.forbids(NEGATIVE_STEP):
        return False
    # known non-empty, and constant bounds: the Slice then has the plan's (known) size, which
    # shape inference sees too
    return not target.forbids(NEGATIVE_STEP_MAYBE_EMPTY) or (
        a.stride is not None and isinstance(a.dim, int) and a.dim > 0 and isinstance(a.size, int))


def _checked_shrink_index(b: Builder, a, begins, runtime: dict, dims: Dims, clamp_below: bool = False) -> tuple:
    """The 1-D, non-negative index a shrink axis takes, at or beyond the dim exactly where the
    framework raises (index out of range; TF: a stride <= 0, via the guarded ``begins``): a
    ``Gather`` of it then fails at run time in onnxruntime and onnx's reference, as the
    framework does (OpenVINO raises no run-time error: docs/design.md, Targets).
    ``clamp_below`` (TFLite): an index below ``-dim`` takes element 0, as LiteRT does."""
    if begins is None and not runtime["begin"]:
        if a.begin >= 0:  # a constant index needs no dim
            return const_input([a.begin])
        if a.begin == -1:  # dim - 1, or 1 (out of range) on an empty axis: Abs, one node
            return _fold(b, "Abs", abs, add(b, dims.of([a]), const_input([-1])))
    raw = _shrink_index(b, a, begins, scalar=False)
    dim = dims.of([a])
    fwd = where(b, less(b, raw, const_input([0])), add(b, raw, dim), raw)
    below = const_input([0]) if clamp_below else dim
    return where(b, less(b, fwd, const_input([0])), below, fwd)  # below -dim: dim, out of range (TFLite: 0)


def _guard(b: Builder, index: tuple, dim: tuple) -> tuple:
    """``index`` plus a zero read by a ``Gather`` of a constant ``[0]`` at an index out of range
    when ``index`` is not below ``dim``: it fails at run time in onnxruntime and onnx's reference
    even on an empty tensor (where a ``Slice`` is empty and onnx's reference ``Gather`` reads
    no index)."""
    probe = where(b, less(b, index, dim), const_input([0]), const_input([1]))
    if probe[0] == "const":  # known at conversion (in range: out of range is rejected there)
        return index
    return add(b, index, b.add("Gather", const_input([0]), probe, attrs=(("axis", 0),)))


def lower_for_target(plan: Plan, target, opset: int = 13, index_types: dict | None = None,
                     prelude: Prelude | None = None):
    """(ops, notes, index dtype) computing ``plan`` within ``target``'s constraints (lowering/targets.py).

    Shrinks leave the axis for the layout step: ``Slice(i, i + 1)`` where the index is checked at
    conversion, else ``Gather`` of a 1-D non-negative index that is out of range exactly where the
    framework raises (no 0-d index; on a statically empty tensor, where OpenVINO's CPU plugin
    crashes on a ``Gather``, a ``Slice`` whose index goes through :func:`_guard`)."""
    return _lower_for_target(plan, target, opset=opset, index_types=index_types, prelude=prelude)


@_length_checked
def _lower_for_target(b: Builder, plan: Plan, runtime: dict, target):
    from .targets import SENTINEL
    dims = Dims(b, plan)
    notes: list[str] = []
    groups: list = []  # Slice argument groups: (starts, ends, axes, steps)
    known_empty = any(d == 0 for d in (plan.input_shape or ()) if isinstance(d, int)) or any(
        a.size == 0 for a in plan.axes if isinstance(a.size, int))

    ranges = [a for a in plan.axes if a.kind == RANGE and not a.is_identity]
    ranges.sort(key=lambda a: (a.axis < 0, a.axis))
    by_slice = [a for a in ranges if _slice_step_allowed(a, target)]
    by_gather = [a for a in ranges if a not in by_slice]
    if by_slice:
        starts, ends, steps, neg = _canonical_bounds(b, plan, by_slice, runtime, dims)
        if any(a.stride is None or a.stride < 0 for a in by_slice):  # a canonical -1 ("before element 0") is no Slice bound
            ends = where(b, less(b, ends, const_input([0])), const_input([-(2 ** 63)]), ends)
            ends = where(b, less(b, starts, const_input([0])), const_input([0]), ends)  # TF: begin before element 0
            starts = _minmax(b, "Max", starts, const_input([0]))
        groups.append((starts, ends, tuple(a.axis for a in by_slice), steps))

    shrinks = [a for a in plan.axes if a.kind == INDEX]
    # TF with runtime strides: the guarded vector (an index beyond any axis where a stride is <= 0)
    top = (lambda: dims.largest(shrinks)) if target.forbids(SENTINEL) else None
    begins = _shrink_begins(b, plan, shrinks, runtime, top) if shrinks else None
    guarded = begins is not None and not runtime["begin"]
    picks = []  # (axis, index) of shrinks whose validity shows only at run time
    for a in shrinks:
        if a.start is not None and not runtime["begin"] and not guarded:  # checked at conversion
            if a.dim != 1:
                groups.append((const_input([a.start]), const_input([a.start + 1]), (a.axis,), const_input([1])))
            continue
        index = _checked_shrink_index(b, a, begins, runtime, dims,
                                      clamp_below=plan.source is not None and plan.source.flavor == "tflite")
        if begins is not None or known_empty:
            # runtime values: through the guard (onnx's reference reads no index of an empty tensor)
            index = _guard(b, index, dims.of([a]))
        if known_empty:  # OpenVINO's CPU plugin crashes on a Gather of a statically empty tensor
            groups.append((index, add(b, index, const_input([1])), (a.axis,), const_input([1])))
        else:
            picks.append((a.axis, index))
    cur = _emit_slices(b, X, groups)
    for axis, index in picks:  # Gather fails where the framework does: an index out of range
        cur = b.add("Gather", cur, index, attrs=(("axis", axis),))

    if by_gather:
        starts, ends, steps, neg = _canonical_bounds(b, plan, by_gather, runtime, dims)
        # an end on the wrong side of the start means no element; OpenVINO's Range counts
        # |end - start| elements there (Range(0, 2, -1) gives [0, -1])
        if neg[0] == "bool" and set(neg[1]) == {True} and ends[0] == "const" and set(ends[1]) == {-1}:
            pass  # "before element 0": never beyond a (clamped) start
        elif neg[0] == "bool" and len(set(neg[1])) == 1:  # one sign: one of the two
            ends = _minmax(b, "Min" if neg[1][0] else "Max", ends, starts)
        else:
            ends = where(b, neg, _minmax(b, "Min", ends, starts), _minmax(b, "Max", ends, starts))
        for j, a in enumerate(by_gather):
            if starts[0] == ends[0] == steps[0] == "const":
                idx = tuple(range(starts[1][j], ends[1][j], steps[1][j]))
                if len(idx) <= 1 or known_empty:
                    # a Slice: cheaper for one element; OpenVINO drops the axis of an empty Gather
                    # and crashes on a Gather of a statically empty tensor (only the shape matters)
                    first = idx[0] if len(idx) == 1 else 0
                    cur = b.add("Slice", cur, const_input([first]), const_input([first + len(idx)]), const_input([a.axis]),
                                const_input([1]))
                    continue
                idx = const_input(idx)
            else:
                idx = b.add("Range", *(_element(b, v, j, len(by_gather)) for v in (starts, ends, steps)))
                if not (ends[0] == "const" and ends[1][j if len(ends[1]) > 1 else 0] >= 0):
                    # an end of -1 ("before element 0"): onnxruntime's optimiser (GatherToSliceFusion,
                    # ORT_ENABLE_EXTENDED and up) turns Range -> Gather into a Slice with Range's
                    # arguments, which reads -1 as the last element (empty).  Abs of the
                    # non-negative indices changes nothing and keeps the pair apart.
                    idx = b.add("Abs", idx)
            cur = b.add("Gather", cur, idx, attrs=(("axis", a.axis),))
        notes.append("reverse or runtime steps: Gather of the computed indices (no negative Slice step)")

    if b.finish is not None:  # it sets the output's shape itself (OpenVINO, given a Reshape of the
        cur = b.finish(b, cur)  # layout's Reshape of an empty tensor, keeps the first one's shape)
    else:
        cur = _layout(b, plan, cur, target, [a.axis for a in shrinks])
    if not b.ops:
        b.add("Identity", cur)
    return tuple(b.ops), tuple(notes), b.dtype
