"""api._ProtoHolder's reads that take the validation's node table (io/validate.py hands it out):
the family look-up and the scan give what a walk of the proto gives, on the samples and on
models holding a raw slice-update node in the main graph, in a subgraph or in a function."""

from __future__ import annotations

from pathlib import Path

import pytest
from onnx import TensorProto, helper

from onnx_slice_tools.api import Context, _ProtoHolder
from onnx_slice_tools.lowering.targets import get_target
from onnx_slice_tools.rewrite.proto_pass import scan
from onnx_slice_tools.rewrite.updates import has_family

ROOT = Path(__file__).resolve().parents[1]
F = TensorProto.FLOAT


def _update(name="u"):
    return helper.make_node("XlaDynamicUpdateSlice", ["x", "x", "i"], [name])


def _model(where: str):
    x = helper.make_tensor_value_info("x", F, [4])
    i = helper.make_tensor("i", TensorProto.INT32, [1], [0])
    out = helper.make_tensor_value_info("y", F, None)
    functions = []
    if where == "main":
        nodes = [_update("y")]
    elif where == "if":
        branch = helper.make_graph([_update("b")], "branch", [], [helper.make_tensor_value_info("b", F, None)])
        cond = helper.make_tensor("c", TensorProto.BOOL, [], [True])
        nodes = [helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch)]
        return helper.make_model(helper.make_graph(nodes, "g", [x], [out], [i, cond]),
                                 opset_imports=[helper.make_opsetid("", 17)])
    elif where == "function":
        f = helper.make_function("local", "f", ["x", "i"], ["z"], [_update("z")], [helper.make_opsetid("", 17)])
        functions = [f]
        nodes = [helper.make_node("f", ["x", "i"], ["y"], domain="local")]
    else:
        nodes = [helper.make_node("Relu", ["x"], ["y"])]
    return helper.make_model(helper.make_graph(nodes, "g", [x], [out], [i]), functions=functions,
                             opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])


def _holder(source):
    ctx = Context(None, None, None, True, True, get_target(None), 1 << 28)
    holder = _ProtoHolder(source, ctx)
    holder.load()
    return holder


CASES = {p.name: str(p) for p in sorted((ROOT / "models").glob("*.onnx"))}
CASES.update({f"family in {w}": w for w in ("main", "if", "function", "none")})


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_table_answers_as_the_walks(name):
    source = CASES[name]
    model = _model(source) if name.startswith("family") else source
    holder = _holder(model)
    assert holder.table is not None  # (the validation read it: the short-cuts are taken)
    proto = holder.proto
    assert holder.has_family() == has_family(proto)
    if name.startswith("family") and not name.endswith("none"):
        assert holder.has_family()
    walked, fresh = scan(proto.graph, holder.table), scan(proto.graph)
    assert (walked.inputs, walked.found, walked.positions) == (fresh.inputs, fresh.found, fresh.positions)
