"""Quantized .tflite files (made here by TensorFlow's converter: full integer with uint8 / int8
I/O, int8 with float I/O, dynamic range): converted, verified against LiteRT in quantization steps
(verification/tolerance.py), as small as tf2onnx's conversion; planted errors beyond the rule fail;
integer ids drawn inside the embedding table, --input-range accepted; a tf2onnx node failure is
named as tf2onnx's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
import tensorflow as tf
from onnx import numpy_helper

from onnx_slice_tools import convert
from onnx_slice_tools.cli.main import main as cli_main
from onnx_slice_tools.frontends.sources import quiet_frameworks, verify_against_source
from onnx_slice_tools.verification.quantized import output_scales



def _conv_module(out_slice: bool):
    rng = np.random.default_rng(0)

    class M(tf.Module):
        def __init__(self):
            self.w = tf.Variable(rng.standard_normal((3, 3, 4, 6)).astype(np.float32) * 0.3)
            self.b = tf.Variable(rng.standard_normal(6).astype(np.float32))

        @tf.function(input_signature=[tf.TensorSpec([1, 8, 8, 4], tf.float32)])
        def __call__(self, x):
            y = tf.nn.relu(tf.nn.conv2d(x, self.w, 1, "SAME") + self.b)[:, 1:, ::2, :]
            return y[:, :, :, :3] if out_slice else tf.reduce_mean(y, axis=[1, 2])
    return M()


def _embed_module(rows: int):
    rng = np.random.default_rng(1)

    class E(tf.Module):
        def __init__(self):
            self.t = tf.Variable(rng.standard_normal((rows, 8)).astype(np.float32))

        @tf.function(input_signature=[tf.TensorSpec([1, 6], tf.int32)])
        def __call__(self, ids):
            return tf.reduce_sum(tf.gather(self.t, ids)[:, 1:-1, :], axis=1)
    return E()


def _tflite(path: Path, module, variant: str, data=None) -> Path:
    conv = tf.lite.TFLiteConverter.from_concrete_functions([module.__call__.get_concrete_function()], module)
    rng = np.random.default_rng(2)
    if variant != "f32":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
    if variant in ("u8", "i8", "i8f"):
        conv.representative_dataset = data or (lambda: ([rng.standard_normal((1, 8, 8, 4)).astype(np.float32)]
                                                        for _ in range(16)))
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        if variant in ("u8", "i8"):
            io = tf.uint8 if variant == "u8" else tf.int8
            conv.inference_input_type = conv.inference_output_type = io
    with quiet_frameworks():
        path.write_bytes(conv.convert())
    return path


def _tf2onnx_nodes(path: Path) -> int:
    import tf2onnx
    with quiet_frameworks():
        peer, _ = tf2onnx.convert.from_tflite(str(path), opset=17)
    return len(peer.graph.node)


@pytest.mark.parametrize("variant", ["u8", "i8", "i8f"])
@pytest.mark.parametrize("out_slice", [True, False], ids=["slice output", "pooled output"])
def test_quantized_tflite_is_verified_and_no_larger_than_tf2onnx(tmp_path, variant, out_slice):
    path = _tflite(tmp_path / f"m_{variant}.tflite", _conv_module(out_slice), variant)
    result = convert(str(path))
    rep = result.report
    assert rep.verdict == "verified", (rep.verdict, dict(rep.model_checks))
    assert len(result.model.graph.node) <= _tf2onnx_nodes(path)
    assert output_scales(result.model), "a quantized output is read with its step"
    check = verify_against_source(path, result.model, trials=2)
    assert check.ok, check.outputs
    assert all(v == "bitwise" or "steps" in v for v in check.outputs.values()), check.outputs


def _planted(model: onnx.ModelProto, how: str) -> onnx.ModelProto:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    producer = {o: n for n in g.node for o in n.output}
    if how == "dropped bias":
        conv = next(n for n in g.node if n.op_type == "Conv")
        del conv.input[2]
        return m
    out = g.output[0].name
    last = producer[out]
    while last.op_type not in ("QuantizeLinear", "DequantizeLinear"):
        last = producer[last.input[0]]
    if how == "wrong output scale":
        t = inits[last.input[1]]
        t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t) * np.float32(1.25), t.name))
        return m
    if how == "input zero point off by 10":
        dq = next(n for n in g.node if n.op_type == "DequantizeLinear" and n.input[0] == g.input[0].name
                  or n.op_type == "QuantizeLinear" and n.input[0] == g.input[0].name)
        t = inits[dq.input[2]]
        arr = numpy_helper.to_array(t)
        t.CopyFrom(numpy_helper.from_array((arr.astype(np.int32) + 10).astype(arr.dtype), t.name))
        # the same zero point may be shared with other nodes: give this node its own copy
        return m
    if how == "one-step shift":
        q = last
        t = numpy_helper.to_array(inits[q.input[2]])
        name = q.input[2] + "_planted"
        g.initializer.append(numpy_helper.from_array((t.astype(np.int32) + 1).astype(t.dtype), name))
        q.input[2] = name
        return m
    raise ValueError(how)


@pytest.mark.parametrize("how", ["dropped bias", "wrong output scale", "input zero point off by 10", "one-step shift"])
def test_planted_errors_beyond_the_rule_fail(tmp_path, how):
    path = _tflite(tmp_path / "m_u8.tflite", _conv_module(True), "u8")
    good = convert(str(path)).model
    bad = _planted(good, how)
    check = verify_against_source(path, bad, trials=2)
    assert not check.ok, (how, check.outputs)
    if how == "one-step shift":
        assert any("systematic shift" in v for v in check.outputs.values()), check.outputs


def test_embedding_ids_are_drawn_inside_the_table_and_input_range_is_taken(tmp_path, capfd):
    path = _tflite(tmp_path / "embed.tflite", _embed_module(20), "f32")
    rep = convert(str(path)).report
    assert rep.verdict == "verified", dict(rep.model_checks)  # ids in [0, 19]: LiteRT's GATHER accepts them
    out = str(tmp_path / "o.onnx")
    assert cli_main(["convert", str(path), "-o", out, "--input-range", "serving_default_ids:0:0,3"]) == 0
    capfd.readouterr()
    # a range outside the table: LiteRT's GATHER rejects it, so the range was used
    cli_main(["convert", str(path), "-o", str(tmp_path / "o2.onnx"), "--input-range", "serving_default_ids:100,200"])
    assert "gather index out of bounds" in capfd.readouterr().out
    assert cli_main(["convert", str(path), "-o", str(tmp_path / "o3.onnx"), "--input-range", "nope:0,3"]) == 2
    err = capfd.readouterr().err
    assert "--input-range nope" in err and len(err.strip().splitlines()) == 1


def test_a_tf2onnx_node_failure_is_named_as_tf2onnx_s(tmp_path, capfd, monkeypatch):
    """tf2onnx's Python API logs a converter's failure and goes on: the conversion stops there,
    names tf2onnx and the node, exits 1 and writes nothing (never blamed on our cleanup)."""
    import tf2onnx.tflite_handlers  # noqa: F401 - registers the TFLite converters
    from tf2onnx.handler import tf_op
    path = _tflite(tmp_path / "m_u8.tflite", _conv_module(True), "u8")

    def broken(*args, **kwargs):
        raise ValueError("planted converter failure")
    for table in tf_op.get_opsets()[""]:
        if "Conv2D" in table:
            monkeypatch.setitem(table, "Conv2D", (broken, {}))
    out = tmp_path / "o.onnx"
    for extra in ([], ["--no-cleanup"]):
        assert cli_main(["convert", str(path), "-o", str(out), *extra]) == 1
        err = capfd.readouterr().err.strip()
        assert "tf2onnx failed to convert node" in err and "planted converter failure" in err, err
        assert "cleanup" not in err.split("(tf2onnx's failure")[0] and len(err.splitlines()) == 1, err
        assert not out.exists()


def _stack_module(seed: int = 0):
    """Four 3x3 convolutions without activations, a slice at the end: deep enough that LiteRT's
    two kernel sets and onnxruntime's fused and unfused kernels round a requantization otherwise."""
    rng = np.random.default_rng(seed)

    class S(tf.Module):
        def __init__(self):
            self.ws = [tf.Variable(rng.standard_normal((3, 3, a, b)).astype(np.float32) * 0.25)
                       for a, b in ((4, 16), (16, 16), (16, 16), (16, 16))]

        @tf.function(input_signature=[tf.TensorSpec([1, 16, 16, 4], tf.float32)])
        def __call__(self, x):
            for w in self.ws:
                x = tf.nn.conv2d(x, w, 1, "SAME")
            return x[:, 1:, ::2, :]
    data = [rng.standard_normal((1, 16, 16, 4)).astype(np.float32) for _ in range(16)]
    return S(), lambda: ([d] for d in data)


@pytest.mark.parametrize("variant", ["u8", "i8f"])
def test_kernel_rounding_is_measured_in_steps_not_refused(tmp_path, variant):
    """Where integer kernels round otherwise (LiteRT's builtin vs XNNPACK, onnxruntime's fused vs
    unfused), the conversion is verified with the steps measured in its statuses; the same
    outputs compared bitwise (integers) or at a float rtol would not say what was measured."""
    module, data = _stack_module()
    path = _tflite(tmp_path / f"stack_{variant}.tflite", module, variant, data)
    rep = convert(str(path)).report
    assert rep.verdict == "verified", dict(rep.model_checks)
    framework = rep.model_checks["framework"]
    assert "bitwise" in framework or "steps" in framework, framework
    shipped = rep.model_checks["shipped"]
    assert shipped == "passed" or "steps" in shipped, shipped


class _Rounding:
    """An onnxruntime session whose first uint8 output has 3 steps added to a few values: a fused
    integer kernel that rounds otherwise than the checked run (beyond the floor of one step)."""

    def __init__(self, session, shift_all: bool = False):
        self.session, self.shift_all = session, shift_all

    def __getattr__(self, name):
        return getattr(self.session, name)

    def run(self, names, feeds, *args):
        outs = self.session.run(names, feeds, *args)
        y = np.array(outs[0], copy=True)
        if y.dtype == np.uint8:
            flat = y.reshape(-1)
            pick = slice(None) if self.shift_all else slice(0, None, 7)
            flat[pick] = np.minimum(flat[pick].astype(np.int32) + 3, 255).astype(np.uint8)
        return [y, *outs[1:]]


@pytest.mark.parametrize("shift_all", [False, True], ids=["a few values", "every value"])
def test_as_shipped_rounding_is_judged_against_the_framework(tmp_path, monkeypatch, shift_all):
    """The as-shipped session disagrees with the checked run on a quantized arithmetic output
    beyond the allowance: the conversion is judged by that session against LiteRT itself on the
    framework check's inputs -- verified when that agrees (here the real default session does),
    never when the shipped bytes are wrong against the framework too."""
    from onnx_slice_tools.verification import runtimes, shipped
    real = runtimes.onnxruntime_session

    def patched(model, config=runtimes.FAST):
        s = real(model, config)
        return _Rounding(s, shift_all) if config == runtimes.SHIPPED else s
    monkeypatch.setattr(shipped, "onnxruntime_session", patched)
    path = _tflite(tmp_path / "m_u8.tflite", _conv_module(True), "u8")
    rep = convert(str(path)).report
    assert rep.shipped_problems, "the planted rounding was not seen by the as-shipped run"
    assert rep.verdict == "verified", dict(rep.model_checks)
    assert "agrees with the TFLite interpreter under the quantized rule" in rep.model_checks["shipped"]
    # the same planted rounding in the framework check's default session too: the model as shipped
    # differs from LiteRT, so the failure stands
    from onnx_slice_tools.verification import runtimes as rt
    monkeypatch.setattr(rt, "onnxruntime_session", patched)
    rep = convert(str(path)).report
    assert rep.verdict == "failed", dict(rep.model_checks)


def test_litert_runs_is_asked_not_assumed(tmp_path):
    """What a refusal says about LiteRT comes from running it: None when it runs, its error line
    when it does not."""
    from onnx_slice_tools.frontends.tfexport import litert_runs
    path = _tflite(tmp_path / "m_i8.tflite", _conv_module(True), "i8")
    assert litert_runs(path.read_bytes()) is None
    data = bytearray(path.read_bytes())
    data[len(data) // 2:] = bytes(len(data) - len(data) // 2)  # weights and subgraph zeroed
    why = litert_runs(bytes(data))
    assert why and "\n" not in why


def _hybrid_module():
    """Four 3x3 convolutions with biases, no activations, a slice at the end, for a dynamic-range
    ("hybrid") .tflite: int8 weights, float I/O; LiteRT's hybrid kernels quantize the activations
    on the fly, so its float kernels on the same (dequantized) weights differ from them by more
    than the default float rtol after four layers."""
    rng = np.random.default_rng(0)

    class H(tf.Module):
        def __init__(self):
            self.ws = [tf.Variable(rng.standard_normal((3, 3, a, b)).astype(np.float32) * 0.25)
                       for a, b in ((4, 16), (16, 16), (16, 16), (16, 16))]
            self.bs = [tf.Variable(rng.standard_normal(16).astype(np.float32) * 0.5) for _ in range(4)]

        @tf.function(input_signature=[tf.TensorSpec([1, 16, 16, 4], tf.float32)])
        def __call__(self, x):
            for w, b in zip(self.ws, self.bs):
                x = tf.nn.conv2d(x, w, 1, "SAME") + b
            return x[:, 1:, ::2, :]
    return H()


def _planted_float(model: onnx.ModelProto, how: str) -> onnx.ModelProto:
    """A hybrid model's conversion with a planted error: the first Conv's bias dropped (carried
    through three layers), or the last Conv's weights scaled 1.25x (a Mul on its weight input)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    convs = [n for n in g.node if n.op_type == "Conv"]
    conv = convs[0] if how == "dropped bias" else convs[-1]
    if how == "dropped bias":
        assert len(conv.input) == 3, "the bias is the Conv's third input"
        del conv.input[2]
        return m
    g.initializer.append(numpy_helper.from_array(np.array(1.25, np.float32), "planted_k"))
    g.node.append(onnx.helper.make_node("Mul", [conv.input[1], "planted_k"], ["planted_w"]))
    conv.input[1] = "planted_w"
    onnx_sorted = onnx.ModelProto()
    onnx_sorted.CopyFrom(m)
    order = {n.output[0]: n for n in g.node}
    del onnx_sorted.graph.node[:]
    done: set = set()

    def visit(n):  # topological order: the planted Mul before its Conv
        if id(n) in done:
            return
        for i in n.input:
            if i in order:
                visit(order[i])
        done.add(id(n))
        onnx_sorted.graph.node.append(n)
    for n in g.node:
        visit(n)
    return onnx_sorted


def test_hybrid_float_output_is_calibrated_on_litert_s_own_kernels(tmp_path):
    """A dynamic-range .tflite: its float output is accepted within k x LiteRT's own disagreement
    (its hybrid kernels against its float kernels on the dequantized weights), in the framework
    check and the as-shipped run; the figure is measured, not assumed."""
    from onnx_slice_tools.verification.quantized import RELATIVE
    from onnx_slice_tools.verification.tolerance import CALIBRATION_K, default_rtol
    path = _tflite(tmp_path / "hybrid_dyn.tflite", _hybrid_module(), "dyn")
    result = convert(str(path))
    rep = result.report
    assert rep.verdict == "verified", dict(rep.model_checks)
    check = verify_against_source(path, result.model, trials=2)
    assert check.ok, check.outputs
    (name, entry), = check.calibration.items()
    assert entry[0] == RELATIVE
    assert entry[1] > default_rtol(np.float32), "the model is meant to exercise hybrid rounding beyond 1e-2"
    assert f"(allowed {CALIBRATION_K * entry[1]:.3g})" in check.outputs[name], check.outputs
    assert "LiteRT's own" in check.outputs[name], check.outputs
    assert rep.model_checks["shipped"].startswith("passed"), rep.model_checks["shipped"]


@pytest.mark.parametrize("how", ["dropped bias", "weights scaled 1.25x"])
def test_hybrid_planted_errors_still_fail(tmp_path, how):
    path = _tflite(tmp_path / "hybrid_dyn.tflite", _hybrid_module(), "dyn")
    good = convert(str(path)).model
    bad = _planted_float(good, how)
    check = verify_against_source(path, bad, trials=2)
    assert not check.ok, (how, check.outputs, check.calibration)


def test_float_tflite_is_not_calibrated_looser(tmp_path):
    """A float .tflite (no hybrid op): no float twin, the default float rule."""
    from onnx_slice_tools.verification.runtimes import tflite_float_twin
    path = _tflite(tmp_path / "hybrid_f32.tflite", _hybrid_module(), "f32")
    assert tflite_float_twin(path.read_bytes()) is None
    path8 = _tflite(tmp_path / "hybrid_i8f.tflite", _hybrid_module(), "i8f",
                    lambda: ([np.random.default_rng(k).standard_normal((1, 16, 16, 4)).astype(np.float32)]
                             for k in range(8)))
    assert tflite_float_twin(path8.read_bytes()) is None   # full integer: no hybrid op
    check = verify_against_source(path, convert(str(path)).model, trials=2)
    assert check.ok and not check.calibration, (check.outputs, check.calibration)
