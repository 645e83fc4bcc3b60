"""One walker per representation: every node of every graph (main, If/Loop bodies at any depth,
function bodies and their subgraphs) is visited exactly once, and the commands built on them
(``verify MODEL``, ``inspect --target``) count each node once."""

from __future__ import annotations

import collections
import json

import onnx
import onnx_ir as ir
from onnx import TensorProto, helper

from onnx_slice_tools.api import verify_model_file
from onnx_slice_tools.cli.main import main as cli_main
from onnx_slice_tools.frontends.tfexport import TF_DOMAIN
from onnx_slice_tools.graphs.walk import all_graphs, all_nodes, proto_graphs, proto_nodes


def _slice(prefix: str, out: str, x: str = "x"):
    """Constants and a StridedSlice x[:, ::-1] named ``{prefix}ss`` reading the outer ``x``, and a
    dead ``Gather(x, -1)`` named ``{prefix}gather`` (a 0-d negative index: the portable target
    forbids it)."""
    consts = [helper.make_node("Constant", [], [f"{prefix}{k}"], name=f"{prefix}{k}", value=helper.make_tensor(
        f"{prefix}{k}", TensorProto.INT64, [len(v)] if v else [], v or [-1]))
        for k, v in (("b", [0, 0]), ("e", [0, 0]), ("s", [1, -1]), ("i", None))]
    return consts + [helper.make_node("StridedSlice", [x, f"{prefix}b", f"{prefix}e", f"{prefix}s"], [out],
                                      name=f"{prefix}ss", domain=TF_DOMAIN, begin_mask=3, end_mask=3),
                     helper.make_node("Gather", [x, f"{prefix}i"], [f"{prefix}gy"], name=f"{prefix}gather", axis=1)]


def _out(name):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, None)


def _if_model(nested: bool = False, function: bool = False) -> onnx.ModelProto:
    """y = If(c, x[:, ::-1], x[:, ::-1]) with the StridedSlice in each branch and none in main;
    ``nested``: the else branch holds a Loop whose body slices too; ``function``: a model-local
    function holding an If with a slice in its then branch is called as well."""
    then_g = helper.make_graph(_slice("t", "ty"), "then", [], [_out("ty")])
    else_nodes = _slice("f", "fy")
    if nested:
        body = helper.make_graph(_slice("l", "ly") + [helper.make_node("Identity", ["cond"], ["cond_out"], name="lid")],
                                 "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                                          helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
                                 [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), _out("ly")])
        else_nodes += [helper.make_node("Constant", [], ["trip"], name="trip",
                                        value=helper.make_tensor("trip", TensorProto.INT64, [], [1])),
                       helper.make_node("Loop", ["trip", ""], ["scanned"], name="loop", body=body)]
    else_g = helper.make_graph(else_nodes, "else", [], [_out("fy")])
    nodes = [helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_g, else_branch=else_g)]
    outputs = [_out("y")]
    functions = []
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(TF_DOMAIN, 1)]
    if function:
        fthen = helper.make_graph(_slice("g", "gy"), "fthen", [], [_out("gy")])
        felse = helper.make_graph([helper.make_node("Identity", ["x"], ["gz"], name="gid")], "felse", [], [_out("gz")])
        fn = helper.make_function("local", "Flip", ["c", "x"], ["z"],
                                  [helper.make_node("If", ["c"], ["z"], name="fif", then_branch=fthen, else_branch=felse)],
                                  opsets)
        functions.append(fn)
        nodes.append(helper.make_node("Flip", ["c", "x"], ["z"], name="call", domain="local"))
        outputs.append(_out("z"))
        opsets = opsets + [helper.make_opsetid("local", 1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                                           helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])], outputs)
    model = helper.make_model(graph, functions=functions, opset_imports=opsets)
    model.ir_version = 8
    return model


def _built_names(model: onnx.ModelProto) -> list[str]:
    """Every node name the builder above used, read from the proto's structure by hand."""
    names = []

    def graph(g):
        for n in g.node:
            names.append(n.name)
            for a in n.attribute:
                if a.type == a.GRAPH:
                    graph(a.g)
    graph(model.graph)
    for f in model.functions:
        graph(f)
    return names


def test_each_node_visited_once_in_both_representations():
    for nested in (False, True):
        for function in (False, True):
            proto = _if_model(nested, function)
            expected = collections.Counter(_built_names(proto))
            assert max(expected.values()) == 1 and "lss" in expected or not nested
            assert collections.Counter(n.name for n, _ in all_nodes(ir.from_proto(proto))) == expected
            assert collections.Counter(n.name for n, _ in proto_nodes(proto)) == expected
            ir_labels = [label for _, label, _ in all_graphs(ir.from_proto(proto))]
            assert sorted(ir_labels) == sorted(label for _, label, _ in proto_graphs(proto))
            assert len(set(ir_labels)) == len(ir_labels)


def test_labels_name_the_path_to_each_subgraph():
    labels = {n.name: label for n, label in all_nodes(ir.from_proto(_if_model(nested=True, function=True)))}
    assert labels["if"] == "main"
    assert labels["tss"] == "main > If 'if'.then_branch"
    assert labels["fss"] == "main > If 'if'.else_branch"
    assert labels["lss"] == "main > If 'if'.else_branch > Loop 'loop'.body"
    assert labels["gss"] == "function local::Flip > If 'fif'.then_branch"


def test_verify_model_counts_each_left_strided_slice_once(tmp_path, capfd):
    path = tmp_path / "m.onnx"
    onnx.save(_if_model(), path)
    cli_main(["verify", str(path)])
    out = capfd.readouterr().out
    line = next(line for line in out.splitlines() if "no_strided_slice" in line)
    assert "failed: 2 left:" in line, line
    status = verify_model_file(path)["no_strided_slice"]
    assert status.startswith("failed: 2 left: ") and "(main)" not in status, status
    assert sorted(status.removeprefix("failed: 2 left: ").split(", ")) == [
        "fss (main > If 'if'.else_branch)", "tss (main > If 'if'.then_branch)"], status


def test_inspect_target_lists_each_violation_once(tmp_path, capfd):
    path = tmp_path / "m.onnx"
    onnx.save(_if_model(nested=True), path)
    cli_main(["inspect", str(path), "--target", "portable", "--json"])
    rows = json.loads(capfd.readouterr().out)
    per_node = collections.Counter(row["node"] for row in rows)
    assert set(per_node) == {"tgather", "fgather", "lgather"}, rows
    assert len({per_node[n] for n in per_node}) == 1 and len(rows) == len({json.dumps(r) for r in rows}), rows
