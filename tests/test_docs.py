"""The README and the user guide run: every ``$ onnx-slice-tools`` command of their ``console``
blocks (and the ``onnx-slice-tools`` half of the README's set-up commands) runs in a copy of
``models/``, with the exit code its comment names (``# exit 1``; 0 otherwise) and, where the
block shows output, exactly that output (stderr then stdout; decimals and a ``...`` line stand
for what varies); every ``python`` block runs; every link to a document's section finds it."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", ROOT / "docs" / "guide.md"]
PROGRAM = "onnx-slice-tools "


def blocks(text: str, lang: str) -> list[list[str]]:
    """The lines of every fenced block of ``lang``."""
    return [m.group(1).splitlines() for m in re.finditer(rf"^```{lang}\n(.*?)^```", text, re.S | re.M)]


def commands(text: str) -> list[tuple[str, int, list[str] | None]]:
    """(arguments, expected exit code, expected output or None) of each command, in order."""
    found: list[tuple[str, int, list[str] | None]] = []
    for block in blocks(text, "sh"):
        for line in block:
            for part in line.split("&&"):
                if part.strip().startswith(PROGRAM):
                    found.append((part.strip()[len(PROGRAM):], 0, None))
    for block in blocks(text, "console"):
        for line in block:
            if line.startswith("$ " + PROGRAM):
                command, _, comment = line[2 + len(PROGRAM):].partition("  #")
                code = re.search(r"\bexit (\d+)", comment)
                found.append((command.strip(), int(code.group(1)) if code else 0, []))
            elif found and found[-1][2] is not None and (line.strip() or found[-1][2]):
                found[-1][2].append(line)
    for _, _, out in found:
        while out and not out[-1].strip():
            out.pop()
    return [(c, code, out or None) for c, code, out in found]


def _normal(line: str) -> str:
    return re.sub(r"\d+\.\d+", "N", line.rstrip())


def matches(expected: list[str], got: list[str]) -> bool:
    """``got`` is ``expected``, a ``...`` line matching any run of lines."""
    want = [_normal(x) for x in expected]
    have = [_normal(x) for x in got]
    pattern = "".join(".*?" if w == "..." else re.escape(w + "\n") for w in want)
    return re.fullmatch(pattern, "".join(h + "\n" for h in have), re.S) is not None


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_command_runs_as_shown(doc, tmp_path):
    shutil.copytree(ROOT / "models", tmp_path / "models")
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    ran = 0
    for command, code, expected in commands(doc.read_text()):
        proc = subprocess.run([sys.executable, "-m", "onnx_slice_tools", *shlex.split(command)], cwd=tmp_path,
                              env=env, capture_output=True, text=True, check=False)
        assert proc.returncode == code, f"{command}: exit {proc.returncode}\n{proc.stderr}"
        got = (proc.stderr + proc.stdout).rstrip("\n").splitlines()
        if expected is not None:
            assert matches(expected, got), f"{command}:\n" + "\n".join(got)
        ran += 1
    assert ran >= 2


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_python_block_runs(doc, tmp_path, monkeypatch):
    shutil.copytree(ROOT / "models", tmp_path / "models")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}  # (a block may use what an earlier one defined)
    for block in blocks(doc.read_text(), "python"):
        exec(compile("\n".join(block), f"{doc.name} python block", "exec"), namespace)


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_to_sections_find_them():
    broken = []
    for doc in [*DOCS, ROOT / "docs" / "design.md"]:
        for target, anchor in re.findall(r"\]\(([\w./-]*\.md)?#([\w-]+)\)", doc.read_text()):
            path = (doc.parent / target) if target else doc
            headings = [_anchor(h) for h in re.findall(r"^#+ (.*)$", path.read_text(), re.M)]
            if anchor not in headings:
                broken.append(f"{doc.name}: {target}#{anchor}")
    assert broken == [], broken


def test_the_readme_keeps_the_two_set_up_commands_on_its_first_screen():
    """A new user finds install, the two commands and a ``convert`` example with its output
    without scrolling (the first 40 lines)."""
    head = "\n".join((ROOT / "README.md").read_text().splitlines()[:40])
    assert 'pip install -e ".[tf]" && onnx-slice-tools batch models -o converted' in head
    assert 'pip install -e ".[test,oracles]" && pytest' in head
    assert re.search(r"^\$ onnx-slice-tools convert .*\n\S.* verified", head, re.M)


def test_the_parser_reads_commands_codes_and_outputs():
    text = ("```sh\npip install x && onnx-slice-tools batch models -o out\n```\n"
            "```console\n$ onnx-slice-tools convert a.onnx -o b.onnx   # exit 1, nothing written\n"
            "a.onnx: failed\n$ onnx-slice-tools inspect b.onnx\n$ onnx-slice-tools explain \"x[::-1]\"\nspec\n```\n")
    assert commands(text) == [("batch models -o out", 0, None), ("convert a.onnx -o b.onnx", 1, ["a.onnx: failed"]),
                              ("inspect b.onnx", 0, None), ('explain "x[::-1]"', 0, ["spec"])]
    assert matches(["[1/2] a [0.5 s]", "...", "done (3.2 s)"], ["[1/2] a [0.7 s]", "[2/2] b [1.0 s]", "done (9.9 s)"])
    assert not matches(["verified"], ["unverified"])
