"""semantics.plan.shape_conflict: the one comparison of two shapes, each caller with its rule."""

from onnx_slice_tools.rewrite.core import shape_disagreement
from onnx_slice_tools.semantics.plan import shape_conflict
from onnx_slice_tools.verification.lowerings import declared_conflict


def differ(a, b):
    return f"{a} vs {b}" if a != b else None


def test_rank_then_the_first_conflicting_dim():
    assert shape_conflict((1, 2), (1, 2, 3), differ) == "rank 2 != 3"
    assert shape_conflict((1, 2), (1, 2, 3), differ, "planned ") == "rank 2 != planned 3"
    assert shape_conflict((1, 5, 7), (1, 6, 8), differ) == "dim 1: 5 vs 6"
    assert shape_conflict((1, "N"), (1, "N"), differ) is None


def test_unknown_rank_conflicts_with_nothing():
    assert shape_conflict(None, (1,), differ) is None
    assert shape_conflict((1,), None, differ) is None


def test_each_callers_rule():
    """A declared number where the derived shape has none is a disagreement for the rewrite's
    input check; for the declared output against the plan only two different numbers are."""
    assert shape_disagreement((2, 3), (2, "N")) == "dim 1: declared 3, not derivable"
    assert shape_disagreement((2, 3), (2, 4)) == "dim 1: 3 != 4"
    assert declared_conflict((2, 3), (2, "N")) is None
    assert declared_conflict((2, 3), (2, 4)) == "dim 1: declared 3 != planned 4"
    assert declared_conflict((2, "unk__7"), (2, 4)) is None
