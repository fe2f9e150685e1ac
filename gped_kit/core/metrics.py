"""Evaluation metrics for teachers and students (Section 4.2).

* NLL of a predictive distribution on labelled test data, ``-mean_i log p(y_i | x_i)``;
  probabilities are floored at ``1e-12`` (so a confidently wrong prediction costs ~27.6 nats,
  not infinity);
* accuracy of the arg-max class;
* mean absolute error between a student's and the teacher's expectation estimates (the
  paper's "MAE (Entropy)");
* the student-teacher NLL gap, ``NLL_student - NLL_teacher``;
* regression (Gaussian likelihood): the Gaussian NLL of real targets and the RMSE of the mean;
* the multiclass Brier score ``mean_i sum_c (1[y_i = c] - p_c(x_i))^2`` in [0, 2] (Brier, 1950;
  scikit-learn's ``brier_score_loss``); the Hydra paper (002) reports ``sum_c p_c^2 - 2 p_y``
  (Ovadia et al.'s convention), which is this minus 1;
* Experiment 4: AUROC of out-of-distribution detection by an uncertainty score, and nDCG@k of
  a student's uncertainty ranking against the teacher ensemble's (both from scikit-learn).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import torch
from sklearn.metrics import brier_score_loss, ndcg_score, roc_auc_score
from torchmetrics.functional.classification import multiclass_calibration_error

PROB_FLOOR = 1e-12


def nll(probs: torch.Tensor, labels: torch.Tensor) -> float:
    """Mean negative log-likelihood of ``labels`` under predictive ``probs`` (N, C)."""
    picked = probs.gather(1, labels.view(-1, 1)).squeeze(1)
    return float(-picked.clamp_min(PROB_FLOOR).log().mean())


def accuracy(probs: torch.Tensor, labels: torch.Tensor) -> float:
    """Fraction of examples whose most probable class is the label."""
    return float((probs.argmax(dim=1) == labels).float().mean())


#: The number of equal-width confidence bins of the expected calibration error (torchmetrics' and Guo et al.'s).
ECE_BINS = 15


#: How far a probability may lie outside [0, 1], and a row's sum away from 1, and still count as a probability:
#: float32 running sums and their differences (the teacher ensemble over a trailing window of its samples,
#: :mod:`gped_kit.engine.window`) carry round-off of about 1e-6; anything beyond this tolerance is not a
#: predictive distribution (logits, say) and is refused.
PROB_TOLERANCE = 1e-4


def as_probabilities(probs: torch.Tensor, what: str = "probs") -> torch.Tensor:
    """``probs`` (N, C) clipped into [0, 1] when every value lies within :data:`PROB_TOLERANCE` of it and every
    row sums to 1 within the same tolerance (round-off of running sums); ``ValueError`` naming the worst
    value or row otherwise. Libraries that take either probabilities or logits (torchmetrics: any value
    outside [0, 1] makes it apply a softmax to the whole tensor) must be handed the clipped tensor."""
    if probs.dim() != 2 or probs.shape[1] < 1:
        raise ValueError(f"{what} must be (N, C) predictive probabilities, got shape {tuple(probs.shape)}")
    low, high = float(probs.min()), float(probs.max())
    if low < -PROB_TOLERANCE or high > 1 + PROB_TOLERANCE:
        raise ValueError(f"{what} holds values from {low:.6g} to {high:.6g}, outside [0, 1] by more than "
                         f"{PROB_TOLERANCE:g}: not probabilities (logits?); pass softmax(logits)")
    gap = float((probs.double().sum(dim=1) - 1).abs().max())
    if gap > PROB_TOLERANCE:
        raise ValueError(f"{what}: a row sums to 1 {'+-'} {gap:.3g}, beyond the tolerance {PROB_TOLERANCE:g}: "
                         "not a predictive distribution")
    return probs.clamp(0.0, 1.0)


def ece(probs: torch.Tensor, labels: torch.Tensor, num_bins: int = ECE_BINS) -> float:
    """Expected calibration error of predictive ``probs`` (N, C) against ``labels`` with ``num_bins``
    equal-width bins of the top-label confidence: ``sum_b (n_b / N) |acc_b - conf_b|`` (Guo et al., 2017),
    computed by torchmetrics (``multiclass_calibration_error``, ``norm="l1"``) on ``probs`` checked and clipped
    by :func:`as_probabilities` (torchmetrics reads a tensor with any value outside [0, 1] as logits). NaN when
    ``probs`` holds a non-finite value (a diverged student), so that a run's summary records it instead of
    failing. :func:`gped_kit.core.calibration.calibration` adds the reliability diagram's bins."""
    if not bool(torch.isfinite(probs).all()):
        return float("nan")
    probs = as_probabilities(probs.detach().float(), "ece: probs")
    return float(multiclass_calibration_error(probs, labels.long().to(probs.device),
                                              num_classes=probs.shape[1], n_bins=num_bins, norm="l1"))


def brier_score(probs: torch.Tensor, labels: torch.Tensor) -> float:
    """Multiclass Brier score ``mean_i sum_c (1[y_i = c] - p_ic)^2`` (0 = perfect, 2 = worst)."""
    c = probs.shape[1]
    p = probs.detach().cpu().double()
    p = p / p.sum(dim=1, keepdim=True)  # float32 averages sum to 1 only up to round-off
    return float(brier_score_loss(_numpy(labels).astype(int), p.numpy(), labels=list(range(c)),
                                  scale_by_half=False))


def gaussian_nll(mean: torch.Tensor, variance: torch.Tensor, targets: torch.Tensor) -> float:
    """Mean negative log-likelihood of real ``targets`` under independent Gaussians N(mean, variance),
    summed over output dimensions: ``mean_i sum_d [ (y - mu)^2 / (2 s^2) + log(2 pi s^2) / 2 ]``."""
    if not (mean.shape == variance.shape == targets.shape):
        raise ValueError(f"gaussian_nll: shapes differ, mean {tuple(mean.shape)}, variance "
                         f"{tuple(variance.shape)}, targets {tuple(targets.shape)}")
    var = variance.clamp_min(PROB_FLOOR)
    per_dim = 0.5 * ((targets - mean) ** 2 / var + torch.log(2 * torch.pi * var))
    return float(per_dim.reshape(per_dim.shape[0], -1).sum(1).mean())


def rmse(mean: torch.Tensor, targets: torch.Tensor) -> float:
    """Root mean squared error over examples and output dimensions."""
    if mean.shape != targets.shape:
        raise ValueError(f"rmse: shapes differ, {tuple(mean.shape)} vs {tuple(targets.shape)}")
    return float((mean - targets).pow(2).mean().sqrt())


def mae(estimate: torch.Tensor, reference: torch.Tensor) -> float:
    """Mean absolute error, averaged over examples and dimensions."""
    if estimate.shape != reference.shape:
        raise ValueError(f"mae: shapes differ, {tuple(estimate.shape)} vs {tuple(reference.shape)}")
    return float((estimate - reference).abs().mean())


def constant_mae(reference: torch.Tensor) -> float:
    """The mean absolute error of the best constant prediction of ``reference`` (N, ...): per output, its
    median over the N examples (the constant that minimises the absolute error), chosen with hindsight on
    the examples themselves. A student whose error is not below it has learned nothing per input."""
    flat = reference.reshape(len(reference), -1)
    return float((flat - flat.median(dim=0).values).abs().mean())


def zero_mae(reference: torch.Tensor) -> float:
    """The mean absolute error of predicting 0 for ``reference``: the natural null of a non-negative
    expectation (the expected entropy, a model uncertainty), whose error is then the reference's mean size."""
    return float(reference.abs().mean())


def constant_nll(labels: torch.Tensor, num_classes: int) -> float:
    """The NLL of the best constant predictive distribution for ``labels`` (N,): the labels' own class
    frequencies, chosen with hindsight (no constant has a lower NLL), i.e. their entropy in nats."""
    freq = torch.bincount(labels.reshape(-1).long().cpu(), minlength=num_classes).double()
    freq = freq / freq.sum()
    return float(-(freq * freq.clamp_min(PROB_FLOOR).log()).sum())


def skill(error: float, constant_error: float) -> float:
    """``1 - error / constant_error``: 1 for a perfect student, 0 for one no better than the best constant,
    negative for a worse one; NaN when the constant is already exact (nothing to learn)."""
    return 1.0 - error / constant_error if constant_error > 0 else float("nan")


def skill_columns(columns) -> list[str]:
    """The columns among ``columns`` (a table's or a metrics dict's names) that say whether a student learnt
    what it is trained to reproduce, the teacher ensemble's expectation: ``skill`` (of its ``target_mae``, or
    ``mean_mae`` for a regression mean) and each ``<error>_mae_skill`` (``entropy_mae_skill``,
    ``epistemic_mae_skill``, ...), in their order; for a student with none of these (EnD2's prior network,
    whose output is no estimate of E[g]) its ``student_nll_skill``. A predictive student's
    ``student_nll_skill`` is its NLL against the labels' best constant, which a faithful student of a teacher
    that itself barely beats a constant (a masking rate of 0.8) also scores low: reported, not a sign that the
    student learnt nothing."""
    columns = [str(c) for c in columns]
    own = [c for c in columns if c == "skill" or c.endswith("_mae_skill")]
    return own or [c for c in columns if c == "student_nll_skill"]


def lowest_known(values: Iterable[float]) -> float:
    """The lowest of ``values`` (several skills behind one result), NaN where any of them is NaN (not stored or
    undefined) or none is given: unlike ``min``, whose answer with a NaN depends on where the NaN stands."""
    found = [float(v) for v in values]
    return min(found) if found and not any(math.isnan(v) for v in found) else math.nan


def lowest_skill(row) -> tuple[str, float] | None:
    """The lowest skill of one student's ``row`` (a mapping or a table row) over :func:`skill_columns` of the
    skills it reports (NaN ones left out first: a table of several students has every student's columns) and
    its column; None when the row reports none (a result stored before every built-in target reported skill)."""
    reported = [c for c in row.keys() if str(c).endswith("skill") and row[c] is not None
                and not math.isnan(float(row[c]))]
    found = [(c, float(row[c])) for c in skill_columns(reported)]
    return min(found, key=lambda cv: cv[1]) if found else None


def predictive_entropy(probs: torch.Tensor) -> torch.Tensor:
    """Entropy H[p] = -sum_y p log p of each row (total uncertainty when p is the predictive)."""
    return torch.special.entr(probs).sum(dim=-1)


def _numpy(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().double().numpy().reshape(-1)
    return np.asarray(x, float).ravel()


def ood_auroc(score_in, score_out) -> float:
    """AUROC of telling OOD inputs from in-distribution ones by an uncertainty score.

    OOD inputs are the positives (label 1), in-distribution test inputs the negatives (0); a
    higher score means "more likely OOD". 1.0: every OOD input scores above every
    in-distribution one; 0.5: chance. Computed by ``sklearn.metrics.roc_auc_score``.
    """
    a, b = _numpy(score_in), _numpy(score_out)
    if not len(a) or not len(b):
        raise ValueError(f"ood_auroc needs both sets non-empty, got {len(a)} in-distribution and {len(b)} OOD scores")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("ood_auroc: scores contain NaN or inf")
    return float(roc_auc_score(np.r_[np.zeros(len(a)), np.ones(len(b))], np.r_[a, b]))


def ndcg_trials(reference, estimate, k: int = 20, subset_size: int = 100, trials: int = 500,
                seed: int = 0) -> np.ndarray:
    """nDCG@k of ranking inputs by ``estimate`` against the ``reference`` ranking (Experiment 4).

    Each trial draws ``subset_size`` inputs without replacement; the *relevance* of an input is
    its reference (teacher ensemble) uncertainty value, used as a linear graded gain (values
    below 0, which only round-off can give for a mutual information, count as 0); the
    student's uncertainties give the ranking. nDCG@k = DCG@k of the student's order divided by
    DCG@k of the reference's own order (``sklearn.metrics.ndcg_score``; ties in the estimate
    are averaged). Returns one score per trial; the paper reports mean +- std over 500
    trials of 100 inputs with k = 20.
    """
    ref, est = _numpy(reference), _numpy(estimate)
    if ref.shape != est.shape:
        raise ValueError(f"ndcg_trials: reference has {ref.size} values, estimate {est.size}")
    for name, value, low in (("k", k, 1), ("subset_size", subset_size, 2), ("trials", trials, 1)):
        if not isinstance(value, int) or value < low:
            raise ValueError(f"ndcg_trials {name}={value!r}: must be an integer >= {low}")
    if subset_size > ref.size:
        raise ValueError(f"ndcg_trials subset_size={subset_size} exceeds the {ref.size} inputs")
    rng = np.random.default_rng(seed)
    ref = np.clip(ref, 0.0, None)
    out = np.empty(trials)
    for i in range(trials):
        idx = rng.choice(ref.size, size=subset_size, replace=False)
        out[i] = ndcg_score(ref[idx][None], est[idx][None], k=k)
    return out
