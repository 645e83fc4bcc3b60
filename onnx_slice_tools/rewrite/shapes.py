"""The shapes the rewrite starts from, on the ModelProto: ONNX shape inference of a skeleton
(declared shapes not trusted, no weights read), run in the helper process
(graphs/shape_inference.py), and the skeletons other checks infer.  No onnx-ir: the protobuf
path (rewrite/proto_pass.py) and the checks use it without importing onnx-ir (and the sympy it
imports)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any, overload

from ..errors import StridedSliceError
from ..graphs.table import NodeTable
from ..graphs.walk import proto_subgraphs
from ..semantics.plan import make_plan
from .core import ProtoAttr, flavor_of, index_values, parse_node, proto_attr_value

__all__ = ["derive_shapes", "skeleton", "weightless"]


@overload
def derive_shapes(proto, max_bytes: int = 1024, names: None = None, has_subgraphs: bool | None = None,
                  flavor: str | None = None, table: NodeTable | None = None) -> dict: ...


@overload
def derive_shapes(proto, max_bytes: int = 1024, names: Iterable | None = None, has_subgraphs: bool | None = None,
                  flavor: str | None = None, table: NodeTable | None = None) -> Mapping: ...


def derive_shapes(proto, max_bytes: int = 1024, names=None, has_subgraphs: bool | None = None,
                  flavor: str | None = None, table: NodeTable | None = None) -> Mapping:
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
    inferred (a node's inferred types depend on its inputs' alone; a node that would make
    inference fail, downstream of every value asked for, is not inferred).  ``table``: the
    NodeTable of ``proto``'s main graph as it is, if read (rewrite.proto_pass.scan reads it)."""
    if names is not None:
        declared = _declared_sources(proto, names, max_bytes)
        if declared is not None:
            return declared
    keep = None
    if names is not None and has_subgraphs is False and not proto.functions:
        table = table or NodeTable(proto.graph)  # (read once: the ancestors' walk and the rounds read it)
        keep = _ancestors(table, names)  # inference of a node reads only its inputs' types
        if len(keep) == len(table):
            keep = None
        elif keep[-1] == len(keep) - 1:  # (the first nodes: the common case, slices of the columns)
            m = len(keep)
            table = NodeTable.from_columns(table.ops[:m], table.domains[:m], table.inputs[:m], table.outputs[:m], [])
        else:
            table = NodeTable.from_columns([table.ops[k] for k in keep], [table.domains[k] for k in keep],
                                           [table.inputs[k] for k in keep], [table.outputs[k] for k in keep], [])
    try:
        own = keep is None and _own_skeleton(proto, max_bytes, has_subgraphs)
        inferred = _past_strided_slices(proto, keep, own, max_bytes, has_subgraphs, flavor, table, names)
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


def _past_strided_slices(proto, keep, own: bool, max_bytes: int, has_subgraphs: bool | None, flavor: str | None,
                         table: NodeTable | None = None, names=None):
    """Shape inference of :func:`skeleton` of ``proto`` (its main-graph nodes at positions ``keep``
    only, sorted, or all: None; ``own``: ``proto`` is its own skeleton), continued past
    StridedSlice nodes.

    A StridedSlice is a custom op: ONNX gives its output no shape, and every value after it --
    the next StridedSlice of a chain ``x[:, 1:][..., :2]`` included -- stays unknown.  Each
    main-graph StridedSlice whose output is unknown, whose input's shape is derived and whose
    begin/end/strides are constants (initializers or ``Constant`` nodes of the skeleton) gets the
    output shape of its plan (``make_plan(spec, dims).output_shape``, what its lowering
    computes) declared, and inference goes on from there, in rounds: round r plans the slices
    whose input got its shape in round r - 1 (round 1: in the first inference, of the skeleton).

    :func:`_rounds_in_part` runs the rounds linearly in the model: a node's inferred type depends
    only on its inputs' types and constants, so a round infers only the nodes downstream of the
    slices the previous round planned (up to the next StridedSlice, whose output inference never
    changes), each in a model of its own with the values it reads as typed inputs.  A chain of
    slices in series costs one inference of each node, not one inference of the whole graph per
    link.  Models it cannot cut that way (functions, subgraphs reading outer values, nodes out of
    order, a value produced twice) take :func:`_rounds_whole`, the same rounds over the whole
    graph.  ``table``: the NodeTable of the skeleton's main graph (of the nodes kept), if read.
    ``names``: the main-graph values the caller reads (a set: the rounds in parts then return
    only those), or None: every value."""
    from ..graphs.shape_inference import infer

    def whole():
        return proto if own else skeleton(proto, max_bytes, has_subgraphs, keep=keep)
    src = proto.graph.node
    nodes = src if keep is None or keep[-1] == len(keep) - 1 else [src[k] for k in keep]  # (the first: in place)
    table = table or NodeTable(proto.graph)  # (keep None: the skeleton's nodes are proto's)
    positions = [k for k, op in enumerate(table.ops)
                 if op == "StridedSlice" and len(table.outputs[k]) == 1 and len(table.inputs[k]) >= 3]
    if not positions:
        return infer(whole())
    header = skeleton(proto, max_bytes, has_subgraphs, keep=(), outputs=keep is None)  # (no node)
    planner = _SlicePlanner(header, flavor, table, nodes)
    part = _rounds_in_part(header, nodes, planner, table, names)
    if part is not None:
        return part
    sk = whole()
    return _rounds_whole(sk, infer(sk), [sk.graph.node[k] for k in positions], planner, own)


class _SlicePlanner:
    """The declared output type of a main-graph StridedSlice of ``sk`` given its input's type:
    its plan's output shape, or None (no flavour, runtime index inputs, a spec or plan error).
    Caches per distinct pattern: models repeat them."""

    def __init__(self, sk, flavor: str | None, table: NodeTable | None = None, nodes=None):
        import onnx
        g = sk.graph
        overridable = {vi.name for vi in g.input}
        self.inits = {t.name: t for t in g.initializer if t.name not in overridable}
        nodes = g.node if nodes is None else nodes  # (``nodes``: the main graph's, when not sk's own)
        if table is None:  # (``table``: of those nodes, whose columns spare reading every node)
            found = (n for n in nodes if n.op_type == "Constant" and n.domain == "" and len(n.output) == 1)
        else:
            found = (nodes[k] for k, (op, domain, outs) in enumerate(zip(table.ops, table.domains, table.outputs))
                     if op == "Constant" and domain == "" and len(outs) == 1)
        self.constants = {n.output[0]: n for n in found
                          if len(n.attribute) == 1 and n.attribute[0].name in ("value", "value_int", "value_ints")}
        self.flavor = flavor
        self.read: dict = {}  # (name, field) -> ints: one constant feeds many nodes
        self.parsed: dict = {}  # (index inputs, attributes, domain) -> spec or None
        self.planned_shapes: dict = {}  # (spec, dims) -> output shape or None
        self.parse_cache: dict = {}
        self.onnx = onnx

    def const_of(self, name, field_name):
        key = (name, field_name)
        if key not in self.read:
            self.read[key] = self._const_of(name, field_name)
        return self.read[key]

    def _const_of(self, name, field_name):
        from onnx import numpy_helper
        onnx = self.onnx
        t = self.inits.get(name)
        if t is None and name in self.constants:
            a = self.constants[name].attribute[0]
            t = a.t if a.name == "value" else onnx.helper.make_tensor(
                name, onnx.TensorProto.INT64, [] if a.name == "value_int" else [len(a.ints)],
                [a.i] if a.name == "value_int" else list(a.ints))
        if t is None or t.data_location == onnx.TensorProto.EXTERNAL:
            return None
        return index_values(numpy_helper.to_array(t), field_name)

    def declared(self, node, x_type):
        """The value_info of ``node``'s output (``x_type``: its input's TypeProto, with a shape), or None."""
        dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                     for d in x_type.tensor_type.shape.dim)
        key = (tuple(node.input[1:]), node.domain,
               tuple((a.name, a.type, a.i, tuple(a.ints), a.s) for a in node.attribute))
        if key not in self.parsed:
            attrs = {a.name: ProtoAttr(a.type, proto_attr_value(a)) for a in node.attribute}
            node_flavor = self.flavor or flavor_of({k: a.type for k, a in attrs.items()}, node.domain)
            if node_flavor is None:  # no flavour, no spec to plan
                self.parsed[key] = None
            else:
                try:
                    spec, runtime = parse_node([i or None for i in node.input], attrs, node_flavor, self.const_of,
                                               lambda v: None, self.parse_cache)
                    self.parsed[key] = None if runtime else spec
                except (StridedSliceError, ValueError):
                    self.parsed[key] = None
        spec = self.parsed[key]
        if spec is None:
            return None
        if (spec, dims) not in self.planned_shapes:
            try:
                self.planned_shapes[(spec, dims)] = make_plan(spec, dims).output_shape
            except (StridedSliceError, ValueError):
                self.planned_shapes[(spec, dims)] = None
        shape = self.planned_shapes[(spec, dims)]
        if shape is None:
            return None
        return self.onnx.helper.make_tensor_value_info(node.output[0], x_type.tensor_type.elem_type, list(shape))


def _shaped(t) -> bool:
    return t.HasField("tensor_type") and t.tensor_type.HasField("shape")


def _rounds_whole(sk, inferred, slices, planner: _SlicePlanner, copy: bool):
    """The rounds of :func:`_past_strided_slices`, each an inference of the whole graph of ``sk``
    with every output planned so far declared: once per link of the longest chain (the way for
    models :func:`_rounds_in_part` cannot cut)."""
    import onnx

    from ..graphs.shape_inference import infer
    tried: set = set()
    while True:
        known = {vi.name: vi for vi in itertools.chain(inferred.graph.input, inferred.graph.value_info,
                                                         inferred.graph.output) if _shaped(vi.type)}
        planned = []
        for node in slices:
            out, x = node.output[0], known.get(node.input[0])
            if out in known or out in tried or x is None:
                continue
            tried.add(out)
            vi = planner.declared(node, x.type)
            if vi is not None:
                planned.append(vi)
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


def _rounds_in_part(header, nodes, planner: _SlicePlanner, table: NodeTable, names=None):
    """The rounds of :func:`_past_strided_slices`, each inferring only the nodes whose inputs'
    types the previous round changed: the nodes downstream of the slices it planned, up to the
    next StridedSlice (its output changes only by declaration).  Each round's model holds those
    nodes, the ``Constant`` nodes and initializers they read (inference reads their values), the
    values they read from other nodes as typed graph inputs (a value of no type left undefined,
    as in the whole graph) and the graph outputs among their outputs (declared as in the skeleton).
    Symbols inference makes up for unknown dims (``unk__N``) are renamed where they meet one
    already in use, so that two dims share a name only if inference made them equal.

    The first inference is of the skeleton (``header``: it without its nodes; ``nodes``: the main
    graph's, by the positions of ``table``, the NodeTable of the skeleton's nodes) less the nodes
    :func:`_silent` proves it types nothing: after a StridedSlice, the nodes that read only what
    it leaves untyped (a chain's nodes between two slices) -- each round infers them anyway.

    Returns a ModelProto holding what the whole-graph rounds return (graph inputs, value_info,
    outputs, initializers; no nodes), or None when the model cannot be cut that way: functions,
    a node holding a subgraph (its body reads outer values no input names), nodes out of order,
    a value produced twice.  ``names``: only these values' types are returned (a set; None: all)."""
    import onnx

    from ..graphs.shape_inference import infer
    g = header.graph
    if header.functions or table.holders:
        return None
    producer: dict[str, int] = {}
    consumers: dict[str, list[int]] = {}
    readers = consumers.get
    for position, (ins, outs) in enumerate(zip(table.inputs, table.outputs)):
        for name in ins:
            if name:
                at = readers(name)
                if at is None:
                    consumers[name] = [position]
                else:
                    at.append(position)
        for name in outs:
            if name:
                if name in producer or name in consumers:  # produced twice, or read before it is produced
                    return None
                producer[name] = position
    outputs = {o.name: o for o in g.output}
    silent = _silent(header, nodes, table, outputs, producer, infer)
    first = onnx.ModelProto()
    first.CopyFrom(header)
    count = len(table)
    if not silent:  # (all nodes, or the first ones: copied in C)
        first.graph.node.extend(nodes)
        if len(first.graph.node) > count:
            del first.graph.node[count:]
    else:
        first.graph.node.extend([nodes[k] for k in range(count) if k not in silent])
    inferred = infer(first)
    del first
    inputs = {vi.name: vi.type for vi in inferred.graph.input}
    types: dict = {}  # name -> TypeProto of every node output with a type
    for vi in itertools.chain(inferred.graph.value_info, inferred.graph.output):
        if vi.name in producer:
            types[vi.name] = vi.type
    initializers = {t.name: t for t in g.initializer}
    used = {d.dim_param for t in itertools.chain(inputs.values(), types.values()) if _shaped(t)
            for d in t.tensor_type.shape.dim if d.dim_param}
    fresh = itertools.count()

    def type_of(name):
        t = types.get(name)
        return inputs.get(name) if t is None else t

    tried: set = set()
    is_slice = [op == "StridedSlice" and len(outs) == 1 and len(ins) >= 3
                for op, ins, outs in zip(table.ops, table.inputs, table.outputs)]
    candidates = [k for k, flag in enumerate(is_slice) if flag]
    while True:
        planned = []
        for k in candidates:
            out = table.outputs[k][0]
            if out in tried:
                continue
            known_out = types.get(out)
            x = type_of(table.inputs[k][0])
            if known_out is not None and _shaped(known_out) or x is None or not _shaped(x):
                continue
            tried.add(out)
            vi = planner.declared(nodes[k], x)
            if vi is not None:
                planned.append(vi)
        if not planned:
            break
        for vi in planned:
            types[vi.name] = vi.type
        # the nodes whose inputs changed, transitively, up to the next StridedSlice
        todo = [vi.name for vi in planned]
        affected: set = set()
        ops, node_outputs = table.ops, table.outputs
        while todo:
            for k in consumers.get(todo.pop(), ()):  # (no consumer of "": the missing outputs' name)
                if k in affected or ops[k] == "StridedSlice":
                    continue
                affected.add(k)
                todo.extend(node_outputs[k])
        changed: Any = ()
        if affected:
            changed = _infer_part(header, nodes, table, sorted(affected), producer, initializers, outputs, types, inputs,
                                  used, fresh, infer, names, consumers)
        candidates = sorted({k for name in itertools.chain(changed, (vi.name for vi in planned))
                             for k in consumers.get(name, ()) if is_slice[k]})
    out = onnx.ModelProto()
    out.graph.input.extend(inferred.graph.input)
    out.graph.initializer.extend(g.initializer if names is None else (t for t in g.initializer if t.name in names))
    for name, t in types.items() if names is None else ((n, t) for n, t in types.items() if n in names):
        vi = out.graph.output.add() if name in outputs else out.graph.value_info.add()
        vi.name = name
        vi.type.CopyFrom(t)
    for o in g.output:  # graph outputs of no inferred type keep their declaration (or a graph input's type)
        if o.name not in types and (names is None or o.name in names):
            vi = out.graph.output.add()
            vi.CopyFrom(o)
            t = inputs.get(o.name)
            if t is not None:
                vi.type.CopyFrom(t)
    return out


def _silent(header, nodes, table: NodeTable, outputs: dict, producer: dict, infer) -> set:
    """Positions of the nodes that the whole-graph inference of the skeleton (``header``, its
    ``nodes`` by ``table``'s positions; ``outputs``: its graph outputs by name; ``producer``:
    value -> position of the node making it) provably types nothing: every input of such a node
    is a value inference leaves untyped there -- a StridedSlice's output (a custom op: no schema;
    unless a graph output, declared) or an output of another such node -- and none of its
    outputs is a graph output.  What inference makes of a node whose inputs have no type depends
    only on the node (its op, domain, attributes, and which inputs and outputs are present; no
    function to overload), so one node of each kind is asked, in a model of its own with
    undefined inputs (one helper call), and those that type none of their outputs are left out.
    Without them the first inference types what it types with them and makes up the same
    symbols (they make none)."""
    import onnx
    ops, node_inputs, node_outputs, domains = table.ops, table.inputs, table.outputs, table.domains
    seeds = {o for k, op in enumerate(ops) if op == "StridedSlice" for o in node_outputs[k] if o and o not in outputs}
    if not seeds:
        return set()
    kinds: dict = {}  # position -> its kind (read once)
    declared = {producer[o] for o in outputs if o in producer}  # (the nodes making graph outputs)

    def walk(answers: dict | None):
        """The silent positions, and the kinds met (``answers``: kind -> silent; None: every kind
        taken as silent, to collect them; a kind not answered is not)."""
        untyped = set(seeds)
        found, met = set(), {}
        for k, ins in enumerate(node_inputs):
            if len(ins) == 1:  # (the common case, without a generator)
                if ins[0] not in untyped:
                    continue
            elif not ins or not any(ins) or any(name and name not in untyped for name in ins):
                continue
            if ops[k] == "StridedSlice" or k in declared:
                continue
            key = kinds.get(k)
            if key is None:
                attributes = nodes[k].attribute
                outs = node_outputs[k]
                key = kinds[k] = (domains[k], ops[k], len(ins) if all(ins) else tuple([i != "" for i in ins]),
                                  len(outs) if all(outs) else tuple([o != "" for o in outs]),
                                  tuple([a.SerializeToString() for a in attributes]) if len(attributes) else ())
            if key not in met:
                met[key] = k
            if answers is not None and not answers.get(key, False):
                continue
            found.add(k)
            outs = node_outputs[k]
            if len(outs) == 1:
                untyped.add(outs[0])
            else:
                untyped.update(o for o in outs if o)
        return found, met

    found, met = walk(None)
    if not met:
        return found
    probe = onnx.ModelProto()
    probe.ir_version = header.ir_version
    probe.opset_import.extend(header.opset_import)
    probe.graph.name = header.graph.name
    probe_outputs = []
    for j, k in enumerate(met.values()):
        node = probe.graph.node.add()
        node.CopyFrom(nodes[k])
        names_in = [f"in{j}_{i}" if name else "" for i, name in enumerate(node.input)]
        names_out = [f"out{j}_{i}" if name else "" for i, name in enumerate(node.output)]
        del node.input[:]
        node.input.extend(names_in)
        del node.output[:]
        node.output.extend(names_out)
        probe_outputs.append([o for o in names_out if o])
    try:
        answer = infer(probe)
    except Exception:  # (no answer: every node stays, as in the whole graph)
        return set()
    typed = {vi.name for vi in itertools.chain(answer.graph.value_info, answer.graph.output)}
    answers = {key: not any(o in typed for o in outs) for key, outs in zip(met, probe_outputs)}
    if all(answers.values()):
        return found
    return walk(answers)[0]


#: the prefix of the symbols onnx's shape inference makes up for dims it cannot name (``unk__N``)
_MADE_UP = b"unk__"


def _infer_part(sk, nodes, table: NodeTable, part, producer, initializers, outputs, types, inputs, used, fresh,
                infer, wanted=None, consumers=None):
    """Infer the main-graph nodes ``nodes`` at positions ``part`` (in order) in a model of their
    own (``sk``'s IR version, opsets and graph name); update ``types`` with what it derives for
    their outputs (renaming made-up symbols that meet one in ``used``).  Returns the names of
    their outputs (a view of a dict's keys).  ``wanted`` (a set) and ``consumers`` (value ->
    positions of the nodes reading it): only the types of the outputs in ``wanted`` or read
    outside the part are needed later (see :func:`_take_wanted`); None: every one."""
    import onnx
    sub = onnx.ModelProto()
    sub.ir_version = sk.ir_version
    sub.opset_import.extend(sk.opset_import)
    g = sub.graph
    g.name = sk.graph.name
    own: dict = {}  # (ordered)
    node_outputs = table.outputs
    for k in part:
        for o in node_outputs[k]:
            if o:
                own[o] = None
    constants, seen = [], set()
    existing: set = set()
    for k in part:
        for name in table.inputs[k]:
            if not name or name in own or name in seen:
                continue
            seen.add(name)
            p = producer.get(name)
            if p is not None and table.ops[p] == "Constant" and table.domains[p] == "":
                constants.append(p)  # its value, as the whole graph gives it to inference
                continue
            if name in initializers:
                g.initializer.append(initializers[name])
                continue
            t = types.get(name) if p is not None else inputs.get(name)
            if t is None:
                continue  # no type: undefined here, as in the whole graph
            vi = g.input.add()
            vi.name = name
            vi.type.CopyFrom(t)
            if _shaped(t):
                existing.update(d.dim_param for d in t.tensor_type.shape.dim if d.dim_param)
    g.node.extend(nodes[p] for p in sorted(set(constants)))
    g.node.extend(nodes[k] for k in part)
    for name in own:
        if name in outputs:
            g.output.append(outputs[name])
        types.pop(name, None)
    answer: list = []
    result = infer(sub, answer=answer)
    # (made-up symbols are named _MADE_UP...: none in the answer, nothing to rename -- a check in
    # C of its bytes instead of a walk over every dim in Python)
    made_up = _MADE_UP in answer[0]
    if not made_up and wanted is not None and \
            _take_wanted(result, own, outputs, wanted, part, consumers, table.inputs, types):
        return own.keys()
    renamed: dict = {}
    for vi in itertools.chain(result.graph.value_info, result.graph.output):
        name = vi.name
        if name not in own:
            continue
        t = vi.type
        if made_up and t.HasField("tensor_type") and t.tensor_type.HasField("shape"):
            for d in t.tensor_type.shape.dim:
                param = d.dim_param
                if param and param not in existing:
                    if param not in renamed:
                        fresh_name = param
                        while fresh_name in used:
                            fresh_name = f"{_MADE_UP.decode()}{next(fresh)}"
                        renamed[param] = fresh_name
                        used.add(fresh_name)
                    d.dim_param = renamed[param]
        types[name] = t
    return own.keys()


def _take_wanted(result, own: dict, outputs: dict, wanted: set, part, consumers: dict, node_inputs: list,
                 types: dict) -> bool:
    """Put into ``types`` the types :func:`_infer_part`'s ``result`` gives the outputs of its
    nodes (``own``) that anything may read later: those in ``wanted`` (the caller's), graph
    outputs (``outputs``), and those read by a node outside ``part`` or by a node reading another
    value too (a later round may infer it again, without this part) -- without reading every
    value's entry: inference lists the values it typed in the order the nodes make them, so
    when there are as many entries as outputs, the one at each needed output's place is taken,
    checked by its name.  False (nothing put) when that does not hold: the caller reads every
    entry.  ``consumers``: value -> positions of the nodes reading it; ``node_inputs``: the
    inputs of the node at each position."""
    value_info = result.graph.value_info
    expected = [name for name in own if name not in outputs]
    if len(value_info) != len(expected):
        return False
    inside = set(part)
    picked = []
    for i, name in enumerate(expected):
        if name in wanted or any(k not in inside or len(node_inputs[k]) != 1 for k in consumers.get(name, ())):
            vi = value_info[i]
            if vi.name != name:
                return False
            picked.append(vi)
    for vi in itertools.chain(picked, (vi for vi in result.graph.output if vi.name in own)):
        types[vi.name] = vi.type
    return True


def _declared_sources(proto, names, max_bytes: int) -> Mapping | None:
    """:func:`derive_shapes` of ``names`` when each is a main-graph input or initializer (what
    inference on the skeleton returns for them), else None.  The answer is a
    :class:`_Declared`: each entry is read from its declaration when first asked (a rewrite reads
    the sliced data's entry and those of runtime index inputs, not those of the thousands of
    constant begin/end/strides a model may hold)."""
    g = proto.graph
    inputs = {vi.name: vi for vi in g.input}
    initializers = {t.name: t for t in g.initializer}
    wanted = set(names)
    wanted.discard("")
    if not initializers.keys() >= wanted - inputs.keys():
        return None
    return _Declared(wanted, inputs, initializers, max_bytes)


_UNREAD = object()


class _Declared(Mapping):
    """name -> (elem_type or None, dims) of main-graph inputs and initializers (``wanted``: the
    names it holds, each one of ``inputs`` or ``initializers``, by name), each read from the
    proto when first asked, as inference on the skeleton gives it: an input its declared type, an
    initializer its data type and dims (an external one, or one above ``max_bytes`` -- a typed
    input in the skeleton -- an UNDEFINED type as None).  The tensors are those of the proto as
    it was read (a later edit of the graph does not change an entry)."""

    __slots__ = ("_wanted", "_inputs", "_initializers", "_max_bytes", "_read")

    def __init__(self, wanted: set, inputs: dict, initializers: dict, max_bytes: int):
        self._wanted, self._inputs, self._initializers, self._max_bytes = wanted, inputs, initializers, max_bytes
        self._read: dict = {}

    def __getitem__(self, name):
        hit = self._read.get(name, _UNREAD)
        if hit is _UNREAD:
            hit = self._read[name] = self._entry(name) if name in self._wanted else None
        if hit is None:  # (not asked for, or an input that is no tensor: no entry)
            raise KeyError(name)
        return hit

    def _entry(self, name) -> tuple | None:
        vi = self._inputs.get(name)
        if vi is not None:
            if not vi.type.HasField("tensor_type"):
                return None
            tt = vi.type.tensor_type
            dims = None if not tt.HasField("shape") else tuple(
                d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)
            return (tt.elem_type or None, dims)
        t = self._initializers[name]
        as_input = t.data_location == 1 or t.ByteSize() > self._max_bytes  # EXTERNAL or big: a typed input there
        return (t.data_type or None if as_input else t.data_type, tuple(t.dims))

    def __contains__(self, name) -> bool:
        try:
            self[name]
        except KeyError:
            return False
        return True

    def get(self, name, default=None):
        hit = self._read.get(name, _UNREAD)  # (the common case: an entry read before)
        if hit is _UNREAD:
            hit = self._read[name] = self._entry(name) if name in self._wanted else None
        return default if hit is None else hit

    def __iter__(self):
        return (name for name in self._wanted if name in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _ancestors(table: NodeTable, names) -> list:
    """Indices (in order) of the main-graph nodes (``table``: the graph's) that ``names`` depend
    on: their producers, and their inputs' producers, transitively (no subgraphs: their outer
    reads are not inputs)."""
    inputs = table.inputs
    producers: dict[str, int] = {}
    for position, outputs in enumerate(table.outputs):
        if len(outputs) == 1:  # the common case, without the iterator
            if outputs[0]:
                producers[outputs[0]] = position
        else:
            producers.update((o, position) for o in outputs if o)
    todo = [producers[n] for n in names if n in producers]
    seen = set(todo)
    while todo:
        for name in inputs[todo.pop()]:
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


def skeleton_input(t, max_bytes: int = 1024) -> bool:
    """Whether :func:`skeleton` makes initializer ``t`` (not a graph input) a typed graph input:
    external data, or above ``max_bytes``."""
    import onnx
    return t.data_location == onnx.TensorProto.EXTERNAL or t.ByteSize() > max_bytes


def skeleton(proto, max_bytes: int = 1024, has_subgraphs: bool | None = None, keep=None,
             outputs: bool | None = None):
    """A copy of ``proto`` for shape inference: graph structure and declared graph inputs only.

    Initializers that are external, above ``max_bytes`` or also graph inputs become typed
    inputs (their declared shape; the data of an overridable one may be replaced at run
    time); value_info (every graph and function) and graph output shapes are dropped.
    ``has_subgraphs`` False: the caller knows no main-graph node holds a subgraph (no walk).
    ``keep``: indices (sorted) of the main-graph nodes to keep (the others and the graph outputs
    dropped).  ``outputs``: whether the graph outputs stay (None: when ``keep`` is None)."""
    import onnx
    sk = onnx.ModelProto()
    sk.ir_version = proto.ir_version
    sk.opset_import.extend(proto.opset_import)
    sk.functions.extend(proto.functions)
    g, src = sk.graph, proto.graph
    g.name = src.name
    if keep is None or keep and keep[-1] == len(keep) - 1:  # (all nodes, or the first ones: copied in C)
        g.node.extend(src.node)
        if keep is not None:
            del g.node[len(keep):]
    elif keep:
        g.node.extend([src.node[k] for k in keep])
    declared = {vi.name for vi in src.input}
    g.input.extend(src.input)
    for t in src.initializer:
        if t.name in declared:
            continue  # overridable: a runtime value of the declared input's type
        if skeleton_input(t, max_bytes):
            g.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        else:
            g.initializer.append(t)
    for o in src.output if (keep is None if outputs is None else outputs) else ():  # the element type kept, the shape dropped
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
