"""Value ranges for a model's integer inputs that feed indices, inferred from the graph.

Random integers are a poor test input for an index: a token id outside an embedding table (or
a negative one) makes TensorFlow raise, and a model that is right stays unverified.  The graph
says what is valid: an input reaching a ``Gather``'s indices through value-preserving nodes
(``Cast``, ``Reshape``, ``Identity``, ``Squeeze``, ``Unsqueeze``, ``Flatten``, ``Expand``) must
lie in ``[0, table rows)``.  :func:`index_input_ranges` returns that range per input; the
random-input generators of the checks draw inside it.
"""

from __future__ import annotations

import dataclasses

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
    if not starts:
        return {}
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


# --------------------------------------------------------------------------- index vectors

#: Nodes that pass a 1-D vector on with its length and values (an index vector traced back
#: through them to the graph input it comes from).
_VECTOR_PRESERVING = frozenset({"Cast", "CastLike", "Identity"})


@dataclasses.dataclass
class IndexVector:
    """A fed graph input read as begin, end or strides of rewritten StridedSlice nodes."""

    name: str
    length: int                                   # the length every use needs
    pinned: bool                                  # its declared length is unknown: ``length`` is chosen here
    uses: list = dataclasses.field(default_factory=list)  # (field, spec, data tensor name, node name)


def index_vectors(proto, records) -> tuple[dict[str, IndexVector], str | None]:
    """The fed inputs of ``proto`` (a ModelProto) that reach a runtime begin/end/strides of one
    of ``records`` (rewrite records: ``index_names``, ``spec``, ``data_name``) through
    ``Cast``/``Identity`` nodes of the main graph: {input name: IndexVector}, and the reason
    no input length serves every use (one line), or None.  A vector declared with an unknown
    length (``[?]``, a named dim, or no shape) gets the length its StridedSlice needs -- the
    length of the other vectors (``spec.n``); two uses that need different lengths are the
    reason returned."""
    records = [r for r in records if r.index_names and getattr(r, "lowering", None) is not None]
    if not records:
        return {}, None
    graph = proto.graph
    inits = {t.name for t in graph.initializer}
    fed = {vi.name: vi for vi in graph.input if vi.name not in inits}
    producer = {o: n for n in graph.node for o in n.output}
    vectors: dict[str, IndexVector] = {}
    problem = None
    for r in records:
        if r.spec is None:
            continue
        for field, name in r.index_names.items():
            while name not in fed and name in producer and producer[name].op_type in _VECTOR_PRESERVING \
                    and producer[name].domain in ("", "ai.onnx"):
                name = producer[name].input[0]
            if name not in fed:
                continue
            vi = fed[name]
            tt = vi.type.tensor_type
            if not vi.type.HasField("tensor_type"):
                continue
            dims = list(tt.shape.dim) if tt.HasField("shape") else None
            if dims is not None and len(dims) != 1:
                continue
            n = r.spec.n
            pinned = dims is None or not dims[0].HasField("dim_value")
            vec = vectors.setdefault(name, IndexVector(name, n, pinned))
            vec.uses.append((field, r.spec, r.data_name, r.node))
            if vec.length != n and problem is None:
                f0, _, _, node0 = vec.uses[0]
                problem = (f"input {name!r} is the {f0} of StridedSlice {node0!r} (length {vec.length}) and the "
                           f"{field} of {r.node!r} (length {n}): no length of it runs both")
    return vectors, problem


def vector_ranges(vec: IndexVector, shapes: dict) -> list[tuple[int, int]]:
    """Inclusive (lo, hi) per entry of ``vec`` where every use is valid in its framework:
    begins inside the axis they index ([0, dim - 1]: a single index out of range raises),
    ends in [0, dim], strides in [1, 2] (0 raises; TensorFlow rejects a shrink's negative
    stride).  ``shapes``: value name -> (elem, dims) at the run's sizes; an entry whose axis
    size is not known (or that indexes no axis) gets 0 (1 for strides).  Several uses: the
    intersection (lo > hi when none is valid for all)."""
    from ..errors import StridedSliceError
    from ..semantics.plan import make_plan
    from ..semantics.spec import TFLITE
    ranges = [(1, 2) if any(f == "strides" for f, *_ in vec.uses) else (0, 1 << 30)] * vec.length
    for field, spec, data, _ in vec.uses:
        shape = shapes.get(data, (None, None))[1]
        dims: dict = {}
        if shape is not None and None not in shape:
            if spec.flavor == TFLITE:  # positions may be re-indexed (plan_tflite): the smallest axis for all
                dims = {k: min(shape, default=0) for k in range(vec.length)}
            else:
                try:
                    dims = {a.index: a.dim for a in make_plan(spec, tuple(shape)).axes
                            if a.index is not None and isinstance(a.dim, int)}
                except StridedSliceError:
                    dims = {}
        for k in range(vec.length):
            dim = dims.get(k)
            if field == "strides":
                lo, hi = 1, 2
            elif field == "begin":
                lo, hi = 0, max(0, dim - 1) if dim is not None else 0
            else:
                lo, hi = 0, (1 if spec.offset else dim) if dim is not None else 0
            ranges[k] = (max(ranges[k][0], lo), min(ranges[k][1], hi))
    return ranges
