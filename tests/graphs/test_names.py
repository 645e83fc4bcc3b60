"""graphs/names.py: unique names, and an allocator that holds the caller's set."""

from __future__ import annotations

from onnx_slice_tools.graphs.names import NameAllocator


def test_fresh_names_avoid_every_taken_one_and_each_other():
    names = NameAllocator({"a", "a_1"})
    assert [names.fresh("a"), names.fresh("a"), names.fresh("b")] == ["a_2", "a_3", "b"]


def test_holding_takes_the_set_over_and_the_constructor_copies():
    taken = {"x", "x_1"}
    held = NameAllocator.holding(taken)
    assert held.taken is taken
    assert held.fresh("x") == "x_2" and "x_2" in taken
    copied = NameAllocator(taken)
    assert copied.taken is not taken and copied.taken == taken
    assert copied.fresh("y") == "y" and "y" not in taken
