"""What a conversion returns: :class:`ConvertResult` (the converted model, and ``save``) and its
:class:`Report` (per StridedSlice node and for the whole model: the records, every check's
status, the verdict, report.json's content)."""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter

from .io.files import PROTO_LIMIT, input_files, model_weight_bytes, proto_weight_bytes, save_model
from .rewrite.core import RewriteRecord
from .verification.checks import NOT_RUN, PASSED, failed, kind, skipped, verdict
from .verification.runtimes import NOT_ASKED


#: the verdict of a conversion that changed nothing (see Report.verdict)
NOTHING_TO_REWRITE = "nothing to rewrite"


@dataclass
class Report:
    """What a conversion did, per StridedSlice node and for the whole model."""

    source: str | None
    opset: int | None = None
    records: list[RewriteRecord] = field(default_factory=list)
    verify: bool = True             # False: verification off (convert(verify=False), --no-verify)
    strict: bool = False            # a skipped check fails the conversion
    model_checks: dict = field(default_factory=dict)   # name -> passed | failed: .. | skipped: ..
    timings: dict = field(default_factory=dict)
    signatures_checked: int = 0
    inplace_sizes: dict = field(default_factory=dict)  # symbolic dim -> size of the in-place run
    # per-rewrite verification results, keyed by the record's position in ``records`` (the records
    # stay as the rewrite pass made them): its CheckResult, its in-place status
    record_checks: dict = field(default_factory=dict)
    record_inplace: dict = field(default_factory=dict)
    cleanup: dict | None = None   # cleanup.cleanup's report: nodes before/after, removed per pass
    target: str = "onnxruntime"                # lowering/targets.py
    verify_on: tuple = ()                      # runtimes of the per-rewrite checks
    path: str | None = None  # the representation the rewrite ran on: "protobuf" | "onnx-ir" (rewrite/core.py)
    # graph output -> why onnxruntime's as-shipped run disagreed with the checked run on it (those that did)
    shipped_problems: dict = field(default_factory=dict)
    # the slice-update family's rewrites (rewrite/updates.UpdateRecord, made and checked first:
    # api._slice_updates), checked in place with ``records``
    # (verification/records.py), and each one's in-place status by its position in ``updates``
    updates: list = field(default_factory=list)
    update_inplace: dict = field(default_factory=dict)
    # per-rewrite checks left to the as-shipped run (verification/settled_checks.py): position in
    # ``records`` -> its CheckResult (also in ``record_checks``), until api._check_shipped settles them
    awaiting_checks: dict = field(default_factory=dict)
    checks_as_shipped: frozenset = frozenset()  # ... the positions of those it settled (passed as shipped)

    def in_place_records(self) -> list:
        """What the in-place run checks, in the order its statuses are keyed: ``records``, then
        ``updates`` (:meth:`set_inplace`)."""
        return [*self.records, *self.updates] if self.updates else self.records

    def set_inplace(self, statuses: dict) -> None:
        """The in-place run's statuses (position in :meth:`in_place_records` -> status) onto
        ``record_inplace`` and ``update_inplace``."""
        n = len(self.records)
        self.record_inplace = {i: s for i, s in statuses.items() if i < n}
        self.update_inplace = {i - n: s for i, s in statuses.items() if i >= n}

    def tally(self) -> tuple[int, int, int, int]:
        """(found, rewritten, fixable, fixed): the four counts in one pass over the records."""
        found = rewritten = fixable = fixed = 0
        for r in self.records:
            done = r.lowering is not None
            if r.op_type == "StridedSlice":
                found += 1
                rewritten += done
            else:
                fixable += 1
                fixed += done
        return found, rewritten, fixable, fixed

    @property
    def found(self) -> int:
        """StridedSlice nodes found (the model's own Slice/Gather that ``fix_slices`` rewrote:
        :attr:`fixable`)."""
        return self.tally()[0]

    @property
    def rewritten(self) -> int:
        return self.tally()[1]

    @property
    def fixable(self) -> int:
        """Slice/Gather nodes that broke the target and that ``fix_slices`` read as slices."""
        return self.tally()[2]

    @property
    def fixed(self) -> int:
        return self.tally()[3]

    def check_of(self, i: int):
        """The per-rewrite CheckResult of ``records[i]`` (None: not checked)."""
        return self.record_checks.get(i)

    def inplace_of(self, i: int) -> str | None:
        """The in-place status of ``records[i]``: passed | failed: .. | skipped: .. (None: not run)."""
        return self.record_inplace.get(i)

    @property
    def failed_records(self) -> list[RewriteRecord]:
        out = []
        for i, r in enumerate(self.records):
            check, inplace = self.check_of(i), self.inplace_of(i)
            if r.error is not None or (check is not None and not check.ok) or inplace is not None and kind(inplace) == "failed":
                out.append(r)
        return out

    @property
    def invalid_records(self) -> list[RewriteRecord]:
        return [r for r in self.records if r.error_kind == "invalid"]

    def statuses(self) -> list[tuple[str, str]]:
        """Every check as (name, status), the input of :attr:`verdict`."""
        if not self.verify:
            return [("checks", skipped("verification off"))]
        out = list(self.model_checks.items())
        if "shipped" not in self.model_checks:  # "verified" never stands without the as-shipped run
            out.append(("shipped", skipped("the as-shipped run did not run")))
        checks, inplaces, model_run = self.record_checks, self.record_inplace, self.model_checks.get("model_run")
        rewrite_status: dict = {}  # id(CheckResult) -> its status: records of one signature share one
        for i, r in enumerate(self.records):
            if r.error is not None:
                out.append((f"node {r.node!r}", failed(str(r.error))))
                continue
            check = checks.get(i)
            status = rewrite_status.get(id(check))
            if status is None:
                status = rewrite_status[id(check)] = _rewrite_status(check)
            out.append((f"node {r.node!r} rewrite check", status))
            inplace = inplaces.get(i)
            if inplace is not None and not (inplace == model_run and inplace != NOT_RUN and kind(inplace) == "skipped"):
                out.append((f"node {r.node!r} in place", inplace))
        for i, u in enumerate(self.updates):  # (their per-rewrite checks: model_checks["slice_updates"])
            inplace = self.update_inplace.get(i)
            if inplace is not None and not (inplace == model_run and inplace != NOT_RUN and kind(inplace) == "skipped"):
                out.append((f"node {u.node!r} in place", inplace))
        return out

    def rewrites_passed(self) -> bool:
        """Whether every record was rewritten and its per-rewrite check passed (shape and
        values against the reference at the record's own input shape)."""
        return all(r.error is None and kind(_rewrite_status(self.record_checks.get(i))) == "passed"
                   for i, r in enumerate(self.records))

    def _all_passed(self) -> bool:
        """Whether every status :meth:`statuses` lists passed, asked of each distinct status once
        (records share their signature's check and, mostly, one in-place status): the verdict of
        a verified conversion without a (name, status) per rewrite."""
        if not self.verify or "shipped" not in self.model_checks or \
                any(kind(s) != "passed" for s in self.model_checks.values()):
            return False
        if any(r.error is not None for r in self.records):
            return False
        checks = self.record_checks
        if any(i not in checks for i in range(len(self.records))):
            return False  # a record without a per-rewrite check: "skipped: not checked"
        if not _all_rewrites_pass(checks.values()):
            return False
        return all(kind(s) == "passed" for s in {*self.record_inplace.values(), *self.update_inplace.values()})

    def problem(self) -> str:
        """One line: the first failed (or, with ``strict``, skipped) check of a failed conversion."""
        statuses = self.statuses()
        bad = [(n, s) for n, s in statuses if kind(s) == "failed"] or \
              [(n, s) for n, s in statuses if kind(s) == "skipped"]
        if not bad:
            return "no failed check"
        name, status = bad[0]
        more = f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""
        strict = " (--strict)" if kind(status) == "skipped" else ""
        return f"{name}: {status}{strict}{more}"

    @property
    def verdict(self) -> str:
        """"verified" | "nothing to rewrite" | "unverified (<what was skipped and why>)" |
        "failed": the one answer that convert, batch, verify and report.json give.  "nothing
        to rewrite": every check passed, but the conversion replaced nothing (no StridedSlice, no
        slice update), converted no opset and read no framework file (the output is the input): nothing was verified
        because nothing was done."""
        v = "verified" if self._all_passed() else verdict(self.statuses(), strict=self.strict)
        _, rewritten, _, fixed = self.tally()
        changed = rewritten or fixed or {"opset_conversion", "framework", "slice_updates"} & set(self.model_checks)
        if v == "verified" and not changed:  # (framework inputs: tf2onnx converted them, the framework check ran)
            return NOTHING_TO_REWRITE
        return v

    @property
    def verified(self) -> bool:
        return self.verdict == "verified"

    @property
    def ok(self) -> bool:
        return self.verdict != "failed"

    def to_json(self, indent: int | None = 2) -> str:
        """:meth:`to_dict` as JSON text (what ``convert --report`` writes)."""
        import json
        return json.dumps(self.to_dict(), indent=indent)

    def rewrites_json(self) -> list[dict]:
        """Every rewrite as report.json shows it, with its verification results."""
        return [r.to_json(self.check_of(i), self.inplace_of(i)) for i, r in enumerate(self.records)]

    def to_dict(self) -> dict:
        """The report as plain data (JSON types only): checks, verdict, and every rewrite."""
        return {
            "source": self.source, "opset": self.opset, "target": self.target, "verify_on": list(self.verify_on),
                "ok": self.ok, "verified": self.verified,
            "verdict": self.verdict, "strict": self.strict,
            "strided_slice_nodes": self.found, "rewritten": self.rewritten, "path": self.path,
            "fixable_slice_nodes": self.fixable, "fixed": self.fixed,
            "failed": len(self.failed_records), "signatures_checked": self.signatures_checked,
            "model_checks": self.model_checks, "inplace_sizes": self.inplace_sizes,
            "cleanup": self.cleanup,
            "timings_s": {k: round(v, 4) for k, v in self.timings.items()},
            "rewrites": self.rewrites_json(),
            **({"slice_updates": [{"node": u.node, "op_type": u.op_type, "graph": u.graph, "form": u.form,
                                   "check": u.check, "inplace_check": self.update_inplace.get(i)}
                                  for i, u in enumerate(self.updates)]} if self.updates else {}),
        }


#: what :func:`_rewrite_status` reads of a per-rewrite CheckResult
_STATUS_FIELDS = attrgetter("shape_inference", "onnxruntime", "reference_evaluator", "run_time_errors")


def _all_rewrites_pass(checks) -> bool:
    """Whether :func:`_rewrite_status` passes for every one of ``checks`` (CheckResults; None:
    not checked), asked once per distinct set of the statuses it reads: records of one
    signature share their check, and checks settled by the as-shipped run hold equal statuses.
    (A status's text says its kind: equal texts, equal answers.)"""
    seen: set = set()
    for check in checks:
        key = (*_STATUS_FIELDS(check), *check.runtimes.items()) if check is not None else None
        if key not in seen:
            if kind(_rewrite_status(check)) != "passed":
                return False
            seen.add(key)
    return True


def _rewrite_status(check) -> str:
    """A per-rewrite CheckResult (verification/lowerings.py) as one status."""
    if check is None:
        return skipped("not checked")
    if not check.ok:
        parts = [("shape inference", check.shape_inference), ("onnxruntime", check.onnxruntime),
                 ("onnx reference", check.reference_evaluator), *check.runtimes.items()]
        problems = [f"{name}: {status}" for name, status in parts if kind(status) == "failed"]
        return failed("; ".join(problems))
    values = [check.onnxruntime]
    if check.onnxruntime == NOT_ASKED and check.runtimes:  # --verify-on without onnxruntime: the others'
        values = list(check.runtimes.values())
    for status in values:
        if kind(status) == "skipped":
            return status if status != NOT_RUN else skipped("not run")
    if kind(check.run_time_errors) == "skipped" and check.run_time_errors != NOT_RUN:
        return check.run_time_errors
    return PASSED


@dataclass
class ConvertResult:
    model: object  # onnx.ModelProto (external weights stay references to the input's files)
    report: Report
    ir_model: object = None  # the onnx_ir.Model behind ``model`` (None: the protobuf path, see rewrite/proto_pass.py)
    source_folder: object = None  # framework inputs: the private folder holding the external weights (kept with the result)
    inputs: list | None = None  # files.FileId of the files the model was read from (None: ``ir_model``'s)

    def input_files(self) -> list:
        """The files the converted model was read from (model and data files): never written over."""
        return list(self.inputs) if self.inputs is not None else input_files(self.ir_model)

    @property
    def ok(self) -> bool:
        return self.report.ok

    def save(self, path, *, external_data: bool | None = None, protect=(), on_landing=None):
        """Write the converted model atomically (see files.save_model): never over an input
        file, weights the input kept in external data streamed to ``<path>.data``.
        Returns a files.SavedModel.  ``model`` is ``ir_model`` serialized: written as it is when
        no weights move.  A framework input's weights (external data in our private folder, not
        the user's layout) are written into the one file unless they pass protobuf's limit or
        ``external_data`` is True.  ``on_landing``: see files.save_model."""
        if external_data is None and self.source_folder is not None:
            weights = model_weight_bytes(self.ir_model) if self.ir_model is not None else proto_weight_bytes(self.model)
            external_data = weights > PROTO_LIMIT
        if self.ir_model is None:  # the protobuf path: it takes no model with external data
            return save_model(self.model, path, external_data=external_data, protect=[*protect, *self.input_files()],
                              no_external=self.inputs is not None, on_landing=on_landing)
        return save_model(self.ir_model, path, external_data=external_data, protect=protect, proto=self.model,
                          on_landing=on_landing)
