"""Value ranges for a model's integer inputs that feed indices, inferred from the graph.

Random integers are a poor test input for an index: a token id outside an embedding table (or
a negative one) makes TensorFlow raise, and a model that is right stays unverified.  The graph
says what is valid: an input reaching a ``Gather``'s indices through value-preserving nodes
(``Cast``, ``Reshape``, ``Identity``, ``Squeeze``, ``Unsqueeze``, ``Flatten``, ``Expand``) must
lie in ``[0, table rows)``.  :func:`index_input_ranges` returns that range per input; the
random-input generators of the checks draw inside it.
"""

from __future__ import annotations

#: Nodes whose first output holds the first input's values (moved, reshaped, converted).
VALUE_PRESERVING = frozenset({"Cast", "Reshape", "Identity", "Squeeze", "Unsqueeze", "Flatten", "Expand",
                              "Transpose", "CastLike"})
#: Elementwise index arithmetic followed through (any data input), see the module doc.
INDEX_ARITHMETIC = frozenset({"Add", "Sub", "Mul", "Where", "Max", "Min", "Clip", "Mod"})


def index_input_ranges(model) -> dict[str, tuple[int, int]]:
    """{input name: (lo, hi)} (inclusive) for each integer graph input of ``model`` (a ModelProto)
    that reaches the indices of a ``Gather`` whose data has a known size along the gathered axis;
    several such Gathers: the smallest table.  Inputs not listed have no range the graph implies."""
    from onnx import TensorProto
    graph = model.graph
    integer = {TensorProto.INT8, TensorProto.INT16, TensorProto.INT32, TensorProto.INT64, TensorProto.UINT8,
               TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64}
    inits = {t.name for t in graph.initializer}
    starts = [i.name for i in graph.input
              if i.name not in inits and i.type.tensor_type.elem_type in integer]
    dims = _static_shapes(graph)
    consumers: dict[str, list] = {}
    for node in graph.node:
        for k, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, k))
    ranges = {}
    for start in starts:
        rows, todo, seen = None, [start], {start}
        while todo:
            for node, k in consumers.get(todo.pop(), ()):
                if node.domain not in ("", "ai.onnx"):
                    continue
                follow = (node.op_type in VALUE_PRESERVING and k == 0) or \
                    (node.op_type in INDEX_ARITHMETIC and not (node.op_type == "Where" and k == 0))
                if follow and node.output and node.output[0] not in seen:
                    seen.add(node.output[0])
                    todo.append(node.output[0])
                elif node.op_type == "Gather" and k == 1:
                    size = _gathered_size(node, dims)
                    if size is not None and size > 0:
                        rows = size if rows is None else min(rows, size)
        if rows is not None:
            ranges[start] = (0, rows - 1)
    return ranges


def _gathered_size(node, dims) -> int | None:
    shape = dims.get(node.input[0])
    if shape is None:
        return None
    axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
    axis = axis + len(shape) if axis < 0 else axis
    if not 0 <= axis < len(shape):
        return None
    return shape[axis]


def _static_shapes(graph) -> dict:
    """{tensor name: [dim, ...]} with every dim known: initializers, Constant nodes, and declared
    value_info / inputs with fixed shapes."""
    shapes = {t.name: list(t.dims) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            for a in node.attribute:
                if a.name == "value":
                    shapes[node.output[0]] = list(a.t.dims)
    for v in [*graph.input, *graph.value_info]:
        t = v.type.tensor_type
        if v.name not in shapes and t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim):
            shapes[v.name] = [d.dim_value for d in t.shape.dim]
    return shapes
