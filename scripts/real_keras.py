"""Keras 3 corpus: every ``keras.applications`` architecture and the keras-hub backbones, built
offline with random weights at a small input size, saved as ``.keras`` and with ``model.export()``
(SavedModel); each form converted by onnx-slice-tools and by tf2onnx's own conversion as its users
run it, both compared with TensorFlow on the same random inputs under the product's rule.

    python -m venv --system-site-packages /tmp/khvenv
    /tmp/khvenv/bin/pip install --no-deps keras-hub kagglehub kagglesdk==0.1.28
    /tmp/khvenv/bin/pip install tokenizers sentencepiece
    PYTHONPATH=. /tmp/khvenv/bin/python scripts/real_keras.py [--models bert,ResNet50,...] [--all]
        [--cache /tmp/keras-corpus] [--reuse] [--json out.json]

Per model, in a child process (a crash or a hang costs one row):

* the model is built once and cached in ``--cache`` (``NAME.keras`` and ``NAME_sm/``);
* ours: ``api.convert`` (the product path: tf2onnx with StridedSlice kept,
  the rewrite, its checks, the framework check): exit status as ``convert`` gives it (0 verified
  or converted, 1 failed, 2 refused), the verdict, main-graph nodes;
* tf2onnx, SavedModel: ``python -m tf2onnx.convert --saved-model DIR --output X --opset 17`` in a
  subprocess (exit code, the ops its log names as not supported); ``.keras``: the same command
  with ``--keras FILE`` and, in process, ``tf2onnx.convert.from_keras(model, opset=17)`` on the
  loaded model (its error recorded: tf2onnx 1.17's API fails on Keras 3 models);
* both ONNX models against TensorFlow: ``sources.verify_against_source`` (3 random input sets from
  one seed, index inputs inside their tables; shape and dtype exact, floats under
  verification/tolerance.py).

``--reuse`` keeps the rows already in ``--cache/rows``.  Prints a Markdown table (docs/benchmarks.md
section 14).  keras-hub is optional: without it its models are reported as skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

TEXT = dict(vocabulary_size=64, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32)

#: keras.applications architectures, one per block design (a deeper sibling repeats the same
#: blocks more times; ``--all`` adds them) and the input side each accepts (Inception, Xception:
#: at least 71-75).
APPLICATIONS = {
    "Xception": 75, "VGG16": 32, "VGG19": 32, "ResNet50": 64, "ResNet50V2": 64, "InceptionV3": 75,
    "InceptionResNetV2": 75, "MobileNet": 64, "MobileNetV2": 64, "MobileNetV3Small": 64,
    "MobileNetV3Large": 64, "DenseNet121": 64, "NASNetMobile": 64, "EfficientNetB0": 64,
    "EfficientNetV2B0": 64, "EfficientNetV2S": 64, "ConvNeXtTiny": 64,
}
DEEPER = {
    "ResNet101": 64, "ResNet152": 64, "ResNet101V2": 64, "ResNet152V2": 64, "DenseNet169": 64,
    "DenseNet201": 64, "EfficientNetB1": 64, "EfficientNetB2": 64, "EfficientNetB3": 64, "EfficientNetB4": 64,
    "EfficientNetB5": 64, "EfficientNetB6": 64, "EfficientNetB7": 64, "EfficientNetV2B1": 64,
    "EfficientNetV2B2": 64, "EfficientNetV2B3": 64, "EfficientNetV2M": 64, "EfficientNetV2L": 64,
    "ConvNeXtSmall": 64, "ConvNeXtBase": 64, "ConvNeXtLarge": 64, "ConvNeXtXLarge": 64, "NASNetLarge": 64,
}


def _hub():
    import keras_hub  # optional
    return keras_hub.models


def _application(name: str, side: int):
    def build():
        import keras
        return getattr(keras.applications, name)(weights=None, input_shape=(side, side, 3), classes=10)
    return build


def builders(all_applications: bool = False) -> dict:
    text_no_heads = {k: v for k, v in TEXT.items() if k != "num_heads"}
    b = {
        "bert": lambda: _hub().BertBackbone(max_sequence_length=32, **TEXT),
        "distilbert": lambda: _hub().DistilBertBackbone(max_sequence_length=32, **TEXT),
        "roberta": lambda: _hub().RobertaBackbone(max_sequence_length=32, **TEXT),
        "albert": lambda: _hub().AlbertBackbone(embedding_dim=8, max_sequence_length=32, **TEXT),
        "electra": lambda: _hub().ElectraBackbone(vocab_size=64, embedding_dim=16, max_sequence_length=32,
                                                  **{k: v for k, v in TEXT.items() if k != "vocabulary_size"}),
        "gpt2": lambda: _hub().GPT2Backbone(max_sequence_length=32, **TEXT),
        "llama": lambda: _hub().LlamaBackbone(num_query_heads=2, num_key_value_heads=1, **text_no_heads),
        "mistral": lambda: _hub().MistralBackbone(num_query_heads=2, num_key_value_heads=1, **text_no_heads),
        "gemma": lambda: _hub().GemmaBackbone(vocabulary_size=64, num_layers=1, num_query_heads=2,
                                              num_key_value_heads=1, hidden_dim=16, intermediate_dim=32,
                                              head_dim=8),
        "vit": lambda: _hub().ViTBackbone(image_shape=(32, 32, 3), patch_size=8, num_layers=1, num_heads=2,
                                          hidden_dim=16, mlp_dim=32),
        # a csp stage splits its expansion in two halves and adds each dark block's output to
        # one: block_ratio must be expand_ratio / 2 (keras-hub's all-1.0 defaults do not build)
        "cspnet_darknet": lambda: _hub().CSPNetBackbone(
            stem_filters=16, stem_kernel_size=3, stem_strides=1, stem_padding="same", stackwise_depth=[1, 1],
            stackwise_strides=[2, 2], stackwise_num_filters=[32, 64], bottle_ratio=(0.5, 1.0),
            block_ratio=(1.0, 0.5), expand_ratio=(2.0, 1.0), down_growth=True, block_type="dark_block",
            stage_type="csp", image_shape=(32, 32, 3)),
        "cspnet_resnet": lambda: _hub().CSPNetBackbone(
            stem_filters=16, stem_kernel_size=7, stem_strides=4, stem_pooling="max", stackwise_depth=[1, 1],
            stackwise_strides=[1, 2], stackwise_num_filters=[32, 64], bottle_ratio=[0.5], block_ratio=[1.0],
            expand_ratio=[2.0], cross_linear=True, block_type="bottleneck_block", stage_type="csp",
            image_shape=(64, 64, 3)),
        "resnet_hub": lambda: _hub().ResNetBackbone(input_conv_filters=[64], input_conv_kernel_sizes=[3],
                                                    stackwise_num_filters=[64, 64], stackwise_num_blocks=[1, 1],
                                                    stackwise_num_strides=[1, 2], block_type="basic_block",
                                                    image_shape=(32, 32, 3)),
    }
    apps = {**APPLICATIONS, **(DEEPER if all_applications else {})}
    b.update({name: _application(name, side) for name, side in apps.items()})
    return b


def cached_forms(name: str, build, cache: Path) -> tuple[Path, Path]:
    """(``.keras`` file, SavedModel folder) of the model, built and saved once into ``cache``."""
    keras_file, saved = cache / f"{name}.keras", cache / f"{name}_sm"
    done = cache / f"{name}.done"
    if not done.exists():
        from onnx_slice_tools.frontends.sources import quiet_frameworks
        model = build()
        model.save(keras_file)
        with quiet_frameworks():
            model.export(saved)
        done.write_text("")
    return keras_file, saved


def _first_line(exc: BaseException) -> str:
    from onnx_slice_tools.frontends.sources import framework_error_line
    return f"{type(exc).__name__}: {framework_error_line(exc)}"[:200]


def _ordered_like(model, path, loaded) -> None:
    """Put tf2onnx's outputs in the order of ours (the signature's or model's keys, sorted) when
    its output names are those keys: the comparison pairs outputs by position."""
    keys = loaded[2] or []
    by_name = {o.name.split(":")[0]: o for o in model.graph.output}
    if keys and sorted(by_name) == sorted(keys) and len(by_name) == len(model.graph.output):
        outs = [by_name[k] for k in keys]
        del model.graph.output[:]
        model.graph.output.extend(outs)


def _judge(path, model, loaded) -> dict:
    """Nodes and the comparison of an ONNX model with TensorFlow."""
    from onnx_slice_tools.frontends.sources import verify_against_source
    side = {"nodes": len(model.graph.node)}
    try:
        check = verify_against_source(path, model, loaded=loaded)
        side["equal"] = check.ok
        side["compare"] = "; ".join(f"{k}: {v}" for k, v in check.outputs.items())[:300]
    except Exception as exc:  # onnxruntime cannot load or run it
        side["equal"], side["compare"] = False, f"cannot run: {_first_line(exc)}"
    return side


def tf2onnx_cli(path: Path, form: str, folder: Path, loaded) -> dict:
    """``python -m tf2onnx.convert --saved-model|--keras PATH --output X --opset 17`` as a user runs it."""
    import onnx
    out = folder / f"{form}.onnx"
    flag = "--saved-model" if form == "SavedModel" else "--keras"
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "tf2onnx.convert", flag, str(path), "--output", str(out),
                           "--opset", "17"], capture_output=True, text=True, timeout=900)
    side: dict = {"exit": proc.returncode, "seconds": round(time.perf_counter() - t, 1)}
    unsupported = sorted(set(re.findall(r"Tensorflow op \[.*?: (\w+)\] is not supported", proc.stderr)))
    if unsupported:
        side["unsupported"] = unsupported
    if proc.returncode != 0 or not out.exists():
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        errors = [k for k, ln in enumerate(lines) if re.match(r"\w+(Error|Exception): ", ln)]
        at = errors[-1] if errors else len(lines) - 1
        text = " ".join(lines[at:at + 2]) if "Exception encountered" in lines[at] else lines[at] if lines else ""
        side["error"] = (text or "no output")[:200]
        return side
    model = onnx.load(str(out))
    _ordered_like(model, path, loaded)
    side.update(_judge(path, model, loaded))
    return side


def tf2onnx_from_keras(path: Path, loaded) -> dict:
    """``tf2onnx.convert.from_keras(keras.models.load_model(path), opset=17)``."""
    import keras
    import tf2onnx

    from onnx_slice_tools.frontends.sources import quiet_frameworks
    with quiet_frameworks():
        try:
            model, _ = tf2onnx.convert.from_keras(keras.models.load_model(str(path), compile=False), opset=17)
        except Exception as exc:
            return {"error": _first_line(exc)}
    _ordered_like(model, path, loaded)
    return _judge(path, model, loaded)


def ours(path: Path) -> dict:
    """``api.convert`` with the exit status ``convert`` gives."""
    from onnx_slice_tools.api import convert
    from onnx_slice_tools.errors import ConversionError, ModelError, StridedSliceError
    t = time.perf_counter()
    try:
        result = convert(str(path))
        rep = result.report
        side = {"exit": 0 if rep.ok else 1, "verdict": rep.verdict, "nodes": len(result.model.graph.node),
                "framework": rep.model_checks.get("framework", "")[:300]}
        if not rep.ok:
            side["error"] = rep.problem()[:300]
    except (ModelError, StridedSliceError) as exc:
        side = {"exit": 2, "error": str(exc)[:300]}
    except ConversionError as exc:
        side = {"exit": 1, "error": str(exc)[:300]}
    side["seconds"] = round(time.perf_counter() - t, 1)
    return side


def one(name: str, cache: Path, all_applications: bool) -> list[dict]:
    """The rows (SavedModel, .keras) of one model (run in a child process)."""
    from onnx_slice_tools.frontends.sources import load_tf
    try:
        keras_file, saved = cached_forms(name, builders(all_applications)[name], cache)
    except ImportError as exc:
        return [{"model": name, "skipped": f"needs {exc.name}"}]
    except Exception as exc:  # a config the installed package cannot build
        return [{"model": name, "skipped": f"does not build: {_first_line(exc)}"}]
    rows = []
    with tempfile.TemporaryDirectory(prefix="real-keras-") as folder:
        for form, path in (("SavedModel", saved), (".keras", keras_file)):
            row: dict = {"model": name, "form": form, "ours": ours(path)}
            loaded = load_tf(path)
            row["tf2onnx"] = tf2onnx_cli(path, form, Path(folder), loaded)
            if form == ".keras":
                row["tf2onnx_api"] = tf2onnx_from_keras(path, loaded)
            rows.append(row)
    return rows


def _tf2onnx_cell(side: dict) -> str:
    if side.get("equal"):
        return "= TF"
    unsupported = f" ({', '.join(side['unsupported'])} not converted)" if side.get("unsupported") else ""
    if "equal" in side:
        compare = side["compare"]
        what = "not runnable" if compare.startswith("cannot run") else f"differs: {compare[:60]}"
        return f"exit {side.get('exit', 0)}, {what}{unsupported}"
    return f"exit {side.get('exit', 1)}: {_short(side.get('error', '?'))}{unsupported}"


def _short(error: str) -> str:
    """An error without Keras's wrapper sentence, ANSI codes and a repeated exception name."""
    error = re.sub(r"\x1b\[[0-9;]*m|Exception encountered when calling [\w.]+\(\)\. ?", "", error)
    return re.sub(r"^(\w+: )\1", r"\1", error)[:70]


def _ours_cell(side: dict) -> str:
    if side.get("exit") == 0 and side.get("verdict") == "verified":
        return "0, verified"
    return f"{side.get('exit', '?')}, {side.get('verdict') or side.get('error', '')}"[:110]


def _nodes(ours: dict, theirs: dict) -> str:
    return f"{ours.get('nodes', '-')} / {theirs.get('nodes', '-') if theirs.get('equal') else '-'}"


def table(rows: list[dict]) -> str:
    """One line per model: both forms, ours and tf2onnx's own conversions (nodes of tf2onnx's
    model only where it equals TensorFlow)."""
    lines = ["| model | SavedModel: ours | tf2onnx CLI | nodes ours / tf2onnx | .keras: ours | tf2onnx CLI `--keras` "
             "| `from_keras` | nodes ours / tf2onnx |", "|---|---|---|---:|---|---|---|---:|"]
    by_model: dict = {}
    for r in rows:
        by_model.setdefault(r["model"], {})[r.get("form", "skipped")] = r
    for name, forms in by_model.items():
        if "skipped" in forms:
            lines.append(f"| {name} | skipped: {forms['skipped']['skipped'][:150]} | | | | | | |")
            continue
        cells = [name]
        sm, kf = forms.get("SavedModel"), forms.get(".keras")
        if sm:
            cells += [_ours_cell(sm["ours"]), _tf2onnx_cell(sm["tf2onnx"]), _nodes(sm["ours"], sm["tf2onnx"])]
        if kf:
            api = kf.get("tf2onnx_api", {})
            best = kf["tf2onnx"] if kf["tf2onnx"].get("equal") else api
            cells += [_ours_cell(kf["ours"]), _tf2onnx_cell(kf["tf2onnx"]),
                      "= TF" if api.get("equal") else _short(api.get("error", "not runnable")), _nodes(kf["ours"], best)]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines)


def summary(rows: list[dict]) -> str:
    done = [r for r in rows if "skipped" not in r]
    def theirs(r):  # tf2onnx's own conversion equal to TensorFlow (CLI, else the Python API), or None
        return next((s for s in (r["tf2onnx"], r.get("tf2onnx_api", {})) if s.get("equal")), None)
    matches = [r for r in done if theirs(r)]
    good = [r for r in matches if r["ours"].get("exit") == 0 and r["ours"].get("verdict") == "verified"
            and r["ours"].get("nodes", 1 << 30) <= theirs(r)["nodes"]]
    ours_verified = [r for r in done if r["ours"].get("verdict") == "verified"]
    api = [r for r in done if "tf2onnx_api" in r]
    api_ok = [r for r in api if r["tf2onnx_api"].get("equal")]
    return (f"{len({r['model'] for r in done})} models built ({len(rows) - len(done)} skipped), "
            f"{len(done)} conversions (SavedModel + .keras); tf2onnx's own conversion = TF on {len(matches)}; "
            f"ours verified with <= nodes on {len(good)} of those {len(matches)}; ours verified on "
            f"{len(ours_verified)} of {len(done)}; tf2onnx.convert.from_keras = TF on {len(api_ok)} of {len(api)}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated subset")
    parser.add_argument("--all", action="store_true", help="also the deeper keras.applications siblings")
    parser.add_argument("--cache", default="/tmp/keras-corpus")
    parser.add_argument("--reuse", action="store_true", help="keep the rows already in --cache/rows")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    if args.one:
        print(json.dumps(one(args.one, cache, args.all)))
        return 0
    names = args.models.split(",") if args.models else list(builders(args.all))
    (cache / "rows").mkdir(exist_ok=True)
    rows: list[dict] = []
    for name in names:
        stored = cache / "rows" / f"{name}.json"
        if args.reuse and stored.exists():
            got = json.loads(stored.read_text())
        else:
            cmd = [sys.executable, __file__, "--one", name, "--cache", str(cache)] + (["--all"] if args.all else [])
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
                out = proc.stdout.strip().splitlines()
                got = json.loads(out[-1]) if proc.returncode == 0 and out else \
                    [{"model": name, "skipped": f"crashed (exit {proc.returncode}): "
                      f"{(proc.stderr.strip().splitlines() or [''])[-1][:150]}"}]
            except subprocess.TimeoutExpired:
                got = [{"model": name, "skipped": f"timeout {args.timeout:.0f} s"}]
            stored.write_text(json.dumps(got))
        rows += got
        for r in got:
            print(json.dumps(r), file=sys.stderr, flush=True)
    print(table(rows))
    print()
    print(summary(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
