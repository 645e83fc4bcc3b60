"""fold_weight_subgraphs: weight-only nodes become initializers, a per-channel Mul/Add after a
Conv moves into its weights and bias; values computed from external data stay external."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from onnx_slice_tools.frontends.fold import fold_weight_subgraphs


def _conv_model(rng):
    # small integers and powers of two: every product and sum is exact in float32, so folding
    # the scale into the weights gives the same bits (no rounding in either order)
    w_hwio = rng.integers(-3, 4, (3, 3, 2, 4)).astype(np.float32)
    scale = (2.0 ** rng.integers(-2, 3, (1, 4, 1, 1))).astype(np.float32)
    shift = rng.integers(-4, 5, (4, 1, 1)).astype(np.float32)
    nodes = [
        helper.make_node("Transpose", ["w_hwio"], ["w"], perm=[3, 2, 0, 1]),
        helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1]),
        helper.make_node("Mul", ["y", "scale"], ["z"]),
        helper.make_node("Add", ["shift", "z"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 5])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 4, 5, 5])],
        [numpy_helper.from_array(w_hwio, "w_hwio"), numpy_helper.from_array(scale, "scale"),
         numpy_helper.from_array(shift, "shift")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def _run(path_or_bytes, x):
    return ort.InferenceSession(path_or_bytes, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def test_transpose_and_channel_scale_shift_fold_into_the_conv_same_bits(tmp_path):
    rng = np.random.default_rng(1)
    model = _conv_model(rng)
    x = rng.integers(-3, 4, (1, 2, 5, 5)).astype(np.float32)
    want = _run(model.SerializeToString(), x)
    assert fold_weight_subgraphs(model) == 3
    assert [n.op_type for n in model.graph.node] == ["Conv"] and len(model.graph.node[0].input) == 3
    onnx.checker.check_model(model)
    assert _run(model.SerializeToString(), x).tobytes() == want.tobytes()


def test_folding_external_weights_appends_to_their_file(tmp_path):
    rng = np.random.default_rng(2)
    model = _conv_model(rng)
    x = rng.integers(-3, 4, (1, 2, 5, 5)).astype(np.float32)
    want = _run(model.SerializeToString(), x)
    onnx.save_model(model, str(tmp_path / "m.onnx"), save_as_external_data=True, location="m.onnx.data",
                    size_threshold=0, all_tensors_to_one_file=True)
    head = onnx.load(str(tmp_path / "m.onnx"), load_external_data=False)
    assert fold_weight_subgraphs(head) == 0  # without base_dir, external data is not read
    assert fold_weight_subgraphs(head, tmp_path) == 3
    assert all(t.data_location == TensorProto.EXTERNAL for t in head.graph.initializer)
    onnx.save_model(head, str(tmp_path / "folded.onnx"))
    assert _run(str(tmp_path / "folded.onnx"), x).tobytes() == want.tobytes()


def test_graph_outputs_inputs_and_shared_conv_outputs_are_left_alone():
    rng = np.random.default_rng(3)
    model = _conv_model(rng)
    model.graph.output.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, None))  # a weight is an output
    model.graph.output.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, None))  # Conv output used twice
    fold_weight_subgraphs(model)
    assert [n.op_type for n in model.graph.node] == ["Transpose", "Conv", "Mul", "Add"]
    model = _conv_model(rng)
    model.graph.input.append(helper.make_tensor_value_info("w_hwio", TensorProto.FLOAT, [3, 3, 2, 4]))
    fold_weight_subgraphs(model)  # an initializer that is also an input may be fed: not a constant
    assert [n.op_type for n in model.graph.node][0] == "Transpose"


def test_channel_scale_after_a_layout_transpose_folds_into_the_conv():
    rng = np.random.default_rng(4)
    model = _conv_model(rng)
    nodes = list(model.graph.node)
    # Conv -> Transpose to NHWC -> Mul by a per-channel [4] (channels last) -> Add
    nodes.insert(2, helper.make_node("Transpose", ["y"], ["y_nhwc"], perm=[0, 2, 3, 1]))
    nodes[3].input[:] = ["y_nhwc", "scale_last"]
    nodes[4].input[:] = ["z", "shift_last"]
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    scale = (2.0 ** rng.integers(-2, 3, (4,))).astype(np.float32)
    model.graph.initializer.extend([numpy_helper.from_array(scale, "scale_last"),
                                    numpy_helper.from_array(np.ones((5, 1), np.float32), "shift_last")])
    model.graph.output[0].type.tensor_type.shape.dim[1].dim_value = 5
    model.graph.output[0].type.tensor_type.shape.dim[3].dim_value = 4
    x = rng.integers(-3, 4, (1, 2, 5, 5)).astype(np.float32)
    want = _run(model.SerializeToString(), x)
    fold_weight_subgraphs(model)
    # the Add's constant varies along W, not along the channels: it stays
    assert [n.op_type for n in model.graph.node] == ["Conv", "Transpose", "Add"]
    assert _run(model.SerializeToString(), x).tobytes() == want.tobytes()
