"""The whole-model check, in place: the converted model itself, exactly.

Two proofs together say the converted model computes what the original computes:

* **structure** (verification/structure.py, :func:`structure.structural_diff`): outside the
  replaced StridedSlice nodes nothing changed;
* **rewrites in place** (:func:`run_inplace`): one onnxruntime run of the *converted* model on
  random inputs with, as extra outputs, what reaches each rewrite (data and runtime
  begin/end/strides; a slice update's x, update, starts, value) and what it produces; each
  output must equal, bitwise, the op's reference applied to the tensors that really reached it
  (TFLite GELU: under the float tolerance rule).  What a rewrite taps and how its reference is
  computed are its op's (verification/records.py, one interface); this module makes the taps
  and runs them.

No reference evaluator, one session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import threading

import dataclasses
import functools
import itertools

import numpy as np

from .budget import Budget
from .checks import PASSED, detail, failed, kind, passed, skipped
from .exact import exact_outputs, same_bits as same_slice  # noqa: F401 - re-exported
from .records import Reference, in_place
from .segments import parted_session
from .structure import same_values, structural_diff  # noqa: F401 - re-exported
from ..graphs.table import NodeTable
from ..errors import first_line as _line

# --------------------------------------------------------------------------- sizes and memory


class Skip(Exception):
    """The in-place run cannot be done; the message is the reason."""


_BASE = 3
_MAX_SIZE = 1 << 16


def _elem_size(elem: int) -> int:
    from onnx import helper
    try:
        return max(1, np.dtype(helper.tensor_dtype_to_np_dtype(elem)).itemsize)
    except Exception:  # strings and unknown types: a guess
        return 8


def _fed_inputs(proto):
    inits = {t.name for t in proto.graph.initializer}
    return [vi for vi in proto.graph.input if vi.name not in inits]


def _with_sizes(sk, sizes: dict):
    """A copy of the skeleton's inputs with every symbolic dim set from ``sizes`` (the skeleton
    itself, unmodified, when it has none)."""
    import onnx
    if all(d.HasField("dim_value") for vi in _fed_inputs(sk) for d in vi.type.tensor_type.shape.dim) \
            and not any(_unranked_vector(vi, sizes) for vi in _fed_inputs(sk)):
        return sk
    m = onnx.ModelProto()
    m.CopyFrom(sk)
    for vi in _fed_inputs(m):
        if _unranked_vector(vi, sizes):  # an index vector of unknown rank: 1-D (index_vectors)
            vi.type.tensor_type.shape.dim.add().dim_value = sizes[f"{vi.name}:0"]
            continue
        for k, d in enumerate(vi.type.tensor_type.shape.dim):
            if not d.HasField("dim_value"):
                d.dim_value = sizes[_dim_key(vi, k, d)]
    return m


def _unranked_vector(vi, sizes: dict) -> bool:
    """An input declared without a shape that :func:`choose_sizes` sized as a 1-D vector."""
    return vi.type.HasField("tensor_type") and not vi.type.tensor_type.HasField("shape") \
        and f"{vi.name}:0" in sizes


def _dim_key(vi, k, d):
    return d.dim_param or f"{vi.name}:{k}"


def infer_at_sizes(sk, sizes):
    """name -> (elem, shape) at these sizes, and the first invalid (negative) dim found."""
    from ..graphs.shape_inference import infer
    try:
        inferred = infer(_with_sizes(sk, sizes))
    except Exception as exc:
        return {}, f"shape inference: {_line(exc)}"
    return inferred_shapes(inferred)


def inferred_shapes(inferred) -> tuple[dict, str | None]:
    """name -> (elem, dims) of every value shape inference gave ``inferred`` (a ModelProto) a
    shape, and the first invalid dim or Reshape found (:func:`infer_at_sizes`)."""
    shapes, bad = {}, None
    # a type's bytes -> ((elem, dims) or None, a dim is negative): models repeat a few types many times
    read: dict = {}
    g = inferred.graph
    for vi in itertools.chain(g.input, g.value_info, g.output):
        key = vi.type.SerializeToString()
        hit = read.get(key)
        if hit is None:
            known = _elem_dims(vi.type)
            hit = read[key] = (known, known is not None and any(d is not None and d < 0 for d in known[1]))
        known, negative = hit
        if known is None:
            continue
        if negative and bad is None:
            bad = f"{vi.name} would have shape {list(known[1])}"
        shapes[vi.name] = known
    return shapes, bad or _bad_reshape(inferred.graph, shapes)


def _elem_dims(t) -> tuple | None:
    """(elem type, dims: dim_value or None) of a tensor TypeProto with a shape, else None."""
    if not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    tt = t.tensor_type
    return tt.elem_type, tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim)


def _bad_reshape(graph, shapes: dict) -> str | None:
    """The first main-graph Reshape whose input (of known shape at these sizes) cannot take its
    constant target shape (no 0 or -1 in it): another element count.  Shape inference does not
    flag it, onnxruntime fails at run time (a model reshaping its input to [200, 80] runs at
    batch 1 only)."""
    from onnx import numpy_helper
    consts = {t.name: t for t in graph.initializer}
    consts.update({n.output[0]: a.t for n in graph.node if n.op_type == "Constant"
                   for a in n.attribute if a.name == "value"})
    for node in graph.node:
        if node.op_type != "Reshape" or node.domain not in ("", "ai.onnx") or len(node.input) < 2:
            continue
        dims = shapes.get(node.input[0], (None, None))[1]
        target = consts.get(node.input[1])
        if dims is None or None in dims or target is None:
            continue
        want = [int(v) for v in numpy_helper.to_array(target).reshape(-1)]
        if any(v <= 0 for v in want):
            continue
        if int(np.prod(dims, dtype=np.int64)) != int(np.prod(want, dtype=np.int64)):
            return f"Reshape {node.name!r} of {list(dims)} to {want}"
    return None


def vector_pins(proto, vectors: dict) -> dict:
    """{dim key: length} fixing the unknown length of each index vector input (input_ranges.
    index_vectors) of ``proto``; an input without a shape is keyed ``name:0`` (fed as 1-D).
    Raises Skip when two vectors share a named dim but need different lengths."""
    pins: dict = {}
    declared = {vi.name: vi for vi in _fed_inputs(proto)}
    for name, vec in vectors.items():
        if not vec.pinned:
            continue
        vi = declared[name]
        tt = vi.type.tensor_type
        key = _dim_key(vi, 0, tt.shape.dim[0]) if tt.HasField("shape") else f"{name}:0"
        if pins.get(key, vec.length) != vec.length:
            raise Skip(f"input {name!r} needs length {vec.length}, but its dim {key!r} is also the length "
                       f"{pins[key]} another index vector needs: no size runs both")
        pins[key] = vec.length
    return pins


def _declared_sizes_invalid(bad: str) -> str:
    return f"the declared input sizes give invalid shapes ({bad})"


def declared_shapes(proto, inferred) -> dict:
    """What :func:`choose_sizes` gives the skeleton of ``proto`` when all its sizes are declared
    (:func:`all_sizes_declared`), read from ``inferred``, the strict shape inference of ``proto``
    itself that passed: the same inference with the declarations checked, plus the shapes of the
    initializers the skeleton makes typed inputs.  Raises Skip as choose_sizes does."""
    from ..rewrite.shapes import skeleton_input
    shapes, bad = inferred_shapes(inferred)
    if bad is not None:
        raise Skip(_declared_sizes_invalid(bad))
    declared = {vi.name for vi in proto.graph.input}
    for t in proto.graph.initializer:
        if t.name not in declared and skeleton_input(t):
            shapes.setdefault(t.name, (t.data_type, tuple(t.dims)))
    return shapes


def all_sizes_declared(proto) -> bool:
    """Whether every graph input of ``proto`` (overridable initializers too) has a shape of
    known dims: a skeleton with no size to choose."""
    for vi in proto.graph.input:
        t = vi.type
        if not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
            return False
        if not all(d.HasField("dim_value") for d in t.tensor_type.shape.dim):
            return False
    return True


def choose_sizes(sk, pins: dict | None = None) -> tuple[dict, dict]:
    """Sizes for the symbolic dims of the fed inputs: small (3); else 1 (a model whose constant
    Reshape fixes an unknown batch dim to 1); else grown where shape inference at those sizes
    gives a negative dim (e.g. a 400-wide Conv kernel on a length) or a Reshape cannot take them.
    ``pins`` (:func:`vector_pins`): dims whose size is fixed -- the lengths index vectors
    must have; never grown.  Returns (sizes, inferred shapes).  Raises Skip when no size up
    to 65536 works."""
    pins = pins or {}
    keys = []
    for vi in _fed_inputs(sk):
        if not vi.type.HasField("tensor_type"):
            raise Skip(f"input {vi.name!r} is not a tensor")
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            if f"{vi.name}:0" in pins:
                continue
            raise Skip(f"input {vi.name!r} has an unknown rank")
        for k, d in enumerate(tt.shape.dim):
            key = _dim_key(vi, k, d)
            if not d.HasField("dim_value") and key not in keys and key not in pins:
                keys.append(key)
    sizes = {**{k: _BASE for k in keys}, **pins}
    shapes, bad = infer_at_sizes(sk, sizes)
    if bad is None:
        return sizes, shapes
    if not keys:
        raise Skip(_declared_sizes_invalid(bad))
    ones = {**{k: 1 for k in keys}, **pins}
    shapes, bad = infer_at_sizes(sk, ones)  # a model fixed to batch 1 behind an unknown dim
    if bad is None:
        return ones, shapes
    size = _BASE
    while bad is not None:  # every symbolic dim together, x4 per step
        size *= 4
        if size > _MAX_SIZE or not keys:
            raise Skip(f"no input size up to {_MAX_SIZE} gives valid shapes ({bad})")
        sizes = {**{k: size for k in keys}, **pins}
        shapes, bad = infer_at_sizes(sk, sizes)
    for k in keys:  # then back to small, one dim at a time, where that stays valid
        trial = dict(sizes, **{k: _BASE})
        got, problem = infer_at_sizes(sk, trial)
        if problem is None:
            sizes, shapes = trial, got
    return sizes, shapes


class Liveness:
    """The main graph's value lifetimes (producer and last consumer of each value, node by
    node), read from ``proto`` once, on the first :meth:`peak`: one model's estimates at several
    sizes or with several kept sets cost one read of its nodes (and one sizing per ``shapes``)."""

    def __init__(self, proto, table: NodeTable | None = None):
        self.proto, self.table = proto, table  # (``table``: proto's main graph's, when the caller has it)
        self._tables: tuple | None = None
        self._sized: tuple | None = None  # (shapes, what _sizes made of them) of the last peak's shapes

    def _read(self) -> tuple:
        if self._tables is None:
            table = self.table if self.table is not None else NodeTable(self.proto.graph)
            made, at = [], []  # every value a node makes, and that node's index
            last: dict = {}
            for k, (ins, outs) in enumerate(zip(table.inputs, table.outputs)):
                for i in ins:
                    last[i] = k
                for o in outs:
                    made.append(o)
                    at.append(k)
            self._tables = (made, np.asarray(at, dtype=np.int64), len(table), last,
                            [o.name for o in self.proto.graph.output], [vi.name for vi in _fed_inputs(self.proto)])
        return self._tables

    def _sizes(self, shapes: dict) -> tuple:
        """(value name -> bytes for the values of known shape in ``shapes``, the bytes each node
        makes, the bytes freed after each node's last read), kept for the next call with the same
        dict: a shapes dict is never changed once made, each inference makes its own."""
        if self._sized is not None and self._sized[0] is shapes:
            return self._sized[1]
        made, at, end, consumed, _, _ = self._read()
        size: dict = {}
        by_type: dict = {}  # (elem, dims) -> bytes or None: models repeat a few shapes many times
        for name, (elem, dims) in shapes.items():
            if dims is None or None in dims:
                continue
            key = (elem, tuple(dims))
            b = by_type.get(key)
            if b is None:
                b = by_type[key] = _tensor_bytes(key)
            size[name] = b
        sizes = np.fromiter((size.get(o, 0) for o in made), dtype=np.int64, count=len(made))
        made_bytes = np.zeros(end, dtype=np.int64)
        np.add.at(made_bytes, at, sizes)
        freed = np.zeros(end, dtype=np.int64)  # each value freed after its last reader
        ends = [(k, size[name]) for name, k in consumed.items() if k < end and name in size]
        if ends:
            where, freed_bytes = zip(*ends)
            np.add.at(freed, np.asarray(where, dtype=np.int64), np.asarray(freed_bytes, dtype=np.int64))
        self._sized = (shapes, (size, sizes, made_bytes, freed))
        return self._sized[1]

    def peak(self, shapes: dict, keep=(), outputs: bool = True) -> int:
        """Peak bytes of the main graph's tensors at ``shapes``: a liveness scan in node order
        (a tensor lives from its producer to its last consumer; graph outputs, values nothing
        consumes -- onnxruntime holds them to the end of the run -- and ``keep`` to the end).
        ``outputs`` False: the transient peak, graph outputs and unconsumed values freed when
        made (what a run of a pruned copy fetching none of them would hold)."""
        made, at, end, consumed, graph_outputs, fed = self._read()
        size, sizes, made_bytes, freed = self._sizes(shapes)
        live = sum(size.get(name, 0) for name in fed)
        if not end:
            return live
        # per node k: what it makes (live += made[k]; the peak is taken), then what it reads last
        # and, with ``outputs`` False, what nothing reads (live -= freed[k] + transient[k]); a
        # graph output or a kept value read by a node lives to the end instead
        kept = set(keep)
        held = {name for name in (*(graph_outputs if outputs else ()), *kept)
                if name in size and consumed.get(name, end) < end}
        if held or not outputs:
            freed = freed.copy()
        if held:
            where = np.fromiter((consumed[name] for name in held), dtype=np.int64, count=len(held))
            np.subtract.at(freed, where, np.fromiter((size[name] for name in held), dtype=np.int64, count=len(held)))
        if not outputs:
            transient = np.fromiter((o not in consumed and o not in kept for o in made), dtype=bool, count=len(made))
            np.add.at(freed, at[transient], sizes[transient])
        before = np.concatenate(([0], np.cumsum(made_bytes - freed)[:-1]))  # live before node k, less ``live``
        return int(max(live, live + int((before + made_bytes).max())))


# --------------------------------------------------------------------------- the memory budget
#
# One rule for every whole-model run (in place, in pieces, as shipped, the baseline run, the
# cleanup check; docs/design.md "Memory: what the budget counts"): ``--verify-memory`` bounds
# what verification adds to converting the model -- the tensors a run holds at once
# (:meth:`Liveness.peak`: inputs, intermediate values, taps, kept outputs) plus the weights'
# charge (:func:`budget_weight_bytes`): one more copy of the weights the process already holds,
# two of those it never read.


def budget_weight_bytes(model, *, held: bool) -> int:
    """The bytes a whole-model run of ``model`` counts for its weights (an onnx_ir model, or a
    ModelProto: the protobuf path, every weight inline).  A run loads the model into an
    onnxruntime session: one more copy of each weight the process already holds (inline
    initializers; with ``held``, a framework input's, whose variables TensorFlow or LiteRT holds
    for the export and the framework check), counted once -- converting the model already paid
    for the first; an external-data tensor the conversion streams and never reads counts twice
    (read in from disk, then the session's copy)."""
    if not hasattr(model, "graph") or not hasattr(model.graph, "initializers"):  # a ModelProto
        from ..io.files import proto_weight_bytes
        return proto_weight_bytes(model)
    from ..io.files import external_weight_bytes, model_weight_bytes
    return model_weight_bytes(model) + (0 if held else external_weight_bytes(model))


def run_need(proto, shapes: dict, keep=frozenset(), *, weight_bytes: int, outputs: bool = True,
             liveness: Liveness | None = None) -> int:
    """Bytes a whole-model run of ``proto`` at ``shapes`` counts against the budget: the tensors
    live at once (:meth:`Liveness.peak` with ``keep`` and ``outputs``; ``liveness``: ``proto``'s,
    when the caller asks more than once) plus the weights' charge ``weight_bytes``
    (:func:`budget_weight_bytes`)."""
    return (liveness or Liveness(proto)).peak(shapes, keep, outputs) + weight_bytes


# --------------------------------------------------------------------------- feeds and fetches


def _index_bounds(proto, shapes: dict) -> dict:
    """Integer graph inputs used as indices (Gather*) -> the size of the axis they index."""
    bounds: dict = {}
    for n in proto.graph.node:
        if n.op_type in ("Gather", "GatherElements", "GatherND") and len(n.input) > 1:
            data = shapes.get(n.input[0], (None, None))[1]
            axis = next((a.i for a in n.attribute if a.name == "axis"), 0)
            dim = None
            if data is not None and len(data):
                dim = data[axis] if n.op_type != "GatherND" else min(d for d in data if d is not None) \
                    if any(d is not None for d in data) else None
            prev = bounds.get(n.input[1], dim)
            bounds[n.input[1]] = None if prev is None or dim is None else min(prev, dim)
    return bounds


#: ONNX integer element types (int8 .. uint64): what an index input can be
_INTEGER_ELEMS = frozenset({2, 3, 4, 5, 6, 7, 12, 13})
#: int4, uint4, float4e2m1: packed two to a byte, not generated
_SUB_BYTE = (21, 22, 23)


def random_feeds(proto, sizes: dict, shapes: dict, rng: np.random.Generator, vectors: dict | None = None) -> dict:
    """Random values for every fed input: floats standard normal, integer indices in range,
    index vectors of StridedSlices (``vectors``: input_ranges.index_vectors) entry by entry
    inside what their slices accept (input_ranges.vector_ranges), other integers in [0, 3],
    distinct strings.  An index input is one a Gather reads directly (the size of the axis it
    indexes, from the shapes at these sizes) or through the casts, reshapes and index
    arithmetic :func:`.input_ranges.index_input_ranges` follows (a BERT segment id cast to int32
    before a 2-row table): the smaller range where both apply."""
    from onnx import helper
    from .input_ranges import index_input_ranges, vector_ranges
    from .inputs import SMALL_INTS, random_values
    fed = _fed_inputs(proto)
    integer = any(vi.type.tensor_type.elem_type in _INTEGER_ELEMS for vi in fed)  # (else no index input)
    bounds = _index_bounds(proto, shapes) if integer else {}
    index_ranges = index_input_ranges(proto) if integer else {}
    vectors = vectors or {}
    feeds = {}
    for vi in fed:
        tt = vi.type.tensor_type
        if _unranked_vector(vi, sizes):
            shape: tuple = (sizes[f"{vi.name}:0"],)
        else:
            shape = tuple(d.dim_value if d.HasField("dim_value") else sizes[_dim_key(vi, k, d)]
                          for k, d in enumerate(tt.shape.dim))
        elem = tt.elem_type
        dtype = np.dtype(object) if elem == 8 else np.dtype(helper.tensor_dtype_to_np_dtype(elem))
        if elem in _SUB_BYTE and dtype.kind not in "iu":
            raise Skip(f"input {vi.name!r}: random values of element type {helper.tensor_dtype_to_string(elem)} "
                       "are not generated")
        if vi.name in vectors and len(shape) == 1 and shape[0] == vectors[vi.name].length:
            ranges = vector_ranges(vectors[vi.name], shapes)
            if any(lo > hi for lo, hi in ranges):
                raise Skip(f"input {vi.name!r}: no value of it is valid for every StridedSlice it feeds")
            feeds[vi.name] = np.array([random_values(rng, (), dtype, ints=r) for r in ranges], dtype=dtype)
            continue
        high = bounds.get(vi.name)
        ints = (0, high - 1) if high else SMALL_INTS
        if vi.name in index_ranges:
            lo, hi = index_ranges[vi.name]
            ints = (lo, min(hi, high - 1) if high else hi)
        feeds[vi.name] = random_values(rng, shape, dtype, ints=ints)
    return feeds


#: ONNX element types whose numpy arrays onnxruntime's ``run`` takes and gives as they are
_PLAIN_ELEMS = frozenset({1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13})


def run_taps(session, feeds: dict, names: list[str], elems: dict) -> dict:
    """One run; ``names`` -> numpy arrays.  Through OrtValues (lowerings.fetch: the one codec)
    unless every input and output is of a type numpy holds as onnxruntime does."""
    if any(a.dtype.kind in "OUS" for a in feeds.values()) or \
            all(elems.get(k) in _PLAIN_ELEMS for k in feeds) and all(elems.get(n) in _PLAIN_ELEMS for n in names):
        return dict(zip(names, session.run(names, feeds)))
    from .lowerings import fetch, ort_value  # the one OrtValue codec
    ort_feeds = {k: ort_value(v, elems[k]) for k, v in feeds.items()}
    outs = session.run_with_ort_values(names, ort_feeds)
    return {n: fetch(v, elems[n]) if elems.get(n) else v.numpy() for n, v in zip(names, outs)}


# --------------------------------------------------------------------------- the run


def _status(checked: list, pending: list, taps, marks: dict, runs: int | None = None) -> str:
    """The in-place status over ``checked`` records, ``pending`` ones not reached (their
    status set here in ``marks``: id(record) -> status)."""
    runs = _RUNS + _BRANCH_RUNS if runs is None else runs
    for r in pending:
        marks[id(r)] = (skipped(f"its If branch was not taken in {runs} runs on random inputs")
                     if id(r) in taps.branch else skipped(f"its Loop ran no iteration in {runs} runs on random inputs")
                     if id(r) in taps.loop else skipped("not run"))
    problems = [f"node {r.node!r}: {detail(marks[id(r)])}" for r in checked
                if marks.get(id(r)) is not None and kind(marks[id(r)]) == "failed"]
    if problems:
        return failed(problems[0] + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""))
    partial = [r for r in checked if id(r) in taps.partial and kind(marks.get(id(r), PASSED)) == "skipped"]
    if partial:
        return skipped(f"{len(partial)} of {len(checked)} rewrites checked on part of their Loop's iterations only: "
                       f"the taps of the others {taps.cut}")
    if pending:
        why = {detail(marks[id(r)]).removeprefix("its ") for r in pending}
        return skipped(f"{len(pending)} of {len(checked)} rewrites not reached ("
                       + (why.pop() if len(why) == 1 else "If branch not taken, Loop not run") + ")")
    return PASSED


def _tensor_bytes(shape_entry) -> int:
    elem, dims = shape_entry
    count = 1
    for d in dims:
        count *= d
    return count * _elem_size(elem)


def _feeds_key(feeds: dict) -> tuple:
    return tuple((k, v.shape, v.dtype.str, v.tobytes() if v.dtype.kind not in "OUS" else repr(v.tolist()))
                 for k, v in sorted(feeds.items()))


@dataclasses.dataclass(frozen=True)
class Digest:
    """An output kept as shape, dtype and a hash of its bytes: enough to compare an output of
    pure data movement bitwise, without holding it."""

    shape: tuple
    dtype: np.dtype
    sha256: str

    @staticmethod
    def of(arr) -> Digest:
        import hashlib
        arr = np.ascontiguousarray(arr)
        data = arr.tobytes() if arr.dtype.kind not in "OUS" else repr(arr.tolist()).encode()
        return Digest(tuple(arr.shape), arr.dtype, hashlib.sha256(data).hexdigest())


@dataclasses.dataclass
class CheckedRun:
    """A checked run of a model: the inputs it was fed and its graph outputs, the baseline the
    as-shipped run (verification/shipped.py) and the opset conversion's run are compared with."""

    feeds: dict                  # fed input name -> array
    outputs: dict                # graph output name -> array, or a Digest (pure data movement)
    elems: dict                  # fed input / output name -> ONNX element type
    shapes: dict                 # value name -> (elem, dims) at the run's sizes (shape inference)
    exact: frozenset = frozenset()  # graph outputs that are pure data movement (compared bitwise)

    def held_bytes(self) -> int:
        """Bytes of the arrays the run holds (each once: a Reference holds its input tensor)."""
        arrays = {id(a): a for a in (v.x if isinstance(v, Reference) else v for v in self.outputs.values())
                  if isinstance(a, np.ndarray)}
        return sum(a.nbytes for a in arrays.values())


@dataclasses.dataclass
class InplaceResult:
    status: str                                  # passed | failed: .. | skipped: ..
    sizes: dict = dataclasses.field(default_factory=dict)
    estimate_bytes: int = 0
    checked: CheckedRun | None = None            # the first run that ran (its inputs and graph outputs)
    pending: list = dataclasses.field(default_factory=list, repr=False)  # records not reached
    pieces: int = 1                              # runs in pieces (each a subset of the taps and outputs)
    inplace: dict = dataclasses.field(default_factory=dict)  # position in ``records`` -> that rewrite's status


def run_inplace(proto, records: list, *, budget: Budget, seed: int = 0) -> InplaceResult:
    """Check the rewrites of the main graph and of ``If`` branches, ``Loop`` bodies and
    model-local functions called directly in it, in onnxruntime runs of ``proto`` (the converted model, external data not loaded)
    with taps; the result's ``inplace`` maps each rewrite's position in ``records`` to its
    status.  ``records``: StridedSlice rewrite records and slice-update records, each read through
    its op's adapter (verification/records.py).  ``start_inplace(...).result()``."""
    return start_inplace(proto, records, budget=budget, seed=seed).result()


class InplaceRun:
    """The in-place check under way: :func:`start_inplace` builds the tapped model's
    onnxruntime session in a thread (onnxruntime releases the GIL while it builds, and the
    session is most of the check's time), so the caller's other checks run meanwhile;
    :meth:`result` runs and compares."""

    def __init__(self, proto, records: list, *, budget: Budget, seed: int,
                 keep_session: bool = False, defer: bool = False, ahead=None, inferred=None):
        self.proto, self.records = proto, in_place(records)  # (each record's adapter: records.InPlace)
        self.marks: dict = {}  # id(adapter) -> its in-place status (the records themselves stay as the pass made them)
        self.table = NodeTable(proto.graph)  # (read once for every pass over the model's nodes below)
        self.liveness = Liveness(proto, self.table)  # (the memory estimates of every attempt and of the as-shipped run)
        self.kw = dict(budget=budget, seed=seed,
                       keep_session=keep_session, marks=self.marks, defer=defer, liveness=self.liveness,
                       inferred=inferred)
        self.ahead = ahead  # (held for the as-shipped run: see start_inplace)
        self.first = _first_loops(proto, [r for r in self.records if r is not None], self.table)
        self.attempt = _Attempt(proto, self.records, loops=self.first, **self.kw)

    def result(self) -> InplaceResult:
        """Taps through a Loop are stacked per iteration, which fails when a tapped tensor
        changes shape between iterations: then the check runs again with them carried (any
        shapes), and if that fails too, without them (a Loop run by its condition is carried
        from the start: :func:`_first_loops`).  A deferred
        rewrite whose reference raises (or has no defined result) on the run's tensors means the
        random inputs are ones the original rejects: the check runs again without deferring,
        where the converted model's own run shows whether it fails there too (and the sizes
        grow as for any failing run)."""
        result = self.attempt.result()
        deferred = [r for r in self.attempt.checked if id(r) in self.attempt.taps.deferred]
        if any(self.marks.get(id(r)) not in (None, AWAITING) for r in deferred):
            self.kw["defer"] = False
            self.attempt = _Attempt(self.proto, self.records, loops=self.first, **self.kw)
            result = self.attempt.result()
        in_loops = [r for r in self.records if r is not None and id(r) in self.attempt.taps.loop]
        for loops in (CARRIED, None) if self.first == STACKED else (None,):
            if not (kind(result.status) == "skipped" and detail(result.status).startswith("onnxruntime") and in_loops):
                break
            why = skipped(f"taps through the Loop could not run ({detail(result.status)})")
            self.attempt = _Attempt(self.proto, self.records, loops=loops, **self.kw)
            result = self.attempt.result()
            if loops is None:
                for r in in_loops:
                    self.marks[id(r)] = why
                if not self.attempt.checked:  # (every rewrite is in a Loop body: none was checked)
                    result.status = why
        self._awaiting = {self.attempt.taps.deferred[id(r)]: r for r in self.attempt.checked
                         if self.marks.get(id(r)) is AWAITING}
        self.passed = result.status if kind(result.status) == "passed" else None  # (before the as-shipped run)
        if self.awaiting and self.passed is not None:
            result.status = skipped(f"{len(self.awaiting)} rewrites await the as-shipped run")
        result.inplace = self._statuses()
        self.last = result
        return result

    def settle(self, compared: dict | None, why: str = "") -> InplaceResult:
        """After the as-shipped run: the rewrites whose output it gave (``awaiting``: output
        name -> record, their reference outputs in the checked run) get their status from its
        comparison -- ``compared``: output name -> None (agreed) or the problem; None: the
        as-shipped run compared nothing (``why``).  Returns the final result."""
        result = self.last
        if not self._awaiting:
            return result
        for name, r in self._awaiting.items():
            problem = compared.get(name, f"{name!r} is not an output of the saved model") if compared is not None \
                else None
            if compared is None:  # (the same text as the whole check's: the verdict names it once)
                self.marks[id(r)] = skipped(f"left to the as-shipped run, which did not compare ({why})")
            elif problem is not None:
                self.marks[id(r)] = failed(f"as shipped: {problem}")
            else:
                self.marks[id(r)] = AS_SHIPPED
        result.inplace = self._statuses()
        records = [r for r in self.records if r is not None and id(r) in self.marks]
        bad = [r for r in records if kind(self.marks[id(r)]) == "failed"]
        if bad:
            more = f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""
            result.status = failed(f"node {bad[0].node!r}: {detail(self.marks[id(bad[0])])}{more}")
        elif compared is None:
            result.status = skipped(f"left to the as-shipped run, which did not compare ({why})")
        elif self.passed is not None:
            result.status = self.passed
        return result

    def deferred_positions(self) -> frozenset:
        """Positions in ``records`` of the rewrites the first attempt left to the as-shipped run
        (known from the start, before :meth:`result`: verification/settled_checks.py)."""
        deferred = self.attempt.taps.deferred
        return frozenset(i for i, r in enumerate(self.records) if r is not None and id(r) in deferred)

    @property
    def awaiting(self) -> dict:
        """After :meth:`result`: output name -> the record of each rewrite left to the as-shipped run."""
        return {name: r.record for name, r in getattr(self, "_awaiting", {}).items()}

    def _statuses(self) -> dict:
        """Position in ``records`` -> that rewrite's in-place status (those that have one)."""
        return {i: self.marks[id(r)] for i, r in enumerate(self.records) if r is not None and id(r) in self.marks}

    def run_outputs(self):
        """With ``keep_session``, after :meth:`result`: ``feeds -> outputs`` of ``proto``'s own
        graph outputs through the tapped session (taps only add outputs), or None."""
        session = self.attempt.session
        if session is None or self.attempt.taps.deferred:  # (deferred outputs are not computed)
            return None
        return functools.partial(session.run, [o.name for o in self.proto.graph.output])

    def sized(self):
        """(sizes, shapes) that :func:`choose_sizes` chose for ``proto``'s skeleton, or None
        (not chosen: no rewrite to check, or it raised Skip)."""
        shapes = getattr(self.attempt, "shapes", None)
        return None if shapes is None else (self.attempt.sizes, shapes)

    def release(self) -> None:
        self.attempt.session = None

    @property
    def checked(self) -> CheckedRun | None:
        """After :meth:`result`: the first run that ran (inputs and graph outputs), or None."""
        last = getattr(self, "last", None)
        return None if last is None else last.checked


def start_inplace(proto, records: list, *, budget: Budget, seed: int = 0, keep_session: bool = False,
                  defer: bool = False, ahead=None, inferred=None) -> InplaceRun:
    """:func:`run_inplace` begun: the session builds in a thread until ``.result()``.
    ``budget``: the run fits ``budget.memory`` by :func:`run_need` (the weights charged
    ``budget.weight_bytes``: :func:`budget_weight_bytes`); ``budget.load_weights`` reads external
    weights in for a run that fits.

    ``defer``: the caller runs ``proto``'s graph outputs as shipped (verification/shipped.py)
    on this run's inputs and then calls :meth:`InplaceRun.settle`.  A main-graph rewrite whose
    output is a graph output of pure data movement (``exact.exact_outputs``) and no other
    rewrite's input is then not computed here: its reference output, from the tensors that
    reached it here, becomes the checked run's value of that graph output, which the as-shipped
    run must equal bitwise.  (Pure data movement upstream: its input is the same in both runs.)
    The tapped copy keeps only the nodes the remaining taps and graph outputs need.

    ``ahead``: the as-shipped session of ``proto`` (shipped.SessionAhead), already building when
    ``proto`` is the model that ships: held as ``.ahead`` for the as-shipped run.
    ``inferred``: the strict shape inference of ``proto`` (checks.static_checks), if it passed:
    the shapes of a model whose input sizes are all declared."""
    return InplaceRun(proto, records, budget=budget, seed=seed, keep_session=keep_session, defer=defer,
                      ahead=ahead, inferred=inferred)


#: Loop taps (_tap_model's ``loops``): stacked scan outputs, or carried values that take any shapes
STACKED, CARRIED = "stacked", "carried"


def _first_loops(proto, records: list, table: NodeTable) -> str:
    """How the first attempt taps Loop bodies: STACKED when every main-graph Loop holding one of
    ``records`` has a trip count known before the run (a constant, or a fed input the random
    inputs draw small), so that its taps can be counted against the budget
    (:meth:`_Attempt._loop_tap_bytes`); else CARRIED, whose taps keep only what fits the budget
    (:func:`_carry_through_loop`, ``capped``) -- a Loop run by its condition (tf.while_loop, no
    trip count) may run any number of iterations."""
    graphs = {r.graph for r in records if " > Loop " in r.graph}
    if not graphs:
        return STACKED
    g = proto.graph
    bounded = {t.name for t in g.initializer} | {vi.name for vi in _fed_inputs(proto)}
    bounded |= {outs[0] for op, outs in zip(table.ops, table.outputs) if op == "Constant" and outs}
    for k in table.holders:
        node = g.node[k]
        if node.op_type == "Loop" and f"main > Loop {node.name!r}.body" in graphs and \
                not (node.input and node.input[0] in bounded):
            return CARRIED
    return STACKED

#: the in-place status of a rewrite whose output the as-shipped run gives (until InplaceRun.settle)
AWAITING = skipped("awaits the as-shipped run")
#: ... and once the as-shipped run gave its reference output, bitwise: what checked it, said
AS_SHIPPED = passed("as shipped: its reference output, bitwise, in the saved model's default run")


class _Attempt:
    """One tapped model, its session (built in a thread) and its runs.  The session starts
    only once shape inference at the chosen sizes has succeeded (in a helper process):
    onnxruntime's own inference of a model whose dims go negative aborts the process."""

    def __init__(self, proto, records: list, *, loops: str | None, budget: Budget,
                 seed: int, keep_session: bool, marks: dict, defer: bool = False, liveness: Liveness | None = None,
                 inferred=None):
        self.marks = marks  # id(record) -> in-place status, shared with the InplaceRun
        self.inferred = inferred  # the strict shape inference of ``proto`` (a ModelProto), if it passed
        self.liveness = liveness or Liveness(proto)
        self.table = self.liveness.table
        self.proto, self.budget, self.weight_bytes, self.seed = proto, budget.memory, budget.weight_bytes, seed
        self.keep_session = keep_session
        self.loops = loops
        self.session: Any = None
        self.error: Exception | None = None
        self.thread: threading.Thread | None = None
        self.skip: InplaceResult | None = None
        self.sk: Any = None
        self.sized: tuple[dict, dict] | Skip | None = None  # choose_sizes' answer, once (_sizes)
        self.exact: frozenset | None = None  # outputs of pure data movement (_deferrable)
        self.outputs: list | None = None  # graph_outputs()
        self.own: int | None = None  # bytes of the model's own run at the chosen sizes
        self.vectors: dict = {}
        self.pins: dict = {}
        rewritten = [r for r in records if r is not None]  # (records.InPlace adapters; None: not rewritten)
        self.rewritten = rewritten  # whose runtime index inputs fix input lengths (_sizes)
        deferred = self._deferrable(rewritten) if defer else frozenset()
        self.tapped, self.taps = _tap_model(proto, rewritten, loops, deferred, self.table)
        self.checked = [r for r in rewritten if id(r) in self.taps.views]
        for r in rewritten:
            if id(r) not in self.taps.views:
                marks[id(r)] = skipped(f"inside {r.graph} (only the per-rewrite check covers it)")
        if not self.checked:
            self.skip = InplaceResult(skipped("no rewrite in the main graph, its If branches, Loop bodies or the "
                                              "functions it calls") if rewritten else PASSED)
            return
        self._prepare(budget.load_weights)

    def _sizes(self) -> tuple[dict, dict]:
        """:func:`choose_sizes` of ``proto``'s skeleton, once (Skip raised each time asked).
        A model whose every input has its sizes declared has nothing to choose: the strict
        shape inference of its bytes (``inferred``, from the static checks) gives the shapes."""
        if self.sized is None:
            from .input_ranges import index_vectors
            self.vectors, problem = index_vectors(self.proto, [r.vectors for r in self.rewritten if r.vectors])
            try:
                if problem is not None:
                    raise Skip(problem)
                self.pins = vector_pins(self.proto, self.vectors)
                if self.inferred is not None and not self.pins and all_sizes_declared(self.proto):
                    self.sized = ({}, declared_shapes(self.proto, self.inferred))
                else:
                    self.sized = choose_sizes(self.skeleton(), self.pins)
            except Skip as exc:
                self.sized = exc
        if isinstance(self.sized, Skip):
            raise self.sized
        return self.sized

    def skeleton(self):
        """``proto``'s skeleton (rewrite.shapes.skeleton), made once when first asked."""
        if self.sk is None:
            from ..rewrite.shapes import skeleton
            self.sk = skeleton(self.proto)
        return self.sk

    def _deferrable(self, rewritten: list) -> frozenset:
        """Outputs of main-graph rewrites that the as-shipped run can give (see start_inplace)."""
        outputs = set(self.graph_outputs())
        # (records.InPlace.deferrable: e.g. not with runtime begin/end/strides, whose random values
        # the original rejects must be seen to fail in the converted model's own run)
        candidates = [r for r in rewritten if r.graph == "main" and r.output in outputs and r.deferrable]
        if not candidates:
            return frozenset()
        try:
            _, shapes = self._sizes()
        except Skip:
            return frozenset()  # (_prepare skips with the reason)
        self.own = run_need(self.proto, shapes, weight_bytes=self.weight_bytes, liveness=self.liveness)
        if self.own > self.budget:  # the as-shipped run will not fit at these sizes: every rewrite checked here
            return frozenset()
        self.exact = frozenset(self.exact_outputs(shapes))
        read = {n for r in rewritten for n in r.reads}
        return frozenset(r.output for r in candidates if r.output in self.exact and r.output not in read)

    def _prepare(self, load_weights) -> None:
        import threading
        self.load_weights = load_weights
        try:
            self.sizes, self.shapes = self._sizes()
        except Skip as exc:
            self.skip = self._skip_all(str(exc))
            return
        self.need = self._loop_charge(self.sizes, run_need(self.proto, self.shapes, self.taps.names,
                                                           weight_bytes=self.weight_bytes, liveness=self.liveness))
        self.pieces: list[list[str] | None] = [None]  # [None]: one run fetching every tap and graph output
        if self.need > self.budget:
            problem = self._in_pieces()
            if problem is not None:
                self.skip = self._skip_all(problem)
                return

        def build():
            try:
                self.session = self._session(0)
            except Exception as exc:  # reported by result()
                self.error = exc
        self.thread = threading.Thread(target=build, name="onnx-slice-tools in-place session", daemon=True)
        self.thread.start()

    def _loop_charge(self, sizes: dict, need: int) -> int:
        """``need`` (a run's need without its Loop taps) plus what the Loop taps hold: STACKED,
        :meth:`_loop_tap_bytes`; CARRIED, the room the budget leaves, shared by the carried taps
        (twice each one's cap: the elements kept and the copy appending to them), written into
        their cap initializers (:func:`_carry_through_loop`)."""
        if not self.taps.loop:
            return need
        if self.loops != CARRIED:
            return need + self._loop_tap_bytes(sizes)
        if self.tapped is None:  # (its session is built: the caps are in it)
            return need + 2 * getattr(self, "caps_bytes", 0)
        share = max(0, self.budget - need) // (2 * len(self.taps.carried))
        caps = {_cap_name(flat): max(0, share // _elem_size(self.taps.elems.get(flat, 1))) for flat in self.taps.carried}
        for t in self.tapped.graph.initializer:
            if t.name in caps:
                del t.int64_data[:]
                t.int64_data.append(caps[t.name])
        self.caps_bytes = share * len(self.taps.carried)
        self.taps.cut = (f"exceed their share of the memory budget ({_mib(share)} MiB a tap of "
                         f"{_mib(self.budget)} MiB, --verify-memory)")
        return need + 2 * self.caps_bytes

    def _loop_tap_bytes(self, sizes: dict) -> int:
        """What the Loop taps hold at ``sizes`` (:meth:`Liveness.peak` sees only their main-graph
        names, of no known shape): each tapped body tensor's bytes, by shape inference of the
        bodies at these sizes, times twice the Loop's trip count -- every iteration's copy, and
        the stacked (or carried) tensor made of them.  The trip count: a constant's value, or
        for a fed input the largest small integer the random inputs draw (inputs.SMALL_INTS) -- a
        Loop run by its condition is tapped CARRIED, within caps (:func:`_first_loops`); a body
        tensor of unknown size counts none (docs/design.md, "Slice updates in place")."""
        if not self.taps.loop:
            return 0
        from ..graphs.shape_inference import infer
        from .inputs import SMALL_INTS
        try:
            inferred = infer(_with_sizes(self.skeleton(), sizes))
        except Exception:  # (the run's own inference reports it)
            return 0
        g = inferred.graph
        consts = {t.name: t for t in g.initializer}
        consts.update({n.output[0]: a.t for n in g.node if n.op_type == "Constant" for a in n.attribute
                       if a.name == "value"})
        fed = {vi.name for vi in _fed_inputs(inferred)}
        shapes = dict(inferred_shapes(inferred)[0])
        total = 0
        for node in g.node:
            if node.op_type != "Loop" or node.name not in self.taps.loop_nodes:
                continue
            body = next(a.g for a in node.attribute if a.name == "body")
            for vi in itertools.chain(body.input, body.value_info, body.output):
                known = _elem_dims(vi.type)
                if known is not None and None not in known[1] and all(d >= 0 for d in known[1]):
                    shapes[vi.name] = known
            trips = 1
            if node.input and node.input[0] in consts:
                from onnx import numpy_helper
                trips = max(1, int(numpy_helper.to_array(consts[node.input[0]]).reshape(-1)[0]))
            elif node.input and node.input[0] in fed:
                trips = max(1, SMALL_INTS[1])
            names = {orig for r in self.checked if id(r) in self.taps.loop for orig in self.taps.views[id(r)]
                     if r.graph.endswith(f"Loop {node.name!r}.body")}
            per_iteration = sum(_tensor_bytes(shapes[n]) for n in names
                                if n in shapes and None not in shapes[n][1])
            total += 2 * trips * per_iteration
        return total

    def _in_pieces(self) -> str | None:
        """Split the run into pieces that each fit the budget: each piece a copy of the tapped
        model whose graph outputs are some of the taps (all of a rewrite's together) and of the
        model's own outputs.  When the model's own outputs at the chosen sizes do not fit
        (the as-shipped run computes them all at once), symbolic dims at 3 go down to 1 where
        shapes stay valid.  Returns the reason it cannot, or None (``self.pieces`` set)."""
        left = set(self.taps.deferred.values())
        outputs = [o for o in self.graph_outputs() if o not in left]
        own = self.own if self.own is not None else \
            run_need(self.proto, self.shapes, weight_bytes=self.weight_bytes, liveness=self.liveness)
        if own > self.budget:
            smaller = dict(self.sizes)
            for k, v in self.sizes.items():
                if v == _BASE and k not in self.pins:
                    trial = dict(smaller, **{k: 1})
                    got, bad = infer_at_sizes(self.skeleton(), trial)
                    if bad is None:
                        smaller, self.shapes = trial, got
            self.sizes = smaller
            self.need = self._loop_charge(self.sizes, run_need(self.proto, self.shapes, self.taps.names,
                                                               weight_bytes=self.weight_bytes, liveness=self.liveness))
            if self.need <= self.budget:
                return None
        base = run_need(self.proto, self.shapes, weight_bytes=self.weight_bytes, outputs=False,
                        liveness=self.liveness)
        room = self.budget - base
        units = [[*self.taps.views[id(r)].values(), *([self.taps.branch[id(r)][0]] if id(r) in self.taps.branch else []),
                  *(n for view in self.taps.calls.get(id(r), ()) for n in view.values())] for r in self.checked]
        placed = {n for unit in units for n in unit}
        units += [[o] for o in outputs if o not in placed]
        pieces: list[list[str]] = []
        current: list[str] = []
        seen: set[str] = set()
        used = 0
        for unit in units:
            new = [n for n in dict.fromkeys(unit) if n not in seen]
            if any(self.shapes.get(n, (0, None))[1] is None or None in self.shapes[n][1] for n in new):
                return f"{over_budget(self.need, self.budget, self.sizes)}; a tap of unknown size prevents a run in pieces"
            size = sum(_tensor_bytes(self.shapes[n]) for n in new)
            if current and used + size > room:
                pieces.append(current)
                current, used, seen = [], 0, set()
                new = list(dict.fromkeys(unit))
                size = sum(_tensor_bytes(self.shapes[n]) for n in new)
            if size > room:
                return f"{over_budget(base + size, self.budget, self.sizes)} (one rewrite's tensors)"
            current += new
            seen.update(new)
            used += size
        pieces.append(current)
        self.pieces = list(pieces)
        self.need = base + max(sum(_tensor_bytes(self.shapes[n]) for n in piece) for piece in pieces)
        return None

    def _session(self, k: int):
        """The FAST session of piece ``k`` (the whole tapped model when not in pieces)."""
        piece = self.pieces[k]
        model = self.tapped
        if piece is not None:
            import onnx
            model = onnx.ModelProto()
            model.CopyFrom(self.tapped)
            keep = set(piece)
            outs = [vi for vi in self.tapped.graph.output if vi.name in keep]
            del model.graph.output[:]
            model.graph.output.extend(outs)
            _prune(model.graph)
        model = self.load_weights(model)
        if piece is None:  # (a large model: its session in consecutive parts, segments.parted_session)
            elems = {name: elem for name, (elem, _) in self.shapes.items()}
            elems.update(self.taps.elems)
            try:
                parted = parted_session(model, elems, _make_session)
            except Exception:  # (a part onnxruntime cannot load: one session of the whole model)
                parted = None
            if parted is not None:
                return parted
        return _make_session(model)

    def _skip_all(self, why: str) -> InplaceResult:
        for r in self.checked:
            self.marks[id(r)] = skipped(why)
        return InplaceResult(skipped(why))

    def result(self) -> InplaceResult:
        if self.thread is not None:
            self.thread.join()
            self.thread = None
        if self.skip is not None:
            self.tapped = None
            return self.skip
        if self.error is not None:
            self.tapped = None
            return self._skip_all(f"onnxruntime cannot load the tapped model: {_line(self.error)}")
        taps, proto = self.taps, self.proto
        elems = {vi.name: vi.type.tensor_type.elem_type for vi in _fed_inputs(proto)}
        elems.update({name: self.shapes[name][0] for name in [*taps.names, *self.graph_outputs()]
                      if name in self.shapes})
        elems.update(taps.elems)
        if self.pieces == [None]:
            self.tapped = None
            result = self._runs(elems, self.checked, None)
        else:
            result = self._runs_in_pieces(elems)
        if not self.keep_session or taps.loop or taps.deferred or self.pieces != [None]:
            self.session = None  # (Loop taps stack per iteration: they can fail where the model runs)
        return result

    def _runs_in_pieces(self, elems: dict) -> InplaceResult:
        """:meth:`_runs` per piece (the same seed: the same random inputs), each piece's session
        built when the previous one is released; one status over every rewrite."""
        results = []
        try:
            for k, piece in enumerate(p for p in self.pieces if p is not None):  # (in pieces: all lists)
                if k:
                    self.session = None
                    try:
                        self.session = self._session(k)
                    except Exception as exc:
                        return self._skip_all(f"onnxruntime cannot load the tapped model: {_line(exc)}")
                names = set(piece)
                records = [r for r in self.checked if set(self.taps.views[id(r)].values()) <= names
                           and (id(r) not in self.taps.calls or all(set(v.values()) <= names
                                                                   for v in self.taps.calls[id(r)]))]
                result = self._runs(elems, records, piece)
                if kind(result.status) == "skipped":  # (skip_all: every rewrite says why)
                    return result
                results.append(result)
        finally:
            self.tapped = None
        checked = [x.checked for x in results]
        first = checked[0]
        if first is None or any(c is None or _feeds_key(c.feeds) != _feeds_key(first.feeds) for c in checked):
            first = None
        else:
            for c in checked[1:]:
                if c is not None:
                    first.outputs.update(c.outputs)
        status = _status(self.checked, [r for x in results for r in x.pending], self.taps, self.marks)
        if status == PASSED:
            status = passed(f"in {len(self.pieces)} pieces within the memory budget")
        return InplaceResult(status, results[-1].sizes, self.need, first, pieces=len(self.pieces))

    def _runs(self, elems: dict, checked: list, piece: list | None) -> InplaceResult:
        """Runs on fresh random inputs until every one of ``checked`` was reached (or the runs
        are spent), fetching ``piece`` (None: every tap and graph output)."""
        proto, taps, memory_budget, weight_bytes, seed = self.proto, self.taps, self.budget, self.weight_bytes, self.seed
        session, sizes, shapes, need, skip_all = self.session, self.sizes, self.shapes, self.need, self._skip_all
        rng = np.random.default_rng(seed)
        pending, runs, first = list(checked), 0, None
        if piece is None:  # graph outputs live to the end anyway
            left = set(taps.deferred.values())
            fetch = [*taps.names, *(o for o in self.graph_outputs() if o not in taps.seen and o not in left)]
        else:
            fetch = list(piece)
        fetched = set(fetch)
        outputs = [o for o in self.graph_outputs() if o in fetched]
        deferred = [taps.deferred[id(r)] for r in checked if id(r) in taps.deferred]
        while (pending or first is None) and runs < _RUNS + _BRANCH_RUNS:
            runs += 1
            try:
                feeds = random_feeds(proto, sizes, shapes, rng, self.vectors)
            except Skip as exc:
                return skip_all(str(exc))
            try:
                got = run_taps(session, feeds, fetch, elems)
            except Exception as exc:  # grow the dims that reach the failing node
                if len(pending) < len(checked):
                    break  # an earlier run checked some: the rest stay "not reached"
                shown = ", ".join(f"{k}{list(v.shape)}" for k, v in feeds.items())
                failure = f"onnxruntime fails on random inputs ({shown}): {_line(exc)}"
                at = _failing_node(str(exc))
                if self.loops == STACKED and at in taps.loop_nodes:
                    return skip_all(failure)  # (stacking may be what fails: the next attempt carries them)
                grow = [k for k in _dims_reaching(proto, at) if k not in self.pins]
                if not grow or runs >= _RUNS or any(sizes[k] * 4 > _MAX_SIZE for k in grow) or piece is not None:
                    return skip_all(failure)
                sizes = dict(sizes, **{k: sizes[k] * 4 for k in grow})
                shapes, bad = infer_at_sizes(self.skeleton(), sizes)
                need = self._loop_charge(sizes, run_need(proto, shapes, taps.names, weight_bytes=weight_bytes,
                                                         liveness=self.liveness))
                if bad is not None:
                    return skip_all(f"{failure}; larger sizes give invalid shapes ({bad})")
                if need > memory_budget:
                    return skip_all(f"{failure}; larger sizes: {over_budget(need, memory_budget, sizes)}")
                continue
            made = first is None
            if made:
                exact = self.exact if self.exact is not None else frozenset(self.exact_outputs(shapes))
                inputs = {n: got[n] for r in checked if id(r) in taps.deferred for n in taps.views[id(r)].values()}
                held = sum(a.nbytes for a in {id(a): a for a in [*(got[o] for o in outputs), *inputs.values()]
                                              if isinstance(a, np.ndarray)}.values())
                digest = piece is not None or need + held > memory_budget  # else kept: no hashing
                first = CheckedRun(feeds, {o: Digest.of(got[o]) if digest and o in exact else got[o] for o in outputs},
                                   {k: elems.get(k, 0) for k in [*feeds, *outputs, *deferred]}, shapes, exact)
            expected: dict = {}
            pending = [r for r in pending if not _check_if_reached(r, got, taps, self.marks, expected)]
            if made and first is not None:  # deferred rewrites are in the main graph: reached by the first run
                first.outputs.update((o, Digest.of(v.value()) if digest else v) for o, v in expected.items())
            del got
        self.sizes, self.shapes = sizes, shapes  # (grown, for later pieces)
        if piece is not None:
            return InplaceResult(PASSED, sizes, need, first, pending=pending)
        return InplaceResult(_status(checked, pending, taps, self.marks, runs), sizes, need, first, pending=pending)

    def exact_outputs(self, shapes: dict) -> set:
        """The model's graph outputs that are pure data movement (exact.exact_outputs): kept as digests."""
        return exact_outputs(self.proto, shapes, self.table)

    def graph_outputs(self) -> list:
        """The names of the model's own graph outputs (each once), read once."""
        if self.outputs is None:
            self.outputs = list(dict.fromkeys(o.name for o in self.proto.graph.output))
        return self.outputs


def _prune(g, table: NodeTable | None = None) -> None:
    """Drop the main-graph nodes no graph output of ``g`` depends on (onnxruntime computes
    every node and holds what nothing consumes to the end of the run).  ``table``: ``g``'s
    nodes as they are, if read."""
    if table is None:
        table = NodeTable(g)
    needed = {o.name for o in g.output}
    holders = set(table.holders)
    kept = []
    outputs = table.outputs
    for k in range(len(table) - 1, -1, -1):
        if not needed.isdisjoint(outputs[k]):
            kept.append(k)
            needed.update(table.inputs[k])
            if k in holders:
                needed.update(_outer_names(g.node[k]))
    if len(kept) == len(table):
        return
    if len(table) - len(kept) <= _FEW_PRUNED:  # (a few dropped: deleted in place, the others not copied)
        keep = set(kept)
        for k in range(len(table) - 1, -1, -1):
            if k not in keep:
                del g.node[k]
        return
    nodes = [g.node[k] for k in reversed(kept)]
    del g.node[:]
    g.node.extend(nodes)


#: _prune deletes up to this many nodes in place (each deletion moves the nodes after it)
_FEW_PRUNED = 64


def _outer_names(node) -> set:
    """Every value name read inside ``node``'s subgraphs (a superset of the outer ones it needs)."""
    names: set = set()
    stack = [a.g for a in node.attribute if a.type == a.GRAPH] + \
        [g for a in node.attribute if a.type == a.GRAPHS for g in a.graphs]
    while stack:
        g = stack.pop()
        for n in g.node:
            names.update(n.input)
            stack.extend([a.g for a in n.attribute if a.type == a.GRAPH])
            stack.extend(sg for a in n.attribute if a.type == a.GRAPHS for sg in a.graphs)
        names.update(o.name for o in g.output)
    return names


def _make_session(model):
    """A session that logs nothing: a failing run (random inputs a model rejects) is an
    expected outcome here, reported in the status, never on stderr."""
    from .runtimes import onnxruntime_session
    return onnxruntime_session(model)


def _check_if_reached(r, got: dict, taps, marks: dict, expected: dict) -> bool:
    """Check ``r`` on this run's tensors if they reached it (its If branch ran); sets marks[id(r)].
    A deferred rewrite (``taps.deferred``) is not compared here: its reference output goes to
    ``expected`` (output name -> array) and its mark is AWAITING."""
    if id(r) in taps.deferred:  # a main-graph rewrite: its tensors are fetched under their own names
        settled, reference, _ = r.expected(got)
        if settled is None:
            expected[r.output] = reference
        marks[id(r)] = AWAITING if settled is None else settled
        return True
    if id(r) in taps.branch:
        cond, then = taps.branch[id(r)]
        if bool(np.asarray(got[cond]).reshape(-1)[0]) != then:
            return False
    if id(r) in taps.calls:  # one view per call of the function
        reached = False
        for view in taps.calls[id(r)]:
            marks[id(r)] = r.check({orig: got[name] for orig, name in view.items()})
            reached = True
            if marks[id(r)] != PASSED:
                break
        return reached
    if id(r) in taps.loop:  # per iteration
        fetched = {orig: _iterations(got, name, taps.carried) for orig, name in taps.views[id(r)].items()}
        iterations = min(len(v) for v in fetched.values()) if fetched else 0
        cut = any(not bool(np.asarray(got[taps.recording[name]]).reshape(-1)[0])
                  for name in taps.views[id(r)].values() if name in taps.recording)
        for k in range(iterations):
            marks[id(r)] = r.check({orig: v[k] for orig, v in fetched.items()})
            if marks[id(r)] != PASSED:
                marks[id(r)] = failed(f"iteration {k}: {detail(marks[id(r)])}")
                break
        else:
            if cut:
                taps.partial.add(id(r))
            if cut and not iterations:
                marks[id(r)] = skipped(f"not checked in place: the taps of its Loop's first iteration {taps.cut}")
            elif cut:  # (a failure above stands: it is one)
                marks[id(r)] = skipped(f"checked in place on {iterations} of its Loop's iterations only (passed, the "
                                       f"first ones): the taps of the others {taps.cut}")
        return iterations > 0 or cut
    view = {orig: got[fetched] for orig, fetched in taps.views[id(r)].items()}
    marks[id(r)] = r.check(view)
    return True


@dataclasses.dataclass
class _Taps:
    names: list = dataclasses.field(default_factory=list)   # main-graph outputs to fetch
    views: dict = dataclasses.field(default_factory=dict)   # id(record) -> {tensor name: fetched name}
    branch: dict = dataclasses.field(default_factory=dict)  # id(record) -> (fetched condition, then?)
    loop: set = dataclasses.field(default_factory=set)      # id(record) of rewrites in Loop bodies
    loop_nodes: set = dataclasses.field(default_factory=set)  # names of the Loop nodes tapped
    carried: dict = dataclasses.field(default_factory=dict)  # fetched elements -> fetched shapes (CARRIED)
    recording: dict = dataclasses.field(default_factory=dict)  # fetched elements -> its "every iteration kept" flag
    cut: str = ""  # why a carried tap kept fewer iterations than its Loop ran (the memory budget), once set
    partial: set = dataclasses.field(default_factory=set)  # id(record) checked on a prefix of its Loop's iterations
    calls: dict = dataclasses.field(default_factory=dict)   # id(record) -> [view per call of its function]
    elems: dict = dataclasses.field(default_factory=dict)   # fetched name -> element type
    deferred: dict = dataclasses.field(default_factory=dict)  # id(record) -> its output, left to the as-shipped run

    seen: set = dataclasses.field(default_factory=set)

    def fetch(self, name: str) -> str:
        if name not in self.seen:
            self.seen.add(name)
            self.names.append(name)
        return name


def _tap_model(proto, records: list, loops: str | None = STACKED, deferred: frozenset = frozenset(),
               table: NodeTable | None = None):
    """A copy of ``proto`` exposing, as graph outputs, what reaches each rewrite and what it
    gives: main-graph tensors directly; tensors of an ``If`` branch through extra outputs of
    both branches (an empty tensor of the type in the other one) and of the If node; tensors
    of a ``Loop`` body per iteration, by ``loops``: STACKED as extra scan outputs (one tensor,
    which onnxruntime refuses when the tensor changes shape between iterations), CARRIED as
    extra loop-carried values that append each iteration's elements and shape (any shapes, a
    copy of what is held at each iteration), None: not tapped.
    ``deferred``: main-graph rewrite outputs (graph outputs of ``proto``) not fetched -- the
    as-shipped run gives them: the copy neither outputs nor computes them (it keeps only the
    nodes its outputs need).  ``table``: ``proto``'s main graph's, if read."""
    import onnx
    tapped = onnx.ModelProto()
    tapped.CopyFrom(proto)
    g = tapped.graph
    taps = _Taps()
    outputs = {o.name for o in g.output}
    ifs: dict = {}
    present: dict = {}  # id(graph) -> names in it, built once (the graph is only appended to below)
    bodies: dict = {}
    functions = {f"function {f.domain}::{f.name}": f for f in tapped.functions}
    calls: dict = {}
    main: set | None = None  # names in the main graph
    if table is None:
        table = NodeTable(g)
    for k, op in enumerate(table.ops):
        if functions:
            label = f"function {table.domains[k]}::{op}"
            if label in functions:
                calls.setdefault(label, []).append(g.node[k])
        if op == "If":
            n = g.node[k]
            for a in n.attribute:
                ifs.setdefault(f"main > If {n.name!r}.{a.name}", []).append((n, a))
        elif op == "Loop":
            n = g.node[k]
            for a in n.attribute:
                bodies.setdefault(f"main > Loop {n.name!r}.{a.name}", []).append((n, a.g))
    for r in records:  # (records.InPlace adapters)
        elem = r.tensors  # what to tap: tensor name -> element type, the output last
        if r.graph == "main":  # (main-graph tensors are fetched under their own names)
            if main is None:
                main = _names_in(g, present, table)
            wanted = list(r.reads)
            if r.output in deferred:
                taps.deferred[id(r)] = r.output
            else:
                wanted.append(r.output)
            view = taps.views[id(r)] = {}
            for name in wanted:
                if name in main and name not in view:
                    view[name] = taps.fetch(name)
                    taps.elems[name] = elem[name]
            continue
        elif len(ifs.get(r.graph, ())) == 1:
            node, attr = ifs[r.graph][0]
            names = _present(attr.g, list(elem), present, outer=g)
            taps.views[id(r)] = {name: taps.fetch(_tap_through_if(node, attr.name, name, elem[name]))
                                 for name in names}
            taps.branch[id(r)] = (taps.fetch(node.input[0]), attr.name == "then_branch")
        elif r.graph in functions and calls.get(r.graph):
            names = _present(functions[r.graph], list(elem), present)
            outs = [_tap_through_function(functions[r.graph], name) for name in names]
            taps.calls[id(r)] = [{name: taps.fetch(_call_output(call, functions[r.graph], out))
                                  for name, out in zip(names, outs)} for call in calls[r.graph]]
            taps.views[id(r)] = {}
            for view in taps.calls[id(r)]:
                for name, fetched in view.items():
                    taps.elems[fetched] = elem[name]
        elif loops is not None and len(bodies.get(r.graph, ())) == 1:
            node, body = bodies[r.graph][0]
            names = _present(body, list(elem), present, outer=g)
            view = taps.views[id(r)] = {}
            for name in names:
                if loops == CARRIED:
                    flat, dims = _carry_through_loop(g, node, body, name, elem[name], capped=True)
                    taps.carried[taps.fetch(flat)] = taps.fetch(dims)
                    taps.recording[flat] = taps.fetch(f"{flat}_rec")
                    taps.elems[dims], taps.elems[f"{flat}_rec"] = 7, 9
                    view[name] = flat
                else:
                    view[name] = taps.fetch(_tap_through_loop(node, body, name, elem[name]))
            taps.loop.add(id(r))
            taps.loop_nodes.add(node.name)
        for name, fetched in taps.views.get(id(r), {}).items():
            taps.elems[fetched] = elem[name]
    for name in taps.names:
        if name not in outputs:
            g.output.append(onnx.helper.make_empty_tensor_value_info(name))
    if deferred:
        kept = [vi for vi in g.output if vi.name not in deferred or vi.name in taps.seen]
        del g.output[:]
        g.output.extend(kept)
        # (taps through If, Loop or function calls add outputs to main-graph nodes: read them again)
        _prune(g, None if taps.branch or taps.loop or taps.calls else table)
    return tapped, taps


def _present(graph, names: list, cache: dict, outer=None) -> list:
    """``names`` that exist in ``graph`` (or its outer graph): a runtime index the lowering
    does not read (e.g. a shrink's end) may have been removed.  ``cache``: id(graph) -> names."""
    found = [_names_in(gr, cache) for gr in ((graph, outer) if outer is not None else (graph,))]
    if len(found) == 1:
        return list(dict.fromkeys(name for name in names if name in found[0]))
    return list(dict.fromkeys(name for name in names if name in found[0] or name in found[1]))


def _names_in(graph, cache: dict, table: NodeTable | None = None) -> set:
    """The value names ``graph`` (a graph or function) makes or takes, read once (``cache``: id(graph) -> (graph, names);
    ``table``: the graph's, if read)."""
    held = cache.get(id(graph))
    if held is not None and held[0] is graph:
        return held[1]
    made = (o for outs in table.outputs for o in outs) if table is not None else \
        (o for n in graph.node for o in n.output)
    names = {*made} | {getattr(i, "name", i) for i in graph.input} | {t.name for t in getattr(graph, "initializer", ())}
    # the graph is held with its names: a protobuf wrapper (``attr.g``) may be made afresh at each
    # access, and a freed one's id may be given to another graph's
    cache[id(graph)] = (graph, names)
    return names  # (function inputs are names)


def _tap_through_function(f, name: str) -> str:
    """Expose ``name`` inside function ``f`` as a new function output; returns the output."""
    from onnx import helper
    out = f"{name}::tap_fn"
    if out not in f.output:
        f.node.append(helper.make_node("Identity", [name], [out]))
        f.output.append(out)
    return out


def _call_output(call, f, out: str) -> str:
    """The name a call node gives the function output ``out`` (outputs added as needed)."""
    k = list(f.output).index(out)
    base = call.output[0] if len(call.output) and call.output[0] else f"::call{id(call)}"  # a call may have none
    while len(call.output) <= k:
        call.output.append(f"{base}::{call.name or 'call'}::out{len(call.output)}")
    return call.output[k]


def _tap_through_loop(node, body, name: str, elem: int) -> str:
    """Expose ``name`` of Loop ``node``'s body as a new scan output (stacked per iteration)."""
    from onnx import helper
    tap = f"{name}::tap_loop"
    if tap in node.output:
        return tap
    inner = f"{tap}_body"
    body.node.append(helper.make_node("Identity", [name], [inner]))
    body.output.append(helper.make_tensor_value_info(inner, elem, None))
    node.output.append(tap)
    return tap


def _carry_through_loop(g, node, body, name: str, elem: int, capped: bool = False) -> tuple[str, str]:
    """Expose ``name`` of Loop ``node``'s body (in graph ``g``) as two new loop-carried values:
    its elements appended at each iteration (1-D) and its rank and dims appended (int64).
    Returns their final values' names (see :func:`_iterations`).  ``capped``: a third carried
    value, ``<elements>_rec`` (bool), stays true while every iteration so far was appended;
    an iteration is appended only while the elements held stay within the int64 scalar
    initializer ``<elements>_cap`` (:func:`_cap_name`, set by the run to its share of the memory
    budget) -- the iterations kept are a prefix, whatever the trip count."""
    from onnx import helper
    tap = f"{name}::carry_loop"
    if tap in node.output:
        return tap, f"{tap}_dims"
    made: list = []
    carried: list = [(tap, elem, [0], []), (f"{tap}_dims", 7, [0], [])] + \
        ([(f"{tap}_rec", 9, [], [True])] if capped else [])
    for out, typ, dims0, value in carried:
        g.initializer.append(helper.make_tensor(f"{out}_init", typ, dims0, value))
        n_carried = len(node.input) - 2  # (inputs: trip count, condition, carried values)
        node.input.append(f"{out}_init")
        body.input.append(helper.make_tensor_value_info(f"{out}_in", typ, None))
        # (outputs: condition, carried values, scan outputs; the node's: carried, scan)
        body.output.insert(1 + n_carried, helper.make_tensor_value_info(f"{out}_out", typ, None))
        node.output.insert(n_carried, out)
        made.append(out)
    flat, dims = made[:2]
    nodes = [
        helper.make_node("Constant", [], [f"{flat}_minus1"], value=helper.make_tensor(f"{flat}_minus1", 7, [1], [-1])),
        helper.make_node("Reshape", [name, f"{flat}_minus1"], [f"{flat}_flat"]),
        helper.make_node("Shape", [name], [f"{dims}_shape"]),
        helper.make_node("Shape", [f"{dims}_shape"], [f"{dims}_rank"]),
    ]
    if not capped:
        nodes += [helper.make_node("Concat", [f"{flat}_in", f"{flat}_flat"], [f"{flat}_out"], axis=0),
                  helper.make_node("Concat", [f"{dims}_in", f"{dims}_rank", f"{dims}_shape"], [f"{dims}_out"],
                                   axis=0)]
    else:  # append all of this iteration (end: the int64 maximum) or none of it (end 0)
        g.initializer.append(helper.make_tensor(_cap_name(flat), 7, [], [0]))
        rec = f"{flat}_rec"
        nodes += [
            helper.make_node("Size", [f"{flat}_in"], [f"{rec}_held"]),
            helper.make_node("Size", [name], [f"{rec}_size"]),
            helper.make_node("Add", [f"{rec}_held", f"{rec}_size"], [f"{rec}_total"]),
            helper.make_node("Greater", [f"{rec}_total", _cap_name(flat)], [f"{rec}_over"]),
            helper.make_node("Not", [f"{rec}_over"], [f"{rec}_fits"]),
            helper.make_node("And", [f"{rec}_in", f"{rec}_fits"], [f"{rec}_out"]),
            helper.make_node("Constant", [], [f"{rec}_all"], value=helper.make_tensor(f"{rec}_all", 7, [1], [2 ** 63 - 1])),
            helper.make_node("Constant", [], [f"{rec}_none"], value=helper.make_tensor(f"{rec}_none", 7, [1], [0])),
            helper.make_node("Where", [f"{rec}_out", f"{rec}_all", f"{rec}_none"], [f"{rec}_end"]),
            helper.make_node("Slice", [f"{flat}_flat", f"{rec}_none", f"{rec}_end"], [f"{rec}_part"]),
            helper.make_node("Concat", [f"{dims}_rank", f"{dims}_shape"], [f"{rec}_dims"], axis=0),
            helper.make_node("Slice", [f"{rec}_dims", f"{rec}_none", f"{rec}_end"], [f"{rec}_dims_part"]),
            helper.make_node("Concat", [f"{flat}_in", f"{rec}_part"], [f"{flat}_out"], axis=0),
            helper.make_node("Concat", [f"{dims}_in", f"{rec}_dims_part"], [f"{dims}_out"], axis=0),
        ]
    body.node.extend(nodes)
    return flat, dims


def _cap_name(flat: str) -> str:
    """The initializer holding the most elements the carried tap ``flat`` keeps."""
    return f"{flat}_cap"


def _iterations(got: dict, name: str, carried: dict) -> list:
    """The per-iteration values of a Loop tap ``name`` in the run ``got``: the stacked scan
    output's slices, or (``carried``: elements -> dims) the carried elements cut and reshaped
    by the dims appended with them (rank, then each dim)."""
    if name not in carried:
        return list(got[name])
    flat, dims = np.asarray(got[name]).reshape(-1), np.asarray(got[carried[name]]).reshape(-1).tolist()
    values, at, k = [], 0, 0
    while k < len(dims):
        shape = tuple(int(d) for d in dims[k + 1:k + 1 + int(dims[k])])
        k += 1 + int(dims[k])
        size = int(np.prod(shape, dtype=np.int64))
        values.append(flat[at:at + size].reshape(shape))
        at += size
    return values


def _tap_through_if(node, branch: str, name: str, elem: int) -> str:
    """Expose ``name`` of one branch of If ``node`` as a new output of the node; returns its name."""
    from onnx import helper
    tap = f"{name}::tap_{branch}"  # a tensor of the outer graph can be read by both branches
    if tap in node.output:
        return tap
    for a in node.attribute:
        g = a.g
        out = f"{tap}_{a.name}"
        if a.name == branch:
            g.node.append(helper.make_node("Identity", [name], [out]))
        else:
            g.node.append(helper.make_node("Constant", [], [out], value=helper.make_tensor(out, elem, [0], [])))
        g.output.append(helper.make_tensor_value_info(out, elem, None))
    node.output.append(tap)
    return tap


#: onnxruntime runs of one in-place check (each failed run grows the dims reaching the failing node)
_RUNS = 6
#: further runs (fresh random inputs) to reach rewrites in If branches not taken yet
_BRANCH_RUNS = 4


def over_budget(need: int, budget: int, sizes: dict) -> str:
    size_text = ", ".join(f"{k}={v}" for k, v in sizes.items() if v != _BASE)
    return (f"needs ~{_mib(need)} MiB, budget {_mib(budget)} MiB (--verify-memory)"
            + (f"; sizes {size_text}" if size_text else ""))


def _failing_node(message: str) -> str | None:
    import re
    m = re.search(r"node\. Name:'([^']*)'", message)
    return m.group(1) if m else None


def _dims_reaching(proto, node_name: str | None) -> list:
    """Symbolic dim keys of the fed inputs upstream of the node named ``node_name``."""
    if node_name is None:
        return []
    producer = {o: n for n in proto.graph.node for o in n.output}
    start = next((n for n in proto.graph.node if n.name == node_name), None)
    if start is None:
        return []
    fed = {vi.name: vi for vi in _fed_inputs(proto)}
    seen, todo, keys = set(), list(start.input), []
    while todo:
        name = todo.pop()
        if name in seen or not name:
            continue
        seen.add(name)
        if name in fed:
            vi = fed[name]
            for k, d in enumerate(vi.type.tensor_type.shape.dim):
                if not d.HasField("dim_value") and _dim_key(vi, k, d) not in keys:
                    keys.append(_dim_key(vi, k, d))
        elif name in producer:
            todo.extend(producer[name].input)
    return keys


def _mib(n: int) -> str:
    return f"{n / 2 ** 20:.0f}" if n >= 10 * 2 ** 20 else f"{n / 2 ** 20:.2g}"
