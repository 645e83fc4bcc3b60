"""The end of the program: with TensorFlow loaded, the process ends without tearing its
modules down, yet every exit handler runs and every line printed arrives."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pausing import HANG_GUARD_S  # subprocess timeouts: hang guards only, never a verdict

REPO = Path(__file__).resolve().parents[2]

PROGRAM = """
import atexit, sys, types
if {tf}:
    sys.modules["tensorflow"] = types.ModuleType("tensorflow")  # as after a framework input
atexit.register(lambda: open({marker!r}, "w").write("ran"))
sys.argv = ["onnx-slice-tools", *{argv!r}]
from onnx_slice_tools.cli.main import run
run()
print("after run", flush=True)  # never reached: run() ends the process
"""


@pytest.mark.parametrize("tf", [True, False])
@pytest.mark.parametrize("argv, code", [(["explain", "x[1:, ::-1]", "--shape", "4,5"], 0),
                                        (["explain", "x[1:", "--shape", "4"], 2)])
def test_run_ends_with_the_exit_code_after_the_exit_handlers_and_all_output(tmp_path, tf, argv, code):
    marker = tmp_path / "atexit_ran"
    proc = subprocess.run([sys.executable, "-c", PROGRAM.format(tf=tf, marker=str(marker), argv=argv)],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=HANG_GUARD_S)
    assert proc.returncode == code, proc.stderr
    assert marker.read_text() == "ran"
    assert "after run" not in proc.stdout
    if code == 0:
        assert proc.stdout.rstrip().splitlines()[-1].startswith("output shape: [3, 5]"), proc.stdout
    else:
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_the_entry_points_run_the_program():
    """The console script's target and ``python -m`` both reach :func:`cli.entry` (which keeps a
    Ctrl-C during start-up to exit 130) and through it ``run`` (the fast exit)."""
    import importlib
    import re

    from onnx_slice_tools.cli import entry
    target = re.search(r'^onnx-slice-tools = "([\w.]+):(\w+)"$', (REPO / "pyproject.toml").read_text(), re.M)
    assert target and getattr(importlib.import_module(target.group(1)), target.group(2)) is entry
    proc = subprocess.run([sys.executable, "-m", "onnx_slice_tools", "--version"], capture_output=True, text=True,
                          cwd=REPO, timeout=HANG_GUARD_S)
    assert proc.returncode == 0 and proc.stdout.startswith("onnx-slice-tools ") and proc.stderr == ""




KEPT = """
import sys
from onnx_slice_tools.cli.main import main
from onnx_slice_tools.verification import runtimes
code = main({argv!r}, process_ends={ends})
print(code, *[type(kept).__name__ for kept in runtimes._KEPT])
"""


@pytest.mark.parametrize("ends", [True, False])
def test_only_the_program_keeps_the_as_shipped_session_to_its_end(tmp_path, ends):
    """The program ends without teardown, so ``convert`` keeps the as-shipped session it is done
    with instead of destroying it, and the pipeline's runs and the result it is done with
    instead of freeing them; called as a library (``main`` in a caller's process, or
    ``api.convert``) nothing is kept."""
    argv = ["convert", str(REPO / "models" / "tf_channel_flip.onnx"), "-o", str(tmp_path / "out.onnx")]
    proc = subprocess.run([sys.executable, "-c", KEPT.format(argv=argv, ends=ends)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr
    code, *kept = proc.stdout.splitlines()[-1].split()
    assert code == "0"
    assert kept == (["InferenceSession", "tuple", "ConvertResult"] if ends else [])
