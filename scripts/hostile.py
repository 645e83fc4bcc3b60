#!/usr/bin/env python
"""A hostile corpus through the real CLI, with counts per defect class.

    python scripts/hostile.py [--only structure,files,args,batch] [--commands all] [--list]

Three families of cases, each built in a fresh folder and run by ``cli.main`` in a forked
child of a warm interpreter (an abort is counted, not fatal; a child silent for 60 s is a hang):

* structure: field-level mutations of small StridedSlice models (attributes of the wrong type,
  huge or negative masks, 1/2/5/6 inputs, index tensors of other dtypes/ranks/lengths, names
  empty or duplicated, self-loops, outer names that do not exist, recursive functions, opset
  imports missing/duplicated/negative/huge, ir_version 0/huge, dims of 2**62, raw_data of the
  wrong length, sparse initializers ...), each run through convert (with and without
  verification), inspect (table and JSON) and verify;
* files: external data pointing at a folder, a FIFO, /dev/zero, the model itself, beyond its
  file; framework inputs (.tflite/.keras/SavedModel) that are truncated or something else;
* args: nonexistent paths, folders as files, output = input by hard link / symlink / ``..``,
  outputs in missing or read-only folders, ``-o -``, long and non-UTF-8 names, garbage
  ``--opset``/``--verify-memory``/``-j``, unknown flags, explain garbage.

A case is judged by :func:`judge`: exit 0/1/2 only; exit 0 writes nothing to stderr; exit 1/2
writes exactly one stderr line, no "internal error" or traceback; no input file changed; no
file left anywhere in the case folder but the outputs the command was asked for (and, on an
error, not even those: a ``--report`` is allowed); no hang; child peak RSS below 2 GiB.
Exit code: 0 when every case is good.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import os
import re
import select
import signal
import stat
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, helper, numpy_helper

TF = "ai.onnx.converters.tensorflow"
OV = "org.openvinotoolkit"
HANG_SECONDS = 60
RSS_LIMIT_KB = 2 * 1024 * 1024


# --------------------------------------------------------------------------- base models

def _i32(name, values, dtype=TensorProto.INT32):
    return helper.make_tensor(name, dtype, [len(values)], values)


def base_tf(ov: bool = False) -> onnx.ModelProto:
    """x[2, 3, 4] -> StridedSlice x[:, 1:3, ::-1] -> Relu -> y."""
    masks = ({"begin_mask": [1, 0, 1], "end_mask": [1, 0, 1]} if ov else {"begin_mask": 5, "end_mask": 5})
    ss = helper.make_node("StridedSlice", ["x", "b", "e", "s"], ["t"], name="ss", domain=OV if ov else TF, **masks)
    relu = helper.make_node("Relu", ["t"], ["y"], name="relu")
    g = helper.make_graph([ss, relu], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=[_i32("b", [0, 1, 0]), _i32("e", [0, 3, 0]), _i32("s", [1, 1, -1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(OV if ov else TF, 1)])
    m.ir_version = 8
    return m


def base_if() -> onnx.ModelProto:
    """If(c) with a StridedSlice of the outer x in each branch."""
    def branch(name, stride):
        ss = helper.make_node("StridedSlice", ["x", "b", "e", name + "_s"], [name + "_y"], name=name + "_ss",
                              domain=TF, begin_mask=1, end_mask=1)
        return helper.make_graph([ss], name, [], [helper.make_tensor_value_info(name + "_y", TensorProto.FLOAT, None)],
                                 initializer=[_i32(name + "_s", [1, stride])])
    node = helper.make_node("If", ["c"], ["y"], name="if", then_branch=branch("then", 1), else_branch=branch("else", 2))
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6]),
                                        helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=[_i32("b", [0, 1]), _i32("e", [0, 5])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TF, 1)])
    m.ir_version = 8
    return m


def base_function() -> onnx.ModelProto:
    """The main graph calls local function custom::F, which holds the StridedSlice."""
    ss = helper.make_node("StridedSlice", ["fx", "fb", "fe", "fs"], ["fy"], name="fss", domain=TF,
                          begin_mask=1, end_mask=1)
    consts = [helper.make_node("Constant", [], [n], value=_i32(n + "_v", v)) for n, v in
              (("fb", [0, 1]), ("fe", [0, 5]), ("fs", [1, 2]))]
    f = helper.make_function("custom", "F", ["fx"], ["fy"], consts + [ss],
                             opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TF, 1)])
    call = helper.make_node("F", ["x"], ["y"], name="call", domain="custom")
    g = helper.make_graph([call], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TF, 1),
                                            helper.make_opsetid("custom", 1)], functions=[f])
    m.ir_version = 8
    return m


def base_runtime() -> onnx.ModelProto:
    """begin and end as graph inputs: x[b0:e0, b1:e1]."""
    ss = helper.make_node("StridedSlice", ["x", "b", "e", "s"], ["y"], name="ss", domain=TF)
    g = helper.make_graph([ss], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6]),
                                      helper.make_tensor_value_info("b", TensorProto.INT32, [2]),
                                      helper.make_tensor_value_info("e", TensorProto.INT32, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=[_i32("s", [1, 1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TF, 1)])
    m.ir_version = 8
    return m


def _ss(m):
    return next(n for n in m.graph.node if n.op_type == "StridedSlice")


def _init(m, name):
    return next(t for t in m.graph.initializer if t.name == name)


def _set_attr(node, name, **kw):
    for a in list(node.attribute):
        if a.name == name:
            node.attribute.remove(a)
    if kw:
        value = kw.pop("value")
        if isinstance(value, list) and not value:
            kw.setdefault("attr_type", AttributeProto.INTS)
        node.attribute.append(helper.make_attribute(name, value, **kw))


def _raw_attr(node, name, type_, **fields):
    a = node.attribute.add()
    a.name, a.type = name, type_
    for k, v in fields.items():
        setattr(a, k, v)


# --------------------------------------------------------------------------- structure cases

def structure_cases() -> dict:
    """name -> ModelProto (or bytes): every field-level mutation."""
    cases: dict = {}
    # attributes
    for mask in ("begin_mask", "shrink_axis_mask", "ellipsis_mask", "new_axis_mask"):
        for label, kw in (("float", {"value": 1.5}), ("string", {"value": "abc"}), ("huge", {"value": 2 ** 63 - 1}),
                          ("negative", {"value": -1}), ("beyond64", {"value": -2 ** 63}),
                          ("ints_empty", {"value": [], "attr_type": AttributeProto.INTS}),
                          ("ints_long", {"value": [1] * 70}), ("tensor", {"value": _i32("t", [1])}),
                          ("floats", {"value": [1.0, 2.0]})):
            cases[f"attr_{mask}_{label}"] = m = base_tf()
            _set_attr(_ss(m), mask, **dict(kw))
    for mask in ("begin_mask", "shrink_axis_mask", "ellipsis_mask"):
        for label, value in (("empty", []), ("long", [1] * 9), ("two", [2, 0, 0]), ("neg", [-1, 0, 0]),
                             ("str_bad", "1,x,0"), ("str_empty", ""), ("str_spaces", " , ,"), ("huge", [2 ** 62] * 3),
                             ("all_ellipsis", [1, 1, 1])):
            cases[f"ov_{mask}_{label}"] = m = base_tf(ov=True)
            _set_attr(_ss(m), mask, value=value)
    cases["attr_graph_mask"] = m = base_tf()
    _set_attr(_ss(m), "begin_mask", value=helper.make_graph([], "e", [], []))
    cases["attr_ref_outside_function"] = m = base_tf()
    _raw_attr(_ss(m), "end_mask", AttributeProto.INT, ref_attr_name="nothere")
    cases["attr_duplicated"] = m = base_tf()
    _ss(m).attribute.append(helper.make_attribute("begin_mask", 2))
    cases["attr_offset_tflite_bad"] = m = base_tf()
    _set_attr(_ss(m), "offset", value="yes")
    # arity and names
    for k in (0, 1, 2, 5, 6):
        cases[f"inputs_{k}"] = m = base_tf()
        names = ["x", "b", "e", "s", "s", "s"]
        del _ss(m).input[:]
        _ss(m).input.extend(names[:k])
    for label, field, k, value in (("input_empty_name_begin", "input", 1, ""),
                                   ("input_empty_name_strides", "input", 3, ""),
                                   ("input_empty_name_data", "input", 0, ""), ("inputs_duplicated", "input", 2, "b"),
                                   ("data_is_begin", "input", 0, "b"), ("two_outputs", "output", 1, "t2"),
                                   ("output_empty_name", "output", 0, ""), ("output_is_graph_input", "output", 0, "x"),
                                   ("output_is_initializer", "output", 0, "b"), ("self_loop", "input", 0, "t")):
        cases[label] = m = base_tf()
        names = getattr(_ss(m), field)
        if k < len(names):
            names[k] = value
        else:
            names.append(value)
    cases["graph_output_is_input"] = m = base_tf()
    m.graph.output[0].name = "x"
    cases["graph_output_undefined"] = m = base_tf()
    m.graph.output[0].name = "nowhere"
    cases["no_graph_outputs"] = m = base_tf()
    del m.graph.output[:]
    cases["no_nodes"] = m = base_tf()
    del m.graph.node[:]
    cases["node_name_newline_nul"] = m = base_tf()
    _ss(m).name = "a\nb\x00c"
    cases["node_name_1mb"] = m = base_tf()
    _ss(m).name = "n" * (1 << 20)
    cases["op_in_default_domain"] = m = base_tf()
    _ss(m).domain = ""
    cases["op_in_ml_domain"] = m = base_tf()
    _ss(m).domain = "ai.onnx.ml"
    cases["ss_domain_not_imported"] = m = base_tf()
    del m.opset_import[1:]
    # index tensors
    for label, t in (("float", helper.make_tensor("b", TensorProto.FLOAT, [3], [0.0, 1.0, 0.0])),
                     ("string", helper.make_tensor("b", TensorProto.STRING, [3], [b"0", b"1", b"0"])),
                     ("bool", helper.make_tensor("b", TensorProto.BOOL, [3], [0, 1, 0])),
                     ("int8", helper.make_tensor("b", TensorProto.INT8, [3], [0, 1, 0])),
                     ("uint64", helper.make_tensor("b", TensorProto.UINT64, [3], [0, 1, 0])),
                     ("scalar", helper.make_tensor("b", TensorProto.INT32, [], [1])),
                     ("matrix", helper.make_tensor("b", TensorProto.INT32, [1, 3], [0, 1, 0])),
                     ("empty", helper.make_tensor("b", TensorProto.INT32, [0], [])),
                     ("short", helper.make_tensor("b", TensorProto.INT32, [2], [0, 1])),
                     ("long", helper.make_tensor("b", TensorProto.INT32, [70], [0] * 70)),
                     ("huge_values", helper.make_tensor("b", TensorProto.INT64, [3], [2 ** 62, -2 ** 63, 2 ** 63 - 1])),
                     ("float16", helper.make_tensor("b", TensorProto.FLOAT16, [3], [0, 1, 0]))):
        cases[f"begin_{label}"] = m = base_tf()
        m.graph.initializer.remove(_init(m, "b"))
        m.graph.initializer.append(t)
    cases["strides_zero"] = m = base_tf()
    _init(m, "s").int32_data[:] = [1, 0, 1]
    cases["strides_int64_min"] = m = base_tf()
    m.graph.initializer.remove(_init(m, "s"))
    m.graph.initializer.append(_i32("s", [1, -2 ** 63, 1], TensorProto.INT64))
    cases["raw_data_short"] = m = base_tf()
    t = _init(m, "b")
    del t.int32_data[:]
    t.raw_data = b"\x00" * 5
    cases["raw_data_and_typed"] = m = base_tf()
    _init(m, "b").raw_data = b"\x00" * 12
    cases["typed_count_wrong"] = m = base_tf()
    _init(m, "e").int32_data.append(7)
    cases["sparse_begin"] = m = base_tf()
    m.graph.initializer.remove(_init(m, "b"))
    m.graph.sparse_initializer.append(helper.make_sparse_tensor(
        helper.make_tensor("b", TensorProto.INT32, [1], [1]), helper.make_tensor("bi", TensorProto.INT64, [1], [1]), [3]))
    cases["sparse_bad_indices"] = m = base_tf()
    m.graph.sparse_initializer.append(helper.make_sparse_tensor(
        helper.make_tensor("sp", TensorProto.FLOAT, [1], [1.0]), helper.make_tensor("spi", TensorProto.INT64, [1], [99]),
        [3]))
    cases["initializer_duplicated"] = m = base_tf()
    m.graph.initializer.append(_i32("b", [0, 0, 0]))
    cases["initializer_unnamed"] = m = base_tf()
    m.graph.initializer.append(_i32("", [0]))
    cases["initializer_dims_2_62"] = m = base_tf()
    big = onnx.TensorProto(name="big", data_type=TensorProto.FLOAT, dims=[2 ** 31, 2 ** 31])
    m.graph.initializer.append(big)
    cases["constant_begin_no_value"] = m = base_tf()
    m.graph.initializer.remove(_init(m, "b"))
    m.graph.node.insert(0, helper.make_node("Constant", [], ["b"], name="cb"))
    cases["constant_begin_float_value"] = m = base_tf()
    m.graph.initializer.remove(_init(m, "b"))
    m.graph.node.insert(0, helper.make_node("Constant", [], ["b"], name="cb", value_floats=[0.0, 1.0, 0.0]))
    cases["constant_begin_two_values"] = m = base_tf()
    m.graph.initializer.remove(_init(m, "b"))
    c = helper.make_node("Constant", [], ["b"], name="cb", value_ints=[0, 1, 0])
    c.attribute.append(helper.make_attribute("value_int", 3))
    m.graph.node.insert(0, c)
    cases["constant_begin_sparse"] = m = base_tf()  # onnx-ir reads no sparse tensor
    m.graph.initializer.remove(_init(m, "b"))
    m.graph.node.insert(0, helper.make_node("Constant", [], ["b"], name="cb", sparse_value=helper.make_sparse_tensor(
        _i32("bv", [1]), helper.make_tensor("bi", TensorProto.INT64, [1], [1]), [3])))
    cases["sparse_initializer"] = m = base_tf()
    m.graph.sparse_initializer.append(helper.make_sparse_tensor(
        helper.make_tensor("sp", TensorProto.FLOAT, [1], [1.0]), helper.make_tensor("spi", TensorProto.INT64, [1], [0]),
        [4]))
    # graph inputs
    for label, (etype, dims) in (("rank0", (TensorProto.FLOAT, [])), ("rank9", (TensorProto.FLOAT, [1] * 9)),
                                 ("dims_2_62", (TensorProto.FLOAT, [2 ** 62, 3, 4])),
                                 ("dims_huge_product", (TensorProto.FLOAT, [2 ** 30, 2 ** 30, 2 ** 30])),
                                 ("dims_2_34", (TensorProto.FLOAT, [2 ** 17, 2 ** 17, 1])),
                                 ("dims_symbolic_2_35", (TensorProto.FLOAT, ["N", 2 ** 35, 1])),
                                 ("dims_2_31_each", (TensorProto.FLOAT, [2 ** 31, 3, 4])),
                                 ("zero_dim", (TensorProto.FLOAT, [0, 3, 4])),
                                 ("string", (TensorProto.STRING, [2, 3, 4])),
                                 ("bool", (TensorProto.BOOL, [2, 3, 4])),
                                 ("complex", (TensorProto.COMPLEX64, [2, 3, 4])),
                                 ("float8", (TensorProto.FLOAT8E4M3FN, [2, 3, 4])),
                                 ("int4", (TensorProto.INT4, [2, 3, 4])),
                                 ("undefined", (TensorProto.UNDEFINED, [2, 3, 4])),
                                 ("unknown_rank", (TensorProto.FLOAT, None)),
                                 ("dim_param_odd", (TensorProto.FLOAT, ["a b", "", "\n"]))):
        cases[f"x_{label}"] = m = base_tf()
        m.graph.input[0].CopyFrom(helper.make_tensor_value_info("x", etype, dims))
    cases["x_no_type"] = m = base_tf()
    m.graph.input[0].ClearField("type")
    cases["x_sparse_type"] = m = base_tf()
    m.graph.input[0].type.CopyFrom(helper.make_sparse_tensor_type_proto(TensorProto.FLOAT, [2, 3, 4]))
    cases["x_duplicated_input"] = m = base_tf()
    m.graph.input.append(m.graph.input[0])
    cases["value_info_conflict"] = m = base_tf()
    m.graph.value_info.append(helper.make_tensor_value_info("t", TensorProto.INT64, [7, 7]))
    cases["output_declared_wrong"] = m = base_tf()
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", TensorProto.INT8, [9]))
    # model header
    for label, fn in (("ir0", lambda m: setattr(m, "ir_version", 0)),
                      ("ir_huge", lambda m: setattr(m, "ir_version", 2 ** 62)),
                      ("ir_negative", lambda m: setattr(m, "ir_version", -3)),
                      ("ir3", lambda m: setattr(m, "ir_version", 3))):
        cases[f"header_{label}"] = m = base_tf()
        fn(m)
    for label, imports in (("none", []), ("default_missing", [("", None), (TF, 1)]),
                           ("duplicated", [("", 17), ("", 13), (TF, 1)]), ("negative", [("", -5), (TF, 1)]),
                           ("zero", [("", 0), (TF, 1)]), ("huge", [("", 2 ** 62), (TF, 1)]),
                           ("future", [("", 99), (TF, 1)]), ("old", [("", 1), (TF, 1)]),
                           ("ai_onnx", [("ai.onnx", 17), (TF, 1)]), ("tf_negative", [("", 17), (TF, -1)])):
        cases[f"opset_{label}"] = m = base_tf()
        del m.opset_import[:]
        for dom, v in imports:
            if v is not None:
                m.opset_import.append(helper.make_opsetid(dom, v))
    # subgraphs
    cases["if_outer_name_missing"] = m = base_if()
    m.graph.node[0].attribute[0].g.node[0].input[0] = "nowhere"
    cases["if_missing_else"] = m = base_if()
    m.graph.node[0].attribute.pop()
    cases["if_branch_empty_graph"] = m = base_if()
    m.graph.node[0].attribute[1].g.CopyFrom(helper.make_graph([], "e", [], []))
    cases["if_reads_own_output"] = m = base_if()
    m.graph.node[0].attribute[0].g.node[0].input[0] = "y"
    cases["if_branch_outputs_differ"] = m = base_if()
    m.graph.node[0].attribute[1].g.output.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, None))
    cases["if_cond_float"] = m = base_if()
    m.graph.input[1].CopyFrom(helper.make_tensor_value_info("c", TensorProto.FLOAT, [3]))
    cases["if_branch_shadows_outer"] = m = base_if()
    m.graph.node[0].attribute[0].g.node[0].output[0] = "x"
    m.graph.node[0].attribute[0].g.output[0].name = "x"
    cases["if_graphs_attr"] = m = base_if()
    m.graph.node[0].attribute.append(helper.make_attribute("extra", [helper.make_graph([], "e", [], [])]))
    # functions
    cases["function_recursive"] = m = base_function()
    m.functions[0].node.append(helper.make_node("F", ["fy"], ["fz"], domain="custom"))
    m.functions[0].output[0] = "fz"
    cases["function_mutual_recursion"] = m = base_function()
    g = helper.make_function("custom", "G", ["gx"], ["gy"], [helper.make_node("F", ["gx"], ["gy"], domain="custom")],
                             opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("custom", 1)])
    m.functions.append(g)
    m.functions[0].node.append(helper.make_node("G", ["fy"], ["fz"], domain="custom"))
    m.functions[0].output[0] = "fz"
    cases["function_same_name_two_domains"] = m = base_function()
    f2 = onnx.FunctionProto()
    f2.CopyFrom(m.functions[0])
    f2.domain = "other"
    m.functions.append(f2)
    m.opset_import.append(helper.make_opsetid("other", 1))
    cases["function_defined_twice"] = m = base_function()
    m.functions.append(m.functions[0])
    cases["function_missing"] = m = base_function()
    del m.functions[:]
    cases["function_output_undefined"] = m = base_function()
    m.functions[0].output[0] = "nowhere"
    cases["function_mask_by_ref"] = m = base_function()
    fss = next(n for n in m.functions[0].node if n.op_type == "StridedSlice")
    _set_attr(fss, "begin_mask")
    _raw_attr(fss, "begin_mask", AttributeProto.INT, ref_attr_name="bm")
    m.functions[0].attribute.append("bm")
    cases["function_mask_by_ref_given"] = m = base_function()
    fss = next(n for n in m.functions[0].node if n.op_type == "StridedSlice")
    _set_attr(fss, "begin_mask")
    _raw_attr(fss, "begin_mask", AttributeProto.INT, ref_attr_name="bm")
    m.functions[0].attribute.append("bm")
    m.graph.node[0].attribute.append(helper.make_attribute("bm", 1))
    cases["function_called_with_more_inputs"] = m = base_function()
    m.graph.node[0].input.append("x")
    cases["function_called_with_no_outputs"] = m = base_function()
    del m.graph.node[0].output[:]
    m.graph.node.append(helper.make_node("Relu", ["x"], ["y"], name="relu"))
    cases["graph_output_is_input_with_another_shape"] = m = base_tf()
    m.graph.output.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, None))
    cases["function_no_opset_import"] = m = base_function()
    del m.functions[0].opset_import[:]
    cases["function_duplicate_io"] = m = base_function()
    m.functions[0].input.append("fx")
    # runtime index model
    cases["runtime_begin_float_input"] = m = base_runtime()
    m.graph.input[1].CopyFrom(helper.make_tensor_value_info("b", TensorProto.FLOAT, [2]))
    cases["runtime_begin_unknown_len"] = m = base_runtime()
    m.graph.input[1].CopyFrom(helper.make_tensor_value_info("b", TensorProto.INT32, None))
    cases["runtime_begin_len_3"] = m = base_runtime()
    m.graph.input[1].CopyFrom(helper.make_tensor_value_info("b", TensorProto.INT32, [3]))
    cases["runtime_begin_symbolic"] = m = base_runtime()
    m.graph.input[1].CopyFrom(helper.make_tensor_value_info("b", TensorProto.INT32, ["K"]))
    cases["runtime_begin_scalar"] = m = base_runtime()
    m.graph.input[1].CopyFrom(helper.make_tensor_value_info("b", TensorProto.INT32, []))
    cases["runtime_strides_input"] = m = base_runtime()
    m.graph.initializer.pop()
    m.graph.input.append(helper.make_tensor_value_info("s", TensorProto.INT64, [2]))
    cases["runtime_x_unknown_rank"] = m = base_runtime()
    m.graph.input[0].CopyFrom(helper.make_tensor_value_info("x", TensorProto.FLOAT, None))
    # loops
    body = helper.make_graph(
        [helper.make_node("StridedSlice", ["v", "b", "e", "s"], ["v2"], domain=TF, name="lss", begin_mask=5, end_mask=5),
         helper.make_node("Identity", ["cond"], ["cond2"])], "body",
        [helper.make_tensor_value_info("it", TensorProto.INT64, []), helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("cond2", TensorProto.BOOL, []), helper.make_tensor_value_info("v2",
            TensorProto.FLOAT, None)])
    cases["loop_carried_shrinks"] = m = base_tf()
    m.graph.node[0].CopyFrom(helper.make_node("Loop", ["", ""], [], body=body))
    m.graph.node[0].input[:] = ["n", "", "x"]
    m.graph.node[0].output.append("t")
    m.graph.input.append(helper.make_tensor_value_info("n", TensorProto.INT64, []))
    cases["model_local_functions_many"] = m = base_function()
    for k in range(200):
        f = onnx.FunctionProto()
        f.CopyFrom(m.functions[0])
        f.name = f"F{k}"
        m.functions.append(f)
    cases["metadata_props_dup"] = m = base_tf()
    for _ in range(2):
        p = m.metadata_props.add()
        p.key, p.value = "k", "v\x00"
    cases["training_info"] = m = base_tf()
    m.training_info.add().algorithm.CopyFrom(helper.make_graph([], "t", [], []))
    return cases


# --------------------------------------------------------------------------- file cases

def _external_model(folder: Path, location: str, offset: int = 0, length: int | None = 12):
    m = base_tf()
    t = _init(m, "b")
    del t.int32_data[:]
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", str(offset))) + ((("length", str(length)),) if length is not None else ()):
        e = t.external_data.add()
        e.key, e.value = k, v
    onnx.save(m, str(folder / "model.onnx"))
    return folder / "model.onnx"


def file_cases() -> dict:
    """name -> setup(folder) returning the model path (files made in ``folder``)."""
    def ext(location, offset=0, length=12, make=None):
        def setup(folder: Path):
            if make:
                make(folder)
            return _external_model(folder, location, offset, length)
        return setup

    def data(folder, n=12):
        (folder / "w.bin").write_bytes(np.array([0, 1, 0], np.int32).tobytes()[:n])

    def fifo(folder):
        os.mkfifo(folder / "w.bin")

    def sub(folder):
        (folder / "w.bin").mkdir()

    def link(target):
        return lambda folder: os.symlink(target, folder / "w.bin")

    def loop(folder):
        os.symlink(folder / "w2.bin", folder / "w.bin")
        os.symlink(folder / "w.bin", folder / "w2.bin")

    def renamed(name, data_bytes):
        def setup(folder: Path):
            p = folder / name
            p.write_bytes(data_bytes)
            return p
        return setup

    def saved_model(files: dict):
        def setup(folder: Path):
            p = folder / "sm"
            (p / "variables").mkdir(parents=True)
            for k, v in files.items():
                (p / k).write_bytes(v)
            return p
        return setup

    onnx_bytes = base_tf().SerializeToString()
    models = Path(__file__).resolve().parent.parent / "models"
    tflite = (models / "tflite_masks.tflite").read_bytes()
    keras = (models / "keras_slices.keras").read_bytes()
    return {
        "ext_ok": ext("w.bin", make=data),
        "ext_offset_beyond": ext("w.bin", offset=100, make=data),
        "ext_length_beyond": ext("w.bin", length=12, make=lambda f: data(f, 8)),
        "ext_no_length_short_file": ext("w.bin", length=None, make=lambda f: data(f, 4)),
        "ext_offset_huge": ext("w.bin", offset=2 ** 63, make=data),
        "ext_folder": ext("w.bin", make=sub),
        "ext_fifo": ext("w.bin", make=fifo),
        "ext_dev_zero": ext("w.bin", make=link("/dev/zero")),
        "ext_dev_zero_abs": ext("/dev/zero"),
        "ext_itself": ext("model.onnx", length=None),
        "ext_itself_12": ext("model.onnx"),
        "ext_dotdot": ext("../w.bin"),
        "ext_symlink_out": ext("w.bin", make=link("/etc/passwd")),
        "ext_symlink_loop": ext("w.bin", make=loop),
        "ext_missing": ext("w.bin"),
        "ext_dot": ext("."),
        "ext_empty_name": ext(""),
        "ext_trailing_slash": ext("w.bin/", make=data),
        "tflite_truncated": renamed("m.tflite", tflite[: len(tflite) // 2]),
        "tflite_is_onnx": renamed("m.tflite", onnx_bytes),
        "tflite_empty": renamed("m.tflite", b""),
        "tflite_header_only": renamed("m.tflite", tflite[:8]),
        "keras_truncated": renamed("m.keras", keras[: len(keras) // 2]),
        "keras_is_onnx": renamed("m.keras", onnx_bytes),
        "h5_garbage": renamed("m.h5", b"\x89HDF\r\n\x1a\n" + b"\0" * 100),
        "onnx_is_tflite": renamed("m.onnx", tflite),
        "onnx_is_text": renamed("m.onnx", b"hello world\n" * 10),
        "saved_model_garbage_pb": saved_model({"saved_model.pb": b"\x08\x01garbage"}),
        "saved_model_empty_pb": saved_model({"saved_model.pb": b""}),
        "saved_model_is_onnx": saved_model({"saved_model.pb": onnx_bytes}),
        "name_newline_ok": renamed("new\nline.onnx", onnx_bytes),
        "name_newline_garbage": renamed("new\nline.onnx", b"hello world\n" * 10),
        "name_newline_tflite_garbage": renamed("new\nline.tflite", b"hello"),
        "name_control_chars_garbage": renamed("a\rb\x1b[31mc.onnx", b"hello"),
    }


# --------------------------------------------------------------------------- running and judging

def snapshot(folder: Path) -> dict:
    """path -> (kind, sha256 or target) of everything under ``folder`` (links not followed)."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            p = Path(root) / name
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                try:
                    digest = hashlib.sha256(p.read_bytes()).hexdigest() if st.st_size < (64 << 20) else st.st_size
                except OSError:
                    digest = "unreadable"
                out[str(p)] = ("file", digest)
            elif stat.S_ISLNK(st.st_mode):
                out[str(p)] = ("link", os.readlink(p))
            else:
                out[str(p)] = ("other", stat.S_IFMT(st.st_mode))
    return out


def run_cli(argv: list[str]) -> tuple[int, str]:
    """cli.main(argv) in this process; returns (exit code, what reached stderr, file
    descriptor 2 included)."""
    from onnx_slice_tools.cli.main import main
    err = tempfile.TemporaryFile()
    saved = os.dup(2)
    sys.stderr.flush()
    os.dup2(err.fileno(), 2)
    out_old, err_old = sys.stdout, sys.stderr
    sys.stdout = io.StringIO()
    sys.stderr = os.fdopen(os.dup(2), "w", buffering=1)
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    finally:
        sys.stderr.flush()
        sys.stderr.close()
        sys.stdout, sys.stderr = out_old, err_old
        os.dup2(saved, 2)
        os.close(saved)
    err.seek(0)
    return code, err.read().decode("utf-8", "replace")


def judge(before: dict, after: dict, outputs: list, code, stderr: str, allowed_on_error=(), progress=False) -> str:
    """'ok', 'failed', 'invalid' (a good outcome) or 'BAD <class>: detail'.  On success, the
    outputs (files or folders) and the folders made to hold them may be new; ``progress``:
    batch's ``[k/n]`` lines are allowed on stderr."""
    changed = [p for p, v in before.items() if after.get(p) != v]
    if changed:
        return f"BAD input-modified: {changed[:3]}"
    new = [p for p in after if p not in before]
    outs = {str(o) for o in outputs}
    lines = [line for line in stderr.splitlines() if line.strip()]
    if progress:  # batch's documented progress lines on stderr: "[k/n] MODEL: status"
        lines = [line for line in lines if not re.match(r"\[\d+/\d+\] ", line)]
    if "internal error" in stderr or "Traceback" in stderr:
        return f"BAD internal-error: {stderr.strip()[:300]}"
    if code not in (0, 1, 2):
        return f"BAD exit-code {code}: {stderr[:200]!r}"
    if code == 0:
        stray = [p for p in new if p not in outs and not any(p.startswith(o + os.sep) for o in outs)
                 and not (after[p][0] == "other" and any(o.startswith(p + os.sep) for o in outs))]
        if stray:
            return f"BAD stray-output: {stray[:3]}"
        if lines:
            return f"BAD stderr-on-success: {stderr[:200]!r}"
        return "ok"
    allowed = {str(a) for a in allowed_on_error}
    stray = [p for p in new if p not in allowed]
    if stray:
        return f"BAD output-on-error: {stray[:3]}"
    if len(lines) != 1:
        return f"BAD stderr-lines {len(lines)}: {stderr[:300]!r}"
    return ("failed: " if code == 1 else "invalid: ") + lines[0][:300]


def forked(fn, timeout: float = HANG_SECONDS, on_timeout=None) -> str:
    """fn() -> str in a forked child; a crash, hang or memory blow-up is a BAD outcome
    (``on_timeout()``, when given, answers for a child silent for ``timeout`` seconds)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            result = fn()
        except BaseException as exc:
            result = f"BAD escaped: {type(exc).__name__}: {str(exc)[:200]}"
        os.write(w, result.encode("utf-8", "replace")[:4000])
        os._exit(0)
    os.close(w)
    chunks = []
    while True:
        ready, _, _ = select.select([r], [], [], timeout)
        if not ready:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(r)
            return on_timeout() if on_timeout else f"BAD hang: no answer in {timeout:.0f} s"
        chunk = os.read(r, 4096)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(r)
    _, status, usage = os.wait4(pid, 0)
    text = b"".join(chunks).decode()
    if not text:
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else "-"
        return f"BAD crash: child died (status {status}, signal {sig})"
    if usage.ru_maxrss > RSS_LIMIT_KB and not text.startswith("BAD"):
        return f"BAD memory: peak RSS {usage.ru_maxrss // 1024} MiB"
    return text


def model_commands(path: Path, folder: Path, which: str) -> list:
    """(argv, outputs, allowed_on_error) of each command run on a model file."""
    out, rep = folder / "out.onnx", folder / "rep.json"
    cmds = {
        "convert": (["convert", str(path), "-o", str(out), "--no-verify"], [out, Path(str(out) + ".data")], ()),
        "convert-verify": (["convert", str(path), "-o", str(out), "--report", str(rep)],
                           [out, Path(str(out) + ".data"), rep], (rep,)),
        "inspect": (["inspect", str(path)], [], ()),
        "inspect-json": (["inspect", str(path), "--json"], [], ()),
        "verify": (["verify", str(path)], [], ()),
        "verify-pair": (["verify", str(path), str(path), "--trials", "1"], [], ()),
        "inspect-target": (["inspect", str(path), "--target", "portable", "--json"], [], ()),
    }
    return [cmds[k] for k in (COMMANDS if which == "all" else which.split(","))]


@contextlib.contextmanager
def _chdir(folder: Path):
    old = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(old)


def check(folder: Path, setup) -> str:
    """Build one case in ``folder`` (``setup(folder)`` -> (argv, outputs, allowed_on_error[,
    options])), run it from ``folder/cwd`` in this process and judge it."""
    (folder / "cwd").mkdir()
    argv, outputs, allowed, *more = setup(folder)
    before = snapshot(folder)
    with _chdir(folder / "cwd"):
        code, err = run_cli(argv)
    codes = (more[0] if more else {}).get("codes", (0, 1, 2))
    if code in codes and code > 2:
        code, err = 1, err or "interrupted\n"  # judged as an error exit: no output may remain
    return judge(before, snapshot(folder), [o for o in outputs if o is not None], code, err, allowed,
                 progress=bool(argv) and argv[0] == "batch")


def model_case(make, command: str):
    """The setup of ``command`` run on the model file ``make(folder)`` returns."""
    def setup(folder: Path):
        return model_commands(make(folder), folder, command)[0]
    return setup


def in_temp(setup) -> str:
    with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
        return check(Path(tmp), setup)


COMMANDS = ("convert", "convert-verify", "inspect", "inspect-json", "verify", "verify-pair", "inspect-target")


def run_case(make, which: str) -> list[tuple[str, str]]:
    """Each command on one model case, each in a forked child."""
    commands = COMMANDS if which == "all" else which.split(",")
    return [(c, forked(lambda c=c: in_temp(model_case(make, c)))) for c in commands]


def _saver(m):
    def setup(folder: Path):
        p = folder / "model.onnx"
        p.write_bytes(m if isinstance(m, bytes) else m.SerializeToString())
        return p
    return setup


# --------------------------------------------------------------------------- argument cases

def arg_cases() -> dict:
    """name -> setup(folder) returning (argv, outputs, allowed_on_error)."""
    def good(folder: Path) -> Path:
        p = folder / "in.onnx"
        p.write_bytes(base_tf().SerializeToString())
        return p

    def conv(*extra, out="out.onnx"):
        def setup(folder):
            src = good(folder)
            o = folder / out if out is not None else None
            return (["convert", str(src)] + (["-o", str(o)] if o is not None else []) + list(extra), [o], ())
        return setup

    cases = {
        "missing_input": lambda f: (["convert", str(f / "nope.onnx"), "-o", str(f / "o.onnx")], [], ()),
        "folder_input": lambda f: (["convert", str(f / "cwd"), "-o", str(f / "o.onnx")], [], ()),
        "input_dev_null": lambda f: (["convert", "/dev/null", "-o", str(f / "o.onnx")], [], ()),
        "input_dev_zero": lambda f: (["inspect", "/dev/zero"], [], ()),
        "output_missing_folder": conv(out="no/such/folder/o.onnx"),
        "output_is_folder": conv(out="cwd"),
        "output_trailing_slash": lambda f: (["convert", str(good(f)), "-o", str(f / "o.onnx") + "/"], [], ()),
        "output_dash": lambda f: (["convert", str(good(f)), "-o", "-"], [], ()),
        "output_is_input": lambda f: (["convert", str(good(f)), "-o", str(f / "in.onnx")], [], ()),
        "output_is_input_dotdot": lambda f: (["convert", str(good(f)), "-o", str(f / "cwd" / ".." / "in.onnx")], [], ()),
        "output_dev_null": lambda f: (["convert", str(good(f)), "-o", "/dev/null"], [], ()),
        "report_dev_null": conv("--report", "/dev/null"),
        "report_is_input": lambda f: (["convert", str(good(f)), "-o", str(f / "o.onnx"), "--report", str(f / "in.onnx")], [], ()),
        "report_in_missing_folder": lambda f: (["convert", str(good(f)), "-o", str(f / "o.onnx"), "--report",
                                                str(f / "no" / "r.json")], [f / "o.onnx", f / "no"], ()),
        "report_is_output_data": lambda f: (["convert", str(good(f)), "-o", str(f / "o.onnx"), "--report",
                                             str(f / "o.onnx.data")], [], ()),
        "long_output_name": conv(out="o" * 300 + ".onnx"),
        "long_output_path": conv(out="/".join(["d" * 200] * 30) + "/o.onnx"),
        "non_utf8_output": lambda f: ([ "convert", str(good(f)), "-o", os.fsdecode(bytes(f / "cwd") + b"/\xff\xfe.onnx")],
                                      [Path(os.fsdecode(bytes(f / "cwd") + b"/\xff\xfe.onnx"))], ()),
        "non_utf8_input": (lambda f: (["inspect", _non_utf8_copy(f)], [], ())),
        "opset_garbage": conv("--opset", "abc"),
        "opset_float": conv("--opset", "17.5"),
        "opset_huge": conv("--opset", "99999999999999999999"),
        "opset_negative": conv("--opset", "-1"),
        "opset_10": conv("--opset", "10"),
        "verify_memory_garbage": conv("--verify-memory", "x"),
        "verify_memory_zero": conv("--verify-memory", "0"),
        "verify_memory_negative": conv("--verify-memory", "-5"),
        "verify_memory_huge": conv("--verify-memory", "1e300"),
        "verify_memory_inf": conv("--verify-memory", "inf"),
        "verify_memory_nan": conv("--verify-memory", "nan"),
        "verify_memory_tiny": conv("--verify-memory", "1e-300"),
        "unknown_flag": conv("--frobnicate"),
        "conflicting_no_verify_strict": conv("--no-verify", "--strict"),
        "no_verify_verify_on": conv("--no-verify", "--verify-on", "openvino"),
        "verify_on_garbage": conv("--verify-on", "nothing"),
        "verify_on_empty": conv("--verify-on", ""),
        "inputs_garbage": conv("--inputs", "x:1,,a"),
        "inputs_on_onnx": conv("--inputs", "x:1,2"),
        "jobs_zero": lambda f: (["batch", str(f), "-o", str(f / "b"), "-j", "0"], [], ()),
        "jobs_huge": lambda f: (["batch", str(_folder_with_good(f)), "-o", str(f / "b"), "-j", "10000", "--no-verify"],
                                [f / "b"], ()),
        "jobs_garbage": lambda f: (["batch", str(f), "-o", str(f / "b"), "-j", "x"], [], ()),
        "batch_missing": lambda f: (["batch", str(f / "nope"), "-o", str(f / "b")], [], ()),
        "batch_file_as_folder": lambda f: (["batch", str(good(f)), "-o", str(f / "b")], [], ()),
        "batch_output_is_file": lambda f: (["batch", str(_folder_with_good(f)), "-o", str(good(f))], [], ()),
        "batch_output_is_input": lambda f: (["batch", str(_folder_with_good(f)), "-o", str(f / "in_dir")], [], ()),
        "batch_output_parent_of_input": lambda f: (["batch", str(_folder_with_good(f)), "-o", str(f)], [], ()),
        "batch_output_trailing_slash": lambda f: (["batch", str(_folder_with_good(f)) + "/", "-o",
                                                   str(f / "in_dir") + "/"], [], ()),
        "batch_output_symlink_to_input": (lambda f: (["batch", str(_folder_with_good(f)), "-o",
                                                            _symlink(f / "in_dir", f / "lnk")], [], ())),
        "batch_symlink_loop": (lambda f: (["batch", _loop_folder(f), "-o", str(f / "b"), "--no-verify", "-j", "1"],
                                                [f / "b"], ())),
        "explain_garbage": lambda f: (["explain", "x[[[["], [], ()),
        "explain_empty": lambda f: (["explain", ""], [], ()),
        "explain_huge_index": lambda f: (["explain", "x[99999999999999999999999]"], [], ()),
        "explain_many_axes": lambda f: (["explain", "x[" + ",".join(["0"] * 100) + "]"], [], ()),
        "explain_tflite_explicit": lambda f: (["explain", "--flavor", "tflite", "--begin", "0", "--end", "1"], [], ()),
        "explain_tflite_masks": lambda f: (["explain", "--flavor", "tflite", "--begin", "0", "--end", "1",
                                            "--begin-mask", "1"], [], ()),
        "explain_mask_huge": lambda f: (["explain", "--begin", "0", "--end", "1", "--begin-mask", str(2 ** 70)], [], ()),
        "explain_mask_negative": lambda f: (["explain", "--begin", "0", "--end", "1", "--shrink-axis-mask", "-1"], [], ()),
        "explain_ov_mask_garbage": lambda f: (["explain", "--flavor", "openvino", "--begin", "0", "--end", "1",
                                               "--begin-mask", "x,y"], [], ()),
        "explain_shape_garbage": lambda f: (["explain", "x[0]", "--shape", "1,$,3"], [], ()),
        "explain_shape_huge": lambda f: (["explain", "x[0]", "--shape", str(2 ** 80)], [], ()),
        "explain_begin_huge": lambda f: (["explain", "--begin", str(2 ** 70), "--end", "1", "--shape", "5"], [], ()),
        "explain_strides_zero": lambda f: (["explain", "--begin", "0", "--end", "1", "--strides", "0"], [], ()),
        "explain_nul": lambda f: (["explain", "x[\x01]"], [], ()),
        "explain_shape_empty_item": lambda f: (["explain", "x[0]", "--shape", "a,,b"], [], ()),
        "explain_shape_trailing_comma": lambda f: (["explain", "x[0]", "--shape", "a,b,"], [], ()),
        "explain_begin_empty_item": lambda f: (["explain", "--begin", "1,,2", "--end", "3,4,5"], [], ()),
        "explain_bare_name": lambda f: (["explain", "x"], [], ()),
        "explain_negated_name": lambda f: (["explain", "x[-i]"], [], ()),
        "explain_name_arithmetic": lambda f: (["explain", "x[i+1]"], [], ()),
        "explain_index_beyond_int64": lambda f: (["explain", "x[99999999999999999999:]"], [], ()),
        "explain_unary_minus_5000": lambda f: (["explain", "x[" + "-" * 5000 + "1]"], [], ()),
        "explain_parens_5000": lambda f: (["explain", "x[" + "(" * 5000 + "1" + ")" * 5000 + "]"], [], ()),
        "explain_strides_help_example": lambda f: (["explain", "--begin", "0,-1", "--end", "2,0", "--strides", "1,-1",
                                                    "--shape", "4,4"], [], ()),
        "no_verify_verify_memory": conv("--no-verify", "--verify-memory", "10"),
        "fix_slices_on_onnxruntime": conv("--fix-slices"),
        "outputs_duplicated": conv("--outputs", "a", "a"),
        "verify_on_empty_item": conv("--verify-on", "onnxruntime,,openvino"),
        "inputs_empty_dim": lambda f: (["convert", str(f / "m.tflite"), "-o", str(f / "o.onnx"), "--inputs", "x:1,,3"],
                                       [], ()),
        "inspect_flavor_mismatch": lambda f: (["inspect", str(good(f)), "--flavor", "openvino"], [], ()),
        "inspect_flavor_with_target": lambda f: (["inspect", str(good(f)), "--flavor", "tf", "--target", "portable"],
                                                 [], ()),
        "verify_trials_without_pair": lambda f: (["verify", str(good(f)), "--trials", "5"], [], ()),
        "output_name_newline": conv(out="o\nut.onnx"),
        "input_name_newline_missing": lambda f: (["convert", str(f / "no\nsuch.onnx"), "-o", str(f / "o.onnx")], [], ()),
        "inspect_target_garbage": lambda f: (["inspect", str(good(f)), "--target", "zzz"], [], ()),
        "verify_trials_zero": lambda f: (["verify", str(good(f)), str(good(f)), "--trials", "0"], [], ()),
        "verify_trials_huge": lambda f: (["verify", str(good(f)), str(good(f)), "--trials", "99999999999"], [], ()),
        "output_hardlink_to_input": lambda f: (["convert", str(good(f)), "-o", _link(f / "in.onnx", f / "o.onnx")], [], ()),
        "output_symlink_to_input": lambda f: (["convert", str(good(f)), "-o", _symlink(f / "in.onnx", f / "o.onnx")], [], ()),
        "output_symlink_dangling": lambda f: (["convert", str(good(f)), "-o", _symlink(f / "nowhere", f / "o.onnx")], [], ()),
        "output_data_symlink": lambda f: (["convert", str(good(f)), "-o", str(f / "o.onnx")] if _symlink(
            f / "in.onnx", f / "o.onnx.data") else [], [], ()),
        "output_folder_symlink_to_input_folder": lambda f: (["convert", str(good(f)), "-o",
                                                             _symlink(f, f / "cwd" / "up") + "/in.onnx"], [], ()),
        "input_chmod_000": lambda f: (["convert", _chmod(good(f), 0), "-o", str(f / "o.onnx"), "--no-verify"],
                                      [f / "o.onnx"], ()),
        "input_fifo": lambda f: (["convert", _fifo(f / "in.onnx"), "-o", str(f / "o.onnx")], [], ()),
        "disk_full_model": lambda f: (["convert", str(_weighty(f)), "-o", str(f / "o.onnx"), "--no-verify"], [], (),
                                      _fsize(f, 60_000)),
        "disk_full_external": lambda f: (["convert", str(_weighty(f, external=True)), "-o", str(f / "o.onnx"),
                                          "--no-verify"], [], (), _fsize(f, 300_000)),
        "disk_full_report": lambda f: (["convert", str(good(f)), "-o", str(f / "o.onnx"), "--no-verify", "--report",
                                        str(f / "r.json")], [], (), _fsize(f, 1000)),
        "sigint_early": lambda f: (["convert", str(_weighty(f, external=True)), "-o", str(f / "o.onnx")],
            [f / "o.onnx", f / "o.onnx.data"], (),
                                   _interrupt(0.3)),
        "sigint_late": lambda f: (["convert", str(_weighty(f, external=True)), "-o", str(f / "o.onnx")], [f / "o.onnx",
            f / "o.onnx.data"], (),
                                  _interrupt(1.5)),
        "sigterm": lambda f: (["convert", str(_weighty(f, external=True)), "-o", str(f / "o.onnx")], [f / "o.onnx",
            f / "o.onnx.data"], (),
                              _interrupt(0.8, signal.SIGTERM)),
        "no_command": lambda f: ([], [], ()),
        "unknown_command": lambda f: (["frob"], [], ()),
    }
    return cases


def _non_utf8_copy(folder: Path) -> str:
    p = os.fsencode(folder) + b"/\xff\xfe.onnx"
    with open(p, "wb") as f:
        f.write(base_tf().SerializeToString())
    return os.fsdecode(p)


def _folder_with_good(folder: Path) -> Path:
    d = folder / "in_dir"
    d.mkdir(exist_ok=True)
    (d / "a.onnx").write_bytes(base_tf().SerializeToString())
    return d


def _symlink(target: Path, link: Path) -> str:
    os.symlink(target, link)
    return str(link)


def _link(target: Path, link: Path) -> str:
    os.link(target, link)
    return str(link)


def _chmod(path: Path, mode: int) -> str:
    os.chmod(path, mode)
    return str(path)


def _fifo(path: Path) -> str:
    os.mkfifo(path)
    return str(path)


def _weighty(folder: Path, external: bool = False) -> Path:
    """The base model plus 400 KB of weights (in ``w.data`` with ``external``)."""
    m = base_tf()
    w = numpy_helper.from_array(np.arange(100_000, dtype=np.float32).reshape(1, 100_000), "w")
    m.graph.initializer.append(w)
    m.graph.node.append(helper.make_node("Add", ["w", "w"], ["w2"], name="add"))
    m.graph.output.append(helper.make_tensor_value_info("w2", TensorProto.FLOAT, [1, 100_000]))
    p = folder / "in.onnx"
    if external:
        onnx.save(m, str(p), save_as_external_data=True, location="w.data", size_threshold=1024)
    else:
        onnx.save(m, str(p))
    return p


def _fsize(folder: Path, limit: int) -> dict:
    """A disk that is full after ``limit`` bytes of any one file: RLIMIT_FSIZE, SIGXFSZ ignored
    (each write beyond it fails with EFBIG)."""
    import resource
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return {}


def _interrupt(seconds: float, sig=signal.SIGINT) -> dict:
    """Send ``sig`` to this process after ``seconds``; 130/143 then count as clean exits."""
    import threading
    threading.Timer(seconds, os.kill, (os.getpid(), sig)).start()
    return {"codes": (0, 1, 2, 128 + sig)}


def _loop_folder(folder: Path) -> str:
    d = _folder_with_good(folder)
    os.symlink(d, d / "loop")
    os.symlink(d / "nowhere", d / "dangling.onnx")
    return str(d)


def run_arg_case(setup) -> str:
    return forked(lambda: in_temp(setup))


# --------------------------------------------------------------------------- batch

def batch_case(folder: Path, good: int = 50, bad: int = 50, verify: bool = False, jobs: int = 2) -> list[str]:
    """``batch`` over ``good`` sound models and ``bad`` hostile ones (structural mutants, model
    files with hostile external data, garbage), a symlink loop, a dangling link, a FIFO and the
    output folder inside the input folder; run three times (fresh, again, after deleting
    inputs).  Returns the defects found (empty: all good)."""
    import json
    src = folder / "in"
    src.mkdir()
    for k in range(good):
        (src / f"good{k:03d}.onnx").write_bytes(base_tf().SerializeToString())
    structure = structure_cases()
    names = sorted(structure)
    for k in range(bad):
        name = names[(k * 7) % len(names)]
        (src / f"bad{k:03d}_{name}.onnx").write_bytes(structure[name].SerializeToString())
    files = file_cases()
    for name in sorted(files)[:10]:
        (src / name).mkdir()
        files[name](src / name)
    (src / "garbage.onnx").write_bytes(b"\0" * 100)
    os.symlink(src, src / "loop")
    os.symlink(src / "nowhere.onnx", src / "dangling.onnx")
    os.mkfifo(src / "fifo.onnx")
    out = src / "out"
    problems = []
    before = snapshot(src)
    for run in range(3):
        if run == 2:
            for k in range(0, good, 10):
                os.unlink(src / f"good{k:03d}.onnx")
            before = snapshot(src)
        argv = ["batch", str(src), "-o", str(out), "-j", str(jobs)] + ([] if verify else ["--no-verify"])
        code, err = run_cli(argv)
        after = snapshot(src)
        changed = [p for p, v in before.items() if not p.startswith(str(out)) and after.get(p) != v]
        if changed:
            problems.append(f"run {run}: input-modified {changed[:3]}")
        lines = [line for line in err.splitlines() if line.strip() and not re.match(r"\[\d+/\d+\] ", line)]
        if code not in (0, 1, 2) or lines or "Traceback" in err or "internal error" in err:
            problems.append(f"run {run}: exit {code}, stderr {err[-300:]!r}")
            continue
        report = json.loads((out / "report.json").read_text())
        entries = {Path(e["input"]).name: e for e in report["models"]}
        if any(str(out) in e["input"] for e in report["models"]):
            problems.append(f"run {run}: read its own outputs")
        for name, e in entries.items():
            if name.startswith("good") and e["status"] not in ("converted", "unchanged"):
                problems.append(f"run {run}: {name} {e['status']}: {e.get('error')}")
            if e.get("error") and ("\n" in e["error"] or "internal error" in e["error"]):
                problems.append(f"run {run}: {name}: error {e['error'][:200]!r}")
            if e["status"] in ("failed", "invalid", "error") and Path(e["output"]).exists():
                problems.append(f"run {run}: {name} {e['status']} but its output exists")
        expected = {e["output"] for e in report["models"] if e["status"] in ("converted", "unchanged")}
        expected |= {d for e in report["models"] if e.get("output_data_size") is not None
                     for d in [e["output"] + ".data"]}
        present = {str(p) for p in out.rglob("*") if p.is_file() and p.name not in ("report.json", ".onnx-slice-tools.lock")}
        if present != expected:
            problems.append(f"run {run}: outputs on disk != report: extra {sorted(present - expected)[:3]}, "
                            f"missing {sorted(expected - present)[:3]}")
        if run == 1 and any(e["status"] == "converted" for n, e in entries.items() if n.startswith("good")):
            problems.append("run 1: an unchanged model was converted again")
        if run == 2 and len(report.get("deleted_inputs", [])) != len(range(0, good, 10)):
            problems.append(f"run 2: deleted_inputs {report.get('deleted_inputs')}")
    return problems


def batch_shared_output_case(folder: Path) -> list[str]:
    """Two ``batch`` runs with different inputs into one output folder (the second run's
    report must still record the first run's outputs), then a user's own file where a third
    run's output would go (refused before any work, exit 2, the file untouched)."""
    import json
    problems = []
    for name, count in (("a", 3), ("b", 2)):
        (folder / name).mkdir()
        for k in range(count):
            (folder / name / f"{name}{k}.onnx").write_bytes(base_tf().SerializeToString())
    out = folder / "out"
    for name in ("a", "b"):
        code, err = run_cli(["batch", str(folder / name), "-o", str(out), "-j", "1", "--no-verify", "--quiet"])
        if code != 0 or err.strip():
            problems.append(f"batch {name}: exit {code}, stderr {err[-300:]!r}")
    report = json.loads((out / "report.json").read_text())
    recorded = {e["output"] for key in ("models", "earlier_models") for e in report.get(key, [])}
    present = {str(p) for p in out.rglob("*.onnx")}
    if present != recorded:
        problems.append(f"report records {sorted(recorded)[:5]}, on disk {sorted(present)[:5]}")
    (folder / "c").mkdir()
    (folder / "c" / "mine.onnx").write_bytes(base_tf().SerializeToString())
    users = out / "mine.onnx"
    users.write_bytes(b"the user's own file")
    code, err = run_cli(["batch", str(folder / "c"), "-o", str(out), "-j", "1", "--no-verify"])
    if code != 2 or err.count("\n") != 1 or users.read_bytes() != b"the user's own file":
        problems.append(f"user's file in the output folder: exit {code}, stderr {err[-300:]!r}")
    return problems


def run_batch_shared_output_case() -> str:
    def one():
        with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
            problems = batch_shared_output_case(Path(tmp))
            return "BAD batch: " + "; ".join(problems)[:3000] if problems else "ok"
    return forked(one, timeout=600)


def run_batch_case(verify: bool) -> str:
    def one():
        with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
            problems = batch_case(Path(tmp), verify=verify)
            return "BAD batch: " + "; ".join(problems)[:3000] if problems else "ok"
    return forked(one, timeout=1800)


# --------------------------------------------------------------------------- main

def corpus(only: set, commands: str):
    """(family, name, runner) of every case."""
    if "structure" in only:
        for name, m in structure_cases().items():
            yield "structure", name, (lambda m=m: run_case(_saver(m), commands))
    if "files" in only:
        for name, setup in file_cases().items():
            yield "files", name, (lambda s=setup: run_case(s, commands))
    if "args" in only:
        for name, setup in arg_cases().items():
            yield "args", name, (lambda s=setup: [("", run_arg_case(s))])
    if "batch" in only:
        yield "batch", "two runs into one output folder, then a user's file there", (
            lambda: [("", run_batch_shared_output_case())])
        for verify in (False, True):
            yield "batch", f"100 models{' verified' if verify else ''}", (lambda v=verify: [("", run_batch_case(v))])


def warm() -> None:
    import onnx.reference  # noqa: F401
    import onnxruntime  # noqa: F401

    import onnx_slice_tools.cli.main
    import onnx_slice_tools.verification.compare
    import onnx_slice_tools.verification.lowerings  # noqa: F401


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="structure,files,args", help="families to run (default all)")
    ap.add_argument("--commands", default="all",
                    help="commands per model case: all, or some of " + ",".join(COMMANDS))
    ap.add_argument("--match", default="", help="only cases whose name contains this")
    ap.add_argument("--verbose", action="store_true", help="print every outcome")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    args = ap.parse_args(argv)
    only = set(args.only.split(","))
    cases = [c for c in corpus(only, args.commands) if args.match in c[1]]
    if args.list:
        for family, name, _ in cases:
            print(family, name)
        return 0
    warm()
    outcomes: Counter = Counter()
    defects: Counter = Counter()
    runs = 0
    for family, name, runner in cases:
        for cmd, outcome in runner():
            runs += 1
            if outcome.startswith("BAD"):
                cls = outcome.split(":")[0].split()[1] if " " in outcome.split(":")[0] else outcome
                defects[cls] += 1
                outcomes["BAD"] += 1
                print(f"{family}/{name} {cmd}: {outcome[:400]}", flush=True)
            else:
                if args.verbose:
                    print(f"{family}/{name} {cmd}: {outcome[:400]}", flush=True)
                outcomes[outcome.split(":")[0]] += 1
    print(f"{len(cases)} cases, {runs} runs: {dict(sorted(outcomes.items()))}")
    print(f"defects by class: {dict(sorted(defects.items()))}")
    return 1 if outcomes["BAD"] else 0


if __name__ == "__main__":
    sys.exit(main())
