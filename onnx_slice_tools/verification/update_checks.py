"""Per-rewrite checks of the slice-update family (rewrite/updates.py) against the numpy reference.

Each record's lowering runs alone in onnxruntime, in the configuration users get
(``runtimes.SHIPPED``), on random data (``inputs.random_values``) and, for run-time starts,
on starts drawn in range, at both ends and far out of range on both sides (int32/int64
extremes).  The result must equal the reference of semantics/update.py bitwise (pure data
movement); GELU's and Erfc's float results (:data:`FLOAT_OPS`) are judged by the product's
tolerance rule (``tolerance.agree``) against a float64 evaluation of their definition.  The status is written
into ``record.check`` (a ``status.Status``: passed or failed, with why).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..semantics import update as semantics
from . import runtimes
from .inputs import random_values
from .status import failed, passed
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


def check_record(record, *, draws: int = 12, seed: int = 0) -> str:
    """Run ``record``'s lowering against the reference; returns (and stores) the status."""
    from onnx import helper
    rng = np.random.default_rng(seed)
    sizes: dict = {}
    shapes = [_concrete(s, sizes) for s in record.shapes]
    types = list(record.elem_types)
    dtypes = [helper.tensor_dtype_to_np_dtype(t) for t in types]
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
            if record.op_type in FLOAT_OPS:
                verdict = agree(expected, got)
                if not verdict.ok:
                    raise AssertionError(verdict.detail)
            elif got.shape != expected.shape or got.dtype != expected.dtype or got.tobytes() != expected.tobytes():
                raise AssertionError(f"differs from the reference (shape {got.shape} vs {expected.shape})")
    except Exception as exc:
        record.check = failed(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return record.check
    rule = "within tolerance" if record.op_type in FLOAT_OPS else "bitwise"
    record.check = passed(f"{runs} run(s) in onnxruntime equal the reference, {rule}")
    return record.check


def _cases(record, rng, shapes, dtypes, draws: int):
    names = record.inputs
    op = record.op_type
    if op in FLOAT_OPS:
        x = (rng.standard_normal(shapes[0]) * 3).astype(dtypes[0])
        yield {names[0]: x}, (semantics.erfc(x) if op == semantics.ERFC else
                              semantics.gelu(x, record.params["approximate"]))
        return
    if op in (semantics.XLA_DYNAMIC_UPDATE_SLICE, "TFL_" + semantics.TFLITE_DYNAMIC_UPDATE_SLICE):
        plan = record.params["plan"]
        given = plan.starts
        for starts in _starts(rng, shapes[0], shapes[1], given, dtypes[2], draws):
            x, u = random_values(rng, shapes[0], dtypes[0]), random_values(rng, shapes[1], dtypes[1])
            yield {names[0]: x, names[1]: u, names[2]: starts}, semantics.dynamic_update_slice(x, u, starts)
        return
    if op == semantics.XLA_DYNAMIC_SLICE:
        sizes = record.params["sizes"]
        window = tuple(int(v) for v in np.asarray(sizes).reshape(-1))
        for starts in _starts(rng, shapes[0], window, record.params["plan"].starts, dtypes[1], draws):
            x = random_values(rng, shapes[0], dtypes[0])
            yield {names[0]: x, names[1]: starts}, semantics.dynamic_slice(x, starts, np.asarray(sizes))
        return
    spec = record.params["spec"]
    for _ in range(2):
        if op == semantics.STRIDED_SLICE_GRAD:
            dy = random_values(rng, shapes[0], dtypes[0])
            yield {names[0]: dy}, semantics.strided_slice_grad(record.params["shape"], spec, dy)
        else:
            x, v = random_values(rng, shapes[0], dtypes[0]), random_values(rng, shapes[1], dtypes[1])
            yield {names[0]: x, names[1]: v}, semantics.strided_slice_update(x, spec, v)


def check_records(records: list) -> list[str]:
    """:func:`check_record` for each record (one session per distinct lowering form and shape)."""
    return [check_record(r) for r in records]


def updates_status(records: list):
    """The ``slice_updates`` model check: what was rewritten into what, each rewrite checked (a
    failed check stops the conversion: api._slice_updates), so every listed one passed)."""
    forms = Counter((r.op_type, "/".join(r.lowering.describe())) for r in records)
    what = "; ".join(f"{n} {op} as {ops}" for (op, ops), n in sorted(forms.items()))
    return passed(f"{what}: each checked against the reference in onnxruntime")
