"""The whole-model check, in place: the converted model itself, exactly.

Two proofs together say the converted model computes what the original computes:

* **structure** (verification/structure.py, :func:`structure.structural_diff`): outside the
  replaced StridedSlice nodes nothing changed;
* **rewrites in place** (:func:`run_inplace`): one onnxruntime run of the *converted* model on
  random inputs with, as extra outputs, what reaches each rewrite (data and runtime
  begin/end/strides; a slice update's x, update, starts, value) and what it produces; each
  output must equal, bitwise, the op's reference applied to the tensors that really reached it
  (TFLite GELU: under the float tolerance rule).  What a rewrite taps and how its reference is
  computed are its op's (verification/records.py, one interface); verification/taps.py makes
  the taps, this module runs them (the sizes and the memory budget: verification/sizing.py; the
  random inputs: verification/feeds.py).

No reference evaluator, one session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import threading

import dataclasses
import functools
import itertools

import numpy as np

from .budget import Budget
from .checks import PASSED, detail, failed, kind, passed, skipped
from .exact import exact_outputs, same_bits as same_slice  # noqa: F401 - re-exported
from .feeds import random_feeds, run_taps
from .records import Reference, in_place
from .segments import parted_session
from .sizing import (
    BASE,
    MAX_SIZE,
    Liveness,
    Skip,
    all_sizes_declared,
    choose_sizes,
    declared_shapes,
    dim_key,
    elem_dims,
    elem_size,
    fed_inputs,
    infer_at_sizes,
    inferred_shapes,
    mib,
    over_budget,
    run_need,
    sized_bytes,
    tensor_bytes,
    vector_pins,
)
from .structure import same_values, structural_diff  # noqa: F401 - re-exported
from .taps import CARRIED, STACKED, cap_name, loop_iterations, prune, tap_model
from ..graphs.table import NodeTable
from ..errors import first_line as _line


# --------------------------------------------------------------------------- the run


def _status(checked: list, pending: list, taps, marks: dict, runs: int | None = None) -> str:
    """The in-place status over ``checked`` records, ``pending`` ones not reached (their
    status set here in ``marks``: id(record) -> status)."""
    runs = _RUNS + _BRANCH_RUNS if runs is None else runs
    for r in pending:
        marks[id(r)] = (skipped(f"its If branch was not taken in {runs} runs on random inputs")
                     if id(r) in taps.branch else skipped(f"its Loop ran no iteration in {runs} runs on random inputs")
                     if id(r) in taps.loop else skipped("not run"))
    problems = [f"node {r.node!r}: {detail(marks[id(r)])}" for r in checked
                if marks.get(id(r)) is not None and kind(marks[id(r)]) == "failed"]
    if problems:
        return failed(problems[0] + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""))
    partial = [r for r in checked if id(r) in taps.partial and kind(marks.get(id(r), PASSED)) == "skipped"]
    if partial:
        return skipped(f"{len(partial)} of {len(checked)} rewrites checked on part of their Loop's iterations only: "
                       f"the taps of the others {taps.cut}")
    if pending:
        why = {detail(marks[id(r)]).removeprefix("its ") for r in pending}
        return skipped(f"{len(pending)} of {len(checked)} rewrites not reached ("
                       + (why.pop() if len(why) == 1 else "If branch not taken, Loop not run") + ")")
    return PASSED


def _feeds_key(feeds: dict) -> tuple:
    return tuple((k, v.shape, v.dtype.str, v.tobytes() if v.dtype.kind not in "OUS" else repr(v.tolist()))
                 for k, v in sorted(feeds.items()))


@dataclasses.dataclass(frozen=True)
class Digest:
    """An output kept as shape, dtype and a hash of its bytes: enough to compare an output of
    pure data movement bitwise, without holding it."""

    shape: tuple
    dtype: np.dtype
    sha256: str

    @staticmethod
    def of(arr) -> Digest:
        import hashlib
        arr = np.ascontiguousarray(arr)
        data = arr.tobytes() if arr.dtype.kind not in "OUS" else repr(arr.tolist()).encode()
        return Digest(tuple(arr.shape), arr.dtype, hashlib.sha256(data).hexdigest())


@dataclasses.dataclass
class CheckedRun:
    """A checked run of a model: the inputs it was fed and its graph outputs, the baseline the
    as-shipped run (verification/shipped.py) and the opset conversion's run are compared with."""

    feeds: dict                  # fed input name -> array
    outputs: dict                # graph output name -> array, or a Digest (pure data movement)
    elems: dict                  # fed input / output name -> ONNX element type
    shapes: dict                 # value name -> (elem, dims) at the run's sizes (shape inference)
    exact: frozenset = frozenset()  # graph outputs that are pure data movement (compared bitwise)

    def held_bytes(self) -> int:
        """Bytes of the arrays the run holds (each once: a Reference holds its input tensor)."""
        arrays = {id(a): a for a in (v.x if isinstance(v, Reference) else v for v in self.outputs.values())
                  if isinstance(a, np.ndarray)}
        return sum(a.nbytes for a in arrays.values())


@dataclasses.dataclass
class InplaceResult:
    status: str                                  # passed | failed: .. | skipped: ..
    sizes: dict = dataclasses.field(default_factory=dict)
    estimate_bytes: int = 0
    checked: CheckedRun | None = None            # the first run that ran (its inputs and graph outputs)
    pending: list = dataclasses.field(default_factory=list, repr=False)  # records not reached
    pieces: int = 1                              # runs in pieces (each a subset of the taps and outputs)
    inplace: dict = dataclasses.field(default_factory=dict)  # position in ``records`` -> that rewrite's status


def run_inplace(proto, records: list, *, budget: Budget, seed: int = 0) -> InplaceResult:
    """Check the rewrites of the main graph and of ``If`` branches, ``Loop`` bodies and
    model-local functions called directly in it, in onnxruntime runs of ``proto`` (the converted model, external data not loaded)
    with taps; the result's ``inplace`` maps each rewrite's position in ``records`` to its
    status.  ``records``: StridedSlice rewrite records and slice-update records, each read through
    its op's adapter (verification/records.py).  ``start_inplace(...).result()``."""
    return start_inplace(proto, records, budget=budget, seed=seed).result()


class InplaceRun:
    """The in-place check under way: :func:`start_inplace` builds the tapped model's
    onnxruntime session in a thread (onnxruntime releases the GIL while it builds, and the
    session is most of the check's time), so the caller's other checks run meanwhile;
    :meth:`result` runs and compares."""

    def __init__(self, proto, records: list, *, budget: Budget, seed: int,
                 keep_session: bool = False, defer: bool = False, ahead=None, inferred=None):
        self.proto, self.records = proto, in_place(records)  # (each record's adapter: records.InPlace)
        self.marks: dict = {}  # id(adapter) -> its in-place status (the records themselves stay as the pass made them)
        self.table = NodeTable(proto.graph)  # (read once for every pass over the model's nodes below)
        self.liveness = Liveness(proto, self.table)  # (the memory estimates of every attempt and of the as-shipped run)
        self.kw = dict(budget=budget, seed=seed,
                       keep_session=keep_session, marks=self.marks, defer=defer, liveness=self.liveness,
                       inferred=inferred)
        self.ahead = ahead  # (held for the as-shipped run: see start_inplace)
        self.first = _first_loops(proto, [r for r in self.records if r is not None], self.table)
        self.attempt = _Attempt(proto, self.records, loops=self.first, **self.kw)

    def result(self) -> InplaceResult:
        """Taps through a Loop are stacked per iteration, which fails when a tapped tensor
        changes shape between iterations: then the check runs again with them carried (any
        shapes), and if that fails too, without them (a Loop run by its condition is carried
        from the start: :func:`_first_loops`).  A deferred
        rewrite whose reference raises (or has no defined result) on the run's tensors means the
        random inputs are ones the original rejects: the check runs again without deferring,
        where the converted model's own run shows whether it fails there too (and the sizes
        grow as for any failing run)."""
        result = self.attempt.result()
        deferred = [r for r in self.attempt.checked if id(r) in self.attempt.taps.deferred]
        if any(self.marks.get(id(r)) not in (None, AWAITING) for r in deferred):
            self.kw["defer"] = False
            self.attempt = _Attempt(self.proto, self.records, loops=self.first, **self.kw)
            result = self.attempt.result()
        in_loops = [r for r in self.records if r is not None and id(r) in self.attempt.taps.loop]
        for loops in (CARRIED, None) if self.first == STACKED else (None,):
            if not (kind(result.status) == "skipped" and detail(result.status).startswith("onnxruntime") and in_loops):
                break
            why = skipped(f"taps through the Loop could not run ({detail(result.status)})")
            self.attempt = _Attempt(self.proto, self.records, loops=loops, **self.kw)
            result = self.attempt.result()
            if loops is None:
                for r in in_loops:
                    self.marks[id(r)] = why
                if not self.attempt.checked:  # (every rewrite is in a Loop body: none was checked)
                    result.status = why
        self._awaiting = {self.attempt.taps.deferred[id(r)]: r for r in self.attempt.checked
                         if self.marks.get(id(r)) is AWAITING}
        self.passed = result.status if kind(result.status) == "passed" else None  # (before the as-shipped run)
        if self.awaiting and self.passed is not None:
            result.status = skipped(f"{len(self.awaiting)} rewrites await the as-shipped run")
        result.inplace = self._statuses()
        self.last = result
        return result

    def settle(self, compared: dict | None, why: str = "") -> InplaceResult:
        """After the as-shipped run: the rewrites whose output it gave (``awaiting``: output
        name -> record, their reference outputs in the checked run) get their status from its
        comparison -- ``compared``: output name -> None (agreed) or the problem; None: the
        as-shipped run compared nothing (``why``).  Returns the final result."""
        result = self.last
        if not self._awaiting:
            return result
        for name, r in self._awaiting.items():
            problem = compared.get(name, f"{name!r} is not an output of the saved model") if compared is not None \
                else None
            if compared is None:  # (the same text as the whole check's: the verdict names it once)
                self.marks[id(r)] = skipped(f"left to the as-shipped run, which did not compare ({why})")
            elif problem is not None:
                self.marks[id(r)] = failed(f"as shipped: {problem}")
            else:
                self.marks[id(r)] = AS_SHIPPED
        result.inplace = self._statuses()
        records = [r for r in self.records if r is not None and id(r) in self.marks]
        bad = [r for r in records if kind(self.marks[id(r)]) == "failed"]
        if bad:
            more = f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""
            result.status = failed(f"node {bad[0].node!r}: {detail(self.marks[id(bad[0])])}{more}")
        elif compared is None:
            result.status = skipped(f"left to the as-shipped run, which did not compare ({why})")
        elif self.passed is not None:
            result.status = self.passed
        return result

    def deferred_positions(self) -> frozenset:
        """Positions in ``records`` of the rewrites the first attempt left to the as-shipped run
        (known from the start, before :meth:`result`: verification/settled_checks.py)."""
        deferred = self.attempt.taps.deferred
        return frozenset(i for i, r in enumerate(self.records) if r is not None and id(r) in deferred)

    @property
    def awaiting(self) -> dict:
        """After :meth:`result`: output name -> the record of each rewrite left to the as-shipped run."""
        return {name: r.record for name, r in getattr(self, "_awaiting", {}).items()}

    def _statuses(self) -> dict:
        """Position in ``records`` -> that rewrite's in-place status (those that have one)."""
        return {i: self.marks[id(r)] for i, r in enumerate(self.records) if r is not None and id(r) in self.marks}

    def run_outputs(self):
        """With ``keep_session``, after :meth:`result`: ``feeds -> outputs`` of ``proto``'s own
        graph outputs through the tapped session (taps only add outputs), or None."""
        session = self.attempt.session
        if session is None or self.attempt.taps.deferred:  # (deferred outputs are not computed)
            return None
        return functools.partial(session.run, [o.name for o in self.proto.graph.output])

    def sized(self):
        """(sizes, shapes) that :func:`choose_sizes` chose for ``proto``'s skeleton, or None
        (not chosen: no rewrite to check, or it raised Skip)."""
        shapes = getattr(self.attempt, "shapes", None)
        return None if shapes is None else (self.attempt.sizes, shapes)

    def release(self) -> None:
        self.attempt.session = None

    @property
    def checked(self) -> CheckedRun | None:
        """After :meth:`result`: the first run that ran (inputs and graph outputs), or None."""
        last = getattr(self, "last", None)
        return None if last is None else last.checked


def start_inplace(proto, records: list, *, budget: Budget, seed: int = 0, keep_session: bool = False,
                  defer: bool = False, ahead=None, inferred=None) -> InplaceRun:
    """:func:`run_inplace` begun: the session builds in a thread until ``.result()``.
    ``budget``: the run fits ``budget.memory`` by :func:`run_need` (the weights charged
    ``budget.weight_bytes``: :func:`budget_weight_bytes`); ``budget.load_weights`` reads external
    weights in for a run that fits.

    ``defer``: the caller runs ``proto``'s graph outputs as shipped (verification/shipped.py)
    on this run's inputs and then calls :meth:`InplaceRun.settle`.  A main-graph rewrite whose
    output is a graph output of pure data movement (``exact.exact_outputs``) and no other
    rewrite's input is then not computed here: its reference output, from the tensors that
    reached it here, becomes the checked run's value of that graph output, which the as-shipped
    run must equal bitwise.  (Pure data movement upstream: its input is the same in both runs.)
    The tapped copy keeps only the nodes the remaining taps and graph outputs need.

    ``ahead``: the as-shipped session of ``proto`` (shipped.SessionAhead), already building when
    ``proto`` is the model that ships: held as ``.ahead`` for the as-shipped run.
    ``inferred``: the strict shape inference of ``proto`` (checks.static_checks), if it passed:
    the shapes of a model whose input sizes are all declared."""
    return InplaceRun(proto, records, budget=budget, seed=seed, keep_session=keep_session, defer=defer,
                      ahead=ahead, inferred=inferred)


def _first_loops(proto, records: list, table: NodeTable) -> str:
    """How the first attempt taps Loop bodies: STACKED when every main-graph Loop holding one of
    ``records`` has a trip count known before the run (a constant, or a fed input the random
    inputs draw small), so that its taps can be counted against the budget
    (:meth:`_Attempt._loop_tap_bytes`); else CARRIED, whose taps keep only what fits the budget
    (:func:`taps.carry_through_loop`, ``capped``) -- a Loop run by its condition (tf.while_loop, no
    trip count) may run any number of iterations."""
    graphs = {r.graph for r in records if " > Loop " in r.graph}
    if not graphs:
        return STACKED
    g = proto.graph
    bounded = {t.name for t in g.initializer} | {vi.name for vi in fed_inputs(proto)}
    bounded |= {outs[0] for op, outs in zip(table.ops, table.outputs) if op == "Constant" and outs}
    for k in table.holders:
        node = g.node[k]
        if node.op_type == "Loop" and f"main > Loop {node.name!r}.body" in graphs and \
                not (node.input and node.input[0] in bounded):
            return CARRIED
    return STACKED

#: the in-place status of a rewrite whose output the as-shipped run gives (until InplaceRun.settle)
AWAITING = skipped("awaits the as-shipped run")
#: ... and once the as-shipped run gave its reference output, bitwise: what checked it, said
AS_SHIPPED = passed("as shipped: its reference output, bitwise, in the saved model's default run")


class _Attempt:
    """One tapped model, its session (built in a thread) and its runs.  The session starts
    only once shape inference at the chosen sizes has succeeded (in a helper process):
    onnxruntime's own inference of a model whose dims go negative aborts the process."""

    def __init__(self, proto, records: list, *, loops: str | None, budget: Budget,
                 seed: int, keep_session: bool, marks: dict, defer: bool = False, liveness: Liveness | None = None,
                 inferred=None):
        self.marks = marks  # id(record) -> in-place status, shared with the InplaceRun
        self.inferred = inferred  # the strict shape inference of ``proto`` (a ModelProto), if it passed
        self.liveness = liveness or Liveness(proto)
        self.table = self.liveness.table
        self.proto, self.budget, self.weight_bytes, self.seed = proto, budget.memory, budget.weight_bytes, seed
        self.keep_session = keep_session
        self.loops = loops
        self.session: Any = None
        self.error: Exception | None = None
        self.thread: threading.Thread | None = None
        self.skip: InplaceResult | None = None
        self.sk: Any = None
        self.sized: tuple[dict, dict] | Skip | None = None  # choose_sizes' answer, once (_sizes)
        self.exact: frozenset | None = None  # outputs of pure data movement (_deferrable)
        self.outputs: list | None = None  # graph_outputs()
        self.own: int | None = None  # bytes of the model's own run at the chosen sizes
        self.vectors: dict = {}
        self.pins: dict = {}
        rewritten = [r for r in records if r is not None]  # (records.InPlace adapters; None: not rewritten)
        self.rewritten = rewritten  # whose runtime index inputs fix input lengths (_sizes)
        deferred = self._deferrable(rewritten) if defer else frozenset()
        self.tapped, self.taps = tap_model(proto, rewritten, loops, deferred, self.table)
        self.checked = [r for r in rewritten if id(r) in self.taps.views]
        for r in rewritten:
            if id(r) not in self.taps.views:
                marks[id(r)] = skipped(f"inside {r.graph} (only the per-rewrite check covers it)")
        if not self.checked:
            self.skip = InplaceResult(skipped("no rewrite in the main graph, its If branches, Loop bodies or the "
                                              "functions it calls") if rewritten else PASSED)
            return
        self._prepare(budget.load_weights)

    def _sizes(self) -> tuple[dict, dict]:
        """:func:`choose_sizes` of ``proto``'s skeleton, once (Skip raised each time asked).
        A model whose every input has its sizes declared has nothing to choose: the strict
        shape inference of its bytes (``inferred``, from the static checks) gives the shapes."""
        if self.sized is None:
            from .input_ranges import index_vectors
            self.vectors, problem = index_vectors(self.proto, [r.vectors for r in self.rewritten if r.vectors])
            try:
                if problem is not None:
                    raise Skip(problem)
                self.pins = vector_pins(self.proto, self.vectors)
                if self.inferred is not None and not self.pins and all_sizes_declared(self.proto):
                    self.sized = ({}, declared_shapes(self.proto, self.inferred))
                else:
                    self.sized = choose_sizes(self.skeleton(), self.pins, self.table)
            except Skip as exc:
                self.sized = exc
        if isinstance(self.sized, Skip):
            raise self.sized
        return self.sized

    def skeleton(self):
        """``proto``'s skeleton (rewrite.shapes.skeleton), made once when first asked."""
        if self.sk is None:
            from ..rewrite.shapes import skeleton
            # (the table's holders: no main-graph node holds a subgraph, none is walked for one)
            self.sk = skeleton(self.proto, has_subgraphs=None if self.table is None else bool(self.table.holders))
        return self.sk

    def _deferrable(self, rewritten: list) -> frozenset:
        """Outputs of main-graph rewrites that the as-shipped run can give (see start_inplace)."""
        outputs = set(self.graph_outputs())
        # (records.InPlace.deferrable: e.g. not with runtime begin/end/strides, whose random values
        # the original rejects must be seen to fail in the converted model's own run)
        candidates = [r for r in rewritten if r.graph == "main" and r.output in outputs and r.deferrable]
        if not candidates:
            return frozenset()
        try:
            _, shapes = self._sizes()
        except Skip:
            return frozenset()  # (_prepare skips with the reason)
        self.own = run_need(self.proto, shapes, weight_bytes=self.weight_bytes, liveness=self.liveness)
        if self.own > self.budget:  # the as-shipped run will not fit at these sizes: every rewrite checked here
            return frozenset()
        self.exact = frozenset(self.exact_outputs(shapes))
        read = {n for r in rewritten for n in r.reads}
        return frozenset(r.output for r in candidates if r.output in self.exact and r.output not in read)

    def _prepare(self, load_weights) -> None:
        import threading
        self.load_weights = load_weights
        try:
            self.sizes, self.shapes = self._sizes()
        except Skip as exc:
            self.skip = self._skip_all(str(exc))
            return
        self.need = self._loop_charge(self.sizes, run_need(self.proto, self.shapes, self.taps.names,
                                                           weight_bytes=self.weight_bytes, liveness=self.liveness))
        self.pieces: list[list[str] | None] = [None]  # [None]: one run fetching every tap and graph output
        if self.need > self.budget:
            problem = self._in_pieces()
            if problem is not None:
                self.skip = self._skip_all(problem)
                return
        if self.pieces == [None] and self.taps.deferred and self._echoes():
            self.session = _Echo()  # (nothing for onnxruntime to compute: no session to build)
            return

        def build():
            try:
                self.session = self._session(0)
            except Exception as exc:  # reported by result()
                self.error = exc
        self.thread = threading.Thread(target=build, name="onnx-slice-tools in-place session", daemon=True)
        self.thread.start()

    def _echoes(self) -> bool:
        """The tapped copy computes nothing: it has no nodes and each of its outputs is one of
        its fed inputs (every rewrite left to the as-shipped run, the taps their data inputs).
        Its run would give back the random inputs it is fed: :class:`_Echo` gives them."""
        g = self.tapped.graph
        if len(g.node):
            return False
        fed = {vi.name for vi in self.liveness.fed()}
        return all(vi.name in fed for vi in g.output)

    def _loop_charge(self, sizes: dict, need: int) -> int:
        """``need`` (a run's need without its Loop taps) plus what the Loop taps hold: STACKED,
        :meth:`_loop_tap_bytes`; CARRIED, the room the budget leaves, shared by the carried taps
        (twice each one's cap: the elements kept and the copy appending to them), written into
        their cap initializers (:func:`carry_through_loop`)."""
        if not self.taps.loop:
            return need
        if self.loops != CARRIED:
            return need + self._loop_tap_bytes(sizes)
        if self.tapped is None:  # (its session is built: the caps are in it)
            return need + 2 * getattr(self, "caps_bytes", 0)
        share = max(0, self.budget - need) // (2 * len(self.taps.carried))
        caps = {cap_name(flat): max(0, share // elem_size(self.taps.elems.get(flat, 1))) for flat in self.taps.carried}
        for t in self.tapped.graph.initializer:
            if t.name in caps:
                del t.int64_data[:]
                t.int64_data.append(caps[t.name])
        self.caps_bytes = share * len(self.taps.carried)
        self.taps.cut = (f"exceed their share of the memory budget ({mib(share)} MiB a tap of "
                         f"{mib(self.budget)} MiB, --verify-memory)")
        return need + 2 * self.caps_bytes

    def _loop_tap_bytes(self, sizes: dict) -> int:
        """What the Loop taps hold at ``sizes`` (:meth:`Liveness.peak` sees only their main-graph
        names, of no known shape): each tapped body tensor's bytes, by shape inference of the
        bodies at these sizes, times twice the Loop's trip count -- every iteration's copy, and
        the stacked (or carried) tensor made of them.  The trip count: a constant's value, or
        for a fed input the largest small integer the random inputs draw (inputs.SMALL_INTS) -- a
        Loop run by its condition is tapped CARRIED, within caps (:func:`_first_loops`); a body
        tensor of unknown size counts none (docs/design.md, "Slice updates in place")."""
        if not self.taps.loop:
            return 0
        from ..graphs.shape_inference import infer
        from .inputs import SMALL_INTS
        try:
            inferred = infer(sized_bytes(self.skeleton(), sizes))
        except Exception:  # (the run's own inference reports it)
            return 0
        g = inferred.graph
        consts = {t.name: t for t in g.initializer}
        consts.update({n.output[0]: a.t for n in g.node if n.op_type == "Constant" for a in n.attribute
                       if a.name == "value"})
        fed = {vi.name for vi in fed_inputs(inferred)}
        shapes = dict(inferred_shapes(inferred)[0])
        total = 0
        for node in g.node:
            if node.op_type != "Loop" or node.name not in self.taps.loop_nodes:
                continue
            body = next(a.g for a in node.attribute if a.name == "body")
            for vi in itertools.chain(body.input, body.value_info, body.output):
                known = elem_dims(vi.type)
                if known is not None and None not in known[1] and all(d >= 0 for d in known[1]):
                    shapes[vi.name] = known
            trips = 1
            if node.input and node.input[0] in consts:
                from onnx import numpy_helper
                trips = max(1, int(numpy_helper.to_array(consts[node.input[0]]).reshape(-1)[0]))
            elif node.input and node.input[0] in fed:
                trips = max(1, SMALL_INTS[1])
            names = {orig for r in self.checked if id(r) in self.taps.loop for orig in self.taps.views[id(r)]
                     if r.graph.endswith(f"Loop {node.name!r}.body")}
            per_iteration = sum(tensor_bytes(shapes[n]) for n in names
                                if n in shapes and None not in shapes[n][1])
            total += 2 * trips * per_iteration
        return total

    def _in_pieces(self) -> str | None:
        """Split the run into pieces that each fit the budget: each piece a copy of the tapped
        model whose graph outputs are some of the taps (all of a rewrite's together) and of the
        model's own outputs.  When the model's own outputs at the chosen sizes do not fit
        (the as-shipped run computes them all at once), symbolic dims at 3 go down to 1 where
        shapes stay valid.  Returns the reason it cannot, or None (``self.pieces`` set)."""
        left = set(self.taps.deferred.values())
        outputs = [o for o in self.graph_outputs() if o not in left]
        own = self.own if self.own is not None else \
            run_need(self.proto, self.shapes, weight_bytes=self.weight_bytes, liveness=self.liveness)
        if own > self.budget:
            smaller = dict(self.sizes)
            for k, v in self.sizes.items():
                if v == BASE and k not in self.pins:
                    trial = dict(smaller, **{k: 1})
                    got, bad = infer_at_sizes(self.skeleton(), trial, self.table)
                    if bad is None:
                        smaller, self.shapes = trial, got
            self.sizes = smaller
            self.need = self._loop_charge(self.sizes, run_need(self.proto, self.shapes, self.taps.names,
                                                               weight_bytes=self.weight_bytes, liveness=self.liveness))
            if self.need <= self.budget:
                return None
        base = run_need(self.proto, self.shapes, weight_bytes=self.weight_bytes, outputs=False,
                        liveness=self.liveness)
        room = self.budget - base
        units = [[*self.taps.views[id(r)].values(), *([self.taps.branch[id(r)][0]] if id(r) in self.taps.branch else []),
                  *(n for view in self.taps.calls.get(id(r), ()) for n in view.values())] for r in self.checked]
        placed = {n for unit in units for n in unit}
        units += [[o] for o in outputs if o not in placed]
        pieces: list[list[str]] = []
        current: list[str] = []
        seen: set[str] = set()
        used = 0
        for unit in units:
            new = [n for n in dict.fromkeys(unit) if n not in seen]
            if any(self.shapes.get(n, (0, None))[1] is None or None in self.shapes[n][1] for n in new):
                return f"{over_budget(self.need, self.budget, self.sizes)}; a tap of unknown size prevents a run in pieces"
            size = sum(tensor_bytes(self.shapes[n]) for n in new)
            if current and used + size > room:
                pieces.append(current)
                current, used, seen = [], 0, set()
                new = list(dict.fromkeys(unit))
                size = sum(tensor_bytes(self.shapes[n]) for n in new)
            if size > room:
                return f"{over_budget(base + size, self.budget, self.sizes)} (one rewrite's tensors)"
            current += new
            seen.update(new)
            used += size
        pieces.append(current)
        self.pieces = list(pieces)
        self.need = base + max(sum(tensor_bytes(self.shapes[n]) for n in piece) for piece in pieces)
        return None

    def _session(self, k: int):
        """The FAST session of piece ``k`` (the whole tapped model when not in pieces)."""
        piece = self.pieces[k]
        model = self.tapped
        if piece is not None:
            import onnx
            model = onnx.ModelProto()
            model.CopyFrom(self.tapped)
            keep = set(piece)
            outs = [vi for vi in self.tapped.graph.output if vi.name in keep]
            del model.graph.output[:]
            model.graph.output.extend(outs)
            prune(model.graph)
        model = self.load_weights(model)
        if piece is None:  # (a large model: its session in consecutive parts, segments.parted_session)
            elems = {name: elem for name, (elem, _) in self.shapes.items()}
            elems.update(self.taps.elems)
            try:
                parted = parted_session(model, elems, _make_session)
            except Exception:  # (a part onnxruntime cannot load: one session of the whole model)
                parted = None
            if parted is not None:
                return parted
        return _make_session(model)

    def _skip_all(self, why: str) -> InplaceResult:
        for r in self.checked:
            self.marks[id(r)] = skipped(why)
        return InplaceResult(skipped(why))

    def result(self) -> InplaceResult:
        if self.thread is not None:
            self.thread.join()
            self.thread = None
        if self.skip is not None:
            self.tapped = None
            return self.skip
        if self.error is not None:
            self.tapped = None
            return self._skip_all(f"onnxruntime cannot load the tapped model: {_line(self.error)}")
        taps = self.taps
        elems = {vi.name: vi.type.tensor_type.elem_type for vi in self.liveness.fed()}
        elems.update({name: self.shapes[name][0] for name in [*taps.names, *self.graph_outputs()]
                      if name in self.shapes})
        elems.update(taps.elems)
        if self.pieces == [None]:
            self.tapped = None
            result = self._runs(elems, self.checked, None)
        else:
            result = self._runs_in_pieces(elems)
        if not self.keep_session or taps.loop or taps.deferred or self.pieces != [None]:
            self.session = None  # (Loop taps stack per iteration: they can fail where the model runs)
        return result

    def _runs_in_pieces(self, elems: dict) -> InplaceResult:
        """:meth:`_runs` per piece (the same seed: the same random inputs), each piece's session
        built when the previous one is released; one status over every rewrite."""
        results = []
        try:
            for k, piece in enumerate(p for p in self.pieces if p is not None):  # (in pieces: all lists)
                if k:
                    self.session = None
                    try:
                        self.session = self._session(k)
                    except Exception as exc:
                        return self._skip_all(f"onnxruntime cannot load the tapped model: {_line(exc)}")
                names = set(piece)
                records = [r for r in self.checked if set(self.taps.views[id(r)].values()) <= names
                           and (id(r) not in self.taps.calls or all(set(v.values()) <= names
                                                                   for v in self.taps.calls[id(r)]))]
                result = self._runs(elems, records, piece)
                if kind(result.status) == "skipped":  # (skip_all: every rewrite says why)
                    return result
                results.append(result)
        finally:
            self.tapped = None
        checked = [x.checked for x in results]
        first = checked[0]
        if first is None or any(c is None or _feeds_key(c.feeds) != _feeds_key(first.feeds) for c in checked):
            first = None
        else:
            for c in checked[1:]:
                if c is not None:
                    first.outputs.update(c.outputs)
        status = _status(self.checked, [r for x in results for r in x.pending], self.taps, self.marks)
        if status == PASSED:
            status = passed(f"in {len(self.pieces)} pieces within the memory budget")
        return InplaceResult(status, results[-1].sizes, self.need, first, pieces=len(self.pieces))

    def _runs(self, elems: dict, checked: list, piece: list | None) -> InplaceResult:
        """Runs on fresh random inputs until every one of ``checked`` was reached (or the runs
        are spent), fetching ``piece`` (None: every tap and graph output)."""
        proto, taps, memory_budget, weight_bytes, seed = self.proto, self.taps, self.budget, self.weight_bytes, self.seed
        session, sizes, shapes, need, skip_all = self.session, self.sizes, self.shapes, self.need, self._skip_all
        rng = np.random.default_rng(seed)
        # deferred rewrites are in the main graph: reached by the first run, their references made together
        waiting = [r for r in checked if id(r) in taps.deferred]
        pending, runs, first = [r for r in checked if id(r) not in taps.deferred], 0, None
        if piece is None:  # graph outputs live to the end anyway
            left = set(taps.deferred.values())
            fetch = [*taps.names, *(o for o in self.graph_outputs() if o not in taps.seen and o not in left)]
        else:
            fetch = list(piece)
        fetched = set(fetch)
        outputs = [o for o in self.graph_outputs() if o in fetched]
        deferred = [taps.deferred[id(r)] for r in checked if id(r) in taps.deferred]
        while (pending or waiting or first is None) and runs < _RUNS + _BRANCH_RUNS:
            runs += 1
            try:
                feeds = random_feeds(proto, sizes, shapes, rng, self.vectors, self.liveness.fed())
            except Skip as exc:
                return skip_all(str(exc))
            try:
                got = run_taps(session, feeds, fetch, elems)
            except Exception as exc:  # grow the dims that reach the failing node
                if len(pending) + len(waiting) < len(checked):
                    break  # an earlier run checked some: the rest stay "not reached"
                shown = ", ".join(f"{k}{list(v.shape)}" for k, v in feeds.items())
                failure = f"onnxruntime fails on random inputs ({shown}): {_line(exc)}"
                at = _failing_node(str(exc))
                if self.loops == STACKED and at in taps.loop_nodes:
                    return skip_all(failure)  # (stacking may be what fails: the next attempt carries them)
                grow = [k for k in _dims_reaching(proto, at) if k not in self.pins]
                if not grow or runs >= _RUNS or any(sizes[k] * 4 > MAX_SIZE for k in grow) or piece is not None:
                    return skip_all(failure)
                sizes = dict(sizes, **{k: sizes[k] * 4 for k in grow})
                shapes, bad = infer_at_sizes(self.skeleton(), sizes, self.table)
                need = self._loop_charge(sizes, run_need(proto, shapes, taps.names, weight_bytes=weight_bytes,
                                                         liveness=self.liveness))
                if bad is not None:
                    return skip_all(f"{failure}; larger sizes give invalid shapes ({bad})")
                if need > memory_budget:
                    return skip_all(f"{failure}; larger sizes: {over_budget(need, memory_budget, sizes)}")
                continue
            made = first is None
            if made:
                exact = self.exact if self.exact is not None else frozenset(self.exact_outputs(shapes))
                inputs = {n: got[n] for r in waiting for n in taps.views[id(r)].values()}  # (the deferred: first run)
                held = sum(a.nbytes for a in {id(a): a for a in [*(got[o] for o in outputs), *inputs.values()]
                                              if isinstance(a, np.ndarray)}.values())
                digest = piece is not None or need + held > memory_budget  # else kept: no hashing
                first = CheckedRun(feeds, {o: Digest.of(got[o]) if digest and o in exact else got[o] for o in outputs},
                                   {k: elems.get(k, 0) for k in [*feeds, *outputs, *deferred]}, shapes, exact)
            expected: dict = {}
            if waiting:
                _defer_all(waiting, got, self.marks, expected)
                waiting = []
            pending = [r for r in pending if not _check_if_reached(r, got, taps, self.marks, expected)]
            if made and first is not None:  # deferred rewrites are in the main graph: reached by the first run
                first.outputs.update((o, Digest.of(v.value()) if digest else v) for o, v in expected.items())
            del got
        self.sizes, self.shapes = sizes, shapes  # (grown, for later pieces)
        if waiting:  # (no run ran: every rewrite is still pending, in ``checked``'s order)
            left = {id(r) for r in (*pending, *waiting)}
            pending = [r for r in checked if id(r) in left]
        if piece is not None:
            return InplaceResult(PASSED, sizes, need, first, pending=pending)
        return InplaceResult(_status(checked, pending, taps, self.marks, runs), sizes, need, first, pending=pending)

    def exact_outputs(self, shapes: dict) -> set:
        """The model's graph outputs that are pure data movement (exact.exact_outputs): kept as digests."""
        return exact_outputs(self.proto, shapes, self.table, self.graph_outputs())

    def graph_outputs(self) -> list:
        """The names of the model's own graph outputs (each once), read once."""
        if self.outputs is None:
            self.outputs = list(dict.fromkeys(o.name for o in self.proto.graph.output))
        return self.outputs


class _Echo:
    """The run of a tapped copy with no nodes whose outputs are its fed inputs (``_Attempt._echoes``),
    without onnxruntime: each output is a copy of its feed, as onnxruntime returns it (the
    OrtValue path gives back the OrtValue fed, read by the one codec as any output is)."""

    def run(self, names: list, feeds: dict) -> list:
        return [np.array(feeds[n], copy=True) for n in names]

    def run_with_ort_values(self, names: list, feeds: dict) -> list:
        return [feeds[n] for n in names]


def _make_session(model):
    """A session that logs nothing: a failing run (random inputs a model rejects) is an
    expected outcome here, reported in the status, never on stderr."""
    from .runtimes import onnxruntime_session
    return onnxruntime_session(model)


def _defer_all(records: list, got: dict, marks: dict, expected: dict) -> None:
    """:func:`_defer` each of the deferred rewrites ``records`` on this run's tensors."""
    for r in records:
        _defer(r, got, marks, expected)


def _defer(r, got: dict, marks: dict, expected: dict) -> None:
    """A deferred rewrite (``taps.deferred``) on this run's tensors: its reference output goes to
    ``expected`` (output name -> Reference) and its mark is AWAITING, or its mark is the status
    that settles it without a comparison."""
    settled, reference, _ = r.expected(got)
    if settled is None:
        expected[r.output] = reference
        marks[id(r)] = AWAITING
    else:
        marks[id(r)] = settled


def _check_if_reached(r, got: dict, taps, marks: dict, expected: dict) -> bool:
    """Check ``r`` on this run's tensors if they reached it (its If branch ran); sets marks[id(r)].
    A deferred rewrite (``taps.deferred``) is not compared here: its reference output goes to
    ``expected`` (output name -> array) and its mark is AWAITING."""
    if id(r) in taps.deferred:  # a main-graph rewrite: its tensors are fetched under their own names
        _defer(r, got, marks, expected)
        return True
    if id(r) in taps.branch:
        cond, then = taps.branch[id(r)]
        if bool(np.asarray(got[cond]).reshape(-1)[0]) != then:
            return False
    if id(r) in taps.calls:  # one view per call of the function
        reached = False
        for view in taps.calls[id(r)]:
            marks[id(r)] = r.check({orig: got[name] for orig, name in view.items()})
            reached = True
            if marks[id(r)] != PASSED:
                break
        return reached
    if id(r) in taps.loop:  # per iteration
        fetched = {orig: loop_iterations(got, name, taps.carried) for orig, name in taps.views[id(r)].items()}
        iterations = min(len(v) for v in fetched.values()) if fetched else 0
        cut = any(not bool(np.asarray(got[taps.recording[name]]).reshape(-1)[0])
                  for name in taps.views[id(r)].values() if name in taps.recording)
        for k in range(iterations):
            marks[id(r)] = r.check({orig: v[k] for orig, v in fetched.items()})
            if marks[id(r)] != PASSED:
                marks[id(r)] = failed(f"iteration {k}: {detail(marks[id(r)])}")
                break
        else:
            if cut:
                taps.partial.add(id(r))
            if cut and not iterations:
                marks[id(r)] = skipped(f"not checked in place: the taps of its Loop's first iteration {taps.cut}")
            elif cut:  # (a failure above stands: it is one)
                marks[id(r)] = skipped(f"checked in place on {iterations} of its Loop's iterations only (passed, the "
                                       f"first ones): the taps of the others {taps.cut}")
        return iterations > 0 or cut
    view = {orig: got[fetched] for orig, fetched in taps.views[id(r)].items()}
    marks[id(r)] = r.check(view)
    return True


#: onnxruntime runs of one in-place check (each failed run grows the dims reaching the failing node)
_RUNS = 6
#: further runs (fresh random inputs) to reach rewrites in If branches not taken yet
_BRANCH_RUNS = 4


def _failing_node(message: str) -> str | None:
    import re
    m = re.search(r"node\. Name:'([^']*)'", message)
    return m.group(1) if m else None


def _dims_reaching(proto, node_name: str | None) -> list:
    """Symbolic dim keys of the fed inputs upstream of the node named ``node_name``."""
    if node_name is None:
        return []
    producer = {o: n for n in proto.graph.node for o in n.output}
    start = next((n for n in proto.graph.node if n.name == node_name), None)
    if start is None:
        return []
    fed = {vi.name: vi for vi in fed_inputs(proto)}
    seen, todo, keys = set(), list(start.input), []
    while todo:
        name = todo.pop()
        if name in seen or not name:
            continue
        seen.add(name)
        if name in fed:
            vi = fed[name]
            for k, d in enumerate(vi.type.tensor_type.shape.dim):
                if not d.HasField("dim_value") and dim_key(vi, k, d) not in keys:
                    keys.append(dim_key(vi, k, d))
        elif name in producer:
            todo.extend(producer[name].input)
    return keys
