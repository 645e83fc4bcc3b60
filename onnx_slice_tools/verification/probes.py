"""What the installed onnxruntime runs, probed once per installation and remembered.

:func:`max_supported_opset` and :func:`max_supported_ir_version` find the newest opset
and IR version onnxruntime loads by building sessions of tiny models, which needs onnxruntime
imported: a conversion should not pay for that each time.  The answers are
kept in ``$XDG_CACHE_HOME/onnx-slice-tools/probes.json`` (``~/.cache`` by default), keyed by the
installed onnxruntime (its package folder, and the inode, size and modification time of its
native module and of ``__init__.py``) and by the onnx version that built the probes, so a
reinstall or upgrade probes again.  A cache that cannot be read or written is ignored (the
probe runs); ``ONNX_SLICE_TOOLS_NO_CACHE=1`` turns it off.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

from .runtimes import onnxruntime_session as make_session

NO_CACHE_ENV = "ONNX_SLICE_TOOLS_NO_CACHE"


def _cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "onnx-slice-tools" / "probes.json"


def installation_key() -> str | None:
    """Identifies the installed onnxruntime and onnx without importing onnxruntime."""
    import importlib.util
    try:
        import onnx
        spec = importlib.util.find_spec("onnxruntime")
        if spec is None or not spec.origin:
            return None
        folder = Path(spec.origin).parent
        stamps = []
        for f in [Path(spec.origin), *sorted((folder / "capi").glob("onnxruntime_pybind11_state*"))]:
            st = f.stat()
            stamps.append(f"{f.name}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}")
        return f"{folder}|{'|'.join(stamps)}|onnx {onnx.__version__}"
    except Exception:  # no key: no cache
        return None


def cached(name: str, compute) -> int:
    """``compute()`` (an int), remembered per installation under ``name``."""
    if os.environ.get(NO_CACHE_ENV):
        return compute()
    key = installation_key()
    path = _cache_file()
    entries: dict = {}
    if key is not None:
        try:
            entries = json.loads(path.read_text())
            hit = entries.get(key, {}).get(name) if isinstance(entries, dict) else None
            if isinstance(hit, int) and not isinstance(hit, bool):
                return hit
        except (OSError, ValueError, AttributeError):
            entries = {}
    value = compute()
    if key is not None:
        _store(path, entries if isinstance(entries, dict) else {}, key, name, value)
    return value


def _store(path: Path, entries: dict, key: str, name: str, value: int) -> None:
    """Write the cache atomically (a temporary file renamed over it); failures are ignored."""
    try:
        entries = {k: v for k, v in entries.items() if k == key and isinstance(v, dict)}  # one installation
        entries.setdefault(key, {})[name] = value
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(entries))
        os.replace(tmp, path)
    except OSError:
        pass


# --------------------------------------------------------------------------- the probes


@functools.lru_cache(maxsize=None)
def max_supported_opset() -> int:
    """The newest default-domain opset that the installed onnxruntime loads (probed once per
    installation: verification/probes.py)."""
    return cached("max_opset", _probe_opset)


def _probe_opset() -> int:
    import onnx
    from onnx import TensorProto, helper
    for opset in range(onnx.defs.onnx_opset_version(), 10, -1):
        graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "probe",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = ir_version_for(opset)
        try:
            make_session(model.SerializeToString())
        except Exception:
            continue
        return opset
    return 11


@functools.lru_cache(maxsize=None)
def max_supported_ir_version() -> int:
    """The newest IR version the installed onnxruntime loads (probed once per installation)."""
    return cached("max_ir_version", _probe_ir_version)


def _probe_ir_version() -> int:
    import onnx
    from onnx import TensorProto, helper
    for ir in range(onnx.IR_VERSION, 6, -1):
        graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "probe",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = ir
        try:
            make_session(model.SerializeToString())
        except Exception:
            continue
        return ir
    return 7


def ir_version_for(opset: int) -> int:
    from onnx import helper
    return helper.find_min_ir_version_for([helper.make_opsetid("", opset)], ignore_unknown=True)


_PROBED = ("Slice", "Squeeze", "Unsqueeze", "Reshape", "Gather", "Identity")


def _probe_inputs(op: str, opset: int):
    """(node inputs, extra initializers) of a one-node probe of ``op``."""
    from onnx import TensorProto, helper
    i64 = TensorProto.INT64
    consts = {"s": [0], "e": [1], "a": [0], "st": [1], "sh": [1, 2]}
    inits = [helper.make_tensor(k, i64, [len(v)], v) for k, v in consts.items()]
    inits.append(helper.make_tensor("g", i64, [], [0]))  # Gather's index: a scalar
    axes_in = opset >= 13
    inputs = {"Slice": ["x", "s", "e", "a", "st"], "Squeeze": ["x", "a"] if axes_in else ["x"],
              "Unsqueeze": ["x", "a"] if axes_in else ["x"], "Reshape": ["x", "sh"], "Gather": ["x", "g"],
              "Identity": ["x"]}[op]
    attrs = {"axes": [0]} if op in ("Squeeze", "Unsqueeze") and not axes_in else {}
    return inputs, attrs, inits


@functools.lru_cache(maxsize=None)
def ort_kernel_missing(op: str, elem_type: int, opset: int) -> bool:
    """True when the installed onnxruntime cannot run ``op`` on ``elem_type`` (probed once; a
    probe that fails for float32 too proves nothing: not missing)."""
    from onnx import helper
    if op not in _PROBED or elem_type != 1 and ort_kernel_missing(op, 1, opset):
        return False
    inputs, attrs, inits = _probe_inputs(op, opset)
    graph = helper.make_graph([helper.make_node(op, inputs, ["y"], **attrs)], "probe",
                              [helper.make_tensor_value_info("x", elem_type, [1, 2])],
                              [helper.make_tensor_value_info("y", elem_type, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = max(ir_version_for(opset), 7)
    try:
        make_session(model.SerializeToString())
    except Exception:
        return True
    return False
