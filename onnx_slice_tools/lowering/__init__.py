"""Plan -> ONNX ops for an opset and a target (static, run-time indices, TFLite indices)."""
