"""``explain --update SHAPE``: how a slice write is read, planned and lowered (docs/slice_updates.md).

With a spec: ``TensorStridedSliceUpdate(x, spec, value)`` with ``value`` of SHAPE (the positions
the StridedSlice plan reads, the broadcast, the ONNX nodes).  Without one:
``XlaDynamicUpdateSlice`` / ``DYNAMIC_UPDATE_SLICE`` of an update of SHAPE into ``x`` at
run-time starts (the narrow axes, each start's clamp, the ONNX nodes)."""

from __future__ import annotations

from ..errors import StridedSliceError


def _fmt(shape) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def explain_update_text(spec, shape, update_shape, opset: int = 17) -> str:
    from ..lowering import update as lowering
    from ..semantics import update as semantics
    from ..semantics.plan import make_plan
    if shape is None or update_shape is None:
        raise StridedSliceError("--update needs --shape and the update's shape with known ranks", field="--shape")
    lines = []
    if spec is None:
        uplan = semantics.update_plan(shape, update_shape)
        low = lowering.lower_dynamic_update_slice("x", "update", "indices", "y", uplan, index_elem=7, opset=opset,
                                                  prefix="y")
        lines += ["XlaDynamicUpdateSlice / DYNAMIC_UPDATE_SLICE (starts given at run time, int64)",
                  f"input shape: {_fmt(shape)}, update shape: {_fmt(update_shape)}"]
        for axis, (d, w) in enumerate(zip(shape, update_shape)):
            if axis in uplan.narrow:
                lines.append(f"  axis {axis} (dim {d}): update of {w} written at indices[{axis}] clamped to "
                             f"[0, {d} - {w}]" + (f" = [0, {d - w}]" if isinstance(d, int) and isinstance(w, int)
                                                  else ""))
            else:
                lines.append(f"  axis {axis} (dim {d}): the update covers it whole (indices[{axis}] has no effect)")
        if uplan.is_empty:
            lines.append("  the update is empty: the result is x")
    else:
        plan = make_plan(spec, shape)
        final = tuple(plan.output_shape or ())
        lines += [f"TensorStridedSliceUpdate: {spec.index_notation()} = value",
                  f"input shape: {_fmt(shape)}, slice shape: {_fmt(final)}, value shape: {_fmt(update_shape)}"]
        if not all(isinstance(d, int) for d in tuple(shape) + tuple(update_shape)):
            raise StridedSliceError("the rewrite needs known input and value shapes", field="--shape")
        if all(isinstance(d, int) for d in final):
            empty = 0 in final
            if not empty:
                semantics.broadcast_shape(update_shape, [semantics.known(d) for d in final])
            for a, positions in zip(plan.axes, lowering.slice_positions(plan)):
                lines.append(f"  axis {a.axis} (dim {a.dim}): positions {positions.tolist()}")
            if empty:
                lines.append("  the slice is empty: the result is x (value is not looked at)")
        low = lowering.lower_slice_write("x", "value", "y", plan, tuple(update_shape), elem=1, prefix="y")
    lines.append(f"ONNX nodes ({low.form}):")
    lines += [f"  {n.op_type}({', '.join(n.input)})" for n in low.nodes]
    return "\n".join(lines)
