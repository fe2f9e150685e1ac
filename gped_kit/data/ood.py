"""Out-of-distribution sets (Experiment 4): the *test* splits of other data sets, converted to
the in-distribution input shape: ``fashion_mnist``, ``kmnist`` and ``svhn`` as in
:mod:`gped_kit.data.sources`, and the image-folder sets ``notmnist``
(``ROOT/notMNIST_small/<A..J>/*.png``, Bulatov 2011), ``tinyimagenet``
(``ROOT/tiny-imagenet-200/val/images/*.JPEG``, resized 64 -> 32) and ``lsun``
(``ROOT/LSUN_resize/*.jpg``, the 32 x 32 LSUN test crops used in OOD benchmarks); see
:data:`OOD_SETS` and :func:`load_ood`.
"""

from __future__ import annotations

import types
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError
from torchvision.transforms.v2 import functional as TF

from .sources import (
    IDX_FILES,
    SYSTEM_FASHION_MNIST_DIR,
    DatasetIntegrityError,
    DatasetNotFoundError,
    default_data_root,
    expected_files,
    load_split,
)
from .transforms import seeded_generator


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


def is_test_copy(name: str, dataset: str) -> bool:
    """True when OOD set ``name`` is read from the test split of ``dataset`` (a canonical name): a shifted
    copy of that test set (e.g. ``"mnist_rotated60"`` of ``"mnist"``), its images in the test set's order, so
    the test set's labels are its labels."""
    if name not in OOD_SETS:
        raise ValueError(f"OOD set {name!r} is not known; allowed: {sorted(OOD_SETS)}")
    return OOD_SETS[name].dataset == dataset


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
    files = expected_files(spec.dataset, "test", root)
    if all(p.is_file() for p in files):
        return True
    if spec.dataset == "fashion_mnist":
        return all((SYSTEM_FASHION_MNIST_DIR / f"{f}.gz").is_file() for pair in IDX_FILES.values() for f in pair)
    return False


def _image_to_shape(path: Path, shape: tuple[int, int, int]) -> np.ndarray | None:
    """An image file as uint8 (C, H, W) in ``shape`` (grey or RGB, bilinear resize); None if unreadable."""

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
             verify_checksums: bool = True, digest: Any = None) -> torch.Tensor:
    """An OOD set's test images as uint8 (N, C, H, W) in the in-distribution ``input_shape``.

    ``max_items`` keeps a seeded random subset. Unreadable image files are skipped (a warning
    says how many). ``verify_checksums`` is passed to :func:`load_split` for sets read through
    torchvision (SVHN's md5 check; ``False`` reads e.g. small test files). Raises
    :class:`DatasetNotFoundError` (where we looked, how to get it) when the set is absent,
    :class:`DatasetIntegrityError` when its files exist but cannot be read (a failed md5 check,
    a corrupt or truncated ``.mat`` file, no readable image in a folder), ValueError for
    unknown names or bad ``max_items``. ``digest`` (a :mod:`hashlib` object) is updated with the
    images as read, before any floating-point transform (resizing, rotation), whose bytes can differ
    between machines: what a result key hashes must not.
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
            files = ", ".join(map(str, expected_files(spec.dataset, "test", root)))
            raise DatasetIntegrityError(
                f"OOD set {name!r}: the files exist but could not be read ({type(exc).__name__}: {exc}). "
                f"Looked in:\n  - {files}\nTo get it again: delete them, then {spec.source}.") from exc
    else:
        files = _ood_folder_files(spec, root)
        if not files:
            raise DatasetNotFoundError(
                f"OOD set {name!r} not found.\nLooked in:\n  - {root / spec.folder} (files {', '.join(spec.patterns)})"
                f"\nTo get it: {spec.source}.")
        if max_items is not None and max_items < len(files):
            keep = torch.randperm(len(files), generator=seeded_generator(seed))[:max_items].sort().values
            files = [files[i] for i in keep.tolist()]
            max_items = None
        arrays = [a for a in (_image_to_shape(f, input_shape) for f in files) if a is not None]
        if len(arrays) < len(files):
            warnings.warn(f"OOD set {name!r}: skipped {len(files) - len(arrays)} unreadable image file(s)")
        if not arrays:
            raise DatasetIntegrityError(f"OOD set {name!r}: none of the {len(files)} files under "
                                        f"{root / spec.folder} could be read as an image")
        images = torch.from_numpy(np.stack(arrays))
    if digest is not None:
        digest.update(images.contiguous().numpy().tobytes())
    images = _convert_shape(images, tuple(input_shape))
    if spec.rotate:

        images = TF.rotate(images, spec.rotate, interpolation=TF.InterpolationMode.BILINEAR)
    if max_items is not None and max_items < len(images):
        images = images[torch.randperm(len(images), generator=seeded_generator(seed))[:max_items].sort().values]
    return images
