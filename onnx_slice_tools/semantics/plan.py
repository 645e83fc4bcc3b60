"""The canonical plan: what a StridedSlice does to an input of a given shape.

Pure Python, no ONNX.  :func:`make_plan` follows the flavour's runtime:

1. validate the spec as a whole (lengths, masks, several ellipses);
2. sparse spec -> dense spec: find the ellipsis (implicit at the end when no bit
   is set below ``n``), decide each index's role with the precedence
   ellipsis > new_axis > shrink/range, and size the ellipsis;
3. per input axis: canonical start and length when the dim is known, the raw
   begin/end/stride and masks otherwise, and the flavour's errors;
4. the output: kept axes and inserted axes in order.

The lowering, the numpy reference and ``explain`` all read the same plan.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable, Generic, NamedTuple, Sequence, TypeVar, Union, overload

from ..errors import StridedSliceError
from .spec import MASK_NAMES, OPENVINO, TF, TFLITE, SliceSpec, made_at_once

Dim = Union[int, str, None]  # known size, symbolic name, or unknown

ALL = "all"        # the axis is kept whole (ellipsis, implicit or explicit)
RANGE = "range"    # begin:end:stride
INDEX = "index"    # a single element, the axis is removed (shrink)

NEW = "new"        # an inserted axis of size 1
AXIS = "axis"      # an output axis coming from an input axis
REST = "rest"      # unknown rank: the axes the ellipsis covers, count unknown


_T = TypeVar("_T")


class _computed_once(Generic[_T]):
    """A property computed on first access and kept in the instance's ``__dict__`` (later reads
    find it there without calling this descriptor): ``functools.cached_property`` without the
    per-class lock it takes before Python 3.12, which a rewrite reading one plan per node pays
    for on every plan.  For immutable objects only (a frozen dataclass: its fields never change,
    and ``__dict__`` is writable even when ``__setattr__`` is not)."""

    def __init__(self, fn: Callable[..., _T]):
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _computed_once[_T]: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> _T: ...

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.fn(obj)
        return value


@dataclass(frozen=True)
class AxisPlan:
    """What happens to one input axis.

    ``axis`` is the input axis; when the input rank is unknown, axes after the
    ellipsis are negative (counted from the end).  ``begin``/``end``/``stride``
    are the raw values of the spec index (``None`` = given at run time);
    ``begin_masked``/``end_masked`` tell whether a mask replaced them.  When the
    dim is known, ``start`` and ``size`` are canonical: the axis yields elements
    ``start + k * stride`` for ``k < size``.
    """

    axis: int
    kind: str
    index: int | None
    dim: Dim
    begin: int | None = 0
    end: int | None = 0
    stride: int | None = 1
    begin_masked: bool = False
    end_masked: bool = False
    start: int | None = None
    size: Dim = None

    @property
    def is_identity(self) -> bool:
        """True when the axis is provably left exactly as it is, whatever its size."""
        if self.kind == ALL:
            return True
        if self.kind != RANGE:
            return False
        if isinstance(self.dim, int) and isinstance(self.size, int):
            return self.size == self.dim and (self.stride == 1 or self.dim <= 1)
        return self.stride == 1 and self.end_masked and (self.begin_masked or self.begin == 0)


@dataclass(frozen=True)
class OutDim:
    """One output axis: from input axis ``axes[source]``, a new axis, or (unknown rank) the rest."""

    kind: str
    source: int | None = None
    size: Dim = None
    index: int | None = None  # spec position of a new axis


@dataclass(frozen=True)
class Plan:
    spec: SliceSpec
    input_shape: tuple[Dim, ...] | None
    axes: tuple[AxisPlan, ...]
    outputs: tuple[OutDim, ...]
    notes: tuple[str, ...] = field(default=())
    #: The spec as written when another flavour's rules were translated into ``spec``
    #: (TFLite: ``spec`` is the TensorFlow spec that does exactly what TFLite does).
    source: SliceSpec | None = None

    @property
    def flavor(self) -> str:
        return self.spec.flavor

    @property
    def input_rank(self) -> int | None:
        return None if self.input_shape is None else len(self.input_shape)

    @_computed_once  # (a plan is immutable; the reference applies one plan to many tensors)
    def output_shape(self) -> tuple[Dim, ...] | None:
        if any(o.kind == REST for o in self.outputs):
            return None
        return tuple(o.size for o in self.outputs)

    @property
    def output_rank(self) -> int | None:
        shape = self.output_shape
        return None if shape is None else len(shape)

    @property
    def removed_axes(self) -> tuple[int, ...]:
        return tuple(a.axis for a in self.axes if a.kind == INDEX)

    @property
    def inserted_axes(self) -> tuple[int, ...]:
        """Output positions of new axes; negative (from the end) after an unknown-rank ellipsis."""
        out = []
        rest = next((j for j, o in enumerate(self.outputs) if o.kind == REST), None)
        for j, o in enumerate(self.outputs):
            if o.kind == NEW:
                out.append(j if rest is None or j < rest else j - len(self.outputs))
        return tuple(out)


# --------------------------------------------------------------------------- validation

def _check_lengths(flavor: str, lengths: tuple, runtime_length: int | None, ellipsis_mask: int,
                   mask_lengths: tuple | None) -> int:
    """n, or the flavour's error for the lengths of begin/end/strides (``lengths``: theirs, None for a
    runtime field), the ellipsis mask and (OpenVINO) the mask lists' lengths."""
    nb, ne, ns = lengths
    if nb is not None and nb == ne == ns:
        n = ns  # (the usual static spec: nothing to compare)
    else:
        given = {name: k for name, k in zip(("begin", "end", "strides"), lengths) if k is not None}
        n = _n_of(lengths, runtime_length)
        if len(set(given.values())) > 1:
            got = ", ".join(f"{k} has {v}" for k, v in given.items())
            raise StridedSliceError(f"begin, end and strides must have the same length ({got})",
                                    field="strides")
    if flavor == TF:
        if n >= 32:
            raise StridedSliceError(f"TensorFlow allows at most 31 indices (32-bit masks), got {n}",
                                    field="begin")
        if ellipsis_mask & (ellipsis_mask - 1):
            raise StridedSliceError("multiple ellipses in slice spec not allowed (ellipsis_mask="
                                    f"{ellipsis_mask:#b})", field="ellipsis_mask")
    else:
        mask_lengths = mask_lengths or (n,) * 5
        ref = mask_lengths[0]
        for name, length in zip(MASK_NAMES, mask_lengths):
            if length and length != ref:
                raise StridedSliceError(
                    f"OpenVINO requires every mask to be empty or as long as begin_mask ({ref}); "
                    f"{name} has {length} entries", field=name)
        if bin(ellipsis_mask).count("1") > 1:
            raise StridedSliceError("at most one ellipsis is allowed (ellipsis_mask has "
                                    f"{bin(ellipsis_mask).count('1')} ones)", field="ellipsis_mask")
    return n


def _n_of(lengths: tuple, runtime_length: int | None) -> int:
    """:attr:`SliceSpec.n` from the lengths of begin/end/strides (None for a runtime field)."""
    nb, ne, ns = lengths
    for k in (ns, nb, ne):
        if k is not None:
            return k
    if runtime_length is None:
        raise StridedSliceError("the length of begin/end/strides is unknown", field="strides")
    return runtime_length


# --------------------------------------------------------------------------- per-axis rules

def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def tf_range(begin: int, end: int, stride: int, begin_masked: bool, end_masked: bool, dim: int):
    """TensorFlow's canonical (start, size) of begin:end:stride on a dim of known size."""
    lo, hi = (0, dim) if stride > 0 else (-1, dim - 1)

    def canon(x: int, masked: bool, is_end: bool) -> int:
        if masked:
            return (hi if is_end else lo) if stride > 0 else (lo if is_end else hi)
        x = x + dim if x < 0 else x
        return min(max(x, lo), hi)

    b = canon(begin, begin_masked, False)
    e = canon(end, end_masked, True)
    interval = e - b
    if interval == 0 or (interval < 0) != (stride < 0):
        return b, 0
    return b, _ceil_div(abs(interval), abs(stride))


def openvino_range(begin: int, end: int, stride: int, begin_masked: bool, end_masked: bool, dim: int):
    """OpenVINO's canonical (start, size) of begin:end:stride on a dim of known size."""
    rev = stride < 0
    if begin_masked:
        b = dim - 1 if rev else 0
    else:
        b = begin + dim if begin < 0 else begin
    b = max(0, min(dim - (1 if rev else 0), b))
    if end_masked:
        e = -1 if rev else dim
    else:
        e = end + dim if end < 0 else end
    e = max(-1 if rev else 0, min(dim, e))
    if dim == 0:
        # Shape inference says 0; the reference evaluator's plan says 1 on a reverse
        # slice of an empty axis and then reads out of bounds.  See docs/semantics.md.
        return 0, 0
    size = _ceil_div(e - b, stride) if not rev else _ceil_div(b - e, -stride)
    return b, max(0, size)


def _whole_size(a: AxisPlan) -> Dim:
    """Output length of a range over a dim that is not a known int, when it is still known."""
    if a.stride is None or a.begin is None and not a.begin_masked or a.end is None and not a.end_masked:
        return None
    if a.stride == 1 and a.end_masked and (a.begin_masked or a.begin == 0):
        return a.dim
    if a.stride == -1 and a.end_masked and (a.begin_masked or a.begin == -1):
        return a.dim
    return None


@functools.lru_cache(maxsize=1 << 13, typed=True)
def _axis_plan(flavor: str, begin: int | None, end: int | None, stride: int | None, bm: bool, em: bool,
               i: int, axis: int, dim: Dim, shrink: bool) -> AxisPlan:
    """One axis's plan from the scalars it depends on (a pure function of them, AxisPlan frozen):
    memoized, since distinct specs share most of their axes (and a spec is planned at several
    input sizes).  ``typed``: an int and a numpy integer of one value are kept apart, so a plan
    holds the types its caller passed.  A rejection raises and is not memoized.  Bounded (a few
    MiB at most stay in a caller's process)."""
    if shrink:
        if flavor == TF and stride is not None:
            if stride == 0:
                raise StridedSliceError("must be non-zero", index=i, field="strides")
            if stride < 0:
                raise StridedSliceError(
                    f"a shrink axis (an integer index) needs a positive stride, got {stride} "
                    "(TensorFlow: only stride 1 allowed on non-range indexing)", index=i, field="strides")
        start = None
        if isinstance(dim, int) and begin is not None:
            fwd = begin + dim if begin < 0 else begin
            if not 0 <= fwd < dim:
                if flavor == TF:
                    reason = f"slice index {fwd} of dimension {axis} out of bounds (dim size {dim})"
                else:
                    reason = f"shrink index {begin} is out of range for dimension {axis} of size {dim}"
                raise StridedSliceError(reason, index=i, field="begin")
            start = fwd
        return AxisPlan(axis, INDEX, i, dim, begin, end, stride, bm, em, start=start, size=1)

    if stride is not None and stride == 0:
        raise StridedSliceError("must be non-zero", index=i, field="strides")
    if isinstance(dim, int) and stride is not None and (begin is not None or bm) and (end is not None or em):
        rule = tf_range if flavor == TF else openvino_range
        start, size = rule(begin or 0, end or 0, stride, bm, em, dim)
        return AxisPlan(axis, RANGE, i, dim, begin, end, stride, bm, em, start=start, size=size)
    a = AxisPlan(axis, RANGE, i, dim, begin, end, stride, bm, em)
    from dataclasses import replace
    return replace(a, size=_whole_size(a))


# --------------------------------------------------------------------------- the plan

@functools.lru_cache(maxsize=1 << 12, typed=True)
def _whole_axis(axis: int, dim: Dim) -> AxisPlan:
    """The plan of an axis the ellipsis keeps whole (frozen: one object per (axis, dim))."""
    return AxisPlan(axis, ALL, None, dim, begin_masked=True, end_masked=True, size=dim)


@functools.lru_cache(maxsize=1 << 12, typed=True)
def _out_axis(source: int, size: Dim) -> OutDim:
    """The output axis from ``axes[source]`` (frozen: one object per (source, size))."""
    return OutDim(AXIS, source, size)


@functools.lru_cache(maxsize=1 << 12, typed=True)
def _roles_of(masks: tuple[int, ...], n: int) -> tuple[tuple[str, ...], int, tuple[str, ...], int, int]:
    """Each index's role (ellipsis/new/shrink/range), the ellipsis position (n when implicit), the
    notes, and the number of real (shrink or range) indices before and after the ellipsis, from the
    masks (in MASK_NAMES order) and n, the only fields it reads: memoized."""
    mask = dict(zip(MASK_NAMES, masks))
    roles, notes = [], []
    ellipsis_at = n
    for i in range(n):
        e, na, sh = ((mask[m] >> i) & 1 for m in ("ellipsis_mask", "new_axis_mask", "shrink_axis_mask"))
        if e:
            roles.append("ellipsis")
            ellipsis_at = i
            if na or sh:
                which = " and ".join(m for m, on in (("new_axis_mask", na), ("shrink_axis_mask", sh)) if on)
                notes.append(f"index {i}: ellipsis_mask wins over {which} (the bit is ignored)")
        elif na:
            roles.append("new")
            if sh:
                notes.append(f"index {i}: new_axis_mask wins over shrink_axis_mask (the bit is ignored)")
        elif sh:
            roles.append("shrink")
        else:
            roles.append("range")
    high = {m: mask[m] >> n for m in MASK_NAMES if mask[m] >> n}
    if high:
        notes.append("mask bits at positions >= len(begin) are ignored: "
                     + ", ".join(f"{m}" for m in high))
    real_before = sum(1 for r in roles[:ellipsis_at] if r in ("shrink", "range"))
    real_after = sum(1 for r in roles[ellipsis_at + 1:] if r in ("shrink", "range"))
    return tuple(roles), ellipsis_at, tuple(notes), real_before, real_after


def _dims_of(shape: Sequence) -> tuple[Dim, ...]:
    """A shape's dims as ints, names or None (numpy integers made ints)."""
    return tuple((int(d) if d is not None and not isinstance(d, str) else d) for d in shape)


@functools.lru_cache(maxsize=1 << 10)
def _shape_tuple(shape: tuple) -> tuple[Dim, ...]:
    """:func:`_dims_of`, memoized: a model slices a few tensors many times.  (Equal dims convert
    to equal ints, so a hit for an equal shape of other number types gives what converting it
    would.)"""
    return _dims_of(shape)


def _openvino_scalar_shrink(ellipsis_mask: int, new_axis_mask: int, n: int, roles: Sequence[str]) -> int | None:
    """OpenVINO accepts one shrink index on a scalar input when its rank check passes or is
    skipped: ``rank + (new_axis_mask bits, past len(begin) too) >= len(begin)``, skipped when
    ellipsis_mask has any bit (past len(begin) too).  Its slice plan then treats the
    scalar as shape [1] (begin must be 0 or -1: :func:`_planned` checks the number).  The
    shrink's position, or None when the spec is rejected as usual."""
    i = next(k for k, r in enumerate(roles) if r in ("shrink", "range"))
    rank_check = not ellipsis_mask  # any ellipsis bit, even past len(begin), skips it
    if roles[i] != "shrink" or rank_check and bin(new_axis_mask).count("1") < n:
        return None
    return i


def make_plan(spec: SliceSpec, shape: Sequence[Dim] | None) -> Plan:
    """The canonical plan of ``spec`` on an input of ``shape`` (None: unknown rank).

    Raises :class:`StridedSliceError` where the flavour's runtime rejects the spec.
    Dims may be ints, symbolic names (str) or None (unknown).

    In two parts, always both: :func:`_frame` (what the flavour, the masks, the lengths and the
    shape decide -- validation, roles, which input axis each index reads -- memoized, as a model
    slices one tensor by many specs of one structure) and :func:`_planned` (the numbers of
    begin/end/strides on that frame, axis by axis).
    """
    if spec.flavor == TFLITE:
        from .plan_tflite import tflite_as_tf
        tf_spec, notes = tflite_as_tf(spec, shape)
        from dataclasses import replace
        plan = make_plan(tf_spec, shape)
        return replace(plan, source=spec, notes=tuple(notes) + plan.notes)
    shape_t = None
    if shape is not None:
        try:
            shape_t = _shape_tuple(tuple(shape))
        except TypeError:  # (an unhashable dim: converted as it is)
            shape_t = _dims_of(shape)
    begin, end, strides = spec.begin, spec.end, spec.strides
    key = (spec.flavor, spec.begin_mask, spec.end_mask, spec.ellipsis_mask, spec.new_axis_mask,
           spec.shrink_axis_mask, spec.mask_lengths,
           (None if begin is None else len(begin), None if end is None else len(end),
            None if strides is None else len(strides)), spec.runtime_length, shape_t)
    try:
        frame = _frame(*key)
    except TypeError:  # (a dim that stays unhashable: the frame made without the memo)
        frame = _frame.__wrapped__(*key)
    return _planned(spec, frame)


class _Frame(NamedTuple):
    """What :func:`_frame` decides of a plan before any number of begin/end/strides."""

    shape: tuple[Dim, ...] | None
    notes: tuple[str, ...]
    #: in the order the plan lists them: ``(_INDEXED, i, axis, dim, shrink, begin_masked,
    #: end_masked, source)`` for the input axis spec index ``i`` reads (``source``: its position
    #: among the plan's axes, its output's source when it is a range), ``(_WHOLE, AxisPlan, OutDim)``
    #: for an axis the ellipsis keeps whole, ``(_OUTPUT, OutDim)`` for a new axis or the rest
    slots: tuple
    #: OpenVINO's shrink of a scalar input: the index whose begin must be 0 or -1
    scalar_shrink: int | None
    #: an output stands for the axes an ellipsis covers on an input of unknown rank
    rest: bool


_INDEXED, _WHOLE, _OUTPUT = 0, 1, 2


@functools.lru_cache(maxsize=1 << 12, typed=True)
def _frame(flavor: str, begin_mask: int, end_mask: int, ellipsis_mask: int, new_axis_mask: int,
           shrink_axis_mask: int, mask_lengths: tuple | None, lengths: tuple, runtime_length: int | None,
           shape_t: tuple[Dim, ...] | None) -> _Frame:
    """Steps 1, 2 and the layout of steps 3 and 4 of the module doc, from the only fields of the
    spec they read (``lengths``: of begin/end/strides, None for a runtime one) and the shape:
    memoized.  A rejection raises and is not memoized."""
    n = _check_lengths(flavor, lengths, runtime_length, ellipsis_mask, mask_lengths)
    roles, ellipsis_at, notes_t, real_before, real_after = _roles_of(
        (begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask), n)
    notes = list(notes_t)
    rank = None if shape_t is None else len(shape_t)

    scalar_shrink = None
    if flavor == OPENVINO and rank == 0 and real_before + real_after == 1:
        scalar_shrink = _openvino_scalar_shrink(ellipsis_mask, new_axis_mask, n, roles)
        if scalar_shrink is not None:
            real_before = real_after = 0
            roles = roles[:scalar_shrink] + ("scalar",) + roles[scalar_shrink + 1:]
            notes.append(f"index {scalar_shrink}: OpenVINO reads a scalar input as shape [1] here, so the "
                         "shrink keeps the scalar (its rank check counts new_axis_mask bits past len(begin))")
    if rank is not None and real_before + real_after > rank:
        if flavor == TF:
            if rank == 0:
                reason = "attempting to slice scalar input"
            else:
                reason = f"index out of range using input dim {rank}; input has only {rank} dims"
        else:
            reason = (f"the spec indexes {real_before + real_after} input dims but the input has "
                      f"only {rank}")
        # the first index that runs past the last dim
        seen, bad = 0, None
        for i, r in enumerate(roles):
            if r == "ellipsis":
                seen = rank - real_after
            elif r in ("shrink", "range"):
                if seen >= rank:
                    bad = i
                    break
                seen += 1
        raise StridedSliceError(reason, index=bad, field="begin")

    slots: list[tuple] = []
    count = 0  # the plan's axes so far
    full = 0  # next input axis
    remaining_after = real_after
    # the ellipsis (explicit, else implicit at the end) keeps the axes no index names whole
    whole = None if shape_t is None else len(shape_t) - real_before - real_after
    for i, role in enumerate(roles + ("ellipsis",) if ellipsis_at == n else roles):
        if role == "range" or role == "shrink":
            after = i > ellipsis_at
            if rank is None and after:
                axis = -remaining_after
                dim = None
            else:
                axis = full
                dim = None if shape_t is None else shape_t[axis]
            if after:
                remaining_after -= 1
            full += 1
            slots.append((_INDEXED, i, axis, dim, role == "shrink", (begin_mask >> i) & 1 == 1,
                          (end_mask >> i) & 1 == 1, count))
            count += 1
        elif role == "new":
            slots.append((_OUTPUT, OutDim(NEW, None, 1, index=i)))
        elif role == "ellipsis":
            if shape_t is None or whole is None:  # unknown rank
                slots.append((_OUTPUT, OutDim(REST)))
                continue
            for _ in range(whole):
                slots.append((_WHOLE, _whole_axis(full, shape_t[full]), _out_axis(count, shape_t[full])))
                count += 1
                full += 1
        # ("scalar": OpenVINO's shrink of a scalar input, which keeps it: no axis, no output)
    return _Frame(shape_t, tuple(notes), tuple(slots), scalar_shrink,
                  any(s[0] == _OUTPUT and s[1].kind == REST for s in slots))


def _planned(spec: SliceSpec, frame: _Frame) -> Plan:
    """The plan of ``spec`` on its :func:`_frame`: each indexed axis from its numbers."""
    begin, end, strides = spec.begin, spec.end, spec.strides
    i = frame.scalar_shrink
    if i is not None and begin is not None and not -1 <= begin[i] < 1:
        raise StridedSliceError(f"shrink index {begin[i]} is out of range for the scalar input "
                                "(OpenVINO reads it as shape [1])", index=i, field="begin")
    flavor = spec.flavor
    axes: list[AxisPlan] = []
    outputs: list[OutDim] = []
    for slot in frame.slots:
        kind = slot[0]
        if kind == _INDEXED:
            _, i, axis, dim, shrink, bm, em, source = slot
            a = _axis_plan(flavor, None if begin is None else begin[i], None if end is None else end[i],
                           None if strides is None else strides[i], bm, em, i, axis, dim, shrink)
            axes.append(a)
            if not shrink:
                outputs.append(_out_axis(source, a.size))
        elif kind == _WHOLE:
            axes.append(slot[1])
            outputs.append(slot[2])
        else:
            outputs.append(slot[1])
    plan = made_at_once(Plan, spec=spec, input_shape=frame.shape, axes=tuple(axes), outputs=tuple(outputs),
                        notes=frame.notes, source=None)
    if not frame.rest:  # (what Plan.output_shape computes, from the sizes at hand)
        plan.__dict__["output_shape"] = tuple([o.size for o in outputs])
    return plan


def shape_conflict(shape: Sequence[Dim] | None, other: Sequence[Dim] | None,
                   dim_conflict: Callable[[Dim, Dim], str | None], other_label: str = "") -> str | None:
    """Where ``shape`` contradicts ``other`` under one rule: another rank (``rank 3 !=
    {other_label}2``), else the first dim pair ``dim_conflict(a, b)`` names (``dim i: `` and its
    text); None when either rank is unknown or nothing conflicts.  The rule is the caller's: a
    declared shape against the derived or the planned one, an inferred shape against the plan."""
    if shape is None or other is None:
        return None
    if len(shape) != len(other):
        return f"rank {len(shape)} != {other_label}{len(other)}"
    for i, (a, b) in enumerate(zip(shape, other)):
        problem = dim_conflict(a, b)
        if problem:
            return f"dim {i}: {problem}"
    return None


def declared_conflict(declared: Sequence[Dim] | None, planned: Sequence[Dim] | None) -> str | None:
    """A shape a model declares for a slice's output that contradicts the plan: another rank, or
    another number for a dim both know.  (Exporters name unknown dims ``unk__7``: a name where the
    plan knows the size is less information, not a contradiction.)  The one rule of the rewrite
    (a graph output's declaration) and of the per-rewrite checks."""
    return shape_conflict(declared, planned, _declared_vs_planned, "planned ")


def _declared_vs_planned(a: Dim, b: Dim) -> str | None:
    return f"declared {a} != planned {b}" if isinstance(a, int) and isinstance(b, int) and a != b else None
