"""Keras 3 LLM decode step to ONNX: a keras-hub causal LM's cached decode step (its KV-cache
writes are ``XlaDynamicUpdateSlice``, which no other converter handles) converted with
onnx-slice-tools, then greedy generation in onnxruntime, checked token for token against
keras-hub's own ``call_with_cache`` in TensorFlow.

    pip install "onnx-slice-tools[tf]" keras-hub
    python examples/keras_llm_decode.py            # a tiny random GPT-2; put your own model in build()

Copy and adapt: ``build()`` returns any keras-hub ``*CausalLM`` (``from_preset`` for real weights).
"""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np
import onnxruntime as ort
import tensorflow as tf

from onnx_slice_tools import convert

LENGTH, STEPS = 32, 16  # cache length, tokens generated


def build():
    import keras_hub
    backbone = keras_hub.models.GPT2Backbone(vocabulary_size=64, num_layers=2, num_heads=2, hidden_dim=16,
                                             intermediate_dim=32, max_sequence_length=LENGTH)
    return keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None)


def main() -> None:
    lm = build()
    cache = lm._build_cache(tf.zeros([1, LENGTH], tf.int32))[-1]  # the empty KV cache

    @tf.function(input_signature=[tf.TensorSpec([1, 1], tf.int32, name="token_ids"),
                                  tf.TensorSpec(cache.shape, cache.dtype, name="cache"),
                                  tf.TensorSpec([], tf.int32, name="index")])
    def step(token_ids, cache, index):
        logits, _, new_cache = lm.call_with_cache(token_ids, cache, index)
        return {"logits": logits, "new_cache": new_cache}

    folder = tempfile.mkdtemp()
    module = tf.Module()
    module.lm, module.step = lm, step
    tf.saved_model.save(module, f"{folder}/step", signatures={"serving_default": step})
    vocab = lm.backbone.vocabulary_size
    # the framework check draws the position and the token ids where the model accepts them
    result = convert(f"{folder}/step", input_ranges={"index": (0, LENGTH - 1), "token_ids": (0, vocab - 1)})
    print(result.report.verdict, "-", result.report.model_checks.get("slice_updates"))
    result.save(f"{folder}/step.onnx")

    session = ort.InferenceSession(f"{folder}/step.onnx")
    generated = {}
    for who in ("tensorflow", "onnxruntime"):
        kv, token, tokens = np.zeros(cache.shape, cache.dtype.as_numpy_dtype), np.array([[1]], np.int32), []
        for i in range(STEPS):
            if who == "tensorflow":
                out = step(token_ids=token, cache=kv, index=np.int32(i))
                logits, kv = out["logits"].numpy(), out["new_cache"].numpy()
            else:
                logits, kv = session.run(["logits", "new_cache"], {"token_ids": token, "cache": kv,
                                                                  "index": np.array(i, np.int32)})
            token = np.array([[int(np.argmax(logits[0, -1]))]], np.int32)
            tokens.append(int(token[0, 0]))
        generated[who] = tokens
    print(generated)
    print("identical" if generated["tensorflow"] == generated["onnxruntime"] else "DIFFERENT")


if __name__ == "__main__":
    main()
