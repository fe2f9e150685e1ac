"""Experiment 1 (paper 003, Section 4.2; Table 1): one chain per model on its full, unmasked training set,
distilling the predictive distribution (U_s, as the paper's Table 1) and the expected entropy (U_o); notebook
``01_experiment1``.

* :mod:`.settings`: :class:`Experiment1Settings` and :data:`PROFILES` (``default``: a CPU in minutes, three
  seeds; ``cpu30``: a pooled BAOA teacher, Table 1 on a CPU in 30 minutes; ``paper``: Appendix A.2);
* :mod:`.tasks`: the chains (:func:`experiment1_tasks`; the chain of a cell is the paper's
  :func:`~gped_kit.experiments.paper.distillation_task`, shared with Experiment 2);
* :mod:`.analysis`: Table 1 beside the paper's (:func:`experiment1_table`), per profile
  (:func:`table1_by_profile`), and the names of the tables the notebook writes;
* :mod:`.ablation`: the U_s - U_o gap against H and the students' learning-rate schedule
  (:func:`estimator_ablation`);
* :mod:`.notebook`: the notebook's summary, checks and README rows (:data:`EXPERIMENT`).
"""

from .ablation import (
    ESTIMATOR_ABLATION,
    ESTIMATOR_ABLATION_TABLE,
    EstimatorAblation,
    ablation_for,
    ablation_gaps,
    ablation_summary,
    ablation_text,
    estimator_ablation,
    paper_gap,
)
from .analysis import (
    CALIBRATION_TABLE,
    ESTIMATOR_GAP_TABLE,
    GPU_TABLE1,
    PAPER_TABLE1,
    TABLE1,
    TABLE1_METRICS,
    TABLE1_PROFILES,
    entropy_skill_finding,
    estimator_gap,
    estimator_gap_text,
    experiment1_table,
    run_time_line,
    table1_by_profile,
    versus_paper,
)
from .notebook import EXPERIMENT, experiment1_summary, gpu_student_nll, gpu_table1
from .settings import PROFILES, Experiment1Settings
from .tasks import experiment1_tasks

__all__ = ["EXPERIMENT", "PROFILES", "Experiment1Settings", "experiment1_tasks", "experiment1_table",
           "experiment1_summary", "table1_by_profile", "run_time_line", "TABLE1_METRICS", "TABLE1",
           "TABLE1_PROFILES", "PAPER_TABLE1", "CALIBRATION_TABLE", "ESTIMATOR_GAP_TABLE", "estimator_gap",
           "estimator_gap_text", "gpu_student_nll", "gpu_table1", "GPU_TABLE1", "ESTIMATOR_ABLATION", "ablation_for",
           "ESTIMATOR_ABLATION_TABLE", "EstimatorAblation", "ablation_gaps", "ablation_summary",
           "ablation_text", "estimator_ablation", "paper_gap", "entropy_skill_finding", "versus_paper"]
