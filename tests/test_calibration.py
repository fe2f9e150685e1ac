"""Calibration (gped_kit.core.calibration): the ECE is torchmetrics', its bins give the same number, known
answers on hand-built predictives, a distilled model's prediction calibrates, and the reliability figure."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import dataclasses  # noqa: E402
import math  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from figure_checks import figure_defects  # noqa: E402
from torchmetrics.classification import MulticlassCalibrationError  # noqa: E402

from gped_kit.core.calibration import calibration, calibrations_from_table  # noqa: E402
from gped_kit.core.metrics import ece  # noqa: E402
from gped_kit.core.sgld import SGLDConfig  # noqa: E402
from gped_kit.engine import GPEDConfig, StudentConfig  # noqa: E402
from gped_kit.engine.distilled import Prediction  # noqa: E402
from gped_kit.experiments.calibration import chain_calibration  # noqa: E402
from gped_kit.experiments.chains import ChainTask, run_chains  # noqa: E402
from gped_kit.experiments.store import ResultsStore  # noqa: E402
from gped_kit.plotting.figures import plot_reliability  # noqa: E402


def _random_predictive(n: int = 2000, c: int = 10, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    probs = torch.softmax(3 * torch.randn(n, c, generator=g), dim=1)
    labels = torch.randint(0, c, (n,), generator=g)
    labels[: n // 2] = probs[: n // 2].argmax(1)  # half of them right
    return probs, labels


def test_the_ece_is_torchmetrics_and_its_bins_give_the_same_number():
    probs, labels = _random_predictive()
    for bins in (1, 5, 15, 40):
        c = calibration(probs, labels, bins)
        expected = MulticlassCalibrationError(num_classes=10, n_bins=bins, norm="l1")(probs, labels).item()
        assert c.ece == pytest.approx(expected, abs=1e-6) and c.binned_ece == pytest.approx(c.ece, abs=1e-6)
        assert int(c.bins["count"].sum()) == len(labels) and (c.bins["count"] > 0).all()


def test_known_answers():
    # always right with confidence 1: perfectly calibrated, one slot (confidence exactly 1)
    labels = torch.arange(4) % 2
    sure = torch.nn.functional.one_hot(labels, 2).double()
    c = calibration(sure, labels)
    assert c.ece == pytest.approx(0.0) and c.bins[["lower", "upper", "count"]].values.tolist() == [[1.0, 1.0, 4]]
    # confidence 0.9 on every input, right on half: ECE = |0.5 - 0.9| = 0.4, in the bin [0.8667, 0.9333)
    probs = torch.tensor([[0.9, 0.1]] * 4, dtype=torch.float64)
    c = calibration(probs, torch.tensor([0, 0, 1, 1]))
    assert c.ece == pytest.approx(0.4) and c.bins["accuracy"].tolist() == [0.5]
    assert c.bins["lower"].iloc[0] == pytest.approx(13 / 15) and c.bins["confidence"].iloc[0] == pytest.approx(0.9)


def test_round_off_outside_the_unit_interval_is_clipped_not_read_as_logits():
    """Probabilities a few ulp outside [0, 1] (the difference of two float32 running sums gives them) are
    probabilities: torchmetrics alone reads such a tensor as logits and applies a softmax to it, which put the
    stored ``teacher_recent_ece`` at 0.67-0.76 beside a ``teacher_ece`` of 0.01 (issue 52)."""
    probs, labels = _random_predictive(2000, 10)
    probs = probs.float()
    exact = ece(probs, labels)
    nudged = probs.clone()
    eps = torch.finfo(torch.float32).eps
    nudged[0] = 0.0
    nudged[0, (labels[0] + 1) % 10], nudged[0, labels[0]] = -3 * eps, 1 + 3 * eps  # a few ulp below 0 and above 1
    nudged[1] = 0.0
    nudged[1, labels[1]] = 1 + 2 * eps  # a few ulp above 1
    nudged[2] = nudged[2] * (1 + 1e-6)  # a row summing to 1 + 1e-6
    clipped = nudged.clamp(0, 1)
    assert ece(nudged, labels) == ece(clipped, labels)
    assert ece(nudged, labels) == pytest.approx(exact, abs=2e-3)  # rows 0-2 moved a little, not the metric
    # what torchmetrics does with the same tensor unguarded: a softmax, and a far larger "ECE"
    raw = MulticlassCalibrationError(num_classes=10, n_bins=15, norm="l1")(nudged, labels)
    assert float(raw) > exact + 0.1
    assert calibration(nudged, labels).ece == pytest.approx(ece(nudged, labels), abs=1e-6)


def test_values_far_outside_the_unit_interval_are_refused():
    probs, labels = _random_predictive(50, 4)
    with pytest.raises(ValueError, match="outside \\[0, 1\\] by more than .*logits"):
        ece(torch.log(probs), labels)
    with pytest.raises(ValueError, match="sums to 1"):
        ece(probs * 0.9, labels)


def test_bad_input_is_named():
    probs, labels = _random_predictive(10, 3)
    with pytest.raises(ValueError, match="probs must be \\(N, C\\)"):
        calibration(probs[0], labels)
    with pytest.raises(ValueError, match="not probabilities|not a predictive distribution"):
        calibration(probs * 2, labels)
    with pytest.raises(ValueError, match="labels must lie in 0 .. 2"):
        calibration(probs, labels + 3)
    with pytest.raises(ValueError, match="num_bins=0"):
        calibration(probs, labels, 0)
    with pytest.raises(ValueError, match="needs class probabilities; this prediction has none"):
        Prediction(output=torch.zeros(3, 1)).calibration(labels[:3])


def test_a_prediction_calibrates_and_the_reliability_figure_is_clean():
    probs, labels = _random_predictive(600, 10, seed=1)
    from_prediction = Prediction(output=probs.log(), probabilities=probs).calibration(labels)
    assert from_prediction.ece == calibration(probs, labels).ece
    sharper = torch.softmax(3 * probs.log(), dim=1)
    fig = plot_reliability({"Ensemble": from_prediction, "GPED": calibration(sharper, labels)}, "Reliability")
    try:
        assert figure_defects(fig) == []
    finally:
        plt.close(fig)


def test_the_reliability_figure_shows_bins_of_few_inputs_and_names_every_colour():
    """Issue 56: a bin of a handful of inputs (its share correct 1.0 on 2 inputs) is drawn as an outline and its
    count shows on the log-scaled, shared count axis; the slot of confidences of exactly 1 is drawn merged into
    the last bin; the legend's "share correct" swatch shows each panel's colour, the gap is hatched, unfilled."""
    probs, labels = _random_predictive(600, 10, seed=1)
    c = calibration(probs, labels)
    few = pd.DataFrame({"lower": [0.2, 14 / 15, 1.0], "upper": [4 / 15, 1.0, 1.0], "count": [2, 300, 100],
                        "confidence": [0.23, 0.96, 1.0], "accuracy": [1.0, 0.95, 1.0]})
    shown = {"Ensemble": c, "GPED": dataclasses.replace(c, bins=few)}
    fig = plot_reliability(shown, "Reliability")
    try:
        assert figure_defects(fig) == []
        bars, counts = fig.axes[1], fig.axes[len(shown) + 1]
        outline = [b for b in bars.patches if b.get_facecolor()[3] == 0 and not b.get_hatch()]
        assert [(round(b.get_x(), 3), b.get_height()) for b in outline] == [(0.2, 1.0)]  # the 2 inputs' bin
        assert counts.get_yscale() == "log" and counts.get_ylim() == fig.axes[len(shown)].get_ylim()
        assert sorted(round(b.get_height()) for b in counts.patches) == [2, 400]  # 300 and the 100 at 1 merged
        legend = fig.legends[0]
        assert [t.get_text() for t in legend.get_texts()] == [
            "share correct", "share correct, a bin of < 20 inputs", "gap to the mean confidence", "perfect calibration"]
    finally:
        plt.close(fig)


def test_a_diverged_student_gets_nan_not_an_error():
    probs, labels = _random_predictive(100)
    assert math.isnan(ece(torch.full_like(probs, float("nan")), labels))
    assert ece(probs, labels) == pytest.approx(calibration(probs, labels).ece, abs=1e-9)


def test_a_stored_table_reads_back_as_calibrations():
    probs, labels = _random_predictive()
    first, second = calibration(probs, labels, 10), calibration(probs.roll(1, 1), labels, 10)
    table = pd.concat([first.bins.assign(network="a", ece=first.ece), second.bins.assign(network="b", ece=second.ece)])
    back = calibrations_from_table(table)
    assert list(back) == ["a", "b"] and back["a"].num_bins == 10 and back["b"].ece == second.ece
    pd.testing.assert_frame_equal(back["a"].bins, first.bins)
    with pytest.raises(ValueError, match=r"lacks the column\(s\) \['ece'\]"):
        calibrations_from_table(first.bins.assign(network="a"))


def test_a_notebooks_chains_give_their_stored_calibration(digits_data, tmp_path):
    config = GPEDConfig(model="fcnn", sampler=SGLDConfig(step_size=5e-5, batch_size=50), num_iterations=300,
                        burn_in=100, eval_thinning=10, log_every=100, checkpoint_every=100, progress=False,
                        device="cpu")
    students = (StudentConfig("predictive", "U_s", thinning=2), StudentConfig("predictive", "U_o", thinning=2),
                StudentConfig("entropy", "U_o", thinning=2))
    tasks = [ChainTask(digits_data, dataclasses.replace(config, seed=s), students) for s in (0, 1)]
    store = ResultsStore(tmp_path)
    grid = run_chains(tasks, store, progress=False)
    found = chain_calibration(store, tasks)
    assert found.without_bins == found.not_stored == [] and found.missing_line == ""
    assert set(found.bins["seed"]) == {0, 1}
    # the stored ECE is the summary's, and the reliability bins read back as the chain's calibration
    summary = grid.outcomes[0].result.summary.set_index("student")
    cals = found.calibrations("fcnn", 0, {"predictive-U_o": "U_o", "predictive-U_s": "U_s"})
    assert list(cals) == ["teacher", "U_o", "U_s"]  # entropy students predict no classes
    assert cals["U_s"].ece == pytest.approx(summary.loc["predictive-U_s", "student_ece"], abs=1e-9)
    assert cals["teacher"].ece == pytest.approx(summary.loc["predictive-U_s", "teacher_ece"], abs=1e-9)
    ece = found.ece({"predictive-U_s": "U_s"}).set_index("network")
    assert list(ece.index) == ["teacher", "U_s"] and (ece["seeds"] == 2).all()
    assert list(found.ece({"predictive-U_s": "U_s", "predictive-U_o": "U_o"})["network"]) == ["teacher", "U_s", "U_o"]
    per_seed = [found.calibrations("fcnn", s, {"predictive-U_s": "U_s"})["U_s"].ece for s in (0, 1)]
    assert ece.loc["U_s", "ece_mean"] == pytest.approx(sum(per_seed) / 2)
    # a chain stored without the table (made before chains kept it) is named, not guessed
    for entry in store.entries("chain"):
        (entry.path / "calibration.csv").unlink()
    again = chain_calibration(store, tasks)
    assert again.without_bins == [t.label for t in tasks] and "recompute=True" in again.missing_line
    other = ChainTask(digits_data, dataclasses.replace(config, seed=5), students)
    assert chain_calibration(store, [other]).not_stored == [other.label]


def test_every_logged_recent_ece_is_the_ece_of_the_recent_windows_predictive(digits_data):
    """The number the store keeps as ``teacher_recent_ece`` is the ECE of the teacher ensemble over its recent
    window (:mod:`gped_kit.engine.window`), recomputed here through :func:`calibration`: at every log point,
    including those whose window starts after sample 1 (a difference of running sums)."""
    from gped_kit.engine import evaluate
    from gped_kit.engine.engine import GPEDEngine
    from gped_kit.engine.spec import build_chain

    cfg = GPEDConfig(model="fcnn", sampler=SGLDConfig(step_size=5e-5, batch_size=50), num_iterations=200, burn_in=10,
                     eval_thinning=2, log_every=20, checkpoint_every=200, progress=False, device="cpu")
    engine = GPEDEngine([build_chain(digits_data, cfg, [])])
    checked = []

    class Check:  # a hook: after each log point, the row just logged against the window's predictive
        def on_log(self, eng, rows):
            row = rows[0][-1]
            if "teacher_recent_ece" in row:
                recent = eng.recent.means(0, evaluate.run_count(eng.state, eng.setup),
                                          evaluate.test_sums(eng.state, eng.setup))["predictive"]
                checked.append((row["teacher_recent_from_sample"], row["teacher_recent_ece"],
                                calibration(recent, eng.setup.test_labels[0]).ece))

        def on_checkpoint(self, eng):
            pass

        def on_end(self, eng):
            pass

    engine.run(cfg.num_iterations, [Check()])
    assert any(start > 1 for start, _, _ in checked), "no log point had a window after sample 1"
    for start, logged, recomputed in checked:
        assert logged == pytest.approx(recomputed, abs=1e-6), f"window from sample {start}"


def test_the_metric_path_of_every_stored_ece_reads_round_off_as_probabilities():
    """Every stored ECE (teacher, recent window, students) comes from the likelihood's predictive metrics. A
    predictive that round-off of running sums puts a few ulp above 1 (a window of confident samples: the sums'
    difference over the window's count) must give the ECE of the clipped predictive; unguarded, torchmetrics
    read such a tensor as logits, which put the stored ``teacher_recent_ece`` at 0.67-0.76 beside a
    ``teacher_ece`` of 0.01 at accuracy 0.971 (issue 52)."""
    from gped_kit.core.likelihoods import resolve_likelihood

    probs, labels = _random_predictive(2000, 10, seed=3)
    probs = probs.float()
    confident = torch.zeros_like(probs[:50])
    confident[torch.arange(50), labels[:50]] = 1 + 2 * torch.finfo(torch.float32).eps
    window = torch.cat([confident, probs[50:]])
    likelihood = resolve_likelihood("categorical")
    metrics = likelihood.predictive_metrics({likelihood.ensemble_target: window}, labels)
    assert metrics["ece"] == pytest.approx(calibration(window.clamp(0, 1), labels).ece, abs=1e-6)
    assert metrics["ece"] < 0.3
