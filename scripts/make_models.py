#!/usr/bin/env python
"""Regenerate the sample models in models/ (each well under 1 MB).

    python scripts/make_models.py            # TensorFlow-flavour samples through tf2onnx when
                                             # tensorflow and tf2onnx are installed
    python scripts/make_models.py --helper   # everything with onnx.helper (no TensorFlow)

TensorFlow flavour (``tf_*.onnx``): exported from TensorFlow by tf2onnx with StridedSlice kept
as a custom node (domain ``ai.onnx.converters.tensorflow``), exactly what converter users
have.  OpenVINO flavour (``openvino_*.onnx``): built with onnx.helper, masks as INTS (or as IR
strings), domain ``org.openvinotoolkit``.  Real-world patterns, static and symbolic batch dims.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parent.parent
TF_DOMAIN = "ai.onnx.converters.tensorflow"
OV_DOMAIN = "org.openvinotoolkit"


# --------------------------------------------------------------------------- TensorFlow through tf2onnx

def tf_models() -> dict:
    import tensorflow as tf

    from onnx_slice_tools.frontends.tfexport import export
    rng = np.random.default_rng(0)
    f32 = tf.float32
    conv_np = rng.standard_normal((3, 3, 12, 16)).astype(np.float32) * 0.1
    dense_np = rng.standard_normal((64, 64)).astype(np.float32) * 0.1
    out = {}

    @tf.function
    def focus(x):  # YOLOv5 Focus: space-to-depth by four strided slices (NHWC)
        y = tf.concat([x[:, ::2, ::2, :], x[:, 1::2, ::2, :], x[:, ::2, 1::2, :], x[:, 1::2, 1::2, :]], axis=-1)
        return tf.nn.conv2d(y, tf.constant(conv_np), strides=1, padding="SAME")  # weights in the graph
    out["tf_yolo_focus"] = (focus, [tf.TensorSpec([None, 64, 64, 3], f32, name="images")])

    @tf.function
    def cls_pool(h):  # BERT pooler: the [CLS] token, dense, tanh
        return tf.tanh(tf.matmul(h[:, 0], tf.constant(dense_np)))
    out["tf_bert_cls_pooling"] = (cls_pool, [tf.TensorSpec([2, 128, 64], f32, name="hidden")])

    @tf.function
    def last_step(seq):  # RNN: the last time step
        return seq[:, -1, :]
    out["tf_rnn_last_step"] = (last_step, [tf.TensorSpec([None, None, 32], f32, name="sequence")])

    @tf.function
    def flip(img):  # BGR <-> RGB
        return img[..., ::-1]
    out["tf_channel_flip"] = (flip, [tf.TensorSpec([1, 224, 224, 3], f32, name="image")])

    @tf.function
    def outer(a, b):  # broadcasting with new axes: a batch of outer products
        return a[:, :, tf.newaxis] * b[:, tf.newaxis, :]
    out["tf_newaxis_outer"] = (outer, [tf.TensorSpec([None, 16], f32, name="a"), tf.TensorSpec([None, 16], f32, name="b")])

    @tf.function
    def pick(x, i):  # a runtime index
        return x[:, i]
    out["tf_runtime_index"] = (pick, [tf.TensorSpec([None, 10, 8], f32, name="x"), tf.TensorSpec([], tf.int32, name="i")])

    @tf.function
    def branch(x, flag):  # a StridedSlice inside each If branch
        return tf.cond(flag, lambda: x[:, ::-1], lambda: x[:, 1:] * 2.0)
    out["tf_if_branch"] = (branch, [tf.TensorSpec([None, 6], f32, name="x"), tf.TensorSpec([], tf.bool, name="flag")])

    return {name: export(fn, sig) for name, (fn, sig) in out.items()}


# --------------------------------------------------------------------------- onnx.helper

def _model(nodes, inputs, outputs, inits, domain, opset=17):
    graph = helper.make_graph(nodes, "sample", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(domain, 1)],
                              producer_name="onnx-slice-tools/scripts/make_models.py")
    model.ir_version = 8
    return model


def _ints(name, values):
    return helper.make_tensor(name, TensorProto.INT64, [len(values)], values)


def _ov_slice(name, x, out, begin, end, strides, masks, strings=False):
    """An OpenVINO StridedSlice node plus its begin/end/strides initializers."""
    inits = [_ints(f"{name}_begin", begin), _ints(f"{name}_end", end), _ints(f"{name}_strides", strides)]
    n = len(begin)
    attrs = {m: masks.get(m, [0] * n) for m in
             ("begin_mask", "end_mask", "new_axis_mask", "shrink_axis_mask", "ellipsis_mask")}
    if strings:  # as in OpenVINO IR: "1, 0, 1"
        attrs = {k: ", ".join(map(str, v)) for k, v in attrs.items()}
    node = helper.make_node("StridedSlice", [x] + [t.name for t in inits], [out], name=name, domain=OV_DOMAIN, **attrs)
    return node, inits


def _tf_slice(name, x, out, begin, end, strides, masks):
    inits = [helper.make_tensor(f"{name}_{k}", TensorProto.INT32, [len(v)], v)
             for k, v in (("begin", begin), ("end", end), ("strides", strides))]
    node = helper.make_node("StridedSlice", [x] + [t.name for t in inits], [out], name=name, domain=TF_DOMAIN, **masks)
    return node, inits


def openvino_models() -> dict:
    rng = np.random.default_rng(1)
    out = {}
    # YOLOv5 Focus in NCHW, symbolic batch: x[..., ::2, ::2] and its three siblings
    nodes, inits = [], []
    for k, (h, w) in enumerate(((0, 0), (1, 0), (0, 1), (1, 1))):
        node, ts = _ov_slice(f"focus{k}", "images", f"s{k}", [0, h, w], [0, 0, 0], [1, 2, 2],
                             {"ellipsis_mask": [1, 0, 0], "begin_mask": [0, 0 if h else 1, 0 if w else 1],
                              "end_mask": [0, 1, 1]})
        nodes.append(node), inits.extend(ts)
    nodes.append(helper.make_node("Concat", [f"s{k}" for k in range(4)], ["focus"], axis=1))
    inits.append(helper.make_tensor("conv_w", TensorProto.FLOAT, [16, 12, 3, 3],
                                    (rng.standard_normal(16 * 12 * 9) * 0.1).astype(np.float32)))
    nodes.append(helper.make_node("Conv", ["focus", "conv_w"], ["features"], pads=[1, 1, 1, 1]))
    out["openvino_yolo_focus"] = _model(nodes, [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["N", 3, 64, 64])],
                                        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["N", 16, 32, 32])],
                                        inits, OV_DOMAIN)
    # BERT [CLS] pooling, static batch: x[:, 0]
    node, inits = _ov_slice("cls", "hidden", "cls_token", [0, 0], [0, 1], [1, 1],
                            {"begin_mask": [1, 0], "end_mask": [1, 0], "shrink_axis_mask": [0, 1]})
    inits.append(helper.make_tensor("dense_w", TensorProto.FLOAT, [64, 64],
                                    (rng.standard_normal(64 * 64) * 0.1).astype(np.float32)))
    nodes = [node, helper.make_node("MatMul", ["cls_token", "dense_w"], ["mm"]), helper.make_node("Tanh", ["mm"], ["pooled"])]
    out["openvino_bert_cls_pooling"] = _model(nodes, [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, [2, 128, 64])],
                                              [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, [2, 64])],
                                              inits, OV_DOMAIN)
    # RNN last step, masks as IR strings: x[:, -1, :]
    node, inits = _ov_slice("last", "sequence", "last_step", [0, -1, 0], [0, 0, 0], [1, 1, 1],
                            {"begin_mask": [1, 0, 1], "end_mask": [1, 0, 1], "shrink_axis_mask": [0, 1, 0]}, strings=True)
    out["openvino_rnn_last_step"] = _model([node], [helper.make_tensor_value_info("sequence", TensorProto.FLOAT, ["N", "T", 32])],
                                           [helper.make_tensor_value_info("last_step", TensorProto.FLOAT, ["N", 32])],
                                           inits, OV_DOMAIN)
    # channel flip NCHW: x[:, ::-1]
    node, inits = _ov_slice("flip", "image", "flipped", [0, 0], [0, 0], [1, -1],
                            {"begin_mask": [1, 1], "end_mask": [1, 1]})
    out["openvino_channel_flip"] = _model([node], [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 224, 224])],
                                          [helper.make_tensor_value_info("flipped", TensorProto.FLOAT, [1, 3, 224, 224])],
                                          inits, OV_DOMAIN)
    return out


def helper_tf_models() -> dict:
    """TF-flavour samples without TensorFlow (same patterns, built by hand)."""
    out = {}
    node, inits = _tf_slice("last", "sequence", "last_step", [0, -1, 0], [0, 0, 0], [1, 1, 1],
                            dict(begin_mask=5, end_mask=5, shrink_axis_mask=2))
    out["tf_rnn_last_step"] = _model([node], [helper.make_tensor_value_info("sequence", TensorProto.FLOAT, ["N", "T", 32])],
                                     [helper.make_tensor_value_info("last_step", TensorProto.FLOAT, None)], inits, TF_DOMAIN)
    node, inits = _tf_slice("flip", "image", "flipped", [0, 0], [0, 0], [1, -1], dict(begin_mask=2, end_mask=2, ellipsis_mask=1))
    out["tf_channel_flip"] = _model([node], [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 224, 224, 3])],
                                    [helper.make_tensor_value_info("flipped", TensorProto.FLOAT, None)], inits, TF_DOMAIN)
    # runtime index x[:, i]: begin = Concat([0], Unsqueeze(i)), as tf2onnx writes it
    nodes = [helper.make_node("Unsqueeze", ["i", "axes0"], ["i1"]),
             helper.make_node("Concat", ["zero", "i1"], ["begin"], axis=0),
             helper.make_node("Add", ["i1", "one"], ["i_end"]),
             helper.make_node("Concat", ["zero", "i_end"], ["end"], axis=0),
             helper.make_node("StridedSlice", ["x", "begin", "end", "strides"], ["y"], name="pick", domain=TF_DOMAIN,
                              begin_mask=1, end_mask=1, shrink_axis_mask=2)]
    inits = [_ints("axes0", [0]), helper.make_tensor("zero", TensorProto.INT32, [1], [0]),
             helper.make_tensor("one", TensorProto.INT32, [1], [1]), helper.make_tensor("strides", TensorProto.INT32,
                 [2], [1, 1])]
    out["tf_runtime_index"] = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 10, 8]),
                                             helper.make_tensor_value_info("i", TensorProto.INT32, [])],
                                     [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits, TF_DOMAIN)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "models"))
    ap.add_argument("--helper", action="store_true", help="do not use TensorFlow/tf2onnx")
    args = ap.parse_args(argv)
    models = {}
    if not args.helper:
        try:
            models.update(tf_models())
        except ImportError as exc:
            print(f"TensorFlow/tf2onnx not available ({exc}); building TF-flavour samples with onnx.helper",
                  file=sys.stderr)
    if not any(k.startswith("tf_") for k in models):
        models.update(helper_tf_models())
    models.update(openvino_models())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, model in sorted(models.items()):
        model.doc_string = f"onnx-slice-tools sample: {name}"
        path = out / f"{name}.onnx"
        onnx.save(model, path)
        print(f"{path}: {path.stat().st_size / 1024:.1f} KiB, "
              f"{sum(n.op_type == 'StridedSlice' for n in _all_nodes(model))} StridedSlice")
    return 0


def _all_nodes(model):
    stack = list(model.graph.node)
    while stack:
        n = stack.pop()
        yield n
        for a in n.attribute:
            if a.type == a.GRAPH:
                stack.extend(a.g.node)
            stack.extend(x for g in a.graphs for x in g.node)


if __name__ == "__main__":
    sys.exit(main())
