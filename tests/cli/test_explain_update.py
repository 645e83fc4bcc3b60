"""``explain --update``: a slice write read, planned and lowered (cli/explain_update.py)."""

from __future__ import annotations

from onnx_slice_tools.cli.main import main


def test_explain_a_kv_cache_write(capfd):
    assert main(["explain", "--shape", "1,32,2,8", "--update", "1,1,2,8"]) == 0
    out, err = capfd.readouterr()
    assert err == "" and "clamped to [0, 32 - 1] = [0, 31]" in out and "Concat(" in out, out
    assert "axis 0 (dim 1): the update covers it whole" in out


def test_explain_a_strided_slice_write_and_its_broadcast(capfd):
    assert main(["explain", "x[1:4:2, 0]", "--shape", "5,3", "--update", "1"]) == 0
    out, _ = capfd.readouterr()
    assert "positions [1, 3]" in out and "ScatterND(" in out, out
    assert main(["explain", "x[1:4:2, 0]", "--shape", "5,3", "--update", "3"]) == 2
    out, err = capfd.readouterr()
    assert out == "" and err.count("\n") == 1 and "Cannot broadcast" in err, err
