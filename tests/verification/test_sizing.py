"""verification/sizing.py: the sized skeleton's bytes are made without a copy, and say what a copy says."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from onnx_slice_tools.graphs.table import NodeTable
from onnx_slice_tools.verification.sizing import Skip, choose_sizes, infer_at_sizes, inferred_shapes, sized_bytes, with_sizes


def _skeleton():
    graph = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["a"]), helper.make_node("Neg", ["v"], ["c"]),
         helper.make_node("Reshape", ["a", "target"], ["r"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 4, None]),
         helper.make_tensor_value_info("v", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("c", "r")],
        initializer=[helper.make_tensor("target", TensorProto.INT64, [2], [6, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("sizes", [{"B": 3, "x:2": 2}, {"B": 1, "x:2": 6, "v:0": 5}, {"B": 12, "x:2": 1}])
def test_sized_bytes_are_the_sized_copy_and_leave_the_skeleton_as_it_was(sizes):
    sk = _skeleton()
    before = sk.SerializeToString()
    assert sized_bytes(sk, sizes) == with_sizes(sk, sizes).SerializeToString()
    assert sk.SerializeToString() == before


def test_sized_bytes_put_the_skeleton_back_when_a_size_is_missing():
    sk = _skeleton()
    before = sk.SerializeToString()
    with pytest.raises(KeyError):
        sized_bytes(sk, {"B": 3})
    assert sk.SerializeToString() == before


def test_a_table_without_reshape_skips_only_the_reshape_rule():
    """inferred_shapes with the graph's table: the Reshape rule is still read when the table
    holds a Reshape ([3, 4, 3] cannot take [6, 4]; [3, 4, 2] can), and choose_sizes chooses as
    without it; a graph without one gives what it gives without the table."""
    sk = _skeleton()
    table = NodeTable(sk.graph)
    shapes, bad = infer_at_sizes(sk, {"B": 3, "x:2": 3, "v:0": 1}, table)
    assert bad is not None and "Reshape" in bad
    assert infer_at_sizes(sk, {"B": 3, "x:2": 3, "v:0": 1}) == (shapes, bad)
    assert infer_at_sizes(sk, {"B": 3, "x:2": 2, "v:0": 1}, table)[1] is None
    said = []
    for with_table in (table, None):  # (no size that grows all dims together fits [6, 4])
        with pytest.raises(Skip) as caught:
            choose_sizes(sk, {"v:0": 1}, with_table)
        said.append(str(caught.value))
    assert said[0] == said[1] and "Reshape" in said[0]
    del sk.graph.node[2]
    del sk.graph.output[1]
    inferred = onnx.shape_inference.infer_shapes(with_sizes(sk, {"B": 3, "x:2": 2, "v:0": 1}))
    assert inferred_shapes(inferred, NodeTable(sk.graph)) == inferred_shapes(inferred)
