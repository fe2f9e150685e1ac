import math

import pytest
import torch

from gped_kit import metrics


def test_nll_accuracy_mae_known_values():
    probs = torch.tensor([[0.5, 0.5], [0.9, 0.1], [0.0, 1.0]])
    y = torch.tensor([0, 1, 0])
    assert metrics.nll(probs, y) == pytest.approx((math.log(2) + math.log(10) - math.log(1e-12)) / 3)
    assert metrics.accuracy(probs, y) == pytest.approx(1 / 3)
    assert metrics.mae(torch.tensor([1.0, 2.0]), torch.tensor([0.0, 4.0])) == pytest.approx(1.5)
    assert torch.allclose(metrics.predictive_entropy(probs), torch.tensor([math.log(2), 0.3250830, 0.0]))
    with pytest.raises(ValueError, match="shapes differ"):
        metrics.mae(torch.zeros(3), torch.zeros(3, 1))
