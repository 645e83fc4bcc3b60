"""``.onnx`` inputs holding the raw slice-update nodes tf2onnx's command line leaves behind
(XlaDynamicUpdateSlice, XlaDynamicSlice, TensorStridedSliceUpdate, StridedSliceGrad; a
``.tflite``'s DYNAMIC_UPDATE_SLICE and GELU): the files are real tf2onnx exports
(make_raw_update_models.py, run once here), converted by the one pipeline a framework input
passes (api._slice_updates), compared with TensorFlow / LiteRT on the same inputs, through
``convert``, ``verify``, ``batch`` and ``inspect``, and mutated into inputs that make an op
invalid (exit 2) or unconvertible (exit 1)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_slice_tools.api import convert
from onnx_slice_tools.cli.main import main as cli_main
from onnx_slice_tools.rewrite.updates import SEAMS
from onnx_slice_tools.verification.runtimes import SHIPPED, onnxruntime_session
from onnx_slice_tools.verification.tolerance import agree

HERE = Path(__file__).parent
FAMILY_OPS = {"XlaDynamicUpdateSlice", "XlaDynamicSlice", "TensorStridedSliceUpdate", "StridedSliceGrad"}
#: case -> the raw ops tf2onnx's command line leaves in it
RAW = {"family": FAMILY_OPS, "kv_cache": {"XlaDynamicUpdateSlice"}, "loop": {"XlaDynamicUpdateSlice"},
       "scatter": {"XlaDynamicUpdateSlice"}, "dus_gelu": {"TFL_DYNAMIC_UPDATE_SLICE", "TFL_GELU"}, "erfc": {"Erfc"}}


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("raw_updates")
    done = subprocess.run([sys.executable, str(HERE / "make_raw_update_models.py"), str(out)], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def _ops(model) -> set:
    out = set()
    todo = [model.graph]
    while todo:
        for n in todo.pop().node:
            out.add((n.domain, n.op_type))
            todo.extend(a.g for a in n.attribute if a.type == onnx.AttributeProto.GRAPH)
    return out


def _raw_left(model) -> set:
    return {op for domain, op in _ops(model) if op in SEAMS and domain in ("", "ai.onnx")}


@pytest.mark.parametrize("case", sorted(RAW))
def test_tf2onnx_command_line_leaves_the_raw_nodes(made, case):
    """The inputs are what users get: tf2onnx 1.17's command line writes the family as raw nodes
    of the default domain (the op types SEAMS reads), which onnxruntime refuses."""
    model = onnx.load(str(made / f"{case}.onnx"))
    assert _raw_left(model) == RAW[case]
    with pytest.raises(Exception):
        onnxruntime_session(model.SerializeToString(), SHIPPED)


@pytest.mark.parametrize("case", sorted(RAW))
def test_convert_rewrites_and_verifies(made, tmp_path, capfd, case):
    out, report = tmp_path / "out.onnx", tmp_path / "report.json"
    assert cli_main(["convert", str(made / f"{case}.onnx"), "-o", str(out), "--report", str(report)]) == 0
    text, err = capfd.readouterr()
    assert err == "" and ", verified (" in text and "NOT" not in text, text
    rep = json.loads(report.read_text())
    assert rep["verdict"] == "verified", rep["model_checks"]
    status = rep["model_checks"]["slice_updates"]
    assert status.startswith("passed") and all(op in status for op in RAW[case]), status
    assert not _raw_left(onnx.load(str(out)))


def _tf_outputs(made: Path, case: str, feeds: dict) -> dict:
    import tensorflow as tf
    fn = tf.saved_model.load(str(made / case)).signatures["serving_default"]
    return {k: v.numpy() for k, v in fn(**{k: tf.constant(v) for k, v in feeds.items()}).items()}


def _bitwise(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("case, positions", [
    ("family", [-(2 ** 31), -3, 0, 1, 7, 15, 16, 40, 2 ** 31 - 1]),
    ("kv_cache", [-9, 0, 3, 7, 8, 100]),
    ("loop", [0, 1, 4, 8, 12]),
])
def test_converted_matches_tensorflow_bitwise(made, tmp_path, case, positions):
    """The converted file against the SavedModel tf2onnx exported, at positions 0, middle, last
    and far out of range on both sides (TensorFlow clamps them): every output bitwise (pure
    data movement)."""
    result = convert(str(made / f"{case}.onnx"))
    assert result.report.verdict == "verified", result.report.problem()
    result.save(tmp_path / "c.onnx")
    session = onnxruntime_session(str(tmp_path / "c.onnx"), SHIPPED)
    rng = np.random.default_rng(0)
    names = [i.name for i in session.get_inputs()]
    shapes = {i.name: i.shape for i in session.get_inputs()}
    for position in positions:
        feeds = {}
        for name in names:
            if name in ("pos", "n"):
                feeds[name] = np.array(position, np.int32)
            else:
                feeds[name] = rng.standard_normal(shapes[name]).astype(np.float32)
        expected = _tf_outputs(made, case, feeds)
        got = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
        assert set(got) == set(expected)
        for k in expected:
            assert _bitwise(got[k], expected[k]), (case, position, k)


def test_scatter_form_matches_tensorflow_bitwise(made, tmp_path):
    """int32 data, int64 run-time starts narrow on both axes (ScatterND with the clamp in the graph)."""
    result = convert(str(made / "scatter.onnx"))
    assert result.report.verdict == "verified"
    assert "ScatterND" in result.report.model_checks["slice_updates"]
    session = onnxruntime_session(result.model.SerializeToString(), SHIPPED)
    rng = np.random.default_rng(1)
    for idx in ([0, 0], [3, 3], [4, 5], [-1, 2], [2 ** 40, -(2 ** 40)], [1, -7]):
        feeds = {"x": rng.integers(-9, 9, (5, 6)).astype(np.int32), "u": rng.integers(-9, 9, (2, 3)).astype(np.int32),
                 "idx": np.array(idx, np.int64)}
        assert _bitwise(session.run(None, feeds)[0], _tf_outputs(made, "scatter", feeds)["y"]), idx


def test_erfc_matches_tensorflow_within_the_float_rule(made):
    """Keras's exact GELU (TensorFlow's Erfc, raw in tf2onnx's export) against TensorFlow, under
    the product's tolerance rule (float arithmetic in two engines)."""
    result = convert(str(made / "erfc.onnx"))
    assert result.report.verdict == "verified" and "1 Erfc as Erf/Sub" in result.report.model_checks["slice_updates"]
    session = onnxruntime_session(result.model.SerializeToString(), SHIPPED)
    x = (np.random.default_rng(3).standard_normal((3, 5)) * 4).astype(np.float32)
    expected = _tf_outputs(made, "erfc", {"x": x})["y"]
    got = session.run(None, {"x": x})[0]
    assert got.shape == expected.shape and got.dtype == expected.dtype and agree(expected, got).ok


def test_tflite_export_matches_litert(made):
    """DYNAMIC_UPDATE_SLICE bitwise against LiteRT; both GELU forms under the product's float rule."""
    from onnx_slice_tools.verification.runtimes import tflite_interpreter
    result = convert(str(made / "dus_gelu.onnx"))
    assert result.report.verdict == "verified"
    session = onnxruntime_session(result.model.SerializeToString(), SHIPPED)
    interpreter = tflite_interpreter((made / "dus_gelu.tflite").read_bytes())
    interpreter.allocate_tensors()
    rng = np.random.default_rng(2)
    for pos in (-(2 ** 31), -4, 0, 3, 7, 9, 2 ** 31 - 1):
        feeds = {"cache": rng.standard_normal((1, 8, 4)).astype(np.float32),
                 "new": rng.standard_normal((1, 1, 4)).astype(np.float32), "pos": np.array(pos, np.int32)}
        for d in interpreter.get_input_details():  # (LiteRT's names are the function's: cache, new, pos)
            interpreter.set_tensor(d["index"], feeds[d["name"]])
        interpreter.invoke()
        theirs = {d["name"]: interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()}
        ours = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
        assert set(ours) == set(theirs) == {"Identity", "Identity_1", "Identity_2"}
        assert _bitwise(ours["Identity"], theirs["Identity"]), pos  # the update: data movement
        for gelu in ("Identity_1", "Identity_2"):
            assert ours[gelu].shape == theirs[gelu].shape and agree(theirs[gelu], ours[gelu]).ok, (pos, gelu)


def test_one_mechanism_same_records_as_the_framework_path(made):
    """The SavedModel itself (tf2onnx's Python API, the framework path) and tf2onnx's command-line
    export of it give the same slice_updates record: one pipeline stage read both."""
    from_framework = convert(str(made / "family"))
    from_onnx = convert(str(made / "family.onnx"))
    assert from_framework.report.verdict == from_onnx.report.verdict == "verified"
    assert from_framework.report.model_checks["slice_updates"] == from_onnx.report.model_checks["slice_updates"]
    assert [(u.op_type, u.form) for u in from_framework.report.updates] == \
        [(u.op_type, u.form) for u in from_onnx.report.updates]


def test_both_representations_and_a_modelproto_input(made):
    """--opset 17 takes the onnx-ir path (the protobuf path declines another opset); a ModelProto
    input is never modified."""
    on_ir = convert(str(made / "kv_cache.onnx"), opset=17)
    assert on_ir.report.path == "onnx-ir" and on_ir.report.verdict == "verified", on_ir.report.problem()
    assert on_ir.report.found == on_ir.report.rewritten == 2 and len(on_ir.report.updates) == 1
    proto = onnx.load(str(made / "kv_cache.onnx"))
    before = proto.SerializeToString()
    for opset in (None, 17):
        result = convert(proto, opset=opset)
        assert result.report.verdict == "verified" and not _raw_left(result.model)
    assert proto.SerializeToString() == before


def test_verify_runs_the_raw_nodes_by_the_reference(made, tmp_path, capfd):
    """``verify ORIGINAL CONVERTED``: the raw original in onnx's reference evaluator (the family
    by semantics/update.py) against the converted file in onnxruntime; a converted file whose
    update lands elsewhere fails (exit 1)."""
    for case in ("family", "dus_gelu"):
        out = tmp_path / f"{case}.onnx"
        assert cli_main(["convert", str(made / f"{case}.onnx"), "-o", str(out), "-q"]) == 0
        assert cli_main(["verify", str(made / f"{case}.onnx"), str(out)]) == 0
        text, _ = capfd.readouterr()
        assert "status: passed" in text, text
        assert cli_main(["verify", str(out)]) == 0  # the converted file alone: checker, inference, loads
        capfd.readouterr()
    bad = onnx.load(str(tmp_path / "dus_gelu.onnx"))
    concat = next(n for n in bad.graph.node if n.op_type == "Concat" and n.output[0] == "Identity")
    concat.input[1], concat.input[2] = concat.input[2], concat.input[1]  # the update written last
    onnx.save(bad, str(tmp_path / "bad.onnx"))
    assert cli_main(["verify", str(made / "dus_gelu.onnx"), str(tmp_path / "bad.onnx")]) == 1
    _, err = capfd.readouterr()
    assert "not shown equivalent" in err


def test_batch_verifies_every_export(made, tmp_path, capfd):
    src = tmp_path / "in"
    src.mkdir()
    for case in RAW:
        shutil.copy(made / f"{case}.onnx", src / f"{case}.onnx")
    assert cli_main(["batch", str(src), "-o", str(tmp_path / "out"), "-q"]) == 0
    rep = json.loads((tmp_path / "out" / "report.json").read_text())
    entries = {Path(e["input"]).stem: e for e in rep["models"]}
    assert set(entries) == set(RAW)
    for case, e in entries.items():
        assert e["status"] == "converted" and e["verdict"] == "verified", e
        assert all(op in e["checks"]["slice_updates"] for op in RAW[case])


def test_inspect_shows_the_family_table(made, capfd):
    assert cli_main(["inspect", str(made / "family.onnx")]) == 0
    text, err = capfd.readouterr()
    assert err == "" and "4 raw tf2onnx node(s)" in text, text
    for op, ops in (("XlaDynamicUpdateSlice", "Concat"), ("XlaDynamicSlice", "Slice"),
                    ("TensorStridedSliceUpdate", "ScatterND"), ("StridedSliceGrad", "ScatterND")):
        line = next(ln for ln in text.splitlines() if f" {op} " in ln)
        assert ops in line, line
    assert cli_main(["inspect", str(made / "kv_cache.onnx"), "--json"]) == 0
    rows = json.loads(capfd.readouterr()[0])
    family = [r for r in rows if "op_type" in r]
    assert [r["op_type"] for r in family] == ["XlaDynamicUpdateSlice"] and family[0]["check"].startswith("passed")
    slices = [r for r in rows if "spec" in r]  # read past the rewritten update (the written axis: not inferred)
    assert len(slices) == 2 and all(r["input_shape"][::2] == [2, 4] for r in slices), slices


# --------------------------------------------------------------------------- bad inputs

def _node(model, op):
    return next(n for n in model.graph.node if n.op_type == op)


def _const(model, name, array):
    model.graph.initializer.append(numpy_helper.from_array(np.asarray(array), name))
    return name


def _index_of_three(m):
    _node(m, "XlaDynamicUpdateSlice").input[2] = _const(m, "idx3", np.zeros(3, np.int32))


def _larger_update(m):
    new = next(i for i in m.graph.input if i.name == "new")
    new.type.tensor_type.shape.dim[1].dim_value = 17


def _runtime_begin(m):
    m.graph.input.append(helper.make_tensor_value_info("b", TensorProto.INT32, [2]))
    _node(m, "TensorStridedSliceUpdate").input[1] = "b"


def _unknown_rank(m):
    cache = next(i for i in m.graph.input if i.name == "cache")
    cache.type.tensor_type.ClearField("shape")


def _float_mask(m):
    node = _node(m, "TensorStridedSliceUpdate")
    a = next(a for a in node.attribute if a.name == "begin_mask")
    node.attribute.remove(a)
    node.attribute.append(helper.make_attribute("begin_mask", 1.0))


def _two_inputs(m):
    del _node(m, "XlaDynamicUpdateSlice").input[2]


def _float_index(m):
    _node(m, "XlaDynamicUpdateSlice").input[2] = _const(m, "fidx", np.zeros(4, np.float32))


def _int_value(m):
    _node(m, "TensorStridedSliceUpdate").input[4] = _const(m, "ival", np.arange(4, dtype=np.int32))


def _in_a_function(m):
    """The update moved into a model-local function the main graph calls."""
    node = _node(m, "XlaDynamicUpdateSlice")
    f = helper.make_function("local", "upd", ["x", "u", "i"], ["y"],
                             [helper.make_node("XlaDynamicUpdateSlice", ["x", "u", "i"], ["y"], name="inner")],
                             [helper.make_opsetid("", 15)])
    m.functions.append(f)
    m.opset_import.append(helper.make_opsetid("local", 1))
    node.op_type, node.domain = "upd", "local"


@pytest.mark.parametrize("case, mutate, code, node, words", [
    ("family", _index_of_three, 2, "PartitionedCall/XlaDynamicUpdateSlice", "indices: index must be a vector"),
    ("family", _larger_update, 2, "PartitionedCall/XlaDynamicUpdateSlice", "update[1]: update dim size 17 greater"),
    ("family", _float_mask, 2, "PartitionedCall/TensorStridedSliceUpdate", "attribute 'begin_mask': must be an integer"),
    ("family", _two_inputs, 2, "PartitionedCall/XlaDynamicUpdateSlice", "inputs: XlaDynamicUpdateSlice takes 3"),
    ("family", _float_index, 2, "PartitionedCall/XlaDynamicUpdateSlice", "indices: indices must be int32 or int64"),
    ("family", _int_value, 2, "PartitionedCall/TensorStridedSliceUpdate", "value: has element type 6"),
    ("family", _runtime_begin, 1, "PartitionedCall/TensorStridedSliceUpdate", "begin: begin must be a constant"),
    ("family", _unknown_rank, 1, "PartitionedCall/XlaDynamicUpdateSlice", "input: the shape of input is unknown"),
    ("scatter", _in_a_function, 1, "inner", "graph: a node inside a model-local function"),
    ("dus_gelu_opset9", None, 2, "Identity_2", "imports opset 9"),
])
def test_an_op_made_invalid_or_unconvertible_is_one_line(made, tmp_path, capfd, case, mutate, code, node, words):
    """Exit 2 where the framework rejects the node (invalid input, as a StridedSlice spec it
    rejects), exit 1 where it runs but cannot be rewritten (a constant or shape it needs is not
    known; a node inside a function); one line naming file, node and field; nothing written."""
    model = onnx.load(str(made / f"{case}.onnx"))
    if mutate is not None:
        mutate(model)
    src = tmp_path / "bad.onnx"
    onnx.save(model, str(src))
    out = tmp_path / "out"
    out.mkdir()
    assert cli_main(["convert", str(src), "-o", str(out / "m.onnx")]) == code
    text, err = capfd.readouterr()
    assert text == "" and err.count("\n") == 1, err
    assert err.startswith(f"{src}: node {node!r}") and words in err, err
    assert list(out.iterdir()) == []
    assert cli_main(["inspect", str(src)]) == code  # inspect reads the node the same way
    capfd.readouterr()


def test_batch_records_invalid_and_failed_apart(made, tmp_path, capfd):
    """In a batch, a raw node the framework rejects is ``invalid`` and one that cannot be
    rewritten ``failed``, each with its one line; the good file beside them still converts."""
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy(made / "dus_gelu.onnx", src / "good.onnx")
    for name, mutate in (("invalid", _index_of_three), ("unconvertible", _runtime_begin)):
        model = onnx.load(str(made / "family.onnx"))
        mutate(model)
        onnx.save(model, str(src / f"{name}.onnx"))
    assert cli_main(["batch", str(src), "-o", str(tmp_path / "out"), "-q"]) == 2
    capfd.readouterr()
    entries = {Path(e["input"]).stem: e for e in json.loads((tmp_path / "out" / "report.json").read_text())["models"]}
    assert entries["good"]["status"] == "converted" and entries["good"]["verdict"] == "verified"
    assert entries["invalid"]["status"] == "invalid" and "indices" in entries["invalid"]["error"]
    assert entries["unconvertible"]["status"] == "failed" and "begin must be a constant" in entries["unconvertible"]["error"]


def test_a_custom_domain_tf2onnx_did_not_import(made, tmp_path):
    """tf2onnx's command line with ``--custom-ops StridedSlice:DOMAIN`` writes the kept
    StridedSlice in DOMAIN without importing it (onnx's inference then derives nothing): the
    update is still planned on known shapes and the model verified."""
    model = onnx.load(str(made / "kv_cache_domain.onnx"))
    domain = "ai.onnx.converters.tensorflow"
    assert any(n.domain == domain for n in model.graph.node) and domain not in {o.domain for o in model.opset_import}
    result = convert(str(made / "kv_cache_domain.onnx"))
    assert result.report.verdict == "verified" and result.report.found == result.report.rewritten == 2
    assert result.report.updates[0].shapes[0] == (2, 8, 4)


def test_an_export_holding_only_the_family_is_cleaned_up_as_a_framework_input(made):
    """No StridedSlice to rewrite, only slice updates: the cleanup still runs (and its check),
    so the updates reading one index share its clamp as in the framework path."""
    result = convert(str(made / "family.onnx"))
    assert result.report.found == 0 and result.report.model_checks["cleanup"].startswith("passed")
    assert result.report.cleanup is not None
