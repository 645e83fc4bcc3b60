"""Corrupt models through the real CLI: byte-level mutants of the sample models (truncations,
bit flips, byte overwrites, insertions).  Whatever the bytes, ``convert`` exits 0 with a
loadable output, or 1/2 with exactly one stderr line naming the file -- never "internal error",
a traceback, a modified input or a partial output.  ``scripts/mutation_stress.py`` runs the
same judgement over thousands of mutants with counts per outcome."""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
MODELS = sorted((ROOT / "models").glob("*.onnx"))
SOURCES = [m.read_bytes() for m in MODELS]

_spec = importlib.util.spec_from_file_location("mutation_stress", ROOT / "scripts" / "mutation_stress.py")
stress = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stress)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(model=st.integers(0, len(SOURCES) - 1), kind=st.sampled_from(stress.KINDS),
       pos=st.integers(0, 1 << 30), value=st.integers(0, 255), count=st.sampled_from([1, 2, 8]),
       verify=st.sampled_from([False, False, False, True]))
def test_mutants_get_a_clean_outcome(capfd, model, kind, pos, value, count, verify):
    data = stress.mutate(SOURCES[model], kind, pos, value, count)
    tmp = Path(tempfile.mkdtemp(prefix="mutant-"))
    try:
        path, out = tmp / "mutant.onnx", tmp / "out.onnx"
        path.write_bytes(data)
        argv = ["convert", str(path), "-o", str(out)] + ([] if verify else ["--no-verify"])
        from onnx_slice_tools.cli import main
        code = main(argv)
        _, err = capfd.readouterr()  # file descriptor 2 too: native logs would show here
        outcome = stress.judge(path, data, out, code, err)
        event(outcome[:60])
        assert not outcome.startswith("BAD"), (MODELS[model].name, kind, pos, value, count, outcome)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_mutate_changes_the_bytes_as_described():
    data = bytes(range(10))
    assert stress.mutate(data, "truncate", 13, 0) == data[:3]
    assert stress.mutate(data, "bitflip", 2, 1) == data[:2] + bytes([2 ^ 2]) + data[3:]
    assert stress.mutate(data, "overwrite", 4, 200, 2) == data[:4] + bytes([200, 237]) + data[6:]
    assert stress.mutate(data, "insert", 1, 7) == data[:1] + b"\x07" + data[1:]
