"""The cleanup pass ``MergeSlicesPass``: ``Slice(Slice(x))`` with constant parameters on distinct axes
(non-negative, or negative with a known rank) becomes one ``Slice``, when the inner one has no other
use.

Its firing condition on the ModelProto is ``conditions.merge_slices`` (cleanup/conditions.py,
beside the other conditions: the pre-check asks them without importing onnx-ir).
"""

from __future__ import annotations

import numpy as np

from . import conditions
from .base import CleanupPass, slice_params, static_dims


class MergeSlicesPass(CleanupPass):
    """``Slice(Slice(x))`` with constant parameters on distinct axes (non-negative, or negative
    with a known rank) becomes one ``Slice``, when the inner one has no other use."""

    def run_graph(self, graph, ctx) -> bool:
        changed = False
        for node in list(graph):
            if node.op_type != "Slice" or node.domain not in ("", "ai.onnx") or len(node.inputs) < 3:
                continue
            inner = node.inputs[0].producer()
            if inner is None or inner.op_type != "Slice" or inner.domain not in ("", "ai.onnx") or \
                    inner.graph is not graph or len(inner.inputs) < 3:
                continue
            mid = inner.outputs[0]
            if len(mid.uses()) != 1 or mid.is_graph_output():
                continue
            a, b = slice_params(inner), slice_params(node)
            if a is None or b is None:
                continue
            dims = static_dims(inner.inputs[0])
            rank = len(dims) if dims is not None else None
            axes = []
            for ax in a[2] + b[2]:
                if ax < 0:
                    if rank is None:
                        break
                    ax += rank
                axes.append(ax)
            if len(axes) != len(a[2]) + len(b[2]) or len(set(axes)) != len(axes):
                continue
            params = [ctx.constant(graph, np.array(a[i] + b[i], dtype=np.int64), node, hint)
                      for i, hint in enumerate(("starts", "ends", "axes", "steps"))]
            node.resize_inputs(5)  # the outer node is kept (its output may be a graph output)
            for i, v in enumerate([inner.inputs[0], *params]):
                node.replace_input_with(i, v)
            changed = True
        return changed

    may_fire = staticmethod(conditions.merge_slices)
