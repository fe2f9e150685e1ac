"""The data sets of K chains on one device, each distinct set stored once.

Chains of a batch may differ in their data (labelled-set size, masks, seed): :class:`ChainSets`
keeps each distinct set once (chains whose sets are equal share them: e.g. the test set of one
mask seen by every labelled-set size), concatenated, with one offset per chain, and gathers a
minibatch for every chain with one indexing operation.
"""

from __future__ import annotations

from typing import Sequence

import torch


def _signature(t: torch.Tensor) -> tuple:
    sample = t.reshape(-1)[:: max(1, t.numel() // 4096)]
    return tuple(t.shape), t.dtype, float(sample.double().sum())


def _same(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> bool:
    return all(x is y or (x.shape == y.shape and x.dtype == y.dtype and torch.equal(x, y)) for x, y in zip(a, b))


class ChainSets:
    """Per-chain tuples of tensors with equal trailing shapes (e.g. (inputs, labels) of D), each
    distinct tuple stored once. ``shared`` is True when every chain has the same sets; ``sizes`` each chain's
    number of rows, ``size_column`` the same as a ``(K, 1)`` int64 tensor on the device (counter-based draws)."""

    def __init__(self, per_chain: Sequence[Sequence[torch.Tensor]]) -> None:
        unique: list[Sequence[torch.Tensor]] = []
        signatures: list[tuple] = []
        index = []
        for sets in per_chain:
            signature = tuple(_signature(t) for t in sets)
            match = next((j for j, (u, s) in enumerate(zip(unique, signatures)) if s == signature and _same(u, sets)),
                         None)
            if match is None:
                unique.append(sets)
                signatures.append(signature)
                match = len(unique) - 1
            index.append(match)
        self.num_chains = len(per_chain)
        self.sizes = [int(sets[0].shape[0]) for sets in per_chain]
        self.shared = len(unique) == 1
        self.tensors = [u for u in unique[0]] if self.shared else [torch.cat(parts) for parts in zip(*unique)]
        starts, total = [], 0
        for u in unique:
            starts.append(total)
            total += int(u[0].shape[0])
        device = self.tensors[0].device
        self.offsets = torch.tensor([starts[j] for j in index], device=device).view(-1, 1)
        self.size_column = torch.tensor(self.sizes, dtype=torch.int64, device=device).view(-1, 1)
        self.unique_count = len(unique)

    @property
    def chain_offsets(self) -> torch.Tensor | None:
        """Each chain's first row in :attr:`tensors` as ``(K, 1)``; None when the chains share their sets."""
        return None if self.shared else self.offsets

    def gather(self, index: torch.Tensor) -> list[torch.Tensor]:
        """Rows ``index[k]`` (K, m) of chain k's sets, as tensors of shape (K, m, ...)."""
        return gather_rows(self.tensors, self.chain_offsets, index)

    def rows(self, start: int, stop: int) -> tuple[list[torch.Tensor], bool]:
        """Rows ``start:stop`` of every chain's sets: ``(tensors, batched)``; when the chains share
        their sets the tensors have no chain axis (``batched`` False) and are views."""
        if self.shared:
            return [t[start:stop] for t in self.tensors], False
        positions = torch.arange(start, stop, device=self.offsets.device)
        return self.gather(positions.expand(self.num_chains, -1)), True

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors)


def gather_rows(tensors: Sequence[torch.Tensor], offsets: torch.Tensor | None,
                index: torch.Tensor) -> list[torch.Tensor]:
    """Rows ``index[k] + offsets[k]`` (K, m) of each of ``tensors`` (offsets None: 0), as tensors of shape
    (K, m, ...) (:meth:`ChainSets.gather`)."""
    flat = (index if offsets is None else index + offsets).reshape(-1)
    k, m = index.shape
    return [t.index_select(0, flat).view(k, m, *t.shape[1:]) for t in tensors]
