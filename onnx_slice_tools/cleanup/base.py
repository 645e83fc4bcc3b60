"""What every cleanup pass shares: the graphs it walks, the context that adds constants, the
integer facts of values (``Facts``), and the pass base class :class:`CleanupPass` (a pass over
every graph, subgraph and function body, with its firing condition on the ModelProto)."""

from __future__ import annotations

import collections
import itertools

import numpy as np
import onnx_ir as ir

from .scan import SMALL, ProtoIndex

_INT_TYPES = frozenset({ir.DataType.INT8, ir.DataType.INT16, ir.DataType.INT32, ir.DataType.INT64,
                        ir.DataType.UINT8, ir.DataType.UINT16, ir.DataType.UINT32, ir.DataType.UINT64})


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


def static_dims(value) -> tuple | None:
    """The value's shape as a tuple of ints and None (unknown dims), or None for unknown rank."""
    shape = value.shape if value is not None else None
    if shape is None:
        return None
    return tuple(d if isinstance(d, int) else None for d in shape)


def int_const(value) -> list[int] | None:
    arr = const_array(value)
    if arr is None or arr.dtype.kind not in "iu":
        return None
    return [int(v) for v in arr.reshape(-1)]


def axes_of(node, index: int = 1) -> list[int] | None:
    """A Squeeze/Unsqueeze/ReduceX node's axes (attribute before opset 13, input from 13)."""
    attr = node.attributes.get("axes")
    if attr is not None:
        return list(attr.value)
    if len(node.inputs) > index and node.inputs[index] is not None:
        return int_const(node.inputs[index])
    return None


class Facts:
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
        dims = static_dims(ins[0])
        if dims is None:
            return None
        self.tensors[id(ins[0])] = ins[0]
        named = [d if d is not None else ("dim", id(ins[0]), k) for k, d in enumerate(dims)]
        start, end = node.attributes.get("start"), node.attributes.get("end")
        picked = named[slice(start.value if start else None, end.value if end else None)]
        return ir.DataType.INT64, (len(picked),), picked

    def _size(self, node, ins):
        dims = static_dims(ins[0])
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
        src, axes = self(ins[0]), axes_of(node)
        if src is not None and src[1] == (1,) and axes in (None, [0], [-1]):
            return src[0], (), src[2]
        return None

    def _unsqueeze(self, node, ins):
        src, axes = self(ins[0]), axes_of(node)
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
        src, idx = self(ins[0]), int_const(ins[1])
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
        params = slice_params(node)
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


def replace_uses(old: ir.Value, new: ir.Value) -> None:
    old.replace_all_uses_with(new)


def slice_params(node):
    """(starts, ends, axes, steps) of a Slice with constant parameters, or None."""
    ins = node.inputs
    starts, ends = int_const(ins[1]), int_const(ins[2])
    if starts is None or ends is None or len(starts) != len(ends):
        return None
    axes = int_const(ins[3]) if len(ins) > 3 and ins[3] is not None else list(range(len(starts)))
    steps = int_const(ins[4]) if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
    if axes is None or steps is None or len(axes) != len(starts) or len(steps) != len(starts):
        return None
    return starts, ends, axes, steps


def shape_list(value):
    return None if value.shape is None else list(value.shape)
