"""graphs/table.py: one read of a graph's nodes."""

from __future__ import annotations

from onnx import TensorProto, helper

from onnx_slice_tools.graphs.table import NodeTable
from onnx_slice_tools.graphs.walk import proto_graphs, proto_subgraphs


def _graph():
    then = helper.make_graph([helper.make_node("Identity", ["a"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)])
    other = helper.make_graph([helper.make_node("Neg", ["a"], ["o"])], "else", [],
                              [helper.make_tensor_value_info("o", TensorProto.FLOAT, None)])
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r"),
             helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other),
             helper.make_node("Dropout", ["a", "", ""], ["d", ""], domain="ai.onnx", name="drop"),
             helper.make_node("Custom", ["a"], ["z"], domain="my.domain", axis=1)]
    return helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
                                          helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                             [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])


def test_the_table_holds_each_nodes_fields_by_position():
    g = _graph()
    table = NodeTable(g)
    assert len(table) == len(g.node) == 4
    assert table.ops == [n.op_type for n in g.node]
    assert table.domains == ["", "", "ai.onnx", "my.domain"]
    assert table.inputs == [tuple(n.input) for n in g.node] and table.inputs[2] == ("a", "", "")
    assert table.outputs == [("a",), ("y",), ("d", ""), ("z",)]
    assert table.holders == [k for k, n in enumerate(g.node) if proto_subgraphs(n)] == [1]


def test_proto_graphs_told_the_holders_lists_the_same_graphs():
    model = helper.make_model(_graph())
    full = [(label, f) for _, label, f in proto_graphs(model)]
    told = [(label, f) for _, label, f in proto_graphs(model, holders=NodeTable(model.graph).holders)]
    assert told == full and len(full) == 3
