"""Distillation losses l(g_hat, f(x|phi)) and regularisers R(phi) (Section 3.2, Eq. 8; Section 3.3).

Losses take the estimated target and the student's *raw* outputs (or a prediction, for the
absolute error) and return one value per example, shape ``(B,)``; the distillation loop
averages them over the minibatch (Eq. 8 up to the constant N'/M', to which Adam is
insensitive; lambda is therefore a per-example weight).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


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

    with alpha = exp(raw / temperature) (capped like :func:`gped_kit.models.dirichlet_head`).
    The samples enter only through ``mean_log_pi`` = E_m[ln pi_m] (B, C), in which the loss is
    linear: a single-sample target (U_s) gives an unbiased gradient, and U_o's running mean of
    ln pi is the Monte Carlo estimate of Eq. 11's inner average.
    """
    from .models import DIRICHLET_MAX_LOG_ALPHA

    log_alpha = (raw / temperature).clamp(max=DIRICHLET_MAX_LOG_ALPHA)
    alpha = log_alpha.exp()
    log_norm = torch.lgamma(alpha.sum(-1)) - torch.lgamma(alpha).sum(-1)
    return -(log_norm + ((alpha - 1.0) * mean_log_pi).sum(-1))


def group_lasso(module: nn.Module) -> torch.Tensor:
    """Group l1/l2 regulariser R(phi) = sum_k ||phi_{G_k}||_2 (Section 3.3).

    One group per unit of every ``nn.Linear`` (its incoming weights, a row of the weight
    matrix) and per output channel of every ``nn.Conv2d`` (its incoming kernel weights).
    Biases are not regularised, nor is the output layer (the last such layer): its units are
    the outputs, which cannot be pruned.
    """
    layers = [m for m in module.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    if len(layers) < 2:
        raise ValueError("group_lasso: the module needs a hidden Linear or Conv2d layer")
    return torch.stack([layer.weight.flatten(1).norm(dim=1).sum() for layer in layers[:-1]]).sum()


REGULARIZERS = {"group_lasso": group_lasso}
