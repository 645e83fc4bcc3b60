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

from dataclasses import dataclass, field
from typing import cast

import onnx_ir as ir

from ..graphs.names import NameAllocator
from ..graphs.walk import all_graphs as _all_graphs
from ..graphs.walk import all_nodes
from ..lowering.lower import ConstantPool, emit, steps
from ..semantics.plan import Dim
from ..semantics.spec import SliceSpec
from .core import ProtoAttr, proto_attr_value
from .shapes import derive_shapes  # (re-exported: the shape derivation lives on the proto, without onnx-ir)
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
    table: object = None  # (as RewriteResult's: only the protobuf path makes one)

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
        flavor = check_flavor(flavor, auto=True)
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
