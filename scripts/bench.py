#!/usr/bin/env python
"""Benchmarks of onnx-slice-tools (results: docs/benchmarks.md).

    python scripts/bench.py                      # everything, full sizes
    python scripts/bench.py --sizes 100 --quick  # CI smoke size

1. throughput: convert + verify synthetic models with N StridedSlice nodes of mixed
   real-world patterns (static and symbolic batch dim), next to onnx.load + onnx.save;
2. against tf2onnx: seconds per StridedSlice, node counts and onnxruntime latency on
   the models/ samples;
3. memory: peak RSS converting a model with >= 1 GiB of external weights (a child process);
4. batch: N copies of a sample model, with and without one worker crashing in the middle
   (the batch test hook ``ONNX_SLICE_TOOLS_TEST_HOOK=abort:NAME``).
5. checks: time and peak RSS of the per-rewrite checks and the whole-model comparison on
   inputs of large or many-dim shapes (each in a child process, peak RSS reset before the
   measured step).
6. verification memory (``--memory``): a 1 GiB static activation input [64, 64, 256, 256] float32
   with 20 StridedSlice on it plus 1 GiB of external weights, converted with verification on
   (child process, address space capped so a regression fails instead of swapping).
7. targets (``--targets``): node count and onnxruntime latency per --target on the models/ samples
   and each benchmark pattern (static and symbolic batch).
8. speed (``--only speed``): the four targets of issue 13 in one command, as whole-process CPU
   seconds (median of ``--repeat`` runs of fresh processes, the commands of one size taken in
   turn so that a drift of the machine's speed hits them alike; a ratio is the median of the
   turns' own ratios; wall times too): ``convert
   --no-verify`` against the I/O floor (a process doing ``onnx.save(onnx.load(...))``),
   ``convert`` against the floor plus one onnxruntime session of the converted model, and
   ``convert``'s CPU per StridedSlice against tf2onnx's (``--slices``), at ``--speed-sizes``
   StridedSlice nodes with fan-out 8 and fan-out N (all slices read one tensor); start-up of
   ``--help`` and ``explain``; ``batch -j 1`` vs ``-j 2`` over ``--batch-models`` models.
9. framework-input memory (``--only source-memory``, not in the default set): peak RSS of a
   child process running ``api.convert`` of the framework input (export, convert with verification, framework check)
   on a SavedModel, a Keras model and a .tflite holding one ``--source-rows`` x 1000 float32
   weight (50,000 rows: 191 MB), next to TensorFlow's import alone and, for the SavedModel,
   tf2onnx's freezing export (``tfexport.export(large_variable_bytes=None)``, the path before).
10. inspect (``--only inspect``): whole-process wall and CPU seconds of ``inspect``, ``inspect
   --json`` and ``convert`` (verification on) of the same ``--speed-sizes`` models (fan-out 8),
   and start-up (``--help``, ``explain``, Python alone); median of ``--repeat`` fresh processes.
11. chains (``--only chains``, not in the default set): slices in series (``chain_model``: ``Neg``
   nodes with a TF ``x[:, ::-1]`` every ``--chain-every`` nodes, each reading the previous slice's
   output) beside fan-out-8 rows, at ``--chain-sizes`` nodes: ``convert --no-verify`` against
   load + save and ``convert`` against load + save + one default onnxruntime session of the
   output + one run of it (whole-process CPU seconds, medians of ``--repeat`` turns).
12. distinct specs (``--only distinct``, not in the default set): ``--distinct-sizes`` StridedSlices
   with their own begin/end over x: [B, 64, 64, 8], each a graph output; the same floors.
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


def chain_model(n: int, slices: int, shape=(4, 16, 16, 8), opset: int = 17):
    """A TF-flavour chain of ``n`` nodes: ``Neg`` nodes with a StridedSlice ``h[:, ::-1]`` every
    ``n // slices`` nodes, each slice reading the previous node's output, so the slices are in
    series (slice k's input depends on slice k-1); the last node's output is the one graph output.
    The shape of every value after slice k is known only once slice k is planned: the model that
    the depth of a chain of slices costs on."""
    from onnx import TensorProto, helper
    every = max(1, n // max(1, slices))
    inits = [helper.make_tensor(nm, TensorProto.INT32, [2], vals)
             for nm, vals in (("cb", [0, 0]), ("ce", [0, 0]), ("cs", [1, -1]))]
    nodes, h, made = [], "x", 0
    for i in range(n):
        out = f"h{i}"
        if (i + 1) % every == 0 and made < slices:
            nodes.append(helper.make_node("StridedSlice", [h, "cb", "ce", "cs"], [out], name=f"ss{i}",
                                          domain=TF_DOMAIN, begin_mask=3, end_mask=3))
            made += 1
        else:
            nodes.append(helper.make_node("Neg", [h], [out], name=f"neg{i}"))
        h = out
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info(h, TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(TF_DOMAIN, 1)])
    model.ir_version = 8
    return model


def distinct_spec_model(n: int, opset: int = 17, seed: int = 0):
    """``n`` TF StridedSlice nodes over x: [B, 64, 64, 8] (B symbolic), each with its own
    begin/end (constants of its own), each a graph output: a model closer to users' than the
    shared-pattern ones (every slice a distinct spec, so no plan or check is shared)."""
    from onnx import TensorProto, helper
    rng = np.random.default_rng(seed)
    nodes, inits, outputs = [], [], []
    seen: set = set()
    while len(nodes) < n:
        b1, b2 = (int(v) for v in rng.integers(0, 32, 2))
        e1, e2 = b1 + int(rng.integers(1, 33)), b2 + int(rng.integers(1, 33))
        s1, s2 = (int(v) for v in rng.integers(1, 3, 2))
        key = (b1, b2, e1, e2, s1, s2)
        if key in seen:
            continue
        seen.add(key)
        k = len(nodes)
        for nm, vals in (("b", [0, b1, b2]), ("e", [0, e1, e2]), ("s", [1, s1, s2])):
            inits.append(helper.make_tensor(f"{nm}{k}", TensorProto.INT32, [3], vals))
        nodes.append(helper.make_node("StridedSlice", ["x", f"b{k}", f"e{k}", f"s{k}"], [f"y{k}"], name=f"ss{k}",
                                      domain=TF_DOMAIN, begin_mask=1, end_mask=1))
        outputs.append(helper.make_tensor_value_info(f"y{k}", TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "distinct", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                ["B", 64, 64, 8])],
                              outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(TF_DOMAIN, 1)])
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
                assert result.ok, result.report.to_dict()["model_checks"]
                onnx.save(result.model, out)
                timings.update(result.report.timings)
            t = _best(run, repeat)
            rows.append({"nodes": n, "shapes": "symbolic" if symbolic else "static", "load_save_s": base,
                         "convert_verify_save_s": t, "ratio": t / base,
                         "stages_s": {k: round(v, 3) for k, v in timings.items()}})
            print(f"{n:>6} {'symbolic' if symbolic else 'static':>8}: load+save {base:.3f} s, convert+verify+save "
                  f"{t:.3f} s ({t / base:.1f}x)  {rows[-1]['stages_s']}", flush=True)
    return rows


def tf2onnx_per_slice(n_slices: int) -> dict:
    """Seconds per StridedSlice of tf2onnx's own lowering (its whole conversion of a TF function
    of ``n_slices`` slices, in process, after a warm-up trace: wall and CPU) and of ours
    (``convert`` with verification of tf2onnx's custom-op export of the same function)."""
    import tensorflow as tf

    from onnx_slice_tools import convert
    from onnx_slice_tools.frontends.tfexport import export
    exprs = ["x[..., ::2, ::2]", "x[:, 0]", "x[:, -1, :]", "x[..., ::-1]", "x[:, None, 2:-2]", "x[:, 1:15, 1:15]"]

    @tf.function
    def many(x):
        return [eval(exprs[k % len(exprs)], {"x": x, "None": None}) for k in range(n_slices)]
    sig = [tf.TensorSpec([None, 16, 16, 8], tf.float32, name="x")]
    export(many, sig)  # warm up tracing
    t, cpu = time.perf_counter(), time.process_time()
    export(many, sig, keep_strided_slice=False)
    native_s, native_cpu = time.perf_counter() - t, time.process_time() - cpu
    custom = export(many, sig)
    t = time.perf_counter()
    result = convert(custom)
    ours_s = time.perf_counter() - t
    assert result.ok
    return {"slices": n_slices, "tf2onnx_s_per_slice": native_s / n_slices,
            "tf2onnx_cpu_s_per_slice": native_cpu / n_slices, "ours_s_per_slice": ours_s / n_slices}


def bench_tf2onnx(n_slices: int, runs: int) -> dict:
    """Seconds per StridedSlice (tf2onnx's own lowering vs ours on its custom-op export), and
    node counts and onnxruntime latency on the TF samples of models/ (same TF functions)."""
    from onnx_slice_tools import convert
    from onnx_slice_tools.frontends.tfexport import export
    sys.path.insert(0, str(ROOT / "scripts"))
    import make_models
    per_slice = tf2onnx_per_slice(n_slices)
    print(f"tf2onnx lowering {per_slice['tf2onnx_s_per_slice'] * 1e3:.2f} ms per StridedSlice (whole TF "
          f"conversion); ours {per_slice['ours_s_per_slice'] * 1e3:.2f} ms (convert + verify)", flush=True)

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


def _pattern_models():
    """(label, model) per benchmark pattern (PATTERNS) on [4, 16, 16, 8] and [N, 16, 16, 8]: the
    synthetic model cut down to that pattern's one node."""
    for symbolic in (False, True):
        for k, (label, *_rest) in enumerate(PATTERNS):
            model = synthetic_model(len(PATTERNS), symbolic)
            keep = model.graph.node[k]
            del model.graph.node[:]
            model.graph.node.append(keep)
            used = [t for t in model.graph.initializer if t.name in keep.input]
            del model.graph.initializer[:]
            model.graph.initializer.extend(used)
            out = [o for o in model.graph.output if o.name == keep.output[0]]
            del model.graph.output[:]
            model.graph.output.extend(out)
            yield f"{label} ({'N' if symbolic else '4'}x16x16x8)", model


def bench_targets(runs: int) -> list[dict]:
    """Per sample model and benchmark pattern, per --target: nodes added (all graphs) and
    onnxruntime latency."""
    from onnx_slice_tools import convert
    from onnx_slice_tools.verification.feeds import random_feeds
    from onnx_slice_tools.verification.sizing import choose_sizes
    from onnx_slice_tools.rewrite.shapes import skeleton
    from onnx_slice_tools.lowering.targets import TARGETS
    sys.path.insert(0, str(ROOT / "scripts"))
    import make_models
    rows = []
    samples = [(p.name, p) for p in sorted((ROOT / "models").glob("*.onnx"))]
    for label, path in samples + list(_pattern_models()):
        row = {"model": label}
        for name in TARGETS:
            result = convert(path, target=name, verify=False)
            m = result.model
            sizes, shapes = choose_sizes(skeleton(m))  # small sizes the model accepts (as the checks)
            feeds = random_feeds(m, sizes, shapes, np.random.default_rng(0))
            row[f"{name}_nodes"] = sum(n.op_type not in ("Constant", "Identity") for n in make_models._all_nodes(m))
            row[f"{name}_latency_us"] = _latency_us(m, feeds, runs)
        rows.append(row)
        print(f"{label:>44}: " + "; ".join(f"{t} {row[f'{t}_nodes']} nodes {row[f'{t}_latency_us']:.1f} us"
                                               for t in TARGETS), flush=True)
    return rows


def _tf_sample_functions(make_models):
    """The TF functions behind models/tf_*.onnx (make_models.tf_models without exporting)."""
    captured = {}
    import onnx_slice_tools.frontends.tfexport as tfexport
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


def bench_verify_memory(gib: float, tmp: Path, activation=(64, 64, 256, 256), n_slices: int = 20) -> dict:
    """Peak RSS and time of ``convert`` (verification on) of a model with a static activation
    input of ``activation`` float32, ``n_slices`` slices of it, and ``gib`` GiB of external weights."""
    folder = tmp / "activation"
    _make_activation_model(folder, int(gib * 2 ** 30), activation, n_slices)
    limit = 6 * 2 ** 30
    code = ("import resource, sys, time; "
            f"resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit})); t = time.perf_counter(); "
            "from onnx_slice_tools import convert; "
            f"r = convert({str(folder / 'model.onnx')!r}); "
            "hwm = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0]; "
            "print(time.perf_counter() - t, hwm, '|', r.report.verdict)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if res.returncode != 0:
        row = {"error": (res.stderr.strip().splitlines() or ["?"])[-1][:300]}
        print(f"verify memory: FAILED: {row['error']}", flush=True)
        return row
    numbers, verdict = res.stdout.strip().splitlines()[-1].split(" | ", 1)
    seconds, rss_kib = numbers.split()[-2:]
    row = {"activation_bytes": int(np.prod(activation)) * 4, "weights_bytes": int(gib * 2 ** 30),
           "slices": n_slices, "seconds": float(seconds), "peak_rss_mb": int(rss_kib) / 1024, "verdict": verdict}
    print(f"verify memory: input {list(activation)} float32 + {gib:.2f} GiB external weights, {n_slices} slices "
          f"-> peak RSS {row['peak_rss_mb']:.0f} MB, {row['seconds']:.1f} s; {verdict}", flush=True)
    return row


def _make_activation_model(folder: Path, weight_bytes: int, activation, n_slices: int) -> None:
    from onnx import TensorProto, helper
    inits, nodes, outs = _external_weights(folder, weight_bytes, 4)
    for k, (_, b, e, st, masks) in enumerate(PATTERNS * (n_slices // len(PATTERNS) + 1)):
        if k == n_slices:
            break
        for nm, vals in (("b", b), ("e", e), ("s", st)):
            inits.append(helper.make_tensor(f"{nm}{k}", TensorProto.INT64, [len(vals)], vals))
        nodes.append(helper.make_node("StridedSlice", ["x", f"b{k}", f"e{k}", f"s{k}"], [f"y{k}"], domain=TF_DOMAIN,
                                      name=f"ss{k}", **masks))
        outs.append(helper.make_tensor_value_info(f"y{k}", TensorProto.FLOAT, None))
    inits.append(helper.make_tensor("idx", TensorProto.INT64, [1], [0]))
    nodes += [helper.make_node("Gather", ["W0", "idx"], ["g"])]
    outs.append(helper.make_tensor_value_info("g", TensorProto.FLOAT, [1]))
    graph = helper.make_graph(nodes, "activation", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                  list(activation))], outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TF_DOMAIN, 1)])
    model.ir_version = 8
    (folder / "model.onnx").write_bytes(model.SerializeToString())


def _external_weights(folder: Path, total_bytes: int, n_tensors: int):
    """``n_tensors`` float32 initializers in ``folder/weights.bin``: (initializers, [], [])."""
    import onnx
    from onnx import TensorProto
    folder.mkdir(parents=True, exist_ok=True)
    per = total_bytes // n_tensors // 4
    inits = []
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
    return inits, [], []


def _make_large_model(folder: Path, total_bytes: int, n_tensors: int = 4) -> None:
    """A model whose weights (external, ``weights.bin``) feed Gathers whose outputs are sliced."""
    from onnx import TensorProto, helper
    inits, nodes, outs = _external_weights(folder, total_bytes, n_tensors)
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


def bench_batch_crash(n: int, jobs: int, tmp: Path) -> dict:
    """Seconds of ``batch`` over ``n`` models, then again with the middle one's worker aborting."""
    import shutil
    from onnx_slice_tools.cli.batch import TEST_HOOK_ENV, batch_convert
    src = tmp / "batch_in"
    src.mkdir()
    for i in range(n):
        shutil.copy(ROOT / "models" / "tf_channel_flip.onnx", src / f"m{i:04d}.onnx")
    row = {"models": n, "jobs": jobs}
    for label, hook in (("seconds", None), ("seconds_one_crash", f"abort:m{n // 2:04d}.onnx")):
        if hook:
            os.environ[TEST_HOOK_ENV] = hook
        try:
            t = time.perf_counter()
            report = batch_convert(src, tmp / f"batch_out_{label}", jobs=jobs)
            row[label] = time.perf_counter() - t
        finally:
            os.environ.pop(TEST_HOOK_ENV, None)
        row[label.replace("seconds", "counts")] = report.counts()
    print(f"batch: {n} models, {jobs} jobs: {row['seconds']:.1f} s; with one crashing worker "
          f"{row['seconds_one_crash']:.1f} s ({row['counts_one_crash']})", flush=True)
    return row


#: serve(x): a [rows, 1000] float32 weight read twice and a StridedSlice on the result.
_SOURCE_MODULE = """
import numpy as np, tensorflow as tf
class Source(tf.Module):
    def __init__(self, rows):
        self.w = tf.Variable(np.random.default_rng(0).standard_normal((rows, 1000)).astype(np.float32))
    @tf.function(input_signature=[tf.TensorSpec([None, 1000], tf.float32, name="x")])
    def serve(self, x):
        y = tf.matmul(x, self.w[:1000]) + self.w[-1, ::-1]
        return {"y": y[:, 1:-1:2]}
    @tf.function
    def serve_all(self, x):  # the whole weight in one op: the .tflite keeps it as one buffer
        return tf.matmul(x, self.w)[:, 1:-1:2]
"""

_HWM = "int([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0]) / 1024"


def _make_sources(folder: Path, rows: int, kinds) -> dict:
    """A SavedModel, a .keras and a .tflite (those of ``kinds``) with one [rows, 1000] float32
    weight (child process)."""
    code = _SOURCE_MODULE + f"""
import keras, os, sys
rows, folder, kinds = {rows}, {str(folder)!r}, {sorted(kinds)!r}
m = Source(rows)
if "saved_model" in kinds:
    tf.saved_model.save(m, folder + "/saved_model", signatures={{"serving_default": m.serve}})
if "tflite" in kinds:
    conv = tf.lite.TFLiteConverter.from_concrete_functions(
        [m.serve_all.get_concrete_function(tf.TensorSpec([1, rows], tf.float32, name="x"))], m)
    open(folder + "/model.tflite", "wb").write(conv.convert())
    del conv
del m
if "keras" in kinds:
    inp = keras.Input((1000,), name="x")
    dense = keras.layers.Dense(rows, use_bias=False)
    out = keras.layers.Cropping1D((1, 2))(keras.layers.Reshape((rows, 1))(dense(inp)))
    keras.Model(inp, out).save(folder + "/model.keras")
"""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    subprocess.run([sys.executable, "-c", code], check=True, env=env, capture_output=True)
    paths = {"saved_model": folder / "saved_model", "keras": folder / "model.keras", "tflite": folder / "model.tflite"}
    return {k: p for k, p in paths.items() if k in kinds}


def bench_source_memory(rows: int, tmp: Path, before: bool = True,
                        kinds=("saved_model", "keras", "tflite")) -> list[dict]:
    """Peak RSS (VmHWM) and wall time of fresh processes converting framework inputs."""
    folder = tmp / "sources"
    folder.mkdir(exist_ok=True)
    paths = _make_sources(folder, rows, kinds)
    weights = rows * 1000 * 4
    runs = [("TensorFlow + tf2onnx import alone", None,
             "import tensorflow, tf2onnx, onnxruntime; from onnx_slice_tools.frontends import sources; ok = True")]
    for kind, path in paths.items():
        runs.append((f"convert_source {kind}", path,
                     f"from onnx_slice_tools.api import convert; r = convert({str(path)!r}); "
                     "ok = r.ok and r.report.model_checks['framework'].startswith('passed'); "
                     f"r.save({str(tmp / ('out_' + kind) / 'm.onnx')!r})"))
    if before and "saved_model" in paths:
        runs.append(("SavedModel through tf2onnx's freezing (the path before)", paths["saved_model"],
                     "from onnx_slice_tools import convert; from onnx_slice_tools.frontends import sources, tfexport; "
                     f"p = {str(paths['saved_model'])!r}; loaded = sources.load_tf(p); "
                     "m = tfexport.export(*loaded[:2], large_variable_bytes=None); r = convert(m, source=p); "
                     "ok = r.ok and sources.verify_against_source(p, r.model, loaded=loaded).ok"))
    rows_out = []
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    for what, path, body in runs:
        code = f"import time; t = time.perf_counter(); {body}; print(time.perf_counter() - t, {_HWM}, ok)"
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        if res.returncode:
            row = {"what": what, "error": (res.stderr.strip().splitlines() or ["?"])[-1][:300]}
            print(f"source memory: {what}: FAILED {row['error']}", flush=True)
        else:
            seconds, mb, ok = res.stdout.split()[-3:]
            row = {"what": what, "weights_mb": weights / 2 ** 20, "peak_rss_mb": float(mb),
                   "seconds": float(seconds), "ok": ok == "True"}
            print(f"source memory: {what}: {weights / 2 ** 20:.0f} MiB weights -> peak RSS {float(mb):.0f} MB, "
                  f"{float(seconds):.1f} s, ok={ok}", flush=True)
        rows_out.append(row)
    return rows_out


def _median_process_s(cmd: list, repeat: int, env=None, cpu: list | None = None, rss: list | None = None) -> float:
    """Median wall seconds of ``repeat`` fresh processes running ``cmd`` (output discarded).
    ``cpu``: a list that gets the median CPU seconds (user + system, the process and what it
    waited for), steadier than wall time on a shared machine; ``rss``: a list that gets the
    largest peak resident set (MiB) of the process or of any child it waited for."""
    times, cpus, peaks = [], [], []
    for _ in range(repeat):
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        times.append(time.perf_counter() - t)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            raise subprocess.CalledProcessError(proc.returncode, cmd)
        cpus.append(usage.ru_utime + usage.ru_stime)
        peaks.append(usage.ru_maxrss / 1024)  # (KiB on Linux)
    if cpu is not None:
        cpu.append(sorted(cpus)[len(cpus) // 2])
    if rss is not None:
        rss.append(max(peaks))
    return sorted(times)[len(times) // 2]


def _tool(*args) -> list:
    return [sys.executable, "-m", "onnx_slice_tools", *args]


def bench_speed(sizes, repeat: int, tmp: Path, batch_models: int, no_verify_only: bool = False,
                tf2onnx_slices: int = 200) -> dict:
    """Whole-command ratios (see the module doc, 8.): every figure is a whole process, Python
    start-up and imports included, as a user or a pipeline sees them; the ratios are of CPU
    seconds (user + system of the process and every child it waited for), steadier than
    wall time on a shared machine.  Per size, the four targets of issue 13:
    ``convert --no-verify`` / floor (<= 2), ``convert`` / (floor + session) (<= 1.5), CPU ms
    per StridedSlice against tf2onnx's (<= 1/50); then ``batch -j 2`` vs ``-j 1``.
    ``no_verify_only``: the rewrite path alone (no verified convert, session, start-up or batch)."""
    import onnx
    py = sys.executable
    # Byte-compiled first, as `pip install` leaves a package (onnx's own modules are): with
    # PYTHONDONTWRITEBYTECODE set, an editable checkout would otherwise compile our ~30 modules
    # in every process (~60 ms CPU) while the floor's imports come from bytecode.
    subprocess.run([py, "-m", "compileall", "-q", str(ROOT / "onnx_slice_tools")], check=True)
    floor_cmd = [py, "-c", "import sys, onnx; onnx.save(onnx.load(sys.argv[1]), sys.argv[2])"]
    session_cmd = [py, "-c", "import sys, onnxruntime as ort; ort.InferenceSession(sys.argv[1], "
                   "providers=['CPUExecutionProvider'])"]
    rows = []
    for n in sizes:
        for fan_out in (len(PATTERNS), n):
            path = tmp / f"speed_{n}_{fan_out}.onnx"
            onnx.save(synthetic_model(n, False, fan_out=fan_out), path)
            out = tmp / f"speed_{n}_{fan_out}_out.onnx"
            row: dict = {"nodes": n, "fan_out": fan_out, "load_average": os.getloadavg()[0]}
            runs = [("load_save", floor_cmd + [str(path), str(tmp / "ls.onnx")]),
                    ("convert_no_verify", _tool("convert", "--no-verify", str(path), "-o", str(out)))]
            if not no_verify_only:  # (the session of the output that convert --no-verify wrote: the same bytes)
                runs += [("session", session_cmd + [str(out)]), ("convert", _tool("convert", str(path), "-o", str(out)))]
            samples: dict = {name: ([], []) for name, _ in runs}
            for _ in range(repeat):  # interleaved: a drift of the machine's speed hits every command alike
                for name, cmd in runs:
                    cpu: list = []
                    samples[name][0].append(_median_process_s(cmd, 1, cpu=cpu))
                    samples[name][1].append(cpu[0])
            for name, (walls, cpus) in samples.items():
                row[f"{name}_s"] = sorted(walls)[len(walls) // 2]
                row[f"{name}_cpu_s"] = sorted(cpus)[len(cpus) // 2]
            row["no_verify_vs_floor_cpu"] = row["convert_no_verify_cpu_s"] / row["load_save_cpu_s"]
            row["no_verify_cpu_ms_per_slice"] = 1000 * row["convert_no_verify_cpu_s"] / n
            line = (f"speed {n:>6} nodes, fan-out {fan_out:>6} (load {row['load_average']:.1f}), CPU s: load+save "
                    f"{row['load_save_cpu_s']:.2f}, convert --no-verify {row['convert_no_verify_cpu_s']:.2f} "
                    f"({row['no_verify_vs_floor_cpu']:.2f}x floor, target <= 2)")
            if not no_verify_only:  # the ratio of each turn (its floor measured next to it), median and range
                cpu_ratios = sorted(c / (f + t) for f, t, c in zip(samples["load_save"][1], samples["session"][1],
                                                                     samples["convert"][1]))
                wall_ratios = sorted(c / (f + t) for f, t, c in zip(samples["load_save"][0], samples["session"][0],
                                                                      samples["convert"][0]))
                row["verify_vs_floor_plus_session_cpu"] = cpu_ratios[len(cpu_ratios) // 2]
                row["verify_vs_floor_plus_session_wall"] = wall_ratios[len(wall_ratios) // 2]
                row["cpu_ratio_range"] = (cpu_ratios[0], cpu_ratios[-1])
                row["convert_cpu_ms_per_slice"] = 1000 * row["convert_cpu_s"] / n
                line += (f", session {row['session_cpu_s']:.2f}, convert {row['convert_cpu_s']:.2f} "
                         f"({row['verify_vs_floor_plus_session_cpu']:.2f}x floor + session, each turn "
                         f"{row['cpu_ratio_range'][0]:.2f}-{row['cpu_ratio_range'][1]:.2f}, target <= 1.5; "
                         f"{row['convert_cpu_ms_per_slice']:.3f} ms/slice); wall: load+save {row['load_save_s']:.2f}, "
                         f"session {row['session_s']:.2f}, convert {row['convert_s']:.2f} "
                         f"({row['verify_vs_floor_plus_session_wall']:.2f}x)")
            rows.append(row)
            print(line, flush=True)
    if no_verify_only:
        return {"rows": rows}
    result = {"rows": rows, "tf2onnx": _tf2onnx_against(rows, tf2onnx_slices)}
    result["startup"] = startup = {
        "python_s": _median_process_s([py, "-c", "pass"], repeat),
        "import_onnx_s": _median_process_s([py, "-c", "import onnx"], repeat),
        "help_s": _median_process_s(_tool("--help"), repeat),
        "explain_s": _median_process_s(_tool("explain", "--begin", "0,0,2", "--end", "0,0,-2", "--strides", "1,1,1",
                                             "--begin-mask", "1", "--end-mask", "1", "--new-axis-mask", "2",
                                             "--shape", "4,16,16,8"), repeat)}
    print("start-up: " + ", ".join(f"{k[:-2]} {v:.3f} s" for k, v in startup.items()), flush=True)
    result["batch"] = _bench_batch_jobs(batch_models, tmp, repeat)
    return result


#: one default onnxruntime session of a model and one run of it, symbolic dims at 1: the part of a
#: verified conversion's floor that a user pays to load and run the output once
_SESSION_AND_RUN = """
import sys, numpy as np, onnxruntime as ort
s = ort.InferenceSession(sys.argv[1])
types = {"tensor(float)": np.float32, "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(bool)": np.bool_}
s.run(None, {i.name: np.ones([d if isinstance(d, int) else 1 for d in i.shape], types[i.type]) for i in s.get_inputs()})
"""


def _floor_rows(label: str, rows: list, models, repeat: int, tmp: Path, verify: bool = True) -> None:
    """Per (row, model): whole-process CPU and wall seconds of load + save, ``convert --no-verify``,
    and (``verify``) one default session of the output plus one run of it and ``convert``
    (verification on), each command of a model taken in turn ``repeat`` times (medians); the
    ratios against the floors: ``convert --no-verify`` / load+save and ``convert`` / (load+save +
    session + run), the median of each turn's own ratio."""
    import onnx
    py = sys.executable
    floor_cmd = [py, "-c", "import sys, onnx; onnx.save(onnx.load(sys.argv[1]), sys.argv[2])"]
    for row, model in models:
        path = tmp / f"{label}.onnx"
        onnx.save(model, path)
        del model
        out = tmp / f"{label}_out.onnx"
        runs = [("load_save", floor_cmd + [str(path), str(tmp / "ls.onnx")]),
                ("convert_no_verify", _tool("convert", "--no-verify", str(path), "-o", str(out)))]
        if verify:  # (the session and run of what convert --no-verify wrote: the bytes convert writes)
            runs += [("session_run", [py, "-c", _SESSION_AND_RUN, str(out)]),
                     ("convert", _tool("convert", str(path), "-o", str(out)))]
        samples: dict = {name: ([], []) for name, _ in runs}
        row["load_average"] = os.getloadavg()[0]
        peaks: dict = {name: [] for name, _ in runs}
        for _ in range(repeat):
            for name, cmd in runs:
                cpu: list = []
                samples[name][0].append(_median_process_s(cmd, 1, cpu=cpu, rss=peaks[name]))
                samples[name][1].append(cpu[0])
        for name, (walls, cpus) in samples.items():
            row[f"{name}_s"] = sorted(walls)[len(walls) // 2]
            row[f"{name}_cpu_s"] = sorted(cpus)[len(cpus) // 2]
            row[f"{name}_peak_mib"] = round(max(peaks[name]))

        def ratio(num, dens, k):
            values = sorted(n / sum(d) for n, *d in zip(samples[num][k], *(samples[d][k] for d in dens)))
            return values[len(values) // 2]
        row["no_verify_vs_floor_cpu"] = ratio("convert_no_verify", ["load_save"], 1)
        row["no_verify_vs_floor_wall"] = ratio("convert_no_verify", ["load_save"], 0)
        line = (f"{label}: {json.dumps({k: v for k, v in row.items() if not k.endswith('_s')})}: load+save "
                f"{row['load_save_cpu_s']:.2f} s CPU, convert --no-verify {row['convert_no_verify_cpu_s']:.2f} "
                f"({row['no_verify_vs_floor_cpu']:.2f}x; wall {row['no_verify_vs_floor_wall']:.2f}x)")
        if verify:
            row["verify_vs_floor_cpu"] = ratio("convert", ["load_save", "session_run"], 1)
            row["verify_vs_floor_wall"] = ratio("convert", ["load_save", "session_run"], 0)
            line += (f", session+run {row['session_run_cpu_s']:.2f}, convert {row['convert_cpu_s']:.2f} "
                     f"({row['verify_vs_floor_cpu']:.2f}x floor; wall {row['convert_s']:.2f} s, "
                     f"{row['verify_vs_floor_wall']:.2f}x)")
        print(line, flush=True)


def bench_chains(sizes, repeat: int, tmp: Path, every=(100, 10), verify: bool = True,
                 fan_out_max: int = 10000) -> list[dict]:
    """Slices in series (:func:`chain_model`: a StridedSlice every ``every`` nodes, each reading
    the previous one's output) beside fan-out rows (:func:`synthetic_model`, groups of 8 slices
    reading one tensor), at ``sizes`` nodes: whole-process CPU against the floors
    (:func:`_floor_rows`); fan-out rows up to ``fan_out_max`` nodes (section 8 has larger ones)."""
    rows: list[dict] = []
    for n in sizes:
        for k in every:
            row: dict = {"model": "chain", "nodes": n, "slices_in_series": n // k}
            rows.append(row)
            _floor_rows(f"chain_{n}_{n // k}", rows[-1:], [(row, chain_model(n, n // k))], repeat, tmp, verify)
        if n > fan_out_max:
            continue
        row = {"model": "fan-out 8", "nodes": n, "slices": n}
        rows.append(row)
        _floor_rows(f"fanout_{n}", rows[-1:], [(row, synthetic_model(n, False))], repeat, tmp, verify)
    return rows


def bench_distinct(sizes, repeat: int, tmp: Path) -> list[dict]:
    """:func:`distinct_spec_model` (every slice its own begin/end over [B, 64, 64, 8], each a
    graph output) at ``sizes`` slices, fully verified ``convert`` against load + save + one
    default session of the output + one run of it at B = 1 (:func:`_floor_rows`)."""
    rows: list[dict] = []
    for n in sizes:
        row: dict = {"model": "distinct specs [B, 64, 64, 8]", "slices": n}
        rows.append(row)
        _floor_rows(f"distinct_{n}", rows[-1:], [(row, distinct_spec_model(n))], repeat, tmp)
    return rows


def bench_inspect(sizes, repeat: int, tmp: Path) -> dict:
    """``inspect`` against ``convert`` (see the module doc, 10.): inspect needs no verification,
    so it must take no longer than convert on the same model."""
    import onnx
    py = sys.executable
    subprocess.run([py, "-m", "compileall", "-q", str(ROOT / "onnx_slice_tools")], check=True)
    rows = []
    for n in sizes:
        path = tmp / f"inspect_{n}.onnx"
        onnx.save(synthetic_model(n, False), path)
        row: dict = {"nodes": n, "load_average": os.getloadavg()[0]}
        for name, cmd in (("inspect", _tool("inspect", str(path))), ("inspect_json", _tool("inspect", "--json", str(path))),
                          ("convert", _tool("convert", str(path), "-o", str(tmp / "inspect_out.onnx")))):
            cpu: list = []
            row[f"{name}_s"] = _median_process_s(cmd, repeat, cpu=cpu)
            row[f"{name}_cpu_s"] = cpu[0]
        rows.append(row)
        print(f"inspect {n:>6} nodes (load {row['load_average']:.1f}): wall/CPU s: inspect {row['inspect_s']:.2f}/"
              f"{row['inspect_cpu_s']:.2f}, inspect --json {row['inspect_json_s']:.2f}/{row['inspect_json_cpu_s']:.2f}, "
              f"convert {row['convert_s']:.2f}/{row['convert_cpu_s']:.2f}", flush=True)
    startup = {}
    for name, cmd in (("python", [py, "-c", "pass"]), ("help", _tool("--help")),
                      ("explain", _tool("explain", "--begin", "0,0,2", "--end", "0,0,-2", "--strides", "1,1,1",
                                        "--begin-mask", "1", "--end-mask", "1", "--new-axis-mask", "2",
                                        "--shape", "4,16,16,8"))):
        cpu = []
        startup[f"{name}_s"] = _median_process_s(cmd, max(repeat, 10), cpu=cpu)
        startup[f"{name}_cpu_s"] = cpu[0]
    print("start-up wall/CPU s: " + ", ".join(f"{k} {startup[k + '_s']:.3f}/{startup[k + '_cpu_s']:.3f}"
                                               for k in ("python", "help", "explain")), flush=True)
    return {"rows": rows, "startup": startup}


def _tf2onnx_against(rows: list, n_slices: int) -> dict | None:
    """tf2onnx's CPU per StridedSlice (:func:`tf2onnx_per_slice`, in a child process) against
    each row's ``convert`` CPU per slice (target: ours <= 1/50 of tf2onnx's)."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import bench; "
            "print(json.dumps(bench.tf2onnx_per_slice(int(sys.argv[2]))))")
    proc = subprocess.run([sys.executable, "-c", code, str(ROOT / "scripts"), str(n_slices)], capture_output=True,
                          text=True, check=False)
    if proc.returncode:
        print(f"tf2onnx comparison skipped: {(proc.stderr.strip().splitlines() or ['?'])[-1]}", flush=True)
        return None
    per_slice = json.loads(proc.stdout.strip().splitlines()[-1])
    theirs = per_slice["tf2onnx_cpu_s_per_slice"] * 1000
    for row in rows:
        row["tf2onnx_over_ours"] = theirs / row["convert_cpu_ms_per_slice"]
        print(f"per StridedSlice, {row['nodes']} nodes, fan-out {row['fan_out']}: ours {row['convert_cpu_ms_per_slice']:.3f} "
              f"ms CPU, tf2onnx {theirs:.2f} ms CPU ({per_slice['slices']} slices, in process): "
              f"1/{row['tf2onnx_over_ours']:.0f} (target <= 1/50)", flush=True)
    return per_slice


#: Runs the command of its arguments and prints its wall seconds and the CPU seconds of every
#: process it started, also those re-parented here when their parent exited (Linux
#: PR_SET_CHILD_SUBREAPER): a fork server and its workers outlive the batch by a moment.
_REAPER = """
import ctypes, os, resource, subprocess, sys, time
ctypes.CDLL(None).prctl(36, 1)
t = time.perf_counter()
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
wall = time.perf_counter() - t
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(wall, usage.ru_utime + usage.ru_stime)
"""


def _reaped(cmd: list) -> tuple[float, float]:
    """(wall s, CPU s) of ``cmd`` and every process it left behind (:data:`_REAPER`)."""
    out = subprocess.run([sys.executable, "-c", _REAPER, *cmd], capture_output=True, text=True, check=True)
    wall, cpu = out.stdout.split()
    return float(wall), float(cpu)


def bench_validation(sizes, repeat: int, tmp: Path) -> list[dict]:
    """CPU seconds (``process_time``, best of ``repeat``, a fresh parse each time) of io/validate.py
    on the speed models: ``validate_model`` (the fast proof, given the file's bytes), the full
    walk alone, and ``onnx.load`` of the same file for scale, as the floor calls it (it walks
    every tensor for external data: ~50 ms at 10,000 nodes; docs/benchmarks.md, 8c)."""
    import onnx

    from onnx_slice_tools.io.validate import _Validator, validate_model
    rows = []
    for n in sizes:
        for fan_out in (len(PATTERNS), n):
            path = tmp / f"validate_{n}_{fan_out}.onnx"
            onnx.save(synthetic_model(n, False, fan_out=fan_out), path)
            data = path.read_bytes()

            def cpu(fn):
                best = float("inf")
                for _ in range(repeat):
                    proto = onnx.ModelProto.FromString(data)
                    t = time.process_time()
                    fn(proto)
                    best = min(best, time.process_time() - t)
                return best
            row = {"nodes": n, "fan_out": fan_out, "load_s": cpu(lambda p: onnx.load(str(path))),
                   "validate_s": cpu(lambda p: validate_model(p, path, data=data)),
                   "full_walk_s": cpu(lambda p: _Validator(path).model(p))}
            rows.append(row)
            print(f"validation {n:>6} nodes, fan-out {fan_out:>6}: validate_model {row['validate_s'] * 1000:.1f} ms, "
                  f"full walk {row['full_walk_s'] * 1000:.1f} ms, "
                  f"onnx.load (floor's) {row['load_s'] * 1000:.1f} ms CPU", flush=True)
    return rows


def _bench_batch_jobs(n: int, tmp: Path, repeat: int) -> dict:
    """``batch -j 1`` and ``-j 2`` over ``n`` copies of the models/ TF samples (whole process),
    run in pairs (-j 1, -j 2, -j 1, ...) so the ratio survives a machine whose load drifts;
    wall and CPU seconds (user + system of the batch and its workers, counted by
    :data:`_REAPER`: the workers are children of a fork server, not of the batch), medians."""
    import shutil
    src = tmp / "speed_batch_in"
    src.mkdir(exist_ok=True)
    samples = sorted(p for p in (ROOT / "models").glob("tf_*.onnx"))
    for i in range(n):
        shutil.copy(samples[i % len(samples)], src / f"m{i:04d}_{samples[i % len(samples)].name}")
    runs: dict = {1: [], 2: []}
    for r in range(repeat):
        for jobs in (1, 2):
            out = tmp / f"speed_batch_out_{jobs}_{r}"
            runs[jobs].append(_reaped(_tool("batch", str(src), "-o", str(out), "-j", str(jobs))))
            shutil.rmtree(out, ignore_errors=True)

    def median(values):
        return sorted(values)[len(values) // 2]
    row = {"models": n, "load_average": os.getloadavg()[0]}
    for jobs in (1, 2):
        row[f"j{jobs}_s"] = median([w for w, _ in runs[jobs]])
        row[f"j{jobs}_cpu_s"] = median([c for _, c in runs[jobs]])
    row["speedup"] = median([a[0] / b[0] for a, b in zip(runs[1], runs[2])])
    print(f"batch: {n} models, -j 1 {row['j1_s']:.1f} s (CPU {row['j1_cpu_s']:.1f} s), -j 2 {row['j2_s']:.1f} s "
          f"(CPU {row['j2_cpu_s']:.1f} s): {row['speedup']:.2f}x; load average {row['load_average']:.1f} "
          f"on {os.cpu_count()} cores", flush=True)
    return row


#: (name, the measured step, model) of the checks benchmark; models built in _checks_model.
CHECK_CASES = [
    ("static [64,64,256,256] f32, 20 slices, 1 GiB external weights", "verify_records", "big_static"),
    ("declared [2^27] f32, x[1:-1]", "verify_records", "long"),
    ("rank-7 symbolic x[30]", "verify_records", "rank7"),
    ("rank-6 symbolic x[0] beside 1-D z[30]", "compare_models", "rank6_z30"),
]
CHECK_EXPRS = ["x[:, :, 10:20]", "x[..., ::2]", "x[0]", "x[:, 1:]", "x[..., ::-1]", "x[:, :, :, -3:]",
               "x[None, 5]", "x[..., 1, None]", "x[:, :, 1:-1, 1:-1]", "x[-1, :, ::3]", "x[1:3]",
               "x[:, ::-2]", "x[..., 7]", "x[:, 0, None]", "x[2:, 3:, 4:, 5:]", "x[::2, ::2]",
               "x[..., -1]", "x[:, :, ::-1, ::-1]", "x[5:6, None]", "x[:, -2:]"]


def _checks_model(kind: str, folder: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper

    from onnx_slice_tools.semantics.spec import from_index_expr
    masks = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")
    folder.mkdir(parents=True, exist_ok=True)
    nodes, inits, outs, inputs = [], [], [], []

    def add_slice(src: str, expr: str, k: int) -> None:
        spec = from_index_expr(expr)
        for nm, vals in (("b", spec.begin), ("e", spec.end), ("s", spec.strides)):
            inits.append(helper.make_tensor(f"{nm}{k}", TensorProto.INT32, [spec.n], list(vals)))
        nodes.append(helper.make_node("StridedSlice", [src, f"b{k}", f"e{k}", f"s{k}"], [f"y{k}"], name=f"ss{k}",
                                      domain=TF_DOMAIN, **{m: getattr(spec, m) for m in masks}))
        outs.append(helper.make_tensor_value_info(f"y{k}", TensorProto.FLOAT, None))

    if kind == "big_static":
        shape = [64, 64, 256, 256]
        inputs.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, shape))
        w = onnx.TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[2 ** 28], data_location=TensorProto.EXTERNAL)
        for key, val in (("location", "weights.bin"), ("offset", "0"), ("length", str(2 ** 30))):
            e = w.external_data.add()
            e.key, e.value = key, val
        with open(folder / "weights.bin", "wb") as f:
            chunk = np.arange(1 << 22, dtype=np.float32).tobytes()
            for _ in range(2 ** 28 // (1 << 22)):
                f.write(chunk)
        inits += [w, helper.make_tensor("shape", TensorProto.INT64, [4], shape)]
        nodes += [helper.make_node("Reshape", ["W", "shape"], ["w4"]), helper.make_node("Add", ["x", "w4"], ["h"])]
        for k, expr in enumerate(CHECK_EXPRS):
            add_slice("h", expr, k)
    elif kind == "long":
        inputs.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, [2 ** 27]))
        add_slice("x", "x[1:-1]", 0)
    elif kind == "rank7":
        inputs.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, [f"d{k}" for k in range(7)]))
        add_slice("x", "x[30]", 0)
    else:
        inputs += [helper.make_tensor_value_info("x", TensorProto.FLOAT, [f"unk__{k}" for k in range(6)]),
                   helper.make_tensor_value_info("z", TensorProto.FLOAT, ["unk__9"])]
        add_slice("x", "x[0]", 0)
        add_slice("z", "x[30]", 1)
        nodes[-1].input[0] = "z"
    graph = helper.make_graph(nodes, kind, inputs, outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TF_DOMAIN, 1)])
    model.ir_version = 8
    path = folder / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return path


_CHECK_CODE = """
import sys, time
from onnx_slice_tools import convert
from onnx_slice_tools.api import CheckRun, verify_records
from onnx_slice_tools.verification.compare import compare_models
path, step = sys.argv[1], sys.argv[2]
r = convert(path, verify=False)
def status(field):
    return [l.split()[1] for l in open('/proc/self/status') if l.startswith(field)][0]
base = status('VmRSS')
open('/proc/self/clear_refs', 'w').write('5')  # reset the peak (VmHWM) to the current RSS
t = time.perf_counter()
if step == 'verify_records':
    _, checks = verify_records(r.report.records, CheckRun(r.report.opset))
    verdicts = sorted({c.onnxruntime.split(':')[0] for c in checks.values()})
else:
    import onnx
    cmp = compare_models(onnx.load(path), r.model)
    verdicts = [cmp.status]
print(time.perf_counter() - t, base, status('VmHWM'), '|'.join(verdicts))
"""


def bench_checks(tmp: Path, quick: bool = False) -> list[dict]:
    """Per-rewrite checks and the whole-model comparison on large or many-dim input shapes:
    seconds and peak RSS of that step alone (RSS before it: ``rss_before_mb``).  ``quick``:
    the symbolic cases only (no 1 GiB weights file)."""
    rows = []
    for name, step, kind in CHECK_CASES[2:] if quick else CHECK_CASES:
        path = _checks_model(kind, tmp / f"checks_{kind}")
        res = subprocess.run([sys.executable, "-c", _CHECK_CODE, str(path), step], capture_output=True,
                             text=True, check=True)
        seconds, before, peak, verdicts = res.stdout.split()[-4:]
        row = {"case": name, "step": step, "seconds": round(float(seconds), 3),
               "rss_before_mb": round(int(before) / 1024), "peak_rss_mb": round(int(peak) / 1024),
               "results": verdicts}
        print(f"checks: {name}: {step} {row['seconds']} s, peak RSS {row['peak_rss_mb']} MB "
              f"(before: {row['rss_before_mb']} MB), {verdicts}", flush=True)
        rows.append(row)
        for f in path.parent.iterdir():
            f.unlink()
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,1000,10000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--slices", type=int, default=200, help="StridedSlice nodes for the tf2onnx comparison")
    ap.add_argument("--runs", type=int, default=300, help="onnxruntime runs per latency measurement")
    ap.add_argument("--gib", type=float, default=1.1, help="GiB of external weights for the memory benchmark")
    ap.add_argument("--quick", action="store_true", help="CI smoke size: small everything")
    ap.add_argument("--batch-models", type=int, default=200, help="models for the batch crash benchmark")
    ap.add_argument("--jobs", type=int, default=2, help="workers for the batch benchmark")
    ap.add_argument("--only", choices=["throughput", "tf2onnx", "memory", "batch", "checks", "verify-memory",
                                       "targets", "speed", "source-memory", "validation", "inspect", "chains",
                                       "distinct"],
                    action="append")
    ap.add_argument("--source-rows", type=int, default=50000,
                    help="--only source-memory: rows of the [rows, 1000] float32 weight (50000: 191 MB)")
    ap.add_argument("--no-before", action="store_true",
                    help="--only source-memory: skip the freezing path (it needs ~30x the weights)")
    ap.add_argument("--source-kinds", default="saved_model,keras,tflite",
                    help="--only source-memory: which inputs (the .tflite needs ~40x the weights in tf2onnx)")
    ap.add_argument("--speed-sizes", default="1000,10000,100000",
                    help="StridedSlice nodes for the whole-process speed ratios (--only speed)")
    ap.add_argument("--speed-no-verify", action="store_true",
                    help="--only speed: the rewrite path (convert --no-verify vs load+save) alone")
    ap.add_argument("--chain-sizes", default="1000,10000,100000",
                    help="--only chains: nodes of the chain (slices in series) and fan-out models")
    ap.add_argument("--chain-every", default="100,10",
                    help="--only chains: a StridedSlice every this many nodes (one chain row per value)")
    ap.add_argument("--distinct-sizes", default="1000,10000",
                    help="--only distinct: StridedSlice nodes of the distinct-spec [B, 64, 64, 8] model")
    ap.add_argument("--memory", action="store_true", help="only the memory benchmarks (memory, checks, verify-memory)")
    ap.add_argument("--targets", action="store_true", help="only the per-target section (same as --only targets)")
    args = ap.parse_args(argv)
    if args.targets:
        args.only = (args.only or []) + ["targets"]
    if args.quick:
        args.sizes, args.repeat, args.slices, args.runs, args.gib = "100", 1, 12, 20, 0.01
        args.speed_sizes, args.batch_models = "100", 8
    sizes = [int(s) for s in args.sizes.split(",")]
    results = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                           "platform": platform.platform(), "command": " ".join(sys.argv)}}
    only = set(args.only or (["memory", "checks", "verify-memory"] if args.memory else ["targets"] if args.targets else
                             ["throughput", "tf2onnx", "memory", "checks", "verify-memory", "targets"]
                             + ([] if args.quick else ["batch"])))
    activation = (4, 4, 16, 16) if args.quick else (64, 64, 256, 256)
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
        if "batch" in only:
            results["batch"] = bench_batch_crash(args.batch_models, args.jobs, Path(tmp))
        if "checks" in only:
            results["checks"] = bench_checks(Path(tmp), quick=args.quick)
        if "speed" in only:
            results["speed"] = bench_speed([int(s) for s in args.speed_sizes.split(",")], args.repeat, Path(tmp),
                                           args.batch_models, no_verify_only=args.speed_no_verify,
                                           tf2onnx_slices=args.slices)
        if "chains" in only:
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "onnx_slice_tools")], check=True)
            results["chains"] = bench_chains([int(v) for v in args.chain_sizes.split(",")], args.repeat, Path(tmp),
                                             tuple(int(v) for v in args.chain_every.split(",")))
        if "distinct" in only:
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "onnx_slice_tools")], check=True)
            results["distinct"] = bench_distinct([int(v) for v in args.distinct_sizes.split(",")], args.repeat,
                                                 Path(tmp))
        if "inspect" in only:
            results["inspect"] = bench_inspect([int(s) for s in args.speed_sizes.split(",")], args.repeat, Path(tmp))
        if "validation" in only:
            results["validation"] = bench_validation([int(s) for s in args.speed_sizes.split(",")], args.repeat,
                                                     Path(tmp))
        if "verify-memory" in only:
            results["verify_memory"] = bench_verify_memory(args.gib, Path(tmp), activation)
        if "targets" in only:
            results["targets"] = bench_targets(args.runs)
        if "source-memory" in only:
            results["source_memory"] = bench_source_memory(args.source_rows, Path(tmp), before=not args.no_before,
                                                           kinds=args.source_kinds.split(","))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
