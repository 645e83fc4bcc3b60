"""Shape derivation past StridedSlice nodes, round by round, on parts of the graph
(rewrite/shapes.py): the same shapes as the rounds over the whole graph, on random chains and
fan-outs with symbolic dims; the whole-graph way for what it cannot cut (subgraphs, functions);
and a cost that grows linearly with the model at any depth of slices in series (a count of the
nodes shape inference is asked to infer: no clock)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnx_slice_tools.graphs.shape_inference as shape_inference
import onnx_slice_tools.rewrite.shapes as shapes
from onnx_slice_tools.graphs.table import NodeTable
from onnx_slice_tools.rewrite.shapes import derive_shapes, skeleton
from onnx_slice_tools.semantics.spec import from_index_expr

ROOT = Path(__file__).resolve().parents[2]
TF = "ai.onnx.converters.tensorflow"
_spec = importlib.util.spec_from_file_location("bench", ROOT / "scripts" / "bench.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)  # type: ignore[union-attr]

MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")
EXPRS = ["x[:, ::-1]", "x[:, 1:]", "x[..., :2]", "x[0]", "x[:, None]", "x[..., ::2]", "x[1:, :, -1]",
         "x[:, 2:-1, ...]", "x[..., 0, :]", "x[::-1, ::-1]"]


def _random_model(seed: int, every_output: bool = True):
    """A random TF-flavour model: symbolic and static dims, StridedSlices reading graph inputs,
    other slices (in series) and the outputs of ONNX ops (elementwise, broadcasting, Reshape
    and Unsqueeze of constants from a ``Constant`` node and an initializer, Transpose, Concat,
    NonZero's made-up dims), fan-out and chains mixed; every value a graph output
    (``every_output``), else the last one only."""
    rng = np.random.default_rng(seed)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 6, 5, "W"]),
              helper.make_tensor_value_info("z", TensorProto.FLOAT, [4, "H"])]
    nodes, inits, values = [], [helper.make_tensor("axes0", TensorProto.INT64, [1], [0])], ["x", "z"]
    nodes.append(helper.make_node("Constant", [], ["flat"], value=helper.make_tensor("fv", TensorProto.INT64, [2],
                                                                                     [0, -1])))
    for k in range(int(rng.integers(8, 30))):
        src = values[int(rng.integers(len(values)))] if rng.random() < 0.5 else values[-1]
        out = f"v{k}"
        op = rng.choice(["slice", "slice", "slice", "Neg", "Add", "Reshape", "Unsqueeze", "Transpose", "Concat",
                         "NonZero", "Custom"])
        if op == "slice":
            spec = from_index_expr(EXPRS[int(rng.integers(len(EXPRS)))])
            for nm, vals in (("b", spec.begin), ("e", spec.end), ("s", spec.strides)):
                inits.append(helper.make_tensor(f"{nm}{k}", TensorProto.INT32, [spec.n], list(vals)))
            nodes.append(helper.make_node("StridedSlice", [src, f"b{k}", f"e{k}", f"s{k}"], [out], domain=TF,
                                          **{m: getattr(spec, m) for m in MASKS}))
        elif op == "Add":
            nodes.append(helper.make_node("Add", [src, values[int(rng.integers(len(values)))]], [out]))
        elif op == "Reshape":
            nodes.append(helper.make_node("Reshape", [src, "flat"], [out]))
        elif op == "Unsqueeze":
            nodes.append(helper.make_node("Unsqueeze", [src, "axes0"], [out]))
        elif op == "Concat":
            nodes.append(helper.make_node("Concat", [src, src], [out], axis=0))
        elif op == "Custom":  # no schema: nothing after it is known
            nodes.append(helper.make_node("Mystery", [src], [out], domain="custom.ops"))
        else:
            nodes.append(helper.make_node(str(op), [src], [out]))
        values.append(out)
    outputs = [helper.make_tensor_value_info(v, TensorProto.UNDEFINED, None)
               for v in (values[2:] if every_output else values[-1:])]
    graph = helper.make_graph(nodes, "random", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TF, 1),
                                                    helper.make_opsetid("custom.ops", 1)])
    model.ir_version = 8
    return model


def _parts(model):
    """The rounds in parts of ``model``'s skeleton (None: it cannot be cut)."""
    header = skeleton(model, keep=(), outputs=True)
    table = NodeTable(model.graph)
    return shapes._rounds_in_part(header, model.graph.node, shapes._SlicePlanner(header, None, table, model.graph.node),
                                  table)


def _whole(monkeypatch, model, **kw) -> dict:
    """derive_shapes by the rounds over the whole graph (the way before the parts)."""
    with monkeypatch.context() as m:
        m.setattr(shapes, "_rounds_in_part", lambda *a: None)
        return derive_shapes(model, **kw)


def _same_up_to_made_up_names(whole: dict, part: dict, declared: set) -> None:
    """Same values, element types, ranks, static dims and declared symbols; a made-up symbol
    (``unk__N``: inference names them in order, and each way numbers them differently) maps to
    one name of the other way wherever it appears."""
    assert whole.keys() == part.keys()
    renamed: dict = {}
    for name in sorted(whole):
        (e1, d1), (e2, d2) = whole[name], part[name]
        assert e1 == e2, name
        assert (d1 is None) == (d2 is None), name
        if d1 is None:
            continue
        assert len(d1) == len(d2), name
        for a, b in zip(d1, d2):
            if isinstance(a, str) and a not in declared:
                assert isinstance(b, str) and b not in declared, (name, d1, d2)
                assert renamed.setdefault(a, b) == b, (name, d1, d2)
            else:
                assert a == b, (name, d1, d2)


@pytest.mark.parametrize("seed", range(40))
def test_parts_derive_what_the_whole_graph_derives(seed, monkeypatch):
    model = _random_model(seed)
    assert _parts(model) is not None  # (the parts ran)
    _same_up_to_made_up_names(_whole(monkeypatch, model), derive_shapes(model), {"B", "W", "H"})


@pytest.mark.parametrize("seed", range(40))
def test_parts_without_what_the_first_inference_cannot_type(seed, monkeypatch):
    """Values that are no graph output: the first inference leaves out the nodes after a slice
    that it provably types nothing (shapes._silent), and still derives what the whole graph
    derives -- a Shape or NonZero after a slice (typed with no input type: inferred) included."""
    model = _random_model(seed, every_output=False)
    silent = []
    real = shapes._silent
    with monkeypatch.context() as m:
        m.setattr(shapes, "_silent", lambda *a: silent.append(real(*a)) or silent[-1])
        got = derive_shapes(model)
    assert silent  # (the parts ran)
    _same_up_to_made_up_names(_whole(monkeypatch, model), got, {"B", "W", "H"})
    # the rewrite's way: only the values its slices read, from the nodes they depend on
    names = {i for n in model.graph.node if n.op_type == "StridedSlice" for i in n.input}
    kw = {"names": names, "has_subgraphs": False}
    _same_up_to_made_up_names(_whole(monkeypatch, model, **kw), derive_shapes(model, **kw), {"B", "W", "H"})


def test_some_random_models_leave_nodes_out_and_keep_others():
    """The cases the test above needs: nodes left out of the first inference (a Neg reading a
    slice), and nodes reading only a slice kept in it (a NonZero: typed with no input type)."""
    left_out, kept = set(), 0
    for seed in range(40):
        model = _random_model(seed, every_output=False)
        header = skeleton(model, keep=(), outputs=True)
        table = NodeTable(model.graph)
        producer = {o: k for k, outs in enumerate(table.outputs) for o in outs}
        silent = shapes._silent(header, model.graph.node, table, {o.name: o for o in model.graph.output}, producer,
                                shape_inference.infer)
        sliced = {o for k, op in enumerate(table.ops) if op == "StridedSlice" for o in table.outputs[k]}
        after = [k for k in range(len(table)) if table.inputs[k] and table.inputs[k][0] in sliced]
        left_out.update(table.ops[k] for k in after if k in silent)
        kept += sum(table.ops[k] == "NonZero" and k not in silent for k in after)
        assert not any(table.ops[k] in ("NonZero", "StridedSlice", "Constant") for k in silent)
    assert "Neg" in left_out and kept > 0


def test_a_node_inferred_again_reads_what_an_earlier_part_typed(monkeypatch):
    """A Concat after two slices planned in two rounds is inferred in both; the second time it
    reads a value of the first round's part, which that part must have kept although only its
    own nodes read it (shapes._take_wanted), and the values asked for get the whole graph's
    types."""
    def sliced(src, expr, out):
        spec = from_index_expr(expr)
        inits = [helper.make_tensor(f"{nm}_{out}", TensorProto.INT32, [spec.n], list(vals))
                 for nm, vals in (("b", spec.begin), ("e", spec.end), ("s", spec.strides))]
        node = helper.make_node("StridedSlice", [src, *(i.name for i in inits)], [out], domain=TF,
                                **{m: getattr(spec, m) for m in MASKS})
        return node, inits
    s1, i1 = sliced("x", "x[:, 1:]", "s1")
    s2, i2 = sliced("n2", "x[:, 1:]", "s2")
    s3, i3 = sliced("cat", "x[..., :2]", "s3")
    nodes = [s1, helper.make_node("Neg", ["s1"], ["n1"]), helper.make_node("Neg", ["n1"], ["n2"]), s2,
             helper.make_node("Neg", ["s2"], ["n3"]), helper.make_node("Concat", ["n1", "n3"], ["cat"], axis=1), s3,
             helper.make_node("Neg", ["s3"], ["y"])]
    graph = helper.make_graph(nodes, "again", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 6, 5, "W"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], i1 + i2 + i3)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TF, 1)])
    kw = {"names": {i for n in nodes if n.op_type == "StridedSlice" for i in n.input}, "has_subgraphs": False}
    took = []
    real = shapes._take_wanted
    with monkeypatch.context() as m:
        m.setattr(shapes, "_take_wanted", lambda *a: took.append(real(*a)) or took[-1])
        got = derive_shapes(model, **kw)
    assert any(took)
    assert got["cat"] == (TensorProto.FLOAT, ("B", 9, 5, "W"))
    assert got == _whole(monkeypatch, model, **kw)


def test_no_answer_of_the_probe_leaves_every_node_in(monkeypatch):
    """When the probe of shapes._silent gets no answer (inference raised), nothing is left out of
    round 0, and the chain still gets every shape."""
    model = bench.chain_model(60, 6, shape=("B", 3, 4))
    real = shape_inference.infer
    probes: list = []

    def failing_probe(m, strict=False, **kw):
        proto = m if not isinstance(m, bytes) else onnx.load_from_string(m)
        if any(i.startswith("in0_") for n in proto.graph.node for i in n.input):
            probes.append(len(proto.graph.node))
            raise RuntimeError("no answer")
        return real(m, strict, **kw)
    with monkeypatch.context() as m:
        m.setattr(shape_inference, "infer", failing_probe)
        got = derive_shapes(model)
        silent = shapes._silent(skeleton(model, keep=(), outputs=True), model.graph.node, NodeTable(model.graph), {},
                                {}, failing_probe)
    assert probes and silent == set()
    assert got == _whole(monkeypatch, model)


@pytest.mark.parametrize("n,slices", [(60, 6), (60, 60), (200, 20)])
def test_chains_get_every_shape(n, slices, monkeypatch):
    """Every value of a chain of slices in series gets its shape, as the whole-graph rounds give it."""
    model = bench.chain_model(n, slices, shape=("B", 3, 4))
    got = derive_shapes(model)
    assert all(got[f"h{i}"] == (TensorProto.FLOAT, ("B", 3, 4)) for i in range(n))
    assert got == _whole(monkeypatch, model)


def _with_if(model):
    """``model`` with an If whose branches slice the chain's last value (an outer-scope read)."""
    last = model.graph.node[-1].output[0]
    spec = from_index_expr("x[:, 1:]")

    def branch(tag):
        inits = [helper.make_tensor(f"{nm}{tag}", TensorProto.INT32, [spec.n], list(vals))
                 for nm, vals in (("b", spec.begin), ("e", spec.end), ("s", spec.strides))]
        node = helper.make_node("StridedSlice", [last, f"b{tag}", f"e{tag}", f"s{tag}"], [f"o{tag}"], domain=TF,
                                **{m: getattr(spec, m) for m in MASKS})
        return helper.make_graph([node], tag, [], [helper.make_tensor_value_info(f"o{tag}", TensorProto.FLOAT, None)],
                                 inits)
    model.graph.input.append(helper.make_tensor_value_info("flag", TensorProto.BOOL, []))
    model.graph.node.append(helper.make_node("If", ["flag"], ["picked"], then_branch=branch("t"),
                                             else_branch=branch("e")))
    model.graph.node.append(helper.make_node("Neg", ["picked"], ["after"]))
    model.graph.output.append(helper.make_tensor_value_info("after", TensorProto.FLOAT, None))
    return model


def _with_function(model):
    """``model`` whose last Neg is a call of a model-local function."""
    f = helper.make_function("local", "Twice", ["a"], ["b"], [helper.make_node("Neg", ["a"], ["b"])],
                             [helper.make_opsetid("", 17)])
    model.functions.append(f)
    model.opset_import.append(helper.make_opsetid("local", 1))
    node = model.graph.node[-2]
    assert node.op_type == "Neg"
    node.op_type, node.domain = "Twice", "local"
    return model


@pytest.mark.parametrize("kind", ["if", "function"])
def test_subgraphs_and_functions_take_the_whole_graph(kind, monkeypatch):
    """A subgraph reads outer values no node input names, and a function's body is inferred
    with its call: the parts cannot hold them, so the whole graph is inferred in each round,
    and the chain's shapes are still all derived."""
    model = bench.chain_model(40, 4, shape=("B", 3, 4))
    model = _with_if(model) if kind == "if" else _with_function(model)
    assert _parts(model) is None
    got = derive_shapes(model)
    assert all(got[f"h{i}"] == (TensorProto.FLOAT, ("B", 3, 4)) for i in range(40))
    assert got == _whole(monkeypatch, model)


def _inferred_nodes(monkeypatch, model) -> int:
    """How many nodes shape inference was asked to infer while deriving ``model``'s shapes
    (the sum over every call of the nodes of the model it was given)."""
    count = [0]
    real = shape_inference.infer

    def counting(m, strict=False, **kw):
        proto = m if not isinstance(m, bytes) else onnx.load_from_string(m)
        count[0] += len(proto.graph.node)
        return real(m, strict, **kw)
    with monkeypatch.context() as patch:
        patch.setattr(shape_inference, "infer", counting)
        derive_shapes(model)
    return count[0]


@pytest.mark.parametrize("every", [10, 100])
def test_cost_grows_linearly_at_any_depth(every, monkeypatch):
    """Twice the nodes with twice the slices in series: at most about twice the nodes inferred
    (each node is inferred in at most two rounds: the first, over the graph less what it types
    nothing, and the one after the slice above it), where the rounds over the whole graph infer
    them once per link."""
    one = _inferred_nodes(monkeypatch, bench.chain_model(1000, 1000 // every))
    two = _inferred_nodes(monkeypatch, bench.chain_model(2000, 2000 // every))
    assert two <= 2.1 * one
    assert one <= 2.1 * 1000
    with monkeypatch.context() as m:
        m.setattr(shapes, "_rounds_in_part", lambda *a: None)
        whole = _inferred_nodes(monkeypatch, bench.chain_model(1000, 1000 // every))
    assert whole >= 1000 * (1000 // every) / 2  # (what the counter would catch)
