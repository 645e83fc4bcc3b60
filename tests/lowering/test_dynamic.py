"""Runtime begin/end/strides and inputs of unknown rank, compared with TensorFlow and OpenVINO."""

from __future__ import annotations

import random
import subprocess
import sys
from dataclasses import replace

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import tensorflow as tf
from onnx import TensorProto, helper

from onnx_slice_tools import convert
from onnx_slice_tools.errors import StridedSliceError
from onnx_slice_tools.verification.oracles import RandomSource, random_case, run_oracle
from onnx_slice_tools.semantics.plan import make_plan
from onnx_slice_tools.frontends.tfexport import TF_DOMAIN, export
from onnx_slice_tools.verification.lowerings import make_session, max_supported_opset

# (expression, runtime index names, None or values on which tf2onnx's own lowering is wrong)
RUNTIME_PATTERNS = [
    ("x[:, i]", "i", None),
    ("x[i]", "i", None),
    ("x[i:j]", "ij", None),
    ("x[::k]", "k", None),
    ("x[..., i, None]", "i", None),
    ("x[-i:]", "i", None),
    ("x[1:, i::k]", "ik", None),
    # TF clamps a reverse begin below -dim to "before element 0" (empty); tf2onnx returns data
    ("x[i, j:k:l]", "ijkl", {"i": 0, "j": -7, "k": -9, "l": -1}),
    ("x[i::-1]", "i", {"i": -9}),
    ("x[:, ::-1, i:j:-1]", "ij", {"i": -9, "j": -10}),
]
VALUES = [-9, -8, -6, -5, -4, -1, 0, 1, 2, 4, 5, 6, 9, 2 ** 31 - 1]
STRIDES = [-3, -2, -1, 1, 2, 3]


def _node_count(model) -> int:
    return sum(n.op_type not in ("Constant", "Identity") for n in model.graph.node)


def _feeds_and_expected(fn, names, shape, rng):
    """Random index values TF accepts for this input shape (None when it rejects all tried)."""
    x = rng.standard_normal(shape).astype(np.float32)
    for _ in range(40):
        vals = {n: np.array(rng.choice(STRIDES if n in "kl" else VALUES), dtype=np.int32) for n in names}
        try:
            want = fn(tf.constant(x), *[tf.constant(vals[n]) for n in names]).numpy()
        except (tf.errors.InvalidArgumentError, ValueError):
            continue
        return {"x": x, **vals}, want
    return None


@pytest.mark.parametrize("expr, names, witness", RUNTIME_PATTERNS)
def test_runtime_indices_from_tf2onnx_match_tensorflow(expr, names, witness):
    fn = tf.function(eval(f"lambda x, {', '.join(names)}: {expr}"))
    rng = np.random.default_rng(0)
    for dims in ([5, 6, 7], [None, 6, 7], [None, None, None]):
        sig = [tf.TensorSpec(dims, tf.float32, name="x")] + [tf.TensorSpec([], tf.int32, name=n) for n in names]
        model = export(fn, sig)
        result = convert(model)
        assert result.ok, result.report.to_json()
        rec = result.report.records[0]
        check = result.report.check_of(0)
        assert rec.index_types and check.onnxruntime == "passed" and len(check.tried_values) >= 10
        assert not any(n.op_type == "StridedSlice" for n in result.model.graph.node)
        ours = _node_count(result.model)
        native_model = export(fn, sig, keep_strided_slice=False)
        native = _node_count(native_model)
        ours_sess = make_session(result.model.SerializeToString())
        native_sess = make_session(native_model.SerializeToString())
        native_wrong = 0
        for trial in range(60):
            shape = [d if d is not None else int(rng.choice([1, 4, 5, 8])) for d in dims]
            drawn = _feeds_and_expected(fn, names, shape, rng)
            if drawn is None:
                continue
            feeds, want = drawn
            got = ours_sess.run(None, feeds)[0]
            assert got.shape == want.shape and got.dtype == want.dtype and got.tobytes() == want.tobytes(), \
                (expr, dims, {k: v.tolist() if k != "x" else v.shape for k, v in feeds.items()})
            theirs = native_sess.run(None, feeds)[0]
            native_wrong += theirs.shape != want.shape or theirs.tobytes() != want.tobytes()
        if witness is not None:  # where tf2onnx is wrong, ours is right
            x = rng.standard_normal([d or 5 for d in dims]).astype(np.float32)
            feeds = {"x": x, **{n: np.array(v, dtype=np.int32) for n, v in witness.items()}}
            want = fn(*[tf.constant(feeds[n]) for n in ["x", *names]]).numpy()
            got, theirs = ours_sess.run(None, feeds)[0], native_sess.run(None, feeds)[0]
            assert got.shape == want.shape and got.tobytes() == want.tobytes()
            assert theirs.shape != want.shape, (expr, dims, theirs.shape, want.shape)
            native_wrong += 1
        # never more nodes than tf2onnx, unless tf2onnx is wrong on this pattern (shown above)
        assert ours <= native or native_wrong, (expr, dims, ours, native)
        print(f"{expr} {dims}: ours {ours} nodes, tf2onnx {native}, tf2onnx wrong on {native_wrong} draws")


def test_node_counts_below_tf2onnx_for_runtime_single_indices():
    """The headline counts: x[:, i] and x[..., i, None] with a symbolic batch dim."""
    counts = {}
    for expr in ("x[:, i]", "x[..., i, None]", "x[::k]"):
        name = expr[-2] if expr.endswith("]") and expr[-2].isalpha() else "i"
        name = "k" if "k" in expr else "i"
        fn = tf.function(eval(f"lambda x, {name}: {expr}"))
        sig = [tf.TensorSpec([None, 6, 7], tf.float32, name="x"), tf.TensorSpec([], tf.int32, name=name)]
        ours = _node_count(convert(export(fn, sig)).model)
        native = _node_count(export(fn, sig, keep_strided_slice=False))
        counts[expr] = (ours, native)
    assert counts["x[:, i]"] == (4, 16), counts          # 2 of ours + tf2onnx's Unsqueeze/Concat of begin
    assert counts["x[..., i, None]"] == (5, 17), counts
    assert counts["x[::k]"][0] < counts["x[::k]"][1], counts


def test_shrink_index_out_of_range_at_run_time_fails_like_tensorflow():
    """TensorFlow raises on x[:, i] with i out of range; the lowered Gather raises in
    onnxruntime too (no silent clamping)."""
    fn = tf.function(lambda x, i: x[:, i])
    sig = [tf.TensorSpec([None, 6], tf.float32, name="x"), tf.TensorSpec([], tf.int32, name="i")]
    model = convert(export(fn, sig)).model
    sess = make_session(model.SerializeToString())
    x = np.zeros((2, 6), np.float32)
    for i in (6, -7):
        with pytest.raises(tf.errors.InvalidArgumentError):
            fn(tf.constant(x), tf.constant(np.int32(i)))
        with pytest.raises(Exception, match="out of bounds|indices"):
            sess.run(None, {"x": x, "i": np.array(i, dtype=np.int32)})


# --------------------------------------------------------------------------- random models

def _runtime_model(cases, flavor: str, opset: int, domain: str):
    """One StridedSlice per case; begin/end/strides that the case marks runtime are graph inputs."""
    nodes, inits, inputs, outputs = [], [], [], []
    for i, (x, spec, runtime, dt) in enumerate(cases):
        inputs.append(helper.make_tensor_value_info(f"x{i}", helper.np_dtype_to_tensor_dtype(x.dtype),
                                                    ["N" if k == 0 else d for k, d in enumerate(x.shape)]))
        names = []
        for f in ("begin", "end", "strides"):
            vals = getattr(spec, f)
            name = f"{f}{i}"
            names.append(name)
            elem = helper.np_dtype_to_tensor_dtype(np.dtype(dt))
            if f in runtime:
                inputs.append(helper.make_tensor_value_info(name, elem, [len(vals)]))
            else:
                inits.append(helper.make_tensor(name, elem, [len(vals)], np.array(vals, dtype=dt)))
        if flavor == "tf":
            attrs = {m: getattr(spec, m) - (2 ** 32 if getattr(spec, m) >= 2 ** 31 else 0)
                     for m in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")}
        else:
            ms = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")
            attrs = {m: spec.mask_list(m, n) for m, n in zip(ms, spec.mask_lengths)}
            attrs = {m: (v if len(v) else "") for m, v in attrs.items()}
        nodes.append(helper.make_node("StridedSlice", [f"x{i}"] + names, [f"y{i}"], name=f"ss{i}",
                                      domain=domain, **attrs))
        outputs.append(helper.make_empty_tensor_value_info(f"y{i}"))
    graph = helper.make_graph(nodes, "runtime", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(domain, 1)])
    model.ir_version = 8
    return model


def _small(values):
    return all(-2 ** 31 <= v < 2 ** 31 for v in values)


@pytest.mark.parametrize("flavor, domain", [("tf", TF_DOMAIN), ("openvino", "org.openvinotoolkit")])
@pytest.mark.parametrize("opset", [11, 13, "max"])
def test_random_runtime_specs_match_the_framework(flavor, domain, opset):
    """80 random specs per model with a random subset of begin/end/strides given at run time
    (int32 or int64); each run draws new index values from the other random valid specs of the
    same masks and compares onnxruntime with the framework itself."""
    opset = max_supported_opset() if opset == "max" else opset
    rnd = random.Random(f"{flavor}{opset}")
    src = RandomSource(rnd)
    cases = []
    while len(cases) < 80:
        x, spec = random_case(src, flavor, max_rank=4)
        if x.ndim == 0 or x.dtype == np.float16 and opset < 13 or not _small(spec.begin + spec.end):
            continue
        try:
            make_plan(spec, x.shape)
        except StridedSliceError:
            continue
        runtime = {f for f in ("begin", "end", "strides") if rnd.random() < 0.5} or {"begin"}
        cases.append((x, spec, runtime, np.int32 if rnd.random() < 0.5 else np.int64))
    model = _runtime_model(cases, flavor, opset, domain)
    result = convert(model)
    assert result.ok, [r.to_json() for r in result.report.failed_records][:2]
    assert result.report.rewritten == len(cases)
    sess = make_session(result.model.SerializeToString())
    compared = 0
    for trial in range(6):
        feeds, expect = {}, {}
        for i, (x, spec, runtime, dt) in enumerate(cases):
            feeds[f"x{i}"] = x
            new = spec
            for _ in range(20):  # other values for the runtime fields, valid for the framework
                cand = {}
                for f in runtime:
                    vals = list(getattr(spec, f))
                    cand[f] = [v if rnd.random() < 0.3 else (rnd.choice([-3, -2, -1, 1, 2]) if f == "strides"
                                                             else rnd.randint(-x.ndim - 6, 6)) for v in vals]
                trial_spec = replace(spec, **{f: tuple(v) for f, v in cand.items()})
                if trial and run_oracle(x, trial_spec).ok:
                    new = trial_spec
                    break
            for f in ("begin", "end", "strides"):
                if f in runtime:
                    feeds[f"{f}{i}"] = np.array(getattr(new, f), dtype=dt)
            expect[i] = run_oracle(x, new)
        outs = sess.run(None, feeds)
        for i, got in enumerate(outs):
            want = expect[i]
            assert want.ok
            assert got.shape == want.shape, (i, cases[i][1], {f: feeds[f"{f}{i}"] for f in cases[i][2]})
            if want.values is not None:
                assert got.dtype == want.values.dtype and got.tobytes() == want.values.tobytes(), (i, cases[i][1])
                compared += 1
    assert compared > 200


# --------------------------------------------------------------------------- unknown rank

UNKNOWN_RANK_SPECS = [
    "x[..., ::2]", "x[..., -1]", "x[1:, ..., 0]", "x[None, ..., ::-1, None]", "x[..., 1:3, :]",
    "x[0]", "x[:, -2::-1]", "x[..., None]", "x[..., 0, None, 1:]",
]


@pytest.mark.parametrize("expr", UNKNOWN_RANK_SPECS)
def test_unknown_rank_inputs_match_tensorflow(expr):
    """Hand-built models whose data input has no shape at all: positions after the ellipsis
    become negative axes.  Checked on inputs of several ranks against TensorFlow."""
    from onnx_slice_tools.semantics.spec import from_index_expr
    spec = from_index_expr(expr)
    tensors = [helper.make_tensor(n, TensorProto.INT64, [spec.n], list(v))
               for n, v in (("b", spec.begin), ("e", spec.end), ("s", spec.strides))]
    masks = {m: getattr(spec, m) for m in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask",
                                           "shrink_axis_mask")}
    node = helper.make_node("StridedSlice", ["x", "b", "e", "s"], ["y"], name="ss", domain=TF_DOMAIN, **masks)
    x_info = onnx.ValueInfoProto()
    x_info.name = "x"
    x_info.type.tensor_type.elem_type = TensorProto.FLOAT  # no shape: unknown rank
    graph = helper.make_graph([node], "g", [x_info], [helper.make_empty_tensor_value_info("y")], initializer=tensors)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TF_DOMAIN, 1)])
    model.ir_version = 8
    result = convert(model)
    assert result.ok, result.report.to_json()
    rec = result.report.records[0]
    assert rec.input_shape is None and result.report.check_of(0).onnxruntime == "passed"
    assert len({len(s) for s in result.report.check_of(0).tried_shapes}) >= 2  # several ranks tried
    sess = make_session(result.model.SerializeToString())
    fn = tf.function(eval("lambda x: " + expr))
    tried = 0
    for shape in ([4], [3, 5], [2, 3, 4], [2, 1, 3, 5], [1, 2, 3, 4, 2]):
        x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
        try:
            want = fn(tf.constant(x)).numpy()
        except (tf.errors.InvalidArgumentError, ValueError):
            with pytest.raises(Exception):
                sess.run(None, {"x": x})  # TF rejects this rank; the lowered graph fails too
            continue
        got = sess.run(None, {"x": x})[0]
        assert got.shape == want.shape and got.tobytes() == want.tobytes(), (expr, shape)
        tried += 1
    assert tried >= 3


# --------------------------------------------------------------------------- lengths known at run time

def _unknown_length_model(begin_from_input: bool, shrink: bool):
    """tf2onnx-style ``x[b0:, b1]`` (``x[b0:, b1:3]`` without ``shrink``) on x[4, 5]: end and
    strides constants of length 2; begin of a
    length not known before run time -- a graph input ``b`` of shape ["L"], or ``[i] * len(end)``
    computed in the graph (ConstantOfShape of Shape(end): onnx's shape inference does not tell its
    length, at run time it is 2)."""
    if begin_from_input:
        nodes, inputs = [], [helper.make_tensor_value_info("b", TensorProto.INT64, ["L"])]
    else:
        nodes = [helper.make_node("Shape", ["e"], ["n"]),
                 helper.make_node("ConstantOfShape", ["n"], ["ones"],
                                  value=helper.make_tensor("one", TensorProto.INT64, [1], [1])),
                 helper.make_node("Mul", ["ones", "i"], ["b"])]
        inputs = [helper.make_tensor_value_info("i", TensorProto.INT64, [])]
    nodes.append(helper.make_node("StridedSlice", ["x", "b", "e", "s"], ["y"], name="ss", domain=TF_DOMAIN,
                                  end_mask=1, shrink_axis_mask=2 if shrink else 0))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 5])] + inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [helper.make_tensor("e", TensorProto.INT64, [2], [0, 3]),
                               helper.make_tensor("s", TensorProto.INT64, [2], [1, 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TF_DOMAIN, 1)])
    model.ir_version = 8
    return model


def test_runtime_begin_of_unknown_length_converts_and_verifies(tmp_path):
    """Its length checked in the graph (a Reshape to the length of end/strides), the rewrite
    converts and is verified, in place too, for every target; the command line exits 0."""
    src = tmp_path / "len.onnx"
    onnx.save(_unknown_length_model(begin_from_input=False, shrink=False), str(src))
    for target in ("onnxruntime", "portable", "openvino"):
        result = convert(src, target=target)
        assert result.report.verdict == "verified", (target, result.report.model_checks)
        reshapes = [n for n in result.model.graph.node if n.op_type == "Reshape" and n.input[0] == "b"]
        assert len(reshapes) == 1, target
    dst = tmp_path / "out.onnx"
    out = subprocess.run([sys.executable, "-m", "onnx_slice_tools", "convert", str(src), "-o", str(dst)],
                         capture_output=True, text=True)
    assert out.returncode == 0 and out.stderr == "" and "verified" in out.stdout and "NOT" not in out.stdout, out
    assert dst.exists()


@pytest.mark.parametrize("target", ["onnxruntime", "portable", "openvino"])
def test_runtime_vector_of_another_length_fails_like_the_framework(target, tmp_path):
    """begin a graph input of unknown length: TensorFlow raises when its length is not that of
    end and strides; the converted graph fails in onnxruntime (default options and the checks')
    exactly then, and equals TensorFlow otherwise.  (Before, it ran on, and the in-place check
    failed the conversion.)"""
    src = tmp_path / "len.onnx"
    onnx.save(_unknown_length_model(begin_from_input=True, shrink=True), str(src))
    result = convert(src, target=target)
    assert result.ok, (target, result.report.model_checks)
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    model = result.model.SerializeToString()
    sessions = [make_session(model), ort.InferenceSession(model, providers=["CPUExecutionProvider"])]
    rejected = 0
    for begin in ([1, 2], [1], [1, 2, 0], [3, -1]):
        b = np.array(begin, dtype=np.int64)
        try:
            expected = tf.strided_slice(x, b, [0, 3], [1, 1], end_mask=1, shrink_axis_mask=2).numpy()
        except (tf.errors.InvalidArgumentError, ValueError):
            expected, rejected = None, rejected + 1
        for session in sessions:
            if expected is None:
                with pytest.raises(Exception, match="Reshape|reshape"):
                    session.run(["y"], {"x": x, "b": b})
            else:
                got = session.run(["y"], {"x": x, "b": b})[0]
                assert got.shape == expected.shape and got.tobytes() == expected.tobytes(), (target, begin)
    assert rejected == 2  # TensorFlow rejects the lengths 1 and 3
