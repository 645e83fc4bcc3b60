"""The cleanup pass CommonSubexpressionPass (cleanup/common_subexpression.py): on graphs built with
onnx.helper, the model before and after run in onnxruntime and compared bitwise (helpers:
test_cleanup.py)."""

from __future__ import annotations


from onnx import TensorProto, helper

from onnx_slice_tools.cleanup.passes import (
    CommonSubexpressionPass,
)
from onnx_slice_tools.verification.lowerings import make_session
from test_cleanup import c, clean, floats, model, ops, x_input


def test_cse_merges_duplicates_and_equal_constants():
    nodes = [helper.make_node("Shape", ["x"], ["s1"]), helper.make_node("Shape", ["x"], ["s2"]),
             helper.make_node("Cast", ["s1"], ["c1"], to=TensorProto.INT32),
             helper.make_node("Cast", ["s2"], ["c2"], to=TensorProto.INT32),
             helper.make_node("Slice", ["c1", "b1", "e1"], ["y1"]), helper.make_node("Slice", ["c2", "b2", "e2"], ["y2"]),
             helper.make_node("RandomUniformLike", ["x"], ["r1"]), helper.make_node("RandomUniformLike", ["x"], ["r2"]),
             helper.make_node("Sub", ["r1", "r2"], ["r"]),
             helper.make_node("Add", ["y1", "y2"], ["y"])]
    before = model(nodes, [x_input(["N", "M"])], [helper.make_tensor_value_info("y", TensorProto.INT32, None),
                                                  helper.make_tensor_value_info("r", TensorProto.FLOAT, None)],
                   [c("b1", [0]), c("e1", [1]), c("b2", [0]), c("e2", [1])])
    after, _ = clean(before, [CommonSubexpressionPass()])
    counts = ops(after)
    assert counts["Shape"] == 1 and counts["Cast"] == 1 and counts["Slice"] == 1
    assert counts["RandomUniformLike"] == 2  # never merged
    sb, sa = make_session(before.SerializeToString()), make_session(after.SerializeToString())
    feeds = {"x": floats(3, 4)}
    assert sa.run(["y"], feeds)[0].tobytes() == sb.run(["y"], feeds)[0].tobytes()
