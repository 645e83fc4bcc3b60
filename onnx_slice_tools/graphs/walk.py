"""Every graph of a model: the main graph, its If/Loop/Scan bodies (any depth) and model-local
functions with theirs.  Used by the rewrite pass, the cleanup, the audits and the file checks."""

from __future__ import annotations


def all_graphs(model):
    """(graph_or_function, label, is_function) for the main graph, all subgraphs and functions.

    Subgraphs are listed in the order a depth-first walk finds them (the order of
    ``onnx_ir.traversal.RecursiveGraphIterator``); the walk is hand-written because it runs
    after every cleanup pass and the iterator's per-node generators cost ~6x more."""
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
                for g in graphs:
                    if id(g) not in seen:
                        seen.add(id(g))
                        out.append((g, f"{label} > {node.op_type} {node.name!r}.{attr.name}", False))
                subgraphs.extend(graphs)
            for g in subgraphs:
                walk(g, label)

    walk(model.graph, "main")
    for f in model.functions.values():
        label = f"function {f.domain}::{f.name}"
        out.append((f, label, True))
        walk(f, label)
    return out


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
