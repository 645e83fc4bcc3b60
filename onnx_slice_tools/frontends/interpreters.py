"""Framework interpreters the product runs (the framework check of .tflite inputs).

Kept apart from verification/oracles.py (the test oracles): product code imports only this.
"""

from __future__ import annotations

import os


def _tensorflow():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf  # noqa: PLC0415 - optional dependency
    return tf


def tflite_interpreter(model: bytes):
    """TFLite's interpreter with the builtin kernels only (no XNNPACK delegate): TensorFlow's
    ``tf.lite.Interpreter`` (deprecated but present in TF 2.21), else the ``ai-edge-litert`` package."""
    import warnings
    tf = _tensorflow()
    lite = getattr(tf, "lite", None)
    if lite is not None and hasattr(lite, "Interpreter"):
        interpreter, resolver = lite.Interpreter, lite.experimental.OpResolverType
    else:  # pragma: no cover - TF releases without tf.lite
        from ai_edge_litert.interpreter import Interpreter as interpreter  # noqa: PLC0415, N813
        from ai_edge_litert.interpreter import OpResolverType as resolver  # noqa: PLC0415
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the deprecation notice of tf.lite.Interpreter
        return interpreter(model_content=model,
                           experimental_op_resolver_type=resolver.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
