"""A graph's nodes read once into Python lists: :class:`NodeTable`.

Each read of a NodeProto field through protobuf's Python API builds new Python objects (the
node's wrapper, its input list, its strings).  The whole-model checks ask the same few fields of
every node of one model several times (liveness, pure data movement, pruning the tapped copy,
the structural proof); on a model of 10,000 nodes each such pass costs tens of milliseconds in
reads alone.  A table reads them once.  Its lists are aligned with ``graph.node`` and describe
the graph as it was read: a caller that changes the graph's nodes reads a new table.
"""

from __future__ import annotations


class NodeTable:
    """Op type, domain, inputs and outputs (tuples) of each node of one graph, by position, and
    the positions of the nodes that hold subgraphs (a GRAPH or GRAPHS attribute, by its declared
    type as graphs.walk.proto_subgraphs reads it)."""

    __slots__ = ("ops", "domains", "inputs", "outputs", "holders")

    def __init__(self, graph):
        ops: list[str] = []
        domains: list[str] = []
        inputs: list[tuple] = []
        outputs: list[tuple] = []
        holders: list[int] = []
        for k, n in enumerate(graph.node):
            ops.append(n.op_type)
            domains.append(n.domain)
            inputs.append(tuple(n.input))
            outputs.append(tuple(n.output))
            if n.attribute and any(a.type == 5 or a.type == 10 for a in n.attribute):  # GRAPH, GRAPHS
                holders.append(k)
        self.ops, self.domains, self.inputs, self.outputs, self.holders = ops, domains, inputs, outputs, holders

    def __len__(self) -> int:
        return len(self.ops)
