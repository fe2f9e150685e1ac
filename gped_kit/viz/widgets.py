"""Interactive explorers of the paper's results, read back from the results store.

:class:`MaskingExplorer` (the masking manipulation of paper 003, Appendix A.1, Figure 3, and the
Experiment 2 results it produces, Section 4, Figures 1 and 4) puts together, for the mask size m
chosen on a slider:

- a few test images with one random m x m zero square each
  (:func:`gped_kit.data.transforms.apply_square_mask`, seeded, so the same images and squares
  come back every time) and the masking rate r = m^2 / (H W) (= m^2 / 784 for MNIST);
- the Experiment 2 curves (:func:`gped_kit.viz.plots.plot_uncertainty_grid`) of the chosen model
  and target estimator, with the cell (r, labelled-set size N) ringed in red;
- the stored metrics of that cell (teacher NLL, student - teacher NLL gap, expected-entropy MAE),
  or a message saying that no run is stored for it.

Its results are the ``summary`` tables of the store's ``"chain"`` entries
(:class:`gped_kit.experiments.store.ResultsStore`, one row per student), narrowed to the chains of
Experiments 1-2 (:func:`experiment12_rows`) and to one chain length T at a time, and collapsed
to one row per cell and estimator by :func:`gped_kit.experiments.experiment12.experiment2_cells`.

:class:`ParetoExplorer` (Experiment 3, Figures 2 and 6-13) shows the searched students of the
store's Experiment 3 search tables (:func:`gped_kit.experiments.experiment3.load_search_results`)
against FLOPs, parameters or latency, with their Pareto frontier, and the architecture and
numbers of the student selected.

Static images: each explorer keeps a PNG of its current view (:attr:`MaskingExplorer.snapshot_png`,
:attr:`ParetoExplorer.snapshot_png`: the plots of the view with its text panel), redrawn on every
change. Displayed in a notebook, an explorer shows its widget and, under it, that PNG as an
ordinary ``image/png`` output (with a display id, so a change of view replaces it in a live
JupyterLab), which any viewer of the saved notebook shows without a kernel (e.g. GitHub, which
draws no widgets). Given a ``figures_dir``, the PNG is also written there under a stable name
(``explorer_masking_<tag>.png``, ``explorer_pareto_<model>_<tag>.png``) on every change.

Nothing here computes results or writes results; the static images are the only files written.
Example (in JupyterLab)::

    from gped_kit.viz.widgets import MaskingExplorer, ParetoExplorer
    MaskingExplorer.from_store("../results", figures_dir="../figures")
    ParetoExplorer.from_store("../results", figures_dir="../figures")
"""

from __future__ import annotations

import base64
import html
import io
import math
import re
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ipywidgets as W
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from IPython.display import Image as IPyImage
from IPython.display import display
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from PIL import Image as PILImage

from ..data.sources import load_split
from ..data.transforms import apply_square_mask, masking_rate
from ..experiments.experiment3 import (
    COSTS,
    METHODS,
    METRIC_TARGET,
    METRICS,
    base_student,
    load_search_results,
    pareto_front,
    search_candidates,
)
from ..experiments.experiment12 import REQUIRED_COLUMNS, experiment2_cells
from ..experiments.store import ResultsStore, atomic_write_bytes
from .plots import EXPERIMENT2_METRICS, plot_pareto, plot_uncertainty_grid

ESTIMATORS = ("U_o", "U_s")
#: Mask size of the paper's Figure 3: the explorer opens on the stored mask size nearest to it.
FIGURE3_MASK_SIZE = 14
#: The targets of the students of an Experiment 1-2 chain (Section 4): the predictive
#: distribution and the expected entropy, each with U_s and U_o (Eqs. 9-10).
EXPERIMENT12_TARGETS = ("predictive", "entropy")
#: Columns that may name a student's chain, in order of preference (a grid's table has
#: ``run_key``; :meth:`ResultsStore.load` adds the entry key as ``entry``).
CHAIN_KEY_COLUMNS = ("run_key", "entry")


# ----------------------------------------------------------------------------- images
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


def _vmax(images: torch.Tensor) -> float:
    return 255.0 if images.dtype == torch.uint8 else float(max(1.0, images.max().item()))


def _show_image(ax: plt.Axes, image: torch.Tensor, region: torch.Tensor, mask_size: int, vmax: float,
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
    vmax = _vmax(images)
    fig, axes = plt.subplots(n, len(mask_sizes), figsize=(axes_size * len(mask_sizes), axes_size * n + 0.4),
                             squeeze=False)
    for j, m in enumerate(mask_sizes):
        masked = apply_square_mask(images, m, seed)
        region = square_mask_region(images, m, seed)
        for i in range(n):
            _show_image(axes[i, j], masked[i], region[i, 0], m, vmax, outline)
        axes[0, j].set_title(f"m = {m}\nr = {masking_rate(m, h, w):.3f}", fontsize=9)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- static images
#: Width (in characters) at which the text panel of a static image is wrapped.
SNAPSHOT_TEXT_WIDTH = 120


def figure_png(fig: Figure, dpi: float | None = None) -> bytes:
    """``fig`` as PNG bytes (tight bounding box, white background; ``dpi`` None: the figure's)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight", facecolor="white", dpi=dpi or fig.dpi)
    return buf.getvalue()


def text_png(lines: Sequence[str], fontsize: float = 9.0, width: int = SNAPSHOT_TEXT_WIDTH) -> bytes:
    """Lines of plain text as a PNG (monospaced, long lines wrapped at ``width`` characters)."""
    wrapped = [part for line in lines for part in (textwrap.wrap(line, width, subsequent_indent="  ") or [""])]
    fig = Figure(figsize=(0.1, 0.1), dpi=100)
    fig.text(0, 1, "\n".join(wrapped) or " ", va="top", ha="left", family="monospace", fontsize=fontsize)
    return figure_png(fig)


def stack_pngs(pngs: Sequence[bytes | None], vertical: bool = True, gap: int = 10, margin: int = 6) -> bytes:
    """PNG images put together on a white background, top to bottom (``vertical``) or left to
    right, each centred across the other direction; None entries are skipped."""
    images = [PILImage.open(io.BytesIO(png)).convert("RGB") for png in pngs if png]
    if not images:
        raise ValueError("stack_pngs needs at least one image")
    sizes = [im.size for im in images]
    if vertical:
        width = max(w for w, _ in sizes)
        height = sum(h for _, h in sizes) + gap * (len(images) - 1)
    else:
        width = sum(w for w, _ in sizes) + gap * (len(images) - 1)
        height = max(h for _, h in sizes)
    canvas = PILImage.new("RGB", (width + 2 * margin, height + 2 * margin), "white")
    pos = margin
    for im in images:
        w, h = im.size
        if vertical:
            canvas.paste(im, (margin + (width - w) // 2, pos))
            pos += h + gap
        else:
            canvas.paste(im, (pos, margin + (height - h) // 2))
            pos += w + gap
    buf = io.BytesIO()
    canvas.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def write_png(png: bytes, path: str | Path) -> Path:
    """Write ``png`` to ``path`` atomically (:func:`~gped_kit.experiments.store.atomic_write_bytes`),
    so a reader never sees half a file; the folder is created if needed."""
    path = Path(path)
    atomic_write_bytes(path, png)
    return path


def _png_bundle(png: bytes, caption: str) -> dict[str, str]:
    return {"image/png": base64.b64encode(png).decode("ascii"), "text/plain": caption}


def _safe_name(value: Any) -> str:
    """A file-name part: runs of characters other than letters, digits, '.', '-' and '_' become '_'."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(value)).strip("_") or "none"


class _StaticView:
    """What both explorers share: the PNG of the current view (:attr:`snapshot_png`), the file it
    is written to in :attr:`figures_dir`, and the plain ``image/png`` outputs showing it under the
    widget in a notebook (updated in place through their display ids)."""

    widget: W.Widget
    snapshot_png: bytes | None
    snapshot_file: Path | None
    figures_dir: Path | None
    tag: str

    def _init_static(self, figures_dir: str | Path | None, tag: str) -> None:
        self.figures_dir = None if figures_dir is None else Path(figures_dir)
        self.tag = _safe_name(tag)
        self.snapshot_png = None
        self.snapshot_file = None
        self.snapshot_count = 0  # how many times the static image was made (tests, diagnostics)
        self._snapshot_handles: list = []
        self._snapshot_caption = ""

    def snapshot_name(self) -> str:
        """The file name (without folder) the current view's image is written to."""
        raise NotImplementedError

    def _snapshot_parts(self) -> tuple[list[str], list[bytes | None]]:
        """The text lines and the PNGs (plots) of the current view."""
        raise NotImplementedError

    def _compose_snapshot(self, lines: list[str], pngs: list[bytes | None]) -> bytes:
        return stack_pngs([text_png(lines), *pngs])

    def _update_snapshot(self) -> None:
        """Make the static image of the current view, write it to :attr:`figures_dir` and show it
        in place of the previous one under every displayed copy of the widget."""
        lines, pngs = self._snapshot_parts()
        self.snapshot_png = self._compose_snapshot(lines, pngs)
        self.snapshot_count += 1
        self._snapshot_caption = " | ".join(lines[:2])
        if self.figures_dir is not None:
            self.snapshot_file = write_png(self.snapshot_png, self.figures_dir / self.snapshot_name())
        bundle = self._snapshot_bundle()
        for handle in self._snapshot_handles:
            handle.update(bundle, raw=True)

    def _snapshot_bundle(self) -> dict[str, str]:
        where = f"; saved as {self.snapshot_file}" if self.snapshot_file is not None else ""
        return _png_bundle(self.snapshot_png, f"[{self._snapshot_caption}{where}]")

    def _ipython_display_(self) -> None:
        """Display the widget and, under it, the static image of the current view as a plain
        ``image/png`` output, kept up to date (display id) while the kernel lives."""
        display(self._repr_mimebundle_() or {"text/plain": repr(self)}, raw=True)
        if self.snapshot_png is not None:
            handle = display(self._snapshot_bundle(), raw=True, display_id=True)
            if handle is not None:  # None outside IPython, where display only prints
                self._snapshot_handles.append(handle)


# ----------------------------------------------------------------------------- widget
def _fmt(value: Any, digits: int = 4) -> str:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return "&mdash;"
    return "&mdash;" if math.isnan(value) else f"{value:.{digits}f}"


def _html_text(markup: str, cell_separator: str) -> str:
    """An HTML panel as plain text: one line per paragraph or table row, cells joined by
    ``cell_separator``, empty lines dropped."""
    text = re.sub(r"</(p|tr)>", "\n", markup)
    text = re.sub(r"</t[hd]>", cell_separator, text)
    text = html.unescape(re.sub(r"<[^>]+>", "", text))
    strip = cell_separator + " "
    return "\n".join(line.strip(strip) for line in text.splitlines() if line.strip(strip))


# ----------------------------------------------------------------------------- stored rows
def _chain_key(rows: pd.DataFrame) -> str | None:
    return next((c for c in CHAIN_KEY_COLUMNS if c in rows.columns), None)


def experiment12_rows(summary: pd.DataFrame, dataset: str | None = "mnist") -> pd.DataFrame:
    """The student rows of Experiment 1-2 chains among stored chain summaries.

    ``summary`` holds one row per (chain, student), e.g. ``ResultsStore(root).load("summary",
    "chain")`` (every chain of the store: Experiments 1-4, the comparisons, ...). An Experiment 1-2
    chain (:func:`gped_kit.experiments.experiment12.distillation_task`) distils the predictive
    distribution and the expected entropy into students with the teacher's architecture, so a
    row is kept when its ``target`` is one of :data:`EXPERIMENT12_TARGETS`, its ``student_arch``
    is its ``model`` and its width multipliers ``k1``, ``k2`` are 1, and (``dataset`` not None)
    its ``dataset`` is ``dataset``. When the rows name their chain (a column of
    :data:`CHAIN_KEY_COLUMNS`), a chain is kept whole or not at all: every one of its students
    must pass, and it must have students of both targets. That leaves out the Experiment 3
    searches (students of other widths), Experiment 4 and the comparisons (C+1 and EnD2
    students), and the learning-rate schedule check (predictive students only), whose
    students would otherwise be averaged into the Experiment 2 cells. A test whose column is
    absent is not applied.

    Raises:
        TypeError: ``summary`` is not a DataFrame.
        ValueError: a column :func:`~gped_kit.experiments.experiment12.experiment2_cells` needs
            is missing (named in the message); an empty frame without columns is accepted.
    """
    if not isinstance(summary, pd.DataFrame):
        raise TypeError(f"summary must be a pandas DataFrame, got {type(summary).__name__}")
    if len(summary.columns) == 0:
        return summary.copy()
    missing = [c for c in REQUIRED_COLUMNS if c not in summary.columns]
    if missing:
        raise ValueError(f"summary lacks the column(s) {missing}; Experiment 1-2 rows need {list(REQUIRED_COLUMNS)} "
                         f"(one row per student, as a chain entry's summary table has them)")
    df = summary
    if dataset is not None and "dataset" in df.columns:
        df = df[df["dataset"].astype(str).str.lower() == str(dataset).lower()]
    passes = df["target"].isin(EXPERIMENT12_TARGETS)
    if "student_arch" in df.columns:
        passes &= df["student_arch"].astype(str) == df["model"].astype(str)
    for col in ("k1", "k2"):
        if col in df.columns:
            passes &= pd.to_numeric(df[col], errors="coerce").fillna(1.0) == 1.0
    key = _chain_key(df)
    if key is None:
        return df[passes].copy()
    flags = pd.DataFrame({"passes": passes, **{t: df["target"] == t for t in EXPERIMENT12_TARGETS}})
    by_chain = flags.groupby(df[key], dropna=False)
    chains = pd.concat([by_chain["passes"].all(), by_chain[list(EXPERIMENT12_TARGETS)].any()], axis=1)
    kept = chains.index[chains.all(axis=1)]
    return df[df[key].isin(kept)].copy()


def chain_lengths(rows: pd.DataFrame) -> dict[int, int]:
    """Number of chains per chain length T (``num_iterations``) among ``rows``, by T; chains are
    counted by their key (:data:`CHAIN_KEY_COLUMNS`), else every row counts. Empty when the
    column is absent."""
    if "num_iterations" not in rows.columns or rows.empty:
        return {}
    key = _chain_key(rows)
    lengths = rows.dropna(subset=["num_iterations"])
    counts = (lengths.groupby("num_iterations")[key].nunique() if key else lengths.groupby("num_iterations").size())
    return {int(t): int(n) for t, n in sorted(counts.items())}


class MaskingExplorer(_StaticView):
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

    Static image: :attr:`snapshot_png` is a PNG of the current view (the text of the rate label
    and metrics panel, the masked digits and the curves), made again on every change; with
    ``figures_dir`` it is written to ``<figures_dir>/explorer_masking_<tag>.png``
    (:attr:`snapshot_file`). Displayed as the last expression of a cell (or with ``display``),
    the explorer shows the widget and under it that PNG as a plain image output, which viewers
    without a kernel show and which a live kernel replaces on every change.

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

    def __init__(self, results: pd.DataFrame, images: torch.Tensor | None = None, dataset: str = "mnist",
                 data_root: str | Path | None = None, num_examples: int = 8, seed: int = 0,
                 num_iterations: int | None = None, figures_dir: str | Path | None = None,
                 tag: str = "default") -> None:
        self._init_static(figures_dir, tag)
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
        ])
        self.mask_size.observe(self._on_mask_change, names="value")
        for control in (self.labelled_size, self.model, self.estimator):
            control.observe(self._on_selection_change, names="value")
        self.chain_length.observe(self._on_chain_length_change, names="value")
        self.refresh()

    @classmethod
    def from_store(cls, results_dir: str | Path, num_iterations: int | None = None, **kwargs: Any) -> MaskingExplorer:
        """An explorer over the Experiment 1-2 chains stored in ``ResultsStore(results_dir)`` (the
        ``summary`` tables of its ``"chain"`` entries; each entry's key counts as one chain); an
        empty or absent store gives an explorer that says so. ``num_iterations`` picks the chain
        length shown first; ``kwargs`` go to the constructor."""
        summary = ResultsStore(results_dir).load("summary", "chain")
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
                vmax = _vmax(self.examples)
                for i, ax in enumerate(axes[0]):
                    _show_image(ax, self.masked_images[i], region[i, 0], m, vmax, outline=True)
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
                    f"<code>notebooks/02_experiment2_mnist.ipynb</code> to fill the store; the images above "
                    f"work without it.")
        return (f"<b>no stored run for m={m}, N={n}</b> (model {html.escape(str(self.model.value))}, "
                f"estimator {self.estimator.value}{self._length_text()}).")

    def _length_text(self) -> str:
        return "" if self.num_iterations is None else f", chains of T = {self.num_iterations:,}"

    def _draw_metrics(self) -> None:
        row = self.selected_row()
        if row is None:
            self.metrics_html.value = self._no_run_message()
            self._metric_lines = _html_text(self.metrics_html.value, " | ").splitlines()
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
                 (EXPERIMENT2_METRICS["teacher_nll"], _fmt(row["teacher_nll"])),
                 ("student test NLL", _fmt(row["student_nll"])),
                 (EXPERIMENT2_METRICS["nll_gap"], _fmt(row["nll_gap"])),
                 (EXPERIMENT2_METRICS["entropy_mae"], _fmt(row["entropy_mae"])),
                 ("stored chains", f"{int(row['n_runs'])}")]
        if self.num_iterations is not None:
            cells.append(("chain length T", f"{self.num_iterations:,}"))
        head = "".join(f"<th style='padding:2px 8px'>{k}</th>" for k, _ in cells)
        body = "".join(f"<td style='padding:2px 8px;text-align:right'>{v}</td>" for _, v in cells)
        parts.append(f"<table><tr>{head}</tr><tr>{body}</tr></table>")
        self.metrics_html.value = "".join(parts)
        pairs = [f"{k}: {html.unescape(v)}" for k, v in cells]
        self._metric_lines = ([_html_text(parts[0], " ")] if len(parts) > 1 else []) + [
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
    def status_text(self) -> str:
        """The rate label and the metrics panel as plain text (e.g. for printing in a static notebook)."""
        return "\n".join([self.rate_label.value, _html_text(self.metrics_html.value, " | ")])

    def __repr__(self) -> str:
        return (f"MaskingExplorer(m={self.mask_size.value}, N={self.labelled_size.value}, model={self.model.value!r}, "
                f"estimator={self.estimator.value!r}, T={self.num_iterations}, stored cells={len(self.table)})")

    def _repr_mimebundle_(self, **kwargs: Any) -> dict | None:
        bundle = self.widget._repr_mimebundle_(**kwargs)
        if bundle is not None:
            bundle["text/plain"] = repr(self)
        return bundle


# ============================================================================= Experiment 3
class ParetoExplorer(_StaticView):
    """Pareto-frontier explorer of an Experiment 3 search (paper 003, Section 4, Figures 2 and 6-13).

    Controls (public, so code and tests can drive them): ``model`` (Dropdown of the teacher models
    in the table), ``metric`` (Dropdown: test NLL, test accuracy, expected-entropy MAE -- those
    with stored students for the model), ``cost`` (Dropdown: FLOPs per input, parameters,
    measured latency), ``method`` (ToggleButtons: exhaustive search, group l1/l2 + pruning, both)
    and ``point`` (Dropdown of the students shown, cheapest first; choosing one selects it).
    Views: ``plot_out`` (the panel of :func:`gped_kit.viz.plots.plot_pareto`: students, frontier,
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

    Static image: :attr:`snapshot_png` is a PNG of the current view (the plot beside the details
    panel's text), made again on every change; with ``figures_dir`` it is written to
    ``<figures_dir>/explorer_pareto_<model>_<tag>.png`` (:attr:`snapshot_file`; one file per model,
    holding the last view of that model). Displayed as the last expression of a cell (or with
    ``display``), the explorer shows the widget and under it that PNG as a plain image output,
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

    def __init__(self, table: pd.DataFrame, figures_dir: str | Path | None = None, tag: str = "default") -> None:
        self._init_static(figures_dir, tag)
        if not isinstance(table, pd.DataFrame):
            raise TypeError(f"table must be a pandas DataFrame, got {type(table).__name__}")
        needed = ("model", "method", "stage", "target", "student", "is_base")
        missing = [c for c in needed if c not in table.columns]
        if len(table.columns) and missing:
            raise ValueError(f"table lacks the column(s) {missing}; an Experiment 3 search table has "
                             f"{list(needed)} besides metric and cost columns (see gped_kit.experiments.experiment3)")
        self.table = table
        self.source = ""
        self._updating = False
        self.last_selection: pd.Series | None = None
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
                              self.details_html, self.plot_out])
        self.model.observe(self._on_model_change, names="value")
        for control in (self.metric, self.cost, self.method):
            control.observe(self._on_view_change, names="value")
        self.point.observe(self._on_point_change, names="value")
        self._refresh_points()
        self._draw()

    @classmethod
    def from_store(cls, results_dir: str | Path, figures_dir: str | Path | None = None,
                   tag: str = "default") -> ParetoExplorer:
        """An explorer over every Experiment 3 search stored in ``ResultsStore(results_dir)``
        (:func:`gped_kit.experiments.experiment3.load_search_results`); an empty or absent store
        gives one that says so. ``figures_dir`` and ``tag`` as for the constructor."""
        explorer = cls(load_search_results(ResultsStore(results_dir)), figures_dir=figures_dir, tag=tag)
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
        rows = rows[rows["target"] == METRIC_TARGET[self.metric.value]].dropna(subset=[self.metric.value, cost])
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
                   if key in rows.columns and rows[rows["target"] == METRIC_TARGET[key]][key].notna().any()]
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
        model = "" if self.model.value is None else f"{_safe_name(self.model.value)}_"
        return f"explorer_pareto_{model}{self.tag}.png"

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
        self.last_selection = row
        if row is None:
            if self.table.empty:
                where = f" under <code>{html.escape(self.source)}</code>" if self.source else ""
                self.details_html.value = (f"<b>No Experiment 3 search stored yet{where}.</b> Run "
                                           "<code>notebooks/05_experiment3_search.ipynb</code> to fill the store.")
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
                cells.append((label, _fmt(row[key])))
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
        return _html_text(self.details_html.value, ": ")

    def __repr__(self) -> str:
        return (f"ParetoExplorer(model={self.model.value!r}, metric={self.metric.value!r}, cost={self.cost.value!r}, "
                f"method={self.method.value!r}, selected={self.point.value!r}, shown={len(self.visible())})")

    def _repr_mimebundle_(self, **kwargs: Any) -> dict | None:
        bundle = self.widget._repr_mimebundle_(**kwargs)
        if bundle is not None:
            bundle["text/plain"] = repr(self)
        return bundle


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
