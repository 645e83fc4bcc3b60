"""The cleanup pass MergeSlicesPass (cleanup/merge_slices.py): on graphs built with onnx.helper, the
model before and after run in onnxruntime and compared bitwise (helpers: test_cleanup.py)."""

from __future__ import annotations


import numpy as np
from onnx import TensorProto, helper

from onnx_slice_tools.cleanup.passes import (
    MergeSlicesPass,
)
from test_cleanup import c, clean, floats, model, ops, same_outputs, x_input


def test_merge_slices_on_distinct_axes():
    nodes = [helper.make_node("Slice", ["x", "s0", "e0", "a0", "st0"], ["t"]),
             helper.make_node("Slice", ["t", "s1", "e1", "a1"], ["y"])]
    inits = [c("s0", [-1]), c("e0", [-2 ** 63]), c("a0", [0]), c("st0", [-2]),
             c("s1", [1], np.int32), c("e1", [100], np.int32), c("a1", [-1], np.int32)]
    before = model(nodes, [x_input(["N", 6])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    after, _ = clean(before, [MergeSlicesPass()])
    assert dict(ops(after)) == {"Slice": 1}
    same_outputs(before, after, [{"x": floats(5, 6)}, {"x": floats(0, 6)}])


def test_merge_slices_same_axis_stays():
    nodes = [helper.make_node("Slice", ["x", "s0", "e0", "a0"], ["t"]),
             helper.make_node("Slice", ["t", "s0", "e0", "a0"], ["y"])]
    before = model(nodes, [x_input(["N"])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                   [c("s0", [1]), c("e0", [5]), c("a0", [0])])
    after, _ = clean(before)
    assert ops(after)["Slice"] == 2
    same_outputs(before, after, [{"x": floats(7)}])
