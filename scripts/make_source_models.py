#!/usr/bin/env python3
"""Make the framework sample models in models/ (small, deterministic).

    python scripts/make_source_models.py

* tflite_masks.tflite: TF converter output, STRIDED_SLICE with begin/end/shrink masks
  around arithmetic (x[:, 1:, ::2] * 2 and x[:, -1, 1::2] + 1);
* tflite_offset.tflite: STRIDED_SLICE with ``offset`` (op version 8: end = begin + end),
  built in the flatbuffer (no converter emits it here), and a begin_mask on a shrink index:
  tf2onnx's native lowering ignores offset and reads the shrink index the TF way;
* keras_slices.keras: a tiny Keras model, Dense then Cropping1D (a strided slice);
* saved_model_slices/: a tiny SavedModel whose serving_default slices its input, and a
  second signature ``last`` (for --signature).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402


def tflite_masks() -> bytes:
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([2, 4, 6], tf.float32)])
    def fn(x):
        return x[:, 1:, ::2] * 2.0, x[:, -1, 1::2] + 1.0
    conv = tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()], fn)
    return conv.convert()


def tflite_offset() -> bytes:
    from onnx_slice_tools.verification.oracles import strided_slice_tflite_model
    from onnx_slice_tools.semantics.spec import from_tflite
    # x[1:1+2, 0] with begin_mask on the shrink index -> TFLite takes element 0 there
    spec = from_tflite([1, 3], [2, 1], [1, 1], begin_mask=2, shrink_axis_mask=2, offset=True)
    return strided_slice_tflite_model((4, 5), np.float32, spec)


def keras_model(path: Path) -> None:
    import keras
    inp = keras.Input((6, 3), name="x")
    out = keras.layers.Cropping1D((1, 2))(keras.layers.Dense(3, use_bias=False)(inp))
    keras.Model(inp, out).save(path)


def saved_model(path: Path) -> None:
    import tensorflow as tf

    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 5], tf.float32, name="x")])
        def serve(self, x):
            return {"head": x[:, :2], "tail_rev": x[:, -1:-4:-1]}

        @tf.function(input_signature=[tf.TensorSpec([None, 5], tf.float32, name="x")])
        def last(self, x):
            return {"last_two": x[-1, 3:]}
    m = M()
    tf.saved_model.save(m, str(path), signatures={"serving_default": m.serve, "last": m.last})


def main() -> int:
    out = ROOT / "models"
    (out / "tflite_masks.tflite").write_bytes(tflite_masks())
    (out / "tflite_offset.tflite").write_bytes(tflite_offset())
    keras_model(out / "keras_slices.keras")
    saved_model(out / "saved_model_slices")
    for p in sorted(out.glob("*")):
        if p.suffix in (".tflite", ".keras") or p.is_dir():
            print(p.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
