"""Layout helpers shared by the figures: one legend outside the axes, a style per series, points left
off a panel's scale and the note that names them, axis ranges that show the values that matter, value labels
placed where they overlap nothing. They draw on axes they are given and compute nothing of the science."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import matplotlib.ticker as mticker
import numpy as np

from .theme import MARKERS, distinct_colors, method_color, method_colors, method_variant


def outside_legend(fig: plt.Figure, handles: list, labels: list[str], where: str = "right", **kwargs) -> None:
    """One legend for the whole figure, outside the axes (constrained layout makes room for it)."""
    if not handles:
        return
    if where == "right":
        fig.legend(handles, labels, loc="outside right center", **kwargs)
    else:
        fig.legend(handles, labels, loc=f"outside {where} center", ncol=kwargs.pop("ncol", min(len(labels), 5)),
                   **kwargs)


def unique_handles(axes: Sequence[plt.Axes]) -> tuple[list, list[str]]:
    handles: dict[str, object] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if not lab.startswith("_") and lab not in handles:
                handles[lab] = h
    return list(handles.values()), list(handles)


def series_styles(names: Sequence[str], taken: Sequence[str] = ()) -> dict[str, dict]:
    """A colour, marker and line style per series name, all different at a glance: a method's
    colour (:func:`~gped_kit.plotting.theme.method_colors`; a name no method names gets a palette colour
    away from those already used and from ``taken``), a marker of its own, dashed for a method's
    variant (a shade of its method's colour)."""
    colours = method_colors(list(names))
    unnamed = [n for n in names if colours[n] == method_color("")]  # names no method family knows: grey
    named = [c for n, c in colours.items() if n not in unnamed]
    colours.update(zip(unnamed, distinct_colors(len(unnamed), taken=[*taken, *named])))
    return {n: dict(color=colours[n], marker=MARKERS[i % len(MARKERS)], ls="--" if method_variant(n) else "-")
            for i, n in enumerate(names)}


def off_scale_points(series: dict[str, np.ndarray], keep: Sequence[str] = (),
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


def value_range(values: np.ndarray) -> str:
    low, high = f"{float(np.nanmin(values)):.3g}", f"{float(np.nanmax(values)):.3g}"
    return low if low == high else f"{low}–{high}"


def off_scale_notes(series: dict[str, tuple[np.ndarray, np.ndarray]], side: dict[str, np.ndarray],
                    where: str = "", keep: Sequence[str] = (), group: str = "curve") -> tuple[list[str], list[str]]:
    """The lines of the notes on the points :func:`off_scale_points` left off the scale, (above, below):
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
                lines.append(f"{name}: {value_range(y[off])}")
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
                         f"{value_range(np.concatenate([series[n][1][off] for n, off in partial.items()]))}")
        else:
            for name, off in partial.items():
                count = int(off.sum())
                lines.append(f"{name}, first {'point' if count == 1 else f'{count} points'}: "
                             f"{value_range(series[name][1][off])}")
    return notes


def note_off_scale(ax: plt.Axes, above: Sequence[str], below: Sequence[str], fontsize: float = 8.0,
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


def thousands_axis(axis) -> None:
    """Whole-number ticks, at most six, written with thousands separators (2,000 ... 16,000): the
    labels of step counts stay apart."""
    axis.set_major_locator(mticker.MaxNLocator(nbins=5, integer=True, steps=[1, 2, 2.5, 5, 10]))
    axis.set_major_formatter(mticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))


def focus_range(values: Sequence[float], factor: float = 1.0) -> tuple[float, float] | None:
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


def log_range(values: Sequence[float], pad: float = 0.06) -> tuple[float, float] | None:
    """A log-axis range holding ``values`` (positive ones), padded by ``pad`` of its decades on each side."""
    v = np.asarray([x for x in values if np.isfinite(x) and x > 0], dtype=float)
    if len(v) == 0:
        return None
    low, high = np.log10(v.min()), np.log10(v.max())
    margin = pad * max(high - low, 0.3)
    return 10 ** (low - margin), 10 ** (high + margin)


def place_value_labels(ax: plt.Axes, points: Sequence[tuple[float, float, str]],
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
