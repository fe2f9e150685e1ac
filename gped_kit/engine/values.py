"""Values a step reads that change from step to step, as device tensors.

Adam's bias corrections change with every update of a student, and a varying step-size schedule
changes the sampler's step with every t. Passed to the kernels as host floats, they would be baked into a
captured CUDA graph (:mod:`gped_kit.engine.graphs`), which could then replay only the step it was
captured at. So the engine reads them from a :class:`ValueTable`: the host computes a block of
consecutive rows (the same float64 formula it always used, e.g.
:func:`gped_kit.core.adam.bias_corrections`, rounded to float32 exactly as a scalar argument is),
uploads the block in one copy, and a step reads its row as a view (no kernel, no host read). Eager
steps refill the table when they leave its block; a graph's period refills it before each replay,
so the rows a capture recorded hold the replayed period's values.

A float32 tensor holding ``float32(v)`` gives the kernels exactly the operand a host float ``v``
gives them on the CPU, so the CPU's numbers are unchanged (tests/test_flat.py,
tests/test_device_scales.py): a multiplication by it rounds as one by ``v``, and ``y + v x`` (an
``add_`` with ``alpha=v``, one fused multiply-add) becomes ``addcmul_`` with the tensor, which the
CPU computes the same way (:func:`gped_kit.core.sampler.add_scaled_`). On CUDA a division by a
host float is computed as a multiplication by its reciprocal, by a tensor as a true division, and
``addcmul_`` may round the product on its own: the last bit of a CUDA result may differ from the
kit's versions before device-side values.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch


class ValueTable:
    """Rows ``values(i)`` for a block of ``size`` consecutive indices i, on ``device`` (see the
    module docstring). :meth:`row` gives row i, refilling the block from i when i is outside it;
    :meth:`fill` starts the block at a given index (a graph's period does, before each replay)."""

    def __init__(self, values: Callable[[int], Sequence[float]], width: int, size: int, device: torch.device,
                 dtype: torch.dtype = torch.float32) -> None:
        if size < 1 or width < 1:
            raise ValueError(f"ValueTable: size={size} and width={width} must be >= 1")
        self.values = values
        self.size = size
        self.device = device
        self.table = torch.empty(size, width, device=device, dtype=dtype)
        self.start: int | None = None

    def fill(self, start: int) -> None:
        """Rows ``start`` .. ``start + size - 1``, computed on the host, uploaded in one copy (from
        pinned memory on CUDA, so the copy does not wait for the device; PyTorch's pinned-memory cache
        keeps the block until the copy has run). Refused inside a CUDA graph capture, which would record
        a copy from host memory freed after it: the period's rows are filled before its capture."""
        if self.device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            raise RuntimeError("ValueTable.fill inside a CUDA graph capture: fill the table before capturing "
                               "(graph mode fills each period's rows before its capture and replays)")
        host = torch.tensor([list(self.values(i)) for i in range(start, start + self.size)], dtype=self.table.dtype)
        if self.device.type == "cuda":
            host = host.pin_memory()
        self.table.copy_(host, non_blocking=True)
        self.start = start

    def covers(self, i: int) -> bool:
        return self.start is not None and self.start <= i < self.start + self.size

    def row(self, i: int) -> torch.Tensor:
        """Row i as a view of the table (refilling the block from i when it does not hold i)."""
        if not self.covers(i):
            self.fill(i)
        return self.table[i - self.start]


def step_index(t: int) -> tuple[int]:
    """Row t of a table of step indices: t itself (an int64 table's row, what counter-based draws are keyed by)."""
    return (t,)


class EngineValues:
    """The device-side values of an engine's steps: the sampler's step-size factors (``scales``; None when
    the sampler's step size is constant or computed on the host), each student slot's Adam bias
    corrections (``corrections``) and the step index t (``steps``, int64; None unless the random numbers are
    counter-based, :class:`~gped_kit.engine.streams.CounterStreams`), each a :class:`ValueTable` over one
    period of the event schedule."""

    def __init__(self, scales: ValueTable | None, corrections: Sequence[ValueTable],
                 steps: ValueTable | None = None) -> None:
        self.scales = scales
        self.corrections = list(corrections)
        self.steps = steps

    def fill(self, t0: int, adam_steps: Sequence[int]) -> None:
        """The rows of the period starting at step ``t0``, with slot j's next Adam update ``adam_steps[j] + 1``
        (a graph's period reads them: filled before each capture and replay)."""
        if self.scales is not None:
            self.scales.fill(t0)
        if self.steps is not None:
            self.steps.fill(t0)
        for table, steps in zip(self.corrections, adam_steps):
            table.fill(steps + 1)
