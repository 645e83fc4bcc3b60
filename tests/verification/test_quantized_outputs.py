"""verification/quantized.py: which outputs are quantized and their step, read from the graph; the
as-shipped comparison and ``verify A B`` take them in steps (the one rule, tolerance.agree)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from onnx_slice_tools.verification.inplace import CheckedRun
from onnx_slice_tools.verification.quantized import RELATIVE, output_scales, output_steps, relative_disagreement
from onnx_slice_tools.verification.shipped import OutputRule, output_problems
from onnx_slice_tools.verification.tolerance import CALIBRATION_K


def qdq_graph():
    """x(uint8) -> DQ -> Relu -> Q -> y (uint8, scale 0.25) -> Slice -> ys; DQ(y) -> Reshape -> f (float);
    Relu(DQ) -> r (float, no step)."""
    inits = [numpy_helper.from_array(np.array(0.25, np.float32), "s"),
             numpy_helper.from_array(np.array(3, np.uint8), "z"),
             numpy_helper.from_array(np.array([0.5, 0.125], np.float32), "sv"),
             numpy_helper.from_array(np.array([1], np.int64), "b"), numpy_helper.from_array(np.array([3], np.int64), "e"),
             numpy_helper.from_array(np.array([-1], np.int64), "shape")]
    nodes = [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["d"]), helper.make_node("Relu", ["d"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "s", "z"], ["y"]),
             helper.make_node("Slice", ["y", "b", "e"], ["ys"]),
             helper.make_node("DequantizeLinear", ["y", "s", "z"], ["d2"]),
             helper.make_node("Reshape", ["d2", "shape"], ["f"]),
             helper.make_node("DequantizeLinear", ["x", "sv", "z"], ["pa"], axis=0)]
    outs = [helper.make_tensor_value_info(n, t, None) for n, t in
            (("y", TensorProto.UINT8), ("ys", TensorProto.UINT8), ("f", TensorProto.FLOAT), ("r", TensorProto.FLOAT),
             ("pa", TensorProto.FLOAT))]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.UINT8, [2, 4])], outs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_output_scales_follow_data_movement_to_the_q_or_dq():
    scales = output_scales(qdq_graph())
    assert scales == {"y": 0.25, "ys": 0.25, "f": 0.25, "pa": 0.125}  # per-axis: the smallest step
    steps = output_steps(qdq_graph(), {"y": (3.0, 0.0), "i": (2.0, 0.0)}, integers=["i", "j"])
    assert steps["y"].allowed == CALIBRATION_K * 3 and steps["f"].allowed == 1
    assert steps["i"].scale is None and steps["i"].allowed == CALIBRATION_K * 2
    assert "j" not in steps and "r" not in steps   # integers the framework agrees on: bitwise; floats: rtol


def test_the_as_shipped_comparison_takes_quantized_outputs_in_steps():
    y = np.arange(8, dtype=np.uint8)
    checked = CheckedRun({}, {"y": y}, {"y": TensorProto.UINT8}, {})
    moved = y.copy()
    moved[3] += 1                                         # one step: onnxruntime's fused kernel rounded otherwise
    assert output_problems(checked, {"y": moved}, OutputRule()) != {}   # an integer without a step: bitwise
    measured: dict = {}
    steps = output_steps(qdq_graph())
    assert output_problems(checked, {"y": moved}, OutputRule(steps=steps), measured=measured) == {}
    assert "1 steps" in measured["y"]
    far = y.copy()
    far[3] += 3
    problems = output_problems(checked, {"y": far}, OutputRule(steps=steps))
    assert "3 steps" in problems["y"], problems
    assert output_problems(checked, {"y": moved}, OutputRule({"y"}, steps)) != {}  # pure data movement: bitwise


def _qdq_slice_model():
    """x(uint8) -> DQ -> Conv -> Q -> StridedSlice (TF custom node) -> y (uint8): a quantized
    output through the rewrite, for ``verify A B``."""
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "s"), numpy_helper.from_array(np.array(128, np.uint8), "z"),
             numpy_helper.from_array(rng.integers(-50, 50, (4, 2, 3, 3)).astype(np.int8), "w"),
             numpy_helper.from_array(np.array(0.01, np.float32), "ws"), numpy_helper.from_array(np.array(0, np.int8), "wz"),
             numpy_helper.from_array(np.array(0.2, np.float32), "ys"), numpy_helper.from_array(np.array(100, np.uint8), "yz"),
             numpy_helper.from_array(np.array([0, 0, 1, 0], np.int32), "b"),
             numpy_helper.from_array(np.array([0, 0, 5, 0], np.int32), "e"),
             numpy_helper.from_array(np.array([1, 1, 2, 1], np.int32), "st")]
    dom = "ai.onnx.converters.tensorflow"
    nodes = [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["d"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["dw"]),
             helper.make_node("Conv", ["d", "dw"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["q"]),
             helper.make_node("StridedSlice", ["q", "b", "e", "st"], ["y"], domain=dom, begin_mask=11, end_mask=11,
                              ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 2, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19), helper.make_opsetid(dom, 1)], ir_version=9)


def test_verify_a_b_compares_quantized_outputs_in_steps():
    from onnx_slice_tools import convert
    from onnx_slice_tools.verification.compare import compare_models
    original = _qdq_slice_model()
    result = convert(original)
    assert result.report.verdict == "verified", dict(result.report.model_checks)
    assert output_scales(result.model) == {"y": np.float32(0.2)}
    ok = compare_models(original, result.model)
    assert ok.status == "ok", ok.outputs
    shifted = type(result.model)()
    shifted.CopyFrom(result.model)
    for t in shifted.graph.initializer:
        if t.name == "yz":
            t.CopyFrom(numpy_helper.from_array(np.array(101, np.uint8), "yz"))
    bad = compare_models(original, shifted)
    assert bad.status == "mismatch" and "systematic shift" in bad.outputs["y"], bad.outputs


def test_float_output_calibrated_relative_in_the_as_shipped_run():
    """A float output the calibration lists as RELATIVE (a hybrid .tflite's): the as-shipped run
    allows k x that figure, never less than the default; an error beyond it still fails."""
    rng = np.random.default_rng(4)
    y = rng.standard_normal(300).astype(np.float32)
    checked = CheckedRun({}, {"y": y}, {"y": TensorProto.FLOAT}, {})
    noisy = (y + 0.017 * np.abs(y).max() * rng.uniform(-1, 1, 300)).astype(np.float32)
    calibration = {"y": (RELATIVE, 0.015)}
    steps = output_steps(qdq_graph(), {"r": (RELATIVE, 0.015), "y": (RELATIVE, 0.5)})
    assert "r" not in steps and steps["y"].allowed == 1   # a RELATIVE entry is no figure in steps
    assert relative_disagreement(calibration) == {"y": 0.015}
    assert output_problems(checked, {"y": noisy}, OutputRule()) != {}                    # the default 1e-2
    assert output_problems(checked, {"y": noisy}, OutputRule(relative={"y": 0.015})) == {}
    assert output_problems(checked, {"y": noisy}, OutputRule(relative={"y": 0.001})) != {}  # never looser than asked
    scaled = (y * np.float32(1.25)).astype(np.float32)
    assert output_problems(checked, {"y": scaled}, OutputRule(relative={"y": 0.015})) != {}
    assert output_problems(checked, {"y": noisy}, OutputRule({"y"}, relative={"y": 0.015})) != {}  # data movement: bitwise


def test_output_scales_given_the_op_types_read_no_nodes_without_a_quantizer():
    """output_scales with the main graph's op types (a NodeTable's, which the as-shipped run has)
    answers what it answers walking the graph; with none of QuantizeLinear/DequantizeLinear among
    them it answers {} without the walk."""
    from onnx_slice_tools.graphs.table import NodeTable
    model = qdq_graph()
    assert output_scales(model, NodeTable(model.graph).ops) == output_scales(model)
    plain = qdq_graph()
    for n in plain.graph.node:
        if n.op_type in ("QuantizeLinear", "DequantizeLinear"):
            n.op_type = "Identity"
            del n.input[1:]
    assert output_scales(plain) == {} == output_scales(plain, NodeTable(plain.graph).ops)
