"""Per-rewrite checks of the slice-update family (rewrite/updates.py) against the numpy reference.

Each record's lowering runs alone in onnxruntime, in the configuration users get
(``runtimes.SHIPPED``), on random data (``inputs.random_values``) and, for run-time starts,
on starts drawn in range, at both ends and far out of range on both sides (int32/int64
extremes).  The result must equal the reference of semantics/update.py bitwise (pure data
movement); GELU's and Erfc's float results (:data:`FLOAT_OPS`) are judged by the product's
tolerance rule (``tolerance.agree``) against a float64 evaluation of their definition.  The status is written
into ``record.check`` (a ``status.Status``: passed or failed, with why; skipped, naming
``--verify-memory``, when the tensors of a run at the record's shapes exceed the memory budget:
a declared shape never makes the check allocate past it).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..semantics import update as semantics
from . import runtimes
from .inputs import random_values
from .lowerings import DEFAULT_VERIFY_MEMORY
from .exact import same_bits
from .status import PASSED, detail, failed, kind, passed, skipped
from .tolerance import agree

#: The seams' ops of float arithmetic (judged by the tolerance rule, not bitwise).
FLOAT_OPS = ("TFL_GELU", semantics.ERFC)
#: Starts drawn for a run-time index vector, besides the in-range ones.
_FAR = [-(2 ** 31), -(2 ** 20), -1, 2 ** 20, 2 ** 31 - 1]


def _concrete(shape, sizes: dict) -> tuple[int, ...]:
    if shape is None:  # unknown rank (only an elementwise op, GELU, is rewritten without one)
        return (2, 3)
    out = []
    for d in shape:
        if isinstance(d, int):
            out.append(d)
        else:  # a symbolic dim: one size per name; an unknown one: 2
            out.append(sizes.setdefault(d, 2 + len(sizes) % 2) if d else 2)
    return tuple(out)


def _model(record, shapes: list, types: list):
    from onnx import helper
    produced = {o for n in record.lowering.nodes for o in n.output}
    consts = {t.name for t in record.lowering.initializers}
    read = [i for n in record.lowering.nodes for i in n.input if i and i not in produced and i not in consts]
    inputs = [helper.make_tensor_value_info(name, elem, list(shape))
              for name, shape, elem in zip(record.inputs, shapes, types) if name in read]
    out_elem = types[0] if record.op_type != semantics.STRIDED_SLICE_GRAD else types[-1]
    graph = helper.make_graph(record.lowering.nodes, "check", inputs,
                              [helper.make_tensor_value_info(record.output, out_elem, None)],
                              initializer=record.lowering.initializers)
    opset = max(17, 20 if any(n.op_type == "Gelu" for n in record.lowering.nodes) else 17)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    return model, [i.name for i in inputs]


def _starts(rng, shape, window, given, dtype, draws: int) -> list[np.ndarray]:
    if given is not None:
        return [np.asarray(given, dtype)]
    out = []
    for k in range(draws):
        values = []
        for d, w in zip(shape, window):
            top = d - w
            pool = [0, top, top // 2, top + 1, -1] + _FAR
            values.append(pool[k % len(pool)] if k < len(pool) else int(rng.choice(pool)))
        arr = np.array(values, np.int64)
        if dtype == np.int32:
            arr = np.clip(arr, -(2 ** 31), 2 ** 31 - 1)
        out.append(arr.astype(dtype))
    return out


def _run_bytes(record, shapes: list, dtypes: list) -> int:
    """What one run of the check holds at once: its inputs, and its output twice (onnxruntime's
    and the reference's) -- the output is at most the largest input, except StridedSliceGrad's,
    whose shape is a parameter."""
    sizes = [int(np.prod(s, dtype=np.int64)) * np.dtype(d).itemsize for s, d in zip(shapes, dtypes)]
    out = max(sizes, default=0)
    if record.op_type == semantics.STRIDED_SLICE_GRAD:
        out = int(np.prod(record.params["shape"], dtype=np.int64)) * np.dtype(dtypes[-1]).itemsize
    return sum(sizes) + 2 * out


def check_record(record, *, draws: int = 12, seed: int = 0, memory_budget: int = DEFAULT_VERIFY_MEMORY) -> str:
    """Run ``record``'s lowering against the reference within ``memory_budget`` bytes; returns
    (and stores) the status."""
    from onnx import helper
    rng = np.random.default_rng(seed)
    sizes: dict = {}
    shapes = [_concrete(s, sizes) for s in record.shapes]
    types = list(record.elem_types)
    dtypes = [helper.tensor_dtype_to_np_dtype(t) for t in types]
    need = _run_bytes(record, shapes, dtypes)
    if need > memory_budget:
        record.check = skipped(f"needs ~{-(-need // 2 ** 20)} MiB, budget {memory_budget // 2 ** 20} MiB "
                               "(--verify-memory)")
        return record.check
    model, feeds = _model(record, shapes, types)
    try:
        session = runtimes.onnxruntime_session(model.SerializeToString(), runtimes.SHIPPED)
    except Exception as exc:  # onnxruntime refuses the graph
        record.check = failed(f"onnxruntime refused the lowering ({str(exc).splitlines()[0]})")
        return record.check
    runs = 0
    try:
        for values, expected in _cases(record, rng, shapes, dtypes, draws):
            got = session.run(None, {k: v for k, v in values.items() if k in feeds})[0]
            runs += 1
            verdict = judge(record, got, expected, where(record, values))
            if kind(verdict) != "passed":
                raise AssertionError(detail(verdict))
    except Exception as exc:
        record.check = failed(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return record.check
    rule = "bitwise" if bitwise(record) else "within tolerance"
    record.check = passed(f"{runs} run(s) in onnxruntime equal the reference, {rule}")
    return record.check


def _cases(record, rng, shapes, dtypes, draws: int):
    """(values fed by input name, the reference's output) per run of :func:`check_record`."""
    names = record.inputs
    op = record.op_type
    if op in FLOAT_OPS:
        x = (rng.standard_normal(shapes[0]) * 3).astype(dtypes[0])
        values = {names[0]: x}
        yield values, reference(record, values)
        return
    if op in DYNAMIC_UPDATES:
        plan = record.params["plan"]
        given = plan.starts
        for starts in _starts(rng, shapes[0], shapes[1], given, dtypes[2], draws):
            x, u = random_values(rng, shapes[0], dtypes[0]), random_values(rng, shapes[1], dtypes[1])
            values = {names[0]: x, names[1]: u, names[2]: starts}
            yield values, reference(record, values)
        return
    if op == semantics.XLA_DYNAMIC_SLICE:
        window = tuple(int(v) for v in np.asarray(record.params["sizes"]).reshape(-1))
        for starts in _starts(rng, shapes[0], window, record.params["plan"].starts, dtypes[1], draws):
            values = {names[0]: random_values(rng, shapes[0], dtypes[0]), names[1]: starts}
            yield values, reference(record, values)
        return
    for _ in range(2):
        values = {name: random_values(rng, shape, dtype) for name, shape, dtype in zip(names, shapes, dtypes)}
        yield values, reference(record, values)


# --------------------------------------------------------------------------- the op's reference, from any values
#
# One mapping from a record and the values that reach it to the reference's output, read by the
# per-rewrite check above (drawn values) and by the in-place run (verification/records.py,
# ``UpdateTaps``: the values that reached the rewrite in the converted model's own run).

#: TFLite GELU as tf2onnx leaves it
GELU = "TFL_GELU"
#: the dynamic updates: TensorFlow's and LiteRT's
DYNAMIC_UPDATES = (semantics.XLA_DYNAMIC_UPDATE_SLICE, "TFL_" + semantics.TFLITE_DYNAMIC_UPDATE_SLICE)
#: every op type whose records this module checks (rewrite/updates.py ``SEAMS``)
OPS = (*DYNAMIC_UPDATES, semantics.XLA_DYNAMIC_SLICE, semantics.TENSOR_STRIDED_SLICE_UPDATE,
       semantics.STRIDED_SLICE_GRAD, *FLOAT_OPS)


def _starts_given(record) -> bool:
    """Whether the record's start indices are constants its plan clamped (then the lowering
    reads no index tensor, and the reference takes the clamped starts: clamping is idempotent)."""
    plan = record.params.get("plan")
    return plan is not None and plan.starts is not None


def runtime_inputs(record) -> dict:
    """Input name -> ONNX element type of what reaches ``record``'s rewrite at run time: every
    input but constant start indices (StridedSliceGrad's shape and the specs are parameters)."""
    out = {}
    for k, (name, elem) in enumerate(zip(record.inputs, record.elem_types)):
        if k == len(record.inputs) - 1 and record.op_type in (*DYNAMIC_UPDATES, semantics.XLA_DYNAMIC_SLICE) \
                and _starts_given(record):
            continue  # (the start indices are the last input of both)
        out[name] = elem or 1
    return out


def output_elem(record) -> int:
    """The ONNX element type of ``record``'s output: its first input's (x, value, dy)."""
    return record.elem_types[0] or 1


def bitwise(record) -> bool:
    """Whether ``record``'s output is compared bitwise (data movement), not under the tolerance."""
    return record.op_type not in FLOAT_OPS


def reference(record, values: dict) -> np.ndarray:
    """The reference output of ``record`` on ``values`` (input name -> array; constant start
    indices may be left out).  Raises a StridedSliceError where the framework rejects them."""
    names, op, params = record.inputs, record.op_type, record.params
    if op in FLOAT_OPS:
        x = values[names[0]]
        return semantics.erfc(x) if op == semantics.ERFC else semantics.gelu(x, params["approximate"])
    if op in DYNAMIC_UPDATES:
        starts = values[names[2]] if names[2] in values else np.asarray(params["plan"].starts, np.int64)
        return semantics.dynamic_update_slice(values[names[0]], values[names[1]], starts)
    if op == semantics.XLA_DYNAMIC_SLICE:
        starts = values[names[1]] if names[1] in values else np.asarray(params["plan"].starts, np.int64)
        return semantics.dynamic_slice(values[names[0]], starts, np.asarray(params["sizes"]))
    if op == semantics.STRIDED_SLICE_GRAD:
        return semantics.strided_slice_grad(params["shape"], params["spec"], values[names[0]])
    return semantics.strided_slice_update(values[names[0]], params["spec"], values[names[1]])


def judge(record, got, expected, where: str) -> str:
    """``got`` (the rewrite's output) against the reference's ``expected``: bitwise (shape, dtype,
    bytes), GELU and Erfc under the product's tolerance rule (tolerance.agree)."""
    if not bitwise(record):
        verdict = agree(expected, got)
        return PASSED if verdict.ok else failed(f"{where}: {verdict.detail}")
    return same_bits(got, expected, where)


def where(record, values: dict) -> str:
    """The values that reached ``record``, for a message: shapes, and the start indices."""
    parts = []
    for name in record.inputs:
        if name in values:
            v = np.asarray(values[name])
            small = v.ndim == 1 and v.size <= 8 and v.dtype.kind in "iu"
            parts.append(f"{name} {v.reshape(-1).tolist() if small else list(v.shape)}")
    return ", ".join(parts)


def check_records(records: list, memory_budget: int = DEFAULT_VERIFY_MEMORY) -> list[str]:
    """:func:`check_record` for each record (one session per distinct lowering form and shape)."""
    return [check_record(r, memory_budget=memory_budget) for r in records]


def updates_status(records: list, inplace: dict | None = None) -> str:
    """The ``slice_updates`` model check: what was rewritten into what, each rewrite checked (a
    failed check stops the conversion: api._slice_updates, so every listed one passed), and how
    many the in-place run checked in the converted model (``inplace``: position in ``records`` ->
    in-place status, report.Report.update_inplace; a failure there fails ``model_run``, which
    names it)."""
    forms = Counter((r.op_type, "/".join(r.lowering.describe())) for r in records)
    what = "; ".join(f"{n} {op} as {ops}" for (op, ops), n in sorted(forms.items()))
    done = sum(kind(s) == "passed" for s in (inplace or {}).values())
    unchecked = [r for r in records if kind(r.check) != "passed"]
    if unchecked:  # (only skipped ones reach here: a failed check stopped the conversion)
        first = unchecked[0]
        return skipped(f"{what}: {len(unchecked)} of {len(records)} not checked against the reference "
                       f"(node {first.node!r}: {detail(first.check)}); {done}/{len(records)} checked in place")
    return passed(f"{what}: each checked against the reference in onnxruntime; "
                  f"{done}/{len(records)} checked in place")
