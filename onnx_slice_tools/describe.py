"""Human-readable renderings of specs and plans (index notation, encodings)."""

from __future__ import annotations

from .spec import MASK_NAMES, OPENVINO, TFLITE, SliceSpec


def _item(spec: SliceSpec, i: int) -> str:
    if spec.bit("ellipsis_mask", i):
        return "..."
    if spec.bit("new_axis_mask", i):
        return "None"
    b = "?" if spec.begin is None else str(spec.begin[i])
    if spec.bit("shrink_axis_mask", i):
        return "0" if spec.flavor == TFLITE and spec.bit("begin_mask", i) else b  # TFLite honours it
    e = "?" if spec.end is None else str(spec.end[i])
    if spec.offset and spec.end is not None:
        e = f"{'' if spec.bit('begin_mask', i) else b}+{spec.end[i]}"  # offset: end = begin + end
    s = "?" if spec.strides is None else str(spec.strides[i])
    text = ("" if spec.bit("begin_mask", i) else b) + ":" + ("" if spec.bit("end_mask", i) else e)
    if s != "1":
        text += ":" + s
    return text


def index_notation(spec: SliceSpec, name: str = "x") -> str:
    """The spec as a Python index expression, each index read with the precedence
    ellipsis > new_axis > shrink > range that both runtimes use.  Runtime values print as ``?``."""
    return f"{name}[" + ", ".join(_item(spec, i) for i in range(spec.n)) + "]"


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
    from .targets import CONSTRAINTS
    lines = [f"target {target.name}: {target.summary}; verified on {', '.join(target.verify_on)} by default"]
    lines += [f"  avoids {name}: {CONSTRAINTS[name].rule}" for name in sorted(target.forbidden)]
    return lines
