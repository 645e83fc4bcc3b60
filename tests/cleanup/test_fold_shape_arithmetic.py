"""The cleanup pass FoldShapeArithmeticPass (cleanup/fold_shape_arithmetic.py): on graphs built with
onnx.helper, the model before and after run in onnxruntime and compared bitwise (helpers:
test_cleanup.py)."""

from __future__ import annotations


from onnx import TensorProto, helper

from onnx_slice_tools.cleanup.passes import (
    FoldShapeArithmeticPass,
)
from test_cleanup import I64, c, clean, floats, model, ops, same_outputs, x_input


def test_fold_static_dims_and_arithmetic():
    """Shape of static dims, Gather, Mul and Concat of known ints become one constant."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i2"], ["d2"], axis=0),
             helper.make_node("Mul", ["d2", "three"], ["d2x3"]),
             helper.make_node("Unsqueeze", ["d2x3", "ax"], ["u"]),
             helper.make_node("Slice", ["s", "one", "two"], ["d1"]),
             helper.make_node("Concat", ["neg1", "d1", "u"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    inits = [c("i2", 2), c("three", 3), c("ax", [0]), c("one", [1]), c("two", [2]), c("neg1", [-1])]
    before = model(nodes, [x_input(["N", 4, 6])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                   inits)
    after, report = clean(before, [FoldShapeArithmeticPass()])
    assert set(ops(after)) == {"Reshape"}
    same_outputs(before, after, [{"x": floats(3, 4, 6)}, {"x": floats(0, 4, 6)}])


def test_fold_leaves_overflow_and_out_of_range_to_the_runtime():
    nodes = [helper.make_node("Mul", ["big", "big"], ["sq"]),
             helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i5"], ["bad"], axis=0),
             helper.make_node("Add", ["sq", "one"], ["y"]), helper.make_node("Add", ["bad", "one"], ["z"])]
    before = model(nodes, [x_input([2, 3])], [helper.make_tensor_value_info("y", I64, None),
                                              helper.make_tensor_value_info("z", I64, None)],
                   [c("big", 2 ** 40), c("i5", 5), c("one", 1)])
    after, _ = clean(before)
    assert ops(after)["Mul"] == 1 and ops(after)["Gather"] == 1
    same_outputs(before, after, [{"x": floats(2, 3)}])
