"""The masking-rate / dataset-size explorer of Experiments 1-2 (paper 003, Appendix A.1, Figure 3;
Section 4, Figures 1 and 4), read back from the results store.

:class:`MaskingExplorer` puts together, for the mask size m chosen on a slider:

- a few test images with one random m x m zero square each
  (:func:`gped_kit.experiments.experiment2.figures.plot_masked_examples`) and the masking rate r = m^2 / (H W)
  (= m^2 / 784 for MNIST);
- the Experiment 2 curves (:func:`gped_kit.experiments.experiment2.figures.plot_uncertainty_grid`) of the chosen
  model and target estimator, with the cell (r, labelled-set size N) ringed in red;
- the stored metrics of that cell (teacher NLL, student - teacher NLL gap, expected-entropy MAE),
  or a message saying that no run is stored for it.

Its results are the ``summary`` tables of the store's ``"chain"`` entries
(:class:`gped_kit.experiments.store.ResultsStore`, one row per student; by default only those the
current code made, so that no chain of an older run is mixed in; :meth:`MaskingExplorer.from_store`
can narrow them further to a notebook's grid, and :attr:`MaskingExplorer.shown_text` says which
masks, sizes, lengths and seeds are shown), narrowed to the chains of
Experiments 1-2 (:func:`gped_kit.experiments.experiment2.experiment12_rows`) and to one chain
length T at a time, and collapsed to one row per cell and estimator by
:func:`gped_kit.experiments.experiment2.experiment2_cells`. Its static image
(:mod:`gped_kit.viz.snapshot`) is ``explorer_masking_<tag>.png``. Nothing here computes or writes
results. Example (in JupyterLab)::

    from gped_kit.viz.masking_explorer import MaskingExplorer
    MaskingExplorer.from_store("../results", figures_dir="../figures")
"""

from __future__ import annotations

import html
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import ipywidgets as W
import matplotlib.pyplot as plt
import pandas as pd
import torch
from IPython.display import Image as IPyImage
from IPython.display import display

from ..data.sources import load_split
from ..data.transforms import apply_square_mask, masking_rate
from ..experiments.experiment2 import chain_lengths, experiment2_cells, experiment12_rows
from ..experiments.experiment2.artifacts import FIGURE3_ARTIFACTS
from ..experiments.experiment2.figures import (
    EXPERIMENT2_METRICS,
    pixel_max,
    plot_uncertainty_grid,
    select_examples,
    show_masked_image,
    square_mask_region,
)
from ..experiments.numerics import numerics_code
from .snapshot import StaticView, figure_png, html_number, html_text, writer_store
from .writer import ArtifactWriter

ESTIMATORS = ("U_o", "U_s")
#: Mask size of the paper's Figure 3: the explorer opens on the stored mask size nearest to it.
FIGURE3_MASK_SIZE = 14


class MaskingExplorer(StaticView):
    """Masking explorer: masked example images, masking rate, Experiment 2 curves and stored metrics.

    Controls (public, so code and tests can drive them): ``mask_size`` (IntSlider 0..min(H, W)),
    ``labelled_size`` (Dropdown of the labelled-set sizes N in ``results``), ``model`` (Dropdown
    of the models in ``results``), ``estimator`` (ToggleButtons ``U_o``/``U_s``) and
    ``chain_length`` (Dropdown of the chain lengths T stored; one profile is shown at a time,
    since chains of different lengths are not comparable). Every change redraws the views:
    ``rate_label`` (m and r = m^2 / (H W)), ``images_out`` (the masked examples; the tensor shown
    is ``masked_images``), ``curves_out`` (the Experiment 2 curves of the model and estimator,
    the selected cell ringed) and ``metrics_html`` (the selected cell's teacher NLL, NLL gap and
    entropy MAE, or why there is none). If no run is stored at the slider's m, the nearest
    stored mask size of the same (model, N, estimator) is shown and the message says so. The
    explorer opens on a stored run: the stored mask size nearest to Figure 3's m = 14 for the
    model and N shown first (on m = 14 itself only when nothing is stored). ``widget`` is the
    container of the controls and views.

    Static image: :attr:`snapshot_png` is a PNG of the current view (the text of the rate label and metrics
    panel, the masked digits and the curves), made again on every change; with ``figures_dir`` the opening
    view's is written to ``<figures_dir>/explorer_masking_<tag>.png`` (:attr:`snapshot_file`), a later
    view's only by :meth:`save_view` (the *save this view* button). Displayed as the last expression of a
    cell (or with ``display``), the explorer shows the widget and under it that PNG as a plain image output,
    which viewers without a kernel show and which a live kernel replaces on every change.

    Args:
        results: per-student rows of stored chains (e.g. ``ResultsStore(root).load("summary",
            "chain")`` or a grid's table); only those of Experiment 1-2 chains are shown
            (:func:`experiment12_rows`); may be empty.
        images: (N, H, W) or (N, C, H, W) images to show; None loads the test split of ``dataset``.
        dataset: data set of the images and of the result rows shown (rows of other data sets
            in a ``dataset`` column are left out).
        data_root: root for :func:`gped_kit.data.sources.load_split` when ``images`` is None.
        num_examples: how many example images to show.
        seed: picks the examples and places the squares (``apply_square_mask(..., seed)``).
        num_iterations: the chain length T shown first; None takes the T of the most stored
            chains (ties: the longer chains).
        figures_dir: where the static image of the view is written (None: nowhere).
        tag: the end of that file's name (e.g. the notebook's profile).

    Raises:
        TypeError, ValueError: bad ``results``, ``images``, ``num_examples`` or
        ``num_iterations`` (a T with no stored chain; the message lists the stored ones).
    """

    artifact = FIGURE3_ARTIFACTS["explorer"]

    def __init__(self, results: pd.DataFrame, images: torch.Tensor | None = None, dataset: str = "mnist",
                 data_root: str | Path | None = None, num_examples: int = 8, seed: int = 0,
                 num_iterations: int | None = None, figures_dir: str | Path | None = None,
                 tag: str = "default", writer: ArtifactWriter | None = None) -> None:
        self._init_static(figures_dir, tag, writer)
        self.rows: pd.DataFrame = experiment12_rows(results, dataset=dataset)
        self.results_empty: bool = len(results) == 0
        self.dataset = dataset
        self.seed = int(seed)
        if isinstance(num_examples, bool) or not isinstance(num_examples, int) or num_examples < 1:
            raise ValueError(f"num_examples={num_examples!r} must be a positive integer")
        lengths = chain_lengths(self.rows)
        if num_iterations is None:
            num_iterations = max(lengths, key=lambda t: (lengths[t], t)) if lengths else None
        elif num_iterations not in lengths:
            raise ValueError(f"num_iterations={num_iterations!r}: no Experiment 1-2 chain of that length is stored; "
                             f"stored: {sorted(lengths)}")
        if images is None:
            images = load_split(dataset, "test", data_root).images
        self.examples: torch.Tensor = select_examples(images, num_examples, self.seed)
        _, _, self.height, self.width = self.examples.shape
        max_m = min(self.height, self.width)
        self.masked_images: torch.Tensor = self.examples.clone()
        self.images_png: bytes | None = None  # the masked digits as shown (PNG)
        self.curves_png: bytes | None = None  # the curves as shown (PNG; None when there are none)
        self._metric_lines: list[str] = []  # the metrics panel as text lines, for the static image
        self.last_highlight: dict | None = None
        self._curves_state: tuple | None = None  # what curves_out shows; redrawn only when it changes
        self._updating = False  # set while options are replaced: one redraw at the end
        self.source: str = ""  # set by from_store: where the results were read from
        self.table: pd.DataFrame = self._cells(num_iterations)

        self.estimator = W.ToggleButtons(options=list(ESTIMATORS), value="U_o", description="estimator",
                                         tooltips=["online Monte Carlo average (Eq. 10)",
                                                   "current sample only (Eq. 9)"])
        self.chain_length = W.Dropdown(
            options=[(f"T = {t:,} ({n} chain{'s' if n != 1 else ''})", t) for t, n in lengths.items()]
            or [("(all stored)" if self.rows.size else "(no stored runs)", None)],
            value=num_iterations, description="chain T", disabled=len(lengths) < 2)
        self.model = W.Dropdown(description="model")
        self.labelled_size = W.Dropdown(description="labelled N")
        self._set_cell_options(keep=False)
        stored = self._stored_mask_sizes()
        start = min(stored, key=lambda s: (abs(s - FIGURE3_MASK_SIZE), s)) if stored else FIGURE3_MASK_SIZE
        self.mask_size = W.IntSlider(value=min(start, max_m), min=0, max=max_m, step=1,
                                     description="mask m", continuous_update=False)
        self.rate_label = W.Label()
        self.images_out = W.Output()
        self.curves_out = W.Output()
        self.metrics_html = W.HTML()
        note = W.HTML("<small>Experiment 2 cells: m, N, model and target estimator, for chains of length T. "
                      "Stored runs are read from the results store; rings mark the selected cell in every "
                      "panel.</small>")
        self.widget = W.VBox([
            W.HBox([self.mask_size, self.rate_label]),
            self.images_out,
            W.HBox([self.model, self.labelled_size, self.estimator]),
            W.HBox([self.chain_length, note]),
            self.metrics_html,
            self.curves_out,
            *self._save_controls(),
        ])
        self.mask_size.observe(self._on_mask_change, names="value")
        for control in (self.labelled_size, self.model, self.estimator):
            control.observe(self._on_selection_change, names="value")
        self.chain_length.observe(self._on_chain_length_change, names="value")
        self.refresh()

    @classmethod
    def from_store(cls, results_dir: str | Path, num_iterations: int | None = None, *, current_only: bool = True,
                   grid: Mapping[str, Collection] | None = None, **kwargs: Any) -> MaskingExplorer:
        """An explorer over the Experiment 1-2 chains stored in ``ResultsStore(results_dir)`` (the
        ``summary`` tables of its ``"chain"`` entries; each entry's key counts as one chain); an
        empty or absent store gives an explorer that says so. ``current_only``: only the chains the
        current numerics made (:func:`~gped_kit.experiments.numerics.numerics_code`), none of an older run;
        ``grid``: only the rows whose columns hold the values given, e.g. the cells of notebook 02's
        figures ``{"labelled_size": [10000, 60000], "mask_size": [0, 15, 25], "seed": [0]}``.
        ``num_iterations`` picks the chain length shown first; ``kwargs`` go to the constructor."""
        summary = writer_store(kwargs.get("writer"), results_dir).load("summary", "chain",
                                                 code=numerics_code("chain") if current_only else None)
        for column, values in (grid or {}).items():
            if len(summary) and column not in summary.columns:
                raise ValueError(f"grid: the stored chain summaries have no column {column!r}; they have "
                                 f"{sorted(summary.columns)}")
            if len(summary):
                summary = summary[summary[column].isin(list(values))]
        if len(summary) and "run_key" not in summary.columns:
            summary = summary.assign(run_key=summary["entry"])
        explorer = cls(summary, num_iterations=num_iterations, **kwargs)
        explorer.source = str(results_dir)
        explorer._draw_metrics()
        explorer._update_snapshot()
        return explorer

    # ------------------------------------------------------------------ state
    def _cells(self, num_iterations: int | None) -> pd.DataFrame:
        rows = self.rows
        if num_iterations is not None:
            rows = rows[rows["num_iterations"] == num_iterations]
        return experiment2_cells(rows)

    @property
    def num_iterations(self) -> int | None:
        """The chain length T shown (None: the rows give none)."""
        return self.chain_length.value

    @property
    def rate(self) -> float:
        """Masking rate r = m^2 / (H W) of the slider's m."""
        return masking_rate(self.mask_size.value, self.height, self.width)

    def _set_cell_options(self, keep: bool) -> None:
        """Model and N options from :attr:`table`: the model with the most stored cells first (ties
        alphabetically) and its largest N, so the default view is the fullest; with ``keep`` the
        current choices stay where they are still stored."""
        t = self.table
        counts = t["model"].astype(str).value_counts()
        models = sorted(counts.index, key=lambda name: (-counts[name], name))
        sizes = sorted(int(n) for n in t["labelled_size"].unique())
        self._updating = True
        try:
            if not models:
                none = [("(no stored runs)", None)]
                self.model.options, self.model.value, self.model.disabled = none, None, True
                self.labelled_size.options, self.labelled_size.value, self.labelled_size.disabled = none, None, True
                return
            model = self.model.value if keep and self.model.value in models else models[0]
            own = sorted(int(n) for n in t.loc[t["model"].astype(str) == model, "labelled_size"].unique())
            size = self.labelled_size.value if keep and self.labelled_size.value in own else own[-1]
            self.model.options, self.model.value, self.model.disabled = sorted(models), model, False
            self.labelled_size.options, self.labelled_size.value = sizes, size
            self.labelled_size.disabled = False
        finally:
            self._updating = False

    def _candidates(self) -> pd.DataFrame:
        t = self.table
        return t[(t["model"] == self.model.value) & (t["labelled_size"] == self.labelled_size.value)
                 & (t["estimator"] == self.estimator.value)]

    def _stored_mask_sizes(self) -> list[int]:
        return sorted(int(m) for m in self._candidates()["mask_size"].unique())

    def effective_mask_size(self) -> int | None:
        """The stored mask size shown: the slider's m if stored for the selected (model, N,
        estimator), else the nearest stored one (ties go to the smaller m); None if none is stored."""
        stored = self._stored_mask_sizes()
        if not stored:
            return None
        m = self.mask_size.value
        return min(stored, key=lambda s: (abs(s - m), s))

    def stored_masking_rates(self) -> list[tuple[int, float]]:
        """Every distinct (mask size m, masking rate r) pair that the stored Experiment 1-2 chains
        recorded (every chain length, model, N), sorted: the rates the explorer's cells carry. A
        mask size recorded with two different rates appears twice."""
        if self.rows.empty:
            return []
        pairs = self.rows[["mask_size", "masking_rate"]].drop_duplicates().sort_values(["mask_size", "masking_rate"])
        return [(int(m), float(r)) for m, r in zip(pairs["mask_size"], pairs["masking_rate"])]

    def selected_row(self) -> pd.Series | None:
        """The :func:`experiment2_cells` row shown (after snapping to a stored m), or None."""
        m_eff = self.effective_mask_size()
        if m_eff is None:
            return None
        rows = self._candidates()
        return rows[rows["mask_size"] == m_eff].iloc[0]

    # ------------------------------------------------------------------ drawing
    def refresh(self) -> None:
        """Redraw every view from the controls' current values, and the static image."""
        self._draw_images()
        self._draw_selection()
        self._update_snapshot()

    def _on_mask_change(self, change: dict) -> None:
        self.refresh()

    def _on_selection_change(self, change: dict) -> None:
        if not self._updating:
            self._draw_selection()
            self._update_snapshot()

    def _on_chain_length_change(self, change: dict) -> None:
        self.table = self._cells(self.chain_length.value)
        self._set_cell_options(keep=True)
        self._draw_selection()
        self._update_snapshot()

    def snapshot_name(self) -> str:
        """``explorer_masking_<tag>.png``."""
        return f"explorer_masking_{self.tag}.png"

    def _snapshot_parts(self) -> tuple[list[str], list[bytes | None]]:
        head = f"Masking explorer ({self.dataset}), static image of the view: {self.rate_label.value}"
        return [head, *self._metric_lines], [self.images_png, self.curves_png]

    def _draw_selection(self) -> None:
        self._draw_metrics()
        self._draw_curves()

    def _draw_images(self) -> None:
        m = self.mask_size.value
        self.masked_images = apply_square_mask(self.examples, m, self.seed)
        self.rate_label.value = (f"m = {m}: masking rate r = m\u00b2/{self.height * self.width} = {self.rate:.3f}"
                                 f" ({m * m} of {self.height * self.width} pixels)")
        with self.images_out:
            self.images_out.clear_output(wait=True)
            with plt.rc_context():
                k = self.examples.shape[0]
                fig, axes = plt.subplots(1, k, figsize=(1.1 * k, 1.3), squeeze=False)
                region = square_mask_region(self.examples, m, self.seed)
                vmax = pixel_max(self.examples)
                for i, ax in enumerate(axes[0]):
                    show_masked_image(ax, self.masked_images[i], region[i, 0], m, vmax, outline=True)
                fig.subplots_adjust(left=0.01, right=0.99, bottom=0.02, top=0.98, wspace=0.08)
                self.images_png = figure_png(fig)
                plt.close(fig)
            display(IPyImage(data=self.images_png))

    def _no_run_message(self) -> str:
        m, n = self.mask_size.value, self.labelled_size.value
        if self.table.empty:
            where = f" in the store <code>{html.escape(self.source)}</code>" if self.source else ""
            extra = (f" (the chains stored are of other experiments or data sets than {html.escape(self.dataset)})"
                     if not self.results_empty else "")
            return (f"<b>No Experiment 2 results stored yet{where}{extra}.</b> Run "
                    f"<code>notebooks/02_experiment2_mnist.ipynb</code> to fill the store (the explorer shows the "
                    f"chains the current code made); the images above work without it.")
        return (f"<b>no stored run for m={m}, N={n}</b> (model {html.escape(str(self.model.value))}, "
                f"estimator {self.estimator.value}{self._length_text()}).")

    def _length_text(self) -> str:
        return "" if self.num_iterations is None else f", chains of T = {self.num_iterations:,}"

    def _draw_metrics(self) -> None:
        row = self.selected_row()
        if row is None:
            self.metrics_html.value = self._no_run_message()
            self._metric_lines = html_text(self.metrics_html.value, " | ").splitlines()
            return
        m = self.mask_size.value
        m_eff = int(row["mask_size"])
        parts = []
        if m_eff != m:
            parts.append(f"<p><i>no stored run at m={m} (r={self.rate:.3f}); showing the nearest stored "
                         f"mask size m={m_eff} (r={float(row['masking_rate']):.3f}).</i></p>")
        cells = [("model", html.escape(str(row["model"]))), ("labelled N", f"{int(row['labelled_size'])}"),
                 ("mask m", f"{m_eff}"), ("masking rate r", f"{float(row['masking_rate']):.3f}"),
                 ("estimator", html.escape(str(row["estimator"]))),
                 (EXPERIMENT2_METRICS["teacher_nll"], html_number(row["teacher_nll"])),
                 ("student test NLL", html_number(row["student_nll"])),
                 (EXPERIMENT2_METRICS["nll_gap"], html_number(row["nll_gap"])),
                 (EXPERIMENT2_METRICS["entropy_mae"], html_number(row["entropy_mae"])),
                 ("stored chains", f"{int(row['n_runs'])}")]
        if self.num_iterations is not None:
            cells.append(("chain length T", f"{self.num_iterations:,}"))
        head = "".join(f"<th style='padding:2px 8px'>{k}</th>" for k, _ in cells)
        body = "".join(f"<td style='padding:2px 8px;text-align:right'>{v}</td>" for _, v in cells)
        parts.append(f"<table><tr>{head}</tr><tr>{body}</tr></table>")
        self.metrics_html.value = "".join(parts)
        pairs = [f"{k}: {html.unescape(v)}" for k, v in cells]
        self._metric_lines = ([html_text(parts[0], " ")] if len(parts) > 1 else []) + [
            "; ".join(pairs[:5]), "; ".join(pairs[5:])]

    def _draw_curves(self) -> None:
        row = self.selected_row()
        self.last_highlight = (None if row is None else
                               {"masking_rate": row["masking_rate"], "labelled_size": int(row["labelled_size"])})
        state = (self.num_iterations, self.model.value, self.estimator.value, repr(self.last_highlight))
        if state == self._curves_state:  # e.g. the slider moved within one snapped cell: same figure
            return
        self._curves_state = state
        t = self.table
        rows = t[(t["model"] == self.model.value) & (t["estimator"] == self.estimator.value)]
        with self.curves_out:
            self.curves_out.clear_output(wait=True)
            if rows.empty:
                self.curves_png = None
                print("No stored Experiment 2 runs to plot for this model and estimator.")
                return
            with plt.rc_context():
                fig, axes = plt.subplots(1, len(EXPERIMENT2_METRICS), figsize=(13, 3.6))
                plot_uncertainty_grid(rows, highlight=self.last_highlight, axes=list(axes))
                fig.suptitle(f"Experiment 2: {self.model.value}, estimator {self.estimator.value}"
                             f"{self._length_text()} (lines: labelled set size N)", fontsize=11)
                fig.tight_layout()
                self.curves_png = figure_png(fig)
                plt.close(fig)
            display(IPyImage(data=self.curves_png))

    # ------------------------------------------------------------------ display
    @property
    def shown_text(self) -> str:
        """Which stored Experiment 1-2 chains the explorer shows: their mask sizes, labelled-set
        sizes, chain lengths (with the one shown, where there are several: the others are a choice of the
        *chain T* menu) and seeds (one line), or that none is stored."""
        rows = self.rows
        if rows.empty:
            return "No Experiment 1-2 chain is stored for this explorer."

        def values(column: str) -> str:
            if column not in rows.columns:
                return "—"
            return ", ".join(f"{int(v):,}" for v in sorted(rows[column].dropna().unique()))

        key = next((c for c in ("run_key", "entry") if c in rows.columns), None)
        chains = rows[key].nunique() if key else len(rows)
        several = "num_iterations" in rows.columns and rows["num_iterations"].nunique() > 1
        shown = f" (T = {self.num_iterations:,} shown)" if several and self.num_iterations is not None else ""
        return (f"Shown: {chains} stored Experiment 1-2 chains, masks m = {values('mask_size')}; labelled N = "
                f"{values('labelled_size')}; chain length T = {values('num_iterations')}{shown}; "
                f"seeds {values('seed')}.")

    @property
    def status_text(self) -> str:
        """The rate label and the metrics panel as plain text (e.g. for printing in a static notebook)."""
        return "\n".join([self.rate_label.value, html_text(self.metrics_html.value, " | ")])

    def __repr__(self) -> str:
        return (f"MaskingExplorer(m={self.mask_size.value}, N={self.labelled_size.value}, model={self.model.value!r}, "
                f"estimator={self.estimator.value!r}, T={self.num_iterations}, stored cells={len(self.table)})")
