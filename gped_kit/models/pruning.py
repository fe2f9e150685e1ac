"""Pruning a network by hidden units and channels (paper 003, Section 3.3; Experiment 3).

After group l1/l2 regularisation (:func:`gped_kit.core.losses.group_lasso`: one group per hidden
unit / conv channel, holding its incoming weights) many groups are (nearly) zero; this module
finds and removes them. Pure ``nn.Module`` surgery on a flat ``nn.Sequential`` of Conv2d / ReLU /
MaxPool2d / Flatten / Linear / Dropout / Identity layers (what
:func:`gped_kit.models.presets.build_network` makes).

**Pruning rule** (:func:`unit_keep_masks`). A hidden unit (a row of a Linear weight) or conv
channel (an output channel of a Conv2d, its C_in x k x k kernel weights) is removed when *all*
its incoming weights have magnitude below epsilon (``criterion="max_abs"``, the rule of
Section 3.3 and of the authors' code: "a unit survives if any incoming weight exceeds"
epsilon = 1e-3), or, with ``criterion="group_norm"``, when the l2 norm of the group is below
epsilon (stricter: it implies the first). The output layer is never pruned and every hidden
layer keeps at least one unit.

**Removal** (:func:`prune`) is physical: the unit's row (and bias) goes, and so do the matching
input columns of the next layer -- input channels of a following Conv2d, or, across the
``Flatten`` after the last conv, the H*W consecutive features each channel maps to. A removed
unit whose incoming weights are (nearly) zero still emits a constant, ``relu(bias)``; with
``fold_bias=True`` (default) that constant's effect on the next layer is added to the next
layer's bias (exact for the padding-free convolutions of the presets, and for
reflect/replicate/circular padding; a following zero-padded convolution, numeric or
``padding="same"``, raises a ValueError asking for ``fold_bias=False``), so the pruned network
equals the *masked* network in which the removed units' incoming weights are set to zero
(:func:`mask_network`). With ``fold_bias=False`` it equals the masked network with their biases
zeroed too (the authors' code left such biases in place, a bug: a "pruned" unit still passed
relu(bias)).
"""

from __future__ import annotations

import copy
import math
from typing import Sequence

import torch
from torch import nn

#: The pruning criteria of :func:`unit_keep_masks`.
PRUNE_CRITERIA = ("max_abs", "group_norm")


def check_eps(eps: float, name: str = "eps") -> float:
    """``eps`` as a float if it is a finite number >= 0 (the pruning threshold); ValueError otherwise."""
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) or eps < 0:
        raise ValueError(f"{name}={eps!r}: the pruning threshold must be a finite number >= 0 "
                         "(the paper uses 1e-3; 0 prunes nothing)")
    return float(eps)


def check_criterion(criterion: str, name: str = "criterion") -> str:
    """``criterion`` if it is one of :data:`PRUNE_CRITERIA`; ValueError naming the allowed ones otherwise."""
    if criterion not in PRUNE_CRITERIA:
        raise ValueError(f"{name}={criterion!r} is not known; allowed: {sorted(PRUNE_CRITERIA)}")
    return criterion


# ----------------------------------------------------------------------------- structure
_ELEMENTWISE = (nn.ReLU, nn.Dropout, nn.Identity)
_SHAPE_ONLY = (nn.MaxPool2d, nn.Flatten)


def _weight_layer_positions(net: nn.Module) -> list[int]:
    """Positions of the Conv2d/Linear layers of a flat ``nn.Sequential``; validates the structure."""
    if not isinstance(net, nn.Sequential):
        raise TypeError(f"net must be a flat nn.Sequential of Conv2d/ReLU/MaxPool2d/Flatten/Linear/Dropout "
                        f"(as build_network makes), got {type(net).__name__}")
    positions = []
    for i, module in enumerate(net):
        if isinstance(module, (nn.Conv2d, nn.Linear)):
            if isinstance(module, nn.Conv2d) and module.groups != 1:
                raise TypeError(f"net[{i}]: grouped convolutions (groups={module.groups}) are not supported")
            positions.append(i)
        elif not isinstance(module, _ELEMENTWISE + _SHAPE_ONLY):
            raise TypeError(f"net[{i}] is a {type(module).__name__}; pruning supports Conv2d, Linear, ReLU, "
                            "MaxPool2d, Flatten, Dropout and Identity only")
    if len(positions) < 2:
        raise ValueError("net needs at least one hidden Conv2d/Linear layer before the output layer to prune")
    return positions


def unit_keep_masks(net: nn.Sequential, eps: float = 1e-3, criterion: str = "max_abs",
                    min_units: int = 1) -> list[torch.Tensor]:
    """One boolean mask per hidden Conv2d/Linear layer (all but the output layer): True = the unit
    or channel survives. ``max_abs``: survives if any incoming weight has magnitude >= ``eps``;
    ``group_norm``: if the l2 norm of its incoming weights is >= ``eps``. Each layer keeps at
    least ``min_units`` units (those with the largest scores)."""
    eps = check_eps(eps)
    check_criterion(criterion)
    if not isinstance(min_units, int) or isinstance(min_units, bool) or min_units < 1:
        raise ValueError(f"min_units={min_units!r}: must be an integer >= 1")
    positions = _weight_layer_positions(net)
    masks = []
    for pos in positions[:-1]:
        w = net[pos].weight.detach().flatten(1)
        score = w.abs().amax(dim=1) if criterion == "max_abs" else w.norm(dim=1)
        keep = score >= eps
        if int(keep.sum()) < min_units:
            keep[score.topk(min(min_units, score.numel())).indices] = True
        masks.append(keep)
    return masks


def mask_network(net: nn.Sequential, masks: Sequence[torch.Tensor], zero_bias: bool = False) -> nn.Sequential:
    """A copy of ``net`` with the incoming weights of every unit/channel whose mask is False set
    to zero (and their biases too if ``zero_bias``): the network :func:`prune` reproduces."""
    positions = _weight_layer_positions(net)
    if len(masks) != len(positions) - 1:
        raise ValueError(f"masks: expected {len(positions) - 1} masks (one per hidden layer), got {len(masks)}")
    masked = copy.deepcopy(net)
    with torch.no_grad():
        for pos, keep in zip(positions[:-1], masks):
            layer = masked[pos]
            drop = ~keep.to(layer.weight.device)
            layer.weight[drop] = 0.0
            if zero_bias and layer.bias is not None:
                layer.bias[drop] = 0.0
    return masked


def _pads_with_zeros(conv: nn.Conv2d) -> bool:
    """Whether ``conv`` pads its input with zeros, so that a constant input channel is not seen as
    a constant at the border (which makes folding a removed channel's constant inexact).
    Handles numeric padding (int or tuple) and the strings ``"valid"`` (no padding) and
    ``"same"`` (padding of dilation * (k - 1) in total per side pair: none only for a 1 x 1
    kernel). Padding modes other than ``"zeros"`` (reflect, replicate, circular) pad a
    constant map with that constant, so folding stays exact."""
    padding = conv.padding
    if isinstance(padding, str):
        if padding == "valid":
            amount = 0
        elif padding == "same":
            amount = sum(d * (k - 1) for d, k in zip(conv.dilation, conv.kernel_size))
        else:  # torch accepts only "valid" and "same"; anything else is a malformed layer
            raise ValueError(f"Conv2d padding={padding!r} is not understood; expected 'valid', 'same' or numbers")
    else:
        amount = sum(int(p) for p in padding)
    return amount > 0 and conv.padding_mode == "zeros"


def _constant_after(segment: Sequence[nn.Module], values: torch.Tensor) -> torch.Tensor:
    """What a constant pre-activation ``values`` (one per unit/channel) becomes after the modules
    between two weight layers: ReLU applies, Dropout (eval) / Identity / pooling / Flatten keep it
    (max-pooling a constant map gives the constant)."""
    for module in segment:
        if isinstance(module, nn.ReLU):
            values = torch.relu(values)
    return values


def prune(net: nn.Sequential, eps: float = 1e-3, criterion: str = "max_abs", fold_bias: bool = True,
          min_units: int = 1, masks: Sequence[torch.Tensor] | None = None) -> nn.Sequential:
    """A physically smaller copy of ``net`` without the hidden units/channels that
    :func:`unit_keep_masks` (``eps``, ``criterion``) drops, or those False in ``masks`` if given.

    Removed with each unit: its weight row / kernel and bias, and the next layer's matching input
    columns (input channels of a Conv2d; across ``Flatten`` the H*W features of each channel).
    With ``fold_bias`` the constant a removed unit still emits (relu(bias), its incoming weights
    being zeroed) is folded into the next layer's bias, so in eval mode the result equals
    ``mask_network(net, masks)``; without it, ``mask_network(net, masks, zero_bias=True)``.
    The input ``net`` is not modified; the result is on its device, in eval mode if it was.
    """
    positions = _weight_layer_positions(net)
    if masks is None:
        masks = unit_keep_masks(net, eps, criterion, min_units)
    elif len(masks) != len(positions) - 1:
        raise ValueError(f"masks: expected {len(positions) - 1} masks (one per hidden layer), got {len(masks)}")
    masks = [m.to(torch.bool).cpu() for m in masks]
    layers: list[nn.Module] = []
    prev_keep: torch.Tensor | None = None
    prev_const: torch.Tensor | None = None  # what each unit of the previous weight layer emits if removed
    with torch.no_grad():
        for k, pos in enumerate(positions):
            start = positions[k - 1] + 1 if k else 0
            layers.extend(copy.deepcopy(m) for m in net[start:pos])
            layer = net[pos]
            weight = layer.weight.detach()
            bias = layer.bias.detach() if layer.bias is not None else torch.zeros(weight.shape[0], device=weight.device,
                                                                                  dtype=weight.dtype)
            bias_add = torch.zeros_like(bias)
            if prev_keep is not None:
                keep_in = prev_keep.to(weight.device)
                if isinstance(layer, nn.Linear):
                    if layer.in_features % keep_in.numel():
                        raise ValueError(f"net[{pos}]: {layer.in_features} input features are not a multiple of "
                                         f"the {keep_in.numel()} units/channels before it")
                    per_unit = layer.in_features // keep_in.numel()  # H*W after a conv, 1 after a Linear
                    keep_in = keep_in.repeat_interleave(per_unit)
                    const = prev_const.repeat_interleave(per_unit)
                    bias_add = weight[:, ~keep_in] @ const[~keep_in]
                else:
                    const = prev_const
                    if fold_bias and bool((const[~keep_in] != 0).any()) and _pads_with_zeros(layer):
                        raise ValueError(f"net[{pos}]: folding removed channels' constants into a zero-padded "
                                         f"convolution (padding={layer.padding!r}) is not exact at the border; "
                                         "use fold_bias=False")
                    bias_add = weight[:, ~keep_in].sum(dim=(2, 3)) @ const[~keep_in]
                weight = weight[:, keep_in]
            keep_out = masks[k].to(weight.device) if k < len(masks) else torch.ones(weight.shape[0], dtype=torch.bool,
                                                                                   device=weight.device)
            new_weight = weight[keep_out].clone()
            new_bias = (bias + bias_add)[keep_out].clone()
            has_bias = layer.bias is not None or bool((bias_add != 0).any())
            if isinstance(layer, nn.Linear):
                new = nn.Linear(new_weight.shape[1], new_weight.shape[0], bias=has_bias,
                                device=weight.device, dtype=weight.dtype)
            else:
                new = nn.Conv2d(new_weight.shape[1], new_weight.shape[0], layer.kernel_size, stride=layer.stride,
                                padding=layer.padding, dilation=layer.dilation, bias=has_bias,
                                padding_mode=layer.padding_mode, device=weight.device, dtype=weight.dtype)
            new.weight.copy_(new_weight)
            if has_bias:
                new.bias.copy_(new_bias)
            layers.append(new)
            if k < len(masks):
                end = positions[k + 1]
                pre = bias if fold_bias else torch.zeros_like(bias)
                prev_const = _constant_after(net[pos + 1:end], pre)
                prev_keep = masks[k]
        layers.extend(copy.deepcopy(m) for m in net[positions[-1] + 1:])
    pruned = nn.Sequential(*layers)
    pruned.train(net.training)
    return pruned


__all__ = ["PRUNE_CRITERIA", "check_eps", "check_criterion", "unit_keep_masks", "mask_network", "prune"]
