"""fold_weight_subgraphs: weight-only nodes become initializers, a per-channel Mul/Add after a
Conv moves into its weights and bias; values computed from external data stay external."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_slice_tools.frontends.fold import drop_identity_reshapes, fold_weight_subgraphs


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


def _layout_reshapes_model(rng):
    """tf2onnx's leftovers around a 1x1 spatial map (InceptionResNetV2's last blocks): Conv ->
    Relu -> Reshape to [-1, C, 1, 1] (its input's own shape) -> Conv, and Reshapes that do move
    data or must stay: NHWC [N, 1, 1, 8] to NCHW, a graph output, -1 beside a copied unknown dim."""
    w1 = rng.standard_normal((6, 8, 1, 1)).astype(np.float32)
    w2 = rng.standard_normal((5, 6, 1, 3)).astype(np.float32)
    shape = {"to_nchw": [-1, 8, 1, 1], "same": [-1, 6, 1, 1], "copy": [0, 6, 0, 1], "free": [-1, 0]}
    nodes = [
        helper.make_node("Reshape", ["x", "to_nchw"], ["xc"]),          # [N,1,1,8] -> [N,8,1,1]: moves data
        helper.make_node("Conv", ["xc", "w1"], ["c1"]),
        helper.make_node("Relu", ["c1"], ["r"]),
        helper.make_node("Reshape", ["r", "same"], ["r2"]),             # identity
        helper.make_node("Reshape", ["r2", "copy"], ["r3"]),            # identity (0 copies), chained
        helper.make_node("Conv", ["r3", "w2"], ["c2"], pads=[0, 1, 0, 1]),
        helper.make_node("Reshape", ["r", "same"], ["r_out"]),          # identity, but a graph output
        helper.make_node("Reshape", ["m", "free"], ["m2"]),             # [N, M]: -1 beside an unknown copied dim
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 1, 8]),
                     helper.make_tensor_value_info("m", TensorProto.FLOAT, ["N", "M"])],
        [helper.make_tensor_value_info("c2", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("r_out", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("m2", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")]
        + [numpy_helper.from_array(np.array(v, np.int64), k) for k, v in shape.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def test_reshapes_to_their_input_shape_are_dropped_and_the_others_stay():
    from onnx_slice_tools.verification.tolerance import agree
    rng = np.random.default_rng(3)
    model = _layout_reshapes_model(rng)
    before = model.SerializeToString()
    assert drop_identity_reshapes(model) == 2
    reshaped = {n.output[0] for n in model.graph.node if n.op_type == "Reshape"}
    assert reshaped == {"xc", "r_out", "m2"}
    assert [n.input[0] for n in model.graph.node if n.op_type == "Conv"] == ["xc", "r"]
    assert "same" in {t.name for t in model.graph.initializer} and "copy" not in {t.name for t in model.graph.initializer}
    feeds = {"x": rng.standard_normal((2, 1, 1, 8)).astype(np.float32),
             "m": rng.standard_normal((2, 3)).astype(np.float32)}
    want = ort.InferenceSession(before, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for w, g in zip(want, got):
        assert agree(w, g).ok, agree(w, g)


def test_identity_reshapes_left_by_tf2onnx_are_dropped_from_a_keras_model(tmp_path):
    """The synthetic reproduction of InceptionResNetV2's extra node: convolutions on a 1x1 map.
    tf2onnx's own conversion keeps a Reshape to the same shape between a Relu and the next Conv
    and before a Concat; ours has neither, equals TensorFlow and has no more nodes.  (Fewer when
    run alone, 9 against 10; once, in a full CI run, tf2onnx's pass over our export left a
    Transpose it leaves nowhere else and the counts tied at 10: not reproduced alone, after the
    tests that ran before it, nor under 8 hash seeds -- the export depends on some state of
    the process, so only "no more" is asserted.)"""
    import collections

    import keras
    import tf2onnx

    from onnx_slice_tools.api import convert
    from onnx_slice_tools.frontends.sources import quiet_frameworks
    from onnx_slice_tools.frontends import sources
    # (named layers: tf2onnx's layout optimiser visits nodes in an order that follows their names)
    inp = keras.Input((1, 1, 8), name="x")
    y = keras.layers.Conv2D(6, 1, activation="relu", name="c1")(inp)
    y = keras.layers.Conv2D(5, (1, 3), padding="same", activation="relu", name="c2")(y)
    y = keras.layers.Concatenate(name="cat")([y, keras.layers.Conv2D(5, 1, name="c3")(inp)])
    keras.Model(inp, y, name="m").save(tmp_path / "m.keras")
    with quiet_frameworks():
        native, _ = tf2onnx.convert.from_keras(keras.models.load_model(tmp_path / "m.keras"), opset=17)
    result = convert(tmp_path / "m.keras")
    assert result.report.verdict == "verified", result.report.model_checks
    assert result.report.model_checks["framework"].startswith("passed")
    ours = collections.Counter(n.op_type for n in result.model.graph.node)
    theirs = collections.Counter(n.op_type for n in native.graph.node)
    assert sum(ours.values()) <= sum(theirs.values()), (ours, theirs)
    assert drop_identity_reshapes(native) >= 1 and drop_identity_reshapes(result.model) == 0
    with pytest.MonkeyPatch.context() as mp:  # the export without the step keeps them
        mp.setattr(sources, "drop_identity_reshapes", lambda model: 0)
        assert drop_identity_reshapes(sources.load_source(tmp_path / "m.keras")) >= 1
