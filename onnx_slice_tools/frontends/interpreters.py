"""Framework interpreters the product runs (the framework check of .tflite inputs).

Kept apart from verification/oracles.py (the test oracles, which use it too): product code
imports only this.
"""

from __future__ import annotations

import os


def tflite_interpreter(model: bytes, *, xnnpack: bool = False):
    """LiteRT's interpreter (the ``ai-edge-litert`` package, TFLite's maintained runtime;
    ``tf.lite.Interpreter`` is deprecated and differs from it, e.g. it rejects 6-D input) with
    the builtin kernels only (no XNNPACK delegate: the reference semantics of each kernel).
    ``xnnpack``: LiteRT's default configuration instead (the XNNPACK delegate takes the ops it
    supports, one thread): the framework's second kernel set, whose disagreement with the
    builtin kernels calibrates the comparison of quantized outputs (verification/tolerance.py)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from ai_edge_litert.interpreter import Interpreter, OpResolverType  # optional dependency
    if xnnpack:
        return Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.AUTO, num_threads=1)
    return Interpreter(model_content=model,
                       experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
