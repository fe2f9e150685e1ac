"""How many chains of a grid share one batch: ``chains_per_batch="auto"``.

Chains that can share one computation (:func:`~gped_kit.engine.check_batchable`: a grid's cells,
Table 1's seeds, Experiment 4's teachers) run as one batch of K chains on one device
(:class:`~gped_kit.engine.GPEDEngine`). With ``"auto"`` the batch runner picks K from what one
chain holds and what the device has free, and says so (:meth:`BatchPlan.describe`):

* **what one chain holds**: measured, not estimated: a one-chain engine of the grid's first chain
  is built and its :meth:`~gped_kit.engine.GPEDEngine.memory_bytes` read, less the data (shared by
  chains on the same data, and counted once in the budget): the teacher's state, noise and
  snapshots, the students with their Adam moments and U_o stores, the ensemble sums;
* **the budget**: half the device's free memory (CUDA: ``torch.cuda.mem_get_info``; the CPU:
  available memory, ``psutil``), the other half left for activations, workspaces and the data;
* **the cap**: :data:`MAX_CHAINS` for the device kind. On a GPU a step is bound by launches and
  batching is the gain (docs/benchmarks.md: 48 chains, the most measured, 16x the chain-steps per
  second of one); on the CPU a step is bound by arithmetic and batching gains less (measured on a
  2-core CPU: 12 chains batched 1.32x as many chain-steps per second as 12 one after another, 4
  chains 1.18x).

K is the smallest of the cap, the budget over one chain and the number of chains pending. A
batch computes what its chains compute alone up to the round-off of batched matrix products
(tests/test_batching.py); it does not enter any result's key.
"""

from __future__ import annotations

from dataclasses import dataclass

import psutil
import torch

from ..engine import GPEDEngine
from ..engine.spec import ChainSpec

#: The value of ``chains_per_batch`` that asks for :func:`plan_batch`.
AUTO = "auto"

#: The most chains ``"auto"`` puts in one batch, per device kind (see the module docstring).
MAX_CHAINS = {"cuda": 48, "cpu": 12}

#: The share of the device's free memory the chains' states may take.
MEMORY_SHARE = 0.5


@dataclass(frozen=True)
class BatchPlan:
    """K chains per batch and why: one chain's bytes, the budget, the cap."""

    chains: int
    chain_bytes: int
    budget_bytes: int
    cap: int
    device: str
    pending: int

    @property
    def limited_by(self) -> str:
        if self.chains == self.pending:
            return "every chain pending"
        return "the cap" if self.chains == self.cap else "the memory budget"

    def describe(self) -> str:
        return (f"batches of up to {self.chains} chains on {self.device} ({self.limited_by}): one chain holds "
                f"{self.chain_bytes / 2 ** 20:,.1f} MiB, the budget is {self.budget_bytes / 2 ** 20:,.0f} MiB "
                f"({MEMORY_SHARE:.0%} of the free memory), the cap {self.cap}")


def free_bytes(device: torch.device) -> int:
    """The device's free memory in bytes (CUDA's, or the host's available memory for the CPU)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    return int(psutil.virtual_memory().available)


def chain_bytes(spec: ChainSpec) -> int:
    """What one chain of ``spec`` holds on its device beyond the data, measured on a one-chain engine."""
    usage = GPEDEngine([spec]).memory_bytes()
    return max(usage["total"] - usage["data"], 1)


def plan_batch(spec: ChainSpec, pending: int) -> BatchPlan:
    """The batch size for ``pending`` chains like ``spec`` (see the module docstring)."""
    device = spec.device
    cap = MAX_CHAINS.get(device.type, 1)
    if spec.config.num_chains > 1:  # a pooled teacher is already one batched computation
        cap = 1
    each = chain_bytes(spec)
    budget = int(free_bytes(device) * MEMORY_SHARE)
    chains = max(1, min(cap, budget // each, pending))
    return BatchPlan(chains, each, budget, cap, str(device), pending)


def check_chains_per_batch(name: str, value: int | str) -> int | str:
    """``value`` if it is an integer >= 1 or ``"auto"``; ``ValueError`` naming ``name`` otherwise."""
    if value == AUTO or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return value
    raise ValueError(f"{name}={value!r}: must be an integer >= 1 or {AUTO!r} (as many as the device's memory allows)")
