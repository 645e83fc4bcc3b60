"""The real runtimes as oracles: TensorFlow and OpenVINO StridedSlice on numpy arrays.

Needs the ``oracles`` extra (``tensorflow-cpu``, ``openvino``); each import is
lazy.  Each oracle returns an :class:`Outcome`: the array the runtime produced,
or the error it raised.

OpenVINO: the output *shape* and accept/reject come from OpenVINO's shape
inference (``openvino.opset1.strided_slice`` validates at construction) plus
its reference evaluator (``Node.evaluate``, which raises on an out-of-range
shrink index); the *values* come from the reference evaluator, except where
that evaluator is known to be unsound (see :func:`openvino_strided_slice` and
docs/semantics.md).
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from .runtimes import tflite_interpreter
from ..semantics.spec import MASK_NAMES, TF, TFLITE, SliceSpec, from_openvino, from_tf, from_tflite


@dataclass
class Outcome:
    ok: bool
    values: np.ndarray | None = None
    shape: tuple | None = None
    error: str | None = None


_tf = None
_ov = None


def _tensorflow():
    global _tf
    if _tf is None:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow as tf  # optional dependency
        _tf = tf
    return _tf


def _openvino():
    global _ov
    if _ov is None:
        import openvino as ov  # optional dependency
        import openvino.opset1 as ops
        _ov = (ov, ops)
    return _ov


def _index_dtype(values) -> Any:
    return np.int32 if all(-(2 ** 31) <= v < 2 ** 31 for v in values) else np.int64


def tf_strided_slice(x: np.ndarray, spec: SliceSpec, index_dtype=None) -> Outcome:
    """``tf.strided_slice`` on x (eager, CPU)."""
    tf = _tensorflow()
    begin, end, strides = spec.begin, spec.end, spec.strides
    if begin is None or end is None or strides is None:
        raise TypeError("tf_strided_slice needs a spec whose begin, end and strides are all known")
    dt = index_dtype or _index_dtype(begin + end + strides)

    def signed(m: int) -> int:
        return m - 2 ** 32 if m >= 2 ** 31 else m

    try:
        out = tf.strided_slice(
            x, tf.constant(begin, dt, shape=[len(begin)]),
            tf.constant(end, dt, shape=[len(end)]),
            tf.constant(strides, dt, shape=[len(strides)]),
            **{m: signed(getattr(spec, m)) for m in MASK_NAMES})
        arr = out.numpy()
    except (tf.errors.InvalidArgumentError, ValueError) as exc:
        msg = str(exc).split("}}")[-1].strip().splitlines()[0]
        return Outcome(False, error=msg)
    arr = np.asarray(arr)
    if x.dtype.kind in "SUO":
        arr = arr.astype(x.dtype)  # TF returns bytes for strings
    return Outcome(True, arr, tuple(arr.shape))


def _ov_tensor(a: np.ndarray, keep: list, pad: int = 0):
    """An ov.Tensor over a copy of ``a`` followed by ``pad`` spare elements.

    The padding gives the reference evaluator's out-of-bounds read on empty
    inputs (see below) memory that belongs to us."""
    ov, _ = _openvino()
    a = np.ascontiguousarray(a)
    buf = np.zeros(a.size + pad, dtype=a.dtype)
    buf[: a.size] = a.ravel()
    keep.append(buf)  # the tensor shares buf's memory: keep it alive while it is used
    return ov.Tensor(buf, list(a.shape), ov.Type(a.dtype))


def _ov_masks(spec: SliceSpec) -> dict:
    lengths = spec.mask_lengths or (spec.n,) * 5
    return {m: spec.mask_list(m, length) for m, length in zip(MASK_NAMES, lengths)}


def conflicting_indices(spec: SliceSpec) -> list[int]:
    """Indices with the ellipsis bit and the new_axis or shrink bit: OpenVINO's shape inference
    lets the ellipsis win, its reference evaluator does not (and then overruns its buffer)."""
    return [i for i in range(spec.n) if spec.bit("ellipsis_mask", i)
            and (spec.bit("new_axis_mask", i) or spec.bit("shrink_axis_mask", i))]


def openvino_strided_slice(x: np.ndarray, spec: SliceSpec) -> Outcome:
    """OpenVINO StridedSlice-1 as its runtime behaves.

    * validation and output shape: shape inference (``opset1.strided_slice``);
    * run-time rejection (shrink index out of range) and values: the reference
      evaluator (``Node.evaluate``), with two documented adjustments:
      - indices that carry the ellipsis bit and the new_axis/shrink bit are evaluated
        with those losing bits cleared (shape inference's reading; the evaluator's own
        reading writes past its output buffer);
      - on an input with a zero-size dim the evaluator reports a wrong shape (a reverse
        slice of an empty axis counts 1), so only shape inference's shape is used;
      - on a rank-0 input the evaluator reports an extra unit dim; its values are
        compared in shape inference's shape.
    String tensors are validated but not evaluated (``evaluate`` crashes on them).
    """
    ov, ops = _openvino()
    masks = _ov_masks(spec)
    is_string = x.dtype.kind in "SUO"
    try:
        param = ops.parameter(list(x.shape), ov.Type.string if is_string else ov.Type(x.dtype))
        node = ops.strided_slice(param, np.array(spec.begin, np.int64), np.array(spec.end, np.int64),
                                 np.array(spec.strides, np.int64), **masks)
        pshape = node.get_output_partial_shape(0)
    except Exception as exc:  # OpenVINO raises RuntimeError subclasses for validation failures
        return Outcome(False, error=(str(exc).strip().splitlines() or [type(exc).__name__])[0])
    shape = tuple(d.get_length() for d in pshape) if pshape.is_static else None
    if is_string:
        return Outcome(True, None, shape)
    conflicts = conflicting_indices(spec)
    if conflicts:
        clear = sum(1 << i for i in conflicts)
        spec = replace(spec, new_axis_mask=spec.new_axis_mask & ~clear,
                       shrink_axis_mask=spec.shrink_axis_mask & ~clear)
        node = ops.strided_slice(param, np.array(spec.begin, np.int64), np.array(spec.end, np.int64),
                                 np.array(spec.strides, np.int64), **_ov_masks(spec))
    out = [ov.Tensor(ov.Type(x.dtype), ov.Shape([0]))]
    keep: list = []
    inputs = [_ov_tensor(x, keep, pad=64)] + [_ov_tensor(np.array(v, np.int64), keep)
                                              for v in (spec.begin, spec.end, spec.strides)]
    try:
        node.evaluate(out, inputs)
    except Exception as exc:
        return Outcome(False, error=(str(exc).strip().splitlines() or [type(exc).__name__])[0])
    if x.size == 0:
        return Outcome(True, None, shape)
    res = out[0]
    arr = np.array(res.data, copy=True).reshape(tuple(res.get_shape()))
    if x.ndim == 0 and shape is not None and arr.size == int(np.prod(shape)):
        arr = arr.reshape(shape)  # the evaluator reports an extra unit dim for rank-0 inputs
    return Outcome(True, arr, shape)


# --------------------------------------------------------------------------- TFLite

_TFLITE_TYPES = {"float32": "FLOAT32", "float16": "FLOAT16", "float64": "FLOAT64", "int32": "INT32",
                 "int64": "INT64", "int8": "INT8", "uint8": "UINT8", "int16": "INT16", "uint32": "UINT32",
                 "bool": "BOOL"}


def _tflite_type(dtype) -> str | None:
    """TFLite's TensorType name for a numpy dtype (byte strings: STRING), or None."""
    dtype = np.dtype(dtype)
    return "STRING" if dtype.kind in "SO" else _TFLITE_TYPES.get(dtype.name)


def tflite_schema():
    """TFLite's flatbuffer schema module (shipped with TensorFlow)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from tensorflow.lite.python import schema_py_generated  # optional dependency
    return schema_py_generated


def strided_slice_tflite_model(shape, dtype, spec: SliceSpec, *, version: int | None = None,
                               runtime: Sequence[str] = ()) -> bytes:
    """A one-op ``.tflite`` model: input ``x`` -> STRIDED_SLICE (int32 begin/end/strides, the
    spec's five masks and ``offset``) -> output ``y``.  Built directly in the flatbuffer, so
    every option the schema has (``offset`` included) can be set.  ``runtime``: the index
    tensors ("begin", "end", "strides") that are graph inputs after ``x`` instead of constants."""
    import flatbuffers  # optional dependency (TensorFlow's)
    s = tflite_schema()
    model = s.ModelT()
    model.version = 3
    code = s.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = s.BuiltinOperator.STRIDED_SLICE
    code.version = version or (8 if spec.offset else 4)
    model.operatorCodes = [code]
    buffers = [s.BufferT()]

    def tensor(name, shp, typ, data=None):
        t = s.TensorT()
        t.name, t.shape, t.type, t.buffer = name, list(shp), typ, 0
        if data is not None:
            buf = s.BufferT()
            buf.data = np.asarray(data, np.int32).tobytes()
            buffers.append(buf)
            t.buffer = len(buffers) - 1
        return t

    type_name = _tflite_type(dtype)
    if type_name is None:
        raise ValueError(f"dtype {np.dtype(dtype)} has no TFLite tensor type here")
    ttype = getattr(s.TensorType, type_name)
    n = spec.n
    graph = s.SubGraphT()
    graph.name = "main"
    graph.tensors = [tensor("x", shape, ttype)] + [
        tensor(name, [n], s.TensorType.INT32, None if name in runtime else getattr(spec, name))
        for name in ("begin", "end", "strides")
    ] + [tensor("y", [], ttype)]
    op = s.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs = 0, [0, 1, 2, 3], [4]
    op.builtinOptionsType = s.BuiltinOptions.StridedSliceOptions
    opts = s.StridedSliceOptionsT()
    opts.beginMask, opts.endMask = _int32(spec.begin_mask), _int32(spec.end_mask)
    opts.ellipsisMask, opts.newAxisMask = _int32(spec.ellipsis_mask), _int32(spec.new_axis_mask)
    opts.shrinkAxisMask, opts.offset = _int32(spec.shrink_axis_mask), bool(spec.offset)
    op.builtinOptions = opts
    graph.operators = [op]
    graph.inputs = [0] + [k for k, name in enumerate(("begin", "end", "strides"), 1) if name in runtime]
    graph.outputs = [4]
    model.subgraphs, model.buffers = [graph], buffers
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _int32(m: int) -> int:
    return m - 2 ** 32 if m >= 2 ** 31 else m


def tflite_strided_slice(x: np.ndarray, spec: SliceSpec, runtime: Sequence[str] = ()) -> Outcome:
    """TFLite's STRIDED_SLICE kernel (LiteRT's interpreter, builtin kernels) on x.

    The model is built in the flatbuffer (begin/end/strides constant, or graph inputs fed
    with the spec's values for the fields in ``runtime``); errors are the interpreter's
    Prepare/Invoke failures.  Where the kernel is undefined (see plan_tflite) the values
    are whatever memory held: compare only where ours accepts."""
    if _tflite_type(x.dtype) is None:
        raise ValueError(f"dtype {x.dtype} has no TFLite tensor type here")
    try:
        interp = tflite_interpreter(strided_slice_tflite_model(x.shape, x.dtype, spec, runtime=runtime))
        interp.allocate_tensors()
        details = interp.get_input_details()
        if x.size:  # an empty input is left as allocated (setting one fails: "Invalid tensor size")
            interp.set_tensor(details[0]["index"], x)
        for d, name in zip(details[1:], [f for f in ("begin", "end", "strides") if f in runtime]):
            interp.set_tensor(d["index"], np.asarray(getattr(spec, name), np.int32))
        interp.invoke()
        arr = _output(interp)
    except (RuntimeError, ValueError) as exc:
        return Outcome(False, error=(str(exc).strip().splitlines() or [type(exc).__name__])[0])
    return Outcome(True, arr, tuple(arr.shape))


def _output(interp) -> np.ndarray:
    """The interpreter's output; an empty dynamic output has no buffer ("Invalid tensor size"
    from ``get_tensor``), so its shape comes from the tensor details."""
    out = interp.get_output_details()[0]
    try:
        return np.array(interp.get_tensor(out["index"]), copy=True)
    except ValueError:
        details = interp._get_tensor_details(out["index"], 0)  # the resized shape
        shape = tuple(int(d) for d in details["shape"])
        if 0 not in shape:
            raise
        return np.empty(shape, details["dtype"])


CRASHED = "the TFLite interpreter crashed"


def _apply_each(fn, items: list) -> list:
    return [fn(*item) for item in items]


class Isolated:
    """``fn`` (a module-level function) in a child process, for runtimes that may kill the process
    (segfault, SIGFPE) on an input whose result they leave undefined: such an item gives ``crashed``
    instead of a dead run.  :meth:`many` sends a batch in one trip; a batch that crashed is re-run
    item by item in a fresh child to find the one at fault."""

    def __init__(self, fn, crashed):
        self._fn, self._crashed, self._pool = fn, crashed, None

    def many(self, items: list) -> list:
        """``fn(*item)`` for each of ``items`` (tuples of picklable arguments)."""
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool
        from multiprocessing import get_context
        if self._pool is None:
            self._pool = ProcessPoolExecutor(1, mp_context=get_context("spawn"))
        try:
            return self._pool.submit(_apply_each, self._fn, items).result(timeout=600)
        except BrokenProcessPool:
            self._pool = None
            if len(items) == 1:
                return [self._crashed]
            return [out for item in items for out in self.many([item])]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


class IsolatedTFLite(Isolated):
    """:func:`tflite_strided_slice` in a child process: on specs where the kernel is undefined
    the interpreter may crash; that is the Outcome ``CRASHED``, not a dead test run.
    :meth:`many` takes ``(x, spec, runtime)`` tuples."""

    def __init__(self):
        super().__init__(tflite_strided_slice, Outcome(False, error=CRASHED))

    def __call__(self, x: np.ndarray, spec: SliceSpec, runtime: Sequence[str] = ()) -> Outcome:
        return self.many([(x, spec, tuple(runtime))])[0]


def run_oracle(x: np.ndarray, spec: SliceSpec) -> Outcome:
    if spec.flavor == TFLITE:
        return tflite_strided_slice(x, spec)
    return tf_strided_slice(x, spec) if spec.flavor == TF else openvino_strided_slice(x, spec)


# --------------------------------------------------------------------------- random cases

class RandomSource:
    """What the case generator needs; adapters exist for ``random.Random`` and hypothesis."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def choice(self, seq):
        return seq[self.integer(0, len(seq) - 1)]

    def chance(self, p: float) -> bool:
        return self.integer(0, 999) < int(p * 1000)


_BIG = [2 ** 31 - 1, -(2 ** 31), 2 ** 31, 2 ** 40, -(2 ** 40), 2 ** 63 - 1, -(2 ** 63)]
DTYPES = ["float32", "int32", "int64", "float16", "float64", "int8", "uint8", "bool"]
TFLITE_DTYPES = ["float32", "int32", "int64", "int8", "uint8", "int16", "bool"]


def random_lowering_input(src, flavor: str, *, runtime_chance: float, max_rank: int = 6):
    """A random spec planned for a static, symbolic or unknown-rank input, with each of
    begin/end/strides a runtime value with probability ``runtime_chance``: (input kind, plan,
    runtime fields), or None when the framework rejects the spec (the target tests and
    scripts/target_corpus.py draw their cases here)."""
    from ..errors import StridedSliceError
    from ..semantics.plan import make_plan
    x, spec = random_case(src, flavor, max_rank=max_rank)
    mode = src.choice(["static", "symbolic", "unknown rank"])
    shape = {"static": x.shape, "symbolic": tuple(f"d{i}" for i in range(x.ndim)), "unknown rank": None}[mode]
    fields = [f for f in ("begin", "end", "strides") if spec.n and src.chance(runtime_chance)]
    try:
        make_plan(spec, x.shape)
        if fields:
            spec = _at_runtime(spec, fields)
        return mode, make_plan(spec, shape), fields
    except StridedSliceError:
        return None


def random_target_case(src, target, *, runtime_chance: float, max_rank: int = 5):
    """A random lowering (:func:`random_lowering_input`, the three flavours) for ``target``, with
    int32 or int64 runtime indices, as the per-rewrite checks hold it: (CheckCase, its one-case
    model of opset 17), or None when the framework rejects the spec (tests/lowering/
    test_default_sessions.py and scripts/default_sessions.py draw here)."""
    from ..lowering.lower import lower
    from .lowerings import CheckCase, build_model
    drawn = random_lowering_input(src, src.choice(["tf", "openvino", "tflite"]), runtime_chance=runtime_chance,
                                  max_rank=max_rank)
    if drawn is None:
        return None
    _, plan, fields = drawn
    dtype = src.choice(["int32", "int64"])
    case = CheckCase(lower(plan, 17, {f: dtype for f in fields}, target=target), np.dtype(np.float32), 1,
                     index_types={f: dtype for f in fields})
    return case, build_model([case], 17)


def reference_runs(case, src, rng: np.random.Generator, *, shapes: int, draws: int):
    """Runs of ``case``'s one-case model to compare with the reference: for each of the first
    ``shapes`` concrete shapes of its plan, ``draws`` draws of its runtime begin/end/strides
    (one without): (shape, values, feed, expected) -- the flavour's reference result, or None
    where the framework raises (the model must fail there).  Draws the reference cannot judge
    (undefined behaviour, TFLite's unsupported cases) are left out.  ``src`` draws the values
    (indices around the dim's bounds, small strides), ``rng`` the float input."""
    from dataclasses import replace

    from ..errors import StridedSliceError
    from ..semantics.plan import make_plan
    from ..semantics.reference import apply_plan
    from .lowerings import concrete_shapes, random_input
    spec, fields = case.written_spec, case.runtime_fields
    dtype = next(iter(case.index_types.values()), "int64")
    for shape in concrete_shapes(case.lowering.plan)[:shapes]:
        x = random_input(shape, np.dtype(np.float32), rng)
        try:
            dims = {a.index: a.dim for a in make_plan(spec, shape).axes if a.index is not None}
        except StridedSliceError:
            continue
        for _ in range(draws if fields else 1):
            values = {f: [src.choice(_STRIDES) if f == "strides" else _index_value(src, dims.get(k))
                          for k in range(spec.n)] for f in fields}
            feed = {"x0": x, **{f"{f[0]}0": np.array(v, dtype=dtype) for f, v in values.items()}}
            try:
                expected = apply_plan(make_plan(replace(spec, runtime_length=None, **values) if values else spec,
                                                shape), x)
            except StridedSliceError as exc:
                if exc.undefined or exc.unsupported:
                    continue
                expected = None
            yield shape, values, feed, expected


_STRIDES = [-3, -2, -1, 0, 1, 1, 2, 3]


def _index_value(src, dim) -> int:
    d = dim if isinstance(dim, int) else 3
    return src.choice([-d - 2, -d - 1, -d, -d + 1, -2, -1, 0, 1, 2, d - 1, d, d + 1, d + 3])


def target_against_framework(src, flavor: str, target, runtimes, max_rank: int = 4):
    """One random static spec (static or symbolic input) lowered for ``target`` and run on each of
    ``runtimes``, compared with the framework itself (:func:`run_oracle`): {runtime: problem or
    None}, or None when the framework rejects the spec (tests/test_targets.py and
    scripts/target_corpus.py draw here)."""
    from onnx import helper

    from ..errors import StridedSliceError
    from ..lowering.lower import lower
    from ..semantics.plan import make_plan
    from .runtimes import make_session
    from ..lowering.targets import find_violations
    from .lowerings import CheckCase, build_model
    x, spec = random_case(src, flavor, max_rank=max_rank)
    oracle = run_oracle(x, spec)
    if not oracle.ok:
        return None
    shape = x.shape if src.chance(0.5) else tuple(f"d{i}" for i in range(x.ndim))
    try:
        plan = make_plan(spec, shape)
    except StridedSliceError:
        return None
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    proto = build_model([CheckCase(lower(plan, 17, target=target), x.dtype, elem)], 17)
    where = f"{spec.index_notation()} ({spec.flavor}) on {shape}"
    broken = find_violations(proto, target)
    out = {"constraints": f"{where}: {[v.constraint for v in broken]}" if broken else None}
    for name in runtimes:
        try:
            got = np.asarray(make_session(name, proto.SerializeToString()).run(["y0"], {"x0": x})[0])
            problem = compare(Outcome(True, got, got.shape), oracle)
        except Exception as exc:  # reported as the problem
            problem = f"{type(exc).__name__}: {exc}"
        out[name] = f"{where}: {problem}" if problem else None
    return out


def random_case(src: RandomSource, flavor: str, max_rank: int = 6) -> tuple[np.ndarray, SliceSpec]:
    """A random input and spec: dims 0..5 (0 and 1 common), values in and out of range,
    negative values, strides +-1..3 (rarely 0), mask bits beyond len(begin).  TFLite: ranks
    0-5, int32 values, ``offset`` in 30% of the cases."""
    if flavor == TFLITE:
        max_rank = min(max_rank, 5)
    rank = src.integer(0, max_rank) if src.chance(0.05) else src.integer(1, max_rank)
    shape = tuple(src.choice([0, 1, 1, 2, 3, 3, 4, 5]) for _ in range(rank))
    if src.chance(0.3):
        shape = tuple(1 if d == 0 else d for d in shape)
    n = src.integer(0, rank + 3)

    def value() -> int:
        if src.chance(0.04):
            return src.choice(_BIG)
        return src.integer(-7, 7)

    begin = [value() for _ in range(n)]
    end = [value() for _ in range(n)]
    strides = [0 if src.chance(0.02) else src.choice([1, 1, 1, -1, -1, 2, -2, 3, -3]) for _ in range(n)]
    width = n + src.integer(0, 3)

    def mask(p: float) -> list[int]:
        return [int(src.chance(p)) for _ in range(width)]

    masks = {"begin_mask": mask(0.3), "end_mask": mask(0.3), "new_axis_mask": mask(0.12),
             "shrink_axis_mask": mask(0.2), "ellipsis_mask": [0] * width}
    if width and src.chance(0.5):
        masks["ellipsis_mask"][src.integer(0, width - 1)] = 1
        if src.chance(0.05):
            masks["ellipsis_mask"][src.integer(0, width - 1)] = 1
    dtype = np.dtype(src.choice(TFLITE_DTYPES if flavor == TFLITE else DTYPES))
    size = int(np.prod(shape)) if shape else 1
    x = (np.arange(size) % 251).astype(dtype).reshape(shape)
    if dtype == np.bool_:
        x = ((np.arange(size) * 7919) % 3 == 0).reshape(shape)
    if flavor in (TF, TFLITE):
        bits = {k: sum(b << i for i, b in enumerate(v)) for k, v in masks.items()}
        if flavor == TFLITE:
            return x, from_tflite([_clip32(v) for v in begin], [_clip32(v) for v in end], strides,
                                  offset=src.chance(0.3), **bits)
        return x, from_tf(begin, end, strides, **bits)
    if src.chance(0.15):  # masks of other lengths: empty, or unequal (OpenVINO rejects the latter)
        k = src.choice(MASK_NAMES)
        masks[k] = masks[k][: src.integer(0, width)]
    return x, from_openvino(begin, end, strides, begin_mask=masks["begin_mask"], end_mask=masks["end_mask"],
                            new_axis_mask=masks["new_axis_mask"], shrink_axis_mask=masks["shrink_axis_mask"],
                            ellipsis_mask=masks["ellipsis_mask"])


def _at_runtime(spec: SliceSpec, fields: Sequence[str]) -> SliceSpec:
    """``spec`` with the index ``fields`` ("begin", "end", "strides") given at run time: their
    values unknown, their length kept as ``runtime_length``."""
    return replace(spec, runtime_length=spec.n, begin=None if "begin" in fields else spec.begin,
                   end=None if "end" in fields else spec.end,
                   strides=None if "strides" in fields else spec.strides)


def _clip32(v: int) -> int:
    return min(max(v, -(2 ** 31)), 2 ** 31 - 1)


def compare(ours: Outcome, theirs: Outcome) -> str | None:
    """None when the outcomes agree exactly (accept/reject, shape, dtype, bitwise values)."""
    if ours.ok != theirs.ok:
        return (f"ours {'accepted' if ours.ok else 'rejected'} ({ours.error or ours.shape}), "
                f"runtime {'accepted' if theirs.ok else 'rejected'} ({theirs.error or theirs.shape})")
    if not ours.ok:
        return None
    if theirs.shape is not None and (ours.shape is None or tuple(ours.shape) != tuple(theirs.shape)):
        return f"shape: ours {ours.shape}, runtime {theirs.shape}"
    if theirs.values is not None:
        a, b = ours.values, theirs.values
        if a is None or a.shape != b.shape:
            return f"value shape: ours {None if a is None else a.shape}, runtime {b.shape}"
        if a.dtype != b.dtype:
            return f"dtype: ours {a.dtype}, runtime {b.dtype}"
        if a.tobytes() != b.tobytes():
            return f"values differ: ours {a.ravel()[:8]}, runtime {b.ravel()[:8]}"
    return None


def compare_tflite(ours: Outcome, theirs: Outcome) -> str | None:
    """:func:`compare`, except that where we reject a spec on which TFLite's kernel is undefined
    (or, as LiteRT does, an INT32_MIN stride) the interpreter's output is not compared, and a
    crash of the interpreter is only acceptable where we reject.  Where we refuse a defined
    result as not expressible (plan_tflite: an ``offset`` output sized apart from the input)
    the interpreter must have returned one."""
    if theirs.error == CRASHED:
        return None if not ours.ok else f"the interpreter crashed where ours accepted ({ours.shape})"
    if not ours.ok and theirs.ok and any(w in (ours.error or "") for w in ("undefined", "INT32_MIN",
                                                                            "not expressible")):
        return None
    return compare(ours, theirs)


def our_outcome(x: np.ndarray, spec: SliceSpec, runtime: Sequence[str] = ()) -> Outcome:
    """Our reference on x; ``runtime``: the index fields given at run time, whose plan may be
    refused (e.g. TFLite's offset with a run-time end) where the constant spec is not."""
    from ..errors import StridedSliceError
    from ..semantics.plan import make_plan
    from ..semantics.reference import slice_array
    try:
        if runtime:
            make_plan(_at_runtime(spec, runtime), x.shape)
        arr = slice_array(spec, x)
    except StridedSliceError as exc:
        return Outcome(False, error=str(exc))
    return Outcome(True, arr, tuple(arr.shape))
