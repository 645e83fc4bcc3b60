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


def _random_spec(rng, rank: int) -> SliceSpec:
    n = int(rng.integers(1, rank + 1))
    begin = tuple(int(v) for v in rng.integers(-9, 9, n))
    end = tuple(int(v) for v in rng.integers(-9, 9, n))
    strides = tuple(int(v) or 1 for v in rng.integers(-3, 4, n))
    masks = {m: int(rng.integers(0, 1 << n)) for m in ("begin_mask", "end_mask")}
    if rng.random() < 0.3:  # (a shrink may index past the dim: the original raises there)
        masks["shrink_axis_mask"] = int(rng.integers(0, 1 << n))
    return SliceSpec("tf", begin, end, strides, **masks)


def test_references_made_together_are_each_ones_own():
    """records.expected_all (the deferred rewrites' references, one pass) gives, for each
    rewrite, what its own ``expected`` gives: the same settling status, or a reference whose
    output is the same bytes -- on random specs over a few data tensors, with specs the
    original rejects at the concrete shape and a data tensor the run did not expose."""
    import types

    import numpy as np

    from onnx_slice_tools.verification.records import SliceTaps, expected_all

    rng = np.random.default_rng(7)
    got = {"x": rng.random((3, 6, 5, 4), dtype=np.float32), "z": rng.integers(0, 99, (7, 2), dtype=np.int64)}
    plans = Plans()
    adapters = []
    for k in range(400):
        data = ("x", "z", "missing")[k % 3] if k % 17 else "missing"
        rank = 4 if data != "z" else 2
        record = types.SimpleNamespace(node=f"ss{k}", graph="main", output_name=f"y{k}", elem_type=1,
                                       index_types={}, index_names=None, data_name=data,
                                       spec=_random_spec(rng, rank))
        adapters.append(SliceTaps(record, plans))
    together = expected_all(adapters, got)
    assert len(together) == len(adapters)
    kinds = set()
    for a, (settled, reference) in zip(adapters, together):
        alone, alone_reference, _ = a.expected(got)
        assert settled == alone, a.node
        if settled is None:
            want, have = alone_reference.value(), reference.value()
            assert have.shape == want.shape and have.dtype == want.dtype and have.tobytes() == want.tobytes()
            assert reference.x is got[a.record.data_name]
            kinds.add("reference")
        else:
            assert reference is None
            kinds.add(str(settled).split(":")[0])
    assert kinds == {"reference", "failed", "skipped"}  # (each path taken)
