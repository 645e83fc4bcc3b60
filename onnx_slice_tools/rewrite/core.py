"""The StridedSlice rewrite's decisions, independent of how the model is held.

Both representations -- the onnx-ir pass (rewrite/ir_pass.py, an ``onnx_ir.passes.InPlacePass``)
and the protobuf splice (rewrite/proto_pass.py) -- read the nodes, ask this module what to do,
and only make the nodes and edit the graph themselves:

* the flavour of a node (:func:`flavor_of`) and its spec (:func:`parse_node`, errors worded here);
* the plan and the lowering, the record of each node and the memo that makes a model repeating a
  few patterns cheap (:class:`Rewriter`: each distinct index signature parsed once, each distinct
  (spec, input dims, index types) planned and lowered once);
* which inputs die with the replaced nodes (:func:`remove_if_unused`, on a :class:`GraphFacts`);
* which custom domains are dropped (:func:`unused_domains`), the default opset
  (:func:`default_opset_of`, :func:`with_default_opset`), runtime index dtypes
  (:func:`index_type`), and what an output that declared too little gets (:func:`output_fill`).

Nothing here imports onnx or onnx-ir.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple, Protocol, TypeVar

from ..errors import StridedSliceError
from ..lowering.lower import Lowering, lower
from ..semantics.plan import declared_conflict, make_plan, shape_conflict
from ..semantics.spec import MASK_NAMES, OPENVINO, TF, TFLITE, SliceSpec, SpecMaker, check_flavor, made_at_once

TF_DOMAIN = "ai.onnx.converters.tensorflow"
OPENVINO_DOMAINS = ("org.openvinotoolkit",)
STANDARD_DOMAINS = ("", "ai.onnx")

#: AttributeProto types (onnx-ir's AttributeType is an IntEnum of the same numbers).
_INT, _STRING, _INTS = 2, 3, 7
#: TensorProto element types of runtime begin/end/strides.
_INDEX_TYPES = {6: "int32", 7: "int64"}

UNKNOWN_FLAVOR = "cannot tell the flavour from the mask attributes; pass flavor"


# --------------------------------------------------------------------------- records

@dataclass
class RewriteRecord:
    """What happened to one StridedSlice node."""

    node: str
    graph: str
    flavor: str | None = None
    spec: SliceSpec | None = None
    input_shape: tuple | None = None
    output_shape: tuple | None = None
    lowering: Lowering | None = None
    elem_type: int | None = None
    declared_output: tuple | None = None
    error: str | None = None
    error_kind: str | None = None  # "invalid" (the framework rejects it) | "unsupported"
    index_types: dict = field(default_factory=dict)  # runtime begin/end/strides: field -> int32/int64/None
    warnings: list = field(default_factory=list)  # e.g. declared shapes that disagree with derived ones
    # where the rewrite sits in the converted model (tensor names), for the in-place check
    data_name: str | None = None
    output_name: str | None = None
    index_names: dict = field(default_factory=dict)  # runtime field -> tensor name
    replaced: list = field(default_factory=list)    # output-name tuples of the nodes removed
    renamed: dict = field(default_factory=dict)     # identity: old output name -> the data's name
    op_type: str = "StridedSlice"   # Slice / Gather: a node of the model's own that --fix-slices rewrote
    written: str | None = None      # such a node as written (its spec is how it was read, not what it says)

    @property
    def notation(self) -> str | None:
        """The node as the user knows it: a StridedSlice's spec as an index expression; a fixed
        Slice/Gather as written (``Slice(starts=[0], ends=[1000000000], axes=[1])``)."""
        if self.written is not None:
            return self.written
        return None if self.spec is None else self.spec.index_notation()

    def to_json(self, check=None, inplace: str | None = None) -> dict:
        """The record as report.json shows it, with its verification results (kept on the
        Report, not here): ``check`` its per-rewrite CheckResult, ``inplace`` its in-place status."""
        out = {
            "node": self.node, "graph": self.graph, "op_type": self.op_type, "flavor": self.flavor,
            "spec": self.notation,
            "input_shape": json_shape(self.input_shape), "output_shape": json_shape(self.output_shape),
            "emitted": None if self.lowering is None else [op.describe() for op in self.lowering.ops],
            "emitted_nodes": None if self.lowering is None else self.lowering.node_count,
            "error": self.error, "warnings": self.warnings, "inplace_check": inplace,
        }
        if check is not None:
            c = check
            out["checks"] = {"shape_inference": c.shape_inference, "inferred_shape": json_shape(c.inferred_shape),
                             "onnxruntime": c.onnxruntime, "tried_input_shapes": [list(s) for s in c.tried_shapes]}
            if c.reference_evaluator != "not run":
                out["checks"]["reference_evaluator"] = c.reference_evaluator
            if c.run_time_errors != "not run":
                out["checks"]["run_time_errors"] = c.run_time_errors
            if c.runtimes:
                out["checks"]["runtimes"] = dict(c.runtimes)
            if self.index_types:
                out["checks"]["tried_runtime_values"] = c.tried_values
                out["checks"]["rejected_runtime_values_redrawn"] = c.rejected_values
                out["checks"]["rejected_runtime_values_failing_in_onnxruntime"] = c.must_fail_checked
        return out


#: a fresh record's fields (the containers among them are replaced in every record: see decide)
_RECORD_DEFAULTS = RewriteRecord(node="", graph="").__dict__


def json_shape(shape):
    return None if shape is None else [d for d in shape]


@dataclass
class RewriteChanges:
    """What the pass changed, for the structural proof (nodes by their output names)."""

    removed_nodes: set = field(default_factory=set)
    removed_initializers: set = field(default_factory=set)
    added_nodes: set = field(default_factory=set)
    added_initializers: set = field(default_factory=set)
    renamed: dict = field(default_factory=dict)   # consumers read the data instead of an identity's output


class RewriteOutcome(Protocol):
    """What :meth:`RewriteResult.merged` reads of a result: :class:`RewriteResult` and the onnx-ir
    pass's ``PassResult`` subclass (rewrite/ir_pass.py), both dataclasses with these fields."""

    __dataclass_fields__: ClassVar[dict[str, Any]]
    modified: bool
    records: list
    changes: RewriteChanges
    table: object


_Outcome = TypeVar("_Outcome", bound=RewriteOutcome)


@dataclass
class RewriteResult:
    """A rewrite's outcome on either representation: the model (edited in place), whether it
    changed, one record per selected node and the changes for the structural proof.  The onnx-ir
    pass returns it as an ``onnx_ir.passes.PassResult`` subclass with the same fields."""

    model: object
    modified: bool
    records: list = field(default_factory=list)
    changes: RewriteChanges = field(default_factory=RewriteChanges)
    #: the protobuf path's ``graphs.table.NodeTable`` of the rewritten main graph (made while the
    #: node list was rebuilt, so a caller need not read the nodes again); None elsewhere
    table: object = None

    def merged(self: _Outcome, later: RewriteOutcome) -> _Outcome:
        """This result followed by ``later`` (another pass on the same model): records and
        changes together, for one structural proof (no node table: ``later`` may have changed the
        nodes).  A result of the same class as this one."""
        a, b = self.changes, later.changes
        changes = RewriteChanges(a.removed_nodes | b.removed_nodes, a.removed_initializers | b.removed_initializers,
                                 a.added_nodes | b.added_nodes, a.added_initializers | b.added_initializers,
                                 {**a.renamed, **b.renamed})
        return dataclasses.replace(self, modified=self.modified or later.modified, records=self.records + later.records,
                                   changes=changes, table=None)


def changes_of(records: list, removed: dict, added_nodes, added_initializers) -> RewriteChanges:
    """The :class:`RewriteChanges` of a pass: the replaced nodes of the records that were
    rewritten, what :func:`remove_if_unused` removed, and what the pass added."""
    return RewriteChanges(
        removed_nodes=set(itertools.chain.from_iterable([r.replaced for r in records if r.lowering is not None]))
        | set(removed["nodes"]),
        removed_initializers=set(removed["initializers"]),
        added_nodes=set(added_nodes), added_initializers=set(added_initializers),
        renamed={k: v for r in records if r.renamed for k, v in r.renamed.items()})


# --------------------------------------------------------------------------- reading nodes

#: Attributes a StridedSlice may carry besides :data:`MASK_NAMES`: TFLite's ``offset`` and
#: TensorFlow's type attributes (``T``, ``Index``; internal ones start with ``_``).  Any other
#: name is a misspelled mask (``beginmask``) whose meaning would silently be lost: refused.
OTHER_ATTRIBUTES = frozenset({"offset", "T", "Index"})
_KNOWN_ATTRIBUTES = OTHER_ATTRIBUTES | frozenset(MASK_NAMES)


def unknown_attribute(attr_types) -> StridedSliceError | None:
    """The error for the first attribute name (sorted) a StridedSlice does not have; None when
    every name is known (:data:`MASK_NAMES`, :data:`OTHER_ATTRIBUTES`, ``_internal``)."""
    if attr_types.keys() <= _KNOWN_ATTRIBUTES:
        return None  # (the usual node: masks and type attributes only)
    unknown = sorted(n for n in attr_types if n not in MASK_NAMES and n not in OTHER_ATTRIBUTES
                     and not n.startswith("_"))
    if not unknown:
        return None
    return StridedSliceError(f"not a StridedSlice attribute (the masks are {', '.join(MASK_NAMES)}; TFLite adds "
                             "offset)", field=f"attribute {unknown[0]!r}")


def flavor_of(attr_types, domain: str) -> str | None:
    """TFLite when an ``offset`` attribute is present; TF when the masks are INT attributes,
    OpenVINO when INTS or STRING; None if unclear.  ``attr_types``: attribute name ->
    AttributeProto type."""
    if "offset" in attr_types:
        return TFLITE
    kinds = {t for name, t in attr_types.items() if name in MASK_NAMES}
    if kinds & {_INTS, _STRING}:
        return OPENVINO
    if _INT in kinds:
        return TF
    if domain in OPENVINO_DOMAINS:
        return OPENVINO
    return TF if not kinds else None


class ProtoAttr(NamedTuple):
    """An AttributeProto as :func:`parse_node` reads it: its type and its int, ints or str value."""

    type: int
    value: object


def proto_attr_value(a):
    """The int, list of ints or str of an AttributeProto (None for other types)."""
    if a.type == _INT:
        return a.i
    if a.type == _INTS:
        return list(a.ints)
    if a.type == _STRING:
        return a.s.decode("utf-8", "replace")
    return None


def index_values(arr, field_name: str) -> tuple[int, ...]:
    """A constant begin/end/strides array as ints; StridedSliceError unless 1-D integers."""
    if arr.dtype.kind not in "iu":
        raise StridedSliceError(f"{field_name} must be int32 or int64, got {arr.dtype}", field=field_name)
    if arr.ndim != 1:
        raise StridedSliceError(f"{field_name} must be 1-D, got shape {list(arr.shape)}", field=field_name)
    return tuple(int(v) for v in arr.tolist())


def index_type(elem: int | None) -> str | None:
    """The index dtype name of a runtime begin/end/strides of TensorProto element type ``elem``."""
    return None if elem is None else _INDEX_TYPES.get(elem)


def _runtime_length(shape) -> int | None:
    if shape is not None and len(shape) == 1 and isinstance(shape[0], int):
        return shape[0]
    return None


def parse_node(inputs: list, attrs, flavor: str, const_of, dims_of, cache: dict | None = None
               ) -> tuple[SliceSpec, dict]:
    """(spec, runtime index inputs by field) of a StridedSlice on any representation: ``inputs``
    (data, begin, end[, strides]; None for a missing one), ``attrs`` (name -> an object with
    ``type``, an AttributeProto type, and ``value``: int, list of ints or str),
    ``const_of(input, field)`` (its constant ints or None for a runtime value), ``dims_of(input)``
    (the trusted shape of a runtime one).  Raises StridedSliceError (field named) for bad
    attributes or inputs.  ``cache``: what this pass made so far: the :class:`AttributeForm` of
    each ``attrs`` object (a representation that reads many nodes' attributes into one object
    has them read once) and the specs (:func:`_parsed`)."""
    form = attribute_form(attrs, flavor, cache)
    if form.unknown is not None:
        raise form.unknown()
    if len(inputs) > 4:
        raise StridedSliceError(f"StridedSlice takes 3 or 4 inputs (data, begin, end[, strides]), got {len(inputs)}",
                                field="inputs")
    if len(inputs) < 3:
        raise StridedSliceError(f"StridedSlice needs inputs (data, begin, end[, strides]), got {len(inputs)}",
                                field="inputs")
    for k, f in enumerate(("data", "begin", "end")):
        if inputs[k] is None:  # an empty name: an omitted optional input, and these are not optional
            raise StridedSliceError(f"the {f} input is empty (named ''); StridedSlice needs data, begin and end",
                                    field="inputs", index=k)
    vals, runtime, lengths, unsized = [], {}, [], []
    for k, f in ((1, "begin"), (2, "end"), (3, "strides")):
        value = inputs[k] if k < len(inputs) else None
        v = None if value is None else const_of(value, f)
        vals.append(v)
        if value is not None and v is None:
            runtime[f] = value
            shape = dims_of(value)
            length = _runtime_length(shape)
            if shape is not None and len(shape) != 1:
                raise StridedSliceError(f"{f} must be 1-D, got rank {len(shape)}", field=f)
            if length is not None:
                lengths.append((f, length))
            else:
                unsized.append(f)
        elif v is not None:
            lengths.append((f, len(v)))
    if len(lengths) > 1 and len({n for _, n in lengths}) > 1:
        got = ", ".join(f"{f} has {n}" for f, n in lengths)
        raise StridedSliceError(f"begin, end and strides must have the same length ({got})", field=lengths[-1][0])
    runtime_length = None
    if runtime:
        if not lengths:
            raise StridedSliceError(f"{', '.join(runtime)} computed at run time with an unknown length: "
                                    "not supported (the length fixes the meaning of the masks)",
                                    field=next(iter(runtime)))
        runtime_length = lengths[0][1]
    begin, end, strides = vals
    if form.masks is None:
        raise form.wrong_mask()
    if form.flavor != OPENVINO:
        if strides is None and "strides" not in runtime:
            raise StridedSliceError("StridedSlice needs a strides input in this flavour", field="strides")
    elif strides is None and "strides" not in runtime and runtime_length is not None:  # runtime begin/end: length known
        strides = (1,) * runtime_length  # the optional 4th input defaults to ones
    spec = _parsed(cache, form, begin, end, strides, runtime_length)
    return (_sized(spec, unsized) if unsized else spec), runtime


class AttributeForm(NamedTuple):
    """What a StridedSlice's attributes decide for a flavour, before any input is read: the
    error for an unknown attribute name, the masks as the flavour's parser takes them (name ->
    value, in MASK_NAMES order, TFLite's offset last) or None with the error for a mask of the
    wrong type, and the parser's maker for those masks.  Errors are kept as functions that make
    them (each node raises its own), raised by :func:`parse_node` in its order of checks."""

    flavor: str
    unknown: Any       # None, or () -> the StridedSliceError of an unknown attribute
    masks: dict | None
    wrong_mask: Any    # None, or () -> the StridedSliceError of a mask of the wrong type
    maker: SpecMaker | None


def attribute_form(attrs, flavor: str, cache: dict | None = None) -> AttributeForm:
    """:class:`AttributeForm` of ``attrs`` (see :func:`parse_node`) under ``flavor``; with
    ``cache``, made once per ``attrs`` object and flavour (kept with it: its id stays its own)."""
    if cache is not None:
        key = ("attributes", id(attrs), flavor)
        hit = cache.get(key)
        if hit is not None and hit[0] is attrs:
            return hit[1]
    unknown_error = unknown_attribute(attrs)
    unknown = None if unknown_error is None else (lambda: unknown_attribute(attrs))
    read: dict = {}  # the masks as the parser takes them
    wrong = None
    if flavor in (TF, TFLITE):
        for m in MASK_NAMES + (("offset",) if flavor == TFLITE else ()):
            a = attrs.get(m)
            if a is None:
                read[m] = 0
            elif a.type != _INT:
                which = "TensorFlow" if flavor == TF else "TFLite"
                wrong = functools.partial(StridedSliceError, f"{m} must be an INT attribute in the {which} flavour",
                                          field=m)
                break
            else:
                read[m] = a.value
    else:
        for m in MASK_NAMES:  # OpenVINO's masks: 0/1 lists or IR strings
            a = attrs.get(m)
            if a is None:
                read[m] = ()
            elif a.type == _STRING:
                read[m] = a.value
            elif a.type == _INTS:
                read[m] = list(a.value)
            else:
                wrong = functools.partial(StridedSliceError, f"{m} must be INTS or STRING in the OpenVINO flavour",
                                          field=m)
                break
    masks: dict | None = None
    maker = None
    if wrong is None:
        masks = read
        values = list(read.values())
        maker = SpecMaker(flavor, tuple(values[:5]), values[5] if len(values) > 5 else False)
    form = AttributeForm(flavor, unknown, masks, wrong, maker)
    if cache is not None:
        cache[key] = (attrs, form)
    return form


def _sized(spec: SliceSpec, unsized: list) -> SliceSpec:
    """``spec`` naming the runtime fields of unknown length (the lowering checks their length)."""
    return dataclasses.replace(spec, unsized=tuple(unsized)) if unsized else spec


def _parsed(cache: dict | None, form: AttributeForm, begin, end, strides, runtime_length) -> SliceSpec:
    """The form's maker (spec.SpecMaker: the flavour's parser, its masks read) on these numbers,
    once per distinct call in a pass (``cache``): models repeat a few patterns thousands of
    times.  Errors are not cached."""
    maker = form.maker
    assert maker is not None
    if cache is None:
        return maker.make(begin, end, strides, runtime_length)
    key = (maker, begin, end, strides, runtime_length)
    spec = cache.get(key)
    if spec is None:
        spec = cache[key] = maker.make(begin, end, strides, runtime_length)
    return spec


def error_kind(exc: StridedSliceError) -> str:
    """``unsupported`` (a spec we cannot lower, e.g. a TFLite result that is no slice of the input)
    or ``invalid`` (one the framework rejects)."""
    return "unsupported" if exc.unsupported or "not supported" in exc.reason else "invalid"


# --------------------------------------------------------------------------- shapes and messages

def shape_disagreement(declared, derived) -> str | None:
    """Where a declared shape contradicts the derived one: rank, two different numbers, or a
    number where none is derivable."""
    return shape_conflict(declared, derived, _declared_vs_derived)


def _declared_vs_derived(a, b) -> str | None:
    if isinstance(a, int) and isinstance(b, int) and a != b:
        return f"{a} != {b}"
    if isinstance(a, int) and not isinstance(b, int):
        return f"declared {a}, not derivable"
    return None


def fmt_shape(shape) -> str:
    return "unknown rank" if shape is None else "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def declared_output_conflict(declared, planned) -> str | None:
    """Where the shape a model declares for a StridedSlice's output contradicts the plan of the
    slice over its input's trusted dims: another rank, or two different numbers (a dim name
    against a number is less information, not a contradiction).  For a graph output (the
    model's interface) the rewrite refuses the node as invalid input; an intermediate
    declaration (value_info) is left to the checks (docs/design.md, "Shapes the lowering trusts")."""
    return declared_conflict(declared, planned)


def input_warnings(declared, derived) -> list:
    """The record's warnings about a sliced tensor whose declared shape the derived one contradicts."""
    problem = shape_disagreement(declared, derived)
    if not problem:
        return []
    return [f"declared input shape {fmt_shape(declared)} disagrees with the shape derived "
            f"from the graph inputs {fmt_shape(derived)} ({problem}); using the derived one"]


def output_fill(typed: bool, elem: int | None, dims, data_elem: int | None, plan_shape):
    """What a rewritten output's declaration gets when it declared too little: None (nothing:
    all declared, or not a tensor, or nothing known to fill in), else (element type to set or
    None, shape to set or None) -- the data's type when the output had no type, the plan's
    shape when it had none or one the plan contradicts (:func:`declared_output_conflict`: a
    graph output's is refused before, so only a value_info gets here)."""
    if typed and dims is not None and elem is not None and plan_shape is not None \
            and declared_output_conflict(dims, plan_shape):
        return None, plan_shape  # an intermediate declaration the slice contradicts (core.decide warned)
    if typed and (dims is not None or elem is None):
        return None
    if not typed and data_elem is None:
        return None
    return (None if typed else data_elem), plan_shape


# --------------------------------------------------------------------------- the memo

@dataclass(frozen=True)
class Signature:
    """What a node's index inputs, attributes and domain decide (shared by the nodes with the
    same ones): flavour, spec, runtime index inputs by field, their dtypes, or the error."""

    flavor: str | None
    spec: SliceSpec | None = None
    runtime: dict = field(default_factory=dict)
    index_types: dict = field(default_factory=dict)
    error: str | None = None
    error_kind: str | None = None


class Rewriter:
    """One pass's decisions and their memo.  ``flavor``: None to detect per node; ``opset``: the
    default-domain opset the lowering is for; ``target``: lowering/targets.py's name.

    A representation calls :meth:`signature` once per distinct (index inputs, attributes,
    domain) -- it keys that memo itself, by what is cheap to compare in its own objects -- and
    :meth:`decide` per node; the plan and lowering are made once per distinct (spec, input dims,
    index types)."""

    def __init__(self, *, flavor: str | None, opset: int, target: str | None):
        flavor = check_flavor(flavor, auto=True)
        self.flavor, self.opset, self.target = flavor, opset, target
        self.parse_cache: dict = {}
        # (spec, dims, index types) -> (output shape, lowering) | (error, None)
        self._lowerings: dict[tuple, tuple[tuple | None, Lowering] | tuple[StridedSliceError, None]] = {}
        self._bases: dict = {}  # (id(signature), dims) -> (signature, a record's shared fields, identity lowering)
        self._flavors: dict = {}  # (id(attribute types), domain) -> (those types, the flavour they give)

    def signature(self, attr_types, domain: str, read, elem_of) -> Signature:
        """:class:`Signature` of a node: ``attr_types`` (attribute name -> AttributeProto type)
        and ``domain`` decide the flavour (unless the pass has one); ``read(flavor)`` returns
        (spec, runtime index inputs by field) or raises StridedSliceError (e.g. :func:`parse_node`
        with :attr:`parse_cache`); ``elem_of(input)`` is the element type of a runtime index input
        (derived, else declared; None if unknown)."""
        flavor = self.flavor
        if flavor is None:  # (once per attributes object and domain: a representation may share them)
            hit = self._flavors.get((id(attr_types), domain))
            if hit is not None and hit[0] is attr_types:
                flavor = hit[1]
            else:
                flavor = flavor_of(attr_types, domain)
                self._flavors[(id(attr_types), domain)] = (attr_types, flavor)
        if flavor is None:
            return Signature(None, error=UNKNOWN_FLAVOR, error_kind="invalid")
        try:
            spec, runtime = read(flavor)
        except StridedSliceError as exc:
            return Signature(flavor, error=str(exc), error_kind=error_kind(exc))
        return made_at_once(Signature, flavor=flavor, spec=spec, runtime=runtime,
                            index_types={f: index_type(elem_of(v)) for f, v in runtime.items()} if runtime else {},
                            error=None, error_kind=None)

    def _base(self, sig: Signature, dims) -> tuple[dict, bool]:
        """A record's fields that the signature and the input's dims decide (every field: a fresh
        record's defaults, then these), shared by the nodes that have both; and whether the
        lowering is an identity."""
        key = (id(sig), dims)
        hit = self._bases.get(key)
        if hit is not None and hit[0] is sig:
            return hit[1], hit[2]
        fields = dict(_RECORD_DEFAULTS, flavor=sig.flavor, spec=sig.spec, error=sig.error, error_kind=sig.error_kind)
        if sig.spec is not None:  # parsed: no error
            index_types = sig.index_types
            lkey = (sig.spec, dims, tuple(sorted(index_types.items())) if index_types else ())
            made = self._lowerings.get(lkey)
            if made is None:
                try:
                    plan = make_plan(sig.spec, dims)
                    made = (plan.output_shape, lower(plan, self.opset, index_types, target=self.target))
                except StridedSliceError as exc:
                    made = (exc, None)
                self._lowerings[lkey] = made
            if isinstance(made[0], StridedSliceError):
                fields.update(error=str(made[0]), error_kind=error_kind(made[0]))
            else:
                fields.update(output_shape=made[0], lowering=made[1], index_types=index_types)
        identity = fields["lowering"] is not None and fields["lowering"].is_identity
        self._bases[key] = (sig, fields, identity)  # the signature kept: its id stays its own
        return fields, identity

    def decide(self, sig: Signature, *, node: str, graph: str, dims, warnings: list, data_name, output_name,
               data_elem, output_elem, declared_output, runtime_names: dict, is_graph_output: bool) -> RewriteRecord:
        """The record of one node: what the signature and the data's (derived) dims decide,
        then where it sits (names).  ``lowering`` None: the node stays (``error`` says why).
        An identity lowering of an output that is not a graph output renames its readers to
        the data (``renamed``); otherwise the node's output keeps its name."""
        base, identity = self._base(sig, dims)
        rec = RewriteRecord.__new__(RewriteRecord)
        fields = rec.__dict__
        fields.update(base)
        fields["node"], fields["graph"] = node, graph
        fields["warnings"] = list(warnings) if sig.spec is not None else []
        fields["renamed"] = {}
        if sig.spec is not None:
            fields["input_shape"] = dims
        if base["lowering"] is None:
            fields.update(index_types={}, index_names={}, replaced=[])  # each record its own containers
            return rec
        conflict = None if declared_output is None else declared_output_conflict(declared_output, base["output_shape"])
        if conflict and not is_graph_output:  # an intermediate declaration: untrusted, the plan's shape replaces it
            fields["warnings"].append(f"declared output shape {fmt_shape(declared_output)} contradicts the slice's "
                                      f"{fmt_shape(base['output_shape'])} ({conflict}); declared with the slice's")
            declared_output, conflict = None, None
        if conflict:  # the model's interface declares what the slice of the trusted input dims cannot give
            error = StridedSliceError(
                f"declared {fmt_shape(declared_output)}, but the slice of the input {fmt_shape(dims)} gives "
                f"{fmt_shape(base['output_shape'])} ({conflict}): the model contradicts itself",
                field=f"output {output_name!r}")
            fields.update(error=str(error), error_kind="invalid", lowering=None, output_shape=None,
                          index_types={}, index_names={}, replaced=[])
            return rec
        fields["declared_output"] = declared_output
        fields["elem_type"] = data_elem or output_elem or None  # 0 is UNDEFINED
        fields["data_name"] = data_name
        fields["output_name"] = output_name
        fields["index_names"] = dict(runtime_names)
        fields["index_types"] = dict(base["index_types"])
        fields["replaced"] = [(output_name,)]
        if identity and not is_graph_output:
            fields["output_name"] = data_name
            fields["renamed"] = {output_name: data_name}
        return rec


# --------------------------------------------------------------------------- after the rewrite

class GraphFacts:
    """What :func:`remove_if_unused` asks of a representation about a value (``v``) or a node:
    its key, uses, whether it is a graph input or output, its producer, whether it is an
    initializer; and the two edits."""

    def key(self, v): raise NotImplementedError
    def used(self, v) -> bool: raise NotImplementedError
    def is_boundary(self, v) -> bool: raise NotImplementedError  # a graph input or output
    def producer(self, v): raise NotImplementedError
    def is_initializer(self, v) -> bool: raise NotImplementedError
    def domain(self, node) -> str: raise NotImplementedError
    def outputs(self, node) -> list: raise NotImplementedError
    def has_subgraph(self, node) -> bool: raise NotImplementedError
    def output_names(self, node) -> tuple: raise NotImplementedError
    def remove_node(self, node) -> list: raise NotImplementedError  # returns its (non-empty) inputs
    def remove_initializer(self, v) -> str: raise NotImplementedError  # returns its name


def remove_if_unused(freed: list, facts: GraphFacts, removed: dict) -> None:
    """Drop what fed only the replaced nodes: initializers, Constant nodes, and the standard
    nodes that computed runtime begin/end/strides (e.g. tf2onnx's ``end = begin + 1`` of a
    shrink, which the lowering does not read), recursively.  Never a graph input or output, a
    node of a custom domain, a node with another live output, or control flow (a node holding
    a subgraph).  ``removed``: {"nodes": [output-name tuples], "initializers": [names]}."""
    done: set = set()
    todo = list(freed)
    key_of, used, is_boundary, producer_of = facts.key, facts.used, facts.is_boundary, facts.producer
    while todo:
        value = todo.pop()
        key = key_of(value)
        if key in done or used(value) or is_boundary(value):
            continue
        done.add(key)
        producer = producer_of(value)
        if producer is not None:
            if facts.domain(producer) not in STANDARD_DOMAINS or \
                    any(facts.used(o) or facts.is_boundary(o) for o in facts.outputs(producer)):
                continue
            if facts.has_subgraph(producer):
                continue  # If/Loop/Scan: leave control flow alone
            removed["nodes"].append(facts.output_names(producer))
            todo.extend(facts.remove_node(producer))
        elif facts.is_initializer(value):
            removed["initializers"].append(facts.remove_initializer(value))


def unused_domains(imported, used) -> list:
    """The custom domains among ``imported`` that no node uses (``used``): their imports go, as
    onnx-ir's pass does (also those no node used before the rewrite)."""
    return [d for d in imported if d not in STANDARD_DOMAINS and d not in used]


def default_opset_of(imports) -> int | None:
    """The default-domain opset of ``imports`` (domain -> version): ``""``, else ``ai.onnx``."""
    for d in STANDARD_DOMAINS:
        if d in imports:
            return imports[d]
    return None


def with_default_opset(imports, opset: int) -> dict:
    """``imports`` (domain -> version) with the default domain imported as ``""`` at ``opset``
    (first) and no ``ai.onnx`` alias."""
    return {"": opset, **{d: v for d, v in imports.items() if d not in STANDARD_DOMAINS}}
