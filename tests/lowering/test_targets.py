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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper
from onnxruntime import InferenceSession

from onnx_slice_tools import convert
from onnx_slice_tools.errors import StridedSliceError
from onnx_slice_tools.lowering.lower import lower
from onnx_slice_tools.verification.oracles import random_case, random_lowering_input, target_against_framework
from onnx_slice_tools.semantics.plan import make_plan
from onnx_slice_tools.verification.runtimes import RUNTIMES, make_session
from onnx_slice_tools.semantics.spec import from_index_expr
from onnx_slice_tools.lowering.targets import (CONSTRAINTS, NEGATIVE_GATHER, NEGATIVE_STEP, RAW_UNKNOWN_BOUNDS, SCALAR_GATHER,
                                      SENTINEL, TARGETS, find_violations, get_target)
from onnx_slice_tools.verification.lowerings import OPENVINO_NO_ERRORS, CheckCase, CheckRun, build_model, check_on_runtimes

from test_differential import HypothesisSource

ROOT = Path(__file__).resolve().parents[2]
MODELS = sorted((ROOT / "models").glob("*.onnx"))


def _case(data, target):
    """A random check case (or None when the framework rejects the spec)."""
    src = HypothesisSource(data)
    drawn = random_lowering_input(src, src.choice(["tf", "openvino"]), runtime_chance=0.25, max_rank=5)
    if drawn is None:
        return None
    _, plan, fields = drawn
    dtype = src.choice(["int32", "int64"])
    types = {f: dtype for f in fields}
    return CheckCase(lower(plan, 17, types, target=target), np.dtype(np.float32), 1, index_types=types)


def _assert_exact_everywhere(case, target):
    proto = build_model([case], 17)
    assert find_violations(proto, target) == []
    check_on_runtimes([case], CheckRun(17, RUNTIMES))
    r = case.result
    spec = case.lowering.plan.spec
    assert r.shape_inference == "passed", (spec, case.lowering.plan.input_shape, r.shape_inference)
    for name, status in {"onnxruntime": r.onnxruntime, **r.runtimes}.items():
        assert status == "passed" or status.startswith("skipped"), (spec, case.lowering.plan.input_shape, name, status)
    # runtime values the framework rejects: the run fails in onnxruntime and onnx's reference too
    # (a failure to fail is a "failed" status above); OpenVINO raises none (OPENVINO_NO_ERRORS)
    for name, status in r.run_time_errors_on.items():
        assert status == (OPENVINO_NO_ERRORS if name == "openvino" else "passed"), (spec, name, status)


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
    own StridedSlice (not only our reference), with none of the forbidden constructs."""
    src = HypothesisSource(data)
    problems = target_against_framework(src, src.choice(["tf", "openvino"]), "portable", RUNTIMES)
    if problems is not None:
        assert not any(problems.values()), problems


@pytest.mark.parametrize("expr, shape", [
    ("x[::-1]", (5, 3)), ("x[::-1]", ("N", 3)), ("x[..., ::-2, 1]", None), ("x[-1]", ("N",)),
    ("x[-3:-1, None, ::-1]", ("N", 4, "C")), ("x[1::-3, ..., 0, None]", (3, 2, 3)),
])
def test_default_lowering_breaks_portable_and_portable_does_not(expr, shape):
    """The checker can fail: the minimal lowering of these specs uses a negative step or a
    sentinel bound; the portable one uses neither and is exact everywhere."""
    plan = make_plan(from_index_expr(expr), shape)
    default = build_model([CheckCase(lower(plan, 17), np.dtype(np.float32), 1)], 17)
    broken = {v.constraint for v in find_violations(default, "portable")}
    assert broken & {NEGATIVE_STEP, SENTINEL}, expr
    case = CheckCase(lower(plan, 17, target="portable"), np.dtype(np.float32), 1)
    _assert_exact_everywhere(case, "portable")


def test_runtime_shrink_default_uses_scalar_gather_portable_does_not():
    spec = replace(from_index_expr("x[:, i]"), begin=None, runtime_length=2)
    plan = make_plan(spec, ("N", "M"))
    default = build_model([CheckCase(lower(plan, 17, {"begin": "int64"}), np.dtype(np.float32), 1,
                                      index_types={"begin": "int64"})], 17)
    assert SCALAR_GATHER in {v.constraint for v in find_violations(default, "portable")}
    case = CheckCase(lower(plan, 17, {"begin": "int64"}, target="portable"), np.dtype(np.float32), 1,
                     index_types={"begin": "int64"})
    _assert_exact_everywhere(case, "portable")
    assert case.result.tried_values  # runtime index values were drawn and compared


def _runtime_strides_case(src):
    """A random spec with runtime strides (begin/end sometimes too), or None when the framework
    rejects the spec."""
    x, spec = random_case(src, src.choice(["tf", "openvino"]), max_rank=4)
    if not spec.n:
        return None
    fields = ["strides"] + [f for f in ("begin", "end") if src.chance(0.3)]
    shape = src.choice([x.shape, tuple(f"d{i}" for i in range(x.ndim)), None])
    try:
        make_plan(spec, x.shape)
        plan = make_plan(replace(spec, runtime_length=spec.n, **{f: None for f in fields}), shape)
    except StridedSliceError:
        return None
    dtype = src.choice(["int32", "int64"])
    return CheckCase(lower(plan, 17, {f: dtype for f in fields}, target="portable"), np.dtype(np.float32), 1,
                     index_types={f: dtype for f in fields})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_portable_holds_no_sentinel_with_runtime_strides(data):
    """No INT32/INT64 MIN/MAX anywhere the audit looks (Slice bounds, Where values), also for
    runtime strides and for sentinels or values beyond int32 written in the spec itself."""
    case = _runtime_strides_case(HypothesisSource(data))
    if case is not None:
        found = find_violations(build_model([case], 17), "portable")
        assert found == [], (case.lowering.plan.spec, [(v.op_type, v.detail) for v in found])


@pytest.mark.parametrize("expr, flavor, shape, fields", [
    ("x[1:, 2]", "tf", ("N", "M"), ("strides",)),                   # TF: a shrink's stride must be > 0
    ("x[1:, 2]", "tf", ("N", 4), ("begin", "strides")),
    ("x[-1, 1099511627776:]", "tf", (3, "M"), ("strides",)),       # beyond int32: "to the end"
    ("x[-9223372036854775808::-1]", "tf", ("N",), ("strides",)),   # INT64_MIN written in the spec
    ("x[:-2147483648:-1, 2147483647::-2]", "openvino", ("N", "M"), ("strides",)),
    ("x[-2147483649:9223372036854775807]", "openvino", ("N",), ("begin", "strides")),
])
def test_portable_keeps_no_sentinel_and_stays_exact(expr, flavor, shape, fields):
    base = from_index_expr(expr, flavor=flavor)
    spec = replace(base, runtime_length=base.n, **{f: None for f in fields})
    for dtype in ("int32", "int64"):
        types = {f: dtype for f in fields}
        case = CheckCase(lower(make_plan(spec, shape), 17, types, target="portable"), np.dtype(np.float32), 1,
                         index_types=types)
        _assert_exact_everywhere(case, "portable")  # the audit (no sentinel), every runtime, must-fail runs
        assert case.result.tried_values


def test_the_audit_sees_a_sentinel_chosen_by_a_where():
    """The default target's guard of TF's runtime shrink strides picks INT64_MAX in a Where (and
    its masked ends INT64_MIN/MAX): the portable audit names them."""
    spec = replace(from_index_expr("x[1:, 2]"), strides=None, runtime_length=2)
    proto = build_model([CheckCase(lower(make_plan(spec, ("N", "M")), 17, {"strides": "int64"}),
                                    np.dtype(np.float32), 1, index_types={"strides": "int64"})], 17)
    found = [v for v in find_violations(proto, "portable") if v.constraint == SENTINEL]
    assert found and {v.op_type for v in found} == {"Where"}
    assert any(str(2 ** 63 - 1) in v.detail for v in found), [v.detail for v in found]


# Runtime values TensorFlow / OpenVINO reject, each on an input where a Slice of it would be
# empty anyway (a 0 dim elsewhere), so only a construction that fails by itself can keep the error.
_REJECTED = [
    ("x[:, i]", "tf", (0, 4), {"begin": [0, 4]}),              # shrink index out of range
    ("x[:, i]", "tf", (0, 4), {"begin": [0, -5]}),             # below -dim
    ("x[:, i]", "openvino", (2, 0), {"begin": [0, 0]}),        # any index of an empty axis
    ("x[1:, i]", "tf", (0, 3), {"strides": [1, -1]}),         # TF: a shrink's stride must be positive
    ("x[1:, i]", "tf", (0, 3), {"strides": [1, 0]}),
    ("x[1:, 2:]", "tf", (0, 3), {"strides": [1, 0]}),          # a range's stride of 0
    ("x[1:, 2:]", "openvino", (3, 0), {"strides": [0, 1]}),
]


@pytest.mark.parametrize("target", ["onnxruntime", "portable", "openvino"])
@pytest.mark.parametrize("expr, flavor, shape, values", _REJECTED)
def test_lowerings_fail_at_run_time_where_the_framework_does(target, expr, flavor, shape, values):
    """The framework rejects these runtime values; the lowering for each target makes
    onnxruntime and onnx's reference fail on them too (before this, the portable and openvino
    lowerings returned an empty result for most of them)."""
    base = from_index_expr(expr, flavor=flavor)
    full = replace(base, **values)
    with pytest.raises(StridedSliceError):
        make_plan(full, shape)
    fields = list(values)
    spec = replace(base, runtime_length=base.n, **{f: None for f in fields})
    types = {f: "int64" for f in fields}
    case = CheckCase(lower(make_plan(spec, ("N", "M")), 17, types, target=target), np.dtype(np.float32), 1,
                     index_types=types)
    proto = build_model([case], 17)
    assert find_violations(proto, target) == []
    feed = {"x0": np.zeros(shape, np.float32), **{f"{f[0]}0": np.array(v, np.int64) for f, v in values.items()}}
    # (the minimal lowering's 0-d Gather reads no index of an empty tensor in onnx's reference)
    sessions = {name: make_session(name, proto.SerializeToString())
                for name in ("onnxruntime",) + (("reference",) if target != "onnxruntime" else ())}
    # and onnxruntime as users load it (default options: its optimiser keeps the error)
    sessions["onnxruntime, default options"] = InferenceSession(proto.SerializeToString(),
                                                                providers=["CPUExecutionProvider"])
    for name, session in sessions.items():
        with pytest.raises(Exception):
            got = session.run(["y0"], feed)
            pytest.fail(f"{name} returned {np.asarray(got[0]).shape} for {expr} with {values}")


def test_openvino_raises_no_run_time_error():
    """Why the must-fail runs are skipped on OpenVINO (verify.OPENVINO_NO_ERRORS): its CPU plugin
    returns data for a Gather index out of range (on an empty tensor too).  If this test fails,
    OpenVINO started raising and the must-fail runs can be enabled there."""
    nodes = [helper.make_node("Gather", ["x", "i"], ["y"], axis=0)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"]),
                                           helper.make_tensor_value_info("i", TensorProto.INT64, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    session = make_session("openvino", model.SerializeToString())
    for n in (3, 0):
        got = session.run(["y"], {"x": np.zeros(n, np.float32), "i": np.array([5])})[0]
        assert got.shape == (1,)
    with pytest.raises(Exception):
        make_session("onnxruntime", model.SerializeToString()).run(["y"], {"x": np.zeros(3, np.float32),
                                                                           "i": np.array([5])})


def test_run_time_errors_are_checked_for_every_target():
    """The per-rewrite checks run the must-fail draws for constrained targets too: passed on
    onnxruntime and onnx's reference, an honest skip (with the reason) on OpenVINO."""
    spec = replace(from_index_expr("x[:, i]"), begin=None, runtime_length=2)
    for target in ("portable", "openvino"):
        case = CheckCase(lower(make_plan(spec, ("N", "M")), 17, {"begin": "int64"}, target=target),
                         np.dtype(np.float32), 1, index_types={"begin": "int64"})
        check_on_runtimes([case], CheckRun(17, RUNTIMES))
        r = case.result
        assert r.must_fail_checked > 0 and r.run_time_errors_on == {
            "onnxruntime": "passed", "openvino": OPENVINO_NO_ERRORS, "reference": "passed"}, r.run_time_errors_on
        assert r.run_time_errors.startswith("skipped: openvino: ") and "passed on onnxruntime, reference" in \
            r.run_time_errors
        again = replace(case, result=type(r)())
        check_on_runtimes([again], CheckRun(17, ("onnxruntime", "reference")))  # without OpenVINO: nothing skipped
        assert again.result.run_time_errors == "passed" and again.result.must_fail_checked > 0


def test_rejected_sizes_are_checked_for_every_target():
    """A static shrink index on a dynamic dim: the sizes the framework rejects are must-fail runs
    on every target in onnxruntime (onnx's reference Gather reads no index of a tensor another
    axis emptied, so they are not its to judge); on OpenVINO (no run-time errors) an honest
    skip, so a conversion checked there is not "verified" for those inputs."""
    plan = make_plan(from_index_expr("x[:, 2]"), ("N", "M"))
    for target in ("portable", "openvino"):
        case = CheckCase(lower(plan, 17, target=target), np.dtype(np.float32), 1)
        check_on_runtimes([case], CheckRun(17, RUNTIMES))
        r = case.result
        assert r.must_fail_checked > 0 and r.run_time_errors_on == {
            "onnxruntime": "passed", "openvino": OPENVINO_NO_ERRORS}, r.run_time_errors_on
        assert r.runtimes.get("reference", "passed") == "passed", r.runtimes


def test_a_rejected_size_emptied_by_another_axis_is_no_false_failure():
    """OpenVINO flavour on a dynamic ``[a, b, c]``: a range that empties axis 0 beside a shrink
    index -4 on axis 1.  At b = 0 onnx's reference returns an empty result where OpenVINO's
    runtime rejects the index; onnxruntime fails as it should, so the portable target is not
    "failed" (it was, on the reference's empty result)."""
    from onnx_slice_tools.semantics.spec import SliceSpec
    spec = SliceSpec(flavor="openvino", begin=(-2, -4), end=(-2, 3), strides=(3, 1), begin_mask=2, end_mask=4,
                     shrink_axis_mask=2, mask_lengths=(3, 3, 3, 3, 3))
    case = CheckCase(lower(make_plan(spec, ("a", "b", "c")), 17, target="portable"), np.dtype(np.float32), 1)
    check_on_runtimes([case], CheckRun(17, RUNTIMES))
    r = case.result
    assert r.ok and r.must_fail_checked > 0 and r.run_time_errors_on.get("onnxruntime") == "passed", r


def test_a_constant_shrink_index_beside_runtime_values_is_no_false_verified_on_openvino():
    """OpenVINO flavour, ``x[-7]`` on a symbolic ``[a, b, c]`` with end and strides given at run
    time: OpenVINO rejects a first dim of 7 or less, its converted graph returns data there, so
    the openvino target is not "verified" (it was, before rejected sizes were drawn beside
    runtime values); onnxruntime fails there (the default target stays verified)."""
    masks = dict(begin_mask=[0, 1, 0, 0], end_mask=[1, 0, 1, 1], ellipsis_mask=[0, 1, 0, 0],
                 new_axis_mask=[0, 0, 0, 0], shrink_axis_mask=[1, 0, 0, 0])
    node = helper.make_node("StridedSlice", ["x", "begin", "end", "strides"], ["y"], name="ss",
                            domain="org.openvinotoolkit", **masks)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["a", "b", "c"]),
                                            helper.make_tensor_value_info("end", TensorProto.INT64, [1]),
                                            helper.make_tensor_value_info("strides", TensorProto.INT64, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [helper.make_tensor("begin", TensorProto.INT64, [1], [-7])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("org.openvinotoolkit", 1)])
    model.ir_version = 8
    ov = convert(model, target="openvino").report
    assert ov.verdict.startswith("unverified") and "OpenVINO raises no run-time error" in ov.verdict, ov.verdict
    ort = convert(model).report
    assert ort.verdict == "verified" and ort.check_of(0).must_fail_checked > 0, ort.to_json()


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("spec, shape, dims", [
    (dict(begin=[-6], end=[0], strides=[1], shrink_axis_mask=1), ("a", 4), [(1, 4), (3, 4), (6, 4), (9, 4)]),
    (dict(begin=[0, -3], end=[2, 0], strides=[1, 1], shrink_axis_mask=2), (2, "b"), [(2, 1), (2, 2), (2, 5)]),
    (dict(begin=[-2, -5, 1], end=[0, 0, 3], strides=[1, 1, -1], shrink_axis_mask=3, new_axis_mask=4),
     ("a", "b", 3), [(1, 2, 3), (3, 4, 3), (2, 7, 3)]),
])
def test_tflite_shrink_below_minus_dim_on_a_dynamic_dim_matches_litert(target, spec, shape, dims):
    """A constant TFLite shrink index below ``-dim`` on a dim known only at run time takes
    element 0 in LiteRT (TensorFlow raises).  Every target's lowering, loaded in a default
    onnxruntime session, returns LiteRT's own result at sizes below and above ``-begin``."""
    from onnx_slice_tools.semantics.spec import from_tflite
    from onnx_slice_tools.verification.oracles import tflite_strided_slice
    tfl = from_tflite(**spec)
    proto = build_model([CheckCase(lower(make_plan(tfl, shape), 17, target=target), np.dtype(np.float32), 1)], 17)
    session = InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    for dim in dims:
        x = np.arange(int(np.prod(dim)), dtype=np.float32).reshape(dim)
        want = tflite_strided_slice(x, tfl)
        assert want.ok and want.values is not None, (dim, want.error)
        got = session.run(["y0"], {"x0": x})[0]
        assert got.shape == want.values.shape and got.tobytes() == want.values.tobytes(), (dim, got, want.values)


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("spec, shape, runtime", [
    # the loop visits (1, 1, 0), the output sized from end is (1, 0, 0): LiteRT returns the latter
    (dict(begin=[5, -1, -1, 2 ** 31 - 1, 0], end=[1, -2, 3, 1, -3], strides=[-1, 1, -1, 1, 3], begin_mask=12,
          end_mask=3, ellipsis_mask=16, new_axis_mask=17, shrink_axis_mask=1), (3, 3), ("end", "strides")),
    # the loop visits (0, 1), the output is (0, 3)
    (dict(begin=[-1, 1, -7, 7, -6], end=[-2, 5, -(2 ** 31), 7, -3], strides=[1, 2, 1, 2, 1], begin_mask=12,
          end_mask=156, ellipsis_mask=8, new_axis_mask=128, shrink_axis_mask=128), (4, 3), ("begin", "strides")),
    # the loop visits as many as end sizes, per dim
    (dict(begin=[1, 0], end=[2, 2], strides=[1, 1]), (4, 3), ("begin",)),
    (dict(begin=[2, -1], end=[-2, -2], strides=[-1, -1]), ("a", 3), ("begin", "end", "strides")),
    # symbolic dims, the loop visits (0, 2), the output is (0, 0): an empty Gather result reshaped
    (dict(begin=[2, 2, 1, 2, 2, 1], end=[-5, -5, 5, 4, -4, -6], strides=[1, 3, -1, -1, -1, -1], begin_mask=3,
          end_mask=4, new_axis_mask=64, shrink_axis_mask=33), ("a", "b", "c"), ("begin",)),
])
def test_tflite_offset_with_runtime_indices_is_sized_from_end_as_in_litert(target, spec, shape, runtime):
    """TFLite's ``offset`` sizes the output from ``end`` and writes what its loop visits into it,
    in order: where the two shapes differ with as many elements (here both empty) LiteRT's
    result is no slice of the input.  With run-time indices every target's lowering returns
    LiteRT's own result, in a default onnxruntime session and (portable, openvino) OpenVINO."""
    from onnx_slice_tools.semantics.spec import from_tflite
    from onnx_slice_tools.verification.oracles import tflite_strided_slice
    tfl = from_tflite(**spec, offset=True)
    written = replace(tfl, runtime_length=tfl.n, **{f: None for f in runtime})
    types = {f: "int32" for f in runtime}
    case = CheckCase(lower(make_plan(written, shape), 17, types, target=target), np.dtype(np.float32), 1,
                     index_types=types)
    data = build_model([case], 17).SerializeToString()
    dims = tuple(3 if isinstance(d, str) else d for d in shape)
    x = np.arange(int(np.prod(dims)), dtype=np.float32).reshape(dims)
    want = tflite_strided_slice(x, tfl, runtime)
    assert want.ok and want.values is not None, want.error
    feed = {"x0": x, **{f"{f[0]}0": np.array(getattr(tfl, f), np.int32) for f in runtime}}
    for name in ["onnxruntime"] + (["openvino"] if target != "onnxruntime" else []):
        got = make_session(name, data, "shipped").run(["y0"], feed)[0]
        assert got.shape == want.values.shape and got.tobytes() == want.values.tobytes(), (name, got, want.values)


def test_openvino_target_is_verified_in_openvino_alone(tmp_path):
    """--target openvino checks on OpenVINO only; a constant spec is then "verified" (not
    "unverified" because onnxruntime was not asked)."""
    result = convert(ROOT / "models" / "openvino_channel_flip.onnx", target="openvino")
    assert result.report.verdict == "verified", result.report.verdict


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
        assert result.ok, (target, list(result.report.record_checks.values()), result.report.model_checks)
        assert find_violations(result.model, target) == []
        checked = {k for c in result.report.record_checks.values() for k in c.runtimes}
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


def _foreign_model_2():
    """Nodes --fix-slices used to leave: a Slice with runtime starts/ends/steps, 1-D Gathers with
    negative indices (one index; an even step) -- and one it cannot fix (uneven indices)."""
    g = helper.make_node
    nodes = [g("Slice", ["x", "s", "e", "", "st"], ["y1"], name="runtime_slice"),
             g("Gather", ["x", "last"], ["y2"], name="keep_last", axis=1),
             g("Gather", ["x", "every2"], ["y3"], name="every_other", axis=2),
             g("Gather", ["x", "uneven"], ["y4"], name="uneven", axis=2)]
    ints = [helper.make_tensor_value_info(n, TensorProto.INT64, [1]) for n in ("s", "e", "st")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "M", 5]),
                                           *ints],
                              [helper.make_tensor_value_info(f"y{k}", TensorProto.FLOAT, None) for k in (1, 2, 3, 4)], [
        helper.make_tensor("last", TensorProto.INT64, [1], [-1]),
        helper.make_tensor("every2", TensorProto.INT64, [2], [-1, -3]),
        helper.make_tensor("uneven", TensorProto.INT64, [3], [-1, 0, -1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_fix_slices_runtime_slices_and_1d_gathers():
    model = _foreign_model_2()
    from onnx_slice_tools.rewrite.fixslices import fix_note
    notes = {v.node: v.fix for v in find_violations(model, "portable", note=fix_note)}
    assert notes["uneven"].startswith("not fixed: indices [-1, 0, -1] do not step evenly"), notes
    assert {k for k, v in notes.items() if v == "fixed by --fix-slices"} == {"runtime_slice", "keep_last",
                                                                              "every_other"}, notes
    result = convert(model, target="portable", fix_slices=True)
    assert result.ok, result.report.to_json()
    assert {v.node for v in find_violations(result.model, "portable")} == {"uneven"}
    x = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5)
    # (runtime values within int32: OpenVINO's CPU plugin computes int64 as int32 -- INT64_MIN reads as 0)
    for s_, e_, step in ([-1], [-(2 ** 31)], [-2]), ([0], [9], [2]), ([5], [-9], [-1]):
        feed = {"x": x, "s": np.array(s_), "e": np.array(e_), "st": np.array(step)}
        want = make_session("onnxruntime", model.SerializeToString()).run(None, feed)
        assert want[0].tobytes() == x[slice(s_[0], None if e_[0] < -3 else e_[0], step[0])].tobytes()
        for name in RUNTIMES:
            got = make_session(name, result.model.SerializeToString()).run(None, feed)
            for w, g_ in zip(want, got):
                assert g_.shape == w.shape and g_.tobytes() == w.tobytes(), (name, s_, e_, step)
    # a Gather of one index out of range still fails at run time (as the original node does)
    bad = {"x": x[:, :0], "s": np.array([0]), "e": np.array([1]), "st": np.array([1])}
    for name in ("onnxruntime", "reference"):
        with pytest.raises(Exception):
            make_session(name, result.model.SerializeToString()).run(["y2"], bad)
            pytest.fail(name)


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


def test_cli_explain_target_shows_the_constrained_lowering_and_stays_light():
    code = ("import sys\nfrom onnx_slice_tools.cli.main import main\n"
            "rc = main(['explain', 'x[::-1, 1, None]', '--shape', 'N,3', '--target', 'portable'])\n"
            "heavy = [m for m in ('onnxruntime', 'onnx_ir', 'onnx', 'numpy') if m in sys.modules]\n"
            "print('HEAVY', heavy)\nsys.exit(rc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert "HEAVY []" in out.stdout
    assert "target portable:" in out.stdout and "avoids negative_slice_step" in out.stdout
    nodes = out.stdout.split("ONNX nodes:")[1]
    assert "Gather(" in nodes and "Range(" in nodes
    steps = [line.rsplit("[", 1)[1] for line in nodes.splitlines() if line.strip().startswith("Slice(")]
    assert steps and not any("-" in st for st in steps), nodes
    default = _cli("explain", "x[::-1, 1, None]", "--shape", "N,3")
    assert "steps=[-1, 1]" in default.stdout and "target" not in default.stdout


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


@pytest.mark.parametrize("target", ["portable", "openvino"])
@pytest.mark.parametrize("expr, shape", [
    ("x[3:5, :, None, 50:3]", (5, "d", 7)),      # TF's testTensorShapeUncertain: empty past the input's rank
    ("x[None, 3:0:2]", (5, "b")),
    ("x[1:1, None, :, None]", (4, "d")),
    ("x[:, 2:2, None]", ("n", 3, "k")),
])
def test_statically_empty_output_with_dynamic_dims_on_every_runtime(target, expr, shape):
    """An output known to be empty beside dynamic dims: OpenVINO fails to compile a Reshape
    (allowzero) to a computed shape with a 0 past the input's rank, and runs Squeeze/Unsqueeze
    of an empty tensor wrong; the constrained lowering is exact on all three runtimes."""
    plan = make_plan(from_index_expr(expr), shape)
    assert 0 in plan.output_shape
    _assert_exact_everywhere(CheckCase(lower(plan, 17, target=target), np.dtype(np.float32), 1), target)
