"""The parse, plan and lowering in two parts -- what the structure decides (masks, lengths,
shape: worked out once and kept) and the numbers -- give what the one-part computation gives:
the same spec, plan, lowering or error, whatever was kept before.  (spec.SpecMaker,
plan._frame / plan._planned, lower._axis_args, core.attribute_form.)"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onnx_slice_tools import StridedSliceError
from onnx_slice_tools.lowering import lower as lowering
from onnx_slice_tools.rewrite import core
from onnx_slice_tools.semantics import plan as planning
from onnx_slice_tools.semantics.spec import OPENVINO, TF, TFLITE, SpecMaker, from_openvino, from_tf, from_tflite

_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")
_ints = st.integers(-9, 9)


def _outcome(fn, *args, **kwargs):
    """What ``fn`` gives: ("ok", value) or ("error", its one-line message)."""
    try:
        return "ok", fn(*args, **kwargs)
    except StridedSliceError as exc:
        return "error", str(exc)


@st.composite
def _specs(draw):
    """A TF or OpenVINO spec (masks valid or not, lengths equal or not) and an input shape."""
    n = draw(st.integers(1, 4))
    flavor = draw(st.sampled_from((TF, OPENVINO)))
    lengths = [n, n, draw(st.sampled_from((n, n, n + 1)))]
    begin, end, strides = (tuple(draw(st.lists(_ints, min_size=k, max_size=k))) for k in lengths)
    if flavor == TF:
        masks = {m: draw(st.integers(0, (1 << (n + 1)) - 1)) for m in _MASKS}
        spec = _outcome(from_tf, begin, end, strides, **masks)
    else:
        masks = {m: draw(st.lists(st.integers(0, 1), max_size=n)) for m in _MASKS}
        spec = _outcome(from_openvino, begin, end, strides, **masks)
    shape = draw(st.one_of(st.none(), st.lists(st.one_of(st.integers(0, 6), st.sampled_from(("N", None))),
                                               max_size=5).map(tuple)))
    return spec, shape


@settings(max_examples=300)
@given(st.lists(_specs(), min_size=1, max_size=6))
def test_make_plan_with_kept_frames_equals_a_plan_made_from_scratch(cases):
    """Specs of one structure share their frame; every plan (and every error) is what the
    frame made anew gives."""
    for spec, shape in cases:
        if spec[0] != "ok":
            continue
        got = _outcome(planning.make_plan, spec[1], shape)
        frame = _outcome(planning._frame.__wrapped__, *_frame_key(spec[1], shape))
        fresh = frame if frame[0] == "error" else _outcome(planning._planned, spec[1], frame[1])
        assert got == fresh
        if got[0] == "ok":  # (the output shape is the one the plan's own rule computes)
            assert got[1].output_shape == planning.Plan.output_shape.fn(got[1])


def _frame_key(spec, shape):
    shape_t = None if shape is None else planning._dims_of(shape)
    lengths = tuple(None if v is None else len(v) for v in (spec.begin, spec.end, spec.strides))
    return (spec.flavor, spec.begin_mask, spec.end_mask, spec.ellipsis_mask, spec.new_axis_mask,
            spec.shrink_axis_mask, spec.mask_lengths, lengths, spec.runtime_length, shape_t)


@settings(max_examples=200)
@given(st.lists(st.tuples(st.lists(_ints, min_size=2, max_size=2), st.lists(_ints, min_size=2, max_size=2),
                          st.lists(_ints, min_size=2, max_size=2)), min_size=1, max_size=8),
       st.integers(0, 3), st.integers(0, 3), st.integers(0, 3), st.integers(0, 3))
def test_the_openvino_scalar_shrink_checks_each_begin(numbers, begin_mask, new_axis_mask, shrink, ellipsis):
    """The frame keeps the shrink of a scalar input; each spec's begin is checked on its own."""
    for begin, end, strides in numbers:
        spec = from_openvino(begin, end, strides, begin_mask=[begin_mask & 1, begin_mask >> 1],
                             new_axis_mask=[new_axis_mask & 1, new_axis_mask >> 1],
                             shrink_axis_mask=[shrink & 1, shrink >> 1], ellipsis_mask=[ellipsis & 1, 0])
        got = _outcome(planning.make_plan, spec, ())
        frame = _outcome(planning._frame.__wrapped__, *_frame_key(spec, ()))
        assert got == (frame if frame[0] == "error" else _outcome(planning._planned, spec, frame[1]))


@settings(max_examples=200)
@given(st.lists(_specs(), min_size=1, max_size=6))
def test_lowering_with_kept_axis_arguments_equals_a_fresh_lowering(cases):
    for spec, shape in cases:
        if spec[0] != "ok":
            continue
        plan = _outcome(planning.make_plan, spec[1], shape)
        if plan[0] != "ok" or not plan[1].spec.is_static:
            continue
        kept = _outcome(lowering.lower, plan[1], 17)
        lowering._AXIS_ARGS.clear()
        assert kept == _outcome(lowering.lower, plan[1], 17)


_TF_MASK_VALUES = st.one_of(st.integers(0, 7), st.sampled_from((-1, 2 ** 31, True, "1")))
_OPENVINO_MASK_VALUES = st.one_of(st.lists(st.integers(0, 2), max_size=2), st.sampled_from(("1,0", "", "x", 0.5)))


@settings(max_examples=300)
@given(st.data(), st.lists(st.tuples(st.lists(st.integers(-2 ** 63, 2 ** 63), min_size=2, max_size=2),
                                     st.lists(_ints, min_size=1, max_size=2),
                                     st.one_of(st.none(), st.lists(_ints, min_size=2, max_size=2))),
                           min_size=1, max_size=5),
       st.sampled_from((False, True, 2)), st.sampled_from((TF, TFLITE, OPENVINO)))
def test_one_maker_for_many_numbers_equals_a_parser_call_per_spec(data, numbers, offset, flavor):
    """A SpecMaker kept for many begin/end/strides gives each spec, or each error in the parser's
    order (an invalid mask before or after the numbers, as the flavour checks them)."""
    values = _OPENVINO_MASK_VALUES if flavor == OPENVINO else _TF_MASK_VALUES
    masks = tuple(data.draw(values) for _ in _MASKS)
    maker = SpecMaker(flavor, masks, offset if flavor == TFLITE else False)
    for begin, end, strides in numbers:
        kwargs = dict(zip(_MASKS, masks))
        if flavor == TF:
            alone = _outcome(from_tf, begin, end, strides, **kwargs)
        elif flavor == TFLITE:
            alone = _outcome(from_tflite, begin, end, strides, offset=offset, **kwargs)
        else:
            alone = _outcome(from_openvino, begin, end, strides, **kwargs)
        assert _outcome(maker.make, begin, end, strides) == alone


class _Attr:
    def __init__(self, type_, value):
        self.type, self.value = type_, value


@settings(max_examples=300)
@given(st.dictionaries(st.sampled_from(_MASKS + ("offset", "beginmask", "T")),
                       st.sampled_from([(2, 1), (2, 3), (7, [1, 0]), (3, "1,0"), (1, 0.5)]), max_size=4),
       st.sampled_from((TF, TFLITE, OPENVINO)),
       st.lists(st.sampled_from(("b", "e", "s", "e3", "r", None)), min_size=2, max_size=4))
def test_parse_node_with_a_kept_attribute_form_equals_parsing_anew(attrs, flavor, names):
    """The form of one attributes object, kept in the pass's cache for every node that has it,
    gives each node the spec (or the error, in parse_node's order of checks) it gives uncached."""
    attrs = {k: _Attr(*v) for k, v in attrs.items()}
    values = {"b": (0, 1), "e": (2, 3), "s": (1, 1), "e3": (1, 2, 3)}
    inputs = ["x", *names]
    const_of = lambda name, field: values.get(name)  # noqa: E731
    dims_of = lambda name: (2,)  # noqa: E731
    cache: dict = {}
    for _ in range(2):
        kept = _outcome(core.parse_node, list(inputs), attrs, flavor, const_of, dims_of, cache)
        assert kept == _outcome(core.parse_node, list(inputs), attrs, flavor, const_of, dims_of)


def test_equal_numbers_under_one_form_give_one_spec_object():
    cache: dict = {}
    attrs = {"begin_mask": _Attr(2, 1)}
    read = lambda: core.parse_node(["x", "b", "e", "s"], attrs, TF, lambda n, f: (0, 1), lambda n: None, cache)  # noqa: E731
    assert read()[0] is read()[0]
    with pytest.raises(StridedSliceError, match="same length"):
        core.parse_node(["x", "b", "ee", "s"], attrs, TF, lambda n, f: (0,) * len(n), lambda n: None, cache)
