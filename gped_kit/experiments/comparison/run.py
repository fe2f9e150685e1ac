"""The comparison and the spiral through the results store: derived entries of kinds ``"comparison"``
and ``"spiral"`` of their chains (:func:`run_comparison`, :func:`spiral_run`), keyed by the chain's
record, Hydra's configuration and the chain's and comparison's numerics versions
(:mod:`~gped_kit.experiments.numerics`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ...baselines import hydra
from ...core import uncertainty
from ...core.schema import record
from ...core.status import Status
from ...data.container import GPEDData
from ...data.spiral import SpiralConfig, spiral_data
from ...engine import GPEDResult
from ..chains import ChainOutcome, ChainTask
from ..derived import DerivedOutcome, DerivedTask, run_derived
from ..store import Entry, ResultsStore
from .compute import (
    comparison_budgets,
    comparison_costs,
    comparison_memory,
    comparison_methods,
    comparison_table,
    kd_variants,
    train_hydra_on_chain,
)
from .settings import ComparisonSettings
from .tasks import comparison_task, spiral_task


@dataclass
class ComparisonRun:
    """The MNIST comparison as stored: the chain's outcome (compact: summary and history), the
    derived entry's status (``ran`` / ``reused``) and the entry, and its tables: ``table``
    (:func:`comparison_table` with costs and the run's setting), ``memory`` (:func:`comparison_memory`),
    ``kd_variants`` (:func:`kd_variants`) and ``hydra_history`` (Hydra's losses per log point)."""

    chain: ChainOutcome
    status: Status
    entry: Entry
    table: pd.DataFrame
    memory: pd.DataFrame
    kd_variants: pd.DataFrame
    hydra_history: pd.DataFrame

    @property
    def summary(self) -> pd.DataFrame:
        return self.chain.result.summary if self.chain.result is not None else pd.DataFrame()

    @property
    def history(self) -> pd.DataFrame:
        return self.chain.result.history if self.chain.result is not None else pd.DataFrame()

    @property
    def eval_sets(self) -> list[str]:
        return list(dict.fromkeys(self.table["eval_set"]))

    @property
    def hydra_seconds(self) -> float:
        return float(self.table["hydra_seconds"].iloc[0])

    @property
    def hydra_path(self) -> Path:
        """The trained Hydra (:func:`~gped_kit.baselines.hydra.load_hydra`); absent where the entry was
        made elsewhere (it is not committed)."""
        return self.entry.path / "hydra.pt"


def _raise_unless_done(outcome: DerivedOutcome, what: str) -> Entry:
    if outcome.entry is None:
        raise RuntimeError(f"{what}: {outcome.status}: {outcome.error}")
    return outcome.entry


def run_comparison(settings: ComparisonSettings, store: ResultsStore, seed: int = 0, device: str = "auto",
                   data_root: str | None = None, recompute: bool = False, progress: bool = True,
                   task: ChainTask | None = None, executor: str = "local", address: str | None = None
                   ) -> ComparisonRun:
    """The MNIST comparison end to end through ``store``: a derived entry of kind ``"comparison"`` keyed
    by the chain's record and Hydra's configuration, computed only when missing (the chain is then run,
    resumed or reloaded with its full state, Hydra trained on its snapshots and every table written).
    ``task`` replaces :func:`comparison_task`'s chain (other data, e.g. in tests). ``executor="ray"``
    computes a missing entry, with its chain, as a Ray task at ``address`` (one GPU when the chain's
    device is CUDA; :func:`~gped_kit.experiments.derived.run_derived`). Raises ``RuntimeError`` when
    the chain or the comparison failed or its data are missing."""
    task = task or comparison_task(settings, seed, device, data_root)
    config = settings.hydra

    def compute(entry: Entry, result: GPEDResult, data: GPEDData) -> None:
        arch = task.config.model
        trained = train_hydra_on_chain(result, data, arch, config, progress)
        hydra.save_hydra(trained, entry.path / "hydra.pt")
        costs = comparison_costs(arch, data, len(result.snapshots), trained.net, task.students)
        costs = costs.merge(comparison_budgets(task, config, len(result.snapshots)), on="method", how="outer",
                            sort=False)
        table = comparison_table(result, data, arch, trained.net, costs)
        table = table.assign(labelled_size=data.info.get("labelled_size"), mask_size=data.info.get("mask_size"),
                             num_iterations=task.config.num_iterations, num_snapshots=len(result.snapshots),
                             hydra_seconds=round(trained.seconds, 1), hydra_cache_bytes=trained.cache_bytes)
        entry.write_table("comparison", table)
        entry.write_table("memory", comparison_memory(result, data, trained, task.students))
        entry.write_table("kd_variants", kd_variants(result.summary))
        entry.write_table("hydra_history", pd.DataFrame(trained.history, columns=["phase", "step", "loss"]))

    item = DerivedTask(task, "comparison", {"hydra": record(config)}, compute)
    outcome = run_derived([item], store, recompute, progress, executor, address)[0]
    entry = _raise_unless_done(outcome, f"comparison chain {task.label}")
    return ComparisonRun(outcome.chain, outcome.status, entry, entry.table("comparison"), entry.table("memory"),
                         entry.table("kd_variants"), entry.table("hydra_history"))


@dataclass
class SpiralRun:
    """The spiral toy as stored: the chain's outcome (compact), the derived entry's status and the entry,
    the comparison ``table`` (test set and grid), the uncertainty ``maps`` on the grid (per method,
    :class:`~gped_kit.core.uncertainty.Uncertainties` read from float16 arrays) and the data's
    configuration (:attr:`data` regenerates the points, for plots)."""

    chain: ChainOutcome
    status: Status
    entry: Entry
    table: pd.DataFrame
    maps: dict[str, uncertainty.Uncertainties]
    config: SpiralConfig
    hydra_history: pd.DataFrame

    @property
    def data(self) -> GPEDData:
        return spiral_data(self.config)


_MAP_PARTS = ("predictive", "total", "data")


def _write_maps(entry: Entry, maps: Mapping[str, uncertainty.Uncertainties]) -> None:
    entry.write_arrays({f"{method}/{part}": getattr(u, part) for method, u in maps.items() for part in _MAP_PARTS})


def _read_maps(entry: Entry) -> dict[str, uncertainty.Uncertainties]:
    arrays = entry.arrays()
    methods = list(dict.fromkeys(k.rsplit("/", 1)[0] for k in arrays))
    return {m: uncertainty.Uncertainties(*(torch.from_numpy(np.asarray(arrays[f"{m}/{p}"], dtype=np.float32))
                                           for p in _MAP_PARTS)) for m in methods}


def spiral_run(settings: ComparisonSettings, store: ResultsStore, seed: int = 0, device: str = "auto",
               recompute: bool = False, progress: bool = True, executor: str = "local",
               address: str | None = None) -> SpiralRun:
    """The spiral toy end to end through ``store`` (:func:`spiral_task`; a derived entry of kind
    ``"spiral"`` keyed by the chain's record and Hydra's configuration): the comparison table on the
    test set and the grid (unlabelled), and every uncertainty method's maps on the grid.
    ``executor``/``address`` as :func:`run_comparison`."""
    task = spiral_task(settings, seed, device)
    config = settings.spiral.hydra

    def compute(entry: Entry, result: GPEDResult, data: GPEDData) -> None:
        trained = train_hydra_on_chain(result, data, "fcnn", config, progress)
        hydra.save_hydra(trained, entry.path / "hydra.pt")
        table = comparison_table(result, data, "fcnn", trained.net, labels={"grid": None})
        entry.write_table("comparison", table.assign(dataset="spiral", hydra_seconds=round(trained.seconds, 1)))
        entry.write_table("hydra_history", pd.DataFrame(trained.history, columns=["phase", "step", "loss"]))
        _write_maps(entry, {m: u for m, (_, u) in comparison_methods(result, data, "fcnn", trained.net, "grid").items()
                            if u is not None})

    item = DerivedTask(task, "spiral", {"hydra": record(config)}, compute)
    outcome = run_derived([item], store, recompute, progress, executor, address)[0]
    entry = _raise_unless_done(outcome, f"spiral chain {task.label}")
    return SpiralRun(outcome.chain, outcome.status, entry, entry.table("comparison"), _read_maps(entry), task.data,
                     entry.table("hydra_history"))
