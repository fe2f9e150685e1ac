"""Tests for gped_kit.viz.plots: every figure is drawn from small hand-made tables (made-up
numbers) and checked for what it shows; saved figures and tables land in tmp_path."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from test_widgets import synthetic_search  # noqa: E402

from gped_kit.core.uncertainty import from_samples  # noqa: E402
from gped_kit.experiments.experiment3 import pareto_front, search_candidates  # noqa: E402
from gped_kit.viz.plots import (  # noqa: E402
    plot_comparison,
    plot_data_uncertainty_joint,
    plot_entropy_agreement,
    plot_experiment4_in_distribution,
    plot_learning_curves,
    plot_pareto,
    plot_pareto_figure,
    plot_uncertainty_maps,
    save_figure,
    save_table,
)


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
    assert len(fig.axes) == 2 and len(fig.axes[1].patches) == 3 * 4  # 3 methods x 4 settings
    ens = torch.rand(200)
    fig = plot_data_uncertainty_joint(ens, {"GPED": ens * 0.9, "EnD2": ens * 1.1})
    assert len(fig.axes) == 6
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
    fig = plot_comparison(table)
    assert all(len(ax.patches) > 0 for ax in fig.axes[:3])
