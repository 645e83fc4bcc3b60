"""Command line: ``onnx-slice-tools convert | verify | batch | inspect | explain``.

Exit codes: 0 success; 1 a rewrite or a verification failed; 2 unusable input
(unreadable or corrupt model, invalid spec).  Errors are one line on stderr
naming the file, node and field; no traceback; no partial output file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from .errors import ModelError, OnnxSliceToolsError, StridedSliceError

EXIT_OK, EXIT_FAILED, EXIT_INPUT = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # usage errors: exit 2 with one line, like any unusable input
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(EXIT_INPUT)


def write_atomically(path: Path, write) -> None:
    """Call ``write(tmp_path)`` then rename over ``path``: readers never see a partial file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a written file gets the usual mode
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


# --------------------------------------------------------------------------- convert

def cmd_convert(args) -> int:
    from .api import convert
    from .runtimes import RuntimeUnavailable
    src, dst = Path(args.input), Path(args.output)
    if dst.resolve() == src.resolve():
        print(f"{dst}: refusing to overwrite the input model; choose another -o", file=sys.stderr)
        return EXIT_INPUT
    try:
        result = convert(src, flavor=args.flavor, opset=args.opset, verify=not args.no_verify, target=args.target,
                         verify_on=args.verify_on, fix_slices=args.fix_slices)
    except ValueError as exc:  # --verify-on: an unknown runtime
        if isinstance(exc, (ModelError, StridedSliceError)):
            raise
        print(f"{src}: --verify-on: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except RuntimeUnavailable as exc:  # --verify-on openvino without the openvino extra
        print(f"{src}: --verify-on: {exc}", file=sys.stderr)
        return EXIT_INPUT
    rep = result.report
    if args.report:
        text = json.dumps(rep.to_json(), indent=2)
        write_atomically(Path(args.report), lambda tmp: tmp.write_text(text))
    invalid = rep.invalid_records
    if invalid:
        for r in invalid:
            print(f"{src}: node {r.node!r}: {r.error}", file=sys.stderr)
        return EXIT_INPUT
    if not rep.ok:
        for r in rep.failed_records:
            why = r.error or f"shape inference: {r.check.shape_inference}; onnxruntime: {r.check.onnxruntime}" + "".join(
                f"; {k}: {v}" for k, v in r.check.runtimes.items())
            print(f"{src}: node {r.node!r} ({r.notation}): {why}", file=sys.stderr)
        from .api import check_passed
        for name, status in rep.model_checks.items():
            if not check_passed(status):
                print(f"{src}: converted model fails {name}: {status}", file=sys.stderr)
        return EXIT_FAILED
    result.save(dst)
    where = ", ".join(rep.verify_on) if rep.verify_on else "onnxruntime"
    verified = (f", verified ({rep.signatures_checked} distinct rewrites checked in {where})"
                if rep.verified else ", not verified")
    print(f"{src} -> {dst}: {rep.rewritten}/{rep.found} StridedSlice rewritten{verified}")
    return EXIT_OK


# --------------------------------------------------------------------------- explain

def _parse_shape(text: str | None):
    if text is None:
        return None
    text = text.strip()
    if text in ("?", "unknown"):
        return None
    dims = []
    for part in text.strip("[]()").split(","):
        part = part.strip()
        if not part:
            continue
        if part.lstrip("-").isdigit():
            dims.append(int(part))
        elif part in ("?", "None"):
            dims.append(None)
        else:
            dims.append(part)
    return tuple(dims)


def _spec_from_args(args):
    from .spec import MASK_NAMES, from_index_expr, from_openvino, from_tf
    if args.begin is None:
        if not args.spec:
            raise StridedSliceError("give SPEC as an index expression, or --begin/--end/--strides",
                                    field="spec")
        return from_index_expr(args.spec, flavor=args.flavor)
    ints = [[int(v) for v in s.split(",") if v.strip()] if s else [] for s in (args.begin, args.end, args.strides)]
    if args.flavor == "tf":
        return from_tf(*ints, **{m: int(getattr(args, m) or 0) for m in MASK_NAMES})
    return from_openvino(*ints, **{m: getattr(args, m) or "" for m in MASK_NAMES})


def explain_text(spec, shape) -> str:
    from .describe import encodings
    from .lower import lower
    from .plan import make_plan
    enc = encodings(spec)
    lines = [f"spec ({spec.flavor}): {spec.index_notation()}",
             f"  begin={enc['begin']} end={enc['end']} strides={enc['strides']}",
             "  TF bit fields:   " + ", ".join(f"{k}={v}" for k, v in enc["tf"].items()),
             "  OpenVINO lists:  " + ", ".join(f'{k}="{",".join(map(str, v))}"' for k, v in enc["openvino"].items()),
             f"input shape: {_fmt_shape(shape)}"]
    plan = make_plan(spec, shape)
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
    low = lower(plan, 17, {f: "int64" for f in runtime})
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
    spec = _spec_from_args(args)
    print(explain_text(spec, _parse_shape(args.shape)))
    return EXIT_OK


# --------------------------------------------------------------------------- inspect

def cmd_inspect_target(args) -> int:
    """``inspect --target T``: the nodes of any model that break target T's constraints."""
    from .api import load_ir
    from .targets import find_violations, get_target
    target = get_target(args.target)
    found = find_violations(load_ir(args.model), target)
    if args.json:
        print(json.dumps([v.to_json() for v in found], indent=2))
    else:
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table
        table = Table(title=f"{args.model}: {len(found)} node(s) break target {target.name}")
        for col in ("node", "op", "graph", "constraint", "detail", "why it matters"):
            table.add_column(col, overflow="fold")
        for v in found:
            table.add_row(*(escape(c) for c in (v.node, v.op_type, v.graph, v.constraint, v.detail, v.why)))
        Console(width=max(160, Console().width)).print(table)
    return EXIT_OK


def cmd_inspect(args) -> int:
    if args.target:
        return cmd_inspect_target(args)
    from .api import load_ir
    from .lower import lower
    from .plan import make_plan
    from .rewrite import _all_graphs, _index_type, detect_flavor, read_node, value_dims
    m = load_ir(args.model)
    rows = []
    for graph, label, _ in _all_graphs(m):
        for node in graph:
            if node.op_type != "StridedSlice":
                continue
            name = node.name or node.outputs[0].name
            row = {"node": name, "graph": label, "domain": node.domain}
            flavor = args.flavor if args.flavor != "auto" else detect_flavor(node)
            row["flavor"] = flavor
            try:
                if flavor is None:
                    raise StridedSliceError("cannot tell the flavour from the mask attributes; pass --flavor",
                                            field="attributes")
                spec, runtime = read_node(node, flavor)
                shape = value_dims(node.inputs[0])
                plan = make_plan(spec, shape)
                low = lower(plan, 17, {f: _index_type(v) for f, v in runtime.items()})
                row.update(spec=spec.index_notation(), input_shape=_fmt_shape(shape),
                           output_shape=_fmt_shape(plan.output_shape),
                           onnx=[op.describe() for op in low.ops if op.op_type != "Identity"] or ["(rewiring)"])
            except StridedSliceError as exc:
                row["error"] = str(exc)
            rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
    table = Table(title=f"{args.model}: {len(rows)} StridedSlice node(s)")
    for col in ("node", "flavor", "spec", "input", "output", "ONNX"):
        table.add_column(col, overflow="fold")
    for r in rows:
        cells = (r["node"], str(r["flavor"]), r.get("spec", "-"), r.get("input_shape", "-"),
                 r.get("output_shape", "-"), "\n".join(r.get("onnx", [])) or r.get("error", ""))
        table.add_row(*(escape(c) for c in cells))  # shapes like [?, 5] are not markup
    Console().print(table)
    return EXIT_OK


# --------------------------------------------------------------------------- verify

def _is_terminal() -> bool:
    return sys.stderr.isatty() and os.environ.get("TERM") != "dumb"


def cmd_verify(args) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
    if args.converted is None:
        from .api import verify_model_file
        checks = verify_model_file(args.model)
        table = Table(title=f"{args.model}", min_width=60)
        table.add_column("check"), table.add_column("result", overflow="fold")
        for name, status in checks.items():
            table.add_row(name, escape(status))
        Console().print(table)
        bad = [k for k, v in checks.items() if v != "ok"]
        if bad:
            print(f"{args.model}: fails {', '.join(bad)}", file=sys.stderr)
        return EXIT_FAILED if bad else EXIT_OK
    from .api import compare_model_files
    cmp = compare_model_files(args.model, args.converted, trials=args.trials, flavor=args.flavor)
    table = Table(title=f"{args.model} (reference evaluator) vs {args.converted} (onnxruntime)", min_width=80)
    table.add_column("output"), table.add_column("result", overflow="fold")
    for name, status in cmp.outputs.items():
        table.add_row(escape(name), escape(status))
    Console().print(table)
    tried = "; ".join(", ".join(f"{k}{list(v)}" for k, v in t.items()) for t in cmp.tried)
    print(f"status: {cmp.status}" + (f" ({len(cmp.tried)} random input sets: {tried})" if cmp.tried else ""))
    if cmp.status != "ok":
        print(f"{args.converted}: not shown equivalent to {args.model}: {cmp.status}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


# --------------------------------------------------------------------------- batch

def cmd_batch(args) -> int:
    from .batch import REPORT_NAME, batch_convert
    src, out = Path(args.input_dir), Path(args.output)
    if out.resolve() == src.resolve():
        print(f"{out}: the output folder must differ from the input folder", file=sys.stderr)
        return EXIT_INPUT
    progress = _BatchProgress(fancy=_is_terminal())
    try:
        report = batch_convert(src, out, jobs=args.jobs, force=args.force,
                               flavor=None if args.flavor == "auto" else args.flavor, opset=args.opset,
                               verify=not args.no_verify, on_start=progress.start, on_result=progress.result)
    finally:
        progress.stop()
    _print_batch_summary(report)
    print(f"report: {out / REPORT_NAME}")
    return report.exit_code


class _BatchProgress:
    """A rich progress bar on a terminal, one plain line per model otherwise."""

    def __init__(self, fancy: bool):
        self.fancy, self.done, self.total, self.bar = fancy, 0, 0, None

    def start(self, total: int) -> None:
        self.total = total
        if self.fancy and total:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
            self.bar = Progress(TextColumn("converting"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                TextColumn("{task.description}"), console=Console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task("", total=total)

    def result(self, entry: dict) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.update(self.task, advance=1, description=Path(entry["input"]).name)
            return
        what = entry["status"]
        if entry.get("strided_slice_nodes") is not None and what in ("converted", "unchanged"):
            what += f" ({entry['rewritten']}/{entry['strided_slice_nodes']} StridedSlice rewritten)"
        if entry.get("error"):
            what += f": {entry['error']}"
        secs = f" [{entry['seconds']:.2f} s]" if entry.get("seconds") else ""
        print(f"[{self.done}/{self.total}] {entry['input']}: {what}{secs}", file=sys.stderr, flush=True)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _print_batch_summary(report) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
    table = Table(title=f"{report.input_dir} -> {report.output_dir} ({report.seconds:.1f} s)")
    for col in ("model", "status", "StridedSlice", "rewritten", "checks", "seconds", "error"):
        table.add_column(col, overflow="fold")
    for e in sorted(report.entries, key=lambda e: e["input"]):
        checks = e.get("checks") or {}
        ok = sum(1 for v in checks.values() if v == "ok")
        table.add_row(escape(str(Path(e["input"]).relative_to(report.input_dir))), e["status"],
                      str(e.get("strided_slice_nodes") if e.get("strided_slice_nodes") is not None else "-"),
                      str(e.get("rewritten") if e.get("rewritten") is not None else "-"),
                      f"{ok}/{len(checks)} ok" if checks else "-",
                      f"{e['seconds']:.2f}" if e.get("seconds") else "-", escape(e.get("error") or ""))
    Console(width=max(120, Console().width)).print(table)
    counts = report.counts()
    print("summary: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))


# --------------------------------------------------------------------------- main

def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="onnx-slice-tools", description="Exact StridedSlice (TensorFlow / OpenVINO) to ONNX.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    c = sub.add_parser("convert", help="rewrite every StridedSlice of a model, verified")
    c.add_argument("input")
    c.add_argument("-o", "--output", required=True)
    c.add_argument("--flavor", choices=["auto", "tf", "openvino"], default="auto")
    c.add_argument("--opset", type=int, default=None, help="target default-domain opset (default: the model's)")
    c.add_argument("--no-verify", action="store_true", help="skip shape inference and onnxruntime checks")
    c.add_argument("--report", help="write the JSON report here")
    from .targets import TARGETS
    c.add_argument("--target", choices=list(TARGETS), default="onnxruntime",
                   help="constraints of the output (default onnxruntime: the minimal lowering; portable: what "
                        "every runtime agrees on; openvino: what OpenVINO's ONNX reader gets right)")
    c.add_argument("--verify-on", default=None,
                   help="runtimes of the per-rewrite checks, e.g. onnxruntime,openvino,reference "
                        "(default: the target's)")
    c.add_argument("--fix-slices", action="store_true",
                   help="also rewrite the model's own Slice/Gather nodes that break the target's constraints")
    c.set_defaults(func=cmd_convert)

    e = sub.add_parser("explain", help="show how a spec is read, planned and lowered")
    e.add_argument("spec", nargs="?", help='an index expression, e.g. "x[1, 2:4, None, ..., :-3:-1, :]"')
    e.add_argument("--shape", help="input shape, e.g. 5,5,N,? (default: unknown rank)")
    e.add_argument("--flavor", choices=["tf", "openvino"], default="tf")
    e.add_argument("--begin"), e.add_argument("--end"), e.add_argument("--strides")
    from .spec import MASK_NAMES
    for m in MASK_NAMES:
        e.add_argument("--" + m.replace("_", "-"), dest=m,
                       help="an int bit field (tf) or a 0/1 list such as 0,1,1 (openvino)")
    e.set_defaults(func=cmd_explain)

    v = sub.add_parser("verify", help="validate a converted model, or compare it with its original")
    v.add_argument("model", help="the model to validate, or the ORIGINAL when CONVERTED is given")
    v.add_argument("converted", nargs="?", help="compare this converted model with MODEL on random inputs")
    v.add_argument("--trials", type=int, default=3, help="random input sets for the comparison (default 3)")
    v.add_argument("--flavor", choices=["auto", "tf", "openvino"], default="auto")
    v.set_defaults(func=cmd_verify)

    b = sub.add_parser("batch", help="convert and verify every .onnx under a folder, in parallel")
    b.add_argument("input_dir")
    b.add_argument("-o", "--output", required=True, help="output folder (the input tree is mirrored)")
    b.add_argument("--jobs", "-j", type=int, default=None, help="worker processes (default: CPU count)")
    b.add_argument("--force", action="store_true", help="convert again models whose input is unchanged")
    b.add_argument("--flavor", choices=["auto", "tf", "openvino"], default="auto")
    b.add_argument("--opset", type=int, default=None)
    b.add_argument("--no-verify", action="store_true")
    b.set_defaults(func=cmd_batch)

    i = sub.add_parser("inspect", help="list a model's StridedSlice nodes and their planned ONNX")
    i.add_argument("model")
    i.add_argument("--flavor", choices=["auto", "tf", "openvino"], default="auto")
    i.add_argument("--json", action="store_true")
    i.add_argument("--target", choices=list(TARGETS), default=None,
                   help="list the nodes (any op, any converter) that break this target's constraints")
    i.set_defaults(func=cmd_inspect)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ModelError, StridedSliceError) as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_INPUT
    except OnnxSliceToolsError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_FAILED
    except OSError as exc:
        print(f"{exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug of ours: still one line, and nothing half-written
        if os.environ.get("ONNX_SLICE_TOOLS_DEBUG"):
            raise
        print(f"internal error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} "
              "(set ONNX_SLICE_TOOLS_DEBUG=1 for the traceback)", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
