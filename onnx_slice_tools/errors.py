"""Typed errors of onnx-slice-tools.

Every error carries enough context to print one line that names what is wrong:
the file, the node and the field where known.
"""

from __future__ import annotations


class OnnxSliceToolsError(Exception):
    """Base class of every error raised on purpose by onnx-slice-tools."""


class StridedSliceError(OnnxSliceToolsError, ValueError):
    """A StridedSlice spec that the framework rejects, or that cannot be parsed.

    ``index`` is the position in begin/end/strides the problem is at (None when it
    concerns the whole spec), ``field`` the input or attribute involved
    (``"strides"``, ``"shrink_axis_mask"`` ...), ``reason`` a short sentence.
    ``node`` and ``path`` are filled in when the spec came from a model.  ``undefined``: the
    framework has no defined result for the spec (TFLite's kernel: plan_tflite), rather than
    rejecting it.  ``unsupported``: the framework has a result, but not one this tool expresses
    (TFLite's ``offset`` sizing an output apart from the input: plan_tflite).  Either way there
    is no result to check a rewrite against.
    """

    def __init__(self, reason: str, *, index: int | None = None, field: str | None = None,
                 node: str | None = None, path: str | None = None, undefined: bool = False,
                 unsupported: bool = False):
        self.reason = reason
        self.undefined = undefined
        self.unsupported = unsupported
        self.index = index
        self.field = field
        self.node = node
        self.path = path
        super().__init__(self._message())

    def _message(self) -> str:
        where = []
        if self.path:
            where.append(str(self.path))
        if self.node is not None:
            where.append(f"node {self.node!r}")
        if self.field:
            where.append(self.field + (f"[{self.index}]" if self.index is not None else ""))
        elif self.index is not None:
            where.append(f"index {self.index}")
        return (": ".join(where) + ": " if where else "") + self.reason

    def in_context(self, *, node: str | None = None, path: str | None = None) -> "StridedSliceError":
        """A copy of this error that also names the node and/or file."""
        return StridedSliceError(self.reason, index=self.index, field=self.field,
                                 node=node if node is not None else self.node,
                                 path=path if path is not None else self.path, undefined=self.undefined,
                                 unsupported=self.unsupported)


class ModelError(OnnxSliceToolsError, ValueError):
    """A model that cannot be used: unreadable, corrupt, or structurally unusable."""

    def __init__(self, reason: str, *, path: str | None = None, node: str | None = None):
        self.reason = reason
        self.path = path
        self.node = node
        prefix = []
        if path:
            prefix.append(str(path))
        if node is not None:
            prefix.append(f"node {node!r}")
        super().__init__((": ".join(prefix) + ": " if prefix else "") + reason)


class ConversionError(OnnxSliceToolsError):
    """A readable input the tool cannot convert (e.g. an op tf2onnx has no ONNX form for):
    a failed conversion (exit 1), nothing written."""

    def __init__(self, reason: str, *, path: str | None = None):
        self.reason = reason
        self.path = path
        super().__init__(f"{path}: {reason}" if path else reason)


class VerificationError(OnnxSliceToolsError):
    """A rewrite that was produced but failed verification."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type name when the message is empty)."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def one_line(text: str) -> str:
    """``text`` as one printable line: control characters (a newline in a file name, a NUL in
    a node name ...) are shown escaped, as Python would (``\\n``, ``\\x00``)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
