"""Figures shared by the notebooks; every figure is saved to ``figures/`` as PNG and PDF.

Plots draw tables and tensors that the experiments computed (a chain's history, an
Experiment 2 cells table, an Experiment 3 search table, uncertainties on a grid); they compute
nothing of the science themselves: the Pareto frontier of Figures 2 and 6-13 is
:func:`gped_kit.experiments.experiment3.pareto_front`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import matplotlib.ticker as mticker
import pandas as pd
import seaborn as sns
import torch

from ..core.uncertainty import Uncertainties
from ..experiments.experiment3 import COSTS, METHODS, METRIC_TARGET, METRICS, pareto_front, search_candidates


def save_figure(fig: plt.Figure, name: str, figures_dir: str | Path) -> list[Path]:
    """Save ``fig`` as ``<figures_dir>/<name>.png`` and ``.pdf``; returns the paths."""
    figures_dir = Path(figures_dir)
    figures_dir.mkdir(parents=True, exist_ok=True)
    paths = [figures_dir / f"{name}.{ext}" for ext in ("png", "pdf")]
    for path in paths:
        fig.savefig(path, bbox_inches="tight", dpi=150)
    return paths


def save_table(table: pd.DataFrame, name: str, figures_dir: str | Path, floatfmt: str = ".3f") -> list[Path]:
    """Save ``table`` as ``<figures_dir>/<name>.csv`` and ``.md`` (Markdown); returns the paths."""
    figures_dir = Path(figures_dir)
    figures_dir.mkdir(parents=True, exist_ok=True)
    csv, md = figures_dir / f"{name}.csv", figures_dir / f"{name}.md"
    table.to_csv(csv, index=False)
    md.write_text(table.to_markdown(index=False, floatfmt=floatfmt))
    return [csv, md]


def plot_learning_curves(history: pd.DataFrame) -> plt.Figure:
    """Teacher-ensemble vs student test NLL and accuracy, and entropy MAE, against SGLD iterations."""
    sns.set_theme(style="whitegrid", context="notebook")
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    teacher = (history.drop_duplicates("step").dropna(subset=["teacher_nll"]) if "teacher_nll" in history
               else history.iloc[:0])
    for ax, metric, label in ((axes[0], "nll", "test NLL"), (axes[1], "accuracy", "test accuracy")):
        if len(teacher):
            ax.plot(teacher["step"], teacher[f"teacher_{metric}"], "k-", lw=2, label="teacher ensemble")
        col = f"student_{metric}"
        if col in history:
            for name, rows in history.dropna(subset=[col]).groupby("student"):
                ax.plot(rows["step"], rows[col], "o-", ms=3, label=f"student {name}")
        ax.set(xlabel="SGLD iteration t", ylabel=label)
        ax.legend(fontsize=8)
    if "entropy_mae" in history:
        for name, rows in history.dropna(subset=["entropy_mae"]).groupby("student"):
            axes[2].plot(rows["step"], rows["entropy_mae"], "o-", ms=3, label=f"student {name}")
        axes[2].legend(fontsize=8)
    axes[2].set(xlabel="SGLD iteration t", ylabel="expected-entropy MAE (nats)")
    fig.tight_layout()
    return fig


def plot_entropy_agreement(teacher_entropy: torch.Tensor, student_entropy: torch.Tensor,
                           title: str = "") -> plt.Figure:
    """Student vs teacher expected data uncertainty E[H[p(y|x,theta)]] per test input."""
    sns.set_theme(style="whitegrid", context="notebook")
    t, s = teacher_entropy.flatten().numpy(), student_entropy.flatten().numpy()
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.scatter(t, s, s=3, alpha=0.3)
    top = float(max(t.max(), s.max())) * 1.05
    ax.plot([0, top], [0, top], "k--", lw=1)
    ax.set(xlim=(0, top), ylim=(0, top), xlabel="teacher ensemble (nats)", ylabel="student (nats)",
           title=title or "expected entropy on the test set")
    fig.tight_layout()
    return fig


EXPERIMENT2_METRICS = {
    "teacher_nll": "teacher test NLL",
    "nll_gap": "student - teacher NLL",
    "entropy_mae": "expected-entropy MAE",
}


def plot_uncertainty_grid(table: pd.DataFrame, x: str = "masking_rate", hue: str = "labelled_size",
                          metrics: dict[str, str] | None = None, highlight: dict | None = None,
                          style: str | None = None, axes: Sequence[plt.Axes] | None = None) -> plt.Figure:
    """Figures 1, 4 and 5 of the paper: one panel per metric against ``x`` (masking rate or
    labelled-set size), one line per ``hue`` value; ``style`` (e.g. ``"estimator"``) draws a
    line style per value. ``table`` has one row per (cell, estimator) with the metric columns.
    ``highlight={x: value, hue: value}`` rings that cell's points in every panel.
    """
    metrics = metrics or EXPERIMENT2_METRICS
    hue = None if hue == x else hue
    sns.set_theme(style="whitegrid", context="notebook")
    if axes is None:
        fig, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), 4))
    else:
        fig = axes[0].figure
    for ax, (metric, label) in zip(axes, metrics.items()):
        rows = table.dropna(subset=[metric])
        if len(rows):
            sns.lineplot(data=rows, x=x, y=metric, hue=hue, style=style, marker="o", ax=ax,
                         palette="viridis" if hue else None, errorbar=None)
        if highlight is not None and len(rows):
            sel = rows
            for key, value in highlight.items():
                sel = sel[sel[key] == value]
            ax.scatter(sel[x], sel[metric], s=180, facecolors="none", edgecolors="red", linewidths=2, zorder=5)
        ax.set(xlabel=x.replace("_", " "), ylabel=label)
    fig.tight_layout()
    return fig


def plot_experiment2_vs_paper(ours: pd.DataFrame, paper: pd.DataFrame, x: str = "masking_rate",
                              title: str = "") -> plt.Figure:
    """Figures 1/4/5 layout, ours (top row) above the paper's numbers from Tables 5-7 (bottom
    row), same metrics and axes; one line per labelled-set size, line style per estimator."""
    fig, axes = plt.subplots(2, len(EXPERIMENT2_METRICS), figsize=(5 * len(EXPERIMENT2_METRICS), 8),
                             sharex=True)
    plot_uncertainty_grid(ours, x=x, style="estimator", axes=axes[0])
    plot_uncertainty_grid(paper, x=x, style="estimator", axes=axes[1])
    for ax_ours, ax_paper in zip(axes[0], axes[1]):
        low = min(ax_ours.get_ylim()[0], ax_paper.get_ylim()[0])
        high = max(ax_ours.get_ylim()[1], ax_paper.get_ylim()[1])
        ax_ours.set_ylim(low, high)
        ax_paper.set_ylim(low, high)
    axes[0][0].annotate("ours", xy=(-0.35, 0.5), xycoords="axes fraction", rotation=90, va="center", fontsize=14)
    axes[1][0].annotate("paper (Tables 5-7)", xy=(-0.35, 0.5), xycoords="axes fraction", rotation=90,
                        va="center", fontsize=14)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


METHOD_COLORS = {"Ensemble": "0.35", "GPED": "tab:blue", "EnD2": "tab:orange"}


def plot_experiment4_in_distribution(comparison: pd.DataFrame, title: str = "") -> plt.Figure:
    """Figure 14: test accuracy and NLL of the ensemble, GPED and EnD2 students per
    (estimator, student size), one row per model; the paper's NLL (Tables 2, 8-10) as black
    crosses. ``comparison`` is Experiment 4's in-distribution comparison table (one row per model,
    method, estimator, student size and metric, with ``value`` and ``value_paper``)."""
    sns.set_theme(style="whitegrid", context="notebook")
    models = list(dict.fromkeys(comparison["model"]))
    fig, axes = plt.subplots(len(models), 2, figsize=(13, 3.6 * len(models)), squeeze=False)
    methods = [m for m in METHOD_COLORS if m in set(comparison["method"])]
    for row, model in zip(axes, models):
        df = comparison[comparison["model"] == model].copy()
        df["setting"] = df["estimator"] + ", " + df["student"].str.replace("largest_width_multiplier", "largest")
        settings = list(dict.fromkeys(df.sort_values(["student", "estimator"])["setting"]))
        width = 0.8 / len(methods)
        for ax, metric, label in ((row[0], "accuracy", "test accuracy"), (row[1], "nll", "test NLL")):
            for j, method in enumerate(methods):
                sel = df[(df["metric"] == metric) & (df["method"] == method)].set_index("setting")
                xs = [i + (j - (len(methods) - 1) / 2) * width for i in range(len(settings))]
                bars = ax.bar(xs, [sel["value"].get(s, float("nan")) for s in settings], width,
                              color=METHOD_COLORS[method], label=f"{method} (ours)")
                ax.bar_label(bars, fmt="%.3f", fontsize=6, rotation=90, padding=2)
                paper = [sel["value_paper"].get(s, float("nan")) for s in settings] if "value_paper" in sel else []
                if metric == "nll" and any(pd.notna(paper)):
                    ax.plot(xs, paper, "kx", ms=8, mew=2, label="paper" if j == 0 else None)
            ax.set_xticks(range(len(settings)), settings, fontsize=9)
            ax.set(ylabel=label, title=f"{model}: {label}")
            # bars start at zero (a cut axis makes 0.83 vs 0.80 look twofold); the labels give the values
            ax.set_ylim(0.0, 1.15 if metric == "accuracy" else ax.get_ylim()[1] * 1.15)
    handles, labels = axes[0, 1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=9, frameon=False)
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


def plot_data_uncertainty_joint(ensemble: torch.Tensor, students: dict[str, torch.Tensor],
                                title: str = "") -> plt.Figure:
    """Figure 15: per test input, a student's expected data uncertainty E[H] against the teacher
    ensemble's (joint density as hexbins, diagonal = perfect distillation), with the marginal
    histograms of the ensemble (top, grey) and of the student (right; the ensemble's in grey)."""
    sns.set_theme(style="white", context="notebook")
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
        ax.hexbin(t, s, gridsize=40, extent=(0, top, 0, top), bins="log", cmap="Blues", mincnt=1)
        ax.plot([0, top], [0, top], "k--", lw=1)
        ax.set(xlim=(0, top), ylim=(0, top), xlabel="ensemble E[H] (nats)", ylabel=f"{name} E[H] (nats)")
        ax_top.hist(t, bins=bins, range=(0, top), color="0.5")
        ax_right.hist(t, bins=bins, range=(0, top), orientation="horizontal", color="0.8", label="ensemble")
        ax_right.hist(s, bins=bins, range=(0, top), orientation="horizontal", histtype="step", lw=1.5,
                      color="tab:blue", label=name)
        ax_top.tick_params(labelbottom=False, labelleft=False)
        ax_right.tick_params(labelleft=False, labelbottom=False)
        ax_top.set_title(name)
    if title:
        fig.suptitle(title, y=1.02)
    return fig


# ----------------------------------------------------------------------------- Experiment 3
def plot_pareto(table: pd.DataFrame, metric: str, cost: str, method: str | None = None, ax: plt.Axes | None = None,
                highlight: str | None = None, title: str | None = None, teacher: bool = True) -> plt.Axes:
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
    """
    if metric not in METRICS:
        raise ValueError(f"metric={metric!r} is not known; allowed: {sorted(METRICS)}")
    if cost not in COSTS:
        raise ValueError(f"cost={cost!r} is not known; allowed: {sorted(COSTS)}")
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 4))
    rows = search_candidates(table, method)
    rows = rows[rows["target"] == METRIC_TARGET[metric]].dropna(subset=[metric, cost]) if len(rows) else rows
    if len(rows):
        ax.scatter(rows[cost], rows[metric], s=22, color="tab:gray", alpha=0.8, label="IS: individual students",
                   zorder=3)
        front = pareto_front(rows, metric, cost)
        ax.step(front[cost], front[metric], where="post", color="tab:blue", lw=2, marker="o", ms=5,
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
            ax.axhline(float(teach[metric].iloc[0]), color="tab:red", ls=":", lw=1.5,
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
    ax.set(xlabel=COSTS[cost], ylabel=METRICS[metric][0],
           title=title if title is not None else (METHODS[method] if method else "both search methods"))
    return ax


def plot_pareto_figure(table: pd.DataFrame, metric: str, title: str = "") -> plt.Figure:
    """Figures 2 and 6-13 laid out as in the paper: (a) ``metric`` vs FLOPs, exhaustive search;
    (b) vs FLOPs, group l1/l2 with pruning; (c) vs parameters, exhaustive; (d) vs parameters,
    group l1/l2; shared metric axis. ``table`` holds one model's search table."""
    sns.set_theme(style="whitegrid", context="notebook")
    fig, axes = plt.subplots(2, 2, figsize=(11, 8.5), sharey=True)
    letters = iter("abcd")
    for row, cost in enumerate(("flops", "params")):
        for col, method in enumerate(("exhaustive", "group_lasso")):
            ax = axes[row][col]
            name = "exhaustive search" if method == "exhaustive" else "group l1/l2 with pruning"
            plot_pareto(table, metric, cost, method, ax=ax, title=f"({next(letters)}) {name}")
    handles, labels = {}, []
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in handles:
                handles[lab] = h
                labels.append(lab)
    fig.legend([handles[lab] for lab in labels], labels, loc="lower center", ncol=min(5, len(labels)), fontsize=9,
               frameon=False)
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


def plot_uncertainty_maps(maps: dict[str, Uncertainties], grid_size: int, extent: float,
                          points: torch.Tensor | None = None, labels: torch.Tensor | None = None) -> plt.Figure:
    """Total / expected data / knowledge uncertainty over a 2-D input grid, one row per method
    (``maps``: method -> :class:`gped_kit.core.uncertainty.Uncertainties` on the grid of
    :func:`gped_kit.data.spiral.spiral_grid`), on a shared colour scale per column; the labelled
    points are overlaid."""
    kinds = ("total", "data", "knowledge")
    fig, axes = plt.subplots(len(maps), 3, figsize=(10, 3.1 * len(maps)), squeeze=False)
    vmax = {k: max(float(u.get(k).max()) for u in maps.values()) for k in kinds}
    for row, (method, u) in enumerate(maps.items()):
        for col, kind in enumerate(kinds):
            ax = axes[row, col]
            image = u.get(kind).reshape(grid_size, grid_size).cpu().numpy()
            im = ax.imshow(image, origin="lower", extent=(-extent, extent, -extent, extent), cmap="viridis",
                           vmin=min(0.0, float(image.min())), vmax=vmax[kind])
            if points is not None:
                pts = points.reshape(-1, 2).cpu()
                colours = labels.cpu() if labels is not None else "w"
                ax.scatter(pts[:, 0], pts[:, 1], c=colours, s=1.5, cmap="coolwarm", alpha=0.5, linewidths=0)
            ax.set_xticks([])
            ax.set_yticks([])
            if row == 0:
                ax.set_title(f"{kind} uncertainty (nats)")
            if col == 0:
                ax.set_ylabel(method)
            fig.colorbar(im, ax=ax, fraction=0.046, pad=0.02)
    fig.tight_layout()
    return fig


def plot_comparison(table: pd.DataFrame) -> plt.Figure:
    """The comparison on one chain: test/shift NLL per method, and the mean |Delta MU| of each
    method with an uncertainty decomposition against the snapshot ensemble and against the
    long-chain teacher, per evaluation set."""
    sns.set_theme(style="whitegrid", context="notebook")
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.5))
    labelled = table.dropna(subset=["nll"]) if "nll" in table else table.iloc[:0]
    if len(labelled):
        sns.barplot(data=labelled, x="method", y="nll", hue="eval_set", ax=axes[0])
    axes[0].set(title="NLL (labelled sets)", xlabel="")
    for ax, col, title in ((axes[1], "mu_mae_snapshots", "mean |MU - MU(snapshot ensemble)|"),
                           (axes[2], "mu_mae_teacher", "mean |MU - MU(long-chain teacher)|")):
        rows = table.dropna(subset=[col]) if col in table else table.iloc[:0]
        if len(rows):
            sns.barplot(data=rows, x="method", y=col, hue="eval_set", ax=ax)
        ax.set(title=title, xlabel="", ylabel="nats")
    for ax in axes:
        ax.tick_params(axis="x", rotation=35)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
    fig.tight_layout()
    return fig


def plot_sampler_study(history: pd.DataFrame, paper: dict[str, float]) -> plt.Figure:
    """Notebook 10: teacher-ensemble NLL (solid: all kept samples; dotted: the recent window),
    student NLL and entropy MAE against wall-clock seconds, one colour per candidate sampler (mean
    over seeds at each log point), with the paper's Table 1 values at T = 10^6 as dashed lines."""
    sns.set_theme(style="whitegrid", context="notebook")
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), sharex=True)
    colours = dict(zip(dict.fromkeys(history["candidate"]), sns.color_palette("colorblind")))
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
        ax.axhline(paper[title], color="k", ls="--", lw=1, label="paper, T = 10^6")
        ax.set(xlabel="wall-clock seconds (2-core CPU)" , ylabel=title, title=title)
    axes[0].legend(fontsize=8, title="solid: all samples; dotted: recent", title_fontsize=8)
    fig.tight_layout()
    return fig
