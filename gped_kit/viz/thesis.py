"""Figures of Papamakarios' thesis toys (paper 001, Chapter 3), drawn from stored runs.

They draw the tables and arrays of :class:`~gped_kit.baselines.thesis_toys.ToyResult` (computed
by :mod:`gped_kit.baselines.thesis_toys`, stored and read back by
:func:`gped_kit.experiments.thesis.run_toy`); they compute nothing of the science themselves.
Stored arrays are mostly float16; they are widened to float64 before drawing.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..baselines.thesis_toys import INPUT_GENERATORS, MOG_TRUE_MEANS, ToyResult


def _f64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=float)


def plot_mog(results: Sequence[ToyResult], title: str = "") -> plt.Figure:
    """Figures 3.1-3.9 of the thesis, one row per data-set size N: the Gibbs histograms of
    m_1, m_2, m_3 with the true means (left), and the true model, p_MC (Eq. 3.6) and the batch
    and online students (Eq. 3.14; right)."""
    fig, axes = plt.subplots(len(results), 2, figsize=(11, 2.6 * len(results)), squeeze=False)
    colors = ("tab:red", "tab:green", "tab:blue")
    for row, result in zip(axes, results):
        a, n = result.arrays, int(result.table["num_data"].iloc[0])
        edges = _f64(a["hist_edges"])
        for k, counts in enumerate(_f64(a["mean_hist"])):
            row[0].stairs(counts / counts.sum() / np.diff(edges), edges, color=colors[k], fill=True, alpha=0.4,
                          label=f"m{k + 1}")
            row[0].axvline(MOG_TRUE_MEANS[k], color=colors[k], ls="--", lw=1)
        row[0].set(title=f"N = {n}: posterior of the means (Gibbs)", xlabel="m")
        row[0].legend(fontsize=7)
        grid = _f64(a["grid"])
        show = (grid > -15) & (grid < 15)
        row[1].plot(grid[show], _f64(a["true_pdf"])[show], "k:", lw=1.5, label="true p(x|w)")
        row[1].plot(grid[show], _f64(a["p_mc"])[show], "k-", lw=1.5, label="p_MC (Monte Carlo)")
        row[1].plot(grid[show], _f64(a["batch"])[show], "-", color="tab:orange", lw=1.5, label="batch EM student")
        row[1].plot(grid[show], _f64(a["online"])[show], "--", color="tab:purple", lw=1.5, label="online EM student")
        data = _f64(a["data"])
        row[1].plot(data, np.zeros_like(data), "|", color="gray", ms=8)
        row[1].set(title=f"N = {n}: predictive densities", xlabel="x")
        row[1].legend(fontsize=7)
    if title:
        fig.suptitle(title, y=1.0)
    fig.tight_layout()
    return fig


def plot_online_vs_batch(table: pd.DataFrame, metric: str, x: str, hue: Sequence[str] = (), ylabel: str = "",
                         title: str = "") -> plt.Figure:
    """Distance (``metric``, log scale) and memory (log scale) of batch and online students
    against ``x``, one line per mode and ``hue`` combination."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    keys = ["mode", *hue]
    for label, rows in table.groupby(keys):
        rows = rows.sort_values(x)
        name = " / ".join(str(v) for v in (label if isinstance(label, tuple) else (label,)))
        ls = "-" if rows["mode"].iloc[0] == "batch" else "--"
        axes[0].plot(rows[x], rows[metric], marker="o", ls=ls, label=name)
        axes[1].plot(rows[x], rows["memory_bytes"], marker="o", ls=ls, label=name)
    axes[0].set(yscale="log", xlabel=x, ylabel=ylabel or metric, title="distance from p_MC")
    axes[1].set(yscale="log", xlabel=x, ylabel="bytes held", title="memory")
    for ax in axes:
        if pd.api.types.is_numeric_dtype(table[x]) and table[x].min() > 0:
            ax.set_xscale("log")
        ax.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_logreg(result: ToyResult, generator: str = "noise", title: str = "") -> plt.Figure:
    """Figures 3.11-3.13, 3.15-3.16 of the thesis for one input generator: top row, the chain's
    samples in weight space (10% shown, grey) with each compact model's S' weights (black);
    bottom row, p(y = 1 | x) of p_MC (Eq. 3.43) and of the four students (Eq. 3.44; batch /
    online x CE / DSE), with the data (red y = 1, blue y = 0)."""
    a, table = result.arrays, result.table.reset_index(drop=True)
    chosen = table[table["generator"] == generator]
    if chosen.empty:
        raise ValueError(f"generator={generator!r}: allowed {sorted(table['generator'].unique())}")
    n = len(chosen) + 1
    fig, axes = plt.subplots(2, n, figsize=(3.1 * n, 6.2), squeeze=False)
    axis = _f64(a["grid_axis"])
    panels = [("p_MC (Monte Carlo)", None, _f64(a["mc_grid"]))] + [
        (f"{r['mode']}, {'CE' if r['loss'] == 'cross_entropy' else 'DSE'}", _f64(a["student_weights"][i]),
         _f64(a["student_grids"][i])) for i, r in chosen.iterrows()]
    bag = _f64(a["bag_subsample"])
    lim = float(np.abs(bag).max()) * 1.05
    x, y = _f64(a["data_x"]), _f64(a["data_y"])
    for col, (name, weights, surface) in enumerate(panels):
        top, bottom = axes[0, col], axes[1, col]
        top.scatter(*bag[::10].T, s=4, c="0.6")
        if weights is not None:
            top.scatter(*weights.T, s=18, c="k")
        top.set(xlim=(-lim, lim), ylim=(-lim, lim), title=name, xlabel="w1", ylabel="w2" if col == 0 else "")
        top.set_aspect("equal")
        cs = bottom.contourf(axis, axis, surface, levels=np.linspace(0, 1, 11), cmap="RdBu_r")
        bottom.scatter(*x[y == 1].T, c="red", s=12, edgecolors="k", linewidths=0.4)
        bottom.scatter(*x[y == 0].T, c="blue", s=12, edgecolors="k", linewidths=0.4)
        bottom.set(xlabel="x1", ylabel="x2" if col == 0 else "")
        bottom.set_aspect("equal")
    fig.colorbar(cs, ax=axes[1, :].tolist(), shrink=0.8, label="p(y = 1 | x)")
    fig.suptitle(title or f"2-D Bayesian logistic regression, input generator {generator!r}")
    return fig


def plot_generators(table: pd.DataFrame, metric: str = "mean_kl_test", title: str = "") -> plt.Figure:
    """Distance from p_MC of every logistic-regression student, grouped by input generator, one
    bar per (mode, loss) (log scale)."""
    wide = table.assign(student=table["mode"] + " " + table["loss"].map(
        {"cross_entropy": "CE", "derivative_square_error": "DSE"})).pivot_table(
        index="generator", columns="student", values=metric, aggfunc="first")
    wide = wide.reindex([g for g in INPUT_GENERATORS if g in wide.index])
    fig, ax = plt.subplots(figsize=(7, 3.6))
    wide.plot.bar(ax=ax, logy=True, rot=0)
    ax.set(ylabel=metric, xlabel="input generator", title=title or f"{metric} by input generator")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
