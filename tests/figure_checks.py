"""A checker of drawn figures for the kinds of defect a reader sees at once (issue 29):

- a line or a marker outside its axes' range (drawn past the edge, or clipped at it: a curve that
  runs off the panel, an off-scale student drawn as a line leaving the axes);
- two series in one axes, or two entries of one legend, that look alike: the same marker and line
  style in colours closer than :data:`gped_kit.viz.theme.SIMILAR_COLOR_DELTA_E` (two students in
  the same grey, two near-identical oranges);
- an axis whose tick labels show numbers or names but that has no label (x and y), a colour bar
  without a label, a colour scale (an image, hexbins, filled contours) without a colour bar;
- an axis label that is a raw variable name (``num_data``, ``mean_kl_test``);
- a legend drawn over data (a data point or a stretch of a line under the legend's box).

:func:`figure_defects` returns one sentence per defect found (empty: none). It draws the figure
first (Agg), so limits and layout are final; it reads the artists matplotlib holds, so it checks
any figure, the kit's or a hand-made one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import Collection, PathCollection
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure, SubFigure
from matplotlib.image import AxesImage
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from gped_kit.viz.theme import SIMILAR_COLOR_DELTA_E, color_difference

#: Pixels a point may lie past an axes' edge and still count as inside (markers drawn on the edge).
EDGE_TOLERANCE_PX = 1.5

#: An axis label token that is a variable name: lower case words joined by underscores, outside $...$.
RAW_NAME = re.compile(r"(?<![\w$\\])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![\w$])")


def _all_axes(fig: Figure | SubFigure) -> Iterator[Axes]:
    yield from fig.get_axes()
    for sub in getattr(fig, "subfigs", []):
        yield from _all_axes(sub)


def _all_legends(fig: Figure | SubFigure) -> Iterator[Legend]:
    yield from fig.legends
    for ax in fig.get_axes():
        if ax.get_legend() is not None:
            yield ax.get_legend()
    for sub in getattr(fig, "subfigs", []):
        yield from _all_legends(sub)


def _has_sup_label(ax: Axes, which: str) -> bool:
    holder = ax.get_figure(root=False)
    while holder is not None:
        label = getattr(holder, f"_sup{which}label", None)
        if label is not None and label.get_text():
            return True
        parent = getattr(holder, "_parent", None)
        holder = parent if parent is not holder else None
    return False


def _is_colorbar(ax: Axes) -> bool:
    return getattr(ax, "_colorbar", None) is not None


def _is_reference(line: Line2D, ax: Axes) -> bool:
    """A line drawn in axes coordinates along one direction (axhline, axvline), not a data series."""
    return line.get_transform() != ax.transData


def _line_name(line: Line2D) -> str:
    label = line.get_label()
    return repr(label) if label and not label.startswith("_") else "an unlabelled line"


def _finite_display(transform, xy: np.ndarray) -> np.ndarray:
    xy = np.asarray(xy, dtype=float).reshape(-1, 2)
    with np.errstate(all="ignore"):
        shown = transform.transform(xy) if len(xy) else xy
    return shown[np.isfinite(shown).all(axis=1)]


def _outside(points: np.ndarray, bbox) -> np.ndarray:
    tol = EDGE_TOLERANCE_PX
    return ((points[:, 0] < bbox.x0 - tol) | (points[:, 0] > bbox.x1 + tol)
            | (points[:, 1] < bbox.y0 - tol) | (points[:, 1] > bbox.y1 + tol))


def _line_points(line: Line2D) -> np.ndarray:
    """A line's vertices in display coordinates; masked or non-finite points dropped."""
    xy = np.ma.filled(np.ma.asarray(line.get_xydata(), dtype=float), np.nan)
    return _finite_display(line.get_transform(), xy)


def _collection_points(coll: Collection) -> np.ndarray:
    offsets = np.ma.filled(np.ma.asarray(coll.get_offsets(), dtype=float), np.nan)
    if len(offsets) == 0:
        return np.empty((0, 2))
    return _finite_display(coll.get_offset_transform(), offsets)


def out_of_range(ax: Axes) -> list[str]:
    """Lines and markers of ``ax`` that lie outside its range (drawn past the edge or clipped)."""
    found = []
    bbox = ax.bbox
    for line in ax.lines:
        if not line.get_visible():
            continue
        points = _line_points(line)
        if len(points) and _outside(points, bbox).any():
            found.append(f"{_line_name(line)} leaves the axes ({int(_outside(points, bbox).sum())} of "
                         f"{len(points)} points outside the range shown)")
    for coll in ax.collections:
        if not coll.get_visible() or not isinstance(coll, PathCollection):
            continue  # markers (scatter); hexbins, contours and line collections are drawn to the axes
        points = _collection_points(coll)
        if len(points) and _outside(points, bbox).any():
            label = coll.get_label()
            name = repr(label) if label and not label.startswith("_") else "unlabelled markers"
            found.append(f"{name}: {int(_outside(points, bbox).sum())} of {len(points)} markers outside the "
                         "range shown")
    return found


def _style(artist) -> tuple | None:
    """(colour, marker, line style) of a series or a legend handle; None when it has no colour of its own."""
    if isinstance(artist, Line2D):
        marker = artist.get_marker()
        marker = "" if marker in (None, "None", "none", " ", "") else str(marker)
        ls = artist.get_linestyle()
        ls = "" if ls in ("None", "none", " ", "") else ls
        colour = artist.get_color()
        if not ls and marker:  # markers only: their colour is the face's, or the edge's of an open (white) marker
            face, edge = to_rgba(artist.get_markerfacecolor()), to_rgba(artist.get_markeredgecolor())
            open_face = face[3] == 0 or color_difference(face[:3], "white") < color_difference(edge[:3], "white")
            colour = edge if open_face else face
        return (to_rgba(colour), marker, ls)
    if isinstance(artist, Patch):
        return (to_rgba(artist.get_facecolor()), "patch", artist.get_linestyle())
    return None


def _alike(a: tuple, b: tuple) -> bool:
    return a[1:] == b[1:] and color_difference(a[0][:3], b[0][:3]) < SIMILAR_COLOR_DELTA_E


def look_alike_series(ax: Axes) -> list[str]:
    """Pairs of data series in ``ax`` with the same marker and line style in similar colours."""
    series: list[tuple[str, tuple]] = []
    for line in ax.lines:
        if not line.get_visible() or _is_reference(line, ax) or len(line.get_xydata()) < 2:
            continue
        series.append((line.get_label(), _style(line)))
    for container in ax.containers:
        patches = [p for p in container if isinstance(p, Patch)]
        if patches:
            series.append((container.get_label(), _style(patches[0])))
    found = []
    for i, (name_a, style_a) in enumerate(series):
        for name_b, style_b in series[i + 1:]:
            if name_a == name_b and not name_a.startswith("_"):
                continue  # one series drawn in pieces
            if _alike(style_a, style_b):
                found.append(f"series {name_a!r} and {name_b!r} look alike (marker {style_a[1] or 'none'!r}, "
                             f"line {style_a[2] or 'none'!r}, colours Delta E "
                             f"{color_difference(style_a[0][:3], style_b[0][:3]):.0f})")
    return found


def look_alike_legend_entries(legend: Legend) -> list[str]:
    """Pairs of entries of ``legend`` whose handles look alike."""
    entries = [(text.get_text(), _style(handle)) for text, handle in zip(legend.get_texts(), legend.legend_handles)]
    entries = [(name, style) for name, style in entries if style is not None]
    found = []
    for i, (name_a, style_a) in enumerate(entries):
        for name_b, style_b in entries[i + 1:]:
            if _alike(style_a, style_b):
                found.append(f"legend entries {name_a!r} and {name_b!r} look alike")
    return found


def _visible_ticklabels(axis) -> bool:
    return any(t.get_visible() and t.get_text().strip() for t in axis.get_ticklabels())


def missing_labels(ax: Axes) -> list[str]:
    """Axes of ``ax`` that show tick labels but have no label; a colour bar without a label;
    axis labels that are raw variable names."""
    found = []
    if _is_colorbar(ax):
        cbar = ax._colorbar
        label = cbar.ax.get_xlabel() or cbar.ax.get_ylabel()
        if not label.strip():
            found.append("a colour bar has no label")
        elif RAW_NAME.search(re.sub(r"\$[^$]*\$", "", label)):
            found.append(f"colour bar label {label!r} is a raw variable name")
        return found
    if not ax.axison:
        return found
    title = ax.get_title() or "an axes"
    for which, axis, label in (("x", ax.xaxis, ax.get_xlabel()), ("y", ax.yaxis, ax.get_ylabel())):
        if not _visible_ticklabels(axis):
            continue
        if not label.strip() and not _has_sup_label(ax, which):
            found.append(f"{title!r}: the {which} axis has tick labels but no label")
        elif RAW_NAME.search(re.sub(r"\$[^$]*\$", "", label)):
            found.append(f"{title!r}: {which} label {label!r} is a raw variable name")
    return found


def _scale(mappable) -> tuple:
    norm = mappable.norm
    return (mappable.get_cmap().name, type(norm).__name__, norm.vmin, norm.vmax)


def colour_scales_without_bar(fig: Figure) -> list[str]:
    """Images, hexbins and filled contours whose colour scale no colour bar of the figure shows."""
    bars = [ax._colorbar for ax in _all_axes(fig) if _is_colorbar(ax)]
    shown = {_scale(cb.mappable) for cb in bars}
    found = []
    for ax in _all_axes(fig):
        if _is_colorbar(ax):
            continue
        for artist in [*ax.images, *ax.collections]:
            if not artist.get_visible() or artist.get_array() is None:
                continue
            if isinstance(artist, AxesImage) and np.ndim(artist.get_array()) == 3:
                continue  # an RGB(A) picture, no colour scale
            if any(cb.mappable is artist for cb in bars) or _scale(artist) in shown:
                continue
            found.append(f"{ax.get_title()!r}: a colour scale ({artist.get_cmap().name}) without a colour bar")
    return found


def legends_over_data(fig: Figure) -> list[str]:
    """Legends whose box covers a data point, or a stretch of a line, of any axes of ``fig``."""
    found = []
    for legend in _all_legends(fig):
        if not legend.get_visible():
            continue
        box = legend.get_window_extent()
        for ax in _all_axes(fig):
            if _is_colorbar(ax):
                continue
            hidden = 0
            for line in ax.lines:
                points = _line_points(line)
                if line.get_linestyle() not in ("None", "none", "", " ") and len(points) > 1:
                    t = np.linspace(0.0, 1.0, 12)[:, None, None]  # points along each segment
                    points = (points[:-1] * (1 - t) + points[1:] * t).reshape(-1, 2)
                hidden += int(((points[:, 0] > box.x0) & (points[:, 0] < box.x1)
                               & (points[:, 1] > box.y0) & (points[:, 1] < box.y1)).sum()) if len(points) else 0
            for coll in ax.collections:
                if not isinstance(coll, PathCollection):
                    continue
                points = _collection_points(coll)
                hidden += int(((points[:, 0] > box.x0) & (points[:, 0] < box.x1)
                               & (points[:, 1] > box.y0) & (points[:, 1] < box.y1)).sum()) if len(points) else 0
            if hidden:
                found.append(f"a legend covers data of {ax.get_title()!r} ({hidden} points)")
    return found


def figure_defects(fig: Figure) -> list[str]:
    """Every defect of ``fig`` that this module knows (see the module docstring); [] for none."""
    fig.canvas.draw()
    found: list[str] = []
    for ax in _all_axes(fig):
        if not ax.get_visible():
            continue
        found += missing_labels(ax)
        if _is_colorbar(ax):
            continue
        found += out_of_range(ax)
        found += look_alike_series(ax)
    for legend in _all_legends(fig):
        found += look_alike_legend_entries(legend)
    found += colour_scales_without_bar(fig)
    found += legends_over_data(fig)
    return found
