"""Command line: ``onnx-slice-tools convert | verify | batch | inspect | explain``.

Exit codes: 0 success; 1 a rewrite or a verification failed; 2 unusable input
(unreadable or corrupt model, invalid spec or argument); 141 the output pipe closed.
Errors are one line on stderr naming the file, node and field; no traceback; no
partial output file.  Everything else native code, Python warnings or logging would
print on stderr is captured (:class:`_Quiet`) and goes to the report, never the terminal.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ModelError, OnnxSliceToolsError, StridedSliceError, one_line

if TYPE_CHECKING:
    from rich.progress import Progress

EXIT_OK, EXIT_FAILED, EXIT_INPUT, EXIT_PIPE = 0, 1, 2, 141

EXIT_CODES = """exit codes:
  0    success
  1    a rewrite or a verification failed
  2    unusable input: unreadable or corrupt model, invalid spec, invalid argument
  141  the output pipe was closed (e.g. piped into head)"""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # usage errors: exit 2 with one line, like any unusable input
        print(one_line(f"{self.prog}: error: {message} (see --help)"), file=sys.stderr)
        sys.exit(EXIT_INPUT)


def _console(**kw):
    """A rich console that prints data as data: no markup, no emoji (``:-1:`` is an index,
    not a thumbs-down), no highlighting."""
    from rich.console import Console
    return Console(markup=False, emoji=False, highlight=False, **kw)


# --------------------------------------------------------------------------- convert

def cmd_convert(args) -> int:
    from ..api import convert
    from ..io.files import check_convert_outputs, write_text
    src, dst = Path(args.input), Path(args.output)
    report_file = None if args.report == "-" else args.report  # "-": the JSON report on stdout
    check_convert_outputs(src, dst, report_file)  # before the work: refusals cost nothing
    options = dict(flavor=args.flavor, opset=args.opset, verify=not args.no_verify, strict=args.strict,
                   verify_memory=args.verify_memory, cleanup=not args.no_cleanup, target=args.target,
                   verify_on=args.verify_on, fix_slices=args.fix_slices)
    from ..io.files import source_kind
    framework = source_kind(src)
    if framework:  # .tflite / SavedModel / Keras: tf2onnx with StridedSlice kept, then the normal path
        from ..frontends.sources import parse_input_ranges, parse_input_shapes, source_files
        result = convert(src, input_shapes=parse_input_shapes(args.inputs), output_names=args.outputs,
                         signature=args.signature, input_ranges=parse_input_ranges(args.input_range), **options)
    else:
        given = [f"--{k.replace('_', '-')}" for k in ("inputs", "outputs", "signature", "input_range")
                 if getattr(args, k)]
        if given:
            raise ModelError(f"{', '.join(given)} apply to framework inputs (.tflite, SavedModel, Keras) only",
                             path=str(src))
        result = convert(src, **options)
    rep = result.report
    inputs = result.input_files()  # the model and every data file it reads
    if framework:
        from ..io.files import FileId
        from ..frontends.sources import source_files
        inputs += [FileId.of(f) for f in source_files(src)]
    check_convert_outputs(src, dst, report_file, inputs)
    if args.report:
        data = rep.to_dict()
        data["warnings"] = list(data.get("warnings") or []) + _QUIET.messages()
        if report_file is None:
            print(json.dumps(data, indent=2))
        else:
            write_text(report_file, json.dumps(data, indent=2), protect=inputs)
    v = rep.verdict  # (asked once: it reads a status per rewrite)
    problems = _convert_problems(rep, v)
    if problems:
        code, first, more = problems
        tail = f" (and {more} more problem(s){'; see --report' if not args.report else ''})" if more else ""
        print(one_line(f"{src}: {first}{tail}"), file=sys.stderr)
        return code
    result.save(dst, protect=inputs)
    found, rewritten, fixable, fixed = rep.tally()
    done = [f"{rewritten}/{found} StridedSlice rewritten"] if found or not (fixable or rep.updates) else []
    if rep.updates:  # the slice-update family (api._slice_updates): every one rewritten, or nothing written
        done.append(f"{len(rep.updates)} raw tf2onnx node(s) rewritten")
    if fixable:  # the model's own Slice/Gather (--fix-slices): counted as what they are
        done.append(f"{fixed}/{fixable} Slice/Gather fixed for target {rep.target}")
    if not args.quiet:  # with the report on stdout, stdout holds only the report
        print(one_line(f"{src} -> {dst}: {', '.join(done)}, {verdict_text(rep, v)}"),
              file=sys.stderr if args.report == "-" else sys.stdout)
    from ..verification.runtimes import release
    release(result)  # (the program ends next without teardown: the model and report are not freed)
    return EXIT_OK


def _convert_problems(rep, v: str | None = None):
    """(exit code, the first problem, how many more) of a conversion, or None when it passed.
    ``v``: ``rep.verdict``, when the caller has it."""
    invalid = rep.invalid_records
    if invalid:
        return EXIT_INPUT, f"node {invalid[0].node!r}: {invalid[0].error}", len(invalid) - 1
    if (rep.verdict if v is None else v) != "failed":
        return None
    return EXIT_FAILED, verdict_problem(rep), 0


def verdict_text(rep, v: str | None = None) -> str:
    """The summary words of a conversion that did not fail (one rule: Report.verdict; ``v``:
    it, when the caller has it)."""
    from ..verification.checks import detail
    v = rep.verdict if v is None else v
    if v == "verified":
        from ..verification.inplace import AS_SHIPPED  # (here: an unverified conversion does without it)
        inplace = list(rep.record_inplace.values()).count("passed")  # (keyed by record position)
        shipped_too = list(rep.record_inplace.values()).count(AS_SHIPPED)  # (settled by the as-shipped run)
        framework = detail(rep.model_checks.get("framework", ""))
        updates = detail(rep.model_checks.get("slice_updates", ""))  # api._slice_updates
        framework = f"{updates}; {framework}" if updates and framework else updates or framework
        shipped = " and ".join(name for check, name in (("shipped", "onnxruntime"), ("shipped_openvino", "OpenVINO"))
                               if check in rep.model_checks)
        where = ", ".join(rep.verify_on) if rep.verify_on else "onnxruntime"
        settled = len(rep.checks_as_shipped)  # (their per-rewrite checks too: verification/settled_checks.py)
        clauses = [f"{rep.signatures_checked} distinct rewrites checked in {where}"] \
            if rep.signatures_checked or not settled else []
        clauses += [f"{inplace} checked in place in the whole model"] if inplace else []
        clauses += [f"{shipped_too} by their output in the as-shipped run"
                    + (f" ({settled} of them needing no per-rewrite check: that run tries every size the check would)"
                       if settled else "")] if shipped_too else []
        parts = [", ".join(clauses)]
        if not rep.signatures_checked and updates:  # only slice updates: their checks say it
            parts = []
        return (f"verified ({'; '.join(parts + ([framework] if framework else []))})"
                + (f", and the saved model run in {shipped}'s default configuration" if shipped else ""))
    if v == "nothing to rewrite":
        return ("nothing to rewrite (the output is the input; the saved model loads and runs in onnxruntime's "
            "default configuration)")
    return "converted, NOT fully verified: " + v.removeprefix("unverified (").removesuffix(")")


def verdict_problem(rep) -> str:
    """One line: the first failed (or, with --strict, skipped) check of a failed conversion."""
    return rep.problem()


# --------------------------------------------------------------------------- explain

def _parse_shape(text: str | None):
    """``5,N,?`` -> (5, "N", None); ``?`` or ``unknown`` -> None (unknown rank)."""
    if text is None:
        return None
    text = text.strip()
    if text in ("?", "unknown"):
        return None
    dims: list[int | str | None] = []
    for part in _items(text, "--shape", "5,N,?"):
        if part.lstrip("-").isdigit():
            if int(part) < 0:
                raise StridedSliceError(f"dim {part!r} is negative; give a size >= 0, a name or ?", field="--shape")
            if int(part) >= 2 ** 63:
                raise StridedSliceError(f"dim {part} is beyond the int64 range", field="--shape")
            dims.append(int(part))
        elif part in ("?", "None"):
            dims.append(None)
        elif part.isidentifier():
            dims.append(part)
        else:
            raise StridedSliceError(f"cannot read dim {part!r}; give sizes, names or ? separated by commas "
                                    "(e.g. 5,N,?)", field="--shape")
    return tuple(dims)


def _items(text: str, option: str, example: str) -> list[str]:
    """The comma-separated items of an option's value (``[``/``(`` brackets allowed), none for an
    empty value; an empty item (``1,,2``, ``1,2,``) is refused: dropping it would change the rank."""
    inner = text.strip().strip("[]()").strip()
    if not inner:
        return []
    parts = [p.strip() for p in inner.split(",")]
    if not all(parts):
        raise StridedSliceError(f"{text!r} has an empty item; give one value per comma (e.g. {example})",
                                field=option)
    return parts


def _int_list(text: str | None, option: str) -> list[int]:
    out = []
    for part in _items(text or "", option, "0,1,-1"):
        try:
            value = int(part)
        except ValueError:
            raise StridedSliceError(f"{part!r} is not an integer (expected e.g. 0,1,-1)", field=option) from None
        if not -(2 ** 63) <= value < 2 ** 63:
            raise StridedSliceError(f"{part} is beyond the int64 range", field=option)
        out.append(value)
    return out


def _spec_from_args(args):
    from ..semantics.spec import MASK_NAMES, TFLITE, from_index_expr, from_openvino, from_tf, from_tflite
    explicit = [f"--{f}" for f in ("begin", "end", "strides") if getattr(args, f) is not None]
    masks = [f"--{m.replace('_', '-')}" for m in MASK_NAMES if getattr(args, m) is not None]
    if args.offset and args.flavor != TFLITE:
        raise StridedSliceError("--offset is a TFLite option; add --flavor tflite", field="offset")
    if not explicit:
        if masks or args.offset:
            raise StridedSliceError("masks only go with --begin/--end/--strides (so does --offset); an index "
                                    "expression carries its own masks", field=", ".join(masks or ["--offset"]))
        if not args.spec:
            raise StridedSliceError("give SPEC as an index expression, or --begin/--end/--strides",
                                    field="spec")
        return from_index_expr(args.spec, flavor=args.flavor)
    if args.spec:
        raise StridedSliceError("give either an index expression or --begin/--end/--strides, not both",
                                field="spec")
    if args.begin is None or args.end is None:
        raise StridedSliceError("--begin and --end go together (--strides defaults to ones)",
                                field="--begin" if args.begin is None else "--end")
    ints = [_int_list(getattr(args, f), f"--{f}") for f in ("begin", "end")]
    strides = _int_list(args.strides, "--strides") if args.strides is not None else None
    if args.flavor in ("tf", TFLITE):
        bits = {}
        for m in MASK_NAMES:
            text = getattr(args, m)
            try:
                bits[m] = int(text or 0)
            except ValueError:
                raise StridedSliceError(f"{text!r} is not an int bit field ({args.flavor} flavour)",
                                        field=f"--{m.replace('_', '-')}") from None
        if args.flavor == TFLITE:
            return from_tflite(*ints, strides, offset=args.offset, **bits)
        return from_tf(*ints, strides, **bits)
    return from_openvino(*ints, strides, **{m: getattr(args, m) or "" for m in MASK_NAMES})


def explain_text(spec, shape, target=None) -> str:
    from .describe import encodings, target_lines
    from ..lowering.lower import lower
    from ..semantics.plan import make_plan
    from ..lowering.targets import get_target
    target = get_target(target)
    plan = make_plan(spec, shape)  # validates the spec (lengths, masks, strides) first
    enc = encodings(spec)
    lines = [f"spec ({spec.flavor}): {spec.index_notation()}",
             f"  begin={enc['begin']} end={enc['end']} strides={enc['strides']}",
             "  TF bit fields:   " + ", ".join(f"{k}={v}" for k, v in enc["tf"].items()),
             "  OpenVINO lists:  " + ", ".join(f'{k}="{",".join(map(str, v))}"' for k, v in enc["openvino"].items()),
             f"input shape: {_fmt_shape(shape)}"]
    plan = make_plan(spec, shape)
    if plan.source is not None:
        lines.append(f"TFLite's kernel reads it as the TF spec {plan.spec.index_notation()}"
                     + (" (offset: end = begin + end)" if spec.offset else ""))
    lines.append("plan:")
    for note in plan.notes:
        lines.append(f"  note: {note}")
    for a in plan.axes:
        if a.kind == "all":
            lines.append(f"  axis {a.axis} (dim {a.dim}): kept whole (ellipsis)")
        elif a.kind == "index":
            if a.start is not None:
                where = f"element {a.start}"
            elif a.begin is None:
                where = f"element begin[{a.index}], given at run time (an index out of range fails there)"
            else:
                where = f"element {a.begin} (checked at run time)"
            lines.append(f"  axis {a.axis} (dim {a.dim}): index {a.index} takes {where}, axis removed")
        else:
            b = "masked" if a.begin_masked else ("run time" if a.begin is None else a.begin)
            e = "masked" if a.end_masked else ("run time" if a.end is None else a.end)
            st = "run time" if a.stride is None else a.stride
            if a.start is not None:
                picks = f"start {a.start}, {a.size} element(s)"
            else:
                picks = f"size {a.size if a.size is not None else 'unknown until run time'}"
            lines.append(f"  axis {a.axis} (dim {a.dim}): index {a.index} begin={b} end={e} stride={st}"
                         f" -> {picks}")
    for j in plan.inserted_axes:
        lines.append(f"  output axis {j}: new axis of size 1")
    runtime = [f for f in ("begin", "end", "strides") if getattr(spec, f) is None]
    low = lower(plan, 17, {f: "int64" for f in runtime}, target=target)
    lines += target_lines(target)
    lines.append(("ONNX nodes" + (f" (opset 17, {', '.join(runtime)} as int64 graph inputs)" if runtime else "")
                  + ":") if not low.is_identity else "ONNX nodes: none (identity)")
    for op in low.ops:
        if op.op_type != "Identity":
            lines.append(f"  {op.describe()}")
    for note in low.notes:
        lines.append(f"  note: {note}")
    lines.append(f"output shape: {_fmt_shape(plan.output_shape)}")
    return "\n".join(lines)


def _fmt_shape(shape) -> str:
    if shape is None:
        return "unknown rank"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def cmd_explain(args) -> int:
    shape = _parse_shape(args.shape)  # every option is read before the spec is planned
    if args.update is not None:  # a slice write (cli/explain_update.py)
        from .explain_update import explain_update_text
        update = _parse_shape(args.update)
        spec = _spec_from_args(args) if args.spec or args.begin is not None else None
        print(explain_update_text(spec, shape, update))
        return EXIT_OK
    try:
        spec = _spec_from_args(args)
        text = explain_text(spec, shape, args.target)
    except StridedSliceError as exc:  # a field given as an option is named as that option
        from ..semantics.spec import MASK_NAMES
        fields = ("begin", "end", "strides", *MASK_NAMES)
        if args.spec is None and exc.field in fields and getattr(args, exc.field, None) is not None:
            option = "--" + exc.field.replace("_", "-")
            reason = exc.reason.removeprefix(f"{exc.field} ").removeprefix(f"{exc.field}[{exc.index}] ")
            raise StridedSliceError(reason, field=option, index=exc.index) from None
        raise
    print(text)
    return EXIT_OK


# --------------------------------------------------------------------------- inspect

def cmd_inspect_target(args) -> int:
    """``inspect --target T``: the nodes of any model that break target T's constraints."""
    from ..api import load_ir
    from ..rewrite.fixslices import fix_note
    from ..lowering.targets import find_violations, get_target
    target = get_target(args.target)
    found = find_violations(load_ir(args.model), target, note=fix_note)
    if args.json:
        print(json.dumps([v.to_json() for v in found], indent=2))
    else:
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table
        table = Table(title=one_line(f"{args.model}: {len(found)} node(s) break target {target.name}"))
        for col in ("node", "op", "graph", "constraint", "detail", "why it matters", "--fix-slices"):
            table.add_column(col, overflow="fold")
        for v in found:
            table.add_row(*(escape(one_line(c)) for c in (v.node, v.op_type, v.graph, v.constraint, v.detail, v.why,
                                                         v.fix)))
        Console(width=max(160, Console().width)).print(table)
    return EXIT_OK


def cmd_inspect(args) -> int:
    """Each StridedSlice as ``convert`` reads, plans and lowers it: :func:`api.convert` itself,
    without verification or cleanup, on a copy that is never saved (each distinct spec and
    shape planned and lowered once).  A node the framework rejects is unusable input, as in
    ``convert``: one line, exit 2."""
    if args.target:
        return cmd_inspect_target(args)
    from ..io.files import source_kind
    if source_kind(args.model) is None:
        return _inspect(args, args.model)
    import tempfile  # a framework file: what convert would rewrite, the ONNX model tf2onnx makes of it

    from ..frontends.sources import export_source
    with tempfile.TemporaryDirectory(prefix="onnx-slice-tools-inspect-") as folder:
        return _inspect(args, export_source(args.model, folder))


def _inspect(args, path) -> int:
    from ..api import convert
    rep = convert(path, flavor=args.flavor, verify=False, cleanup=False, source=str(args.model)).report
    problems = _convert_problems(rep)
    if problems and problems[0] == EXIT_INPUT:
        _, first, more = problems
        raise ModelError(first + (f" (and {more} more invalid node(s))" if more else ""), path=str(args.model))
    described: dict = {}  # lowerings are shared by the nodes of one spec and shape: describe each once
    rows = []
    for r in rep.records:
        row: dict[str, Any] = {"node": r.node, "graph": r.graph, "flavor": r.flavor}
        if r.lowering is None:
            row["error"] = r.error
        else:
            ops = described.get(id(r.lowering))
            if ops is None:
                ops = described[id(r.lowering)] = [op.describe() for op in r.lowering.ops
                                                   if op.op_type != "Identity"] or ["(rewiring)"]
            row.update(spec=r.notation, input_shape=_list_or_none(r.input_shape),
                       output_shape=_list_or_none(r.output_shape), onnx=ops)
        rows.append(row)
    family = [{"node": u.node, "graph": u.graph, "op_type": u.op_type, "form": u.form,
               "input_shapes": [_list_or_none(sh) for sh in u.shapes], "onnx": u.lowering.describe(),
               "check": u.check, "notes": u.notes} for u in rep.updates]  # (api._slice_updates)
    if args.json:
        print(json.dumps(rows + family, indent=2))
        return EXIT_OK
    print(one_line(f"{args.model}: {len(rows)} StridedSlice node(s)"))
    header = ("node", "flavor", "spec", "input", "output", "ONNX")
    cells = [header] + [(one_line(r["node"]), str(r["flavor"]), r.get("spec", "-"),
                         *(_fmt_shape(r[k]) if k in r else "-" for k in ("input_shape", "output_shape")),
                         "; ".join(r.get("onnx", [])) or one_line(r.get("error", ""))) for r in rows]
    if rows or not family:
        print(_plain_table(cells))
    if family:
        print(one_line(f"{len(family)} raw tf2onnx node(s) (slice updates, GELU, Erfc) rewritten and checked:"))
        cells = [("node", "op", "form", "inputs", "ONNX")] + [
            (one_line(f["node"]), f["op_type"], f["form"], " ".join(_fmt_shape(sh) for sh in f["input_shapes"]),
             "/".join(f["onnx"])) for f in family]
        print(_plain_table(cells))
    return EXIT_OK


def _list_or_none(shape):
    return None if shape is None else list(shape)


def _plain_table(rows: list) -> str:
    """Rows of cells as aligned plain text (the last column unpadded): linear in the rows, so a
    model of 10,000 nodes prints in a blink, and greppable line by line."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join([c.ljust(w) for c, w in zip(r, widths)] + [r[-1]]).rstrip() for r in rows]
    lines.insert(1, "  ".join(["-" * w for w in widths] + ["-" * max(len(r[-1]) for r in rows)]))
    return "\n".join(lines)


# --------------------------------------------------------------------------- verify

def _is_terminal() -> bool:
    return sys.stderr.isatty() and os.environ.get("TERM") != "dumb"


def _rtol(text: str) -> float:
    """``--rtol``: a finite number >= 0."""
    from ..verification.tolerance import check_rtol
    try:
        return check_rtol(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number >= 0") from None


_rtol.__name__ = "rtol"


def _concrete_shape(text: str) -> tuple:
    """``--input-shapes`` item ``NAME:D1,D2,...`` (sizes >= 0; an empty list is a scalar)."""
    name, sep, dims = text.rpartition(":")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME:D1,D2,... (concrete sizes)")
    try:
        sizes = tuple(int(d) for d in dims.split(",") if d.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: sizes must be integers >= 0") from None
    if any(d < 0 for d in sizes):
        raise argparse.ArgumentTypeError(f"{text!r}: sizes must be integers >= 0")
    return name, sizes


_concrete_shape.__name__ = "input shape"


def cmd_verify(args) -> int:
    from rich.table import Table
    if args.converted is None and (args.rtol is not None or args.input_shapes):
        option = "--rtol" if args.rtol is not None else "--input-shapes"
        raise ModelError(f"{option} applies to a comparison: give CONVERTED too", path=str(args.model))
    if args.converted is None:
        from ..api import verify_model_file
        checks = verify_model_file(args.model)
        table = Table(title=one_line(str(args.model)), min_width=60)
        table.add_column("check")
        table.add_column("result", overflow="fold")
        for name, status in checks.items():
            table.add_row(name, one_line(status))
        _console().print(table)
        bad = [k for k, v in checks.items() if v != "passed"]
        if bad:
            print(one_line(f"{args.model}: fails {', '.join(bad)}"), file=sys.stderr)
        return EXIT_FAILED if bad else EXIT_OK
    from ..io.files import source_kind
    if source_kind(args.model) is not None:
        return _verify_against_framework(args)
    from ..api import compare_model_files
    from ..verification.checks import kind
    from ..verification.compare import InputShapesError
    shapes = dict(args.input_shapes or ())
    if len(shapes) != len(args.input_shapes or ()):
        raise ModelError("--input-shapes: an input is given twice", path=str(args.model))
    try:
        cmp = compare_model_files(args.model, args.converted, trials=args.trials, flavor=args.flavor,
                                  rtol=args.rtol, input_shapes=shapes)
    except InputShapesError as exc:
        raise ModelError(f"--input-shapes: {exc.reason}", path=exc.path) from None
    table = Table(title=one_line(f"{args.model} (reference evaluator) vs {args.converted} (onnxruntime)"),
                  min_width=60)
    table.add_column("output")
    table.add_column("result", overflow="fold")
    for name, status in cmp.outputs.items():
        table.add_row(one_line(name), one_line(str(status)))
    _console().print(table)
    tried = "; ".join(", ".join(f"{k}{list(v)}" for k, v in t.items()) for t in cmp.tried)
    status = comparison_status(cmp.status)
    print(one_line(f"status: {status}" + (f" ({len(cmp.tried)} random input sets: {tried})" if cmp.tried else "")))
    if kind(status) == "failed" or kind(status) == "skipped" and args.strict:
        print(one_line(f"{args.converted}: not shown equivalent to {args.model}: {status}"
                       + (" (--strict)" if kind(status) == "skipped" else "")), file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _verify_against_framework(args) -> int:
    """``verify FRAMEWORK_FILE CONVERTED.onnx``: the converted model against the framework itself
    (the TFLite interpreter, TensorFlow) on random inputs: convert's framework check."""
    from rich.table import Table

    from ..frontends.sources import verify_against_source
    from ..io.files import load_model_proto
    converted = load_model_proto(args.converted)
    check = verify_against_source(args.model, converted, trials=args.trials)
    table = Table(title=one_line(f"{args.model} (its framework) vs {args.converted} (onnxruntime)"), min_width=60)
    table.add_column("output")
    table.add_column("result", overflow="fold")
    for name, status in check.outputs.items():
        table.add_row(one_line(name), one_line(status))
    _console().print(table)
    print(f"status: {'passed' if check.ok else 'failed'} ({check.trials} random input sets)")
    if not check.ok:
        bad = ", ".join(f"{k}: {v}" for k, v in check.outputs.items() if not v.startswith(("bitwise", "close")))
        print(one_line(f"{args.converted}: differs from {args.model}: {bad or 'no output compared'}"), file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def comparison_status(status: str) -> str:
    """evaluate.ModelComparison's status in the passed | failed: .. | skipped: .. words."""
    from ..verification.checks import PASSED, Status, failed, kind
    if status == "mismatch":
        return failed("outputs differ")
    return PASSED if kind(status) == "passed" else status if isinstance(status, Status) else failed(status)


# --------------------------------------------------------------------------- batch

def _batch_runtimes(args, options: dict) -> None:
    """A runtime the options verify on is missing: one line naming the option and the extra."""
    from ..verification.runtimes import RuntimeUnavailable
    from .batch import check_runtimes
    try:
        check_runtimes(options)
    except RuntimeUnavailable as exc:
        option = "--verify-on " + ",".join(args.verify_on) if args.verify_on else f"--target {args.target}"
        raise ModelError(f"{option}: {exc}") from None


def cmd_batch(args) -> int:
    from .batch import REPORT_NAME, batch_convert
    src, out = Path(args.input_dir), Path(args.output)
    if out.resolve() == src.resolve():
        raise ModelError(f"{out}: the output folder must differ from the input folder")
    options = dict(flavor=None if args.flavor == "auto" else args.flavor, opset=args.opset,
                   verify=not args.no_verify, strict=args.strict, verify_memory=args.verify_memory,
                   cleanup=not args.no_cleanup, target=args.target, verify_on=args.verify_on,
                   fix_slices=args.fix_slices)
    _batch_runtimes(args, options)
    machine = args.report == "-" or args.jsonl  # stdout is for the machine-readable form only
    human = None if args.quiet else (sys.stderr if machine else sys.stdout)
    progress = _BatchProgress(fancy=_is_terminal(), quiet=args.quiet, jsonl=args.jsonl)
    try:
        report = batch_convert(src, out, jobs=args.jobs, force=args.force, on_start=progress.start,
                               on_result=progress.result, on_begin=progress.begin, **options)
    finally:
        progress.stop()
    if human is not None:
        _print_batch_summary(report, human)
        print(one_line(f"report: {out / REPORT_NAME}"), file=human)
    if args.report == "-":
        print(json.dumps(report.to_json(), indent=1))
    return report.exit_code


class _BatchProgress:
    """A rich progress bar on a terminal naming the models being converted, one plain line
    per finished model otherwise (stderr); with ``jsonl`` one JSON line per finished model on
    stdout; nothing with ``quiet``."""

    def __init__(self, fancy: bool, quiet: bool = False, jsonl: bool = False):
        self.fancy, self.quiet, self.jsonl = fancy and not quiet, quiet, jsonl
        self.done, self.total = 0, 0
        self.bar: Progress | None = None
        self.running: dict[str, None] = {}  # the models being converted, in start order

    def start(self, total: int) -> None:
        self.total = total
        if self.fancy and total:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
            self.bar = Progress(TextColumn("converting"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                TextColumn("{task.description}", markup=False), console=_console(stderr=True),
                                transient=True)
            self.bar.start()
            self.task = self.bar.add_task("", total=total)

    def _describe(self, bar: Progress) -> None:
        names = [one_line(Path(p).name) for p in self.running]
        text = ", ".join(names[:3]) + (f" +{len(names) - 3}" if len(names) > 3 else "")
        bar.update(self.task, description=text)

    def begin(self, src: str) -> None:
        self.running[src] = None
        if self.bar is not None:
            self._describe(self.bar)

    def result(self, entry: dict) -> None:
        self.done += 1
        self.running.pop(entry["input"], None)
        if self.jsonl:
            print(json.dumps(entry), flush=True)
        if self.bar is not None:
            self.bar.update(self.task, advance=1)
            self._describe(self.bar)
            return
        if self.quiet:
            return
        what = entry["status"]
        if entry.get("strided_slice_nodes") is not None and what in ("converted", "unchanged"):
            what += f" ({entry['rewritten']}/{entry['strided_slice_nodes']} StridedSlice rewritten)"
        if what.startswith("converted") and entry.get("outcome") == "unverified":
            what += ", NOT fully verified"
        if entry.get("error"):
            what += f": {entry['error']}"
        secs = f" [{entry['seconds']:.2f} s]" if entry.get("seconds") else ""
        print(one_line(f"[{self.done}/{self.total}] {entry['input']}: {what}{secs}"), file=sys.stderr, flush=True)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _print_batch_summary(report, stream=None) -> None:
    """A table that fits 80 columns (model, status, verdict, StridedSlice rewritten/found,
    checks passed, seconds), the errors below it, one per line, and a summary line counting
    each outcome (verified / unverified / unchanged / failed / invalid / error)."""
    from rich.table import Table

    from ..verification.checks import kind
    from .batch import outcome
    stream = stream or sys.stdout
    for note in report.notes:
        print(one_line(f"note: {note}"), file=stream)
    print(one_line(f"{report.input_dir} -> {report.output_dir} ({report.seconds:.1f} s)"), file=stream)
    table = Table()
    table.add_column("model", overflow="fold", ratio=1)
    for col in ("status", "verdict", "slices", "checks", "s"):
        table.add_column(col, no_wrap=True, justify="left" if col in ("status", "verdict") else "right")
    errors: list = []
    unverified: dict = {}
    entries = sorted(report.entries, key=lambda e: e["input"])
    for e in entries:
        model = one_line(str(Path(e["input"]).relative_to(report.input_dir)))
        checks = e.get("checks") or {}
        ok = sum(1 for v in checks.values() if kind(v) == "passed")  # "passed (nothing to clean)" too
        found = e.get("strided_slice_nodes")
        verdict = str(e.get("verdict") or "-").split(" ")[0] if e["status"] in ("converted", "unchanged") else "-"
        table.add_row(model, e["status"], verdict, "-" if found is None else f"{e.get('rewritten') or 0}/{found}",
                      f"{ok}/{len(checks)}" if checks else "-", f"{e['seconds']:.2f}" if e.get("seconds") else "-")
        if e.get("error"):
            error = e["error"].removeprefix(f"{e['input']}: ")  # the row names the file
            errors.append(f"{model}: {one_line(error)}")
        elif outcome(e) == "unverified":
            why = one_line(str(e.get("verdict")).removeprefix("unverified (").removesuffix(")"))
            unverified.setdefault(why, []).append(model)
    _console(file=stream).print(table)
    for line in errors:
        print(line, file=stream)
    for why, models in unverified.items():  # one line per reason, not per model
        print(f"{models[0]}: NOT fully verified: {why}" if len(models) == 1 else
              f"{len(models)} models NOT fully verified ({models[0]}, ...): {why}", file=stream)
    counts = report.counts()
    print("summary: " + ", ".join(f"{v} {k}" for k, v in counts.items()), file=stream)
    removed = [p for d in report.deleted_inputs for p in d["removed"]]
    if report.deleted_inputs:
        print(f"deleted since the last run: {len(report.deleted_inputs)} input(s); {len(removed)} output file(s) "
              "of theirs removed (see report.json: deleted_inputs)", file=stream)


# --------------------------------------------------------------------------- main

def _at_least(low: int, what: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value}: {what} must be >= {low}")
        return value
    parse.__name__ = what  # argparse names the type in its messages
    return parse


def _mib(text: str) -> int:
    import math
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of MiB, got {text!r}") from None
    if not math.isfinite(value) or value * 2 ** 20 < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a positive, finite number of MiB (at least one byte)")
    return int(value * 2 ** 20)


def _report_file(text: str) -> str:
    """A report file name, or ``-`` for stdout."""
    return text if text == "-" else _output_file(text)


def _output_file(text: str) -> str:
    """An output file name: not ``-`` (no model on stdout) and not a folder (a trailing slash)."""
    if text == "-":
        raise argparse.ArgumentTypeError("'-': writing to stdout is not supported; give a file name")
    if not text or text.endswith(("/", os.sep)) or Path(text).name in ("", ".", ".."):
        raise argparse.ArgumentTypeError(f"{text!r} names a folder; give a file name")
    return text


def _verification_flags(p) -> None:
    p.add_argument("--strict", action="store_true",
                   help="a skipped check fails the conversion (exit 1): 'converted' means verified")
    p.add_argument("--verify-memory", type=_mib, default=None, metavar="MIB",
                   help="memory the checks may add to converting the model, in MiB (default 256): each run's "
                        "tensors, one more copy of the weights in memory, two of external ones; "
                        "a check needing more is skipped")




def _runtimes(text: str) -> tuple:
    from ..verification.runtimes import parse_runtimes
    if any(not part.strip() for part in text.split(",")):
        raise argparse.ArgumentTypeError(f"{text!r} has an empty item; give runtime names separated by commas "
                                         "(e.g. onnxruntime,openvino)")
    try:
        return parse_runtimes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _opset(text: str) -> int:
    value = _at_least(1, "opset")(text)
    if value < 11:
        raise argparse.ArgumentTypeError(f"{value}: onnx-slice-tools emits opset 11 or newer; use --opset 11 or more")
    import onnx
    newest = onnx.defs.onnx_opset_version()
    if value > newest:
        raise argparse.ArgumentTypeError(f"{value}: the installed onnx knows opsets up to {newest}")
    return value


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__
    fmt = argparse.RawDescriptionHelpFormatter
    p = _Parser(prog="onnx-slice-tools", description="Exact StridedSlice (TensorFlow / OpenVINO) to ONNX.",
                epilog=EXIT_CODES, formatter_class=fmt)
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")
    flavors = ["auto", "tf", "openvino", "tflite"]
    flavor_help = ("StridedSlice semantics: auto (from the mask attribute types: INT tf, INTS/STRING openvino, "
        "an offset attribute tflite)")
    opset_help = "target default-domain opset, 11 or newer (default: the model's own)"

    def command(name, help_text):
        return sub.add_parser(name, help=help_text, description=help_text, epilog=EXIT_CODES, formatter_class=fmt)

    c = command("convert", "rewrite every StridedSlice of a model into standard ONNX, verified")
    c.add_argument("input", help="the model to convert: .onnx (external data next to it), .tflite, a "
        "SavedModel directory or .keras/.h5")
    c.add_argument("-o", "--output", required=True, type=_output_file,
                   help="where to write the converted model (never the input)")
    c.add_argument("--flavor", choices=flavors, default="auto", help=flavor_help)
    c.add_argument("--inputs", nargs="+", metavar="NAME:SHAPE",
                   help="SavedModel/Keras input shapes, e.g. x:1,224,224,3 (? = unknown)")
    c.add_argument("--input-range", nargs="+", metavar="NAME:LO,HI",
                   help="framework inputs: draw the framework check's random values of integer input NAME "
                        "in [LO, HI] (default: the range the graph implies for indices, e.g. token_ids:0,999)")
    c.add_argument("--outputs", nargs="+", metavar="NAME",
                   help="names for the ONNX outputs, in order (framework inputs; default for a SavedModel: "
                        "the signature's output keys, sorted)")
    c.add_argument("--signature", metavar="KEY", help="the SavedModel signature to convert (default serving_default)")
    c.add_argument("--opset", type=_opset, default=None, help=opset_help)
    c.add_argument("--no-verify", action="store_true", help="skip shape inference and onnxruntime checks")
    c.add_argument("--report", type=_report_file,
                   help="write the JSON report (per node, checks, warnings) to this file, or to stdout with '-' "
                        "(the result line then goes to stderr)")
    c.add_argument("--quiet", "-q", action="store_true",
                   help="no result line on success (the exit code, the report and any one-line error remain)")
    _verification_flags(c)
    c.add_argument("--no-cleanup", action="store_true", help="keep the rewrite's nodes as they are (no cleanup passes)")
    from ..lowering.targets import TARGETS
    c.add_argument("--target", choices=list(TARGETS), default="onnxruntime",
                   help="constraints of the output (default onnxruntime: the minimal lowering; portable: what "
                        "every runtime agrees on; openvino: what OpenVINO's ONNX reader gets right)")
    c.add_argument("--verify-on", default=None, type=_runtimes,
                   help="runtimes of the per-rewrite checks, e.g. onnxruntime,openvino,reference "
                        "(default: the target's)")
    c.add_argument("--fix-slices", action="store_true",
                   help="also rewrite the model's own Slice/Gather nodes that break the target's constraints")
    c.set_defaults(func=cmd_convert)

    e = command("explain", "show how a spec is read, planned and lowered")
    e.add_argument("spec", nargs="?", help='an index expression, e.g. "x[1, 2:4, None, ..., :-3:-1, :]"')
    e.add_argument("--shape", help="input shape, e.g. 5,5,N,? (default: unknown rank)")
    e.add_argument("--flavor", choices=["tf", "openvino", "tflite"], default="tf", help="StridedSlice semantics (default tf)")
    for f, example in (("begin", "0,-1"), ("end", "2,0"), ("strides", "1,-1 (non-zero)")):
        e.add_argument(f"--{f}", help=f"{f} as comma-separated integers, e.g. {example} (instead of SPEC)")
    e.add_argument("--offset", action="store_true", help="TFLite STRIDED_SLICE offset option (end = begin + end)")
    e.add_argument("--target", choices=list(TARGETS), default=None,
                   help="lower for this target (default onnxruntime: the minimal lowering) and list its constraints")
    e.add_argument("--update", metavar="SHAPE",
                   help="a slice write: with SPEC, TensorStridedSliceUpdate with a value of SHAPE; without, "
                        "XlaDynamicUpdateSlice of an update of SHAPE at run-time starts")
    from ..semantics.spec import MASK_NAMES
    for m in MASK_NAMES:
        e.add_argument("--" + m.replace("_", "-"), dest=m,
                       help="with --begin/--end: an int bit field (tf) or a 0/1 list such as 0,1,1 (openvino)")
    e.set_defaults(func=cmd_explain)

    v = command("verify", "validate a converted model, or compare it with its original")
    v.add_argument("model", help="the model to validate, or the ORIGINAL when CONVERTED is given")
    v.add_argument("converted", nargs="?", help="compare this converted model with MODEL on random inputs")
    v.add_argument("--trials", type=_at_least(1, "trials"), default=3,
                   help="random input sets for the comparison, >= 1 (default 3)")
    v.add_argument("--flavor", choices=flavors, default="auto", help=flavor_help)
    v.add_argument("--strict", action="store_true", help="a comparison that cannot run fails (exit 1)")
    v.add_argument("--rtol", type=_rtol, default=None,
                   help="float tolerance relative to each output's largest magnitude (default: per dtype, "
                        "calibrated in docs/benchmarks.md)")
    v.add_argument("--input-shapes", nargs="+", type=_concrete_shape, metavar="NAME:D1,D2",
                   help="concrete sizes of an input of symbolic shape, e.g. x:2,1024 (default: small random sizes)")
    v.set_defaults(func=cmd_verify)

    b = command("batch", "convert and verify every model under a folder (.onnx, .tflite, .keras/.h5, "
                "SavedModel folders), in parallel")
    b.add_argument("input_dir", help="folder searched recursively for models: .onnx, .tflite, .keras/.h5 files and "
                                     "SavedModel folders")
    b.add_argument("-o", "--output", required=True,
                   help="output folder (the input tree is mirrored, each model as NAME.onnx; never over a file "
                        "batch did not write).  Run again after a kill (even SIGKILL), it resumes: the models "
                        "its journal records as finished are skipped when unchanged, an output caught "
                        "mid-write is replaced")
    b.add_argument("--jobs", "-j", type=_at_least(1, "jobs"), default=None,
                   help="worker processes, >= 1 (default: CPU count)")
    b.add_argument("--force", action="store_true", help="convert again models whose input is unchanged")
    b.add_argument("--flavor", choices=flavors, default="auto", help=flavor_help)
    b.add_argument("--opset", type=_opset, default=None, help=opset_help)
    b.add_argument("--no-verify", action="store_true", help="skip shape inference and onnxruntime checks")
    _verification_flags(b)
    b.add_argument("--no-cleanup", action="store_true", help="no cleanup passes after the rewrite")
    b.add_argument("--target", choices=list(TARGETS), default=None,
                   help="constraints of the outputs (default onnxruntime; see convert --help)")
    b.add_argument("--verify-on", default=None, type=_runtimes,
                   help="runtimes of the per-rewrite checks, e.g. onnxruntime,openvino (default: the target's)")
    b.add_argument("--fix-slices", action="store_true",
                   help="also rewrite the models' own Slice/Gather nodes that break the target's constraints")
    b.add_argument("--report", choices=["-"], default=None, metavar="-",
                   help="'-': also print the JSON report (OUTPUT/report.json) on stdout; the table then goes "
                        "to stderr")
    b.add_argument("--jsonl", action="store_true",
                   help="one JSON line per model on stdout as it finishes; the table then goes to stderr")
    b.add_argument("--quiet", "-q", action="store_true",
                   help="no progress, table or summary (the exit code, report.json and any one-line error remain)")
    b.set_defaults(func=cmd_batch)

    i = command("inspect", "list a model's StridedSlice nodes and their planned ONNX")
    i.add_argument("model", help="the model to inspect")
    i.add_argument("--flavor", choices=flavors, default="auto", help=flavor_help)
    i.add_argument("--json", action="store_true", help="print JSON (shapes as lists, null for unknown)")
    i.add_argument("--target", choices=list(TARGETS), default=None,
                   help="list the nodes (any op, any converter) that break this target's constraints")
    i.set_defaults(func=cmd_inspect)
    return p


class _Quiet:
    """Keep stderr for our one line: native output on file descriptor 2 (onnxruntime, onnx),
    Python warnings and logging records are captured while a command runs; ``messages()``
    returns them for the report.  Our own output goes to the stream stderr was on entry."""

    MAX_BYTES = 1 << 16

    def __init__(self):
        self._warnings = []
        self._records = []
        self._capture = None

    def __enter__(self):
        import logging
        import warnings
        self.stderr = sys.stderr
        self._catch = warnings.catch_warnings(record=True)
        self._warnings = self._catch.__enter__()
        warnings.simplefilter("default")
        self._handler = _collecting_handler(self._records)
        logging.getLogger().addHandler(self._handler)
        try:
            sys.stderr.flush()
            self._saved_fd = os.dup(2)
            self._capture = tempfile.TemporaryFile()
            if _fileno(sys.stderr) == 2:  # our messages keep going where stderr went
                sys.stderr = os.fdopen(os.dup(self._saved_fd), "w", buffering=1, encoding="utf-8",
                                       errors="backslashreplace")
            os.dup2(self._capture.fileno(), 2)
        except OSError:  # no file descriptor 2: nothing native to catch
            self._capture = None
        return self  # batch workers are spawned with this file descriptor 2: captured too

    def __exit__(self, *exc):
        import logging
        logging.getLogger().removeHandler(self._handler)
        self._catch.__exit__(*exc)
        if self._capture is not None:
            os.dup2(self._saved_fd, 2)
            os.close(self._saved_fd)
            if sys.stderr is not self.stderr:
                sys.stderr.close()
                sys.stderr = self.stderr
        return False

    def messages(self) -> list[str]:
        out = [f"{w.category.__name__}: {w.message}" for w in self._warnings]
        out += [f"{r.name}: {r.getMessage()}" for r in self._records]
        if self._capture is not None:
            self._capture.seek(0)
            text = self._capture.read(self.MAX_BYTES).decode("utf-8", "replace")
            out += [line for line in text.splitlines() if line.strip()]
        seen, unique = set(), []
        for m in out:
            if m not in seen:
                seen.add(m)
                unique.append(one_line(m))
        return unique[:200]

    def close(self) -> None:
        if self._capture is not None:
            self._capture.close()


def _collecting_handler(records: list):
    from .capture import collecting_handler
    return collecting_handler(records)


def _fileno(stream) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None


_QUIET = _Quiet()


#: the commands on one model: in the program (``process_ends``), what they are done with is left
#: to the end of the process (verification/runtimes.keep_to_exit)
_ONE_MODEL = frozenset({"convert", "verify"})


def main(argv=None, *, process_ends: bool = False) -> int:
    """The command line.  Its own start-up (:mod:`.startup`): sympy imported on first use only,
    the garbage collector paused while the command runs.  ``process_ends``: the process ends
    right after, without teardown (:func:`run`)."""
    global _QUIET
    from ..graphs.allocation import paused_gc
    from .startup import install_lazy_sympy
    install_lazy_sympy()
    args = build_parser().parse_args(argv)
    if process_ends and args.command in _ONE_MODEL:
        from ..verification.runtimes import keep_to_exit
        keep_to_exit()
    from .options import contradiction
    problem = contradiction(args)
    if problem:  # before any work: a command line that cannot mean anything
        print(one_line(f"onnx-slice-tools {args.command}: error: {problem} (see --help)"), file=sys.stderr)
        return EXIT_INPUT
    where = getattr(args, "input", None) or getattr(args, "model", None) or getattr(args, "input_dir", None)
    _QUIET = _Quiet()
    with _QUIET:
        with paused_gc():
            code, message = _run(args, where)
        if message is not None:
            print(one_line(message), file=sys.stderr)
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            code = _broken_pipe()
        if os.environ.get("ONNX_SLICE_TOOLS_DEBUG"):
            for m in _QUIET.messages():
                print(f"captured: {m}", file=sys.stderr)
    _QUIET.close()
    return code


def run() -> None:
    """The program (``onnx-slice-tools`` and ``python -m onnx_slice_tools``): :func:`main`, then
    the end of the process.  The cyclic collector stays off for the whole process (main
    pauses it for the command; turned back on at its end, it would scan everything the
    command built -- all of TensorFlow after a framework input).  Then the exit handlers run
    (autograph's temporary files, the shape-inference helper, logging), the output is
    flushed and the process ends without tearing down what the command built or imported
    (TensorFlow's modules take seconds, a large model's onnxruntime session tens of ms): every
    file of ours is closed by then."""
    import atexit
    import gc
    import signal
    gc.disable()
    try:
        code = main(process_ends=True)
    except KeyboardInterrupt:  # outside the command (start-up, the last flush): nothing to clean up
        code = 130
    # the command is over and its files are in place or removed: a Ctrl-C during the teardown
    # would only print "Exception ignored" noise
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    atexit._run_exitfuncs()  # what sys.exit would run first  # no public form
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: main already said so in the exit code
            pass
    os._exit(code)


def _run(args, where) -> tuple[int, str | None]:
    """(exit code, the one error line or None)."""
    from ..io.files import termination_raises
    try:
        with termination_raises():  # SIGTERM/SIGHUP anywhere: cleanup runs, exit 128 + signal
            return args.func(args), None
    except SystemExit as exc:
        if isinstance(exc.code, int) and exc.code > 128:
            return exc.code, None
        raise
    except (ModelError, StridedSliceError) as exc:
        return EXIT_INPUT, str(exc)
    except OnnxSliceToolsError as exc:  # a runtime asked for (--verify-on) is not installed: unusable input
        from ..verification.runtimes import RuntimeUnavailable
        code = EXIT_INPUT if isinstance(exc, RuntimeUnavailable) else EXIT_FAILED
        return code, (f"{where}: --verify-on: {exc}" if code == EXIT_INPUT and where else str(exc))
    except BrokenPipeError:
        return _broken_pipe(), None
    except OSError as exc:
        return EXIT_INPUT, f"{exc.filename or where or ''}: {exc.strerror or exc}"
    except MemoryError:
        return EXIT_INPUT, f"{where}: out of memory reading the model"
    except KeyboardInterrupt:
        return 130, None
    except Exception as exc:  # a bug of ours: still one line naming the file, nothing half-written
        if os.environ.get("ONNX_SLICE_TOOLS_DEBUG"):
            raise
        text = str(exc).splitlines()[0] if str(exc).strip() else ""
        return EXIT_FAILED, (f"{where}: internal error: {type(exc).__name__}: {text} "
                             "(set ONNX_SLICE_TOOLS_DEBUG=1 for the traceback)")


def _broken_pipe() -> int:
    """The reader went away (``| head``): stop quietly, as a unix tool killed by SIGPIPE."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's final flush must not fail again
    except (OSError, ValueError, AttributeError):
        pass
    return EXIT_PIPE


if __name__ == "__main__":
    run()
