#!/usr/bin/env python3
"""Make ``.onnx`` files holding the raw slice-update nodes tf2onnx's command line leaves behind.

    python tests/rewrite/make_raw_update_models.py OUT_DIR

Each case is a small TensorFlow function (saved as a SavedModel) or a ``.tflite`` made of one by
TensorFlow's converter, then exported by tf2onnx's command line (``python -m tf2onnx.convert``:
its ``main``, run here with the command line's arguments once TensorFlow is loaded, so the
cases share one start-up).  tf2onnx 1.17 prints "Unsupported ops", exits 0 and writes the
family as raw nodes of the default domain; those files are what the tests convert.  The TF
sources stay beside them (``NAME/`` or ``NAME.tflite``) as the oracles of the differential
tests.  Writes ``OUT_DIR/cases.json``: case -> its source and tf2onnx arguments.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from unittest import mock

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _functions():
    """case -> (function, input signature, tf2onnx options): SavedModel cases."""
    import tensorflow as tf
    from tensorflow.compiler.tf2xla.python import xla

    def family(cache, new, pos):
        """Every TF op of the family; ``updated`` feeds two of them and is no graph output
        (tf2onnx declares no shape for it)."""
        updated = xla.dynamic_update_slice(cache, new, tf.stack([0, pos, 0, 0]))
        window = xla.dynamic_slice(updated, tf.stack([0, pos - 2, 0, 0]), [1, 3, 2, 4])
        written = tf.raw_ops.TensorStridedSliceUpdate(input=updated, begin=[0, 1], end=[1, 9], strides=[1, 3],
                                                      value=tf.constant([5.0, 6.0, 7.0, 8.0]))
        grad = tf.raw_ops.StridedSliceGrad(shape=[1, 16, 2, 4], begin=[0, 15], end=[1, 4], strides=[1, -4],
                                           dy=window)
        return {"window": window, "written": written, "grad": grad}

    def kv_cache(cache, new, pos):
        """A decode step's cache write read back by StridedSlices (kept as our custom node by
        ``--custom-ops``): their shapes are known only through the rewritten update."""
        cache = xla.dynamic_update_slice(cache, new, tf.stack([0, pos, 0]))
        return {"cache_out": cache, "head": cache[:, :4, ::2], "tail": cache[:, -1]}

    def loop(cache, new, n):
        """A cache write at the loop counter inside ``tf.while_loop`` (an ONNX Loop body)."""
        def body(i, c):
            return i + 1, xla.dynamic_update_slice(c, new * tf.cast(i, tf.float32), tf.stack([0, i, 0]))
        _, c = tf.while_loop(lambda i, c: i < n, body, [tf.constant(0), cache])
        return {"out": c}

    def scatter(x, u, idx):
        """An int32 update narrower on both axes at run-time int64 starts (the ScatterND form)."""
        return {"y": xla.dynamic_update_slice(x, u, idx)}

    def erfc(x):
        """Keras's exact GELU: TensorFlow's ``Erfc``, which tf2onnx leaves raw too."""
        return {"y": 0.5 * x * tf.math.erfc(-x * 0.7071067811865476)}

    f32, i32, i64 = tf.float32, tf.int32, tf.int64
    keep = ["--custom-ops", "StridedSlice"]  # (our custom domain: tf2onnx imports it only when it names it)
    return {
        "family": (family, [tf.TensorSpec([1, 16, 2, 4], f32, name="cache"), tf.TensorSpec([1, 1, 2, 4], f32, name="new"),
                            tf.TensorSpec([], i32, name="pos")], []),
        "kv_cache": (kv_cache, [tf.TensorSpec([2, 8, 4], f32, name="cache"), tf.TensorSpec([2, 1, 4], f32, name="new"),
                                tf.TensorSpec([], i32, name="pos")], keep),
        "loop": (loop, [tf.TensorSpec([1, 8, 4], f32, name="cache"), tf.TensorSpec([1, 1, 4], f32, name="new"),
                        tf.TensorSpec([], i32, name="n")], []),
        "erfc": (erfc, [tf.TensorSpec([3, 5], f32, name="x")], []),
        "scatter": (scatter, [tf.TensorSpec([5, 6], i32, name="x"), tf.TensorSpec([2, 3], i32, name="u"),
                              tf.TensorSpec([2], i64, name="idx")], []),
    }


def _tflite() -> bytes:
    """DYNAMIC_UPDATE_SLICE and both GELU forms, by TensorFlow's converter."""
    import tensorflow as tf
    from tensorflow.compiler.tf2xla.python import xla

    def fn(cache, new, pos):
        updated = xla.dynamic_update_slice(cache, new, tf.stack([0, pos, 0]))
        return updated, tf.nn.gelu(updated, approximate=True), tf.nn.gelu(new, approximate=False)

    concrete = tf.function(fn).get_concrete_function(tf.TensorSpec([1, 8, 4], tf.float32, name="cache"),
                                                     tf.TensorSpec([1, 1, 4], tf.float32, name="new"),
                                                     tf.TensorSpec([], tf.int32, name="pos"))
    return tf.lite.TFLiteConverter.from_concrete_functions([concrete]).convert()


def _tf2onnx_command_line(args: list[str]) -> None:
    """tf2onnx's command line (``python -m tf2onnx.convert ARGS``) in this process."""
    from tf2onnx import convert
    with mock.patch.object(sys, "argv", ["tf2onnx.convert", *args]):
        convert.main()


def build(out: Path) -> dict:
    import tensorflow as tf
    out.mkdir(parents=True, exist_ok=True)
    cases: dict = {}
    for name, (fn, specs, options) in _functions().items():
        module = tf.Module()
        module.serve = tf.function(fn, input_signature=specs)
        tf.saved_model.save(module, str(out / name), signatures={"serving_default": module.serve})
        args = ["--saved-model", str(out / name), "--output", str(out / f"{name}.onnx"), *options]
        _tf2onnx_command_line(args)
        cases[name] = {"source": name, "tf2onnx": args[4:]}
    # the kept StridedSlice in a domain the command line names but does not import
    args = ["--saved-model", str(out / "kv_cache"), "--output", str(out / "kv_cache_domain.onnx"),
            "--custom-ops", "StridedSlice:ai.onnx.converters.tensorflow"]
    _tf2onnx_command_line(args)
    cases["kv_cache_domain"] = {"source": "kv_cache", "tf2onnx": args[4:]}
    (out / "dus_gelu.tflite").write_bytes(_tflite())
    for name, options in (("dus_gelu", []), ("dus_gelu_opset9", ["--opset", "9"])):
        _tf2onnx_command_line(["--tflite", str(out / "dus_gelu.tflite"), "--output", str(out / f"{name}.onnx"),
                               *options])
        cases[name] = {"source": "dus_gelu.tflite", "tf2onnx": options}
    (out / "cases.json").write_text(json.dumps(cases, indent=2))
    return cases


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    build(Path(sys.argv[1]))
