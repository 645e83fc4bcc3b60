"""The one status vocabulary of every check, and the verdict it adds up to.

Every check -- per rewrite and whole model -- ends as a :class:`Status` (made by
:func:`passed`, :func:`failed` or :func:`skipped`): a ``str`` whose text is ``"passed"``,
``"failed: <why>"`` or ``"skipped: <reason>"`` (what report.json and the CLI print) and which
carries its ``kind`` and ``detail``, so no caller reads a status by its prefix.  :func:`kind`
and :func:`detail` also read a plain string status (older words included), and
:func:`verdict` turns a list of named statuses into the one answer that ``convert``,
``batch``, ``verify`` and report.json all print.  It imports nothing of the package: every
verification module (the runtimes' plumbing included) may use it.
"""

from __future__ import annotations

from collections.abc import Sequence


class Status(str):
    """One check's status: its kind (``"passed"``, ``"failed"`` or ``"skipped"``), its detail
    (the why or the reason), and as a ``str`` its exact text -- ``"passed"``,
    ``"passed (<detail>)"``, ``"failed: <why>"``, ``"skipped: <reason>"`` -- which is what
    report.json and every printed line show.  Build one with :func:`passed`, :func:`failed`
    or :func:`skipped`; read it by ``.kind``, never by the text's prefix."""

    __slots__ = ("kind", "detail")
    kind: str
    detail: str

    def __new__(cls, kind: str, detail: str = "", text: str | None = None):
        if text is None:
            text = (kind if not detail else f"{kind} ({detail})" if kind == "passed"
                    else f"{kind}: {detail}")
        self = super().__new__(cls, text)
        self.kind = kind
        self.detail = detail
        return self

    def __reduce__(self):  # (pickles across the helper processes as itself)
        return (Status, (self.kind, self.detail, str(self)))


def passed(detail: str = "") -> Status:
    """``"passed"``, or ``"passed (<detail>)"``."""
    return Status("passed", detail)


def failed(why: str) -> Status:
    """``"failed: <why>"``."""
    return Status("failed", why)


def skipped(reason: str = "") -> Status:
    """``"skipped: <reason>"`` (``"skipped"`` without one)."""
    return Status("skipped", reason)


PASSED = passed()
NOT_RUN = Status("skipped", "not run", "not run")  # a check that never ran reads as skipped


def kind(status: str | None) -> str:
    """``"passed"``, ``"failed"`` or ``"skipped"`` for any status: a :class:`Status` says
    its own; a plain string (a caller's, or an older word such as ``"ok"``) is read by
    its text."""
    if isinstance(status, Status):
        return status.kind
    if status is None or status == "not run" or status.startswith("skipped"):
        return "skipped"
    if status in ("passed", "ok") or status.startswith(("ok (", "passed (")):
        return "passed"
    return "failed"


def detail(status: str | None) -> str:
    """The why of a failed status, the reason of a skipped one ("" for a plain pass)."""
    if isinstance(status, Status):
        return status.detail
    if status is None:
        return "not run"
    for prefix in ("failed: ", "skipped: ", "skipped", "failed"):
        if status.startswith(prefix):
            return status[len(prefix):]
    if status.startswith("passed (") and status.endswith(")"):
        return status[len("passed ("):-1]
    return "" if status == "passed" else status


def verdict(statuses: Sequence[tuple[str, str | None]], *, strict: bool = False) -> str:
    """``"verified"`` when every check passed, ``"failed"`` when one failed (or, with
    ``strict``, was skipped), else ``"unverified (<what was skipped, why>)"``."""
    kinds = [(name, s, kind(s)) for name, s in statuses]
    if any(k == "failed" for _, _, k in kinds):
        return "failed"
    skipped = [(name, s) for name, s, k in kinds if k == "skipped"]
    if not skipped:
        return "verified"
    if strict:
        return "failed"
    reasons = []
    for name, s in skipped[:3]:
        why = detail(s)
        reasons.append(f"{name} skipped ({why})" if why else f"{name} skipped")
    more = f"; {len(skipped) - 3} more" if len(skipped) > 3 else ""
    return f"unverified ({'; '.join(reasons)}{more})"
