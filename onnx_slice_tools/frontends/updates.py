"""The slice-update family in framework inputs: tf2onnx leaves ``XlaDynamicUpdateSlice``,
``XlaDynamicSlice``, ``TensorStridedSliceUpdate``, ``StridedSliceGrad``, TFLite
``DYNAMIC_UPDATE_SLICE`` and ``GELU`` raw; :func:`lower_family` rewrites them
(rewrite/updates.py) and checks each rewrite against the reference in onnxruntime
(verification/update_checks.py) before the model goes on.  A node the framework rejects, one that
cannot be rewritten, or a failed check is a failed conversion (:class:`ConversionError`, exit 1)."""

from __future__ import annotations

from collections import Counter

from ..errors import ConversionError, StridedSliceError
from ..rewrite.updates import UpdateRecord, has_family, rewrite_updates
from ..verification.checks import passed
from ..verification.update_checks import check_records


def lower_family(model, path) -> list[UpdateRecord]:
    """Rewrite and check the family's nodes of ``model`` (converted from ``path``), in place."""
    if not has_family(model):
        return []
    try:
        records = rewrite_updates(model)
    except StridedSliceError as exc:
        raise ConversionError(f"{exc}; nothing written", path=str(path)) from None
    for record, status in zip(records, check_records(records)):
        if not status.startswith("passed"):
            raise ConversionError(f"node {record.node!r} ({record.op_type}): the rewrite's check {status}; "
                                  "nothing written", path=str(path))
    return records


def updates_status(records: list[UpdateRecord]) -> str:
    """The ``slice_updates`` model check: what was rewritten into what, each rewrite checked (a
    failed check stops the conversion in :func:`lower_family`, so every listed one passed)."""
    forms = Counter((r.op_type, "/".join(r.lowering.describe())) for r in records)
    what = "; ".join(f"{n} {op} as {ops}" for (op, ops), n in sorted(forms.items()))
    return passed(f"{what}: each checked against the reference in onnxruntime")
