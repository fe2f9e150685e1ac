"""Figures of Papamakarios' thesis toys (paper 001, Chapter 3), drawn from stored runs.

They draw the tables and arrays of :class:`~gped_kit.toys.ToyResult` (computed
by :mod:`gped_kit.toys`, stored and read back by
:func:`gped_kit.experiments.thesis.run_toy`); they compute nothing of the science themselves.
Stored arrays are mostly float16; they are widened to float64 before drawing. Every figure is drawn
in the kit's theme (:mod:`gped_kit.plotting.theme`).
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ...plotting.theme import CLASS_COLORS, PALETTE, TEACHER_COLOR, own_y_range, themed
from ...toys import INPUT_GENERATORS, MOG_TRUE_MEANS, ToyResult

#: Colours of the thesis' students: by distillation loss (cross-entropy, derivative square error)
#: and by mode (batch, online), the same in every thesis figure.
LOSS_COLORS = {"CE": PALETTE[0], "DSE": PALETTE[1]}
MODE_COLORS = {"batch": PALETTE[1], "online": PALETTE[4]}
MODE_MARKERS = {"batch": "o", "online": "s"}

#: Axis names of the toys' table columns (the thesis' symbols), for axis labels instead of column names.
COLUMN_NAMES = {
    "num_data": "data-set size N",
    "num_samples": "chain samples S",
    "num_distill_samples": "distillation samples M",
    "minibatch_size": "minibatch size B",
    "memory_bytes": "memory held (bytes)",
    "kl_mc_to_student": "KL(p_MC || student) on the grid",
    "tv_mc_student": "total variation |p_MC - student| on the grid",
    "mean_kl_test": "mean KL(p_MC || student) on test points",
    "mean_kl_grid": "mean KL(p_MC || student) over the box",
    "mean_abs_test": "mean |p_MC - student| on test points",
    "mean_abs_grid": "mean |p_MC - student| over the box",
    "loss": "distillation loss",
    "generator": "input generator",
    "mode": "mode",
}
#: Short names of the distillation losses (Section 3.3 of the thesis).
LOSS_NAMES = {"cross_entropy": "CE", "derivative_square_error": "DSE"}


def column_name(column: str) -> str:
    """What table column ``column`` measures, for an axis label (:data:`COLUMN_NAMES`; else its words)."""
    return COLUMN_NAMES.get(column, column.replace("_", " "))


def _f64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=float)


@themed
def plot_mog(results: Sequence[ToyResult], title: str = "") -> plt.Figure:
    """Figures 3.1-3.9 of the thesis, one row per data-set size N: the Gibbs histograms of
    m_1, m_2, m_3 with the true means (left), and the true model, p_MC (Eq. 3.6) and the batch
    and online students (Eq. 3.14; right)."""
    fig, axes = plt.subplots(len(results), 2, figsize=(11, 2.6 * len(results) + 0.4), squeeze=False,
                             layout="constrained")
    colors = (PALETTE[3], PALETTE[2], PALETTE[0])
    for row, result in zip(axes, results):
        a, n = result.arrays, int(result.table["num_data"].iloc[0])
        edges = _f64(a["hist_edges"])
        for k, counts in enumerate(_f64(a["mean_hist"])):
            row[0].stairs(counts / counts.sum() / np.diff(edges), edges, color=colors[k], fill=True, alpha=0.4,
                          label=f"Gibbs samples of m{k + 1} (dashed: its true value)")
            row[0].axvline(MOG_TRUE_MEANS[k], color=colors[k], ls="--", lw=1)
        row[0].set(title=f"N = {n}: posterior of the means (Gibbs)", xlabel="mean m", ylabel="posterior density")
        own_y_range(row[0], "the posterior narrows tenfold from N = 2 to N = 1000: on one scale the first is flat")
        grid = _f64(a["grid"])
        show = (grid > -15) & (grid < 15)
        row[1].plot(grid[show], _f64(a["true_pdf"])[show], "k:", lw=1.5, label="true p(x|w)")
        row[1].plot(grid[show], _f64(a["p_mc"])[show], "-", color=TEACHER_COLOR, lw=1.5, label="p_MC (Monte Carlo)")
        row[1].plot(grid[show], _f64(a["batch"])[show], "-", color=MODE_COLORS["batch"], lw=1.5,
                    label="batch EM student")
        row[1].plot(grid[show], _f64(a["online"])[show], "--", color=MODE_COLORS["online"], lw=1.5,
                    label="online EM student")
        data = _f64(a["data"])
        row[1].plot(data, np.zeros_like(data), "|", color="gray", ms=8, label="the N data points")
        row[1].set(title=f"N = {n}: predictive densities", xlabel="x", ylabel="density p(x)")
    handles, labels = [], []
    for ax in axes[0]:
        h, lab = ax.get_legend_handles_labels()
        handles += h
        labels += lab
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels) // 2 + len(labels) % 2)
    if title:
        fig.suptitle(title)
    return fig


@themed
def plot_online_vs_batch(table: pd.DataFrame, metric: str, x: str, hue: Sequence[str] = (), ylabel: str = "",
                         title: str = "") -> plt.Figure:
    """Distance (``metric``, log scale) and memory (log scale) of batch and online students
    against ``x``, one line per mode and ``hue`` combination (batch solid with circles, online
    dashed with squares; colours per ``hue`` combination, else per mode). Axes are labelled with
    what the columns measure (:func:`column_name`), ``ylabel`` overriding the distance's."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
    keys = ["mode", *hue]
    groups = list(table.groupby(keys, sort=True))
    levels = list(dict.fromkeys(tuple(k if isinstance(k, tuple) else (k,))[1:] for k, _ in groups))
    colours = dict(zip(levels, PALETTE)) if hue else {}
    for label, rows in groups:
        label = label if isinstance(label, tuple) else (label,)
        rows = rows.sort_values(x)
        name = " / ".join(LOSS_NAMES.get(str(v), str(v)) for v in label)
        mode = rows["mode"].iloc[0]
        style = dict(ls="-" if mode == "batch" else "--", marker=MODE_MARKERS.get(mode, "o"),
                     color=colours[label[1:]] if hue else MODE_COLORS.get(mode))
        axes[0].plot(rows[x], rows[metric], label=name, **style)
        axes[1].plot(rows[x], rows["memory_bytes"], label=name, **style)
    axes[0].set(yscale="log", xlabel=column_name(x), ylabel=ylabel or column_name(metric), title="distance from p_MC")
    axes[1].set(yscale="log", xlabel=column_name(x), ylabel=column_name("memory_bytes"), title="memory")
    for ax in axes:
        if pd.api.types.is_numeric_dtype(table[x]) and table[x].min() > 0:
            ax.set_xscale("log")
        elif not pd.api.types.is_numeric_dtype(table[x]):
            ax.set_xticks(ax.get_xticks(), [LOSS_NAMES.get(t.get_text(), t.get_text()) for t in ax.get_xticklabels()])
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right center")
    if title:
        fig.suptitle(title)
    return fig


@themed
def plot_logreg(result: ToyResult, generator: str = "noise", title: str = "") -> plt.Figure:
    """Figures 3.11-3.13, 3.15-3.16 of the thesis for one input generator: top row, the chain's
    samples in weight space (10% shown, grey) with each compact model's S' weights (black);
    bottom row, p(y = 1 | x) of p_MC (Eq. 3.43) and of the four students (Eq. 3.44; batch /
    online x CE / DSE), with the data (y = 1 vermillion, y = 0 blue). The panels of a column are
    aligned, each row shares its axes, one colour bar serves the bottom row."""
    a, table = result.arrays, result.table.reset_index(drop=True)
    chosen = table[table["generator"] == generator]
    if chosen.empty:
        raise ValueError(f"generator={generator!r}: allowed {sorted(table['generator'].unique())}")
    n = len(chosen) + 1
    fig, axes = plt.subplots(2, n, figsize=(2.9 * n + 1.2, 7.4), squeeze=False, sharex="row", sharey="row",
                             layout="constrained")
    axis = _f64(a["grid_axis"])
    panels = [("p_MC (Monte Carlo)", None, _f64(a["mc_grid"]))] + [
        (f"{r['mode']}, {'CE' if r['loss'] == 'cross_entropy' else 'DSE'}", _f64(a["student_weights"][i]),
         _f64(a["student_grids"][i])) for i, r in chosen.iterrows()]
    bag = _f64(a["bag_subsample"])
    lim = float(np.abs(bag).max()) * 1.05
    x, y = _f64(a["data_x"]), _f64(a["data_y"])
    for col, (name, weights, surface) in enumerate(panels):
        top, bottom = axes[0, col], axes[1, col]
        top.scatter(*bag[::10].T, s=4, c="0.6", label="chain samples (10%)")
        if weights is not None:
            top.scatter(*weights.T, s=18, c="k", label="student's S' weights")
        top.set(xlim=(-lim, lim), ylim=(-lim, lim), title=name, xlabel="w1", ylabel="w2" if col == 0 else "")
        top.set_aspect("equal")
        bottom.grid(False)
        cs = bottom.contourf(axis, axis, surface, levels=np.linspace(0, 1, 11), cmap="RdBu_r")
        bottom.scatter(*x[y == 1].T, color=CLASS_COLORS[1], s=14, edgecolors="k", linewidths=0.5, label="y = 1")
        bottom.scatter(*x[y == 0].T, color=CLASS_COLORS[0], s=14, edgecolors="k", linewidths=0.5, label="y = 0")
        bottom.set(xlabel="x1", ylabel="x2" if col == 0 else "")
        bottom.set_aspect("equal")
    fig.colorbar(cs, ax=axes[1, :].tolist(), shrink=0.9, label="p(y = 1 | x)")
    handles, labels = [], []
    for ax in (axes[0, 1] if n > 1 else axes[0, 0], axes[1, 0]):  # a student's panel has both top-row markers
        h, lab = ax.get_legend_handles_labels()
        handles += h
        labels += lab
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels))
    fig.suptitle(title or f"2-D Bayesian logistic regression, input generator {generator!r}")
    return fig


@themed
def plot_generators(table: pd.DataFrame, metric: str = "mean_kl_test", title: str = "") -> plt.Figure:
    """Distance from p_MC of every logistic-regression student, grouped by input generator: a dot
    per student (colour: loss, marker: batch / online) on a log axis (dots, not bars: a bar's
    length on a log axis means nothing)."""
    rows = table.assign(loss_name=table["loss"].map(LOSS_NAMES).fillna(table["loss"]))
    generators = [g for g in INPUT_GENERATORS if g in set(rows["generator"])]
    students = list(dict.fromkeys(zip(rows["mode"], rows["loss_name"])))
    fig, ax = plt.subplots(figsize=(7.5, 3.8), layout="constrained")
    width = 0.6
    for j, (mode, loss) in enumerate(students):
        sel = rows[(rows["mode"] == mode) & (rows["loss_name"] == loss)].set_index("generator")
        offset = (j - (len(students) - 1) / 2) * width / max(len(students) - 1, 1)
        xs = [i + offset for i in range(len(generators))]
        values = [float(sel[metric].get(g, np.nan)) for g in generators]
        filled = mode == "batch"
        colour = LOSS_COLORS.get(loss, PALETTE[7])
        ax.plot(xs, values, ls="none", marker=MODE_MARKERS.get(mode, "o"), ms=8, mew=1.5, color=colour,
                mfc=colour if filled else "white", label=f"{mode} {loss}")
    ax.set_yscale("log")
    ax.set_xticks(range(len(generators)), generators)
    ax.set_xlim(-0.6, len(generators) - 0.4)
    ax.grid(axis="x", visible=False)
    ax.grid(axis="y", which="minor", color="0.95", lw=0.6)
    for i in range(len(generators) - 1):
        ax.axvline(i + 0.5, color="0.85", lw=0.8)
    ax.set(ylabel=f"{column_name(metric)} (log scale)", xlabel="input generator",
           title=title or f"{column_name(metric)}, by input generator")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), title="student")
    return fig
