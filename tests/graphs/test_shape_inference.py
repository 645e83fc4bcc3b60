"""The shape-inference helper process (graphs/shape_inference.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from pausing import HANG_GUARD_S  # subprocess timeouts: hang guards only, never a verdict

REPO = Path(__file__).resolve().parents[2]

PROGRAM = """
import os, sys
parent, log = os.getpid(), sys.argv[1]

class Spy:  # every module imported from here on, by the process that imports it
    def find_spec(self, name, path=None, target=None):
        with open(log, "a") as f:
            f.write(f"{'helper' if os.getpid() != parent else 'ours'} {name}\\n")
        return None

sys.meta_path.insert(0, Spy())
from onnx_slice_tools.graphs import shape_inference
shape_inference.start_helper()
from onnx import TensorProto, helper
model = helper.make_model(helper.make_graph(
    [helper.make_node("Relu", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]))
inferred = shape_inference.infer(model, strict=True)
print([d.dim_value for d in inferred.graph.output[0].type.tensor_type.shape.dim])
"""


def test_the_helper_imports_nothing_of_its_own(tmp_path):
    """The helper is forked from a process that has not imported onnx yet (convert forks it
    first thing): what it runs is imported before the fork, so the helper imports nothing -- a
    module lock another thread held at the fork would stay held in the helper, which would
    wait on it forever -- and pays for no import of its own."""
    log = tmp_path / "imports.txt"
    proc = subprocess.run([sys.executable, "-c", PROGRAM, str(log)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[2, 3]"
    imports = log.read_text().splitlines()
    assert any(line.startswith("ours onnx") for line in imports)  # (the spy sees imports)
    assert not [line for line in imports if line.startswith("helper ")], imports
