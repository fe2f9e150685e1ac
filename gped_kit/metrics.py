"""Evaluation metrics for teachers and students (Section 4.2).

* NLL of a predictive distribution on labelled test data, ``-mean_i log p(y_i | x_i)``;
  probabilities are floored at ``1e-12`` (so a confidently wrong prediction costs ~27.6 nats,
  not infinity);
* accuracy of the arg-max class;
* mean absolute error between a student's and the teacher's expectation estimates (the
  paper's "MAE (Entropy)");
* the student-teacher NLL gap, ``NLL_student - NLL_teacher``.
"""

from __future__ import annotations

import torch

PROB_FLOOR = 1e-12


def nll(probs: torch.Tensor, labels: torch.Tensor) -> float:
    """Mean negative log-likelihood of ``labels`` under predictive ``probs`` (N, C)."""
    picked = probs.gather(1, labels.view(-1, 1)).squeeze(1)
    return float(-picked.clamp_min(PROB_FLOOR).log().mean())


def accuracy(probs: torch.Tensor, labels: torch.Tensor) -> float:
    """Fraction of examples whose most probable class is the label."""
    return float((probs.argmax(dim=1) == labels).float().mean())


def mae(estimate: torch.Tensor, reference: torch.Tensor) -> float:
    """Mean absolute error, averaged over examples and dimensions."""
    if estimate.shape != reference.shape:
        raise ValueError(f"mae: shapes differ, {tuple(estimate.shape)} vs {tuple(reference.shape)}")
    return float((estimate - reference).abs().mean())


def predictive_entropy(probs: torch.Tensor) -> torch.Tensor:
    """Entropy H[p] = -sum_y p log p of each row (total uncertainty when p is the predictive)."""
    return torch.special.entr(probs).sum(dim=-1)
