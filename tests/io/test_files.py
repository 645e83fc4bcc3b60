"""Never harm a user's file: outputs vs inputs, symlinks, devices, atomic two-file saves,
temporaries, and external data in every graph, subgraph and function."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from models_ext import big_external_model, nested_expected, nested_model
from pausing import HANG_GUARD_S, Pause, wait_gone

from onnx_slice_tools import convert
from onnx_slice_tools.cli.main import main as cli_main
from onnx_slice_tools.errors import ModelError
from onnx_slice_tools.io.files import TEMP_PREFIX, clean_stale_temps

REPO = Path(__file__).resolve().parents[2]


def _snapshot(folder: Path) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _one_line_error(capsys, *needles) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    for n in needles:
        assert str(n) in err, err
    return err


def _temps(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.startswith(TEMP_PREFIX)]


# --------------------------------------------------------------------------- outputs vs inputs

def test_report_onto_the_input_model_is_refused(tmp_path, capsys):
    src = nested_model(tmp_path / "in")
    before = _snapshot(tmp_path / "in")
    assert cli_main(["convert", str(src), "-o", str(tmp_path / "o.onnx"), "--report", str(src)]) == 2
    _one_line_error(capsys, src, "report")
    assert _snapshot(tmp_path / "in") == before and not (tmp_path / "o.onnx").exists()


@pytest.mark.parametrize("report", ["o.onnx", "o.onnx.data"])
def test_report_onto_the_output_is_refused(tmp_path, capsys, report):
    src = nested_model(tmp_path / "in")
    assert cli_main(["convert", str(src), "-o", str(tmp_path / "o.onnx"), "--report", str(tmp_path / report)]) == 2
    _one_line_error(capsys, report, "is also the output")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]


def test_output_onto_the_inputs_data_file_is_refused(tmp_path, capsys):
    src = nested_model(tmp_path / "in")
    before = _snapshot(tmp_path / "in")
    assert cli_main(["convert", str(src), "-o", str(tmp_path / "in" / "w.bin")]) == 2
    _one_line_error(capsys, "w.bin", "is the input file")
    assert _snapshot(tmp_path / "in") == before


def test_output_whose_data_file_would_be_the_inputs_data_is_refused(tmp_path, capsys):
    folder = tmp_path / "d"
    src = big_external_model(folder, 1000)
    (folder / "weights.bin").rename(folder / "x.onnx.data")  # the input keeps its weights in x.onnx.data
    m = onnx.load(src, load_external_data=False)
    for e in m.graph.initializer[0].external_data:
        if e.key == "location":
            e.value = "x.onnx.data"
    src.write_bytes(m.SerializeToString())
    before = _snapshot(folder)
    assert cli_main(["convert", str(src), "-o", str(folder / "x.onnx")]) == 2
    _one_line_error(capsys, "x.onnx.data", "is the input file")
    assert _snapshot(folder) == before


def test_hard_link_to_the_input_as_output_is_refused(tmp_path, capsys):
    src = nested_model(tmp_path / "in")
    (tmp_path / "out").mkdir()
    os.link(src, tmp_path / "out" / "h.onnx")  # another path, the same inode
    before = src.read_bytes()
    assert cli_main(["convert", str(src), "-o", str(tmp_path / "out" / "h.onnx")]) == 2
    _one_line_error(capsys, "h.onnx", src)
    assert src.read_bytes() == before


@pytest.mark.parametrize("flag", ["-o", "--report"])
def test_symlink_outputs_are_refused(tmp_path, capsys, flag):
    src = nested_model(tmp_path / "in")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (tmp_path / "to_file").symlink_to(victim)
    (tmp_path / "to_null").symlink_to("/dev/null")
    for link in ("to_file", "to_null"):
        args = ["convert", str(src), "-o", str(tmp_path / "o.onnx")]
        args += [flag, str(tmp_path / link)] if flag == "--report" else []
        if flag == "-o":
            args[3] = str(tmp_path / link)
        assert cli_main(args) == 2
        _one_line_error(capsys, link, "is a symlink")
        assert (tmp_path / link).is_symlink()
    assert victim.read_text() == "keep me" and Path("/dev/null").is_char_device()


@pytest.mark.parametrize("flag", ["-o", "--report"])
def test_device_node_outputs_are_refused(tmp_path, capsys, flag):
    src = nested_model(tmp_path / "in")
    st = os.stat("/dev/null")
    args = ["convert", str(src), "-o", "/dev/null" if flag == "-o" else str(tmp_path / "o.onnx")]
    args += ["--report", "/dev/null"] if flag == "--report" else []
    assert cli_main(args) == 2
    _one_line_error(capsys, "/dev/null", "is not a regular file")
    after = os.stat("/dev/null")
    assert Path("/dev/null").is_char_device() and (after.st_ino, after.st_rdev) == (st.st_ino, st.st_rdev)
    assert not (tmp_path / "o.onnx").exists()


@pytest.mark.parametrize("old", ["ours", "not_referenced", "names_other_file"])
def test_stale_output_data_goes_only_when_the_replaced_output_named_it(tmp_path, capsys, old):
    """An output without external data replaces one that had it: the old OUTPUT.data is removed
    only when the old OUTPUT model named it (never a file we cannot tie to the old output)."""
    ext = big_external_model(tmp_path / "ext", 1000)
    inline = tmp_path / "inline.onnx"
    inline.write_bytes(onnx.load(ext, load_external_data=True).SerializeToString())  # same model, no .data
    out = tmp_path / "out" / "o.onnx"
    data = Path(str(out) + ".data")
    if old == "ours":
        assert cli_main(["convert", str(ext), "-o", str(out), "--no-verify"]) == 0
        assert data.exists()
    else:
        out.parent.mkdir()
        m = onnx.load(inline)
        if old == "names_other_file":  # an old output with external data elsewhere
            onnx.save(m, str(out), save_as_external_data=True, location="other.bin", size_threshold=0)
        else:
            onnx.save(m, str(out))
        data.write_bytes(b"a user's file")
    assert cli_main(["convert", str(inline), "-o", str(out), "--no-verify"]) == 0
    capsys.readouterr()
    assert onnx.load(out).graph.initializer[0].data_location == onnx.TensorProto.DEFAULT
    assert data.exists() == (old != "ours")
    if old != "ours":
        assert data.read_bytes() == b"a user's file"


def test_existing_folder_as_output_leaves_nothing_behind(tmp_path, capsys):
    src = nested_model(tmp_path / "in")
    out = tmp_path / "out"
    (out / "dir").mkdir(parents=True)
    assert cli_main(["convert", str(src), "-o", str(out / "dir")]) == 2
    _one_line_error(capsys, "dir", "is a folder")
    assert sorted(p.name for p in out.iterdir()) == ["dir"] and not any((out / "dir").iterdir())


# --------------------------------------------------------------------------- external data everywhere

def _run(path: Path, x, c) -> np.ndarray:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x, "c": np.array(c)})[0]


def test_external_data_in_if_loop_and_function_is_carried(tmp_path, monkeypatch):
    src = nested_model(tmp_path / "in")
    before = _snapshot(tmp_path / "in")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # the working directory must not matter
    out = tmp_path / "out" / "conv.onnx"
    assert cli_main(["convert", str(src), "-o", str(out)]) == 0
    assert _snapshot(tmp_path / "in") == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["conv.onnx", "conv.onnx.data"]
    proto = onnx.load(out, load_external_data=False)
    from onnx_slice_tools.io.files import proto_tensors
    external = {t.name: {e.key: e.value for e in t.external_data} for t in proto_tensors(proto) if t.external_data}
    assert set(external) == {"Wt", "We", "Wl", "Cf"}
    assert {v["location"] for v in external.values()} == {"conv.onnx.data"}
    (tmp_path / "in" / "w.bin").unlink()  # the output needs nothing of the input's
    monkeypatch.chdir(tmp_path)
    x = np.array([1, -2, 3.5, 0], np.float32)
    for c in (True, False):
        y = _run(out, x, c)
        want = nested_expected(x, c)
        assert y.dtype == want.dtype and y.shape == want.shape and np.array_equal(y, want)


def test_external_data_survives_an_opset_upgrade_from_another_directory(tmp_path, monkeypatch):
    src = big_external_model(tmp_path / "in", 1000)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    out = tmp_path / "out" / "conv.onnx"
    assert cli_main(["convert", str(src), "-o", str(out), "--opset", "18"]) == 0
    (tmp_path / "in" / "weights.bin").unlink()
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    y = sess.run(None, {"idx": np.array([[5, 6, 7, 8]], np.int64)})[0]
    assert y.dtype == np.float32 and np.array_equal(y, np.array([[5, 6, 7]], np.float32))


@pytest.mark.parametrize("tensor", ["We", "Wl", "Cf"])
@pytest.mark.parametrize("case", ["outside", "absolute", "nul", "fifo", "dev_zero", "missing", "beyond", "length"])
def test_bad_external_data_in_subgraphs_and_functions_is_refused(tmp_path, capsys, tensor, case):
    folder = tmp_path / "m"
    folder.mkdir()
    location = {"outside": "../outside.bin", "absolute": str(tmp_path / "outside.bin"), "nul": "w\0.bin",
                "fifo": "fifo.bin", "dev_zero": "zero.bin", "missing": "gone.bin", "beyond": "short.bin",
                "length": "w.bin"}[case]
    (tmp_path / "outside.bin").write_bytes(b"\0" * 64)
    os.mkfifo(folder / "fifo.bin")
    (folder / "zero.bin").symlink_to("/dev/zero")
    (folder / "short.bin").write_bytes(b"\0" * 60)  # every tensor is at offset <= 48, 16 bytes
    src = nested_model(folder, {tensor: location})
    if case in ("beyond", "length"):  # the tensor past the end / shorter than its shape
        m = onnx.load(src, load_external_data=False)
        from onnx_slice_tools.io.files import proto_tensors
        key, value = ("offset", "48") if case == "beyond" else ("length", "12")
        for t in proto_tensors(m):
            if t.name == tensor:
                for e in t.external_data:
                    if e.key == key:
                        e.value = value
        src.write_bytes(m.SerializeToString())
    want = {"outside": "outside the model's folder", "absolute": "outside the model's folder", "nul": "NUL",
            "fifo": "not a regular file", "dev_zero": "outside the model's folder", "missing": "not found",
            "beyond": "beyond the end", "length": "does not match"}[case]
    with pytest.raises(ModelError, match=want):
        convert(src)
    assert cli_main(["convert", str(src), "-o", str(tmp_path / "o.onnx")]) == 2
    _one_line_error(capsys, src, repr(tensor), want)
    assert not (tmp_path / "o.onnx").exists()


# --------------------------------------------------------------------------- temporaries and signals

def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_stale_temporaries_are_cleaned_and_live_ones_kept(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    dead = _dead_pid()
    (out / f"{TEMP_PREFIX}{dead}-abcd").mkdir()
    (out / f"{TEMP_PREFIX}{dead}-abcd" / "conv.onnx.data").write_bytes(b"x" * 1000)
    (out / f"{TEMP_PREFIX}{dead}-ef01.tmp").write_text("{")
    live = f"{TEMP_PREFIX}{os.getppid()}-2345"  # a live process, recently written: in use
    (out / live).mkdir()
    os.utime(out / live, (2**31 - 1,) * 2)  # touched "now" however slow this machine is (no clock margin)
    old_live = f"{TEMP_PREFIX}{os.getppid()}-6789.tmp"  # a live process, idle since 1970: stale
    (out / old_live).write_text("")
    os.utime(out / old_live, (0, 0))
    (out / ".not-ours-1-2").mkdir()
    src = nested_model(tmp_path / "in")
    assert cli_main(["convert", str(src), "-o", str(out / "conv.onnx")]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted([".not-ours-1-2", live, "conv.onnx", "conv.onnx.data"])
    assert clean_stale_temps(out) == []


def test_a_killed_process_not_yet_reaped_counts_as_dead(tmp_path):
    """A SIGKILLed writer whose parent has not reaped it yet (a zombie) writes nothing any more:
    its temporary is stale at once, not after STALE_SECONDS."""
    proc = subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"])
    proc.kill()
    wait_gone(proc.pid)  # ended; a zombie until we reap it below
    name = f"{TEMP_PREFIX}{proc.pid}-abcd"
    (tmp_path / name).mkdir()
    assert clean_stale_temps(tmp_path) == [name]
    proc.wait()


def _convert_in_subprocess(src: Path, out: Path, *extra, env=None) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO), **(env or {}))
    return subprocess.Popen([sys.executable, "-m", "onnx_slice_tools", "convert", str(src), "-o", str(out),
                             "--no-verify", *extra], env=env, stderr=subprocess.PIPE)


@pytest.fixture(scope="module")
def ext_model(tmp_path_factory):
    return big_external_model(tmp_path_factory.mktemp("ext"), 100_000)  # saved as model + .data


@pytest.mark.parametrize("point", ["save-written", "save-data-landed"])
def test_sigkill_during_save_leaves_only_what_the_next_run_cleans(ext_model, tmp_path, point):
    """SIGKILL at a known point of the save (the child stops there: pausing.py): nothing can be
    cleaned up then; the next save into the folder removes the dead process's temporary, and
    a landed ``.data`` without its model is replaced."""
    out = tmp_path / "out"
    out.mkdir()
    pause = Pause(tmp_path, point)
    proc = _convert_in_subprocess(ext_model, out / "conv.onnx", env=pause.env)
    assert pause.wait(proc) == proc.pid
    proc.kill()
    assert proc.wait() == -signal.SIGKILL
    pause.release()
    assert _temps(out) and not (out / "conv.onnx").exists()  # SIGKILL: no cleanup possible
    assert (out / "conv.onnx.data").exists() == (point == "save-data-landed")
    proc = _convert_in_subprocess(ext_model, out / "conv.onnx")
    assert proc.wait() == 0, proc.stderr.read()
    assert sorted(p.name for p in out.iterdir()) == ["conv.onnx", "conv.onnx.data"]
    assert (out / "conv.onnx.data").stat().st_size == 400_000


@pytest.mark.parametrize("point", ["save-written", "save-data-landed"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_or_sigint_during_save_leaves_nothing(ext_model, tmp_path, sig, point):
    """The signal lands while the save is stopped at ``point`` (temporaries written; or the new
    .data renamed into place, the model not): exit 128 + signal, nothing left, no traceback."""
    out = tmp_path / "out"
    out.mkdir()
    pause = Pause(tmp_path, point)
    proc = _convert_in_subprocess(ext_model, out / "conv.onnx", env=pause.env)
    assert pause.wait(proc) == proc.pid
    assert _temps(out)
    proc.send_signal(sig)
    assert proc.wait() == 128 + sig
    pause.release()
    assert sorted(p.name for p in out.iterdir()) == []  # no output, no .data, no temporaries
    assert proc.stderr.read() == b""


def test_the_save_carries_on_after_a_pause(ext_model, tmp_path):
    """The hook itself changes nothing: released, the save completes (so the tests above
    stop a save that would have succeeded)."""
    out = tmp_path / "out"
    pause = Pause(tmp_path, "save-data-landed")
    proc = _convert_in_subprocess(ext_model, out / "conv.onnx", env=pause.env)
    assert pause.wait(proc) == proc.pid
    pause.release()
    assert proc.wait() == 0, proc.stderr.read()
    assert sorted(p.name for p in out.iterdir()) == ["conv.onnx", "conv.onnx.data"]


def test_a_model_proto_reads_external_data_from_the_working_directory_checked(tmp_path, monkeypatch):
    src = nested_model(tmp_path / "in")
    proto = onnx.load(src, load_external_data=False)
    monkeypatch.chdir(tmp_path)  # w.bin is not here
    with pytest.raises(ModelError, match="'w.bin' not found"):
        convert(proto)
    monkeypatch.chdir(tmp_path / "in")
    result = convert(proto)
    assert result.ok
    monkeypatch.chdir(tmp_path)  # fixed at load time: a later chdir does not matter
    result.save(tmp_path / "out" / "conv.onnx")
    x = np.arange(4, dtype=np.float32)
    assert np.array_equal(_run(tmp_path / "out" / "conv.onnx", x, True), nested_expected(x, True))
    with pytest.raises(ModelError, match="is the input file"):  # its data files are protected too
        result.save(tmp_path / "in" / "w.bin")


def test_a_full_disk_is_one_line_naming_the_output_and_leaves_nothing(tmp_path):
    """Writes that fail (here RLIMIT_FSIZE: EFBIG, as ENOSPC would) are exit 2 naming the output
    (it named the input), and nothing half-written stays."""
    import resource
    src = big_external_model(tmp_path / "in", 100_000)  # 400 KB of weights

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.run([sys.executable, "-m", "onnx_slice_tools", "convert", str(src), "-o", str(out / "o.onnx"),
                           "--no-verify"], env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True,
                          text=True, preexec_fn=limit, timeout=HANG_GUARD_S)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == f"{out / 'o.onnx'}: cannot write: File too large"
    assert list(out.iterdir()) == []


def test_sigterm_outside_a_write_exits_143_and_writes_nothing(tmp_path, capfd, monkeypatch):
    """SIGTERM anywhere in a command (here: while converting) unwinds like SIGINT: exit 128+15,
    nothing written, no traceback (it killed the process outright outside a write)."""
    import onnx_slice_tools.api as api

    def killed(*a, **k):
        os.kill(os.getpid(), signal.SIGTERM)  # to this process: handled before the next line runs
        time.sleep(600)  # hang guard only: the handler has raised already
        raise AssertionError("SIGTERM was not delivered")
    monkeypatch.setattr(api, "convert", killed)
    src = nested_model(tmp_path / "in")
    assert cli_main(["convert", str(src), "-o", str(tmp_path / "o.onnx"), "--report", str(tmp_path / "r.json")]) == 143
    assert capfd.readouterr().err == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]
