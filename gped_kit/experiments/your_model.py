"""Notebook 09: GPED for your own ``nn.Module`` and data. It runs its own small examples live (nothing of the
results store), so its entry declares only what it writes to ``figures/``."""

from __future__ import annotations

from .artifacts import Artifact, Kind, declare
from .frame import Experiment

#: What notebook 09 writes to ``figures/`` (:mod:`gped_kit.experiments.artifacts`).
ARTIFACTS = declare(
    Artifact("regression", Kind.FIGURE, "09_regression_uncertainty",
             "Regression with a Gaussian likelihood: the student's predictive mean and its variance split into "
             "aleatoric and epistemic parts, beside the teacher ensemble's", "computed live in the notebook"),
)

EXPERIMENT = Experiment("09_your_own_model", artifacts=ARTIFACTS,
    description="your own model and data through the public API")
