#!/usr/bin/env python3
"""StridedSlice cases transcribed from the peers' own test suites -> tests/data/peer_cases.json.

    python scripts/peer_cases.py              # write tests/data/peer_cases.json
    python scripts/peer_cases.py --summary    # also count runtime/reference agreement per source
    python scripts/peer_cases.py --tf2onnx    # also run tf2onnx's native lowering (and its custom-op
                                              # export + our convert) on every accepted TF case, ~6 min

Sources (read in the public repositories, transcribed by hand: the C++ and Python tests are
not regular enough to parse):

* TensorFlow ``tensorflow/python/kernel_tests/array_ops/array_ops_test.py``: StridedSliceTest,
  StridedSliceShapeTest, StridedSliceGradTest, TensorStridedSliceUpdate grad specs,
  SliceAssignTest (the assign ops read the spec as StridedSlice does); written as the index
  expressions the tests use.  Their expectation is numpy's ``x[...]`` (StridedSliceChecker),
  so the expected values here are numpy's, computed below with numpy only.
* TensorFlow ``tensorflow/core/util/strided_slice_op_test.cc``: ValidateStridedSliceOp shapes
  and errors; ``tensorflow/core/ops/array_ops_test.cc``: the StridedSlice shape function;
  ``tensorflow/compiler/tests/slice_ops_test.py``: XLA's StridedSliceTest (values).
* nGraph's TensorFlow bridge ``test/python/test_slice.py`` (expected values: numpy's).
* tf2onnx ``tests/test_backend.py``: every ``test_strided_slice*``, ``test_new_axis_mask``,
  ``test_*ellipsis*`` and the shape-vector slices (expected values: TensorFlow's, here numpy's).
* OpenVINO ``src/plugins/template/tests/functional/op_reference/strided_slice.cpp`` (values),
  ``src/core/tests/type_prop/strided_slice.cpp`` (shapes, intervals, rejections), and the
  plugins' single-layer instances (GPU ``shared_tests_instances/single_layer_tests/strided_slice.cpp``,
  an older CPU instance of the same file, CPU ``Crop`` tests, the CPU plugin's custom StridedSlice
  tests on every shape their dynamic runs take), the CPU static shape-inference unit tests, and
  the TensorFlow frontend's layer tests ``tests/layer_tests/tensorflow_tests/test_tf_StridedSlice.py``
  (TF-flavour specs, real and complex); plugin cases are specs only, judged by the runtime.

Where a source feeds begin/end/strides at run time, or gives only an interval (OpenVINO's
``{0, 200}``) or an unknown dim, the case names the concrete value chosen here (``note``).
Values a test computes with its own oracle are stored (``expected_values``, flattened) when
the output has at most 512 elements.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "tests" / "data" / "peer_cases.json"

TF_REPO, TF2ONNX_REPO, OV_REPO = "tensorflow/tensorflow", "onnx/tensorflow-onnx", "openvinotoolkit/openvino"
ARRAY_OPS = "tensorflow/python/kernel_tests/array_ops/array_ops_test.py"
SS_OP_TEST = "tensorflow/core/util/strided_slice_op_test.cc"
BACKEND = "tests/test_backend.py"
OV_REF = "src/plugins/template/tests/functional/op_reference/strided_slice.cpp"
OV_TYPE_PROP = "src/core/tests/type_prop/strided_slice.cpp"
OV_GPU = "src/plugins/intel_gpu/tests/functional/shared_tests_instances/single_layer_tests/strided_slice.cpp"
OV_CPU = "inference-engine/tests/functional/plugin/cpu/shared_tests_instances/single_layer_tests/strided_slice.cpp"
OV_CROP = "inference-engine/tests/functional/plugin/cpu/single_layer_tests/crop.cpp"
OV_SHAPE_INFER = "src/plugins/intel_cpu/tests/unit/shape_inference_test/strided_slice_shape_inference_test.cpp"
OV_TF_LAYER = "tests/layer_tests/tensorflow_tests/test_tf_StridedSlice.py"
OV_CPU_CUSTOM = "src/plugins/intel_cpu/tests/functional/custom/single_layer_tests/strided_slice.cpp"
#: OpenVINO's CPU tests run big 5-D inputs; those above this many elements are left out here
MAX_ELEMENTS = 200_000
TF_ARRAY_OPS_CC = "tensorflow/core/ops/array_ops_test.cc"
XLA_SLICE = "tensorflow/compiler/tests/slice_ops_test.py"
NGRAPH_REPO, NGRAPH_SLICE = "tensorflow/ngraph-bridge", "test/python/test_slice.py"

MAX_VALUES = 512

# TensorFlow's StridedSliceChecker tensors and raw lists
REF = {"shape": [3, 2, 3], "start": 1}
REF_ALIGNED = {"shape": [3, 4, 8], "start": 1}
RAW5 = {"shape": [1, 2, 1, 3, 2], "start": 1}  # testEllipsis: 1..12
RAW_SHRINK = {"shape": [1, 2, 1, 3, 4], "values": [1, 2, 4, 5, 5, 6, 7, 8, 9, 10, 11, 12,
                                                  13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24]}
STRIDED_SLICE_TYPES = ["int32", "int64", "int16", "int8", "uint8", "float32", "float64", "bool"]


def make_input(inp: dict, dtype: str) -> np.ndarray:
    """The input a case describes: explicit values, or ``arange(start, start + size)``.
    Booleans and complex numbers as TensorFlow's StridedSliceChecker makes them (``x % 3``;
    ``x - 1j * x``)."""
    shape = tuple(inp["shape"])
    size = int(np.prod(shape)) if shape else 1
    if "values" in inp:
        raw = np.array(inp["values"], dtype=np.int64).reshape(shape)
    else:
        raw = np.arange(inp.get("start", 0), inp.get("start", 0) + size, dtype=np.int64).reshape(shape)
    if dtype == "bool":
        return np.asarray((raw % 3).astype(np.bool_))
    if np.dtype(dtype).kind == "c":
        return np.asarray((raw - 1j * raw).astype(dtype))
    return np.asarray(raw.astype(dtype))


def index_items(case: dict) -> list:
    """A case's index expression as items (our parser), runtime names bound to the values used."""
    from onnx_slice_tools.semantics.spec import RuntimeIndex, parse_index_items
    values = case.get("runtime_values", {})

    def bind(v):
        if isinstance(v, RuntimeIndex):
            name = v.name.lstrip("-")
            return -values[name] if v.name.startswith("-") else values[name]
        return v
    return [slice(bind(i.start), bind(i.stop), bind(i.step)) if isinstance(i, slice) else bind(i)
            for i in parse_index_items(case["expr"])]


def spec_of(case: dict):
    """The case's spec with every value known (raises StridedSliceError where it is not a spec)."""
    from onnx_slice_tools.semantics.spec import OPENVINO, from_index_items, from_openvino, from_tf
    if "expr" in case:
        return from_index_items(index_items(case), case["flavor"])
    if case["flavor"] == OPENVINO:
        return from_openvino(case["begin"], case["end"], case["strides"], **case["masks"])
    return from_tf(case["begin"], case["end"], case["strides"], **case["masks"])


class _NewAxis:
    newaxis = None


def numpy_getitem(x: np.ndarray, expr: str, values: dict) -> np.ndarray:
    """numpy's answer for ``x[...]`` (the TF tests' own oracle), runtime names bound to values."""
    scope = {"x": x, "np": np, "tf": _NewAxis, "array_ops": _NewAxis, **values}
    return np.asarray(eval(expr, {"__builtins__": {}}, scope))  # our own literals


CASES: list[dict] = []


def add(source: str, repo: str, path: str, test: str, flavor: str, inp: dict, dtype: str = "float32", *,
        expected_shape=None, expected_values=None, error=None, note=None, **kw):
    """One case; the expectations and the note are recorded only when given."""
    case = {"id": f"{source}/{test}/{sum(c['test'] == test for c in CASES)}", "source": source,
            "repo": repo, "path": path, "test": test, "flavor": flavor, "input": inp, "dtype": dtype}
    case.update(kw)
    if expected_shape is not None:
        case["expected_shape"] = list(expected_shape)
    if expected_values is not None:
        case["expected_values"] = list(expected_values)
    if error:
        case["expected_error"] = error
    if note:
        case["note"] = note
    CASES.append(case)
    return case


def tf_getitem(test: str, inp: dict, exprs, *, path=ARRAY_OPS, source="tensorflow", repo=TF_REPO,
               dtype="float32", values=None, runtime=(), note=None, numpy_expected=True, **kw):
    """TensorFlow getitem cases; the expected values are numpy's (the test's StridedSliceChecker)."""
    for expr in exprs:
        case = add(source, repo, path, test, "tf", inp, dtype, expr=expr, runtime_values=values or {},
                   runtime_in_source=list(runtime), **kw)
        if note:
            case["note"] = note
        if numpy_expected:
            want = numpy_getitem(make_input(inp, dtype), expr, values or {})
            case["expected_shape"] = list(want.shape)
            if want.size <= MAX_VALUES:
                case["expected_values"] = [int(v) for v in want.astype(np.int64).ravel().tolist()]


def tf_raw(test: str, inp: dict, begin, end, strides, *, path=SS_OP_TEST, source="tensorflow", repo=TF_REPO,
           dtype="float32", masks=(0, 0, 0, 0, 0), expected_shape=None, error=None, note=None, **kw):
    """An explicit ``tf.strided_slice`` / ValidateStridedSliceOp case (masks: begin, end,
    ellipsis, new_axis, shrink)."""
    return add(source, repo, path, test, "tf", inp, dtype, begin=list(begin), end=list(end),
               strides=list(strides), masks=dict(zip(("begin_mask", "end_mask", "ellipsis_mask",
                                                      "new_axis_mask", "shrink_axis_mask"), masks)),
               expected_shape=expected_shape, error=error, note=note, **kw)


def ov(test: str, path: str, shape, begin, end, strides, bm, em, new, shrink, ell, *, dtype="float32",
       start=0, expected_shape=None, expected_values=None, error=None, note=None, **kw):
    """An OpenVINO StridedSlice-1 case (masks as its 0/1 vectors; ``strides`` None: 3 inputs)."""
    return add("openvino", OV_REPO, path, test, "openvino", {"shape": list(shape), "start": start}, dtype,
               begin=list(begin), end=list(end), strides=None if strides is None else list(strides),
               masks={"begin_mask": list(bm), "end_mask": list(em), "new_axis_mask": list(new),
                      "shrink_axis_mask": list(shrink), "ellipsis_mask": list(ell)},
               expected_shape=expected_shape, expected_values=expected_values, error=error, note=note, **kw)


# =========================================================================== TensorFlow

def tensorflow_cases():
    basic = ["x[:, :, :]", "x[::, ::, ::]", "x[::1, ::1, ::1]", "x[::1, ::5, ::2]", "x[::-1, :, :]",
             "x[:, ::-1, :]", "x[:, :, ::-1]", "x[-2::-1, :, ::1]", "x[-2::-1, :, ::2]"]
    for dt in STRIDED_SLICE_TYPES:
        tf_getitem("StridedSliceTest.test_basic_slice", REF, basic, dtype=dt)
        tf_getitem("StridedSliceTest.test_basic_slice", {"shape": [], "values": [5]},
                   ["x[None]", "x[...]", "x[()]"], dtype=dt)
    tf_raw("StridedSliceTest.testInt64GPU", {"shape": [3], "start": 1}, [2], [3], [1], path=ARRAY_OPS,
           expected_shape=[1], index_dtype="int64", expected_values=[3.0])
    tf_getitem("StridedSliceTest.testDegenerateSlices", REF,
               ["x[0:-1:-1, :, :]", "x[-1:0, :, :]", "x[-1:0, 2:2, 2:3:-1]"])
    tf_getitem("StridedSliceTest.testDegenerateSlices", REF_ALIGNED, ["x[1:0]"])
    tf_getitem("StridedSliceTest.testSliceWithUndefinedDimension", {"shape": [3], "start": 1}, ["x[::]"],
               dtype="int32", note="t[d:d:d] with Dimension(None): every part None")
    tf_getitem("StridedSliceTest.testEllipsis", RAW5, ["x[0:]", "x[0:, ...]", "x[...]", "x[0:1, ...]",
                                                       "x[..., 0:1]", "x[0:1, ..., 0:1]"], dtype="int32")
    tf_getitem("StridedSliceTest.testEllipsis", RAW5, ["x[..., :, ...]"], dtype="int32", numpy_expected=False,
               expected_error="Multiple ellipses")
    tf_getitem("StridedSliceTest.testShrink", RAW_SHRINK,
               ["x[:, :, :, :, 3]", "x[..., 3]", "x[:, 0]", "x[:, :, 0]"], dtype="int32")
    tf_getitem("StridedSliceTest.testBothNewAxisAndShrink", {"shape": [2, 2], "values": [1, 1, 1, 1]},
               ["x[tf.newaxis, :, 0]"], dtype="int16")
    tf_getitem("StridedSliceTest.testTensorIndexing", RAW_SHRINK, ["x[..., bar:bar2]", "x[..., bar]"],
               dtype="int32", values={"bar": 2, "bar2": 3}, runtime=["begin", "end"])
    tf_getitem("StridedSliceTest.testTensorIndexing", RAW_SHRINK, ["x[..., 3]", "x[..., 2]"], dtype="int32",
               note="x[..., 2**64 // 2**63] is x[..., 2]")
    tf_getitem("StridedSliceTest.testExpand", RAW_SHRINK,
               ["x[np.newaxis]", "x[..., np.newaxis]", "x[..., np.newaxis, :]", "x[:, ..., np.newaxis, :, :]",
                "x[:, :, np.newaxis, :, 2::-1]", "x[np.newaxis, ..., np.newaxis]"], dtype="int32")
    tf_getitem("StridedSliceTest.testExpandVariable", {"shape": [], "values": [7]}, ["x[None]"], dtype="int32")
    tf_getitem("StridedSliceTest.testOptimizedCases", REF_ALIGNED,
               ["x[:]", "x[...]", "x[np.newaxis, ..., np.newaxis]", "x[1:]", "x[np.newaxis, 1:]"], dtype="int32")
    tf_getitem("StridedSliceTest.testMasks", REF, ["x[i]"], dtype="int32", values={"i": 0}, runtime=["begin", "end"],
               note="checker[ops.convert_to_tensor(np.array(0))]")
    tf_getitem("StridedSliceTest.testMasks", RAW_SHRINK, ["x[0]"], dtype="int32", note="checker1[np.array(0)]")
    for dt in STRIDED_SLICE_TYPES:
        tf_getitem("StridedSliceTest.test_int16_indices", REF,
                   ["x[i]", "x[::a, b::c, ::2]", "x[b:d:e, 1:2, :]"], dtype=dt, index_dtype="int16",
                   values={"i": 1, "a": 1, "b": 1, "c": 5, "d": 5, "e": 2}, runtime=["begin", "end", "strides"],
                   note="int16 tensors in the index: TF packs begin/end/strides as int16")
    tf_raw("StridedSliceShapeTest.testScalarInput", {"shape": [], "values": [3]}, [0], [1], [1], path=ARRAY_OPS,
           dtype="int32", error="Attempting to slice scalar input")
    uncertain = [("x[3:5]", [2, None, 7]), ("x[3:5, :, 4]", [2, None]), ("x[3:5, 3:4, 4]", [2, None]),
                 ("x[3:5, :, 5:10]", [2, None, 2]), ("x[3:5, :, 50:3]", [2, None, 0]),
                 ("x[3:5, :, array_ops.newaxis, 50:3]", [2, None, 1, 0]),
                 ("x[1:5:2, :, array_ops.newaxis, 50:3]", [2, None, 1, 0]),
                 ("x[:5:3, :, array_ops.newaxis, 50:3]", [2, None, 1, 0]),
                 ("x[:2:3, :, array_ops.newaxis, 50:3]", [1, None, 1, 0]),
                 ("x[::-1, :, array_ops.newaxis, ::-2]", [5, None, 1, 4])]
    for expr, shape in uncertain:
        tf_getitem("StridedSliceShapeTest.testTensorShapeUncertain", {"shape": [5, 4, 7], "start": 0}, [expr],
                   symbolic_dims=[1], shape_inference=shape,
                   note="input TensorSpec (5, None, 7): the None dim is 4 here and symbolic in the ONNX model")
    valued = [("x[y]", {"y": 1}, [3, 7]), ("x[y, ::-1]", {"y": 1}, [3, 7]), ("x[y, ::-2]", {"y": 1}, [2, 7]),
              ("x[y, s:2]", {"y": 1, "s": 0}, [None, 7])]
    for expr, vals, shape in valued:
        tf_getitem("StridedSliceShapeTest.testTensorValuedIndexShape", {"shape": [5, 3, 7], "start": 0}, [expr],
                   values=vals, runtime=["begin", "end"], shape_inference=shape,
                   note="scalar int32 tensors in the index; values chosen here")
    grad = {"shape": [6, 4, 4], "start": 1}
    tf_getitem("StridedSliceGradTest.testGradient", grad,
               ["x[2:6:2, 1:3, 1:3]", "x[3:0:-2, 1:3, 1:3]", "x[3:0:-2, array_ops.newaxis, 1:3, 2, array_ops.newaxis]",
                "x[3:0:-2, 1:3, 2]", "x[:, -1, :]", "x[:, -2, :]"])
    tf_getitem("StridedSliceGradTest.testGradient", grad, ["x[:, -200, :]", "x[:, 200, :]"],
               numpy_expected=False, expected_error="out of bounds")
    tf_getitem("StridedSliceGradTest.testGradientZero", {"shape": [], "values": [8]}, ["x[()]"])
    tf_getitem("StridedSliceGradTest.testInt64Indices", {"shape": [3], "start": 0}, ["x[i]"], values={"i": 1},
               runtime=["begin", "end"], index_dtype="int64")
    # TensorStridedSliceUpdate gradient tests: the update region is a StridedSlice spec whose shape
    # is the updates' shape (shape, begin, end, strides, updates shape, 5 masks)
    for shape, b, e, s, upd, *m in [([2, 5], [0, 1], [1, 0], [1, 2], [2], 0, 2, 0, 0, 1),
                                    ([4], [5], [3], [1], [3], 1, 0, 0, 0, 0),
                                    ([2, 2, 3, 2], [0, 0, 1], [1, 0, 2], [1, 0, 1], [2, 3], 0, 0, 2, 0, 5)]:
        tf_raw("SliceAssignTest.testTensorStridedSliceUpdateGrad", {"shape": shape, "start": 0}, b, e, s,
               path=ARRAY_OPS, masks=m, expected_shape=upd,
               note="tensor_strided_slice_update's region; the updates have this shape")
    assign = {"shape": [2, 3], "start": 1}
    tf_getitem("SliceAssignTest.testSliceAssign", assign,
               ["x[:]", "x[1:2, 1:2]", "x[1:2, 1]", "x[1, 1:2]", "x[1, 1]", "x[:, None, :]", "x[None, None, 0, 0:1]",
                "x[::1, ::-2]", "x[8:10, 0]", "x[8:10, 8:10]"], note="the strided-slice assign region")
    tf_getitem("SliceAssignTest.testSliceAssign", {"shape": [], "values": [222]}, ["x[()]", "x[...]", "x[None]"],
               note="the strided-slice assign region of a scalar")

    # strided_slice_op_test.cc: ValidateStridedSliceOp (begin, end, strides, shape, masks)
    ten = {"shape": [10, 10], "start": 0}
    tf_raw("ValidateStridedSliceOpTest.BasicStride", ten, [1, 1], [7, 7], [2, 2], masks=(2, 1, 0, 0, 0),
           expected_shape=[5, 4])
    tf_raw("ValidateStridedSliceOpTest.NegativeBeginEnd", ten, [-9, -20], [-3, -3], [2, 2], expected_shape=[3, 4])
    tf_raw("ValidateStridedSliceOpTest.EmptyOutputDim", ten, [1, 1], [7, 1], [2, 1], expected_shape=[3, 0])
    tf_raw("ValidateStridedSliceOpTest.ZeroStrideFails", ten, [1, 1], [7, 7], [0, 2], masks=(2, 1, 0, 0, 0),
           error="must be non-zero")
    t345 = {"shape": [3, 4, 5], "start": 0}
    tf_raw("ValidateStridedSliceOpTest.ShrinkAxis", t345, [0, 1, 0], [3, 1, 5], [1, 1, 1], masks=(2, 2, 0, 0, 2),
           expected_shape=[3, 5], index_dtype="int16")
    tf_raw("ValidateStridedSliceOpTest.ShrinkSliceOutOfBoundsFails", t345, [0, 7, 0], [3, 7, 5], [1, 1, 1],
           masks=(2, 2, 0, 0, 2), error="out of bounds", index_dtype="int16")
    tf_raw("ValidateStridedSliceOpTest.ShrinkAxisNegativeStrideFails", t345, [0, 1, 0], [3, 2, 5], [1, -1, 1],
           masks=(2, 2, 0, 0, 2), error="only stride 1 allowed", index_dtype="int16")
    tf_raw("ValidateStridedSliceOpTest.NewAxis", ten, [0, 0], [10, 10], [1, 1], masks=(0, 0, 0, 2, 0),
           expected_shape=[10, 1, 10], index_dtype="int64")
    tf_raw("ValidateStridedSliceOpTest.Ellipsis", ten, [0, 0], [10, 10], [1, 1], masks=(0, 0, 1, 2, 0),
           expected_shape=[10, 10, 1])
    tf_raw("ValidateStridedSliceOpTest.MultipleEllipsisFails", ten, [0, 0], [10, 10], [1, 1], masks=(0, 0, 3, 0, 0),
           error="Multiple ellipses")
    tf_raw("ValidateStridedSliceOpTest.WrongBeginTensorFails", ten, [0], [10, 10], [1, 1], masks=(0, 0, 1, 2, 0),
           error="equal size")
    tf_raw("ValidateStridedSliceOpTest.NullBeginEndWithShrinkAxis", {"shape": [10, 10, 1], "start": 0},
           [0, 0, 0], [0, 0, 0], [2, -2, 1], masks=(3, 3, 0, 0, 4), expected_shape=[5, 5],
           note="begin and end are null in the C++ test (masks cover them); zeros here")

    # tensorflow/core/ops/array_ops_test.cc, StridedSlice_ShapeFn: shrink_axis_mask=1, strides [1],
    # begin/end unknown to the shape function
    for shape, want in (([2, 3, 4, 5], [3, 4, 5]), ([2, 0, 3, 4], [0, 3, 4])):
        tf_raw("ArrayOpsTest.StridedSlice_ShapeFn", {"shape": shape, "start": 0}, [1], [2], [1], path=TF_ARRAY_OPS_CC,
               masks=(0, 0, 0, 0, 1), expected_shape=want, runtime_in_source=["begin", "end"],
               note="begin/end unknown in the test; [1], [2] here")

    # tensorflow/compiler/tests/slice_ops_test.py, StridedSliceTest (XLA; run for every numeric type)
    v3 = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 5, 3, 1, 7, 9, 2, 4, 6, 8, 0,
          5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 8, 7, 6, 5, 4, 3, 2, 1, 8, 7,
          7, 5, 7, 5, 7, 5, 7, 5, 7, 5, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 9, 8, 7, 9, 8, 7, 9, 8, 7, 9]
    v4 = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 5, 3, 1, 7, 9, 2, 4, 6, 8, 0,
          4, 5, 2, 4, 3, 7, 6, 8, 9, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 4, 3, 4, 5, 7, 6, 5, 3, 4, 5,
          8, 7, 6, 5, 4, 3, 2, 1, 8, 7, 7, 1, 7, 1, 8, 1, 8, 1, 3, 1, 7, 5, 7, 5, 7, 5, 7, 5, 7, 5,
          1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 9, 8, 7, 9, 8, 7, 9, 8, 7, 9, 9, 9, 5, 5, 6, 6, 3, 3, 6, 6]
    xla = [("test1D", {"shape": [10], "start": 0}, [2], [6], [2], [2], [2, 4], None),
           ("test1DDynamic", {"shape": [10], "start": 0}, [0], [1], [1], [1], [0], ["begin", "end"]),
           ("test1DNegativeStride", {"shape": [10], "start": 0}, [6], [2], [-2], [2], [6, 4], None),
           ("test2DDegenerate", {"shape": [2, 3], "start": 0}, [-1, 0], [0, 3], [1, 1], [0, 3], None, None),
           ("test2DDegenerateNegativeStride", {"shape": [2, 3], "start": 0}, [0, 0], [-1, 3], [-1, 1], [0, 3], None,
            None),
           ("test2DFullSlice", {"shape": [2, 4], "start": 0}, [1, 1], [2, 2], [1, 1], [1, 1], [5], ["begin", "end"]),
           ("test3D", {"shape": [3, 3, 10], "values": v3}, [0, 2, 2], [2, 3, 6], [1, 1, 2], [2, 1, 2], [1, 9, 6, 4],
            None),
           ("test3DNegativeStride", {"shape": [3, 4, 10], "values": v4}, [2, 2, 6], [0, 0, 2], [-1, -1, -2],
            [2, 2, 2], [9, 8, 1, 1, 2, 4, 5, 7], None)]
    for dt in ("float32", "int32", "int64", "uint8"):
        for test, inp, b, e, st, shape, values, runtime in xla:
            case = tf_raw(f"StridedSliceTest.{test}", inp, b, e, st, path=XLA_SLICE, dtype=dt, expected_shape=shape,
                          runtime_in_source=runtime or [])
            if values is not None:
                case["expected_values"] = values
            if test == "test2DDegenerate":
                case["note"] = "strides omitted in the test (ones)"

    # nGraph's TensorFlow bridge (a TF -> nGraph converter), test/python/test_slice.py; expected: numpy's
    def ngraph(test, inp, exprs, **kw):
        tf_getitem(test, inp, exprs, path=NGRAPH_SLICE, source="ngraph-bridge", repo=NGRAPH_REPO, **kw)
    ngraph("TestSliceOperations.test_strided_slice", {"shape": [4, 5], "start": 0},
           ["x[:]", "x[:, :]", "x[1:, :-2]", "x[::2, :-2]", "x[1, :]", "x[:, 1]", "x[1, 1]", "x[0]", "x[-1]",
            "x[::, ::]", "x[::1, ::1]", "x[::-1, :]", "x[:, ::-1]", "x[-2::-1, ::1]", "x[0:-1:-1, :]", "x[-1:0, :]",
            "x[-1:0, 2:3:-1]", "x[2:2, 2:3:-1]", "x[1:3:7, :]", "x[:, tf.newaxis]", "x[...]", "x[1:2, ...]"],
           note="x[0][1] (two slices) left out")
    ngraph("TestSliceOperations.test_strided_slice_2", {"shape": [3, 2, 3], "start": 0}, ["x[-1:0, 2:2, 2:3:-1]"])
    ngraph("TestSliceOperations.test_strided_slice_zerodim", {"shape": [4, 0, 5], "start": 0},
           ["x[1:2, 2:2, 1:2]", "x[1:2, 1:2, 1:2]"])
    ngraph("TestSliceOperations.test_incorrect_strided_slice", {"shape": [], "values": [0]}, ["x[1:1]"],
           numpy_expected=False, expected_error="", note="the test expects nGraph's own error text")

    # tf2onnx tests/test_backend.py (TF flavour; expected: TensorFlow's result, numpy's here)
    def t2o(test, inp, exprs, **kw):
        tf_getitem(test, inp, exprs, path=BACKEND, source="tf2onnx", repo=TF2ONNX_REPO, **kw)

    def t2o_raw(test, inp, b, e, s, masks=(0, 0, 0, 0, 0), **kw):
        tf_raw(test, inp, b, e, s, path=BACKEND, source="tf2onnx", repo=TF2ONNX_REPO, masks=masks, **kw)

    t323 = {"shape": [3, 2, 3], "start": 0}
    t2o_raw("test_strided_slice1", t323, [1, 0, 0], [2, 1, 3], [1, 1, 1], expected_shape=[1, 1, 3])
    t2o_raw("test_strided_slice2", t323, [1, 0, 0], [2, 2, 3], [1, 1, 1], expected_shape=[1, 2, 3])
    t2o("test_strided_slice3", t323, ["x[1:]"])
    t2o("test_strided_slice4", t323, ["x[:2]"])
    t2o("test_strided_slice5", t323, ["x[:2, 0:1, 1:]"])
    t56 = {"shape": [5, 6], "start": 0}
    t2o("test_strided_slice6", t56, ["x[2, :]"])
    for m, shape in (((2, 0, 0, 0, 0), [3, 4]), ((0, 2, 0, 0, 0), [3, 5]), ((0, 0, 0, 0, 2), [3]),
                     ((0, 0, 2, 0, 0), [3, 6])):
        t2o_raw("test_strided_slice7", t56, [0, 1], [3, 4], [1, 1], masks=m, expected_shape=shape)
    t6 = {"shape": [1, 2, 3, 4, 5, 6], "start": 0}
    t2o("test_strided_slice8", t6, ["x[0:1, ..., 1, 2:, :6]", "x[0:1, 1, 2:, :6, ...]", "x[..., 0:1, 1, 2:, :6]"])
    t2o_raw("test_strided_slice_dynamic_1", t323, [0, 1, 2], [2, 2, 3], [1, 1, 1], expected_shape=[2, 1, 1],
            runtime_in_source=["begin"])
    t2o_raw("test_strided_slice_dynamic_2", t323, [0, 1, 2], [2, 2, 3], [1, 1, 1], dtype="int32",
            expected_shape=[2, 1, 1], runtime_in_source=["begin"])
    t2o("test_strided_slice_dynamic_3", t323, ["x[y:2, :, :]"], values={"y": 1}, runtime=["begin"])
    t2o("test_strided_slice_dynamic_4", t323, ["x[y:, :y]"], values={"y": 1}, runtime=["begin", "end"])
    t2o("test_strided_slice_dynamic_5", t323, ["x[y:2]"], values={"y": 1}, runtime=["begin"])
    t2o("test_strided_slice_dynamic_6", t323, ["x[y]"], values={"y": 1}, runtime=["begin", "end"])
    t2o("test_strided_slice_dynamic_6", t323, ["x[y]"], values={"y": -1}, runtime=["begin", "end"])
    t2o("test_strided_slice_dynamic_7", t6, ["x[0:y, ..., y, y:, :y]", "x[0:y, y, y:, :y, ...]",
                                             "x[..., 0:y, y, y:, :y]"], values={"y": 1}, runtime=["begin", "end"])
    rev = {"shape": [1, 16, 32, 1], "start": 0}
    t2o("test_strided_slice_reverse_1", rev, ["x[:, :, :10]", "x[:, :, :21:-1]"])
    t2o("test_strided_slice_reverse_2", rev, ["x[:, :, :10]", "x[:, :, 9::-1]"])
    t2o("test_strided_slice_reverse_3", rev, ["x[:, :, :10]", "x[:, :, y::z]"], values={"y": 9, "z": -1},
        runtime=["begin", "strides"])
    t2o("test_new_axis_mask", {"shape": [5, 10, 10, 10, 10, 20, 30], "start": 0},
        ["x[tf.newaxis, 0:y, y::2, tf.newaxis, :, tf.newaxis, :y, tf.newaxis, ..., 9]"], values={"y": 9},
        runtime=["begin", "end"])
    t2o("test_strided_slice_ellipse", {"shape": [1, 8, 64], "start": 0}, ["x[..., tf.newaxis]"])
    t2o("test_strided_slice_ellipse", {"shape": [2, 3, 4, 5], "start": 0}, ["x[:, tf.newaxis, ..., :, tf.newaxis]"])
    t2o("test_strided_slice_only_ellipsis", {"shape": [1, 8, 64], "start": 0}, ["x[...]"])
    t2o_raw("test_slice_from_shape_const_fold", {"shape": [2], "values": [4, 3]}, [1], [2], [1],
            masks=(0, 0, 0, 0, 1), dtype="int32", expected_shape=[], expected_values=[3.0],
            note="strided_slice(tf.shape(x), [1], [2], shrink_axis_mask=1) on a shape [4, 3]")
    t2o_raw("test_slice_const_fold_halts", {"shape": [2], "values": [4, 3]}, [1], [2], [1],
            masks=(0, 0, 0, 0, 1), dtype="int32", expected_shape=[], expected_values=[3.0])
    t2o_raw("test_Conv2DBackpropInput_shape_implied", {"shape": [4], "values": [1, 10, 10, 5]}, [0], [1], [1],
            masks=(0, 0, 0, 0, 1), dtype="int32", expected_shape=[], expected_values=[1.0],
            note="batch_dim = strided_slice(tf.shape(out_backprop), [0], [1], shrink_axis_mask=1)")


# =========================================================================== OpenVINO

OV_SS1_VALUES = [
    185, 187, 189, 191, 169, 171, 173, 175, 313, 315, 317, 319, 297, 299, 301, 303, 569, 571, 573, 575, 553, 555,
    557, 559, 697, 699, 701, 703, 681, 683, 685, 687, 953, 955, 957, 959, 937, 939, 941, 943, 1081, 1083, 1085,
    1087, 1065, 1067, 1069, 1071, 1337, 1339, 1341, 1343, 1321, 1323, 1325, 1327, 1465, 1467, 1469, 1471, 1449,
    1451, 1453, 1455, 1721, 1723, 1725, 1727, 1705, 1707, 1709, 1711, 1849, 1851, 1853, 1855, 1833, 1835, 1837,
    1839, 2105, 2107, 2109, 2111, 2089, 2091, 2093, 2095, 2233, 2235, 2237, 2239, 2217, 2219, 2221, 2223, 2489,
    2491, 2493, 2495, 2473, 2475, 2477, 2479, 2617, 2619, 2621, 2623, 2601, 2603, 2605, 2607, 2873, 2875, 2877,
    2879, 2857, 2859, 2861, 2863, 3001, 3003, 3005, 3007, 2985, 2987, 2989, 2991]

SMALL_TYPES = ["int8", "uint8", "float16"]  # generateSmallParams (bf16 too: not in numpy)
WIDE_TYPES = ["int16", "int32", "int64", "uint16", "uint32", "uint64", "float32", "float64"]


def openvino_cases():
    ss0 = ([2, 3, 4], [1, 0], [0, 0], [1, 1], [0, 0, 0], [0, 0, 0], [0, 1, 0], [1, 0, 0], [0, 0, 0])
    ss1 = ([2, 4, 6, 8, 2, 2, 2], [0, 0, 2, 7, 0, 0, 1], [0, 4, 6, 3, 0, 0, 0], [1, 1, 2, -2, 1, 1, 1],
           [0, 1, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 1, 0, 0], [0, 0, 0, 0, 0, 0, 1],
           [0, 0, 0, 0, 0, 1, 0])
    for dt in SMALL_TYPES + WIDE_TYPES:
        for suffix, runtime in (("", []), ("_dynamic", ["begin", "end", "strides"])):
            ov(f"strided_slice_0{suffix}", OV_REF, *ss0, dtype=dt, expected_shape=[1, 3, 4],
               expected_values=list(range(12, 24)), runtime_in_source=runtime)
            if dt in WIDE_TYPES:
                ov(f"strided_slice_1{suffix}", OV_REF, *ss1, dtype=dt, expected_shape=[2, 4, 2, 2, 1, 2, 2],
                   expected_values=OV_SS1_VALUES, runtime_in_source=runtime)
    for dt in ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64"]:
        for suffix, runtime in (("", []), ("_dynamic", ["begin", "end"])):
            ov(f"strided_slice_stride_optional{suffix}", OV_REF, [2, 3, 4], [-1, -1, 0], [0, 0, 0], None,
               [0, 0, 0], [0, 0, 0], [0, 0, 1], [1, 1, 0], [0, 0, 0], dtype=dt, expected_shape=[1, 4],
               expected_values=[20, 21, 22, 23], runtime_in_source=runtime)
        ov("strided_slice_stride_optional_dynamic_empty_output_tensor", OV_REF, [2, 3, 4], [0, 0], [-1, 0], None,
           [1, 0], [1, 0], [], [], [], dtype=dt, expected_shape=[2, 0, 4], expected_values=[],
           runtime_in_source=["begin", "end"])

    # type_prop: shape inference (constant begin/end/strides unless noted)
    tp = OV_TYPE_PROP
    z3 = [0, 0, 0]
    ov("strided_slice_reverse_out_of_bounds_on_dims_0_1", tp, [3, 4, 5], [10, 2], [-10, -10], [-1, -1], z3, z3,
       [], [], [], expected_shape=[3, 3, 5], note="stride Constant {-1} broadcast to Shape{2}")
    e8 = [4] * 8
    begin_a = [0, 2, 4, 10, -1, -2, -4, 10]
    begin_b = [0, 2, 4, 10, -1, -2, -4, -10]
    end8 = [1, 3, 4, 5, -1, -3, -4, -5]
    ones, zeros = [1] * 8, [0] * 8
    ov("strided_slice_ignore_begin_mask_stride_pos_1", tp, e8, begin_a, end8, ones, ones, zeros, [], [], [],
       expected_shape=[1, 3, 4, 4, 3, 1, 0, 0])
    ov("strided_slice_ignore_begin_mask_stride_neg_1", tp, e8, begin_b, end8, [-1] * 8, ones, zeros, [], [], [],
       expected_shape=[2, 0, 0, 0, 0, 2, 3, 4])
    ov("strided_slice_ignore_end_mask_stride_pos_1", tp, e8, begin_b, end8, ones, zeros, ones, [], [], [],
       expected_shape=[4, 2, 0, 0, 1, 2, 4, 4])
    ov("strided_slice_ignore_end_mask_stride_neg_1", tp, e8, begin_b, end8, [-1] * 8, zeros, ones, [], [], [],
       expected_shape=[1, 3, 4, 4, 4, 3, 1, 1])
    ov("strided_slice_ignore_begin_end_masks_variadic_stride", tp, e8, begin_b, end8, [1, 2, 3, 10, -1, -2, -3, -10],
       ones, ones, [], [], [], expected_shape=[4, 2, 2, 1, 4, 2, 2, 1])
    t8 = [3] * 8
    ov("strided_slice_end_over_dimension_size", tp, t8, [0, 0, 0, 0, 1, 1, 1, 1], [1, 2, 3, 4, 1, 2, 3, 4], ones,
       zeros, zeros, [], [], [], expected_shape=[1, 2, 3, 3, 0, 1, 2, 2])
    ov("strided_slice_begin_over_dimension_size", tp, t8, [-1, -1, -1, -1, -2, -2, -2, -2], [1, 2, 3, 4, 1, 2, 3, 4],
       ones, zeros, zeros, [], [], [], expected_shape=[0, 0, 1, 1, 0, 1, 2, 2])
    data10 = dict(dtype="int64", start=1)
    for e in ([1, 5], [1, 6], [1, 7]):
        ov("strided_slice_end_is_shape_of_with_bounds", tp, [1, 10], [0, 0], e, [1, 1], [0, 0], [0, 0], [], [], [],
           interval=[1, [5, 7]], runtime_in_source=["end"],
           note="end = ShapeOf of a {1, [5, 7]} tensor: each bound as a value", **data10)
    for b in ([0, 3], [0, 4], [0, 5]):
        ov("strided_slice_begin_is_shape_of_with_bounds", tp, [1, 10], b, [1, 7], [1, 1], [0, 0], [0, 0], [], [], [],
           interval=[1, [2, 4]], runtime_in_source=["begin"],
           note="begin = ShapeOf of a {0, [3, 5]} tensor", **data10)
    for b, e in (([0, 3], [2, 7]), ([0, 5], [2, 6])):
        ov("strided_slice_begin_end_is_shape_of_with_bounds", tp, [1, 10], b, e, [1, 1], [0, 0], [0, 0], [], [], [],
           interval=[1, [1, 4]], runtime_in_source=["begin", "end"],
           note="begin, end = ShapeOf of {0, [3, 5]} and {2, [6, 7]} tensors", **data10)
    ov("strided_slice_out_of_bounds_different_stride", tp, [5] * 5, [5] * 5, [5] * 5, [1, 2, 5, -2, -5], [0] * 5,
       [0] * 5, [], [], [], expected_shape=[0] * 5)
    ov("strided_slice_reverse_end_is_int64_min", tp, [7, 3], [20, 20], [-(2 ** 63)] * 2, [-1, -1], [0, 0], [0, 0],
       [], [], [], expected_shape=[7, 3], symbolic_dims=[0, 1], interval=[[0, 20], None],
       note="input {[0, 20], -1}: (7, 3) here, symbolic in the ONNX model")
    ov("strided_slice_dynamic_value_and_label_propagation", tp, [2], [0], [1], [1], [0], [0], [], [], [],
       expected_shape=[1], dtype="int64", start=4, note="data = ShapeOf of a {[3, 5], 4} tensor: [4, 5] here")
    ov("strided_slice_use_default_ctor", tp, [10, 11, 12], [0, 0, 0, 0], [1, 5, 20, 20], [1, 1, 1, 1], z3, z3,
       [1, 0, 0], [0, 0, 1], z3, expected_shape=[1, 5, 12])
    ov("strided_slice_default_stride_dynamic_shape_input", tp, [2, 4, 6, 8], [0, 1], [1, 3], None, [0, 0], [0, 0],
       [], [], [], interval=[[0, 2], [0, 4], 6, 8], runtime_in_source=["begin", "end"],
       note="begin and end are Parameters; values chosen here")
    ov("strided_slice_incompatible_size_of_masks_attr", tp, [2, 4, 6, 8], [0, 0, 0, 0], [1, 1, 1, 1], None,
       [1, 0, 1, 0], [1, 0, 1, 0], [1, 0, 1, 0, 1], [], [], error="same size", runtime_in_source=["begin", "end"])
    ov("strided_slice_mask_incorrect_value", tp, [2, 4, 6, 8], [0, 0, 0, 0], [1, 1, 1, 1], None, [1, 0, 1, 0],
       [1, 0, 1, 2], [], [], [], error="0 or 1", runtime_in_source=["begin", "end"],
       note="the test's begin is 2-D as well; the mask value is what is rejected first")
    # StridedSliceShapeInferTest: begin/end/strides are Parameters, the reference shape an interval
    big = [1, 200, 300, 3]
    ov("shrink_2nd_dim", tp, big, [0, 5, 10, 0], [1, 6, 20, 3], [1, 1, 1, 1], [0] * 4, [0] * 4, [0] * 4,
       [0, 1, 0, 0], [0] * 4, interval=[[0, 1], [0, 300], [0, 3]],
       runtime_in_source=["begin", "end", "strides"], note="values chosen here")
    ov("shrink_output_shape_by_axes", tp, big, [0, 2, 0, 1], [0, 3, 300, 2], [1, 1, 1, 1], [1, 0, 0, 0],
       [1, 0, 0, 0], [0] * 4, [0, 1, 0, 1], [0] * 4, interval=[[0, 1], [0, 300]],
       runtime_in_source=["begin", "end", "strides"], note="values chosen here")
    ov("extend_output_shape_by_new_axes", tp, [1, 200, 200, 3], [0, 1, 0, 5], [0, 100, 0, 9], [1, 1, 1, 1],
       [1, 0, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0], [0] * 4, [0] * 4, interval=[[0, 1], [0, 200], 1, [0, 200], 3],
           runtime_in_source=["begin", "end", "strides"],
       note="values chosen here")
    ov("there_are_empty_masks", tp, [1, 200, 200, 3], [0, 0, 0, 0], [0, 200, 100, 3], [1, 1, 1, 1], [1, 0, 0, 0],
       [1, 0, 0, 0], [], [], [], interval=[[0, 1], [0, 200], [0, 200], [0, 3]],
       runtime_in_source=["begin", "end", "strides"], note="values chosen here; the test's {-1, 200} read as [0, 200]")
    ov("when_input_has_dynamic_dimension", tp, [9, 200, 200, 3], [0, 0, 0, 0], [5, 10, 20, 2], [1, 1, 1, 1],
       [0] * 4, [0] * 4, [0] * 4, [0] * 4, [0] * 4, symbolic_dims=[0],
       interval=[None, [0, 200], [0, 200], [0, 3]], runtime_in_source=["begin", "end", "strides"],
       note="input {[8, -1], 200, 200, 3}: 9 here; values chosen here")
    ov("input_has_dynamic_dimensions_and_shrink_one", tp, [8, 200, 100, 3], [1, 0, 0, 0], [2, 50, 60, 3],
       [1, 1, 1, 1], [0] * 4, [0] * 4, [0] * 4, [1, 0, 0, 0], [0] * 4, symbolic_dims=[0, 2], interval=[[0, 200], None,
           [0, 3]], runtime_in_source=["begin", "end", "strides"],
       note="input {[8, 40], 200, [100, 200], 3}: (8, 200, 100, 3) here; values chosen here")
    ov("input_is_dynamic_rank", tp, [2, 3, 4], [0, 0, 0, 1], [0, 2, 0, 3], [1, 1, 1, 1], [1, 0, 1, 0], [0] * 4,
       [1, 0, 0, 0], [0] * 4, [0] * 4, unknown_rank=True,
       runtime_in_source=["begin", "end", "strides"], note="dynamic rank: rank 3 here, unknown in the ONNX model")
    ov("extend_input_with_static_rank_and_all_dynamic_dims", tp, [2, 3, 4, 5], [0, 0, 0, 1], [0, 2, 3, 3],
       [1, 1, 1, 1], [1, 0, 1, 0], [0] * 4, [1, 0, 0, 0], [0] * 4, [0] * 4, symbolic_dims=[0, 1, 2, 3], interval=[1,
           None, None, None, None],
       runtime_in_source=["begin", "end", "strides"], note="input dynamic(4): (2, 3, 4, 5) here")
    for name in ("begin_strides_are_dynamic_rank", "begin_end_strides_are_dynamic_rank"):
        ov(name, tp, [3, 5, 4], [0, 1, 0], [2, 4, 3], [1, 1, 1], [1, 0, 1, 0], [0] * 4, [0] * 4, [0] * 4, [0] * 4,
           runtime_in_source=["begin", "end", "strides"],
           interval=[[0, 3], [0, 5], [0, 4]] if name.startswith("begin_strides") else None,
           note="values chosen here; masks of 4 entries for 3 indices")

    # plugin single-layer instances: (shape, begin, end, strides, begin, end, new_axis, shrink, ellipsis masks)
    gpu = [
        ([128, 1], [0, 0, 0], [0, 0, 0], [1, 1, 1], [0, 1, 1], [0, 1, 1], [1, 0, 0], [0, 0, 0], [0, 0, 0]),
        ([128, 1], [0, 0, 0], [0, 0, 0], [1, 1, 1], [1, 0, 1], [1, 0, 1], [0, 1, 0], [0, 0, 0], [0, 0, 0]),
        ([1, 12, 100], [0, -1, 0], [0, 0, 0], [1, 1, 1], [1, 0, 1], [1, 0, 1], [0, 0, 0], [0, 1, 0], [0, 0, 0]),
        ([1, 12, 100], [0, 9, 0], [0, 11, 0], [1, 1, 1], [1, 0, 1], [1, 0, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]),
        ([1, 12, 100], [0, 1, 0], [0, -1, 0], [1, 1, 1], [1, 0, 1], [1, 0, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]),
        ([1, 12, 100], [0, 9, 0], [0, 7, 0], [-1, -1, -1], [1, 0, 1], [1, 0, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]),
        ([1, 12, 100], [0, 7, 0], [0, 9, 0], [-1, 1, -1], [1, 0, 1], [1, 0, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]),
        ([1, 12, 100], [0, 4, 0], [0, 9, 0], [-1, 2, -1], [1, 0, 1], [1, 0, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]),
        ([1, 12, 100], [0, 4, 0], [0, 10, 0], [-1, 2, -1], [1, 0, 1], [1, 0, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]),
        ([1, 12, 100], [0, 9, 0], [0, 4, 0], [-1, -2, -1], [1, 0, 1], [1, 0, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]),
        ([1, 12, 100], [0, 10, 0], [0, 4, 0], [-1, -2, -1], [1, 0, 1], [1, 0, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]),
        ([1, 12, 100], [0, 11, 0], [0, 0, 0], [-1, -2, -1], [1, 0, 1], [1, 0, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]),
        ([1, 12, 100], [0, -6, 0], [0, -8, 0], [-1, -2, -1], [1, 0, 1], [1, 0, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]),
        ([1, 12, 100], [0, 6, 0], [0, 4, 0], [-1, -2, -1], [1, 0, 1], [1, 0, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]),
        ([1, 12, 100], [0, -8, 0], [0, -4, 0], [-1, 2, -1], [1, 0, 1], [1, 0, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]),
        ([1, 12, 100, 1, 1], [0, -1, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1], [1, 0, 1, 0], [1, 0, 1, 0], [],
         [0, 1, 0, 1], []),
        ([2, 2, 2, 2], [0, 0, 0, 0], [2, 2, 2, 2], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], [], [], []),
        ([2, 2, 2, 2], [1, 1, 1, 1], [2, 2, 2, 2], [1, 1, 1, 1], [0, 0, 0, 0], [1, 1, 1, 1], [], [], []),
        ([1, 2, 128, 2], [0, 0, 0, 1], [0, 1, 0, 2], [1, 1, 1, 1], [1, 0, 1, 0], [1, 0, 1, 0], [0, 0, 0, 0],
         [0, 1, 0, 1], [0, 0, 0, 0]),
        ([2, 2, 2, 2], [1, 1, 1, 1], [2, 2, 2, 2], [1, 1, 1, 1], [0, 0, 0, 0], [0, 0, 0, 0], [], [], []),
        ([2, 2, 4, 3], [0, 0, 0, 0], [2, 2, 4, 3], [1, 1, 2, 1], [1, 1, 1, 1], [1, 1, 1, 1], [], [], []),
        ([2, 2, 4, 2], [1, 0, 0, 1], [2, 2, 4, 2], [1, 1, 2, 1], [0, 1, 1, 0], [1, 1, 0, 0], [], [], []),
        ([1, 2, 4, 2], [1, 0, 0, 0], [1, 2, 4, 2], [1, 1, -2, -1], [1, 1, 1, 1], [1, 1, 1, 1], [], [], []),
        ([2, 2, 4, 2], [1, 0, 0, 0], [1, 2, 4, 2], [1, 1, -2, -1], [0, 1, 1, 1], [1, 1, 1, 1], [], [], []),
        ([2, 3, 4, 5, 6], [0, 1, 0, 0, 0], [2, 3, 4, 5, 6], [1, 1, 1, 1, 1], [1, 0, 1, 1, 1], [1, 0, 1, 1, 1], [],
         [0, 1, 0, 0, 0], []),
        ([1, 5, 30, 30, 30], [0, 0, 0, 0, 0], [0, 0, 29, 29, 29], [1, 1, 1, 1, 1], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0],
         [0] * 5, [0] * 5, [0] * 5),
        ([10, 10], [0, 0], [1000, 2], [1, 1], [0, 1], [0, 1], [0, 0], [0, 0], [0, 0]),
        ([10, 10], [-1000, 0], [1000, 2], [1, 1], [0, 1], [0, 1], [0, 0], [0, 0], [0, 0]),
        ([10, 10], [1000, 1], [-1000, 2], [-1, 1], [0, 1], [0, 1], [0, 0], [0, 0], [0, 0]),
        ([10, 10], [-1, 1], [-1000, 2], [-1, 1], [0, 1], [0, 1], [0, 0], [0, 0], [0, 0]),
        ([10, 10], [-1, 1], [0, 2], [-1, 1], [0, 1], [0, 1], [0, 0], [0, 0], [0, 0]),
        ([10, 10], [-4, 1], [-8, 0], [-1, 1], [0, 1], [0, 1], [0, 0], [0, 0], [0, 0]),
        ([5, 5, 5, 5], [-1, 0, -1, 0], [-50, 0, -60, 0], [-1, 1, -1, 1], [0, 0, 0, 0], [0, 1, 0, 1], [0] * 4,
         [0] * 4, [0] * 4),
        ([2, 2, 4, 1], [0, 0, 0, 0], [2, 2, 4, 1], [1, 1, 1, 1], [0], [0], [1], [0], [0]),
        ([128, 1, 1024], [-1, 0, 0], [0, 0, 0], [1, 1, 1], [0, 1, 1], [0, 1, 1], [0, 0, 0], [1, 0, 0], [0, 0, 0]),
        ([10, 10], [-4, 1], [-8, 0], [-1, 1], [0, 1], [0, 1], [0, 0], [0, 0], [0, 1]),
        ([2, 2, 4, 1], [0, 0], [2, 2], [-1, 1], [1, 0], [1, 0], [0, 0], [0, 0], [0, 1]),
        ([2, 2, 4, 1], [0, 0], [4, 1], [1, -1], [0, 1], [0, 1], [0, 0], [0, 0], [1, 0]),
        ([1, 5, 30, 30, 30], [0, 0, 0], [0, 29, 29], [1, 1, 1], [1, 1, 1], [1, 0, 0], [0, 0, 0], [0, 0, 0],
         [0, 1, 0]),
    ]
    for args in gpu:
        ov("ss_only_test_cases_fp32", OV_GPU, *args)
    for args in [([2, 2, 2, 2], [0, 0, 0, 0], [2, 2, 2, 2], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], [], [], []),
                 ([2, 2, 2, 2], [1, 1, 1, 1], [2, 2, 2, 2], [1, 1, 1, 1], [0, 0, 0, 0], [0, 0, 0, 0], [], [], [])]:
        ov("ss_only_test_cases_i64", OV_GPU, *args, dtype="int64")
    cpu32 = [
        ([2, 2, 2, 2], [0, 0, 0, 0], [2, 2, 2, 2], [1, 1, 1, 1], [], [], [], [], []),
        ([2, 2, 4, 3], [0, 0, 0, 0], [2, 2, 4, 3], [1, 1, 2, 1], [1, 0, 0, 0], [1, 0, 0, 0], [0] * 4, [0] * 4,
         [0, 1, 0, 0]),
        ([2, 2, 2, 2], [1, 1, 1, 1], [2, 2, 2, 2], [1, 1, 1, 1], [0] * 4, [0] * 4, [0] * 4, [0] * 4, [0] * 4),
        ([1, 3, 4, 2], [0, 0, -2, 0], [1, -2, 4, -1], [1, 1, 1, 1], [0] * 4, [0] * 4, [0] * 4, [0] * 4, [0] * 4),
        ([2, 2, 4, 5], [0, 0, 0, 2], [1, 2, 3, 4], [1, 1, 1, 1], [0] * 4, [1, 1, 1, 1], [0] * 4, [0] * 4, [0] * 4),
        ([1, 12, 100], [0, -1, 0], [0, 0, 0], [1, 1, 1], [1, 0, 1], [1, 0, 1], [0, 0, 0], [0, 1, 0], [0, 0, 0]),
        ([1, 12, 100], [0, 1, 0], [0, -1, 0], [1, 1, 1], [1, 0, 1], [1, 0, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]),
        ([1, 12, 100], [0, 7, 0], [0, 9, 0], [-1, 1, -1], [1, 0, 1], [1, 0, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]),
        ([1, 12, 100], [0, 4, 0], [0, 10, 0], [-1, 2, -1], [1, 0, 1], [1, 0, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]),
        ([1, 12, 100], [0, 11, 0], [0, 0, 0], [-1, -2, -1], [1, 0, 1], [1, 0, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]),
        ([10, 12], [-1, 1], [-9999, 0], [-1, 1], [0, 1], [0, 1], [0, 0], [0, 0], [0, 0]),
        ([2, 2, 2, 2], [1, 1, 1, 1], [2, 2, 2, 2], [1, 1, 1, 1], [0] * 4, [1, 1, 1, 1], [], [], []),
        ([1, 12, 100, 10], [0, 0, 0], [1, 12, 100], [1, 1, 1], [], [], [], [], []),
        ([2, 2, 4, 2], [1, 0, 0, 1], [2, 2, 4, 2], [1, 1, 2, 1], [0, 1, 1, 0], [1, 1, 0, 0], [], [], []),
        ([1, 2], [0, 0], [1, 2], [1, -1], [1, 1], [1, 1], [], [], []),
        ([2, 2, 4, 2], [1, 0, 0, 0], [1, 2, 4, 2], [1, 1, -2, -1], [0, 1, 1, 1], [1, 1, 1, 1], [], [], []),
    ]
    for args in cpu32:
        ov("ss_only_test_cases_fp32 (CPU, 2020-2021)", OV_CPU, *args)
    cpu16 = [
        ([2, 2, 2, 2], [0, 0, 0, 0], [2, 2, 2, 2], [1, 1, 1, 1], [0] * 4, [0] * 4, [0] * 4, [0] * 4, [0] * 4),
        ([2, 2, 4, 2], [1, 0, 0, 1], [2, 2, 4, 2], [1, 2, 2, 2], [0, 0, 1, 0], [0, 1, 0, 0], [1, 0, 0, 0], [0] * 4,
         [0] * 4),
        ([2, 2, 2, 2], [0, 0, 0, 0], [2, 2, 2, 2], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], [], [], []),
        ([2, 2, 4, 5], [0, 0, 0, 2], [1, 2, 3, 4], [1, 1, 1, 1], [0, 0, 0, 1], [1, 0, 0, 0], [0] * 4, [0] * 4,
         [0] * 4),
        ([1, 4, 1, 1], [0, 3, 0, 0], [1, 1, 1, 1], [1, -1, 1, 1], [0] * 4, [0] * 4, [], [0] * 4, []),
        ([1, 12, 100], [0, 9, 0], [0, 11, 0], [1, 1, 1], [1, 0, 1], [1, 0, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]),
        ([1, 12, 100], [0, 9, 0], [0, 7, 0], [-1, -1, -1], [1, 0, 1], [1, 0, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]),
        ([1, 12, 100], [0, 4, 0], [0, 9, 0], [-1, 2, -1], [1, 0, 1], [1, 0, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]),
        ([1, 12, 100], [0, 9, 0], [0, 4, 0], [-1, -2, -1], [1, 0, 1], [1, 0, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]),
        ([1, 12, 100], [0, 10, 0], [0, 4, 0], [-1, -2, -1], [1, 0, 1], [1, 0, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]),
        ([1, 12, 100], [0, -6, 0], [0, -8, 0], [-1, -2, -1], [1, 0, 1], [1, 0, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]),
        ([5, 5, 5, 5], [-1, 0, -1, 0], [-50, 0, -60, 0], [-1, 1, -1, 1], [0] * 4, [0, 1, 0, 1], [0] * 4, [0] * 4,
         [0] * 4),
        ([2, 2, 2, 2], [1, 1, 1, 1], [2, 2, 2, 2], [1, 1, 1, 1], [0] * 4, [0] * 4, [], [], []),
        ([2, 2, 4, 3], [0, 0, 0, 0], [2, 2, 4, 3], [1, 1, 2, 1], [1, 1, 1, 1], [1, 1, 1, 1], [], [], []),
        ([1, 12, 100, 10], [0, -1, 0], [0, 0, 0], [1, 1, 1], [1, 0, 1], [1, 0, 1], [], [0, 1, 0], []),
        ([1, 2, 4, 2], [1, 0, 0, 0], [1, 2, 4, 2], [1, 1, -2, -1], [1, 1, 1, 1], [1, 1, 1, 1], [], [], []),
    ]
    for args in cpu16:
        ov("ss_only_test_cases_fp16 (CPU, 2020-2021)", OV_CPU, *args, dtype="float16")
    crop = [
        ("testCasesPlain2D", [32, 32], [0, 20], [32, 30]), ("testCasesPlain2D", [32, 20], [2, 10], [32, 20]),
        ("testCasesPlain4D", [1, 5, 32, 32], [0, 2, 5, 4], [1, 4, 28, 27]),
        ("testCasesPlain4D", [1, 5, 32, 32], [0, 0, 20, 20], [1, 5, 25, 25]),
        ("testCasesPlain4D", [1, 5, 32, 32], [0, 0, 0, 20], [1, 5, 32, 30]),
        ("testCasesPlain4D", [1, 5, 32, 20], [0, 0, 2, 10], [1, 5, 32, 20]),
        ("testCasesBlocked4D", [1, 16, 32, 32], [0, 0, 20, 20], [1, 16, 25, 25]),
        ("testCasesBlocked4D", [1, 32, 32, 32], [0, 0, 0, 20], [1, 16, 32, 30]),
        ("testCasesPlain4DynBatch", [10, 5, 32, 32], [0, 2, 5, 4], [1, 4, 28, 27]),
        ("testCasesPlain4DynBatch", [10, 5, 32, 32], [0, 0, 20, 20], [1, 5, 25, 25]),
        ("testCasesPlain4DynBatch", [10, 5, 32, 32], [0, 0, 0, 20], [1, 5, 32, 30]),
        ("testCasesPlain4DynBatch", [10, 5, 32, 20], [0, 0, 2, 10], [1, 5, 32, 20]),
    ]
    for name, shape, b, e in crop:
        n = len(b)
        ov(f"CropLayerCPUTest.{name}", OV_CROP, shape, b, e, [1] * n, [0] * n, [0] * n, [], [], [])

    # CPU plugin's custom StridedSlice tests: every spec on every static shape and every shape its
    # dynamic-shape instances take (zero-size ones included), each run against OpenVINO's reference
    def cpu(name, specs, *shape_lists):
        shapes = list(dict.fromkeys(tuple(sh) for lst in shape_lists for sh in lst))
        small = [sh for sh in shapes if int(np.prod(sh)) <= MAX_ELEMENTS] or [min(shapes, key=np.prod)]
        for sh in small:
            for b, e, st, bm, em, new, shrink, ell in specs:
                ov(f"StridedSliceLayerCPUTest.{name}", OV_CPU_CUSTOM, list(sh), b, e, st, bm, em, new, shrink, ell)
    plain2d = [([2, 5], [16, 8], [1, 1], [0, 0], [0, 0], [], [], []),
               ([-10, -11], [-2, -3], [1, 1], [0, 0], [0, 0], [], [], []),
               ([-16, -17], [-2, -3], [1, 1], [0, 0], [0, 0], [], [], []),
               ([2, 44], [55, -2], [2, 3], [0, 1], [0, 0], [], [], []),
               ([2, -7], [1, -2], [2, 3], [1, 0], [1, 0], [], [], []),
               ([2], [22], [2], [0], [0], [], [], [])]
    cpu("Plain_2D", plain2d, [[32, 20]], [[32, 20], [16, 16], [24, 16]], [[16, 16], [20, 16], [32, 16]],
        [[16, 32], [32, 16], [24, 24]])
    cpu("Plain_Static_2D_InPlace", [([2, 0], [16, 20], [1, 1], [0, 0], [0, 0], [], [], [])], [[32, 20]])
    common4d = [([0, 2, 5, 4], [1, 4, 28, 27], [1, 1, 1, 1], [0] * 4, [0] * 4, [], [], []),
                ([0, 0, 10, 0], [1, 3, 20, 20], [1, 1, 1, 1], [0] * 4, [0, 1, 0, 0], [], [], []),
                ([0, 0, 20, 20], [1, 5, 25, 26], [1, 1, 1, 2], [0] * 4, [0] * 4, [], [], []),
                ([0, 0, 0, 20], [1, 2, 30, 30], [1, 1, 2, 1], [0, 0, 0, 1], [0, 1, 0, 1], [], [], []),
                ([0, 0, 2, 10], [1, 3, 32, 20], [1, 1, 1, 1], [0, 0, 1, 1], [0] * 4, [], [], []),
                ([0, 1, 0, 10], [1, 5, 32, 30], [1, 1, 1, 1], [0, 1, 0, 0], [0] * 4, [], [], []),
                ([0, 0, 2, 10], [1, 8, 32, 18], [1, 2, 1, 2], [0, 0, 1, 0], [0, 0, 0, 1], [], [], []),
                ([0, 0, 10], [0, 32, 18], [1, 1, 1], [1, 1, 0], [1, 1, 0], [], [], [1, 0, 0]),
                ([0, 4, 10], [1, 8, 0], [1, 1, 1], [1, 0, 1], [1, 1, 1], [], [], [0, 0, 1]),
                ([0, 4], [0, 5], [1, 1], [0], [0], [0], [0], [1])]
    cpu("Common_4D", common4d, [[1, 5, 32, 32], [2, 5, 32, 48]],
        [[1, 5, 32, 32], [2, 5, 32, 32], [1, 5, 64, 64], [0, 0, 0, 0]],
        [[1, 5, 32, 32], [2, 5, 32, 32], [3, 5, 32, 36], [0, 5, 0, 0]], [[2, 5, 32, 32], [1, 5, 48, 32], [5, 5, 32, 32]])
    cpu("Common_Static_4D_InPlace", [([0, 0, 0, 0], [1, 5, 32, 32], [1, 1, 1, 1], [0] * 4, [0] * 4, [], [], [])],
        [[2, 5, 32, 32]])
    blocked4d_1 = [([0, 0, 0, 0], [1, 32, 32, 32], [1, 1, 1, 1], [0] * 4, [0] * 4, [], [], []),
                   ([0, 0, 16, 0], [1, 32, 32, 32], [1, 1, 1, 1], [0] * 4, [0, 0, 0, 1], [], [], []),
                   ([0, 0, 0, 0], [1, 32, 32, 16], [1, 1, 1, 1], [0] * 4, [0, 0, 0, 1], [], [], []),
                   ([0, 0, 0, 0], [1, 16, 32, 32], [1, 1, 1, 1], [0] * 4, [0, 0, 0, 1], [], [], [])]
    cpu("Blocked_4D_Subset1", blocked4d_1, [[1, 32, 32, 32], [1, 32, 32, 64]],
        [[1, 32, 32, 32], [2, 32, 32, 32], [3, 32, 32, 48]], [[2, 32, 32, 32], [1, 32, 48, 32], [5, 32, 32, 48]])
    blocked4d_2 = [([0, 0, 5, 4], [1, 16, 28, 27], [1, 1, 1, 1], [0] * 4, [0] * 4, [], [], []),
                   ([0, 16, 0, 0], [1, 32, 10, 10], [1, 1, 1, 1], [0] * 4, [0] * 4, [], [], []),
                   ([0, 0, 20, 20], [1, 32, 25, 25], [1, 1, 1, 1], [0, 1, 0, 0], [0, 1, 0, 0], [], [], []),
                   ([0, 16, 2, 10], [1, 32, 32, 20], [1, 1, 2, 1], [0] * 4, [0] * 4, [], [], []),
                   ([0, 16, 0, 0], [2, 64, 32, 20], [1, 1, 1, 1], [0] * 4, [0] * 4, [], [], []),
                   ([0, 32, 0, 0], [2, 50, 32, 20], [1, 1, 1, 1], [0] * 4, [0] * 4, [], [], []),
                   ([0, 0, 0, 0], [2, 12, 32, 20], [1, 1, 1, 1], [0] * 4, [0] * 4, [], [], []),
                   ([0, -16, 0, 10], [2, 100, 32, 20], [1, 1, 1, 1], [0] * 4, [0] * 4, [], [], []),
                   ([0, -32, 0, 0], [2, -12, 32, 20], [1, 1, 1, 1], [0] * 4, [0] * 4, [], [], []),
                   ([0, 10], [0, 20], [1, 1], [1, 0], [1, 0], [], [], [1, 0]),
                   ([0, 16, 0], [2, 32, 0], [1, 1, 1], [1, 0, 1], [1, 1, 1], [], [], [0, 0, 1])]
    cpu("Blocked_4D_Subset2", blocked4d_2, [[1, 64, 32, 32], [1, 64, 32, 64]],
        [[1, 64, 64, 32], [2, 64, 32, 32], [3, 64, 32, 48]], [[2, 64, 32, 32], [1, 64, 48, 32], [1, 64, 64, 64]])
    common5d = [([0, 2, 0, 5, 4], [1, 4, 5, 28, 27], [1] * 5, [0] * 5, [0] * 5, [], [], []),
                ([0, 0, 10, 0, 0], [1, 5, 20, 32, 20], [1] * 5, [0] * 5, [0] * 5, [], [], []),
                ([0, 1, 10, 0, 0], [1, 3, 20, 32, 20], [1] * 5, [0, 1, 0, 0, 0], [0] * 5, [], [], []),
                ([0, 0, 0, 20, 20], [1, 5, 20, 30, 26], [1, 1, 1, 2, 2], [0] * 5, [0] * 5, [], [], []),
                ([0, 0, 10, 0, 20], [1, 2, 20, 30, 30], [1, 1, 2, 1, 1], [0, 0, 0, 0, 1], [0, 1, 0, 1, 0], [], [], []),
                ([0, 0, 2, 10, 0], [1, 5, 10, 32, 20], [1] * 5, [0, 0, 1, 1, 0], [0, 0, 0, 0, 1], [], [], []),
                ([0, 1, 0, 10, 0], [1, 5, 20, 32, 32], [1] * 5, [0, 1, 0, 0, 0], [0] * 5, [], [], []),
                ([0, 0, 0, 0, 0], [1, 5, 10, 16, 16], [1, 1, 2, 1, 1], [0] * 5, [0] * 5, [], [], [])]
    cpu("Common_5D", common5d, [[1, 5, 20, 32, 32], [2, 5, 32, 32, 32]],
        [[1, 5, 32, 32, 32], [1, 5, 32, 32, 48], [1, 5, 64, 64, 64], [1, 10, 32, 32, 32], [0, 0, 0, 0, 0]],
        [[1, 5, 32, 32, 48], [1, 5, 32, 48, 32], [1, 5, 48, 32, 32], [0, 5, 0, 0, 0]],
        [[2, 5, 32, 32, 32], [1, 5, 48, 32, 32], [5, 5, 32, 32, 48]])
    blocked5d_1 = [([0, 0, 0, 5, 4], [1, 16, 5, 28, 27], [1] * 5, [0] * 5, [0] * 5, [], [], []),
                   ([0, 0, 10, 0, 0], [1, 16, 20, 32, 20], [1] * 5, [0] * 5, [0, 1, 0, 0, 0], [], [], []),
                   ([0, 0, 0, 20, 20], [1, 16, 20, 30, 26], [1, 1, 1, 2, 2], [0] * 5, [0] * 5, [], [], []),
                   ([0, 0, 10, 0, 20], [1, 16, 20, 30, 30], [1, 1, 2, 1, 1], [0, 0, 0, 0, 1], [0, 1, 0, 1, 0], [], [],
                    []),
                   ([0, 0, 2, 10, 0], [1, 16, 10, 32, 20], [1] * 5, [0, 0, 1, 1, 0], [0, 0, 0, 0, 1], [], [], []),
                   ([0, 0, 0, 10, 0], [1, 8, 20, 32, 32], [1] * 5, [0, 1, 0, 0, 0], [0, 1, 0, 0, 0], [], [], []),
                   ([0, 0, 0, 0, 0], [1, 16, 10, 16, 16], [1, 1, 2, 1, 1], [0] * 5, [0] * 5, [], [], [])]
    cpu("Blocked_5D_Subset1", blocked5d_1, [[1, 16, 32, 32, 32], [2, 16, 32, 32, 32], [2, 32, 32, 32, 32]],
        [[1, 16, 32, 32, 32], [2, 16, 32, 32, 32]], [[1, 16, 32, 32, 32], [2, 16, 32, 32, 32], [1, 16, 20, 32, 32]])
    blocked5d_2 = blocked5d_1[:1] + [
        ([0, 0, 10, 0, 0], [1, 16, 20, 32, 20], [1] * 5, [0] * 5, [0] * 5, [], [], [])] + blocked5d_1[1:] + [
        ([0, 0, 0, 0, 0], [1, 25, 20, 10, 10], [1] * 5, [0] * 5, [0] * 5, [], [], []),
        ([0, 16, 0, 0, 0], [1, 25, 20, 10, 10], [1] * 5, [0] * 5, [0] * 5, [], [], []),
        ([0, 16, 0, 0, 0], [1, 64, 20, 10, 10], [1] * 5, [0] * 5, [0] * 5, [], [], [])]
    cpu("Blocked_5D_Subset2", blocked5d_2, [[1, 64, 32, 32, 32], [2, 64, 32, 64, 32], [2, 64, 32, 32, 32]],
        [[1, 64, 64, 32, 32], [2, 64, 32, 32, 32], [3, 64, 32, 48, 32]],
        [[1, 64, 32, 32, 32], [2, 64, 32, 32, 32], [1, 64, 20, 32, 32]])
    descriptors = [([0, -4, 0, 0], [0, 2147483647, 0, 0], [1, 1, 1, 1], [1, 0, 1, 1], [1, 0, 1, 1], [], [], []),
                   ([0, 5, 0, 0], [1, 20, 28, 27], [1, 1, 1, 1], [0] * 4, [0] * 4, [], [], []),
                   ([0, 0, 0, 0], [1, 2147483647, 32, 32], [1, 2, 1, 1], [0] * 4, [0] * 4, [], [], []),
                   ([0, 0, 0, 0], [1, 2147483647, 32, 32], [1, 2, 1, 1], [0] * 4, [0] * 4, [], [0, 1, 0, 0], []),
                   ([0, 0, 0, 0], [1, 2147483647, 32, 32], [1, 2, 1, 1], [0] * 4, [0] * 4, [0, 0, 1, 0], [], [])]
    cpu("DescriptorsCheck", descriptors, [[1, 16, 32, 32], [1, 17, 32, 32], [1, 32, 32, 32]])

    # CPU plugin's static shape inference unit tests (begin/end/strides given as values)
    si = [("reverse_stride_begin_end_clip_to_dimension", [3, 4, 5], [100] * 3, [-100] * 3, [-1] * 3, [0] * 4, [0] * 4,
           [3, 4, 5]),
          ("use_begin_end", [3, 2, 3], [1, 0, 0], [2, 1, 3], [1, 1, 1], [0] * 4, [0] * 4, [1, 1, 3]),
          ("use_begin_end", [3, 2, 3], [1, 0, 0], [2, 2, 3], [1, 1, 1], [0] * 4, [0] * 4, [1, 2, 3]),
          ("use_begin_end", [3, 2, 3], [2, 0, 0], [3, 2, 3], [1, 1, 2], [0] * 4, [0] * 4, [1, 2, 2]),
          ("ignore_begin_end", [3, 2, 3], [1, 0, 0], [0, 0, 0], [1, 1, 1], [0, 1, 1], [1, 1, 1], [2, 2, 3]),
          ("ignore_begin_end_stride_by_two_last_dim", [3, 2, 3], [0, 1, 0], [2, 0, 0], [1, 1, 2], [1, 0, 1],
           [0, 1, 1], [2, 1, 2]),
          ("use_reverse_stride_on_last_dimension", [3, 2, 3], [0, 0, 0], [1, 0, 0], [1, 1, -1], [0, 1, 1], [0, 1, 1],
           [1, 2, 3]),
          ("default_stride", [3, 2, 3], [0, 0, 0], [1, 0, 2], None, [0, 1, 0], [0, 1, 0], [1, 2, 2])]
    for name, shape, b, e, st, bm, em, want in si:
        ov(f"StridedSliceStaticShapeInferenceTest.{name}", OV_SHAPE_INFER, shape, b, e, st, bm, em, [], [], [],
           expected_shape=want)

    # OpenVINO's TensorFlow frontend layer tests: tf.raw_ops.StridedSlice (TF flavour), real and complex
    basic = [([2, 5, 4, 3], [1, 0, 2, 0], [2, 5, 4, 2], [1, 2, 1, 1], 0, 0, 0, 0, 1),
             ([1, 5, 5, 3], [0, 0, 0, 0], [1, 5, 5, 3], [1, 2, 3, 1], 0, 0, 0, 8, 0),
             ([3, 4, 5, 7], [2, 0, 3], [3, 0, 6], [1, 1, 1], 6, 6, 2, 0, 1),
             ([1, 4, 7, 2], [0, 0, 0], [0, 6, 0], [1, 1, 1], 6, 4, 1, 0, 0),
             ([1, 4, 7, 2], [0, 0, 0], [0, 6, 0], [1, 1, 1], 6, 4, 1, 8, 0)]
    squeeze = [([1, 5], 1), ([5, 1], 2), ([1, 5, 3], 1), ([1, 1, 3], 2), ([1, 5, 1], 4), ([1, 1, 5, 3], 2),
               ([1, 5, 1, 3], 4), ([1, 5, 5, 1], 8), ([1, 1, 5, 5, 3], 3), ([1, 5, 1, 5, 3], 5), ([1, 5, 1, 5, 1], 21)]
    unsqueeze = [([1, 5], 1), ([1, 5], 3), ([1, 5, 3], 3), ([1, 5, 3], 4), ([1, 5, 3], 5), ([1, 5, 5, 3], 4),
                 ([1, 5, 5, 3], 2)]

    def tf_layer(test, shape, b, e, st, bm, em, ell, new, shrink, dtype):
        # (its dicts name the masks begin, end, ellipsis, new_axis, shrink)
        tf_raw(test, {"shape": shape, "start": 0}, b, e, st, path=OV_TF_LAYER, source="openvino", repo=OV_REPO,
               dtype=dtype, masks=(bm, em, ell, new, shrink))
    for dtype, test in (("float32", "TestStridedSlice"), ("complex64", "TestComplexStridedSlice")):
        rows = basic[:4] + [([1, 4, 7, 2] if dtype == "float32" else [1, 3, 7, 2], *basic[4][1:])]
        for shape, b, e, st, bm, em, ell, new, shrink in rows:
            tf_layer(f"{test}.basic", shape, b, e, st, bm, em, ell, new, shrink, dtype)
        for shape, shrink in squeeze:
            tf_layer(f"{test}.squeeze", shape, [0] * len(shape), [1, 5, 1, 1] if shrink == 8 else shape,
                     [1] * len(shape), 0, 0, 0, 0, shrink, dtype)
        for shape, new in unsqueeze:
            tf_layer(f"{test}.unsqueeze", shape, [0] * len(shape), shape, [1] * len(shape), 0, 0, 0, new, 0, dtype)
        tf_layer(f"{test}.unsqueeze", [16, 4, 64], [0] * 4, [0] * 4, [1] * 4, 19, 19, 0, 12, 0, dtype)


def build() -> list[dict]:
    CASES.clear()
    tensorflow_cases()
    openvino_cases()
    return list(CASES)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tf2onnx", action="store_true", help="also count where tf2onnx's native lowering is wrong")
    ap.add_argument("--summary", action="store_true",
                    help="also run the runtimes and our reference and count agreement per source")
    args = ap.parse_args(argv)
    cases = build()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    body = ",\n".join(json.dumps(c) for c in cases)  # one case a line: diffs stay readable
    OUT.write_text('{"about": ' + json.dumps(__doc__.split("\n\n")[0]) + ',\n"cases": [\n' + body + "\n]}\n")
    counts: dict = {}
    for c in cases:
        counts[c["source"]] = counts.get(c["source"], 0) + 1
    print(f"{len(cases)} cases -> {OUT.relative_to(ROOT)}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    if args.summary:
        print(summary(cases))
    if args.tf2onnx:
        for runtime in (False, True):
            for ours in (False, True):
                print(tf2onnx_native(cases, runtime, ours))
    return 0


def summary(cases) -> str:
    """Per source: cases, what the runtime accepted/rejected, values compared bitwise, and
    disagreements between our reference and the runtime."""
    from onnx_slice_tools.errors import StridedSliceError
    from onnx_slice_tools.verification.oracles import compare, our_outcome, run_oracle
    table: dict = {}
    for case in cases:
        row = table.setdefault((case["source"], case["flavor"]), dict(cases=0, accepted=0, rejected=0,
                                                                      values_compared=0, disagreements=0))
        x = make_input(case["input"], case["dtype"])
        row["cases"] += 1
        try:
            spec = spec_of(case)
        except StridedSliceError:
            row["rejected"] += 1  # not a spec at all (an OpenVINO mask value of 2); the runtime rejects it too
            continue
        theirs = run_oracle(x, spec)
        row["accepted" if theirs.ok else "rejected"] += 1
        row["values_compared"] += theirs.values is not None
        row["disagreements"] += compare(our_outcome(x, spec), theirs) is not None
    lines = ["| source | flavour | cases | runtime accepted | runtime rejected | values compared bitwise | disagreements |",
             "|---|---|---|---|---|---|---|"]
    for (source, flavor), r in table.items():
        lines.append(f"| {source} | {flavor} | " + " | ".join(str(v) for v in r.values()) + " |")
    return "\n".join(lines)


def _tf2onnx_model(rows, runtime: bool, ours: bool = False):
    """tf2onnx's native lowering of one tf.function holding every case's tf.strided_slice
    (begin/end/strides constants, or int32/int64 inputs when ``runtime``); ``ours``: tf2onnx's
    export keeping StridedSlice as a custom node, then our ``convert``."""
    import tensorflow as tf

    from onnx_slice_tools.verification.oracles import _int32
    from onnx_slice_tools.semantics.spec import MASK_NAMES
    from onnx_slice_tools.frontends.tfexport import export
    sig, fields = [], []
    for i, (case, x, spec) in enumerate(rows):
        sig.append(tf.TensorSpec(x.shape, tf.as_dtype(x.dtype), name=f"x{i}"))
        wide = any(not -(2 ** 31) <= v < 2 ** 31 for v in spec.begin + spec.end + spec.strides)
        dt = tf.int64 if wide else tf.int32
        if runtime:
            sig += [tf.TensorSpec([spec.n], dt, name=f"{f}{i}") for f in "bes"]
        fields.append(dt)

    def fn(*args):
        outs, k = [], 0
        for (case, x, spec), dt in zip(rows, fields):
            if runtime:
                data, b, e, s = args[k:k + 4]
                k += 4
            else:
                data, k = args[k], k + 1
                b, e, s = (tf.constant(v, dt) for v in (spec.begin, spec.end, spec.strides))
            outs.append(tf.strided_slice(data, b, e, s, **{m: _int32(getattr(spec, m)) for m in MASK_NAMES}))
        return outs
    if not ours:
        return export(tf.function(fn), sig, keep_strided_slice=False)
    from onnx_slice_tools import convert
    result = convert(export(tf.function(fn), sig, keep_strided_slice=True), verify=False)
    if not result.ok:
        raise ValueError("; ".join(r.error for r in result.report.records if r.error))
    return result.model


def _tf2onnx_feeds(rows, runtime: bool) -> dict:
    feeds = {}
    for i, (case, x, spec) in enumerate(rows):
        feeds[f"x{i}"] = x
        if runtime:
            wide = any(not -(2 ** 31) <= v < 2 ** 31 for v in spec.begin + spec.end + spec.strides)
            for f, vals in zip("bes", (spec.begin, spec.end, spec.strides)):
                feeds[f"{f}{i}"] = np.array(vals, np.int64 if wide else np.int32)
    return feeds


def tf2onnx_native(cases, runtime: bool, ours: bool = False) -> str:
    """Run tf2onnx's own lowering of the accepted TF cases (``ours``: tf2onnx's custom-op export
    converted by us) in onnxruntime against TensorFlow; a batch that fails to convert or load is
    split until the failing case is alone."""
    from onnx_slice_tools.errors import StridedSliceError
    from onnx_slice_tools.verification.oracles import tf_strided_slice
    from onnx_slice_tools.verification.lowerings import make_session
    rows, want = [], {}
    for case in cases:
        if case["flavor"] != "tf" or case["dtype"].startswith("complex"):
            continue
        x = make_input(case["input"], case["dtype"])
        try:
            spec = spec_of(case)
        except StridedSliceError:
            continue
        theirs = tf_strided_slice(x, spec)
        if theirs.ok:
            rows.append((case, x, spec))
            want[case["id"]] = theirs.values
    counts = {"cases": len(rows), "right": 0, "wrong values or shape": 0, "conversion failed": 0,
              "onnxruntime failed": 0}
    wrong: list[str] = []

    def run(batch):
        try:
            model = _tf2onnx_model(batch, runtime, ours)
            sess = make_session(model.SerializeToString())
            outs = sess.run([o.name for o in sess.get_outputs()], _tf2onnx_feeds(batch, runtime))
        except Exception as exc:  # tf2onnx and onnxruntime raise many kinds
            if len(batch) > 1:
                half = len(batch) // 2
                run(batch[:half]), run(batch[half:])
                return
            kind = "conversion failed" if "onnxruntime" not in type(exc).__module__ and \
                "ONNXRuntime" not in str(exc) and "onnxruntime" not in str(exc) else "onnxruntime failed"
            counts[kind] += 1
            wrong.append(f"{batch[0][0]['id']} {batch[0][2].index_notation()}: {kind}: {str(exc).splitlines()[0][:120]}")
            return
        for (case, x, spec), got in zip(batch, outs):
            w = want[case["id"]]
            if got.shape == w.shape and got.dtype == w.dtype and got.tobytes() == w.tobytes():
                counts["right"] += 1
            else:
                counts["wrong values or shape"] += 1
                wrong.append(f"{case['id']} {spec.index_notation()}: tf2onnx {got.shape}, TensorFlow {w.shape}")
    for k in range(0, len(rows), 64):
        run(rows[k:k + 64])
    mode = "runtime begin/end/strides" if runtime else "constant begin/end/strides"
    who = "tf2onnx custom-op export + onnx-slice-tools" if ours else "tf2onnx native"
    return f"{who}, {mode}: {counts}" + "".join(f"\n  {w}" for w in wrong)


if __name__ == "__main__":
    sys.exit(main())
