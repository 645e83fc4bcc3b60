"""Each target's lowering of random specs, run in onnxruntime with its default session options.

    python scripts/default_sessions.py --cases 300 --seed 11

Random specs of the three flavours (oracles.random_target_case: static, symbolic and
unknown-rank inputs, each of begin/end/strides a runtime value with probability 0.3), lowered for
each target; the model is loaded with default ``SessionOptions`` (ORT_ENABLE_ALL) and, for
comparison, with optimisation off, and run on up to 4 input sizes x 4 draws of runtime values
against the flavour's reference (oracles.reference_runs, as the test does: shape, dtype, bytes;
a rejected draw must fail).  Prints, per target and level, the specs with a wrong run, the
models the target's audit flags (targets.find_violations) and the nodes of all lowerings.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from onnx_slice_tools.lowering.targets import TARGETS, find_violations
from onnx_slice_tools.verification.oracles import RandomSource, random_target_case, reference_runs


def wrong_run(session, case, src, rng) -> str | None:
    """The first run of ``case`` that differs from the reference, or None."""
    for shape, values, feed, exp in reference_runs(case, src, rng, shapes=4, draws=4):
        try:
            got = session.run(["y0"], feed)[0]
        except Exception as exc:  # a failure is right only where the reference rejects
            if exp is not None:
                return f"{list(shape)} {values}: failed ({str(exc)[:80]})"
            continue
        if exp is None:
            return f"{list(shape)} {values}: ran where the framework raises"
        if got.shape != exp.shape or got.dtype != exp.dtype or got.tobytes() != exp.tobytes():
            return f"{list(shape)} {values}: shape {got.shape} vs {exp.shape}"
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=300)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--target", action="append", choices=list(TARGETS))
    args = ap.parse_args()
    levels = {"default": None, "disable_all": ort.GraphOptimizationLevel.ORT_DISABLE_ALL}
    for target in args.target or list(TARGETS):
        for label, level in levels.items():
            src, rng = RandomSource(random.Random(args.seed)), np.random.default_rng(args.seed)
            count, bad, nodes, shown = 0, Counter(), 0, []
            while count < args.cases:
                drawn = random_target_case(src, target, runtime_chance=0.3)
                if drawn is None:
                    continue
                case, proto = drawn
                so = ort.SessionOptions()
                so.log_severity_level = 4
                if level is not None:
                    so.graph_optimization_level = level
                session = ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
                count += 1
                nodes += case.lowering.node_count
                bad["audit"] += bool(find_violations(proto, target))
                problem = wrong_run(session, case, src, rng)
                if problem:
                    bad["wrong"] += 1
                    if len(shown) < 3:
                        shown.append(f"{case.written_spec.index_notation()} ({case.written_spec.flavor}) "
                                     f"on {case.lowering.plan.input_shape}: {problem}")
            print(f"{target:12s} {label:12s} specs={count} wrong={bad['wrong']} audit={bad['audit']} nodes={nodes}")
            for line in shown:
                print("    " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
