"""Rewrite of the slice-update family (and TFLite GELU, TensorFlow Erfc) that tf2onnx leaves behind.

tf2onnx 1.17 has no handler for ``XlaDynamicUpdateSlice``, ``XlaDynamicSlice``,
``TensorStridedSliceUpdate``, ``StridedSliceGrad`` (TensorFlow) nor ``DYNAMIC_UPDATE_SLICE`` and
``GELU`` (TFLite): its Python API and its command line continue past them (the command line
exits 0) and leave each as a raw node in the default domain
(``TFL_`` + the builtin's name for TFLite, GELU keeping its ``approximate`` attribute); so
does it with TensorFlow's ``Erfc`` (Keras's exact GELU), which ONNX lacks.  This
module reads such nodes (one :class:`OpSeam` per op: its inputs parsed, planned by
semantics/update.py, lowered by lowering/update.py), replaces them in place (main graph and
subgraphs) and returns one :class:`UpdateRecord` each, which verification/update_checks.py checks
against the numpy reference in onnxruntime.

Shapes come from one plain ONNX shape inference of a weightless copy (past our StridedSlice)
and what the model declares (numbers over inference's symbolic names); each rewritten output is
declared with the op's shape, which its lowering may hide from inference (a run-time start).
The pipeline runs this first, on every input (api._slice_updates).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..errors import ModelError, StridedSliceError
from ..lowering import update as lowering
from ..semantics import update as semantics
from ..semantics.update import known
from ..semantics.plan import make_plan
from ..semantics.spec import MASK_NAMES, from_tf
from .core import STANDARD_DOMAINS


@dataclass
class UpdateRecord:
    """One rewritten node: what it was, how it was read, what replaced it, and what the check
    needs to run it alone (input names, shapes and element types, the parsed parameters)."""

    node: str
    op_type: str
    graph: str
    inputs: list
    output: str
    shapes: list
    elem_types: list
    params: dict
    lowering: lowering.OpLowering
    check: str = "not run"
    notes: list = field(default_factory=list)
    output_shape: tuple | None = None  # the op's output shape (dims known here; None: unknown rank)

    @property
    def form(self) -> str:
        return self.lowering.form

    def describe(self) -> str:
        return (f"{self.op_type} {self.node!r} ({self.graph}): {self.form}, "
                f"{self.lowering.node_count} node(s) {'/'.join(self.lowering.describe()) or '-'}; check: {self.check}")


@dataclass
class _Facts:
    shapes: dict
    types: dict
    consts: dict

    def shape(self, name: str):
        return self.shapes.get(name)

    def const(self, name: str):
        return self.consts.get(name)


def _dims(t) -> tuple | None:
    if not t.type.HasField("tensor_type") or not t.type.tensor_type.HasField("shape"):
        return None
    out: list = []
    for d in t.type.tensor_type.shape.dim:
        out.append(d.dim_value if d.HasField("dim_value") else (d.dim_param or None))
    return tuple(out)


def _merged(derived, declared) -> tuple:
    """A value's shape from inference (``derived``) and as declared: per dim, a number where
    either has one (inference's symbolic names are its own: a declared number is more), the
    declaration where the ranks differ or nothing was derived."""
    if derived is None or len(derived) != len(declared):
        return declared
    return tuple(d if isinstance(d, int) else e if isinstance(e, int) else d if d is not None else e
                 for d, e in zip(derived, declared))


def _facts(model) -> _Facts:
    """Shapes and types derived by ONNX shape inference past our StridedSlice
    (:func:`.shapes.derive_shapes`), else as the model declares them (tf2onnx declares its custom
    nodes' outputs); constants: small inline initializers and Constant nodes of every graph."""
    from onnx import numpy_helper

    from ..graphs.walk import proto_graphs
    from .shapes import derive_shapes
    shapes: dict = {}
    types: dict = {}
    consts: dict = {}
    for name, (elem, dims) in derive_shapes(model).items():
        if dims is not None:
            shapes[name] = dims
        if elem:
            types[name] = elem
    for graph, _label, is_function in proto_graphs(model):
        if is_function:
            continue
        for t in list(graph.input) + list(graph.value_info) + list(graph.output):
            dims = _dims(t)
            if dims is not None:
                shapes[t.name] = _merged(shapes.get(t.name), dims)
            if t.type.HasField("tensor_type") and t.type.tensor_type.elem_type:
                types.setdefault(t.name, t.type.tensor_type.elem_type)
    for graph, _label, is_function in proto_graphs(model):
        for t in () if is_function else graph.initializer:
            shapes.setdefault(t.name, tuple(t.dims))
            types.setdefault(t.name, t.data_type)
            if t.data_location != 1 and np.prod(t.dims, dtype=np.int64) <= 64:  # small, inline
                consts[t.name] = numpy_helper.to_array(t)
        for n in graph.node:
            if n.op_type == "Constant" and n.domain in STANDARD_DOMAINS and n.attribute and \
                    n.attribute[0].name == "value":
                arr = numpy_helper.to_array(n.attribute[0].t)
                if arr.size <= 64:
                    consts[n.output[0]] = arr
                    shapes.setdefault(n.output[0], tuple(arr.shape))
                    types.setdefault(n.output[0], n.attribute[0].t.data_type)
    return _Facts(shapes, types, consts)


def _cannot(reason: str, field: str, node: str) -> StridedSliceError:
    """A node the framework runs but this rewrite cannot express (a shape or constant it needs
    is unknown): a failed conversion (exit 1), where a node the framework rejects is invalid
    input (exit 2, the StridedSlice rule)."""
    return StridedSliceError(reason, field=field, node=node, unsupported=True)


def _known(shape, what: str, node: str) -> tuple:
    if shape is None:
        raise _cannot(f"the shape of {what} is unknown (no rank): cannot rewrite it", what, node)
    return shape


def _static(shape, what: str, node: str) -> tuple[int, ...]:
    shape = _known(shape, what, node)
    if not all(isinstance(d, int) for d in shape):
        raise _cannot(f"the shape of {what} {list(shape)} is not fully known: this form needs it", what, node)
    return tuple(int(d) for d in shape)


def _attr(node, name: str, default=0) -> int:
    """The integer attribute ``name`` of ``node`` (``default`` when absent); one of another type
    is invalid (the framework's op defines it as an integer)."""
    for a in node.attribute:
        if a.name == name:
            if a.type != a.INT:
                raise StridedSliceError(f"must be an integer, got an attribute of type {a.type}",
                                        field=f"attribute {name!r}", node=node.name)
            return a.i
    return default


#: element types the family's data inputs take: TensorFlow's numeric types and bool (not string)
_FLOATS = (1, 10, 11, 16)


def _same_type(facts: _Facts, x: str, other: str, what: str, node: str) -> None:
    """``other`` (an update or value) of the input's element type, as the framework's one type
    attribute ``T`` requires."""
    a, b = facts.types.get(x), facts.types.get(other)
    if a and b and a != b:
        raise StridedSliceError(f"has element type {b}, the input has {a} (the op takes one type)", field=what,
                                node=node)


def _index_elem(facts: _Facts, name: str, node: str) -> int:
    elem = facts.types.get(name)
    if elem is None and facts.const(name) is not None:
        elem = {np.dtype(np.int32): 6, np.dtype(np.int64): 7}.get(facts.const(name).dtype, 0)
    if elem is None:
        raise _cannot("the element type of indices is unknown", "indices", node)
    if elem not in (6, 7):
        raise StridedSliceError(f"indices must be int32 or int64 (element type {elem})", field="indices",
                                node=node)
    return int(elem)


def _dynamic_update(node, facts: _Facts, opset: int, graph: str) -> UpdateRecord:
    x, upd, idx = node.input[0], node.input[1], node.input[2]
    xs, us = _known(facts.shape(x), "input", node.name), _known(facts.shape(upd), "update", node.name)
    ishape = facts.shape(idx)
    if ishape is not None and (len(ishape) != 1 or isinstance(ishape[0], int) and ishape[0] != len(xs)):
        raise StridedSliceError(f"index must be a vector with length equal to the input's rank {len(xs)}, got "
                                f"shape {list(ishape)}", field="indices", node=node.name)
    elem = _index_elem(facts, idx, node.name)
    _same_type(facts, x, upd, "update", node.name)
    notes = []
    if len(us) == len(xs):
        assumed = [k for k, (d, w) in enumerate(zip(xs, us)) if d == 1 and not isinstance(w, int)]
        if assumed:  # 0 or 1: an update can be no larger than the input
            us = tuple(1 if k in assumed else w for k, w in enumerate(us))
            notes.append(f"update dims {assumed} unknown where the input's are 1: taken as 1 (an empty update "
                         "there would make onnxruntime fail where TensorFlow returns the input)")
    plan = semantics.update_plan(xs, us, facts.const(idx))
    low = lowering.lower_dynamic_update_slice(x, upd, idx, node.output[0], plan, index_elem=elem, opset=opset,
                                              prefix=node.output[0])
    elem_x = facts.types.get(x) or facts.types.get(upd)
    return UpdateRecord(node.name, node.op_type, graph, [x, upd, idx], node.output[0],
                        [xs, us, (len(xs),)], [elem_x, facts.types.get(upd) or elem_x, elem],
                        {"plan": plan}, low, notes=notes, output_shape=xs)


def _dynamic_slice(node, facts: _Facts, opset: int, graph: str) -> UpdateRecord:
    x, idx, sizes = node.input[0], node.input[1], node.input[2]
    xs = _known(facts.shape(x), "input", node.name)
    size_values = facts.const(sizes)
    if size_values is None:
        raise _cannot("size_indices must be a constant", "size_indices", node.name)
    elem = _index_elem(facts, idx, node.name)
    plan = semantics.update_plan(xs, [int(v) for v in np.asarray(size_values).reshape(-1)], facts.const(idx),
                                 field="size_indices", index_field="start_indices")
    low = lowering.lower_dynamic_slice(x, idx, node.output[0], plan, index_elem=elem, opset=opset,
                                       prefix=node.output[0])
    return UpdateRecord(node.name, node.op_type, graph, [x, idx], node.output[0], [xs, (len(xs),)],
                        [facts.types.get(x), elem], {"plan": plan, "sizes": np.asarray(size_values)}, low,
                        output_shape=plan.window)


def _spec(node, facts: _Facts, names: list[str]):
    values = []
    for name, what in zip(names, ("begin", "end", "strides")):
        v = facts.const(name)
        if v is None:
            raise _cannot(f"{what} must be a constant to rewrite {node.op_type}", what, node.name)
        values.append([int(i) for i in np.asarray(v).reshape(-1)])
    return from_tf(*values, **{m: _attr(node, m) for m in MASK_NAMES})


def _slice_write(node, facts: _Facts, opset: int, graph: str) -> UpdateRecord:
    grad = node.op_type == semantics.STRIDED_SLICE_GRAD
    spec = _spec(node, facts, list(node.input[1:4]))
    first, value = node.input[0], node.input[4]
    if grad:
        shape_value = facts.const(first)
        if shape_value is None:
            raise _cannot("shape must be a constant", "shape", node.name)
        xs = tuple(int(v) for v in np.asarray(shape_value).reshape(-1))
        for i, d in enumerate(xs):
            if d < 0:
                raise StridedSliceError(f"Dimension {d} must be >= 0", field="shape", index=i, node=node.name)
    else:
        xs = _static(facts.shape(first), "input", node.name)
        _same_type(facts, first, value, "value", node.name)
    vs = _static(facts.shape(value), "dy" if grad else "value", node.name)
    try:
        plan = make_plan(spec, xs)
        final = tuple(known(d) for d in plan.output_shape or ())
        if grad and vs != final:
            raise StridedSliceError(f"shape of dy was {list(vs)} instead of {list(final)}", field="dy")
        if not grad and int(np.prod(final, dtype=np.int64)):
            semantics.broadcast_shape(vs, final)
    except StridedSliceError as exc:
        raise exc.in_context(node=node.name) from None
    elem = facts.types.get(value) or 1
    low = lowering.lower_slice_write(None if grad else first, value, node.output[0], plan, vs, elem=elem,
                                     prefix=node.output[0])
    inputs = [value] if grad else [first, value]
    return UpdateRecord(node.name, node.op_type, graph, inputs, node.output[0], ([vs] if grad else [xs, vs]),
                        [elem] * len(inputs), {"spec": spec, "shape": xs}, low, output_shape=xs)


def _gelu(node, facts: _Facts, opset: int, graph: str) -> UpdateRecord:
    x = node.input[0]
    elem = facts.types.get(x) or 1
    if elem not in _FLOATS:
        raise StridedSliceError(f"GELU takes a float input, not element type {elem}", field="input", node=node.name)
    approximate = bool(_attr(node, "approximate"))
    low = lowering.lower_gelu(x, node.output[0], approximate=approximate, elem=elem, opset=opset,
                              prefix=node.output[0])
    return UpdateRecord(node.name, node.op_type, graph, [x], node.output[0], [facts.shape(x)], [elem],
                        {"approximate": approximate}, low, output_shape=facts.shape(x))


def _erfc(node, facts: _Facts, opset: int, graph: str) -> UpdateRecord:
    x = node.input[0]
    elem = facts.types.get(x) or 1
    if elem not in _FLOATS:
        raise StridedSliceError(f"Erfc takes a float input, not element type {elem}", field="input", node=node.name)
    low = lowering.lower_erfc(x, node.output[0], elem=elem, prefix=node.output[0])
    return UpdateRecord(node.name, node.op_type, graph, [x], node.output[0], [facts.shape(x)], [elem], {}, low,
                        output_shape=facts.shape(x))


#: The op seams: op type as tf2onnx leaves it -> its reader/planner/lowering.
OpSeam = Callable[..., UpdateRecord]
SEAMS: dict[str, OpSeam] = {
    semantics.XLA_DYNAMIC_UPDATE_SLICE: _dynamic_update,
    "TFL_" + semantics.TFLITE_DYNAMIC_UPDATE_SLICE: _dynamic_update,
    semantics.XLA_DYNAMIC_SLICE: _dynamic_slice,
    semantics.TENSOR_STRIDED_SLICE_UPDATE: _slice_write,
    semantics.STRIDED_SLICE_GRAD: _slice_write,
    "TFL_GELU": _gelu,
    semantics.ERFC: _erfc,  # (not a slice update: a float op tf2onnx leaves raw, read the same way)
}


def _declare_output(graph, record: UpdateRecord) -> None:
    """Declare the rewritten output's type and shape (the op's, known here) when the graph does
    not: a lowering with run-time starts hides it from ONNX shape inference (a ``Slice`` at a
    run-time start has an unknown size), and the nodes after it -- another of the family, a
    StridedSlice -- need it.  Only numbers are declared (a symbolic dim named by one inference
    run means nothing to the next: left unknown)."""
    from onnx import helper
    if record.output_shape is None or not record.elem_types[0] or \
            any(v.name == record.output for v in list(graph.value_info) + list(graph.output)):
        return
    dims = [d if isinstance(d, int) else None for d in record.output_shape]
    elem = record.elem_types[-1] if record.op_type == semantics.STRIDED_SLICE_GRAD else record.elem_types[0]
    graph.value_info.append(helper.make_tensor_value_info(record.output, elem, dims))


def _import_used_domains(model) -> None:
    """Import (version 1) each domain a node uses that ``model`` does not import: tf2onnx's
    command line with ``--custom-ops OP:DOMAIN`` writes such nodes without the import, and
    onnx's shape inference then derives nothing at all (the family's shapes included)."""
    from onnx import helper

    from ..graphs.walk import proto_nodes
    imported = {o.domain for o in model.opset_import}
    used = {n.domain for n, _ in proto_nodes(model, functions=False)} - imported - set(STANDARD_DOMAINS)
    model.opset_import.extend(helper.make_opsetid(d, 1) for d in sorted(used))


#: the oldest opset the lowerings are written for (Slice's inputs, ScatterND)
MIN_OPSET = 11


def in_family(op_type: str, domain: str) -> bool:
    """Whether a node of ``op_type`` in ``domain`` is one of the family's raw nodes."""
    return op_type in SEAMS and domain in STANDARD_DOMAINS


#: the ONNX ops holding subgraphs (a custom op may too; our StridedSlice never does)
_HOLDERS = frozenset({"If", "Loop", "Scan", "SequenceMap"})


def has_family(model) -> bool:
    """Whether the ModelProto ``model`` holds a node of the family (any graph, functions too).
    Asked of every input (api._slice_updates): each graph's op types are read as one set, and
    only nodes that may hold a subgraph have their attributes read (not every node's), so a
    model of many nodes and no family node costs little here."""
    from ..graphs.walk import proto_subgraphs
    todo = [model.graph, *model.functions]
    while todo:
        nodes = todo.pop().node
        if not SEAMS.keys().isdisjoint({n.op_type for n in nodes}) and \
                any(in_family(n.op_type, n.domain) for n in nodes):
            return True
        for n in nodes:
            op = n.op_type
            if op in _HOLDERS or op != "StridedSlice" and n.domain not in STANDARD_DOMAINS:
                todo.extend(proto_subgraphs(n))
    return False


def rewrite_updates(model) -> list[UpdateRecord]:
    """Replace every node of the family in ``model`` (a ModelProto, edited in place): the records.
    Raises a :class:`StridedSliceError` naming the node and field where the framework rejects it
    (invalid input), or where it cannot be rewritten (``unsupported``: a shape or constant this
    needs is unknown, a node inside a function); a :class:`ModelError` below opset
    :data:`MIN_OPSET`.  A node whose input shapes are known only once an earlier one is
    rewritten (its output feeds it) waits for the next round of shape derivation; when a round
    makes no progress, a node the framework rejects is named before one that cannot be
    rewritten."""
    from ..graphs.walk import proto_graphs
    records: list[UpdateRecord] = []
    opset = next((o.version for o in model.opset_import if o.domain in STANDARD_DOMAINS), 17)
    if opset < MIN_OPSET and has_family(model):
        from ..graphs.walk import proto_nodes
        first = next(n for n, *_ in proto_nodes(model) if in_family(n.op_type, n.domain))
        raise ModelError(f"{first.op_type}: the model imports opset {opset}; the slice-update family is rewritten "
                         f"at opset {MIN_OPSET} or newer (export the model at opset {MIN_OPSET} or newer: onnx's "
                         "version converter cannot move a node no opset defines)", node=first.name)
    _import_used_domains(model)
    while has_family(model):
        before = len(records)
        facts = _facts(model)
        waiting: list[StridedSliceError] = []
        for graph, label, is_function in proto_graphs(model):
            if not any(in_family(n.op_type, n.domain) for n in graph.node):
                continue
            out = []
            for n in graph.node:
                seam = SEAMS.get(n.op_type) if n.domain in STANDARD_DOMAINS else None
                if seam is None:
                    out.append(n)
                    continue
                try:
                    if is_function:
                        raise _cannot("a node inside a model-local function is not rewritten", "graph", n.name)
                    record = seam(n, facts, opset, label)
                except StridedSliceError as exc:
                    waiting.append(exc.in_context(node=n.name))
                    out.append(n)
                    continue
                records.append(record)
                out.extend(record.lowering.nodes)
                graph.initializer.extend(record.lowering.initializers)
                _declare_output(graph, record)
            del graph.node[:]
            graph.node.extend(out)
        if waiting and len(records) == before:  # no progress this round: a node the framework rejects first
            raise next((e for e in waiting if not e.unsupported), waiting[0])
    return records
