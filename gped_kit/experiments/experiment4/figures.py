"""Experiment 4's figures: Figure 14, in-distribution accuracy and NLL of the ensemble and its students beside the
paper's (:func:`plot_experiment4_in_distribution`), and Figure 15, a student's expected data uncertainty against the
ensemble's per test input (:func:`plot_data_uncertainty_joint`)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import torch
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ...plotting.layout import (
    outside_legend,
    place_value_labels,
    unique_handles,
)
from ...plotting.theme import (
    MARKERS,
    PAPER_COLOR,
    method_color,
    themed,
)
from ..prose import method_name, model_name

__all__ = ["plot_data_uncertainty_joint", "plot_experiment4_in_distribution"]


#: Markers of the methods in Figure 14, ours filled in the method's colour, the paper's open in black.
_METHOD_MARKERS = {"Ensemble": "D", "GPED": "o", "EnD2": "s", "Hydra": "^", "KD": "v"}


@themed
def plot_experiment4_in_distribution(comparison: pd.DataFrame, title: str = "") -> plt.Figure:
    """Figure 14: test accuracy and NLL of the ensemble, GPED and EnD2 students per
    (estimator, student size), one row per model; the paper's values (Tables 2, 8-10: the NLL) as
    open black markers of each method's shape, at the same place as ours. ``comparison`` is
    Experiment 4's in-distribution comparison table (one row per model, method, estimator, student
    size and metric, with ``value`` and ``value_paper``; with several seeds, one row per seed: the
    figure shows their mean).

    Drawn as dots (a filled marker per method in its colour) on an axis that spans the values: bars
    would have to start at zero, where accuracies of 0.80-0.87 look alike. Each metric has one y range
    for every model (the panels of a column share it), and the models are named as in the paper (FCNN,
    CNN-MNIST). Each of our values is
    printed beside its dot, above it or, where that would overlap another label or a marker (two
    methods of equal accuracy side by side), below it
    (:func:`~gped_kit.plotting.layout.place_value_labels`)."""
    models = list(dict.fromkeys(comparison["model"]))
    fig, axes = plt.subplots(len(models), 2, figsize=(13, 3.6 * len(models) + 0.6), squeeze=False,
                             layout="constrained")
    methods = [m for m in ("Ensemble", "GPED", "EnD2") if m in set(comparison["method"])]
    methods += [m for m in dict.fromkeys(comparison["method"]) if m not in methods]
    markers = {m: _METHOD_MARKERS.get(m, MARKERS[(i + 5) % len(MARKERS)]) for i, m in enumerate(methods)}
    labels_to_place = []
    for row, model in zip(axes, models):
        df = comparison[comparison["model"] == model].copy()
        df["setting"] = df["estimator"] + ", " + df["student"].str.replace("largest_width_multiplier", "largest")
        settings = list(dict.fromkeys(df.sort_values(["student", "estimator"])["setting"]))
        width = 0.6 / len(methods)
        for ax, metric, label in ((row[0], "accuracy", "test accuracy"), (row[1], "nll", "test NLL")):
            ax.grid(axis="x", visible=False)
            for i in range(len(settings) - 1):
                ax.axvline(i + 0.5, color="0.85", lw=0.8)
            points, spots = [], []
            for j, method in enumerate(methods):
                sel = df[(df["metric"] == metric) & (df["method"] == method)]  # several seeds: their mean
                sel = sel.groupby("setting")[[c for c in ("value", "value_paper") if c in sel]].mean()
                xs = [i + (j - (len(methods) - 1) / 2) * width for i in range(len(settings))]
                values = [sel["value"].get(s, float("nan")) for s in settings]
                ax.plot(xs, values, ls="none", marker=markers[method], ms=7, color=method_color(method),
                        label=f"{method_name(method)} (ours)", zorder=3)
                points += [(x, v, f"{v:.3f}") for x, v in zip(xs, values)]
                spots += list(zip(xs, values))
                paper = [sel["value_paper"].get(s, float("nan")) for s in settings] if "value_paper" in sel else []
                if any(pd.notna(paper)):
                    ax.plot(xs, paper, ls="none", marker=markers[method], ms=9, mew=1.6, mfc="none",
                            mec=PAPER_COLOR, label=f"{method_name(method)} (the paper's)", zorder=4)
                    spots += list(zip(xs, paper))
            ax.set_xticks(range(len(settings)), settings, fontsize=9)
            ax.set_xlim(-0.5, len(settings) - 0.5)
            ax.margins(y=0.22)
            ax.set(xlabel="estimator, student size", ylabel=label, title=f"{model_name(model)}: {label}")
            labels_to_place.append((ax, points, spots))
    for column in axes.T:  # one metric per column: one y range for every model, a value at one height in each
        low = min(ax.get_ylim()[0] for ax in column)
        high = max(ax.get_ylim()[1] for ax in column)
        for ax in column:
            ax.set_ylim(low, high)
    handles, names = unique_handles(axes.flat)
    shown = [method_name(m) for m in methods]
    order = sorted(range(len(names)), key=lambda k: (shown.index(names[k].rsplit(" (", 1)[0])
                                                     if names[k].rsplit(" (", 1)[0] in shown else len(shown),
                                                     "paper" in names[k]))
    outside_legend(fig, [handles[k] for k in order], [names[k] for k in order], where="lower",
                   ncol=len(methods))
    if title:
        fig.suptitle(title)
    for ax, points, spots in labels_to_place:
        left_out = place_value_labels(ax, points, spots)
        if left_out:
            ax.text(0.99, 0.01, f"{left_out} value label(s) left out: no room beside the dot", transform=ax.transAxes,
                    ha="right", va="bottom", fontsize=7, color="0.4")
    return fig


_HEXBIN_CMAPS = {"GPED": "Blues", "EnD2": "Oranges", "Hydra": "Greens", "KD": "Purples"}


@themed
def plot_data_uncertainty_joint(ensemble: torch.Tensor, students: dict[str, torch.Tensor],
                                title: str = "") -> plt.Figure:
    """Figure 15: per test input, a student's expected data uncertainty E[H] against the teacher
    ensemble's (joint density as hexbins in the shades of the student's method, with a colour bar
    of the inputs per hexagon; diagonal = perfect distillation), with the marginal histograms of
    the ensemble (top, grey) and of the student (right: its outline in its method's colour over the
    ensemble's in light grey). At most two students per row (four make a 2 x 2 grid, about 1,700
    pixels wide at the kit's 150 dpi); a legend under the panels, in two columns at the legend's
    size, says which colour is which."""
    t = ensemble.flatten().double().numpy()
    top = float(max([t.max(), *[s.max().item() for s in students.values()]])) * 1.02
    ncols = min(len(students), 2)
    nrows = -(-len(students) // ncols)
    legend_in, title_in, panel_w, panel_h = 0.9, 0.8 if title else 0.3, 5.6, 5.0
    width, height = panel_w * ncols + 0.4, panel_h * nrows + legend_in + title_in
    fig = plt.figure(figsize=(width, height))
    outer = fig.add_gridspec(nrows, ncols, wspace=0.42, hspace=0.24, left=0.6 / width, right=1 - 0.3 / width,
                             bottom=(legend_in + 0.45) / height, top=1 - title_in / height)
    bins = 40
    for k, (name, values) in enumerate(students.items()):
        s = values.flatten().double().numpy()
        grid = outer[k // ncols, k % ncols].subgridspec(2, 3, width_ratios=(4, 1, 0.14), height_ratios=(1, 4),
                                                        wspace=0.06, hspace=0.05)
        ax = fig.add_subplot(grid[1, 0])
        ax_top = fig.add_subplot(grid[0, 0], sharex=ax)
        ax_right = fig.add_subplot(grid[1, 1], sharey=ax)
        family = next((f for f in _HEXBIN_CMAPS if method_color(name) == method_color(f)), None)
        hexes = ax.hexbin(t, s, gridsize=40, extent=(0, top, 0, top), bins="log",
                          cmap=_HEXBIN_CMAPS.get(family, "Greys"), mincnt=1)
        fig.colorbar(hexes, cax=fig.add_subplot(grid[1, 2]), label="test inputs per hexagon")
        ax.plot([0, top], [0, top], "k--", lw=1)
        ax.set(xlim=(0, top), ylim=(0, top), xlabel="ensemble E[H] (nats)", ylabel=f"{method_name(name)} E[H] (nats)")
        ax_top.hist(t, bins=bins, range=(0, top), color="0.55")
        ax_right.hist(t, bins=bins, range=(0, top), orientation="horizontal", color="0.8")
        ax_right.hist(s, bins=bins, range=(0, top), orientation="horizontal", histtype="step", lw=1.5,
                      color=method_color(name))
        for a in (ax_top, ax_right):
            a.grid(False)
            a.spines[:].set_visible(False)
        ax_top.tick_params(labelbottom=False, labelleft=False, left=False)
        ax_right.tick_params(labelleft=False, labelbottom=False, bottom=False)
        ax_top.set_title(method_name(name))
    families = list(dict.fromkeys(next((f for f in _HEXBIN_CMAPS if method_color(n) == method_color(f)), n)
                                  for n in students))
    handles = [Patch(color="0.55"), Line2D([], [], color="black", ls="--", lw=1)]
    labels = ["ensemble's E[H] (top; right in light grey)", "diagonal: student = ensemble"]
    for family in families:
        handles.append(Line2D([], [], color=method_color(family), lw=2))
        labels.append(f"{family} student's E[H] (right, outline; hexbins in its shades)")
    fig.legend(handles, labels, loc="lower center", ncol=2, bbox_to_anchor=(0.5, 0.15 / height), fontsize=10,
               handlelength=2.5)
    if title:
        fig.suptitle(title, y=1 - 0.15 / height, fontsize=13)
    return fig
