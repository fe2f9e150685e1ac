"""Figures shared by the notebooks; every figure is saved to ``figures/`` as PNG and PDF.

Plots draw tables and tensors that the experiments computed (a chain's history, an
Experiment 2 cells table, an Experiment 3 search table, uncertainties on a grid); they compute
nothing of the science themselves: the Pareto frontier of Figures 2 and 6-13 is
:func:`gped_kit.experiments.experiment3.pareto_front`'s.

Every function draws in the kit's one theme (:mod:`gped_kit.viz.theme`: fonts, grid, palette, one
colour per method), applied while it draws and undone when it returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import matplotlib.ticker as mticker
import numpy as np
import pandas as pd
import torch
from matplotlib.lines import Line2D
from matplotlib.patches import Circle
from matplotlib.patheffects import withStroke
from matplotlib.transforms import blended_transform_factory

from ..core.uncertainty import Uncertainties
from ..experiments.experiment3 import COSTS, METHODS, METRIC_TARGET, METRICS, pareto_front, search_candidates
from .tables import markdown_table
from .theme import (
    CLASS_COLORS,
    METHOD_COLORS,
    PALETTE,
    PAPER_COLOR,
    TEACHER_COLOR,
    kit_theme,
    method_color,
    method_colors,
    sequential_colors,
    style_axes,
    themed,
)

__all__ = [
    "EXPERIMENT2_METRICS", "METHOD_COLORS", "plot_comparison", "plot_data_uncertainty_joint",
    "plot_entropy_agreement", "plot_experiment2_vs_paper", "plot_experiment4_in_distribution",
    "plot_learning_curves", "plot_pareto", "plot_pareto_figure", "plot_sampler_study", "plot_uncertainty_grid",
    "plot_uncertainty_maps", "save_figure", "save_table",
]


def save_figure(fig: plt.Figure, name: str, figures_dir: str | Path) -> list[Path]:
    """Save ``fig`` as ``<figures_dir>/<name>.png`` and ``.pdf``; returns the paths."""
    figures_dir = Path(figures_dir)
    figures_dir.mkdir(parents=True, exist_ok=True)
    paths = [figures_dir / f"{name}.{ext}" for ext in ("png", "pdf")]
    with kit_theme():
        for path in paths:
            fig.savefig(path, bbox_inches="tight", dpi=150)
    return paths


def save_table(table: pd.DataFrame, name: str, figures_dir: str | Path, floatfmt: str = ".3f") -> list[Path]:
    """Save ``table`` as ``<figures_dir>/<name>.csv`` and ``.md`` (Markdown, missing values as "—");
    returns the paths."""
    figures_dir = Path(figures_dir)
    figures_dir.mkdir(parents=True, exist_ok=True)
    csv, md = figures_dir / f"{name}.csv", figures_dir / f"{name}.md"
    table.to_csv(csv, index=False)
    md.write_text(markdown_table(table, floatfmt=floatfmt))
    return [csv, md]


def _outside_legend(fig: plt.Figure, handles: list, labels: list[str], where: str = "right", **kwargs) -> None:
    """One legend for the whole figure, outside the axes (constrained layout makes room for it)."""
    if not handles:
        return
    if where == "right":
        fig.legend(handles, labels, loc="outside right center", **kwargs)
    else:
        fig.legend(handles, labels, loc=f"outside {where} center", ncol=kwargs.pop("ncol", min(len(labels), 5)),
                   **kwargs)


def _unique_handles(axes: Sequence[plt.Axes]) -> tuple[list, list[str]]:
    handles: dict[str, object] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if not lab.startswith("_") and lab not in handles:
                handles[lab] = h
    return list(handles.values()), list(handles)


@themed
def plot_learning_curves(history: pd.DataFrame) -> plt.Figure:
    """Teacher-ensemble vs student test NLL and accuracy, and entropy MAE, against SGLD iterations;
    one colour per student (its method's colour), one legend for the figure."""
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8), layout="constrained")
    teacher = (history.drop_duplicates("step").dropna(subset=["teacher_nll"]) if "teacher_nll" in history
               else history.iloc[:0])
    students = list(dict.fromkeys(history["student"].dropna())) if "student" in history else []
    colours = method_colors(students)
    for ax, metric, label in ((axes[0], "nll", "test NLL"), (axes[1], "accuracy", "test accuracy")):
        if len(teacher):
            ax.plot(teacher["step"], teacher[f"teacher_{metric}"], "-", color=TEACHER_COLOR, lw=2.5,
                    label="teacher ensemble")
        col = f"student_{metric}"
        if col in history:
            for name, rows in history.dropna(subset=[col]).groupby("student", sort=False):
                ax.plot(rows["step"], rows[col], "o-", ms=3, color=colours.get(name), label=f"student {name}")
        ax.set(xlabel="SGLD iteration t", ylabel=label, title=label)
    if "entropy_mae" in history:
        for name, rows in history.dropna(subset=["entropy_mae"]).groupby("student", sort=False):
            axes[2].plot(rows["step"], rows["entropy_mae"], "o-", ms=3, color=colours.get(name),
                         label=f"student {name}")
    axes[2].set(xlabel="SGLD iteration t", ylabel="expected-entropy MAE (nats)", title="expected-entropy MAE")
    _outside_legend(fig, *_unique_handles(axes))
    return fig


@themed
def plot_entropy_agreement(teacher_entropy: torch.Tensor, student_entropy: torch.Tensor,
                           title: str = "") -> plt.Figure:
    """Student vs teacher expected data uncertainty E[H[p(y|x,theta)]] per test input."""
    t, s = teacher_entropy.flatten().numpy(), student_entropy.flatten().numpy()
    fig, ax = plt.subplots(figsize=(4.5, 4.5), layout="constrained")
    ax.scatter(t, s, s=3, alpha=0.3, color=METHOD_COLORS["GPED"])
    top = float(max(t.max(), s.max())) * 1.05
    ax.plot([0, top], [0, top], "--", color=TEACHER_COLOR, lw=1)
    ax.set(xlim=(0, top), ylim=(0, top), xlabel="teacher ensemble (nats)", ylabel="student (nats)",
           title=title or "expected entropy on the test set")
    return fig


EXPERIMENT2_METRICS = {
    "teacher_nll": "teacher test NLL",
    "nll_gap": "student - teacher NLL",
    "entropy_mae": "expected-entropy MAE",
}

_AXIS_NAMES = {"masking_rate": "masking rate", "labelled_size": "labelled-set size N", "mask_size": "mask size m"}
_ESTIMATOR_NAMES = {"U_o": r"$U_o$ (running mean)", "U_s": r"$U_s$ (single sample)"}
_DASHES = ("-", "--", ":", "-.")


def _level_name(column: str, value) -> str:
    if column == "labelled_size":
        return f"N = {int(value):,}"
    if column == "estimator":
        return _ESTIMATOR_NAMES.get(str(value), str(value))
    if column == "masking_rate":
        return f"r = {float(value):.2f}"
    return f"{_AXIS_NAMES.get(column, column.replace('_', ' '))} {value}"


def _grid_styles(tables: Sequence[pd.DataFrame], hue: str | None, style: str | None) -> tuple[dict, dict]:
    """Colours per ``hue`` level and line styles per ``style`` level, shared by every table drawn."""
    hue_levels = sorted(set().union(*(t[hue].dropna().unique() for t in tables))) if hue else []
    style_levels = sorted(set().union(*(t[style].dropna().unique() for t in tables))) if style else []
    return (dict(zip(hue_levels, sequential_colors(len(hue_levels)))),
            {v: _DASHES[i % len(_DASHES)] for i, v in enumerate(style_levels)})


def _grid_legend(hue: str | None, style: str | None, colours: dict, dashes: dict) -> tuple[list, list[str]]:
    handles, labels = [], []
    for value, colour in colours.items():
        handles.append(Line2D([], [], color=colour, marker="o", ms=5, lw=2))
        labels.append(_level_name(hue, value))
    for value, ls in dashes.items():
        handles.append(Line2D([], [], color="0.3", ls=ls, lw=2))
        labels.append(_level_name(style, value))
    return handles, labels


def _draw_grid(axes: Sequence[plt.Axes], table: pd.DataFrame, x: str, hue: str | None, style: str | None,
               metrics: dict[str, str], colours: dict, dashes: dict, highlight: dict | None) -> None:
    keys = [c for c in (hue, style) if c]
    for ax, (metric, label) in zip(axes, metrics.items()):
        rows = table.dropna(subset=[metric]) if metric in table else table.iloc[:0]
        groups = rows.groupby(keys, sort=True) if keys and len(rows) else ([((), rows)] if len(rows) else [])
        for key, part in groups:
            key = key if isinstance(key, tuple) else (key,)
            level = dict(zip(keys, key))
            curve = part.groupby(x)[metric].mean()
            ax.plot(curve.index, curve.to_numpy(), marker="o", ms=4,
                    color=colours.get(level.get(hue), PALETTE[0]) if hue else PALETTE[0],
                    ls=dashes.get(level.get(style), "-") if style else "-")
        if highlight is not None and len(rows):
            sel = rows
            for key, value in highlight.items():
                sel = sel[sel[key] == value]
            ax.scatter(sel[x], sel[metric], s=180, facecolors="none", edgecolors="red", linewidths=2, zorder=5)
        if x == "labelled_size" and len(rows):
            levels = sorted(rows[x].unique())
            ax.set_xticks(levels, [f"{int(v / 1000)}k" if v % 1000 == 0 else f"{int(v):,}" for v in levels])
        ax.set(xlabel=_AXIS_NAMES.get(x, x.replace("_", " ")), ylabel=label)


@themed
def plot_uncertainty_grid(table: pd.DataFrame, x: str = "masking_rate", hue: str = "labelled_size",
                          metrics: dict[str, str] | None = None, highlight: dict | None = None,
                          style: str | None = None, axes: Sequence[plt.Axes] | None = None,
                          legend: str | None = "auto") -> plt.Figure:
    """Figures 1, 4 and 5 of the paper: one panel per metric against ``x`` (masking rate or
    labelled-set size), one line per ``hue`` value; ``style`` (e.g. ``"estimator"``) draws a
    line style per value. ``table`` has one row per (cell, estimator) with the metric columns.
    ``highlight={x: value, hue: value}`` rings that cell's points in every panel.

    ``legend``: ``"figure"`` one legend for the figure, outside the axes on the right (the
    default when this function makes the figure), ``"axes"`` one legend beside the last of the
    given ``axes`` (the default when ``axes`` are given), None no legend.
    """
    metrics = metrics or EXPERIMENT2_METRICS
    hue = None if hue == x else hue
    if axes is None:
        fig, axes = plt.subplots(1, len(metrics), figsize=(4.3 * len(metrics) + 1.6, 3.6), layout="constrained")
        legend = "figure" if legend == "auto" else legend
    else:
        fig = axes[0].figure
        for ax in axes:
            style_axes(ax)
        legend = "axes" if legend == "auto" else legend
    colours, dashes = _grid_styles([table], hue, style)
    _draw_grid(axes, table, x, hue, style, metrics, colours, dashes, highlight)
    handles, labels = _grid_legend(hue, style, colours, dashes)
    if legend == "figure":
        _outside_legend(fig, handles, labels)
    elif legend == "axes" and handles:
        axes[len(metrics) - 1].legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                                      borderaxespad=0.0)
    return fig


@themed
def plot_experiment2_vs_paper(ours: pd.DataFrame, paper: pd.DataFrame, x: str = "masking_rate",
                              title: str = "") -> plt.Figure:
    """Figures 1/4/5 layout, ours (top row) above the paper's numbers from Tables 5-7 (bottom
    row), same metrics and axes (shared y range per metric); one line per labelled-set size, line
    style per estimator, one legend for the figure. Without any result of ours (e.g. CIFAR-10
    absent) only the paper's row is drawn, labelled as the paper's."""
    metrics = EXPERIMENT2_METRICS
    hue = None if x == "labelled_size" else "labelled_size"
    have_ours = len(ours) > 0 and any(m in ours and ours[m].notna().any() for m in metrics)
    tables = [ours, paper] if have_ours else [paper]
    colours, dashes = _grid_styles(tables, hue, "estimator")
    names = sorted(paper["table"].dropna().unique()) if "table" in paper else []
    paper_label = "the paper's " + (", ".join(names) if names else "Tables 5-7")
    ncols = len(metrics)
    fig = plt.figure(figsize=(4.3 * ncols + 2.2, 3.7 * len(tables) + (0.5 if title else 0)), layout="constrained")
    rows = fig.subfigures(len(tables), 1, squeeze=False)[:, 0]
    axes = []
    labels = ["ours", paper_label] if have_ours else [f"{paper_label} (no results of ours to show)"]
    for subfig, table, label in zip(rows, tables, labels):
        row_axes = subfig.subplots(1, ncols, sharex=True)
        _draw_grid(row_axes, table, x, hue, "estimator", metrics, colours, dashes, None)
        subfig.suptitle(label, fontsize=12, x=0.02, ha="left", fontweight="bold")
        axes.append(row_axes)
    if have_ours:
        for ax_ours, ax_paper in zip(axes[0], axes[1]):
            low = min(ax_ours.get_ylim()[0], ax_paper.get_ylim()[0])
            high = max(ax_ours.get_ylim()[1], ax_paper.get_ylim()[1])
            ax_ours.set_ylim(low, high)
            ax_paper.set_ylim(low, high)
    _outside_legend(fig, *_grid_legend(hue, "estimator", colours, dashes))
    if title:
        fig.suptitle(title)
    return fig


@themed
def plot_experiment4_in_distribution(comparison: pd.DataFrame, title: str = "") -> plt.Figure:
    """Figure 14: test accuracy and NLL of the ensemble, GPED and EnD2 students per
    (estimator, student size), one row per model; the paper's NLL (Tables 2, 8-10) as black
    crosses. ``comparison`` is Experiment 4's in-distribution comparison table (one row per model,
    method, estimator, student size and metric, with ``value`` and ``value_paper``)."""
    models = list(dict.fromkeys(comparison["model"]))
    fig, axes = plt.subplots(len(models), 2, figsize=(13, 3.6 * len(models) + 0.6), squeeze=False,
                             layout="constrained")
    methods = [m for m in ("Ensemble", "GPED", "EnD2") if m in set(comparison["method"])]
    methods += [m for m in dict.fromkeys(comparison["method"]) if m not in methods]
    for row, model in zip(axes, models):
        df = comparison[comparison["model"] == model].copy()
        df["setting"] = df["estimator"] + ", " + df["student"].str.replace("largest_width_multiplier", "largest")
        settings = list(dict.fromkeys(df.sort_values(["student", "estimator"])["setting"]))
        width = 0.8 / len(methods)
        for ax, metric, label in ((row[0], "accuracy", "test accuracy"), (row[1], "nll", "test NLL")):
            ax.grid(axis="x", visible=False)
            for j, method in enumerate(methods):
                sel = df[(df["metric"] == metric) & (df["method"] == method)].set_index("setting")
                xs = [i + (j - (len(methods) - 1) / 2) * width for i in range(len(settings))]
                bars = ax.bar(xs, [sel["value"].get(s, float("nan")) for s in settings], width,
                              color=method_color(method), label=f"{method} (ours)")
                ax.bar_label(bars, fmt="%.3f", fontsize=6, rotation=90, padding=2)
                paper = [sel["value_paper"].get(s, float("nan")) for s in settings] if "value_paper" in sel else []
                if metric == "nll" and any(pd.notna(paper)):
                    ax.plot(xs, paper, "x", color=PAPER_COLOR, ms=8, mew=2, label="paper" if j == 0 else None,
                            path_effects=[withStroke(linewidth=4, foreground="white")])
            ax.set_xticks(range(len(settings)), settings, fontsize=9)
            ax.set(ylabel=label, title=f"{model}: {label}")
            # bars start at zero (a cut axis makes 0.83 vs 0.80 look twofold); the labels give the values
            ax.set_ylim(0.0, 1.15 if metric == "accuracy" else ax.get_ylim()[1] * 1.15)
    _outside_legend(fig, *_unique_handles(axes.flat), where="lower")
    if title:
        fig.suptitle(title)
    return fig


@themed
def plot_data_uncertainty_joint(ensemble: torch.Tensor, students: dict[str, torch.Tensor],
                                title: str = "") -> plt.Figure:
    """Figure 15: per test input, a student's expected data uncertainty E[H] against the teacher
    ensemble's (joint density as hexbins in the shades of the student's method, diagonal = perfect
    distillation), with the marginal histograms of the ensemble (top, grey) and of the student
    (right, its method's colour; the ensemble's in grey)."""
    t = ensemble.flatten().double().numpy()
    top = float(max([t.max(), *[s.max().item() for s in students.values()]])) * 1.02
    fig = plt.figure(figsize=(5.2 * len(students), 5.2))
    outer = fig.add_gridspec(1, len(students), wspace=0.3)
    bins = 40
    for k, (name, values) in enumerate(students.items()):
        s = values.flatten().double().numpy()
        grid = outer[k].subgridspec(2, 2, width_ratios=(4, 1), height_ratios=(1, 4), wspace=0.05, hspace=0.05)
        ax = fig.add_subplot(grid[1, 0])
        ax_top = fig.add_subplot(grid[0, 0], sharex=ax)
        ax_right = fig.add_subplot(grid[1, 1], sharey=ax)
        cmap = {"GPED": "Blues", "EnD2": "Oranges", "Hydra": "Greens", "KD": "Purples"}.get(
            next((f for f in ("GPED", "EnD2", "Hydra", "KD") if method_color(name) == method_color(f)), ""), "Greys")
        ax.hexbin(t, s, gridsize=40, extent=(0, top, 0, top), bins="log", cmap=cmap, mincnt=1)
        ax.plot([0, top], [0, top], "k--", lw=1)
        ax.set(xlim=(0, top), ylim=(0, top), xlabel="ensemble E[H] (nats)", ylabel=f"{name} E[H] (nats)")
        ax_top.hist(t, bins=bins, range=(0, top), color="0.55")
        ax_right.hist(t, bins=bins, range=(0, top), orientation="horizontal", color="0.8", label="ensemble")
        ax_right.hist(s, bins=bins, range=(0, top), orientation="horizontal", histtype="step", lw=1.5,
                      color=method_color(name), label=name)
        for a in (ax_top, ax_right):
            a.grid(False)
            a.spines[:].set_visible(False)
        ax_top.tick_params(labelbottom=False, labelleft=False, left=False)
        ax_right.tick_params(labelleft=False, labelbottom=False, bottom=False)
        ax_top.set_title(name)
    if title:
        fig.suptitle(title, y=1.02)
    return fig


# ----------------------------------------------------------------------------- Experiment 3
def _focus_range(values: Sequence[float], factor: float = 1.0) -> tuple[float, float] | None:
    """The y range that shows ``values`` except isolated extremes (None when nothing is isolated):
    the largest (smallest) value is dropped while its gap to the next one exceeds ``factor`` times
    the span of the values kept, at most a quarter of them; the range is the kept span, padded."""
    v = np.sort(np.asarray([x for x in values if np.isfinite(x)], dtype=float))
    if len(v) < 4:
        return None
    lo, hi, budget = 0, len(v), max(1, len(v) // 4)
    while budget > 0 and hi - lo > 3:
        span_top, span_bottom = v[hi - 2] - v[lo], v[hi - 1] - v[lo + 1]
        if v[hi - 1] - v[hi - 2] > factor * max(span_top, 1e-12):
            hi -= 1
        elif v[lo + 1] - v[lo] > factor * max(span_bottom, 1e-12):
            lo += 1
        else:
            break
        budget -= 1
    if lo == 0 and hi == len(v):
        return None
    kept_lo, kept_hi = v[lo], v[hi - 1]
    pad = 0.08 * max(kept_hi - kept_lo, 1e-9)
    # extra room on the side of the dropped values, for their arrows and labels
    return (kept_lo - pad - (2.5 * pad if lo > 0 else 0), kept_hi + pad + (2.5 * pad if hi < len(v) else 0))


def _pareto_values(table: pd.DataFrame, metric: str) -> list[float]:
    """Every metric value a panel of :func:`plot_pareto_figure` draws (students, teacher line)."""
    if table.empty or metric not in table:
        return []
    rows = search_candidates(table)
    rows = rows[rows["target"] == METRIC_TARGET[metric]] if len(rows) else rows
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


@themed
def plot_pareto(table: pd.DataFrame, metric: str, cost: str, method: str | None = None, ax: plt.Axes | None = None,
                highlight: str | None = None, title: str | None = None, teacher: bool = True,
                ylim: tuple[float, float] | None = None) -> plt.Axes:
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
    ``ylim`` fixes the metric axis; a student outside it is marked by an arrow at the edge with its value.
    """
    if metric not in METRICS:
        raise ValueError(f"metric={metric!r} is not known; allowed: {sorted(METRICS)}")
    if cost not in COSTS:
        raise ValueError(f"cost={cost!r} is not known; allowed: {sorted(COSTS)}")
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 4), layout="constrained")
    else:
        style_axes(ax)
    student_colour = METHOD_COLORS["GPED"]
    rows = search_candidates(table, method)
    rows = rows[rows["target"] == METRIC_TARGET[metric]].dropna(subset=[metric, cost]) if len(rows) else rows
    if len(rows):
        ax.scatter(rows[cost], rows[metric], s=22, color="0.55", alpha=0.8, label="IS: individual students",
                   zorder=3)
        front = pareto_front(rows, metric, cost)
        ax.step(front[cost], front[metric], where="post", color=student_colour, lw=2, marker="o", ms=5,
                label="S: Pareto frontier", zorder=4)
    else:
        ax.text(0.5, 0.5, "no students of this kind\nin this run", transform=ax.transAxes, ha="center",
                va="center", color="0.4")
    if not table.empty:
        base = table[(table["method"] == "exhaustive") & table["is_base"].astype(bool)
                     & (table["target"] == METRIC_TARGET[metric])].dropna(subset=[metric, cost])
        if len(base):
            ax.axvline(base[cost].iloc[0], color="black", ls="--", lw=1.2, label="base student's cost")
            ax.scatter(base[cost], base[metric], marker="s", s=60, color="black", zorder=5, label="base student")
        teach = table[table["method"] == "teacher"]
        if teacher and metric != "entropy_mae" and len(teach) and teach[metric].notna().any():
            samples = int(teach["teacher_samples"].iloc[0]) if "teacher_samples" in teach else 0
            ax.axhline(float(teach[metric].iloc[0]), color=TEACHER_COLOR, ls=":", lw=2,
                       label=f"T: teacher ensemble ({samples} samples)")
        if highlight is not None:
            sel = table[(table["student"] == highlight)]
            sel = search_candidates(sel) if len(sel) else sel
            sel = sel.dropna(subset=[metric, cost]) if len(sel) else sel
            if len(sel):
                ax.scatter(sel[cost], sel[metric], s=220, facecolors="none", edgecolors="red", linewidths=2,
                           zorder=6)
    if method == "group_lasso" and not table.empty:
        exhaustive = search_candidates(table, "exhaustive")
        exhaustive = exhaustive[exhaustive["target"] == METRIC_TARGET[metric]].dropna(subset=[metric, cost])
        if len(exhaustive):
            ex_front = pareto_front(exhaustive, metric, cost)
            ax.step(ex_front[cost], ex_front[metric], where="post", color="0.6", lw=1, ls="--",
                    label="exhaustive frontier (for comparison)", zorder=2)
    if len(rows) or not table.empty:
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(mticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(mticker.EngFormatter(sep=""))
        ax.xaxis.set_minor_formatter(mticker.NullFormatter())
    if ylim is not None:
        ax.set_ylim(*ylim)
        if len(rows):
            _mark_off_scale(ax, rows, metric, cost)
    ax.set(xlabel=COSTS[cost], ylabel=METRICS[metric][0],
           title=title if title is not None else (METHODS[method] if method else "both search methods"))
    return ax


@themed
def plot_pareto_figure(table: pd.DataFrame, metric: str, title: str = "") -> plt.Figure:
    """Figures 2 and 6-13 laid out as in the paper: (a) ``metric`` vs FLOPs, exhaustive search;
    (b) vs FLOPs, group l1/l2 with pruning; (c) vs parameters, exhaustive; (d) vs parameters,
    group l1/l2; shared metric axis. ``table`` holds one model's search table.

    The shared metric axis shows the region where the students are: a student far from all others
    (e.g. a group l1/l2 student with a large lambda, pruned to a few units) would stretch it to
    where the differences between the others vanish, so it is left off the scale and marked by an
    arrow at the panel's edge with its value."""
    fig, axes = plt.subplots(2, 2, figsize=(11, 8.5), sharey=True, layout="constrained")
    ylim = _focus_range(_pareto_values(table, metric))
    letters = iter("abcd")
    for row, cost in enumerate(("flops", "params")):
        for col, method in enumerate(("exhaustive", "group_lasso")):
            ax = axes[row][col]
            name = "exhaustive search" if method == "exhaustive" else "group l1/l2 with pruning"
            plot_pareto(table, metric, cost, method, ax=ax, title=f"({next(letters)}) {name}", ylim=ylim)
    _outside_legend(fig, *_unique_handles(axes.flat), where="lower", ncol=3)
    if title:
        fig.suptitle(title)
    return fig


# ----------------------------------------------------------------------------- comparison
_UNCERTAINTY_KINDS = {"total": "total uncertainty H[E p]", "data": "data uncertainty E[H p]",
                      "knowledge": "knowledge uncertainty (total - data)"}


@themed
def plot_uncertainty_maps(maps: dict[str, Uncertainties], grid_size: int, extent: float,
                          points: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                          rings: Sequence[float] | None = None) -> plt.Figure:
    """Total / expected data / knowledge uncertainty over a 2-D input grid, one row per method
    (``maps``: method -> :class:`gped_kit.core.uncertainty.Uncertainties` on the grid of
    :func:`gped_kit.data.spiral.spiral_grid`), one colour scale and one colour bar per column
    (uncertainty kind), every panel titled with its method and kind. The labelled ``points`` are
    overlaid (coloured by their ``labels``); ``rings`` (radii, e.g. the spiral's label-noise band)
    are drawn as dashed circles."""
    kinds = tuple(_UNCERTAINTY_KINDS)
    n = len(maps)
    fig, axes = plt.subplots(n, len(kinds), figsize=(9.6, 2.9 * n + 1.2), squeeze=False, sharex=True, sharey=True,
                             layout="constrained")
    vmin = {k: min(0.0, min(float(u.get(k).min()) for u in maps.values())) for k in kinds}
    vmax = {k: max(float(u.get(k).max()) for u in maps.values()) for k in kinds}
    images = {}
    ticks = np.linspace(-extent, extent, 5)
    for row, (method, u) in enumerate(maps.items()):
        for col, kind in enumerate(kinds):
            ax = axes[row, col]
            ax.grid(False)
            image = u.get(kind).reshape(grid_size, grid_size).cpu().numpy()
            images[kind] = ax.imshow(image, origin="lower", extent=(-extent, extent, -extent, extent),
                                     cmap="viridis", vmin=vmin[kind], vmax=vmax[kind], interpolation="nearest")
            if points is not None:
                pts = points.reshape(-1, 2).cpu().numpy()
                ys = labels.cpu().numpy().reshape(-1) if labels is not None else np.zeros(len(pts), dtype=int)
                for c in np.unique(ys):
                    sel = ys == c
                    ax.scatter(pts[sel, 0], pts[sel, 1], s=1.5, color=CLASS_COLORS[int(c) % len(CLASS_COLORS)],
                               alpha=0.6, linewidths=0)
            for r in rings or ():
                ax.add_patch(Circle((0, 0), r, fill=False, ls="--", lw=0.8, color="white", alpha=0.9))
            ax.set_xticks(ticks)
            ax.set_yticks(ticks)
            ax.set_title(f"{method}: {kind}", fontsize=10)
            if row == n - 1:
                ax.set_xlabel("x1")
            if col == 0:
                ax.set_ylabel("x2")
    for col, kind in enumerate(kinds):
        fig.colorbar(images[kind], ax=axes[:, col], location="bottom", shrink=0.9, aspect=25, pad=0.01,
                     label=f"{_UNCERTAINTY_KINDS[kind]} (nats)")
    handles, names = [], []
    if points is not None:
        classes = np.unique(labels.cpu().numpy()) if labels is not None else [None]
        for c in classes:
            handles.append(Line2D([], [], ls="none", marker="o", ms=5,
                                  color=CLASS_COLORS[int(c or 0) % len(CLASS_COLORS)]))
            names.append("training points" + (f", y = {int(c)}" if c is not None else ""))
    if rings:
        handles.append(Line2D([], [], ls="--", lw=1, color="0.3"))
        names.append("label-noise band (labels are coin flips; dashed circles, drawn white)")
    if handles:
        fig.legend(handles, names, loc="outside upper center", ncol=len(names))
    return fig


_EVAL_SET_NAMES = {"test": "MNIST test set", "mnist_rotated60": "MNIST rotated by 60°",
                   "fashion_mnist": "Fashion-MNIST (OOD)", "grid": "grid (unlabelled)"}
_COMPARISON_METRICS = {"nll": "test NLL", "mu_mae_snapshots": "mean |MU - MU(snapshot ensemble)| (nats)",
                       "mu_mae_teacher": "mean |MU - MU(long-chain teacher)| (nats)"}


@themed
def plot_comparison(table: pd.DataFrame) -> plt.Figure:
    """The comparison on one chain, one column per evaluation set (each with its own scale, so a
    shifted set's large values do not hide the test set's differences): the NLL per method
    (labelled sets), and the mean |Delta MU| of each method with an uncertainty decomposition
    against the snapshot ensemble and against the long-chain teacher; one bar per method in the
    method's colour, its value printed beside it."""
    eval_sets = list(dict.fromkeys(table["eval_set"]))
    metrics = [m for m in _COMPARISON_METRICS if m in table and table[m].notna().any()]
    per_row = {m: list(dict.fromkeys(table.dropna(subset=[m])["method"])) for m in metrics}
    colours = method_colors(list(dict.fromkeys(table["method"])))
    heights = [max(len(per_row[m]), 2) for m in metrics]
    fig = plt.figure(figsize=(3.6 * len(eval_sets) + 2.2, 0.26 * sum(heights) + 1.4 * len(metrics) + 0.6),
                     layout="constrained")
    grid = fig.add_gridspec(len(metrics), len(eval_sets), height_ratios=heights)
    for i, metric in enumerate(metrics):
        methods = per_row[metric]
        for j, eval_set in enumerate(eval_sets):
            ax = fig.add_subplot(grid[i, j])
            rows = table[(table["eval_set"] == eval_set)].dropna(subset=[metric]).set_index("method")
            ax.grid(axis="y", visible=False)
            if rows.empty:
                ax.text(0.5, 0.5, f"{_EVAL_SET_NAMES.get(eval_set, eval_set)}:\nno labels, so no NLL"
                        if metric == "nll" else "no values", transform=ax.transAxes, ha="center", va="center",
                        color="0.4")
                ax.set_axis_off()
            else:
                values = np.array([float(rows[metric].get(m, np.nan)) for m in methods])
                ys = np.arange(len(methods))
                ax.barh(ys, values, color=[colours[m] for m in methods], height=0.7)
                # bars start at zero; a value far beyond all others is cut at the edge, its value printed
                focus = _focus_range(np.append(values, 0.0), factor=3.0)
                right = (focus[1] if focus else np.nanmax(values, initial=0.0)) * 1.25 or 1.0
                ax.set_xlim(0, right)
                for y, value in zip(ys, values):
                    if np.isnan(value):
                        continue
                    if value > right:
                        ax.text(right * 0.98, y, f"{value:.3g} (off the scale) →", ha="right", va="center",
                                fontsize=7, color="white", fontweight="bold")
                    else:
                        ax.text(value + right * 0.01, y, f"{value:.3g}", va="center", fontsize=7)
                ax.set_yticks(ys, methods if j == 0 else [""] * len(methods), fontsize=8)
                ax.set_ylim(len(methods) - 0.4, -0.6)
                ax.set_xlabel(_COMPARISON_METRICS[metric], fontsize=9)
            if i == 0:
                ax.set_title(_EVAL_SET_NAMES.get(eval_set, eval_set))
    return fig


@themed
def plot_sampler_study(history: pd.DataFrame, paper: dict[str, float]) -> plt.Figure:
    """Notebook 10: teacher-ensemble NLL (solid: all kept samples; dotted: the recent window),
    student NLL and entropy MAE against wall-clock seconds, one colour per candidate sampler (mean
    over seeds at each log point), with the paper's Table 1 values at T = 10^6 as dashed lines."""
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), sharex=True, layout="constrained")
    colours = dict(zip(dict.fromkeys(history["candidate"]), PALETTE))
    panels = (("teacher NLL", "teacher_nll", None), ("student NLL", "student_nll", "predictive (U_s)"),
              ("entropy MAE", "entropy_mae", "expected entropy (U_o)"))
    for ax, (title, column, student) in zip(axes, panels):
        rows = history if student is None else history[history["student"] == student]
        rows = rows.dropna(subset=[column])
        for candidate, part in rows.groupby("candidate", sort=False):
            curve = part.groupby("step")[[column, "elapsed_s"] + (["teacher_recent_nll"] if student is None
                                                                   else [])].mean()
            ax.plot(curve["elapsed_s"], curve[column], "-", color=colours[candidate], lw=2, label=candidate)
            if student is None:
                ax.plot(curve["elapsed_s"], curve["teacher_recent_nll"], ":", color=colours[candidate], lw=1.5)
        ax.axhline(paper[title], color=PAPER_COLOR, ls="--", lw=1, label="paper, T = 10^6")
        ax.set(xlabel="wall-clock seconds (2-core CPU)", ylabel=title, title=title)
    axes[0].legend(fontsize=8, title="solid: all samples; dotted: recent", title_fontsize=8)
    return fig
