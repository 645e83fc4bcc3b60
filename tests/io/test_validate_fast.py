"""io/validate.py's fast proof (``_Fast``) against the full walk (``_Validator``): on every
sample model, every hostile structural case and byte/field mutants of them, ``validate_model``
accepts exactly what the full walk accepts and refuses with exactly its message; the proof
itself never accepts a model the walk refuses, and does accept the well-formed samples (else
the comparisons would prove nothing).  Its "no external tensor" answer is checked against a
walk over every tensor."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from onnx_slice_tools.errors import ModelError
from onnx_slice_tools.io.files import proto_tensors
from onnx_slice_tools.io.validate import _Fast, _Validator, validate_bytes, validate_model

ROOT = Path(__file__).resolve().parents[2]
MODELS = sorted((ROOT / "models").glob("*.onnx"))


def _load_script(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hostile = _load_script("hostile")
stress = _load_script("mutation_stress")
bench = _load_script("bench")
STRUCTURE = {k: v for k, v in hostile.structure_cases().items() if isinstance(v, onnx.ModelProto)}
SAMPLES = {m.name: onnx.load(str(m), load_external_data=False) for m in MODELS}
SAMPLES["synthetic_fan8"] = bench.synthetic_model(40, False, fan_out=8)
SAMPLES["synthetic_if"] = hostile.base_if()
SAMPLES["synthetic_function"] = hostile.base_function()


def _full_walk(proto):
    """The full walk's verdict: None (accepted) or the message."""
    try:
        _Validator("m.onnx").model(proto)
    except ModelError as exc:
        return str(exc)
    return None


def _outcome(proto, data=None):
    try:
        validate_model(proto, "m.onnx", data=data)
    except ModelError as exc:
        return str(exc)
    return None


def _assert_same(proto, data=None):
    want = _full_walk(proto)
    assert _outcome(proto, data) == want
    if want is not None:  # the proof never vouches for a refused model
        assert not _Fast(_Validator("m.onnx")).model(proto, data)
    return want


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_samples_are_proven_by_the_fast_path(name):
    proto = SAMPLES[name]
    assert _assert_same(proto) is None
    assert _Fast(_Validator(None)).model(proto, None), name


@pytest.mark.parametrize("name", sorted(STRUCTURE))
def test_hostile_structure_same_verdict_and_message(name):
    _assert_same(STRUCTURE[name])


# --------------------------------------------------------------------------- byte mutants

_SOURCES = [m.read_bytes() for m in MODELS] + [SAMPLES["synthetic_if"].SerializeToString()]


def _mutant(model: int, kind, pos: int, value: int, count: int):
    """The byte mutant's bytes and model, or None when the bytes do not parse (then they are not
    validate_model's input)."""
    data = stress.mutate(_SOURCES[model], kind, pos, value, count)
    try:
        return data, onnx.ModelProto.FromString(data)
    except Exception:
        return None


#: byte mutants of the sample models (stress.mutate): (bytes, model), or None when unparsable
_MUTANTS = st.builds(_mutant, st.integers(0, len(_SOURCES) - 1), st.sampled_from(stress.KINDS),
                     st.integers(0, 1 << 30), st.integers(0, 255), st.sampled_from([1, 2, 8]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutant=_MUTANTS)
def test_byte_mutants_same_verdict_and_message(mutant):
    if mutant is None:
        return
    data, proto = mutant
    _assert_same(proto, data)  # the bytes as read
    _assert_same(proto)  # the proto alone (serialized by validate_model)


# --------------------------------------------------------------------------- field mutants

def _string_slots(proto):
    """(message, field name, index or None) of every string field set in ``proto``."""
    from google.protobuf.descriptor import FieldDescriptor as F
    todo, slots = [proto], []
    while todo:
        msg = todo.pop()
        for fd, value in msg.ListFields():
            items = list(value) if fd.is_repeated else [value]
            for k, item in enumerate(items):
                if fd.type == F.TYPE_MESSAGE:
                    todo.append(item)
                elif fd.type == F.TYPE_STRING or (fd.name == "string_data" and msg.data_type == TensorProto.STRING):
                    slots.append((msg, fd.name, k if fd.is_repeated else None))
    return slots


def _with_bytes_in_string(proto, slot: int, raw: bytes) -> bytes:
    """``proto`` serialized with string slot ``slot`` holding ``raw`` (any bytes, UTF-8 or not):
    a marker of the same length is set through the API, then replaced in the bytes."""
    mutant = onnx.ModelProto()
    mutant.CopyFrom(proto)
    msg, name, k = _string_slots(mutant)[slot % len(_string_slots(mutant))]
    marker = b"\x01" + bytes([0x41 + (i % 26) for i in range(max(len(raw), 6) - 2)]) + b"\x02"
    raw = raw.ljust(len(marker), b"z")
    value = marker if name == "string_data" else marker.decode()
    if k is None:
        setattr(msg, name, value)
    else:
        getattr(msg, name)[k] = value
    data = mutant.SerializeToString()
    assert data.count(marker) == 1
    return data.replace(marker, raw)


_FIELD_SOURCES = [SAMPLES[n] for n in sorted(SAMPLES)] + [STRUCTURE[n] for n in ("x_dim_param_odd", "if_graphs_attr")]
_FIELD_SOURCES.append(hostile.base_tf())
_FIELD_SOURCES[-1].graph.initializer.append(helper.make_tensor("strs", TensorProto.STRING, [2], [b"a", b"b"]))
_FIELD_SOURCES[-1].metadata_props.add(key="k", value="v")
_FIELD_SOURCES[-1].graph.value_info.append(helper.make_tensor_value_info("t", TensorProto.FLOAT, ["batch", 3]))
_FIELD_SOURCES[-1].graph.value_info[0].type.denotation = "TENSOR"
_FIELD_SOURCES.append(hostile.base_function())  # a function's value_info: strings inside its types too
_FIELD_SOURCES[-1].functions[0].value_info.append(helper.make_tensor_value_info("fy", TensorProto.FLOAT, ["n"]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.integers(0, len(_FIELD_SOURCES) - 1), slot=st.integers(0, 1 << 20),
       raw=st.one_of(st.binary(min_size=1, max_size=8),
                     st.sampled_from([b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82",
                                      b"\xf0\x9f\x98\x80", b"\xc3\xa9", b"\x00"])))
def test_string_field_mutants_same_verdict_and_message(model, slot, raw):
    """Any bytes (invalid UTF-8: lone continuation, overlong, surrogate, beyond U+10FFFF,
    truncated; valid multi-byte; NUL) in any string field of any message: same verdict."""
    data = _with_bytes_in_string(_FIELD_SOURCES[model], slot, raw)
    proto = onnx.ModelProto.FromString(data)
    _assert_same(proto, data)


def test_every_string_field_of_the_samples_invalid_in_turn():
    """Each string field of each field source (names, types, attributes, subgraphs, tensors,
    string_data, metadata) holding invalid UTF-8 in turn: same verdict and message."""
    for proto in _FIELD_SOURCES:
        for slot in range(len(_string_slots(proto))):
            data = _with_bytes_in_string(proto, slot, b"\xc3(")
            assert _assert_same(onnx.ModelProto.FromString(data), data) is not None


def _graph_mutants():
    """Structural mutants the fast path reads differently from the full walk: nodes out of
    order, a cycle, names given twice (on a Relu: a StridedSlice is refused for its arity), in
    graphs, subgraphs and functions."""
    cases = {}
    m = SAMPLES["synthetic_fan8"]
    relu = next(k for k, n in enumerate(m.graph.node) if n.op_type == "Relu")

    def copy(name):
        cases[name] = c = onnx.ModelProto()
        c.CopyFrom(m)
        return c

    r = copy("reversed")
    nodes = list(r.graph.node)[::-1]
    del r.graph.node[:]
    r.graph.node.extend(nodes)
    copy("cycle").graph.node[0].input[0] = m.graph.node[-1].output[0]
    copy("relu_reads_later_output").graph.node[relu].input[0] = m.graph.node[-1].output[0]
    copy("relu_output_twice").graph.node[relu].output.append(m.graph.node[relu].output[0])
    copy("relu_output_empty_and_new").graph.node[relu].output.extend(["", "extra"])
    copy("relu_output_empty_and_twice").graph.node[relu].output.extend(["", "extra", "extra"])
    copy("relu_output_is_input").graph.node[relu].output[0] = "x"
    copy("relu_output_of_earlier_node").graph.node[relu].output[0] = m.graph.node[0].output[0]
    copy("input_named_empty").graph.input.add().CopyFrom(helper.make_tensor_value_info("", TensorProto.FLOAT, [1]))
    copy("graph_output_undefined").graph.output[0].name = "nowhere"
    cases["subgraph_reads_later_output"] = g = hostile.base_if()
    g.graph.node[0].attribute[0].g.node[0].input[0] = g.graph.node[-1].output[0]
    for label, imports in (("twice", [("", 17), ("ai.onnx", 13)]), ("zero", [("", 0)])):
        cases[f"function_opset_{label}"] = f = hostile.base_function()
        f.functions[0].opset_import.extend(helper.make_opsetid(d, v) for d, v in imports)
    cases["function_reads_later_output"] = f = hostile.base_function()
    f.functions[0].node.append(helper.make_node("Relu", ["late"], ["r"]))
    f.functions[0].node.append(helper.make_node("Relu", [f.functions[0].input[0]], ["late"]))
    return cases


def _all_graph_nodes(proto):
    todo, nodes = [proto.graph] + [f for f in proto.functions], []
    while todo:
        g = todo.pop()
        for n in g.node:
            nodes.append(n)
            todo.extend([a.g for a in n.attribute if a.HasField("g")] + [x for a in n.attribute for x in a.graphs])
    return nodes


_NAME_SOURCES = [SAMPLES[n] for n in ("synthetic_if", "synthetic_function", "tf_if_branch.onnx", "synthetic_fan8")]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.integers(0, len(_NAME_SOURCES) - 1), edits=st.lists(st.tuples(
    st.integers(0, 1 << 16), st.sampled_from(["input", "output"]), st.integers(0, 4), st.integers(0, 1 << 16)),
    min_size=1, max_size=3))
def test_renamed_inputs_and_outputs_same_verdict_and_message(model, edits):
    """Node inputs/outputs (main graph, subgraphs, functions) renamed to another name of the
    model, an empty name or a new one: the scope, SSA and order rules of both paths agree."""
    proto = onnx.ModelProto()
    proto.CopyFrom(_NAME_SOURCES[model])
    nodes = _all_graph_nodes(proto)
    names = sorted({v for n in nodes for v in list(n.input) + list(n.output)} | {"", "fresh"})
    for k, field, slot, pick in edits:
        values = getattr(nodes[k % len(nodes)], field)
        if len(values):
            values[slot % len(values)] = names[pick % len(names)]
        else:
            values.append(names[pick % len(names)])
    _assert_same(proto)


@pytest.mark.parametrize("name", sorted(_graph_mutants()))
def test_graph_mutants_same_verdict_and_message(name):
    _assert_same(_graph_mutants()[name])


@pytest.mark.parametrize("dims", [[-1], [2 ** 40, 2 ** 40], [3]])
def test_a_type_given_twice_in_the_bytes_is_read_merged(dims):
    """A singular message field given twice is merged by the parser (shape dims appended):
    the fast path must see the merge, not only the last part (nor take it for a value_info
    seen before with that last part alone)."""
    base = hostile.base_tf()
    first = helper.make_tensor_type_proto(TensorProto.FLOAT, dims).SerializeToString()
    second = base.graph.input[0].type.SerializeToString()
    clean = onnx.ValueInfoProto(name="t")
    clean.type.ParseFromString(second)
    merged = onnx.ValueInfoProto(name="x").SerializeToString() + _field(2, first) + _field(2, second)  # .type twice
    graph = onnx.GraphProto()
    graph.CopyFrom(base.graph)
    del graph.value_info[:]
    graph_bytes = graph.SerializeToString() + _field(13, clean.SerializeToString()) + _field(13, merged)  # .value_info
    base.ClearField("graph")
    data = base.SerializeToString() + _field(7, graph_bytes)  # ModelProto.graph
    proto = onnx.ModelProto.FromString(data)
    assert len(proto.graph.value_info[1].type.tensor_type.shape.dim) == len(dims) + 3  # merged
    want = _assert_same(proto, data)
    assert (want is None) == (dims == [3])


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


# --------------------------------------------------------------------------- external tensors

def _external(t, location="w.bin"):
    t.data_location = TensorProto.EXTERNAL
    t.ClearField("int32_data")
    t.ClearField("raw_data")
    t.external_data.add(key="location", value=location)
    return t


def _external_cases():
    cases = {"none": hostile.base_tf(), "none_if": hostile.base_if()}
    cases["initializer"] = m = hostile.base_tf()
    _external(m.graph.initializer[0])
    cases["constant_attribute"] = m = hostile.base_tf()
    init = m.graph.initializer.pop()
    m.graph.node.insert(0, helper.make_node("Constant", [], [init.name], value=_external(init)))
    cases["in_subgraph"] = m = hostile.base_if()
    branch = m.graph.node[0].attribute[0].g
    branch.initializer.append(_external(helper.make_tensor("w", TensorProto.FLOAT, [1], [1.0])))
    cases["in_function"] = m = hostile.base_function()
    m.functions[0].node.insert(0, helper.make_node(
        "Constant", [], ["fw"], value=_external(helper.make_tensor("w", TensorProto.FLOAT, [1], [1.0]))))
    return cases


@pytest.mark.parametrize("value", ["\u00b2", "\u0663", "-1", "1.0", ""])
def test_external_length_not_ascii_digits_is_one_clean_refusal(value):
    """"²".isdigit() holds but int("²") fails (it was an internal error); "٣" is read as 3
    by Python only: refused as not a non-negative integer, by both paths."""
    proto = hostile.base_tf()
    _external(proto.graph.initializer[0]).external_data.add(key="length", value=value)
    assert "is not a non-negative integer" in _assert_same(proto)


@pytest.mark.parametrize("name", sorted(_external_cases()))
def test_no_external_tensor_is_only_said_when_true(name):
    proto = _external_cases()[name]
    has = any(t.data_location == TensorProto.EXTERNAL for t in proto_tensors(proto))
    assert has == (not name.startswith("none"))
    may = validate_model(proto, "m.onnx")
    assert may or not has
    if name.startswith("none"):
        assert may is False  # the common case is proven, subgraphs included


def test_validate_bytes_uses_the_bytes_it_parsed():
    data = hostile.base_tf().SerializeToString()
    assert validate_bytes(data, "m.onnx").graph.node[0].op_type == "StridedSlice"
    bad = data.replace(b"ss", b"s\xff", 1)
    with pytest.raises(ModelError, match="not valid UTF-8"):
        validate_bytes(bad, "m.onnx")


def test_a_large_model_gets_the_full_walk(monkeypatch):
    """Above FAST_BYTES (bytes given or not) the model is not parsed a second time for the
    proof (a copy of its weights): the full walk checks it, same verdict and message."""
    from onnx_slice_tools.io import validate
    proto = hostile.base_tf()
    data = proto.SerializeToString()
    monkeypatch.setattr(validate, "FAST_BYTES", len(data))
    assert _Fast(_Validator(None)).model(proto, data)
    monkeypatch.setattr(validate, "FAST_BYTES", len(data) - 1)
    assert not _Fast(_Validator(None)).model(proto, None)
    assert not _Fast(_Validator(None)).model(proto, data)
    assert _assert_same(proto) is None
    assert _assert_same(STRUCTURE["inputs_2"]) is not None


def test_convert_reads_a_model_file_once(tmp_path, monkeypatch):
    """load_ir keeps the proto it read and validated (files.loaded_proto): the conversion's
    baseline is that proto, equal to onnx.load's, not a second read of the file."""
    from onnx_slice_tools import api
    from onnx_slice_tools.io.files import load_ir, loaded_proto
    path = tmp_path / "m.onnx"
    path.write_bytes(hostile.base_tf().SerializeToString())
    assert loaded_proto(load_ir(path)) == onnx.load(str(path), load_external_data=False)
    assert loaded_proto(load_ir(hostile.base_tf())) is None
    reads = []
    real_load = onnx.load
    monkeypatch.setattr(onnx, "load", lambda *a, **k: reads.append(a) or real_load(*a, **k))
    result = api.convert(str(path), verify=False, cleanup=False)
    assert not reads
    assert [n.op_type for n in result.model.graph.node if n.op_type == "StridedSlice"] == []


def test_the_raw_update_ops_the_validator_reads_are_the_rewrite_seams():
    """validate.RAW_UPDATE_INPUTS (io/, below the rewrite) names exactly the op types
    rewrite/updates.py has a seam for: a seam added without its arity would be refused as no
    ONNX operator, an arity without a seam would let a raw node through unrewritten."""
    from onnx_slice_tools.io.validate import RAW_UPDATE_INPUTS
    from onnx_slice_tools.rewrite.updates import SEAMS
    assert set(RAW_UPDATE_INPUTS) == set(SEAMS)


@pytest.mark.parametrize("dims, data, message", [
    ([-2, -3], [0] * 6, "dim 0 is -2"),           # negative dims whose product is positive
    ([2, -1, 0], [], "dim 1 is -1"),              # ... or zero
    ([-1], [], "dim 0 is -1"),
    ([], [5], None),                              # a scalar: one value
    ([], [], "int32_data has 0 values, dims [] need 1"),
    ([0, 3], [], None),
    ([2, 3], [0] * 5, "int32_data has 5 values, dims [2, 3] need 6"),
])
def test_tensor_dims_against_data_same_verdict_and_message(dims, data, message):
    """The tensor check reads dims by rank (a scalar, one dim, several): the first negative dim
    is named even when the product of the dims is positive or zero, and the count of values
    is held to the product, by both paths."""
    proto = hostile.base_tf()
    t = proto.graph.initializer[0]
    del t.dims[:], t.int32_data[:]
    t.dims.extend(dims)
    t.int32_data.extend(data)
    got = _assert_same(proto)
    assert (got is None) if message is None else (message in got)


@pytest.mark.parametrize("field", ["float_data", "int64_data", "raw_data"])
def test_tensor_data_in_a_second_field_same_verdict_and_message(field):
    proto = hostile.base_tf()
    t = proto.graph.initializer[0]  # int32 data
    if field == "raw_data":
        t.raw_data = b"\0" * 4 * len(t.int32_data)
        want = "data in both raw_data and int32_data"
    else:
        getattr(t, field).append(1)
        want = f"cannot be in {field} (expected int32_data)"
    assert want in _assert_same(proto)


# --------------------------------------------------------------------------- initializers in bulk

@pytest.fixture
def bulk(monkeypatch):
    """Every main graph's initializers checked in bulk (_Fast.bulk_tensors), however few."""
    from onnx_slice_tools.io import validate
    monkeypatch.setattr(validate, "BULK_TENSORS", 1)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_samples_are_proven_with_initializers_in_bulk(bulk, name):
    proto = SAMPLES[name]
    assert _assert_same(proto) is None
    assert _Fast(_Validator(None)).model(proto, None), name


@pytest.mark.parametrize("name", sorted(STRUCTURE))
def test_hostile_structure_with_initializers_in_bulk(bulk, name):
    _assert_same(STRUCTURE[name])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(mutant=_MUTANTS)
def test_byte_mutants_with_initializers_in_bulk(bulk, mutant):
    if mutant is None:
        return
    data, proto = mutant
    _assert_same(proto, data)
    _assert_same(proto)


_TYPES = [TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64, TensorProto.DOUBLE, TensorProto.UINT64,
          TensorProto.INT8, TensorProto.FLOAT16, TensorProto.BOOL, TensorProto.INT4, TensorProto.COMPLEX64]
_FIELDS = ["float_data", "int32_data", "int64_data", "double_data", "uint64_data", "string_data", "raw_data"]


def _many_tensors(n: int, seed: int):
    """A model of ``n`` small well-formed initializers of mixed types (typed fields and raw
    bytes), each read by an Identity, every Identity a graph output."""
    import numpy as np
    from onnx import numpy_helper
    rng = np.random.default_rng(seed)
    inits, nodes, outs = [], [], []
    for k in range(n):
        dt = _TYPES[k % len(_TYPES)]
        dims = [int(d) for d in rng.integers(0, 4, size=int(rng.integers(0, 3)))]
        count = int(np.prod(dims)) if dims else 1
        if dt in (TensorProto.INT4, TensorProto.COMPLEX64):  # packed in int32_data; two floats an element
            t = onnx.TensorProto(name=f"t{k}", data_type=dt, dims=dims)
            if dt == TensorProto.INT4:
                t.int32_data.extend([0] * ((count + 1) // 2))
            else:
                t.float_data.extend([1.0] * (2 * count))
        else:
            arr = np.ones(dims, dtype=helper.tensor_dtype_to_np_dtype(dt))
            t = numpy_helper.from_array(arr, f"t{k}") if k % 3 == 0 else \
                helper.make_tensor(f"t{k}", dt, dims, arr.reshape(-1).tolist())
        inits.append(t)
        nodes.append(helper.make_node("Identity", [f"t{k}"], [f"o{k}"]))
        outs.append(helper.make_tensor_value_info(f"o{k}", dt, None))
    graph = helper.make_graph(nodes, "many", [], outs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def test_many_well_formed_initializers_are_proven_in_bulk():
    from onnx_slice_tools.io import validate
    proto = _many_tensors(validate.BULK_TENSORS + 10, 0)
    assert _assert_same(proto) is None
    fast = _Fast(_Validator(None))
    assert fast.model(proto, None)
    view = validate._view_class().FromString(fast.data)
    assert fast.bulk_tensors(view.graph.initializer) is not None  # (the bulk proof itself, not the per-tensor one)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 1 << 16), which=st.integers(0, 1 << 16), field=st.sampled_from(_FIELDS),
       edit=st.sampled_from(["append", "clear", "raw", "dims", "negative", "external", "type", "twice"]))
def test_one_bad_tensor_among_many_same_verdict_and_message(seed, which, field, edit):
    """One tensor of many (checked in bulk) edited in one field: data added to a field, its data
    cleared, raw bytes of the wrong length, a dim changed or negative, external data, another type,
    a field's data given as two chunks in the bytes: verdict and message are the full walk's, and
    the bulk proof never vouches for a refused model."""
    from onnx_slice_tools.io import validate
    proto = _many_tensors(validate.BULK_TENSORS + 4, seed)
    t = proto.graph.initializer[which % len(proto.graph.initializer)]
    data = None
    if edit == "append":
        if field == "raw_data":
            t.raw_data = bytes(t.raw_data) + b"\0"
        elif field == "string_data":
            t.string_data.append(b"x")
        else:
            getattr(t, field).append(1)
    elif edit == "clear":
        t.ClearField(field)
    elif edit == "raw":
        t.raw_data = b"\1" * (len(t.raw_data) + 1 if t.HasField("raw_data") else 3)
    elif edit == "dims":
        t.dims.append(2)
    elif edit == "negative":
        t.dims.append(-1)
    elif edit == "external":
        t.data_location = TensorProto.EXTERNAL
        entry = t.external_data.add()
        entry.key, entry.value = "location", "w.bin"
    elif edit == "type":
        t.data_type = _TYPES[(which // 7) % len(_TYPES)]
    else:  # the tensor's bytes, its field repeated: parsers concatenate (or, for bytes, keep the last)
        data = proto.SerializeToString()
        extra = onnx.TensorProto()
        if field == "raw_data":
            extra.raw_data = b"\2\2"
        elif field == "string_data":
            extra.string_data.append(b"y")
        else:
            getattr(extra, field).append(2)
        mutant = onnx.ModelProto.FromString(data)
        tensor = mutant.graph.initializer[which % len(mutant.graph.initializer)]
        tensor.MergeFromString(extra.SerializeToString())
        data = mutant.SerializeToString()
        proto = onnx.ModelProto.FromString(data)
    _assert_same(proto, data)
    _assert_same(proto)


# --------------------------------------------------------------------------- the node table

def _table_of(proto, data=None):
    """The main graph's NodeTable the validation hands out, or None."""
    tables: list = []
    try:
        validate_model(proto, "m.onnx", data=data, tables=tables)
    except ModelError:
        return None
    return tables[0] if tables else None


def _same_table(table, proto):
    from onnx_slice_tools.graphs.table import NodeTable
    fresh = NodeTable(proto.graph)
    assert (table.ops, table.domains, table.inputs, table.outputs, table.holders) == \
        (fresh.ops, fresh.domains, fresh.inputs, fresh.outputs, fresh.holders)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_the_proof_reads_the_main_graphs_node_table(name):
    """The table the proof reads from its own parse is the table of the proto (what
    rewrite.proto_pass.scan reads), and scan from it is scan of the graph."""
    from onnx_slice_tools.rewrite.proto_pass import scan
    proto = SAMPLES[name]
    table = _table_of(proto)
    assert table is not None
    _same_table(table, proto)
    walked, fresh = scan(proto.graph, table), scan(proto.graph)
    assert (walked.inputs, walked.found, walked.positions) == (fresh.inputs, fresh.found, fresh.positions)
    assert [n.SerializeToString() for n in walked.holders] == [n.SerializeToString() for n in fresh.holders]


def test_a_graph_attribute_of_no_graph_is_a_holder_in_the_table():
    """A node whose attribute is declared GRAPH but holds none is a holder (graphs.table.holds_subgraph)."""
    proto = hostile.base_tf()
    node = proto.graph.node[0]
    a = node.attribute.add()
    a.name, a.type = "body", onnx.AttributeProto.GRAPH
    table = _table_of(proto)
    assert table is not None and table.holders == [0]
    _same_table(table, proto)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutant=_MUTANTS)
def test_byte_mutants_node_table_is_the_protos(mutant):
    if mutant is None:
        return
    data, proto = mutant
    for given_bytes in (data, None):
        table = _table_of(proto, given_bytes)
        if table is not None:
            _same_table(table, proto)
