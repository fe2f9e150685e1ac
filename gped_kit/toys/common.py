"""What both thesis toys share: the result of a run, the thesis' learning-rate decay, and the memory
a method holds, counted from its arrays."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

from ..core.status import Status

Mode = Literal["batch", "online"]
#: Distillation modes (Section 3.2.2): the stored bag of samples, or each sample as it comes.
MODES: tuple[Mode, ...] = ("batch", "online")


def linear_decay(t: int, num_iterations: int, start: float = 1.0) -> float:
    """The thesis' learning rate: ``start`` at iteration 0, decayed linearly to 0 at the last
    iteration ``num_iterations - 1`` (Sections 3.2.3 and 3.3.4)."""
    if num_iterations <= 1:
        return start
    return start * (1.0 - t / (num_iterations - 1))


def array_bytes(*arrays: np.ndarray | torch.Tensor) -> int:
    """The bytes the arrays hold (``nbytes`` of NumPy arrays, element size x count of tensors)."""
    return int(sum(a.nbytes if isinstance(a, np.ndarray) else a.element_size() * a.nelement() for a in arrays))


@dataclass
class ToyResult:
    """What a toy run returns: the tidy ``table`` (one row per method), the ``arrays`` the
    figures need (densities on grids, weights, ...), the ``config`` as a dict
    (:func:`config_dict`), and, for a run read through the results store
    (:func:`gped_kit.experiments.thesis.run_toy`), ``status`` (``"ran"`` or ``"reused"``) and the
    store entry's ``key``."""

    table: pd.DataFrame
    arrays: dict[str, np.ndarray]
    config: dict[str, Any]
    status: Status = Status.RAN
    key: str | None = None


def config_dict(config: Any) -> dict[str, Any]:
    """The configuration as JSON data (every field; tuples as lists): :attr:`ToyResult.config`."""
    return json.loads(json.dumps(dataclasses.asdict(config), default=list))
