"""``convert --fix-slices``: rewrite a model's own Slice/Gather nodes that break a target's constraints.

A ``Slice`` is an OpenVINO-flavour StridedSlice (ONNX Slice clamps exactly like OpenVINO's
ranges, docs/semantics.md): unlisted axes are kept whole (masked ranges), listed axes are
begin:end:step, and an input of unknown rank gets a leading ellipsis when every axis is
negative.  Its starts/ends/steps may be computed at run time when its axes are ``0..k-1`` in
order (the runtime vectors are then the spec's begin/end/strides).  A ``Gather`` with a constant
index is a shrink at its axis: a 0-d index removes the axis, a 1-element 1-D index keeps it (a
new axis at the same place), so an index out of range still fails at run time; a 1-D index that
steps evenly through a known dim, all in range, is a range.  Each is then planned and lowered
for the target and verified like every rewrite (the per-rewrite checks compare with the plan's
reference, which is ONNX's own semantics).  :func:`fix_note` says why a node is left.
"""

from __future__ import annotations

from ..errors import StridedSliceError
from .ir_pass import StridedSliceRewritePass, value_dims
from ..semantics.spec import OPENVINO, from_openvino
from ..lowering.targets import constant_of, get_target, node_violations

ALL, RANGE, SHRINK, KEEP = "all", "range", "shrink", "shrink+new axis"


def _gather_items(node, rank: int | None):
    """(axes, items) of a Gather with a constant index, or the reason it is no slice."""
    index = constant_of(node.inputs[1]) if len(node.inputs) > 1 else None
    if index is None:
        return "its indices are computed at run time (not a slice)"
    attr = node.attributes.get("axis")
    axis = attr.value if attr is not None else 0
    if index.ndim == 0:
        return [axis], [(SHRINK, int(index))]
    if index.ndim > 1:
        return f"its indices have rank {index.ndim} (not a slice)"
    values = [int(v) for v in index]
    if len(values) == 1:
        return [axis], [(KEEP, values[0])]
    shape = value_dims(node.inputs[0])
    dim = shape[axis] if shape is not None and -len(shape) <= axis < len(shape) else None
    if not isinstance(dim, int):
        return (f"indices {values} on a dim of unknown size: a Slice clamps where Gather fails "
                "(only a single index is rewritten there)")
    if not all(-dim <= v < dim for v in values):
        return f"indices {values} out of range for a dim of {dim} (the node fails at run time)"
    fwd = [v + dim if v < 0 else v for v in values]
    step = fwd[1] - fwd[0]
    if step == 0 or any(b - a != step for a, b in zip(fwd, fwd[1:])):
        return f"indices {values} do not step evenly (not a slice)"
    end = fwd[-1] + step
    return [axis], [(RANGE, (fwd[0], end if end >= 0 else -dim - 1, step))]


def _slice_items(node):
    """(axes, items, runtime) of a Slice, or the reason it cannot be read as a spec."""
    args = [v for v in list(node.inputs[1:5]) + [None] * 4][:4]
    starts_v, ends_v, axes_v, steps_v = args
    starts, ends = constant_of(starts_v), constant_of(ends_v)
    axes_arr = constant_of(axes_v) if axes_v is not None else None
    steps = constant_of(steps_v) if steps_v is not None else None
    if axes_v is not None and axes_arr is None:
        return "its axes are computed at run time"
    runtime = {f: v for f, v, c in (("begin", starts_v, starts), ("end", ends_v, ends), ("strides", steps_v, steps))
               if v is not None and c is None}
    n = next((len(c.ravel()) for c in (starts, ends, steps, axes_arr) if c is not None), None)
    if n is None:
        shape = starts_v.shape
        n = shape[0] if shape is not None and len(shape) == 1 and isinstance(shape[0], int) else None
        if n is None:
            return "its starts/ends are computed at run time and their length is unknown"
    axes = [int(a) for a in axes_arr.ravel()] if axes_arr is not None else list(range(n))
    if runtime and axes != list(range(len(axes))):
        return (f"starts/ends/steps computed at run time on axes {axes}: rewritten only when the axes "
                "are 0..k-1 in order")

    def at(c, k):
        return None if c is None else int(c.ravel()[k])
    items = [(RANGE, (at(starts, k), at(ends, k), at(steps, k) if steps_v is not None else 1))
             for k in range(len(axes))]
    return axes, items, runtime


def read_fixable(node, rank: int | None):
    """(spec, runtime index values) of an ONNX Slice/Gather node read as an OpenVINO-flavour spec,
    or the reason (a string) it is not rewritten."""
    if node.op_type == "Gather":
        got = _gather_items(node, rank)
        if isinstance(got, str):
            return got
        (axes, items), runtime = got, {}
    else:
        got = _slice_items(node)
        if isinstance(got, str):
            return got
        axes, items, runtime = got
    if rank is not None:
        axes = [a + rank if a < 0 else a for a in axes]
        if any(not 0 <= a < rank for a in axes) or len(set(axes)) != len(axes):
            return f"axes {axes} do not fit its input's rank {rank}"
        order, lead = list(range(max(axes) + 1)), False
    elif all(a < 0 for a in axes):
        order, lead = list(range(min(axes), 0)), True
    elif all(a >= 0 for a in axes):
        order, lead = list(range(max(axes) + 1)), False
    else:
        return f"axes {axes} mix signs on an input of unknown rank"
    if runtime and (lead or order != axes):
        return "starts/ends/steps computed at run time: rewritten only on axes 0..k-1 of a known order"
    fields: dict[str, list] = {k: [] for k in ("begin", "end", "strides", "begin_mask", "end_mask", "shrink_axis_mask",
                              "new_axis_mask", "ellipsis_mask")}

    def add(b, e, s, bm=0, em=0, sh=0, new=0, el=0):
        for k, v in zip(fields, (b, e, s, bm, em, sh, new, el)):
            fields[k].append(v)

    if lead:
        add(0, 0, 1, el=1)
    by_axis = dict(zip(axes, items))
    for a in order:
        kind, val = by_axis.get(a, (ALL, None))
        if kind == RANGE:
            b, e, s = val
            add(0 if b is None else b, 0 if e is None else e, 1 if s is None else s)
        elif kind == SHRINK:
            add(val, val + 1, 1, sh=1)
        elif kind == KEEP:  # the shrink fails at run time where Gather does; the new axis keeps the rank
            add(val, val + 1, 1, sh=1)
            add(0, 0, 1, new=1)
        else:
            add(0, 0, 1, bm=1, em=1)
    spec_fields = {k: (None if k in runtime else fields[k]) for k in ("begin", "end", "strides")}
    masks = {k: fields[k] for k in fields if k.endswith("mask")}
    try:
        spec = from_openvino(**spec_fields, **masks, runtime_length=len(order) if runtime else None)
    except StridedSliceError as exc:
        return f"not a valid slice: {exc}"
    return spec, runtime


def _rank(node):
    shape = value_dims(node.inputs[0])
    return None if shape is None else len(shape)


def fix_note(node) -> str:
    """What ``--fix-slices`` does with a node that breaks a target (inspect --target)."""
    if node.op_type not in ("Slice", "Gather"):
        return f"not fixed: --fix-slices rewrites Slice and Gather nodes, not {node.op_type}"
    got = read_fixable(node, _rank(node))
    return f"not fixed: {got}" if isinstance(got, str) else "fixed by --fix-slices"


class FixSlicesPass(StridedSliceRewritePass):
    """Rewrite the Slice/Gather nodes that break ``target``'s constraints and that
    :func:`read_fixable` can express; the others are left (``inspect --target`` says why)."""

    prefix = "fix"
    share_signatures = False  # a Slice/Gather's reading depends on its data's rank too

    def __init__(self, target, *, opset: int):
        target = get_target(target)
        super().__init__(flavor=OPENVINO, opset=opset, target=target.name)
        self.target_spec = target

    def _selects(self, node) -> bool:
        if node.op_type not in ("Slice", "Gather") or node.domain not in ("", "ai.onnx"):
            return False
        if not node_violations(node, self.target_spec):
            return False
        return not isinstance(read_fixable(node, _rank(node)), str)

    def _read(self, node, flavor: str):
        return read_fixable(node, _rank(node))

    def _annotate(self, rec, node) -> None:
        rec.op_type, rec.flavor, rec.written = node.op_type, "onnx", written(node)


def written(node) -> str:
    """A Slice or Gather node as written: its constant inputs and attributes (``?`` for a
    value computed at run time), e.g. ``Slice(starts=[0], ends=[1000000000], axes=[1])``."""
    if node.op_type == "Gather":
        index = constant_of(node.inputs[1]) if len(node.inputs) > 1 else None
        attr = node.attributes.get("axis")
        return (f"Gather(indices={'?' if index is None else index.tolist()}, "
                f"axis={attr.value if attr is not None else 0})")
    parts = []
    for k, label in enumerate(("starts", "ends", "axes", "steps"), start=1):
        value = node.inputs[k] if k < len(node.inputs) else None
        if value is not None:
            arr = constant_of(value)
            parts.append(f"{label}={'?' if arr is None else arr.ravel().tolist()}")
    return f"{node.op_type}({', '.join(parts)})"
