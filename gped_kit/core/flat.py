"""The parameters of K chains as one contiguous ``(K, P)`` buffer with a view per parameter.

An update that treats every parameter element alike (SGLD's Eq. 7, the momentum samplers, Adam)
then costs a handful of element-wise kernels over the whole buffer instead of a handful per
parameter tensor: for the paper's FCNN teacher (6 tensors) SGLD's 36 kernels become 6, Adam's
78 become 13. Each buffer of one layout (parameters, gradients, momenta, Adam's moments, noise)
places parameter ``name`` at the same offset, so an element-wise operation on the buffers pairs
exactly the elements the per-tensor operation paired, and computes the same numbers bit for bit.

Each parameter's segment keeps that parameter's own memory layout (:class:`FlatLayout`: e.g.
channels-last convolution weights on the CPU), so the views have the parameters' strides and the
networks' kernels see the same tensors as before. When every parameter is contiguous the layout
is *logical*: the buffer is the concatenation of the flattened parameters in ``named_parameters()``
order (what :func:`torch.nn.utils.parameters_to_vector` gives), and gradients are written into
it with one ``cat``.

:class:`FlatTensors` is the dict of views with its buffer attached: ``units(...)`` of several such
mappings gives the buffers themselves (one operand each), of plain dicts their tensors one by
one, so the update functions of :mod:`gped_kit.core` run unchanged on either.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Mapping, Sequence

import torch


class FlatTensors(dict):
    """Per-parameter views (the dict, ``name -> (K, *shape)``) into one buffer ``flat`` of shape
    ``(K, P)`` laid out by ``layout``."""

    def __init__(self, flat: torch.Tensor, layout: FlatLayout) -> None:
        super().__init__(layout.views(flat))
        self.flat = flat
        self.layout = layout

    @property
    def num_chains(self) -> int:
        return int(self.flat.shape[0])


@dataclass(frozen=True)
class FlatLayout:
    """Where each parameter lives in a ``(K, P)`` buffer: its shape, its per-chain strides (its
    own memory layout) and the offset of its segment, in ``named_parameters()`` order."""

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    strides: tuple[tuple[int, ...], ...]
    offsets: tuple[int, ...]
    size: int

    @classmethod
    def of(cls, stacked: Mapping[str, torch.Tensor]) -> FlatLayout:
        """The layout of tensors with a leading chain axis, each chain's slice keeping its strides
        when it is dense (contiguous or channels-last), contiguous strides otherwise."""
        names, shapes, strides, offsets = [], [], [], []
        offset = 0
        for name, value in stacked.items():
            one = value[0]
            dense = one.is_contiguous() or (one.dim() == 4 and one.is_contiguous(memory_format=torch.channels_last))
            names.append(name)
            shapes.append(tuple(one.shape))
            strides.append(tuple(one.stride()) if dense else _contiguous_strides(one.shape))
            offsets.append(offset)
            offset += one.numel()
        return cls(tuple(names), tuple(shapes), tuple(strides), tuple(offsets), offset)

    @cached_property
    def logical(self) -> bool:
        """Whether the buffer is the concatenation of the flattened parameters (all contiguous); computed
        once (the step reads it)."""
        return all(s == _contiguous_strides(shape) for shape, s in zip(self.shapes, self.strides))

    def contiguous(self) -> FlatLayout:
        """The same segments with contiguous strides (the logical layout of these parameters)."""
        return FlatLayout(self.names, self.shapes, tuple(_contiguous_strides(s) for s in self.shapes), self.offsets,
                          self.size)

    def views(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """``name -> (K, *shape)`` views into ``flat`` (K, P) with each parameter's strides."""
        if flat.dim() != 2 or flat.shape[1] != self.size or not flat.is_contiguous():
            raise ValueError(f"FlatLayout.views: needs a contiguous (K, {self.size}) buffer, got shape "
                             f"{tuple(flat.shape)}")
        base, row = flat.storage_offset(), flat.stride(0)
        return {name: flat.as_strided((flat.shape[0], *shape), (row, *stride), base + offset)
                for name, shape, stride, offset in zip(self.names, self.shapes, self.strides, self.offsets)}

    def zeros(self, num_chains: int, device: torch.device, dtype: torch.dtype = torch.float32) -> FlatTensors:
        return FlatTensors(torch.zeros(num_chains, self.size, device=device, dtype=dtype), self)

    def flatten(self, stacked: Mapping[str, torch.Tensor]) -> FlatTensors:
        """A new buffer holding ``stacked`` (a copy; names and shapes as the layout's)."""
        first = next(iter(stacked.values()))
        out = self.zeros(int(first.shape[0]), first.device, first.dtype)
        for name, view in out.items():
            view.copy_(stacked[name])
        return out

    def gather_(self, out: FlatTensors, values: Mapping[str, torch.Tensor], chain_axis: bool = True) -> FlatTensors:
        """Write ``values`` (e.g. gradients: ``(K, *shape)`` each, or ``shape`` with ``chain_axis``
        False for one chain) into ``out``: one ``cat`` when the layout is logical, a copy per
        parameter otherwise."""
        if self.logical:
            k = out.num_chains
            torch.cat([values[n].reshape(k, -1) for n in self.names], dim=1, out=out.flat)
        else:
            for name, view in out.items():
                view.copy_(values[name] if chain_axis else values[name].unsqueeze(0))
        return out


def _contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(tuple(shape)):
        strides.append(step)
        step *= max(int(n), 1)
    return tuple(reversed(strides))


def units(*mappings: Mapping[str, torch.Tensor]) -> list[tuple[torch.Tensor, ...]]:
    """The operands of an element-wise update over several same-named mappings, zipped: the
    buffers themselves when every mapping is a :class:`FlatTensors` of one layout (one operand
    tuple), the tensors name by name (in the first mapping's order) when none is; a mix is an error."""
    flats = [isinstance(m, FlatTensors) for m in mappings]
    if all(flats):
        layout = mappings[0].layout  # type: ignore[attr-defined]
        if any(m.layout is not layout and m.layout != layout for m in mappings):  # type: ignore[attr-defined]
            raise ValueError("units: flat buffers of different layouts cannot be updated element-wise together")
        return [tuple(m.flat for m in mappings)]  # type: ignore[attr-defined]
    if any(flats):
        raise ValueError("units: either every operand of an update is a FlatTensors or none is")
    names = list(mappings[0])
    return [tuple(m[n] for m in mappings) for n in names]


def sum_per_chain(value: torch.Tensor, chain_axis: bool) -> torch.Tensor:
    """The sum of ``value`` over everything but the chain axis, as ``(K, 1)`` (to broadcast against
    ``(K, P)`` buffers) when ``chain_axis``; over everything (one chain, or under ``vmap``) otherwise."""
    if not chain_axis:
        return value.sum()
    return value.sum(dim=tuple(range(1, value.dim())), keepdim=True).reshape(-1, 1)
