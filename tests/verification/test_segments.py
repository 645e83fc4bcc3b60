"""segments.parted_session: a model run in consecutive parts gives what one session of it gives,
bitwise, on random graphs; models it cannot cut exactly take one session (None)."""

from __future__ import annotations

import random

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnx_slice_tools.verification import segments
from onnx_slice_tools.verification.runtimes import onnxruntime_session


def _random_model(rng: random.Random, n: int):
    """A random DAG of float ops over two inputs [2, 3] (Neg, Add, Mul by a shared initializer,
    Constant nodes, Cast to int64 and back, Concat+Split), values read across many nodes, some
    graph outputs in the middle; every value's element type known."""
    nodes, elems = [], {"a": 1, "b": 1}
    values = ["a", "b"]
    inits = [helper.make_tensor("w", TensorProto.FLOAT, [3], [0.5, -2.0, 3.0])]
    for k in range(n):
        op = rng.choice(["Neg", "Add", "MulW", "Const", "CastRound", "ConcatSplit"])
        out = f"v{k}"
        x, y = rng.choice(values[-6:]), rng.choice(values)
        if op == "Neg":
            nodes.append(helper.make_node("Neg", [x], [out], name=f"n{k}"))
        elif op == "Add":
            nodes.append(helper.make_node("Add", [x, y], [out], name=f"n{k}"))
        elif op == "MulW":
            nodes.append(helper.make_node("Mul", [x, "w"], [out], name=f"n{k}"))
        elif op == "Const":
            c = f"c{k}"
            nodes.append(helper.make_node("Constant", [], [c], name=f"k{k}",
                                          value=helper.make_tensor(c, TensorProto.FLOAT, [1], [rng.random()])))
            nodes.append(helper.make_node("Sub", [x, c], [out], name=f"n{k}"))
            elems[c] = 1
        elif op == "CastRound":
            i = f"i{k}"
            nodes.append(helper.make_node("Cast", [x], [i], name=f"ci{k}", to=TensorProto.INT64))
            nodes.append(helper.make_node("Cast", [i], [out], name=f"n{k}", to=TensorProto.FLOAT))
            elems[i] = 7
        else:
            j, s1, s2 = f"j{k}", f"s{k}", f"t{k}"
            nodes.append(helper.make_node("Concat", [x, y], [j], name=f"cc{k}", axis=0))
            nodes.append(helper.make_node("Split", [j], [s1, s2], name=f"sp{k}", axis=0, num_outputs=2))
            nodes.append(helper.make_node("Add", [s1, s2], [out], name=f"n{k}"))
            elems.update({j: 1, s1: 1, s2: 1})
        elems[out] = 1
        values.append(out)
    outputs = sorted(set(rng.sample(values[2:], min(5, len(values) - 2))) | {values[-1]})
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(v, TensorProto.FLOAT, [2, 3]) for v in "ab"],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model, elems, outputs


@pytest.mark.parametrize("seed", range(12))
def test_parts_give_what_one_session_gives(seed):
    rng = random.Random(seed)
    model, elems, outputs = _random_model(rng, rng.randint(20, 120))
    built = []

    def make(m):
        built.append(len(m.graph.node))
        return onnxruntime_session(m)
    part_nodes = rng.choice([3, 7, 16])
    parted = segments.parted_session(model, elems, make, part_nodes=part_nodes, min_nodes=0)
    assert parted is not None and len(built) > 1
    assert max(built) < 2 * part_nodes  # (a short last part joins the one before)
    assert sum(built) == len(model.graph.node)  # every node runs, once
    feeds = {v: np.random.default_rng(seed).standard_normal((2, 3)).astype(np.float32) for v in "ab"}
    whole = onnxruntime_session(model).run(outputs, feeds)
    for got in (parted.run(outputs, feeds), parted.run(None, feeds)):
        for o, w, g in zip(outputs, whole, got):
            assert g.dtype == w.dtype and g.shape == w.shape and g.tobytes() == w.tobytes(), o
    import onnxruntime as ort
    values = parted.run_with_ort_values(outputs, {k: ort.OrtValue.ortvalue_from_numpy(v) for k, v in feeds.items()})
    assert [v.numpy().tobytes() for v in values] == [w.tobytes() for w in whole]


def _chain(n: int):
    nodes = [helper.make_node("Neg", [f"h{k - 1}" if k else "x"], [f"h{k}"], name=f"n{k}") for k in range(n)]
    graph = helper.make_graph(nodes, "c", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info(f"h{n - 1}", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model, {f"h{k}": 1 for k in range(n)}


def test_small_models_take_one_session():
    model, elems = _chain(30)
    assert segments.parted_session(model, elems, onnxruntime_session, part_nodes=4, min_nodes=31) is None
    assert segments.parted_session(model, elems, onnxruntime_session, part_nodes=4, min_nodes=30) is not None


def test_what_cannot_be_cut_exactly_takes_one_session():
    def cut(m, e=None):
        return segments.parted_session(m, e or elems, onnxruntime_session, part_nodes=4, min_nodes=0)
    model, elems = _chain(30)
    assert cut(model) is not None
    # a value of a type that does not cross as a numpy array (bfloat16), or of no known type
    assert cut(model, dict(elems, h11=16)) is None
    assert cut(model, {k: v for k, v in elems.items() if k != "h11"}) is None
    # a node holding a subgraph (its body reads outer values no input names)
    m = onnx.ModelProto()
    m.CopyFrom(model)
    body = helper.make_graph([helper.make_node("Identity", ["h3"], ["r"])], "b", [],
                             [helper.make_tensor_value_info("r", TensorProto.FLOAT, None)])
    m.graph.node.insert(20, helper.make_node("If", ["c"], ["iff"], then_branch=body, else_branch=body))
    assert cut(m) is None
    # nodes out of order; a value made twice; an overridable initializer; a model-local function
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.graph.node[5].CopyFrom(helper.make_node("Neg", ["h20"], ["h5"]))
    assert cut(m) is None
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.graph.node[6].output[0] = "h5"
    assert cut(m) is None
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.graph.initializer.append(helper.make_tensor("x", TensorProto.FLOAT, [2], [1.0, 2.0]))
    assert cut(m) is None
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.functions.append(helper.make_function("local", "f", ["i"], ["o"], [helper.make_node("Neg", ["i"], ["o"])],
                                            [helper.make_opsetid("", 18)]))
    assert cut(m) is None
    # a graph output no node makes
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.graph.output.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, None))
    assert cut(m) is None


def test_initializers_copied_into_many_parts_stay_small():
    model, elems = _chain(30)
    big = np.ones(segments.MAX_COPIED_BYTES // 4, dtype=np.float32)
    model.graph.initializer.append(onnx.numpy_helper.from_array(big, "w"))
    for k in (2, 12):  # read in two parts: one copy too many
        node = model.graph.node[k]
        node.CopyFrom(helper.make_node("Add", [node.input[0], "w0"], list(node.output)))
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.zeros(1, np.float32), "w0"))
    assert segments.parted_session(model, elems, onnxruntime_session, part_nodes=4, min_nodes=0) is not None
    for k in (2, 12):
        model.graph.node[k].input[1] = "w"
    assert segments.parted_session(model, elems, onnxruntime_session, part_nodes=4, min_nodes=0) is None


@pytest.mark.parametrize("seed", range(6))
def test_prune_keeps_exactly_the_nodes_the_outputs_need(seed):
    """taps.prune (the tapped copy keeps only what its outputs need) keeps, in order, exactly
    the nodes the graph outputs depend on, whether it deletes a few in place or copies the rest."""
    from onnx_slice_tools.verification.taps import _FEW_PRUNED, prune
    rng = random.Random(seed)
    model, _, outputs = _random_model(rng, rng.randint(30, 200))
    for keep_outputs in (outputs, outputs[:1], [model.graph.node[-1].output[0]]):
        m = onnx.ModelProto()
        m.CopyFrom(model)
        del m.graph.output[:]
        m.graph.output.extend(helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in keep_outputs)
        needed, expected = set(keep_outputs), []
        for n in reversed(list(m.graph.node)):
            if needed & set(n.output):
                expected.append(n.SerializeToString())
                needed.update(n.input)
        prune(m.graph)
        assert [n.SerializeToString() for n in m.graph.node] == expected[::-1]
    assert _FEW_PRUNED > 0


def test_prune_drops_the_initializers_nothing_left_reads():
    """taps.prune also drops the initializers no kept node reads (onnxruntime would read each
    one in), keeping those a kept node reads, a graph output names, or a graph input declares
    (an overridable initializer: it is not fed)."""
    from onnx_slice_tools.verification.taps import prune
    inits = [helper.make_tensor(n, TensorProto.FLOAT, [1], [1.0]) for n in ("used", "unused", "declared", "out")]
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "used"], ["a"]), helper.make_node("Mul", ["x", "unused"], ["b"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1]),
         helper.make_tensor_value_info("declared", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1]),
         helper.make_tensor_value_info("out", TensorProto.FLOAT, [1])], initializer=inits)
    prune(graph)
    assert [n.output[0] for n in graph.node] == ["a"]
    assert [t.name for t in graph.initializer] == ["used", "declared", "out"]


@pytest.mark.parametrize("seed", range(6))
def test_tapped_copy_of_main_graph_taps_is_the_pruned_full_copy(seed):
    """taps.tap_model with deferred outputs and main-graph taps only makes its copy from the nodes
    it keeps: the same model (bytes) as a full copy with the taps added, the deferred outputs
    dropped and taps.prune applied."""
    import types

    from onnx_slice_tools.verification.taps import prune, tap_model
    rng = random.Random(seed)
    model, _, outputs = _random_model(rng, rng.randint(30, 200))
    model.graph.initializer.append(helper.make_tensor("unread", TensorProto.FLOAT, [1], [1.0]))
    made = [o for n in model.graph.node for o in n.output]
    records = []
    for out in outputs:  # a record per graph output, reading some value made before it
        read = rng.choice(["a", "b", *made[:made.index(out)]])
        records.append(types.SimpleNamespace(graph="main", reads=(read,), output=out, tensors={read: 1, out: 1}))
    deferred = frozenset(rng.sample(outputs, rng.randint(1, len(outputs))))
    tapped, taps = tap_model(model, records, deferred=deferred)
    expected = onnx.ModelProto()
    expected.CopyFrom(model)
    g = expected.graph
    g.output.extend(helper.make_empty_tensor_value_info(n) for n in taps.names if n not in outputs)
    kept = [vi for vi in g.output if vi.name not in deferred or vi.name in taps.seen]
    del g.output[:]
    g.output.extend(kept)
    prune(g)
    assert tapped.SerializeToString() == expected.SerializeToString()
    assert set(taps.deferred.values()) == deferred


@pytest.mark.parametrize("seed", range(4))
def test_exact_outputs_with_the_output_names_read_say_what_they_say_without(seed):
    """exact.exact_outputs given the graph output names (and the node table) the caller read
    answers as it does reading them itself."""
    from onnx_slice_tools.graphs.table import NodeTable
    from onnx_slice_tools.verification.exact import exact_outputs
    rng = random.Random(seed)
    model, elems, outputs = _random_model(rng, rng.randint(30, 200))
    shapes = {name: (elem, (2, 3)) for name, elem in elems.items()}
    alone = exact_outputs(model, shapes)
    assert exact_outputs(model, shapes, NodeTable(model.graph), list(outputs)) == alone
    assert alone <= set(outputs)
    nodes = [helper.make_node("Neg", ["a"], ["n0"]), helper.make_node("Neg", ["n0"], ["n1"]),
             helper.make_node("Mul", ["n1", "a"], ["m"])]  # (Neg moves data exactly, Mul rounds)
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("n0", "m", "n1")])
    chain = helper.make_model(graph)
    shapes = {name: (1, (2,)) for name in ("a", "n0", "n1", "m")}
    assert exact_outputs(chain, shapes) == exact_outputs(chain, shapes, NodeTable(graph), ["n0", "m", "n1"]) \
        == {"n0", "n1"}
