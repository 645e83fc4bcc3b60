"""Source-framework inputs: ``.tflite`` files, SavedModel directories and Keras files.

:func:`load_source` turns one of them into an ONNX ModelProto with every
StridedSlice kept as our custom node (tf2onnx's ``custom_ops``), so the normal
convert path lowers it exactly:

* ``.tflite``: ``tf2onnx.convert.from_tflite``; STRIDED_SLICE becomes a
  ``StridedSlice`` node whose attributes are its flatbuffer options -- the five
  masks *and* ``offset`` -- so it is read in the TFLite flavour;
* SavedModel directory: its ``serving_default`` signature through
  ``tf2onnx.convert.from_function`` (TensorFlow flavour);
* ``.keras`` / ``.h5``: the Keras model called on its inputs, the same way.

:func:`verify_against_source` runs the original in its own framework (the TFLite
interpreter, TensorFlow) and the converted ONNX model in onnxruntime on the same
random inputs and compares every output: shape, dtype and values.

TensorFlow and tf2onnx are the ``tf`` extra; they are imported only here.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConversionError, ModelError
from ..verification.checks import failed, passed, skipped
from ..io.files import KERAS_SUFFIXES, TFLITE_SUFFIXES, source_kind  # noqa: F401 - also imported from here
from .fold import drop_identity_reshapes, fold_weight_subgraphs
from .tfexport import LARGE_VARIABLE_BYTES, checked_tflite, export, export_tflite, move_to_external, require_converted

EXTRA_HINT = "pip install 'onnx-slice-tools[tf]'"


@contextmanager
def quiet_frameworks():
    """TensorFlow, TFLite and tf2onnx log to the process's stderr from C++ (absl, XNNPACK) and
    Python; the CLI's rule is one line per error and nothing else, so fd 2 is muted meanwhile."""
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _frameworks(path):
    """(tensorflow, tf2onnx, onnx) or a one-line ModelError naming the extra."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        import onnx
        import tensorflow as tf  # optional dependency
        import tf2onnx  # optional dependency
    except ImportError as exc:
        raise ModelError(f"reading this input needs TensorFlow and tf2onnx ({exc.name or exc} is missing): "
                         f"{EXTRA_HINT}", path=str(path)) from None
    logging.getLogger("tf2onnx").setLevel(logging.ERROR)
    return tf, tf2onnx, onnx


def parse_input_shapes(items) -> dict[str, list]:
    """``["x:1,3,224,224", "mask:1,?"]`` -> {"x": [1, 3, 224, 224], "mask": [1, None]}."""
    shapes = {}
    for item in items or ():
        name, sep, dims = str(item).rpartition(":")
        if not sep or not name:
            raise ModelError(f"--inputs {item!r}: expected NAME:D1,D2,... (use ? for an unknown dim)")
        if name in shapes:
            raise ModelError(f"--inputs {item!r}: input {name!r} is given more than once")
        parts = [d.strip() for d in dims.split(",")] if dims.strip() else []  # NAME: is a scalar
        if not all(parts):
            raise ModelError(f"--inputs {item!r}: an empty dim; give one size (or ?) per comma")
        try:
            shapes[name] = [None if d in ("?", "-1", "None") else int(d) for d in parts]
        except ValueError:
            raise ModelError(f"--inputs {item!r}: dims must be integers or ?") from None
        if any(d is not None and not 0 <= d < 2 ** 63 for d in shapes[name]):
            raise ModelError(f"--inputs {item!r}: a dim is a size >= 0 (or ? for an unknown dim)")
    return shapes


def parse_input_ranges(items) -> dict[str, tuple[int, int]]:
    """``["token_ids:0,999"]`` -> {"token_ids": (0, 999)} (inclusive bounds)."""
    ranges = {}
    for item in items or ():
        name, sep, bounds = str(item).rpartition(":")
        parts = bounds.split(",")
        try:
            lo, hi = (int(p) for p in parts) if sep and name and len(parts) == 2 else (None, None)
        except ValueError:
            lo = hi = None
        if lo is None or hi is None or lo > hi:
            raise ModelError(f"--input-range {item!r}: expected NAME:LO,HI with integers LO <= HI")
        ranges[name] = (lo, hi)
    return ranges


def load_source(path, *, opset: int | None = None, input_shapes: dict | None = None,
                output_names: list[str] | None = None, signature: str | None = None):
    """An ONNX ModelProto for a ``.tflite``, SavedModel directory or Keras file, with every
    StridedSlice kept as a custom node (TFLite: with its ``offset`` option).

    ``input_shapes``: {input name: dims} (None: unknown) replacing the model's own input shapes
    (SavedModel, Keras); ``output_names``: names for the ONNX outputs (default for a SavedModel:
    the signature's output keys, sorted); ``signature``: the SavedModel signature to convert
    (default ``serving_default``); ``opset``: the default-domain opset (default 17)."""
    source = Source(path, _checked_kind(path, input_shapes, signature), input_shapes, output_names, signature)
    with quiet_frameworks():
        return _load(source, opset or 17)


@dataclass(frozen=True)
class Source:
    """A framework input and the options given for it, as one value (:func:`open_source` checks
    and reads it before any work): ``path``; ``kind`` (:func:`source_kind`); ``input_shapes``
    ({input: dims}, SavedModel/Keras); ``output_names`` (the ONNX outputs' names);
    ``signature`` (a SavedModel's); ``input_ranges`` ({input: (lo, hi)}: the integer inputs'
    values in the checks); ``loaded`` (:func:`load_tf` of a SavedModel or Keras input, loaded
    once for the export and the framework check; None: not loaded yet, or a .tflite).  The
    export (:func:`export_source`) and the framework check (:func:`framework_status`,
    :func:`verify_against_source`) read it whole."""

    path: Any
    kind: str | None
    input_shapes: dict | None = None
    output_names: list | None = None
    signature: str | None = None
    input_ranges: dict | None = None
    loaded: Any = None


def _checked_kind(path, input_shapes, signature) -> str:
    """The input's :func:`source_kind`, or a one-line ModelError for an unusable input or option."""
    kind = source_kind(path)
    if kind is None:
        raise ModelError("not a .tflite file, SavedModel directory or .keras/.h5 file", path=str(path))
    if signature is not None and kind != "saved_model":
        raise ModelError(f"--signature applies to SavedModel directories, not to a {kind} input", path=str(path))
    if input_shapes and kind == "tflite":
        raise ModelError("--inputs does not apply to a .tflite input (its shapes are fixed in the file)",
                         path=str(path))
    return kind


def export_source(source, folder, *, opset: int | None = None) -> Path:
    """:func:`load_source` of ``source`` (a path, or a :class:`Source` from :func:`open_source`:
    its options and what it loaded) written to ``folder/model.onnx`` with its large initializers in
    ``folder/model.onnx.data``; returns the model's path.  A SavedModel's or Keras model's
    variables of ``LARGE_VARIABLE_BYTES`` or more go from TensorFlow to that file one at a time,
    without being frozen (tfexport.export): they are never held in a ModelProto.  A ``.tflite``
    has its large constant buffers moved out the same way (tfexport.export_tflite); initializers
    tf2onnx still made in memory are written there when of 1 MiB or more.
    (The slice-update family tf2onnx leaves raw is rewritten by the pipeline: api._slice_updates.)"""
    import onnx
    folder = Path(folder)
    file, data = folder / "model.onnx", folder / "model.onnx.data"
    if not isinstance(source, Source):  # a path given alone: no options
        source = Source(source, _checked_kind(source, None, None))
    with quiet_frameworks():
        model = _load(source, opset or 17, data)
    move_to_external(model, data, 1 << 20)  # what tf2onnx kept in memory (a .tflite's quantized weights)
    onnx.save_model(model, str(file))
    return file


def _load(source: Source, opset, external_data=None):
    path, kind, output_names = source.path, source.kind or "", source.output_names  # (kind: _checked_kind's)
    tf, tf2onnx, onnx = _frameworks(path)
    traced = None
    try:
        if kind == "tflite":
            model = export_tflite(path, opset=opset, output_names=output_names, external_data=external_data,
                                  large_buffer_bytes=LARGE_VARIABLE_BYTES)
        else:
            fn, sig, keys = traced = source.loaded or _tf_callable(tf, path, kind, source.input_shapes,
                                                                    source.signature)
            model = export(fn, sig, opset=opset, large_variable_bytes=LARGE_VARIABLE_BYTES,
                           external_data=external_data)
            require_converted(model, path)
            if output_names or keys:
                _rename_outputs(model, output_names or keys, path)
        # what tf2onnx folds on constants, left on the weights moved out before it converted
        fold_weight_subgraphs(model, Path(external_data).parent if external_data else None)
        drop_identity_reshapes(model)  # what tf2onnx's layout optimiser leaves behind
    except ConversionError as exc:
        if exc.path is None:  # (raised where the input's path is not known)
            raise ConversionError(exc.reason, path=str(path)) from None
        raise
    except ModelError:
        raise
    except Exception as exc:  # tf2onnx / TF raise many exception types for unreadable models
        if traced is not None:  # a variable written: a failed conversion, not bad input
            from .updates import refuse_state_writes
            refuse_state_writes(traced[0], traced[1], path)
        raise ModelError(f"tf2onnx could not convert the {kind.replace('_', ' ')}: {framework_error_line(exc)}",
                         path=str(path)) from None
    return model


#: Lines of TensorFlow / Keras error text that wrap the real message.
_WRAPPER_LINES = ("Exception encountered when calling", "Arguments received by", "\u2022 ", "[[", "File \"")


def framework_error_line(exc: BaseException) -> str:
    """The informative line of a TensorFlow / Keras / tf2onnx exception.

    TensorFlow wraps an error raised while tracing in ``in user code:``, a stack and, last, the
    real exception (``ValueError: ...``); Keras adds ``Exception encountered when calling
    X.call().`` and the arguments; a failed graph run starts with ``Graph execution error:``, a
    stack, then the kernel's message and ``[[{{node ...}}]]``.  The first line of these says
    nothing: the real exception's first meaningful line is taken instead."""
    import re
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return type(exc).__name__
    if lines[0].startswith(("Graph execution error", "{{function_node")):
        at = next((k for k, ln in enumerate(lines) if ln.startswith("[[")), len(lines))
        return lines[at - 1] if at > 0 else lines[0]
    if lines[0].startswith("in user code"):
        for k in range(len(lines) - 1, 0, -1):
            m = re.match(r"(\w+(?:Error|Exception)): ?(.*)", lines[k])
            if m:
                kind, msg, rest = m.group(1), m.group(2), lines[k + 1:]
                for ln in [msg, *rest]:
                    if ln and not ln.startswith(_WRAPPER_LINES):
                        return f"{kind}: {ln}"
                return kind
    return next((ln for ln in lines if not ln.startswith(_WRAPPER_LINES)), lines[0])


def _rename_outputs(model, names, path) -> None:
    outs = model.graph.output
    if len(names) != len(outs):
        raise ModelError(f"{len(names)} output names given, the model has {len(outs)} outputs", path=str(path))
    inputs = {i.name for i in model.graph.input}
    for out, new in zip(outs, names):  # ONNX names each value once: an output cannot take an input's name
        if new in inputs and out.name != new:
            raise ModelError(f"output {new!r} has the name of an input (a decode step returning its 'cache' "
                             "input updated, say): ONNX needs distinct names; give the outputs other names "
                             "with --outputs", path=str(path))
    for out, new in zip(outs, names):
        old = out.name
        for init in model.graph.initializer:  # an output TensorFlow folded to a constant
            if init.name == old:
                init.name = new
        for node in model.graph.node:
            node.output[:] = [new if o == old else o for o in node.output]
            node.input[:] = [new if i == old else i for i in node.input]
        out.name = new


def load_tf(path, *, input_shapes: dict | None = None, signature: str | None = None):
    """A SavedModel or Keras input loaded once, for :func:`export_source` and
    :func:`verify_against_source` (``loaded=``): (tf.function, its input signature, output keys)."""
    with quiet_frameworks():
        tf, _, _ = _frameworks(path)
        return _tf_callable(tf, path, source_kind(path), input_shapes, signature)


_NOT_KERAS_ARCHIVE = ("not a valid Keras archive (a .keras file is a zip archive holding config.json): "
                      "save the model again with model.save(...)")

#: A .keras member expanding to more than this many times its stored size is not unpacked by us.
_ZIP_MAX_EXPANSION = 100


def _load_keras(tf, path):
    """``keras.models.load_model(path, compile=False)``; a ``.keras`` archive is first unpacked into
    a private temporary folder and loaded from there: Keras reads an archive's weights file whole
    into memory, an unpacked folder's one variable at a time.  Its config then names Keras's
    ``Zeros`` for each built-in initializer: building the model fills every variable before the
    weights file overwrites it, and a random initializer holds several copies of a variable
    meanwhile."""
    import tempfile
    import zipfile
    if Path(path).suffix.lower() != ".keras" or Path(path).is_dir():
        return tf.keras.models.load_model(str(path), compile=False)
    if not zipfile.is_zipfile(path):
        raise ModelError(_NOT_KERAS_ARCHIVE, path=str(path))
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError):
        raise ModelError(_NOT_KERAS_ARCHIVE, path=str(path)) from None
    if not any(m.filename == "config.json" for m in members):
        raise ModelError(_NOT_KERAS_ARCHIVE + " (no config.json in it)", path=str(path))
    with zipfile.ZipFile(path) as archive:
        if any(m.file_size > _ZIP_MAX_EXPANSION * max(m.compress_size, 1 << 20) for m in members):
            return tf.keras.models.load_model(str(path), compile=False)  # Keras's own checks and errors
        with tempfile.TemporaryDirectory(prefix="onnx-slice-tools-keras-") as folder:
            archive.extractall(folder)  # zipfile drops absolute paths and ".." from member names
            config = Path(folder) / "config.json"
            config.write_text(json.dumps(_zero_initializers(json.loads(config.read_text()))))
            return tf.keras.models.load_model(folder, compile=False)


def _zero_initializers(config):
    """``config`` (a Keras model config) with each built-in ``*_initializer`` set to ``Zeros``."""
    if isinstance(config, list):
        return [_zero_initializers(c) for c in config]
    if not isinstance(config, dict):
        return config
    return {k: {"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": None}
            if k.endswith("_initializer") and isinstance(v, dict) and v.get("module") == "keras.initializers"
            else _zero_initializers(v) for k, v in config.items()}


def _tf_callable(tf, path, kind, input_shapes, signature=None):
    """(tf.function taking positional tensors, its input signature, the output keys)."""
    input_shapes = input_shapes or {}
    if kind == "keras":
        try:
            model = _load_keras(tf, path)
        except ModelError:
            raise
        except Exception as exc:
            raise ModelError(f"Keras could not load the model: {framework_error_line(exc)}", path=str(path)) from None
        return _keras_callable(tf, model, path, input_shapes)
    key = signature or "serving_default"
    try:
        loaded = tf.saved_model.load(str(path))
        serving = loaded.signatures[key]
    except KeyError:
        have = ", ".join(sorted(loaded.signatures)) or "none"
        raise ModelError(f"the SavedModel has no signature {key!r} (it has: {have}); choose one with "
                         "--signature", path=str(path)) from None
    except Exception as exc:
        raise ModelError(f"TensorFlow could not load the SavedModel: {framework_error_line(exc)}",
                         path=str(path)) from None
    specs = serving.structured_input_signature[1]
    names = sorted(specs)
    _check_input_shapes(input_shapes, {n: specs[n].shape.rank for n in names}, path)
    sig = [tf.TensorSpec(input_shapes.get(n, specs[n].shape), specs[n].dtype, name=n) for n in names]
    keys = sorted(serving.structured_outputs)

    @tf.function(input_signature=sig)
    def fn(*args):
        out = serving(**dict(zip(names, args)))
        return tuple(out[k] for k in keys)
    fn._keep_alive = loaded  # the signature needs its object alive
    return fn, sig, keys


def _keras_callable(tf, model, path, input_shapes):
    """(tf.function taking positional tensors, its input signature, output keys) for a Keras model.

    A model built on a dict of inputs is called with a dict keyed by its input names (Keras 3
    refuses a list when the dict's keys are not in sorted order), otherwise with a list (one
    input: the tensor).  A dict of outputs is returned as a tuple in sorted key order, the keys
    naming the ONNX outputs (as a SavedModel's signature keys do; otherwise None).  The function
    is traced here, so that an error of the model on its own inputs is reported as such, not as
    a failed conversion."""
    struct = getattr(model, "input", None)
    if isinstance(struct, dict):
        names, tensors = list(struct), list(struct.values())
    else:
        tensors = list(model.inputs)
        names = [getattr(t, "name", f"input_{i}").split(":")[0] for i, t in enumerate(tensors)]
    _check_input_shapes(input_shapes, {n: len(t.shape) for n, t in zip(names, tensors)}, path)
    sig = [tf.TensorSpec(input_shapes.get(n, list(t.shape)), t.dtype, name=n) for n, t in zip(names, tensors)]
    as_dict = isinstance(struct, dict)
    keys: list = []

    @tf.function(input_signature=sig)
    def fn(*args):
        if as_dict:
            inputs = dict(zip(names, args))
        else:
            inputs = list(args) if len(args) > 1 else args[0]
        out = model(inputs, training=False)
        if isinstance(out, dict):
            keys[:] = sorted(out)
            return tuple(out[k] for k in keys)
        return tuple(out) if isinstance(out, (list, tuple)) else out
    try:
        fn.get_concrete_function()
    except Exception as exc:  # Keras / TensorFlow raise many types while tracing
        raise ModelError(f"the Keras model fails on its declared inputs: {framework_error_line(exc)}",
                         path=str(path)) from None
    return fn, sig, list(keys) or None


def _check_input_shapes(input_shapes: dict, ranks: dict, path) -> None:
    """A one-line ModelError (``--inputs``) for a name the model has no input of, or dims of
    another rank than the input's."""
    for name, dims in input_shapes.items():
        if name not in ranks:
            raise ModelError(f"--inputs {name}: the model has no input {name!r} (its inputs: "
                             f"{', '.join(ranks) or 'none'})", path=str(path))
        if ranks[name] is not None and len(dims) != ranks[name]:
            raise ModelError(f"--inputs {name}: {len(dims)} dims given, the input has rank {ranks[name]}",
                             path=str(path))


# --------------------------------------------------------------------------- verification

@dataclass
class SourceCheck:
    """Per output: "bitwise", "within tolerance: ..." (the figures of :func:`.tolerance.agree`) or
    what differs."""

    outputs: dict[str, str] = field(default_factory=dict)
    trials: int = 0
    calibration: dict = field(default_factory=dict)  # output -> the framework's own disagreement (steps)
    steps: dict = field(default_factory=dict)        # output -> tolerance.Steps (quantized outputs)
    shipped: dict = field(default_factory=dict)      # output -> onnxruntime's default session vs the framework

    @property
    def ok(self) -> bool:
        return bool(self.outputs) and all(_agreed(s) for s in self.outputs.values())

    @property
    def bitwise(self) -> bool:
        return bool(self.outputs) and all(s == "bitwise" for s in self.outputs.values())


def _random_input(rng, shape, dtype: np.dtype, bounds=None) -> np.ndarray:
    """Random values of ``shape`` (unknown dims: 2) and ``dtype``; integers in ``bounds`` (lo, hi,
    inclusive) when given (:func:`~onnx_slice_tools.verification.input_ranges.index_input_ranges`)."""
    from ..verification.inputs import random_values
    shape = [2 if d is None or d < 0 else int(d) for d in shape]
    ints = bounds if bounds is not None else (-5 if dtype.kind == "i" else 0, 5)
    return random_values(rng, shape, dtype, ints=tuple(ints))


def _agreed(status: str) -> bool:
    return status == "bitwise" or status.startswith("within tolerance")


def compare_output(framework: np.ndarray, onnx_output: np.ndarray, *, exact: bool = False, steps=None,
                   rtol: float | None = None) -> str:
    """The framework's output against onnxruntime's under the one float rule
    (:func:`.tolerance.agree`): "bitwise", "within tolerance: ..." or what differs.  ``exact``:
    the output is pure data movement in the ONNX graph, so floats too must be bitwise.  Other
    outputs may differ by rounding: the rewrite only moves data, but the arithmetic around it
    (a MatMul, a convolution) runs in another order in onnxruntime than in TensorFlow/TFLite.
    ``steps``: the output is quantized (tolerance.Steps): compared in steps.  ``rtol``: a float
    output's calibrated tolerance (tolerance.calibrated_rtol; None: the default)."""
    from ..verification.tolerance import agree
    return agree(framework, onnx_output, exact=exact, steps=steps, rtol=rtol).detail


def verify_against_source(source, onnx_model, *, trials: int = 3, seed: int = 0,
                          input_shapes: dict | None = None, signature: str | None = None,
                          folder=None, loaded=None, input_ranges: dict | None = None,
                          shipped: bool = False) -> SourceCheck:
    """Run the original ``source`` (a path with the options given here, or a :class:`Source`
    holding them; TFLite interpreter / TensorFlow) and ``onnx_model`` (onnxruntime) on the
    same random inputs; compare every output.  ``folder``: where ``onnx_model``'s external data
    lives (onnxruntime maps it from there instead of reading it into memory); ``loaded``: see
    :func:`load_tf`.  SavedModel/Keras: integer inputs feeding indices are drawn inside the range
    the graph implies (:func:`~onnx_slice_tools.verification.input_ranges.index_input_ranges`),
    or ``input_ranges`` ({name: (lo, hi)}, inclusive) where given; unknown dims get one size
    per axis across inputs (a token_ids and a padding_mask of one model stay the same shape).
    ``shipped``: also run ``onnx_model`` in onnxruntime's default configuration on the same inputs
    and compare it with the framework under the same rule (``check.shipped``)."""
    if not isinstance(source, Source):
        source = Source(source, source_kind(source), input_shapes, None, signature, input_ranges, loaded)
    with quiet_frameworks():
        return _verify(source, onnx_model, trials, seed, folder, shipped)


def _verify(source: Source, onnx_model, trials, seed, folder=None, shipped=False) -> SourceCheck:
    from ..verification.compare import float_arithmetic_outputs
    from ..verification.lowerings import make_session
    from ..verification.input_ranges import index_input_ranges
    from ..verification.quantized import output_rtols, output_steps, relative_disagreement
    from ..verification.tolerance import CALIBRATION_K, default_rtol
    from ..verification.runtimes import SHIPPED, onnxruntime_session
    path = source.path
    tf, _, _ = _frameworks(path)
    if folder is None:
        onnx_bytes = onnx_model.SerializeToString()
        session = make_session(onnx_bytes)
    else:  # a file beside its external data: onnxruntime accepts a path where it takes bytes
        checked = Path(folder) / "checked.onnx"
        checked.write_bytes(onnx_model.SerializeToString())
        onnx_bytes = str(checked)
        session = make_session(onnx_bytes)
    default = onnxruntime_session(onnx_bytes, SHIPPED) if shipped else None
    onnx_inputs = session.get_inputs()
    onnx_names = [o.name for o in session.get_outputs()]
    rng = np.random.default_rng(seed)
    check = SourceCheck()
    arithmetic = float_arithmetic_outputs(onnx_model)
    ranges = {**index_input_ranges(onnx_model), **(source.input_ranges or {})}
    if source.kind == "tflite":
        run = tflite_runner(path, ranges, calibrate=_needs_calibration(onnx_model))
    else:
        run = _tf_runner(tf, source, ranges)
    runs = []
    for _ in range(trials):
        feeds, expected, *other = run(rng, onnx_inputs)  # (other: LiteRT's other kernel sets)
        got = session.run(None, feeds)
        if len(got) != len(expected):
            check.outputs["outputs"] = f"{len(got)} outputs, framework {len(expected)}"
            return check
        runs.append((expected, got, other[0] if other else [],
                     default.run(None, feeds) if default is not None else None))
    calibration = kernel_disagreement(onnx_model, onnx_names, [(e, o) for e, _, others, _ in runs for o in others])
    check.calibration = calibration
    integers = [n for n, x in zip(onnx_names, runs[0][0]) if np.asarray(x).dtype.kind in "iu"] if runs else []
    steps = check.steps = output_steps(onnx_model, calibration, integers)
    dtypes = {n: np.asarray(x).dtype for n, x in zip(onnx_names, runs[0][0])} if runs else {}
    rtols = output_rtols(calibration, dtypes)
    calibrated = {n: f" (= {CALIBRATION_K} x LiteRT's own {rel:.3g}: its kernel sets disagree)"
                  for n, rel in relative_disagreement(calibration).items()
                  if n in rtols and rtols[n] > default_rtol(dtypes[n])}
    for expected, got, _, as_shipped in runs:
        for results, outs in ((check.outputs, got), (check.shipped, as_shipped)):
            if outs is None:
                continue
            for name, a, b in zip(onnx_names, expected, outs):
                status = compare_output(a, b, exact=name not in arithmetic, steps=steps.get(name),
                                        rtol=rtols.get(name)) + calibrated.get(name, "")
                before = results.get(name, "bitwise")
                if _agreed(before) and (before == "bitwise" or not _agreed(status)):  # keep the first failure
                    results[name] = status
        check.trials += 1
    return check


def kernel_disagreement(onnx_model, names, pairs) -> dict:
    """{output name: (largest, |median|) difference in steps} between the framework's kernel
    sets over ``pairs`` (builtin outputs, another kernel set's outputs), for the outputs that are
    quantized (verification/quantized.output_scales) or integer; and {output name: (RELATIVE,
    largest relative difference)} for the float arithmetic outputs that are not quantized
    (tolerance.relative_difference; quantized.output_rtols)."""
    from ..verification.compare import float_arithmetic_outputs
    from ..verification.quantized import RELATIVE, output_scales
    from ..verification.tolerance import is_float, relative_difference, step_differences
    scales = output_scales(onnx_model)
    arithmetic = float_arithmetic_outputs(onnx_model) if pairs else set()
    found: dict = {}
    for expected, other in pairs:
        for name, a, b in zip(names, expected, other):
            a, b = np.asarray(a), np.asarray(b)
            if name not in scales and is_float(a.dtype):
                rel = relative_difference(a, b) if name in arithmetic else None
                if rel is not None:
                    found[name] = (RELATIVE, max(rel, found.get(name, (RELATIVE, 0.0))[1]))
                continue
            if name not in scales and a.dtype.kind not in "iu":
                continue
            d = step_differences(a, b, scales.get(name))
            if d is None or d.size == 0:
                continue
            worst, median = float(np.max(np.abs(d))), abs(float(np.median(d)))
            was = found.get(name, (0.0, 0.0))
            found[name] = (max(was[0], worst), max(was[1], median))
    return found


def tflite_calibration(path, onnx_model, *, trials: int = 3, seed: int = 0, input_ranges: dict | None = None) -> dict:
    """The framework's own disagreement on a ``.tflite`` file: LiteRT's builtin kernels against
    its XNNPACK kernels (and, for a file with hybrid ops, its float kernels on the dequantized
    weights) on the random inputs of the framework check, per quantized or integer output of
    ``onnx_model`` (its conversion; weights need not be loaded): {output name: (largest,
    |median|) difference in steps}, and per float arithmetic output of a hybrid file: {output
    name: (RELATIVE, largest relative difference)} (:func:`kernel_disagreement`).  {} when
    LiteRT cannot run the file."""
    from ..verification.input_ranges import index_input_ranges
    ranges = {**index_input_ranges(onnx_model), **(input_ranges or {})}
    names = [o.name for o in onnx_model.graph.output]
    inits = {t.name for t in onnx_model.graph.initializer}
    onnx_inputs = [_Named(i.name) for i in onnx_model.graph.input if i.name not in inits]
    rng = np.random.default_rng(seed)
    try:
        with quiet_frameworks():
            run = tflite_runner(path, ranges, calibrate=_needs_calibration(onnx_model))
            pairs = []
            for _ in range(trials):
                _, expected, *other = run(rng, onnx_inputs)
                pairs += [(expected, o) for o in (other[0] if other else [])]
    except Exception:  # LiteRT cannot run it: the framework check says so itself
        return {}
    return kernel_disagreement(onnx_model, names, pairs)


def _needs_calibration(onnx_model) -> bool:
    """Whether a graph output is quantized or integer, so that LiteRT's XNNPACK kernels are
    loaded to calibrate it; float outputs are calibrated only when the file has a hybrid op
    (:func:`tflite_runner` decides that from the file itself)."""
    from ..verification.quantized import output_scales
    integer = {2, 3, 4, 5, 6, 7, 12, 13}
    return bool(output_scales(onnx_model)) or any(o.type.tensor_type.elem_type in integer
                                                  for o in onnx_model.graph.output)


@dataclass
class _Named:
    name: str


#: Sizes tried, in order, for the dims a .tflite declares unknown (``shape_signature`` -1) whose
#: placeholder size in the file LiteRT cannot run with (an audio model storing 1 sample).
UNKNOWN_DIM_SIZES = (16, 128, 1024, 16000)


def tflite_input_shapes(interp) -> list:
    """The input shapes the framework check feeds: the file's own, or -- when LiteRT cannot
    prepare or run the model at those (an input of unknown size stored as 1, too short for a
    convolution) -- the first of :data:`UNKNOWN_DIM_SIZES` that it runs at, given to every unknown
    dim but a leading (batch) one."""
    details = interp.get_input_details()
    stored = [[int(v) for v in d["shape"]] for d in details]
    unknown = [[int(v) < 0 for v in d.get("shape_signature", d["shape"])] for d in details]
    if not any(any(u) for u in unknown):  # fixed shapes: nothing to choose
        interp.allocate_tensors()
        return stored
    candidates = [stored] + [[[n if u and (k > 0 or len(dims) == 1) else v for k, (v, u) in enumerate(zip(dims, unk))]
                              for dims, unk in zip(stored, unknown)] for n in UNKNOWN_DIM_SIZES]
    for shapes in candidates:
        try:
            for d, dims in zip(details, shapes):
                interp.resize_tensor_input(d["index"], dims, strict=True)
            interp.allocate_tensors()
            for d, dims in zip(details, shapes):
                interp.set_tensor(d["index"], np.zeros(dims, dtype=d["dtype"]))
            interp.invoke()
            return shapes
        except (RuntimeError, ValueError):  # LiteRT: "failed to prepare", a kernel's size check
            continue
    for d, dims in zip(details, stored):  # none runs: the file's own shapes, and LiteRT's own error
        interp.resize_tensor_input(d["index"], dims, strict=True)
    interp.allocate_tensors()
    return stored


def tflite_runner(path, ranges=None, calibrate: bool = False):
    """run(rng, onnx_inputs) -> (feeds, LiteRT's builtin outputs, [the outputs of LiteRT's other
    kernel sets]).  The other kernel sets (the framework's own disagreement, tolerance.py): with
    ``calibrate``, its XNNPACK kernels; and whenever the file has hybrid ("dynamic range") ops,
    its XNNPACK kernels and its float kernels on the dequantized weights
    (runtimes.tflite_float_twin) -- LiteRT's hybrid kernels quantize activations on the fly, so
    its own float arithmetic on the same weights differs from them (float files, full-integer
    files: no twin, and the float rule stays the default).  Integer inputs: ``ranges`` ({ONNX
    input name: (lo, hi)}) where given; a quantized input (a scale in the file) the whole range
    of its type; other integers the small default."""
    from ..verification.runtimes import tflite_float_twin, tflite_interpreter
    data = Path(path).read_bytes()
    interp = tflite_interpreter(data)
    shapes = tflite_input_shapes(interp)
    details = interp.get_input_details()
    try:
        twin = tflite_float_twin(data)
    except Exception:  # an unusual flatbuffer: no twin, LiteRT's own kernels only
        twin = None
    others = []
    for content, xnnpack in ((data, True), (twin, False)) if calibrate or twin is not None else ():
        if content is None:
            continue
        try:
            it = tflite_interpreter(content, xnnpack=xnnpack)
            for d, dims in zip(it.get_input_details(), shapes):
                it.resize_tensor_input(d["index"], dims, strict=True)
            it.allocate_tensors()
            others.append(it)
        except (RuntimeError, ValueError):  # LiteRT refuses this kernel set: nothing to calibrate with
            continue
    ranges = ranges or {}

    def run(rng, onnx_inputs):
        feeds, arrays = {}, []
        for k, d in enumerate(details):
            name = _match_name(d["name"], onnx_inputs, k)
            dtype = np.dtype(d["dtype"])
            bounds = ranges.get(name)
            scale = d.get("quantization", (0.0, 0))[0]
            if bounds is None and dtype.kind in "iu" and dtype.itemsize == 1 and scale:
                bounds = (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max))  # a quantized input
            x = _random_input(rng, shapes[k], dtype, bounds)
            arrays.append(x)
            feeds[name] = x
        results = []
        for k, it in enumerate((interp, *others)):
            try:
                for d, x in zip(it.get_input_details(), arrays):
                    it.set_tensor(d["index"], x)
                it.invoke()
            except (RuntimeError, ValueError):
                if k == 0:  # LiteRT's builtin kernels: the framework check's answer
                    raise
                continue  # another kernel set fails on these inputs: nothing to calibrate with
            results.append([np.array(it.get_tensor(o["index"]), copy=True) for o in it.get_output_details()])
        return feeds, results[0], results[1:]
    return run


def _tf_runner(tf, source: Source, ranges=None):
    fn, sig, _ = source.loaded or _tf_callable(tf, source.path, source.kind, source.input_shapes, source.signature)
    ranges = ranges or {}

    def run(rng, onnx_inputs):
        by_name = {i.name: i for i in onnx_inputs}
        feeds, arrays, sizes = {}, [], {}
        for k, spec in enumerate(sig):  # the ONNX input of the same name: the orders may differ
            inp = by_name.get(spec.name) or by_name.get(f"{spec.name}:0") or onnx_inputs[k]
            declared = spec.shape.as_list() if spec.shape.rank is not None else [None] * len(inp.shape)
            shape = []
            for axis, (o, t) in enumerate(zip(inp.shape, declared)):
                if isinstance(o, int) and o >= 0:
                    shape.append(o)
                elif t is not None:
                    shape.append(t)
                else:  # one size per unknown axis across inputs
                    shape.append(sizes.setdefault(axis, 2))
            x = _random_input(rng, shape, np.dtype(spec.dtype.as_numpy_dtype), ranges.get(inp.name))
            arrays.append(x)
            feeds[inp.name] = x
        out = fn(*[tf.constant(a) for a in arrays])
        out = out if isinstance(out, (list, tuple)) else [out]
        return feeds, [np.asarray(o.numpy()) for o in out]
    return run


def _match_name(name: str, onnx_inputs, k: int) -> str:
    names = [i.name for i in onnx_inputs]
    for cand in (name, name.split(":")[0]):
        if cand in names:
            return cand
    return names[k]


def source_files(path) -> list[Path]:
    """The files of a framework input (a SavedModel directory's files, or the file itself):
    outputs must never be any of them."""
    p = Path(path)
    return sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]


def _check_range_names(input_ranges: dict, names: list, path) -> None:
    for name in input_ranges:
        if name not in names:
            raise ModelError(f"--input-range {name}: the model has no input {name!r} (its inputs: "
                             f"{', '.join(names)})", path=str(path))


def tflite_input_names(path) -> list[str]:
    """The input names of the .tflite at ``path`` as LiteRT gives them, and each without its
    ``:0`` suffix (``--input-range`` takes either)."""
    from ..verification.runtimes import tflite_interpreter
    interp = tflite_interpreter(checked_tflite(path))
    names = [d["name"] for d in interp.get_input_details()]
    return list(dict.fromkeys([n.split(":")[0] for n in names] + names))


def open_source(path, *, input_shapes: dict | None = None, output_names: list | None = None,
                signature: str | None = None, input_ranges: dict | None = None) -> Source:
    """A framework input and its options checked before any work (one-line ModelError), and
    read: the :class:`Source`, whose ``loaded`` is :func:`load_tf` of a SavedModel or Keras input
    (None for a .tflite), loaded once for the export and the framework check."""
    kind = _checked_kind(path, input_shapes, signature)
    if input_ranges and kind == "tflite":  # named as LiteRT names the file's inputs
        _check_range_names(input_ranges, tflite_input_names(path), path)
    loaded = None
    if kind != "tflite":
        loaded = load_tf(path, input_shapes=input_shapes, signature=signature)
        if input_ranges:
            _check_range_names(input_ranges, [spec.name for spec in loaded[1]], path)
    return Source(path, kind, input_shapes, output_names, signature, input_ranges, loaded)


def tflite_options(path, file, input_ranges: dict | None, verify: bool):
    """``(input_ranges, calibration)`` of a .tflite input once tf2onnx wrote its ONNX ``file``:
    the ranges keyed by the ONNX input names (LiteRT's end ``:0``), and -- with verification --
    the disagreement of LiteRT's own two kernel sets per quantized or integer output
    (:func:`tflite_calibration`), the allowance of the as-shipped run's comparison in steps."""
    import onnx
    header = onnx.load(str(file), load_external_data=False)  # names, shapes and scales: no weights
    inits = {t.name for t in header.graph.initializer}
    if input_ranges:
        names = [i.name for i in header.graph.input if i.name not in inits]
        input_ranges = {n + ":0" if n not in names and n + ":0" in names else n: r  # LiteRT's names end ":0"
                        for n, r in input_ranges.items()}
        _check_range_names(input_ranges, names, path)
    calibration = tflite_calibration(path, header, input_ranges=input_ranges) if verify else None
    return input_ranges, calibration


def _quantized_shipped_failure(result) -> bool:
    """Whether the conversion failed only in the as-shipped run, only on quantized outputs that
    are arithmetic (not pure data movement): onnxruntime's default optimiser fuses Q/DQ around an
    op into an integer kernel that rounds otherwise than the checked run.  Such a run is then
    judged against the framework itself, under the quantized rule (:func:`framework_status`)."""
    from ..verification.checks import kind
    from ..verification.compare import float_arithmetic_outputs
    from ..verification.quantized import output_scales
    rep = result.report
    if kind(rep.model_checks.get("shipped", "")) != "failed" or not rep.shipped_problems:
        return False
    quantized = set(output_scales(result.model)) & float_arithmetic_outputs(result.model)
    if not set(rep.shipped_problems) <= quantized:
        return False
    saved = rep.model_checks["shipped"]
    rep.model_checks["shipped"] = passed()
    try:
        return rep.ok
    finally:
        rep.model_checks["shipped"] = saved


def framework_status(source: Source, result, verify: bool, folder=None) -> str:
    """The ``framework`` check of ``result`` (the conversion of ``source``'s export): passed
    (bitwise, or within the float tolerance of
    :func:`compare_output`, with its figures), failed (what differs), or skipped (why it did not run)."""
    who = "the TFLite interpreter" if source.kind == "tflite" else "TensorFlow"
    if not verify:
        return skipped(f"verification off, {who} was not run")
    rep = result.report
    reconsider = _quantized_shipped_failure(result)
    if not rep.ok and not reconsider:
        return skipped(f"the conversion failed, {who} was not run")
    try:
        check = verify_against_source(source, result.model, folder=folder, shipped=reconsider)
    except Exception as exc:  # the framework or onnxruntime could not run the models on random inputs
        if reconsider:
            return skipped(f"the conversion failed, {who} could not be run: {framework_error_line(exc)}")
        return skipped(f"could not run both models on random inputs: {framework_error_line(exc)}")
    if reconsider:
        if check.ok and check.shipped and all(_agreed(v) for v in check.shipped.values()):
            old = next(iter(rep.shipped_problems.values()))
            figures = "; ".join(f"{k}: {v}" for k, v in check.shipped.items() if v != "bitwise") or "bitwise"
            rep.model_checks["shipped"] = passed(
                f"onnxruntime's default configuration fuses the quantized graph and rounds otherwise than the "
                f"checked run ({old}); it agrees with {who} under the quantized rule on {check.trials} random "
                f"inputs: {figures}")
    # (otherwise the as-shipped failure stands; the framework check below reports what it saw)
    if not check.ok:
        bad = ", ".join(f"{k}: {v}" for k, v in check.outputs.items() if v != "bitwise")
        return failed(f"differs from {who}: {bad}")
    if check.bitwise:
        return passed(f"bitwise against {who} on {check.trials} random inputs")
    close = "; ".join(f"{k}: {v}" for k, v in check.outputs.items() if v != "bitwise")
    return passed(f"against {who} on {check.trials} random inputs; outputs not bitwise {close}")
