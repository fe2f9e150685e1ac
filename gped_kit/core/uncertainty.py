"""Uncertainty decomposition for teachers and students (paper 003, Experiment 4; Malinin et al., 2020).

For a posterior (or an ensemble, or a Dirichlet over categoricals) p(pi | x) over class
distributions pi = p(y | x, theta):

* total uncertainty      H[E[pi]]            the entropy of the predictive distribution;
* expected data (aleatoric) uncertainty      E[H[pi]]     the posterior expected entropy;
* knowledge (epistemic) uncertainty          H[E[pi]] - E[H[pi]], the mutual information
  between y and theta (>= 0 for a true mixture, by concavity of H).

Where each model gets the two expectations (a student's target names its decomposition,
:meth:`gped_kit.core.targets.Target.uncertainties`):

* the teacher ensemble: online Monte Carlo means of p and of H[p] over the SGLD samples
  (the ``predictive+entropy`` target's accumulator);
* a GPED student with C+1 outputs: its softmax outputs estimate E[pi] and its exp output
  estimates E[H[pi]] (both distilled; the difference is therefore not guaranteed >= 0;
  :func:`from_predictive_entropy_output`);
* an EnD2 prior network: a Dirichlet(alpha) over pi, whose moments are closed-form
  (:func:`from_dirichlet_output`): E[pi] = alpha / alpha_0 and
  E[H[pi]] = -sum_c (alpha_c/alpha_0) (psi(alpha_c + 1) - psi(alpha_0 + 1)) with
  alpha_0 = sum_c alpha_c (Malinin et al., 2020, Eq. 6 of "Ensemble Distribution Distillation").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .metrics import predictive_entropy

KINDS = ("total", "data", "knowledge")


@dataclass(frozen=True)
class Uncertainties:
    """Per-input uncertainties (tensors of shape (N,)) and the predictive (N, C) they come from."""

    predictive: torch.Tensor
    total: torch.Tensor
    data: torch.Tensor

    @property
    def knowledge(self) -> torch.Tensor:
        """Knowledge uncertainty: total - expected data uncertainty (mutual information)."""
        return self.total - self.data

    def get(self, kind: str) -> torch.Tensor:
        if kind not in KINDS:
            raise ValueError(f"uncertainty kind={kind!r} is not known; allowed: {KINDS}")
        return {"total": self.total, "data": self.data, "knowledge": self.knowledge}[kind]

    def __getitem__(self, index) -> Uncertainties:
        return Uncertainties(self.predictive[index], self.total[index], self.data[index])


def from_moments(predictive: torch.Tensor, expected_entropy: torch.Tensor) -> Uncertainties:
    """Uncertainties from E[pi] (N, C) and E[H[pi]] (N,) or (N, 1): teacher ensembles, GPED students."""
    if predictive.dim() != 2:
        raise ValueError(f"predictive must be (N, C), got shape {tuple(predictive.shape)}")
    expected_entropy = expected_entropy.reshape(-1)
    if expected_entropy.shape[0] != predictive.shape[0]:
        raise ValueError(f"expected_entropy has {expected_entropy.shape[0]} rows, predictive {predictive.shape[0]}")
    return Uncertainties(predictive, predictive_entropy(predictive), expected_entropy)


def from_samples(probs: torch.Tensor) -> Uncertainties:
    """Uncertainties of an explicit ensemble ``probs`` of shape (S, N, C) (S members/samples)."""
    if probs.dim() != 3:
        raise ValueError(f"probs must be (S, N, C), got shape {tuple(probs.shape)}")
    return from_moments(probs.mean(0), predictive_entropy(probs).mean(0))


def dirichlet_expected_entropy(alpha: torch.Tensor) -> torch.Tensor:
    """E_{pi ~ Dir(alpha)}[H[pi]] = -sum_c (alpha_c/alpha_0) (psi(alpha_c + 1) - psi(alpha_0 + 1))."""
    alpha0 = alpha.sum(-1, keepdim=True)
    return -((alpha / alpha0) * (torch.digamma(alpha + 1) - torch.digamma(alpha0 + 1))).sum(-1)


def from_dirichlet(alpha: torch.Tensor) -> Uncertainties:
    """Closed-form uncertainties of a prior network's Dirichlet(alpha), alpha of shape (N, C) > 0."""
    if alpha.dim() != 2:
        raise ValueError(f"alpha must be (N, C), got shape {tuple(alpha.shape)}")
    if not bool((alpha > 0).all()):
        raise ValueError("Dirichlet concentrations alpha must all be > 0")
    return from_moments(alpha / alpha.sum(-1, keepdim=True), dirichlet_expected_entropy(alpha))


def _check_c_plus_one(output: torch.Tensor, num_classes: int) -> None:
    if output.dim() != 2 or output.shape[1] != num_classes + 1:
        raise ValueError(f"expected outputs of shape (N, {num_classes + 1}), got {tuple(output.shape)}")


def from_predictive_entropy_output(output: torch.Tensor, num_classes: int) -> Uncertainties:
    """Uncertainties of a GPED student with C+1 linked outputs ``[E[pi], E[H[pi]]]`` (the
    ``predictive+entropy`` targets' decomposition): both expectations are read off directly."""
    _check_c_plus_one(output, num_classes)
    return from_moments(output[:, :num_classes], output[:, num_classes])


def from_dirichlet_output(output: torch.Tensor, num_classes: int) -> Uncertainties:
    """Uncertainties of an EnD2 prior network from its linked outputs ``[alpha/alpha_0, alpha_0]``
    (the EnD2 target's decomposition): the Dirichlet's closed forms (:func:`from_dirichlet`)."""
    _check_c_plus_one(output, num_classes)
    return from_dirichlet(output[:, :num_classes] * output[:, num_classes:])
