"""Beyond GPED (notebook 07): KD, GPED, EnD2 and Hydra distilled from one SGLD chain, and the 2-D spiral.

One teacher chain (FCNN on MNIST by default) is distilled, online and at once, by plain knowledge
distillation of the predictive (Bayesian Dark Knowledge, ``KD``), GPED's C+1 student (the
predictive and the expected entropy; paper 003, Experiment 4), EnD2 (a prior network trained with
Eq. 11 of paper 003, :data:`~gped_kit.baselines.endd.ENDD`) and, after the chain, Hydra (paper 002:
one head per kept posterior snapshot, trained on the snapshots' cached outputs on D',
:mod:`gped_kit.baselines.hydra`). Three more KD students show the input generators and the
derivative matching of Papamakarios' thesis (paper 001). Two references for the uncertainties:
the *snapshot ensemble* (the S kept samples, exactly what Hydra copies) and the *long-chain
teacher* (the online Monte Carlo means over the whole chain, what GPED and EnD2 distil).

Everything the notebook shows is a derived entry of the results store (kind ``"comparison"``
for MNIST, ``"spiral"`` for the toy), keyed by the chain's record and Hydra's configuration
(:func:`~gped_kit.experiments.derived.derive`): the comparison table, the memory
table, the KD-variant rows, Hydra's loss history, the spiral's uncertainty maps (float16 arrays)
and the trained Hydra (``hydra.pt``, not committed). Only a missing entry runs (or reloads) its chain.

Beside the methods the table carries (issue 27): a **zero-MU baseline** (model uncertainty 0 for
every input: its mean |Delta MU| is the references' own mean MU, the bar any method must pass), each
method's MU error **split into its two heads** (the predictive's total entropy H[E p] and the
expected entropy E[H], each against the long-chain teacher's, with signed biases:
MU error = total bias - E[H] bias, :func:`mu_error_split`), the **training budgets** (student
updates, minibatch, inputs seen, what the targets are; :func:`comparison_budgets`: GPED's students
take one step every H chain steps after burn-in, Hydra its phase-1 + phase-2 steps on the cached
snapshot logits), the teacher's own quality next to every method's (:func:`comparison_teacher_lines`)
and the references named by their size (:func:`reference_names`: "teacher, T = 4,000").

Profiles (:data:`PROFILES`): ``default`` runs on a CPU in minutes (S = 20 snapshots);
``paper`` is Hydra's MNIST setting as far as it maps onto an SGLD teacher (S = 50, T = 10^6).

The package, by role:

* :mod:`.settings`: :class:`ComparisonSettings`, :class:`SpiralSettings`, :data:`PROFILES`, the evaluation
  sets, the names of the references and of the zero-MU baseline;
* :mod:`.tasks`: the students and the chains (:func:`comparison_students`, :func:`comparison_task`,
  :func:`spiral_task`);
* :mod:`.compute`: Hydra on the chain's snapshots, every method's uncertainties, the comparison table
  (head errors, zero-MU rows), memory, costs, budgets and the KD-variant rows, from a chain's result;
* :mod:`.run`: the derived entries (:func:`run_comparison`, :func:`spiral_run`; keyed by the chain's and
  the comparison's numerics versions, :mod:`~gped_kit.experiments.numerics`);
* :mod:`.analysis`: the stored table read for the notebook (MU error split, teacher lines, reference
  names, Hydra at another budget); no stored result depends on it;
* :mod:`.reading`: the notebook's reading, written from the stored table (:func:`comparison_reading`);
* :mod:`.notebook`: the notebook's summary and claims, what a run stores, the README's row (:data:`EXPERIMENT`).

Everything a notebook uses is importable from the package itself.
"""

from .analysis import (
    MU_METHODS,
    MU_SPLIT_COLUMNS,
    TEACHER_QUANTITIES,
    comparison_teacher_lines,
    hydra_config_for_steps,
    mu_error_split,
    named_references,
    reference_names,
)
from .compute import (
    BUDGET_COLUMNS,
    KD_COLUMNS,
    SKILL_COLUMNS,
    comparison_budgets,
    comparison_costs,
    comparison_marginal_variance,
    comparison_memory,
    comparison_methods,
    comparison_table,
    head_errors,
    kd_variants,
    method_skill,
    train_hydra_on_chain,
    zero_mu_row,
)
from .notebook import (
    COMPARISON_CLAIMS,
    COMPARISON_TEST_COLUMNS,
    EXPERIMENT,
    HYDRA_TABLE2_MNIST_NLL,
    MNIST_TABLE,
    NLL_ORDER,
    ComparisonRuns,
    comparison_claims,
    comparison_summary,
    method_skills,
    mu_mae,
    not_known_skilled,
    order_outcome,
)
from .reading import comparison_reading
from .run import ComparisonRun, SpiralRun, run_comparison, spiral_run
from .settings import (
    COMPARISON_OOD_SETS,
    COMPARISON_SHIFT_SETS,
    PROFILES,
    SNAPSHOTS,
    TEACHER,
    ZERO_MU,
    ComparisonSettings,
    SpiralSettings,
)
from .tasks import comparison_students, comparison_task, spiral_task

__all__ = [
    "SpiralSettings", "ComparisonSettings", "PROFILES", "COMPARISON_SHIFT_SETS", "COMPARISON_OOD_SETS", "ZERO_MU",
    "TEACHER", "SNAPSHOTS", "comparison_students", "comparison_task", "spiral_task", "train_hydra_on_chain",
    "comparison_methods", "comparison_marginal_variance", "comparison_memory", "comparison_costs",
    "comparison_table", "head_errors", "method_skill", "SKILL_COLUMNS", "zero_mu_row", "comparison_budgets",
    "BUDGET_COLUMNS",
    "kd_variants", "KD_COLUMNS", "ComparisonRun", "run_comparison", "SpiralRun", "spiral_run",
    "MU_METHODS", "MU_SPLIT_COLUMNS", "mu_error_split", "TEACHER_QUANTITIES",
    "comparison_teacher_lines", "hydra_config_for_steps", "reference_names", "named_references",
    "EXPERIMENT", "ComparisonRuns", "COMPARISON_CLAIMS", "COMPARISON_TEST_COLUMNS", "HYDRA_TABLE2_MNIST_NLL",
    "MNIST_TABLE", "NLL_ORDER", "order_outcome", "comparison_claims", "comparison_summary", "mu_mae",
    "method_skills", "not_known_skilled",
    "comparison_reading",
]
