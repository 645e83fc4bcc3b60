"""Per-rewrite checks that the as-shipped run settles (docs/design.md, "Per-rewrite checks the
as-shipped run settles", issue 32).

A per-rewrite check (verification/lowerings.py) runs a rewrite's lowering alone, in onnxruntime,
at a few input shapes, against the plan's reference, bitwise.  The as-shipped run
(verification/shipped.py) runs the saved bytes in onnxruntime's default session, and for a
rewrite the in-place run deferred to it (inplace.start_inplace, ``defer``: a main-graph rewrite
whose output is a graph output of pure data movement) compares that output bitwise with the
reference of the tensor that really reached it.  When every input shape the check would try is
covered by that one run, the check proves nothing more, so it is not run on its own:

* the rewrite is one the in-place run deferred (:meth:`inplace.InplaceRun.deferred_positions`),
  of the main graph, with a static lowering (no runtime begin/end/strides, no ``Shape``-computed
  indices);
* every axis of its input is either a known dim that the check tries at that size only (not one
  of ``lowerings.relaxed_axes``, which the check also tries smaller), or size-free for it
  (``lowerings.size_free_axes``: the lowering and the plan keep it whole at every size, so one
  non-empty size tries them all);
* the whole model's strict shape inference (checks.static_checks) passed and gives its output
  the plan's shape and no declared shape of the node contradicts it (what the check's own shape
  inference would say: :func:`deferrable_checks` asks it of the model that ships).

Such a record gets a CheckResult whose onnxruntime status awaits the as-shipped run
(:data:`AWAITS`); :func:`settle_checks` then passes it only when its in-place status is the
as-shipped pass (inplace.AS_SHIPPED) and the tensor that reached it has every known dim as
declared and every size-free one non-empty.  Any other record -- its as-shipped comparison
skipped, over budget, failed, or run at a shape that does not cover the check's -- is handed
back, and the caller runs its per-rewrite check then (api._check_shipped).  Nothing here says
"passed" before the run that proves it.
"""

from __future__ import annotations

from .checks import passed, skipped
from .inplace import AS_SHIPPED, Reference
from .lowerings import CheckResult, free_and_relaxed, shape_problem
from ..semantics.plan import declared_conflict

#: the onnxruntime status of a per-rewrite check left to the as-shipped run, until it settles it
AWAITS = skipped("awaits the as-shipped run")
#: ... the shape-inference status of such a check: the whole model's, compared with the plan
INFERRED = passed("the whole model's strict shape inference gives the plan's shape")


def _covered(record) -> bool:
    """Whether one run at ``record``'s in-graph shape tries every size its check would (module doc)."""
    lowering, shape = record.lowering, record.input_shape
    if lowering is None or lowering.dynamic or record.index_names or record.graph != "main" or shape is None:
        return False
    free, relaxed = free_and_relaxed(lowering)
    for k, d in enumerate(shape):  # each axis size-free, or a known dim tried at that size only
        if k in free:
            continue
        if not isinstance(d, int) or k in relaxed:
            return False
    return True


def _output_shapes(inferred) -> dict:
    """Graph output name -> its shape in the strict inference's model (dims: int, name or None)."""
    out: dict = {}
    read: dict = {}  # serialized type -> its dims, or None (outputs repeat a few types)
    for vi in inferred.graph.output:
        t = vi.type
        key = t.SerializeToString()
        if key in read:
            out[vi.name] = read[key]
            continue
        tt = t.tensor_type
        out[vi.name] = read[key] = None if not tt.HasField("shape") else \
            tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)
    return out


def deferrable_checks(records: list, deferred, inferred) -> dict:
    """Position in ``records`` -> the awaiting CheckResult of each record whose per-rewrite check
    the as-shipped run will settle (module doc).  ``deferred``: the positions the in-place run
    left to the as-shipped run; ``inferred``: the whole model's strict shape inference (a
    ModelProto; None: it did not pass, and nothing is deferred)."""
    if inferred is None or not deferred:
        return {}
    candidates = [i for i in sorted(deferred) if i < len(records) and records[i].error is None
                  and _covered(records[i])]
    if not candidates:
        return {}
    shapes = _output_shapes(inferred)
    out = {}
    for i in candidates:
        r = records[i]
        got, planned = shapes.get(r.output_name), r.lowering.plan.output_shape
        # (equal shapes agree under either rule: the rules are asked only of different ones)
        if got is None or planned is None or got != planned and shape_problem(got, planned) is not None:
            continue  # (the check's own shape inference says what is wrong, if anything)
        declared = r.declared_output
        if declared is not None and declared != planned and declared_conflict(declared, planned):
            continue
        out[i] = CheckResult(shape_inference=INFERRED, inferred_shape=got, onnxruntime=AWAITS)
    return out


def settle_checks(records: list, awaiting: dict, inplace: dict, checked) -> list:
    """After the as-shipped run: each awaiting CheckResult (``awaiting``, from
    :func:`deferrable_checks`) passes when ``inplace`` (position -> in-place status) holds the
    as-shipped pass for it and the tensor that reached it in ``checked`` (the checked run,
    inplace.CheckedRun, or None) covers the check's sizes.  Returns the positions not settled:
    their per-rewrite checks are still to run."""
    outputs = checked.outputs if checked is not None else {}
    left = []
    said: dict = {}  # (input reached, any size-free axis) -> the status (records share a few)
    # (the record's input shape, the tensor's that reached it) -> the status, or None where that
    # run does not cover the check's sizes: asked once per shape class (records share a few)
    classes: dict = {}
    shapes: dict = {}  # id(reached tensor) -> its shape (many slices read one tensor)
    for i, result in awaiting.items():
        r = records[i]
        ref = outputs.get(r.output_name)
        if inplace.get(i) != AS_SHIPPED or not isinstance(ref, Reference):
            left.append(i)
            continue
        x = ref.x
        reached = shapes.get(id(x))
        if reached is None:
            reached = shapes[id(x)] = tuple(x.shape)
        key: tuple | None = (r.input_shape, reached)
        try:
            status = classes.get(key, False)
        except TypeError:  # (an unhashable declared shape: asked for this record alone)
            key, status = None, False
        if status is False:
            status = _settled_status(r.input_shape, reached, said)
            if key is not None:
                classes[key] = status
        if status is None:
            left.append(i)
            continue
        result.onnxruntime = status
        result.tried_shapes = [reached]
    return left


def _settled_status(shape: tuple, reached: tuple, said: dict) -> str | None:
    """The settled check's status of a record whose input is declared ``shape`` and reached as
    ``reached`` (``said``: the statuses made so far, shared), or None when that run does not
    cover the check's sizes (:func:`_reached_covers`)."""
    if not _reached_covers(shape, reached):
        return None
    free = any(not isinstance(d, int) for d in shape)
    status = said.get((reached, free))
    if status is None:
        status = said[reached, free] = passed(
            f"as shipped: the saved model's default run gave its reference output bitwise at input "
            f"{list(reached)}" + ("; the check's other sizes are of axes nothing reads" if free else ""))
    return status


def _reached_covers(shape: tuple, reached: tuple) -> bool:
    """Each known dim of a record's input (declared ``shape``) as declared in ``reached``, each
    other one non-empty."""
    return len(reached) == len(shape) and all(s == d if isinstance(d, int) else s >= 1 for s, d in zip(reached, shape))
