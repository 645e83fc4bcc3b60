"""The tapped model of the in-place run (verification/inplace.py): a copy of the converted
model exposing, as extra graph outputs, what reaches each rewrite and what it gives -- main-graph
tensors directly, through an ``If`` branch, a ``Loop`` body (stacked per iteration, or carried
within a cap) or a call of a model-local function (:func:`tap_model`); each Loop tap's values
read back per iteration (:func:`loop_iterations`); and :func:`prune`, which keeps only the nodes
a copy's outputs need.

Apart from the run so that the graph surgery of the taps reads (and is tested) on its own; the
run (inplace.py) decides what to tap, fits it to the memory budget and compares.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..graphs.table import NodeTable


#: Loop taps (tap_model's ``loops``): stacked scan outputs, or carried values that take any shapes
STACKED, CARRIED = "stacked", "carried"


def _needed_nodes(g, table: NodeTable, needed: set) -> list[int]:
    """Positions (last first) of ``g``'s main-graph nodes that the values in ``needed`` depend
    on, by ``table`` (``g``'s nodes as they are); ``needed`` grows by every value those nodes
    read, the outer values their subgraphs read included."""
    holders = set(table.holders)
    kept = []
    outputs, inputs = table.outputs, table.inputs
    for k in range(len(table) - 1, -1, -1):
        if not needed.isdisjoint(outputs[k]):
            kept.append(k)
            needed.update(inputs[k])
            if k in holders:
                needed.update(_outer_names(g.node[k]))
    return kept


def prune(g, table: NodeTable | None = None) -> None:
    """Drop the main-graph nodes no graph output of ``g`` depends on (onnxruntime computes
    every node and holds what nothing consumes to the end of the run), then the initializers
    nothing left reads (onnxruntime would still read each one in; one that is also a graph
    input stays: it is not fed).  ``table``: ``g``'s nodes as they are, if read."""
    if table is None:
        table = NodeTable(g)
    needed = {o.name for o in g.output}
    kept = _needed_nodes(g, table, needed)
    _prune_initializers(g, needed)
    if len(kept) == len(table):
        return
    if len(table) - len(kept) <= _FEW_PRUNED:  # (a few dropped: deleted in place, the others not copied)
        keep = set(kept)
        for k in range(len(table) - 1, -1, -1):
            if k not in keep:
                del g.node[k]
        return
    nodes = [g.node[k] for k in reversed(kept)]
    del g.node[:]
    g.node.extend(nodes)


#: prune deletes up to this many nodes in place (each deletion moves the nodes after it)
_FEW_PRUNED = 64


def _prune_initializers(g, needed: set) -> None:
    """Drop ``g``'s initializers whose names are not in ``needed`` nor graph inputs."""
    inits = g.initializer
    if all(t.name in needed for t in inits):
        return
    needed = needed | {vi.name for vi in g.input}
    kept = [t for t in inits if t.name in needed]
    if len(kept) < len(inits):
        del inits[:]
        inits.extend(kept)


def _outer_names(node) -> set:
    """Every value name read inside ``node``'s subgraphs (a superset of the outer ones it needs)."""
    names: set = set()
    stack = [a.g for a in node.attribute if a.type == a.GRAPH] + \
        [g for a in node.attribute if a.type == a.GRAPHS for g in a.graphs]
    while stack:
        g = stack.pop()
        for n in g.node:
            names.update(n.input)
            stack.extend([a.g for a in n.attribute if a.type == a.GRAPH])
            stack.extend(sg for a in n.attribute if a.type == a.GRAPHS for sg in a.graphs)
        names.update(o.name for o in g.output)
    return names


@dataclasses.dataclass
class _Taps:
    names: list = dataclasses.field(default_factory=list)   # main-graph outputs to fetch
    views: dict = dataclasses.field(default_factory=dict)   # id(record) -> {tensor name: fetched name}
    branch: dict = dataclasses.field(default_factory=dict)  # id(record) -> (fetched condition, then?)
    loop: set = dataclasses.field(default_factory=set)      # id(record) of rewrites in Loop bodies
    loop_nodes: set = dataclasses.field(default_factory=set)  # names of the Loop nodes tapped
    carried: dict = dataclasses.field(default_factory=dict)  # fetched elements -> fetched shapes (CARRIED)
    recording: dict = dataclasses.field(default_factory=dict)  # fetched elements -> its "every iteration kept" flag
    cut: str = ""  # why a carried tap kept fewer iterations than its Loop ran (the memory budget), once set
    partial: set = dataclasses.field(default_factory=set)  # id(record) checked on a prefix of its Loop's iterations
    calls: dict = dataclasses.field(default_factory=dict)   # id(record) -> [view per call of its function]
    elems: dict = dataclasses.field(default_factory=dict)   # fetched name -> element type
    deferred: dict = dataclasses.field(default_factory=dict)  # id(record) -> its output, left to the as-shipped run

    seen: set = dataclasses.field(default_factory=set)

    def fetch(self, name: str) -> str:
        if name not in self.seen:
            self.seen.add(name)
            self.names.append(name)
        return name


def tap_model(proto, records: list, loops: str | None = STACKED, deferred: frozenset = frozenset(),
               table: NodeTable | None = None):
    """A copy of ``proto`` exposing, as graph outputs, what reaches each rewrite and what it
    gives: main-graph tensors directly; tensors of an ``If`` branch through extra outputs of
    both branches (an empty tensor of the type in the other one) and of the If node; tensors
    of a ``Loop`` body per iteration, by ``loops``: STACKED as extra scan outputs (one tensor,
    which onnxruntime refuses when the tensor changes shape between iterations), CARRIED as
    extra loop-carried values that append each iteration's elements and shape (any shapes, a
    copy of what is held at each iteration), None: not tapped.
    ``deferred``: main-graph rewrite outputs (graph outputs of ``proto``) not fetched -- the
    as-shipped run gives them: the copy neither outputs nor computes them (it keeps only the
    nodes its outputs need).  ``table``: ``proto``'s main graph's, if read."""
    import onnx
    # a copy made only once what it keeps is known, when nothing below changes its nodes: every
    # record's taps are main-graph tensors, fetched under their own names (see _pruned_copy)
    later = bool(deferred) and all(r.graph == "main" for r in records)
    if later:
        tapped, g = None, proto.graph
    else:
        tapped = onnx.ModelProto()
        tapped.CopyFrom(proto)
        g = tapped.graph
    taps = _Taps()
    ifs: dict = {}
    present: dict = {}  # id(graph) -> names in it, built once (the graph is only appended to below)
    bodies: dict = {}
    functions = {f"function {f.domain}::{f.name}": f for f in (proto if tapped is None else tapped).functions}
    calls: dict = {}
    main: set | None = None  # names in the main graph
    if table is None:
        table = NodeTable(g)
    for k, op in enumerate(table.ops):
        if functions:
            label = f"function {table.domains[k]}::{op}"
            if label in functions:
                calls.setdefault(label, []).append(g.node[k])
        if op == "If":
            n = g.node[k]
            for a in n.attribute:
                ifs.setdefault(f"main > If {n.name!r}.{a.name}", []).append((n, a))
        elif op == "Loop":
            n = g.node[k]
            for a in n.attribute:
                bodies.setdefault(f"main > Loop {n.name!r}.{a.name}", []).append((n, a.g))
    fetch, elems, views = taps.fetch, taps.elems, taps.views
    for r in records:  # (records.InPlace adapters)
        elem = r.tensors  # what to tap: tensor name -> element type, the output last
        if r.graph == "main":  # (main-graph tensors are fetched under their own names)
            if main is None:
                main = _names_in(g, present, table)
            output = r.output
            if output in deferred:
                taps.deferred[id(r)] = output
                wanted = r.reads
            else:
                wanted = (*r.reads, output)
            view = views[id(r)] = {}
            for name in wanted:
                if name in main and name not in view:
                    view[name] = fetch(name)
                    elems[name] = elem[name]
            continue
        elif len(ifs.get(r.graph, ())) == 1:
            node, attr = ifs[r.graph][0]
            names = _present(attr.g, list(elem), present, outer=g)
            taps.views[id(r)] = {name: taps.fetch(_tap_through_if(node, attr.name, name, elem[name]))
                                 for name in names}
            taps.branch[id(r)] = (taps.fetch(node.input[0]), attr.name == "then_branch")
        elif r.graph in functions and calls.get(r.graph):
            names = _present(functions[r.graph], list(elem), present)
            outs = [_tap_through_function(functions[r.graph], name) for name in names]
            taps.calls[id(r)] = [{name: taps.fetch(_call_output(call, functions[r.graph], out))
                                  for name, out in zip(names, outs)} for call in calls[r.graph]]
            taps.views[id(r)] = {}
            for view in taps.calls[id(r)]:
                for name, fetched in view.items():
                    taps.elems[fetched] = elem[name]
        elif loops is not None and len(bodies.get(r.graph, ())) == 1:
            node, body = bodies[r.graph][0]
            names = _present(body, list(elem), present, outer=g)
            view = taps.views[id(r)] = {}
            for name in names:
                if loops == CARRIED:
                    flat, dims = carry_through_loop(g, node, body, name, elem[name], capped=True)
                    taps.carried[taps.fetch(flat)] = taps.fetch(dims)
                    taps.recording[flat] = taps.fetch(f"{flat}_rec")
                    taps.elems[dims], taps.elems[f"{flat}_rec"] = 7, 9
                    view[name] = flat
                else:
                    view[name] = taps.fetch(_tap_through_loop(node, body, name, elem[name]))
            taps.loop.add(id(r))
            taps.loop_nodes.add(node.name)
        for name, fetched in taps.views.get(id(r), {}).items():
            taps.elems[fetched] = elem[name]
    if tapped is None:
        return _pruned_copy(proto, taps, deferred, table), taps
    outputs = {o.name for o in g.output}
    for name in taps.names:
        if name not in outputs:
            g.output.append(onnx.helper.make_empty_tensor_value_info(name))
    if deferred:
        kept = [vi for vi in g.output if vi.name not in deferred or vi.name in taps.seen]
        del g.output[:]
        g.output.extend(kept)
        # (taps through If, Loop or function calls add outputs to main-graph nodes: read them again)
        prune(g, None if taps.branch or taps.loop or taps.calls else table)
    return tapped, taps


def _pruned_copy(proto, taps: _Taps, deferred: frozenset, table: NodeTable):
    """What tap_model's copy of ``proto`` is, once pruned (:func:`prune`), when its taps are all
    main-graph tensors: ``proto``'s graph outputs less ``deferred`` (unless tapped), then each tap
    not already one; only the nodes those outputs need and the initializers they or the graph
    inputs name -- made without copying the nodes and initializers :func:`prune` would drop."""
    import onnx
    src = proto.graph
    kept_outputs = [vi for vi in src.output if vi.name not in deferred or vi.name in taps.seen]
    names = {vi.name for vi in kept_outputs}
    extra = [onnx.helper.make_empty_tensor_value_info(name) for name in taps.names if name not in names]
    names.update(vi.name for vi in extra)
    needed = set(names)
    kept = _needed_nodes(src, table, needed)
    needed.update(vi.name for vi in src.input)
    tapped = onnx.ModelProto()
    _copy_fields(proto, tapped, skip=("graph",))
    g = tapped.graph
    _copy_fields(src, g, skip=("node", "initializer", "output"))
    g.node.extend([src.node[k] for k in reversed(kept)])
    g.initializer.extend([t for t in src.initializer if t.name in needed])
    g.output.extend(kept_outputs)
    g.output.extend(extra)
    return tapped


def _copy_fields(src, dst, skip: tuple) -> None:
    """Copy each field set in message ``src`` into the empty ``dst`` (same type), but ``skip``."""
    for fd, value in src.ListFields():
        if fd.name in skip:
            continue
        repeated = fd.is_repeated if hasattr(fd, "is_repeated") else fd.label == fd.LABEL_REPEATED
        if repeated:
            getattr(dst, fd.name).extend(value)
        elif fd.message_type is not None:
            getattr(dst, fd.name).CopyFrom(value)
        else:
            setattr(dst, fd.name, value)


def _present(graph, names: list, cache: dict, outer=None) -> list:
    """``names`` that exist in ``graph`` (or its outer graph): a runtime index the lowering
    does not read (e.g. a shrink's end) may have been removed.  ``cache``: id(graph) -> names."""
    found = [_names_in(gr, cache) for gr in ((graph, outer) if outer is not None else (graph,))]
    if len(found) == 1:
        return list(dict.fromkeys(name for name in names if name in found[0]))
    return list(dict.fromkeys(name for name in names if name in found[0] or name in found[1]))


def _names_in(graph, cache: dict, table: NodeTable | None = None) -> set:
    """The value names ``graph`` (a graph or function) makes or takes, read once (``cache``: id(graph) -> (graph, names);
    ``table``: the graph's, if read)."""
    held = cache.get(id(graph))
    if held is not None and held[0] is graph:
        return held[1]
    made = (o for outs in table.outputs for o in outs) if table is not None else \
        (o for n in graph.node for o in n.output)
    names = {*made} | {getattr(i, "name", i) for i in graph.input} | {t.name for t in getattr(graph, "initializer", ())}
    # the graph is held with its names: a protobuf wrapper (``attr.g``) may be made afresh at each
    # access, and a freed one's id may be given to another graph's
    cache[id(graph)] = (graph, names)
    return names  # (function inputs are names)


def _tap_through_function(f, name: str) -> str:
    """Expose ``name`` inside function ``f`` as a new function output; returns the output."""
    from onnx import helper
    out = f"{name}::tap_fn"
    if out not in f.output:
        f.node.append(helper.make_node("Identity", [name], [out]))
        f.output.append(out)
    return out


def _call_output(call, f, out: str) -> str:
    """The name a call node gives the function output ``out`` (outputs added as needed)."""
    k = list(f.output).index(out)
    base = call.output[0] if len(call.output) and call.output[0] else f"::call{id(call)}"  # a call may have none
    while len(call.output) <= k:
        call.output.append(f"{base}::{call.name or 'call'}::out{len(call.output)}")
    return call.output[k]


def _tap_through_loop(node, body, name: str, elem: int) -> str:
    """Expose ``name`` of Loop ``node``'s body as a new scan output (stacked per iteration)."""
    from onnx import helper
    tap = f"{name}::tap_loop"
    if tap in node.output:
        return tap
    inner = f"{tap}_body"
    body.node.append(helper.make_node("Identity", [name], [inner]))
    body.output.append(helper.make_tensor_value_info(inner, elem, None))
    node.output.append(tap)
    return tap


def carry_through_loop(g, node, body, name: str, elem: int, capped: bool = False) -> tuple[str, str]:
    """Expose ``name`` of Loop ``node``'s body (in graph ``g``) as two new loop-carried values:
    its elements appended at each iteration (1-D) and its rank and dims appended (int64).
    Returns their final values' names (see :func:`loop_iterations`).  ``capped``: a third carried
    value, ``<elements>_rec`` (bool), stays true while every iteration so far was appended;
    an iteration is appended only while the elements held stay within the int64 scalar
    initializer ``<elements>_cap`` (:func:`cap_name`, set by the run to its share of the memory
    budget) -- the iterations kept are a prefix, whatever the trip count."""
    from onnx import helper
    tap = f"{name}::carry_loop"
    if tap in node.output:
        return tap, f"{tap}_dims"
    made: list = []
    carried: list = [(tap, elem, [0], []), (f"{tap}_dims", 7, [0], [])] + \
        ([(f"{tap}_rec", 9, [], [True])] if capped else [])
    for out, typ, dims0, value in carried:
        g.initializer.append(helper.make_tensor(f"{out}_init", typ, dims0, value))
        n_carried = len(node.input) - 2  # (inputs: trip count, condition, carried values)
        node.input.append(f"{out}_init")
        body.input.append(helper.make_tensor_value_info(f"{out}_in", typ, None))
        # (outputs: condition, carried values, scan outputs; the node's: carried, scan)
        body.output.insert(1 + n_carried, helper.make_tensor_value_info(f"{out}_out", typ, None))
        node.output.insert(n_carried, out)
        made.append(out)
    flat, dims = made[:2]
    nodes = [
        helper.make_node("Constant", [], [f"{flat}_minus1"], value=helper.make_tensor(f"{flat}_minus1", 7, [1], [-1])),
        helper.make_node("Reshape", [name, f"{flat}_minus1"], [f"{flat}_flat"]),
        helper.make_node("Shape", [name], [f"{dims}_shape"]),
        helper.make_node("Shape", [f"{dims}_shape"], [f"{dims}_rank"]),
    ]
    if not capped:
        nodes += [helper.make_node("Concat", [f"{flat}_in", f"{flat}_flat"], [f"{flat}_out"], axis=0),
                  helper.make_node("Concat", [f"{dims}_in", f"{dims}_rank", f"{dims}_shape"], [f"{dims}_out"],
                                   axis=0)]
    else:  # append all of this iteration (end: the int64 maximum) or none of it (end 0)
        g.initializer.append(helper.make_tensor(cap_name(flat), 7, [], [0]))
        rec = f"{flat}_rec"
        nodes += [
            helper.make_node("Size", [f"{flat}_in"], [f"{rec}_held"]),
            helper.make_node("Size", [name], [f"{rec}_size"]),
            helper.make_node("Add", [f"{rec}_held", f"{rec}_size"], [f"{rec}_total"]),
            helper.make_node("Greater", [f"{rec}_total", cap_name(flat)], [f"{rec}_over"]),
            helper.make_node("Not", [f"{rec}_over"], [f"{rec}_fits"]),
            helper.make_node("And", [f"{rec}_in", f"{rec}_fits"], [f"{rec}_out"]),
            helper.make_node("Constant", [], [f"{rec}_all"], value=helper.make_tensor(f"{rec}_all", 7, [1], [2 ** 63 - 1])),
            helper.make_node("Constant", [], [f"{rec}_none"], value=helper.make_tensor(f"{rec}_none", 7, [1], [0])),
            helper.make_node("Where", [f"{rec}_out", f"{rec}_all", f"{rec}_none"], [f"{rec}_end"]),
            helper.make_node("Slice", [f"{flat}_flat", f"{rec}_none", f"{rec}_end"], [f"{rec}_part"]),
            helper.make_node("Concat", [f"{dims}_rank", f"{dims}_shape"], [f"{rec}_dims"], axis=0),
            helper.make_node("Slice", [f"{rec}_dims", f"{rec}_none", f"{rec}_end"], [f"{rec}_dims_part"]),
            helper.make_node("Concat", [f"{flat}_in", f"{rec}_part"], [f"{flat}_out"], axis=0),
            helper.make_node("Concat", [f"{dims}_in", f"{rec}_dims_part"], [f"{dims}_out"], axis=0),
        ]
    body.node.extend(nodes)
    return flat, dims


def cap_name(flat: str) -> str:
    """The initializer holding the most elements the carried tap ``flat`` keeps."""
    return f"{flat}_cap"


def loop_iterations(got: dict, name: str, carried: dict) -> list:
    """The per-iteration values of a Loop tap ``name`` in the run ``got``: the stacked scan
    output's slices, or (``carried``: elements -> dims) the carried elements cut and reshaped
    by the dims appended with them (rank, then each dim)."""
    if name not in carried:
        return list(got[name])
    flat, dims = np.asarray(got[name]).reshape(-1), np.asarray(got[carried[name]]).reshape(-1).tolist()
    values, at, k = [], 0, 0
    while k < len(dims):
        shape = tuple(int(d) for d in dims[k + 1:k + 1 + int(dims[k])])
        k += 1 + int(dims[k])
        size = int(np.prod(shape, dtype=np.int64))
        values.append(flat[at:at + size].reshape(shape))
        at += size
    return values


def _tap_through_if(node, branch: str, name: str, elem: int) -> str:
    """Expose ``name`` of one branch of If ``node`` as a new output of the node; returns its name."""
    from onnx import helper
    tap = f"{name}::tap_{branch}"  # a tensor of the outer graph can be read by both branches
    if tap in node.output:
        return tap
    for a in node.attribute:
        g = a.g
        out = f"{tap}_{a.name}"
        if a.name == branch:
            g.node.append(helper.make_node("Identity", [name], [out]))
        else:
            g.node.append(helper.make_node("Constant", [], [out], value=helper.make_tensor(out, elem, [0], [])))
        g.output.append(helper.make_tensor_value_info(out, elem, None))
    node.output.append(tap)
    return tap
