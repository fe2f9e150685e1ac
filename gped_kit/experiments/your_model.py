"""Notebook 09: GPED for your own ``nn.Module`` and data. It runs its own small examples live (nothing of the
results store), so its entry declares only what it writes to ``figures/`` and what it tests."""

from __future__ import annotations

from .artifacts import Artifact, Kind, declare
from .checks import Check, Role, declare_checks
from .frame import Experiment

#: What notebook 09 writes to ``figures/`` (:mod:`gped_kit.experiments.artifacts`).
ARTIFACTS = declare(
    Artifact("regression", Kind.FIGURE, "09_regression_uncertainty",
             "Regression with a Gaussian likelihood: the student's predictive mean and its variance split into "
             "aleatoric and epistemic parts, beside the teacher ensemble's", "computed live in the notebook"),
)

#: What notebook 09 tests on its examples (:mod:`gped_kit.experiments.checks`).
CHECKS = declare_checks(
    Check("teacher_accuracy", "teacher accuracy above 0.9", Role.FINDING),
    Check("student_close", "student accuracy less than 5 points below the teacher's", Role.FINDING),
    Check("entropy_skill", "entropy student's skill over the best constant >= 0.05", Role.FINDING),
    Check("aleatoric", "{network}: aleatoric variance larger where the noise is", Role.FINDING),
    Check("epistemic", "{network}: epistemic variance larger outside the data", Role.FINDING),
    Check("reloaded", "reloaded student predicts identically", Role.INVARIANT),
    Check("offline_close", "ensemble's GPED student (D' = {d_prime}) within 5 points of the ensemble's accuracy",
          Role.FINDING),
    Check("ensemble_knowledge", "ensemble: knowledge uncertainty higher on noise than on digits", Role.FINDING),
    Check("student_knowledge", "ensemble's GPED student (D' = digits + noise): knowledge uncertainty higher on noise "
          "than on digits", Role.FINDING),
)

EXPERIMENT = Experiment("09_your_own_model", artifacts=ARTIFACTS, checks=CHECKS,
    description="your own model and data through the public API")
