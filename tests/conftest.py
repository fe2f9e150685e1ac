"""Shared fixtures: a small real data set (scikit-learn's 8x8 digits) shaped like ExperimentData."""

import pytest
import torch
from sklearn.datasets import load_digits

from gped_kit.data import DataConfig, ExperimentData


def make_digits_data(n_train: int = 1200) -> ExperimentData:
    digits = load_digits()
    x = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(digits.target, dtype=torch.long)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    train, test = perm[:n_train], perm[n_train:]
    return ExperimentData(train_x=x[train], train_y=y[train], distill_x=x[train], test_x=x[test], test_y=y[test],
                          num_classes=10, input_shape=(1, 8, 8), masking_rate=0.0, config=DataConfig())


@pytest.fixture(scope="session")
def digits_data() -> ExperimentData:
    return make_digits_data()
