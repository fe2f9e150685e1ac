"""Experiment 3: student architecture search on the speed-storage-accuracy trade-off (paper 003,
Section 3.3; Section 4, Experiment 3; Appendix A.2; Figures 2 and 6-13).

Two ways of choosing a student architecture, both distilled from ONE teacher chain per data
setting and searched target (Algorithm 1 with many students attached; the chain does not depend on them):

* **exhaustive search** (Section 3.3, first approach): one student per pair of width multipliers
  (K1, K2) on a grid around the teacher (:class:`~gped_kit.models.presets.ArchSpec`; K1 = K2 = 1
  is the *base student*, the teacher's architecture);
* **group l1/l2 regularisation and pruning** (Section 3.3, second approach): students with the
  *largest* architecture of the grid, distilled with ``lambda R(phi)`` (Eq. 8),
  ``R = sum_k ||phi_{G_k}||_2`` (:func:`gped_kit.core.losses.group_lasso`: one group per hidden
  unit / conv channel holding its incoming weights), one per lambda of a log grid (Appendix A.2:
  1e-8 ... 1e-3, no dropout). Each is then **pruned** and **fine-tuned**.

The package, by role:

* :mod:`.settings`: :class:`Experiment3Settings`, :data:`PROFILES`, the K grids, :class:`SearchSettings`;
* :mod:`.tasks`: the students and the chain of one data setting and target (:func:`experiment3_task`);
* :mod:`.finetune`: fine-tuning a pruned student on the chain's U_o estimates (:func:`finetune`);
* :mod:`.search`: costs, pruning, fine-tuning and evaluation of one chain's students, through the
  results store (:func:`run_searches`, :func:`load_search_results`);
* :mod:`.pareto`: the search outputs, Pareto frontiers, best and base students (:func:`pareto_front`);
* :mod:`.fair`: both searches given the same fine-tuning and dropout (:func:`run_fair`, :func:`fair_comparison`);
* :mod:`.report`: our search beside the paper's figures (:func:`experiment3_comparison`,
  :func:`figure_availability`, :func:`trend_sentence`);
* :mod:`.notebook`: the notebook's summary, what a run stores, its checks and README rows (:data:`EXPERIMENT`).

Everything a notebook uses is importable from the package itself.
"""

from ...models.pruning import PRUNE_CRITERIA
from .fair import FAIR_TABLE, fair_comparison, fair_settings, fair_table, fair_text, run_fair
from .finetune import finetune
from .notebook import (
    EXPERIMENT,
    FIGURE2,
    FRONTIER_TABLE,
    STUDENTS_TABLE,
    VS_PAPER_PROFILES,
    VS_PAPER_TABLE,
    SearchRun,
    experiment3_comparisons,
    experiment3_summary,
)
from .pareto import (
    COSTS,
    METHODS,
    METRICS,
    NO_COMPARABLE,
    SEARCHED_TARGETS,
    base_student,
    best_student,
    frontier_table,
    group_beats_exhaustive,
    group_vs_exhaustive,
    metric_rows,
    metric_target,
    pareto_front,
    search_candidates,
)
from .report import (
    BELOW_FLOOR_TABLE,
    below_floor,
    below_floor_line,
    experiment3_comparison,
    figure_availability,
    result_lines,
    trend_sentence,
)
from .search import (
    SEARCH_KIND,
    SEARCH_TABLE,
    SearchResult,
    comparable_latency,
    evaluate_student,
    load_search_results,
    merged_search,
    run_experiment3,
    run_searches,
    search_table,
)
from .settings import EXPERIMENT3_DATA, PROFILES, Experiment3Settings, SearchSettings, model_grid
from .tasks import COMPANION, PAPER_ESTIMATORS, experiment3_task, experiment3_tasks, search_students, task_targets

__all__ = [
    "EXPERIMENT", "SearchRun", "experiment3_comparisons", "experiment3_summary", "VS_PAPER_TABLE",
    "VS_PAPER_PROFILES", "STUDENTS_TABLE", "FRONTIER_TABLE", "FIGURE2",
    "METRICS", "COSTS", "METHODS", "SEARCHED_TARGETS", "metric_target", "metric_rows",
    "PRUNE_CRITERIA", "EXPERIMENT3_DATA", "Experiment3Settings",
    "PROFILES", "SearchSettings", "SearchResult", "model_grid", "search_students", "experiment3_task",
    "experiment3_tasks", "task_targets", "merged_search", "result_lines",
    "finetune", "evaluate_student", "run_experiment3", "run_searches", "search_table",
    "SEARCH_KIND", "SEARCH_TABLE", "COMPANION", "PAPER_ESTIMATORS",
    "load_search_results", "comparable_latency", "search_candidates", "pareto_front", "best_student", "base_student",
    "experiment3_comparison", "group_beats_exhaustive", "group_vs_exhaustive", "NO_COMPARABLE", "frontier_table",
    "figure_availability", "trend_sentence",
    "BELOW_FLOOR_TABLE", "below_floor", "below_floor_line",
    "FAIR_TABLE", "fair_settings", "fair_comparison", "fair_table", "fair_text", "run_fair",
]
