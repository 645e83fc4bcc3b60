"""Structural validation of a ModelProto before any native code sees it.

onnx's C++ shape inference and checker, onnxruntime and onnx-ir's reader assume a
well-formed model: a negative declared dim aborts the process inside shape inference,
a string that is not UTF-8 (protobuf's Python parser hands it over as ``bytes``) or a
tensor whose data does not match its dims raises deep inside them.  ``validate_model``
walks the whole model -- main graph, every subgraph, every function -- in Python and
raises a :class:`ModelError` naming the file, the node and the field for the first
problem found:

* not a model: an empty file, or another message (a GraphProto ...) parsed as one;
* strings that are not valid UTF-8 (any string field, anywhere);
* declared dims < 0 (value infos, tensors), declared shapes of more than 2**36 elements, main
  graph inputs without an element type;
* tensor data inconsistent with dims and dtype (raw_data checked up to 64 MiB per tensor),
  data in another type's field, unknown dtypes, tensors of absurd size;
* external data records without a location, with a NUL, a negative or non-integer
  offset/length, a length that does not match the dims (the file side is io/files.py's);
* a graph that is not a DAG, or uses a name no one defines (outer scopes count);
* graph inputs/outputs that are not tensors (sequence, map, optional: not supported);
* attributes without a name or a type, or given twice on one node; a Constant without exactly
  one value attribute; an If without its then_branch and else_branch graphs, a Loop or Scan
  without its body (a misspelled name: the branch would be missing at run time);
* nodes of the ONNX domain (StridedSlice aside) that no runtime loads: an op the model's opset
  does not have, input or output counts its schema does not allow, an attribute it does not
  know, a required one missing (:meth:`_Validator.schema`);
* names given twice: graph inputs, initializers, function inputs, opset imports of one domain,
  functions (domain, name); node outputs that shadow a name of an outer scope (SSA);
* model-local functions that call themselves, directly or through others;
* tensors with data in both raw_data and a typed field;
* StridedSlice with other than 3 or 4 inputs or other than one output (index tensors of absurd
  size are refused by the tensor checks above, from their dims); a raw node of the slice-update
  family tf2onnx leaves in the default domain (:data:`RAW_UPDATE_INPUTS`, rewritten by
  rewrite/updates.py) with another input count or other than one output.

Two stages.  :class:`_Fast` first tries to prove, cheaply, that the model passes every check:
a second parse of its bytes in C through a view of onnx.proto that checks UTF-8 as it
parses, each distinct attribute list and value type checked once (by the walk's own methods),
names, SSA and order as set operations over the nodes in their order.  Only when that proof
fails -- a problem, or something it leaves out (training_info, nodes out of order) -- does :class:`_Validator` walk
every field except tensor payloads in Python, and it
alone words the refusal; so verdicts and messages are the walk's (tests/test_validate_fast.py).
Linear in nodes and tensors, the proof much cheaper than the walk.
"""

from __future__ import annotations

from math import prod
from operator import attrgetter
from typing import Any, NoReturn

from ..errors import ModelError
from ..graphs.table import NodeTable, holds_subgraph

#: bits per element of each TensorProto data type (STRING: variable; sub-byte types packed)
_BITS = {1: 32, 2: 8, 3: 8, 4: 16, 5: 16, 6: 32, 7: 64, 9: 8, 10: 16, 11: 64, 12: 32, 13: 64,
         14: 64, 15: 128, 16: 16, 17: 8, 18: 8, 19: 8, 20: 8, 21: 4, 22: 4, 23: 4, 24: 8,
         25: 2, 26: 2, 27: 6, 28: 6}
_STRING = 8
_GRAPH = 5  # AttributeProto.GRAPH
#: the graph attributes each control-flow op of the ONNX domain needs
_BODIES = {"If": ("then_branch", "else_branch"), "Loop": ("body",), "Scan": ("body",)}
#: the typed field holding each data type's values, and values per element
_TYPED = {1: ("float_data", 1), 6: ("int32_data", 1), 7: ("int64_data", 1), 11: ("double_data", 1),
          12: ("uint64_data", 1), 13: ("uint64_data", 1), 14: ("float_data", 2), 15: ("double_data", 2),
          8: ("string_data", 1)}
for _t in (2, 3, 4, 5, 9, 10, 16, 17, 18, 19, 20, 24):
    _TYPED[_t] = ("int32_data", 1)
#: the raw nodes tf2onnx leaves in the default domain that the package rewrites itself
#: (rewrite/updates.py ``SEAMS``, held to the same op types by tests/io/test_validate_fast.py),
#: by their input count: no opset defines them, so no schema is asked
RAW_UPDATE_INPUTS = {"XlaDynamicUpdateSlice": 3, "TFL_DYNAMIC_UPDATE_SLICE": 3, "XlaDynamicSlice": 3,
                     "TensorStridedSliceUpdate": 5, "StridedSliceGrad": 5, "TFL_GELU": 1, "Erfc": 1}
_DATA_FIELDS = ("raw_data", "float_data", "int32_data", "string_data", "int64_data", "double_data",
                "uint64_data")
#: a tensor's type, location, dims and typed data fields, read in one call
_TENSOR_FIELDS = attrgetter("data_type", "data_location", "dims", *_DATA_FIELDS[1:])
#: :data:`_TYPED` with each field's position among the typed data fields (``_TENSOR_FIELDS[3:]``)
_TYPED_AT = {dt: (name, per, _DATA_FIELDS.index(name) - 1) for dt, (name, per) in _TYPED.items()}
_PACKED_AT = ("int32_data", None, _DATA_FIELDS.index("int32_data") - 1)  # sub-byte types: no count
_KNOWN_TYPES = frozenset([*_BITS, _STRING])
#: a tensor's name, type, location and dims, read in one call
_TENSOR_HEAD = attrgetter("name", "data_type", "data_location", "dims")

#: elements above which a tensor is refused without reading it (2**36 bytes = 64 GiB at 1 byte each)
MAX_TENSOR_ELEMENTS = 2 ** 36
#: inline raw_data above this size (64 MiB) is not checked: protobuf's Python API copies it to
#: take its length; the checker still sees it
RAW_CHECK_BYTES = 1 << 26
#: main graphs with at least this many initializers have them checked in bulk (:meth:`_Fast.bulk_tensors`)
BULK_TENSORS = 256
#: models up to this size (64 MiB) are parsed a second time for the fast proof (a parse copies
#: inline weights too); larger ones, mostly weights, get the full walk, whose cost is per node
FAST_BYTES = 1 << 26


def validate_model(proto, path=None, *, data: bytes | None = None, tables: list | None = None) -> bool:
    """Raise :class:`ModelError` (naming ``path``, node and field) if ``proto`` is unusable.

    ``data``: the bytes ``proto`` was parsed from (binary protobuf), if at hand; else the
    proto is serialized once.  Returns whether the model may hold external tensors (False:
    proven to hold none, so no walk over its tensors needs to look for them).  ``tables``: a
    list that gets the main graph's NodeTable (graphs/table.py) when the fast proof read it
    (it reads those fields of every node: a caller spares reading them again)."""
    v = _Validator(path)
    fast = _Fast(v)
    try:
        proven = fast.model(proto, data)
    except Exception:  # whatever went wrong, the full walk decides and words it
        proven = False
    if proven:
        if tables is not None and fast.table is not None:
            tables.append(fast.table)
        return fast.external
    v.model(proto)  # something is off, or a part the fast proof leaves out: the full walk, its messages
    return True


def validate_bytes(data: bytes, path=None):
    """Parse ``data`` as a ModelProto and validate it; returns the proto."""
    import onnx
    if not data:
        raise ModelError("empty file, not an ONNX model", path=path)
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception:
        raise ModelError("not an ONNX model (protobuf cannot parse it)", path=path) from None
    validate_model(proto, path, data=data)
    return proto


class _Validator:
    def __init__(self, path):
        self.path = None if path is None else str(path)
        #: the ONNX opset of the nodes being checked (main graph, then each function's): set
        #: by :meth:`opsets`, None when the default domain is not imported
        self.onnx_version: int | None = None

    def fail(self, reason: str, node: str | None = None) -> NoReturn:
        raise ModelError(reason, path=self.path, node=node)

    # ------------------------------------------------------------------ model
    def model(self, proto) -> None:
        import onnx
        if not isinstance(proto, onnx.ModelProto):
            self.fail(f"not an ONNX model (got {type(proto).__name__})")
        if proto.ByteSize() == 0:
            self.fail("empty file, not an ONNX model")
        if not proto.HasField("graph"):
            self.fail("not an ONNX model: no graph (a GraphProto or another message saved as .onnx?)")
        if proto.ir_version <= 0 or not len(proto.opset_import):
            self.fail("not an ONNX model: no ir_version or opset_import (a GraphProto or another message "
                      "saved as .onnx?)")
        _check_strings(proto, self)
        self.opsets(proto.opset_import, "opset_import")
        self.graph(proto.graph, "graph", outer=frozenset(), main=True)
        if not len(proto.graph.output):  # nothing to compute: no runtime loads it, no check means anything
            self.fail("the graph has no outputs (graph.output is empty): nothing to compute")
        seen = set()
        for f in proto.functions:
            where = f"function {f.domain}::{f.name}"
            key = (f.domain, f.name, getattr(f, "overload", ""))
            if key in seen:
                self.fail(f"{where} is defined twice")
            seen.add(key)
            self.opsets(f.opset_import, f"{where}: opset_import")
            self.unique(f.input, f"{where}: input")
            self.nodes(f.node, where, set(f.input), outputs=f.output, local=set(f.input))
        self.no_recursion(proto.functions)

    def opsets(self, imports, where: str) -> None:
        domains = set()
        self.onnx_version = None
        for imp in imports:
            domain = "" if imp.domain == "ai.onnx" else imp.domain
            if domain in domains:
                self.fail(f"{where}: domain {imp.domain!r} is imported twice (which version?)")
            domains.add(domain)
            if imp.version < 1 and domain == "":
                self.fail(f"{where}: version {imp.version} of the default domain is not valid")
            if domain == "":
                self.onnx_version = imp.version

    def schema(self, n, name: str) -> None:
        """A node of the ONNX domain (StridedSlice and the raw slice updates aside: ours to read) is an operator of the
        model's opset, with an input and output count it allows, only attributes it knows and
        every one it requires -- else no runtime loads the model (onnxruntime: INVALID_GRAPH)."""
        import onnx
        if n.domain not in ("", "ai.onnx") or n.op_type == "StridedSlice" or n.op_type in RAW_UPDATE_INPUTS \
                or self.onnx_version is None \
                or self.onnx_version > onnx.defs.onnx_opset_version():  # a newer opset: its schemas unknown here
            return
        try:
            sch = onnx.defs.get_schema(n.op_type, self.onnx_version, "")
        except onnx.defs.SchemaError:
            self.fail(f"op_type: {n.op_type!r} is no ONNX operator of opset {self.onnx_version}", node=name)
        if sch.deprecated:
            return  # the checker's own message is clearer there (and no runtime has it)
        for what, count, low, high in (("inputs", len(n.input), sch.min_input, sch.max_input),
                                       ("outputs", len(n.output), sch.min_output, sch.max_output)):
            if not low <= count <= high:
                span = f"{low}" if low == high else f"{low} to {high}"
                self.fail(f"{what}: {n.op_type} takes {span} {what}, got {count}", node=name)
        known = sch.attributes
        for a in n.attribute:
            if a.name not in known:
                self.fail(f"attribute {_q(a.name)}: {n.op_type} has no such attribute", node=name)
        given = {a.name for a in n.attribute}
        for key, attr in known.items():
            if attr.required and key not in given:
                self.fail(f"attribute {_q(key)}: {n.op_type} requires it", node=name)

    def unique(self, names, where: str) -> None:
        seen = set()
        for name in names:
            if name in seen:
                self.fail(f"{where} {_q(name)} is given twice")
            seen.add(name)

    def no_recursion(self, functions) -> None:
        """Model-local functions must not call themselves, directly or through others
        (inlining would never end)."""
        calls = {}
        for f in functions:
            key = (f.domain, f.name)
            calls[key] = {(n.domain, n.op_type) for n in _all_nodes(f.node)}
        state: dict = {}
        for start in calls:
            stack = [(start, iter(sorted(calls[start] & calls.keys())))]
            state[start] = 1
            while stack:
                key, it = stack[-1]
                nxt = next(it, None)
                if nxt is None:
                    state[key] = 2
                    stack.pop()
                elif state.get(nxt) == 1:
                    self.fail(f"function {nxt[0]}::{nxt[1]} calls itself (recursion)")
                elif nxt not in state:
                    state[nxt] = 1
                    stack.append((nxt, iter(sorted(calls[nxt] & calls.keys()))))

    # ------------------------------------------------------------------ graphs
    def graph(self, g, where: str, outer: frozenset, main: bool = False) -> None:
        for kind, values in (("input", g.input), ("output", g.output)):
            for vi in values:
                self.graph_value(vi, where, kind, required=main and kind == "input")
        self.unique([vi.name for vi in g.input], f"{where}: input")
        self.unique([t.name for t in g.initializer] + [st.values.name for st in g.sparse_initializer],
                    f"{where}: initializer")
        for vi in g.value_info:
            self.type(vi.type, f"{where}: value_info {_q(vi.name)}", top=True)
        for t in g.initializer:
            self.tensor(t, f"{where}: initializer {_q(t.name)}")
        for st in g.sparse_initializer:
            self.tensor(st.values, f"{where}: sparse initializer {_q(st.values.name)}")
            self.tensor(st.indices, f"{where}: sparse initializer {_q(st.values.name)} indices")
        local = {vi.name for vi in g.input} | {t.name for t in g.initializer} \
            | {st.values.name for st in g.sparse_initializer}
        self.nodes(g.node, where, set(outer) | local, outputs=[vi.name for vi in g.output], local=local)

    def graph_value(self, vi, where: str, kind: str, required: bool) -> None:
        field = f"{where}: {kind} {_q(vi.name)}"
        if not vi.HasField("type"):
            if required:
                self.fail(f"{field} has no type")
            return
        which = vi.type.WhichOneof("value")
        if which is None and not required:
            return
        if which != "tensor_type":
            self.fail(f"{field} is a {which or 'typeless'} value: not supported (graph inputs and outputs "
                      "must be tensors)")
        if required and not vi.type.tensor_type.elem_type:
            self.fail(f"{field} has no element type (UNDEFINED)")
        self.type(vi.type, field, top=True)

    def type(self, tp, field: str, top: bool = False) -> None:
        which = tp.WhichOneof("value")
        if which == "tensor_type" or which == "sparse_tensor_type":
            tt = getattr(tp, which)
            if tt.elem_type and tt.elem_type not in _BITS and tt.elem_type != _STRING:
                self.fail(f"{field}: unknown element type {tt.elem_type}")
            if tt.HasField("shape"):
                n = 1
                for k, d in enumerate(tt.shape.dim):
                    if d.HasField("dim_value"):
                        if d.dim_value < 0:
                            self.fail(f"{field}: dim {k} is {d.dim_value} (dims must be >= 0)")
                        n *= d.dim_value
                if n > MAX_TENSOR_ELEMENTS:
                    dims = [d.dim_value if d.HasField("dim_value") else d.dim_param or "?" for d in tt.shape.dim]
                    self.fail(f"{field}: dims {dims} make {n} elements or more: too large to be a usable tensor")
        elif which == "sequence_type":
            self.type(tp.sequence_type.elem_type, field)
        elif which == "optional_type":
            self.type(tp.optional_type.elem_type, field)
        elif which == "map_type":
            self.type(tp.map_type.value_type, field)

    def nodes(self, nodes, where: str, defined: set, outputs, local: set) -> None:
        """Each node's attributes and tensors; then the graph is a DAG over known names.
        ``defined``: names readable before any node (``local``: those of this graph)."""
        produced: dict[str, int] = {}
        for k, n in enumerate(nodes):
            for o in n.output:
                if not o:
                    continue
                if o in produced or o in local or o in defined:  # defined: outer scopes too
                    self.fail(f"{where}: value {_q(o)} is defined twice (SSA)", node=_node_name(n, k))
                produced[o] = k
        scope = frozenset(defined) | frozenset(produced)  # what a subgraph may read
        for k, n in enumerate(nodes):
            self.node(n, where, _node_name(n, k), scope)
        needs = [_needs(n) for n in nodes]
        self.schedule(nodes, needs, produced, defined, where)
        for o in outputs:
            if o and o not in produced and o not in defined:
                self.fail(f"{where}: output {_q(o)} is not produced by any node")

    def schedule(self, nodes, needs, produced, defined, where) -> None:
        """Kahn's algorithm: every node runs once all names it reads exist; else a cycle or an
        undefined name."""
        waiting: dict = {}
        missing_count = []
        ready = []
        for k, need in enumerate(needs):
            pending = {v for v in need if v not in defined}
            for v in pending:
                if v not in produced:
                    self.fail(f"{where}: input {_q(v)} is not defined (no graph input, initializer or "
                              "node output of that name)", node=_node_name(nodes[k], k))
                waiting.setdefault(v, []).append(k)
            missing_count.append(len(pending))
            if not pending:
                ready.append(k)
        done = 0
        while ready:
            k = ready.pop()
            done += 1
            for o in nodes[k].output:
                for j in waiting.pop(o, ()):
                    missing_count[j] -= 1
                    if missing_count[j] == 0:
                        ready.append(j)
        if done != len(nodes):
            k = next(j for j, c in enumerate(missing_count) if c > 0)
            self.fail(f"{where}: the graph has a cycle (not a DAG)", node=_node_name(nodes[k], k))

    def node(self, n, where: str, name: str, scope: frozenset) -> None:
        if n.op_type == "StridedSlice":
            if len(n.input) not in (3, 4):
                self.fail(f"inputs: StridedSlice takes 3 or 4 inputs (data, begin, end[, strides]), "
                          f"got {len(n.input)}", node=name)
            if not len(n.output) or not n.output[0]:
                self.fail("outputs: StridedSlice has no output", node=name)
            if len(n.output) > 1:
                self.fail(f"outputs: StridedSlice has one output, got {len(n.output)}", node=name)
        if n.op_type in RAW_UPDATE_INPUTS and n.domain in ("", "ai.onnx"):
            count = RAW_UPDATE_INPUTS[n.op_type]
            if len(n.input) != count or not all(n.input):
                self.fail(f"inputs: {n.op_type} takes {count} input(s), got {list(n.input)}", node=name)
            if len(n.output) != 1 or not n.output[0]:
                self.fail(f"outputs: {n.op_type} has one output, got {list(n.output)}", node=name)
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and len(n.attribute) != 1:
            self.fail(f"attributes: Constant takes exactly one value attribute, got {len(n.attribute)}", node=name)
        if n.op_type in _BODIES and n.domain in ("", "ai.onnx"):
            graphs = {a.name for a in n.attribute if a.type == _GRAPH}
            for body in _BODIES[n.op_type]:
                if body not in graphs:
                    got = ", ".join(_q(a.name) for a in n.attribute) or "none"
                    self.fail(f"attribute {_q(body)}: {n.op_type} needs its {body} graph (attributes: {got})",
                              node=name)
        self.schema(n, name)
        names = set()
        for a in n.attribute:
            field = f"attribute {_q(a.name)}"
            if not a.name:
                self.fail("attribute without a name", node=name)
            if a.name in names:
                self.fail(f"{field} is given twice (which value?)", node=name)
            names.add(a.name)
            if a.type == 0 and not a.ref_attr_name:
                self.fail(f"{field} has no type (UNDEFINED)", node=name)
            if a.HasField("t"):
                self.tensor(a.t, field + (f" (tensor {_q(a.t.name)})" if a.t.name else ""), node=name)
            for t in a.tensors:
                self.tensor(t, field + (f" (tensor {_q(t.name)})" if t.name else ""), node=name)
            if a.HasField("sparse_tensor"):
                self.tensor(a.sparse_tensor.values, field, node=name)
            if a.HasField("tp"):
                self.type(a.tp, f"node {_q(name)}: {field}")
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                self.graph(g, f"{where} > {n.op_type} {_q(name)}.{a.name}", outer=scope)

    # ------------------------------------------------------------------ tensors
    def tensor(self, t, field: str, node: str | None = None) -> int | None:
        """Check a tensor's dims, type and data against each other; returns its data type, or
        None when its data is external (checked by :meth:`external`)."""
        dt, location, dims, *data = _TENSOR_FIELDS(t)  # (one read of each field: many small tensors)
        rank = len(dims)
        n = dims[0] if rank == 1 else prod(dims) if rank else 1  # (indexing a protobuf container costs less)
        if n < 0 or rank > 1 and min(dims) < 0:
            k = next(k for k, d in enumerate(dims) if d < 0)
            self.fail(f"{field}: dim {k} is {dims[k]} (dims must be >= 0)", node=node)
        if n > MAX_TENSOR_ELEMENTS:
            self.fail(f"{field}: {n} elements (dims {list(dims)}): too large to be a usable tensor", node=node)
        if dt not in _KNOWN_TYPES:
            self.fail(f"{field}: unknown data_type {dt}", node=node)
        if location == 1:  # EXTERNAL
            self.external(t, field, n, node)
            return None
        if t.HasField("raw_data"):
            if dt == _STRING:
                self.fail(f"{field}: a string tensor cannot use raw_data", node=node)
            counts = list(map(len, data))
            if any(counts):
                typed = _DATA_FIELDS[1 + next(k for k, c in enumerate(counts) if c)]
                self.fail(f"{field}: data in both raw_data and {typed} (which one?)", node=node)
            want = (n * _BITS[dt] + 7) // 8
            if want > RAW_CHECK_BYTES:
                return dt  # reading the length copies the bytes: left to the checker
            got = len(t.raw_data)
            if got != want:
                self.fail(f"{field}: raw_data has {got} bytes, dims {list(dims)} of data_type {dt} need {want}",
                          node=node)
            return dt
        name, per, at = _TYPED_AT.get(dt, _PACKED_AT)  # sub-byte types: packed in int32_data
        got = len(data[at])
        if sum(map(len, data)) != got:
            other = _DATA_FIELDS[1 + next(k for k, values in enumerate(data) if len(values) and k != at)]
            self.fail(f"{field}: data of type {dt} cannot be in {other} (expected {name})", node=node)
        if per is None:
            return dt
        if got != n * per:
            self.fail(f"{field}: {name} has {got} values, dims {list(dims)} need {n * per}", node=node)
        return dt

    def external(self, t, field: str, n: int, node) -> None:
        entries = {e.key: e.value for e in t.external_data}
        location = entries.get("location")
        if not location:
            self.fail(f"{field}: external data without a location", node=node)
        if "\x00" in location:
            self.fail(f"{field}: external data location contains a NUL character", node=node)
        for key in ("offset", "length"):
            if key in entries:
                v = entries[key]
                if not (v.isascii() and v.isdigit()):  # "²".isdigit(), but int("²") fails
                    self.fail(f"{field}: external data {key} {v!r} is not a non-negative integer", node=node)
        if "length" in entries and t.data_type != _STRING:
            want = (n * _BITS[t.data_type] + 7) // 8
            if int(entries["length"]) != want:
                self.fail(f"{field}: external data length {entries['length']} does not match dims "
                          f"{list(t.dims)} of data_type {t.data_type} ({want} bytes)", node=node)


class _Fast:
    """A proof that :class:`_Validator` accepts a model, at a fraction of its cost; when the
    proof fails (a real problem, or only something it does not cover), the caller runs the
    validator itself, which finds the problem and words the message.  So every verdict and
    every message is the validator's: this class only ever says "surely fine" or "look".

    It reads a second parse of the model's bytes, in C, through a view of onnx.proto
    (:func:`_view_class`) that checks every string field for UTF-8 while parsing and hands
    over each node's attributes and each value's type as bytes.  Equal bytes mean equal
    messages, so each distinct attribute list and type is checked once, by the validator's
    own methods on a real onnx message; per node there remain the SSA and schedule checks
    (as set operations, in the nodes' order: a graph out of order goes to the full walk).
    Left to the full walk: training_info, nodes out of order."""

    def __init__(self, validator: _Validator):
        self.v = validator
        #: may the model hold external tensors (False once proven not)
        self.external = False
        self.node_verdicts: dict = {}
        self.value_verdicts: dict = {}
        #: the node verdicts' keys of nodes holding a subgraph by an attribute's declared type
        self.holder_keys: set = set()
        #: the main graph's NodeTable, read by the proof (None: not proven)
        self.table: NodeTable | None = None
        self.data = b""  # the model's bytes (of the proof's parse)

    def model(self, proto, data) -> bool:
        import onnx
        from google.protobuf.message import DecodeError
        if not isinstance(proto, onnx.ModelProto) or not proto.HasField("graph") or proto.ir_version <= 0 \
                or not len(proto.opset_import) or len(proto.training_info) or not len(proto.graph.output):
            return False
        if (len(data) if data is not None else proto.ByteSize()) > FAST_BYTES:
            return False  # the view would be a second copy of its weights in memory
        try:
            self.v.opsets(proto.opset_import, "opset_import")
            self.data = proto.SerializeToString() if data is None else data
            view = _view_class().FromString(self.data)
        except (ModelError, DecodeError):
            return False
        return self.graph(view.graph, frozenset(), main=True) and self.functions(view.functions, proto.functions)

    def functions(self, functions, real_functions) -> bool:
        """As :meth:`_Validator.model` checks them: unique, their opsets and inputs, their nodes,
        no recursion (that on the real protos: the view's attributes are bytes)."""
        keys = [(f.domain, f.name, f.overload) for f in functions]
        if len(set(keys)) != len(keys):
            return False
        import onnx
        for f in functions:
            if len(set(f.input)) != len(f.input) or not self.passes(self.v.opsets, f.opset_import, "") \
                    or not self.nodes(f.node, set(f.input), f.output):
                return False
            # value_info: only their strings are checked (in the view, types are bytes); the parts
            # of a type given twice parse as their merge
            if not all(_strings_valid(onnx.TypeProto.FromString(b"".join(types)))
                       for types in {tuple(vi.type) for vi in f.value_info}):
                return False
        return not len(functions) or self.passes(self.v.no_recursion, real_functions)

    def graph(self, g, outer, main: bool) -> bool:
        inputs = [vi.name for vi in g.input]
        names = self.bulk_tensors(g.initializer) if main else None  # (their names read with them)
        if names is None:
            if not self.tensors(g.initializer):
                return False
            names = [t.name for t in g.initializer]
        names += [st.values.name for st in g.sparse_initializer]
        if len(set(inputs)) != len(inputs) or len(set(names)) != len(names):
            return False
        if not (self.values(g.input, "input", main) and self.values(g.output, "output", False)
                and self.values(g.value_info, "value_info", False)
                and all(self.tensors((st.values, st.indices)) for st in g.sparse_initializer)):
            return False
        defined = set(outer)
        defined.update(inputs, names)
        return self.nodes(g.node, defined, [vi.name for vi in g.output], table=main)

    def values(self, infos, kind: str, required: bool) -> bool:
        """Graph inputs/outputs (``kind``) or value_info entries, once per distinct type bytes."""
        verdicts = self.value_verdicts
        for types, vi in {tuple(vi.type[:]): vi for vi in infos}.items():
            key = (types, kind, required)
            ok = verdicts.get(key)
            if ok is None:
                import onnx
                real = onnx.ValueInfoProto.FromString(vi.SerializeToString())
                if not _strings_valid(real):
                    ok = False
                elif kind == "value_info":
                    ok = self.passes(self.v.type, real.type, "", top=True)
                else:
                    ok = self.passes(self.v.graph_value, real, "", kind, required)
                verdicts[key] = ok
            if not ok:
                return False
        return True

    def tensors(self, tensors) -> bool:
        """Each tensor by the validator's own check; string data also for UTF-8 (bytes in the view)."""
        check = self.v.tensor
        try:
            for t in tensors:
                dt = check(t, "")
                if dt is None:
                    self.external = True
                elif dt == _STRING and not _utf8(t.string_data):
                    return False
        except ModelError:
            return False
        return True

    def bulk_tensors(self, tensors) -> list | None:
        """:meth:`tensors` of the main graph's initializers when there are many (at least
        :data:`BULK_TENSORS`), none external or of strings: their names when they pass (else
        None: :meth:`tensors` decides):
        per tensor only its data type, dims and the one data field its type uses (the check's
        reads of the other fields make most of its cost on small tensors); that no tensor has
        data in another field is proven for all at once by :func:`_field_totals` of the model's
        bytes: each typed field's values over all initializers, which the tensors' own fields
        account for exactly only if no other field holds any."""
        if len(tensors) < BULK_TENSORS:
            return None
        head, has, typed = _TENSOR_HEAD, type(tensors[0]).HasField, _TYPED_AT
        used = dict.fromkeys(_DATA_FIELDS[1:], 0)  # values found in the field each tensor's type uses
        names: list[str] = []
        add = names.append
        for t in tensors:
            name, dt, location, dims = head(t)
            add(name)
            rank = len(dims)
            n = dims[0] if rank == 1 else prod(dims) if rank else 1
            if n < 0 or rank > 1 and min(dims) < 0 or n > MAX_TENSOR_ELEMENTS or location == 1 or dt == _STRING \
                    or dt not in _KNOWN_TYPES:
                return None
            if has(t, "raw_data"):
                want = (n * _BITS[dt] + 7) // 8
                if want <= RAW_CHECK_BYTES and len(t.raw_data) != want:
                    return None
                continue
            field, per, _ = typed.get(dt, _PACKED_AT)
            got = len(getattr(t, field))
            if per is not None and got != n * per:
                return None
            used[field] += got
        return names if _field_totals(self.data) == used else None

    def nodes(self, nodes, defined: set, outputs, table: bool = False) -> bool:
        """The checks of :meth:`_Validator.nodes` for nodes in schedule order (``defined``:
        outer scopes and this graph's inputs and initializers; taken over).  The fields read
        are the graph's NodeTable (graphs/table.py): with ``table``, kept as :attr:`table` when
        the nodes pass (the main graph's: the rewrite reads these columns of the same nodes)."""
        verdicts, holder_keys = self.node_verdicts, self.holder_keys
        known, define, define_one, verdict_of = defined.issuperset, defined.update, defined.add, verdicts.get
        defined.add("")  # an empty input is no input, an empty output no output
        before, count = len(defined), 0
        subgraphs = []
        version = self.v.onnx_version
        ops: list = []
        domains: list = []
        node_inputs: list = []
        node_outputs: list = []
        holders: list = []
        for n in nodes:
            ins, outs, op, domain, attributes = _NODE_FIELDS(n)
            ins, outs = tuple(ins[:]), tuple(outs[:])  # (a slice reads a container at once)
            if not known(ins):
                return False
            key = (op, domain, len(ins), len(outs), version, tuple(attributes[:]))
            verdict = verdict_of(key)
            if verdict is None:
                verdict = verdicts[key] = self.node_verdict(n, key)
            if verdict is not _OK:
                if verdict is _BAD:
                    return False
                if key in holder_keys:
                    holders.append(len(ops))
                if verdict is _EXTERNAL:
                    self.external = True
                elif verdict is _SUBGRAPH:  # what they read from here must exist before; checked once all names are known
                    real = _real_node(n)
                    if not known(_needs(real)):
                        return False
                    subgraphs.append(real)
            if op in _ONE_OUTPUT and not _one_output_node(op, ins, outs):
                return False
            if len(outs) == 1:  # the common case, without the iterator
                define_one(outs[0])
                count += 1
            else:
                define(outs)
                count += len(outs)
            ops.append(op)
            domains.append(domain)
            node_inputs.append(ins)
            node_outputs.append(outs)
        # SSA: each (non-empty) output a new name
        if len(defined) - before != count and len(defined) - before != sum(1 for outs in node_outputs for o in outs if o):
            return False
        if not known(outputs):
            return False
        scope = frozenset(defined)  # "": no name, harmless there too
        if not all(self.subgraph_node(real, scope) for real in subgraphs):
            return False
        if table:
            self.table = NodeTable.from_columns(ops, domains, node_inputs, node_outputs, holders)
        return True

    def node_verdict(self, n, key):
        """_OK, _BAD, _EXTERNAL (fine, with an external tensor), _SUBGRAPH (depends on the
        scope: :meth:`subgraph_node`) or _HOLDER (fine, and a GRAPH or GRAPHS attribute of no
        graph) for a node's op and attributes (``key``: in :attr:`holder_keys` when the node holds
        a subgraph by an attribute's declared type, graphs.table.holds_subgraph)."""
        real = _real_node(n)
        if holds_subgraph(real):
            self.holder_keys.add(key)
        if any(a.HasField("g") or len(a.graphs) for a in real.attribute):
            return _SUBGRAPH
        if not _strings_valid(real) or not self.passes(self.v.node, real, "", "", frozenset()):
            return _BAD
        if _has_external_attribute(real):
            return _EXTERNAL
        return _HOLDER if key in self.holder_keys else _OK

    def subgraph_node(self, real, scope) -> bool:
        """A node with subgraphs: the node's own checks on a copy without them, then each
        subgraph as a graph of its own (through the view), reading ``scope``."""
        import onnx
        from google.protobuf.message import DecodeError
        shell = onnx.NodeProto()
        shell.CopyFrom(real)
        for a in shell.attribute:
            a.ClearField("g")
            del a.graphs[:]
        if not _strings_valid(shell) or not self.passes(self.v.node, shell, "", "", scope):
            return False
        self.external |= _has_external_attribute(shell)
        view = _view_class("GraphProto")
        for a in real.attribute:
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                try:
                    if not self.graph(view.FromString(g.SerializeToString()), scope, main=False):
                        return False
                except DecodeError:
                    return False
        return True

    @staticmethod
    def passes(check, *args, **kwargs) -> bool:
        try:
            check(*args, **kwargs)
        except ModelError:
            return False
        return True


_OK, _BAD, _EXTERNAL, _SUBGRAPH, _HOLDER = "ok", "bad", "external", "subgraph", "holder"
#: a node's inputs, outputs, op type, domain and attributes, read in one call
_NODE_FIELDS = attrgetter("input", "output", "op_type", "domain", "attribute")
#: the ops read by the package itself, whose input and output counts :meth:`_Validator.node` checks
_ONE_OUTPUT = frozenset({"StridedSlice", *RAW_UPDATE_INPUTS})


def _one_output_node(op: str, ins, outs) -> bool:
    """Whether a StridedSlice or raw slice-update node passes :meth:`_Validator.node`'s count checks."""
    if len(outs) != 1 or not outs[0]:
        return False
    if op == "StridedSlice":
        return len(ins) in (3, 4)
    return len(ins) == RAW_UPDATE_INPUTS[op] and all(ins)


def _has_external_attribute(node) -> bool:
    return any(t.data_location == 1 for a in node.attribute
               for t in ([a.t] if a.HasField("t") else []) + list(a.tensors)
               + ([a.sparse_tensor.values, a.sparse_tensor.indices] if a.HasField("sparse_tensor") else [])
               + [x for s in a.sparse_tensors for x in (s.values, s.indices)])


def _real_node(view_node):
    import onnx
    return onnx.NodeProto.FromString(view_node.SerializeToString())


def _utf8(items) -> bool:
    try:
        for s in items:
            s.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


_VIEW: dict = {}


def _view_class(name: str = "ModelProto"):
    """The ``name`` class of a view of onnx.proto (its own descriptor pool): the same fields,
    with every string field checked for UTF-8 while parsing (proto editions' ``utf8_validation
    = VERIFY``, else as proto2: explicit presence, closed enums), NodeProto.attribute and
    ValueInfoProto.type as (repeated) bytes.  A singular message field given twice in the
    bytes is merged by a parser: the repeated bytes keep both parts, which parse as the merge."""
    if not _VIEW:
        import onnx
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
        from google.protobuf.descriptor import FieldDescriptor as F
        fdp = descriptor_pb2.FileDescriptorProto()
        onnx.ModelProto.DESCRIPTOR.file.CopyToProto(fdp)
        old, pkg = fdp.package, "onnx_slice_tools_view"
        fdp.name, fdp.package = "onnx_slice_tools/view.proto", pkg
        fdp.syntax, fdp.edition = "editions", descriptor_pb2.EDITION_2023
        feat = fdp.options.features
        feat.field_presence, feat.enum_type = feat.EXPLICIT, feat.CLOSED
        feat.repeated_field_encoding, feat.utf8_validation = feat.EXPANDED, feat.VERIFY
        todo = list(fdp.message_type)
        while todo:
            m = todo.pop()
            todo.extend(m.nested_type)
            for f in m.field:
                if f.type_name.startswith(f".{old}."):
                    f.type_name = f".{pkg}.{f.type_name[len(old) + 2:]}"
                if (m.name, f.name) in (("NodeProto", "attribute"), ("ValueInfoProto", "type")):
                    f.type, f.label = F.TYPE_BYTES, F.LABEL_REPEATED
                    f.ClearField("type_name")
        pool = descriptor_pool.DescriptorPool()
        pool.Add(fdp)
        for kind in ("ModelProto", "GraphProto"):
            _VIEW[kind] = message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{pkg}.{kind}"))
    return _VIEW[name]


def _field_totals(data: bytes) -> dict:
    """Values in each typed data field (float_data ... uint64_data) over all the main graph's
    initializers of the model serialized as ``data``: one parse in C through
    :func:`_totals_class`, whose graph has one initializer, every initializer of the bytes
    merged into it (a parser merges a singular message given several times; repeated fields
    concatenate)."""
    graph = _totals_class().FromString(data).graph
    tensor = graph.initializer
    return {name: len(getattr(tensor, name)) for name in _DATA_FIELDS[1:]}


_TOTALS: list = []


def _totals_class():
    """A view of onnx.proto's ModelProto keeping only ``graph``, its GraphProto only
    ``initializer`` -- made singular -- and its TensorProto only the typed data fields, each of
    its type in onnx.proto (so the wire parses to the same values); every other field is
    skipped as unknown."""
    if not _TOTALS:
        import onnx
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
        from google.protobuf.descriptor import FieldDescriptor as F
        fdp = descriptor_pb2.FileDescriptorProto()
        onnx.ModelProto.DESCRIPTOR.file.CopyToProto(fdp)
        old, pkg = fdp.package, "onnx_slice_tools_totals"
        keep = {"ModelProto": {"graph"}, "GraphProto": {"initializer"}, "TensorProto": set(_DATA_FIELDS[1:])}
        out = descriptor_pb2.FileDescriptorProto(name="onnx_slice_tools/totals.proto", package=pkg,
                                                 syntax=fdp.syntax or "proto2")
        for m in fdp.message_type:
            if m.name not in keep:
                continue
            msg = out.message_type.add(name=m.name)
            for f in m.field:
                if f.name in keep[m.name]:
                    field = msg.field.add()
                    field.CopyFrom(f)
                    field.ClearField("options")
                    if f.type_name.startswith(f".{old}."):
                        field.type_name = f".{pkg}.{f.type_name[len(old) + 2:]}"
                    if m.name == "GraphProto":
                        field.label = F.LABEL_OPTIONAL
        pool = descriptor_pool.DescriptorPool()
        pool.Add(out)
        _TOTALS.append(message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{pkg}.ModelProto")))
    return _TOTALS[0]


def _q(name: str) -> str:
    return repr(name)


def _needs(n) -> set:
    """Names a node reads: its inputs and what its subgraphs take from outer scopes."""
    need = {v for v in n.input if v}
    for a in n.attribute:
        for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
            need |= _free_names(g)
    return need


def _free_names(g) -> set:
    local = {vi.name for vi in g.input} | {t.name for t in g.initializer} \
        | {st.values.name for st in g.sparse_initializer}
    for n in g.node:
        local.update(o for o in n.output if o)
    free = set()
    for n in g.node:
        free |= {v for v in _needs(n) if v not in local}
    free |= {vi.name for vi in g.output if vi.name not in local}
    return free


def _all_nodes(nodes):
    """``nodes`` and the nodes of their subgraphs, recursively."""
    todo = list(nodes)
    while todo:
        n = todo.pop()
        yield n
        for a in n.attribute:
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                todo.extend(g.node)


def _node_name(n, k: int) -> str:
    return n.name or (n.output[0] if len(n.output) and n.output[0] else f"#{k}")


# ---------------------------------------------------------------------- strings

_STRING_FIELDS: dict = {}


def _fields_of(desc):
    """(name, is_message, repeated) of the string and message fields of a message type
    (tensor payloads left out)."""
    from google.protobuf.descriptor import FieldDescriptor as F
    got = _STRING_FIELDS.get(desc.full_name)
    if got is None:
        got = []
        for fd in desc.fields:
            if fd.name in _DATA_FIELDS and desc.name == "TensorProto":
                continue
            repeated = fd.is_repeated
            if fd.type == F.TYPE_STRING:
                got.append((fd.name, False, repeated))
            elif fd.type == F.TYPE_MESSAGE:
                got.append((fd.name, True, repeated))
        _STRING_FIELDS[desc.full_name] = got
    return got


def _strings_valid(proto) -> bool:
    """Whether every string field is valid UTF-8: the fast scan (one ``ListFields`` per message)
    of the common case; :func:`_check_strings` then only walks field by field to name a failure."""
    kinds_of: dict = {}
    todo = [proto]
    while todo:
        msg = todo.pop()
        desc = msg.DESCRIPTOR
        kinds = kinds_of.get(desc)
        if kinds is None:
            kinds = kinds_of[desc] = {name: (is_msg, repeated) for name, is_msg, repeated in _fields_of(desc)}
        for fd, value in msg.ListFields():
            kind = kinds.get(fd.name)
            if kind is None:
                continue
            for item in value if kind[1] else (value,):
                if kind[0]:
                    todo.append(item)
                elif not isinstance(item, str):
                    return False
        if desc.name == "TensorProto" and msg.data_type == _STRING and msg.data_location != 1:
            for s in msg.string_data:
                try:
                    s.decode("utf-8")
                except UnicodeDecodeError:
                    return False
    return True


def _check_strings(proto, v: _Validator) -> None:
    """Every string field is valid UTF-8 (upb hands invalid ones over as bytes)."""
    if _strings_valid(proto):
        return
    # An entry is (message, its parent's entry): where a message sits is only spelled out
    # (by _where) when something in it fails, not for each of the model's messages.
    todo: list[tuple[Any, tuple | None]] = [(proto, None)]
    while todo:
        entry = todo.pop()
        msg = entry[0]
        for name, is_msg, repeated in _fields_of(msg.DESCRIPTOR):
            if repeated:
                items = getattr(msg, name)
                if not len(items):
                    continue
            elif not msg.HasField(name):
                continue
            else:
                items = (getattr(msg, name),)
            for item in items:
                if is_msg:
                    todo.append((item, entry))
                elif not isinstance(item, str):
                    v.fail(f"{_where(entry)}: field {name} is not valid UTF-8 ({_shown(item)})")
        if msg.DESCRIPTOR.name == "TensorProto" and msg.data_type == _STRING and msg.data_location != 1:
            for s in msg.string_data:  # bytes by definition: checked because onnx decodes them
                try:
                    s.decode("utf-8")
                except UnicodeDecodeError:
                    v.fail(f"{_where(entry)}: string_data is not valid UTF-8 ({_shown(s)})")


def _where(entry) -> str:
    """The location of a :func:`_check_strings` entry: 'model', then each message's description."""
    chain = []
    while entry is not None:
        chain.append(entry[0])
        entry = entry[1]
    where = "model"
    for msg in reversed(chain[:-1]):  # the root is the model itself
        where = _describe(msg, where)
    return where


def _describe(msg, parent: str) -> str:
    kind = msg.DESCRIPTOR.name
    name = getattr(msg, "name", None) if kind in ("NodeProto", "TensorProto", "ValueInfoProto", "GraphProto",
                                                  "FunctionProto", "AttributeProto") else None
    if isinstance(name, str) and name:
        label = {"NodeProto": "node", "TensorProto": "tensor", "ValueInfoProto": "value",
                 "GraphProto": "graph", "FunctionProto": "function", "AttributeProto": "attribute"}[kind]
        return f"{label} {name!r}"
    return parent if kind not in ("GraphProto",) else f"{parent} > graph"


def _shown(raw) -> str:
    return repr(bytes(raw)[:40])
