"""Real-model benchmark: real TensorFlow architectures with random weights (no downloads),
exported by tf2onnx both ways -- StridedSlice kept (then converted by onnx-slice-tools) and
tf2onnx's native lowering -- and compared.

    PYTHONPATH=. python scripts/real_models.py [--models gpt2,bert,...] [--json out.json]

Per model: StridedSlice nodes in the export, nodes (main graph + Loop/If bodies + functions)
of our conversion without and with cleanup and of tf2onnx's native conversion, onnxruntime
latency (median, one thread, default optimisations), equality with TensorFlow at two input
sizes (the product's float rule, verification.tolerance.agree), convert time.
Hugging Face models need the ``real`` extra (``transformers<5``, ``tf-keras``); the Keras-built
ones (``*_keras``) need only TensorFlow.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import importlib.util

# transformers' TF classes need Keras 2 (the tf-keras package, the `real` extra); the Keras-built
# models run on either, so without tf-keras they use TensorFlow's own Keras 3.
if importlib.util.find_spec("tf_keras") is not None:
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


# --------------------------------------------------------------------------- models
# Each builder returns (tf.function, input_signature, make_inputs(size_index) -> list of arrays).


def _ids(vocab):
    def make(k, batch=(1, 2), seq=(7, 13)):
        rng = np.random.default_rng(k)
        return [rng.integers(0, vocab, (batch[k], seq[k])).astype(np.int32)]
    return make


def _images(shape_nchw, nhwc=False):
    def make(k):
        rng = np.random.default_rng(k)
        b = (1, 2)[k]
        c, h, w = shape_nchw
        return [rng.standard_normal((b, h, w, c) if nhwc else (b, c, h, w)).astype(np.float32)]
    return make


#: tf2onnx 1.17 has no ONNX lowering for TF's exact GELU (it leaves an ``Erfc`` node, which
#: onnxruntime rejects), so the Hugging Face configs use the tanh approximation.
GELU = "gelu_new"


def _hf(config_cls, model_cls, call, sig, make, **config):
    import transformers
    cfg = getattr(transformers, config_cls)(**config)
    model = getattr(transformers, model_cls)(cfg)
    fn = call(model)
    import tensorflow as tf
    return tf.function(fn, input_signature=sig), sig, make


def _ids_sig():
    import tensorflow as tf
    return [tf.TensorSpec([None, None], tf.int32, name="input_ids")]


def build_gpt2():
    return _hf("GPT2Config", "TFGPT2Model", lambda m: lambda ids: m(ids).last_hidden_state, _ids_sig(),
               _ids(100), n_layer=2, n_head=2, n_embd=32, vocab_size=100, n_positions=64)


GPT2_SMALL = dict(n_layer=2, n_head=2, n_embd=32, vocab_size=100, n_positions=64)


def build_gpt2_kv():
    import tensorflow as tf
    import transformers
    model = transformers.TFGPT2Model(transformers.GPT2Config(**GPT2_SMALL))
    sig = [tf.TensorSpec([None, 1], tf.int32, name="input_ids"),
           tf.TensorSpec([2, 2, None, 2, None, 16], tf.float32, name="past")]

    def fn(ids, past):
        out = model(ids, past_key_values=tuple(past[i] for i in range(2)), use_cache=True)
        return out.last_hidden_state, tf.stack(list(out.past_key_values))

    def make(k):
        rng = np.random.default_rng(k)
        b, p = (1, 2)[k], (5, 9)[k]
        return [rng.integers(0, 100, (b, 1)).astype(np.int32),
                rng.standard_normal((2, 2, b, 2, p, 16)).astype(np.float32)]
    return tf.function(fn, input_signature=sig), sig, make


def build_gpt2_greedy():
    import tensorflow as tf
    import transformers
    model = transformers.TFGPT2LMHeadModel(transformers.GPT2Config(**GPT2_SMALL))
    sig = _ids_sig()

    def fn(ids):
        def body(i, ids):
            logits = model(ids).logits
            nxt = tf.argmax(logits[:, -1, :], axis=-1, output_type=tf.int32)
            return i + 1, tf.concat([ids, nxt[:, None]], axis=1)
        _, out = tf.while_loop(lambda i, _: i < 3, body, [tf.constant(0), ids],
                               shape_invariants=[tf.TensorShape([]), tf.TensorShape([None, None])])
        return out
    return tf.function(fn, input_signature=sig), sig, _ids(100)


def build_bert():
    return _hf("BertConfig", "TFBertModel", lambda m: lambda ids: (m(ids).last_hidden_state, m(ids).pooler_output),
               _ids_sig(), _ids(100), num_hidden_layers=2, num_attention_heads=2, hidden_size=32,
               intermediate_size=64, vocab_size=100, max_position_embeddings=64, hidden_act=GELU)


def build_t5():
    import tensorflow as tf
    sig = [tf.TensorSpec([None, None], tf.int32, name="input_ids"),
           tf.TensorSpec([None, None], tf.int32, name="decoder_input_ids")]

    def make(k):
        rng = np.random.default_rng(k)
        b = (1, 2)[k]
        return [rng.integers(0, 100, (b, (7, 13)[k])).astype(np.int32),
                rng.integers(0, 100, (b, (3, 5)[k])).astype(np.int32)]
    return _hf("T5Config", "TFT5Model",
               lambda m: lambda ids, dec: m(ids, decoder_input_ids=dec).last_hidden_state, sig, make,
               num_layers=2, num_decoder_layers=2, num_heads=2, d_model=32, d_kv=16, d_ff=64, vocab_size=100)


def build_xlnet():
    return _hf("XLNetConfig", "TFXLNetModel", lambda m: lambda ids: m(ids).last_hidden_state, _ids_sig(),
               _ids(100), n_layer=2, n_head=2, d_model=32, d_inner=64, vocab_size=100, ff_activation=GELU)


def build_funnel():
    return _hf("FunnelConfig", "TFFunnelModel", lambda m: lambda ids: m(ids).last_hidden_state, _ids_sig(),
               _ids(100), block_sizes=[1, 1], num_decoder_layers=1, n_head=2, d_model=32, d_head=16,
               d_inner=64, vocab_size=100, hidden_act=GELU)


def build_vit():
    import tensorflow as tf
    sig = [tf.TensorSpec([None, 3, 32, 32], tf.float32, name="pixel_values")]
    return _hf("ViTConfig", "TFViTModel", lambda m: lambda x: m(x).last_hidden_state, sig, _images((3, 32, 32)),
               image_size=32, patch_size=8, num_hidden_layers=2, num_attention_heads=2, hidden_size=32,
               intermediate_size=64, hidden_act=GELU)


def build_swin():
    import tensorflow as tf
    sig = [tf.TensorSpec([None, 3, 32, 32], tf.float32, name="pixel_values")]
    return _hf("SwinConfig", "TFSwinModel", lambda m: lambda x: m(x).last_hidden_state, sig, _images((3, 32, 32)),
               image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=2,
               hidden_act=GELU)


def build_mobilevit():
    import tensorflow as tf
    sig = [tf.TensorSpec([None, 3, 64, 64], tf.float32, name="pixel_values")]
    return _hf("MobileViTConfig", "TFMobileViTModel", lambda m: lambda x: m(x).last_hidden_state, sig,
               _images((3, 64, 64)), image_size=64, hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64])


def build_wav2vec2():
    import tensorflow as tf
    sig = [tf.TensorSpec([None, None], tf.float32, name="input_values")]

    def make(k):
        rng = np.random.default_rng(k)
        return [rng.standard_normal(((1, 2)[k], (400, 720)[k])).astype(np.float32)]
    return _hf("Wav2Vec2Config", "TFWav2Vec2Model", lambda m: lambda x: m(x).last_hidden_state, sig, make,
               num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64,
               conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
               num_conv_pos_embedding_groups=1, hidden_act=GELU, feat_extract_activation=GELU)


def build_efficientnetv2():
    import tensorflow as tf
    model = tf.keras.applications.EfficientNetV2B0(weights=None, include_top=False, input_shape=(64, 64, 3),
                                                     include_preprocessing=False)
    sig = [tf.TensorSpec([None, 64, 64, 3], tf.float32, name="image")]
    return tf.function(lambda x: model(x, training=False), input_signature=sig), sig, _images((3, 64, 64), nhwc=True)


def build_yolo_focus_keras():
    """YOLOv5's Focus stem (space-to-depth by four strided slices) and its detect-head slicing."""
    import tensorflow as tf
    rng = np.random.default_rng(0)
    w = tf.Variable(rng.standard_normal((3, 3, 12, 16)).astype(np.float32) * 0.1)
    w2 = tf.Variable(rng.standard_normal((1, 1, 16, 3 * 8)).astype(np.float32) * 0.1)
    sig = [tf.TensorSpec([None, None, None, 3], tf.float32, name="image")]

    def fn(x):
        x = tf.concat([x[:, ::2, ::2], x[:, 1::2, ::2], x[:, ::2, 1::2], x[:, 1::2, 1::2]], axis=-1)
        y = tf.nn.silu(tf.nn.conv2d(x, w, 1, "SAME"))
        p = tf.nn.conv2d(y, w2, 1, "SAME")
        b, h, wd = tf.shape(p)[0], tf.shape(p)[1], tf.shape(p)[2]
        p = tf.reshape(p, [b, h * wd * 3, 8])
        p = tf.sigmoid(p)
        xy, wh, conf = p[..., 0:2] * 2.0, (p[..., 2:4] * 2.0) ** 2, p[..., 4:]
        return tf.concat([xy, wh, conf], axis=-1)

    def make(k):
        rng = np.random.default_rng(k)
        return [rng.standard_normal(((1, 2)[k], (16, 24)[k], (16, 32)[k], 3)).astype(np.float32)]
    return tf.function(fn, input_signature=sig), sig, make


def build_attention_keras():
    """A GPT-2-like block written with TF ops: ``tf.shape(x)[i]`` head reshapes, last-token
    pick, causal mask from sequence length."""
    import tensorflow as tf
    rng = np.random.default_rng(0)
    wq = tf.Variable(rng.standard_normal((32, 96)).astype(np.float32) * 0.1)
    sig = [tf.TensorSpec([None, None, 32], tf.float32, name="x")]

    def fn(x):
        b, s = tf.shape(x)[0], tf.shape(x)[1]
        qkv = tf.reshape(tf.matmul(tf.reshape(x, [-1, 32]), wq), [b, s, 96])
        q, k, v = tf.split(qkv, 3, axis=-1)

        def heads(t):
            return tf.transpose(tf.reshape(t, [tf.shape(t)[0], tf.shape(t)[1], 4, 8]), [0, 2, 1, 3])
        q, k, v = heads(q), heads(k), heads(v)
        att = tf.matmul(q, k, transpose_b=True)
        n = tf.shape(att)[-1]
        mask = tf.range(n)[:, None] >= tf.range(n)[None, :]
        att = tf.where(mask, att, -1e4)
        y = tf.matmul(tf.nn.softmax(att), v)
        y = tf.reshape(tf.transpose(y, [0, 2, 1, 3]), [tf.shape(y)[0], tf.shape(y)[2], 32])
        return y, y[:, -1, :], x[:, 0]

    def make(k):
        rng = np.random.default_rng(k)
        return [rng.standard_normal(((1, 2)[k], (7, 13)[k], 32)).astype(np.float32)]
    return tf.function(fn, input_signature=sig), sig, make


def build_preprocessing_keras():
    """Keras preprocessing: center crop (slicing by computed offsets) and rescaling."""
    import tensorflow as tf
    crop = tf.keras.layers.CenterCrop(24, 24)
    sig = [tf.TensorSpec([None, 32, 40, 3], tf.float32, name="image")]

    def fn(x):
        y = crop(x) * (1.0 / 255.0)
        return y, y[:, :, :, ::-1]

    return tf.function(fn, input_signature=sig), sig, _images((3, 32, 40), nhwc=True)


MODELS = {
    "gpt2": build_gpt2, "gpt2_kv": build_gpt2_kv, "gpt2_greedy": build_gpt2_greedy, "bert": build_bert,
    "t5": build_t5, "xlnet": build_xlnet, "vit": build_vit, "wav2vec2": build_wav2vec2, "funnel": build_funnel,
    "swin": build_swin, "mobilevit": build_mobilevit, "efficientnetv2": build_efficientnetv2,
    "yolo_focus_keras": build_yolo_focus_keras, "attention_keras": build_attention_keras,
    "preprocessing_keras": build_preprocessing_keras,
}
KERAS_ONLY = ("yolo_focus_keras", "attention_keras", "preprocessing_keras")


# --------------------------------------------------------------------------- measuring


def count_ops(proto):
    """Nodes by op type in the main graph, every subgraph and every function."""
    import onnx_ir as ir

    from onnx_slice_tools.cleanup.passes import op_counts
    return op_counts(ir.from_proto(proto))


def count_nodes(proto) -> int:
    return sum(count_ops(proto).values())


def session(proto):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(proto.SerializeToString(), sess_options=so, providers=["CPUExecutionProvider"])


def latency_ms(sess, feeds, budget_s: float = 1.0, max_runs: int = 300) -> float:
    for _ in range(5):
        sess.run(None, feeds)
    times = []
    start = time.perf_counter()
    while len(times) < max_runs and (time.perf_counter() - start < budget_s or len(times) < 20):
        t = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def matches_tf(fn, sess, inputs) -> str:
    """"ok" when every output agrees with TF's under the product's float rule
    (``verification.tolerance.agree``: shape and dtype exact, floats relative to the largest magnitude)."""
    from onnx_slice_tools.verification.tolerance import agree
    expected = fn(*inputs)
    expected = expected if isinstance(expected, (tuple, list)) else [expected]
    names = [i.name for i in sess.get_inputs()]
    got = sess.run(None, dict(zip(names, inputs)))
    notes = []
    for g, e in zip(got, expected):
        r = agree(e.numpy(), g)
        if not r.ok:
            return r.detail
        if not r.bitwise:
            notes.append(r.detail.split(":", 1)[1].split(" (")[0].strip())
    return "ok" if not notes else f"ok ({notes[0]})"


def measure(name: str, latency: bool = True, save_dir: str | None = None) -> dict:
    from onnx_slice_tools.api import convert
    from onnx_slice_tools.frontends.tfexport import export
    fn, sig, make = MODELS[name]()
    row = {"model": name}
    kept = export(fn, sig)
    native = export(fn, sig, keep_strided_slice=False)
    row["strided_slice"] = count_ops(kept)["StridedSlice"]
    if save_dir:  # the StridedSlice-kept exports, e.g. for `onnx-slice-tools batch`
        import onnx
        os.makedirs(save_dir, exist_ok=True)
        onnx.save(kept, os.path.join(save_dir, f"{name}.onnx"))
    t = time.perf_counter()
    ours = convert(kept)
    row["convert_s"] = round(time.perf_counter() - t, 2)
    row["ok"] = ours.report.ok
    row["checks"] = ours.report.model_checks
    plain = convert(kept, cleanup=False, verify=False)
    row["nodes_no_cleanup"] = count_nodes(plain.model)
    row["nodes_ours"] = count_nodes(ours.model)
    row["nodes_native"] = count_nodes(native)
    s_ours = session(ours.model)
    row["tf_equal"] = [matches_tf(fn, s_ours, make(k)) for k in (0, 1)]
    try:
        s_native = session(native)
    except Exception as exc:  # tf2onnx's own conversion can be broken
        s_native = None
        row["native_tf_equal"] = [f"onnxruntime rejects it: {str(exc).splitlines()[0][:120]}"]
    else:
        row["native_tf_equal"] = [matches_tf(fn, s_native, make(k)) for k in (0, 1)]
    row["latency_ms_ours"] = row["latency_ms_native"] = None
    if not latency:
        return row
    feeds = dict(zip([i.name for i in s_ours.get_inputs()], make(1)))
    # alternate to spread machine noise over both
    lat_o, lat_n = [], []
    for _ in range(3):
        lat_o.append(latency_ms(s_ours, feeds, 0.4))
        if s_native is not None:
            lat_n.append(latency_ms(s_native, dict(zip([i.name for i in s_native.get_inputs()], make(1))), 0.4))
    row["latency_ms_ours"] = round(statistics.median(lat_o), 4)
    row["latency_ms_native"] = round(statistics.median(lat_n), 4) if lat_n else None
    return row


def s_ok(row) -> bool:
    """tf2onnx's native model ran in onnxruntime."""
    return not row["native_tf_equal"][0].startswith("onnxruntime rejects")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated, from: " + ", ".join(MODELS))
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--save", help="save the StridedSlice-kept exports in this folder")
    ap.add_argument("--no-latency", action="store_true", help="skip the onnxruntime latency runs")
    args = ap.parse_args(argv)
    import logging
    logging.getLogger("tf2onnx").setLevel(logging.ERROR)
    rows = []
    print("| model | StridedSlice | nodes: no cleanup | ours | tf2onnx native | ORT ms ours | native | "
          "= TF (2 sizes) | convert s |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|")
    for name in args.models.split(","):
        try:
            row = measure(name, latency=not args.no_latency, save_dir=args.save)
        except Exception as exc:  # one model's failure is a row, not the end
            row = {"model": name, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
            print(f"| {name} | error: {row['error']} |")
        else:
            print(f"| {name} | {row['strided_slice']} | {row['nodes_no_cleanup']} | {row['nodes_ours']} | "
                  f"{row['nodes_native']} | {row['latency_ms_ours']} | {row['latency_ms_native']} | "
                  f"{', '.join(row['tf_equal'])} | {row['convert_s']} |"
                  + ("" if s_ok(row) else f" native: {row['native_tf_equal'][0]}"),
                  flush=True)
        rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0 if all(r.get("ok") and all(s.startswith("ok") for s in r.get("tf_equal", ["x"])) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
