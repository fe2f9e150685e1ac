"""Distillation losses l(g_hat, f(x|phi)) and regularisers R(phi) (Section 3.2, Eq. 8; Section 3.3).

Losses take the estimated target and the student's *raw* outputs (or a prediction, for the
absolute error) and return one value per example, shape ``(B,)``; the distillation loop
averages them over the minibatch (Eq. 8 up to the constant N'/M', to which Adam is
insensitive; lambda is therefore a per-example weight).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F

#: Prior-network concentrations are capped at e^20 so that exp cannot overflow.
DIRICHLET_MAX_LOG_ALPHA = 20.0


def cross_entropy(target_probs: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
    """l(p, q) = -sum_y p(y) log q(y) with q = softmax(raw) (Bayesian Dark Knowledge loss).

    Linear in ``p``, so a single-sample target (U_s) gives an unbiased gradient.
    """
    return -(target_probs * F.log_softmax(raw, dim=-1)).sum(dim=-1)


def absolute_error(target: torch.Tensor, prediction: torch.Tensor) -> torch.Tensor:
    """l(h, h') = |h - h'| summed over the target's dimensions (entropy loss, Section 3.2)."""
    return (target - prediction).abs().sum(dim=-1)


def squared_error(target: torch.Tensor, prediction: torch.Tensor) -> torch.Tensor:
    """l(h, h') = (h - h')^2 summed over the target's dimensions."""
    return (target - prediction).pow(2).sum(dim=-1)


def dirichlet_nll(mean_log_pi: torch.Tensor, raw: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """EnD2 loss (paper 003, Eq. 11; Malinin et al., 2020): the negative Dirichlet log-density of the
    teacher's categoricals pi_m under the student's Dirichlet(alpha), averaged over the samples m:

        -[ ln Gamma(alpha_0) - sum_c ln Gamma(alpha_c) + sum_c (alpha_c - 1) E_m[ln pi_mc] ]

    with alpha = exp(raw / temperature) (capped at exp(:data:`DIRICHLET_MAX_LOG_ALPHA`)).
    The samples enter only through ``mean_log_pi`` = E_m[ln pi_m] (B, C), in which the loss is
    linear: a single-sample target (U_s) gives an unbiased gradient, and U_o's running mean of
    ln pi is the Monte Carlo estimate of Eq. 11's inner average.
    """
    log_alpha = (raw / temperature).clamp(max=DIRICHLET_MAX_LOG_ALPHA)
    alpha = log_alpha.exp()
    log_norm = torch.lgamma(alpha.sum(-1)) - torch.lgamma(alpha).sum(-1)
    return -(log_norm + ((alpha - 1.0) * mean_log_pi).sum(-1))


def group_weight_names(module: nn.Module) -> list[str]:
    """Names (as in ``module.named_parameters()``) of the weights grouped by :func:`group_lasso`:
    every ``nn.Linear`` and ``nn.Conv2d`` weight but the last layer's."""
    layers = [name for name, m in module.named_modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    if len(layers) < 2:
        raise ValueError("group_lasso: the module needs a hidden Linear or Conv2d layer")
    return [f"{name}.weight" if name else "weight" for name in layers[:-1]]


def group_lasso(params: dict[str, torch.Tensor], module: nn.Module) -> torch.Tensor:
    """Group l1/l2 regulariser R(phi) = sum_k ||phi_{G_k}||_2 (Section 3.3).

    One group per unit of every ``nn.Linear`` (its incoming weights, a row of the weight
    matrix) and per output channel of every ``nn.Conv2d`` (its incoming kernel weights) of
    ``module``, read from ``params`` (the values of ``module.named_parameters()``, e.g. a
    functional state). Biases are not regularised, nor is the output layer (the last such
    layer): its units are the outputs, which cannot be pruned.
    """
    return torch.stack([params[name].flatten(1).norm(dim=1).sum() for name in group_weight_names(module)]).sum()


#: Regularisers R(params, module) by name (Eq. 8's lambda R(phi)).
REGULARIZERS = {"group_lasso": group_lasso}


# ----------------------------------------------------------------------------- derivative matching
# Papamakarios' thesis (paper 001), Section 2.1.2 / 2.2.2 and Section 3.3.1: match the students'
# input-gradients of the log outputs to the teacher's ("derivative square error").


def rademacher(batch_size: int, num_outputs: int, generator: torch.Generator | None = None,
               device: torch.device | str | None = None, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A random projection ``v`` of shape ``(batch_size, num_outputs)`` with independent entries
    +1 or -1 (probability 1/2 each), for :func:`input_gradients`.

    ``device`` defaults to the generator's device (CPU without a generator). The same ``v`` must
    be used for the student's and the teacher's gradients of a minibatch.
    """
    if not (isinstance(batch_size, int) and batch_size >= 1 and isinstance(num_outputs, int) and num_outputs >= 1):
        raise ValueError(f"rademacher: batch_size={batch_size!r} and num_outputs={num_outputs!r} must be integers >= 1")
    if device is None:
        device = generator.device if generator is not None else "cpu"
    bits = torch.randint(0, 2, (batch_size, num_outputs), generator=generator, device=device)
    return (2 * bits - 1).to(dtype)


def input_gradients(log_outputs_fn: Callable[[torch.Tensor], torch.Tensor] | torch.Tensor, x: torch.Tensor,
                    projection: torch.Tensor | None = None, create_graph: bool = False) -> torch.Tensor:
    """Input-gradients of the log outputs, d/dx log f_i(x), per example (thesis, Eqs. 2.18, 3.25-3.26).

    Args:
        log_outputs_fn: either a function ``x -> log f(x)`` of shape ``(B, C)`` (e.g.
            ``lambda x: F.log_softmax(net(x), -1)``; it is called on a detached copy of ``x``
            that requires grad), or the tensor ``log f(x)`` itself, already computed from ``x``
            (then ``x`` must require grad; its graph is kept, so the same forward pass can also
            feed a cross-entropy term). The log outputs must treat examples independently (no
            BatchNorm in training mode), so that one backward pass over the batch sum gives every
            example's own gradient.
        x: inputs ``(B, ...)`` (any shape after the batch axis, e.g. images).
        projection: ``v`` of shape ``(B, C)``, or None.
        create_graph: True for the student, whose gradients must be differentiable with respect
            to its parameters (double backpropagation; the thesis' R{backprop}, Eq. 2.12); False
            for the teacher, whose gradients are constants of the loss.

    Returns:
        * with ``projection`` v: ``g = d/dx sum_i v_i log f_i(x)`` of the shape of ``x``, i.e.
          ``v^T J`` per example with ``J`` the ``C x D`` Jacobian of the log outputs. **One
          backward pass** whatever C is.
        * with ``projection=None``: the full Jacobian ``(B, C, ...)``, one backward pass per output
          (C passes; for C = 1 that is the single gradient, shape ``(B, 1, ...)``).

    **Rademacher estimator.** With the same ``v`` for student and teacher and ``v`` Rademacher
    (:func:`rademacher`, E[v_i v_j] = delta_ij),

        E_v || v^T (J_s - J_t) ||^2 = sum_ij E[v_i v_j] (J_s - J_t)_i . (J_s - J_t)_j = ||J_s - J_t||_F^2,

    so :func:`derivative_square_error` of the two projected gradients is an unbiased estimate of
    the thesis' derivative square error summed over outputs (2C times Eq. 2.18) at the cost of one
    backward pass per side instead of C (the thesis notes the 2C-backprop cost, Section 2.1.2).
    A projection ``v_i = sqrt(w_i) * rademacher`` estimates the weighted sum ``sum_i w_i ||d_i||^2``
    instead, e.g. Eq. 3.24's weights t(x), 1 - t(x) for binary classification.
    """
    if callable(log_outputs_fn) and not isinstance(log_outputs_fn, torch.Tensor):
        x = x.detach().requires_grad_(True)
        log_outputs = log_outputs_fn(x)
        retain = create_graph
    else:
        log_outputs = log_outputs_fn
        if not isinstance(log_outputs, torch.Tensor):
            raise TypeError(f"input_gradients: log_outputs_fn must be a callable or a tensor, "
                            f"got {type(log_outputs_fn).__name__}")
        if not x.requires_grad:
            raise ValueError("input_gradients: given log outputs as a tensor, x must require grad and the log "
                             "outputs must be computed from it (or pass a function x -> log outputs)")
        retain = True
    if log_outputs.dim() != 2 or log_outputs.shape[0] != x.shape[0]:
        raise ValueError(f"input_gradients: log outputs must have shape (B, C) with B = {x.shape[0]} "
                         f"(x's batch size), got {tuple(log_outputs.shape)}")
    if projection is not None:
        if projection.shape != log_outputs.shape:
            raise ValueError(f"input_gradients: projection must have the log outputs' shape "
                             f"{tuple(log_outputs.shape)}, got {tuple(projection.shape)}")
        (grad,) = torch.autograd.grad((projection.to(log_outputs.dtype) * log_outputs).sum(), x,
                                      create_graph=create_graph, retain_graph=retain)
        return grad
    num_outputs = log_outputs.shape[1]
    rows = []
    for i in range(num_outputs):
        (grad,) = torch.autograd.grad(log_outputs[:, i].sum(), x, create_graph=create_graph,
                                      retain_graph=retain or i < num_outputs - 1)
        rows.append(grad)
    return torch.stack(rows, dim=1)


def derivative_square_error(student_grad: torch.Tensor, teacher_grad: torch.Tensor) -> torch.Tensor:
    """Derivative square error per example, shape ``(B,)``: ``||g_s - g_t||^2`` summed over every
    axis but the batch axis (thesis, Eq. 2.18; Eqs. 3.25-3.26 for binary classification).

    With full Jacobians ``(B, C, ...)`` from :func:`input_gradients` this is
    ``sum_i ||d/dx log f_i - d/dx log t_i||^2`` = 2C times Eq. 2.18's E_DSE(x, theta), whose
    ``1/(2I)`` is a constant factor (absorbed in the loss weight, like Eq. 8's N'/M'); with
    Rademacher-projected gradients it is an unbiased estimate of the same quantity. The teacher's
    gradient is treated as a constant (detach it, or compute it with ``create_graph=False``).
    """
    if student_grad.shape != teacher_grad.shape:
        raise ValueError(f"derivative_square_error: shapes differ: student {tuple(student_grad.shape)}, "
                         f"teacher {tuple(teacher_grad.shape)}")
    return (student_grad - teacher_grad.detach()).pow(2).flatten(1).sum(dim=1)
