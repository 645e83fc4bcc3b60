"""Slice updates and clamped reads: the semantics and numpy reference of the slice-update family.

Pure Python and numpy, no ONNX.  Each function follows the framework's *runtime* (measured, see
/work/shared/facts.md "Found 2026-11-28" and docs/slice_updates.md):

- ``XlaDynamicUpdateSlice`` (TensorFlow) and ``DYNAMIC_UPDATE_SLICE`` (TFLite / LiteRT):
  :func:`dynamic_update_slice`.  Each start is clamped to ``[0, dim - update_dim]`` (a negative
  start becomes 0: no wrap from the end); an update of another rank, an update larger than the
  input on an axis, or an index vector whose length is not the rank is an error; an empty update
  returns the input.
- ``XlaDynamicSlice``: :func:`dynamic_slice`, a read of static ``sizes`` at clamped starts.
- ``TensorStridedSliceUpdate``: :func:`strided_slice_update`, the positions a TensorFlow
  StridedSlice reads are overwritten by ``value``; the spec is planned by the StridedSlice plan
  (:func:`..plan.make_plan`), so it rejects exactly the specs StridedSlice rejects.  ``value``
  broadcasts to the slice's shape (extra leading axes of size 1 allowed); an empty slice
  returns the input whatever ``value`` is.
- ``StridedSliceGrad``: :func:`strided_slice_grad`, ``TensorStridedSliceUpdate(zeros(shape),
  spec, dy)`` with ``dy`` of exactly the slice's shape (no broadcast).
- TFLite ``GELU``: :func:`gelu`, its definition (Erf, or the tanh form) evaluated in float64;
  TensorFlow's ``Erfc`` (Keras's exact GELU): :func:`erfc`.

:class:`UpdatePlan` is the canonical plan of a dynamic update (shared by the reference, the
lowering and ``explain``): shapes, the axes the update is narrower on, and the clamped starts
when they are known.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import StridedSliceError
from .plan import Dim, make_plan
from .reference import plan_index
from .spec import TF, SliceSpec

#: The op names of the family, by framework.
XLA_DYNAMIC_UPDATE_SLICE = "XlaDynamicUpdateSlice"
XLA_DYNAMIC_SLICE = "XlaDynamicSlice"
TENSOR_STRIDED_SLICE_UPDATE = "TensorStridedSliceUpdate"
STRIDED_SLICE_GRAD = "StridedSliceGrad"
TFLITE_DYNAMIC_UPDATE_SLICE = "DYNAMIC_UPDATE_SLICE"
ERFC = "Erfc"


@dataclass(frozen=True)
class UpdatePlan:
    """What a dynamic update (or a clamped read) does to an input of a given shape.

    ``window`` is the update's shape (for a read: the sizes read).  ``narrow`` lists the axes
    where the window may be smaller than the input (a known dim equal to the input's is not
    narrow).  ``starts``: the clamped starts, when the indices and shapes are known.
    """

    input_shape: tuple[Dim, ...]
    window: tuple[Dim, ...]
    narrow: tuple[int, ...]
    starts: tuple[int, ...] | None = None

    @property
    def rank(self) -> int:
        return len(self.input_shape)

    @property
    def is_empty(self) -> bool:
        """True when the window provably holds no element."""
        return any(d == 0 for d in self.window)


def known(dim: Dim) -> int:
    """``dim`` as an int; a :class:`StridedSliceError` when it is symbolic or unknown (for callers
    whose form needs known dims)."""
    if not isinstance(dim, int):
        raise StridedSliceError(f"dim {dim!r} is not known", field="shape")
    return dim


def clamp_start(index: int, dim: int, size: int) -> int:
    """XLA's start rule: ``index`` clamped to ``[0, dim - size]``."""
    return min(max(int(index), 0), dim - size)


def _index_vector(indices, rank: int, field: str) -> tuple[int, ...] | None:
    if indices is None:
        return None
    arr = np.asarray(indices)
    if arr.dtype.kind not in "iu" or arr.dtype not in (np.int32, np.int64):
        raise StridedSliceError(f"indices must be int32 or int64, not {arr.dtype}", field=field)
    if arr.ndim != 1 or arr.shape[0] != rank:
        raise StridedSliceError(f"index must be a vector with length equal to the input's rank {rank}, "
                                f"got shape {list(arr.shape)}", field=field)
    return tuple(int(v) for v in arr)


def update_plan(input_shape: Sequence[Dim], window: Sequence[Dim], indices=None, *,
                field: str = "update", index_field: str = "indices") -> UpdatePlan:
    """Plan ``XlaDynamicUpdateSlice`` / ``DYNAMIC_UPDATE_SLICE`` (``window`` = the update's shape)
    or ``XlaDynamicSlice`` (``window`` = its sizes, ``field="size_indices"``).  Raises a
    :class:`StridedSliceError` where the framework rejects the shapes or the index vector."""
    shape, win = tuple(input_shape), tuple(window)
    if len(shape) != len(win):
        raise StridedSliceError(f"input and {field} must have the same rank, input shape is {list(shape)}; "
                                f"{field} shape is {list(win)}", field=field)
    narrow = []
    for axis, (d, w) in enumerate(zip(shape, win)):
        if isinstance(w, int) and w < 0:
            raise StridedSliceError(f"{field} size {w} of dimension {axis} is negative", field=field, index=axis)
        if isinstance(d, int) and isinstance(w, int):
            if w > d:
                raise StridedSliceError(f"{field} dim size {w} greater than dynamic slice dimension {d} "
                                        f"(axis {axis})", field=field, index=axis)
            if w == d:
                continue
        elif d is not None and d == w:
            continue  # the same symbolic dim
        narrow.append(axis)
    values = _index_vector(indices, len(shape), index_field)
    starts = None
    if values is not None and all(isinstance(d, int) for d in shape) and all(isinstance(w, int) for w in win):
        starts = tuple(clamp_start(v, d, w) for v, d, w in zip(values, shape, win))  # type: ignore[arg-type]
    return UpdatePlan(shape, win, tuple(narrow), starts)


def _window_index(plan: UpdatePlan) -> tuple[slice, ...]:
    assert plan.starts is not None
    return tuple(slice(s, s + w) for s, w in zip(plan.starts, plan.window))  # type: ignore[operator]


def dynamic_update_slice(x, update, indices) -> np.ndarray:
    """``XlaDynamicUpdateSlice(x, update, indices)`` (= LiteRT's ``DYNAMIC_UPDATE_SLICE``): a new
    array."""
    x, update = np.asarray(x), np.asarray(update)
    if update.dtype != x.dtype:
        raise StridedSliceError(f"update has dtype {update.dtype}, input has {x.dtype}", field="update")
    plan = update_plan(x.shape, update.shape, indices)
    out = np.array(x, copy=True, order="C")
    if not plan.is_empty:
        out[_window_index(plan)] = update
    return out


def dynamic_slice(x, starts, sizes) -> np.ndarray:
    """``XlaDynamicSlice(x, starts, sizes)``: ``x[s:s+size]`` per axis, each start clamped to
    ``[0, dim - size]``; a new array."""
    x = np.asarray(x)
    size_values = _index_vector(sizes, x.ndim, "size_indices")
    assert size_values is not None
    plan = update_plan(x.shape, size_values, starts, field="size_indices", index_field="start_indices")
    return np.array(x[_window_index(plan)], copy=True, order="C")


def broadcast_shape(value_shape: Sequence[int], final_shape: Sequence[int]) -> None:
    """TensorFlow's check that ``value`` broadcasts to the slice's shape: numpy's rule, plus
    extra leading axes of size 1.  Raises a :class:`StridedSliceError` otherwise."""
    value_shape, final_shape = tuple(value_shape), tuple(final_shape)
    extra = len(value_shape) - len(final_shape)
    ok = extra <= 0 or all(d == 1 for d in value_shape[:extra])
    if ok:
        tail = value_shape[max(extra, 0):]
        for v, f in zip(reversed(tail), reversed(final_shape)):
            if v not in (1, f):
                ok = False
                break
    if not ok:
        raise StridedSliceError(f"Cannot broadcast input shape {list(value_shape)} into final shape "
                                f"{list(final_shape)}", field="value")


def _spec_plan(spec: SliceSpec, shape: Sequence[int]):
    if spec.flavor != TF:
        raise StridedSliceError(f"slice updates take a TensorFlow spec, not {spec.flavor!r}", field="flavor")
    if not spec.is_static:
        raise StridedSliceError("begin, end and strides must be known to evaluate the reference",
                                field="begin")
    return make_plan(spec, tuple(shape))


def strided_slice_update(x, spec: SliceSpec, value) -> np.ndarray:
    """``TensorStridedSliceUpdate(x, begin, end, strides, value, masks)``: a new array."""
    x, value = np.asarray(x), np.asarray(value)
    if value.dtype != x.dtype:
        raise StridedSliceError(f"value has dtype {value.dtype}, input has {x.dtype}", field="value")
    plan = _spec_plan(spec, x.shape)
    final = tuple(int(d) for d in plan.output_shape or ())
    out = np.array(x, copy=True, order="C")
    if int(np.prod(final, dtype=np.int64)) == 0:
        return out  # TensorFlow returns early on an empty slice, before looking at value
    broadcast_shape(value.shape, final)
    if value.ndim > len(final):
        value = value.reshape(value.shape[value.ndim - len(final):])
    index = plan_index(plan)
    out[index] = np.broadcast_to(value, final).reshape(out[index].shape)
    return out


def strided_slice_grad(shape, spec: SliceSpec, dy) -> np.ndarray:
    """``StridedSliceGrad(shape, begin, end, strides, dy, masks)``: zeros of ``shape`` with ``dy``
    written where the StridedSlice read (``dy`` of exactly the slice's shape)."""
    dy = np.asarray(dy)
    dims = tuple(int(d) for d in np.asarray(shape).reshape(-1))
    for i, d in enumerate(dims):
        if d < 0:
            raise StridedSliceError(f"Dimension {d} must be >= 0", field="shape", index=i)
    plan = _spec_plan(spec, dims)
    final = tuple(plan.output_shape or ())
    if tuple(dy.shape) != final:
        raise StridedSliceError(f"shape of dy was {list(dy.shape)} instead of {list(final)}", field="dy")
    out = np.zeros(dims, dtype=dy.dtype)
    if dy.size:
        index = plan_index(plan)
        out[index] = dy.reshape(out[index].shape)
    return out


def gelu(x, approximate: bool) -> np.ndarray:
    """TFLite ``GELU`` by its definition, evaluated in float64 and rounded once to ``x``'s type:
    ``0.5 x (1 + erf(x / sqrt 2))``, or with ``approximate`` the tanh form
    ``0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))``.  Float arithmetic: compared under
    the product's tolerance rule, never bitwise."""
    x = np.asarray(x)
    w = x.astype(np.float64)
    if approximate:
        t = np.tanh(math.sqrt(2 / math.pi) * (w + 0.044715 * w ** 3))
    else:
        t = np.vectorize(math.erf, otypes=[np.float64])(w / math.sqrt(2)) if w.size else w
    return (0.5 * w * (1 + t)).astype(x.dtype)


def erfc(x) -> np.ndarray:
    """TensorFlow's ``Erfc``: the complementary error function, evaluated in float64 and rounded
    once to ``x``'s type (float arithmetic: compared under the tolerance rule)."""
    x = np.asarray(x)
    w = x.astype(np.float64)
    return (np.vectorize(math.erfc, otypes=[np.float64])(w) if w.size else w).astype(x.dtype)
