"""Variable writes in framework inputs.  The slice-update family tf2onnx leaves raw
(``XlaDynamicUpdateSlice``, ``XlaDynamicSlice``, ``TensorStridedSliceUpdate``,
``StridedSliceGrad``, TFLite ``DYNAMIC_UPDATE_SLICE`` and ``GELU``) is rewritten by the pipeline
itself (api._slice_updates), for an ``.onnx`` input and a framework input's export alike; a
variable's slice assignment (``ResourceStridedSliceAssign``) has no ONNX form: refused here."""

from __future__ import annotations

from ..errors import ConversionError


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
