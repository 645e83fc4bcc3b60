"""What a StridedSlice does: specs, the canonical plan, the numpy reference (no onnx import)."""
