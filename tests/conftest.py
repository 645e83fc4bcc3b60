import os

from hypothesis import HealthCheck, settings

# CI runs are reproducible (derandomized); locally each run explores new examples.
settings.register_profile("ci", derandomize=True, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "dev")

# The oracles are required, never skipped: import them once, up front (a missing
# TensorFlow or OpenVINO fails the run here, loudly).
from onnx_slice_tools.oracles import _openvino, _tensorflow  # noqa: E402

_tensorflow()
_openvino()
