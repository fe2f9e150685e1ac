import matplotlib

matplotlib.use("Agg")
import pandas as pd  # noqa: E402
import torch  # noqa: E402

from gped_kit.plots import plot_entropy_agreement, plot_learning_curves, save_figure  # noqa: E402


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
