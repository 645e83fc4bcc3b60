"""Whole-model equivalence on random inputs.

The *original* model runs in ``onnx.reference.ReferenceEvaluator`` with a
StridedSlice implementation for its flavour (our numpy reference, so the
frameworks' exact rules); the *converted* model runs in onnxruntime.  Every
graph output must match: shape and dtype exactly; values bitwise, or -- only
for floating outputs of models that compute more than slices -- within a small
tolerance, which the result then states.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field

import numpy as np

from .errors import StridedSliceError
from .errors import first_line as _line
from .plan import make_plan
from .reference import apply_plan
from .spec import MASK_NAMES, OPENVINO, TF, TFLITE, from_openvino, from_tf, from_tflite

#: Models whose weights exceed this are not run by the (pure numpy) reference evaluator.
DEFAULT_MAX_WEIGHT_BYTES = 256 * 2 ** 20
_INDEX_VALUES = (-3, -2, -1, 0, 1, 2, 3)


@dataclass
class ModelComparison:
    status: str                                   # "ok" | "mismatch" | "skipped: ..." | "failed: ..."
    outputs: dict = field(default_factory=dict)   # output name -> "ok" | "ok (max abs diff ...)" | problem
    tried: list = field(default_factory=list)     # the input shapes of each trial, {name: shape}

    @property
    def ok(self) -> bool:
        return self.status == "ok" or self.status.startswith("skipped")

    def to_json(self) -> dict:
        return {"status": self.status, "outputs": self.outputs,
                "tried_input_shapes": [{k: list(v) for k, v in t.items()} for t in self.tried]}


# --------------------------------------------------------------------------- StridedSlice for the reference

def strided_slice_ops(domains, flavor: str | None = None) -> list:
    """``OpRun`` classes computing StridedSlice in each of ``domains`` (flavour from the
    attribute types unless given)."""
    from onnx.reference.op_run import OpRun

    def _run(self, x, begin, end, strides=None, **_):
        attrs = {m: getattr(self, m, None) for m in MASK_NAMES}
        offset = getattr(self, "offset", None)
        fl = flavor or (TFLITE if offset is not None else
                        OPENVINO if any(isinstance(v, (list, tuple, str, bytes)) for v in attrs.values())
                        else TF)
        if fl == TFLITE:
            attrs["offset"] = offset or 0
        x = np.asarray(x)
        key = (fl, tuple((m, tuple(v) if isinstance(v, list) else v) for m, v in attrs.items()),
               tuple(np.asarray(begin).tolist()), tuple(np.asarray(end).tolist()),
               None if strides is None else tuple(np.asarray(strides).tolist()), x.shape)
        return (apply_plan(_cached_plan(key), x),)

    classes = []
    for domain in sorted(set(domains)):
        cls = type("StridedSlice", (OpRun,), {"op_domain": domain, "_run": _run})
        classes.append(cls)
    return classes


@functools.lru_cache(maxsize=4096)
def _cached_plan(key):
    """The plan of one StridedSlice call (models repeat the same slices many times)."""
    fl, attrs, begin, end, strides, shape = key
    attrs = dict(attrs)
    if fl == TF:
        spec = from_tf(begin, end, strides, **{m: (v or 0) for m, v in attrs.items()})
    elif fl == TFLITE:
        spec = from_tflite(begin, end, strides, **{m: (v or 0) for m, v in attrs.items()})
    else:
        spec = from_openvino(begin, end, strides, **{m: (() if v is None else v) for m, v in attrs.items()})
    return make_plan(spec, shape)


def _strided_slice_domains(proto) -> set[str]:
    domains = set()

    def walk(nodes):
        for n in nodes:
            if n.op_type == "StridedSlice":
                domains.add(n.domain)
            for a in n.attribute:
                if a.type == a.GRAPH:
                    walk(a.g.node)
                for g in a.graphs:
                    walk(g.node)
    walk(proto.graph.node)
    for f in proto.functions:
        walk(f.node)
    return domains


def _reference_evaluator(original, flavor):
    """A ReferenceEvaluator of ``original`` whose StridedSlice nodes -- in model-local
    functions too, which ``new_ops`` alone does not reach -- run our reference."""
    from onnx.reference import ReferenceEvaluator
    ops = strided_slice_ops(_strided_slice_domains(original), flavor)
    if not original.functions:
        return ReferenceEvaluator(original, new_ops=ops)
    functions: list = []
    for f in original.functions:  # a function may call the ones before it
        functions.append(ReferenceEvaluator(f, new_ops=ops, functions=list(functions)))
    return ReferenceEvaluator(original.graph, opsets={o.domain: o.version for o in original.opset_import},
                              functions=functions, new_ops=ops)


# --------------------------------------------------------------------------- inputs

def weight_bytes(proto, base_dir: str | None = None) -> int:
    """Bytes of initializer data, external data included (read from the tensor records)."""
    total = 0
    for t in proto.graph.initializer:
        if t.data_location == t.EXTERNAL:
            info = {e.key: e.value for e in t.external_data}
            if "length" in info:
                total += int(info["length"])
            elif base_dir and "location" in info:
                try:
                    total += os.path.getsize(os.path.join(base_dir, info["location"]))
                except OSError:
                    pass
        else:
            total += t.ByteSize()
    return total


#: Sizes for symbolic dims; a level is tried after the original rejected the previous one
#: (e.g. a shrink index beyond a small dim).
_SIZE_LEVELS = ((3, 2, 5, 1), (6, 4, 7, 8), (12, 16, 9, 11), (24, 33, 17, 40))


def _concrete(name: str, dims, sizes: dict, trial: int, level: int) -> tuple[int, ...]:
    """Even levels give every symbolic dim one size (exporters name one batch dim differently
    on each input: ``unk__0``, ``unk__1``); odd levels one size per dim name."""
    pool = _SIZE_LEVELS[min(level // 2, len(_SIZE_LEVELS) - 1)]
    out = []
    for k, d in enumerate(dims):
        if d.HasField("dim_value"):
            out.append(d.dim_value)
        else:
            key = "*" if level % 2 == 0 else (d.dim_param or f"{name}:{k}")
            if key not in sizes:
                sizes[key] = pool[(len(sizes) + trial) % len(pool)]
            out.append(sizes[key])
    return tuple(out)


def random_feeds(proto, rng: np.random.Generator, trial: int = 0, level: int = 0) -> dict:
    """Random values for every graph input that is not an initializer.

    Symbolic dims of one name get one size (from ``_SIZE_LEVELS[level]``); integer
    inputs get small values (they are often indices), floats standard normals."""
    from onnx import helper
    inits = {t.name for t in proto.graph.initializer}
    sizes: dict = {}
    feeds = {}
    for vi in proto.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type"):
            raise ValueError(f"input {vi.name!r} is not a tensor")
        if not tt.HasField("shape"):
            raise ValueError(f"input {vi.name!r} has an unknown rank")
        shape = _concrete(vi.name, tt.shape.dim, sizes, trial, level)
        elem = tt.elem_type
        if elem == 8:
            feeds[vi.name] = np.array([f"s{v}" for v in range(int(np.prod(shape)))], dtype=object).reshape(shape)
            continue
        dtype = helper.tensor_dtype_to_np_dtype(elem)
        if dtype == np.bool_:
            feeds[vi.name] = rng.integers(0, 2, shape).astype(bool)
        elif dtype.kind in "iu":
            low = 0 if dtype.kind == "u" else _INDEX_VALUES[0]
            feeds[vi.name] = rng.integers(low, _INDEX_VALUES[-1] + 1, shape).astype(dtype)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


# --------------------------------------------------------------------------- the comparison

def compare_models(original, converted, *, session=None, trials: int = 3, seed: int = 0,
                   flavor: str | None = None, max_weight_bytes: int = DEFAULT_MAX_WEIGHT_BYTES,
                   base_dir: str | None = None) -> ModelComparison:
    """Run ``original`` (ModelProto with its StridedSlice nodes) in the reference evaluator and
    ``converted`` (ModelProto) in onnxruntime on the same random inputs; compare every output.

    ``session``: an onnxruntime session of ``converted``, or a callable returning one (or None
    when it cannot be built), asked for only after the reference runs."""
    from .verify import make_session
    if weight_bytes(original, base_dir) > max_weight_bytes or weight_bytes(converted, base_dir) > max_weight_bytes:
        return ModelComparison(f"skipped: weights above {max_weight_bytes // 2 ** 20} MiB are not run "
                               "by the reference evaluator")
    out_names = [o.name for o in original.graph.output]
    conv_names = [o.name for o in converted.graph.output]
    if out_names != conv_names:
        return ModelComparison(f"failed: outputs differ: {out_names} vs {conv_names}")
    try:
        ref = _reference_evaluator(original, flavor)
    except Exception as exc:
        return ModelComparison(f"skipped: the reference evaluator cannot run the original: {_line(exc)}")
    rng = np.random.default_rng(seed)
    runs = []  # (feeds, expected outputs)
    level = 0
    last_problem = None
    for trial in range(trials + 4 * len(_SIZE_LEVELS)):  # rejected inputs are redrawn, larger
        if len(runs) == trials:
            break
        try:
            feeds = random_feeds(original, rng, trial, level)
        except ValueError as exc:
            return ModelComparison(f"skipped: {exc}")
        try:
            runs.append((feeds, ref.run(None, feeds)))
        except (StridedSliceError, IndexError, ValueError, TypeError) as exc:
            last_problem = f"the original rejects random inputs: {_line(exc)}"
            level += 1
        except Exception as exc:
            return ModelComparison(f"skipped: the reference evaluator failed: {_line(exc)}")
    if not runs:
        return ModelComparison(f"skipped: {last_problem}")

    if callable(session):
        session = session()
    elif session is None:
        try:
            session = make_session(converted.SerializeToString())
        except Exception as exc:
            session = None
            last_problem = _line(exc)
    if session is None:
        return ModelComparison("failed: onnxruntime cannot load the converted model"
                               + (f": {last_problem}" if last_problem else ""))
    result = ModelComparison("ok", {name: "ok" for name in out_names})
    input_names = [i.name for i in session.get_inputs()]
    for feeds, expected in runs:
        result.tried.append({k: tuple(v.shape) for k, v in feeds.items()})
        try:
            got = session.run(None, {k: feeds[k] for k in input_names})
        except Exception as exc:
            result.status = "mismatch"
            for name in out_names:
                result.outputs[name] = f"onnxruntime failed on {_shapes(feeds)}: {_line(exc)}"
            return result
        for name, g, e in zip(out_names, got, expected):
            if not result.outputs[name].startswith("ok"):
                continue  # the first mismatch of an output is the one reported
            problem, note = _compare(np.asarray(g), np.asarray(e))
            if problem:
                result.outputs[name] = f"inputs {_shapes(feeds)}: {problem}"
                result.status = "mismatch"
            elif note:
                result.outputs[name] = f"ok ({note})"
    return result


def _compare(got: np.ndarray, exp: np.ndarray) -> tuple[str | None, str | None]:
    if got.shape != exp.shape:
        return f"shape {got.shape} != expected {exp.shape}", None
    if exp.dtype.kind in "OUS" or got.dtype.kind in "OUS":
        same = got.astype(object).tolist() == exp.astype(object).tolist()
        return (None if same else "string values differ"), None
    if got.dtype != exp.dtype:
        return f"dtype {got.dtype} != expected {exp.dtype}", None
    if got.tobytes() == exp.tobytes():
        return None, None
    if exp.dtype.kind == "f" and np.allclose(got, exp, rtol=1e-4, atol=1e-5, equal_nan=True):
        diff = float(np.nanmax(np.abs(got.astype(np.float64) - exp.astype(np.float64)))) if got.size else 0.0
        return None, f"max abs diff {diff:.3g}"
    bad = np.flatnonzero(got.ravel() != exp.ravel())
    return f"{bad.size} of {exp.size} values differ (first at flat index {bad[0] if bad.size else '?'})", None


def _shapes(feeds: dict) -> str:
    return ", ".join(f"{k}{list(v.shape)}" for k, v in feeds.items())
