#!/usr/bin/env python
"""Benchmarks of onnx-slice-tools (results: docs/benchmarks.md).

    python scripts/bench.py                      # everything, full sizes
    python scripts/bench.py --sizes 100 --quick  # CI smoke size

1. throughput: convert + verify synthetic models with N StridedSlice nodes of mixed
   real-world patterns (static and symbolic batch dim), next to onnx.load + onnx.save;
2. against tf2onnx: seconds per StridedSlice, node counts and onnxruntime latency on
   the models/ samples;
3. memory: peak RSS converting a model with >= 1 GiB of external weights (a child process);
4. targets (``--targets``): node count and onnxruntime latency per --target on the models/ samples.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
TF_DOMAIN = "ai.onnx.converters.tensorflow"

#: (name, begin, end, strides, masks) on an input [N, 16, 16, 8]; TF bit-field masks.
PATTERNS = [
    ("focus x[..., ::2, ::2]", [0, 0, 0], [0, 0, 0], [1, 2, 2], dict(begin_mask=6, end_mask=6, ellipsis_mask=1)),
    ("focus x[..., 1::2, ::2]", [0, 1, 0], [0, 0, 0], [1, 2, 2], dict(begin_mask=4, end_mask=6, ellipsis_mask=1)),
    ("cls x[:, 0]", [0, 0], [0, 1], [1, 1], dict(begin_mask=1, end_mask=1, shrink_axis_mask=2)),
    ("last x[:, -1, :]", [0, -1, 0], [0, 0, 0], [1, 1, 1], dict(begin_mask=5, end_mask=5, shrink_axis_mask=2)),
    ("flip x[..., ::-1]", [0, 0], [0, 0], [1, -1], dict(begin_mask=2, end_mask=2, ellipsis_mask=1)),
    ("newaxis x[:, None, 2:-2]", [0, 0, 2], [0, 0, -2], [1, 1, 1], dict(begin_mask=1, end_mask=1, new_axis_mask=2)),
    ("crop x[:, 1:15, 1:15]", [0, 1, 1], [0, 15, 15], [1, 1, 1], dict(begin_mask=1, end_mask=1)),
    ("tail x[..., -3:]", [0, -3], [0, 0], [1, 1], dict(end_mask=2, ellipsis_mask=1)),
]


def synthetic_model(n: int, symbolic: bool, opset: int = 17, fan_out: int = len(PATTERNS)):
    """A TF-flavour model (tf2onnx custom-op domain) with ``n`` StridedSlice nodes, each a graph output.

    The slices come in groups of ``fan_out`` (one of each pattern) reading one tensor; each
    group's tensor is the previous one through a ``Relu``, as in a real network where a tensor
    feeds a few slices.  (onnxruntime's session set-up grows quadratically with the number of
    consumers of one tensor: see docs/benchmarks.md.)"""
    import onnx
    from onnx import TensorProto, helper
    batch = "N" if symbolic else 4
    nodes, inits, outputs = [], [], []
    for k, (_, b, e, s, masks) in enumerate(PATTERNS):
        for nm, vals in (("b", b), ("e", e), ("s", s)):
            inits.append(helper.make_tensor(f"{nm}{k}", TensorProto.INT32, [len(vals)], vals))
    h = "x"
    for i in range(n):
        if i and i % fan_out == 0:
            nodes.append(helper.make_node("Relu", [h], [f"h{i}"], name=f"relu{i}"))
            h = f"h{i}"
        k = i % len(PATTERNS)
        _, b, e, s, masks = PATTERNS[k]
        nodes.append(helper.make_node("StridedSlice", [h, f"b{k}", f"e{k}", f"s{k}"], [f"y{i}"],
                                      name=f"ss{i}", domain=TF_DOMAIN, **masks))
        outputs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "synthetic", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                 [batch, 16, 16, 8])],
                              outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid(TF_DOMAIN, 1)])
    model.ir_version = 8
    return model


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def bench_throughput(sizes, repeat: int, tmp: Path) -> list[dict]:
    import onnx
    from onnx_slice_tools import convert
    rows = []
    for n in sizes:
        for symbolic in (False, True):
            path = tmp / f"synthetic_{n}_{'sym' if symbolic else 'static'}.onnx"
            onnx.save(synthetic_model(n, symbolic), path)
            out = tmp / "out.onnx"
            base = _best(lambda: onnx.save(onnx.load(path), out), repeat)
            timings = {}

            def run():
                result = convert(path)
                assert result.ok, result.report.to_json()["model_checks"]
                onnx.save(result.model, out)
                timings.update(result.report.timings)
            t = _best(run, repeat)
            rows.append({"nodes": n, "shapes": "symbolic" if symbolic else "static", "load_save_s": base,
                         "convert_verify_save_s": t, "ratio": t / base,
                         "stages_s": {k: round(v, 3) for k, v in timings.items()}})
            print(f"{n:>6} {'symbolic' if symbolic else 'static':>8}: load+save {base:.3f} s, convert+verify+save "
                  f"{t:.3f} s ({t / base:.1f}x)  {rows[-1]['stages_s']}", flush=True)
    return rows


def bench_tf2onnx(n_slices: int, runs: int) -> dict:
    """Seconds per StridedSlice (tf2onnx's own lowering vs ours on its custom-op export), and
    node counts and onnxruntime latency on the TF samples of models/ (same TF functions)."""
    import tensorflow as tf

    from onnx_slice_tools import convert
    from onnx_slice_tools.tfexport import export
    sys.path.insert(0, str(ROOT / "scripts"))
    import make_models  # noqa: E402
    exprs = ["x[..., ::2, ::2]", "x[:, 0]", "x[:, -1, :]", "x[..., ::-1]", "x[:, None, 2:-2]", "x[:, 1:15, 1:15]"]

    @tf.function
    def many(x):
        return [eval(exprs[k % len(exprs)], {"x": x, "None": None}) for k in range(n_slices)]
    sig = [tf.TensorSpec([None, 16, 16, 8], tf.float32, name="x")]
    export(many, sig)  # warm up tracing
    t = time.perf_counter()
    export(many, sig, keep_strided_slice=False)
    native_s = time.perf_counter() - t
    custom = export(many, sig)
    t = time.perf_counter()
    result = convert(custom)
    ours_s = time.perf_counter() - t
    assert result.ok
    per_slice = {"slices": n_slices, "tf2onnx_s_per_slice": native_s / n_slices,
                 "ours_s_per_slice": ours_s / n_slices}
    print(f"tf2onnx lowering {native_s / n_slices * 1e3:.2f} ms per StridedSlice (whole TF conversion); "
          f"ours {ours_s / n_slices * 1e3:.2f} ms (convert + verify)", flush=True)

    samples = []
    specs = _tf_sample_functions(make_models)
    for name, (fn, sig) in specs.items():
        ours_model = convert(export(fn, sig)).model
        native_model = export(fn, sig, keep_strided_slice=False)
        rng = np.random.default_rng(0)
        feeds = {}
        for spec in sig:
            shape = [4 if d is None else d for d in spec.shape]
            feeds[spec.name] = (rng.integers(0, 3, shape).astype(spec.dtype.as_numpy_dtype)
                                if spec.dtype.is_integer else rng.standard_normal(shape).astype(spec.dtype.as_numpy_dtype))
        row = {"model": name}
        for label, m in (("ours", ours_model), ("tf2onnx", native_model)):
            row[f"{label}_nodes"] = sum(n.op_type not in ("Constant", "Identity") for n in make_models._all_nodes(m))
            row[f"{label}_latency_us"] = _latency_us(m, feeds, runs)
        samples.append(row)
        print(f"{name:>22}: nodes ours {row['ours_nodes']:>3} / tf2onnx {row['tf2onnx_nodes']:>3}; "
              f"latency ours {row['ours_latency_us']:.1f} us / tf2onnx {row['tf2onnx_latency_us']:.1f} us", flush=True)
    return {"per_slice": per_slice, "samples": samples}


def _latency_us(model, feeds: dict, runs: int) -> float:
    """Median onnxruntime latency (one thread, default optimizations) of ``model`` on ``feeds``."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), sess_options=so, providers=["CPUExecutionProvider"])
    for _ in range(20):
        sess.run(None, feeds)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - t)
    return float(np.median(times) * 1e6)


def bench_targets(runs: int) -> list[dict]:
    """Per sample model and --target: nodes added (all graphs) and onnxruntime latency."""
    from onnx_slice_tools import convert
    from onnx_slice_tools.evaluate import random_feeds
    from onnx_slice_tools.targets import TARGETS
    sys.path.insert(0, str(ROOT / "scripts"))
    import make_models  # noqa: E402
    rows = []
    for path in sorted((ROOT / "models").glob("*.onnx")):
        row = {"model": path.name}
        for name in TARGETS:
            result = convert(path, target=name, verify=False)
            m = result.model
            feeds = random_feeds(m, np.random.default_rng(0))
            row[f"{name}_nodes"] = sum(n.op_type not in ("Constant", "Identity") for n in make_models._all_nodes(m))
            row[f"{name}_latency_us"] = _latency_us(m, feeds, runs)
        rows.append(row)
        print(f"{path.name:>32}: " + "; ".join(f"{t} {row[f'{t}_nodes']} nodes {row[f'{t}_latency_us']:.1f} us"
                                               for t in TARGETS), flush=True)
    return rows


def _tf_sample_functions(make_models):
    """The TF functions behind models/tf_*.onnx (make_models.tf_models without exporting)."""
    captured = {}
    import onnx_slice_tools.tfexport as tfexport
    real = tfexport.export
    tfexport.export = lambda fn, sig, **kw: captured.setdefault(len(captured), (fn, sig))
    try:
        names = list(make_models.tf_models().keys())
    finally:
        tfexport.export = real
    return {name: captured[k] for k, name in enumerate(names)}


def bench_memory(gib: float, tmp: Path) -> dict:
    """Peak RSS of a child process converting a model with ``gib`` GiB of external weights."""
    folder = tmp / "large"
    _make_large_model(folder, int(gib * 2 ** 30))
    out = tmp / "large_out" / "model.onnx"
    # VmHWM (peak RSS of this process image): ru_maxrss would carry the parent's peak over exec
    code = ("import sys, time; t = time.perf_counter(); from onnx_slice_tools import convert; "
            f"r = convert({str(folder / 'model.onnx')!r}); assert r.ok, r.report.to_json(); r.save({str(out)!r}); "
            "hwm = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0]; "
            "print(time.perf_counter() - t, hwm)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    seconds, rss_kib = res.stdout.split()[-2:]
    weights = sum(f.stat().st_size for f in folder.iterdir() if f.suffix == ".bin")
    row = {"weights_bytes": weights, "seconds": float(seconds), "peak_rss_mb": int(rss_kib) / 1024}
    print(f"memory: {weights / 2 ** 30:.2f} GiB external weights -> peak RSS {row['peak_rss_mb']:.0f} MB, "
          f"{row['seconds']:.1f} s (convert + verify + save)", flush=True)
    return row


def _make_large_model(folder: Path, total_bytes: int, n_tensors: int = 4) -> None:
    """A model whose weights (external, ``weights.bin``) feed Gathers whose outputs are sliced."""
    import onnx
    from onnx import TensorProto, helper
    folder.mkdir(parents=True, exist_ok=True)
    per = total_bytes // n_tensors // 4
    inits, nodes, outs = [], [], []
    chunk = np.arange(1 << 20, dtype=np.float32)
    with open(folder / "weights.bin", "wb") as f:
        for k in range(n_tensors):
            t = onnx.TensorProto(name=f"W{k}", data_type=TensorProto.FLOAT, dims=[per],
                                 data_location=TensorProto.EXTERNAL)
            for key, val in (("location", "weights.bin"), ("offset", str(k * per * 4)), ("length", str(per * 4))):
                e = t.external_data.add()
                e.key, e.value = key, val
            left = per
            while left:
                n = min(left, chunk.size)
                f.write(chunk[:n].tobytes())
                left -= n
            inits.append(t)
    inits += [helper.make_tensor(nm, TensorProto.INT64, [2], v) for nm, v in (("b", [0, 1]), ("e", [0, 2]), ("s", [1, 1]))]
    for k in range(n_tensors):
        nodes.append(helper.make_node("Gather", [f"W{k}", "idx"], [f"g{k}"]))
        nodes.append(helper.make_node("StridedSlice", [f"g{k}", "b", "e", "s"], [f"y{k}"], domain=TF_DOMAIN,
                                      name=f"ss{k}", begin_mask=1, end_mask=1))
        outs.append(helper.make_tensor_value_info(f"y{k}", TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "large", [helper.make_tensor_value_info("idx", TensorProto.INT64, ["N", 4])],
                              outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TF_DOMAIN, 1)])
    model.ir_version = 8
    (folder / "model.onnx").write_bytes(model.SerializeToString())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,1000,10000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--slices", type=int, default=200, help="StridedSlice nodes for the tf2onnx comparison")
    ap.add_argument("--runs", type=int, default=300, help="onnxruntime runs per latency measurement")
    ap.add_argument("--gib", type=float, default=1.1, help="GiB of external weights for the memory benchmark")
    ap.add_argument("--quick", action="store_true", help="CI smoke size: small everything")
    ap.add_argument("--only", choices=["throughput", "tf2onnx", "memory", "targets"], action="append")
    ap.add_argument("--targets", action="store_true", help="only the per-target section (same as --only targets)")
    args = ap.parse_args(argv)
    if args.targets:
        args.only = (args.only or []) + ["targets"]
    if args.quick:
        args.sizes, args.repeat, args.slices, args.runs, args.gib = "100", 1, 12, 20, 0.01
    sizes = [int(s) for s in args.sizes.split(",")]
    results = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                           "platform": platform.platform(), "command": " ".join(sys.argv)}}
    only = set(args.only or ["throughput", "tf2onnx", "memory", "targets"])
    with tempfile.TemporaryDirectory() as tmp:
        if "throughput" in only:
            results["throughput"] = bench_throughput(sizes, args.repeat, Path(tmp))
        if "tf2onnx" in only:
            try:
                results["tf2onnx"] = bench_tf2onnx(args.slices, args.runs)
            except ImportError as exc:
                print(f"tf2onnx comparison skipped: {exc}")
        if "memory" in only:
            results["memory"] = bench_memory(args.gib, Path(tmp))
        if "targets" in only:
            results["targets"] = bench_targets(args.runs)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
