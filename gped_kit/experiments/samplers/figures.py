"""The sampler study's figure (notebook 10): each candidate sampler's teacher and students against wall-clock
seconds, with the paper's Table 1 values (:func:`plot_sampler_study`)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from ...plotting.layout import (
    note_off_scale,
    off_scale_notes,
    off_scale_points,
    outside_legend,
)
from ...plotting.theme import (
    MARKERS,
    PAPER_COLOR,
    distinct_colors,
    themed,
)

__all__ = ["plot_sampler_study"]


@themed
def plot_sampler_study(history: pd.DataFrame, paper: dict[str, float]) -> plt.Figure:
    """Notebook 10: teacher-ensemble NLL (solid: all kept samples; dotted: the recent window),
    student NLL and entropy MAE against wall-clock seconds, one colour and marker per candidate
    sampler (mean over seeds at each log point; colours far apart, so curves that cross stay
    apart), with the paper's Table 1 values at T = 10^6 as dashed lines; one legend for the figure.
    A curve far from all others in a panel, or the first points of a curve far from everything
    after them (e.g. a cyclical schedule's student at NLL 2.3 at its first log point), are left off
    that panel's scale (:func:`~gped_kit.plotting.layout.off_scale_points`) and named with their values at its
    edge."""
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), sharex=True, layout="constrained")
    candidates = list(dict.fromkeys(history["candidate"]))
    colours = dict(zip(candidates, distinct_colors(len(candidates), taken=[PAPER_COLOR])))
    markers = {c: MARKERS[i % len(MARKERS)] for i, c in enumerate(candidates)}
    panels = (("teacher NLL", "teacher_nll", None), ("student NLL", "student_nll", "predictive (U_s)"),
              ("entropy MAE", "entropy_mae", "expected entropy (U_o)"))
    for ax, (title, column, student) in zip(axes, panels):
        rows = history if student is None else history[history["student"] == student]
        rows = rows.dropna(subset=[column])
        curves: dict[str, tuple[str, str, pd.DataFrame]] = {}  # name -> candidate, column, curve
        for candidate, part in rows.groupby("candidate", sort=False):
            curve = part.groupby("step")[[column, "elapsed_s"] + (["teacher_recent_nll"] if student is None
                                                                   else [])].mean()
            curves[candidate] = (candidate, column, curve)
            if student is None:
                curves[f"{candidate}, recent window"] = (candidate, "teacher_recent_nll", curve)
        series = {k: (c["elapsed_s"].to_numpy(dtype=float), c[col].to_numpy(dtype=float))
                  for k, (_, col, c) in curves.items()}
        paper_name = "paper, T = 10^6"
        side = off_scale_points({**{k: y for k, (_, y) in series.items()}, paper_name: np.array([paper[title]])},
                                keep=[paper_name])
        for name, (candidate, col, curve) in curves.items():
            curve = curve[side[name] == 0]
            if curve[col].isna().all():
                continue
            if col == "teacher_recent_nll":
                ax.plot(curve["elapsed_s"], curve[col], ":", color=colours[candidate], lw=1.5, label=name)
            else:
                ax.plot(curve["elapsed_s"], curve[col], "-", color=colours[candidate], marker=markers[candidate],
                        ms=4, lw=2, label=candidate)
        ax.axhline(paper[title], color=PAPER_COLOR, ls="--", lw=1, label=paper_name)
        above, below = off_scale_notes(series, side)
        if above or below:
            note_off_scale(ax, above, below)
        ax.set(xlabel="wall-clock seconds (2-core CPU)", ylabel=title, title=title)
    handles = [Line2D([], [], color=colours[c], marker=markers[c], ms=4, lw=2) for c in candidates]
    labels = list(candidates)
    handles += [Line2D([], [], color="0.45", ls=":", lw=1.5), Line2D([], [], color=PAPER_COLOR, ls="--", lw=1)]
    labels += ["dotted: teacher on the recent window", "paper, T = 10^6 (Table 1)"]
    outside_legend(fig, handles, labels)
    return fig
