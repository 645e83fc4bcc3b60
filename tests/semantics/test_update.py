"""Examples of the slice-update family's semantics (semantics/update.py), as measured on
TensorFlow 2.21 and LiteRT (test_update_differential.py runs them against the runtimes)."""

from __future__ import annotations

import numpy as np
import pytest

from onnx_slice_tools.errors import StridedSliceError
from onnx_slice_tools.semantics import update as U
from onnx_slice_tools.semantics.spec import from_tf

X = np.arange(10, dtype=np.float32)
UPD = np.array([100, 101], np.float32)


@pytest.mark.parametrize("start, at", [(-5, 0), (0, 0), (3, 3), (8, 8), (9, 8), (100, 8), (-(2 ** 31), 0),
                                       (2 ** 40, 8)])
def test_starts_are_clamped_not_wrapped(start, at):
    dtype = np.int64 if abs(start) >= 2 ** 31 else np.int32
    out = U.dynamic_update_slice(X, UPD, np.array([start], dtype))
    expected = X.copy()
    expected[at:at + 2] = UPD
    assert out.tobytes() == expected.tobytes()


@pytest.mark.parametrize("update, indices, field", [
    (np.zeros(11, np.float32), np.array([0], np.int32), "update"),        # larger than x
    (np.zeros((1, 2), np.float32), np.array([0], np.int32), "update"),    # another rank
    (UPD, np.array([0, 0], np.int32), "indices"),                         # wrong length
    (UPD, np.array(0, np.int32), "indices"),                              # not a vector
    (UPD, np.array([0], np.uint8), "indices"),                            # not int32/int64
])
def test_rejected_like_the_runtimes(update, indices, field):
    with pytest.raises(StridedSliceError) as info:
        U.dynamic_update_slice(X, update, indices)
    assert info.value.field == field


def test_empty_update_returns_input():
    out = U.dynamic_update_slice(X, np.zeros(0, np.float32), np.array([5], np.int32))
    assert out.tobytes() == X.tobytes() and out is not X


def test_plan_names_the_narrow_axes():
    plan = U.update_plan((2, "heads", 16, 8), (2, "heads", 1, 8), np.array([0, 0, 5, 0], np.int64))
    assert plan.narrow == (2,) and plan.starts is None  # a symbolic dim: no static starts
    plan = U.update_plan((2, 4, 16, 8), (2, 4, 1, 8), np.array([0, 0, 99, 0], np.int64))
    assert plan.narrow == (2,) and plan.starts == (0, 0, 15, 0)


def test_dynamic_slice_is_a_clamped_read():
    assert U.dynamic_slice(X, np.array([-3], np.int32), np.array([2], np.int32)).tolist() == [0, 1]
    assert U.dynamic_slice(X, np.array([9], np.int32), np.array([2], np.int32)).tolist() == [8, 9]
    with pytest.raises(StridedSliceError):
        U.dynamic_slice(X, np.array([0], np.int32), np.array([11], np.int32))


@pytest.mark.parametrize("shape, ok", [((), True), ((2,), True), ((2, 1), True), ((1, 1, 2), True),
                                       ((1, 2, 2), True), ((3,), False), ((2, 3), False), ((2, 1, 2), False),
                                       ((2, 2, 1), False)])
def test_strided_slice_update_value_broadcasts(shape, ok):
    x = np.zeros((4, 4), np.float32)
    value = np.arange(1, 1 + int(np.prod(shape)), dtype=np.float32).reshape(shape)
    spec = from_tf([0, 0], [2, 2], [1, 1])
    if not ok:
        with pytest.raises(StridedSliceError, match="Cannot broadcast"):
            U.strided_slice_update(x, spec, value)
        return
    out = U.strided_slice_update(x, spec, value)
    expected = x.copy()
    expected[:2, :2] = np.broadcast_to(value.reshape(value.shape[-2:]) if value.ndim > 2 else value, (2, 2))
    assert out.tobytes() == expected.tobytes()


def test_strided_slice_update_empty_slice_ignores_value():
    x = np.zeros((2, 2), np.float32)
    assert U.strided_slice_update(x, from_tf([1], [1], [1]), np.ones((5, 5), np.float32)).tobytes() == x.tobytes()


def test_strided_slice_grad_needs_the_exact_shape():
    spec = from_tf([0, 0], [2, 2], [1, 1])
    out = U.strided_slice_grad([3, 3], spec, np.ones((2, 2), np.float32))
    assert out.sum() == 4 and out[:2, :2].all()
    with pytest.raises(StridedSliceError, match="shape of dy"):
        U.strided_slice_grad([3, 3], spec, np.ones((2,), np.float32))
    with pytest.raises(StridedSliceError, match="non-zero"):
        U.strided_slice_grad([3], from_tf([0], [1], [0]), np.ones((1,), np.float32))
