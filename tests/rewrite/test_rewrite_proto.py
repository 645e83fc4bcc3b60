"""What the two holders of ``api._pipeline`` differ in, and only that: ``_ProtoHolder``
(rewrite/proto_pass.py) against ``_IrHolder`` (rewrite/ir_pass.py); the pipeline is one function.

1. Loading: which models each takes (the protobuf holder declines external data, an opset below 11
   or another opset asked -- opset conversion is the onnx-ir holder's --, a StridedSlice in a
   subgraph or a function, ``fix_slices``), and the path the report names.
2. Rewriting and serializing: each holder's own stages (load, shapes, rewrite, opset and IR
   version, serialization) on a representative set give the same records, changes (the structural
   proof's input), node table and model -- but for onnx-ir's writer adding value_info for
   initializers and dropping an explicitly empty domain.  The set: the sample models (two
   targets), the benchmark models, every peer case (tests/data/peer_cases.json) in six ways, the
   graph surgery's corners (:func:`_corner_model`) and shared intermediate nodes.
3. Cleaning and weights: one model through the whole pipeline on each (the protobuf holder hands
   the cleanup no onnx-ir model; the onnx-ir holder reads external weights back in for the checks).
4. The protobuf holder imports no onnx-ir.  Its own machinery: tests/rewrite/test_proto_pass.py.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnx_slice_tools import convert
from onnx_slice_tools.api import Context, _IrHolder, _ProtoHolder
from onnx_slice_tools.errors import StridedSliceError
from onnx_slice_tools.io.files import read_model_proto
from onnx_slice_tools.lowering.targets import get_target
from onnx_slice_tools.report import Report
from onnx_slice_tools.rewrite.ir_pass import TF_DOMAIN
from onnx_slice_tools.graphs.table import NodeTable
from onnx_slice_tools.verification.lowerings import DEFAULT_VERIFY_MEMORY

ROOT = Path(__file__).resolve().parents[2]


def _load_script(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _node_bytes(n):
    n = onnx.NodeProto.FromString(n.SerializeToString())
    if n.domain == "":
        n.ClearField("domain")
    return n.SerializeToString()


def _model_view(p):
    g = p.graph
    inits = {t.name for t in g.initializer}
    return {
        "ir_version": p.ir_version,
        "nodes": [_node_bytes(n) for n in g.node],
        "initializers": sorted((t.name, t.data_type, tuple(t.dims), onnx.numpy_helper.to_array(t).tobytes())
                               for t in g.initializer),
        "inputs": [i.SerializeToString() for i in g.input],
        "outputs": [o.SerializeToString() for o in g.output],
        "value_info": sorted(v.SerializeToString() for v in g.value_info if v.name not in inits),
        "opsets": sorted((o.domain, o.version) for o in p.opset_import),
        "functions": [f.SerializeToString() for f in p.functions],
    }


def _held(holder, model: onnx.ModelProto, target=None):
    """``model`` through ``holder``'s own stages of ``api._pipeline`` up to the bytes -- load,
    opset, shape derivation, rewrite, opset and IR version set, serialization -- as the pipeline
    calls them (the input is copied): (rewrite result, the proto)."""
    h = holder(model, Context(None, None, None, False, False, get_target(target), DEFAULT_VERIFY_MEMORY))
    assert h.load()
    current = h.current_opset()
    assert h.accepts(current)  # (the protobuf holder: nothing it declines)
    h.prepare(current)
    found = h.found()
    result = h.rewrite(current, h.shapes(found, h.baseline(found)))
    h.set_opset(current)
    return result, h.to_proto(Report(None))


def assert_same_rewrite(model: onnx.ModelProto, target=None) -> int:
    """Both holders agree on ``model`` (see the module doc); returns the nodes rewritten."""
    (a, pa), (b, pb) = _held(_IrHolder, model, target), _held(_ProtoHolder, model, target)
    assert [r.to_json() for r in b.records] == [r.to_json() for r in a.records]
    assert [(r.data_name, r.output_name, r.index_names, r.renamed, r.replaced) for r in b.records] == \
        [(r.data_name, r.output_name, r.index_names, r.renamed, r.replaced) for r in a.records]
    assert b.changes == a.changes
    assert b.modified == a.modified
    if b.modified:  # the node table the splice made while it rebuilt the node list: a fresh read's
        read = NodeTable(pb.graph)
        assert (b.table.ops, b.table.domains, b.table.inputs, b.table.outputs, b.table.holders) == \
            (read.ops, read.domains, read.inputs, read.outputs, read.holders)
    va, vb = _model_view(pa), _model_view(pb)
    for key in va:
        assert vb[key] == va[key], key
    return sum(r.lowering is not None for r in a.records)


def _peer_rows():
    peer_cases = _load_script("peer_cases")
    rows = []
    for case in json.loads((ROOT / "tests" / "data" / "peer_cases.json").read_text())["cases"]:
        x = peer_cases.make_input(case["input"], case["dtype"])
        try:
            spec = peer_cases.spec_of(case)
        except StridedSliceError:
            continue
        rows.append((case, x, spec))
    return rows


def _corner_model(consistent: bool = False) -> onnx.ModelProto:
    """The graph surgery's corner cases in one model (see the module doc); ``consistent``: no
    declaration that contradicts the derived shapes (those fail the checks, rightly)."""
    i32 = TensorProto.INT32

    def ss(name, x, out, b, e, s, **masks):
        return helper.make_node("StridedSlice", [x, b, e, s], [out], name=name, domain=TF_DOMAIN, **masks)

    inits = [helper.make_tensor(n, i32, [len(v)], v) for n, v in (
        ("b0", [0, 0]), ("e0", [0, 0]), ("s1", [1, 1]), ("bc", [0, 1]), ("ec", [0, 3]),
        ("one", [1]), ("bs", [0, 2]), ("st", [1, 1]))]
    nodes = [
        # identity (x[:, :]) read by a Relu, by a later StridedSlice and by an If branch
        ss("ident", "x", "xi", "b0", "e0", "s1", begin_mask=3, end_mask=3),
        helper.make_node("Relu", ["xi"], ["r"], name="relu"),
        ss("crop", "xi", "c", "bc", "ec", "s1", begin_mask=1, end_mask=1),
        # chained: a slice of a slice, the inner one also a graph output
        ss("chain", "c", "cc", "b0", "e0", "s1", begin_mask=1, end_mask=1, shrink_axis_mask=2),
        # Constant node indices (value_ints and a value tensor)
        helper.make_node("Constant", [], ["kb"], name="kb", value_ints=[0, 1]),
        helper.make_node("Constant", [], ["ke"], name="ke",
                         value=helper.make_tensor("ke_t", TensorProto.INT64, [2], [0, 2])),
        ss("consts", "r", "k", "kb", "ke", "st", begin_mask=1, end_mask=1),
        # tf2onnx's shrink: end = begin + 1 computed by an Add the lowering does not read
        helper.make_node("Add", ["bs", "one"], ["es"], name="end_plus_one"),
        ss("shrink", "x", "sh", "bs", "es", "st", begin_mask=1, end_mask=1, shrink_axis_mask=2),
        # runtime begin from a graph input
        ss("runtime", "x", "rt", "rb", "ec", "s1", begin_mask=1, end_mask=1),
        helper.make_node("If", ["cond"], ["branch"], name="if",
                         then_branch=helper.make_graph([helper.make_node("Neg", ["xi"], ["t"])], "then", [],
                                                       [helper.make_tensor_value_info("t", 1, [2, "n"])]),
                         else_branch=helper.make_graph([helper.make_node("Abs", ["xi"], ["f"])], "else", [],
                                                       [helper.make_tensor_value_info("f", 1, [2, "n"])])),
        helper.make_node("Mul", ["cc", "cc"], ["sq"], name="square"),
        # a slice of a weight (the data an initializer)
        ss("weights", "w", "ws", "b0", "ec", "s1", begin_mask=1, end_mask=1),
    ]
    if not consistent:  # nodes the rewrite refuses (recorded, left in place; the load refuses worse)
        nodes += [
            ss("float_mask", "x", "fm", "b0", "e0", "s1", begin_mask=1.0),
            ss("unknown_length", "x", "ul", "rl", "rl", "rl"),
            ss("bad_lengths", "x", "bl", "one", "e0", "s1"),
        ]
    graph = helper.make_graph(
        nodes, "corners",
        [helper.make_tensor_value_info("x", 1, [2, "n"]), helper.make_tensor_value_info("rb", i32, [2]),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         *([] if consistent else [helper.make_tensor_value_info("rl", i32, ["k"])])],
        [*(helper.make_tensor_value_info(n, 1, None) for n in ("c", "sh", "rt")),  # filled in by the rewrite
         *(helper.make_tensor_value_info(n, 1, s) for n, s in (("branch", [2, "n"]), ("sq", [2]), ("r", [2, "n"]),
                                                               ("k", [2, 1] if consistent else None))),
         helper.make_tensor_value_info("ws", 1, None),
         *([] if consistent else [helper.make_tensor_value_info(n, 1, None) for n in ("fm", "ul", "bl")])],
        [*inits, helper.make_tensor("w", 1, [4, 6], np.arange(24, dtype=np.float32))],
        value_info=[helper.make_tensor_value_info("xi", 1, [2, "n"] if consistent else [3, 5]),  # derived: [2, n]
                    helper.make_tensor_value_info("cc", 1, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TF_DOMAIN, 1),
                                                    helper.make_opsetid("com.unused", 1)])
    model.ir_version = 8
    return model


def _shared_model() -> onnx.ModelProto:
    """Two slices x[:, 0] of one tensor (both graph outputs) share their Slice node, read by two
    Squeezes; a third, x[:, 0:1], is that Slice alone but a graph output: its own node."""
    inits = [helper.make_tensor(n, TensorProto.INT32, [2], v) for n, v in (("b", [0, 0]), ("e", [0, 1]), ("s", [1, 1]))]
    nodes = [helper.make_node("StridedSlice", ["x", "b", "e", "s"], [y], name=y, domain=TF_DOMAIN,
                              begin_mask=1, end_mask=1, **({} if y == "y3" else {"shrink_axis_mask": 2}))
             for y in ("y1", "y2", "y3")]
    graph = helper.make_graph(nodes, "shared", [helper.make_tensor_value_info("x", 1, ["n", 3])],
                              [helper.make_tensor_value_info(y, 1, None) for y in ("y1", "y2", "y3")], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TF_DOMAIN, 1)])
    model.ir_version = 8
    return model


def _peer(runtime, dims):
    from test_peer_cases import peer_model
    rows = _peer_rows()
    assert len(rows) >= 800
    return peer_model(rows, runtime, dims)[0]


def _at_ir_version(model, version):
    model.ir_version = version
    return model


def _at_opset(model, opset):
    model.opset_import[0].version = opset
    for n in model.graph.node:  # (Constant's value_ints is opset 12's: below, the same values as a tensor)
        if opset < 12 and n.op_type == "Constant" and n.attribute[0].name == "value_ints":
            n.CopyFrom(helper.make_node("Constant", [], list(n.output), name=n.name, value=helper.make_tensor(
                n.name, TensorProto.INT64, [len(n.attribute[0].ints)], list(n.attribute[0].ints))))
    return model


_SAMPLES = [p for p in sorted((ROOT / "models").glob("*.onnx")) if p.stem != "tf_if_branch"]  # (a subgraph: below)
_SET = {  # name: (model, options, nodes rewritten: exactly, or at least when negative)
    **{f"{p.stem}-{t}": (lambda p=p: read_model_proto(p), {"target": t}, -1)
       for p in _SAMPLES for t in ("onnxruntime", "portable")},
    **{f"bench-{'symbolic' if s else 'static'}-{f}": (lambda s=s, f=f: _load_script("bench").synthetic_model(
        200, s, fan_out=f), {}, 200) for s in (False, True) for f in (8, 200)},
    **{f"peer-{'runtime' if r else 'constant'}-{d}": (lambda r=r, d=d: _peer(r, d), {}, -600)  # the rest refused
       for r in (False, True) for d in ("declared", "symbolic", "unknown rank")},
    **{f"corners-opset{o}": (lambda o=o: _at_opset(_corner_model(), o), {}, 7) for o in (11, 17)},
    "shared": (_shared_model, {}, 3),
    "shared-ir-version-5": (lambda: _at_ir_version(_shared_model(), 5), {}, 3),  # (raised to what opset 17 needs)
}


@pytest.mark.parametrize("name", list(_SET))
def test_both_holders_rewrite_and_serialize_alike(name):
    make, options, rewritten = _SET[name]
    model = make()
    n = assert_same_rewrite(model, **options)
    assert n == rewritten if rewritten >= 0 else n >= -rewritten
    if name.startswith("corners"):  # the refused nodes, recorded alike
        b, _ = _held(_ProtoHolder, model)
        assert sorted(r.error_kind or "" for r in b.records if r.error) == ["invalid", "invalid", "unsupported"]


def _external(model, folder: Path) -> Path:
    path = folder / "model.onnx"
    # Raw data (what onnx moves out); above 64 bytes: the weight "w" alone.  (Index initializers
    # in external data are not read by the onnx-ir holder's shape derivation: the records of the
    # slices downstream of a slice then carry no shapes -- a difference of the holders, as on main.)
    for t in model.graph.initializer:
        t.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(t), t.name))
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True, size_threshold=64)
    return path


@pytest.mark.parametrize("case, path", [
    ("plain", "protobuf"), ("subgraph", "onnx-ir"), ("external data", "onnx-ir"), ("opset 10", "onnx-ir"),
    ("opset asked", "onnx-ir"), ("same opset asked", "protobuf"), ("fix_slices", "onnx-ir"),
    ("function", "onnx-ir")])
def test_which_holder_takes_which_model(case, path, tmp_path):
    model, options = _corner_model(consistent=True), {}
    if case == "subgraph":
        model = ROOT / "models" / "tf_if_branch.onnx"
    elif case == "external data":
        model = _external(model, tmp_path)
    elif case == "opset 10":
        model, options["opset"] = _at_opset(_shared_model(), 10), 11
    elif case.endswith("opset asked"):
        options["opset"] = 17 if case.startswith("same") else 18
    elif case == "fix_slices":
        options["fix_slices"] = True
    elif case == "function":
        model.functions.append(helper.make_function("custom", "f", ["a", "b", "e", "s"], ["y"], [helper.make_node(
            "StridedSlice", ["a", "b", "e", "s"], ["y"], domain=TF_DOMAIN)], [helper.make_opsetid(TF_DOMAIN, 1)]))
    result = convert(model, verify=False, cleanup=False, **options)
    assert result.report.path == path
    assert (result.ir_model is None) == (path == "protobuf")
    if "opset" in options:  # converted by the onnx-ir holder (the protobuf holder keeps the model's)
        assert [o.version for o in result.model.opset_import if o.domain == ""] == [options["opset"]]


def test_one_model_through_the_pipeline_on_each_holder(tmp_path):
    """The corner model plus what the cleanup removes (a dead node, two equal slices) as a proto
    (the protobuf holder: its proto read into onnx-ir for the cleanup) and saved with external
    data (the onnx-ir holder: its own model, the weights read back in for the checks): both
    verified, the same records, cleanup report and nodes, the same outputs bit for bit."""
    model = _corner_model(consistent=True)
    model.graph.node.extend([helper.make_node("Relu", ["x"], ["unread"], name="dead"), *(
        helper.make_node("StridedSlice", ["x", "bc", "ec", "s1"], [f"d{i}"], name=f"dup{i}", domain=TF_DOMAIN,
                         begin_mask=1, end_mask=1) for i in (1, 2)), helper.make_node("Add", ["d1", "d2"], ["dd"])])
    model.graph.output.append(helper.make_tensor_value_info("dd", 1, [2, 2]))
    fast, full = convert(model), convert(_external(model, tmp_path))
    assert (fast.report.path, full.report.path) == ("protobuf", "onnx-ir")
    for r in (fast, full):
        assert r.report.verdict == "verified", r.report.problem()
    assert [r.to_json() for r in fast.report.records] == [r.to_json() for r in full.report.records]
    assert fast.report.cleanup["removed"] == {"Relu": 1, "Slice": 2} and fast.report.cleanup == full.report.cleanup
    assert [_node_bytes(n) for n in fast.model.graph.node] == [_node_bytes(n) for n in full.model.graph.node]
    fast.save(tmp_path / "fast.onnx")
    full.save(tmp_path / "full.onnx")
    from onnx_slice_tools.verification.lowerings import make_session
    feeds = {"x": np.arange(8, dtype=np.float32).reshape(2, 4), "rb": np.array([0, 1], np.int32),
             "cond": np.array(True)}
    a, b = (make_session(str(tmp_path / f)).run(None, feeds) for f in ("fast.onnx", "full.onnx"))
    for u, v in zip(a, b, strict=True):
        np.testing.assert_array_equal(u, v)  # (one runtime, the same graph: bitwise)


def test_the_protobuf_holder_converts_and_verifies_without_importing_onnx_ir(tmp_path):
    """A model the protobuf holder takes is rewritten and verified (as shipped included) without
    importing onnx-ir (the cleanup, whose conditions live on the onnx-ir passes, left out)."""
    onnx.save_model(_shared_model(), tmp_path / "m.onnx")
    code = ("import sys; from onnx_slice_tools import convert\n"
            f"r = convert({str(tmp_path / 'm.onnx')!r}, cleanup=False)\n"
            "print(r.report.path, r.report.verdict, 'onnx_ir' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["protobuf", "verified", "False"], out
