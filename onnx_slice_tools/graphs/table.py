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
            if n.attribute and holds_subgraph(n):
                holders.append(k)
        self.ops, self.domains, self.inputs, self.outputs, self.holders = ops, domains, inputs, outputs, holders

    @classmethod
    def from_columns(cls, ops: list, domains: list, inputs: list, outputs: list, holders: list) -> NodeTable:
        """The table of a graph from columns its caller already has -- e.g. a pass that rebuilt the
        node list from nodes it had read and nodes it made: they must be what reading the graph
        gives (tests/rewrite/test_rewrite_proto.py compares the rewrite's with a fresh read)."""
        table = cls.__new__(cls)
        table.ops, table.domains, table.inputs, table.outputs, table.holders = ops, domains, inputs, outputs, holders
        return table

    def __len__(self) -> int:
        return len(self.ops)


def holds_subgraph(node) -> bool:
    """Whether a NodeProto has a GRAPH or GRAPHS attribute (by its declared type, even one
    holding no graph): the rule of :attr:`NodeTable.holders`."""
    return any(a.type == 5 or a.type == 10 for a in node.attribute)  # GRAPH, GRAPHS
