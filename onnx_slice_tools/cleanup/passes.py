"""Cleanup after the rewrite: the default list of exact passes, the pass manager that runs them
over the main graph, every subgraph and every function, and the check that the cleaned model
computes the same bits as before.

The rewrite lowers each StridedSlice alone; around shape arithmetic (``tf.shape(x)[i]``)
that leaves ``Slice -> Squeeze -> (Cast, Add...) -> Unsqueeze -> Concat`` chains, duplicate
``Shape``/``Cast``/``Slice`` of one tensor and shape values that are known at conversion time.
Each pass is one transformation, onnx-ir style (``call(model) -> PassResult``), in a module of
its own (what they share: cleanup/base.py):

* :class:`RemoveDeadPass` (remove_dead.py) -- onnx-ir's unused-node removal plus unused
  subgraph initializers; runs first, and after every pass that changed the model;
* :class:`FoldShapeArithmeticPass` (fold_shape_arithmetic.py) -- integer values (rank <= 1)
  computed by data movement and integer ``+ - *`` from static dims and small constants become
  constants;
* :class:`ReshapeCopyDimsPass` (reshape_copy_dims.py) -- a ``Reshape`` whose shape copies dims
  of its own input at their positions gets a constant shape with 0 there;
* :class:`LiftScalarsPass` (lift_scalars.py) -- ``Unsqueeze`` of a scalar built from
  ``Squeeze``-d length-1 vectors, scalar constants and elementwise ops becomes the same
  computation on the vectors; ``Unsqueeze(Squeeze(x))`` with the same axes on static size-1
  dims becomes ``x``;
* :class:`RebuildShapeVectorsPass` (rebuild_shape_vectors.py) -- a shape vector of constants and
  dims of one tensor is rebuilt as ``Concat(Shape(x, start, end), ...)`` when that is smaller;
* :class:`MergeSlicesPass` (merge_slices.py) -- ``Slice`` of a ``Slice`` on other axes becomes
  one ``Slice``;
* :class:`TransposeSliceTransposePass` (transpose_slice_transpose.py) -- a ``Slice`` between a
  ``Transpose`` and its inverse becomes a ``Slice`` on the untransposed tensor;
* :class:`QdqMovementPass` (qdq.py) -- ``QuantizeLinear(move(DequantizeLinear(t)))`` of one
  per-tensor scale and zero point becomes ``move(t)`` (data movement on the integers);
* :class:`CommonSubexpressionPass` (common_subexpression.py) -- nodes with the same op,
  attributes and inputs (small constants compared by value) computed once per graph.

Each pass also has its firing condition on the ModelProto, ``may_fire(index)`` (its function in
cleanup/conditions.py, over the protobuf index of cleanup/scan.py): a reason whenever the pass
could change the model (shape-dependent parts taken as "may hold"), else None.
``precheck.may_change`` asks them all before any onnx-ir model exists (or is imported); when none
may fire, ``convert`` does not run the passes.  The conditions share one module, apart from the
passes, because the pre-check must not import onnx-ir.  A new pass: a module here subclassing
``base.CleanupPass``, an entry in :func:`default_passes`, its condition in
``conditions.CONDITIONS``.

Nothing changes a value's bits: folding evaluates only integer data movement and integer
``Add``/``Sub``/``Mul``/``Neg`` whose results fit the type; lifting and merging keep every op's
elementwise computation.  Graph outputs keep their names, types and shapes (a node producing
a graph output is never replaced).
"""

from __future__ import annotations

import collections
import functools

import numpy as np
import onnx_ir as ir

from ..errors import first_line as _first_line
from ..graphs.walk import proto_graphs
from ..verification.budget import Budget
from .base import CleanupPass, graphs_of, op_counts
from .common_subexpression import CommonSubexpressionPass
from .fold_shape_arithmetic import FoldShapeArithmeticPass
from .lift_scalars import LiftScalarsPass
from .merge_slices import MergeSlicesPass
from .qdq import QdqMovementPass
from .rebuild_shape_vectors import RebuildShapeVectorsPass
from .remove_dead import RemoveDeadPass
from .reshape_copy_dims import ReshapeCopyDimsPass
from .transpose_slice_transpose import TransposeSliceTransposePass

__all__ = [
    "CleanupPass", "CommonSubexpressionPass", "FoldShapeArithmeticPass", "LiftScalarsPass", "MergeSlicesPass",
    "QdqMovementPass", "RebuildShapeVectorsPass", "RemoveDeadPass", "ReshapeCopyDimsPass", "TransposeSliceTransposePass",
    "cleanup", "cleanup_check", "default_passes", "graphs_of", "op_counts", "pass_manager", "set_inferred_shapes",
]

#: Above this many bytes of in-memory weights, shape inference (which serialises the model) is
#: skipped: the passes then use the shapes the model declares.
_INFER_MAX_BYTES = 256 * 2 ** 20


def set_inferred_shapes(model, proto=None) -> list:
    """ONNX shape inference (graphs/shape_inference.py, plain) on a weightless copy (initializers above 1 KiB become typed inputs,
    external data is never read); shapes found for values that have none -- main graph and
    subgraphs -- are set on them.  A failure leaves the model as it is (the passes then do less).
    ``proto``: ``model`` serialized, when the caller has it (not modified; saves a serialization).
    Returns the undo list: (value, its type, its shape) before."""
    import onnx

    from ..graphs.shape_inference import infer
    from ..rewrite.shapes import weightless
    undo: list = []
    in_memory = sum(v.const_value.nbytes for v in model.graph.initializers.values()
                    if v.const_value is not None and not isinstance(v.const_value, ir.ExternalTensor))
    if in_memory > _INFER_MAX_BYTES:
        return undo
    try:
        if proto is None:
            proto = ir.to_proto(model)
        else:
            proto, given = onnx.ModelProto(), proto
            proto.CopyFrom(given)
        inferred = infer(weightless(proto, max_bytes=1024))
    except Exception:  # shapes only let the passes do more
        return undo
    found: dict = {}
    for g, _, _ in proto_graphs(inferred.graph):
        for vi in g.value_info:  # a name two graphs use with different types is left alone
            prev = found.get(vi.name, vi)
            found[vi.name] = vi if prev is not None and prev.type == vi.type else None
    for graph, is_function in graphs_of(model):
        if is_function:
            continue
        for node in graph:
            for v in node.outputs:
                vi = found.get(v.name)
                if vi is None or v.shape is not None or not vi.type.HasField("tensor_type"):
                    continue
                tt = vi.type.tensor_type
                undo.append((v, v.type, v.shape))
                if v.type is None and tt.elem_type:
                    v.type = ir.TensorType(ir.DataType(tt.elem_type))
                if tt.HasField("shape"):
                    v.shape = ir.Shape([d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                                        for d in tt.shape.dim])
    return undo


def default_passes() -> list:
    return [FoldShapeArithmeticPass(), ReshapeCopyDimsPass(), LiftScalarsPass(), RebuildShapeVectorsPass(),
            MergeSlicesPass(), TransposeSliceTransposePass(), QdqMovementPass(), CommonSubexpressionPass()]


class _Ledger:
    """What the counted passes of one cleanup share: the node counts by op type, per pass the
    nodes it removed and added, and the dead-node pass with whether the model is known to be
    its fixed point (its last run removed nothing and no pass changed the model since: running
    it again would do nothing and the counts stay as they are)."""

    def __init__(self, model):
        self.counts = op_counts(model)
        self.per_pass: dict = {}
        self.dead = RemoveDeadPass()
        self.dead_settled = False


class _Counted(ir.passes.InPlacePass):
    """One cleanup pass as run in :func:`cleanup`'s pass manager: followed by the dead-node pass
    when it may have left dead nodes (what a pass made dead counts as its removal), its removed
    and added nodes counted into the ledger."""

    def __init__(self, inner, ledger: _Ledger):
        self.inner, self.ledger = inner, ledger

    def call(self, model) -> ir.passes.PassResult:
        ledger = self.ledger
        before = ledger.counts
        result = self.inner(model)
        ran_dead = self.inner is ledger.dead
        if ran_dead:
            ledger.dead_settled = not result.modified
        elif result.modified or not ledger.dead_settled:
            ledger.dead_settled = not ledger.dead(model).modified
            ran_dead = True
        if ran_dead or result.modified:
            ledger.counts = op_counts(model)
        entry = ledger.per_pass.setdefault(type(self.inner).__name__, {"removed": collections.Counter(),
                                                                        "added": collections.Counter()})
        entry["removed"].update(before - ledger.counts)
        entry["added"].update(ledger.counts - before)
        return ir.passes.PassResult(model, modified=result.modified)


def pass_manager(model, passes=None, max_rounds: int = 6) -> tuple:
    """(an ``ir.passes.PassManager`` of the cleanup, its ledger): the dead-node pass, then
    ``passes`` (default :func:`default_passes`) in rounds until none changes the model."""
    ledger = _Ledger(model)
    passes = passes if passes is not None else default_passes()
    manager = ir.passes.PassManager([
        _Counted(ledger.dead, ledger),
        ir.passes.PassManager([_Counted(p, ledger) for p in passes], steps=max_rounds, early_stop=True),
    ], steps=1)
    return manager, ledger


def cleanup(model, passes=None, max_rounds: int = 6, proto=None) -> dict:
    """Run the passes in rounds until none changes the model (in place, on an onnx-ir
    ``PassManager``: :func:`pass_manager`).  Returns the report: nodes before and after, and per
    pass the nodes it removed and added by op type.  When no pass changed anything, the model is
    as it was (onnx-ir's dead-node pass may still have trimmed trailing empty inputs).  The
    shapes inference set are taken back in every case: they guided the passes, but the output
    declares only what the input (and the rewrite's plans) declared -- onnx's inference can know
    less than the model says (a dim of 1 it cannot follow through computed Slice bounds becomes
    unknown), and an audit (``inspect --target``) of the output must see the same declarations
    as of the input.  ``proto``: the model serialized, if the caller has it (see
    :func:`set_inferred_shapes`).  A pass's error is raised as it is (not the pass manager's wrapping)."""
    inferred = set_inferred_shapes(model, proto)
    manager, ledger = pass_manager(model, passes, max_rounds)
    before_all = ledger.counts
    try:
        any_change = manager(model).modified
    except ir.passes.PassError as exc:
        cause: BaseException = exc
        while isinstance(cause, ir.passes.PassError) and cause.__cause__ is not None:
            cause = cause.__cause__
        raise cause from None
    after_all = ledger.counts
    for value, type_, shape in reversed(inferred):
        if value.type is not None and (type_ != value.type if type_ is not None else value.is_graph_output()):
            continue  # a pass changed what it holds or made it a graph output (cleanup/qdq.py): its type stays
        value.type, value.shape = type_, shape
    return {
        "changed": any_change,
        "nodes_before": sum(before_all.values()), "nodes_after": sum(after_all.values()),
        "removed": dict(sorted((before_all - after_all).items())),
        "passes": {name: {k: dict(sorted(v.items())) for k, v in e.items()} for name, e in ledger.per_pass.items()},
    }


def _session(proto):
    """A fast onnxruntime session (runtimes.onnxruntime_session), silent: a run the model rejects is an answer here."""
    from ..verification.runtimes import onnxruntime_session
    return onnxruntime_session(proto)


def cleanup_check(before_proto, after_proto, *, budget: Budget, trials: int = 2, seed: int = 0,
                  run_before=None, sized=None, vectors: dict | None = None) -> str:
    """Run the model before and after cleanup in onnxruntime on the same random inputs and
    compare every graph output bitwise (shape, dtype, bytes).  Inputs are sized as for the
    in-place run (sizing.choose_sizes: small, grown only where shape inference needs it), then,
    when the model rejects them, a few other small size assignments (all dims 4, 6, 8; distinct
    sizes), each within ``budget.memory`` (sizing.run_need, counting ``budget.weight_bytes``:
    sizing.budget_weight_bytes; verification/budget.py).  Returns
    "passed", "skipped: ..." (no sizes the model before cleanup runs on, or the budget) or
    "failed: ...".  ``budget.load_weights(proto)``: the proto with its external weights read in.
    ``run_before(feeds) -> outputs``: a session of the model before cleanup that already exists
    (the in-place check's, whose taps only add outputs): no second session of it.  ``sized``:
    ``sizing.choose_sizes`` of ``before_proto``'s skeleton when the in-place check made it.
    ``vectors``: the index vector inputs of the rewrites (input_ranges.index_vectors): fed at
    the length and in the ranges their slices need, in every size assignment tried.
    A cleanup that only merged duplicate nodes and removed dead ones is proven without a run
    (structure.same_values, and the checker and strict shape inference of the cleaned model)."""
    from ..rewrite.shapes import skeleton
    from ..verification.checks import PASSED, failed, kind, passed, skipped, static_checks
    from ..verification.feeds import random_feeds
    from ..verification.sizing import (
        Skip,
        choose_sizes,
        infer_at_sizes,
        over_budget,
        run_need,
        vector_pins,
    )
    from ..verification.structure import same_values
    names = [o.name for o in before_proto.graph.output]
    if names != [o.name for o in after_proto.graph.output]:
        return failed(f"graph outputs differ: {names} vs {[o.name for o in after_proto.graph.output]}")
    if same_values(before_proto, after_proto) and all(kind(s) == "passed" for s in static_checks(after_proto).values()):
        return passed("by structure: every output is computed as before; duplicates merged, dead nodes removed")
    sk = None if sized else skeleton(before_proto)
    try:
        pins = vector_pins(before_proto, vectors or {})
        sizes, shapes = sized or choose_sizes(sk, pins)
    except Skip as exc:
        return skipped(str(exc))
    keys = [k for k in sizes if k not in pins]
    candidates = [sizes] + [{**{k: v for k in keys}, **pins} for v in (4, 6, 8)] + \
                 [{**{k: 2 + i for i, k in enumerate(keys)}, **pins}, {**{k: 4 + 2 * i for i, k in enumerate(keys)}, **pins}]
    load = budget.load_weights
    s_after = None
    rng = np.random.default_rng(seed)
    problem = "no sizes tried"
    for n, cand in enumerate(candidates):
        if n and not keys:
            break
        if n and sk is None:
            sk = skeleton(before_proto)
        got_shapes, bad = (shapes, None) if n == 0 else infer_at_sizes(sk, cand)
        if bad is not None:
            continue
        need = run_need(before_proto, got_shapes, weight_bytes=budget.weight_bytes)
        if need > budget.memory:
            problem = over_budget(need, budget.memory, cand)
            continue
        if s_after is None:
            if run_before is None:
                try:
                    s_before = _session(load(before_proto))
                except Exception as exc:
                    return skipped(f"onnxruntime cannot load the model before cleanup: {_first_line(exc)}")
                run_before = functools.partial(s_before.run, names)
            try:
                s_after = _session(load(after_proto))
            except Exception as exc:
                return failed(f"onnxruntime cannot load the cleaned model: {_first_line(exc)}")
        for _ in range(trials):
            try:
                feeds = random_feeds(before_proto, cand, got_shapes, rng, vectors)
                expected = run_before(feeds)
            except Exception as exc:
                problem = f"the model before cleanup rejects random inputs: {_first_line(exc)}"
                break
            try:
                got = s_after.run(names, feeds)
            except Exception as exc:
                return failed(f"the cleaned model fails where the model before runs: {_first_line(exc)}")
            for name, g, e in zip(names, got, expected):
                g, e = np.asarray(g), np.asarray(e)
                if g.shape != e.shape or g.dtype != e.dtype or (
                        g.tobytes() != e.tobytes() if e.dtype != object else g.tolist() != e.tolist()):
                    return failed(f"output {name!r} differs (shape {g.shape} vs {e.shape}, "
                                  f"dtype {g.dtype} vs {e.dtype})")
        else:
            return PASSED
    return skipped(problem)
