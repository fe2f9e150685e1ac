"""Experiment 3: student architecture search on the speed-storage-accuracy trade-off (paper 003,
Section 3.3; Section 4, Experiment 3; Appendix A.2; Figures 2 and 6-13).

Two ways of choosing a student architecture, both distilled from ONE teacher chain per data
setting (Algorithm 1 with many students attached; the chain does not depend on them):

* **exhaustive search** (Section 3.3, first approach): one student per pair of width multipliers
  (K1, K2) on a grid around the teacher (:class:`~gped_kit.models.presets.ArchSpec`; K1 = K2 = 1
  is the *base student*, the teacher's architecture);
* **group l1/l2 regularisation and pruning** (Section 3.3, second approach): students with the
  *largest* architecture of the grid, distilled with ``lambda R(phi)`` (Eq. 8),
  ``R = sum_k ||phi_{G_k}||_2`` (:func:`gped_kit.core.losses.group_lasso`: one group per hidden
  unit / conv channel holding its incoming weights), one per lambda of a log grid (Appendix A.2:
  1e-8 ... 1e-3, no dropout). Each is then **pruned** (:func:`gped_kit.models.pruning.prune`:
  units whose incoming weights all lie below epsilon = 1e-3 are removed physically, and the
  pruned network equals the masked one) and **fine-tuned** (:func:`finetune`).

**Fine-tuning design.** A pruned student needs the teacher to be fine-tuned. Rather than run
the chain again, it is fine-tuned on the chain's stored U_o Monte Carlo estimates (Eq. 10):
the running means ``g_hat_i`` over D' that Algorithm 1 kept for a U_o student of the same
target (every Experiment 3 student uses U_o, so the store exists; students sharing (H, M')
hold identical stores; :meth:`gped_kit.engine.GPEDResult.store`). It takes Adam steps on
minibatches of M' visited D' examples (drawn with replacement, seeded, on the device, no host
synchronisation), with the target's loss, i.e. distillation continued with the estimates
frozen at the end of the chain. The schedule follows A.2: the learning rate restarts at 1e-4
(FCNN) / 1e-3 (CNN) (:attr:`~gped_kit.experiments.paper.PaperModel.finetune_lr`); the length is
given in teacher epochs (600 MNIST, 800 CIFAR-10; :data:`~gped_kit.experiments.paper.FINETUNE_EPOCHS`)
as for the student's halving schedule, one epoch being N/M SGLD steps with one student step
every H of them, i.e. ``epochs * (N / M) / H`` student steps (3,600 for MNIST at N = 60,000,
M = 100, H = 100).

**Costs** (:mod:`gped_kit.models.cost`): parameters, FLOPs per input (PyTorch's counter:
FLOPs = 2 x multiply-accumulates of matmuls and convolutions) and measured latency per batch.
**Pareto frontier** (:func:`pareto_front`): the non-dominated students for one metric (lower
NLL / MAE, higher accuracy is better) against one cost.

**Through the results store.** :func:`experiment3_task` builds one data setting's chain
(:class:`~gped_kit.experiments.chains.ChainTask`: the paper's teacher for the model, MNIST at
N = 60,000 with m = 15, CIFAR-10 at N = 20,000 without masking, every search student attached).
:func:`run_experiment3` keeps the search table of that chain as a derived entry of kind
``"search"`` (record: the chain's entry key and :class:`SearchSettings`; code: the numerics
packages and this module). Only when that entry is missing is the chain's full state asked for
(:func:`~gped_kit.experiments.chains.run_chains` with ``requires_state=True``: reused from the
chain entry's checkpoint, or computed), and the costs, pruning and fine-tuning run.
:func:`load_search_results` reads every stored search table.

Profiles (:data:`PROFILES`, :class:`Experiment3Settings`): ``default`` runs on a 2-core CPU in
minutes, ``paper`` is Appendix A.2 for a GPU.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import nn

from ..core.options import Estimator, check_int, check_positive, parse_option
from ..core.schema import record
from ..core.targets import Target, resolve_target
from ..data.container import GPEDData
from ..data.experiment import DataConfig
from ..engine import GPEDResult, StudentConfig
from ..engine.engine import prediction_metrics
from ..engine.spec import ChainSpec
from ..models.build import instantiate
from ..models.cost import network_cost
from ..models.presets import EVAL_CHUNK_SIZE, ArchSpec, cpu_training_layout, inference_network
from ..models.pruning import PRUNE_CRITERIA, check_criterion, check_eps, mask_network, prune, unit_keep_masks
from . import paper_tables
from .chains import ChainTask, DerivedTask, chain_code, run_derived
from .paper import FINETUNE_EPOCHS, ChainSettings, paper_model, teacher_config
from .store import NUMERICS, Entry, ResultsStore, code_fingerprint

# ----------------------------------------------------------------------------- constants
#: Metric columns of the search table: (label, lower is better).
METRICS: dict[str, tuple[str, bool]] = {
    "student_nll": ("test NLL", True),
    "student_accuracy": ("test accuracy", False),
    "entropy_mae": ("expected-entropy MAE", True),
}
#: Cost columns of the search table and their axis labels.
COSTS: dict[str, str] = {
    "flops": "FLOPs per input (2 x MACs)",
    "params": "parameters",
    "latency_ms": "latency per batch (ms)",
}
#: Search methods: the width-multiplier grid and group l1/l2 + pruning.
METHODS: dict[str, str] = {"exhaustive": "exhaustive search", "group_lasso": "group l1/l2 + pruning"}
#: Which target each metric belongs to.
METRIC_TARGET = {"student_nll": "predictive", "student_accuracy": "predictive", "entropy_mae": "entropy"}
#: Experiment 3's data settings (Section 4, Figures 2 and 6-13): MNIST at N = 60,000 with
#: masking rate 0.29 (m = 15), CIFAR-10 at N = 20,000 without masking.
EXPERIMENT3_DATA = {"fcnn": (60_000, 15), "cnn_mnist": (60_000, 15), "cnn_cifar10": (20_000, 0)}
#: The store's entry kind and table name of a search.
SEARCH_KIND = "search"
SEARCH_TABLE = "search"
#: Summary columns not copied into the search table (they describe the chain's run, not a network).
_RUN_COLUMNS = ("store_status", "iterations_per_s", "elapsed_s", "student_train_loss")


def _allowed(name: str, value: Any, allowed: Sequence[str] | Mapping[str, Any]) -> None:
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not known; allowed: {sorted(allowed)}")


def _positive_values(name: str, values: Any, empty: str) -> tuple:
    """``values`` as a tuple, each a finite number > 0 (:func:`~gped_kit.core.options.check_positive`,
    kept as given: 1 and 1.0 record differently); ``ValueError`` saying ``empty`` when there are none."""
    values = tuple(values)
    if not values:
        raise ValueError(f"{name}=[]: {empty}")
    for i, value in enumerate(values):
        check_positive(f"{name}[{i}]", value)
    return values


def _check_widths(name: str, values: Any) -> tuple[float, ...]:
    return _positive_values(name, values, "give at least one width multiplier > 0")


def _check_reg_weights(reg_weights: Any) -> tuple[float, ...]:
    return _positive_values("reg_weights", reg_weights, "the lambda grid must hold at least one value > 0 "
                            "(the paper: a log grid from 1e-8 to 1e-3)")


# ----------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class SearchSettings:
    """What happens after the chain (Appendix A.2): pruning threshold ``prune_eps`` (epsilon) and
    ``prune_criterion`` (:data:`~gped_kit.models.pruning.PRUNE_CRITERIA`), bias folding,
    fine-tuning length ``finetune_epochs`` (teacher epochs; None = the paper's 600 MNIST / 800
    CIFAR-10), learning rate ``finetune_lr`` (None = 1e-4 FCNN / 1e-3 CNN) halved every
    ``finetune_lr_halving_epochs`` (None = the paper's student schedule, 200 / 400 epochs), the
    latency measurement (batch size, repeats) and the fine-tuning seed. Its record keys a
    stored search (with the chain's key)."""

    prune_eps: float = 1e-3
    prune_criterion: str = "max_abs"
    fold_bias: bool = True
    finetune_epochs: float | None = None
    finetune_lr: float | None = None
    finetune_lr_halving_epochs: float | None = None
    latency_batch_size: int = 100
    latency_repeats: int = 20
    seed: int = 0

    def __post_init__(self) -> None:
        check_eps(self.prune_eps, "SearchSettings.prune_eps")
        check_criterion(self.prune_criterion, "SearchSettings.prune_criterion")
        if not isinstance(self.fold_bias, bool):
            raise ValueError(f"SearchSettings.fold_bias={self.fold_bias!r}: must be True or False")
        if self.finetune_epochs is not None:
            check_positive("SearchSettings.finetune_epochs", self.finetune_epochs, allow_zero=True)
        for name in ("finetune_lr", "finetune_lr_halving_epochs"):
            if getattr(self, name) is not None:
                check_positive(f"SearchSettings.{name}", getattr(self, name))
        for name in ("latency_batch_size", "latency_repeats"):
            check_int(f"SearchSettings.{name}", getattr(self, name), 1)
        check_int("SearchSettings.seed", self.seed, 0)


#: A K grid: width multipliers for every model, or per model as ``((model, values), ...)``.
KGrid = tuple[float, ...] | tuple[tuple[str, tuple[float, ...]], ...]


def _is_per_model(value: Any) -> bool:
    return isinstance(value, Mapping) or (
        isinstance(value, (tuple, list)) and len(value) > 0
        and all(isinstance(v, (tuple, list)) and len(v) == 2 and isinstance(v[0], str) for v in value))


def _normalise_grid(name: str, value: Any) -> KGrid:
    """A K grid as a tuple of floats, or (a mapping or pairs ``model -> values``) as a tuple of
    ``(model, tuple of floats)`` pairs; ValueError for empty or non-positive values."""
    if _is_per_model(value):
        pairs = value.items() if isinstance(value, Mapping) else value
        return tuple((str(model), _check_widths(f"{name}[{model!r}]", values)) for model, values in pairs)
    return _check_widths(name, value)


def model_grid(settings: Experiment3Settings | Mapping[str, Any], name: str, model: str) -> list[float]:
    """A K grid of ``settings`` (``"k1_values"`` or ``"k2_values"``) for ``model``: the values for
    every model, or ``model``'s entry of a per-model grid (the paper profile's). ``settings`` is an
    :class:`Experiment3Settings` or a mapping holding ``name``. ValueError names the models a
    per-model grid covers when ``model`` is not among them."""
    value = settings[name] if isinstance(settings, Mapping) else getattr(settings, name)
    if _is_per_model(value):
        grid = dict(value.items() if isinstance(value, Mapping) else value)
        if model not in grid:
            raise ValueError(f"{name} gives values for the models {sorted(grid)} only, not for {model!r}; "
                             "add an entry for it or pass one list for every model")
        return list(grid[model])
    return list(value)


@dataclass(frozen=True)
class Experiment3Settings(ChainSettings):
    """A profile of Experiment 3: the chains (:class:`~gped_kit.experiments.paper.ChainSettings`),
    the ``models`` searched and the ``targets`` distilled, the exhaustive grid (``k1_values`` x
    ``k2_values``; each a tuple for every model or ``((model, values), ...)`` per model; a mapping
    model -> values is accepted too), the group l1/l2 lambda grid ``reg_weights``, the predictive
    students' estimator (``U_s`` as in the paper; a U_o companion then supplies the fine-tuning
    targets, see :func:`search_students`), and ``search``, what happens after the chain
    (:class:`SearchSettings`; :meth:`search_settings` seeds it). Lists are stored as tuples."""

    models: tuple[str, ...] = ("cnn_mnist", "fcnn", "cnn_cifar10")
    targets: tuple[str, ...] = ("predictive",)
    predictive_estimator: str = "U_s"
    k1_values: KGrid = (0.5, 1.0, 2.0)
    k2_values: KGrid = (0.5, 1.0, 2.0)
    reg_weights: tuple[float, ...] = (1e-4, 1e-3, 1e-2)
    search: SearchSettings = SearchSettings(finetune_epochs=1.0)

    def __post_init__(self) -> None:
        super().__post_init__()
        models = (self.models,) if isinstance(self.models, str) else tuple(self.models)
        targets = (self.targets,) if isinstance(self.targets, str) else tuple(self.targets)
        object.__setattr__(self, "models", models)
        object.__setattr__(self, "targets", targets)
        if not models:
            raise ValueError("models=[]: name at least one teacher model, e.g. 'cnn_mnist'")
        for model in models:
            _allowed("models", model, EXPERIMENT3_DATA)
        if not targets:
            raise ValueError("targets=[]: name at least one target, e.g. 'predictive' or 'entropy'")
        for target in targets:
            resolve_target(target)
        for name in ("k1_values", "k2_values"):
            object.__setattr__(self, name, _normalise_grid(name, getattr(self, name)))
            for model in models:
                model_grid(self, name, model)
        object.__setattr__(self, "reg_weights", _check_reg_weights(self.reg_weights))
        parse_option(Estimator, self.predictive_estimator, "predictive_estimator")
        if not isinstance(self.search, SearchSettings):
            raise TypeError(f"search must be a SearchSettings, got {type(self.search).__name__}")

    def search_settings(self, seed: int = 0) -> SearchSettings:
        """``search`` with the fine-tuning seeded by ``seed`` (the notebook's seed)."""
        return dataclasses.replace(self.search, seed=seed)

    def grid(self, model: str) -> tuple[list[float], list[float]]:
        """(K1 values, K2 values) of the exhaustive grid for ``model``."""
        return model_grid(self, "k1_values", model), model_grid(self, "k2_values", model)


_PAPER_K = {"cnn_mnist": (0.5, 1.0, 2.0, 3.0, 4.0), "fcnn": (0.5, 1.0, 2.0, 3.0, 4.0, 5.0),
            "cnn_cifar10": (0.5, 1.0, 2.0, 3.0, 4.0)}

PROFILES: dict[str, Experiment3Settings] = {
    # CPU, minutes: CNN-MNIST and FCNN (CIFAR-10 reports missing data here), a short chain
    # (T = 2,200 with the paper's B = 1,000 and students every H = 2 steps: 600 student
    # steps), a 3 x 3 grid, three lambdas. The lambda grid is shifted up one decade from the
    # paper's (1e-4 ... 1e-2 instead of ... 1e-3) because 600 steps give the penalty little
    # time to drive groups to zero. Fine-tuning: one teacher epoch (300 student steps).
    # Figures: predictive students give Figures 2, 6 (CNN-MNIST) and 8, 9 (FCNN); the
    # expected-entropy Figures 7 and 10 need targets=("predictive", "entropy") (about +5.5
    # minutes on the 2-core CPU, which the main job's 45-minute budget does not leave; the
    # notebook says why each missing figure is missing).
    "default": Experiment3Settings(
        models=("cnn_mnist", "fcnn", "cnn_cifar10"), targets=("predictive",),
        num_iterations=2_200, burn_in=1_000, predictive_thinning=2, entropy_thinning=2, eval_thinning=50,
        log_every=400, checkpoint_every=1_100, scale_step_size=False,
        k1_values=(0.5, 1.0, 2.0), k2_values=(0.5, 1.0, 2.0), reg_weights=(1e-4, 1e-3, 1e-2),
        search=SearchSettings(prune_eps=1e-3, prune_criterion="max_abs", finetune_epochs=1.0, finetune_lr=None,
                              finetune_lr_halving_epochs=None, latency_batch_size=100, latency_repeats=20)),
    # Appendix A.2 on a GPU: T = 10^6, the paper's B per model, H = 100 (predictive) / 10
    # (entropy), lambda on the paper's log grid 1e-8 ... 1e-3, epsilon = 1e-3, fine-tuning
    # 600 (MNIST) / 800 (CIFAR-10) epochs (None = the paper's value per model). The paper does
    # not list its K values. Per model: CNNs 0.5 ... 4 (K = 4 x 4 is 15.6x (CNN-MNIST) / 15.9x
    # (CIFAR-10) the base student's parameters, beyond the paper's best CNN students at 6.6x and
    # 4.7-5.4x); FCNN 0.5 ... 5, because the paper's best FCNN student has about 9.9x the base's
    # parameters and 10x its FLOPs (Figures 8 and 9), beyond K = 4 x 4 (8.0x): K1 x K2 = 5 x 4
    # is 10.0x / 10.0x, and the group l1/l2 students start from 5 x 5 (11.7x) and prune back.
    "paper": Experiment3Settings(
        models=("cnn_mnist", "fcnn", "cnn_cifar10"), targets=("predictive", "entropy"),
        num_iterations=1_000_000, burn_in=None, predictive_thinning=100, entropy_thinning=10, eval_thinning=100,
        log_every=10_000, checkpoint_every=50_000, scale_step_size=False,
        k1_values=tuple(_PAPER_K.items()), k2_values=tuple(_PAPER_K.items()),
        reg_weights=(1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3),
        search=SearchSettings(prune_eps=1e-3, prune_criterion="max_abs", finetune_epochs=None, finetune_lr=None,
                              finetune_lr_halving_epochs=None, latency_batch_size=100, latency_repeats=50)),
}


# ----------------------------------------------------------------------------- students and chains
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
    k1_values = _check_widths("k1_values", k1_values)
    k2_values = _check_widths("k2_values", k2_values)
    reg_weights = _check_reg_weights(reg_weights)
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
                     verify_checksums: bool = True) -> ChainTask:
    """One Experiment 3 data setting as a chain task: the paper's teacher chain for ``model``
    (:func:`~gped_kit.experiments.paper.teacher_config`; chain length and thinning from
    ``settings``) with the students of :func:`search_students` (the K grids may be per model,
    :func:`model_grid`). ``labelled_size`` and ``mask_size`` default to the paper's Experiment 3
    setting (:data:`EXPERIMENT3_DATA`: MNIST N = 60,000, m = 15; CIFAR-10 N = 20,000, m = 0)."""
    if not isinstance(settings, Experiment3Settings):
        raise TypeError(f"settings must be an Experiment3Settings, got {type(settings).__name__}")
    _allowed("model", model, EXPERIMENT3_DATA)
    n_default, m_default = EXPERIMENT3_DATA[model]
    labelled_size = n_default if labelled_size is None else labelled_size
    mask_size = m_default if mask_size is None else mask_size
    data = DataConfig(paper_model(model).dataset, labelled_size=labelled_size, mask_size=mask_size, seed=seed,
                      root=data_root, verify_checksums=verify_checksums)
    k1_values, k2_values = settings.grid(model)
    students = search_students(model, k1_values, k2_values, settings.reg_weights, targets=settings.targets,
                               thinning={"predictive": settings.predictive_thinning,
                                         "entropy": settings.entropy_thinning},
                               estimators={"predictive": settings.predictive_estimator})
    return ChainTask(data, teacher_config(model, labelled_size, settings, seed, device), students)


def experiment3_tasks(settings: Experiment3Settings, seed: int = 0, device: str = "auto",
                      data_root: str | None = None) -> list[ChainTask]:
    """:func:`experiment3_task` for every model of ``settings``, in order."""
    return [experiment3_task(model, settings, seed, device, data_root) for model in settings.models]


# ----------------------------------------------------------------------------- fine-tuning
def finetune(net: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, target: str | Target, steps: int,
             lr: float, batch_size: int = 100, lr_halving_steps: int | None = None, seed: int = 0,
             noise_std: float = 0.0) -> nn.Module:
    """Fine-tune ``net`` in place on fixed targets (Appendix A.2's fine-tuning after pruning).

    ``inputs`` (n, C, H, W) and ``targets`` (n, D) are D' examples and their U_o estimates
    ``g_hat_i`` (:meth:`gped_kit.engine.GPEDResult.store`); every step draws ``batch_size`` of them with replacement
    (a seeded generator on the device; nothing is read back to the host), optionally adds the
    BDK input noise, and takes one Adam step on the mean of ``target``'s loss (cross-entropy
    for the predictive distribution, absolute error for the entropy). The learning rate starts
    at ``lr`` and is halved every ``lr_halving_steps`` steps (None: constant)."""
    target = resolve_target(target)
    check_int("finetune steps", steps, 0)
    check_positive("finetune lr", lr)
    check_int("finetune batch_size", batch_size, 1)
    if lr_halving_steps is not None:
        check_int("finetune lr_halving_steps", lr_halving_steps, 1)
    if inputs.shape[0] != targets.shape[0] or inputs.shape[0] < 1:
        raise ValueError(f"finetune: inputs ({inputs.shape[0]}) and targets ({targets.shape[0]}) must be "
                         "non-empty and of equal length")
    device = inputs.device
    gen = torch.Generator(device).manual_seed(int(seed))
    optimizer = torch.optim.Adam(net.parameters(), lr=lr)
    net.train()
    for step in range(steps):
        if lr_halving_steps is not None and step % lr_halving_steps == 0:
            for group in optimizer.param_groups:
                group["lr"] = lr * 0.5 ** (step // lr_halving_steps)
        idx = torch.randint(inputs.shape[0], (batch_size,), device=device, generator=gen)
        x = inputs[idx]
        if noise_std > 0:
            x = x + noise_std * torch.randn(x.shape, device=device, generator=gen)
        loss = target.loss(targets[idx], net(x)).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    net.eval()
    return net


# ----------------------------------------------------------------------------- evaluation
@torch.no_grad()
def evaluate_student(net: nn.Module, spec: ChainSpec, target: str | Target, ensemble: Mapping[str, torch.Tensor],
                     batch_size: int = EVAL_CHUNK_SIZE) -> dict[str, float]:
    """Test metrics of a student network as Algorithm 1 reports them: its linked outputs on the
    chain's test set (``spec.data.test_x``, in chunks of ``batch_size``), scored by the engine's
    :func:`~gped_kit.engine.engine.prediction_metrics` against the teacher ensemble's estimates
    ``ensemble`` (:attr:`GPEDResult.teacher_outputs` ``["test"]``): ``student_nll`` and
    ``student_accuracy`` (predictive targets), ``target_mae``, ``entropy_mae`` (entropy targets)
    and ``nll_gap`` (student - teacher NLL)."""
    target = resolve_target(target)
    net = inference_network(net)
    x = spec.data.test_x
    output = torch.cat([target.link(net(x[i:i + batch_size])) for i in range(0, x.shape[0], batch_size)])
    return prediction_metrics(spec, target, output, dict(ensemble))


# ----------------------------------------------------------------------------- the search
@dataclass
class SearchResult:
    """One data setting's search: ``table`` (one row per network, see :func:`run_experiment3`),
    ``status`` (``ran``: the search was computed now, ``reused``: read from the store, ``missing
    data``, ``failed``), ``error`` (the message, e.g. the loader's), ``chain_status`` (what
    :func:`~gped_kit.experiments.chains.run_chains` did with the chain when the search was
    computed: ``ran``/``resumed``/``reused``; empty when it was not needed), the search's store
    entry and the time."""

    model: str
    table: pd.DataFrame
    status: str
    error: str = ""
    entry: Entry | None = None
    seconds: float = 0.0
    chain_status: str = ""

    @property
    def run_dir(self) -> Path | None:
        """The search entry's directory (None without an entry)."""
        return self.entry.path if self.entry is not None else None

    @property
    def candidates(self) -> pd.DataFrame:
        """The search's outputs: exhaustive students and fine-tuned pruned students."""
        return search_candidates(self.table)


def search_candidates(table: pd.DataFrame, method: str | None = None) -> pd.DataFrame:
    """Rows that are outputs of a search: exhaustive students (stage ``distilled``) and group
    l1/l2 students after pruning and fine-tuning (stage ``fine-tuned``); ``method`` keeps one."""
    if table.empty:
        return table
    if method is not None:
        _allowed("method", method, METHODS)
    keep = (((table["method"] == "exhaustive") & (table["stage"] == "distilled"))
            | ((table["method"] == "group_lasso") & (table["stage"] == "fine-tuned")))
    if method is not None:
        keep &= table["method"] == method
    return table[keep]


def search_code() -> str:
    """The code fingerprint of search entries: the numerics packages, the models and this module."""
    return code_fingerprint(*NUMERICS, "gped_kit.experiments.experiment3", "gped_kit.models")


def run_experiment3(task: ChainTask, settings: SearchSettings, store: ResultsStore, recompute: bool = False,
                    progress: bool = True, executor: str = "local", address: str | None = None) -> SearchResult:
    """One Experiment 3 data setting through the results store: the search table of ``task``'s
    chain (:func:`experiment3_task`) under ``settings``.

    The table is the ``"search"`` entry derived from the chain
    (:func:`~gped_kit.experiments.chains.derived_from_chain`: keyed by the chain's record,
    ``record(settings)`` and :func:`search_code`). When it is stored it is read back (status
    ``reused``) and the chain is not touched. Otherwise the chain's full state is asked for
    (reused from the chain entry's checkpoint, resumed, or run), then the costs, pruning and
    fine-tuning are computed and the table stored (status ``ran``). ``recompute`` sets the stored
    search and chain aside and computes both again. An absent data set gives status ``missing
    data`` with the loader's message, a failed chain status ``failed`` with its error (nothing is
    stored for either). :func:`run_searches` does this for several data settings, locally or as
    Ray tasks.

    The table has one row per network with the chain's configuration columns and
    ``method`` (``teacher``/``exhaustive``/``group_lasso``), ``stage`` (``teacher``,
    ``distilled``, ``pruned``, ``fine-tuned``), ``is_base`` (the exhaustive student with the
    teacher's architecture), the costs of :func:`gped_kit.models.cost.network_cost` (``params``,
    ``flops``, ``macs``, ``latency_ms``, ``architecture``, ``widths``), the metrics
    (``student_nll``, ``student_accuracy``, ``entropy_mae``, ``target_mae``, ``nll_gap``),
    the teacher's (``teacher_nll``, ``teacher_accuracy``, ``teacher_samples``), ``run_key`` (the
    chain's entry key), and for pruned students ``units_removed``, ``prune_check_max_abs_diff``
    (the largest |pruned - masked| output difference on 1,000 test inputs) and
    ``finetune_steps``; ``chain_seconds`` (the chain with all students attached) and
    ``search_seconds`` (costs, pruning, fine-tuning) time the two stages. The teacher row
    carries one teacher network's costs; the ensemble costs ``teacher_samples`` times as much.
    """
    return run_searches([task], settings, store, recompute, progress, executor, address)[0]


def _search_compute(settings: SearchSettings) -> Callable[[Entry, GPEDResult, GPEDData], None]:
    """The computation of a search entry from its chain's full result (runs where the chain is)."""

    def compute(entry: Entry, result: GPEDResult, data: GPEDData) -> None:
        stage_started = time.perf_counter()
        table = search_table(result, settings, entry.store.entry("chain", result.spec.record(), chain_code()).key)
        summary = result.summary
        table["chain_seconds"] = float(summary["elapsed_s"].iloc[0]) if "elapsed_s" in summary else math.nan
        table["search_seconds"] = time.perf_counter() - stage_started
        entry.write_table(SEARCH_TABLE, table)

    return compute


def run_searches(tasks: Sequence[ChainTask], settings: SearchSettings, store: ResultsStore, recompute: bool = False,
                 progress: bool = True, executor: str = "local", address: str | None = None) -> list[SearchResult]:
    """:func:`run_experiment3` for several data settings (e.g. one per model), in task order.
    ``executor="ray"`` computes each missing search -- its chain and the search together, since
    the search needs the chain's networks and U_o stores -- as a Ray task (one GPU when the
    chain's device is CUDA) at ``address`` (:func:`~gped_kit.experiments.chains.run_derived`);
    stored searches are read back on the driver without starting anything."""
    for task in tasks:
        if not isinstance(task, ChainTask):
            raise TypeError(f"task must be a ChainTask (see experiment3_task), got {type(task).__name__}")
    if not isinstance(settings, SearchSettings):
        raise TypeError(f"settings must be a SearchSettings, got {type(settings).__name__}")
    items = [DerivedTask(task, SEARCH_KIND, {"settings": record(settings)}, search_code(), _search_compute(settings))
             for task in tasks]
    results = []
    for task, outcome in zip(tasks, run_derived(items, store, recompute, progress, executor, address)):
        table = outcome.entry.table(SEARCH_TABLE) if outcome.entry is not None else pd.DataFrame()
        results.append(SearchResult(task.config.model_name, table, outcome.status, outcome.error, outcome.entry,
                                    outcome.seconds, outcome.chain.status))
    return results


def _finetune_steps(epochs: float, spec: ChainSpec, thinning: int) -> int:
    """Student steps in ``epochs`` teacher epochs: epochs * (N / M) SGLD steps, one student step per H."""
    return int(round(epochs * spec.num_train / spec.config.sampler.batch_size / thinning))


def _teacher_network(spec: ChainSpec) -> nn.Module:
    """A network of the teacher's architecture on the chain's device (for its costs; the values
    are a fresh draw, which the costs do not depend on), without touching the global random stream."""
    cuda = [spec.device.index or 0] if spec.device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):
        net = instantiate(spec.config.model, spec.data.input_shape, spec.likelihood.raw_outputs(spec.data.num_outputs),
                          "GPEDConfig.model")
    net = net.to(spec.device)
    return cpu_training_layout(net) if spec.device.type == "cpu" else net


def search_table(result: GPEDResult, settings: SearchSettings, chain_key: str = "") -> pd.DataFrame:
    """The search table (see :func:`run_experiment3`) of a chain's full results (``result.spec``
    and the students' networks and U_o stores: :func:`~gped_kit.experiments.chains.run_chains`
    with ``requires_state=True``), without the timing columns."""
    spec = result.spec
    if spec is None:
        raise ValueError("result holds tables only (reloaded without its checkpoint); the search needs the "
                         "chain's networks and U_o stores: run_chains(..., requires_state=True)")
    data, config = spec.data, spec.config
    model = config.model_name
    shape = tuple(data.input_shape)
    ensemble = result.teacher_outputs.get("test", {})
    summary = result.summary.set_index("student")
    dataset = str(data.info.get("dataset", ""))
    epochs = (settings.finetune_epochs if settings.finetune_epochs is not None
              else FINETUNE_EPOCHS.get(dataset, FINETUNE_EPOCHS["mnist"]))
    lr = settings.finetune_lr if settings.finetune_lr is not None else paper_model(model).finetune_lr
    halving_epochs = (settings.finetune_lr_halving_epochs if settings.finetune_lr_halving_epochs is not None
                      else paper_model(model).lr_halving_epochs)

    def costs(net: nn.Module) -> dict:
        return network_cost(net, shape, settings.latency_batch_size, settings.latency_repeats)

    rows = []
    first = summary.reset_index().iloc[0].to_dict() if len(summary) else {}
    common = {k: first.get(k) for k in ("dataset", "labelled_size", "mask_size", "masking_rate", "model",
                                        "step_size", "num_iterations", "burn_in", "seed", "device")
              if k in first}
    common["run_key"] = chain_key
    teacher_cols = {"teacher_nll": first.get("teacher_nll", math.nan),
                    "teacher_accuracy": first.get("teacher_accuracy", math.nan),
                    "teacher_samples": first.get("teacher_samples", math.nan)}
    rows.append({**common, **teacher_cols, "method": "teacher", "stage": "teacher", "student": "teacher",
                 "target": spec.likelihood.ensemble_target, "is_base": False,
                 "student_nll": teacher_cols["teacher_nll"], "student_accuracy": teacher_cols["teacher_accuracy"],
                 **costs(_teacher_network(spec))})
    for i, s in enumerate(spec.students):
        cfg, label = s.config, s.label
        net = result.student_network(label).to(spec.device)
        base_row = {k: v for k, v in summary.loc[label].to_dict().items() if k not in _RUN_COLUMNS}
        if label.startswith(f"{COMPANION}-"):
            continue  # supplies the fine-tuning targets; not a search candidate
        method = "group_lasso" if cfg.regularizer == "group_lasso" and cfg.reg_weight > 0 else "exhaustive"
        arch = cfg.arch if cfg.arch is not None else config.model
        is_base = method == "exhaustive" and isinstance(arch, ArchSpec) and arch.k1 == 1 and arch.k2 == 1
        base_row.update(common, **teacher_cols, method=method, stage="distilled", student=label, is_base=bool(is_base))
        rows.append({**base_row, **costs(net)})
        if method != "group_lasso":
            continue
        masks = unit_keep_masks(net, settings.prune_eps, settings.prune_criterion)
        pruned = prune(net, masks=masks, fold_bias=settings.fold_bias)
        masked = mask_network(net, masks, zero_bias=not settings.fold_bias).eval()
        with torch.no_grad():
            x = data.test_x[:1000]
            check = float((pruned.eval()(x) - masked(x)).abs().max())
        removed = sum(int((~m).sum()) for m in masks)
        prune_cols = {"units_removed": removed, "prune_check_max_abs_diff": check, "prune_eps": settings.prune_eps,
                      "prune_criterion": settings.prune_criterion}
        metric_cols = [c for c in ("student_nll", "student_accuracy", "target_mae", "entropy_mae", "nll_gap")
                       if c in base_row]
        clean = {k: v for k, v in base_row.items() if k not in metric_cols and k != "student_params"}
        rows.append({**clean, **prune_cols, "stage": "pruned",
                     **evaluate_student(pruned, spec, s.target, ensemble), **costs(pruned)})
        steps = _finetune_steps(epochs, spec, cfg.thinning)
        halving = _finetune_steps(halving_epochs, spec, cfg.thinning) if halving_epochs else None
        idx, estimates = result.store(label)
        idx = idx.to(data.distill_x.device)
        tuned = finetune(copy.deepcopy(pruned), data.distill_x[idx], estimates.to(data.distill_x.device), s.target,
                         steps, lr, batch_size=cfg.batch_size, lr_halving_steps=max(halving, 1) if halving else None,
                         seed=settings.seed * 1000 + i, noise_std=data.distill_noise_std)
        rows.append({**clean, **prune_cols, "stage": "fine-tuned", "finetune_steps": steps, "finetune_lr": lr,
                     **evaluate_student(tuned, spec, s.target, ensemble), **costs(tuned)})
    return pd.DataFrame(rows)


def load_search_results(store: ResultsStore) -> pd.DataFrame:
    """Every stored search table of ``store`` (complete ``"search"`` entries), concatenated, with the
    search entry's key in column ``entry``; an empty frame when there is none."""
    if not isinstance(store, ResultsStore):
        raise TypeError(f"store must be a ResultsStore (gped_kit.experiments.store), got {type(store).__name__}")
    return store.load(SEARCH_TABLE, SEARCH_KIND)


# ----------------------------------------------------------------------------- Pareto frontier
def _check_metric_cost(table: pd.DataFrame, metric: str, cost: str) -> None:
    _allowed("metric", metric, METRICS)
    _allowed("cost", cost, COSTS)
    missing = [c for c in (metric, cost) if c not in table.columns]
    if missing:
        raise ValueError(f"table lacks the column(s) {missing}; it has {sorted(table.columns)}")


def pareto_front(table: pd.DataFrame, metric: str, cost: str) -> pd.DataFrame:
    """The non-dominated rows of ``table`` for ``metric`` against ``cost``, sorted by cost.

    A row is dominated when another has cost <= and a metric at least as good (lower NLL /
    MAE, higher accuracy; :data:`METRICS`), one of the two strictly. Rows with a missing metric
    or cost are ignored; exact duplicates are both kept. ``metric`` is one of :data:`METRICS`,
    ``cost`` one of :data:`COSTS` (ValueError otherwise)."""
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"table must be a pandas DataFrame, got {type(table).__name__}")
    _check_metric_cost(table, metric, cost)
    rows = table.dropna(subset=[metric, cost])
    if rows.empty:
        return rows
    c = rows[cost].to_numpy(dtype=float)
    v = rows[metric].to_numpy(dtype=float) * (1.0 if METRICS[metric][1] else -1.0)  # lower is better
    no_worse = (c[None, :] <= c[:, None]) & (v[None, :] <= v[:, None])  # [i, j]: j is no worse than i
    strictly = (c[None, :] < c[:, None]) | (v[None, :] < v[:, None])
    dominated = (no_worse & strictly).any(axis=1)
    front = rows[~dominated]
    return front.sort_values([cost, metric], ascending=[True, METRICS[metric][1]])


def best_student(table: pd.DataFrame, metric: str) -> pd.Series | None:
    """The search candidate (:func:`search_candidates`) with the best ``metric``, or None."""
    _allowed("metric", metric, METRICS)
    rows = search_candidates(table)
    if rows.empty or metric not in rows:
        return None
    rows = rows.dropna(subset=[metric])
    if rows.empty:
        return None
    return rows.loc[rows[metric].idxmin() if METRICS[metric][1] else rows[metric].idxmax()]


def base_student(table: pd.DataFrame, target: str) -> pd.Series | None:
    """The exhaustive student with the teacher's architecture (K1 = K2 = 1) for ``target``, or None."""
    if table.empty:
        return None
    rows = table[(table["method"] == "exhaustive") & (table["is_base"].astype(bool)) & (table["target"] == target)]
    return rows.iloc[0] if len(rows) else None


def experiment3_comparison(table: pd.DataFrame, model: str, metric: str = "student_nll") -> pd.DataFrame:
    """Our search beside the paper's statements for ``model`` and ``metric`` (Figures 2, 6-13):
    the base student's metric, FLOPs and parameters, the best searched student's metric and its
    parameter / FLOP ratios to the base student, which method found it, whether the group
    l1/l2 students beat the exhaustive frontier at their cost, and (NLL) the best group l1/l2
    student at <= 50% of the base FLOPs. ``paper`` holds the paper's value where it states one."""
    _allowed("metric", metric, METRICS)
    rows_model = table[table["model"] == model] if not table.empty else table
    figures = paper_tables.experiment3_figures()
    fig = figures[(figures["model"] == model) & (figures["metric"] == metric)]
    paper_fig = fig.iloc[0] if len(fig) else None
    stated = paper_tables.experiment3_figure2() if (model, metric) == ("cnn_mnist", "student_nll") else {}
    out: list[dict] = []

    def add(quantity: str, ours: Any, paper: Any = math.nan, note: str = "") -> None:
        out.append({"figure": paper_fig["figure"] if paper_fig is not None else "", "model": model, "metric": metric,
                    "quantity": quantity, "ours": ours, "paper": paper, "note": note})

    base = base_student(rows_model, METRIC_TARGET[metric]) if len(rows_model) else None
    best = best_student(rows_model[rows_model["target"] == METRIC_TARGET[metric]], metric) if len(rows_model) else None
    if len(rows_model):
        teacher = rows_model[rows_model["method"] == "teacher"]
        if metric != "entropy_mae" and len(teacher):
            add("teacher ensemble " + METRICS[metric][0], float(teacher[metric].iloc[0]),
                stated.get("teacher_nll", math.nan), "paper: Table 5 at N = 60,000, r = 0.29" if stated else "")
    add("base student " + METRICS[metric][0], float(base[metric]) if base is not None else math.nan,
        stated.get("base_student_nll", math.nan))
    add("base student FLOPs per input", float(base["flops"]) if base is not None else math.nan,
        stated.get("base_student_flops", math.nan), "ours: FLOPs = 2 x MACs; the paper does not state its convention")
    add("base student MACs per input", float(base["macs"]) if base is not None else math.nan)
    add("base student parameters", float(base["params"]) if base is not None else math.nan,
        stated.get("base_student_params", math.nan))
    add("best searched student " + METRICS[metric][0], float(best[metric]) if best is not None else math.nan,
        stated.get("searched_nll", math.nan))
    add("best student found by", METHODS[best["method"]] if best is not None else "",
        METHODS[paper_fig["best_method"]] if paper_fig is not None else "")
    add("best student architecture", best["architecture"] if best is not None else "")
    ratio_ok = best is not None and base is not None
    add("best / base parameters", float(best["params"] / base["params"]) if ratio_ok else math.nan,
        float(paper_fig["params_ratio"]) if paper_fig is not None else math.nan)
    add("best / base FLOPs", float(best["flops"] / base["flops"]) if ratio_ok else math.nan,
        float(paper_fig["flops_ratio"]) if paper_fig is not None else math.nan)
    if ratio_ok:
        lower = METRICS[metric][1]
        better = best[metric] < base[metric] if lower else best[metric] > base[metric]
        add("a searched student beats the base student", bool(better), True)
    cands = (search_candidates(rows_model[rows_model["target"] == METRIC_TARGET[metric]]) if len(rows_model)
             else rows_model)
    if len(cands):
        add("group l1/l2 students better than the exhaustive frontier at their FLOPs",
            group_beats_exhaustive(cands, metric, "flops"), "yes (much better NLL at the same cost)"
            if metric == "student_nll" else "")
    if metric == "student_nll" and base is not None and len(cands):
        cheap = cands[(cands["method"] == "group_lasso") & (cands["flops"] <= 0.5 * base["flops"])]
        add("best group l1/l2 NLL at <= 50% of the base FLOPs",
            float(cheap[metric].min()) if len(cheap) else math.nan, "a small loss vs the base student",
            "none of our pruned students is that small" if cheap.empty else "")
    return pd.DataFrame(out)


NO_COMPARABLE = "no comparable exhaustive student"


def group_vs_exhaustive(candidates: pd.DataFrame, metric: str, cost: str) -> pd.DataFrame:
    """Each group l1/l2 student of ``candidates`` against the exhaustive students, one row each:
    ``student``, ``cost``, ``metric``, ``compared_with`` (``"equal or lower cost"`` /
    ``"higher cost only"`` / ``"none"``), ``reference`` (the best exhaustive metric it is
    compared with) and ``verdict``:

    * with exhaustive students of equal or lower ``cost``: ``"better"`` if its ``metric`` is
      strictly better than the best of them, else ``"not better"``;
    * cheaper than every exhaustive student: ``"better"`` only if its metric is strictly better
      than that of *every* exhaustive student (all of which cost more: it dominates the grid);
      otherwise it is a different trade-off, not a loss, and its verdict is
      :data:`NO_COMPARABLE` (``"no comparable exhaustive student"``); likewise when there are no
      exhaustive students at all.

    Students lacking the metric or the cost are left out."""
    _check_metric_cost(candidates, metric, cost)
    lower = METRICS[metric][1]
    ex = candidates[candidates["method"] == "exhaustive"].dropna(subset=[metric, cost])
    group = candidates[candidates["method"] == "group_lasso"].dropna(subset=[metric, cost])

    def best(values: pd.Series) -> float:
        return float(values.min() if lower else values.max())

    def beats(value: float, reference: float) -> bool:
        return bool(value < reference if lower else value > reference)

    out = []
    for _, row in group.iterrows():
        value = float(row[metric])
        cheaper = ex[ex[cost] <= row[cost]][metric]
        if len(cheaper):
            reference = best(cheaper)
            compared, verdict = "equal or lower cost", "better" if beats(value, reference) else "not better"
        elif len(ex):
            reference = best(ex[metric])
            compared, verdict = "higher cost only", "better" if beats(value, reference) else NO_COMPARABLE
        else:
            reference, compared, verdict = math.nan, "none", NO_COMPARABLE
        out.append({"student": row.get("student", ""), "cost": float(row[cost]), "metric": value,
                    "compared_with": compared, "reference": reference, "verdict": verdict})
    return pd.DataFrame(out, columns=["student", "cost", "metric", "compared_with", "reference", "verdict"])


def group_beats_exhaustive(candidates: pd.DataFrame, metric: str, cost: str) -> str:
    """"k of n": how many of the n comparable group l1/l2 students beat the exhaustive search at
    their ``cost`` (:func:`group_vs_exhaustive`: strictly better ``metric`` than every exhaustive
    student of equal or lower cost, or, for a student cheaper than all of them, than every
    exhaustive student). Students with no comparable exhaustive student (cheaper than all of
    them and not better) are not counted in n but named after it, e.g.
    ``"2 of 3 (1 more: no comparable exhaustive student)"``."""
    verdicts = group_vs_exhaustive(candidates, metric, cost)["verdict"]
    wins = int((verdicts == "better").sum())
    odd = int((verdicts == NO_COMPARABLE).sum())
    text = f"{wins} of {len(verdicts) - odd}"
    return text + (f" ({odd} more: {NO_COMPARABLE})" if odd else "")


def frontier_table(table: pd.DataFrame, metric: str, cost: str) -> pd.DataFrame:
    """The Pareto frontier of each search method (and of both together) for ``metric`` vs
    ``cost``: columns ``front`` (``exhaustive``/``group_lasso``/``both``), the student, its
    architecture, cost and metric."""
    _allowed("metric", metric, METRICS)
    _allowed("cost", cost, COSTS)
    cands = search_candidates(table)
    if cands.empty:
        return pd.DataFrame(columns=["model", "front", "student", "architecture", cost, metric])
    cands = cands[cands["target"] == METRIC_TARGET[metric]]
    parts = []
    for model, rows in cands.groupby("model"):
        for front, sub in (("exhaustive", rows[rows["method"] == "exhaustive"]),
                           ("group_lasso", rows[rows["method"] == "group_lasso"]), ("both", rows)):
            f = pareto_front(sub, metric, cost)
            parts.append(f.assign(front=front)[["model", "front", "student", "architecture", cost, metric]])
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def figure_availability(results: Mapping[str, SearchResult], targets: Sequence[str],
                        profile: str = "") -> pd.DataFrame:
    """Which of the paper's Experiment 3 figures (2 and 6-13,
    :func:`gped_kit.experiments.paper_tables.experiment3_figures`) this run can draw, one row per
    figure in the paper's order: ``figure``, ``model``, ``metric``, ``produced`` (bool) and
    ``reason`` (empty when produced). ``results`` maps each model of the run to its
    :class:`SearchResult`; ``targets`` are the distilled targets (the profile's).

    A figure is produced when its model was searched, its search has results, its metric's
    target (:data:`METRIC_TARGET`: predictive for NLL and accuracy, entropy for the
    entropy MAE) was distilled, and the table holds that metric for some searched student.
    Otherwise ``reason`` says which of these fails: the model is not in the run, its data set
    is absent (status ``missing data``), the search has no results, or the target was not
    distilled in this profile."""
    distilled = [resolve_target(t).name for t in targets]
    where = f"the {profile!r} profile" if profile else "this run"
    models = list(results)
    out = []
    for fig in paper_tables.experiment3_figures().itertuples():
        target, label = METRIC_TARGET[fig.metric], METRICS[fig.metric][0]
        res = results.get(fig.model)
        reason = ""
        if res is None:
            reason = (f"not produced: {fig.model} is not among the models of {where} ({', '.join(models) or 'none'}); "
                      "add it to `models`")
        elif res.status == "missing data":
            reason = (f"not produced: the {fig.dataset} data set is absent here (search status 'missing data'; "
                      "the loader's message says where to put it)")
        elif res.table is None or res.table.empty:
            first = (res.error or "").strip().splitlines()[:1]
            reason = f"not produced: the {fig.model} search has no results (status {res.status!r}" + (
                f": {first[0]})" if first else ")")
        elif target not in distilled:
            reason = (f"not produced: the {target} target is not distilled in {where} (targets {distilled}); "
                      f"add {target!r} to `targets`")
        else:
            cands = search_candidates(res.table)
            has = (fig.metric in cands.columns and "target" in cands.columns
                   and cands.loc[cands["target"] == target, fig.metric].notna().any())
            if not has:
                reason = f"not produced: the table has no {label} for any searched {target} student of {fig.model}"
        out.append({"figure": fig.figure, "model": fig.model, "metric": fig.metric, "produced": not reason,
                    "reason": reason})
    return pd.DataFrame(out, columns=["figure", "model", "metric", "produced", "reason"])


def trend_sentence(comparison: pd.DataFrame) -> str:
    """One sentence on whether the paper's Experiment 3 trend (wider or pruned students beat the
    base student) appears in :func:`experiment3_comparison`'s table."""
    rows = comparison.set_index("quantity")
    key = "a searched student beats the base student"
    if key not in rows.index:
        return "No search results to compare (the data set is missing or nothing ran)."
    metric = comparison["metric"].iloc[0]
    label = METRICS[metric][0]
    base = rows.loc[f"base student {label}", "ours"]
    best = rows.loc[f"best searched student {label}", "ours"]
    how = rows.loc["best student found by", "ours"]
    if bool(rows.loc[key, "ours"]):
        return (f"Yes: the paper's trend appears. The best searched student ({how}) reaches {label} "
                f"{best:.3f} against the base student's {base:.3f}, with "
                f"{rows.loc['best / base parameters', 'ours']:.1f}x its parameters and "
                f"{rows.loc['best / base FLOPs', 'ours']:.1f}x its FLOPs.")
    return (f"No: no searched student beats the base student here ({label} {best:.3f} vs {base:.3f}); "
            "the paper's trend does not appear in this run.")


__all__ = [
    "METRICS", "COSTS", "METHODS", "METRIC_TARGET", "PRUNE_CRITERIA", "EXPERIMENT3_DATA", "Experiment3Settings",
    "PROFILES", "SearchSettings", "SearchResult", "model_grid", "search_students", "experiment3_task",
    "experiment3_tasks", "finetune", "evaluate_student", "run_experiment3", "run_searches", "search_table",
    "search_code",
    "load_search_results", "search_candidates", "pareto_front", "best_student", "base_student",
    "experiment3_comparison", "group_beats_exhaustive", "group_vs_exhaustive", "NO_COMPARABLE", "frontier_table",
    "figure_availability", "trend_sentence",
]
