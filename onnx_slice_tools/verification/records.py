"""What each rewritten op gives the in-place run (verification/inplace.py): one interface, one
registry.

The in-place run taps, for every rewrite, the tensors that reached it and the one it produced,
and judges the produced one against the op's reference on the reached ones.  What is tapped and
how the reference is computed are the op's; how the taps are made (main graph, If branches,
Loop bodies stacked or carried, function calls), sized, packed into pieces and run is the
run's.  The run reads a rewrite only through the :class:`InPlace` interface:

* ``node``, ``graph`` (``"main"``, ``"main > If 'n'.then_branch"``, ``"main > Loop 'n'.body"``,
  ``"function d::f"``: the labels of graphs.walk), ``output`` (the rewritten output's name);
* ``tensors``: tensor name -> ONNX element type of what to tap, the reached inputs first and
  the output last; ``reads``: the reached inputs (data, runtime indices, update, value);
* ``vectors``: the rewrite record whose runtime begin/end/strides the random inputs must
  respect (input_ranges.index_vectors), or None;
* ``deferrable``: its output may be settled by the as-shipped run (a bitwise reference, no
  run-time index whose rejection must be seen in the tapped run: inplace.start_inplace);
* ``expected(got)``: (the status that settles it without a comparison, or None; a
  :class:`Reference` of its output; ``where()``, naming the reached tensors for messages);
* ``check(got)``: its in-place status on one run (or iteration) of tapped values.

:func:`in_place` reads a list of records through :data:`REGISTRY` (op type -> adapter):
StridedSlice (and the Slice/Gather ``--fix-slices`` reads as slices) by :class:`SliceTaps`, the
slice-update family and TFLite GELU by :class:`UpdateTaps`, whose reference and comparison are
verification/update_checks.py's (semantics/update.py bitwise; GELU under the product's float
tolerance against its float64 evaluation, never bitwise).  The next op is one entry here plus
its reference in its own stage modules.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Protocol

import numpy as np

from ..errors import StridedSliceError
from ..errors import first_line as _line
from ..semantics.plan import make_plan
from ..semantics.reference import apply_plan, plan_index
from . import update_checks
from .exact import same_bits
from .status import failed, skipped


class InPlace(Protocol):
    """What one rewrite gives the in-place run (module docstring)."""

    record: object
    node: str
    graph: str
    output: str
    tensors: dict
    reads: tuple
    vectors: object
    deferrable: bool

    def expected(self, got: dict) -> tuple: ...

    def check(self, got: dict) -> str: ...


class Reference:
    """A deferred rewrite's reference output (inplace.start_inplace), made when it is compared:
    ``make(copy)`` on the tensor ``x`` that reached it (held, not copied: many slices read one
    tensor; ``copy`` False may give a view of it, to read only)."""

    __slots__ = ("make", "x")

    def __init__(self, make: Callable[[bool], np.ndarray], x: np.ndarray):
        self.make, self.x = make, x

    def value(self, copy: bool = True) -> np.ndarray:
        return self.make(copy)


class SliceReference(Reference):
    """A StridedSlice rewrite's reference output: the canonical ``plan`` at the concrete shape of
    ``x`` applied to ``x`` (semantics/reference.apply_plan, ``index``: the plan's numpy index)."""

    __slots__ = ("plan", "index")

    def __init__(self, plan, x: np.ndarray, index: tuple):
        self.plan, self.x, self.index = plan, x, index

    def value(self, copy: bool = True) -> np.ndarray:
        return apply_plan(self.plan, self.x, self.index, copy)


def _could_not_expose(names) -> str:
    return skipped(f"the in-place run could not expose {', '.join(repr(m) for m in names)}")


# --------------------------------------------------------------------------- StridedSlice


class _Key:
    """(spec, shape) as a dict key whose hash is computed once: a spec's hash reads every field,
    and a key missed is looked up, then stored."""

    __slots__ = ("spec", "shape", "hash")

    def __init__(self, spec, shape):
        self.spec, self.shape = spec, shape
        self.hash = hash((spec, shape))

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other) -> bool:
        return isinstance(other, _Key) and self.hash == other.hash and self.shape == other.shape and \
            self.spec == other.spec


@dataclasses.dataclass
class Plans:
    """Plans and numpy indexes made once per (spec, shape) for every slice of one run (models
    repeat slices; the records of one signature share their spec)."""

    plans: dict = dataclasses.field(default_factory=dict)  # _Key(spec, shape) -> Plan (or the error)
    by_id: dict = dataclasses.field(default_factory=dict)  # (id(spec), shape) -> (spec, Plan): no hashing
    indexes: dict = dataclasses.field(default_factory=dict)  # id(Plan) -> its numpy index

    def plan(self, spec, shape):
        held = self.by_id.get((id(spec), shape))
        if held is not None and held[0] is spec:
            return held[1]
        key = _Key(spec, shape)
        found = self.plans.get(key)
        if found is None:
            try:
                found = make_plan(spec, shape)
            except StridedSliceError as exc:
                found = exc
            self.plans[key] = found
        if isinstance(found, StridedSliceError):
            raise found
        self.by_id[(id(spec), shape)] = (spec, found)
        return found

    def index(self, plan) -> tuple:
        """reference.plan_index of a plan of :meth:`plan` (made once per plan)."""
        key = id(plan)  # (plans are kept in ``plans``: the id stays theirs)
        found = self.indexes.get(key)
        if found is None:
            found = self.indexes[key] = plan_index(plan)
        return found


def _reference_plan(r, got: dict, make_plan):
    """(None, plan, where) for StridedSlice record ``r`` on this run's tensors ``got``: the
    flavour's plan of its spec with the runtime index values that reached it, at the real input
    shape (``where()`` names them, for messages); or (the status that settles ``r`` without a
    comparison, None, where): a data tensor not exposed, or a reference that raises (the
    original fails there: a failure) or has no defined result."""
    if r.data_name not in got:
        return skipped(f"the in-place run could not expose {r.data_name!r}"), None, str
    x = got[r.data_name]
    if r.index_names:
        n = r.spec.n
        # a field whose tensor the rewrite removed is one the lowering never reads: zeros stand in
        values = {f: tuple(int(v) for v in np.asarray(got[name]).reshape(-1).tolist()) if name in got else (0,) * n
                  for f, name in r.index_names.items()}
        spec = dataclasses.replace(r.spec, runtime_length=None, **values)
    else:  # (a static spec: no runtime value reached it)
        values, spec = {}, r.spec

    def where() -> str:  # only a failure or a skip names the input
        return f"input {list(x.shape)}" + "".join(f", {f}={v}" for f, v in values.items())
    try:
        return None, make_plan(spec, tuple(x.shape)), where
    except StridedSliceError as exc:
        if exc.undefined:  # TFLite (plan_tflite): no defined result to compare with
            return skipped(f"{where()}: the original's result is undefined ({_line(exc)})"), None, where
        if exc.unsupported:  # TFLite (plan_tflite): a result the reference does not express
            return skipped(f"{where()}: the original's result is not expressible here ({_line(exc)})"), None, where
        return failed(f"{where()}: the original raises ({_line(exc)}), the converted model ran"), None, where


class SliceTaps:
    """A StridedSlice rewrite (or a Slice/Gather ``--fix-slices`` read as a slice): taps its data,
    its runtime begin/end/strides and its output; the reference is the flavour's plan of its spec
    with the runtime values that reached it, applied to the data (semantics/reference.py),
    compared bitwise."""

    def __init__(self, record, plans: Plans):
        self.record, self.plans = record, plans
        self.node, self.graph, self.output = record.node, record.graph, record.output_name
        elem = record.elem_type or 1
        index = {v: 6 if record.index_types.get(f) == "int32" else 7 for f, v in record.index_names.items()} \
            if record.index_names else {}
        self.reads = (record.data_name, *index)
        self.tensors = {record.data_name: elem, **index}
        self.tensors[self.output] = elem
        self.vectors: object = record if record.index_names else None
        # (runtime begin/end/strides: random values the original rejects must be seen to fail
        # in the converted model's own run)
        self.deferrable = not record.index_names

    def expected(self, got: dict) -> tuple:
        settled, plan, where = _reference_plan(self.record, got, self.plans.plan)
        if settled is not None:
            return settled, None, where
        return None, SliceReference(plan, got[self.record.data_name], self.plans.index(plan)), where

    def check(self, got: dict) -> str:
        missing = [name for name in (self.record.data_name, self.output) if name not in got]
        if missing:  # e.g. an If branch output the tapping could not expose: say so, never guess
            return _could_not_expose(missing)
        settled, plan, where = _reference_plan(self.record, got, self.plans.plan)
        if settled is not None:
            return settled
        return same_bits(got[self.output], apply_plan(plan, got[self.record.data_name]), where())


# --------------------------------------------------------------------------- the slice-update family


class UpdateTaps:
    """A rewrite of the slice-update family or TFLite GELU (rewrite/updates.py): taps the inputs
    its lowering reads at run time (x, update, start indices; value; dy) and its output; the
    reference and the comparison are verification/update_checks.py's (``reference``, ``judge``)."""

    def __init__(self, record, plans: Plans | None = None):
        self.record, self.node, self.graph, self.output = record, record.node, record.graph, record.output
        runtime = update_checks.runtime_inputs(record)
        self.reads = tuple(runtime)
        self.tensors = {**runtime, self.output: update_checks.output_elem(record)}
        self.vectors: object = None
        self.deferrable = update_checks.bitwise(record)

    def _reached(self, got: dict, output: bool = True):
        missing = [name for name in (*self.reads, *([self.output] if output else ())) if name not in got]
        if missing:
            return _could_not_expose(missing), None, str
        values = {name: got[name] for name in self.reads}
        where = lambda: update_checks.where(self.record, values)  # noqa: E731 - only a failure names them
        try:
            return None, update_checks.reference(self.record, values), where
        except StridedSliceError as exc:
            return failed(f"{where()}: the original raises ({_line(exc)}), the converted model ran"), None, where

    def expected(self, got: dict) -> tuple:
        settled, value, where = self._reached(got, output=False)
        if settled is not None:
            return settled, None, where
        return None, Reference(lambda copy: value, value), where

    def check(self, got: dict) -> str:
        settled, value, where = self._reached(got)
        if settled is not None:
            return settled
        return update_checks.judge(self.record, got[self.output], value, where())


#: op type of a record -> its adapter (made with the run's shared :class:`Plans`)
REGISTRY: dict[str, Callable[..., InPlace]] = {
    "StridedSlice": SliceTaps, "Slice": SliceTaps, "Gather": SliceTaps,
    **{op: UpdateTaps for op in update_checks.OPS},
}


def in_place(records: list) -> list:
    """Each record as its :class:`InPlace` adapter (None for a record that was not rewritten),
    aligned with ``records``."""
    plans = Plans()
    return [None if getattr(r, "lowering", None) is None else REGISTRY[r.op_type](r, plans) for r in records]
