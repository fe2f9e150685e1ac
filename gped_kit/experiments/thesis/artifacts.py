"""What notebook 08 writes to ``figures/`` and tests on its results (:mod:`gped_kit.experiments.artifacts`,
:mod:`gped_kit.experiments.checks`)."""

from __future__ import annotations

from ..artifacts import Artifact, Kind, declare
from ..checks import Check, Role, declare_checks

ARTIFACTS = declare(
    Artifact("mog", Kind.TABLE, "thesis_toys_mog_{profile}",
             "Bayesian mixture of Gaussians: batch and online students' distance from p_MC per N ({profile} profile)",
             "the toys (store kind toy)"),
    Artifact("mog_figure", Kind.FIGURE, "thesis_fig3_1_to_3_9_mog_{profile}",
             "Thesis Figures 3.1–3.9: the Gibbs posterior of the means and the predictive densities ({profile} "
             "profile)", "the toys (store kind toy)"),
    Artifact("mog_online_vs_batch", Kind.FIGURE, "thesis_mog_online_vs_batch_{profile}",
             "Bayesian mixture of Gaussians: distance from p_MC and memory, batch against online EM ({profile} "
             "profile)", "the toys (store kind toy)"),
    Artifact("logreg", Kind.TABLE, "thesis_toys_logreg_{profile}",
             "2-D Bayesian logistic regression: all twelve students' distance from p_MC ({profile} profile)",
             "the toys (store kind toy)"),
    Artifact("logreg_figure", Kind.FIGURE, "thesis_fig3_11_to_3_16_logreg_{generator}_{profile}",
             "Thesis Figures 3.11–3.16 with the {generator} input generator: chain samples, student weights and "
             "p(y = 1 | x) ({profile} profile)", "the toys (store kind toy)"),
    Artifact("logreg_generators", Kind.FIGURE, "thesis_logreg_generators_{profile}",
             "2-D logistic regression: distance from p_MC on test points by input generator ({profile} profile)",
             "the toys (store kind toy)"),
    Artifact("claims", Kind.TABLE, "thesis_toys_claims_{profile}",
             "The thesis' findings counted on ours ({profile} profile)", "the toys (store kind toy)"),
    Artifact("mog_agreement", Kind.TABLE, "thesis_toys_mog_agreement_{profile}",
             "Whether the online mixture-of-Gaussians students end where the batch ones do ({profile} profile)",
             "the toys (store kind toy)"),
    Artifact("logreg_agreement", Kind.TABLE, "thesis_toys_logreg_agreement_{profile}",
             "Whether the online logistic-regression students end where the batch ones do ({profile} profile)",
             "the toys (store kind toy)"),
)

CHECKS = declare_checks(
    Check("mog_online_em", "MoG online EM KL to p_MC at most 2x batch EM's + 0.002 at every N", Role.FINDING),
    Check("mog_largest_n", "MoG online EM KL to p_MC at most 2x batch EM's at the largest N, no slack",
          Role.FINDING),
    Check("logreg_online_ce", "LogReg online CE mean KL on test inputs at most 2x batch CE's + 0.002, every "
          "generator", Role.FINDING),
    Check("logreg_grid", "LogReg online CE students within mean abs 0.05 of batch CE students over the grid, "
                         "every generator", Role.FINDING),
    Check("pure_noise_worse", "pure noise worse than data-based inputs for every student (mean KL on test inputs)",
          Role.FINDING),
    Check("dse_closer", "DSE closer to p_MC than CE in every comparison judged (both modes, every generator; "
          "where the DSE student did not minimise its own loss below the CE student's, no evidence)", Role.FINDING),
    Check("dse_minimised", "every DSE student minimised its own loss (derivative square error against p_MC) below "
          "the CE student's", Role.FINDING),
    Check("kl_bound", "every student within mean KL 0.5 of p_MC", Role.FINDING),
    Check("skill", "every student beats the best constant prediction (skill >= the floor)", Role.FINDING),
)
