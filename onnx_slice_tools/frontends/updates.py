"""The slice-update family in framework inputs: tf2onnx leaves ``XlaDynamicUpdateSlice``,
``XlaDynamicSlice``, ``TensorStridedSliceUpdate``, ``StridedSliceGrad``, TFLite
``DYNAMIC_UPDATE_SLICE`` and ``GELU`` raw; :func:`lower_family` rewrites them
(rewrite/updates.py) and checks each rewrite against the reference in onnxruntime
(verification/update_checks.py) before the model goes on.  A node the framework rejects, one that
cannot be rewritten, or a failed check is a failed conversion (:class:`ConversionError`, exit 1)."""

from __future__ import annotations

from collections import Counter

from ..errors import ConversionError, StridedSliceError
from ..rewrite.updates import UpdateRecord, has_family, rewrite_updates
from ..verification.checks import kind, passed
from ..verification.update_checks import check_records


def lower_family(model, path) -> list[UpdateRecord]:
    """Rewrite and check the family's nodes of ``model`` (converted from ``path``), in place."""
    if not has_family(model):
        return []
    try:
        records = rewrite_updates(model)
    except StridedSliceError as exc:
        raise ConversionError(f"{exc}; nothing written", path=str(path)) from None
    for record, status in zip(records, check_records(records)):
        if kind(status) != "passed":
            raise ConversionError(f"node {record.node!r} ({record.op_type}): the rewrite's check {status}; "
                                  "nothing written", path=str(path))
    return records


def updates_status(records: list[UpdateRecord], inplace: dict | None = None) -> str:
    """The ``slice_updates`` model check: what was rewritten into what, each rewrite checked (a
    failed check stops the conversion in :func:`lower_family`, so every listed one passed), and
    how many the in-place run checked in the converted model (``inplace``: position in
    ``records`` -> in-place status, report.Report.update_inplace; a failure there fails
    ``model_run``, which names it)."""
    forms = Counter((r.op_type, "/".join(r.lowering.describe())) for r in records)
    what = "; ".join(f"{n} {op} as {ops}" for (op, ops), n in sorted(forms.items()))
    done = sum(kind(s) == "passed" for s in (inplace or {}).values())
    return passed(f"{what}: each checked against the reference in onnxruntime; "
                  f"{done}/{len(records)} checked in place")


#: TensorFlow ops that write a variable: the function keeps state between calls, which an ONNX
#: graph (a pure function of its inputs) cannot; freezing the variable would give the first
#: call's result only.
STATE_WRITES = ("ResourceStridedSliceAssign", "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp")


def state_writes(concrete) -> list[str]:
    """``"OP (node 'NAME')"`` for the first node of each :data:`STATE_WRITES` op in the concrete
    function ``concrete`` (its graph and the functions it calls)."""
    graph_def = concrete.graph.as_graph_def()
    found: dict[str, str] = {}
    for nodes in [graph_def.node] + [f.node_def for f in graph_def.library.function]:
        for n in nodes:
            if n.op in STATE_WRITES and n.op not in found:
                found[n.op] = f"{n.op} (node {n.name!r})"
    return sorted(found.values())


def refuse_state_writes(fn, signature, path) -> None:
    """A :class:`ConversionError` (exit 1, one line) when ``fn`` writes a variable (tf2onnx raises
    on such graphs, which is not an unusable input: TensorFlow runs it)."""
    try:
        writes = state_writes(fn.get_concrete_function(*signature))
    except Exception:  # the function cannot be traced: the caller reports that
        return
    if writes:
        raise ConversionError(f"the function writes a variable ({', '.join(writes)}): its state is kept between "
                              "calls, an ONNX graph has none; not converted, nothing written", path=str(path))
