"""TFLite's indices computed in the graph, for specs with run-time begin/end/strides.

When TensorFlow, reading the written vectors, would pick other elements than TFLite
(an ``offset``, an ellipsis, items TFLite drops, begin_mask on a shrink index: see
:func:`plan_tflite.runtime_prelude`), the plan's TensorFlow spec is TFLite's dense
one with begin and end given at run time.  :func:`seed_indices` computes those
vectors in front of the dynamic lowering, with the rules of LiteRT's kernel
(``StridedSliceStartForAxis`` / ``StridedSliceEndForAxis``), per effective dim k:

* the written values are re-indexed to the dense positions (``Gather``);
* ``start = dim - 1 or 0`` where begin_mask is set (by the stride's sign), else
  ``begin (+ dim when < 0)`` clamped into ``[0, dim]`` (stride > 0) or ``[-1, dim - 1]``;
* ``end = end (+ start with offset) (+ dim when < 0)``, clamped the same way; end_mask
  gives ``dim`` or ``-1``;
* both go to TensorFlow's reading unchanged, except ``-1`` ("before element 0"),
  which becomes ``-1 - dim`` (TensorFlow adds dim, then clamps to -1).

With ``offset``, TFLite sizes the output from ``end`` alone (``end[k]`` at effective
position k, with that dim's stride) and writes the elements its loop visits, in order,
into it.  From opset 14 the lowering ends the same way: a ``Reshape`` (allowzero) of what
the loop visits to that shape -- exact where the loop visits as many elements as the
output holds (in the output's shape or not, e.g. both empty), and a run-time failure
where it visits another number (TFLite's result is undefined there).
"""

from __future__ import annotations

from types import SimpleNamespace

from .dynamic import add, Builder, const_input, Dims, full, less, where, clamp
from ..semantics.plan import Dim, Plan
from ..semantics.plan_tflite import ITEM, NEW, DenseEntry, dense_entries, runtime_prelude


def seed_indices(b: Builder, plan: Plan) -> None:
    """Put TFLite's canonical begin/end (and the dense strides) where the dynamic lowering
    reads its run-time vectors (``b.inp``), when the plan needs them."""
    src, shape = plan.source, plan.input_shape
    if src is None or src.flavor != "tflite" or shape is None:
        return
    rank = len(shape)
    if not runtime_prelude(src, rank):
        return
    entries = dense_entries(src, rank)
    items = tuple(e.kind == ITEM for e in entries)
    at = [e.index if e.kind == ITEM else 0 for e in entries]

    def field(name: str) -> tuple:
        if getattr(src, name) is not None:
            return const_input(getattr(src, name)[i] for i in at)
        raw = b.inp(name)
        if at != list(range(src.n)):
            raw = b.add("Gather", raw, const_input(at), attrs=(("axis", 0),))
        return raw

    steps = where(b, ("bool", items), field("strides"), const_input([1] * len(entries)))
    dims = _dims(b, plan, shape, entries)
    neg = less(b, steps, const_input([0]))
    last = add(b, dims, const_input([-1]))
    lo = where(b, neg, const_input([-1]), const_input([0]))
    hi = where(b, neg, last, dims)

    def masked(name: str) -> tuple:
        return ("bool", tuple(e.kind == ITEM and src.bit(name, e.item) for e in entries))

    def clamped(v: tuple, mask: tuple, fill: tuple) -> tuple:
        value = clamp(b, v, dims, lo, hi, mask[1])
        return fill if value is None else where(b, mask, fill, value)

    start = clamped(field("begin"), masked("begin_mask"), where(b, neg, last, const_input([0])))
    end = field("end")
    if src.offset:
        end = add(b, end, start)
    end = clamped(end, masked("end_mask"), where(b, neg, const_input([-1]), dims))

    def tf_reading(v: tuple) -> tuple:  # -1 ("before element 0") -> -1 - dim
        return where(b, less(b, v, const_input([0])), add(b, v, _neg(b, dims)), v)

    raw_end = b.inp("end") if src.end is None else const_input(src.end)
    b._inputs["begin"] = full(tf_reading(start), len(entries))  # the builder's cache
    b._inputs["end"] = full(tf_reading(end), len(entries))
    if src.strides is None:
        b._inputs["strides"] = steps
    kept = [k for k, e in enumerate(entries) if not (e.kind == ITEM and src.bit("shrink_axis_mask", e.item))]
    if src.offset and kept and b.opset >= 14:
        b.finish = lambda b, cur: _sized_from_end(b, cur, raw_end, steps, kept)


def _sized_from_end(b: Builder, cur: tuple, raw_end: tuple, steps: tuple, kept: list[int]) -> tuple:
    """``cur`` reshaped (allowzero) to the shape TFLite gives an ``offset`` output: per kept
    effective dim k, ``max(0, ceil(end[k] / stride_k))`` from the *written* end (a read past
    its length fails, where TFLite reads outside the tensor).  A shape known at conversion is a
    constant: OpenVINO reshapes an empty Gather result to a computed shape wrongly."""
    if raw_end[0] == steps[0] == "const" and kept[-1] < len(raw_end[1]):
        sizes = tuple(max(0, -(-raw_end[1][k] // steps[1][k])) for k in kept)
        return b.add("Reshape", cur, ("const64", sizes), attrs=(("allowzero", 1),))

    def at_kept(v: tuple) -> tuple:
        out = b.add("Gather", v, ("const64", tuple(kept)), attrs=(("axis", 0),))
        return out if b.dtype == "int64" else b.add("Cast", out, attrs=(("to", "int64"),))

    end, step = at_kept(raw_end), at_kept(steps)
    zero, one = ("const64", (0,)), ("const64", (1,))
    toward = b.add("Where", b.add("Less", step, zero), b.add("Neg", end), end)  # end in the stride's direction
    size = b.add("Abs", step)
    size = b.add("Where", b.add("Less", size, one), one, size)  # (a stride of 0 fails elsewhere; no division by 0)
    # ceil(toward / size) for toward > 0, else 0: both operands of the Div non-negative
    top = b.add("Where", b.add("Less", zero, toward), b.add("Sub", b.add("Add", toward, size), one), zero)
    return b.add("Reshape", cur, b.add("Div", top, size), attrs=(("allowzero", 1),))


def _neg(b: Builder, v: tuple) -> tuple:
    return const_input(-x for x in v[1]) if v[0] == "const" else b.add("Neg", v)


def _dims(b: Builder, plan: Plan, shape: tuple[Dim, ...], entries: list[DenseEntry]) -> tuple:
    """The dim of each effective dim (1 for a new axis, which has no input axis): constants, or
    read from ``Shape``."""
    axes = [SimpleNamespace(axis=e.axis or 0, dim=1 if e.axis is None else shape[e.axis]) for e in entries]
    dims = Dims(b, plan).of(axes)
    return where(b, ("bool", tuple(e.kind == NEW for e in entries)), const_input([1] * len(entries)), dims)
