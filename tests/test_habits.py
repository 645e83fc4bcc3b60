"""Code habits ruff cannot check: no module of the package uses another module's private
(``_x``) names -- a shared name is made public where it is defined.  ruff's PLC2701 exempts
first-party modules, hence this walk."""

import ast
import io
import re
import tokenize
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


#: The one module that calls onnx's shape inference (graphs/shape_inference.py, ``infer``).
SHAPE_INFERENCE = PACKAGE / "graphs" / "shape_inference.py"
_ONNX_INFERENCE_NAMES = {"shape_inference", "infer_shapes", "infer_shapes_path"}


def _onnx_inference_uses(path: Path, source: str) -> list[str]:
    """Every reach into onnx's shape inference: ``import onnx.shape_inference``, ``from onnx
    import shape_inference``, ``from onnx[...].shape_inference import x``, and an attribute
    ``.shape_inference`` / ``.infer_shapes`` / ``.infer_shapes_path`` of a name from onnx."""
    tree = ast.parse(source)
    found, onnx_names = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "onnx":
                    onnx_names.add(alias.asname or "onnx")
                    if set(alias.name.split(".")) & _ONNX_INFERENCE_NAMES:
                        found.append(f"{path}:{node.lineno}: imports {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "onnx":
            parts = set((node.module or "").split("."))
            for alias in node.names:
                onnx_names.add(alias.asname or alias.name)
                if parts & _ONNX_INFERENCE_NAMES or alias.name in _ONNX_INFERENCE_NAMES:
                    found.append(f"{path}:{node.lineno}: imports {alias.name} from {node.module}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in _ONNX_INFERENCE_NAMES:
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in onnx_names:
                found.append(f"{path}:{node.lineno}: uses {ast.unparse(node)}")
    return found


def test_onnx_shape_inference_is_called_only_through_its_one_entry():
    """Every shape inference of the package goes through graphs/shape_inference.py (``infer``:
    the helper process, plain or strict), none calls onnx's own."""
    found = [v for f in sorted(PACKAGE.rglob("*.py")) if f != SHAPE_INFERENCE
             for v in _onnx_inference_uses(f, f.read_text())]
    assert found == [], "\n".join(found)
    assert _onnx_inference_uses(SHAPE_INFERENCE, SHAPE_INFERENCE.read_text()), "the entry itself no longer calls onnx"


def test_the_shape_inference_walk_finds_each_form():
    """The check can fail: each way to reach onnx's inference is reported; our entry is not."""
    source = ("import onnx\n"
              "import onnx.shape_inference\n"
              "from onnx import shape_inference\n"
              "from onnx.onnx_cpp2py_export.shape_inference import infer_shapes as f\n"
              "from onnx import checker as C\n"
              "from .graphs.shape_inference import infer\n"
              "onnx.shape_inference.infer_shapes(m)\n"
              "C.infer_shapes(m)\n"
              "infer(m, strict=True)\n")
    found = [v.split(": ", 1)[1] for v in _onnx_inference_uses(Path("m.py"), source)]
    assert sorted(found) == sorted(["imports onnx.shape_inference", "imports shape_inference from onnx",
                     "imports infer_shapes from onnx.onnx_cpp2py_export.shape_inference",
                     "uses onnx.shape_inference.infer_shapes", "uses onnx.shape_inference", "uses C.infer_shapes"])


#: A timing or a benchmark section cited in a comment or docstring: "~3.5 ms", "0.04 s CPU",
#: "12 µs", "1.4x faster", "§8".  Measurements live in docs/benchmarks.md with their command.
_TIMING = re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|µs)\b|~\s?\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?\s?s\b"
                     r"|\b\d+(?:\.\d+)?\s?s (?:CPU|wall)\b|\b\d+(?:\.\d+)?x (?:faster|slower)\b|§|benchmarks\.md, section")


def _timings(path: Path, source: str) -> list[str]:
    """Comments and docstrings of ``source`` that cite a timing."""
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and _TIMING.search(tok.string):
            found.append(f"{path}:{tok.start[0]}: {tok.string.strip()}")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc and _TIMING.search(doc):
                found.append(f"{path}:{getattr(node, 'lineno', 1)}: docstring cites {_TIMING.search(doc).group(0)!r}")
    return found


def test_no_comment_or_docstring_cites_a_timing():
    """Comments say what and why, never how fast."""
    found = [v for f in sorted(PACKAGE.rglob("*.py")) for v in _timings(f, f.read_text())]
    assert found == [], "\n".join(found)


def test_the_timing_check_finds_comments_and_docstrings():
    source = ('"""Module: linear, ~0.04 s CPU."""\n'
              "def f():\n"
              '    """Reads it once (12 µs a node)."""\n'
              "    x = 1  # 1.4x faster since docs/benchmarks.md §8\n"
              '    return "3 ms"  # a string is not a comment\n')
    assert [v.split(": ", 1)[1] for v in _timings(Path("m.py"), source)] == [
        "# 1.4x faster since docs/benchmarks.md §8", "docstring cites '~0.04 s'", "docstring cites '12 µs'"]


#: A test that skips itself when a package is missing: the oracles (TensorFlow, LiteRT,
#: OpenVINO, tf2onnx) are declared in the ``oracles`` extra and CI installs them, so a missing
#: one must fail the suite, not thin it out.
_SKIP_IF_MISSING = re.compile(r"\bimportorskip\s*\(")


def test_no_test_skips_itself_for_a_missing_package():
    tests = Path(__file__).parent
    found = [f"{f}:{n}" for f in sorted(tests.rglob("*.py")) if f != Path(__file__)
             for n, line in enumerate(f.read_text().splitlines(), 1) if _SKIP_IF_MISSING.search(line)]
    assert found == [], "\n".join(found)


def test_the_skip_check_finds_importorskip():
    assert _SKIP_IF_MISSING.search('tf = pytest.importorskip("tensorflow")')
    assert not _SKIP_IF_MISSING.search("import tensorflow as tf")
