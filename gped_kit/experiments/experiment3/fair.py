"""A fair comparison of the two searches (paper 003, Section 3.3; Appendix A.2).

**Why.** In the search as the paper describes it, the group l1/l2 students differ from the exhaustive grid in more
than their regulariser: they are trained without dropout (the FCNN grid keeps the paper's 0.5) and, after pruning,
fine-tuned on the chain's U_o estimates, which the grid never is. A group l1/l2 student that beats the grid may
owe the win to either. Here both searches get the same treatment: a second chain per data setting and target whose
exhaustive students have no dropout (:attr:`Experiment3Settings.student_dropout` = 0; for the CNNs, whose students
have none anyway, the chain is the search's own), and a search that fine-tunes every exhaustive student exactly as
the pruned ones (:attr:`SearchSettings.finetune_exhaustive`: same steps, learning rate, batch and targets).

**What it reports** (:func:`fair_comparison`, per model and searched metric): the base student and the best of the
grid before and after fine-tuning, the best group l1/l2 student after pruning (before fine-tuning) and after, the
units it pruned of those it had, and ``group_wins``: whether the best fine-tuned student of both searches together
is a group l1/l2 one *and* beats the fine-tuned base student; ``no evidence`` when a student it compares is
below the skill floor (:data:`~gped_kit.core.targets.SKILL_FLOOR`)."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd

from ...core.targets import SKILL_FLOOR
from ..store import ResultsStore
from ..verdicts import lowest_known, student_skill, unskilled
from .artifacts import ARTIFACTS
from .pareto import METHODS, METRICS, metric_target
from .search import SearchResult, merged_search, run_searches
from .settings import Experiment3Settings
from .tasks import experiment3_tasks

#: The table notebook 05 writes (``figures/``) per profile: every model's fair comparison, one row per metric.
FAIR_TABLE = ARTIFACTS["fair"].file
#: The metrics compared fairly: one per searched target.
FAIR_METRICS = ("student_nll", "entropy_mae")


def fair_settings(settings: Experiment3Settings) -> Experiment3Settings:
    """``settings`` with the exhaustive students' dropout off and every exhaustive student fine-tuned as the pruned
    ones are: the fair comparison's chains and searches."""
    if not isinstance(settings, Experiment3Settings):
        raise TypeError(f"settings must be an Experiment3Settings, got {type(settings).__name__}")
    return dataclasses.replace(settings, student_dropout=0.0,
                               search=dataclasses.replace(settings.search, finetune_exhaustive=True))


def run_fair(settings: Experiment3Settings, store: ResultsStore, *, seed: int = 0, device: str = "auto",
             data_root: str | None = None, executor: str = "local", recompute: bool = False,
             progress: bool = True) -> dict[str, SearchResult]:
    """The fair comparison's searches of every model and target of ``settings`` (:func:`fair_settings`; one chain
    each, run, reused or with ``executor="stored"`` read back, as :func:`~.search.run_searches`), merged per model
    (:func:`~.search.merged_search`)."""
    fair = fair_settings(settings)
    tasks = experiment3_tasks(fair, seed=seed, device=device, data_root=data_root)
    found = run_searches(tasks, fair.search_settings(seed), store, recompute=recompute, progress=progress,
                         executor=executor)
    models = dict.fromkeys(s.model for s in found)
    return {m: merged_search([s for s in found if s.model == m]) for m in models}


def fair_table(results: dict[str, SearchResult]) -> pd.DataFrame:
    """:func:`fair_comparison` of every model of :func:`run_fair`'s results that has a search table, stacked; with
    none, an empty table of the keys ``model`` and ``metric`` (which notebook 05 writes too, so that an earlier
    run's comparison is not read as this run's)."""
    frames = [fair_comparison(r.table, model) for model, r in results.items() if len(r.table)]
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["model", "metric"])


def _hidden_units(widths: str) -> int:
    """Hidden units and channels of a ``widths`` text such as ``800-800-1`` (every width but the output's)."""
    parts = [int(w) for w in str(widths).split("-") if w.strip().isdigit()]
    return sum(parts[:-1])


def _best(rows: pd.DataFrame, metric: str) -> pd.Series | None:
    rows = rows.dropna(subset=[metric])
    if rows.empty:
        return None
    return rows.loc[rows[metric].idxmin() if METRICS[metric][1] else rows[metric].idxmax()]


def fair_comparison(table: pd.DataFrame, model: str) -> pd.DataFrame:
    """One row per metric of :data:`FAIR_METRICS` that ``model``'s fair search table reports (a search with
    ``finetune_exhaustive``; ValueError for a table without fine-tuned exhaustive students): ``base``,
    ``base_finetuned``, ``grid_best`` / ``grid_best_finetuned`` (and ``grid_best_architecture``, the fine-tuned
    one's), ``group_best_pruned`` (the best fine-tuned group l1/l2 student's value after pruning, before
    fine-tuning), ``group_best_finetuned`` (its ``group_best_architecture``, ``units_pruned`` of
    ``units_before``), ``winner`` (the method of the best fine-tuned student), ``beats_base`` (it beats the
    fine-tuned base student), ``group_half_flops_best`` (test NLL only: the best fine-tuned group l1/l2 student
    at <= 50% of the base student's FLOPs; NaN when none is that small) and ``group_half_flops_skill`` (the lower
    skill of it and the fine-tuned base: what that comparison rests on), ``skill`` (the lowest skill of the
    students compared for the verdict) and ``verdict``: ``yes`` when the winner is group l1/l2 + pruning, pruned
    at least one unit and beats the fine-tuned base, ``no`` otherwise, ``no evidence`` when ``skill`` is below the
    floor."""
    rows_model = table[table["model"] == model] if len(table) else table
    out = []
    for metric in FAIR_METRICS:
        rows = rows_model[rows_model["target"] == metric_target(metric)] if len(rows_model) else rows_model
        if rows.empty or metric not in rows or rows[metric].isna().all():
            continue
        grid = rows[rows["method"] == "exhaustive"]
        grid_tuned = grid[grid["stage"] == "fine-tuned"]
        if grid_tuned.empty:
            raise ValueError(f"fair_comparison: {model}'s {metric} search has no fine-tuned exhaustive students; "
                             "it needs a search run with SearchSettings(finetune_exhaustive=True) (fair_settings)")
        grid_plain = grid[grid["stage"] == "distilled"]
        base = grid_plain[grid_plain["is_base"].astype(bool)]
        base_tuned = grid_tuned[grid_tuned["student"].isin(base["student"])]
        group_tuned = rows[(rows["method"] == "group_lasso") & (rows["stage"] == "fine-tuned")]
        best_grid, best_grid_tuned = _best(grid_plain, metric), _best(grid_tuned, metric)
        best_group = _best(group_tuned, metric)
        winner = _best(pd.concat([grid_tuned, group_tuned]), metric)
        lower = METRICS[metric][1]
        base_value = float(base_tuned[metric].iloc[0]) if len(base_tuned) else math.nan
        beats = bool(winner is not None and (winner[metric] < base_value if lower else winner[metric] > base_value))
        pruned = (rows[(rows["student"] == best_group["student"]) & (rows["stage"] == "pruned")]
                  if best_group is not None else rows.iloc[0:0])
        distilled = (rows[(rows["student"] == best_group["student"]) & (rows["stage"] == "distilled")]
                     if best_group is not None else rows.iloc[0:0])
        compared = pd.concat([base_tuned, *(pd.DataFrame([r]) for r in (winner, best_group) if r is not None)])
        skill = lowest_known(student_skill(compared)) if len(compared) else math.nan
        group_won = winner is not None and winner["method"] == "group_lasso"
        units = int(best_group["units_removed"]) if best_group is not None else 0
        verdict = ("no evidence" if unskilled(skill)
                   else "yes" if group_won and beats and units > 0 else "no")
        half, half_skill = math.nan, math.nan
        if metric == "student_nll" and len(base):
            small = group_tuned[group_tuned["flops"] <= 0.5 * float(base["flops"].iloc[0])].dropna(subset=[metric])
            if len(small):
                smallest = small.loc[small[metric].idxmin()]
                half = float(smallest[metric])
                half_skill = lowest_known(student_skill(pd.concat([base_tuned, pd.DataFrame([smallest])])))
        out.append({
            "model": model, "metric": metric, "base": float(base[metric].iloc[0]) if len(base) else math.nan,
            "base_finetuned": base_value,
            "grid_best": float(best_grid[metric]) if best_grid is not None else math.nan,
            "grid_best_finetuned": float(best_grid_tuned[metric]) if best_grid_tuned is not None else math.nan,
            "grid_best_architecture": best_grid_tuned["architecture"] if best_grid_tuned is not None else "",
            "group_best_pruned": float(pruned[metric].iloc[0]) if len(pruned) else math.nan,
            "group_best_finetuned": float(best_group[metric]) if best_group is not None else math.nan,
            "group_best_architecture": best_group["architecture"] if best_group is not None else "",
            "units_pruned": units,
            "units_before": _hidden_units(distilled["widths"].iloc[0]) if len(distilled) else 0,
            "winner": METHODS[winner["method"]] if winner is not None else "",
            "beats_base": beats, "group_half_flops_best": half, "group_half_flops_skill": half_skill, "skill": skill,
            "verdict": verdict})
    return pd.DataFrame(out)


def fair_text(fair: pd.DataFrame) -> str:
    """One bullet line per row of :func:`fair_comparison` (model and metric): the fine-tuned grid's best against
    the fine-tuned group l1/l2 student, what pruning and fine-tuning did, and the verdict."""
    lines = []
    for r in fair.itertuples():
        label = METRICS[r.metric][0]
        lines.append(
            f"- {r.model}, {label}: with both searches fine-tuned alike and no dropout, the best student comes "
            f"from {r.winner}: group l1/l2 {r.group_best_finetuned:.4f} ({r.group_best_architecture}; pruning removed "
            f"{r.units_pruned:,} of {r.units_before:,} units, {r.group_best_pruned:.4f} before fine-tuning) "
            f"against the grid's best {r.grid_best_finetuned:.4f} ({r.grid_best_architecture}; "
            f"{r.grid_best:.4f} before) and the base student's {r.base_finetuned:.4f} ({r.base:.4f} before): "
            f"**{r.verdict}**" + (f" (a student's skill {r.skill:.3f} is below {SKILL_FLOOR})"
                                  if r.verdict == "no evidence" else "") + ".")
    return "\n".join(lines)
