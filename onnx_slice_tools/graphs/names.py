"""Unique names for generated nodes, values and constants.

One :class:`NameAllocator` per rewritten model knows every name already used -- nodes,
values and initializers of the main graph, every subgraph and every function -- and hands
out names that collide with none of them nor with each other.  The rewrite pass and the
``ConstantPool`` of each graph share one.
"""

from __future__ import annotations


class NameAllocator:
    """``fresh("ss/Slice:0")`` returns that name if unused, else ``ss/Slice:0_1``, ``_2`` ..."""

    def __init__(self, taken=()):
        self.taken: set[str] = set(taken)
        self._next: dict[str, int] = {}

    @classmethod
    def holding(cls, taken: set[str]) -> "NameAllocator":
        """An allocator that takes the caller's own set ``taken`` over (the constructor copies
        what it is given: a set of every name of a large model is not copied again)."""
        names = cls()
        names.taken = taken
        return names

    @classmethod
    def for_model(cls, model) -> "NameAllocator":
        """An allocator that knows every name of an onnx_ir model (all graphs and functions)."""
        import onnx_ir as ir
        from .walk import all_graphs as _all_graphs
        taken: set[str] = set()
        values = []
        for graph, _, _ in _all_graphs(model):  # every subgraph is listed: plain loops suffice
            values.extend(graph.inputs)
            values.extend(graph.outputs)
            if isinstance(graph, ir.Graph):
                taken.update(graph.initializers)
            for node in graph:
                if node.name:
                    taken.add(node.name)
                values.extend(v for v in node.inputs if v is not None)
                values.extend(node.outputs)
        taken.update(v.name for v in values if v is not None and v.name)
        return cls.holding(taken)

    def fresh(self, base: str) -> str:
        if base not in self.taken:
            self.taken.add(base)
            return base
        k = self._next.get(base, 1)
        while f"{base}_{k}" in self.taken:
            k += 1
        self._next[base] = k + 1
        name = f"{base}_{k}"
        self.taken.add(name)
        return name

