"""The real-model benchmark on its two Keras-built models (TensorFlow only, a few seconds):
after cleanup our conversion has no more nodes than tf2onnx's native one, the cleanup check
passes, and the outputs equal TensorFlow's at two input sizes.

The script runs in its own process: it may switch TensorFlow to Keras 2 (TF_USE_LEGACY_KERAS,
when tf-keras is installed), which must not leak into the other tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pausing import HANG_GUARD_S  # subprocess timeouts: hang guards only, never a verdict

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    out = tmp_path_factory.mktemp("real") / "rows.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "real_models.py"), "--models",
                           "attention_keras,yolo_focus_keras", "--no-latency", "--json", str(out)],
                          capture_output=True, text=True, env=env, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {r["model"]: r for r in json.loads(out.read_text())}


@pytest.mark.parametrize("name", ["attention_keras", "yolo_focus_keras"])
def test_keras_model_beats_native_and_equals_tensorflow(rows, name):
    row = rows[name]
    assert row["ok"], row["checks"]
    assert row["checks"]["cleanup"] == "passed"
    assert row["strided_slice"] > 0
    assert row["nodes_ours"] < row["nodes_no_cleanup"]
    assert row["nodes_ours"] <= row["nodes_native"], row
    assert all(s.startswith("ok") for s in row["tf_equal"]), row["tf_equal"]
