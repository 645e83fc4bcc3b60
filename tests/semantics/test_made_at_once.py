"""The frozen dataclasses the hot constructors make through ``spec.made_at_once`` (which skips
``__init__``) stay made correctly: no class among them has a ``__post_init__`` (it would not
run), and every instance the pipeline makes has exactly its class's fields, equal to what
``__init__`` makes from the same values."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onnx_slice_tools import StridedSliceError
from onnx_slice_tools.lowering.lower import Lowering, Op, lower
from onnx_slice_tools.rewrite.core import Rewriter, Signature, parse_node
from onnx_slice_tools.semantics.plan import Plan, make_plan
from onnx_slice_tools.semantics.spec import TF, SliceSpec, from_tf, made_at_once

_CLASSES = (SliceSpec, Plan, Op, Lowering, Signature)


@pytest.mark.parametrize("cls", _CLASSES, ids=lambda c: c.__name__)
def test_classes_made_at_once_have_no_post_init(cls):
    assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen
    assert not hasattr(cls, "__post_init__")


def _as_init_makes_it(obj) -> None:
    """``obj`` holds every field of its class (and no other, apart from values a property keeps
    in the instance) and equals the instance ``__init__`` makes of the same values."""
    cls = type(obj)
    names = {f.name for f in dataclasses.fields(cls)}
    assert names <= set(vars(obj))
    extra = set(vars(obj)) - names
    assert all(isinstance(getattr(cls, n, None), (property, object)) and not callable(vars(obj)[n]) for n in extra)
    assert extra <= {n for n in dir(cls) if not n.startswith("__")}, extra  # only kept properties
    assert cls(**{n: getattr(obj, n) for n in names}) == obj


def test_made_at_once_sets_the_fields_given():
    op = made_at_once(Op, op_type="Slice", axes=(1,), starts=(0,), ends=(2,), steps=(1,), shape=())
    assert op == Op("Slice", axes=(1,), starts=(0,), ends=(2,), steps=(1,))


_ints = st.integers(-9, 9)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 4), data=st.data(), masks=st.tuples(*[st.integers(0, 15)] * 4),
       shape=st.lists(st.one_of(st.integers(0, 6), st.just("B")), min_size=1, max_size=4))
def test_pipeline_instances_are_whole(n, data, masks, shape):
    begin, end = data.draw(st.lists(_ints, min_size=n, max_size=n)), data.draw(st.lists(_ints, min_size=n, max_size=n))
    strides = data.draw(st.lists(st.integers(-3, 3).filter(bool), min_size=n, max_size=n))
    b, e, ell, new = masks
    try:
        spec = from_tf(begin, end, strides, begin_mask=b, end_mask=e, ellipsis_mask=ell & -ell, new_axis_mask=new)
        plan = make_plan(spec, tuple(shape))
        low = lower(plan)
    except StridedSliceError:
        return
    _as_init_makes_it(spec)
    _as_init_makes_it(plan)
    _as_init_makes_it(low)
    for op in low.ops:
        _as_init_makes_it(op)


def test_signatures_are_whole():
    core = Rewriter(flavor=TF, opset=17, target=None)
    consts = {"b": (0, 1), "e": (0, 3), "s": (1, 1)}
    sig = core.signature({}, "", lambda flavor: parse_node(["x", "b", "e", "s"], {}, flavor,
                                                          lambda name, field: consts.get(name),
                                                          lambda name: None, core.parse_cache),
                         lambda name: None)
    assert sig.error is None
    _as_init_makes_it(sig)
    _as_init_makes_it(sig.spec)
