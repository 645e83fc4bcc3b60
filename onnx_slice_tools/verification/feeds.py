"""Feeds and fetches of a whole-model run: random values for every fed input, index inputs
within the bounds the model indexes with them (:func:`random_feeds`), and one run fetching
named outputs as numpy arrays (:func:`run_taps`).

Apart from the runs so that the in-place run (verification/inplace.py), the as-shipped run
(verification/shipped.py) and the cleanup's check draw their inputs and fetch their outputs
one way.
"""

from __future__ import annotations

import numpy as np

from .sizing import Skip, dim_key, fed_inputs, unranked_vector


def _index_bounds(proto, shapes: dict) -> dict:
    """Integer graph inputs used as indices (Gather*) -> the size of the axis they index."""
    bounds: dict = {}
    for n in proto.graph.node:
        if n.op_type in ("Gather", "GatherElements", "GatherND") and len(n.input) > 1:
            data = shapes.get(n.input[0], (None, None))[1]
            axis = next((a.i for a in n.attribute if a.name == "axis"), 0)
            dim = None
            if data is not None and len(data):
                dim = data[axis] if n.op_type != "GatherND" else min(d for d in data if d is not None) \
                    if any(d is not None for d in data) else None
            prev = bounds.get(n.input[1], dim)
            bounds[n.input[1]] = None if prev is None or dim is None else min(prev, dim)
    return bounds


#: ONNX integer element types (int8 .. uint64): what an index input can be
_INTEGER_ELEMS = frozenset({2, 3, 4, 5, 6, 7, 12, 13})
#: int4, uint4, float4e2m1: packed two to a byte, not generated
_SUB_BYTE = (21, 22, 23)


def random_feeds(proto, sizes: dict, shapes: dict, rng: np.random.Generator, vectors: dict | None = None,
                 fed: list | None = None) -> dict:
    """Random values for every fed input: floats standard normal, integer indices in range,
    index vectors of StridedSlices (``vectors``: input_ranges.index_vectors) entry by entry
    inside what their slices accept (input_ranges.vector_ranges), other integers in [0, 3],
    distinct strings.  An index input is one a Gather reads directly (the size of the axis it
    indexes, from the shapes at these sizes) or through the casts, reshapes and index
    arithmetic :func:`.input_ranges.index_input_ranges` follows (a BERT segment id cast to int32
    before a 2-row table): the smaller range where both apply.  ``fed``: :func:`.sizing.fed_inputs`
    of ``proto``, if read."""
    from onnx import helper
    from .input_ranges import index_input_ranges, vector_ranges
    from .inputs import SMALL_INTS, random_values
    if fed is None:
        fed = fed_inputs(proto)
    integer = any(vi.type.tensor_type.elem_type in _INTEGER_ELEMS for vi in fed)  # (else no index input)
    bounds = _index_bounds(proto, shapes) if integer else {}
    index_ranges = index_input_ranges(proto) if integer else {}
    vectors = vectors or {}
    feeds = {}
    for vi in fed:
        tt = vi.type.tensor_type
        if unranked_vector(vi, sizes):
            shape: tuple = (sizes[f"{vi.name}:0"],)
        else:
            shape = tuple(d.dim_value if d.HasField("dim_value") else sizes[dim_key(vi, k, d)]
                          for k, d in enumerate(tt.shape.dim))
        elem = tt.elem_type
        dtype = np.dtype(object) if elem == 8 else np.dtype(helper.tensor_dtype_to_np_dtype(elem))
        if elem in _SUB_BYTE and dtype.kind not in "iu":
            raise Skip(f"input {vi.name!r}: random values of element type {helper.tensor_dtype_to_string(elem)} "
                       "are not generated")
        if vi.name in vectors and len(shape) == 1 and shape[0] == vectors[vi.name].length:
            ranges = vector_ranges(vectors[vi.name], shapes)
            if any(lo > hi for lo, hi in ranges):
                raise Skip(f"input {vi.name!r}: no value of it is valid for every StridedSlice it feeds")
            feeds[vi.name] = np.array([random_values(rng, (), dtype, ints=r) for r in ranges], dtype=dtype)
            continue
        high = bounds.get(vi.name)
        ints = (0, high - 1) if high else SMALL_INTS
        if vi.name in index_ranges:
            lo, hi = index_ranges[vi.name]
            ints = (lo, min(hi, high - 1) if high else hi)
        feeds[vi.name] = random_values(rng, shape, dtype, ints=ints)
    return feeds


#: ONNX element types whose numpy arrays onnxruntime's ``run`` takes and gives as they are
_PLAIN_ELEMS = frozenset({1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13})


def run_taps(session, feeds: dict, names: list[str], elems: dict) -> dict:
    """One run; ``names`` -> numpy arrays.  Through OrtValues (runtimes.fetch: the one codec)
    unless every input and output is of a type numpy holds as onnxruntime does."""
    if any(a.dtype.kind in "OUS" for a in feeds.values()) or \
            all(elems.get(k) in _PLAIN_ELEMS for k in feeds) and all(elems.get(n) in _PLAIN_ELEMS for n in names):
        return dict(zip(names, session.run(names, feeds)))
    from .runtimes import fetch, ort_value  # the one OrtValue codec
    ort_feeds = {k: ort_value(v, elems[k]) for k, v in feeds.items()}
    outs = session.run_with_ort_values(names, ort_feeds)
    return {n: fetch(v, elems[n]) if elems.get(n) else v.numpy() for n, v in zip(names, outs)}
