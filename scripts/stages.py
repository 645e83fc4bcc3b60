#!/usr/bin/env python
"""CPU seconds of named functions during one CLI command, in process (results: docs/benchmarks.md).

    python scripts/stages.py "onnx_slice_tools.api:_ProtoHolder.rewrite,onnx_slice_tools.api:_verify" \\
        convert MODEL.onnx -o OUT.onnx

Each ``module:Qualified.name`` is wrapped (in its module, and wherever another module of the
package imported it by name) to add the thread CPU time of its calls; the command then runs as
``onnx-slice-tools`` would run it (``cli.main.main``).  Prints the import time of the package,
the command's CPU, and per function its CPU seconds and calls.  A wrapper costs about a
microsecond per call: wrap stages, not functions called once per node, when comparing totals.
The output file must not exist (``convert`` never writes over a file).
"""

from __future__ import annotations

import functools
import importlib
import pathlib
import sys
import time


def _wrap(module: str, qualname: str, acc: dict, modules: list[str]) -> None:
    owner = mod = importlib.import_module(module)
    *path, name = qualname.split(".")
    for part in path:
        owner = getattr(owner, part)
    original = getattr(owner, name)

    @functools.wraps(original)
    def timed(*args, **kwargs):
        start = time.thread_time()
        try:
            return original(*args, **kwargs)
        finally:
            spent, calls = acc.get(qualname, (0.0, 0))
            acc[qualname] = (spent + time.thread_time() - start, calls + 1)
    setattr(owner, name, timed)
    if path:
        return
    for other in modules:  # (``from .x import f`` made a name of its own in the importer)
        m = sys.modules.get(other) or importlib.import_module(other)
        if m is not mod and getattr(m, name, None) is original:
            setattr(m, name, timed)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    start = time.process_time()
    import onnx_slice_tools
    from onnx_slice_tools.cli.main import main as cli
    imported = time.process_time()  # (the wrapping below imports every module of the package: not counted)
    root = pathlib.Path(onnx_slice_tools.__file__).parent
    modules = ["onnx_slice_tools." + ".".join(p.relative_to(root).with_suffix("").parts)
               for p in sorted(root.rglob("*.py")) if p.name not in ("__init__.py", "__main__.py")]
    acc: dict = {}
    for item in argv[0].split(","):
        module, qualname = item.split(":")
        _wrap(module, qualname, acc, modules)
    begun = time.process_time()
    code = cli(argv[1:])
    done = time.process_time()
    print(f"imports {imported - start:.3f} s CPU, command {done - begun:.3f} s CPU (exit {code})")
    for qualname, (spent, calls) in acc.items():
        print(f"{qualname:50s} {spent:8.3f} s  {calls} calls")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
