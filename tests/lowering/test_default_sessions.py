"""Every target's lowering run as users run it: onnxruntime with its default session options.

The per-rewrite checks build their sessions without graph optimisation; onnxruntime's default
(``ORT_ENABLE_ALL``) rewrites some constructions (docs/semantics.md, "onnxruntime's optimiser").
Here random specs of the three flavours -- static, symbolic and unknown-rank inputs, constant and
runtime begin/end/strides -- are lowered for each target, the model is loaded with
``onnxruntime.InferenceSession(bytes)`` and nothing else, and each run is compared with the
flavour's reference: shape, dtype, bytes (pure data movement) and accept/reject.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from onnx_slice_tools.lowering.lower import lower
from onnx_slice_tools.lowering.targets import TARGETS
from onnx_slice_tools.semantics.plan import make_plan
from onnx_slice_tools.semantics.reference import apply_plan
from onnx_slice_tools.semantics.spec import from_index_expr
from onnx_slice_tools.verification.lowerings import CheckCase, build_model
from onnx_slice_tools.verification.oracles import random_target_case, reference_runs

from test_differential import HypothesisSource

seen = {name: [0, 0] for name in TARGETS}  # runs compared, runs the framework rejects (onnxruntime must fail)


def _default_session(model_bytes: bytes):
    """onnxruntime as a user loads a model (only its log level is lowered: failing runs are expected)."""
    so = ort.SessionOptions()
    so.log_severity_level = 4
    assert so.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("target", list(TARGETS))
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_target_is_exact_in_onnxruntime_with_default_session_options(target, data):
    src = HypothesisSource(data)
    drawn = random_target_case(src, target, runtime_chance=0.35)
    if drawn is None:
        return
    case, proto = drawn
    session = _default_session(proto.SerializeToString())
    spec = case.written_spec
    for shape, values, feed, expected in reference_runs(case, src, np.random.default_rng(0), shapes=3, draws=3):
        where = f"{target}: {spec.index_notation()} ({spec.flavor}) on {list(shape)} with {values}"
        if expected is None:
            seen[target][1] += 1
            with pytest.raises(Exception):  # any onnxruntime error is the failure we want
                got = session.run(["y0"], feed)[0]
                pytest.fail(f"{where}: the framework raises, onnxruntime returned shape {got.shape}")
            continue
        got = session.run(["y0"], feed)[0]
        seen[target][0] += 1
        assert (got.shape, got.dtype) == (expected.shape, expected.dtype), where
        assert got.tobytes() == expected.tobytes(), where


def test_the_default_session_corpus_ran():
    """The corpus above compared runs for each target (the framework's run-time errors it draws
    vary from run to run; test_targets.py pins a fixed set of them at default options too)."""
    for target, (compared, rejected) in seen.items():
        if compared + rejected:  # the property tests ran in this session
            assert compared >= 20, (target, compared, rejected)  # derandomized CI draws 29-53 per target


def _range_gather(limit: int):
    """``Gather(x, Range(s, limit, -2))`` (x of 5 floats, s a runtime scalar): the pair
    onnxruntime's GatherToSliceFusion replaces by ``Slice(x, s, limit, axes=0, step -2)``."""
    nodes = [helper.make_node("Range", ["s", "limit", "step"], ["idx"]),
             helper.make_node("Gather", ["x", "idx"], ["y"], axis=0)]
    graph = helper.make_graph(nodes, "range_gather", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5]),
                                                      helper.make_tensor_value_info("s", TensorProto.INT64, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [helper.make_tensor("limit", TensorProto.INT64, [], [limit]),
                               helper.make_tensor("step", TensorProto.INT64, [], [-2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def _run(model: bytes, level) -> list:
    so = ort.SessionOptions()
    so.graph_optimization_level = level
    session = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    feed = {"x": np.arange(5, dtype=np.float32), "s": np.array(4, dtype=np.int64)}
    return session.run(["y"], feed)[0].tolist()


def test_onnxruntime_still_rewrites_range_gather_into_a_wrong_slice():
    """Pins the upstream bug the targets' ``Abs`` works around (docs/semantics.md): x[4::-2] of
    arange(5) as Gather(x, Range(4, -1, -2)) is [4, 2, 0]; onnxruntime's optimiser at EXTENDED
    and above returns [].  When this test fails, onnxruntime changed: re-measure, and drop the
    ``Abs`` between Range and Gather in lowering/dynamic.py if the fusion is fixed."""
    levels = ort.GraphOptimizationLevel
    model = _range_gather(-1)
    assert _run(model, levels.ORT_DISABLE_ALL) == [4.0, 2.0, 0.0]
    assert _run(model, levels.ORT_ENABLE_BASIC) == [4.0, 2.0, 0.0]
    assert _run(model, levels.ORT_ENABLE_EXTENDED) == [], f"onnxruntime {ort.__version__} fixed the fusion"
    assert _run(model, levels.ORT_ENABLE_ALL) == [], f"onnxruntime {ort.__version__} fixed the fusion"
    # a limit that is not negative means the same to Range and Slice: the fusion is right there
    assert _run(_range_gather(0), levels.ORT_ENABLE_ALL) == [4.0, 2.0]


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("expr, runtime", [("x[::-2]", {}), ("x[i::-2]", {"begin": [4]}), ("x[i::-1]", {"begin": [-2]}),
                                           ("x[::k]", {"strides": [-2]})])
def test_reverses_on_an_unknown_dim_are_exact_at_every_level(target, expr, runtime):
    """Each target's lowering of reverses reaching element 0 on a dim unknown at conversion
    (the targets' Gather of a Range ending at -1): the framework's elements at every level."""
    spec = from_index_expr(expr)
    if runtime:
        spec = replace(spec, runtime_length=1, **{f: None for f in runtime})
    types = {f: "int64" for f in runtime}
    case = CheckCase(lower(make_plan(spec, ("N",)), 17, types, target=target), np.dtype(np.float32), 1,
                     index_types=types)
    model = build_model([case], 17).SerializeToString()
    x = np.arange(5, dtype=np.float32)
    feed = {"x0": x, **{f"{f[0]}0": np.array(v, dtype=np.int64) for f, v in runtime.items()}}
    expected = apply_plan(make_plan(replace(spec, runtime_length=None, **runtime) if runtime else spec, (5,)), x)
    for level in (ort.GraphOptimizationLevel.ORT_DISABLE_ALL, ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
                  ort.GraphOptimizationLevel.ORT_ENABLE_ALL):
        so = ort.SessionOptions()
        so.graph_optimization_level = level
        got = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"]).run(["y0"], feed)[0]
        assert got.tolist() == expected.tolist(), (target, expr, level)
