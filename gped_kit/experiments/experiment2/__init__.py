"""Experiment 2 (paper 003, Section 4.2; Figures 1, 3-5, Tables 5-7): one chain per (model, |D|, m) cell with
U_s and U_o students of the predictive distribution and the expected entropy, and the trends the paper reports;
notebooks ``02_experiment2_mnist``, ``03_experiment2_cifar10`` and ``04_figure3_masking``.

* :mod:`.settings`: :class:`Experiment2Settings` and :data:`PROFILES` (``default``: a reduced grid for a CPU;
  ``seeds``: the same grid over three seeds; ``paper``: Appendix A.2 and the full grids, for a GPU);
* :mod:`.tasks`: the grid (:func:`experiment2_tasks`), the learning-rate schedule check
  (:func:`lr_schedule_tasks`) and the CIFAR-10 cells (:func:`cifar_tasks`); a cell's chain is the paper's
  :func:`~gped_kit.experiments.paper.distillation_task`, shared with Experiment 1;
* :mod:`.analysis`: the cells (:func:`experiment2_cells`), the trends beside the paper's
  (:func:`experiment2_trend_comparison`, :func:`experiment2_trend_cells_compared`), Tables 5-7
  (:func:`experiment2_comparison`), the schedule check (:func:`gap_by_schedule`), which stored chains are
  Experiment 1-2 chains (:func:`experiment12_rows`);
* :mod:`.notebook`: the notebooks' summary, checks and README rows (:data:`MNIST`, :data:`CIFAR10`,
  :data:`FIGURE3`).
"""

from .analysis import (
    BELOW_FLOOR_TABLE,
    TRENDS_TABLE,
    below_floor,
    below_floor_text,
    chain_lengths,
    experiment2_cells,
    experiment2_comparison,
    experiment2_trend_cells_compared,
    experiment2_trend_comparison,
    experiment2_trends,
    experiment12_rows,
    gap_by_schedule,
    schedule_counts,
    trends_held_text,
)
from .notebook import CIFAR10, FIGURE3, MNIST, experiment2_summary
from .settings import PROFILES, Experiment2Settings
from .tasks import cifar_tasks, experiment2_tasks, lr_check_tasks, lr_schedule_tasks

__all__ = ["MNIST", "CIFAR10", "FIGURE3", "PROFILES", "Experiment2Settings", "experiment2_tasks", "lr_schedule_tasks",
           "lr_check_tasks", "cifar_tasks", "experiment2_cells", "experiment2_comparison",
           "experiment2_trend_cells_compared", "experiment2_trend_comparison", "experiment2_trends",
           "experiment12_rows",
           "chain_lengths", "gap_by_schedule", "schedule_counts", "experiment2_summary",
           "trends_held_text", "TRENDS_TABLE",
           "BELOW_FLOOR_TABLE", "below_floor", "below_floor_text"]
