"""Experiment 3's settings (paper 003, Section 4, Experiment 3; Appendix A.2): the profiles, the
width-multiplier grids (one for every model, or per model) and :class:`SearchSettings`, what
happens after the chain (pruning, fine-tuning, latency).

Profiles (:data:`PROFILES`, :class:`Experiment3Settings`): ``default`` runs on a CPU in minutes,
``paper`` is Appendix A.2 for a GPU.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...core.options import Estimator, check_int, check_positive, parse_option
from ...core.targets import resolve_target
from ...models.pruning import check_criterion, check_eps
from ..paper import LONG_NUM_CHAINS, ChainSettings, long_sampler

#: Experiment 3's data settings (Section 4, Figures 2 and 6-13): MNIST at N = 60,000 with
#: masking rate 0.29 (m = 15), CIFAR-10 at N = 20,000 without masking.
EXPERIMENT3_DATA = {"fcnn": (60_000, 15), "cnn_mnist": (60_000, 15), "cnn_cifar10": (20_000, 0)}


def check_choice(name: str, value: Any, allowed: Sequence[str] | Mapping[str, Any]) -> None:
    """``ValueError`` naming ``name``, ``value`` and the allowed values unless ``value`` is one of ``allowed``."""
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


def check_widths(name: str, values: Any) -> tuple[float, ...]:
    return _positive_values(name, values, "give at least one width multiplier > 0")


def check_reg_weights(reg_weights: Any) -> tuple[float, ...]:
    return _positive_values("reg_weights", reg_weights, "the lambda grid must hold at least one value > 0 "
                            "(the paper: a log grid from 1e-8 to 1e-3)")


@dataclass(frozen=True)
class SearchSettings:
    """What happens after the chain (Appendix A.2): pruning threshold ``prune_eps`` (epsilon) and
    ``prune_criterion`` (:data:`~gped_kit.models.pruning.PRUNE_CRITERIA`), bias folding,
    fine-tuning length ``finetune_epochs`` (teacher epochs; None = the paper's 600 MNIST / 800
    CIFAR-10), learning rate ``finetune_lr`` (None = 1e-4 FCNN / 1e-3 CNN) halved every
    ``finetune_lr_halving_epochs`` (None = the paper's student schedule, 200 / 400 epochs), the
    latency measurement (batch size, repeats) and the fine-tuning seed. ``finetune_exhaustive`` also
    fine-tunes every exhaustive student the same way (same steps, learning rate and targets, no pruning):
    the fair comparison of :mod:`.fair`, where the group l1/l2 students' fine-tuning is not an advantage the
    grid lacks. Its record keys a stored search (with the chain's key)."""

    prune_eps: float = 1e-3
    prune_criterion: str = "max_abs"
    fold_bias: bool = True
    finetune_epochs: float | None = None
    finetune_lr: float | None = None
    finetune_lr_halving_epochs: float | None = None
    latency_batch_size: int = 100
    latency_repeats: int = 20
    seed: int = 0
    finetune_exhaustive: bool = False

    def __post_init__(self) -> None:
        check_eps(self.prune_eps, "SearchSettings.prune_eps")
        check_criterion(self.prune_criterion, "SearchSettings.prune_criterion")
        for name in ("fold_bias", "finetune_exhaustive"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"SearchSettings.{name}={getattr(self, name)!r}: must be True or False")
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
        return tuple((str(model), check_widths(f"{name}[{model!r}]", values)) for model, values in pairs)
    return check_widths(name, value)


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
    targets, see :func:`search_students`), the exhaustive students' dropout ``student_dropout`` (None: the
    paper's, 0.5 for the FCNN and none for the CNNs; the group l1/l2 students never use dropout),
    ``search``, what happens after the chain (:class:`SearchSettings`; :meth:`search_settings` seeds it), and
    ``fair_comparison``, whether notebook 05 also runs the fair comparison (:mod:`.fair`: a second chain and search
    per model and target), which the ``long`` profile leaves out (not stored: hours on a CPU). Lists are stored as
    tuples."""

    models: tuple[str, ...] = ("cnn_mnist", "fcnn", "cnn_cifar10")
    targets: tuple[str, ...] = ("predictive",)
    predictive_estimator: str = "U_s"
    k1_values: KGrid = (0.5, 1.0, 2.0)
    k2_values: KGrid = (0.5, 1.0, 2.0)
    reg_weights: tuple[float, ...] = (1e-4, 1e-3, 1e-2)
    search: SearchSettings = SearchSettings(finetune_epochs=1.0)
    student_dropout: float | None = None
    fair_comparison: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        models = (self.models,) if isinstance(self.models, str) else tuple(self.models)
        targets = (self.targets,) if isinstance(self.targets, str) else tuple(self.targets)
        object.__setattr__(self, "models", models)
        object.__setattr__(self, "targets", targets)
        if not models:
            raise ValueError("models=[]: name at least one teacher model, e.g. 'cnn_mnist'")
        for model in models:
            check_choice("models", model, EXPERIMENT3_DATA)
        if not targets:
            raise ValueError("targets=[]: name at least one target, e.g. 'predictive' or 'entropy'")
        for target in targets:
            resolve_target(target)
        for name in ("k1_values", "k2_values"):
            object.__setattr__(self, name, _normalise_grid(name, getattr(self, name)))
            for model in models:
                model_grid(self, name, model)
        object.__setattr__(self, "reg_weights", check_reg_weights(self.reg_weights))
        parse_option(Estimator, self.predictive_estimator, "predictive_estimator")
        if not isinstance(self.search, SearchSettings):
            raise TypeError(f"search must be a SearchSettings, got {type(self.search).__name__}")
        if self.student_dropout is not None and not (isinstance(self.student_dropout, (int, float))
                                                     and 0 <= self.student_dropout < 1):
            raise ValueError(f"student_dropout={self.student_dropout!r}: must be None (the paper's) or in [0, 1)")

    def search_settings(self, seed: int = 0) -> SearchSettings:
        """``search`` with the fine-tuning seeded by ``seed`` (the notebook's seed)."""
        return dataclasses.replace(self.search, seed=seed)

    def grid(self, model: str) -> tuple[list[float], list[float]]:
        """(K1 values, K2 values) of the exhaustive grid for ``model``."""
        return model_grid(self, "k1_values", model), model_grid(self, "k2_values", model)


_PAPER_K = {"cnn_mnist": (0.5, 1.0, 2.0, 3.0, 4.0), "fcnn": (0.5, 1.0, 2.0, 3.0, 4.0, 5.0),
            "cnn_cifar10": (0.5, 1.0, 2.0, 3.0, 4.0)}

#: CPU, minutes: CNN-MNIST and FCNN (CIFAR-10 reports missing data here), a short chain (T = 2,200 with the
#: paper's B = 1,000 and students every H = 2 steps: 600 student steps), a 3 x 3 grid, three lambdas. The lambda
#: grid is shifted up one decade from the paper's (1e-4 ... 1e-2 instead of ... 1e-3) because 600 steps give the
#: penalty little time to drive groups to zero. Fine-tuning: one teacher epoch (300 student steps). Both targets,
#: one chain each (:mod:`.tasks`): predictive students give Figures 2, 6 (CNN-MNIST) and 8, 9 (FCNN), the
#: expected-entropy students (U_o, as the paper's) Figures 7 and 10.
DEFAULT = Experiment3Settings(
    models=("cnn_mnist", "fcnn", "cnn_cifar10"), targets=("predictive", "entropy"),
    num_iterations=2_200, burn_in=1_000, predictive_thinning=2, entropy_thinning=2, eval_thinning=50,
    log_every=400, checkpoint_every=1_100, scale_step_size=False,
    k1_values=(0.5, 1.0, 2.0), k2_values=(0.5, 1.0, 2.0), reg_weights=(1e-4, 1e-3, 1e-2),
    search=SearchSettings(prune_eps=1e-3, prune_criterion="max_abs", finetune_epochs=1.0, finetune_lr=None,
                          finetune_lr_halving_epochs=None, latency_batch_size=100, latency_repeats=20))
#: The paper's widths per model and lambda grid (Appendix A.2). The paper does not list its K values. Per model:
#: CNNs 0.5 ... 4 (K = 4 x 4 is 15.6x (CNN-MNIST) / 15.9x (CIFAR-10) the base student's parameters, beyond the
#: paper's best CNN students at 6.6x and 4.7-5.4x); FCNN 0.5 ... 5, because the paper's best FCNN student has about
#: 9.9x the base's parameters and 10x its FLOPs (Figures 8 and 9), beyond K = 4 x 4 (8.0x): K1 x K2 = 5 x 4 is
#: 10.0x / 10.0x, and the group l1/l2 students start from 5 x 5 (11.7x) and prune back.
PAPER_GRID = {"k1_values": tuple(_PAPER_K.items()), "k2_values": tuple(_PAPER_K.items()),
              "reg_weights": (1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3)}

PROFILES: dict[str, Experiment3Settings] = {
    "default": DEFAULT,
    # Appendix A.2 on a GPU: T = 10^6, the paper's B per model, H = 100 (predictive) / 10 (entropy), the paper's
    # grid, epsilon = 1e-3, fine-tuning 600 (MNIST) / 800 (CIFAR-10) epochs (None = the paper's value per model).
    "paper": dataclasses.replace(
        DEFAULT, targets=("predictive", "entropy"), num_iterations=1_000_000, burn_in=None, predictive_thinning=100,
        entropy_thinning=10, eval_thinning=100, log_every=10_000, checkpoint_every=50_000, **PAPER_GRID,
        search=dataclasses.replace(DEFAULT.search, finetune_epochs=None, latency_repeats=50)),
    # A teacher near the paper's on a CPU (issue 28): four pooled BAOA chains of 16,000 steps with a
    # cyclical step size (paper.long_sampler), students every H = 2 kept steps (2,400 updates), the
    # paper's widths (CNNs up to 4, FCNN up to 5) and lambda grid 1e-8 ... 1e-3; fine-tuning as the
    # paper's (the lr restarted at 1e-4 FCNN / 1e-3 CNN on the U_o companion's targets, pruning masks
    # kept) for 3 teacher epochs instead of 600. Both targets, one chain each, as the default profile.
    "long": dataclasses.replace(
        DEFAULT, num_iterations=16_000, log_every=2_000, checkpoint_every=2_000,
        sampler=long_sampler(16_000),
        num_chains=LONG_NUM_CHAINS, **PAPER_GRID, search=dataclasses.replace(DEFAULT.search, finetune_epochs=3.0),
        fair_comparison=False),
}
