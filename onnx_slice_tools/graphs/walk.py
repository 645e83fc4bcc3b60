"""Every graph of a model: the main graph, its If/Loop/Scan bodies (any depth) and model-local
functions with theirs -- one walker per representation, each visiting every graph (and so every
node) exactly once: :func:`all_graphs` / :func:`all_nodes` for onnx-ir models,
:func:`proto_graphs` / :func:`proto_nodes` (on :func:`proto_subgraphs`) for ModelProtos.

A caller that wants every node walks the graphs these return and iterates each graph's own
nodes; recursing again from a listed graph (e.g. ``RecursiveGraphIterator`` on a listed graph)
would visit every subgraph node twice."""

from __future__ import annotations


def all_graphs(model):
    """(graph_or_function, label, is_function) for the main graph, all subgraphs and functions.

    A subgraph's label names the path to it (``main > If 'a'.then_branch > Loop 'b'.body``).
    Subgraphs are listed in the order a depth-first walk finds them (the order of
    ``onnx_ir.traversal.RecursiveGraphIterator``); the walk is hand-written because it runs
    after every cleanup pass and the iterator's per-node generators cost several times more."""
    import onnx_ir as ir
    graph_type, graphs_type, attr_class = ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS, ir.Attr
    out = [(model.graph, "main", False)]
    seen = {id(model.graph)}

    def walk(graph, label):
        for node in graph:
            attributes = node.attributes
            if not attributes:
                continue
            subgraphs = []
            for attr in attributes.values():
                if not isinstance(attr, attr_class):
                    continue
                if attr.type == graph_type:
                    graphs = [attr.value]
                elif attr.type == graphs_type:
                    graphs = list(attr.value)
                else:
                    continue
                inner = f"{label} > {node.op_type} {node.name!r}.{attr.name}"
                for g in graphs:
                    if id(g) not in seen:
                        seen.add(id(g))
                        out.append((g, inner, False))
                        subgraphs.append((g, inner))
            for g, inner in subgraphs:
                walk(g, inner)

    walk(model.graph, "main")
    for f in model.functions.values():
        label = f"function {f.domain}::{f.name}"
        out.append((f, label, True))
        walk(f, label)
    return out


def all_nodes(model):
    """(node, label) for every node of an onnx-ir model, each once: main graph, subgraphs (any
    depth) and function bodies; ``label`` is the :func:`all_graphs` label of its own graph."""
    for graph, label, _ in all_graphs(model):
        for node in graph:
            yield node, label


def proto_subgraphs(node) -> list:
    """The GraphProtos a NodeProto holds: its GRAPH and GRAPHS attributes, read by their declared
    type as onnx-ir reads them (io/validate.py looks at every ``g``/``graphs`` field instead)."""
    out = []
    for a in node.attribute:
        if a.type == 5:  # AttributeProto.GRAPH
            out.append(a.g)
        elif a.type == 10:  # AttributeProto.GRAPHS
            out.extend(a.graphs)
    return out


def proto_graphs(model_or_graph, functions: bool = True, holders=None):
    """(graph_or_function, label, is_function) for a ModelProto (or one GraphProto): the main
    graph, its subgraphs (any depth, depth first, each listed before its own subgraphs) and, for a model, each function
    body with its
    subgraphs -- the labels of :func:`all_graphs`.  ``holders``: the positions of the main
    graph's nodes that hold subgraphs (graphs.table.NodeTable.holders), when known: only they
    are looked into."""
    graph = getattr(model_or_graph, "graph", model_or_graph)
    out = []

    def walk(g, label, is_function, positions=None):
        out.append((g, label, is_function))
        for node in g.node if positions is None else (g.node[k] for k in positions):
            if not node.attribute:
                continue
            for a in node.attribute:
                if a.type == 5 or a.type == 10:  # AttributeProto.GRAPH, GRAPHS
                    for sub in ([a.g] if a.type == 5 else a.graphs):
                        walk(sub, f"{label} > {node.op_type} {node.name!r}.{a.name}", False)

    walk(graph, "main", False, holders)
    if functions and graph is not model_or_graph:
        for f in model_or_graph.functions:
            walk(f, f"function {f.domain}::{f.name}", True)
    return out


def proto_nodes(model_or_graph, functions: bool = True):
    """(node, label) for every NodeProto of a ModelProto (or GraphProto), each once."""
    for graph, label, _ in proto_graphs(model_or_graph, functions):
        for node in graph.node:
            yield node, label
