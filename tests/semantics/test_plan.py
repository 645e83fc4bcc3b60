"""The canonical plan: roles, precedence, unknown dims and unknown rank, errors."""

from __future__ import annotations

import numpy as np
import pytest

from onnx_slice_tools import StridedSliceError, from_index_expr, from_openvino, from_tf, make_plan
from onnx_slice_tools.semantics.plan import ALL, INDEX, NEW, RANGE, REST


def test_plan_static_layout():
    p = make_plan(from_index_expr("x[1, 2:4, None, ..., :-3:-1, :]"), (5,) * 6)
    assert [a.kind for a in p.axes] == [INDEX, RANGE, ALL, ALL, RANGE, RANGE]
    assert p.removed_axes == (0,)
    assert p.inserted_axes == (1,)
    assert p.output_shape == (2, 1, 5, 5, 2, 5)
    rev = p.axes[4]
    assert (rev.start, rev.size, rev.stride) == (4, 2, -1)


def test_plan_symbolic_dims():
    p = make_plan(from_index_expr("x[:, 0, ::-1, 1:3]"), ("N", None, "W", "C"))
    assert p.output_shape == ("N", "W", None)
    assert p.axes[0].is_identity and not p.axes[2].is_identity
    assert p.axes[1].start is None  # index 0 on an unknown dim: checked at run time


def test_plan_unknown_rank_uses_negative_axes():
    p = make_plan(from_index_expr("x[0, ..., 1:, None, -1]"), None)
    assert [a.axis for a in p.axes] == [0, -2, -1]
    assert [o.kind for o in p.outputs] == [REST, "axis", NEW]
    assert p.inserted_axes == (-1,)
    assert p.output_shape is None


def test_plan_notes_precedence():
    p = make_plan(from_tf([0, 0], [1, 1], [1, 1], ellipsis_mask=1, new_axis_mask=1 | 2,
                          shrink_axis_mask=2 | 16), (3, 4))
    assert any("ellipsis_mask wins" in n for n in p.notes)
    assert any("new_axis_mask wins over shrink" in n for n in p.notes)
    assert any(">= len(begin)" in n for n in p.notes)
    assert p.output_shape == (3, 4, 1)


@pytest.mark.parametrize("expr, shape, match", [
    ("x[::0]", (3,), "strides\\[0\\]: must be non-zero"),
    ("x[5]", (3,), "out of bounds"),
    ("x[-4]", (3,), "out of bounds"),
    ("x[0, 0]", (3,), "index out of range"),
    ("x[0]", (), "scalar"),
])
def test_tf_errors(expr, shape, match):
    with pytest.raises(StridedSliceError, match=match) as info:
        make_plan(from_index_expr(expr), shape)
    assert isinstance(info.value, ValueError)


def test_tf_shrink_with_negative_stride():
    with pytest.raises(StridedSliceError, match="positive stride") as info:
        make_plan(from_tf([1], [2], [-1], shrink_axis_mask=1), (3,))
    assert info.value.index == 0 and info.value.field == "strides"


def test_tf_multiple_ellipses_even_beyond_len():
    with pytest.raises(StridedSliceError, match="multiple ellipses"):
        make_plan(from_tf([0], [1], [1], ellipsis_mask=0b101), (3,))


def test_errors_name_index_and_field():
    with pytest.raises(StridedSliceError) as info:
        make_plan(from_index_expr("x[:, 7]"), (2, 3))
    err = info.value
    assert (err.index, err.field) == (1, "begin")
    assert str(err).startswith("begin[1]: ")
    assert "node 'n1'" in str(err.in_context(node="n1", path="m.onnx"))


def test_lengths_must_match():
    with pytest.raises(StridedSliceError, match="same length"):
        make_plan(from_tf([0, 1], [1], [1]), (3,))


@pytest.mark.parametrize("begin, strides, new_axis, shrink, ok, shape, ellipsis", [
    ([0], [0], [0, 0, 0], [1, 1, 1], True, (), [0, 1, 0]),  # an ellipsis bit past len(begin) skips the check
    ([0, 0], [1, 1], [0, 0], [1, 0], True, (), [0, 1]),
    ([0, 0, 0], [1, 1, 1], [0, 0, 0], [1, 0, 1], False, None, [0, 1, 0]),
] + [case + (None,) for case in [
    ([0], [1], [0, 1], [1, 0], True, ()),          # a stray new_axis bit past len(begin) lets it through
    ([-1], [0], [0, 1], [1, 0], True, ()),         # begin -1 and stride 0 too: the scalar is read as [1]
    ([1], [1], [0, 1], [1, 0], False, None),       # ... and 1 is out of range for [1]
    ([0, 0], [1, 1], [1, 0, 1], [0, 1, 0], True, (1,)),
    ([0, 0], [1, 1], [0, 0, 1, 1], [1, 1, 0, 0], False, None),  # two real indices: rejected
    ([0], [1], [0, 1], [0, 0], False, None),       # a range index on a scalar: rejected
    ([0], [1], [0, 0], [1, 0], False, None),       # no stray bit: the usual rank check rejects it
]])
def test_openvino_shrink_of_a_scalar(begin, strides, new_axis, shrink, ok, shape, ellipsis):
    """OpenVINO's rank check counts new_axis bits even past len(begin) and is skipped when any
    ellipsis bit is set; when it passes, a single
    shrink index on a scalar input keeps the scalar (found by the differential tests)."""
    from helpers import assert_matches_runtime
    n = len(new_axis)
    spec = from_openvino(begin, [1] * len(begin), strides, begin_mask=[0] * n, new_axis_mask=new_axis,
                         shrink_axis_mask=shrink, ellipsis_mask=ellipsis or ())
    assert_matches_runtime(np.array(3.0, np.float32), spec, expected_shape=shape, rejected=not ok)


@pytest.mark.parametrize("spec", [
    from_tf(None, None, None, runtime_length=2, shrink_axis_mask=1),  # index given at run time
    from_tf([0, 1], [3, 4], None, runtime_length=2),                  # strides given at run time
])
def test_apply_plan_refuses_a_plan_with_run_time_values(spec):
    from onnx_slice_tools import apply_plan
    x = np.arange(12).reshape(3, 4)
    with pytest.raises(ValueError, match="given at run time"):
        apply_plan(make_plan(spec, x.shape), x)


def test_memoized_axes_keep_the_callers_values_and_errors():
    """The per-axis plans are memoized (plan._axis_plan): a numpy integer and an int of one value
    stay apart (a plan holds what its caller passed), a rejection raises every time, and a
    plan made after others equals the one made first."""
    from onnx_slice_tools.semantics.spec import SliceSpec
    first = make_plan(SliceSpec("tf", (np.int64(1), 0), (np.int64(3), 4), (1, 1)), (5, 6))
    again = make_plan(SliceSpec("tf", (1, 0), (3, 4), (1, 1)), (5, 6))
    assert type(first.axes[0].begin) is np.int64 and type(again.axes[0].begin) is int
    assert first == again and first.output_shape == (2, 4)
    for _ in range(2):
        with pytest.raises(StridedSliceError, match="out of bounds"):
            make_plan(SliceSpec("tf", (7,), (8,), (1,), shrink_axis_mask=1), (5,))
    bad = SliceSpec("tf", (0,), (4,), (0,))
    for _ in range(2):
        with pytest.raises(StridedSliceError, match="non-zero"):
            make_plan(bad, (5,))
    roles_first = make_plan(SliceSpec("tf", (0, 0, 0), (1, 1, 1), (1, 1, 1), ellipsis_mask=2, shrink_axis_mask=3),
                            (4, 5, 6, 7))
    roles_again = make_plan(SliceSpec("tf", (0, 0, 0), (1, 1, 1), (1, 1, 1), ellipsis_mask=2, shrink_axis_mask=3),
                            (4, 5, 6, 7))
    assert roles_first == roles_again and roles_first.notes == roles_again.notes
    assert any("ellipsis_mask wins" in n for n in roles_first.notes)
