"""Per-rewrite checks the as-shipped run settles (verification/settled_checks.py): left to it
only when its one bitwise comparison covers every size the check would try, "passed" only once
it compared, and run after all when it did not; a wrong lowering still fails."""

from __future__ import annotations

import json

from onnx import TensorProto as T
from onnx import helper

from onnx_slice_tools import api
from onnx_slice_tools.frontends.tfexport import TF_DOMAIN
from onnx_slice_tools.lowering.lower import SLICE, Lowering, Op
from onnx_slice_tools.rewrite import core
from onnx_slice_tools.verification import shipped
from onnx_slice_tools.verification.checks import kind
from onnx_slice_tools.verification.settled_checks import AWAITS


def _slices(specs, x_shape=("B", 16, 16, 4)):
    """x -> one TF StridedSlice per (begin, end, strides, begin_mask, end_mask), each a graph output."""
    nodes, inits, outputs = [], [], []
    for k, (b, e, s, bm, em) in enumerate(specs):
        for nm, vals in (("b", b), ("e", e), ("s", s)):
            inits.append(helper.make_tensor(f"{nm}{k}", T.INT32, [len(vals)], vals))
        nodes.append(helper.make_node("StridedSlice", ["x", f"b{k}", f"e{k}", f"s{k}"], [f"y{k}"], name=f"ss{k}",
                                      domain=TF_DOMAIN, begin_mask=bm, end_mask=em))
        outputs.append(helper.make_tensor_value_info(f"y{k}", T.FLOAT, None))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, list(x_shape))], outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TF_DOMAIN, 1)])
    m.ir_version = 8
    return m


#: x[:, 2:9, 1:13:2] and x[:, 0:4, 3:5]: slices of axes 1 and 2 only (B and the last axis size-free)
DISTINCT = [([0, 2, 1], [0, 9, 13], [1, 1, 2], 1, 1), ([0, 0, 3], [0, 4, 5], [1, 1, 1], 1, 1)]
#: x[1:-1]: its Slice reads the symbolic B (the result's length is B - 2)
READS_B = ([1], [-1], [1], 0, 0)


def _as_shipped(status) -> bool:
    return kind(status) == "passed" and "as shipped" in str(status)


def test_a_check_the_as_shipped_run_covers_is_settled_by_it_and_said_so(tmp_path):
    """Each distinct slice is settled by the as-shipped run (no per-rewrite session), its check
    says so, with the one shape it ran at; report.json says the same; the verdict is verified."""
    result = api.convert(_slices(DISTINCT))
    rep = result.report
    assert rep.verified and rep.signatures_checked == 0, rep.model_checks
    assert rep.awaiting_checks == {}
    for i, r in enumerate(rep.records):
        check = rep.check_of(i)
        assert _as_shipped(check.onnxruntime), check
        assert _as_shipped(rep.inplace_of(i)), rep.inplace_of(i)
        assert kind(check.shape_inference) == "passed" and check.inferred_shape == ("B",) + r.output_shape[1:]
        (shape,) = check.tried_shapes
        assert shape[1:] == (16, 16, 4) and shape[0] >= 1
    path = tmp_path / "report.json"
    path.write_text(rep.to_json())
    rewrites = json.loads(path.read_text())["rewrites"]
    assert all(w["checks"]["onnxruntime"].startswith("passed (as shipped: ") for w in rewrites)
    assert all(w["inplace_check"].startswith("passed (as shipped") for w in rewrites)


def test_a_spec_that_reads_a_symbolic_dim_keeps_its_check_at_several_sizes():
    """``x[1:-1]`` on ``[B, ...]``: one run at one B proves nothing of the others, so its check
    runs as before (several B) beside the settled ones."""
    rep = api.convert(_slices([*DISTINCT, READS_B])).report
    assert rep.verified and rep.signatures_checked == 1
    check = rep.check_of(2)
    assert check.onnxruntime == "passed" and len({s[0] for s in check.tried_shapes}) > 1, check
    assert [_as_shipped(rep.check_of(i).onnxruntime) for i in range(3)] == [True, True, False]


def test_a_planted_wrong_lowering_still_fails(monkeypatch):
    """A lowering of ``x[:, 2:9, 1:13:2]`` planted one row off (the same output shape): the
    as-shipped run finds it, and its per-rewrite check then runs and fails too."""
    real = core.lower

    def planted(plan, *a, **k):
        low = real(plan, *a, **k)
        if plan.spec.begin[1:] == (2, 1):
            return Lowering(plan, (Op(SLICE, axes=(1, 2), starts=(3, 1), ends=(10, 13), steps=(1, 2)),))
        return low
    monkeypatch.setattr(core, "lower", planted)
    rep = api.convert(_slices(DISTINCT)).report
    assert rep.verdict == "failed" and not rep.awaiting_checks
    assert kind(rep.inplace_of(0)) == "failed" and "as shipped" in rep.inplace_of(0)
    assert rep.check_of(0).onnxruntime.startswith("failed: "), rep.check_of(0)
    assert _as_shipped(rep.check_of(1).onnxruntime)
    assert rep.model_checks["shipped"].startswith("failed: ")


def test_an_as_shipped_run_that_does_not_compare_leaves_the_checks_to_run(monkeypatch):
    """The as-shipped run skipped after the checks were left to it (here: its memory estimate):
    the per-rewrite checks run then, at their own sizes; the verdict is unverified (the
    as-shipped run's skip), never verified, and no check awaits."""
    real = shipped.run_need
    monkeypatch.setattr(shipped, "run_need", lambda *a, **k: real(*a, **k) + 2 ** 40)
    rep = api.convert(_slices(DISTINCT)).report
    assert rep.model_checks["shipped"].startswith("skipped: ")
    assert rep.verdict.startswith("unverified (") and not rep.verified
    assert rep.signatures_checked == 2 and not rep.awaiting_checks
    for i in range(2):
        check = rep.check_of(i)
        assert check.onnxruntime == "passed" and check.tried_shapes == [(1, 16, 16, 1)], check
        assert check.onnxruntime != AWAITS


def test_a_tiny_memory_budget_never_verifies_an_unproven_check():
    """--verify-memory too small for the runs (2 KiB: every run skipped; 8 KiB: the in-place run
    at B = 1 taps every slice, nothing is left to the as-shipped run): no check awaits, none
    passes as shipped unless the as-shipped run passed, and "verified" only with every check
    passed."""
    for memory, verified in ((2 * 1024, False), (8 * 1024, True)):
        rep = api.convert(_slices(DISTINCT), verify_memory=memory).report
        assert not rep.awaiting_checks and rep.verified == verified, rep.verdict
        for i in range(2):
            status = rep.check_of(i).onnxruntime
            assert status != AWAITS
            assert kind(status) == ("passed" if verified else "skipped"), status
            if _as_shipped(status):
                assert kind(rep.model_checks["shipped"]) == "passed"
        if verified:  # its checks ran at their own sizes
            assert rep.signatures_checked == 2 and rep.check_of(0).tried_shapes == [(1, 16, 16, 1)]


def test_other_runtimes_keep_their_checks():
    """--verify-on with OpenVINO: the as-shipped comparison that settles rewrites is onnxruntime's,
    so every per-rewrite check runs on each runtime."""
    rep = api.convert(_slices(DISTINCT), verify_on="onnxruntime,openvino").report
    assert rep.signatures_checked == 2
    assert all(rep.check_of(i).onnxruntime == "passed" and rep.check_of(i).runtimes.get("openvino") == "passed"
               for i in range(2))


def test_a_model_the_opset_conversion_changes_keeps_its_checks():
    """``--opset`` converts after the checks: what ships is not what the checks would run, so
    every per-rewrite check runs."""
    model = _slices(DISTINCT)
    rep = api.convert(model, opset=18).report
    assert rep.signatures_checked == 2 and all(rep.check_of(i).onnxruntime == "passed" for i in range(2))


def test_the_summary_line_says_which_checks_the_as_shipped_run_settled(tmp_path, capsys):
    """``convert``'s line counts the checks run (x[1:-1]: B is read) and those the as-shipped run
    settled (the two distinct slices), among the rewrites it checked by their output."""
    from onnx_slice_tools.cli.main import main as cli_main
    src, dst = tmp_path / "in.onnx", tmp_path / "out.onnx"
    src.write_bytes(_slices([*DISTINCT, READS_B]).SerializeToString())
    assert cli_main(["convert", str(src), "-o", str(dst)]) == 0
    assert "3/3 StridedSlice rewritten, verified (1 distinct rewrites checked in onnxruntime, 3 by their output " \
           "in the as-shipped run (2 of them needing no per-rewrite check: that run tries every size the check " \
           "would)), and the saved model run in onnxruntime's default configuration" in capsys.readouterr().out


def test_a_planted_wrong_reference_among_many_deferred_is_caught_and_named(monkeypatch):
    """Thirty distinct slices, every one left to the as-shipped run (their references made
    one pass, inplace._defer_all): one whose reference disagrees with what the saved model
    computes fails, by name, and only it; its per-rewrite check is not settled by that run
    (settled_checks.settle_checks hands it back, and it runs)."""
    from onnx_slice_tools.semantics.spec import from_index_expr
    from onnx_slice_tools.verification import records
    specs = [([0, k % 7, k % 5], [0, 9 + k % 4, 13], [1, 1, 1 + k % 3], 1, 1) for k in range(30)]
    real = records._reference_plan

    def wrong_for_ss17(r, got, make_plan):
        settled, plan, where = real(r, got, make_plan)
        if r.node == "ss17" and plan is not None:  # another slice's reference: they disagree
            plan = make_plan(from_index_expr("x[:, 1:2]"), plan.input_shape)
        return settled, plan, where
    monkeypatch.setattr(records, "_reference_plan", wrong_for_ss17)
    rep = api.convert(_slices(specs)).report
    assert rep.model_checks["model_run"].startswith("failed: node 'ss17': as shipped: output 'y17'"), rep.model_checks
    assert rep.verdict == "failed"
    failed_ones = [rep.records[i].node for i in range(30) if kind(rep.inplace_of(i)) == "failed"]
    assert failed_ones == ["ss17"], rep.record_inplace
    assert all(_as_shipped(rep.inplace_of(i)) for i in range(30) if i != 17)
    assert not _as_shipped(rep.record_checks[17].onnxruntime)  # (its own check ran: not settled by that run)


def test_settling_by_shape_class_says_what_each_record_alone_would():
    """settle_checks asks coverage once per (declared input shape, reached shape): on random
    records -- symbolic and known dims, reached shapes that match or not, empty axes, statuses
    other than the as-shipped pass, outputs with no reference -- each record is settled, with
    the same status text and tried shape, or handed back exactly as the rule for one record says
    (module doc: every known dim as declared, every other one non-empty, the as-shipped pass)."""
    import types

    import numpy as np

    from onnx_slice_tools.verification.inplace import AS_SHIPPED, CheckedRun
    from onnx_slice_tools.verification.lowerings import CheckResult
    from onnx_slice_tools.verification.records import Reference
    from onnx_slice_tools.verification.settled_checks import settle_checks

    rng = np.random.default_rng(3)
    tensors = [np.zeros(s, np.float32) for s in [(3, 4, 5), (1, 4, 5), (0, 4, 5), (3, 4, 6), (3, 4)]]
    declared = [("B", 4, 5), (3, 4, 5), ("B", 4, "W"), (None, 4, 5), ("B", 4)]
    records, outputs, inplace, awaiting = [], {}, {}, {}
    for i in range(300):
        r = types.SimpleNamespace(output_name=f"y{i}", input_shape=declared[int(rng.integers(len(declared)))])
        records.append(r)
        x = tensors[int(rng.integers(len(tensors)))]
        if rng.random() < 0.9:
            outputs[r.output_name] = Reference(lambda copy, x=x: x, x)
        inplace[i] = AS_SHIPPED if rng.random() < 0.85 else "skipped: awaits the as-shipped run"
        awaiting[i] = CheckResult(onnxruntime=AWAITS)
    checked = CheckedRun(feeds={}, outputs=outputs, elems={}, shapes={})
    left = settle_checks(records, awaiting, inplace, checked)
    for i, r in enumerate(records):
        ref = outputs.get(r.output_name)
        reached = None if ref is None else tuple(ref.x.shape)
        covers = reached is not None and inplace[i] == AS_SHIPPED and len(reached) == len(r.input_shape) and all(
            s == d if isinstance(d, int) else s >= 1 for s, d in zip(reached, r.input_shape))
        assert (i not in left) == covers, (i, r.input_shape, reached)
        if covers:
            free = any(not isinstance(d, int) for d in r.input_shape)
            assert awaiting[i].onnxruntime == "passed (as shipped: the saved model's default run gave its reference " \
                f"output bitwise at input {list(reached)}" + ("; the check's other sizes are of axes nothing reads"
                                                             if free else "") + ")"
            assert awaiting[i].tried_shapes == [reached]
        else:
            assert awaiting[i].onnxruntime == AWAITS
    assert 0 < len(left) < len(records)
