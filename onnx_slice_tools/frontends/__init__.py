"""Source formats (.tflite, SavedModel, Keras) into ONNX through tf2onnx."""
