"""The cleanup pass ``FoldShapeArithmeticPass``: integer values of rank <= 1 whose every element is
known (static dims, small constants, data movement, integer ``+ - *`` without overflow) become
constants.

Its firing condition on the ModelProto is ``conditions.known_integers`` (cleanup/conditions.py,
beside the other conditions: the pre-check asks them without importing onnx-ir).
"""

from __future__ import annotations

import numpy as np

from . import conditions
from .base import CleanupPass, Facts, replace_uses


class FoldShapeArithmeticPass(CleanupPass):
    """Integer values of rank <= 1 whose every element is known (static dims, small constants,
    data movement, integer ``+ - *`` without overflow) become constants."""

    def run_graph(self, graph, ctx) -> bool:
        facts = Facts()
        changed = False
        for node in list(graph):
            if node.op_type == "Constant" or len(node.outputs) != 1 or node.domain not in ("", "ai.onnx"):
                continue
            out = node.outputs[0]
            if out.is_graph_output() or not out.uses():
                continue
            fact = facts(out)
            if not _known(fact):
                continue
            if all(_folds(facts, u.node) for u in out.uses()):
                continue  # its users fold too: only the outermost values become constants
            array = np.array(fact[2], dtype=fact[0].numpy()).reshape(fact[1])
            replace_uses(out, ctx.constant(graph, array, node, out.name or node.op_type))
            changed = True
        return changed

    may_fire = staticmethod(conditions.known_integers)


def _folds(facts: Facts, node) -> bool:
    if node.op_type == "Constant" or len(node.outputs) != 1 or node.outputs[0].is_graph_output():
        return False
    return _known(facts(node.outputs[0]))


def _known(fact) -> bool:
    return fact is not None and all(isinstance(e, int) for e in fact[2])
