"""Every file the package reads or writes: models, their external data, reports.

Guarantees (docs/design.md, "Files"):

* Reading: a model's external data locations (in the main graph, every subgraph and every
  function, initializers and tensor attributes alike) must name a regular file inside the
  model's folder, with the tensor's bytes inside it; anything else is a one-line ModelError.
  External tensors are read relative to the model's folder, never the working directory.
* Writing: an output never aliases an input (the model or any of its data files, by real
  path and by inode), never goes through a symlink, never replaces a non-regular file.  A
  model and its ``.data`` are written in a private temporary folder beside the target,
  fsynced, and renamed into place (data, then model); on any failure, SIGINT or SIGTERM,
  what we created is removed.  Temporaries are named ``.onnx-slice-tools-tmp-<pid>-...``;
  those of dead processes (a SIGKILL) or idle for minutes are removed by the next write
  into that folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import signal
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ModelError
from ..errors import first_line as _first_line
from .pause import pause_point

#: Every temporary file or folder we create starts with this.
TEMP_PREFIX = ".onnx-slice-tools-tmp-"
#: A temporary of a live process untouched for this long is stale.
STALE_SECONDS = 300
#: Above this many bytes of weights, a model is saved with external data.
PROTO_LIMIT = 1_800_000_000
#: With external data, in-memory initializers above this size go to ``.data`` too.
EXTERNAL_THRESHOLD = 1024
#: ``model.meta`` key: the files a loaded model was read from (see :func:`input_files`).
INPUTS_KEY = "onnx_slice_tools.input_files"
#: ``model.meta`` key: the validated ModelProto (without external data) a model file was
#: read into by :func:`load_ir` (see :func:`loaded_proto`).
PROTO_KEY = "onnx_slice_tools.loaded_proto"
_CHUNK = 1 << 20


# --------------------------------------------------------------------------- identities

@dataclass(frozen=True)
class FileId:
    """A file we must never write to: its path as given, real path and (st_dev, st_ino)."""

    path: str
    real: str
    inode: tuple | None

    @classmethod
    def of(cls, path) -> "FileId":
        try:
            st = os.stat(path)
            inode = (st.st_dev, st.st_ino)
        except OSError:
            inode = None
        return cls(str(path), os.path.realpath(path), inode)


class FileSet:
    """Many FileIds, looked up by real path and inode in O(1) (a batch's inputs)."""

    def __init__(self, files=()) -> None:
        self.by_real: dict[str, FileId] = {}
        self.by_inode: dict[tuple[int, int], FileId] = {}
        for f in files:
            self.add(f)

    def add(self, f: FileId) -> None:
        self.by_real.setdefault(f.real, f)
        if f.inode is not None:
            self.by_inode.setdefault(f.inode, f)

    def matching(self, real: str, inode) -> list[FileId]:
        return [f for f in (self.by_real.get(real), self.by_inode.get(inode)) if f is not None]

    def __iter__(self):
        return iter(self.by_real.values())


def input_files(model) -> list[FileId]:
    """The files an onnx_ir model loaded by :func:`load_ir` was read from (model + data files)."""
    return list(model.meta.get(INPUTS_KEY, ())) if model is not None else []


def loaded_proto(model):
    """The ModelProto an onnx_ir model read from a file by :func:`load_ir` was deserialized
    from (as ``onnx.load(path, load_external_data=False)`` gives it, validated); None for
    other models.  Shared, not a copy: never to be modified."""
    return model.meta.get(PROTO_KEY)


def check_output(path, inputs=(), *, what: str = "") -> None:
    """Refuse to write ``path`` when it is a symlink, not a regular file, or any of ``inputs``."""
    path = Path(path)
    label = f"{what} {path}" if what else str(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise ModelError(f"cannot write: {exc.strerror}", path=label) from None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            hint = " (for standard output, give '-')" if what == "report" and _is_stream(path) else ""
            raise ModelError(f"is a symlink; refusing to write through it{hint}", path=label)
        if stat.S_ISDIR(st.st_mode):
            raise ModelError("is a folder; refusing to write over it", path=label)
        if not stat.S_ISREG(st.st_mode):
            raise ModelError("is not a regular file; refusing to replace it", path=label)
    real = os.path.join(os.path.realpath(path.parent), path.name)
    inode = (st.st_dev, st.st_ino) if st is not None else None
    for f in inputs.matching(real, inode) if isinstance(inputs, FileSet) else inputs:
        if real == f.real or (inode is not None and inode == f.inode):
            raise ModelError(f"is the input file {f.path}; refusing to write over it", path=label)


def _is_stream(path) -> bool:
    """Whether ``path`` leads to a terminal, pipe or socket (``/dev/stdout`` and the like)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def data_path(path) -> Path:
    """Where the external data of a model saved at ``path`` goes."""
    path = Path(path)
    return path.with_name(path.name + ".data")


def check_convert_outputs(src, dst, report=None, inputs=None) -> None:
    """The outputs of one conversion -- model ``dst``, its ``.data``, the JSON ``report`` --
    are writable files that alias neither each other nor any input (``inputs``: the model's
    files, see :func:`input_files`; the model file alone when not known yet)."""
    inputs = list(inputs) if inputs is not None else [FileId.of(src)]
    outs = [("output", Path(dst)), ("output", data_path(dst))] + ([("report", Path(report))] if report else [])
    for what, p in outs:
        check_output(p, inputs, what=what)
    if report:
        rid = FileId.of(report)
        for _, p in outs[:2]:
            if os.path.join(os.path.realpath(p.parent), p.name) == rid.real:
                raise ModelError(f"is also the output {p}; give the report another name", path=f"report {report}")


# --------------------------------------------------------------------------- walking tensors

def proto_tensors(model):
    """Every TensorProto of a ModelProto: initializers and tensor attributes of the main graph,
    every subgraph and every function."""
    from onnx import AttributeProto
    from ..graphs.walk import proto_graphs
    for g, _, is_function in proto_graphs(model):
        if not is_function:
            yield from g.initializer
            for s in g.sparse_initializer:
                yield from (s.values, s.indices)
        for node in g.node:
            for a in node.attribute:
                if a.type == AttributeProto.TENSOR:
                    yield a.t
                elif a.type == AttributeProto.TENSORS:
                    yield from a.tensors
                elif a.type == AttributeProto.SPARSE_TENSOR:
                    yield from (a.sparse_tensor.values, a.sparse_tensor.indices)
                elif a.type == AttributeProto.SPARSE_TENSORS:
                    for s in a.sparse_tensors:
                        yield from (s.values, s.indices)


def _is_external(t) -> bool:
    from onnx import TensorProto
    return t.data_location == TensorProto.EXTERNAL


def _ir_tensor_slots(m):
    """(tensor, put) for every tensor of an onnx_ir model: initializers and tensor attributes
    of the main graph, subgraphs and functions; ``put(new)`` puts another tensor in its place."""
    import onnx_ir as ir
    from ..graphs.walk import all_graphs as _all_graphs
    for graph, _, is_function in _all_graphs(m):
        if not is_function:
            for value in graph.initializers.values():
                if value.const_value is not None:
                    yield value.const_value, (lambda t, v=value: setattr(v, "const_value", t))
        for node in graph:
            for name, attr in list(node.attributes.items()):
                if attr.is_ref():
                    continue
                if attr.type == ir.AttributeType.TENSOR and attr.value is not None:
                    yield attr.value, (lambda t, n=node, k=name, a=attr: n.attributes.__setitem__(
                        k, ir.AttrTensor(k, t, doc_string=a.doc_string)))
                elif attr.type == ir.AttributeType.TENSORS and attr.value is not None:
                    for i, t0 in enumerate(attr.value):
                        def put(t, n=node, k=name, a=attr, i=i):
                            items = list(n.attributes[k].value)
                            items[i] = t
                            n.attributes[k] = ir.AttrTensors(k, items, doc_string=a.doc_string)
                        yield t0, put


# --------------------------------------------------------------------------- reading

def _external_fields(t) -> dict:
    return {e.key: e.value for e in t.external_data}


#: element bits of the packed sub-byte types (UINT4, INT4, FLOAT4E2M1, UINT2, INT2), stored two
#: (4-bit) or four (2-bit) to a byte in TensorProto raw data and by onnxruntime
PACKED_BITS = {21: 4, 22: 4, 23: 4, 25: 2, 26: 2}


def _expected_nbytes(t) -> int | None:
    """Bytes of a tensor's data from its shape and type; None when not known here (strings,
    float6 types, types newer than this code): then only offset/length are checked."""
    import numpy as np
    from onnx import helper
    if not (1 <= t.data_type <= 26) or t.data_type == 8:
        return None
    n = int(np.prod(t.dims, dtype=np.int64)) if len(t.dims) else 1
    if t.data_type in PACKED_BITS:
        return (n * PACKED_BITS[t.data_type] + 7) // 8
    return n * helper.tensor_dtype_to_np_dtype(t.data_type).itemsize


def external_source(t, base: Path, model_path) -> tuple[Path, int, int]:
    """Check one external TensorProto against its model's folder ``base`` (absolute);
    returns (data file, offset, length).  Raises a one-line ModelError naming the tensor."""
    fields = _external_fields(t)
    where = f"tensor {t.name!r}"
    location = fields.get("location", "")
    if not location:
        raise ModelError(f"{where}: external data without a location", path=str(model_path))
    if "\0" in location:
        raise ModelError(f"{where}: external data location {location!r} contains a NUL character",
                         path=str(model_path))
    real_base = Path(os.path.realpath(base))
    target = Path(os.path.realpath(base / location))
    if os.path.isabs(location) or (target != real_base and real_base not in target.parents):
        raise ModelError(f"{where}: external data location {location!r} resolves outside the "
                         "model's folder; refusing to read it", path=str(model_path))
    try:
        st = os.stat(target)
    except FileNotFoundError:
        raise ModelError(f"{where}: external data file {location!r} not found", path=str(model_path)) from None
    except OSError as exc:
        raise ModelError(f"{where}: external data file {location!r}: {exc.strerror}", path=str(model_path)) from None
    if not stat.S_ISREG(st.st_mode):
        raise ModelError(f"{where}: external data file {location!r} is not a regular file", path=str(model_path))
    try:
        offset = int(fields.get("offset") or 0)
        length = int(fields["length"]) if fields.get("length") else None
    except ValueError:
        raise ModelError(f"{where}: external data offset/length are not integers", path=str(model_path)) from None
    expected = _expected_nbytes(t)
    if length is None:
        length = expected if expected is not None else st.st_size - offset
    if offset < 0 or length < 0 or offset + length > st.st_size:
        raise ModelError(f"{where}: external data offset {offset} + length {length} is beyond the end of "
                         f"{location!r} ({st.st_size} bytes)", path=str(model_path))
    if expected is not None and length != expected:
        raise ModelError(f"{where}: external data length {length} does not match its shape and type "
                         f"({expected} bytes)", path=str(model_path))
    return target, offset, length


def check_external_data(proto, model_path, *, base=None) -> list[Path]:
    """Check every external tensor of ``proto`` (see :func:`external_source`) against the
    folder of ``model_path`` (or ``base``); returns the data files it reads, real paths, sorted."""
    base = Path(os.path.abspath(model_path)).parent if base is None else Path(base)
    files = {external_source(t, base, model_path)[0] for t in proto_tensors(proto) if _is_external(t)}
    return sorted(files)


def _set_base_dir(m, base: str) -> None:
    import onnx_ir as ir
    for t, _ in _ir_tensor_slots(m):
        if isinstance(t, ir.ExternalTensor):
            t.base_dir = base


#: What a framework input is called in messages, by :func:`source_kind`.
SOURCE_LABELS = {"tflite": "a .tflite model", "saved_model": "a SavedModel folder", "keras": "a Keras model"}


def _regular_input(p: Path) -> None:
    kind = source_kind(p)
    if kind is not None:  # a framework model where an ONNX file is read (verify FILE, compare ...)
        raise ModelError(f"is {SOURCE_LABELS[kind]}, not an ONNX file: `convert` reads it (through tf2onnx) and "
                         "checks the result against the framework; `inspect` and `verify FILE CONVERTED.onnx` "
                         "take it too", path=str(p))
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise ModelError("no such file", path=str(p)) from None
    except OSError as exc:
        raise ModelError(f"cannot read: {exc.strerror}", path=str(p)) from None
    if stat.S_ISDIR(st.st_mode):
        raise ModelError("is a folder, not a model file", path=str(p))
    if not stat.S_ISREG(st.st_mode):
        raise ModelError("not a regular file", path=str(p))


def read_model_proto(path):
    """The ModelProto of a model file, without its external data (checked, see module doc)."""
    return _read_validated(path)[0]


def _read_validated(path, tables: list | None = None):
    """(ModelProto, whether it may hold external tensors) of a model file, validated.  Read
    as ``onnx.load(path, load_external_data=False)`` does (the format from the extension), the
    bytes kept for the validation's own parse.  ``tables``: as validate.validate_model takes it."""
    import onnx
    p = Path(path)
    _regular_input(p)
    try:
        with open(p, "rb") as f:
            data = f.read()
        fmt = onnx.serialization.registry.get_format_from_file_extension(os.path.splitext(os.path.abspath(p))[1])
        proto = onnx.load_model_from_string(data, format=fmt or "protobuf")
    except Exception as exc:
        raise ModelError(f"cannot read the model: {_first_line(exc)}", path=str(p)) from None
    from .validate import validate_model
    # before any native code or onnx-ir's reader sees it
    external = validate_model(proto, p, data=data if fmt in (None, "protobuf") else None, tables=tables)
    return proto, external


def load_plain_proto(source, *, path_hint: str | None = None, tables: list | None = None):
    """(proto, input files, has external tensors) of a path or a ModelProto, validated (see
    :func:`read_model_proto`).  For a path, ``proto`` and the validation's answer are what
    :func:`load_ir` takes as ``read``.  A given ModelProto is copied (the caller may edit the copy);
    its input files are none.  ``tables``: a list that gets the main graph's NodeTable when the
    validation read it (validate.validate_model)."""
    import onnx
    if isinstance(source, (str, os.PathLike)):
        proto, external = _read_validated(source, tables)
        inputs = [FileId.of(source)]
    elif isinstance(source, onnx.ModelProto):
        from .validate import validate_model
        external = validate_model(source, path_hint, tables=tables)
        proto, inputs = onnx.ModelProto(), []
        proto.CopyFrom(source)
    else:
        raise TypeError(f"model must be an onnx.ModelProto or a path, got {type(source).__name__}")
    # the validation proves most models free of external tensors; else they are looked for
    return proto, inputs, bool(external) and any(_is_external(t) for t in proto_tensors(proto))


def proto_weight_bytes(proto) -> int:
    """Bytes of the main graph's initializers of a ModelProto (as :func:`model_weight_bytes`)."""
    import numpy as np
    from onnx import helper
    total = 0
    for t in proto.graph.initializer:
        if t.HasField("raw_data"):
            total += len(t.raw_data)
            continue
        n = int(np.prod(t.dims, dtype=np.int64)) if t.dims else 1
        try:
            total += n * np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type)).itemsize
        except Exception:  # strings and unknown types: their serialized size
            total += t.ByteSize()
    return total


def load_ir(source, *, path_hint: str | None = None, read=None):
    """An onnx_ir.Model from a path (external data checked, then read lazily from the model's
    folder) or a ModelProto.  A loaded model records its input files (:func:`input_files`).
    ``read``: (proto, may hold external tensors) of the path, already read by :func:`load_plain_proto`."""
    import onnx
    import onnx_ir as ir
    if isinstance(source, (str, os.PathLike)):
        p = Path(source)
        proto, external = read if read is not None else _read_validated(p)
        data_files = check_external_data(proto, p) if external else []
        try:
            m = ir.serde.deserialize_model(proto)
        except Exception as exc:
            raise ModelError(unreadable(exc, proto), path=str(p)) from None
        if external:  # else no tensor to point at the model's folder: not walked for them
            _set_base_dir(m, os.path.dirname(os.path.abspath(p)))
        m.meta[INPUTS_KEY] = [FileId.of(p)] + [FileId.of(f) for f in data_files]
        m.meta[PROTO_KEY] = proto
        _keep_passthrough_inputs(m, proto)
        return m
    if isinstance(source, onnx.ModelProto):
        # external data of a ModelProto: relative to the working directory, checked as for a
        # file there, then fixed to it (a later chdir does not matter)
        from .validate import validate_model
        external = validate_model(source, path_hint)
        here = Path.cwd()
        data_files = check_external_data(source, path_hint or "model", base=here) if external and any(
            _is_external(t) for t in proto_tensors(source)) else []
        try:
            m = ir.from_proto(source)
        except Exception as exc:
            raise ModelError(unreadable(exc, source), path=path_hint) from None
        if data_files:
            _set_base_dir(m, str(here))
            m.meta[INPUTS_KEY] = [FileId.of(f) for f in data_files]
        _keep_passthrough_inputs(m, source)
        return m
    raise TypeError(f"model must be an onnx.ModelProto or a path, got {type(source).__name__}")


def unreadable(exc: BaseException, proto) -> str:
    """Why onnx-ir could not read ``proto``, in one line naming the node and field: a sparse
    tensor attribute (which onnx-ir does not read; sparse initializers it does) is named; otherwise the innermost cause of
    onnx-ir's error chain, which says what failed (the outer ones only say where it recursed)."""
    from onnx import AttributeProto

    from ..graphs.walk import proto_graphs
    for g, _, _ in proto_graphs(proto):
        for node in g.node:
            for a in node.attribute:
                if a.type in (AttributeProto.SPARSE_TENSOR, AttributeProto.SPARSE_TENSORS):
                    who = repr(node.name) if node.name else f"(unnamed, output {list(node.output)[:1]})"
                    return (f"node {who} ({node.op_type}): attribute {a.name!r}: sparse tensors are not "
                            "supported; give the value dense (a Constant's 'value')")
    inner = exc
    while (cause := inner.__cause__ or inner.__context__) is not None:
        inner = cause
    return f"cannot read the model: {_first_line(inner)}"


def _keep_passthrough_inputs(m, proto) -> None:
    """A main-graph input that is also a graph output is one onnx-ir value, which takes the
    output's declaration: give it back the input's (type and shape), so the model is written
    with the inputs it was read with (the output then declares the same, true, shape)."""
    import onnx_ir as ir
    outputs = {id(v) for v in m.graph.outputs}
    declared = {vi.name: vi for vi in proto.graph.input}
    for value in m.graph.inputs:
        vi = declared.get(value.name)
        if id(value) not in outputs or vi is None or not vi.type.HasField("tensor_type"):
            continue
        kept = ir.serde.deserialize_value_info_proto(vi, None)
        value.type, value.shape = kept.type, kept.shape


def adopt_files(new, old):
    """``new`` (e.g. ``old`` round-tripped through a ModelProto) reads its external data from
    where ``old`` does and records the same input files."""
    import onnx_ir as ir
    bases = {str(t.base_dir) for t, _ in _ir_tensor_slots(old) if isinstance(t, ir.ExternalTensor)}
    if len(bases) == 1:
        _set_base_dir(new, bases.pop())
    if INPUTS_KEY in old.meta:
        new.meta[INPUTS_KEY] = old.meta[INPUTS_KEY]
    return new


def _copy_range(src: Path, offset: int, length: int, out) -> None:
    """Stream ``length`` bytes at ``offset`` of ``src`` into the open file ``out`` through one
    reused 1 MiB buffer (no fresh multi-MiB bytes object per read)."""
    buf = bytearray(_CHUNK)
    view = memoryview(buf)
    with open(src, "rb", buffering=0) as f:
        f.seek(offset)
        left = length
        while left:
            n = f.readinto(view[:min(_CHUNK, left)])
            if not n:
                raise ModelError(f"external data file ended early (wanted {length} bytes at {offset})",
                                 path=str(src))
            out.write(view[:n])
            left -= n


def load_model_proto(path, *, external_data: bool = True):
    """The ModelProto of a model file, its external data checked (see :func:`load_ir`) and,
    with ``external_data``, read in."""
    proto, external = _read_validated(path)
    if not external:
        return proto
    check_external_data(proto, path)
    return _read_external_in(proto, path) if external_data else proto


def with_external_data(proto, source):
    """A copy of ``proto`` with its external tensors read in (from the folder of ``source``,
    a model path; the working directory for a ModelProto source), in every graph, subgraph
    and function."""
    import onnx
    full = onnx.ModelProto()
    full.CopyFrom(proto)
    return _read_external_in(full, source)


def _read_external_in(full, source):
    import io

    from onnx import TensorProto
    label = str(source) if isinstance(source, (str, os.PathLike)) else "model"
    base = Path(os.path.abspath(source)).parent if isinstance(source, (str, os.PathLike)) else Path.cwd()
    for t in proto_tensors(full):
        if not _is_external(t):
            continue
        src, offset, length = external_source(t, base, label)
        buf = io.BytesIO()
        _copy_range(src, offset, length, buf)
        t.raw_data = buf.getvalue()
        del t.external_data[:]
        t.data_location = TensorProto.DEFAULT
    return full


#: fingerprint() reads files up to this size whole (and parses them only if they name a data file)
_FINGERPRINT_READ = 64 << 20
#: the key every external tensor's ``external_data`` holds, as its bytes appear in a serialized model
_EXTERNAL_KEY = b"location"


TFLITE_SUFFIXES = (".tflite",)
KERAS_SUFFIXES = (".keras", ".h5")


def source_kind(path) -> str | None:
    """"tflite", "saved_model", "keras" or None (not a framework source): by the path alone
    (here, not in frontends/sources.py, so that finding models imports no framework code or numpy)."""
    p = Path(path)
    if p.is_dir():
        return "saved_model" if (p / "saved_model.pb").is_file() or (p / "saved_model.pbtxt").is_file() else None
    suffix = p.suffix.lower()
    if suffix in TFLITE_SUFFIXES:
        return "tflite"
    if suffix in KERAS_SUFFIXES:
        return "keras"
    return None


def fingerprint(path) -> tuple[str, list[str]]:
    """sha256 of a model file's bytes plus path, size and mtime of each external data file it
    names (every graph, subgraph, function); and those data files.  An unreadable model is
    fingerprinted by its bytes alone."""
    if os.path.isdir(path):  # a SavedModel: every file in it, by relative path and bytes
        h = hashlib.sha256()
        files = []
        for f in sorted(Path(path).rglob("*")):
            if f.is_file():
                h.update(f"{f.relative_to(path)}\n".encode())
                _hash_file(h, f)
                files.append(os.path.realpath(f))
        return h.hexdigest(), files
    files = []
    data = None
    if os.path.getsize(path) <= _FINGERPRINT_READ:  # read once: hashed, and parsed only if needed
        with open(path, "rb") as stream:
            data = stream.read()
        h = hashlib.sha256(data)
        if _EXTERNAL_KEY not in data:  # no tensor names a data file (each external one has this key)
            return h.hexdigest(), files
    else:
        h = _hash_file(hashlib.sha256(), path)
    try:
        import onnx
        proto = onnx.load(str(path), load_external_data=False)
        base = Path(os.path.abspath(path)).parent
        locations = sorted({_external_fields(t).get("location", "") for t in proto_tensors(proto)
                            if _is_external(t)})
        for loc in locations:
            p = base / loc
            try:
                st = os.stat(p)
                h.update(f"{loc}:{st.st_size}:{st.st_mtime_ns}\n".encode())
                files.append(os.path.realpath(p))
            except (OSError, ValueError):
                h.update(f"{loc}:missing\n".encode())
    except Exception:  # unreadable: its bytes alone
        pass
    return h.hexdigest(), files


def file_sha256(path) -> str | None:
    """sha256 of a file's bytes (None when it cannot be read)."""
    try:
        return _hash_file(hashlib.sha256(), path).hexdigest()
    except OSError:
        return None


def _hash_file(h, path):
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h


# --------------------------------------------------------------------------- temporaries

def _pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (killed, its parent has not reaped it
    yet: it writes nothing any more)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):  # no /proc (not Linux): it exists
        return True


def _newest_mtime(path: str) -> float:
    newest = os.lstat(path).st_mtime
    if os.path.isdir(path) and not os.path.islink(path):
        for e in os.scandir(path):
            with contextlib.suppress(OSError):
                newest = max(newest, e.stat(follow_symlinks=False).st_mtime)
    return newest


def clean_stale_temps(folder) -> list[str]:
    """Remove our temporaries in ``folder`` whose process is dead or that were idle for
    STALE_SECONDS; returns their names."""
    removed: list[str] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    now = time.time()
    for e in entries:
        if not e.name.startswith(TEMP_PREFIX):
            continue
        try:
            pid = int(e.name[len(TEMP_PREFIX):].split("-", 1)[0])
        except ValueError:
            continue
        try:
            stale = (pid != os.getpid() and not _pid_alive(pid)) or now - _newest_mtime(e.path) > STALE_SECONDS
            if not stale:
                continue
            if e.is_dir(follow_symlinks=False):
                shutil.rmtree(e.path)
            else:
                os.unlink(e.path)
            removed.append(e.name)
        except OSError:
            pass
    return removed


def _temp_name(suffix: str = "") -> str:
    return f"{TEMP_PREFIX}{os.getpid()}-{secrets.token_hex(4)}{suffix}"


class termination_raises:
    """While active (main thread only), SIGTERM and SIGHUP raise SystemExit(128 + signal) so
    that ``finally`` blocks run (remove what a write created, stop worker processes); SIGINT
    raises KeyboardInterrupt anyway.  The previous handlers come back on exit."""

    def __enter__(self):
        self.saved = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGHUP):
                try:
                    self.saved[sig] = signal.signal(sig, _raise_exit)
                except (ValueError, OSError):
                    pass
        return self

    def __exit__(self, *exc):
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)
        return False


def _raise_exit(signum, frame):
    raise SystemExit(128 + signum)


def _fsync_dir(folder) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@contextlib.contextmanager
def _writing(path):
    """An OSError while writing ``path`` (a full disk, a file size limit, a read-only
    folder) is a one-line ModelError naming ``path``, not the input."""
    try:
        yield
    except OSError as exc:
        raise ModelError(f"cannot write: {exc.strerror or _first_line(exc)}", path=str(path)) from None


def write_atomically(path, write, *, protect=()) -> None:
    """Call ``write(tmp_path)`` then rename over ``path``: readers never see a partial file.
    ``path`` is checked with :func:`check_output` against ``protect`` (input files)."""
    path = Path(path)
    check_output(path, protect)
    with _writing(path):
        _write_atomically(path, write, protect)


def _write_atomically(path: Path, write, protect) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_temps(path.parent)
    tmp = path.parent / _temp_name(".tmp")
    with termination_raises():
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
            write(tmp)
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
            os.chmod(tmp, _file_mode())  # a written file gets the usual mode
            pause_point("write-written")
            check_output(path, protect)  # nothing appeared there meanwhile
            os.replace(tmp, path)
            _fsync_dir(path.parent)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


def write_text(path, text: str, *, protect=()) -> None:
    write_atomically(path, lambda tmp: Path(tmp).write_text(text), protect=protect)


# --------------------------------------------------------------------------- saving models

@dataclass
class SavedModel:
    """What :func:`save_model` wrote."""

    path: str
    data_path: str | None
    sha256: str
    data_size: int | None
    #: a stale ``.data`` of the model this save replaced (see :func:`stale_data_file`)
    removed: list = field(default_factory=list)


#: an old output model above this size is not read to prove its ``.data`` stale
STALE_MODEL_BYTES = 64 << 20


def stale_data_file(path, data_file) -> tuple | None:
    """``(st_dev, st_ino)`` of ``data_file`` (``OUTPUT.data``) when it is provably the data of
    the model now at ``path`` (that a save without external data is about to replace): both
    regular files, and the old model (at most STALE_MODEL_BYTES, read without its data) names
    it as an external data location.  None otherwise: a file we cannot prove ours is kept.
    (The caller has already refused a ``data_file`` that is an input.)"""
    try:
        st_model, st_data = os.lstat(path), os.lstat(data_file)
    except OSError:
        return None
    if not (stat.S_ISREG(st_model.st_mode) and stat.S_ISREG(st_data.st_mode)) or st_model.st_size > STALE_MODEL_BYTES:
        return None
    try:
        import onnx
        old = onnx.load(str(path), load_external_data=False)
        locations = {_external_fields(t).get("location", "") for t in proto_tensors(old) if _is_external(t)}
    except Exception:  # not a model we can read: not provably ours
        return None
    folder = os.path.realpath(Path(path).parent)
    target = os.path.join(folder, Path(data_file).name)
    if any(loc and "\0" not in loc and os.path.realpath(os.path.join(folder, loc)) == target for loc in locations):
        return (st_data.st_dev, st_data.st_ino)
    return None


def _remove_if_same(path, inode) -> list[str]:
    """Unlink ``path`` if it is still the file ``inode`` (st_dev, st_ino); the removed paths."""
    if inode is None:
        return []
    try:
        st = os.lstat(path)
        if (st.st_dev, st.st_ino) == inode and stat.S_ISREG(st.st_mode):
            os.unlink(path)
            return [str(path)]
    except OSError:
        pass
    return []


def model_weight_bytes(m) -> int:
    """Bytes of the initializers of an onnx_ir model (external data sizes from its records)."""
    return sum(v.const_value.nbytes for v in m.graph.initializers.values() if v.const_value is not None)


def external_weight_bytes(m) -> int:
    """Bytes of an onnx_ir model's external-data tensors (every graph and function), from their
    records, nothing read: what a session of the model reads in from disk."""
    import onnx_ir as ir
    return sum(t.nbytes for t, _ in _ir_tensor_slots(m) if isinstance(t, ir.ExternalTensor))


def has_external_tensors(m) -> bool:
    import onnx_ir as ir
    return any(isinstance(t, ir.ExternalTensor) for t, _ in _ir_tensor_slots(m))


def _externalize(m, data_file: Path, data_name: str, move_inline: bool) -> list:
    """Stream every external tensor (and, with ``move_inline``, every in-memory initializer
    above EXTERNAL_THRESHOLD) into ``data_file``; point the model at it.  Returns the undo
    list of (put, old tensor)."""
    import onnx_ir as ir
    undo, written = [], {}
    initializers = {id(v.const_value) for g in m.graphs() for v in g.initializers.values()}
    key: tuple  # (real path, offset, length) of an external tensor, ("mem", id) of one in memory
    with open(data_file, "wb") as out:
        for t, put in list(_ir_tensor_slots(m)):
            external = isinstance(t, ir.ExternalTensor)
            if not external and not (move_inline and id(t) in initializers and t.nbytes > EXTERNAL_THRESHOLD
                                     and t.dtype != ir.DataType.STRING):
                continue
            if external:
                src = os.path.join(str(t.base_dir), str(t.location))
                start, length = t.offset or 0, t.length if t.length is not None else t.nbytes
                key = (os.path.realpath(src), start, length)
            else:
                key = ("mem", id(t))
            if key not in written:
                offset = out.tell()
                if external:
                    _copy_range(Path(src), start, length, out)
                else:
                    out.write(t.tobytes())
                written[key] = (offset, out.tell() - offset)
            offset, length = written[key]
            new = ir.ExternalTensor(data_name, offset, length, t.dtype, shape=ir.Shape(list(t.shape.dims)),
                                    name=t.name, doc_string=t.doc_string, base_dir=str(data_file.parent))
            put(new)
            undo.append((put, t))
        out.flush()
        os.fsync(out.fileno())
    return undo


def save_model(model, path, *, external_data: bool | None = None, protect=(), proto=None,
               no_external: bool = False, on_landing=None) -> SavedModel:
    """Save a ModelProto or an onnx_ir.Model to ``path`` (see the module doc).  A ModelProto
    without external tensors, below the protobuf limit, is written as it is (no onnx-ir).

    A model with external weights (or above ~1.8 GB) is written as ``path`` plus
    ``path.data`` (streamed from the input's files, never all in memory); ``external_data``
    forces either layout.  ``protect``: more input files never to write over (a loaded
    model's own are always protected).  ``proto``: the onnx_ir model already serialized
    (``ir.to_proto(model)``), written as it is when no tensor moves (saves a serialization).
    ``no_external``: the caller knows the ModelProto holds no external tensor (no walk).
    ``on_landing(sha256, data_size)``: called once both files are written and fsynced in the
    temporary folder, before anything is renamed into place (what a batch journals: after a
    SIGKILL, the files found with that sha256 / size are ours, caught mid-write)."""
    import onnx
    path = Path(path)
    if isinstance(model, onnx.ModelProto) and external_data is not True and (no_external or not any(
            _is_external(t) for t in proto_tensors(model))) and model.ByteSize() <= PROTO_LIMIT:
        m, proto, use_external = None, model, False  # written as it is: no tensor moves
    else:
        import onnx_ir as ir
        m = ir.from_proto(model) if isinstance(model, onnx.ModelProto) else model
        use_external = None
    inputs = list(protect) + input_files(m)
    data_file = data_path(path)
    check_output(path, inputs, what="output")
    check_output(data_file, inputs, what="output")
    if use_external is None:
        use_external = external_data if external_data is not None else (
            has_external_tensors(m) or model_weight_bytes(m) > PROTO_LIMIT)
    with _writing(path):
        return _save(m, path, data_file, inputs, use_external, external_data, proto, on_landing)


def _save(m, path: Path, data_file: Path, inputs, use_external: bool, external_data, proto=None,
          on_landing=None) -> SavedModel:
    """``m`` None: ``proto`` is written as it is (onnx-ir is not even imported)."""
    if m is not None:
        import onnx_ir as ir
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_temps(path.parent)
    tmpdir = path.parent / _temp_name()
    renamed = None
    with termination_raises():
        try:
            os.mkdir(tmpdir, 0o700)
            tmp_model, tmp_data = tmpdir / path.name, tmpdir / data_file.name
            undo = []
            try:
                if use_external:
                    undo = _externalize(m, tmp_data, data_file.name,
                                        move_inline=bool(external_data) or model_weight_bytes(m) > PROTO_LIMIT)
                elif external_data is False and m is not None:
                    for t, put in list(_ir_tensor_slots(m)):
                        if isinstance(t, ir.ExternalTensor):
                            put(ir.Tensor(t.numpy(), name=t.name, doc_string=t.doc_string))
                            undo.append((put, t))
                blob = (proto if proto is not None and not undo and not use_external
                        else ir.to_proto(m)).SerializeToString()
            finally:
                for put, old in reversed(undo):
                    put(old)
            fd = os.open(tmp_model, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _file_mode())
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
                f.flush()
                os.fsync(f.fileno())
            has_data = tmp_data.exists()
            if has_data:
                os.chmod(tmp_data, _file_mode())
            pause_point("save-written")
            sha256 = hashlib.sha256(blob).hexdigest()
            if on_landing is not None:
                on_landing(sha256, tmp_data.stat().st_size if has_data else None)
            check_output(path, inputs, what="output")
            check_output(data_file, inputs, what="output")
            stale = None if has_data else stale_data_file(path, data_file)
            if has_data:
                os.replace(tmp_data, data_file)
                renamed = data_file
                pause_point("save-data-landed")
            os.replace(tmp_model, path)
            renamed = None
            removed = _remove_if_same(data_file, stale)
            _fsync_dir(path.parent)
            return SavedModel(str(path), str(data_file) if has_data else None, sha256,
                              data_file.stat().st_size if has_data else None, removed)
        finally:
            if renamed is not None:  # the model did not land: its data must not stay either
                with contextlib.suppress(OSError):
                    os.unlink(renamed)
            shutil.rmtree(tmpdir, ignore_errors=True)
