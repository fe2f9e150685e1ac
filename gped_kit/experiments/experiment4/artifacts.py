"""What notebook 06 writes to ``figures/`` and tests on its results (:mod:`gped_kit.experiments.artifacts`,
:mod:`gped_kit.experiments.checks`)."""

from __future__ import annotations

from ..artifacts import Artifact, Kind, declare
from ..checks import Check, Role, declare_checks

ARTIFACTS = declare(
    Artifact("claims", Kind.TABLE, "experiment4_claims_{profile}",
             "The paper's Experiment 4 claims counted on our cells and the paper's ({profile} profile)",
             "the downstream evaluation (store kind experiment4)"),
    Artifact("claim_cells", Kind.TABLE, "experiment4_claim_cells_{profile}",
             "Every cell of the Experiment 4 claims: GPED, EnD² and the paper's winner ({profile} profile)",
             "the downstream evaluation (store kind experiment4)"),
    Artifact("teacher_lines", Kind.TABLE, "experiment4_teacher_lines_{profile}",
             "Each student beside its own teacher ensemble: NLL, accuracy, OOD AUROC ({profile} profile)",
             "the downstream evaluation (store kind experiment4)"),
    Artifact("in_distribution", Kind.TABLE, "table2_8_9_10_experiment4_in_distribution_{profile}",
             "Tables 2, 8, 9 and 10: in-distribution test metrics, ours beside the paper's ({profile} profile)",
             "the downstream evaluation (store kind experiment4)"),
    Artifact("figure14", Kind.FIGURE, "fig14_experiment4_accuracy_nll_{profile}",
             "Figure 14: test accuracy and NLL of the ensemble, GPED and EnD² ({profile} profile)",
             "the downstream evaluation (store kind experiment4)"),
    Artifact("figure15", Kind.FIGURE, "fig15_experiment4_data_uncertainty_{model}_{profile}",
             "Figure 15 ({model}): each student's expected data uncertainty against the ensemble's, per test input "
             "({profile} profile)", "the downstream evaluation (store kind experiment4)"),
    Artifact("calibration", Kind.TABLE, "calibration_experiment4_{profile}",
             "Expected calibration error of the teacher ensemble, GPED and EnD² ({profile} profile)",
             "the downstream evaluation (store kind experiment4)"),
    Artifact("reliability", Kind.FIGURE, "fig_reliability_experiment4_{model}_{profile}",
             "Reliability diagrams of {model}'s teacher ensemble, GPED and EnD² ({profile} profile)",
             "the downstream evaluation (store kind experiment4)"),
    Artifact("ood", Kind.TABLE, "table3_11_12_13_experiment4_ood_auroc_{profile}",
             "Tables 3, 11, 12 and 13: OOD detection AUROC, ours beside the paper's ({profile} profile)",
             "the downstream evaluation (store kind experiment4)"),
    Artifact("ndcg", Kind.TABLE, "table4_14_15_16_experiment4_ndcg_{profile}",
             "Tables 4, 14, 15 and 16: uncertainty ranking nDCG@20, ours beside the paper's ({profile} profile)",
             "the downstream evaluation (store kind experiment4)"),
    Artifact("profiles", Kind.TABLE, "experiment4_claims_profiles",
             "The Experiment 4 claims under every stored profile", "the store's evaluations of every profile"),
    Artifact("teacher_quality", Kind.TABLE, "experiment4_teacher_quality_profiles",
             "The Experiment 4 teachers' test NLL under every stored profile, beside the paper's",
             "the store's evaluations of every profile"),
)

CHECKS = declare_checks(
    Check("finished_or_missing", "every cell ran or reported missing data", Role.INVARIANT),
    Check("mnist_cells", "MNIST cells with results", Role.FINDING),
    Check("ood_sets", "OOD sets evaluated", Role.FINDING),
    Check("ensemble_auroc", "the ensemble tells every OOD set from the test set better than chance (AUROC > "
                            "0.6; False when none loaded)", Role.FINDING),
    Check("claim", "{claim}", Role.FINDING),
)
