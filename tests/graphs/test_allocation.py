"""graphs/allocation.paused_gc: the collector is paused inside and left as the host had it."""

import gc

import pytest

from onnx_slice_tools.graphs.allocation import paused_gc


@pytest.mark.parametrize("enabled", [True, False])
def test_paused_gc_restores_the_hosts_state(enabled):
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        with paused_gc():
            assert not gc.isenabled()
        assert gc.isenabled() == enabled
        with pytest.raises(RuntimeError), paused_gc():
            raise RuntimeError("the state comes back on errors too")
        assert gc.isenabled() == enabled
    finally:
        gc.enable() if was else gc.disable()


def test_convert_leaves_the_collector_as_it_was():
    """The API pauses the collector over its rewrite and verification and gives it back."""
    from onnx import TensorProto as T
    from onnx import helper

    from onnx_slice_tools import api
    b, e, s = (helper.make_tensor(n, T.INT64, [2], v) for n, v in (("b", [0, 1]), ("e", [0, 3]), ("s", [1, 1])))
    node = helper.make_node("StridedSlice", ["x", "b", "e", "s"], ["y"], domain="ai.onnx.contrib",
                            begin_mask=1, end_mask=1)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", T.FLOAT, [2, 5])],
                              [helper.make_tensor_value_info("y", T.FLOAT, None)], [b, e, s])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("ai.onnx.contrib", 1)])
    assert gc.isenabled()
    result = api.convert(model)
    assert result.report.verdict.startswith("verified"), result.report.verdict
    assert gc.isenabled()
