"""Shared fixtures: a small real data set (scikit-learn's 8x8 digits) as GPEDData, a writer of tiny
CIFAR-10 files in torchvision's layout (random pixels: for code paths, not for learning), and hand-built figures
folders whose tables count as recorded in the manifest (``tables_recorded``)."""

import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

from gped_kit.data.container import GPEDData
from gped_kit.experiments import verdicts
from gped_kit.experiments.artifacts import Kind, Manifest, Provenance
from gped_kit.experiments.registry import EXPERIMENTS


def make_digits_data(n_train: int = 1200) -> GPEDData:
    digits = load_digits()
    x = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(digits.target, dtype=torch.long)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    train, test = perm[:n_train], perm[n_train:]
    return GPEDData(train_x=x[train], train_y=y[train], distill_x=x[train], test_x=x[test], test_y=y[test],
                    num_outputs=10, info={"dataset": "digits"})


@pytest.fixture(scope="session")
def digits_data() -> GPEDData:
    return make_digits_data()


def _write_tiny_cifar10(root: Path, per_batch: int = 3, n_test: int = 4):
    rng = np.random.default_rng(1)
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    batches = {}
    for name, n in [*((f"data_batch_{i}", per_batch) for i in range(1, 6)), ("test_batch", n_test)]:
        entry = {"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
                 "labels": list(rng.integers(0, 10, n).tolist())}
        (folder / name).write_bytes(pickle.dumps(entry))
        batches[name] = entry
    (folder / "batches.meta").write_bytes(pickle.dumps({"label_names": [f"c{i}" for i in range(10)]}))
    return batches


@pytest.fixture
def write_tiny_cifar10():
    """``write(root, per_batch=3, n_test=4)`` writes ``root/cifar-10-batches-py`` (5 train batches,
    a test batch, batches.meta; checksums will not match torchvision's) and returns the batches."""
    return _write_tiny_cifar10


def _recorded_folder(figures: Path) -> Manifest:
    """A manifest in which every CSV of ``figures`` that a declared table artifact could have written counts as
    recorded by that artifact's notebook (the rule tests write their tables by hand, not through a notebook)."""
    files = {}
    for path in sorted(Path(figures).glob("*.csv")):
        for entry in EXPERIMENTS:
            for artifact in entry.artifacts.values():
                pattern = re.escape(artifact.file)
                for name in artifact.fields:
                    pattern = pattern.replace(re.escape(f"{{{name}}}"), f"(?P<{name}>[^/]+?)", 1)
                    pattern = pattern.replace(re.escape(f"{{{name}}}"), f"(?P={name})")
                found = re.fullmatch(pattern, path.stem) if artifact.kind is Kind.TABLE else None
                if found:
                    record = Provenance(path.stem, Kind.TABLE, entry.name, artifact.key, found.groupdict().get(
                        "profile", ""), artifact.caption_for(**found.groupdict()), found.groupdict())
                    files[record.name] = record
    return Manifest(files)


@pytest.fixture
def tables_recorded(monkeypatch):
    """The README's rules read the tables a notebook recorded in the figures' manifest
    (:func:`gped_kit.experiments.verdicts.artifact_table`); tests that build a figures folder by hand get every
    table there counted as recorded by its declared artifact (the manifest itself is tested in test_artifacts and,
    end to end, in test_frame)."""
    monkeypatch.setattr(verdicts, "read_manifest", _recorded_folder)
