"""The protobuf rewrite path (rewrite/proto_pass.py) gives what the onnx-ir pass gives.

For every model here both passes run on the same input with the same derived shapes, and must
agree on the records (their JSON), the changes (the structural proof's input) and the model:
the same nodes in the same order, initializers, graph inputs and outputs, value_info and opset
imports.  Two differences are allowed, both from onnx-ir's writer and not the rewrite: onnx-ir
adds a value_info entry for every initializer, and drops an explicitly empty node domain.

The corpus: the sample models, the synthetic benchmark models, every peer case
(tests/data/peer_cases.json, 821 specs, accepted and rejected) as StridedSlice nodes of one model
in six ways (constant or runtime indices; input declared static, symbolic, of unknown rank), and
a model of the graph surgery's corner cases (identity rewrites read by other nodes and by a
subgraph, chained slices, ``Constant`` node indices, a tf2onnx ``end = begin + 1`` the lowering
does not read, declarations that disagree with the derived shapes, an unused custom domain).
"""

from __future__ import annotations

import collections
import importlib.util
import json
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

from onnx_slice_tools import convert
from onnx_slice_tools.errors import StridedSliceError
from onnx_slice_tools.io.files import read_model_proto
from onnx_slice_tools.rewrite.ir_pass import TF_DOMAIN, StridedSliceRewritePass, default_opset, derive_shapes
from onnx_slice_tools.graphs.table import NodeTable
from onnx_slice_tools.graphs.walk import proto_nodes
from onnx_slice_tools.rewrite.proto_pass import ProtoStridedSliceRewritePass, declines, model_names, scan

ROOT = Path(__file__).resolve().parents[2]


def _load_script(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _node_bytes(n):
    n = onnx.NodeProto.FromString(n.SerializeToString())
    if n.domain == "":
        n.ClearField("domain")
    return n.SerializeToString()


def _model_view(p):
    g = p.graph
    inits = {t.name for t in g.initializer}
    return {
        "ir_version": p.ir_version,
        "nodes": [_node_bytes(n) for n in g.node],
        "initializers": sorted((t.name, t.data_type, tuple(t.dims), onnx.numpy_helper.to_array(t).tobytes())
                               for t in g.initializer),
        "inputs": [i.SerializeToString() for i in g.input],
        "outputs": [o.SerializeToString() for o in g.output],
        "value_info": sorted(v.SerializeToString() for v in g.value_info if v.name not in inits),
        "opsets": sorted((o.domain, o.version) for o in p.opset_import),
        "functions": [f.SerializeToString() for f in p.functions],
    }


def _both(model: onnx.ModelProto, **options):
    """(onnx-ir pass result, its proto, protobuf pass result, its proto) on copies of ``model``."""
    m = ir.from_proto(model)
    opset = default_opset(m)
    shapes = derive_shapes(model)
    a = StridedSliceRewritePass(opset=opset, **options)(m, shapes=shapes)
    proto = onnx.ModelProto()
    proto.CopyFrom(model)
    b = ProtoStridedSliceRewritePass(opset=opset, **options)(proto, shapes)
    return a, ir.to_proto(m), b, proto


def assert_same_rewrite(model: onnx.ModelProto, **options) -> int:
    """Both passes agree on ``model`` (see the module doc); returns the nodes rewritten."""
    assert declines(model) is None
    a, pa, b, pb = _both(model, **options)
    assert [r.to_json() for r in b.records] == [r.to_json() for r in a.records]
    assert [(r.data_name, r.output_name, r.index_names, r.renamed, r.replaced) for r in b.records] == \
        [(r.data_name, r.output_name, r.index_names, r.renamed, r.replaced) for r in a.records]
    assert b.changes == a.changes
    assert b.modified == a.modified
    if b.modified:  # the node table the splice made while it rebuilt the node list: a fresh read's
        read = NodeTable(pb.graph)
        assert (b.table.ops, b.table.domains, b.table.inputs, b.table.outputs, b.table.holders) == \
            (read.ops, read.domains, read.inputs, read.outputs, read.holders)
    va, vb = _model_view(pa), _model_view(pb)
    for key in va:
        assert vb[key] == va[key], key
    return sum(r.lowering is not None for r in a.records)


@pytest.mark.parametrize("path", sorted((ROOT / "models").glob("*.onnx")), ids=lambda p: p.stem)
@pytest.mark.parametrize("target", ["onnxruntime", "portable"])
def test_sample_models(path, target):
    model = read_model_proto(path)
    if declines(model):
        assert "subgraph" in declines(model)  # tf_if_branch: the onnx-ir path
        return
    assert assert_same_rewrite(model, target=target) > 0


@pytest.mark.parametrize("symbolic", [False, True])
@pytest.mark.parametrize("fan_out", [8, 200])
def test_benchmark_models(symbolic, fan_out):
    bench = _load_script("bench")
    assert assert_same_rewrite(bench.synthetic_model(200, symbolic, fan_out=fan_out)) == 200


def _peer_rows():
    peer_cases = _load_script("peer_cases")
    rows = []
    for case in json.loads((ROOT / "tests" / "data" / "peer_cases.json").read_text())["cases"]:
        x = peer_cases.make_input(case["input"], case["dtype"])
        try:
            spec = peer_cases.spec_of(case)
        except StridedSliceError:
            continue
        rows.append((case, x, spec))
    return rows


@pytest.mark.parametrize("runtime, dims", [(False, "declared"), (True, "declared"), (False, "symbolic"),
                                           (True, "symbolic"), (False, "unknown rank"), (True, "unknown rank")])
def test_peer_cases(runtime, dims):
    from test_peer_cases import peer_model
    rows = _peer_rows()
    assert len(rows) >= 800
    model, _ = peer_model(rows, runtime, dims)
    rewritten = assert_same_rewrite(model)
    assert rewritten >= 600  # the rest are refused (and recorded) alike


def _corner_model(consistent: bool = False) -> onnx.ModelProto:
    """The graph surgery's corner cases in one model (see the module doc); ``consistent``: no
    declaration that contradicts the derived shapes (those fail the checks, rightly)."""
    i32 = TensorProto.INT32

    def ss(name, x, out, b, e, s, **masks):
        return helper.make_node("StridedSlice", [x, b, e, s], [out], name=name, domain=TF_DOMAIN, **masks)

    inits = [helper.make_tensor(n, i32, [len(v)], v) for n, v in (
        ("b0", [0, 0]), ("e0", [0, 0]), ("s1", [1, 1]), ("bc", [0, 1]), ("ec", [0, 3]),
        ("one", [1]), ("bs", [0, 2]), ("st", [1, 1]))]
    nodes = [
        # identity (x[:, :]) read by a Relu, by a later StridedSlice and by an If branch
        ss("ident", "x", "xi", "b0", "e0", "s1", begin_mask=3, end_mask=3),
        helper.make_node("Relu", ["xi"], ["r"], name="relu"),
        ss("crop", "xi", "c", "bc", "ec", "s1", begin_mask=1, end_mask=1),
        # chained: a slice of a slice, the inner one also a graph output
        ss("chain", "c", "cc", "b0", "e0", "s1", begin_mask=1, end_mask=1, shrink_axis_mask=2),
        # Constant node indices (value_ints and a value tensor)
        helper.make_node("Constant", [], ["kb"], name="kb", value_ints=[0, 1]),
        helper.make_node("Constant", [], ["ke"], name="ke",
                         value=helper.make_tensor("ke_t", TensorProto.INT64, [2], [0, 2])),
        ss("consts", "r", "k", "kb", "ke", "st", begin_mask=1, end_mask=1),
        # tf2onnx's shrink: end = begin + 1 computed by an Add the lowering does not read
        helper.make_node("Add", ["bs", "one"], ["es"], name="end_plus_one"),
        ss("shrink", "x", "sh", "bs", "es", "st", begin_mask=1, end_mask=1, shrink_axis_mask=2),
        # runtime begin from a graph input
        ss("runtime", "x", "rt", "rb", "ec", "s1", begin_mask=1, end_mask=1),
        helper.make_node("If", ["cond"], ["branch"], name="if",
                         then_branch=helper.make_graph([helper.make_node("Neg", ["xi"], ["t"])], "then", [],
                                                       [helper.make_tensor_value_info("t", 1, [2, "n"])]),
                         else_branch=helper.make_graph([helper.make_node("Abs", ["xi"], ["f"])], "else", [],
                                                       [helper.make_tensor_value_info("f", 1, [2, "n"])])),
        helper.make_node("Mul", ["cc", "cc"], ["sq"], name="square"),
        # a slice of a weight (the data an initializer)
        ss("weights", "w", "ws", "b0", "ec", "s1", begin_mask=1, end_mask=1),
    ]
    if not consistent:  # nodes the rewrite refuses (recorded, left in place)
        nodes += [
            helper.make_node("StridedSlice", ["x", "b0"], ["two"], name="two_inputs", domain=TF_DOMAIN),
            ss("float_mask", "x", "fm", "b0", "e0", "s1", begin_mask=1.0),
            ss("unknown_length", "x", "ul", "rl", "rl", "rl"),
            ss("bad_lengths", "x", "bl", "one", "e0", "s1"),
        ]
    graph = helper.make_graph(
        nodes, "corners",
        [helper.make_tensor_value_info("x", 1, [2, "n"]), helper.make_tensor_value_info("rb", i32, [2]),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         *([] if consistent else [helper.make_tensor_value_info("rl", i32, ["k"])])],
        [*(helper.make_tensor_value_info(n, 1, None) for n in ("c", "sh", "rt")),  # filled in by the rewrite
         *(helper.make_tensor_value_info(n, 1, s) for n, s in (("branch", [2, "n"]), ("sq", [2]), ("r", [2, "n"]),
                                                               ("k", [2, 1] if consistent else None))),
         helper.make_tensor_value_info("ws", 1, None),
         *([] if consistent else [helper.make_tensor_value_info(n, 1, None) for n in ("two", "fm", "ul", "bl")])],
        [*inits, helper.make_tensor("w", 1, [4, 6], np.arange(24, dtype=np.float32))],
        value_info=[helper.make_tensor_value_info("xi", 1, [2, "n"] if consistent else [3, 5]),  # derived: [2, n]
                    helper.make_tensor_value_info("cc", 1, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TF_DOMAIN, 1),
                                                    helper.make_opsetid("com.unused", 1)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("opset", [11, 17])
def test_graph_surgery_corners(opset):
    model = _corner_model()
    if opset == 11:
        model.opset_import[0].version = 11
    assert assert_same_rewrite(model) == 7
    a, _, b, _ = _both(model)
    assert sorted(r.error_kind or "" for r in b.records if r.error) == ["invalid", "invalid", "invalid", "unsupported"]


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


def test_corner_model_converts_verified_on_the_protobuf_path():
    """The corner model through ``convert``: every check passes, the output runs as the input's
    reference says, and no onnx-ir model was built (the protobuf path took it)."""
    result = convert(_corner_model(consistent=True), cleanup=False)
    assert result.report.verdict == "verified", result.report.problem()
    assert result.ir_model is None
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    from onnx_slice_tools.verification.lowerings import make_session
    got = make_session(result.model.SerializeToString()).run(
        None, {"x": x, "rb": np.array([0, 1], np.int32), "cond": np.array(True)})
    names = [o.name for o in result.model.graph.output]
    by = dict(zip(names, got))
    np.testing.assert_array_equal(by["c"], x[:, 1:3])
    np.testing.assert_array_equal(by["sq"], x[:, 1] * x[:, 1])
    np.testing.assert_array_equal(by["k"], np.maximum(x, 0)[:, 1:2])
    np.testing.assert_array_equal(by["sh"], x[:, 2])
    np.testing.assert_array_equal(by["rt"], x[:, 1:3])
    np.testing.assert_array_equal(by["branch"], -x)
    np.testing.assert_array_equal(by["ws"], np.arange(24, dtype=np.float32).reshape(4, 6)[:, :3])
    assert by["r"].shape == (2, 4)


def test_declined_models_take_the_onnx_ir_path(tmp_path):
    """A StridedSlice in a subgraph, external data, an opset change: the onnx-ir path, same report."""
    result = convert(ROOT / "models" / "tf_if_branch.onnx")
    assert result.ir_model is not None and result.report.verdict == "verified"
    result = convert(_corner_model(consistent=True), opset=18, cleanup=False)
    assert result.ir_model is not None
    assert result.report.model_checks["opset_conversion"] == "passed"  # the converted model was run
    assert result.report.verdict == "verified", result.report.verdict
    fast = convert(_corner_model(consistent=True), cleanup=False)
    assert fast.ir_model is None
    assert [r.to_json() for r in fast.report.records] == [r.to_json() for r in result.report.records]


@pytest.mark.parametrize("fan_out", [8, 50])
@pytest.mark.parametrize("symbolic", [False, True])
def test_shapes_of_graph_inputs_need_no_inference(symbolic, fan_out):
    """derive_shapes(names=...) of graph inputs and initializers (no inference run) equals what
    inference gives for them; with any other name it runs inference as before."""
    from onnx_slice_tools.rewrite.proto_pass import scan
    model = _load_script("bench").synthetic_model(50, symbolic, fan_out=fan_out)
    big = helper.make_tensor("big", TensorProto.INT64, [300], list(range(300)))  # above max_bytes: an input
    model.graph.initializer.append(big)
    names = scan(model.graph).inputs | {"big"}
    full = derive_shapes(model)
    assert derive_shapes(model, names=names) == {n: full[n] for n in names if n in full}


@pytest.mark.parametrize("declared_outputs", [False, True])
def test_inference_on_the_model_itself_when_it_is_its_own_skeleton(declared_outputs):
    """A model with nothing for the skeleton to drop (no value_info, output shapes, big or
    overridable initializers, subgraphs) is inferred as it is: the same shapes."""
    from onnx_slice_tools.rewrite.shapes import _own_skeleton
    from onnx_slice_tools.rewrite.proto_pass import scan
    model = _load_script("bench").synthetic_model(64, False)
    if declared_outputs:  # a declared output shape: the skeleton drops it
        model.graph.output[0].type.tensor_type.shape.dim.add().dim_value = 4
    assert _own_skeleton(model, 1024, has_subgraphs=False) is not declared_outputs
    assert _own_skeleton(model, 1024, has_subgraphs=None) is False
    names = scan(model.graph).inputs
    assert derive_shapes(model, names=names, has_subgraphs=False) == derive_shapes(model, names=names)


def test_inference_of_the_ancestors_only():
    """With no subgraph, the shapes of the StridedSlice inputs come from inferring only the nodes
    they depend on: the same shapes as inferring the whole model (peer model: 800 slices of
    800 inputs; benchmark model: slices of a Relu chain)."""
    from onnx_slice_tools.graphs.table import NodeTable
    from onnx_slice_tools.rewrite.shapes import _ancestors
    from onnx_slice_tools.rewrite.proto_pass import scan
    from test_peer_cases import peer_model
    chain = _load_script("bench").synthetic_model(96, True)
    for model in (chain, peer_model(_peer_rows(), False, "symbolic")[0]):
        names = scan(model.graph).inputs
        assert derive_shapes(model, names=names, has_subgraphs=False) == \
            {n: v for n, v in derive_shapes(model).items() if n in names}
    keep = _ancestors(NodeTable(chain.graph), scan(chain.graph).inputs)
    assert [chain.graph.node[k].op_type for k in keep] == ["Relu"] * 11


def test_shared_intermediate_nodes_are_emitted_once():
    """Two slices x[:, 0] of one tensor (both graph outputs) share their Slice node, read by two
    Squeezes; a third, x[:, 0:1], is that Slice alone but a graph output: its own node (as the
    cleanup's CSE, which never replaces a node producing a graph output).  Values are x's."""
    i32 = TensorProto.INT32
    inits = [helper.make_tensor(n, i32, [2], v) for n, v in (("b", [0, 0]), ("e", [0, 1]), ("s", [1, 1]))]
    nodes = [helper.make_node("StridedSlice", ["x", "b", "e", "s"], [y], name=y, domain=TF_DOMAIN,
                              begin_mask=1, end_mask=1, **({} if y == "y3" else {"shrink_axis_mask": 2}))
             for y in ("y1", "y2", "y3")]
    graph = helper.make_graph(nodes, "shared", [helper.make_tensor_value_info("x", 1, ["n", 3])],
                              [helper.make_tensor_value_info(y, 1, None) for y in ("y1", "y2", "y3")], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TF_DOMAIN, 1)])
    model.ir_version = 8
    assert assert_same_rewrite(model) == 3
    result = convert(model)
    assert result.report.verdict == "verified", result.report.problem()
    assert sorted(n.op_type for n in result.model.graph.node) == ["Slice", "Slice", "Squeeze", "Squeeze"]
    assert result.report.cleanup["changed"] is False
    from onnx_slice_tools.verification.lowerings import make_session
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y1, y2, y3 = make_session(result.model.SerializeToString()).run(None, {"x": x})
    np.testing.assert_array_equal(y1, x[:, 0])
    np.testing.assert_array_equal(y2, x[:, 0])
    np.testing.assert_array_equal(y3, x[:, 0:1])


def test_the_protobuf_path_converts_and_verifies_without_importing_onnx_ir():
    """onnx-ir (and the sympy it imports) costs ~0.4 s CPU to import: a model the protobuf path
    takes is rewritten and verified (as shipped included) without it (the cleanup, whose
    pre-check conditions live on the onnx-ir passes, is left out here)."""
    import subprocess
    import sys
    code = ("import sys, onnx\n"
            "from onnx import TensorProto as T, helper\n"
            "from onnx_slice_tools import convert\n"
            "ss = helper.make_node('StridedSlice', ['x', 'b', 'e', 's'], ['y'], domain='ai.onnx.converters.tensorflow',"
            " begin_mask=1, end_mask=1, ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0)\n"
            "inits = [helper.make_tensor(n, T.INT32, [2], v) for n, v in (('b', [0, 1]), ('e', [0, 3]), ('s', [1, 1]))]\n"
            "g = helper.make_graph([ss], 'g', [helper.make_tensor_value_info('x', T.FLOAT, ['N', 5])],"
            " [helper.make_tensor_value_info('y', T.FLOAT, None)], inits)\n"
            "m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 17),"
            " helper.make_opsetid('ai.onnx.converters.tensorflow', 1)])\n"
            "m.ir_version = 8\n"
            "r = convert(m, cleanup=False)\n"
            "print(r.report.path, r.report.verdict, 'onnx_ir' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["protobuf", "verified", "False"], out
