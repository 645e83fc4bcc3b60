"""The protobuf pass reads the usual begin/end/strides (1-D int32/int64 initializers, values
inline) of all StridedSlice nodes in one loop (proto_pass._Graph.index_initializers): each value
it gives is what the per-name read (_Graph.constant) gives, and what it leaves out (graph inputs,
other dtypes or ranks, malformed tensors) is left to that read, errors included."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_slice_tools import StridedSliceError
from onnx_slice_tools.rewrite.proto_pass import _Graph


def _tensors():
    out = [
        helper.make_tensor("i32", TensorProto.INT32, [3], [0, -2, 7]),
        helper.make_tensor("i64", TensorProto.INT64, [2], [2 ** 40, -1]),
        numpy_helper.from_array(np.array([1, 2, 3], np.int32), "raw32"),
        numpy_helper.from_array(np.array([-(2 ** 62), 5], np.int64), "raw64"),
        numpy_helper.from_array(np.array([], np.int64), "empty"),
        numpy_helper.from_array(np.array([[1, 2]], np.int64), "rank2"),
        numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "float"),
        numpy_helper.from_array(np.array([1, 2], np.uint8), "uint8"),
        numpy_helper.from_array(np.array(3, np.int64), "scalar"),
        helper.make_tensor("input", TensorProto.INT64, [1], [4]),  # also a graph input: a runtime value
    ]
    short = helper.make_tensor("short", TensorProto.INT64, [3], [1, 2, 3])
    short.raw_data = np.array([1, 2], np.int64).tobytes()
    short.ClearField("int64_data")
    out.append(short)
    few = helper.make_tensor("few", TensorProto.INT32, [3], [1, 2, 3])
    del few.int32_data[2:]  # fewer typed values than dims say
    out.append(few)
    segment = helper.make_tensor("segment", TensorProto.INT64, [2], [1, 2])
    segment.segment.begin, segment.segment.end = 0, 2
    out.append(segment)
    return out


def _outcome(fn, *args):
    try:
        return "ok", fn(*args)
    except (StridedSliceError, ValueError) as exc:
        return "error", str(exc)


@pytest.mark.parametrize("order", [1, -1])
def test_index_initializers_give_what_the_per_name_read_gives(order):
    tensors = _tensors()
    graph = helper.make_graph([], "g", [helper.make_tensor_value_info("input", TensorProto.INT64, [1])], [],
                              initializer=tensors)
    g = _Graph(graph, [])
    names = [t.name for t in tensors][::order] + ["missing", "i32"]
    read = g.index_initializers(names)
    assert set(read) == {"i32", "i64", "raw32", "raw64", "empty"}
    for name in names:
        alone = _outcome(g.constant, name, "begin")
        if name in read:
            assert alone == ("ok", read[name])
        elif name in ("input", "missing"):
            assert alone == ("ok", None)  # a runtime value
        elif name == "uint8":
            assert alone == ("ok", (1, 2))  # (another integer type: read through numpy)
        else:
            assert alone[0] == "error", name  # (wrong rank or dtype, malformed: the per-name read's error)
