"""Notebooks 02 (Experiment 2 on MNIST), 03 (on CIFAR-10) and 04 (Figure 3) as
:class:`~gped_kit.experiments.frame.Experiment`s: the summary, the lines their checks print and the README's
rows."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ..claims import AGREEMENT_COUNTS
from ..device_runs import PAPER_STEPS, paper_length_runs, uo_vs_us
from ..frame import SCALED_CHAIN, Experiment, Summary, read_chains
from ..store import ResultsStore
from ..verdicts import (
    MODELS,
    NO_EVIDENCE,
    Claim,
    Evidence,
    Finding,
    artifact_table,
    judged_verdict,
    link,
    profile_evidence,
    unskilled,
    unskilled_reason,
)
from .analysis import (
    BELOW_FLOOR_TABLE,
    TRENDS_TABLE,
    below_floor,
    experiment2_cells,
    experiment2_trend_cells_compared,
    experiment2_trend_comparison,
    no_evidence_estimators,
)
from .artifacts import (
    CIFAR10_ARTIFACTS,
    CIFAR10_CHECKS,
    FIGURE3_ARTIFACTS,
    FIGURE3_CHECKS,
    MNIST_ARTIFACTS,
    MNIST_CHECKS,
)
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
    the paper's cells, with the count per seed: :func:`~.analysis.experiment2_trend_comparison`),
    ``trend_cells`` (every comparison: :func:`~.analysis.experiment2_trend_cells_compared`) and ``below_floor``
    (the cells whose students are below the skill floor: :func:`~.analysis.below_floor`)."""
    tasks = experiment2_tasks(models, settings, seed=seed, device=device, data_root=data_root)
    grid, missing = read_chains(tasks, store, executor, recompute, progress, settings.chains_per_batch)
    if grid is None:
        return Summary(experiment, profile, settings, None, {}, missing)
    table = grid.table
    tables = {"cells": experiment2_cells(table)}
    tables["below_floor"] = below_floor(tables["cells"])
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


def _mnist_checks(settings: Experiment2Settings, absent: Collection[str]) -> dict[str, Any]:
    """Every run's cells complete; a run that computes its chains with ``chains_per_batch`` other than 1 (an
    int > 1, or "auto") computes them in shared batches."""
    expected: dict[str, Any] = {MNIST_CHECKS["finished"].cell(): True}
    if settings.chains_per_batch != 1:
        expected[MNIST_CHECKS["batched"].cell(chains_per_batch=settings.chains_per_batch)] = True
    return expected


def _cifar_checks(settings: Experiment2Settings, absent: Collection[str]) -> dict[str, Any]:
    """Whether CIFAR-10 is here; without it, every cell reports missing data and the message says where the kit
    looked and how to get the files."""
    if "cifar10" not in absent:
        return {CIFAR10_CHECKS["present"].cell(): True}
    return {CIFAR10_CHECKS["present"].cell(): False, CIFAR10_CHECKS["missing_data"].cell(): True,
            CIFAR10_CHECKS["message"].cell(): True}


def trends_profile(figures: Path) -> str | None:
    """The profile Experiment 2's verdicts rest on (:func:`readme_rows`): ``seeds`` (the default's chains over
    three seeds) where notebook 02 wrote its trends, else ``default``; None where it wrote neither."""
    return next((p for p in ("seeds", "default") if artifact_table(figures, MNIST_ARTIFACTS["trends"], profile=p)
                 is not None), None)


#: The longest line of the README's verdict (characters).
VERDICT_LINE = 200


def below_floor_line(figures: Path, profile: str | None = None) -> str | None:
    """Lines for the README's verdict: the Experiment 1-2 cells of ``profile`` (None: the one the verdicts
    rest on, :func:`trends_profile`) whose students are below the skill floor (the table notebook 02 wrote,
    :func:`~.analysis.below_floor`), a line a model, by metric (naming the estimator where only one of the two is
    below the floor) and m, with a link to their skills; None when
    there are none or the table is absent."""
    profile = profile or trends_profile(figures) or "default"
    name = BELOW_FLOOR_TABLE.format(profile=profile)
    low = artifact_table(figures, MNIST_ARTIFACTS["below_floor"], profile=profile)
    if low is None or low.empty:
        return None
    parts = []  # per model: per metric and estimators, the masks that share their sizes N together
    which = pd.Series([f" ({named[0]} only)" if len(named := no_evidence_estimators(r)) == 1 else ""
                       for r in low.itertuples()], index=low.index)
    for model, cells in low.groupby("model", sort=False):
        groups = []
        for (metric, only), part in cells.groupby([cells["metric"], which.loc[cells.index]], sort=False):
            sizes = {int(m): " and ".join(f"{int(n):,}" for n in sorted(p["labelled_size"]))
                     for m, p in part.groupby("mask_size")}
            masks = [f"m = {' and '.join(str(m) for m in sizes if sizes[m] == n)} (N = {n})"
                     for n in dict.fromkeys(sizes.values())]
            groups.append(f"{metric}{only} at {' and '.join(masks)}")
        parts.append(f"{MODELS.get(model, model)}: {'; '.join(groups)}.")
    lines: list[str] = []  # the models' parts on as few lines as the README verdict's line length allows
    for part in parts:
        if lines and len(lines[-1]) + 1 + len(part) <= VERDICT_LINE:
            lines[-1] += f" {part}"
        else:
            lines.append(part)
    where = "the default profile" if profile == "default" else f"the `{profile}` profile"
    return (f"No evidence in {where}: students no better than the best constant prediction "
            f"({link(f'{name}.md', 'their skills')}), their comparisons not counted:\n"
            + "\n".join(lines))


#: The trend a GPU run at the paper's length speaks to: its one cell (N = 60,000, r = 0) of U_o against U_s.
UO_TREND = "U_o at least as good as U_s"


def uo_gpu_finding(figures: Path) -> Finding | None:
    """U_o against U_s on the GPU runs of notebook 01's paper profile at T = 10^6 (committed beside ``figures``;
    the cell N = 60,000, r = 0 of each model that completed one), by the trend's rule cell by cell against the
    paper's same cell; a difference smaller than the metric's run-to-run spread is not separable, and not
    counted either way."""

    runs = {m: r for m, r in paper_length_runs(Path(figures).parent).items() if r.complete}
    if not runs:
        return None
    agree = n = near = unknown = 0
    ours, lacking = [], []
    for m, run in runs.items():
        for name, uo, us, outcome in uo_vs_us(run):
            metric = "student_nll" if name == "student NLL" else "entropy_mae"
            paper_holds = run.cell(metric, "U_o").paper <= run.cell(metric, "U_s").paper
            if outcome == NO_EVIDENCE:
                unknown += 1
                lacking += [c.skill for c in (run.cell(metric, "U_o"), run.cell(metric, "U_s")) if unskilled(c.skill)]
            elif outcome == "not separable":
                near += 1
            else:
                n += 1
                agree += (outcome == "U_o at least as good") == paper_holds
            spread = run.spread.get(metric)
            ours.append(f"{MODELS.get(m, m)} {name} U_o {uo:.4f} vs U_s {us:.4f}: {outcome}"
                        + (f" (spread {spread:.4f})" if spread else ""))
    left_out = ([f"{near} not separable"] if near else []) + (
        [f"{unknown} no evidence: {unskilled_reason(lacking)}"] if unknown else [])
    judged = (judged_verdict(agree, n, near, unknown) + f" (agree in {agree} of {n} cells"
              + "".join(f"; {x}" for x in left_out) + ")" if n else f"no evidence ({'; '.join(left_out)})")
    scope = ", ".join(MODELS.get(m, m) for m in runs) + ", N = 60,000, r = 0 only"
    return Finding(Evidence("paper", PAPER_STEPS, 1, device="a GPU", scope=scope), judged, "; ".join(ours))


def readme_rows(figures: Path) -> list[Claim]:
    """Rule: cell by cell against the paper's outcome in the same cell (Section 4.2, Tables 5, 6):
    ``yes`` when every cell compared agrees, ``partly`` when some do, ``no`` when none; cells whose outcome of ours
    lies within the seeds' spread (not separable) or rests on a student below the skill floor (no evidence) are
    named and not compared, and where more cells are no evidence than are compared the verdict is no evidence
    (:func:`~gped_kit.experiments.verdicts.judged_verdict`). The evidence: the default profile's chains over
    three seeds (the ``seeds`` profile:
    the outcomes on the cells averaged over them, separable or not by their spread) where stored, else its one
    seed (where no spread is known, so every outcome counts); for U_o against U_s, the GPU runs at the paper's
    length too (:func:`uo_gpu_finding`)."""
    profile = trends_profile(figures)
    if profile is None:
        return []
    t = artifact_table(figures, MNIST_ARTIFACTS["trends"], profile=profile)
    name = TRENDS_TABLE.format(profile=profile)
    seeds = len(PROFILES[profile].seeds)
    rows = []
    for trend, g in t.groupby("trend", sort=False):
        g = g.set_index("model")
        hits, n, near, unskilled = (int(g[k].sum()) for k in AGREEMENT_COUNTS)  # the models' cells together
        over = [f"{MODELS.get(m, m)} {g.loc[m, 'seeds']}" for m in g.index] if seeds > 1 else []
        judged = (f"{judged_verdict(hits, n, near, unskilled)} (agree in {hits} of {n} cells" if n
                  else "no evidence (no cell compared")
        judged += (f"; {near} not separable" if near else "") + (f"; {unskilled} no evidence" if unskilled else "")
        judged += ")"
        rows.append(Claim(f"Exp. 2: {trend}", judged,
                          ", ".join(f"{MODELS.get(m, m)} {g.loc[m, 'ours']}" for m in g.index)
                          + (f"; per seed: {', '.join(over)}" if over else ""),
                          f"{g['paper_statement'].iloc[0]} (" + ", ".join(f"{MODELS.get(m, m)} {g.loc[m, 'paper']}"
                                                                         for m in g.index) + ")",
                          link(f"{name}.md", "trends") + ", notebook 02",
                          evidence=profile_evidence("default", PROFILES[profile], seeds),
                          gpu=uo_gpu_finding(figures) if trend == UO_TREND else None))
    return rows


MNIST = Experiment(
    "02_experiment2_mnist", PROFILES, _mnist_tasks,
    parameters={"models": MNIST_MODELS, "lr_check_models": LR_CHECK_MODELS}, summary=experiment2_summary,
    shown_profiles=("default", "seeds"), scaled_paper=SCALED_CHAIN, expected_checks=_mnist_checks,
    readme_rows=readme_rows, artifacts=MNIST_ARTIFACTS, checks=MNIST_CHECKS,
    description="Experiment 2: labelled-set sizes × masking rates, U_o vs U_s (Figures 1, 4; Tables 5, 6)")
CIFAR10 = Experiment("03_experiment2_cifar10", PROFILES, _cifar_tasks, scaled_paper=SCALED_CHAIN,
                     expected_checks=_cifar_checks, artifacts=CIFAR10_ARTIFACTS, checks=CIFAR10_CHECKS,
    description="Experiment 2 on CIFAR-10 (Figure 5, Table 7) where the data set is present")
#: Notebook 04 draws Figure 3 (the masks) and explores the stored grid; it runs nothing of its own.
FIGURE3 = Experiment("04_figure3_masking", artifacts=FIGURE3_ARTIFACTS, checks=FIGURE3_CHECKS,
    description="Figure 3 and the masking-rate / dataset-size explorer")
