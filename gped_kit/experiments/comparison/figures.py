"""The comparison's figures (notebook 07): each method's NLL and knowledge uncertainty per evaluation set
(:func:`plot_comparison`) and the uncertainties over the spiral's input grid, one row per method
(:func:`plot_uncertainty_maps`)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from matplotlib.lines import Line2D
from matplotlib.patches import Circle

from ...core.uncertainty import Uncertainties
from ...plotting.layout import (
    focus_range,
)
from ...plotting.theme import (
    CLASS_COLORS,
    method_colors,
    themed,
)
from ..prose import join_words, method_name

__all__ = ["MU_DEFINITION", "plot_comparison", "plot_uncertainty_maps"]


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
            ax.set_title(f"{method_name(method)}: {kind}", fontsize=10)
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
#: What the comparison figure's MU is, said under its title.
MU_DEFINITION = "MU: the mutual information between an input's label and the weights, a method's knowledge uncertainty"


@themed
def plot_comparison(table: pd.DataFrame, title: str = "") -> plt.Figure:
    """The comparison on one chain, one column per evaluation set (each with its own scale, so a
    shifted set's large values do not hide the test set's differences): the NLL per method
    (labelled sets), and the mean |Delta MU| of each method with an uncertainty decomposition
    against the snapshot ensemble and against the long-chain teacher; one bar per method in the
    method's colour, its value printed beside it. A row has a panel for each evaluation set that has
    values (no empty panel: an unlabelled set has no NLL, and the title says so); the title says what
    MU is (:data:`MU_DEFINITION`)."""
    eval_sets = list(dict.fromkeys(table["eval_set"]))
    metrics = [m for m in _COMPARISON_METRICS if m in table and table[m].notna().any()]
    per_row = {m: list(dict.fromkeys(table.dropna(subset=[m])["method"])) for m in metrics}
    sets = {m: [e for e in eval_sets if table[(table["eval_set"] == e)][m].notna().any()] for m in metrics}
    colours = method_colors(list(dict.fromkeys(table["method"])))
    heights = [max(len(per_row[m]), 2) for m in metrics]
    width = int(np.lcm.reduce([len(sets[m]) for m in metrics])) if metrics else 1  # every row's panels fit
    fig = plt.figure(figsize=(3.6 * len(eval_sets) + 2.2, 0.26 * sum(heights) + 1.4 * len(metrics) + 1.2),
                     layout="constrained")
    grid = fig.add_gridspec(max(len(metrics), 1), width, height_ratios=heights or None)
    above: list[str] = []
    for i, metric in enumerate(metrics):
        methods = per_row[metric]
        span = width // len(sets[metric])
        for j, eval_set in enumerate(sets[metric]):
            ax = fig.add_subplot(grid[i, j * span:(j + 1) * span])
            rows = table[(table["eval_set"] == eval_set)].dropna(subset=[metric]).set_index("method")
            ax.grid(axis="y", visible=False)
            values = np.array([float(rows[metric].get(m, np.nan)) for m in methods])
            ys = np.arange(len(methods))
            ax.barh(ys, values, color=[colours[m] for m in methods], height=0.7)
            # bars start at zero; a value far beyond all others is cut at the edge, its value printed
            focus = focus_range(np.append(values, 0.0), factor=3.0)
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
            ax.set_yticks(ys, [method_name(m) for m in methods] if j == 0 else [""] * len(methods), fontsize=8)
            ax.set_ylim(len(methods) - 0.4, -0.6)
            if j == 0:
                ax.set_ylabel("method")
            ax.set_xlabel(_COMPARISON_METRICS[metric], fontsize=9)
            if sets[metric] != above:  # the sets' names over the first row and wherever the columns change
                ax.set_title(_EVAL_SET_NAMES.get(eval_set, eval_set))
        above = sets[metric]
    lines = [title] if title else []
    if any(m.startswith("mu_") for m in metrics):
        lines.append(MU_DEFINITION)
    if "nll" in sets:
        unlabelled = [_EVAL_SET_NAMES.get(e, e) for e in eval_sets if e not in sets["nll"]]
        if unlabelled:
            lines.append(f"No NLL on {join_words(unlabelled)}: its inputs have no labels")
    if lines:  # each line wrapped to the figure's width
        chars = max(40, int(fig.get_figwidth() * 11))
        fig.suptitle("\n".join(textwrap.fill(line, chars) for line in lines), fontsize=11)
    return fig
