"""Tests for the figures (gped_kit.plotting.figures and each experiment's figures module), gped_kit.plotting.theme and
gped_kit.plotting.tables (and the thesis figures' layout): every figure is drawn from small hand-made tables (made-up
numbers) and checked for what it shows; saved figures and tables land in tmp_path."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from PIL import Image as PIL_Image  # noqa: E402
from test_widgets import synthetic_search  # noqa: E402

from gped_kit.core.likelihoods import RegressionMoments  # noqa: E402
from gped_kit.core.status import Status  # noqa: E402
from gped_kit.core.uncertainty import from_samples  # noqa: E402
from gped_kit.experiments.comparison.figures import plot_comparison, plot_uncertainty_maps  # noqa: E402
from gped_kit.experiments.experiment2.figures import plot_experiment2_vs_paper, plot_uncertainty_grid  # noqa: E402
from gped_kit.experiments.experiment3 import pareto_front, search_candidates  # noqa: E402
from gped_kit.experiments.experiment3.figures import (  # noqa: E402
    pareto_paper_reference,
    plot_pareto,
    plot_pareto_figure,
)
from gped_kit.experiments.experiment4.figures import (  # noqa: E402
    plot_data_uncertainty_joint,
    plot_experiment4_in_distribution,
)
from gped_kit.experiments.samplers.figures import plot_sampler_study  # noqa: E402
from gped_kit.experiments.thesis import figures as thesis_plots  # noqa: E402
from gped_kit.plotting.figures import (  # noqa: E402
    plot_entropy_agreement,
    plot_learning_curves,
    plot_regression_uncertainty,
)
from gped_kit.plotting.save import (  # noqa: E402
    PAPER_ONLY_SUFFIX,
    figure_content,
    is_paper_only,
    png_content,
    save_figure,
    save_table,
)
from gped_kit.plotting.tables import flat_table, full_table, integer_columns, markdown_table, paper_table  # noqa: E402
from gped_kit.plotting.theme import (  # noqa: E402
    KIT_RC,
    METHOD_COLORS,
    PALETTE,
    color_difference,
    kit_theme,
    method_color,
    method_colors,
    savefig_metadata,
)
from gped_kit.toys import ToyResult  # noqa: E402
from gped_kit.viz.report import missing_data_line  # noqa: E402


def test_figures_are_drawn_and_saved_as_png_and_pdf(tmp_path):
    history = pd.DataFrame({
        "step": [100, 100, 200, 200], "student": ["a", "b", "a", "b"],
        "teacher_nll": [0.5, 0.5, 0.4, 0.4], "teacher_accuracy": [0.8, 0.8, 0.9, 0.9],
        "student_nll": [0.7, None, 0.6, None], "student_accuracy": [0.7, None, 0.8, None],
        "entropy_mae": [None, 0.2, None, 0.1]})
    fig = plot_learning_curves(history)
    assert len(fig.axes) == 3 and len(fig.axes[0].lines) == 2 and len(fig.axes[2].lines) == 1
    paths = save_figure(fig, "curves", tmp_path / "figs")
    assert [p.suffix for p in paths] == [".png", ".pdf"] and all(p.stat().st_size > 1000 for p in paths)
    fig = plot_entropy_agreement(torch.rand(50, 1), torch.rand(50, 1))
    assert len(fig.axes[0].collections) == 1


def test_experiment4_figures_and_save_table(tmp_path):
    rows = [dict(model="fcnn", method=m, estimator=e, student=s, metric=k, value=v,
                 value_paper=0.4 if k == "nll" else None)
            for m in ("Ensemble", "GPED", "EnD2") for e in ("U_s", "U_o") for s in ("base", "largest_width_multiplier")
            for k, v in (("nll", 0.5), ("accuracy", 0.8))]
    fig = plot_experiment4_in_distribution(pd.DataFrame(rows), title="t")
    dots = [line for line in fig.axes[1].lines if line.get_label().endswith("(ours)")]
    assert len(fig.axes) == 2 and [len(d.get_xdata()) for d in dots] == [4, 4, 4]  # 3 methods x 4 settings
    two_seeds = pd.concat([pd.DataFrame(rows).assign(seed=0), pd.DataFrame(rows).assign(seed=1, value=0.7)])
    fig = plot_experiment4_in_distribution(two_seeds)  # one row per seed: the figure shows their mean
    gped = [line for line in fig.axes[1].lines if line.get_label() == "GPED (ours)"][0]
    assert list(gped.get_ydata()) == pytest.approx([0.6] * 4)
    plt.close(fig)
    two_models = pd.concat([pd.DataFrame(rows), pd.DataFrame(rows).assign(model="cnn_mnist", value=0.9)])
    fig = plot_experiment4_in_distribution(two_models)  # Figure 14: one y range per metric, models named
    assert [ax.get_title() for ax in fig.axes] == ["FCNN: test accuracy", "FCNN: test NLL", "CNN-MNIST: test accuracy",
                                                   "CNN-MNIST: test NLL"]
    assert fig.axes[0].get_ylim() == fig.axes[2].get_ylim() and fig.axes[1].get_ylim() == fig.axes[3].get_ylim()
    plt.close(fig)
    ens = torch.rand(200)
    fig = plot_data_uncertainty_joint(ens, {"GPED": ens * 0.9, "EnD2": ens * 1.1})
    colorbars = [a for a in fig.axes if hasattr(a, "_colorbar")]
    assert len(fig.axes) == 8 and len(colorbars) == 2  # per student: joint, two marginals, its colour bar
    assert all(cb.get_ylabel() == "test inputs per hexagon" for cb in colorbars)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(t.startswith("GPED student") for t in legend) and any(t.startswith("EnD2 student") for t in legend)
    paths = save_table(pd.DataFrame({"a": [1.23456]}), "t_default", tmp_path)
    assert [p.name for p in paths] == ["t_default.csv", "t_default.md"] and "1.235" in paths[1].read_text()


def test_pareto_panels_mark_students_frontier_teacher_and_base(tmp_path):
    table = synthetic_search()
    cnn = table[table["model"] == "cnn_mnist"]
    ax = plot_pareto(cnn, "student_nll", "flops", "exhaustive", highlight="predictive-K2x1")
    students = search_candidates(cnn, "exhaustive")
    students = students[students["target"] == "predictive"]
    assert len(ax.collections[0].get_offsets()) == len(students)  # IS: every individual student
    frontier = [line for line in ax.lines if line.get_label() == "S: Pareto frontier"][0]
    expected = pareto_front(students, "student_nll", "flops")
    assert list(frontier.get_xdata()) == list(expected["flops"])
    assert list(frontier.get_ydata()) == list(expected["student_nll"])
    labels = [line.get_label() for line in ax.lines]
    assert "base student's cost" in labels and "T: teacher ensemble (20 samples)" in labels
    assert ax.get_xscale() == "log"
    plt.close(ax.figure)
    ax = plot_pareto(cnn, "entropy_mae", "params", "group_lasso")
    assert not any(line.get_label().startswith("T:") for line in ax.lines)  # no teacher line for the MAE
    plt.close(ax.figure)
    fig = plot_pareto_figure(cnn, "student_nll", title="Figure 2")
    assert [a.get_title() for a in fig.axes[:4]] == ["(a) exhaustive search", "(b) group l1/l2 with pruning",
                                                     "(c) exhaustive search", "(d) group l1/l2 with pruning"]
    assert fig.axes[0].get_xlabel().startswith("FLOPs") and fig.axes[2].get_xlabel() == "parameters"
    assert all(p.stat().st_size > 1000 for p in save_figure(fig, "pareto", tmp_path))
    plt.close(fig)
    with pytest.raises(ValueError, match="metric='loss'"):
        plot_pareto(cnn, "loss", "flops")


def test_uncertainty_maps_and_comparison_figures():
    maps = {m: from_samples(torch.rand(3, 16, 2).softmax(-1)) for m in ("Teacher", "Hydra")}
    fig = plot_uncertainty_maps(maps, 4, 2.0, torch.rand(10, 2, 1, 1), torch.randint(0, 2, (10,)))
    assert len([a for a in fig.axes if a.images]) == 6
    table = pd.DataFrame({"method": ["KD", "Hydra", "Hydra"], "eval_set": ["test", "test", "grid"],
                          "nll": [0.1, 0.2, None], "mu_mae_snapshots": [None, 0.01, 0.02],
                          "mu_mae_teacher": [None, 0.03, 0.04]})
    fig = plot_comparison(table, title="The methods on one chain")
    assert len(fig.axes) == 1 + 2 * 2  # one row per metric, a panel per evaluation set with values
    test_nll = fig.axes[0]
    assert len(test_nll.patches) == 2 and test_nll.get_title() == "MNIST test set"
    title = fig.get_suptitle()  # the title, what MU is, and why the unlabelled set has no NLL panel
    assert title.startswith("The methods on one chain\nMU: the mutual information") and "No NLL on grid" in title
    assert all(len(ax.patches) > 0 for ax in fig.axes)  # no empty panel
    assert [ax.get_title() for ax in fig.axes[1:3]] == ["MNIST test set", "grid (unlabelled)"]
    assert test_nll.patches[0].get_facecolor() == plt.matplotlib.colors.to_rgba(METHOD_COLORS["KD"])


def _rc_snapshot() -> dict:
    return {k: v for k, v in plt.rcParams.items() if k not in ("backend", "backend_fallback")}


def test_theme_is_applied_while_drawing_and_global_settings_are_restored():
    before = _rc_snapshot()
    with kit_theme() as rc:
        assert plt.rcParams["axes.grid"] is True and plt.rcParams["font.size"] == rc["font.size"]
    assert _rc_snapshot() == before
    history = pd.DataFrame({"step": [100, 200], "student": ["GPED", "GPED"], "teacher_nll": [0.5, 0.4],
                            "teacher_accuracy": [0.8, 0.9], "student_nll": [0.7, 0.6], "student_accuracy": [0.7, 0.8],
                            "entropy_mae": [0.2, 0.1]})
    fig = plot_learning_curves(history)
    assert _rc_snapshot() == before  # the plotting function left no global state behind
    ax = fig.axes[0]
    assert ax.xaxis.get_gridlines()[0].get_visible() and not ax.spines["top"].get_visible()
    assert ax.title.get_fontsize() == KIT_RC["axes.titlesize"]
    assert len(fig.legends) == 1 and all(a.get_legend() is None for a in fig.axes)  # one legend per figure
    student = [line for line in ax.lines if line.get_label() == "student GPED"][0]
    assert student.get_color() == METHOD_COLORS["GPED"]
    plt.close("all")


def test_one_colour_per_method_and_shades_for_variants():
    assert method_color("GPED") == method_color("student GPED") == method_color("GPED-U_s (largest)")
    assert method_color("EnD2-U_o (largest)") == METHOD_COLORS["EnD2"]
    assert method_color("Long-chain teacher") == method_color("Ensemble") == method_color("teacher ensemble")
    colours = method_colors(["GPED", "EnD2", "Hydra", "KD", "Snapshot ensemble", "paper", "GPED (every step)",
                             "GPED (squared error)", "KD (noise inputs)", "GPED (something new)"])
    assert len(set(colours.values())) == len(colours)  # every method and variant its own colour


def _experiment2(model_rows: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = [dict(labelled_size=n, masking_rate=r, estimator=e, teacher_nll=1 + r - n / 1e5, nll_gap=0.1 * r,
                 entropy_mae=0.05 + r / 10)
            for n in (10_000, 60_000) for r in (0.0, 0.29, 0.51) for e in ("U_o", "U_s")]
    paper = pd.DataFrame(rows).assign(table="Table 5")
    return (pd.DataFrame(rows) if model_rows else pd.DataFrame(rows).iloc[:0]), paper


def test_experiment2_figures_have_one_readable_legend_outside_the_axes():
    ours, paper = _experiment2()
    fig = plot_experiment2_vs_paper(ours, paper, title="t")
    axes = [a for a in fig.get_axes()] + [a for sub in fig.subfigs for a in sub.get_axes()]
    assert len({id(a) for a in axes}) == 6 and all(a.get_legend() is None for a in axes)
    assert len(fig.legends) == 1
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["N = 10,000", "N = 60,000", r"$U_o$ (running mean)", r"$U_s$ (single sample)"]
    assert [sub._suptitle.get_text() for sub in fig.subfigs] == ["ours", "the paper's Figure 1 (its Table 5)"]
    plt.close(fig)
    # the widget's call: axes given, one legend beside the last panel
    fig, axes = plt.subplots(1, 3)
    plot_uncertainty_grid(ours, axes=list(axes))
    assert [a.get_legend() is not None for a in axes] == [False, False, True]
    plt.close(fig)


def test_experiment2_figure_without_our_results_draws_the_papers_row_only():
    ours, paper = _experiment2(model_rows=False)
    fig = plot_experiment2_vs_paper(ours, paper.assign(table="Table 7"), x="labelled_size")
    axes = [a for sub in fig.subfigs for a in sub.get_axes()]
    assert len(fig.subfigs) == 1 and len(axes) == 3
    assert all(len(a.lines) > 0 for a in axes)  # no empty axes
    assert fig.subfigs[0]._suptitle.get_text() == "the paper's Figure 5 (its Table 7; no results of ours to show)"
    assert [t.get_text() for t in axes[0].get_xticklabels()] == ["10k", "60k"]
    plt.close(fig)


def test_pareto_figure_leaves_an_isolated_student_off_the_scale_with_an_arrow():
    table = synthetic_search()
    fcnn = table[table["model"] == "fcnn"].copy()
    far = (fcnn["reg_weight"] == 1e-2) & (fcnn["stage"] == "fine-tuned")
    fcnn.loc[far, "student_nll"] = 2.0
    fig = plot_pareto_figure(fcnn, "student_nll")
    low, high = fig.axes[0].get_ylim()
    assert high < 1.0 and low < 0.3  # the region of the students and the teacher, not stretched to 2.0
    group = fig.axes[1]
    notes = [t for t in group.texts if "off the scale" in t.get_text()]
    assert len(notes) == 1 and notes[0].get_text().startswith("λ = 0.01: 2")
    assert not any("off the scale" in t.get_text() for t in fig.axes[0].texts)
    assert len(fig.legends) == 1 and all(a.get_legend() is None for a in fig.axes)
    plt.close(fig)
    fig = plot_pareto_figure(table[table["model"] == "fcnn"], "student_nll")  # nothing isolated: no arrows
    assert not any(t.get_text().endswith("(off the scale)") for a in fig.axes for t in a.texts)
    plt.close(fig)


def test_pareto_figure_draws_nothing_off_the_scale_and_one_cost_range_per_row():
    table = synthetic_search()
    fcnn = table[table["model"] == "fcnn"].copy()
    far = (fcnn["reg_weight"] == 1e-2) & (fcnn["stage"] == "fine-tuned")
    fcnn.loc[far, ["student_nll", "flops", "params"]] = [2.0, 60_000, 5_000]  # far off, and cheaper than any other
    fig = plot_pareto_figure(fcnn, "student_nll")
    a, b, c, d = fig.axes[:4]
    assert a.get_xlim() == b.get_xlim() and c.get_xlim() == d.get_xlim()  # panels of a row: the same costs
    assert a.get_xlim()[0] < 60_000 < a.get_xlim()[1]  # the off-scale student's arrow points into the panel
    low, high = b.get_ylim()
    for ax in fig.axes[:4]:
        for line in ax.lines:
            if line.get_label() in ("S: Pareto frontier", "exhaustive frontier (for comparison)"):
                assert all(low <= y <= high for y in line.get_ydata())  # no step to the off-scale student
        for points in ax.collections:
            assert all(low <= y <= high for _, y in points.get_offsets())
    plt.close(fig)


def test_uncertainty_maps_have_titles_ticks_one_colour_bar_per_column_and_a_legend():
    maps = {m: from_samples(torch.rand(3, 16, 2).softmax(-1)) for m in ("Teacher", "Hydra")}
    fig = plot_uncertainty_maps(maps, 4, 2.0, torch.rand(10, 2), torch.tensor([0, 1] * 5), rings=(0.7, 0.85))
    images = [a for a in fig.axes if a.images]
    colorbars = [a for a in fig.axes if hasattr(a, "_colorbar")]
    assert len(images) == 6 and len(colorbars) == 3
    assert [a.get_title() for a in images[:3]] == ["Teacher: total", "Teacher: data", "Teacher: knowledge"]
    assert all(len(a.get_xticks()) == 5 for a in images)
    for col in range(3):  # one colour scale per column (uncertainty kind)
        assert images[col].images[0].get_clim() == images[col + 3].images[0].get_clim()
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels[:2] == ["training points, y = 0", "training points, y = 1"] and "label-noise" in labels[2]
    plt.close(fig)


def synthetic_logreg_result(generators: tuple[str, ...] = ("resample", "noise")) -> ToyResult:
    """A made-up logistic-regression toy result in the shape of :func:`gped_kit.toys.run_logreg`'s: batch and
    online students of both losses and ``generators``, with memory and sample counts, and the figures' arrays."""
    rng = np.random.default_rng(0)
    students = [(m, loss, g) for m in ("batch", "online") for loss in ("cross_entropy", "derivative_square_error")
                for g in generators]
    table = pd.DataFrame(students, columns=["mode", "loss", "generator"]).assign(
        mean_kl_test=rng.uniform(1e-4, 1e-1, len(students)),
        memory_bytes=[8e4 if s[0] == "batch" else 2e3 for s in students], num_samples=1000)
    axis = np.linspace(-6, 6, 7)
    arrays = {"grid_axis": axis, "mc_grid": rng.uniform(0, 1, (7, 7)),
              "student_weights": rng.normal(size=(len(students), 10, 2)),
              "student_grids": rng.uniform(0, 1, (len(students), 7, 7)), "bag_subsample": rng.normal(size=(200, 2)),
              "data_x": rng.normal(size=(24, 2)), "data_y": np.arange(24) % 2}
    return ToyResult(table, arrays, {})


def test_thesis_logreg_panels_align_and_the_generator_figure_draws_dots_not_bars():
    fig = thesis_plots.plot_logreg(synthetic_logreg_result(), "noise")
    fig.canvas.draw()
    top, bottom = fig.axes[:5], fig.axes[5:10]
    for a, b in zip(top, bottom):  # the panels of a column share their horizontal extent
        pa, pb = a.get_position(), b.get_position()
        assert abs(pa.x0 - pb.x0) < 0.01 and abs(pa.x1 - pb.x1) < 0.01
    plt.close(fig)
    fig = thesis_plots.plot_generators(synthetic_logreg_result().table)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log" and len(ax.patches) == 0  # no bars on a log axis
    assert len([line for line in ax.lines if line.get_marker() in ("o", "s")]) == 4
    plt.close(fig)


def test_tables_show_every_row_and_missing_values_as_a_dash(tmp_path):
    table = pd.DataFrame({"model": [f"m{i}" for i in range(70)], "value": np.r_[np.arange(69) / 7, np.nan]})
    shown = full_table(table, title="Table X")
    text, html = repr(shown), shown._repr_html_()
    assert "m69" in text and "…" not in text and "..." not in text and "nan" not in text.lower()
    assert text.startswith("Table X") and text.rstrip().endswith("—")
    assert html.count("<tr") == 71 and "nan" not in html.lower() and "<strong>Table X</strong>" in html
    assert "| —" in markdown_table(table.tail(1)) and "nan" not in markdown_table(table)
    paths = save_table(table, "t", tmp_path)
    assert "nan" not in paths[1].read_text() and "—" in paths[1].read_text()
    flat = flat_table(table.head(2), title="Flat")  # one row per record: no index column
    assert repr(flat).splitlines()[1].split() == ["model", "value"] and "<th>0</th>" not in flat._repr_html_()
    assert "<th>0</th>" in shown._repr_html_()
    labelled = paper_table(pd.DataFrame({"labelled_size": [10_000], "teacher_nll": [0.9]}), ["teacher_nll"])
    assert list(labelled.columns) == ["labelled_size", "teacher_nll_paper"]


def test_counts_stored_as_floats_are_shown_as_integers(tmp_path):
    """A count column that pandas keeps as floats (a value missing, or averaged over seeds) is
    shown and saved as integers, never as 9568200.0000; real numbers keep their digits."""
    table = pd.DataFrame({"method": ["ensemble", "teacher", "KD"], "params": [9_568_200.0, np.nan, 478_410.0],
                          "seeds": [3.0, 3.0, 1.0], "nll": [0.1, 2.0, np.nan], "steps": [1500, 3000, 1500]})
    assert integer_columns(table) == ["params", "seeds"]
    shown = full_table(table, digits=4)
    for text in (repr(shown), shown._repr_html_(), markdown_table(table)):
        assert "9568200" in text and "478410" in text and "9568200.0" not in text and "3.0" not in text
        assert "0.1000" in text or "0.100" in text  # the NLL keeps its decimals (2.0 too: not a whole column)
        assert "nan" not in text.lower() and "—" in text
    paths = save_table(table, "counts", tmp_path, floatfmt=".4f")
    assert "9568200 " in paths[1].read_text() and "9568200.0" not in paths[1].read_text()


def test_missing_data_is_named_once_in_one_line_without_paths():
    cells = pd.DataFrame({"cell": ["a", "b", "c"], "status": [Status.MISSING_DATA, Status.REUSED, Status.MISSING_DATA],
                          "error": ["data set 'cifar10' (train) not found.\nLooked in:\n  - /root/x/data_batch_1",
                                    None, "data set 'cifar10' (train) not found.\nLooked in:\n  - /root/x/b"]})
    line = missing_data_line(cells, cells)
    assert line.count("cifar10") == 1 and "\n" not in line and "/root" not in line
    assert line.startswith("Not on this machine: data set 'cifar10' (train) not found.")
    assert missing_data_line(cells[cells["status"] == Status.REUSED]) == ""


def test_a_saved_figure_is_replaced_when_a_stated_number_or_a_point_changes(tmp_path):
    """The pixels alone keep a file whose title number changed or whose marker moved (a few hundred pixels of a
    million): the figure's content (its texts and plotted positions, held in the PNG) is compared too. The same
    figure drawn again is kept; a file saved without content is replaced once."""
    def figure(title: str = "student NLL 0.469", y: float = 0.40):
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot(np.linspace(0, 1, 50), np.linspace(0.2, 0.8, 50))
        ax.scatter([0.5], [y])
        ax.set(title=title, ylim=(0, 1), yscale="linear")
        return fig

    def save(fig) -> tuple[Path, int]:
        png = save_figure(fig, "view", tmp_path)[0]
        plt.close(fig)
        return png, png.stat().st_mtime_ns

    png, first = save(figure())
    assert png_content(png) == figure_content(figure()) and png_content(tmp_path / "view.pdf") is None
    plt.close("all")
    assert save(figure())[1] == first  # the same figure drawn again: kept
    png, retitled = save(figure(title="student NLL 0.812"))
    assert retitled != first
    png, moved = save(figure(title="student NLL 0.812", y=0.45))
    assert moved != retitled
    assert save(figure(title="student NLL 0.812", y=0.4502))[1] == moved  # less than a thousandth of the axis
    PIL_Image.open(png).save(png)  # the same pixels, no content: as figures were saved before they held it
    stripped = png.stat().st_mtime_ns
    assert png_content(png) is None and save(figure(title="student NLL 0.812", y=0.45))[1] != stripped
    assert png_content(png) is not None


def test_saving_a_figure_twice_gives_the_same_bytes_without_time_stamps(tmp_path):
    history = pd.DataFrame({"step": [100, 200], "student": ["GPED", "GPED"], "teacher_nll": [0.5, 0.4],
                            "teacher_accuracy": [0.8, 0.9], "student_nll": [0.7, 0.6], "student_accuracy": [0.7, 0.8],
                            "entropy_mae": [0.2, 0.1]})
    fig = plot_learning_curves(history)
    first, second = save_figure(fig, "curves", tmp_path / "a"), save_figure(fig, "curves", tmp_path / "b")
    plt.close(fig)
    fig = plot_learning_curves(history)  # drawn again from the same table
    third = save_figure(fig, "curves", tmp_path / "c")
    plt.close(fig)
    for one, two, three in zip(first, second, third):
        assert one.read_bytes() == two.read_bytes() == three.read_bytes(), one.name
    png, pdf = first
    assert "Software" not in PIL_Image.open(png).info
    assert b"CreationDate" not in pdf.read_bytes() and b"Matplotlib" not in pdf.read_bytes()
    with kit_theme():  # SVG (not written by save_figure) saves the same twice too with the kit's metadata and rc
        fig, ax = plt.subplots()
        ax.plot([0, 1], [1, 0], label="x")
        ax.legend()
        svgs = []
        for name in ("one.svg", "two.svg"):
            fig.savefig(tmp_path / name, metadata=savefig_metadata("svg"))
            svgs.append((tmp_path / name).read_bytes())
        plt.close(fig)
    assert svgs[0] == svgs[1] and b"<dc:date>" not in svgs[0]
    with pytest.raises(ValueError, match="fmt='eps'"):
        savefig_metadata("eps")
    with pytest.raises(ValueError, match="without folders"):
        save_figure(plt.figure(), "sub/name", tmp_path)
    plt.close("all")


def test_figures_and_tables_of_the_papers_numbers_only_are_named_as_the_papers(tmp_path):
    ours, paper = _experiment2(model_rows=False)
    fig = plot_experiment2_vs_paper(ours, paper.assign(table="Table 7"), x="labelled_size")
    assert is_paper_only(fig)
    assert [p.name for p in save_figure(fig, "fig5_x_default", tmp_path)] == [
        f"fig5_x_default{PAPER_ONLY_SUFFIX}.png", f"fig5_x_default{PAPER_ONLY_SUFFIX}.pdf"]
    plt.close(fig)
    fig = plot_experiment2_vs_paper(*_experiment2())
    assert not is_paper_only(fig) and save_figure(fig, "fig1_x_default", tmp_path)[0].name == "fig1_x_default.png"
    plt.close(fig)
    table = pd.DataFrame({"labelled_size": [10_000], "teacher_nll": [0.9]})
    labelled = paper_table(table, ["teacher_nll"])
    assert [p.name for p in save_table(labelled, "table7_x_default", tmp_path)] == [
        "table7_x_default_paper_only.csv", "table7_x_default_paper_only.md"]
    assert save_table(table, "table7_x_default", tmp_path)[0].name == "table7_x_default.csv"  # not marked
    assert table.attrs == {}  # the paper's table was labelled, not the one it was made from


def test_figure14_draws_dots_on_an_axis_that_spans_the_values():
    rows = [dict(model="fcnn", method=m, estimator=e, student=s, metric=k, value=v + d, value_paper=None)
            for m, d in (("Ensemble", 0.0), ("GPED", -0.02), ("EnD2", -0.03)) for e in ("U_s", "U_o")
            for s in ("base", "largest_width_multiplier") for k, v in (("nll", 0.5), ("accuracy", 0.83))]
    fig = plot_experiment4_in_distribution(pd.DataFrame(rows))
    accuracy = fig.axes[0]
    assert len(accuracy.patches) == 0 and accuracy.get_ylim()[0] > 0.75 and accuracy.get_ylim()[1] < 0.9
    assert accuracy.get_xlabel() == "estimator, student size"
    plt.close(fig)


def test_learning_curves_leave_an_isolated_student_off_the_scale_and_keep_students_apart():
    rows = []
    students = ["KD", "GPED", "KD (perturbed inputs)", "KD (noise inputs)", "KD + derivative matching", "EnD2"]
    for i, step in enumerate((100, 200, 300)):
        for j, name in enumerate(students):
            nll = 2.2 - 0.1 * i if name == "KD (noise inputs)" else 0.3 - 0.02 * i + 0.01 * j
            rows.append(dict(step=step, student=name, teacher_nll=0.2 - 0.02 * i, teacher_accuracy=0.95,
                             student_nll=nll, student_accuracy=0.9))
    fig = plot_learning_curves(pd.DataFrame(rows))
    nll = fig.axes[0]
    assert "student KD (noise inputs)" not in [line.get_label() for line in nll.lines]
    assert nll.get_ylim()[1] < 1.0  # the others are not squashed against the axis
    note = [t.get_text() for t in nll.texts if t.get_text().startswith("off the scale:")]
    assert len(note) == 1 and "↑ student KD (noise inputs): 2–2.2" in note[0]
    styles = {(line.get_color(), line.get_marker(), line.get_linestyle()) for line in nll.lines}
    assert len(styles) == len(nll.lines)  # every student its own look
    kd_lines = [line for line in nll.lines if "KD" in line.get_label()]
    assert len({line.get_marker() for line in kd_lines}) == len(kd_lines)  # the shades of KD apart by marker
    plt.close(fig)


def test_quickstart_students_without_method_names_get_distinct_colours():
    history = pd.DataFrame({"step": [100, 100, 200, 200], "student": ["predictive (U_s)", "expected entropy (U_o)"] * 2,
                            "teacher_nll": [0.5, 0.5, 0.4, 0.4], "teacher_accuracy": [0.8, 0.8, 0.9, 0.9],
                            "student_nll": [0.7, None, 0.6, None], "student_accuracy": [0.7, None, 0.8, None],
                            "entropy_mae": [None, 0.2, None, 0.1]})
    fig = plot_learning_curves(history)
    handles = fig.legends[0].legend_handles
    assert [t.get_text() for t in fig.legends[0].get_texts()][1:] == ["student predictive (U_s)",
                                                                       "student expected entropy (U_o)"]
    assert color_difference(handles[1].get_color(), handles[2].get_color()) > 40
    assert handles[1].get_marker() != handles[2].get_marker()
    plt.close(fig)


def test_sampler_study_colours_far_apart_and_one_legend():
    rows = [dict(candidate=c, step=s, elapsed_s=s / 10, teacher_nll=0.1, teacher_recent_nll=0.09,
                 student=st, student_nll=0.2, entropy_mae=0.1)
            for c in ("SGLD", "SGLD, warm-up", "SGHMC", "SGNHT", "BAOA") for s in (100, 200)
            for st in ("predictive (U_s)", "expected entropy (U_o)")]
    fig = plot_sampler_study(pd.DataFrame(rows), {"teacher NLL": 0.05, "student NLL": 0.08, "entropy MAE": 0.02})
    solid = [line for line in fig.axes[0].lines if line.get_linestyle() == "-"]
    colours = [line.get_color() for line in solid]
    assert len(solid) == 5 and min(color_difference(a, b) for i, a in enumerate(colours) for b in colours[i + 1:]) > 40
    assert len(fig.legends) == 1 and all(a.get_legend() is None for a in fig.axes)
    plt.close(fig)


def test_regression_figure_draws_the_student_over_a_wider_teacher_line():
    grid = torch.linspace(-3, 3, 31).unsqueeze(1)
    teacher = RegressionMoments(torch.sin(grid), 0.01 + 0.05 * grid ** 2, 0.04 + 0.3 * (grid > 0))
    fig = plot_regression_uncertainty(torch.rand(20, 1) * 4 - 2, torch.randn(20), grid,
                                      {"teacher ensemble": teacher, "student": teacher}, data_range=(-2, 2))
    variance = fig.axes[1]
    by_label = {line.get_label(): line for line in variance.lines}
    t, s = by_label["teacher ensemble: aleatoric"], by_label["student: aleatoric"]
    assert t.get_color() == s.get_color() and t.get_linestyle() == "-" and s.get_linestyle() == "--"
    assert t.get_linewidth() > s.get_linewidth() and t.get_zorder() < s.get_zorder()  # equal curves: both seen
    assert variance.get_yscale() == "log" and variance.get_ylabel().startswith("variance")
    with pytest.raises(ValueError, match="moments is empty"):
        plot_regression_uncertainty(torch.rand(2, 1), torch.rand(2), grid, {})
    plt.close("all")


def test_thesis_figures_label_axes_with_what_the_columns_measure():
    table = pd.DataFrame([dict(num_data=n, mode=m, kl_mc_to_student=0.01, memory_bytes=1e4)
                          for n in (2, 10) for m in ("batch", "online")])
    fig = thesis_plots.plot_online_vs_batch(table, "kl_mc_to_student", "num_data")
    assert [fig.axes[0].get_xlabel(), fig.axes[0].get_ylabel(), fig.axes[1].get_ylabel()] == [
        "data-set size N", "KL(p_MC || student) on the grid", "memory held (bytes)"]
    plt.close(fig)


def test_learning_curves_leave_every_students_first_step_off_the_scale_and_keep_ticks_apart():
    """The long profile's curves: every student at NLL 2.3 at the first log step (before it has learned
    anything) is left off the scale, in one line of the note; step ticks have thousands separators."""
    rows = []
    students = ["KD", "GPED", "EnD2", "KD (noise inputs)"]
    for i, step in enumerate(range(2000, 16001, 2000)):
        for j, name in enumerate(students):
            nll = 2.3 if i == 0 else (1.7 if name == "KD (noise inputs)" else 0.3 - 0.01 * i + 0.01 * j)
            rows.append(dict(step=step, student=name, teacher_nll=0.1 - 0.002 * i, teacher_accuracy=0.97,
                             student_nll=nll, student_accuracy=0.1 if i == 0 else 0.95))
    fig = plot_learning_curves(pd.DataFrame(rows))
    nll = fig.axes[0]
    assert nll.get_ylim()[1] < 0.6  # neither the first step nor KD on noise inputs squashes the others
    gped = [line for line in nll.lines if line.get_label() == "student GPED"][0]
    assert list(gped.get_xdata()) == list(range(4000, 16001, 2000))  # its first step is left out
    note = [t.get_text() for t in nll.texts if t.get_text().startswith("off the scale:")][0]
    assert "↑ t = 2,000, every student: 2.3" in note and "↑ student KD (noise inputs): 1.7–2.3" in note
    fig.canvas.draw()
    ticks = [t.get_text() for t in nll.get_xticklabels() if t.get_text()]
    assert "10,000" in ticks and len(ticks) <= 6
    plt.close(fig)


def test_figure14_places_value_labels_apart_and_draws_the_papers_values_per_method():
    rows = [dict(model="fcnn", method=m, estimator=e, student=s, metric=k,
                 value=0.803 if k == "accuracy" and m.startswith("EnD2") else v + d,
                 value_paper=(0.4 - d) if k == "nll" and m != "EnD2 (tau = 2.5)" else None)
            for m, d in (("Ensemble", 0.0), ("GPED", 0.02), ("EnD2", 0.03), ("EnD2 (tau = 2.5)", 0.3))
            for e in ("U_s", "U_o") for s in ("base", "largest_width_multiplier")
            for k, v in (("nll", 0.5), ("accuracy", 0.83))]
    fig = plot_experiment4_in_distribution(pd.DataFrame(rows))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    accuracy, nll = fig.axes[0], fig.axes[1]
    boxes = [t.get_window_extent(renderer) for t in accuracy.texts]
    assert len(boxes) == 16 and not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    equal = [t for t in accuracy.texts if t.get_text() == "0.803"]
    assert len(equal) == 8 and {t.get_va() for t in equal} == {"bottom", "top"}  # one above, one below
    paper = [line for line in nll.lines if line.get_label().endswith("(the paper's)")]
    assert [line.get_label() for line in paper] == ["Ensemble (the paper's)", "GPED (the paper's)",
                                                    "EnD² (the paper's)"]
    assert len({line.get_marker() for line in paper}) == 3  # a marker per method, as ours
    assert all(line.get_markerfacecolor() == "none" for line in paper)  # open, ours filled
    plt.close(fig)


def test_figure15_is_at_most_two_students_wide_with_a_readable_legend():
    ens = torch.rand(300)
    students = {f"{m}-{e} (largest)": ens * f for m, f in (("EnD2", 1.1), ("GPED", 0.8)) for e in ("U_o", "U_s")}
    fig = plot_data_uncertainty_joint(ens, students, title="Figure 15")
    width, height = fig.get_size_inches() * 150
    assert width <= 2000 and height <= 2000  # a 2 x 2 grid at the kit's 150 dpi, not 3,284 pixels in a row
    legend = fig.legends[0]
    assert all(t.get_fontsize() >= 10 for t in legend.get_texts()) and legend._ncols == 2
    plt.close(fig)


def test_pareto_figure_draws_the_papers_values_when_given():
    table = synthetic_search()
    cnn = table[table["model"] == "cnn_mnist"]
    paper = pareto_paper_reference("cnn_mnist", "student_nll")
    assert paper == {"best_flops_ratio": 6.4, "best_params_ratio": 6.6, "teacher": 0.267, "base_student": 0.469,
                     "best_student": 0.30}
    fig = plot_pareto_figure(cnn, "student_nll", paper=paper)
    a, b, c, d = fig.axes[:4]
    base_flops = float(cnn[(cnn["method"] == "exhaustive") & cnn["is_base"].astype(bool)]["flops"].iloc[0])
    for ax in (a, b, c, d):
        labels = [line.get_label() for line in ax.lines]
        assert "the paper's teacher ensemble (0.267)" in labels
        assert any(lab.startswith("the paper's base student (0.469") for lab in labels)
        assert ax.get_ylim()[0] < 0.267  # the paper's values are on the scale
    star = [line for line in b.lines if line.get_label().startswith("the paper's best student")][0]
    assert star.get_xdata()[0] == pytest.approx(6.4 * base_flops) and star.get_ydata()[0] == 0.30
    assert not any(line.get_label().startswith("the paper's best") for line in a.lines)  # found by group l1/l2
    assert b.get_xlim()[1] > 6.4 * base_flops
    plt.close(fig)
    fig = plot_pareto_figure(table[table["model"] == "fcnn"], "student_accuracy",
                             paper=pareto_paper_reference("fcnn", "student_accuracy"))  # a cost, no value
    assert any(line.get_label().startswith("the paper's best student's cost (10× the base's FLOPs")
               for line in fig.axes[1].lines)
    plt.close(fig)
    assert pareto_paper_reference("cnn_mnist", "no such metric") == {}
    with pytest.raises(ValueError, match="unknown entries"):
        plot_pareto_figure(cnn, "student_nll", paper={"teacher_nll": 0.267})


def test_experiment2_figure_shows_the_spread_of_several_seeds():
    ours, paper = _experiment2()
    per_seed = pd.concat([ours.assign(seed=s, nll_gap=ours["nll_gap"] + 0.01 * s) for s in range(3)])
    fig = plot_experiment2_vs_paper(per_seed, paper)
    gap = fig.subfigs[0].axes[1]
    bars = [c for c in gap.collections if c.get_segments()]
    assert len(bars) == 4 and all(len(c.get_segments()) == 3 for c in bars)  # a bar per point of each line
    low, high = bars[0].get_segments()[0][:, 1]
    assert high - low == pytest.approx(2 * 0.01)  # +-1 std of 0, 0.01, 0.02
    assert fig.subfigs[0]._suptitle.get_text() == "ours (mean ± std over 3 seeds)"
    assert [t.get_text() for t in fig.legends[0].get_texts()][-1] == "ours: ± 1 std over 3 seeds"
    assert not fig.subfigs[1].axes[1].collections  # the paper's row: one value per cell, no bars
    plt.close(fig)
    near_zero = per_seed.assign(entropy_mae=0.01 + 0.02 * per_seed["seed"])  # mean 0.03, std 0.02 ... and 0.05
    near_zero.loc[near_zero["seed"] == 2, "entropy_mae"] = 0.0  # mean 0.01, std 0.01: no cut
    near_zero.loc[(near_zero["seed"] == 0) & (near_zero["masking_rate"] == 0.0), "entropy_mae"] = 0.06
    fig = plot_experiment2_vs_paper(near_zero, paper)
    mae = fig.subfigs[0].axes[2]  # an MAE's bar stops at 0, its floor, and the legend says so
    assert min(seg[:, 1].min() for c in mae.collections for seg in c.get_segments()) == pytest.approx(0.0)
    assert [t.get_text() for t in fig.legends[0].get_texts()][-1] == "ours: ± 1 std over 3 seeds, cut at 0"
    plt.close(fig)


def test_comparison_bars_of_the_snapshot_ensemble_and_the_zero_mu_baseline_differ_in_colour():
    table = pd.DataFrame({"method": ["snapshot ensemble, S = 20", "Zero MU (baseline)"], "eval_set": "test",
                          "mu_mae_snapshots": [0.0, 0.04], "mu_mae_teacher": [0.01, 0.04]})
    fig = plot_comparison(table)
    snap, zero = fig.axes[0].patches[:2]
    assert color_difference(snap.get_facecolor()[:3], zero.get_facecolor()[:3]) > 40
    plt.close(fig)


def test_sampler_study_leaves_a_curves_first_point_off_the_scale_and_has_no_pale_colour():
    rows = [dict(candidate=c, step=s, elapsed_s=s / 10 * (1 + 0.2 * k), teacher_nll=0.1 - s / 1e5,
                 teacher_recent_nll=0.09 - s / 1e5, student=st,
                 student_nll=2.3 if c.startswith("cyclical") and s == 100 else 0.2 - s / 1e5, entropy_mae=0.1)
            for k, c in enumerate(("one chain", "2 pooled", "4 pooled", "8 pooled", "cyclical", "cyclical, 4 pooled"))
            for s in range(100, 900, 100) for st in ("predictive (U_s)", "expected entropy (U_o)")]
    fig = plot_sampler_study(pd.DataFrame(rows), {"teacher NLL": 0.05, "student NLL": 0.08, "entropy MAE": 0.02})
    student = fig.axes[1]
    assert student.get_ylim()[1] < 0.5
    note = [t.get_text() for t in student.texts][0]
    assert "↑ cyclical, first point: 2.3" in note and "↑ cyclical, 4 pooled, first point: 2.3" in note
    colours = {line.get_color() for line in fig.axes[0].lines}
    assert "#ece133" not in colours and "#ece133" not in PALETTE  # the palette's pale yellow is gone
    plt.close(fig)
