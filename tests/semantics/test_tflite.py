"""The TFLite flavour: LiteRT's STRIDED_SLICE kernel, checked against TF's TFLite interpreter.

* TFLite's own kernel tests (``tflite/kernels/strided_slice_test.cc``), expected values as
  written there, checked against our reference, the interpreter and our ONNX lowering;
* the differences from TensorFlow (begin_mask on a shrink index, zero-width ellipsis,
  out-of-range shrink, offset, INT32_MIN stride);
* a hypothesis corpus against the interpreter (in a child process: on undefined specs the
  interpreter may crash);
* the ONNX node form (``offset`` attribute -> tflite) through ``convert``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from onnx_slice_tools import convert
from onnx_slice_tools.api import CheckRun, verify_records
from onnx_slice_tools.errors import StridedSliceError
from onnx_slice_tools.verification.oracles import (CRASHED, IsolatedTFLite, Outcome, compare_tflite, our_outcome,
                                      random_case, tf_strided_slice, tflite_strided_slice)
from onnx_slice_tools.semantics.reference import slice_array, strided_slice
from onnx_slice_tools.rewrite.ir_pass import TF_DOMAIN
from onnx_slice_tools.semantics.spec import MASK_NAMES, from_tf, from_tflite
from onnx_slice_tools.verification.lowerings import make_session

from test_differential import HypothesisSource

ALL3 = ("begin", "end", "strides")
BOTH = ((), ALL3)  # the file's loop over constant_tensors in {true, false}


class K(NamedTuple):
    """One case of LiteRT's ``tflite/kernels/strided_slice_test.cc`` (google-ai-edge/LiteRT at
    f674577, Aug 2026), as written there.  ``want_shape``/``want``: the file's expectations
    (None where it checks none).  ``runtime``: the index tensors that are graph inputs in the
    file's variants.  ``expect``:

    * "values": the file checks shape and values; "shape": shape only (empty outputs);
    * "ok": the file checks only that Invoke succeeds;
    * "undefined": the file checks Invoke and the shape only -- the kernel reads outside the
      input or leaves the output unwritten, so the values are garbage; we reject the spec;
    * "error": the file expects Invoke to fail (or Prepare to die);
    * "older": LiteRT rejects it (an INT32_MIN stride) where TF 2.21's deprecated tf.lite
      interpreter returned an empty tensor; we reject it as LiteRT does.
    The interpreter run is LiteRT's (``ai-edge-litert``); where it and tf.lite differ (6-D
    input: LiteRT takes it, tf.lite stops at 5 dims) we follow LiteRT."""

    name: str
    shape: tuple
    values: list
    b: list
    e: list
    s: list
    bm: int = 0
    em: int = 0
    elm: int = 0
    nam: int = 0
    sam: int = 0
    offset: bool = False
    want_shape: tuple | None = None
    want: list | None = None
    runtime: tuple = BOTH
    expect: str = "values"


def _seq(n, start=1):
    return list(range(start, start + n))


I32_MIN = -(2 ** 31)
KERNEL_CASES = [
    K("In6D", (2, 1, 1, 1, 1, 3), _seq(6, 0), [1, 0, 0, 0, 0, 1], [2, 1, 1, 1, 1, 3], [1] * 6,
      want_shape=(1, 1, 1, 1, 1, 2), want=[4, 5], expect="values"),
    K("In1DEmpty", (0,), [], [1], [3], [1], want_shape=(0,), expect="shape"),
    K("Offset", (10,), _seq(10, 0), [1], [3], [1], offset=True, want_shape=(3,), want=[1, 2, 3],
      runtime=((), ("begin",))),
    K("OffsetArray", (3, 4), _seq(12, 0), [0, 1], [2, 2], [1, 1], offset=True, want_shape=(2, 2),
      want=[1, 2, 5, 6], runtime=((), ("begin",))),
    K("OffsetConstant", (3, 4), _seq(12, 0), [0, 1], [2, 2], [1, 1], offset=True, want_shape=(2, 2),
      want=[1, 2, 5, 6], runtime=(("begin",),)),
    K("OffsetConstantStride", (5, 6), _seq(30, 0), [0, 1], [4, 3], [2, 2], offset=True, want_shape=(2, 2),
      want=[1, 3, 13, 15], runtime=(("begin",),)),
    K("OffsetConstantNegativeStride", (5, 6), _seq(30, 0), [4, 4], [-4, -3], [-2, -2], offset=True,
      want_shape=(2, 2), want=[28, 26, 16, 14], runtime=(("begin",),)),
    K("In1D", (4,), _seq(4), [1], [3], [1], want_shape=(2,), want=[2, 3]),
    K("In1DConst", (4,), _seq(4), [1], [3], [1], want_shape=(2,), want=[2, 3]),
    K("In1D_Int32End", (32768,), _seq(32768, 0), [0], [32768], [1], want_shape=(32768,), want=_seq(32768, 0)),
    K("In1D_EmptyOutput", (4,), _seq(4), [10], [3], [1], want_shape=(0,), expect="shape"),
    K("In1D_NegativeBegin", (4,), _seq(4), [-3], [3], [1], want_shape=(2,), want=[2, 3]),
    K("In1D_OutOfRangeBegin", (4,), _seq(4), [-5], [3], [1], want_shape=(3,), want=[1, 2, 3]),
    K("In1D_NegativeEnd", (4,), _seq(4), [1], [-2], [1], want_shape=(1,), want=[2]),
    K("In1D_OutOfRangeEnd", (4,), _seq(4), [-3], [5], [1], want_shape=(3,), want=[2, 3, 4]),
    K("In1D_BeginMask", (4,), _seq(4), [1], [3], [1], bm=1, want_shape=(3,), want=[1, 2, 3]),
    K("In1D_NegativeBeginNegativeStride", (4,), _seq(4), [-2], [-3], [-1], want_shape=(1,), want=[3]),
    K("In1D_OutOfRangeBeginNegativeStride", (4,), _seq(4), [5], [2], [-1], want_shape=(1,), want=[4]),
    K("In1D_NegativeEndNegativeStride", (4,), _seq(4), [2], [-4], [-1], want_shape=(2,), want=[3, 2]),
    K("In1D_OutOfRangeEndNegativeStride", (4,), _seq(4), [-3], [-5], [-1], want_shape=(2,), want=[2, 1]),
    K("In1D_EndMask", (4,), _seq(4), [1], [3], [1], em=1, want_shape=(3,), want=[2, 3, 4]),
    K("In1D_NegStride", (3,), _seq(3), [-1], [-4], [-1], want_shape=(3,), want=[3, 2, 1]),
    K("In1D_EvenLenStride2", (2,), _seq(2), [0], [2], [2], want_shape=(1,), want=[1]),
    K("In1D_OddLenStride2", (3,), _seq(3), [0], [3], [2], want_shape=(2,), want=[1, 3]),
    K("In2D_Identity", (2, 3), _seq(6), [0, 0], [2, 3], [1, 1], want_shape=(2, 3), want=_seq(6)),
    K("In2D", (2, 3), _seq(6), [1, 0], [2, 2], [1, 1], want_shape=(1, 2), want=[4, 5]),
    K("In2D_Stride2", (2, 3), _seq(6), [0, 0], [2, 3], [2, 2], want_shape=(1, 2), want=[1, 3]),
    K("In2D_NegStride", (2, 3), _seq(6), [1, -1], [2, -4], [2, -1], want_shape=(1, 3), want=[6, 5, 4]),
    K("In2D_BeginMask", (2, 3), _seq(6), [1, 0], [2, 2], [1, 1], bm=1, want_shape=(2, 2), want=[1, 2, 4, 5]),
    K("In2D_EndMask", (2, 3), _seq(6), [1, 0], [2, 2], [1, 1], em=2, want_shape=(1, 3), want=[4, 5, 6]),
    K("In2D_NegStrideBeginMask", (2, 3), _seq(6), [1, -2], [2, -4], [1, -1], bm=2, want_shape=(1, 3),
      want=[6, 5, 4]),
    K("In2D_NegStrideEndMask", (2, 3), _seq(6), [1, -2], [2, -3], [1, -1], em=2, want_shape=(1, 2), want=[5, 4]),
    K("In3D_Identity", (2, 3, 2), _seq(12), [0, 0, 0], [2, 3, 2], [1, 1, 1], want_shape=(2, 3, 2), want=_seq(12)),
    K("In3D_NegStride", (2, 3, 2), _seq(12), [-1, -1, -1], [-3, -4, -3], [-1, -1, -1], want_shape=(2, 3, 2),
      want=_seq(12)[::-1]),
    K("In3D_Strided2", (2, 3, 2), _seq(12), [0, 0, 0], [2, 3, 2], [2, 2, 2], want_shape=(1, 2, 1), want=[1, 5]),
    K("In1D_ShrinkAxisMask1", (4,), _seq(4), [1], [2], [1], sam=1, want_shape=(), want=[2]),
    K("In1D_ShrinkAxisMask1_NegativeSlice", (4,), _seq(4, 0), [-1], [0], [1], sam=1, want_shape=(), want=[3]),
    K("In2D_ShrinkAxis3_NegativeSlice", (4, 1), _seq(4, 0), [-2, -1], [-1, 0], [1, 1], sam=3, want_shape=(),
      want=[2]),
    K("In2D_ShrinkAxis2_BeginEndAxis1_NegativeSlice", (4, 1), _seq(4, 0), [0, -1], [0, 0], [1, 1], bm=1, em=1,
      sam=2, want_shape=(4,), want=[0, 1, 2, 3]),
    K("In1D_BeginMaskShrinkAxisMask1", (4,), _seq(4), [1], [1], [1], bm=1, sam=1, want_shape=(), want=[1]),
    K("In2D_ShrinkAxisMask1", (2, 3), _seq(6), [0, 0], [1, 3], [1, 1], sam=1, want_shape=(3,), want=[1, 2, 3]),
    K("In2D_ShrinkAxisMask2", (2, 3), _seq(6), [0, 0], [2, 1], [1, 1], sam=2, want_shape=(2,), want=[1, 4]),
    K("In2D_ShrinkAxisMask3", (2, 3), _seq(6), [0, 0], [1, 1], [1, 1], sam=3, want_shape=(), want=[1]),
    K("In3D_IdentityShrinkAxis1", (2, 3, 2), _seq(12), [0, 0, 0], [1, 3, 2], [1, 1, 1], sam=1, want_shape=(3, 2),
      want=_seq(6)),
    K("In3D_IdentityShrinkAxis2", (2, 3, 2), _seq(12), [0, 0, 0], [2, 1, 2], [1, 1, 1], sam=2, want_shape=(2, 2),
      want=[1, 2, 7, 8]),
    K("In3D_IdentityShrinkAxis3", (2, 3, 2), _seq(12), [0, 0, 0], [1, 1, 2], [1, 1, 1], sam=3, want_shape=(2,),
      want=[1, 2]),
    K("In3D_IdentityShrinkAxis4", (2, 3, 2), _seq(12), [0, 0, 0], [2, 3, 1], [1, 1, 1], sam=4, want_shape=(2, 3),
      want=[1, 3, 5, 7, 9, 11]),
    K("In3D_IdentityShrinkAxis5", (2, 3, 2), _seq(12), [0, 0, 0], [1, 3, 1], [1, 1, 1], sam=5, want_shape=(3,),
      want=[1, 3, 5]),
    K("In3D_IdentityShrinkAxis6", (2, 3, 2), _seq(12), [0, 0, 0], [2, 1, 1], [1, 1, 1], sam=6, want_shape=(2,),
      want=[1, 7]),
    K("In3D_IdentityShrinkAxis7", (2, 3, 2), _seq(12), [0, 0, 0], [1, 1, 1], [1, 1, 1], sam=7, want_shape=(),
      want=[1]),
    K("RunTwice", (2, 3), _seq(6), [1, 0], [2, 2], [1, 1], bm=1, want=[1, 2, 4, 5], runtime=(ALL3,)),
    K("In3D_IdentityShrinkAxis1Uint8", (2, 3, 2), _seq(12), [0, 0, 0], [1, 3, 2], [1, 1, 1], sam=1,
      want_shape=(3, 2), want=_seq(6)),
    K("In3D_IdentityShrinkAxis1int8", (2, 3, 2), _seq(12), [0, 0, 0], [1, 3, 2], [1, 1, 1], sam=1,
      want_shape=(3, 2), want=_seq(6)),
    K("In5D_Identity", (2, 2, 2, 1, 2), _seq(16), [0] * 5, [2, 1, 2, 1, 2], [1] * 5, want_shape=(2, 1, 2, 1, 2),
      want=[1, 2, 3, 4, 9, 10, 11, 12]),
    K("In5D_IdentityShrinkAxis1", (2, 2, 2, 1, 2), _seq(16), [0] * 5, [2, 1, 2, 1, 2], [1] * 5, sam=1,
      want_shape=(1, 2, 1, 2), want=[1, 2, 3, 4]),
    K("In3D_SmallBegin", (2, 3, 2), _seq(12), [0], [1], [1], want_shape=(1, 3, 2), want=_seq(6)),
    K("In3D_SmallBeginWithhrinkAxis1", (2, 3, 2), _seq(12), [0], [1], [1], sam=1, want_shape=(3, 2), want=_seq(6)),
    K("In3D_BackwardSmallBeginEndMask", (1, 1, 2), _seq(2), [1], [0], [1], em=1, want_shape=(0, 1, 2),
      expect="shape"),
    K("In3D_BackwardSmallBegin", (1, 1, 2), _seq(2), [1], [0], [1], want_shape=(0, 1, 2), expect="shape"),
    K("In3D_Backward", (1, 1, 2), _seq(2), [1, 0, 0], [0, -1, -1], [1, 1, 1], bm=6, em=7, want_shape=(0, 1, 2),
      expect="shape"),
    K("In1D_String_NegativeBegin", (4,), "1 2 3 4", [-3], [3], [1], want_shape=(2,), want="2 3", runtime=(ALL3,)),
    K("In3D_String_BackwardSmallBegin", (1, 1, 2), "1 2", [1], [0], [1], em=1, want_shape=(0, 1, 2),
      expect="shape", runtime=(ALL3,)),
    K("In3D_String_SmallBeginWithhrinkAxis1", (2, 3, 2), " ".join(map(str, _seq(12))), [0], [1], [1], sam=1,
      want_shape=(3, 2), want="1 2 3 4 5 6", runtime=(ALL3,)),
    K("In5D_String_IdentityShrinkAxis1", (2, 2, 2, 1, 2), " ".join(map(str, _seq(16))), [0] * 5, [2, 1, 2, 1, 2],
      [1] * 5, sam=1, want_shape=(1, 2, 1, 2), want="1 2 3 4", runtime=(ALL3,)),
    K("In2D_ShrinkAxis_Endmask_AtSameAxis", (2, 2), _seq(4, 0), [0, -1], [0, 0], [1, -1], bm=1, em=1, sam=1,
      want_shape=(1,), want=[1]),
    K("EllipsisMask1_NewAxisMask2", (2, 3, 2), _seq(12), [0, 0, 0], [1, 2, 1], [1, 1, 1], elm=1, nam=2,
      want_shape=(2, 3, 1, 1), want=[1, 3, 5, 7, 9, 11]),
    K("EllipsisMask2_NewAxisMask1", (2, 3, 2), _seq(12), [0, 0, 0], [1, 2, 1], [1, 1, 1], elm=2, nam=1,
      want_shape=(1, 2, 3, 1), want=[1, 3, 5, 7, 9, 11]),
    K("EllipsisMask2_NewAxisMask5", (2, 3, 2), _seq(12), [0, 0, 0], [1, 2, 1], [1, 1, 1], elm=2, nam=5,
      want_shape=(1, 2, 3, 2, 1), want=_seq(12)),
    K("EllipsisMask2_NewAxisMask2", (2, 3, 2), _seq(12), [0, 0, 0], [1, 2, 1], [1, 1, 1], elm=2, nam=2,
      want_shape=(1, 3, 1), want=[1, 3, 5]),
    K("EllipsisMask4_NewAxisMask2", (2, 3, 2), _seq(12), [0, 0, 0], [1, 2, 1], [1, 1, 1], elm=4, nam=2,
      want_shape=(1, 1, 3, 2), want=_seq(6)),
    K("EllipsisMask2", (2, 3, 2), _seq(12), [0, 0, 0], [1, 2, 1], [1, 1, 1], elm=2, want_shape=(1, 3, 1),
      want=[1, 3, 5]),
    K("NewAxisMask2", (2, 3, 2), _seq(12), [0, 0, 0], [1, 3, 1], [1, 1, 1], nam=2, want_shape=(1, 1, 1, 2),
      want=[1, 2]),
    K("NewAxisMask1", (2, 3, 2), _seq(12), [0, 0, 0], [1, 3, 1], [1, 1, 1], nam=1, want_shape=(1, 2, 1, 2),
      want=[1, 2, 7, 8]),
    K("NoInfiniteLoop", (1, 1), [0], [1] * 6, [3] * 6, [1] * 6, bm=1, em=2, elm=1, nam=6, expect="ok"),
    K("MinusThreeMinusFourMinusOne", (4,), _seq(4), [-3], [-4], [-1], want_shape=(1,), want=[2]),
    K("MinusFourMinusThreeOne", (4,), _seq(4), [-4], [-3], [1], want_shape=(1,), want=[1]),
    K("OneOneOne", (1,), [2], [1], [1], [1], want_shape=(0,), expect="shape"),
    K("OneOneOneShrinkAxis", (3,), _seq(3), [1], [1], [1], sam=1, want_shape=(), want=[2]),
    K("OneOneOneShrinkAxisOOB", (1,), [2], [1], [1], [1], sam=1, want_shape=(), expect="undefined"),
    K("OutOfBounds", (1,), [0], [1], [2], [1], sam=1, want_shape=(), expect="undefined"),
    K("StrideOutOfBounds", (1,), [0], [1], [4], [7], sam=1, want_shape=(), expect="undefined"),
    K("NegEndMask", (2, 3), _seq(6), [0, -1], [2, -3], [1, -1], em=2, want_shape=(2, 3), want=[3, 2, 1, 6, 5, 4]),
    K("StrideOverflowAndEdgeCases", (1,), [1], [0], [2 ** 31 - 1], [126322568], offset=True, want_shape=(17,),
      runtime=(("begin",),), expect="undefined"),
    K("StrideOverflowAndEdgeCases_2", (1,), [1], [0], [I32_MIN], [-1000000000], offset=True, want_shape=(3,),
      runtime=(("begin",),), expect="undefined"),
    K("OutputDimOverflowCheck", (4,), _seq(4), [1], [3], [I32_MIN], runtime=(ALL3,), expect="older"),
    K("OutputDimOverflowCheck_2", (4,), _seq(4), [1], [3], [I32_MIN], runtime=((),), expect="older"),
    K("OutputDimOverflowCheck_3", (4,), _seq(4), [0], [I32_MIN], [-1], offset=True, runtime=(("begin",),),
      expect="error"),
    K("NoopOffset", (2, 3), _seq(6), [0, -1], [2, -3], [1, -1], em=2, offset=True, want_shape=(2, 3),
      want=[3, 2, 1, 6, 5, 4], runtime=(("begin",),)),
]
#: The file's typed tests run on float, half, bfloat16, uint8, uint32, int8, int16, int32;
#: bfloat16 is left out (numpy has no bfloat16 and TF 2.21's interpreter takes none from it).
KERNEL_DTYPES = ["float32", "float16", "uint8", "uint32", "int8", "int16", "int32"]


def _kernel_arrays(case: K, dtype: str):
    """(input, expected or None) in ``dtype`` (``static_cast`` as the file's CastVector does;
    the string tests' values are the decimal strings)."""
    if isinstance(case.values, str):
        x = np.array(case.values.split(), dtype=object).astype(bytes).astype(object).reshape(case.shape)
        want = None if case.want is None else np.array(case.want.split(), dtype=object).astype(bytes).astype(object)
    else:
        x = np.array(case.values, np.int64).astype(dtype).reshape(case.shape)
        want = None if case.want is None else np.array(case.want, np.int64).astype(dtype)
    if want is not None and case.want_shape is not None:
        want = want.reshape(case.want_shape)
    return x, want


def _kernel_spec(case: K):
    return from_tflite(case.b, case.e, case.s, begin_mask=case.bm, end_mask=case.em, ellipsis_mask=case.elm,
                       new_axis_mask=case.nam, shrink_axis_mask=case.sam, offset=case.offset)


def _same(got: np.ndarray, want: np.ndarray, want_shape) -> bool:
    if want_shape is not None and tuple(got.shape) != tuple(want_shape):
        return False
    if want is None:
        return True
    if want.dtype == object:
        return got.dtype == object and got.reshape(-1).tolist() == want.reshape(-1).tolist()
    return got.dtype == want.dtype and got.tobytes() == want.reshape(got.shape).tobytes()


def _tflite_onnx_model(x_shape, spec, opset=17, runtime=(), elem=TensorProto.FLOAT):
    """A one-node ONNX model in the TFLite node form (INT masks plus an ``offset`` attribute);
    the index fields in ``runtime`` are int32 graph inputs ``b``/``e``/``s``."""
    fields = (("b", "begin"), ("e", "end"), ("s", "strides"))
    inits = [helper.make_tensor(n, TensorProto.INT32, [spec.n], list(getattr(spec, f)))
             for n, f in fields if f not in runtime]
    attrs = {m: getattr(spec, m) for m in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask",
                                           "shrink_axis_mask")}
    node = helper.make_node("StridedSlice", ["x", "b", "e", "s"], ["y"], name="tfl_slice", domain=TF_DOMAIN,
                            offset=int(spec.offset), **attrs)
    inputs = [helper.make_tensor_value_info("x", elem, list(x_shape))] + [
        helper.make_tensor_value_info(n, TensorProto.INT32, [spec.n]) for n, f in fields if f in runtime]
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", elem, None)],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid(TF_DOMAIN, 1)])
    model.ir_version = 8
    return model


def _run_onnx(x: np.ndarray, spec, runtime=()) -> np.ndarray:
    """``spec`` in the TFLite node form through ``convert`` (verified) and onnxruntime."""
    strings = x.dtype == object
    model = _tflite_onnx_model(x.shape, spec, runtime=runtime, elem=TensorProto.STRING if strings else
                               helper.np_dtype_to_tensor_dtype(x.dtype))
    # strings: checked and run on onnx's reference evaluator (onnxruntime 1.31's Gather of
    # strings is wrong: test_onnxruntime_gather_of_strings_is_wrong)
    result = convert(model, verify_on=["reference"] if strings else None)
    run = result.report.model_checks.get("model_run", "")
    if strings and runtime and "string values differ" in run:
        pass  # the in-place run is onnxruntime's, whose Gather of strings is wrong: it says so
    else:
        assert result.ok, result.report.to_dict()["rewrites"]
    assert not any(n.op_type == "StridedSlice" for n in result.model.graph.node)
    feeds = {"x": x.astype(str).astype(object) if strings else x}
    feeds.update({f[0]: np.array(getattr(spec, f), np.int32) for f in runtime})
    if not strings:
        return make_session(result.model.SerializeToString()).run(None, feeds)[0]
    from onnx.reference import ReferenceEvaluator
    (got,) = ReferenceEvaluator(result.model).run(None, feeds)
    return np.vectorize(str.encode, otypes=[object])(got) if got.size else got.astype(object)


@pytest.mark.parametrize("case", KERNEL_CASES, ids=[c.name for c in KERNEL_CASES])
def test_tflite_kernel_cases(case, isolated):
    """Each case of LiteRT's kernel test file, with the file's expectations: LiteRT's
    interpreter on every dtype and index-tensor variant the file runs, our reference on every
    dtype, and our ONNX lowering (float32 or strings) on every variant."""
    spec = _kernel_spec(case)
    dtypes = ["object"] if isinstance(case.values, str) else KERNEL_DTYPES
    runs = [(*_kernel_arrays(case, d), rt) for d in dtypes for rt in case.runtime]
    outs = isolated.many([(x, spec, rt) for x, _, rt in runs])
    for (x, want, rt), out in zip(runs, outs):
        where = f"{x.dtype} runtime={rt}: {out.error or out.shape}"
        if case.expect == "error":
            assert not out.ok, where
        elif case.expect == "older":
            assert not out.ok and "INT32_MIN" in out.error, where
        else:
            assert out.ok, where
            if case.expect in ("values", "shape"):
                assert _same(out.values, want, case.want_shape), where
            elif case.expect == "undefined":  # the file checks the shape only: the values are garbage
                assert out.values.shape == case.want_shape, where
    defined = case.expect in ("values", "shape", "ok")
    for k, d in enumerate(dtypes):
        x, want = _kernel_arrays(case, d)
        if not defined:
            reason = {"undefined": "undefined", "error": "undefined", "older": "INT32_MIN"}
            with pytest.raises(StridedSliceError, match=reason[case.expect]):
                slice_array(spec, x)
            continue
        ours = slice_array(spec, x)
        if case.expect == "ok":  # nothing written in the file but "Invoke succeeds": the interpreter's output
            want = outs[k * len(case.runtime)].values
        assert _same(ours, want, case.want_shape), d
    x, want = _kernel_arrays(case, dtypes[0])
    for rt in case.runtime if defined else [rt for rt in case.runtime if not rt]:
        if not defined:  # constant indices: convert refuses it, naming why
            result = convert(_tflite_onnx_model(x.shape, spec))
            assert not result.ok and result.report.records[0].error
            continue
        if case.expect == "ok":
            want = slice_array(spec, x)
        assert _same(_run_onnx(x, spec, rt), want, case.want_shape), rt


def test_onnxruntime_gather_of_strings_is_wrong():
    """onnxruntime 1.31: Gather on a string tensor copies the first string of each block and
    leaves the rest empty (onnx's reference evaluator is right).  Run-time shrinks lower to
    Gather, so string slices with run-time indices fail our onnxruntime check; the kernel
    cases check them on the reference evaluator.  When this test fails, onnxruntime is fixed."""
    from onnx.reference import ReferenceEvaluator
    graph = helper.make_graph([helper.make_node("Gather", ["x", "i"], ["y"], axis=0)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.STRING, [2, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.STRING, None)],
                              initializer=[helper.make_tensor("i", TensorProto.INT64, [], [0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    x = np.array([["a", "b"], ["c", "d"]], dtype=object)
    assert ReferenceEvaluator(model).run(None, {"x": x})[0].tolist() == ["a", "b"]
    assert make_session(model.SerializeToString()).run(None, {"x": x})[0].tolist() == ["a", ""]


def test_kernel_cases_cover_the_whole_file():
    """Every test of the file is transcribed (85 at f674577; the _2/_3 rows are a test's
    further sub-cases)."""
    names = {c.name.split("_2")[0].split("_3")[0] if c.name.startswith(("StrideOverflow", "OutputDim"))
             else c.name for c in KERNEL_CASES}
    assert len(names) == 85 and len(KERNEL_CASES) == 88


def test_begin_mask_on_shrink_differs_from_tensorflow():
    """TFLite honours begin_mask on a shrink index; TensorFlow ignores it."""
    x = np.array([1, 2, 3, 4], np.float32)
    masks = dict(begin_mask=1, shrink_axis_mask=1)
    assert tf_strided_slice(x, from_tf([1], [2], [1], **masks)).values == 2
    assert strided_slice(x, [1], [2], [1], flavor="tf", **masks) == 2
    assert tflite_strided_slice(x, from_tflite([1], [2], [1], **masks)).values == 1
    assert strided_slice(x, [1], [2], [1], flavor="tflite", **masks) == 1


def test_zero_width_ellipsis_eats_a_dim_in_tflite():
    """``x[..., 0:2]`` on rank 1: TF slices (2 elements); TFLite's ellipsis covers the dim
    and drops the range (all 4)."""
    x = np.array([1, 2, 3, 4], np.float32)
    tf_out = strided_slice(x, [0, 0], [0, 2], [1, 1], ellipsis_mask=1)
    assert tf_out.tolist() == [1, 2]
    spec = from_tflite([0, 0], [0, 2], [1, 1], ellipsis_mask=1)
    assert slice_array(spec, x).tolist() == [1, 2, 3, 4]
    assert tflite_strided_slice(x, spec).values.tolist() == [1, 2, 3, 4]


def test_shrink_below_minus_dim_takes_element_zero():
    x = np.array([1, 2, 3, 4], np.float32)
    spec = from_tflite([-10], [0], [1], shrink_axis_mask=1)
    assert slice_array(spec, x) == 1 == tflite_strided_slice(x, spec).values
    with pytest.raises(StridedSliceError, match="out of bounds"):
        strided_slice(x, [-10], [0], [1], shrink_axis_mask=1)  # TF rejects it


@pytest.mark.parametrize("b, e, s, masks, offset, field", [
    ([4], [5], [1], dict(shrink_axis_mask=1), False, "begin"),        # shrink index past the dim
    ([1], [2], [-1], dict(shrink_axis_mask=1), False, "strides"),     # shrink with a negative stride
    ([1], [2], [1], dict(end_mask=1), True, "end"),                   # offset with end_mask
    ([1], [10], [1], {}, True, "end"),                                # offset past the dim
])
def test_undefined_specs_are_rejected(b, e, s, masks, offset, field):
    x = np.array([1, 2, 3, 4], np.float32)
    with pytest.raises(StridedSliceError, match="undefined") as info:
        slice_array(from_tflite(b, e, s, offset=offset, **masks), x)
    assert info.value.field == field


def test_int32_min_stride_rejected_as_litert_does():
    """LiteRT rejects an INT32_MIN stride (TF 2.21's deprecated tf.lite interpreter returned empty)."""
    x = np.array([1, 2, 3, 4], np.float32)
    spec = from_tflite([0], [2], [-(2 ** 31)])
    with pytest.raises(StridedSliceError, match="INT32_MIN"):
        slice_array(spec, x)
    theirs = tflite_strided_slice(x, spec)
    assert not theirs.ok and "INT32_MIN" in theirs.error, theirs


def test_values_outside_int32_are_rejected():
    with pytest.raises(StridedSliceError, match="int32") as info:
        from_tflite([2 ** 31], [0], [1])
    assert info.value.field == "begin"


@pytest.mark.parametrize("shape, spec", [
    ((1, 1, 1, 1, 1), from_tflite([0], [0], [1], new_axis_mask=1)),                # 6 dims with a new axis
    ((2, 3, 1, 2, 2, 3), from_tflite([1, 0, 0, 0, 0, -1], [2, 3, 1, 2, 2, 0], [1, 2, 1, 1, 1, -1],
                                     shrink_axis_mask=1)),                        # 6-D input
    ((2, 1, 2, 1, 2, 1, 2), from_tflite([0, 0], [2, 1], [1, 1], ellipsis_mask=2)),  # 7-D input
])
def test_more_than_five_dims_work_as_in_litert(shape, spec):
    """LiteRT (TFLite's maintained runtime; its kernel tests run 6-D input) takes more than 5
    dims; the deprecated tf.lite.Interpreter of TF 2.21 refused them.  The flavour follows LiteRT."""
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    theirs = tflite_strided_slice(x, spec)
    assert theirs.ok, theirs.error
    ours = slice_array(spec, x)
    assert ours.shape == theirs.shape and ours.tobytes() == theirs.values.tobytes()


@pytest.fixture(scope="module")
def isolated():
    oracle = IsolatedTFLite()
    yield oracle
    oracle.close()


seen = {"compared": 0, "undefined": 0, "rejected": 0}


@settings(max_examples=300)
@given(st.data())
def test_tflite_matches_interpreter(isolated, data):
    """Random specs (ranks 0-5, offset in 30%): our outcome equals the interpreter's exactly.
    Specs we reject as undefined are not run (the interpreter may crash on them); the script
    scripts/differential.py --flavor tflite runs them too."""
    x, spec = random_case(HypothesisSource(data), "tflite")
    ours = our_outcome(x, spec)
    if not ours.ok and "undefined" in ours.error:
        seen["undefined"] += 1
        return
    theirs = isolated(x, spec)
    seen["compared" if theirs.ok else "rejected"] += 1
    problem = compare_tflite(ours, theirs)
    assert problem is None, f"shape={x.shape} dtype={x.dtype} {spec}: {problem}"


def test_tflite_corpus_covered_all_outcomes():
    if sum(seen.values()):
        assert seen["compared"] >= 40 and seen["undefined"] >= 20 and seen["rejected"] >= 5, seen


def test_compare_tflite_treats_a_crash_as_a_rejection_only():
    ok = Outcome(True, np.zeros(1, np.float32), (1,))
    crash = Outcome(False, error=CRASHED)
    assert compare_tflite(Outcome(False, error="x"), crash) is None
    assert compare_tflite(ok, crash) is not None


def test_onnx_node_form_detected_by_offset_attribute():
    """A StridedSlice node with an ``offset`` attribute is read as TFLite (here the TF reading
    would give 2, TFLite's gives 1)."""
    spec = from_tflite([1], [1], [1], begin_mask=1, shrink_axis_mask=1)
    result = convert(_tflite_onnx_model((4,), spec))
    assert result.ok and result.report.records[0].flavor == "tflite"
    (got,) = make_session(result.model.SerializeToString()).run(None, {"x": np.array([1, 2, 3, 4], np.float32)})
    assert got.shape == () and got == 1


def test_onnx_node_offset_must_be_int():
    model = _tflite_onnx_model((4,), from_tflite([1], [2], [1]))
    node = model.graph.node[0]
    for a in node.attribute:
        if a.name == "offset":
            a.CopyFrom(helper.make_attribute("offset", "yes"))
    result = convert(model)
    assert not result.ok
    assert "offset" in str(result.report.records[0].error)


@pytest.mark.parametrize("runtime_chance", [0.0, 0.6], ids=["constant", "runtime"])
def test_random_tflite_specs_lower_exactly(runtime_chance):
    """Random TFLite specs we accept (ranks 1-5, offset in 30%), as ONNX nodes in the TFLite form
    -- constant indices, or each of begin/end/strides a graph input with probability 0.6 --
    converted and run in onnxruntime: equal to our reference, which the corpus above ties to
    the interpreter."""
    import random

    from onnx_slice_tools.verification.oracles import RandomSource
    src = RandomSource(random.Random(f"tflite-lowering-{runtime_chance}"))
    done = 0
    while done < 50:
        x, spec = random_case(src, "tflite")
        if x.dtype != np.float32 or x.ndim == 0 or spec.n == 0:
            continue
        runtime = tuple(f for f in ALL3 if src.chance(runtime_chance))
        ours = our_outcome(x, spec, runtime)
        if not ours.ok:
            continue
        got = _run_onnx(x, spec, runtime)
        assert got.shape == ours.values.shape and got.tobytes() == ours.values.tobytes(), (spec, x.shape, runtime)
        done += 1


def test_runtime_begin_offset_matches_the_interpreter(isolated):
    """``offset`` with begin a graph input of the .tflite model (TFLite's Prepare sizes the output
    from end alone; Eval adds the run-time begin): random specs, the interpreter, our reference
    and our ONNX lowering with begin a graph input agree exactly wherever the result is defined;
    where TFLite's loop leaves the range its result is undefined and is not compared."""
    import random

    from onnx_slice_tools.verification.oracles import RandomSource
    src = RandomSource(random.Random("tflite-offset-runtime"))
    cases, seen = [], {"compared": 0, "undefined": 0}
    while len(cases) < 40:
        x, spec = random_case(src, "tflite")
        if x.dtype != np.float32 or x.ndim == 0 or spec.n == 0:
            continue
        spec = from_tflite(spec.begin, spec.end, spec.strides, offset=True,
                           **{m: getattr(spec, m) for m in MASK_NAMES})
        runtime = ("begin", "strides") if src.chance(0.3) else ("begin",)
        ours = our_outcome(x, spec, runtime)
        if not ours.ok:
            seen["undefined"] += "undefined" in ours.error
            continue
        cases.append((x, spec, runtime, ours))
    outs = isolated.many([(x, spec, rt) for x, spec, rt, _ in cases])
    for (x, spec, runtime, ours), theirs in zip(cases, outs):
        assert compare_tflite(ours, theirs) is None, (spec, x.shape, runtime)
        got = _run_onnx(x, spec, runtime)
        assert got.shape == ours.values.shape and got.tobytes() == ours.values.tobytes(), (spec, x.shape)
        seen["compared"] += 1
    assert seen["compared"] == 40 and seen["undefined"] >= 5, seen


def test_runtime_begin_offset_on_a_symbolic_dim():
    """The canonical indices read unknown dims from ``Shape``: one converted model, exact on
    several batch sizes and begins (the undefined ones -- loop off the range -- not compared)."""
    end, strides = [2, -2], [1, -1]
    result = convert(_tflite_onnx_model(("N", 5), from_tflite([1, 2], end, strides, offset=True),
                                        runtime=("begin",)))
    assert result.ok and "Shape(x)" in result.report.to_dict()["rewrites"][0]["emitted"]
    session = make_session(result.model.SerializeToString())
    compared = 0
    for n in (3, 4, 6):
        x = np.arange(n * 5, dtype=np.float32).reshape(n, 5)
        for b in ([1, 2], [0, 4], [n - 2, 3], [-1, 3]):
            ours = our_outcome(x, from_tflite(b, end, strides, offset=True))
            if ours.ok:
                (got,) = session.run(None, {"x": x, "b": np.array(b, np.int32)})
                assert got.shape == ours.values.shape and got.tobytes() == ours.values.tobytes(), (n, b)
                compared += 1
    assert compared == 9


def test_offset_with_runtime_end_and_constant_strides_is_refused():
    """TFLite sizes an offset slice's output in Prepare from the end tensor, before a run-time end
    holds its values (the interpreter then reads stale memory or crashes): refused as undefined."""
    from onnx_slice_tools.semantics.plan import make_plan
    spec = from_tflite([0], [2], [1], offset=True)
    with pytest.raises(StridedSliceError, match="undefined"):
        make_plan(from_tflite([0], None, [1], offset=True, runtime_length=1), (4,))
    result = convert(_tflite_onnx_model((4,), spec, runtime=("end",)))
    assert not result.ok and "undefined" in result.report.records[0].error


def test_runtime_begin_in_the_tflite_form():
    """begin computed at run time (a graph input): same values as the reference for each begin."""
    spec = from_tflite([0, 0], [2, 3], [1, 1], end_mask=2, shrink_axis_mask=1)
    model = _tflite_onnx_model((4, 5), spec)
    model.graph.initializer.remove(next(t for t in model.graph.initializer if t.name == "b"))
    model.graph.input.append(helper.make_tensor_value_info("b", TensorProto.INT32, [2]))
    result = convert(model)
    assert result.ok
    session = make_session(result.model.SerializeToString())
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    for b in ([0, 0], [3, 1], [-1, 2], [-4, -2]):
        want = slice_array(from_tflite(b, [2, 3], [1, 1], end_mask=2, shrink_axis_mask=1), x)
        (got,) = session.run(None, {"x": x, "b": np.array(b, np.int32)})
        assert got.shape == want.shape and got.tobytes() == want.tobytes(), b


def _chained_tflite_onnx_model():
    """``relu(x[:, 1:])[..., :2]`` as two StridedSlice custom nodes in the TFLite form, no shape
    declared after ``x`` (the graph output's dims unknown, no value_info): the second node's
    dense spec needs its input's rank, which only the first node's plan knows."""
    def node(name, x, y, b, e, **masks):
        return [helper.make_node("Constant", [], [f"{name}_{k}"], value=helper.make_tensor(
                    f"{name}_{k}", TensorProto.INT32, [len(v)], v)) for k, v in (("b", b), ("e", e), ("s", [1, 1]))] + [
                helper.make_node("StridedSlice", [x, f"{name}_b", f"{name}_e", f"{name}_s"], [y], name=name,
                                 domain=TF_DOMAIN, offset=0, **{m: masks.get(m, 0) for m in MASK_NAMES})]
    nodes = (node("s1", "x", "a", [0, 1], [0, 0], begin_mask=1, end_mask=3) + [helper.make_node("Relu", ["a"], ["r"])]
             + node("s2", "r", "y", [0, 0], [0, 2], ellipsis_mask=1, begin_mask=2))
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TF_DOMAIN, 1)])
    model.ir_version = 8
    return model


def test_chained_strided_slices_get_their_input_rank_from_the_planned_shapes():
    """Shape derivation continues past a StridedSlice custom node with its planned output shape:
    both rewrite paths lower the second slice of the chain (it needs the rank), and the result
    is the slices' data movement exactly."""
    import onnx_ir as ir

    from onnx_slice_tools.rewrite.ir_pass import StridedSliceRewritePass, derive_shapes
    model = _chained_tflite_onnx_model()
    shapes = derive_shapes(model)
    assert shapes["a"][1] == (2, 7, 6) and shapes["r"][1] == (2, 7, 6) and shapes["y"][1] == (2, 7, 2)
    assert derive_shapes(model, names={"r"}, has_subgraphs=False) == {"r": shapes["r"]}
    result = convert(model)  # the protobuf path
    assert result.ok and result.report.rewritten == 2, result.report.to_json()["rewrites"]
    x = np.random.default_rng(0).standard_normal((2, 8, 6)).astype(np.float32)
    (got,) = make_session(result.model.SerializeToString()).run(None, {"x": x})
    assert got.tobytes() == np.maximum(x[:, 1:], 0)[..., :2].tobytes()
    records = StridedSliceRewritePass(opset=17)(ir.from_proto(_chained_tflite_onnx_model())).records  # onnx-ir
    assert [r.error for r in records] == [None, None] and records[1].input_shape == (2, 7, 6)


def test_offset_ellipsis_negative_stride_empty_output_sized_from_end(isolated):
    """A drawn case: ``[..., 1:+1:-2]`` (begin_mask 6, end_mask 8, ellipsis at 0) with offset and
    end [3, 1].  TFLite sizes the ellipsis dim from end[0] = 3 (stride 1) and dim 1 to 0, so
    its output is empty, (3, 0), on any (d, 1) input.  On (3, 1) that is a slice: ours equals
    LiteRT, and the converted node is checked on (3, 1) only (the ellipsis dim's size comes
    from end, so it is not checked at other sizes).  On (2, 1) LiteRT's (3, 0) is defined but
    no slice of the input: refused as unsupported, not as undefined."""
    spec = from_tflite([1, 1], [3, 1], [-3, -2], begin_mask=6, end_mask=8, ellipsis_mask=1, offset=True)
    x3, x2 = _seq(3, 0), _seq(2, 0)
    x3 = np.array(x3, np.float32).reshape(3, 1)
    x2 = np.array(x2, np.float32).reshape(2, 1)
    theirs3, theirs2 = isolated.many([(x3, spec, ()), (x2, spec, ())])
    assert theirs3.ok and theirs3.shape == (3, 0) and theirs2.ok and theirs2.shape == (3, 0)
    assert compare_tflite(our_outcome(x3, spec), theirs3) is None
    assert our_outcome(x3, spec).shape == (3, 0)
    with pytest.raises(StridedSliceError, match="not expressible") as info:
        slice_array(spec, x2)
    assert info.value.unsupported and not info.value.undefined
    result = convert(_tflite_onnx_model((3, 1), spec))
    assert result.ok, result.report.to_dict()["rewrites"]
    check = result.report.check_of(0)  # (settled by the as-shipped run at (3, 1): verification/settled_checks.py)
    assert check.onnxruntime.startswith("passed") and check.tried_shapes == [(3, 1)], check
    check = verify_records(result.report.records, CheckRun(17))[1][0]  # the per-rewrite check itself: that size only
    assert check.onnxruntime == "passed" and check.tried_shapes == [(3, 1)], check
    refused = convert(_tflite_onnx_model((2, 1), spec)).report  # a failed rewrite, not unusable input
    assert not refused.ok and refused.records[0].error_kind == "unsupported" and not refused.invalid_records


def test_offset_ellipsis_negative_strides_family(isolated):
    """offset + ellipsis + negative strides on ranks 1-3 (begin/end small, masks random, one
    ellipsis bit anywhere in the spec): where ours accepts, it equals LiteRT exactly and the
    converted node gives the same bytes; where ours refuses as unsupported, LiteRT has a
    result; where ours says undefined, nothing is compared."""
    import random

    rng = random.Random("tflite-offset-ellipsis-negative")
    cases = []
    while len(cases) < 300:
        rank = rng.randint(1, 3)
        shape = tuple(rng.randint(0, 3) if rng.random() < 0.1 else rng.randint(1, 3) for _ in range(rank))
        n = rng.randint(1, rank + 1)
        strides = [rng.choice([-1, -2, -3]) if rng.random() < 0.8 else rng.choice([1, 2]) for _ in range(n)]
        masks = {m: rng.randrange(1 << (n + 1)) if rng.random() < p else 0
                 for m, p in (("begin_mask", 0.4), ("end_mask", 0.1), ("new_axis_mask", 0.2),
                              ("shrink_axis_mask", 0.2))}
        # offset: end is a length, so mostly of the stride's sign (the others leave the loop off range)
        ends = [rng.randint(0, 3) * (-1 if (s < 0) == (rng.random() < 0.85) else 1) for s in strides]
        spec = from_tflite([rng.randint(-4, 4) for _ in range(n)], ends, strides,
                           ellipsis_mask=1 << rng.randrange(n), offset=True, **masks)
        x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
        cases.append((x, spec, our_outcome(x, spec)))
    theirs = isolated.many([(x, spec, ()) for x, spec, ours in cases if "undefined" not in (ours.error or "")])
    seen = {"equal": 0, "unsupported": 0, "undefined": 0, "both reject": 0}
    it = iter(theirs)
    for x, spec, ours in cases:
        if "undefined" in (ours.error or ""):
            seen["undefined"] += 1
            continue
        out = next(it)
        where = f"shape={x.shape} {spec}"
        if ours.ok:
            assert compare_tflite(ours, out) is None, where
            got = _run_onnx(x, spec)
            assert got.shape == ours.values.shape and got.tobytes() == ours.values.tobytes(), where
            seen["equal"] += 1
        elif "not expressible" in ours.error:
            assert out.ok, (where, out.error)
            seen["unsupported"] += 1
        else:
            assert compare_tflite(ours, out) is None, where
            seen["both reject"] += 1
    assert seen["equal"] >= 20 and seen["unsupported"] >= 20 and seen["undefined"] >= 50, seen


@pytest.mark.parametrize("target", ["onnxruntime", "portable", "openvino"])
def test_a_shrink_index_below_minus_dim_on_a_dynamic_dim_is_never_a_false_verified(target):
    """TFLite takes element 0 for a shrink index below -dim (TF raises): ``x[-6]`` on a
    dynamic ``[a, 4]``.  The per-rewrite checks try the sizes LiteRT accepts there (1, 3, ...),
    so a lowering that fails on them is not "verified"; every target's lowering clamps like
    LiteRT and is verified, its saved model agreeing with LiteRT in a default onnxruntime
    session."""
    node = helper.make_node("StridedSlice", ["x", "b", "e", "s"], ["y"], name="ss", domain=TF_DOMAIN,
                            begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=1, offset=0)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["a", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [helper.make_tensor(k, TensorProto.INT32, [1], [v]) for k, v in
                               (("b", -6), ("e", 0), ("s", 1))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TF_DOMAIN, 1)])
    model.ir_version = 8
    result = convert(model, target=target)
    assert result.report.verdict == "verified", result.report.verdict
    import onnxruntime as ort
    session = ort.InferenceSession(result.model.SerializeToString(), providers=["CPUExecutionProvider"])
    for rows in (1, 3, 7):
        x = np.arange(rows * 4, dtype=np.float32).reshape(rows, 4)
        want = tflite_strided_slice(x, from_tflite([-6], [0], [1], shrink_axis_mask=1))
        got = session.run(None, {"x": x})[0]
        assert want.ok and got.shape == want.values.shape and got.tobytes() == want.values.tobytes(), (rows, got)


@pytest.mark.parametrize("target", ["onnxruntime", "portable", "openvino"])
@pytest.mark.parametrize("spec", [
    from_tflite([2 ** 31 - 1, -6], [0, 3], [3, 2], begin_mask=6, end_mask=10, shrink_axis_mask=4, offset=True),
    from_tflite([1, 0], [2, 2], [1, 1], offset=True),
    from_tflite([-1, 0], [-2, 3], [-1, 1], offset=True),
])
def test_a_constant_offset_spec_on_dynamic_dims_converts_and_matches_litert(target, spec):
    """``offset`` with constant indices on an input of dims known only at run time: the sizes come
    from ``end``, the loop from the dims, so the lowering computes TFLite's indices in the graph
    (it was refused as needing known dims).  Verified on every target; the saved model, in a
    default onnxruntime session, equals LiteRT at every size where LiteRT's result is defined
    (a slice of the input or not: sized from end, as LiteRT)."""
    result = convert(_tflite_onnx_model(("a", "b"), spec), target=target)
    assert result.report.verdict == "verified", result.report.verdict
    import onnxruntime as ort
    session = ort.InferenceSession(result.model.SerializeToString(), providers=["CPUExecutionProvider"])
    compared = 0
    for dims in ((1, 1), (2, 3), (3, 3), (4, 2), (5, 5)):
        x = np.arange(int(np.prod(dims)), dtype=np.float32).reshape(dims)
        ours = our_outcome(x, spec)
        if not ours.ok and "undefined" in (ours.error or ""):  # LiteRT's output is whatever memory held
            continue
        want = tflite_strided_slice(x, spec)
        got = session.run(None, {"x": x})[0]
        assert want.ok and got.shape == want.values.shape and got.tobytes() == want.values.tobytes(), (dims, got)
        compared += 1
    assert compared >= 2
