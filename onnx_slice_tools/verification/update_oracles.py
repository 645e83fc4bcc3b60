"""The real runtimes as oracles of the slice-update family (semantics/update.py).

TensorFlow's ``XlaDynamicUpdateSlice``, ``XlaDynamicSlice``, ``TensorStridedSliceUpdate``,
``StridedSliceGrad`` (eager, CPU) and LiteRT's ``DYNAMIC_UPDATE_SLICE`` (a one-op ``.tflite``
built in the flatbuffer, every operand a graph input, builtin kernels).  Each returns an
:class:`~.oracles.Outcome`: the array the runtime produced, or the error it raised.  Needs the
``oracles`` extra; each import is lazy.
"""

from __future__ import annotations

import os

import numpy as np

from .runtimes import tflite_interpreter
from ..semantics.spec import SliceSpec
from .oracles import Outcome, tflite_schema

_tf = None


def _tensorflow():
    global _tf
    if _tf is None:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow as tf  # optional dependency
        from tensorflow.compiler.tf2xla.python import xla  # optional dependency
        _tf = (tf, xla)
    return _tf


def _run(fn) -> Outcome:
    tf, _ = _tensorflow()
    try:
        arr = np.array(fn().numpy(), copy=True)
    except (tf.errors.InvalidArgumentError, ValueError, TypeError) as exc:
        text = str(exc).strip().splitlines()
        return Outcome(False, error=text[0] if text else type(exc).__name__)
    return Outcome(True, arr, tuple(arr.shape))


def _masks(spec: SliceSpec) -> dict:
    return dict(begin_mask=spec.begin_mask, end_mask=spec.end_mask, ellipsis_mask=spec.ellipsis_mask,
                new_axis_mask=spec.new_axis_mask, shrink_axis_mask=spec.shrink_axis_mask)


def _spec_tensors(spec: SliceSpec, index_dtype) -> tuple:
    return tuple(np.asarray(v, index_dtype).reshape(-1) for v in (spec.begin, spec.end, spec.strides))


def tf_dynamic_update_slice(x: np.ndarray, update: np.ndarray, indices: np.ndarray) -> Outcome:
    """TensorFlow's ``XlaDynamicUpdateSlice`` (what Keras 3's ``ops.slice_update`` emits)."""
    tf, xla = _tensorflow()
    return _run(lambda: xla.dynamic_update_slice(tf.constant(x), tf.constant(update), tf.constant(indices)))


def tf_dynamic_slice(x: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> Outcome:
    """TensorFlow's ``XlaDynamicSlice``."""
    tf, xla = _tensorflow()
    return _run(lambda: xla.dynamic_slice(tf.constant(x), tf.constant(starts), tf.constant(sizes)))


def tf_strided_slice_update(x: np.ndarray, spec: SliceSpec, value: np.ndarray, index_dtype=np.int32) -> Outcome:
    """TensorFlow's ``TensorStridedSliceUpdate``."""
    tf, _ = _tensorflow()
    b, e, s = _spec_tensors(spec, index_dtype)
    return _run(lambda: tf.raw_ops.TensorStridedSliceUpdate(input=tf.constant(x), begin=b, end=e, strides=s,
                                                            value=tf.constant(value), **_masks(spec)))


def tf_strided_slice_grad(shape, spec: SliceSpec, dy: np.ndarray, index_dtype=np.int32) -> Outcome:
    """TensorFlow's ``StridedSliceGrad``."""
    tf, _ = _tensorflow()
    b, e, s = _spec_tensors(spec, index_dtype)
    return _run(lambda: tf.raw_ops.StridedSliceGrad(shape=np.asarray(shape, index_dtype), begin=b, end=e,
                                                    strides=s, dy=tf.constant(dy), **_masks(spec)))


def dynamic_update_slice_tflite_model(shape, update_shape, dtype, index_dtype, index_length: int | None = None) -> bytes:
    """A one-op ``.tflite``: inputs ``x``, ``update``, ``indices`` -> DYNAMIC_UPDATE_SLICE -> ``y``."""
    import flatbuffers  # optional dependency (TensorFlow's)
    s = tflite_schema()
    model = s.ModelT()
    model.version = 3
    code = s.OperatorCodeT()
    code.builtinCode = s.BuiltinOperator.DYNAMIC_UPDATE_SLICE
    code.deprecatedBuiltinCode = 127  # "placeholder for builtins beyond 127"
    code.version = 1
    model.operatorCodes = [code]

    def tensor(name, shp, dt):
        t = s.TensorT()
        t.name, t.shape, t.type, t.buffer = name, list(shp), getattr(s.TensorType, np.dtype(dt).name.upper()), 0
        return t

    graph = s.SubGraphT()
    graph.name = "main"
    length = len(shape) if index_length is None else index_length
    graph.tensors = [tensor("x", shape, dtype), tensor("update", update_shape, dtype),
                     tensor("indices", [length], index_dtype), tensor("y", shape, dtype)]
    op = s.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs = 0, [0, 1, 2], [3]
    graph.operators = [op]
    graph.inputs, graph.outputs = [0, 1, 2], [3]
    model.subgraphs, model.buffers = [graph], [s.BufferT()]
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def litert_dynamic_update_slice(x: np.ndarray, update: np.ndarray, indices: np.ndarray) -> Outcome:
    """LiteRT's ``DYNAMIC_UPDATE_SLICE`` kernel on ``x``; errors are the interpreter's
    Prepare/Invoke failures."""
    try:
        interp = tflite_interpreter(dynamic_update_slice_tflite_model(x.shape, update.shape, x.dtype,
                                                                      indices.dtype, len(indices)))
        interp.allocate_tensors()
        for d, value in zip(interp.get_input_details(), (x, update, indices)):
            if value.size:  # an empty tensor is left as allocated
                interp.set_tensor(d["index"], value)
        interp.invoke()
        arr = np.array(interp.get_tensor(interp.get_output_details()[0]["index"]), copy=True)
    except (RuntimeError, ValueError) as exc:
        return Outcome(False, error=(str(exc).strip().splitlines() or [type(exc).__name__])[0])
    return Outcome(True, arr, tuple(arr.shape))
