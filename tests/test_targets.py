"""Targets (--target portable / openvino): exact on every runtime, none of the forbidden constructs.

Differential: random specs of both flavours on static, symbolic and unknown-rank inputs, with
constant and runtime begin/end/strides, lowered for a target and checked on each runtime
(onnxruntime, OpenVINO, onnx's reference) against the flavour's reference -- shape, dtype and
bytes -- and, on a subset, against TensorFlow / OpenVINO themselves.  The check models are
audited with targets.find_violations, the same checker ``inspect --target`` uses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from onnx_slice_tools import convert
from onnx_slice_tools.errors import StridedSliceError
from onnx_slice_tools.lower import lower
from onnx_slice_tools.oracles import Outcome, compare, random_case, random_lowering_input, run_oracle
from onnx_slice_tools.plan import make_plan
from onnx_slice_tools.runtimes import RUNTIMES, make_session
from onnx_slice_tools.spec import from_index_expr
from onnx_slice_tools.targets import (CONSTRAINTS, NEGATIVE_GATHER, NEGATIVE_STEP, RAW_UNKNOWN_BOUNDS, SCALAR_GATHER,
                                      SENTINEL, TARGETS, find_violations, get_target)
from onnx_slice_tools.verify import CheckCase, _build_model, check_on_runtimes, random_input

from test_differential import HypothesisSource

ROOT = Path(__file__).resolve().parents[1]
MODELS = sorted((ROOT / "models").glob("*.onnx"))


def _case(data, target):
    """A random check case (or None when the framework rejects the spec)."""
    src = HypothesisSource(data)
    drawn = random_lowering_input(src, src.choice(["tf", "openvino"]), runtime_chance=0.25, max_rank=5)
    if drawn is None:
        return None
    _, plan, fields = drawn
    # Known OpenVINO limitation (docs/design.md): a zero dim known at conversion time (declared,
    # or an axis the spec empties) next to dims that depend on runtime indices (~3 in 1,000).
    assume(not (fields and (0 in (plan.input_shape or ()) or any(a.size == 0 for a in plan.axes))))
    dtype = src.choice(["int32", "int64"])
    types = {f: dtype for f in fields}
    return CheckCase(lower(plan, 17, types, target=target), np.dtype(np.float32), 1, index_types=types)


def _assert_exact_everywhere(case, target):
    proto = _build_model([case], 17)
    assert find_violations(proto, target) == []
    check_on_runtimes([case], 17, RUNTIMES)
    r = case.result
    spec = case.lowering.plan.spec
    assert r.shape_inference == "passed", (spec, case.lowering.plan.input_shape, r.shape_inference)
    for name, status in {"onnxruntime": r.onnxruntime, **r.runtimes}.items():
        assert status == "passed" or status.startswith("skipped"), (spec, case.lowering.plan.input_shape, name, status)


@pytest.mark.parametrize("target", ["portable", "openvino"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_target_lowering_is_exact_on_every_runtime(target, data):
    case = _case(data, target)
    if case is not None:
        _assert_exact_everywhere(case, target)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_portable_output_equals_the_frameworks_themselves(data):
    """Static specs: the portable lowering run in each runtime equals TensorFlow / OpenVINO's
    own StridedSlice (not only our reference)."""
    src = HypothesisSource(data)
    x, spec = random_case(src, src.choice(["tf", "openvino"]), max_rank=4)
    oracle = run_oracle(x, spec)
    if not oracle.ok:
        return
    shape = x.shape if src.chance(0.5) else tuple(f"d{i}" for i in range(x.ndim))
    try:
        plan = make_plan(spec, shape)
    except StridedSliceError:
        return
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    proto = _build_model([CheckCase(lower(plan, 17, target="portable"), x.dtype, elem)], 17)
    assert find_violations(proto, "portable") == []
    for name in RUNTIMES:
        got = make_session(name, proto.SerializeToString()).run(["y0"], {"x0": x})[0]
        problem = compare(Outcome(True, np.asarray(got), np.asarray(got).shape), oracle)
        assert problem is None, (name, spec, x.shape, problem)


@pytest.mark.parametrize("expr, shape", [
    ("x[::-1]", (5, 3)), ("x[::-1]", ("N", 3)), ("x[..., ::-2, 1]", None), ("x[-1]", ("N",)),
    ("x[-3:-1, None, ::-1]", ("N", 4, "C")), ("x[1::-3, ..., 0, None]", (3, 2, 3)),
])
def test_default_lowering_breaks_portable_and_portable_does_not(expr, shape):
    """The checker can fail: the minimal lowering of these specs uses a negative step or a
    sentinel bound; the portable one uses neither and is exact everywhere."""
    plan = make_plan(from_index_expr(expr), shape)
    default = _build_model([CheckCase(lower(plan, 17), np.dtype(np.float32), 1)], 17)
    broken = {v.constraint for v in find_violations(default, "portable")}
    assert broken & {NEGATIVE_STEP, SENTINEL}, expr
    case = CheckCase(lower(plan, 17, target="portable"), np.dtype(np.float32), 1)
    _assert_exact_everywhere(case, "portable")


def test_runtime_shrink_default_uses_scalar_gather_portable_does_not():
    spec = replace(from_index_expr("x[:, i]"), begin=None, runtime_length=2)
    plan = make_plan(spec, ("N", "M"))
    default = _build_model([CheckCase(lower(plan, 17, {"begin": "int64"}), np.dtype(np.float32), 1,
                                      index_types={"begin": "int64"})], 17)
    assert SCALAR_GATHER in {v.constraint for v in find_violations(default, "portable")}
    case = CheckCase(lower(plan, 17, {"begin": "int64"}, target="portable"), np.dtype(np.float32), 1,
                     index_types={"begin": "int64"})
    _assert_exact_everywhere(case, "portable")
    assert case.result.tried_values  # runtime index values were drawn and compared


def test_targets_are_documented_data():
    for t in TARGETS.values():
        assert set(t.forbidden) <= set(CONSTRAINTS)
        assert set(t.verify_on) <= set(RUNTIMES)
    assert get_target(None).name == "onnxruntime" and get_target(None).minimal
    assert get_target("portable").verify_on == RUNTIMES
    design = (ROOT / "docs" / "design.md").read_text()
    for name in CONSTRAINTS:
        assert name in design, f"docs/design.md does not document constraint {name}"


@pytest.mark.parametrize("path", MODELS, ids=[p.name for p in MODELS])
def test_sample_models_default_output_unchanged_and_targets_verified(path):
    default = convert(path)
    explicit = convert(path, target="onnxruntime")
    assert default.ok and explicit.ok
    assert default.model.SerializeToString() == explicit.model.SerializeToString()
    for target in ("portable", "openvino"):
        result = convert(path, target=target)
        assert result.ok, (target, [r.check for r in result.report.failed_records], result.report.model_checks)
        assert find_violations(result.model, target) == []
        checked = {k for r in result.report.records if r.check is not None for k in r.check.runtimes}
        assert checked == set(get_target(target).verify_on) - {"onnxruntime"}


def _foreign_model():
    """Another converter's habits: a reverse Slice with a sentinel end, a 0-d negative Gather."""
    nodes = [helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["y0"], name="rev"),
             helper.make_node("Gather", ["y0", "i"], ["y"], name="last", axis=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])], [
        helper.make_tensor("s", TensorProto.INT64, [1], [-1]),
        helper.make_tensor("e", TensorProto.INT64, [1], [-(2 ** 63)]),
        helper.make_tensor("a", TensorProto.INT64, [1], [0]),
        helper.make_tensor("st", TensorProto.INT64, [1], [-1]),
        helper.make_tensor("i", TensorProto.INT64, [], [-1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_fix_slices_rewrites_foreign_nodes_exactly():
    model = _foreign_model()
    found = {(v.node, v.constraint) for v in find_violations(model, "portable")}
    assert found == {("rev", NEGATIVE_STEP), ("rev", SENTINEL), ("rev", RAW_UNKNOWN_BOUNDS), ("last", SCALAR_GATHER),
                     ("last", NEGATIVE_GATHER)}
    result = convert(model, target="portable", fix_slices=True)
    assert result.ok, result.report.to_json()
    assert find_violations(result.model, "portable") == []
    x = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32)
    want = x[::-1, -1]
    for name in RUNTIMES:
        got = make_session(name, result.model.SerializeToString()).run(None, {"x": x})[0]
        assert got.shape == want.shape and got.tobytes() == want.tobytes(), name


def _cli(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "onnx_slice_tools", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=cwd)


def test_cli_inspect_target_and_fix_slices(tmp_path):
    src = tmp_path / "foreign.onnx"
    onnx.save(_foreign_model(), str(src))
    out = _cli("inspect", "--target", "portable", src, "--json")
    assert out.returncode == 0 and out.stderr == ""
    rows = json.loads(out.stdout)
    assert {r["constraint"] for r in rows} == {NEGATIVE_STEP, SENTINEL, RAW_UNKNOWN_BOUNDS, SCALAR_GATHER,
                                               NEGATIVE_GATHER}
    assert all(r["why"] for r in rows)
    dst = tmp_path / "fixed.onnx"
    out = _cli("convert", src, "-o", dst, "--target", "portable", "--fix-slices")
    assert out.returncode == 0, out.stderr
    assert "onnxruntime, openvino, reference" in out.stdout
    assert json.loads(_cli("inspect", "--target", "portable", dst, "--json").stdout) == []


def test_cli_verify_on_errors_are_one_line(tmp_path):
    model = MODELS[0]
    out = _cli("convert", model, "-o", tmp_path / "o.onnx", "--verify-on", "onnxruntime,tensorrt")
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "tensorrt" in out.stderr
    # OpenVINO missing: a one-line error naming the extra, nothing written
    fake = tmp_path / "fake"
    (fake / "openvino").mkdir(parents=True)
    (fake / "openvino" / "__init__.py").write_text("raise ImportError('no openvino here')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake), str(ROOT)])}
    out = _cli("convert", model, "-o", tmp_path / "p.onnx", "--verify-on", "openvino", env=env)
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "openvino extra" in out.stderr
    assert not (tmp_path / "p.onnx").exists()
