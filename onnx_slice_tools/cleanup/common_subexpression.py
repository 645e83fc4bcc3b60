"""The cleanup pass ``CommonSubexpressionPass``: nodes with one op, equal attributes and the same
inputs -- small constants compared by value -- are computed once per graph (onnx-ir's pass covers
only the main graph and compares constants by identity).

Its firing condition on the ModelProto is ``conditions.common_subexpression`` (cleanup/conditions.py,
beside the other conditions: the pre-check asks them without importing onnx-ir).
"""

from __future__ import annotations

import onnx_ir as ir

from . import conditions
from .base import CleanupPass, const_array, replace_uses
from .conditions import NONDETERMINISTIC
from .scan import SMALL


class CommonSubexpressionPass(CleanupPass):
    """Nodes with one op, equal attributes and the same inputs -- small constants compared by
    value -- are computed once per graph (onnx-ir's pass covers only the main graph and
    compares constants by identity)."""

    def run_graph(self, graph, ctx) -> bool:
        seen: dict = {}
        changed = False
        value_keys: dict = {}  # id(value) -> (value, key): a constant read once, not once per reader
        for node in list(graph):
            key = _node_key(node, value_keys)
            if key is None:
                continue
            first = seen.get(key)
            if first is None:
                seen[key] = node
                continue
            if any(v.is_graph_output() for v in node.outputs):
                continue
            for old, new in zip(node.outputs, first.outputs):
                replace_uses(old, new)
            changed = True
        return changed

    may_fire = staticmethod(conditions.common_subexpression)


def _value_key(value):
    if value is None:
        return None
    arr = const_array(value)
    if arr is not None:
        return ("const", str(arr.dtype), arr.shape, arr.tobytes())
    return id(value)


def _memo_value_key(value, memo: dict):
    hit = memo.get(id(value))
    if hit is None:
        hit = memo[id(value)] = (value, _value_key(value))  # the value kept: its id stays its own
    return hit[1]


def _node_key(node, value_keys: dict | None = None):
    if node.op_type in NONDETERMINISTIC:
        return None
    attrs = []
    for name, attr in sorted(node.attributes.items()):
        if attr.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS):
            return None
        v = attr.value
        if attr.type == ir.AttributeType.TENSOR:
            if v.size > SMALL:
                return None
            arr = v.numpy()
            v = (str(arr.dtype), arr.shape, arr.tobytes())
        elif isinstance(v, (list, tuple)):
            v = tuple(v)
        elif attr.type in (ir.AttributeType.TENSORS, ir.AttributeType.SPARSE_TENSOR,
                           ir.AttributeType.SPARSE_TENSORS, ir.AttributeType.TYPE_PROTO,
                           ir.AttributeType.TYPE_PROTOS):
            return None
        attrs.append((name, attr.type, v))
    if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
        return (node.op_identifier(), tuple(attrs))
    inputs = (tuple(_value_key(v) for v in node.inputs) if value_keys is None
              else tuple(_memo_value_key(v, value_keys) for v in node.inputs))
    return (node.op_identifier(), len(node.outputs), inputs, tuple(attrs))
