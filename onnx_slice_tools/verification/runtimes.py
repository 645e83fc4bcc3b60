"""The ONNX runtimes a converted model can be checked on: onnxruntime, OpenVINO, onnx's reference;
and LiteRT's interpreter, which the framework check of a .tflite input and the oracles run.

Each runtime is a factory ``make(model_bytes) -> session`` whose session has
``run(output_names, feeds) -> list of arrays`` (onnxruntime's interface), so the
per-rewrite checks (verification/lowerings.py) run the same check model on any of them.
OpenVINO is imported only when asked for; when it is missing the error is one
line naming the ``openvino`` extra.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import OnnxSliceToolsError
from ..io.files import PACKED_BITS  # the one table of packed sub-byte types
from .status import skipped

ONNXRUNTIME, OPENVINO, REFERENCE = "onnxruntime", "openvino", "reference"
#: onnxruntime's status when ``--verify-on`` leaves it out (the other runtimes' statuses then count)
NOT_ASKED = skipped("not asked for (--verify-on)")
RUNTIMES = (ONNXRUNTIME, OPENVINO, REFERENCE)


class RuntimeUnavailable(OnnxSliceToolsError):
    """A runtime asked for is not installed."""


def parse_runtimes(text) -> tuple[str, ...]:
    """``"onnxruntime,openvino"`` (or a sequence) -> a tuple of known runtime names, in order."""
    names = [t.strip() for t in (text.split(",") if isinstance(text, str) else text) if t and t.strip()]
    unknown = [n for n in names if n not in RUNTIMES]
    if unknown or not names:
        raise ValueError(f"unknown runtime {', '.join(unknown) or '(none)'!s}; expected a comma-separated list "
                         f"of {', '.join(RUNTIMES)}")
    return tuple(dict.fromkeys(names))


#: named onnxruntime configurations: FAST for the many small checks, SHIPPED for the run that
#: decides the verdict (the configuration a user gets from ``InferenceSession(path)``)
FAST, SHIPPED = "fast", "shipped"


#: sessions done with, kept for the end of the process (see :func:`keep_to_exit`)
_KEPT: list = []
_keeping = False


def keep_to_exit() -> None:
    """Called by the program (cli.main.run) for a command on one model, never by an import: the
    process ends right after it without tearing anything down (``os._exit``), so a session done
    with is kept (:func:`release`) rather than destroyed -- destroying a large model's
    onnxruntime session takes as long as a fair share of its run."""
    global _keeping
    _keeping = True


def release(done) -> None:
    """Done with ``done`` (a session, or any object the pipeline holds, e.g. a model and its
    runs): dropped now (its last reference is the caller's), or kept to the end of a process that
    ends without teardown (:func:`keep_to_exit`), where freeing it would only cost time."""
    if _keeping:
        _KEPT.append(done)


def session_options(config: str = FAST):
    """onnxruntime SessionOptions of a named configuration.

    FAST: cheap sessions -- no graph optimisation, one thread, no spinning.  SHIPPED: onnxruntime's
    defaults (all graph optimisations, default threads), only logging turned off (a failing run
    is a status, never stderr; logging does not change what runs)."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    if config == FAST:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    elif config != SHIPPED:
        raise ValueError(f"unknown session configuration {config!r}")
    so.log_severity_level = 4  # failing runs are expected (must-fail checks): nothing on stderr
    return so


def onnxruntime_session(model, config: str = FAST):
    """The one way the package builds an onnxruntime session: ``model`` (bytes, a path or a
    ModelProto) in a named configuration.  FAST pins the CPU provider; SHIPPED leaves the
    providers to onnxruntime, as ``InferenceSession(path)`` does."""
    import onnxruntime as ort
    if hasattr(model, "SerializeToString"):
        model = model.SerializeToString()
    elif not isinstance(model, (bytes, bytearray)):
        model = str(model)
    if config == SHIPPED:
        return ort.InferenceSession(model, sess_options=session_options(SHIPPED))
    return ort.InferenceSession(model, sess_options=session_options(config), providers=["CPUExecutionProvider"])


class _OpenVINOSession:
    """OpenVINO's ONNX reader and CPU plugin behind onnxruntime's ``run`` interface.

    The CPU plugin refuses inputs of unknown rank: such inputs get the fed rank with every dim
    still dynamic (one compiled model per combination of ranks).  Inputs are matched by any of
    their tensor names: OpenVINO may give an input port the name of a tensor it folded into it
    (``x`` read through a Gather on a size-1 axis answers ``get_any_name()`` with the Gather's
    output), and an input left unfed runs on whatever memory held."""

    def __init__(self, model_bytes: bytes, config: str = FAST):
        ov = _import_openvino()
        self.config = {"INFERENCE_NUM_THREADS": 1} if config == FAST else {}  # SHIPPED: a default CPU compile
        self.core = ov.Core()
        with _one_line("OpenVINO could not read the model"):
            self.model = self.core.read_model(model_bytes, b"")
        self.unranked = [p.get_names() for p in self.model.inputs if p.get_partial_shape().rank.is_dynamic]
        self.compiled: dict = {}
        if not self.unranked:
            self._compiled(())

    def _compiled(self, ranks: tuple):
        if ranks not in self.compiled:
            ov = _import_openvino()
            model = self.model
            if ranks:
                model = self.model.clone()
                model.reshape({min(names): ov.PartialShape.dynamic(r) for names, r in zip(self.unranked, ranks)})
            with _one_line("OpenVINO could not compile the model"):
                self.compiled[ranks] = self.core.compile_model(model, "CPU", self.config)
        return self.compiled[ranks]

    def arithmetic_dtype(self):
        """The float type the CPU plugin computes in (its INFERENCE_PRECISION_HINT; a default
        compile picks bfloat16 on CPUs that have it), or None when it is not narrower than float32."""
        compiled = next(iter(self.compiled.values()), None)
        try:
            hint = str(compiled.get_property("INFERENCE_PRECISION_HINT")) if compiled is not None else ""
        except Exception:  # a plugin without the property: full precision
            return None
        from onnx import helper
        if "bf16" in hint or "bfloat16" in hint:
            return np.dtype(helper.tensor_dtype_to_np_dtype(16))
        if "f16" in hint or "float16" in hint:
            return np.dtype(np.float16)
        return None

    def run(self, output_names, feeds: dict) -> list:
        compiled = self._compiled(tuple(np.ndim(next((feeds[n] for n in names if n in feeds), ()))
                                        for names in self.unranked))
        inputs = {n for p in compiled.inputs for n in p.get_names()}
        request = compiled.create_infer_request()  # owns the output buffers: alive until copied
        with _one_line("OpenVINO failed"):
            out = request.infer({k: v for k, v in feeds.items() if k in inputs})
        by_name = {}
        for port, value in out.items():
            for name in port.get_names():
                by_name[name] = np.array(value, copy=True)
        names = output_names or [p.get_any_name() for p in compiled.outputs]
        return [by_name[n] for n in names]


class _one_line:
    """Context manager: an OpenVINO exception (a many-line C++ trace) as one RuntimeError line."""

    def __init__(self, what: str):
        self.what = what

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if exc is None or not isinstance(exc, Exception):
            return False
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        useful = [ln for ln in lines if not ln.startswith(("Exception from", "Check '", "FrontEnd API failed",
                                                               "Model wasn't fully", "Failed operations", "Summary"))]
        raise RuntimeError(f"{self.what}: {useful[0] if useful else (lines[0] if lines else kind.__name__)}") from None


class _ReferenceSession:
    """onnx's ``ReferenceEvaluator`` behind onnxruntime's ``run`` interface."""

    def __init__(self, model_bytes: bytes):
        import onnx
        from onnx.reference import ReferenceEvaluator
        self.evaluator = ReferenceEvaluator(onnx.load_from_string(model_bytes))
        self.inputs = set(self.evaluator.input_names)

    def run(self, output_names, feeds: dict) -> list:
        return [np.asarray(v) for v in self.evaluator.run(output_names, {k: v for k, v in feeds.items()
                                                                         if k in self.inputs})]


def _import_openvino():
    try:
        import openvino as ov  # optional dependency
    except ImportError:
        raise RuntimeUnavailable("OpenVINO is not installed; install the openvino extra "
                                 "(pip install 'onnx-slice-tools[openvino]')") from None
    return ov


def require(name: str) -> None:
    """Raise RuntimeUnavailable (one line) when runtime ``name`` cannot be imported."""
    if name == OPENVINO:
        _import_openvino()


#: the runtimes with named configurations (the reference evaluator has one: built apart)
_FACTORIES: dict[str, Callable[[bytes, str], Any]] = {ONNXRUNTIME: onnxruntime_session, OPENVINO: _OpenVINOSession}


def make_session(name: str, model_bytes: bytes, config: str = FAST):
    """A session of ``model_bytes`` on runtime ``name`` (one of :data:`RUNTIMES`) in a named
    configuration (FAST or SHIPPED; the reference evaluator has one)."""
    if name == REFERENCE:
        return _ReferenceSession(model_bytes)
    return _FACTORIES[name](model_bytes, config)


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


def tflite_float_twin(model: bytes) -> bytes | None:
    """The .tflite ``model`` with the int8 constant weights of its hybrid ("dynamic range") ops
    dequantized to float32: an op whose first input is float32 and that takes a quantized int8
    constant (LiteRT then quantizes the activations on the fly and computes in integers) gets
    that constant as ``scale * (q - zero_point)`` (per-axis along its quantized dimension), so
    LiteRT runs its float kernel on the same weights.  The twin's disagreement with the file
    under LiteRT's builtin kernels is the framework's own disagreement on float outputs of
    hybrid arithmetic (verification/tolerance.py, ``calibrated_rtol``).  None when the file has
    no hybrid op (full-integer or float files: nothing to dequantize)."""
    import flatbuffers  # optional dependency (TensorFlow's and LiteRT's)
    from ai_edge_litert import schema_py_generated as schema  # optional dependency
    if not _has_hybrid_op(schema, model):  # read in place: a float file's weights are not copied
        return None
    m = schema.ModelT.InitFromPackedBuf(bytearray(model), 0)
    found = 0
    for g in m.subgraphs or []:
        tensors = g.tensors or []
        hybrid: set[int] = set()
        for op in g.operators or []:
            ins = [i for i in (op.inputs if op.inputs is not None else []) if i >= 0]
            if not ins or tensors[ins[0]].type != schema.TensorType.FLOAT32:
                continue
            hybrid.update(i for i in ins[1:] if tensors[i].type == schema.TensorType.INT8)
        for i in sorted(hybrid):
            t = tensors[i]
            q, buf = t.quantization, m.buffers[t.buffer]
            if q is None or q.scale is None or len(q.scale) == 0 or buf.data is None or len(buf.data) == 0:
                continue
            values = np.frombuffer(bytes(bytearray(buf.data)), np.int8).astype(np.float32)
            values = values.reshape([int(d) for d in t.shape]) if t.shape is not None else values
            scale = np.asarray(q.scale, np.float32)
            zero = np.asarray(q.zeroPoint if q.zeroPoint is not None and len(q.zeroPoint) else
                              np.zeros(scale.size), np.float32)
            if scale.size > 1:
                shape = [1] * values.ndim
                shape[q.quantizedDimension] = -1
                scale, zero = scale.reshape(shape), zero.reshape(shape)
            buf.data = np.frombuffer(((values - zero) * scale).astype(np.float32).tobytes(), np.uint8)
            t.type, t.quantization = schema.TensorType.FLOAT32, None
            found += 1
    if not found:
        return None
    builder = flatbuffers.Builder(max(1024, len(model)))
    builder.Finish(m.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _has_hybrid_op(schema, model: bytes) -> bool:
    """Whether an op of the .tflite ``model`` takes a float32 first input and a quantized int8
    constant (read through the flatbuffer in place, nothing copied)."""
    root = schema.Model.GetRootAs(model, 0)
    int8, float32 = schema.TensorType.INT8, schema.TensorType.FLOAT32
    for g in range(root.SubgraphsLength()):
        sub = root.Subgraphs(g)
        for k in range(sub.OperatorsLength()):
            ins = [int(i) for i in sub.Operators(k).InputsAsNumpy() if i >= 0] \
                if sub.Operators(k).InputsLength() else []
            if not ins or sub.Tensors(ins[0]).Type() != float32:
                continue
            for i in ins[1:]:
                t = sub.Tensors(i)
                q = t.Quantization()
                if t.Type() == int8 and q is not None and q.ScaleLength() and root.Buffers(t.Buffer()).DataLength():
                    return True
    return False


# --------------------------------------------------------------------------- element types and OrtValues

STRING = 8


def np_dtype(elem_type: int) -> np.dtype:
    """The numpy dtype of an ONNX element type (``ml_dtypes`` types for bfloat16, float8, int4...)."""
    from onnx import helper
    return np.dtype(object) if elem_type == STRING else np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))


def type_name(elem_type: int) -> str:
    from onnx import TensorProto
    return TensorProto.DataType.Name(elem_type).lower()


def unsigned_of(itemsize: int):
    return {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64, 16: np.uint64}[itemsize]


def ort_value(array: np.ndarray, elem_type: int):
    """An onnxruntime ``OrtValue`` of ``array`` with ONNX element type ``elem_type`` -- any type
    but string (which onnxruntime takes only as a numpy array): bfloat16 and float8 as their
    bytes, 4-bit and 2-bit types packed low bits first, as onnxruntime stores them.  Complex
    types raise ValueError: onnxruntime 1.31 has no complex tensors at all."""
    import onnxruntime as ort
    if elem_type in (14, 15):
        raise ValueError(f"onnxruntime has no {type_name(elem_type)} tensors")
    array = np.require(array, requirements="C")  # (ascontiguousarray makes a scalar 1-D)
    bits = PACKED_BITS.get(elem_type)
    if bits:
        per = 8 // bits
        codes = array.view(np.uint8).ravel() & ((1 << bits) - 1)
        codes = np.concatenate([codes, np.zeros((-codes.size) % per, np.uint8)]).reshape(-1, per)
        packed = np.zeros(codes.shape[0], np.uint8)
        for k in range(per):
            packed |= codes[:, k] << (bits * k)
        value = ort.OrtValue.ortvalue_from_shape_and_type(list(array.shape), elem_type)
        if packed.size:  # (update_inplace wants one numpy element per tensor element)
            import ctypes
            assert value.tensor_size_in_bytes() == packed.size
            ctypes.memmove(value.data_ptr(), packed.ctypes.data, packed.size)
        return value
    if array.dtype in NATIVE_DTYPES:
        return ort.OrtValue.ortvalue_from_numpy(array)
    flat = array.view(unsigned_of(array.dtype.itemsize))
    return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(flat, elem_type)


def fetch(value, elem_type: int) -> np.ndarray:
    """A numpy array (``ml_dtypes`` types where numpy has none) of an onnxruntime ``OrtValue``."""
    import ctypes
    shape = tuple(value.shape())
    dtype = np_dtype(elem_type)
    if elem_type == STRING or dtype in NATIVE_DTYPES:
        return value.numpy()
    count = int(np.prod(shape)) if shape else 1
    nbytes = value.tensor_size_in_bytes()
    raw = np.frombuffer(ctypes.string_at(value.data_ptr(), nbytes) if nbytes else b"", np.uint8)
    bits = PACKED_BITS.get(elem_type)
    if bits:
        per = 8 // bits
        codes = np.stack([(raw >> (bits * k)) & ((1 << bits) - 1) for k in range(per)], axis=1).ravel()[:count]
        return codes.astype(np.uint8).view(dtype).reshape(shape)
    return raw.view(dtype).reshape(shape)


#: dtypes onnxruntime's OrtValue takes as numpy arrays
NATIVE_DTYPES = {np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                                  np.uint32, np.uint64, np.float16, np.float32, np.float64,
                                  np.complex64, np.complex128)}
