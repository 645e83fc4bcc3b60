"""The pre-check condition of cleanup/qdq.py's pass, on the ModelProto index of cleanup/scan.py
(no onnx-ir: the pre-check decides whether the passes run at all without importing it)."""

from __future__ import annotations

from .scan import ProtoIndex, where

#: Ops that only move or select the elements of their first input (the other inputs are indices,
#: shapes or permutations): between a DequantizeLinear and a QuantizeLinear of the same scale and
#: zero point they may run on the integers instead.
MOVEMENT = frozenset({"Identity", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Slice", "Gather",
                      "Expand", "Tile", "DepthToSpace", "SpaceToDepth"})


def qdq_around_movement(index: ProtoIndex) -> str | None:
    """A QuantizeLinear whose input is made by :data:`MOVEMENT` nodes from a DequantizeLinear."""
    for _, node, ins, _ in index.each("QuantizeLinear"):
        d = ins[0] if ins else None
        steps = 0
        while d is not None and d.kind == "node" and d.node.op_type in MOVEMENT and d.ins and steps < 64:
            d, steps = d.ins[0], steps + 1
        if d is not None and d.kind == "node" and d.node.op_type == "Concat":
            return f"QdqMovementPass may change {where(node)} (a Concat before it)"
        if steps and d is not None and d.kind == "node" and d.node.op_type == "DequantizeLinear":
            return f"QdqMovementPass may change {where(node)} (data movement between DequantizeLinear and it)"
    return None
