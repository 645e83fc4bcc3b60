"""The one rule for comparing two outputs that should be the same tensor.

Every comparison of values computed by two runtimes or two kernels (the framework
check, ``verify ORIGINAL CONVERTED``, the as-shipped run) goes through
:func:`agree`:

- shape and dtype must be equal;
- values of non-float dtypes, and of any dtype with ``exact=True`` (outputs that
  are pure data movement: slices, gathers, reshapes), must be byte-identical
  (strings: equal);
- float values (numpy's and ``ml_dtypes``' bfloat16/float8/float4, widened to
  float64; complex values per real and imaginary part) must have NaN at the same
  positions, +-inf at the same positions with the same signs, and every finite
  difference within ``rtol`` times the output's largest finite magnitude (of the
  expected values; if that is 0, of the actual ones), or within the dtype's
  absolute floor, a few units of its epsilon (the spacing of floats at 1.0).

Why relative to the largest magnitude and not per element: two correct kernels sum
the same products in another order (blocked MatMul, Winograd convolution, fused
multiply-add), and the rounding error of a sum grows with the magnitude of its
terms, not of its result -- an output near 0 of a large sum carries an absolute
error as large as its neighbours'.  A per-element relative tolerance fails such
entries; one scale per output does not.

Why an absolute floor: kernels of sigmoid, tanh and softmax are accurate to an
absolute error near 0 (onnxruntime's sigmoid returns multiples of 2^-24 there, where
another kernel returns 6e-10), so a one-element probability near 0 cannot be held to a
relative bound.  The floor is far below any value a wrong slice produces in an output
whose magnitude is near 1 or above.

``default_rtol`` holds the per-dtype defaults, set above the largest drift measured
between the frameworks' own kernel sets (``scripts/calibrate_tolerance.py``; the
table is in docs/benchmarks.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Default rtol per float dtype name, set with a margin above the largest drift measured between
#: the frameworks' own kernel sets (docs/benchmarks.md, "Float tolerance"; rebuilt by
#: scripts/calibrate_tolerance.py).  float16 and bfloat16 stay above float32 (fewer bits, the
#: same kernels); other narrow float types get ``NARROW_EPS_UNITS`` times their epsilon.
DEFAULT_RTOL = {
    "float64": 1e-12,
    "float32": 1e-2,
    "float16": 5e-2,
    "bfloat16": 1e-1,
}
#: rtol of narrow float types not listed in DEFAULT_RTOL, in units of the type's epsilon.
NARROW_EPS_UNITS = 8
#: The absolute floor, in units of the dtype's epsilon: differences this small always agree.
FLOOR_EPS_UNITS = 8


@dataclass(frozen=True)
class Agreement:
    """The verdict of :func:`agree`.  ``detail`` is one line: "bitwise", "within tolerance: ...",
    or what differs."""

    ok: bool        # shape and dtype equal, and values agree under the rule
    bitwise: bool   # byte-identical
    detail: str


def is_float(dtype) -> bool:
    """True for numpy's floating types and ``ml_dtypes``' (bfloat16, float8_*, float4_* ...)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return True
    if dtype.kind != "V" or dtype.fields is not None:
        return False
    return _ml_finfo(dtype) is not None


def _ml_finfo(dtype: np.dtype):
    try:
        import ml_dtypes  # only arrays of its types get here
    except ImportError:
        return None
    try:
        return ml_dtypes.finfo(dtype)
    except (TypeError, ValueError, KeyError, AttributeError):
        return None


def default_rtol(dtype) -> float:
    """The default relative tolerance of a float dtype (0.0 for other dtypes: compared bitwise)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return default_rtol(np.dtype(f"f{dtype.itemsize // 2}"))
    if not is_float(dtype):
        return 0.0
    if dtype.name in DEFAULT_RTOL:
        return DEFAULT_RTOL[dtype.name]
    if dtype.kind == "f" and dtype.itemsize > 8:   # longdouble
        return DEFAULT_RTOL["float64"]
    info = _ml_finfo(dtype)
    eps = float(info.eps) if info is not None and float(info.eps) > 0 else 1.0
    return min(1.0, NARROW_EPS_UNITS * eps)


def absolute_floor(dtype) -> float:
    """Differences up to this always agree (``FLOOR_EPS_UNITS`` times the float dtype's epsilon;
    0.0 for other dtypes)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return absolute_floor(np.dtype(f"f{dtype.itemsize // 2}"))
    if not is_float(dtype):
        return 0.0
    info = np.finfo(dtype) if dtype.kind == "f" and dtype.itemsize in (2, 4, 8) else _ml_finfo(dtype)
    eps = float(info.eps) if info is not None else 0.0
    return FLOOR_EPS_UNITS * eps


def check_rtol(rtol) -> float:
    """``rtol`` as a float, or ValueError naming what is wrong (a finite number >= 0)."""
    try:
        value = float(rtol)
    except (TypeError, ValueError):
        raise ValueError(f"rtol must be a number, got {rtol!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"rtol must be a finite number >= 0, got {rtol!r}")
    return value


def agree(expected, actual, *, exact: bool = False, rtol: float | None = None) -> Agreement:
    """Compare ``actual`` with ``expected`` under the one rule (module docstring).

    ``exact``: the output is pure data movement, so floats too must be byte-identical.
    ``rtol``: relative to the largest finite magnitude; ``default_rtol(dtype)`` when None."""
    e, a = np.asarray(expected), np.asarray(actual)
    if e.shape != a.shape:
        return Agreement(False, False, f"shape {e.shape} vs {a.shape}")
    if e.dtype != a.dtype:
        return Agreement(False, False, f"dtype {e.dtype} vs {a.dtype}")
    if e.dtype.kind in "OUS":
        same = e.astype(object).tolist() == a.astype(object).tolist()
        return Agreement(same, same, "bitwise" if same else f"{_count_unequal(e, a)} of {e.size} values differ")
    if e.tobytes() == a.tobytes():
        return Agreement(True, True, "bitwise")
    floating = is_float(e.dtype) or e.dtype.kind == "c"
    if exact or not floating:
        how = " (pure data movement: compared bitwise)" if floating else ""
        return Agreement(False, False, f"{_count_unequal(e, a)} of {e.size} values differ{how}")
    tol = default_rtol(e.dtype) if rtol is None else check_rtol(rtol)
    x, y = _widen(e), _widen(a)
    nan_x, nan_y = np.isnan(x), np.isnan(y)
    if not np.array_equal(nan_x, nan_y):
        return Agreement(False, False, f"NaN at different positions ({int(np.sum(nan_x != nan_y))} of {x.size})")
    inf_x, inf_y = np.isinf(x), np.isinf(y)
    if not np.array_equal(inf_x, inf_y) or not np.array_equal(x[inf_x], y[inf_y]):
        return Agreement(False, False, "inf at different positions or with different signs")
    finite = np.isfinite(x)
    fx, fy = x[finite], y[finite]
    scale = float(np.max(np.abs(fx), initial=0.0))
    if scale == 0.0:
        scale = float(np.max(np.abs(fy), initial=0.0))
    with np.errstate(over="ignore", invalid="ignore"):
        diff = np.abs(fx - fy)
    worst = float(np.max(diff, initial=0.0))
    if scale == 0.0:  # both all zeros (signs may differ): equal
        return Agreement(True, False, "within tolerance: max |diff| 0 (all values are 0)")
    floor = absolute_floor(e.dtype)
    allowed = max(tol * scale, floor)
    rel = worst / scale
    if worst <= allowed:
        if worst > tol * scale:
            return Agreement(True, False, f"within tolerance: max |diff| {worst:.2g}, below the absolute floor "
                                          f"{floor:.2g} of {e.dtype} (largest magnitude {scale:.3g})")
        return Agreement(True, False, f"within tolerance: max |diff| {worst:.2g} = {rel:.2g} of the largest "
                                      f"magnitude {scale:.3g} (allowed {_fmt(tol)})")
    bad = int(np.sum(~(diff <= allowed)))
    return Agreement(False, False, f"{bad} of {e.size} values differ by up to {rel:.2g} of the largest "
                                   f"magnitude {scale:.3g} (allowed {_fmt(tol)})")


def _fmt(tol: float) -> str:
    short = f"{tol:.0e}"
    return short if float(short) == tol else f"{tol:.3g}"


def _widen(x: np.ndarray) -> np.ndarray:
    """Float values as float64 (complex: real and imaginary parts side by side); longdouble kept."""
    if x.dtype.kind == "c":
        x = np.stack([x.real, x.imag], axis=-1)
    if x.dtype.kind == "f" and x.dtype.itemsize > 8:
        return x
    return x.astype(np.float64)


def _count_unequal(e: np.ndarray, a: np.ndarray) -> int:
    if e.dtype.kind in "OUS":
        return sum(p != q for p, q in zip(e.ravel().tolist(), a.ravel().tolist()))
    size = e.dtype.itemsize
    if size == 0 or e.size == 0:
        return 0
    eb = np.frombuffer(np.ascontiguousarray(e).tobytes(), np.uint8).reshape(e.size, size)
    ab = np.frombuffer(np.ascontiguousarray(a).tobytes(), np.uint8).reshape(a.size, size)
    return int(np.sum(np.any(eb != ab, axis=1)))
