"""The StridedSlice rewrite as an onnx-ir pass (:class:`StridedSliceRewritePass`, an
``ir.passes.InPlacePass`` usable in an ``ir.passes.PassManager``), and the shapes it starts from.

Finds StridedSlice nodes in the main graph, in ``If``/``Loop``/``Scan`` bodies
(any depth) and in model-local functions:

* TensorFlow flavour: INT mask attributes -- tf2onnx's custom domain
  ``ai.onnx.converters.tensorflow`` or any other domain, the default one included;
* OpenVINO flavour: INTS or STRING mask attributes (e.g. ``org.openvinotoolkit``);
* TFLite: an ``offset`` attribute.

begin/end/strides come from initializers or ``Constant`` nodes, int32 or int64, or are
computed at run time.  Every decision is rewrite/core.py's; this module reads onnx-ir nodes and
makes onnx-ir nodes.  The pass edits the model in place; callers that must not touch their
input pass a copy (``convert`` does).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import cast

import onnx_ir as ir

from ..graphs.names import NameAllocator
from ..graphs.walk import all_graphs as _all_graphs
from ..graphs.walk import all_nodes
from ..graphs.walk import proto_subgraphs
from ..lowering.lower import ConstantPool, emit, steps
from ..errors import StridedSliceError
from ..semantics.plan import Dim, make_plan
from ..semantics.spec import SliceSpec
from .core import ProtoAttr, proto_attr_value
from .core import OPENVINO_DOMAINS, TF_DOMAIN, GraphFacts, RewriteChanges, RewriteRecord, RewriteResult, Rewriter
from .core import Signature, changes_of, check_flavor, default_opset_of, flavor_of, index_values, input_warnings
from .core import json_shape, output_fill, parse_node, remove_if_unused, unused_domains, with_default_opset

__all__ = ["OPENVINO_DOMAINS", "TF_DOMAIN", "ProtoAttr", "RewriteChanges", "RewriteRecord", "RewriteResult",
           "StridedSliceRewritePass", "proto_attr_value",
           "StridedSliceRewriteResult", "check_flavor", "default_opset", "derive_shapes", "detect_flavor", "flavor_of",
           "index_values", "parse_node", "read_node", "read_spec", "set_default_opset", "value_dims"]

_json_shape = json_shape  # the name inspect uses


@dataclass
class StridedSliceRewriteResult(ir.passes.PassResult):
    """The pass's ``PassResult``: the model, whether it changed, one record per StridedSlice
    and what changed (for the structural proof)."""

    records: list = field(default_factory=list)
    changes: RewriteChanges = field(default_factory=RewriteChanges)

    merged = RewriteResult.merged


# --------------------------------------------------------------------------- reading nodes

def detect_flavor(node) -> str | None:
    """:func:`core.flavor_of` of an onnx-ir node."""
    return flavor_of({name: a.type for name, a in node.attributes.items()}, node.domain)


def _const_ints(value, field_name: str, cache: dict | None = None) -> tuple[int, ...] | None:
    import onnx_ir as ir
    if value is None or value.is_graph_input():  # an input with an initializer is a runtime value
        return None
    if cache is not None:  # one initializer often feeds many nodes
        key = (id(value), field_name)
        if key not in cache:
            cache[key] = _const_ints(value, field_name)
        return cache[key]
    tensor = ir.convenience.get_const_tensor(value)
    return None if tensor is None else index_values(tensor.numpy(), field_name)


def read_spec(node, flavor: str, cache: dict | None = None) -> SliceSpec:
    """The node's spec (``None`` for begin/end/strides computed at run time)."""
    return read_node(node, flavor, cache)[0]


def read_node(node, flavor: str, cache: dict | None = None, dims_of=None) -> tuple[SliceSpec, dict]:
    """(spec, runtime index values by field) of a StridedSlice node.

    Raises StridedSliceError (field named) for bad attributes or inputs.  ``cache`` (a
    dict kept by the caller for one pass) remembers constant inputs already read.
    ``dims_of(value)``: the shape to trust for a runtime begin/end/strides (default: declared)."""
    return parse_node(list(node.inputs), node.attributes, flavor, lambda v, f: _const_ints(v, f, cache),
                      dims_of or value_dims, cache)


def value_dims(value) -> tuple | None:
    """A value's shape as plan dims (int, symbolic name, None), or None when the rank is unknown."""
    if value is None or value.shape is None:
        return None
    dims: list[Dim] = []
    for d in value.shape:
        if isinstance(d, int):
            dims.append(d)
        else:
            dims.append(getattr(d, "value", None))
    return tuple(dims)


def _elem_type(value) -> int | None:
    if value is None or value.type is None:
        return None
    try:
        return int(value.dtype)
    except Exception:
        return None


# --------------------------------------------------------------------------- the pass

class StridedSliceRewritePass(ir.passes.InPlacePass):
    """Replace every StridedSlice node by its lowering: an onnx-ir in-place pass (it can run in
    an ``ir.passes.PassManager``) whose :class:`StridedSliceRewriteResult` carries the records
    (also kept as ``self.result`` when a pass manager returns its own result).

    ``flavor``: None to detect per node from the attribute types, or "tf"/"openvino"/"tflite".
    ``opset``: the default-domain opset the emitted nodes are for (the model's own).
    ``target``: the constraints of the output (lowering/targets.py; default onnxruntime, the minimal lowering).
    ``shapes``: :func:`derive_shapes` of the model (derived on each call when None).
    The decisions are rewrite/core.py's (:class:`core.Rewriter`); this class reads onnx-ir
    nodes and makes onnx-ir nodes.
    """

    prefix = "sst"  # of the constants this pass adds
    #: signatures are shared by nodes with the same index inputs and attributes (a subclass
    #: reading other nodes, whose meaning depends on more, sets False)
    share_signatures = True

    def __init__(self, *, flavor: str | None = None, opset: int, target: str | None = None,
                 shapes: dict | None = None):
        check_flavor(flavor)
        self.flavor = flavor
        self.opset = opset
        self.target = target
        self.shapes = shapes
        self.result: StridedSliceRewriteResult | None = None

    def __call__(self, model, shapes: dict | None = None) -> StridedSliceRewriteResult:
        """Run the pass (``ir.passes.InPlacePass.__call__``); ``shapes``: as the constructor's, for this call."""
        if shapes is None:
            return self._run(model)
        kept, self.shapes = self.shapes, shapes
        try:
            return self._run(model)
        finally:
            self.shapes = kept

    def _run(self, model) -> StridedSliceRewriteResult:
        # InPlacePass.__call__ (typed PassResult) returns what call() returned, after its checks
        return cast(StridedSliceRewriteResult, super().__call__(model))

    def call(self, model) -> StridedSliceRewriteResult:
        shapes = self.shapes
        if shapes is None:
            shapes = derive_shapes(_proto_for_inference(model), flavor=self.flavor) if has_strided_slice(model) else {}
        self._shapes = shapes
        self._core = Rewriter(flavor=self.flavor, opset=self.opset, target=self.target)
        self._signatures: dict = {}
        self._warned: dict = {}
        self._steps: dict = {}
        records: list[RewriteRecord] = []
        self._added: list = []  # nodes the lowerings emitted
        self._freed: list = []  # begin/end/strides values of replaced nodes
        self._consts: dict = {}  # constant inputs already read
        names = NameAllocator.for_model(model)  # generated names collide with none of the model's
        self._added_inits: list = []
        for graph, label, is_function in _all_graphs(model):
            targets = [n for n in graph if self._selects(n)]
            if not targets:
                continue
            pool = ConstantPool(graph, f"{self.prefix}{len(records)}/", use_nodes=is_function, names=names)
            # Names are local to a function (its body and subgraphs): the main graph's derived
            # shapes do not apply there (a function input "x" is not the graph's "x").
            self._scoped = label.startswith("function")
            # graph outputs indexed once: per-node scans of them make big models quadratic
            self._out_index = {id(v): k for k, v in enumerate(graph.outputs)}
            self._dead: list = []
            self._memo: dict = {}  # emitted nodes by (op, inputs, attributes): see lower.emit
            for node in targets:
                records.append(self._rewrite(graph, label, node, pool))
            if self._dead:  # one call: each remove() scans the graph outputs
                graph.remove(self._dead, safe=False)
            if pool.nodes:
                graph.insert_before(next(iter(graph)), pool.nodes)
            self._added.extend(pool.nodes)
            self._added_inits.extend(pool.cache.values())
        modified = any(r.lowering is not None for r in records)
        removed: dict = {"nodes": [], "initializers": []}
        if modified:
            remove_if_unused(self._freed, _IrFacts(), removed)
            _drop_unused_domains(model)
        changes = changes_of(records, removed, (tuple(v.name for v in n.outputs) for n in self._added),
                             (v.name for v in self._added_inits if v.is_initializer()))
        self.result = StridedSliceRewriteResult(model, modified, records, changes)
        return self.result

    def _dims(self, value):
        """Dims of ``value`` that shape inference derived (None: unknown rank)."""
        if value is None or self._scoped:
            return None
        return self._shapes.get(value.name, (None, None))[1]

    def _elem(self, value):
        if value is None or self._scoped:
            return None
        return self._shapes.get(value.name, (None, None))[0]

    def _index_elem(self, value):
        """Element type of a runtime index input: derived, else declared."""
        return self._elem(value) or _elem_type(value)

    def _selects(self, node) -> bool:
        """The nodes this pass rewrites (a hook for fixslices.FixSlicesPass)."""
        return node.op_type == "StridedSlice"

    def _annotate(self, rec: RewriteRecord, node) -> None:
        """Say what kind of node ``rec`` is about (a hook for fixslices.FixSlicesPass)."""

    def _read(self, node, flavor: str) -> tuple[SliceSpec, dict]:
        """(spec, runtime index values) of a selected node."""
        return parse_node(list(node.inputs), node.attributes, flavor, lambda v, f: _const_ints(v, f, self._consts),
                          self._dims, self._core.parse_cache)

    def _signature(self, node) -> Signature:
        """The core's :class:`core.Signature` of ``node``, once per distinct (index inputs,
        attributes, domain) when :attr:`share_signatures`."""
        attrs = node.attributes
        key = None
        if self.share_signatures:
            key = (tuple(id(v) for v in node.inputs[1:]), node.domain, self._scoped,
                   tuple((n, a.type, tuple(a.value) if isinstance(a.value, list) else a.value)
                         for n, a in attrs.items() if isinstance(a, ir.Attr)))
            hit = self._signatures.get(key)
            if hit is not None:
                return hit
        sig = self._core.signature({n: a.type for n, a in attrs.items()}, node.domain,
                                   lambda flavor: self._read(node, flavor), self._index_elem)
        if key is not None:
            self._signatures[key] = sig
        return sig

    def _rewrite(self, graph, label: str, node, pool: ConstantPool) -> RewriteRecord:
        name = node.name or (node.outputs[0].name if node.outputs else "StridedSlice")
        x = node.inputs[0] if node.inputs else None
        out = node.outputs[0]
        sig = self._signature(node)
        dims = self._dims(x)
        warned = self._warned.get(id(x))
        if warned is None or warned[0] is not x:
            warned = self._warned[id(x)] = (x, input_warnings(value_dims(x), dims))
        out_pos = self._out_index.get(id(out))
        rec = self._core.decide(sig, node=name, graph=label, dims=dims, warnings=warned[1],
                                data_name=None if x is None else x.name, output_name=out.name,
                                data_elem=self._elem(x) or _elem_type(x), output_elem=_elem_type(out),
                                declared_output=value_dims(out),
                                runtime_names={f: v.name for f, v in sig.runtime.items()},
                                is_graph_output=out_pos is not None)
        self._annotate(rec, node)
        lowering = rec.lowering
        if lowering is None:
            return rec
        self._freed.extend(v for v in node.inputs[1:] if v is not None)
        if rec.renamed:  # an identity: readers read the data
            out.replace_all_uses_with(x)
            node.resize_inputs(0)  # detach: an unsafe remove() leaves the inputs' uses
            self._dead.append(node)  # its output has no uses left
            return rec
        made = self._steps.get(id(lowering))
        if made is None or made[0] is not lowering:  # the steps of a lowering made once (the lowering kept)
            made = self._steps[id(lowering)] = (lowering, steps(lowering, self.opset))
        new_nodes, new_out = emit(lowering, x, self.opset, pool, name, sig.runtime, memo=self._memo,
                                  plan_steps=made[1])
        self._added.extend(new_nodes)
        fill = output_fill(out.type is not None, _elem_type(out) if _is_tensor(out) else None,
                           value_dims(out), _elem_type(x), rec.output_shape)
        new_out.type, new_out.shape = out.type, out.shape
        if out_pos is not None:
            graph.outputs[out_pos] = new_out
            self._out_index[id(new_out)] = out_pos
        out.replace_all_uses_with(new_out)
        old_name = out.name
        out.name = None
        new_out.name = old_name
        graph.insert_after(node, new_nodes)
        node.resize_inputs(0)  # detach: an unsafe remove() leaves the inputs' uses
        self._dead.append(node)  # every use and graph output was moved
        if fill is not None:  # what the original output did not declare: the data's type, the plan's shape
            elem, shape = fill
            if elem is not None:
                new_out.type = ir.TensorType(ir.DataType(elem))
            if shape is not None:
                new_out.shape = ir.Shape(list(shape))
        return rec


def _is_tensor(value) -> bool:
    return isinstance(value.type, ir.TensorType)


class _IrFacts(GraphFacts):
    """:class:`core.GraphFacts` of onnx-ir values (any graph: a value knows its own)."""

    def key(self, v):
        return id(v)

    def used(self, v) -> bool:
        return bool(v.uses())

    def is_boundary(self, v) -> bool:
        return v.is_graph_output() or v.is_graph_input()

    def producer(self, v):
        return v.producer()

    def is_initializer(self, v) -> bool:
        return v.is_initializer() and v.name in v.graph.initializers

    def domain(self, node) -> str:
        return node.domain

    def outputs(self, node) -> list:
        return list(node.outputs)

    def has_subgraph(self, node) -> bool:
        return any(a.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS) for a in node.attributes.values())

    def output_names(self, node) -> tuple:
        return tuple(v.name for v in node.outputs)

    def remove_node(self, node) -> list:
        inputs = [v for v in node.inputs if v is not None]
        node.graph.remove(node, safe=True)
        return inputs

    def remove_initializer(self, v) -> str:
        name = v.name
        del v.graph.initializers[name]
        return name


def has_strided_slice(model) -> bool:
    return any(n.op_type == "StridedSlice" for n, _ in all_nodes(model))


def _proto_for_inference(model):
    """The model as a proto without reading external weights (in-memory ones are copied)."""
    import onnx_ir as ir
    return ir.to_proto(model)


def derive_shapes(proto, max_bytes: int = 1024, names=None, has_subgraphs: bool | None = None,
                  flavor: str | None = None) -> dict:
    """name -> (elem_type or None, dims or None) of every value ONNX shape inference derives from
    the graph inputs' declared shapes and the initializers alone.

    Inference runs once on :func:`skeleton` -- value_info of intermediate values and graph output
    shapes removed (they are declarations, never trusted), initializers that are external, above
    ``max_bytes`` or overridable (also graph inputs) turned into typed inputs (weights are never
    read), no data propagation: linear in the model size.  Custom ops get no shape, so values
    after them are unknown -- except a main-graph StridedSlice with constant begin/end/strides
    and a derived input shape: its output gets the shape of our own plan of it and inference
    runs on from there (:func:`_past_strided_slices`; ``flavor`` as the pass reads the nodes,
    None: per node).  Subgraph inputs keep their rank only (a Loop's state may change shape).
    ``names``: only these values (of the main graph) are wanted (a set; the others are not read).
    When they are all graph inputs and initializers, no inference runs: it would return their
    declarations as they are.  ``has_subgraphs``: see :func:`skeleton`; when False (no main-graph
    node holds a subgraph) and the model has no functions, only the nodes ``names`` depend on are
    inferred (a node's inferred types depend on its inputs' alone)."""
    from ..graphs.shape_inference import infer
    if names is not None:
        declared = _declared_sources(proto, names, max_bytes)
        if declared is not None:
            return declared
    keep = None
    if names is not None and has_subgraphs is False and not proto.functions:
        keep = _ancestors(proto.graph, names)  # inference of a node reads only its inputs' types
        if len(keep) == len(proto.graph.node):
            keep = None
    try:
        own = keep is None and _own_skeleton(proto, max_bytes, has_subgraphs)
        sk = proto if own else skeleton(proto, max_bytes, has_subgraphs, keep=keep)
        inferred = _past_strided_slices(sk, infer(sk), flavor, copy=own)
    except Exception:  # nothing derived: every lowering stays general
        return {}
    out: dict = {}

    def add(vi, rank_only=False):
        if names is not None and vi.name not in names:
            return
        if not vi.type.HasField("tensor_type"):
            return
        tt = vi.type.tensor_type
        dims = None
        if tt.HasField("shape"):
            dims = tuple(None if rank_only else d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                         for d in tt.shape.dim)
        out[vi.name] = (tt.elem_type or None, dims)

    def walk(g, top):
        for vi in g.input:
            add(vi, rank_only=not top)
        for vi in list(g.value_info) + list(g.output):
            add(vi)
        for t in g.initializer:
            if names is None or t.name in names:
                out.setdefault(t.name, (t.data_type, tuple(t.dims)))
        if names is not None:
            return  # main-graph values only
        for n in g.node:
            for sub in proto_subgraphs(n):
                walk(sub, False)
    walk(inferred.graph, True)
    return out


def _past_strided_slices(sk, inferred, flavor: str | None, copy: bool):
    """``inferred`` (shape inference of the skeleton ``sk``) continued past StridedSlice nodes.

    A StridedSlice is a custom op: ONNX gives its output no shape, and every value after it --
    the next StridedSlice of a chain ``x[:, 1:][..., :2]`` included -- stays unknown.  Each
    main-graph StridedSlice whose output is unknown, whose input's shape is derived and whose
    begin/end/strides are constants (initializers or ``Constant`` nodes of ``sk``) gets the
    output shape of its plan (``make_plan(spec, dims).output_shape``, what its lowering
    computes) declared in ``sk``, and inference runs again; once per link of the longest chain.
    ``copy``: ``sk`` is the caller's model (copied before the first declaration)."""
    import onnx
    from onnx import numpy_helper

    from ..graphs.shape_inference import infer
    g = sk.graph
    slices = [n for n in g.node if n.op_type == "StridedSlice" and len(n.output) == 1 and len(n.input) >= 3]
    if not slices:
        return inferred
    overridable = {vi.name for vi in g.input}
    inits = {t.name: t for t in g.initializer if t.name not in overridable}
    constants = {n.output[0]: n for n in g.node if n.op_type == "Constant" and n.domain == "" and len(n.output) == 1
                 and len(n.attribute) == 1 and n.attribute[0].name in ("value", "value_int", "value_ints")}

    read: dict = {}  # (name, field) -> ints: one constant feeds many nodes
    parsed: dict = {}  # (index inputs, attributes, domain) -> (spec, runtime) or None: models repeat patterns
    planned_shapes: dict = {}  # (spec, dims) -> output shape or None
    parse_cache: dict = {}

    def const_of(name, field_name):
        key = (name, field_name)
        if key not in read:
            read[key] = _const_of(name, field_name)
        return read[key]

    def _const_of(name, field_name):
        t = inits.get(name)
        if t is None and name in constants:
            a = constants[name].attribute[0]
            t = a.t if a.name == "value" else onnx.helper.make_tensor(
                name, onnx.TensorProto.INT64, [] if a.name == "value_int" else [len(a.ints)],
                [a.i] if a.name == "value_int" else list(a.ints))
        if t is None or t.data_location == onnx.TensorProto.EXTERNAL:
            return None
        return index_values(numpy_helper.to_array(t), field_name)

    tried: set = set()
    while True:
        known = {vi.name: vi for vi in itertools.chain(inferred.graph.input, inferred.graph.value_info,
                                                         inferred.graph.output)
                 if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape")}
        planned = []
        for node in slices:
            out, x = node.output[0], known.get(node.input[0])
            if out in known or out in tried or x is None:
                continue
            tried.add(out)
            dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                         for d in x.type.tensor_type.shape.dim)
            key = (tuple(node.input[1:]), node.domain,
                   tuple((a.name, a.type, a.i, tuple(a.ints), a.s) for a in node.attribute))
            if key not in parsed:
                attrs = {a.name: ProtoAttr(a.type, proto_attr_value(a)) for a in node.attribute}
                node_flavor = flavor or flavor_of({k: a.type for k, a in attrs.items()}, node.domain)
                if node_flavor is None:  # no flavour, no spec to plan
                    parsed[key] = None
                else:
                    try:
                        spec, runtime = parse_node([i or None for i in node.input], attrs, node_flavor, const_of,
                                                   lambda v: None, parse_cache)
                        parsed[key] = None if runtime else spec
                    except (StridedSliceError, ValueError):
                        parsed[key] = None
            spec = parsed[key]
            if spec is None:
                continue
            if (spec, dims) not in planned_shapes:
                try:
                    planned_shapes[(spec, dims)] = make_plan(spec, dims).output_shape
                except (StridedSliceError, ValueError):
                    planned_shapes[(spec, dims)] = None
            shape = planned_shapes[(spec, dims)]
            if shape is not None:
                planned.append(onnx.helper.make_tensor_value_info(out, x.type.tensor_type.elem_type, list(shape)))
        if not planned:
            return inferred
        if copy:
            sk, copy = onnx.ModelProto.FromString(sk.SerializeToString()), False
        outputs = {o.name: o for o in sk.graph.output}
        for vi in planned:
            if vi.name in outputs:
                outputs[vi.name].type.CopyFrom(vi.type)
            else:
                sk.graph.value_info.append(vi)
        inferred = infer(sk)


def _declared_sources(proto, names, max_bytes: int) -> dict | None:
    """:func:`derive_shapes` of ``names`` when each is a main-graph input or initializer (what
    inference on the skeleton returns for them), else None."""
    g = proto.graph
    inputs = {vi.name: vi for vi in g.input}
    initializers = {t.name: t for t in g.initializer}
    wanted = {n for n in names if n}
    if not wanted <= inputs.keys() | initializers.keys():
        return None
    out = {}
    for name in wanted:
        vi = inputs.get(name)
        if vi is not None:
            if vi.type.HasField("tensor_type"):
                tt = vi.type.tensor_type
                dims = None if not tt.HasField("shape") else tuple(
                    d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)
                out[name] = (tt.elem_type or None, dims)
            continue
        t = initializers[name]
        as_input = t.data_location == 1 or t.ByteSize() > max_bytes  # EXTERNAL or big: a typed input there
        out[name] = (t.data_type or None if as_input else t.data_type, tuple(t.dims))
    return out


def _ancestors(graph, names) -> list:
    """Indices (in order) of the main-graph nodes that ``names`` depend on: their producers, and
    their inputs' producers, transitively (no subgraphs: their outer reads are not inputs)."""
    producers = {o: k for k, node in enumerate(graph.node) for o in node.output if o}
    nodes = graph.node
    todo = [producers[n] for n in names if n in producers]
    seen = set(todo)
    while todo:
        for name in nodes[todo.pop()].input:
            k = producers.get(name)
            if k is not None and k not in seen:
                seen.add(k)
                todo.append(k)
    return sorted(seen)


def _own_skeleton(proto, max_bytes: int, has_subgraphs: bool | None) -> bool:
    """Whether inference on ``proto`` itself is inference on its :func:`skeleton` (nothing to
    drop or turn into an input): no value_info, no output shape, no function, no subgraph
    (``has_subgraphs`` False), only small initializers that are not graph inputs."""
    g = proto.graph
    if has_subgraphs is not False or g.value_info or proto.functions or g.sparse_initializer:
        return False
    declared = {vi.name for vi in g.input}
    if any(t.name in declared or t.data_location == 1 or t.ByteSize() > max_bytes for t in g.initializer):
        return False
    return not any(vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape") or
                   not vi.type.HasField("tensor_type") for vi in g.output)


def skeleton(proto, max_bytes: int = 1024, has_subgraphs: bool | None = None, keep=None):
    """A copy of ``proto`` for shape inference: graph structure and declared graph inputs only.

    Initializers that are external, above ``max_bytes`` or also graph inputs become typed
    inputs (their declared shape; the data of an overridable one may be replaced at run
    time); value_info (every graph and function) and graph output shapes are dropped.
    ``has_subgraphs`` False: the caller knows no main-graph node holds a subgraph (no walk).
    ``keep``: indices of the main-graph nodes to keep (the others and the graph outputs dropped)."""
    import onnx
    sk = onnx.ModelProto()
    sk.ir_version = proto.ir_version
    sk.opset_import.extend(proto.opset_import)
    sk.functions.extend(proto.functions)
    g, src = sk.graph, proto.graph
    g.name = src.name
    g.node.extend(src.node if keep is None else [src.node[k] for k in keep])
    declared = {vi.name for vi in src.input}
    g.input.extend(src.input)
    for t in src.initializer:
        if t.name in declared:
            continue  # overridable: a runtime value of the declared input's type
        if t.data_location == onnx.TensorProto.EXTERNAL or t.ByteSize() > max_bytes:
            g.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        else:
            g.initializer.append(t)
    for o in src.output if keep is None else ():  # the element type kept, the shape dropped
        vi = g.output.add()
        vi.name = o.name
        if o.type.HasField("tensor_type"):
            vi.type.tensor_type.elem_type = o.type.tensor_type.elem_type
        else:
            vi.type.CopyFrom(o.type)

    def strip_inner(nodes):
        for n in nodes:
            for sub in proto_subgraphs(n):
                strip(sub)

    def strip(graph):
        del graph.value_info[:]
        strip_inner(graph.node)

    del g.value_info[:]
    if has_subgraphs is not False:
        strip_inner(g.node)
    for f in sk.functions:
        if hasattr(f, "value_info"):
            del f.value_info[:]
        strip_inner(f.node)
    return sk


def weightless(proto, max_bytes: int | None = None):
    """Turn ``proto``'s external initializers (and, with ``max_bytes``, those bigger than that)
    into typed graph inputs, in place, so checks and inference never read weights.  Returns it."""
    import onnx
    keep = []
    for t in proto.graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL or max_bytes is not None and t.ByteSize() > max_bytes:
            proto.graph.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        else:
            keep.append(t)
    del proto.graph.initializer[:]
    proto.graph.initializer.extend(keep)
    return proto


def _drop_unused_domains(model) -> None:
    used = {node.domain for node, _ in all_nodes(model)} | {f.domain for f in model.functions.values()}
    for domain in unused_domains(list(model.opset_imports), used):  # one dict: the model's and its graph's
        del model.opset_imports[domain]


def default_opset(model) -> int | None:
    """The default-domain opset an onnx-ir model imports (:func:`core.default_opset_of`)."""
    return default_opset_of(model.opset_imports)


def set_default_opset(model, opset: int) -> None:
    """The default domain imported as ``""`` at ``opset`` (:func:`core.with_default_opset`)."""
    imports = with_default_opset(model.opset_imports, opset)
    model.opset_imports.clear()
    model.opset_imports.update(imports)
