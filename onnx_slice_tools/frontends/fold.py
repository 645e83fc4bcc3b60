"""Fold weight-only subgraphs of a converted model into initializers.

tf2onnx folds a kernel's layout Transpose and a following BatchNorm into a convolution only
when the weights are constants while it converts; the exports that keep large weights out of
TensorFlow's freezing (:mod:`tfexport`) hand it placeholders instead, so those nodes stay and
run on every inference.  :func:`fold_weight_subgraphs` does that folding afterwards, on the
ONNX model: nodes computing only from initializers become initializers, and a per-channel
``Mul``/``Add`` of constants after a ``Conv`` moves into the Conv's weights and bias (what
tf2onnx's own conversion does; the framework check judges the result under the tolerance rule).
:func:`drop_identity_reshapes` removes what tf2onnx's layout optimiser leaves behind: a
``Reshape`` whose output has its input's own shape (a Transpose that only moves size-1 axes
becomes a Reshape; where it met its inverse, one of the pair stays as a Reshape back to the
same shape).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: Ops computed from constant inputs at fold time: layout moves, casts and elementwise
#: arithmetic (each one correctly rounded operation per element, as at run time).
FOLDABLE = frozenset({"Transpose", "Reshape", "Cast", "Mul", "Add", "Sub", "Div", "Neg", "Sqrt",
                      "Reciprocal", "Squeeze", "Unsqueeze", "Identity", "Flatten"})


def fold_weight_subgraphs(model, base_dir=None) -> int:
    """Fold, in ``model``'s main graph, every node of :data:`FOLDABLE` whose inputs are all
    initializers or ``Constant`` values into an initializer, and each per-output-channel ``Mul``
    or ``Add`` of a constant that alone consumes a ``Conv`` with constant weights into that
    Conv's weights and bias.  ``base_dir``: where the model's external data lives (None: nodes
    reading external data are left alone); a folded value computed from external data is
    appended to the first such input's file.  Returns how many nodes were removed."""
    from onnx import numpy_helper
    graph = model.graph
    before = len(graph.node)
    protected = {o.name for o in graph.output} | _names_read_by_subgraphs(graph)
    overridable = {i.name for i in graph.input}  # an initializer that is also an input is not a constant
    inits = {t.name: t for t in graph.initializer if t.name not in overridable}
    values: dict[str, np.ndarray] = {}

    def value(name):
        if name in values:
            return values[name]
        t = inits.get(name)
        if t is None:
            return None
        if _external(t) and base_dir is None:
            return None
        values[name] = numpy_helper.to_array(t, base_dir=str(base_dir) if base_dir else "")
        return values[name]

    def store(name, array, like):
        """A new initializer ``name`` = ``array``; external when any of ``like`` is."""
        tensor = numpy_helper.from_array(np.ascontiguousarray(array), name)
        ext = next((inits[n] for n in like if n in inits and _external(inits[n])), None)
        if ext is not None:
            from .tfexport import point_external
            location = next(e.value for e in ext.external_data if e.key == "location")
            raw = tensor.raw_data
            with open(Path(base_dir) / location, "ab") as out:
                offset = out.tell()
                out.write(raw)
            tensor.ClearField("raw_data")
            point_external(tensor, location, offset, len(raw))
        graph.initializer.append(tensor)
        inits[name] = tensor
        values[name] = array

    _constant_nodes_to_initializers(graph, inits, protected)
    nodes = list(graph.node)
    kept = []
    for node in nodes:
        if node.op_type in FOLDABLE and node.domain in ("", "ai.onnx") and len(node.output) == 1 and \
                node.input and all(i in inits for i in node.input) and node.output[0] not in protected:
            args = [value(i) for i in node.input]
            if all(a is not None for a in args):
                out = _run_one(node, args)
                # a Cast may widen (a float16 weight to float32: tf2onnx folds it too)
                if out is not None and (node.op_type == "Cast" or
                                        out.nbytes <= max(sum(a.nbytes for a in args), 1 << 10)):
                    store(node.output[0], out, node.input)
                    continue
        kept.append(node)
    kept = _fuse_conv_scale_shift(kept, inits, value, store, protected)
    del graph.node[:]
    graph.node.extend(kept)
    _drop_unused_initializers(graph, protected)
    return before - len(graph.node)


def drop_identity_reshapes(model) -> int:
    """Remove each main-graph ``Reshape`` whose output provably has its input's shape (pure data
    movement that moves nothing): its consumers read its input instead.  Shapes come from one
    ONNX shape inference of a weightless skeleton; the target must be a constant of the input's
    rank whose every entry is the input's known dim, a 0 copying it (``allowzero`` 0), or one
    -1 beside known positive dims (so -1 can only be that dim).  A Reshape giving a graph output,
    or read inside a subgraph, stays.  Returns how many were removed."""
    from onnx import numpy_helper
    graph = model.graph
    consts = {t.name: t for t in graph.initializer if not _external(t) and t.data_type == 7}  # INT64
    candidates = [n for n in graph.node if n.op_type == "Reshape" and n.domain in ("", "ai.onnx")
                  and len(n.input) == 2 and n.input[1] in consts]
    if not candidates:
        return 0
    dims = _inferred_dims(model)
    protected = {o.name for o in graph.output} | _names_read_by_subgraphs(graph)
    renamed: dict = {}
    for node in candidates:
        data, out = node.input[0], node.output[0]
        allowzero = next((a.i for a in node.attribute if a.name == "allowzero"), 0)
        target = numpy_helper.to_array(consts[node.input[1]]).reshape(-1).tolist()
        if out in protected or not _same_shape(dims.get(data), target, allowzero):
            continue
        renamed[out] = renamed.get(data, data)
    if not renamed:
        return 0
    kept = [n for n in graph.node if not (n.op_type == "Reshape" and n.output and n.output[0] in renamed)]
    for n in kept:
        for k, name in enumerate(n.input):
            if name in renamed:
                n.input[k] = renamed[name]
    removed = len(graph.node) - len(kept)
    del graph.node[:]
    graph.node.extend(kept)
    info = [vi for vi in graph.value_info if vi.name not in renamed]
    del graph.value_info[:]
    graph.value_info.extend(info)
    _drop_unused_initializers(graph, protected)
    return removed


def _inferred_dims(model) -> dict:
    """Value name -> tuple of dims (int, or None when unknown) of the main graph, by one plain
    shape inference of a weightless skeleton (empty when inference fails)."""
    from ..graphs.shape_inference import infer
    from ..rewrite.shapes import skeleton
    try:
        inferred = infer(skeleton(model))
    except RuntimeError:
        return {}
    g = inferred.graph
    dims: dict = {}
    for vi in [*g.input, *g.value_info, *g.output]:
        t = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and t.HasField("shape"):
            dims[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim)
    return dims


def _same_shape(dims, target: list, allowzero: int) -> bool:
    """Whether Reshape to ``target`` of a tensor of ``dims`` (None: unknown) gives ``dims``."""
    if dims is None or len(dims) != len(target):
        return False
    free = [k for k, t in enumerate(target) if t == -1]
    if len(free) > 1:
        return False
    for k, (d, t) in enumerate(zip(dims, target)):
        if t == -1:
            continue
        if t == 0 and not allowzero:  # copies the dim: the same, whatever it is
            if free and not (d is not None and d > 0):  # (-1 must be determined by the others)
                return False
            continue
        if d is None or d != t or (free and d <= 0):
            return False
    return True


def _external(tensor) -> bool:
    from onnx import TensorProto
    return tensor.data_location == TensorProto.EXTERNAL


def _names_read_by_subgraphs(graph) -> set:
    """Every name an If/Loop/Scan body reads (outer-scope values must stay as they are)."""
    from ..graphs.walk import proto_subgraphs
    names: set = set()

    def visit(g):
        for n in g.node:
            names.update(n.input)
            for sub in proto_subgraphs(n):
                visit(sub)
    for n in graph.node:
        for sub in proto_subgraphs(n):
            visit(sub)
    return names


def _constant_nodes_to_initializers(graph, inits, protected) -> None:
    """``Constant(value=tensor)`` nodes of the main graph become initializers of that name."""
    keep = []
    for node in graph.node:
        attrs = {a.name: a for a in node.attribute}
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and set(attrs) == {"value"} and \
                node.output[0] not in protected and node.output[0] not in inits:
            tensor = type(attrs["value"].t)()
            tensor.CopyFrom(attrs["value"].t)
            tensor.name = node.output[0]
            graph.initializer.append(tensor)
            inits[tensor.name] = tensor
            continue
        keep.append(node)
    del graph.node[:]
    graph.node.extend(keep)


def _run_one(node, args):
    """``node`` run by onnx's reference evaluator on ``args``, or None when it cannot."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator
    inputs = [helper.make_tensor_value_info(f"i{k}", helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
              for k, a in enumerate(args)]
    copy = helper.make_node(node.op_type, [f"i{k}" for k in range(len(args))], ["o"])
    copy.attribute.extend(node.attribute)
    graph = helper.make_graph([copy], "fold", inputs, [helper.make_value_info("o", helper.TypeProto())])
    try:
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _opset_hint(node))])
        model.ir_version = 8
        (out,) = ReferenceEvaluator(model).run(None, {f"i{k}": a for k, a in enumerate(args)})
    except Exception:  # an op or attribute the evaluator does not take: keep the node
        return None
    return np.asarray(out)


def _opset_hint(node) -> int:
    """Opset to run ``node`` at: Squeeze/Unsqueeze/Reshape with axes or shape as inputs are >= 13,
    with attributes < 13."""
    if node.op_type in ("Squeeze", "Unsqueeze") and any(a.name == "axes" for a in node.attribute):
        return 11
    return 17


def _fuse_conv_scale_shift(nodes, inits, value, store, protected):
    """Per-output-channel ``Mul``/``Add`` by a constant right after a ``Conv`` whose weights (and
    bias) are constants, the Conv's only consumer, moves into the Conv; also across a layout
    ``Transpose`` between them (tf2onnx's NCHW -> NHWC around a depthwise convolution), the
    channel axis then being where the Transpose puts axis 1."""
    changed = True
    while changed:
        changed = False
        consumers: dict[str, list] = {}
        for n in nodes:
            for i in n.input:
                consumers.setdefault(i, []).append(n)
        for conv in nodes:
            if conv.op_type != "Conv" or conv.domain not in ("", "ai.onnx") or len(conv.input) < 2 or \
                    conv.output[0] in protected or len(consumers.get(conv.output[0], ())) != 1:
                continue
            nxt, axis, via = consumers[conv.output[0]][0], 1, None
            if nxt.op_type == "Transpose" and nxt.domain in ("", "ai.onnx") and nxt.output[0] not in protected \
                    and len(consumers.get(nxt.output[0], ())) == 1:
                perm = next((list(a.ints) for a in nxt.attribute if a.name == "perm"), None)
                if perm is None or 1 not in perm:
                    continue
                via, axis, nxt = nxt, perm.index(1), consumers[nxt.output[0]][0]
            if nxt.op_type not in ("Mul", "Add") or nxt.domain not in ("", "ai.onnx") or len(nxt.input) != 2:
                continue
            produced = (via or conv).output[0]
            other = nxt.input[1] if nxt.input[0] == produced else nxt.input[0]
            if other == produced or other not in inits or conv.input[1] not in inits:
                continue
            w, c = value(conv.input[1]), value(other)
            b = value(conv.input[2]) if len(conv.input) > 2 and conv.input[2] else None
            if w is None or c is None or (len(conv.input) > 2 and conv.input[2] and b is None) or \
                    c.dtype != w.dtype or (b is not None and b.dtype != w.dtype):
                continue
            v = _per_channel(c, w.ndim, w.shape[0], axis)
            if v is None:
                continue
            if nxt.op_type == "Mul":
                new_w, new_b = w * v.reshape((-1,) + (1,) * (w.ndim - 1)), None if b is None else b * v
            else:
                new_w, new_b = None, v if b is None else b + v
            base = conv.output[0]
            if new_w is not None:
                store(f"{base}__folded_w", new_w.astype(w.dtype), [conv.input[1]])
                conv.input[1] = f"{base}__folded_w"
            if new_b is not None:
                store(f"{base}__folded_b", new_b.astype(w.dtype), [conv.input[1]])
                if len(conv.input) > 2:
                    conv.input[2] = f"{base}__folded_b"
                else:
                    conv.input.append(f"{base}__folded_b")
            (via or conv).output[0] = nxt.output[0]
            nodes = [n for n in nodes if n is not nxt]
            changed = True
            break
    return nodes


def _per_channel(c: np.ndarray, rank: int, channels: int, axis: int = 1):
    """``c`` as a vector of ``channels`` values when it broadcasts against a tensor of ``rank``
    whose channels are on ``axis`` along that axis only (or is one value), else None."""
    if c.ndim > rank:
        return None
    shape = (1,) * (rank - c.ndim) + c.shape
    if shape[axis] not in (1, channels) or any(d != 1 for k, d in enumerate(shape) if k != axis):
        return None
    return np.broadcast_to(c.reshape(-1), (channels,)).copy()


def _drop_unused_initializers(graph, protected) -> None:
    used = set(protected) | {i.name for i in graph.input}
    for n in graph.node:
        used.update(n.input)
    keep = [t for t in graph.initializer if t.name in used]
    if len(keep) != len(graph.initializer):
        del graph.initializer[:]
        graph.initializer.extend(keep)
