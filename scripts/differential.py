#!/usr/bin/env python3
"""Differential run: our numpy reference against TensorFlow, OpenVINO and TFLite on a random corpus.

    python scripts/differential.py --cases 20000 --seed 1
    python scripts/differential.py --flavor tflite --cases 5000

TFLite runs its interpreter in a child process (it may crash on specs whose result is
undefined; we reject those) and also runs the specs we reject as undefined.

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

from onnx_slice_tools.oracles import (CRASHED, IsolatedTFLite, RandomSource, compare,  # noqa: E402
                                      compare_tflite, our_outcome, random_case, run_oracle)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=10000, help="cases per flavour")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--flavor", choices=["tf", "openvino", "tflite", "both", "all"], default="both")
    args = ap.parse_args(argv)
    failed = 0
    flavors = {"both": ["tf", "openvino"], "all": ["tf", "openvino", "tflite"]}.get(args.flavor, [args.flavor])
    tflite = IsolatedTFLite()
    for flavor in flavors:
        src = RandomSource(random.Random(f"{args.seed}-{flavor}"))
        counts = dict(cases=0, accepted=0, rejected=0, values_compared=0, disagreements=0)
        if flavor == "tflite":
            counts.update(ours_undefined=0, interpreter_crashed=0)
        t0 = time.perf_counter()
        for _ in range(args.cases):
            x, spec = random_case(src, flavor)
            ours = our_outcome(x, spec)
            theirs = tflite(x, spec) if flavor == "tflite" else run_oracle(x, spec)
            counts["cases"] += 1
            counts["accepted" if theirs.ok else "rejected"] += 1
            if flavor == "tflite":
                counts["ours_undefined"] += not ours.ok and "undefined" in ours.error
                counts["interpreter_crashed"] += theirs.error == CRASHED
                counts["values_compared"] += ours.ok and theirs.values is not None
                problem = compare_tflite(ours, theirs)
            else:
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
