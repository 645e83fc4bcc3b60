"""A sound pre-check of the cleanup on the ModelProto: can any cleanup pass change this model?

:func:`may_change` walks the proto once (every graph, subgraphs in scope), counting the uses of
every value as onnx-ir does (node input slots, at any depth; graph outputs are not uses), and
tests for each pass of ``cleanup.cleanup`` a condition that holds whenever the pass could fire:
its own match conditions with everything that needs inferred shapes taken as "may hold".
None means no pass can change the model -- ``cleanup()`` would report ``changed: False`` and
leave the model as it is -- so the caller skips onnx-ir's deserialisation, shape inference
and the passes.  A string names the pass and node that may fire (it may fire too often, never
too rarely).  Models with functions always get "may change" (attribute references, no
initializers: not worth the exactness here).

This module imports no onnx-ir: the protobuf path uses it before any onnx-ir model exists.
"""

from __future__ import annotations

import gc
import os

import numpy as np

from ..graphs.walk import proto_subgraphs

#: Constants up to this many elements are read for folding and compared by value in CSE.
SMALL = 64
#: Elementwise ops whose result on a length-1 vector is their result on the scalar, unsqueezed
#: (exact arithmetic, comparisons and selection; no transcendental functions).
ELEMENTWISE = frozenset({
    "Cast", "Add", "Sub", "Mul", "Div", "Mod", "Neg", "Abs", "Min", "Max", "Sign", "Floor", "Ceil",
    "Round", "Not", "And", "Or", "Xor", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
    "Where", "Identity", "BitShift",
})
NONDETERMINISTIC = frozenset({"RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike",
                              "Multinomial", "Bernoulli", "Dropout"})
#: Set to "1": the cleanup always runs its passes (the pre-check is not asked).
FULL_CLEANUP_ENV = "ONNX_SLICE_TOOLS_FULL_CLEANUP"

# TensorProto data types whose values are surely not integers (FLOAT, STRING, BOOL, FLOAT16,
# DOUBLE, COMPLEX64/128, BFLOAT16, FLOAT8*, FLOAT4E2M1, FLOAT8E8M0, FLOAT6*); any other may be.
_NOT_INT = frozenset({1, 8, 9, 10, 11, 14, 15, 16, 17, 18, 19, 20, 23, 24, 27, 28})
# ... and those numpy reads the same way in onnx and onnx-ir (compared by bytes in CSE keys).
_PLAIN = frozenset({1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13})
_GRAPH, _GRAPHS, _FLOAT, _INT, _STRING, _TENSOR = 5, 10, 1, 2, 3, 4
_FLOATS, _INTS, _STRINGS = 6, 7, 8
_DEFAULT = ("", "ai.onnx")
_NOKEY = object()  # a node CSE never merges


class MayChange(Exception):
    """Raised inside the scan with the reason; :func:`may_change` returns it."""


class _Def:
    """One value: a graph input, an initializer or a node output (``node``, its ``ins``)."""

    __slots__ = ("kind", "graph", "node", "tensor", "ins", "uses", "out_any",
                 "fact", "key", "lift")

    def __init__(self, kind, graph, node=None, ins=(), tensor=None):
        self.kind, self.graph, self.node, self.ins, self.tensor = kind, graph, node, ins, tensor
        self.uses = 0
        self.out_any = False  # an output of its graph (onnx-ir: is_graph_output)
        self.fact = False  # cleanup._Facts may know something about it
        # its part of a CSE key: node outputs by identity (their ids are unique while the scan
        # holds them); constants by value, computed when first read (None)
        self.key = id(self) if kind == "node" else None
        self.lift = None   # LiftScalarsPass._lift may lift it (memo)


def may_change(proto) -> str | None:
    """None when no cleanup pass (``cleanup.default_passes()`` and ``RemoveDeadPass``) can change
    ``proto``; else a short reason naming the pass and the node."""
    paused = gc.isenabled()
    gc.disable()  # ~15 objects a node, no cycles: a collection would only rescan the caller's heap
    try:
        _Scan(proto).run()
    except MayChange as exc:
        return str(exc)
    except RecursionError:
        return "may change: the graph nests too deep for the pre-check"
    finally:
        if paused:
            gc.enable()
    return None


def nothing_to_clean(proto) -> bool:
    """Whether the cleanup can be skipped: :func:`may_change` proves no pass changes ``proto``.
    Always False when the environment sets ``ONNX_SLICE_TOOLS_FULL_CLEANUP=1`` (tests: the
    passes run as before)."""
    return os.environ.get(FULL_CLEANUP_ENV) != "1" and may_change(proto) is None


def node_count(proto) -> int:
    """Nodes of the main graph, every subgraph and every function (``cleanup.op_counts``)."""
    def count(graph) -> int:
        return len(graph.node) + sum(count(g) for node in graph.node for g in proto_subgraphs(node))
    return count(proto.graph) + sum(count(f) for f in proto.functions)


def unchanged_report(proto) -> dict:
    """The report ``cleanup.cleanup`` returns for a model it does not change."""
    n = node_count(proto)
    return {"changed": False, "nodes_before": n, "nodes_after": n, "removed": {},
            "passes": {name: {"removed": {}, "added": {}} for name in pass_names()}}


#: the passes of a default cleanup, in their order (``passes.default_passes`` builds them from
#: these names: declared once, here, where reading them imports no onnx-ir)
DEFAULT_PASSES = ("FoldShapeArithmeticPass", "ReshapeCopyDimsPass", "LiftScalarsPass", "RebuildShapeVectorsPass",
                  "MergeSlicesPass", "TransposeSliceTransposePass", "CommonSubexpressionPass")


def pass_names() -> tuple:
    """The passes of a default cleanup, in the order its report lists them: ``RemoveDeadPass``
    first, then :data:`DEFAULT_PASSES` (what ``cleanup.passes.default_passes()`` runs)."""
    return ("RemoveDeadPass", *DEFAULT_PASSES)


def __getattr__(name: str):
    """``PASS_NAMES``: :func:`pass_names`, computed when first read."""
    if name == "PASS_NAMES":
        return pass_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _where(node) -> str:
    return f"{node.op_type} {node.name!r}" if node.name else f"{node.op_type} -> {list(node.output)}"


def _numel(tensor) -> int:
    n = 1
    for d in tensor.dims:
        n *= d
    return n


class _Scan:
    """One walk over the proto (:meth:`walk`), then the passes' conditions (:meth:`check`)."""

    def __init__(self, proto):
        self.proto = proto
        imports = {o.domain: o.version for o in proto.opset_import}
        self.opset = imports.get("", imports.get("ai.onnx"))
        self.graphs: list = []  # (graph, [(node, input defs, output defs)] a pass matches, CSE duplicates, scope)
        self.arrays: dict = {}  # id(def) -> (def, its small constant's array or None)
        self.schemas: dict = {}
        self.const_keys: dict = {}  # a small constant's (dtype, shape, bytes) -> its CSE key
        self.scope_graphs: dict = {}  # id(scope) -> its graph
        self.declared: dict = {}  # id(scope) -> names its graph's nodes output (forward references)

    def run(self) -> None:
        if len(self.proto.functions):
            raise MayChange("may change: the model has functions (not pre-checked)")
        self.walk(self.proto.graph, [])
        for entry in self.graphs:
            self.check(*entry)

    # ------------------------------------------------------------------ the walk

    def walk(self, graph, outer: list) -> None:
        """Definitions and uses of every value of ``graph`` (subgraphs entered at their node,
        seeing what is defined before it, as onnx-ir's deserialisation does), the facts that
        cleanup._Facts may know, the CSE duplicates, and the nodes some pass looks at."""
        if len(graph.sparse_initializer):
            raise MayChange(f"may change: graph {graph.name!r} has sparse initializers (not pre-checked)")
        scope: dict = {}
        get = scope.get
        chain = [scope, *outer]
        gid = id(graph)
        self.scope_graphs[id(scope)] = graph
        for vi in graph.input:
            if vi.name in scope:
                raise MayChange(f"may change: input {vi.name!r} is listed twice in graph {graph.name!r}")
            scope[vi.name] = _Def("input", gid, tensor=vi)
        for t in graph.initializer:
            d = get(t.name)
            if d is None:
                scope[t.name] = _Def("init", gid, tensor=t)
            elif d.kind == "input":  # also an input: an input with a default (never a constant)
                d.kind = "input+init"
            else:
                raise MayChange(f"may change: initializer {t.name!r} is defined twice in graph {graph.name!r}")
        looked_at: list = []  # (node, input defs, output defs) of the ops some pass matches
        keys: dict = {}
        dups: list = []
        value_key = self.value_key
        for node in graph.node:
            ins = []
            for name in node.input:
                if name:
                    d = get(name) or self.lookup(chain, name, node)
                    d.uses += 1
                    ins.append(d)
                else:
                    ins.append(None)
            if ins and ins[-1] is None:
                raise MayChange(f"RemoveDeadPass may change {_where(node)}: trailing empty inputs")
            attributes = node.attribute
            if attributes:
                for a in attributes:
                    if a.type == _GRAPH:
                        self.walk(a.g, chain)
                    elif a.type == _GRAPHS:
                        for g in a.graphs:
                            self.walk(g, chain)
            op, domain = node.op_type, node.domain
            outputs = node.output
            if len(outputs) == 1:  # the common case, without the loop
                name = outputs[0]
                outs = [_Def("node", gid, node, ins)]
                if name and name not in scope:
                    scope[name] = outs[0]
                else:
                    self.define(scope, outs, outputs, node, graph)
            else:
                outs = [_Def("node", gid, node, ins) for _ in outputs]
                self.define(scope, outs, outputs, node, graph)
            if domain in _DEFAULT:
                if op in _FACT_OPS or op == "Constant":
                    if op == "Constant":
                        outs[0].key = None  # a constant: compared by value in CSE keys
                    if len(outs) == 1 and self.fact(outs[0]):
                        outs[0].fact = True
                        looked_at.append((node, ins, outs))
                    elif op in _LOOKED_AT:
                        looked_at.append((node, ins, outs))
                elif op in _LOOKED_AT:
                    looked_at.append((node, ins, outs))
            if op in NONDETERMINISTIC:
                continue
            if attributes:
                attrs = self.attr_key(attributes)
                if attrs is _NOKEY:
                    continue
            else:
                attrs = ()
            if op == "Constant" and domain in _DEFAULT:
                key = ("Constant", node.overload, attrs)
            else:
                key = ("" if domain == "ai.onnx" else domain, op, node.overload, len(outs),
                       tuple([None if d is None else d.key if d.key is not None else value_key(d) for d in ins]),
                       attrs)
            if keys.setdefault(key, node) is not node:
                dups.append((node, outs))
        for vi in graph.output:  # onnx-ir looks graph outputs up in their own graph only
            d = get(vi.name)
            if d is None:
                raise MayChange(f"may change: graph output {vi.name!r} of {graph.name!r} is not defined there")
            d.out_any = True
        self.graphs.append((graph, looked_at, dups, scope))

    @staticmethod
    def define(scope, outs, names, node, graph) -> None:
        for d, name in zip(outs, names):
            if name in scope:
                raise MayChange(f"may change: {name!r} is defined twice in graph {graph.name!r}")
            if name:
                scope[name] = d
        if not outs or not names[-1]:
            raise MayChange(f"RemoveDeadPass may change {_where(node)}: no outputs or trailing empty ones")

    def lookup(self, chain, name, node):
        """``name`` looked up from the innermost scope out, as onnx-ir does -- which declares
        every node output of a graph before reading its nodes: a name some scope defines later
        (a forward reference, possibly shadowing an outer value) is left to the passes."""
        for s in chain:
            d = s.get(name)
            if d is not None:
                return d
            declared = self.declared.get(id(s))
            if declared is None:
                graph = self.scope_graphs[id(s)]
                declared = self.declared[id(s)] = {o for n in graph.node for o in n.output}
            if name in declared:
                break
        raise MayChange(f"may change: {_where(node)} reads {name!r} before it is defined")

    # ------------------------------------------------------------------ constants

    def const(self, d):
        """A constant's description as cleanup.const_array reads it: ("tensor", TensorProto),
        ("int", i), ("ints", [..]) or None (not a constant)."""
        if d is None:
            return None
        if d.kind == "init":
            return "tensor", d.tensor
        if d.kind != "node" or d.node.op_type != "Constant" or d.node.domain not in _DEFAULT:
            return None
        attrs = {a.name: a for a in d.node.attribute}
        value = attrs.get("value")
        if value is not None and value.type == _TENSOR:
            return "tensor", value.t
        if "value_int" in attrs:
            return "int", attrs["value_int"].i
        if "value_ints" in attrs:
            return "ints", list(attrs["value_ints"].ints)
        return None

    def array(self, d):
        """A small constant's array (<= SMALL elements; ``value_ints`` any length), else None."""
        hit = self.arrays.get(id(d))
        if hit is None:
            hit = self.arrays[id(d)] = (d, self._array(d))
        return hit[1]

    def _array(self, d):
        c = self.const(d)
        if c is None:
            return None
        if c[0] == "int":
            return np.array(c[1], dtype=np.int64)
        if c[0] == "ints":
            return np.array(c[1], dtype=np.int64)
        t = c[1]
        if _numel(t) > SMALL:
            return None
        return _tensor_array(t)

    def ints(self, d) -> list[int] | None:
        """cleanup._int_const: a small integer constant's elements."""
        arr = self.array(d)
        if arr is None or arr is _EXOTIC:
            if arr is _EXOTIC and self._maybe_int(d):
                raise MayChange("may change: an integer constant of a packed type (not pre-checked)")
            return None
        if arr.dtype.kind not in "iu":
            return None
        return [int(v) for v in arr.reshape(-1)]

    def _maybe_int(self, d) -> bool:
        c = self.const(d)
        return c is not None and (c[0] != "tensor" or c[1].data_type not in _NOT_INT)

    def value_key(self, d):
        """cleanup._value_key: small constants by value, other values by identity."""
        if d is None:
            return None
        if d.key is None:
            arr = self.array(d)
            if arr is None:
                d.key = id(d)  # every definition lives as long as the scan: ids stay unique
            else:  # equal constants share one negative number (ids are positive)
                value = "exotic" if arr is _EXOTIC else (str(arr.dtype), arr.shape, arr.tobytes())
                d.key = self.const_keys.setdefault(value, -1 - len(self.const_keys))
        return d.key

    # ------------------------------------------------------------------ cleanup._Facts, abstractly

    def fact(self, out) -> bool:
        """Whether cleanup._Facts may know a fact about ``out``, the only output of a node in the
        default domain.  Inputs' facts were set when they were defined (the walk is in order)."""
        node, ins = out.node, out.ins
        op = node.op_type
        if op == "Constant":
            return self._small_int_vector(out, self.array(out))
        if op in ("Shape", "Size"):
            return True
        if op == "Cast":
            to = next((a.i for a in node.attribute if a.name == "to"), None)
            return not ins or self._has_fact(ins[0]) and (to is None or to not in _NOT_INT)
        if op in ("Identity", "Squeeze", "Unsqueeze", "Slice"):
            return not ins or self._has_fact(ins[0]) and (op != "Slice" or len(ins) >= 3)
        if op == "Gather":
            return len(ins) < 2 or (self._has_fact(ins[0]) and self._maybe_int(ins[1]))
        if op in ("Concat", "Add", "Sub", "Mul", "Neg"):
            return bool(ins) and all(self._has_fact(d) for d in ins)
        return False

    def _has_fact(self, d) -> bool:
        if d is None:
            return False
        if d.kind == "init":
            return self._small_int_vector(d, self.array(d))
        return d.fact  # graph inputs: False; node outputs: set at definition

    def _small_int_vector(self, d, arr) -> bool:
        if arr is _EXOTIC:
            return self._maybe_int(d)
        return arr is not None and arr.dtype.kind in "iu" and arr.ndim <= 1

    def surely_symbolic(self, node, ins) -> bool:
        """A Shape/Size of a graph input whose declared shape has a symbolic dim where it reads:
        its fact is never all integers (Shape) or is None (Size), whatever inference finds."""
        d = ins[0] if ins else None
        if d is None or d.kind != "input" or d.out_any or not d.tensor.type.HasField("tensor_type"):
            return False  # (a graph output's declared shape replaces the input's in onnx-ir)
        tt = d.tensor.type.tensor_type
        if not tt.HasField("shape"):
            return node.op_type in ("Shape", "Size")  # unknown rank: no fact at all
        dims = list(tt.shape.dim)
        if node.op_type == "Shape":
            attrs = {a.name: a.i for a in node.attribute}
            dims = dims[slice(attrs.get("start"), attrs.get("end"))]
        return any(not dim.HasField("dim_value") for dim in dims)

    # ------------------------------------------------------------------ CSE keys

    @staticmethod
    def attr_key(attributes):
        """The attributes as cleanup._node_key compares them, never finer; _NOKEY: never merged."""
        attrs = []
        for a in sorted(attributes, key=lambda a: a.name):
            v = _attr_value(a)
            if v is _NOKEY:
                return _NOKEY
            attrs.append((a.name, a.type, v))
        return tuple(attrs)

    # ------------------------------------------------------------------ the passes' conditions

    def check(self, graph, looked_at, dups, scope) -> None:
        gid = id(graph)
        for d in scope.values():
            if d.uses or d.out_any:
                continue
            if d.kind == "node":
                self.check_unused(d, scope)
            elif d.kind == "init":
                raise MayChange(f"RemoveDeadPass may change it: initializer {d.tensor.name!r} is not used")
        for node, ins, outs in looked_at:
            op = node.op_type
            if outs[0].fact and op != "Constant" and not outs[0].out_any:
                if op not in ("Shape", "Size") or not self.surely_symbolic(node, ins):
                    raise MayChange(f"FoldShapeArithmeticPass or RebuildShapeVectorsPass may change "
                                    f"{_where(node)} (integer value of known elements)")
            if op == "Reshape":
                self.check_reshape(node, ins)
            elif op == "Unsqueeze":
                self.check_unsqueeze(node, ins, outs, gid)
            elif op == "Slice":
                self.check_slices(node, ins, gid)
            elif op == "BatchNormalization":
                raise MayChange(f"RemoveDeadPass may change {_where(node)} (BatchNormalization's outputs)")
            elif op == "Transpose":
                self.check_transposes(node, ins)
        for node, outs in dups:
            if not any(d.out_any for d in outs):
                raise MayChange(f"CommonSubexpressionPass may change {_where(node)} (an equal node before it)")

    def check_unused(self, d, scope) -> None:
        """onnx-ir's RemoveUnusedNodesPass (and cleanup's bulk removal) on an output nothing
        uses: a dead node, or an unused optional output (BatchNormalization: see check)."""
        node = d.node
        outs = [scope[name] if name else None for name in node.output]
        unused = [o is None or not o.uses and not o.out_any for o in outs]
        if all(unused):
            raise MayChange(f"RemoveDeadPass may change it: {_where(node)} is dead")
        if node.domain not in ("", "ai.onnx", "onnx.ai"):
            return
        optional = self.optional_outputs(node)
        if optional is None or any(u and opt for u, opt in zip(unused, optional)):
            raise MayChange(f"RemoveDeadPass may change {_where(node)}: an unused optional output")

    def optional_outputs(self, node):
        """Per output of the schema, whether it is optional; [] when onnx-ir leaves the outputs
        (no schema, a variadic output); None when unsure."""
        if node.domain == "onnx.ai":
            return None
        key = (node.op_type, self.opset)
        if key not in self.schemas:
            import onnx
            try:
                schema = onnx.defs.get_schema(node.op_type, self.opset, domain="")
            except Exception:  # onnx-ir skips the node then too
                self.schemas[key] = []
            else:
                option = onnx.defs.OpSchema.FormalParameterOption
                opts = [o.option for o in schema.outputs]
                self.schemas[key] = [] if option.Variadic in opts else [o == option.Optional for o in opts]
        return self.schemas[key]

    def check_reshape(self, node, ins) -> None:
        """ReshapeCopyDimsPass: a Reshape whose shape is not a constant but may have a fact."""
        allowzero = next((a.i for a in node.attribute if a.name == "allowzero"), 0)
        if len(ins) != 2 or allowzero or ins[1] is None:
            return
        shape = ins[1]
        if self.array(shape) is None and self._has_fact(shape):
            raise MayChange(f"ReshapeCopyDimsPass may change {_where(node)}")

    def check_unsqueeze(self, node, ins, outs, gid) -> None:
        """LiftScalarsPass: an Unsqueeze with known axes of a liftable scalar, or of a Squeeze."""
        if outs[0].out_any:
            return
        axes = next((list(a.ints) for a in node.attribute if a.name == "axes"), None)
        if axes is None and len(ins) > 1 and ins[1] is not None:
            axes = self.ints(ins[1])
        if axes is None:
            return
        if not ins:
            raise MayChange(f"LiftScalarsPass may change {_where(node)} (no input)")
        src = ins[0]
        producer = src.node if src is not None and src.kind == "node" else None
        if producer is not None and producer.op_type == "Squeeze" and producer.domain in _DEFAULT:
            raise MayChange(f"LiftScalarsPass may change {_where(node)} (Unsqueeze of a Squeeze)")
        if axes in ([0], [-1]) and self.liftable(src, gid, 0):
            raise MayChange(f"LiftScalarsPass may change {_where(node)} (a scalar computation to lift)")

    def liftable(self, d, gid, depth: int) -> bool:
        """LiftScalarsPass._lift may return a value for ``d`` (shapes taken as fitting)."""
        if d is None:
            return False
        if depth > 200:
            return True
        arr = self.array(d)
        if arr is not None:
            return arr is _EXOTIC or arr.ndim == 0
        if d.kind != "node" or d.graph != gid:
            return False
        if d.lift is not None:
            return d.lift
        node = d.node
        if node.domain not in _DEFAULT or len(node.output) != 1:
            d.lift = False
        elif node.op_type == "Squeeze":
            d.lift = True
        elif d.uses != 1 or d.out_any:
            d.lift = False
        elif node.op_type == "Gather":
            d.lift = self._scalar_index(node, d.ins)
        elif node.op_type not in ELEMENTWISE or not node.input:
            d.lift = False
        elif node.op_type == "Cast" and any(a.name != "to" for a in node.attribute):
            d.lift = False
        else:
            d.lift = all(x is not None and self.liftable(x, gid, depth + 1) for x in d.ins)
        return d.lift

    def _scalar_index(self, node, ins) -> bool:
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        if axis not in (0, -1):
            return False
        if len(ins) < 2:
            return True
        idx = self.array(ins[1])
        return idx is _EXOTIC or (idx is not None and idx.ndim == 0)

    def check_slices(self, node, ins, gid) -> None:
        """MergeSlicesPass: a Slice of a Slice used once, both with constant parameters on axes
        that are distinct (negative axes: may be, with the rank inference finds)."""
        if len(ins) < 3 or ins[0] is None or ins[0].kind != "node":
            return
        mid = ins[0]
        inner = mid.node
        if inner.op_type != "Slice" or inner.domain not in _DEFAULT or mid.graph != gid \
                or len(inner.input) < 3 or mid.uses != 1 or mid.out_any:
            return
        a, b = self.slice_params(mid.ins), self.slice_params(ins)
        if a is None or b is None:
            return
        axes = a[2] + b[2]
        if any(ax < 0 for ax in axes) or len(set(axes)) == len(axes):
            raise MayChange(f"MergeSlicesPass may change {_where(node)} (Slice of a Slice)")

    def check_transposes(self, node, ins) -> None:
        """TransposeSliceTransposePass: a Transpose of a Slice of a Transpose (either may be undone)."""
        mid = ins[0] if ins else None
        if mid is None or mid.kind != "node" or mid.node.op_type != "Slice" or not mid.ins:
            return
        first = mid.ins[0]
        if first is not None and first.kind == "node" and first.node.op_type == "Transpose":
            raise MayChange(f"TransposeSliceTransposePass may change {_where(node)} (a Slice between Transposes)")

    def slice_params(self, ins):
        starts, ends = self.ints(ins[1]), self.ints(ins[2])
        if starts is None or ends is None or len(starts) != len(ends):
            return None
        axes = self.ints(ins[3]) if len(ins) > 3 and ins[3] is not None else list(range(len(starts)))
        steps = self.ints(ins[4]) if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
        if axes is None or steps is None or len(axes) != len(starts) or len(steps) != len(starts):
            return None
        return starts, ends, axes, steps


#: Ops cleanup._Facts reads through.
_FACT_OPS = frozenset({"Shape", "Size", "Cast", "Identity", "Squeeze", "Unsqueeze", "Concat", "Gather", "Slice",
                       "Add", "Sub", "Mul", "Neg"})
#: Ops a pass matches beyond the integer facts (checked after the walk).
_LOOKED_AT = frozenset({"Reshape", "Unsqueeze", "Slice", "BatchNormalization", "Transpose"})

#: The array of a small constant of a type numpy reads differently in onnx and onnx-ir (bfloat16,
#: float8, int4, strings): compared as equal to any other such constant.
_EXOTIC = object()


def _tensor_array(tensor):
    from onnx import numpy_helper
    if tensor.data_location == 1 or len(tensor.external_data):
        raise MayChange(f"may change: small constant {tensor.name!r} is stored as external data (not pre-checked)")
    if tensor.data_type not in _PLAIN:
        return _EXOTIC
    try:
        return numpy_helper.to_array(tensor)
    except Exception as exc:  # a constant onnx cannot read: the passes decide
        raise MayChange(f"may change: constant {tensor.name!r} is unreadable ({type(exc).__name__})") from None


def _attr_value(a):
    """An attribute's value as cleanup._node_key compares it (NaN equal to NaN: coarser), or _NOKEY."""
    t = a.type
    if a.ref_attr_name:  # only functions have them (and functions are not pre-checked)
        raise MayChange(f"may change: attribute {a.name!r} refers to a function attribute outside a function")
    if t == _INT:
        return a.i
    if t == _FLOAT:
        return "nan" if a.f != a.f else a.f
    if t == _STRING:
        return a.s.decode("utf-8", errors="replace")
    if t == _INTS:
        return tuple(a.ints)
    if t == _FLOATS:
        return tuple("nan" if f != f else f for f in a.floats)
    if t == _STRINGS:
        return tuple(s.decode("utf-8", errors="replace") for s in a.strings)
    if t == _TENSOR:
        if _numel(a.t) > SMALL:
            return _NOKEY
        arr = _tensor_array(a.t)
        return "exotic" if arr is _EXOTIC else (str(arr.dtype), arr.shape, arr.tobytes())
    if t == 0:
        raise MayChange(f"may change: attribute {a.name!r} has no type (not pre-checked)")
    return _NOKEY  # graphs, tensors, sparse tensors, type protos: never merged
