"""The cleanup pass RebuildShapeVectorsPass (cleanup/rebuild_shape_vectors.py): on graphs built with
onnx.helper, the model before and after run in onnxruntime and compared bitwise (helpers:
test_cleanup.py)."""

from __future__ import annotations


import numpy as np
import pytest
from onnx import TensorProto, helper

from test_cleanup import I64, c, clean, floats, model, ops, same_outputs, x_input


@pytest.mark.parametrize("opset", [13, 17])
def test_rebuild_shape_vector_from_one_tensor(opset):
    """BERT's Tensordot: Shape -> Cast(int32) -> Gather([0, 1]) -> Concat([32]) -> Cast(int64)
    becomes Concat(Shape(x, 0, 2), [32]) (opset 15+) or Concat(Slice(Shape(x)), [32])."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Cast", ["s"], ["s32"], to=TensorProto.INT32),
             helper.make_node("Gather", ["s32", "free"], ["g"], axis=0),
             helper.make_node("Concat", ["g", "n"], ["c32"], axis=0),
             helper.make_node("Cast", ["c32"], ["shape"], to=I64),
             helper.make_node("Reshape", ["m", "shape"], ["y"])]
    before = model(nodes, [x_input(["B", "S", 8]), x_input(["BS", 32], "m")],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                   [c("free", [0, 1], np.int32), c("n", [32], np.int32)], opset=opset)
    after, _ = clean(before)
    assert sum(ops(after).values()) == (3 if opset >= 15 else 4)
    assert ops(after)["Cast"] == 0
    same_outputs(before, after, [{"x": floats(2, 3, 8), "m": floats(6, 32)}, {"x": floats(0, 3, 8), "m": floats(0, 32)},
                                 {"x": floats(2, 3, 8), "m": floats(5, 32)}])


def test_rebuild_keeps_shared_arithmetic():
    """Arithmetic that other nodes still use is not duplicated."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Slice", ["s", "zero", "two"], ["sl"]),
             helper.make_node("Concat", ["sl", "n"], ["shape"], axis=0),
             helper.make_node("Reshape", ["m", "shape"], ["y"]),
             helper.make_node("Concat", ["sl", "sl"], ["z"], axis=0)]
    before = model(nodes, [x_input(["B", "S", 8]), x_input(["BS", 32], "m")],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                    helper.make_tensor_value_info("z", I64, None)],
                   [c("zero", [0]), c("two", [2]), c("n", [32])])
    after, _ = clean(before)
    assert sum(ops(after).values()) <= sum(ops(before).values())
    same_outputs(before, after, [{"x": floats(2, 3, 8), "m": floats(6, 32)}])
