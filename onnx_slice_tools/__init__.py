"""onnx-slice-tools: exact StridedSlice (TensorFlow / OpenVINO) to standard ONNX."""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

#: Public name -> the module defining it.  Imported on first use (PEP 562), so that the command
#: line's ``--help`` and ``explain`` do not pay for numpy, onnx and the converter at start-up.
_EXPORTS = {
    "ConvertResult": "report", "Report": "report", "convert": "api",
    "ModelError": "errors", "OnnxSliceToolsError": "errors", "StridedSliceError": "errors",
    "VerificationError": "errors",
    "ConversionError": "errors",
    "AxisPlan": "semantics.plan", "OutDim": "semantics.plan", "Plan": "semantics.plan", "make_plan": "semantics.plan",
    "apply_plan": "semantics.reference", "slice_array": "semantics.reference", "strided_slice": "semantics.reference",
    "OPENVINO": "semantics.spec", "TF": "semantics.spec", "TFLITE": "semantics.spec", "SliceSpec": "semantics.spec",
        "from_index_expr": "semantics.spec",
    "from_openvino": "semantics.spec", "from_tf": "semantics.spec", "from_tflite": "semantics.spec",
        "parse_openvino_mask": "semantics.spec",
}

__all__ = [
    "AxisPlan", "ConvertResult", "Report", "convert", "ModelError", "OPENVINO", "OnnxSliceToolsError", "OutDim",
        "Plan", "SliceSpec",
    "StridedSliceError", "TF", "VerificationError", "ConversionError", "apply_plan", "from_index_expr",
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
