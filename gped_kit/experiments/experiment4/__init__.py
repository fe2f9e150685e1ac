"""Experiment 4 (paper 003, Section 4; Appendices A.3, A.4, B.3): uncertainty for downstream tasks, GPED against EnD2.

One SGLD teacher chain per model, in the setting of Experiment 3 (MNIST: |D| = 60,000 at masking
rate 0.29, m = 15; CIFAR-10: |D| = 20,000, no masking), feeds eight students at once: a GPED C+1
student (the predictive and the expected entropy E[H]; the entropy column always with U_o, so its
"U_s" student runs the ``U_s+U_o`` estimator) and an EnD2 prior network (Eq. 11, training
temperature 2.5 fixed, :data:`gped_kit.baselines.endd.ENDD`), each with U_s and U_o, each with the
teacher's architecture (``base``) and the largest width multiplier (``largest_width_multiplier``).
The paper does not state its largest multipliers; ours are the largest of Experiment 3's width grid
per model in the same profile (:func:`~.settings.largest_multipliers`).

Uncertainties (:mod:`gped_kit.core.uncertainty`): total H[E pi], expected data E[H[pi]] and
knowledge (their difference). :func:`experiment4_evaluate` turns one chain's full outputs into the
downstream metrics of Tables 2-4 and 8-16 (NLL, accuracy, entropy MAE; OOD AUROC; nDCG@20 of the
uncertainty ranking against the ensemble's) and Figure 15's per-input data uncertainty;
:func:`run_experiment4` keeps them in the results store as a derived entry (kind
``"experiment4"``) of each chain, so the chain's full state is needed only when that entry is
missing.

**EnD2 at two evaluation temperatures.** The prior networks are trained on alpha = exp(raw / 2.5)
(Appendix A.4); the appendix does not say at which temperature they are evaluated. Every EnD2
student is therefore evaluated at both: method ``"EnD2"`` reads alpha = exp(raw) (temperature tau = 1, the
convention of Malinin et al., whose annealed temperature ends at 1 and who evaluate at 1) and
method ``"EnD2 (tau = 2.5)"`` reads alpha = exp(raw / 2.5), the Dirichlet the loss was fitted to
(:func:`~gped_kit.baselines.endd.endd_output_at_temperature`; the temperature is tau, printed τ, because T is
the chain length). The claims use tau = 1, with tau = 2.5
beside it (:func:`experiment4_claims`): the paper's EnD2 NLLs (0.415 and 0.321 in Table 2, against
the ensemble's 0.362 and 0.269) fit a Dirichlet mean that undoes the heating, not the heated
predictive softmax(z / 2.5), whose NLL on a confident, correct input is many times the ensemble's.

**Claims, cell by cell.** :func:`experiment4_claim_cells` sets each cell's winner (GPED, EnD2 or a
tie) beside the paper's in the same cell (:func:`~gped_kit.experiments.paper_tables.experiment4_outcomes`),
with the spread over seeds (``Experiment4Settings.seeds``, :func:`experiment4_tasks`): a cell where GPED's
margin over EnD2 is smaller than its standard deviation over the seeds is "not separable", never counted;
:func:`experiment4_claims` counts them per claim ("ours k of n; paper j of m; agree in a of c
cells"), :func:`experiment4_claim_groups` per model and uncertainty. :func:`experiment4_teacher_lines`
puts the teacher ensemble's own NLL, accuracy, AUROC and mean model uncertainty next to every
student's, with the student's distance from it.

**Thinning.** The paper uses H = 100 for predictive targets and H = 10 for entropy targets, but
the C+1 student distils both through one network and one update, so every Experiment 4 student
(GPED and EnD2 alike) is updated every ``thinning`` iterations (:class:`OneThinningSettings`;
default 2, paper profile 10, the entropy value, so the entropy column gets the paper's update rate).

The package, by role:

* :mod:`.settings`: :class:`Experiment4Settings`, :data:`PROFILES`, :data:`OOD_FOR`, the student sizes,
  the EnD2 evaluation temperatures, :data:`DOWNSTREAM_COLUMNS`;
* :mod:`.tasks`: the eight students and the chain of one model (:func:`experiment4_task`,
  :func:`experiment4_tasks`), which OOD sets are here (:func:`ood_availability`);
* :mod:`.evaluate`: the downstream metrics of one chain (:func:`experiment4_evaluate`) and their derived
  entries in the results store (:func:`run_experiment4`, keyed by the chain's and Experiment 4's numerics versions,
  :mod:`~gped_kit.experiments.numerics`);
* :mod:`.analysis`: our numbers beside the paper's tables (:func:`experiment4_comparison`), the claims
  cell by cell (:func:`experiment4_claims`), the teacher lines and Figure 15's students; no stored
  result depends on it;
* :mod:`.reading`: the notebook's reading, written from the stored table (:func:`experiment4_reading`);
* :mod:`.notebook`: the notebook's summary, what a run stores, its checks and README rows (:data:`EXPERIMENT`).

Everything a notebook uses is importable from the package itself.
"""

from .analysis import (
    CLAIM_CELL_COLUMNS,
    CLAIMS,
    ENDD_HEATED,
    ENDD_MAIN,
    NOT_OBTAINABLE,
    SET_NAMES,
    TEACHER_METRICS,
    experiment4_claim_cells,
    experiment4_claim_groups,
    experiment4_claims,
    experiment4_comparison,
    experiment4_teacher_lines,
    figure15_students,
)
from .evaluate import (
    Experiment4Run,
    experiment4_evaluate,
    experiment4_uncertainties,
    run_experiment4,
)
from .notebook import (
    CALIBRATION_TABLE,
    CLAIMS_PROFILES,
    CLAIMS_TABLE,
    EXPERIMENT,
    TEACHER_QUALITY_PROFILES,
    experiment4_summary,
    teacher_quality,
    teacher_summary,
)
from .reading import experiment4_reading
from .settings import (
    DOWNSTREAM_COLUMNS,
    ENDD_EVAL_TEMPERATURES,
    OOD_FOR,
    PROFILES,
    STUDENT_SIZES,
    Experiment4Settings,
    largest_multipliers,
)
from .tasks import experiment4_students, experiment4_task, experiment4_tasks, ood_availability

__all__ = [
    "Experiment4Settings", "largest_multipliers", "PROFILES", "OOD_FOR", "STUDENT_SIZES", "ENDD_EVAL_TEMPERATURES",
    "DOWNSTREAM_COLUMNS", "ood_availability", "experiment4_students", "experiment4_task", "experiment4_tasks",
    "experiment4_uncertainties", "experiment4_evaluate", "Experiment4Run", "run_experiment4",
    "ENDD_MAIN", "ENDD_HEATED", "CLAIMS", "NOT_OBTAINABLE", "SET_NAMES", "CLAIM_CELL_COLUMNS",
    "TEACHER_METRICS", "experiment4_comparison", "experiment4_claim_cells", "experiment4_claims",
    "experiment4_claim_groups", "experiment4_teacher_lines", "figure15_students", "EXPERIMENT", "experiment4_summary",
    "teacher_summary", "teacher_quality", "experiment4_reading", "CLAIMS_TABLE", "CLAIMS_PROFILES", "CALIBRATION_TABLE",
    "TEACHER_QUALITY_PROFILES",
]
