"""What the installed onnxruntime runs, probed once per installation and remembered.

``verify.max_supported_opset`` and ``verify.max_supported_ir_version`` find the newest opset
and IR version onnxruntime loads by building sessions of tiny models: importing onnxruntime
and building them costs ~0.05 s, a tenth of converting a 1,000-node model.  The answers are
kept in ``$XDG_CACHE_HOME/onnx-slice-tools/probes.json`` (``~/.cache`` by default), keyed by the
installed onnxruntime (its package folder, and the inode, size and modification time of its
native module and of ``__init__.py``) and by the onnx version that built the probes, so a
reinstall or upgrade probes again.  A cache that cannot be read or written is ignored (the
probe runs); ``ONNX_SLICE_TOOLS_NO_CACHE=1`` turns it off.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

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
