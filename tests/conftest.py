import os
import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

# CI runs are reproducible (derandomized); locally each run explores new examples.
settings.register_profile("ci", derandomize=True, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "dev")

# The oracles are required, never skipped: import them once, up front (a missing
# TensorFlow or OpenVINO fails the run here, loudly).
from onnx_slice_tools.verification.oracles import _openvino, _tensorflow  # noqa: E402

_tensorflow()
_openvino()

# Tests mirror the package's stages (tests/semantics, tests/rewrite, ...); a stage's tests reuse
# builders of another's (``from test_peer_cases import peer_model``), so every folder is importable.
for _folder in sorted(Path(__file__).parent.iterdir()):
    if _folder.is_dir() and any(_folder.glob("test_*.py")):
        sys.path.insert(0, str(_folder))
