"""The cleanup pass ``ReshapeCopyDimsPass``: ``Reshape(x, shape)`` whose shape is built from constants
and dims of ``x`` itself, each at its own position (``x.reshape(tf.shape(x)[0], tf.shape(x)[1], 12,
64)``), gets a constant shape with 0 there (ONNX: "copy this dim", allowzero=0): the ``Shape ->
Slice -> Concat`` arithmetic goes dead.

Its firing condition on the ModelProto is ``conditions.reshape_copy_dims`` (cleanup/conditions.py,
beside the other conditions: the pre-check asks them without importing onnx-ir).
"""

from __future__ import annotations

import numpy as np

from . import conditions
from .base import CleanupPass, Facts, const_array, replace_uses, shape_list, static_dims


class ReshapeCopyDimsPass(CleanupPass):
    """``Reshape(x, shape)`` whose shape is built from constants and dims of ``x`` itself, each
    at its own position (``x.reshape(tf.shape(x)[0], tf.shape(x)[1], 12, 64)``), gets a
    constant shape with 0 there (ONNX: "copy this dim", allowzero=0): the ``Shape -> Slice ->
    Concat`` arithmetic goes dead."""

    def run_graph(self, graph, ctx) -> bool:
        facts = Facts()
        changed = False
        for node in list(graph):
            if node.op_type != "Reshape" or node.domain not in ("", "ai.onnx") or len(node.inputs) != 2:
                continue
            allowzero = node.attributes.get("allowzero")
            if allowzero is not None and allowzero.value:
                continue
            data, shape = node.inputs
            if const_array(shape) is not None:
                continue
            fact = facts(shape)
            if fact is None or len(fact[1]) != 1:
                continue
            new = []
            for i, e in enumerate(fact[2]):
                if isinstance(e, int):
                    new.append(e)
                elif e is not None and e[1] == id(data) and e[2] == i:
                    new.append(0)
                else:
                    break
            if len(new) == len(fact[2]):
                node.replace_input_with(1, ctx.constant(graph, np.array(new, dtype=np.int64), node,
                                                        shape.name or "shape"))
                changed = True
                continue
            axes = _inserted_axes(fact[2], static_dims(data), id(data))
            out = node.outputs[0]
            if axes is None or out.is_graph_output():
                continue
            if ctx.opset() >= 13:
                unsq = [data, ctx.constant(graph, np.array(axes, dtype=np.int64), node, "axes")]
                replace_uses(out, ctx.node(graph, "Unsqueeze", unsq, {}, node, out, shape_list(out)))
            else:
                replace_uses(out, ctx.node(graph, "Unsqueeze", [data], {"axes": axes}, node, out, shape_list(out)))
            changed = True
        return changed

    may_fire = staticmethod(conditions.reshape_copy_dims)


def _inserted_axes(elems, dims, data_id) -> list[int] | None:
    """When a Reshape's target is the data's own dims in order with 1s inserted
    (``[d0, 1, 1, d1]`` for data ``[d0, d1]``), the positions of the inserted 1s: the Reshape is
    that Unsqueeze.  None otherwise (a literal 0 or -1 in the target included)."""
    if dims is None:
        return None
    j, axes = 0, []
    for i, e in enumerate(elems):
        if j < len(dims) and (e == ("dim", data_id, j) or (isinstance(e, int) and e > 0 and e == dims[j])):
            j += 1
        elif e == 1:
            axes.append(i)
        else:
            return None
    return axes if j == len(dims) and axes else None
