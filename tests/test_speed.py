"""The rewrite path's speed work keeps behaviour: start-up workarounds, output identical."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

_SYMBOLIC = """
import sys
{setup}
import onnx_slice_tools.rewrite.ir_pass
import onnx_ir as ir
import importlib.util
loaded_at_import = "sympy.core" in sys.modules
assert importlib.util.find_spec("sympy").name == "sympy"  # libraries probing for sympy still find it
assert importlib.util.find_spec("onnx_ir._symbolic_shapes") is not None
d = ir.SymbolicDim("N+1")
assert d.value == "N+1"
assert d.evaluate({{"N": 3}}) == 4, d.evaluate({{"N": 3}})
assert (ir.SymbolicDim("N") + 1).value == "N + 1"
assert (ir.SymbolicDim("N") * 2).evaluate({{"N": 5}}) == 10
assert str(ir.SymbolicDim("max(N, 2)")._expr) == "Max(2, N)"
import sympy
assert sympy.Symbol("k") + 1 - sympy.Symbol("k") == 1
print(loaded_at_import)
"""


def _run(setup: str = "") -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", _SYMBOLIC.format(setup=setup)], capture_output=True, text=True,
                         env=env, cwd=str(ROOT), timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_sympy_loads_on_first_symbolic_use_only():
    """With the command line's start-up workaround, onnx-ir does not import sympy; symbolic
    dims still parse and compute ("N+1" at N=3 is 4) once used."""
    assert _run("from onnx_slice_tools.cli.startup import install_lazy_sympy; assert install_lazy_sympy()") == "False"


def test_unknown_onnx_ir_version_imports_plainly():
    """For an onnx-ir version not checked by hand the workaround stays out of the way."""
    setup = "import onnx_slice_tools.cli.startup as s; s.KNOWN = frozenset(); assert not s.install_lazy_sympy()"
    assert _run(setup) == "True"


_SIDE_EFFECTS = """
import gc, os, sys
before = set(sys.modules)
blas_threads = os.environ.get("OPENBLAS_NUM_THREADS")
import onnx_slice_tools
import onnx_slice_tools.api
from onnx_slice_tools.rewrite import ir_pass
placeholders = [name for name, m in sys.modules.items()
                if m is not None and type(m).__module__.startswith("onnx_slice_tools")]
assert not placeholders, placeholders
assert "sympy" not in sys.modules or type(sys.modules["sympy"]).__name__ == "module", type(sys.modules["sympy"])
assert gc.isenabled()
seen = []
def watch(phase, info):
    seen.append(gc.isenabled())
gc.callbacks.append(watch)
from onnx_slice_tools import convert
sys.path.insert(0, "scripts")
from bench import synthetic_model
result = convert(synthetic_model(4, False), verify=False)
assert result.report.rewritten == 4
assert gc.isenabled()
assert os.environ.get("OPENBLAS_NUM_THREADS") == blas_threads  # (the program's setting only: cli.startup)
print("ok", bool(seen) and all(seen))  # the collector ran during convert
"""


def test_importing_and_converting_leave_the_process_alone():
    """``import onnx_slice_tools`` (and its API) puts no placeholder module into sys.modules
    (sympy is whatever onnx-ir really imports: the real module) and keeps the garbage collector
    on; ``convert`` runs with it on and leaves it on."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", _SIDE_EFFECTS], capture_output=True, text=True, env=env,
                         cwd=str(ROOT), timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ok", "True"], out.stdout


_BLAS = """
import os, sys
import onnx_slice_tools.cli as cli
import onnx_slice_tools.cli.main as program
program.run = lambda: print(os.environ.get("OPENBLAS_NUM_THREADS"), "numpy" in sys.modules)
cli.entry()
del os.environ["OPENBLAS_NUM_THREADS"]
from onnx_slice_tools.cli import startup
unset, chosen = {}, {"OPENBLAS_NUM_THREADS": "4"}
print(startup.one_blas_thread(unset), unset, startup.one_blas_thread(chosen), chosen)
import numpy
print(startup.one_blas_thread({}))
"""


def test_the_program_asks_openblas_for_one_thread_unless_the_user_chose():
    """The program's start (cli.entry) sets OPENBLAS_NUM_THREADS=1 before numpy loads; a count
    the user set, or a numpy already loaded, is left alone."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("OPENBLAS_NUM_THREADS", None)
    out = subprocess.run([sys.executable, "-c", _BLAS], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["1 False", "True {'OPENBLAS_NUM_THREADS': '1'} False {'OPENBLAS_NUM_THREADS': '4'}",
                                       "False"]


def test_cleanup_that_changes_nothing_leaves_the_model_as_rewritten(tmp_path):
    """A cleanup with nothing to clean keeps the rewritten model (no re-read): the saved bytes,
    ``result.model`` and ``result.ir_model`` serialized are the model without cleanup -- none of
    the shapes the cleanup's inference found leaks into it."""
    import onnx_ir as ir

    from onnx_slice_tools import convert
    from onnx_slice_tools.io.files import save_model
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench import synthetic_model
    model = synthetic_model(24, False)
    plain = convert(model, verify=False, cleanup=False)
    cleaned = convert(model, verify=False)
    assert cleaned.report.cleanup["changed"] is False
    want = plain.model.SerializeToString()
    assert cleaned.model.SerializeToString() == want
    assert cleaned.ir_model is None  # the protobuf path (rewrite/proto_pass.py): no onnx-ir model kept
    cleaned.save(tmp_path / "a.onnx")
    save_model(plain.model, tmp_path / "b.onnx")
    assert (tmp_path / "a.onnx").read_bytes() == (tmp_path / "b.onnx").read_bytes() == want
    # the onnx-ir path (a model it declines: here an opset change) keeps its model as rewritten too
    plain, cleaned = (convert(model, verify=False, cleanup=c, opset=18) for c in (False, True))
    assert cleaned.report.cleanup["changed"] is False and cleaned.ir_model is not None
    assert ir.to_proto(cleaned.ir_model).SerializeToString() == plain.model.SerializeToString() == \
        cleaned.model.SerializeToString()


def test_runtime_probes_are_remembered_per_installation(tmp_path, monkeypatch):
    """The newest opset / IR version onnxruntime loads: probed by building sessions the first
    time, then read from the cache (no onnxruntime import); a corrupt cache, another
    installation's entry, or ONNX_SLICE_TOOLS_NO_CACHE probe again."""
    from onnx_slice_tools.verification import probes
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(probes.NO_CACHE_ENV, raising=False)
    calls = []

    def probe():
        calls.append(1)
        return 21

    assert probes.cached("max_opset", probe) == 21 and len(calls) == 1
    assert probes.cached("max_opset", probe) == 21 and len(calls) == 1  # remembered
    cache = tmp_path / "onnx-slice-tools" / "probes.json"
    key = probes.installation_key()
    assert key is not None and json.loads(cache.read_text()) == {key: {"max_opset": 21}}
    cache.write_text(json.dumps({"another installation": {"max_opset": 99}}))
    assert probes.cached("max_opset", probe) == 21 and len(calls) == 2  # not this installation's
    cache.write_text("{not json")
    assert probes.cached("max_opset", probe) == 21 and len(calls) == 3
    cache.write_text(json.dumps({key: {"max_opset": True}}))  # not an int
    assert probes.cached("max_opset", probe) == 21 and len(calls) == 4
    monkeypatch.setenv(probes.NO_CACHE_ENV, "1")
    assert probes.cached("max_opset", probe) == 21 and len(calls) == 5
    monkeypatch.delenv(probes.NO_CACHE_ENV)
    (tmp_path / "onnx-slice-tools").chmod(0o500)  # unwritable: still answers
    try:
        assert probes.cached("max_ir_version", probe) == 21
    finally:
        (tmp_path / "onnx-slice-tools").chmod(0o700)
    # the real probes: a fresh process answers from the cache without importing onnxruntime
    code = ("import sys; from onnx_slice_tools.verification.lowerings import max_supported_opset as m; "
            "print(m(), 'onnxruntime' in sys.modules)")
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "real"), PYTHONPATH=str(ROOT))
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    again = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert first.stdout.split()[1] == "True" and again.stdout.split() == [first.stdout.split()[0], "False"]


_PLAIN_CONVERT = """
import sys
from onnx import TensorProto as T, helper, save
b, e, s = (helper.make_tensor(n, T.INT64, [2], v) for n, v in (("b", [0, 1]), ("e", [0, 3]), ("s", [1, 1])))
node = helper.make_node("StridedSlice", ["x", "b", "e", "s"], ["y"], domain="ai.onnx.converters.tensorflow",
                        begin_mask=1, end_mask=1)
g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", T.FLOAT, [2, 5])],
                      [helper.make_tensor_value_info("y", T.FLOAT, None)], [b, e, s])
save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
from onnx_slice_tools.cli.main import main
code = main(["convert", sys.argv[1], "-o", sys.argv[2]])
print(code, "onnx_ir" in sys.modules, "sympy.core" in sys.modules)  # (the CLI may place a lazy "sympy")
"""


def test_converting_a_plain_onnx_model_imports_no_onnx_ir(tmp_path):
    """The command line's convert of an ONNX model the protobuf path takes, with nothing to
    clean, never imports onnx-ir (nor sympy through it): the frontends' modules import no
    onnx-ir either, and the cleanup's pre-check needs none."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", _PLAIN_CONVERT, str(tmp_path / "m.onnx"), str(tmp_path / "o.onnx")],
                         capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-3:] == ["0", "False", "False"], out.stdout


def _python_calls(model) -> tuple[int, int]:
    """(Python function calls counted by cProfile in this thread, nodes shape inference was asked
    to infer) while ``convert`` (verification on) converts ``model``: deterministic measures of
    the work, unlike a clock, on a busy machine too."""
    import cProfile
    import pstats

    import onnx

    import onnx_slice_tools.graphs.shape_inference as shape_inference
    from onnx_slice_tools import convert
    inferred = [0]
    real = shape_inference.infer

    def counting(m, strict=False, **kw):
        inferred[0] += len((onnx.load_from_string(m) if isinstance(m, bytes) else m).graph.node)
        return real(m, strict, **kw)
    shape_inference.infer = counting
    profile = cProfile.Profile()
    try:
        profile.enable()
        result = convert(model)
        profile.disable()
    finally:
        shape_inference.infer = real
    assert result.ok and result.report.verdict == "verified", result.report.to_dict()["model_checks"]
    return sum(v[0] for v in pstats.Stats(profile).stats.values()), inferred[0]  # type: ignore[attr-defined]


@pytest.mark.parametrize("every", [10, 100])
def test_convert_grows_linearly_with_slices_in_series(every):
    """``convert`` with verification of a chain (slices in series, a StridedSlice every ``every``
    nodes) of twice the nodes and twice the slices does at most about twice the work, counted
    (never timed) in the two places super-linear work showed: the Python calls of the whole
    conversion and the nodes handed to ONNX shape inference (each derivation round, each check)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench import chain_model
    _python_calls(chain_model(200, 200 // every))  # (first-use costs: imports, schemas, probes)
    calls_1, inferred_1 = _python_calls(chain_model(1500, 1500 // every))
    calls_2, inferred_2 = _python_calls(chain_model(3000, 3000 // every))
    assert calls_2 <= 2.2 * calls_1, (calls_1, calls_2)
    assert inferred_2 <= 2.2 * inferred_1, (inferred_1, inferred_2)


def test_convert_of_distinct_specs_grows_linearly():
    """``convert`` with verification of twice as many StridedSlices of distinct specs (each its
    own begin/end over [B, 64, 64, 8], each a graph output: bench.distinct_spec_model) does at
    most about twice the work, counted (never timed): the Python calls of the whole conversion
    (the rewrite, the per-rewrite checks at several sizes, the in-place references, the
    as-shipped run) and the nodes handed to shape inference."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench import distinct_spec_model
    _python_calls(distinct_spec_model(50, seed=1))  # (first-use costs: imports, schemas, probes)
    # the larger first: what the smaller then finds memoized (plans of axes) only makes it cheaper
    calls_2, inferred_2 = _python_calls(distinct_spec_model(600, seed=3))
    calls_1, inferred_1 = _python_calls(distinct_spec_model(300, seed=2))
    assert calls_2 <= 2.2 * calls_1, (calls_1, calls_2)
    assert inferred_2 <= 2.2 * inferred_1, (inferred_1, inferred_2)


def test_distinct_specs_the_as_shipped_run_settles_build_no_check_session(monkeypatch):
    """Counted, not timed: on the distinct-spec model (every slice a graph output, its lowering
    static, B and the last axis size-free) no per-rewrite check runs on its own -- none is handed
    to the checks -- because the as-shipped run settles each one (verification/settled_checks.py);
    every record's check says so and the conversion is verified."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench import distinct_spec_model

    from onnx_slice_tools import convert
    from onnx_slice_tools.verification import lowerings
    handed: list = []
    real = lowerings.check_lowerings
    monkeypatch.setattr(lowerings, "check_lowerings", lambda cases, *a, **k: handed.append(len(cases)) or
                        real(cases, *a, **k))
    rep = convert(distinct_spec_model(200, seed=4)).report
    assert rep.verified and sum(handed) == 0 and rep.signatures_checked == 0, (handed, rep.verdict)
    assert len(rep.checks_as_shipped) == len(rep.records) == 200


def test_inplace_session_of_a_long_chain_is_built_in_parts(monkeypatch):
    """The in-place run's FAST session of a model above segments.MIN_NODES nodes is built in parts
    of about segments.PART_NODES nodes (onnxruntime's build grows faster than the graph), counted:
    no session the in-place run builds holds more than twice PART_NODES nodes; the conversion
    says what one whole session says (verdict, every rewrite's in-place status)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench import chain_model

    from onnx_slice_tools import convert
    from onnx_slice_tools.verification import inplace, segments
    model = chain_model(1200, 40)
    built: list = []
    real = inplace._make_session

    def counting(m):
        built.append(len(m.graph.node))
        return real(m)
    monkeypatch.setattr(inplace, "_make_session", counting)
    monkeypatch.setattr(segments, "MIN_NODES", 1 << 30)
    whole = convert(model)
    assert len(built) == 1, built
    nodes = built.pop()  # (the tapped copy, pruned)
    monkeypatch.setattr(segments, "PART_NODES", 100)
    monkeypatch.setattr(segments, "MIN_NODES", 400)
    parted = convert(model)
    assert len(built) >= 10 and max(built) < 200 and sum(built) == nodes, built
    assert parted.report.verdict == whole.report.verdict == "verified"
    assert parted.report.record_inplace == whole.report.record_inplace
    assert parted.report.model_checks == whole.report.model_checks
