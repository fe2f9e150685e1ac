"""Networks from specifications: the paper's presets or any ``nn.Module``.

The engine builds every teacher and student from a *model specification*:

* an :class:`~gped_kit.models.presets.ArchSpec` (or a preset family name such as ``"fcnn"``):
  the paper's FCNN / CNN-MNIST / CNN-CIFAR10 with width multipliers K1, K2;
* a callable ``factory(out_dim) -> nn.Module``: called once per chain under the chain's seeded
  random state, so the seed decides the initial parameters;
* an ``nn.Module``: copied; its current parameters are the initial values (every seed starts
  from them).

:func:`instantiate` builds the network and checks, with one forward pass on two zero inputs,
that it maps inputs of the data's shape to ``out_dim`` finite raw outputs, so a mismatch (or a
network that makes NaN or infinity) is reported before any work starts. :func:`describe` gives the
identity of a specification used in result keys (a preset's fields, or a user model's class and architecture).
"""

from __future__ import annotations

import copy
from typing import Callable, Union

import torch
from torch import nn

from .presets import ARCHITECTURES, ArchSpec, build_network

ModelFactory = Callable[[int], nn.Module]
ModelSpec = Union[ArchSpec, str, ModelFactory, nn.Module]


def as_model_spec(spec: ModelSpec, name: str = "model") -> ModelSpec:
    """``spec`` with preset names turned into :class:`ArchSpec`; ``ValueError`` for anything else
    that is neither a module nor callable."""
    if isinstance(spec, str):
        if spec not in ARCHITECTURES:
            raise ValueError(f"{name}={spec!r} is not a preset; allowed: {list(ARCHITECTURES)}, an ArchSpec, "
                             "an nn.Module or a callable out_dim -> nn.Module")
        return ArchSpec(spec)
    if isinstance(spec, (ArchSpec, nn.Module)) or callable(spec):
        return spec
    raise ValueError(f"{name}={spec!r} is not a model: give a preset name {list(ARCHITECTURES)}, an ArchSpec, "
                     "an nn.Module or a callable out_dim -> nn.Module")


def instantiate(spec: ModelSpec, input_shape: tuple[int, ...], out_dim: int, name: str = "model") -> nn.Module:
    """The network of ``spec`` for inputs of ``input_shape`` (without the batch axis) and ``out_dim``
    raw outputs, on the CPU. A user's network is probed once on two all-zero inputs: ``ValueError`` naming
    it (``name``) when it fails on them, gives another shape than ``(2, out_dim)`` or a NaN or infinite value."""
    spec = as_model_spec(spec, name)
    if isinstance(spec, ArchSpec):
        return build_network(spec, tuple(input_shape), out_dim)
    net = copy.deepcopy(spec) if isinstance(spec, nn.Module) else spec(out_dim)
    if not isinstance(net, nn.Module):
        raise ValueError(f"{name}: the factory returned {type(net).__name__}, not an nn.Module")
    if not any(True for _ in net.parameters()):
        raise ValueError(f"{name}: {type(net).__name__} has no parameters to sample or train")
    was_training = net.training
    net.eval()
    try:
        with torch.no_grad():
            out = net(torch.zeros(2, *input_shape, device=next(net.parameters()).device))
    except Exception as exc:  # noqa: BLE001 -- re-raised with what was expected
        shape = ", ".join(map(str, input_shape))
        raise ValueError(f"{name}: {type(net).__name__} fails on inputs of shape (batch, {shape})"
                         f": {type(exc).__name__}: {exc}") from exc
    finally:
        net.train(was_training)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (2, out_dim):
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(f"{name}: {type(net).__name__} maps 2 inputs to {shape}; it must give (2, {out_dim}) "
                         f"raw outputs ({out_dim} = what the likelihood or target needs)")
    bad = int(out.numel() - torch.isfinite(out).sum())
    if bad:
        raise ValueError(f"{name}: {type(net).__name__} maps 2 all-zero inputs to non-finite raw outputs ({bad} of "
                         f"{out.numel()} values NaN or infinite) at its initial parameters; a network must give "
                         "finite outputs (check its forward pass and initial parameters)")
    return net


def describe(spec: ModelSpec) -> dict | str:
    """The identity of a model specification for result keys: an ArchSpec's fields, or a user
    model's qualified name and ``repr`` (its layers)."""
    spec = as_model_spec(spec)
    if isinstance(spec, ArchSpec):
        return {"family": spec.family, "k1": spec.k1, "k2": spec.k2, "dropout": spec.dropout}
    if isinstance(spec, nn.Module):
        return f"{type(spec).__module__}.{type(spec).__qualname__}: {spec!r}"
    return f"{getattr(spec, '__module__', '')}.{getattr(spec, '__qualname__', repr(spec))}"
