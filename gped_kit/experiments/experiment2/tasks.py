"""Experiment 2's chains: the MNIST grid, the learning-rate schedule check, the CIFAR-10 cells."""

from __future__ import annotations

from collections.abc import Sequence

from ..chains import ChainTask
from ..paper import distillation_task, paper_shaped_lr_scale
from .settings import Experiment2Settings


def experiment2_tasks(models: Sequence[str], settings: Experiment2Settings, seed: int = 0, device: str = "auto",
                      data_root: str | None = None) -> list[ChainTask]:
    """The MNIST grid: every model x |D| x m of the profile, once per seed of ``settings.seeds``
    (offset by ``seed``; the default (0,) gives one chain per cell, seeded ``seed``)."""
    return [distillation_task(model, n, m, settings, seed + s, device, data_root)
            for s in settings.seeds for model in models for n in settings.labelled_sizes for m in settings.mask_sizes]


def lr_schedule_tasks(model: str, settings: Experiment2Settings, seed: int = 0, device: str = "auto",
                      data_root: str | None = None) -> list[ChainTask]:
    """Experiment 2 cells (|D| in ``labelled_sizes`` x m in ``lr_check_masks``) whose predictive
    students follow the paper-shaped schedule (:func:`~gped_kit.experiments.paper.paper_shaped_lr_scale`):
    the check of whether the paper's "gap falls with more labelled data" comes from its student
    schedule."""
    scale = paper_shaped_lr_scale(model, settings)
    return [distillation_task(model, n, m, settings, seed, device, data_root, targets=("predictive",),
                              lr_halving_scale=scale)
            for n in settings.labelled_sizes for m in settings.lr_check_masks]


def lr_check_tasks(models: Sequence[str], lr_check_models: Sequence[str], settings: Experiment2Settings, seed: int = 0,
                   device: str = "auto", data_root: str | None = None) -> list[ChainTask]:
    """Notebook 02's learning-rate schedule check: :func:`lr_schedule_tasks` of each model of ``lr_check_models``
    that the notebook runs (``models``)."""
    return [t for model in lr_check_models if model in models
            for t in lr_schedule_tasks(model, settings, seed=seed, device=device, data_root=data_root)]


def cifar_tasks(settings: Experiment2Settings, seed: int = 0, device: str = "auto",
                data_root: str | None = None) -> list[ChainTask]:
    """The CIFAR-10 cells (Figure 5, Table 7): CNN-CIFAR10 on each size of ``cifar_labelled_sizes``, no mask."""
    return [distillation_task("cnn_cifar10", n, 0, settings, seed, device, data_root)
            for n in settings.cifar_labelled_sizes]
