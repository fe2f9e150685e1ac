"""Saving figures and tables: every figure to ``figures/`` as PNG and PDF, every table as CSV and Markdown.

A figure that shows only the paper's numbers (no result of ours, e.g. Figure 5 without CIFAR-10)
is marked as such (:func:`mark_paper_only`) and saved under a name ending in ``_paper_only``, so
that no file of the paper's numbers is named like a result; likewise a table made by
:func:`gped_kit.plotting.tables.paper_table`. Files are written without time stamps or software versions
(:data:`gped_kit.plotting.theme.SAVEFIG_METADATA`): saving unchanged results again changes no byte, and a
PNG already on disk is kept when the new one shows the same content (:func:`figure_content`: its texts and
plotted positions, held in the PNG) and the same image within :data:`CHANGED_PIXELS` (:func:`same_image`).
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.collections import Collection
from matplotlib.image import AxesImage
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.text import Text
from PIL import Image as PILImage

from ..files import atomic_write_bytes
from .tables import PAPER_ONLY_ATTR, integer_columns, markdown_table, same_table
from .theme import kit_theme, savefig_metadata

__all__ = ["CHANGED_PIXELS", "CONTENT_KEY", "CONTENT_RESOLUTION", "PAPER_ONLY_SUFFIX", "PIXEL_TOLERANCE",
           "figure_content", "is_paper_only", "mark_paper_only", "png_content", "same_image", "save_figure",
           "save_table", "write_png"]

#: A PNG on disk counts as the same image as a new one (and is kept) when both have one size and at most this
#: fraction of their pixels differ, a pixel differing when one of its channels differs by more than
#: :data:`PIXEL_TOLERANCE` (of 255).
CHANGED_PIXELS = 0.002
PIXEL_TOLERANCE = 8


#: The PNG text chunk that holds a figure's :func:`figure_content`.
CONTENT_KEY = "gped-kit content"
#: Plotted positions count as the same when they round to the same 1 / CONTENT_RESOLUTION of their axes (about a
#: pixel of a figure a thousand pixels wide): a marker or line that moves further is new content.
CONTENT_RESOLUTION = 1000


def _artist_points(artist) -> list[np.ndarray]:
    """The display positions an artist draws at (lines' points, collections' offsets and paths, patches' outlines)."""
    if isinstance(artist, Line2D):
        return [artist.get_transform().transform(np.asarray(artist.get_xydata(), dtype=float))]
    if isinstance(artist, Collection):
        out = []
        offsets = np.asarray(artist.get_offsets(), dtype=float)
        if offsets.size:
            out.append(artist.get_offset_transform().transform(offsets))
        transform = artist.get_transform()
        out += [transform.transform(path.vertices) for path in artist.get_paths() if len(path.vertices)]
        return out
    if isinstance(artist, Patch):
        vertices = artist.get_path().vertices
        return [artist.get_transform().transform(vertices)] if len(vertices) else []
    return []


def _colour_values(artist) -> np.ndarray | None:
    """The colour-mapped values an image, mesh or coloured scatter shows, through its norm (0 to 1)."""
    if not isinstance(artist, (AxesImage, Collection)) or artist.get_array() is None:
        return None
    values = artist.norm(np.ma.asarray(artist.get_array(), dtype=float))
    return np.ma.filled(np.ma.asarray(values, dtype=float), np.nan).ravel()


def _quantised(values: np.ndarray) -> bytes:
    scaled = np.round(np.asarray(values, dtype=float) * CONTENT_RESOLUTION)
    return np.clip(np.nan_to_num(scaled, nan=-1e9), -1e9, 1e9).astype(np.int64).tobytes()


def figure_content(fig: plt.Figure) -> str:
    """What ``fig`` shows, as a SHA-256 hex digest: every visible text but the tick labels (titles, axis labels,
    legends, annotations, table cells: where a figure states its numbers) and, per axes, every plotted position
    (as a fraction of the axes, rounded to 1 / :data:`CONTENT_RESOLUTION`, so log axes and figure sizes alike) and
    colour-mapped value (through its norm, likewise). The same results drawn again on another machine give the
    same digest; a changed number in a title or a moved marker gives another (which the pixels alone would miss:
    a few hundred pixels of a million). The figure is drawn first, so that its limits and layout are final."""
    fig.canvas.draw()
    digest = hashlib.sha256()
    ticks = {id(t) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis) for t in axis.get_ticklabels(which="both")}
    for text in fig.findobj(Text):
        if text.get_visible() and text.get_text() and id(text) not in ticks:
            digest.update(text.get_text().encode("utf-8") + b"\0")
    for ax in fig.axes:
        box = ax.bbox
        origin, size = np.array([box.x0, box.y0]), np.array([max(box.width, 1e-9), max(box.height, 1e-9)])
        for artist in ax.get_children():
            if not artist.get_visible() or artist is ax.patch:
                continue
            for points in _artist_points(artist):
                digest.update(_quantised((points - origin) / size))
            values = _colour_values(artist)
            if values is not None:
                digest.update(_quantised(values))
            digest.update(b"|")
    return digest.hexdigest()


def png_content(png: bytes | str | Path) -> str | None:
    """The :func:`figure_content` a PNG (bytes, or a file) was saved with; None when it holds none (an image
    saved before figures held their content, or one not made by :func:`save_figure`) or is no PNG."""
    try:
        with PILImage.open(io.BytesIO(png) if isinstance(png, bytes) else Path(png)) as image:
            text = getattr(image, "text", None) or image.info
            value = text.get(CONTENT_KEY)
    except (OSError, ValueError):
        return None
    return str(value) if value is not None else None


def same_image(png: bytes, path: str | Path) -> bool:
    """Whether the PNG file at ``path`` shows what the image ``png`` does: the same :func:`figure_content` where
    ``png`` holds one (the file must hold the same), and the same pixels within :data:`CHANGED_PIXELS` and
    :data:`PIXEL_TOLERANCE`; False when there is no such file or it is no image of the same size."""
    path = Path(path)
    if not path.is_file():
        return False
    content = png_content(png)
    if content is not None and png_content(path) != content:
        return False
    try:
        old = np.asarray(PILImage.open(path).convert("RGB"), dtype=np.int16)
    except (OSError, ValueError):
        return False
    new = np.asarray(PILImage.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)
    if old.shape != new.shape:
        return False
    changed = (np.abs(old - new) > PIXEL_TOLERANCE).any(axis=-1)
    return bool(changed.mean() <= CHANGED_PIXELS)


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
    stamp or software version is written (:func:`~gped_kit.plotting.theme.savefig_metadata`): the same
    figure saved twice gives the same bytes. The PNG holds the figure's :func:`figure_content`. Where both files
    exist and the PNG there holds the same content and shows the same image within :data:`CHANGED_PIXELS`
    (:func:`same_image`: the figure drawn again on another machine, whose numbers differ in their last bits),
    both are kept as they are, so re-running a notebook leaves the repository clean; a changed number in a text
    or a moved point is written."""
    stem = _file_stem(name, is_paper_only(fig))
    figures_dir = Path(figures_dir)
    figures_dir.mkdir(parents=True, exist_ok=True)
    png_path, pdf_path = (figures_dir / f"{stem}.{ext}" for ext in ("png", "pdf"))
    with kit_theme():
        buf = io.BytesIO()
        fig.savefig(buf, format="png", bbox_inches="tight", dpi=150,
                    metadata={**savefig_metadata("png"), CONTENT_KEY: figure_content(fig)})
        if pdf_path.is_file() and same_image(buf.getvalue(), png_path):
            return [png_path, pdf_path]
        atomic_write_bytes(png_path, buf.getvalue())
        fig.savefig(pdf_path, bbox_inches="tight", dpi=150, metadata=savefig_metadata("pdf"))
    return [png_path, pdf_path]


def save_table(table: pd.DataFrame, name: str, figures_dir: str | Path, floatfmt: str = ".3f") -> list[Path]:
    """Save ``table`` as ``<figures_dir>/<name>.csv`` and ``.md`` (Markdown, missing values as "—"), both
    with whole-number float columns as integers (counts that pandas made floats by a missing value:
    :func:`~gped_kit.plotting.tables.integer_columns`); returns the paths. A table of the paper's numbers only
    (made by :func:`~gped_kit.plotting.tables.paper_table`) is saved as ``<name>_paper_only``. Where both files
    exist and the CSV there holds the same table up to round-off (:func:`~gped_kit.plotting.tables.same_table`:
    every number within :data:`~gped_kit.plotting.tables.TABLE_RTOL`, a table computed live again on another
    host), both are kept as they are, so re-running a notebook leaves the repository clean."""
    stem = _file_stem(name, bool(table.attrs.get(PAPER_ONLY_ATTR, False)))
    figures_dir = Path(figures_dir)
    figures_dir.mkdir(parents=True, exist_ok=True)
    csv, md = figures_dir / f"{stem}.csv", figures_dir / f"{stem}.md"
    shown = table.astype({name: "Int64" for name in integer_columns(table)})
    if md.is_file() and same_table(shown, csv):
        return [csv, md]
    atomic_write_bytes(csv, shown.to_csv(index=False).encode())
    atomic_write_bytes(md, markdown_table(table, floatfmt=floatfmt).encode())
    return [csv, md]


def write_png(png: bytes, path: str | Path) -> Path:
    """Write ``png`` to ``path`` atomically (:func:`~gped_kit.files.atomic_write_bytes`), so a reader never
    sees half a file, unless the file there already shows the same image (:func:`same_image`); the folder is
    created if needed."""
    path = Path(path)
    if not same_image(png, path):
        atomic_write_bytes(path, png)
    return path
