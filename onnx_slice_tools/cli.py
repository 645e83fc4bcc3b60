"""Command line: ``onnx-slice-tools convert | explain | inspect``.

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
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def save_model(proto, path: Path) -> None:
    import onnx
    write_atomically(path, lambda tmp: onnx.save(proto, str(tmp)))


# --------------------------------------------------------------------------- convert

def cmd_convert(args) -> int:
    from .api import convert
    src, dst = Path(args.input), Path(args.output)
    if dst.resolve() == src.resolve():
        print(f"{dst}: refusing to overwrite the input model; choose another -o", file=sys.stderr)
        return EXIT_INPUT
    result = convert(src, flavor=args.flavor, opset=args.opset, verify=not args.no_verify)
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
            why = r.error or f"shape inference: {r.check.shape_inference}; onnxruntime: {r.check.onnxruntime}"
            print(f"{src}: node {r.node!r} ({r.notation}): {why}", file=sys.stderr)
        for name, status in rep.model_checks.items():
            if status not in ("ok", "not run"):
                print(f"{src}: converted model fails {name}: {status}", file=sys.stderr)
        return EXIT_FAILED
    save_model(result.model, dst)
    verified = (f", verified ({rep.signatures_checked} distinct rewrites checked in onnxruntime)"
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

def cmd_inspect(args) -> int:
    from .api import load_ir
    from .lower import lower
    from .plan import make_plan
    from .rewrite import _all_graphs, detect_flavor, read_spec, value_dims
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
                spec = read_spec(node, flavor)
                shape = value_dims(node.inputs[0])
                plan = make_plan(spec, shape)
                row.update(spec=spec.index_notation(), input_shape=_fmt_shape(shape),
                           output_shape=_fmt_shape(plan.output_shape),
                           onnx=[op.describe() for op in lower(plan).ops if op.op_type != "Identity"] or ["(rewiring)"])
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

    i = sub.add_parser("inspect", help="list a model's StridedSlice nodes and their planned ONNX")
    i.add_argument("model")
    i.add_argument("--flavor", choices=["auto", "tf", "openvino"], default="auto")
    i.add_argument("--json", action="store_true")
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


if __name__ == "__main__":
    sys.exit(main())
