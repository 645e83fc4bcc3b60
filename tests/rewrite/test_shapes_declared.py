"""rewrite/shapes.py's answer for graph inputs and initializers (``_Declared``, read when asked)
against the eager reading it replaced, on random models: the same entries, the same misses."""

from __future__ import annotations

import onnx
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from onnx_slice_tools.rewrite.shapes import _declared_sources, derive_shapes


def _eager(proto, names, max_bytes: int) -> dict | None:
    """The reading before ``_Declared``: every entry read at once."""
    g = proto.graph
    inputs = {vi.name: vi for vi in g.input}
    initializers = {t.name: t for t in g.initializer}
    wanted = {n for n in names if n}
    if not wanted <= inputs.keys() | initializers.keys():
        return None
    out = {}
    for name in wanted:
        vi = inputs.get(name)
        if vi is not None:
            if vi.type.HasField("tensor_type"):
                tt = vi.type.tensor_type
                dims = None if not tt.HasField("shape") else tuple(
                    d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)
                out[name] = (tt.elem_type or None, dims)
            continue
        t = initializers[name]
        as_input = t.data_location == 1 or t.ByteSize() > max_bytes
        out[name] = (t.data_type or None if as_input else t.data_type, tuple(t.dims))
    return out


_dim = st.one_of(st.integers(0, 5), st.sampled_from(["B", "N", ""]), st.none())


@st.composite
def _models(draw):
    names = [f"v{k}" for k in range(draw(st.integers(1, 8)))]
    inputs, inits = [], []
    for name in names:
        kind = draw(st.sampled_from(["input", "init", "both", "typeless", "rankless", "sequence"]))
        if kind in ("input", "both", "rankless"):
            dims = None if kind == "rankless" else draw(st.lists(_dim, max_size=3))
            elem = draw(st.sampled_from([0, TensorProto.FLOAT, TensorProto.INT64]))
            vi = helper.make_tensor_value_info(name, elem, dims)
            if dims is not None:  # (a dim of neither value nor name)
                for d, given in zip(vi.type.tensor_type.shape.dim, dims):
                    if given is None:
                        d.Clear()
            inputs.append(vi)
        elif kind == "typeless":
            inputs.append(onnx.ValueInfoProto(name=name))
        elif kind == "sequence":
            inputs.append(helper.make_value_info(name, helper.make_sequence_type_proto(
                helper.make_tensor_type_proto(TensorProto.FLOAT, [2]))))
        if kind in ("init", "both"):
            dims = draw(st.lists(st.integers(0, 40), max_size=2))
            t = onnx.TensorProto(name=name, data_type=draw(st.sampled_from([0, TensorProto.INT32, TensorProto.FLOAT])),
                                 dims=dims)
            n = 1
            for d in dims:
                n *= d
            t.raw_data = b"\0" * (4 * n)
            if draw(st.booleans()):
                t.data_location = TensorProto.EXTERNAL
            inits.append(t)
    graph = helper.make_graph([], "g", inputs, [], inits)
    asked = draw(st.lists(st.sampled_from(names + ["", "absent"]), max_size=10))
    return helper.make_model(graph), asked, names


@settings(max_examples=300, deadline=None)
@given(case=_models(), max_bytes=st.sampled_from([0, 16, 1024]))
def test_declared_entries_are_the_eager_ones(case, max_bytes):
    model, asked, names = case
    want = _eager(model, asked, max_bytes)
    got = _declared_sources(model, asked, max_bytes)
    if want is None:
        assert got is None
        return
    assert got is not None
    for name in names + ["", "absent"]:  # read in any order, one at a time ...
        assert got.get(name, "miss") == want.get(name, "miss")
        assert (name in got) == (name in want)
    assert dict(got) == want and got == want and len(got) == len(want)  # ... and whole
    assert derive_shapes(model, max_bytes, names=set(asked)) == want
