"""Cleanup of quantized graphs: ``QuantizeLinear(move(DequantizeLinear(t)))`` becomes ``move(t)``.

tf2onnx converts a quantized ``.tflite`` into QDQ form: every op reads ``DequantizeLinear`` of its
integer inputs and writes ``QuantizeLinear`` of its float result.  A StridedSlice kept as a custom
node and lowered by us therefore sits between a DequantizeLinear and a QuantizeLinear of the same
scale and zero point, where tf2onnx's own optimiser slices the integers directly.  When the nodes
between them only move elements (:data:`qdq_condition.MOVEMENT`: a Slice, a Gather's data, a
Reshape, a Transpose, Squeeze/Unsqueeze ...; first a Concat of DequantizeLinear outputs, all of
one scale and zero point), they run on the integers instead and the pair goes.

Exact, bit for bit: for an 8- or 16-bit integer ``t``, a float32 scale ``s`` (finite, normal)
and zero point ``z``, ``DequantizeLinear`` gives ``(t - z) * s`` rounded to float32, and
``QuantizeLinear`` with the same ``s`` and ``z`` rounds ``that / s`` -- within two float32 ulps of
the integer ``t - z``, far from a rounding boundary -- back to ``t`` (no saturation: ``t`` is
of the output's type).  Per-tensor (scalar) scales only: a per-axis scale names an axis the
movement may change.  Each moved value used once and not a graph output (the DequantizeLinear's
may have other uses: it stays for them); the QuantizeLinear's output may be a graph output (the
last moved value takes its name).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from . import qdq_condition
from .base import graphs_of
from .qdq_condition import MOVEMENT

_DEFAULT = ("", "ai.onnx")
#: integer types whose every value survives DequantizeLinear -> QuantizeLinear through float32
_NARROW = frozenset({ir.DataType.INT8, ir.DataType.UINT8, ir.DataType.INT16, ir.DataType.UINT16})


def _const(value) -> np.ndarray | None:
    if value is None:
        return None
    tensor = value.const_value if not value.is_graph_input() else None
    if tensor is None:
        producer = value.producer()
        if producer is not None and producer.op_type == "Constant" and producer.domain in _DEFAULT:
            attr = producer.attributes.get("value")
            tensor = attr.value if attr is not None and attr.type == ir.AttributeType.TENSOR else None
    if tensor is None or tensor.size > 1:
        return None
    try:
        return np.asarray(tensor.numpy())
    except Exception:  # an exotic or unreadable constant: not compared
        return None


def _params(node, data_type) -> tuple | None:
    """(scale, zero point) of a per-tensor Q/DQ node as comparable values, or None."""
    if any(a in node.attributes for a in ("block_size",)) or len(node.inputs) < 2:
        return None
    scale = _const(node.inputs[1])
    if scale is None or scale.size != 1 or scale.dtype != np.float32:
        return None
    s = float(scale.reshape(()))
    if not np.isfinite(s) or not 1e-30 < s < 1e30:
        return None
    if len(node.inputs) > 2 and node.inputs[2] is not None:
        zp = _const(node.inputs[2])
        if zp is None or zp.size != 1:
            return None
        z = int(zp.reshape(()))
    else:
        z = 0
    return scale.tobytes(), z


def _chain(q, graph):
    """(the DequantizeLinear nodes feeding the first moved node, by its input position; the
    movement nodes from there to ``q`` in order) or None.  The first moved node may be a Concat
    whose every input is a DequantizeLinear's output."""
    chain: list = []
    value = q.inputs[0] if q.inputs else None
    while value is not None:
        node = value.producer()
        if node is None or node.graph is not graph or node.domain not in _DEFAULT:
            return None
        if node.op_type == "DequantizeLinear":  # (its value may have other uses: it stays for them)
            return ({0: node}, chain[::-1]) if chain else None
        if value.is_graph_output() or len(value.uses()) != 1 or len(node.outputs) != 1 or len(chain) >= 64:
            return None
        if node.op_type == "Concat" and node.inputs:
            sources = {k: v.producer() for k, v in enumerate(node.inputs)}
            if all(d is not None and d.op_type == "DequantizeLinear" and d.domain in _DEFAULT and d.graph is graph
                   for d in sources.values()):
                return sources, [node, *chain[::-1]]
            return None
        if node.op_type not in MOVEMENT or not node.inputs:
            return None
        chain.append(node)
        value = node.inputs[0]
    return None


class QdqMovementPass(ir.passes.InPlacePass):
    """``QuantizeLinear(move(DequantizeLinear(t)))`` -> ``move(t)`` (module doc), in every graph."""

    def call(self, model) -> ir.passes.PassResult:
        changed = False
        for graph, _ in graphs_of(model):
            changed |= self.run_graph(graph)
        return ir.passes.PassResult(model, modified=changed)

    def run_graph(self, graph) -> bool:
        changed = False
        for q in list(graph):
            if q.op_type != "QuantizeLinear" or q.domain not in _DEFAULT or q.graph is not graph:
                continue
            found = _chain(q, graph)
            if found is None:
                continue
            sources, chain = found
            out = q.outputs[0]
            params = _params(q, out.dtype)
            if params is None or out.dtype not in _NARROW or "output_dtype" in q.attributes and \
                    q.attributes["output_dtype"].value != out.dtype.value or \
                    any(dq.inputs[0] is None or dq.inputs[0].dtype != out.dtype or _params(dq, out.dtype) != params
                        for dq in sources.values()):
                continue
            for k, dq in sources.items():
                chain[0].replace_input_with(k, dq.inputs[0])
            for node in chain:
                node.outputs[0].type = ir.TensorType(out.dtype)
            last = chain[-1].outputs[0]
            if out.is_graph_output():
                name = out.name
                outputs = graph.outputs
                for k, v in enumerate(outputs):
                    if v is out:
                        outputs[k] = last
                out.replace_all_uses_with(last)
                graph.remove(q, safe=True)
                last.name = name
                last.shape = out.shape if out.shape is not None else last.shape
            else:
                out.replace_all_uses_with(last)
                graph.remove(q, safe=True)
            changed = True
        return changed

    may_fire = staticmethod(qdq_condition.qdq_around_movement)
