"""cleanup/qdq.py: QuantizeLinear(move(DequantizeLinear(t))) becomes move(t) -- only where it is
exact (one per-tensor float32 scale and zero point, 8/16-bit integers), and the result computes
the same bytes as before in onnxruntime on every integer value."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_slice_tools.cleanup.passes import cleanup
from onnx_slice_tools.cleanup.qdq import QdqMovementPass
from onnx_slice_tools.cleanup.precheck import may_change

U8, I8, F = TensorProto.UINT8, TensorProto.INT8, TensorProto.FLOAT


def c(name, values, dtype=np.int64):
    return numpy_helper.from_array(np.array(values, dtype=dtype), name)


def qdq_model(elem=U8, scale=0.5, zp=3, q_scale=None, q_zp=None, middle=("Slice",), extra_use=False,
              dq_use=False, shape=(4, 64)):
    """DequantizeLinear(x) -> middle ops -> QuantizeLinear -> y (an integer graph output)."""
    np_t = np.uint8 if elem == U8 else np.int8
    inits = [c("sc", scale, np.float32), c("zp", zp, np_t), c("sc2", scale if q_scale is None else q_scale, np.float32),
             c("zp2", zp if q_zp is None else q_zp, np_t), c("b", [1]), c("e", [63]), c("a", [1]), c("st", [2]),
             c("shape", [-1]), c("perm", [1, 0])]
    nodes = [helper.make_node("DequantizeLinear", ["x", "sc", "zp"], ["v0"])]
    for k, op in enumerate(middle):
        i, o = f"v{k}", f"v{k + 1}"
        if op == "Slice":
            nodes.append(helper.make_node("Slice", [i, "b", "e", "a", "st"], [o]))
        elif op == "Reshape":
            nodes.append(helper.make_node("Reshape", [i, "shape"], [o]))
        elif op == "Transpose":
            nodes.append(helper.make_node("Transpose", [i], [o], perm=[1, 0]))
        elif op == "Relu":
            nodes.append(helper.make_node("Relu", [i], [o]))
    last = f"v{len(middle)}"
    nodes.append(helper.make_node("QuantizeLinear", [last, "sc2", "zp2"], ["y"]))
    outputs = [helper.make_tensor_value_info("y", elem, None)]
    if extra_use:
        nodes.append(helper.make_node("Neg", ["v1"], ["z"]))
        outputs.append(helper.make_tensor_value_info("z", F, None))
    if dq_use:
        nodes.append(helper.make_node("Abs", ["v0"], ["w"]))
        outputs.append(helper.make_tensor_value_info("w", F, None))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", elem, list(shape))], outputs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def run(proto, x):
    s = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, {"x": x})


def cleaned(proto):
    m = ir.from_proto(proto)
    report = cleanup(m)
    return report, ir.to_proto(m)


def every_value(elem, shape=(4, 64)):
    info = np.iinfo(np.uint8 if elem == U8 else np.int8)
    return np.arange(info.min, info.max + 1).astype(info.dtype).reshape(shape)


@pytest.mark.parametrize("elem", [U8, I8])
@pytest.mark.parametrize("scale", [0.5, 0.0235294, 1e-5, 3.7, 0.00390625])
@pytest.mark.parametrize("middle", [("Slice",), ("Transpose", "Reshape"), ("Slice", "Transpose")])
def test_removed_and_bitwise_on_every_value(elem, scale, middle):
    proto = qdq_model(elem, scale=scale, zp=-7 if elem == I8 else 131, middle=middle)
    assert may_change(proto) is not None
    report, after = cleaned(proto)
    ops = [n.op_type for n in after.graph.node]
    assert "QuantizeLinear" not in ops and "DequantizeLinear" not in ops, ops
    assert report["passes"]["QdqMovementPass"]["removed"] == {"DequantizeLinear": 1, "QuantizeLinear": 1}
    assert [o.name for o in after.graph.output] == ["y"]
    onnx.checker.check_model(after, full_check=True)
    x = every_value(elem)
    before, now = run(proto, x), run(after, x)
    assert before[0].dtype == now[0].dtype and before[0].shape == now[0].shape
    assert before[0].tobytes() == now[0].tobytes()


@pytest.mark.parametrize("kwargs", [dict(q_scale=0.25), dict(q_zp=4), dict(middle=("Relu",)),
                                    dict(extra_use=True)],
                         ids=["other scale", "other zero point", "arithmetic between", "middle value used twice"])
def test_kept_where_not_exact(kwargs):
    proto = qdq_model(**kwargs)
    _, after = cleaned(proto)
    ops = [n.op_type for n in after.graph.node]
    assert "QuantizeLinear" in ops and "DequantizeLinear" in ops, ops


def test_per_axis_scale_is_kept():
    proto = qdq_model()
    for t in proto.graph.initializer:
        if t.name in ("sc", "sc2"):
            t.CopyFrom(c(t.name, [0.5] * 4, np.float32))
        if t.name in ("zp", "zp2"):
            t.CopyFrom(c(t.name, [3] * 4, np.uint8))
    for n in proto.graph.node:
        if n.op_type in ("QuantizeLinear", "DequantizeLinear"):
            n.attribute.append(helper.make_attribute("axis", 0))
    proto.graph.node[1].input[:] = ["v0", "b", "e", "a", "st"]
    _, after = cleaned(proto)
    assert [n.op_type for n in after.graph.node].count("QuantizeLinear") == 1


def test_dequantized_value_used_elsewhere_stays_for_that_use():
    proto = qdq_model(dq_use=True)
    _, after = cleaned(proto)
    ops = [n.op_type for n in after.graph.node]
    assert ops.count("DequantizeLinear") == 1 and "QuantizeLinear" not in ops, ops
    x = every_value(U8)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(run(proto, x), run(after, x)))


def test_pass_alone_reports_no_change_when_nothing_matches():
    proto = qdq_model(middle=("Relu",))
    m = ir.from_proto(proto)
    assert not QdqMovementPass()(m).modified


def test_declared_float_types_of_moved_values_become_integer():
    """tf2onnx may declare the float value_info of the values between DQ and Q: after the pass they
    hold integers, and the cleaned model says so (the checker and onnxruntime accept it)."""
    proto = qdq_model(middle=("Slice", "Transpose"))
    proto.graph.value_info.extend([helper.make_tensor_value_info("v1", F, [4, 31]),
                                   helper.make_tensor_value_info("v2", F, [31, 4])])
    _, after = cleaned(proto)
    assert "QuantizeLinear" not in [n.op_type for n in after.graph.node]
    onnx.checker.check_model(after, full_check=True)
    x = every_value(U8)
    assert run(proto, x)[0].tobytes() == run(after, x)[0].tobytes()


def _concat_model(scale_b=0.5):
    inits = [c("sa", 0.5, np.float32), c("sb", scale_b, np.float32), c("z", 7, np.uint8), c("b0", [0]), c("e0", [2]),
             c("b1", [2]), c("e1", [4]), c("a", [0])]
    nodes = [helper.make_node("DequantizeLinear", ["x", "sa", "z"], ["d"]),
             helper.make_node("Slice", ["d", "b0", "e0", "a"], ["p"]),
             helper.make_node("QuantizeLinear", ["p", "sa", "z"], ["qp"]),
             helper.make_node("Slice", ["x", "b1", "e1", "a"], ["r"]),
             helper.make_node("DequantizeLinear", ["qp", "sa", "z"], ["dp"]),
             helper.make_node("DequantizeLinear", ["r", "sb", "z"], ["dr"]),
             helper.make_node("Concat", ["dp", "dr"], ["cat"], axis=1),
             helper.make_node("Transpose", ["cat"], ["tr"], perm=[1, 0]),
             helper.make_node("QuantizeLinear", ["tr", "sa", "z"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", U8, [4, 64])],
                          [helper.make_tensor_value_info("y", U8, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def test_concat_of_one_scale_runs_on_the_integers():
    proto = _concat_model()
    assert may_change(proto) is not None
    _, after = cleaned(proto)
    ops = [n.op_type for n in after.graph.node]
    assert "QuantizeLinear" not in ops and "DequantizeLinear" not in ops, ops
    onnx.checker.check_model(after, full_check=True)
    x = every_value(U8)
    assert run(proto, x)[0].tobytes() == run(after, x)[0].tobytes()


def test_concat_of_two_scales_keeps_its_quantization():
    _, after = cleaned(_concat_model(scale_b=0.25))
    assert [n.op_type for n in after.graph.node].count("QuantizeLinear") == 1
