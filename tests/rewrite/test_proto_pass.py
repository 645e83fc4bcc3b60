"""The protobuf pass's own machinery (rewrite/proto_pass.py, rewrite/shapes.py), which the onnx-ir
holder does without: shapes derived for the StridedSlice inputs only, the model's names read once.
Its output against the onnx-ir pass's: tests/rewrite/test_rewrite_proto.py."""

from __future__ import annotations

import collections

from onnx import TensorProto, helper
from test_rewrite_proto import _corner_model, _load_script, _peer

from onnx_slice_tools.graphs.table import NodeTable
from onnx_slice_tools.graphs.walk import proto_nodes
from onnx_slice_tools.rewrite.proto_pass import model_names, scan
from onnx_slice_tools.rewrite.shapes import _ancestors, _own_skeleton, derive_shapes


def test_protobuf_holder_derives_the_shapes_of_the_slice_inputs_only():
    """derive_shapes(names=...) -- graph inputs and initializers with no inference, the model
    inferred as it is when it is its own skeleton, else only the ancestors of the StridedSlice
    inputs -- gives what a full derivation gives for those names."""
    bench = _load_script("bench")
    for model in (bench.synthetic_model(50, False, fan_out=8), bench.synthetic_model(50, True, fan_out=50),
                  bench.synthetic_model(96, True), _peer(False, "symbolic")):
        model.graph.initializer.append(helper.make_tensor("big", TensorProto.INT64, [300], list(range(300))))
        names = scan(model.graph).inputs
        full = derive_shapes(model)
        assert derive_shapes(model, names=names) == {n: full[n] for n in names if n in full}
        assert derive_shapes(model, names=names, has_subgraphs=False) == {n: full[n] for n in names if n in full}
    chain = bench.synthetic_model(96, True)
    keep = _ancestors(NodeTable(chain.graph), scan(chain.graph).inputs)
    assert [chain.graph.node[k].op_type for k in keep] == ["Relu"] * 11
    plain = bench.synthetic_model(64, False)
    assert _own_skeleton(plain, 1024, has_subgraphs=False) and not _own_skeleton(plain, 1024, has_subgraphs=None)
    plain.graph.output[0].type.tensor_type.shape.dim.add().dim_value = 4  # a declared output shape: dropped
    assert not _own_skeleton(plain, 1024, has_subgraphs=False)


def test_model_names_from_names_read_once_are_the_names_of_the_model():
    """model_names given what the splice read once (every name the nodes and their subgraphs read,
    the main graph's node outputs) knows exactly the names it finds reading every node itself --
    among them a subgraph's own outputs, a value_info entry, a Constant's output and an output
    nothing reads."""
    model = _corner_model()
    model.graph.node.append(helper.make_node("Relu", ["x"], ["unread"], name="dead"))
    holders = scan(model.graph).holders
    reads = collections.Counter(name for n, _ in proto_nodes(model.graph) for name in n.input)
    writes = [o for n in model.graph.node for o in n.output]
    given = model_names(model, holders, reads, iter(writes)).taken
    assert given == model_names(model).taken
    assert {"t", "f", "xi", "kb", "ws", "if", "cond", "w", "unread"} <= given


def test_scan_reads_the_node_table_of_the_graph():
    """scan's NodeTable (shared by shape derivation and the rewrite) is what reading the graph
    gives, holders included (StridedSlice or not, a declared GRAPH attribute), and derivation
    given it derives what it derives reading the graph itself."""
    bench = _load_script("bench")
    for model in (_corner_model(), bench.synthetic_model(96, True), bench.chain_model(300, 30)):
        walked = scan(model.graph)
        fresh = NodeTable(model.graph)
        for column in ("ops", "domains", "inputs", "outputs", "holders"):
            assert getattr(walked.table, column) == getattr(fresh, column), column
        assert derive_shapes(model, names=walked.inputs, has_subgraphs=bool(walked.holders), table=walked.table) == \
            derive_shapes(model, names=walked.inputs, has_subgraphs=bool(walked.holders))
