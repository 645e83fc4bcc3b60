"""Code habits ruff cannot check: no module of the package uses another module's private
(``_x``) names -- a shared name is made public where it is defined.  ruff's PLC2701 exempts
first-party modules, hence this walk."""

import ast
from pathlib import Path

import onnx_slice_tools

PACKAGE = Path(onnx_slice_tools.__file__).parent


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _violations(path: Path, source: str) -> list[str]:
    """``from .x import _name`` / ``from onnx_slice_tools.x import _name``, and ``m._name`` where
    ``m`` is one of the package's modules imported into ``path``."""
    tree = ast.parse(source)
    found, modules = [], set()
    for node in ast.walk(tree):
        ours = isinstance(node, ast.ImportFrom) and (
            node.level > 0 or (node.module or "").split(".")[0] == "onnx_slice_tools")
        if ours:
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{path}:{node.lineno}: imports {alias.name}")
                else:
                    modules.add(alias.asname or alias.name)  # may be a module: checked below
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "onnx_slice_tools":
                    modules.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name)
                and node.value.id in modules):
            found.append(f"{path}:{node.lineno}: uses {node.value.id}.{node.attr}")
    return found


def test_no_module_imports_another_modules_private_names():
    found = [v for f in sorted(PACKAGE.rglob("*.py")) for v in _violations(f, f.read_text())]
    assert found == [], "\n".join(found)


def test_the_walk_finds_each_form():
    """The check can fail: each forbidden form is reported, a public import is not."""
    source = ("from .lowering.dynamic import _Builder, where\n"
              "from onnx_slice_tools.verification.inplace import _infer\n"
              "from .verification import inplace\n"
              "inplace._over_budget(1)\n")
    found = _violations(Path("m.py"), source)
    assert [v.split(": ", 1)[1] for v in found] == [
        "imports _Builder", "imports _infer", "uses inplace._over_budget"]
