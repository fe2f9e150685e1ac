"""Experiment 1's figure: Table 1 drawn, ours beside the paper's values (:func:`plot_table1`)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ...plotting.layout import (
    outside_legend,
    unique_handles,
)
from ...plotting.theme import (
    PAPER_COLOR,
    method_color,
    themed,
)
from ..verdicts import WITHIN
from .analysis import METRIC_NAMES, MODEL_NAMES

__all__ = ["plot_table1"]


@themed
def plot_table1(table1: pd.DataFrame, title: str = "") -> plt.Figure:
    """Table 1 as a figure: one panel per quantity (teacher NLL, student NLL, entropy MAE), one column per
    model with a run of ours; ours as the mean over seeds with an error bar of one standard deviation (none
    for one seed), the paper's value as a black cross inside a grey band of +-10% (what "within 10%" means,
    two-sided). ``table1`` is :func:`~gped_kit.experiments.experiment1.experiment1_table`'s."""
    t = table1.set_index("model")
    models = [m for m in MODEL_NAMES if m in t.index and pd.notna(t.loc[m, "teacher_nll"])]
    fig, axes = plt.subplots(1, len(METRIC_NAMES), figsize=(3.6 * len(METRIC_NAMES), 3.4 + (0.4 if title else 0)),
                             layout="constrained", squeeze=False)
    for ax, (metric, label) in zip(axes[0], METRIC_NAMES.items()):
        xs = np.arange(len(models))
        for x, m in zip(xs, models):
            paper = float(t.loc[m, f"{metric}_paper"])
            ax.fill_between([x - 0.3, x + 0.3], (1 - WITHIN) * paper, (1 + WITHIN) * paper, color="0.88", lw=0,
                            label="the paper's ±10%", zorder=1)
            ax.plot([x + 0.12], [paper], "x", color=PAPER_COLOR, ms=9, mew=2, label="the paper's (T = 10^6)",
                    zorder=4)
            std = t.loc[m, f"{metric}_std"]
            seeds = int(t.loc[m, "seeds"])
            ax.errorbar([x - 0.12], [float(t.loc[m, metric])], yerr=None if pd.isna(std) else [[std], [std]],
                        fmt="o", color=method_color("GPED"), ms=7, capsize=4, zorder=3,
                        label=f"ours (mean ± std over {seeds} seeds)" if seeds > 1 else "ours (one seed)")
        ax.set_xticks(xs, [MODEL_NAMES[m] for m in models])
        ax.set_xlim(-0.6, len(models) - 0.4)
        ax.set_ylim(bottom=0)
        ax.margins(y=0.15)
        ax.set(xlabel="model", ylabel=label, title=label)
    outside_legend(fig, *unique_handles(axes.flat), where="lower")
    if title:
        fig.suptitle(title)
    return fig
