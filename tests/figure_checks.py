"""A checker of drawn figures for the kinds of defect a reader sees at once (issue 29):

- a line or a marker outside its axes' range (drawn past the edge, or clipped at it: a curve that
  runs off the panel, an off-scale student drawn as a line leaving the axes);
- two series in one axes, or two entries of one legend, that look alike: the same marker and line
  style in colours closer than :data:`gped_kit.plotting.theme.SIMILAR_COLOR_DELTA_E` (two students in
  the same grey, two near-identical oranges);
- an axis whose tick labels show numbers or names but that has no label (x and y), a colour bar
  without a label, a colour scale (an image, hexbins, filled contours) without a colour bar;
- an axis label that is a raw variable name (``num_data``, ``mean_kl_test``);
- a legend drawn over data (a data point or a stretch of a line under the legend's box);
- two bars of one bar series whose bars are coloured each its own (a colour per method) in one
  colour (the snapshot ensemble and the zero-MU baseline in one grey);
- two series in one axes drawn exactly alike (the same colour, marker, fill and line style) over
  overlapping x ranges, whatever their labels: a reader cannot tell whose point is whose (Figure 14's
  three series of the paper's values, all black crosses);
- texts that overlap: two texts inside one axes (value labels, notes: "0.8030.803"), a text inside
  an axes over one of its tick labels (an off-scale note over "0.35"), two tick labels of one axis
  ("1000012000");
- a data series in a colour of too little contrast to its axes' background (a light yellow line on
  white);
- a squashed panel: a few points (a curve's first point at NLL 2.3) stretch the y range so far that
  all the others lie in a thin band of it;
- a legend swatch whose colour is not the colour of the artists it labels (issue 56: a grey "share
  correct" swatch for blue and orange bars), or artists of a label in a colour its swatch does not show;
- panels of one figure that show one quantity (the same y label and scale) over unequal y ranges (two
  accuracy panels side by side at 0.80-0.88 and 0.80-0.84);
- an error bar that reaches below 0 for a quantity that cannot be negative (an MAE, an NLL, an entropy);
- an empty panel: an axes with no data drawn in it (a blank panel, or one that holds only a note).

A data series is a line (or a line of markers) or a scatter series (a ``PathCollection``): scatter markers look
alike by their marker, their face and edge colours and their size; markers coloured by a colour scale
(``get_array()`` set) show no one series colour and are not compared by colour.

:func:`figure_defects` returns one sentence per defect found (empty: none). It draws the figure
first (Agg), so limits and layout are final; it reads the artists matplotlib holds, so it checks
any figure, the kit's or a hand-made one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import Collection, LineCollection, PathCollection
from matplotlib.colors import to_rgba
from matplotlib.container import BarContainer, ErrorbarContainer
from matplotlib.figure import Figure, SubFigure
from matplotlib.image import AxesImage
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.markers import MarkerStyle
from matplotlib.offsetbox import DrawingArea
from matplotlib.patches import Patch

from gped_kit.plotting.theme import OWN_Y_RANGE, SIMILAR_COLOR_DELTA_E, color_difference

#: Pixels a point may lie past an axes' edge and still count as inside (markers drawn on the edge).
EDGE_TOLERANCE_PX = 1.5

#: Two bars of a bar series coloured per bar share a colour when their colours are closer than this
#: (Delta E*ab): bars are named on their axis, so only a near-identical colour misleads.
SAME_BAR_COLOUR_DELTA_E = 10.0

#: Two texts overlap when their boxes share more than this many pixels in both directions.
TEXT_OVERLAP_PX = 1.0
#: Two tick labels of one axis collide when they are closer than this many pixels ("10000" touching
#: "12000" reads as one number).
TICK_GAP_PX = 2.0

#: A panel is squashed when a few points (at most this fraction of its data points) stretch its y
#: range so that all the others lie within :data:`SQUASHED_BAND` of it (a curve's first point at NLL
#: 2.3 above the others at 0.06-0.16).
SQUASHED_OUTLIERS = 0.1
SQUASHED_BAND = 0.1

#: The contrast ratio (WCAG 2) of a series' colour to its axes' background below which the series is
#: hard to see (the palette's old yellow #ece133 on white: 1.37; its lightest colours in use: 1.7).
MIN_CONTRAST = 1.5

#: A legend swatch and an artist it labels show one colour when their colours (each drawn over white) are closer
#: than this (Delta E*ab): a method's shades are further apart, a bar and its swatch at one alpha are the same.
SWATCH_DELTA_E = 20.0

#: Panels showing one quantity have equal y ranges when their limits differ by less than this share of the
#: larger range.
SHARED_RANGE_TOLERANCE = 0.01

#: A quantity that cannot be negative, named in an axis label: an MAE, an NLL, an entropy, an ECE, a KL
#: divergence, a variance or a standard deviation ...
NON_NEGATIVE = re.compile(r"\b(MAE|NLL|entropy|entropies|ECE|calibration error|KL|variance|standard deviation|"
                          r"mean absolute error)\b", re.IGNORECASE)
#: ... unless the label says it is a difference, a gap, a change or a log of one (which can be).
SIGNED = re.compile(r"gap|differ|change|improve|relative|skill|minus|\bvs\b|\blog|Δ|−| - ", re.IGNORECASE)

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


def _line_name(line: Line2D | PathCollection) -> str:
    """A series' label, quoted, or what it is when it has none."""
    label = line.get_label()
    if label and not label.startswith("_"):
        return repr(label)
    return "unlabelled markers" if isinstance(line, PathCollection) else "an unlabelled line"


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
    """(colour, marker, line style) of a series or a legend handle, and for scatter markers their size and edge
    (:func:`_scatter_style`); None when it has no colour of its own."""
    if isinstance(artist, PathCollection):
        return _scatter_style(artist)
    if isinstance(artist, Line2D):
        marker = artist.get_marker()
        marker = "" if marker in (None, "None", "none", " ", "") else str(marker)
        ls = artist.get_linestyle()
        ls = "" if ls in ("None", "none", " ", "") else ls
        colour = artist.get_color()
        if marker:  # an open (white or unfilled) marker and a filled one of the same shape look different
            face, edge = to_rgba(artist.get_markerfacecolor()), to_rgba(artist.get_markeredgecolor())
            open_face = (artist.get_fillstyle() == "none" or face[3] == 0
                         or color_difference(face[:3], "white") < color_difference(edge[:3], "white"))
            if not ls:  # markers only: their colour is the face's, or the edge's of an open marker
                colour = edge if open_face else face
            if open_face and marker in _FILLED_MARKERS:
                marker = f"{marker} (open)"
        return (to_rgba(colour), marker, ls)
    if isinstance(artist, Patch):  # a filled patch by its fill, an outline by its edge; a hatch is its own look
        face = to_rgba(artist.get_facecolor())
        filled = artist.get_fill() and face[3] > 0
        kind = ("patch" if filled else "outline") + (f" hatched {artist.get_hatch()}" if artist.get_hatch() else "")
        return (face if filled else to_rgba(artist.get_edgecolor()), kind, artist.get_linestyle())
    return None


#: Markers with an inside that can be filled or left open ("x", "+", "|" have none).
_FILLED_MARKERS = set(Line2D.filled_markers)


def _path_key(path) -> tuple:
    return (np.round(np.asarray(path.vertices, dtype=float), 4).tobytes(),
            None if path.codes is None else np.asarray(path.codes).tobytes())


def _marker_names() -> dict[tuple, str]:
    """The name of each marker (``"o"``, ``"s"``, ...) by the path a scatter draws it with."""
    names: dict[tuple, str] = {}
    for name in sorted(MarkerStyle.markers, key=lambda m: (m not in _FILLED_MARKERS, not isinstance(m, str), str(m))):
        marker = MarkerStyle(name)
        path = marker.get_path().transformed(marker.get_transform())
        if len(path.vertices):
            names.setdefault(_path_key(path), str(name))
    return names


_MARKER_NAMES = _marker_names()


def _one_colour(colours) -> tuple | None:
    """The one RGBA colour of a collection's faces or edges; () for none drawn, None for several."""
    rows = {tuple(np.round(c, 4)) for c in np.atleast_2d(colours) if len(c)}
    return () if not rows else next(iter(rows)) if len(rows) == 1 else None


def _marker_look(face: tuple, edge: tuple, marker: str) -> tuple | None:
    """(colour, marker, edge colour) of markers with faces ``face`` and edges ``edge`` (RGBA; () for none drawn):
    the colour is the face's, or the edge's of open markers (no face, or a white one in a darker edge: "(open)"
    added to a marker that can be filled); the edge colour is that of an edge unlike the face, else None. None when
    nothing is drawn."""
    open_face = not face or face[3] == 0 or (bool(edge) and color_difference(face[:3], "white")
                                                < SIMILAR_COLOR_DELTA_E <= color_difference(edge[:3], "white"))
    if open_face and not edge:
        return None
    if open_face and marker in _FILLED_MARKERS:
        marker = f"{marker} (open)"
    if open_face:
        return (to_rgba(edge), marker, None)
    ring = bool(edge) and not np.allclose(edge, face, atol=1 / 255)
    return (to_rgba(face), marker, tuple(round(float(c), 2) for c in edge) if ring else None)


def _scatter_style(coll: PathCollection) -> tuple | None:
    """(colour, marker, line style "", size, edge colour) of scatter markers (:func:`_marker_look`). None for
    markers coloured each its own (a colour scale, ``get_array()`` set, or a list of colours): no one series
    colour; and for markers that draw nothing."""
    if coll.get_array() is not None:
        return None
    face, edge = _one_colour(coll.get_facecolor()), _one_colour(coll.get_edgecolor())
    if face is None or edge is None:
        return None
    if not (edge and edge[3] > 0 and float(np.max(coll.get_linewidths(), initial=0.0)) > 0):
        edge = ()
    keys = list(dict.fromkeys(_path_key(path) for path in coll.get_paths()))
    look = _marker_look(face, edge, ", ".join(_MARKER_NAMES.get(key, "custom") for key in keys) or "none")
    if look is None:
        return None
    sizes = np.unique(np.round(coll.get_sizes(), 1))
    return (look[0], look[1], "", float(sizes[0]) if len(sizes) == 1 else "various", look[2])


def _styles(a, b) -> tuple[tuple | None, tuple | None]:
    """The styles of series (or legend handles) ``a`` and ``b`` to compare: :func:`_style`'s; where one is scatter
    markers, a line's with its markers' size and edge (markers only) to match."""
    if not (isinstance(a, PathCollection) or isinstance(b, PathCollection)):
        return _style(a), _style(b)
    return _marker_style(a), _marker_style(b)


def _marker_style(artist) -> tuple | None:
    """:func:`_style` of ``artist`` with a size and an edge colour, as :func:`_scatter_style` gives them."""
    style = _style(artist)
    if style is None or len(style) == 5:
        return style
    if isinstance(artist, Line2D) and style[1] and not style[2]:  # markers only: as scatter markers would be
        face = () if artist.get_fillstyle() == "none" else to_rgba(artist.get_markerfacecolor())
        edge = to_rgba(artist.get_markeredgecolor()) if artist.get_markeredgewidth() > 0 else ()
        look = _marker_look(face, edge if edge and edge[3] > 0 else (), str(artist.get_marker()))
        if look is None:
            return None
        alpha = 1.0 if artist.get_alpha() is None else artist.get_alpha()  # a collection's is in its colours
        return ((*look[0][:3], look[0][3] * alpha), look[1], "", round(float(artist.get_markersize()) ** 2, 1), look[2])
    return (*style, None, None)


def _alike(a: tuple | None, b: tuple | None) -> bool:
    return (a is not None and b is not None and a[1:] == b[1:]
            and color_difference(a[0][:3], b[0][:3]) < SIMILAR_COLOR_DELTA_E)


def _data_lines(ax: Axes, min_points: int = 1) -> list[Line2D]:
    """The visible data series of ``ax`` drawn as lines or markers (no reference lines, no caps of error
    bars), each with at least ``min_points`` points."""
    caps = {id(cap) for c in ax.containers if isinstance(c, ErrorbarContainer) for cap in c.lines[1]}
    return [line for line in ax.lines if line.get_visible() and not _is_reference(line, ax)
            and id(line) not in caps and len(line.get_xydata()) >= min_points]


def _is_markers(coll: Collection, ax: Axes) -> bool:
    """Whether ``coll`` is a visible data series of scatter markers of ``ax`` with at least one point."""
    return (isinstance(coll, PathCollection) and coll.get_visible() and coll.get_offset_transform() == ax.transData
            and len(coll.get_offsets()) > 0)


def _data_series(ax: Axes, min_points: int = 1) -> list[Line2D | PathCollection]:
    """:func:`_data_lines` and the visible scatter series of ``ax`` (drawn at data coordinates), each with at
    least ``min_points`` points."""
    return [*_data_lines(ax, min_points),
            *(c for c in ax.collections if _is_markers(c, ax) and len(c.get_offsets()) >= min_points)]


def _xy(series: Line2D | PathCollection) -> np.ndarray:
    """A series' points in data coordinates (categories as their positions), masked ones as NaN."""
    xy = series.get_offsets() if isinstance(series, PathCollection) else series.get_xydata()
    return np.ma.filled(np.ma.asarray(xy, dtype=float), np.nan).reshape(-1, 2)


def _x_range(line: Line2D | PathCollection) -> tuple[float, float] | None:
    x = _xy(line)[:, 0]
    x = x[np.isfinite(x)]
    return (float(x.min()), float(x.max())) if len(x) else None


def _same_style(a: tuple | None, b: tuple | None) -> bool:
    return a is not None and b is not None and a[1:] == b[1:] and np.allclose(a[0], b[0], atol=1 / 255)


def _look(style: tuple) -> str:
    """A style's marker and line style (and scatter markers' size) in words."""
    size = f", size {style[3]:g}" if len(style) > 3 and isinstance(style[3], float) else ""
    return f"marker {style[1] or 'none'!r}, line {style[2] or 'none'!r}{size}"


def _overlap(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool:
    return a is not None and b is not None and a[0] <= b[1] and b[0] <= a[1]


def same_style_series(ax: Axes) -> list[str]:
    """Pairs of data series in ``ax`` (lines, markers, scatter markers) drawn exactly alike (colour, marker and its
    fill, line style; scatter markers' size and edge) whose x ranges overlap, whatever their labels (one series
    drawn in pieces side by side is fine; markers coloured by a colour scale have no one colour to compare)."""
    series = [(s, _x_range(s)) for s in _data_series(ax)]
    found = []
    for i, (a, range_a) in enumerate(series):
        for b, range_b in series[i + 1:]:
            style_a, style_b = _styles(a, b)
            if _same_style(style_a, style_b) and _overlap(range_a, range_b):
                found.append(f"{_line_name(a)} and {_line_name(b)} are drawn the same (colour, {_look(style_a)}) "
                             "over the same x range: whose point is whose cannot be told")
    return found


def look_alike_series(ax: Axes) -> list[str]:
    """Pairs of data series in ``ax`` (lines, markers, scatter markers, bars) with the same marker and line style
    (scatter markers: and size and edge) in similar colours (pairs drawn exactly the same over one x range are
    :func:`same_style_series`'s; markers coloured by a colour scale have no one colour to compare)."""
    series: list[tuple[str, object]] = []
    ranges: list[tuple[float, float] | None] = []
    for line in _data_series(ax, min_points=2):
        series.append((line.get_label(), line))
        ranges.append(_x_range(line))
    for container in ax.containers:
        patches = [p for p in container if isinstance(p, Patch)]
        if patches:
            series.append((container.get_label(), patches[0]))
            ranges.append(None)
    found = []
    for i, (name_a, a) in enumerate(series):
        for j, (name_b, b) in enumerate(series[i + 1:], start=i + 1):
            if name_a == name_b and not name_a.startswith("_"):
                continue  # one series drawn in pieces
            style_a, style_b = _styles(a, b)
            if _same_style(style_a, style_b) and _overlap(ranges[i], ranges[j]):
                continue  # same_style_series says so
            if _alike(style_a, style_b):
                found.append(f"series {name_a!r} and {name_b!r} look alike ({_look(style_a)}, colours Delta E "
                             f"{color_difference(style_a[0][:3], style_b[0][:3]):.0f})")
    return found


def _bar_name(ax: Axes, bar: Patch, horizontal: bool, k: int) -> str:
    centre = bar.get_y() + bar.get_height() / 2 if horizontal else bar.get_x() + bar.get_width() / 2
    axis = ax.yaxis if horizontal else ax.xaxis
    for loc, label in zip(axis.get_ticklocs(), axis.get_ticklabels()):
        if abs(loc - centre) < 1e-6 and label.get_text().strip():
            return repr(label.get_text())
    return f"bar {k + 1}"


def look_alike_bars(ax: Axes) -> list[str]:
    """Pairs of bars of one bar series of ``ax`` in one colour (Delta E below
    :data:`SAME_BAR_COLOUR_DELTA_E`) where the series colours its bars each its own (a colour per method)."""
    found = []
    for container in ax.containers:
        if not isinstance(container, BarContainer):
            continue
        bars = [b for b in container.patches if b.get_visible()]
        colours = [to_rgba(b.get_facecolor()) for b in bars]
        if len({tuple(np.round(c, 3)) for c in colours}) < 2:
            continue  # one colour for the whole series
        horizontal = getattr(container, "orientation", None) == "horizontal"
        for i in range(len(bars)):
            for j in range(i + 1, len(bars)):
                difference = color_difference(colours[i][:3], colours[j][:3])
                if difference < SAME_BAR_COLOUR_DELTA_E:
                    found.append(f"{ax.get_title()!r}: bars {_bar_name(ax, bars[i], horizontal, i)} and "
                                 f"{_bar_name(ax, bars[j], horizontal, j)} share one colour (Delta E {difference:.0f})")
    return found


def look_alike_legend_entries(legend: Legend) -> list[str]:
    """Pairs of entries of ``legend`` whose handles (lines, patches, scatter markers) look alike."""
    entries = [(text.get_text(), handle) for text, handle in zip(legend.get_texts(), legend.legend_handles)
               if _style(handle) is not None]
    found = []
    for i, (name_a, handle_a) in enumerate(entries):
        for name_b, handle_b in entries[i + 1:]:
            if _alike(*_styles(handle_a, handle_b)):
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


def _shown_text(text) -> bool:
    return text.get_visible() and bool(text.get_text().strip())


def _boxes_overlap(a, b) -> bool:
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > TEXT_OVERLAP_PX
            and min(a.y1, b.y1) - max(a.y0, b.y0) > TEXT_OVERLAP_PX)


def _closer_than(a, b, px: float) -> bool:
    """Whether boxes ``a`` and ``b`` overlap or lie closer than ``px`` pixels apart."""
    return max(b.x0 - a.x1, a.x0 - b.x1) < px and max(b.y0 - a.y1, a.y0 - b.y1) < px


def _tick_labels(axis) -> list:
    """The tick labels of ``axis`` that are drawn (major and minor, inside the view limits)."""
    low, high = sorted(axis.get_view_interval())
    labels = []
    for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
        loc = tick.get_loc()
        if loc is None or not np.isfinite(loc) or not (low - 1e-9 * max(1.0, abs(high - low)) <= loc
                                                      <= high + 1e-9 * max(1.0, abs(high - low))):
            continue
        for label in (tick.label1, tick.label2):
            if label.get_visible() and _shown_text(label):
                labels.append(label)
    return labels


def overlapping_texts(ax: Axes, renderer) -> list[str]:
    """Texts of ``ax`` whose drawn boxes overlap: two texts inside the axes (annotations, notes), a text
    inside it over one of its tick labels, two tick labels of one axis."""
    found = []
    texts = [(t, t.get_window_extent(renderer)) for t in ax.texts if _shown_text(t)]
    title = ax.get_title() or "an axes"
    for i, (a, box_a) in enumerate(texts):
        for b, box_b in texts[i + 1:]:
            if _boxes_overlap(box_a, box_b):
                found.append(f"{title!r}: texts {a.get_text()!r} and {b.get_text()!r} overlap")
    for which, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
        ticks = [(t, t.get_window_extent(renderer)) for t in _tick_labels(axis)]
        for i, (a, box_a) in enumerate(ticks):
            for b, box_b in ticks[i + 1:]:
                if _closer_than(box_a, box_b, TICK_GAP_PX):
                    found.append(f"{title!r}: {which} tick labels {a.get_text()!r} and {b.get_text()!r} collide")
        for text, box in texts:
            for tick, tick_box in ticks:
                if _boxes_overlap(box, tick_box):
                    found.append(f"{title!r}: text {text.get_text()!r} covers {which} tick label "
                                 f"{tick.get_text()!r}")
    return found


def squashed_panel(ax: Axes) -> list[str]:
    """``ax`` when a few of its data points (lines, markers and scatter markers; at most :data:`SQUASHED_OUTLIERS`
    of them) stretch its y range so far that all the others lie within :data:`SQUASHED_BAND` of it: the
    differences between those others are squashed into a line (leave the few off the scale instead)."""
    if ax.get_yscale() != "linear":
        return []
    ys = [_xy(series)[:, 1] for series in _data_series(ax)]
    y = np.concatenate(ys) if ys else np.empty(0)
    y = np.sort(y[np.isfinite(y)])
    low, high = ax.get_ylim()
    span = abs(high - low)
    if len(y) < 10 or span == 0:
        return []
    counts = np.searchsorted(y, y + SQUASHED_BAND * span, side="right") - np.arange(len(y))
    k = int(np.argmax(counts))  # the band of the y range that holds the most points
    most = int(counts[k])
    if (1 - SQUASHED_OUTLIERS) * len(y) <= most < len(y) and (y[-1] - y[0]) > 3 * SQUASHED_BAND * span:
        width = (y[k + most - 1] - y[k]) / span
        return [f"{ax.get_title() or 'an axes'!r}: {most} of {len(y)} points lie within {width:.0%} of the y "
                "range; the rest stretch it (leave them off the scale)"]
    return []


def _relative_luminance(rgb) -> float:
    c = np.asarray(rgb, dtype=float)
    c = np.where(c <= 0.03928, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    return float(0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2])


def contrast_ratio(colour, background) -> float:
    """The WCAG 2 contrast ratio of ``colour`` (RGBA: drawn over ``background`` with its alpha) to ``background``."""
    back = np.asarray(to_rgba(background)[:3])
    rgba = to_rgba(colour)
    shown = rgba[3] * np.asarray(rgba[:3]) + (1 - rgba[3]) * back
    light, dark = sorted((_relative_luminance(shown), _relative_luminance(back)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def low_contrast_series(ax: Axes) -> list[str]:
    """Data series of ``ax`` (lines, markers, scatter markers) in a colour whose contrast to the axes' background
    is below :data:`MIN_CONTRAST` (not checked over images, whose background is the image; scatter markers: the
    better of their colour and a drawn edge's; markers coloured by a colour scale are not checked)."""
    if ax.images:
        return []
    background = ax.get_facecolor()
    found = []
    for line in _data_series(ax):
        style = _style(line)
        if style is None:
            continue  # a colour scale, or a colour per point
        if isinstance(line, PathCollection):  # the collection's alpha is in its colours
            ratio = max(contrast_ratio(c, background) for c in (style[0], style[4]) if c is not None)
        else:
            alpha = line.get_alpha()
            ratio = contrast_ratio((*style[0][:3], style[0][3] * (1.0 if alpha is None else alpha)), background)
        if ratio < MIN_CONTRAST:
            found.append(f"{_line_name(line)} is drawn in a colour of little contrast to the background "
                         f"({ratio:.2f}:1)")
    return found


def _over_white(colour) -> tuple[float, float, float]:
    """An RGBA colour as it shows drawn over white (its alpha blended in)."""
    r, g, b, a = to_rgba(colour)
    return (a * r + 1 - a, a * g + 1 - a, a * b + 1 - a)


def _shown(colour) -> bool:
    return to_rgba(colour)[3] > 0


def _artist_colours(artist) -> list:
    """The colours ``artist`` shows (a line's or markers', a patch's fill or, unfilled, its edge, a collection's
    faces or, unfilled, its edges; a container's parts'), as RGBA; [] for none."""
    if isinstance(artist, BarContainer):
        return [c for patch in artist.patches if patch.get_visible() for c in _artist_colours(patch)]
    if isinstance(artist, ErrorbarContainer):
        data_line, _, bar_lines = artist.lines
        if data_line is not None and data_line.get_visible():
            return _artist_colours(data_line)
        return [c for coll in bar_lines for c in _artist_colours(coll)]
    if isinstance(artist, Line2D):
        marker = artist.get_marker() not in (None, "None", "none", " ", "")
        ls = artist.get_linestyle() not in ("None", "none", " ", "")
        if not (marker or ls):
            return []  # an empty handle (a spacer), no colour
        colour = _style(artist)[0]
        alpha = artist.get_alpha()
        return [(*colour[:3], colour[3] * (1.0 if alpha is None else alpha))]
    if isinstance(artist, Patch):
        face = artist.get_facecolor()
        if artist.get_fill() and _shown(face):
            return [face]
        edge = artist.get_edgecolor()
        return [edge] if _shown(edge) and artist.get_linewidth() > 0 else []
    if isinstance(artist, Collection):
        faces = [c for c in np.atleast_2d(artist.get_facecolor()) if len(c) and _shown(c)]
        if faces:
            return faces
        return [c for c in np.atleast_2d(artist.get_edgecolor()) if len(c) and _shown(c)]
    return []


def _labelled_artists(fig: Figure, label: str) -> list:
    """Every artist of ``fig`` (lines, patches, collections, bar and error bar containers) labelled ``label``."""
    found = []
    for ax in _all_axes(fig):
        in_containers = {id(part) for c in ax.containers for part in c}
        for artist in [*ax.lines, *ax.patches, *ax.collections]:
            if artist.get_visible() and artist.get_label() == label and id(artist) not in in_containers:
                found.append(artist)
        found += [c for c in ax.containers if c.get_label() == label]
    return found


def _legend_entries(legend: Legend) -> list[tuple[str, list]]:
    """Each entry of ``legend``: its text and every artist drawn in its swatch (a tuple handle draws several)."""
    entries = []
    for column in legend._legend_handle_box.get_children():
        for row in column.get_children():
            parts = row.get_children()
            swatch = next((p for p in parts if isinstance(p, DrawingArea)), None)
            texts = [t for p in parts if p is not swatch for t in p.get_children() if hasattr(t, "get_text")]
            if swatch is not None and texts:
                entries.append((texts[0].get_text(), list(swatch.get_children())))
    return entries


def _near(colour, colours) -> bool:
    return any(color_difference(_over_white(colour), _over_white(c)) < SWATCH_DELTA_E for c in colours)


def _colour_name(colour) -> str:
    r, g, b = _over_white(colour)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"


def mismatched_legend_swatches(fig: Figure) -> list[str]:
    """Legend entries whose swatch shows a colour that none of the artists with the entry's label has (a grey
    "share correct" patch for blue and orange bars), or whose artists have a colour the swatch does not show.
    Entries that label no artist of the figure (proxies for a style, e.g. "dashed: U_s") are not checked."""
    found = []
    for legend in _all_legends(fig):
        if not legend.get_visible():
            continue
        for text, swatch in _legend_entries(legend):
            artists = _labelled_artists(fig, text)
            drawn = [c for a in artists for c in _artist_colours(a)]
            shown = [c for a in swatch for c in _artist_colours(a)]
            if not drawn or not shown:
                continue
            unmatched = list(dict.fromkeys(_colour_name(c) for c in shown if not _near(c, drawn)))
            unshown = list(dict.fromkeys(_colour_name(c) for c in drawn if not _near(c, shown)))
            if unmatched or unshown:
                found.append(f"legend entry {text!r}: its swatch shows {', '.join(unmatched) or 'no colour'} that "
                             f"no artist it labels has, and not {', '.join(unshown) or '-'} of the artists it labels")
    return found


#: A tick label that is a number: 0.8, −0.05, 1,000, 50k, 2.5×, 10%, $\\mathdefault{10^{-2}}$.
_NUMBER = re.compile(r"^[-+−]?(\d[\d,\u2009]*(\.\d*)?|\.\d+)([eE][-+−]?\d+)?\s*[kKMG%×x]?$|^10\^\{?[-+−]?\d+\}?$")


def _named_ticks(axis) -> bool:
    """Whether ``axis``'s tick labels are names (methods, settings), not numbers."""
    texts = [re.sub(r"\$|\\mathdefault|[{}]", "", t.get_text()).strip() for t in axis.get_ticklabels()]
    return any(not _NUMBER.match(t) for t in texts if t)


def _quantity(ax: Axes) -> str:
    """The quantity ``ax`` shows on its y axis: its y label, with the scale."""
    return f"{ax.get_ylabel().strip()} ({ax.get_yscale()})" if ax.get_ylabel().strip() else ""


def unequal_shared_axes(fig: Figure) -> list[str]:
    """Panels of ``fig`` that show one quantity (the same y label on the same scale) over unequal y ranges:
    the same value sits at different heights side by side (Figure 14's two accuracy panels at 0.80-0.88 and
    0.80-0.84). Give them one y range (``sharey``); a panel marked by :func:`gped_kit.plotting.theme.own_y_range`
    keeps its own, for the reason it gives."""
    groups: dict[str, list[Axes]] = {}
    for ax in _all_axes(fig):
        if _named_ticks(ax.yaxis) or getattr(ax, OWN_Y_RANGE, None):
            continue  # names on the ticks (one row per method): categories; or a range kept on purpose
        if ax.get_visible() and ax.axison and not _is_colorbar(ax) and _quantity(ax):
            groups.setdefault(_quantity(ax), []).append(ax)
    found = []
    for quantity, axes in groups.items():
        limits = [tuple(sorted(ax.get_ylim())) for ax in axes]
        span = max(high - low for low, high in limits)
        if span > 0 and any(max(abs(a[0] - b[0]), abs(a[1] - b[1])) > SHARED_RANGE_TOLERANCE * span
                            for a in limits for b in limits):
            ranges = ", ".join(f"{ax.get_title()!r}: {low:.3g}-{high:.3g}"
                               for ax, (low, high) in zip(axes, limits))
            found.append(f"panels of {quantity} have unequal y ranges ({ranges})")
    return found


def _label_of(ax: Axes, which: str) -> str:
    label = ax.get_ylabel() if which == "y" else ax.get_xlabel()
    if label.strip():
        return label
    holder = ax.get_figure(root=False)
    while holder is not None:
        sup = getattr(holder, f"_sup{which}label", None)
        if sup is not None and sup.get_text():
            return sup.get_text()
        parent = getattr(holder, "_parent", None)
        holder = parent if parent is not holder else None
    return ""


def _error_bar_ends(container: ErrorbarContainer) -> tuple[list[float], list[float]]:
    """The lower ends (in data coordinates) of ``container``'s vertical bars and of its horizontal bars."""
    low_y, low_x = [], []
    for coll in container.lines[2]:
        if not isinstance(coll, LineCollection) or not coll.get_visible():
            continue
        for seg in coll.get_segments():
            seg = np.asarray(seg, dtype=float)
            if len(seg) < 2 or not np.isfinite(seg).all():
                continue
            if np.allclose(seg[:, 0], seg[0, 0]):
                low_y.append(float(seg[:, 1].min()))
            elif np.allclose(seg[:, 1], seg[0, 1]):
                low_x.append(float(seg[:, 0].min()))
    return low_y, low_x


def error_bars_below_floor(ax: Axes) -> list[str]:
    """Error bars of ``ax`` that reach below 0 on an axis whose label names a quantity that cannot be negative
    (:data:`NON_NEGATIVE`: an MAE, an NLL, an entropy; not a difference of them, :data:`SIGNED`): cut them at 0,
    or show the spread another way."""
    found = []
    for container in ax.containers:
        if not isinstance(container, ErrorbarContainer):
            continue
        low_y, low_x = _error_bar_ends(container)
        for which, lows in (("y", low_y), ("x", low_x)):
            label = _label_of(ax, which)
            if lows and min(lows) < 0 and NON_NEGATIVE.search(label) and not SIGNED.search(label):
                found.append(f"{ax.get_title() or 'an axes'!r}: an error bar reaches {min(lows):.3g}, below 0, "
                             f"for {label!r}, which cannot be negative")
    return found


def _has_data(ax: Axes) -> bool:
    """Whether ``ax`` draws any data: a line or markers with a finite point, a collection, a bar or patch of some
    size, an image."""
    for line in ax.lines:
        if line.get_visible() and not _is_reference(line, ax) and len(_line_points(line)):
            return True
    for coll in ax.collections:
        if coll.get_visible() and (len(coll.get_offsets()) or len(coll.get_paths())):
            return True
    for patch in ax.patches:
        if patch.get_visible() and patch.get_window_extent().width * patch.get_window_extent().height > 0:
            return True
    return any(image.get_visible() for image in ax.images)


def empty_panel(ax: Axes) -> list[str]:
    """``ax`` when it draws no data: a blank panel, or one holding only a note or reference lines (drop it, or
    say the note elsewhere). An axes that only holds a legend is a legend's place, not a panel."""
    if _is_colorbar(ax) or _has_data(ax) or (not ax.axison and ax.get_legend() is not None):
        return []
    notes = [t.get_text() for t in ax.texts if _shown_text(t)]
    what = f"only the note {notes[0]!r}" if notes else "nothing"
    return [f"{ax.get_title() or 'an axes'!r} is an empty panel: it draws {what}"]


def figure_defects(fig: Figure) -> list[str]:
    """Every defect of ``fig`` that this module knows (see the module docstring); [] for none."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    found: list[str] = []
    for ax in _all_axes(fig):
        if not ax.get_visible():
            continue
        found += missing_labels(ax)
        found += overlapping_texts(ax, renderer)
        if _is_colorbar(ax):
            continue
        found += out_of_range(ax)
        found += same_style_series(ax)
        found += look_alike_series(ax)
        found += look_alike_bars(ax)
        found += low_contrast_series(ax)
        found += squashed_panel(ax)
        found += error_bars_below_floor(ax)
        found += empty_panel(ax)
    for legend in _all_legends(fig):
        found += look_alike_legend_entries(legend)
    found += colour_scales_without_bar(fig)
    found += legends_over_data(fig)
    found += mismatched_legend_swatches(fig)
    found += unequal_shared_axes(fig)
    return found
