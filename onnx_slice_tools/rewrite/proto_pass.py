"""The StridedSlice rewrite on protobuf: rewrite/core.py's decisions applied to the main graph
of the parsed ``ModelProto``, without building an onnx-ir model.

Why a second representation: onnx-ir reads every node of a model into Python objects and
writes them all back, where a rewrite touches only the StridedSlice nodes and their constant
inputs; on a model of many slices that round trip is most of the rewrite's cost.  This module
reads only what the rewrite needs (the StridedSlice nodes, their constants, the declarations of
their inputs and outputs); everything decided -- flavour, spec, plan, lowering, records, the memo, dead inputs, domains, output
declarations, the default opset -- is rewrite/core.py's, as for the onnx-ir pass; only reading
protobuf fields and making NodeProtos (from ``lower.steps``) is done here.

It applies to the common case and declines the rest (:func:`declines`, then the onnx-ir pass
runs and ``report.path`` says so): StridedSlice nodes in the main graph only, no external
data, no graph input that is also a graph output, begin/end/strides from initializers or
``Constant`` nodes with a ``value``, ``value_int`` or ``value_ints``.
``tests/rewrite/test_rewrite_proto.py`` checks that both give the same model on every model the
tests build.
"""

from __future__ import annotations

import collections
import itertools
import struct
from typing import NamedTuple

from onnx import NodeProto, TensorProto, ValueInfoProto

from ..graphs.names import NameAllocator
from ..graphs.table import NodeTable, holds_subgraph
from ..graphs.walk import proto_graphs, proto_nodes, proto_subgraphs
from ..lowering.lower import ConstantPool, Lowering, steps
from .core import GraphFacts, RewriteRecord, RewriteResult, Rewriter, changes_of, check_flavor, default_opset_of, index_values
from .core import ProtoAttr as _Attr
from .core import proto_attr_value as _attr_value
from .core import input_warnings, output_fill, parse_node, remove_if_unused, unused_domains, with_default_opset

_EXTERNAL = 1  # TensorProto.EXTERNAL


def _index_ints(t, field_name: str) -> tuple[int, ...]:
    """The ints of initializer ``t`` as :func:`core.index_values` gives them: a 1-D INT32/INT64
    one (the usual begin/end/strides) read straight from its raw bytes or typed values
    (:func:`_inline_ints`); anything else through onnx's ``numpy_helper.to_array`` (which also
    gives the errors of a malformed tensor) and ``index_values`` (the errors of a wrong dtype or
    rank)."""
    values = _inline_ints(t)
    if values is not None:
        return values
    from onnx import numpy_helper
    return index_values(numpy_helper.to_array(t), field_name)


def _inline_ints(t) -> tuple[int, ...] | None:
    """The ints of a 1-D INT32/INT64 tensor whose values are inline (raw little-endian bytes or
    typed values) and as many as its dims say; None for any other tensor."""
    data_type = t.data_type
    if data_type == 6:
        code, size = "i", 4
    elif data_type == 7:
        code, size = "q", 8
    else:
        return None
    dims = t.dims  # (each read of a repeated field makes its container: read once)
    # (no data_location check: the main graph's initializers hold no external data, see declines;
    # one would hold no values here anyway, and go to numpy_helper)
    if len(dims) != 1 or t.HasField("segment"):
        return None
    n = dims[0]
    raw = t.raw_data
    if raw:
        return struct.unpack(f"<{n}{code}", raw) if len(raw) == n * size else None
    values = tuple((t.int32_data if data_type == 6 else t.int64_data)[:])  # (a slice reads the values at once)
    return values if len(values) == n else None


_CONSTANT_FIELDS = frozenset({"value", "value_int", "value_ints"})
_OP_TYPE = b'"\x0cStridedSlice'  # NodeProto field 4 (op_type), 12 bytes long
#: AttributeProto.type (field 20) GRAPH or GRAPHS, serialized
_GRAPH_TYPES = (b"\xa0\x01\x05", b"\xa0\x01\x0a")


class Scan(NamedTuple):
    """One walk over a main graph: what the path needs before rewriting."""

    holders: list       # nodes (not StridedSlice: one with a graph attribute is declined while it
    #                     is read, see _GRAPH_TYPES) holding subgraphs
    inputs: set         # every name a StridedSlice reads (the shapes the rewrite needs)
    found: bool         # a StridedSlice in the main graph
    positions: list     # the holders' positions in the graph's node list (as graphs.walk.proto_graphs takes them)
    table: NodeTable | None = None  # the graph's NodeTable, read in the same pass (shape derivation and
    #                                 the rewrite read these columns of the input's nodes too)


def scan(graph, table: NodeTable | None = None) -> Scan:
    """:class:`Scan` of ``graph`` in one pass over its nodes, its NodeTable with it.  ``table``:
    the graph's NodeTable, if read (io/validate.py's proof reads it): then only the nodes
    holding subgraphs are read."""
    if table is not None:
        return _scan_of_table(graph, table)
    holders: list = []
    inputs: set = set()
    found = False
    positions: list = []
    ops: list = []
    domains: list = []
    node_inputs: list = []
    node_outputs: list = []
    table_holders: list = []
    for k, n in enumerate(graph.node):
        op, ins = n.op_type, tuple(n.input)
        ops.append(op)
        domains.append(n.domain)
        node_inputs.append(ins)
        node_outputs.append(tuple(n.output))
        if n.attribute:
            if holds_subgraph(n):
                table_holders.append(k)
            if op != "StridedSlice" and proto_subgraphs(n):
                holders.append(n)
                positions.append(k)
        if op == "StridedSlice":
            found = True
            inputs.update(ins)
    table = NodeTable.from_columns(ops, domains, node_inputs, node_outputs, table_holders)
    return Scan(holders, inputs, found, positions, table)


def _scan_of_table(graph, table: NodeTable) -> Scan:
    """:func:`scan` of ``graph`` whose NodeTable is ``table``: the holders' nodes read, no other."""
    nodes, ops = graph.node, table.ops
    positions = [k for k in table.holders if ops[k] != "StridedSlice" and proto_subgraphs(nodes[k])]
    inputs: set = set()
    for op, ins in zip(ops, table.inputs):
        if op == "StridedSlice":
            inputs.update(ins)
    return Scan([nodes[k] for k in positions], inputs, "StridedSlice" in ops, positions, table)


def declines(proto, holders: list | None = None) -> str | None:
    """Why this pass does not apply to ``proto`` (the onnx-ir pass runs instead), or None.
    ``holders``: ``scan(proto.graph).holders``, if known."""
    main = proto.graph
    for t in main.initializer:
        if t.data_location == _EXTERNAL:
            return "external data"
    for node in scan(main).holders if holders is None else holders:
        for g in proto_subgraphs(node):
            if any(n.op_type == "StridedSlice" for n, _ in proto_nodes(g)):
                return "a StridedSlice in a subgraph"
            if any(t.data_location == _EXTERNAL for sub, _, _ in proto_graphs(g) for t in sub.initializer):
                return "external data"
    for f in proto.functions:
        for node in f.node:
            if node.op_type == "StridedSlice" or proto_subgraphs(node):
                return "a function with a StridedSlice or a subgraph"
    if proto.graph.sparse_initializer:
        return "sparse initializers"
    if {vi.name for vi in main.input} & {vi.name for vi in main.output}:
        return "a graph input that is also a graph output"  # onnx-ir merges their declarations
    return None


_UNSET = object()


class _Declined(Exception):
    pass


def _decl(type_proto):
    """(elem_type or None, dims or None, has a type) of a declared TypeProto."""
    if not type_proto.HasField("tensor_type"):
        return None, None, type_proto.WhichOneof("value") is not None
    tt = type_proto.tensor_type
    dims = None
    if tt.HasField("shape"):
        dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)
    return tt.elem_type, dims, True


class _Graph:
    """What the rewrite reads of the main graph, indexed once.  ``holders``: its nodes with
    subgraphs.  ``node_ops``/``node_domains``/``node_inputs``/``node_outputs``: each node's op
    type, domain, inputs and outputs (tuples), in the order of ``graph.node`` (the columns of a
    ``graphs.table.NodeTable``), read once for every step that needs them."""

    def __init__(self, graph, holders: list, table: NodeTable | None = None):
        self.graph = graph
        self.holders = holders
        self.inputs = {vi.name for vi in graph.input}
        self.output_list = list(graph.output)
        self.outputs = {vi.name: k for k, vi in enumerate(self.output_list)}
        self.initializers = {t.name: t for t in graph.initializer}
        self.value_info = {vi.name: vi for vi in graph.value_info}
        self.input_decl = {vi.name: vi for vi in graph.input}
        if table is None:
            table = NodeTable(graph)
        self.node_ops, self.node_domains = table.ops, table.domains
        self.node_inputs, self.node_outputs = table.inputs, table.outputs
        inner = [n for holder in holders for g in proto_subgraphs(holder) for n, _ in proto_nodes(g)]
        # reads of every name, subgraphs included (they read outer names too), and nodes per domain
        self.uses = collections.Counter(itertools.chain.from_iterable(self.node_inputs))
        self.domains = collections.Counter(self.node_domains)
        if inner:
            self.uses.update(itertools.chain.from_iterable(n.input for n in inner))
            self.domains.update(n.domain for n in inner)
        self._producers: dict[str, int] | None = None
        self._declared: dict = {}  # name -> declared(name)
        self._by_bytes: dict = {}  # a serialized TypeProto -> its declaration
        for vi in self.output_list:  # read together: most are asked when the slices are graph outputs
            key = vi.type.SerializeToString()
            hit = self._by_bytes.get(key)
            if hit is None:
                hit = self._by_bytes[key] = _decl(vi.type)
            self._declared[vi.name] = hit
        # (an output's declaration, the data's element type, the plan's shape) -> (a serialized
        # ValueInfoProto to merge into the declaration, whether its shape replaces a declared one),
        # or None (nothing to fill in)
        self.filled_types: dict = {}

    def declared_names(self):
        """The names of the graph's inputs, outputs, initializers and value_info (as read)."""
        return itertools.chain(self.inputs, self.outputs, self.initializers, self.value_info)

    @property
    def producers(self) -> dict:
        """Output name -> index of the main-graph node producing it (indexed on first use)."""
        if self._producers is None:
            self._producers = {o: k for k, outputs in enumerate(self.node_outputs) for o in outputs if o}
        return self._producers

    def declared(self, name: str):
        """(elem_type, dims, has a type) as onnx-ir reads a value's declaration: the graph output's,
        else the graph input's, else value_info, else an initializer's own."""
        hit = self._declared.get(name)
        if hit is None:
            hit = self._declared[name] = self._declaration(name)
        return hit

    def _declaration(self, name: str):
        """:meth:`declared` of a name that is no graph output (those are read in ``__init__``)."""
        vi = self.input_decl.get(name) or self.value_info.get(name)
        if vi is not None:  # declarations repeat (e.g. every output a float tensor of unknown shape)
            key = vi.type.SerializeToString()
            hit = self._by_bytes.get(key)
            if hit is None:
                hit = self._by_bytes[key] = _decl(vi.type)
            return hit
        t = self.initializers.get(name)
        if t is not None:
            return t.data_type, tuple(t.dims), True
        return None, None, False

    def index_initializers(self, names) -> dict:
        """name -> ints (as :meth:`constant` gives them) of those of ``names`` that are 1-D
        INT32/INT64 initializers with their values inline and no graph input (the usual
        begin/end/strides), read in one loop; other names are left out."""
        out: dict = {}
        initializers, inputs = self.initializers, self.inputs
        for name in names:
            t = initializers.get(name)
            if t is not None and name not in inputs and name not in out:
                values = _inline_ints(t)
                if values is not None:
                    out[name] = values
        return out

    def constant(self, name: str, field_name: str):
        """The constant ints of ``name`` or None for a runtime value (see rewrite._const_ints)."""
        if name in self.inputs:
            return None
        t = self.initializers.get(name)
        if t is not None:
            return _index_ints(t, field_name)
        k = self.producers.get(name)
        if k is None:
            return None
        node = self.graph.node[k]
        if node.op_type != "Constant" or node.domain != "":  # as onnx-ir's get_const_tensor
            return None
        attrs = {a.name: a for a in node.attribute}
        if len(attrs) != 1 or not set(attrs) <= _CONSTANT_FIELDS or len(node.output) != 1:
            raise _Declined("a Constant of another kind feeds a StridedSlice")
        import numpy as np
        a = attrs.popitem()[1]
        if a.name == "value":
            from onnx import numpy_helper
            if a.t.data_location == _EXTERNAL:
                raise _Declined("external data")
            return index_values(numpy_helper.to_array(a.t), field_name)
        arr = np.array(a.i if a.name == "value_int" else list(a.ints), dtype=np.int64)
        return index_values(arr, field_name)


class ProtoConstantPool(ConstantPool):
    """The pool of the main graph as ``TensorProto`` initializers (values are their names), each
    made by ``make`` (an empty TensorProto: ``TensorProto``, or a graph's ``initializer.add``,
    which makes it in place) and listed in ``tensors``."""

    def __init__(self, prefix: str, names, make=TensorProto):
        super().__init__(None, prefix, names=names)
        self.make = make
        self.tensors: list = []

    def _make(self, name: str, values: tuple[int, ...], dtype: str, scalar: bool):
        """A 1-D int64 constant (every Slice argument) made straight from its values: the raw
        little-endian bytes numpy would give, without making an array; the rest as the base does."""
        if dtype != "int64" or scalar:
            return super()._make(name, values, dtype, scalar)
        n = len(values)
        return self._made(name, 7, (n,), struct.pack(f"<{n}q", *values))

    def _create(self, name: str, arr):
        elem = _POOL_TYPES.get(arr.dtype.str)  # (byte order included: big-endian arrays go through numpy_helper)
        if elem is None:
            from onnx import numpy_helper
            t = self.make()
            t.CopyFrom(numpy_helper.from_array(arr, name))
            self.tensors.append(t)
            return name
        # what numpy_helper.from_array makes of these (raw little-endian bytes), made directly
        return self._made(name, elem, arr.shape, arr.tobytes())

    def _made(self, name: str, elem: int, dims, raw: bytes) -> str:
        """A tensor of element type ``elem``, ``dims`` and raw bytes ``raw``, made by ``make``."""
        t = self.make()
        t.name = name
        t.data_type = elem
        t.dims.extend(dims)
        t.raw_data = raw
        self.tensors.append(t)
        return name


#: TensorProto element types of the pool's constants (lower.ConstantPool.get: int64, int32, bool),
#: by their little-endian numpy type strings
_POOL_TYPES = {"<i8": 7, "<i4": 6, "|b1": 9}


def model_names(proto, holders: list | None = None, reads=None, writes=None, declared=None) -> NameAllocator:
    """A NameAllocator that knows every name of ``proto`` (as NameAllocator.for_model does for an
    onnx-ir model, plus value_info names: a generated name never meets a stale declaration).
    ``holders``: the main graph's nodes holding subgraphs (:func:`scan`), ``reads``:
    every name its nodes and their subgraphs read (e.g. ``_Graph.uses``), ``writes``: every
    output name of its nodes (e.g. of ``_Graph.node_outputs``), ``declared``: the names of its
    inputs, outputs, initializers and value_info (e.g. :meth:`_Graph.declared_names`), when known."""
    taken: set = set()

    def graph_names(g, inner=None, known_reads=None, known_writes=None, known_declared=None):
        if known_declared is None:
            taken.update(vi.name for vi in g.input)
            taken.update(vi.name for vi in g.output)
            taken.update(t.name for t in g.initializer)
            taken.update(vi.name for vi in g.value_info)
        else:
            taken.update(known_declared)
        nodes = g.node
        taken.update(n.name for n in nodes)
        taken.update(itertools.chain.from_iterable(n.input for n in nodes) if known_reads is None else known_reads)
        taken.update(itertools.chain.from_iterable(n.output for n in nodes) if known_writes is None else known_writes)
        for node in nodes if inner is None else inner:
            for sub in proto_subgraphs(node):
                graph_names(sub)

    graph_names(proto.graph, holders, reads, writes, declared)
    for f in proto.functions:
        taken.update(f.input)
        taken.update(f.output)
        for node in f.node:
            taken.add(node.name)
            taken.update(node.input)
            taken.update(node.output)
    taken.discard("")
    return NameAllocator.holding(taken)


class _Plan(NamedTuple):
    """One StridedSlice node's rewrite, read before anything changes."""

    position: int       # in graph.node
    record: RewriteRecord
    lowering: Lowering | None  # None when the node stays
    runtime: dict       # field -> tensor name
    inputs: tuple = ()  # the node's inputs (identity rewrites before it applied)


class ProtoStridedSliceRewritePass:
    """:class:`rewrite.StridedSliceRewritePass` on a ``ModelProto`` (edited in place) whose
    StridedSlice nodes are all in the main graph (see :func:`declines`).  Returns a
    :class:`rewrite.RewriteResult` whose ``model`` is the proto; raises ``ValueError`` with the
    reason when it declines a model (nothing changed then)."""

    prefix = "sst"

    def __init__(self, *, flavor: str | None = None, opset: int, target: str | None = None):
        flavor = check_flavor(flavor, auto=True)
        self.flavor = flavor
        self.opset = opset
        self.target = target

    def __call__(self, proto, shapes: dict, holders: list | None = None, table: NodeTable | None = None) -> RewriteResult:
        """``holders``: ``scan(proto.graph).holders``, if known; ``table``: ``scan(proto.graph).table``
        of the graph as it is, if read."""
        holders = scan(proto.graph).holders if holders is None else holders
        reason = declines(proto, holders)
        if reason is not None:
            raise ValueError(reason)
        g = _Graph(proto.graph, holders, table)
        self._shapes = shapes
        self._core = Rewriter(flavor=self.flavor, opset=self.opset, target=self.target)
        try:
            plans = self._read_all(g)
        except _Declined as exc:
            raise ValueError(str(exc)) from None
        records = [p.record for p in plans]
        if not any(p.lowering is not None for p in plans):
            return RewriteResult(proto, False, records)
        return self._splice(proto, g, plans)

    # ------------------------------------------------------------------ reading

    def _dims(self, name):
        return self._shapes.get(name, (None, None))[1] if name else None

    def _elem(self, name):
        return self._shapes.get(name, (None, None))[0] if name else None

    def _read_all(self, g: _Graph) -> list:
        # name -> ints: one initializer often feeds many nodes (the field only words an error,
        # and errors are not kept)
        node_ops, node_inputs, node_outputs = g.node_ops, g.node_inputs, g.node_outputs
        # the usual begin/end/strides (1-D int32/int64 initializers) read in one pass, the rest
        # as nodes ask for them
        positions = [k for k, op in enumerate(node_ops) if op == "StridedSlice"]
        consts: dict = g.index_initializers(itertools.chain.from_iterable([node_inputs[k][1:] for k in positions]))
        renamed: dict = {}  # identity rewrites so far: later nodes read the data instead

        def const_of(name, field_name):
            hit = consts.get(name, _UNSET)
            if hit is _UNSET:
                hit = consts[name] = g.constant(name, field_name)
            return hit

        def elem_of(v):  # a runtime index input's element type: derived, else declared
            return self._elem(v) or g.declared(v)[0]

        # models repeat a few patterns on a few tensors thousands of times: what depends on the
        # index inputs and attributes, on the data, and on both is each worked out once
        signatures: dict = {}
        attributes: dict = {}  # the bytes from op_type on -> (attributes as parse_node reads them, their types)
        data: dict = {}
        plans = []
        graph_type, graphs_type = _GRAPH_TYPES
        nodes = g.graph.node
        for k in positions:
            node = nodes[k]
            outputs = node_outputs[k]
            if len(outputs) != 1 or not outputs[0]:
                raise _Declined("a StridedSlice without exactly one output")
            inputs = tuple(renamed.get(name, name) for name in node_inputs[k]) if renamed else node_inputs[k]
            raw = node.SerializeToString()
            if graph_type in raw or graphs_type in raw:  # maybe a graph attribute (or the bytes by chance)
                raise _Declined("a StridedSlice that may hold a subgraph")
            # fields serialize in number order: op_type (4), then attribute (5) and domain (7); the
            # bytes from op_type on hold all of them (from an earlier match: more, never less)
            tail = raw[raw.find(_OP_TYPE):]
            key = (inputs[1:], tail)
            sig = signatures.get(key)
            if sig is None:
                attrs = attributes.get(tail)
                if attrs is None:
                    attrs = attributes[tail] = self._attributes(node)
                names = [name or None for name in inputs] if "" in inputs else list(inputs)
                sig = signatures[key] = self._signature(node, attrs, names, const_of, elem_of)
            x = inputs[0] if inputs else ""
            about = data.get(x)
            if about is None:
                about = data[x] = self._data(g, x or None)
            plan = self._plan(g, k, node, outputs[0], inputs, sig, about)
            plans.append(plan)
            if plan.record.renamed:
                renamed.update(plan.record.renamed)
        return plans

    @staticmethod
    def _attributes(node) -> tuple[dict, dict]:
        """(name -> :class:`core.ProtoAttr`, name -> AttributeProto type) of a node's attributes."""
        attrs = {a.name: _Attr(a.type, _attr_value(a)) for a in node.attribute}
        return attrs, {n: a.type for n, a in attrs.items()}

    def _signature(self, node, attributes: tuple[dict, dict], inputs: list, const_of, elem_of):
        """The core's :class:`core.Signature` of a node's index inputs, attributes (as
        :meth:`_attributes` reads them) and domain; ``elem_of``: a runtime input's element type."""
        attrs, attr_types = attributes
        dims, cache = self._dims, self._core.parse_cache
        return self._core.signature(attr_types, node.domain,
                                    lambda flavor: parse_node(inputs, attrs, flavor, const_of, dims, cache), elem_of)

    def _data(self, g: _Graph, x) -> tuple:
        """(derived dims, warnings, element type) of a sliced tensor."""
        dims = self._dims(x)
        declared_elem, declared, _ = g.declared(x)
        return dims, input_warnings(declared, dims), self._elem(x) or declared_elem

    def _plan(self, g: _Graph, k: int, node, out: str, inputs, sig, about: tuple) -> _Plan:
        x = inputs[0] if inputs else None
        dims, warnings, elem = about
        out_elem, declared_output, _ = g.declared(out) if sig.error is None else (None, None, False)
        rec = self._core.decide(sig, node=node.name or out, graph="main", dims=dims, warnings=warnings,
                                data_name=x, output_name=out, data_elem=elem, output_elem=out_elem,
                                declared_output=declared_output, runtime_names=sig.runtime,
                                is_graph_output=out in g.outputs)
        if rec.lowering is None:
            return _Plan(k, rec, None, {})
        return _Plan(k, rec, rec.lowering, sig.runtime, inputs)

    # ------------------------------------------------------------------ splicing

    def _splice(self, proto, g: _Graph, plans: list) -> RewriteResult:
        """Replace the planned nodes in ``proto``'s main graph.  What dies with them is worked out
        first (the names the new nodes read are known from their lowerings' steps); then the node
        list is rebuilt in order, the new nodes made in place (``graph.node.add``: made once, not
        made and then copied in), templates and nodes named in the order of the plans."""
        graph = proto.graph
        everything = graph.node
        names = model_names(proto, g.holders, g.uses, itertools.chain.from_iterable(g.node_outputs),
                            g.declared_names())  # (before any change)
        segments: list = []  # per replaced node: (index of the first node kept before it, those nodes, its plan)
        done = 0
        read_of: dict = {}  # id(lowering) -> the runtime fields its steps read
        steps_of: dict = {}  # id(lowering) -> its steps, when made here (runtime fields), else made below
        renamed: dict[str, str] = {}  # an identity's output -> the data
        emitted: list[str] = []  # names the emitted nodes read
        replaced: list[_Plan] = []
        for p in plans:
            if p.lowering is None:
                continue
            replaced.append(p)
            segments.append((done, everything[done:p.position] if p.position > done else (), p))
            done = p.position + 1
            rec = p.record
            if rec.renamed:
                renamed.update(rec.renamed)
                continue
            emitted.append(rec.data_name)
            if p.runtime:  # (with no runtime field, no step reads one)
                read = read_of.get(id(p.lowering))
                if read is None:
                    made = steps_of[id(p.lowering)] = steps(p.lowering, self.opset)
                    read = read_of[id(p.lowering)] = sorted({r[1] for step in made for r in step.inputs
                                                             if r[0] == "in"})
                # a runtime field not read is freed (e.g. end = begin + 1)
                emitted.extend(p.runtime[f] for f in read)
            self._declare_output(g, rec, rec.replaced[0][0])
        # reads after the rewrite: before, less the replaced nodes', plus the emitted nodes'
        uses = g.uses
        uses.subtract(collections.Counter(itertools.chain.from_iterable(p.inputs for p in replaced)))
        uses.update(emitted)
        for out, x in renamed.items():  # an identity's readers read the data now
            uses[x] += uses[out]
            uses[out] = 0
        # (in the order of the plans: removing a freed initializer depends on no order; the rest sorted)
        freed = dict.fromkeys([name for p in replaced for name in p.inputs[1:] if name])
        removed: dict[str, list] = {"nodes": [], "initializers": []}
        facts = _ProtoFacts(g, uses)
        remove_if_unused(sorted(facts.drop_unused_initializers(freed, removed)), facts, removed)
        dead_nodes = facts.dead
        node_domains = g.node_domains
        removed_domains = collections.Counter([node_domains[p.position] for p in replaced])
        removed_domains.update([node_domains[k] for k in dead_nodes])
        if renamed:
            _rename_uses(graph, renamed)
        tail = (done, everything[done:], None)
        del graph.node[:]  # (the messages of segments stay readable)
        dropped = set(removed["initializers"]) | set(renamed) | {o for t in removed["nodes"] for o in t}
        if removed["initializers"]:
            if len(g.initializers) == len(graph.initializer):  # (names unique: the dict holds them in order)
                keep = [t for name, t in g.initializers.items() if name not in dropped]
            else:
                keep = [t for t in graph.initializer if t.name not in dropped]
            del graph.initializer[:]
            graph.initializer.extend(keep)
        pool = ProtoConstantPool(f"{self.prefix}0/", names, graph.initializer.add)  # (after the kept ones)
        templates: dict = {}  # id(lowering) -> its steps, constants named
        memo: dict = {}  # emitted nodes by (op, inputs, attributes): see lower.emit
        added: list[tuple] = []  # outputs of the emitted nodes (a 1-tuple each, as the node table's rows)
        append, add = graph.node.append, graph.node.add
        # the new node list's table: the kept nodes' rows as read (inputs renamed as above), the
        # made nodes' as made
        columns: tuple[list, list, list, list] = ([], [], [], [])
        ops, domains, inputs, outputs = columns
        holders: list[int] = []
        for first, kept, p in segments + [tail]:
            for k, node in enumerate(kept, first) if kept else ():
                if k not in dead_nodes:
                    append(node)
                    if node.attribute and holds_subgraph(node):
                        holders.append(len(ops))
                    ops.append(g.node_ops[k])
                    domains.append(g.node_domains[k])
                    ins = g.node_inputs[k]
                    inputs.append(tuple([renamed.get(i, i) for i in ins]) if renamed and any(i in renamed for i in ins)
                                  else ins)
                    outputs.append(g.node_outputs[k])
            if p is None or p.record.renamed:
                continue
            rec = p.record
            template = templates.get(id(p.lowering))
            if template is None:  # the first node of a lowering names its constants
                made = steps_of.get(id(p.lowering)) or steps(p.lowering, self.opset)
                template = templates[id(p.lowering)] = _template(made, pool)
            # (positional: a call with keywords costs more, once per node)
            _instantiate(template, rec.data_name, p.runtime, rec.node, names, memo, rec.replaced[0][0], added, add,
                         columns)
        if dropped and any(vi.name in dropped for vi in graph.value_info):
            keep_vi = [vi for vi in graph.value_info if vi.name not in dropped]
            del graph.value_info[:]
            graph.value_info.extend(keep_vi)
        drop_unused_domains(proto, g.domains, removed_domains)
        records = [p.record for p in plans]
        changes = changes_of(records, removed, added, pool.cache.values())  # (the pool's values are their names)
        changes.renamed = renamed
        return RewriteResult(proto, True, records, changes, NodeTable.from_columns(ops, domains, inputs, outputs, holders))

    def _declare_output(self, g: _Graph, rec, out: str) -> None:
        """What the original output did not declare (:func:`core.output_fill`)."""
        declared = g.declared(out)
        key = (declared, g.declared(rec.data_name)[0], rec.output_shape)
        made = g.filled_types.get(key, _UNSET)
        if made is _UNSET:
            elem, dims, typed = declared
            fill = output_fill(typed, elem, dims, key[1], key[2])
            replaces = fill is not None and fill[1] is not None and dims is not None  # (a shape the plan contradicts)
            made = g.filled_types[key] = None if fill is None else (_filled_declaration(*fill), replaces)
        if made is None:
            return
        made, replaces = made
        k = g.outputs.get(out)
        if k is not None:
            vi = g.output_list[k]
        else:
            vi = g.value_info.get(out)
            if vi is None:
                vi = g.graph.value_info.add()
                vi.name = out
                g.value_info[out] = vi
        if replaces:
            vi.type.tensor_type.ClearField("shape")
        vi.MergeFromString(made)


def _filled_declaration(elem, shape) -> bytes:
    """A ValueInfoProto whose type holds ``elem`` (unless None) and ``shape`` (unless None),
    serialized: merged into a declaration that has neither (as ``MergeFrom`` would, without
    serializing it again for every output)."""
    filled = ValueInfoProto()
    tt = filled.type.tensor_type
    if elem is not None:
        tt.elem_type = elem
    if shape is not None:
        dims = tt.shape.dim
        tt.shape.SetInParent()
        for d in shape:
            if isinstance(d, int):
                dims.add(dim_value=d)
            elif d is not None:
                dims.add(dim_param=d)
            else:
                dims.add()
    else:
        tt.SetInParent()
    return filled.SerializeToString()


def _instantiate(template: list, x: str, runtime: dict, base: str, names, memo: dict | None = None,
                 final: str | None = None, created: list | None = None, make=NodeProto,
                 columns: tuple | None = None) -> tuple[list, list]:
    """The NodeProtos of ``template`` (:func:`_template`) on data ``x``: (nodes, output names).
    Nodes are named ``<base>/<suffix>``, outputs ``<node name>:0``, made unique by ``names``;
    ``final``: the last output's name instead (its own name is still taken, as onnx-ir's pass does);
    ``created``: a list the made nodes' outputs are appended to (1-tuples); ``make``: what makes an
    empty node (NodeProto, or a graph's ``node.add``, which makes it in place); ``columns``:
    (op types, domains, inputs, outputs) lists each made node's are appended to (a NodeTable's).
    ``memo``: as lower.emit's (a step other than the last that an earlier node computes reads
    that node's output; nodes are keyed by op, inputs and attributes)."""
    taken, fresh = names.taken, names.fresh
    nodes: list[NodeProto] = []
    outs: list[str] = []
    cur = x
    last = len(template) - 1
    for k, (op_type, suffix, refs, tail, attributes, attr_key) in enumerate(template):
        if tail is not None:  # the previous output (or the data) and constants
            inputs = (cur, *tail)
        else:
            inputs = tuple([r if r.__class__ is str else x if r[0] == "x" else outs[r[1]] if r[0] == "node"
                            else runtime[r[1]] for r in refs])
        if memo is not None:
            key = (op_type, inputs, attr_key)
            if k < last and key in memo:
                cur = memo[key]
                outs.append(cur)
                continue
        name = f"{base}/{suffix}"
        if name in taken:
            name = fresh(name)
        else:
            taken.add(name)
        cur = f"{name}:0"
        if cur in taken:
            cur = fresh(cur)
        else:
            taken.add(cur)
        if k == last and final is not None:
            cur = final
        new = make()  # (fields set one by one: cheaper than keyword arguments)
        new.op_type = op_type
        new.name = name
        new.input.extend(inputs)
        new.output.append(cur)
        if attributes:
            new.attribute.extend(attributes)
        outs.append(cur)
        nodes.append(new)
        row = (cur,)
        if created is not None:
            created.append(row)
        if columns is not None:
            columns[0].append(op_type)
            columns[1].append("")
            columns[2].append(inputs)
            columns[3].append(row)
        if memo is not None:
            memo.setdefault(key, cur)
    return nodes, outs


def emit_proto(lowering, x: str, opset: int, pool: ProtoConstantPool, name: str, runtime: dict | None = None):
    """:func:`lower.emit` as NodeProtos: (nodes, output name); constants go to ``pool.tensors``."""
    nodes, outs = _instantiate(_template(steps(lowering, opset), pool), x, runtime or {}, name, pool.names)
    return nodes, outs[-1]


def _template(plan_steps, pool: ProtoConstantPool) -> list:
    """(op_type, suffix, inputs, tail, attributes) per step: constants as their pooled names (the
    pool names each value once, in the order of the first use), other inputs as step references;
    ``tail``: the constant names after the first input when that is the previous step's output
    (the data for the first step) and every other input a constant, else None."""
    out = []
    # (the pool's memo read first: a constant reference is the memo's key, values a tuple in every
    # Step; a name is never empty)
    get, named = pool.get, pool.cache.get
    previous: tuple = _DATA
    for k, (suffix, op_type, inputs, attrs) in enumerate(plan_steps):
        refs = [(named(r) or get(r[1], r[2], r[3])) if r[0] == "const" else r for r in inputs]
        tail = None
        if refs and refs[0] == previous:
            tail = refs[1:]
            for r in tail:
                if r.__class__ is not str:
                    tail = None
                    break
        out.append((op_type, suffix, refs, tail, [_attribute(a, v) for a, v in attrs] if attrs else None, attrs))
        previous = ("node", k)
    return out


_DATA = ("x",)  # a step's reference to the sliced data (lower.Step)


def _attribute(key: str, value):
    from onnx import helper
    return helper.make_attribute(key, list(value) if isinstance(value, tuple) else value)


class _ProtoFacts(GraphFacts):
    """:class:`core.GraphFacts` of the main graph's names: ``uses`` counts the reads after the
    rewrite (kept up to date as nodes die); ``dead``: indices of the nodes removed (the caller
    leaves them out of the new node list)."""

    def __init__(self, g: _Graph, uses):
        self.g, self.uses = g, uses
        self.dead: set[int] = set()

    def drop_unused_initializers(self, freed, removed: dict) -> list:
        """What :func:`core.remove_if_unused` would do with the freed names that are initializers
        no node reads and no graph input or output (their usual fate: the constant begin/end/
        strides of the replaced nodes), done here in one loop: they go to ``removed``.  Returns
        the other names, for ``remove_if_unused`` (removing an initializer frees nothing else: it
        has no producer and reads nothing)."""
        rest: list = []
        initializers, uses, outputs, inputs = self.g.initializers, self.uses, self.g.outputs, self.g.inputs
        dropped = removed["initializers"]
        for v in freed:
            if v in initializers and uses[v] <= 0 and v not in outputs and v not in inputs:
                dropped.append(v)
            else:
                rest.append(v)
        return rest

    def key(self, v):
        return v

    def used(self, v) -> bool:
        return self.uses[v] > 0

    def is_boundary(self, v) -> bool:
        return v in self.g.outputs or v in self.g.inputs

    def producer(self, v):
        if v in self.g.initializers:  # (SSA: an initializer is no node's output)
            return None
        k = self.g.producers.get(v)
        return None if k is None or k in self.dead else k

    def is_initializer(self, v) -> bool:
        return v in self.g.initializers

    def domain(self, node) -> str:
        return self.g.graph.node[node].domain

    def outputs(self, node) -> list:
        return [o for o in self.g.node_outputs[node] if o]

    def has_subgraph(self, node) -> bool:
        return any(a.type in (5, 10) for a in self.g.graph.node[node].attribute)  # GRAPH/GRAPHS, even empty

    def output_names(self, node) -> tuple:
        return self.g.node_outputs[node]

    def remove_node(self, node) -> list:
        self.dead.add(node)
        inputs = [i for i in self.g.node_inputs[node] if i]
        for i in inputs:
            self.uses[i] -= 1
        return inputs

    def remove_initializer(self, v) -> str:
        return v  # dropped from the graph's list by the caller, with everything else removed


def _rename_uses(graph, renamed: dict) -> None:
    """Every read of a renamed value (main graph and subgraphs) reads its new name."""
    for node, _ in proto_nodes(graph):
        if any(i in renamed for i in node.input):
            new = [renamed.get(i, i) for i in node.input]
            del node.input[:]
            node.input.extend(new)


def drop_unused_domains(proto, counts: collections.Counter, removed: collections.Counter) -> None:
    """Opset imports of custom domains no node uses after the rewrite (:func:`core.unused_domains`).
    ``counts``: nodes per domain in the main graph and its subgraphs before, ``removed``: the
    nodes the rewrite removed, per domain."""
    used = {d for d, n in counts.items() if n > removed.get(d, 0)}
    if proto.functions:  # (else no walk: only function bodies and their subgraphs are read here)
        used.update(f.domain for f in proto.functions)
        used.update(n.domain for g, label, _ in proto_graphs(proto) if label.startswith("function ")
                    for n in g.node)
    drop = set(unused_domains([o.domain for o in proto.opset_import], used))
    if drop:
        keep = [o for o in proto.opset_import if o.domain not in drop]
        del proto.opset_import[:]
        proto.opset_import.extend(keep)


def _imports(proto) -> dict:
    return {o.domain: o.version for o in proto.opset_import}


def proto_default_opset(proto) -> int | None:
    """The default-domain opset a ModelProto imports (:func:`core.default_opset_of`)."""
    return default_opset_of(_imports(proto))


def set_proto_opset(proto, opset: int) -> None:
    """The default domain imported as ``""`` at ``opset`` (:func:`core.with_default_opset`)."""
    imports = with_default_opset(_imports(proto), opset)
    del proto.opset_import[:]
    for domain, version in imports.items():
        entry = proto.opset_import.add()
        entry.domain, entry.version = domain, version
