"""Figure quality: every figure function of the kit (the figures modules of gped_kit.plotting and of each
experiment package), drawn from
small SYNTHETIC tables (made-up numbers shaped like the cases that went wrong in issue 29: an
off-scale group l1/l2 student, eight students of which three are shades of KD's purple and one
fails at NLL 2.3, two students no method names, five samplers, four thesis students), passes the
checker of tests/figure_checks.py: no line or marker outside its axes, no two series or legend
entries alike (nor two series drawn the same over one x range, whatever their labels), every axis and
colour bar labelled (no raw variable names), every colour scale with a colour bar, no legend over
data, no texts over each other (value labels, notes, tick labels), no series in a colour too pale for
its background. The cases of issue 45 are among them: Figure 14's equal values side by side with the
paper's values of three methods, every student's first log step at NLL 2.3, a cyclical sampler's first
point at 2.3, the Pareto figures with the paper's values, Experiment 2 over three seeds, the snapshot
ensemble beside the zero-MU baseline. Issue 56's: no legend swatch in a colour its artists lack (the
reliability diagrams' grey "share correct" for blue and orange bars), one y range for panels of one
quantity (Figure 14's accuracy panels), no error bar below 0 for an MAE or an NLL (the seeds profile), no
empty panel (the comparison's Fashion-MNIST NLL). The checker itself is tested on deliberately bad figures.
Fast: no chains, nothing read from the results store."""

import inspect
import pkgutil

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from figure_checks import figure_defects  # noqa: E402
from matplotlib.legend_handler import HandlerTuple  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from test_plots import synthetic_logreg_result  # noqa: E402
from test_widgets import synthetic_search  # noqa: E402

import gped_kit  # noqa: E402
from gped_kit.core.calibration import calibration  # noqa: E402
from gped_kit.core.likelihoods import RegressionMoments  # noqa: E402
from gped_kit.core.uncertainty import from_samples  # noqa: E402
from gped_kit.experiments.comparison import figures as comparison  # noqa: E402
from gped_kit.experiments.experiment1 import figures as experiment1  # noqa: E402
from gped_kit.experiments.experiment2 import figures as experiment2  # noqa: E402
from gped_kit.experiments.experiment3 import figures as experiment3  # noqa: E402
from gped_kit.experiments.experiment4 import figures as experiment4  # noqa: E402
from gped_kit.experiments.samplers import figures as samplers  # noqa: E402
from gped_kit.experiments.thesis import figures as thesis  # noqa: E402
from gped_kit.plotting import figures as plotting  # noqa: E402
from gped_kit.plotting.theme import own_y_range  # noqa: E402
from gped_kit.toys import ToyResult  # noqa: E402

#: The modules that draw the kit's figures.
FIGURE_MODULES = (plotting, experiment1, experiment2, experiment3, experiment4, comparison, samplers, thesis)

# ----------------------------------------------------------------------------- the checker, on bad figures


def _defects_of(draw) -> list[str]:
    fig, ax = plt.subplots()
    draw(fig, ax)
    try:
        return figure_defects(fig)
    finally:
        plt.close(fig)


def _labelled(ax):
    ax.set(xlabel="step", ylabel="NLL")


def test_checker_accepts_a_clean_figure():
    def draw(fig, ax):
        ax.plot([0, 1, 2], [1, 2, 3], "o-", color="C0", label="a")
        ax.plot([0, 1, 2], [2, 3, 1], "s--", color="C1", label="b")
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1))
        _labelled(ax)
    assert _defects_of(draw) == []


def test_checker_finds_a_line_leaving_the_axes():
    def draw(fig, ax):
        ax.plot([0, 1, 2], [1, 2, 3], color="C0", label="kept")
        ax.step([0.5, 1.5], [9.0, 2.0], where="post", color="C1", label="off-scale student")
        ax.set_ylim(0, 4)
        _labelled(ax)
    defects = _defects_of(draw)
    assert len(defects) == 1 and "'off-scale student' leaves the axes" in defects[0]


def test_checker_finds_markers_outside_the_axes():
    def draw(fig, ax):
        ax.scatter([0, 1, 2], [1, 2, 30], label="students")
        ax.set_ylim(0, 4)
        _labelled(ax)
    assert any("'students'" in d and "outside" in d for d in _defects_of(draw))


def test_checker_finds_series_that_look_alike():
    def draw(fig, ax):  # the two oranges of notebook 10: same marker (none) and line style
        ax.plot([0, 1, 2], [1, 2, 3], "-", color="#de8f05", label="SGLD, warm-up")
        ax.plot([0, 1, 2], [2, 3, 1], "-", color="#d55e00", label="SGNHT")
        _labelled(ax)
    defects = _defects_of(draw)
    assert len(defects) == 1 and "'SGLD, warm-up' and 'SGNHT' look alike" in defects[0]

    def draw_marked(fig, ax):  # the same colours apart by their markers: fine
        ax.plot([0, 1, 2], [1, 2, 3], "o-", color="#de8f05", label="SGLD, warm-up")
        ax.plot([0, 1, 2], [2, 3, 1], "s-", color="#d55e00", label="SGNHT")
        _labelled(ax)
    assert _defects_of(draw_marked) == []


def test_checker_finds_legend_entries_that_look_alike():
    def draw(fig, ax):  # the quickstart: two students in two panels, one grey and marker in the legend
        ax.plot([0, 1], [1, 2], "o-", color="0.6", label="student predictive")
        ax.plot([0, 1], [1, 2], "-", color="k", label="teacher")
        fig.legend([plt.Line2D([], [], color="0.6", marker="o")] * 2, ["student predictive", "student entropy"],
                   loc="outside right center")
        _labelled(ax)
    assert any("legend entries 'student predictive' and 'student entropy' look alike" in d for d in _defects_of(draw))


def test_checker_finds_unlabelled_axes_colour_bars_and_raw_names():
    def draw(fig, ax):
        ax.plot([0, 1], [1, 2])
        ax.set_xlabel("num_data")
    defects = _defects_of(draw)
    assert any("x label 'num_data' is a raw variable name" in d for d in defects)
    assert any("the y axis has tick labels but no label" in d for d in defects)

    def draw_image(fig, ax):
        ax.imshow(np.arange(16.0).reshape(4, 4))
        _labelled(ax)
    assert any("without a colour bar" in d for d in _defects_of(draw_image))

    def draw_bar(fig, ax):
        fig.colorbar(ax.imshow(np.arange(16.0).reshape(4, 4)), ax=ax)
        _labelled(ax)
    assert _defects_of(draw_bar) == ["a colour bar has no label"]

    def draw_hexbin(fig, ax):  # Figure 15 before: hexbin counts on a colour scale, no colour bar
        rng = np.random.default_rng(0)
        ax.hexbin(rng.random(200), rng.random(200), gridsize=5, bins="log", cmap="Oranges")
        _labelled(ax)
    assert any("(Oranges) without a colour bar" in d for d in _defects_of(draw_hexbin))


def test_checker_finds_a_legend_over_data():
    def draw(fig, ax):
        x = np.linspace(0, 1, 50)
        ax.plot(x, np.ones_like(x), label="flat")
        ax.plot(x, 1 - x, label="falling")
        ax.legend(loc="center")
        _labelled(ax)
    assert any("a legend covers data" in d for d in _defects_of(draw))


def test_checker_finds_overlapping_value_labels():
    def draw(fig, ax):  # Figure 14 before: two methods of equal accuracy side by side, "0.8030.803"
        ax.plot([0.0, 0.12], [0.803, 0.803], ls="none", marker="s", color="C1", label="EnD2")
        for x in (0.0, 0.12):
            ax.annotate("0.803", (x, 0.803), xytext=(0, 7), textcoords="offset points", ha="center", fontsize=6.5)
        ax.set_xlim(-1, 3)
        _labelled(ax)
    assert any("texts '0.803' and '0.803' overlap" in d for d in _defects_of(draw))

    def draw_apart(fig, ax):  # the second label below its dot: fine
        ax.plot([0.0, 0.12], [0.803, 0.803], ls="none", marker="s", color="C1", label="EnD2")
        for x, dy, va in ((0.0, 7, "bottom"), (0.12, -7, "top")):
            ax.annotate("0.803", (x, 0.803), xytext=(0, dy), textcoords="offset points", ha="center", va=va,
                        fontsize=6.5)
        ax.set_xlim(-1, 3)
        _labelled(ax)
    assert _defects_of(draw_apart) == []


def test_checker_finds_a_note_over_a_tick_label_and_colliding_tick_labels():
    def draw(fig, ax):  # the learning curves before: an off-scale note wider than its panel
        fig.set_size_inches(3.0, 2.5)
        ax.plot([1500, 4000], [0.1, 0.35], label="student")
        ax.text(0.98, 0.98, "↑ student KD (noise inputs): 1.54–2.27, off the scale", transform=ax.transAxes,
                ha="right", va="top", fontsize=8)
        _labelled(ax)
    assert any("covers y tick label" in d for d in _defects_of(draw))

    def draw_ticks(fig, ax):  # the long profile's curves before: 8000 10000 12000 ... run into each other
        fig.set_size_inches(3.0, 2.5)
        ax.plot(range(2000, 16001, 2000), np.linspace(0.1, 0.3, 8), label="student")
        ax.set_xticks(range(2000, 16001, 2000))
        _labelled(ax)
    assert any("x tick labels" in d and "collide" in d for d in _defects_of(draw_ticks))


def test_checker_finds_series_drawn_the_same_whatever_their_labels():
    def draw(fig, ax):  # Figure 14 before: the paper's values of three methods, all black crosses, one label
        for j in range(3):
            ax.plot(np.arange(4) + 0.15 * j, [0.3 + 0.05 * j] * 4, ls="none", marker="x", color="k",
                    label="paper (Tables 2, 8-10)")
        _labelled(ax)
    defects = _defects_of(draw)
    assert len(defects) == 3 and all("are drawn the same" in d for d in defects)

    def draw_unlabelled(fig, ax):  # two lines, same colour, marker and line style, no labels
        ax.plot([0, 1, 2], [1, 2, 3], "o-", color="C0")
        ax.plot([0, 1, 2], [2, 3, 1], "o-", color="C0")
        _labelled(ax)
    assert len(_defects_of(draw_unlabelled)) == 1

    def draw_apart(fig, ax):  # one series in pieces side by side; an open and a filled marker of one shape
        ax.plot([0, 1], [1, 2], "s", color="k", label="the paper's")
        ax.plot([2, 3], [1, 2], "s", color="k", label="the paper's")
        ax.plot([0, 3], [1.5, 1.5], ls="none", marker="D", color="0.25", label="ours")
        ax.plot([0, 3], [1.6, 1.6], ls="none", marker="D", mfc="none", mec="k", label="the paper's (open)")
        _labelled(ax)
    assert _defects_of(draw_apart) == []


def test_checker_finds_two_bars_of_different_methods_in_one_colour():
    def draw(fig, ax):  # notebook 07 before: the snapshot ensemble and the zero-MU baseline in one grey
        methods = ["GPED", "snapshot ensemble, S = 20", "Zero MU (baseline)"]
        ax.barh(range(3), [0.08, 0.0, 0.04], color=["#0173b2", "#9a9a9a", "#949494"])
        ax.set_yticks(range(3), methods)
        _labelled(ax)
    defects = _defects_of(draw)
    assert len(defects) == 1
    assert "bars 'snapshot ensemble, S = 20' and 'Zero MU (baseline)' share one colour" in defects[0]

    def draw_one_colour(fig, ax):  # one series in one colour: fine
        ax.bar(range(3), [1, 2, 3], color="C0")
        _labelled(ax)
    assert _defects_of(draw_one_colour) == []


def test_checker_finds_a_panel_squashed_by_a_few_points():
    def draw(fig, ax):  # notebook 10 before: two curves' first points at NLL 2.3, the rest at 0.06-0.16
        x = np.arange(10.0)
        for k, marker in enumerate("os^D"):
            y = 0.16 - 0.01 * x - 0.002 * k
            y[0] = 2.3 if k >= 2 else y[0]
            ax.plot(x, y, marker=marker, color=f"C{k}", label=f"sampler {k}")
        _labelled(ax)
    defects = _defects_of(draw)
    assert len(defects) == 1 and "38 of 40 points lie within" in defects[0]


def test_checker_finds_a_series_too_pale_for_its_background():
    def draw(fig, ax):  # notebook 10 before: the palette's yellow on white
        ax.plot([0, 1, 2], [1, 2, 3], "o-", color="#0173b2", label="one chain")
        ax.plot([0, 1, 2], [2, 3, 1], "s-", color="#ece133", label="cyclical, 4 chains")
        _labelled(ax)
    defects = _defects_of(draw)
    assert len(defects) == 1 and "'cyclical, 4 chains' is drawn in a colour of little contrast" in defects[0]


def test_checker_finds_a_legend_swatch_in_a_colour_its_artists_do_not_have():
    def draw(fig, ax):  # the reliability diagrams before: "share correct" in the first panel's grey, bars in blue
        ax.bar([0, 1], [0.5, 0.9], color="0.3", label="share correct")
        other = fig.add_subplot(2, 1, 2)
        ax.set_position([0.1, 0.55, 0.8, 0.4])
        other.bar([0, 1], [0.4, 0.8], color="#0173b2", label="share correct")
        for a in (ax, other):
            _labelled(a)
            a.set_ylim(0, 1)
        fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center")
    defects = _defects_of(draw)
    assert len(defects) == 1 and "legend entry 'share correct'" in defects[0] and "#0173b2" in defects[0]

    def draw_grey_for_colours(fig, ax):  # a proxy swatch in grey for a blue and an orange series of one label
        ax.plot([0, 1], [1, 2], "o-", color="#0173b2", label="ours")
        ax.plot([0, 1], [2, 1], "o-", color="#de8f05", label="ours")
        ax.legend([plt.Line2D([], [], color="0.5", marker="o")], ["ours"], loc="upper left", bbox_to_anchor=(1.02, 1))
        _labelled(ax)
    assert any("legend entry 'ours': its swatch shows #808080" in d for d in _defects_of(draw_grey_for_colours))

    def draw_every_colour(fig, ax):  # one swatch per colour of the label's bars: fine
        ax.bar([0, 1], [0.5, 0.9], color="0.3", label="share correct")
        ax.bar([2, 3], [0.4, 0.8], color="#0173b2", label="share correct")
        ax.set_ylim(0, 1.2)
        handle = (Patch(color="0.3"), Patch(color="#0173b2"))
        ax.legend([handle], ["share correct"], handler_map={tuple: HandlerTuple(ndivide=None)}, loc="upper left",
                  bbox_to_anchor=(1.02, 1))
        _labelled(ax)
    assert _defects_of(draw_every_colour) == []


def test_checker_finds_panels_of_one_quantity_over_unequal_ranges():
    def draw(fig, ax):  # Figure 14 before: two accuracy panels at 0.80-0.88 and 0.80-0.84
        other = fig.add_subplot(1, 2, 2)
        ax.set_position([0.1, 0.1, 0.35, 0.8])
        for a, top, model in ((ax, 0.88, "CNN-MNIST"), (other, 0.84, "FCNN")):
            a.plot([0, 1, 2], [0.81, 0.83, top - 0.01], "o", color="C0", label="GPED")
            a.set(ylim=(0.80, top), xlabel="setting", ylabel="test accuracy", title=model)
    defects = _defects_of(draw)
    assert len(defects) == 1 and "panels of test accuracy (linear) have unequal y ranges" in defects[0]

    def draw_shared(fig, ax):  # the same two panels sharing one range; a panel of another quantity its own
        other = fig.add_subplot(1, 3, 2, sharey=ax)
        third = fig.add_subplot(1, 3, 3)
        for a, top in ((ax, 0.88), (other, 0.84)):
            a.plot([0, 1, 2], [0.81, 0.83, top - 0.01], "o", color="C0", label="GPED")
            a.set(xlabel="setting", ylabel="test accuracy")
        third.plot([0, 1, 2], [0.3, 0.5, 0.4], "o", color="C0")
        third.set(xlabel="setting", ylabel="test NLL")
    assert _defects_of(draw_shared) == []

    def draw_own_range(fig, ax):  # a panel marked as keeping its own range on purpose
        other = fig.add_subplot(1, 2, 2)
        ax.set_position([0.1, 0.1, 0.35, 0.8])
        for a, top in ((ax, 0.3), (other, 2.4)):
            a.plot([0, 1, 2], [0, top, 0], color="C0")
            a.set(xlabel="mean m", ylabel="posterior density")
            own_y_range(a, "the posterior narrows as N grows")
    assert _defects_of(draw_own_range) == []


def test_checker_finds_an_error_bar_below_the_floor_of_its_metric():
    def draw(fig, ax):  # a seeds figure before: an MAE's mean 0.03 with a standard deviation of 0.04
        ax.errorbar([0.0, 0.5, 0.8], [0.05, 0.2, 0.03], yerr=[0.01, 0.02, 0.04], fmt="o-", color="C0", label="U_o")
        ax.set(xlabel="masking rate", ylabel="expected-entropy MAE")
    defects = _defects_of(draw)
    assert len(defects) == 1 and "an error bar reaches -0.01, below 0" in defects[0]

    def draw_cut(fig, ax):  # the same bar cut at 0; a difference of NLLs may go below 0
        ax.errorbar([0.0, 0.5, 0.8], [0.05, 0.2, 0.03], yerr=[[0.01, 0.02, 0.03], [0.01, 0.02, 0.04]], fmt="o-",
                    color="C0", label="U_o")
        ax.set(xlabel="masking rate", ylabel="expected-entropy MAE")
        other = fig.add_subplot(1, 2, 2)
        ax.set_position([0.1, 0.1, 0.35, 0.8])
        other.errorbar([0.0, 0.5], [0.01, -0.02], yerr=[0.03, 0.03], fmt="o-", color="C0", label="U_o")
        other.set(xlabel="masking rate", ylabel="student - teacher NLL")
    assert _defects_of(draw_cut) == []


def test_checker_finds_an_empty_panel():
    def draw(fig, ax):  # comparison_mnist before: a panel that only says there is nothing to show
        other = fig.add_subplot(1, 2, 2)
        ax.set_position([0.1, 0.1, 0.35, 0.8])
        ax.barh([0, 1], [0.1, 0.2], color=["C0", "C1"])
        ax.set(xlabel="test NLL", ylabel="method")
        other.text(0.5, 0.5, "Fashion-MNIST (OOD):\nno labels, so no NLL", transform=other.transAxes, ha="center")
        other.set_axis_off()
        other.set_title("Fashion-MNIST (OOD)")
    defects = _defects_of(draw)
    assert defects == ["'Fashion-MNIST (OOD)' is an empty panel: it draws only the note "
                       "'Fashion-MNIST (OOD):\\nno labels, so no NLL'"]

    def draw_blank(fig, ax):  # a blank panel of a grid with one panel too many
        fig.add_subplot(1, 2, 2).set(xlabel="step", ylabel="NLL")
        ax.set_position([0.1, 0.1, 0.35, 0.8])
        ax.plot([0, 1], [1, 2], color="C0")
        _labelled(ax)
    assert len([d for d in _defects_of(draw_blank) if "is an empty panel: it draws nothing" in d]) == 1

    def draw_legend_place(fig, ax):  # an axes holding only a legend is the legend's place
        other = fig.add_subplot(1, 2, 2)
        ax.set_position([0.1, 0.1, 0.35, 0.8])
        line, = ax.plot([0, 1], [1, 2], color="C0", label="a")
        _labelled(ax)
        other.legend([line], ["a"], loc="center")
        other.set_axis_off()
    assert _defects_of(draw_legend_place) == []



def test_checker_finds_scatter_series_drawn_the_same():
    def draw(fig, ax):  # two scatter series of students, both in the default circles of one blue and size
        ax.scatter([0, 1, 2], [1, 2, 3], color="C0", label="GPED")
        ax.scatter([0.5, 1.5, 2.5], [2, 3, 1], color="C0", label="KD")
        _labelled(ax)
    defects = _defects_of(draw)
    assert len(defects) == 1 and "'GPED' and 'KD' are drawn the same (colour, marker 'o'" in defects[0]

    def draw_markers_line(fig, ax):  # scatter circles and a line of the same circles (size 6 ** 2), no labels
        ax.scatter([0, 1, 2], [1, 2, 3], color="C0")
        ax.plot([0, 1, 2], [2, 3, 1], ls="none", marker="o", color="C0")
        _labelled(ax)
    assert ["drawn the same" in d for d in _defects_of(draw_markers_line)] == [True]

    def draw_apart(fig, ax):  # other markers, other sizes, pieces side by side, a colour scale: all told apart
        ax.scatter([0, 1, 2], [1, 2, 3], color="C0", label="GPED")
        ax.scatter([0, 1, 2], [2, 3, 1], color="C0", marker="s", label="KD")
        ax.scatter([0, 1, 2], [1.5, 2.5, 1.5], color="C0", s=120, label="EnD2")
        ax.scatter([0, 1, 2], [3, 1, 2], facecolors="none", edgecolors="C0", label="Hydra")
        ax.scatter([3, 4], [1, 2], color="k", marker="D", label="the paper's")
        ax.scatter([5, 6], [1, 2], color="k", marker="D", label="the paper's")
        for y in (1.2, 2.2):  # two series on one colour scale, one colour bar
            points = ax.scatter([3, 4, 5], [y, y + 0.5, y], c=[0.1, 0.5, 0.9], vmin=0, vmax=1, marker="^")
        fig.colorbar(points, ax=ax, label="masking rate")
        _labelled(ax)
    assert _defects_of(draw_apart) == []


def test_checker_finds_scatter_series_that_look_alike():
    def draw(fig, ax):  # the two oranges of notebook 10 as scatter series: same marker and size
        ax.scatter([0, 1, 2], [1, 2, 3], color="#de8f05", label="SGLD, warm-up")
        ax.scatter([0, 1, 2], [2, 3, 1], color="#d55e00", label="SGNHT")
        _labelled(ax)
    defects = _defects_of(draw)
    assert len(defects) == 1 and "series 'SGLD, warm-up' and 'SGNHT' look alike (marker 'o'" in defects[0]

    def draw_legend(fig, ax):  # the same two in a legend: its entries look alike too
        draw(fig, ax)
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1))
    assert any("legend entries 'SGLD, warm-up' and 'SGNHT' look alike" in d for d in _defects_of(draw_legend))

    def draw_apart(fig, ax):  # the same colours apart by their markers, sizes or edges; two series on one scale
        ax.scatter([0, 1, 2], [1, 2, 3], color="#de8f05", label="SGLD, warm-up")
        ax.scatter([0, 1, 2], [2, 3, 1], color="#d55e00", marker="s", label="SGNHT")
        ax.scatter([0, 1, 2], [1.5, 2.5, 1.5], color="#d55e00", s=120, label="SGHMC")
        ax.scatter([0, 1, 2], [3, 1, 2], color="#d55e00", edgecolors="k", label="BAOA")
        for k, y in enumerate((1.2, 2.2)):
            points = ax.scatter([3, 4, 5], [y, y + 0.5, y], c=[0.1, 0.5, 0.9 - 0.05 * k], vmin=0, vmax=1,
                                label=f"seed {k}")
        fig.colorbar(points, ax=ax, label="masking rate")
        ax.legend(loc="upper left", bbox_to_anchor=(1.3, 1))
        _labelled(ax)
    assert _defects_of(draw_apart) == []


def test_checker_finds_a_scatter_series_too_pale_for_its_background():
    def draw(fig, ax):  # the palette's yellow on white, as scatter markers
        ax.scatter([0, 1, 2], [1, 2, 3], color="#0173b2", label="one chain")
        ax.scatter([0, 1, 2], [2, 3, 1], color="#ece133", marker="s", label="cyclical, 4 chains")
        _labelled(ax)
    defects = _defects_of(draw)
    assert len(defects) == 1 and "'cyclical, 4 chains' is drawn in a colour of little contrast" in defects[0]

    def draw_seen(fig, ax):  # the yellow in a dark edge; a colour scale running to yellow (not one series colour)
        ax.scatter([0, 1, 2], [2, 3, 1], color="#ece133", edgecolors="k", label="cyclical, 4 chains")
        fig.colorbar(ax.scatter([0, 1, 2], [1, 2, 3], c=[0.0, 0.5, 1.0], marker="s"), ax=ax, label="masking rate")
        _labelled(ax)
    assert _defects_of(draw_seen) == []


def test_checker_finds_a_panel_squashed_by_a_few_scatter_points():
    def draw(fig, ax):  # twenty students at NLL 0.06-0.16 as markers, two of them at 2.3
        y = np.linspace(0.06, 0.16, 20)
        y[[3, 11]] = 2.3
        ax.scatter(np.arange(20.0), y, color="C0", label="students")
        _labelled(ax)
    defects = _defects_of(draw)
    assert len(defects) == 1 and "18 of 20 points lie within" in defects[0]

    def draw_spread(fig, ax):  # the same students over the whole range: fine
        ax.scatter(np.arange(20.0), np.linspace(0.06, 2.3, 20), color="C0", label="students")
        _labelled(ax)
    assert _defects_of(draw_spread) == []


# ----------------------------------------------------------------------------- synthetic inputs

COMPARISON_STUDENTS = ["KD", "GPED", "EnD2", "GPED (squared error)", "GPED (every step)", "KD (perturbed inputs)",
                       "KD (noise inputs)", "KD + derivative matching"]


def _learning_history(students: dict[str, tuple[float, float]], steps=(1500, 2000, 2500, 3000)) -> pd.DataFrame:
    """A chain's history: teacher NLL/accuracy, and per student (NLL offset, accuracy offset) from the teacher;
    students whose name has 'entropy' have an entropy MAE instead."""
    rows = []
    for i, step in enumerate(steps):
        teacher_nll, teacher_acc = 0.15 - 0.01 * i, 0.95 + 0.005 * i
        for j, (name, (d_nll, d_acc)) in enumerate(students.items()):
            row = dict(step=step, student=name, teacher_nll=teacher_nll, teacher_accuracy=teacher_acc)
            if "entropy" in name:
                row["entropy_mae"] = 0.14 - 0.01 * i + 0.005 * j
            else:
                row.update(student_nll=teacher_nll + d_nll + 0.01 * j, student_accuracy=teacher_acc - d_acc - 0.002 * j,
                           entropy_mae=0.15 - 0.01 * i + 0.004 * j)
            rows.append(row)
    return pd.DataFrame(rows)


def comparison_curves():
    """Notebook 07's curves: eight students, 'KD (noise inputs)' far off (NLL about 2, accuracy 0.4)."""
    students = {name: (2.0, 0.55) if name == "KD (noise inputs)" else (0.05, 0.01) for name in COMPARISON_STUDENTS}
    return plotting.plot_learning_curves(_learning_history(students))


def comparison_curves_long():
    """Notebook 07's curves in the long profile: eight log steps up to 16,000, every student at NLL 2.3 and
    accuracy 0.1 at the first step (before it has learned anything), 'KD (noise inputs)' far off after it."""
    students = {name: (1.6, 0.6) if name == "KD (noise inputs)" else (0.05, 0.01) for name in COMPARISON_STUDENTS}
    history = _learning_history(students, steps=tuple(range(2000, 16001, 2000)))
    first = history["step"] == 2000
    history.loc[first, "student_nll"] = 2.3 + 0.001 * np.arange(int(first.sum()))
    history.loc[first, "student_accuracy"] = 0.1
    return plotting.plot_learning_curves(history)


def quickstart_curves():
    """Notebook 00's curves: two students no method names, one in the NLL/accuracy panels, one in the MAE panel."""
    history = _learning_history({"predictive (U_s)": (0.05, 0.01), "expected entropy (U_o)": (0.0, 0.0)})
    return plotting.plot_learning_curves(history)


def quickstart_curves_with_the_papers_values():
    """Notebook 00's curves beside Table 1's FCNN row: the paper's teacher and student NLL and entropy MAE as
    dashed lines in the colours of the curves they belong to, one legend entry for them."""
    history = _learning_history({"predictive (U_s)": (0.05, 0.01), "expected entropy (U_o)": (0.0, 0.0)})
    paper = {"teacher_nll": 0.052, "student_nll": 0.082, "entropy_mae": 0.016}
    return plotting.plot_learning_curves(history, paper=paper, paper_label="the paper's Table 1 (T = 10^6)")


def entropy_agreement():
    t = torch.rand(200)
    return plotting.plot_entropy_agreement(t, t * 0.9 + 0.05 * torch.rand(200))


def _experiment2(with_ours: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = [dict(labelled_size=n, masking_rate=r, estimator=e, teacher_nll=1 + r - n / 1e5, nll_gap=0.1 * r + 0.01 * k,
                 entropy_mae=0.05 + r / 10 + 0.01 * k)
            for n in (10_000, 30_000, 60_000) for r in (0.0, 0.29, 0.51) for k, e in enumerate(("U_o", "U_s"))]
    paper = pd.DataFrame(rows).assign(table="Table 5")
    return (pd.DataFrame(rows) if with_ours else pd.DataFrame(rows).iloc[:0]), paper


def experiment2_seeds():
    """Figure 1 of the seeds profile: one row per cell, estimator and seed (three seeds): error bars."""
    ours, paper = _experiment2()
    rng = np.random.default_rng(0)
    per_seed = pd.concat([ours.assign(seed=s, nll_gap=ours["nll_gap"] * (1 + 0.1 * rng.standard_normal(len(ours))))
                          for s in range(3)], ignore_index=True)
    return experiment2.plot_experiment2_vs_paper(per_seed, paper, title="Figure 1, three seeds")


def experiment2_seeds_near_zero():
    """Figure 1 of the seeds profile where an entropy MAE near 0 spreads over the seeds by more than its mean:
    its error bar stops at 0, the legend says so."""
    ours, paper = _experiment2()
    rng = np.random.default_rng(1)
    per_seed = pd.concat([ours.assign(seed=s, entropy_mae=np.where(ours["masking_rate"] == 0.51,
                                                                    0.02 + 0.03 * rng.standard_normal(len(ours)),
                                                                    ours["entropy_mae"]).clip(0.001))
                          for s in range(3)], ignore_index=True)
    return experiment2.plot_experiment2_vs_paper(per_seed, paper, title="Figure 1, three seeds, an MAE near 0")


def uncertainty_grid():
    ours, _ = _experiment2()
    return experiment2.plot_uncertainty_grid(ours, style="estimator",
                                             highlight={"masking_rate": 0.29, "labelled_size": 60_000})


def experiment2_vs_paper():
    return experiment2.plot_experiment2_vs_paper(*_experiment2(), title="Figure 1")


def experiment2_paper_only():
    ours, paper = _experiment2(with_ours=False)
    return experiment2.plot_experiment2_vs_paper(ours, paper.assign(table="Table 7"), x="labelled_size")


def experiment4_in_distribution():
    """Figure 14 as in the default profile: EnD2 at tau = 2.5 has EnD2's accuracy (the same argmax), so two
    equal values side by side; the paper's NLL for the ensemble, GPED and EnD2 (not for tau = 2.5)."""
    shift = {"Ensemble": 0.0, "GPED": 0.02, "EnD2": 0.03, "EnD2 (tau = 2.5)": 0.03}
    rows = [dict(model=model, method=m, estimator=e, student=s, metric=k,
                 value=base + (shift[m] + (0.3 if m == "EnD2 (tau = 2.5)" and k == "nll" else 0.0))
                 * (1 if k == "nll" else -1) + 0.01 * i,
                 value_paper=(base - 0.1 - 0.03 * j) if k == "nll" and m != "EnD2 (tau = 2.5)" else None)
            for model in ("cnn_mnist", "fcnn") for j, m in enumerate(shift)
            for i, (e, s) in enumerate((e, s) for s in ("base", "largest_width_multiplier") for e in ("U_o", "U_s"))
            for k, base in (("nll", 0.5), ("accuracy", 0.83))]
    return experiment4.plot_experiment4_in_distribution(pd.DataFrame(rows), title="Figure 14")


def data_uncertainty_joint():
    gen = torch.Generator().manual_seed(0)
    ensemble = torch.rand(400, generator=gen) * 2
    students = {"EnD2-U_o (largest)": ensemble * 1.1, "EnD2-U_s (largest)": ensemble * 1.05,
                "GPED-U_o (largest)": ensemble * 0.8, "GPED-U_s (largest)": ensemble * 0.85}
    return experiment4.plot_data_uncertainty_joint(ensemble, students, title="Figure 15")


def _fcnn_search_off_scale() -> pd.DataFrame:
    table = synthetic_search()
    fcnn = table[table["model"] == "fcnn"].copy()
    far = (fcnn["reg_weight"] == 1e-2) & (fcnn["stage"] == "fine-tuned")
    fcnn.loc[far, ["student_nll", "student_accuracy", "flops", "params"]] = [2.0, 0.3, 60_000, 5_000]
    return fcnn


def pareto_panel():
    fcnn = _fcnn_search_off_scale()
    return experiment3.plot_pareto(fcnn, "student_nll", "flops", "group_lasso", ylim=(0.25, 0.6),
                                   highlight="predictive-K2x1").figure


def pareto_figure():
    return experiment3.plot_pareto_figure(_fcnn_search_off_scale(), "student_nll", title="Figure 9")


def pareto_figure_accuracy():
    return experiment3.plot_pareto_figure(_fcnn_search_off_scale(), "student_accuracy", title="Figure 8")


def pareto_figure_with_the_papers_values():
    """Figure 2 with the paper's teacher, base and best student (the CNN's synthetic search)."""
    table = synthetic_search()
    return experiment3.plot_pareto_figure(table[table["model"] == "cnn_mnist"], "student_nll", title="Figure 2",
                                          paper=experiment3.pareto_paper_reference("cnn_mnist", "student_nll"))


def pareto_figure_with_the_papers_cost():
    """Figure 8 with the paper's best student's cost only (its caption gives no value), and an off-scale student."""
    return experiment3.plot_pareto_figure(_fcnn_search_off_scale(), "student_accuracy", title="Figure 8",
                                          paper=experiment3.pareto_paper_reference("fcnn", "student_accuracy"))


def uncertainty_maps():
    gen = torch.Generator().manual_seed(0)
    maps = {m: from_samples(torch.rand(3, 16, 2, generator=gen).softmax(-1)) for m in ("Long-chain teacher", "Hydra")}
    return comparison.plot_uncertainty_maps(maps, 4, 2.0, torch.rand(10, 2, generator=gen) * 3 - 1.5,
                                            torch.tensor([0, 1] * 5), rings=(0.7, 0.85))


def comparison_bars():
    table = pd.DataFrame({"method": ["KD", "Hydra", "GPED", "Hydra", "GPED"],
                          "eval_set": ["test", "test", "test", "grid", "grid"],
                          "nll": [0.1, 0.2, 5.0, None, None], "mu_mae_snapshots": [None, 0.01, 0.02, 0.02, 0.03],
                          "mu_mae_teacher": [None, 0.03, 0.05, 0.04, 0.02]})
    return comparison.plot_comparison(table)


def comparison_bars_with_references():
    """Notebook 07's bars: the teacher, the snapshot ensemble and the zero-MU baseline beside the students."""
    methods = ["teacher, T = 4,000", "snapshot ensemble, S = 20", "GPED", "Hydra", "Zero MU (baseline)"]
    table = pd.DataFrame({"method": methods, "eval_set": "test", "nll": [0.10, 0.10, 0.12, 0.10, None],
                          "mu_mae_snapshots": [0.009, 0.0, 0.078, 0.018, 0.038],
                          "mu_mae_teacher": [0.0, 0.009, 0.078, 0.018, 0.039]})
    return comparison.plot_comparison(table)


SAMPLERS = ["SGLD (paper)", "SGLD, warm-up 4x", "SGHMC", "SGNHT", "BAOA"]


def sampler_study():
    rows = []
    for c, candidate in enumerate(SAMPLERS):
        for i, step in enumerate(range(500, 3500, 500)):
            common = dict(candidate=candidate, seed=0, step=step, elapsed_s=step / 100 * (1 + 0.1 * c),
                          teacher_nll=0.15 - 0.01 * i - 0.003 * c, teacher_recent_nll=0.14 - 0.01 * i - 0.003 * c)
            rows.append({**common, "student": "predictive (U_s)", "student_nll": 0.28 - 0.02 * i - 0.002 * c})
            rows.append({**common, "student": "expected entropy (U_o)", "entropy_mae": 0.17 - 0.01 * i - 0.004 * c})
    return samplers.plot_sampler_study(pd.DataFrame(rows), {"teacher NLL": 0.052, "student NLL": 0.082,
                                                             "entropy MAE": 0.016})


POOLING = ["BAOA, one chain", "BAOA, 2 chains pooled", "BAOA, 4 chains pooled", "BAOA, 8 chains pooled",
           "BAOA cyclical, one chain", "BAOA cyclical, 4 chains pooled"]


def sampler_pooling():
    """Notebook 10's pooling profile: six candidates; the cyclical ones' students at NLL 2.3 at their first point."""
    rows = []
    for c, candidate in enumerate(POOLING):
        for i, step in enumerate(range(500, 5500, 500)):
            common = dict(candidate=candidate, seed=0, step=step, elapsed_s=step / 20 * (1 + 0.3 * c),
                          teacher_nll=0.1 - 0.003 * i - 0.002 * c, teacher_recent_nll=0.098 - 0.003 * i - 0.002 * c)
            nll = 2.3 if "cyclical" in candidate and i == 0 else 0.16 - 0.008 * i - 0.002 * c
            rows.append({**common, "student": "predictive (U_s)", "student_nll": nll})
            rows.append({**common, "student": "expected entropy (U_o)", "entropy_mae": 0.09 - 0.006 * i - 0.004 * c})
    return samplers.plot_sampler_study(pd.DataFrame(rows), {"teacher NLL": 0.052, "student NLL": 0.082,
                                                             "entropy MAE": 0.016})


def regression_uncertainty():
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(100, 1, generator=gen) * 4 - 2
    y = torch.sin(2 * x[:, 0]) + 0.3 * torch.randn(100, generator=gen)
    grid = torch.linspace(-3, 3, 61).unsqueeze(1)
    mean = torch.sin(2 * grid)
    aleatoric = 0.04 + 0.3 * (grid > 0)
    epistemic = 0.01 + 0.05 * grid ** 2
    teacher = RegressionMoments(mean, epistemic, aleatoric)
    student = RegressionMoments(mean * 0.98, epistemic * 1.1, aleatoric)  # the aleatoric curves coincide
    return plotting.plot_regression_uncertainty(x, y, grid, {"teacher ensemble": teacher, "student": student},
                                                data_range=(-2.0, 2.0))


def _mog_result(n: int) -> ToyResult:
    rng = np.random.default_rng(n)
    edges = np.linspace(-15, 15, 61)
    grid = np.linspace(-20, 20, 201)
    pdf = np.exp(-0.5 * grid ** 2) / np.sqrt(2 * np.pi)
    arrays = {"hist_edges": edges, "mean_hist": rng.integers(1, 50, (3, 60)), "grid": grid, "true_pdf": pdf,
              "p_mc": pdf * 0.9, "batch": pdf * 0.95, "online": pdf * 0.85, "data": rng.normal(size=n)}
    return ToyResult(pd.DataFrame({"num_data": [n]}), arrays, {})


def mog_figure():
    return thesis.plot_mog([_mog_result(2), _mog_result(100)], title="MoG")


def _mog_table() -> pd.DataFrame:
    return pd.DataFrame([dict(num_data=n, mode=mode, kl_mc_to_student=k * (1 if mode == "batch" else 0.8),
                              memory_bytes=2.8e5 if mode == "batch" else 6e3)
                         for n, k in ((2, 3e-3), (10, 5e-3), (100, 8e-3), (1000, 5e-3))
                         for mode in ("batch", "online")])


def online_vs_batch():
    return thesis.plot_online_vs_batch(_mog_table(), "kl_mc_to_student", "num_data",
                                       ylabel="KL(p_MC || student)", title="MoG")


def online_vs_batch_by_loss():
    table = synthetic_logreg_result(("resample", "perturb", "noise")).table
    return thesis.plot_online_vs_batch(table[table["generator"] == "noise"].assign(num_data=100), "mean_kl_test",
                                       "loss", hue=("generator",))


def logreg_figure():
    return thesis.plot_logreg(synthetic_logreg_result(("resample", "perturb", "noise")), "noise")


def generators_figure():
    return thesis.plot_generators(synthetic_logreg_result(("resample", "perturb", "noise")).table, "mean_kl_test")


def _table1() -> pd.DataFrame:
    return pd.DataFrame({"model": ["cnn_cifar10", "cnn_mnist", "fcnn"], "seeds": [None, 3, 1],
                         "teacher_nll": [None, 0.039, 0.095], "teacher_nll_std": [None, 0.003, None],
                         "teacher_nll_paper": [0.671, 0.022, 0.052], "student_nll": [None, 0.076, 0.121],
                         "student_nll_std": [None, 0.004, None], "student_nll_paper": [0.932, 0.053, 0.082],
                         "entropy_mae": [None, 0.044, 0.083], "entropy_mae_std": [None, 0.001, None],
                         "entropy_mae_paper": [0.245, 0.016, 0.016]})


def table1_figure():
    return experiment1.plot_table1(_table1(), "Table 1")


def reliability_figure():
    g = torch.Generator().manual_seed(1)
    probs = torch.softmax(3 * torch.randn(600, 10, generator=g), dim=1)
    labels = torch.randint(0, 10, (600,), generator=g)
    labels[:300] = probs[:300].argmax(1)
    sharper = torch.softmax(3 * probs.log(), dim=1)
    return plotting.plot_reliability({"Ensemble": calibration(probs, labels), "GPED": calibration(sharper, labels)},
                                     "Reliability")


#: Figure functions that draw pictures, not data (no axes, series or colour scales to check): tested where they are.
PICTURES = {"experiment2.plot_masked_examples": "Figure 3's masked digits, tests/test_widgets.py"}

#: Every figure function of the library -> the cases that draw it.
CASES = {
    "plotting.plot_learning_curves": [comparison_curves, comparison_curves_long, quickstart_curves,
                                      quickstart_curves_with_the_papers_values],
    "plotting.plot_entropy_agreement": [entropy_agreement],
    "experiment2.plot_uncertainty_grid": [uncertainty_grid],
    "experiment2.plot_experiment2_vs_paper": [experiment2_vs_paper, experiment2_seeds, experiment2_seeds_near_zero,
                                              experiment2_paper_only],
    "experiment4.plot_experiment4_in_distribution": [experiment4_in_distribution],
    "experiment4.plot_data_uncertainty_joint": [data_uncertainty_joint],
    "experiment3.plot_pareto": [pareto_panel],
    "experiment3.plot_pareto_figure": [pareto_figure, pareto_figure_accuracy, pareto_figure_with_the_papers_values,
                                       pareto_figure_with_the_papers_cost],
    "comparison.plot_uncertainty_maps": [uncertainty_maps],
    "comparison.plot_comparison": [comparison_bars, comparison_bars_with_references],
    "samplers.plot_sampler_study": [sampler_study, sampler_pooling],
    "experiment1.plot_table1": [table1_figure],
    "plotting.plot_reliability": [reliability_figure],
    "plotting.plot_regression_uncertainty": [regression_uncertainty],
    "thesis.plot_mog": [mog_figure],
    "thesis.plot_online_vs_batch": [online_vs_batch, online_vs_batch_by_loss],
    "thesis.plot_logreg": [logreg_figure],
    "thesis.plot_generators": [generators_figure],
}


def _library_figure_functions() -> set[str]:
    """``<package>.<function>`` of every ``plot_`` function defined in a ``figures`` module of the kit (the
    generic figures of gped_kit.plotting and each experiment's)."""
    names = set()
    for module in FIGURE_MODULES:
        package = module.__name__.split(".")[-2]
        names |= {f"{package}.{n}" for n, f in inspect.getmembers(module, inspect.isfunction)
                  if n.startswith("plot_") and f.__module__ == module.__name__}
    return names - set(PICTURES)


def test_every_figure_module_is_listed():
    found = {m.name for m in pkgutil.walk_packages(gped_kit.__path__, "gped_kit.") if m.name.endswith(".figures")}
    assert found == {m.__name__ for m in FIGURE_MODULES}


def test_every_figure_function_has_a_case():
    assert set(CASES) == _library_figure_functions()


@pytest.mark.parametrize("case", [c for cases in CASES.values() for c in cases], ids=lambda c: c.__name__)
def test_figure_has_no_defects(case):
    fig = case()
    try:
        assert figure_defects(fig) == []
    finally:
        plt.close(fig)
