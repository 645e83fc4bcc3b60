"""Targets: the constructions a backend gets wrong, as data the lowering consults, and the audit.

A :class:`Target` is a set of :class:`Constraint` names it imposes, plus the runtimes its
output is verified on by default.  The lowering (lowering/lower.py, lowering/dynamic.py) asks
``target.forbids(NAME)``; :func:`find_violations` checks any ONNX model (ours or another
converter's) against a target and is used by ``inspect --target`` and by the tests.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

# constraint names
NEGATIVE_STEP = "negative_slice_step"
NEGATIVE_STEP_MAYBE_EMPTY = "negative_slice_step_on_a_maybe_empty_axis"
SCALAR_GATHER = "scalar_gather_index"
NEGATIVE_GATHER = "negative_gather_index"
SENTINEL = "sentinel_bound"
RAW_UNKNOWN_BOUNDS = "raw_bounds_on_unknown_dims"
RESHAPE_EMPTY = "squeeze_unsqueeze_on_dynamic_shape"

INT32_MAX, INT32_MIN = 2 ** 31 - 1, -(2 ** 31)
INT64_MAX, INT64_MIN = 2 ** 63 - 1, -(2 ** 63)
SENTINELS = frozenset({INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, INT64_MAX - 1})


@dataclass(frozen=True)
class Constraint:
    name: str
    rule: str       # what the output avoids
    why: str        # the evidence


CONSTRAINTS = {c.name: c for c in (
    Constraint(NEGATIVE_STEP, "no Slice with a negative step (reverses become Gather of computed indices)",
               "unsupported or emulated in onnxruntime-web/WebGL (onnxruntime #14588), WebNN (#22871) and "
               "TOSA lowerings; onnxruntime reverses a whole axis for an end of INT_MAX with a negative "
               "step where the ONNX spec gives nothing (onnxruntime #11107)"),
    Constraint(NEGATIVE_STEP_MAYBE_EMPTY, "a negative Slice step only on an axis known to be non-empty "
               "(otherwise Gather of computed indices)",
               "OpenVINO 2026.4's CPU plugin reads elements out of an empty axis with a negative step: "
               "Slice(0, 0, -2) on a dim of 0 gave 2 elements"),
    Constraint(SCALAR_GATHER, "no Gather with 0-d (scalar) indices (a 1-D index; the layout step removes the axis)",
               "rejected by onnxruntime's NNAPI and VSINPU execution providers (#16279, #24603); needed a "
               "special transformation in OpenVINO"),
    Constraint(NEGATIVE_GATHER, "no negative Gather indices (the dim is added, from Shape when unknown)",
               "TFLite through onnx2tf needs non-negative Gather indices (onnx2tf #275)"),
    Constraint(SENTINEL, "no INT32/INT64 MAX/MIN sentinel Slice bounds (bounds from Shape where dims are "
               "unknown), nor such a constant chosen by a Where (an index out of range is the dim itself)",
                   "TensorRT's dynamic-shape Slice failed on sentinel arithmetic (\"ISliceLayer size "
               "elements must be non-negative\", TensorRT #3480); onnxruntime #11107"),
    Constraint(RAW_UNKNOWN_BOUNDS, "on a dim unknown at conversion time, constant Slice bounds only with a "
               "positive step and one sign (else canonical bounds computed from Shape)",
               "OpenVINO 2026.4's ONNX reader decides a Slice is empty from its raw bounds (start == end) on a "
               "dynamic dim: Slice(-2, -2, step -1) on a dim of 1 fails to run, where ONNX gives 1 element"),
    Constraint(RESHAPE_EMPTY, "no Squeeze/Unsqueeze on a tensor with dynamic dims that may be empty (one "
               "Reshape: dynamic dims copied in place, or a shape from Shape with allowzero)",
               "OpenVINO 2026.4 runs them as a reshape that infers dynamic dims from the element count: a "
               "(1, 0, ?) result comes out (1, 0, 0) -- the 2 disagreements in ~700 random converted specs"),
)}


@dataclass(frozen=True)
class Target:
    name: str
    forbidden: frozenset
    verify_on: tuple        # default runtimes of the per-rewrite checks
    summary: str

    def forbids(self, constraint: str) -> bool:
        return constraint in self.forbidden

    @property
    def minimal(self) -> bool:
        """True for today's minimal lowering (no constraint)."""
        return not self.forbidden


TARGETS = {t.name: t for t in (
    Target("onnxruntime", frozenset(), ("onnxruntime",), "the minimal lowering, verified in onnxruntime"),
    Target("portable", frozenset({NEGATIVE_STEP, SCALAR_GATHER, NEGATIVE_GATHER, SENTINEL, RAW_UNKNOWN_BOUNDS,
                                  RESHAPE_EMPTY}),
           ("onnxruntime", "openvino", "reference"),
           "what every runtime agrees on: no negative steps, 1-D non-negative Gather indices, no sentinels"),
    Target("openvino", frozenset({RAW_UNKNOWN_BOUNDS, RESHAPE_EMPTY, NEGATIVE_STEP_MAYBE_EMPTY}), ("openvino",),
           "avoids what OpenVINO's ONNX reader gets wrong, verified in OpenVINO"),
)}
DEFAULT = "onnxruntime"


def get_target(name) -> Target:
    if isinstance(name, Target):
        return name
    if name is None:
        return TARGETS[DEFAULT]
    if name not in TARGETS:
        raise ValueError(f"unknown target {name!r}; expected {', '.join(TARGETS)}")
    return TARGETS[name]


# --------------------------------------------------------------------------- the audit

@dataclass(frozen=True)
class Violation:
    node: str
    op_type: str
    graph: str
    constraint: str
    detail: str
    fix: str = ""   # what --fix-slices does with the node (find_violations' ``note``)

    @property
    def why(self) -> str:
        return CONSTRAINTS[self.constraint].why

    def to_json(self) -> dict:
        out = {"node": self.node, "op_type": self.op_type, "graph": self.graph, "constraint": self.constraint,
               "detail": self.detail, "why": self.why}
        if self.fix:
            out["fix_slices"] = self.fix
        return out


def constant_of(value):
    """The numpy array of an onnx-ir value that is an initializer or a Constant node's output."""
    import numpy as np  # not at import: explain (lower -> get_target) stays free of numpy
    if value is None:
        return None
    if value.const_value is not None:
        try:
            return np.asarray(value.const_value.numpy())
        except Exception:  # external data that cannot be read: unknown
            return None
    producer = value.producer()
    if producer is not None and producer.op_type == "Constant" and producer.domain in ("", "ai.onnx"):
        attr = producer.attributes.get("value")
        if attr is not None:
            return np.asarray(attr.value.numpy())
    return None


def _dim(value, axis: int):
    shape = value.shape if value is not None else None
    if shape is None or not -len(shape) <= axis < len(shape):
        return None
    d = shape[axis]
    return d if isinstance(d, int) else None


def node_violations(node, target: Target, graph_label: str = "main graph") -> list[Violation]:
    """The constraints of ``target`` that one onnx-ir node breaks."""
    out: list = []
    name = node.name or (node.outputs[0].name if node.outputs else node.op_type)
    if node.domain not in ("", "ai.onnx"):
        return out

    def add(constraint: str, detail: str) -> None:
        if target.forbids(constraint):
            out.append(Violation(name, node.op_type, graph_label, constraint, detail))

    if node.op_type == "Slice" and len(node.inputs) >= 3:
        starts, ends = constant_of(node.inputs[1]), constant_of(node.inputs[2])
        steps = constant_of(node.inputs[4]) if len(node.inputs) > 4 and node.inputs[4] is not None else None
        if len(node.inputs) > 4 and node.inputs[4] is not None and steps is None:
            add(NEGATIVE_STEP, "steps computed at run time (may be negative)")
        elif steps is not None and (steps < 0).any():
            add(NEGATIVE_STEP, f"steps {steps.tolist()}")
        for label, arr in (("starts", starts), ("ends", ends)):
            if arr is not None and any(int(v) in SENTINELS for v in arr.ravel()):
                add(SENTINEL, f"{label} {arr.tolist()}")
        _slice_dim_checks(node, starts, ends, steps, add)
    elif node.op_type == "Where" and len(node.inputs) == 3:
        # a sentinel chosen here reaches a bound or an index computed at run time
        for label, v in (("X", node.inputs[1]), ("Y", node.inputs[2])):
            arr = constant_of(v)
            if arr is not None and arr.dtype.kind in "iu" and any(int(x) in SENTINELS for x in arr.ravel()):
                add(SENTINEL, f"{label} {arr.tolist()}")
    elif node.op_type in ("Squeeze", "Unsqueeze") and node.inputs and node.inputs[0] is not None:
        shape = node.inputs[0].shape
        if shape is not None and not all(isinstance(d, int) for d in shape):
            add(RESHAPE_EMPTY, f"input shape {list(shape)} has dynamic dims (an empty input comes out with them 0)")
    elif node.op_type == "Gather" and len(node.inputs) >= 2:
        indices = node.inputs[1]
        arr = constant_of(indices)
        rank = arr.ndim if arr is not None else (len(indices.shape) if indices.shape is not None else None)
        if rank == 0:
            add(SCALAR_GATHER, "0-d indices")
        if arr is not None and (arr < 0).any():
            axis = node.attributes.get("axis")
            dim = _dim(node.inputs[0], axis.value if axis is not None else 0)
            add(NEGATIVE_GATHER, f"indices {arr.tolist()}" + (f" on a dim of {dim}" if dim is not None else ""))
    return out


def _slice_dim_checks(node, starts, ends, steps, add) -> None:
    """Constraints that depend on the dims of the sliced axes (known only when declared)."""
    import numpy as np
    if starts is None or ends is None:
        return
    axes_v = node.inputs[3] if len(node.inputs) > 3 else None
    axes = constant_of(axes_v) if axes_v is not None else np.arange(len(starts.ravel()))
    if axes is None:
        return
    steps = steps if steps is not None else np.ones(len(starts.ravel()), dtype=np.int64)
    for b, e, ax, st in zip(starts.ravel(), ends.ravel(), axes.ravel(), steps.ravel()):
        dim = _dim(node.inputs[0], int(ax))
        # constant bounds mean the same for every size only with a positive step and one sign
        if dim is None and (st < 0 or (b < 0) != (e < 0) or int(b) in SENTINELS or int(e) in SENTINELS):
            add(RAW_UNKNOWN_BOUNDS, f"axis {int(ax)} of unknown size: constant bounds {int(b)}:{int(e)}:{int(st)} "
                                    "whose clamping depends on the size")
        if st < 0 and not (dim is not None and dim > 0):
            add(NEGATIVE_STEP_MAYBE_EMPTY, f"axis {int(ax)}: step {int(st)} on a dim not known non-empty")


def find_violations(model, target, note=None) -> list[Violation]:
    """Every node of an onnx-ir model or ModelProto (subgraphs and functions included) that
    breaks a constraint of ``target``; ``note(node) -> str`` fills each one's ``fix``."""
    import onnx
    import onnx_ir as ir
    from ..graphs.walk import all_nodes
    target = get_target(target)
    if isinstance(model, onnx.ModelProto):
        model = ir.from_proto(model)
    out = []
    for node, label in all_nodes(model):
        found = node_violations(node, target, label)
        if found and note is not None:
            fix = note(node)
            found = [replace(v, fix=fix) for v in found]
        out += found
    return out
