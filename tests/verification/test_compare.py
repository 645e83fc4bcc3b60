"""`verify ORIGINAL CONVERTED` and ``compare_models``: the one float rule, --rtol,
--input-shapes, inputs that do not line up, paths or ModelProtos."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnx_slice_tools import convert
from onnx_slice_tools.cli.main import main as cli_main
from onnx_slice_tools.errors import ModelError
from onnx_slice_tools.verification.compare import compare_models

TF_DOMAIN = "ai.onnx.converters.tensorflow"


def matmul_slice(n: int = 256, name: str = "a", elem=T.FLOAT, dims=None) -> onnx.ModelProto:
    """y = (a @ w)[0:n-30, 3:5]: float arithmetic (a MatMul summing n products) then data movement."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((n, n)).astype(np.float32), "w")
    consts = [numpy_helper.from_array(np.array(v, np.int64), k)
              for v, k in (([0, 3], "s"), ([n - 30, 5], "e"), ([1, 1], "st"))]
    nodes = [helper.make_node("MatMul", [name, "w"], ["m"]),
             helper.make_node("StridedSlice", ["m", "s", "e", "st"], ["y"], domain=TF_DOMAIN)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(name, elem, dims or [n, n])],
                          [helper.make_tensor_value_info("y", T.FLOAT, None)], [w, *consts])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TF_DOMAIN, 1)])
    m.ir_version = 9
    return m


def scaled(model: onnx.ModelProto, factor: float) -> onnx.ModelProto:
    """``model`` with its weight ``w`` times ``factor``: every output off by ``factor - 1``, relatively."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for t in out.graph.initializer:
        if t.name == "w":
            t.CopyFrom(numpy_helper.from_array((numpy_helper.to_array(t) * np.float32(factor)), "w"))
    return out


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("cmp")
    original = matmul_slice()
    converted = convert(original).model
    onnx.save(original, d / "orig.onnx")
    onnx.save(converted, d / "conv.onnx")
    onnx.save(scaled(converted, 1 + 2e-4), d / "off_2e-4.onnx")
    onnx.save(scaled(converted, 1.05), d / "off_5e-2.onnx")
    return d


def verify(capsys, *argv):
    capsys.readouterr()
    try:
        code = cli_main(["verify", *map(str, argv)])
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_correct_matmul_then_slice_passes_under_the_rule(pair, capsys):
    code, out, err = verify(capsys, pair / "orig.onnx", pair / "conv.onnx")
    assert code == 0 and err == "", err
    assert "status: passed" in out
    # MatMul sums 256 products in another order in onnxruntime: within tolerance with its figures
    # (or bitwise, when the two engines happen to round alike); never an element-wise verdict
    assert "ok (bitwise)" in out or "within tolerance: max |diff|" in out, out


def test_a_wrong_weight_fails_and_rtol_decides(pair, capsys):
    code, out, err = verify(capsys, pair / "orig.onnx", pair / "off_5e-2.onnx")
    assert code == 1 and len(err.strip().splitlines()) == 1 and "outputs differ" in err
    assert "values differ by up to" in out
    # 2e-4 off: inside the float32 default, outside --rtol 1e-5, inside --rtol 1e-3
    assert verify(capsys, pair / "orig.onnx", pair / "off_2e-4.onnx")[0] == 0
    assert verify(capsys, pair / "orig.onnx", pair / "off_2e-4.onnx", "--rtol", "1e-5")[0] == 1
    assert verify(capsys, pair / "orig.onnx", pair / "off_2e-4.onnx", "--rtol", "1e-3")[0] == 0


@pytest.mark.parametrize("value", ["-1e-3", "nan", "inf", "abc", ""])
def test_a_bad_rtol_is_one_line_exit_2(pair, capsys, value):
    code, _out, err = verify(capsys, pair / "orig.onnx", pair / "conv.onnx", f"--rtol={value}")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--rtol" in err, err


def test_rtol_and_input_shapes_need_converted(pair, capsys):
    for opt in (["--rtol", "1e-3"], ["--input-shapes", "a:256,256"]):
        code, _, err = verify(capsys, pair / "orig.onnx", *opt)
        assert code == 2 and len(err.strip().splitlines()) == 1 and opt[0] in err and "CONVERTED" in err, err


def test_input_shapes_set_symbolic_dims(tmp_path, capsys):
    original = matmul_slice(dims=["n", 256])
    onnx.save(original, tmp_path / "o.onnx")
    onnx.save(convert(original).model, tmp_path / "c.onnx")
    code, out, err = verify(capsys, tmp_path / "o.onnx", tmp_path / "c.onnx", "--input-shapes", "a:300,256")
    assert code == 0, err
    assert "a[300, 256]" in out and "a[3, 256]" not in out
    code, out, _ = verify(capsys, tmp_path / "o.onnx", tmp_path / "c.onnx")
    assert "a[300, 256]" not in out   # without it: small random sizes


@pytest.mark.parametrize("item, words", [
    ("nope:2,256", "no input 'nope'"),
    ("a:2,3", "dim 0 is fixed at 256"),
    ("a:256,256,1", "rank 2, got 3"),
    ("a:2,x", "sizes must be integers"),
    ("a:-1,256", "sizes must be integers >= 0"),
    ("2,256", "NAME:D1,D2"),
])
def test_bad_input_shapes_are_one_line_exit_2(pair, capsys, item, words):
    code, _, err = verify(capsys, pair / "orig.onnx", pair / "conv.onnx", f"--input-shapes={item}")
    assert code == 2 and len(err.strip().splitlines()) == 1 and words in err and "--input-shapes" in err, err


@pytest.mark.parametrize("other, words", [
    ({"name": "b"}, "only the original has ['a']; only the converted model has ['b']"),
    ({"elem": T.DOUBLE}, "input 'a': element type FLOAT in the original, DOUBLE in the converted model"),
    ({"dims": [256, 256, 1]}, "input 'a': rank 2 in the original, 3 in the converted model"),
])
def test_inputs_that_do_not_line_up_are_refused(pair, tmp_path, capsys, other, words):
    onnx.save(matmul_slice(**other), tmp_path / "other.onnx")
    code, out, err = verify(capsys, pair / "orig.onnx", tmp_path / "other.onnx")
    assert code == 2 and err.count("\n") == 1, err
    assert str(tmp_path / "other.onnx") in err and words in err, err
    assert "KeyError" not in err + out and "outputs differ" not in err + out


def test_compare_models_takes_paths_and_protos(pair):
    by_path = compare_models(str(pair / "orig.onnx"), pair / "conv.onnx")
    by_proto = compare_models(onnx.load(pair / "orig.onnx"), onnx.load(pair / "conv.onnx"))
    mixed = compare_models(onnx.load(pair / "orig.onnx"), str(pair / "conv.onnx"))
    assert by_path.status == by_proto.status == mixed.status == "ok"
    assert compare_models(str(pair / "orig.onnx"), str(pair / "off_5e-2.onnx")).status == "mismatch"
    with pytest.raises(ModelError, match="inputs do not line up"):
        compare_models(matmul_slice(), matmul_slice(name="b"))
    with pytest.raises(ModelError, match="rtol must be"):
        compare_models(matmul_slice(), matmul_slice(), rtol=-1)


def test_an_index_input_is_drawn_inside_its_table():
    """A segment id (int32 input cast to int64 before a 2-row table, as in keras-hub's BERT): the
    comparison draws it inside the table (input_ranges.index_input_ranges), so both models run
    on every trial (64 ids per trial: drawn from -3..3 as before, the original rejected nearly
    every input set)."""
    nodes = [helper.make_node("Cast", ["seg"], ["seg64"], to=T.INT64),
             helper.make_node("Gather", ["table", "seg64"], ["g"]),
             helper.make_node("StridedSlice", ["g", "s", "e", "st"], ["y"], domain=TF_DOMAIN, begin_mask=1,
                              end_mask=1)]
    inits = [numpy_helper.from_array(np.arange(8, dtype=np.float32).reshape(2, 4), "table"),
             *(numpy_helper.from_array(np.array(v, np.int64), k)
               for v, k in (([0, -1], "s"), ([0, -4], "e"), ([1, -1], "st")))]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("seg", T.INT32, ["N"])],
                          [helper.make_tensor_value_info("y", T.FLOAT, None)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TF_DOMAIN, 1)])
    model.ir_version = 9
    converted = convert(model)
    assert converted.report.verdict == "verified", converted.report.verdict
    result = compare_models(model, converted.model, trials=3, input_shapes={"seg": [64]})
    assert result.status == "ok" and len(result.tried) == 3, result
