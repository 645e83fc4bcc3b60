"""The structural proof, and value numbering.

:func:`structural_diff`: outside the replaced StridedSlice nodes nothing changed -- same nodes
(op, domain, name, attributes, inputs, outputs), initializers (dtype, dims, bytes or
external-data records; external data is never read), graph inputs/outputs, functions and
opsets, in every graph and function, modulo what the rewrite pass recorded (nodes and
initializers it removed or added, the custom domain it dropped).  :func:`same_values`: every
graph output of one model is, by value numbering, the very computation of another's (the
cleanup's proof when it only merged duplicates and removed dead nodes).  Half of what the
in-place check proves (verification/inplace.py runs the other half).
"""

from __future__ import annotations

from typing import AbstractSet

from ..graphs.table import NodeTable

# --------------------------------------------------------------------------- structure


def _graphs(proto, holders=None):
    """(label, graph-or-function proto, is_function) of every graph, labelled as graphs.walk labels them
    (``holders``: as proto_graphs takes them)."""
    from ..graphs.walk import proto_graphs
    return [(label, g, is_function) for g, label, is_function in proto_graphs(proto, holders=holders)]


def _attr_key(a):
    from onnx import helper
    if a.type in (a.GRAPH, a.GRAPHS):  # bodies are compared as graphs of their own
        return (a.name, a.type, a.ref_attr_name, len(a.graphs))
    if a.ref_attr_name:
        return (a.name, a.type, a.ref_attr_name)
    v = helper.get_attribute_value(a)
    if a.type == a.TENSOR:
        v = _tensor_key(v)
    elif a.type == a.TENSORS:
        v = tuple(_tensor_key(t) for t in v)
    elif isinstance(v, list):
        v = tuple(v)
    return (a.name, a.type, repr(v))


def _tensor_key(t):
    """dtype, dims and bytes of a tensor -- or its external-data record, never read."""
    from onnx import numpy_helper
    if t.data_location == t.EXTERNAL:
        return (t.name, t.data_type, tuple(t.dims), "external",
                tuple(sorted((e.key, e.value) for e in t.external_data if e.key != "checksum")))
    arr = numpy_helper.to_array(t)
    if arr.dtype == object:  # strings: the values (an object array's bytes are pointers)
        return (t.name, t.data_type, tuple(t.dims), tuple(arr.reshape(-1).tolist()))
    return (t.name, t.data_type, tuple(t.dims), arr.tobytes())


def _nodes_but(nodes, outputs: AbstractSet, table: NodeTable | None = None) -> list:
    """``nodes`` less those whose outputs (as a tuple) are in ``outputs`` (``table``: theirs, if read)."""
    if not outputs:
        return list(nodes)
    if table is not None:
        return [nodes[k] for k, outs in enumerate(table.outputs) if outs not in outputs]
    first = {key[0] for key in outputs if key}  # (a cheap test before the tuple)
    empty = () in outputs
    kept = []
    for n in nodes:
        out = n.output
        if out:
            if out[0] in first and tuple(out) in outputs:
                continue
        elif empty:
            continue
        kept.append(n)
    return kept


def _same_nodes(a: list, b: list, renamed: dict) -> bool:
    """Whether nodes ``a`` (``renamed`` applied to their inputs) and ``b`` have equal keys, pair
    by pair; a key is computed only where a pair's bytes differ (equal bytes: equal fields)."""
    if len(a) != len(b):
        return False
    for na, nb in zip(a, b):
        if renamed and any(i in renamed for i in na.input) or na.SerializeToString() != nb.SerializeToString():
            if _node_key(na, renamed) != _node_key(nb, {}):
                return False
    return True


def _node_key(n, renamed):
    return (n.op_type, n.domain or "", n.overload, n.name, tuple(renamed.get(i, i) for i in n.input),
            tuple(n.output), tuple(_attr_key(a) for a in n.attribute))


def _io_key(vi):
    t = vi.type
    if not t.HasField("tensor_type"):
        return (vi.name, t.SerializeToString(deterministic=True))
    tt = t.tensor_type
    dims = None if not tt.HasField("shape") else tuple(
        d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)
    return (vi.name, tt.elem_type, dims)


def _same_io(va_all, vb_all, filled, ga) -> bool:
    """Whether graph inputs/outputs ``va_all`` (before) and ``vb_all`` (after, as long) pass
    structural_diff's rule, pair by pair, with a key computed only where the bytes differ.
    ``filled`` (outputs only): names whose undeclared type/shape the rewrite may fill in; an
    output that is also a graph input may be declared as that input."""
    inputs = None
    fills: dict = {}  # (type bytes before, after) -> _fills_in (models repeat a few declarations)
    for va, vb in zip(va_all, vb_all):
        name = va.name
        if name == vb.name:
            ta, tb = va.type.SerializeToString(), vb.type.SerializeToString()
            if ta == tb:
                continue
            if filled is not None and name in filled:
                known = fills.get((ta, tb))
                if known is None:
                    known = fills[(ta, tb)] = _fills_in(va, vb)
                if known:
                    continue
        a, b = _io_key(va), _io_key(vb)
        if a == b:
            continue
        if filled is None:
            return False
        if inputs is None:
            inputs = {k[0]: k for k in (_io_key(v) for v in ga.input)}
        if b != inputs.get(a[0], a):
            return False
    return True


def _undeclared(vi) -> bool:
    tt = vi.type.tensor_type
    return not vi.type.HasField("tensor_type") or not tt.elem_type or not tt.HasField("shape")


def _fills_in(va, vb) -> bool:
    """Whether declaration ``vb`` only adds to an undeclared ``va`` what it lacked (a rewrite
    declares a replaced output's missing element type or shape, core.output_fill): what ``va``
    declares, ``vb`` declares alike."""
    if not _undeclared(va):
        return False
    if not va.type.HasField("tensor_type"):
        return va.type.ByteSize() == 0 and vb.type.HasField("tensor_type")  # (no type at all: any tensor type)
    if not vb.type.HasField("tensor_type"):
        return False
    _, elem_a, dims_a = _io_key(va)
    _, elem_b, dims_b = _io_key(vb)
    return elem_a in (0, elem_b) and (dims_a is None or dims_a == dims_b)


def structural_diff(before, after, changes, removed_domains=(), table: NodeTable | None = None,
                    before_holders: list | None = None) -> str | None:
    """The first difference between ``before`` and ``after`` (ModelProtos, external data not
    loaded) outside what ``changes`` (rewrite.RewriteChanges) records; None if there is none.
    ``table``: ``after``'s main graph's, if read; ``before_holders``: the positions of
    ``before``'s main-graph nodes that hold subgraphs, if known (one missed there shows as a
    graph only ``after`` has: a difference, never a pass)."""
    a_graphs = {label: (g, f) for label, g, f in _graphs(before, before_holders)}
    b_graphs = {label: (g, f) for label, g, f in _graphs(after, None if table is None else table.holders)}
    if set(a_graphs) != set(b_graphs):
        return f"graphs differ: {sorted(set(a_graphs) ^ set(b_graphs))[:3]}"
    for label, (ga, is_fn) in a_graphs.items():
        gb = b_graphs[label][0]
        kept_a = _nodes_but(ga.node, changes.removed_nodes)
        kept_b = _nodes_but(gb.node, changes.added_nodes, table if label == "main" else None)
        if not _same_nodes(kept_a, kept_b, changes.renamed):
            nodes_a = [_node_key(n, changes.renamed) for n in kept_a]
            nodes_b = [_node_key(n, {}) for n in kept_b]
            return f"{label}: nodes differ: {_first_difference(nodes_a, nodes_b)}"
        if is_fn:
            same = (list(ga.input), list(ga.output), list(ga.attribute), ga.domain, ga.name) == \
                   (list(gb.input), list(gb.output), list(gb.attribute), gb.domain, gb.name)
            if not same:
                return f"{label}: signature differs"
            continue
        inits_a = [_tensor_key(t) for t in ga.initializer if t.name not in changes.removed_initializers]
        inits_b = [_tensor_key(t) for t in gb.initializer if t.name not in changes.added_initializers]
        if sorted(inits_a, key=lambda k: k[0]) != sorted(inits_b, key=lambda k: k[0]):
            return f"{label}: initializers differ: {_first_difference(inits_a, inits_b)}"
        filled = {n for key in changes.removed_nodes for n in key}  # outputs of replaced nodes
        for what in ("input", "output"):
            va_all, vb_all = getattr(ga, what), getattr(gb, what)
            if len(va_all) == len(vb_all) and _same_io(va_all, vb_all, filled if what == "output" else None, ga):
                continue
            ka = [_io_key(v) for v in va_all]
            kb = [_io_key(v) for v in vb_all]
            if what == "output":  # the rewrite declares the type/shape a replaced node's output lacked;
                # an output that is a graph input is declared as that input (files._keep_passthrough_inputs)
                inputs = {k[0]: k for k in (_io_key(v) for v in ga.input)}
                ka = [b if a[0] == b[0] in filled and _fills_in(va, vb) or b == inputs.get(a[0], a) else a
                      for a, b, va, vb in zip(ka, kb, ga.output, gb.output)] + ka[len(kb):]
            if ka != kb:
                return f"{label}: graph {what}s differ: {_first_difference(ka, kb)}"
    opsets_a = {o.domain or "": o.version for o in before.opset_import if o.domain not in removed_domains}
    opsets_b = {o.domain or "": o.version for o in after.opset_import}
    opsets_a[""] = opsets_b.get("", opsets_a.get(""))  # the default opset is the conversion's target
    if opsets_a != opsets_b:
        return f"opsets differ: {opsets_a} vs {opsets_b}"
    return None


def _first_difference(a: list, b: list) -> str:
    for k, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"#{k}: {_short(x)} vs {_short(y)}"
    return f"{len(a)} vs {len(b)} entries" + (f", first extra {_short((a if len(a) > len(b) else b)[min(len(a), len(b))])}"
                                             if len(a) != len(b) else "")


def _short(key) -> str:
    return repr(key[:5])[:160]


# --------------------------------------------------------------------------- same values


#: ops whose two calls on the same inputs may give different values: never taken as equal
_RANDOM = frozenset({"RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike", "Multinomial",
                     "Bernoulli", "Dropout"})


def same_values(before, after) -> bool:
    """True when every graph output of ``after`` is, by value numbering, the very computation
    it is in ``before`` (ModelProtos, external data never read): same ops and attributes on
    values that are the same graph inputs, the same constants (dtype, dims, bytes) or again
    the same computations -- node names, order, duplicates and dead nodes aside.  What a
    cleanup that only merges duplicate nodes and removes dead ones leaves, with no run.
    Models with subgraphs or functions, opsets or graph inputs/outputs that differ: False
    (the caller then runs both models).  Random ops and ops outside the default domain are
    each their own computation (named by their outputs)."""
    if before.ir_version != after.ir_version or _opsets(before) != _opsets(after) \
            or len(before.functions) or len(after.functions):
        return False
    gb, ga = before.graph, after.graph
    for what in ("input", "output"):
        if [_io_key(v) for v in getattr(gb, what)] != [_io_key(v) for v in getattr(ga, what)]:
            return False
    ids: dict = {}  # computation key -> number, shared by both graphs
    before_numbers, after_numbers = _value_numbers(gb, ids), _value_numbers(ga, ids)
    if before_numbers is None or after_numbers is None:
        return False
    return all(before_numbers.get(o.name, -1) == after_numbers.get(o.name, -2) for o in gb.output)


def _opsets(proto) -> dict:
    return {o.domain if o.domain != "ai.onnx" else "": o.version for o in proto.opset_import}


def _value_numbers(g, ids: dict) -> dict | None:
    """value name -> number of its computation in graph ``g`` (see :func:`same_values`), or
    None when the graph is outside what the numbering covers."""
    number = {}
    inputs = {vi.name for vi in g.input}
    for t in g.initializer:  # an initializer that is also an input may be fed: it is that input
        key = ("input", t.name, _tensor_key(t)[1:]) if t.name in inputs else ("const",) + _tensor_key(t)[1:]
        number[t.name] = ids.setdefault(key, len(ids))
    for vi in g.input:
        if vi.name not in number:
            number[vi.name] = ids.setdefault(("input", vi.name), len(ids))
    for n in g.node:
        attrs = sorted(n.attribute, key=lambda a: a.name)
        if any(a.type in (a.GRAPH, a.GRAPHS) or a.ref_attr_name for a in attrs):
            return None
        domain = "" if n.domain in ("", "ai.onnx") else n.domain
        if n.op_type == "Constant" and not domain and len(attrs) == 1 and attrs[0].name == "value":
            outputs = {0: ("const",) + _tensor_key(attrs[0].t)[1:]}
        else:
            try:
                args = tuple(number[i] if i else None for i in n.input)
            except KeyError:  # read before it is made (or from an outer scope)
                return None
            key = (domain, n.op_type, n.overload, tuple(_attr_key(a) for a in attrs), args)
            if domain or n.op_type in _RANDOM:
                key += (tuple(n.output),)
            outputs = {k: key + (k,) for k in range(len(n.output))}
        for k, name in enumerate(n.output):
            if name:
                number[name] = ids.setdefault(outputs[k], len(ids))
    return number
