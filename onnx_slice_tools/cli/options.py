"""Contradictions between options of ``convert``, ``batch``, ``verify``, ``inspect`` and ``explain``.

argparse checks each option alone (choices, types); :func:`contradiction` checks them
together, right after parsing and before any file is read, so that a command line that
cannot mean anything fails at once (exit 2, one line naming the options) instead of after
the work.  An option is "given" when its value differs from its default: giving the default
explicitly changes nothing, so it contradicts nothing.
"""

from __future__ import annotations


def _given(args, name: str) -> bool:
    value = getattr(args, name, None)
    return value not in (None, False, "auto")


def _convert(args) -> str | None:
    if args.no_verify:
        for name, flag in (("strict", "--strict"), ("verify_memory", "--verify-memory"),
                           ("verify_on", "--verify-on"), ("input_range", "--input-range")):
            if _given(args, name):
                return f"{flag} and --no-verify contradict each other ({flag} is about checks that --no-verify turns off)"
    if getattr(args, "fix_slices", False):
        from ..lowering.targets import get_target
        if get_target(args.target).minimal:
            return (f"--fix-slices: target {get_target(args.target).name} has no constraint for it to fix; "
                    "add --target portable or --target openvino")
    outputs = getattr(args, "outputs", None) or []
    repeated = sorted({n for n in outputs if outputs.count(n) > 1})
    if repeated:
        return f"--outputs: {', '.join(map(repr, repeated))} given more than once (each ONNX output needs its own name)"
    for flag, items in (("--inputs", getattr(args, "inputs", None)), ("--input-range", getattr(args, "input_range", None))):
        names = [str(item).rpartition(":")[0] for item in items or ()]
        repeated = sorted({n for n in names if n and names.count(n) > 1})
        if repeated:
            return f"{flag}: input {repeated[0]!r} given more than once"
    return None


def _batch(args) -> str | None:
    """``convert``'s rules, and one stdout for one machine-readable form."""
    if args.report == "-" and args.jsonl:
        return "--report - and --jsonl both write to stdout; give one"
    return _convert(args)


def _verify(args) -> str | None:
    if getattr(args, "converted", None) is None:  # one model validated alone: no comparison to tune
        for name, flag in (("trials", "--trials"), ("flavor", "--flavor"), ("strict", "--strict")):
            default = {"trials": 3}.get(name)
            value = getattr(args, name, None)
            if value is not None and value != default and _given(args, name):
                return (f"{flag} applies to a comparison (verify ORIGINAL CONVERTED); "
                        "give the converted model too, or drop it")
    return None


def _inspect(args) -> str | None:
    if getattr(args, "target", None) and _given(args, "flavor"):
        return ("--flavor and --target contradict each other (--target audits every node of any op, "
                "--flavor reads StridedSlice nodes); give one")
    return None


_RULES = {"convert": _convert, "batch": _batch, "verify": _verify, "inspect": _inspect}


def contradiction(args) -> str | None:
    """The one line saying which options of ``args`` (a parsed command line) contradict each
    other, or None when they are consistent.  ``explain``'s spec options are checked where the
    spec is built (main._spec_from_args), before any work too."""
    command = getattr(args, "command", None)
    rule = _RULES.get(command) if command is not None else None
    return rule(args) if rule else None
