"""Random-corpus check of a target's lowering on every runtime (onnxruntime, OpenVINO, onnx reference).

    python scripts/target_corpus.py --target portable --cases 2000 --seed 1

Random specs of the three flavours (TF, OpenVINO, TFLite; oracles.random_case) on static,
symbolic and unknown-rank inputs, a fifth of them with runtime begin/end/strides; each lowering is checked by
verification/lowerings.py's per-rewrite checks (shape, dtype, bytes against the flavour's reference, several
sizes and index values) on each runtime, and the check model is audited for the target's
forbidden constructs (targets.find_violations).  Runtime values the framework rejects are
must-fail runs (onnxruntime and onnx's reference must fail; OpenVINO raises no run-time error).
``--frameworks N`` also compares N static specs with TensorFlow / OpenVINO themselves.
Prints the counts.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from onnx_slice_tools.lowering.lower import lower
from onnx_slice_tools.verification.oracles import RandomSource, random_lowering_input, target_against_framework
from onnx_slice_tools.verification.runtimes import parse_runtimes
from onnx_slice_tools.verification.lowerings import CheckRun, check_on_runtimes
from onnx_slice_tools.lowering.targets import find_violations, get_target
from onnx_slice_tools.verification.lowerings import CheckCase, build_model

FLAVORS = ("tf", "openvino", "tflite")
#: Compared with the framework itself: TFLite's interpreter reads outside the input (and can crash
#: the process) on out-of-range specs its own tests avoid; tests/test_tflite.py compares it.
FRAMEWORK_FLAVORS = ("tf", "openvino")


def static_zero(plan) -> bool:
    """A zero-size dim known at conversion time: declared, or an axis the spec empties."""
    return 0 in (plan.input_shape or ()) or any(a.size == 0 for a in plan.axes)


def corpus_cases(n: int, seed: int, target, flavors=FLAVORS, opset: int = 17) -> tuple[list, Counter]:
    """``n`` random check cases lowered for ``target``, and what kinds they are."""
    src = RandomSource(random.Random(seed))
    cases, kinds = [], Counter()
    while len(cases) < n:
        drawn = random_lowering_input(src, src.choice(flavors), runtime_chance=0.2)
        if drawn is None:
            continue
        mode, plan, fields = drawn
        spec = plan.spec
        dtype = src.choice(["int32", "int64"])
        cases.append(CheckCase(lower(plan, opset, {f: dtype for f in fields}, target=target), np.dtype(np.float32), 1,
                               index_types={f: dtype for f in fields}))
        kinds[mode] += 1
        kinds["runtime indices" if fields else "constant indices"] += 1
        kinds[(plan.source or spec).flavor] += 1
        kinds["zero dim known + runtime indices"] += bool(fields and static_zero(plan))
    return cases, kinds


def against_frameworks(n: int, seed: int, target, runtimes) -> tuple[int, Counter, list]:
    """``n`` static specs (static or symbolic input) whose lowering for ``target``, run in each
    runtime, is compared with TensorFlow / OpenVINO themselves
    (oracles.target_against_framework): (compared, mismatches per runtime, first problems)."""
    src = RandomSource(random.Random(seed + 1))
    compared, bad, shown = 0, Counter(), []
    while compared < n:
        problems = target_against_framework(src, src.choice(FRAMEWORK_FLAVORS), target, runtimes)
        if problems is None:
            continue
        compared += 1
        for name, problem in problems.items():
            if problem:
                bad[name] += 1
                if len(shown) < 5:
                    shown.append(f"{name}: {problem}")
    return compared, bad, shown


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="portable")
    ap.add_argument("--cases", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runtimes", default=None, help="default: the target's")
    ap.add_argument("--chunk", type=int, default=250, help="cases per check model")
    ap.add_argument("--frameworks", type=int, default=0,
                    help="also compare this many static specs with TensorFlow / OpenVINO themselves")
    args = ap.parse_args(argv)
    target = get_target(args.target)
    runtimes = parse_runtimes(args.runtimes) if args.runtimes else target.verify_on
    t0 = time.perf_counter()
    cases, kinds = corpus_cases(args.cases, args.seed, target)
    violations = 0
    for i in range(0, len(cases), args.chunk):
        chunk = cases[i:i + args.chunk]
        violations += len(find_violations(build_model(chunk, 17), target))
        check_on_runtimes(chunk, CheckRun(17, tuple(runtimes), seed=args.seed))
        print(f"  {i + len(chunk)}/{len(cases)} checked", flush=True)
    failed, errors = Counter(), Counter()
    shown = 0
    for c in cases:
        statuses = {"shape_inference": c.result.shape_inference, "onnxruntime": c.result.onnxruntime,
                    **c.result.runtimes}
        bad = {k: v for k, v in statuses.items() if not (v == "passed" or v.startswith("skipped"))}
        for k in bad:
            failed[k] += 1
        for k, v in c.result.run_time_errors_on.items():
            errors[f"{k} {v.split(':')[0]}"] += 1
        if bad and shown < 10:
            shown += 1
            print(f"FAIL {c.lowering.plan.spec.index_notation()} on {c.lowering.plan.input_shape}: {bad}")
    nodes = sum(op.op_type != "Identity" for c in cases for op in c.lowering.ops)
    print(f"target {target.name}: {len(cases)} cases ({', '.join(f'{v} {k}' for k, v in sorted(kinds.items()))}), "
          f"seed {args.seed}, runtimes {','.join(runtimes)}")
    print(f"  failures: {dict(failed) or 0}; must-fail runs (cases with rejected runtime values): "
          f"{dict(errors) or 0}; forbidden constructs in the output: {violations}; "
          f"nodes: {nodes} ({nodes / max(len(cases), 1):.2f} per spec); {time.perf_counter() - t0:.1f} s")
    mismatches = Counter()
    if args.frameworks:
        t1 = time.perf_counter()
        compared, mismatches, problems = against_frameworks(args.frameworks, args.seed, target, runtimes)
        for line in problems:
            print(f"FRAMEWORK MISMATCH {line}")
        print(f"  against the frameworks themselves: {compared} static specs, mismatches {dict(mismatches) or 0}; "
              f"{time.perf_counter() - t1:.1f} s")
    return 1 if failed or violations or mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
