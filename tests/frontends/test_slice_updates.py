"""Framework inputs holding the slice-update family (and TFLite GELU), which tf2onnx leaves raw:
converted (exit 0), each rewrite checked against the reference, and the whole model verified
against TensorFlow / LiteRT by the framework check."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tensorflow as tf  # the oracles extra: these tests need TensorFlow (never skipped)

from onnx_slice_tools.cli.main import main as cli_main
from onnx_slice_tools.frontends.sources import quiet_frameworks


def _saved_model(path: Path, fn, specs) -> Path:
    m = tf.Module()
    m.serve = tf.function(fn, input_signature=specs)
    with quiet_frameworks():
        tf.saved_model.save(m, str(path), signatures={"serving_default": m.serve})
    return path


def test_saved_model_with_the_family_converts_and_is_verified(tmp_path, capfd):
    """A KV-cache write at a run-time position (XlaDynamicUpdateSlice), a clamped read
    (XlaDynamicSlice), a slice assignment with a broadcast value (TensorStridedSliceUpdate) and
    StridedSliceGrad: all rewritten, the framework check bitwise (pure data movement)."""
    from tensorflow.compiler.tf2xla.python import xla

    def fn(cache, new, pos):
        idx = tf.stack([0, pos, 0, 0])
        updated = xla.dynamic_update_slice(cache, new, idx)
        window = xla.dynamic_slice(updated, tf.stack([0, pos - 2, 0, 0]), [1, 3, 2, 4])
        written = tf.raw_ops.TensorStridedSliceUpdate(input=updated, begin=[0, 1], end=[1, 9], strides=[1, 3],
                                                      value=tf.constant([5.0, 6.0, 7.0, 8.0]))
        grad = tf.raw_ops.StridedSliceGrad(shape=[1, 16, 2, 4], begin=[0, 15], end=[1, 4], strides=[1, -4],
                                           dy=window[:, :, :, :])
        return {"updated": updated, "window": window, "written": written, "grad": grad}

    src = _saved_model(tmp_path / "sm", fn, [tf.TensorSpec([1, 16, 2, 4], tf.float32, name="cache"),
                                             tf.TensorSpec([1, 1, 2, 4], tf.float32, name="new"),
                                             tf.TensorSpec([], tf.int32, name="pos")])
    out = tmp_path / "out"
    out.mkdir()
    assert cli_main(["convert", str(src), "-o", str(out / "m.onnx")]) == 0
    text, err = capfd.readouterr()
    assert err == "" and "verified" in text and "NOT" not in text, text
    import onnx
    ops = [n.op_type for n in onnx.load(str(out / "m.onnx")).graph.node]
    assert not {"XlaDynamicUpdateSlice", "XlaDynamicSlice", "TensorStridedSliceUpdate", "StridedSliceGrad"} & set(ops)


def test_tflite_dynamic_update_slice_and_gelu_convert_and_match_litert(tmp_path, capfd):
    """DYNAMIC_UPDATE_SLICE and both GELU forms from the TF converter: rewritten, verified against
    LiteRT (GELU within the float tolerance rule)."""
    from tensorflow.compiler.tf2xla.python import xla

    def fn(cache, new, pos):
        updated = xla.dynamic_update_slice(cache, new, tf.stack([0, pos, 0]))
        return updated, tf.nn.gelu(updated, approximate=True), tf.nn.gelu(new, approximate=False)

    with quiet_frameworks():
        concrete = tf.function(fn).get_concrete_function(tf.TensorSpec([1, 8, 4], tf.float32),
                                                         tf.TensorSpec([1, 1, 4], tf.float32),
                                                         tf.TensorSpec([], tf.int32))
        data = tf.lite.TFLiteConverter.from_concrete_functions([concrete]).convert()
    src = tmp_path / "dus.tflite"
    src.write_bytes(data)
    assert cli_main(["convert", str(src), "-o", str(tmp_path / "dus.onnx")]) == 0
    text, err = capfd.readouterr()
    assert err == "" and "verified" in text and "NOT" not in text, text


def test_tssu_value_tensorflow_rejects_is_exit_2_naming_the_node(tmp_path, capfd):
    """A value that does not broadcast to the slice fails in TensorFlow at every run: invalid
    input (exit 2, as a StridedSlice spec the framework rejects), one line naming the file, node
    and field, nothing written -- the rule of an ``.onnx`` input holding the node (one pipeline)."""
    def fn(x, v):
        return {"y": tf.raw_ops.TensorStridedSliceUpdate(input=x, begin=[0], end=[2], strides=[1], value=v)}

    src = _saved_model(tmp_path / "sm", fn, [tf.TensorSpec([4], tf.float32, name="x"),
                                             tf.TensorSpec([3], tf.float32, name="v")])
    out = tmp_path / "out"
    out.mkdir()
    assert cli_main(["convert", str(src), "-o", str(out / "m.onnx")]) == 2
    text, err = capfd.readouterr()
    assert text == "" and err.count("\n") == 1 and err.startswith(f"{src}: node ") and \
        "TensorStridedSliceUpdate': value: " in err and "broadcast" in err, err
    assert list(out.iterdir()) == []


def test_a_variable_slice_assignment_is_exit_1_in_one_line(tmp_path, capfd):
    """``v[1:3].assign(x)`` (ResourceStridedSliceAssign) keeps state between calls, which an ONNX
    graph has not: a failed conversion (exit 1, one line naming the op), like every op no ONNX
    form exists for, not an unusable input (exit 2)."""
    class M(tf.Module):
        def __init__(self):
            super().__init__()
            self.v = tf.Variable(tf.zeros([4, 3]))

        @tf.function(input_signature=[tf.TensorSpec([2, 3], tf.float32, name="x")])
        def serve(self, x):
            self.v[1:3].assign(x)
            return {"y": self.v.read_value() * 2.0}

    m = M()
    src = tmp_path / "sm"
    with quiet_frameworks():
        tf.saved_model.save(m, str(src), signatures={"serving_default": m.serve})
    out = tmp_path / "out"
    out.mkdir()
    assert cli_main(["convert", str(src), "-o", str(out / "m.onnx")]) == 1
    text, err = capfd.readouterr()
    assert text == "" and err.count("\n") == 1 and "ResourceStridedSliceAssign (node " in err, err
    assert list(out.iterdir()) == []


def test_a_cache_write_inside_a_while_loop_is_rewritten_in_the_loop_body(tmp_path, capfd):
    """A decode-loop sketch: ``tf.while_loop`` writing the cache at the loop counter (beyond the
    cache's end too: the start is clamped) becomes an ONNX ``Loop`` whose body holds the rewrite;
    the whole model bitwise against TensorFlow."""
    from tensorflow.compiler.tf2xla.python import xla

    def fn(cache, new, n):
        def body(i, c):
            return i + 1, xla.dynamic_update_slice(c, new * tf.cast(i, tf.float32), tf.stack([0, i, 0]))
        _, c = tf.while_loop(lambda i, c: i < n, body, [tf.constant(0), cache])
        return {"out": c}

    src = _saved_model(tmp_path / "sm", fn, [tf.TensorSpec([1, 8, 4], tf.float32, name="cache"),
                                             tf.TensorSpec([1, 1, 4], tf.float32, name="new"),
                                             tf.TensorSpec([], tf.int32, name="n")])
    out = tmp_path / "out"
    out.mkdir()
    assert cli_main(["convert", str(src), "-o", str(out / "m.onnx"), "--input-range", "n:0,12"]) == 0
    text, err = capfd.readouterr()
    assert err == "" and "1 XlaDynamicUpdateSlice as" in text and "bitwise against TensorFlow" in text, text
    import onnx
    loop = next(n for n in onnx.load(str(out / "m.onnx")).graph.node if n.op_type == "Loop")
    assert "Concat" in [n.op_type for n in loop.attribute[0].g.node]


def test_input_range_applies_to_a_tflite_by_litert_names(tmp_path, capfd):
    """A position feeding a SLICE: random draws make LiteRT fail (the check is skipped);
    ``--input-range pos:0,5`` draws it where the model runs, and the model is verified.  A name
    the file has not is exit 2 in one line."""
    def fn(table, pos):
        return tf.slice(table, tf.stack([pos, 0]), [2, 4]) * 2.0

    with quiet_frameworks():
        concrete = tf.function(fn).get_concrete_function(tf.TensorSpec([7, 4], tf.float32, name="table"),
                                                         tf.TensorSpec([], tf.int32, name="pos"))
        data = tf.lite.TFLiteConverter.from_concrete_functions([concrete]).convert()
    src = tmp_path / "slice.tflite"
    src.write_bytes(data)
    assert cli_main(["convert", str(src), "-o", str(tmp_path / "a.onnx")]) == 0
    text, _ = capfd.readouterr()
    assert "NOT fully verified" in text and "framework skipped" in text, text
    assert cli_main(["convert", str(src), "-o", str(tmp_path / "b.onnx"), "--input-range", "pos:0,5"]) == 0
    text, err = capfd.readouterr()
    assert err == "" and "verified" in text and "NOT" not in text, text
    assert cli_main(["convert", str(src), "-o", str(tmp_path / "c.onnx"), "--input-range", "nope:0,5"]) == 2
    text, err = capfd.readouterr()
    assert text == "" and err.count("\n") == 1 and "no input 'nope'" in err and "pos" in err, err


def test_an_output_key_named_like_an_input_is_one_clear_line(tmp_path, capfd):
    """A decode step returning its ``cache`` input updated under the key ``cache``: ONNX names each
    value once, so that output cannot keep the key; one line says so and how to name it
    (``--outputs``), which then converts."""
    from tensorflow.compiler.tf2xla.python import xla

    def fn(cache, new, pos):
        return {"cache": xla.dynamic_update_slice(cache, new, tf.stack([0, pos, 0]))}

    src = _saved_model(tmp_path / "sm", fn, [tf.TensorSpec([1, 8, 4], tf.float32, name="cache"),
                                             tf.TensorSpec([1, 1, 4], tf.float32, name="new"),
                                             tf.TensorSpec([], tf.int32, name="pos")])
    out = tmp_path / "out"
    out.mkdir()
    assert cli_main(["convert", str(src), "-o", str(out / "m.onnx")]) == 2
    text, err = capfd.readouterr()
    assert text == "" and err.count("\n") == 1 and "has the name of an input" in err and "--outputs" in err, err
    assert cli_main(["convert", str(src), "-o", str(out / "m.onnx"), "--outputs", "new_cache"]) == 0
    text, err = capfd.readouterr()
    assert err == "" and "verified" in text and "NOT" not in text, text


def test_strided_slices_in_a_decode_loop_that_grows_its_state_are_checked_in_place(tmp_path, capfd):
    """A greedy-decoding sketch: ``tf.while_loop`` of 3 iterations appending a token to ``ids`` each iteration
    (the body's tensors change shape between iterations, so onnxruntime cannot stack them as scan
    outputs) and writing a cache at the counter.  The body's StridedSlice rewrites are checked in
    place on every iteration (taps carried through the Loop), the cache write alone and by the
    framework check; the verdict is "verified"."""
    from tensorflow.compiler.tf2xla.python import xla
    table = tf.constant(np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32))

    def fn(ids, cache):
        def body(i, ids, cache):
            h = tf.gather(table, ids)                    # [b, t, 4], t grows
            last = h[:, -1, :]                           # StridedSlice
            nxt = tf.argmax(last[:, 1:], axis=-1, output_type=tf.int32)  # StridedSlice
            cache = xla.dynamic_update_slice(cache, last[:1, None, :], tf.stack([0, i, 0]))
            return i + 1, tf.concat([ids, nxt[:, None]], axis=1), cache
        _, ids, cache = tf.while_loop(lambda i, *_: i < 3, body, [tf.constant(0), ids, cache],
                                      shape_invariants=[tf.TensorShape([]), tf.TensorShape([None, None]),
                                                        tf.TensorShape([1, 8, 4])])
        return {"ids_out": ids, "cache_out": cache}

    src = _saved_model(tmp_path / "sm", fn, [tf.TensorSpec([None, None], tf.int32, name="ids"),
                                             tf.TensorSpec([1, 8, 4], tf.float32, name="cache")])
    out = tmp_path / "out"
    out.mkdir()
    report = tmp_path / "report.json"
    assert cli_main(["convert", str(src), "-o", str(out / "m.onnx"), "--input-range", "ids:0,7",
                     "--report", str(report)]) == 0
    text, err = capfd.readouterr()
    assert err == "" and "verified" in text and "NOT" not in text, text
    import json
    rep = json.loads(report.read_text())
    in_loop = [r for r in rep["rewrites"] if " > Loop " in r["graph"] and r["op_type"] == "StridedSlice"]
    assert len(in_loop) >= 2 and all(r["inplace_check"] == "passed" for r in in_loop), rep["rewrites"]
    assert rep["model_checks"]["model_run"] == "passed", rep["model_checks"]
    # the cache write too, in place on every iteration (taps carried, with the growing ids')
    assert [(u["op_type"], u["inplace_check"]) for u in rep["slice_updates"]] == [("XlaDynamicUpdateSlice", "passed")]
    assert rep["slice_updates"][0]["graph"].startswith("main > Loop "), rep["slice_updates"]
    assert rep["model_checks"]["slice_updates"].endswith("; 1/1 checked in place)"), rep["model_checks"]


def test_a_planted_wrong_cache_write_in_a_while_loop_fails_in_place(tmp_path, monkeypatch):
    """A cache write in a ``tf.while_loop`` body whose lowering reads the start one row late,
    with the per-rewrite check blinded (as if its draws missed the bug): the in-place run checks
    the body's rewrite on the tensors of every iteration and fails it there (before, the family
    was not part of the in-place run: only the framework check could see it)."""
    from tensorflow.compiler.tf2xla.python import xla

    from onnx_slice_tools import convert
    from onnx_slice_tools.verification import update_checks
    from onnx_slice_tools.lowering import update as lowering
    from onnx_slice_tools.verification.status import passed

    def fn(cache, new, n):
        def body(i, c):
            return i + 1, xla.dynamic_update_slice(c, new * tf.cast(i + 1, tf.float32), tf.stack([0, i, 0]))
        _, c = tf.while_loop(lambda i, c: i < n, body, [tf.constant(0), cache])
        return {"out": c}

    src = _saved_model(tmp_path / "sm", fn, [tf.TensorSpec([1, 8, 4], tf.float32, name="cache"),
                                             tf.TensorSpec([1, 1, 4], tf.float32, name="new"),
                                             tf.TensorSpec([], tf.int32, name="n")])
    real = lowering._clamped

    def off_by_one(b, idx, elem, axes, rank, hi, opset):
        dt = np.int32 if elem == 6 else np.int64
        return real(b, b.node("Add", [idx, b.const(np.ones(rank, dt), "one")]), elem, axes, rank, hi, opset)
    monkeypatch.setattr(lowering, "_clamped", off_by_one)
    monkeypatch.setattr(update_checks, "check_records", lambda records, *budget: [passed("blinded") for _ in records])
    rep = convert(str(src), input_ranges={"n": (1, 3)}).report
    assert [u.graph.startswith("main > Loop ") for u in rep.updates] == [True]
    assert rep.update_inplace[0].startswith("failed: iteration 0: ") and "values differ" in rep.update_inplace[0], \
        rep.statuses()
    assert rep.model_checks["model_run"].startswith("failed: node "), rep.model_checks
    assert rep.verdict == "failed"
