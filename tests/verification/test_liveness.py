"""sizing.Liveness.peak against a node-by-node simulation of its own rule, on random graphs."""

from __future__ import annotations

import random

import pytest
from onnx import TensorProto, helper

from onnx_slice_tools.verification.sizing import Liveness


def _random_model(rng: random.Random):
    """A random DAG of Relu/Add/Concat nodes over two inputs; every value's shape known."""
    sizes = {"a": rng.randint(1, 64), "b": rng.randint(1, 64)}
    values = ["a", "b"]
    nodes = []
    for k in range(rng.randint(1, 25)):
        op = rng.choice(["Relu", "Add", "Concat"])
        out = f"v{k}"
        if op == "Relu":
            x = rng.choice(values)
            nodes.append(helper.make_node("Relu", [x], [out]))
            sizes[out] = sizes[x]
        else:
            x, y = rng.choice(values), rng.choice(values)
            if op == "Add":
                nodes.append(helper.make_node("Add", [x, x], [out]))
                sizes[out] = sizes[x]
            else:
                nodes.append(helper.make_node("Concat", [x, y], [out], axis=0))
                sizes[out] = sizes[x] + sizes[y]
        values.append(out)
    made = [n.output[0] for n in nodes]
    outputs = rng.sample(made, rng.randint(1, len(made)))
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [sizes[n]]) for n in ("a", "b")],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, [sizes[o]]) for o in outputs])
    shapes = {n: (TensorProto.FLOAT, (s,)) for n, s in sizes.items()}
    return helper.make_model(graph), shapes, values


def _simulated_peak(proto, shapes: dict, keep, outputs: bool) -> int:
    """The rule of Liveness.peak, one node at a time: inputs live from the start; a node's outputs
    are added, the peak taken, then every value it reads last is freed unless it is held to the
    end (a graph output when ``outputs``, or kept); with ``outputs`` False, what it makes that
    nothing reads and is not kept is freed too."""
    size = {name: 4 * dims[0] for name, (_, dims) in shapes.items()}
    nodes = list(proto.graph.node)
    last = {}
    for k, n in enumerate(nodes):
        for i in n.input:
            last[i] = k
    held = set(keep) | ({o.name for o in proto.graph.output} if outputs else set())
    live = sum(size[vi.name] for vi in proto.graph.input)
    peak = live
    for k, n in enumerate(nodes):
        live += sum(size[o] for o in n.output)
        peak = max(peak, live)
        live -= sum(size[v] for v, at in last.items() if at == k and v not in held)
        if not outputs:
            live -= sum(size[o] for o in n.output if o not in last and o not in keep)
    return peak


@pytest.mark.parametrize("seed", range(40))
def test_the_peak_is_the_node_by_node_simulation_of_its_rule(seed):
    rng = random.Random(seed)
    proto, shapes, values = _random_model(rng)
    liveness = Liveness(proto)
    for _ in range(6):  # one Liveness asked several times (its per-shapes arrays are reused)
        keep = rng.sample(values, rng.randint(0, min(4, len(values))))
        outputs = rng.random() < 0.5
        assert liveness.peak(shapes, keep, outputs) == _simulated_peak(proto, shapes, keep, outputs)
