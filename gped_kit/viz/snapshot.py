"""Static images of the explorers' views, for viewers without a kernel.

An explorer (:class:`~gped_kit.viz.masking_explorer.MaskingExplorer`,
:class:`~gped_kit.viz.pareto_explorer.ParetoExplorer`) is a :class:`StaticView`: it keeps a PNG of
its current view (:attr:`StaticView.snapshot_png`: the plots of the view with its text panel),
redrawn on every change. Displayed in a notebook, it shows its widget and, under it, that PNG as
an ordinary ``image/png`` output (with a display id, so a change of view replaces it in a live
JupyterLab), which any viewer of the saved notebook shows without a kernel (e.g. GitHub, which
draws no widgets). Given a ``figures_dir``, the opening view's PNG is written there under a stable name
(atomically, :func:`~gped_kit.experiments.store.atomic_write_bytes`), and the current view's when the user
asks (:meth:`StaticView.save_view`, the widget's *save this view* button): exploring writes nothing, so a
few clicks in JupyterLab leave the repository as it was.

A PNG already on disk is kept when the new one holds the same content (its texts and plotted positions,
:func:`~gped_kit.plotting.save.figure_content`) and shows the same image within
:data:`~gped_kit.plotting.save.CHANGED_PIXELS` (:func:`~gped_kit.plotting.save.same_image`): the same view drawn
on another machine differs in the last bits of its numbers, a line moved by a pixel here and there, and rewriting it
would only dirty the repository."""

from __future__ import annotations

import base64
import hashlib
import html
import io
import math
import re
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ipywidgets as W
from IPython.display import display
from matplotlib.figure import Figure
from PIL import Image as PILImage
from PIL.PngImagePlugin import PngInfo

from ..experiments.artifacts import Artifact
from ..experiments.store import ResultsStore
from ..plotting.save import CONTENT_KEY, figure_content, png_content, write_png
from ..plotting.theme import savefig_metadata

if TYPE_CHECKING:  # the writer saves through this module: a type only
    from .writer import ArtifactWriter

#: Width (in characters) at which the text panel of a static image is wrapped.
SNAPSHOT_TEXT_WIDTH = 120


def figure_png(fig: Figure, dpi: float | None = None) -> bytes:
    """``fig`` as PNG bytes (tight bounding box, white background; ``dpi`` None: the figure's), holding its
    :func:`~gped_kit.plotting.save.figure_content`."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight", facecolor="white", dpi=dpi or fig.dpi,
                metadata={**savefig_metadata("png"), CONTENT_KEY: figure_content(fig)})
    return buf.getvalue()


def text_png(lines: Sequence[str], fontsize: float = 9.0, width: int = SNAPSHOT_TEXT_WIDTH) -> bytes:
    """Lines of plain text as a PNG (monospaced, long lines wrapped at ``width`` characters)."""
    wrapped = [part for line in lines for part in (textwrap.wrap(line, width, subsequent_indent="  ") or [""])]
    fig = Figure(figsize=(0.1, 0.1), dpi=100)
    fig.text(0, 1, "\n".join(wrapped) or " ", va="top", ha="left", family="monospace", fontsize=fontsize)
    return figure_png(fig)


def stack_pngs(pngs: Sequence[bytes | None], vertical: bool = True, gap: int = 10, margin: int = 6) -> bytes:
    """PNG images put together on a white background, top to bottom (``vertical``) or left to
    right, each centred across the other direction; None entries are skipped. Where every part holds its
    content (:func:`~gped_kit.plotting.save.png_content`: each made by :func:`figure_png`), the result holds
    theirs together, so that a view whose numbers change is written again
    (:func:`~gped_kit.plotting.save.same_image`)."""
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
    contents = [png_content(png) for png in pngs if png]
    info = PngInfo()
    if all(c is not None for c in contents):
        info.add_text(CONTENT_KEY, hashlib.sha256("+".join(contents).encode()).hexdigest())
    buf = io.BytesIO()
    canvas.save(buf, format="PNG", optimize=True, pnginfo=info)
    return buf.getvalue()



def png_bundle(png: bytes, caption: str) -> dict[str, str]:
    return {"image/png": base64.b64encode(png).decode("ascii"), "text/plain": caption}


def safe_name(value: Any) -> str:
    """A file-name part: runs of characters other than letters, digits, '.', '-' and '_' become '_'."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(value)).strip("_") or "none"


def writer_store(writer: ArtifactWriter | None, results_dir: str | Path) -> ResultsStore:
    """The store an explorer reads: the notebook writer's when it is the one at ``results_dir`` (so that the
    view's image records the entries it rests on), else a new one there."""
    if writer is not None and writer.store is not None and writer.store.root.resolve() == Path(results_dir).resolve():
        return writer.store
    return ResultsStore(results_dir)


class StaticView:
    """What every explorer shares: the PNG of the current view (:attr:`snapshot_png`), the file it
    is written to in :attr:`figures_dir`, the plain ``image/png`` outputs showing it under the
    widget in a notebook (updated in place through their display ids), and the widget's own
    display with the explorer's ``repr`` as its text. A subclass sets :attr:`widget` and defines
    :meth:`snapshot_name` and :meth:`_snapshot_parts`."""

    widget: W.Widget
    snapshot_png: bytes | None
    snapshot_file: Path | None
    figures_dir: Path | None
    tag: str
    #: The artifact a notebook's writer records the view's image as (:mod:`gped_kit.experiments.artifacts`).
    artifact: Artifact

    def _init_static(self, figures_dir: str | Path | None, tag: str, writer: ArtifactWriter | None = None) -> None:
        if writer is not None:
            if figures_dir is not None:
                raise ValueError("give figures_dir or writer (which writes to its own folder), not both")
            figures_dir, tag = writer.figures_dir, writer.profile
        self.writer = writer
        self.figures_dir = None if figures_dir is None else Path(figures_dir)
        self.tag = safe_name(tag)
        self.snapshot_png = None
        self.snapshot_file = None
        self.snapshot_count = 0  # how many times the static image was made (tests, diagnostics)
        self._snapshot_handles: list = []
        self._snapshot_caption = ""
        self._saved_png: bytes | None = None  # the image last written to snapshot_file
        self.save_button = W.Button(description="save this view", tooltip="write this view's image to figures_dir",
                                    layout=W.Layout(width="auto"))
        self.save_button.on_click(lambda _: self.save_view())

    def _save_controls(self) -> list[W.Widget]:
        """The widget's *save this view* button, where there is a ``figures_dir`` to save to."""
        return [self.save_button] if self.figures_dir is not None else []

    def save_view(self) -> Path:
        """Write the current view's image to :attr:`figures_dir` (its :meth:`snapshot_name`) and return the
        path; ``ValueError`` when the explorer was made without a ``figures_dir``."""
        if self.figures_dir is None or self.snapshot_png is None:
            raise ValueError("this explorer has no figures_dir to save its view to: make it with "
                             "figures_dir='../figures' (or another folder)")
        if self.writer is not None:
            values = self.snapshot_values()
            if values is None:
                raise ValueError("this view shows nothing to save (no stored result)")
            self.snapshot_file = self.writer.snapshot(self.snapshot_png, self.artifact, **values)
        else:
            self.snapshot_file = write_png(self.snapshot_png, self.figures_dir / self.snapshot_name())
        self._saved_png = self.snapshot_png
        bundle = self._snapshot_bundle()
        for handle in self._snapshot_handles:
            handle.update(bundle, raw=True)
        return self.snapshot_file

    def snapshot_name(self) -> str:
        """The file name (without folder) the current view's image is written to."""
        raise NotImplementedError

    def snapshot_values(self) -> dict[str, str] | None:
        """The fields of :attr:`artifact`'s file name other than the profile for the current view (None: the
        view shows nothing a notebook's writer records)."""
        return {}

    def _snapshot_parts(self) -> tuple[list[str], list[bytes | None]]:
        """The text lines and the PNGs (plots) of the current view."""
        raise NotImplementedError

    def _compose_snapshot(self, lines: list[str], pngs: list[bytes | None]) -> bytes:
        return stack_pngs([text_png(lines), *pngs])

    def _update_snapshot(self) -> None:
        """Make the static image of the current view and show it in place of the previous one under every
        displayed copy of the widget; the opening view's is also written to :attr:`figures_dir`, later ones
        only when asked (:meth:`save_view`)."""
        lines, pngs = self._snapshot_parts()
        self.snapshot_png = self._compose_snapshot(lines, pngs)
        self.snapshot_count += 1
        self._snapshot_caption = " | ".join(lines[:2])
        if self.figures_dir is not None and self._saved_png is None and (
                self.writer is None or self.snapshot_values() is not None):
            self.save_view()
            return
        bundle = self._snapshot_bundle()
        for handle in self._snapshot_handles:
            handle.update(bundle, raw=True)

    def _snapshot_bundle(self) -> dict[str, str]:
        saved = self.snapshot_file is not None and self._saved_png == self.snapshot_png
        where = f"; saved as {self.snapshot_file.name}" if saved else ""
        return png_bundle(self.snapshot_png, f"[{self._snapshot_caption}{where}]")

    def _ipython_display_(self) -> None:
        """Display the widget and, under it, the static image of the current view as a plain
        ``image/png`` output, kept up to date (display id) while the kernel lives."""
        display(self._repr_mimebundle_() or {"text/plain": repr(self)}, raw=True)
        if self.snapshot_png is not None:
            handle = display(self._snapshot_bundle(), raw=True, display_id=True)
            if handle is not None:  # None outside IPython, where display only prints
                self._snapshot_handles.append(handle)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict | None:
        """The widget's display bundle, with the explorer's ``repr`` as its text."""
        bundle = self.widget._repr_mimebundle_(**kwargs)
        if bundle is not None:
            bundle["text/plain"] = repr(self)
        return bundle


def html_number(value: Any, digits: int = 4) -> str:
    """``value`` with ``digits`` decimals for an HTML panel; an em dash when it is missing or not a number."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return "&mdash;"
    return "&mdash;" if math.isnan(value) else f"{value:.{digits}f}"


def html_text(markup: str, cell_separator: str) -> str:
    """An HTML panel as plain text: one line per paragraph or table row, cells joined by
    ``cell_separator``, empty lines dropped."""
    text = re.sub(r"</(p|tr)>", "\n", markup)
    text = re.sub(r"</t[hd]>", cell_separator, text)
    text = html.unescape(re.sub(r"<[^>]+>", "", text))
    strip = cell_separator + " "
    return "\n".join(line.strip(strip) for line in text.splitlines() if line.strip(strip))
