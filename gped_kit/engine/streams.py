"""Per-chain random streams: every random number a chain uses comes from its own generators.

Each chain has one generator for its teacher minibatches of D (seed ``4 s + 1``), one for the
SGLD noise (``4 s + 2``) and one per distillation group of students (students sharing H, M'
and the input generator; ``4 s + 3 + 1000 (i + 1)`` for the i-th group in sorted order). So a
chain's teacher does not depend on which students are attached, and a chain's numbers do not
depend on which other chains share its batch. Draws are made in the shapes and order of one
chain's loop, into rows of the batch's buffers, on the device (nothing is read back). On a
multi-core CPU the K chains' SGLD noise (one ``normal_`` of P values each, as long as a
forward and backward pass of the FCNN) is drawn on a thread pool: each draw is single-threaded
and independent, so the result is the same.

The distillation groups' generators belong to the *runs* (``group_seeds``, one per run: the
chains' own seeds for independent chains, the run's seed for a pooled teacher, whose K chains
feed one set of students), the teacher's to the chains.

**Counter-based streams** (``GPEDConfig(random_numbers="counter")``, :class:`CounterStreams`): the
minibatch indices and the noise are Philox-4x32-10 draws (:mod:`gped_kit.core.philox`) keyed by the seed
the stream's generator would have had, the step t (a device value) and the position; each draw is one
compiled kernel for every chain (:class:`~gped_kit.core.fused.Fused`), and the generators these replace are
never drawn from. A minibatch's draw and the rows it picks are one compiled function (:func:`counter_minibatch_`).
The thesis' input generators keep their groups' generators.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import torch

from ..core.fused import Fused
from ..core.losses import rademacher
from ..core.philox import counter_indices, counter_indices_, counter_normal_, key_words
from .config import GroupKey
from .sets import ChainSets, gather_rows


def data_seed(seed: int) -> int:
    """The seed of chain ``seed``'s teacher minibatches (``4 s + 1``)."""
    return seed * 4 + 1


def noise_seed(seed: int) -> int:
    """The seed of chain ``seed``'s sampler noise (``4 s + 2``)."""
    return seed * 4 + 2


def group_seed(seed: int, i: int) -> int:
    """The seed of run ``seed``'s i-th distillation group (``4 s + 3 + 1000 (i + 1)``)."""
    return seed * 4 + 3 + 1000 * (i + 1)


def keys_of(seeds: Sequence[int], device: torch.device) -> torch.Tensor:
    """The Philox key words ``(K, 2)`` of ``seeds``, on ``device``."""
    return torch.stack(key_words(torch.tensor(list(seeds), dtype=torch.int64)), dim=1).to(device)


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
        self.seeds = {"data": [data_seed(s) for s in seeds], "noise": [noise_seed(s) for s in seeds]}
        self.group_seeds = {key: [group_seed(s, i) for s in (seeds if group_seeds is None else group_seeds)]
                            for i, key in enumerate(group_keys)}
        self.data = [_seeded(device, s) for s in self.seeds["data"]]
        self.noise = [_seeded(device, s) for s in self.seeds["noise"]]
        self.groups = {key: [_seeded(device, s) for s in group] for key, group in self.group_seeds.items()}
        workers = min(len(seeds), torch.get_num_threads())
        self._pool = ThreadPoolExecutor(workers) if device.type == "cpu" and workers > 1 else None

    def teacher_indices(self, out: torch.Tensor, sets: ChainSets, step: torch.Tensor | None = None) -> None:
        """Row k of ``out`` (K, M): M indices into chain k's D (``sets``), with replacement. ``step`` (t, a device
        value) keys counter-based draws; generators ignore it."""
        for row, gen, n in zip(out, self.data, sets.sizes):
            torch.randint(n, row.shape, generator=gen, device=self.device, out=row)

    def teacher_minibatch(self, out: torch.Tensor, sets: ChainSets,
                          step: torch.Tensor | None = None) -> list[torch.Tensor]:
        """:meth:`teacher_indices` into ``out`` and the rows of ``sets`` they pick, (K, M, ...) each."""
        self.teacher_indices(out, sets, step)
        return sets.gather(out)

    def sgld_noise(self, out: torch.Tensor, step: torch.Tensor | None = None) -> None:
        """Row k of ``out`` (K, P): P standard normal values for chain k's sampler step."""
        if self._pool is None:
            for row, gen in zip(out, self.noise):
                row.normal_(generator=gen)
        else:
            list(self._pool.map(lambda pair: pair[0].normal_(generator=pair[1]), zip(out, self.noise)))

    def group_indices(self, key: GroupKey, out: torch.Tensor, sets: ChainSets,
                      step: torch.Tensor | None = None) -> None:
        """Row k of ``out`` (K, M'): the distillation minibatch S' of chain k (indices into its D', ``sets``)."""
        for row, gen, n in zip(out, self.groups[key], sets.sizes):
            torch.randint(n, row.shape, generator=gen, device=self.device, out=row)

    def group_minibatch(self, key: GroupKey, out: torch.Tensor, sets: ChainSets,
                        step: torch.Tensor | None = None) -> list[torch.Tensor]:
        """:meth:`group_indices` into ``out`` and the rows of ``sets`` (D') they pick, (K, M', ...) each."""
        self.group_indices(key, out, sets, step)
        return sets.gather(out)

    def group_normal(self, key: GroupKey, out: torch.Tensor, chains: Sequence[int]) -> None:
        """Standard normal values into row k of ``out`` for each chain k in ``chains`` (input noise)."""
        gens = self.groups[key]
        for k in chains:
            out[k].normal_(generator=gens[k])

    def group_signs(self, key: GroupKey, out: torch.Tensor) -> None:
        """Rademacher signs (+1/-1) into row k of ``out`` (K, M', C) for every chain (derivative matching)."""
        for row, gen in zip(out, self.groups[key]):
            row.copy_(rademacher(*row.shape, generator=gen, device=self.device, dtype=row.dtype))

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


class CounterStreams(ChainStreams):
    """:class:`ChainStreams` whose minibatch indices and noise are counter-based draws (module docstring), keyed by
    the seeds of the generators they replace; each draw needs the step t as a device value (``step``)."""

    def __init__(self, seeds: Sequence[int], group_keys: Sequence[GroupKey], device: torch.device,
                 group_seeds: Sequence[int] | None = None, compiled: bool = True) -> None:
        super().__init__(seeds, group_keys, device, group_seeds)
        self.keys = {name: keys_of(values, device) for name, values in self.seeds.items()}
        self.group_keys = {key: keys_of(values, device) for key, values in self.group_seeds.items()}
        self._indices = Fused(counter_indices_, "the counter-based draw of minibatch indices", compiled)
        self._normal = Fused(counter_normal_, "the counter-based draw of the sampler's noise", compiled)
        self._minibatch = Fused(counter_minibatch_, "the counter-based draw of a minibatch", compiled)

    def teacher_indices(self, out: torch.Tensor, sets: ChainSets, step: torch.Tensor | None = None) -> None:
        self._indices(out, self.keys["data"], _step(step), sets.size_column)

    def teacher_minibatch(self, out: torch.Tensor, sets: ChainSets,
                          step: torch.Tensor | None = None) -> list[torch.Tensor]:
        return self._minibatch(out, self.keys["data"], _step(step), sets.size_column, sets.chain_offsets,
                               sets.tensors)

    def group_minibatch(self, key: GroupKey, out: torch.Tensor, sets: ChainSets,
                        step: torch.Tensor | None = None) -> list[torch.Tensor]:
        return self._minibatch(out, self.group_keys[key], _step(step), sets.size_column, sets.chain_offsets,
                               sets.tensors)

    def sgld_noise(self, out: torch.Tensor, step: torch.Tensor | None = None) -> None:
        self._normal(out, self.keys["noise"], _step(step))

    def group_indices(self, key: GroupKey, out: torch.Tensor, sets: ChainSets,
                      step: torch.Tensor | None = None) -> None:
        self._indices(out, self.group_keys[key], _step(step), sets.size_column)


def counter_minibatch_(out: torch.Tensor, keys: torch.Tensor, step: torch.Tensor, sizes: torch.Tensor,
                       offsets: torch.Tensor | None, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """:func:`~gped_kit.core.philox.counter_indices` of ``out``'s shape (K, M) written into ``out``, and the rows
    of ``tensors`` they pick (:func:`~gped_kit.engine.sets.gather_rows`): compiled, the draw and the gathers are
    one kernel, not three."""
    index = counter_indices(keys, step, out.shape[1], sizes)
    out.copy_(index)
    return gather_rows(tensors, offsets, index)


def _step(step: torch.Tensor | None) -> torch.Tensor:
    if step is None:
        raise ValueError("counter-based streams draw by the step t: pass it as a device value (step=...)")
    return step
