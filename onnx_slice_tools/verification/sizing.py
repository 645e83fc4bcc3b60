"""Sizes and memory of a whole-model run: what the in-place run (verification/inplace.py), the
as-shipped run (verification/shipped.py) and the cleanup's check all read.

* sizes: the symbolic dims of the fed inputs set small, grown only where shape inference needs
  it (:func:`choose_sizes`; index vectors' lengths pinned: :func:`vector_pins`), the shapes at
  those sizes (:func:`infer_at_sizes`), or the declared ones of a model with no size to choose
  (:func:`declared_shapes`);
* memory: the main graph's value lifetimes (:class:`Liveness`) and the one budget rule
  (:func:`run_need`, :func:`budget_weight_bytes`, :func:`over_budget`).

Apart from the runs so that every run sizes its inputs and counts its memory the same way, and
the as-shipped run need not import the in-place one for it.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..errors import first_line as _line
from ..graphs.table import NodeTable


# --------------------------------------------------------------------------- sizes and memory


class Skip(Exception):
    """The in-place run cannot be done; the message is the reason."""


BASE = 3
MAX_SIZE = 1 << 16


def elem_size(elem: int) -> int:
    from onnx import helper
    try:
        return max(1, np.dtype(helper.tensor_dtype_to_np_dtype(elem)).itemsize)
    except Exception:  # strings and unknown types: a guess
        return 8


def fed_inputs(proto):
    inits = {t.name for t in proto.graph.initializer}
    return [vi for vi in proto.graph.input if vi.name not in inits]


def with_sizes(sk, sizes: dict):
    """A copy of the skeleton's inputs with every symbolic dim set from ``sizes`` (the skeleton
    itself, unmodified, when it has none)."""
    import onnx
    if all(d.HasField("dim_value") for vi in fed_inputs(sk) for d in vi.type.tensor_type.shape.dim) \
            and not any(unranked_vector(vi, sizes) for vi in fed_inputs(sk)):
        return sk
    m = onnx.ModelProto()
    m.CopyFrom(sk)
    _set_sizes(m, sizes)
    return m


def _set_sizes(sk, sizes: dict) -> list:
    """Set every symbolic dim of ``sk``'s fed inputs from ``sizes``, in place (an index vector of
    unknown rank made 1-D: index_vectors); returns what :func:`_unset_sizes` needs to undo it.
    A missing size raises KeyError with what was set so far recorded (``undo`` filled as it goes)."""
    undo: list = []
    try:
        for vi in fed_inputs(sk):
            tt = vi.type.tensor_type
            if unranked_vector(vi, sizes):
                tt.shape.dim.add().dim_value = sizes[f"{vi.name}:0"]
                undo.append((tt, None, None))
                continue
            for k, d in enumerate(tt.shape.dim):
                if not d.HasField("dim_value"):
                    size = sizes[dim_key(vi, k, d)]
                    undo.append((tt, d, d.dim_param))
                    d.dim_value = size
    except BaseException:
        _unset_sizes(undo)
        raise
    return undo


def _unset_sizes(undo: list) -> None:
    """Put back what :func:`_set_sizes` set."""
    for tt, d, param in reversed(undo):
        if d is None:
            tt.ClearField("shape")
        elif param:
            d.dim_param = param
        else:
            d.ClearField("dim_value")


def unranked_vector(vi, sizes: dict) -> bool:
    """An input declared without a shape that :func:`choose_sizes` sized as a 1-D vector."""
    return vi.type.HasField("tensor_type") and not vi.type.tensor_type.HasField("shape") \
        and f"{vi.name}:0" in sizes


def dim_key(vi, k, d):
    return d.dim_param or f"{vi.name}:{k}"


def sized_bytes(sk, sizes: dict) -> bytes:
    """The bytes of :func:`with_sizes` of ``sk`` (its caller's own skeleton, read by no other
    thread meanwhile), made without copying it: its fed inputs' symbolic dims are set from
    ``sizes`` for the serialization, then put back as they were."""
    undo = _set_sizes(sk, sizes)
    try:
        return sk.SerializeToString()
    finally:
        _unset_sizes(undo)


def infer_at_sizes(sk, sizes, table: NodeTable | None = None):
    """name -> (elem, shape) at these sizes, and the first invalid (negative) dim found.
    ``table``: ``sk``'s main graph's nodes (those of the model it is the skeleton of), if read."""
    from ..graphs.shape_inference import infer
    try:
        inferred = infer(sized_bytes(sk, sizes))
    except Exception as exc:
        return {}, f"shape inference: {_line(exc)}"
    return inferred_shapes(inferred, table)


def inferred_shapes(inferred, table: NodeTable | None = None) -> tuple[dict, str | None]:
    """name -> (elem, dims) of every value shape inference gave ``inferred`` (a ModelProto) a
    shape, and the first invalid dim or Reshape found (:func:`infer_at_sizes`).  ``table``: the
    nodes of ``inferred``'s main graph (inference keeps them as they were), if read: a graph
    with no Reshape has none to check."""
    shapes, bad = {}, None
    # a type's bytes -> ((elem, dims) or None, a dim is negative): models repeat a few types many times
    read: dict = {}
    g = inferred.graph
    for vi in itertools.chain(g.input, g.value_info, g.output):
        key = vi.type.SerializeToString()
        hit = read.get(key)
        if hit is None:
            known = elem_dims(vi.type)
            hit = read[key] = (known, known is not None and any(d is not None and d < 0 for d in known[1]))
        known, negative = hit
        if known is None:
            continue
        if negative and bad is None:
            bad = f"{vi.name} would have shape {list(known[1])}"
        shapes[vi.name] = known
    if bad is None and table is not None and "Reshape" not in table.ops:
        return shapes, None
    return shapes, bad or _bad_reshape(inferred.graph, shapes)


def elem_dims(t) -> tuple | None:
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
    declared = {vi.name: vi for vi in fed_inputs(proto)}
    for name, vec in vectors.items():
        if not vec.pinned:
            continue
        vi = declared[name]
        tt = vi.type.tensor_type
        key = dim_key(vi, 0, tt.shape.dim[0]) if tt.HasField("shape") else f"{name}:0"
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


def choose_sizes(sk, pins: dict | None = None, table: NodeTable | None = None) -> tuple[dict, dict]:
    """Sizes for the symbolic dims of the fed inputs: small (3); else 1 (a model whose constant
    Reshape fixes an unknown batch dim to 1); else grown where shape inference at those sizes
    gives a negative dim (e.g. a 400-wide Conv kernel on a length) or a Reshape cannot take them.
    ``pins`` (:func:`vector_pins`): dims whose size is fixed -- the lengths index vectors
    must have; never grown.  Returns (sizes, inferred shapes).  Raises Skip when no size up
    to 65536 works.  ``table``: as :func:`infer_at_sizes` takes it."""
    pins = pins or {}
    keys = []
    for vi in fed_inputs(sk):
        if not vi.type.HasField("tensor_type"):
            raise Skip(f"input {vi.name!r} is not a tensor")
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            if f"{vi.name}:0" in pins:
                continue
            raise Skip(f"input {vi.name!r} has an unknown rank")
        for k, d in enumerate(tt.shape.dim):
            key = dim_key(vi, k, d)
            if not d.HasField("dim_value") and key not in keys and key not in pins:
                keys.append(key)
    sizes = {**{k: BASE for k in keys}, **pins}
    shapes, bad = infer_at_sizes(sk, sizes, table)
    if bad is None:
        return sizes, shapes
    if not keys:
        raise Skip(_declared_sizes_invalid(bad))
    ones = {**{k: 1 for k in keys}, **pins}
    shapes, bad = infer_at_sizes(sk, ones, table)  # a model fixed to batch 1 behind an unknown dim
    if bad is None:
        return ones, shapes
    size = BASE
    while bad is not None:  # every symbolic dim together, x4 per step
        size *= 4
        if size > MAX_SIZE or not keys:
            raise Skip(f"no input size up to {MAX_SIZE} gives valid shapes ({bad})")
        sizes = {**{k: size for k in keys}, **pins}
        shapes, bad = infer_at_sizes(sk, sizes, table)
    for k in keys:  # then back to small, one dim at a time, where that stays valid
        trial = dict(sizes, **{k: BASE})
        got, problem = infer_at_sizes(sk, trial, table)
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
        self._fed: list | None = None

    def fed(self) -> list:
        """:func:`fed_inputs` of ``proto``, read once."""
        if self._fed is None:
            self._fed = fed_inputs(self.proto)
        return self._fed

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
            end = len(table)  # (graph outputs some node reads: only they can outlive their last reader)
            read_outputs = [name for name in dict.fromkeys(o.name for o in self.proto.graph.output)
                            if last.get(name, end) < end]
            self._tables = (made, np.asarray(at, dtype=np.int64), end, last, read_outputs,
                            [vi.name for vi in self.fed()])
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
                b = by_type[key] = tensor_bytes(key)
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
        made, at, end, consumed, read_outputs, fed = self._read()
        size, sizes, made_bytes, freed = self._sizes(shapes)
        live = sum(size.get(name, 0) for name in fed)
        if not end:
            return live
        # per node k: what it makes (live += made[k]; the peak is taken), then what it reads last
        # and, with ``outputs`` False, what nothing reads (live -= freed[k] + transient[k]); a
        # graph output or a kept value read by a node lives to the end instead
        kept = set(keep)
        held = {name for name in (*(read_outputs if outputs else ()), *kept)
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


def tensor_bytes(shape_entry) -> int:
    elem, dims = shape_entry
    count = 1
    for d in dims:
        count *= d
    return count * elem_size(elem)


def over_budget(need: int, budget: int, sizes: dict) -> str:
    size_text = ", ".join(f"{k}={v}" for k, v in sizes.items() if v != BASE)
    return (f"needs ~{mib(need)} MiB, budget {mib(budget)} MiB (--verify-memory)"
            + (f"; sizes {size_text}" if size_text else ""))


def mib(n: int) -> str:
    return f"{n / 2 ** 20:.0f}" if n >= 10 * 2 ** 20 else f"{n / 2 ** 20:.2g}"
