"""End to end, as a user runs it: convert random StridedSlice models, load the saved file in a
default runtime, compare with the framework itself.

    python scripts/shipped_corpus.py --cases 150 --seed 3 [--targets onnxruntime,portable,openvino]

Each case is a random spec of ``--flavor`` (oracles.random_case) in a one-node model (tf2onnx's
custom-op form for TF and TFLite, the OpenVINO domain's 0/1 mask lists for OpenVINO): the input
declared static or symbolic, each of begin/end/strides a graph input (a run-time value) with
probability ``--runtime-chance``.  The model is converted with ``onnx_slice_tools.convert(model,
target=T)`` (verification on, the defaults), saved, and the saved file is loaded with
``onnxruntime.InferenceSession(path)`` -- default session options, as users run it -- and, for the
portable and openvino targets, also compiled by OpenVINO's default CPU plugin.  It runs on the
case's input and index values and is compared with the flavour's framework (``tf.strided_slice``,
OpenVINO's StridedSlice, LiteRT): shape, dtype, bytes; where the framework raises, the runtime
must fail too.

The framework runs first, on all cases: LiteRT in a child process (``oracles.IsolatedTFLite``, one
batch; the index fields that are graph inputs are graph inputs of the .tflite model too), since its
kernel may crash the process on a spec whose result is undefined (a stride of 0): such a case counts
as "framework crashed" and nothing of ours is compared with it.  Where our reference calls the
framework's result undefined for the fed values (TFLite: an out-of-range shrink, an ``offset`` loop
that over- or under-writes its output; docs/semantics.md), the framework's output is whatever memory
held: counted as "framework undefined", not compared.  The saved models run in child processes too
(``oracles.Isolated``, batches of 100): OpenVINO can kill the process on a step of 0.

Prints per target: cases, verdicts, wrong outputs, wrong outputs the tool called "verified" (the
number that must be 0), conversions that failed although the framework runs the case's input, and
cases on which the framework crashed or is undefined.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # inherited by the child processes

from onnx_slice_tools.verification.oracles import (
    CRASHED, Isolated, IsolatedTFLite, RandomSource, openvino_strided_slice, our_outcome, random_case,
    tf_strided_slice)

TF_DOMAIN = "ai.onnx.converters.tensorflow"
MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


def build(x: np.ndarray, spec, runtime: list[str], symbolic: bool):
    """A one-StridedSlice model of ``spec`` on ``x``'s dtype; ``runtime`` fields are graph inputs."""
    from onnx import AttributeProto, TensorProto, helper
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    shape = [f"d{i}" for i in range(x.ndim)] if symbolic else list(x.shape)
    inputs = [helper.make_tensor_value_info("x", elem, shape)]
    inits, feeds = [], {"x": x}
    for field in ("begin", "end", "strides"):
        values = np.asarray(getattr(spec, field), np.int64)
        if field in runtime:
            inputs.append(helper.make_tensor_value_info(field, TensorProto.INT64, [len(values)]))
            feeds[field] = values
        else:
            inits.append(helper.make_tensor(field, TensorProto.INT64, [len(values)], values.tolist()))
    if spec.flavor == "openvino":  # 0/1 lists in the OpenVINO domain
        lengths = spec.mask_lengths or (spec.n,) * 5
        masks: dict = {m: spec.mask_list(m, k) for m, k in zip(MASKS, lengths)}
        domain = "org.openvinotoolkit"
    else:  # TF bit fields in tf2onnx's custom-op domain; TFLite adds its ``offset`` option
        masks = {m: int(getattr(spec, m)) - (2 ** 32 if getattr(spec, m) >= 2 ** 31 else 0) for m in MASKS}
        domain = TF_DOMAIN
        if spec.flavor == "tflite":
            masks["offset"] = int(spec.offset)
    node = helper.make_node("StridedSlice", ["x", "begin", "end", "strides"], ["y"], name="ss", domain=domain)
    for name, value in masks.items():  # typed explicitly: an OpenVINO mask list may be empty
        kind = AttributeProto.INTS if isinstance(value, list) else AttributeProto.INT
        node.attribute.append(helper.make_attribute(name, value, attr_type=kind))
    graph = helper.make_graph([node], "case", inputs, [helper.make_tensor_value_info("y", elem, None)],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(domain, 1)])
    model.ir_version = 8
    return model, feeds


def run_saved(path: Path, feeds: dict, runtime: str):
    """(ok, array or error line) of the saved file in ``runtime``'s default configuration."""
    try:
        if runtime == "onnxruntime":
            import onnxruntime as ort
            session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            names = {i.name for i in session.get_inputs()}
            return True, np.asarray(session.run(None, {k: v for k, v in feeds.items() if k in names})[0])
        import openvino as ov
        compiled = ov.Core().compile_model(str(path), "CPU")
        names = {n for p in compiled.inputs for n in p.get_names()}
        result = compiled({k: v for k, v in feeds.items() if k in names})
        return True, np.asarray(next(iter(result.values())))
    except Exception as exc:  # a run-time failure is an outcome
        return False, str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def framework(cases: list) -> list:
    """The flavour's own runtime on each ``(x, spec, runtime fields)``: TensorFlow, OpenVINO, or
    LiteRT in one isolated batch (a crash is an Outcome with the error ``CRASHED``)."""
    if cases and cases[0][1].flavor == "tflite":
        tflite = IsolatedTFLite()
        try:
            return tflite.many([(x, spec, tuple(runtime)) for x, spec, runtime in cases])
        finally:
            tflite.close()
    return [tf_strided_slice(x, spec, np.int64) if spec.flavor == "tf" else openvino_strided_slice(x, spec)
            for x, spec, _ in cases]


def wrong(expected, ok: bool, got) -> str | None:
    """What is wrong with the saved model's run (``ok``, array or error) against the framework's."""
    if not expected.ok:
        return None if not ok else f"runs ({np.shape(got)}) where the framework raises: {expected.error}"
    if not ok:
        return f"fails where the framework runs: {got}"
    if expected.values is None:  # the framework gave a shape only
        return None if tuple(got.shape) == tuple(expected.shape) else f"shape {got.shape} vs {expected.shape}"
    if got.shape != expected.values.shape:
        return f"shape {got.shape} vs {expected.values.shape}"
    if got.dtype != expected.values.dtype:
        return f"dtype {got.dtype} vs {expected.values.dtype}"
    if got.tobytes() != expected.values.tobytes():
        return "values differ"
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=150)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--targets", default="onnxruntime,portable,openvino")
    ap.add_argument("--flavor", default="tf", choices=["tf", "openvino", "tflite"])
    ap.add_argument("--runtime-chance", type=float, default=0.3)
    ap.add_argument("--max-rank", type=int, default=4)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    from onnx_slice_tools import convert
    targets = args.targets.split(",")
    src = RandomSource(random.Random(args.seed))
    counts = {t: Counter() for t in targets}

    def note(target: str, where: str, text: str) -> None:
        if args.verbose:
            print(f"{target}: {where}: {text}")

    drawn = []
    for _ in range(args.cases):
        x, spec = random_case(src, args.flavor, max_rank=args.max_rank)
        if x.dtype.kind in "SUO":
            continue
        runtime = [f for f in ("begin", "end", "strides") if src.chance(args.runtime_chance)]
        drawn.append((x, spec, runtime, src.chance(0.5)))
    outcomes = framework([(x, spec, runtime) for x, spec, runtime, _ in drawn])
    jobs: list = []  # (target, where, verdict, expected, runtime name, path, feeds)
    with tempfile.TemporaryDirectory() as tmp:
        for case, ((x, spec, runtime, symbolic), expected) in enumerate(zip(drawn, outcomes)):
            model, feeds = build(x, spec, runtime, symbolic=symbolic)
            where = f"{spec!r} on {x.shape}{' (symbolic)' if symbolic else ''} runtime={runtime}"
            ours = our_outcome(x, spec, runtime)
            undefined = not ours.ok and "undefined" in (ours.error or "")
            for target in targets:
                c = counts[target]
                c["cases"] += 1
                try:
                    result = convert(model, target=target)
                except Exception as exc:  # unusable input: counted, not a wrong output
                    c["refused (ModelError)" if type(exc).__name__ == "ModelError" else f"raised {type(exc).__name__}"] += 1
                    continue
                verdict = result.report.verdict
                c[f"verdict {verdict.split(' ')[0].split(':')[0]}"] += 1
                if expected.error == CRASHED:
                    c["framework crashed"] += 1
                    if not undefined:  # our reference gives a result where the framework dies
                        c["framework crashed where ours is defined"] += 1
                        note(target, where, "the framework crashed where our reference gives a result")
                    continue
                if undefined:
                    c["framework undefined"] += 1
                    continue
                if not result.ok:
                    if expected.ok:  # a conversion refused though the framework runs this input
                        refused = next((r.error_kind for r in result.report.records if r.error_kind), None)
                        c["failed where the framework runs" + (f" (refused: {refused})" if refused else "")] += 1
                        note(target, where, f"failed though the framework runs it: {result.report.problem()}")
                    continue
                path = Path(tmp) / f"{case}_{target}.onnx"
                result.save(path)
                for rt in ["onnxruntime"] + (["openvino"] if target in ("portable", "openvino") else []):
                    jobs.append((target, where, verdict, expected, rt, path, feeds))
        runner = Isolated(run_saved, (False, "the process died"))
        runs = [out for k in range(0, len(jobs), 100)
                for out in runner.many([(path, feeds, rt) for *_, rt, path, feeds in jobs[k:k + 100]])]
        runner.close()
    for (target, where, verdict, expected, rt, _, _), run in zip(jobs, runs):
        problem = wrong(expected, *run)
        if problem:
            counts[target][f"wrong in {rt}"] += 1
            if verdict.startswith("verified"):
                counts[target][f"wrong in {rt} but verified"] += 1
            note(f"{target} {rt}", where, f"{problem} [{verdict}]")
    for target in targets:
        print(target, dict(sorted(counts[target].items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
