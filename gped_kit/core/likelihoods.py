"""Likelihoods p(y | x, theta) of the teacher: what a network's raw outputs mean.

A likelihood gives the teacher's training loss (the minibatch *mean* negative log-likelihood
``L`` of Eq. 7), the *output statistics* that the posterior expectations g of
:mod:`gped_kit.core.targets` are computed from, and the metrics of a predictive distribution
on labelled data.

* :class:`Categorical` (classification, the paper): raw outputs are C logits;
  ``log p(y | x, theta) = log_softmax(f(x; theta))_y``; the output statistics are the C
  log-probabilities.
* :class:`Gaussian` (regression): ``y ~ N(mu(x; theta), sigma^2(x; theta))`` per output
  dimension. With ``noise_variance`` given the network outputs the D means and sigma^2 is that
  constant (homoscedastic); with ``noise_variance=None`` it outputs 2D values, the means and
  the log-variances (heteroscedastic). The output statistics are ``[mu, sigma^2]`` (2D values).
  The posterior predictive of y has mean E[mu] and variance E[sigma^2] + Var[mu]: aleatoric
  plus epistemic (targets ``predictive_mean`` and ``predictive_variance``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch.nn import functional as F

from . import metrics


@dataclass(frozen=True)
class Categorical:
    """p(y | x, theta) = softmax(f(x; theta))_y over C classes."""

    name = "categorical"
    #: the target every teacher ensemble accumulates (its predictive distribution)
    ensemble_target = "predictive"
    #: labels y are class indices (an integer tensor)
    integer_labels = True

    def chance_nll(self, num_outputs: int) -> float | None:
        """The test NLL of a predictor that ignores x and predicts the uniform distribution over
        C = ``num_outputs`` classes: log C (None for fewer than two classes)."""
        return math.log(num_outputs) if num_outputs >= 2 else None

    def raw_outputs(self, num_outputs: int) -> int:
        """Raw network outputs for C = ``num_outputs`` classes: C logits."""
        return num_outputs

    def mean_nll(self, raw: torch.Tensor, y: torch.Tensor, vmapped: bool = False) -> torch.Tensor:
        """The minibatch mean of -log p(y_i | x_i, theta). ``vmapped``: the call runs under
        ``torch.func.vmap`` (a batch of chains), where ``cross_entropy``'s batching rule runs about twenty
        kernels; there the mean is taken of the gathered log-probabilities instead (five kernels): the same
        value up to the sum's round-off and the same gradient, bit for bit."""
        if vmapped:
            return -F.log_softmax(raw, dim=-1).gather(-1, y.unsqueeze(-1)).mean()
        return F.cross_entropy(raw, y)

    def statistics(self, raw: torch.Tensor) -> torch.Tensor:
        """Log-probabilities (B, C): what targets g take."""
        return F.log_softmax(raw, dim=-1)

    def predictive_nll(self, ensemble: dict[str, torch.Tensor], y: torch.Tensor) -> float:
        """The NLL of the ensemble's predictive E[p(y|x, theta)] on labelled data (``predictive_metrics``'
        ``"nll"``, without the other metrics' work)."""
        return metrics.nll(ensemble[self.ensemble_target], y)

    def predictive_metrics(self, ensemble: dict[str, torch.Tensor], y: torch.Tensor) -> dict[str, float]:
        """NLL, accuracy and expected calibration error (:func:`~gped_kit.core.metrics.ece`) of the
        ensemble's predictive E[p(y|x, theta)] on labelled data."""
        probs = ensemble[self.ensemble_target]
        return {"nll": self.predictive_nll(ensemble, y), "accuracy": metrics.accuracy(probs, y),
                "ece": metrics.ece(probs, y)}


class RegressionMoments(NamedTuple):
    """Per-input regression uncertainties from E[mu], E[mu^2], E[sigma^2] (each (B, D))."""

    mean: torch.Tensor
    epistemic: torch.Tensor
    aleatoric: torch.Tensor

    @property
    def total(self) -> torch.Tensor:
        """The predictive variance: aleatoric + epistemic."""
        return self.aleatoric + self.epistemic


def regression_moments(values: torch.Tensor) -> RegressionMoments:
    """Split ``(E[mu], E[mu^2], E[sigma^2])`` values (B, 3D) -- a teacher ensemble's estimate of the
    ``predictive_variance`` target or a student's linked output -- into the predictive mean E[mu], the
    epistemic variance Var[mu] = E[mu^2] - E[mu]^2 (floored at 0: Monte Carlo round-off can make the
    difference negative) and the aleatoric variance E[sigma^2]. The posterior predictive of y (a mixture
    of Gaussians) has mean E[mu] and variance ``total`` = aleatoric + epistemic."""
    mean, second, aleatoric = values.chunk(3, dim=-1)
    return RegressionMoments(mean, (second - mean * mean).clamp_min(0.0), aleatoric)


LOG_VARIANCE_MIN, LOG_VARIANCE_MAX = -8.0, 8.0


@dataclass(frozen=True)
class Gaussian:
    """y ~ N(mu(x; theta), sigma^2) per output dimension; ``noise_variance`` fixes sigma^2, None
    makes the network output log sigma^2 too."""

    noise_variance: float | None = None
    name = "gaussian"
    ensemble_target = "predictive_variance"
    integer_labels = False

    def chance_nll(self, num_outputs: int) -> float | None:
        """None: a Gaussian's NLL depends on the scale of y, so it has no chance level to compare with."""
        return None

    def __post_init__(self) -> None:
        if self.noise_variance is not None and not (self.noise_variance > 0 and math.isfinite(self.noise_variance)):
            raise ValueError(f"Gaussian noise_variance={self.noise_variance!r}: must be finite and > 0, or None "
                             "(the network then outputs log-variances)")

    def raw_outputs(self, num_outputs: int) -> int:
        return num_outputs if self.noise_variance is not None else 2 * num_outputs

    def mean_and_variance(self, raw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mu, sigma^2)``; a predicted log-variance is clamped to [-8, 8] (sigma from 0.018 to 55)
        so that one badly fitted point cannot make the NLL's gradient explode and the chain diverge."""
        if self.noise_variance is not None:
            return raw, torch.full_like(raw, self.noise_variance)
        mean, log_var = raw.chunk(2, dim=-1)
        return mean, log_var.clamp(LOG_VARIANCE_MIN, LOG_VARIANCE_MAX).exp()

    def mean_nll(self, raw: torch.Tensor, y: torch.Tensor, vmapped: bool = False) -> torch.Tensor:
        """The minibatch mean of -log N(y; mu, sigma^2), summed over output dimensions (the same
        operations under ``torch.func.vmap``: ``vmapped`` changes nothing)."""
        mean, var = self.mean_and_variance(raw)
        y = y.reshape(mean.shape)
        per_dim = 0.5 * ((y - mean) ** 2 / var + torch.log(2 * math.pi * var))
        return per_dim.sum(-1).mean()

    def statistics(self, raw: torch.Tensor) -> torch.Tensor:
        """``[mu, sigma^2]`` (B, 2D): what regression targets g take."""
        mean, var = self.mean_and_variance(raw)
        return torch.cat([mean, var], dim=-1)

    def predictive_nll(self, ensemble: dict[str, torch.Tensor], y: torch.Tensor) -> float:
        """The Gaussian NLL of the ensemble's predictive (mean E[mu], variance E[sigma^2] + Var[mu]) on labelled
        data (``predictive_metrics``' ``"nll"``)."""
        moments = regression_moments(ensemble[self.ensemble_target])
        return metrics.gaussian_nll(moments.mean, moments.total, y.reshape(moments.mean.shape))

    def predictive_metrics(self, ensemble: dict[str, torch.Tensor], y: torch.Tensor) -> dict[str, float]:
        """Gaussian NLL and RMSE of the ensemble's predictive (mean E[mu], variance E[sigma^2] + Var[mu])."""
        moments = regression_moments(ensemble[self.ensemble_target])
        y = y.reshape(moments.mean.shape)
        return {"nll": metrics.gaussian_nll(moments.mean, moments.total, y), "rmse": metrics.rmse(moments.mean, y)}


Likelihood = Categorical | Gaussian
CATEGORICAL = Categorical()


def resolve_likelihood(likelihood: str | Likelihood) -> Likelihood:
    """``"categorical"``, ``"gaussian"`` (heteroscedastic) or a likelihood object."""
    if isinstance(likelihood, (Categorical, Gaussian)):
        return likelihood
    if likelihood == "categorical":
        return CATEGORICAL
    if likelihood == "gaussian":
        return Gaussian()
    raise ValueError(f"likelihood={likelihood!r} is not known; allowed: ['categorical', 'gaussian'] or "
                     "Gaussian(noise_variance=...)")
