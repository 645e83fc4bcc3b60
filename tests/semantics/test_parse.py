"""Parsing: TF bit fields, OpenVINO lists and IR strings, Python index expressions."""

from __future__ import annotations

import pytest

from onnx_slice_tools import StridedSliceError, from_index_expr, from_openvino, from_tf, parse_openvino_mask
from onnx_slice_tools.cli.describe import encodings, index_notation


@pytest.mark.parametrize("text, expected", [
    ("0,1,1", (0, 1, 1)), ("0, 1, 1", (0, 1, 1)), ("", ()), ("  ", ()), ("1", (1,)),
    ([0, 1], (0, 1)), ((1,), (1,)), (None, ()), (b"1, 0", (1, 0)),
])
def test_openvino_mask_forms(text, expected):
    assert parse_openvino_mask(text) == expected


@pytest.mark.parametrize("bad", ["0,2", "a,b", [0, 3], [True], "1;0", 5])
def test_openvino_mask_rejects_values(bad):
    with pytest.raises(StridedSliceError):
        parse_openvino_mask(bad, "begin_mask")


def test_openvino_spec_keeps_mask_lengths():
    spec = from_openvino([0, 1], [2, 3], None, begin_mask="0, 1", end_mask="", ellipsis_mask=[0, 0, 0])
    assert spec.strides == (1, 1)
    assert spec.mask_lengths == (2, 0, 3, 0, 0)
    assert spec.begin_mask == 0b10


def test_tf_masks_are_int32():
    assert from_tf([0], [1], [1], begin_mask=-1).begin_mask == 0xFFFFFFFF
    with pytest.raises(StridedSliceError, match="int32"):
        from_tf([0], [1], [1], begin_mask=2 ** 31)
    with pytest.raises(StridedSliceError, match="integer"):
        from_tf([0], [1], [1], end_mask=1.5)


def test_tf_values_must_be_integers():
    with pytest.raises(StridedSliceError, match="integers"):
        from_tf([0.5], [1], [1])
    with pytest.raises(StridedSliceError, match="1-D"):
        from_tf([[0]], [[1]], [[1]])


@pytest.mark.parametrize("expr", ["x[1, 2:4, None, ..., :-3:-1, :]", "[1, 2:4, None, ..., :-3:-1, :]",
                                  "1, 2:4, None, ..., :-3:-1, :",
                                  "t[1, 2:4, np.newaxis, ..., :-3:-1, :]"])
def test_index_expression_forms(expr):
    spec = from_index_expr(expr)
    assert index_notation(spec) == "x[1, 2:4, None, ..., :-3:-1, :]"


def test_index_expression_encoding_matches_tf_getitem():
    spec = from_index_expr("x[-1, ::2, 3:, :-1]")
    assert spec.begin == (-1, 0, 3, 0) and spec.end == (0, 0, 0, -1) and spec.strides == (1, 2, 1, 1)
    assert spec.shrink_axis_mask == 1 and spec.begin_mask == 0b1010 and spec.end_mask == 0b0110


@pytest.mark.parametrize("bad", ["x[i + 1]", "x[1.5]", "x[f(1)]", "x[", "", "x[::'a']"])
def test_index_expression_errors(bad):
    with pytest.raises(StridedSliceError):
        from_index_expr(bad)


def test_index_expression_openvino_flavor():
    spec = from_index_expr("x[..., 0]", flavor="openvino")
    assert spec.flavor == "openvino" and spec.mask_lengths == (2,) * 5
    assert spec.ellipsis_mask == 1 and spec.shrink_axis_mask == 2


def test_encodings_roundtrip():
    spec = from_index_expr("x[1, 2:4, None, ..., :-3:-1, :]")
    enc = encodings(spec)
    assert enc["tf"]["begin_mask"] == 48
    assert enc["openvino"]["begin_mask"] == [0, 0, 0, 0, 1, 1]
    again = from_openvino(enc["begin"], enc["end"], enc["strides"], **enc["openvino"])
    assert index_notation(again) == index_notation(spec)


def test_names_in_index_expressions_are_runtime_values():
    spec = from_index_expr("x[:, i, None, ..., j:k:-1]")
    assert spec.begin is None and spec.end is None and spec.strides == (1, 1, 1, 1, -1)
    assert spec.n == 5 and spec.shrink_axis_mask == 2 and spec.new_axis_mask == 4
    assert spec.index_notation() == "x[:, ?, None, ..., ?:?:-1]"
    assert from_index_expr("x[::k]").strides is None
    spec = from_index_expr("x[1:n, 2:4]")  # one name makes that whole vector a runtime value
    assert spec.end is None and spec.begin == (1, 2)


@pytest.mark.parametrize("expr", ["x[-i]", "x[+i]", "x[i+1]", "x[1:-n]", "x[--1]", "x[2*3]", "x[i.j]"])
def test_index_expressions_hold_only_literals_and_plain_names(expr):
    """Arithmetic on a run-time value (``-i`` as much as ``i+1``) is computed in the graph
    before a StridedSlice, never held by its spec: refused alike, saying what is accepted."""
    with pytest.raises(StridedSliceError, match="integer literal .*plain name"):
        from_index_expr(expr)


def test_signed_literals_are_integers():
    assert from_index_expr("x[-1, +2]").begin == (-1, 2)


@pytest.mark.parametrize("expr", ["x[99999999999999999999]", "x[:-99999999999999999999]",
                                  "x[::9223372036854775808]", "x[-9223372036854775809:]"])
def test_index_beyond_int64_is_refused(expr):
    with pytest.raises(StridedSliceError, match="int64"):
        from_index_expr(expr)


def test_int64_extremes_are_kept():
    assert from_index_expr("x[-9223372036854775808:9223372036854775807]").end == (2 ** 63 - 1,)


@pytest.mark.parametrize("values", [[2 ** 63], [-(2 ** 63) - 1]])
def test_spec_vectors_beyond_int64_are_refused(values):
    with pytest.raises(StridedSliceError, match="int64"):
        from_tf(values, [1], [1])


def test_a_bare_name_is_not_an_index_expression():
    with pytest.raises(StridedSliceError, match="no subscript"):
        from_index_expr("x")


@pytest.mark.parametrize("depth", [5000, 100_000])
def test_deeply_nested_expressions_are_one_error(depth):
    with pytest.raises(StridedSliceError, match="index expression"):
        from_index_expr("x[" + "-" * depth + "1]")
