"""Calibration of the float-comparison rule (onnx_slice_tools.verification.tolerance).

Measures how far the frameworks' *own* correct kernel sets drift apart on the same model and
the same inputs, as max |diff| / largest |expected| per output (the rule's measure):

- LiteRT's interpreter (``ai_edge_litert.interpreter.Interpreter``): XNNPACK (the default
  delegate) vs the builtin kernels (``BUILTIN_WITHOUT_DEFAULT_DELEGATES``), and the builtin
  vs the reference kernels (``BUILTIN_REF``), on small TF-built models (conv, dense, a
  pose-like conv net) and on real ``.tflite`` files found in the wheels given with ``--wheel``
  (fetch them with ``pip download --no-deps mediapipe==0.10.14``; nothing is committed);
- onnxruntime with default session options vs ``ORT_DISABLE_ALL``, on the tf2onnx conversions
  of the same TF models and a 1024x1024 MatMul;
- TensorFlow vs onnxruntime on a 1024x1024 MatMul (float64, float32, float16).

    PYTHONPATH=. python scripts/calibrate_tolerance.py [--trials 5] [--wheel mediapipe-0.10.14-....whl]
        [--json out.json]

Prints a Markdown table (one row per model and kernel pair, with the output that drifted most)
and, per dtype, the largest drift measured beside the default rtol of
``tolerance.default_rtol``.  Differences below the rule's absolute floor
(``tolerance.absolute_floor``: 8 eps) are not counted, as the rule does not count them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import zipfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def drift(expected, actual) -> float:
    """The rule's measure: max |diff| / largest finite |expected|, counting only differences
    above the dtype's absolute floor (0 when none); inf when NaN/inf positions or shapes differ."""
    from onnx_slice_tools.verification.tolerance import absolute_floor
    floor = absolute_floor(np.asarray(expected).dtype)
    e, a = np.asarray(expected, np.float64), np.asarray(actual, np.float64)
    if e.shape != a.shape or not np.array_equal(np.isfinite(e), np.isfinite(a)):
        return float("inf")
    fin = np.isfinite(e)
    scale = float(np.max(np.abs(e[fin]), initial=0.0)) or float(np.max(np.abs(a[fin]), initial=0.0))
    diffs = np.abs(e[fin] - a[fin])
    diff = float(np.max(diffs[diffs > floor], initial=0.0))
    return diff / scale if scale else 0.0


# --------------------------------------------------------------------------- models built with TF

def tf_models():
    """name -> (tf.function with an input signature, input kind)."""
    import tensorflow as tf
    rng = np.random.default_rng(1)

    def w(*shape, scale=None):
        fan_in = int(np.prod(shape[:-1]))
        return (rng.standard_normal(shape) * (scale or (1.0 / np.sqrt(fan_in)))).astype(np.float32)  # numpy: a graph Const

    k_conv, b_conv = w(3, 3, 32, 64), w(64, scale=0.1)

    @tf.function(input_signature=[tf.TensorSpec([1, 64, 64, 32], tf.float32)])
    def conv(x):
        return tf.nn.relu(tf.nn.conv2d(x, k_conv, 1, "SAME") + b_conv)

    w_d1, w_d2 = w(1024, 1024), w(1024, 256)

    @tf.function(input_signature=[tf.TensorSpec([1, 1024], tf.float32)])
    def dense(x):
        return tf.matmul(tf.nn.relu(tf.matmul(x, w_d1)), w_d2)

    stem = w(3, 3, 3, 16)
    blocks = []
    c = 16
    for cout in (32, 64, 96, 128):
        blocks.append((w(3, 3, c, 1), w(1, 1, c, cout), w(cout, scale=0.1)))
        c = cout
    head = w(c, 33 * 5)

    @tf.function(input_signature=[tf.TensorSpec([1, 128, 128, 3], tf.float32)])
    def pose(x):  # a MobileNet-like landmark regressor: 33 keypoints x (x, y, z, visibility, presence)
        y = tf.nn.relu6(tf.nn.conv2d(x, stem, 2, "SAME"))
        for dw, pw, b in blocks:
            y = tf.nn.relu6(tf.nn.depthwise_conv2d(y, dw, [1, 2, 2, 1], "SAME"))
            y = tf.nn.relu6(tf.nn.conv2d(y, pw, 1, "SAME") + b)
        y = tf.reduce_mean(y, axis=[1, 2])
        return tf.reshape(tf.matmul(y, head), [1, 33, 5])

    return {"conv 3x3 32->64 on 64x64": conv, "dense 1024-1024-256": dense, "pose-like conv net 128x128": pose}


def to_tflite(fn) -> bytes:
    import tensorflow as tf
    conv = tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()], fn)
    return conv.convert()


def to_onnx(fn) -> bytes:
    import tf2onnx
    model, _ = tf2onnx.convert.from_function(fn, input_signature=fn.input_signature, opset=17)
    return model.SerializeToString()


def tflite_to_onnx(blob: bytes) -> bytes:
    import tf2onnx
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.tflite"
        path.write_bytes(blob)
        model, _ = tf2onnx.convert.from_tflite(str(path), opset=17)
    return model.SerializeToString()


# --------------------------------------------------------------------------- runtimes

def litert(model: bytes, resolver: str):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    interp = Interpreter(model_content=model, experimental_op_resolver_type=getattr(OpResolverType, resolver))
    interp.allocate_tensors()
    ins, outs = interp.get_input_details(), interp.get_output_details()

    def run(feeds):
        for d, x in zip(ins, feeds):
            interp.set_tensor(d["index"], x)
        interp.invoke()
        return [np.array(interp.get_tensor(o["index"]), copy=True) for o in outs]
    return run, ins


def ort(model: bytes, optimise: bool):
    import onnxruntime as rt
    so = rt.SessionOptions()
    so.log_severity_level = 3
    if not optimise:
        so.graph_optimization_level = rt.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = rt.InferenceSession(model, sess_options=so, providers=["CPUExecutionProvider"])
    names = [i.name for i in s.get_inputs()]
    return lambda feeds: s.run(None, dict(zip(names, feeds)))


def random_feeds(rng, details):
    feeds = []
    for d in details:
        shape = [int(s) for s in d["shape"]]
        dt = np.dtype(d["dtype"])
        if dt.kind == "f":
            feeds.append(rng.uniform(-1, 1, shape).astype(dt))
        elif dt == np.uint8:
            feeds.append(rng.integers(0, 256, shape).astype(dt))
        else:
            feeds.append(rng.integers(-3, 4, shape).astype(dt))
    return feeds


def pair(run_a, run_b, feeds_of, trials: int) -> tuple[float, str]:
    worst, dtypes, where = 0.0, set(), ""
    for t in range(trials):
        feeds = feeds_of(np.random.default_rng(t))
        for k, (a, b) in enumerate(zip(run_a(feeds), run_b(feeds))):
            if np.asarray(a).dtype.kind == "f":
                dtypes.add(np.asarray(a).dtype.name)
                d = drift(a, b)
                if d > worst:
                    worst, where = d, f" (output {k}, {list(np.shape(a))})"
    return worst, ("/".join(sorted(dtypes)) or "-") + where


# --------------------------------------------------------------------------- the table

def measure(trials: int, wheels: list[str]) -> list[dict]:
    import tensorflow as tf
    rows = []

    def add(model, compared, dtype, value):
        rows.append({"model": model, "compared": compared, "dtype": dtype, "drift": value})
        print(f"| {model} | {compared} | {dtype} | {value:.2e} |", flush=True)

    print("| model | compared | dtype | max drift |\n|---|---|---|---:|")
    tflites = {name: to_tflite(fn) for name, fn in tf_models().items()}
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as z:
            for n in sorted(z.namelist()):
                if n.endswith(".tflite"):
                    tflites[f"{Path(wheel).name.split('-')[0]}: {Path(n).name}"] = z.read(n)
    for name, blob in tflites.items():
        try:
            builtin, ins = litert(blob, "BUILTIN_WITHOUT_DEFAULT_DELEGATES")
            xnn, _ = litert(blob, "AUTO")
            ref, _ = litert(blob, "BUILTIN_REF")
        except Exception as exc:  # an op LiteRT's Python wheel lacks (custom ops of MediaPipe)
            print(f"<!-- {name}: not run: {str(exc).splitlines()[0][:100]} -->")
            continue
        if not any(np.dtype(d["dtype"]).kind == "f" for d in ins):
            print(f"<!-- {name}: integer inputs only -->")
        def feeds_of(rng, ins=ins):
            return random_feeds(rng, ins)
        value, dt = pair(builtin, xnn, feeds_of, trials)
        add(name, "LiteRT XNNPACK vs builtin", dt, value)
        value, dt = pair(builtin, ref, feeds_of, trials)
        add(name, "LiteRT builtin vs reference kernels", dt, value)
        try:
            blob_onnx = tflite_to_onnx(blob)
            value, dt = pair(builtin, ort(blob_onnx, False), feeds_of, trials)
            add(name, "LiteRT builtin vs onnxruntime (tf2onnx)", dt, value)
            value, dt = pair(ort(blob_onnx, False), ort(blob_onnx, True), feeds_of, trials)
            add(name, "onnxruntime default vs ORT_DISABLE_ALL (tf2onnx)", dt, value)
        except Exception as exc:  # tf2onnx cannot convert it, or onnxruntime cannot load the result
            print(f"<!-- {name} through tf2onnx: {str(exc).splitlines()[0][:100]} -->")

    onnx_models = {name: (to_onnx(fn), fn) for name, fn in tf_models().items()}
    for name, (blob, fn) in onnx_models.items():
        shapes = [(list(s.shape), s.dtype.as_numpy_dtype) for s in fn.input_signature]

        def feeds_of(rng, shapes=shapes):
            return [rng.uniform(-1, 1, s).astype(d) for s, d in shapes]
        value, dt = pair(ort(blob, False), ort(blob, True), feeds_of, trials)
        add(name, "onnxruntime default vs ORT_DISABLE_ALL", dt, value)
        value, dt = pair(lambda f, fn=fn: [o.numpy() for o in _tuple(fn(*f))], ort(blob, True), feeds_of, trials)
        add(name, "TensorFlow vs onnxruntime (tf2onnx)", dt, value)

    for dtype in (np.float64, np.float32, np.float16):
        tfd = tf.as_dtype(dtype)

        @tf.function(input_signature=[tf.TensorSpec([1024, 1024], tfd), tf.TensorSpec([1024, 1024], tfd)])
        def mm(a, b):
            return tf.matmul(a, b)
        blob = to_onnx(mm)

        def feeds_of(rng, dtype=dtype):
            return [rng.standard_normal((1024, 1024)).astype(dtype) for _ in range(2)]
        value, dt = pair(lambda f, mm=mm: [mm(*f).numpy()], ort(blob, True), feeds_of, trials)
        add("MatMul 1024x1024 @ 1024x1024", "TensorFlow vs onnxruntime", dt, value)
        try:
            value, dt = pair(ort(blob, False), ort(blob, True), feeds_of, trials)
            add("MatMul 1024x1024 @ 1024x1024", "onnxruntime default vs ORT_DISABLE_ALL", dt, value)
        except Exception as exc:  # no float16 MatMul kernel in some builds
            print(f"<!-- MatMul {np.dtype(dtype).name} in onnxruntime: {str(exc).splitlines()[0][:100]} -->")
    return rows


def _tuple(x):
    return x if isinstance(x, (list, tuple)) else [x]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--wheel", action="append", default=[], help="a wheel whose .tflite files join the table")
    p.add_argument("--json")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory():
        rows = measure(args.trials, args.wheel)
    from onnx_slice_tools.verification.tolerance import default_rtol
    print("\n| dtype | largest drift measured | default rtol | margin |\n|---|---:|---:|---:|")
    for dt in ("float64", "float32", "float16"):
        worst = max((r["drift"] for r in rows if r["dtype"].split(" ")[0] == dt and np.isfinite(r["drift"])),
                    default=0.0)
        rtol = default_rtol(np.dtype(dt))
        print(f"| {dt} | {worst:.2e} | {rtol:.0e} | {rtol / worst if worst else float('inf'):.0f}x |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
