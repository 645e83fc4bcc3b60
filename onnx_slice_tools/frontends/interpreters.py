"""Framework interpreters the product runs (the framework check of .tflite inputs).

Kept apart from verification/oracles.py (the test oracles, which use it too): product code
imports only this.
"""

from __future__ import annotations

import os


def tflite_interpreter(model: bytes):
    """LiteRT's interpreter (the ``ai-edge-litert`` package, TFLite's maintained runtime;
    ``tf.lite.Interpreter`` is deprecated and differs from it, e.g. it rejects 6-D input) with
    the builtin kernels only (no XNNPACK delegate: the reference semantics of each kernel)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from ai_edge_litert.interpreter import Interpreter, OpResolverType  # optional dependency
    return Interpreter(model_content=model,
                       experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
