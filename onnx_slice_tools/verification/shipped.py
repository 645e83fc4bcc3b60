"""The as-shipped run: the model that will be written, in each runtime's default configuration.

Every other check runs onnxruntime in the FAST configuration (runtimes.session_options: graph
optimisations off) and the in-place run taps intermediate values, which changes what an
optimiser does.  A user runs neither.  So after everything that changes the model (rewrite,
opset conversion, cleanup), the serialization :meth:`api.ConvertResult.save` writes is loaded,
untapped, in each verification runtime's default configuration (onnxruntime:
``InferenceSession(bytes)`` with default SessionOptions -- logging aside -- and default
providers; OpenVINO, when it is one of the report's runtimes: a default CPU compile), run on the
inputs of the checked run (:class:`inplace.CheckedRun`), and every graph output must agree with
that run: shape and dtype exactly, non-float values bitwise, float values under
``tolerance.agree`` (bitwise where the output is pure data movement, see :func:`exact_outputs`).
Where a rewrite's output is such a graph output, the checked run may hold, instead of its own
value, the reference's output from the tensor that reached the rewrite (inplace.start_inplace,
``defer``): this run then also settles that rewrite's in-place check.

What runs is ``proto.SerializeToString()`` -- byte for byte what ``save`` writes when the model
keeps its weights inline.  A model whose weights stay in (or move to) external data is run with
those weights read in inline (``load_weights``): the same graph and the same tensor bytes, only
the tensors' storage differs from the written ``.onnx`` + ``.data`` pair.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..errors import first_line as _line
from .budget import Budget
from .checks import PASSED, failed, passed, skipped
from .exact import FLOAT_ELEMS, MOVEMENT, exact_outputs  # noqa: F401 - re-exported
from .feeds import random_feeds, run_taps
from .inplace import CheckedRun, Digest
from .records import Reference
from .runtimes import (
    FAST,
    ONNXRUNTIME,
    OPENVINO,
    SHIPPED,
    make_session,
    onnxruntime_session,
    release,
)
from .quantized import output_steps, relative_disagreement
from .sizing import Liveness, Skip, choose_sizes, over_budget, run_need
from .tolerance import agree, calibrated_rtol, default_rtol, is_float

#: ONNX integer element types (8 to 64 bits)
INT_ELEMS = frozenset({2, 3, 4, 5, 6, 7, 12, 13})


def serialized(proto, load_weights) -> bytes:
    """The bytes the shipped run loads: ``proto`` serialized, external weights (in any graph
    or function) read in by ``load_weights`` (the identity for a model without them)."""
    return load_weights(proto).SerializeToString()


class SessionAhead:
    """onnxruntime's default-configuration session of the bytes that will ship, built in a
    thread from the moment they are final (onnxruntime releases the GIL while it builds) while
    the other checks run: the as-shipped run then waits only for what is left of it.  It is
    used only for exactly those bytes (:meth:`take` compares them)."""

    def __init__(self, data: bytes):
        import threading
        self.data = data
        self.session: object | None = None
        self.error: Exception | None = None
        self.thread = threading.Thread(target=self._build, name="onnx-slice-tools as-shipped session", daemon=True)
        self.thread.start()

    def _build(self) -> None:
        try:
            self.session = onnxruntime_session(self.data, SHIPPED)
        except Exception as exc:  # the loader's error: raised by take, as a session made then would raise it
            self.error = exc

    def take(self, data: bytes):
        """The session, when ``data`` are the bytes it was built from; else None.  Raises the
        loader's error."""
        self.thread.join()
        if data != self.data:
            return None
        if self.error is not None:
            raise self.error
        session, self.session = self.session, None
        return session

    def close(self) -> None:
        """Wait for the build and drop the session (when the as-shipped run did not take it)."""
        self.thread.join()
        self.session = None


def baseline_run(proto, *, budget: Budget, seed: int = 0) -> CheckedRun | str:
    """A checked run where there is no in-place run (nothing was rewritten, yet the model
    changes: an opset conversion): ``proto`` untapped in a FAST session on random inputs, within
    ``budget`` (verification/budget.py).  Returns the run, or a ``skipped: ...`` status."""
    from ..rewrite.shapes import skeleton
    try:
        sizes, shapes = choose_sizes(skeleton(proto))
    except Skip as exc:
        return skipped(str(exc))
    need = run_need(proto, shapes, weight_bytes=budget.weight_bytes)
    if need > budget.memory:
        return skipped(over_budget(need, budget.memory, {}))
    try:
        feeds = random_feeds(proto, sizes, shapes, np.random.default_rng(seed))
    except Skip as exc:
        return skipped(str(exc))
    outputs = list(dict.fromkeys(o.name for o in proto.graph.output))
    elems = {vi.name: vi.type.tensor_type.elem_type for vi in proto.graph.input}
    elems.update({o: shapes[o][0] for o in outputs if o in shapes})
    try:
        session = onnxruntime_session(serialized(proto, budget.load_weights), FAST)
        got = run_taps(session, feeds, outputs, elems)
    except Exception as exc:  # a model onnxruntime cannot run: reported, not raised
        foreign = foreign_ops(proto)
        return skipped(f"onnxruntime cannot run the model: {_line(exc)}"
                       + (f" (custom ops {', '.join(foreign[:3])})" if foreign else ""))
    return CheckedRun(feeds, got, {k: elems.get(k, 0) for k in [*feeds, *outputs]}, shapes,
                      frozenset(exact_outputs(proto, shapes)))


@dataclass(frozen=True)
class OutputRule:
    """How a run's graph outputs are compared with the checked run's, as one value: ``exact``
    (the outputs of pure data movement: bitwise); ``steps`` ({output name: tolerance.Steps} of the
    quantized outputs: compared in steps); ``relative`` ({output name: the framework's own
    relative disagreement} of float outputs, quantized.relative_disagreement: compared at
    ``tolerance.calibrated_rtol``); ``computes_in`` (a narrower float type the runtime computes in
    -- OpenVINO's CPU plugin defaults to bfloat16 where the CPU has it: float outputs then get
    that type's tolerance)."""

    exact: AbstractSet = frozenset()
    steps: dict = field(default_factory=dict)
    relative: dict = field(default_factory=dict)
    computes_in: Any = None


def compare_outputs(checked: CheckedRun, got: dict, rule: OutputRule) -> str | None:
    """The first graph output of ``got`` that does not agree with the checked run under
    ``rule``, or None."""
    return next(iter(output_problems(checked, got, rule, first=True).values()), None)


def output_problems(checked: CheckedRun, got: dict, rule: OutputRule, first: bool = False,
                    measured: dict | None = None) -> dict:
    """Graph output name -> why it does not agree with the checked run under ``rule``, for each
    output of ``got`` that does not (``first``: only the first one).  ``measured``: filled with
    output name -> the comparison's figures for the quantized outputs that agreed but not bitwise."""
    exact, steps, relative = rule.exact, rule.steps, rule.relative
    problems: dict = {}
    outputs = checked.outputs
    for name, actual in got.items():
        expected = outputs.get(name)
        if isinstance(expected, Reference) and name in exact and actual.__class__ is np.ndarray:
            want = expected.value(copy=False)  # (a deferred slice: equal bytes settle it, as in _problem)
            if want.shape == actual.shape and want.dtype == actual.dtype and want.dtype.kind not in "OUS" \
                    and want.tobytes() == actual.tobytes():
                continue
        problem = _problem(checked, name, actual, exact, rule.computes_in, steps.get(name), measured, relative.get(name))
        if problem is not None:
            problems[name] = problem
            if first:
                break
    return problems


def _problem(checked: CheckedRun, name: str, actual, exact: AbstractSet, computes_in, steps=None,
             measured: dict | None = None, relative: float | None = None) -> str | None:
    if name not in checked.outputs:
        return f"output {name!r} was not produced by the checked run"
    expected = checked.outputs[name]
    if isinstance(expected, Reference):
        expected = expected.value()
    if isinstance(expected, Digest):  # pure data movement, kept as a hash: bitwise
        got = Digest.of(actual)
        if got.shape != expected.shape:
            return f"output {name!r}: shape {expected.shape} vs {got.shape}"
        if got.dtype != expected.dtype:
            return f"output {name!r}: dtype {expected.dtype} vs {got.dtype}"
        if got != expected:
            return f"output {name!r}: values differ (compared bitwise: pure data movement)"
        return None
    actual = np.asarray(actual)
    if name in exact and expected.shape == actual.shape and expected.dtype == actual.dtype \
            and expected.dtype.kind not in "OUS" and expected.tobytes() == actual.tobytes():
        return None  # bitwise equal: nothing more to ask
    if expected.dtype.kind in "OUS" or actual.dtype.kind in "OUS":
        if actual.shape != expected.shape or actual.astype(object).tolist() != expected.astype(object).tolist():
            return f"output {name!r}: strings differ"
        return None
    rtol = None
    if relative is not None and is_float(expected.dtype):
        rtol = calibrated_rtol(expected.dtype, relative)
    if computes_in is not None and expected.dtype.kind in "fc":
        rtol = max(rtol or default_rtol(expected.dtype), default_rtol(computes_in))
    result = agree(expected, actual, exact=name in exact, rtol=rtol, steps=steps)
    if result.ok and steps is not None and not result.bitwise and measured is not None:
        measured[name] = result.detail
    return None if result.ok else f"output {name!r}: {result.detail}"


def foreign_ops(proto) -> list:
    """``domain::op`` of nodes outside the domains onnxruntime implements (main graph, functions)."""
    known = {"", "ai.onnx", "ai.onnx.ml", "com.microsoft", "ai.onnx.preview.training"}
    local = {(f.domain, f.name) for f in proto.functions}
    found = []
    for n in [*proto.graph.node, *(n for f in proto.functions for n in f.node)]:
        if n.domain not in known and (n.domain, n.op_type) not in local:
            found.append(f"{n.domain}::{n.op_type}")
    return list(dict.fromkeys(found))


def shipped_checks(proto, checked: CheckedRun | None, *, runtimes=(ONNXRUNTIME,), budget: Budget,
                   why_none: str | None = None, compared: dict | None = None,
                   liveness: Liveness | None = None, ahead: SessionAhead | None = None,
                   calibration: dict | None = None) -> dict:
    """check name -> status of the as-shipped run of ``proto`` (see the module doc): ``shipped``
    (onnxruntime, always) and ``shipped_openvino`` (when OpenVINO is among ``runtimes``), within
    ``budget`` (verification/budget.py).  ``checked``: the run to agree with; None -> skipped
    with ``why_none``.  ``compared``: filled,
    when onnxruntime's run compared its outputs, with graph output name -> None (agreed) or the
    problem -- what settles the rewrites the in-place run deferred (InplaceRun.settle).
    ``liveness``: ``proto``'s, when the in-place run already read it (sizing.Liveness).
    ``ahead``: onnxruntime's session of these bytes, started earlier (used only if they match).
    ``calibration``: the framework's own disagreement per output (quantized.output_steps): on
    a quantized graph onnxruntime's default optimiser fuses Q/DQ around an op into one integer
    kernel that rounds differently from the checked run's float one; its quantized outputs are
    compared in steps under that allowance, and the steps measured are in the status."""
    names = [ONNXRUNTIME] + [r for r in runtimes if r == OPENVINO]
    label = {ONNXRUNTIME: "shipped", OPENVINO: "shipped_openvino"}
    if checked is None:
        return {label[r]: skipped(why_none or "no checked run to compare with") for r in names}
    outputs = list(dict.fromkeys(o.name for o in proto.graph.output))
    held = checked.held_bytes()
    need = run_need(proto, checked.shapes, weight_bytes=budget.weight_bytes, liveness=liveness) + held
    if need > budget.memory:
        why = skipped(over_budget(need, budget.memory, {}))
        return {label[r]: why for r in names}
    data = serialized(proto, budget.load_weights)
    exact = checked.exact  # decided on the checked model: the cleanup keeps what each output computes
    integers = [o for o in outputs if checked.elems.get(o) in INT_ELEMS]
    table = getattr(liveness, "table", None)  # (proto's main graph, read by the in-place run)
    steps = output_steps(proto, calibration, integers, None if table is None else table.ops)
    rule = OutputRule(exact, steps, relative_disagreement(calibration))
    return {label[r]: _run_one(r, data, proto, checked, outputs, rule, compared if r == ONNXRUNTIME else None,
                               ahead if r == ONNXRUNTIME else None)
            for r in names}


def _run_one(runtime: str, data: bytes, proto, checked: CheckedRun, outputs: list, rule: OutputRule,
             compared: dict | None = None, ahead: SessionAhead | None = None) -> str:
    where = f"{runtime} (default configuration)"
    try:
        session = ahead.take(data) if ahead is not None else None
        if session is None:
            session = onnxruntime_session(data, SHIPPED) if runtime == ONNXRUNTIME else \
                make_session(runtime, data, SHIPPED)
    except Exception as exc:  # the loader's first line is the answer
        foreign = foreign_ops(proto)
        text = f"{where} cannot load the model: {_line(exc)}"
        if foreign:  # ops the runtime does not implement: not something the conversion can prove
            return skipped(f"{text} (custom ops {', '.join(foreign[:3])})")
        return failed(text)
    try:
        if runtime == ONNXRUNTIME:
            got = run_taps(session, checked.feeds, outputs, checked.elems)
        else:
            got = dict(zip(outputs, session.run(outputs, checked.feeds)))
    except Exception as exc:
        return failed(f"{where} fails on the checked run's inputs: {_line(exc)}")
    narrow = session.arithmetic_dtype() if hasattr(session, "arithmetic_dtype") else None
    release(session)
    measured: dict = {}
    problems = output_problems(checked, got, replace(rule, computes_in=narrow), first=compared is None,
                               measured=measured)
    if compared is not None:
        compared.update(dict.fromkeys(got))
        compared.update(problems)
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        return failed(f"{where} disagrees with the checked run: {next(iter(problems.values()))}{more}")
    if measured:  # quantized outputs that agree in steps, not bitwise: the figures are the answer
        return passed("quantized outputs " + "; ".join(f"{k}: {v}" for k, v in measured.items()))
    return PASSED


def converted_check(proto, checked: CheckedRun | None, *, load_weights, why_none: str | None = None) -> str:
    """The opset conversion's own check: ``proto`` (after onnx's version converter) in a FAST
    onnxruntime session on the checked run's inputs, its graph outputs agreeing with that run."""
    if checked is None:
        return skipped(why_none or "no checked run to compare with")
    outputs = list(dict.fromkeys(o.name for o in proto.graph.output))
    try:
        session = onnxruntime_session(serialized(proto, load_weights), FAST)
        got = run_taps(session, checked.feeds, outputs, checked.elems)
    except Exception as exc:
        return failed(f"onnxruntime cannot run the converted model: {_line(exc)}")
    problem = compare_outputs(checked, got, OutputRule(checked.exact))
    return PASSED if problem is None else failed(f"the converted model disagrees with the checked run: {problem}")
