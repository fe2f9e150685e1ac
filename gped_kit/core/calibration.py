"""Calibration of a predictive distribution: the expected calibration error and a reliability diagram's bins.

For N test inputs with predictive probabilities p_i (C classes) and labels y_i, the top-label confidence
is c_i = max_k p_ik and the correctness a_i = 1[argmax_k p_ik = y_i]. With the interval [0, 1] split into
B bins of equal width (Naeini, Cooper and Hauskrecht, 2015; Guo, Pleiss, Sun and Weinberger, 2017),

    ECE = sum_b (n_b / N) |acc_b - conf_b|,   acc_b = mean_{i in b} a_i,   conf_b = mean_{i in b} c_i.

The number is torchmetrics' (``multiclass_calibration_error``, ``norm="l1"``, through
:func:`gped_kit.core.metrics.ece`, the one every run's summary reports): a well-kept implementation,
not ours. A reliability diagram needs the bins themselves, which torchmetrics does not return: they are
computed here with its binning (``torch.bucketize`` on ``linspace(0, 1, B + 1)`` with ``right=True``, so a
confidence of exactly 1 has a slot of its own above the last bin), and the ECE of these bins equals
torchmetrics' (``tests/test_calibration.py``). A perfectly calibrated predictive has acc_b = conf_b in every
bin and an ECE of 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from .metrics import ECE_BINS, as_probabilities, ece

#: The number of equal-width confidence bins by default (torchmetrics' and Guo et al.'s choice).
NUM_BINS = ECE_BINS


@dataclass(frozen=True)
class Calibration:
    """``ece`` (torchmetrics') and the reliability diagram's ``bins``: one row per non-empty bin with
    ``lower``, ``upper`` (the bin's edges; a last row with both 1 holds the confidences of exactly 1),
    ``count``, ``confidence`` (the mean top-label confidence) and ``accuracy`` (the share correct)."""

    ece: float
    bins: pd.DataFrame
    num_bins: int

    @property
    def binned_ece(self) -> float:
        """The ECE recomputed from :attr:`bins` (equal to :attr:`ece` up to float rounding)."""
        b = self.bins
        return float((b["count"] / b["count"].sum() * (b["accuracy"] - b["confidence"]).abs()).sum())


def calibration(probs: torch.Tensor, labels: torch.Tensor, num_bins: int = NUM_BINS) -> Calibration:
    """The :class:`Calibration` of predictive probabilities ``probs`` (N, C) against ``labels`` (N,) with
    ``num_bins`` equal-width confidence bins (module docstring). ``ValueError`` for shapes that do not
    match, probabilities outside [0, 1] or rows that do not sum to 1 (beyond
    :data:`~gped_kit.core.metrics.PROB_TOLERANCE`, within which they are clipped), labels outside 0 .. C - 1, or fewer
    than one bin."""
    if probs.dim() != 2 or labels.dim() != 1 or len(probs) != len(labels) or len(probs) == 0:
        raise ValueError(f"calibration: probs must be (N, C) and labels (N,) with N > 0, got {tuple(probs.shape)} "
                         f"and {tuple(labels.shape)}")
    if not isinstance(num_bins, int) or num_bins < 1:
        raise ValueError(f"calibration: num_bins={num_bins!r}; must be an integer >= 1")
    probs = as_probabilities(probs.detach().double().cpu(), "calibration: probs")
    labels = labels.detach().long().cpu()
    num_classes = probs.shape[1]
    if bool((labels < 0).any() or (labels >= num_classes).any()):
        raise ValueError(f"calibration: labels must lie in 0 .. {num_classes - 1} for {num_classes} classes")
    error = ece(probs, labels, num_bins)
    confidence, prediction = probs.max(1)
    correct = (prediction == labels).double()
    edges = torch.linspace(0, 1, num_bins + 1, dtype=torch.float64)
    slot = torch.bucketize(confidence, edges, right=True) - 1  # num_bins: a confidence of exactly 1
    count = torch.zeros(num_bins + 1, dtype=torch.float64).scatter_add_(0, slot, torch.ones_like(confidence))
    conf_sum = torch.zeros_like(count).scatter_add_(0, slot, confidence)
    acc_sum = torch.zeros_like(count).scatter_add_(0, slot, correct)
    lower = torch.cat([edges[:-1], edges[-1:]])
    upper = torch.cat([edges[1:], edges[-1:]])
    keep = count > 0
    bins = pd.DataFrame({"lower": lower[keep].numpy(), "upper": upper[keep].numpy(),
                         "count": count[keep].long().numpy(), "confidence": (conf_sum / count)[keep].numpy(),
                         "accuracy": (acc_sum / count)[keep].numpy()})
    return Calibration(ece=error, bins=bins, num_bins=num_bins)


__all__ = ["NUM_BINS", "Calibration", "calibration"]


def calibrations_from_table(table: pd.DataFrame, by: str = "network") -> dict[str, Calibration]:
    """The :class:`Calibration` of each ``by`` value of a stored calibration table (one row per non-empty bin
    with ``ece``, ``lower``, ``upper``, ``count``, ``confidence``, ``accuracy``, e.g.
    :meth:`gped_kit.engine.GPEDResult.calibration_table`), in order of first appearance; ``num_bins`` is read
    back from the bin widths. ValueError naming the missing columns."""
    need = {by, "ece", "lower", "upper", "count", "confidence", "accuracy"}
    if missing := sorted(need - set(table.columns)):
        raise ValueError(f"calibrations_from_table: the table lacks the column(s) {missing}")
    out = {}
    for name, rows in table.groupby(by, sort=False):
        widths = (rows["upper"] - rows["lower"])[rows["upper"] > rows["lower"]]
        num_bins = int(round(1 / widths.iloc[0])) if len(widths) else NUM_BINS
        bins = rows[["lower", "upper", "count", "confidence", "accuracy"]].reset_index(drop=True)
        out[str(name)] = Calibration(ece=float(rows["ece"].iloc[0]), bins=bins, num_bins=num_bins)
    return out
