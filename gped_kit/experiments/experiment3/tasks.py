"""Experiment 3's chains (paper 003, Section 3.3; Appendix A.2): one teacher chain per data setting and
searched target with every search student of that target attached: the exhaustive grid of width
multipliers (K1, K2) and the group l1/l2 students at the largest architecture, one per lambda (Eq. 8),
plus a U_o companion whose running estimates (Eq. 10) the pruned students are fine-tuned on.

**One chain per target.** The teacher chain does not depend on its students, so the chains of the
predictive and the expected-entropy search of one data setting draw the same posterior samples (same
seed); each is its own store entry, keyed by its students. Adding a target to a profile therefore
computes only that target's chain and leaves every stored one as it is; the price is the teacher's
work once per target, small beside the dozens of students each chain feeds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ...core.options import Estimator, parse_option
from ...core.targets import resolve_target
from ...data.experiment import DataConfig
from ...engine import StudentConfig
from ...models.presets import ArchSpec
from ..chains import ChainTask
from ..paper import paper_model, teacher_config
from .settings import EXPERIMENT3_DATA, Experiment3Settings, check_choice, check_reg_weights, check_widths

#: The estimator of each target's search students (paper 003, Section 4.1: U_s for the predictive
#: distribution; the entropy is always distilled with U_o).
PAPER_ESTIMATORS = {"predictive": "U_s", "entropy": "U_o"}
#: Prefix of the U_o companion students, whose stores supply the fine-tuning targets.
COMPANION = "companion"


def search_students(model: str, k1_values: Sequence[float], k2_values: Sequence[float],
                    reg_weights: Sequence[float], targets: Sequence[str] = ("predictive",),
                    thinning: Mapping[str, int] | None = None, estimators: Mapping[str, str] | None = None,
                    dropout: float | None = None, lr_halving_epochs: float | None = None) -> tuple[StudentConfig, ...]:
    """The students of Experiment 3 for one teacher ``model``, all fed by one chain.

    Per target: one **exhaustive** student per (K1, K2) in ``k1_values x k2_values`` (with the
    paper's student dropout for the model: 0.5 for the FCNN, none for the CNNs), and one
    **group l1/l2** student per lambda in ``reg_weights`` with the largest grid architecture
    (max K1, max K2), no dropout (Appendix A.2). ``thinning`` maps target -> H (default: the
    paper's 100 predictive / 10 entropy); ``estimators`` maps target -> U (default
    :data:`PAPER_ESTIMATORS`: U_s for the predictive, as Section 4.1 and Figure 2's baseline, which
    is Experiment 2's student; U_o for the entropy). A target whose students use U_s gets one more
    student, a **U_o companion** with the teacher's architecture (``companion-<target>-U_o``): its
    running Monte Carlo estimates (Eq. 10) are what pruned students are fine-tuned on; it is not a
    search candidate. Group l1/l2 students are named
    ``group_lasso-<target>-<estimator>-K<k1>x<k2>-lambda<value>``.

    Raises ValueError for an unknown model, an empty or non-positive K grid, an empty lambda grid
    or a lambda <= 0, no targets, or an unknown estimator.
    """
    paper = paper_model(model)
    k1_values = check_widths("k1_values", k1_values)
    k2_values = check_widths("k2_values", k2_values)
    reg_weights = check_reg_weights(reg_weights)
    if not targets:
        raise ValueError("targets=[]: name at least one target, e.g. 'predictive' or 'entropy'")
    thinning = {"predictive": 100, "entropy": 10, **(thinning or {})}
    estimators = {**PAPER_ESTIMATORS, **(estimators or {})}
    dropout = paper.student_dropout if dropout is None else dropout
    halving = paper.lr_halving_epochs if lr_halving_epochs is None else lr_halving_epochs
    largest = ArchSpec(model, max(k1_values), max(k2_values), dropout=0.0)
    students = []
    for target in targets:
        name = resolve_target(target).name
        h = thinning.get(name, thinning["predictive"])
        estimator = parse_option(Estimator, estimators.get(name, "U_o"), f"estimators[{name!r}]")
        for k1 in k1_values:
            for k2 in k2_values:
                students.append(StudentConfig(target=target, estimator=estimator, thinning=h,
                                              arch=ArchSpec(model, k1, k2, dropout=dropout),
                                              lr_halving_epochs=halving))
        for lam in reg_weights:
            students.append(StudentConfig(
                target=target, estimator=estimator, thinning=h, arch=largest, lr_halving_epochs=halving,
                regularizer="group_lasso", reg_weight=float(lam),
                name=f"group_lasso-{name}-{estimator.value}-K{largest.k1:g}x{largest.k2:g}-lambda{lam:g}"))
        if not estimator.uses_store:
            students.append(StudentConfig(target=target, estimator=Estimator.U_O, thinning=h,
                                          arch=ArchSpec(model, dropout=dropout), lr_halving_epochs=halving,
                                          name=f"{COMPANION}-{name}-U_o"))
    return tuple(students)


def experiment3_task(model: str, settings: Experiment3Settings, seed: int = 0, device: str = "auto",
                     data_root: str | None = None, labelled_size: int | None = None, mask_size: int | None = None,
                     verify_checksums: bool = True, target: str | None = None) -> ChainTask:
    """One Experiment 3 data setting and target as a chain task: the paper's teacher chain for
    ``model`` (:func:`~gped_kit.experiments.paper.teacher_config`; chain length and thinning from
    ``settings``) with the students of :func:`search_students` for ``target`` (one of
    ``settings.targets``; None when the profile has only one; the K grids may be per model,
    :func:`model_grid`). ``labelled_size`` and ``mask_size`` default to the paper's Experiment 3
    setting (:data:`EXPERIMENT3_DATA`: MNIST N = 60,000, m = 15; CIFAR-10 N = 20,000, m = 0).
    ValueError when ``target`` is None and the profile has several targets, or is not among them."""
    if not isinstance(settings, Experiment3Settings):
        raise TypeError(f"settings must be an Experiment3Settings, got {type(settings).__name__}")
    check_choice("model", model, EXPERIMENT3_DATA)
    if target is None:
        if len(settings.targets) != 1:
            raise ValueError(f"target=None: the profile searches the targets {list(settings.targets)}, one chain "
                             "each; name one of them (experiment3_tasks gives every chain)")
        target = settings.targets[0]
    check_choice("target", target, settings.targets)
    n_default, m_default = EXPERIMENT3_DATA[model]
    labelled_size = n_default if labelled_size is None else labelled_size
    mask_size = m_default if mask_size is None else mask_size
    data = DataConfig(paper_model(model).dataset, labelled_size=labelled_size, mask_size=mask_size, seed=seed,
                      root=data_root, verify_checksums=verify_checksums, test_size=settings.test_size)
    k1_values, k2_values = settings.grid(model)
    students = search_students(model, k1_values, k2_values, settings.reg_weights, targets=(target,),
                               thinning={"predictive": settings.predictive_thinning,
                                         "entropy": settings.entropy_thinning},
                               estimators={"predictive": settings.predictive_estimator},
                               dropout=settings.student_dropout)
    return ChainTask(data, teacher_config(model, labelled_size, settings, seed, device), students)


def experiment3_tasks(settings: Experiment3Settings, seed: int = 0, device: str = "auto",
                      data_root: str | None = None) -> list[ChainTask]:
    """:func:`experiment3_task` for every model and target of ``settings``, models in order and each
    model's targets in order (one chain each)."""
    return [experiment3_task(model, settings, seed, device, data_root, target=target)
            for model in settings.models for target in settings.targets]


def task_targets(task: ChainTask) -> tuple[str, ...]:
    """The targets an Experiment 3 chain searches: its students' targets in order of first appearance
    (one for the chains of :func:`experiment3_tasks`; several when :func:`search_students` was given them)."""
    return tuple(dict.fromkeys(s.resolved_target.name for s in task.students))
