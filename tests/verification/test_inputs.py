"""The one random-input generator (verification/inputs.py)."""

import ml_dtypes
import numpy as np

from onnx_slice_tools.verification.inputs import SMALL_INTS, random_values


def test_integers_stay_in_the_inclusive_range():
    rng = np.random.default_rng(0)
    x = random_values(rng, (400,), np.int64, ints=(-2, 5))
    assert x.dtype == np.int64 and x.min() == -2 and x.max() == 5
    y = random_values(rng, (400,), np.uint8)
    assert (y.min(), y.max()) == SMALL_INTS
    z = random_values(rng, (64,), ml_dtypes.int4, ints=(-3, 3))
    assert z.dtype == np.dtype(ml_dtypes.int4) and -3 <= int(z.astype(np.int8).min()) <= int(z.astype(np.int8).max()) <= 3


def test_every_kind_of_dtype_and_a_0d_shape():
    rng = np.random.default_rng(1)
    assert random_values(rng, (), np.float32).shape == ()
    assert random_values(rng, (), np.int32).shape == ()
    b = random_values(rng, (50,), np.bool_)
    assert b.dtype == np.bool_ and b.any() and not b.all()
    s = random_values(rng, (2, 3), np.dtype(object))
    assert s.shape == (2, 3) and len(set(s.ravel())) == 6
    c = random_values(rng, (8,), np.complex64)
    assert c.dtype == np.complex64 and np.all(c.imag != 0)


def test_floats_are_float32_normals_cast_once():
    a = random_values(np.random.default_rng(2), (1000,), np.float16)
    b = np.random.default_rng(2).standard_normal(1000).astype(np.float32).astype(np.float16)
    assert a.dtype == np.float16 and a.tobytes() == b.tobytes()  # pure data movement: bitwise is right
    assert 0.8 < float(np.std(a.astype(np.float32))) < 1.2
