"""Every example of the TensorFlow and OpenVINO specs, checked against the runtimes.

Where a runtime disagrees with its own spec text, the test asserts the runtime
and names what the text says; docs/semantics.md records each difference.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_matches_runtime, data

from onnx_slice_tools import (StridedSliceError, from_index_expr, from_openvino, from_tf, make_plan, strided_slice)

# --------------------------------------------------------------------------- TensorFlow


def test_tf_doc_getitem_example():
    """raw_ops.StridedSlice: foo[1, 2:4, None, ..., :-3:-1, :] on (5,5,5,5,5,5)."""
    spec = from_index_expr("foo[1, 2:4, None, ..., :-3:-1, :]")
    # the encoding the doc gives
    assert spec.begin == (1, 2, 0, 0, 0, 0) and spec.end == (2, 4, 0, 0, -3, 0)
    assert spec.strides == (1, 1, 1, 1, -1, 1)
    assert (spec.begin_mask, spec.end_mask, spec.ellipsis_mask, spec.new_axis_mask,
            spec.shrink_axis_mask) == (48, 32, 8, 4, 1)
    x = data((5,) * 6)
    out = assert_matches_runtime(x, spec, (2, 1, 5, 5, 2, 5))
    np.testing.assert_array_equal(out.values, x[1, 2:4, None, ..., :-3:-1, :])


@pytest.mark.parametrize("ellipsis_mask, expected", [(8, (1, 2, 4, 10)), (4, (1, 2, 3, 4, 10, 1))])
def test_tf_worked_examples_6_3_4_10(ellipsis_mask, expected):
    """new_axis_mask=0b1001, shrink_axis_mask=4 on [6,3,4,10]: the ellipsis bit wins over a
    new_axis bit (ellipsis_mask=8) or a shrink bit (ellipsis_mask=4) on the same index."""
    spec = from_tf([0, 0, 0, 0], [1, 2, 3, 4], [1, 1, 1, 1], new_axis_mask=0b1001,
                   shrink_axis_mask=4, ellipsis_mask=ellipsis_mask)
    assert_matches_runtime(data((6, 3, 4, 10)), spec, expected)


@pytest.mark.parametrize("expr, shape, same_as, expected", [
    ("foo[5:,:,:3]", (7, 8, 9), "foo[5:7,0:8,0:3]", (2, 8, 3)),
    ("foo[::-1]", (8,), None, (8,)),
    ("foo[3:5,...,4:5]", (10, 3, 3, 10), "foo[3:5,:,:,4:5]", (2, 3, 3, 1)),
    ("foo[3:5,...]", (10, 3, 3, 10), "foo[3:5,:,:,:]", (2, 3, 3, 10)),
    ("foo[3:5,4]", (10, 8), None, (2,)),
    ("foo[3:5,4:5]", (10, 8), None, (2, 1)),
    ("foo[...]", (3, 4), None, (3, 4)),
    # The doc says foo[:, ...] on (3, 4) "produces a (1, 3, 4) tensor"; the runtime keeps (3, 4)
    # (the doc means foo[tf.newaxis, ...]).
    ("foo[:, ...]", (3, 4), None, (3, 4)),
    ("foo[tf.newaxis, ...]", (3, 4), None, (1, 3, 4)),
])
def test_tf_doc_examples(expr, shape, same_as, expected):
    x = data(shape)
    out = assert_matches_runtime(x, from_index_expr(expr), expected)
    if same_as:
        np.testing.assert_array_equal(out.values, assert_matches_runtime(x, from_index_expr(same_as)).values)


def test_tf_reverse_begin_below_zero_is_empty():
    """x[-5::-1] on dim 4: TF clamps the begin to "before 0" -> empty (OpenVINO/ONNX: 1 element)."""
    x = data((4,))
    assert_matches_runtime(x, from_index_expr("x[-5::-1]"), (0,))
    assert_matches_runtime(x, from_index_expr("x[-5::-1]", flavor="openvino"), (1,))


# --------------------------------------------------------------------------- OpenVINO StridedSlice-1

def _ov(begin, end, strides, **masks):
    return from_openvino(begin, end, strides, **masks)


def test_ov_example_basic_strides():
    """array[0:4, 1:4, 0:4:2, 1:4:2, 3:0:-1, 3:0:-2] on a [4]*6 array.

    The spec prints 4 (element ids [3, 2, 1, 0]) for 3:0:-1; the runtime gives 3 ([3, 2, 1]):
    end 0 is exclusive."""
    spec = _ov([0, 1, 0, 1, 3, 3], [4, 4, 4, 4, 0, 0], [1, 1, 2, 2, -1, -2])
    x = data((4,) * 6)
    out = assert_matches_runtime(x, spec, (4, 3, 2, 2, 3, 2))
    np.testing.assert_array_equal(out.values, x[0:4, 1:4, 0:4:2, 1:4:2, 3:0:-1, 3:0:-2])


def test_ov_example_clamping():
    """begin [1234, 2], end [1234, 4321], stride [1, -1] on [2, 2].

    The spec prints [1, 1] ("element ids: [2]" on axes of size 2); the runtime clamps both
    intervals to empty: [0, 0]."""
    assert_matches_runtime(data((2, 2)), _ov([1234, 2], [1234, 4321], [1, -1]), (0, 0))


def test_ov_example_negative_end():
    """array[0:2, 0:2, 0:-1] on [2, 3, 4] -> [2, 2, 3]."""
    assert_matches_runtime(data((2, 3, 4)), _ov([0, 0, 0], [2, 2, -1], [1, 1, 1]), (2, 2, 3))


def test_ov_example_begin_end_mask():
    """array[1:, :, ::-1] on [2, 3, 4], with the XML's masks.

    As written (begin_mask="0,1,1", new_axis_mask="0,0,0,0,0", shrink_axis_mask="0,0") the
    mask lengths differ and the runtime rejects the node.  With equal lengths the last axis
    is [1, 3, 4]: the spec prints 3 (ids [3, 2, 1]) but end_mask in reverse includes element 0."""
    written = _ov([1, 1, 123], [0, 0, 2], [1, 1, -1], begin_mask="0,1,1", end_mask="1,1,1",
                  new_axis_mask="0,0,0,0,0", shrink_axis_mask="0,0", ellipsis_mask="0")
    x = data((2, 3, 4))
    assert_matches_runtime(x, written, rejected=True)
    with pytest.raises(StridedSliceError, match="as long as begin_mask"):
        make_plan(written, x.shape)
    fixed = _ov([1, 1, 123], [0, 0, 2], [1, 1, -1], begin_mask="0,1,1", end_mask="1,1,1")
    out = assert_matches_runtime(x, fixed, (1, 3, 4))
    np.testing.assert_array_equal(out.values, x[1:, :, ::-1])


def test_ov_example_new_axis_mask():
    """array[np.newaxis, 0:2, np.newaxis, 0:4] on [2, 4] -> [1, 2, 1, 4]."""
    spec = _ov([1234, 0, -1, 0], [1234, 2, 9876, 4], [132, 1, 241, 1], begin_mask="0,0,0,0",
               end_mask="0,0,0,0", new_axis_mask="1,0,1,0", shrink_axis_mask="0,0,0,0",
               ellipsis_mask="0,0,0,0")
    x = data((2, 4))
    out = assert_matches_runtime(x, spec, (1, 2, 1, 4))
    np.testing.assert_array_equal(out.values, x[np.newaxis, 0:2, np.newaxis, 0:4])


def test_ov_example_shrink_axis_mask():
    """array[0:1, 0, 0:384, 0:640, 0:8] on [1, 2, 384, 640, 8] -> [1, 384, 640, 8].

    The spec says begin must equal end on a shrink axis; here end is 0 = begin and the runtime
    simply ignores end (see test_ov_shrink_ignores_end)."""
    spec = _ov([0, 0, 0, 0, 0], [1, 0, 384, 640, 8], [1, 1, 1, 1, 1], begin_mask="0,0,0,0,0",
               end_mask="0,0,0,0,0", new_axis_mask="0,0,0,0,0", shrink_axis_mask="0,1,0,0,0",
               ellipsis_mask="0,0,0,0,0")
    x = data((1, 2, 384, 640, 8), np.int8)
    out = assert_matches_runtime(x, spec, (1, 384, 640, 8))
    np.testing.assert_array_equal(out.values, x[0:1, 0, 0:384, 0:640, 0:8])


def test_ov_shrink_ignores_end_and_stride():
    """The spec: "begin MUST EQUAL end" on a shrink axis.  The runtime uses begin only."""
    x = data((3, 4))
    for end, stride in [(0, 1), (3, 1), (-7, -2), (2, 0)]:
        out = assert_matches_runtime(x, _ov([1], [end], [stride], shrink_axis_mask=[1],
                                            begin_mask=[0], end_mask=[0], new_axis_mask=[0],
                                            ellipsis_mask=[0]), (4,))
        np.testing.assert_array_equal(out.values, x[1])


def _shape_only(shape, spec):
    """Inputs too large to materialise: compare plan shapes with OpenVINO shape inference."""
    import openvino as ov
    import openvino.opset1 as ops
    from onnx_slice_tools.verification.oracles import _ov_masks
    try:
        node = ops.strided_slice(ops.parameter(list(shape), ov.Type.f32), np.array(spec.begin),
                                 np.array(spec.end), np.array(spec.strides), **_ov_masks(spec))
    except Exception:
        theirs = None
    else:
        theirs = tuple(d.get_length() for d in node.get_output_partial_shape(0))
    try:
        ours = make_plan(spec, shape).output_shape
    except StridedSliceError:
        ours = None
    assert ours == theirs
    return ours


def test_ov_example_ellipsis():
    """array[0:4, ..., 0:5] "on a 10D array": the XML lists 12 input dims; the ellipsis covers 10."""
    spec = _ov([0, 0, 0], [4, 0, 5], [1, -1, 1], begin_mask="0,0,0", end_mask="0,0,0",
               new_axis_mask="0,0,0", shrink_axis_mask="0,0,0", ellipsis_mask="0,1,0")
    assert _shape_only((10,) * 12, spec) == (4,) + (10,) * 10 + (5,)
    assert_matches_runtime(data((6, 2, 3, 7)), spec, (4, 2, 3, 5))


def test_ov_example_ellipsis_unequal_masks():
    """array[2:, ..., np.newaxis, :10] with masks of lengths 4, 4, 3, 1, 2.

    As written the runtime rejects it (mask lengths differ).  With equal lengths, on the XML's
    12-dim input the ellipsis covers 10 dims and the output has 13 dims; the XML prints 11
    ("8 = 10 - (4 - 1 - 1)" counts a 10-dim input) and its :10 axis as 5 (end is 5)."""
    written = _ov([2, 1, 10, 10], [123, 1, 10, 5], [1, -1, 1, 1], begin_mask="0,0,1,1",
                  end_mask="1,1,0,0", new_axis_mask="0,0,1", shrink_axis_mask="0", ellipsis_mask="0,1")
    assert _shape_only((10,) * 12, written) is None
    fixed = _ov([2, 1, 10, 10], [123, 1, 10, 5], [1, -1, 1, 1], begin_mask="0,0,1,1",
                end_mask="1,1,0,0", new_axis_mask="0,0,1,0", shrink_axis_mask="0,0,0,0",
                ellipsis_mask="0,1,0,0")
    assert _shape_only((10,) * 12, fixed) == (8,) + (10,) * 10 + (1, 5)
    assert _shape_only((10,) * 10, fixed) == (8,) + (10,) * 8 + (1, 5)
    assert_matches_runtime(data((10, 3, 7)), fixed, (8, 3, 1, 5))


def test_ov_begin_equals_end_is_empty():
    """The spec: "If begin[i] == end[i], only a single element ... is added".  The runtime: none."""
    assert_matches_runtime(data((5,)), _ov([2], [2], [1]), (0,))
    assert_matches_runtime(data((5,)), _ov([2], [2], [-1]), (0,))


def test_ov_end_mask_reverse_includes_first_element():
    """The spec: end_mask in reverse sets end to 0, "which does not allow slicing inclusively
    with the first value".  The runtime includes element 0."""
    out = assert_matches_runtime(data((4,)), _ov([3], [0], [-1], begin_mask=[0], end_mask=[1]), (4,))
    np.testing.assert_array_equal(out.values, [3, 2, 1, 0])


# --------------------------------------------------------------------------- OpenVINO Slice-8

SLICE8 = [  # (data shape, start, stop, step, axes, expected output or shape)
    ((10,), [1], [8], [1], [0], [1, 2, 3, 4, 5, 6, 7]),
    ((10,), [1], [8], [1], None, [1, 2, 3, 4, 5, 6, 7]),
    ((10,), [1], [8], [2], [0], [1, 3, 5, 7]),
    ((10,), [-100], [100], [1], [0], list(range(10))),
    ((10,), [9], [-11], [-1], [0], list(range(9, -1, -1))),
    ((10,), [9], [0], [-1], [0], list(range(9, 0, -1))),
    ((10,), [9], [-10], [-1], [0], list(range(9, 0, -1))),
    ((10,), [9], [-11], [-2], [0], [9, 7, 5, 3, 1]),
    ((10,), [100], [-100], [-1], [0], list(range(9, -1, -1))),
    ((2, 5), [0, 1], [2, 4], [1, 2], [0, 1], [[1, 3], [6, 8]]),
    ((20, 10, 5), [0, 0, 0], [4, 10, 5], [1, 1, 1], [0, 1, 2], (4, 10, 5)),
    ((20, 10, 5), [0, 0], [4, 10], [1, 1], [0, 1], (4, 10, 5)),
]


@pytest.mark.parametrize("shape, start, stop, step, axes, expected", SLICE8)
def test_ov_slice8_examples(shape, start, stop, step, axes, expected):
    """Slice-8's examples, as an OpenVINO-flavour StridedSlice over the same axes, and through
    OpenVINO's own Slice-8."""
    import openvino as ov
    import openvino.opset8 as ops8
    x = data(shape, np.int64)
    axes = list(range(len(start))) if axes is None else axes
    rank = len(shape)
    begin, end, strides = [0] * rank, [0] * rank, [1] * rank
    bmask, emask = [1] * rank, [1] * rank
    for a, b, e, s in zip(axes, start, stop, step):
        begin[a], end[a], strides[a], bmask[a], emask[a] = b, e, s, 0, 0
    spec = from_openvino(begin, end, strides, begin_mask=bmask, end_mask=emask)
    ours = strided_slice(x, begin, end, strides, begin_mask=bmask, end_mask=emask, flavor="openvino")
    assert_matches_runtime(x, spec)
    node = ops8.slice(ops8.constant(x), np.array(start), np.array(stop), np.array(step), np.array(axes))
    out = [ov.Tensor(ov.Type.i64, ov.Shape([0]))]
    assert node.evaluate(out, [ov.Tensor(x), ov.Tensor(np.array(start)), ov.Tensor(np.array(stop)),
                               ov.Tensor(np.array(step)), ov.Tensor(np.array(axes))])
    np.testing.assert_array_equal(out[0].data, ours)
    if isinstance(expected, tuple):
        assert ours.shape == expected
    else:
        np.testing.assert_array_equal(ours, np.array(expected))
