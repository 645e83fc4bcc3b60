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

With ``offset``, TFLite sizes the output from ``end`` alone; where its loop visits
another number of elements (the begin moved the range off the input) its result is
undefined.  The lowering then yields what the loop visits.
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

    b._inputs["begin"] = full(tf_reading(start), len(entries))  # the builder's cache
    b._inputs["end"] = full(tf_reading(end), len(entries))
    if src.strides is None:
        b._inputs["strides"] = steps


def _neg(b: Builder, v: tuple) -> tuple:
    return const_input(-x for x in v[1]) if v[0] == "const" else b.add("Neg", v)


def _dims(b: Builder, plan: Plan, shape: tuple[Dim, ...], entries: list[DenseEntry]) -> tuple:
    """The dim of each effective dim (1 for a new axis, which has no input axis): constants, or
    read from ``Shape``."""
    axes = [SimpleNamespace(axis=e.axis or 0, dim=1 if e.axis is None else shape[e.axis]) for e in entries]
    dims = Dims(b, plan).of(axes)
    return where(b, ("bool", tuple(e.kind == NEW for e in entries)), const_input([1] * len(entries)), dims)
