"""onnx-slice-tools: exact StridedSlice (TensorFlow / OpenVINO) to standard ONNX."""

from .api import ConvertResult, Report, convert
from .errors import ModelError, OnnxSliceToolsError, StridedSliceError, VerificationError
from .plan import AxisPlan, OutDim, Plan, make_plan
from .reference import apply_plan, slice_array, strided_slice
from .spec import (OPENVINO, TF, TFLITE, SliceSpec, from_index_expr, from_openvino, from_tf,
                   from_tflite, parse_openvino_mask)

__version__ = "0.1.0"

__all__ = [
    "AxisPlan", "ConvertResult", "Report", "convert", "ModelError", "OPENVINO", "OnnxSliceToolsError", "OutDim", "Plan", "SliceSpec",
    "StridedSliceError", "TF", "VerificationError", "apply_plan", "from_index_expr",
    "from_openvino", "from_tf", "make_plan", "parse_openvino_mask", "slice_array",
    "strided_slice", "TFLITE", "from_tflite", "__version__",
]
