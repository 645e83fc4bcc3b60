"""The as-shipped run decides the verdict: the bytes that are saved, in each runtime's default
configuration, agree with the checked run; degenerate outputs never get a green light; opset
conversions are run, not skipped."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper

from onnx_slice_tools import api
from onnx_slice_tools.cli.main import main as cli_main
from onnx_slice_tools.frontends.tfexport import TF_DOMAIN
from onnx_slice_tools.verification import runtimes, shipped
from onnx_slice_tools.verification.budget import Budget
from onnx_slice_tools.verification.inplace import AS_SHIPPED


def _model(nodes, inputs, outputs, inits=(), opset=17, tf=True):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    imports = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(TF_DOMAIN, 1)] if tf else [])
    m = helper.make_model(g, opset_imports=imports)
    m.ir_version = 8
    return m


def _slice_then(after=(), out="y", out_shape=("N", 2), x_shape=("N", 5), end=3):
    """x -> StridedSlice x[:, 1:end] -> y, then the ``after`` nodes; graph output ``out``."""
    inits = [helper.make_tensor("b", T.INT32, [2], [0, 1]), helper.make_tensor("e", T.INT32, [2], [0, end]),
             helper.make_tensor("s", T.INT32, [2], [1, 1]),
             helper.make_tensor("zero", T.INT64, [], [0]), helper.make_tensor("one", T.INT64, [], [1]),
             helper.make_tensor("m1", T.INT64, [], [-1]), helper.make_tensor("m2", T.INT64, [], [-2])]
    ss = helper.make_node("StridedSlice", ["x", "b", "e", "s"], ["y"], domain=TF_DOMAIN, name="ss",
                          begin_mask=1, end_mask=1, ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0)
    return _model([ss, *after], [helper.make_tensor_value_info("x", T.FLOAT, list(x_shape))],
                  [helper.make_tensor_value_info(out, T.FLOAT, list(out_shape))], inits)


def _optimiser_bug_model():
    """A StridedSlice whose rewrite is right, then foreign nodes ``Gather(y, Range(n - 1, -1, -2))``
    that onnxruntime's default graph optimisations turn into an empty Slice (facts.md, 2026-11-25)."""
    after = [helper.make_node("Shape", ["y"], ["sh"]), helper.make_node("Gather", ["sh", "zero"], ["n"]),
             helper.make_node("Sub", ["n", "one"], ["start"]), helper.make_node("Range", ["start", "m1", "m2"], ["r"]),
             helper.make_node("Gather", ["y", "r"], ["z"], axis=0)]
    return _slice_then(after, out="z", out_shape=["M", 2])


def _run_cli(argv, capfd):
    code = cli_main([str(a) for a in argv])
    out, err = capfd.readouterr()
    return code, out, [line for line in err.splitlines() if line.strip()]


def test_the_optimiser_bug_is_real_in_default_sessions():
    """The premise of the next test: the same model, optimisations off vs onnxruntime's defaults."""
    converted = api.convert(_optimiser_bug_model(), verify=False).model.SerializeToString()
    x = np.arange(15, dtype=np.float32).reshape(3, 5)
    fast = runtimes.onnxruntime_session(converted, runtimes.FAST).run(None, {"x": x})[0]
    default = ort.InferenceSession(converted).run(None, {"x": x})[0]
    np.testing.assert_array_equal(fast, x[[2, 0], 1:3])
    assert default.shape == (0, 2), "onnxruntime's optimiser no longer breaks Gather(Range(s, -1, -2))"


def test_a_model_wrong_in_default_sessions_is_not_verified(tmp_path, capfd):
    rep = api.convert(_optimiser_bug_model()).report
    assert rep.model_checks["model_run"] == "passed"  # the tapped, unoptimised run sees nothing wrong
    assert rep.model_checks["shipped"].startswith("failed: onnxruntime (default configuration) disagrees")
    assert "'z'" in rep.model_checks["shipped"] and "(0, 2)" in rep.model_checks["shipped"]
    assert rep.verdict == "failed" and not rep.verified
    src = tmp_path / "m.onnx"
    onnx.save(_optimiser_bug_model(), src)
    code, _out, err = _run_cli(["convert", src, "-o", tmp_path / "out.onnx"], capfd)
    assert code == 1 and len(err) == 1 and "shipped" in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "out.onnx").exists()


@pytest.mark.parametrize("path", ["proto", "onnx-ir"])
def test_the_shipped_run_loads_the_bytes_that_are_saved(tmp_path, monkeypatch, path):
    loaded = []
    real = shipped.onnxruntime_session

    def spy(model, config=runtimes.FAST):
        if config == runtimes.SHIPPED:
            loaded.append(bytes(model))
        return real(model, config)
    monkeypatch.setattr(shipped, "onnxruntime_session", spy)
    after = [helper.make_node("Relu", ["y"], ["z"])]
    result = api.convert(_slice_then(after, out="z"), fix_slices=path == "onnx-ir")  # fix_slices: the onnx-ir path
    assert (result.ir_model is None) == (path == "proto")
    assert result.report.verified and result.report.model_checks["shipped"] == "passed"
    result.save(tmp_path / "out.onnx")
    assert loaded == [(tmp_path / "out.onnx").read_bytes()]


def test_verified_requires_the_shipped_run(monkeypatch):
    """A shipped run that cannot run (here: its memory estimate) leaves the verdict unverified, with why."""
    real = shipped.run_need
    monkeypatch.setattr(shipped, "run_need", lambda *a, **k: real(*a, **k) + 2 ** 40)
    rep = api.convert(_slice_then([helper.make_node("Relu", ["y"], ["z"])], out="z")).report
    assert rep.model_checks["model_run"] == "passed"
    assert rep.model_checks["shipped"].startswith("skipped: needs ~")
    assert rep.verdict.startswith("unverified (shipped skipped (needs ~") and not rep.verified
    assert api.convert(_slice_then([helper.make_node("Relu", ["y"], ["z"])], out="z"), strict=True).report.verdict \
        == "failed"


def test_shipped_on_openvino_when_it_is_a_verification_runtime():
    rep = api.convert(_slice_then([helper.make_node("Relu", ["y"], ["z"])], out="z"),
                      verify_on="onnxruntime,openvino").report
    assert rep.model_checks["shipped"] == "passed" and rep.model_checks["shipped_openvino"] == "passed"
    assert "shipped_openvino" not in api.convert(_slice_then()).report.model_checks


def test_openvino_feeds_an_input_whose_port_answers_to_a_folded_tensor_name():
    """OpenVINO folds ``Gather(x, i)`` on a size-1 axis into its input: the port of ``x`` then
    answers ``get_any_name()`` with ``g``.  The session feeds it by any of its names (it ran on
    unfed memory, and the as-shipped OpenVINO run failed right conversions)."""
    model = _model([helper.make_node("Gather", ["x", "i"], ["g"], axis=1), helper.make_node("Neg", ["g"], ["y"])],
                   [helper.make_tensor_value_info("x", T.FLOAT, [2, 1]), helper.make_tensor_value_info("i", T.INT64, [1])],
                   [helper.make_tensor_value_info("y", T.FLOAT, None)], tf=False)
    session = runtimes.make_session(runtimes.OPENVINO, model.SerializeToString(), runtimes.SHIPPED)
    assert "x" not in {p.get_any_name() for p in session.compiled[()].inputs}  # the case at hand
    for _ in range(3):
        got = session.run(["y"], {"x": np.array([[1.5], [-2.5]], np.float32), "i": np.array([0])})[0]
        assert got.tolist() == [[-1.5], [2.5]], got


def test_a_tflite_conversion_openvino_runs_right_is_not_failed_by_its_shipped_run():
    """A TFLite spec with run-time end/strides on a static ``[1, 4, 3, 1]`` (its shrink on the
    size-1 last axis is a Gather OpenVINO folds into ``x``): converted for the portable target,
    the as-shipped OpenVINO run agrees (it failed, ``x`` unfed), and the saved model equals LiteRT."""
    from onnx_slice_tools.semantics.spec import from_tflite
    from onnx_slice_tools.verification.oracles import tflite_strided_slice
    spec = from_tflite([6, -5, 0, 1, -4, -4], [5, 1, 1, -3, -6, -4], [-1, -3, -1, -3, 2, -1], begin_mask=34,
                       end_mask=7, ellipsis_mask=8, new_axis_mask=1, shrink_axis_mask=16)
    node = helper.make_node("StridedSlice", ["x", "b", "e", "s"], ["y"], name="ss", domain=TF_DOMAIN, offset=0,
                            **{m: getattr(spec, m) for m in ("begin_mask", "end_mask", "ellipsis_mask",
                                                             "new_axis_mask", "shrink_axis_mask")})
    model = _model([node], [helper.make_tensor_value_info("x", T.FLOAT, [1, 4, 3, 1]),
                            helper.make_tensor_value_info("e", T.INT64, [6]),
                            helper.make_tensor_value_info("s", T.INT64, [6])],
                   [helper.make_tensor_value_info("y", T.FLOAT, None)],
                   [helper.make_tensor("b", T.INT64, [6], list(spec.begin))])
    result = api.convert(model, target="portable")
    assert result.report.model_checks["shipped_openvino"] == "passed", result.report.model_checks
    assert result.ok, result.report.verdict
    x = np.arange(12, dtype=np.float32).reshape(1, 4, 3, 1)
    want = tflite_strided_slice(x, spec, ("end", "strides"))
    feeds = {"x": x, "e": np.array(spec.end), "s": np.array(spec.strides)}
    for name in (runtimes.ONNXRUNTIME, runtimes.OPENVINO):
        got = runtimes.make_session(name, result.model.SerializeToString(), runtimes.SHIPPED).run(["y"], feeds)[0]
        assert want.ok and got.shape == want.values.shape and got.tobytes() == want.values.tobytes(), (name, got)


def test_outputs_of_pure_data_movement_are_compared_bitwise():
    m = _slice_then([helper.make_node("Exp", ["y"], ["r"]), helper.make_node("Transpose", ["y"], ["t"])],
                    out="t", out_shape=(2, "N"))
    m.graph.output.append(helper.make_tensor_value_info("r", T.FLOAT, ["N", 2]))
    m = api.convert(m, verify=False).model
    shapes = {"y": (1, (3, 2)), "r": (1, (3, 2)), "t": (1, (2, 3))}
    for o in m.graph.output:
        shapes.setdefault(o.name, (1, None))
    assert shipped.exact_outputs(m, shapes) == {"t"}
    x = np.ones((3, 2), np.float32)
    run = shipped.CheckedRun({}, {"t": x, "r": x}, {}, shapes)
    near = x + np.float32(1e-7)
    assert shipped.compare_outputs(run, {"t": x, "r": near}, shipped.OutputRule({"t"})) is None      # arithmetic: the tolerance
    assert "'t'" in shipped.compare_outputs(run, {"t": near, "r": x}, shipped.OutputRule({"t"}))     # data movement: bitwise


# --------------------------------------------------------------------------- degenerate outputs


def test_a_graph_without_outputs_is_unusable_input(tmp_path, capfd):
    m = _slice_then()
    del m.graph.output[:]
    src = tmp_path / "m.onnx"
    onnx.save(m, src)
    code, _out, err = _run_cli(["convert", src, "-o", tmp_path / "out.onnx"], capfd)
    assert code == 2 and len(err) == 1 and str(src) in err[0] and "no outputs" in err[0], err
    assert not (tmp_path / "out.onnx").exists()


def test_a_conversion_that_rewrote_nothing_says_so(tmp_path, capfd):
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [helper.make_tensor_value_info("x", T.FLOAT, [2, 3])],
               [helper.make_tensor_value_info("y", T.FLOAT, [2, 3])], tf=False)
    rep = api.convert(m).report
    assert rep.verdict == "nothing to rewrite" and not rep.verified and rep.ok
    assert rep.model_checks["shipped"] == "passed"
    src = tmp_path / "m.onnx"
    onnx.save(m, src)
    code, out, err = _run_cli(["convert", src, "-o", tmp_path / "out.onnx", "--report", tmp_path / "r.json"], capfd)
    assert code == 0 and not err and "nothing to rewrite" in out and " verified" not in out
    assert json.loads((tmp_path / "r.json").read_text())["verdict"] == "nothing to rewrite"


def test_an_output_onnxruntime_cannot_load_is_never_verified(tmp_path, capfd):
    """A damaged op name (not a StridedSlice): nothing rewritten, the loader's first line reported."""
    damaged = helper.make_node("StridedSlise", ["x"], ["y"], domain=TF_DOMAIN)
    m = _model([damaged], [helper.make_tensor_value_info("x", T.FLOAT, [2, 3])],
               [helper.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    rep = api.convert(m).report
    assert rep.model_checks["shipped"].startswith("skipped: onnxruntime cannot run the model: ")
    assert "StridedSlise" in rep.model_checks["shipped"] and not rep.verified
    src = tmp_path / "m.onnx"
    onnx.save(m, src)
    code, out, err = _run_cli(["convert", src, "-o", tmp_path / "out.onnx"], capfd)
    assert code == 0 and not err and "NOT fully verified" in out and "StridedSlise" in out
    code, out, err = _run_cli(["convert", src, "-o", tmp_path / "strict.onnx", "--strict"], capfd)
    assert code == 1 and len(err) == 1 and "StridedSlise" in err[0] and "--strict" in err[0]


def test_a_rewritten_output_the_runtime_cannot_load_fails(monkeypatch):
    """The conversion's own output must load as shipped: a loader error is a failure, its first line shown."""
    real = shipped.onnxruntime_session

    def refuse(model, config=runtimes.FAST):
        if config == runtimes.SHIPPED:
            raise RuntimeError("[ONNXRuntimeError] : 1 : FAIL : Load model failed\nsecond line")
        return real(model, config)
    monkeypatch.setattr(shipped, "onnxruntime_session", refuse)
    rep = api.convert(_slice_then()).report
    assert rep.model_checks["shipped"] == ("failed: onnxruntime (default configuration) cannot load the model: "
                                           "[ONNXRuntimeError] : 1 : FAIL : Load model failed")
    assert rep.verdict == "failed"


# --------------------------------------------------------------------------- opset conversions


def test_opset_conversions_are_run_and_strict_accepts_them(tmp_path, capfd):
    src = tmp_path / "m.onnx"
    onnx.save(_slice_then([helper.make_node("Relu", ["y"], ["z"])], out="z"), src)
    code, out, err = _run_cli(["convert", src, "-o", tmp_path / "out.onnx", "--opset", "18", "--strict",
                               "--report", tmp_path / "r.json"], capfd)
    assert code == 0 and not err and " verified" in out, (out, err)
    checks = json.loads((tmp_path / "r.json").read_text())["model_checks"]
    assert checks["opset_conversion"] == "passed" and checks["shipped"] == "passed"
    assert onnx.load(tmp_path / "out.onnx").opset_import[0].version == 18


def test_a_wrong_opset_conversion_fails(monkeypatch):
    """onnx's version converter returning a model that computes something else: the run catches it."""
    real = api._convert_version

    def wrong(proto, target, label):
        out = real(proto, target, label)
        for n in out.graph.node:
            if n.op_type == "Relu":
                n.op_type = "Neg"
        return out
    monkeypatch.setattr(api, "_convert_version", wrong)
    rep = api.convert(_slice_then([helper.make_node("Relu", ["y"], ["z"])], out="z"), opset=18).report
    assert rep.model_checks["opset_conversion"].startswith("failed: the converted model disagrees")
    assert rep.verdict == "failed"


# --------------------------------------------------------------------------- in pieces


def _many_slices(n: int):
    """x[N, 64, 8] -> Relu chain; every 4 nodes a StridedSlice x[:, 0:1] (small) that is a graph
    output: the taps (each slice's input, 2 KiB per N) weigh far more than the model's outputs."""
    inits = [helper.make_tensor("b", T.INT32, [2], [0, 0]), helper.make_tensor("e", T.INT32, [2], [0, 1]),
             helper.make_tensor("s", T.INT32, [2], [1, 1])]
    nodes, outputs, h = [], [], "x"
    for i in range(n):
        if i and i % 4 == 0:
            nodes.append(helper.make_node("Relu", [h], [f"h{i}"]))
            h = f"h{i}"
        nodes.append(helper.make_node("StridedSlice", [h, "b", "e", "s"], [f"y{i}"], domain=TF_DOMAIN, name=f"ss{i}",
                                      begin_mask=1, end_mask=1, ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0))
        outputs.append(helper.make_tensor_value_info(f"y{i}", T.FLOAT, ["N", 1, 8]))
    return _model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, ["N", 64, 8])], outputs, inits)


def test_an_in_place_run_over_the_budget_runs_in_pieces_and_is_verified(tmp_path, capfd):
    """40 slices at N=3: the tapped run holds 10 slice inputs of 6 KiB to the end (~65 KiB); a
    40 KiB budget forces several pieces, each rewrite still checked on the tensors that reached it."""
    model = _many_slices(40)
    whole = api.convert(model).report
    assert whole.model_checks["model_run"] == "passed" and whole.verified
    rep = api.convert(model, verify_memory=40 * 1024).report
    status = rep.model_checks["model_run"]
    assert status.startswith("passed (in ") and "pieces within the memory budget" in status, rep.model_checks
    assert int(status.split()[2]) >= 3
    # (each checked in a piece, or -- its output a graph output -- by the as-shipped run, which says so)
    assert all(rep.inplace_of(i) in ("passed", AS_SHIPPED) for i in range(len(rep.records))), rep.record_inplace
    assert rep.inplace_sizes == {"N": 3}
    assert rep.model_checks["shipped"] == "passed" and rep.verdict == "verified"
    src = tmp_path / "m.onnx"
    onnx.save(model, src)
    code, out, err = _run_cli(["convert", src, "-o", tmp_path / "out.onnx", "--verify-memory", str(40 / 1024)], capfd)
    assert code == 0 and not err and "40/40 StridedSlice rewritten, verified" in out, (out, err)


def test_model_outputs_over_the_budget_run_at_size_1():
    """The as-shipped run holds every model output at once: when they do not fit at N=3, the
    symbolic dims go down to 1 (where shapes stay valid) for the in-place and the as-shipped runs."""
    rep = api.convert(_slice_then(x_shape=("N", 4096), end=4095, out_shape=("N", 4094)), verify_memory=60 * 1024).report
    assert rep.inplace_sizes == {"N": 1} and rep.verified, rep.model_checks


def test_a_wrong_rewrite_is_caught_in_its_piece(monkeypatch):
    """The pieces check like the whole run does: a rewrite whose output differs from the
    reference fails -- here each slice's output is a graph output of pure data movement, so its
    piece computes the reference from the tensor that reached it and the as-shipped run's
    output is compared with it (inplace.start_inplace, ``defer``)."""
    from onnx_slice_tools.semantics.spec import from_index_expr
    from onnx_slice_tools.verification import records
    real = records._reference_plan

    def wrong_for_ss33(r, got, make_plan):
        settled, plan, where = real(r, got, make_plan)
        if r.node == "ss33" and plan is not None:  # the reference of another slice: they disagree
            plan = make_plan(from_index_expr("x[:, 1:2]"), plan.input_shape)
        return settled, plan, where
    monkeypatch.setattr(records, "_reference_plan", wrong_for_ss33)
    rep = api.convert(_many_slices(40), verify_memory=40 * 1024).report
    assert rep.model_checks["model_run"].startswith("failed: node 'ss33': as shipped: output 'y33'"), \
        rep.model_checks
    assert rep.model_checks["shipped"].startswith("failed: ") and rep.verdict == "failed"
    assert [rep.inplace_of(i)[:6] for i in range(40)].count("failed") == 1


def _slice_output_model():
    """x[:, ::2] of x [N, 6] -> y, a graph output (pure data movement)."""
    inits = [helper.make_tensor("b", T.INT32, [2], [0, 0]), helper.make_tensor("e", T.INT32, [2], [0, 0]),
             helper.make_tensor("s", T.INT32, [2], [1, 2])]
    ss = helper.make_node("StridedSlice", ["x", "b", "e", "s"], ["y"], domain=TF_DOMAIN, name="ss",
                          begin_mask=3, end_mask=3, ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0)
    return _model([ss], [helper.make_tensor_value_info("x", T.FLOAT, ["N", 6])],
                  [helper.make_tensor_value_info("y", T.FLOAT, None)], inits)


def test_a_tampered_slice_whose_output_ships_is_caught_by_the_as_shipped_run():
    """A rewrite whose output is a graph output is not run in the tapped session (defer): its
    reference output, from the tensor that reached it, is what the as-shipped run must give
    bitwise.  A converted model whose slice is wrong fails there, naming the node."""
    from onnx_slice_tools.verification.inplace import run_inplace, start_inplace
    result = api.convert(_slice_output_model())
    assert result.report.verified and result.report.model_checks["model_run"] == "passed"
    bad = onnx.ModelProto()
    bad.CopyFrom(result.model)
    steps = next(t for t in bad.graph.initializer if list(onnx.numpy_helper.to_array(t)) == [2])
    steps.CopyFrom(onnx.numpy_helper.from_array(np.array([3], dtype=np.int64), steps.name))
    records = result.report.records
    common = dict(budget=Budget(2 ** 28))
    # without defer the tapped run checks it itself (bitwise, in that run)
    assert run_inplace(bad, records, **common).status.startswith("failed: node 'ss': input [3, 6]: shape [3, 2]")
    run = start_inplace(bad, records, defer=True, **common)
    first = run.result()
    assert first.status == "skipped: 1 rewrites await the as-shipped run" and run.awaiting == {"y": records[0]}
    compared: dict = {}
    checks = shipped.shipped_checks(bad, run.checked, compared=compared, **common)
    assert checks["shipped"].startswith("failed: onnxruntime (default configuration) disagrees with the checked "
                                        "run: output 'y': shape"), checks
    settled = run.settle(compared)
    assert settled.status.startswith("failed: node 'ss': as shipped: output 'y': shape"), settled.status
    assert settled.inplace[0].startswith("failed: as shipped")
    # the as-shipped run did not compare (e.g. over the budget): the rewrite is not verified
    run = start_inplace(bad, records, defer=True, **common)
    run.result()
    assert run.settle(None, "needs ~1 GiB").status == "skipped: left to the as-shipped run, which did not compare " \
        "(needs ~1 GiB)"


def test_every_rewrite_deferred_builds_no_in_place_session(monkeypatch):
    """Every rewrite left to the as-shipped run, each reading a graph input: the tapped copy
    computes nothing, so no onnxruntime session is built for it (its run gives back the fed
    inputs); the reference outputs still come from those tensors, and a tampered slice still
    fails in the as-shipped run."""
    from onnx_slice_tools.verification import inplace
    from onnx_slice_tools.verification.inplace import start_inplace

    def no_session(model):
        raise AssertionError("an in-place session was built")
    result = api.convert(_slice_output_model())
    monkeypatch.setattr(inplace, "_make_session", no_session)
    records, common = result.report.records, dict(budget=Budget(2 ** 28))
    run = start_inplace(result.model, records, defer=True, **common)
    assert run.result().status == "skipped: 1 rewrites await the as-shipped run"
    compared: dict = {}
    checks = shipped.shipped_checks(result.model, run.checked, compared=compared, **common)
    assert checks["shipped"] == "passed", checks
    assert run.settle(compared).status == "passed"
    x = run.checked.feeds["x"]
    assert np.array_equal(run.checked.outputs["y"].value(), x[:, ::2])
    bad = onnx.ModelProto()
    bad.CopyFrom(result.model)
    steps = next(t for t in bad.graph.initializer if list(onnx.numpy_helper.to_array(t)) == [2])
    steps.CopyFrom(onnx.numpy_helper.from_array(np.array([3], dtype=np.int64), steps.name))
    run = start_inplace(bad, records, defer=True, **common)
    run.result()
    compared = {}
    shipped.shipped_checks(bad, run.checked, compared=compared, **common)
    assert run.settle(compared).status.startswith("failed: node 'ss': as shipped: output 'y': shape")


def test_too_small_a_budget_for_one_rewrite_is_skipped_with_the_reason():
    rep = api.convert(_many_slices(8), verify_memory=4 * 1024).report
    assert rep.model_checks["model_run"].startswith("skipped: needs ~"), rep.model_checks
    assert rep.model_checks["shipped"].startswith("skipped: "), rep.model_checks
    assert rep.verdict.startswith("unverified (model_run skipped (needs ~") and not rep.verified


def test_a_report_without_the_as_shipped_run_is_never_verified():
    """The verdict itself requires the as-shipped check: a report whose other checks all passed
    but which holds no ``shipped`` status is unverified, and failed with ``strict``."""
    from onnx_slice_tools.api import Report
    rep = Report("m.onnx", verify=True)
    rep.model_checks.update({"structure": "passed", "checker": "passed"})
    assert rep.verdict.startswith("unverified (shipped skipped")
    rep.strict = True
    assert rep.verdict == "failed"
    rep.strict = False
    rep.model_checks["shipped"] = "passed"
    assert rep.verdict in ("verified", "nothing to rewrite")


def test_the_session_built_ahead_serves_only_its_own_bytes():
    """shipped.SessionAhead: its session for exactly the bytes it was built from; other bytes get
    None (the as-shipped run then builds its own); a loader error is raised when taken."""
    from onnx_slice_tools.verification.shipped import SessionAhead
    data = api.convert(_slice_then()).model.SerializeToString()
    ahead = SessionAhead(data)
    assert ahead.take(data + b"") is not None
    assert SessionAhead(data).take(api.convert(_slice_then(end=4)).model.SerializeToString()) is None
    broken = SessionAhead(b"not a model")
    with pytest.raises(Exception):
        broken.take(b"not a model")
    broken.close()


def test_the_as_shipped_run_uses_the_session_built_ahead(monkeypatch):
    """When the cleanup provably changes nothing and the process has CPUs to spare the default
    session is built once, ahead; its verdict is the one the as-shipped run gives (the
    optimiser-bug model still fails there).  With fewer CPUs it is built when the run needs it."""
    from onnx_slice_tools.verification import shipped
    monkeypatch.setattr(api, "available_cpus", lambda: 8)
    made = []
    real = shipped.SessionAhead.__init__

    def spy(self, data):
        made.append(data)
        real(self, data)
    monkeypatch.setattr(shipped.SessionAhead, "__init__", spy)
    clean = _slice_then()
    kept = [t for t in clean.graph.initializer if t.name in ("b", "e", "s")]
    del clean.graph.initializer[:]
    clean.graph.initializer.extend(kept)
    result = api.convert(clean)
    assert made == [result.model.SerializeToString()]
    assert result.report.verdict == "verified", result.report.verdict
    assert result.report.cleanup["changed"] is False
    made.clear()
    result = api.convert(_optimiser_bug_model())  # (its cleanup may change it: the session is made after it)
    assert made == [] and result.report.verdict == "failed"
    assert "shipped" in result.report.problem(), result.report.problem()
    monkeypatch.setattr(api, "available_cpus", lambda: 2)
    result = api.convert(clean)
    assert made == [] and result.report.verdict == "verified", result.report.verdict
