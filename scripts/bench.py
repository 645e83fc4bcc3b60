#!/usr/bin/env python
"""Benchmarks of onnx-slice-tools (results: docs/benchmarks.md).

    python scripts/bench.py                      # everything, full sizes
    python scripts/bench.py --sizes 100 --quick  # CI smoke size

1. throughput: convert + verify synthetic models with N StridedSlice nodes of mixed
   real-world patterns (static and symbolic batch dim), next to onnx.load + onnx.save;
2. against tf2onnx: seconds per StridedSlice, node counts and onnxruntime latency on
   the models/ samples;
3. memory: peak RSS converting a model with >= 1 GiB of external weights (a child process).
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,1000,10000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    results = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                           "platform": platform.platform()}}
    with tempfile.TemporaryDirectory() as tmp:
        results["throughput"] = bench_throughput(sizes, args.repeat, Path(tmp))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
