"""Model checks of a converted model and the one status vocabulary of every check.

Every check -- per rewrite and whole model -- ends as a :class:`Status` (made by
:func:`passed`, :func:`failed` or :func:`skipped`): a ``str`` whose text is ``"passed"``,
``"failed: <why>"`` or ``"skipped: <reason>"`` (what report.json and the CLI print) and which
carries its ``kind`` and ``detail``, so no caller reads a status by its prefix.  :func:`kind`
and :func:`detail` also read a plain string status (older words included), and
:func:`verdict` turns a list of named statuses into the one answer that ``convert``,
``batch``, ``verify`` and report.json all print.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..errors import first_line as _first_line

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


def static_checks(proto, original=None, *, inferred: list | None = None) -> dict:
    """onnx.checker and strict shape inference of ``proto`` on its weightless skeleton (no
    weight is read).  A failure the ``original`` (ModelProto or path) shares is
    ``skipped: the original fails it too: ...`` -- it does not fail the conversion, and it
    proves nothing.  Both checks read one serialization of the skeleton.  ``inferred``: a list
    that gets the strict inference's model (a ModelProto) when it passed."""
    import onnx
    from ..graphs.shape_inference import infer
    loaded: list = []

    def original_bytes():  # read only when needed, without external data
        if not loaded:
            is_path = isinstance(original, (str, os.PathLike))
            loaded.append(skeleton_bytes(onnx.load(str(original), load_external_data=False) if is_path else original))
        return loaded[0]

    data = skeleton_bytes(proto)
    checks = {}
    for name, fn in (("checker", onnx.checker.check_model),
                     ("strict_shape_inference", lambda p: infer(p, strict=True))):
        try:
            got = fn(data)
            checks[name] = PASSED
            if inferred is not None and got is not None:
                inferred.append(got)
        except Exception as exc:
            problem = _first_line(exc)
            checks[name] = failed(problem)
            if original is None:
                continue
            try:
                fn(original_bytes())
            except Exception as orig_exc:
                if _first_line(orig_exc) == problem:
                    checks[name] = skipped(f"the original fails it too: {problem}")
    return checks


def skeleton_bytes(proto) -> bytes:
    """``proto`` serialized with its external initializers as typed graph inputs
    (rewrite.weightless): the proto itself when it has none (no copy)."""
    import onnx
    from ..rewrite.shapes import weightless
    if not any(t.data_location == onnx.TensorProto.EXTERNAL for t in proto.graph.initializer):
        return proto.SerializeToString()
    sk = onnx.ModelProto()
    sk.CopyFrom(proto)
    return weightless(sk).SerializeToString()


def check_model(proto, original=None) -> dict:
    """The static checks (:func:`static_checks`) plus "onnxruntime loads it" (weights read;
    for whole-model runs, see verification/inplace.py).  Returns check name -> status."""
    from .lowerings import make_session
    checks = static_checks(proto, original)
    try:
        make_session(proto.SerializeToString())
        checks["onnxruntime_load"] = PASSED
    except Exception as exc:
        checks["onnxruntime_load"] = failed(_first_line(exc))
    return checks
