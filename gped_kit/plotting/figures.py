"""Figures of one chain's outputs, shared by the notebooks of several experiments: learning curves of the
teacher and its students, student against teacher expected entropy, reliability diagrams, and a 1-D regression's
predictive mean and variance split. Each experiment's own figures are in its package (``figures`` modules of
:mod:`gped_kit.experiments`). Every function draws in the kit's one theme (:mod:`gped_kit.plotting.theme`)
and computes nothing of the science itself."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import pandas as pd
import torch
from matplotlib.legend_handler import HandlerTuple
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..core.calibration import Calibration
from ..core.likelihoods import RegressionMoments
from .layout import note_off_scale, off_scale_notes, off_scale_points, outside_legend, series_styles, thousands_axis
from .theme import METHOD_COLORS, PALETTE, PAPER_COLOR, TEACHER_COLOR, method_color, themed

__all__ = ["GAP_COLOR", "RELIABILITY_MIN_INPUTS", "plot_entropy_agreement", "plot_learning_curves",
           "plot_regression_uncertainty", "plot_reliability"]


@themed
def plot_learning_curves(history: pd.DataFrame, paper: Mapping[str, float] | None = None,
                         paper_label: str = "the paper's value (T = 10^6)") -> plt.Figure:
    """Teacher-ensemble vs student test NLL and accuracy, and entropy MAE, against SGLD iterations;
    each student its own colour (its method's; a variant a shade of it, dashed) and marker, one
    legend for the figure. A student far from all others in a panel (e.g. a KD student on noise
    inputs at NLL 2.3 beside the others at 0.1-0.3), and first log steps far from all later ones
    (e.g. every student at NLL 2.3 at the first step, before it has learned anything), are left off
    that panel's scale (:func:`~gped_kit.plotting.layout.off_scale_points`), named with their values in a note
    at the panel's edge, so the differences between the others stay visible.

    ``paper``: the paper's values to draw beside the curves (e.g. Table 1's ``teacher_nll``,
    ``student_nll``, ``entropy_mae``), each a dashed horizontal line in its panel, in the colour of the
    curve it belongs to (the teacher's; the panel's student's, where one student is drawn there);
    ``paper_label`` names them in the legend."""
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8), layout="constrained")
    teacher = (history.drop_duplicates("step").dropna(subset=["teacher_nll"]) if "teacher_nll" in history
               else history.iloc[:0])
    students = list(dict.fromkeys(history["student"].dropna())) if "student" in history else []
    styles = series_styles(students, taken=[TEACHER_COLOR])
    teacher_name = "teacher ensemble"
    panels = ((axes[0], "student_nll", "teacher_nll", "test NLL"),
              (axes[1], "student_accuracy", "teacher_accuracy", "test accuracy"),
              (axes[2], "entropy_mae", None, "expected-entropy MAE (nats)"))
    drawn: set[str] = set()
    paper_colours: list[str] = []
    for ax, column, teacher_column, label in panels:
        curves: dict[str, pd.DataFrame] = {}
        if teacher_column and len(teacher) and teacher_column in teacher:
            curves[teacher_name] = teacher[["step", teacher_column]].rename(columns={teacher_column: column})
        if column in history:
            for name, rows in history.dropna(subset=[column]).groupby("student", sort=False):
                curves[f"student {name}"] = rows.sort_values("step", kind="stable")
        series = {k: (v["step"].to_numpy(dtype=float), v[column].to_numpy(dtype=float)) for k, v in curves.items()}
        side = off_scale_points({k: y for k, (_, y) in series.items()}, keep=[teacher_name])
        for name, rows in curves.items():
            rows = rows[side[name] == 0]
            if rows[column].isna().all():
                continue
            drawn.add(name)
            if name == teacher_name:
                ax.plot(rows["step"], rows[column], "-", color=TEACHER_COLOR, lw=2.5, label=name)
            else:
                ax.plot(rows["step"], rows[column], ms=4, label=name, **styles[name.removeprefix("student ")])
        above, below = off_scale_notes(series, side, where="t", keep=[teacher_name], group="student")
        if above or below:
            note_off_scale(ax, above, below)
        in_panel = [n.removeprefix("student ") for n in curves if n != teacher_name and (side[n] == 0).any()]
        for key, colour in ((teacher_column, TEACHER_COLOR),
                            (column, styles[in_panel[0]]["color"] if len(in_panel) == 1 else PAPER_COLOR)):
            if key and paper is not None and pd.notna(paper.get(key)):
                ax.axhline(float(paper[key]), ls="--", lw=1.3, color=colour, label=paper_label, zorder=1)
                paper_colours += [colour] if colour not in paper_colours else []
        thousands_axis(ax.xaxis)
        ax.set(xlabel="SGLD iteration t", ylabel=label, title=label.removesuffix(" (nats)"))
    handles = [Line2D([], [], color=TEACHER_COLOR, lw=2.5)] if len(teacher) else []
    labels = [teacher_name] if len(teacher) else []
    for name in students:
        handles.append(Line2D([], [], ms=4, **styles[name]))
        labels.append(f"student {name}" + ("" if f"student {name}" in drawn else " (off the scale)"))
    if paper_colours:  # one entry, its dashes in the colours of the curves they belong to
        handles.append(tuple(Line2D([], [], ls="--", lw=1.3, color=c) for c in paper_colours))
        labels.append(paper_label)
    outside_legend(fig, handles, labels, handler_map={tuple: HandlerTuple(ndivide=None, pad=0.3)})
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


#: The reliability diagram's gap between the share correct and the mean confidence (a red apart from every method's).
GAP_COLOR = "#b2182b"
#: A reliability diagram's bin with fewer test inputs than this is drawn as an outline: one input moves its share
#: correct by more than 1/20 = 0.05, so a bar that reaches 1.0 (or 0) on a handful of inputs says little.
RELIABILITY_MIN_INPUTS = 20


def _reliability_bins(c: Calibration) -> pd.DataFrame:
    """The bins of ``c`` as a reliability diagram draws them: the slot of confidences of exactly 1 (torchmetrics'
    binning gives it a row of its own) merged into the last bin, whose upper edge is 1 (counts summed, mean
    confidence and share correct weighted by the counts); columns ``left``, ``width``, ``count``, ``confidence``,
    ``accuracy``. The ECE (``c.ece``) is torchmetrics' either way."""
    b = c.bins
    point = b["upper"] <= b["lower"]
    width = 1.0 / c.num_bins
    rows = b.assign(left=b["lower"].where(~point, 1.0 - width), width=(b["upper"] - b["lower"]).where(~point, width))
    rows = rows.assign(left=rows["left"].round(12))
    merged = rows.groupby("left", sort=True).apply(
        lambda g: pd.Series({"width": g["width"].max(), "count": g["count"].sum(),
                             "confidence": (g["confidence"] * g["count"]).sum() / g["count"].sum(),
                             "accuracy": (g["accuracy"] * g["count"]).sum() / g["count"].sum()}),
        include_groups=False)
    return merged.reset_index()


@themed
def plot_reliability(calibrations: dict[str, Calibration], title: str = "") -> plt.Figure:
    """Reliability diagrams, one panel per predictive (``calibrations``: name -> :class:`~gped_kit.core.
    calibration.Calibration`, e.g. the teacher ensemble and each student): per confidence bin the share
    correct against the mean confidence (bars of the bin's width in the predictive's colour; the diagonal is
    perfect calibration), the gap to the mean confidence hatched (no fill, so it mixes no colour into the bar
    under it), the ECE in the title; the test inputs per bin below each, on a log scale shared by the panels
    (a bin of a few inputs shows as plainly as one of thousands). A bin of fewer than
    :data:`RELIABILITY_MIN_INPUTS` inputs is drawn as an outline, its share correct resting on too few inputs
    to read. One legend names every colour the bars take (:func:`_reliability_bins` merges the slot of
    confidences of exactly 1 into the last bin)."""
    names = list(calibrations)
    fig, axes = plt.subplots(2, len(names), figsize=(3.4 * len(names), 4.8 + (0.4 if title else 0)), squeeze=False,
                             layout="constrained", gridspec_kw={"height_ratios": [3, 1.2]}, sharex=True)
    for counts in axes[1, 1:]:
        counts.sharey(axes[1, 0])
    colours = {name: method_color(name) for name in names}
    shades: dict[str, list[str]] = {"many": [], "few": []}  # the colours of the bars of each kind drawn
    for j, name in enumerate(names):
        c = calibrations[name]
        bins = _reliability_bins(c)
        ax, counts = axes[0, j], axes[1, j]
        colour = colours[name]
        few = bins["count"] < RELIABILITY_MIN_INPUTS
        for kind, part, style in (
                ("many", bins[~few], dict(color=colour, alpha=0.85, edgecolor="white", label="share correct")),
                ("few", bins[few], dict(facecolor="none", edgecolor=colour, lw=1.2,
                                        label=f"share correct, a bin of < {RELIABILITY_MIN_INPUTS} inputs"))):
            if len(part):
                shades[kind] += [colour] if colour not in shades[kind] else []
                ax.bar(part["left"], part["accuracy"], width=part["width"], align="edge", **style)
                counts.bar(part["left"], part["count"], width=part["width"], align="edge",
                           **{k: v for k, v in style.items() if k != "label"})
        gap_low = bins[["confidence", "accuracy"]].min(axis=1)
        ax.bar(bins["left"], (bins["confidence"] - bins["accuracy"]).abs(), bottom=gap_low, width=bins["width"],
               align="edge", facecolor="none", edgecolor=GAP_COLOR, hatch="////", lw=0.8,
               label="gap to the mean confidence")
        ax.plot([0, 1], [0, 1], ls="--", color="0.4", lw=1, label="perfect calibration")
        ax.set(xlim=(0, 1), ylim=(0, 1), ylabel="share correct", title=f"{name}: ECE {c.ece:.4f}")
        counts.set_yscale("log")
        counts.set(xlabel="top-label confidence", ylabel="inputs")
    axes[1, 0].set_ylim(bottom=0.5)  # a bin of one input shows as a bar, not as the axis' edge
    handles: list = [tuple(Patch(color=colour, alpha=0.85) for colour in shades["many"])] if shades["many"] else []
    labels = ["share correct"] if shades["many"] else []
    if shades["few"]:
        handles.append(tuple(Patch(facecolor="none", edgecolor=colour, lw=1.2) for colour in shades["few"]))
        labels.append(f"share correct, a bin of < {RELIABILITY_MIN_INPUTS} inputs")
    handles += [Patch(facecolor="none", edgecolor=GAP_COLOR, hatch="////", lw=0.8),
                Line2D([], [], ls="--", color="0.4", lw=1)]
    labels += ["gap to the mean confidence", "perfect calibration"]
    outside_legend(fig, handles, labels, where="lower", handler_map={tuple: HandlerTuple(ndivide=None, pad=0)})
    if title:
        fig.suptitle(title)
    return fig


@themed
def plot_regression_uncertainty(train_x: torch.Tensor, train_y: torch.Tensor, grid: torch.Tensor,
                                moments: dict[str, RegressionMoments],
                                data_range: tuple[float, float] | None = None) -> plt.Figure:
    """A 1-D regression distilled with the ``predictive_variance`` target: (a) the data and each
    model's predictive mean E[mu] on ``grid``, the first model (the teacher ensemble) with a band
    of +-2 predictive standard deviations; (b) the variance split per model, aleatoric E[sigma^2]
    and epistemic Var[mu] (:func:`gped_kit.core.targets.regression_moments`), on a log axis.

    One colour per quantity and one line style per model (the first solid and wide, the others
    dashed on top), so a student that matches its teacher shows as dashes on the teacher's line
    instead of hiding it. ``data_range`` (x from, to) shades where there are no training inputs."""
    if not moments:
        raise ValueError("moments is empty: give at least one model's RegressionMoments, "
                         "e.g. {'teacher ensemble': regression_moments(...)}")
    x = grid.reshape(len(grid), -1)[:, 0].double().numpy()
    dashes = ("-", "--", ":", "-.")
    widths = (3.2, 1.6, 1.6, 1.6)
    colours = {"mean": PALETTE[0], "aleatoric": PALETTE[1], "epistemic": PALETTE[2]}
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.9), layout="constrained")
    axes[0].scatter(train_x.reshape(len(train_x), -1)[:, 0].numpy(), train_y.reshape(-1).numpy(), s=5, color="0.7",
                    label="training data", zorder=1)
    for i, (name, m) in enumerate(moments.items()):
        ls, lw, alpha = dashes[i % len(dashes)], widths[min(i, 1)], 0.45 if i == 0 else 1.0
        mean = m.mean.reshape(len(x), -1)[:, 0].double().numpy()
        if i == 0:
            sd = m.total.reshape(len(x), -1)[:, 0].double().sqrt().numpy()
            axes[0].fill_between(x, mean - 2 * sd, mean + 2 * sd, color=colours["mean"], alpha=0.12, lw=0,
                                 label=f"{name}: mean ± 2 sd")
        axes[0].plot(x, mean, ls=ls, lw=lw, color=colours["mean"], alpha=alpha,
                     label=f"{name}: mean E[μ]", zorder=2 + i)
        for kind in ("aleatoric", "epistemic"):
            values = getattr(m, kind).reshape(len(x), -1)[:, 0].double().numpy()
            axes[1].plot(x, values, ls=ls, lw=lw, color=colours[kind], alpha=alpha, zorder=2 + i,
                         label=f"{name}: {kind}")
    if data_range is not None:
        for ax in axes:
            for lo, hi in ((x.min(), min(data_range)), (max(data_range), x.max())):
                if hi > lo:
                    ax.axvspan(lo, hi, color="0.93", lw=0, zorder=0)
    axes[0].set(xlabel="x", ylabel="y", title="(a) data and predictive mean")
    axes[1].set(xlabel="x", ylabel="variance (log scale)", yscale="log", title="(b) variance split")
    handles = [Line2D([], [], ls="none", marker="o", ms=4, color="0.7"), Patch(color=colours["mean"], alpha=0.12),
               Line2D([], [], color=colours["mean"], lw=2), Line2D([], [], color=colours["aleatoric"], lw=2),
               Line2D([], [], color=colours["epistemic"], lw=2)]
    first = next(iter(moments))
    labels = ["training data", f"{first}: mean ± 2 sd", "predictive mean E[μ]", "aleatoric E[σ²]",
              "epistemic Var[μ]"]
    for i, name in enumerate(moments):
        handles.append(Line2D([], [], color="0.3", ls=dashes[i % len(dashes)], lw=widths[min(i, 1)],
                              alpha=0.45 if i == 0 else 1.0))
        labels.append(name)
    if data_range is not None:
        handles.append(Patch(color="0.93"))
        labels.append("no training inputs")
    outside_legend(fig, handles, labels)
    return fig
