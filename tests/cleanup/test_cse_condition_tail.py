"""cleanup/conditions.common_subexpression makes no key for the nodes after the last one that can
fire (all of whose outputs are graph outputs): on random graphs it answers exactly as when every
node gets its key -- the same reason, the same "may change" for a constant it cannot read."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from onnx_slice_tools.cleanup import conditions
from onnx_slice_tools.cleanup.scan import MayChange, ProtoIndex


def _answer(proto):
    try:
        return conditions.common_subexpression(ProtoIndex(proto))
    except MayChange as exc:
        return f"raised: {exc}"


@st.composite
def _graphs(draw):
    inits = []
    for k in range(draw(st.integers(1, 4))):
        t = helper.make_tensor(f"c{k}", TensorProto.INT64, [1], [draw(st.integers(0, 2))])
        if draw(st.integers(0, 5)) == 0:  # a small constant the pre-check cannot read
            t.data_location = TensorProto.EXTERNAL
            e = t.external_data.add()
            e.key, e.value = "location", "w.bin"
        inits.append(t)
    values, nodes = ["x"], []
    for k in range(draw(st.integers(1, 8))):
        op = draw(st.sampled_from(["Slice", "Add", "Identity", "Constant", "Cast"]))
        out = f"v{k}"
        if op == "Slice":
            c = [f"c{draw(st.integers(0, len(inits) - 1))}" for _ in range(3)]
            nodes.append(helper.make_node("Slice", [draw(st.sampled_from(values)), *c], [out]))
        elif op == "Add":
            nodes.append(helper.make_node("Add", [draw(st.sampled_from(values)), draw(st.sampled_from(values))], [out]))
        elif op == "Identity":
            nodes.append(helper.make_node("Identity", [draw(st.sampled_from(values))], [out]))
        elif op == "Constant":
            nodes.append(helper.make_node("Constant", [], [out], value=helper.make_tensor(
                "t", TensorProto.INT64, [1], [draw(st.integers(0, 1))])))
        else:
            nodes.append(helper.make_node("Cast", [draw(st.sampled_from(values))], [out], to=TensorProto.FLOAT))
        values.append(out)
    produced = values[1:]
    outs = draw(st.lists(st.sampled_from(produced), min_size=1, unique=True))
    if draw(st.booleans()):  # the last nodes all graph outputs: the tail left without keys
        outs = sorted(set(outs) | set(produced[draw(st.integers(0, len(produced) - 1)):]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.INT64, [4])],
                              [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@settings(max_examples=400, deadline=None)
@given(proto=_graphs())
def test_the_tail_without_keys_answers_as_every_key(proto):
    got = _answer(proto)
    real = conditions._outputs_out
    conditions._outputs_out = lambda outs: False  # every node keyed (the tail is empty)
    try:
        want = _answer(proto)
    finally:
        conditions._outputs_out = real
    assert got == want

