"""keras-hub causal LMs' cached decode step (KV-cache writes: XlaDynamicUpdateSlice /
DYNAMIC_UPDATE_SLICE) through onnx-slice-tools, tf2onnx and OpenVINO, and greedy generation in
onnxruntime against keras-hub's own ``call_with_cache`` loop in TensorFlow.

    pip install "onnx-slice-tools[llm]"      # keras-hub (or: pip install --no-deps keras-hub
                                             # tokenizers kagglehub kagglesdk regex)
    PYTHONPATH=. python scripts/real_llm_decode.py [--models GPT2,Llama] [--json out.json]

Per model (tiny config, random weights, batch 1, cache length ``LENGTH``):

* the decode step ``call_with_cache(token_ids [1, 1], cache, index)`` as a SavedModel
  (outputs ``logits``, ``new_cache``) and as a ``.tflite`` of the same function with its variables
  frozen first (``convert_variables_to_constants_v2``: ``from_saved_model`` keeps VAR_HANDLE ops);
* ours: ``onnx_slice_tools.convert`` with ``--input-range index:0,LENGTH-1`` and the token
  ids inside the vocabulary (the framework check's draws; SavedModel and .tflite), its verdict,
  main-graph nodes (and those of the cache writes after cleanup), time;
  the forward pass (the backbone on [1, LENGTH] tokens) converted the same way, for the time ratio;
* tf2onnx's command line and OpenVINO's ``convert_model`` on the SavedModel: did they produce a
  model onnxruntime / OpenVINO can run;
* positions 0, middle and last: our ONNX in onnxruntime (default session) against TensorFlow /
  LiteRT under the product's tolerance rule; position LENGTH: accepted or rejected by both alike;
* greedy generation of ``STEPS`` tokens from token 1: the ONNX step in onnxruntime against the
  TensorFlow step, each feeding back its own cache; a step whose top two logits are within the
  float tolerance of each other is reported as a near tie, never counted silently;
* ``--cli-export``: instead, tf2onnx's command-line export of the SavedModel (its raw
  ``XlaDynamicUpdateSlice`` left in a file onnxruntime refuses) converted by ours as an ``.onnx``
  input (nodes, cache-write nodes, time), positions and greedy generation against TensorFlow;
* ``--loop``: the greedy loop exported whole (``tf.while_loop``: an ONNX ``Loop`` whose body holds
  the cache writes) converted, and its tokens in onnxruntime against TensorFlow.

Prints a Markdown table (docs/benchmarks.md, "Slice updates: keras-hub decode steps").
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np

MODELS = ["GPT2", "OPT", "Llama", "Mistral", "Phi3", "Qwen", "Qwen3", "GPTNeoX", "Gemma", "Falcon", "Bloom"]
VOCAB, LENGTH, STEPS = 64, 32, 16
CONFIG = dict(vocabulary_size=VOCAB, num_layers=2, num_heads=2, num_query_heads=2, num_key_value_heads=1,
              num_attention_heads=2, hidden_dim=16, intermediate_dim=32, head_dim=8, max_sequence_length=LENGTH)


def build(name: str):
    """The keras-hub causal LM ``name`` from a tiny config (random weights, no preprocessor)."""
    import keras_hub
    backbone_cls = getattr(keras_hub.models, f"{name}Backbone")
    params = inspect.signature(backbone_cls.__init__).parameters
    kwargs = {k: v for k, v in CONFIG.items() if k in params}
    backbone = backbone_cls(**kwargs)
    return getattr(keras_hub.models, f"{name}CausalLM")(backbone=backbone, preprocessor=None)


def decode_step(lm):
    """(tf.function step(token_ids, cache, index) -> {logits, new_cache}, the empty cache)."""
    import tensorflow as tf
    cache = lm._build_cache(tf.zeros([1, LENGTH], tf.int32))[-1]
    spec = [tf.TensorSpec([1, 1], tf.int32, name="token_ids"), tf.TensorSpec(cache.shape, cache.dtype, name="cache"),
            tf.TensorSpec([], tf.int32, name="index")]

    @tf.function(input_signature=spec)
    def step(token_ids, cache, index):
        out = lm.call_with_cache(token_ids, cache, index)
        return {"logits": out[0], "new_cache": out[-1]}
    return step, np.zeros(cache.shape, cache.dtype.as_numpy_dtype)


def save(lm, step, folder: Path) -> tuple[Path, Path, Path]:
    """The decode step as a SavedModel and a frozen .tflite; the forward pass as a SavedModel."""
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2
    module = tf.Module()
    module.lm, module.step = lm, step
    saved = folder / "step_sm"
    tf.saved_model.save(module, str(saved), signatures={"serving_default": step})
    frozen = convert_variables_to_constants_v2(step.get_concrete_function())
    tflite = folder / "step.tflite"
    tflite.write_bytes(tf.lite.TFLiteConverter.from_concrete_functions([frozen]).convert())
    forward = tf.Module()
    forward.lm = lm
    forward.serve = tf.function(lambda token_ids: {"logits": lm({"token_ids": token_ids,
                                                                "padding_mask": tf.ones_like(token_ids)})},
                                input_signature=[tf.TensorSpec([1, LENGTH], tf.int32, name="token_ids")])
    fwd = folder / "forward_sm"
    tf.saved_model.save(forward, str(fwd), signatures={"serving_default": forward.serve})
    return saved, tflite, fwd


def ours(path: Path, out: Path, ranges: dict | None = None) -> dict:
    from onnx_slice_tools import convert
    if ranges is None:
        ranges = {"index": (0, LENGTH - 1), "token_ids": (0, VOCAB - 1)}
    start = time.perf_counter()
    try:
        result = convert(path, input_ranges=ranges)
        result.save(out)
    except Exception as exc:  # the row says what went wrong
        return {"ok": False, "verdict": str(exc).splitlines()[0][:160], "seconds": time.perf_counter() - start}
    import re

    import onnx
    graph = onnx.load(str(out), load_external_data=False).graph
    nodes = len(graph.node)
    # the KV-cache writes' nodes after the cleanup (rewrite/updates.py names them OUTPUT__OpN)
    pattern = re.compile(r"DynamicUpdateSlice[^/]*__[A-Za-z]+\d+$")
    cache_nodes = sum(bool(pattern.search(n.name)) for n in graph.node)
    from onnx_slice_tools.verification.status import kind
    rep = result.report
    slices = sum(kind(s) == "passed" for s in rep.record_inplace.values())
    updates = sum(kind(s) == "passed" for s in rep.update_inplace.values())
    inplace = f"{updates}/{len(rep.updates)} update rewrites, {slices}/{rep.rewritten} StridedSlice rewrites in place"
    return {"ok": result.report.ok, "verdict": result.report.verdict, "nodes": nodes, "cache_write_nodes": cache_nodes,
            "inplace": inplace, "model_run": rep.model_checks.get("model_run"),
            "framework": result.report.model_checks.get("framework"),
            "updates": result.report.model_checks.get("slice_updates"), "seconds": time.perf_counter() - start}


def tf2onnx_cli(saved: Path, out: Path) -> str:
    run = subprocess.run([sys.executable, "-m", "tf2onnx.convert", "--saved-model", str(saved), "--output", str(out),
                          "--opset", "17"], capture_output=True, text=True, timeout=900)
    if run.returncode or not out.exists():
        return f"exit {run.returncode}"
    try:
        import onnxruntime as ort
        ort.InferenceSession(str(out))
        return "runs"
    except Exception as exc:
        return f"exit 0, onnxruntime refuses ({str(exc).split(':')[2].strip()[:40] if ':' in str(exc) else 'error'})"


def openvino(saved: Path) -> str:
    try:
        import openvino as ov
        ov.convert_model(str(saved))
        return "converts"
    except Exception as exc:
        text = str(exc)
        return "no conversion rule" if "No conversion rule" in text or "No translator" in text else text.splitlines()[0][:60]


def _by_shape(outputs: list, cache_shape) -> tuple:
    """(logits, new_cache) of a step's outputs, told apart by shape (the .tflite's are unnamed)."""
    cache = next(o for o in outputs if tuple(o.shape) == tuple(cache_shape))
    logits = next(o for o in outputs if o is not cache)
    return logits, cache


def tf_runner(step):
    def run(tok, cache, index):
        out = step(token_ids=tok, cache=cache, index=np.int32(index))
        return out["logits"].numpy(), out["new_cache"].numpy()
    return run


def litert_runner(path: Path):
    from onnx_slice_tools.verification.runtimes import tflite_interpreter
    interp = tflite_interpreter(path.read_bytes())
    interp.allocate_tensors()
    inputs = {d["name"]: d["index"] for d in interp.get_input_details()}

    def run(tok, cache, index):
        interp.set_tensor(inputs["token_ids"], tok)
        interp.set_tensor(inputs["cache"], cache)
        interp.set_tensor(inputs["index"], np.array(index, np.int32))
        interp.invoke()
        return _by_shape([np.array(interp.get_tensor(d["index"])) for d in interp.get_output_details()], cache.shape)
    return run


def ort_runner(path: Path):
    import onnxruntime as ort
    session = ort.InferenceSession(str(path))  # the default configuration, as users run it

    def run(tok, cache, index):
        return _by_shape(session.run(None, {"token_ids": tok, "cache": cache, "index": np.array(index, np.int32)}),
                         cache.shape)
    return run


def positions(reference, converted, empty_cache) -> str:
    """Positions 0, middle, last: the converted step in onnxruntime against the framework
    (tolerance rule); position LENGTH: both reject, or both accept and agree."""
    from onnx_slice_tools.verification.tolerance import agree
    rng = np.random.default_rng(0)
    cache = rng.standard_normal(empty_cache.shape).astype(empty_cache.dtype)
    tok = np.array([[7]], np.int32)
    notes = []
    for pos in (0, LENGTH // 2, LENGTH - 1, LENGTH):
        outs = []
        for run in (reference, converted):
            try:
                outs.append(run(tok, cache, pos))
            except Exception:
                outs.append(None)
        ref, got = outs
        if ref is None or got is None:
            notes.append(f"{pos}: {'both reject' if ref is None and got is None else 'ACCEPT/REJECT DIFFER'}")
            continue
        verdicts = [agree(r, g) for r, g in zip(ref, got)]
        notes.append(f"{pos}: {'ok' if all(v.ok for v in verdicts) else 'DIFFERS'}")
    return ", ".join(notes)


def generate(reference, converted, empty_cache) -> str:
    """Greedy STEPS tokens from token 1 with the framework's step and with the converted one, each
    feeding back its own cache; near ties (top two logits within the tolerance) are counted."""
    from onnx_slice_tools.verification.tolerance import default_rtol
    tokens: list[list[int]] = [[], []]
    ties = 0
    for k, run in enumerate((reference, converted)):
        cache, tok = empty_cache, np.array([[1]], np.int32)
        for i in range(STEPS):
            logits, cache = run(tok, cache, i)
            top = np.sort(logits[0, -1])[-2:]
            if top[1] - top[0] <= default_rtol(logits.dtype) * max(abs(float(top[1])), 1e-30):
                ties += 1
            tok = np.array([[int(np.argmax(logits[0, -1]))]], np.int32)
            tokens[k].append(int(tok[0, 0]))
    same = tokens[0] == tokens[1]
    return f"{'identical' if same else 'DIFFERENT'} ({STEPS} tokens{f', {ties} near ties' if ties else ''})"


def whole_loop(lm, folder: Path) -> str:
    """Greedy generation exported whole: ``tf.while_loop`` around ``call_with_cache`` (an ONNX
    ``Loop`` holding the cache writes); ours converted (its verdict) and its 16 tokens in
    onnxruntime against the loop in TensorFlow."""
    import onnxruntime as ort
    import tensorflow as tf
    cache0 = lm._build_cache(tf.zeros([1, LENGTH], tf.int32))[-1]

    @tf.function(input_signature=[tf.TensorSpec([1, 1], tf.int32, name="first"),
                                  tf.TensorSpec([], tf.int32, name="steps")])
    def generate(first, steps):
        def body(i, tok, cache, out):
            logits, _, cache = lm.call_with_cache(tok, cache, i)
            nxt = tf.cast(tf.argmax(logits[:, -1], axis=-1), tf.int32)[:, None]
            return i + 1, nxt, cache, out.write(i, nxt[0, 0])
        state = [tf.constant(0), first, tf.zeros_like(cache0), tf.TensorArray(tf.int32, size=0, dynamic_size=True)]
        _, _, _, out = tf.while_loop(lambda i, *_: i < steps, body, state)
        return {"tokens": out.stack()}

    module = tf.Module()
    module.lm, module.generate = lm, generate
    saved = folder / "loop_sm"
    tf.saved_model.save(module, str(saved), signatures={"serving_default": generate})
    got = ours(saved, folder / "loop.onnx", ranges={"first": (0, VOCAB - 1), "steps": (1, STEPS)})
    if not got["ok"]:
        return got["verdict"][:60]
    session = ort.InferenceSession(str(folder / "loop.onnx"))
    a = session.run(None, {"first": np.array([[1]], np.int32), "steps": np.array(STEPS, np.int32)})[0]
    b = generate(tf.constant([[1]]), tf.constant(STEPS))["tokens"].numpy()
    return (f"{got['verdict'][:20]}, {got['seconds']:.0f} s, {got['inplace']}, "
            f"tokens {'identical' if a.tolist() == b.tolist() else 'DIFFERENT'}")


def row(name: str, folder: Path, loop: bool = False, loop_only: bool = False) -> dict:
    lm = build(name)
    if loop_only:
        return {"model": name, "whole_loop": whole_loop(lm, folder)}
    step, empty_cache = decode_step(lm)
    saved, tflite, fwd = save(lm, step, folder)
    r: dict = {"model": name}
    r["ours_sm"] = ours(saved, folder / "step.onnx")
    r["ours_tflite"] = ours(tflite, folder / "step_tflite.onnx")
    r["ours_forward"] = ours(fwd, folder / "forward.onnx", ranges={"token_ids": (0, VOCAB - 1)})
    r["tf2onnx"] = tf2onnx_cli(saved, folder / "tf2onnx.onnx")
    r["openvino"] = openvino(saved)
    if r["ours_sm"]["ok"]:
        reference, converted = tf_runner(step), ort_runner(folder / "step.onnx")
        r["positions"] = positions(reference, converted, empty_cache)
        r["generation"] = generate(reference, converted, empty_cache)
    if r["ours_tflite"]["ok"]:
        reference, converted = litert_runner(tflite), ort_runner(folder / "step_tflite.onnx")
        r["positions_tflite"] = positions(reference, converted, empty_cache)
        r["generation_tflite"] = generate(reference, converted, empty_cache)
    if loop:
        r["whole_loop"] = whole_loop(lm, folder)
    return r


def cli_row(name: str, folder: Path) -> dict:
    """``--cli-export``: the decode step's SavedModel through tf2onnx's command line, then ours on
    the ``.onnx`` it wrote (no framework check: an ``.onnx`` input), against TensorFlow."""
    lm = build(name)
    step, empty_cache = decode_step(lm)
    saved, _, _ = save(lm, step, folder)
    r: dict = {"model": name, "tf2onnx": tf2onnx_cli(saved, folder / "tf2onnx.onnx")}
    r["ours"] = ours(folder / "tf2onnx.onnx", folder / "ours.onnx", ranges={})
    if r["ours"]["ok"]:
        reference, converted = tf_runner(step), ort_runner(folder / "ours.onnx")
        r["positions"] = positions(reference, converted, empty_cache)
        r["generation"] = generate(reference, converted, empty_cache)
    return r


def cli_table(rows: list) -> str:
    lines = ["| model | tf2onnx CLI | ours on its .onnx | nodes (cache writes) | s | positions 0/mid/last/out | "
             "greedy 16 |", "|" + "---|" * 7]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | error: {r['error']} |" + " |" * 5)
            continue
        o = r["ours"]
        lines.append(f"| {r['model']} | {r['tf2onnx']} | {o['verdict'][:40]} | {o.get('nodes', '-')} "
                     f"({o.get('cache_write_nodes', '-')}) | {o['seconds']:.1f} | {r.get('positions', '-')} | "
                     f"{r.get('generation', '-')} |")
    return "\n".join(lines)


def table(rows: list) -> str:
    lines = ["| model | ours SavedModel | nodes (cache writes) | s | ours .tflite | nodes (cache writes) | forward s | "
             "tf2onnx | OpenVINO | positions 0/mid/last/out (TF; LiteRT) | greedy 16 (TF; LiteRT) | whole loop |",
             "|" + "---|" * 12]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | error: {r['error']} |" + " |" * 11)
            continue
        sm, tl, fw = r["ours_sm"], r["ours_tflite"], r["ours_forward"]
        lines.append(f"| {r['model']} | {sm['verdict'][:40]} | "
                     f"{sm.get('nodes', '-')} ({sm.get('cache_write_nodes', '-')}) | "
                     f"{sm['seconds']:.1f} | {tl['verdict'][:40]} | "
                     f"{tl.get('nodes', '-')} ({tl.get('cache_write_nodes', '-')}) | "
                     f"{fw['seconds']:.1f} | {r['tf2onnx']} | "
                     f"{r['openvino']} | {r.get('positions', '-')}; {r.get('positions_tflite', '-')} | "
                     f"{r.get('generation', '-')}; {r.get('generation_tflite', '-')} | {r.get('whole_loop', '-')} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--json")
    ap.add_argument("--loop", action="store_true", help="also greedy generation exported whole (tf.while_loop)")
    ap.add_argument("--loop-only", action="store_true", help="only the whole loop (prints its rows as JSON)")
    ap.add_argument("--cli-export", action="store_true",
                    help="only tf2onnx's command-line export converted by ours as an .onnx input")
    args = ap.parse_args(argv)
    rows = []
    for name in args.models.split(","):
        with tempfile.TemporaryDirectory(prefix=f"llm-{name}-") as folder:
            try:
                rows.append(cli_row(name, Path(folder)) if args.cli_export else
                            row(name, Path(folder), args.loop, args.loop_only))
            except Exception as exc:  # one model's failure is one row
                rows.append({"model": name, "error": str(exc).splitlines()[0][:120]})
        print(json.dumps(rows[-1], default=str), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2, default=str))
    if args.cli_export:
        print(cli_table(rows))
    elif not args.loop_only:
        print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
