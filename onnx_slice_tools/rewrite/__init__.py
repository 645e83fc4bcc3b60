"""The StridedSlice rewrite passes (onnx-ir and protobuf) and the foreign-Slice fixer."""
