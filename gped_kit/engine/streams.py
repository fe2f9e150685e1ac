"""Per-chain random streams: every random number a chain uses comes from its own generators.

Each chain has one generator for its teacher minibatches of D (seed ``4 s + 1``), one for the
SGLD noise (``4 s + 2``; with counter-based noise, ``SGLDConfig(noise="counter")``, that seed is the
Philox key of the fused update instead, :func:`noise_seed`) and one per distillation group of
students (students sharing H, M' and the input generator; ``4 s + 3 + 1000 (i + 1)`` for the i-th
group in sorted order). So a
chain's teacher does not depend on which students are attached, and a chain's numbers do not
depend on which other chains share its batch. Draws are made in the shapes and order of one
chain's loop, into rows of the batch's buffers, on the device (nothing is read back). On a
multi-core CPU the K chains' SGLD noise (one ``normal_`` of P values each, as long as a
forward and backward pass of the FCNN) is drawn on a thread pool: each draw is single-threaded
and independent, so the result is the same.

The distillation groups' generators belong to the *runs* (``group_seeds``, one per run: the
chains' own seeds for independent chains, the run's seed for a pooled teacher, whose K chains
feed one set of students), the teacher's to the chains.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import torch

from .config import GroupKey


def noise_seed(seed: int) -> int:
    """The seed of a chain's SGLD noise (``4 s + 2``): its generator's, or its Philox key with counter-based
    noise (``SGLDConfig(noise="counter")``)."""
    return seed * 4 + 2


def _seeded(device: torch.device, seed: int) -> torch.Generator:
    return torch.Generator(device).manual_seed(seed)


def group_name(key: GroupKey) -> str:
    """A group key as a string (checkpoint field names)."""
    return ",".join(str(k) for k in key)


class ChainStreams:
    """The generators of K chains (see the module docstring)."""

    def __init__(self, seeds: Sequence[int], group_keys: Sequence[GroupKey], device: torch.device,
                 group_seeds: Sequence[int] | None = None) -> None:
        self.device = device
        self.data = [_seeded(device, s * 4 + 1) for s in seeds]
        self.noise = [_seeded(device, noise_seed(s)) for s in seeds]
        self.groups = {key: [_seeded(device, s * 4 + 3 + 1000 * (i + 1)) for s in (seeds if group_seeds is None
                                                                                    else group_seeds)]
                       for i, key in enumerate(group_keys)}
        workers = min(len(seeds), torch.get_num_threads())
        self._pool = ThreadPoolExecutor(workers) if device.type == "cpu" and workers > 1 else None

    def teacher_indices(self, out: torch.Tensor, sizes: Sequence[int]) -> None:
        """Row k of ``out`` (K, M): M indices into chain k's D, with replacement."""
        for row, gen, n in zip(out, self.data, sizes):
            torch.randint(n, row.shape, generator=gen, device=self.device, out=row)

    def sgld_noise(self, out: torch.Tensor) -> None:
        """Row k of ``out`` (K, P): P standard normal values for chain k's SGLD step."""
        if self._pool is None:
            for row, gen in zip(out, self.noise):
                row.normal_(generator=gen)
        else:
            list(self._pool.map(lambda pair: pair[0].normal_(generator=pair[1]), zip(out, self.noise)))

    def group_indices(self, key: GroupKey, out: torch.Tensor, sizes: Sequence[int]) -> None:
        """Row k of ``out`` (K, M'): the distillation minibatch S' of chain k (indices into its D')."""
        for row, gen, n in zip(out, self.groups[key], sizes):
            torch.randint(n, row.shape, generator=gen, device=self.device, out=row)

    def group_normal(self, key: GroupKey, out: torch.Tensor, chains: Sequence[int]) -> None:
        """Standard normal values into row k of ``out`` for each chain k in ``chains`` (input noise)."""
        gens = self.groups[key]
        for k in chains:
            out[k].normal_(generator=gens[k])

    def group_signs(self, key: GroupKey, out: torch.Tensor) -> None:
        """Rademacher signs (+1/-1) into row k of ``out`` (K, M', C) for every chain (derivative matching)."""
        for row, gen in zip(out, self.groups[key]):
            bits = torch.randint(0, 2, row.shape, generator=gen, device=self.device)
            row.copy_(2 * bits - 1)

    def state_dict(self, k: int) -> dict:
        """Chain ``k``'s generator states (uint8 tensors) and run ``k``'s group generators."""
        return {**self.chain_state_dict(k), "groups": self.groups_state_dict(k)}

    def chain_state_dict(self, k: int) -> dict:
        """Teacher chain ``k``'s generator states (minibatches, noise)."""
        return {"data": self.data[k].get_state(), "noise": self.noise[k].get_state()}

    def groups_state_dict(self, r: int) -> dict:
        """Run ``r``'s distillation-group generator states."""
        return {group_name(key): gens[r].get_state() for key, gens in self.groups.items()}

    def load_state_dict(self, k: int, state: dict) -> None:
        self.load_chain_state_dict(k, state)
        self.load_groups_state_dict(k, state["groups"])

    def load_chain_state_dict(self, k: int, state: dict) -> None:
        self.data[k].set_state(state["data"].cpu())
        self.noise[k].set_state(state["noise"].cpu())

    def load_groups_state_dict(self, r: int, state: dict) -> None:
        for key, gens in self.groups.items():
            gens[r].set_state(state[group_name(key)].cpu())
