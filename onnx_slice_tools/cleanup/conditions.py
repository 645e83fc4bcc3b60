"""The cleanup passes' firing conditions on the ModelProto: the pre-check half of each pass.

A cleanup pass is a rewrite rule in two halves: its transformation on onnx-ir
(a module of cleanup/, one per pass) and its condition here, ``condition(index) -> reason | None`` over the
protobuf index of cleanup/scan.py: a reason naming the pass and the node whenever the pass
could change the model (what needs inferred shapes taken as "may hold": it may say yes where
the pass finds nothing, never no where it fires), else None.  Each pass class points at its
condition (``may_fire = staticmethod(conditions.x)``); :data:`CONDITIONS` lists them in the
order of a default cleanup.  They live apart from the passes so that the pre-check, which
decides whether the passes run at all, needs neither onnx-ir nor its import (sympy with it).
"""

from __future__ import annotations

from typing import Callable

from .qdq_condition import qdq_around_movement
from .scan import DEFAULT_DOMAIN, EXOTIC, SMALL, MayChange, ProtoIndex, numel, tensor_array, where

#: Elementwise ops whose result on a length-1 vector is their result on the scalar, unsqueezed
#: (exact arithmetic, comparisons and selection; no transcendental functions).
ELEMENTWISE = frozenset({
    "Cast", "Add", "Sub", "Mul", "Div", "Mod", "Neg", "Abs", "Min", "Max", "Sign", "Floor", "Ceil",
    "Round", "Not", "And", "Or", "Xor", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
    "Where", "Identity", "BitShift",
})
#: Ops CSE never merges.
NONDETERMINISTIC = frozenset({"RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike",
                              "Multinomial", "Bernoulli", "Dropout"})


def known_integers(index: ProtoIndex) -> str | None:
    """The condition of :class:`FoldShapeArithmeticPass` and :class:`RebuildShapeVectorsPass`
    (both act on values whose integer elements ``base.Facts`` knows): a node output that is not a
    graph output and may have a fact, unless it is a Shape/Size of a graph input whose symbolic
    dims deny one."""
    for gi in index.graphs:
        for node, ins, outs in gi.facts:
            if outs[0].out_any:
                continue
            if node.op_type not in ("Shape", "Size") or not index.surely_symbolic(node, ins):
                return (f"FoldShapeArithmeticPass or RebuildShapeVectorsPass may change "
                        f"{where(node)} (integer value of known elements)")
    return None


def lift_scalars(index: ProtoIndex) -> str | None:
    """An Unsqueeze (not a graph output) with known axes of a Squeeze, or of a value
    :meth:`_lift` may lift (shapes taken as fitting)."""
    memo: dict = {}
    for gi, node, ins, outs in index.each("Unsqueeze"):
        if outs[0].out_any:
            continue
        axes = next((list(a.ints) for a in node.attribute if a.name == "axes"), None)
        if axes is None and len(ins) > 1 and ins[1] is not None:
            axes = index.ints(ins[1])
        if axes is None:
            continue
        if not ins:
            return f"LiftScalarsPass may change {where(node)} (no input)"
        src = ins[0]
        producer = src.node if src is not None and src.kind == "node" else None
        if producer is not None and producer.op_type == "Squeeze" and producer.domain in DEFAULT_DOMAIN:
            return f"LiftScalarsPass may change {where(node)} (Unsqueeze of a Squeeze)"
        if axes in ([0], [-1]) and _may_lift(index, src, gi.gid, 0, memo):
            return f"LiftScalarsPass may change {where(node)} (a scalar computation to lift)"
    return None


def _may_lift(index: ProtoIndex, d, gid: int, depth: int, memo: dict) -> bool:
    """:meth:`LiftScalarsPass._lift` may return a value for ``d`` (shapes taken as fitting);
    ``memo``: id(def) -> the answer (a def belongs to one graph)."""
    if d is None:
        return False
    if depth > 200:
        return True
    arr = index.array(d)
    if arr is not None:
        return arr is EXOTIC or arr.ndim == 0
    if d.kind != "node" or d.graph != gid:
        return False
    hit = memo.get(id(d))
    if hit is not None:
        return hit
    node = d.node
    if node.domain not in DEFAULT_DOMAIN or len(node.output) != 1:
        lift = False
    elif node.op_type == "Squeeze":
        lift = True
    elif d.uses != 1 or d.out_any:
        lift = False
    elif node.op_type == "Gather":
        lift = _scalar_index(index, node, d.ins)
    elif node.op_type not in ELEMENTWISE or not node.input:
        lift = False
    elif node.op_type == "Cast" and any(a.name != "to" for a in node.attribute):
        lift = False
    else:
        lift = all(x is not None and _may_lift(index, x, gid, depth + 1, memo) for x in d.ins)
    memo[id(d)] = lift
    return lift


def _scalar_index(index: ProtoIndex, node, ins) -> bool:
    axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
    if axis not in (0, -1):
        return False
    if len(ins) < 2:
        return True
    idx = index.array(ins[1])
    return idx is EXOTIC or (idx is not None and idx.ndim == 0)


def merge_slices(index: ProtoIndex) -> str | None:
    """A Slice of a Slice used once, both with constant parameters on axes that are distinct
    (negative axes: may be, with the rank inference finds)."""
    for gi, node, ins, _ in index.each("Slice"):
        if len(ins) < 3 or ins[0] is None or ins[0].kind != "node":
            continue
        mid = ins[0]
        inner = mid.node
        if inner.op_type != "Slice" or inner.domain not in DEFAULT_DOMAIN or mid.graph != gi.gid \
                or len(inner.input) < 3 or mid.uses != 1 or mid.out_any:
            continue
        a, b = _proto_slice_params(index, mid.ins), _proto_slice_params(index, ins)
        if a is None or b is None:
            continue
        axes = a[2] + b[2]
        if any(ax < 0 for ax in axes) or len(set(axes)) == len(axes):
            return f"MergeSlicesPass may change {where(node)} (Slice of a Slice)"
    return None


def _proto_slice_params(index: ProtoIndex, ins):
    """``base.slice_params`` on the index: a Slice's input defs ``ins``."""
    starts, ends = index.ints(ins[1]), index.ints(ins[2])
    if starts is None or ends is None or len(starts) != len(ends):
        return None
    axes = index.ints(ins[3]) if len(ins) > 3 and ins[3] is not None else list(range(len(starts)))
    steps = index.ints(ins[4]) if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
    if axes is None or steps is None or len(axes) != len(starts) or len(steps) != len(starts):
        return None
    return starts, ends, axes, steps


def transpose_slice_transpose(index: ProtoIndex) -> str | None:
    """A Transpose of a Slice of a Transpose (either may be undone)."""
    for _, node, ins, _ in index.each("Transpose"):
        mid = ins[0] if ins else None
        if mid is None or mid.kind != "node" or mid.node.op_type != "Slice" or not mid.ins:
            continue
        first = mid.ins[0]
        if first is not None and first.kind == "node" and first.node.op_type == "Transpose":
            return f"TransposeSliceTransposePass may change {where(node)} (a Slice between Transposes)"
    return None


def reshape_copy_dims(index: ProtoIndex) -> str | None:
    """A Reshape (allowzero 0) whose shape is not a constant but may have a fact."""
    for _, node, ins, _ in index.each("Reshape"):
        allowzero = next((a.i for a in node.attribute if a.name == "allowzero"), 0)
        if len(ins) != 2 or allowzero or ins[1] is None:
            continue
        shape = ins[1]
        if index.array(shape) is None and index.has_fact(shape):
            return f"ReshapeCopyDimsPass may change {where(node)}"
    return None


def common_subexpression(index: ProtoIndex) -> str | None:
    """A node (none of its outputs a graph output) with the key of an earlier node of its
    graph: ``common_subexpression._node_key`` on the proto, never finer (equal keys there, equal here)."""
    value_key = index.value_key
    for gi in index.graphs:
        keys: dict = {}
        seen = keys.setdefault
        nodes = gi.nodes
        # Only a node none of whose outputs is a graph output fires: the nodes after the last
        # such one need no key (only earlier keys are compared).  What a key's making may raise
        # (MayChange: an attribute or a constant the pre-check cannot read) is still asked of them.
        end = len(nodes)
        while end and _outputs_out(nodes[end - 1][2]):
            end -= 1
        for k, ((node, ins, outs), op, domain) in enumerate(zip(nodes, gi.ops, gi.domains)):
            if op in NONDETERMINISTIC:
                continue
            attributes = node.attribute
            attrs = _proto_attrs_key(attributes) if attributes else ()
            if attrs is None:
                continue
            if k >= end:  # (no key: what making it would read, read in the same order)
                if op != "Constant" or domain not in DEFAULT_DOMAIN:
                    for d in ins:
                        if d is not None and d.key is None:
                            value_key(d)
                continue
            if op == "Constant" and domain in DEFAULT_DOMAIN:
                key: tuple = ("Constant", node.overload, attrs)
            else:
                key = ("" if domain == "ai.onnx" else domain, op, node.overload, len(outs),
                       tuple([None if d is None else d.key if d.key is not None else value_key(d) for d in ins]),
                       attrs)
            if seen(key, node) is not node and not any(d.out_any for d in outs):
                return f"CommonSubexpressionPass may change {where(node)} (an equal node before it)"
    return None


def _outputs_out(outs) -> bool:
    """Whether one of a node's output definitions is a graph output (such a node never fires CSE)."""
    for d in outs:
        if d.out_any:
            return True
    return False


_NOKEY = object()  # an attribute value CSE never merges
_ATTR_INT, _ATTR_FLOAT, _ATTR_STRING, _ATTR_TENSOR, _ATTR_FLOATS, _ATTR_INTS, _ATTR_STRINGS = 2, 1, 3, 4, 6, 7, 8


def _proto_attrs_key(attributes) -> tuple | None:
    """A node proto's attributes as ``common_subexpression._node_key`` compares them, never finer; None: never merged."""
    attrs = []
    for a in sorted(attributes, key=lambda a: a.name):
        v = _proto_attr_value(a)
        if v is _NOKEY:
            return None
        attrs.append((a.name, a.type, v))
    return tuple(attrs)


def _proto_attr_value(a):
    """An attribute's value as ``common_subexpression._node_key`` compares it (NaN equal to NaN: coarser), or _NOKEY."""
    t = a.type
    if a.ref_attr_name:  # only functions have them (and functions are not pre-checked)
        raise MayChange(f"may change: attribute {a.name!r} refers to a function attribute outside a function")
    if t == _ATTR_INT:
        return a.i
    if t == _ATTR_FLOAT:
        return "nan" if a.f != a.f else a.f
    if t == _ATTR_STRING:
        return a.s.decode("utf-8", errors="replace")
    if t == _ATTR_INTS:
        return tuple(a.ints)
    if t == _ATTR_FLOATS:
        return tuple("nan" if f != f else f for f in a.floats)
    if t == _ATTR_STRINGS:
        return tuple(s.decode("utf-8", errors="replace") for s in a.strings)
    if t == _ATTR_TENSOR:
        if numel(a.t) > SMALL:
            return _NOKEY
        arr = tensor_array(a.t)
        return "exotic" if arr is EXOTIC else (str(arr.dtype), arr.shape, arr.tobytes())
    if t == 0:
        raise MayChange(f"may change: attribute {a.name!r} has no type (not pre-checked)")
    return _NOKEY  # graphs, tensors, sparse tensors, type protos: never merged


def remove_dead(index: ProtoIndex) -> str | None:
    """A value nothing uses (a dead node, an unused optional output, an unused initializer),
    trailing empty inputs or outputs, or a BatchNormalization (onnx-ir trims its outputs)."""
    for gi in index.graphs:
        for node, what in gi.bad_io:
            return f"RemoveDeadPass may change {where(node)}: {what}"
        for d in gi.scope.values():
            if d.uses or d.out_any:
                continue
            if d.kind == "init":
                return f"RemoveDeadPass may change it: initializer {d.tensor.name!r} is not used"
            if d.kind == "node":
                reason = _unused_output(index, d, gi.scope)
                if reason is not None:
                    return reason
    for _, node, _, _ in index.each("BatchNormalization"):
        return f"RemoveDeadPass may change {where(node)} (BatchNormalization's outputs)"
    return None


def _unused_output(index: ProtoIndex, d, scope: dict) -> str | None:
    """onnx-ir's RemoveUnusedNodesPass (and :func:`_remove_dead_in_bulk`) on ``d``, an output
    nothing uses: its node is dead, or it is an optional output onnx-ir drops."""
    node = d.node
    outs = [scope[name] if name else None for name in node.output]
    unused = [o is None or not o.uses and not o.out_any for o in outs]
    if all(unused):
        return f"RemoveDeadPass may change it: {where(node)} is dead"
    if node.domain not in ("", "ai.onnx", "onnx.ai"):
        return None
    optional = _optional_outputs(index, node)
    if optional is None or any(u and opt for u, opt in zip(unused, optional)):
        return f"RemoveDeadPass may change {where(node)}: an unused optional output"
    return None


def _optional_outputs(index: ProtoIndex, node) -> list | None:
    """Per output of the schema, whether it is optional; [] when onnx-ir leaves the outputs
    (no schema, a variadic output); None when unsure."""
    if node.domain == "onnx.ai":
        return None
    key = ("optional outputs", node.op_type, index.opset)
    if key not in index.cache:
        import onnx
        try:
            schema = onnx.defs.get_schema(node.op_type, index.opset, domain="")
        except Exception:  # onnx-ir skips the node then too
            index.cache[key] = []
        else:
            option = onnx.defs.OpSchema.FormalParameterOption
            opts = [o.option for o in schema.outputs]
            index.cache[key] = [] if option.Variadic in opts else [o == option.Optional for o in opts]
    return index.cache[key]


#: pass name -> its condition, in the order of a default cleanup (``RemoveDeadPass`` first, then
#: ``passes.default_passes()``; tests/cleanup check the two lists agree).
CONDITIONS: dict[str, Callable[[ProtoIndex], str | None]] = {
    "RemoveDeadPass": remove_dead,
    "FoldShapeArithmeticPass": known_integers,
    "ReshapeCopyDimsPass": reshape_copy_dims,
    "LiftScalarsPass": lift_scalars,
    "RebuildShapeVectorsPass": known_integers,
    "MergeSlicesPass": merge_slices,
    "TransposeSliceTransposePass": transpose_slice_transpose,
    "QdqMovementPass": qdq_around_movement,
    "CommonSubexpressionPass": common_subexpression,
}
