"""Saving figures and tables: every figure to ``figures/`` as PNG and PDF, every table as CSV and Markdown.

A figure that shows only the paper's numbers (no result of ours, e.g. Figure 5 without CIFAR-10)
is marked as such (:func:`mark_paper_only`) and saved under a name ending in ``_paper_only``, so
that no file of the paper's numbers is named like a result; likewise a table made by
:func:`gped_kit.plotting.tables.paper_table`. Files are written without time stamps or software versions
(:data:`gped_kit.plotting.theme.SAVEFIG_METADATA`): saving unchanged results again changes no byte, and a
PNG already on disk is kept when the new one shows the same image within :data:`CHANGED_PIXELS`
(:func:`same_image`).
"""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from PIL import Image as PILImage

from ..files import atomic_write_bytes
from .tables import PAPER_ONLY_ATTR, integer_columns, markdown_table, same_table
from .theme import kit_theme, savefig_metadata

__all__ = ["CHANGED_PIXELS", "PAPER_ONLY_SUFFIX", "PIXEL_TOLERANCE", "is_paper_only", "mark_paper_only", "same_image",
           "save_figure", "save_table", "write_png"]

#: A PNG on disk counts as the same image as a new one (and is kept) when both have one size and at most this
#: fraction of their pixels differ, a pixel differing when one of its channels differs by more than
#: :data:`PIXEL_TOLERANCE` (of 255).
CHANGED_PIXELS = 0.002
PIXEL_TOLERANCE = 8


def same_image(png: bytes, path: str | Path) -> bool:
    """Whether the PNG file at ``path`` shows the image ``png`` does, within :data:`CHANGED_PIXELS` and
    :data:`PIXEL_TOLERANCE`; False when there is no such file or it is no image of the same size."""
    path = Path(path)
    if not path.is_file():
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
    figure saved twice gives the same bytes. Where both files exist and the PNG there shows the same
    image within :data:`CHANGED_PIXELS` (:func:`same_image`:
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
