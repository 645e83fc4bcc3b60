"""index_input_ranges: integer inputs feeding a Gather's indices get the table's range."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from onnx_slice_tools.verification.input_ranges import index_input_ranges


def _model(nodes, inputs, inits):
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_ranges_follow_casts_reshapes_and_index_arithmetic_to_the_smallest_table():
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [1, None])
    seg = helper.make_tensor_value_info("seg", TensorProto.INT32, [1, None])
    mask = helper.make_tensor_value_info("mask", TensorProto.INT32, [1, None])
    x = helper.make_tensor_value_info("x", TensorProto.INT64, [3])
    nodes = [
        helper.make_node("Cast", ["ids"], ["ids32"], to=TensorProto.INT32),
        helper.make_node("Reshape", ["ids32", "flat"], ["ids_flat"]),
        helper.make_node("Gather", ["words", "ids_flat"], ["e1"]),
        helper.make_node("Gather", ["pos", "ids"], ["e0"], axis=1),  # a second, smaller table along axis 1
        # Keras's negative-id wrap, as tf2onnx lowers it: seg + rows * (seg < 0)
        helper.make_node("Add", ["seg", "two"], ["shifted"]),
        helper.make_node("Gather", ["types", "shifted"], ["e2"]),
        helper.make_node("Cast", ["mask"], ["maskf"], to=TensorProto.FLOAT),  # a mask: no table
        helper.make_node("Gather", ["words", "x", ], ["ignored"]),
        helper.make_node("Reshape", ["words", "x"], ["w2"]),  # x as a *shape*, not indices: no effect on x's range
        helper.make_node("Add", ["e1", "maskf"], ["out"]),
    ]
    inits = {"flat": np.array([-1], np.int64), "words": np.zeros((7, 3), np.float32),
             "pos": np.zeros((2, 5), np.float32), "types": np.zeros((2, 3), np.float32),
             "two": np.array(2, np.int32)}
    ranges = index_input_ranges(_model(nodes, [ids, seg, mask, x], inits))
    assert ranges == {"ids": (0, 4), "seg": (0, 1), "x": (0, 6)}


def test_no_range_without_a_known_table_size_or_for_data_inputs():
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [2])
    table = helper.make_tensor_value_info("table", TensorProto.FLOAT, [None, 3])
    nodes = [helper.make_node("Gather", ["table", "ids"], ["out"])]
    assert index_input_ranges(_model(nodes, [ids, table], {})) == {}
    nodes = [helper.make_node("Gather", ["ids", "i"], ["out"])]  # ids is the data, not the indices
    assert index_input_ranges(_model(nodes, [ids], {"i": np.array([0], np.int64)})) == {}
