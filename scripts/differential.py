#!/usr/bin/env python3
"""Differential run: our numpy reference against TensorFlow, OpenVINO and TFLite on a random corpus.

    python scripts/differential.py --cases 20000 --seed 1
    python scripts/differential.py --flavor tflite --cases 5000

TFLite runs its interpreter in a child process, in batches (it may crash on specs whose
result is undefined; we reject those).  The specs we reject as undefined are not compared
(their values are whatever memory held); ``--undefined-sample`` of them are run one by one
to count how often the interpreter crashes or errors on them.  ``--runtime-chance`` makes
begin/end/strides graph inputs of the .tflite model (TFLite's dynamic path) for that share.

Prints, per flavour, the number of cases, how many each side accepted/rejected,
how many values were compared bitwise (OpenVINO: where its reference evaluator is
sound) and every disagreement.  Exit code 1 if any case disagrees.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from onnx_slice_tools.verification.oracles import (CRASHED, IsolatedTFLite, RandomSource, compare,
                                      compare_tflite, our_outcome, random_case, run_oracle)


def run_tflite(args, tflite: IsolatedTFLite) -> int:
    """The TFLite corpus: cases in batches of 500 through the isolated interpreter."""
    src = RandomSource(random.Random(f"{args.seed}-tflite"))
    counts = dict(cases=0, interpreter_accepted=0, interpreter_rejected=0, ours_undefined=0,
                  undefined_run=0, undefined_crashed=0, runtime_indices=0, values_compared=0, disagreements=0)
    t0 = time.perf_counter()
    batch: list = []

    def flush():
        outs = tflite.many([(x, spec, rt) for x, spec, rt, _ in batch])
        for (x, spec, rt, ours), theirs in zip(batch, outs):
            counts["interpreter_accepted" if theirs.ok else "interpreter_rejected"] += 1
            counts["values_compared"] += ours.ok and theirs.values is not None
            problem = compare_tflite(ours, theirs)
            if problem:
                counts["disagreements"] += 1
                if counts["disagreements"] <= 20:
                    print(f"[tflite] shape={x.shape} dtype={x.dtype} runtime={rt} {spec}\n    {problem}")
        batch.clear()

    for _ in range(args.cases):
        x, spec = random_case(src, "tflite")
        rt = tuple(f for f in ("begin", "end", "strides") if spec.n and src.chance(args.runtime_chance))
        if rt == ("end",) and spec.offset:
            rt = ("begin", "end", "strides")  # offset + a run-time end with constant strides: see below
        ours = our_outcome(x, spec, rt)
        counts["cases"] += 1
        counts["runtime_indices"] += bool(rt)
        if not ours.ok and "undefined" in ours.error:
            counts["ours_undefined"] += 1
            if counts["undefined_run"] < args.undefined_sample:
                counts["undefined_run"] += 1
                counts["undefined_crashed"] += tflite(x, spec, rt).error == CRASHED
            continue
        batch.append((x, spec, rt, ours))
        if len(batch) >= 500:
            flush()
    if batch:
        flush()
    print("tflite: " + ", ".join(f"{k}={v}" for k, v in counts.items())
          + f" ({time.perf_counter() - t0:.1f} s)")
    return counts["disagreements"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=10000, help="cases per flavour")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--flavor", choices=["tf", "openvino", "tflite", "both", "all"], default="both")
    ap.add_argument("--undefined-sample", type=int, default=200,
                    help="TFLite: specs we reject as undefined that are run anyway (one by one)")
    ap.add_argument("--runtime-chance", type=float, default=0.2,
                    help="TFLite: share of cases whose begin/end/strides are graph inputs")
    args = ap.parse_args(argv)
    failed = 0
    flavors = {"both": ["tf", "openvino"], "all": ["tf", "openvino", "tflite"]}.get(args.flavor, [args.flavor])
    tflite = IsolatedTFLite()
    for flavor in flavors:
        if flavor == "tflite":
            failed += run_tflite(args, tflite)
            continue
        src = RandomSource(random.Random(f"{args.seed}-{flavor}"))
        counts = dict(cases=0, accepted=0, rejected=0, values_compared=0, disagreements=0)
        t0 = time.perf_counter()
        for _ in range(args.cases):
            x, spec = random_case(src, flavor)
            ours = our_outcome(x, spec)
            theirs = run_oracle(x, spec)
            counts["cases"] += 1
            counts["accepted" if theirs.ok else "rejected"] += 1
            counts["values_compared"] += theirs.values is not None
            problem = compare(ours, theirs)
            if problem:
                counts["disagreements"] += 1
                if counts["disagreements"] <= 20:
                    print(f"[{flavor}] shape={x.shape} dtype={x.dtype} {spec}\n    {problem}")
        failed += counts["disagreements"]
        print(f"{flavor}: " + ", ".join(f"{k}={v}" for k, v in counts.items())
              + f" ({time.perf_counter() - t0:.1f} s)")
    tflite.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
