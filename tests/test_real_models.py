"""The real-model benchmark on its two Keras-built models (TensorFlow only, a few seconds):
after cleanup our conversion has no more nodes than tf2onnx's native one, the cleanup check
passes, and the outputs equal TensorFlow's at two input sizes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "real_models", Path(__file__).resolve().parent.parent / "scripts" / "real_models.py")
real_models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(real_models)


@pytest.mark.parametrize("name", ["attention_keras", "yolo_focus_keras"])
def test_keras_model_beats_native_and_equals_tensorflow(name):
    row = real_models.measure(name, latency=False)
    assert row["ok"], row["checks"]
    assert row["checks"]["cleanup"] == "passed"
    assert row["strided_slice"] > 0
    assert row["nodes_ours"] < row["nodes_no_cleanup"]
    assert row["nodes_ours"] <= row["nodes_native"], row
    assert all(s.startswith("ok") for s in row["tf_equal"]), row["tf_equal"]
