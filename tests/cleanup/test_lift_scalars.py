"""The cleanup pass LiftScalarsPass (cleanup/lift_scalars.py): on graphs built with onnx.helper, the
model before and after run in onnxruntime and compared bitwise (helpers: test_cleanup.py)."""

from __future__ import annotations


import numpy as np
from onnx import TensorProto, helper

from onnx_slice_tools.cleanup.passes import (
    LiftScalarsPass,
)
from test_cleanup import I64, c, clean, floats, model, ops, same_outputs, shape_scalar_chain, x_input


def test_lift_cancels_squeeze_unsqueeze_through_cast_and_add():
    n1, i1, a = shape_scalar_chain("x", 0, "a_", cast_to=I64)
    n2, i2, b = shape_scalar_chain("x", 1, "b_", cast_to=I64, add=3)
    nodes = n1 + n2 + [helper.make_node("Concat", [a, b], ["shape"], axis=0),
                       helper.make_node("Mul", ["shape", "shape"], ["y"])]
    before = model(nodes, [x_input(["N", "M"])], [helper.make_tensor_value_info("y", I64, [2])], i1 + i2)
    after, report = clean(before, [LiftScalarsPass()])
    counts = ops(after)
    assert counts["Squeeze"] == 0 and counts["Unsqueeze"] == 0
    assert sum(counts.values()) < sum(ops(before).values())
    assert report["passes"]["LiftScalarsPass"]["removed"]["Unsqueeze"] == 2
    same_outputs(before, after, [{"x": floats(2, 3)}, {"x": floats(5, 1)}])


def test_lift_keeps_squeeze_of_unknown_size():
    """Squeeze of a dim whose size is unknown may fail at run time: it stays."""
    nodes = [helper.make_node("Squeeze", ["x", "ax"], ["sq"]),
             helper.make_node("Cast", ["sq"], ["cast"], to=TensorProto.INT32),
             helper.make_node("Unsqueeze", ["cast", "ax"], ["y"]), helper.make_node("Neg", ["y"], ["z"])]
    before = model(nodes, [helper.make_tensor_value_info("x", I64, ["K"])],
                   [helper.make_tensor_value_info("z", TensorProto.INT32, None)], [c("ax", [0])])
    after, _ = clean(before)
    assert ops(after)["Squeeze"] == 1
    same_outputs(before, after, [{"x": np.array([4])}, {"x": np.array([4, 5])}])


def test_undo_squeeze_on_static_dims():
    nodes = [helper.make_node("Squeeze", ["x", "ax"], ["sq"]), helper.make_node("Relu", ["sq"], ["r"]),
             helper.make_node("Unsqueeze", ["sq", "ax"], ["un"]), helper.make_node("Add", ["un", "un"], ["y"])]
    before = model(nodes, [x_input(["N", 1, 4])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                                                  helper.make_tensor_value_info("r", TensorProto.FLOAT, None)],
                   [c("ax", [1])])
    after, _ = clean(before)
    assert ops(after)["Unsqueeze"] == 0
    same_outputs(before, after, [{"x": floats(3, 1, 4)}])
