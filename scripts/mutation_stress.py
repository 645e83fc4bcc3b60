#!/usr/bin/env python
"""Byte-level mutants of the sample models through the real CLI, with counts per outcome.

    python scripts/mutation_stress.py --mutants 3000 --seed 1 [--models models] [--verify 0.1]

Each mutant (a truncation, bit flip, byte overwrite or insertion of a sample model) is
converted by ``cli.main(["convert", ...])`` in a forked child (so an abort in native code is
counted, not fatal).  An outcome is good when the CLI exits 0 with a loadable output, or exits
2 with exactly one stderr line naming the file and no output; anything else (another exit
code, "internal error", a traceback, several lines, a changed input, a partial output, a
crash) is printed.  Exit 1 (a failed rewrite or check) is counted apart and each one printed
with its message: a corrupt input is unusable input (exit 2), and a mutant that is still a
valid model must convert, so every exit 1 is a defect to look at.  Exit code: 0 when every
outcome is good and no mutant exits 1.
"""

from __future__ import annotations

import argparse
import io
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path

KINDS = ("truncate", "bitflip", "overwrite", "insert")


def mutate(data: bytes, kind: str, pos: int, value: int, count: int = 1) -> bytes:
    """One mutation of ``data`` at ``pos`` (taken modulo its length)."""
    pos = pos % max(len(data), 1)
    if kind == "truncate":
        return data[:pos]
    if kind == "bitflip":
        b = bytearray(data)
        for k in range(count):
            i = (pos + k * 7919) % len(b)
            b[i] ^= 1 << (value % 8)
        return bytes(b)
    if kind == "overwrite":
        b = bytearray(data)
        for k in range(count):
            b[(pos + k) % len(b)] = (value + k * 37) % 256
        return bytes(b)
    if kind == "insert":
        return data[:pos] + bytes((value + k * 37) % 256 for k in range(count)) + data[pos:]
    raise ValueError(kind)


def run_cli(argv: list[str]) -> tuple[int, str]:
    """cli.main(argv) in this process; returns (exit code, what it wrote to stderr)."""
    from onnx_slice_tools.cli.main import main
    err, old = io.StringIO(), sys.stderr
    sys.stderr = err
    out_old = sys.stdout
    sys.stdout = io.StringIO()
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    finally:
        sys.stderr, sys.stdout = old, out_old
    return code, err.getvalue()


def judge(path: Path, data: bytes, out: Path, code, stderr: str) -> str:
    """'ok', 'failed', 'invalid' for a good outcome, else a short description of the defect."""
    import onnx
    if path.read_bytes() != data:
        return "BAD: input modified"
    leftovers = [p.name for p in out.parent.iterdir() if p.name != path.name and p != out]
    if leftovers:
        return f"BAD: stray files {leftovers}"
    lines = stderr.splitlines()
    if code == 0:
        if lines:
            return f"BAD: exit 0 with stderr {stderr[:200]!r}"
        try:
            onnx.load(str(out))
        except Exception as exc:
            return f"BAD: output does not load: {exc}"
        return "ok"
    if code not in (1, 2):
        return f"BAD: exit {code}: {stderr[:200]!r}"
    if out.exists():
        return f"BAD: exit {code} left an output"
    if len(lines) != 1:
        return f"BAD: exit {code} with {len(lines)} stderr lines: {stderr[:300]!r}"
    if "internal error" in stderr or "Traceback" in stderr:
        return f"BAD: {stderr.strip()[:300]}"
    if str(path) not in lines[0]:
        return f"BAD: file not named: {lines[0][:300]}"
    return f"failed: {lines[0]}" if code == 1 else "invalid"


def run_one(data: bytes, verify: bool) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mutant.onnx"
        path.write_bytes(data)
        out = Path(tmp) / "out.onnx"
        argv = ["convert", str(path), "-o", str(out)] + ([] if verify else ["--no-verify"])
        code, stderr = run_cli(argv)
        return judge(path, data, out, code, stderr)


def run_forked(data: bytes, verify: bool, timeout: float = 120.0) -> str:
    """run_one in a forked child (an abort is counted, not fatal).  A child that does not answer
    in ``timeout`` seconds (a lock inherited across fork) is killed and the mutant is run again
    in a fresh interpreter."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from hostile import forked
    return forked(lambda: run_one(data, verify), timeout, on_timeout=lambda: run_fresh(data, verify))


def run_fresh(data: bytes, verify: bool) -> str:
    """run_one in a new interpreter (no state inherited across fork)."""
    import subprocess
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "input.bin"
        src.write_bytes(data)
        code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import mutation_stress as m; "
                f"print(m.run_one(open({str(src)!r}, 'rb').read(), {verify!r}))")
        try:
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            return "BAD: no answer in 600 s"
        lines = proc.stdout.strip().splitlines()
        return lines[-1] if lines else f"BAD: fresh run died ({proc.returncode}): {proc.stderr[-300:]!r}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mutants", type=int, default=3000, help="number of mutants (default 3000)")
    ap.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    ap.add_argument("--models", default=str(Path(__file__).resolve().parent.parent / "models"),
                    help="folder of sample models")
    ap.add_argument("--verify", type=float, default=0.1,
                    help="fraction of mutants converted with verification (default 0.1; the rest --no-verify)")
    ap.add_argument("--save", help="write each defective mutant to this folder")
    args = ap.parse_args(argv)
    # imported once, before forking: each child starts warm
    import onnx.reference  # noqa: F401
    import onnxruntime  # noqa: F401

    import onnx_slice_tools.cli.main
    import onnx_slice_tools.verification.compare
    import onnx_slice_tools.verification.lowerings  # noqa: F401
    rng = random.Random(args.seed)
    models = sorted(Path(args.models).glob("*.onnx"))
    sources = [m.read_bytes() for m in models]
    for data in sources:  # warm the lazy imports and caches once (no onnxruntime session: no threads to fork)
        run_one(data, verify=False)
    counts: Counter = Counter()
    bad = Counter()
    for i in range(args.mutants):
        k = rng.randrange(len(sources))
        kind = rng.choice(KINDS)
        data = mutate(sources[k], kind, rng.randrange(1 << 30), rng.randrange(256), rng.choice((1, 1, 2, 8)))
        verify = rng.random() < args.verify
        outcome = run_forked(data, verify)
        if outcome.startswith("BAD"):
            bad[outcome[:160]] += 1
            counts["BAD"] += 1
            if bad[outcome[:160]] == 1:
                print(f"mutant {i} ({models[k].name}, {kind}): {outcome}", flush=True)
            if args.save:
                Path(args.save).mkdir(parents=True, exist_ok=True)
                (Path(args.save) / f"mutant{i}.onnx").write_bytes(data)
        elif outcome.startswith("failed"):
            counts["failed"] += 1
            print(f"mutant {i} ({models[k].name}, {kind}) exits 1: {outcome[8:][:300]}", flush=True)
            if args.save:
                Path(args.save).mkdir(parents=True, exist_ok=True)
                (Path(args.save) / f"exit1_mutant{i}.onnx").write_bytes(data)
        else:
            counts[outcome] += 1
        if (i + 1) % 100 == 0:
            print(f"{i + 1} mutants: {dict(sorted(counts.items()))}", flush=True)
    print(f"outcomes of {args.mutants} mutants (seed {args.seed}):", dict(sorted(counts.items())))
    print(f"exit-1 corrupt inputs: {counts['failed']}")
    return 1 if counts["BAD"] or counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
