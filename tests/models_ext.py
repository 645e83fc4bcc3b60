"""Models with external data for the file-handling tests (built here, not stored)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from onnx_slice_tools.frontends.tfexport import TF_DOMAIN

#: (tensor, offset) of the four external tensors of :func:`nested_model`, 4 floats each
NESTED_TENSORS = (("Wt", 0), ("We", 16), ("Wl", 32), ("Cf", 48))


def _external(name: str, offset: int, location: str, n: int = 4) -> onnx.TensorProto:
    t = onnx.TensorProto(name=name, data_type=TensorProto.FLOAT, dims=[n], data_location=TensorProto.EXTERNAL)
    for k, v in (("location", location), ("offset", str(offset)), ("length", str(4 * n))):
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


def nested_model(folder: Path, locations: dict | None = None, write_data: bool = True) -> Path:
    """x -> If(c: x + Wt, else x - We) -> Loop 2x (v + Wl) -> function AddC (+ Constant Cf)
    -> TF StridedSlice [::-1].  Wt, We, Wl, Cf live in ``w.bin`` (floats 1..16) unless
    ``locations`` names another location for some of them."""
    locations = {name: "w.bin" for name, _ in NESTED_TENSORS} | (locations or {})
    folder.mkdir(parents=True, exist_ok=True)
    if write_data:
        (folder / "w.bin").write_bytes((np.arange(16, dtype=np.float32) + 1).tobytes())
    ext = {name: _external(name, off, locations[name]) for name, off in NESTED_TENSORS}

    def f4(n):
        return helper.make_tensor_value_info(n, TensorProto.FLOAT, [4])

    then_g = helper.make_graph([helper.make_node("Add", ["x", "Wt"], ["t_out"])], "then", [], [f4("t_out")],
                              [ext["Wt"]])
    else_g = helper.make_graph([helper.make_node("Sub", ["x", "We"], ["e_out"])], "else", [], [f4("e_out")],
                              [ext["We"]])
    body = helper.make_graph(
        [helper.make_node("Add", ["v_in", "Wl"], ["v_out"]), helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []), f4("v_in")],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), f4("v_out")], [ext["Wl"]])
    fn = helper.make_function("local", "AddC", ["X"], ["Y"],
                              [helper.make_node("Constant", [], ["C"], value=ext["Cf"]),
                               helper.make_node("Add", ["X", "C"], ["Y"])], [helper.make_opsetid("", 17)])
    nodes = [helper.make_node("If", ["c"], ["y1"], then_branch=then_g, else_branch=else_g),
             helper.make_node("Loop", ["M", "T", "y1"], ["y2"], body=body),
             helper.make_node("AddC", ["y2"], ["y3"], domain="local"),
             helper.make_node("StridedSlice", ["y3", "b", "e", "s"], ["y"], name="ss", domain=TF_DOMAIN,
                              begin_mask=1, end_mask=1)]
    inits = [helper.make_tensor("M", TensorProto.INT64, [], [2]), helper.make_tensor("T", TensorProto.BOOL, [], [True])]
    inits += [helper.make_tensor(k, TensorProto.INT64, [1], v) for k, v in (("b", [0]), ("e", [0]), ("s", [-1]))]
    g = helper.make_graph(nodes, "main", [f4("x"), helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                          [f4("y")], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TF_DOMAIN, 1),
                                            helper.make_opsetid("local", 1)], functions=[fn])
    m.ir_version = 8
    path = folder / "model.onnx"
    path.write_bytes(m.SerializeToString())
    return path


def nested_expected(x: np.ndarray, c: bool) -> np.ndarray:
    """What :func:`nested_model` computes (numpy, from its definition)."""
    w = np.arange(16, dtype=np.float32) + 1
    y1 = x + w[0:4] if c else x - w[4:8]
    return (y1 + 2 * w[8:12] + w[12:16])[::-1]


def big_external_model(folder: Path, n: int, location: str = "weights.bin", begin: int = 0) -> Path:
    """Gather(W[n] external in ``location``, idx) -> TF StridedSlice [:, begin:3]."""
    folder.mkdir(parents=True, exist_ok=True)
    w = np.arange(n, dtype=np.float32)
    (folder / location).parent.mkdir(parents=True, exist_ok=True)
    (folder / location).write_bytes(w.tobytes())
    t = _external("W", 0, location, n)
    inits = [t] + [helper.make_tensor(k, TensorProto.INT64, [2], v)
                   for k, v in (("b", [0, begin]), ("e", [0, 3]), ("s", [1, 1]))]
    nodes = [helper.make_node("Gather", ["W", "idx"], ["g"]),
             helper.make_node("StridedSlice", ["g", "b", "e", "s"], ["y"], name="ss", domain=TF_DOMAIN,
                              begin_mask=1, end_mask=1)]
    graph = helper.make_graph(nodes, "ext", [helper.make_tensor_value_info("idx", TensorProto.INT64, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TF_DOMAIN, 1)])
    model.ir_version = 8
    path = folder / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return path
