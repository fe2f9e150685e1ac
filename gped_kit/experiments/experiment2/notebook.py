"""Notebooks 02 (Experiment 2 on MNIST), 03 (on CIFAR-10) and 04 (Figure 3) as
:class:`~gped_kit.experiments.frame.Experiment`s: the summary, the lines their checks print and the README's
rows."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

from ..frame import SCALED_CHAIN, Experiment, Summary, read_chains
from ..store import ResultsStore
from ..verdicts import MODELS, Claim, counts, link, read_table, verdict
from .analysis import TRENDS_TABLE, experiment2_cells, experiment2_trend_cells_compared, experiment2_trend_comparison
from .settings import PROFILES, Experiment2Settings
from .tasks import cifar_tasks, experiment2_tasks, lr_check_tasks

#: Notebook 02's models and the models of its learning-rate schedule check (its parameters).
MNIST_MODELS = ["fcnn", "cnn_mnist"]
LR_CHECK_MODELS = ["fcnn"]


def experiment2_summary(experiment: Experiment, store: ResultsStore, settings: Experiment2Settings, *,
                        models: Sequence[str] = tuple(MNIST_MODELS), profile: str = "default", seed: int = 0,
                        device: str = "auto", data_root: str | None = None, executor: str = "local",
                        recompute: bool = False, progress: bool = True) -> Summary:
    """Experiment 2 on MNIST (paper Section 4.2 and Appendix B.1): the grid's chains
    (:func:`~.tasks.experiment2_tasks`, one per seed of the profile); ``run`` is the grid. Tables: ``cells``
    (:func:`~.analysis.experiment2_cells`, the mean over seeds), ``trends`` (each trend counted on ours and on
    the paper's cells, with the count per seed: :func:`~.analysis.experiment2_trend_comparison`) and
    ``trend_cells`` (every comparison: :func:`~.analysis.experiment2_trend_cells_compared`)."""
    tasks = experiment2_tasks(models, settings, seed=seed, device=device, data_root=data_root)
    grid, missing = read_chains(tasks, store, executor, recompute, progress, settings.chains_per_batch)
    if grid is None:
        return Summary(experiment, profile, settings, None, {}, missing)
    table = grid.table
    tables = {"cells": experiment2_cells(table)}
    if not missing:
        tables["trends"] = experiment2_trend_comparison(table)
        tables["trend_cells"] = experiment2_trend_cells_compared(table)
    return Summary(experiment, profile, settings, grid, tables, missing)


def _mnist_tasks(settings: Experiment2Settings, *, seed: int, device: str, data_root: str | None,
                 models: Sequence[str], lr_check_models: Sequence[str]) -> list:
    """Notebook 02's grid, then its learning-rate schedule check."""
    return (experiment2_tasks(models, settings, seed=seed, device=device, data_root=data_root)
            + lr_check_tasks(models, lr_check_models, settings, seed=seed, device=device, data_root=data_root))


def _cifar_tasks(settings: Experiment2Settings, *, seed: int, device: str, data_root: str | None) -> list:
    return cifar_tasks(settings, seed=seed, device=device, data_root=data_root)


def _mnist_lines(settings: Experiment2Settings, absent: Collection[str]) -> list[str]:
    cells = len(MNIST_MODELS) * len(settings.labelled_sizes) * len(settings.mask_sizes)
    lines = [f"{cells} cells, one SGLD chain each", "every cell completed: True"]
    return lines + (["one of a batch"] if settings.chains_per_batch != 1 else [])  # an int > 1, or "auto"


def _cifar_lines(settings: Experiment2Settings, absent: Collection[str]) -> list[str]:
    if "cifar10" not in absent:
        return ["CIFAR-10 present here: True"]
    return ["every CIFAR-10 cell reports missing data: True",
            "the message names where it looked and how to get the files: True"]


def readme_rows(figures: Path) -> list[Claim]:
    """Rule: cell by cell against the paper's outcome in the same cell (Section 4.2, Tables 5, 6):
    ``yes`` when every cell compared agrees, ``partly`` when some do, ``no`` when none."""
    name = TRENDS_TABLE.format(profile="default")
    t = read_table(figures, f"{name}.csv")
    if t is None:
        return []
    seeds = read_table(figures, f"{TRENDS_TABLE.format(profile='seeds')}.csv")
    seeds = {} if seeds is None else {(r.model, r.trend): r.seeds for r in seeds.itertuples()}
    rows = []
    for trend, g in t.groupby("trend", sort=False):
        g = g.set_index("model")
        agree = [counts(text, "agree in ") for text in g["agree"]]
        over = [f"{MODELS.get(m, m)} {seeds[(m, trend)]}" for m in g.index if (m, trend) in seeds]
        hits, n = sum(a for a, _ in agree), sum(c for _, c in agree)
        rows.append(Claim(f"Exp. 2: {trend}", f"{verdict(hits, n)} (agree in {hits} of {n} cells)",
                          ", ".join(f"{MODELS.get(m, m)} {g.loc[m, 'ours']}" for m in g.index)
                          + (f"; {', '.join(over)}" if over else ""),
                          f"{g['paper_statement'].iloc[0]} (" + ", ".join(f"{MODELS.get(m, m)} {g.loc[m, 'paper']}"
                                                                         for m in g.index) + ")",
                          link(f"{name}.md", "trends") + ", notebook 02"))
    return rows


MNIST = Experiment(
    "02_experiment2_mnist", PROFILES, _mnist_tasks,
    parameters={"models": MNIST_MODELS, "lr_check_models": LR_CHECK_MODELS}, summary=experiment2_summary,
    shown_profiles=("default", "seeds"), scaled_paper=SCALED_CHAIN, verdicts=_mnist_lines, readme_rows=readme_rows)
CIFAR10 = Experiment("03_experiment2_cifar10", PROFILES, _cifar_tasks, scaled_paper=SCALED_CHAIN,
                     verdicts=_cifar_lines)
#: Notebook 04 draws Figure 3 (the masks) and explores the stored grid; it runs nothing of its own.
FIGURE3 = Experiment("04_figure3_masking")
