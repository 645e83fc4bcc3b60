"""Model checks of a converted model: onnx.checker, strict shape inference, onnxruntime loads it.

The status vocabulary every check ends in (:class:`status.Status`, ``passed`` / ``failed`` /
``skipped``, ``kind``, ``detail``, ``verdict``) is in verification/status.py; it is imported
here too, so ``from .checks import kind`` keeps reading the one vocabulary.
"""

from __future__ import annotations

import os
import re

from ..errors import first_line as _first_line
from .status import (NOT_RUN, PASSED, Status, detail, failed, kind, passed, skipped,  # noqa: F401 - the vocabulary
                     verdict)


def static_checks(proto, original=None, *, inferred: list | None = None) -> dict:
    """onnx.checker and strict shape inference of ``proto`` on its weightless skeleton (no
    weight is read).  A failure the ``original`` (ModelProto or path) shares is
    ``skipped: the original fails it too: ...`` -- it does not fail the conversion, and it
    proves nothing.  Both checks read one serialization of the skeleton.  ``inferred``: a list
    that gets the strict inference's model (a ModelProto) when it passed."""
    import onnx
    from ..graphs.shape_inference import infer
    loaded: list = []

    def original_bytes():  # read only when needed, without external data
        if not loaded:
            is_path = isinstance(original, (str, os.PathLike))
            loaded.append(skeleton_bytes(onnx.load(str(original), load_external_data=False) if is_path else original))
        return loaded[0]

    data = skeleton_bytes(proto)
    checks = {}
    for name, fn in (("checker", onnx.checker.check_model),
                     ("strict_shape_inference", lambda p: infer(p, strict=True))):
        try:
            got = fn(data)
            checks[name] = PASSED
            if inferred is not None and got is not None:
                inferred.append(got)
        except Exception as exc:
            problem = _first_line(exc)
            checks[name] = failed(problem)
            if original is None:
                continue
            try:
                fn(original_bytes())
            except Exception as orig_exc:
                if _first_line(orig_exc) == problem:
                    checks[name] = skipped(f"the original fails it too: {problem}")
    return checks


#: where onnx's strict shape inference names the node it failed at
_AT_NODE = re.compile(r"\(op_type:([^,()]*), node name: ([^()]*?)\): ")


def node_at_fault(problem: str) -> tuple[str, str, str] | None:
    """(op type, node name, onnx's words) of the innermost node a strict shape inference
    failure names (``(op_type:Mul, node name: mul): [ShapeInferenceError] ...``; a node in a
    subgraph is named after the node holding it); None when it names none."""
    found = list(_AT_NODE.finditer(problem))
    if not found:
        return None
    last = found[-1]
    return last.group(1), last.group(2), problem[last.end():].strip()


def skeleton_bytes(proto) -> bytes:
    """``proto`` serialized with its external initializers as typed graph inputs
    (rewrite.weightless): the proto itself when it has none (no copy)."""
    import onnx
    from ..rewrite.shapes import weightless
    if not any(t.data_location == onnx.TensorProto.EXTERNAL for t in proto.graph.initializer):
        return proto.SerializeToString()
    sk = onnx.ModelProto()
    sk.CopyFrom(proto)
    return weightless(sk).SerializeToString()


def check_model(proto, original=None) -> dict:
    """The static checks (:func:`static_checks`) plus "onnxruntime loads it" (weights read;
    for whole-model runs, see verification/inplace.py).  Returns check name -> status."""
    from .runtimes import onnxruntime_session as make_session
    checks = static_checks(proto, original)
    try:
        make_session(proto.SerializeToString())
        checks["onnxruntime_load"] = PASSED
    except Exception as exc:
        checks["onnxruntime_load"] = failed(_first_line(exc))
    return checks
