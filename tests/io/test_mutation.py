"""Corrupt models through the real CLI: byte-level mutants of the sample models (truncations,
bit flips, byte overwrites, insertions).  Whatever the bytes, ``convert`` exits 0 with a
loadable output, or 1/2 with exactly one stderr line naming the file -- never "internal error",
a traceback, a modified input or a partial output.  ``scripts/mutation_stress.py`` runs the
same judgement over thousands of mutants with counts per outcome."""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
MODELS = sorted((ROOT / "models").glob("*.onnx"))
SOURCES = [m.read_bytes() for m in MODELS]

_spec = importlib.util.spec_from_file_location("mutation_stress", ROOT / "scripts" / "mutation_stress.py")
stress = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stress)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(model=st.integers(0, len(SOURCES) - 1), kind=st.sampled_from(stress.KINDS),
       pos=st.integers(0, 1 << 30), value=st.integers(0, 255), count=st.sampled_from([1, 2, 8]),
       verify=st.sampled_from([False, False, False, True]))
def test_mutants_get_a_clean_outcome(capfd, model, kind, pos, value, count, verify):
    data = stress.mutate(SOURCES[model], kind, pos, value, count)
    tmp = Path(tempfile.mkdtemp(prefix="mutant-"))
    try:
        path, out = tmp / "mutant.onnx", tmp / "out.onnx"
        path.write_bytes(data)
        argv = ["convert", str(path), "-o", str(out)] + ([] if verify else ["--no-verify"])
        from onnx_slice_tools.cli.main import main
        code = main(argv)
        _, err = capfd.readouterr()  # file descriptor 2 too: native logs would show here
        outcome = stress.judge(path, data, out, code, err)
        event(outcome[:60])
        assert not outcome.startswith("BAD"), (MODELS[model].name, kind, pos, value, count, outcome)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_mutate_changes_the_bytes_as_described():
    data = bytes(range(10))
    assert stress.mutate(data, "truncate", 13, 0) == data[:3]
    assert stress.mutate(data, "bitflip", 2, 1) == data[:2] + bytes([2 ^ 2]) + data[3:]
    assert stress.mutate(data, "overwrite", 4, 200, 2) == data[:4] + bytes([200, 237]) + data[6:]
    assert stress.mutate(data, "insert", 1, 7) == data[:1] + b"\x07" + data[1:]


# --------------------------------------------------------------------------- hostile corpus

_hspec = importlib.util.spec_from_file_location("hostile", ROOT / "scripts" / "hostile.py")
hostile = importlib.util.module_from_spec(_hspec)
_hspec.loader.exec_module(hostile)
STRUCTURE = hostile.structure_cases()
FILES = hostile.file_cases()
ARGS = {k: v for k, v in hostile.arg_cases().items()  # not in this process: signals, rlimits, batches
        if not k.startswith(("sig", "disk_full", "jobs_huge", "batch_symlink"))}


def _slice(names, step):
    return sorted(names)[::step]


@pytest.mark.parametrize("name", _slice(STRUCTURE, 2))
def test_hostile_structure_slice(tmp_path, name):
    """Every 2nd structural mutant, through one command each (rotating): a clean outcome."""
    command = hostile.COMMANDS[sorted(STRUCTURE).index(name) % len(hostile.COMMANDS)]
    outcome = hostile.check(tmp_path, hostile.model_case(hostile._saver(STRUCTURE[name]), command))
    assert not outcome.startswith("BAD"), (name, command, outcome)


@pytest.mark.parametrize("name", _slice(FILES, 1))
def test_hostile_files_slice(tmp_path, name):
    outcome = hostile.check(tmp_path, hostile.model_case(FILES[name], "convert"))
    assert not outcome.startswith("BAD"), (name, outcome)


@pytest.mark.parametrize("name", _slice(ARGS, 1))
def test_hostile_arguments_slice(tmp_path, name):
    outcome = hostile.check(tmp_path, ARGS[name])
    assert not outcome.startswith("BAD"), (name, outcome)


@pytest.mark.parametrize("name, command, needle", [
    # each found by scripts/hostile.py; before the fix: "internal error", a traceback or silent guessing
    ("constant_begin_no_value", "convert", "Constant takes exactly one value attribute, got 0"),
    ("constant_begin_two_values", "inspect", "Constant takes exactly one value attribute, got 2"),
    ("x_dims_2_62", "convert-verify", "too large to be a usable tensor"),
    ("x_dims_huge_product", "verify-pair", "too large to be a usable tensor"),
    ("x_undefined", "verify-pair", "input 'x' has no element type"),
    ("attr_duplicated", "convert", "attribute 'begin_mask' is given twice"),
    ("two_outputs", "convert", "StridedSlice has one output, got 2"),
    ("raw_data_and_typed", "convert", "data in both raw_data and int32_data"),
    ("initializer_duplicated", "convert", "initializer 'b' is given twice"),
    ("x_duplicated_input", "convert", "input 'x' is given twice"),
    ("opset_duplicated", "convert", "domain '' is imported twice"),
    ("if_branch_shadows_outer", "convert", "value 'x' is defined twice"),
    ("function_recursive", "convert", "function custom::F calls itself"),
    ("function_mutual_recursion", "convert-verify", "calls itself"),
    ("function_defined_twice", "convert", "function custom::F is defined twice"),
    ("function_duplicate_io", "convert", "input 'fx' is given twice"),
    ("input_empty_name_data", "convert", "node 'ss': inputs[0]: the data input is empty"),
    ("input_empty_name_begin", "inspect", "node 'ss': inputs[1]: the begin input is empty"),
    ("constant_begin_sparse", "convert", "node 'cb' (Constant): attribute 'sparse_value': sparse tensors"),
    ("constant_begin_sparse", "inspect-target", "node 'cb' (Constant): attribute 'sparse_value': sparse tensors"),
])
def test_hostile_structure_defects_are_refused_in_one_line(tmp_path, name, command, needle):
    outcome = hostile.check(tmp_path, hostile.model_case(hostile._saver(STRUCTURE[name]), command))
    assert outcome.startswith("invalid:") and needle in outcome, outcome


@pytest.mark.parametrize("name, needle", [
    ("explain_shape_empty_item", "--shape"), ("explain_shape_trailing_comma", "--shape"),
    ("explain_begin_empty_item", "--begin"), ("explain_bare_name", "no subscript"),
    ("explain_negated_name", "'-i'"), ("explain_name_arithmetic", "'i+1'"), ("explain_index_beyond_int64", "int64"),
    ("explain_unary_minus_5000", "index expression"), ("explain_parens_5000", "index expression"),
    ("conflicting_no_verify_strict", "--strict and --no-verify"), ("no_verify_verify_on", "--verify-on and --no-verify"),
    ("no_verify_verify_memory", "--verify-memory and --no-verify"), ("fix_slices_on_onnxruntime", "--fix-slices"),
    ("outputs_duplicated", "--outputs"), ("verify_on_empty_item", "--verify-on"), ("inputs_empty_dim", "--inputs"),
    ("inspect_flavor_mismatch", "node 'ss': begin_mask"), ("inspect_flavor_with_target", "--flavor and --target"),
    ("verify_trials_without_pair", "--trials"), ("input_name_newline_missing", "no\\nsuch.onnx"),
])
def test_hostile_option_defects_are_refused_in_one_line(tmp_path, name, needle):
    """Contradictions and malformed values: exit 2, one line naming the option (or node and field)."""
    outcome = hostile.check(tmp_path, ARGS[name])
    assert outcome.startswith("invalid:") and needle in outcome, outcome


@pytest.mark.parametrize("name", ["name_newline_garbage", "name_newline_tflite_garbage", "name_control_chars_garbage"])
def test_file_names_with_control_characters_are_escaped_in_the_one_line(tmp_path, name):
    outcome = hostile.check(tmp_path, hostile.model_case(FILES[name], "convert"))
    assert outcome.startswith("invalid:") and ("\\n" in outcome or "\\x1b" in outcome), outcome


def test_explain_accepts_its_own_help_examples(tmp_path):
    assert hostile.check(tmp_path, ARGS["explain_strides_help_example"]) == "ok"


def test_a_function_call_without_outputs_is_invalid_input(tmp_path):
    """The in-place run named the outputs it adds to a call after its first output (IndexError
    on a call with none); then it was a plain check failure from shape inference (exit 1).  The
    call is the input's own node and the slice in its function was rewritten and checked: the
    input is unusable (exit 2), naming the node and the field onnx's inference names."""
    outcome = hostile.check(tmp_path, hostile.model_case(
        hostile._saver(STRUCTURE["function_called_with_no_outputs"]), "convert-verify"))
    assert outcome.startswith("invalid:") and "node 'call' (F): outputs[0]: Output 0 is out of bounds" in outcome, \
        outcome


def test_hostile_batch_slice(tmp_path):
    """A batch of sound and hostile models (structural mutants, hostile external data, garbage,
    a symlink loop, a dangling link, a FIFO, its output folder inside): three runs (fresh, again,
    after deleting inputs) -- sound models convert, then are unchanged; every entry one line; the
    outputs on disk are exactly the report's; deleted inputs lose their outputs."""
    assert hostile.batch_case(tmp_path, good=6, bad=8, jobs=1) == []


# --------------------------------------------------------------------------- exit-1 classes of the stress run

def _renamed_attribute(model: str, node_op: str, old: str, new: str, graph_only: bool = False):
    """A sample model with one attribute of its first ``node_op`` node renamed (a bit flip in
    the name), as scripts/mutation_stress.py found them."""
    import onnx
    m = onnx.load(ROOT / "models" / model)
    node = next(n for n in m.graph.node if n.op_type == node_op)
    attr = next(a for a in node.attribute if a.name == old)
    attr.name = new
    return m


@pytest.mark.parametrize("model, old, new", [
    ("tf_channel_flip.onnx", "begin_mask", "begin\x12mask"),       # mutant 1370 of seed 2
    ("tf_rnn_last_step.onnx", "shrink_axis_mask", "SHRINK\x7fAxis_mask"),  # 1570
    ("tf_runtime_index.onnx", "shrink_axis_mask", "shsink_axis_mask"),  # 2138
    ("openvino_channel_flip.onnx", "end_mask", "end_masc"),
])
@pytest.mark.parametrize("verify", [True, False])
def test_a_misspelled_strided_slice_attribute_is_invalid_input(tmp_path, capsys, model, old, new, verify):
    """The mask was silently dropped (taken as 0): the rewrite then contradicted the declared
    output shape and the check failed (exit 1), or, unchecked, converted another slice."""
    src, out = tmp_path / "m.onnx", tmp_path / "o.onnx"
    src.write_bytes(_renamed_attribute(model, "StridedSlice", old, new).SerializeToString())
    from onnx_slice_tools.cli.main import main
    assert main(["convert", str(src), "-o", str(out)] + ([] if verify else ["--no-verify"])) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(src) in err and "node '" in err, err
    assert f"attribute {new!r}: not a StridedSlice attribute" in err, err
    assert not out.exists()


def test_tensorflow_type_attributes_on_a_strided_slice_are_accepted(tmp_path):
    """TensorFlow's own attributes (T, Index, _internal) are no mask: converted as before."""
    import onnx
    m = onnx.load(ROOT / "models" / "tf_channel_flip.onnx")
    node = next(n for n in m.graph.node if n.op_type == "StridedSlice")
    node.attribute.extend([onnx.helper.make_attribute("T", 1), onnx.helper.make_attribute("Index", 6),
                           onnx.helper.make_attribute("_class", "loc:@x")])
    src = tmp_path / "m.onnx"
    src.write_bytes(m.SerializeToString())
    from onnx_slice_tools import convert
    assert convert(src).report.verdict == "verified"


@pytest.mark.parametrize("op, old, new", [("If", "else_branch", "else_brinch"),  # mutant 934 of seed 2
                                          ("If", "then_branch", "thenbranch")])
def test_a_control_flow_node_without_its_branch_is_invalid_input(tmp_path, capsys, op, old, new):
    """An If whose else_branch is misspelled has no else branch: no runtime loads it.  The
    rewrite's output failed the checker on it while the original failed it first on another
    message (exit 1): now the validation refuses the input, naming node and attribute."""
    src, out = tmp_path / "m.onnx", tmp_path / "o.onnx"
    src.write_bytes(_renamed_attribute("tf_if_branch.onnx", op, old, new).SerializeToString())
    from onnx_slice_tools.cli.main import main
    assert main(["convert", str(src), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(src) in err, err
    assert f"attribute '{old}': If needs its {old} graph" in err and repr(new) in err, err
    assert not out.exists()


@pytest.mark.parametrize("verify", [True, False])
def test_a_declared_output_shape_the_slice_cannot_give_is_invalid_input(tmp_path, capsys, verify):
    """Mutants 2410, 2422, 2531, 3075, 3213 of seed 2: the StridedSlice's declared output (graph
    output or value_info) contradicts the slice of its input's trusted dims; the rewrite kept the
    declaration and strict shape inference of the output failed (exit 1)."""
    import onnx
    m = onnx.load(ROOT / "models" / "openvino_channel_flip.onnx")
    m.graph.output[0].type.tensor_type.shape.dim[1].dim_value = 15
    src, out = tmp_path / "m.onnx", tmp_path / "o.onnx"
    src.write_bytes(m.SerializeToString())
    from onnx_slice_tools.cli.main import main
    assert main(["convert", str(src), "-o", str(out)] + ([] if verify else ["--no-verify"])) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(src) in err and "node 'flip'" in err, err
    assert "output 'flipped': declared [1, 15, 224, 224], but the slice of the input [1, 3, 224, 224] gives " \
           "[1, 3, 224, 224] (dim 1: declared 15 != planned 3)" in err, err
    assert not out.exists()


def _if_branch_mul(edit):
    import onnx
    m = onnx.load(ROOT / "models" / "tf_if_branch.onnx")
    cond = next(n for n in m.graph.node if n.op_type == "If")
    branch = next(a.g for a in cond.attribute if a.name == "else_branch")
    edit(next(n for n in branch.node if n.op_type == "Mul"))
    return m


def _add_attribute(node):
    import onnx
    node.attribute.append(onnx.helper.make_attribute("alpha", 1.0))


@pytest.mark.parametrize("edit, needle", [
    (lambda n: setattr(n, "op_type", "Muh"), "op_type: 'Muh' is no ONNX operator of opset 17"),  # seed 3, 806
    (lambda n: n.input.pop(), "inputs: Mul takes 2 inputs, got 1"),  # seed 2, 2258
    (_add_attribute, "attribute 'alpha': Mul has no such attribute"),
])
def test_an_onnx_node_no_runtime_loads_is_invalid_input(tmp_path, capsys, edit, needle):
    """A node of the ONNX domain its schema refuses, inside an If branch: the original failed
    the checker first on the branch's StridedSlice, the output (slices rewritten) on this node,
    so the failure did not count as the original's (exit 1).  Now refused up front, naming it."""
    src, out = tmp_path / "m.onnx", tmp_path / "o.onnx"
    src.write_bytes(_if_branch_mul(edit).SerializeToString())
    from onnx_slice_tools.cli.main import main
    assert main(["convert", str(src), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(src) in err and "node 'cond_false_383_cond/mul'" in err, err
    assert needle in err, err
    assert not out.exists()


def test_an_intermediate_declaration_the_slice_contradicts_is_replaced_with_a_warning(tmp_path):
    """Mutant 2531 of seed 2: a value_info of a StridedSlice's output contradicts the slice's
    plan.  Declared shapes of intermediate values are untrusted: the output declares the slice's
    shape instead (the record warns), and the conversion is verified (it failed strict shape
    inference on the kept declaration: exit 1)."""
    import onnx
    m = onnx.load(ROOT / "models" / "tf_newaxis_outer.onnx")
    vi = next(v for v in m.graph.value_info if v.name == "strided_slice_1:0")
    assert vi.type.tensor_type.shape.dim[2].dim_value == 16
    vi.type.tensor_type.shape.dim[2].dim_value = 18
    src = tmp_path / "m.onnx"
    src.write_bytes(m.SerializeToString())
    from onnx_slice_tools import convert
    result = convert(src)
    assert result.report.verdict == "verified", result.report.problem()
    rec = next(r for r in result.report.records if r.node == "strided_slice_1")
    assert any("declared output shape [unk__34, 1, 18] contradicts the slice's" in w for w in rec.warnings), rec.warnings
    out = {v.name: v for v in result.model.graph.value_info}.get("strided_slice_1:0")
    assert out is None or [d.dim_value for d in out.type.tensor_type.shape.dim][1:] == [1, 16]


# --------------------------------------------------------------------------- nodes after a custom-op slice

_TF = "ai.onnx.converters.tensorflow"


def _after_slice(after, out_shape=None, extra_inits=()):
    """image [1, 8, 8, 3] -> a TensorFlow StridedSlice ``image[..., 0:2]`` -> ``after`` -> y.  The
    custom-op slice hides its output's shape from onnx's inference, so the original's own
    checks cannot see a contradiction in ``after``; once it is rewritten, the shape is known."""
    import numpy as np
    from onnx import TensorProto as T
    from onnx import helper, numpy_helper
    ss = helper.make_node("StridedSlice", ["image", "b", "e", "s"], ["sl"], name="ss", domain=_TF, begin_mask=7,
                          end_mask=7, ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0)
    inits = [numpy_helper.from_array(np.array(v, np.int32), n)
             for n, v in (("b", [0, 0, 0, 0]), ("e", [0, 0, 0, 2]), ("s", [1, 1, 1, 1]))]
    g = helper.make_graph([ss] + after, "g", [helper.make_tensor_value_info("image", T.FLOAT, [1, 8, 8, 3])],
                          [helper.make_tensor_value_info("y", T.FLOAT, out_shape)], inits + list(extra_inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(_TF, 1)])


def _transpose(perm):
    from onnx import helper
    return _after_slice([helper.make_node("Transpose", ["sl"], ["y"], name="t", perm=perm)], [1, 2, 8, 8])


def _conv(pads):
    import numpy as np
    from onnx import helper, numpy_helper
    return _after_slice([helper.make_node("Conv", ["sl", "w"], ["y"], name="conv", pads=pads)], [1, 4, 8, 2],
                        extra_inits=[numpy_helper.from_array(np.ones((4, 8, 1, 1), np.float32), "w")])


def _mul(out_shape):
    from onnx import helper
    return _after_slice([helper.make_node("Mul", ["sl", "sl"], ["y"], name="mul")], out_shape=out_shape)


@pytest.mark.parametrize("model, sound, needle", [
    # seeds 2-4 at --mutants 3300 --verify 0.3: a bit flip in perm, in pads' length, in a declared dim
    (_transpose, [0, 3, 1, 2], "node 't' (Transpose): attribute 'perm': [TypeInferenceError] Invalid attribute perm"),
    (_conv, [0, 0, 0, 0], "node 'conv' (Conv): attribute 'pads': [ShapeInferenceError] Attribute pads has incorrect size"),
    (_mul, [1, 8, 8, 2], "node 'mul' (Mul): output 'y' as declared: [ShapeInferenceError] Inferred shape and existing"),
], ids=["transpose_perm", "conv_pads", "mul_declared_output"])
def test_a_node_contradicting_the_shapes_the_rewrite_makes_known_is_invalid_input(tmp_path, capsys, model, sound,
                                                                                  needle):
    """The original passes its own checks (the custom-op slice hides the shape); the output
    failed strict shape inference at the input's own node, after every per-rewrite check and
    the structural proof passed: that node contradicts the slice's true shape (exit 2, naming
    file, node and field).  The same model with a sound value converts verified."""
    from onnx_slice_tools import convert
    from onnx_slice_tools.cli.main import main
    good = tmp_path / "good.onnx"
    good.write_bytes(model(sound).SerializeToString())
    assert convert(good).report.verdict == "verified"
    corrupt = {"t": [0, 3, 1, 7], "conv": [1, 1, 1], "mul": [1, 8, 8, 5]}
    name = next(n.name for n in model(sound).graph.node if n.name != "ss")
    src, out = tmp_path / "m.onnx", tmp_path / "o.onnx"
    src.write_bytes(model(corrupt[name]).SerializeToString())
    assert main(["convert", str(src), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"{src}: ") and needle in err, err
    assert not out.exists()
    assert main(["convert", str(src), "-o", str(out), "--no-verify"]) == 0  # nothing checked: converted as given


def _one_short(args):  # the Slice's ends one short: another shape (the rewrite's own node fails inference)
    return [(axis, start, end - 1 if end > 0 else end, step) for axis, start, end, step in args]


def _shifted(args):  # starts and ends one further: the same shape, other values
    return [(axis, start + 1, end + 1 if end > 0 else end, step) for axis, start, end, step in args]


@pytest.mark.parametrize("model, value, wrong", [
    (_mul, [1, 8, 8, 2], _one_short),   # valid model: inference fails at the rewrite's own Slice
    (_transpose, [0, 3, 1, 2], _shifted),  # valid model: only the values are wrong
    (_transpose, [0, 3, 1, 7], _shifted),  # corrupt perm too: the rewrite's failure is the verdict
], ids=["valid_wrong_shape", "valid_wrong_values", "corrupt_and_wrong_values"])
def test_a_wrong_rewrite_still_fails(tmp_path, capsys, monkeypatch, model, value, wrong):
    """A rewrite that gets the slice wrong (its Slice op's arguments tampered with) is a failed
    check (exit 1), never input blamed: the per-rewrite check fails, so a strict shape
    inference failure at a later node of the input is not taken as the input's contradiction."""
    from onnx_slice_tools.cli.main import main
    from onnx_slice_tools.lowering import lower
    real = lower._slice_op
    monkeypatch.setattr(lower, "_slice_op", lambda args: real(wrong(args)))
    src, out = tmp_path / "m.onnx", tmp_path / "o.onnx"
    src.write_bytes(model(value).SerializeToString())
    assert main(["convert", str(src), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"{src}: ") and "once the StridedSlice nodes" not in err, err
    assert not out.exists()
