"""Run-time vectors of unknown length against the real runtimes (issue 20, item 6).

TensorFlow and OpenVINO's CPU plugin raise when begin, end and strides differ in length --
the vectors a plan never reads (a single index's end, strides of masked entries) included;
LiteRT checks begin against end and reads the first entries of strides.  Random specs with one
vector a graph input of unknown length are converted, run in onnxruntime with its default
session options at the right length and one entry more or less, and compared with the
framework: it raises exactly when the framework raises, else the same bytes.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from onnx_slice_tools.api import convert
from onnx_slice_tools.lowering import dynamic
from onnx_slice_tools.rewrite.core import TF_DOMAIN
from onnx_slice_tools.semantics.spec import from_openvino
from onnx_slice_tools.verification.oracles import openvino_strided_slice

OV_DOMAIN = "org.openvinotoolkit"
MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")
FIELDS = ("begin", "end", "strides")


def _model(flavor: str, shape, consts: dict, runtime: str, masks: dict):
    n = len(next(iter(consts.values())))
    names = []
    inits = []
    for f in FIELDS:
        if f == runtime:
            names.append(f)
        else:
            inits.append(helper.make_tensor(f, TensorProto.INT64, [n], consts[f]))
            names.append(f)
    attrs = ({m: [(masks.get(m, 0) >> k) & 1 for k in range(n)] for m in MASKS} if flavor == "openvino"
             else {m: masks.get(m, 0) for m in MASKS})
    if flavor == "tflite":
        attrs["offset"] = 0
    domain = OV_DOMAIN if flavor == "openvino" else TF_DOMAIN
    node = helper.make_node("StridedSlice", ["x", *names], ["y"], name="ss", domain=domain, **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape)),
                                            helper.make_tensor_value_info(runtime, TensorProto.INT64, ["L"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(domain, 1)])
    model.ir_version = 8
    return model


def _default_session(model_bytes: bytes):
    so = ort.SessionOptions()
    so.log_severity_level = 4
    assert so.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])


def _tensorflow(x, vectors: dict, masks: dict):
    import tensorflow as tf
    try:
        return tf.raw_ops.StridedSlice(input=x, **{f: np.asarray(v, np.int64) for f, v in vectors.items()},
                                       **{m: masks.get(m, 0) for m in MASKS}).numpy()
    except (tf.errors.InvalidArgumentError, ValueError):
        return None


def _openvino_cpu(x, vectors: dict, masks: dict, runtime: str):
    """OpenVINO's CPU plugin (a default compile, ``runtime`` a parameter of dynamic length):
    its output, or None when it raises."""
    import openvino as ov
    import openvino.opset1 as ops
    n = len(vectors[next(f for f in FIELDS if f != runtime)])
    params = [ops.parameter(list(x.shape), np.float32, name="x")]
    ins = {}
    for f in FIELDS:
        if f == runtime:
            ins[f] = ops.parameter(ov.PartialShape([-1]), np.int64, name=f)
            params.append(ins[f])
        else:
            ins[f] = ops.constant(np.asarray(vectors[f], np.int64))
    node = ops.strided_slice(params[0], ins["begin"], ins["end"], ins["strides"],
                             **{m: [(masks.get(m, 0) >> k) & 1 for k in range(n)] for m in MASKS})
    compiled = ov.Core().compile_model(ov.Model([node], params), "CPU")
    try:
        return np.asarray(list(compiled({"x": x, runtime: np.asarray(vectors[runtime], np.int64)}).values())[0])
    except RuntimeError:
        return None


def _openvino(x, vectors: dict, masks: dict):
    """OpenVINO's values: its reference evaluator (oracles.openvino_strided_slice; the CPU plugin
    takes 0 for a shrink index with a begin_mask bit, docs/semantics.md)."""
    n = len(vectors["begin"])
    spec = from_openvino(vectors["begin"], vectors["end"], vectors["strides"],
                         **{m: [(masks.get(m, 0) >> k) & 1 for k in range(n)] for m in MASKS})
    outcome = openvino_strided_slice(x, spec)
    return outcome.values if outcome.ok else None


@pytest.mark.parametrize("runtime, masks", [("begin", {"end_mask": 1}), ("end", {"shrink_axis_mask": 3}),
                                            ("strides", {"shrink_axis_mask": 3})])
def test_openvino_cpu_rejects_every_wrong_length(runtime, masks):
    """What the differential test below takes as OpenVINO's answer for another length: its CPU
    plugin raises, for a vector no axis reads too (end of single indices, their strides)."""
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    ok = {"begin": [1, 2], "end": [3, 4], "strides": [1, 1]}
    assert _openvino_cpu(x, ok, masks, runtime) is not None
    for wrong in (ok[runtime][:1], ok[runtime] + [1]):
        assert _openvino_cpu(x, {**ok, runtime: wrong}, masks, runtime) is None, (runtime, wrong)


seen = {"ran": 0, "rejected": 0}


@pytest.mark.parametrize("flavor", ["tf", "openvino"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_wrong_lengths_fail_where_the_framework_fails(flavor, data):
    draw = data.draw
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 4)) for _ in range(rank))
    masks = {m: draw(st.integers(0, 2 ** rank - 1)) for m in ("begin_mask", "end_mask", "shrink_axis_mask")}
    consts = {"begin": [], "end": [], "strides": []}
    for k, d in enumerate(shape):
        shrink = (masks["shrink_axis_mask"] >> k) & 1
        consts["begin"].append(draw(st.integers(-d, d - 1)))
        consts["end"].append(draw(st.integers(-d, d)))
        consts["strides"].append(draw(st.sampled_from([1, 2] if shrink else [1, 2, -1])))
    runtime = draw(st.sampled_from(FIELDS))
    target = draw(st.sampled_from(["onnxruntime", "portable", "openvino"]))
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    model = _model(flavor, shape, {f: v for f, v in consts.items() if f != runtime}, runtime, masks)
    result = convert(model, target=target, verify=False)
    assert result.model is not None, result.report.to_json()
    session = _default_session(result.model.SerializeToString())
    for length in (rank - 1, rank, rank + 1):
        vec = (consts[runtime] + [1])[:length]
        vectors = {**consts, runtime: vec}
        if flavor == "tf":
            want = _tensorflow(x, vectors, masks)
            if length != rank:
                assert want is None, (vectors, masks)  # TensorFlow checks every length
        else:  # another length: rejected (test_openvino_cpu_rejects_every_wrong_length)
            want = _openvino(x, vectors, masks) if length == rank else None
        try:
            got = session.run(["y"], {"x": x, runtime: np.asarray(vec, np.int64)})[0]
        except Exception:
            got = None
        assert (got is None) == (want is None), (flavor, target, shape, vectors, masks, runtime)
        if got is not None:
            assert got.shape == want.shape and got.tobytes() == want.tobytes(), (flavor, target, vectors, masks)
            seen["ran"] += 1
        else:
            seen["rejected"] += 1


def test_the_differential_test_saw_both_outcomes():
    """(runs after the test above in file order) both outcomes were compared."""
    if not any(seen.values()):
        pytest.skip("run with the differential test")
    assert seen["ran"] >= 10 and seen["rejected"] >= 20, seen


def test_a_lowering_without_the_length_check_fails_the_conversion(monkeypatch):
    """The per-rewrite check draws the wrong lengths: with the lowering's length check removed,
    the converted graph runs on a begin of another length and the conversion fails there."""
    model = _model("tf", (4, 5), {"end": [0, 3], "strides": [1, 1]}, "begin", {"end_mask": 1, "shrink_axis_mask": 2})
    ok = convert(model)
    assert ok.ok and ok.report.check_of(0).must_fail_checked >= 2, ok.report.check_of(0)
    start = dynamic._start
    monkeypatch.setattr(dynamic, "_start", lambda *a, **k: _without_lengths(start(*a, **k)))
    bad = convert(model)
    assert not bad.ok
    assert "of length 3, the others 2" in bad.report.check_of(0).onnxruntime, bad.report.check_of(0)


def _without_lengths(started):
    b, runtime = started
    b.lengths = {}
    return b, runtime


def test_unread_end_of_another_length_fails_like_tensorflow():
    """``x[b0, b1]`` (shrinks) with end a graph input of unknown length: no lowering step reads
    end, TensorFlow still checks its length -- so does the converted graph (default session)."""
    model = _model("tf", (4, 5), {"begin": [1, 2], "strides": [1, 1]}, "end", {"shrink_axis_mask": 3})
    result = convert(model)
    assert result.report.verdict == "verified", result.report.model_checks
    session = _default_session(result.model.SerializeToString())
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    assert session.run(["y"], {"x": x, "end": np.array([0, 0], np.int64)})[0] == x[1, 2]
    for wrong in ([0], [0, 0, 0]):
        assert _tensorflow(x, {"begin": [1, 2], "end": wrong, "strides": [1, 1]}, {"shrink_axis_mask": 3}) is None
        with pytest.raises(Exception):
            session.run(["y"], {"x": x, "end": np.array(wrong, np.int64)})


def _litert_model(runtime: str, consts: dict, masks: dict) -> bytes:
    """A .tflite of one STRIDED_SLICE on x[4, 5] with ``runtime`` an int32 input of shape [None]
    (TensorFlow's converter)."""
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([4, 5], tf.float32), tf.TensorSpec([None], tf.int32)])
    def f(x, v):
        args = {k: tf.constant(c, tf.int32) for k, c in consts.items()}
        return tf.raw_ops.StridedSlice(input=x, **{**args, runtime: v}, **masks)
    return tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()], f).convert()


def _litert(content: bytes, x, vec):
    from ai_edge_litert.interpreter import Interpreter
    interp = Interpreter(model_content=content)
    details = interp.get_input_details()
    v = next(d for d in details if d["dtype"] == np.int32)
    xi = next(d for d in details if d["dtype"] == np.float32)
    try:
        interp.resize_tensor_input(v["index"], [len(vec)])
        interp.allocate_tensors()
        interp.set_tensor(xi["index"], x)
        interp.set_tensor(v["index"], np.asarray(vec, np.int32))
        interp.invoke()
    except (RuntimeError, ValueError):
        return None
    return np.array(interp.get_tensor(interp.get_output_details()[0]["index"]))


@pytest.mark.parametrize("runtime, masks", [("end", {"shrink_axis_mask": 3}), ("strides", {"end_mask": 1})])
def test_litert_checks_begin_against_end_and_reads_the_first_strides(runtime, masks):
    """LiteRT raises when begin and end differ in length (an end no axis reads too), runs on
    with strides longer than begin (their first entries; shorter ones read past the vector:
    undefined, not compared).  The TFLite-flavour conversion, in onnxruntime's default session,
    does the same."""
    consts = {"begin": [1, 2], "end": [3, 4], "strides": [1, 1]}
    fixed = {f: v for f, v in consts.items() if f != runtime}
    content = _litert_model(runtime, fixed, masks)
    result = convert(_model("tflite", (4, 5), fixed, runtime, masks))
    assert result.report.verdict == "verified", result.report.model_checks
    session = _default_session(result.model.SerializeToString())
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    lengths = (1, 2, 3) if runtime != "strides" else (2, 3)
    outcomes = []
    for length in lengths:
        vec = (consts[runtime] + [1])[:length]
        want = _litert(content, x, vec)
        try:
            got = session.run(["y"], {"x": x, runtime: np.asarray(vec, np.int64)})[0]
        except Exception:
            got = None
        assert (got is None) == (want is None), (runtime, vec)
        if got is not None:
            assert got.shape == want.shape and got.tobytes() == want.tobytes(), (runtime, vec)
        outcomes.append(want is not None)
    assert outcomes == ([False, True, False] if runtime == "end" else [True, True])
