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
from onnx_slice_tools.verification import update_checks
from onnx_slice_tools.verification.checks import PASSED
from onnx_slice_tools.verification.budget import Budget
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


def _loop_model(grow: bool, trips: int = 3, condition: bool = False):
    """A decode-loop sketch: a Loop of ``trips`` iterations writing ``new + i`` into the cache
    [1, 8, 4] at start ``5 i - 2`` (-2, 3, 8: clamped to 0 and to 7 at both ends) with a raw
    ``XlaDynamicUpdateSlice``, and slicing a second state s[:, ::-1] (a StridedSlice) -- which,
    with ``grow``, doubles every iteration, so the Loop's taps cannot stack and are carried.
    ``condition``: no trip count, the Loop runs while ``i < trips - 1`` (what tf2onnx makes of a
    ``tf.while_loop``): its taps are carried from the start, within the memory budget."""
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
        (helper.make_node("Less", ["i", "last"], ["cond_out"]) if condition
         else helper.make_node("Identity", ["cond_in"], ["cond_out"])),
    ]
    body = helper.make_graph(body_nodes, "body", [
        helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
        helper.make_tensor_value_info("c_in", F, [1, 8, 4]), helper.make_tensor_value_info("s_in", F, None)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("c_out", F, [1, 8, 4]), helper.make_tensor_value_info("s_out", F, None)],
        initializer=[helper.make_tensor("ax0", I64, [1], [0]), helper.make_tensor("last", I64, [], [trips - 1])])
    nodes = [_const("M", [trips], dims=[]), _const("go", [True], TensorProto.BOOL, dims=[]),
             helper.make_node("Loop", ["" if condition else "M", "go", "cache", "x"], ["cache_out", "y"], name="loop",
                              body=body)]
    return _model(nodes, [helper.make_tensor_value_info("cache", F, [1, 8, 4]),
                          helper.make_tensor_value_info("new", F, [1, 1, 4]),
                          helper.make_tensor_value_info("x", F, [2, 4])],
                  [helper.make_tensor_value_info("cache_out", F, [1, 8, 4]),
                   helper.make_tensor_value_info("y", F, None)])


def _convert(model, **options):
    """``model`` (raw slice updates) converted: the pipeline rewrites the family first
    (api._slice_updates) and checks it in place with the StridedSlice rewrites."""
    return convert(model, **options).report


def _blind(monkeypatch):
    """The per-rewrite check passes whatever the lowering (a planted bug must then be caught in
    place, by the converted model's own run)."""
    monkeypatch.setattr(update_checks, "check_records", lambda records, *budget: [PASSED] * len(records))


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
    """A wrong lowering of the cache write (the per-rewrite check blinded: :func:`_blind`) is
    caught by the in-place run at the first iteration it differs (the wrong clamp: iteration 2,
    whose start 8 must clamp to 7; off by one: iteration 1, start -2 lands on 0 either way), with
    taps stacked and carried; the verdict fails."""
    monkeypatch.setattr(lowering, "_clamped", plant(lowering._clamped))
    _blind(monkeypatch)
    rep = _convert(_loop_model(grow))
    status = rep.update_inplace[0]
    assert status.startswith(f"failed: iteration {first}: ") and "values differ" in status, rep.statuses()
    assert rep.model_checks["model_run"].startswith(f"failed: node 'dus': iteration {first}: ")
    assert rep.inplace_of(0) == "passed" and rep.verdict == "failed"


def test_the_wrong_lowerings_are_right_where_they_are_not_reached(monkeypatch):
    """The same wrong clamp in a Loop of 2 iterations (starts -2, 3: the last position is never
    the start) computes what TensorFlow would: the check judges what reached the rewrite."""
    monkeypatch.setattr(lowering, "_clamped", _wrong_clamp(lowering._clamped))
    _blind(monkeypatch)
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


def test_a_main_graph_cache_write_that_ships_is_settled_as_shipped():
    """Only slice updates in the model (no StridedSlice): the in-place run still runs; the
    write's output ships as pure data movement, so the as-shipped run settles it (bitwise), as
    for a StridedSlice (the reference from the tensors that reached it in the tapped run)."""
    rep = _convert(_main_model())
    assert rep.update_inplace[0].startswith("passed (as shipped: "), rep.statuses()
    assert rep.model_checks["model_run"] == "passed" and rep.verdict == "verified", rep.statuses()


@pytest.mark.parametrize("cleanup", [True, False])
def test_a_planted_wrong_main_graph_cache_write_fails_as_shipped(monkeypatch, cleanup):
    monkeypatch.setattr(lowering, "_clamped", _off_by_one(lowering._clamped))
    _blind(monkeypatch)
    rep = _convert(_main_model(), cleanup=cleanup)
    assert rep.update_inplace[0].startswith("failed: as shipped: "), rep.statuses()
    assert rep.model_checks["model_run"].startswith("failed: node 'dus': as shipped: ") and rep.verdict == "failed"


def test_gelu_is_checked_in_place_under_the_tolerance_rule(monkeypatch):
    """GELU's output is float arithmetic: checked in the tapped run under the product's tolerance
    against its float64 reference (never bitwise, never left to the as-shipped run); the other
    form's formula (Erf for tanh) is within it; a Relu planted for it is caught."""
    rep = _convert(_main_model(gelu=True))
    ops = {u.node: i for i, u in enumerate(rep.updates)}
    assert rep.update_inplace[ops["gelu"]] == "passed", rep.statuses()
    real = lowering.lower_gelu
    monkeypatch.setattr(lowering, "lower_gelu", lambda *a, approximate, **k: real(*a, approximate=False, **k))
    _blind(monkeypatch)
    rep = _convert(_main_model(gelu=True))
    assert rep.update_inplace[ops["gelu"]] == "passed", rep.statuses()

    def relu(x, out, **_):
        low = lowering.OpLowering("relu")
        low.nodes.append(helper.make_node("Relu", [x], [out], name=f"{out}__Relu1"))
        return low
    monkeypatch.setattr(lowering, "lower_gelu", relu)
    _blind(monkeypatch)
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
    model = _loop_model(True)
    before = onnx.ModelProto()
    before.CopyFrom(model)
    result = convert(model)
    assert model == before  # (the caller's model: the pipeline rewrites a copy)
    loop = next(n for n in result.model.graph.node if n.op_type == "Loop")
    assert list(loop.output) == ["cache_out", "y"]
    run = run_inplace(result.model, result.report.updates, budget=Budget(2 ** 28))
    assert run.inplace == {0: "passed"}, run.status


def test_loop_taps_count_against_the_memory_budget():
    """Taps through a Loop hold every iteration's tensors (a KV cache per iteration): counted
    per iteration times the trip count (here the constant 3) against ``--verify-memory``; over
    it the in-place run is skipped naming its need and the option, never run past the budget."""
    model = _loop_model(False)
    rep = convert(model, verify_memory=1500).report
    status = rep.model_checks["model_run"]
    assert status.startswith("skipped: needs ~") and "(--verify-memory)" in status, status
    assert rep.update_inplace[0] == status and rep.verdict.startswith("unverified ("), rep.statuses()
    model = _loop_model(False)
    assert convert(model, verify_memory=4000).report.update_inplace == {0: "passed"}


@pytest.mark.parametrize("grow", [False, True], ids=["fixed", "growing"])
def test_a_loop_run_by_its_condition_is_tapped_within_the_budget(grow):
    """No trip count (a tf.while_loop): the iterations are not known before the run, so the taps
    are carried from the start, each keeping at most its share of the budget.  At the default
    budget every iteration is kept (passed); at a small one only a prefix of the iterations
    fits: the rewrite is checked on those, and says it was not checked on the others (skipped,
    naming the budget), never "passed"; a wrong write inside that prefix still fails."""
    model = _loop_model(grow, condition=True)
    rep = convert(model).report
    assert rep.update_inplace == {0: "passed"} and rep.inplace_of(0) == "passed", rep.statuses()
    model = _loop_model(grow, condition=True)
    rep = convert(model, verify_memory=3500).report
    status = rep.update_inplace[0]
    assert status.startswith("skipped: checked in place on 2 of its Loop's iterations only (passed, the first ones): "
                             "the taps of the others exceed their share of the memory budget (") and \
        status.endswith(", --verify-memory)"), status
    run = rep.model_checks["model_run"]
    assert run.startswith("skipped: ") and "rewrites checked on part of their Loop's iterations only" in run, run
    assert rep.verdict.startswith("unverified ("), rep.statuses()
    model = _loop_model(grow, condition=True)
    status = convert(model, verify_memory=1000).report.update_inplace[0]
    assert status.startswith("skipped: not checked in place: the taps of its Loop's first iteration exceed "), status


def test_a_wrong_write_in_the_iterations_that_fit_still_fails(monkeypatch):
    monkeypatch.setattr(lowering, "_clamped", _off_by_one(lowering._clamped))
    _blind(monkeypatch)
    model = _loop_model(False, condition=True)
    rep = convert(model, verify_memory=3500).report
    assert rep.update_inplace[0].startswith("failed: iteration 1: "), rep.statuses()
    assert rep.verdict == "failed"


def test_capped_carried_taps_keep_a_prefix_of_the_iterations():
    """``taps.carry_through_loop(capped=True)`` keeps whole iterations while they fit the cap, then
    none: the kept ones read back exactly, and the flag says some were dropped."""
    from onnx_slice_tools.verification.taps import cap_name, carry_through_loop, loop_iterations
    from onnx_slice_tools.verification.runtimes import onnxruntime_session
    body = helper.make_graph([helper.make_node("Identity", ["c_in"], ["c_out"]),
                              helper.make_node("Concat", ["s_in", "s_in"], ["s_out"], axis=0)], "body",
                             [helper.make_tensor_value_info("i", I64, []),
                              helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("s_in", F, None)],
                             [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("s_out", F, None)])
    loop = helper.make_node("Loop", ["M", "", "s0"], ["s_final"], name="loop", body=body)
    model = _model([loop], [helper.make_tensor_value_info("M", I64, []), helper.make_tensor_value_info("s0", F, [1, 2])],
                   [helper.make_tensor_value_info("s_final", F, None)])
    g = model.graph
    flat, dims = carry_through_loop(g, g.node[0], g.node[0].attribute[0].g, "s_in", F, capped=True)
    next(t for t in g.initializer if t.name == cap_name(flat)).int64_data[:] = [14]  # 2 + 4 + 8 elements: 3 iterations
    for vi in (flat, dims, f"{flat}_rec"):
        g.output.append(helper.make_empty_tensor_value_info(vi))
    session = onnxruntime_session(model)
    s0 = np.arange(2, dtype=np.float32).reshape(1, 2)
    for m, kept in ((2, 2), (3, 3), (5, 3)):
        got = dict(zip([o.name for o in g.output], session.run(None, {"M": np.array(m, np.int64), "s0": s0})))
        values = loop_iterations(got, flat, {flat: dims})
        assert len(values) == kept and bool(got[f"{flat}_rec"]) == (m == kept)
        for k, v in enumerate(values):
            assert v.tobytes() == np.concatenate([s0] * 2 ** k).tobytes()


def test_every_rewritten_op_has_an_in_place_adapter():
    """The registry covers every op the rewrite makes records of: a new seam (rewrite/updates.py
    SEAMS) without its in-place adapter fails here, not at a user's conversion."""
    from onnx_slice_tools.rewrite.updates import SEAMS
    from onnx_slice_tools.verification.records import REGISTRY
    assert set(SEAMS) <= set(REGISTRY) and {"StridedSlice", "Slice", "Gather"} <= set(REGISTRY)


def _if_model():
    """A cache write in the then-branch of an If on a fed condition (the else branch keeps the cache)."""
    then = helper.make_graph([helper.make_node("XlaDynamicUpdateSlice", ["cache", "new", "idx"], ["t_out"], name="dus")],
                             "then", [], [helper.make_tensor_value_info("t_out", F, [1, 8, 4])])
    other = helper.make_graph([helper.make_node("Identity", ["cache"], ["e_out"])], "else", [],
                              [helper.make_tensor_value_info("e_out", F, [1, 8, 4])])
    node = helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then, else_branch=other)
    return _model([node], [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                           helper.make_tensor_value_info("cache", F, [1, 8, 4]),
                           helper.make_tensor_value_info("new", F, [1, 1, 4]),
                           helper.make_tensor_value_info("idx", I64, [3])],
                  [helper.make_tensor_value_info("y", F, [1, 8, 4])])


def test_a_cache_write_in_an_if_branch_is_checked_in_place(monkeypatch):
    rep = _convert(_if_model())
    assert rep.updates[0].graph == "main > If 'branch'.then_branch" and rep.update_inplace == {0: "passed"}, \
        rep.statuses()
    monkeypatch.setattr(lowering, "_clamped", _off_by_one(lowering._clamped))
    _blind(monkeypatch)
    rep = _convert(_if_model())
    assert rep.update_inplace[0].startswith("failed: cache [1, 8, 4], new [1, 1, 4], idx ["), rep.statuses()
    assert rep.verdict == "failed"


def test_a_per_rewrite_check_over_the_memory_budget_is_skipped_never_run_past_it(monkeypatch):
    """The check's tensors come from the record's declared shapes: a declared cache of 64 MiB
    under a 16 MiB budget is not drawn (its check says skipped, naming the option; the
    conversion stays unverified, never failed nor verified); under the default budget it runs."""
    def big():
        nodes = [helper.make_node("XlaDynamicUpdateSlice", ["cache", "new", "idx"], ["cache_out"], name="dus")]
        return _model(nodes, [helper.make_tensor_value_info("cache", F, [16, 1024, 1024]),
                              helper.make_tensor_value_info("new", F, [16, 1, 1024]),
                              helper.make_tensor_value_info("idx", I64, [3])],
                      [helper.make_tensor_value_info("cache_out", F, [16, 1024, 1024])])
    ran = []
    real = update_checks.runtimes.onnxruntime_session
    monkeypatch.setattr(update_checks.runtimes, "onnxruntime_session", lambda *a, **k: ran.append(1) or real(*a, **k))
    rep = convert(big(), verify_memory=16 * 2 ** 20).report
    assert ran == [] and rep.updates[0].check.startswith("skipped: needs ~") and "(--verify-memory)" in rep.updates[0].check
    status = rep.model_checks["slice_updates"]
    assert status.startswith("skipped: ") and "1 of 1 not checked against the reference (node 'dus': needs ~" in status
    assert rep.verdict.startswith("unverified ("), rep.statuses()
    assert update_checks.check_record(rep.updates[0]).startswith("passed"), rep.updates[0].check  # the default budget
