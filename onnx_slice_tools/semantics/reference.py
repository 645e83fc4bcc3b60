"""The numpy reference: exactly what each flavour's runtime returns.

Built on the canonical plan, so it shares every rule with the lowering.
"""

from __future__ import annotations

import numpy as np

from ..errors import StridedSliceError
from .plan import INDEX, RANGE, Plan, make_plan
from .spec import OPENVINO, TF, TFLITE, SliceSpec, check_flavor, from_openvino, from_tf, from_tflite


def apply_plan(plan: Plan, x: np.ndarray, index: tuple | None = None, copy: bool = True) -> np.ndarray:
    """Run a plan made for ``x.shape`` on ``x``; returns a new, contiguous array (``copy``
    False: maybe a view of ``x``, for a caller that only reads it).  ``index``:
    :func:`plan_index` of ``plan``, when the caller applies one plan to many arrays."""
    if plan.input_shape != tuple(x.shape):
        raise ValueError(f"plan was made for shape {plan.input_shape}, array has {x.shape}")
    out = np.asarray(x[plan_index(plan) if index is None else index]).reshape(plan.output_shape)
    return np.array(out, dtype=x.dtype, copy=True, order="C") if copy else out


def plan_index(plan: Plan) -> tuple:
    """The numpy basic index that selects what ``plan`` keeps (before the output reshape)."""
    index: list[int | slice] = []
    for a in plan.axes:
        if a.kind == INDEX:
            if a.start is None:
                raise ValueError(f"the plan has no index for axis {a.axis} (begin is given at run time)")
            index.append(a.start)
        elif a.kind == RANGE:
            if a.size == 0:
                index.append(slice(0, 0))
            elif a.start is None or a.stride is None or not isinstance(a.size, int):
                raise ValueError(f"the plan has no range for axis {a.axis} (begin, end or strides is given "
                                 "at run time)")
            else:
                stop = a.start + a.size * a.stride
                index.append(slice(a.start, None if stop < 0 else stop, a.stride))
        else:
            index.append(slice(None))
    return tuple(index)


def strided_slice(x, begin, end, strides=None, *, begin_mask=0, end_mask=0, ellipsis_mask=0,
                  new_axis_mask=0, shrink_axis_mask=0, flavor: str = TF, offset: bool = False) -> np.ndarray:
    """StridedSlice of ``x`` exactly as the flavour's runtime computes it.

    ``flavor="tf"``: masks are int bit fields, as in ``tf.strided_slice``.
    ``flavor="openvino"``: masks are 0/1 sequences (or IR strings), as in
    OpenVINO's StridedSlice-1.  ``flavor="tflite"``: TF bit fields plus ``offset``
    (TFLite STRIDED_SLICE, op version 8), exactly as LiteRT's kernel.  Raises :class:`StridedSliceError` (a
    ``ValueError``) where that runtime rejects the spec.
    """
    masks = dict(begin_mask=begin_mask, end_mask=end_mask, ellipsis_mask=ellipsis_mask,
                 new_axis_mask=new_axis_mask, shrink_axis_mask=shrink_axis_mask)
    if offset and flavor != TFLITE:
        raise StridedSliceError("offset is a TFLite option; pass flavor='tflite'", field="offset")
    if flavor == TF:
        spec = from_tf(begin, end, strides, **masks)
    elif flavor == TFLITE:
        spec = from_tflite(begin, end, strides, offset=offset, **masks)
    elif flavor == OPENVINO:
        # the signature's integer defaults mean "no list given"
        masks = {k: (() if isinstance(v, int) and not isinstance(v, bool) and v == 0 else v)
                 for k, v in masks.items()}
        spec = from_openvino(begin, end, strides, **masks)
    else:
        check_flavor(flavor)
    return slice_array(spec, x)


def slice_array(spec: SliceSpec, x) -> np.ndarray:
    """Apply a static spec to an array."""
    x = np.asarray(x)
    if not spec.is_static:
        raise StridedSliceError("begin, end and strides must be known to evaluate the reference",
                                field="begin")
    return apply_plan(make_plan(spec, x.shape), x)
