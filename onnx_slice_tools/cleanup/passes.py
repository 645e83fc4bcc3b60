"""Cleanup after the rewrite: small exact passes over the main graph, every subgraph and every
function, and a check that the cleaned model computes the same bits as before.

The rewrite lowers each StridedSlice alone; around shape arithmetic (``tf.shape(x)[i]``)
that leaves ``Slice -> Squeeze -> (Cast, Add...) -> Unsqueeze -> Concat`` chains, duplicate
``Shape``/``Cast``/``Slice`` of one tensor and shape values that are known at conversion time.
Each pass here is one transformation, onnx-ir style (``call(model) -> PassResult``):

* :class:`FoldShapeArithmeticPass` -- integer values (rank <= 1) computed by data movement and
  integer ``+ - *`` from static dims and small constants become constants;
* :class:`LiftScalarsPass` -- ``Unsqueeze`` of a scalar built from ``Squeeze``-d length-1
  vectors, scalar constants and elementwise ops becomes the same computation on the vectors;
  ``Unsqueeze(Squeeze(x))`` with the same axes on static size-1 dims becomes ``x``;
* :class:`MergeSlicesPass` -- ``Slice`` of a ``Slice`` on other axes becomes one ``Slice``;
* :class:`TransposeSliceTransposePass` -- a ``Slice`` between a ``Transpose`` and its inverse
  becomes a ``Slice`` on the untransposed tensor;
* :class:`CommonSubexpressionPass` -- nodes with the same op, attributes and inputs (small
  constants compared by value) computed once per graph;
* :class:`RemoveDeadPass` -- onnx-ir's unused-node removal plus unused subgraph initializers.

Each pass also has its firing condition on the ModelProto, ``may_fire(index)`` (its function in
cleanup/conditions.py, over the protobuf index of cleanup/scan.py): a reason whenever the pass
could change the model (shape-dependent parts taken as "may hold"), else None.
``scan.may_change`` asks them all before any onnx-ir model exists (or is imported); when none
may fire, ``convert`` does not run the passes.

Nothing changes a value's bits: folding evaluates only integer data movement and integer
``Add``/``Sub``/``Mul``/``Neg`` whose results fit the type; lifting and merging keep every op's
elementwise computation.  Graph outputs keep their names, types and shapes (a node producing
a graph output is never replaced).
"""

from __future__ import annotations

import collections
import functools
import itertools

import numpy as np
import onnx_ir as ir

from . import conditions
from .qdq import QdqMovementPass
from .conditions import ELEMENTWISE, NONDETERMINISTIC
from .scan import SMALL, ProtoIndex
from ..errors import first_line as _first_line
from ..graphs.walk import proto_graphs

_INT_TYPES = frozenset({ir.DataType.INT8, ir.DataType.INT16, ir.DataType.INT32, ir.DataType.INT64,
                        ir.DataType.UINT8, ir.DataType.UINT16, ir.DataType.UINT32, ir.DataType.UINT64})
#: Above this many bytes of in-memory weights, shape inference (which serialises the model) is
#: skipped: the passes then use the shapes the model declares.
_INFER_MAX_BYTES = 256 * 2 ** 20


# --------------------------------------------------------------------------- model walking


def graphs_of(model) -> list:
    """(graph, is_function_body) for the main graph, every subgraph and every function body."""
    from ..graphs.walk import all_graphs as _all_graphs
    return [(g.graph if is_function else g, label.startswith("function"))
            for g, label, is_function in _all_graphs(model)]


def op_counts(model) -> collections.Counter:
    """Nodes by op type over the main graph, subgraphs and functions."""
    counts: collections.Counter[str] = collections.Counter()
    for g, _ in graphs_of(model):
        counts.update(n.op_type for n in g)
    return counts


class _Context:
    """What a pass needs to add constants: unique names, and whether a graph is a function body
    (no initializers there: constants become ``Constant`` nodes)."""

    def __init__(self, model, graphs=None):
        self.model = model
        self.function_graphs = set()
        names = set()
        for g, is_function in graphs if graphs is not None else graphs_of(model):
            if is_function:
                self.function_graphs.add(id(g))
            names.update(v.name for v in g.inputs if v.name)
            names.update(v.name for v in g.initializers.values() if v.name)
            for n in g:
                names.update(v.name for v in n.outputs if v.name)
        self.names = names
        self.counter = itertools.count()
        self.made: list = []  # (graph, node or initializer name) in the order added: see undo


    def opset(self) -> int:
        return self.model.opset_imports.get("", self.model.opset_imports.get("ai.onnx", 13))

    def fresh(self, hint: str) -> str:
        while True:
            name = f"{hint}__cl{next(self.counter)}"
            if name not in self.names:
                self.names.add(name)
                return name

    def constant(self, graph, array: np.ndarray, before, hint: str) -> ir.Value:
        """A constant value usable by ``before`` (a node of ``graph``)."""
        tensor = ir.tensor(array, name=self.fresh(hint))
        if id(graph) in self.function_graphs:
            node = ir.node("Constant", [], attributes={"value": tensor},
                           outputs=[ir.Value(name=tensor.name, type=ir.TensorType(tensor.dtype),
                                             shape=ir.Shape(array.shape))])
            graph.insert_before(before, node)
            self.made.append((graph, node))
            return node.outputs[0]
        value = ir.Value(name=tensor.name, type=ir.TensorType(tensor.dtype), shape=ir.Shape(array.shape),
                         const_value=tensor)
        graph.register_initializer(value)
        self.made.append((graph, tensor.name))
        return value

    def node(self, graph, op_type: str, inputs, attributes, before, like: ir.Value, shape) -> ir.Value:
        """Insert ``op_type(inputs)`` before ``before``; its output has ``like``'s dtype and ``shape``."""
        out = ir.Value(name=self.fresh(like.name or op_type), type=like.type,
                       shape=None if shape is None else ir.Shape(shape))
        node = ir.node(op_type, list(inputs), attributes=attributes, outputs=[out])
        graph.insert_before(before, node)
        self.made.append((graph, node))
        return out

    def undo(self, mark: int) -> None:
        """Remove what :meth:`constant` and :meth:`node` added since ``mark`` (``len(made)`` then),
        latest first: a replacement built part way and then given up leaves nothing behind."""
        while len(self.made) > mark:
            graph, made = self.made.pop()
            if isinstance(made, str):
                del graph.initializers[made]
            else:
                graph.remove(made, safe=True)


# --------------------------------------------------------------------------- value facts


def const_array(value) -> np.ndarray | None:
    """The value of a small constant (initializer that is not a graph input, or ``Constant``)."""
    if value is None:
        return None
    tensor = None
    if value.const_value is not None and not value.is_graph_input():
        tensor = value.const_value
    else:
        producer = value.producer()
        if producer is not None and producer.op_type == "Constant" and producer.domain in ("", "ai.onnx"):
            attr = producer.attributes.get("value")
            if attr is not None and attr.type == ir.AttributeType.TENSOR:
                tensor = attr.value
            elif producer.attributes.get("value_int") is not None:
                return np.array(producer.attributes["value_int"].value, dtype=np.int64)
            elif producer.attributes.get("value_ints") is not None:
                return np.array(list(producer.attributes["value_ints"].value), dtype=np.int64)
    if tensor is None or tensor.size > SMALL:
        return None
    try:
        return tensor.numpy()
    except Exception:
        return None


def _static_dims(value) -> tuple | None:
    """The value's shape as a tuple of ints and None (unknown dims), or None for unknown rank."""
    shape = value.shape if value is not None else None
    if shape is None:
        return None
    return tuple(d if isinstance(d, int) else None for d in shape)


def _int_const(value) -> list[int] | None:
    arr = const_array(value)
    if arr is None or arr.dtype.kind not in "iu":
        return None
    return [int(v) for v in arr.reshape(-1)]


def _axes(node, index: int = 1) -> list[int] | None:
    """A Squeeze/Unsqueeze/ReduceX node's axes (attribute before opset 13, input from 13)."""
    attr = node.attributes.get("axes")
    if attr is not None:
        return list(attr.value)
    if len(node.inputs) > index and node.inputs[index] is not None:
        return _int_const(node.inputs[index])
    return None


class _Facts:
    """Known elements of small integer values (rank 0 or 1): ``(dtype, shape, elements)``.
    An element is an int, ``("dim", id(x), k)`` for dim ``k`` of tensor ``x`` (a symbolic dim
    read by ``Shape``), or None when unknown.  Memoised per pass run."""

    def __init__(self):
        self.memo: dict = {}
        self.tensors: dict = {}  # id -> Value, for the ("dim", id, k) elements

    def __call__(self, value):
        if value is None:
            return None
        key = id(value)
        if key not in self.memo:
            self.memo[key] = None  # cycles cannot happen in a DAG; guards deep recursion on error
            self.memo[key] = self._compute(value)
        return self.memo[key]

    def _compute(self, value):
        arr = const_array(value)
        if arr is not None:
            if arr.dtype.kind not in "iu" or arr.ndim > 1:
                return None
            return ir.DataType.from_numpy(arr.dtype), arr.shape, [int(v) for v in arr.reshape(-1)]
        node = value.producer()
        if node is None or node.domain not in ("", "ai.onnx") or len(node.outputs) != 1:
            return None
        rule = self._RULES.get(node.op_type)
        return rule(self, node, node.inputs) if rule is not None else None

    def _shape(self, node, ins):
        dims = _static_dims(ins[0])
        if dims is None:
            return None
        self.tensors[id(ins[0])] = ins[0]
        named = [d if d is not None else ("dim", id(ins[0]), k) for k, d in enumerate(dims)]
        start, end = node.attributes.get("start"), node.attributes.get("end")
        picked = named[slice(start.value if start else None, end.value if end else None)]
        return ir.DataType.INT64, (len(picked),), picked

    def _size(self, node, ins):
        dims = _static_dims(ins[0])
        if dims is None or None in dims:
            return None
        return ir.DataType.INT64, (), [int(np.prod(dims, dtype=np.int64))]

    def _cast(self, node, ins):
        src = self(ins[0])
        if src is None:
            return None
        dtype = src[0] if node.op_type == "Identity" else ir.DataType(node.attributes["to"].value)
        # A dim passes through an integer Cast unchanged: it is assumed below 2 ** 31 (TF's own
        # int32 shape arithmetic makes the same assumption).
        if dtype not in _INT_TYPES or not all(not isinstance(e, int) or _fits(e, dtype) for e in src[2]):
            return None
        return dtype, src[1], src[2]

    def _squeeze(self, node, ins):
        src, axes = self(ins[0]), _axes(node)
        if src is not None and src[1] == (1,) and axes in (None, [0], [-1]):
            return src[0], (), src[2]
        return None

    def _unsqueeze(self, node, ins):
        src, axes = self(ins[0]), _axes(node)
        if src is not None and src[1] == () and axes in ([0], [-1]):
            return src[0], (1,), src[2]
        return None

    def _concat(self, node, ins):
        parts = [self(v) for v in ins]
        if not parts or any(p is None or len(p[1]) != 1 for p in parts):
            return None
        elems = [e for p in parts for e in p[2]]
        return parts[0][0], (len(elems),), elems

    def _gather(self, node, ins):
        src, idx = self(ins[0]), _int_const(ins[1])
        axis = node.attributes.get("axis")
        if src is None or idx is None or len(src[1]) != 1 or (axis is not None and axis.value not in (0, -1)):
            return None
        n = len(src[2])
        if not all(-n <= i < n for i in idx):
            return None  # the run-time error stays
        return src[0], const_array(ins[1]).shape, [src[2][i] for i in idx]

    def _slice(self, node, ins):
        src = self(ins[0])
        if src is None or len(src[1]) != 1 or len(ins) < 3:
            return None
        params = _slice_params(node)
        if params is None or len(params[0]) != 1 or params[2] not in ([0], [-1]) or params[3] == [0]:
            return None
        picked = src[2][slice(params[0][0], params[1][0], params[3][0])]
        return src[0], (len(picked),), picked

    def _arith(self, node, ins):
        parts = [self(v) for v in ins]
        if any(p is None for p in parts) or len({p[0] for p in parts}) != 1:
            return None
        dtype = parts[0][0]
        try:
            shape = np.broadcast_shapes(*[p[1] for p in parts])
        except ValueError:
            return None
        n = int(np.prod(shape, dtype=np.int64))
        cols = [p[2] * n if len(p[2]) == 1 else p[2] for p in parts]
        fn = _ARITH[node.op_type]
        elems = []
        for args in zip(*cols):
            r = fn(*args) if all(isinstance(a, int) for a in args) else None
            if r is not None and not _fits(r, dtype):
                return None  # wrap-around is left to the runtime
            elems.append(r)
        return dtype, tuple(shape), elems

    _RULES = {"Shape": _shape, "Size": _size, "Cast": _cast, "Identity": _cast, "Squeeze": _squeeze,
              "Unsqueeze": _unsqueeze, "Concat": _concat, "Gather": _gather, "Slice": _slice,
              "Add": _arith, "Sub": _arith, "Mul": _arith, "Neg": _arith}


_ARITH = {"Add": lambda a, b: a + b, "Sub": lambda a, b: a - b, "Mul": lambda a, b: a * b, "Neg": lambda a: -a}


def _fits(v: int, dtype: ir.DataType) -> bool:
    info = np.iinfo(dtype.numpy())
    return info.min <= v <= info.max


# --------------------------------------------------------------------------- passes


class CleanupPass(ir.passes.InPlacePass):
    """A pass over every graph, subgraph and function body of a model (``run_graph``), with its
    firing condition on the ModelProto (``may_fire``): a new pass subclasses this, goes into
    :func:`default_passes`, and points ``may_fire`` at its condition in cleanup/conditions.py
    (listed in ``conditions.CONDITIONS``) to be skipped when it cannot fire."""

    def call(self, model) -> ir.passes.PassResult:
        graphs = graphs_of(model)
        ctx = _Context(model, graphs)
        changed = False
        for graph, _ in graphs:
            changed |= self.run_graph(graph, ctx)
        return ir.passes.PassResult(model, modified=changed)

    def run_graph(self, graph, ctx: _Context) -> bool:
        raise NotImplementedError

    @classmethod
    def may_fire(cls, index: ProtoIndex) -> str | None:
        """Whether the pass may change the model ``index`` describes: a reason naming the pass
        and the node, or None when it surely does not.  Sound, not exact: it may say yes where the
        pass finds nothing, never no where it fires.  A pass without a condition of its own may
        always fire."""
        return f"{cls.__name__} may change it (it has no pre-check)"


def _replace(old: ir.Value, new: ir.Value) -> None:
    old.replace_all_uses_with(new)


class FoldShapeArithmeticPass(CleanupPass):
    """Integer values of rank <= 1 whose every element is known (static dims, small constants,
    data movement, integer ``+ - *`` without overflow) become constants."""

    def run_graph(self, graph, ctx) -> bool:
        facts = _Facts()
        changed = False
        for node in list(graph):
            if node.op_type == "Constant" or len(node.outputs) != 1 or node.domain not in ("", "ai.onnx"):
                continue
            out = node.outputs[0]
            if out.is_graph_output() or not out.uses():
                continue
            fact = facts(out)
            if not _known(fact):
                continue
            if all(_folds(facts, u.node) for u in out.uses()):
                continue  # its users fold too: only the outermost values become constants
            array = np.array(fact[2], dtype=fact[0].numpy()).reshape(fact[1])
            _replace(out, ctx.constant(graph, array, node, out.name or node.op_type))
            changed = True
        return changed

    may_fire = staticmethod(conditions.known_integers)


def _folds(facts: _Facts, node) -> bool:
    if node.op_type == "Constant" or len(node.outputs) != 1 or node.outputs[0].is_graph_output():
        return False
    return _known(facts(node.outputs[0]))


def _known(fact) -> bool:
    return fact is not None and all(isinstance(e, int) for e in fact[2])


class LiftScalarsPass(CleanupPass):
    """``Unsqueeze(s, axes=[0])`` of a scalar ``s`` computed from ``Squeeze``-d length-1 vectors,
    scalar constants, ``Gather`` of one constant index and elementwise ops becomes the same
    computation on length-1 vectors (``Squeeze -> Cast -> Unsqueeze`` == ``Cast``).
    ``Unsqueeze(Squeeze(x, A), A)`` on static size-1 dims becomes ``x``."""

    def run_graph(self, graph, ctx) -> bool:
        changed = False
        for node in list(graph):
            if node.op_type != "Unsqueeze" or node.domain not in ("", "ai.onnx") or node.graph is not graph:
                continue
            out = node.outputs[0]
            if out.is_graph_output():
                continue
            axes = _axes(node)
            if axes is None:
                continue
            new = None
            if axes in ([0], [-1]):
                mark = len(ctx.made)
                new = self._lift(node.inputs[0], graph, ctx, node, top=True)
                if new is None:  # (a chain given up part way: its first pieces were made)
                    ctx.undo(mark)
            if new is None:
                new = _undo_squeeze(node.inputs[0], axes)
            if new is None:
                continue
            _replace(out, new)
            changed = True
        return changed

    def _lift(self, value, graph, ctx, before, top=False):
        """A length-1 vector equal to Unsqueeze(value), or None.  Nodes are added only for
        values used once (by the chain being lifted), so the node count never grows."""
        if value is None:
            return None
        arr = const_array(value)
        if arr is not None:
            if arr.ndim != 0:
                return None
            return ctx.constant(graph, arr.reshape(1), before, value.name or "c")
        node = value.producer()
        if node is None or node.domain not in ("", "ai.onnx") or node.graph is not graph or len(node.outputs) != 1:
            return None
        if node.op_type == "Squeeze":
            src = node.inputs[0]
            dims = _static_dims(src)
            axes = _axes(node)
            if dims == (1,) and axes in (None, [0], [-1]):
                return src
            return None
        if len(value.uses()) != 1 or value.is_graph_output():
            return None
        if node.op_type == "Gather":
            idx = const_array(node.inputs[1])
            axis = node.attributes.get("axis")
            dims = _static_dims(node.inputs[0])
            if idx is None or idx.ndim != 0 or dims is None or len(dims) != 1 or \
                    (axis is not None and axis.value not in (0, -1)):
                return None
            index = ctx.constant(graph, idx.reshape(1), before, node.inputs[1].name or "i")
            return ctx.node(graph, "Gather", [node.inputs[0], index], {"axis": 0}, before, value, (1,))
        if node.op_type not in ELEMENTWISE or not node.inputs:
            return None
        if node.op_type == "Cast" and any(a not in ("to",) for a in node.attributes):
            return None
        if not _is_scalar(value):
            return None
        lifted = []
        for v in node.inputs:
            if v is None:
                return None
            lifted.append(self._lift(v, graph, ctx, before))
            if lifted[-1] is None:
                return None
        return ctx.node(graph, node.op_type, lifted, dict(node.attributes), before, value, (1,))

    may_fire = staticmethod(conditions.lift_scalars)


def _is_scalar(value) -> bool:
    return value.shape is not None and len(value.shape) == 0


def _undo_squeeze(value, axes):
    """``x`` when ``value`` is ``Squeeze(x, A)`` with static size-1 dims at A and ``axes`` (of
    the Unsqueeze) put the same dims back."""
    node = value.producer() if value is not None else None
    if node is None or node.op_type != "Squeeze" or node.domain not in ("", "ai.onnx"):
        return None
    src = node.inputs[0]
    dims = _static_dims(src)
    sq = _axes(node)
    if dims is None or sq is None:
        return None
    rank = len(dims)
    sq_norm = sorted(a + rank if a < 0 else a for a in sq)
    un_norm = sorted(a + rank if a < 0 else a for a in axes)
    if sq_norm != un_norm or any(not 0 <= a < rank or dims[a] != 1 for a in sq_norm):
        return None
    return src


class MergeSlicesPass(CleanupPass):
    """``Slice(Slice(x))`` with constant parameters on distinct axes (non-negative, or negative
    with a known rank) becomes one ``Slice``, when the inner one has no other use."""

    def run_graph(self, graph, ctx) -> bool:
        changed = False
        for node in list(graph):
            if node.op_type != "Slice" or node.domain not in ("", "ai.onnx") or len(node.inputs) < 3:
                continue
            inner = node.inputs[0].producer()
            if inner is None or inner.op_type != "Slice" or inner.domain not in ("", "ai.onnx") or \
                    inner.graph is not graph or len(inner.inputs) < 3:
                continue
            mid = inner.outputs[0]
            if len(mid.uses()) != 1 or mid.is_graph_output():
                continue
            a, b = _slice_params(inner), _slice_params(node)
            if a is None or b is None:
                continue
            dims = _static_dims(inner.inputs[0])
            rank = len(dims) if dims is not None else None
            axes = []
            for ax in a[2] + b[2]:
                if ax < 0:
                    if rank is None:
                        break
                    ax += rank
                axes.append(ax)
            if len(axes) != len(a[2]) + len(b[2]) or len(set(axes)) != len(axes):
                continue
            params = [ctx.constant(graph, np.array(a[i] + b[i], dtype=np.int64), node, hint)
                      for i, hint in enumerate(("starts", "ends", "axes", "steps"))]
            node.resize_inputs(5)  # the outer node is kept (its output may be a graph output)
            for i, v in enumerate([inner.inputs[0], *params]):
                node.replace_input_with(i, v)
            changed = True
        return changed

    may_fire = staticmethod(conditions.merge_slices)


def _slice_params(node):
    """(starts, ends, axes, steps) of a Slice with constant parameters, or None."""
    ins = node.inputs
    starts, ends = _int_const(ins[1]), _int_const(ins[2])
    if starts is None or ends is None or len(starts) != len(ends):
        return None
    axes = _int_const(ins[3]) if len(ins) > 3 and ins[3] is not None else list(range(len(starts)))
    steps = _int_const(ins[4]) if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
    if axes is None or steps is None or len(axes) != len(starts) or len(steps) != len(starts):
        return None
    return starts, ends, axes, steps


class TransposeSliceTransposePass(CleanupPass):
    """``Transpose(Slice(Transpose(x, P)), Q)`` where ``Q`` undoes ``P`` becomes ``Slice(x)`` on
    the axes ``P`` maps the slice's axes to: tf2onnx's layout optimiser cannot push its NHWC/NCHW
    Transposes through a StridedSlice it kept as a custom node, so after the rewrite a channel
    slice sits between a Transpose pair.  Pure data movement in another order (the same elements);
    each middle value used once, not a graph output, the slice's parameters constant."""

    def run_graph(self, graph, ctx) -> bool:
        changed = False
        for node in list(graph):
            pair = _transpose_pair(node, graph)
            if pair is None:
                continue
            first, mid = pair
            perm = list(first.attributes["perm"].as_ints())
            starts, ends, axes, steps = _slice_params(mid)
            axes = [perm[a + len(perm) if a < 0 else a] for a in axes]
            mid.resize_inputs(5)
            mid.replace_input_with(0, first.inputs[0])
            mid.replace_input_with(3, ctx.constant(graph, np.array(axes, dtype=np.int64), mid, "axes"))
            mid.replace_input_with(4, ctx.constant(graph, np.array(steps, dtype=np.int64), mid, "steps"))
            out = mid.outputs[0]
            out.shape = None  # the elements of the same slice, in x's layout
            _replace(node.outputs[0], out)
            changed = True
        return changed

    may_fire = staticmethod(conditions.transpose_slice_transpose)


def _transpose_pair(node, graph):
    """(the first Transpose, the Slice) when ``node`` is the second Transpose of a pair
    :class:`TransposeSliceTransposePass` removes, else None."""
    if node.op_type != "Transpose" or node.domain not in ("", "ai.onnx") or not node.inputs or \
            node.outputs[0].is_graph_output() or "perm" not in node.attributes:
        return None
    mid = node.inputs[0].producer() if node.inputs[0] is not None else None
    if mid is None or mid.op_type != "Slice" or mid.domain not in ("", "ai.onnx") or mid.graph is not graph or \
            len(mid.inputs) < 3 or len(mid.outputs[0].uses()) != 1 or mid.outputs[0].is_graph_output():
        return None
    first = mid.inputs[0].producer() if mid.inputs[0] is not None else None
    if first is None or first.op_type != "Transpose" or first.domain not in ("", "ai.onnx") or \
            first.graph is not graph or "perm" not in first.attributes or len(first.outputs[0].uses()) != 1 or \
            first.outputs[0].is_graph_output():
        return None
    p, q = list(first.attributes["perm"].as_ints()), list(node.attributes["perm"].as_ints())
    if len(p) != len(q) or sorted(p) != list(range(len(p))) or any(p[q[i]] != i for i in range(len(q))):
        return None
    params = _slice_params(mid)
    if params is None or any(not -len(p) <= a < len(p) for a in params[2]):
        return None
    return first, mid


class ReshapeCopyDimsPass(CleanupPass):
    """``Reshape(x, shape)`` whose shape is built from constants and dims of ``x`` itself, each
    at its own position (``x.reshape(tf.shape(x)[0], tf.shape(x)[1], 12, 64)``), gets a
    constant shape with 0 there (ONNX: "copy this dim", allowzero=0): the ``Shape -> Slice ->
    Concat`` arithmetic goes dead."""

    def run_graph(self, graph, ctx) -> bool:
        facts = _Facts()
        changed = False
        for node in list(graph):
            if node.op_type != "Reshape" or node.domain not in ("", "ai.onnx") or len(node.inputs) != 2:
                continue
            allowzero = node.attributes.get("allowzero")
            if allowzero is not None and allowzero.value:
                continue
            data, shape = node.inputs
            if const_array(shape) is not None:
                continue
            fact = facts(shape)
            if fact is None or len(fact[1]) != 1:
                continue
            new = []
            for i, e in enumerate(fact[2]):
                if isinstance(e, int):
                    new.append(e)
                elif e is not None and e[1] == id(data) and e[2] == i:
                    new.append(0)
                else:
                    break
            if len(new) == len(fact[2]):
                node.replace_input_with(1, ctx.constant(graph, np.array(new, dtype=np.int64), node,
                                                        shape.name or "shape"))
                changed = True
                continue
            axes = _inserted_axes(fact[2], _static_dims(data), id(data))
            out = node.outputs[0]
            if axes is None or out.is_graph_output():
                continue
            if ctx.opset() >= 13:
                unsq = [data, ctx.constant(graph, np.array(axes, dtype=np.int64), node, "axes")]
                _replace(out, ctx.node(graph, "Unsqueeze", unsq, {}, node, out, _shape_list(out)))
            else:
                _replace(out, ctx.node(graph, "Unsqueeze", [data], {"axes": axes}, node, out, _shape_list(out)))
            changed = True
        return changed

    may_fire = staticmethod(conditions.reshape_copy_dims)


def _shape_list(value):
    return None if value.shape is None else list(value.shape)


def _inserted_axes(elems, dims, data_id) -> list[int] | None:
    """When a Reshape's target is the data's own dims in order with 1s inserted
    (``[d0, 1, 1, d1]`` for data ``[d0, d1]``), the positions of the inserted 1s: the Reshape is
    that Unsqueeze.  None otherwise (a literal 0 or -1 in the target included)."""
    if dims is None:
        return None
    j, axes = 0, []
    for i, e in enumerate(elems):
        if j < len(dims) and (e == ("dim", data_id, j) or (isinstance(e, int) and e > 0 and e == dims[j])):
            j += 1
        elif e == 1:
            axes.append(i)
        else:
            return None
    return axes if j == len(dims) and axes else None


#: Ops the shape-vector analysis (``_Facts``) reads through.
_SHAPE_OPS = frozenset({"Shape", "Size", "Cast", "Identity", "Squeeze", "Unsqueeze", "Concat", "Gather", "Slice",
                        "Add", "Sub", "Mul", "Neg", "Constant"})


class RebuildShapeVectorsPass(CleanupPass):
    """An int64 vector whose elements are constants and dims of one tensor ``x`` (``[b, s, 768]``
    from ``Shape -> Cast(int32) -> Gather -> Concat -> Cast(int64)``) is rebuilt as
    ``Concat(Shape(x, start, end), [768])`` when that takes fewer nodes than the arithmetic it
    replaces (counting only nodes nothing else uses)."""

    def run_graph(self, graph, ctx) -> bool:
        facts = _Facts()
        changed = False
        for node in list(graph):
            if node.domain not in ("", "ai.onnx") or len(node.outputs) != 1 or node.op_type in ("Shape", "Constant") \
                    or node.graph is not graph:
                continue
            out = node.outputs[0]
            if out.is_graph_output() or not out.uses():
                continue
            pieces = _shape_pieces(facts(out))
            if pieces is None or all(_shape_pieces(facts(u.node.outputs[0])) is not None
                                     for u in out.uses() if len(u.node.outputs) == 1):
                continue  # not the outermost such vector
            x = facts.tensors[pieces[1]]
            if x.graph is not graph:
                continue  # an outer-scope value (not tracked here) or a function's
            cost = len([p for p in pieces[0] if p[0] == "dims"]) + (len(pieces[0]) > 1)
            if ctx.opset() < 15:
                cost += 1  # one Shape, then a Slice per run of dims
            if id(graph) in ctx.function_graphs:
                cost += len([p for p in pieces[0] if p[0] == "ints"])
            if cost >= _exclusive_cone(node):
                continue
            _replace(out, self._build(graph, ctx, node, out, x, pieces[0]))
            changed = True
        return changed

    def _build(self, graph, ctx, before, out, x, pieces):
        parts = []
        full = None
        for kind, a, b in pieces:
            if kind == "ints":
                parts.append(ctx.constant(graph, np.array(a, dtype=np.int64), before, "dims"))
            elif ctx.opset() >= 15:
                parts.append(ctx.node(graph, "Shape", [x], {"start": a, "end": b}, before, out, (b - a,)))
            else:
                if full is None:
                    full = ctx.node(graph, "Shape", [x], {}, before, out, None)
                starts = ctx.constant(graph, np.array([a], dtype=np.int64), before, "starts")
                ends = ctx.constant(graph, np.array([b], dtype=np.int64), before, "ends")
                parts.append(ctx.node(graph, "Slice", [full, starts, ends], {}, before, out, (b - a,)))
        if len(parts) == 1:
            return parts[0]
        return ctx.node(graph, "Concat", parts, {"axis": 0}, before, out, _shape_list(out))

    may_fire = staticmethod(conditions.known_integers)


def _shape_pieces(fact):
    """([("ints", [..], None) | ("dims", start, end)], id(x)) for an int64 vector of constants and
    dims of one tensor x in runs of consecutive dims, with at least one dim; else None."""
    if fact is None or fact[0] != ir.DataType.INT64 or len(fact[1]) != 1:
        return None
    elems = fact[2]
    if any(e is None for e in elems) or all(isinstance(e, int) for e in elems):
        return None
    sources = {e[1] for e in elems if not isinstance(e, int)}
    if len(sources) != 1:
        return None
    pieces: list = []
    for e in elems:
        last = pieces[-1] if pieces else None
        if isinstance(e, int):
            if last is not None and last[0] == "ints":
                last[1].append(e)
            else:
                pieces.append(["ints", [e], None])
        elif last is not None and last[0] == "dims" and last[2] == e[2]:
            last[2] += 1
        else:
            pieces.append(["dims", e[2], e[2] + 1])
    return [tuple(p) for p in pieces], sources.pop()


def _exclusive_cone(root) -> int:
    """How many nodes go dead when ``root``'s output is no longer used: ``root`` and the
    shape-arithmetic nodes above it that nothing else uses."""
    order, seen, stack = [], set(), [root]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        order.append(n)
        if n.op_type == "Shape":
            continue
        for v in n.inputs:
            p = v.producer() if v is not None else None
            if p is not None and p.graph is root.graph and p.op_type in _SHAPE_OPS and p.domain in ("", "ai.onnx"):
                stack.append(p)
    dead = {id(root)}
    grew = True
    while grew:
        grew = False
        for n in order:
            if id(n) in dead:
                continue
            if all(not o.is_graph_output() and all(id(u.node) in dead for u in o.uses()) for o in n.outputs):
                dead.add(id(n))
                grew = True
    return len(dead)


class CommonSubexpressionPass(CleanupPass):
    """Nodes with one op, equal attributes and the same inputs -- small constants compared by
    value -- are computed once per graph (onnx-ir's pass covers only the main graph and
    compares constants by identity)."""

    def run_graph(self, graph, ctx) -> bool:
        seen: dict = {}
        changed = False
        value_keys: dict = {}  # id(value) -> (value, key): a constant read once, not once per reader
        for node in list(graph):
            key = _node_key(node, value_keys)
            if key is None:
                continue
            first = seen.get(key)
            if first is None:
                seen[key] = node
                continue
            if any(v.is_graph_output() for v in node.outputs):
                continue
            for old, new in zip(node.outputs, first.outputs):
                _replace(old, new)
            changed = True
        return changed

    may_fire = staticmethod(conditions.common_subexpression)


def _value_key(value):
    if value is None:
        return None
    arr = const_array(value)
    if arr is not None:
        return ("const", str(arr.dtype), arr.shape, arr.tobytes())
    return id(value)


def _memo_value_key(value, memo: dict):
    hit = memo.get(id(value))
    if hit is None:
        hit = memo[id(value)] = (value, _value_key(value))  # the value kept: its id stays its own
    return hit[1]


def _node_key(node, value_keys: dict | None = None):
    if node.op_type in NONDETERMINISTIC:
        return None
    attrs = []
    for name, attr in sorted(node.attributes.items()):
        if attr.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS):
            return None
        v = attr.value
        if attr.type == ir.AttributeType.TENSOR:
            if v.size > SMALL:
                return None
            arr = v.numpy()
            v = (str(arr.dtype), arr.shape, arr.tobytes())
        elif isinstance(v, (list, tuple)):
            v = tuple(v)
        elif attr.type in (ir.AttributeType.TENSORS, ir.AttributeType.SPARSE_TENSOR,
                           ir.AttributeType.SPARSE_TENSORS, ir.AttributeType.TYPE_PROTO,
                           ir.AttributeType.TYPE_PROTOS):
            return None
        attrs.append((name, attr.type, v))
    if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
        return (node.op_identifier(), tuple(attrs))
    inputs = (tuple(_value_key(v) for v in node.inputs) if value_keys is None
              else tuple(_memo_value_key(v, value_keys) for v in node.inputs))
    return (node.op_identifier(), len(node.outputs), inputs, tuple(attrs))


class RemoveDeadPass(ir.passes.InPlacePass):
    """onnx-ir's ``RemoveUnusedNodesPass`` (nodes everywhere, main-graph initializers), then
    subgraph initializers nothing reads."""

    def call(self, model) -> ir.passes.PassResult:
        from onnx_ir.passes.common import RemoveUnusedNodesPass
        graphs = graphs_of(model)
        before = sum(len(g) for g, _ in graphs)
        _remove_dead_in_bulk(model)
        RemoveUnusedNodesPass()(model)
        # Nodes are only removed, so a removal anywhere shows in these graphs' lengths; only
        # then can the set of graphs have changed (a removed If/Loop takes its bodies along).
        changed = sum(len(g) for g, _ in graphs) != before
        if changed:
            graphs = graphs_of(model)
        for graph, is_function in graphs:
            if graph is model.graph or is_function:
                continue
            for name, value in list(graph.initializers.items()):
                if not value.uses() and not value.is_graph_output() and not value.is_graph_input():
                    del graph.initializers[name]
                    changed = True
        return ir.passes.PassResult(model, modified=changed)

    may_fire = staticmethod(conditions.remove_dead)


def _remove_dead_in_bulk(model) -> None:
    """Remove the nodes onnx-ir's ``RemoveUnusedNodesPass`` would remove (same reverse sweep,
    same test, subgraphs entered from their live owner), with one ``remove()`` per graph.

    A workaround for onnx-ir 1.1: its pass removes node by node, and each ``Graph.remove``
    builds a set of all the graph's outputs, so a model with 10,000 outputs and a few thousand
    dead nodes spent ~10 s there.  The pass still runs afterwards (trailing empty inputs,
    unused optional outputs, initializers) and then finds no dead node left."""
    dead: set = set()
    plan: list = []  # (graph, its dead nodes), subgraphs before their owner's graph

    def sweep(graph) -> None:
        outputs = frozenset(graph.outputs)
        here = []
        for node in reversed(graph):
            if all(out not in outputs and all(use.node in dead for use in out.uses()) for out in node.outputs):
                dead.add(node)
                here.append(node)
                continue
            for attr in node.attributes.values():
                if attr.type == ir.AttributeType.GRAPH:
                    sweep(attr.as_graph())
                elif attr.type == ir.AttributeType.GRAPHS:
                    for g in attr.as_graphs():
                        sweep(g)
        plan.append((graph, here))

    for graph in [model.graph, *model.functions.values()]:
        sweep(graph)
    for graph, nodes in plan:
        if nodes:
            graph.remove(nodes, safe=True)


# --------------------------------------------------------------------------- pipeline


def set_inferred_shapes(model, proto=None) -> list:
    """ONNX shape inference (graphs/shape_inference.py, plain) on a weightless copy (initializers above 1 KiB become typed inputs,
    external data is never read); shapes found for values that have none -- main graph and
    subgraphs -- are set on them.  A failure leaves the model as it is (the passes then do less).
    ``proto``: ``model`` serialized, when the caller has it (not modified; saves a serialization).
    Returns the undo list: (value, its type, its shape) before."""
    import onnx

    from ..graphs.shape_inference import infer
    from ..rewrite.shapes import weightless
    undo: list = []
    in_memory = sum(v.const_value.nbytes for v in model.graph.initializers.values()
                    if v.const_value is not None and not isinstance(v.const_value, ir.ExternalTensor))
    if in_memory > _INFER_MAX_BYTES:
        return undo
    try:
        if proto is None:
            proto = ir.to_proto(model)
        else:
            proto, given = onnx.ModelProto(), proto
            proto.CopyFrom(given)
        inferred = infer(weightless(proto, max_bytes=1024))
    except Exception:  # shapes only let the passes do more
        return undo
    found: dict = {}
    for g, _, _ in proto_graphs(inferred.graph):
        for vi in g.value_info:  # a name two graphs use with different types is left alone
            prev = found.get(vi.name, vi)
            found[vi.name] = vi if prev is not None and prev.type == vi.type else None
    for graph, is_function in graphs_of(model):
        if is_function:
            continue
        for node in graph:
            for v in node.outputs:
                vi = found.get(v.name)
                if vi is None or v.shape is not None or not vi.type.HasField("tensor_type"):
                    continue
                tt = vi.type.tensor_type
                undo.append((v, v.type, v.shape))
                if v.type is None and tt.elem_type:
                    v.type = ir.TensorType(ir.DataType(tt.elem_type))
                if tt.HasField("shape"):
                    v.shape = ir.Shape([d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                                        for d in tt.shape.dim])
    return undo


def default_passes() -> list:
    return [FoldShapeArithmeticPass(), ReshapeCopyDimsPass(), LiftScalarsPass(), RebuildShapeVectorsPass(),
            MergeSlicesPass(), TransposeSliceTransposePass(), QdqMovementPass(), CommonSubexpressionPass()]


class _Ledger:
    """What the counted passes of one cleanup share: the node counts by op type, per pass the
    nodes it removed and added, and the dead-node pass with whether the model is known to be
    its fixed point (its last run removed nothing and no pass changed the model since: running
    it again would do nothing and the counts stay as they are)."""

    def __init__(self, model):
        self.counts = op_counts(model)
        self.per_pass: dict = {}
        self.dead = RemoveDeadPass()
        self.dead_settled = False


class _Counted(ir.passes.InPlacePass):
    """One cleanup pass as run in :func:`cleanup`'s pass manager: followed by the dead-node pass
    when it may have left dead nodes (what a pass made dead counts as its removal), its removed
    and added nodes counted into the ledger."""

    def __init__(self, inner, ledger: _Ledger):
        self.inner, self.ledger = inner, ledger

    def call(self, model) -> ir.passes.PassResult:
        ledger = self.ledger
        before = ledger.counts
        result = self.inner(model)
        ran_dead = self.inner is ledger.dead
        if ran_dead:
            ledger.dead_settled = not result.modified
        elif result.modified or not ledger.dead_settled:
            ledger.dead_settled = not ledger.dead(model).modified
            ran_dead = True
        if ran_dead or result.modified:
            ledger.counts = op_counts(model)
        entry = ledger.per_pass.setdefault(type(self.inner).__name__, {"removed": collections.Counter(),
                                                                        "added": collections.Counter()})
        entry["removed"].update(before - ledger.counts)
        entry["added"].update(ledger.counts - before)
        return ir.passes.PassResult(model, modified=result.modified)


def pass_manager(model, passes=None, max_rounds: int = 6) -> tuple:
    """(an ``ir.passes.PassManager`` of the cleanup, its ledger): the dead-node pass, then
    ``passes`` (default :func:`default_passes`) in rounds until none changes the model."""
    ledger = _Ledger(model)
    passes = passes if passes is not None else default_passes()
    manager = ir.passes.PassManager([
        _Counted(ledger.dead, ledger),
        ir.passes.PassManager([_Counted(p, ledger) for p in passes], steps=max_rounds, early_stop=True),
    ], steps=1)
    return manager, ledger


def cleanup(model, passes=None, max_rounds: int = 6, proto=None) -> dict:
    """Run the passes in rounds until none changes the model (in place, on an onnx-ir
    ``PassManager``: :func:`pass_manager`).  Returns the report: nodes before and after, and per
    pass the nodes it removed and added by op type.  When no pass changed anything, the model is
    as it was (onnx-ir's dead-node pass may still have trimmed trailing empty inputs).  The
    shapes inference set are taken back in every case: they guided the passes, but the output
    declares only what the input (and the rewrite's plans) declared -- onnx's inference can know
    less than the model says (a dim of 1 it cannot follow through computed Slice bounds becomes
    unknown), and an audit (``inspect --target``) of the output must see the same declarations
    as of the input.  ``proto``: the model serialized, if the caller has it (see
    :func:`set_inferred_shapes`).  A pass's error is raised as it is (not the pass manager's wrapping)."""
    inferred = set_inferred_shapes(model, proto)
    manager, ledger = pass_manager(model, passes, max_rounds)
    before_all = ledger.counts
    try:
        any_change = manager(model).modified
    except ir.passes.PassError as exc:
        cause: BaseException = exc
        while isinstance(cause, ir.passes.PassError) and cause.__cause__ is not None:
            cause = cause.__cause__
        raise cause from None
    after_all = ledger.counts
    for value, type_, shape in reversed(inferred):
        if value.type is not None and (type_ != value.type if type_ is not None else value.is_graph_output()):
            continue  # a pass changed what it holds or made it a graph output (cleanup/qdq.py): its type stays
        value.type, value.shape = type_, shape
    return {
        "changed": any_change,
        "nodes_before": sum(before_all.values()), "nodes_after": sum(after_all.values()),
        "removed": dict(sorted((before_all - after_all).items())),
        "passes": {name: {k: dict(sorted(v.items())) for k, v in e.items()} for name, e in ledger.per_pass.items()},
    }


# --------------------------------------------------------------------------- check


def _session(proto):
    """A fast onnxruntime session (runtimes.onnxruntime_session), silent: a run the model rejects is an answer here."""
    from ..verification.runtimes import onnxruntime_session
    return onnxruntime_session(proto)


def cleanup_check(before_proto, after_proto, *, memory_budget: int, weight_bytes: int = 0,
                  load_weights=None, trials: int = 2, seed: int = 0, run_before=None, sized=None,
                  vectors: dict | None = None) -> str:
    """Run the model before and after cleanup in onnxruntime on the same random inputs and
    compare every graph output bitwise (shape, dtype, bytes).  Inputs are sized as for the
    in-place run (inplace.choose_sizes: small, grown only where shape inference needs it), then,
    when the model rejects them, a few other small size assignments (all dims 4, 6, 8; distinct
    sizes), each within ``memory_budget`` (inplace.run_need, counting ``weight_bytes``:
    inplace.budget_weight_bytes).  Returns
    "passed", "skipped: ..." (no sizes the model before cleanup runs on, or the budget) or
    "failed: ...".  ``load_weights(proto)``: the proto with its external weights read in.
    ``run_before(feeds) -> outputs``: a session of the model before cleanup that already exists
    (the in-place check's, whose taps only add outputs): no second session of it.  ``sized``:
    ``inplace.choose_sizes`` of ``before_proto``'s skeleton when the in-place check made it.
    ``vectors``: the index vector inputs of the rewrites (input_ranges.index_vectors): fed at
    the length and in the ranges their slices need, in every size assignment tried.
    A cleanup that only merged duplicate nodes and removed dead ones is proven without a run
    (inplace.same_values, and the checker and strict shape inference of the cleaned model)."""
    from ..verification.checks import PASSED, failed, kind, passed, skipped, static_checks
    from ..verification.inplace import (Skip, infer_at_sizes, over_budget, choose_sizes, run_need, random_feeds,
                                        same_values, vector_pins)
    from ..rewrite.shapes import skeleton
    names = [o.name for o in before_proto.graph.output]
    if names != [o.name for o in after_proto.graph.output]:
        return failed(f"graph outputs differ: {names} vs {[o.name for o in after_proto.graph.output]}")
    if same_values(before_proto, after_proto) and all(kind(s) == "passed" for s in static_checks(after_proto).values()):
        return passed("by structure: every output is computed as before; duplicates merged, dead nodes removed")
    sk = None if sized else skeleton(before_proto)
    try:
        pins = vector_pins(before_proto, vectors or {})
        sizes, shapes = sized or choose_sizes(sk, pins)
    except Skip as exc:
        return skipped(str(exc))
    keys = [k for k in sizes if k not in pins]
    candidates = [sizes] + [{**{k: v for k in keys}, **pins} for v in (4, 6, 8)] + \
                 [{**{k: 2 + i for i, k in enumerate(keys)}, **pins}, {**{k: 4 + 2 * i for i, k in enumerate(keys)}, **pins}]
    load = load_weights or (lambda p: p)
    s_after = None
    rng = np.random.default_rng(seed)
    problem = "no sizes tried"
    for n, cand in enumerate(candidates):
        if n and not keys:
            break
        if n and sk is None:
            sk = skeleton(before_proto)
        got_shapes, bad = (shapes, None) if n == 0 else infer_at_sizes(sk, cand)
        if bad is not None:
            continue
        need = run_need(before_proto, got_shapes, weight_bytes=weight_bytes)
        if need > memory_budget:
            problem = over_budget(need, memory_budget, cand)
            continue
        if s_after is None:
            if run_before is None:
                try:
                    s_before = _session(load(before_proto))
                except Exception as exc:
                    return skipped(f"onnxruntime cannot load the model before cleanup: {_first_line(exc)}")
                run_before = functools.partial(s_before.run, names)
            try:
                s_after = _session(load(after_proto))
            except Exception as exc:
                return failed(f"onnxruntime cannot load the cleaned model: {_first_line(exc)}")
        for _ in range(trials):
            try:
                feeds = random_feeds(before_proto, cand, got_shapes, rng, vectors)
                expected = run_before(feeds)
            except Exception as exc:
                problem = f"the model before cleanup rejects random inputs: {_first_line(exc)}"
                break
            try:
                got = s_after.run(names, feeds)
            except Exception as exc:
                return failed(f"the cleaned model fails where the model before runs: {_first_line(exc)}")
            for name, g, e in zip(names, got, expected):
                g, e = np.asarray(g), np.asarray(e)
                if g.shape != e.shape or g.dtype != e.dtype or (
                        g.tobytes() != e.tobytes() if e.dtype != object else g.tolist() != e.tolist()):
                    return failed(f"output {name!r} differs (shape {g.shape} vs {e.shape}, "
                                  f"dtype {g.dtype} vs {e.dtype})")
        else:
            return PASSED
    return skipped(problem)
