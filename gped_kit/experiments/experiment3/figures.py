"""Experiment 3's figures: one panel (:func:`plot_pareto`) and the four-panel layout (:func:`plot_pareto_figure`)
of Figures 2 and 6-13, the searched students against their cost with their Pareto frontier, and the paper's values
beside them (:func:`pareto_paper_reference`, read from :mod:`gped_kit.experiments.paper_tables`). The frontier is
:func:`gped_kit.experiments.experiment3.pareto_front`'s: the figures compute nothing of the science."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import matplotlib.ticker as mticker
import numpy as np
import pandas as pd
from matplotlib.transforms import blended_transform_factory

from ...plotting.layout import (
    focus_range,
    log_range,
    outside_legend,
    unique_handles,
)
from ...plotting.theme import (
    METHOD_COLORS,
    PAPER_COLOR,
    TEACHER_COLOR,
    style_axes,
    themed,
)
from .. import paper_tables
from .pareto import COSTS, METHODS, METRICS, metric_rows, pareto_front, search_candidates

__all__ = ["PARETO_PAPER_KEYS", "pareto_paper_reference", "plot_pareto", "plot_pareto_figure"]


def _pareto_values(table: pd.DataFrame, metric: str) -> list[float]:
    """Every metric value a panel of :func:`plot_pareto_figure` draws (students, teacher line)."""
    if table.empty or metric not in table:
        return []
    rows = search_candidates(table)
    rows = metric_rows(rows, metric)
    values = list(rows[metric].dropna())
    teach = table[table["method"] == "teacher"]
    if metric != "entropy_mae" and len(teach):
        values += list(teach[metric].dropna().iloc[:1])
    return values


def _mark_off_scale(ax: plt.Axes, rows: pd.DataFrame, metric: str, cost: str) -> None:
    """An arrow at the panel's edge, with the value, for every student outside the y range."""
    low, high = ax.get_ylim()
    trans = blended_transform_factory(ax.transData, ax.transAxes)
    for _, r in rows.iterrows():
        value = float(r[metric])
        if low <= value <= high:
            continue
        above = value > high
        who = (f"λ = {float(r['reg_weight']):g}" if r.get("method") == "group_lasso" and pd.notna(r.get("reg_weight"))
               else str(r.get("student", "")))
        ax.annotate(f"{who}: {value:.3g}\n(off the scale)", xy=(float(r[cost]), 1.0 if above else 0.0),
                    xycoords=trans, xytext=(4, -34 if above else 34), textcoords="offset points",
                    ha="left", va="center", fontsize=8, color=METHOD_COLORS["GPED"],
                    arrowprops=dict(arrowstyle="-|>", color=METHOD_COLORS["GPED"], lw=1.2), annotation_clip=False)


def _within(values: pd.Series, limits: tuple[float, float] | None) -> pd.Series:
    """True where ``values`` lie inside ``limits`` (all True without limits)."""
    if limits is None:
        return pd.Series(True, index=values.index)
    return values.between(min(limits), max(limits))


#: The entries a paper reference of :func:`plot_pareto` may hold (each optional): the paper's teacher
#: ensemble's metric, its base student's, its best searched student's, and the best student's cost
#: as a multiple of the base student's (FLOPs, parameters).
PARETO_PAPER_KEYS = ("teacher", "base_student", "best_student", "best_flops_ratio", "best_params_ratio")
_RATIO_KEYS = {"flops": "best_flops_ratio", "params": "best_params_ratio"}


def pareto_paper_reference(model: str, metric: str) -> dict[str, float]:
    """The paper's reference values of the Pareto figure of ``model`` and ``metric`` (Figures 2, 6-13), for
    the ``paper`` argument of :func:`plot_pareto_figure` (keys of :data:`PARETO_PAPER_KEYS`): the optimal
    student's parameters and FLOPs as multiples of the base student's, which every caption gives
    (:func:`~gped_kit.experiments.paper_tables.experiment3_figures`), and for Figure 2 (CNN-MNIST, test NLL)
    the values its text gives (:func:`~gped_kit.experiments.paper_tables.experiment3_figure2`): the teacher
    ensemble 0.267 (Table 5 at that cell), the base student 0.469, the best searched student 0.30. Empty
    where the paper has no such figure."""
    figures = paper_tables.experiment3_figures()
    row = figures[(figures["model"] == model) & (figures["metric"] == metric)]
    if row.empty:
        return {}
    out = {"best_flops_ratio": float(row["flops_ratio"].iloc[0]),
           "best_params_ratio": float(row["params_ratio"].iloc[0])}
    if (model, metric) == ("cnn_mnist", "student_nll"):
        stated = paper_tables.experiment3_figure2()
        out.update(teacher=stated["teacher_nll"], base_student=stated["base_student_nll"],
                   best_student=stated["searched_nll"])
    return out


def _check_paper_reference(paper: Mapping[str, float] | None) -> dict[str, float]:
    paper = dict(paper or {})
    unknown = sorted(set(paper) - set(PARETO_PAPER_KEYS))
    if unknown:
        raise ValueError(f"paper has unknown entries {unknown}; allowed: {list(PARETO_PAPER_KEYS)} "
                         "(e.g. pareto_paper_reference(model, metric))")
    return {k: float(v) for k, v in paper.items() if v is not None and np.isfinite(float(v))}


def _base_cost(table: pd.DataFrame, metric: str, cost: str) -> float | None:
    """Our base student's ``cost`` (the exhaustive search's student of the teacher's architecture)."""
    if table.empty or cost not in table:
        return None
    base = metric_rows(table[(table["method"] == "exhaustive") & table["is_base"].astype(bool)], metric)
    base = base.dropna(subset=[cost])
    return float(base[cost].iloc[0]) if len(base) else None


def _paper_best_cost(table: pd.DataFrame, metric: str, cost: str, paper: Mapping[str, float]) -> float | None:
    """Where the paper's best student goes on our ``cost`` axis: its ratio to the base student times our base's."""
    ratio, base = paper.get(_RATIO_KEYS[cost]), _base_cost(table, metric, cost)
    return ratio * base if ratio is not None and base is not None else None


def _ratio_text(paper: Mapping[str, float]) -> str:
    parts = [f"{paper[k]:g}× the base's {what}" for k, what in (("best_flops_ratio", "FLOPs"),
                                                                ("best_params_ratio", "parameters")) if k in paper]
    return ", ".join(parts)


def _draw_paper_reference(ax: plt.Axes, table: pd.DataFrame, metric: str, cost: str, method: str | None,
                          paper: Mapping[str, float]) -> None:
    """The paper's values (:func:`pareto_paper_reference`) in the paper's colour: its teacher ensemble as a
    dash-dotted horizontal line, its base student as an open square at our base student's cost, and (in
    a group l1/l2 panel, the search that found it) its best student as an open star at its cost ratio
    times our base's, or, where the paper gives no value for it, a dash-dotted vertical line there."""
    if "teacher" in paper:
        ax.axhline(paper["teacher"], color=PAPER_COLOR, ls="-.", lw=1.4,
                   label=f"the paper's teacher ensemble ({paper['teacher']:.3g})")
    base = _base_cost(table, metric, cost)
    if "base_student" in paper and base is not None:
        ax.plot([base], [paper["base_student"]], ls="none", marker="s", ms=10, mew=1.8, mfc="none", mec=PAPER_COLOR,
                label=f"the paper's base student ({paper['base_student']:.3g}; at our base student's cost)", zorder=6)
    best = _paper_best_cost(table, metric, cost, paper)
    if method == "group_lasso" and best is not None:
        if "best_student" in paper:
            ax.plot([best], [paper["best_student"]], ls="none", marker="*", ms=14, mew=1.6, mfc="none",
                    mec=PAPER_COLOR, zorder=6,
                    label=f"the paper's best student ({paper['best_student']:.3g}; {_ratio_text(paper)})")
        else:
            ax.axvline(best, color=PAPER_COLOR, ls="-.", lw=1.4,
                       label=f"the paper's best student's cost ({_ratio_text(paper)})")


@themed
def plot_pareto(table: pd.DataFrame, metric: str, cost: str, method: str | None = None, ax: plt.Axes | None = None,
                highlight: str | None = None, title: str | None = None, teacher: bool = True,
                ylim: tuple[float, float] | None = None, xlim: tuple[float, float] | None = None,
                paper: Mapping[str, float] | None = None) -> plt.Axes:
    """One panel of Figures 2 and 6-13 (Experiment 3): ``metric`` of the searched students against
    ``cost`` for one search ``method`` (``"exhaustive"``, ``"group_lasso"``, or None for both).

    ``table`` is a search table (:func:`gped_kit.experiments.experiment3.load_search_results`).
    Drawn as in the paper:
    "IS" every individual student (dots), "S" their Pareto frontier (solid blue line, a step:
    the best metric reachable at each cost), "T" the teacher ensemble's metric (dotted
    horizontal line; NLL and accuracy only: the teacher is the reference of the entropy MAE),
    the base student (architecture = teacher's) as a black square, and a black dashed vertical
    line at its cost. ``highlight`` (a student label) is ringed in red. Costs on a log axis. In a
    group l1/l2 panel the exhaustive search's frontier is drawn faintly (grey dashes) for comparison.
    ``ylim`` fixes the metric axis: a student outside it is not drawn (nor the frontier's step to
    it) but marked by an arrow at the edge with its value. ``xlim`` fixes the cost axis (e.g. the
    same for the panels of one figure).

    ``paper`` (optional; :func:`pareto_paper_reference`, keys :data:`PARETO_PAPER_KEYS`) adds the paper's
    values in the paper's colour, labelled "the paper's": its teacher ensemble (dash-dotted line), its
    base student (an open square at our base student's cost) and, in a group l1/l2 panel, its best
    student (an open star at its cost ratio to the base student times our base's cost; without a
    value, a dash-dotted vertical line at that cost).
    """
    if metric not in METRICS:
        raise ValueError(f"metric={metric!r} is not known; allowed: {sorted(METRICS)}")
    if cost not in COSTS:
        raise ValueError(f"cost={cost!r} is not known; allowed: {sorted(COSTS)}")
    paper = _check_paper_reference(paper)
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 4), layout="constrained")
    else:
        style_axes(ax)
    student_colour = METHOD_COLORS["GPED"]
    rows = search_candidates(table, method)
    rows = metric_rows(rows, metric).dropna(subset=[metric, cost]) if len(rows) else rows
    if len(rows):
        shown = rows[_within(rows[metric], ylim)]
        ax.scatter(shown[cost], shown[metric], s=22, color="0.55", alpha=0.8, label="IS: individual students",
                   zorder=3)
        front = pareto_front(rows, metric, cost)
        front = front[_within(front[metric], ylim)]
        ax.step(front[cost], front[metric], where="post", color=student_colour, lw=2, marker="o", ms=5,
                label="S: Pareto frontier", zorder=4)
    else:
        ax.text(0.5, 0.5, "no students of this kind\nin this run", transform=ax.transAxes, ha="center",
                va="center", color="0.4")
    if not table.empty:
        base = metric_rows(table[(table["method"] == "exhaustive") & table["is_base"].astype(bool)],
                           metric).dropna(subset=[metric, cost])
        if len(base):
            ax.axvline(base[cost].iloc[0], color="black", ls="--", lw=1.2, label="base student's cost")
            base = base[_within(base[metric], ylim)]
            if len(base):
                ax.scatter(base[cost], base[metric], marker="s", s=60, color="black", zorder=5, label="base student")
        teach = table[table["method"] == "teacher"]
        if teacher and metric != "entropy_mae" and len(teach) and teach[metric].notna().any():
            value = float(teach[metric].dropna().iloc[0])
            if ylim is None or min(ylim) <= value <= max(ylim):
                samples = int(teach["teacher_samples"].iloc[0]) if "teacher_samples" in teach else 0
                ax.axhline(value, color=TEACHER_COLOR, ls=":", lw=2, label=f"T: teacher ensemble ({samples} samples)")
        if highlight is not None:
            sel = table[(table["student"] == highlight)]
            sel = search_candidates(sel) if len(sel) else sel
            sel = sel.dropna(subset=[metric, cost]) if len(sel) else sel
            sel = sel[_within(sel[metric], ylim)] if len(sel) else sel
            if len(sel):
                ax.scatter(sel[cost], sel[metric], s=220, facecolors="none", edgecolors="red", linewidths=2,
                           zorder=6)
    if method == "group_lasso" and not table.empty:
        exhaustive = search_candidates(table, "exhaustive")
        exhaustive = metric_rows(exhaustive, metric).dropna(subset=[metric, cost])
        if len(exhaustive):
            ex_front = pareto_front(exhaustive, metric, cost)
            ex_front = ex_front[_within(ex_front[metric], ylim)]
            ax.step(ex_front[cost], ex_front[metric], where="post", color="0.6", lw=1, ls="--",
                    label="exhaustive frontier (for comparison)", zorder=2)
    if paper:
        _draw_paper_reference(ax, table, metric, cost, method, paper)
    if len(rows) or not table.empty:
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(mticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(mticker.EngFormatter(sep=""))
        ax.xaxis.set_minor_formatter(mticker.NullFormatter())
    if xlim is None and ylim is not None and len(rows) and not _within(rows[metric], ylim).all():
        wanted = log_range(rows[cost])  # the off-scale students' arrows point at their costs: keep those in the panel
        if wanted is not None:
            shown = ax.get_xlim()
            xlim = (min(shown[0], wanted[0]), max(shown[1], wanted[1]))
    if xlim is not None:
        ax.set_xlim(*xlim)
    if ylim is not None:
        ax.set_ylim(*ylim)
        if len(rows):
            _mark_off_scale(ax, rows, metric, cost)
    ax.set(xlabel=COSTS[cost], ylabel=METRICS[metric][0],
           title=title if title is not None else (METHODS[method] if method else "both search methods"))
    return ax


@themed
def plot_pareto_figure(table: pd.DataFrame, metric: str, title: str = "",
                       paper: Mapping[str, float] | None = None) -> plt.Figure:
    """Figures 2 and 6-13 laid out as in the paper: (a) ``metric`` vs FLOPs, exhaustive search;
    (b) vs FLOPs, group l1/l2 with pruning; (c) vs parameters, exhaustive; (d) vs parameters,
    group l1/l2; shared metric axis, and one cost range per row (the panels of a row compare the
    two searches at the same costs). ``table`` holds one model's search table.

    The shared metric axis shows the region where the students and the teacher are: a student far
    from all others (e.g. a group l1/l2 student with a large lambda, pruned to a few units) would
    stretch it to where the differences between the others vanish, so it is left off the scale
    (neither it nor the frontier's step to it is drawn) and marked by an arrow at the panel's edge
    with its value.

    ``paper`` (optional; :func:`pareto_paper_reference`) adds the paper's values to every panel
    (:func:`plot_pareto`); the axes are widened to show them."""
    paper = _check_paper_reference(paper)
    fig, axes = plt.subplots(2, 2, figsize=(11, 8.5), sharey=True, layout="constrained")
    ylim = focus_range(_pareto_values(table, metric))
    teach = table[table["method"] == "teacher"] if not table.empty else table
    kept = [float(teach[metric].dropna().iloc[0])] if (  # the teacher's line stays on the scale
        metric != "entropy_mae" and len(teach) and teach[metric].notna().any()) else []
    kept += [paper[k] for k in ("teacher", "base_student", "best_student") if k in paper]
    if ylim is not None and kept:
        pad = 0.05 * (ylim[1] - ylim[0])
        ylim = (min(ylim[0], min(kept) - pad), max(ylim[1], max(kept) + pad))
    candidates = search_candidates(table) if not table.empty else table
    candidates = metric_rows(candidates, metric)
    letters = iter("abcd")
    for row, cost in enumerate(("flops", "params")):
        costs = list(candidates[cost].dropna()) if len(candidates) and cost in candidates else []
        best = _paper_best_cost(table, metric, cost, paper) if paper else None
        xlim = log_range(costs + ([best] if best is not None and costs else []))
        for col, method in enumerate(("exhaustive", "group_lasso")):
            ax = axes[row][col]
            name = "exhaustive search" if method == "exhaustive" else "group l1/l2 with pruning"
            plot_pareto(table, metric, cost, method, ax=ax, title=f"({next(letters)}) {name}", ylim=ylim, xlim=xlim,
                        paper=paper)
    outside_legend(fig, *unique_handles(axes.flat), where="lower", ncol=3)
    if title:
        fig.suptitle(title)
    return fig
