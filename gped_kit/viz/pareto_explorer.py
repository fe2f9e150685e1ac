"""The Pareto-frontier explorer of Experiment 3 (paper 003, Section 4, Figures 2 and 6-13), read back
from the results store.

:class:`ParetoExplorer` shows the searched students of the store's Experiment 3 search tables
(:func:`stored_searches`: only those the current code made, one per setting, so that the explorer
shows the numbers of the notebook's tables and figures) against FLOPs, parameters or latency,
with their Pareto frontier, and the architecture and numbers of the student selected. Its static
image (:mod:`gped_kit.viz.snapshot`) is ``explorer_pareto_<model>_<tag>.png``. Nothing here computes
or writes results. Example (in JupyterLab)::

    from gped_kit.viz.pareto_explorer import ParetoExplorer
    ParetoExplorer.from_store("../results", entries=[...], figures_dir="../figures")

``entries`` names the searches to show (e.g. notebook 05's ``summary.run.entries``): one per model and target,
since a frontier of two chains' students would mix them (a store holding several is refused, and the error lists
them).
"""

from __future__ import annotations

import html
import math
from collections.abc import Collection
from pathlib import Path
from typing import Any

import ipywidgets as W
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Image as IPyImage
from IPython.display import display

from ..experiments.experiment3 import (
    COSTS,
    METHODS,
    METRICS,
    SEARCH_KIND,
    SEARCH_TABLE,
    base_student,
    comparable_latency,
    metric_rows,
    pareto_front,
    search_candidates,
)
from ..experiments.experiment3.artifacts import ARTIFACTS as EXPERIMENT3_ARTIFACTS
from ..experiments.experiment3.figures import plot_pareto
from ..experiments.numerics import numerics_code
from ..experiments.store import ResultsStore
from .snapshot import StaticView, figure_png, html_number, html_text, safe_name, stack_pngs, text_png, writer_store
from .writer import ArtifactWriter


def stored_searches(store: ResultsStore, current_only: bool = True,
                    entries: Collection[str] | None = None) -> pd.DataFrame:
    """The Experiment 3 search tables of ``store``, concatenated (column ``entry``: the search entry's
    key): with ``current_only`` only those made under the current numerics
    (:func:`~gped_kit.experiments.numerics.numerics_code`), so a search that older code made for the
    same setting is not shown beside the current one; with ``entries`` only the entries of those
    keys (e.g. the searches a notebook ran: ``[r.entry.key for r in results]``)."""
    if not isinstance(store, ResultsStore):
        raise TypeError(f"store must be a ResultsStore (gped_kit.experiments.store), got {type(store).__name__}")
    keys = None if entries is None else set(entries)
    return comparable_latency(store.load(SEARCH_TABLE, SEARCH_KIND,
                                         code=numerics_code(SEARCH_KIND) if current_only else None,
                                         where=None if keys is None else (lambda e: e.key in keys)))


def _one_search_each(table: pd.DataFrame) -> None:
    """ValueError where ``table`` holds several searches (column ``entry``) of one model's searched students
    (exhaustive or group l1/l2) of one target:
    one frontier, one base student and one set of labels would mix students of different chains (their labels
    collide, and "vs base" would compare across chains). The message lists them, with their chain length and
    seed, and says how to choose."""
    if table.empty or "entry" not in table.columns:
        return
    students = table[table["method"].isin(list(METHODS))]  # every search's teacher row names the predictive target
    for (model, target), rows in students.groupby(["model", "target"]):
        entries = rows.drop_duplicates("entry")
        if len(entries) > 1:
            listed = "; ".join(
                f"{r['entry']}" + "".join(f", {name} {r[column]:,}" if isinstance(r[column], (int, float)) and
                                           pd.notna(r[column]) else "" for column, name in
                                           (("num_iterations", "T ="), ("seed", "seed")) if column in r)
                for _, r in entries.iterrows())
            raise ValueError(f"the table holds {len(entries)} searches of {model}'s {target} students ({listed}); "
                             "the explorer shows one search per model and target: pass entries=[...] to "
                             "ParetoExplorer.from_store (e.g. a notebook run's summary.run.entries), or one "
                             "search's rows")


class ParetoExplorer(StaticView):
    """Pareto-frontier explorer of an Experiment 3 search (paper 003, Section 4, Figures 2 and 6-13).

    Controls (public, so code and tests can drive them): ``model`` (Dropdown of the teacher models
    in the table), ``metric`` (Dropdown: test NLL, test accuracy, expected-entropy MAE -- those
    with stored students for the model), ``cost`` (Dropdown: FLOPs per input, parameters,
    measured latency), ``method`` (ToggleButtons: exhaustive search, group l1/l2 + pruning, both)
    and ``point`` (Dropdown of the students shown, cheapest first; choosing one selects it).
    Views: ``plot_out`` (the panel of :func:`gped_kit.experiments.experiment3.figures.plot_pareto`: students, frontier,
    teacher, base student, the selected student ringed) and ``details_html`` (the selected
    student's architecture, widths, costs and metrics, whether it is on the frontier, and its
    ratios to the base student). :meth:`select` picks a student by label and
    :meth:`select_nearest` the shown point nearest to a (cost, metric) position.

    Clicking and hovering: every plot is made with matplotlib handlers connected
    (``fig.canvas.mpl_connect``): a left click on a student's point (within
    :attr:`PICK_RADIUS` points of it) selects that student through :meth:`select`, the code the
    ``point`` dropdown's choice runs, so the details panel and the ringed point follow; hovering
    over a point shows a tooltip with its architecture, method, cost and metric
    (:attr:`hover_annotation`). Both need an interactive backend in JupyterLab, i.e. ipympl
    (``%matplotlib widget``), under which the plot is one live canvas redrawn in place. With the
    static inline backend the plot is an image and the handlers never fire (they are harmless):
    select with the ``point`` dropdown. ``fig`` / ``ax`` are the current plot.
    ``widget`` is the container of the controls and views.

    Static image: :attr:`snapshot_png` is a PNG of the current view (the plot beside the details panel's
    text), made again on every change; with ``figures_dir`` the opening view's is written to
    ``<figures_dir>/explorer_pareto_<model>_<tag>.png`` (:attr:`snapshot_file`; one file per model), a later
    view's only by :meth:`save_view` (the *save this view* button). Displayed as the last expression of a
    cell (or with ``display``), the explorer shows the widget and under it that PNG as a plain image output,
    which viewers without a kernel show and which a live kernel replaces on every change.

    Args:
        table: Experiment 3 search tables (one row per teacher, searched student and stage, as
            :func:`gped_kit.experiments.experiment3.load_search_results` returns them); may be empty.
        figures_dir: where the static image of the view is written (None: nowhere).
        tag: the end of that file's name (e.g. the notebook's profile).
    """

    METHOD_OPTIONS = (("exhaustive", "exhaustive"), ("group l1/l2", "group_lasso"), ("both", "both"))
    #: How near (in points) to a student's marker a click or hover must be to find it.
    PICK_RADIUS = 8.0

    artifact = EXPERIMENT3_ARTIFACTS["explorer"]

    def __init__(self, table: pd.DataFrame, figures_dir: str | Path | None = None, tag: str = "default",
                 writer: ArtifactWriter | None = None) -> None:
        self._init_static(figures_dir, tag, writer)
        if not isinstance(table, pd.DataFrame):
            raise TypeError(f"table must be a pandas DataFrame, got {type(table).__name__}")
        needed = ("model", "method", "stage", "target", "student", "is_base")
        missing = [c for c in needed if c not in table.columns]
        if len(table.columns) and missing:
            raise ValueError(f"table lacks the column(s) {missing}; an Experiment 3 search table has "
                             f"{list(needed)} besides metric and cost columns (see gped_kit.experiments.experiment3)")
        _one_search_each(table)
        self.table = table
        self.source = ""
        self._updating = False
        self.fig: plt.Figure | None = None  # the current plot and its axes (see _draw_plot)
        self.ax: plt.Axes | None = None
        self.hover_annotation = None  # the hover tooltip (a matplotlib Annotation) once shown
        self.plot_png: bytes | None = None  # the plot as shown (PNG; None when nothing is plotted)
        models = sorted(table["model"].dropna().astype(str).unique()) if len(table) else []
        costs = [(label, key) for key, label in COSTS.items() if key in table.columns] or [(COSTS["flops"], "flops")]
        self.model = W.Dropdown(options=models or [("(no stored search)", None)], value=models[0] if models else None,
                                description="model", disabled=not models)
        self.metric = W.Dropdown(description="metric", options=[(METRICS["student_nll"][0], "student_nll")])
        self.cost = W.Dropdown(options=costs, value=costs[0][1], description="cost")
        self.method = W.ToggleButtons(options=list(self.METHOD_OPTIONS), value="both", description="search")
        self.point = W.Dropdown(description="student", options=[("(none)", None)], value=None,
                                layout=W.Layout(width="640px"))
        self.plot_out = W.Output()
        self.details_html = W.HTML()
        self._update_metric_options()
        self.widget = W.VBox([W.HBox([self.model, self.metric]), W.HBox([self.cost, self.method]), self.point,
                              self.details_html, self.plot_out, *self._save_controls()])
        self.model.observe(self._on_model_change, names="value")
        for control in (self.metric, self.cost, self.method):
            control.observe(self._on_view_change, names="value")
        self.point.observe(self._on_point_change, names="value")
        self._refresh_points()
        self._draw()

    @classmethod
    def from_store(cls, results_dir: str | Path, figures_dir: str | Path | None = None, tag: str = "default",
                   entries: Collection[str] | None = None, current_only: bool = True,
                   writer: ArtifactWriter | None = None) -> ParetoExplorer:
        """An explorer over the Experiment 3 searches stored in ``ResultsStore(results_dir)``
        (:func:`stored_searches`: by default those the current code made; ``entries``: only the
        searches of those entry keys, e.g. the ones the notebook's tables and figures show: one per model and
        target, else ValueError listing them); an empty or absent store gives one that says so. ``figures_dir``,
        ``tag`` and ``writer`` as for the constructor (with a ``writer``, its store is read when it is the one at
        ``results_dir``)."""
        explorer = cls(stored_searches(writer_store(writer, results_dir), current_only, entries),
                       figures_dir=figures_dir, tag=tag, writer=writer)
        explorer.source = str(results_dir)
        explorer._draw_details()
        explorer._update_snapshot()
        return explorer

    # ------------------------------------------------------------------ state
    def _model_rows(self) -> pd.DataFrame:
        if self.table.empty or self.model.value is None:
            return self.table.iloc[:0]
        return self.table[self.table["model"].astype(str) == self.model.value]

    def visible(self) -> pd.DataFrame:
        """The students shown: search outputs of the chosen model, method and metric's target with
        both the metric and the cost present, cheapest first."""
        rows = self._model_rows()
        if rows.empty or self.metric.value is None:
            return rows
        method = None if self.method.value == "both" else self.method.value
        rows = search_candidates(rows, method)
        cost = self.cost.value
        rows = metric_rows(rows, self.metric.value).dropna(subset=[self.metric.value, cost])
        return rows.sort_values([cost, "student"])

    def frontier(self) -> pd.DataFrame:
        """The Pareto frontier of :meth:`visible`."""
        rows = self.visible()
        return pareto_front(rows, self.metric.value, self.cost.value) if len(rows) else rows

    def selected_row(self) -> pd.Series | None:
        """The selected student's row, or None."""
        rows = self.visible()
        if self.point.value is None or rows.empty:
            return None
        match = rows[rows["student"] == self.point.value]
        return match.iloc[0] if len(match) else None

    def select(self, student: str) -> None:
        """Select a shown student by its label (as a click on its point would)."""
        labels = list(self.visible()["student"])
        if student not in labels:
            raise ValueError(f"student={student!r} is not shown; shown: {labels}")
        self.point.value = student

    def select_nearest(self, cost: float, metric: float) -> str | None:
        """Select the shown point nearest to (``cost``, ``metric``) in the plot's coordinates (log
        cost axis, each axis scaled by its range); returns its label (None if nothing is shown)."""
        rows = self.visible()
        if rows.empty:
            return None
        log_c = rows[self.cost.value].astype(float).clip(lower=1e-12).map(math.log10)
        vals = rows[self.metric.value].astype(float)
        span_c = max(float(log_c.max() - log_c.min()), 1e-12)
        span_v = max(float(vals.max() - vals.min()), 1e-12)
        dist = ((log_c - math.log10(max(cost, 1e-12))) / span_c) ** 2 + ((vals - metric) / span_v) ** 2
        label = str(rows.loc[dist.idxmin(), "student"])
        self.point.value = label
        return label

    # ------------------------------------------------------------------ updates
    def _update_metric_options(self) -> None:
        rows = search_candidates(self._model_rows()) if len(self._model_rows()) else self._model_rows()
        options = [(label, key) for key, (label, _) in METRICS.items()
                   if key in rows.columns and metric_rows(rows, key)[key].notna().any()]
        options = options or [(METRICS["student_nll"][0], "student_nll")]
        keep = self.metric.value if self.metric.value in [k for _, k in options] else options[0][1]
        self._updating = True  # the caller redraws once
        try:
            self.metric.options = options
            self.metric.value = keep
        finally:
            self._updating = False

    def _refresh_points(self) -> None:
        rows = self.visible()
        cost, metric = self.cost.value, self.metric.value
        options = [(f"{r['architecture']} | {r['method']} | {_short(r[cost])} {cost} | {metric} {r[metric]:.4f}",
                    r["student"]) for _, r in rows.iterrows()]
        previous = self.point.value
        labels = [v for _, v in options]
        if previous in labels:
            value = previous
        else:
            front = self.frontier()
            value = None if front.empty else str(front.iloc[-1]["student"])  # the best student on the frontier
        self._updating = True  # one redraw by the caller, not one per trait change
        try:
            self.point.options = options or [("(none)", None)]
            self.point.value = value
        finally:
            self._updating = False

    def _on_model_change(self, change: dict) -> None:
        self._update_metric_options()
        self._on_view_change(change)

    def _on_view_change(self, change: dict) -> None:
        if self._updating:
            return
        self._refresh_points()
        self._draw()

    def _on_point_change(self, change: dict) -> None:
        if not self._updating:
            self._draw()

    def _draw(self) -> None:
        self._draw_details()
        self._draw_plot()
        self._update_snapshot()

    def snapshot_name(self) -> str:
        """``explorer_pareto_<model>_<tag>.png`` (``explorer_pareto_<tag>.png`` without a model)."""
        model = "" if self.model.value is None else f"{safe_name(self.model.value)}_"
        return f"explorer_pareto_{model}{self.tag}.png"

    def snapshot_values(self) -> dict[str, str] | None:
        """``{"model": ...}`` (None without a model: an empty store)."""
        return None if self.model.value is None else {"model": safe_name(self.model.value)}

    def _snapshot_parts(self) -> tuple[list[str], list[bytes | None]]:
        method = dict((v, k) for k, v in self.METHOD_OPTIONS)[self.method.value]
        metric = METRICS.get(self.metric.value, (self.metric.value,))[0]
        head = (f"Pareto explorer, static image of the view: model {self.model.value}, {metric} against "
                f"{COSTS.get(self.cost.value, self.cost.value)}, search: {method}")
        return [head, *self.status_text.splitlines()], [self.plot_png]

    def _compose_snapshot(self, lines: list[str], pngs: list[bytes | None]) -> bytes:
        details = text_png(lines[1:], width=60) if len(lines) > 1 else None
        body = stack_pngs([pngs[0], details], vertical=False) if pngs[0] else details
        return stack_pngs([text_png(lines[:1]), body])

    def _draw_details(self) -> None:
        row = self.selected_row()
        if row is None:
            if self.table.empty:
                where = f" under <code>{html.escape(self.source)}</code>" if self.source else ""
                self.details_html.value = (f"<b>No Experiment 3 search stored yet{where}.</b> Run "
                                           "<code>notebooks/05_experiment3_search.ipynb</code> to fill the store "
                                           "(the explorer shows the searches the current code made).")
            else:
                self.details_html.value = "<b>No student of this kind is stored for this view.</b>"
            return
        metric, cost = self.metric.value, self.cost.value
        on_front = row["student"] in set(self.frontier()["student"])
        base = base_student(self._model_rows(), row["target"])
        cells = [("student", html.escape(str(row["student"]))), ("method", METHODS.get(row["method"], row["method"])),
                 ("architecture", html.escape(str(row["architecture"]))), ("widths", html.escape(str(row["widths"])))]
        if row["method"] == "group_lasso":
            cells += [("lambda", f"{float(row['reg_weight']):g}"),
                      ("units removed", f"{int(row['units_removed'])}" if pd.notna(row.get("units_removed")) else "")]
        else:
            cells += [("K1 x K2", f"{float(row['k1']):g} x {float(row['k2']):g}")]
        for key in ("params", "flops", "latency_ms"):
            if key in row and pd.notna(row[key]):
                cells.append((COSTS[key], _short(row[key])))
        for key, (label, _) in METRICS.items():
            if key in row and pd.notna(row[key]):
                cells.append((label, html_number(row[key])))
        cells.append(("on the frontier", "yes" if on_front else "no"))
        if base is not None and base["student"] != row["student"]:
            cells += [("vs base: parameters", f"{float(row['params']) / float(base['params']):.2f}x"),
                      ("vs base: FLOPs", f"{float(row['flops']) / float(base['flops']):.2f}x"),
                      (f"vs base: {METRICS[metric][0]}", f"{float(row[metric]) - float(base[metric]):+.4f}")]
        elif base is not None:
            cells.append(("", "this is the base student (the teacher's architecture)"))
        lines = "".join(f"<tr><th style='padding:1px 8px;text-align:left'>{k}</th>"
                        f"<td style='padding:1px 8px'>{v}</td></tr>" for k, v in cells)
        self.details_html.value = f"<table>{lines}</table><small>cost axis: {COSTS[cost]}</small>"

    def _draw_plot(self) -> None:
        rows = self._model_rows()
        if self.fig is not None and _live_canvas(self.fig) and not rows.empty:
            # interactive backend (ipympl): the canvas shown once is redrawn in place
            with plt.rc_context():
                self.ax.clear()
                self._plot_into(self.ax, rows)
            self.fig.canvas.draw_idle()
            self.plot_png = figure_png(self.fig)
            return
        with self.plot_out:
            self.plot_out.clear_output(wait=True)
            if rows.empty:
                self.plot_png = None
                print("No stored Experiment 3 search to plot.")
                return
            with plt.rc_context(), plt.ioff():  # ioff: ipympl must not also show the figure at cell end
                fig, ax = plt.subplots(figsize=(7, 4.5))
                self._plot_into(ax, rows)
                self.fig, self.ax = fig, ax
                fig.canvas.mpl_connect("button_press_event", self._on_canvas_click)
                fig.canvas.mpl_connect("motion_notify_event", self._on_canvas_motion)
                self.plot_png = figure_png(fig)
                if _live_canvas(fig):
                    display(fig.canvas)  # a live canvas: kept open and redrawn in place
                else:
                    plt.close(fig)  # a static image (inline backend): handlers stay connected but never fire
            if not _live_canvas(fig):
                display(IPyImage(data=self.plot_png))

    def _plot_into(self, ax: plt.Axes, rows: pd.DataFrame) -> None:
        method = None if self.method.value == "both" else self.method.value
        plot_pareto(rows, self.metric.value, self.cost.value, method, ax=ax, highlight=self.point.value,
                    title=f"{self.model.value}: {dict((v, k) for k, v in self.METHOD_OPTIONS)[self.method.value]}")
        ax.legend(fontsize=8, loc="best")
        ax.figure.tight_layout()
        self.hover_annotation = None  # cleared with the axes; made again on the next hover

    # ------------------------------------------------------------------ mouse
    def student_at(self, x: float, y: float) -> str | None:
        """The shown student whose point lies within :attr:`PICK_RADIUS` points of the display
        position (``x``, ``y``) (pixels, as in matplotlib's mouse events) on the current plot,
        the nearest if several; None if none does or nothing is plotted."""
        ax, rows = self.ax, self.visible()
        if ax is None or rows.empty:
            return None
        ax.get_xlim(), ax.get_ylim()  # bring autoscaled limits up to date before transforming
        points = np.column_stack([rows[self.cost.value].to_numpy(dtype=float),
                                  rows[self.metric.value].to_numpy(dtype=float)])
        with np.errstate(all="ignore"):
            xy = ax.transData.transform(points)
            dist = np.hypot(xy[:, 0] - x, xy[:, 1] - y)
        if not np.isfinite(dist).any():
            return None
        i = int(np.nanargmin(dist))
        return str(rows.iloc[i]["student"]) if dist[i] <= self.PICK_RADIUS * ax.figure.dpi / 72 else None

    def _event_student(self, event: Any) -> str | None:
        if self.ax is None or getattr(event, "inaxes", None) is not self.ax or event.x is None or event.y is None:
            return None
        return self.student_at(event.x, event.y)

    def _on_canvas_click(self, event: Any) -> None:
        """``button_press_event`` handler: a left click on a student's point selects it (as the
        dropdown does); ignored while the toolbar's zoom or pan mode is on, or off the points."""
        if getattr(event, "button", None) != 1 or getattr(getattr(event.canvas, "toolbar", None), "mode", None):
            return
        label = self._event_student(event)
        if label is not None and label != self.point.value:
            self.select(label)

    def _on_canvas_motion(self, event: Any) -> None:
        """``motion_notify_event`` handler: while the pointer is over a student's point, a tooltip
        beside it gives its architecture, method, cost and metric; it hides off the points."""
        label = self._event_student(event)
        tip = self.hover_annotation
        if label is None:
            if tip is not None and tip.get_visible():
                tip.set_visible(False)
                self.ax.figure.canvas.draw_idle()
            return
        rows = self.visible()
        row = rows[rows["student"] == label].iloc[0]
        cost, metric = self.cost.value, self.metric.value
        text = (f"{row['architecture']}\n{METHODS.get(row['method'], row['method'])}\n"
                f"{COSTS[cost]}: {_short(row[cost])}\n{METRICS[metric][0]}: {float(row[metric]):.4f}")
        if tip is None:
            tip = self.ax.annotate("", xy=(float(row[cost]), float(row[metric])), xytext=(12, 12),
                                   textcoords="offset points", fontsize=8, zorder=10,
                                   bbox=dict(boxstyle="round", fc="lightyellow", ec="0.5", alpha=0.95))
            self.hover_annotation = tip
        tip.xy = (float(row[cost]), float(row[metric]))
        tip.set_text(text)
        tip.set_visible(True)
        self.ax.figure.canvas.draw_idle()

    # ------------------------------------------------------------------ display
    @property
    def status_text(self) -> str:
        """The details panel as plain text."""
        return html_text(self.details_html.value, ": ")

    def __repr__(self) -> str:
        return (f"ParetoExplorer(model={self.model.value!r}, metric={self.metric.value!r}, cost={self.cost.value!r}, "
                f"method={self.method.value!r}, selected={self.point.value!r}, shown={len(self.visible())})")


def _live_canvas(fig: plt.Figure) -> bool:
    """Whether ``fig`` is drawn on a live widget canvas (ipympl, ``%matplotlib widget``), where
    mouse events reach the kernel, rather than rendered to a static image (inline, Agg)."""
    return isinstance(fig.canvas, W.DOMWidget)


def _short(value: Any) -> str:
    """3 significant digits with a k/M suffix (costs)."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return "&mdash;"
    if math.isnan(value):
        return "&mdash;"
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"
