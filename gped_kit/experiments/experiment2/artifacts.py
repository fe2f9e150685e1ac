"""What notebooks 02, 03 and 04 write to ``figures/`` and test on their results
(:mod:`gped_kit.experiments.artifacts`, :mod:`gped_kit.experiments.checks`)."""

from __future__ import annotations

from ..artifacts import Artifact, Kind, declare
from ..checks import Check, Role, declare_checks

MNIST_ARTIFACTS = declare(
    Artifact("below_floor", Kind.TABLE, "experiment2_mnist_below_floor_{profile}",
             "Experiment 2 students that do not beat the best constant prediction ({profile} profile)",
             "the grid's chains (store kind chain)"),
    Artifact("figure", Kind.FIGURE, "{figure}_experiment2_{model}_{profile}",
             "Figure {figure} ({model}): teacher NLL, NLL gap and entropy MAE over the masking rate, ours above the "
             "paper's ({profile} profile)", "the grid's chains (store kind chain)"),
    Artifact("table", Kind.TABLE, "{name}_experiment2_{model}_{profile}",
             "Table {name} ({model}): every cell of the grid, ours beside the paper's ({profile} profile)",
             "the grid's chains (store kind chain)"),
    Artifact("trends", Kind.TABLE, "experiment2_mnist_trends_{profile}",
             "The paper's Experiment 2 trends counted on our cells and on the paper's ({profile} profile)",
             "the grid's chains (store kind chain)"),
    Artifact("trend_cells", Kind.TABLE, "experiment2_mnist_trend_cells_{profile}",
             "Every comparison the Experiment 2 trends rest on, ours and the paper's ({profile} profile)",
             "the grid's chains (store kind chain)"),
    Artifact("lr_schedule", Kind.TABLE, "experiment2_gap_by_lr_schedule_{profile}",
             "The NLL gap over N with the students' learning rate halved on the paper's schedule ({profile} profile)",
             "the schedule check's chains (store kind chain)"),
    Artifact("profiles", Kind.TABLE, "experiment2_mnist_trends_profiles",
             "The Experiment 2 trends under every stored profile", "the store's chains of every profile"),
)

CIFAR10_ARTIFACTS = declare(
    Artifact("figure5", Kind.FIGURE, "fig5_experiment2_cnn_cifar10_{profile}",
             "Figure 5: CIFAR-10 students of every size, ours beside the paper's ({profile} profile)",
             "the size sweep's chains (store kind chain)"),
    Artifact("table7", Kind.TABLE, "table7_experiment2_cnn_cifar10_{profile}",
             "Table 7: the CIFAR-10 size sweep, ours beside the paper's ({profile} profile)",
             "the size sweep's chains (store kind chain)"),
)

FIGURE3_ARTIFACTS = declare(
    Artifact("figure3", Kind.FIGURE, "fig3_masked_mnist",
             "Figure 3: MNIST test digits with one random m × m square set to 0", "the MNIST test set"),
    Artifact("explorer", Kind.SNAPSHOT, "explorer_masking_{profile}",
             "The masking explorer's opening view over the stored Experiment 2 grid ({profile} profile)",
             "the grid's chains (store kind chain)"),
)

MNIST_CHECKS = declare_checks(
    Check("finished", "every cell completed", Role.INVARIANT),
    Check("batched", "chains computed by this run shared batches (chains_per_batch = {chains_per_batch})",
          Role.INVARIANT),
    Check("trend", "{model}: {trend}", Role.FINDING),
    Check("schedule", "{schedule} schedule: comparisons in which the gap falls with more data", Role.FINDING),
)

CIFAR10_CHECKS = declare_checks(
    Check("present", "CIFAR-10 present here", Role.FINDING),
    Check("teacher_nll", "CIFAR-10 teachers reach NLL below 1.5 (paper, Table 7: 0.67-1.07)", Role.FINDING),
    Check("uo_vs_us", "U_o at least as good as U_s in most comparisons", Role.FINDING),
    Check("missing_data", "every CIFAR-10 cell reports missing data", Role.INVARIANT),
    Check("message", "the message names where it looked and how to get the files", Role.INVARIANT),
)

FIGURE3_CHECKS = declare_checks(
    Check("rates", "masking rates", Role.FINDING),
    Check("paper_rates", "Experiment 2 rates match the paper", Role.INVARIANT),
    Check("stored_rates", "stored Experiment 2 rates are m^2/784 and round to the paper's", Role.INVARIANT),
    Check("square", "m {m:2d}: one {m}x{m} square per digit, all zero inside, the rest unchanged", Role.INVARIANT),
)
