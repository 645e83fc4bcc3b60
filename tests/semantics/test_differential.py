"""Property-based differential tests: our reference against the real runtimes.

Random ranks 0-6, dims 0-5 (0 and 1 common), begin/end in and far out of range
and negative, strides +-1..3 (and 0), mask bits beyond len(begin), OpenVINO mask
lists of other lengths.  Shape, dtype, bitwise values and accept/reject must be
identical.  At least 2,000 examples per flavour per run.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from onnx_slice_tools.verification.oracles import RandomSource, compare, our_outcome, random_case, run_oracle


class HypothesisSource(RandomSource):
    """Feeds the shared case generator from hypothesis, so failures shrink."""

    def __init__(self, data):
        self.data = data

    def integer(self, lo: int, hi: int) -> int:
        return self.data.draw(st.integers(lo, hi))


EXAMPLES = 2500
seen = {"tf": [0, 0], "openvino": [0, 0]}  # accepted, rejected


def _check(data, flavor):
    x, spec = random_case(HypothesisSource(data), flavor)
    ours, theirs = our_outcome(x, spec), run_oracle(x, spec)
    seen[flavor][0 if theirs.ok else 1] += 1
    problem = compare(ours, theirs)
    assert problem is None, f"shape={x.shape} dtype={x.dtype} {spec}: {problem}"


@settings(max_examples=EXAMPLES)
@given(st.data())
def test_tf_matches_tensorflow(data):
    _check(data, "tf")


@settings(max_examples=EXAMPLES)
@given(st.data())
def test_openvino_matches_openvino(data):
    _check(data, "openvino")


def test_corpus_covered_both_outcomes():
    """The generated corpora exercised both accepted and rejected specs in each flavour."""
    for flavor, (accepted, rejected) in seen.items():
        if accepted + rejected:  # the property tests ran in this session
            assert accepted >= 300 and rejected >= 300, (flavor, accepted, rejected)
