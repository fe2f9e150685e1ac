"""Experiment 2's figures: Figures 1, 4 and 5 of the paper (:func:`plot_uncertainty_grid`; ours above the
paper's numbers, :func:`plot_experiment2_vs_paper`) and Figure 3, the masking manipulation (Appendix A.1): test
images with one random m x m zero square each (:func:`gped_kit.data.transforms.apply_square_mask`, seeded, so the
same images and squares come back every time), one column per mask size m with its masking rate r = m^2 / (H W)
(:func:`plot_masked_examples`)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from ...data.transforms import apply_square_mask, masking_rate
from ...plotting.layout import (
    outside_legend,
)
from ...plotting.save import mark_paper_only
from ...plotting.theme import (
    PALETTE,
    sequential_colors,
    style_axes,
    themed,
)
from .. import paper_tables

__all__ = ["EXPERIMENT2_METRICS", "NON_NEGATIVE_METRICS", "plot_experiment2_vs_paper", "plot_masked_examples",
           "plot_uncertainty_grid", "select_examples", "square_mask_region"]

def _as_nchw(images: torch.Tensor) -> torch.Tensor:
    if not isinstance(images, torch.Tensor):
        raise TypeError(f"images must be a torch.Tensor, got {type(images).__name__}")
    if images.dim() == 3:
        images = images.unsqueeze(1)
    if images.dim() != 4 or images.shape[0] == 0 or images.shape[1] not in (1, 3):
        raise ValueError(f"images must be a non-empty (N, H, W) or (N, C, H, W) tensor with C in (1, 3), "
                         f"got shape {tuple(images.shape)}")
    return images


def select_examples(images: torch.Tensor, num_examples: int, seed: int) -> torch.Tensor:
    """``num_examples`` images drawn without replacement with a CPU generator seeded by ``seed``
    (the same images for the same arguments), as (k, C, H, W)."""
    images = _as_nchw(images)
    if not 1 <= num_examples <= images.shape[0]:
        raise ValueError(f"num_examples={num_examples} must lie in [1, {images.shape[0]}] (the number of images)")
    idx = torch.randperm(images.shape[0], generator=torch.Generator().manual_seed(int(seed)))[:num_examples]
    return images[idx.to(images.device)].cpu().clone()


def square_mask_region(images: torch.Tensor, mask_size: int, seed: int) -> torch.Tensor:
    """Boolean (N, 1, H, W) map of the square that ``apply_square_mask(images, mask_size, seed)``
    zeroes (its positions depend only on N, H, W, m and the seed)."""
    images = _as_nchw(images)
    n, _, h, w = images.shape
    ones = torch.ones((n, 1, h, w), dtype=torch.uint8)
    return apply_square_mask(ones, mask_size, seed) == 0


def pixel_max(images: torch.Tensor) -> float:
    """The white level of ``images``: 255 for uint8, else the larger of 1 and their maximum."""
    return 255.0 if images.dtype == torch.uint8 else float(max(1.0, images.max().item()))


def show_masked_image(ax: plt.Axes, image: torch.Tensor, region: torch.Tensor, mask_size: int, vmax: float,
                outline: bool) -> None:
    """Draw one (C, H, W) image in grey (or RGB), with the red border of ``region`` if ``outline``."""
    img = image[0] if image.shape[0] == 1 else image.permute(1, 2, 0)
    ax.imshow(img.numpy(), cmap="gray", vmin=0, vmax=vmax, interpolation="nearest")
    if outline and mask_size > 0:
        rows, cols = torch.nonzero(region, as_tuple=True)
        ax.add_patch(Rectangle((int(cols.min()) - 0.5, int(rows.min()) - 0.5), mask_size, mask_size,
                               fill=False, edgecolor="red", linewidth=1, clip_on=False))
    ax.set_xticks([])
    ax.set_yticks([])
    ax.grid(False)


def plot_masked_examples(images: torch.Tensor, mask_sizes: Sequence[int], seed: int = 0,
                         outline: bool = True, axes_size: float = 1.3) -> plt.Figure:
    """Figure 3 of the paper as a grid: one row per image, one column per mask size m, each
    image with one random m x m zero square (``apply_square_mask(images, m, seed)``); column
    titles give m and r = m^2 / (H W). ``outline`` draws the square's border in red (masked
    pixels are 0, the background colour, so a square over the background is otherwise invisible).
    """
    images = _as_nchw(images).cpu()
    mask_sizes = [int(m) for m in mask_sizes]
    if not mask_sizes:
        raise ValueError("mask_sizes must not be empty")
    n, _, h, w = images.shape
    bad = [m for m in mask_sizes if not 0 <= m <= min(h, w)]
    if bad:
        raise ValueError(f"mask sizes {bad} lie outside [0, {min(h, w)}] for {h}x{w} images")
    vmax = pixel_max(images)
    fig, axes = plt.subplots(n, len(mask_sizes), figsize=(axes_size * len(mask_sizes), axes_size * n + 0.4),
                             squeeze=False)
    for j, m in enumerate(mask_sizes):
        masked = apply_square_mask(images, m, seed)
        region = square_mask_region(images, m, seed)
        for i in range(n):
            show_masked_image(axes[i, j], masked[i], region[i, 0], m, vmax, outline)
        axes[0, j].set_title(f"m = {m}\nr = {masking_rate(m, h, w):.3f}", fontsize=9)
    fig.tight_layout()
    return fig


EXPERIMENT2_METRICS = {
    "teacher_nll": "teacher test NLL",
    "nll_gap": "student - teacher NLL",
    "entropy_mae": "expected-entropy MAE",
}

#: Metrics that cannot be negative (an NLL, an MAE, an entropy): an error bar of theirs stops at 0, their floor.
NON_NEGATIVE_METRICS = frozenset({"teacher_nll", "student_nll", "entropy_mae", "nll", "ece"})

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
               metrics: dict[str, str], colours: dict, dashes: dict, highlight: dict | None) -> tuple[int, bool]:
    """Draw one line per (``hue``, ``style``) level in each panel: the mean of the rows at each ``x``.
    Several rows at one point (one per seed) add an error bar of +-1 standard deviation, in the line's
    colour, shifted a little sideways per line so that the bars of lines at the same point stay apart;
    for a metric that cannot be negative (:data:`NON_NEGATIVE_METRICS`) a bar reaching below 0 stops at 0.
    Returns the most rows averaged at one point (1: no error bars) and whether a bar was cut at 0."""
    keys = [c for c in (hue, style) if c]
    most, cut = 1, False
    span = table[x].max() - table[x].min() if x in table and len(table) else 0
    for ax, (metric, label) in zip(axes, metrics.items()):
        rows = table.dropna(subset=[metric]) if metric in table else table.iloc[:0]
        groups = list(rows.groupby(keys, sort=True)) if keys and len(rows) else ([((), rows)] if len(rows) else [])
        for k, (key, part) in enumerate(groups):
            key = key if isinstance(key, tuple) else (key,)
            level = dict(zip(keys, key))
            stats = part.groupby(x)[metric].agg(["mean", "std", "count"])
            colour = colours.get(level.get(hue), PALETTE[0]) if hue else PALETTE[0]
            ax.plot(stats.index, stats["mean"].to_numpy(), marker="o", ms=4, color=colour,
                    ls=dashes.get(level.get(style), "-") if style else "-")
            spread = stats[stats["count"] > 1]
            if len(spread) and span:
                most = max(most, int(spread["count"].max()))
                shift = (k - (len(groups) - 1) / 2) * 0.006 * float(span)
                mean, std = spread["mean"].to_numpy(), spread["std"].to_numpy()
                below = np.minimum(std, np.maximum(mean, 0.0)) if metric in NON_NEGATIVE_METRICS else std
                cut |= bool((below < std).any())
                ax.errorbar(spread.index.to_numpy(dtype=float) + shift, mean, yerr=[below, std], fmt="none",
                            ecolor=colour, elinewidth=1.3, capsize=0, alpha=0.85, zorder=3)
        if highlight is not None and len(rows):
            sel = rows
            for key, value in highlight.items():
                sel = sel[sel[key] == value]
            ax.scatter(sel[x], sel[metric], s=180, facecolors="none", edgecolors="red", linewidths=2, zorder=5)
        if x == "labelled_size" and len(rows):
            levels = sorted(rows[x].unique())
            ax.set_xticks(levels, [f"{int(v / 1000)}k" if v % 1000 == 0 else f"{int(v):,}" for v in levels])
        ax.set(xlabel=_AXIS_NAMES.get(x, x.replace("_", " ")), ylabel=label)
    return most, cut


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
        outside_legend(fig, handles, labels)
    elif legend == "axes" and handles:
        axes[len(metrics) - 1].legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                                      borderaxespad=0.0)
    return fig


@themed
def plot_experiment2_vs_paper(ours: pd.DataFrame, paper: pd.DataFrame, x: str = "masking_rate",
                              title: str = "") -> plt.Figure:
    """Figures 1/4/5 layout, ours (top row) above the paper's numbers from Tables 5-7 (bottom
    row, named by the paper's figure and the table its values are from, e.g. "the paper's Figure 4
    (its Table 6)"), same metrics and axes (shared y range per metric); one line per labelled-set
    size, line style per estimator, one legend for the figure. Without any result of ours (e.g. CIFAR-10
    absent) only the paper's row is drawn, labelled as the paper's, and the figure is marked as the
    paper's numbers only (:func:`mark_paper_only`: :func:`save_figure` names it ``<name>_paper_only``).

    ``ours`` may hold one row per seed of each cell and estimator (e.g. a ``seed`` column): its lines
    are then the mean over the seeds, with error bars of +-1 standard deviation (the seeds' spread),
    said in the row's title and the legend; a bar of a metric that cannot be negative stops at 0 (its
    floor), and the legend says so where one does."""
    metrics = EXPERIMENT2_METRICS
    hue = None if x == "labelled_size" else "labelled_size"
    have_ours = len(ours) > 0 and any(m in ours and ours[m].notna().any() for m in metrics)
    tables = [ours, paper] if have_ours else [paper]
    colours, dashes = _grid_styles(tables, hue, "estimator")
    names = sorted(paper["table"].dropna().unique()) if "table" in paper else []
    figures = [paper_tables.EXPERIMENT2_FIGURES[n] for n in names if n in paper_tables.EXPERIMENT2_FIGURES]
    if names and len(figures) == len(names):  # the figure the paper draws, and the table its values are from
        paper_label = f"the paper's {', '.join(figures)} (its {', '.join(names)})"
    else:
        paper_label = "the paper's " + (", ".join(names) if names else "Tables 5-7")
    ncols = len(metrics)
    fig = plt.figure(figsize=(4.3 * ncols + 2.2, 3.7 * len(tables) + (0.5 if title else 0)), layout="constrained")
    rows = fig.subfigures(len(tables), 1, squeeze=False)[:, 0]
    axes = []
    alone = (paper_label[:-1] + "; no results of ours to show)" if paper_label.endswith(")")
             else f"{paper_label} (no results of ours to show)")
    labels = ["ours", paper_label] if have_ours else [alone]
    seeds, cut = 1, False
    for subfig, table, label in zip(rows, tables, labels):
        row_axes = subfig.subplots(1, ncols, sharex=True)
        most, cut_here = _draw_grid(row_axes, table, x, hue, "estimator", metrics, colours, dashes, None)
        cut |= cut_here
        if table is ours and most > 1:
            seeds = int(ours["seed"].nunique()) if "seed" in ours else most
            label = f"{label} (mean ± std over {seeds} seeds)"
        subfig.suptitle(label, fontsize=12, x=0.02, ha="left", fontweight="bold")
        axes.append(row_axes)
    if have_ours:
        for ax_ours, ax_paper in zip(axes[0], axes[1]):
            low = min(ax_ours.get_ylim()[0], ax_paper.get_ylim()[0])
            high = max(ax_ours.get_ylim()[1], ax_paper.get_ylim()[1])
            ax_ours.set_ylim(low, high)
            ax_paper.set_ylim(low, high)
    handles, legend_labels = _grid_legend(hue, "estimator", colours, dashes)
    if seeds > 1:
        handles.append(Line2D([], [], color="0.3", ls="none", marker="|", ms=12, mew=1.3))
        legend_labels.append(f"ours: ± 1 std over {seeds} seeds" + (", cut at 0" if cut else ""))
    outside_legend(fig, handles, legend_labels)
    if title:
        fig.suptitle(title)
    return fig if have_ours else mark_paper_only(fig)
