"""The cleanup pass TransposeSliceTransposePass (cleanup/transpose_slice_transpose.py): on graphs built
with onnx.helper, the model before and after run in onnxruntime and compared bitwise (helpers:
test_cleanup.py)."""

from __future__ import annotations


import pytest
from onnx import TensorProto, helper

from onnx_slice_tools.cleanup.passes import (
    TransposeSliceTransposePass,
)
from test_cleanup import c, clean, floats, model, ops, same_outputs, x_input


@pytest.mark.parametrize("axis, perms, gone", [
    (-1, ([0, 2, 3, 1], [0, 3, 1, 2]), True),   # NCHW -> NHWC, channel slice, back
    (1, ([0, 3, 1, 2], [0, 2, 3, 1]), True),    # the other way, a negative-free axis
    (3, ([0, 2, 3, 1], [0, 2, 3, 1]), False),   # the second does not undo the first
])
def test_a_slice_between_a_transpose_and_its_inverse_loses_both(axis, perms, gone):
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=perms[0]),
             helper.make_node("Slice", ["t", "b", "e", "a", "st"], ["s"]),
             helper.make_node("Transpose", ["s"], ["y"], perm=perms[1]),
             helper.make_node("Relu", ["y"], ["z"])]
    before = model(nodes, [x_input([2, 5, 4, 6])], [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
                   [c("b", [3]), c("e", [0]), c("a", [axis]), c("st", [-2])])
    after, _ = clean(before, [TransposeSliceTransposePass()])
    assert ops(after).get("Transpose", 0) == (0 if gone else 2) and ops(after)["Slice"] == 1
    same_outputs(before, after, [{"x": floats(2, 5, 4, 6)}])
