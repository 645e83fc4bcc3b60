"""TFLite's STRIDED_SLICE rules, expressed as the TensorFlow spec that does the same.

LiteRT's kernel (``tensorflow/lite/kernels/strided_slice.cc`` with
``internal/reference/strided_slice.h``) first builds a *dense* spec over the
"effective" input (the input with the new axes inserted), then slices every
effective dim with TensorFlow's clamping rules.  Its dense spec is not
TensorFlow's:

* an ellipsis always covers at least one dim (TF: possibly none), and spec
  items past the last effective dim are silently dropped (TF: an error);
* a begin_mask bit on a shrink index is honoured: the element taken is 0
  (TF ignores begin_mask there);
* a shrink index below ``-dim`` is clamped to element 0 (TF: an error);
* ``offset`` (op version 8): the end is ``begin + end`` after begin is
  resolved, while the output shape is computed from the raw ``end`` alone.

Where the kernel's behaviour is undefined -- it writes fewer or more elements
than the output shape it allocated (a shrink index at or past ``dim``, a shrink
with a negative stride, an ``offset`` whose loop visits another number of
elements than the output, sized from the raw end, holds), or it reads past the
shape or the begin/end tensors -- :func:`tflite_as_tf` raises
:class:`StridedSliceError` (``undefined``).  Where an ``offset`` loop visits as
many elements as the output holds but in another shape (both empty, e.g. an
ellipsis dim sized from ``end``), TFLite's result is defined but is no slice of
the input: refused as ``unsupported``.
``INT32_MIN`` strides are rejected as LiteRT does (TF 2.21's interpreter
still returns an empty slice).  Any number of effective dims is accepted, as LiteRT
does (TF 2.21's deprecated ``tf.lite.Interpreter`` stops at 5).

:func:`tflite_as_tf` returns a TensorFlow spec with no ellipsis, one item per
effective dim, that TensorFlow evaluates exactly as TFLite does; the plan, the
lowering and the numpy reference then follow the TensorFlow rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..errors import StridedSliceError
from .spec import SliceSpec, from_tf

MAX_INDICES = 31      # LiteRT: "StridedSlice op only supports up to 31 indices"
_INT32_MIN = -(2 ** 31)

FULL, NEW, ITEM = "full", "new", "item"


@dataclass(frozen=True)
class DenseEntry:
    """One effective dim: a whole input axis, a new axis, or spec item ``index``."""

    kind: str
    axis: int | None      # input axis (None for a new axis)
    index: int | None     # spec position (ITEM only)

    @property
    def item(self) -> int:
        """The spec position of an ITEM entry (whole and new dims read no spec item)."""
        if self.index is None:
            raise ValueError(f"a {self.kind} dim reads no spec item")
        return self.index


def _bit(mask: int, i: int) -> bool:
    return i >= 0 and bool((mask >> i) & 1)


def dense_entries(spec: SliceSpec, rank: int) -> list[DenseEntry]:
    """The kernel's dense spec: one entry per effective dim, in order (a port of
    ``BuildStridedSliceParams``, including its corner cases)."""
    n = spec.n
    ell, new = spec.ellipsis_mask, spec.new_axis_mask
    num_add = sum(1 for i in range(n) if not _bit(ell, i) and _bit(new, i))
    eff = rank + num_add
    eff_ell = eff_new = 0
    ell_start, expanded = eff, 0
    i = 0
    while i < eff:
        if _bit(ell, i):
            ell_start = i
            ell_end = max(i + 1, min(i + 1 + num_add + rank - n, eff))
            expanded = ell_end - ell_start - 1
            while i < ell_end:
                eff_ell |= 1 << i
                i += 1
            continue
        if _bit(new, i - expanded):
            eff_new |= 1 << i
        i += 1
    entries: list[DenseEntry] = []
    added_ell = added_axes = 0
    for i in range(eff):
        if _bit(eff_ell, i):
            added_ell = max(0, i - ell_start)
            entries.append(DenseEntry(FULL, i - added_axes, None))
        elif _bit(eff_new, i):
            entries.append(DenseEntry(NEW, None, None))
            added_axes += 1
        elif i >= n + expanded:
            entries.append(DenseEntry(FULL, i - added_axes, None))
        else:
            entries.append(DenseEntry(ITEM, i - added_axes, i - added_ell))
    return entries


def _count(start: int, end: int, stride: int) -> int:
    """Elements the kernel's loop visits from start towards end."""
    span = end - start
    if span == 0 or (span < 0) != (stride < 0):
        return 0
    return -(-abs(span) // abs(stride))


def _start(begin: int, stride: int, masked: bool, dim: int) -> int:
    if masked:
        return 0 if stride > 0 else dim - 1
    b = begin + dim if begin < 0 else begin
    return min(max(b, 0), dim) if stride > 0 else min(max(b, -1), dim - 1)


def _offset_end(raw_end: int, start: int, stride: int, masked: bool, dim: int) -> int:
    if masked:
        return dim if stride > 0 else -1
    e = (raw_end + start + 2 ** 31) % 2 ** 32 - 2 ** 31  # the kernel's int32 sum wraps
    e = e + dim if e < 0 else e
    return min(max(e, 0), dim) if stride > 0 else min(max(e, -1), dim - 1)


def _undefined(what: str, i: int | None, field: str) -> StridedSliceError:
    return StridedSliceError(f"{what}: TFLite's result is undefined here (its kernel leaves the output "
                             "partly unwritten or reads outside its buffers)", index=i, field=field,
                             undefined=True)


class _Builder:
    """Collects the TF items (begin, end, stride, begin_masked, end_masked, kind)."""

    def __init__(self) -> None:
        self.items: list[tuple] = []

    def full(self):
        self.items.append((0, 0, 1, True, True, "range"))

    def new(self):
        self.items.append((0, 0, 1, False, False, "new"))

    def add(self, b, e, s, bm, em, kind="range"):
        self.items.append((b, e, s, bm, em, kind))

    def take(self, entries, item) -> "_Builder":
        """One item per dense entry: whole dims and new axes here, ``item(entry)`` for the others."""
        for entry in entries:
            if entry.kind == FULL:
                self.full()
            elif entry.kind == NEW:
                self.new()
            else:
                item(entry)
        return self

    def spec(self) -> SliceSpec:
        bits = {"begin_mask": 0, "end_mask": 0, "new_axis_mask": 0, "shrink_axis_mask": 0}
        for i, (_, _, _, bm, em, kind) in enumerate(self.items):
            bits["begin_mask"] |= int(bm) << i
            bits["end_mask"] |= int(em) << i
            bits["new_axis_mask"] |= int(kind == "new") << i
            bits["shrink_axis_mask"] |= int(kind == "shrink") << i
        cols = list(zip(*self.items)) if self.items else [(), (), ()]
        return from_tf(list(cols[0]), list(cols[1]), list(cols[2]), **bits)


def tflite_as_tf(spec: SliceSpec, shape: Sequence | None) -> tuple[SliceSpec, list[str]]:
    """(the TensorFlow spec that TFLite's kernel evaluates on ``shape``, notes)."""
    if shape is None:
        raise StridedSliceError("the TFLite flavour needs the input rank (its dense spec depends on it)",
                                field="input")
    lengths = {len(v) for v in (spec.begin, spec.end, spec.strides) if v is not None}
    if len(lengths) > 1:
        raise StridedSliceError("begin, end and strides must have the same length", field="strides")
    n, rank = spec.n, len(shape)
    if n > MAX_INDICES:
        raise StridedSliceError(f"TFLite allows at most {MAX_INDICES} indices, got {n}", field="begin")
    entries = dense_entries(spec, rank)
    notes: list[str] = []
    for k, entry in enumerate(entries):
        if entry.axis is not None and entry.axis >= rank:
            raise _undefined(f"the spec addresses input dim {entry.axis} of a rank-{rank} input", None,
                             "new_axis_mask")
        if entry.index is not None and entry.index >= n:
            raise _undefined(f"effective dim {k} reads begin[{entry.index}] past its {n} entries", None, "begin")
    real = sum(1 for e in entries if e.kind != NEW)
    if real != rank:
        raise _undefined(f"mask bits past len(begin) leave {rank - real} input dims out of TFLite's dense "
                         "spec, so its kernel reads the input with a wrong shape", None, "new_axis_mask")
    used = {e.index for e in entries if e.kind == ITEM}
    dropped = [i for i in range(n) if i not in used and not _bit(spec.ellipsis_mask, i)
               and not _bit(spec.new_axis_mask, i)]
    if dropped:
        notes.append(f"TFLite ignores index {', '.join(map(str, dropped))}: its ellipsis covers at least one "
                     "dim and items past the last dim are dropped")
    if not spec.is_static:
        return _runtime_spec(spec, entries, n, shape), notes
    if spec.offset and any(not isinstance(shape[e.axis], int) for e in entries if e.axis is not None):
        # the sizes come from end, the loop from the dims: computed in the graph, as for run-time indices
        return _runtime_spec(spec, entries, n, shape), notes
    if spec.offset:
        return _offset_spec(spec, entries, shape), notes
    b = _Builder()
    return b.take(entries, lambda entry: _item(spec, entry, shape, b, notes)).spec(), notes


def _check_stride(stride: int, i: int, shrink: bool) -> None:
    """The kernel's stride errors (0; INT32_MIN on a range, as LiteRT) and its undefined case
    (a negative stride on a shrink index writes nothing)."""
    if stride == 0:
        raise StridedSliceError("stride value has to be non-zero", index=i, field="strides")
    if shrink and stride < 0:
        raise _undefined(f"shrink index with negative stride {stride}", i, "strides")
    if stride == _INT32_MIN:
        raise StridedSliceError("stride value INT32_MIN is not supported (LiteRT)", index=i, field="strides")


def _static_values(spec: SliceSpec) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """begin, end and strides of a static spec (the constant-index rules read them all)."""
    if spec.begin is None or spec.end is None or spec.strides is None:
        raise ValueError("begin, end or strides is given only at run time")
    return spec.begin, spec.end, spec.strides


def _item(spec: SliceSpec, entry: DenseEntry, shape, b: _Builder, notes: list[str]) -> None:
    i = entry.item
    begins, ends, strides = _static_values(spec)
    begin, end, stride = begins[i], ends[i], strides[i]
    bm, em = spec.bit("begin_mask", i), spec.bit("end_mask", i)
    dim = shape[entry.axis]
    shrink = spec.bit("shrink_axis_mask", i)
    _check_stride(stride, i, shrink)
    if not shrink:
        b.add(begin, end, stride, bm, em)
        return
    if bm:
        notes.append(f"index {i}: TFLite honours begin_mask on a shrink index (takes element 0)")
        begin = 0
    if isinstance(dim, int):
        start = _start(begin, stride, False, dim)
        if start >= dim:
            raise _undefined(f"shrink index {begin} is out of range for dimension {entry.axis} of size {dim}",
                             i, "begin")
        if begin < -dim:
            notes.append(f"index {i}: TFLite clamps shrink index {begin} to element 0")
        begin = start
    b.add(begin, begin + 1, 1, False, False, "shrink")


def _offset_spec(spec: SliceSpec, entries: list[DenseEntry], shape) -> SliceSpec:
    """``offset``: the loop runs from the resolved begin to ``begin + end``; the output
    shape is the raw end at the *effective* position (the kernel indexes end_data by it,
    with the effective stride: 1 on a whole or new dim).  The kernel writes the loop's
    elements in order into that output: where the loop visits more or fewer elements than
    the output holds the result is undefined; where it visits as many but in another shape
    (both empty, e.g. an ellipsis dim sized from ``end``, or the same count laid out
    differently) the result is defined but is not a slice of the input: refused as
    ``unsupported`` (no result to check a rewrite against).
    """
    b = _Builder()
    n = spec.n
    begins, ends, strides = _static_values(spec)
    counts, sizes, items = [], [], []
    i: int | None  # the spec position, None on a whole or new dim
    for k, entry in enumerate(entries):
        dim = 1 if entry.kind == NEW else shape[entry.axis]
        if not isinstance(dim, int):
            raise StridedSliceError(f"offset=True needs known input dims (dim {entry.axis} is {dim!r})",
                                    field="offset")
        if entry.kind == ITEM:
            i = entry.item
            begin, raw_end, stride = begins[i], ends[i], strides[i]
            bm, em = spec.bit("begin_mask", i), spec.bit("end_mask", i)
            if spec.bit("shrink_axis_mask", i):
                _item(spec, entry, shape, b, [])
                continue
            _check_stride(stride, i, False)
        else:
            i, begin, raw_end, stride, bm, em = None, 0, 1, 1, entry.kind == FULL, entry.kind == FULL
        start = _start(begin, stride, bm, dim)
        count = _count(start, _offset_end(raw_end, start, stride, em, dim), stride)
        if k >= n:
            raise _undefined(f"offset: the output size of effective dim {k} is read from end[{k}], "
                             f"past its {n} entries", None, "end")
        size = _count(0, ends[k], stride)
        counts.append(count)
        sizes.append(size)
        items.append((entry, i, k, start, count, stride))
        b.add(None, None, None, False, False, "pending")  # filled in below, once all dims are known
    pending = [j for j, item in enumerate(b.items) if item[5] == "pending"]
    if counts != sizes:
        loop_total, out_total = _product(counts), _product(sizes)
        if loop_total != out_total:
            k, i = next((it[2], it[1]) for it, c, s in zip(items, counts, sizes) if c != s)
            raise _undefined(f"offset: the slice visits {loop_total} elements but the output, sized "
                             f"{tuple(sizes)} from end (end[{k}]={ends[k]}), holds {out_total}", i, "end")
        what = "an empty output" if not loop_total else f"its {loop_total} visited elements"
        raise StridedSliceError(f"offset: TFLite's result here is {what} in shape {tuple(sizes)} (sized from "
                                f"end) while its loop visits {tuple(counts)}: defined, but not expressible as "
                                "a slice of the input", field="end", unsupported=True)
    for j, (entry, i, k, start, count, stride) in zip(pending, items):
        if entry.kind == NEW:
            b.items[j] = (0, 0, 1, False, False, "new")
        elif count == 0:
            b.items[j] = (0, 0, 1, False, False, "range")
        else:
            stop = start + count * stride
            b.items[j] = (start, stop, stride, False, stop < 0, "range")
    return b.spec()


def _product(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def runtime_prelude(spec: SliceSpec, rank: int) -> bool:
    """True when a spec with run-time begin/end/strides needs TFLite's indices computed in the
    graph (lower_tflite): an ``offset`` (the end depends on the run-time begin), a shrink
    index (TFLite honours begin_mask there, clamps below -dim, is undefined past the dim or
    with a negative stride -- TensorFlow's rules differ), an ellipsis, or items TFLite drops:
    anything where TensorFlow, reading the written vectors, would pick other elements."""
    if spec.is_static and not spec.offset:  # (a constant offset spec comes here on dims known only at run time)
        return False
    mask = (1 << spec.n) - 1
    used = {e.index for e in dense_entries(spec, rank) if e.kind == ITEM}
    dropped = any(i not in used and not spec.bit("new_axis_mask", i) for i in range(spec.n))
    shrinks = spec.shrink_axis_mask & ~spec.new_axis_mask & mask  # clamped at -dim, undefined past dim
    return bool(spec.offset or spec.ellipsis_mask & mask or dropped or shrinks)


def _runtime_spec(spec: SliceSpec, entries: list[DenseEntry], n: int, shape) -> SliceSpec:
    """Run-time begin/end/strides.  When TensorFlow reads the written vectors as TFLite does
    (no ellipsis, offset, dropped item, begin_mask on a shrink) the spec is passed on as it
    is.  Otherwise the TensorFlow spec is TFLite's dense one -- one item per effective dim,
    begin and end given at run time as the *canonical* indices that lower_tflite computes
    in the graph with TFLite's rules (begin_mask, offset, clamping), their masks cleared."""
    if spec.offset and spec.end is None and spec.strides is not None:
        raise _undefined("offset with end computed at run time and constant strides: TFLite sizes the "
                         "output from the end tensor before it holds its run-time values", None, "end")
    mask = (1 << n) - 1
    if not runtime_prelude(spec, len([e for e in entries if e.kind != NEW])):
        return from_tf(spec.begin, spec.end, spec.strides, runtime_length=spec.runtime_length,
                       begin_mask=spec.begin_mask & mask, end_mask=spec.end_mask & mask,
                       new_axis_mask=spec.new_axis_mask & mask,
                       shrink_axis_mask=spec.shrink_axis_mask & ~spec.new_axis_mask & mask)
    if not any(e.kind == ITEM for e in entries):  # every dim whole or new: the values are not read
        return _Builder().take(entries, None).spec()

    def item(entry):
        i = entry.index
        stride = 1 if spec.strides is None else spec.strides[i]  # run-time strides: read there
        shrink = spec.bit("shrink_axis_mask", i)
        _check_stride(stride, i, shrink)
        dim = shape[entry.axis]
        if shrink and spec.begin is not None and isinstance(dim, int):
            masked = spec.bit("begin_mask", i)
            if _start(0 if masked else spec.begin[i], 1, False, dim) >= dim:
                raise _undefined(f"shrink index {spec.begin[i]} is out of range for dimension "
                                 f"{entry.axis} of size {dim}", i, "begin")
        b.add(0, 0, stride, False, False, "shrink" if shrink else "range")
    b = _Builder()
    dense = b.take(entries, item).spec()
    strides = None if spec.strides is None else dense.strides
    return from_tf(None, None, strides, runtime_length=len(entries), begin_mask=dense.begin_mask,
                   end_mask=dense.end_mask, new_axis_mask=dense.new_axis_mask,
                   shrink_axis_mask=dense.shrink_axis_mask)
