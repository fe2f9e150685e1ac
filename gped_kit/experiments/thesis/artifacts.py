"""What notebook 08 writes to ``figures/`` (:mod:`gped_kit.experiments.artifacts`)."""

from __future__ import annotations

from ..artifacts import Artifact, Kind, declare

ARTIFACTS = declare(
    Artifact("mog", Kind.TABLE, "thesis_toys_mog_{profile}",
             "Bayesian mixture of Gaussians: batch and online students' distance from p_MC per N ({profile} profile)",
             "the toys (store kind thesis)"),
    Artifact("mog_figure", Kind.FIGURE, "thesis_fig3_1_to_3_9_mog_{profile}",
             "Thesis Figures 3.1–3.9: the Gibbs posterior of the means and the predictive densities ({profile} "
             "profile)", "the toys (store kind thesis)"),
    Artifact("mog_online_vs_batch", Kind.FIGURE, "thesis_mog_online_vs_batch_{profile}",
             "Bayesian mixture of Gaussians: distance from p_MC and memory, batch against online EM ({profile} "
             "profile)", "the toys (store kind thesis)"),
    Artifact("logreg", Kind.TABLE, "thesis_toys_logreg_{profile}",
             "2-D Bayesian logistic regression: all twelve students' distance from p_MC ({profile} profile)",
             "the toys (store kind thesis)"),
    Artifact("logreg_figure", Kind.FIGURE, "thesis_fig3_11_to_3_16_logreg_{generator}_{profile}",
             "Thesis Figures 3.11–3.16 with the {generator} input generator: chain samples, student weights and "
             "p(y = 1 | x) ({profile} profile)", "the toys (store kind thesis)"),
    Artifact("logreg_generators", Kind.FIGURE, "thesis_logreg_generators_{profile}",
             "2-D logistic regression: distance from p_MC on test points by input generator ({profile} profile)",
             "the toys (store kind thesis)"),
    Artifact("claims", Kind.TABLE, "thesis_toys_claims_{profile}",
             "The thesis' findings counted on ours ({profile} profile)", "the toys (store kind thesis)"),
    Artifact("mog_agreement", Kind.TABLE, "thesis_toys_mog_agreement_{profile}",
             "Whether the online mixture-of-Gaussians students end where the batch ones do ({profile} profile)",
             "the toys (store kind thesis)"),
    Artifact("logreg_agreement", Kind.TABLE, "thesis_toys_logreg_agreement_{profile}",
             "Whether the online logistic-regression students end where the batch ones do ({profile} profile)",
             "the toys (store kind thesis)"),
)
