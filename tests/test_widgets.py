"""Tests for the explorers (gped_kit.viz.masking_explorer, pareto_explorer), Figure 3 (experiments.experiment2.figures),
their static images (viz.snapshot) and the stored Experiment 1-2 rows (experiments.experiment2), driving the controls
from Python.

The results tables below are SYNTHETIC (made-up numbers in the shape of the chain summaries and
Experiment 3 search tables, for these tests only); stores and figure folders are made in
tmp_path, nothing is written to results/ or figures/.
"""

from __future__ import annotations

import base64
import io
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.backend_bases import MouseEvent  # noqa: E402
from PIL import Image  # noqa: E402

import gped_kit.viz.pareto_explorer as pareto_module  # noqa: E402
import gped_kit.viz.snapshot as snapshot_module  # noqa: E402
from gped_kit.core.status import Status  # noqa: E402
from gped_kit.data.transforms import apply_square_mask  # noqa: E402
from gped_kit.experiments.experiment2 import chain_lengths, experiment2_cells, experiment12_rows  # noqa: E402
from gped_kit.experiments.experiment2.figures import (  # noqa: E402
    plot_masked_examples,
    select_examples,
    square_mask_region,
)
from gped_kit.experiments.experiment3 import (  # noqa: E402
    SEARCH_KIND,
    SEARCH_TABLE,
    frontier_table,
    pareto_front,
)
from gped_kit.experiments.experiment3.figures import plot_pareto_figure  # noqa: E402
from gped_kit.experiments.numerics import numerics_code  # noqa: E402
from gped_kit.experiments.store import ResultsStore  # noqa: E402
from gped_kit.plotting.save import same_image  # noqa: E402
from gped_kit.viz.masking_explorer import MaskingExplorer  # noqa: E402
from gped_kit.viz.pareto_explorer import ParetoExplorer  # noqa: E402

SIZES = (10_000, 60_000)
MASKS = (0, 5, 10, 15)
T = 5_000  # the chain length of the synthetic Experiment 2 chains


def synthetic_results() -> pd.DataFrame:
    """Made-up per-student rows: fcnn on every (N, m); cnn_mnist only at N=60000, m=0.

    Each chain has four students (predictive/entropy x U_o/U_s) with the teacher's architecture
    (K1 = K2 = 1), all chains of length T. Numbers are chosen so every metric of every cell is
    distinct: teacher 0.1 + m/100 + (N==10000)/10, gap and MAE add estimator-specific offsets.
    """
    rows = []

    def chain(model: str, n: int, m: int) -> None:
        teacher = 0.1 + m / 100 + (0.1 if n == 10_000 else 0.0)
        for est, off in (("U_o", 0.001), ("U_s", 0.002)):
            base = dict(dataset="mnist", model=model, labelled_size=n, mask_size=m, masking_rate=m * m / 784,
                        estimator=est, teacher_nll=teacher, teacher_accuracy=0.9, run_key=f"{model}-{n}-{m}",
                        student_arch=model, k1=1.0, k2=1.0, num_iterations=T)
            rows.append({**base, "student": f"predictive ({est})", "target": "predictive",
                         "student_nll": teacher + 0.02 + off + m / 1000, "nll_gap": 0.02 + off + m / 1000,
                         "student_accuracy": 0.88, "entropy_mae": float("nan")})
            rows.append({**base, "student": f"expected entropy ({est})", "target": "entropy",
                         "student_nll": float("nan"), "nll_gap": float("nan"), "student_accuracy": float("nan"),
                         "entropy_mae": 0.03 + 2 * off + m / 2000})

    for n in SIZES:
        for m in MASKS:
            chain("fcnn", n, m)
    chain("cnn_mnist", 60_000, 0)
    return pd.DataFrame(rows)


def synthetic_images(n: int = 10, size: int = 28) -> torch.Tensor:
    """uint8 images with values 1..255, so every zero pixel is a masked one."""
    return torch.randint(1, 256, (n, 1, size, size), dtype=torch.uint8, generator=torch.Generator().manual_seed(3))


@pytest.fixture
def explorer() -> MaskingExplorer:
    return MaskingExplorer(synthetic_results(), images=synthetic_images(), num_examples=4, seed=0)


# ----------------------------------------------------------------------------- table
def test_table_pairs_predictive_and_entropy_rows_per_chain_and_estimator():
    table = experiment2_cells(synthetic_results())
    assert len(table) == len(SIZES) * len(MASKS) * 2 + 2
    cell = table[(table.model == "fcnn") & (table.labelled_size == 10_000) & (table.mask_size == 10)
                 & (table.estimator == "U_s")].iloc[0]
    assert cell.teacher_nll == pytest.approx(0.3)
    assert cell.nll_gap == pytest.approx(0.02 + 0.002 + 0.01)
    assert cell.student_nll == pytest.approx(0.3 + 0.032)
    assert cell.entropy_mae == pytest.approx(0.03 + 0.004 + 0.005)
    assert cell.masking_rate == pytest.approx(100 / 784) and cell.n_runs == 1
    assert table[["teacher_nll", "nll_gap", "entropy_mae"]].notna().all().all()


def test_table_averages_chains_of_one_cell_and_filters_the_dataset():
    res = synthetic_results()
    second = res[(res.model == "cnn_mnist")].assign(run_key="second-seed", teacher_nll=0.3,
                                                      nll_gap=lambda d: d.nll_gap + 0.1)
    other = res[(res.model == "cnn_mnist")].assign(dataset="fashion_mnist", teacher_nll=9.0)
    table = experiment2_cells(pd.concat([res, second, other]), dataset="mnist")
    cell = table[(table.model == "cnn_mnist") & (table.estimator == "U_o")].iloc[0]
    assert cell.n_runs == 2
    assert cell.teacher_nll == pytest.approx((0.1 + 0.3) / 2)
    assert cell.nll_gap == pytest.approx(0.021 + 0.05)


def test_table_errors_name_missing_columns_and_accept_the_empty_store():
    with pytest.raises(ValueError, match=r"estimator.*target|target.*estimator"):
        experiment2_cells(synthetic_results().drop(columns=["estimator", "target"]))
    with pytest.raises(ValueError, match="nll_gap or entropy_mae"):
        experiment2_cells(synthetic_results().drop(columns=["nll_gap", "entropy_mae"]))
    with pytest.raises(TypeError):
        experiment2_cells([{"model": "fcnn"}])
    assert experiment2_cells(pd.DataFrame()).empty


# ----------------------------------------------------------------------------- images
def test_examples_are_seeded_and_the_mask_region_matches_apply_square_mask():
    imgs = synthetic_images()
    assert torch.equal(select_examples(imgs, 4, seed=1), select_examples(imgs, 4, seed=1))
    assert not torch.equal(select_examples(imgs, 4, seed=1), select_examples(imgs, 4, seed=2))
    region = square_mask_region(imgs, 7, seed=5)
    masked = apply_square_mask(imgs, 7, seed=5)
    assert (region.flatten(1).sum(1) == 49).all()
    assert torch.equal(masked == 0, region)


def test_plot_masked_examples_grid_has_titles_with_m_and_r():
    fig = plot_masked_examples(synthetic_images(3), [0, 14], seed=0)
    assert len(fig.axes) == 6
    assert fig.axes[1].get_title() == "m = 14\nr = 0.250"
    assert len(fig.axes[1].patches) == 1 and len(fig.axes[0].patches) == 0  # outline only when m > 0
    plt.close(fig)
    with pytest.raises(ValueError, match="outside"):
        plot_masked_examples(synthetic_images(3), [29])


# ----------------------------------------------------------------------------- explorer
def test_controls_reflect_the_results(explorer):
    # opens on the stored mask size nearest to Figure 3's m = 14 (none is stored at 14)
    assert explorer.mask_size.min == 0 and explorer.mask_size.max == 28 and explorer.mask_size.value == 15
    assert explorer.effective_mask_size() == 15 and "nearest" not in explorer.metrics_html.value
    assert explorer.chain_length.value == T == explorer.num_iterations and explorer.chain_length.disabled
    assert list(explorer.labelled_size.options) == list(SIZES) and explorer.labelled_size.value == 60_000
    assert list(explorer.model.options) == ["cnn_mnist", "fcnn"]
    assert explorer.model.value == "fcnn"  # the model with the most stored cells
    assert list(explorer.estimator.options) == ["U_o", "U_s"] and explorer.estimator.value == "U_o"
    assert explorer.widget.children  # the container to display
    assert "application/vnd.jupyter.widget-view+json" in explorer._repr_mimebundle_()


def test_rate_label_and_displayed_images_follow_the_slider(explorer):
    k = explorer.examples.shape[0]
    for m in (0, 5, 14, 28):
        explorer.mask_size.value = m
        assert f"m = {m}" in explorer.rate_label.value
        assert f"{m * m / 784:.3f}" in explorer.rate_label.value
        assert int((explorer.masked_images == 0).sum()) == k * m * m  # the images hold no zeros before masking
        assert torch.equal(explorer.masked_images, apply_square_mask(explorer.examples, m, seed=0))
    assert "0.287" in MaskingExplorer(synthetic_results(), images=synthetic_images(), num_examples=4).rate_label.value
    nothing = MaskingExplorer(pd.DataFrame(), images=synthetic_images(), num_examples=4)
    assert nothing.mask_size.value == 14 and "0.250" in nothing.rate_label.value  # Figure 3's m without results
    again = MaskingExplorer(synthetic_results(), images=synthetic_images(), num_examples=4, seed=0)
    assert torch.equal(again.examples, explorer.examples)  # the same images every time


def test_metrics_show_the_selected_cell(explorer):
    explorer.mask_size.value = 10
    row = explorer.selected_row()
    assert row is not None and (row.model, row.labelled_size, row.mask_size, row.estimator) == (
        "fcnn", 60_000, 10, "U_o")
    html = explorer.metrics_html.value
    for value in ("0.2000", "0.2310", "0.0310", "0.0370"):  # teacher NLL, student NLL, gap, MAE of that cell
        assert value in html
    assert "nearest" not in html
    assert explorer.last_highlight == {"masking_rate": pytest.approx(100 / 784), "labelled_size": 60_000}

    explorer.labelled_size.value = 10_000
    assert "0.3000" in explorer.metrics_html.value and explorer.selected_row().labelled_size == 10_000
    explorer.estimator.value = "U_s"
    html = explorer.metrics_html.value
    assert explorer.selected_row().estimator == "U_s"
    assert "0.0320" in html and "0.0390" in html and "U_s" in html


def test_slider_snaps_to_the_nearest_stored_mask_size_and_says_so(explorer):
    explorer.mask_size.value = 14  # stored: 0, 5, 10, 15
    assert explorer.effective_mask_size() == 15 and explorer.selected_row().mask_size == 15
    html = explorer.metrics_html.value
    assert "no stored run at m=14" in html and "m=15" in html and "0.287" in html
    assert explorer.last_highlight["masking_rate"] == pytest.approx(225 / 784)
    explorer.mask_size.value = 28
    assert explorer.selected_row().mask_size == 15
    explorer.mask_size.value = 3
    assert explorer.selected_row().mask_size == 5


def test_missing_cell_gives_a_message_not_an_error(explorer):
    explorer.model.value = "cnn_mnist"
    explorer.labelled_size.value = 10_000
    explorer.mask_size.value = 10
    assert explorer.selected_row() is None and explorer.last_highlight is None
    assert "no stored run for m=10, N=10000" in explorer.metrics_html.value
    explorer.labelled_size.value = 60_000  # only m = 0 stored for cnn_mnist
    assert explorer.selected_row().mask_size == 0 and "nearest" in explorer.metrics_html.value


def test_empty_results_still_show_images(tmp_path):
    ex = MaskingExplorer(pd.DataFrame(), images=synthetic_images(), num_examples=3)
    assert ex.labelled_size.disabled and ex.labelled_size.value is None
    assert "no stored runs" in ex.labelled_size.options[0][0]
    assert ex.selected_row() is None and "No Experiment 2 results stored yet" in ex.metrics_html.value
    ex.mask_size.value = 6
    ex.estimator.value = "U_s"
    assert int((ex.masked_images == 0).sum()) == 3 * 36
    store = MaskingExplorer.from_store(tmp_path / "nothing_here", images=synthetic_images(), num_examples=2)
    assert "nothing_here" in store.metrics_html.value and store.selected_row() is None


def _other_chains() -> pd.DataFrame:
    """Chains of the same store that are not Experiment 1-2 chains, or not of T: an Experiment 3
    search chain (students of other widths), the learning-rate schedule check (predictive students
    only), an Experiment 4 chain (C+1 and EnD2 students), a Fashion-MNIST chain, and an
    Experiment 2 chain of another length (T = 2,000) at a cell that is stored with T too."""
    base = synthetic_results()
    one = base[base["run_key"] == "fcnn-60000-5"]
    search = one.assign(run_key="search", teacher_nll=9.0)
    search = pd.concat([search, search.assign(k1=2.0, student_arch="fcnn")])
    lr_check = one[one["target"] == "predictive"].assign(run_key="lr-check", teacher_nll=9.0, nll_gap=9.0)
    exp4 = one.assign(run_key="exp4", teacher_nll=9.0, target=["predictive+entropy", "endd"] * 2)
    fashion = one.assign(run_key="fashion", dataset="fashion_mnist", teacher_nll=9.0)
    short = one.assign(run_key="short", num_iterations=2_000, teacher_nll=0.7)
    return pd.concat([search, lr_check, exp4, fashion, short], ignore_index=True)


def _write_store(root, summary: pd.DataFrame, code: str | None = None) -> ResultsStore:
    """One "chain" entry per run_key, holding the chain's summary table (as run_chains writes it:
    without the run_key column; the store's entry key names the chain), made by ``code`` (default:
    the current chain code, whose entries the explorer reads)."""
    code = numerics_code("chain") if code is None else code
    store = ResultsStore(root)
    for key, rows in summary.groupby("run_key"):
        table = rows.drop(columns="run_key")
        _, status = store.cached("chain", {"chain": key}, code, lambda e: e.write_table("summary", table))
        assert status == Status.RAN
    return store


def test_experiment12_rows_keep_whole_experiment12_chains_only():
    rows = experiment12_rows(pd.concat([synthetic_results(), _other_chains()], ignore_index=True))
    assert set(rows["run_key"]) == set(synthetic_results()["run_key"]) | {"short"}
    assert (rows["teacher_nll"] < 9).all() and set(rows["target"]) == {"predictive", "entropy"}
    assert chain_lengths(rows) == {2_000: 1, T: len(SIZES) * len(MASKS) + 1}
    # the quickstart's chain (notebook 00): both targets, one estimator each, same size and mask as a cell
    one = synthetic_results()[lambda d: d["run_key"] == "fcnn-60000-0"]
    quick = one[(one["target"] == "predictive") == (one["estimator"] == "U_s")].assign(run_key="quick", teacher_nll=9.)
    assert len(quick) == 2 and "quick" not in set(experiment12_rows(pd.concat([one, quick]))["run_key"])
    # without a chain column the same tests apply row by row
    loose = experiment12_rows(_other_chains().drop(columns="run_key"))
    assert set(loose["teacher_nll"]) == {0.7, 9.0} and len(loose) == 4 + 4 + 2  # short, search K=1, lr check
    assert experiment12_rows(pd.DataFrame()).empty
    with pytest.raises(TypeError):
        experiment12_rows([{"model": "fcnn"}])


def test_from_store_reads_the_chain_entries_of_experiments_1_2(tmp_path):
    _write_store(tmp_path, pd.concat([synthetic_results(), _other_chains()], ignore_index=True))
    ex = MaskingExplorer.from_store(tmp_path, images=synthetic_images(), num_examples=2)
    assert ex.source == str(tmp_path) and ex.num_iterations == T  # the most common chain length
    assert [v for _, v in ex.chain_length.options] == [2_000, T] and not ex.chain_length.disabled
    assert len(ex.table) == len(SIZES) * len(MASKS) * 2 + 2 and (ex.table["n_runs"] == 1).all()
    assert ex.table["teacher_nll"].max() < 9  # no other experiment's or data set's chain came in
    ex.mask_size.value = 5
    assert ex.selected_row().teacher_nll == pytest.approx(0.15)
    html = ex.metrics_html.value
    assert "0.1500" in html and "5,000" in html
    header, values = ex.status_text.splitlines()[-2:]
    assert "T=5000" in repr(ex) and header.endswith("chain length T") and values.endswith("| 5,000")
    assert ex.stored_masking_rates() == [(m, pytest.approx(m * m / 784)) for m in MASKS]

    ex.chain_length.value = 2_000  # the other profile: one chain, fcnn at N = 60000, m = 5
    assert len(ex.table) == 2 and ex.selected_row().teacher_nll == pytest.approx(0.7)
    assert (ex.model.value, ex.labelled_size.value) == ("fcnn", 60_000) and list(ex.model.options) == ["fcnn"]
    ex.mask_size.value = 20
    assert ex.selected_row().mask_size == 5 and "nearest" in ex.metrics_html.value
    ex.chain_length.value = T  # back: the choices made are kept where they are stored
    assert (ex.model.value, ex.labelled_size.value, ex.selected_row().mask_size) == ("fcnn", 60_000, 15)

    short = MaskingExplorer.from_store(tmp_path, num_iterations=2_000, images=synthetic_images(), num_examples=2)
    assert short.num_iterations == 2_000 and short.mask_size.value == 5  # opens where a run is stored
    assert "chain length T = 2,000, 5,000 (T = 2,000 shown)" in short.shown_text
    # a profile's grid of one length (notebook 04 passes notebook 02's T): only those chains, whatever else is stored
    one = MaskingExplorer.from_store(tmp_path, grid={"num_iterations": [2_000]}, images=synthetic_images(),
                                     num_examples=2)
    assert one.num_iterations == 2_000 and "chain length T = 2,000;" in one.shown_text
    with pytest.raises(ValueError, match=r"num_iterations=1234.*stored: \[2000, 5000\]"):
        MaskingExplorer.from_store(tmp_path, num_iterations=1234, images=synthetic_images(), num_examples=2)


def test_from_store_shows_only_the_current_codes_chains_of_the_grid_and_says_which(tmp_path):
    """An older run's chains (here m = 20, made by other code) and chains outside the notebook's grid
    (another seed of one cell) are not shown, so the explorer's numbers are those of the figures'
    cells; the explorer says which chains it shows."""
    current = synthetic_results().assign(seed=0)
    older = current[current["mask_size"] == 15].assign(mask_size=20, masking_rate=400 / 784, teacher_nll=9.0,
                                                       run_key=lambda d: d["run_key"] + "-old")
    seed1 = current[current["run_key"] == "fcnn-60000-0"].assign(seed=1, run_key="seed1", teacher_nll=5.0)
    store = _write_store(tmp_path, pd.concat([current, seed1], ignore_index=True))
    _write_store(tmp_path, older, code="older-code")
    ex = MaskingExplorer.from_store(tmp_path, grid={"seed": [0]}, images=synthetic_images(), num_examples=2)
    assert [m for m, _ in ex.stored_masking_rates()] == list(MASKS) and ex.table["teacher_nll"].max() < 5
    assert ex.shown_text == ("Shown: 9 stored Experiment 1-2 chains, masks m = 0, 5, 10, 15; labelled N = 10,000, "
                             "60,000; chain length T = 5,000; seeds 0.")
    # the figure's cells: the current code's chains of the grid, collapsed as notebook 02 collapses its grid
    figure_cells = experiment2_cells(experiment12_rows(store.load("summary", "chain", code=numerics_code("chain"))
                                                       .query("seed == 0").assign(run_key=lambda d: d["entry"])))
    shown = ex.table.set_index(["model", "labelled_size", "mask_size", "estimator"])["teacher_nll"]
    assert shown.sort_index().equals(
        figure_cells.set_index(["model", "labelled_size", "mask_size", "estimator"])["teacher_nll"].sort_index())
    everything = MaskingExplorer.from_store(tmp_path, current_only=False, images=synthetic_images(), num_examples=2)
    assert 20 in [m for m, _ in everything.stored_masking_rates()] and "seeds 0, 1" in everything.shown_text
    with pytest.raises(ValueError, match="no column 'nope'"):
        MaskingExplorer.from_store(tmp_path, grid={"nope": [1]}, images=synthetic_images(), num_examples=2)


def test_from_store_with_other_chains_only_says_so(tmp_path):
    _write_store(tmp_path, _other_chains()[lambda d: d["run_key"] != "short"])
    ex = MaskingExplorer.from_store(tmp_path, images=synthetic_images(), num_examples=2)
    assert ex.table.empty and ex.selected_row() is None and ex.num_iterations is None
    assert ex.stored_masking_rates() == []
    message = ex.metrics_html.value
    assert "No Experiment 2 results stored yet" in message and "other experiments" in message


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="num_examples"):
        MaskingExplorer(pd.DataFrame(), images=synthetic_images(3), num_examples=4)
    with pytest.raises(ValueError, match="num_examples"):
        MaskingExplorer(pd.DataFrame(), images=synthetic_images(3), num_examples=0)
    with pytest.raises(ValueError, match="shape"):
        MaskingExplorer(pd.DataFrame(), images=torch.zeros(3, 28), num_examples=1)
    with pytest.raises(ValueError, match="mask_size"):
        MaskingExplorer(synthetic_results().drop(columns="mask_size"), images=synthetic_images())


# ----------------------------------------------------------------------------- static image
def _png_size(png: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(png)) as im:
        assert im.format == "PNG"
        return im.size


class _Displays:
    """Stands in for IPython's ``display``: records what is displayed, and hands out display
    handles that record their updates."""

    class Handle:
        def __init__(self) -> None:
            self.updates: list[dict] = []

        def update(self, obj, raw=False):
            assert raw
            self.updates.append(obj)

    def __init__(self) -> None:
        self.calls: list[tuple[object, dict]] = []
        self.handles: list[_Displays.Handle] = []

    def __call__(self, obj, raw=False, display_id=None, **kwargs):
        self.calls.append((obj, dict(raw=raw, display_id=display_id)))
        if display_id:
            self.handles.append(self.Handle())
            return self.handles[-1]
        return None


def test_masking_opens_on_a_stored_run():
    # stored mask sizes as in the committed store's Experiment 1-2 chains: 0, 15, 20, 25
    res = synthetic_results()
    at15 = res[res.mask_size == 15]
    more = [at15.assign(mask_size=m, masking_rate=m * m / 784, run_key=at15.run_key + f"-{m}") for m in (20, 25)]
    res = pd.concat([res[res.mask_size.isin([0, 15])], *more])
    ex = MaskingExplorer(res, images=synthetic_images(), num_examples=3)
    row = ex.selected_row()
    assert ex.mask_size.value == 15 and row is not None and row.mask_size == ex.mask_size.value
    assert "nearest" not in ex.metrics_html.value and "no stored run" not in ex.metrics_html.value


def test_masking_static_image_follows_the_view_and_only_the_opening_view_is_written(tmp_path):
    figures = tmp_path / "figures"
    ex = MaskingExplorer(synthetic_results(), images=synthetic_images(), num_examples=4, figures_dir=figures,
                         tag="quick")
    path = figures / "explorer_masking_quick.png"
    assert ex.snapshot_file == path and path.read_bytes() == ex.snapshot_png
    opening = ex.snapshot_png
    width, height = _png_size(ex.snapshot_png)
    assert width > 600 and height > 300  # text, digits and curves
    assert ex.images_png and ex.curves_png
    assert ex.save_button in ex.widget.children  # a figures_dir to save to: the button is there
    seen = [ex.snapshot_png]
    for change in (lambda: setattr(ex.mask_size, "value", 5),  # another stored cell
                   lambda: setattr(ex.mask_size, "value", 6),  # snaps to m = 5: only the digits change
                   lambda: setattr(ex.estimator, "value", "U_s"),
                   lambda: setattr(ex.labelled_size, "value", 10_000),
                   lambda: setattr(ex.model, "value", "cnn_mnist")):
        count = ex.snapshot_count
        change()
        assert ex.snapshot_count == count + 1  # one new image per change
        assert ex.snapshot_png not in seen, "the static image did not change with the view"
        assert path.read_bytes() == opening, "exploring wrote the file: only save_view may"
        seen.append(ex.snapshot_png)
    assert "saved as" not in ex._snapshot_bundle()["text/plain"]  # the view shown is not the file's
    ex.save_button.click()  # the user asks: the current view is written
    assert path.read_bytes() == ex.snapshot_png and "saved as" in ex._snapshot_bundle()["text/plain"]
    assert not list(figures.glob("*.tmp")) and sorted(p.name for p in figures.iterdir()) == [path.name]
    # cnn_mnist has no curve at N = 10000 to ring, but the image still has its parts
    assert _png_size(ex.snapshot_png)[1] > 200
    # without figures_dir nothing is written, and there is nothing to save to
    plain = MaskingExplorer(synthetic_results(), images=synthetic_images(), num_examples=2)
    assert plain.snapshot_png and plain.snapshot_file is None and plain.figures_dir is None
    assert plain.save_button not in plain.widget.children
    with pytest.raises(ValueError, match="figures_dir"):
        plain.save_view()


def test_masking_from_store_writes_the_opening_view(tmp_path):
    _write_store(tmp_path / "results", synthetic_results())
    ex = MaskingExplorer.from_store(tmp_path / "results", images=synthetic_images(), num_examples=2,
                                    figures_dir=tmp_path / "figures")
    assert (tmp_path / "figures" / "explorer_masking_default.png").read_bytes() == ex.snapshot_png
    empty = MaskingExplorer.from_store(tmp_path / "none", images=synthetic_images(), num_examples=2,
                                       figures_dir=tmp_path / "empty")
    assert empty.curves_png is None and _png_size(empty.snapshot_png)  # digits and the message only
    assert (tmp_path / "empty" / "explorer_masking_default.png").exists()


def test_masking_display_shows_the_widget_then_the_static_image_updated_in_place(explorer, monkeypatch):
    shown = _Displays()
    monkeypatch.setattr(snapshot_module, "display", shown)
    explorer._ipython_display_()  # what IPython calls for the last expression of a cell
    (widget, w_opts), (image, i_opts) = shown.calls
    assert "application/vnd.jupyter.widget-view+json" in widget and widget["text/plain"] == repr(explorer)
    assert i_opts == {"raw": True, "display_id": True}
    assert base64.b64decode(image["image/png"]) == explorer.snapshot_png
    assert "static image" in image["text/plain"] and "m = 15" in image["text/plain"]
    explorer.mask_size.value = 10
    (handle,) = shown.handles
    assert len(handle.updates) == 1
    assert base64.b64decode(handle.updates[-1]["image/png"]) == explorer.snapshot_png
    assert "m = 10" in handle.updates[-1]["text/plain"]


def test_redraws_do_not_leak_figures(explorer):
    before = set(plt.get_fignums())
    for m in (2, 17):
        explorer.mask_size.value = m
    explorer.estimator.value = "U_s"
    explorer.model.value = "cnn_mnist"
    assert set(plt.get_fignums()) == before


# ============================================================================= ParetoExplorer


def synthetic_search() -> pd.DataFrame:
    """SYNTHETIC Experiment 3 search tables (made-up numbers): cnn_mnist with predictive and
    entropy students, fcnn with predictive students only. Per model and target: a teacher row, a
    2 x 2 exhaustive grid (K1 x K2 in {1, 2}; K = 1 x 1 is the base) and two group l1/l2
    students in three stages each. NLL falls with cost; group students beat the grid."""
    rows = []
    for model, targets in (("cnn_mnist", ("predictive", "entropy")), ("fcnn", ("predictive",))):
        common = dict(model=model, dataset="mnist", labelled_size=60_000, mask_size=15, masking_rate=225 / 784,
                      teacher_nll=0.3, teacher_accuracy=0.9, teacher_samples=20)
        rows.append({**common, "method": "teacher", "stage": "teacher", "student": "teacher", "target": "predictive",
                     "is_base": False, "architecture": "T", "widths": "10-20-80-10", "params": 30_000,
                     "flops": 800_000, "latency_ms": 1.0, "student_nll": 0.3, "student_accuracy": 0.9})
        for target in targets:
            metric = "student_nll" if target == "predictive" else "entropy_mae"
            for k1, k2, params, flops, value in ((1, 1, 30_000, 800_000, 0.50), (1, 2, 55_000, 850_000, 0.45),
                                                 (2, 1, 65_000, 2_900_000, 0.42), (2, 2, 117_000, 3_000_000, 0.40)):
                rows.append({**common, "method": "exhaustive", "stage": "distilled", "target": target,
                             "student": f"{target}-K{k1}x{k2}", "k1": k1, "k2": k2, "reg_weight": 0.0,
                             "is_base": k1 == 1 and k2 == 1, "architecture": f"arch-{k1}x{k2}",
                             "widths": f"{10 * k1}-{20 * k1}-{80 * k2}-10", "params": params, "flops": flops,
                             "latency_ms": flops / 1e6, metric: value,
                             "student_accuracy": 1 - value / 3 if target == "predictive" else math.nan})
            for lam, params, flops, value in ((1e-4, 90_000, 2_000_000, 0.35), (1e-2, 20_000, 400_000, 0.52)):
                for stage, extra in (("distilled", 0.05), ("pruned", 0.1), ("fine-tuned", 0.0)):
                    full = stage == "distilled"
                    rows.append({**common, "method": "group_lasso", "stage": stage, "target": target,
                                 "student": f"group_lasso-{target}-lambda{lam:g}", "k1": 2, "k2": 2,
                                 "reg_weight": lam, "is_base": False, "units_removed": 0 if full else 50,
                                 "architecture": "arch-2x2" if full else f"pruned-{lam:g}",
                                 "widths": "20-40-160-10" if full else "7-9-33-10",
                                 "params": 117_000 if full else params, "flops": 3_000_000 if full else flops,
                                 "latency_ms": 2.0, metric: value + extra,
                                 "student_accuracy": 1 - (value + extra) / 3 if target == "predictive" else math.nan})
    return pd.DataFrame(rows)


@pytest.fixture
def pareto() -> ParetoExplorer:
    return ParetoExplorer(synthetic_search())


def test_pareto_controls_reflect_the_table(pareto):
    assert list(pareto.model.options) == ["cnn_mnist", "fcnn"] and pareto.model.value == "cnn_mnist"
    assert [v for _, v in pareto.metric.options] == ["student_nll", "student_accuracy", "entropy_mae"]
    assert [v for _, v in pareto.cost.options] == ["flops", "params", "latency_ms"] and pareto.cost.value == "flops"
    assert pareto.method.value == "both"
    assert "application/vnd.jupyter.widget-view+json" in pareto._repr_mimebundle_()
    # shown: 4 exhaustive + 2 fine-tuned group students of the predictive target, cheapest first
    shown = pareto.visible()
    assert len(shown) == 6 and shown["flops"].is_monotonic_increasing
    assert set(shown["stage"]) == {"distilled", "fine-tuned"} and set(shown["target"]) == {"predictive"}
    # default selection: the best student on the frontier (lambda 1e-4, NLL 0.35)
    assert pareto.point.value == "group_lasso-predictive-lambda0.0001"
    assert pareto.frontier()["student"].tolist() == pareto_front(shown, "student_nll", "flops")["student"].tolist()


def test_pareto_selecting_a_point_shows_its_architecture_and_numbers(pareto):
    pareto.select("predictive-K2x1")
    row = pareto.selected_row()
    assert row["k1"] == 2 and row["k2"] == 1
    text = pareto.status_text
    for piece in ("arch-2x1", "20-40-80-10", "65k", "2.9M", "0.4200", "exhaustive search", "K1 x K2: 2 x 1",
                  "vs base: parameters: 2.17x", "vs base: FLOPs: 3.62x", "on the frontier: no"):
        assert piece in text, piece
    pareto.select("predictive-K1x1")
    assert "this is the base student" in pareto.status_text
    pareto.select("group_lasso-predictive-lambda0.01")
    text = pareto.status_text
    assert "lambda: 0.01" in text and "pruned-0.01" in text and "on the frontier: yes" in text
    with pytest.raises(ValueError, match="is not shown"):
        pareto.select("teacher")


def test_pareto_hover_position_selects_the_nearest_point(pareto):
    assert pareto.select_nearest(850_000, 0.46) == "predictive-K1x2"
    assert pareto.point.value == "predictive-K1x2"
    assert pareto.select_nearest(3.1e6, 0.39) == "predictive-K2x2"


def test_pareto_metric_cost_and_method_controls(pareto):
    pareto.method.value = "exhaustive"
    assert set(pareto.visible()["method"]) == {"exhaustive"}
    assert pareto.point.value == "predictive-K2x2"  # the group student is hidden: best exhaustive one
    pareto.cost.value = "params"
    assert pareto.visible()["params"].is_monotonic_increasing and "parameters" in pareto.details_html.value
    pareto.metric.value = "entropy_mae"
    assert set(pareto.visible()["target"]) == {"entropy"}
    assert "expected-entropy MAE" in pareto.status_text
    pareto.method.value = "group_lasso"
    assert pareto.visible()["student"].tolist() == ["group_lasso-entropy-lambda0.01",
                                                    "group_lasso-entropy-lambda0.0001"]
    pareto.metric.value = "student_accuracy"
    assert pareto.selected_row()["student_accuracy"] == pytest.approx(1 - 0.35 / 3)
    pareto.model.value = "fcnn"  # no entropy students: the metric list shrinks
    assert [v for _, v in pareto.metric.options] == ["student_nll", "student_accuracy"]
    assert pareto.metric.value == "student_accuracy" and set(pareto.visible()["model"]) == {"fcnn"}


def test_pareto_empty_and_from_store(tmp_path, monkeypatch):
    empty = ParetoExplorer(pd.DataFrame())
    assert empty.model.disabled and empty.selected_row() is None and empty.visible().empty
    assert "No Experiment 3 search stored yet" in empty.details_html.value
    assert empty.select_nearest(1.0, 1.0) is None
    absent = ParetoExplorer.from_store(tmp_path / "nothing")  # the real loader on an absent store
    assert "nothing" in absent.details_html.value and absent.visible().empty
    asked = []

    def load(store, current_only, entries):  # stands in for the loader: the explorer must hand it the store
        asked.append(store)
        assert current_only and entries is None  # by default: the current code's searches, all of them
        return synthetic_search()

    monkeypatch.setattr(pareto_module, "stored_searches", load)
    stored = ParetoExplorer.from_store(tmp_path)
    assert len(asked) == 1 and isinstance(asked[0], ResultsStore) and asked[0].root == tmp_path
    assert list(stored.model.options) == ["cnn_mnist", "fcnn"] and len(stored.visible()) == 6
    assert stored.point.value == "group_lasso-predictive-lambda0.0001" and stored.source == str(tmp_path)


def test_pareto_explorer_frontier_table_and_figure_read_the_same_current_search(tmp_path):
    """Two searches of one setting, an older code's and the current one: the explorer shows only the
    current one, and its best student is the frontier table's and the figure's (notebook 05)."""
    store = ResultsStore(tmp_path)
    current = synthetic_search()
    older = current.assign(student_nll=current["student_nll"] - 0.1)  # better-looking numbers of an older run
    store.cached(SEARCH_KIND, {"chain": "one setting"}, "older-code", lambda e: e.write_table(SEARCH_TABLE, older))
    entry, _ = store.cached(SEARCH_KIND, {"chain": "one setting"}, numerics_code(SEARCH_KIND),
                            lambda e: e.write_table(SEARCH_TABLE, current))
    for ex in (ParetoExplorer.from_store(tmp_path), ParetoExplorer.from_store(tmp_path, entries=[entry.key])):
        assert set(ex.table["entry"]) == {entry.key}
        assert not ex.table.duplicated(["model", "target", "student", "stage"]).any()
        for model in ("cnn_mnist", "fcnn"):
            ex.model.value = model
            table = entry.table(SEARCH_TABLE).query("model == @model")  # what the notebook's tables read
            front = frontier_table(table, "student_nll", "flops")
            best = front[front["front"] == "both"].sort_values("student_nll").iloc[0]
            assert ex.point.value == best["student"]
            assert ex.selected_row()["student_nll"] == pytest.approx(best["student_nll"])
            fig = plot_pareto_figure(table, "student_nll")
            drawn = [y for ax in fig.axes for line in ax.lines if line.get_label() == "S: Pareto frontier"
                     for y in line.get_ydata()]
            plt.close(fig)
            assert min(drawn) == pytest.approx(best["student_nll"])
    # both runs: one frontier would mix two chains' students (labels twice, the base of one): refused, both named
    with pytest.raises(ValueError, match=r"holds 2 searches of cnn_mnist's \w+ students \(.*pass entries="):
        ParetoExplorer.from_store(tmp_path, current_only=False)
    older_entry = next(e for e in store.entries(SEARCH_KIND) if e.key != entry.key)
    assert set(ParetoExplorer.from_store(tmp_path, current_only=False, entries=[older_entry.key]).table["entry"]) \
        == {older_entry.key}


def test_pareto_bad_tables_and_no_figure_leaks(pareto):
    with pytest.raises(ValueError, match=r"lacks the column\(s\) \['stage'\]"):
        ParetoExplorer(synthetic_search().drop(columns="stage"))
    with pytest.raises(TypeError):
        ParetoExplorer([1, 2])
    before = set(plt.get_fignums())
    pareto.cost.value = "latency_ms"
    pareto.method.value = "exhaustive"
    pareto.select("predictive-K1x2")
    assert set(plt.get_fignums()) == before



# ----------------------------------------------------------------------------- ParetoExplorer: static image


def test_pareto_static_image_follows_the_view_and_is_written_per_model_when_saved(tmp_path):
    figures = tmp_path / "figures"
    pareto = ParetoExplorer(synthetic_search(), figures_dir=figures)
    cnn = figures / "explorer_pareto_cnn_mnist_default.png"
    assert pareto.snapshot_file == cnn and cnn.read_bytes() == pareto.snapshot_png and pareto.plot_png
    opening = pareto.snapshot_png
    seen = [pareto.snapshot_png]
    for control, value in ((pareto.cost, "params"), (pareto.method, "exhaustive"), (pareto.metric, "entropy_mae"),
                           (pareto.point, "entropy-K1x2")):
        control.value = value
        assert pareto.snapshot_png not in seen, f"the static image did not change with {control.description}"
        assert cnn.read_bytes() == opening  # exploring writes nothing
        seen.append(pareto.snapshot_png)
    assert pareto.save_view() == cnn and cnn.read_bytes() == pareto.snapshot_png
    before = cnn.read_bytes()
    pareto.model.value = "fcnn"
    fcnn = figures / "explorer_pareto_fcnn_default.png"
    assert not fcnn.exists()  # another model viewed, not saved: no file
    assert pareto.save_view() == fcnn and fcnn.read_bytes() == pareto.snapshot_png != before
    assert cnn.read_bytes() == before  # the other model's file keeps its saved view
    assert sorted(p.name for p in figures.iterdir()) == [cnn.name, fcnn.name]


def test_a_file_showing_the_same_image_is_kept(tmp_path):
    def png(shift: int) -> bytes:
        pixels = np.full((200, 200, 3), 255, dtype=np.uint8)
        pixels[90:110, 10 + shift:190 + shift] = 0  # a bar, moved by `shift` pixels
        buf = io.BytesIO()
        Image.fromarray(pixels).save(buf, format="PNG")
        return buf.getvalue()

    path = snapshot_module.write_png(png(0), tmp_path / "view.png")
    stamp = path.stat().st_mtime_ns
    assert same_image(png(0), path)
    # the same bar a pixel over: 40 of 40,000 pixels differ (0.1%): the same image within the tolerance, kept
    assert same_image(png(1), path)
    snapshot_module.write_png(png(1), path)
    assert path.read_bytes() == png(0) and path.stat().st_mtime_ns == stamp
    # five pixels over: 200 pixels differ (0.5%): another image, written
    assert not same_image(png(5), path)
    snapshot_module.write_png(png(5), path)
    assert path.read_bytes() == png(5)


def test_pareto_from_store_and_display(tmp_path, monkeypatch):
    monkeypatch.setattr(pareto_module, "stored_searches", lambda store, current_only, entries: synthetic_search())
    pareto = ParetoExplorer.from_store(tmp_path, figures_dir=tmp_path / "figs", tag="paper")
    path = tmp_path / "figs" / "explorer_pareto_cnn_mnist_paper.png"
    assert path.read_bytes() == pareto.snapshot_png
    shown = _Displays()
    monkeypatch.setattr(snapshot_module, "display", shown)
    pareto._ipython_display_()
    (widget, _), (image, opts) = shown.calls
    assert "application/vnd.jupyter.widget-view+json" in widget and opts["display_id"] is True
    assert base64.b64decode(image["image/png"]) == pareto.snapshot_png
    opening = path.read_bytes()
    pareto.cost.value = "latency_ms"
    update = shown.handles[0].updates[-1]
    assert base64.b64decode(update["image/png"]) == pareto.snapshot_png  # the view shown follows the widget
    assert path.read_bytes() == opening != pareto.snapshot_png  # the file keeps the opening view until saved
    # an empty store: a text-only image, written without a model in its name
    monkeypatch.setattr(pareto_module, "stored_searches", lambda store, current_only, entries: pd.DataFrame())
    empty = ParetoExplorer.from_store(tmp_path / "nothing", figures_dir=tmp_path / "figs")
    assert empty.plot_png is None and empty.snapshot_file.name == "explorer_pareto_default.png"
    assert _png_size(empty.snapshot_png)


# ----------------------------------------------------------------------------- ParetoExplorer: mouse


def _mouse(explorer, name, student=None, axes_fraction=None, button=1, offset=(0.0, 0.0)):
    """A synthetic matplotlib mouse event on the explorer's current plot, at a student's point (its
    display coordinates, shifted by ``offset`` pixels) or at a position given in axes fractions."""
    fig, ax = explorer.fig, explorer.ax
    fig.canvas.draw()  # as on screen: limits and layout final
    if student is not None:
        row = explorer.visible().set_index("student").loc[student]
        x, y = ax.transData.transform((row[explorer.cost.value], row[explorer.metric.value]))
    else:
        x, y = ax.transAxes.transform(axes_fraction)
    return fig, MouseEvent(name, fig.canvas, x + offset[0], y + offset[1], button=button)


def _empty_spot(explorer):
    """Axes fractions at least 4 pick radii from every shown point."""
    explorer.fig.canvas.draw()
    for fx in (0.5, 0.3, 0.7, 0.2, 0.8):
        for fy in (0.5, 0.3, 0.7, 0.2, 0.8):
            x, y = explorer.ax.transAxes.transform((fx, fy))
            saved, explorer.PICK_RADIUS = explorer.PICK_RADIUS, 4 * ParetoExplorer.PICK_RADIUS
            try:
                if explorer.student_at(x, y) is None:
                    return fx, fy
            finally:
                explorer.PICK_RADIUS = saved
    raise AssertionError("no empty spot on the plot")


def test_pareto_clicking_a_point_selects_it_through_the_connected_handler(pareto):
    assert pareto.fig is not None and pareto.ax in pareto.fig.axes
    assert pareto.fig.canvas.callbacks.callbacks.get("button_press_event")  # connected with mpl_connect
    before = pareto.status_text
    assert "arch-2x1" not in before
    fig, event = _mouse(pareto, "button_press_event", "predictive-K2x1", offset=(3, -2))
    fig.canvas.callbacks.process("button_press_event", event)  # what the backend does on a click
    assert pareto.point.value == "predictive-K2x1"
    text = pareto.status_text
    assert text != before and "arch-2x1" in text and "K1 x K2: 2 x 1" in text and "vs base: FLOPs: 3.62x" in text
    assert pareto.fig is not fig  # static backend: the plot was redrawn as a new image, ringing the choice
    # the right button, a click off the axes and a click on empty space change nothing
    for event in (_mouse(pareto, "button_press_event", "predictive-K1x1", button=3)[1],
                  MouseEvent("button_press_event", pareto.fig.canvas, -50, -50, button=1),
                  _mouse(pareto, "button_press_event", axes_fraction=_empty_spot(pareto))[1]):
        pareto.fig.canvas.callbacks.process("button_press_event", event)
        assert pareto.point.value == "predictive-K2x1"
    # the same in another view: the group l1/l2 panel against parameters
    pareto.method.value = "group_lasso"
    pareto.cost.value = "params"
    fig, event = _mouse(pareto, "button_press_event", "group_lasso-predictive-lambda0.01")
    fig.canvas.callbacks.process("button_press_event", event)
    assert pareto.point.value == "group_lasso-predictive-lambda0.01" and "pruned-0.01" in pareto.status_text


def test_pareto_hovering_a_point_shows_its_architecture_and_numbers(pareto):
    selected = pareto.point.value
    fig, event = _mouse(pareto, "motion_notify_event", "group_lasso-predictive-lambda0.01", button=None)
    fig.canvas.callbacks.process("motion_notify_event", event)
    tip = pareto.hover_annotation
    assert tip is not None and tip.get_visible()
    assert tip.get_text().splitlines() == ["pruned-0.01", "group l1/l2 + pruning", "FLOPs per input (2 x MACs): 400k",
                                           "test NLL: 0.5200"]
    assert pareto.point.value == selected  # hovering does not select
    _, away = _mouse(pareto, "motion_notify_event", axes_fraction=_empty_spot(pareto), button=None)
    fig.canvas.callbacks.process("motion_notify_event", away)
    assert not tip.get_visible()


def test_pareto_live_canvas_is_redrawn_in_place(pareto, monkeypatch):
    # Under ipympl the canvas is a widget; stand in for it: the figure must be kept and redrawn.
    monkeypatch.setattr(pareto_module, "_live_canvas", lambda fig: True)
    before = set(plt.get_fignums())
    pareto._draw_plot()  # from here on the current figure counts as a live canvas
    fig = pareto.fig
    try:
        fig2, event = _mouse(pareto, "button_press_event", "predictive-K1x2")
        assert fig2 is fig
        fig.canvas.callbacks.process("button_press_event", event)
        assert pareto.point.value == "predictive-K1x2" and "arch-1x2" in pareto.status_text
        assert pareto.fig is fig and pareto.ax in fig.axes and len(fig.axes) == 1  # same canvas, redrawn
        rings = [c for c in pareto.ax.collections if c.get_sizes().size and c.get_sizes()[0] == 220]
        assert len(rings) == 1 and tuple(rings[0].get_offsets()[0]) == (850_000, 0.45)
        pareto.metric.value = "entropy_mae"  # a control change redraws the same canvas too
        assert pareto.fig is fig and "expected-entropy MAE" in pareto.ax.get_ylabel()
    finally:
        plt.close(fig)
    assert set(plt.get_fignums()) == before
