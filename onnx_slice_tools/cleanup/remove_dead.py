"""The cleanup pass ``RemoveDeadPass``: Onnx-ir's ``RemoveUnusedNodesPass`` (nodes everywhere, main-
graph initializers), then subgraph initializers nothing reads.

Its firing condition on the ModelProto is ``conditions.remove_dead`` (cleanup/conditions.py,
beside the other conditions: the pre-check asks them without importing onnx-ir).
"""

from __future__ import annotations

import onnx_ir as ir

from . import conditions
from .base import graphs_of


class RemoveDeadPass(ir.passes.InPlacePass):
    """onnx-ir's ``RemoveUnusedNodesPass`` (nodes everywhere, main-graph initializers), then
    subgraph initializers nothing reads."""

    def call(self, model) -> ir.passes.PassResult:
        from onnx_ir.passes.common import RemoveUnusedNodesPass
        graphs = graphs_of(model)
        before = sum(len(g) for g, _ in graphs)
        _remove_dead_in_bulk(model)
        RemoveUnusedNodesPass()(model)
        # Nodes are only removed, so a removal anywhere shows in these graphs' lengths; only
        # then can the set of graphs have changed (a removed If/Loop takes its bodies along).
        changed = sum(len(g) for g, _ in graphs) != before
        if changed:
            graphs = graphs_of(model)
        for graph, is_function in graphs:
            if graph is model.graph or is_function:
                continue
            for name, value in list(graph.initializers.items()):
                if not value.uses() and not value.is_graph_output() and not value.is_graph_input():
                    del graph.initializers[name]
                    changed = True
        return ir.passes.PassResult(model, modified=changed)

    may_fire = staticmethod(conditions.remove_dead)


def _remove_dead_in_bulk(model) -> None:
    """Remove the nodes onnx-ir's ``RemoveUnusedNodesPass`` would remove (same reverse sweep,
    same test, subgraphs entered from their live owner), with one ``remove()`` per graph.

    A workaround for onnx-ir 1.1: its pass removes node by node, and each ``Graph.remove``
    builds a set of all the graph's outputs: quadratic in a model with many outputs and many
    dead nodes.  The pass still runs afterwards (trailing empty inputs,
    unused optional outputs, initializers) and then finds no dead node left."""
    dead: set = set()
    plan: list = []  # (graph, its dead nodes), subgraphs before their owner's graph

    def sweep(graph) -> None:
        outputs = frozenset(graph.outputs)
        here = []
        for node in reversed(graph):
            if all(out not in outputs and all(use.node in dead for use in out.uses()) for out in node.outputs):
                dead.add(node)
                here.append(node)
                continue
            for attr in node.attributes.values():
                if attr.type == ir.AttributeType.GRAPH:
                    sweep(attr.as_graph())
                elif attr.type == ir.AttributeType.GRAPHS:
                    for g in attr.as_graphs():
                        sweep(g)
        plan.append((graph, here))

    for graph in [model.graph, *model.functions.values()]:
        sweep(graph)
    for graph, nodes in plan:
        if nodes:
            graph.remove(nodes, safe=True)
