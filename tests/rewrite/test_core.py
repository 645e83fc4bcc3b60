"""One rewrite core (rewrite/core.py) behind both representations: the onnx-ir pass is an
``InPlacePass`` that runs in a ``PassManager`` with its records on its result; each distinct
signature is parsed once and each distinct lowering made once on either path; the report says
which representation ran."""

from __future__ import annotations

import sys
from pathlib import Path

import onnx
import onnx_ir as ir
from onnx_ir.passes.common import RemoveUnusedNodesPass
from onnx import TensorProto, helper

from onnx_slice_tools import convert
from onnx_slice_tools.rewrite import core, ir_pass, proto_pass
from onnx_slice_tools.rewrite.ir_pass import StridedSliceRewritePass, StridedSliceRewriteResult

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from bench import PATTERNS, synthetic_model


def _counting(monkeypatch, module, name):
    calls = []
    real = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(module, name, counted)
    return calls


def test_the_onnx_ir_pass_runs_in_a_pass_manager_and_its_result_carries_the_records():
    m = ir.from_proto(synthetic_model(16, False))
    rewrite = StridedSliceRewritePass(opset=17)
    result = ir.passes.PassManager([rewrite, RemoveUnusedNodesPass()])(m)
    assert result.modified and result.model is m
    assert isinstance(rewrite.result, StridedSliceRewriteResult) and isinstance(rewrite.result, ir.passes.PassResult)
    assert [r.node for r in rewrite.result.records] == [f"ss{i}" for i in range(16)]
    assert all(r.lowering is not None for r in rewrite.result.records)
    assert not any(n.op_type == "StridedSlice" for n in m.graph)
    direct = StridedSliceRewritePass(opset=17)(ir.from_proto(synthetic_model(16, False)))
    assert isinstance(direct, StridedSliceRewriteResult)
    assert [r.to_json() for r in direct.records] == [r.to_json() for r in rewrite.result.records]


def test_each_distinct_signature_is_parsed_and_lowered_once_on_both_paths(monkeypatch):
    """64 slices of 8 patterns (one set of index constants per pattern) on one tensor: 8 parses,
    8 plans and 8 lowerings, on the onnx-ir pass as on the protobuf one."""
    n = 64
    model = synthetic_model(n, False, fan_out=n)
    shapes = ir_pass.derive_shapes(model)  # (shape derivation reads the nodes on its own)
    assert shapes["x"] == (TensorProto.FLOAT, (4, 16, 16, 8))
    parses = _counting(monkeypatch, ir_pass, "parse_node")
    plans = _counting(monkeypatch, core, "make_plan")
    lowerings = _counting(monkeypatch, core, "lower")
    made_steps = _counting(monkeypatch, ir_pass, "steps")
    result = StridedSliceRewritePass(opset=17, shapes=shapes)(ir.from_proto(model))
    assert sum(r.lowering is not None for r in result.records) == n
    assert (len(parses), len(plans), len(lowerings), len(made_steps)) == (len(PATTERNS),) * 4
    parses = _counting(monkeypatch, proto_pass, "parse_node")
    plans.clear(), lowerings.clear()
    result = proto_pass.ProtoStridedSliceRewritePass(opset=17)(model, shapes)
    assert sum(r.lowering is not None for r in result.records) == n
    assert (len(parses), len(plans), len(lowerings)) == (len(PATTERNS),) * 3


def _if_model() -> onnx.ModelProto:
    body = lambda p: helper.make_graph(  # noqa: E731
        [helper.make_node("StridedSlice", ["x", "b", "e", "s"], [f"{p}y"], name=f"{p}ss", domain=core.TF_DOMAIN,
                          begin_mask=1, end_mask=1)], p, [], [helper.make_tensor_value_info(f"{p}y", TensorProto.FLOAT, None)])
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], name="if", then_branch=body("t"), else_branch=body("f"))], "g",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor(n, TensorProto.INT64, [2], v) for n, v in (("b", [0, 1]), ("e", [0, 5]), ("s", [1, 2]))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(core.TF_DOMAIN, 1)])
    model.ir_version = 8
    return model


def test_the_report_says_which_representation_ran():
    plain = convert(synthetic_model(8, False), verify=False)
    assert plain.report.path == "protobuf" and plain.report.to_dict()["path"] == "protobuf"
    nested = convert(_if_model(), verify=False)  # a StridedSlice in a subgraph: the protobuf path declines
    assert nested.report.rewritten == 2
    assert nested.report.path == "onnx-ir" and nested.report.to_dict()["path"] == "onnx-ir"


def test_default_opset_and_unused_domains_rules():
    assert core.default_opset_of({"ai.onnx": 13, "x": 1}) == 13
    assert core.default_opset_of({"": 17, "ai.onnx": 13}) == 17
    assert core.default_opset_of({"x": 1}) is None
    assert list(core.with_default_opset({"x": 1, "ai.onnx": 13}, 17).items()) == [("", 17), ("x", 1)]
    assert core.unused_domains(["", "ai.onnx", "a", "b"], {"b"}) == ["a"]
