"""Batch: what "unchanged" means, stale outputs, crashing workers, signals, one writer per folder."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from pausing import HANG_GUARD_S, Pause, wait_gone

from onnx_slice_tools.cli.batch import JOURNAL_NAME, LOCK_NAME, TEST_HOOK_ENV, batch_convert
from onnx_slice_tools.cli.main import main as cli_main
from onnx_slice_tools.errors import ModelError

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "models"
SAMPLE = MODELS / "tf_channel_flip.onnx"


def _folder(tmp_path: Path, n: int, name: str = "in") -> Path:
    src = tmp_path / name
    src.mkdir()
    for i in range(n):
        shutil.copy(SAMPLE, src / f"m{i:03d}.onnx")
    return src


def _statuses(report) -> dict:
    return {Path(e["input"]).name: e["status"] for e in report.entries}


def test_unchanged_only_when_input_options_and_output_all_match(tmp_path):
    src, out = _folder(tmp_path, 2), tmp_path / "out"
    first = batch_convert(src, out, jobs=1)
    assert set(_statuses(first).values()) == {"converted"}
    entry = first.entries[0]
    assert entry["options"] == {"flavor": None, "opset": None, "verify": True, "strict": False, "verify_memory": None,
                                "cleanup": True, "target": None, "verify_on": None,
                                "fix_slices": False}  # every convert option, defaults spelled out
    assert entry["output_sha256"] and entry["removed_stale_output"] == []
    assert set(_statuses(batch_convert(src, out, jobs=1)).values()) == {"unchanged"}
    # another option: converted again, and again when it goes back
    assert set(_statuses(batch_convert(src, out, jobs=1, opset=13)).values()) == {"converted"}
    assert set(_statuses(batch_convert(src, out, jobs=1, verify=False)).values()) == {"converted"}
    again = batch_convert(src, out, jobs=1)
    assert set(_statuses(again).values()) == {"converted"} and all(e["checks"] for e in again.entries)
    # the output on disk replaced by junk: not ours any more -- refused, never written over
    (out / "m001.onnx").write_bytes(b"junk")
    with pytest.raises(ModelError, match="m001.onnx: exists and batch did not write it"):
        batch_convert(src, out, jobs=1)
    assert (out / "m001.onnx").read_bytes() == b"junk"
    (out / "m001.onnx").unlink()  # moved away: converted again
    assert _statuses(batch_convert(src, out, jobs=1)) == {"m000.onnx": "unchanged", "m001.onnx": "converted"}
    assert (out / "m001.onnx").read_bytes() == (out / "m000.onnx").read_bytes()
    saved = json.loads((out / "report.json").read_text())
    assert {e["status"] for e in saved["models"]} == {"unchanged", "converted"}


def test_input_turned_corrupt_removes_its_stale_output_only(tmp_path):
    src, out = _folder(tmp_path, 2), tmp_path / "out"
    batch_convert(src, out, jobs=1)
    (out / "mine.onnx").write_bytes(b"a file of the user's")
    (src / "m001.onnx").write_bytes(b"corrupt now")
    report = batch_convert(src, out, jobs=1)
    by_name = {Path(e["input"]).name: e for e in report.entries}
    assert by_name["m001.onnx"]["status"] == "invalid"
    assert by_name["m001.onnx"]["removed_stale_output"] == [str(out / "m001.onnx")]
    assert not (out / "m001.onnx").exists() and (out / "m000.onnx").exists()
    assert (out / "mine.onnx").read_bytes() == b"a file of the user's"
    # an output the user replaced is not ours any more: never removed nor written over
    (src / "m000.onnx").write_bytes(b"corrupt too")
    (out / "m000.onnx").write_bytes(b"replaced by the user")
    with pytest.raises(ModelError, match="exists and batch did not write it"):
        batch_convert(src, out, jobs=1)
    assert (out / "m000.onnx").read_bytes() == b"replaced by the user"


def test_a_crashing_worker_costs_only_its_model(tmp_path, monkeypatch):
    n = 16
    src = _folder(tmp_path, n)
    monkeypatch.setenv(TEST_HOOK_ENV, "abort:m005.onnx")
    crashed = batch_convert(src, tmp_path / "crashed", jobs=2)
    statuses = _statuses(crashed)
    assert statuses.pop("m005.onnx") == "error" and set(statuses.values()) == {"converted"}
    assert "worker process died" in next(e["error"] for e in crashed.entries if e["input"].endswith("m005.onnx"))
    assert crashed.exit_code == 1
    # one restarted worker, not one process per remaining model: counted, not timed
    workers = {e["worker_pid"] for e in crashed.entries if e.get("worker_pid")}
    assert len(workers) <= 3, workers  # two slots, one of them restarted once


def test_workers_run_in_the_batch_folder_and_environment_of_each_batch(tmp_path, monkeypatch):
    """Workers are forked from one long-lived fork server (modules preloaded): each batch's
    working folder and environment still reach them -- relative paths after a chdir, a
    variable set after an earlier batch (here the test hook that crashes one model)."""
    from onnx_slice_tools.cli.batch import _context
    assert _context().get_start_method() == "forkserver"
    first = _folder(tmp_path, 2, "first")
    assert batch_convert(first, tmp_path / "first_out", jobs=2).exit_code == 0  # the fork server runs
    work = tmp_path / "work"
    work.mkdir()
    _folder(work, 3)
    monkeypatch.chdir(work)
    monkeypatch.setenv(TEST_HOOK_ENV, "abort:m001.onnx")
    report = batch_convert("in", "out", jobs=2)
    assert _statuses(report) == {"m000.onnx": "converted", "m001.onnx": "error", "m002.onnx": "converted"}
    assert (work / "out" / "m000.onnx").is_file() and (work / "out" / "m002.onnx").is_file()
    monkeypatch.delenv(TEST_HOOK_ENV)
    assert batch_convert("in", "out2", jobs=1).exit_code == 0  # and it is gone again


def _descendants(pid: int) -> set[int]:
    children: dict = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, set()).add(int(d))
    out, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), ()):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_killing_a_batch_leaves_no_process_behind(tmp_path, sig):
    src = _folder(tmp_path, 4)
    # a worker stuck in (simulated) native code: only a signal or the parent's death ends it
    env = dict(os.environ, PYTHONPATH=str(REPO), **{TEST_HOOK_ENV: "hang:m000.onnx"})
    proc = subprocess.Popen([sys.executable, "-m", "onnx_slice_tools", "batch", str(src), "-o", str(tmp_path / "out"),
                             "--jobs", "2"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(3):  # the three other models done: the fourth worker task is the hang
        assert b"converted" in proc.stderr.readline()
    kids = _descendants(proc.pid)
    assert len(kids) >= 3, kids  # two workers and the resource tracker
    proc.send_signal(sig)
    proc.wait(HANG_GUARD_S)  # hang guard only
    for k in kids:  # each ends (waited for, however long the machine takes; never timed)
        wait_gone(k)
    assert not [k for k in kids if _alive(k)]
    if sig == signal.SIGTERM:
        assert proc.returncode != 0 and b"Traceback" not in proc.stderr.read()


def test_a_second_batch_into_the_same_folder_is_refused(tmp_path, capsys):
    src, out = _folder(tmp_path, 2), tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(REPO), **{TEST_HOOK_ENV: "hang:m000.onnx"})  # keeps running
    first = subprocess.Popen([sys.executable, "-m", "onnx_slice_tools", "batch", str(src), "-o", str(out),
                              "--jobs", "2"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert b"converted" in first.stderr.readline()  # m001 done: the first batch is at work
        with pytest.raises(ModelError, match="another batch is writing into"):
            batch_convert(src, out, jobs=1)
        assert cli_main(["batch", str(src), "-o", str(out)]) == 2
        assert capsys.readouterr().err.strip() == f"another batch is writing into {out}"
        with open(out / LOCK_NAME, "a") as probe:  # the lock is really held by the first batch
            with pytest.raises(BlockingIOError):
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        first.terminate()
        first.wait(60)
    assert batch_convert(src, out, jobs=1).exit_code == 0  # released: runs


def test_an_empty_folder_is_an_error(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("no models here")
    assert cli_main(["batch", str(tmp_path / "empty"), "-o", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.strip() == (f"no models (.onnx, .tflite, .keras, .h5 or SavedModel folders) "
                                               f"under {tmp_path / 'empty'}")
    assert not (tmp_path / "out").exists()


def test_output_folder_inside_the_input_folder_is_left_out(tmp_path):
    src = _folder(tmp_path, 1)
    out = src / "converted"
    assert batch_convert(src, out, jobs=1).exit_code == 0
    report = batch_convert(src, out, jobs=1)  # its outputs are not taken for inputs
    assert [Path(e["input"]).name for e in report.entries] == ["m000.onnx"]
    assert report.entries[0]["status"] == "unchanged"


@pytest.mark.parametrize("out", [".", ".."])
def test_output_folder_that_is_or_contains_the_input_folder_is_refused(tmp_path, capsys, out):
    src = _folder(tmp_path, 1)
    before = sorted(tmp_path.rglob("*"))
    assert cli_main(["batch", str(src), "-o", str(src / out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and ("contains the input folder" in err or "must differ" in err), err
    with pytest.raises(ModelError, match="contains the input folder"):
        batch_convert(src, src / out)
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.parametrize("owner", ["itself", "another model"])
def test_batch_never_writes_over_an_input_data_file(tmp_path, owner):
    """An input keeps its external data in the output folder, where the output data of itself
    (model.onnx) or of another model (b.onnx) would go: that model is refused, the rest convert."""
    from models_ext import big_external_model
    import onnx
    src = tmp_path / "in"
    big_external_model(src, 1000)
    holder, victim = src / "model.onnx", "model"
    if owner != "itself":
        holder, victim = src / "a.onnx", "b"
        (src / "model.onnx").rename(holder)
        shutil.copy(SAMPLE, src / "b.onnx")
    out = src / "out"
    out.mkdir()
    (src / "weights.bin").rename(out / f"{victim}.onnx.data")
    m = onnx.load(holder, load_external_data=False)
    for e in m.graph.initializer[0].external_data:
        if e.key == "location":
            e.value = f"out/{victim}.onnx.data"
    holder.write_bytes(m.SerializeToString())
    before = (out / f"{victim}.onnx.data").read_bytes()
    report = batch_convert(src, out, jobs=1)
    by_name = {Path(e["input"]).name: e for e in report.entries}
    assert by_name[f"{victim}.onnx"]["status"] == "invalid"
    assert "is the input file" in by_name[f"{victim}.onnx"]["error"]
    if owner != "itself":
        assert by_name["a.onnx"]["status"] == "converted"
    assert (out / f"{victim}.onnx.data").read_bytes() == before and not (out / f"{victim}.onnx").exists()


def test_outputs_of_deleted_inputs_are_removed_only_when_still_ours(tmp_path, capfd):
    """An input deleted since the last run loses its output -- only a file the previous report
    records as ours, unchanged since (sha256); another input folder's report removes nothing."""
    src, out = _folder(tmp_path, 3), tmp_path / "out"
    batch_convert(src, out, jobs=1)
    (src / "m000.onnx").unlink()
    (src / "m001.onnx").unlink()
    (out / "m001.onnx").write_bytes(b"replaced by the user")
    (out / "mine.onnx").write_bytes(b"a file of the user's")
    assert cli_main(["batch", str(src), "-o", str(out), "-j", "1"]) == 0
    assert "2 input(s); 1 output file(s) of theirs removed" in capfd.readouterr().out
    saved = json.loads((out / "report.json").read_text())
    assert saved["deleted_inputs"] == [{"input": str(src / "m000.onnx"), "removed": [str(out / "m000.onnx")]},
                                       {"input": str(src / "m001.onnx"), "removed": []}]
    assert not (out / "m000.onnx").exists()
    assert (out / "m001.onnx").read_bytes() == b"replaced by the user"
    assert (out / "mine.onnx").read_bytes() == b"a file of the user's" and (out / "m002.onnx").exists()
    # another input folder into the same output folder: its models are not "deleted"
    other = _folder(tmp_path, 1, name="other")
    shutil.copy(SAMPLE, other / "x.onnx")
    report = batch_convert(other, out, jobs=1)
    assert report.deleted_inputs == [] and (out / "m002.onnx").exists()


def test_worker_warnings_go_into_the_entry_not_stderr(tmp_path, monkeypatch, capfd):
    """Python warnings and logging records raised while a model converts land in its report
    entry (``warnings``), never on stderr."""
    import logging
    import warnings

    import onnx_slice_tools.api as api
    from onnx_slice_tools.cli.batch import convert_one
    real = api.convert

    def noisy(*args, **kwargs):
        warnings.warn("numpy said something", RuntimeWarning)
        logging.getLogger("onnx_ir").warning("onnx-ir said something")
        return real(*args, **kwargs)
    monkeypatch.setattr(api, "convert", noisy)
    models = Path(__file__).resolve().parents[2] / "models"
    entry = convert_one(str(models / "tf_channel_flip.onnx"), str(tmp_path / "o.onnx"), {})
    assert entry["status"] == "converted", entry
    assert "RuntimeWarning: numpy said something" in entry["warnings"]
    assert "onnx_ir: onnx-ir said something" in entry["warnings"]
    assert capfd.readouterr().err == ""


def test_two_inputs_mapping_to_one_output_never_share_it(tmp_path):
    """m.onnx and m.tflite both map to m.onnx: the .onnx input keeps it, the other is refused
    (the second worker wrote over the first's output and both were reported converted)."""
    src, out = _folder(tmp_path, 1), tmp_path / "out"
    shutil.copy(MODELS / "tflite_masks.tflite", src / "m000.tflite")
    report = batch_convert(src, out, jobs=2, verify=False)
    by_name = {Path(e["input"]).name: e for e in report.entries}
    assert by_name["m000.onnx"]["status"] == "converted"
    assert by_name["m000.tflite"]["status"] == "invalid"
    assert f"is the output of {src / 'm000.onnx'}" in by_name["m000.tflite"]["error"]
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == ["m000.onnx", "report.json"]
    import hashlib
    assert hashlib.sha256((out / "m000.onnx").read_bytes()).hexdigest() == by_name["m000.onnx"]["output_sha256"]


# --------------------------------------------------------------------------- never over a user's file

def _tree(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _one_line_err(capfd) -> tuple[str, str]:
    out, err = capfd.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return out, lines[0]


def test_output_inside_input_never_replaces_the_users_own_file(tmp_path, capfd, monkeypatch):
    """``batch clash -o clash/sub`` with ``clash/a.onnx`` and a user's own ``clash/sub/a.onnx``:
    refused (exit 2, one line, nothing written); ``sub`` is left out of the inputs and said so."""
    monkeypatch.chdir(tmp_path)
    clash = tmp_path / "clash"
    (clash / "sub").mkdir(parents=True)
    shutil.copy(SAMPLE, clash / "a.onnx")
    (clash / "sub" / "a.onnx").write_bytes(b"the user's own a.onnx")
    shutil.copy(MODELS / "tf_yolo_focus.onnx", clash / "sub" / "b.onnx")
    before = _tree(tmp_path)
    assert cli_main(["batch", "clash", "-o", "clash/sub", "-j", "1"]) == 2
    out, err = _one_line_err(capfd)
    assert err.startswith("clash/sub/a.onnx: exists and batch did not write it"), err
    assert "converted" not in out and _tree(tmp_path) == before  # no output, no report, no lock file
    (clash / "sub" / "a.onnx").unlink()  # moved away: converts, and says what it left out
    assert cli_main(["batch", "clash", "-o", "clash/sub", "-j", "1"]) == 0
    out = capfd.readouterr().out
    assert "note: the output folder clash/sub is inside the input folder: left out of the inputs " \
           "(1 model(s) in it not converted)" in out, out
    saved = json.loads((clash / "sub" / "report.json").read_text())
    assert [e["input"] for e in saved["models"]] == ["clash/a.onnx"] and saved["notes"]
    assert (clash / "sub" / "b.onnx").read_bytes() == (MODELS / "tf_yolo_focus.onnx").read_bytes()


def test_models_in_an_output_folder_inside_the_input_are_not_skipped_silently(tmp_path, capfd):
    """``batch bin -o bin/sub`` with five models already in ``sub``: the note counts them."""
    src = _folder(tmp_path, 1, "bin")
    sub = src / "sub"
    sub.mkdir()
    for i in range(5):
        shutil.copy(SAMPLE, sub / f"s{i}.onnx")
    assert cli_main(["batch", str(src), "-o", str(sub), "-j", "1"]) == 0
    assert f"note: the output folder {sub} is inside the input folder: left out of the inputs (5 model(s) in " \
           "it not converted)" in capfd.readouterr().out


@pytest.mark.parametrize("layout", ["input inside output", "same folder"])
def test_output_folder_containing_or_equal_to_the_input_is_refused_before_any_work(tmp_path, capfd, layout):
    out = tmp_path / "out"
    out.mkdir()
    src = _folder(out, 1, "in") if layout == "input inside output" else _folder(tmp_path, 1)
    dest = out if layout == "input inside output" else src
    before = _tree(tmp_path)
    assert cli_main(["batch", str(src), "-o", str(dest)]) == 2
    _, err = _one_line_err(capfd)
    assert "contains the input folder" in err or "must differ" in err, err
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("whose", ["no report", "another sha256", "a .data file"])
def test_a_users_file_where_an_output_goes_refuses_the_batch(tmp_path, capfd, whose):
    """A file no report of ours records (with its sha256) is a user's: exit 2, one line, before
    any work -- also with --force, also beside outputs of ours."""
    src, out = _folder(tmp_path, 2), tmp_path / "out"
    victim = out / "m001.onnx"
    if whose == "no report":
        out.mkdir()
        victim.write_bytes(b"mine")
    else:
        batch_convert(src, out, jobs=1)
        if whose == "a .data file":
            victim = out / "m001.onnx.data"
        victim.write_bytes(b"mine")
        (src / "m001.onnx").write_bytes((MODELS / "tf_yolo_focus.onnx").read_bytes())  # m001 to convert again
    before = _tree(tmp_path)
    assert cli_main(["batch", str(src), "-o", str(out), "-j", "1", "--force"]) == 2
    out_text, err = _one_line_err(capfd)
    assert err.startswith(f"{victim}: exists and batch did not write it"), err
    assert out_text == "" and _tree(tmp_path) == before


# --------------------------------------------------------------------------- re-runs

@pytest.mark.parametrize("where", ["tool version", "runtime version"])
def test_another_version_converts_again(tmp_path, where):
    """The skip fingerprint holds the tool's version and the verifying runtimes' versions."""
    src, out = _folder(tmp_path, 1), tmp_path / "out"
    first = batch_convert(src, out, jobs=1)
    import onnxruntime

    import onnx_slice_tools
    assert first.entries[0]["versions"]["onnxruntime"] == onnxruntime.__version__
    assert first.entries[0]["versions"]["onnx-slice-tools"] == onnx_slice_tools.__version__
    assert "openvino" not in first.entries[0]["versions"]  # not used by the default target
    assert _statuses(batch_convert(src, out, jobs=1)) == {"m000.onnx": "unchanged"}
    saved = json.loads((out / "report.json").read_text())
    if where == "tool version":
        saved["version"] = "0.0.1"
    else:
        saved["models"][0]["versions"]["onnxruntime"] = "1.0.0"
    (out / "report.json").write_text(json.dumps(saved))
    assert _statuses(batch_convert(src, out, jobs=1)) == {"m000.onnx": "converted"}
    assert _statuses(batch_convert(src, out, jobs=1)) == {"m000.onnx": "unchanged"}


def test_openvino_version_counts_when_openvino_verifies(tmp_path):
    src, out = _folder(tmp_path, 1), tmp_path / "out"
    report = batch_convert(src, out, jobs=1, verify_on=["onnxruntime", "openvino"])
    from importlib import metadata
    assert report.entries[0]["versions"]["openvino"] == metadata.version("openvino")
    saved = json.loads((out / "report.json").read_text())
    saved["models"][0]["versions"]["openvino"] = "1.0"
    (out / "report.json").write_text(json.dumps(saved))
    assert _statuses(batch_convert(src, out, jobs=1, verify_on=["onnxruntime", "openvino"])) == {
        "m000.onnx": "converted"}


def test_two_runs_with_other_inputs_keep_both_in_the_report(tmp_path):
    """Run A then run B into one folder: report.json records both runs' outputs, so deleting
    one of A's inputs later still removes its output (and only that)."""
    a, b, out = _folder(tmp_path, 2, "a"), tmp_path / "b", tmp_path / "out"
    b.mkdir()
    shutil.copy(MODELS / "tf_yolo_focus.onnx", b / "y.onnx")
    batch_convert(a, out, jobs=1)
    batch_convert(b, out, jobs=1)
    saved = json.loads((out / "report.json").read_text())
    assert [e["input"] for e in saved["models"]] == [str(b / "y.onnx")]
    assert sorted(e["output"] for e in saved["earlier_models"]) == [str(out / "m000.onnx"), str(out / "m001.onnx")]
    (a / "m000.onnx").unlink()
    report = batch_convert(a, out, jobs=1)
    assert report.deleted_inputs == [{"input": str(a / "m000.onnx"), "removed": [str(out / "m000.onnx")]}]
    assert _statuses(report) == {"m001.onnx": "unchanged"}
    assert sorted(p.name for p in out.iterdir()) == ["m001.onnx", "report.json", "y.onnx"]  # no lock file left
    saved = json.loads((out / "report.json").read_text())
    assert [e["output"] for e in saved["earlier_models"]] == [str(out / "y.onnx")]


def test_the_lock_file_is_removed_when_the_batch_ends(tmp_path):
    src, out = _folder(tmp_path, 1), tmp_path / "out"
    batch_convert(src, out, jobs=1)
    assert not (out / LOCK_NAME).exists()
    (src / "m000.onnx").write_bytes(b"broken")
    assert batch_convert(src, out, jobs=1).exit_code == 2 and not (out / LOCK_NAME).exists()


# --------------------------------------------------------------------------- options, pipelines

@pytest.mark.parametrize("flags, needle", [
    (["--no-verify", "--strict"], "--strict and --no-verify contradict each other"),
    (["--no-verify", "--verify-on", "openvino"], "--verify-on and --no-verify contradict each other"),
    (["--no-verify", "--verify-memory", "10"], "--verify-memory and --no-verify contradict each other"),
    (["--fix-slices"], "--fix-slices: target onnxruntime has no constraint for it to fix"),
    (["--report", "-", "--jsonl"], "both write to stdout"),
    (["--report", "out.json"], "--report"),
])
def test_contradicting_options_are_refused_before_any_work(tmp_path, capfd, flags, needle):
    src = _folder(tmp_path, 1)
    try:
        code = cli_main(["batch", str(src), "-o", str(tmp_path / "out"), *flags])
    except SystemExit as exc:  # a usage error of the parser
        code = exc.code
    assert code == 2
    out, err = _one_line_err(capfd)
    assert needle in err and out == "" and not (tmp_path / "out").exists(), err


@pytest.mark.parametrize("flags", [["--target", "portable"], ["--verify-on", "onnxruntime,openvino"]])
def test_missing_openvino_is_one_line_before_any_work(tmp_path, capfd, monkeypatch, flags):
    monkeypatch.setitem(sys.modules, "openvino", None)  # as if not installed: its import fails
    src = _folder(tmp_path, 3)
    assert cli_main(["batch", str(src), "-o", str(tmp_path / "out"), *flags]) == 2
    out, err = _one_line_err(capfd)
    assert err.startswith(f"{flags[0]} ") and "pip install 'onnx-slice-tools[openvino]'" in err, err
    assert "RuntimeUnavailable" not in err and out == "" and not (tmp_path / "out").exists()


def test_batch_takes_the_convert_options(tmp_path):
    src = _folder(tmp_path, 1)
    code = cli_main(["batch", str(src), "-o", str(tmp_path / "out"), "-j", "1", "--target", "portable",
                     "--verify-on", "onnxruntime,reference", "--fix-slices", "--opset", "17", "--strict", "-q"])
    assert code == 0
    entry = json.loads((tmp_path / "out" / "report.json").read_text())["models"][0]
    assert entry["options"]["verify_on"] == ["onnxruntime", "reference"] and entry["options"]["fix_slices"]
    assert entry["options"]["target"] == "portable" and entry["outcome"] == "verified"


def test_report_on_stdout_jsonl_and_quiet(tmp_path, capfd):
    src, out = _folder(tmp_path, 2), tmp_path / "out"
    (src / "broken.onnx").write_bytes(b"")
    assert cli_main(["batch", str(src), "-o", str(out), "-j", "1", "--report", "-"]) == 2  # the worst status
    stdout, stderr = capfd.readouterr()
    data = json.loads(stdout)  # stdout is the report alone; the table went to stderr
    assert data == json.loads((out / "report.json").read_text())
    assert data["summary"] == {"verified": 2, "invalid": 1} and "summary: 2 verified, 1 invalid" in stderr
    assert cli_main(["batch", str(src), "-o", str(out), "-j", "1", "--jsonl", "--force"]) == 2
    stdout, stderr = capfd.readouterr()
    lines = [json.loads(line) for line in stdout.splitlines()]
    assert sorted((Path(e["input"]).name, e["outcome"]) for e in lines) == [
        ("broken.onnx", "invalid"), ("m000.onnx", "verified"), ("m001.onnx", "verified")]
    assert "summary:" in stderr
    assert cli_main(["batch", str(src), "-o", str(out), "-j", "1", "--quiet"]) == 2
    assert capfd.readouterr() == ("", "")


def test_an_unverified_model_is_not_counted_as_converted(tmp_path, capfd):
    src, out = _folder(tmp_path, 2), tmp_path / "out"
    assert cli_main(["batch", str(src), "-o", str(out), "-j", "1", "--no-verify"]) == 0
    text = capfd.readouterr().out
    assert "summary: 2 unverified" in text and "converted" not in text.splitlines()[-2], text
    rows = [line for line in text.splitlines() if line.startswith("│")]
    assert all("unverified" in r for r in rows) and len(rows) == 2
    assert "NOT fully verified" in text


def test_the_progress_bar_names_the_models_still_running():
    from onnx_slice_tools.cli.main import _BatchProgress

    class Bar:
        def __init__(self):
            self.descriptions = []

        def update(self, task, advance=0, description=None):
            if description is not None:
                self.descriptions.append(description)
    progress = _BatchProgress(fancy=False)
    progress.bar, progress.task, progress.total = Bar(), 0, 3
    progress.begin("in/a.onnx")
    progress.begin("in/b.tflite")
    progress.result({"input": "in/a.onnx", "status": "converted"})
    progress.begin("in/c.onnx")
    progress.result({"input": "in/b.tflite", "status": "converted"})
    assert progress.bar.descriptions == ["a.onnx", "a.onnx, b.tflite", "b.tflite", "b.tflite, c.onnx", "c.onnx"]


def test_framework_models_share_one_worker(tmp_path):
    """TensorFlow is imported once per batch, not once per worker: every framework input goes
    to the same worker process while the others take the .onnx models."""
    src = _folder(tmp_path, 3)
    for name in ("tflite_masks.tflite", "tflite_offset.tflite"):
        shutil.copy(MODELS / name, src / name)
    report = batch_convert(src, tmp_path / "out", jobs=2, verify=False)
    assert {outcome for outcome in report.counts()} == {"unverified"}
    pids = {Path(e["input"]).name: e["worker_pid"] for e in report.entries}
    assert pids["tflite_masks.tflite"] == pids["tflite_offset.tflite"]
    assert {pids[f"m00{i}.onnx"] for i in range(3)} - {pids["tflite_masks.tflite"]}  # the other slot worked


# --------------------------------------------------------------------------- resume after SIGKILL

def _batch_process(src: Path, out: Path, env: dict, jobs: int = 1) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "onnx_slice_tools", "batch", str(src), "-o", str(out),
                             "--jobs", str(jobs)], env=dict(os.environ, PYTHONPATH=str(REPO), **env),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _kill_batch(proc: subprocess.Popen, *also: int) -> None:
    """SIGKILL the batch process (as the OOM killer would), then ``also`` (a stopped worker),
    and wait until the batch and all its descendants are gone."""
    kids = _descendants(proc.pid)
    proc.kill()
    assert proc.wait() == -signal.SIGKILL
    for pid in also:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for k in kids:
        wait_gone(k)


def _journal(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / JOURNAL_NAME).read_text().splitlines() if line]


def test_a_batch_killed_after_two_models_resumes_where_it_stopped(tmp_path):
    """SIGKILL once two models are recorded in the journal (the batch stops itself there:
    pausing.py): no report.json, but the next run skips those two (unchanged) instead of
    refusing their outputs, converts the rest and removes the journal.  A user's file where an
    output goes is still refused."""
    src, out = _folder(tmp_path, 4), tmp_path / "out"
    pause = Pause(tmp_path, "batch-recorded", nth=2)
    proc = _batch_process(src, out, pause.env)
    assert pause.wait(proc) == proc.pid
    _kill_batch(proc)
    pause.release()
    assert not (out / "report.json").exists()
    done = [r["done"] for r in _journal(out) if "done" in r]
    assert [Path(e["input"]).name for e in done] == ["m000.onnx", "m001.onnx"]
    assert all(e["status"] == "converted" and e["output_sha256"] for e in done)
    assert sorted(p.name for p in out.glob("*.onnx")) == ["m000.onnx", "m001.onnx"]
    (out / "m003.onnx").write_bytes(b"a file of the user's")  # never written over
    with pytest.raises(ModelError, match="m003.onnx: exists and batch did not write it"):
        batch_convert(src, out, jobs=1)
    assert (out / "m003.onnx").read_bytes() == b"a file of the user's"
    (out / "m003.onnx").unlink()
    report = batch_convert(src, out, jobs=1)
    assert _statuses(report) == {"m000.onnx": "unchanged", "m001.onnx": "unchanged", "m002.onnx": "converted",
                                 "m003.onnx": "converted"}
    assert not (out / JOURNAL_NAME).exists()
    saved = json.loads((out / "report.json").read_text())
    assert sorted(Path(e["input"]).name for e in saved["models"]) == ["m000.onnx", "m001.onnx", "m002.onnx",
                                                                      "m003.onnx"]
    assert sorted(p.name for p in out.iterdir()) == ["m000.onnx", "m001.onnx", "m002.onnx", "m003.onnx",
                                                     "report.json"]


def test_an_output_caught_mid_write_by_sigkill_is_replaced_never_a_users_file(tmp_path):
    """SIGKILL while the second model's save has renamed its new .data into place but not its
    model (the worker stops itself there).  The journal's landing line (sha256, .data size)
    tells that file ours: the next run removes it and converts the model again; the first is
    unchanged.  The same path holding other bytes (a user's file) is refused, not removed."""
    from models_ext import big_external_model
    src, out = tmp_path / "in", tmp_path / "out"
    for name in ("a", "b", "c"):
        big_external_model(src / name, 1000)
    pause = Pause(tmp_path, "save-data-landed", nth=2)  # counted in the one worker: model b
    proc = _batch_process(src, out, pause.env)
    worker = pause.wait(proc)
    assert worker != proc.pid
    _kill_batch(proc, worker)
    pause.release()
    landed = out / "b" / "model.onnx.data"
    assert landed.exists() and not (out / "b" / "model.onnx").exists() and not (out / "report.json").exists()
    assert [p.name for p in (out / "b").iterdir() if p.name.startswith(".onnx-slice-tools-tmp-")]  # the kill's
    records = _journal(out)
    assert [Path(r["done"]["input"]).parent.name for r in records if "done" in r] == ["a"]
    assert [r["landing"]["data_size"] for r in records if "landing" in r] == [4000, 4000]
    # a user's file in its place (other bytes): refused, kept
    ours = landed.read_bytes()
    landed.write_bytes(b"the user's own")
    with pytest.raises(ModelError, match="model.onnx.data: exists and batch did not write it"):
        batch_convert(src, out, jobs=1)
    assert landed.read_bytes() == b"the user's own"
    landed.write_bytes(ours)  # the file the killed batch landed: removed, converted again
    report = batch_convert(src, out, jobs=1)
    by_name = {Path(e["input"]).parent.name: e["status"] for e in report.entries}
    assert by_name == {"a": "unchanged", "b": "converted", "c": "converted"}
    assert any("caught writing" in n and str(landed) in n for n in report.notes), report.notes
    assert not (out / JOURNAL_NAME).exists()
    for name in ("a", "b", "c"):  # each output complete, no temporaries left
        assert sorted(p.name for p in (out / name).iterdir()) == ["model.onnx", "model.onnx.data"]
        import onnx
        onnx.checker.check_model(onnx.load(out / name / "model.onnx"))


def test_a_symlink_or_fifo_where_the_journal_goes_is_refused_in_one_line(tmp_path, capsys):
    src, out = _folder(tmp_path, 1), tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (out / JOURNAL_NAME).symlink_to(victim)
    assert cli_main(["batch", str(src), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and JOURNAL_NAME in err and "the journal" in err, err
    assert victim.read_text() == "keep me"
    (out / JOURNAL_NAME).unlink()
    os.mkfifo(out / JOURNAL_NAME)  # a read that would never end
    assert cli_main(["batch", str(src), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the journal is not a regular file" in err, err
