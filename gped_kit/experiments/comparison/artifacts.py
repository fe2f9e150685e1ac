"""What notebook 07 writes to ``figures/`` and tests on its results (:mod:`gped_kit.experiments.artifacts`,
:mod:`gped_kit.experiments.checks`)."""

from __future__ import annotations

from ..artifacts import Artifact, Kind, declare
from ..checks import Check, Role, declare_checks

ARTIFACTS = declare(
    Artifact("learning_curves", Kind.FIGURE, "comparison_learning_curves_{profile}",
             "The comparison's MNIST chain and its GPED students over the steps ({profile} profile)",
             "the comparison (store kind comparison)"),
    Artifact("mnist", Kind.TABLE, "comparison_mnist_{profile}",
             "Every method on one MNIST chain: accuracy, NLL, Brier score and model uncertainty ({profile} profile)",
             "the comparison (store kind comparison)"),
    Artifact("mnist_figure", Kind.FIGURE, "comparison_mnist_{profile}",
             "Every method on one MNIST chain: test NLL and the error of its model uncertainty ({profile} profile)",
             "the comparison (store kind comparison)"),
    Artifact("mu_split", Kind.TABLE, "comparison_mu_error_split_{profile}",
             "Each method's model-uncertainty error split into its two heads' errors ({profile} profile)",
             "the comparison (store kind comparison)"),
    Artifact("budgets", Kind.TABLE, "comparison_budgets_{profile}",
             "Each method's other expectations, training budget and memory ({profile} profile)",
             "the comparison (store kind comparison)"),
    Artifact("kd_variants", Kind.TABLE, "comparison_kd_variants_{profile}",
             "The thesis' KD variants on MNIST: input generators and derivative matching ({profile} profile)",
             "the comparison (store kind comparison)"),
    Artifact("spiral_maps", Kind.FIGURE, "comparison_spiral_maps_{profile}",
             "Uncertainty maps of every method on the 2-D spiral ({profile} profile)",
             "the spiral (store kind spiral)"),
    Artifact("spiral", Kind.TABLE, "comparison_spiral_{profile}",
             "Every method's uncertainties in the spiral's coin-flip ring and far from its data ({profile} profile)",
             "the spiral (store kind spiral)"),
    Artifact("test_profiles", Kind.TABLE, "comparison_mnist_test_profiles",
             "Every method on the MNIST test set under every stored profile",
             "the store's comparisons of every profile"),
    Artifact("claims_profiles", Kind.TABLE, "comparison_claims_profiles",
             "The comparison's claims under every stored profile", "the store's comparisons of every profile"),
)

CHECKS = declare_checks(
    Check("claim", "{claim}", Role.FINDING),
)
