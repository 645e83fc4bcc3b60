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

from .errors import StridedSliceError
from .lower import ConstantPool, Lowering, emit, lower
from .plan import make_plan
from .spec import MASK_NAMES, OPENVINO, TF, SliceSpec, from_openvino, from_tf

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

    @property
    def notation(self) -> str | None:
        return None if self.spec is None else self.spec.index_notation()

    def to_json(self) -> dict:
        out = {
            "node": self.node, "graph": self.graph, "flavor": self.flavor, "spec": self.notation,
            "input_shape": _json_shape(self.input_shape), "output_shape": _json_shape(self.output_shape),
            "emitted": None if self.lowering is None else [op.describe() for op in self.lowering.ops],
            "emitted_nodes": None if self.lowering is None else self.lowering.node_count,
            "error": self.error,
        }
        if self.check is not None:
            c = self.check
            out["checks"] = {"shape_inference": c.shape_inference, "inferred_shape": _json_shape(c.inferred_shape),
                             "onnxruntime": c.onnxruntime, "tried_input_shapes": [list(s) for s in c.tried_shapes]}
            if c.runtimes:
                out["checks"]["runtimes"] = dict(c.runtimes)
            if self.index_types:
                out["checks"]["tried_runtime_values"] = c.tried_values
                out["checks"]["rejected_runtime_values_redrawn"] = c.rejected_values
        return out


def _json_shape(shape):
    return None if shape is None else [d for d in shape]


@dataclass
class RewriteResult:
    model: object  # onnx_ir.Model
    modified: bool
    records: list[RewriteRecord] = field(default_factory=list)


# --------------------------------------------------------------------------- reading nodes

def detect_flavor(node) -> str | None:
    """TF when the masks are INT attributes, OpenVINO when INTS or STRING; None if unclear."""
    import onnx_ir as ir
    kinds = {a.type for name, a in node.attributes.items() if name in MASK_NAMES}
    if kinds & {ir.AttributeType.INTS, ir.AttributeType.STRING}:
        return OPENVINO
    if ir.AttributeType.INT in kinds:
        return TF
    if node.domain in OPENVINO_DOMAINS:
        return OPENVINO
    return TF if not kinds else None


def _const_ints(value, field_name: str, cache: dict | None = None) -> tuple[int, ...] | None:
    import onnx_ir as ir
    if value is None:
        return None
    if cache is not None:  # one initializer often feeds many nodes
        key = (id(value), field_name)
        if key not in cache:
            cache[key] = _const_ints(value, field_name)
        return cache[key]
    tensor = ir.convenience.get_const_tensor(value)
    if tensor is None:
        return None
    arr = tensor.numpy()
    if arr.dtype.kind not in "iu":
        raise StridedSliceError(f"{field_name} must be int32 or int64, got {arr.dtype}", field=field_name)
    if arr.ndim != 1:
        raise StridedSliceError(f"{field_name} must be 1-D, got shape {list(arr.shape)}", field=field_name)
    return tuple(int(v) for v in arr.tolist())


def read_spec(node, flavor: str, cache: dict | None = None) -> SliceSpec:
    """The node's spec (``None`` for begin/end/strides computed at run time)."""
    return read_node(node, flavor, cache)[0]


def _runtime_length(value) -> int | None:
    shape = value.shape
    if shape is not None and len(shape) == 1 and isinstance(shape[0], int):
        return shape[0]
    return None


def read_node(node, flavor: str, cache: dict | None = None) -> tuple[SliceSpec, dict]:
    """(spec, runtime index values by field) of a StridedSlice node.

    Raises StridedSliceError (field named) for bad attributes or inputs.  ``cache`` (a
    dict kept by the caller for one pass) remembers constant inputs already read."""
    import onnx_ir as ir
    inputs = list(node.inputs)
    if len(inputs) < 3 or inputs[0] is None or inputs[1] is None or inputs[2] is None:
        raise StridedSliceError(f"StridedSlice needs inputs (data, begin, end[, strides]), got {len(inputs)}",
                                field="inputs")
    vals, runtime, lengths = [], {}, []
    for k, f in ((1, "begin"), (2, "end"), (3, "strides")):
        value = inputs[k] if k < len(inputs) else None
        v = _const_ints(value, f, cache)
        vals.append(v)
        if value is not None and v is None:
            runtime[f] = value
            length = _runtime_length(value)
            if value.shape is not None and len(value.shape) != 1:
                raise StridedSliceError(f"{f} must be 1-D, got rank {len(value.shape)}", field=f)
            if length is not None:
                lengths.append((f, length))
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
    begin, end, strides = vals
    attrs = node.attributes
    if flavor == TF:
        masks = {}
        for m in MASK_NAMES:
            a = attrs.get(m)
            if a is None:
                masks[m] = 0
            elif a.type != ir.AttributeType.INT:
                raise StridedSliceError(f"{m} must be an INT attribute in the TensorFlow flavour", field=m)
            else:
                masks[m] = a.value
        if strides is None and "strides" not in runtime:
            raise StridedSliceError("TensorFlow StridedSlice needs a strides input", field="strides")
        return from_tf(begin, end, strides, runtime_length=runtime_length, **masks), runtime
    masks = {}
    for m in MASK_NAMES:
        a = attrs.get(m)
        if a is None:
            masks[m] = ()
        elif a.type == ir.AttributeType.STRING:
            masks[m] = a.value
        elif a.type == ir.AttributeType.INTS:
            masks[m] = list(a.value)
        else:
            raise StridedSliceError(f"{m} must be INTS or STRING in the OpenVINO flavour", field=m)
    if strides is None and "strides" not in runtime and runtime:
        strides = (1,) * runtime_length  # the optional 4th input defaults to ones
    return from_openvino(begin, end, strides, runtime_length=runtime_length, **masks), runtime


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

def _all_graphs(model):
    """(graph_or_function, label, is_function) for the main graph, all subgraphs and functions."""
    import onnx_ir as ir
    out = [(model.graph, "main", False)]
    seen = {id(model.graph)}
    containers = [(model.graph, "main")] + [(f, f"function {f.domain}::{f.name}") for f in model.functions.values()]
    for container, label in containers:
        if container is not model.graph:
            out.append((container, label, True))
        for node in ir.traversal.RecursiveGraphIterator(container):
            for attr in node.attributes.values():
                graphs = []
                if attr.type == ir.AttributeType.GRAPH:
                    graphs = [attr.value]
                elif attr.type == ir.AttributeType.GRAPHS:
                    graphs = list(attr.value)
                for g in graphs:
                    if id(g) not in seen:
                        seen.add(id(g))
                        out.append((g, f"{label} > {node.op_type} {node.name!r}.{attr.name}", False))
    return out


class StridedSliceRewritePass:
    """Replace every StridedSlice node by its lowering.

    ``flavor``: None to detect per node from the attribute types, or "tf"/"openvino".
    ``opset``: the default-domain opset the emitted nodes are for (the model's own).
    ``target``: the constraints of the output (targets.py; default onnxruntime, the minimal lowering).
    """

    def __init__(self, *, flavor: str | None = None, opset: int, target: str | None = None):
        if flavor not in (None, TF, OPENVINO):
            raise ValueError(f"unknown flavor {flavor!r}")
        self.flavor = flavor
        self.opset = opset
        self.target = target

    def __call__(self, model) -> RewriteResult:
        if _needs_shape_inference(model):
            _infer_shapes(model)
        records: list[RewriteRecord] = []
        self._freed: list = []  # begin/end/strides values of replaced nodes
        self._consts: dict = {}  # constant inputs already read
        self._lowerings: dict = {}  # (spec, input shape) -> (plan, lowering): models repeat patterns
        for graph, label, is_function in _all_graphs(model):
            targets = [n for n in graph if self._selects(n)]
            if not targets:
                continue
            pool = ConstantPool(graph, f"{self.prefix}{len(records)}/", use_nodes=is_function)
            # graph outputs indexed once: per-node scans of them make big models quadratic
            self._out_index = {id(v): k for k, v in enumerate(graph.outputs)}
            self._dead: list = []
            for node in targets:
                records.append(self._rewrite(graph, label, node, pool))
            if self._dead:  # one call: each remove() scans the graph outputs
                graph.remove(self._dead, safe=False)
            if pool.nodes:
                graph.insert_before(next(iter(graph)), pool.nodes)
        modified = any(r.lowering is not None for r in records)
        if modified:
            _remove_if_unused(self._freed)
            _drop_unused_domains(model)
        return RewriteResult(model, modified, records)

    prefix = "sst"  # of the constants this pass adds

    def _selects(self, node) -> bool:
        """The nodes this pass rewrites (a hook for fixslices.FixSlicesPass)."""
        return node.op_type == "StridedSlice"

    def _read(self, node, flavor: str) -> tuple[SliceSpec, dict]:
        """(spec, runtime index values) of a selected node."""
        return read_node(node, flavor, self._consts)

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
            rec.input_shape = value_dims(x)
            index_types = {f: _index_type(v) for f, v in runtime.items()}
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
        rec.elem_type = _elem_type(x) or _elem_type(out)  # 0 is UNDEFINED
        rec.declared_output = value_dims(out)
        rec.index_types = index_types
        out_pos = self._out_index.get(id(out))
        if lowering.is_identity and out_pos is None:
            out.replace_all_uses_with(x)
            node.resize_inputs(0)  # detach: an unsafe remove() leaves the inputs' uses
            self._dead.append(node)  # its output has no uses left
            return rec
        new_nodes, new_out = emit(lowering, x, self.opset, pool, name, runtime)
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
        if new_out.shape is None and plan.output_shape is not None:
            new_out.shape = ir.Shape(list(plan.output_shape))
        return rec


def _remove_if_unused(freed: list) -> None:
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
            producer.graph.remove(producer, safe=True)
            todo.extend((graph, v) for v in inputs)
        elif value.is_initializer() and value.name in value.graph.initializers:
            del value.graph.initializers[value.name]


def _graph_attr_types():
    import onnx_ir as ir
    return (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)


def _index_type(value) -> str | None:
    import onnx_ir as ir
    dtype = value.dtype if value.type is not None else None
    return {ir.DataType.INT32: "int32", ir.DataType.INT64: "int64"}.get(dtype)


def _needs_shape_inference(model) -> bool:
    """True when some StridedSlice lacks what shape inference could tell: the data input's
    shape, or the type/length of a runtime begin/end/strides."""
    import onnx_ir as ir
    for graph, _, is_function in _all_graphs(model):
        if is_function:
            continue
        for node in graph:
            if node.op_type != "StridedSlice" or not node.inputs:
                continue
            x = node.inputs[0]
            if x is not None and x.shape is None:
                return True
            for v in node.inputs[1:]:
                if v is None or ir.convenience.get_const_tensor(v) is not None:
                    continue
                if v.shape is None or v.type is None:
                    return True
    return False


def _infer_shapes(model) -> None:
    """ONNX shape inference on the main graph's skeleton -- initializers that are external
    or above 1 KiB become typed inputs, so weights are never read -- merged into values
    that have no shape yet.  Custom ops are skipped; a failure leaves the model as it is
    (the lowering then stays general)."""
    import onnx
    import onnx_ir as ir
    try:
        proto = ir.to_proto(model)  # external tensors stay references: nothing is read
        weightless(proto, max_bytes=1024)
        inferred = onnx.shape_inference.infer_shapes(proto, check_type=False, strict_mode=False, data_prop=False)
    except Exception:  # noqa: BLE001 - shape information is an optimisation here
        return
    values = {}
    for node in model.graph:
        for v in node.outputs:
            if v.name:
                values[v.name] = v
    for vi in inferred.graph.value_info:
        v = values.get(vi.name)
        if v is None or v.shape is not None or not vi.type.HasField("tensor_type"):
            continue
        tt = vi.type.tensor_type
        if v.type is None and tt.elem_type:
            v.type = ir.TensorType(ir.DataType(tt.elem_type))
        if tt.HasField("shape"):
            v.shape = ir.Shape([d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                                for d in tt.shape.dim])


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
    import onnx_ir as ir
    used = set()
    for graph, _, _ in _all_graphs(model):
        for node in ir.traversal.RecursiveGraphIterator(graph):
            used.add(node.domain)
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
