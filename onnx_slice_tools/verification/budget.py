"""The memory budget of one conversion's whole-model checks, as one value: :class:`Budget`.

The in-place run (verification/inplace.py), the checked baseline run and the as-shipped run
(verification/shipped.py) and the cleanup's own check (cleanup/passes.py) each count the bytes a
run holds against ``--verify-memory``, charge the model's weights the same way and read
external weights in the same way; they take these three facts together, never one by one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Budget"]


def _same(proto):
    return proto


@dataclass(frozen=True)
class Budget:
    """``memory``: the bytes a whole-model check may add to converting the model
    (``--verify-memory``); ``weight_bytes``: the charge of the model's weights against it
    (sizing.budget_weight_bytes); ``load_weights``: a proto -> the proto with its external
    weights read in inline (the identity for a model without them; only for a run that fits)."""

    memory: int
    weight_bytes: int = 0
    load_weights: Callable = _same
