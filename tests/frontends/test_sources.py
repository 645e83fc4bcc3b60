"""Framework inputs: .tflite, SavedModel, Keras -> ONNX (StridedSlice kept, lowered exactly),
verified against the framework that runs the original."""

from __future__ import annotations

import builtins
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onnx_slice_tools import convert
from onnx_slice_tools.cli.main import main as cli_main
from onnx_slice_tools.errors import ModelError
from onnx_slice_tools.verification.oracles import strided_slice_tflite_model
from onnx_slice_tools.frontends.sources import (load_source, parse_input_shapes, quiet_frameworks, source_kind,
                                      verify_against_source)
from onnx_slice_tools.semantics.spec import from_tflite

MODELS = Path(__file__).resolve().parents[2] / "models"
SAMPLES = ["tflite_masks.tflite", "tflite_offset.tflite", "keras_slices.keras", "saved_model_slices"]


@pytest.mark.parametrize("name", SAMPLES)
def test_sample_converts_and_matches_its_framework(name):
    path = MODELS / name
    model = load_source(path)
    kept = [n for n in model.graph.node if n.op_type == "StridedSlice"]
    assert kept, "StridedSlice was not kept as a custom node"
    if name.endswith(".tflite"):
        assert all(any(a.name == "offset" for a in n.attribute) for n in kept)
    result = convert(model, source=str(path))
    assert result.ok and result.report.rewritten == len(kept)
    assert {r.flavor for r in result.report.records} == {"tflite" if name.endswith(".tflite") else "tf"}
    assert not any(n.op_type == "StridedSlice" for n in result.model.graph.node)
    check = verify_against_source(path, result.model, trials=2)
    assert check.ok, check.outputs
    if name != "keras_slices.keras":
        # slices around one correctly rounded op (x * 2, x + 1) or none: bit for bit on any CPU
        assert check.bitwise, check.outputs
    # keras_slices: a Dense layer sums in the order of the CPU's kernel (AVX2 and AVX-512
    # differ in the last bits): only the product's tolerance rule may be asked of it


def test_tf2onnx_native_lowering_is_wrong_on_offset_and_ours_is_right():
    """tf2onnx maps STRIDED_SLICE to TF's StridedSlice: it ignores ``offset`` and TFLite's
    begin_mask on a shrink index, so its own lowering disagrees with the interpreter."""
    import tf2onnx
    path = MODELS / "tflite_offset.tflite"
    with quiet_frameworks():
        native, _ = tf2onnx.convert.from_tflite(str(path), opset=17)
    assert not verify_against_source(path, native, trials=1).ok
    ours = convert(load_source(path)).model
    assert verify_against_source(path, ours, trials=1).bitwise


def test_verification_catches_a_tampered_conversion(tmp_path):
    path = MODELS / "tflite_masks.tflite"
    model = convert(load_source(path)).model
    for node in model.graph.node:
        if node.op_type == "Mul":
            node.op_type = "Add"
            break
    else:
        pytest.fail("no Mul in the sample")
    assert not verify_against_source(path, model, trials=1).ok


def test_cli_convert_tflite_exit_0_one_line_stdout_nothing_on_stderr(tmp_path, capfd):
    src = tmp_path / "m.tflite"
    src.write_bytes(strided_slice_tflite_model(
        (3, 4), np.float32, from_tflite([0, 1], [2, 2], [1, 1], begin_mask=1, offset=True)))
    dst = tmp_path / "m.onnx"
    assert cli_main(["convert", str(src), "-o", str(dst)]) == 0
    out, err = capfd.readouterr()
    assert err == "" and "verified" in out and "bitwise against the TFLite interpreter" in out
    onnx.checker.check_model(onnx.load(str(dst)))


def test_cli_convert_saved_model_with_input_shape_and_output_names(tmp_path, capfd):
    src = tmp_path / "sm"
    shutil.copytree(MODELS / "saved_model_slices", src)
    dst = tmp_path / "sm.onnx"
    assert cli_main(["convert", str(src), "-o", str(dst), "--inputs", "x:3,5", "--outputs", "a", "b"]) == 0
    out, err = capfd.readouterr()
    assert err == "" and "verified" in out and "against TensorFlow" in out
    m = onnx.load(str(dst))
    assert [o.name for o in m.graph.output] == ["a", "b"]
    assert [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim] == [3, 5]


def test_saved_model_outputs_named_by_signature_keys_and_opset_applies():
    model = load_source(MODELS / "saved_model_slices", opset=15)
    assert [o.name for o in model.graph.output] == ["head", "tail_rev"]
    assert {o.version for o in model.opset_import if o.domain in ("", "ai.onnx")} == {15}
    result = convert(model, source="saved_model_slices")
    assert result.ok and {o.version for o in result.model.opset_import if o.domain in ("", "ai.onnx")} == {15}


def test_cli_signature_selects_a_saved_model_signature(tmp_path, capfd):
    dst = tmp_path / "last.onnx"
    assert cli_main(["convert", str(MODELS / "saved_model_slices"), "-o", str(dst), "--signature", "last",
                     "--opset", "13"]) == 0
    out, err = capfd.readouterr()
    assert err == "" and "bitwise against TensorFlow" in out
    m = onnx.load(str(dst))
    assert [o.name for o in m.graph.output] == ["last_two"]
    assert [op.version for op in m.opset_import if op.domain in ("", "ai.onnx")] == [13]


@pytest.mark.parametrize("argv, words", [
    (["--signature", "nope"], ["no signature 'nope'", "last, serving_default"]),
    (["--outputs", "a"], ["1 output names given", "2 outputs"]),
    (["--inputs", "x:3,5,7"], ["--inputs x", "3 dims given", "rank 2"]),
    (["--inputs", "nope:2,8,6"], ["--inputs nope", "no input 'nope'", "its inputs: x"]),
])
def test_cli_bad_source_options_are_exit_2_one_line(tmp_path, capfd, argv, words):
    dst = tmp_path / "out.onnx"
    assert cli_main(["convert", str(MODELS / "saved_model_slices"), "-o", str(dst)] + argv) == 2
    out, err = capfd.readouterr()
    assert len(err.strip().splitlines()) == 1 and all(w in err for w in words), err
    assert not dst.exists()


@pytest.mark.parametrize("src, argv, words", [
    ("tf_channel_flip.onnx", ["--signature", "x"], "--signature apply to framework inputs"),
    ("tf_channel_flip.onnx", ["--inputs", "x:1"], "--inputs apply to framework inputs"),
    ("tflite_masks.tflite", ["--signature", "x"], "applies to SavedModel directories"),
    ("tflite_masks.tflite", ["--inputs", "x:1"], "does not apply to a .tflite input"),
])
def test_source_options_refused_where_they_do_not_apply(tmp_path, capfd, src, argv, words):
    assert cli_main(["convert", str(MODELS / src), "-o", str(tmp_path / "o.onnx")] + argv) == 2
    _, err = capfd.readouterr()
    assert len(err.strip().splitlines()) == 1 and words in err, err


def test_framework_compare_bitwise_close_or_differs():
    """The framework check uses the one float rule: relative to the output's largest magnitude (a
    MatMul's rounding grows with its sums), NaN/inf at the same places, bitwise for data movement."""
    from onnx_slice_tools.frontends.sources import compare_output
    from onnx_slice_tools.verification.tolerance import default_rtol
    rtol = default_rtol(np.float32)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 1000)).astype(np.float32) @ rng.standard_normal((1000, 8)).astype(np.float32)
    near = a.copy()
    near[0, 0] += np.float32(rtol * 0.5) * np.abs(a).max()  # an entry near 0 moved by half the tolerance
    assert compare_output(a, a.copy()) == "bitwise"
    assert compare_output(a, near).startswith("within tolerance: max |diff|")
    assert "values differ" in compare_output(a, near, exact=True)
    far = a.copy()
    far[0, 0] += np.float32(rtol * 2) * np.abs(a).max()
    assert compare_output(a, far).startswith("1 of 32 values differ by up to")
    nan = a.copy()
    nan[1, 1] = np.nan
    assert "NaN" in compare_output(a, nan)
    assert compare_output(a.astype(np.int32), a.astype(np.int32) + 1) == "32 of 32 values differ"
    assert compare_output(a, a[:2]).startswith("shape")


def test_framework_status_says_why_it_did_not_run(tmp_path):
    result = convert(MODELS / "tflite_offset.tflite", verify=False)
    assert result.report.model_checks["framework"].startswith("skipped: verification off")
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(strided_slice_tflite_model((4,), np.float32, from_tflite([1], [10], [1], offset=True)))
    result = convert(bad)
    assert not result.ok and result.report.model_checks["framework"].startswith("skipped: the conversion failed")


def test_undefined_tflite_spec_is_exit_2_naming_the_node(tmp_path, capfd):
    src = tmp_path / "bad.tflite"
    src.write_bytes(strided_slice_tflite_model((4,), np.float32, from_tflite([4], [5], [1], shrink_axis_mask=1)))
    assert cli_main(["convert", str(src), "-o", str(tmp_path / "bad.onnx")]) == 2
    out, err = capfd.readouterr()
    assert len(err.strip().splitlines()) == 1 and "undefined" in err and str(src) in err
    assert not (tmp_path / "bad.onnx").exists()


def test_missing_tf_extra_is_one_line_naming_the_extra(monkeypatch, tmp_path, capfd):
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "tf2onnx" or name.startswith("tf2onnx."):
            raise ImportError("No module named 'tf2onnx'", name="tf2onnx")
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ModelError, match=r"onnx-slice-tools\[tf\]"):
        load_source(MODELS / "tflite_masks.tflite")
    assert cli_main(["convert", str(MODELS / "tflite_masks.tflite"), "-o", str(tmp_path / "x.onnx")]) == 2
    _, err = capfd.readouterr()
    assert len(err.strip().splitlines()) == 1 and "onnx-slice-tools[tf]" in err


def test_source_kind_and_unreadable_inputs(tmp_path):
    assert source_kind(MODELS / "tflite_masks.tflite") == "tflite"
    assert source_kind(MODELS / "saved_model_slices") == "saved_model"
    assert source_kind(MODELS / "keras_slices.keras") == "keras"
    assert source_kind(MODELS / "tf_channel_flip.onnx") is None
    assert source_kind(tmp_path) is None  # a directory without saved_model.pb
    junk = tmp_path / "junk.tflite"
    junk.write_bytes(b"not a flatbuffer")
    with pytest.raises(ModelError, match="junk.tflite"):
        load_source(junk)


@pytest.mark.parametrize("text, want", [(["x:1,3,?"], {"x": [1, 3, None]}), (["a:b:2"], {"a:b": [2]})])
def test_parse_input_shapes(text, want):
    assert parse_input_shapes(text) == want


@pytest.mark.parametrize("bad", ["x", "x:1,a", "x:1,,3", "x:1,3,", "x:,1", "x:-2", "x:99999999999999999999"])
def test_parse_input_shapes_rejects(bad):
    """A malformed dim list is refused, never read as another rank (``1,,3`` is not [1, 3])."""
    with pytest.raises(ModelError, match="--inputs"):
        parse_input_shapes([bad])


def test_parse_input_shapes_rejects_an_input_given_twice():
    with pytest.raises(ModelError, match="more than once"):
        parse_input_shapes(["x:1", "x:2"])


def test_batch_worker_converts_a_tflite_input(tmp_path):
    """batch's per-model worker takes framework inputs through sources.load_source."""
    from onnx_slice_tools.cli.batch import convert_one
    dst = tmp_path / "out.onnx"
    entry = convert_one(str(MODELS / "tflite_offset.tflite"), str(dst), {"verify": True})
    assert entry["status"] == "converted", entry
    assert entry["checks"]["framework"].startswith("passed (bitwise against the TFLite interpreter")
    assert dst.is_file()


# --------------------------------------------------------------------------- bounded-memory export

def _variables_saved_model(folder: Path, dtype: str) -> Path:
    """A SavedModel whose serving function slices three variables (rank 3, 0-d, empty) of ``dtype``."""
    import tensorflow as tf
    rng = np.random.default_rng(7)
    np_dtype = np.dtype(tf.as_dtype(dtype).as_numpy_dtype)

    def values(shape):
        if np_dtype == np.bool_:
            return rng.integers(0, 2, shape).astype(bool)
        return (rng.standard_normal(shape) * 100).astype(np_dtype)

    class Vars(tf.Module):
        def __init__(self):
            self.a = tf.Variable(values((37, 5, 3)), name="a")
            self.b = tf.Variable(values(()), name="b")
            self.c = tf.Variable(values((0, 4)), name="c")

        @tf.function(input_signature=[tf.TensorSpec([5, 3], dtype, name="x")])
        def serve(self, x):
            return {"y": tf.concat([self.a[::2, 1:], x[None, 1:]], axis=0), "z": self.c[:, ::-1],
                    "s": tf.stack([self.b, self.b]), "g": tf.gather(self.a, [36, 0, 3])[:, ::-1]}

    m = Vars()
    tf.saved_model.save(m, str(folder), signatures={"serving_default": m.serve})
    return folder


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int64", "bool", "bfloat16"])
def test_saved_model_variables_leave_tensorflow_unfrozen_and_bitwise(tmp_path, monkeypatch, dtype):
    """Every non-empty variable (threshold 1 byte) goes from TensorFlow to the external data file
    in 64-byte slices, never frozen (read whole and through an embedding-style gather): its
    initializer is bitwise the checkpoint's tensor, the graph keeps no copy and no input for it;
    the empty one is frozen as before; the converted model matches TensorFlow bit for bit."""
    import tensorflow as tf

    from onnx_slice_tools.frontends import sources
    from onnx_slice_tools.frontends import tfexport
    monkeypatch.setattr(sources, "LARGE_VARIABLE_BYTES", 1)
    monkeypatch.setattr(tfexport, "CHUNK_BYTES", 64)
    # the weights as TensorFlow hands them over (folding b's Unsqueeze into a new initializer is
    # tests/frontends/test_fold.py's subject)
    monkeypatch.setattr(sources, "fold_weight_subgraphs", lambda *args: 0)
    saved = _variables_saved_model(tmp_path / "sm", dtype)
    with quiet_frameworks():
        file = sources.export_source(saved, tmp_path)
    head = onnx.load(str(file), load_external_data=False)
    assert [i.name for i in head.graph.input] == ["x"]
    external = {t.name for t in head.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL}
    assert external == {"a:0", "b:0"}
    assert all(t.name in external or len(t.SerializeToString()) < 200 for t in head.graph.initializer)
    assert not any(n.op_type == "Constant" for n in head.graph.node)
    weights = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(str(file)).graph.initializer}
    reader = tf.train.load_checkpoint(str(saved / "variables" / "variables"))
    for key in "ab":
        want = reader.get_tensor(f"{key}/.ATTRIBUTES/VARIABLE_VALUE")
        got = weights[f"{key}:0"]
        assert (got.dtype, got.shape) == (want.dtype, want.shape) and got.tobytes() == want.tobytes(), key
    if dtype == "bfloat16":
        return  # onnxruntime's Python API takes no bfloat16 inputs (facts.md)
    result = convert(saved)
    assert result.ok and result.report.rewritten >= 2  # a[::2, 1:] and x[None, 1:] (c's slice is folded)
    assert result.report.model_checks["framework"].startswith("passed (bitwise against TensorFlow"), \
        result.report.model_checks["framework"]


def test_framework_weights_are_held_so_the_budget_counts_them_once(tmp_path, monkeypatch):
    """A framework input's weights are in TensorFlow's memory (export and framework check):
    the whole-model runs count them once (the session's copy), as an ONNX input's inline
    weights, although they are external data of the converted file (counted twice for an ONNX
    input).  Here 2224 bytes of variables and a 5000-byte budget: counted twice (the rule
    before) the runs were over it."""
    import re

    from onnx_slice_tools.frontends import sources
    from onnx_slice_tools.io.files import external_weight_bytes
    monkeypatch.setattr(sources, "LARGE_VARIABLE_BYTES", 1)
    saved = _variables_saved_model(tmp_path / "sm", "float32")
    result = convert(saved, verify_memory=5000)
    assert result.report.verdict == "verified", result.report.model_checks
    weights = external_weight_bytes(result.ir_model)
    assert weights > 2000
    rep = convert(saved, verify_memory=3000).report  # below one run's need: bounded
    assert rep.model_checks["model_run"].startswith("skipped: needs ~") and "(--verify-memory)" in rep.verdict
    need = float(re.search(r"needs ~([0-9.e-]+) MiB", rep.model_checks["model_run"]).group(1)) * 2 ** 20
    assert need + weights > 5000  # (the weights counted twice: over the budget that now verifies)


def test_a_variable_read_by_gather_nd_is_frozen_as_before(tmp_path):
    """A resource read other than ReadVariableOp / ResourceGather (here ResourceGatherNd) keeps
    tf2onnx's freezing path: the export is still exact."""
    import tensorflow as tf

    from onnx_slice_tools.frontends import tfexport
    table = np.random.default_rng(3).standard_normal((200, 100)).astype(np.float32)  # 80 kB
    var = tf.Variable(table)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32, name="i")])
    def fn(i):
        return tf.gather_nd(var, i[:, None])[:, ::-1]

    with quiet_frameworks():
        concrete = fn.get_concrete_function(*fn.input_signature)
        large = tfexport._large_variables(concrete, 1)
        assert len(large) == 1
        with pytest.raises(tfexport._Unfreezable, match="ResourceGatherNd"):
            tfexport._freeze_except(concrete, large)
        model = tfexport.export(fn, fn.input_signature, large_variable_bytes=1)
    ours = convert(model).model
    from onnx_slice_tools.verification.lowerings import make_session
    i = np.array([4, 0, 199], np.int32)
    (got,) = make_session(ours.SerializeToString()).run(None, {"i": i})
    want = fn(tf.constant(i)).numpy()
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_keras_weights_leave_tensorflow_unfrozen(tmp_path, monkeypatch):
    import keras

    from onnx_slice_tools.frontends import sources
    inp = keras.Input((6, 3), name="x")
    dense = keras.layers.Dense(40, use_bias=True, bias_initializer="random_normal")
    keras.Model(inp, keras.layers.Cropping1D((1, 2))(dense(inp))).save(tmp_path / "m.keras")
    monkeypatch.setattr(sources, "LARGE_VARIABLE_BYTES", 100)  # the kernel (480 B) and bias (160 B)
    with quiet_frameworks():
        file = sources.export_source(tmp_path / "m.keras", tmp_path)
    head = onnx.load(str(file), load_external_data=False)
    assert sum(t.data_location == onnx.TensorProto.EXTERNAL for t in head.graph.initializer) == 2
    got = sorted((onnx.numpy_helper.to_array(t) for t in onnx.load(str(file)).graph.initializer
                  if t.name in {e.name for e in head.graph.initializer if e.data_location}), key=np.ndim)
    want = sorted(keras.models.load_model(tmp_path / "m.keras").get_weights(), key=np.ndim)
    assert [g.tobytes() for g in got] == [w.tobytes() for w in want]
    result = convert(tmp_path / "m.keras")
    assert result.ok and result.report.model_checks["framework"].startswith("passed"), result.report.model_checks


@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(0, 5), max_size=3), chunk=st.integers(1, 100))
def test_chunked_variable_write_is_the_value_bytes(shape, chunk):
    import io

    import tensorflow as tf

    from onnx_slice_tools.frontends import tfexport
    value = np.arange(int(np.prod(shape)), dtype=np.int16).reshape(shape)
    out = io.BytesIO()
    real, tfexport.CHUNK_BYTES = tfexport.CHUNK_BYTES, chunk
    try:
        tfexport._write_rows(tf.Variable(value), out)
    finally:
        tfexport.CHUNK_BYTES = real
    assert out.getvalue() == value.tobytes()


def test_convert_source_weights_live_in_a_private_folder_until_the_result_is_gone(tmp_path):
    """The export's temporary folder (the weights on disk) outlives convert_source for the save
    and is removed with the result; nothing is written beside the input."""
    import gc
    src = tmp_path / "sm"
    shutil.copytree(MODELS / "saved_model_slices", src)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    result = convert(src)
    folder = Path(result.source_folder.name)
    assert folder.is_dir() and not folder.is_relative_to(tmp_path)
    result.save(tmp_path / "out" / "m.onnx")
    del result
    gc.collect()
    assert not folder.exists()
    assert sorted(p.name for p in tmp_path.rglob("*") if "out" not in p.parts) == before


def _fc_tflite(path: Path) -> Path:
    """A .tflite: x[2, 64] @ a 10 kB float32 weight, then a StridedSlice."""
    import tensorflow as tf
    w = tf.constant(np.random.default_rng(5).standard_normal((64, 40)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([2, 64], tf.float32, name="x")])
    def fn(x):
        return tf.matmul(x, w)[:, 1:-1:3]

    with quiet_frameworks():
        path.write_bytes(tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()], fn).convert())
    return path


def test_tflite_falls_back_to_the_whole_model_when_tf2onnx_fails_on_the_small_one(tmp_path, monkeypatch):
    from onnx_slice_tools.frontends import sources
    from onnx_slice_tools.frontends import tfexport
    path = _fc_tflite(tmp_path / "fc.tflite")
    monkeypatch.setattr(sources, "LARGE_VARIABLE_BYTES", 1000)

    def refuse(*args):
        raise ValueError("a converter needs the constant")
    monkeypatch.setattr(tfexport, "_inputs_to_external", refuse)
    (tmp_path / "out").mkdir()
    file = sources.export_source(path, tmp_path / "out")
    assert (tmp_path / "out" / "model.onnx.data").stat().st_size == 0  # the moved bytes were cut back
    head = onnx.load(str(file), load_external_data=False)
    assert len(head.graph.input) == 1 and not any(t.data_location for t in head.graph.initializer)
    result = convert(path)
    assert result.ok and result.report.model_checks["framework"].startswith("passed"), result.report.model_checks


def test_tflite_weight_buffer_moves_out_bitwise(tmp_path, monkeypatch):
    """A .tflite's large constant buffer (here a 10 kB FullyConnected weight, threshold 1000 B)
    goes to the external data file byte for byte, its tensor an input of the small model tf2onnx
    converts, then an initializer: equal to the interpreter's tensor; the converted model matches
    the interpreter; the 8-byte StridedSlice index buffers stay constants."""
    from onnx_slice_tools.frontends import sources
    path = _fc_tflite(tmp_path / "fc.tflite")
    monkeypatch.setattr(sources, "LARGE_VARIABLE_BYTES", 1000)
    (tmp_path / "out").mkdir()
    file = sources.export_source(path, tmp_path / "out")
    head = onnx.load(str(file), load_external_data=False)
    external = [t for t in head.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    assert len(external) == 1 and len(head.graph.input) == 1
    (got,) = [onnx.numpy_helper.to_array(t) for t in onnx.load(str(file)).graph.initializer
              if t.name == external[0].name]
    assert not any(n.op_type == "Transpose" for n in head.graph.node)  # folded into the weight (fold.py)
    from onnx_slice_tools.verification.oracles import tflite_interpreter
    interp = tflite_interpreter(path.read_bytes())
    (detail,) = [d for d in interp.get_tensor_details() if list(d["shape"]) == [40, 64]]  # FULLY_CONNECTED's [out, in]
    want = interp.get_tensor(detail["index"]).T  # tf2onnx's MatMul takes [in, out]
    assert got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()
    result = convert(path)
    assert result.ok and result.report.rewritten == 1
    assert result.report.model_checks["framework"].startswith("passed"), result.report.model_checks


def _tflite_of(path: Path, fn, *specs) -> Path:
    """``fn`` (a tf.function) on ``specs`` through the TF converter into the .tflite ``path``."""
    import tensorflow as tf
    with quiet_frameworks():
        concrete = tf.function(fn).get_concrete_function(*specs)
        path.write_bytes(tf.lite.TFLiteConverter.from_concrete_functions([concrete]).convert())
    return path


def test_chained_strided_slices_in_a_tflite_convert_and_match_litert(tmp_path, capfd):
    """``relu(x[:, 1:])[..., :2]``: the second STRIDED_SLICE needs its input's rank, derived past
    the first (a custom node until rewritten); slices and a Relu are pure data movement and one
    correctly rounded op: bitwise against the interpreter."""
    import tensorflow as tf
    src = _tflite_of(tmp_path / "chain.tflite", lambda x: tf.nn.relu(x[:, 1:])[..., :2],
                     tf.TensorSpec([2, 8, 6], tf.float32))
    assert sum(n.op_type == "StridedSlice" for n in load_source(src).graph.node) == 2
    assert cli_main(["convert", str(src), "-o", str(tmp_path / "chain.onnx")]) == 0
    out, err = capfd.readouterr()
    assert err == "" and "2/2 StridedSlice rewritten, verified" in out and "bitwise against the TFLite" in out


def test_an_op_tf2onnx_cannot_convert_fails_naming_it_and_writes_nothing(tmp_path, capfd):
    """tf2onnx's Python API leaves RFFT2D (and TFLite's REAL/IMAG) in the graph as they are: a
    failed conversion (exit 1), one line naming the file and the ops, no output."""
    import tensorflow as tf

    from onnx_slice_tools.errors import ConversionError
    src = _tflite_of(tmp_path / "fft.tflite", lambda x: tf.math.real(tf.signal.rfft2d(x)) + tf.math.imag(
        tf.signal.rfft2d(x)), tf.TensorSpec([4, 8], tf.float32))
    before = sorted(p.name for p in tmp_path.iterdir())
    assert cli_main(["convert", str(src), "-o", str(tmp_path / "fft.onnx")]) == 1
    out, err = capfd.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith(f"{src}: ") and "RFFT2D (node " in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    with pytest.raises(ConversionError, match="RFFT2D"):
        convert(src)


def test_a_saved_model_op_tf2onnx_cannot_convert_fails_naming_it_and_writes_nothing(tmp_path, capfd):
    """The same for a SavedModel: tf2onnx's ``from_function`` leaves RFFT2D in the graph; the
    conversion fails (exit 1) in one line naming it, and nothing is written."""
    import tensorflow as tf

    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([4, 8], tf.float32, name="x")])
        def serve(self, x):
            spectrum = tf.signal.rfft2d(x)
            return {"y": tf.math.real(spectrum) + tf.math.imag(spectrum)}
    m = M()
    src = tmp_path / "sm"
    tf.saved_model.save(m, str(src), signatures={"serving_default": m.serve})
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    assert cli_main(["convert", str(src), "-o", str(out_dir / "fft.onnx")]) == 1
    out, err = capfd.readouterr()
    assert out == "" and err.count("\n") == 1 and "RFFT2D (node " in err and "nothing written" in err
    assert list(out_dir.iterdir()) == []


def test_framework_files_in_inspect_verify_and_the_python_convert(tmp_path, capfd):
    """``inspect FILE.tflite`` lists the StridedSlices tf2onnx's model of it has; ``verify
    FILE.tflite OUT.onnx`` compares with the interpreter (and fails on a tampered model); the
    Python ``convert`` of the path runs the framework check; where an ONNX file is needed (one-file
    ``verify``) one line says what takes a framework file."""
    src = MODELS / "tflite_masks.tflite"
    assert cli_main(["inspect", "--json", str(src)]) == 0
    rows = __import__("json").loads(capfd.readouterr()[0])
    assert len(rows) == sum(n.op_type == "StridedSlice" for n in load_source(src).graph.node) and \
        all("error" not in r for r in rows)
    result = convert(str(src))
    assert result.ok and result.report.model_checks["framework"].startswith("passed")
    good = tmp_path / "good.onnx"
    onnx.save_model(result.model, str(good))
    assert cli_main(["verify", str(src), str(good)]) == 0
    assert "status: passed" in capfd.readouterr()[0]
    for node in result.model.graph.node:
        if node.op_type == "Mul":
            node.op_type = "Add"
            break
    bad = tmp_path / "bad.onnx"
    onnx.save_model(result.model, str(bad))
    assert cli_main(["verify", str(src), str(bad)]) == 1
    err = capfd.readouterr()[1]
    assert err.count("\n") == 1 and err.startswith(f"{bad}: differs from {src}")
    for path, what in ((src, "a .tflite model"), (MODELS / "saved_model_slices", "a SavedModel folder")):
        assert cli_main(["verify", str(path)]) == 2
        err = capfd.readouterr()[1]
        assert err == f"{path}: is {what}, not an ONNX file: `convert` reads it (through tf2onnx) and checks the " \
            "result against the framework; `inspect` and `verify FILE CONVERTED.onnx` take it too\n"


@pytest.mark.parametrize("cut", [300, 7, None], ids=["truncated", "too-short", "text"])
def test_a_damaged_tflite_is_one_line_naming_the_file(tmp_path, capfd, cut):
    data = (MODELS / "tflite_masks.tflite").read_bytes()
    src = tmp_path / "bad.tflite"
    src.write_bytes(data[:cut] if cut else b"hello, this is not a model at all")
    assert cli_main(["convert", str(src), "-o", str(tmp_path / "o.onnx")]) == 2
    out, err = capfd.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith(f"{src}: not a ")
    assert ("valid or complete .tflite" if cut == 300 else "not a .tflite file") in err
    assert not (tmp_path / "o.onnx").exists()


def _conv_net(fp16: bool):
    """x[1, 8, 8, 4] NHWC -> Conv(4->16) -> Relu -> channels 2:10 (a STRIDED_SLICE kept as our
    custom node) -> Conv(8->8) -> Relu: kernels of 2.3 kB and 2.3 kB, a Dense-like MatMul on the
    side (a 4 kB weight tf2onnx transposes); ``fp16``: weights stored as float16 (TFLite's
    DEQUANTIZE to float32 at run time)."""
    import tensorflow as tf
    rng = np.random.default_rng(3)
    k1 = tf.constant(rng.standard_normal((3, 3, 4, 16)).astype(np.float32) * 0.2)
    k2 = tf.constant(rng.standard_normal((3, 3, 8, 8)).astype(np.float32) * 0.2)
    w = tf.constant(rng.standard_normal((32, 32)).astype(np.float32) * 0.2)

    def fn(x, v):
        y = tf.nn.relu(tf.nn.conv2d(x, k1, 1, "SAME"))
        return tf.nn.relu(tf.nn.conv2d(y[:, :, :, 2:10], k2, 1, "SAME")), tf.nn.relu(tf.matmul(v, w))

    concrete = tf.function(fn).get_concrete_function(tf.TensorSpec([1, 8, 8, 4], tf.float32),
                                                     tf.TensorSpec([2, 32], tf.float32))
    conv = tf.lite.TFLiteConverter.from_concrete_functions([concrete])
    if fp16:
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.target_spec.supported_types = [tf.float16]
    with quiet_frameworks():
        return conv.convert()


@pytest.mark.parametrize("fp16", [False, True], ids=["float32", "float16"])
def test_weights_moved_out_fold_like_tf2onnx_and_land_in_one_file(tmp_path, capfd, monkeypatch, fp16):
    """Weights of LARGE_VARIABLE_BYTES or more leave the .tflite before tf2onnx reads it (here
    1000 B: every kernel); the result has no more nodes and no more Transposes than tf2onnx's own
    conversion, no Cast of a float16 weight, matches the interpreter, and is one file."""
    import collections

    import tf2onnx

    from onnx_slice_tools.frontends import sources
    src = tmp_path / "net.tflite"
    src.write_bytes(_conv_net(fp16))
    with quiet_frameworks():
        native, _ = tf2onnx.convert.from_tflite(str(src), opset=17)
    monkeypatch.setattr(sources, "LARGE_VARIABLE_BYTES", 1000)
    (tmp_path / "out").mkdir()
    head = onnx.load(str(sources.export_source(src, tmp_path / "out")), load_external_data=False)
    assert any(t.data_location == onnx.TensorProto.EXTERNAL for t in head.graph.initializer), "nothing moved out"
    dst = tmp_path / "net.onnx"
    assert cli_main(["convert", str(src), "-o", str(dst)]) == 0
    out, err = capfd.readouterr()
    assert err == "" and "verified" in out and "NOT" not in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["net.onnx", "net.tflite", "out"]
    ours = onnx.load(str(dst))
    count = lambda m: collections.Counter(n.op_type for n in m.graph.node)  # noqa: E731
    assert len(ours.graph.node) <= len(native.graph.node), (count(ours), count(native))
    assert count(ours)["Transpose"] <= count(native)["Transpose"] and count(ours)["Cast"] == 0, count(ours)


# --------------------------------------------------------------------------- Keras 3 models as users have them

def _keras():
    import keras
    return keras


def test_unknown_input_name_is_exit_2_before_work_naming_the_inputs(tmp_path, capfd):
    keras = _keras()
    inp = keras.Input((4,), name="features")
    keras.Model(inp, inp * 2.0).save(tmp_path / "m.keras")
    dst = tmp_path / "out.onnx"
    assert cli_main(["convert", str(tmp_path / "m.keras"), "-o", str(dst), "--inputs", "nope:2,8,6"]) == 2
    out, err = capfd.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1, err
    assert "m.keras" in err and "no input 'nope'" in err and "its inputs: features" in err, err
    assert not dst.exists()


def test_damaged_keras_file_is_named_as_not_a_keras_archive(tmp_path, capfd):
    bad = tmp_path / "bad.keras"
    bad.write_bytes(b"PK\x03\x04 cut short")
    assert cli_main(["convert", str(bad), "-o", str(tmp_path / "o.onnx")]) == 2
    _, err = capfd.readouterr()
    assert len(err.strip().splitlines()) == 1 and "not a valid Keras archive" in err and "bad.keras" in err, err
    assert "File not found" not in err


def test_framework_error_line_is_the_real_exception():
    import tensorflow as tf

    from onnx_slice_tools.frontends.sources import framework_error_line

    @tf.function
    def traced(x):
        raise ValueError("the real reason\nmore detail")
    with pytest.raises(Exception) as info:
        traced(tf.constant(1.0))
    assert framework_error_line(info.value) == "ValueError: the real reason"

    @tf.function
    def gather(x, i):
        return tf.gather(x, i)
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        gather(tf.constant([1.0, 2.0]), tf.constant([5]))
    line = framework_error_line(info.value)
    assert "indices[0] = 5 is not in [0, 2)" in line and "Graph execution error" not in line, line


def test_keras_dict_inputs_in_unsorted_order_convert_and_verify(tmp_path, capfd):
    keras = _keras()
    tok = keras.Input((None,), dtype="int32", name="token_ids")
    pad = keras.Input((None,), dtype="int32", name="padding_mask")
    emb = keras.layers.Embedding(10, 4)(tok)
    out = emb * keras.ops.expand_dims(keras.ops.cast(pad, "float32"), -1)
    keras.Model({"token_ids": tok, "padding_mask": pad}, out).save(tmp_path / "m.keras")
    dst = tmp_path / "m.onnx"
    assert cli_main(["convert", str(tmp_path / "m.keras"), "-o", str(dst)]) == 0
    out_text, err = capfd.readouterr()
    assert err == "" and " verified" in out_text and "against TensorFlow" in out_text, out_text
    assert [i.name for i in onnx.load(str(dst)).graph.input] == ["token_ids", "padding_mask"]


def test_a_keras_model_failing_on_its_inputs_is_not_blamed_on_tf2onnx(tmp_path, capfd):
    keras = _keras()
    a, b = keras.Input((3,), name="a"), keras.Input((4,), name="b")
    keras.Model([a, b], keras.layers.Concatenate()([a, b])).save(tmp_path / "m.keras")
    # --inputs makes the shapes disagree: Keras itself refuses while tracing
    assert cli_main(["convert", str(tmp_path / "m.keras"), "-o", str(tmp_path / "o.onnx"),
                     "--inputs", "a:2,3", "b:5,4"]) == 2
    _, err = capfd.readouterr()
    assert len(err.strip().splitlines()) == 1 and "tf2onnx" not in err and "in user code" not in err, err
    assert "the Keras model fails on its declared inputs" in err, err


def _captured_table_model(keras):
    import tensorflow as tf

    @keras.saving.register_keras_serializable(package="onnx_slice_tools_tests")
    class Table(keras.layers.Layer):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.table = tf.constant(np.arange(1, 5, dtype=np.float32))  # an eager tensor, not a weight

        def call(self, x):
            return x * self.table + keras.ops.convert_to_tensor(np.linspace(0, 1, 4).astype("float32"))
    inp = keras.Input((4,), name="x")
    return keras.Model(inp, Table()(inp))


def _saved_as(model, folder: Path, form: str) -> Path:
    """``model`` saved as a ``.keras`` file or exported as a SavedModel (``model.export``)."""
    path = folder / ("m.keras" if form == "keras" else "sm")
    if form == "keras":
        model.save(path)
    else:
        with quiet_frameworks():
            model.export(path)
    return path


@pytest.mark.parametrize("form", ["keras", "saved_model"])
def test_captured_eager_constants_are_constants_not_graph_inputs(tmp_path, form):
    keras = _keras()
    model = _captured_table_model(keras)
    path = _saved_as(model, tmp_path, form)
    onnx_model = load_source(path)
    assert [i.name for i in onnx_model.graph.input] == ["x"]
    result = convert(path)
    assert result.ok and result.report.model_checks["framework"].startswith("passed"), result.report.model_checks


@pytest.mark.parametrize("form", ["keras", "saved_model"])
def test_captured_constants_stay_on_our_export_path(tmp_path, monkeypatch, form):
    """A loaded SavedModel passes its captured constants into a function call, and TensorFlow's
    freezing already makes them Const nodes: our path takes them as they are instead of falling
    back to tf2onnx's whole path (which leaves XLA calls raw, see the grouped-conv test)."""
    import tf2onnx
    path = _saved_as(_captured_table_model(_keras()), tmp_path, form)

    def refuse(*args, **kwargs):
        raise AssertionError("tf2onnx's from_function was used")
    monkeypatch.setattr(tf2onnx.convert, "from_function", refuse)
    assert [i.name for i in load_source(path).graph.input] == ["x"]


def test_exact_gelu_erfc_is_lowered_and_verified(tmp_path):
    keras = _keras()
    inp = keras.Input((6,), name="x")
    keras.Model(inp, keras.activations.gelu(inp * 3.0, approximate=False)).save(tmp_path / "m.keras")
    ops = {n.op_type for n in load_source(tmp_path / "m.keras").graph.node}
    assert "Erfc" in ops, ops  # tf2onnx leaves it raw; the pipeline rewrites it (rewrite/updates.py), checked
    result = convert(tmp_path / "m.keras")
    assert result.ok and result.report.model_checks["framework"].startswith("passed"), result.report.model_checks
    assert result.report.model_checks["slice_updates"].startswith("passed (1 Erfc as Erf/Sub")
    ops = {n.op_type for n in result.model.graph.node}
    assert "Erfc" not in ops and "Erf" in ops, ops


def test_conv_batchnorm_with_large_weights_has_no_more_nodes_than_tf2onnx(tmp_path, monkeypatch):
    keras = _keras()
    import tf2onnx

    from onnx_slice_tools.frontends import sources
    rng = np.random.default_rng(0)
    inp = keras.Input((8, 8, 3), name="x")
    y = keras.layers.Conv2D(8, 3, padding="same")(inp)
    y = keras.layers.BatchNormalization()(y)
    y = keras.layers.ReLU()(y)
    y = keras.layers.Conv2D(8, 3, use_bias=False)(y)
    y = keras.layers.BatchNormalization()(y)
    model = keras.Model(inp, y)
    for layer in model.layers:  # statistics that are not the identity, so the BatchNorm stays
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.set_weights([rng.uniform(0.5, 2, w.shape).astype(np.float32) for w in layer.get_weights()])
    model.save(tmp_path / "m.keras")
    monkeypatch.setattr(sources, "LARGE_VARIABLE_BYTES", 100)  # every kernel stays out of the freezing
    fn, sig, _ = sources.load_tf(tmp_path / "m.keras")
    with quiet_frameworks():
        native, _ = tf2onnx.convert.from_function(fn, input_signature=sig, opset=17)
    result = convert(tmp_path / "m.keras")
    assert result.ok and result.report.model_checks["framework"].startswith("passed"), result.report.model_checks
    ours = result.model
    assert len(ours.graph.node) <= len(native.graph.node), (
        [n.op_type for n in ours.graph.node], [n.op_type for n in native.graph.node])
    assert not any(n.op_type == "Transpose" and all(i in {t.name for t in ours.graph.initializer} for i in n.input)
                   for n in ours.graph.node)


def _text_model(keras):
    """token ids into a 50-row table, segment ids into a 2-row one (BERT-style), dict inputs
    in unsorted order; unknown batch and sequence dims shared by both inputs."""
    tok = keras.Input((None,), dtype="int32", name="token_ids")
    seg = keras.Input((None,), dtype="int32", name="segment_ids")
    out = keras.layers.Embedding(50, 4)(tok) + keras.layers.Embedding(2, 4)(seg)
    return keras.Model({"token_ids": tok, "segment_ids": seg}, out)


@pytest.mark.parametrize("form", ["keras", "saved_model"])
def test_index_inputs_are_drawn_inside_their_tables_and_verify(tmp_path, form):
    keras = _keras()
    model = _text_model(keras)
    path = _saved_as(model, tmp_path, form)
    result = convert(path)
    assert result.ok and result.report.model_checks["framework"].startswith("passed"), result.report.model_checks
    # the ONNX-side runs (in place, as shipped, cleanup) draw the segment ids inside the table too
    assert result.report.verdict == "verified", result.report.verdict


@pytest.mark.parametrize("large", [False, True], ids=["frozen", "kernel-kept-out"])
def test_grouped_conv_compiled_by_xla_is_inlined_and_verified(tmp_path, monkeypatch, large):
    """Keras 3 runs a grouped convolution (ConvNeXt's depthwise ones) as an XLA-compiled
    function call; tf2onnx leaves such a call raw (``StatefulPartitionedCall``, which no runtime
    runs).  Ours converts its body: a Conv with ``group``, verified against TensorFlow -- also
    when the kernel is a large variable the call reads (then frozen with the rest)."""
    keras = _keras()
    inp = keras.Input((6, 6, 4), name="x")
    model = keras.Model(inp, keras.layers.Conv2D(8, 3, groups=2, padding="same")(inp))
    path = _saved_as(model, tmp_path, "saved_model")
    from onnx_slice_tools.frontends import sources
    if large:
        monkeypatch.setattr(sources, "LARGE_VARIABLE_BYTES", 100)
    graph = load_source(path).graph
    ops = {n.op_type for n in graph.node}
    assert not ops & {"StatefulPartitionedCall", "PartitionedCall"}, ops
    assert any(n.op_type == "Conv" and any(a.name == "group" and a.i == 2 for a in n.attribute) for n in graph.node)
    result = convert(path)
    assert result.report.verdict == "verified", result.report.verdict
    assert result.report.model_checks["framework"].startswith("passed"), result.report.model_checks


def test_cli_input_range_is_used_and_checked(tmp_path, capfd):
    keras = _keras()
    _text_model(keras).save(tmp_path / "m.keras")
    src, dst = str(tmp_path / "m.keras"), str(tmp_path / "o.onnx")
    # a range the user gives wins over the inferred one: outside the 2-row table, TensorFlow refuses
    assert cli_main(["convert", src, "-o", dst, "--input-range", "segment_ids:5,6"]) == 0
    out, _ = capfd.readouterr()
    assert "NOT fully verified" in out and "is not in [0, 2)" in out, out
    for bad, words in [("nope:0,1", "no input 'nope'"), ("segment_ids:3,1", "LO <= HI")]:
        assert cli_main(["convert", src, "-o", str(tmp_path / "x.onnx"), "--input-range", bad]) == 2
        out, err = capfd.readouterr()
        assert out == "" and len(err.strip().splitlines()) == 1 and words in err, err
        assert not (tmp_path / "x.onnx").exists()


def test_keras_dict_outputs_are_named_by_their_keys_and_verify(tmp_path):
    keras = _keras()
    inp = keras.Input((4,), name="x")
    keras.Model(inp, {"tail": inp[:, 1:] * 2.0, "head": inp[:, :2]}).save(tmp_path / "m.keras")
    result = convert(tmp_path / "m.keras")
    assert [o.name for o in result.model.graph.output] == ["head", "tail"]
    assert result.ok and result.report.model_checks["framework"].startswith("passed"), result.report.model_checks
