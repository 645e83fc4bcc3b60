"""The one random-input generator of the whole-model checks.

Every check that feeds a model random values -- the in-place run (verification/inplace.py), the
model comparison (verification/compare.py, ``verify A B``) and the framework check
(frontends/sources.py) -- draws them here, so the same dtype gets the same kind of value
everywhere: booleans fair coins, integers uniform in the caller's inclusive range (indices in
range of the axis they index, see verification/input_ranges.py), floats standard normals
(drawn as float32, then cast: narrow float types round once from float32), complex numbers two
standard normals, strings distinct.  (The per-rewrite checks feed distinct values in a random
order instead -- ``lowerings.random_input`` -- so that a wrong permutation cannot pass.)
"""

from __future__ import annotations

import numpy as np

#: The integer range of a value nothing says more about: small (integers are often indices).
SMALL_INTS = (0, 3)

_SUB_BYTE_INTS = ("int4", "uint4", "int2", "uint2")


def is_integer(dtype) -> bool:
    """Integer dtypes, the ml_dtypes sub-byte ones (int4, uint2, ...) included."""
    dtype = np.dtype(dtype)
    return dtype.kind in "iu" or dtype.name in _SUB_BYTE_INTS


def random_values(rng: np.random.Generator, shape, dtype, ints: tuple[int, int] = SMALL_INTS) -> np.ndarray:
    """An array of ``shape`` and ``dtype`` of random values (see the module doc); integers
    uniform in ``ints`` = (lo, hi), both inclusive."""
    dtype = np.dtype(dtype)
    shape = tuple(int(d) for d in shape)
    if dtype.kind in "OUS":
        return np.array([f"s{v}" for v in range(int(np.prod(shape)))], dtype=object).reshape(shape)
    if dtype == np.bool_:
        return np.asarray(rng.integers(0, 2, shape)).astype(bool)
    if is_integer(dtype):
        return np.asarray(rng.integers(ints[0], ints[1] + 1, shape)).astype(dtype)
    if dtype.kind == "c":
        return np.asarray(rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return np.asarray(rng.standard_normal(shape)).astype(np.float32).astype(dtype)
