"""The one float-comparison rule (verification.tolerance.agree)."""

import ml_dtypes
import numpy as np
import pytest

from onnx_slice_tools.verification.tolerance import (
    CALIBRATION_K,
    FLOOR_STEPS,
    Agreement,
    Steps,
    absolute_floor,
    agree,
    calibrated_rtol,
    check_rtol,
    default_rtol,
    is_float,
    relative_difference,
    steps_rule,
)

F32 = np.float32


def test_identical_arrays_are_bitwise():
    x = np.arange(12, dtype=F32).reshape(3, 4) / 7
    r = agree(x, x.copy())
    assert r == Agreement(True, True, "bitwise")


def test_shape_and_dtype_must_match_exactly():
    assert agree(np.zeros((2, 3), F32), np.zeros((2, 4), F32)) == Agreement(False, False, "shape (2, 3) vs (2, 4)")
    r = agree(np.zeros(3, F32), np.zeros(3, np.float64))
    assert not r.ok and r.detail == "dtype float32 vs float64"
    # no broadcasting: np.allclose([], [4.0]) is True, agree is not
    assert np.allclose(np.array([], F32), np.array([4.0], F32))
    assert not agree(np.array([], F32), np.array([4.0], F32)).ok
    assert not agree(np.ones((1, 3), F32), np.ones(3, F32)).ok


def test_empty_arrays_of_equal_shape_agree():
    r = agree(np.zeros((0, 3), F32), np.zeros((0, 3), F32))
    assert r.ok and r.bitwise


def test_relative_to_the_largest_magnitude_not_per_element():
    exp = np.array([1000.0, 1e-6, -3.0], F32)
    got = exp + np.array([0.0, 5e-2, 0.0], F32)   # huge per element at 1e-6, small against 1000
    r = agree(exp, got, rtol=1e-4)
    assert r.ok and not r.bitwise
    assert r.detail.startswith("within tolerance: max |diff| 0.05 = 5e-05 of the largest magnitude 1e+03")
    assert "(allowed 1e-04)" in r.detail
    r = agree(exp, exp + np.array([0.0, 0.2, 0.0], F32), rtol=1e-4)
    assert not r.ok
    assert r.detail.startswith("1 of 3 values differ by up to 0.0002 of the largest magnitude 1e+03 (allowed 1e-04)")


def test_the_bound_is_inclusive_and_rtol_zero_means_equal_values():
    exp = np.array([2.0, 0.5], np.float64)
    assert agree(exp, exp + np.array([0.0, 0.25]), rtol=0.125).ok      # 0.25 == 0.125 * 2
    assert not agree(exp, exp + np.array([0.0, 0.25]), rtol=0.12).ok
    assert not agree(exp, exp + np.array([0.0, 1e-13]), rtol=0).ok
    assert agree(np.array([0.0]), np.array([-0.0]), rtol=0).ok        # equal values, other bits


def test_differences_below_the_absolute_floor_agree():
    # a sigmoid near 0: onnxruntime returns a multiple of 2^-24 where another kernel returns 6e-10
    exp, got = np.array([6.28e-10], F32), np.array([0.0], F32)
    assert absolute_floor(F32) > 6e-8
    r = agree(exp, got)
    assert r.ok and "below the absolute floor" in r.detail
    assert not agree(np.array([1e-6], F32), np.array([1e-5], F32)).ok
    assert absolute_floor(np.float64) < absolute_floor(F32) < absolute_floor(np.float16)
    assert absolute_floor(np.int32) == 0.0


def test_nan_positions_must_match():
    exp = np.array([1.0, np.nan, 3.0], F32)
    assert agree(exp, np.array([1.0, np.nan, 3.0], F32)).ok
    r = agree(exp, np.array([np.nan, 2.0, 3.0], F32))
    assert not r.ok and r.detail.startswith("NaN at different positions")
    # a NaN with another payload is still NaN at that position: agrees, not bitwise
    other = exp.copy()
    other.view(np.uint32)[1] = 0x7FC00001
    r = agree(exp, other)
    assert r.ok and not r.bitwise


def test_inf_positions_and_signs_must_match():
    exp = np.array([np.inf, 1.0, -np.inf], F32)
    assert agree(exp, exp.copy()).ok
    r = agree(exp, np.array([-np.inf, 1.0, -np.inf], F32))
    assert not r.ok and r.detail == "inf at different positions or with different signs"
    assert not agree(exp, np.array([np.inf, np.inf, -np.inf], F32)).ok
    assert not agree(exp, np.array([3e38, 1.0, -np.inf], F32)).ok
    # the scale is the largest *finite* magnitude: inf does not make every difference small
    assert not agree(np.array([np.inf, 1.0], F32), np.array([np.inf, 2.0], F32)).ok


def test_zeros_scale_falls_back_to_actual_and_all_zeros_agree():
    z = np.zeros(4, F32)
    r = agree(z, np.array([0, 0, 1e-3, 0], F32))   # largest |actual| is the scale: off by 100%
    assert not r.ok
    r = agree(z, np.array([0, -0.0, 0, 0], F32))
    assert r.ok and not r.bitwise


def test_non_float_and_exact_are_bitwise():
    a = np.array([1, 2, 3], np.int64)
    r = agree(a, np.array([1, 2, 4], np.int64), rtol=1.0)
    assert r == Agreement(False, False, "1 of 3 values differ")
    assert agree(np.array([True, False]), np.array([True, False])).bitwise
    x = np.array([1.0, 2.0], F32)
    y = np.nextafter(x, F32(3))
    assert agree(x, y).ok
    r = agree(x, y, exact=True)
    assert not r.ok and r.detail == "2 of 2 values differ (pure data movement: compared bitwise)"
    assert not agree(np.array([0.0], F32), np.array([-0.0], F32), exact=True).ok


def test_strings_compare_by_value():
    a = np.array(["ab", "c"], dtype=object)
    assert agree(a, np.array(["ab", "c"], dtype=object)).ok
    r = agree(a, np.array(["ab", "d"], dtype=object))
    assert not r.ok and r.detail == "1 of 2 values differ"


def test_bfloat16_and_float8_compare_as_floats():
    bf = np.dtype(ml_dtypes.bfloat16)
    exp = np.array([1.0, 2.0, 4.0], bf)
    got = np.array([1.0, 2.015625, 4.0], bf)       # one unit in the last place at 2
    assert is_float(bf) and default_rtol(bf) > 0
    r = agree(exp, got)
    assert r.ok and not r.bitwise and "within tolerance" in r.detail
    assert not agree(exp, np.array([1.0, 3.0, 4.0], bf)).ok
    assert not agree(exp, got, exact=True).ok
    f8 = np.dtype(ml_dtypes.float8_e4m3fn)
    assert is_float(f8) and 0 < default_rtol(f8) <= 1
    assert agree(np.array([1.0, np.nan], f8), np.array([1.0, np.nan], f8)).ok
    assert not agree(np.array([1.0, np.nan], f8), np.array([np.nan, 1.0], f8)).ok


def test_complex_compares_both_parts():
    exp = np.array([1 + 1j, 2 - 1j], np.complex64)
    assert agree(exp, exp + np.complex64(1e-6j)).ok
    assert not agree(exp, exp + np.complex64(1j)).ok


def test_default_rtol_per_dtype():
    assert default_rtol(np.float64) < default_rtol(np.float32) < default_rtol(np.float16)
    assert default_rtol(np.float16) < default_rtol(ml_dtypes.bfloat16)
    for t in (np.int32, np.int8, np.bool_, np.uint64):
        assert default_rtol(t) == 0.0
    assert not is_float(np.int32)
    assert not is_float(ml_dtypes.int4) and default_rtol(ml_dtypes.int4) == 0.0
    # the default rtol is used when none is given
    exp = np.array([1.0, 0.0], F32)
    inside = np.array([1.0, default_rtol(F32) * 0.9], F32)
    outside = np.array([1.0, default_rtol(F32) * 1.1], F32)
    assert agree(exp, inside).ok and not agree(exp, outside).ok


@pytest.mark.parametrize("bad", [-1e-3, float("nan"), float("inf"), "x", None])
def test_bad_rtol_is_a_value_error(bad):
    with pytest.raises(ValueError, match="rtol must be"):
        check_rtol(bad)
    if bad is not None:
        with pytest.raises(ValueError, match="rtol must be"):
            agree(np.array([1.0], F32), np.array([2.0], F32), rtol=bad)


def test_defaults_hold_the_measured_kernel_drift_with_a_margin():
    """The largest drifts measured between the frameworks' own kernel sets (docs/benchmarks.md
    section 11, scripts/calibrate_tolerance.py): MediaPipe pose_landmark_full's segmentation
    logits, LiteRT XNNPACK vs builtin kernels (float32); a 1024x1024 MatMul, TensorFlow vs
    onnxruntime (float16, float64).  A default below twice the drift would fail real models."""
    for dtype, drift in ((np.float32, 2.34e-3), (np.float16, 7.63e-4), (np.float64, 1.14e-15)):
        assert default_rtol(dtype) >= 2 * drift, dtype
        exp = np.array([1.0, 0.5], dtype)
        assert agree(exp, exp + np.array([0.0, drift], dtype)).ok, dtype


# --------------------------------------------------------------------------- quantized outputs, in steps

def test_steps_rule_floor_and_calibration():
    assert steps_rule(0.1).allowed == FLOOR_STEPS == 1          # nothing measured: one step
    assert steps_rule(0.1, 0.0).allowed == 1                    # the framework exact: never looser than a step
    assert steps_rule(0.1, 3.0).allowed == CALIBRATION_K * 3    # k x the framework's own disagreement
    assert steps_rule(None).allowed == 0                        # integers without a scale: bitwise
    assert steps_rule(None, 2.0).allowed == CALIBRATION_K * 2   # ... unless the framework's kernels disagree


def test_integer_output_in_steps():
    rng = np.random.default_rng(0)
    e = rng.integers(0, 256, 1000).astype(np.uint8)
    a = e.copy()
    a[::7] = np.clip(e[::7].astype(int) + rng.choice([-1, 1], a[::7].size), 0, 255)
    r = agree(e, a, steps=steps_rule(0.02))
    assert r.ok and not r.bitwise and "1 steps" in r.detail, r.detail
    b = e.copy()
    b[5] = (int(e[5]) + 2) % 256
    assert not agree(e, b, steps=steps_rule(0.02)).ok            # two steps, floor one
    assert agree(e, b, steps=steps_rule(0.02, 1.0)).ok           # the framework itself differs by one: 2 allowed
    assert not agree(e, a, exact=True, steps=steps_rule(0.02)).ok  # pure data movement stays bitwise
    assert not agree(e, a).ok                                    # no step: integers bitwise


def test_systematic_shift_is_reported_not_hidden():
    e = np.arange(10, 200, dtype=np.uint8)
    shifted = (e + 1).astype(np.uint8)
    r = agree(e, shifted, steps=steps_rule(0.02, 5.0))           # within 10 steps, but every value moved
    assert not r.ok and "systematic shift" in r.detail, r.detail
    assert agree(e, shifted, steps=steps_rule(0.02, 5.0, shift=1.0)).ok  # the framework's kernels shifted as much
    assert not agree(e, shifted, steps=Steps(0.02, 10.0)).ok


def test_dequantized_float_output_in_steps_of_its_scale():
    scale = np.float32(0.0235)
    q = np.random.default_rng(1).integers(-128, 128, 500)
    e = (q * scale).astype(np.float32)
    a = ((q + (np.arange(500) % 11 == 0)) * scale).astype(np.float32)   # one step on some values
    assert agree(e, a, steps=steps_rule(float(scale))).ok
    a2 = ((q + 3 * (np.arange(500) % 11 == 0)) * scale).astype(np.float32)
    r = agree(e, a2, steps=steps_rule(float(scale)))
    assert not r.ok and "3 steps" in r.detail, r.detail
    nan = e.copy()
    nan[0] = np.nan
    assert not agree(e, nan, steps=steps_rule(float(scale))).ok
    assert not agree(e, a[:10], steps=steps_rule(float(scale))).ok  # shapes first


def test_float_output_calibrated_on_the_framework_s_own_disagreement():
    """A float output that is not quantized (a hybrid int8 model's, float I/O): k x the
    framework's own relative disagreement, never looser than the default where it is exact."""
    assert calibrated_rtol(F32, None) == default_rtol(F32)            # nothing measured: the default
    assert calibrated_rtol(F32, 0.0) == default_rtol(F32)             # the framework exact: the default
    assert calibrated_rtol(F32, 1e-3) == default_rtol(F32)            # below the default: never tighter
    assert calibrated_rtol(F32, 0.015) == pytest.approx(CALIBRATION_K * 0.015)
    rng = np.random.default_rng(3)
    e = rng.standard_normal(400).astype(F32)
    noisy = (e + 0.017 * np.abs(e).max() * rng.uniform(-1, 1, 400)).astype(F32)
    assert relative_difference(e, noisy) == pytest.approx(0.017, rel=0.05)
    assert not agree(e, noisy).ok                                     # beyond the default 1e-2
    r = agree(e, noisy, rtol=calibrated_rtol(F32, 0.015))
    assert r.ok and "allowed 3e-02" in r.detail, r.detail
    scaled = (e * F32(1.25)).astype(F32)                               # a weight scaled 1.25x
    assert not agree(e, scaled, rtol=calibrated_rtol(F32, 0.015)).ok
    assert relative_difference(e, e[:10]) is None
    assert relative_difference(np.zeros(3, F32), np.ones(3, F32)) == 1.0  # (of the actual's magnitude, as agree)
    assert relative_difference(np.arange(3), np.arange(3)) is None    # integers: not relative
