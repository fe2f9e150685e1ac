"""Figures shared by the notebooks; every figure is saved to ``figures/`` as PNG and PDF.

Plots draw tables and tensors that the experiments computed (a chain's history, an
Experiment 2 cells table, an Experiment 3 search table, uncertainties on a grid); they compute
nothing of the science themselves: the Pareto frontier of Figures 2 and 6-13 is
:func:`gped_kit.experiments.experiment3.pareto_front`'s.

Every function draws in the kit's one theme (:mod:`gped_kit.viz.theme`: fonts, grid, palette, one
colour per method), applied while it draws and undone when it returns.

A figure that shows only the paper's numbers (no result of ours, e.g. Figure 5 without CIFAR-10)
is marked as such (:func:`mark_paper_only`) and saved under a name ending in ``_paper_only``, so
that no file of the paper's numbers is named like a result; likewise a table made by
:func:`gped_kit.viz.tables.paper_table`. Files are written without time stamps or software versions
(:data:`gped_kit.viz.theme.SAVEFIG_METADATA`): saving unchanged results again changes no byte.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import matplotlib.ticker as mticker
import numpy as np
import pandas as pd
import torch
from matplotlib.legend_handler import HandlerTuple
from matplotlib.lines import Line2D
from matplotlib.patches import Circle, Patch
from matplotlib.transforms import blended_transform_factory

from ..core.calibration import Calibration
from ..core.likelihoods import RegressionMoments
from ..core.uncertainty import Uncertainties
from ..experiments import paper_tables
from ..experiments.experiment3 import COSTS, METHODS, METRICS, metric_rows, pareto_front, search_candidates
from ..experiments.prose import join_words, model_name
from ..files import atomic_write_bytes
from .snapshot import same_image
from .tables import PAPER_ONLY_ATTR, integer_columns, markdown_table
from .theme import (
    CLASS_COLORS,
    MARKERS,
    METHOD_COLORS,
    PALETTE,
    PAPER_COLOR,
    TEACHER_COLOR,
    distinct_colors,
    kit_theme,
    method_color,
    method_colors,
    method_variant,
    savefig_metadata,
    sequential_colors,
    style_axes,
    themed,
)

__all__ = [
    "EXPERIMENT2_METRICS", "METHOD_COLORS", "PAPER_ONLY_SUFFIX", "is_paper_only", "mark_paper_only", "plot_comparison",
    "plot_data_uncertainty_joint", "plot_entropy_agreement", "plot_experiment2_vs_paper",
    "pareto_paper_reference", "plot_experiment4_in_distribution", "plot_learning_curves", "plot_pareto",
    "plot_pareto_figure", "plot_regression_uncertainty", "plot_reliability", "plot_sampler_study", "plot_table1",
    "plot_uncertainty_grid",
    "plot_uncertainty_maps",
    "save_figure", "save_table",
]

#: The end of the file name of a figure or table that shows only the paper's numbers.
PAPER_ONLY_SUFFIX = "_paper_only"
#: The label (:meth:`matplotlib.figure.Figure.get_label`) of a figure that shows only the paper's numbers.
PAPER_ONLY_LABEL = "the paper's numbers only"


def mark_paper_only(fig: plt.Figure) -> plt.Figure:
    """Mark ``fig`` as showing only the paper's numbers (no result of ours): :func:`save_figure`
    then names its files ``<name>_paper_only``. Returns ``fig``."""
    fig.set_label(PAPER_ONLY_LABEL)
    return fig


def is_paper_only(fig: plt.Figure) -> bool:
    """Whether ``fig`` was marked by :func:`mark_paper_only`."""
    return fig.get_label() == PAPER_ONLY_LABEL


def _file_stem(name: str, paper_only: bool) -> str:
    if not name or Path(name).name != name:
        raise ValueError(f"name={name!r}: a file name without folders is needed (the folder is figures_dir)")
    return f"{name}{PAPER_ONLY_SUFFIX}" if paper_only and not name.endswith(PAPER_ONLY_SUFFIX) else name


def save_figure(fig: plt.Figure, name: str, figures_dir: str | Path) -> list[Path]:
    """Save ``fig`` as ``<figures_dir>/<name>.png`` and ``.pdf``; returns the paths. A figure of
    the paper's numbers only (:func:`mark_paper_only`) is saved as ``<name>_paper_only``. No time
    stamp or software version is written (:func:`~gped_kit.viz.theme.savefig_metadata`): the same
    figure saved twice gives the same bytes. Where both files exist and the PNG there shows the same
    image within :data:`~gped_kit.viz.snapshot.CHANGED_PIXELS` (:func:`~gped_kit.viz.snapshot.same_image`:
    the figure drawn again on another machine, whose numbers differ in their last bits), both are kept as
    they are, so re-running a notebook leaves the repository clean."""
    stem = _file_stem(name, is_paper_only(fig))
    figures_dir = Path(figures_dir)
    figures_dir.mkdir(parents=True, exist_ok=True)
    png_path, pdf_path = (figures_dir / f"{stem}.{ext}" for ext in ("png", "pdf"))
    with kit_theme():
        buf = io.BytesIO()
        fig.savefig(buf, format="png", bbox_inches="tight", dpi=150, metadata=savefig_metadata("png"))
        if pdf_path.is_file() and same_image(buf.getvalue(), png_path):
            return [png_path, pdf_path]
        atomic_write_bytes(png_path, buf.getvalue())
        fig.savefig(pdf_path, bbox_inches="tight", dpi=150, metadata=savefig_metadata("pdf"))
    return [png_path, pdf_path]


def save_table(table: pd.DataFrame, name: str, figures_dir: str | Path, floatfmt: str = ".3f") -> list[Path]:
    """Save ``table`` as ``<figures_dir>/<name>.csv`` and ``.md`` (Markdown, missing values as "—"), both
    with whole-number float columns as integers (counts that pandas made floats by a missing value:
    :func:`~gped_kit.viz.tables.integer_columns`); returns the paths. A table of the paper's numbers only
    (made by :func:`~gped_kit.viz.tables.paper_table`) is saved as ``<name>_paper_only``."""
    stem = _file_stem(name, bool(table.attrs.get(PAPER_ONLY_ATTR, False)))
    figures_dir = Path(figures_dir)
    figures_dir.mkdir(parents=True, exist_ok=True)
    csv, md = figures_dir / f"{stem}.csv", figures_dir / f"{stem}.md"
    table.astype({name: "Int64" for name in integer_columns(table)}).to_csv(csv, index=False)
    md.write_text(markdown_table(table, floatfmt=floatfmt))
    return [csv, md]


def _outside_legend(fig: plt.Figure, handles: list, labels: list[str], where: str = "right", **kwargs) -> None:
    """One legend for the whole figure, outside the axes (constrained layout makes room for it)."""
    if not handles:
        return
    if where == "right":
        fig.legend(handles, labels, loc="outside right center", **kwargs)
    else:
        fig.legend(handles, labels, loc=f"outside {where} center", ncol=kwargs.pop("ncol", min(len(labels), 5)),
                   **kwargs)


def _unique_handles(axes: Sequence[plt.Axes]) -> tuple[list, list[str]]:
    handles: dict[str, object] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if not lab.startswith("_") and lab not in handles:
                handles[lab] = h
    return list(handles.values()), list(handles)


def _series_styles(names: Sequence[str], taken: Sequence[str] = ()) -> dict[str, dict]:
    """A colour, marker and line style per series name, all different at a glance: a method's
    colour (:func:`~gped_kit.viz.theme.method_colors`; a name no method names gets a palette colour
    away from those already used and from ``taken``), a marker of its own, dashed for a method's
    variant (a shade of its method's colour)."""
    colours = method_colors(list(names))
    unnamed = [n for n in names if colours[n] == method_color("")]  # names no method family knows: grey
    named = [c for n, c in colours.items() if n not in unnamed]
    colours.update(zip(unnamed, distinct_colors(len(unnamed), taken=[*taken, *named])))
    return {n: dict(color=colours[n], marker=MARKERS[i % len(MARKERS)], ls="--" if method_variant(n) else "-")
            for i, n in enumerate(names)}


def _off_scale_points(series: dict[str, np.ndarray], keep: Sequence[str] = (),
                      factor: float = 1.0) -> dict[str, np.ndarray]:
    """Per series (its values in the order they are drawn, e.g. by step), which points to leave off
    the scale: +1 above, -1 below, 0 drawn.

    Points leave the scale together, beyond a gap in all the values drawn that is wider than
    ``factor`` times the span of the values kept, and only as whole series or as the first points
    of series: a whole series (e.g. a failed student at NLL 2.3 beside the others at 0.1-0.3, which
    it would squash into a line; at most a quarter of the series, never those in ``keep``), or the
    first points of series of four or more points (at most a quarter of each: e.g. every student's
    first log point at NLL 2.3, before it has learned anything). The gap widest for the span it
    leaves goes first, above before below, until none is left."""
    values = {k: np.asarray(v, dtype=float).reshape(-1) for k, v in series.items()}
    side = {k: np.zeros(len(v), dtype=int) for k, v in values.items()}
    budget = sum(bool(np.isfinite(v).any()) for v in values.values()) // 4

    def admissible(chosen: list[tuple[str, int]]) -> bool:
        by_series: dict[str, set[int]] = {}
        for k, i in chosen:
            by_series.setdefault(k, set()).add(i)
        whole = sum(1 for k, v in values.items() if np.isfinite(v).any() and (side[k][np.isfinite(v)] != 0).all())
        for k, idx in by_series.items():
            finite = np.flatnonzero(np.isfinite(values[k]))
            drawn = {int(i) for i in finite if side[k][i] == 0}
            if idx == drawn:  # the whole series
                whole += 1
                if k in keep or whole > budget:
                    return False
                continue
            before = {int(i) for i in finite if i <= max(idx)}
            leading = {int(i) for i in finite if side[k][i] != 0} | idx
            if not before <= leading or len(leading) > len(finite) // 4:
                return False
        return True

    def split(top: bool) -> bool:
        points = [(k, int(i)) for k, v in values.items() for i in np.flatnonzero(np.isfinite(v) & (side[k] == 0))]
        if len(points) < 4:
            return False
        w = np.array([values[k][i] for k, i in points]) * (1.0 if top else -1.0)
        order = np.argsort(w, kind="stable")
        w = w[order]
        best: tuple[float, list[tuple[str, int]]] | None = None
        for i in range(1, len(w)):
            gap, span = w[i] - w[i - 1], max(w[i - 1] - w[0], 1e-12)
            if gap <= factor * span or (best is not None and gap / span <= best[0]):
                continue
            chosen = [points[j] for j in order[i:]]
            if admissible(chosen):
                best = (gap / span, chosen)
        if best is None:
            return False
        for k, i in best[1]:
            side[k][i] = 1 if top else -1
        return True

    for _ in range(4):
        moved = split(True)
        moved = split(False) or moved
        if not moved:
            break
    return side


def _value_range(values: np.ndarray) -> str:
    low, high = f"{float(np.nanmin(values)):.3g}", f"{float(np.nanmax(values)):.3g}"
    return low if low == high else f"{low}–{high}"


def _off_scale_notes(series: dict[str, tuple[np.ndarray, np.ndarray]], side: dict[str, np.ndarray],
                     where: str = "", keep: Sequence[str] = (), group: str = "curve") -> tuple[list[str], list[str]]:
    """The lines of the notes on the points :func:`_off_scale_points` left off the scale, (above, below):
    a whole series by its name and the range of its values; the first points of series by the
    series' names, or, where three or more series lost their points at the same x (e.g. the first
    log step), in one line by that x (``where``: its name, e.g. ``"t"``): "every <group>" when
    they are all the series with a point there (but those in ``keep``), else how many."""
    notes: tuple[list[str], list[str]] = ([], [])
    for lines, s in zip(notes, (1, -1)):
        partial: dict[str, np.ndarray] = {}
        for name, (x, y) in series.items():
            off = side[name] == s
            if not off.any():
                continue
            if (side[name][np.isfinite(y)] != 0).all() and (side[name][np.isfinite(y)] == s).all():
                lines.append(f"{name}: {_value_range(y[off])}")
            else:
                partial[name] = off
        if not partial:
            continue
        steps = {tuple(series[n][0][off]) for n, off in partial.items()}
        there = [n for n, (x, y) in series.items() if n in partial or (
            (side[n][np.isfinite(y)] == 0).any() and np.isin(x[np.isfinite(y)], list(next(iter(steps)))).any())]
        if where and len(steps) == 1 and len(partial) >= 3:
            xs = ", ".join(f"{float(x):,.0f}" for x in next(iter(steps)))
            who = (f"every {group}" if set(partial) >= {n for n in there if n not in keep}
                   else f"{len(partial)} {group}s")
            lines.append(f"{where} = {xs}, {who}: "
                         f"{_value_range(np.concatenate([series[n][1][off] for n, off in partial.items()]))}")
        else:
            for name, off in partial.items():
                count = int(off.sum())
                lines.append(f"{name}, first {'point' if count == 1 else f'{count} points'}: "
                             f"{_value_range(series[name][1][off])}")
    return notes


def _note_off_scale(ax: plt.Axes, above: Sequence[str], below: Sequence[str], fontsize: float = 8.0,
                    wrap: int = 44) -> None:
    """Room at the top (bottom) of ``ax`` and a note there, "off the scale:" and a line per entry of
    ``above`` (``below``), each marked by an arrow; a line longer than ``wrap`` characters is broken
    after its name. The room is sized for the note's lines at the axes' height."""
    notes = []
    for entries, arrow in ((above, "↑"), (below, "↓")):
        lines = []
        for entry in entries:
            text = f"{arrow} {entry}"
            if len(text) > wrap and ": " in text:
                head, tail = text.rsplit(": ", 1)
                text = f"{head}:\n     {tail}"
            lines.append(text)
        notes.append(["off the scale:", *lines] if lines else [])
    fig = ax.get_figure(root=True)
    height_pt = max(ax.get_position().height * fig.get_figheight() * 72 * 0.85, 40.0)
    line_pt = fontsize * 1.3
    fractions = [min(sum(t.count("\n") + 1 for t in lines) * line_pt / height_pt + 0.04, 0.45) if lines else 0.0
                 for lines in notes]
    low, high = ax.get_ylim()
    total = (high - low) / max(1.0 - sum(fractions), 0.1)
    ax.set_ylim(low - fractions[1] * total, high + fractions[0] * total)
    for lines, top in zip(notes, (True, False)):
        if lines:
            ax.text(0.98, 0.985 if top else 0.015, "\n".join(lines), transform=ax.transAxes, ha="right",
                    va="top" if top else "bottom", multialignment="left", fontsize=fontsize, color="0.25",
                    linespacing=1.15)


def _thousands_axis(axis) -> None:
    """Whole-number ticks, at most six, written with thousands separators (2,000 ... 16,000): the
    labels of step counts stay apart."""
    axis.set_major_locator(mticker.MaxNLocator(nbins=5, integer=True, steps=[1, 2, 2.5, 5, 10]))
    axis.set_major_formatter(mticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))


@themed
def plot_learning_curves(history: pd.DataFrame, paper: Mapping[str, float] | None = None,
                         paper_label: str = "the paper's value (T = 10^6)") -> plt.Figure:
    """Teacher-ensemble vs student test NLL and accuracy, and entropy MAE, against SGLD iterations;
    each student its own colour (its method's; a variant a shade of it, dashed) and marker, one
    legend for the figure. A student far from all others in a panel (e.g. a KD student on noise
    inputs at NLL 2.3 beside the others at 0.1-0.3), and first log steps far from all later ones
    (e.g. every student at NLL 2.3 at the first step, before it has learned anything), are left off
    that panel's scale (:func:`_off_scale_points`), named with their values in a note at the panel's
    edge, so the differences between the others stay visible.

    ``paper``: the paper's values to draw beside the curves (e.g. Table 1's ``teacher_nll``,
    ``student_nll``, ``entropy_mae``), each a dashed horizontal line in its panel, in the colour of the
    curve it belongs to (the teacher's; the panel's student's, where one student is drawn there);
    ``paper_label`` names them in the legend."""
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8), layout="constrained")
    teacher = (history.drop_duplicates("step").dropna(subset=["teacher_nll"]) if "teacher_nll" in history
               else history.iloc[:0])
    students = list(dict.fromkeys(history["student"].dropna())) if "student" in history else []
    styles = _series_styles(students, taken=[TEACHER_COLOR])
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
        side = _off_scale_points({k: y for k, (_, y) in series.items()}, keep=[teacher_name])
        for name, rows in curves.items():
            rows = rows[side[name] == 0]
            if rows[column].isna().all():
                continue
            drawn.add(name)
            if name == teacher_name:
                ax.plot(rows["step"], rows[column], "-", color=TEACHER_COLOR, lw=2.5, label=name)
            else:
                ax.plot(rows["step"], rows[column], ms=4, label=name, **styles[name.removeprefix("student ")])
        above, below = _off_scale_notes(series, side, where="t", keep=[teacher_name], group="student")
        if above or below:
            _note_off_scale(ax, above, below)
        in_panel = [n.removeprefix("student ") for n in curves if n != teacher_name and (side[n] == 0).any()]
        for key, colour in ((teacher_column, TEACHER_COLOR),
                            (column, styles[in_panel[0]]["color"] if len(in_panel) == 1 else PAPER_COLOR)):
            if key and paper is not None and pd.notna(paper.get(key)):
                ax.axhline(float(paper[key]), ls="--", lw=1.3, color=colour, label=paper_label, zorder=1)
                paper_colours += [colour] if colour not in paper_colours else []
        _thousands_axis(ax.xaxis)
        ax.set(xlabel="SGLD iteration t", ylabel=label, title=label.removesuffix(" (nats)"))
    handles = [Line2D([], [], color=TEACHER_COLOR, lw=2.5)] if len(teacher) else []
    labels = [teacher_name] if len(teacher) else []
    for name in students:
        handles.append(Line2D([], [], ms=4, **styles[name]))
        labels.append(f"student {name}" + ("" if f"student {name}" in drawn else " (off the scale)"))
    if paper_colours:  # one entry, its dashes in the colours of the curves they belong to
        handles.append(tuple(Line2D([], [], ls="--", lw=1.3, color=c) for c in paper_colours))
        labels.append(paper_label)
    _outside_legend(fig, handles, labels, handler_map={tuple: HandlerTuple(ndivide=None, pad=0.3)})
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
        _outside_legend(fig, handles, labels)
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
    _outside_legend(fig, handles, legend_labels)
    if title:
        fig.suptitle(title)
    return fig if have_ours else mark_paper_only(fig)


@themed
def plot_table1(table1: pd.DataFrame, title: str = "") -> plt.Figure:
    """Table 1 as a figure: one panel per quantity (teacher NLL, student NLL, entropy MAE), one column per
    model with a run of ours; ours as the mean over seeds with an error bar of one standard deviation (none
    for one seed), the paper's value as a black cross inside a grey band of +-10% (what "within 10%" means,
    two-sided). ``table1`` is :func:`~gped_kit.experiments.experiment1.experiment1_table`'s."""
    names = {"teacher_nll": "teacher NLL", "student_nll": "student NLL (U_s)", "entropy_mae": "entropy MAE (U_o)"}
    model_names = {"fcnn": "FCNN", "cnn_mnist": "CNN-MNIST", "cnn_cifar10": "CNN-CIFAR-10"}
    t = table1.set_index("model")
    models = [m for m in model_names if m in t.index and pd.notna(t.loc[m, "teacher_nll"])]
    fig, axes = plt.subplots(1, len(names), figsize=(3.6 * len(names), 3.4 + (0.4 if title else 0)),
                             layout="constrained", squeeze=False)
    for ax, (metric, label) in zip(axes[0], names.items()):
        xs = np.arange(len(models))
        for x, m in zip(xs, models):
            paper = float(t.loc[m, f"{metric}_paper"])
            ax.fill_between([x - 0.3, x + 0.3], 0.9 * paper, 1.1 * paper, color="0.88", lw=0,
                            label="the paper's ±10%", zorder=1)
            ax.plot([x + 0.12], [paper], "x", color=PAPER_COLOR, ms=9, mew=2, label="the paper's (T = 10^6)",
                    zorder=4)
            std = t.loc[m, f"{metric}_std"]
            seeds = int(t.loc[m, "seeds"])
            ax.errorbar([x - 0.12], [float(t.loc[m, metric])], yerr=None if pd.isna(std) else [[std], [std]],
                        fmt="o", color=method_color("GPED"), ms=7, capsize=4, zorder=3,
                        label=f"ours (mean ± std over {seeds} seeds)" if seeds > 1 else "ours (one seed)")
        ax.set_xticks(xs, [model_names[m] for m in models])
        ax.set_xlim(-0.6, len(models) - 0.4)
        ax.set_ylim(bottom=0)
        ax.margins(y=0.15)
        ax.set(xlabel="model", ylabel=label, title=label)
    _outside_legend(fig, *_unique_handles(axes.flat), where="lower")
    if title:
        fig.suptitle(title)
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
    _outside_legend(fig, handles, labels, where="lower", handler_map={tuple: HandlerTuple(ndivide=None, pad=0)})
    if title:
        fig.suptitle(title)
    return fig


#: Markers of the methods in Figure 14, ours filled in the method's colour, the paper's open in black.
_METHOD_MARKERS = {"Ensemble": "D", "GPED": "o", "EnD2": "s", "Hydra": "^", "KD": "v"}


def _place_value_labels(ax: plt.Axes, points: Sequence[tuple[float, float, str]],
                        markers: Sequence[tuple[float, float]] = (), fontsize: float = 6.5,
                        marker_size: float = 9.0) -> int:
    """Print each text of ``points`` (x, y, text) beside its point, where it overlaps no label placed
    before it and no marker (``markers``, (x, y) in data coordinates, each a square of
    ``marker_size`` points) and stays inside the axes: above the point, else below it, else further
    above or below; a label with no such place is left out. Placed on the figure's final layout
    (drawn once without rendering); returns how many labels were left out."""
    fig = ax.get_figure(root=True)
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    half = marker_size / 2 * fig.dpi / 72
    pad = 1.0

    def box_of(x: float, y: float) -> tuple[float, float, float, float]:
        cx, cy = ax.transData.transform((x, y))
        return cx - half, cy - half, cx + half, cy + half

    taken = [box_of(x, y) for x, y in markers if np.isfinite(x) and np.isfinite(y)]
    frame = ax.bbox
    left_out = 0
    for x, y, text in points:
        if not (np.isfinite(x) and np.isfinite(y)):
            continue
        for dy, va in ((6, "bottom"), (-6, "top"), (15, "bottom"), (-15, "top")):
            label = ax.annotate(text, (x, y), xytext=(0, dy), textcoords="offset points", ha="center", va=va,
                                fontsize=fontsize, color="0.25")
            label.set_in_layout(False)
            b = label.get_window_extent(renderer)
            box = (b.x0 - pad, b.y0 - pad, b.x1 + pad, b.y1 + pad)
            inside = frame.x0 <= b.x0 and b.x1 <= frame.x1 and frame.y0 <= b.y0 and b.y1 <= frame.y1
            free = all(box[2] <= o[0] or o[2] <= box[0] or box[3] <= o[1] or o[3] <= box[1] for o in taken)
            if inside and free:
                taken.append(box)
                break
            label.remove()
        else:
            left_out += 1
    return left_out


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
    methods of equal accuracy side by side), below it (:func:`_place_value_labels`)."""
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
                        label=f"{method} (ours)", zorder=3)
                points += [(x, v, f"{v:.3f}") for x, v in zip(xs, values)]
                spots += list(zip(xs, values))
                paper = [sel["value_paper"].get(s, float("nan")) for s in settings] if "value_paper" in sel else []
                if any(pd.notna(paper)):
                    ax.plot(xs, paper, ls="none", marker=markers[method], ms=9, mew=1.6, mfc="none",
                            mec=PAPER_COLOR, label=f"{method} (the paper's)", zorder=4)
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
    handles, names = _unique_handles(axes.flat)
    order = sorted(range(len(names)), key=lambda k: (methods.index(names[k].rsplit(" (", 1)[0])
                                                     if names[k].rsplit(" (", 1)[0] in methods else len(methods),
                                                     "paper" in names[k]))
    _outside_legend(fig, [handles[k] for k in order], [names[k] for k in order], where="lower",
                    ncol=len(methods))
    if title:
        fig.suptitle(title)
    for ax, points, spots in labels_to_place:
        left_out = _place_value_labels(ax, points, spots)
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
        ax.set(xlim=(0, top), ylim=(0, top), xlabel="ensemble E[H] (nats)", ylabel=f"{name} E[H] (nats)")
        ax_top.hist(t, bins=bins, range=(0, top), color="0.55")
        ax_right.hist(t, bins=bins, range=(0, top), orientation="horizontal", color="0.8")
        ax_right.hist(s, bins=bins, range=(0, top), orientation="horizontal", histtype="step", lw=1.5,
                      color=method_color(name))
        for a in (ax_top, ax_right):
            a.grid(False)
            a.spines[:].set_visible(False)
        ax_top.tick_params(labelbottom=False, labelleft=False, left=False)
        ax_right.tick_params(labelleft=False, labelbottom=False, bottom=False)
        ax_top.set_title(name)
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


# ----------------------------------------------------------------------------- Experiment 3
def _focus_range(values: Sequence[float], factor: float = 1.0) -> tuple[float, float] | None:
    """The y range that shows ``values`` except isolated extremes (None when nothing is isolated):
    the largest (smallest) value is dropped while its gap to the next one exceeds ``factor`` times
    the span of the values kept, at most a quarter of them; the range is the kept span, padded."""
    v = np.sort(np.asarray([x for x in values if np.isfinite(x)], dtype=float))
    if len(v) < 4:
        return None
    lo, hi, budget = 0, len(v), max(1, len(v) // 4)
    while budget > 0 and hi - lo > 3:
        span_top, span_bottom = v[hi - 2] - v[lo], v[hi - 1] - v[lo + 1]
        if v[hi - 1] - v[hi - 2] > factor * max(span_top, 1e-12):
            hi -= 1
        elif v[lo + 1] - v[lo] > factor * max(span_bottom, 1e-12):
            lo += 1
        else:
            break
        budget -= 1
    if lo == 0 and hi == len(v):
        return None
    kept_lo, kept_hi = v[lo], v[hi - 1]
    pad = 0.08 * max(kept_hi - kept_lo, 1e-9)
    # extra room on the side of the dropped values, for their arrows and labels
    return (kept_lo - pad - (2.5 * pad if lo > 0 else 0), kept_hi + pad + (2.5 * pad if hi < len(v) else 0))


def _pareto_values(table: pd.DataFrame, metric: str) -> list[float]:
    """Every metric value a panel of :func:`plot_pareto_figure` draws (students, teacher line)."""
    if table.empty or metric not in table:
        return []
    rows = search_candidates(table)
    rows = metric_rows(rows, metric)
    values = list(rows[metric].dropna())
    teach = table[table["method"] == "teacher"]
    if metric != "entropy_mae" and len(teach):
        values += list(teach[metric].dropna().iloc[:1])
    return values


def _mark_off_scale(ax: plt.Axes, rows: pd.DataFrame, metric: str, cost: str) -> None:
    """An arrow at the panel's edge, with the value, for every student outside the y range."""
    low, high = ax.get_ylim()
    trans = blended_transform_factory(ax.transData, ax.transAxes)
    for _, r in rows.iterrows():
        value = float(r[metric])
        if low <= value <= high:
            continue
        above = value > high
        who = (f"λ = {float(r['reg_weight']):g}" if r.get("method") == "group_lasso" and pd.notna(r.get("reg_weight"))
               else str(r.get("student", "")))
        ax.annotate(f"{who}: {value:.3g}\n(off the scale)", xy=(float(r[cost]), 1.0 if above else 0.0),
                    xycoords=trans, xytext=(4, -34 if above else 34), textcoords="offset points",
                    ha="left", va="center", fontsize=8, color=METHOD_COLORS["GPED"],
                    arrowprops=dict(arrowstyle="-|>", color=METHOD_COLORS["GPED"], lw=1.2), annotation_clip=False)


def _within(values: pd.Series, limits: tuple[float, float] | None) -> pd.Series:
    """True where ``values`` lie inside ``limits`` (all True without limits)."""
    if limits is None:
        return pd.Series(True, index=values.index)
    return values.between(min(limits), max(limits))


def _log_range(values: Sequence[float], pad: float = 0.06) -> tuple[float, float] | None:
    """A log-axis range holding ``values`` (positive ones), padded by ``pad`` of its decades on each side."""
    v = np.asarray([x for x in values if np.isfinite(x) and x > 0], dtype=float)
    if len(v) == 0:
        return None
    low, high = np.log10(v.min()), np.log10(v.max())
    margin = pad * max(high - low, 0.3)
    return 10 ** (low - margin), 10 ** (high + margin)


#: The entries a paper reference of :func:`plot_pareto` may hold (each optional): the paper's teacher
#: ensemble's metric, its base student's, its best searched student's, and the best student's cost
#: as a multiple of the base student's (FLOPs, parameters).
PARETO_PAPER_KEYS = ("teacher", "base_student", "best_student", "best_flops_ratio", "best_params_ratio")
_RATIO_KEYS = {"flops": "best_flops_ratio", "params": "best_params_ratio"}


def pareto_paper_reference(model: str, metric: str) -> dict[str, float]:
    """The paper's reference values of the Pareto figure of ``model`` and ``metric`` (Figures 2, 6-13), for
    the ``paper`` argument of :func:`plot_pareto_figure` (keys of :data:`PARETO_PAPER_KEYS`): the optimal
    student's parameters and FLOPs as multiples of the base student's, which every caption gives
    (:func:`~gped_kit.experiments.paper_tables.experiment3_figures`), and for Figure 2 (CNN-MNIST, test NLL)
    the values its text gives (:func:`~gped_kit.experiments.paper_tables.experiment3_figure2`): the teacher
    ensemble 0.267 (Table 5 at that cell), the base student 0.469, the best searched student 0.30. Empty
    where the paper has no such figure."""
    figures = paper_tables.experiment3_figures()
    row = figures[(figures["model"] == model) & (figures["metric"] == metric)]
    if row.empty:
        return {}
    out = {"best_flops_ratio": float(row["flops_ratio"].iloc[0]),
           "best_params_ratio": float(row["params_ratio"].iloc[0])}
    if (model, metric) == ("cnn_mnist", "student_nll"):
        stated = paper_tables.experiment3_figure2()
        out.update(teacher=stated["teacher_nll"], base_student=stated["base_student_nll"],
                   best_student=stated["searched_nll"])
    return out


def _check_paper_reference(paper: Mapping[str, float] | None) -> dict[str, float]:
    paper = dict(paper or {})
    unknown = sorted(set(paper) - set(PARETO_PAPER_KEYS))
    if unknown:
        raise ValueError(f"paper has unknown entries {unknown}; allowed: {list(PARETO_PAPER_KEYS)} "
                         "(e.g. pareto_paper_reference(model, metric))")
    return {k: float(v) for k, v in paper.items() if v is not None and np.isfinite(float(v))}


def _base_cost(table: pd.DataFrame, metric: str, cost: str) -> float | None:
    """Our base student's ``cost`` (the exhaustive search's student of the teacher's architecture)."""
    if table.empty or cost not in table:
        return None
    base = metric_rows(table[(table["method"] == "exhaustive") & table["is_base"].astype(bool)], metric)
    base = base.dropna(subset=[cost])
    return float(base[cost].iloc[0]) if len(base) else None


def _paper_best_cost(table: pd.DataFrame, metric: str, cost: str, paper: Mapping[str, float]) -> float | None:
    """Where the paper's best student goes on our ``cost`` axis: its ratio to the base student times our base's."""
    ratio, base = paper.get(_RATIO_KEYS[cost]), _base_cost(table, metric, cost)
    return ratio * base if ratio is not None and base is not None else None


def _ratio_text(paper: Mapping[str, float]) -> str:
    parts = [f"{paper[k]:g}× the base's {what}" for k, what in (("best_flops_ratio", "FLOPs"),
                                                                ("best_params_ratio", "parameters")) if k in paper]
    return ", ".join(parts)


def _draw_paper_reference(ax: plt.Axes, table: pd.DataFrame, metric: str, cost: str, method: str | None,
                          paper: Mapping[str, float]) -> None:
    """The paper's values (:func:`pareto_paper_reference`) in the paper's colour: its teacher ensemble as a
    dash-dotted horizontal line, its base student as an open square at our base student's cost, and (in
    a group l1/l2 panel, the search that found it) its best student as an open star at its cost ratio
    times our base's, or, where the paper gives no value for it, a dash-dotted vertical line there."""
    if "teacher" in paper:
        ax.axhline(paper["teacher"], color=PAPER_COLOR, ls="-.", lw=1.4,
                   label=f"the paper's teacher ensemble ({paper['teacher']:.3g})")
    base = _base_cost(table, metric, cost)
    if "base_student" in paper and base is not None:
        ax.plot([base], [paper["base_student"]], ls="none", marker="s", ms=10, mew=1.8, mfc="none", mec=PAPER_COLOR,
                label=f"the paper's base student ({paper['base_student']:.3g}; at our base student's cost)", zorder=6)
    best = _paper_best_cost(table, metric, cost, paper)
    if method == "group_lasso" and best is not None:
        if "best_student" in paper:
            ax.plot([best], [paper["best_student"]], ls="none", marker="*", ms=14, mew=1.6, mfc="none",
                    mec=PAPER_COLOR, zorder=6,
                    label=f"the paper's best student ({paper['best_student']:.3g}; {_ratio_text(paper)})")
        else:
            ax.axvline(best, color=PAPER_COLOR, ls="-.", lw=1.4,
                       label=f"the paper's best student's cost ({_ratio_text(paper)})")


@themed
def plot_pareto(table: pd.DataFrame, metric: str, cost: str, method: str | None = None, ax: plt.Axes | None = None,
                highlight: str | None = None, title: str | None = None, teacher: bool = True,
                ylim: tuple[float, float] | None = None, xlim: tuple[float, float] | None = None,
                paper: Mapping[str, float] | None = None) -> plt.Axes:
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
    ``ylim`` fixes the metric axis: a student outside it is not drawn (nor the frontier's step to
    it) but marked by an arrow at the edge with its value. ``xlim`` fixes the cost axis (e.g. the
    same for the panels of one figure).

    ``paper`` (optional; :func:`pareto_paper_reference`, keys :data:`PARETO_PAPER_KEYS`) adds the paper's
    values in the paper's colour, labelled "the paper's": its teacher ensemble (dash-dotted line), its
    base student (an open square at our base student's cost) and, in a group l1/l2 panel, its best
    student (an open star at its cost ratio to the base student times our base's cost; without a
    value, a dash-dotted vertical line at that cost).
    """
    if metric not in METRICS:
        raise ValueError(f"metric={metric!r} is not known; allowed: {sorted(METRICS)}")
    if cost not in COSTS:
        raise ValueError(f"cost={cost!r} is not known; allowed: {sorted(COSTS)}")
    paper = _check_paper_reference(paper)
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 4), layout="constrained")
    else:
        style_axes(ax)
    student_colour = METHOD_COLORS["GPED"]
    rows = search_candidates(table, method)
    rows = metric_rows(rows, metric).dropna(subset=[metric, cost]) if len(rows) else rows
    if len(rows):
        shown = rows[_within(rows[metric], ylim)]
        ax.scatter(shown[cost], shown[metric], s=22, color="0.55", alpha=0.8, label="IS: individual students",
                   zorder=3)
        front = pareto_front(rows, metric, cost)
        front = front[_within(front[metric], ylim)]
        ax.step(front[cost], front[metric], where="post", color=student_colour, lw=2, marker="o", ms=5,
                label="S: Pareto frontier", zorder=4)
    else:
        ax.text(0.5, 0.5, "no students of this kind\nin this run", transform=ax.transAxes, ha="center",
                va="center", color="0.4")
    if not table.empty:
        base = metric_rows(table[(table["method"] == "exhaustive") & table["is_base"].astype(bool)],
                           metric).dropna(subset=[metric, cost])
        if len(base):
            ax.axvline(base[cost].iloc[0], color="black", ls="--", lw=1.2, label="base student's cost")
            base = base[_within(base[metric], ylim)]
            if len(base):
                ax.scatter(base[cost], base[metric], marker="s", s=60, color="black", zorder=5, label="base student")
        teach = table[table["method"] == "teacher"]
        if teacher and metric != "entropy_mae" and len(teach) and teach[metric].notna().any():
            value = float(teach[metric].dropna().iloc[0])
            if ylim is None or min(ylim) <= value <= max(ylim):
                samples = int(teach["teacher_samples"].iloc[0]) if "teacher_samples" in teach else 0
                ax.axhline(value, color=TEACHER_COLOR, ls=":", lw=2, label=f"T: teacher ensemble ({samples} samples)")
        if highlight is not None:
            sel = table[(table["student"] == highlight)]
            sel = search_candidates(sel) if len(sel) else sel
            sel = sel.dropna(subset=[metric, cost]) if len(sel) else sel
            sel = sel[_within(sel[metric], ylim)] if len(sel) else sel
            if len(sel):
                ax.scatter(sel[cost], sel[metric], s=220, facecolors="none", edgecolors="red", linewidths=2,
                           zorder=6)
    if method == "group_lasso" and not table.empty:
        exhaustive = search_candidates(table, "exhaustive")
        exhaustive = metric_rows(exhaustive, metric).dropna(subset=[metric, cost])
        if len(exhaustive):
            ex_front = pareto_front(exhaustive, metric, cost)
            ex_front = ex_front[_within(ex_front[metric], ylim)]
            ax.step(ex_front[cost], ex_front[metric], where="post", color="0.6", lw=1, ls="--",
                    label="exhaustive frontier (for comparison)", zorder=2)
    if paper:
        _draw_paper_reference(ax, table, metric, cost, method, paper)
    if len(rows) or not table.empty:
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(mticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(mticker.EngFormatter(sep=""))
        ax.xaxis.set_minor_formatter(mticker.NullFormatter())
    if xlim is None and ylim is not None and len(rows) and not _within(rows[metric], ylim).all():
        wanted = _log_range(rows[cost])  # the off-scale students' arrows point at their costs: keep those in the panel
        if wanted is not None:
            shown = ax.get_xlim()
            xlim = (min(shown[0], wanted[0]), max(shown[1], wanted[1]))
    if xlim is not None:
        ax.set_xlim(*xlim)
    if ylim is not None:
        ax.set_ylim(*ylim)
        if len(rows):
            _mark_off_scale(ax, rows, metric, cost)
    ax.set(xlabel=COSTS[cost], ylabel=METRICS[metric][0],
           title=title if title is not None else (METHODS[method] if method else "both search methods"))
    return ax


@themed
def plot_pareto_figure(table: pd.DataFrame, metric: str, title: str = "",
                       paper: Mapping[str, float] | None = None) -> plt.Figure:
    """Figures 2 and 6-13 laid out as in the paper: (a) ``metric`` vs FLOPs, exhaustive search;
    (b) vs FLOPs, group l1/l2 with pruning; (c) vs parameters, exhaustive; (d) vs parameters,
    group l1/l2; shared metric axis, and one cost range per row (the panels of a row compare the
    two searches at the same costs). ``table`` holds one model's search table.

    The shared metric axis shows the region where the students and the teacher are: a student far
    from all others (e.g. a group l1/l2 student with a large lambda, pruned to a few units) would
    stretch it to where the differences between the others vanish, so it is left off the scale
    (neither it nor the frontier's step to it is drawn) and marked by an arrow at the panel's edge
    with its value.

    ``paper`` (optional; :func:`pareto_paper_reference`) adds the paper's values to every panel
    (:func:`plot_pareto`); the axes are widened to show them."""
    paper = _check_paper_reference(paper)
    fig, axes = plt.subplots(2, 2, figsize=(11, 8.5), sharey=True, layout="constrained")
    ylim = _focus_range(_pareto_values(table, metric))
    teach = table[table["method"] == "teacher"] if not table.empty else table
    kept = [float(teach[metric].dropna().iloc[0])] if (  # the teacher's line stays on the scale
        metric != "entropy_mae" and len(teach) and teach[metric].notna().any()) else []
    kept += [paper[k] for k in ("teacher", "base_student", "best_student") if k in paper]
    if ylim is not None and kept:
        pad = 0.05 * (ylim[1] - ylim[0])
        ylim = (min(ylim[0], min(kept) - pad), max(ylim[1], max(kept) + pad))
    candidates = search_candidates(table) if not table.empty else table
    candidates = metric_rows(candidates, metric)
    letters = iter("abcd")
    for row, cost in enumerate(("flops", "params")):
        costs = list(candidates[cost].dropna()) if len(candidates) and cost in candidates else []
        best = _paper_best_cost(table, metric, cost, paper) if paper else None
        xlim = _log_range(costs + ([best] if best is not None and costs else []))
        for col, method in enumerate(("exhaustive", "group_lasso")):
            ax = axes[row][col]
            name = "exhaustive search" if method == "exhaustive" else "group l1/l2 with pruning"
            plot_pareto(table, metric, cost, method, ax=ax, title=f"({next(letters)}) {name}", ylim=ylim, xlim=xlim,
                        paper=paper)
    _outside_legend(fig, *_unique_handles(axes.flat), where="lower", ncol=3)
    if title:
        fig.suptitle(title)
    return fig


# ----------------------------------------------------------------------------- comparison
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
            ax.set_title(f"{method}: {kind}", fontsize=10)
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
            focus = _focus_range(np.append(values, 0.0), factor=3.0)
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
            ax.set_yticks(ys, methods if j == 0 else [""] * len(methods), fontsize=8)
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


@themed
def plot_sampler_study(history: pd.DataFrame, paper: dict[str, float]) -> plt.Figure:
    """Notebook 10: teacher-ensemble NLL (solid: all kept samples; dotted: the recent window),
    student NLL and entropy MAE against wall-clock seconds, one colour and marker per candidate
    sampler (mean over seeds at each log point; colours far apart, so curves that cross stay
    apart), with the paper's Table 1 values at T = 10^6 as dashed lines; one legend for the figure.
    A curve far from all others in a panel, or the first points of a curve far from everything
    after them (e.g. a cyclical schedule's student at NLL 2.3 at its first log point), are left off
    that panel's scale (:func:`_off_scale_points`) and named with their values at its edge."""
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
        side = _off_scale_points({**{k: y for k, (_, y) in series.items()}, paper_name: np.array([paper[title]])},
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
        above, below = _off_scale_notes(series, side)
        if above or below:
            _note_off_scale(ax, above, below)
        ax.set(xlabel="wall-clock seconds (2-core CPU)", ylabel=title, title=title)
    handles = [Line2D([], [], color=colours[c], marker=markers[c], ms=4, lw=2) for c in candidates]
    labels = list(candidates)
    handles += [Line2D([], [], color="0.45", ls=":", lw=1.5), Line2D([], [], color=PAPER_COLOR, ls="--", lw=1)]
    labels += ["dotted: teacher on the recent window", "paper, T = 10^6 (Table 1)"]
    _outside_legend(fig, handles, labels)
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
    _outside_legend(fig, handles, labels)
    return fig
