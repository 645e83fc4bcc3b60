"""The package's import graph against the one declared order of its stages.

The order is declared once, in docs/design.md ("Map of the modules"): a fenced block whose lines
list modules, lowest stage first.  A module may import (at module level or inside a function)
only modules of its own line or of lines above it, and the imports among the modules of one line
form no cycle.  The map must list every module of the package, and only those: a module added,
moved or removed without the map fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import onnx_slice_tools

PACKAGE = Path(onnx_slice_tools.__file__).parent
DESIGN = PACKAGE.parent / "docs" / "design.md"
HEADING = "## Map of the modules"


def declared_layers(text: str) -> list[list[str]]:
    """The map's lines, lowest stage first: per line its modules as dotted names relative to
    the package (``errors``, ``graphs.walk``).  A line is ``dir/ name name ...`` (modules of the
    subpackage ``dir``) or ``name.py ...`` (top-level modules), then an optional ``# comment``."""
    section = text.split(HEADING, 1)[1]
    block = re.search(r"```text\n(.*?)```", section, re.S)
    assert block, f"docs/design.md: no ```text block under {HEADING!r}"
    layers = []
    for raw in block.group(1).splitlines():
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        if words[0].endswith("/"):
            pkg = words[0].rstrip("/").replace("/", ".")
            layers.append([f"{pkg}.{w}" for w in words[1:]])
        else:
            assert all(w.endswith(".py") for w in words), raw
            layers.append([w[:-3] for w in words])
    return layers


def package_modules() -> dict[str, Path]:
    """Dotted name (relative to the package) -> file, for every module; a subpackage's
    ``__init__.py`` is named after the subpackage (``cli``), the package's own is ``__init__``."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def imports_of(name: str, source: str, modules) -> set[str]:
    """The package's modules that ``source`` (module ``name``) imports anywhere: ``import``
    and ``from ... import`` at any depth, relative or absolute; ``from .x import y`` counts as
    importing ``x.y`` when that is a module, else ``x``."""
    is_package = name in modules and modules[name].name == "__init__.py"
    here = name.split(".") if is_package and name != "__init__" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - (node.level - 1)]
                module = ".".join(["onnx_slice_tools", *base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}".partition(".")[2] in modules else module
                       for a in node.names]
        else:
            continue
        for target in targets:
            head, _, rel = target.partition(".")
            if head != "onnx_slice_tools":
                continue
            while rel and rel not in modules:
                rel = rel.rpartition(".")[0]
            if rel and rel != name:
                found.add(rel)
    return found


def layer_problems(layers: list[list[str]], graph: dict[str, set[str]], modules) -> list[str]:
    """Every way the graph breaks the declared order: a module not listed (or listed but absent,
    or twice), an import of a module on a later line, and a cycle among one line's modules."""
    problems = []
    rank: dict[str, int] = {}
    for k, line in enumerate(layers):
        for m in line:
            if m in rank:
                problems.append(f"{m}: listed twice")
            rank[m] = k
    for m in modules:  # a subpackage's __init__ sits on its package's last line
        if m not in rank and "." not in m and any(x.startswith(m + ".") for x in rank):
            rank[m] = max(r for x, r in rank.items() if x.startswith(m + "."))
    problems += [f"{m}: not in the map" for m in modules if m not in rank]
    problems += [f"{m}: in the map, not in the package" for m in rank if m not in modules]
    for m, targets in sorted(graph.items()):
        for t in sorted(targets):
            if m in rank and t in rank and rank[t] > rank[m]:
                problems.append(f"{m} imports {t}, a later stage")
    problems += [f"import cycle: {' -> '.join(c)}" for c in cycles(graph)]
    return problems


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected component of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp) + [sorted(comp)[0]])

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_package_imports_follow_the_declared_order_and_the_map_lists_every_module():
    modules = package_modules()
    graph = {m: imports_of(m, p.read_text(), modules) for m, p in modules.items()}
    problems = layer_problems(declared_layers(DESIGN.read_text()), graph, modules)
    assert problems == [], "\n".join(problems)


def test_the_check_finds_an_upward_import_a_cycle_and_a_missing_module():
    """The check can fail: each kind of breach is reported."""
    modules = dict.fromkeys(["errors", "graphs.walk", "rewrite.core", "rewrite.shapes", "cli.main"], Path("x.py"))
    layers = [["errors"], ["graphs.walk"], ["rewrite.core", "rewrite.shapes"], ["gone"]]
    graph = {"graphs.walk": {"rewrite.core"}, "rewrite.core": {"rewrite.shapes"}, "rewrite.shapes": {"rewrite.core"}}
    assert layer_problems(layers, graph, modules) == [
        "cli.main: not in the map", "gone: in the map, not in the package",
        "graphs.walk imports rewrite.core, a later stage",
        "import cycle: rewrite.core -> rewrite.shapes -> rewrite.core"]


def test_imports_are_read_at_every_depth_and_in_every_form():
    modules = dict.fromkeys(["api", "errors", "io", "io.files", "io.validate", "verification.checks",
                             "verification.status"], Path("x.py"))
    source = ("from .errors import ModelError\n"
              "def f():\n"
              "    from .io import files\n"
              "    import onnx_slice_tools.verification.checks\n"
              "    from onnx_slice_tools.io.validate import check\n")
    assert imports_of("api", source, modules) == {"errors", "io.files", "verification.checks", "io.validate"}
    assert imports_of("verification.checks", "from .status import kind\nfrom ..errors import x\n", modules) == {
        "verification.status", "errors"}
