"""The per-rewrite checks (verification/lowerings.py) and the whole-model comparison (verification/compare.py): every
element type, a memory budget, run-time errors, onnx's evaluator's Loop, warnings."""

from __future__ import annotations

import tracemalloc
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnx_slice_tools import convert
from onnx_slice_tools.api import CheckRun, verify_records
from onnx_slice_tools.verification.compare import _reference_evaluator, compare_models
from onnx_slice_tools.lowering.lower import lower
from onnx_slice_tools.verification.oracles import tf_strided_slice
from onnx_slice_tools.semantics.plan import make_plan
from onnx_slice_tools.semantics.reference import apply_plan
from onnx_slice_tools.rewrite.ir_pass import TF_DOMAIN
from onnx_slice_tools.semantics.spec import OPENVINO, from_index_expr
from onnx_slice_tools.verification.lowerings import (CheckCase, check_lowerings, fetch, make_session, np_dtype, ort_value,
                                     random_input)

MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


def slice_model(expr: str, shape, elem=T.FLOAT, runtime=(), opset: int = 17):
    """One TF-flavour StridedSlice (tf2onnx's custom domain); ``runtime`` fields are graph inputs."""
    spec = from_index_expr(expr)
    inits, inputs = [], [helper.make_tensor_value_info("x", elem, shape)]
    for name, vals in (("begin", spec.begin), ("end", spec.end), ("strides", spec.strides)):
        if name in runtime:
            inputs.append(helper.make_tensor_value_info(name, T.INT32, [spec.n]))
        else:
            inits.append(helper.make_tensor(name, T.INT32, [spec.n], list(vals)))
    node = helper.make_node("StridedSlice", ["x", "begin", "end", "strides"], ["y"], name="ss", domain=TF_DOMAIN,
                            **{m: getattr(spec, m) for m in MASKS})
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", elem, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(TF_DOMAIN, 1)])
    model.ir_version = 8
    return model, spec


# --------------------------------------------------------------------------- every element type

#: Types ONNX's Slice-13 (the newest Slice) accepts; the narrow float8/int4/float4 types it does not.
SLICE_TYPES = ["BOOL", "STRING", "FLOAT16", "BFLOAT16", "FLOAT", "DOUBLE", "INT8", "UINT8", "INT16", "UINT16",
               "INT32", "UINT32", "INT64", "UINT64", "COMPLEX64", "COMPLEX128"]
NARROW_TYPES = ["FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "INT4", "UINT4", "FLOAT4E2M1"]


@pytest.mark.parametrize("type_name", SLICE_TYPES + NARROW_TYPES)
def test_every_element_type_is_checked_or_honestly_skipped(type_name):
    elem = getattr(T, type_name)
    model, spec = slice_model("x[1:3, ::-1]", [4, 5], elem)
    result = convert(model)
    # the per-rewrite check itself (a static [4, 5] slice's, in a conversion, is settled by the
    # as-shipped run: verification/settled_checks.py; its verdict is asked below)
    check = verify_records(result.report.records, CheckRun(17))[1][0]
    assert check.reference_evaluator in ("passed", "not run"), check
    if type_name in NARROW_TYPES:
        # ONNX's Slice has no such type: an honest failure naming it, never a silent pass
        assert check.shape_inference.startswith("failed: ONNX's Slice-13 does not accept tensor(")
        assert "unsupported type" in check.shape_inference
        assert check.onnxruntime.startswith("skipped: onnxruntime has no Slice kernel for")
        assert check.reference_evaluator == "passed"  # the emitted nodes are right in onnx's evaluator
        return
    assert check.shape_inference == "passed", check
    if check.onnxruntime != "passed":
        assert check.onnxruntime == f"skipped: onnxruntime has no Slice kernel for {type_name.lower()}", check
        assert check.reference_evaluator == "passed" and check.skipped
        return
    assert check.ok and not check.skipped
    # onnxruntime runs the converted model bit-exactly (fed through OrtValue), against the reference
    x = random_input((4, 5), np_dtype(elem), np.random.default_rng(1))
    want = apply_plan(make_plan(spec, (4, 5)), x)
    session = make_session(result.model.SerializeToString())
    if elem == T.STRING:
        got = session.run(None, {"x": x})[0]
        assert got.tolist() == want.tolist()
    else:
        got = fetch(session.run_with_ort_values(["y"], {"x": ort_value(x, elem)})[0], elem)
        assert got.shape == want.shape and got.dtype == want.dtype and got.tobytes() == want.tobytes()
    assert result.report.model_checks.get("model_run") in ("ok", "passed"), result.report.model_checks


@pytest.mark.parametrize("type_name", SLICE_TYPES + NARROW_TYPES)
def test_ort_values_round_trip_and_random_data_is_distinct(type_name):
    elem = getattr(T, type_name)
    dtype = np_dtype(elem)
    x = random_input((3, 7), dtype, np.random.default_rng(0))
    assert x.shape == (3, 7) and x.dtype == dtype
    if dtype.kind != "O":
        as_float = x.astype(np.complex128 if dtype.kind == "c" else np.float64) if dtype != np.bool_ else None
        assert as_float is None or np.isfinite(as_float).all()
        distinct = len({v.tobytes() for v in x.ravel()})
        assert distinct >= min(x.size, 2 if dtype == np.bool_ else 7 if type_name == "FLOAT4E2M1" else 15)
    if elem == T.STRING:
        return
    if dtype.kind == "c":
        with pytest.raises(ValueError, match="onnxruntime has no complex"):
            ort_value(x, elem)
        return
    value = ort_value(x, elem)
    assert value.element_type() is not None and list(value.shape()) == [3, 7]
    back = fetch(value, elem)
    assert back.dtype == dtype and back.tobytes() == x.tobytes()
    if type_name in ("INT4", "UINT4", "FLOAT4E2M1"):
        # onnxruntime's packing is ONNX's: two per byte, low nibble first
        import ctypes
        raw = ctypes.string_at(value.data_ptr(), value.tensor_size_in_bytes())
        assert raw == numpy_helper.from_array(x).raw_data


@given(st.sampled_from(["BOOL", "FLOAT16", "BFLOAT16", "FLOAT8E5M2", "INT4", "UINT4", "FLOAT4E2M1", "UINT64"]),
       st.lists(st.integers(0, 5), min_size=0, max_size=4), st.integers(0, 2 ** 32 - 1))
def test_ort_value_round_trip_any_shape(type_name, shape, seed):
    """Odd element counts (a half-filled last byte for 4-bit types), empty and 0-d arrays."""
    elem = getattr(T, type_name)
    x = random_input(tuple(shape), np_dtype(elem), np.random.default_rng(seed))
    value = ort_value(x, elem)
    assert list(value.shape()) == list(shape)
    back = fetch(value, elem)
    assert back.shape == x.shape and back.dtype == x.dtype and back.tobytes() == x.tobytes()


# --------------------------------------------------------------------------- memory budget

def _numpy_peak(fn) -> int:
    """Peak bytes numpy allocated while ``fn`` ran (numpy reports to tracemalloc)."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_large_static_input_is_checked_at_small_sizes():
    """[64, 64, 256, 256] float32 (1 GiB): axes passed through whole are fed small."""
    exprs = ["x[:, :, 10:20]", "x[..., ::2]", "x[0]", "x[:, 1:]", "x[..., ::-1]", "x[:, :, :, -3:]",
             "x[None, 5]", "x[..., 1, None]", "x[:, :, 1:-1, 1:-1]", "x[-1, :, ::3]"]
    results = []

    def run():
        for expr in exprs:
            model, _ = slice_model(expr, [64, 64, 256, 256])
            r = convert(model, verify=False)
            results.append((r, verify_records(r.report.records, CheckRun(17))[1][0]))
    peak = _numpy_peak(run)
    for r, check in results:
        assert check.ok and check.onnxruntime == "passed", (r.report.records[0].notation, check)
        assert all(np.prod(s) <= 9 * 256 * 256 for s in check.tried_shapes), check.tried_shapes
    assert peak < 48 * 2 ** 20, peak


def test_what_does_not_fit_the_budget_is_skipped_with_its_size():
    model, _ = slice_model("x[1:-1]", [2 ** 27])  # 512 MiB of float32: the sliced axis is fed whole
    r = convert(model, verify=False)
    checks: dict = {}
    peak = _numpy_peak(lambda: checks.update(verify_records(r.report.records, CheckRun(17))[1]))
    check = checks[0]
    assert check.onnxruntime.startswith("skipped: needs ") and "budget 256 MiB" in check.onnxruntime
    assert check.shape_inference == "passed" and check.ok and check.skipped
    assert peak < 16 * 2 ** 20
    model, _ = slice_model("x[:, 1:3]", [8, 64, 256])
    r = convert(model, verify=False)
    check = verify_records(r.report.records, CheckRun(17, memory_budget=2 ** 8))[1][0]
    assert check.onnxruntime.startswith("skipped: needs 0.00073 MiB, budget 0.00024 MiB")
    assert verify_records(r.report.records, CheckRun(17, memory_budget=2 ** 20))[1][0].onnxruntime == "passed"


def test_symbolic_ranks_stay_small():
    model, _ = slice_model("x[30]", ["a", "b", "c", "d", "e", "f", "g"])
    r = convert(model, verify=False)
    checks: dict = {}
    peak = _numpy_peak(lambda: checks.update(verify_records(r.report.records, CheckRun(17))[1]))
    check = checks[0]
    assert check.onnxruntime == "passed" and all(s[0] >= 31 for s in check.tried_shapes)
    assert all(max(s[1:]) <= 3 and s[0] <= 32 for s in check.tried_shapes), check.tried_shapes
    assert peak < 16 * 2 ** 20


def test_reshape_only_where_its_check_is_cheap():
    """A static Reshape names every dim (its check runs at the declared size): emitted for small
    inputs only; large ones get Squeeze + Unsqueeze, checked with the whole axes fed small."""
    spec = from_index_expr("x[0, :, None]")
    small = lower(make_plan(spec, (4, 5)), 17)
    large = lower(make_plan(spec, (64, 64, 256)), 17)
    assert [op.op_type for op in small.ops] == ["Slice", "Reshape"]
    assert [op.op_type for op in large.ops] == ["Slice", "Squeeze", "Unsqueeze"]
    cases = [CheckCase(low, np.dtype(np.float32), T.FLOAT) for low in (small, large)]
    check_lowerings(cases, 17)
    assert [c.result.onnxruntime for c in cases] == ["passed", "passed"]
    assert cases[0].result.tried_shapes == [(4, 5)] and max(max(s[1:]) for s in cases[1].result.tried_shapes) <= 3


def test_runs_are_split_within_the_budget_in_one_session():
    """Many cases whose trials together exceed the budget: every case still checked."""
    cases = []
    for k in range(12):
        plan = make_plan(from_index_expr(f"x[{k}:, ::-1]"), (64, 256))
        cases.append(CheckCase(lower(plan, 17), np.dtype(np.float32), T.FLOAT))
    check_lowerings(cases, 17, memory_budget=6 * 64 * 256 * 4)  # room for about two cases per run
    assert all(c.result.onnxruntime == "passed" for c in cases), [c.result for c in cases]


# --------------------------------------------------------------------------- run-time errors

@pytest.mark.parametrize("expr", ["x[1, 1:3]", "x[1:3, 2]", "x[-1, 0]", "x[..., 1]"])
@pytest.mark.parametrize("runtime", [("strides",), ("begin", "strides")])
def test_runtime_stride_on_a_shrink_fails_like_tensorflow(expr, runtime, capfd):
    """TensorFlow raises "only stride 1 allowed on non-range indexing" for a shrink whose
    runtime stride is <= 0: the converted graph fails at run time too; other values agree."""
    model, spec = slice_model(expr, [3, 4], runtime=runtime)
    result = convert(model)
    assert result.ok, result.report.to_json()
    assert capfd.readouterr().err == ""  # the checks' must-fail runs print nothing
    session = make_session(result.model.SerializeToString())
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    shrinks = [i for i in range(spec.n) if spec.shrink_axis_mask >> i & 1]
    tried = 0
    for s in (-2, -1, 0, 1, 2):
        for at in range(spec.n):
            strides = [1] * spec.n
            strides[at] = s
            values = {"begin": list(spec.begin), "end": list(spec.end), "strides": strides}
            want = tf_strided_slice(x, replace(spec, **values))
            feeds = {"x": x, **{f: np.array(values[f], np.int32) for f in runtime}}
            try:
                got = session.run(None, feeds)[0]
            except Exception:
                got = None
            if at in shrinks and s <= 0:
                assert not want.ok and ("non-range" in want.error or "non-zero" in want.error)
            assert (got is None) == (not want.ok), (expr, values, want.error)
            if got is not None:
                assert got.shape == want.values.shape and got.tobytes() == want.values.tobytes()
            tried += 1
    assert tried == 5 * spec.n
    check = result.report.check_of(0)
    assert check.rejected_values > 0 and check.must_fail_checked > 0, check


def test_openvino_runtime_shrink_keeps_its_rules():
    """OpenVINO ignores a shrink's stride (no TF stride error) and rejects an index out of range:
    the converted graph, begin and strides given at run time, against OpenVINO's runtime."""
    from onnx_slice_tools.verification.oracles import openvino_strided_slice
    from onnx_slice_tools.semantics.spec import from_openvino
    masks = dict(begin_mask=[0, 0], end_mask=[0, 1], shrink_axis_mask=[1, 0], new_axis_mask=[0, 0],
                 ellipsis_mask=[0, 0])
    node = helper.make_node("StridedSlice", ["x", "begin", "end", "strides"], ["y"], name="ss",
                            domain="org.openvinotoolkit", **masks)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", T.FLOAT, [3, 4]),
                                            helper.make_tensor_value_info("begin", T.INT64, [2]),
                                            helper.make_tensor_value_info("strides", T.INT64, [2])],
                              [helper.make_tensor_value_info("y", T.FLOAT, None)],
                              [helper.make_tensor("end", T.INT64, [2], [0, 0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("org.openvinotoolkit", 1)])
    model.ir_version = 8
    result = convert(model)
    assert result.ok and result.report.records[0].flavor == OPENVINO, result.report.to_json()
    session = make_session(result.model.SerializeToString())
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for b0 in (-4, -3, -1, 0, 2, 3):
        for s0 in (-2, -1, 0, 1, 2):
            begin, strides = [b0, 1], [s0, 1]
            want = openvino_strided_slice(x, from_openvino(begin, [0, 0], strides, **masks))
            try:
                got = session.run(None, {"x": x, "begin": np.array(begin), "strides": np.array(strides)})[0]
            except Exception:
                got = None
            assert (got is None) == (not want.ok), (begin, strides, want)
            if got is not None:
                assert got.shape == want.values.shape and got.tobytes() == want.values.tobytes()


def test_check_catches_a_graph_that_returns_where_the_framework_raises():
    """The per-rewrite check keeps rejected runtime values as must-fail cases: a lowering without
    the run-time error (the OpenVINO lowering of the same masks under TF's plan) fails it."""
    tf_spec = replace(from_index_expr("x[1, 1:3]"), strides=None, runtime_length=2)
    tf_plan = make_plan(tf_spec, (3, 4))
    ov_plan = make_plan(replace(tf_spec, flavor=OPENVINO, mask_lengths=None), (3, 4))
    wrong = replace(lower(ov_plan, 17, {"strides": "int64"}), plan=tf_plan)
    right = lower(tf_plan, 17, {"strides": "int64"})
    cases = [CheckCase(wrong, np.dtype(np.float32), T.FLOAT, index_types={"strides": "int64"}),
             CheckCase(right, np.dtype(np.float32), T.FLOAT, index_types={"strides": "int64"})]
    check_lowerings(cases, 17)
    assert cases[0].result.onnxruntime.startswith("failed:") and "rejects" in cases[0].result.onnxruntime
    assert cases[1].result.onnxruntime == "passed" and cases[1].result.must_fail_checked > 0


def test_sizes_the_framework_rejects_are_must_fail_runs():
    """A static shrink index on a dim unknown at conversion time (``x[:, 2]`` on ``[N, M]``):
    the checks run the sizes TF rejects (M = 0 and M = 2) and onnxruntime must fail on them."""
    case = CheckCase(lower(make_plan(from_index_expr("x[:, 2]"), ("N", "M")), 17), np.dtype(np.float32), T.FLOAT)
    check_lowerings([case], 17)
    assert case.result.onnxruntime == "passed" and case.result.must_fail_checked == 2, case.result


def test_check_catches_a_graph_that_returns_for_a_size_the_framework_rejects(monkeypatch):
    """A runtime that returns data where the framework rejects the input size fails the check."""
    import onnx_slice_tools.verification.lowerings as lowerings
    real = lowerings._check_session

    class Lenient:  # returns an empty result instead of the run-time error
        def __init__(self, session):
            self.session = session

        def __getattr__(self, name):
            return getattr(self.session, name)

        def run(self, names, feeds):
            try:
                return self.session.run(names, feeds)
            except Exception:
                return [np.zeros((0,), np.float32) for _ in names]

        def run_with_ort_values(self, names, feeds):
            try:
                return self.session.run_with_ort_values(names, feeds)
            except Exception:
                return [OrtValue.ortvalue_from_numpy(np.zeros((0,), np.float32)) for _ in names]

    from onnxruntime import OrtValue
    monkeypatch.setattr(lowerings, "_check_session", lambda data: Lenient(real(data)))
    case = CheckCase(lower(make_plan(from_index_expr("x[:, 2]"), ("N", "M")), 17), np.dtype(np.float32), T.FLOAT)
    check_lowerings([case], 17)
    assert case.result.onnxruntime.startswith("failed: input [") and "the framework rejects it" in \
        case.result.onnxruntime, case.result.onnxruntime


# --------------------------------------------------------------------------- whole-model comparison

def _loop_model(iterations: int):
    """A Loop whose body slices an outer tensor (x[:, ::-1]) and emits it plus a counter as a scan output."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["c_in", "one"], ["c_out"]),
         helper.make_node("StridedSlice", ["x", "b", "e", "s"], ["rev"], domain=TF_DOMAIN,
                          begin_mask=3, end_mask=3, ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0),
         helper.make_node("Add", ["rev", "c_in"], ["scan"])],
        "body",
        [helper.make_tensor_value_info("i", T.INT64, []), helper.make_tensor_value_info("cond_in", T.BOOL, []),
         helper.make_tensor_value_info("c_in", T.FLOAT, [])],
        [helper.make_tensor_value_info("cond_out", T.BOOL, []), helper.make_tensor_value_info("c_out", T.FLOAT, []),
         helper.make_tensor_value_info("scan", T.FLOAT, [3, 4])],
        [helper.make_tensor(n, T.INT32, [2], v) for n, v in (("b", [0, 0]), ("e", [0, 0]), ("s", [1, -1]))]
        + [helper.make_tensor("one", T.FLOAT, [], [1.0])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "cond", "c0"], ["c_final", "scans"], body=body)], "g",
        [helper.make_tensor_value_info("x", T.FLOAT, [3, 4]), helper.make_tensor_value_info("c0", T.FLOAT, [])],
        [helper.make_tensor_value_info("c_final", T.FLOAT, []),
         helper.make_tensor_value_info("scans", T.FLOAT, [iterations, 3, 4])],
        [helper.make_tensor("M", T.INT64, [], [iterations]), helper.make_tensor("cond", T.BOOL, [], [True])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TF_DOMAIN, 1)])
    model.ir_version = 8
    return model


def test_loop_scan_outputs_are_stacked():
    model = _loop_model(3)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    c0 = np.float32(10)
    want = np.stack([x[:, ::-1] + (c0 + k) for k in range(3)])  # the ONNX spec: one slice per iteration
    final, scans = _reference_evaluator(model, None).run(None, {"x": x, "c0": np.array(c0)})
    assert scans.shape == (3, 3, 4) and scans.tobytes() == want.tobytes() and final == c0 + 3
    result = convert(model)
    cmp = compare_models(model, result.model)  # the `verify ORIGINAL CONVERTED` comparison
    assert result.ok and cmp.status == "ok", cmp.to_json()
    got = make_session(result.model.SerializeToString()).run(None, {"x": x, "c0": np.array(c0)})[1]
    assert got.tobytes() == want.tobytes()


def test_evaluator_crash_is_a_skip_not_a_mismatch():
    model = _loop_model(0)  # onnx's Loop cannot build an empty scan output (np.vstack of nothing)
    result = convert(model)
    cmp = compare_models(model, result.model)
    assert cmp.ok and cmp.status.startswith("skipped: onnx's reference evaluator cannot run the original")


def test_numpy_warnings_go_into_the_result_not_stderr(capfd):
    model, _ = slice_model("x[:, 1:]", ["N", 6])
    log = helper.make_node("Log", ["y"], ["z"])
    model.graph.node.append(log)
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("z", T.FLOAT, None))
    result = convert(model)
    cmp = compare_models(model, result.model)
    assert cmp.status == "ok" and any("log" in w for w in cmp.warnings), cmp.to_json()
    assert capfd.readouterr().err == ""


def test_only_the_dims_a_rejection_points_at_grow():
    """A rank-6 symbolic x[0] beside a 1-D z[30]: z's dim grows to 31, x's stay small."""
    nodes, inits = [], []
    for name, expr in (("x", "x[0]"), ("z", "x[30]")):
        spec = from_index_expr(expr)
        for f, vals in (("b", spec.begin), ("e", spec.end), ("s", spec.strides)):
            inits.append(helper.make_tensor(f"{f}_{name}", T.INT32, [spec.n], list(vals)))
        nodes.append(helper.make_node("StridedSlice", [name, f"b_{name}", f"e_{name}", f"s_{name}"], [f"y_{name}"],
                                      domain=TF_DOMAIN, **{m: getattr(spec, m) for m in MASKS}))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [f"d{k}" for k in range(6)]),
                                           helper.make_tensor_value_info("z", T.FLOAT, ["n"])],
                              [helper.make_tensor_value_info("y_x", T.FLOAT, None),
                               helper.make_tensor_value_info("y_z", T.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TF_DOMAIN, 1)])
    model.ir_version = 8
    result = convert(model)
    converted = result.model
    cmp = compare_models(model, converted)
    assert cmp.status == "ok", cmp.to_json()
    for t in cmp.tried:
        assert t["z"][0] >= 31 and np.prod(t["x"]) <= 5 ** 6, t


def test_bfloat16_whole_model_comparison():
    model, _ = slice_model("x[:, ::-2]", ["N", 5], T.BFLOAT16)
    result = convert(model)
    cmp = compare_models(model, result.model)
    assert result.ok and cmp.status == "ok", (result.report.to_json(), cmp.to_json())


def test_tolerance_only_where_floats_are_computed():
    from onnx_slice_tools.verification.compare import float_arithmetic_outputs
    from onnx_slice_tools.verification.tolerance import agree
    model, _ = slice_model("x[:, 1:]", ["N", 6])
    model.graph.node.append(helper.make_node("Exp", ["y"], ["z"]))
    model.graph.output.append(helper.make_tensor_value_info("z", T.FLOAT, None))
    arithmetic = float_arithmetic_outputs(model)
    assert arithmetic == {"z"}
    a = np.array([1.0, 2.0], np.float32)
    b = np.nextafter(a, np.float32(3))
    # compare_models passes exact=(output not in float_arithmetic_outputs) to the one rule
    assert not agree(a, b, exact="y" not in arithmetic).ok
    assert agree(a, b, exact="z" not in arithmetic).ok


def test_comparison_verdict_and_input_budget():
    from onnx_slice_tools.verification.compare import ModelComparison
    assert ModelComparison("ok").verdict == "passed"
    bad = ModelComparison("mismatch", {"a": "ok (bitwise)", "b": "inputs x[2]: shape (2,) vs (1,)"})
    assert bad.verdict == "failed: output 'b': inputs x[2]: shape (2,) vs (1,)" and not bad.ok
    model, _ = slice_model("x[:, 1:]", ["N", 2 ** 20])
    result = convert(model, verify=False)
    cmp = compare_models(model, result.model, memory_budget=2 ** 20)  # 3 x 2^20 float32 do not fit
    assert cmp.ok and cmp.status == "skipped: random inputs need 12 MiB, budget 1 MiB", cmp.status


# --------------------------------------------------------------------------- sizes only where they matter

def _wrong(plan, *slices):
    """A planted lowering of ``plan``: one Slice of ``slices`` (axis, start, end, step)."""
    from onnx_slice_tools.lowering.lower import SLICE, Lowering, Op
    return Lowering(plan, (Op(SLICE, axes=tuple(s[0] for s in slices), starts=tuple(s[1] for s in slices),
                              ends=tuple(s[2] for s in slices), steps=tuple(s[3] for s in slices)),))


def test_an_axis_the_lowering_depends_on_is_tried_at_several_sizes():
    """``x[1:-1]`` on ``[B, 64]``: its Slice reads B (the result's length is B - 2), so B is tried
    at several sizes (0, 1, 2, 3 and past |begin|, |end|); the 64 it keeps whole at one size."""
    from onnx_slice_tools.verification.lowerings import size_free_axes
    low = lower(make_plan(from_index_expr("x[1:-1]"), ("B", 64)), 17)
    assert size_free_axes(low) == {1}
    case = CheckCase(low, np.dtype(np.float32), T.FLOAT)
    check_lowerings([case], 17)
    assert case.result.onnxruntime == "passed"
    assert {s[0] for s in case.result.tried_shapes} >= {0, 1, 2, 3}, case.result.tried_shapes
    assert {s[1] for s in case.result.tried_shapes} == {1}, case.result.tried_shapes


def test_an_axis_nothing_reads_is_tried_at_one_size():
    """``x[:, 3:40:2, 5:9]`` on ``[B, 64, 64, 8]`` (the distinct-spec benchmark's kind): its Slice
    names axes 1 and 2 only and the plan keeps B and the last axis whole, so one input size
    tries every size of theirs; the sliced axes are fed whole."""
    from onnx_slice_tools.verification.lowerings import size_free_axes
    low = lower(make_plan(from_index_expr("x[:, 3:40:2, 5:9]"), ("B", 64, 64, 8)), 17)
    assert size_free_axes(low) == {0, 3}
    case = CheckCase(low, np.dtype(np.float32), T.FLOAT)
    check_lowerings([case], 17)
    assert case.result.onnxruntime == "passed" and case.result.tried_shapes == [(1, 64, 64, 1)]


@pytest.mark.parametrize("shape", [("B", 8), (5, 8)])
def test_a_planted_lowering_that_depends_on_a_size_the_plan_keeps_whole_is_caught(shape):
    """The plan of ``x[:, 1:3]`` keeps axis 0 whole; a planted lowering also slices it to
    ``[0:2]`` -- right at sizes 1 and 2, wrong from 3.  Its Slice names axis 0, so axis 0 is not
    size-free for it (the rule reads the emitted ops, not the plan) and the sizes that show the
    bug are tried: the check fails.  The right lowering passes."""
    from onnx_slice_tools.verification.lowerings import size_free_axes
    plan = make_plan(from_index_expr("x[:, 1:3]"), shape)
    right = lower(plan, 17)
    assert 0 in size_free_axes(right)
    for wrong in (_wrong(plan, (0, 0, 2, 1), (1, 1, 3, 1)), _wrong(plan, (-2, 0, 2, 1), (-1, 1, 3, 1))):
        assert size_free_axes(wrong) == set()
        cases = [CheckCase(wrong, np.dtype(np.float32), T.FLOAT), CheckCase(right, np.dtype(np.float32), T.FLOAT)]
        check_lowerings(cases, 17)
        assert cases[0].result.onnxruntime.startswith("failed: input ("), cases[0].result
        assert "shape (2, 2) != expected (3, 2)" in cases[0].result.onnxruntime, cases[0].result.onnxruntime
        assert cases[1].result.onnxruntime == "passed"


def test_a_planted_dim_dependent_bug_on_a_sliced_symbolic_axis_is_caught():
    """``x[-3:]`` on ``[B]`` planted as ``x[-3:-0]``-like ``Slice(-3, 3)``: equal to the reference
    only where B is 3 (or below, clamped); the symbolic axis is tried at several sizes."""
    plan = make_plan(from_index_expr("x[-3:]"), ("B",))
    case = CheckCase(_wrong(plan, (0, -3, 3, 1)), np.dtype(np.float32), T.FLOAT)
    check_lowerings([case], 17)
    assert case.result.onnxruntime.startswith("failed: input ("), case.result


def test_sessions_of_part_of_the_cases_check_each_case_as_its_own(monkeypatch):
    """With several sessions (here 2 cases each), each session's model is cut out of the one
    model of every case (its inputs, nodes, outputs and the constants they read): every case is
    checked, runtime-index cases too, and a planted wrong one in a later session still fails."""
    import onnx_slice_tools.verification.lowerings as lowerings
    monkeypatch.setattr(lowerings, "SESSION_CASES", 2)
    cases = [CheckCase(lower(make_plan(from_index_expr(e), s), 17), np.dtype(np.float32), T.FLOAT)
             for e, s in (("x[1:-1]", ("B", 4)), ("x[:, ::-1]", (3, "N")), ("x[0]", ("B", 2)), ("x[..., 1:]", (2, 5)))]
    spec = replace(from_index_expr("x[1:3, 0]"), strides=None, runtime_length=2)
    cases.append(CheckCase(lower(make_plan(spec, (4, 5)), 17, {"strides": "int64"}), np.dtype(np.float32), T.FLOAT,
                           index_types={"strides": "int64"}))
    plan = make_plan(from_index_expr("x[:, 1:3]"), ("B", 8))
    cases.append(CheckCase(_wrong(plan, (0, 0, 2, 1), (1, 1, 3, 1)), np.dtype(np.float32), T.FLOAT))
    check_lowerings(cases, 17)
    assert [c.result.onnxruntime for c in cases[:-1]] == ["passed"] * 5, [c.result for c in cases]
    assert cases[4].result.tried_values and cases[4].result.must_fail_checked > 0
    assert cases[-1].result.onnxruntime.startswith("failed: input ("), cases[-1].result


def test_size_free_axes_only_where_the_ops_number_the_input_axes():
    """A Slice after a Squeeze numbers the squeezed tensor's axes: the rule does not read it
    (no axis is size-free); nor a Squeeze without axes, nor a Reshape."""
    from onnx_slice_tools.lowering.lower import RESHAPE, SLICE, SQUEEZE, Lowering, Op
    from onnx_slice_tools.verification.lowerings import size_free_axes
    plan = make_plan(from_index_expr("x[0, 1:3]"), ("B", 8, "C"))
    right = lower(plan, 17)
    assert [op.op_type for op in right.ops] == ["Slice", "Squeeze"] and size_free_axes(right) == {2}
    late = Lowering(plan, (Op(SLICE, axes=(0,), starts=(0,), ends=(1,), steps=(1,)), Op(SQUEEZE, axes=(0,)),
                           Op(SLICE, axes=(0,), starts=(1,), ends=(3,), steps=(1,))))
    assert size_free_axes(late) == set()
    for ops in ((Op(SQUEEZE, axes=()),), (Op(RESHAPE, shape=(2, 3)),)):
        assert size_free_axes(Lowering(plan, ops)) == set()
