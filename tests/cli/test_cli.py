"""The command line holds up: every bad input or argument is one stderr line naming the file
(node, field) with exit 2; generated names never collide; --opset works around subgraphs and
functions; output is readable and exact.  One test per case found by a tester."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_slice_tools.cli.main import build_parser, main as cli_main
from onnx_slice_tools.errors import one_line
from onnx_slice_tools.frontends.tfexport import TF_DOMAIN
from pausing import HANG_GUARD_S  # subprocess timeouts: hang guards only, never a verdict

MODELS = Path(__file__).resolve().parents[2] / "models"


def _slice_model(*, nodes=None, inits=None, inputs=None, opset=17, name="ss", ss_inputs=("x", "b", "e", "s"),
                 outputs=("y",), masks=None, extra_inits=()):
    """x[4, 6] -> StridedSlice (x[:, 1:5:2] unless masks/inits say otherwise) -> y."""
    inits = inits if inits is not None else [helper.make_tensor(n, TensorProto.INT64, [2], v) for n, v in
                                             (("b", [0, 1]), ("e", [0, 5]), ("s", [1, 2]))]
    masks = masks if masks is not None else {"begin_mask": 1, "end_mask": 1}
    if nodes is None:
        nodes = [helper.make_node("StridedSlice", list(ss_inputs), list(outputs), name=name, domain=TF_DOMAIN,
                                  **masks)]
    inputs = inputs or [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])]
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                                                   for o in outputs if o],
                              initializer=list(inits) + list(extra_inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid(TF_DOMAIN, 1)])
    model.ir_version = 8
    return model


def _run_cli(argv, capfd):
    """(exit code, stdout, stderr lines) with native output on file descriptors included."""
    code = cli_main(argv)
    out, err = capfd.readouterr()
    return code, out, [line for line in err.splitlines() if line.strip()]


def _assert_one_line(err, *needles):
    assert len(err) == 1, err
    assert "internal error" not in err[0] and "Traceback" not in err[0]
    for n in needles:
        assert n in err[0], (n, err[0])


def _convert_bad(tmp_path, capfd, data: bytes, *needles, name="m.onnx"):
    src = tmp_path / name
    src.write_bytes(data)
    out = tmp_path / "out.onnx"
    code, _, err = _run_cli(["convert", str(src), "-o", str(out)], capfd)
    assert code == 2, err
    _assert_one_line(err, one_line(str(src)), *needles)
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == [name]
    assert src.read_bytes() == data
    return err[0]


# --------------------------------------------------------------------------- unusable models: exit 2, one line

def test_negative_declared_dim_is_refused_before_shape_inference(tmp_path, capfd):
    m = _slice_model(inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, -6])])
    _convert_bad(tmp_path, capfd, m.SerializeToString(), "input 'x'", "dim 1 is -6")


def test_invalid_utf8_in_a_string_is_refused(tmp_path, capfd):
    data = _slice_model(name="ssNAME").SerializeToString().replace(b"ssNAME", b"ss\xff\xfeME")
    m = onnx.ModelProto()
    m.ParseFromString(data)
    assert isinstance(m.graph.node[0].name, bytes)  # upb hands invalid UTF-8 over without a check
    _convert_bad(tmp_path, capfd, data, "not valid UTF-8", "name")


def test_strided_slice_without_outputs(tmp_path, capfd):
    m = _slice_model(outputs=())
    _convert_bad(tmp_path, capfd, m.SerializeToString(), "node 'ss'", "outputs", "no output")


def test_fifth_strided_slice_input_is_an_error_not_dropped(tmp_path, capfd):
    m = _slice_model(ss_inputs=("x", "b", "e", "s", "s"))
    _convert_bad(tmp_path, capfd, m.SerializeToString(), "node 'ss'", "inputs", "got 5")


def test_read_node_checks_arity_too():
    import onnx_ir as ir
    from onnx_slice_tools.errors import StridedSliceError
    from onnx_slice_tools.rewrite.ir_pass import read_node
    node = ir.from_proto(_slice_model(ss_inputs=("x", "b", "e", "s", "s"))).graph.node(0)
    with pytest.raises(StridedSliceError, match="inputs.*got 5"):
        read_node(node, "tf")


def test_nul_in_external_data_location(tmp_path, capfd):
    m = _slice_model()
    t = m.graph.initializer[0]
    t.ClearField("int64_data")
    t.data_location = TensorProto.EXTERNAL
    t.external_data.add(key="location", value="w\x00.bin")
    _convert_bad(tmp_path, capfd, m.SerializeToString(), "initializer 'b'", "NUL")


def test_absurdly_large_index_tensor_is_refused_by_its_dims(tmp_path, capfd):
    m = _slice_model()
    t = m.graph.initializer[0]
    t.ClearField("int64_data")
    t.ClearField("dims")
    t.dims.append(2 ** 40)
    t.data_location = TensorProto.EXTERNAL
    t.external_data.add(key="location", value="b.bin")
    _convert_bad(tmp_path, capfd, m.SerializeToString(), "initializer 'b'", str(2 ** 40))


def test_empty_file(tmp_path, capfd):
    _convert_bad(tmp_path, capfd, b"", "empty file")


def test_graph_proto_saved_as_onnx(tmp_path, capfd):
    _convert_bad(tmp_path, capfd, _slice_model().graph.SerializeToString(), "not an ONNX model")


def test_cycle(tmp_path, capfd):
    nodes = [helper.make_node("Relu", ["z"], ["a"], name="r1"), helper.make_node("Relu", ["a"], ["z"], name="r2"),
             helper.make_node("Add", ["x", "z"], ["y"], name="add")]
    _convert_bad(tmp_path, capfd, _slice_model(nodes=nodes).SerializeToString(), "cycle")


def test_undefined_input_name(tmp_path, capfd):
    nodes = [helper.make_node("Add", ["x", "nowhere"], ["y"], name="add")]
    _convert_bad(tmp_path, capfd, _slice_model(nodes=nodes).SerializeToString(), "node 'add'", "'nowhere'")


def test_sequence_typed_input_is_not_supported(tmp_path, capfd):
    seq = helper.make_tensor_sequence_value_info("x", TensorProto.FLOAT, None)
    m = _slice_model(inputs=[seq])
    _convert_bad(tmp_path, capfd, m.SerializeToString(), "input 'x'", "not supported")


def test_weights_whose_size_does_not_match_their_shape(tmp_path, capfd):
    w = numpy_helper.from_array(np.ones(5, np.float32), "w")
    w.dims[0] = 6
    m = _slice_model(extra_inits=[w])
    _convert_bad(tmp_path, capfd, m.SerializeToString(), "initializer 'w'", "raw_data has 20 bytes")


def test_tensor_data_in_the_field_of_another_type(tmp_path, capfd):
    """A flipped data_type (here FLOAT4E2M1 over int64_data): onnx's numpy_helper asserts."""
    m = _slice_model()
    m.graph.initializer[2].data_type = TensorProto.FLOAT4E2M1
    _convert_bad(tmp_path, capfd, m.SerializeToString(), "initializer 's'", "cannot be in int64_data")


def test_attribute_without_type(tmp_path, capfd):
    m = _slice_model()
    m.graph.node[0].attribute[0].type = onnx.AttributeProto.UNDEFINED
    _convert_bad(tmp_path, capfd, m.SerializeToString(), "node 'ss'", "begin_mask", "no type")


def test_a_file_name_with_a_newline_stays_one_line(tmp_path, capfd):
    line = _convert_bad(tmp_path, capfd, b"", "empty file", name="two\nlines.onnx")
    assert "two\\nlines.onnx" in line


@pytest.mark.parametrize("command", [["inspect"], ["verify"]])
def test_other_commands_refuse_unusable_models_in_one_line(tmp_path, capfd, command):
    src = tmp_path / "m.onnx"
    src.write_bytes(_slice_model(inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1])])
                    .SerializeToString())
    code, _, err = _run_cli(command + [str(src)], capfd)
    assert code == 2
    _assert_one_line(err, str(src), "dim 0 is -1")


def test_validation_accepts_every_sample_model():
    from onnx_slice_tools.io.validate import validate_model
    for f in sorted(MODELS.glob("*.onnx")):
        validate_model(onnx.load(f), f)


# --------------------------------------------------------------------------- generated names

def _ort_run(path_or_model, feeds):
    data = path_or_model.SerializeToString() if isinstance(path_or_model, onnx.ModelProto) else str(path_or_model)
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.mark.parametrize("verify", [False, True])
def test_generated_names_never_collide(tmp_path, capfd, verify):
    """Two StridedSlice nodes sharing a node name, a value named like a generated output
    (``ss/Slice:0``) and an initializer named like a generated constant (``sst0/c0``)."""
    inits = [helper.make_tensor(n, TensorProto.INT64, [2], v) for n, v in
             (("b", [0, 1]), ("e", [0, 5]), ("s", [1, 2]), ("b2", [1, 0]), ("e2", [3, 0]), ("s2", [1, -1]))]
    inits.append(numpy_helper.from_array(np.full((1,), 7.0, np.float32), "sst0/c0"))
    nodes = [helper.make_node("StridedSlice", ["x", "b", "e", "s"], ["ss/Slice:0"], name="ss", domain=TF_DOMAIN,
                              begin_mask=1, end_mask=1),
             helper.make_node("StridedSlice", ["x", "b2", "e2", "s2"], ["y2"], name="ss", domain=TF_DOMAIN,
                              begin_mask=2, end_mask=2),
             helper.make_node("Add", ["ss/Slice:0", "sst0/c0"], ["y"], name="add")]
    m = _slice_model(nodes=nodes, inits=inits)
    m.graph.output.append(helper.make_tensor_value_info("y2", TensorProto.FLOAT, None))
    src, out = tmp_path / "m.onnx", tmp_path / "o.onnx"
    onnx.save(m, src)
    code, _, err = _run_cli(["convert", str(src), "-o", str(out)] + ([] if verify else ["--no-verify"]), capfd)
    assert code == 0 and not err, err
    converted = onnx.load(out)
    names = [n.name for n in converted.graph.node]
    assert len(names) == len(set(names))
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    y, y2 = _ort_run(out, {"x": x})
    np.testing.assert_array_equal(y, x[:, 1:5:2] + 7)
    np.testing.assert_array_equal(y2, x[1:3, ::-1])


def test_name_allocator_is_unique_across_graphs_and_functions():
    import onnx_ir as ir
    from onnx_slice_tools.graphs.names import NameAllocator
    body = helper.make_graph([helper.make_node("Relu", ["x"], ["inner"], name="in_body")], "b", [],
                             [helper.make_tensor_value_info("inner", TensorProto.FLOAT, None)])
    fn = helper.make_function("local", "F", ["fx"], ["fy"], [helper.make_node("Relu", ["fx"], ["fy"], name="fn")],
                              [helper.make_opsetid("", 17)])
    graph = helper.make_graph([helper.make_node("If", ["c"], ["y"], name="if", then_branch=body, else_branch=body)],
                              "g", [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                                    helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, functions=[fn], opset_imports=[helper.make_opsetid("", 17),
                                                                    helper.make_opsetid("local", 1)])
    names = NameAllocator.for_model(ir.from_proto(model))
    for taken in ("inner", "in_body", "fx", "fy", "fn", "if", "c", "x", "y"):
        assert names.fresh(taken) == f"{taken}_1"
    assert names.fresh("inner") == "inner_2" and names.fresh("new") == "new"


# --------------------------------------------------------------------------- --opset

def _body_slice(prefix: str, out: str):
    """Constant begin/end/strides and a StridedSlice x[:, ::-1] reading the outer x."""
    consts = [helper.make_node("Constant", [], [f"{prefix}{k}"], value=helper.make_tensor(
        f"{prefix}{k}", TensorProto.INT64, [2], v)) for k, v in (("b", [0, 0]), ("e", [0, 0]), ("s", [1, -1]))]
    ss = helper.make_node("StridedSlice", ["x", f"{prefix}b", f"{prefix}e", f"{prefix}s"], [out],
                          name=f"{prefix}ss", domain=TF_DOMAIN, begin_mask=3, end_mask=3)
    return consts + [ss]


def _control_flow_model(opset: int):
    """y1 = If(c, x[:, ::-1], x) ; y2 = Loop(2 iterations) scanning x[:, ::-1]; y3 = Flip(x)
    (a function holding a StridedSlice); all with x[3, 4]."""
    then_g = helper.make_graph(_body_slice("t", "ty"), "then", [],
                               [helper.make_tensor_value_info("ty", TensorProto.FLOAT, None)])
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["ey"])], "else", [],
                               [helper.make_tensor_value_info("ey", TensorProto.FLOAT, None)])
    loop_body = helper.make_graph(
        _body_slice("l", "ly") + [helper.make_node("Identity", ["cond"], ["cond_out"])], "loop",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("ly", TensorProto.FLOAT, None)])
    fn = helper.make_function("local", "Flip", ["x"], ["y"], _body_slice("f", "y"),
                              [helper.make_opsetid("", opset), helper.make_opsetid(TF_DOMAIN, 1)])
    nodes = [helper.make_node("If", ["c"], ["y1"], name="if", then_branch=then_g, else_branch=else_g),
             helper.make_node("Constant", [], ["trip"], value=helper.make_tensor("trip", TensorProto.INT64, [], [2])),
             helper.make_node("Loop", ["trip", ""], ["y2"], name="loop", body=loop_body),
             helper.make_node("Flip", ["x"], ["y3"], name="call", domain="local")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                                           helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                              [helper.make_tensor_value_info(y, TensorProto.FLOAT, None) for y in ("y1", "y2", "y3")])
    model = helper.make_model(graph, functions=[fn], opset_imports=[
        helper.make_opsetid("", opset), helper.make_opsetid(TF_DOMAIN, 1), helper.make_opsetid("local", 1)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("source, target", [(13, 17), (17, 21)])
def test_opset_upgrade_with_strided_slice_in_if_loop_and_function(tmp_path, capfd, source, target):
    src, out = tmp_path / "m.onnx", tmp_path / "o.onnx"
    onnx.save(_control_flow_model(source), src)
    code, _, err = _run_cli(["convert", str(src), "-o", str(out), "--opset", str(target)], capfd)
    assert code == 0 and not err, err
    converted = onnx.load(out)
    assert {o.domain: o.version for o in converted.opset_import}[""] == target
    assert {o.domain: o.version for o in converted.functions[0].opset_import}[""] == target
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for c in (True, False):
        y1, y2, y3 = _ort_run(out, {"c": np.array(c), "x": x})
        np.testing.assert_array_equal(y1, x[:, ::-1] if c else x)
        np.testing.assert_array_equal(y2, np.stack([x[:, ::-1]] * 2))  # the ONNX spec stacks scan outputs
        np.testing.assert_array_equal(y3, x[:, ::-1])


def test_opset_downgrade_of_a_function_and_main_graph(tmp_path, capfd):
    """17 -> 13 where onnx has adapters: the function body is converted on its own."""
    m = _control_flow_model(17)
    del m.graph.node[:3]
    del m.graph.output[:2]
    src, out = tmp_path / "m.onnx", tmp_path / "o.onnx"
    onnx.save(m, src)
    code, _, err = _run_cli(["convert", str(src), "-o", str(out), "--opset", "13"], capfd)
    assert code == 0 and not err, err
    converted = onnx.load(out)
    assert {o.domain: o.version for o in converted.functions[0].opset_import}[""] == 13
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(_ort_run(out, {"c": np.array(True), "x": x})[0], x[:, ::-1])


def test_opset_upgrade_keeps_external_weights_readable(tmp_path, capfd):
    """The opset is converted after the rewrite through a new onnx-ir model: external data
    must still resolve against the input's folder."""
    w = numpy_helper.from_array(np.arange(24, dtype=np.float32).reshape(4, 6), "w")
    nodes = [helper.make_node("Add", ["x", "w"], ["a"]),
             helper.make_node("StridedSlice", ["a", "b", "e", "s"], ["y"], name="ss", domain=TF_DOMAIN,
                              begin_mask=1, end_mask=1)]
    m = _slice_model(nodes=nodes, extra_inits=[w], opset=13)
    (tmp_path / "in").mkdir()
    onnx.save(m, tmp_path / "in" / "m.onnx", save_as_external_data=True, location="m.bin", size_threshold=0)
    out = tmp_path / "out" / "o.onnx"
    code, _, err = _run_cli(["convert", str(tmp_path / "in" / "m.onnx"), "-o", str(out), "--opset", "17"], capfd)
    assert code == 0 and not err, err
    x = np.ones((4, 6), np.float32)
    np.testing.assert_array_equal(_ort_run(out, {"x": x})[0], (x + np.arange(24).reshape(4, 6))[:, 1:5:2])


@pytest.mark.parametrize("model, target, op", [("if", 13, "If from opset 16"), ("concat", 12, "Concat from opset 13")])
def test_unreachable_opset_is_one_line_naming_the_op(tmp_path, capfd, model, target, op):
    if model == "if":
        m = _control_flow_model(17)
    else:
        m = _slice_model(nodes=[helper.make_node("Concat", ["x", "x"], ["y"], axis=0)], opset=13)
    src = tmp_path / "m.onnx"
    onnx.save(m, src)
    code, _, err = _run_cli(["convert", str(src), "-o", str(tmp_path / "o.onnx"), "--opset", str(target)], capfd)
    assert code == 2
    _assert_one_line(err, str(src), f"cannot convert to opset {target}: no adapter for {op}")
    assert "$" not in err[0]


# --------------------------------------------------------------------------- arguments

@pytest.mark.parametrize("argv, needle", [
    (["batch", "in", "-o", "out", "--jobs", "-1"], "--jobs"),
    (["batch", "in", "-o", "out", "--jobs", "0"], "--jobs"),
    (["verify", "a", "b", "--trials", "0"], "--trials"),
    (["verify", "a", "b", "--trials", "-2"], "--trials"),
    (["convert", "a", "-o", "b", "--opset", "0"], "--opset"),
    (["convert", "a", "-o", "b", "--opset", "x"], "--opset"),
    (["convert", "a", "-o", "b", "--opset", "10"], "use --opset 11"),
    (["batch", "in", "-o", "out", "--opset", "9"], "use --opset 11"),
    (["convert", "a", "-o", "b", "--opset", "1000"], "knows opsets up to"),
    (["explain", "--begin", "1,a", "--end", "2", "--strides", "1"], "--begin: 'a' is not an integer"),
    (["explain", "--begin", "0,1", "--end", "0", "--strides", "1,1"], "same length"),
    (["explain", "x[1]", "--begin-mask", "3"], "masks only go with --begin"),
    (["explain", "x[1]", "--shape", "3,a-b"], "--shape"),
    (["explain", "x[1]", "--shape", "-3"], "--shape"),
    (["explain", "--begin", "0", "--end", "1", "--strides", "1", "--begin-mask", "z"], "--begin-mask"),
    (["explain", "x[1:2:0]"], "strides"),
    (["explain", "x[1:3]", "--flavor", "tflite", "--offset"], "--offset"),  # was silently ignored
    (["convert", "a", "-o", "-"], "writing to stdout is not supported"),  # was a file named '-'
    (["convert", "a", "-o", "out.onnx/"], "names a folder"),  # was written as out.onnx
    (["convert", "a", "-o", "out/.."], "names a folder"),
    (["convert", "a", "-o", "b", "--verify-memory", "inf"], "finite"),  # was an OverflowError traceback
    (["convert", "a", "-o", "b", "--verify-memory", "nan"], "finite"),
    (["convert", "a", "-o", "b", "--verify-memory", "1e-300"], "at least one byte"),
])
def test_bad_arguments_exit_2_in_one_line(capfd, argv, needle):
    with pytest.raises(SystemExit) as exc:  # argparse's own errors exit from parse_args
        raise SystemExit(cli_main(argv))
    code = exc.value.code
    out, err = capfd.readouterr()
    lines = err.strip().splitlines()
    assert code == 2, (code, err)
    _assert_one_line(lines, needle)


@pytest.mark.parametrize("argv, spec", [
    (["--begin", "0,1", "--end", "2,3", "--begin-mask", "2", "--shape", "4,5"], "x[0:2, :3]"),  # was UnboundLocalError
    (["--begin", "1", "--end", "2", "--offset", "--shape", "4"], "x[1:1+2]"),
])
def test_explain_tflite_with_explicit_fields(capfd, argv, spec):
    assert cli_main(["explain", "--flavor", "tflite", *argv]) == 0
    out, err = capfd.readouterr()
    assert f"spec (tflite): {spec}" in out and not err


def test_old_model_opset_message_names_the_flag(tmp_path, capfd):
    src = tmp_path / "m.onnx"
    onnx.save(_slice_model(opset=10), src)
    code, _, err = _run_cli(["convert", str(src), "-o", str(tmp_path / "o.onnx")], capfd)
    assert code == 2
    _assert_one_line(err, str(src), "--opset 11")


def test_version(capsys):
    from onnx_slice_tools import __version__
    with pytest.raises(SystemExit) as exc:
        cli_main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"onnx-slice-tools {__version__}"


def test_every_argument_has_help_and_help_lists_exit_codes(capsys):
    import argparse
    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subs.choices.items():
        for action in sub._actions:
            assert action.help, (name, action.dest)
        assert "exit codes" in sub.format_help() and "141" in sub.format_help()
    assert "exit codes" in parser.format_help()


# --------------------------------------------------------------------------- output

def test_explain_and_inspect_print_index_notation_verbatim(tmp_path, capfd):
    """``:-1:`` is an index, not rich's thumbs-down emoji; ``[0]`` is not markup."""
    code, out, err = _run_cli(["explain", "x[:, :-1:2]", "--shape", "3,4"], capfd)
    assert code == 0 and not err
    assert "x[:, :-1:2]" in out and "\N{THUMBS DOWN SIGN}" not in out
    src = tmp_path / "m.onnx"
    onnx.save(_slice_model(inits=[helper.make_tensor(n, TensorProto.INT64, [2], v) for n, v in
                                  (("b", [0, 0]), ("e", [0, -1]), ("s", [1, 2]))], masks={"begin_mask": 3,
                                                                                          "end_mask": 1}), src)
    code, out, err = _run_cli(["inspect", str(src)], capfd)
    assert code == 0 and not err
    assert "x[:, :-1:2]" in out and "\N{THUMBS DOWN SIGN}" not in out


def test_inspect_json_shapes_are_lists_and_use_convert_shape_inference(tmp_path, capfd):
    """The StridedSlice reads a Relu's output, whose shape only shape inference knows."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("StridedSlice", ["r", "b", "e", "s"], ["y"], name="ss", domain=TF_DOMAIN,
                              begin_mask=1, end_mask=1)]
    m = _slice_model(nodes=nodes, inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6])])
    src = tmp_path / "m.onnx"
    onnx.save(m, src)
    code, out, err = _run_cli(["inspect", str(src), "--json"], capfd)
    assert code == 0 and not err
    row = json.loads(out)[0]
    assert row["input_shape"] == ["N", 6] and row["output_shape"] == ["N", 2]
    code, out, err = _run_cli(["inspect", str(src)], capfd)
    assert "unknown rank" not in out and "[N, 6]" in out


def test_batch_table_fits_80_columns_and_errors_go_below(tmp_path, capfd, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    src = tmp_path / "in"
    src.mkdir()
    for f in ("tf_channel_flip.onnx", "openvino_yolo_focus.onnx"):
        (src / f).write_bytes((MODELS / f).read_bytes())
    (src / "broken.onnx").write_bytes(b"")
    code, out, _ = _run_cli(["batch", str(src), "-o", str(tmp_path / "out"), "--jobs", "1"], capfd)
    assert code == 2
    table = [line for line in out.splitlines() if line.startswith(("┃", "│"))]
    assert len(table) == 4, out  # header + one row per model: nothing wraps
    assert max(len(line) for line in table) <= 80, out
    assert re.search(r"^broken\.onnx: .*empty file", out, re.M), out
    assert "summary: 2 verified, 1 invalid" in out


def test_batch_of_an_empty_folder_says_so_in_one_line(tmp_path, capfd):
    (tmp_path / "empty").mkdir()
    code, out, err = _run_cli(["batch", str(tmp_path / "empty"), "-o", str(tmp_path / "out")], capfd)
    # a pipeline must notice: exit 2, one line naming the folder, no empty table
    assert code == 2 and err == [(f"no models (.onnx, .tflite, .keras, .h5 or SavedModel folders) under "
                                  f"{tmp_path / 'empty'}")], (code, err)
    assert "┃" not in out and "summary" not in out


def test_broken_pipe_is_quiet(tmp_path):
    import subprocess
    import sys
    cmd = [sys.executable, "-m", "onnx_slice_tools", "inspect", str(MODELS / "openvino_yolo_focus.onnx"), "--json"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader went away before the first byte
    err = proc.stderr.read().decode()
    assert proc.wait() == 141 and err == "", err


def test_stderr_stays_clean_of_warnings_and_native_logs(tmp_path, capfd, monkeypatch):
    """A successful conversion prints nothing on stderr (file descriptor 2 included); the
    report keeps what was captured."""
    import logging
    import os
    import warnings

    from onnx_slice_tools.cli import main as cli
    src, out, rep = tmp_path / "m.onnx", tmp_path / "o.onnx", tmp_path / "r.json"
    onnx.save(_slice_model(), src)
    real = cli.cmd_convert

    def noisy(args):  # a Python warning, a log record and a native write during the command
        warnings.warn("a library warning", UserWarning)
        logging.getLogger("onnx_ir").warning("a log record")
        os.write(2, b"a native log line\n")
        return real(args)
    monkeypatch.setattr(cli, "cmd_convert", noisy)
    code, _, err = _run_cli(["convert", str(src), "-o", str(out), "--report", str(rep)], capfd)
    assert code == 0 and err == [], err
    seen = json.loads(rep.read_text())["warnings"]
    for text in ("a library warning", "a log record", "a native log line"):
        assert any(text in w for w in seen), (text, seen)


def test_input_is_never_modified(tmp_path, capfd):
    src = tmp_path / "m.onnx"
    onnx.save(_slice_model(), src)
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    for argv in (["convert", str(src), "-o", str(tmp_path / "o.onnx")], ["inspect", str(src)]):
        assert cli_main(argv) == 0
    assert hashlib.sha256(src.read_bytes()).hexdigest() == digest


def test_convert_report_on_stdout_and_quiet(tmp_path, capfd):
    """``--report -``: stdout holds only the JSON report, the result line goes to stderr;
    ``--quiet``: nothing is printed on success; both still write the model."""
    src = tmp_path / "m.onnx"
    onnx.save(_slice_model(), src)
    assert cli_main(["convert", str(src), "-o", str(tmp_path / "a.onnx"), "--report", "-"]) == 0
    out, err = capfd.readouterr()
    report = json.loads(out)
    assert report["verdict"] == "verified" and report["rewritten"] == 1
    assert err.count("\n") == 1 and err.startswith(f"{src} -> ") and "verified" in err
    assert cli_main(["convert", str(src), "-o", str(tmp_path / "b.onnx"), "--quiet"]) == 0
    assert capfd.readouterr() == ("", "")
    assert (tmp_path / "a.onnx").exists() and (tmp_path / "b.onnx").exists()


def test_a_report_through_dev_stdout_is_refused_naming_the_dash(tmp_path):
    """``--report /dev/stdout`` (a symlink) is never written through; the one line says what to
    give instead when it leads to a pipe."""
    import subprocess
    import sys
    src = tmp_path / "m.onnx"
    onnx.save(_slice_model(), src)
    proc = subprocess.run([sys.executable, "-m", "onnx_slice_tools", "convert", str(src), "-o", str(tmp_path / "o.onnx"),
                           "--report", "/dev/stdout"], capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "is a symlink" in proc.stderr and "give '-'" in proc.stderr
    assert not (tmp_path / "o.onnx").exists()
