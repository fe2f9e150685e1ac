"""The kit's one plotting theme: fonts, grid, palette and a colour per method, for every figure of
:mod:`gped_kit.viz`.

Every plotting function of the kit draws inside :func:`kit_theme` (the :func:`themed` decorator),
a :func:`matplotlib.pyplot.rc_context`: the theme applies to the figures the kit draws and
matplotlib's global settings are restored when the function returns, so a notebook cell, a widget
or a user's own figure is never restyled behind its back. To draw a figure of your own in the
kit's style::

    from gped_kit.viz.theme import kit_theme, method_color

    with kit_theme():
        fig, ax = plt.subplots()
        ax.plot(x, y, color=method_color("GPED"))

Methods keep one colour in every figure (:data:`METHOD_COLORS`, :func:`method_color`): GPED blue,
EnD2 orange, Hydra green, KD purple, the teacher ensemble dark grey, the snapshot ensemble light
grey, the paper's numbers black. Variants of a method (e.g. "GPED (every step)", "KD (noise
inputs)") get a shade of their method's colour.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import matplotlib as mpl
import matplotlib.pyplot as plt
from cycler import cycler

#: The categorical palette (seaborn's "colorblind", i.e. Okabe-Ito-like), in cycle order.
PALETTE = ("#0173b2", "#de8f05", "#029e73", "#d55e00", "#cc78bc", "#ca9161", "#fbafe4", "#949494", "#ece133",
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
    "paper": "#000000",
    # the comparison's variants (notebook 07): shades of their method's colour
    "GPED (every step)": "#56b4e9",
    "GPED (squared error)": "#003f6b",
    "KD (perturbed inputs)": "#cc78bc",
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


def method_colors(names: list[str] | tuple[str, ...]) -> dict[str, str]:
    """:func:`method_color` of every name in ``names`` (variants shaded in order of appearance)."""
    seen: list[str] = []
    return {name: method_color(name, seen) for name in names}


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
