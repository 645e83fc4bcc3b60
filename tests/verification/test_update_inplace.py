"""The slice-update family checked in place (verification/records.py, ``UpdateTaps``): each
rewrite's output in the converted model's own run, in the main graph, an If branch or a Loop
body (every iteration; taps stacked, or carried when a tapped tensor grows), against
semantics/update.py's reference on the tensors that really reached it -- and planted wrong
lowerings caught there, which the in-place run skipped before."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnx_slice_tools import convert
from onnx_slice_tools.frontends.tfexport import TF_DOMAIN
from onnx_slice_tools.lowering import update as lowering
from onnx_slice_tools.rewrite.updates import rewrite_updates
from onnx_slice_tools.verification.inplace import run_inplace

F, I64, I32 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32


def _const(name, values, elem=I64, dims=None):
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(
        name, elem, [len(values)] if dims is None else dims, values))


def _model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TF_DOMAIN, 1)])
    model.ir_version = 8
    return model


def _loop_model(grow: bool, trips: int = 3):
    """A decode-loop sketch: a Loop of ``trips`` iterations writing ``new + i`` into the cache
    [1, 8, 4] at start ``5 i - 2`` (-2, 3, 8: clamped to 0 and to 7 at both ends) with a raw
    ``XlaDynamicUpdateSlice``, and slicing a second state s[:, ::-1] (a StridedSlice) -- which,
    with ``grow``, doubles every iteration, so the Loop's taps cannot stack and are carried."""
    body_nodes = [
        _const("five", [5], dims=[]), _const("two", [2], dims=[]), _const("zero", [0], I32),
        helper.make_node("Mul", ["i", "five"], ["i5"]), helper.make_node("Sub", ["i5", "two"], ["start64"]),
        helper.make_node("Cast", ["start64"], ["start32"], to=I32),
        helper.make_node("Unsqueeze", ["start32", "ax0"], ["start"]),
        helper.make_node("Concat", ["zero", "start", "zero"], ["idx"], axis=0),
        helper.make_node("Cast", ["i"], ["fi"], to=F),
        helper.make_node("Add", ["new", "fi"], ["u"]),
        helper.make_node("XlaDynamicUpdateSlice", ["c_in", "u", "idx"], ["c_out"], name="dus"),
        _const("b", [0, 0]), _const("e", [0, 0]), _const("st", [1, -1]),
        helper.make_node("StridedSlice", ["s_in", "b", "e", "st"], ["r"], name="ss", domain=TF_DOMAIN,
                         begin_mask=3, end_mask=3, ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0),
        (helper.make_node("Concat", ["r", "r"], ["s_out"], axis=0) if grow
         else helper.make_node("Relu", ["r"], ["s_out"])),
        helper.make_node("Identity", ["cond_in"], ["cond_out"]),
    ]
    body = helper.make_graph(body_nodes, "body", [
        helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
        helper.make_tensor_value_info("c_in", F, [1, 8, 4]), helper.make_tensor_value_info("s_in", F, None)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("c_out", F, [1, 8, 4]), helper.make_tensor_value_info("s_out", F, None)],
        initializer=[helper.make_tensor("ax0", I64, [1], [0])])
    nodes = [_const("M", [trips], dims=[]),
             helper.make_node("Loop", ["M", "", "cache", "x"], ["cache_out", "y"], name="loop", body=body)]
    return _model(nodes, [helper.make_tensor_value_info("cache", F, [1, 8, 4]),
                          helper.make_tensor_value_info("new", F, [1, 1, 4]),
                          helper.make_tensor_value_info("x", F, [2, 4])],
                  [helper.make_tensor_value_info("cache_out", F, [1, 8, 4]),
                   helper.make_tensor_value_info("y", F, None)])


def _rewritten(model):
    """``model`` with its slice updates rewritten (as frontends/updates.py does), and their records."""
    records = rewrite_updates(model)
    return model, records


def _convert(model, **options):
    model, records = _rewritten(model)
    return convert(model, updates=records, **options).report


@pytest.mark.parametrize("grow", [False, True], ids=["stacked", "carried"])
def test_a_cache_write_in_a_loop_body_is_checked_in_place_every_iteration(grow):
    rep = _convert(_loop_model(grow))
    assert [u.graph for u in rep.updates] == ["main > Loop 'loop'.body"]
    assert rep.update_inplace == {0: "passed"}, rep.statuses()
    assert rep.inplace_of(0) == "passed" and rep.model_checks["model_run"] == "passed", rep.statuses()
    entry = rep.to_dict()["slice_updates"][0]
    assert entry["op_type"] == "XlaDynamicUpdateSlice" and entry["inplace_check"] == "passed"


def _wrong_clamp(real):
    """Starts clamped to [0, dim - update - 1]: the last position is never written."""
    def clamped(b, idx, elem, axes, rank, hi, opset):
        return real(b, idx, elem, axes, rank, [h - 1 for h in hi], opset)
    return clamped


def _off_by_one(real):
    """The start read one past the index (then clamped): every write lands one row late."""
    def clamped(b, idx, elem, axes, rank, hi, opset):
        dt = np.int32 if elem == I32 else np.int64
        return real(b, b.node("Add", [idx, b.const(np.ones(rank, dt), "one")]), elem, axes, rank, hi, opset)
    return clamped


@pytest.mark.parametrize("grow", [False, True], ids=["stacked", "carried"])
@pytest.mark.parametrize("plant, first", [(_wrong_clamp, 2), (_off_by_one, 1)], ids=["wrong-clamp", "off-by-one"])
def test_a_planted_wrong_cache_write_in_a_loop_body_fails_in_place(monkeypatch, grow, plant, first):
    """A wrong lowering of the cache write (no per-rewrite check here: rewrite_updates alone) is
    caught by the in-place run at the first iteration it differs (the wrong clamp: iteration 2,
    whose start 8 must clamp to 7; off by one: iteration 1, start -2 lands on 0 either way), with
    taps stacked and carried; the verdict fails."""
    monkeypatch.setattr(lowering, "_clamped", plant(lowering._clamped))
    rep = _convert(_loop_model(grow))
    status = rep.update_inplace[0]
    assert status.startswith(f"failed: iteration {first}: ") and "values differ" in status, rep.statuses()
    assert rep.model_checks["model_run"].startswith(f"failed: node 'dus': iteration {first}: ")
    assert rep.inplace_of(0) == "passed" and rep.verdict == "failed"


def test_the_wrong_lowerings_are_right_where_they_are_not_reached(monkeypatch):
    """The same wrong clamp in a Loop of 2 iterations (starts -2, 3: the last position is never
    the start) computes what TensorFlow would: the check judges what reached the rewrite."""
    monkeypatch.setattr(lowering, "_clamped", _wrong_clamp(lowering._clamped))
    rep = _convert(_loop_model(False, trips=2))
    assert rep.update_inplace == {0: "passed"}, rep.statuses()


def _main_model(gelu: bool = False):
    """A cache write in the main graph, its output a graph output of pure data movement (left to
    the as-shipped run), at a run-time start; with ``gelu`` a TFLite GELU (tanh form) of the cache."""
    nodes = [helper.make_node("XlaDynamicUpdateSlice", ["cache", "new", "idx"], ["cache_out"], name="dus")]
    outputs = [helper.make_tensor_value_info("cache_out", F, [1, 8, 4])]
    if gelu:
        nodes.append(helper.make_node("TFL_GELU", ["cache"], ["g"], name="gelu", approximate=1))
        outputs.append(helper.make_tensor_value_info("g", F, [1, 8, 4]))
    return _model(nodes, [helper.make_tensor_value_info("cache", F, [1, 8, 4]),
                          helper.make_tensor_value_info("new", F, [1, 1, 4]),
                          helper.make_tensor_value_info("idx", I64, [3])], outputs)


def test_a_main_graph_cache_write_is_checked_in_place_and_one_that_ships_as_shipped():
    """Only slice updates in the model (no StridedSlice): the in-place run still runs.  With the
    cleanup (which may change the model: its check runs the tapped session) the write is checked
    in the tapped run; without it, its output ships as pure data movement and the as-shipped run
    settles it (bitwise), as for a StridedSlice."""
    rep = _convert(_main_model())
    assert rep.update_inplace == {0: "passed"} and rep.verdict == "verified", rep.statuses()
    rep = _convert(_main_model(), cleanup=False)
    assert rep.update_inplace[0].startswith("passed (as shipped: "), rep.statuses()
    assert rep.model_checks["model_run"] == "passed" and rep.verdict == "verified", rep.statuses()


@pytest.mark.parametrize("cleanup", [True, False])
def test_a_planted_wrong_main_graph_cache_write_fails(monkeypatch, cleanup):
    monkeypatch.setattr(lowering, "_clamped", _off_by_one(lowering._clamped))
    rep = _convert(_main_model(), cleanup=cleanup)
    how = "" if cleanup else "as shipped: "
    assert rep.update_inplace[0].startswith(f"failed: {how}"), rep.statuses()
    assert rep.model_checks["model_run"].startswith(f"failed: node 'dus': {how}") and rep.verdict == "failed"


def test_gelu_is_checked_in_place_under_the_tolerance_rule(monkeypatch):
    """GELU's output is float arithmetic: checked in the tapped run under the product's tolerance
    against its float64 reference (never bitwise, never left to the as-shipped run); the other
    form's formula (Erf for tanh) is within it; a Relu planted for it is caught."""
    rep = _convert(_main_model(gelu=True))
    ops = {u.node: i for i, u in enumerate(rep.updates)}
    assert rep.update_inplace[ops["gelu"]] == "passed", rep.statuses()
    real = lowering.lower_gelu
    monkeypatch.setattr(lowering, "lower_gelu", lambda *a, approximate, **k: real(*a, approximate=False, **k))
    rep = _convert(_main_model(gelu=True))
    assert rep.update_inplace[ops["gelu"]] == "passed", rep.statuses()

    def relu(x, out, **_):
        low = lowering.OpLowering("relu")
        low.nodes.append(helper.make_node("Relu", [x], [out], name=f"{out}__Relu1"))
        return low
    monkeypatch.setattr(lowering, "lower_gelu", relu)
    rep = _convert(_main_model(gelu=True))
    assert rep.update_inplace[ops["gelu"]].startswith("failed: cache [1, 8, 4]: "), rep.statuses()
    assert rep.verdict == "failed"


def test_a_reference_that_raises_on_what_reached_it_is_a_failure():
    """The tensors that reached a rewrite are ones the framework rejects (an update larger than
    the input): the original fails there, so a converted model that ran is a failure."""
    from types import SimpleNamespace

    from onnx_slice_tools.semantics.update import update_plan
    from onnx_slice_tools.verification.records import UpdateTaps
    record = SimpleNamespace(node="dus", graph="main", op_type="XlaDynamicUpdateSlice", inputs=["x", "u", "i"],
                             output="y", elem_types=[F, F, I64], params={"plan": update_plan(("N", 4), (1, 4))})
    taps = UpdateTaps(record)
    assert list(taps.tensors) == ["x", "u", "i", "y"]
    got = {"x": np.zeros((1, 4), np.float32), "u": np.ones((2, 4), np.float32), "i": np.zeros(2, np.int64),
           "y": np.zeros((1, 4), np.float32)}
    status = taps.check(got)
    assert status.startswith("failed: x [1, 4], u [2, 4], i [0, 0]: the original raises (") and \
        status.endswith("the converted model ran"), status
    del got["y"]
    assert taps.check(got) == "skipped: the in-place run could not expose 'y'"


def test_taps_leave_the_converted_model_untouched():
    model, records = _rewritten(_loop_model(True))
    before = onnx.ModelProto()
    before.CopyFrom(model)
    result = convert(model, updates=records)
    loop = next(n for n in result.model.graph.node if n.op_type == "Loop")
    assert list(loop.output) == ["cache_out", "y"]
    run = run_inplace(result.model, records, memory_budget=2 ** 28, weight_bytes=0, load_weights=lambda p: p)
    assert run.inplace == {0: "passed"}, run.status
