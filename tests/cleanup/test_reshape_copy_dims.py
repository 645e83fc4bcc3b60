"""The cleanup pass ReshapeCopyDimsPass (cleanup/reshape_copy_dims.py): on graphs built with
onnx.helper, the model before and after run in onnxruntime and compared bitwise (helpers:
test_cleanup.py)."""

from __future__ import annotations


import numpy as np
import pytest
from onnx import TensorProto, helper

from onnx_slice_tools.cleanup.passes import (
    ReshapeCopyDimsPass,
)
from test_cleanup import I64, c, clean, floats, model, ops, same_outputs, shape_scalar_chain, x_input


def test_reshape_copies_its_own_dims():
    """Reshape(x, [shape(x)[0], shape(x)[1], 4, 8]) -> Reshape(x, [0, 0, 4, 8])."""
    n1, i1, a = shape_scalar_chain("x", 0, "a_")
    n2, i2, b = shape_scalar_chain("x", 1, "b_")
    nodes = n1 + n2 + [helper.make_node("Concat", [a, b, "tail"], ["s32"], axis=0),
                       helper.make_node("Cast", ["s32"], ["shape"], to=I64),
                       helper.make_node("Reshape", ["x", "shape"], ["y"])]
    before = model(nodes, [x_input(["N", "M", 32])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                   i1 + i2 + [c("tail", [4, 8], np.int32)])
    after, _ = clean(before, [ReshapeCopyDimsPass()])
    assert dict(ops(after)) == {"Reshape": 1}
    same_outputs(before, after, [{"x": floats(2, 3, 32)}, {"x": floats(1, 0, 32)}])


def test_reshape_of_other_tensors_dims_stays():
    n1, i1, a = shape_scalar_chain("other", 0, "a_")
    nodes = n1 + [helper.make_node("Concat", [a, "tail"], ["s32"], axis=0),
                  helper.make_node("Cast", ["s32"], ["shape"], to=I64),
                  helper.make_node("Reshape", ["x", "shape"], ["y"])]
    before = model(nodes, [x_input(["N", 8]), x_input(["K"], "other")],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], i1 + [c("tail", [-1], np.int32)])
    after, _ = clean(before)
    assert ops(after)["Shape"] == 1
    same_outputs(before, after, [{"x": floats(2, 8), "other": floats(4)}, {"x": floats(3, 8), "other": floats(5)}])


@pytest.mark.parametrize("opset", [11, 17])
def test_reshape_inserting_ones_becomes_unsqueeze(opset):
    """BERT's attention mask: Reshape(m, [shape(m)[0], 1, 1, shape(m)[1]]) == Unsqueeze(m, [1, 2]),
    exact also for a zero-size batch (where [0, 1, 1, -1] would fail)."""
    n1, i1, a = shape_scalar_chain("x", 0, "a_")
    n2, i2, b = shape_scalar_chain("x", 1, "b_")
    if opset < 13:  # axes as attributes
        for n in n1 + n2:
            if n.op_type in ("Squeeze", "Unsqueeze"):
                del n.input[1:]
                n.attribute.append(helper.make_attribute("axes", [0]))
    nodes = n1 + n2 + [helper.make_node("Concat", [a, "one", "one", b], ["s32"], axis=0),
                       helper.make_node("Cast", ["s32"], ["shape"], to=I64),
                       helper.make_node("Reshape", ["x", "shape"], ["r"]), helper.make_node("Neg", ["r"], ["y"])]
    before = model(nodes, [x_input(["N", "M"])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                   i1 + i2 + [c("one", [1], np.int32)], opset=opset)
    after, _ = clean(before, [ReshapeCopyDimsPass()])
    assert dict(ops(after)) == {"Unsqueeze": 1, "Neg": 1}
    same_outputs(before, after, [{"x": floats(2, 3)}, {"x": floats(0, 3)}, {"x": floats(1, 1)}])
