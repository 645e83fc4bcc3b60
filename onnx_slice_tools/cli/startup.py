"""What the command line does to its own process (never the library: importing
``onnx_slice_tools`` or calling ``convert`` leaves ``sys.modules`` and the garbage collector
alone).

:func:`..graphs.allocation.paused_gc` (the package's one pause of the collector) is what the
command line holds while a command converts: onnx-ir builds millions of objects for a big model
and each full collection rescans them all, which makes the cost superlinear; the replaced nodes'
reference cycles wait for the collection that follows re-enabling.

:func:`one_blas_thread`: numpy's OpenBLAS asked for one thread (none of its routines is used).

:func:`install_lazy_sympy`: onnx-ir imports sympy (a large import) at import time, though it needs
it only for arithmetic on symbolic dims, which the rewrite never does.

In onnx-ir 1.1.0 sympy is touched at import time only by ``onnx_ir/_symbolic_shapes.py``
(its module-level ``_ALLOWED_FUNCTIONS = {"max": sympy.Max, ...}``); ``_core.py`` does
``import sympy`` at module level but uses it only inside functions.  :func:`install` puts
placeholders for ``sympy`` and ``onnx_ir._symbolic_shapes`` in ``sys.modules``: each imports
the real module on the first attribute it lacks, e.g. when ``SymbolicDim("N") + 1`` parses its
expression (``importlib.util.LazyLoader`` cannot do this: the ``import`` statement's read of
``__spec__`` already triggers its load).  Only for the onnx-ir versions checked by hand
(:data:`KNOWN`); any other version, an already imported sympy or onnx-ir, or anything
unexpected leaves the imports as they are.  The upstream fix is described in docs/design.md
("Speed workarounds")."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
import types

#: onnx-ir versions whose import-time use of sympy is exactly the one described above.
KNOWN = frozenset({"1.1.0"})


class _Deferred(types.ModuleType):
    """A placeholder in ``sys.modules``: the real module is imported on the first attribute the
    placeholder lacks (an ``import`` statement only reads ``__spec__``, which it has: the real
    module's spec, so ``importlib.util.find_spec`` answers as before), and from then on the
    placeholder holds the real module's attributes."""

    def __init__(self, name: str, spec) -> None:
        super().__init__(name)
        self.__spec__ = spec

    def __getattr__(self, attr: str):
        name = self.__name__
        if sys.modules.get(name) is self:
            del sys.modules[name]
        real = importlib.import_module(name)
        self.__dict__.update(real.__dict__)
        self.__class__ = _Forwarding
        object.__setattr__(self, "_real", real)
        return getattr(real, attr)


class _Forwarding(_Deferred):
    """A placeholder whose real module is loaded: attributes it lacks come from there.  A
    subclass of :class:`_Deferred` because a placeholder becomes one in place (its class is
    swapped on first use), so it is still that placeholder."""

    def __getattr__(self, attr: str):
        return getattr(self.__dict__["_real"], attr)


#: the environment variable OpenBLAS (numpy's BLAS) reads its thread count from at load time
BLAS_THREADS = "OPENBLAS_NUM_THREADS"


def one_blas_thread(environ=os.environ) -> bool:
    """Ask OpenBLAS, before numpy loads it, for one thread, unless the user chose a count
    (``OPENBLAS_NUM_THREADS`` set, or numpy already imported: then nothing is done).  At load
    OpenBLAS starts a worker per extra core, and each spins a while waiting for work: CPU
    spent in every process that imports numpy, while the package calls no BLAS routine (its
    numpy work is data movement; the models run in onnxruntime, with its own threads).  The
    setting is inherited by the processes the command starts (batch workers, tf2onnx)."""
    if BLAS_THREADS in environ or "numpy" in sys.modules:
        return False
    environ[BLAS_THREADS] = "1"
    return True


def install_lazy_sympy() -> bool:
    """Install the placeholders; True when installed (False, and nothing done, once sympy or
    onnx-ir is imported, for an unknown onnx-ir version, or on anything unexpected)."""
    if "sympy" in sys.modules or "onnx_ir" in sys.modules:
        return False
    try:
        ir_spec = importlib.util.find_spec("onnx_ir")
        sympy_spec = importlib.util.find_spec("sympy")
        if ir_spec is None or not ir_spec.submodule_search_locations or sympy_spec is None:
            return False
        folder = list(ir_spec.submodule_search_locations)[0]
        with open(os.path.join(folder, "__init__.py"), encoding="utf-8") as f:
            found = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
        shapes_spec = importlib.util.spec_from_file_location("onnx_ir._symbolic_shapes",
                                                             os.path.join(folder, "_symbolic_shapes.py"))
        if found is None or found.group(1) not in KNOWN or shapes_spec is None:
            return False
    except Exception:  # a start-up optimisation only: plain imports then
        return False
    sys.modules["sympy"] = _Deferred("sympy", sympy_spec)
    sys.modules["onnx_ir._symbolic_shapes"] = _Deferred("onnx_ir._symbolic_shapes", shapes_spec)
    return True
