"""Human-readable renderings of specs and plans (index notation, encodings)."""

from __future__ import annotations

from ..semantics.spec import MASK_NAMES, OPENVINO, SliceSpec, index_notation  # noqa: F401 - index_notation: API


def encodings(spec: SliceSpec) -> dict:
    """Both encodings of the written spec: TF bit fields and OpenVINO 0/1 lists."""
    n = spec.n
    lengths = spec.mask_lengths if spec.flavor == OPENVINO and spec.mask_lengths else (n,) * 5
    return {
        "begin": None if spec.begin is None else list(spec.begin),
        "end": None if spec.end is None else list(spec.end),
        "strides": None if spec.strides is None else list(spec.strides),
        "tf": {m: getattr(spec, m) if getattr(spec, m) < 2 ** 31 else getattr(spec, m) - 2 ** 32
               for m in MASK_NAMES},
        "openvino": {m: spec.mask_list(m, max(length, n) if length else 0)
                     for m, length in zip(MASK_NAMES, lengths)},
    }


def target_lines(target) -> list[str]:
    """explain's lines about a target (targets.Target): nothing for the minimal lowering, else
    each constraint the lowering keeps to."""
    if target.minimal:
        return []
    from ..lowering.targets import CONSTRAINTS
    lines = [f"target {target.name}: {target.summary}; verified on {', '.join(target.verify_on)} by default"]
    lines += [f"  avoids {name}: {CONSTRAINTS[name].rule}" for name in sorted(target.forbidden)]
    return lines
