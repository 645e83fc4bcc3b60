"""Keras 3 corpus: architectures shipped by keras-hub and keras.applications, built offline
with small configs and random weights, saved both as ``.keras`` and with ``model.export()``
(SavedModel); each converted by onnx-slice-tools (``convert_source``: the product path) and by
tf2onnx's own conversion of the same TensorFlow function; both compared with TensorFlow by the
framework check (random inputs, index inputs inside their tables, the product's tolerance).

    python -m venv --system-site-packages /tmp/khvenv
    /tmp/khvenv/bin/pip install --no-deps keras-hub kagglehub kagglesdk==0.1.28
    /tmp/khvenv/bin/pip install tokenizers sentencepiece
    PYTHONPATH=. /tmp/khvenv/bin/python scripts/real_keras.py [--models bert,gpt2,...] [--json out.json]

keras-hub is optional: without it only the keras.applications models run.  Columns: ours
(framework check status), tf2onnx (its model against TensorFlow), node counts (main graph)
of both, and our exit class (ok / refused with the one-line message).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

TEXT = dict(vocabulary_size=64, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32)


def _hub():
    import keras_hub  # optional
    return keras_hub.models


def _builders():
    import keras
    b = {
        "bert": lambda: _hub().BertBackbone(max_sequence_length=32, **TEXT),
        "distilbert": lambda: _hub().DistilBertBackbone(max_sequence_length=32, **TEXT),
        "roberta": lambda: _hub().RobertaBackbone(max_sequence_length=32, **TEXT),
        "albert": lambda: _hub().AlbertBackbone(embedding_dim=8, max_sequence_length=32, **TEXT),
        "electra": lambda: _hub().ElectraBackbone(vocab_size=64, embedding_dim=16, max_sequence_length=32,
                                                  **{k: v for k, v in TEXT.items() if k != "vocabulary_size"}),
        "gpt2": lambda: _hub().GPT2Backbone(max_sequence_length=32, **TEXT),
        "llama": lambda: _hub().LlamaBackbone(num_query_heads=2, num_key_value_heads=1, **{
            k: v for k, v in TEXT.items() if k != "num_heads"}),
        "mistral": lambda: _hub().MistralBackbone(num_query_heads=2, num_key_value_heads=1, **{
            k: v for k, v in TEXT.items() if k != "num_heads"}),
        "gemma": lambda: _hub().GemmaBackbone(vocabulary_size=64, num_layers=1, num_query_heads=2,
                                              num_key_value_heads=1, hidden_dim=16, intermediate_dim=32,
                                              head_dim=8),
        "vit": lambda: _hub().ViTBackbone(image_shape=(32, 32, 3), patch_size=8, num_layers=1, num_heads=2,
                                          hidden_dim=16, mlp_dim=32),
        "cspnet_yolo": lambda: _hub().CSPNetBackbone(stem_filters=16, stem_kernel_size=3, stem_strides=1,
                                                     stackwise_depth=[1, 1], stackwise_strides=2,
                                                     stackwise_num_filters=[32, 64], block_type="dark_block", stage_type="csp",
                                                     image_shape=(32, 32, 3)),
        "resnet_hub": lambda: _hub().ResNetBackbone(input_conv_filters=[64], input_conv_kernel_sizes=[3],
                                                    stackwise_num_filters=[64, 64], stackwise_num_blocks=[1, 1],
                                                    stackwise_num_strides=[1, 2], block_type="basic_block",
                                                    image_shape=(32, 32, 3)),
        "mobilenetv3": lambda: keras.applications.MobileNetV3Small(weights=None, input_shape=(64, 64, 3),
                                                                   include_top=False),
        "efficientnetb0": lambda: keras.applications.EfficientNetB0(weights=None, input_shape=(64, 64, 3),
                                                                    include_top=False),
        "resnet50": lambda: keras.applications.ResNet50(weights=None, input_shape=(64, 64, 3), include_top=False),
        "convnext_tiny": lambda: keras.applications.ConvNeXtTiny(weights=None, input_shape=(64, 64, 3),
                                                                 include_top=False),
    }
    return b


def _tf2onnx_status(path):
    """(status against TensorFlow, node count) of tf2onnx's own conversion of the same function."""
    from onnx_slice_tools.frontends import sources
    from onnx_slice_tools.frontends.tfexport import export
    try:
        with sources.quiet_frameworks():
            fn, sig, keys = sources.load_tf(path)
            model = export(fn, sig, keep_strided_slice=False, large_variable_bytes=None)
        nodes = len(model.graph.node)
    except Exception as exc:
        return f"export failed: {sources.framework_error_line(exc)[:80]}", None
    try:
        check = sources.verify_against_source(path, model)
        status = "= TF" if check.ok else "differs: " + ", ".join(v for v in check.outputs.values())[:80]
    except Exception as exc:
        status = f"did not run: {sources.framework_error_line(exc)[:80]}"
    return status, nodes


def _ours(path):
    from onnx_slice_tools.errors import ModelError
    from onnx_slice_tools.frontends import sources
    start = time.perf_counter()
    try:
        result = sources.convert_source(path)
    except ModelError as exc:
        return f"exit 2: {exc.reason[:90]}", None, time.perf_counter() - start
    framework = result.report.model_checks.get("framework", "")
    status = ("verified" if result.ok and framework.startswith("passed") else
              f"NOT verified: {framework[:90]}")
    return status, len(result.model.graph.node), time.perf_counter() - start


def measure(name, build, folder: Path) -> list[dict]:
    model = build()
    rows = []
    keras_file, saved = folder / f"{name}.keras", folder / f"{name}_sm"
    model.save(keras_file)
    from onnx_slice_tools.frontends.sources import quiet_frameworks
    with quiet_frameworks():
        model.export(saved)
    for form, path in (("SavedModel", saved), (".keras", keras_file)):
        ours, ours_nodes, secs = _ours(path)
        theirs, their_nodes = _tf2onnx_status(path)
        rows.append(dict(model=name, form=form, ours=ours, ours_nodes=ours_nodes, tf2onnx=theirs,
                         tf2onnx_nodes=their_nodes, seconds=round(secs, 1)))
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated subset")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    builders = _builders()
    names = args.models.split(",") if args.models else list(builders)
    rows = []
    with tempfile.TemporaryDirectory(prefix="real-keras-") as folder:
        for name in names:
            try:
                rows += measure(name, builders[name], Path(folder))
            except ImportError as exc:
                print(json.dumps(dict(model=name, skipped=f"needs {exc.name}")), flush=True)
            except Exception as exc:  # a model the installed package cannot build
                print(json.dumps(dict(model=name, skipped=f"{type(exc).__name__}: {str(exc)[:100]}")), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
