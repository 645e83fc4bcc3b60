"""The peers' own StridedSlice tests (TensorFlow, XLA, tf2onnx, nGraph's TF bridge, OpenVINO),
run through everything.

Every case of tests/data/peer_cases.json (written by scripts/peer_cases.py, provenance in each
case) goes through:

* the framework's runtime (TF eager ``tf.strided_slice`` -- and TF's own ``Tensor.__getitem__``
  for index expressions -- or OpenVINO's shape inference + reference evaluator), which must
  agree with what the source test expects (shape, interval, values, error), except the
  differences listed in ``RUNTIME_DIFFERS`` (the runtime wins; docs/semantics.md);
* our reference (``strided_slice``), which must equal the runtime exactly: accept/reject,
  shape, dtype, bits;
* the lowered ONNX in onnxruntime: all accepted cases as StridedSlice nodes of one model,
  converted by ``convert`` with constant begin/end/strides and with them as graph inputs fed at
  run time, each on inputs declared static, all-symbolic and of unknown rank; every output must
  equal the runtime's.  Specs the runtime rejects are refused at conversion (constant indices);
  with runtime indices, refused at conversion when their structure is wrong and failing in
  onnxruntime when their values are;
* tf2onnx's own lowering, on the cases where it is wrong and ours is right.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnx_slice_tools import convert
from onnx_slice_tools.errors import StridedSliceError
from onnx_slice_tools.verification.oracles import Outcome, _int32, compare, our_outcome, run_oracle, tf_strided_slice
from onnx_slice_tools.rewrite.ir_pass import TF_DOMAIN
from onnx_slice_tools.semantics.spec import MASK_NAMES, OPENVINO
from onnx_slice_tools.verification.lowerings import make_session, ort_kernel_missing

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "peer_cases.json"
_spec = importlib.util.spec_from_file_location("peer_cases", ROOT / "scripts" / "peer_cases.py")
peer_cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(peer_cases)
CASES = json.loads(DATA.read_text())["cases"]
OV_DOMAIN = "org.openvinotoolkit"

#: Cases whose source test expects something the runtime does not do (the runtime wins).
RUNTIME_DIFFERS: dict[str, str] = {}


def _tf_getitem(x: np.ndarray, case):
    """TensorFlow's own ``Tensor.__getitem__`` (its encoding of the expression), or its error."""
    import tensorflow as tf
    try:
        return np.asarray(tf.constant(x)[tuple(peer_cases.index_items(case))].numpy())
    except (tf.errors.InvalidArgumentError, ValueError) as exc:
        return exc


def _within(shape, interval) -> bool:
    if len(shape) != len(interval):
        return False
    for d, want in zip(shape, interval):
        if want is None:
            continue
        lo, hi = (want, want) if isinstance(want, int) else want
        if not lo <= d <= hi:
            return False
    return True


def _expectation_problem(case, theirs) -> str | None:
    """How the runtime's outcome differs from what the source test expects (None: it agrees)."""
    if "expected_error" in case:
        if theirs.ok:
            return f"the test expects an error ({case['expected_error']}), the runtime gives {theirs.shape}"
        return None
    if not theirs.ok:
        return f"the test expects a result, the runtime rejects: {theirs.error}"
    shape = tuple(theirs.shape)
    if "expected_shape" in case and shape != tuple(case["expected_shape"]):
        return f"shape {shape}, the test expects {tuple(case['expected_shape'])}"
    if "shape_inference" in case and not _within(shape, case["shape_inference"]):
        return f"shape {shape} outside the test's inferred shape {case['shape_inference']}"
    if case.get("interval") and not _within(shape, case["interval"]):
        return f"shape {shape} outside the test's interval {case['interval']}"
    if "expected_values" in case and theirs.values is not None:
        got = theirs.values.astype(np.int64).ravel().tolist()
        if got != case["expected_values"]:
            return f"values {got[:8]}..., the test expects {case['expected_values'][:8]}..."
    return None


@pytest.fixture(scope="module")
def outcomes():
    """(case, input, spec, runtime outcome, our outcome) for every case, the oracles run once."""
    rows = []
    for case in CASES:
        x = peer_cases.make_input(case["input"], case["dtype"])
        try:
            spec = peer_cases.spec_of(case)
        except StridedSliceError as exc:  # not even a spec (an OpenVINO mask value of 2)
            rows.append((case, x, None, _openvino_raw(x, case), Outcome(False, error=str(exc))))
            continue
        rows.append((case, x, spec, run_oracle(x, spec), our_outcome(x, spec)))
    return rows


def _openvino_raw(x: np.ndarray, case) -> Outcome:
    """OpenVINO's shape inference on the case's raw mask lists (values our spec type cannot hold)."""
    import openvino as ov
    import openvino.opset1 as ops
    try:
        node = ops.strided_slice(ops.parameter(list(x.shape), ov.Type(x.dtype)), np.array(case["begin"]),
                                 np.array(case["end"]), np.ones(len(case["begin"]), np.int64), **case["masks"])
    except Exception as exc:
        return Outcome(False, error=str(exc).strip().splitlines()[0])
    return Outcome(True, shape=tuple(node.get_output_partial_shape(0).to_shape()))


def test_case_counts():
    """Hundreds of cases, from each peer, accepted and rejected ones."""
    by_source: dict = {}
    for c in CASES:
        by_source[c["source"]] = by_source.get(c["source"], 0) + 1
    assert sum(by_source.values()) >= 400 and set(by_source) >= {"tensorflow", "tf2onnx", "openvino"}, by_source
    assert sum("expected_error" in c for c in CASES) >= 10


def test_runtimes_do_what_the_peer_tests_expect(outcomes):
    """The real runtime agrees with each source test, except the recorded differences."""
    problems, seen = [], set()
    for case, _, _, theirs, _ in outcomes:
        problem = _expectation_problem(case, theirs)
        if case["id"] in RUNTIME_DIFFERS:
            seen.add(case["id"])
            assert problem, f"{case['id']}: recorded as differing, but the runtime does what the test expects"
        elif problem:
            problems.append(f"{case['id']}: {problem}")
    assert not problems, "\n".join(problems)
    assert seen == set(RUNTIME_DIFFERS)


def test_reference_matches_the_runtime(outcomes):
    """Our reference equals the runtime on every case: accept/reject, shape, dtype, bits."""
    problems = []
    for case, x, spec, theirs, ours in outcomes:
        problem = compare(ours, theirs)
        if problem:
            problems.append(f"{case['id']} {spec.index_notation() if spec else case['masks']}: {problem}")
    assert not problems, "\n".join(problems)


def test_index_expressions_encode_as_tensorflow_does(outcomes):
    """For the tests written as ``x[...]``: TensorFlow's own ``__getitem__`` gives what our
    encoding of the expression gives through ``tf.strided_slice`` (and our reference)."""
    problems = []
    for case, x, spec, theirs, ours in outcomes:
        if case["flavor"] != "tf" or "expr" not in case:
            continue
        got = _tf_getitem(x, case)
        if isinstance(got, Exception):
            if theirs.ok:
                problems.append(f"{case['id']}: __getitem__ raised {got}, tf.strided_slice accepted")
        elif not theirs.ok or got.shape != theirs.values.shape or got.tobytes() != theirs.values.tobytes():
            problems.append(f"{case['id']}: __getitem__ {got.shape}, tf.strided_slice {theirs.shape or theirs.error}")
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------- lowered ONNX

def _ort_runs(x: np.ndarray) -> bool:
    """onnxruntime has Slice/Gather/Squeeze/Unsqueeze/Reshape kernels for the element type
    (complex64 has none: those cases are checked against the runtime by the reference only)."""
    return not any(ort_kernel_missing(op, helper.np_dtype_to_tensor_dtype(x.dtype), 17)
                   for op in ("Slice", "Gather", "Squeeze", "Unsqueeze", "Reshape"))


def _index_type(case, spec):
    """The begin/end/strides element type the source used (int16 and int64 where it says so;
    int64 for OpenVINO and values outside int32; TF's default int32 otherwise)."""
    if spec is None or case.get("index_dtype") == "int64" or case["flavor"] == OPENVINO:
        return TensorProto.INT64, np.int64
    if any(not -(2 ** 31) <= v < 2 ** 31 for v in spec.begin + spec.end + spec.strides):
        return TensorProto.INT64, np.int64
    if case.get("index_dtype") == "int16":
        return TensorProto.INT16, np.int16
    return TensorProto.INT32, np.int32


def _declared_shape(case, x, dims: str = "declared"):
    """The input shape declared in the model: as the case says (static, some dims symbolic or
    unknown rank), every dim symbolic, or unknown rank."""
    if case.get("unknown_rank") or dims == "unknown rank":
        return None
    symbolic = set(range(x.ndim)) if dims == "symbolic" else set(case.get("symbolic_dims", ()))
    return [f"d{k}" if k in symbolic else d for k, d in enumerate(x.shape)]


def peer_model(rows, runtime: bool, dims: str = "declared"):
    """One model with a StridedSlice node per case (inputs ``x<i>``, ``b<i>``/``e<i>``/``s<i>`` when
    ``runtime``, output ``y<i>``; ``dims``: see _declared_shape) and the feeds that run it."""
    nodes, inputs, outputs, inits, feeds = [], [], [], [], {}
    for i, (case, x, spec) in enumerate(rows):
        elem, idx = helper.np_dtype_to_tensor_dtype(x.dtype), _index_type(case, spec)
        vectors = (spec.begin, spec.end, spec.strides) if spec else (case["begin"], case["end"], case["strides"])
        inputs.append(helper.make_tensor_value_info(f"x{i}", elem, _declared_shape(case, x, dims)))
        feeds[f"x{i}"] = x
        names = []
        for field, vals in zip(("begin", "end", "strides"), vectors):
            if field == "strides" and case["flavor"] == OPENVINO and case.get("strides") is None:
                continue  # OpenVINO's optional 4th input left out, as the source test does
            name = f"{field[0]}{i}"
            names.append(name)
            if runtime:
                inputs.append(helper.make_tensor_value_info(name, idx[0], [len(vals)]))
                feeds[name] = np.array(vals, dtype=idx[1])
            else:
                inits.append(helper.make_tensor(name, idx[0], [len(vals)], list(vals)))
        if case["flavor"] == OPENVINO:
            attrs = {}
            for m in MASK_NAMES:
                bits = case["masks"][m]
                attrs[m] = helper.make_attribute(m, bits, attr_type=onnx.AttributeProto.INTS) if bits else \
                    helper.make_attribute(m, "")
            node = helper.make_node("StridedSlice", [f"x{i}", *names], [f"y{i}"], name=f"ss{i}", domain=OV_DOMAIN)
            node.attribute.extend(attrs.values())
        else:
            node = helper.make_node("StridedSlice", [f"x{i}", *names], [f"y{i}"], name=f"ss{i}", domain=TF_DOMAIN,
                                    **{m: _int32(getattr(spec, m)) for m in MASK_NAMES})
        nodes.append(node)
        outputs.append(helper.make_tensor_value_info(f"y{i}", elem, None))
    graph = helper.make_graph(nodes, "peer_cases", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TF_DOMAIN, 1),
                                                    helper.make_opsetid(OV_DOMAIN, 1)])
    model.ir_version = 8
    return model, feeds


@pytest.mark.parametrize("runtime, dims", [(False, "declared"), (True, "declared"), (False, "symbolic"),
                                           (True, "symbolic"), (False, "unknown rank"), (True, "unknown rank")])
def test_lowered_onnx_matches_the_runtime(outcomes, runtime, dims):
    """All accepted cases in one converted model: onnxruntime's outputs equal the framework's,
    with constant or runtime begin/end/strides, on inputs declared with their shape, with every
    dim symbolic, or of unknown rank.  Cases that repeat another's spec, input and element type
    (the sources loop over element types and input sizes) are lowered once.  The cleanup passes
    run on the declared shapes (they only fold what is static)."""
    rows, seen = [], set()
    for c, x, s, theirs, _ in outcomes:
        key = (s, x.shape, x.dtype, tuple(c.get("symbolic_dims", ())), c.get("unknown_rank"), c.get("strides") is None)
        if theirs.ok and _ort_runs(x) and key not in seen:
            seen.add(key)
            rows.append((c, x, s))
    assert len(rows) >= 400
    model, feeds = peer_model(rows, runtime, dims)
    result = convert(model, verify=False, cleanup=dims == "declared")
    errors = [f"{r.node}: {r.error}" for r in result.report.records if r.error]
    assert not errors, "\n".join(errors)
    assert not any(n.op_type == "StridedSlice" for n in result.model.graph.node)
    session = make_session(result.model.SerializeToString())
    got = session.run(None, feeds)
    names = [o.name for o in session.get_outputs()]
    by_name = dict(zip(names, got))
    problems = []
    for i, (case, x, spec) in enumerate(rows):
        theirs = next(t for c, _, _, t, _ in outcomes if c is case)
        y = by_name[f"y{i}"]
        if tuple(y.shape) != tuple(theirs.shape) or y.dtype != x.dtype:
            problems.append(f"{case['id']}: onnxruntime {y.dtype}{y.shape}, runtime {theirs.shape}")
        elif theirs.values is not None and y.tobytes() != theirs.values.tobytes():
            problems.append(f"{case['id']}: values differ")
    assert not problems, "\n".join(problems)


#: TensorFlow's errors about index *values*: with runtime begin/end/strides the lowered graph must
#: fail in onnxruntime (conversion cannot know them); every other rejection is about the structure.
VALUE_ERRORS = ("out of bounds", "must be non-zero", "only stride 1 allowed")


def test_rejected_specs_are_rejected_at_conversion_or_fail_at_run_time(outcomes):
    """A spec the framework rejects: refused by convert with constant indices.  With runtime
    indices: refused by convert when the structure is what is wrong (masks, scalar input,
    lengths), converted and then failing in onnxruntime when the values are."""
    rows = [(c, x, s, theirs) for c, x, s, theirs, _ in outcomes if not theirs.ok]
    assert len(rows) >= 10
    model, _ = peer_model([r[:3] for r in rows], runtime=False)
    result = convert(model, verify=False)
    refused = {r.node for r in result.report.records if r.error and r.error_kind == "invalid"}
    assert refused == {f"ss{i}" for i in range(len(rows))}, refused
    by_values = 0
    for case, x, spec, theirs in rows:
        model, feeds = peer_model([(case, x, spec)], runtime=True)
        result = convert(model, verify=False)
        record = result.report.records[0]
        if not any(w in theirs.error for w in VALUE_ERRORS):
            assert record.error and record.error_kind == "invalid", (case["id"], theirs.error)
            continue
        by_values += 1
        assert not record.error, (case["id"], record.error)
        session = make_session(result.model.SerializeToString())
        try:
            session.run(None, feeds)
        except Exception:  # onnxruntime's own error types
            continue
        pytest.fail(f"{case['id']}: onnxruntime accepted runtime values the framework rejects")
    assert by_values >= 5


def test_tf_index_dtypes_do_not_change_the_result(outcomes):
    """Cases the source runs with int64 (or int16) indices give TensorFlow's int32 result."""
    for case, x, spec, theirs, _ in outcomes:
        if case["flavor"] == "tf" and case.get("index_dtype") == "int64" and theirs.ok:
            wide = tf_strided_slice(x, spec, index_dtype=np.int64)
            assert compare(wide, theirs) is None, case["id"]


# --------------------------------------------------------------------------- tf2onnx's own lowering

#: Peer cases on which tf2onnx 1.17's native lowering (StridedSlice not kept) gives TensorFlow's
#: result wrongly (shape or values), with constant and with runtime begin/end/strides; ours is
#: right on all of them (the tests above).  ``scripts/peer_cases.py --tf2onnx`` finds them all.
TF2ONNX_WRONG = {
    False: ["tensorflow/StridedSliceTest.testDegenerateSlices/1",       # x[-1:0, :, :]: 1 row, TF 0
            "tensorflow/ValidateStridedSliceOpTest.BasicStride/0",      # x[1::2, :7:2]: (5, 3), TF (5, 4)
            "tensorflow/StridedSliceTest.test2DDegenerate/0"],          # x[-1:0, 0:3]: (1, 3), TF (0, 3)
    True: ["tensorflow/SliceAssignTest.testTensorStridedSliceUpdateGrad/1",  # x[:3], begin 5 masked: 0 elements
           "tensorflow/ValidateStridedSliceOpTest.BasicStride/0",
           "tf2onnx/test_strided_slice7/0",                              # its own test, begin at run time
           "tf2onnx/test_strided_slice7/3",
           "openvino/TestStridedSlice.basic/2"],
}
#: ...and on which the model it writes fails in onnxruntime (constant indices).
TF2ONNX_FAILS = ["tensorflow/SliceAssignTest.testTensorStridedSliceUpdateGrad/2",  # stride 0 on the ellipsis
                 "openvino/TestStridedSlice.basic/4"]                             # new_axis bit past len(begin)


def _rows(outcomes, ids):
    by_id = {c["id"]: (c, x, s, theirs) for c, x, s, theirs, _ in outcomes}
    return [by_id[i] for i in ids]


@pytest.mark.parametrize("runtime", [False, True], ids=["constant indices", "runtime indices"])
def test_tf2onnx_native_lowering_is_wrong_where_ours_is_right(outcomes, runtime):
    rows = _rows(outcomes, TF2ONNX_WRONG[runtime])
    model = peer_cases._tf2onnx_model([(c, x, s) for c, x, s, _ in rows], runtime)
    session = make_session(model.SerializeToString())
    got = session.run([o.name for o in session.get_outputs()],
                      peer_cases._tf2onnx_feeds([(c, x, s) for c, x, s, _ in rows], runtime))
    for (case, x, spec, theirs), y in zip(rows, got):
        assert theirs.ok and compare(our_outcome(x, spec), theirs) is None
        assert y.shape != theirs.values.shape or y.tobytes() != theirs.values.tobytes(), case["id"]


def test_tf2onnx_native_models_fail_in_onnxruntime_where_ours_run(outcomes):
    for case, x, spec, theirs in _rows(outcomes, TF2ONNX_FAILS):
        assert theirs.ok and compare(our_outcome(x, spec), theirs) is None
        with pytest.raises(Exception):  # tf2onnx's export names its own node failure, or onnxruntime raises
            model = peer_cases._tf2onnx_model([(case, x, spec)], runtime=False)
            make_session(model.SerializeToString()).run(None, {"x0": x})
