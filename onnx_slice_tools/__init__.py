"""onnx-slice-tools: exact StridedSlice (TensorFlow / OpenVINO) to standard ONNX."""

from __future__ import annotations

import importlib

from . import _lazy_sympy

__version__ = "0.1.0"

_lazy_sympy.install()  # onnx-ir imports sympy only to use it later: loaded on first use

#: Public name -> the module defining it.  Imported on first use (PEP 562), so that the command
#: line's ``--help`` and ``explain`` do not pay for numpy, onnx and the converter at start-up.
_EXPORTS = {
    "ConvertResult": "api", "Report": "api", "convert": "api",
    "ModelError": "errors", "OnnxSliceToolsError": "errors", "StridedSliceError": "errors",
    "VerificationError": "errors",
    "AxisPlan": "plan", "OutDim": "plan", "Plan": "plan", "make_plan": "plan",
    "apply_plan": "reference", "slice_array": "reference", "strided_slice": "reference",
    "OPENVINO": "spec", "TF": "spec", "TFLITE": "spec", "SliceSpec": "spec", "from_index_expr": "spec",
    "from_openvino": "spec", "from_tf": "spec", "from_tflite": "spec", "parse_openvino_mask": "spec",
}

__all__ = [
    "AxisPlan", "ConvertResult", "Report", "convert", "ModelError", "OPENVINO", "OnnxSliceToolsError", "OutDim", "Plan", "SliceSpec",
    "StridedSliceError", "TF", "VerificationError", "apply_plan", "from_index_expr",
    "from_openvino", "from_tf", "make_plan", "parse_openvino_mask", "slice_array",
    "strided_slice", "TFLITE", "from_tflite", "__version__",
]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
