"""The cleanup pass ``RebuildShapeVectorsPass``: an int64 vector whose elements are constants and dims
of one tensor ``x`` (``[b, s, 768]`` from ``Shape -> Cast(int32) -> Gather -> Concat ->
Cast(int64)``) is rebuilt as ``Concat(Shape(x, start, end), [768])`` when that takes fewer nodes
than the arithmetic it replaces (counting only nodes nothing else uses).

Its firing condition on the ModelProto is ``conditions.known_integers`` (cleanup/conditions.py,
beside the other conditions: the pre-check asks them without importing onnx-ir).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from . import conditions
from .base import CleanupPass, Facts, replace_uses, shape_list

#: Ops the shape-vector analysis (``Facts``) reads through.
_SHAPE_OPS = frozenset({"Shape", "Size", "Cast", "Identity", "Squeeze", "Unsqueeze", "Concat", "Gather", "Slice",
                        "Add", "Sub", "Mul", "Neg", "Constant"})


class RebuildShapeVectorsPass(CleanupPass):
    """An int64 vector whose elements are constants and dims of one tensor ``x`` (``[b, s, 768]``
    from ``Shape -> Cast(int32) -> Gather -> Concat -> Cast(int64)``) is rebuilt as
    ``Concat(Shape(x, start, end), [768])`` when that takes fewer nodes than the arithmetic it
    replaces (counting only nodes nothing else uses)."""

    def run_graph(self, graph, ctx) -> bool:
        facts = Facts()
        changed = False
        for node in list(graph):
            if node.domain not in ("", "ai.onnx") or len(node.outputs) != 1 or node.op_type in ("Shape", "Constant") \
                    or node.graph is not graph:
                continue
            out = node.outputs[0]
            if out.is_graph_output() or not out.uses():
                continue
            pieces = _shape_pieces(facts(out))
            if pieces is None or all(_shape_pieces(facts(u.node.outputs[0])) is not None
                                     for u in out.uses() if len(u.node.outputs) == 1):
                continue  # not the outermost such vector
            x = facts.tensors[pieces[1]]
            if x.graph is not graph:
                continue  # an outer-scope value (not tracked here) or a function's
            cost = len([p for p in pieces[0] if p[0] == "dims"]) + (len(pieces[0]) > 1)
            if ctx.opset() < 15:
                cost += 1  # one Shape, then a Slice per run of dims
            if id(graph) in ctx.function_graphs:
                cost += len([p for p in pieces[0] if p[0] == "ints"])
            if cost >= _exclusive_cone(node):
                continue
            replace_uses(out, self._build(graph, ctx, node, out, x, pieces[0]))
            changed = True
        return changed

    def _build(self, graph, ctx, before, out, x, pieces):
        parts = []
        full = None
        for kind, a, b in pieces:
            if kind == "ints":
                parts.append(ctx.constant(graph, np.array(a, dtype=np.int64), before, "dims"))
            elif ctx.opset() >= 15:
                parts.append(ctx.node(graph, "Shape", [x], {"start": a, "end": b}, before, out, (b - a,)))
            else:
                if full is None:
                    full = ctx.node(graph, "Shape", [x], {}, before, out, None)
                starts = ctx.constant(graph, np.array([a], dtype=np.int64), before, "starts")
                ends = ctx.constant(graph, np.array([b], dtype=np.int64), before, "ends")
                parts.append(ctx.node(graph, "Slice", [full, starts, ends], {}, before, out, (b - a,)))
        if len(parts) == 1:
            return parts[0]
        return ctx.node(graph, "Concat", parts, {"axis": 0}, before, out, shape_list(out))

    may_fire = staticmethod(conditions.known_integers)


def _shape_pieces(fact):
    """([("ints", [..], None) | ("dims", start, end)], id(x)) for an int64 vector of constants and
    dims of one tensor x in runs of consecutive dims, with at least one dim; else None."""
    if fact is None or fact[0] != ir.DataType.INT64 or len(fact[1]) != 1:
        return None
    elems = fact[2]
    if any(e is None for e in elems) or all(isinstance(e, int) for e in elems):
        return None
    sources = {e[1] for e in elems if not isinstance(e, int)}
    if len(sources) != 1:
        return None
    pieces: list = []
    for e in elems:
        last = pieces[-1] if pieces else None
        if isinstance(e, int):
            if last is not None and last[0] == "ints":
                last[1].append(e)
            else:
                pieces.append(["ints", [e], None])
        elif last is not None and last[0] == "dims" and last[2] == e[2]:
            last[2] += 1
        else:
            pieces.append(["dims", e[2], e[2] + 1])
    return [tuple(p) for p in pieces], sources.pop()


def _exclusive_cone(root) -> int:
    """How many nodes go dead when ``root``'s output is no longer used: ``root`` and the
    shape-arithmetic nodes above it that nothing else uses."""
    order, seen, stack = [], set(), [root]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        order.append(n)
        if n.op_type == "Shape":
            continue
        for v in n.inputs:
            p = v.producer() if v is not None else None
            if p is not None and p.graph is root.graph and p.op_type in _SHAPE_OPS and p.domain in ("", "ai.onnx"):
                stack.append(p)
    dead = {id(root)}
    grew = True
    while grew:
        grew = False
        for n in order:
            if id(n) in dead:
                continue
            if all(not o.is_graph_output() and all(id(u.node) in dead for u in o.uses()) for o in n.outputs):
                dead.add(id(n))
                grew = True
    return len(dead)
