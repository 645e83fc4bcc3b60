"""Cases found in production .tflite files (scripts/real_tflite.py): sparse constants behind
DENSIFY that tf2onnx's reader cannot take (stored dense before it reads them), any other reader
failure on a file LiteRT runs (a failed conversion, exit 1, not an unusable input), and inputs of
unknown size whose placeholder size in the file LiteRT cannot run with."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from onnx_slice_tools.cli.main import main as cli_main
from onnx_slice_tools.frontends.sources import quiet_frameworks


def _sparse_tflite(path: Path, *, quantize: bool = False) -> Path:
    """Two MatMuls with mostly-zero constant weights, converted with TFLite's sparsity
    optimisation: each weight is stored sparse (CSR) and expanded by a DENSIFY operator."""
    import tensorflow as tf
    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 32)).astype(np.float32)
    w[rng.random(w.shape) < 0.85] = 0
    w2 = rng.standard_normal((32, 16)).astype(np.float32)
    w2[:, ::2] = 0
    w2[::3] = 0

    @tf.function(input_signature=[tf.TensorSpec([2, 64], tf.float32)])
    def f(x):
        return tf.matmul(tf.nn.relu(tf.matmul(x, w)), w2)
    with quiet_frameworks():
        conv = tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()])
        conv.optimizations = [tf.lite.Optimize.EXPERIMENTAL_SPARSITY]
        if quantize:
            conv.optimizations.append(tf.lite.Optimize.DEFAULT)
            conv.representative_dataset = lambda: ([rng.standard_normal((2, 64)).astype(np.float32)]
                                                   for _ in range(8))
        path.write_bytes(conv.convert())
    return path


def _schema():
    from tensorflow.lite.python import schema_py_generated as schema
    return schema


def _densify_inputs(data: bytes) -> list:
    schema = _schema()
    model = schema.ModelT.InitFromPackedBuf(data, 0)
    codes = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in model.operatorCodes]
    graph = model.subgraphs[0]
    return [graph.tensors[op.inputs[0]] for op in graph.operators
            if codes[op.opcodeIndex] == schema.BuiltinOperator.DENSIFY]


def _tf2onnx_fails(path: Path) -> str:
    import tf2onnx
    with quiet_frameworks():
        try:
            tf2onnx.convert.from_tflite(str(path))
        except Exception as exc:
            return str(exc)
    return ""


@pytest.mark.parametrize("quantize", [False, True], ids=["float", "int8"])
def test_a_sparse_tflite_tf2onnx_cannot_read_converts_and_is_verified(tmp_path, capfd, quantize):
    """LiteRT runs the file; tf2onnx's reader fails on the sparse constants ("cannot reshape
    array"); ours stores them dense first, converts, and matches LiteRT (the framework check)."""
    src = _sparse_tflite(tmp_path / "sparse.tflite", quantize=quantize)
    assert _densify_inputs(src.read_bytes()), "the premise: the converter stored a weight sparse"
    assert "cannot reshape" in _tf2onnx_fails(src)
    assert cli_main(["convert", str(src), "-o", str(tmp_path / "sparse.onnx")]) == 0
    out, err = capfd.readouterr()
    assert err == "" and ", verified (" in out and "against the TFLite interpreter" in out


def _block_sparse(dense: np.ndarray, block: int):
    """``dense`` (2-D) in TFLite's block-sparse format, encoded independently of the code under
    test: rows dense, column blocks of ``block`` CSR (a block is kept when any of it is non-zero),
    each kept block's values dense.  Returns (values, SparsityParametersT)."""
    schema = _schema()
    rows, cols = dense.shape
    segments, indices, values = [0], [], []
    for r in range(rows):
        for b in range(cols // block):
            part = dense[r, b * block:(b + 1) * block]
            if part.any():
                indices.append(b)
                values.extend(part.tolist())
        segments.append(len(indices))

    def meta(fmt, size=0, seg=None, ind=None):
        m = schema.DimensionMetadataT()
        m.format, m.denseSize = fmt, size
        if seg is not None:
            m.arraySegmentsType = m.arrayIndicesType = schema.SparseIndexVector.Int32Vector
            m.arraySegments, m.arrayIndices = schema.Int32VectorT(), schema.Int32VectorT()
            m.arraySegments.values, m.arrayIndices.values = seg, ind
        return m
    sp = schema.SparsityParametersT()
    sp.traversalOrder, sp.blockMap = [0, 1, 2], [1]
    sp.dimMetadata = [meta(schema.DimensionType.DENSE, rows),
                      meta(schema.DimensionType.SPARSE_CSR, 0, segments, indices),
                      meta(schema.DimensionType.DENSE, block)]
    return np.asarray(values, dtype=dense.dtype), sp


def test_block_sparse_constants_expand_as_litert_expands_them(tmp_path, capfd):
    """A weight re-stored in the block-sparse format (column blocks of 4 behind a CSR level):
    LiteRT's DENSIFY is the oracle, the converted model must match it under the framework check."""
    import flatbuffers
    schema = _schema()
    from onnx_slice_tools.frontends.tfexport import sparse_to_dense
    data = _sparse_tflite(tmp_path / "csr.tflite").read_bytes()
    model = schema.ModelT.InitFromPackedBuf(data, 0)
    target = _densify_inputs(data)[0].name
    tensor = next(t for t in model.subgraphs[0].tensors if t.name == target)
    csr = np.frombuffer(np.ascontiguousarray(model.buffers[tensor.buffer].data).tobytes(), np.float32)
    dense = sparse_to_dense(csr, [int(d) for d in tensor.shape], tensor.sparsity)
    assert np.count_nonzero(dense) == csr.size  # the CSR encoding round-trips (every stored value is non-zero here)
    values, tensor.sparsity = _block_sparse(dense, 4)
    model.buffers[tensor.buffer].data = np.frombuffer(values.tobytes(), np.uint8)
    builder = flatbuffers.Builder(1 << 16)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    src = tmp_path / "block.tflite"
    src.write_bytes(bytes(builder.Output()))
    assert cli_main(["convert", str(src), "-o", str(tmp_path / "block.onnx")]) == 0
    out, err = capfd.readouterr()
    assert err == "" and ", verified (" in out


def test_a_tf2onnx_failure_on_a_readable_tflite_is_a_failed_conversion(tmp_path, capfd, monkeypatch):
    """A file LiteRT runs but tf2onnx's reader raises on is not an unusable input: exit 1, one line
    naming the file, tf2onnx's reason and what to do; nothing written."""
    import tf2onnx
    src = Path(__file__).resolve().parents[2] / "models" / "tflite_masks.tflite"

    def broken(*args, **kwargs):
        raise ValueError("cannot reshape array of size 96 into shape (16,1,1,24)\nmore")
    monkeypatch.setattr(tf2onnx.convert, "from_tflite", broken)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    assert cli_main(["convert", str(src), "-o", str(out_dir / "m.onnx")]) == 1
    out, err = capfd.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith(f"{src}: ")
    assert "cannot reshape array of size 96" in err and "nothing written" in err and "more" not in err
    assert list(out_dir.iterdir()) == []


def test_a_stateful_tflite_tf2onnx_cannot_read_fails_naming_its_ops(tmp_path, capfd):
    """A streaming model keeping state in resource variables (VAR_HANDLE, CALL_ONCE ...: the
    wake-word models of one package): LiteRT runs it, tf2onnx's reader raises.  Exit 1, one line
    naming the file, tf2onnx's reason and the ops it has no converter for; nothing written."""
    import tensorflow as tf

    from onnx_slice_tools.verification.runtimes import tflite_interpreter

    class Stream(tf.Module):
        def __init__(self):
            self.state = tf.Variable(tf.zeros([1, 4]))

        @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32)])
        def __call__(self, x):
            self.state.assign(self.state * 0.5 + x)
            return self.state * 2.0
    m = Stream()
    with quiet_frameworks():
        conv = tf.lite.TFLiteConverter.from_concrete_functions([m.__call__.get_concrete_function()], m)
        conv.experimental_enable_resource_variables = True
        src = tmp_path / "stream.tflite"
        src.write_bytes(conv.convert())
        interp = tflite_interpreter(src.read_bytes())  # the premise: LiteRT runs it
        interp.allocate_tensors()
        interp.set_tensor(interp.get_input_details()[0]["index"], np.ones([1, 4], np.float32))
        interp.invoke()
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    assert cli_main(["convert", str(src), "-o", str(out_dir / "m.onnx")]) == 1
    out, err = capfd.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith(f"{src}: tf2onnx could not convert")
    assert "no converter for ASSIGN_VARIABLE, CALL_ONCE, READ_VARIABLE, VAR_HANDLE" in err and "nothing written" in err
    assert list(out_dir.iterdir()) == []


def test_an_unknown_size_input_too_short_at_its_stored_size_is_verified(tmp_path, capfd):
    """An audio-style input of unknown length (stored as [1, 1]) feeding a 64-tap convolution:
    LiteRT cannot prepare the model at the stored size; the framework check runs both at a size
    LiteRT accepts and the conversion is verified (it was "NOT fully verified" at the stored size)."""
    import tensorflow as tf
    kernel = np.random.default_rng(1).standard_normal((1, 64, 1, 4)).astype(np.float32)

    @tf.function(input_signature=[tf.TensorSpec([1, None], tf.float32)])
    def f(x):
        return tf.nn.conv2d(tf.reshape(x, [1, 1, -1, 1]), kernel, 1, "VALID")
    with quiet_frameworks():
        src = tmp_path / "audio.tflite"
        src.write_bytes(tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()]).convert())
        from onnx_slice_tools.verification.runtimes import tflite_interpreter
        interp = tflite_interpreter(src.read_bytes())
        assert list(interp.get_input_details()[0]["shape_signature"]) == [1, -1]
        with pytest.raises(RuntimeError):  # the premise: not at the file's own size
            interp.allocate_tensors()
    assert cli_main(["convert", str(src), "-o", str(tmp_path / "audio.onnx")]) == 0
    out, err = capfd.readouterr()
    assert err == "" and ", verified (" in out and "against the TFLite interpreter" in out


def test_an_unknown_batch_that_a_reshape_fixes_to_one_is_verified(tmp_path, capfd):
    """Input ``[?, 16]`` reshaped to the constant ``[4, 4]`` (a model that runs at batch 1 only,
    as a log-mel front end of one package does): the whole-model checks must run it at batch 1,
    not at their default size for unknown dims, which onnxruntime's Reshape refuses."""
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([None, 16], tf.float32)])
    def f(x):
        return tf.reshape(x, [4, 4]) * 2.0
    with quiet_frameworks():
        src = tmp_path / "fixed.tflite"
        src.write_bytes(tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()]).convert())
        from onnx_slice_tools.verification.runtimes import tflite_interpreter
        assert list(tflite_interpreter(src.read_bytes()).get_input_details()[0]["shape_signature"]) == [-1, 16]
    assert cli_main(["convert", str(src), "-o", str(tmp_path / "fixed.onnx")]) == 0
    out, err = capfd.readouterr()
    assert err == "" and ", verified (" in out and "bitwise against the TFLite interpreter" in out
