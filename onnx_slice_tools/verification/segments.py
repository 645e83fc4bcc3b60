"""The in-place run's FAST session of a large model, built in consecutive parts.

onnxruntime's session build grows faster than the graph (docs/benchmarks.md 16b), so a model
of many nodes costs less as a few sessions of consecutive nodes run one after the other, each
fed the values the earlier ones made.  In the FAST configuration
(runtimes.session_options: no graph optimisation, one thread) a session runs each node with its
own CPU kernel on the tensors it reads; nothing is fused or folded across nodes, so each node
computes, in parts, what it computes in one session of the whole model: the tensors reaching
each rewrite, its output and the graph outputs are those of one run of the whole tapped model
(docs/design.md, "The in-place run in parts").  Every node of every part runs, as every node of
one session does.

Only models it can cut exactly: no model-local function, no node holding a subgraph (a body
reads outer values no input names), nodes in order, every value made once, every graph output
made by a node, and every value crossing a cut a tensor of a type numpy holds as onnxruntime
does (it crosses as the array the earlier part's run returned).  An initializer goes to each
part that reads it (a copy: cut only when those copies stay small).  Anything else, or a part
that onnxruntime cannot load, takes one session of the whole model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: nodes per part: onnxruntime's build costs about the same per node below this
PART_NODES = 1024
#: cut only models of at least this many nodes (below it a whole session costs little more)
MIN_NODES = 8 * PART_NODES
#: initializer bytes copied into more than one part: above this, one session
MAX_COPIED_BYTES = 1 << 20
#: element types numpy holds as onnxruntime does (feeds._PLAIN_ELEMS): what may cross a cut
_CROSSING_ELEMS = frozenset({1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13})


class Part:
    """One part: its session, the values it is fed (graph inputs and earlier parts' values) and
    the values it gives (read by later parts, or graph outputs of the model)."""

    __slots__ = ("session", "inputs", "outputs")

    def __init__(self, session, inputs: list, outputs: list):
        self.session, self.inputs, self.outputs = session, inputs, outputs


class PartedSession:
    """onnxruntime's ``run``/``run_with_ort_values`` over the parts of one model, in order; a
    value is dropped once no later part reads it and it was not asked for."""

    def __init__(self, parts: list, outputs: list, last_read: dict):
        self.parts, self.outputs, self.last_read = parts, outputs, last_read

    def _run(self, names, feeds: dict, method: str) -> list:
        names = list(self.outputs if names is None else names)
        wanted = set(names)
        values = dict(feeds)
        for k, part in enumerate(self.parts):
            got = getattr(part.session, method)(part.outputs, {n: values[n] for n in part.inputs})
            values.update(zip(part.outputs, got))
            del got
            for name in [n for n in part.inputs if self.last_read.get(n) == k and n not in wanted]:
                values.pop(name, None)
        return [values[n] for n in names]

    def run(self, names, feeds: dict, run_options=None) -> list:
        return self._run(names, feeds, "run")

    def run_with_ort_values(self, names, feeds: dict, run_options=None) -> list:
        return self._run(names, feeds, "run_with_ort_values")


def parted_session(model, elems: dict, make: Callable[[Any], Any], part_nodes: int | None = None,
                   min_nodes: int | None = None) -> PartedSession | None:
    """``model`` (a ModelProto, weights inline) as a :class:`PartedSession` of FAST sessions
    (``make(part_model) -> session``) of about ``part_nodes`` consecutive nodes each, or None
    when it is smaller than ``min_nodes`` or cannot be cut exactly (see the module's doc).
    ``elems``: value name -> ONNX element type of every value that may cross a cut.  (None:
    :data:`PART_NODES`, :data:`MIN_NODES` as they are at the call.)"""
    import onnx
    part_nodes = part_nodes or PART_NODES
    min_nodes = MIN_NODES if min_nodes is None else min_nodes
    g = model.graph
    nodes = g.node
    if len(nodes) < min_nodes or model.functions:
        return None
    inputs = {vi.name: vi for vi in g.input}
    initializers = {t.name: t for t in g.initializer}
    if g.sparse_initializer or any(name in inputs for name in initializers):
        return None  # (an overridable initializer: one session, as the model's own)
    graph_type = onnx.AttributeProto.GRAPH
    graphs_type = onnx.AttributeProto.GRAPHS
    starts = list(range(0, len(nodes), part_nodes))
    if len(nodes) - starts[-1] < part_nodes // 2 and len(starts) > 1:
        starts.pop()  # (a short last part joins the one before)
    part_of: dict = {}  # value -> the part that makes it
    last_read: dict = {}  # value made by a node or fed -> the last part that reads it
    reads: list = [dict() for _ in starts]  # per part: values it reads from outside itself (ordered)
    copied: dict = {}  # initializer -> parts reading it
    bounds = starts[1:] + [len(nodes)]
    node_list = list(nodes)  # (each node's wrapper made once)
    made = part_of.get
    for k, (a, b) in enumerate(zip(starts, bounds)):
        reads_k = reads[k]
        for n in node_list[a:b]:
            if n.attribute and any(attr.type == graph_type or attr.type == graphs_type for attr in n.attribute):
                return None
            for name in n.input:
                if not name:
                    continue
                at = made(name)  # (an initializer or a graph input is never made: see below)
                if at == k:
                    continue  # made in this part
                if at is not None or name in inputs:
                    reads_k[name] = None
                    last_read[name] = k
                elif name in initializers:
                    copied.setdefault(name, set()).add(k)
                else:
                    return None  # read before it is made (or never made)
            for name in n.output:
                if name:
                    if name in part_of or name in inputs or name in initializers:
                        return None  # made twice
                    part_of[name] = k
    outputs = list(dict.fromkeys(o.name for o in g.output))
    if any(name not in part_of for name in outputs):
        return None
    crossing = {name for k in range(len(starts)) for name in reads[k] if name in part_of}
    if any(elems.get(name) not in _CROSSING_ELEMS for name in crossing):
        return None
    copies = sum(initializers[name].ByteSize() * (len(parts) - 1) for name, parts in copied.items())
    if copies > MAX_COPIED_BYTES:
        return None
    gives: list = [dict() for _ in starts]
    for name in crossing:
        gives[part_of[name]][name] = None
    for name in outputs:
        gives[part_of[name]][name] = None
    for k, (a, b) in enumerate(zip(starts, bounds)):
        if not gives[k]:  # (a part must give something: then its last value, so that its nodes run)
            last = next((o for n in reversed(node_list[a:b]) for o in reversed(n.output)
                         if o and elems.get(o) in _CROSSING_ELEMS), None)
            if last is None:
                return None
            gives[k][last] = None
    declared = {o.name: o for o in g.output}
    parts = []
    for k, (a, b) in enumerate(zip(starts, bounds)):
        sub = onnx.ModelProto()
        sub.ir_version = model.ir_version
        sub.opset_import.extend(model.opset_import)
        sg = sub.graph
        sg.name = f"{g.name}_part{k}"
        sg.node.extend(node_list[a:b])
        sg.initializer.extend(initializers[name] for name, at in copied.items() if k in at)
        for name in reads[k]:
            if name in inputs:
                sg.input.append(inputs[name])
            else:
                sg.input.append(_tensor_info(name, elems[name]))
        for name in gives[k]:
            if name in declared:
                sg.output.append(declared[name])
            else:
                sg.output.append(_tensor_info(name, elems[name]))
        parts.append(Part(make(sub), list(reads[k]), list(gives[k])))
        del sub
    return PartedSession(parts, outputs, last_read)


def _tensor_info(name: str, elem: int):
    """A tensor's ValueInfo with its element type and no shape: the value's shape changes with
    the run's sizes, and a kernel reads the shapes of the tensors it is given."""
    import onnx
    vi = onnx.ValueInfoProto()
    vi.name = name
    vi.type.tensor_type.elem_type = elem
    return vi
