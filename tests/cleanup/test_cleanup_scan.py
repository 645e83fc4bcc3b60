"""The cleanup pre-check (cleanup.precheck.may_change): sound -- whenever it says no pass can change
a model, the full cleanup changes nothing at all; each pass's own condition (``may_fire``) is
sound for that pass alone -- each of its triggers needed, and convert gives the same report
and bytes with and without it."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from onnx_slice_tools.cleanup import passes as cleanup_module
from onnx_slice_tools import convert
from onnx_slice_tools.cleanup.passes import (CleanupPass, MergeSlicesPass, RemoveDeadPass, cleanup, default_passes,
                                             set_inferred_shapes)
from onnx_slice_tools.cleanup.precheck import FULL_CLEANUP_ENV, PASS_NAMES, may_change, unchanged_report
from onnx_slice_tools.cleanup.scan import MayChange, ProtoIndex
from onnx_slice_tools.graphs.table import NodeTable
from test_cleanup import _if_model, c, model, shape_graphs, shape_scalar_chain, x_input

ROOT = Path(__file__).resolve().parents[2]
F, I64, I32 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32


def out(name, elem=F):
    return helper.make_tensor_value_info(name, elem, None)


def full_cleanup(proto):
    """The real cleanup on ``proto``: (report, the model after it serialized); (None, None) when
    it raised (convert reports that as a failed cleanup: a change of verdict)."""
    m = ir.from_proto(proto)
    try:
        report = cleanup(m)
    except Exception:
        return None, None
    return report, ir.to_proto(m).SerializeToString()


def round_trip(proto) -> bytes:
    return ir.to_proto(ir.from_proto(proto)).SerializeToString()


def check_sound(proto):
    """may_change(proto), after asserting that when it is None the cleanup changes nothing: the
    same report as unchanged_report and the same bytes; and that the pre-check given the main
    graph's node table (graphs.table) answers the same."""
    reason = may_change(proto)
    assert may_change(proto, table=NodeTable(proto.graph)) == reason
    report, after = full_cleanup(proto)
    if reason is None:
        assert report == unchanged_report(proto)
        assert after == round_trip(proto)
    return reason, report, after


def converted(proto_or_path):
    return convert(proto_or_path, verify=False, cleanup=False).model


def synthetic(n, fan_out, symbolic=True):
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench import synthetic_model
    return synthetic_model(n, symbolic, fan_out=fan_out)


# --------------------------------------------------------------------------- clean outputs


@pytest.mark.parametrize("path", sorted(p.name for p in (ROOT / "models").glob("*.onnx")))
def test_converted_sample_models_are_known_clean(path):
    reason, report, _ = check_sound(converted(ROOT / "models" / path))
    assert reason is None and not report["changed"]


@pytest.mark.parametrize("symbolic", [False, True])
def test_benchmark_models_are_known_clean(symbolic):
    reason, _, _ = check_sound(converted(synthetic(48, 8, symbolic)))
    assert reason is None


def test_benchmark_fan_out_n_has_no_duplicates_left():
    """All slices read one tensor: the rewrite emits each shared intermediate node once (lower.emit's
    memo), so the model is proven clean, and the full cleanup agrees; without the memo CSE had
    equal Slice nodes to merge (the pre-check saw them)."""
    reason, report, _ = check_sound(converted(synthetic(48, 48)))
    assert reason is None and not report["changed"]


def test_unchanged_report_lists_the_default_passes():
    """PASS_NAMES is derived from default_passes(): the passes the real cleanup reports, in its order."""
    report, _ = full_cleanup(_dead())
    assert PASS_NAMES == tuple(report["passes"]) == tuple(unchanged_report(_dead())["passes"])
    assert PASS_NAMES[1:] == tuple(type(p).__name__ for p in default_passes())


def test_each_pass_points_at_its_listed_condition():
    """conditions.CONDITIONS (what the pre-check asks, without onnx-ir) is each pass's own may_fire."""
    from onnx_slice_tools.cleanup.conditions import CONDITIONS
    from onnx_slice_tools.cleanup.passes import RemoveDeadPass
    for p in (RemoveDeadPass(), *default_passes()):
        assert type(p).may_fire is CONDITIONS[type(p).__name__], type(p).__name__


def test_the_pre_check_does_not_import_onnx_ir():
    """Deciding that no pass can change a model costs no onnx-ir import (sympy comes with it)."""
    import subprocess
    import sys
    code = ("import sys, onnx; from onnx import helper, TensorProto as T\n"
            "from onnx_slice_tools.cleanup.precheck import may_change\n"
            "g = helper.make_graph([helper.make_node('Relu', ['x'], ['y'])], 'g',"
            " [helper.make_tensor_value_info('x', T.FLOAT, [2])], [helper.make_tensor_value_info('y', T.FLOAT, [2])])\n"
            "assert may_change(helper.make_model(g)) is None\n"
            "print('onnx_ir' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def _with_function():
    fn = helper.make_function("local", "F", ["fx"], ["fy"], [helper.make_node("Relu", ["fx"], ["fy"])],
                              [helper.make_opsetid("", 17)])
    return model([helper.make_node("F", ["x"], ["y"], domain="local")], [x_input([2])], [out("y")], functions=[fn])


def _branch_returning_an_outer_value():
    """onnx-ir looks a graph output up in its own graph only: the outer Relu's output is not an
    output there, and has no use."""
    then = helper.make_graph([], "then", [], [out("r")])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["n"])], "else", [], [out("n")])
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other)]
    return model(nodes, [x_input([2]), helper.make_tensor_value_info("cond", TensorProto.BOOL, [])], [out("y")])


def _unsorted():
    nodes = [helper.make_node("Neg", ["r"], ["y"]), helper.make_node("Relu", ["x"], ["r"])]
    return model(nodes, [x_input([2])], [out("y")])


@pytest.mark.parametrize("build, words", [(_with_function, "functions"), (_unsorted, "before it is defined"),
                                          (_branch_returning_an_outer_value, "not defined there")])
def test_left_to_the_passes(build, words):
    """What the pre-check does not model exactly gets "may change" (the passes decide)."""
    reason = check_sound(build())[0]
    assert reason is not None and words in reason


# --------------------------------------------------------------------------- each trigger


def _dead():
    return model([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["unused"])],
                 [x_input([2])], [out("y")])


def _unused_initializer():
    return model([helper.make_node("Relu", ["x"], ["y"])], [x_input([2])], [out("y")], [c("k", [1, 2])])


def _unused_subgraph_initializer():
    return _if_model([helper.make_node("Relu", ["x"], ["ty"])], [c("k", [1])])


def _trailing_empty_input():
    return model([helper.make_node("Slice", ["x", "b", "e", "", ""], ["y"])], [x_input([4])], [out("y")],
                 [c("b", [1]), c("e", [3])])


def _unused_optional_output():
    return model([helper.make_node("MaxPool", ["x"], ["y", "idx"], kernel_shape=[2])],
                 [x_input([1, 1, 4])], [out("y")])


def _batchnorm_training_mode():
    inits = [onnx.numpy_helper.from_array(np.ones(1, np.float32), n) for n in ("s", "b", "m", "v")]
    return model([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], training_mode=0)],
                 [x_input([1, 1, 2])], [out("y")], inits)


def _fold():
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Expand", ["r", "s"], ["y"])]
    return model(nodes, [x_input([2, 3])], [out("y")])


def _fold_constants():
    """No Shape at all: integer arithmetic of constants (Constant nodes) feeding a Reshape."""
    nodes = [helper.make_node("Constant", [], ["a"], value=c("a", [3])),
             helper.make_node("Constant", [], ["b"], value=c("b", [2])),
             helper.make_node("Mul", ["a", "b"], ["n"]), helper.make_node("Reshape", ["x", "n"], ["y"])]
    return model(nodes, [x_input([2, 3])], [out("y")])


def _rebuild():
    n1, i1, a = shape_scalar_chain("x", 0, "a_", cast_to=I32)
    nodes = n1 + [helper.make_node("Concat", [a, "tail"], ["s32"], axis=0),
                  helper.make_node("Cast", ["s32"], ["shape"], to=I64),
                  helper.make_node("Expand", ["x", "shape"], ["y"])]
    return model(nodes, [x_input(["N", 1])], [out("y")], i1 + [c("tail", [5], np.int32)])


def _reshape():
    """Every shape value is a graph output (Fold and Rebuild leave those): only the Reshape of
    x by its own dims can change."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Reshape", ["x", "s"], ["y"])]
    return model(nodes, [x_input([2, "N"])], [out("y"), out("s", I64)])


def _lift_squeeze():
    nodes = [helper.make_node("Squeeze", ["x", "ax"], ["sq"]), helper.make_node("Unsqueeze", ["sq", "ax"], ["u"]),
             helper.make_node("Relu", ["u"], ["y"])]
    return model(nodes, [x_input([1, 3])], [out("y")], [c("ax", [0])])


def _lift_scalar():
    """Unsqueeze(Neg(scalar constant + scalar constant)) of floats: no Squeeze, no facts."""
    nodes = [helper.make_node("Add", ["p", "q"], ["s"]), helper.make_node("Neg", ["s"], ["n"]),
             helper.make_node("Unsqueeze", ["n", "ax"], ["u"]), helper.make_node("Add", ["x", "u"], ["y"])]
    inits = [onnx.numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("p", 1.5), ("q", 2.0))]
    return model(nodes, [x_input([3])], [out("y")], inits + [c("ax", [0])])


def _merge_slices():
    nodes = [helper.make_node("Slice", ["x", "b0", "e0", "a0"], ["s0"]),
             helper.make_node("Slice", ["s0", "b1", "e1", "a1"], ["y"])]
    return model(nodes, [x_input([4, 5])], [out("y")],
                 [c("b0", [1]), c("e0", [3]), c("a0", [0]), c("b1", [0]), c("e1", [2]), c("a1", [1])])


def _transpose_pair():
    """A channel slice between NHWC/NCHW Transposes (tf2onnx around a kept StridedSlice)."""
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
             helper.make_node("Slice", ["t", "b", "e", "a"], ["s"]),
             helper.make_node("Transpose", ["s"], ["u"], perm=[0, 3, 1, 2]), helper.make_node("Relu", ["u"], ["y"])]
    return model(nodes, [x_input([1, 4, 2, 3])], [out("y")], [c("b", [1]), c("e", [3]), c("a", [-1])])


def _qdq_around_slice():
    """A Slice between DequantizeLinear and QuantizeLinear of one scale (tf2onnx's QDQ form
    around a lowered StridedSlice)."""
    nodes = [helper.make_node("DequantizeLinear", ["q", "sc", "zp"], ["f"]),
             helper.make_node("Slice", ["f", "b", "e", "a"], ["s"]),
             helper.make_node("QuantizeLinear", ["s", "sc", "zp"], ["y"])]
    return model(nodes, [helper.make_tensor_value_info("q", TensorProto.UINT8, [2, 6])], [out("y", TensorProto.UINT8)],
                 [c("b", [1]), c("e", [5]), c("a", [1]), c("sc", 0.5, np.float32), c("zp", 3, np.uint8)])


def _cse():
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Relu", ["x"], ["b"]),
             helper.make_node("Add", ["a", "b"], ["y"])]
    return model(nodes, [x_input([3])], [out("y")])


def _cse_constants_by_value():
    """Two Slices whose parameters are different initializers of equal value."""
    nodes = [helper.make_node("Slice", ["x", "b", "e"], ["s0"]), helper.make_node("Slice", ["x", "b2", "e2"], ["s1"]),
             helper.make_node("Add", ["s0", "s1"], ["y"])]
    return model(nodes, [x_input([4])], [out("y")], [c("b", [1]), c("e", [3]), c("b2", [1]), c("e2", [3])])


def _cse_in_subgraph():
    body = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Relu", ["x"], ["b"]),
            helper.make_node("Add", ["a", "b"], ["ty"])]
    return _if_model(body, [])


#: case -> (model, the pass the reason names, the pass whose node counts show the change or None
#: when the change is not a node: an initializer, an input list, an attribute, a name)
TRIGGERS = {
    "dead node": (_dead, "RemoveDeadPass", "RemoveDeadPass"),
    "unused initializer": (_unused_initializer, "RemoveDeadPass", None),
    "unused subgraph initializer": (_unused_subgraph_initializer, "RemoveDeadPass", None),
    "trailing empty input": (_trailing_empty_input, "RemoveDeadPass", None),
    "unused optional output": (_unused_optional_output, "RemoveDeadPass", None),
    "BatchNormalization training_mode": (_batchnorm_training_mode, "RemoveDeadPass", None),
    "fold": (_fold, "FoldShapeArithmeticPass", "FoldShapeArithmeticPass"),
    "fold constants": (_fold_constants, "FoldShapeArithmeticPass", "FoldShapeArithmeticPass"),
    "rebuild": (_rebuild, "RebuildShapeVectorsPass", "RebuildShapeVectorsPass"),
    "reshape": (_reshape, "ReshapeCopyDimsPass", None),
    "lift squeeze": (_lift_squeeze, "LiftScalarsPass", "LiftScalarsPass"),
    "lift scalar": (_lift_scalar, "LiftScalarsPass", "LiftScalarsPass"),
    "merge slices": (_merge_slices, "MergeSlicesPass", "MergeSlicesPass"),
    "transposes around a slice": (_transpose_pair, "TransposeSliceTransposePass", "TransposeSliceTransposePass"),
    "Q/DQ around a slice": (_qdq_around_slice, "QdqMovementPass", "QdqMovementPass"),
    "cse": (_cse, "CommonSubexpressionPass", "CommonSubexpressionPass"),
    "cse constants by value": (_cse_constants_by_value, "CommonSubexpressionPass", "CommonSubexpressionPass"),
    "cse in a subgraph": (_cse_in_subgraph, "CommonSubexpressionPass", "CommonSubexpressionPass"),
}


@pytest.mark.parametrize("case", list(TRIGGERS))
def test_each_trigger_is_needed(case):
    """A model only that trigger catches: the cleanup changes it (its bytes), the pre-check
    names the pass (Fold and Rebuild share one trigger: the reason names both)."""
    build, named, counted = TRIGGERS[case]
    proto = build()
    reason, report, after = check_sound(proto)
    assert after != round_trip(proto), "the cleanup does not change this model: not a trigger test"
    assert reason is not None and named in reason, reason
    if counted is not None:
        assert report["changed"] and report["passes"][counted] != {"removed": {}, "added": {}}


def test_shape_of_a_symbolic_input_used_elsewhere_is_clean():
    """Shape of an input whose dims are symbolic, fed to a non-arithmetic op: nothing to fold."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Expand", ["r", "s"], ["y"])]
    proto = model(nodes, [x_input(["N", "M"])], [out("y")])
    reason, report, _ = check_sound(proto)
    assert reason is None and not report["changed"]


# --------------------------------------------------------------------------- random graphs

_INT_CONSTS = [0, 1, -1, 2, [0], [1], [-1], [2, 3], [0, 1]]


def random_graph(seed: int):
    """A small graph of Shape/Size/Gather/Concat/Squeeze/Unsqueeze/Slice/Reshape/Cast/Add/Mul/
    Neg/Relu over a float input (static and symbolic dims) and integer constants (initializers
    or Constant nodes), with duplicates, dead nodes and If subgraphs reading outer values."""
    rng = np.random.default_rng(seed)
    dims = [rng.choice([1, 2, 3, "N"]).item() for _ in range(int(rng.integers(1, 4)))]
    dims = [int(d) if d != "N" else d for d in dims]
    nodes, inits, outputs = [], [], []
    floats, ints = ["x"], []  # value names by kind
    counter = iter(range(10 ** 6))

    def fresh(p="v"):
        return f"{p}{next(counter)}"

    def const(values):
        name = fresh("c")
        t = c(name, values, np.int64 if rng.random() < 0.8 else np.int32)
        if rng.random() < 0.3:
            nodes.append(helper.make_node("Constant", [], [name], value=t))
        else:
            inits.append(t)
        return name

    ints += ["k", "s"]  # run-time integers (nothing to fold), then a constant or none
    for v in rng.choice(len(_INT_CONSTS), size=int(rng.integers(0, 2))):
        ints.append(const(_INT_CONSTS[v]))
    for _ in range(int(rng.integers(2, 10))):
        op = rng.choice(["Shape", "Size", "Gather", "Concat", "Squeeze", "Unsqueeze", "Slice", "Reshape",
                         "Cast", "Add", "Mul", "Neg", "Relu", "dup", "If", "MaxPool", "ConstantInts", "Loop"])
        y = fresh()
        pick_f, pick_i = (lambda: str(rng.choice(floats))), (lambda: str(rng.choice(ints)))
        if op == "Shape":
            bounds = {} if rng.random() < 0.7 else {"start": int(rng.integers(-2, 2))}
            nodes.append(helper.make_node("Shape", [pick_f()], [y], **bounds))
        elif op == "ConstantInts":  # Constant's value_int / value_ints forms
            value = {"value_int": 2} if rng.random() < 0.5 else {"value_ints": [1, 2]}
            nodes.append(helper.make_node("Constant", [], [y], **value))
        elif op == "Loop":  # a body reading outer values (integers too), with equal nodes inside
            src, outer_int = pick_f(), pick_i()
            p = fresh("L")
            dup = rng.random() < 0.5  # a second, equal Shape in the body
            body_nodes = [helper.make_node("Identity", [p + "c"], [p + "co"]),
                          helper.make_node("Add", [p + "v", src], [p + "vo"]),
                          helper.make_node("Shape", [outer_int], [p + "s"]),
                          *([helper.make_node("Shape", [outer_int], [p + "s2"])] if dup else []),
                          helper.make_node("Concat", [p + "s", p + "s2" if dup else outer_int], [p + "so"], axis=0)]
            body = helper.make_graph(
                body_nodes, "body",
                [helper.make_tensor_value_info(p + "i", I64, []), helper.make_tensor_value_info(p + "c", TensorProto.BOOL, []),
                 helper.make_tensor_value_info(p + "v", F, None)],
                [helper.make_tensor_value_info(p + "co", TensorProto.BOOL, []), out(p + "vo"), out(p + "so", I64)],
                initializer=[c(p + "unused", [1])] if rng.random() < 0.2 else [])
            nodes.append(helper.make_node("Loop", [const(2), "", src], [y, y + "_scan"], body=body))
            floats.append(y)
            continue
        elif op == "MaxPool":  # an optional second output, used or not
            nodes.append(helper.make_node("MaxPool", ["x3"], [y, y + "_idx"], kernel_shape=[1]))
            floats.append(y)
            if rng.random() < 0.5:
                nodes.append(helper.make_node("Cast", [y + "_idx"], [y + "_c"], to=I64))
                ints.append(y + "_c")
            continue
        elif op == "Size":
            nodes.append(helper.make_node("Size", [pick_f()], [y]))
        elif op == "Gather":
            nodes.append(helper.make_node("Gather", [pick_i(), const(int(rng.integers(-1, 1)))], [y], axis=0))
        elif op == "Concat":
            nodes.append(helper.make_node("Concat", [pick_i() for _ in range(int(rng.integers(1, 3)))], [y], axis=0))
        elif op in ("Squeeze", "Unsqueeze"):
            src = pick_i() if rng.random() < 0.7 else pick_f()
            nodes.append(helper.make_node(op, [src, const([0])], [y]))
            (ints if src in ints else floats).append(y)
            continue
        elif op == "Slice":
            src = pick_i() if rng.random() < 0.5 else pick_f()
            nodes.append(helper.make_node("Slice", [src, const([int(rng.integers(-2, 2))]), const([3])], [y]))
            (ints if src in ints else floats).append(y)
            continue
        elif op == "Reshape":
            nodes.append(helper.make_node("Reshape", [pick_f(), pick_i()], [y]))
            floats.append(y)
            continue
        elif op == "Cast":
            nodes.append(helper.make_node("Cast", [pick_i()], [y], to=int(rng.choice([I64, I32]))))
        elif op in ("Add", "Mul"):
            if rng.random() < 0.7:
                nodes.append(helper.make_node(op, [pick_i(), pick_i()], [y]))
            else:
                nodes.append(helper.make_node(op, [pick_f(), pick_f()], [y]))
                floats.append(y)
                continue
        elif op == "Neg":
            nodes.append(helper.make_node("Neg", [pick_i()], [y]))
        elif op == "Relu":
            nodes.append(helper.make_node("Relu", [pick_f()], [y]))
            floats.append(y)
            continue
        elif op == "dup" and nodes:
            src = nodes[int(rng.integers(len(nodes)))]
            if src.op_type == "If":
                continue
            copy = helper.make_node(src.op_type, list(src.input), [y + f"_{k}" for k in range(len(src.output))])
            copy.attribute.extend(src.attribute)
            nodes.append(copy)
            y = copy.output[0]
            (floats if src.output[0] in floats else ints).append(y)
            continue
        elif op == "If":
            a, b = fresh("t"), fresh("e")
            inner = pick_f()
            then_nodes = [helper.make_node("Relu", [inner], [a])]
            if rng.random() < 0.3:  # a name of the outer graph shadowed in the branch, and outer arithmetic
                then_nodes = [helper.make_node("Shape", [inner], [inner + "_s"]),
                              helper.make_node("Add", [pick_i(), pick_i()], [ints[0]]),
                              helper.make_node("Relu", [inner], [a])]
            then = helper.make_graph(then_nodes, "then", [], [out(a)])
            other = helper.make_graph([helper.make_node("Neg", [inner], [b])] +
                                      ([helper.make_node("Neg", [inner], [b + "d"])] if rng.random() < 0.3 else []),
                                      "else", [], [out(b)])
            nodes.append(helper.make_node("If", ["cond"], [y], then_branch=then, else_branch=other))
            floats.append(y)
            continue
        else:
            continue
        ints.append(y)
    produced = [o for n in nodes if n.op_type != "Constant" for o in n.output]
    used = {i for n in nodes for i in n.input}
    for name in produced:
        if name not in used and rng.random() < 0.85 or name == produced[-1]:
            outputs.append(out(name, F if name in floats else I64 if name in ints else 0))
    if rng.random() < 0.2:
        outputs.append(out("k", I64))  # an input that is also an output
    inputs = [x_input(dims), x_input([1, 2, 3], "x3"), helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
              helper.make_tensor_value_info("k", I64, [2]), helper.make_tensor_value_info("s", I64, [])]
    return model(nodes, inputs, outputs or [out("x")], inits)


@settings(max_examples=60)
@given(st.integers(0, 2 ** 32 - 1))
def test_pre_check_is_sound_on_random_graphs(seed):
    check_sound(random_graph(seed))


@settings(max_examples=20)
@given(shape_graphs())
def test_pre_check_is_sound_on_shape_arithmetic(case):
    check_sound(case[0])


def test_precision_on_random_graphs():
    """How often the pre-check says "may change" where the cleanup changes nothing: counted
    (docs/benchmarks.md, "Cleanup pre-check"), and at least some graphs are proven clean."""
    counts = {"proven clean": 0, "may change, changed": 0, "may change, unchanged": 0}
    for seed in range(60):
        proto = random_graph(seed)
        reason, _, after = check_sound(proto)
        if reason is None:
            counts["proven clean"] += 1
        elif after is None or after != round_trip(proto):
            counts["may change, changed"] += 1
        else:
            counts["may change, unchanged"] += 1
    print("pre-check on 60 random graphs:", counts)
    assert counts["proven clean"] >= 5


# --------------------------------------------------------------------------- each pass's own condition

#: Every pass of a default cleanup, by class.
PASSES = [RemoveDeadPass, *(type(p) for p in default_passes())]


def as_the_passes_see_it(proto) -> onnx.ModelProto:
    """``proto`` with the shapes ``cleanup()`` infers set on it, as its passes see it."""
    m = ir.from_proto(proto)
    set_inferred_shapes(m, proto)
    return ir.to_proto(m)


def changes_alone(cls, seen: onnx.ModelProto) -> bool:
    """Whether the pass ``cls``, run alone on ``seen``, changes it (its result says so, its bytes
    differ, or it raises: the cleanup then stops)."""
    m = ir.from_proto(seen)
    before = ir.to_proto(m).SerializeToString()
    try:
        modified = cls()(m).modified
    except Exception:
        return True
    return modified or ir.to_proto(m).SerializeToString() != before


def may_fire(cls, index) -> bool:
    """``cls.may_fire`` as the pre-check reads it: an index that could not be built (None) or a
    condition that raises MayChange says the pass may fire."""
    if index is None:
        return True
    try:
        return cls.may_fire(index) is not None
    except MayChange:
        return True


def index_of(proto):
    try:
        return ProtoIndex(proto)
    except MayChange:
        return None


def unannounced(proto, passes=PASSES) -> list:
    """The passes that change ``proto`` alone although their ``may_fire`` said they do not."""
    index = index_of(proto)
    silent = [cls for cls in passes if not may_fire(cls, index)]
    if not silent:
        return []
    seen = as_the_passes_see_it(proto)
    return [cls.__name__ for cls in silent if changes_alone(cls, seen)]


#: (index, the model as the passes see it) of small graphs: each trigger of the pre-check, and
#: random graphs; built on first use, shared by the per-pass tests.
_CORPUS: list = []


@pytest.mark.parametrize("cls", PASSES, ids=lambda cls: cls.__name__)
def test_each_pass_announces_its_changes(cls):
    """On the corpus, whenever ``cls`` alone changes a model, its ``may_fire`` said it may; and
    the corpus has models it changes (the test can fail)."""
    if not _CORPUS:
        protos = [build() for build, _, _ in TRIGGERS.values()] + [random_graph(seed) for seed in range(24)]
        _CORPUS.extend((index_of(p), as_the_passes_see_it(p)) for p in protos)
    fired = silent = 0
    for index, seen in _CORPUS:
        if changes_alone(cls, seen):
            fired += 1
            silent += not may_fire(cls, index)
    assert silent == 0, f"{cls.__name__} changed {silent} models its may_fire said it does not change"
    assert fired > 0, f"no model of the corpus is changed by {cls.__name__}: the test proves nothing"


@settings(max_examples=25)
@given(st.integers(0, 2 ** 32 - 1))
def test_every_pass_announces_its_changes_on_random_graphs(seed):
    assert unannounced(random_graph(seed)) == []


@settings(max_examples=10)
@given(shape_graphs())
def test_every_pass_announces_its_changes_on_shape_arithmetic(case):
    assert unannounced(case[0]) == []


def test_a_pass_that_fires_unannounced_is_caught(monkeypatch):
    """The check can fail: MergeSlicesPass with a condition that never holds is named."""
    assert unannounced(_merge_slices()) == []
    monkeypatch.setattr(MergeSlicesPass, "may_fire", classmethod(lambda cls, index: None))
    assert unannounced(_merge_slices()) == ["MergeSlicesPass"]


def test_a_pass_without_a_condition_may_always_fire():
    """A new pass that brings no condition of its own is asked like the others and may fire."""
    class NewPass(CleanupPass):
        def run_graph(self, graph, ctx):
            return False
    assert may_change(_dead(), passes=[NewPass]) == "NewPass may change it (it has no pre-check)"
    assert may_change(_dead(), passes=[MergeSlicesPass]) is None


# --------------------------------------------------------------------------- in convert


@pytest.mark.parametrize("verify", [False, True])
def test_convert_gives_the_same_report_and_bytes_without_the_passes(verify, monkeypatch):
    proto = synthetic(24, 8)
    skipped = convert(proto, verify=verify)
    monkeypatch.setenv(FULL_CLEANUP_ENV, "1")
    full = convert(proto, verify=verify)
    assert skipped.report.cleanup == full.report.cleanup and not full.report.cleanup["changed"]
    assert skipped.report.model_checks == full.report.model_checks
    assert skipped.report.verdict == full.report.verdict
    assert skipped.model.SerializeToString() == full.model.SerializeToString()


def test_convert_skips_the_passes_only_when_proven(monkeypatch):
    def broken(*_, **__):
        raise RuntimeError("boom")
    monkeypatch.setattr(cleanup_module, "cleanup", broken)
    assert convert(synthetic(24, 8)).ok  # proven clean: the passes never run
    twins = synthetic(24, 8)  # two equal Neg nodes of the model's own: CSE merges them
    twins.graph.node.extend([helper.make_node("Neg", ["x"], [n]) for n in ("n1", "n2")]
                            + [helper.make_node("Add", ["n1", "n2"], ["sum"])])
    twins.graph.output.append(helper.make_tensor_value_info("sum", TensorProto.FLOAT, None))
    assert not convert(twins).ok  # duplicates: they run (and here fail)
    monkeypatch.setenv(FULL_CLEANUP_ENV, "1")
    assert not convert(synthetic(24, 8)).ok  # forced


def test_a_lift_given_up_part_way_leaves_nothing_behind():
    """Unsqueeze(Mul(constant scalar, graph input scalar)): LiftScalarsPass lifts the constant
    first, then cannot lift the input; the constant it made is removed again, so the cleanup
    reports no change and writes the same bytes (found by the random graphs above)."""
    nodes = [helper.make_node("Constant", [], ["c0"], value=helper.make_tensor("c0", TensorProto.INT64, [], [2])),
             helper.make_node("Mul", ["c0", "s"], ["m"]),
             helper.make_node("Unsqueeze", ["m", "axes"], ["u"]),
             helper.make_node("Neg", ["u"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("s", TensorProto.INT64, [])],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, [1])],
                          [helper.make_tensor("axes", TensorProto.INT64, [1], [0])])
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    reason, report, after = check_sound(proto)
    assert reason is None and not report["changed"]
    assert after == round_trip(proto)


def _slices_of_constants(second_raw: bool, second_starts: list):
    """Two Slices of x, each by its own starts/ends initializers: the first pair stored as raw
    bytes, the second as raw bytes or in int64_data (``second_raw``)."""
    def const(name, values, raw):
        t = helper.make_tensor(name, I64, [len(values)], values)
        if raw:
            t = onnx.numpy_helper.from_array(np.array(values, dtype=np.int64), name)
        return t
    inits = [const("s0", [1], True), const("e0", [3], True),
             const("s1", second_starts, second_raw), const("e1", [3], second_raw)]
    nodes = [helper.make_node("Slice", ["x", "s0", "e0"], ["a"]), helper.make_node("Slice", ["x", "s1", "e1"], ["b"]),
             helper.make_node("Add", ["a", "b"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [4])], [out("y")], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("second_raw", [True, False])
def test_constants_compare_by_value_however_stored(second_raw):
    """CSE keys of small initializers: raw bytes and typed fields of equal values are one key
    (the cleanup merges the Slices), different values are not."""
    reason = check_sound(_slices_of_constants(second_raw, [1]))[0]
    assert reason is not None and "CommonSubexpressionPass" in reason
    assert check_sound(_slices_of_constants(second_raw, [2]))[0] is None
