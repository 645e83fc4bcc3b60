"""The TFLite flavour: LiteRT's STRIDED_SLICE kernel, checked against TF's TFLite interpreter.

* TFLite's own kernel tests (``tflite/kernels/strided_slice_test.cc``), expected values as
  written there, checked against our reference, the interpreter and our ONNX lowering;
* the differences from TensorFlow (begin_mask on a shrink index, zero-width ellipsis,
  out-of-range shrink, offset, INT32_MIN stride);
* a hypothesis corpus against the interpreter (in a child process: on undefined specs the
  interpreter may crash);
* the ONNX node form (``offset`` attribute -> tflite) through ``convert``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from onnx_slice_tools import convert
from onnx_slice_tools.errors import StridedSliceError
from onnx_slice_tools.oracles import (CRASHED, IsolatedTFLite, Outcome, compare_tflite, our_outcome,
                                      random_case, tf_strided_slice, tflite_strided_slice)
from onnx_slice_tools.reference import slice_array, strided_slice
from onnx_slice_tools.rewrite import TF_DOMAIN
from onnx_slice_tools.spec import from_tf, from_tflite
from onnx_slice_tools.verify import make_session

from test_differential import HypothesisSource

# (name, input shape, input values, begin, end, strides, begin_mask, end_mask, ellipsis_mask,
#  new_axis_mask, shrink_axis_mask, offset, expected shape, expected values) -- from
# strided_slice_test.cc (LiteRT), values as written there.
KERNEL_CASES = [
    ("In1DEmpty", [0], [], [1], [3], [1], 0, 0, 0, 0, 0, False, [0], []),
    ("Offset", [10], list(range(10)), [1], [3], [1], 0, 0, 0, 0, 0, True, [3], [1, 2, 3]),
    ("OffsetArray", [3, 4], list(range(12)), [0, 1], [2, 2], [1, 1], 0, 0, 0, 0, 0, True, [2, 2],
     [1, 2, 5, 6]),
    ("OffsetConstantStride", [5, 6], list(range(30)), [0, 1], [4, 3], [2, 2], 0, 0, 0, 0, 0, True,
     [2, 2], [1, 3, 13, 15]),
    ("OffsetConstantNegativeStride", [5, 6], list(range(30)), [4, 4], [-4, -3], [-2, -2], 0, 0, 0, 0, 0,
     True, [2, 2], [28, 26, 16, 14]),
    ("In1D", [4], [1, 2, 3, 4], [1], [3], [1], 0, 0, 0, 0, 0, False, [2], [2, 3]),
    ("In1D_EmptyOutput", [4], [1, 2, 3, 4], [10], [3], [1], 0, 0, 0, 0, 0, False, [0], []),
    ("In1D_NegativeBegin", [4], [1, 2, 3, 4], [-3], [3], [1], 0, 0, 0, 0, 0, False, [2], [2, 3]),
    ("In1D_OutOfRangeBegin", [4], [1, 2, 3, 4], [-5], [3], [1], 0, 0, 0, 0, 0, False, [3], [1, 2, 3]),
    ("In1D_NegativeEnd", [4], [1, 2, 3, 4], [1], [-2], [1], 0, 0, 0, 0, 0, False, [1], [2]),
    ("In1D_OutOfRangeEnd", [4], [1, 2, 3, 4], [-3], [5], [1], 0, 0, 0, 0, 0, False, [3], [2, 3, 4]),
    ("In1D_BeginMask", [4], [1, 2, 3, 4], [1], [3], [1], 1, 0, 0, 0, 0, False, [3], [1, 2, 3]),
    ("In1D_NegativeBeginNegativeStride", [4], [1, 2, 3, 4], [-2], [-3], [-1], 0, 0, 0, 0, 0, False, [1],
     [3]),
    ("In1D_OutOfRangeBeginNegativeStride", [4], [1, 2, 3, 4], [5], [2], [-1], 0, 0, 0, 0, 0, False, [1],
     [4]),
    ("In1D_NegativeEndNegativeStride", [4], [1, 2, 3, 4], [2], [-4], [-1], 0, 0, 0, 0, 0, False, [2],
     [3, 2]),
    ("In1D_OutOfRangeEndNegativeStride", [4], [1, 2, 3, 4], [-3], [-5], [-1], 0, 0, 0, 0, 0, False, [2],
     [2, 1]),
    ("In1D_EndMask", [4], [1, 2, 3, 4], [1], [3], [1], 0, 1, 0, 0, 0, False, [3], [2, 3, 4]),
    ("In1D_NegStride", [3], [1, 2, 3], [-1], [-4], [-1], 0, 0, 0, 0, 0, False, [3], [3, 2, 1]),
    ("In1D_EvenLenStride2", [2], [1, 2], [0], [2], [2], 0, 0, 0, 0, 0, False, [1], [1]),
    ("In1D_OddLenStride2", [3], [1, 2, 3], [0], [3], [2], 0, 0, 0, 0, 0, False, [2], [1, 3]),
    ("In2D_Identity", [2, 3], [1, 2, 3, 4, 5, 6], [0, 0], [2, 3], [1, 1], 0, 0, 0, 0, 0, False, [2, 3],
     [1, 2, 3, 4, 5, 6]),
    ("In2D", [2, 3], [1, 2, 3, 4, 5, 6], [1, 0], [2, 2], [1, 1], 0, 0, 0, 0, 0, False, [1, 2], [4, 5]),
    ("In2D_Stride2", [2, 3], [1, 2, 3, 4, 5, 6], [0, 0], [2, 3], [2, 2], 0, 0, 0, 0, 0, False, [1, 2],
     [1, 3]),
    ("In2D_NegStride", [2, 3], [1, 2, 3, 4, 5, 6], [1, -1], [2, -4], [2, -1], 0, 0, 0, 0, 0, False,
     [1, 3], [6, 5, 4]),
    ("In2D_BeginMask", [2, 3], [1, 2, 3, 4, 5, 6], [1, 0], [2, 2], [1, 1], 1, 0, 0, 0, 0, False, [2, 2],
     [1, 2, 4, 5]),
    ("In2D_EndMask", [2, 3], [1, 2, 3, 4, 5, 6], [1, 0], [2, 2], [1, 1], 0, 2, 0, 0, 0, False, [1, 3],
     [4, 5, 6]),
    ("In2D_NegStrideBeginMask", [2, 3], [1, 2, 3, 4, 5, 6], [1, -2], [2, -4], [1, -1], 2, 0, 0, 0, 0,
     False, [1, 3], [6, 5, 4]),
    ("In2D_NegStrideEndMask", [2, 3], [1, 2, 3, 4, 5, 6], [1, -2], [2, -3], [1, -1], 0, 2, 0, 0, 0, False,
     [1, 2], [5, 4]),
    ("In1D_BeginMaskShrinkAxisMask1", [4], [1, 2, 3, 4], [1], [1], [1], 1, 0, 0, 0, 1, False, [], [1]),
]


def _case(c):
    (_, shape, values, b, e, s, bm, em, elm, nam, sam, offset, want_shape, want) = c
    x = np.array(values, np.float32).reshape(shape)
    spec = from_tflite(b, e, s, begin_mask=bm, end_mask=em, ellipsis_mask=elm, new_axis_mask=nam,
                       shrink_axis_mask=sam, offset=offset)
    return x, spec, tuple(want_shape), np.array(want, np.float32).reshape(want_shape)


def _tflite_onnx_model(x_shape, spec, opset=17):
    """A one-node ONNX model in the TFLite node form (INT masks plus an ``offset`` attribute)."""
    inits = [helper.make_tensor(n, TensorProto.INT32, [len(v)], list(v))
             for n, v in (("b", spec.begin), ("e", spec.end), ("s", spec.strides))]
    attrs = {m: getattr(spec, m) for m in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask",
                                           "shrink_axis_mask")}
    node = helper.make_node("StridedSlice", ["x", "b", "e", "s"], ["y"], name="tfl_slice", domain=TF_DOMAIN,
                            offset=int(spec.offset), **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid(TF_DOMAIN, 1)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("case", KERNEL_CASES, ids=[c[0] for c in KERNEL_CASES])
def test_tflite_kernel_cases(case):
    x, spec, want_shape, want = _case(case)
    ours = slice_array(spec, x)
    assert ours.shape == want_shape and ours.dtype == want.dtype and ours.tobytes() == want.tobytes()
    theirs = tflite_strided_slice(x, spec)
    assert theirs.ok, theirs.error
    assert theirs.values.shape == want_shape and theirs.values.tobytes() == want.tobytes()
    result = convert(_tflite_onnx_model(x.shape, spec))
    assert result.ok, result.report
    (got,) = make_session(result.model.SerializeToString()).run(None, {"x": x})
    assert got.shape == want_shape and got.dtype == want.dtype and got.tobytes() == want.tobytes()
    assert not any(n.op_type == "StridedSlice" for n in result.model.graph.node)


def test_begin_mask_on_shrink_differs_from_tensorflow():
    """TFLite honours begin_mask on a shrink index; TensorFlow ignores it."""
    x = np.array([1, 2, 3, 4], np.float32)
    masks = dict(begin_mask=1, shrink_axis_mask=1)
    assert tf_strided_slice(x, from_tf([1], [2], [1], **masks)).values == 2
    assert strided_slice(x, [1], [2], [1], flavor="tf", **masks) == 2
    assert tflite_strided_slice(x, from_tflite([1], [2], [1], **masks)).values == 1
    assert strided_slice(x, [1], [2], [1], flavor="tflite", **masks) == 1


def test_zero_width_ellipsis_eats_a_dim_in_tflite():
    """``x[..., 0:2]`` on rank 1: TF slices (2 elements); TFLite's ellipsis covers the dim
    and drops the range (all 4)."""
    x = np.array([1, 2, 3, 4], np.float32)
    tf_out = strided_slice(x, [0, 0], [0, 2], [1, 1], ellipsis_mask=1)
    assert tf_out.tolist() == [1, 2]
    spec = from_tflite([0, 0], [0, 2], [1, 1], ellipsis_mask=1)
    assert slice_array(spec, x).tolist() == [1, 2, 3, 4]
    assert tflite_strided_slice(x, spec).values.tolist() == [1, 2, 3, 4]


def test_shrink_below_minus_dim_takes_element_zero():
    x = np.array([1, 2, 3, 4], np.float32)
    spec = from_tflite([-10], [0], [1], shrink_axis_mask=1)
    assert slice_array(spec, x) == 1 == tflite_strided_slice(x, spec).values
    with pytest.raises(StridedSliceError, match="out of bounds"):
        strided_slice(x, [-10], [0], [1], shrink_axis_mask=1)  # TF rejects it


@pytest.mark.parametrize("b, e, s, masks, offset, field", [
    ([4], [5], [1], dict(shrink_axis_mask=1), False, "begin"),        # shrink index past the dim
    ([1], [2], [-1], dict(shrink_axis_mask=1), False, "strides"),     # shrink with a negative stride
    ([1], [2], [1], dict(end_mask=1), True, "end"),                   # offset with end_mask
    ([1], [10], [1], {}, True, "end"),                                # offset past the dim
])
def test_undefined_specs_are_rejected(b, e, s, masks, offset, field):
    x = np.array([1, 2, 3, 4], np.float32)
    with pytest.raises(StridedSliceError, match="undefined") as info:
        slice_array(from_tflite(b, e, s, offset=offset, **masks), x)
    assert info.value.field == field


def test_int32_min_stride_rejected_as_litert_does():
    """LiteRT rejects an INT32_MIN stride; TF 2.21's interpreter (an older kernel) returns empty."""
    x = np.array([1, 2, 3, 4], np.float32)
    spec = from_tflite([0], [2], [-(2 ** 31)])
    with pytest.raises(StridedSliceError, match="INT32_MIN"):
        slice_array(spec, x)
    theirs = tflite_strided_slice(x, spec)
    assert theirs.ok and theirs.shape == (0,)


def test_values_outside_int32_are_rejected():
    with pytest.raises(StridedSliceError, match="int32") as info:
        from_tflite([2 ** 31], [0], [1])
    assert info.value.field == "begin"


def test_more_than_five_dims_rejected_like_the_interpreter():
    x = np.zeros((1, 1, 1, 1, 1), np.float32)
    spec = from_tflite([0], [0], [1], new_axis_mask=1)
    assert not tflite_strided_slice(x, spec).ok
    with pytest.raises(StridedSliceError, match="at most 5 dims"):
        slice_array(spec, x)


@pytest.fixture(scope="module")
def isolated():
    oracle = IsolatedTFLite()
    yield oracle
    oracle.close()


seen = {"compared": 0, "undefined": 0, "rejected": 0}


@settings(max_examples=300)
@given(st.data())
def test_tflite_matches_interpreter(isolated, data):
    """Random specs (ranks 0-5, offset in 30%): our outcome equals the interpreter's exactly.
    Specs we reject as undefined are not run (the interpreter may crash on them); the script
    scripts/differential.py --flavor tflite runs them too."""
    x, spec = random_case(HypothesisSource(data), "tflite")
    ours = our_outcome(x, spec)
    if not ours.ok and "undefined" in ours.error:
        seen["undefined"] += 1
        return
    theirs = isolated(x, spec)
    seen["compared" if theirs.ok else "rejected"] += 1
    problem = compare_tflite(ours, theirs)
    assert problem is None, f"shape={x.shape} dtype={x.dtype} {spec}: {problem}"


def test_tflite_corpus_covered_all_outcomes():
    if sum(seen.values()):
        assert seen["compared"] >= 40 and seen["undefined"] >= 20 and seen["rejected"] >= 5, seen


def test_compare_tflite_treats_a_crash_as_a_rejection_only():
    ok = Outcome(True, np.zeros(1, np.float32), (1,))
    crash = Outcome(False, error=CRASHED)
    assert compare_tflite(Outcome(False, error="x"), crash) is None
    assert compare_tflite(ok, crash) is not None


def test_onnx_node_form_detected_by_offset_attribute():
    """A StridedSlice node with an ``offset`` attribute is read as TFLite (here the TF reading
    would give 2, TFLite's gives 1)."""
    spec = from_tflite([1], [1], [1], begin_mask=1, shrink_axis_mask=1)
    result = convert(_tflite_onnx_model((4,), spec))
    assert result.ok and result.report.records[0].flavor == "tflite"
    (got,) = make_session(result.model.SerializeToString()).run(None, {"x": np.array([1, 2, 3, 4], np.float32)})
    assert got.shape == () and got == 1


def test_onnx_node_offset_must_be_int():
    model = _tflite_onnx_model((4,), from_tflite([1], [2], [1]))
    node = model.graph.node[0]
    for a in node.attribute:
        if a.name == "offset":
            a.CopyFrom(helper.make_attribute("offset", "yes"))
    result = convert(model)
    assert not result.ok
    assert "offset" in str(result.report.records[0].error)


def test_random_tflite_specs_lower_exactly():
    """Random TFLite specs we accept (ranks 0-5, offset in 30%), as ONNX nodes in the TFLite form,
    converted and run in onnxruntime: equal to our reference, which the corpus above ties to the
    interpreter."""
    import random

    from onnx_slice_tools.oracles import RandomSource
    src = RandomSource(random.Random("tflite-lowering"))
    done = 0
    while done < 60:
        x, spec = random_case(src, "tflite")
        if x.dtype != np.float32 or x.ndim == 0 or spec.n == 0:
            continue
        try:
            want = slice_array(spec, x)
        except StridedSliceError:
            continue
        result = convert(_tflite_onnx_model(x.shape, spec))
        assert result.ok, (spec, x.shape)
        (got,) = make_session(result.model.SerializeToString()).run(None, {"x": x})
        assert got.shape == want.shape and got.tobytes() == want.tobytes(), (spec, x.shape)
        done += 1


def test_runtime_begin_in_the_tflite_form():
    """begin computed at run time (a graph input): same values as the reference for each begin."""
    spec = from_tflite([0, 0], [2, 3], [1, 1], end_mask=2, shrink_axis_mask=1)
    model = _tflite_onnx_model((4, 5), spec)
    model.graph.initializer.remove(next(t for t in model.graph.initializer if t.name == "b"))
    model.graph.input.append(helper.make_tensor_value_info("b", TensorProto.INT32, [2]))
    result = convert(model)
    assert result.ok
    session = make_session(result.model.SerializeToString())
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    for b in ([0, 0], [3, 1], [-1, 2], [-4, -2]):
        want = slice_array(from_tflite(b, [2, 3], [1, 1], end_mask=2, shrink_axis_mask=1), x)
        (got,) = session.run(None, {"x": x, "b": np.array(b, np.int32)})
        assert got.shape == want.shape and got.tobytes() == want.tobytes(), b
