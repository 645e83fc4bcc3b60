"""verification/records.py: the run's shared plans (records.Plans)."""

from __future__ import annotations

import pytest

from onnx_slice_tools.errors import StridedSliceError
from onnx_slice_tools.semantics.plan import make_plan
from onnx_slice_tools.semantics.spec import SliceSpec
from onnx_slice_tools.verification.records import Plans


def test_plans_share_a_plan_between_equal_specs_and_keep_unequal_ones_apart():
    plans = Plans()
    a, b = SliceSpec("tf", (1, 0), (3, 4), (1, 1)), SliceSpec("tf", (1, 0), (3, 4), (1, 1))
    c = SliceSpec("tf", (1, 0), (3, 4), (1, 2))
    first = plans.plan(a, (5, 6))
    assert plans.plan(b, (5, 6)) is first  # (an equal spec, another object)
    assert plans.plan(a, (5, 7)) is not first and plans.plan(a, (5, 7)) == make_plan(a, (5, 7))
    assert plans.plan(c, (5, 6)) == make_plan(c, (5, 6)) != first
    assert len(plans.plans) == 3


def test_plans_keep_the_error_of_a_spec_the_flavour_rejects():
    plans = Plans()
    bad = SliceSpec("tf", (7,), (8,), (1,), shrink_axis_mask=1)
    for _ in range(2):
        with pytest.raises(StridedSliceError):
            plans.plan(bad, (5,))
    assert len(plans.plans) == 1
