"""Which graph outputs are quantized, and their step, read from an ONNX graph.

An output is quantized when it is made by a ``QuantizeLinear`` (an integer output: one step is
one unit) or by a ``DequantizeLinear`` (a float output on the grid of its scale), possibly
through nodes that only move data (a slice, a reshape, a transpose: the grid is kept).  Its step
is the scale of that node (per-axis scales: the smallest, so the comparison is never looser).
The comparison rule (tolerance.agree with ``steps``) compares such outputs in steps;
:func:`output_steps` gives the rule per output, calibrated where the framework's own kernel
disagreement was measured.
"""

from __future__ import annotations

import numpy as np

from .tolerance import Steps, calibrated_rtol, steps_rule

#: Nodes whose first output holds values of their first input (moved, selected, reshaped): the
#: quantization grid of the input is the output's.
GRID_PRESERVING = frozenset({"Identity", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Slice",
                             "Gather", "GatherElements", "GatherND", "Concat", "Expand", "Tile",
                             "DepthToSpace", "SpaceToDepth", "MaxPool"})
_DEFAULT = ("", "ai.onnx")
_QUANTIZERS = frozenset({"QuantizeLinear", "DequantizeLinear"})


def output_scales(proto, ops=None) -> dict[str, float]:
    """{graph output name: its quantization step} for the outputs of ``proto`` (a ModelProto)
    made by ``QuantizeLinear`` / ``DequantizeLinear`` through :data:`GRID_PRESERVING` nodes
    (main graph), whose scale is a constant.  ``ops``: the main graph's op types (a NodeTable's
    ``ops``), if read: none of those two, no output is quantized (the graph is not walked)."""
    if ops is not None and not _QUANTIZERS.intersection(ops):
        return {}
    graph = proto.graph
    producer = {o: n for n in graph.node for o in n.output if o}
    consts = {t.name: t for t in graph.initializer}
    for n in graph.node:
        if n.op_type == "Constant" and n.domain in _DEFAULT:
            for a in n.attribute:
                if a.name == "value":
                    consts[n.output[0]] = a.t
    found = {}
    for out in graph.output:
        name, seen = out.name, set()
        while name in producer and name not in seen:
            seen.add(name)
            node = producer[name]
            if node.domain not in _DEFAULT:
                break
            if node.op_type in ("QuantizeLinear", "DequantizeLinear"):
                scale = _scale(consts.get(node.input[1]) if len(node.input) > 1 else None)
                if scale is not None:
                    found[out.name] = scale
                break
            if node.op_type not in GRID_PRESERVING or not node.input:
                break
            name = node.input[0]
    return found


def _scale(tensor) -> float | None:
    if tensor is None:
        return None
    from onnx import numpy_helper
    try:
        values = np.abs(numpy_helper.to_array(tensor).astype(np.float64)).ravel()
    except Exception:  # an external or unreadable tensor: no step known
        return None
    values = values[np.isfinite(values) & (values > 0)]
    return float(values.min()) if values.size else None


def output_steps(proto, calibration: dict | None = None, integers=(), ops=None) -> dict[str, Steps]:
    """{graph output name: Steps} for each quantized output of ``proto`` (:func:`output_scales`)
    and each name in ``integers`` (integer outputs without a scale) that ``calibration`` lists.
    ``calibration``: {output name: (largest, median) disagreement of the framework's own two kernel
    sets, in steps}; an output it does not list gets the floor (quantized) or nothing (bitwise).
    Entries tagged :data:`RELATIVE` (float outputs, :func:`output_rtols`) are not steps: ignored.
    ``ops``: as :func:`output_scales` takes them."""
    calibration = {k: v for k, v in (calibration or {}).items() if not _relative(v)}
    steps = {}
    for name, scale in output_scales(proto, ops).items():
        own = calibration.get(name)
        steps[name] = steps_rule(scale, *(own if own is not None else (None, 0.0)))
    for name in integers:
        if name not in steps and calibration.get(name) is not None and calibration[name][0] > 0:
            steps[name] = steps_rule(None, *calibration[name])
    return steps


#: The tag of a calibration entry for a float output that is not quantized:
#: ``(RELATIVE, largest relative disagreement)`` of the framework's own kernel sets.
RELATIVE = "relative"


def _relative(entry) -> bool:
    return isinstance(entry, tuple) and len(entry) == 2 and entry[0] == RELATIVE


def relative_disagreement(calibration: dict | None) -> dict[str, float]:
    """{output name: the framework's own largest relative disagreement} of the float outputs
    ``calibration`` lists as :data:`RELATIVE`."""
    return {name: float(entry[1]) for name, entry in (calibration or {}).items() if _relative(entry)}


def output_rtols(calibration: dict | None, dtypes: dict) -> dict[str, float]:
    """{output name: rtol} for the float outputs ``calibration`` lists as :data:`RELATIVE`
    (``tolerance.calibrated_rtol`` of the dtype in ``dtypes``, {name: numpy dtype})."""
    return {name: calibrated_rtol(dtypes[name], rel)
            for name, rel in relative_disagreement(calibration).items() if name in dtypes}
