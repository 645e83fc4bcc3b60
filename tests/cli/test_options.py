"""Options of convert / verify / inspect / explain: every contradiction and every malformed value
is one stderr line naming the option, exit 2, before any work (the model named on these
command lines does not even exist: a refusal that reads it would name the file instead)."""

from __future__ import annotations

import re

import pytest

from onnx_slice_tools.cli.main import main as cli_main

MISSING = "no_such_model.onnx"  # never read: the options are refused first


def _run(argv, capfd):
    try:
        code = cli_main(argv)
    except SystemExit as exc:  # argparse's own refusals (types, choices) exit from the parser
        code = exc.code
    out, err = capfd.readouterr()
    return code, out, [line for line in err.splitlines() if line.strip()]


CONTRADICTIONS = [
    (["convert", MISSING, "-o", "o.onnx", "--no-verify", "--strict"], ["--strict", "--no-verify"]),
    (["convert", MISSING, "-o", "o.onnx", "--no-verify", "--verify-memory", "64"], ["--verify-memory", "--no-verify"]),
    (["convert", MISSING, "-o", "o.onnx", "--no-verify", "--verify-on", "onnxruntime"], ["--verify-on", "--no-verify"]),
    (["convert", MISSING, "-o", "o.onnx", "--no-verify", "--input-range", "ids:0,9"], ["--input-range", "--no-verify"]),
    (["convert", MISSING, "-o", "o.onnx", "--input-range", "ids:0,9", "ids:0,5"], ["--input-range", "'ids'"]),
    (["convert", MISSING, "-o", "o.onnx", "--inputs", "x:1,2", "x:1,3"], ["--inputs", "'x'"]),
    (["convert", MISSING, "-o", "o.onnx", "--fix-slices"], ["--fix-slices", "onnxruntime"]),
    (["convert", MISSING, "-o", "o.onnx", "--fix-slices", "--target", "onnxruntime"], ["--fix-slices"]),
    (["convert", MISSING, "-o", "o.onnx", "--outputs", "a", "b", "a"], ["--outputs", "'a'"]),
    (["verify", MISSING, "--trials", "5"], ["--trials", "CONVERTED"]),
    (["verify", MISSING, "--flavor", "tf"], ["--flavor", "CONVERTED"]),
    (["verify", MISSING, "--strict"], ["--strict", "CONVERTED"]),
    (["inspect", MISSING, "--flavor", "tf", "--target", "portable"], ["--flavor", "--target"]),
]

MALFORMED = [
    (["convert", MISSING, "-o", "o.onnx", "--verify-on", "onnxruntime,,openvino"], ["--verify-on", "empty item"]),
    (["convert", MISSING, "-o", "o.onnx", "--verify-on", "onnxruntime,"], ["--verify-on", "empty item"]),
    (["convert", MISSING, "-o", "o.onnx", "--verify-memory", "0"], ["--verify-memory"]),
    (["convert", MISSING, "-o", "o.onnx", "--opset", "10"], ["--opset"]),
    (["convert", MISSING, "-o", "-"], ["--output"]),
    (["verify", MISSING, "x.onnx", "--trials", "0"], ["--trials"]),
    (["explain", "x[0]", "--shape", "a,,b"], ["--shape", "empty item"]),
    (["explain", "x[0]", "--shape", "a,b,"], ["--shape", "empty item"]),
    (["explain", "x[0]", "--shape", ",a"], ["--shape", "empty item"]),
    (["explain", "x[0]", "--shape=-1,2"], ["--shape", "negative"]),
    (["explain", "x[0]", "--shape", "99999999999999999999"], ["--shape", "int64"]),
    (["explain", "--begin", "1,,2", "--end", "3,4,5"], ["--begin", "empty item"]),
    (["explain", "--begin", "1", "--end", "3,"], ["--end", "empty item"]),
    (["explain", "--begin", "99999999999999999999", "--end", "1"], ["--begin", "int64"]),
    (["explain", "--begin", "1", "--end", "3", "--strides", "0"], ["--strides", "non-zero"]),
    (["explain", "--flavor", "openvino", "--begin", "1", "--end", "3", "--begin-mask", "5"], ["--begin-mask"]),
    (["explain", "--begin", "1", "--end", "3", "--end-mask", "1,0"], ["--end-mask"]),
    (["explain", "--begin", "1", "--end", "3", "--offset"], ["--offset", "tflite"]),
    (["explain", "x[0]", "--begin", "1", "--end", "2"], ["either"]),
    (["explain", "x"], ["'x'", "no subscript"]),
    (["explain", "x[-i]"], ["'-i'", "plain name"]),
    (["explain", "x[i+1]"], ["'i+1'", "plain name"]),
    (["explain", "x[99999999999999999999]"], ["int64"]),
    (["explain", "x[" + "-" * 5000 + "1]"], ["index expression"]),
    (["explain", "x[" + "(" * 5000 + "1]"], ["cannot parse"]),
]


@pytest.mark.parametrize("argv, needles", CONTRADICTIONS + MALFORMED,
                         ids=[re.sub(r"\W+", "_", " ".join(a[:1] + a[2:]))[:60] for a, _ in CONTRADICTIONS + MALFORMED])
def test_contradictory_or_malformed_options_are_one_line_exit_2_before_any_work(argv, needles, capfd, tmp_path,
                                                                               monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(argv, capfd)
    assert code == 2 and out == "", (code, out, err)
    assert len(err) == 1 and len(err[0]) < 400, err
    assert "internal error" not in err[0] and MISSING not in err[0], err  # the model was never read
    for needle in needles:
        assert needle in err[0], (needle, err[0])
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize("argv", [
    ["explain", "x[-1, +2, i]"],
    ["explain", "x[-9223372036854775808:9223372036854775807]"],
    ["explain", "x[0]", "--shape", "[a, b]"],
    ["explain", "--begin", "[1]", "--end", "(3)"],
])
def test_well_formed_options_are_accepted(argv, capfd):
    code, _, err = _run(argv, capfd)
    assert code == 0 and not err, err


def test_the_help_examples_of_begin_end_strides_are_accepted(capfd):
    """The examples printed by ``explain --help`` run as given (a zero stride never does)."""
    with pytest.raises(SystemExit):
        cli_main(["explain", "--help"])
    text = " ".join(capfd.readouterr().out.split())
    examples = {f: re.search(rf"--{f} {f.upper()} {f} as comma-separated integers, e\.g\. ([-0-9,]+)", text).group(1)
                for f in ("begin", "end", "strides")}
    assert "0" not in examples["strides"].split(",")
    code, _, err = _run(["explain", *(x for f, v in examples.items() for x in (f"--{f}", v)), "--shape", "4,4"],
                          capfd)
    assert code == 0 and not err, err


def test_giving_a_default_explicitly_contradicts_nothing(tmp_path, capfd):
    """``--flavor auto`` with ``--target`` and ``--trials 3`` alone are the defaults: no refusal."""
    from pathlib import Path
    model = Path(__file__).resolve().parents[2] / "models" / "tf_channel_flip.onnx"
    code, _, err = _run(["inspect", str(model), "--flavor", "auto", "--target", "portable"], capfd)
    assert code == 0 and not err, err
    code, _, err = _run(["verify", str(model), "--trials", "3"], capfd)
    assert "--trials" not in " ".join(err), err
