"""The StridedSlice spec: one type for both flavours, and its parsers.

A :class:`SliceSpec` is what a StridedSlice node *says*, before any rule of the
flavour is applied: begin/end/strides (``None`` when they are computed at run
time) and the five masks as bit fields.  The OpenVINO flavour also keeps the
lengths of its mask lists, because OpenVINO validates them.

Parsers:

* :func:`from_tf` -- TensorFlow bit fields (``tf.strided_slice``, TF graphs,
  tf2onnx custom nodes);
* :func:`from_openvino` -- OpenVINO StridedSlice-1 0/1 lists or IR strings
  (``"0,1,1"``, ``"0, 1, 1"``, ``""``);
* :func:`from_index_expr` -- a Python basic-indexing expression such as
  ``x[1, 2:4, None, ..., :-3:-1, :]``, encoded exactly as TensorFlow's own
  ``Tensor.__getitem__`` encodes it.
"""

from __future__ import annotations

import ast
import dataclasses
from dataclasses import dataclass
from typing import Iterable, Sequence

from ..errors import StridedSliceError

TF = "tf"
OPENVINO = "openvino"
TFLITE = "tflite"
FLAVORS = (TF, OPENVINO, TFLITE)

#: The five masks, in the order used for ``SliceSpec.mask_lengths``.
MASK_NAMES = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")

_INT32_MIN, _INT32_MAX = -(2 ** 31), 2 ** 31 - 1
_INT64_MIN, _INT64_MAX = -(2 ** 63), 2 ** 63 - 1


def made_at_once(cls, base=(), /, **fields):
    """An instance of the frozen dataclass ``cls`` with every field set at once: those of
    ``base`` (a mapping), then ``fields``.  Its ``__init__`` sets them one by one through
    ``object.__setattr__``, which the constructors called once per node of a large model (a
    spec, a plan, an op, a lowering, a signature) feel.  Together they must name every field,
    and ``cls`` must have no ``__post_init__`` (it is not run): tests/semantics/
    test_made_at_once.py checks both for each class made this way."""
    obj = object.__new__(cls)
    _set_attribute(obj, "__dict__", {**base, **fields} if base else fields)  # (``fields`` is this call's own dict)
    return obj


_set_attribute = object.__setattr__  # (a frozen dataclass's own __setattr__ refuses)


def _in_int64(values: tuple[int, ...], field: str) -> tuple[int, ...]:
    """``values``, or a StridedSliceError naming the first that no int64 tensor can hold (every
    runtime reads begin/end/strides as int32 or int64)."""
    if not values or _INT64_MIN <= min(values) and max(values) <= _INT64_MAX:
        return values
    for i, v in enumerate(values):
        if not _INT64_MIN <= v <= _INT64_MAX:
            raise StridedSliceError(f"{v} is beyond the int64 range of begin/end/strides", field=field, index=i)
    return values


@dataclass(frozen=True)
class SliceSpec:
    """A StridedSlice spec as written, in either flavour.

    ``begin``/``end``/``strides`` are tuples of ints, or ``None`` when the value
    is only known at run time (then ``n`` gives its length).  Masks are
    non-negative bit fields: bit ``i`` refers to index ``i``.
    """

    flavor: str
    begin: tuple[int, ...] | None
    end: tuple[int, ...] | None
    strides: tuple[int, ...] | None
    begin_mask: int = 0
    end_mask: int = 0
    ellipsis_mask: int = 0
    new_axis_mask: int = 0
    shrink_axis_mask: int = 0
    #: OpenVINO only: the lengths of the five mask lists (order of MASK_NAMES).
    mask_lengths: tuple[int, ...] | None = None
    #: Length of begin/end/strides given only by shape (runtime values).
    runtime_length: int | None = None
    #: TFLite only: STRIDED_SLICE's ``offset`` option (op version 8), end is relative to begin.
    offset: bool = False
    #: Runtime fields whose length is not known before run time (``n`` comes from another
    #: field): the frameworks raise when it differs, so the lowering checks it.
    unsized: tuple[str, ...] = ()

    @property
    def n(self) -> int:
        """The number of indices (the length of ``strides``)."""
        for values in (self.strides, self.begin, self.end):
            if values is not None:
                return len(values)
        if self.runtime_length is None:
            raise StridedSliceError("the length of begin/end/strides is unknown", field="strides")
        return self.runtime_length

    def bit(self, mask: str, i: int) -> bool:
        return bool((getattr(self, mask) >> i) & 1)

    def mask_list(self, mask: str, length: int | None = None) -> list[int]:
        """The mask as an OpenVINO-style 0/1 list (``length`` entries, default ``n``)."""
        length = self.n if length is None else length
        return [int(self.bit(mask, i)) for i in range(length)]

    @property
    def is_static(self) -> bool:
        return self.begin is not None and self.end is not None and self.strides is not None

    def index_notation(self, name: str = "x") -> str:
        """This spec written as a Python index expression (see :func:`index_notation`)."""
        return index_notation(self, name)


#: a spec's fields with their defaults (SpecMaker sets them all at once)
_SPEC_DEFAULTS = {f.name: f.default for f in dataclasses.fields(SliceSpec) if f.default is not dataclasses.MISSING}

_PLAIN_INT = frozenset({int})  # (not bool, not a numpy integer)


def _int_tuple(values, field: str) -> tuple[int, ...]:
    if isinstance(values, (list, tuple)) and set(map(type, values)) <= _PLAIN_INT:
        return _in_int64(tuple(values), field)  # what the numpy path gives for plain ints, without numpy
    try:
        import numpy as np
        arr = np.asarray(values)
    except Exception as exc:  # pragma: no cover - numpy accepts nearly everything
        raise StridedSliceError(f"cannot read {field}: {exc}", field=field) from None
    if arr.ndim != 1:
        raise StridedSliceError(f"{field} must be a 1-D list of integers, got shape {list(arr.shape)}",
                                field=field)
    if arr.size and not (arr.dtype.kind in "iu" or (arr.dtype.kind == "O" and all(
            isinstance(v, int) and not isinstance(v, bool) for v in arr.tolist()))):
        raise StridedSliceError(f"{field} must hold integers, got {arr.dtype}", field=field)
    return _in_int64(tuple(int(v) for v in arr.tolist()), field)


def _tf_mask(value, name: str) -> int:
    if value.__class__ is int and 0 <= value <= _INT32_MAX:
        return value  # (the usual mask: nothing to convert)
    if isinstance(value, bool) or not isinstance(value, (int,)) and not hasattr(value, "__index__"):
        raise StridedSliceError(f"{name} must be an integer bit field, got {value!r}", field=name)
    value = int(value)
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise StridedSliceError(f"{name} has value {value} out of range for an int32", field=name)
    return value & 0xFFFFFFFF  # TensorFlow's masks are int32: -1 sets all 32 bits


def from_tf(begin, end, strides=None, *, begin_mask: int = 0, end_mask: int = 0,
            ellipsis_mask: int = 0, new_axis_mask: int = 0, shrink_axis_mask: int = 0,
            runtime_length: int | None = None) -> SliceSpec:
    """A TensorFlow-flavour spec.  ``begin``/``end``/``strides`` may be None for runtime values."""
    return SpecMaker(TF, (begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask)).make(
        begin, end, strides, runtime_length)


def from_tflite(begin, end, strides=None, *, begin_mask: int = 0, end_mask: int = 0,
                ellipsis_mask: int = 0, new_axis_mask: int = 0, shrink_axis_mask: int = 0,
                offset: bool = False, runtime_length: int | None = None) -> SliceSpec:
    """A TFLite STRIDED_SLICE spec: TF-style int32 bit fields plus ``offset``.

    TFLite's begin/end/strides tensors are int32, so values outside int32 are rejected."""
    return SpecMaker(TFLITE, (begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask), offset).make(
        begin, end, strides, runtime_length)


class SpecMaker:
    """One parser (:func:`from_tf`, :func:`from_tflite`, :func:`from_openvino`) in two parts:
    the masks (and TFLite's offset), read when the maker is made, and :meth:`make`, the numbers.
    Every parse goes through both; a caller that reads many begin/end/strides with the same
    masks (a model's StridedSlice nodes) keeps one maker for them (rewrite/core.py).

    ``masks``: the five masks in MASK_NAMES order as the parser takes them (TF/TFLite ints,
    OpenVINO 0/1 sequences or IR strings).  An invalid mask or offset is not raised here:
    :meth:`make` raises it where the parser checks it (OpenVINO's masks and TFLite's offset
    before the numbers, TF's masks after them)."""

    def __init__(self, flavor: str, masks: tuple, offset=False):
        self.flavor, self.masks, self.offset = flavor, masks, offset
        try:
            self.fields: dict | None = self._fields()  # the spec's fields but the numbers
        except StridedSliceError:
            self.fields = None

    def _fields(self) -> dict:
        """The spec's fields the masks (and offset) give, or the parser's error for them."""
        masks, flavor = self.masks, self.flavor
        if flavor == OPENVINO:
            lists = [parse_openvino_mask(m, name) for m, name in zip(masks, MASK_NAMES)]
            fields = {name: _bits(values) for name, values in zip(MASK_NAMES, lists)}
            return dict(_SPEC_DEFAULTS, flavor=OPENVINO, **fields, mask_lengths=tuple(len(v) for v in lists))
        offset = self._checked_offset() if flavor == TFLITE else False
        fields = {name: _tf_mask(m, name) for m, name in zip(masks, MASK_NAMES)}
        return dict(_SPEC_DEFAULTS, flavor=flavor, **fields, offset=offset)

    def _checked_offset(self) -> bool:
        offset = self.offset
        if isinstance(offset, bool) or offset in (0, 1):
            return bool(offset)
        raise StridedSliceError(f"offset must be a boolean (0 or 1), got {offset!r}", field="offset")

    def make(self, begin, end, strides=None, runtime_length: int | None = None) -> SliceSpec:
        """The spec of these begin/end/strides (None for runtime values) under the maker's masks."""
        fields, flavor = self.fields, self.flavor
        if fields is None and flavor != TF:  # (raises: OpenVINO's masks, TFLite's offset, checked first)
            self._checked_offset() if flavor == TFLITE else self._fields()
        numbers = begin + end + strides if begin.__class__ is end.__class__ is strides.__class__ is tuple else None
        if numbers is not None and set(map(type, numbers)) <= _PLAIN_INT \
                and (not numbers or _INT64_MIN <= min(numbers) and max(numbers) <= _INT64_MAX):
            b, e, s = begin, end, strides  # (the usual static spec, as _int_tuple gives it: checked at once)
        else:
            b = None if begin is None else _int_tuple(begin, "begin")
            e = None if end is None else _int_tuple(end, "end")
            if strides is None and runtime_length is None:
                ref = b if b is not None else e
                s = None if ref is None else (1,) * len(ref)  # (OpenVINO: the optional 4th input defaults to ones)
            else:
                s = None if strides is None else _int_tuple(strides, "strides")
        if fields is None:
            fields = self._fields()  # (raises: TF's masks, checked after the numbers)
        if flavor == TFLITE:
            for name, values in (("begin", b), ("end", e), ("strides", s)):
                for i, v in enumerate(values or ()):
                    if not _INT32_MIN <= v <= _INT32_MAX:
                        raise StridedSliceError(f"value {v} does not fit TFLite's int32 {name} tensor",
                                                index=i, field=name)
        return made_at_once(SliceSpec, fields, begin=b, end=e, strides=s, runtime_length=runtime_length)


def parse_openvino_mask(value, name: str = "mask") -> tuple[int, ...]:
    """An OpenVINO mask from a 0/1 sequence or an IR string (``"0,1,1"``, ``"0, 1, 1"``, ``""``)."""
    if value is None:
        return ()
    if isinstance(value, bytes):
        value = value.decode("ascii", errors="replace")
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return ()
        items: list = []
        for part in text.split(","):
            part = part.strip()
            try:
                items.append(int(part))
            except ValueError:
                raise StridedSliceError(f"{name} {value!r} is not a comma-separated list of 0s and 1s",
                                        field=name) from None
    else:
        try:
            items = list(value)
        except TypeError:
            raise StridedSliceError(f"{name} must be a list of 0s and 1s, got {value!r}", field=name) from None
    out = []
    for i, v in enumerate(items):
        if isinstance(v, bool) or not hasattr(v, "__index__") or int(v) not in (0, 1):
            raise StridedSliceError(f"{name}[{i}] is {v!r}; OpenVINO masks hold only 0 and 1", field=name)
        out.append(int(v))
    return tuple(out)


def _bits(values: Iterable[int]) -> int:
    return sum(1 << i for i, v in enumerate(values) if v)


def from_openvino(begin, end, strides=None, *, begin_mask=(), end_mask=(), new_axis_mask=(),
                  shrink_axis_mask=(), ellipsis_mask=(), runtime_length: int | None = None) -> SliceSpec:
    """An OpenVINO StridedSlice-1 spec; masks are 0/1 sequences or IR strings."""
    return SpecMaker(OPENVINO, (begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask)).make(
        begin, end, strides, runtime_length)


def convert_flavor(spec: SliceSpec, flavor: str) -> SliceSpec:
    """The same written spec (values and mask bits) read under another flavour.

    OpenVINO mask lists get ``n`` entries each.  The meaning can differ: that is
    the point of having two flavours.
    """
    if flavor == spec.flavor:
        return spec
    from dataclasses import replace
    if flavor in (TF, TFLITE):
        return replace(spec, flavor=flavor, mask_lengths=None, offset=False)
    n = spec.n
    return replace(spec, flavor=OPENVINO,
                   **{k: getattr(spec, k) & ((1 << n) - 1) for k in MASK_NAMES},
                   mask_lengths=(n,) * 5, offset=False)


# --------------------------------------------------------------------------- index expressions

_NEWAXIS_NAMES = {"np.newaxis", "numpy.newaxis", "tf.newaxis", "array_ops.newaxis", "newaxis"}


@dataclass(frozen=True)
class RuntimeIndex:
    """A name in an index expression (``x[:, i]``): a value known only at run time."""

    name: str


_ACCEPTED = ("an index or slice part is an integer literal (with at most one sign) or a plain name "
             "(a value given at run time); items may also be None/np.newaxis and ...")


def _expr_int(node: ast.AST, text: str):
    """An integer literal (``3``, ``-3``, ``+3``) or a plain name (a :class:`RuntimeIndex`).
    Anything else is refused: ``-i`` or ``i+1`` is arithmetic on a run-time value, which a
    StridedSlice spec cannot hold (TensorFlow computes it in the graph, before the slice)."""
    if isinstance(node, ast.Name) and node.id not in ("None", "newaxis"):
        return RuntimeIndex(node.id)
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return _literal(node.value, node, text)
    if (isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd))
            and isinstance(node.operand, ast.Constant) and type(node.operand.value) is int):
        return _literal(-node.operand.value if isinstance(node.op, ast.USub) else node.operand.value, node, text)
    raise StridedSliceError(f"unsupported index {_segment(text, node)!r}: {_ACCEPTED}", field="index expression")


def _segment(text: str, node: ast.AST) -> str:
    seg = ast.get_source_segment(text, node) or ast.dump(node)
    return seg if len(seg) <= 40 else seg[:37] + "..."


def _literal(value: int, node: ast.AST, text: str) -> int:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise StridedSliceError(f"index {_segment(text, node)!r} is beyond the int64 range of begin/end/strides",
                                field="index expression")
    return value


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else base + "." + node.attr
    return None


def parse_index_items(expr: str) -> list:
    """The items of an index expression: ints, ``slice`` objects, ``None`` and ``Ellipsis``.

    Accepts ``x[...]`` with any name, a bare ``[...]`` or just the inside.
    """
    text = expr.strip()
    if not text:
        raise StridedSliceError("empty index expression", field="index expression")
    if text.isidentifier():  # "x": a tensor with no subscript, or a lone run-time index? Say which.
        raise StridedSliceError(f"{text!r} has no subscript; write the index expression, e.g. {text}[1:3] "
                                "(a name inside the brackets is an index given at run time: x[i])", field="index expression")
    # "x[...]" as written, "[...]" with a name put in front, or just the inside.
    attempts = [text, "_" + text] if text.endswith("]") else []
    attempts.append("_[" + text + "]")
    tree = None
    for cand in attempts:
        try:
            parsed = ast.parse(cand, mode="eval").body
        except SyntaxError:
            continue
        except (RecursionError, MemoryError):  # thousands of nested operators: no index expression
            raise StridedSliceError(f"index expression nested too deeply to read ({len(text)} characters)",
                                    field="index expression") from None
        if isinstance(parsed, ast.Subscript):
            tree, text = parsed, cand
            break
    if tree is None:
        shown = text if len(text) <= 60 else text[:57] + "..."
        raise StridedSliceError(f"cannot parse index expression {shown!r}", field="index expression")
    sl = tree.slice
    elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
    items: list = []
    for el in elts:
        if isinstance(el, ast.Slice):
            parts = [None if p is None or (isinstance(p, ast.Constant) and p.value is None)
                     else _expr_int(p, text) for p in (el.lower, el.upper, el.step)]
            items.append(slice(*parts))
        elif isinstance(el, ast.Constant) and el.value is Ellipsis:
            items.append(Ellipsis)
        elif isinstance(el, ast.Constant) and el.value is None:
            items.append(None)
        elif _dotted(el) in _NEWAXIS_NAMES:
            items.append(None)
        else:
            items.append(_expr_int(el, text))
    return items


def from_index_items(items: Sequence, flavor: str = TF) -> SliceSpec:
    """Encode index items exactly as TensorFlow's ``Tensor.__getitem__`` does.

    A :class:`RuntimeIndex` item or slice part makes that whole vector (begin, end or
    strides) a runtime value, as it is in a TF graph."""
    begin, end, strides = [], [], []
    runtime: set[str] = set()

    def val(v, field: str, offset: int = 0) -> int:
        if isinstance(v, RuntimeIndex):
            runtime.add(field)
            return 0
        return int(v) + offset
    masks = dict.fromkeys(MASK_NAMES, 0)
    for i, item in enumerate(items):
        if isinstance(item, slice):
            if item.start is None:
                begin.append(0)
                masks["begin_mask"] |= 1 << i
            else:
                begin.append(val(item.start, "begin"))
            if item.stop is None:
                end.append(0)
                masks["end_mask"] |= 1 << i
            else:
                end.append(val(item.stop, "end"))
            strides.append(1 if item.step is None else val(item.step, "strides"))
        elif item is Ellipsis:
            begin.append(0)
            end.append(0)
            strides.append(1)
            masks["ellipsis_mask"] |= 1 << i
        elif item is None:
            begin.append(0)
            end.append(0)
            strides.append(1)
            masks["new_axis_mask"] |= 1 << i
        elif isinstance(item, RuntimeIndex) or isinstance(item, int) and not isinstance(item, bool):
            begin.append(val(item, "begin"))
            end.append(val(item, "end", 1))
            strides.append(1)
            masks["shrink_axis_mask"] |= 1 << i
        else:
            raise StridedSliceError(f"unsupported index item {item!r}", index=i, field="index expression")
    n = len(items)
    vectors = {f: (None if f in runtime else v) for f, v in (("begin", begin), ("end", end), ("strides", strides))}
    length = n if runtime else None
    if flavor == TF:
        return from_tf(vectors["begin"], vectors["end"], vectors["strides"], runtime_length=length, **masks)
    if flavor == TFLITE:
        return from_tflite(vectors["begin"], vectors["end"], vectors["strides"], runtime_length=length,
                           begin_mask=masks["begin_mask"], end_mask=masks["end_mask"],
                           ellipsis_mask=masks["ellipsis_mask"], new_axis_mask=masks["new_axis_mask"],
                           shrink_axis_mask=masks["shrink_axis_mask"])
    return from_openvino(vectors["begin"], vectors["end"], vectors["strides"], runtime_length=length,
                         **{k: [(v >> i) & 1 for i in range(n)] for k, v in masks.items()})


def check_flavor(flavor, *, auto: bool = False) -> str | None:
    """``flavor`` when it names a flavour; with ``auto`` also None or ``"auto"`` (the flavour read
    per node), returned as None.  Anything else: a StridedSliceError (a ValueError) naming the
    choices.  The one check of a flavour argument (convert, the rewrite passes, the reference)."""
    if flavor in FLAVORS:
        return flavor
    if auto and flavor in (None, "auto"):
        return None
    raise StridedSliceError(f"unknown flavor {flavor!r}; expected {'auto, ' if auto else ''}tf, openvino or tflite",
                            field="flavor")


def from_index_expr(expr: str, flavor: str = TF) -> SliceSpec:
    """Parse ``"x[1, 2:4, None, ..., :-3:-1, :]"`` into a spec of the given flavour."""
    check_flavor(flavor)
    return from_index_items(parse_index_items(expr), flavor)


def _notation_item(spec: SliceSpec, i: int) -> str:
    if spec.bit("ellipsis_mask", i):
        return "..."
    if spec.bit("new_axis_mask", i):
        return "None"
    b = "?" if spec.begin is None else str(spec.begin[i])
    if spec.bit("shrink_axis_mask", i):
        return "0" if spec.flavor == TFLITE and spec.bit("begin_mask", i) else b  # TFLite honours it
    e = "?" if spec.end is None else str(spec.end[i])
    if spec.offset and spec.end is not None:
        e = f"{'' if spec.bit('begin_mask', i) else b}+{spec.end[i]}"  # offset: end = begin + end
    s = "?" if spec.strides is None else str(spec.strides[i])
    text = ("" if spec.bit("begin_mask", i) else b) + ":" + ("" if spec.bit("end_mask", i) else e)
    if s != "1":
        text += ":" + s
    return text


def index_notation(spec: SliceSpec, name: str = "x") -> str:
    """The spec as a Python index expression, each index read with the precedence
    ellipsis > new_axis > shrink > range that both runtimes use.  Runtime values print as ``?``."""
    return f"{name}[" + ", ".join(_notation_item(spec, i) for i in range(spec.n)) + "]"
