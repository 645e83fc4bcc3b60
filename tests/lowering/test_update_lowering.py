"""The slice-update family's lowering (lowering/update.py) through its rewrite (rewrite/updates.py)
and per-rewrite check (verification/update_checks.py): raw nodes as tf2onnx leaves them, random
shapes and starts, onnxruntime against the reference (bitwise), node counts per form, the
forms below opset 12, and the framework's rejections refused at rewrite time."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from onnx_slice_tools.errors import StridedSliceError
from onnx_slice_tools.rewrite.updates import rewrite_updates
from onnx_slice_tools.verification.update_checks import check_record

_ELEM = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "int32": TensorProto.INT32,
         "int64": TensorProto.INT64, "bool": TensorProto.BOOL, "int8": TensorProto.INT8}


def _model(op, inputs, attrs=None, consts=None, opset=17):
    """A graph of one raw ``op`` node: ``inputs`` = [(name, elem, shape)], ``consts`` = {name: array}."""
    consts = consts or {}
    node = helper.make_node(op, [name for name, *_ in inputs], ["y"], name="n", **(attrs or {}))
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, e, s) for n, e, s in inputs
                                            if n not in consts],
                              [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)],
                              initializer=[numpy_helper.from_array(v, k) for k, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _rewrite_and_check(model):
    records = rewrite_updates(model)
    assert len(records) == 1
    status = check_record(records[0], draws=10)
    assert status.startswith("passed"), (records[0].describe(), status)
    assert not any(n.op_type == records[0].op_type for n in model.graph.node)
    return records[0]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_dynamic_update_slice_lowering_matches_the_reference(data):
    draw = data.draw
    rank = draw(st.integers(1, 5))
    shape = [draw(st.integers(1, 4)) for _ in range(rank)]
    window = [draw(st.integers(0, d)) if draw(st.booleans()) else d for d in shape]
    dtype = draw(st.sampled_from(sorted(_ELEM)))
    index = draw(st.sampled_from(["int32", "int64"]))
    op = draw(st.sampled_from(["XlaDynamicUpdateSlice", "TFL_DYNAMIC_UPDATE_SLICE"]))
    opset = draw(st.sampled_from([11, 13, 17]))
    consts = {}
    if draw(st.booleans()):
        consts["i"] = np.array([draw(st.integers(-(2 ** 31), 2 ** 31 - 1)) for _ in range(rank)], index)
    model = _model(op, [("x", _ELEM[dtype], shape), ("u", _ELEM[dtype], window), ("i", _ELEM[index], [rank])],
                   consts=consts, opset=opset)
    _rewrite_and_check(model)


@pytest.mark.parametrize("x, u, static, want", [
    ([1, 32, 2, 8], [1, 1, 2, 8], False, ["Gather", "Clip", "Add", "Slice", "Slice", "Concat"]),  # KV cache
    ([1, 32, 2, 8], [1, 1, 2, 8], True, ["Slice", "Slice", "Concat"]),
    ([4, 6], [2, 3], False, ["Max", "Min", "Cast", "Add", "ScatterND"]),
    ([4, 6], [2, 3], True, ["ScatterND"]),
    ([4, 6], [4, 6], False, ["Identity"]),
    ([4, 6], [0, 6], False, ["Identity"]),
])
def test_dynamic_update_slice_forms_are_minimal(x, u, static, want):
    consts = {"i": np.array([3] * len(x), np.int32)} if static else {}
    model = _model("XlaDynamicUpdateSlice", [("x", TensorProto.FLOAT, x), ("u", TensorProto.FLOAT, u),
                                             ("i", TensorProto.INT32, [len(x)])], consts=consts)
    record = _rewrite_and_check(model)
    assert record.lowering.describe() == want


def test_below_opset_12_the_clamp_uses_where():
    model = _model("XlaDynamicUpdateSlice", [("x", TensorProto.FLOAT, [1, 8, 2]), ("u", TensorProto.FLOAT, [1, 1, 2]),
                                             ("i", TensorProto.INT64, [3])], opset=11)
    record = _rewrite_and_check(model)
    assert "Clip" not in record.lowering.describe() and record.lowering.describe().count("Where") == 2


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_dynamic_slice_lowering_matches_the_reference(data):
    draw = data.draw
    rank = draw(st.integers(1, 4))
    shape = [draw(st.integers(1, 4)) for _ in range(rank)]
    sizes = np.array([draw(st.integers(0, d)) for d in shape], np.int64)
    consts = {"s": sizes}
    if draw(st.booleans()):
        consts["i"] = np.array([draw(st.integers(-9, 9)) for _ in range(rank)], np.int64)
    model = _model("XlaDynamicSlice", [("x", TensorProto.FLOAT, shape), ("i", TensorProto.INT64, [rank]),
                                       ("s", TensorProto.INT64, [rank])], consts=consts)
    _rewrite_and_check(model)


def _spec_consts(begin, end, strides):
    return {"b": np.array(begin, np.int32), "e": np.array(end, np.int32), "s": np.array(strides, np.int32)}


@pytest.mark.parametrize("shape, begin, end, strides, masks, value", [
    ([4, 4], [0, 0], [2, 2], [1, 1], {}, [2, 2]),
    ([4, 4], [0, 0], [2, 2], [1, 1], {}, []),             # a scalar value broadcasts
    ([4, 4], [0, 0], [2, 2], [1, 1], {}, [1, 1, 2]),      # extra leading 1s
    ([5, 3, 2], [4, 1], [0, 3], [-2, 1], {}, [2, 2, 2]),  # reverse, trailing axis whole
    ([5, 3], [1], [1], [1], {}, [7, 7]),                  # empty slice: value ignored
    ([5, 3], [-1], [0], [1], {"shrink_axis_mask": 1}, [3]),
    ([2, 3], [0, 0], [0, 0], [1, 1], {"begin_mask": 3, "end_mask": 3}, [1, 3]),  # the whole input
])
def test_tensor_strided_slice_update_and_grad(shape, begin, end, strides, masks, value):
    consts = _spec_consts(begin, end, strides)
    model = _model("TensorStridedSliceUpdate", [("x", TensorProto.FLOAT, shape), ("b", TensorProto.INT32, None),
                                                ("e", TensorProto.INT32, None), ("s", TensorProto.INT32, None),
                                                ("v", TensorProto.FLOAT, value)], attrs=masks, consts=consts)
    record = _rewrite_and_check(model)
    assert record.lowering.node_count <= 3


def test_strided_slice_grad_is_a_scatter_into_zeros():
    consts = dict(_spec_consts([0, 1], [3, 3], [2, 1]), shape=np.array([4, 3], np.int64))
    model = _model("StridedSliceGrad", [("shape", TensorProto.INT64, [2]), ("b", TensorProto.INT32, None),
                                        ("e", TensorProto.INT32, None), ("s", TensorProto.INT32, None),
                                        ("dy", TensorProto.FLOAT, [2, 2])], consts=consts)
    record = _rewrite_and_check(model)
    assert record.lowering.describe() == ["ConstantOfShape", "ScatterND"]


@pytest.mark.parametrize("op, inputs, consts, attrs, words", [
    ("XlaDynamicUpdateSlice", [("x", 1, [4]), ("u", 1, [5]), ("i", 6, [1])], {}, {}, "greater than"),
    ("XlaDynamicUpdateSlice", [("x", 1, [4]), ("u", 1, [2]), ("i", 6, [2])], {}, {}, "length equal"),
    ("XlaDynamicUpdateSlice", [("x", 1, [4]), ("u", 1, [1, 2]), ("i", 6, [1])], {}, {}, "same rank"),
    ("TensorStridedSliceUpdate", [("x", 1, [4]), ("b", 6, None), ("e", 6, None), ("s", 6, None), ("v", 1, [3])],
     _spec_consts([0], [2], [1]), {}, "Cannot broadcast"),
    ("TensorStridedSliceUpdate", [("x", 1, [4]), ("b", 6, None), ("e", 6, None), ("s", 6, None), ("v", 1, [])],
     _spec_consts([0], [2], [0]), {}, "non-zero"),
    ("StridedSliceGrad", [("shape", 7, [1]), ("b", 6, None), ("e", 6, None), ("s", 6, None), ("dy", 1, [1])],
     dict(_spec_consts([0], [2], [1]), shape=np.array([4], np.int64)), {}, "shape of dy"),
])
def test_what_the_framework_rejects_is_refused_naming_the_node(op, inputs, consts, attrs, words):
    model = _model(op, inputs, attrs=attrs, consts=consts)
    with pytest.raises(StridedSliceError, match=words) as info:
        rewrite_updates(model)
    assert info.value.node == "n"


@pytest.mark.parametrize("approximate", [0, 1])
@pytest.mark.parametrize("opset", [17, 20])
def test_tflite_gelu_both_forms(approximate, opset):
    model = _model("TFL_GELU", [("x", TensorProto.FLOAT, [3, 5])], attrs={"approximate": approximate}, opset=opset)
    record = _rewrite_and_check(model)
    assert record.lowering.describe() == ["Gelu"] if opset >= 20 else ("Tanh" if approximate else "Erf") in \
        record.lowering.describe()


def test_symbolic_dims_equal_on_both_sides_are_not_narrow():
    """A KV cache with a symbolic batch: only the sequence axis is written; the check runs the
    lowering at a concrete batch."""
    model = _model("XlaDynamicUpdateSlice", [("x", TensorProto.FLOAT, ["B", 16, 2, 4]),
                                             ("u", TensorProto.FLOAT, ["B", 1, 2, 4]),
                                             ("i", TensorProto.INT64, [4])])
    record = _rewrite_and_check(model)
    assert record.lowering.describe() == ["Gather", "Clip", "Add", "Slice", "Slice", "Concat"]


def test_unknown_dim_on_a_narrow_axis_is_refused():
    model = _model("XlaDynamicUpdateSlice", [("x", TensorProto.FLOAT, [2, "T"]), ("u", TensorProto.FLOAT, [2, 1]),
                                             ("i", TensorProto.INT64, [2])])
    with pytest.raises(StridedSliceError, match="must be known"):
        rewrite_updates(model)


@pytest.mark.parametrize("elem", [TensorProto.FLOAT, TensorProto.FLOAT16])
def test_erfc_as_one_minus_erf(elem):
    """TensorFlow's Erfc (Keras's exact GELU), which tf2onnx leaves raw: ``1 - Erf(x)``, checked
    against float64 erfc under the tolerance rule."""
    record = _rewrite_and_check(_model("Erfc", [("x", elem, [3, 5])]))
    assert record.lowering.describe() == ["Erf", "Sub"]


def test_a_float64_erfc_fails_its_check_naming_onnxruntime():
    """onnxruntime has no float64 Erf: the rewrite's own check says so (a failed conversion),
    never a model that fails later."""
    model = _model("Erfc", [("x", TensorProto.DOUBLE, [3, 5])])
    record = rewrite_updates(model)[0]
    status = check_record(record)
    assert status.startswith("failed") and "Erf" in status and "NOT_IMPLEMENTED" in status, status
