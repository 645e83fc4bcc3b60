"""The cleanup as a whole: the passes together on graphs built with onnx.helper (main graph,
If/Loop bodies and model-local functions), the model before and after run in onnxruntime and
compared bitwise; graph outputs keep names and types; a hypothesis test over random
shape-arithmetic graphs; the cleanup's own check and its place in ``convert``.  Each pass's own
tests are beside, in test_<pass>.py; the helpers here are theirs too."""

from __future__ import annotations

import collections

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from onnx_slice_tools.verification.budget import Budget
from onnx_slice_tools.verification.lowerings import DEFAULT_VERIFY_MEMORY
from onnx_slice_tools.cleanup.passes import (
    cleanup, cleanup_check, op_counts,
)
from onnx_slice_tools.verification.lowerings import make_session

I64 = TensorProto.INT64


def c(name, values, dtype=np.int64):
    return numpy_helper.from_array(np.array(values, dtype=dtype), name)


def model(nodes, inputs, outputs, inits=(), functions=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    imports = [helper.make_opsetid("", opset)] + ([helper.make_opsetid("local", 1)] if functions else [])
    return helper.make_model(g, opset_imports=imports, ir_version=9, functions=list(functions))


def ops(proto) -> collections.Counter:
    return op_counts(ir.from_proto(proto))


def clean(proto, passes=None):
    m = ir.from_proto(proto)
    report = cleanup(m, passes)
    out = ir.to_proto(m)
    try:
        onnx.checker.check_model(proto)
    except onnx.checker.ValidationError:
        pass  # graph outputs of unknown rank: the checker needs a shape (onnxruntime does not)
    else:
        onnx.checker.check_model(out)
    return out, report


def same_outputs(before, after, feeds_list):
    """Every output equal in shape, dtype and bytes; also the same run-time failures."""
    sb, sa = make_session(before.SerializeToString()), make_session(after.SerializeToString())
    assert [o.name for o in sa.get_outputs()] == [o.name for o in sb.get_outputs()]
    assert [o.type for o in sa.get_outputs()] == [o.type for o in sb.get_outputs()]
    for feeds in feeds_list:
        try:
            expected = sb.run(None, feeds)
        except Exception:
            with pytest.raises(Exception):
                sa.run(None, feeds)
            continue
        got = sa.run(None, feeds)
        for g, e in zip(got, expected):
            assert g.shape == e.shape and g.dtype == e.dtype and g.tobytes() == e.tobytes()


def floats(*shape):
    return np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)


def x_input(shape, name="x"):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def shape_scalar_chain(x, k, prefix, cast_to=None, add=None):
    """tf2onnx + rewrite shape arithmetic: Shape -> Cast(int32) -> Slice[k:k+1] -> Squeeze
    -> (Cast) -> (Add scalar) -> Unsqueeze; returns nodes, inits and the 1-D output name."""
    p = prefix
    nodes = [helper.make_node("Shape", [x], [p + "s"]),
             helper.make_node("Cast", [p + "s"], [p + "s32"], to=TensorProto.INT32),
             helper.make_node("Slice", [p + "s32", p + "b", p + "e", p + "ax"], [p + "sl"]),
             helper.make_node("Squeeze", [p + "sl", p + "ax"], [p + "sq"])]
    inits = [c(p + "b", [k]), c(p + "e", [k + 1]), c(p + "ax", [0])]
    last = p + "sq"
    if cast_to is not None:
        nodes.append(helper.make_node("Cast", [last], [p + "cast"], to=cast_to))
        last = p + "cast"
    if add is not None:
        dtype = np.int64 if cast_to == I64 else np.int32
        inits.append(c(p + "k", add, dtype))
        nodes.append(helper.make_node("Add", [last, p + "k"], [p + "add"]))
        last = p + "add"
    nodes.append(helper.make_node("Unsqueeze", [last, p + "ax"], [p + "un"]))
    return nodes, inits, p + "un"


def test_graph_output_keeps_name_and_type():
    """A value that is a graph output is never replaced: its producer stays."""
    n1, i1, a = shape_scalar_chain("x", 1, "a_")
    before = model(n1, [x_input(["N", "M"])], [helper.make_tensor_value_info(a, TensorProto.INT32, [1])], i1)
    after, _ = clean(before)
    assert [(o.name, o.type) for o in after.graph.output] == [(o.name, o.type) for o in before.graph.output]
    same_outputs(before, after, [{"x": floats(2, 3)}])


def _if_model(cond_branch_nodes, inits):
    then = helper.make_graph(cond_branch_nodes, "then", [], [helper.make_tensor_value_info("ty", TensorProto.FLOAT, None)],
                             initializer=inits)
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["ey"])], "else", [],
                              [helper.make_tensor_value_info("ey", TensorProto.FLOAT, None)])
    nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other)]
    return model(nodes, [x_input(["N", "M", 32]), helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])


def test_subgraph_is_cleaned():
    n1, i1, a = shape_scalar_chain("x", 0, "a_")
    n2, i2, b = shape_scalar_chain("x", 1, "b_", cast_to=TensorProto.INT32, add=0)
    body = n1 + n2 + [helper.make_node("Concat", [a, b, "tail"], ["s32"], axis=0),
                      helper.make_node("Cast", ["s32"], ["shape"], to=I64),
                      helper.make_node("Reshape", ["x", "shape"], ["r"]), helper.make_node("Neg", ["r"], ["ty"])]
    before = _if_model(body, i1 + i2 + [c("tail", [4, 8], np.int32)])
    after, report = clean(before)
    counts = ops(after)
    assert counts["Squeeze"] == 0 and counts["Unsqueeze"] == 0 and counts["Shape"] == 1
    assert report["nodes_after"] < report["nodes_before"]
    for cond in (True, False):
        same_outputs(before, after, [{"x": floats(2, 3, 32), "cond": np.array(cond)}])


def test_loop_body_is_cleaned():
    n1, i1, a = shape_scalar_chain("v_in", 0, "a_")
    body_nodes = n1 + [helper.make_node("Concat", [a, "tail"], ["s32"], axis=0),
                       helper.make_node("Cast", ["s32"], ["shape"], to=I64),
                       helper.make_node("Reshape", ["v_in", "shape"], ["r"]),
                       helper.make_node("Add", ["r", "r"], ["v_out"]),
                       helper.make_node("Identity", ["cond_in"], ["cond_out"])]
    body = helper.make_graph(body_nodes, "body", [helper.make_tensor_value_info("i", I64, []),
                                                  helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                                                  helper.make_tensor_value_info("v_in", TensorProto.FLOAT, ["N", 6])],
                             [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("v_out", TensorProto.FLOAT, ["N", 6])],
                             initializer=i1 + [c("tail", [6], np.int32)])
    nodes = [helper.make_node("Loop", ["trip", "", "x"], ["y"], body=body)]
    before = model(nodes, [x_input(["N", 6])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                   [c("trip", 3)])
    after, _ = clean(before)
    assert ops(after)["Shape"] == 0
    same_outputs(before, after, [{"x": floats(4, 6)}])


def test_function_body_is_cleaned_with_constant_nodes():
    """Function bodies have no initializers (and no shapes): folded values become Constant
    nodes, duplicates are merged."""
    consts = [helper.make_node("Constant", [], [t.name], value=t)
              for t in (c("k", [3], np.int32), c("ax", [0]), c("m1", [-1]))]
    fnodes = consts + [helper.make_node("Squeeze", ["k", "ax"], ["sq"]),
                       helper.make_node("Cast", ["sq"], ["c64"], to=I64),
                       helper.make_node("Unsqueeze", ["c64", "ax"], ["u"]),
                       helper.make_node("Concat", ["m1", "u"], ["shape"], axis=0),
                       helper.make_node("Reshape", ["fx", "shape"], ["fy"]),
                       helper.make_node("Shape", ["fx"], ["s1"]), helper.make_node("Shape", ["fx"], ["s2"]),
                       helper.make_node("Add", ["s1", "s2"], ["fs"])]
    fn = helper.make_function("local", "Heads", ["fx"], ["fy", "fs"], fnodes, [helper.make_opsetid("", 17)])
    before = model([helper.make_node("Heads", ["x"], ["y", "s"], domain="local")], [x_input(["N", 6])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                    helper.make_tensor_value_info("s", I64, None)], functions=[fn])
    after, report = clean(before)
    f = after.functions[0]
    counts = collections.Counter(n.op_type for n in f.node)
    assert counts["Shape"] == 1 and not {"Squeeze", "Unsqueeze", "Cast", "Concat"} & set(counts)
    assert not after.graph.initializer
    assert report["nodes_after"] < report["nodes_before"]
    same_outputs(before, after, [{"x": floats(2, 6)}, {"x": floats(4, 3)}])


def test_cleanup_check_catches_a_changed_value():
    n1, i1, a = shape_scalar_chain("x", 1, "a_", cast_to=I64, add=2)
    nodes = n1 + [helper.make_node("Concat", ["m1", a], ["shape"], axis=0),
                  helper.make_node("Reshape", ["x", "shape"], ["y"])]
    before = model(nodes, [x_input(["N", "M"])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                   i1 + [c("m1", [-1])])
    after, _ = clean(before)
    assert cleanup_check(before, after, budget=Budget(DEFAULT_VERIFY_MEMORY)) == "passed"
    broken = onnx.ModelProto()
    broken.CopyFrom(after)
    for t in broken.graph.initializer:
        if numpy_helper.to_array(t).tolist() == [2]:
            t.CopyFrom(c(t.name, [0]))
            break
    else:
        pytest.fail("the lifted Add constant is not an initializer")
    assert cleanup_check(before, broken, budget=Budget(DEFAULT_VERIFY_MEMORY)).startswith("failed: ")


# --------------------------------------------------------------------------- hypothesis

@st.composite
def shape_graphs(draw):
    """A float input with static and symbolic dims; int vectors built from its Shape by the
    rewrite's patterns (slice/squeeze/cast/add/unsqueeze, gather), concatenated into the shape of
    a Reshape of the same input, plus a chain of Slices of the input."""
    rank = draw(st.integers(2, 4))
    dims = [draw(st.sampled_from([2, 3, "A", "B"])) for _ in range(rank)]
    nodes, inits, parts = [], [c("ax0", [0])], []
    for k in range(rank):
        p = f"p{k}_"
        kind = draw(st.sampled_from(["chain", "gather", "slice", "const"]))
        if kind == "chain":
            n, i, out = shape_scalar_chain("x", k, p, cast_to=draw(st.sampled_from([None, I64, TensorProto.INT32])),
                                           add=draw(st.sampled_from([None, 0])))
            nodes += n
            inits += i
            if draw(st.booleans()):  # int32 or int64 parts: normalise to int64 for Concat
                nodes.append(helper.make_node("Cast", [out], [p + "c64"], to=I64))
                out = p + "c64"
            else:
                nodes.append(helper.make_node("Cast", [out], [p + "c64"], to=I64))
                out = p + "c64"
        elif kind == "gather":
            nodes += [helper.make_node("Shape", ["x"], [p + "s"]),
                      helper.make_node("Gather", [p + "s", p + "i"], [p + "g"], axis=0),
                      helper.make_node("Unsqueeze", [p + "g", "ax0"], [p + "u"])]
            inits.append(c(p + "i", k - rank if draw(st.booleans()) else k))
            out = p + "u"
        elif kind == "slice":
            nodes += [helper.make_node("Shape", ["x"], [p + "s"]),
                      helper.make_node("Slice", [p + "s", p + "b", p + "e"], [p + "sl"])]
            inits += [c(p + "b", [k]), c(p + "e", [k + 1])]
            out = p + "sl"
        else:
            inits.append(c(p + "k", [0 if draw(st.booleans()) else -1]))
            out = p + "k"
        parts.append(out)
    if sum(1 for p in parts if p.endswith("k")) > 1:  # at most one -1; use 0 (copy) for the rest
        for p in parts[1:]:
            if p.endswith("k"):
                for t in inits:
                    if t.name == p:
                        t.CopyFrom(c(p, [0]))
    nodes += [helper.make_node("Concat", parts, ["shape"], axis=0),
              helper.make_node("Reshape", ["x", "shape"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
               helper.make_tensor_value_info("shape", I64, None)]
    src = "x"
    for j in range(draw(st.integers(0, 3))):
        axis = draw(st.integers(-rank, rank - 1))
        start, end, step = draw(st.integers(-4, 4)), draw(st.integers(-5, 5)), draw(st.sampled_from([1, 2, -1, -2]))
        inits += [c(f"s{j}", [start]), c(f"e{j}", [end]), c(f"a{j}", [axis]), c(f"st{j}", [step])]
        nodes.append(helper.make_node("Slice", [src, f"s{j}", f"e{j}", f"a{j}", f"st{j}"], [f"sl{j}"]))
        src = f"sl{j}"
    if src != "x":
        outputs.append(helper.make_tensor_value_info(src, TensorProto.FLOAT, None))
    return model(nodes, [x_input(dims)], outputs, inits), dims


@settings(max_examples=40)
@given(shape_graphs(), st.sampled_from([(1, 2), (3, 1), (2, 4)]))
def test_cleanup_is_exact_on_random_shape_graphs(case, sizes):
    before, dims = case
    after, report = clean(before)
    assert report["nodes_after"] <= report["nodes_before"]
    assert sum(ops(after).values()) <= sum(ops(before).values())
    concrete = tuple(sizes[0] if d == "A" else sizes[1] if d == "B" else d for d in dims)
    same_outputs(before, after, [{"x": floats(*concrete)}])


# --------------------------------------------------------------------------- in convert and the CLI

@pytest.fixture(scope="module")
def heads_export():
    """A tf2onnx export (StridedSlice kept) of TF shape arithmetic: tf.shape(x)[i] reshapes."""
    import tensorflow as tf

    from onnx_slice_tools.frontends.tfexport import export
    sig = [tf.TensorSpec([None, None, 32], tf.float32, name="x")]

    @tf.function(input_signature=sig)
    def fn(x):
        b, s = tf.shape(x)[0], tf.shape(x)[1]
        h = tf.transpose(tf.reshape(x, [b, s, 4, 8]), [0, 2, 1, 3])
        return tf.reshape(tf.transpose(h, [0, 2, 1, 3]), [tf.shape(h)[0], tf.shape(h)[2], 32]), x[:, -1]
    return export(fn, sig), fn


def test_convert_runs_and_checks_the_cleanup(heads_export):
    from onnx_slice_tools import convert
    proto, fn = heads_export
    on, off = convert(proto), convert(proto, cleanup=False)
    assert on.ok and off.ok
    assert on.report.model_checks["cleanup"] == "passed" and "cleanup" not in off.report.model_checks
    rep = on.report.to_dict()["cleanup"]
    assert rep["nodes_after"] == sum(ops(on.model).values()) < rep["nodes_before"] == sum(ops(off.model).values())
    assert rep["nodes_before"] - rep["nodes_after"] == sum(
        sum(p["removed"].values()) - sum(p["added"].values()) for p in rep["passes"].values())
    x = floats(2, 5, 32)
    got = make_session(on.model.SerializeToString()).run(None, {"x": x})
    for g, e in zip(got, fn(x)):
        assert g.shape == tuple(e.shape) and g.dtype == e.dtype.as_numpy_dtype and g.tobytes() == e.numpy().tobytes()


def test_cleanup_failure_is_reported_not_raised(heads_export, monkeypatch):
    from onnx_slice_tools.cleanup import passes as cleanup_module
    from onnx_slice_tools import convert

    def broken(model, passes=None, **_):
        raise RuntimeError("boom")
    monkeypatch.setattr(cleanup_module, "cleanup", broken)
    result = convert(heads_export[0])
    assert not result.ok
    assert result.report.model_checks["cleanup"].startswith("failed: the cleanup stopped (RuntimeError: boom)")


@pytest.mark.parametrize("corrupt", [False, True])
def test_cleanup_check_reuses_the_in_place_session(heads_export, monkeypatch, corrupt):
    """The model before cleanup runs in the in-place check's session (its taps only add
    outputs): the cleanup check builds one session, of the cleaned model; a cleanup that
    changes a value is still caught."""
    from onnx_slice_tools.cleanup import passes as cleanup_module
    from onnx_slice_tools import convert
    real_cleanup, real_session, built = cleanup_module.cleanup, cleanup_module._session, []

    def cleanup_then_corrupt(model, passes=None, **kwargs):
        report = real_cleanup(model, passes, **kwargs)
        if corrupt:  # one int64 constant the cleanup made, off by one
            for value in model.graph.initializers.values():
                arr = value.const_value.numpy()
                if "__cl" in value.name and arr.dtype == np.int64 and arr.size:
                    value.const_value = ir.tensor(arr - 1, name=value.name)
                    break
            else:
                pytest.fail("no int64 constant to corrupt")
        return report

    def session(proto):
        built.append(proto)
        return real_session(proto)
    monkeypatch.setattr(cleanup_module, "cleanup", cleanup_then_corrupt)
    monkeypatch.setattr(cleanup_module, "_session", session)
    report = convert(heads_export[0]).report
    assert len(built) == 1 and report.model_checks["model_run"] == "passed"
    if corrupt:
        assert report.model_checks["cleanup"].startswith("failed: ") and not report.ok
    else:
        assert report.model_checks["cleanup"] == "passed" and report.verified


def test_cli_no_cleanup(heads_export, tmp_path, capsys):
    from onnx_slice_tools.cli.main import main
    src = tmp_path / "m.onnx"
    onnx.save(heads_export[0], src)
    sizes = {}
    for flag in ([], ["--no-cleanup"]):
        out = tmp_path / f"out{len(flag)}.onnx"
        assert main(["convert", str(src), "-o", str(out), "--report", str(out) + ".json", *flag]) == 0
        sizes[bool(flag)] = sum(ops(onnx.load(out)).values())
    assert sizes[False] < sizes[True]
    assert capsys.readouterr().err == ""


def test_sibling_branches_reusing_a_name():
    """Two If branches name a value alike, static [1] in one and of unknown length in the
    other: shapes are not mixed up (the second Squeeze must still fail on an empty vector)."""
    def branch(name, src):
        nodes = [helper.make_node("Shape", ["x"], [name + "s"])] if src is None else []
        nodes += [helper.make_node("Slice", [src or name + "s", name + "b", name + "e"], ["t"]),
                  helper.make_node("Squeeze", ["t", name + "ax"], [name + "q"]),
                  helper.make_node("Unsqueeze", [name + "q", name + "ax"], [name + "u"]),
                  helper.make_node("Concat", [name + "u", name + "u"], [name + "y"], axis=0)]
        return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(name + "y", I64, None)],
                                 initializer=[c(name + "b", [0]), c(name + "e", [1]), c(name + "ax", [0])])
    for first, second in (("then", "else"), ("else", "then")):
        branches = {"then": branch("then_", None), "else": branch("else_", "v")}
        node = helper.make_node("If", ["cond"], ["y"], then_branch=branches[first], else_branch=branches[second])
        before = model([node], [x_input(["N", "M"]), helper.make_tensor_value_info("v", I64, ["K"]),
                                helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
                       [helper.make_tensor_value_info("y", I64, None)])
        after, _ = clean(before)
        assert ops(after)["Squeeze"] >= 1  # the unknown-length branch keeps its Squeeze
        for cond in (True, False):
            for v in (np.zeros(0, np.int64), np.array([5, 6])):
                same_outputs(before, after, [{"x": floats(2, 3), "v": v, "cond": np.array(cond)}])
