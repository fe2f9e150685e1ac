import math

import pytest
import torch

from gped_kit.core import metrics


def test_nll_accuracy_mae_known_values():
    probs = torch.tensor([[0.5, 0.5], [0.9, 0.1], [0.0, 1.0]])
    y = torch.tensor([0, 1, 0])
    assert metrics.nll(probs, y) == pytest.approx((math.log(2) + math.log(10) - math.log(1e-12)) / 3)
    assert metrics.accuracy(probs, y) == pytest.approx(1 / 3)
    assert metrics.mae(torch.tensor([1.0, 2.0]), torch.tensor([0.0, 4.0])) == pytest.approx(1.5)
    assert torch.allclose(metrics.predictive_entropy(probs), torch.tensor([math.log(2), 0.3250830, 0.0]))
    with pytest.raises(ValueError, match="shapes differ"):
        metrics.mae(torch.zeros(3), torch.zeros(3, 1))


def test_ood_auroc_known_answers_and_direction():

    assert metrics.ood_auroc([0.1, 0.2], [0.3, 0.4]) == 1.0  # every OOD input more uncertain
    assert metrics.ood_auroc(torch.tensor([0.3, 0.4]), torch.tensor([0.1, 0.2])) == 0.0
    assert metrics.ood_auroc([0.1, 0.3], [0.2, 0.4]) == 0.75  # 3 of 4 (in, out) pairs ordered right
    with pytest.raises(ValueError, match="non-empty"):
        metrics.ood_auroc([], [1.0])
    with pytest.raises(ValueError, match="NaN"):
        metrics.ood_auroc([float("nan")], [1.0])


def test_ndcg_trials_known_answers():
    import numpy as np


    ref = np.linspace(0.0, 1.0, 300)
    assert np.allclose(metrics.ndcg_trials(ref, ref, trials=20), 1.0)
    assert np.allclose(metrics.ndcg_trials(ref, 5 * ref + 1, trials=20), 1.0)  # only the order of the estimate matters
    reversed_ = metrics.ndcg_trials(ref, -ref, trials=50)
    shuffled = metrics.ndcg_trials(ref, np.random.default_rng(0).permutation(ref), trials=50)
    assert reversed_.mean() < shuffled.mean() < 1.0
    # hand-computed: 3 inputs with gains (3, 2, 0), ranked (2, 3, 0) -> DCG = 2 + 3/log2(3), ideal 3 + 2/log2(3)
    score = metrics.ndcg_trials([3.0, 2.0, 0.0], [1.0, 2.0, 0.0], k=3, subset_size=3, trials=1)[0]
    assert score == pytest.approx((2 + 3 / np.log2(3)) / (3 + 2 / np.log2(3)))
    assert len(metrics.ndcg_trials(ref, ref, trials=7)) == 7
    with pytest.raises(ValueError, match="subset_size=400 exceeds"):
        metrics.ndcg_trials(ref, ref, subset_size=400)
    with pytest.raises(ValueError, match="k=0"):
        metrics.ndcg_trials(ref, ref, k=0)


def test_brier_score_known_values_and_hydra_convention():
    probs = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1]])
    y = torch.tensor([0, 2])
    # (0.09 + 0.04 + 0.01 + 0.01 + 0.64 + 0.81) / 2
    assert metrics.brier_score(probs, y) == pytest.approx(0.8)
    assert metrics.brier_score(torch.eye(3), torch.arange(3)) == pytest.approx(0.0)
    assert metrics.brier_score(torch.eye(3), torch.tensor([1, 2, 0])) == pytest.approx(2.0)
    # the Hydra paper's sum_c p_c^2 - 2 p_y is ours minus 1
    ovadia = float(((probs ** 2).sum(1) - 2 * probs[torch.arange(2), y]).mean())
    assert metrics.brier_score(probs, y) - 1 == pytest.approx(ovadia)


def test_lowest_known_is_nan_wherever_a_skill_is_missing_whatever_its_place():
    """Python's ``min`` answers NaN or a number depending on where the NaN stands; a result resting on a skill
    that is not known must not look known."""
    nan = float("nan")
    assert min([nan, 0.3]) != min([0.3, nan])  # the trap
    assert math.isnan(metrics.lowest_known([nan, 0.3])) and math.isnan(metrics.lowest_known([0.3, nan]))
    assert math.isnan(metrics.lowest_known([]))
    assert metrics.lowest_known([0.3, -0.2, 0.9]) == -0.2
