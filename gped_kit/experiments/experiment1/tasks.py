"""Experiment 1's chains: Table 1's models on their full, unmasked training sets, once per seed."""

from __future__ import annotations

from collections.abc import Sequence

from ..chains import ChainTask
from ..paper import FULL_TRAINING_SIZE, distillation_task, paper_model
from .settings import Experiment1Settings


def experiment1_tasks(models: Sequence[str], settings: Experiment1Settings, seed: int = 0, device: str = "auto",
                      data_root: str | None = None) -> list[ChainTask]:
    """Table 1's chains (:func:`~gped_kit.experiments.paper.distillation_task`): each model on its full,
    unmasked training set, once per seed of ``settings.table1_seeds`` (offset by ``seed``), seeds outermost."""
    return [distillation_task(m, FULL_TRAINING_SIZE[paper_model(m).dataset], 0, settings, seed + s, device, data_root)
            for s in settings.table1_seeds for m in models]
