"""Figures shared by the notebooks; every figure is saved to ``figures/`` as PNG and PDF."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
import torch


def save_figure(fig: plt.Figure, name: str, figures_dir: str | Path) -> list[Path]:
    """Save ``fig`` as ``<figures_dir>/<name>.png`` and ``.pdf``; returns the paths."""
    figures_dir = Path(figures_dir)
    figures_dir.mkdir(parents=True, exist_ok=True)
    paths = [figures_dir / f"{name}.{ext}" for ext in ("png", "pdf")]
    for path in paths:
        fig.savefig(path, bbox_inches="tight", dpi=150)
    return paths


def plot_learning_curves(history: pd.DataFrame) -> plt.Figure:
    """Teacher-ensemble vs student test NLL and accuracy, and entropy MAE, against SGLD iterations."""
    sns.set_theme(style="whitegrid", context="notebook")
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    teacher = history.drop_duplicates("step").dropna(subset=["teacher_nll"]) if "teacher_nll" in history else history.iloc[:0]
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
                          style: str | None = None, axes=None) -> plt.Figure:
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
