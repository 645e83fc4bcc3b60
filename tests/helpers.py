"""Shared test helpers: running the oracles and comparing exactly."""

from __future__ import annotations

import numpy as np

from onnx_slice_tools.verification.oracles import compare, our_outcome, run_oracle


def data(shape, dtype=np.float32):
    size = int(np.prod(shape)) if len(shape) else 1
    return (np.arange(size) % 251).astype(dtype).reshape(shape)


def assert_matches_runtime(x, spec, expected_shape=None, rejected=False):
    """Our reference and the flavour's real runtime agree exactly; optionally check the shape."""
    ours, theirs = our_outcome(x, spec), run_oracle(x, spec)
    problem = compare(ours, theirs)
    assert problem is None, f"{spec}: {problem}"
    if rejected:
        assert not theirs.ok, f"runtime accepted {spec}: {theirs.shape}"
    else:
        assert theirs.ok, f"runtime rejected {spec}: {theirs.error}"
        if expected_shape is not None:
            assert tuple(ours.shape) == tuple(expected_shape)
    return ours
