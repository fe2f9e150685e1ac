"""The kit's one plotting theme: fonts, grid, palette and a colour per method, for every figure of
the kit (:mod:`gped_kit.plotting` and each experiment's ``figures`` module).

Every plotting function of the kit draws inside :func:`kit_theme` (the :func:`themed` decorator),
a :func:`matplotlib.pyplot.rc_context`: the theme applies to the figures the kit draws and
matplotlib's global settings are restored when the function returns, so a notebook cell, a widget
or a user's own figure is never restyled behind its back. To draw a figure of your own in the
kit's style::

    from gped_kit.plotting.theme import kit_theme, method_color

    with kit_theme():
        fig, ax = plt.subplots()
        ax.plot(x, y, color=method_color("GPED"))

Methods keep one colour in every figure (:data:`METHOD_COLORS`, :func:`method_color`): GPED blue,
EnD2 orange, Hydra green, KD purple, the teacher ensemble dark grey, the snapshot ensemble light
grey, the zero-MU baseline dark red, the paper's numbers black. Variants of a method (e.g. "GPED
(every step)", "KD (noise inputs)") get a shade of their method's colour.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from cycler import cycler
from matplotlib.colors import to_rgb

#: The categorical palette (seaborn's "colorblind", i.e. Okabe-Ito-like), in cycle order, except its
#: yellow (#ece133, a contrast of 1.4:1 on white: a line in it is hardly seen), replaced by Paul
#: Tol's indigo (#332288).
PALETTE = ("#0173b2", "#de8f05", "#029e73", "#d55e00", "#cc78bc", "#ca9161", "#fbafe4", "#949494", "#332288",
           "#56b4e9")

#: A colour per method, shared by every figure. Keys are the method names the experiments use.
METHOD_COLORS: dict[str, str] = {
    "GPED": "#0173b2",
    "EnD2": "#de8f05",
    "Hydra": "#029e73",
    "KD": "#9a4ea0",
    "Teacher": "#3a3a3a",
    "Ensemble": "#3a3a3a",
    "Long-chain teacher": "#3a3a3a",
    "teacher ensemble": "#3a3a3a",
    "Snapshot ensemble": "#9a9a9a",
    # the comparison's baseline that predicts no model uncertainty (notebook 07): apart from the greys
    "Zero MU (baseline)": "#b2182b",
    "paper": "#000000",
    # the comparison's variants (notebook 07): shades of their method's colour
    "GPED (every step)": "#56b4e9",
    "GPED (squared error)": "#003f6b",
    "KD (perturbed inputs)": "#e3a6d6",
    "KD (noise inputs)": "#ca9161",
    "KD + derivative matching": "#5e2a6b",
}

#: Shades for a method's variants, in order of first appearance (after the method itself).
_VARIANT_SHADES: dict[str, tuple[str, ...]] = {
    "GPED": ("#7fa7c9", "#56b4e9", "#003f6b"),
    "EnD2": ("#f2b85a", "#9a5b00"),
    "Hydra": ("#5fd3a8", "#00603f"),
    "KD": ("#e3a6d6", "#cc78bc", "#ca9161", "#5e2a6b"),
    "Teacher": ("#6b6b6b",),
}

#: Markers for series that share an axes, in order: with a marker of its own, a series stays
#: apart from one of a similar colour (e.g. two shades of a method's colour).
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")

#: Two colours whose CIE 1976 colour difference (Delta E*ab, :func:`color_difference`) is below
#: this read as one colour in a thin line or a small marker (e.g. the palette's orange and
#: vermillion, 26): series drawn in them need different markers or line styles.
SIMILAR_COLOR_DELTA_E = 30.0

#: Categorical colours for two classes (training points of a 2-D toy, y = 0 / y = 1).
CLASS_COLORS = ("#56b4e9", "#d55e00")

#: The colour of the teacher ensemble's reference lines (e.g. "T" in the Pareto figures).
TEACHER_COLOR = METHOD_COLORS["Teacher"]
#: The colour of the paper's numbers (crosses, dashed reference lines).
PAPER_COLOR = METHOD_COLORS["paper"]

#: The rc settings of the theme (a white grid style at a compact "paper" scale, DejaVu Sans).
KIT_RC: dict[str, Any] = {
    # fonts
    "font.family": ["sans-serif"],
    "font.sans-serif": ["DejaVu Sans", "Arial", "Liberation Sans", "Bitstream Vera Sans", "sans-serif"],
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.titleweight": "normal",
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "legend.title_fontsize": 9,
    "figure.titlesize": 13,
    "text.color": "0.15",
    "axes.labelcolor": "0.15",
    "xtick.color": "0.15",
    "ytick.color": "0.15",
    # axes, grid, ticks
    "figure.facecolor": "white",
    "axes.facecolor": "white",
    "axes.edgecolor": "0.75",
    "axes.linewidth": 1.0,
    "axes.grid": True,
    "axes.axisbelow": True,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "grid.color": "0.88",
    "grid.linestyle": "-",
    "grid.linewidth": 0.8,
    "xtick.direction": "out",
    "ytick.direction": "out",
    "xtick.major.size": 3.5,
    "ytick.major.size": 3.5,
    "xtick.minor.size": 2.0,
    "ytick.minor.size": 2.0,
    "xtick.major.width": 0.8,
    "ytick.major.width": 0.8,
    # lines, patches, legend
    "lines.linewidth": 1.6,
    "lines.markersize": 5,
    "lines.solid_capstyle": "round",
    "patch.edgecolor": "white",
    "patch.force_edgecolor": False,
    "legend.frameon": False,
    "axes.prop_cycle": cycler(color=list(PALETTE)),
    "image.cmap": "viridis",
    # saving
    "savefig.facecolor": "white",
    "savefig.dpi": 150,
    "savefig.bbox": "tight",
    # SVG element ids from a fixed salt (else random), so that an SVG saved twice is the same file
    "svg.hashsalt": "gped-kit",
}

#: Per file format, the metadata :meth:`matplotlib.figure.Figure.savefig` is given: the entries
#: that would hold a time stamp or the software's version are removed (None), so that saving an
#: unchanged figure again writes the same bytes (``make figures`` on unchanged results changes no file).
SAVEFIG_METADATA: dict[str, dict[str, None]] = {
    "png": {"Software": None},
    "pdf": {"Creator": None, "Producer": None, "CreationDate": None},
    "svg": {"Creator": None, "Date": None},
}

F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def kit_theme(**overrides: Any) -> Iterator[dict[str, Any]]:
    """Apply the kit's theme (:data:`KIT_RC`, with ``overrides``) inside the ``with`` block;
    matplotlib's settings as they were are restored on leaving it. Yields the rc settings used."""
    rc = {**KIT_RC, **overrides}
    with plt.rc_context(rc):
        yield rc


def themed(func: F) -> F:
    """Decorator: ``func`` draws inside :func:`kit_theme` (the kit's theme, no global state left)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with kit_theme():
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


_TAGS = re.compile(r"[-_ ]*U_[so]\b|\((largest|base)\)|\(ours\)")


def _family(name: str) -> str | None:
    lowered = name.lower()
    for family in ("GPED", "EnD2", "Hydra"):
        if re.search(rf"\b{family.lower()}\b", lowered):
            return family
    if re.search(r"\bkd\b", lowered) or "knowledge distillation" in lowered:
        return "KD"
    if "snapshot" in lowered:
        return "Snapshot ensemble"
    if "teacher" in lowered or "ensemble" in lowered:
        return "Teacher"
    if lowered.startswith("paper"):
        return "paper"
    return None


def method_color(name: str, variants: list[str] | None = None) -> str:
    """The colour of method ``name`` in every figure (:data:`METHOD_COLORS`). A name that is not a
    key but names a method family gets its family's colour when it only adds an estimator or a
    size (``"GPED-U_s (largest)"``, ``"student EnD2"``), else a shade of it (a variant:
    ``"GPED (every step)"``, ``"KD (noise inputs)"``): the n-th distinct variant of a family in
    ``variants`` (a list the caller keeps per figure; without it the shade follows the name, stable
    across runs) gets the n-th shade. Unknown names get the palette's grey."""
    stripped = name.removeprefix("student ").strip()
    if stripped in METHOD_COLORS:
        return METHOD_COLORS[stripped]
    family = _family(stripped)
    if family is None:
        return PALETTE[7]
    base = METHOD_COLORS[family]
    shades = _VARIANT_SHADES.get(family, ())
    rest = stripped[len(family):] if stripped.lower().startswith(family.lower()) else stripped
    rest = _TAGS.sub("", rest).strip(" -_")
    if not rest or not shades or family in ("Teacher", "Snapshot ensemble", "paper"):
        return base
    if variants is not None:
        mine = [v for v in variants if _family(v) == family]
        if stripped not in mine:
            variants.append(stripped)
            mine.append(stripped)
        return shades[mine.index(stripped) % len(shades)]
    return shades[sum(map(ord, stripped)) % len(shades)]


def method_variant(name: str) -> bool:
    """True when ``name`` is a variant of a method (``"KD (noise inputs)"``, ``"GPED (every step)"``):
    :func:`method_color` gives it a shade of its method's colour, not the method's own."""
    family = _family(name.removeprefix("student ").strip())
    return family is not None and method_color(name) != METHOD_COLORS[family]


def method_colors(names: list[str] | tuple[str, ...]) -> dict[str, str]:
    """:func:`method_color` of every name in ``names`` (variants shaded in order of appearance)."""
    seen: list[str] = []
    return {name: method_color(name, seen) for name in names}


def savefig_metadata(fmt: str) -> dict[str, None]:
    """The ``metadata`` argument of ``savefig`` for file format ``fmt`` (:data:`SAVEFIG_METADATA`)."""
    if fmt not in SAVEFIG_METADATA:
        raise ValueError(f"fmt={fmt!r}: no metadata rule for this format; allowed: {sorted(SAVEFIG_METADATA)}")
    return dict(SAVEFIG_METADATA[fmt])


#: sRGB (linear) to CIE XYZ, and the D65 white point: IEC 61966-2-1.
_SRGB_TO_XYZ = np.array([[0.4124564, 0.3575761, 0.1804375],
                         [0.2126729, 0.7151522, 0.0721750],
                         [0.0193339, 0.1191920, 0.9503041]])
_D65_WHITE = np.array([0.95047, 1.0, 1.08883])


def cielab(color: Any) -> np.ndarray:
    """``color`` (anything matplotlib reads as a colour) in CIE 1976 L*a*b* (sRGB, D65 white)."""
    rgb = np.asarray(to_rgb(color), dtype=float)
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    xyz = _SRGB_TO_XYZ @ linear / _D65_WHITE
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def color_difference(a: Any, b: Any) -> float:
    """The CIE 1976 colour difference Delta E*ab of two colours (0: the same; about 2: just
    noticeable side by side; below :data:`SIMILAR_COLOR_DELTA_E`: easily confused in a line)."""
    return float(np.linalg.norm(cielab(a) - cielab(b)))


def distinct_colors(n: int, taken: Sequence[Any] = (), min_difference: float = 40.0) -> list[str]:
    """``n`` colours of :data:`PALETTE`, in palette order, each at least ``min_difference``
    (Delta E*ab) from the others and from the colours ``taken``; when the palette runs out, the
    remaining colours follow in palette order regardless."""
    if n < 0:
        raise ValueError(f"n={n}: the number of colours must be >= 0")
    chosen: list[str] = []
    for colour in PALETTE:
        if len(chosen) == n:
            return chosen
        if all(color_difference(colour, other) >= min_difference for other in (*taken, *chosen)):
            chosen.append(colour)
    rest = [c for c in PALETTE if c not in chosen] or list(PALETTE)
    return chosen + [rest[i % len(rest)] for i in range(n - len(chosen))]


def sequential_colors(n: int, cmap: str = "viridis") -> list[tuple[float, float, float, float]]:
    """``n`` colours of a sequential colour map from its dark end to 85% (never the pale end,
    which is hard to see on white): for ordered levels such as labelled-set sizes."""
    colormap = mpl.colormaps[cmap]
    if n <= 1:
        return [colormap(0.2)]
    return [colormap(0.05 + 0.8 * i / (n - 1)) for i in range(n)]


def style_axes(ax: plt.Axes, grid: bool = True) -> plt.Axes:
    """Give axes the caller made outside :func:`kit_theme` (e.g. a widget's) the theme's look:
    grid, spines, tick colours. Returns ``ax``."""
    ax.set_facecolor(KIT_RC["axes.facecolor"])
    ax.set_axisbelow(True)
    ax.grid(grid, color=KIT_RC["grid.color"], linestyle=KIT_RC["grid.linestyle"], linewidth=KIT_RC["grid.linewidth"])
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    for side in ("left", "bottom"):
        ax.spines[side].set_color(KIT_RC["axes.edgecolor"])
    return ax


#: The attribute of an axes whose y range is its own on purpose (:func:`own_y_range`): its reason.
OWN_Y_RANGE = "gped_own_y_range"


def own_y_range(ax: plt.Axes, reason: str) -> plt.Axes:
    """Mark ``ax`` as keeping its own y range although other panels of its figure show the same quantity,
    for ``reason`` (e.g. a posterior that narrows a hundredfold as N grows, flat on a shared scale). Panels of
    one quantity otherwise share one range, so that a value sits at one height in all of them (the figure
    checker of the tests reads the mark). Returns ``ax``."""
    if not reason.strip():
        raise ValueError("own_y_range: say why this panel keeps its own y range")
    setattr(ax, OWN_Y_RANGE, reason)
    return ax
