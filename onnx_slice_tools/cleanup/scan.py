"""The cleanup pre-check on the ModelProto: can any cleanup pass change this model?

:class:`ProtoIndex` walks the proto once (every graph, subgraphs in scope) and records what the
passes' conditions read: each value's definition and its uses counted as onnx-ir counts them
(node input slots, at any depth; graph outputs are not uses), which values ``base.Facts``
may know integer elements of, small constants (read once), and per graph its nodes in order,
those of the default domain also by op type.  Each pass has its firing condition in
cleanup/conditions.py (the pass's ``may_fire``): it returns a reason naming the pass and the node
whenever the pass could change the model (its match conditions with everything that needs
inferred shapes taken as "may hold"; it may fire too often, never too rarely), else None.

``precheck.may_change`` builds the index and asks every condition of a default cleanup.
What the index does not model exactly raises :class:`MayChange` ("may change" whatever the
passes say): models with functions (attribute references, no initializers: not worth the
exactness here), sparse initializers, names defined twice or read before their definition.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from ..graphs.table import NodeTable

#: Constants up to this many elements are read for folding and compared by value in CSE.
SMALL = 64

#: TensorProto data types whose values are surely not integers (FLOAT, STRING, BOOL, FLOAT16,
#: DOUBLE, COMPLEX64/128, BFLOAT16, FLOAT8*, FLOAT4E2M1, FLOAT8E8M0, FLOAT6*); any other may be.
NOT_INT = frozenset({1, 8, 9, 10, 11, 14, 15, 16, 17, 18, 19, 20, 23, 24, 27, 28})
# ... and those numpy reads the same way in onnx and onnx-ir (compared by bytes in CSE keys).
_PLAIN = frozenset({1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13})
_GRAPH, _GRAPHS, _TENSOR = 5, 10, 4
#: The default ONNX domain as node protos spell it.
DEFAULT_DOMAIN = ("", "ai.onnx")


class MayChange(Exception):
    """Raised inside the index or a pass's condition with the reason; :func:`may_change`
    returns it."""


class Def:
    """One value: a graph input, an initializer or a node output (``node``, its ``ins``)."""

    __slots__ = ("kind", "graph", "node", "tensor", "ins", "uses", "out_any", "fact", "key")

    def __init__(self, kind, graph, node=None, ins=(), tensor=None):
        self.kind, self.graph, self.node, self.ins, self.tensor = kind, graph, node, ins, tensor
        self.uses = 0
        self.out_any = False  # an output of its graph (onnx-ir: is_graph_output)
        self.fact = False  # base.Facts may know something about it
        # its identity in CSE keys (ProtoIndex.value_key): node outputs by identity (their ids are
        # unique while the index holds them); constants by value, computed when first read (None)
        self.key = id(self) if kind == "node" else None


class GraphIndex:
    """One graph of the index: ``scope`` (name -> :class:`Def` of its own values), ``nodes``
    (``(node, input defs, output defs)`` in order), ``by_op`` (those of the default domain with
    outputs, by op type), ``facts`` (those whose one output may have a known integer fact,
    ``Constant`` left out) and ``bad_io`` (``(node, what)``: trailing empty inputs or outputs);
    ``ops`` and ``domains``: the nodes' op types and domains, aligned with ``nodes`` (read from
    the graph's ``graphs.table.NodeTable``)."""

    __slots__ = ("graph", "gid", "scope", "nodes", "by_op", "facts", "bad_io", "ops", "domains")

    def __init__(self, graph, scope, nodes, by_op, facts, bad_io, ops=None, domains=None):
        self.graph, self.gid, self.scope = graph, id(graph), scope
        self.nodes, self.by_op, self.facts, self.bad_io = nodes, by_op, facts, bad_io
        self.ops, self.domains = ops, domains


def where(node) -> str:
    """A node as the reasons name it: op and name, or op and outputs."""
    return f"{node.op_type} {node.name!r}" if node.name else f"{node.op_type} -> {list(node.output)}"


def numel(tensor) -> int:
    """Elements of a TensorProto, from its dims."""
    n = 1
    for d in tensor.dims:
        n *= d
    return n


class ProtoIndex:
    """One walk over the proto (:meth:`walk`); ``graphs``: a :class:`GraphIndex` per graph,
    subgraphs before the graph holding them; the passes' conditions read it through the helpers
    below (constants as cleanup reads them, facts, CSE identities)."""

    def __init__(self, proto, table=None):
        self.proto = proto
        imports = {o.domain: o.version for o in proto.opset_import}
        self.opset = imports.get("", imports.get("ai.onnx"))
        self.graphs: list[GraphIndex] = []
        self.cache: dict = {}  # for the passes' conditions: keys of their own (e.g. schemas)
        self.arrays: dict = {}  # id(def) -> (def, its small constant's array or None)
        self.const_keys: dict = {}  # a small constant's (dtype, shape, bytes) -> its CSE key
        self.scope_graphs: dict = {}  # id(scope) -> its graph
        self.declared: dict = {}  # id(scope) -> names its graph's nodes output (forward references)
        if len(proto.functions):
            raise MayChange("may change: the model has functions (not pre-checked)")
        self.walk(proto.graph, [], table)

    def each(self, op_type: str):
        """Every default-domain node of ``op_type`` in every graph: (its :class:`GraphIndex`, node,
        input defs, output defs)."""
        for gi in self.graphs:
            for node, ins, outs in gi.by_op.get(op_type, ()):
                yield gi, node, ins, outs

    # ------------------------------------------------------------------ the walk

    def walk(self, graph, outer: list, table=None) -> None:
        """Definitions and uses of every value of ``graph`` (subgraphs entered at their node,
        seeing what is defined before it, as onnx-ir's deserialisation does), the facts that
        base.Facts may know, and the nodes by op type.  ``table``: ``graph``'s
        ``graphs.table.NodeTable``, whose columns are read instead of the nodes' fields."""
        if len(graph.sparse_initializer):
            raise MayChange(f"may change: graph {graph.name!r} has sparse initializers (not pre-checked)")
        scope: dict = {}
        get = scope.get
        chain = [scope, *outer]
        gid = id(graph)
        self.scope_graphs[id(scope)] = graph
        for vi in graph.input:
            if vi.name in scope:
                raise MayChange(f"may change: input {vi.name!r} is listed twice in graph {graph.name!r}")
            scope[vi.name] = Def("input", gid, tensor=vi)
        for t in graph.initializer:
            d = get(t.name)
            if d is None:
                scope[t.name] = Def("init", gid, tensor=t)
            elif d.kind == "input":  # also an input: an input with a default (never a constant)
                d.kind = "input+init"
            else:
                raise MayChange(f"may change: initializer {t.name!r} is defined twice in graph {graph.name!r}")
        nodes: list = []
        by_op: dict = {}
        facts: list = []
        bad_io: list = []
        add_node, group_of, fact, default = nodes.append, by_op.get, self.fact, DEFAULT_DOMAIN
        if table is None:  # (each field read once, as a table reads them)
            table = NodeTable(graph)
        holders = set(table.holders)
        lookup, define, new_def = self.lookup, self.define, Def
        # (no value of this graph is named "": each input its own definition or None, read in C
        # first; a name of an outer scope, not yet defined or empty takes the lookup)
        unnamed = "" in scope
        for k, (node, input_names, outputs, domain, op) in enumerate(
                zip(graph.node, table.inputs, table.outputs, table.domains, table.ops)):
            ins = list(map(get, input_names))
            if unnamed or None in ins:
                ins = [(get(name) or lookup(chain, name, node)) if name else None for name in input_names]
            for d in ins:
                if d is not None:
                    d.uses += 1
            if ins and ins[-1] is None:
                bad_io.append((node, "trailing empty inputs"))
            if k in holders:  # (only subgraphs are read of a node's attributes here)
                for a in node.attribute:
                    if a.type == _GRAPH:
                        self.walk(a.g, chain)
                    elif a.type == _GRAPHS:
                        for g in a.graphs:
                            self.walk(g, chain)
            if len(outputs) == 1:  # the common case, without the loop
                name = outputs[0]
                out = new_def("node", gid, node, ins)
                outs = [out]
                if name and name not in scope:
                    scope[name] = out
                else:
                    define(scope, outs, outputs, node, graph, bad_io)
            else:
                outs = [new_def("node", gid, node, ins) for _ in outputs]
                define(scope, outs, outputs, node, graph, bad_io)
            entry = (node, ins, outs)
            add_node(entry)
            if domain in default and outs:
                if op == "Constant":
                    outs[0].key = None  # a constant: compared by value in CSE keys
                    if len(outs) == 1 and fact(outs[0], op):
                        outs[0].fact = True
                elif op in _FACT_OPS and len(outs) == 1 and fact(outs[0], op):
                    outs[0].fact = True
                    facts.append(entry)
                group = group_of(op)
                if group is None:
                    by_op[op] = [entry]
                else:
                    group.append(entry)
        for vi in graph.output:  # onnx-ir looks graph outputs up in their own graph only
            d = get(vi.name)
            if d is None:
                raise MayChange(f"may change: graph output {vi.name!r} of {graph.name!r} is not defined there")
            d.out_any = True
        self.graphs.append(GraphIndex(graph, scope, nodes, by_op, facts, bad_io, table.ops, table.domains))

    @staticmethod
    def define(scope, outs, names, node, graph, bad_io) -> None:
        for d, name in zip(outs, names):
            if name in scope:
                raise MayChange(f"may change: {name!r} is defined twice in graph {graph.name!r}")
            if name:
                scope[name] = d
        if not outs or not names[-1]:
            bad_io.append((node, "no outputs or trailing empty ones"))

    def lookup(self, chain, name, node):
        """``name`` looked up from the innermost scope out, as onnx-ir does -- which declares
        every node output of a graph before reading its nodes: a name some scope defines later
        (a forward reference, possibly shadowing an outer value) is left to the passes."""
        for s in chain:
            d = s.get(name)
            if d is not None:
                return d
            declared = self.declared.get(id(s))
            if declared is None:
                graph = self.scope_graphs[id(s)]
                declared = self.declared[id(s)] = {o for n in graph.node for o in n.output}
            if name in declared:
                break
        raise MayChange(f"may change: {where(node)} reads {name!r} before it is defined")

    # ------------------------------------------------------------------ constants

    def const(self, d):
        """A constant's description as cleanup.const_array reads it: ("tensor", TensorProto),
        ("int", i), ("ints", [..]) or None (not a constant)."""
        if d is None:
            return None
        if d.kind == "init":
            return "tensor", d.tensor
        if d.kind != "node" or d.node.op_type != "Constant" or d.node.domain not in DEFAULT_DOMAIN:
            return None
        attrs = {a.name: a for a in d.node.attribute}
        value = attrs.get("value")
        if value is not None and value.type == _TENSOR:
            return "tensor", value.t
        if "value_int" in attrs:
            return "int", attrs["value_int"].i
        if "value_ints" in attrs:
            return "ints", list(attrs["value_ints"].ints)
        return None

    def array(self, d):
        """A small constant's array (<= SMALL elements; ``value_ints`` any length), :data:`EXOTIC`
        (a type numpy reads differently in onnx and onnx-ir), else None."""
        hit = self.arrays.get(id(d))
        if hit is None:
            hit = self.arrays[id(d)] = (d, self._array(d))
        return hit[1]

    def _array(self, d):
        c = self.const(d)
        if c is None:
            return None
        if c[0] == "int":
            return np.array(c[1], dtype=np.int64)
        if c[0] == "ints":
            return np.array(c[1], dtype=np.int64)
        t = c[1]
        if numel(t) > SMALL:
            return None
        return tensor_array(t)

    def ints(self, d) -> list[int] | None:
        """cleanup._int_const: a small integer constant's elements."""
        arr = self.array(d)
        if arr is None or arr is EXOTIC:
            if arr is EXOTIC and self.maybe_int(d):
                raise MayChange("may change: an integer constant of a packed type (not pre-checked)")
            return None
        if arr.dtype.kind not in "iu":
            return None
        return [int(v) for v in arr.reshape(-1)]

    def maybe_int(self, d) -> bool:
        """``d`` is a constant whose type may be an integer type."""
        c = self.const(d)
        return c is not None and (c[0] != "tensor" or c[1].data_type not in NOT_INT)

    def value_key(self, d):
        """cleanup._value_key: small constants by value, other values by identity."""
        if d is None:
            return None
        if d.key is None:
            value = _raw_key(d.tensor) if d.kind == "init" else None
            if value is not None:
                d.key = self.const_keys.setdefault(value, -1 - len(self.const_keys))
                return d.key
            arr = self.array(d)
            if arr is None:
                d.key = id(d)  # every definition lives as long as the index: ids stay unique
            else:  # equal constants share one negative number (ids are positive)
                value = "exotic" if arr is EXOTIC else (str(arr.dtype), arr.shape, arr.tobytes())
                d.key = self.const_keys.setdefault(value, -1 - len(self.const_keys))
        return d.key

    # ------------------------------------------------------------------ base.Facts, abstractly

    def fact(self, out, op: str) -> bool:
        """Whether base.Facts may know a fact about ``out``, the only output of a node in the
        default domain whose op type is ``op``.  Inputs' facts were set when they were defined
        (the walk is in order)."""
        node, ins = out.node, out.ins
        if op in _FIRST_INPUT_OPS:  # the most common, first
            return not ins or self.has_fact(ins[0]) and (op != "Slice" or len(ins) >= 3)
        if op == "Constant":
            return self._small_int_vector(out, self.array(out))
        if op in ("Shape", "Size"):
            return True
        if op == "Cast":
            to = next((a.i for a in node.attribute if a.name == "to"), None)
            return not ins or self.has_fact(ins[0]) and (to is None or to not in NOT_INT)
        if op == "Gather":
            return len(ins) < 2 or (self.has_fact(ins[0]) and self.maybe_int(ins[1]))
        if op in ("Concat", "Add", "Sub", "Mul", "Neg"):
            for d in ins:  # (a loop: the common case, a first input with no fact, ends at once)
                if not self.has_fact(d):
                    return False
            return bool(ins)
        return False

    def has_fact(self, d) -> bool:
        """base.Facts may know integer elements of ``d``."""
        if d is None:
            return False
        if d.kind == "init":
            return self._small_int_vector(d, self.array(d))
        return d.fact  # graph inputs: False; node outputs: set at definition

    def _small_int_vector(self, d, arr) -> bool:
        if arr is EXOTIC:
            return self.maybe_int(d)
        return arr is not None and arr.dtype.kind in "iu" and arr.ndim <= 1

    def surely_symbolic(self, node, ins) -> bool:
        """A Shape/Size of a graph input whose declared shape has a symbolic dim where it reads:
        its fact is never all integers (Shape) or is None (Size), whatever inference finds."""
        d = ins[0] if ins else None
        if d is None or d.kind != "input" or d.out_any or not d.tensor.type.HasField("tensor_type"):
            return False  # (a graph output's declared shape replaces the input's in onnx-ir)
        tt = d.tensor.type.tensor_type
        if not tt.HasField("shape"):
            return node.op_type in ("Shape", "Size")  # unknown rank: no fact at all
        dims = list(tt.shape.dim)
        if node.op_type == "Shape":
            attrs = {a.name: a.i for a in node.attribute}
            dims = dims[slice(attrs.get("start"), attrs.get("end"))]
        return any(not dim.HasField("dim_value") for dim in dims)


#: Ops whose output's fact is their first input's (:meth:`ProtoIndex.fact`).
_FIRST_INPUT_OPS = frozenset({"Identity", "Squeeze", "Unsqueeze", "Slice"})
#: Ops base.Facts reads through (``Constant`` aside).
_FACT_OPS = frozenset({"Shape", "Size", "Cast", "Identity", "Squeeze", "Unsqueeze", "Concat", "Gather", "Slice",
                       "Add", "Sub", "Mul", "Neg"})

#: The array of a small constant of a type numpy reads differently in onnx and onnx-ir (bfloat16,
#: float8, int4, strings): compared as equal to any other such constant.
EXOTIC = object()


#: data_type -> (the dtype's name, its item size) of the plain types numpy reads from raw bytes as stored.
_RAW = {1: ("float32", 4), 2: ("uint8", 1), 3: ("int8", 1), 4: ("uint16", 2), 5: ("int16", 2), 6: ("int32", 4),
        7: ("int64", 8), 9: ("bool", 1), 10: ("float16", 2), 11: ("float64", 8), 12: ("uint32", 4), 13: ("uint64", 8)}
_LITTLE = sys.byteorder == "little"


def _raw_key(tensor):
    """The CSE value key :meth:`ProtoIndex.value_key` gives a small initializer stored as raw bytes
    of a plain type (``(str(dtype), shape, bytes)`` of :func:`tensor_array`'s array: those very
    bytes on a little-endian machine), read without making the array; None when another case
    (external data, other fields, a length that does not match): the array decides then."""
    plain = _RAW.get(tensor.data_type) if _LITTLE else None
    if plain is None or not tensor.HasField("raw_data") or tensor.data_location == 1 or len(tensor.external_data) \
            or tensor.HasField("segment"):
        return None
    dims = tuple(tensor.dims[:])  # (a slice reads the container at once)
    n = math.prod(dims)
    if n > SMALL:
        return None
    raw = tensor.raw_data
    return (plain[0], dims, raw) if len(raw) == n * plain[1] else None


def tensor_array(tensor):
    """A small TensorProto's array as cleanup reads it, or :data:`EXOTIC`; raises
    :class:`MayChange` for external data and tensors onnx cannot read."""
    from onnx import numpy_helper
    if tensor.data_location == 1 or len(tensor.external_data):
        raise MayChange(f"may change: small constant {tensor.name!r} is stored as external data (not pre-checked)")
    if tensor.data_type not in _PLAIN:
        return EXOTIC
    try:
        return numpy_helper.to_array(tensor)
    except Exception as exc:  # a constant onnx cannot read: the passes decide
        raise MayChange(f"may change: constant {tensor.name!r} is unreadable ({type(exc).__name__})") from None
