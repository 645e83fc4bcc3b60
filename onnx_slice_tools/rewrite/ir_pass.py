"""The model rewrite pass: StridedSlice nodes -> lowered standard ONNX (onnx-ir).

Finds StridedSlice nodes in the main graph, in ``If``/``Loop``/``Scan`` bodies
(any depth) and in model-local functions:

* TensorFlow flavour: INT mask attributes -- tf2onnx's custom domain
  ``ai.onnx.converters.tensorflow`` or any other domain, the default one included;
* OpenVINO flavour: INTS or STRING mask attributes (e.g. ``org.openvinotoolkit``).

begin/end/strides come from initializers or ``Constant`` nodes, int32 or int64.
The pass edits an ``onnx_ir.Model`` in place and returns a :class:`RewriteResult`;
callers that must not touch their input pass a copy (``convert`` does).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import StridedSliceError
from ..graphs.walk import all_graphs as _all_graphs  # noqa: F401 - also imported from here
from ..graphs.walk import proto_subgraphs
from ..lowering.lower import ConstantPool, Lowering, emit, lower
from ..graphs.names import NameAllocator
from ..semantics.plan import make_plan
from ..semantics.spec import MASK_NAMES, OPENVINO, TF, TFLITE, SliceSpec, from_openvino, from_tf, from_tflite

TF_DOMAIN = "ai.onnx.converters.tensorflow"
OPENVINO_DOMAINS = ("org.openvinotoolkit",)


@dataclass
class RewriteRecord:
    """What happened to one StridedSlice node."""

    node: str
    graph: str
    flavor: str | None = None
    spec: SliceSpec | None = None
    input_shape: tuple | None = None
    output_shape: tuple | None = None
    lowering: Lowering | None = None
    elem_type: int | None = None
    declared_output: tuple | None = None
    error: str | None = None
    error_kind: str | None = None  # "invalid" (the framework rejects it) | "unsupported"
    index_types: dict = field(default_factory=dict)  # runtime begin/end/strides: field -> int32/int64/None
    check: object | None = None     # verify.CheckResult once verified
    warnings: list = field(default_factory=list)  # e.g. declared shapes that disagree with derived ones
    # where the rewrite sits in the converted model (tensor names), for the in-place check
    data_name: str | None = None
    output_name: str | None = None
    index_names: dict = field(default_factory=dict)  # runtime field -> tensor name
    replaced: list = field(default_factory=list)    # output-name tuples of the nodes removed
    renamed: dict = field(default_factory=dict)     # identity: old output name -> the data's name
    inplace: str | None = None      # the whole-model (in-place) check: passed | failed: .. | skipped: ..

    @property
    def notation(self) -> str | None:
        return None if self.spec is None else self.spec.index_notation()

    def to_json(self) -> dict:
        out = {
            "node": self.node, "graph": self.graph, "flavor": self.flavor, "spec": self.notation,
            "input_shape": _json_shape(self.input_shape), "output_shape": _json_shape(self.output_shape),
            "emitted": None if self.lowering is None else [op.describe() for op in self.lowering.ops],
            "emitted_nodes": None if self.lowering is None else self.lowering.node_count,
            "error": self.error, "warnings": self.warnings, "inplace_check": self.inplace,
        }
        if self.check is not None:
            c = self.check
            out["checks"] = {"shape_inference": c.shape_inference, "inferred_shape": _json_shape(c.inferred_shape),
                             "onnxruntime": c.onnxruntime, "tried_input_shapes": [list(s) for s in c.tried_shapes]}
            if c.reference_evaluator != "not run":
                out["checks"]["reference_evaluator"] = c.reference_evaluator
            if c.run_time_errors != "not run":
                out["checks"]["run_time_errors"] = c.run_time_errors
            if c.runtimes:
                out["checks"]["runtimes"] = dict(c.runtimes)
            if self.index_types:
                out["checks"]["tried_runtime_values"] = c.tried_values
                out["checks"]["rejected_runtime_values_redrawn"] = c.rejected_values
                out["checks"]["rejected_runtime_values_failing_in_onnxruntime"] = c.must_fail_checked
        return out


def _json_shape(shape):
    return None if shape is None else [d for d in shape]


@dataclass
class RewriteChanges:
    """What the pass changed, for the structural proof (nodes by their output names)."""

    removed_nodes: set = field(default_factory=set)
    removed_initializers: set = field(default_factory=set)
    added_nodes: set = field(default_factory=set)
    added_initializers: set = field(default_factory=set)
    renamed: dict = field(default_factory=dict)   # consumers read the data instead of an identity's output


@dataclass
class RewriteResult:
    model: object  # onnx_ir.Model
    modified: bool
    records: list[RewriteRecord] = field(default_factory=list)
    changes: RewriteChanges = field(default_factory=RewriteChanges)

    def merged(self, later: "RewriteResult") -> "RewriteResult":
        """This result followed by ``later`` (another pass on the same model): records and
        changes together, for one structural proof."""
        a, b = self.changes, later.changes
        changes = RewriteChanges(a.removed_nodes | b.removed_nodes, a.removed_initializers | b.removed_initializers,
                                 a.added_nodes | b.added_nodes, a.added_initializers | b.added_initializers,
                                 {**a.renamed, **b.renamed})
        return RewriteResult(self.model, self.modified or later.modified, self.records + later.records, changes)


# --------------------------------------------------------------------------- reading nodes

#: AttributeProto types (onnx-ir's AttributeType is an IntEnum of the same numbers).
_INT, _STRING, _INTS = 2, 3, 7


def detect_flavor(node) -> str | None:
    """TFLite when an ``offset`` attribute is present; TF when the masks are INT attributes,
    OpenVINO when INTS or STRING; None if unclear."""
    return flavor_of({name: a.type for name, a in node.attributes.items()}, node.domain)


def flavor_of(attr_types, domain: str) -> str | None:
    """:func:`detect_flavor` from a node's attribute types (name -> AttributeProto type) and domain."""
    if "offset" in attr_types:
        return TFLITE
    kinds = {t for name, t in attr_types.items() if name in MASK_NAMES}
    if kinds & {_INTS, _STRING}:
        return OPENVINO
    if _INT in kinds:
        return TF
    if domain in OPENVINO_DOMAINS:
        return OPENVINO
    return TF if not kinds else None


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


def index_values(arr, field_name: str) -> tuple[int, ...]:
    """A constant begin/end/strides array as ints; StridedSliceError unless 1-D integers."""
    if arr.dtype.kind not in "iu":
        raise StridedSliceError(f"{field_name} must be int32 or int64, got {arr.dtype}", field=field_name)
    if arr.ndim != 1:
        raise StridedSliceError(f"{field_name} must be 1-D, got shape {list(arr.shape)}", field=field_name)
    return tuple(int(v) for v in arr.tolist())


def read_spec(node, flavor: str, cache: dict | None = None) -> SliceSpec:
    """The node's spec (``None`` for begin/end/strides computed at run time)."""
    return read_node(node, flavor, cache)[0]


def _runtime_length(shape) -> int | None:
    if shape is not None and len(shape) == 1 and isinstance(shape[0], int):
        return shape[0]
    return None


def read_node(node, flavor: str, cache: dict | None = None, dims_of=None) -> tuple[SliceSpec, dict]:
    """(spec, runtime index values by field) of a StridedSlice node.

    Raises StridedSliceError (field named) for bad attributes or inputs.  ``cache`` (a
    dict kept by the caller for one pass) remembers constant inputs already read.
    ``dims_of(value)``: the shape to trust for a runtime begin/end/strides (default: declared)."""
    return parse_node(list(node.inputs), node.attributes, flavor, lambda v, f: _const_ints(v, f, cache),
                      dims_of or value_dims, cache)


def parse_node(inputs: list, attrs, flavor: str, const_of, dims_of, cache: dict | None = None
               ) -> tuple[SliceSpec, dict]:
    """:func:`read_node` on any representation: ``inputs`` (data, begin, end[, strides]; None
    for a missing one), ``attrs`` (name -> an object with ``type``, an AttributeProto type, and
    ``value``: int, list of ints or str), ``const_of(input, field)`` (its constant ints or None
    for a runtime value), ``dims_of(input)`` (the trusted shape of a runtime one).  The runtime
    dict maps fields to the inputs as given."""
    if len(inputs) > 4:
        raise StridedSliceError(f"StridedSlice takes 3 or 4 inputs (data, begin, end[, strides]), got {len(inputs)}",
                                field="inputs")
    if len(inputs) < 3 or inputs[0] is None or inputs[1] is None or inputs[2] is None:
        raise StridedSliceError(f"StridedSlice needs inputs (data, begin, end[, strides]), got {len(inputs)}",
                                field="inputs")
    vals, runtime, lengths, unsized = [], {}, [], []
    for k, f in ((1, "begin"), (2, "end"), (3, "strides")):
        value = inputs[k] if k < len(inputs) else None
        v = None if value is None else const_of(value, f)
        vals.append(v)
        if value is not None and v is None:
            runtime[f] = value
            shape = dims_of(value)
            length = _runtime_length(shape)
            if shape is not None and len(shape) != 1:
                raise StridedSliceError(f"{f} must be 1-D, got rank {len(shape)}", field=f)
            if length is not None:
                lengths.append((f, length))
            else:
                unsized.append(f)
        elif v is not None:
            lengths.append((f, len(v)))
    if len({n for _, n in lengths}) > 1:
        got = ", ".join(f"{f} has {n}" for f, n in lengths)
        raise StridedSliceError(f"begin, end and strides must have the same length ({got})", field=lengths[-1][0])
    runtime_length = None
    if runtime:
        if not lengths:
            raise StridedSliceError(f"{', '.join(runtime)} computed at run time with an unknown length: "
                                    "not supported (the length fixes the meaning of the masks)",
                                    field=next(iter(runtime)))
        runtime_length = lengths[0][1]
    begin, end, strides = vals
    if flavor in (TF, TFLITE):
        masks = {}
        names = MASK_NAMES + (("offset",) if flavor == TFLITE else ())
        for m in names:
            a = attrs.get(m)
            if a is None:
                masks[m] = 0
            elif a.type != _INT:
                which = "TensorFlow" if flavor == TF else "TFLite"
                raise StridedSliceError(f"{m} must be an INT attribute in the {which} flavour", field=m)
            else:
                masks[m] = a.value
        if strides is None and "strides" not in runtime:
            raise StridedSliceError("StridedSlice needs a strides input in this flavour", field="strides")
        make = from_tflite if flavor == TFLITE else from_tf
        return _sized(_parsed(cache, make, begin, end, strides, runtime_length, masks), unsized), runtime
    masks = {}
    for m in MASK_NAMES:
        a = attrs.get(m)
        if a is None:
            masks[m] = ()
        elif a.type == _STRING:
            masks[m] = a.value
        elif a.type == _INTS:
            masks[m] = list(a.value)
        else:
            raise StridedSliceError(f"{m} must be INTS or STRING in the OpenVINO flavour", field=m)
    if strides is None and "strides" not in runtime and runtime:
        strides = (1,) * runtime_length  # the optional 4th input defaults to ones
    return _sized(_parsed(cache, from_openvino, begin, end, strides, runtime_length, masks), unsized), runtime


def _sized(spec: SliceSpec, unsized: list) -> SliceSpec:
    """``spec`` naming the runtime fields of unknown length (the lowering checks their length)."""
    from dataclasses import replace
    return replace(spec, unsized=tuple(unsized)) if unsized else spec


def _parsed(cache: dict | None, make, begin, end, strides, runtime_length, masks: dict) -> SliceSpec:
    """``make(begin, end, strides, runtime_length=..., **masks)``, once per distinct call in a
    pass (``cache``): models repeat a few patterns thousands of times.  Errors are not cached."""
    if cache is None:
        return make(begin, end, strides, runtime_length=runtime_length, **masks)
    key = ("spec", make, begin, end, strides, runtime_length,
           tuple((m, tuple(v) if isinstance(v, list) else v) for m, v in sorted(masks.items())))
    spec = cache.get(key)
    if spec is None:
        spec = cache[key] = make(begin, end, strides, runtime_length=runtime_length, **masks)
    return spec


def value_dims(value) -> tuple | None:
    """A value's shape as plan dims (int, symbolic name, None), or None when the rank is unknown."""
    if value is None or value.shape is None:
        return None
    dims = []
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

def check_flavor(flavor) -> None:
    """ValueError unless ``flavor`` is None (per node) or a flavour the passes know."""
    if flavor not in (None, TF, OPENVINO, TFLITE):
        raise ValueError(f"unknown flavor {flavor!r}")


class StridedSliceRewritePass:
    """Replace every StridedSlice node by its lowering.

    ``flavor``: None to detect per node from the attribute types, or "tf"/"openvino".
    ``opset``: the default-domain opset the emitted nodes are for (the model's own).
    ``target``: the constraints of the output (lowering/targets.py; default onnxruntime, the minimal lowering).
    """

    def __init__(self, *, flavor: str | None = None, opset: int, target: str | None = None):
        check_flavor(flavor)
        self.flavor = flavor
        self.opset = opset
        self.target = target

    def __call__(self, model, shapes: dict | None = None) -> RewriteResult:
        """``shapes``: :func:`derive_shapes` of the model (computed here when None)."""
        if shapes is None:
            shapes = derive_shapes(_proto_for_inference(model)) if _has_strided_slice(model) else {}
        self._shapes = shapes
        records: list[RewriteRecord] = []
        self._added: list = []  # nodes the lowerings emitted
        self._freed: list = []  # begin/end/strides values of replaced nodes
        self._consts: dict = {}  # constant inputs already read
        self._lowerings: dict = {}  # (spec, input shape) -> (plan, lowering): models repeat patterns
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
        removed = {"nodes": [], "initializers": []}
        if modified:
            _remove_if_unused(self._freed, removed)
            _drop_unused_domains(model)
        result = RewriteResult(model, modified, records)
        result.changes = RewriteChanges(
            removed_nodes={k for r in records if r.lowering is not None for k in r.replaced} | set(removed["nodes"]),
            removed_initializers=set(removed["initializers"]),
            added_nodes={tuple(v.name for v in n.outputs) for n in self._added},
            added_initializers={v.name for v in self._added_inits if v.is_initializer()},
            renamed={k: v for r in records for k, v in r.renamed.items()})
        return result

    def _dims(self, value):
        """Dims of ``value`` that shape inference derived (None: unknown rank)."""
        if value is None or self._scoped:
            return None
        return self._shapes.get(value.name, (None, None))[1]

    def _elem(self, value):
        if value is None or self._scoped:
            return None
        return self._shapes.get(value.name, (None, None))[0]

    prefix = "sst"  # of the constants this pass adds

    def _selects(self, node) -> bool:
        """The nodes this pass rewrites (a hook for fixslices.FixSlicesPass)."""
        return node.op_type == "StridedSlice"

    def _read(self, node, flavor: str) -> tuple[SliceSpec, dict]:
        """(spec, runtime index values) of a selected node."""
        return read_node(node, flavor, self._consts, dims_of=self._dims)

    def _rewrite(self, graph, label: str, node, pool: ConstantPool) -> RewriteRecord:
        import onnx_ir as ir
        name = node.name or (node.outputs[0].name if node.outputs else "StridedSlice")
        rec = RewriteRecord(node=name, graph=label)
        flavor = self.flavor or detect_flavor(node)
        rec.flavor = flavor
        if flavor is None:
            rec.error, rec.error_kind = "cannot tell the flavour from the mask attributes; pass flavor", "invalid"
            return rec
        x = node.inputs[0] if node.inputs else None
        out = node.outputs[0]
        try:
            spec, runtime = self._read(node, flavor)
            rec.spec = spec
            rec.input_shape = self._dims(x)
            declared = value_dims(x)
            problem = _shape_disagreement(declared, rec.input_shape)
            if problem:
                rec.warnings.append(f"declared input shape {_fmt(declared)} disagrees with the shape derived "
                                    f"from the graph inputs {_fmt(rec.input_shape)} ({problem}); using the derived one")
            index_types = {f: _index_type(v, self._elem(v)) for f, v in runtime.items()}
            key = (spec, rec.input_shape, tuple(sorted(index_types.items())))
            if key not in self._lowerings:
                plan = make_plan(spec, rec.input_shape)
                self._lowerings[key] = (plan, lower(plan, self.opset, index_types, target=self.target))
            plan, lowering = self._lowerings[key]
        except StridedSliceError as exc:
            rec.error = str(exc)
            rec.error_kind = "unsupported" if "not supported" in exc.reason else "invalid"
            return rec
        self._freed.extend((graph, v) for v in node.inputs[1:] if v is not None)
        rec.output_shape = plan.output_shape
        rec.lowering = lowering
        rec.elem_type = self._elem(x) or _elem_type(x) or _elem_type(out)  # 0 is UNDEFINED
        rec.data_name, rec.output_name = x.name, out.name
        rec.index_names = {f: v.name for f, v in runtime.items()}
        rec.replaced = [tuple(v.name for v in node.outputs)]
        rec.declared_output = value_dims(out)
        rec.index_types = index_types
        out_pos = self._out_index.get(id(out))
        if lowering.is_identity and out_pos is None:
            rec.output_name = x.name
            rec.renamed = {out.name: x.name}
            out.replace_all_uses_with(x)
            node.resize_inputs(0)  # detach: an unsafe remove() leaves the inputs' uses
            self._dead.append(node)  # its output has no uses left
            return rec
        new_nodes, new_out = emit(lowering, x, self.opset, pool, name, runtime, memo=self._memo)
        self._added.extend(new_nodes)
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
        # Fill in what the original output did not declare: its type, and the plan's shape.
        if new_out.type is None and x.type is not None:
            new_out.type = x.type
        if new_out.shape is None and plan.output_shape is not None and new_out.type is not None:
            new_out.shape = ir.Shape(list(plan.output_shape))
        return rec


def _remove_if_unused(freed: list, removed: dict) -> None:
    """Drop what fed only the replaced nodes: initializers, Constant nodes, and the standard
    nodes that computed runtime begin/end/strides (e.g. tf2onnx's ``end = begin + 1`` of a
    shrink, which the lowering does not read), recursively."""
    done = set()
    todo = list(freed)
    while todo:
        graph, value = todo.pop()
        if id(value) in done or value.uses() or value.is_graph_output() or value.is_graph_input():
            continue
        done.add(id(value))
        producer = value.producer()
        if producer is not None:
            if producer.domain not in ("", "ai.onnx") or any(v.uses() or v.is_graph_output()
                                                             for v in producer.outputs):
                continue
            if any(a.type in _graph_attr_types() for a in producer.attributes.values()):
                continue  # If/Loop/Scan: leave control flow alone
            inputs = [v for v in producer.inputs if v is not None]
            removed["nodes"].append(tuple(v.name for v in producer.outputs))
            producer.graph.remove(producer, safe=True)
            todo.extend((graph, v) for v in inputs)
        elif value.is_initializer() and value.name in value.graph.initializers:
            removed["initializers"].append(value.name)
            del value.graph.initializers[value.name]


def _graph_attr_types():
    import onnx_ir as ir
    return (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)


def _index_type(value, derived: int | None = None) -> str | None:
    import onnx_ir as ir
    dtype = ir.DataType(derived) if derived else value.dtype if value.type is not None else None
    return {ir.DataType.INT32: "int32", ir.DataType.INT64: "int64"}.get(dtype)


def _shape_disagreement(declared, derived) -> str | None:
    """Where a declared shape contradicts the derived one: rank, or two different numbers."""
    if declared is None or derived is None:
        return None
    if len(declared) != len(derived):
        return f"rank {len(declared)} != {len(derived)}"
    for i, (a, b) in enumerate(zip(declared, derived)):
        if isinstance(a, int) and isinstance(b, int) and a != b:
            return f"dim {i}: {a} != {b}"
        if isinstance(a, int) and not isinstance(b, int):
            return f"dim {i}: declared {a}, not derivable"
    return None


def _fmt(shape) -> str:
    return "unknown rank" if shape is None else "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def _has_strided_slice(model) -> bool:
    import onnx_ir as ir
    return any(n.op_type == "StridedSlice" for g, _, _ in _all_graphs(model)
               for n in ir.traversal.RecursiveGraphIterator(g))


def _proto_for_inference(model):
    """The model as a proto without reading external weights (in-memory ones are copied)."""
    import onnx_ir as ir
    return ir.to_proto(model)


def derive_shapes(proto, max_bytes: int = 1024, names=None, has_subgraphs: bool | None = None) -> dict:
    """name -> (elem_type or None, dims or None) of every value ONNX shape inference derives from
    the graph inputs' declared shapes and the initializers alone.

    Inference runs once on :func:`skeleton` -- value_info of intermediate values and graph output
    shapes removed (they are declarations, never trusted), initializers that are external, above
    ``max_bytes`` or overridable (also graph inputs) turned into typed inputs (weights are never
    read), no data propagation: linear in the model size.  Custom ops get no shape, so values
    after them are unknown.  Subgraph inputs keep their rank only (a Loop's state may change shape).
    ``names``: only these values (of the main graph) are wanted (a set; the others are not read).
    When they are all graph inputs and initializers, no inference runs: it would return their
    declarations as they are.  ``has_subgraphs``: see :func:`skeleton`; when False (no main-graph
    node holds a subgraph) and the model has no functions, only the nodes ``names`` depend on are
    inferred (a node's inferred types depend on its inputs' alone)."""
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
        inferred = infer_isolated(proto if keep is None and _own_skeleton(proto, max_bytes, has_subgraphs)
                                  else skeleton(proto, max_bytes, has_subgraphs, keep=keep))
    except Exception:  # noqa: BLE001 - nothing derived: every lowering stays general
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


def infer_isolated(model, strict: bool = False):
    """ONNX shape inference (no data propagation; ``strict``: check types, fail on any error)
    in a helper process (graphs/shape_inference.py): a negative dim reaching e.g. a Slice *aborts* the process
    inside onnx 1.23 (a failed std::clamp assertion).  ``model``: a ModelProto or its bytes.
    Returns the inferred model; raises RuntimeError with onnx's message, or saying inference
    aborted."""
    import os

    import onnx
    if not hasattr(os, "fork"):
        return onnx.shape_inference.infer_shapes(model, check_type=strict, strict_mode=strict, data_prop=False)
    from ..graphs.shape_inference import infer_shapes
    return onnx.load_from_string(infer_shapes(model if isinstance(model, bytes) else model.SerializeToString(), strict))


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
    used = set()
    for graph, _, _ in _all_graphs(model):  # every graph is listed: no need to recurse
        used.update(node.domain for node in graph)
    used |= {f.domain for f in model.functions.values()}
    for domain in list(model.opset_imports):
        if domain not in ("", "ai.onnx") and domain not in used:
            del model.opset_imports[domain]
    for domain in list(model.graph.opset_imports):
        if domain not in ("", "ai.onnx") and domain not in used:
            del model.graph.opset_imports[domain]


def default_opset(model) -> int | None:
    for d in ("", "ai.onnx"):
        if d in model.opset_imports:
            return model.opset_imports[d]
    return None


def set_default_opset(model, opset: int) -> None:
    model.opset_imports.pop("ai.onnx", None)
    model.opset_imports[""] = opset
    model.graph.opset_imports[""] = opset
