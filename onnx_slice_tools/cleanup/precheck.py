"""The cleanup pre-check: can any cleanup pass change this model?

:func:`may_change` builds the protobuf index (cleanup/scan.py) and asks every condition of a
default cleanup (cleanup/conditions.py).  None means no pass can change the model --
``cleanup()`` would report ``changed: False`` and leave the model as it is -- so the caller
skips onnx-ir's deserialisation, shape inference and the passes.  Nothing here imports onnx-ir.
"""

from __future__ import annotations

import os

from ..graphs.allocation import paused_gc
from ..graphs.walk import proto_graphs
from .conditions import CONDITIONS
from .scan import MayChange, ProtoIndex

#: Set to "1": the cleanup always runs its passes (the pre-check is not asked).
FULL_CLEANUP_ENV = "ONNX_SLICE_TOOLS_FULL_CLEANUP"


def may_change(proto, passes=None, table=None) -> str | None:
    """None when no cleanup pass can change ``proto``; else a short reason naming the pass and
    the node.  ``passes``: the classes (or instances) asked, by their ``may_fire`` (one without
    it may always fire); by default the conditions of a default cleanup
    (``conditions.CONDITIONS``, which needs no onnx-ir).  ``table``: the main graph's
    ``graphs.table.NodeTable``, if the caller has one (its nodes' fields are then not read again)."""
    asked = list(dict.fromkeys(CONDITIONS.values())) if passes is None else \
        [getattr(p, "may_fire", None) or _no_condition(p) for p in passes]
    with paused_gc():  # ~15 objects a node, no cycles: made and freed while the collector is paused
        return _first_reason(proto, asked, table)


def _first_reason(proto, asked: list, table=None) -> str | None:
    """The first reason of the conditions ``asked`` on the index of ``proto``, or None.  The index
    lives only in this call: it is freed before :func:`may_change` resumes the collector (else the
    collector's next run would scan every object of it first)."""
    try:
        index = ProtoIndex(proto, table)
        for fires in asked:
            reason = fires(index)
            if reason:
                return reason
    except MayChange as exc:
        return str(exc)
    except RecursionError:
        return "may change: the graph nests too deep for the pre-check"
    return None


def _no_condition(p):
    return lambda index: f"{_name(p)} may change it (it has no pre-check)"


def nothing_to_clean(proto, table=None) -> bool:
    """Whether the cleanup can be skipped: :func:`may_change` proves no pass changes ``proto``
    (``table``: as may_change takes it).  Always False when the environment sets
    ``ONNX_SLICE_TOOLS_FULL_CLEANUP=1`` (tests: the passes run as before)."""
    return os.environ.get(FULL_CLEANUP_ENV) != "1" and may_change(proto, table=table) is None


def node_count(proto, holders=None) -> int:
    """Nodes of the main graph, every subgraph and every function (``base.op_counts``).
    ``holders``: as graphs.walk.proto_graphs takes them, if known."""
    return sum(len(g.node) for g, _, _ in proto_graphs(proto, holders=holders))


def unchanged_report(proto, holders=None) -> dict:
    """The report ``passes.cleanup`` returns for a model it does not change (``holders``: as
    :func:`node_count` takes them)."""
    n = node_count(proto, holders)
    return {"changed": False, "nodes_before": n, "nodes_after": n, "removed": {},
            "passes": {name: {"removed": {}, "added": {}} for name in pass_names()}}


def pass_names() -> tuple:
    """The names of the passes of a default cleanup, in the order its report lists them
    (``RemoveDeadPass``, which runs first, then ``cleanup.passes.default_passes()``)."""
    return tuple(CONDITIONS)


def __getattr__(name: str):
    """``PASS_NAMES``: :func:`pass_names`, computed when first read."""
    if name == "PASS_NAMES":
        return pass_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _name(p) -> str:
    return p.__name__ if isinstance(p, type) else type(p).__name__
