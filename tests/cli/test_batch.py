"""Batch: what "unchanged" means, stale outputs, crashing workers, signals, one writer per folder."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from onnx_slice_tools.cli.batch import LOCK_NAME, TEST_HOOK_ENV, batch_convert
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
    t0 = time.perf_counter()
    clean = batch_convert(src, tmp_path / "clean", jobs=2)
    clean_s = time.perf_counter() - t0
    assert set(_statuses(clean).values()) == {"converted"}
    monkeypatch.setenv(TEST_HOOK_ENV, "abort:m005.onnx")
    t0 = time.perf_counter()
    crashed = batch_convert(src, tmp_path / "crashed", jobs=2)
    crashed_s = time.perf_counter() - t0
    statuses = _statuses(crashed)
    assert statuses.pop("m005.onnx") == "error" and set(statuses.values()) == {"converted"}
    assert "worker process died" in next(e["error"] for e in crashed.entries if e["input"].endswith("m005.onnx"))
    assert crashed.exit_code == 1
    # one restarted worker, not one process per remaining model (11 x a worker start-up)
    assert crashed_s < 1.5 * clean_s + 6, (crashed_s, clean_s)


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
    proc.wait(60)
    deadline = time.time() + 20
    while time.time() < deadline and any(_alive(k) for k in kids):
        time.sleep(0.1)
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
