"""``convert --fix-slices``: rewrite a model's own Slice/Gather nodes that break a target's constraints.

A ``Slice`` with constant starts/ends/axes/steps is an OpenVINO-flavour StridedSlice (ONNX
Slice clamps exactly like OpenVINO's ranges, docs/semantics.md): unlisted axes are kept whole
(masked ranges), listed axes are begin:end:step, and an input of unknown rank gets a leading
ellipsis when every axis is negative.  A ``Gather`` with a constant 0-d index is a shrink at its
axis.  Both are then planned and lowered for the target, and verified like every rewrite
(the per-rewrite checks compare with the plan's reference, which is ONNX's own semantics).
"""

from __future__ import annotations

from .errors import StridedSliceError
from .rewrite import StridedSliceRewritePass, value_dims
from .spec import OPENVINO, from_openvino
from .targets import constant_of, get_target, node_violations


def slice_as_spec(node, rank: int | None):
    """The OpenVINO-flavour spec of an ONNX Slice/Gather node with constant arguments, or None."""
    if node.op_type == "Gather":
        index = constant_of(node.inputs[1]) if len(node.inputs) > 1 else None
        if index is None or index.ndim != 0:
            return None
        attr = node.attributes.get("axis")
        axes, items = [attr.value if attr is not None else 0], [("shrink", int(index))]
    else:
        args = [constant_of(v) if v is not None else None for v in list(node.inputs[1:5]) + [None] * 4][:4]
        starts, ends, axes_arr, steps = args
        if starts is None or ends is None or (len(node.inputs) > 3 and node.inputs[3] is not None
                                              and axes_arr is None) or (
                len(node.inputs) > 4 and node.inputs[4] is not None and steps is None):
            return None
        axes = [int(a) for a in axes_arr] if axes_arr is not None else list(range(len(starts)))
        steps = [int(s) for s in steps] if steps is not None else [1] * len(starts)
        items = [("range", (int(b), int(e), s)) for b, e, s in zip(starts, ends, steps)]
    if rank is not None:
        axes = [a + rank if a < 0 else a for a in axes]
        if any(not 0 <= a < rank for a in axes) or len(set(axes)) != len(axes):
            return None
        order = list(range(max(axes) + 1))
        lead = False
    elif all(a < 0 for a in axes):
        order = list(range(min(axes), 0))
        lead = True
    elif all(a >= 0 for a in axes):
        order = list(range(max(axes) + 1))
        lead = False
    else:
        return None
    by_axis = dict(zip(axes, items))
    begin, end, strides, bm, em, sh, el = [], [], [], [], [], [], []
    if lead:
        begin, end, strides, bm, em, sh, el = [0], [0], [1], [0], [0], [0], [1]
    for a in order:
        kind, val = by_axis.get(a, ("all", None))
        if kind == "range":
            b, e, s = val
            begin.append(b), end.append(e), strides.append(s), bm.append(0), em.append(0), sh.append(0)
        elif kind == "shrink":
            begin.append(val), end.append(val + 1), strides.append(1), bm.append(0), em.append(0), sh.append(1)
        else:
            begin.append(0), end.append(0), strides.append(1), bm.append(1), em.append(1), sh.append(0)
        el.append(0)
    try:
        return from_openvino(begin, end, strides, begin_mask=bm, end_mask=em, shrink_axis_mask=sh,
                             ellipsis_mask=el, new_axis_mask=[0] * len(begin))
    except StridedSliceError:
        return None


class FixSlicesPass(StridedSliceRewritePass):
    """Rewrite the Slice/Gather nodes that break ``target``'s constraints and that
    :func:`slice_as_spec` can express; the others are left (``inspect --target`` lists them)."""

    prefix = "fix"

    def __init__(self, target, *, opset: int):
        target = get_target(target)
        super().__init__(flavor=OPENVINO, opset=opset, target=target.name)
        self.target_spec = target

    def _selects(self, node) -> bool:
        if node.op_type not in ("Slice", "Gather") or node.domain not in ("", "ai.onnx"):
            return False
        if not node_violations(node, self.target_spec):
            return False
        shape = value_dims(node.inputs[0])
        return slice_as_spec(node, None if shape is None else len(shape)) is not None

    def _read(self, node, flavor: str):
        shape = value_dims(node.inputs[0])
        return slice_as_spec(node, None if shape is None else len(shape)), {}
