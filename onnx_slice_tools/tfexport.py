"""Export TensorFlow functions to ONNX with tf2onnx, StridedSlice kept as a custom node.

Needs the ``oracles`` extra (tensorflow-cpu, tf2onnx).  Used by the tests, the
sample-model script and the benchmarks.
"""

from __future__ import annotations

import os

from .rewrite import TF_DOMAIN


def export(fn, input_signature, *, opset: int = 17, keep_strided_slice: bool = True):
    """A ModelProto for the ``tf.function`` ``fn`` (native tf2onnx lowering when not keeping)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import logging

    import onnx
    import tf2onnx
    logging.getLogger("tf2onnx").setLevel(logging.ERROR)
    kwargs = {}
    if keep_strided_slice:
        kwargs = dict(custom_ops={"StridedSlice": TF_DOMAIN},
                      extra_opset=[onnx.helper.make_opsetid(TF_DOMAIN, 1)])
    model, _ = tf2onnx.convert.from_function(fn, input_signature=input_signature, opset=opset, **kwargs)
    return model
