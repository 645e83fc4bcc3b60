"""inspect reads, plans and lowers exactly as convert does (it runs convert's own path, unverified),
fails where convert fails on unusable input (exit 2, one line), and the API's report words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onnx_slice_tools import convert
from onnx_slice_tools.cli.main import main as cli_main

MODELS = Path(__file__).resolve().parents[2] / "models"


def _run(argv, capfd):
    code = cli_main(argv)
    out, err = capfd.readouterr()
    return code, out, [line for line in err.splitlines() if line.strip()]


def test_inspect_with_a_wrong_flavor_exits_2_like_convert(tmp_path, capfd):
    model = str(MODELS / "tf_yolo_focus.onnx")
    code, out, err = _run(["convert", model, "-o", str(tmp_path / "o.onnx"), "--flavor", "openvino"], capfd)
    assert code == 2 and len(err) == 1
    convert_line = err[0]
    for argv in (["inspect", model, "--flavor", "openvino"], ["inspect", model, "--flavor", "openvino", "--json"]):
        code, out, err = _run(argv, capfd)
        assert code == 2 and out == "" and len(err) == 1, (code, out, err)
        # the same file, node and field as convert's line
        assert err[0].split(" (and ")[0] == convert_line.split(" (and ")[0], (err[0], convert_line)


@pytest.mark.parametrize("name", ["tf_yolo_focus.onnx", "tf_if_branch.onnx", "openvino_channel_flip.onnx",
                                  "tf_runtime_index.onnx"])
def test_inspect_rows_are_what_convert_does(name, capfd):
    code, out, err = _run(["inspect", str(MODELS / name), "--json"], capfd)
    assert code == 0 and not err, err
    rows = json.loads(out)
    records = convert(MODELS / name).report.to_dict()["rewrites"]
    assert [r["node"] for r in rows] == [r["node"] for r in records]
    for row, rec in zip(rows, records):
        assert row["spec"] == rec["spec"] and row["flavor"] == rec["flavor"]
        assert row["input_shape"] == rec["input_shape"] and row["output_shape"] == rec["output_shape"]
        assert row["onnx"] == [op for op in rec["emitted"] if not op.startswith("Identity")] or row["onnx"] == [
            "(rewiring)"]
    code, out, err = _run(["inspect", str(MODELS / name)], capfd)
    assert code == 0 and not err
    lines = out.splitlines()
    assert f"{len(rows)} StridedSlice node(s)" in lines[0] and len(lines) == 3 + len(rows)
    for row in rows:
        assert any(row["node"] in line and row["spec"] in line for line in lines[3:]), (row, out)


def test_api_verdict_without_verification_names_no_cli_flag():
    rep = convert(MODELS / "tf_channel_flip.onnx", verify=False).report
    assert not rep.verified and rep.ok
    assert "--" not in rep.verdict and "verification off" in rep.verdict, rep.verdict


def test_report_to_dict_is_a_dict_and_to_json_its_json_text():
    rep = convert(MODELS / "tf_channel_flip.onnx").report
    data = rep.to_dict()
    assert isinstance(data, dict) and data["verdict"] == rep.verdict
    text = rep.to_json()
    assert isinstance(text, str) and json.loads(text) == json.loads(json.dumps(data))


def test_readme_verify_example_is_what_verify_prints(tmp_path):
    """The user guide's ``verify`` example is the tool's output, line for line (trailing blanks aside)."""
    import os
    import shutil
    import subprocess
    import sys
    readme = (MODELS.parent / "docs" / "guide.md").read_text()
    start = readme.index("$ onnx-slice-tools verify converted/tf_yolo_focus.onnx\n")
    block = readme[start:readme.index("```", start)].rstrip("\n").splitlines()
    (tmp_path / "models").mkdir()
    shutil.copy(MODELS / "tf_yolo_focus.onnx", tmp_path / "models")
    assert cli_main(["convert", str(tmp_path / "models" / "tf_yolo_focus.onnx"), "-o",
                     str(tmp_path / "converted" / "tf_yolo_focus.onnx")]) == 0
    env = {**os.environ, "COLUMNS": "100"}
    printed = []
    for line in block:
        if line.startswith("$ onnx-slice-tools "):
            printed.append(line)
            argv = line.removeprefix("$ onnx-slice-tools ").split()
            proc = subprocess.run([sys.executable, "-m", "onnx_slice_tools", *argv], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, check=False)
            assert proc.returncode == 0 and proc.stderr == "", proc.stderr
            printed += proc.stdout.rstrip("\n").splitlines()
    assert [x.rstrip() for x in printed] == [x.rstrip() for x in block]
