"""``convert --fix-slices`` on a tf2onnx-style export with no StridedSlice (Slice nodes with
``1000000000`` ends, a Squeeze downstream): the fixed nodes are reported as the Slice nodes they
are, the model keeps the shapes it declared and gains none, and ``inspect --target`` of the
output flags nothing the input did not (beyond the fixed nodes, which it no longer flags)."""

from __future__ import annotations

import json
import subprocess
import sys

import onnx
import pytest
from onnx import TensorProto, helper

BIG = 1_000_000_000  # tf2onnx's "to the end"


def _tf2onnx_like(declare: bool) -> onnx.ModelProto:
    """x[N, 1, 1, 3] -> Slice reverse (axis 3) -> Slice crop (axes 1, 2, ends 1e9) -> Squeeze -> y;
    x -> Slice reverse -> Add -> z.  ``declare``: value_info for the intermediate tensors."""
    def i64(name, values):
        return helper.make_tensor(name, TensorProto.INT64, [len(values)], values)
    nodes = [helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["r"], name="rev"),
             helper.make_node("Slice", ["r", "st2", "en2", "ax2"], ["r2"], name="crop"),
             helper.make_node("Squeeze", ["r2", "sq"], ["y"], name="squeeze"),
             helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["q"], name="rev2"),
             helper.make_node("Add", ["q", "q"], ["z"], name="add")]
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["unk__1", 1, 1, 3]) for n in ("r", "r2", "q")]
    g = helper.make_graph(
        nodes, "tf2onnx", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["unk__1", 1, 1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["unk__1", 3]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, ["unk__1", 1, 1, 3])],
        initializer=[i64("st", [-1]), i64("en", [-BIG]), i64("ax", [3]), i64("sp", [-1]), i64("st2", [0, 0]),
                     i64("en2", [BIG, BIG]), i64("ax2", [1, 2]), i64("sq", [1, 2])],
        value_info=vi if declare else [])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="tf2onnx")
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def _cli(*args):
    proc = subprocess.run([sys.executable, "-m", "onnx_slice_tools", *map(str, args)], capture_output=True, text=True,
        check=False)
    assert proc.returncode == 0 and proc.stderr == "", (proc.returncode, proc.stderr)
    return proc.stdout


def _declared(m: onnx.ModelProto) -> dict:
    g = m.graph
    return {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in list(g.input) + list(g.output) + list(g.value_info) if v.type.tensor_type.HasField("shape")}


@pytest.mark.parametrize("declare", [False, True], ids=["undeclared", "declared"])
def test_fix_slices_reports_slices_as_slices_and_keeps_declared_shapes(tmp_path, declare):
    src, dst, rep = tmp_path / "m.onnx", tmp_path / "o.onnx", tmp_path / "r.json"
    original = _tf2onnx_like(declare)
    onnx.save(original, src)
    before = {(v["node"], v["constraint"]) for v in json.loads(_cli("inspect", src, "--target", "portable", "--json"))}
    assert {("rev", "negative_slice_step"), ("rev2", "negative_slice_step")} <= before

    line = _cli("convert", src, "-o", dst, "--fix-slices", "--target", "portable", "--report", rep)
    assert "2/2 Slice/Gather fixed for target portable" in line and "StridedSlice" not in line, line
    report = json.loads(rep.read_text())
    assert report["strided_slice_nodes"] == 0 and report["fixable_slice_nodes"] == report["fixed"] == 2
    for r in report["rewrites"]:
        assert r["op_type"] == "Slice" and r["flavor"] == "onnx", r
        assert r["spec"] == f"Slice(starts=[-1], ends=[{-BIG}], axes=[3], steps=[-1])", r

    after = {(v["node"], v["constraint"]) for v in json.loads(_cli("inspect", dst, "--target", "portable", "--json"))}
    assert after <= before - {("rev", "negative_slice_step"), ("rev2", "negative_slice_step")}, (before, after)

    converted = onnx.load(dst)
    declared, now = _declared(original), _declared(converted)
    present = {o for n in converted.graph.node for o in n.output} | {v.name for v in converted.graph.input}
    kept = {k: v for k, v in declared.items() if k in present}  # (cleanup merges rev2 into rev: q is gone)
    assert {k: now.get(k) for k in kept} == kept and {"x", "y", "z"} <= set(kept)  # as declared
    weights = {t.name for t in converted.graph.initializer}
    new = {k: v for k, v in now.items() if k not in declared and k not in weights}
    # only the fixed nodes' outputs may gain a shape (their plan's), and it is exactly the input's
    assert all(v == ["unk__1", 1, 1, 3] for v in new.values()), new
