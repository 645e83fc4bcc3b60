"""The cleanup pass ``LiftScalarsPass``: ``Unsqueeze(s, axes=[0])`` of a scalar ``s`` computed from
``Squeeze``-d length-1 vectors, scalar constants, ``Gather`` of one constant index and elementwise
ops becomes the same computation on length-1 vectors (``Squeeze -> Cast -> Unsqueeze`` == ``Cast``).
``Unsqueeze(Squeeze(x, A), A)`` on static size-1 dims becomes ``x``.

Its firing condition on the ModelProto is ``conditions.lift_scalars`` (cleanup/conditions.py,
beside the other conditions: the pre-check asks them without importing onnx-ir).
"""

from __future__ import annotations

from . import conditions
from .base import CleanupPass, axes_of, const_array, replace_uses, static_dims
from .conditions import ELEMENTWISE


class LiftScalarsPass(CleanupPass):
    """``Unsqueeze(s, axes=[0])`` of a scalar ``s`` computed from ``Squeeze``-d length-1 vectors,
    scalar constants, ``Gather`` of one constant index and elementwise ops becomes the same
    computation on length-1 vectors (``Squeeze -> Cast -> Unsqueeze`` == ``Cast``).
    ``Unsqueeze(Squeeze(x, A), A)`` on static size-1 dims becomes ``x``."""

    def run_graph(self, graph, ctx) -> bool:
        changed = False
        for node in list(graph):
            if node.op_type != "Unsqueeze" or node.domain not in ("", "ai.onnx") or node.graph is not graph:
                continue
            out = node.outputs[0]
            if out.is_graph_output():
                continue
            axes = axes_of(node)
            if axes is None:
                continue
            new = None
            if axes in ([0], [-1]):
                mark = len(ctx.made)
                new = self._lift(node.inputs[0], graph, ctx, node, top=True)
                if new is None:  # (a chain given up part way: its first pieces were made)
                    ctx.undo(mark)
            if new is None:
                new = _undo_squeeze(node.inputs[0], axes)
            if new is None:
                continue
            replace_uses(out, new)
            changed = True
        return changed

    def _lift(self, value, graph, ctx, before, top=False):
        """A length-1 vector equal to Unsqueeze(value), or None.  Nodes are added only for
        values used once (by the chain being lifted), so the node count never grows."""
        if value is None:
            return None
        arr = const_array(value)
        if arr is not None:
            if arr.ndim != 0:
                return None
            return ctx.constant(graph, arr.reshape(1), before, value.name or "c")
        node = value.producer()
        if node is None or node.domain not in ("", "ai.onnx") or node.graph is not graph or len(node.outputs) != 1:
            return None
        if node.op_type == "Squeeze":
            src = node.inputs[0]
            dims = static_dims(src)
            axes = axes_of(node)
            if dims == (1,) and axes in (None, [0], [-1]):
                return src
            return None
        if len(value.uses()) != 1 or value.is_graph_output():
            return None
        if node.op_type == "Gather":
            idx = const_array(node.inputs[1])
            axis = node.attributes.get("axis")
            dims = static_dims(node.inputs[0])
            if idx is None or idx.ndim != 0 or dims is None or len(dims) != 1 or \
                    (axis is not None and axis.value not in (0, -1)):
                return None
            index = ctx.constant(graph, idx.reshape(1), before, node.inputs[1].name or "i")
            return ctx.node(graph, "Gather", [node.inputs[0], index], {"axis": 0}, before, value, (1,))
        if node.op_type not in ELEMENTWISE or not node.inputs:
            return None
        if node.op_type == "Cast" and any(a not in ("to",) for a in node.attributes):
            return None
        if not _is_scalar(value):
            return None
        lifted = []
        for v in node.inputs:
            if v is None:
                return None
            lifted.append(self._lift(v, graph, ctx, before))
            if lifted[-1] is None:
                return None
        return ctx.node(graph, node.op_type, lifted, dict(node.attributes), before, value, (1,))

    may_fire = staticmethod(conditions.lift_scalars)


def _is_scalar(value) -> bool:
    return value.shape is not None and len(value.shape) == 0


def _undo_squeeze(value, axes):
    """``x`` when ``value`` is ``Squeeze(x, A)`` with static size-1 dims at A and ``axes`` (of
    the Unsqueeze) put the same dims back."""
    node = value.producer() if value is not None else None
    if node is None or node.op_type != "Squeeze" or node.domain not in ("", "ai.onnx"):
        return None
    src = node.inputs[0]
    dims = static_dims(src)
    sq = axes_of(node)
    if dims is None or sq is None:
        return None
    rank = len(dims)
    sq_norm = sorted(a + rank if a < 0 else a for a in sq)
    un_norm = sorted(a + rank if a < 0 else a for a in axes)
    if sq_norm != un_norm or any(not 0 <= a < rank or dims[a] != 1 for a in sq_norm):
        return None
    return src
