"""Experiment 3 beside the paper (Figures 2 and 6-13): our search against the paper's statements,
which of its figures a run can draw, and one sentence on whether its trend appears."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ...core.status import Status
from ...core.targets import SKILL_FLOOR, resolve_target
from .. import paper_tables
from ..verdicts import MODELS, artifact_table, link, lowest_known, student_skill, unskilled
from .artifacts import ARTIFACTS
from .pareto import (
    METHODS,
    METRICS,
    base_student,
    best_student,
    group_beats_exhaustive,
    metric_rows,
    metric_target,
    search_candidates,
)
from .search import SearchResult
from .settings import check_choice

#: The table notebook 05 writes (``figures/``): the searched students below the skill floor, per profile.
BELOW_FLOOR_TABLE = ARTIFACTS["below_floor"].file
#: The quantities of :func:`experiment3_comparison` that say whether its comparisons count: the lowest skill over
#: the best constant prediction (:func:`~gped_kit.experiments.verdicts.student_skill`) of the best searched student
#: and the base student (what "a searched student beats the base student" rests on), and (test NLL) of the best
#: group l1/l2 student at <= 50% of the base FLOPs and the base student. NaN where a student's skill was not stored.
SKILL_QUANTITY = "lowest skill of the best and the base student"
SMALL_SKILL_QUANTITY = "lowest skill of the best group l1/l2 student at <= 50% of the base FLOPs and the base student"
SKILL_NOTE = (f"over the best constant prediction; below {SKILL_FLOOR} (or not stored) the comparison is no evidence")
#: What a comparison of the searches' students as they came out does not control: the group l1/l2 students are
#: fine-tuned and trained without dropout, the grid's and the base student neither (the fair table compares alike).
UNFAIR_NOTE = ("as searched: the group l1/l2 students fine-tuned without dropout, the grid's and the base not; the "
               "fair comparison (experiment3_fair_<profile>) fine-tunes all alike")


def _lowest_skill(*students: pd.Series | None) -> float:
    """The lowest skill of ``students`` (:func:`~gped_kit.experiments.verdicts.lowest_known`): NaN where one is
    missing or has no skill stored."""
    if not students or any(s is None for s in students):
        return math.nan
    return lowest_known(student_skill(pd.DataFrame(list(students))))


def stored_skill(rows: pd.DataFrame, quantity: str = SKILL_QUANTITY) -> float:
    """The skill ``quantity`` of :func:`experiment3_comparison`'s table indexed by ``quantity`` (as computed, or read
    back from the table notebook 05 wrote, where a missing value reads "—"); NaN where the table has none (a table
    written before it carried the skill), which :func:`~gped_kit.experiments.verdicts.unskilled` reads as not
    known to beat the best constant prediction."""
    if quantity not in rows.index:
        return math.nan
    try:
        return float(rows.loc[quantity, "ours"])
    except (TypeError, ValueError):
        return math.nan


def experiment3_comparison(table: pd.DataFrame, model: str, metric: str = "student_nll") -> pd.DataFrame:
    """Our search beside the paper's statements for ``model`` and ``metric`` (Figures 2, 6-13):
    the base student's metric, FLOPs and parameters, the best searched student's metric and its
    parameter / FLOP ratios to the base student, which method found it, whether the group
    l1/l2 students beat the exhaustive frontier at their cost, and (NLL) the best group l1/l2
    student at <= 50% of the base FLOPs; beside the comparisons, what they rest on: the lowest skill of the best
    and the base student (:data:`SKILL_QUANTITY`) and (NLL) of that small student and the base
    (:data:`SMALL_SKILL_QUANTITY`), NaN where one has no skill stored. ``paper`` holds the paper's value where it
    states one."""
    check_choice("metric", metric, METRICS)
    rows_model = table[table["model"] == model] if not table.empty else table
    figures = paper_tables.experiment3_figures()
    fig = figures[(figures["model"] == model) & (figures["metric"] == metric)]
    paper_fig = fig.iloc[0] if len(fig) else None
    stated = paper_tables.experiment3_figure2() if (model, metric) == ("cnn_mnist", "student_nll") else {}
    out: list[dict] = []

    def add(quantity: str, ours: Any, paper: Any = math.nan, note: str = "") -> None:
        out.append({"figure": paper_fig["figure"] if paper_fig is not None else "", "model": model, "metric": metric,
                    "quantity": quantity, "ours": ours, "paper": paper, "note": note})

    base = base_student(rows_model, metric_target(metric)) if len(rows_model) else None
    best = best_student(metric_rows(rows_model, metric), metric) if len(rows_model) else None
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
        METHODS[paper_fig["best_method"]] if paper_fig is not None else "", UNFAIR_NOTE)
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
    add(SKILL_QUANTITY, _lowest_skill(best, base), note=SKILL_NOTE)
    cands = search_candidates(metric_rows(rows_model, metric)) if len(rows_model) else rows_model
    if len(cands):
        add("group l1/l2 students better than the exhaustive frontier at their FLOPs",
            group_beats_exhaustive(cands, metric, "flops"), "yes (much better NLL at the same cost)"
            if metric == "student_nll" else "", UNFAIR_NOTE)
    if metric == "student_nll" and base is not None and len(cands):
        cheap = cands[(cands["method"] == "group_lasso") & (cands["flops"] <= 0.5 * base["flops"])]
        add("best group l1/l2 NLL at <= 50% of the base FLOPs",
            float(cheap[metric].min()) if len(cheap) else math.nan, "a small loss vs the base student",
            "none of our pruned students is that small" if cheap.empty else "")
        known = cheap.dropna(subset=[metric])
        add(SMALL_SKILL_QUANTITY, _lowest_skill(known.loc[known[metric].idxmin()], base) if len(known) else math.nan,
            note=SKILL_NOTE)
    return pd.DataFrame(out)


def result_lines(tables: Mapping[str, pd.DataFrame], metrics: Sequence[str] = ("student_nll", "entropy_mae")
                 ) -> list[str]:
    """Markdown bullet lines leading notebook 05: per model's search table (``tables``, by model) and each
    of ``metrics`` its students report (:func:`~.pareto.metric_target`), the base student, the widest grid
    student and the best searched student with its parameter and FLOP ratios to the base, beside the paper's
    ratios for the same figure (:func:`gped_kit.experiments.paper_tables.experiment3_figures`); the best
    group l1/l2 student's metric before pruning and fine-tuning; and (test NLL) how many pruned students
    cost <= 50% of the base's FLOPs and the best of them. A model or metric without searched students
    gives no line."""
    figures = paper_tables.experiment3_figures()
    lines = []
    for model, table in tables.items():
        for metric in metrics:
            check_choice("metric", metric, METRICS)
            target, label = metric_target(metric), METRICS[metric][0]
            rows = table[table["target"] == target] if len(table) else table
            cands, base = search_candidates(rows), base_student(table, target)
            if base is None or cands.empty or cands[metric].isna().all():
                continue
            best = best_student(rows, metric)
            grid = cands[cands["method"] == "exhaustive"]
            widest = grid.loc[grid["params"].idxmax()]
            fig = figures[(figures["model"] == model) & (figures["metric"] == metric)]
            paper = (f" ({fig['figure'].iloc[0]}; the paper's best: {fig['params_ratio'].iloc[0]:g}x / "
                     f"{fig['flops_ratio'].iloc[0]:g}x)") if len(fig) else ""
            lines.append(f"- {model}, {label}: base student {base[metric]:.4f}; the widest grid student "
                         f"({widest['architecture']}) {widest[metric]:.4f}; the best searched student "
                         f"({METHODS[best['method']]}, {best['architecture']}) {best[metric]:.4f}, with "
                         f"{best['params'] / base['params']:.1f}x the base student's parameters and "
                         f"{best['flops'] / base['flops']:.1f}x its FLOPs{paper}.")
            group = rows[rows["method"] == "group_lasso"]
            if best["method"] == "group_lasso":
                before = group.loc[(group["student"] == best["student"]) & (group["stage"] == "distilled"), metric]
                lines.append(f"  Before pruning and fine-tuning it had {before.iloc[0]:.4f}: fine-tuning on the "
                             f"chain's stored estimates changed it by {best[metric] - before.iloc[0]:+.4f}.")
            if metric == "student_nll":
                small = group[(group["stage"] == "fine-tuned") & (group["flops"] <= 0.5 * base["flops"])]
                lines.append(f"  Pruned students at <= 50% of the base student's FLOPs: {len(small)}"
                             + (f", the best at NLL {small[metric].min():.4f} against the base student's "
                                f"{base[metric]:.4f}." if len(small) else "."))
    return lines


def figure_availability(results: Mapping[str, SearchResult], targets: Sequence[str],
                        profile: str = "") -> pd.DataFrame:
    """Which of the paper's Experiment 3 figures (2 and 6-13,
    :func:`gped_kit.experiments.paper_tables.experiment3_figures`) this run can draw, one row per
    figure in the paper's order: ``figure``, ``model``, ``metric``, ``produced`` (bool) and
    ``reason`` (empty when produced). ``results`` maps each model of the run to its
    :class:`SearchResult`; ``targets`` are the distilled targets (the profile's).

    A figure is produced when its model was searched, its search has results, its metric's
    target (:func:`~.pareto.metric_target`: predictive for NLL and accuracy, entropy for the
    entropy MAE) was distilled, and the table holds that metric for some searched student.
    Otherwise ``reason`` says which of these fails: the model is not in the run, its data set
    is absent (status ``missing data``), the search has no results, or the target was not
    distilled in this profile."""
    distilled = [resolve_target(t).name for t in targets]
    where = f"the {profile!r} profile" if profile else "this run"
    models = list(results)
    out = []
    for fig in paper_tables.experiment3_figures().itertuples():
        target, label = metric_target(fig.metric), METRICS[fig.metric][0]
        res = results.get(fig.model)
        reason = ""
        if res is None:
            reason = (f"not produced: {fig.model} is not among the models of {where} ({', '.join(models) or 'none'}); "
                      "add it to `models`")
        elif res.status == Status.MISSING_DATA:
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
    """One sentence on whether the paper's Experiment 3 trend (a searched student beats the base student) appears
    in :func:`experiment3_comparison`'s table, by the README's rule for a search without its fair comparison
    (:func:`~.notebook.search_rows`): a win by a grid student (trained as the base was) is a yes, a loss a no, and a
    win by a group l1/l2 student no evidence (it was fine-tuned and trained without dropout, the base neither;
    the fair comparison, :mod:`.fair`, judges it). A yes or a no counts only where both students it compares are
    known to beat the best constant prediction (:data:`SKILL_QUANTITY`,
    :func:`~gped_kit.experiments.verdicts.unskilled`): else it is no evidence too."""
    rows = comparison.set_index("quantity")
    key = "a searched student beats the base student"
    if key not in rows.index:
        return "No search results to compare (the data set is missing or nothing ran)."
    metric = comparison["metric"].iloc[0]
    label = METRICS[metric][0]
    base = rows.loc[f"base student {label}", "ours"]
    best = rows.loc[f"best searched student {label}", "ours"]
    how = rows.loc["best student found by", "ours"]
    if bool(rows.loc[key, "ours"]) and how == METHODS["group_lasso"]:
        return (f"No evidence here: the best searched student is a {how} student ({label} {best:.3f} against the "
                f"base student's {base:.3f}), fine-tuned and trained without dropout, which the base student was "
                "not; the fair comparison (both fine-tuned alike, without dropout) judges it.")
    skill = stored_skill(rows)
    if unskilled(skill):
        why = (f"the lower of their skills, {skill:.3f}, is below {SKILL_FLOOR}" if not math.isnan(skill)
               else "their skill is not stored")
        return (f"No evidence here: the best searched student ({how}; {label} {best:.3f}) and the base student "
                f"({base:.3f}) are not both known to beat the best constant prediction ({why}), so which of them is "
                "better says nothing of the paper's trend.")
    if bool(rows.loc[key, "ours"]):
        return (f"Yes: the paper's trend appears. The best searched student ({how}) reaches {label} "
                f"{best:.3f} against the base student's {base:.3f}, with "
                f"{rows.loc['best / base parameters', 'ours']:.1f}x its parameters and "
                f"{rows.loc['best / base FLOPs', 'ours']:.1f}x its FLOPs.")
    return (f"No: no searched student beats the base student here ({label} {best:.3f} vs {base:.3f}); "
            "the paper's trend does not appear in this run.")


def below_floor(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """The search outputs (:func:`~.pareto.search_candidates`) of every model's table whose lowest skill over the
    best constant prediction (:func:`~gped_kit.experiments.verdicts.student_skill`) is below
    :data:`~gped_kit.core.targets.SKILL_FLOOR`: ``model``, ``target``, ``method``, ``student``,
    ``architecture``, ``skill``. Such a student learnt next to nothing; no verdict rests on it. A student whose
    skill was not stored (a search made before every student reported it) is listed too, with ``skill`` NaN:
    whether it is below the floor is unknown, and an empty table would read as "none below it"."""
    columns = ["model", "target", "method", "student", "architecture", "skill"]
    parts = []
    for model, table in tables.items():
        cands = search_candidates(table)
        if cands.empty:
            continue
        cands = cands.assign(model=model, skill=student_skill(cands))
        parts.append(cands[(cands["skill"] < SKILL_FLOOR) | cands["skill"].isna()].reindex(columns=columns))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=columns)


def below_floor_line(figures: Path, profile: str = "default") -> str | None:
    """One line for the README's verdict naming the searched students of ``profile`` below the skill floor (the
    table notebook 05 wrote, :func:`below_floor`), and how many more have no skill stored; None when there are
    none or the table is absent."""
    name = BELOW_FLOOR_TABLE.format(profile=profile)
    low = artifact_table(figures, ARTIFACTS["below_floor"], profile=profile)
    if low is None or low.empty:
        return None
    known = low[low["skill"].notna()]
    each = "; ".join(f"{MODELS.get(r.model, r.model)} {r.target} {METHODS.get(r.method, r.method)} "
                     f"{r.architecture} (skill {r.skill:+.3f})" for r in known.itertuples())
    unknown = len(low) - len(known)
    each += ("; " if each else "") + f"{unknown} more with no skill stored" if unknown else ""
    return f"Exp. 3, {profile} profile, below the floor ({link(f'{name}.md', 'table')}): {each}."
