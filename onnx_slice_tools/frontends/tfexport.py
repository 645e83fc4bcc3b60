"""Export TensorFlow functions to ONNX with tf2onnx, StridedSlice kept as a custom node.

Needs TensorFlow and tf2onnx (the ``tf`` / ``oracles`` extras).  Used by
:mod:`sources` (SavedModel and Keras inputs), the tests, the sample-model script and
the benchmarks.

Memory: ``tf2onnx.convert.from_function`` freezes every variable into a graph constant
(TensorFlow's ``convert_variables_to_constants_v2``, then grappler, then tf2onnx's own
graph each hold copies): many times the weights at peak.  :func:`export` keeps every
variable of at least ``large_variable_bytes`` out of that: TensorFlow freezes the others,
each large variable's reads become one placeholder of its dtype and shape, tf2onnx
converts that small graph, and the variable's value (read from TensorFlow, the same
value the function computes with) becomes the ONNX initializer behind that input.  A
function whose large variables cannot be kept out (a call reads the resource) is frozen
whole on the same path; its XLA-compiled calls are inlined (:func:`inline_xla_calls`).
:func:`export_tflite` does the same for a ``.tflite``'s large constant buffers.  Either
falls back to tf2onnx's whole path when tf2onnx cannot convert the reduced graph.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ConversionError
from ..rewrite.core import TF_DOMAIN

#: Variables of at least this many bytes are not frozen by TensorFlow/tf2onnx (see the module doc).
LARGE_VARIABLE_BYTES = 1 << 16


class _Unfreezable(Exception):
    """The graph reads a large variable in a way the placeholder substitution does not cover."""


def export(fn, input_signature, *, opset: int = 17, keep_strided_slice: bool = True,
           large_variable_bytes: int | None = LARGE_VARIABLE_BYTES, external_data=None):
    """A ModelProto for the ``tf.function`` ``fn`` (native tf2onnx lowering when not keeping).

    Variables of ``large_variable_bytes`` or more become initializers without passing through
    TensorFlow's freezing (None: freeze everything, tf2onnx's own path).  ``external_data``: a
    file path; those initializers are then written there, one after the other, as the model's
    external data (``location`` = the file's name: save the model beside it)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import logging

    import tf2onnx
    logging.getLogger("tf2onnx").setLevel(logging.ERROR)
    kwargs = keep_strided_slice_kwargs() if keep_strided_slice else {}
    concrete = fn.get_concrete_function(*input_signature)
    large = _large_variables(concrete, large_variable_bytes)
    constants = captured_constants(concrete)
    # the large variables kept out; if the graph reads one in a way that cannot be (a function
    # call taking the resource), everything frozen, still on this path (it inlines XLA calls)
    failures = Tf2onnxFailures()
    with failures:
        for keep in ([large, {}] if large else [{}]):
            failures.found.clear()
            try:
                graph_def, feeds = _freeze_except(concrete, keep, constants)
                model = _convert_graph_def(concrete, graph_def, sorted(feeds), opset, kwargs, constants)
            except Exception:  # _Unfreezable, or a tf2onnx converter needing the constant:
                continue       # tf2onnx's own path below reports what is really wrong
            del graph_def
            _feeds_to_initializers(model, feeds, external_data)
            failures.require_loadable(model, None, Path(external_data).parent if external_data else None)
            return model
        failures.found.clear()
        model, _ = tf2onnx.convert.from_function(fn, input_signature=input_signature, opset=opset, **kwargs)
    _feeds_to_initializers(model, {f"{k}:0": v for k, v in constants.items()})
    failures.require_loadable(model, None)
    return model


def captured_constants(concrete) -> dict:
    """{name of the capture placeholder in ``concrete``'s graph: numpy value} for the tensors
    (not variables) the function captured from eager code -- ``self.table = tf.constant(...)``
    read in a layer's ``call``, a loaded SavedModel's restored constants.  TensorFlow's freezing
    handles variables only: these stay placeholders, and tf2onnx would make them graph inputs
    no user can feed."""
    import numpy as np
    import tensorflow as tf
    out = {}
    for external, internal in concrete.graph.captures:
        if external.dtype == tf.dtypes.resource or not hasattr(external, "numpy") or \
                external.dtype == tf.dtypes.string or not external.dtype.is_numpy_compatible:
            continue
        try:
            out[internal.name.split(":")[0]] = np.asarray(external.numpy())  # a 0-d one gives a numpy scalar
        except Exception:  # a symbolic capture (a graph tensor) has no value
            continue
    return out


def keep_strided_slice_kwargs() -> dict:
    """tf2onnx options keeping every StridedSlice as our custom node."""
    import onnx
    return dict(custom_ops={"StridedSlice": TF_DOMAIN}, extra_opset=[onnx.helper.make_opsetid(TF_DOMAIN, 1)])


def export_tflite(path, *, opset: int = 17, output_names=None, external_data=None,
                  large_buffer_bytes: int = LARGE_VARIABLE_BYTES):
    """A ModelProto for the ``.tflite`` at ``path``, StridedSlice kept (with ``offset``).

    tf2onnx's TFLite reader copies every buffer several times.  With
    ``external_data`` (a file path), each large constant buffer (``large_buffer_bytes`` or more,
    one tensor of the main subgraph, not quantized, not sparse, numeric) is first written there
    and its tensor made an input of a copy of the flatbuffer without it; tf2onnx converts that
    small model; each such input becomes an initializer whose external data is those bytes.
    Should tf2onnx fail on that model (a converter needing the constant), the file is cut back
    and the whole model converted the usual way."""
    import tempfile

    import tf2onnx
    kwargs = dict(opset=opset, output_names=output_names, **keep_strided_slice_kwargs())
    size = os.path.getsize(external_data) if external_data and os.path.exists(external_data) else 0
    data = checked_tflite(path)
    dense = densified_tflite(data)
    small, moved = _tflite_without_buffers(dense or data, external_data, large_buffer_bytes) \
        if external_data else (None, {})
    del data
    model = None
    failures = Tf2onnxFailures()
    with tempfile.TemporaryDirectory(prefix="onnx-slice-tools-tflite-") as folder, failures:
        file = Path(folder) / Path(path).name
        if moved:
            try:
                file.write_bytes(small)
                model = _from_tflite(tf2onnx, file, path, kwargs)
                _inputs_to_external(model, moved, Path(external_data).name)
            except Exception:  # the usual path below reports what is really wrong
                os.truncate(external_data, size)
                model = None
                failures.found.clear()
        if model is None:
            if dense is not None:
                file.write_bytes(dense)
            model = _from_tflite(tf2onnx, file if dense is not None else Path(path), path, kwargs)
    failures.require_loadable(model, path, Path(external_data).parent if external_data else None)
    require_converted(model, path)
    return model


def _from_tflite(tf2onnx, file, path, kwargs):
    """``tf2onnx.convert.from_tflite(file)``; an exception of tf2onnx on the (readable) .tflite
    ``path`` becomes a one-line :class:`ConversionError` naming tf2onnx's reason, the file's
    builtin ops tf2onnx has no converter for, and whether LiteRT runs the file (it is run to
    say so: :func:`litert_runs`): a failed conversion (exit 1), not an unusable input."""
    from ..errors import first_line
    try:
        model, _ = tf2onnx.convert.from_tflite(str(file), **kwargs)
    except Exception as exc:  # tf2onnx's reader and converters raise many types
        data = Path(file).read_bytes()
        missing = tflite_ops_without_converter(data)
        why = first_line(exc) + (f"; it has no converter for {', '.join(missing)}" if missing else "")
        litert = litert_runs(data)
        if litert is None:
            tail = ("LiteRT runs the file, tf2onnx cannot: convert the model's SavedModel or Keras source "
                    "instead, or report the file to tf2onnx")
        else:
            tail = f"LiteRT cannot run the file either ({litert})"
        raise ConversionError(f"tf2onnx could not convert this .tflite ({why}); nothing written: {tail}",
                              path=str(path)) from None
    return model


def litert_runs(data: bytes) -> str | None:
    """None when LiteRT prepares and runs the .tflite ``data`` (on zeros, at the shapes the
    framework check would feed); else LiteRT's first error line.  What a message may claim
    ("LiteRT reads the file") is what was seen."""
    import numpy as np

    from ..errors import first_line
    from ..verification.runtimes import tflite_interpreter
    try:
        interp = tflite_interpreter(data)
        interp.allocate_tensors()
        for d in interp.get_input_details():
            interp.set_tensor(d["index"], np.zeros(d["shape"], dtype=d["dtype"]))
        interp.invoke()
    except Exception as exc:  # LiteRT raises RuntimeError / ValueError on what it cannot run
        return first_line(exc) or type(exc).__name__
    return None


class Tf2onnxFailures:
    """Collects the nodes tf2onnx's converters failed on while it is active (``with``): tf2onnx's
    Python API logs "Failed to convert node" and goes on with the graph in whatever state the
    converter left it.  ``found``: (node name, the converter's error line)."""

    def __init__(self):
        import logging

        self.found: list[tuple[str, str]] = []
        found = self.found

        class _Catch(logging.Handler):
            def emit(self, record):
                if str(record.msg).startswith("Failed to convert node"):
                    from ..errors import first_line
                    exc = record.exc_info[1] if record.exc_info else None
                    name = record.args[0] if isinstance(record.args, tuple) and record.args else "?"
                    found.append((str(name), (first_line(exc) or type(exc).__name__) if exc else ""))

        self.handler = _Catch(level=logging.ERROR)
        self.logger = logging.getLogger("tf2onnx")

    def __enter__(self):
        self.logger.addHandler(self.handler)
        return self

    def __exit__(self, *exc):
        self.logger.removeHandler(self.handler)
        return False

    def require_loadable(self, model, path, folder=None) -> None:
        """When tf2onnx failed on a node and onnxruntime cannot load ``model`` (its weights
        beside it in ``folder``, if any): a one-line :class:`ConversionError` naming tf2onnx's
        failure -- the model is tf2onnx's, not ours, and nothing is written."""
        if not self.found:
            return
        from ..errors import first_line
        from ..verification.runtimes import FAST, onnxruntime_session
        left = unconverted_ops(model)
        problem = f"it left {', '.join(left)} unconverted" if left else None
        if problem is None and _holds_ours(model):
            return  # our kept StridedSlice (or a slice update) does not load before its rewrite: the checks judge
        if problem is None:
            try:
                if folder is not None:
                    probe = Path(folder) / "tf2onnx-output.onnx"
                    probe.write_bytes(model.SerializeToString())
                    try:
                        onnxruntime_session(str(probe), FAST)
                    finally:
                        probe.unlink(missing_ok=True)
                else:
                    onnxruntime_session(model.SerializeToString(), FAST)
                return  # it loads: the checks judge its values
            except Exception as exc:
                problem = f"onnxruntime cannot load its output: {first_line(exc)}"
        name, why = self.found[0]
        more = f" (+{len(self.found) - 1} more nodes)" if len(self.found) > 1 else ""
        raise ConversionError(f"tf2onnx failed to convert node {name!r}: {why}{more}; {problem}; nothing written "
                              "(tf2onnx's failure: the rewrite and cleanup did not run)",
                              path=None if path is None else str(path))


def tflite_ops_without_converter(data: bytes) -> list[str]:
    """The builtin operators of the .tflite ``data`` (every subgraph) that tf2onnx registers no
    converter for (``TFL_<NAME>`` in its handler table; QUANTIZE/DEQUANTIZE are read by its
    parser itself), sorted; empty when tf2onnx's table cannot be read (a message detail only)."""
    from tensorflow.lite.python import schema_py_generated as schema
    try:
        import tf2onnx.tflite_handlers  # noqa: F401 - registers the TFLite converters
        from tf2onnx.handler import tf_op
        known = {name for per_domain in tf_op.get_opsets().values() for table in per_domain for name in table}
    except Exception:  # another tf2onnx layout
        return []
    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    model = schema.ModelT.InitFromPackedBuf(data, 0)
    used = {names.get(max(c.builtinCode, c.deprecatedBuiltinCode)) for c in model.operatorCodes
            if max(c.builtinCode, c.deprecatedBuiltinCode) != schema.BuiltinOperator.CUSTOM}
    return sorted(n for n in used if n and f"TFL_{n}" not in known and n not in ("QUANTIZE", "DEQUANTIZE"))


#: TFLite's DimensionType / SparseIndexVector codes (schema.fbs).
_DENSE, _SPARSE_CSR = 0, 1


def densified_tflite(data: bytes) -> bytes | None:
    """``data`` (a .tflite flatbuffer) with each sparse constant that a DENSIFY operator reads
    stored dense and that operator removed (its readers read the dense constant), or None when
    there is none.  tf2onnx's reader takes a sparse constant's bytes for a dense tensor of its
    shape and fails ("cannot reshape array ..."); DENSIFY only expands stored values into their
    dense positions (pure data movement), which :func:`sparse_to_dense` does here exactly."""
    import numpy as np
    from tensorflow.lite.python import schema_py_generated as schema
    model = schema.ModelT.InitFromPackedBuf(data, 0)
    codes = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in model.operatorCodes]
    changed = False
    for graph in model.subgraphs:
        keep, rename = [], {}
        for op in graph.operators or []:
            src = graph.tensors[op.inputs[0]] if codes[op.opcodeIndex] == schema.BuiltinOperator.DENSIFY else None
            buf = model.buffers[src.buffer] if src is not None and src.buffer else None
            if src is None or src.sparsity is None or buf is None or buf.data is None:
                keep.append(op)
                continue
            dtype = _tflite_numpy_dtype(src.type)
            values = np.frombuffer(np.ascontiguousarray(buf.data).tobytes(), dtype=dtype)
            dense = sparse_to_dense(values, [int(d) for d in src.shape], src.sparsity)
            model.buffers.append(schema.BufferT())
            model.buffers[-1].data = np.frombuffer(dense.tobytes(), dtype=np.uint8)
            src.buffer, src.sparsity = len(model.buffers) - 1, None
            rename[op.outputs[0]] = op.inputs[0]
            changed = True
        if rename:
            for op in keep:
                op.inputs = [rename.get(int(i), int(i)) for i in op.inputs]
            graph.outputs = [rename.get(int(i), int(i)) for i in graph.outputs]
            graph.operators = keep
    if not changed:
        return None
    import flatbuffers
    builder = flatbuffers.Builder(len(data) + (1 << 16))
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _tflite_numpy_dtype(tensor_type: int):
    import numpy as np
    from onnx import helper
    from tf2onnx.tflite_utils import map_tflite_dtype_to_onnx
    return np.dtype(helper.tensor_dtype_to_np_dtype(map_tflite_dtype_to_onnx(tensor_type)))


def sparse_to_dense(values, shape: list[int], sparsity):
    """The dense array of ``shape`` that TFLite's sparse format (``SparsityParametersT``:
    traversal order over the dims then the block dims, a DENSE or SPARSE_CSR metadata per
    traversal level, the block map) stores as ``values``, in the order of TFLite's
    ``FormatConverter::SparseToDense``: levels visited in traversal order, values consumed one per
    leaf, a block dim's index added to its dim's index times the block size."""
    import numpy as np
    order = [int(d) for d in sparsity.traversalOrder]
    block_map = [int(d) for d in (sparsity.blockMap if sparsity.blockMap is not None else [])]
    meta = sparsity.dimMetadata
    rank = len(shape)
    pos = np.zeros(1, dtype=np.int64)
    idx = np.zeros((1, 0), dtype=np.int64)
    for level, m in enumerate(meta):
        if m.format == _DENSE:
            n = int(m.denseSize)
            pos = (pos[:, None] * n + np.arange(n)).reshape(-1)
            idx = np.concatenate([np.repeat(idx, n, axis=0), np.tile(np.arange(n), len(idx))[:, None]], axis=1)
        else:
            seg = np.asarray(m.arraySegments.values, dtype=np.int64)
            ind = np.asarray(m.arrayIndices.values, dtype=np.int64)
            counts = seg[pos + 1] - seg[pos]
            starts = np.repeat(seg[pos], counts)
            within = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
            pos = starts + within
            idx = np.concatenate([np.repeat(idx, counts, axis=0), ind[pos][:, None]], axis=1)
    coords = np.zeros((len(pos), rank), dtype=np.int64)
    for level in range(rank):
        coords[:, order[level]] = idx[:, level]
    for level in range(rank, len(order)):
        block = order[level] - rank
        dim = block_map[block]
        coords[:, dim] = coords[:, dim] * int(meta[order[level]].denseSize) + idx[:, level]
    if len(pos) != values.size:
        raise ValueError(f"the sparse tensor stores {values.size} values, its metadata addresses {len(pos)}")
    dense = np.zeros(shape, dtype=values.dtype)
    dense[tuple(coords.T)] = values
    return dense


def require_converted(model, path) -> None:
    """Raise a one-line :class:`ConversionError` naming the ops tf2onnx left unconverted in
    ``model`` (converted from the file at ``path``), if any.  The slice-update family (and TFLite
    GELU), which tf2onnx leaves raw, is not among them: the pipeline rewrites it
    (api._slice_updates)."""
    left = unconverted_ops(model)
    if left:
        raise ConversionError(f"tf2onnx has no ONNX conversion for {', '.join(left)}: the model cannot be "
                              "converted to ONNX (nothing written)", path=str(path))


def _holds_ours(model) -> bool:
    """Whether ``model`` holds a node this package rewrites later (a kept StridedSlice, a slice
    update): onnxruntime cannot load it before that, whatever tf2onnx did."""
    from ..graphs.walk import proto_subgraphs
    from ..rewrite.updates import in_family
    todo = [model.graph]
    while todo:
        graph = todo.pop()
        for n in graph.node:
            if n.op_type == "StridedSlice" or in_family(n.op_type, n.domain):
                return True
            todo.extend(proto_subgraphs(n))
    return False


def unconverted_ops(model) -> list[str]:
    """The ops of ``model`` (subgraphs included) that no ONNX opset defines, each as
    ``"OP (node 'NAME')"`` (its first node), our kept StridedSlice and the slice-update family
    (rewritten by the pipeline: api._slice_updates) excepted: tf2onnx's Python
    API continues past a framework op it has no handler for and leaves it in the graph as it is
    (its command line stops), and such a model is no ONNX model a runtime can load."""
    from onnx import defs

    from ..graphs.walk import proto_subgraphs
    from ..rewrite.updates import in_family
    found: dict[str, str] = {}
    todo = [model.graph]
    while todo:
        for node in todo.pop().node:
            todo.extend(proto_subgraphs(node))
            if node.op_type == "StridedSlice" and node.domain == TF_DOMAIN or node.op_type in found or \
                    in_family(node.op_type, node.domain):
                continue
            if not defs.has(node.op_type, node.domain or ""):
                found[node.op_type] = f"{node.op_type} (node {node.name!r})"
    return sorted(found.values())


def checked_tflite(path) -> bytes:
    """The bytes of the ``.tflite`` at ``path``, or a one-line ModelError when they are no
    complete TFLite flatbuffer (its ``TFL3`` identifier, then every table of the model read):
    tf2onnx's reader would fail on a cut file with a message about buffer offsets."""
    from tensorflow.lite.python import schema_py_generated as schema

    from ..errors import ModelError, first_line
    data = Path(path).read_bytes()
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise ModelError("not a .tflite file (no TFLite flatbuffer identifier 'TFL3' at byte 4)", path=str(path))
    try:
        schema.ModelT.InitFromPackedBuf(data, 0)
    except Exception as exc:  # struct.error, IndexError ... from reading past the end
        raise ModelError(f"not a valid or complete .tflite file (its flatbuffer cannot be read: {first_line(exc)})",
                         path=str(path)) from None
    return data


def _tflite_without_buffers(data: bytes, external_data, min_bytes: int):
    """(the flatbuffer ``data`` without its large constant buffers, {tensor name: (onnx dtype,
    shape, offset, length)} of the tensors made inputs, their bytes appended to ``external_data``)."""
    import flatbuffers
    import numpy as np
    from tensorflow.lite.python import schema_py_generated as schema
    from onnx import TensorProto
    from tf2onnx.tflite_utils import map_tflite_dtype_to_onnx
    model = schema.ModelT.InitFromPackedBuf(data, 0)  # buffers: read-only views into ``data``
    users: dict[int, int] = {}
    for graph in model.subgraphs:
        for t in graph.tensors:
            users[t.buffer] = users.get(t.buffer, 0) + 1
    main, moved = model.subgraphs[0], {}
    with open(external_data, "ab") as out:
        for k, t in enumerate(main.tensors):
            buf = model.buffers[t.buffer] if t.buffer else None
            if buf is None or buf.data is None or buf.data.nbytes < min_bytes or users[t.buffer] != 1 or \
                    t.isVariable or t.sparsity is not None or _quantized(t) or t.shape is None:
                continue
            try:
                onnx_dtype = map_tflite_dtype_to_onnx(t.type)
            except Exception:  # a type tf2onnx does not map stays a constant
                continue
            if onnx_dtype == TensorProto.STRING:
                continue
            offset = out.tell()
            out.write(np.ascontiguousarray(buf.data).data)
            moved[t.name.decode()] = (onnx_dtype, [int(d) for d in t.shape], offset, buf.data.nbytes)
            buf.data = None
            t.buffer = 0
            main.inputs = [*main.inputs, k]
    if not moved:
        return None, {}
    builder = flatbuffers.Builder(1 << 16)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output()), moved


def _quantized(tensor) -> bool:
    q = tensor.quantization
    return q is not None and q.scale is not None and len(q.scale) > 0


def _inputs_to_external(model, moved: dict, location: str) -> None:
    """Each graph input of ``moved`` (name -> (onnx dtype, shape, offset, length)) becomes an
    initializer whose data lies in the external data file ``location``."""
    from onnx import TensorProto
    inputs = {i.name: i for i in model.graph.input}
    for name, (dtype, shape, offset, length) in moved.items():
        if name not in inputs:
            raise ValueError(f"tf2onnx has no input {name!r} for the TFLite buffer moved out")
        model.graph.input.remove(inputs[name])
        tensor = TensorProto(name=name, dims=shape, data_type=dtype)
        point_external(tensor, location, offset, length)
        model.graph.initializer.append(tensor)


def point_external(tensor, location: str, offset: int, length: int) -> None:
    """Make ``tensor`` (without data) read ``length`` bytes at ``offset`` of the file ``location``."""
    from onnx import TensorProto
    for key, val in (("location", location), ("offset", offset), ("length", length)):
        tensor.external_data.add(key=key, value=str(val))
    tensor.data_location = TensorProto.EXTERNAL


def move_to_external(model, external_data, min_bytes: int) -> None:
    """Append the ``raw_data`` of each main-graph initializer of ``min_bytes`` or more to the file
    ``external_data`` and point the initializer there."""
    with open(external_data, "ab") as out:
        for tensor in model.graph.initializer:
            if tensor.HasField("raw_data") and len(tensor.raw_data) >= min_bytes:
                offset = out.tell()
                out.write(tensor.raw_data)
                tensor.ClearField("raw_data")
                point_external(tensor, Path(external_data).name, offset, out.tell() - offset)


def _large_variables(concrete, min_bytes) -> dict:
    """{name of the capture placeholder in ``concrete``'s graph: tf.Variable} for the numeric
    variables of at least ``min_bytes`` bytes the function reads."""
    if min_bytes is None:
        return {}
    by_handle = {id(v.handle): v for v in concrete.graph.variables}
    large = {}
    for external, internal in concrete.graph.captures:
        var = by_handle.get(id(external))
        if var is None or not var.shape.is_fully_defined() or not var.dtype.is_numpy_compatible or \
                var.dtype.name == "string":
            continue
        if var.shape.num_elements() * var.dtype.size >= min_bytes:
            large[internal.name.split(":")[0]] = var
    return large


def _freeze_except(concrete, large: dict, constants: dict | None = None):
    """(GraphDef with every variable but ``large`` frozen and each of ``large`` a Placeholder of
    its dtype and shape, {tensor name of that placeholder: tf.Variable}).

    TensorFlow's own freezing (the code under ``convert_variables_to_constants_v2``, with its
    deny list: the large variables stay resource placeholders), then the resource chain
    ``Placeholder -> Identity* -> ReadVariableOp`` of each becomes a value chain; any other use of
    the resource (a gather on it, a loop body taking it) raises :class:`_Unfreezable`.  Each
    placeholder of ``constants`` ({name: value}, :func:`captured_constants`) becomes a Const."""
    from tensorflow.python.framework import convert_to_constants as c2c  # no public API
    if not hasattr(c2c, "_FunctionConverterDataInEager") or not hasattr(c2c, "_replace_variables_by_constants"):
        raise _Unfreezable("this TensorFlow has no freezing with a deny list")
    data = c2c._FunctionConverterDataInEager(
        func=concrete, lower_control_flow=False, aggressive_inlining=True, variable_names_denylist=set(large))
    graph_def, _ = c2c._replace_variables_by_constants(converter_data=data)
    nodes = {n.name: n for n in graph_def.node}
    consumers: dict[str, list] = {}
    for node in graph_def.node:
        for k, inp in enumerate(node.input):
            if not inp.startswith("^"):
                consumers.setdefault(inp.split(":")[0], []).append((node, k))
    import tensorflow as tf
    for name, value in (constants or {}).items():
        node = nodes.get(name)
        if node is not None and node.op == "Const":
            continue  # TensorFlow's freezing already made it one (a capture passed to a function call)
        if node is None or node.op != "Placeholder":
            raise _Unfreezable(name)
        dtype = node.attr["dtype"].type
        node.op = "Const"
        node.attr.clear()
        node.attr["dtype"].type = dtype
        node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(value))
    taken = set(nodes)
    feeds = {}
    for name, var in large.items():
        placeholder = nodes.get(name)
        if placeholder is None or placeholder.op != "Placeholder":
            raise _Unfreezable(name)
        dtype = var.dtype.as_datatype_enum
        _value_chain(graph_def, placeholder, consumers, dtype)
        placeholder.attr["dtype"].type = dtype
        placeholder.attr["shape"].shape.CopyFrom(var.shape.as_proto())
        placeholder.attr.pop("_handle_data", None)
        placeholder.attr.pop("_user_specified_name", None)
        new = _unique(var.name.split(":")[0], taken)
        _rename(graph_def, name, new)
        feeds[f"{new}:0"] = var
    return graph_def, feeds


def _value_chain(graph_def, placeholder, consumers, dtype) -> None:
    """Retype the resource ``Identity`` nodes below ``placeholder``, turn its ``ReadVariableOp``
    nodes into ``Identity`` and its ``ResourceGather`` nodes (embedding lookups) into ``GatherV2``
    (what TensorFlow's freezing does with a constant)."""
    todo = [placeholder.name]
    while todo:
        for node, k in consumers.get(todo.pop(), ()):
            if node.op == "Identity":
                node.attr["T"].type = dtype
                todo.append(node.name)
            elif node.op == "ReadVariableOp" and node.attr["dtype"].type == dtype:
                node.op = "Identity"
                node.attr["T"].type = dtype
                del node.attr["dtype"]
            elif node.op == "ResourceGather" and k == 0 and node.attr["dtype"].type == dtype:
                _gather_v2(graph_def, node, dtype)
            else:
                raise _Unfreezable(f"{node.op} reads the variable")


def _gather_v2(graph_def, node, dtype) -> None:
    """``ResourceGather(resource, indices)`` -> ``GatherV2(value, indices, axis=batch_dims)``."""
    import tensorflow as tf
    batch_dims = node.attr["batch_dims"].i if "batch_dims" in node.attr else 0
    axis = graph_def.node.add(name=f"{node.name}/axis", op="Const")
    axis.attr["dtype"].type = tf.int32.as_datatype_enum
    axis.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(batch_dims, tf.int32))
    node.op = "GatherV2"
    node.input.insert(2, axis.name)  # before any control input
    for name in ("dtype", "validate_indices"):
        node.attr.pop(name, None)
    node.attr["Tparams"].type = dtype
    node.attr["Taxis"].type = tf.int32.as_datatype_enum
    node.attr["batch_dims"].i = batch_dims


def _unique(name: str, taken: set) -> str:
    new, k = name, 0
    while new in taken:
        k += 1
        new = f"{name}_{k}"
    taken.add(new)
    return new


def _rename(graph_def, old: str, new: str) -> None:
    refs = {old: new, f"{old}:0": f"{new}:0", f"^{old}": f"^{new}"}
    for node in graph_def.node:
        if node.name == old:
            node.name = new
        if any(i in refs for i in node.input):
            node.input[:] = [refs.get(i, i) for i in node.input]


def _convert_graph_def(concrete, graph_def, feed_names, opset, kwargs, constants=()):
    """tf2onnx's ``from_function`` from its freezing on: grappler, then the ONNX conversion, with
    the variables' placeholders as extra inputs."""
    import tensorflow as tf
    from tf2onnx import tf_loader
    from tf2onnx.convert import _convert_common, tensor_names_from_structed
    input_names = [t.name for t in concrete.inputs
                   if t.dtype != tf.dtypes.resource and t.name.split(":")[0] not in constants]
    output_names = [t.name for t in concrete.outputs if t.dtype != tf.dtypes.resource]
    rename = tensor_names_from_structed(concrete, input_names, output_names)
    with tf.device("/cpu:0"):
        graph_def = tf_loader.fix_freezing_errors_part2(graph_def)
        inline_xla_calls(graph_def)
        # grappler allocates about the size of a placeholder of fully known shape:
        # it sees the variables' dims as unknown, tf2onnx the real ones
        shapes = _hide_dims(graph_def, feed_names)
        with tf.Graph().as_default():  # grappler runs on a graph, as in tf2onnx's from_function
            tf.import_graph_def(graph_def, name="")
            graph_def = tf_loader.tf_optimize(input_names + feed_names, output_names, graph_def)
        _restore_dims(graph_def, shapes)
        model, _ = _convert_common(graph_def, name=concrete.name, continue_on_error=True, opset=opset,
                                   input_names=input_names + feed_names, output_names=output_names,
                                   tensors_to_rename=rename, **kwargs)
    return model


#: Attributes that stop grappler's function inlining: a call compiled by XLA (Keras 3 runs
#: grouped and depthwise-as-grouped convolutions that way on CPU), or one marked not to inline.
_NO_INLINE_ATTRS = ("_XlaMustCompile", "_XlaCompile", "_noinline")


def inline_xla_calls(graph_def) -> None:
    """Drop the marks of ``_NO_INLINE_ATTRS`` from every call node and function of ``graph_def``,
    so that grappler's function optimizer inlines those calls: tf2onnx converts the ops inside
    (a grouped ``Conv2D`` becomes an ONNX ``Conv`` with ``group``), but leaves a call it was not
    given inlined as a raw ``StatefulPartitionedCall`` no runtime can run.  XLA compilation is
    an execution choice; the computation is the function's body either way."""
    def clear(nodes):
        for node in nodes:
            for name in _NO_INLINE_ATTRS:
                node.attr.pop(name, None)
    clear(graph_def.node)
    for function in graph_def.library.function:
        for name in _NO_INLINE_ATTRS:
            function.attr.pop(name, None)
        clear(function.node_def)


def _hide_dims(graph_def, feed_names) -> dict:
    """Set the dims of the placeholders ``feed_names`` to unknown (rank kept); returns their
    shapes for :func:`_restore_dims`."""
    names = {n.split(":")[0] for n in feed_names}
    shapes = {}
    for node in graph_def.node:
        if node.name in names:
            shape = node.attr["shape"].shape
            shapes[node.name] = [d.size for d in shape.dim]
            for d in shape.dim:
                d.size = -1
    return shapes


def _restore_dims(graph_def, shapes: dict) -> None:
    for node in graph_def.node:
        if node.name in shapes:
            node.attr.pop("_output_shapes", None)
            for d, size in zip(node.attr["shape"].shape.dim, shapes[node.name]):
                d.size = size


def _feeds_to_initializers(model, feeds: dict, external_data=None) -> None:
    """Each variable's graph input becomes an initializer holding the variable's value, one
    variable at a time: in the proto, or appended to the file ``external_data`` (``feeds``
    values: tf.Variable, or numpy arrays when ``external_data`` is None)."""
    from contextlib import nullcontext

    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    inputs = {i.name: i for i in model.graph.input}
    with open(external_data, "ab") if external_data else nullcontext() as out:
        for name, var in feeds.items():
            if name not in inputs:
                continue  # tf2onnx dropped an unused read
            model.graph.input.remove(inputs[name])
            if out is None:
                value = var if isinstance(var, np.ndarray) else var.numpy()  # a captured constant, a variable
                model.graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
                continue
            dtype = np.dtype(var.dtype.as_numpy_dtype)
            tensor = TensorProto(name=name, dims=var.shape.as_list(), data_type=helper.np_dtype_to_tensor_dtype(dtype))
            offset = out.tell()
            _write_rows(var, out)
            point_external(tensor, os.path.basename(external_data), offset, out.tell() - offset)
            model.graph.initializer.append(tensor)


#: Bytes of a variable copied out of TensorFlow at a time by :func:`_write_rows`.
CHUNK_BYTES = 16 << 20


def _write_rows(var, out) -> None:
    """Append ``var``'s value to ``out`` (row-major, little-endian as the machine) in slices of
    about CHUNK_BYTES along its first axis: ``var.numpy()`` would copy the whole value at once."""
    import numpy as np
    value = var.value()  # shares TensorFlow's buffer
    shape = var.shape.as_list()
    if len(shape) == 0 or shape[0] == 0:
        out.write(np.ascontiguousarray(value.numpy()).reshape(-1).view(np.uint8).data)
        return
    row_bytes = max(1, var.shape[1:].num_elements() * var.dtype.size)
    step = max(1, CHUNK_BYTES // row_bytes)
    for start in range(0, shape[0], step):
        out.write(np.ascontiguousarray(value[start:start + step].numpy()).reshape(-1).view(np.uint8).data)
