"""What notebook 01 writes to ``figures/`` and tests on its results (:mod:`gped_kit.experiments.artifacts`,
:mod:`gped_kit.experiments.checks`)."""

from __future__ import annotations

from ..artifacts import Artifact, Kind, declare
from ..checks import Check, Role, declare_checks

ARTIFACTS = declare(
    Artifact("table1", Kind.TABLE, "table1_experiment1_{profile}",
             "Table 1 ({profile} profile): teacher and student NLL and entropy MAE per model, ours beside the paper's",
             "the chains' summary (store kind chain)"),
    Artifact("table1_figure", Kind.FIGURE, "fig_table1_experiment1_{profile}",
             "Table 1 ({profile} profile) drawn: ours over the seeds beside the paper's value in a ±10% band",
             "the chains' summary (store kind chain)"),
    Artifact("calibration", Kind.TABLE, "calibration_experiment1_{profile}",
             "Expected calibration error of the teacher ensemble and the predictive students ({profile} profile)",
             "the chains' calibration bins (store kind chain)"),
    Artifact("reliability", Kind.FIGURE, "fig_reliability_experiment1_{model}_{profile}",
             "Reliability diagrams of {model}'s teacher ensemble and predictive students, seed 0 ({profile} profile)",
             "the chains' calibration bins (store kind chain)"),
    Artifact("profiles", Kind.TABLE, "table1_experiment1_profiles",
             "Table 1 under every stored profile and the committed GPU chain, beside the paper's",
             "the store's chains of every profile and docs/device-runs"),
    Artifact("estimator_gap", Kind.TABLE, "experiment1_estimator_gap",
             "The U_s − U_o student NLL gap per profile beside the paper's, with what each profile does differently",
             "the store's chains of every profile"),
    Artifact("estimator_ablation", Kind.TABLE, "experiment1_estimator_ablation",
             "The U_s − U_o gap when one setting at a time is changed to the paper's (FCNN)",
             "the ablation's chains (store kind chain)"),
)

CHECKS = declare_checks(
    Check("mnist_finished", "every MNIST cell completed", Role.INVARIANT),
    Check("finished_or_missing", "every cell ran or reported missing data", Role.INVARIANT),
    Check("teacher_nll", "MNIST teachers reach NLL below 0.2", Role.FINDING),
    Check("nll_gap", "student-teacher NLL gap between 0 and 0.1 for every MNIST model (paper: +0.030 FCNN, "
                     "+0.031 CNN)", Role.FINDING),
    Check("entropy_skill", "entropy students beat the best constant prediction by the skill floor (skill >= 0.05) "
                           "for every MNIST model", Role.FINDING),
    Check("seed_spread", "teacher NLL's seed spread below 0.01 for every MNIST model", Role.FINDING),
)
