"""The paper's settings (paper 003, Appendix A) and the teacher chain every experiment builds on.

:data:`PAPER_MODELS` holds, per teacher family, what Appendix A.2 fixes: the data set, the SGLD
step size eta, the burn-in B, the student dropout and the student learning-rate halving period
(in teacher epochs); :data:`PRIOR_PRECISION` is tau = 10. :class:`ChainSettings` is the part of
every experiment's profile that shapes the chain (T, B, thinning, logging), and
:func:`teacher_config` turns it into a :class:`~gped_kit.engine.GPEDConfig` with the paper's
values for the model; :func:`distillation_task` is the chain of Section 4 (Experiments 1 and 2) for one
(model, |D|, m) cell, with its U_s and U_o students of the predictive distribution and the expected
entropy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..core.baoa import BAOAConfig
from ..core.options import RandomNumbers, check_int, parse_option
from ..core.sampler import SamplerConfig, StepSchedule
from ..core.samplers import sampler_config
from ..core.sgld import SGLDConfig
from ..data.experiment import DataConfig
from ..engine import GPEDConfig, StudentConfig
from ..engine.precision import check_matmul_precision
from ..models.presets import ArchSpec
from .chains import ChainTask


@dataclass(frozen=True)
class PaperModel:
    """Appendix A.2's settings for one teacher family."""

    dataset: str
    step_size: float
    burn_in: int
    student_dropout: float
    lr_halving_epochs: float
    endd_dropout: float  # Appendix A.4: the EnD2 prior network's dropout
    finetune_lr: float  # Appendix A.2: the learning rate fine-tuning restarts at after pruning


PAPER_MODELS: dict[str, PaperModel] = {
    "fcnn": PaperModel("mnist", 4e-6, 1_000, 0.5, 200.0, 0.5, 1e-4),
    "cnn_mnist": PaperModel("mnist", 4e-6, 1_000, 0.0, 200.0, 0.3, 1e-3),
    "cnn_cifar10": PaperModel("cifar10", 2e-6, 10_000, 0.0, 400.0, 0.3, 1e-3),
}
PRIOR_PRECISION = 10.0  # tau, Appendix A.2
SGLD_BATCH_SIZE = 100  # M = M' = 100 (the authors' code)
FULL_TRAINING_SIZE = {"mnist": 60_000, "cifar10": 50_000}
#: T of the paper's chains (Appendix A.2).
PAPER_NUM_ITERATIONS = 1_000_000
#: Fine-tuning length after pruning, in teacher epochs (Appendix A.2).
FINETUNE_EPOCHS = {"mnist": 600.0, "cifar10": 800.0}


#: BAOA with a constant step (epsilon = 0.2, alpha = 0.5, tau = 10, M = 100): the best of notebook 10's
#: default study at equal work, and, as one or two chains, of its ``pooling`` study for Table 1's entropy MAE.
BAOA_SAMPLER = BAOAConfig(step_size=0.2, alpha=0.5, prior_precision=PRIOR_PRECISION, batch_size=SGLD_BATCH_SIZE)


#: The students' learning-rate warm-up (in updates) of the short CPU profiles (notebooks 01 and 02: T = 5,000,
#: B = 3,000, students every 2 steps): a stated deviation from the paper's recipe. With the recipe as written
#: (Adam at alpha_0 = 1e-3 from the first update) the FCNN expected-entropy students of the 6 unmasked default
#: chains (N = 10,000 and 60,000, 3 seeds) collapsed to predicting 0 (U_s and U_o within 2e-4 of each other):
#: the teacher is sharp when they start after the long burn-in (median test entropy about 0.01), the exp
#: head's first updates overshoot to outputs near 0 and its gradients vanish. Measured on Table 1's FCNN chain
#: (seed 0, N = 60,000, U_o): entropy MAE 0.0838 (skill -0.03, the error of predicting 0: 0.0838) as written,
#: 0.0750 (skill +0.08) with a warm-up of 100 updates, 0.0756 with 300 (tests/test_entropy_collapse.py shows
#: the mechanism in seconds). The paper's own profile, cpu30 and long keep the recipe as written.
SHORT_PROFILE_WARMUP = 100


#: The ``long`` profiles' teacher (notebooks 05, 06, 07): K = 4 BAOA chains pooled into one teacher
#: (``GPEDConfig.num_chains``), each with a cyclical step size (cycles of 4,000 steps, epsilon_0 = 0.6,
#: alpha = 0.5; the first 70% of each cycle explores, the rest is kept). Chosen from teacher-only runs
#: on MNIST (N = 60,000, m = 0), equal work of 96,000 chain steps: one constant-step chain 0.0642
#: test NLL at 48,000 steps; four constant-step chains of 24,000 pooled 0.0628; four cyclical chains
#: pooled 0.0587 (exploration runs, not stored; notebook 10's ``pooling`` profile compares them).
LONG_NUM_CHAINS = 4
LONG_CYCLE_LENGTH = 4_000


def long_sampler(num_iterations: int, cycle_length: int = LONG_CYCLE_LENGTH) -> BAOAConfig:
    """The ``long`` profiles' sampler for chains of ``num_iterations`` steps (a multiple of
    ``cycle_length``): BAOA (tau = 10, M = 100) with the cyclical schedule above."""
    check_int("num_iterations", num_iterations, cycle_length)
    if num_iterations % cycle_length:
        raise ValueError(f"num_iterations={num_iterations} must be a multiple of the cycle length {cycle_length}")
    return BAOAConfig(step_size=0.6, alpha=0.5, prior_precision=PRIOR_PRECISION, batch_size=SGLD_BATCH_SIZE,
                      schedule="cyclical", cycles=num_iterations // cycle_length, explore_fraction=0.7,
                      cycle_floor=1e-3)


def paper_model(model: str) -> PaperModel:
    """Appendix A.2's settings for ``model``; ``ValueError`` names the known families."""
    if model not in PAPER_MODELS:
        raise ValueError(f"model={model!r} is not known; allowed: {sorted(PAPER_MODELS)}")
    return PAPER_MODELS[model]


@dataclass(frozen=True)
class ChainSettings:
    """How long a profile's chains run and how they are thinned, evaluated and logged.

    ``burn_in`` None takes the paper's B for the model; ``scale_step_size`` keeps eta * N (the
    SGD-like part of Eq. 7) at the full-data value, so short chains on small D converge (the
    posterior does not depend on eta; only mixing and discretisation bias do). ``sampler`` None is
    the paper's SGLD (Appendix A.2's eta, tau = 10, M = 100); a sampler configuration (or name, for
    its defaults) replaces it as given (:mod:`gped_kit.core.sampler`; e.g. a cyclical schedule:
    ``BAOAConfig(..., schedule="cyclical", cycles=8, explore_fraction=0.5)``). ``num_chains`` K > 1
    pools K chains into one teacher (``GPEDConfig.num_chains``). ``test_size`` evaluates on a seeded random
    subset of the test set (``DataConfig.test_size``; None: all of it, as the paper). ``student_lr_warmup``
    W > 0 raises every student's learning rate over its first W updates (``StudentConfig.lr_warmup``; 0: the
    paper's recipe): a stated deviation of the short CPU profiles, whose expected-entropy students collapse
    to predicting 0 without it (see :data:`SHORT_PROFILE_WARMUP`). ``matmul_precision`` and ``random_numbers``
    are the chains' :class:`~gped_kit.engine.GPEDConfig` options of those names (defaults: float32 matrix
    products, a ``torch.Generator`` per stream): faster options on a GPU, which a profile takes only where
    :mod:`~gped_kit.experiments.speedups` found that its chains distil what the default's do. Each is part of a
    chain's key only when it is not the default, so the defaults leave every stored chain's key as it was."""

    num_iterations: int
    burn_in: int | None
    predictive_thinning: int
    entropy_thinning: int
    eval_thinning: int
    log_every: int
    checkpoint_every: int
    scale_step_size: bool = False
    sampler: SamplerConfig | str | None = None
    num_chains: int = 1
    test_size: int | None = None
    student_lr_warmup: int = 0
    matmul_precision: str = "highest"
    random_numbers: str | RandomNumbers = RandomNumbers.GENERATORS

    def __post_init__(self) -> None:
        check_matmul_precision(self.matmul_precision, "matmul_precision")
        object.__setattr__(self, "random_numbers", parse_option(RandomNumbers, self.random_numbers, "random_numbers"))
        if isinstance(self.sampler, str):
            object.__setattr__(self, "sampler", sampler_config(self.sampler))
        for name in ("num_iterations", "predictive_thinning", "entropy_thinning", "eval_thinning", "log_every",
                     "checkpoint_every", "num_chains"):
            check_int(name, getattr(self, name), 1)
        if self.burn_in is not None:
            check_int("burn_in", self.burn_in, 0)
        if self.test_size is not None:
            check_int("test_size", self.test_size, 1)
        check_int("student_lr_warmup", self.student_lr_warmup, 0)


def teacher_caption(settings: ChainSettings) -> str:
    """The profile's teacher in words, for tables and the README (read from the settings, so it cannot
    go stale): e.g. ``one SGLD chain, T = 5,000`` or ``2 pooled BAOA chains, T = 24,000 each``."""
    sampler = settings.sampler
    name = "SGLD" if sampler is None else sampler.name.value.upper()
    if sampler is not None and sampler.schedule is not StepSchedule.CONSTANT:
        name = f"{sampler.schedule.value} {name}"
    if settings.num_chains == 1:
        return f"one {name} chain, T = {settings.num_iterations:,}"
    return f"{settings.num_chains} pooled {name} chains, T = {settings.num_iterations:,} each"


@dataclass(frozen=True)
class OneThinningSettings(ChainSettings):
    """Chain settings whose students all share one thinning H (``thinning``).

    Experiment 4's C+1 student distils the predictive and the entropy through one network and one
    update, so it has a single H; the chain settings' ``predictive_thinning`` and
    ``entropy_thinning`` are both set to ``thinning`` (they cannot be given separately)."""

    predictive_thinning: int = field(init=False, default=0)
    entropy_thinning: int = field(init=False, default=0)
    thinning: int = 2

    def __post_init__(self) -> None:
        check_int("thinning", self.thinning, 1)
        object.__setattr__(self, "predictive_thinning", self.thinning)
        object.__setattr__(self, "entropy_thinning", self.thinning)
        super().__post_init__()


def teacher_config(model: str, labelled_size: int, chain: ChainSettings, seed: int = 0, device: str = "auto",
                   num_snapshots: int = 0) -> GPEDConfig:
    """The teacher chain of ``model`` with Appendix A.2's settings (eta, tau = 10, M = 100, B), or
    the profile's own sampler, and the profile's chain length, evaluation and logging."""
    paper = paper_model(model)
    step_size = paper.step_size
    if chain.scale_step_size:
        step_size *= FULL_TRAINING_SIZE[paper.dataset] / labelled_size
    sampler = chain.sampler if chain.sampler is not None else SGLDConfig(
        step_size=step_size, prior_precision=PRIOR_PRECISION, batch_size=SGLD_BATCH_SIZE)
    return GPEDConfig(model=model, sampler=sampler,
                      num_iterations=chain.num_iterations,
                      burn_in=paper.burn_in if chain.burn_in is None else chain.burn_in,
                      eval_thinning=chain.eval_thinning, log_every=chain.log_every,
                      checkpoint_every=chain.checkpoint_every, seed=seed, device=device, num_snapshots=num_snapshots,
                      num_chains=chain.num_chains, matmul_precision=chain.matmul_precision,
                      random_numbers=chain.random_numbers)


def paper_shaped_lr_scale(model: str, chain: ChainSettings) -> float:
    """The factor that gives a shortened chain the paper's student learning-rate schedule *shape*:
    as many halvings over its T - B distillation steps as the paper's schedule makes over its
    T - B = 10^6 - B (8.3 at N = 60k, 50 at N = 10k for MNIST), i.e.
    ``(T - B) / (T_paper - B_paper)``.

    Why it matters: the paper halves the student's rate every 200 teacher epochs of the
    *labelled* set, so a student distilled from a chain on N = 10k decays six times faster
    (in teacher steps) than one on N = 60k and stops learning after a fraction of the chain.
    """
    paper = paper_model(model)
    burn_in = paper.burn_in if chain.burn_in is None else chain.burn_in
    scale = (chain.num_iterations - burn_in) / (PAPER_NUM_ITERATIONS - paper.burn_in)
    if not (scale > 0 and math.isfinite(scale)):
        raise ValueError(f"the profile's chain (T = {chain.num_iterations}, B = {burn_in}) has no distillation steps")
    return scale


def distillation_task(model: str, labelled_size: int, mask_size: int, settings: ChainSettings, seed: int = 0,
                      device: str = "auto", data_root: str | None = None,
                      targets: Sequence[str] = ("predictive", "entropy"), estimators: Sequence[str] = ("U_s", "U_o"),
                      lr_halving_scale: float = 1.0, keep_outputs: tuple[str, ...] = (),
                      verify_checksums: bool = True) -> ChainTask:
    """The chain of Section 4 for ``model`` on (|D|, m): one SGLD chain with the paper's settings for that
    model, feeding one student per (target, estimator), all with the teacher's architecture (and the paper's
    student dropout). Experiment 1 (Table 1) runs it on the full, unmasked training set; Experiment 2 over a
    grid of |D| and m, so a cell computed once serves both (the results store keys it by its configuration).
    ``lr_halving_scale`` multiplies the paper's student lr-halving period (200 or 400 teacher epochs; see
    :func:`paper_shaped_lr_scale`). ``verify_checksums=False`` reads data files without torchvision's md5
    check (test fixtures only)."""
    if not (lr_halving_scale > 0 and math.isfinite(lr_halving_scale)):
        raise ValueError(f"lr_halving_scale={lr_halving_scale!r}: must be finite and > 0")
    paper = paper_model(model)
    data = DataConfig(paper.dataset, labelled_size=labelled_size, mask_size=mask_size, seed=seed, root=data_root,
                      verify_checksums=verify_checksums, test_size=settings.test_size)
    thinning = {"predictive": settings.predictive_thinning, "entropy": settings.entropy_thinning}
    students = tuple(
        StudentConfig(target=target, estimator=estimator, thinning=thinning.get(target, settings.predictive_thinning),
                      arch=ArchSpec(model, dropout=paper.student_dropout),
                      lr_halving_epochs=paper.lr_halving_epochs * lr_halving_scale,
                      lr_warmup=settings.student_lr_warmup)
        for target in targets for estimator in estimators)
    return ChainTask(data, teacher_config(model, labelled_size, settings, seed, device), students, keep_outputs)
