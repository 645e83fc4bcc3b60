"""The cleanup pass ``TransposeSliceTransposePass``: ``Transpose(Slice(Transpose(x, P)), Q)`` where
``Q`` undoes ``P`` becomes ``Slice(x)`` on the axes ``P`` maps the slice's axes to: tf2onnx's layout
optimiser cannot push its NHWC/NCHW Transposes through a StridedSlice it kept as a custom node, so
after the rewrite a channel slice sits between a Transpose pair. Pure data movement in another order
(the same elements); each middle value used once, not a graph output, the slice's parameters
constant.

Its firing condition on the ModelProto is ``conditions.transpose_slice_transpose`` (cleanup/conditions.py,
beside the other conditions: the pre-check asks them without importing onnx-ir).
"""

from __future__ import annotations

import numpy as np

from . import conditions
from .base import CleanupPass, replace_uses, slice_params


class TransposeSliceTransposePass(CleanupPass):
    """``Transpose(Slice(Transpose(x, P)), Q)`` where ``Q`` undoes ``P`` becomes ``Slice(x)`` on
    the axes ``P`` maps the slice's axes to: tf2onnx's layout optimiser cannot push its NHWC/NCHW
    Transposes through a StridedSlice it kept as a custom node, so after the rewrite a channel
    slice sits between a Transpose pair.  Pure data movement in another order (the same elements);
    each middle value used once, not a graph output, the slice's parameters constant."""

    def run_graph(self, graph, ctx) -> bool:
        changed = False
        for node in list(graph):
            pair = _transpose_pair(node, graph)
            if pair is None:
                continue
            first, mid = pair
            perm = list(first.attributes["perm"].as_ints())
            starts, ends, axes, steps = slice_params(mid)
            axes = [perm[a + len(perm) if a < 0 else a] for a in axes]
            mid.resize_inputs(5)
            mid.replace_input_with(0, first.inputs[0])
            mid.replace_input_with(3, ctx.constant(graph, np.array(axes, dtype=np.int64), mid, "axes"))
            mid.replace_input_with(4, ctx.constant(graph, np.array(steps, dtype=np.int64), mid, "steps"))
            out = mid.outputs[0]
            out.shape = None  # the elements of the same slice, in x's layout
            replace_uses(node.outputs[0], out)
            changed = True
        return changed

    may_fire = staticmethod(conditions.transpose_slice_transpose)


def _transpose_pair(node, graph):
    """(the first Transpose, the Slice) when ``node`` is the second Transpose of a pair
    :class:`TransposeSliceTransposePass` removes, else None."""
    if node.op_type != "Transpose" or node.domain not in ("", "ai.onnx") or not node.inputs or \
            node.outputs[0].is_graph_output() or "perm" not in node.attributes:
        return None
    mid = node.inputs[0].producer() if node.inputs[0] is not None else None
    if mid is None or mid.op_type != "Slice" or mid.domain not in ("", "ai.onnx") or mid.graph is not graph or \
            len(mid.inputs) < 3 or len(mid.outputs[0].uses()) != 1 or mid.outputs[0].is_graph_output():
        return None
    first = mid.inputs[0].producer() if mid.inputs[0] is not None else None
    if first is None or first.op_type != "Transpose" or first.domain not in ("", "ai.onnx") or \
            first.graph is not graph or "perm" not in first.attributes or len(first.outputs[0].uses()) != 1 or \
            first.outputs[0].is_graph_output():
        return None
    p, q = list(first.attributes["perm"].as_ints()), list(node.attributes["perm"].as_ints())
    if len(p) != len(q) or sorted(p) != list(range(len(p))) or any(p[q[i]] != i for i in range(len(q))):
        return None
    params = slice_params(mid)
    if params is None or any(not -len(p) <= a < len(p) for a in params[2]):
        return None
    return first, mid
