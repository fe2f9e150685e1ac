"""Gradients of functions of parameter dictionaries, for one chain or under ``torch.func.vmap``.

The engine's step functions differentiate a loss of a parameter dictionary. Under
``torch.func.vmap`` (a batch of chains) that must be done with ``torch.func``'s composable
transforms; for one chain, plain ``torch.autograd`` computes the same gradients with the same
kernels and less Python overhead (a measurement: docs/benchmarks.md). :class:`Autodiff` names
the two modes and the functions below compute the same values in either.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch.func import grad_and_value, vjp

from . import losses
from .options import Option

Params = dict[str, torch.Tensor]


class Autodiff(Option):
    """``autograd`` for one chain (outside any ``torch.func`` transform), ``functorch`` under vmap."""

    AUTOGRAD = "autograd"
    FUNCTORCH = "functorch"


def value_and_grad(fn: Callable[..., torch.Tensor], params: Params, *args, mode: Autodiff
                   ) -> tuple[torch.Tensor, Params]:
    """``(fn(params, *args), d fn / d params)`` for a scalar ``fn``; the value is detached."""
    if mode is Autodiff.FUNCTORCH:
        grads, value = grad_and_value(fn)(params, *args)
        return value.detach(), grads
    leaves = {k: p.detach().requires_grad_(True) for k, p in params.items()}
    with torch.enable_grad():
        value = fn(leaves, *args)
        grads = torch.autograd.grad(value, list(leaves.values()))
    return value.detach(), dict(zip(leaves, grads))


def projected_input_gradient(log_outputs_fn: Callable[[torch.Tensor], tuple[torch.Tensor, Any]], x: torch.Tensor,
                             projection: torch.Tensor, mode: Autodiff, create_graph: bool) -> tuple[torch.Tensor, Any]:
    """``(d/dx sum_i v_i log f_i(x), aux)`` per example: the thesis' derivative matching with a
    random projection ``v`` (:func:`gped_kit.core.losses.input_gradients`).

    ``log_outputs_fn(x)`` returns ``(log f(x), aux)`` -- ``aux`` is anything else computed in the
    same forward pass (e.g. the raw outputs for the distillation loss), returned as is.
    ``create_graph`` keeps the gradient differentiable with respect to the parameters inside
    ``log_outputs_fn`` (the student's double backpropagation); otherwise it and ``aux`` are
    detached (the teacher's side, a constant of the student's loss).
    """
    if mode is Autodiff.FUNCTORCH:
        log_outputs, pullback, aux = vjp(log_outputs_fn, x, has_aux=True)
        (grad,) = pullback(projection.to(log_outputs.dtype))
        return (grad, aux) if create_graph else (grad.detach(), _detached(aux))
    with torch.enable_grad():
        x = x.detach().requires_grad_(True)
        log_outputs, aux = log_outputs_fn(x)
        grad = losses.input_gradients(log_outputs, x, projection, create_graph=create_graph)
    return (grad, aux) if create_graph else (grad.detach(), _detached(aux))


def _detached(aux: Any) -> Any:
    return aux.detach() if isinstance(aux, torch.Tensor) else aux
