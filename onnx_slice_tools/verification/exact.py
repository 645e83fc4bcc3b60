"""Which graph outputs of a model are pure data movement, hence compared bitwise.

An output computed only by ops that move, select or reshape data (or by arithmetic on
non-float values) is the same bytes in every runtime; any other float output is compared under
the tolerance (verification/tolerance.py).  The in-place run keeps such outputs as digests and
the as-shipped run compares them bitwise; both read this module.
"""

from __future__ import annotations

import numpy as np

from ..graphs.table import NodeTable
from .status import PASSED, failed

#: ops that only move, select or reshape data (or make constants and shapes): an output computed
#: by these alone (arithmetic only on non-float values) is compared bitwise
MOVEMENT = frozenset({
    "Identity", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Slice", "Gather", "GatherElements",
    "GatherND", "Concat", "Split", "Expand", "Tile", "Constant", "Shape", "Size", "ReverseSequence",
    "DepthToSpace", "SpaceToDepth", "Where", "Compress", "ConstantOfShape", "Pad", "SplitToSequence",
    "SequenceAt", "ConcatFromSequence", "Trilu",
    # exact in every implementation: a selection or sign change, no rounding
    "Relu", "Neg", "Abs", "Max", "Min", "Clip", "Floor", "Ceil", "Round", "Sign",
})
#: ONNX element types holding floats (complex included)
FLOAT_ELEMS = frozenset({1, 10, 11, 14, 15, 16, 17, 18, 19, 20, 23})


def exact_outputs(proto, shapes: dict, table=None, names: list | None = None) -> set:
    """Graph outputs of ``proto`` that are pure data movement: every node they depend on (main
    graph) is a :data:`MOVEMENT` op, or gives only non-float values (by ``shapes``' element
    types).  Those are compared bitwise; an unknown type or a subgraph makes an output float
    arithmetic (compared under the tolerance).  ``table``: the main graph's graphs.table.NodeTable, if read;
    ``names``: the names of ``proto``'s graph outputs, if read."""
    if table is None:
        table = NodeTable(proto.graph)
    known = {vi.name for vi in proto.graph.input} | {t.name for t in proto.graph.initializer}
    pure = dict.fromkeys(known, True)  # value -> pure data movement; one pass in node order
    movement, default = MOVEMENT, ("", "ai.onnx")
    get = pure.get
    holders = set(table.holders)
    for k, (op, domain, inputs, outputs) in enumerate(zip(table.ops, table.domains, table.inputs, table.outputs)):
        ok = domain in default and op in movement or \
            all(o and o in shapes and shapes[o][0] not in FLOAT_ELEMS for o in outputs)
        if ok:  # (a value read before it is made counts as arithmetic)
            for i in inputs:
                if i and not get(i, False):
                    ok = False
                    break
        if ok and k in holders:
            ok = False
        for o in outputs:
            if o:
                pure[o] = ok
    if names is None:
        names = [o.name for o in proto.graph.output]
    return {name for name in names if pure.get(name, False)}


def same_bits(y, expected, where: str) -> str:
    """A rewrite's output ``y`` against its reference's ``expected``, bitwise (shape, dtype, bytes;
    strings by value): the in-place comparison of every op that moves data.  ``where`` names the
    tensors that reached it, for a failure."""
    y, expected = np.asarray(y), np.asarray(expected)
    if y.shape != expected.shape:
        return failed(f"{where}: shape {list(y.shape)} != expected {list(expected.shape)}")
    if expected.dtype.kind in "OUS" or y.dtype.kind in "OUS":
        same = y.astype(object).tolist() == expected.astype(object).tolist()
        return PASSED if same else failed(f"{where}: string values differ")
    if y.dtype != expected.dtype:
        return failed(f"{where}: dtype {y.dtype} != expected {expected.dtype}")
    if y.tobytes() != expected.tobytes():
        return failed(f"{where}: values differ")
    return PASSED
