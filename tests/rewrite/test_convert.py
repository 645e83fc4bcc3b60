"""The rewrite pass end to end: models in, verified standard ONNX out, compared with the
frameworks themselves (TensorFlow through tf2onnx exports, OpenVINO's runtime)."""

from __future__ import annotations

import hashlib
import random

import numpy as np
import onnx
import pytest
import tensorflow as tf
from onnx import TensorProto, helper

from onnx_slice_tools import convert
from onnx_slice_tools.cli.main import main as cli_main
from onnx_slice_tools.errors import StridedSliceError
from onnx_slice_tools.verification.oracles import RandomSource, random_case, run_oracle
from onnx_slice_tools.semantics.plan import make_plan
from onnx_slice_tools.frontends.tfexport import TF_DOMAIN, export
from onnx_slice_tools.verification.lowerings import make_session, max_supported_opset

PATTERNS = [
    "x[:, -1, ::-1]", "x[..., ::2, ::2]", "x[:, 0]", "x[:, -1, :]", "x[..., ::-1]",
    "x[:, None, 1:3, ..., 0]", "x[..., -2::-1]", "x[1:-1, ..., 2]", "x[::-2, 3:0:-1]",
    "x[tf.newaxis, ..., tf.newaxis]", "x[:, 0, tf.newaxis]", "x[-5::-1]", "x[2:2]", "x[...]",
]
SHAPES = [[3, 5, 6], [None, 5, 6], [None, None, None]]


def _native_node_count(fn, sig) -> int:
    model = export(fn, sig, keep_strided_slice=False)
    return sum(n.op_type not in ("Constant", "Identity") for n in model.graph.node)


def _run(model, feeds):
    return make_session(model.SerializeToString()).run(None, feeds)


@pytest.mark.parametrize("expr", PATTERNS)
def test_tf2onnx_exports_match_tensorflow(expr):
    fn = tf.function(eval("lambda x: " + expr))
    for shape in SHAPES:
        sig = [tf.TensorSpec(shape, tf.float32, name="x")]
        model = export(fn, sig)
        assert any(n.domain == TF_DOMAIN for n in model.graph.node)
        before = model.SerializeToString()
        result = convert(model)
        assert model.SerializeToString() == before, "the input model was modified"
        assert result.ok, result.report.to_json()
        assert result.report.model_checks["model_run"] == "passed", result.report.model_checks
        out = result.model
        assert not any(n.op_type == "StridedSlice" for n in out.graph.node)
        assert TF_DOMAIN not in {o.domain for o in out.opset_import}
        onnx.checker.check_model(out, full_check=True)
        ours = sum(n.op_type != "Identity" for n in out.graph.node)
        native = _native_node_count(fn, sig)
        rec = result.report.records[0]
        if rec.lowering.notes:  # TF reverse-begin on an unknown dim: the one case that costs a node
            assert ours <= native + 1
        else:
            assert ours <= native, (expr, shape, ours, native)
        for conc in ([1, 5, 6], [4, 5, 6], [7, 5, 6]):
            conc = [c if d is None else d for c, d in zip(conc, shape)]
            x = np.random.default_rng(0).random(conc, dtype=np.float32)
            want = fn(tf.constant(x)).numpy()
            got = _run(out, {"x": x})[0]
            assert got.shape == want.shape and got.dtype == want.dtype and got.tobytes() == want.tobytes(), \
                (expr, shape, conc)


def _many_node_model(cases, flavor: str, opset: int, symbolic: bool, domain: str):
    """One model: for each case an input, the begin/end/strides initializers and a StridedSlice."""
    nodes, inits, inputs, outputs = [], [], [], []
    for i, (x, spec) in enumerate(cases):
        dims = [f"d{i}_{k}" if symbolic and k % 2 == 0 else d for k, d in enumerate(x.shape)]
        inputs.append(helper.make_tensor_value_info(f"x{i}", helper.np_dtype_to_tensor_dtype(x.dtype), dims))
        dt = np.int32 if all(-2 ** 31 <= v < 2 ** 31 for v in spec.begin + spec.end) and i % 2 else np.int64
        for nm, vals in (("b", spec.begin), ("e", spec.end), ("s", spec.strides)):
            inits.append(helper.make_tensor(f"{nm}{i}", helper.np_dtype_to_tensor_dtype(np.dtype(dt)),
                                            [len(vals)], np.array(vals, dtype=dt)))
        if flavor == "tf":
            attrs = {m: getattr(spec, m) - (2 ** 32 if getattr(spec, m) >= 2 ** 31 else 0)
                     for m in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")}
        else:
            lengths = spec.mask_lengths
            names = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")
            attrs = {m: spec.mask_list(m, n) for m, n in zip(names, lengths)}
            if i % 2:  # IR-style string masks
                attrs = {m: ", ".join(map(str, v)) for m, v in attrs.items()}
            attrs = {m: (v if len(v) else "") for m, v in attrs.items()}  # an empty list as IR's ""
        nodes.append(helper.make_node("StridedSlice", [f"x{i}", f"b{i}", f"e{i}", f"s{i}"], [f"y{i}"],
                                      name=f"ss{i}", domain=domain, **attrs))
        outputs.append(helper.make_empty_tensor_value_info(f"y{i}"))
    graph = helper.make_graph(nodes, "many", inputs, outputs, initializer=inits)
    imports = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = 8
    return model


@pytest.mark.parametrize("flavor, domain", [("tf", TF_DOMAIN), ("tf", ""), ("openvino", "org.openvinotoolkit")])
@pytest.mark.parametrize("opset", [11, 13, "max"])
def test_random_models_match_runtime(flavor, domain, opset):
    """150 random valid specs per model, static and symbolic; every output equals the framework."""
    opset = max_supported_opset() if opset == "max" else opset
    src = RandomSource(random.Random(f"{flavor}{domain}{opset}"))
    for symbolic in (False, True):
        cases = []
        while len(cases) < 150:
            x, spec = random_case(src, flavor, max_rank=5)
            if x.ndim == 0 or x.dtype == np.float16 and opset < 13:
                continue
            try:
                make_plan(spec, x.shape)
            except StridedSliceError:
                continue
            cases.append((x, spec))
        model = _many_node_model(cases, flavor, opset, symbolic, domain)
        result = convert(model)
        assert result.ok, [r.to_json() for r in result.report.failed_records][:3]
        assert result.report.rewritten == len(cases)
        assert result.report.model_checks["model_run"] == "passed", result.report.model_checks
        outs = _run(result.model, {f"x{i}": x for i, (x, _) in enumerate(cases)})
        for i, ((x, spec), got) in enumerate(zip(cases, outs)):
            want = run_oracle(x, spec)
            assert want.ok
            assert got.shape == want.shape, (i, spec, x.shape)
            if want.values is not None:
                assert got.dtype == want.values.dtype and got.tobytes() == want.values.tobytes(), (i, spec)


def _tiny_model(begin, end, strides, masks, *, shape=(4, 6), opset=17, domain=TF_DOMAIN, extra_use=False,
                const_nodes=False):
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))]
    tensors = [helper.make_tensor(n, TensorProto.INT64, [len(v)], v)
               for n, v in (("b", begin), ("e", end), ("s", strides))]
    nodes = []
    if const_nodes:
        nodes += [helper.make_node("Constant", [], [t.name], value=t) for t in tensors]
        tensors = []
    nodes.append(helper.make_node("StridedSlice", ["x", "b", "e", "s"], ["y"], name="the_slice",
                                  domain=domain, **masks))
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if extra_use:
        nodes.append(helper.make_node("Relu", ["y"], ["z"], name="consumer"))
        outputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, None))
    imports = [helper.make_opsetid("", opset), helper.make_opsetid(domain, 1)]
    model = helper.make_model(helper.make_graph(nodes, "tiny", inputs, outputs, initializer=tensors),
                              opset_imports=imports)
    model.ir_version = 8
    return model


@pytest.mark.parametrize("const_nodes", [False, True])
def test_shared_graph_output_keeps_name_and_constants_go(const_nodes):
    model = _tiny_model([0, -1], [0, 0], [1, 1], {"begin_mask": 1, "end_mask": 1, "shrink_axis_mask": 2},
                        extra_use=True, const_nodes=const_nodes)
    result = convert(model)
    assert result.ok
    out = result.model
    assert [o.name for o in out.graph.output] == ["y", "z"]
    assert not out.graph.initializer or all(i.name not in ("b", "e", "s") for i in out.graph.initializer)
    assert not any(n.op_type == "Constant" and n.output[0] in ("b", "e", "s") for n in out.graph.node)
    x = np.arange(24, dtype=np.float32).reshape(4, 6) - 10
    y, z = _run(out, {"x": x})
    np.testing.assert_array_equal(y, x[:, -1])
    np.testing.assert_array_equal(z, np.maximum(x[:, -1], 0))


def test_identity_spec_on_graph_output_becomes_identity():
    model = _tiny_model([0], [0], [1], {"ellipsis_mask": 1})
    result = convert(model)
    assert result.ok
    assert [n.op_type for n in result.model.graph.node] == ["Identity"]
    assert result.model.graph.output[0].name == "y"


def test_identity_spec_inside_graph_is_rewired():
    model = _tiny_model([0], [0], [1], {"begin_mask": 1, "end_mask": 1}, extra_use=True)
    model.graph.output.pop(0)  # y is consumed but no longer a graph output
    result = convert(model)
    assert result.ok
    assert [n.op_type for n in result.model.graph.node] == ["Relu"]
    assert result.model.graph.node[0].input[0] == "x"


@pytest.mark.parametrize("opset", [11, 12, 13, 17, "max"])
def test_every_opset(opset):
    opset = max_supported_opset() if opset == "max" else opset
    model = _tiny_model([0, 0, 1], [0, 0, 0], [1, 1, -1],
                        {"new_axis_mask": 1, "shrink_axis_mask": 2, "end_mask": 4}, opset=opset)
    result = convert(model)
    assert result.ok, result.report.to_json()
    assert {o.domain: o.version for o in result.model.opset_import}[""] == opset
    kinds = [n.op_type for n in result.model.graph.node]
    assert "StridedSlice" not in kinds
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    np.testing.assert_array_equal(_run(result.model, {"x": x})[0], x[None, 0, 1::-1])


def test_strided_slice_inside_if_branches():
    x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6])

    def branch(name, expr_masks, begin, end, strides):
        tensors = [helper.make_tensor(f"{name}_{k}", TensorProto.INT64, [len(v)], v)
                   for k, v in (("b", begin), ("e", end), ("s", strides))]
        node = helper.make_node("StridedSlice", ["x"] + [t.name for t in tensors], [f"{name}_y"],
                                name=f"{name}_ss", domain=TF_DOMAIN, **expr_masks)
        consts = [helper.make_node("Constant", [], [t.name], value=t) for t in tensors]
        return helper.make_graph(consts + [node], name, [],
                                 [helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT, None)])

    then_g = branch("then", {"begin_mask": 1, "end_mask": 1, "shrink_axis_mask": 2}, [0, -1], [0, 0], [1, 1])
    else_g = branch("else", {"begin_mask": 3, "end_mask": 3}, [0, 0], [0, 0], [1, -2])
    cond = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    node = helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)
    graph = helper.make_graph([node], "if", [cond, x_info], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TF_DOMAIN, 1)])
    model.ir_version = 8
    result = convert(model)
    assert result.ok, result.report.to_json()
    assert result.report.rewritten == 2
    # checked in place through the If: both branches reached on random conditions
    assert result.report.model_checks["model_run"] == "passed", result.report.model_checks
    assert all(result.report.inplace_of(i) == "passed" for i in range(len(result.report.records)))
    assert {r.graph.split(" > ")[-1] for r in result.report.records} == {"If ''.then_branch", "If ''.else_branch"}
    x = np.arange(18, dtype=np.float32).reshape(3, 6)
    np.testing.assert_array_equal(_run(result.model, {"c": np.array(True), "x": x})[0], x[:, -1])
    np.testing.assert_array_equal(_run(result.model, {"c": np.array(False), "x": x})[0], x[:, ::-2])


def test_invalid_spec_cli_exit_2_names_node_and_writes_nothing(tmp_path, capsys):
    src = tmp_path / "bad.onnx"
    onnx.save(_tiny_model([0], [1], [0], {}), src)
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    dst = tmp_path / "out.onnx"
    assert cli_main(["convert", str(src), "-o", str(dst)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the_slice" in err[0] and "strides[0]" in err[0] and str(src) in err[0]
    assert not dst.exists() and not list(tmp_path.glob(".*tmp"))
    assert hashlib.sha256(src.read_bytes()).hexdigest() == digest


def test_cli_convert_writes_output_and_report(tmp_path, capsys):
    import json
    src = tmp_path / "m.onnx"
    onnx.save(_tiny_model([0, -1], [0, 0], [1, 1], {"begin_mask": 1, "end_mask": 1, "shrink_axis_mask": 2}), src)
    dst, rep = tmp_path / "o.onnx", tmp_path / "r.json"
    assert cli_main(["convert", str(src), "-o", str(dst), "--report", str(rep)]) == 0
    assert "1/1 StridedSlice rewritten, verified" in capsys.readouterr().out
    report = json.loads(rep.read_text())
    assert report["ok"] and report["rewrites"][0]["spec"] == "x[:, -1]"
    assert report["rewrites"][0]["checks"]["onnxruntime"].startswith("passed")  # (or "passed (as shipped: ...)")
    onnx.checker.check_model(onnx.load(dst), full_check=True)


@pytest.mark.parametrize("content, match", [(b"garbage", "cannot read the model"), (None, "no such file")])
def test_cli_unreadable_model(tmp_path, capsys, content, match):
    src = tmp_path / "m.onnx"
    if content is not None:
        src.write_bytes(content)
    assert cli_main(["convert", str(src), "-o", str(tmp_path / "o.onnx")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and match in err[0] and str(src) in err[0]


def test_check_model_recognises_pre_existing_failures_of_a_path_original(tmp_path):
    """A failure the original model already has is reported as pre-existing, whether the
    original is given as a ModelProto or as a path."""
    from onnx_slice_tools.api import check_model
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.INT64, [2])]  # Relu gives float
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "orig.onnx"
    onnx.save(model, path)
    for original in (model, path, str(path)):
        checks = check_model(model, original=original)
        assert checks["strict_shape_inference"].startswith("skipped: the original fails it too: "), (original, checks)
    assert check_model(model)["strict_shape_inference"].startswith("failed: ")


def test_model_run_catches_a_wrong_conversion():
    """The whole-model comparison is not a formality: a converted model whose Slice step was
    tampered with is reported, output by output."""
    from onnx_slice_tools.verification.compare import compare_models
    model = _tiny_model([0, 0], [0, 0], [1, 2], {"begin_mask": 3, "end_mask": 3}, extra_use=True)
    result = convert(model)
    assert result.report.model_checks["model_run"] == "passed"
    bad = onnx.ModelProto()
    bad.CopyFrom(result.model)
    steps = next(t for t in bad.graph.initializer if list(onnx.numpy_helper.to_array(t)) == [2])
    steps.CopyFrom(onnx.numpy_helper.from_array(np.array([3], dtype=np.int64), steps.name))
    comparison = compare_models(model, bad)
    assert comparison.status == "mismatch"
    assert set(comparison.outputs) == {"y", "z"}
    assert all("shape (4, 3) vs (4, 2) (reference vs onnxruntime)" in v for v in comparison.outputs.values()), \
        comparison.outputs


@pytest.mark.parametrize("source_opset, target", [(13, 17), (11, 13), (10, 11)])
def test_opset_argument_converts_the_model(source_opset, target):
    """``opset=`` moves the whole model to that opset (onnx.version_converter), then lowers for it."""
    model = _tiny_model([0, -1], [0, 0], [1, 1], {"begin_mask": 1, "end_mask": 1, "shrink_axis_mask": 2},
                        extra_use=True, opset=source_opset)
    result = convert(model, opset=target)
    assert result.ok, result.report.to_json()
    assert {o.domain: o.version for o in result.model.opset_import} == {"": target}
    x = np.arange(24, dtype=np.float32).reshape(4, 6) - 10
    y, z = _run(result.model, {"x": x})
    np.testing.assert_array_equal(y, x[:, -1])
    np.testing.assert_array_equal(z, np.maximum(x[:, -1], 0))


def test_opset_the_converter_cannot_reach_is_a_clear_error():
    from onnx_slice_tools.errors import ModelError
    model = _tiny_model([0], [1], [1], {}, extra_use=True, opset=17)
    with pytest.raises(ModelError, match="cannot convert to opset 12: no adapter for Relu from opset 14"):
        convert(model, opset=12)


def test_old_opset_without_target_is_refused():
    from onnx_slice_tools.errors import ModelError
    model = _tiny_model([0], [1], [1], {}, opset=10)
    with pytest.raises(ModelError, match="opset 10.*opset=11"):
        convert(model)


@pytest.mark.parametrize("opset", [11, 13])
def test_strided_slice_inside_a_model_local_function(opset):
    """Functions cannot hold initializers: the lowering's constants become Constant nodes
    inside the function body."""
    consts = [helper.make_node("Constant", [], [n], value=helper.make_tensor(n, TensorProto.INT32, [3], v))
              for n, v in (("b", [0, 1, 0]), ("e", [0, 0, 0]), ("s", [1, 1, -1]))]
    ss = helper.make_node("StridedSlice", ["x", "b", "e", "s"], ["y"], domain=TF_DOMAIN,
                          new_axis_mask=1, begin_mask=4, end_mask=6)
    fn = helper.make_function("local", "Flip", ["x"], ["y"], consts + [ss],
                              [helper.make_opsetid("", opset), helper.make_opsetid(TF_DOMAIN, 1)])
    call = helper.make_node("Flip", ["x"], ["y"], domain="local")
    graph = helper.make_graph([call], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, functions=[fn], opset_imports=[
        helper.make_opsetid("", opset), helper.make_opsetid("local", 1), helper.make_opsetid(TF_DOMAIN, 1)])
    model.ir_version = 8
    result = convert(model)
    assert result.ok, result.report.to_json()
    assert result.report.records[0].graph == "function local::Flip"
    body = result.model.functions[0]
    assert "StridedSlice" not in [n.op_type for n in body.node]
    assert {"Slice", "Unsqueeze"} <= {n.op_type for n in body.node}
    assert TF_DOMAIN not in {o.domain for o in result.model.opset_import}
    # checked in place through an extra function output, per call; the converted model has no taps
    assert result.report.model_checks["model_run"] == "passed"
    assert result.report.inplace_of(0) == "passed"
    assert list(body.output) == ["y"] and list(result.model.graph.node[0].output) == ["y"]
    x = np.arange(15, dtype=np.float32).reshape(3, 5)
    np.testing.assert_array_equal(_run(result.model, {"x": x})[0], x[None, 1:, ::-1])


def test_model_of_a_newer_ir_version_is_verified_at_the_one_saved():
    """A model saved by a newer onnx (IR 14 where onnxruntime runs up to 13) is checked in place
    at the IR version the output is saved with -- not skipped as "cannot load"."""
    from onnx_slice_tools.verification.lowerings import max_supported_ir_version
    model = _tiny_model([1, 0], [3, 5], [1, 2], {})
    model.ir_version = max_supported_ir_version() + 1
    result = convert(model)
    assert result.report.model_checks["model_run"] == "passed", result.report.model_checks
    assert result.report.verdict == "verified" and result.model.ir_version == max_supported_ir_version()


@pytest.mark.parametrize("declared", [None, ["m", 6]])
def test_graph_input_that_is_also_an_output_keeps_its_declaration(tmp_path, declared):
    """onnx-ir reads an input that is also a graph output as one value with the output's
    declaration; the converted model keeps the input as it was, and is verified."""
    model = _tiny_model([1], [3], [1], {}, shape=("n", 6))
    model.graph.output.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, declared))
    del model.graph.output[0].type.tensor_type.shape.dim[:]
    model.graph.output[0].type.tensor_type.shape.dim.add().dim_param = "k"
    model.graph.output[0].type.tensor_type.shape.dim.add().dim_value = 6
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    for source in (model, path):
        result = convert(source)
        assert result.report.model_checks["structure"] == "passed", result.report.model_checks
        assert result.model.graph.input[0] == model.graph.input[0]
        assert result.report.verdict == "verified", result.report.verdict
