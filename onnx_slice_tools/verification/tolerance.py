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

Quantized outputs (``agree(..., steps=Steps(...))``) are compared in quantization steps instead:
an integer output with a scale and zero point, or a float made by dequantizing one
(verification/quantized.py reads which from the ONNX graph), differs from the expected values
by ``|a - e|`` integer units, or ``|a - e| / scale`` steps.  Two correct integer kernels round
the requantization of each layer differently (fixed-point multipliers, fused or unfused
kernels) and a one-step difference early in a network can grow layer by layer, so a fixed
tolerance is either too strict for deep models or too loose for shallow ones.  The allowance
is calibrated per model and output where the framework can run twice (:func:`steps_rule`: LiteRT's
builtin kernels against its XNNPACK kernels): ``CALIBRATION_K`` times the framework's own
largest disagreement, and never less than ``FLOOR_STEPS`` (one step: the rounding of a single
requantization) -- so where the framework's kernels agree exactly, one step is all that is
allowed.  Integer outputs without a scale stay bitwise unless the framework's kernels
disagree there (then ``CALIBRATION_K`` times their disagreement, in integer units).  Every
value within the allowance is not enough: a systematic shift -- the median difference at
least one step away from 0 (an input zero point off by one, a bias dropped) -- fails unless
the framework's own kernels are shifted as much.
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
#: Quantized outputs: onnxruntime may differ from the framework by this many times the
#: framework's own disagreement between two kernel sets (docs/design.md, "Quantized outputs").
CALIBRATION_K = 2
#: Quantized outputs: the allowance never goes below this many steps (one requantization's rounding).
FLOOR_STEPS = 1


@dataclass(frozen=True)
class Steps:
    """How a quantized output (or an integer output the framework's kernels disagree on) is
    compared: in steps of ``scale`` (None: an integer output's own units), up to ``allowed``
    steps, with a median difference below ``max(1, shift)`` steps (``shift``: ``CALIBRATION_K``
    times the framework's own median disagreement).  ``framework``: the largest
    disagreement measured between the framework's two kernel sets, in steps (None: not
    measured).  Made by :func:`steps_rule`."""

    scale: float | None
    allowed: float
    shift: float = 0.0
    framework: float | None = None

    def describe(self) -> str:
        unit = f"steps of {self.scale:.3g}" if self.scale is not None else "integer units"
        if self.framework is None:
            why = f"floor {FLOOR_STEPS}" if self.scale is not None else "bitwise"
        else:
            why = f"{CALIBRATION_K} x the framework's own {self.framework:.3g}" + \
                (f", floor {FLOOR_STEPS}" if self.scale is not None else "")
        return f"{unit}, allowed {self.allowed:.3g} ({why})"


def steps_rule(scale: float | None, framework: float | None = None, shift: float = 0.0) -> Steps:
    """The allowance of a quantized output whose step is ``scale`` (None: an integer output
    without quantization), given the largest disagreement ``framework`` and the median one
    ``shift`` (both in steps, absolute) measured between the framework's own kernel sets (None:
    not measured): ``max(FLOOR_STEPS, CALIBRATION_K * framework)`` steps; without a scale, only
    ``CALIBRATION_K * framework`` integer units (0: bitwise); a median difference up to
    ``CALIBRATION_K * shift`` steps (at least: below one)."""
    own = 0.0 if framework is None else float(framework)
    floor = FLOOR_STEPS if scale is not None else 0
    return Steps(scale, max(float(floor), CALIBRATION_K * own), CALIBRATION_K * abs(float(shift)), framework)


def calibrated_rtol(dtype, framework: float | None) -> float:
    """The rtol of a float output that is not quantized, given the framework's own largest
    relative disagreement ``framework`` on it (relative to the output's largest magnitude,
    measured between its kernel sets; None: not measured): ``max(default_rtol(dtype),
    CALIBRATION_K * framework)`` -- never looser than the default where the framework is exact.
    For a .tflite with hybrid ("dynamic range") ops, whose kernels quantize activations on the
    fly, the kernel sets are LiteRT's builtin kernels, its XNNPACK kernels and its float kernels
    on the dequantized weights (runtimes.tflite_float_twin)."""
    base = default_rtol(dtype)
    return base if framework is None else max(base, CALIBRATION_K * float(framework))


def relative_difference(expected, actual) -> float | None:
    """``max |actual - expected|`` over the finite values, relative to the largest finite
    magnitude of ``expected`` (if that is 0, of ``actual``, as :func:`agree`; 0.0 when both
    are all 0); None when shapes or dtypes differ or the
    dtype is not float."""
    e, a = np.asarray(expected), np.asarray(actual)
    if e.shape != a.shape or e.dtype != a.dtype or not is_float(e.dtype):
        return None
    x, y = _widen(e), _widen(a)
    keep = np.isfinite(x) & np.isfinite(y)
    scale = float(np.max(np.abs(x[keep]), initial=0.0)) or float(np.max(np.abs(y[keep]), initial=0.0))
    if scale == 0.0:
        return 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.max(np.abs(y[keep] - x[keep]), initial=0.0)) / scale


def step_differences(expected, actual, scale: float | None) -> np.ndarray | None:
    """``actual - expected`` in steps of ``scale`` (integers: in their own units), finite values
    only; None when shapes or dtypes differ."""
    e, a = np.asarray(expected), np.asarray(actual)
    if e.shape != a.shape or e.dtype != a.dtype:
        return None
    if e.dtype.kind in "iub":
        d = a.astype(np.int64) - e.astype(np.int64)
        return d.astype(np.float64)
    x, y = _widen(e), _widen(a)
    keep = np.isfinite(x) & np.isfinite(y)
    with np.errstate(over="ignore", invalid="ignore"):
        d = (y[keep] - x[keep]) / (scale if scale else 1.0)
    return d


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


def agree(expected, actual, *, exact: bool = False, rtol: float | None = None,
          steps: Steps | None = None) -> Agreement:
    """Compare ``actual`` with ``expected`` under the one rule (module docstring).

    ``exact``: the output is pure data movement, so floats too must be byte-identical.
    ``rtol``: relative to the largest finite magnitude; ``default_rtol(dtype)`` when None.
    ``steps``: the output is quantized (or an integer output the framework's own kernels
    disagree on): compared in steps (:class:`Steps`); ``exact`` still wins."""
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
    if steps is not None and not exact and e.dtype.kind != "c" and (floating or e.dtype.kind in "iu"):
        return _agree_in_steps(e, a, steps)
    if exact or not floating:
        how = " (pure data movement: compared bitwise)" if floating else ""
        return Agreement(False, False, f"{_count_unequal(e, a)} of {e.size} values differ{how}")
    tol = default_rtol(e.dtype) if rtol is None else check_rtol(rtol)
    x, y = _widen(e), _widen(a)
    special = _special_values_differ(x, y)
    if special is not None:
        return Agreement(False, False, special)
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


def _special_values_differ(x: np.ndarray, y: np.ndarray) -> str | None:
    """Why two widened float arrays disagree on their NaN or inf values (position or sign), or None:
    every comparison of floats first asks this, then compares the finite values."""
    nan_x, nan_y = np.isnan(x), np.isnan(y)
    if not np.array_equal(nan_x, nan_y):
        return f"NaN at different positions ({int(np.sum(nan_x != nan_y))} of {x.size})"
    inf_x, inf_y = np.isinf(x), np.isinf(y)
    if not np.array_equal(inf_x, inf_y) or not np.array_equal(x[inf_x], y[inf_y]):
        return "inf at different positions or with different signs"
    return None


def _agree_in_steps(e: np.ndarray, a: np.ndarray, steps: Steps) -> Agreement:
    if is_float(e.dtype):
        x, y = _widen(e), _widen(a)
        special = _special_values_differ(x, y)
        if special is not None:
            return Agreement(False, False, special)
    d = step_differences(e, a, steps.scale)
    assert d is not None  # (shape and dtype were compared first)
    if d.size == 0:
        return Agreement(True, False, "within tolerance: no finite values")
    # floats dequantized from the same integers differ by whole steps up to float rounding
    slack = 1e-3 if steps.scale is not None and is_float(e.dtype) else 0.0
    worst = float(np.max(np.abs(d)))
    median = float(np.median(d))
    unit = "steps" if steps.scale is not None else "units"
    if abs(median) >= max(1.0, steps.shift + slack) - slack:
        return Agreement(False, False, f"systematic shift: the median value differs by {median:+.3g} {unit} "
                                       f"({_count_unequal(e, a)} of {e.size} values differ; {steps.describe()})")
    if worst <= steps.allowed + slack:
        return Agreement(True, False, f"within tolerance: max |diff| {worst:.3g} {unit} ({steps.describe()})")
    bad = int(np.sum(np.abs(d) > steps.allowed + slack))
    return Agreement(False, False, f"{bad} of {e.size} values differ by up to {worst:.3g} {unit} "
                                   f"({steps.describe()})")


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
