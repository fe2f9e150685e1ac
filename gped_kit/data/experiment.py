"""The paper's data for one chain (Appendix A.1): which data set, the labelled-set size, masking, seeds.

:class:`DataConfig` names the data of an experiment; :func:`prepare_data` loads the files
(:mod:`gped_kit.data.sources`, :mod:`gped_kit.data.ood`), applies the manipulations
(:mod:`gped_kit.data.transforms`) and returns a :class:`~gped_kit.data.container.GPEDData`
whose ``identity`` (the configuration plus a checksum of the raw arrays read) keys stored
results, so a result is never reused for different data.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch

from ..core.options import check_int, check_positive
from ..core.schema import record_fields
from .container import GPEDData
from .ood import OOD_SETS, is_test_copy, load_ood
from .sources import DATASETS, canonical_name, load_split
from .transforms import apply_square_mask, derive_seed, masking_rate, subsample_indices

#: How OOD sets are masked: like the test set, not at all, or both (the unmasked copy of set ``name``
#: is the evaluation set ``name:unmasked``; :func:`ood_set_name`).
OOD_MASKINGS = ("masked", "unmasked", "both")
UNMASKED_SUFFIX = ":unmasked"
#: DataConfig fields that say where and how files are read, not what the data are.
_ACCESS_FIELDS = ("root", "download", "verify_checksums")


@dataclass(frozen=True)
class DataConfig:
    """Which data an experiment uses and how it is manipulated (validated on creation: sizes, ``mask_size`` and
    ``seed`` are integers, not bools, within the data set's published splits and image size).

    ``root``, ``download`` and ``verify_checksums`` say where and how files are read, not what
    the data are, so they are not part of the data's identity (:func:`data_identity`)."""

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
    ood_masking: str = "masked"  # OOD sets masked like the test set ("masked"), whole ("unmasked"), or "both"
    test_size: int | None = None  # keep a seeded random subset of the (masked) test set; None = all

    def __post_init__(self) -> None:
        if isinstance(self.ood_datasets, (str, list)):
            object.__setattr__(self, "ood_datasets", (self.ood_datasets,) if isinstance(self.ood_datasets, str)
                               else tuple(self.ood_datasets))
        unknown = [n for n in self.ood_datasets if n not in OOD_SETS]
        if unknown:
            raise ValueError(f"ood_datasets={list(self.ood_datasets)}: unknown {unknown}; allowed: {sorted(OOD_SETS)}")
        for name in ("ood_size", "test_size"):
            value = getattr(self, name)
            if value is not None and (not _is_int(value) or value < 1):
                raise ValueError(f"{name}={value!r} must be an integer >= 1 or None (all)")
        dataset = canonical_name(self.dataset)
        spec = DATASETS[dataset]
        _, h, w = spec.input_shape
        if not _is_int(self.mask_size) or not 0 <= self.mask_size <= min(h, w):
            raise ValueError(f"mask_size={self.mask_size!r} must be an integer in [0, {min(h, w)}] for {self.dataset}")
        if self.labelled_size is not None and (not _is_int(self.labelled_size) or self.labelled_size < 1):
            raise ValueError(f"labelled_size={self.labelled_size!r} must be an integer >= 1 or None (full set)")
        if self.labelled_size is not None and self.labelled_size > spec.train_size:
            raise ValueError(f"labelled_size={self.labelled_size} exceeds the {spec.train_size} training images "
                             f"of {dataset}")
        if self.test_size is not None and self.test_size > spec.test_size:
            raise ValueError(f"test_size={self.test_size} exceeds the {spec.test_size} test images of {dataset}")
        check_int("seed", self.seed, 0)
        if self.ood_masking not in OOD_MASKINGS:
            raise ValueError(f"ood_masking={self.ood_masking!r} is not known; allowed: {list(OOD_MASKINGS)}")
        check_positive("distill_noise_std", self.distill_noise_std, allow_zero=True)


def _is_int(value: object) -> bool:
    """Whether ``value`` is an integer (a bool is not)."""
    return isinstance(value, int) and not isinstance(value, bool)



# Sub-streams of DataConfig.seed, so each random draw is independent of the others.
SEED_SUBSAMPLE, SEED_MASK_TRAIN, SEED_MASK_DISTILL, SEED_MASK_TEST, SEED_TEST_SUBSET = range(5)
SEED_OOD = 100  # OOD set i uses streams SEED_OOD + 2 i (subset) and SEED_OOD + 2 i + 1 (mask)


def _to_unit(images: torch.Tensor) -> torch.Tensor:
    return images.to(torch.float32).div_(255.0)


def ood_set_name(eval_set: str) -> tuple[str, bool]:
    """``(OOD set, masked)`` of an evaluation set's name (``"fashion_mnist:unmasked"`` ->
    ``("fashion_mnist", False)``). A configuration with ``ood_masking="unmasked"`` names its whole
    sets without the suffix; the caller knows which it asked for."""
    if eval_set.endswith(UNMASKED_SUFFIX):
        return eval_set[: -len(UNMASKED_SUFFIX)], False
    return eval_set, True


def data_identity(cfg: DataConfig, checksum: str) -> dict:
    """What identifies prepared data in result keys: the configuration's fields that decide the
    data (not where the files live), those at their defaults left out as in every record
    (:func:`~gped_kit.core.schema.record_fields`: a field added with a default changes no key), and
    ``checksum``, the SHA-256 of the raw arrays read (OOD sets before their floating-point transforms,
    so that the key is the same on every machine)."""
    return {**record_fields(cfg, skip=_ACCESS_FIELDS), "sha256": checksum}


def prepare_data(cfg: DataConfig, device: str | torch.device = "cpu") -> GPEDData:
    """Load, subsample and mask the data of ``cfg`` as in paper 003, Appendix A.1.

    D is a random subset (``labelled_size``) of the training set; D' is always the whole
    training set. As in the authors' code, masks are drawn independently (different seeds
    derived from ``cfg.seed``) for D, D' and the test set, so an image in both D and D'
    usually carries different masks. D's masks are drawn for the whole training set before
    subsampling, so nested subsets share them. OOD sets (``cfg.ood_datasets``) get the test
    set's masking (same m, their own draws), so the mask itself does not tell them apart; with
    ``ood_masking="unmasked"`` they stay whole, with ``"both"`` each set is evaluated both ways
    (the whole copy named ``<set>:unmasked``). The paper does not say which it did.
    ``test_size`` keeps a seeded random subset of the masked test set (its masks are those the
    whole set gets), e.g. for quick checks; the paper evaluates on all of it. An OOD set that is a shifted
    copy of the test set (:func:`~gped_kit.data.ood.is_test_copy`, e.g. ``"mnist_rotated60"``) keeps the
    same images as the test set (its own subset with ``ood_size``) and its labels (``GPEDData.ood_y``).
    """
    name = canonical_name(cfg.dataset)
    train = load_split(name, "train", cfg.root, cfg.download, verify_checksums=cfg.verify_checksums)
    test = load_split(name, "test", cfg.root, cfg.download, verify_checksums=cfg.verify_checksums)
    n = len(train)
    if cfg.labelled_size is not None and cfg.labelled_size > n:
        raise ValueError(f"labelled_size={cfg.labelled_size} exceeds the {n} training images of {name}")
    if cfg.test_size is not None and cfg.test_size > len(test):
        raise ValueError(f"test_size={cfg.test_size} exceeds the {len(test)} test images of {name}")
    test_idx = subsample_indices(len(test), cfg.test_size, derive_seed(cfg.seed, SEED_TEST_SUBSET))
    idx = subsample_indices(n, cfg.labelled_size, derive_seed(cfg.seed, SEED_SUBSAMPLE))
    m = cfg.mask_size
    shape = tuple(train.images.shape[1:])
    digest = hashlib.sha256()
    for array in (train.images, train.labels, test.images, test.labels):
        digest.update(array.contiguous().numpy().tobytes())
    ood_x, ood_y = {}, {}
    for i, ood_name in enumerate(cfg.ood_datasets):
        digest.update(ood_name.encode())  # then the set as read, before its floating-point transforms
        subset_seed = derive_seed(cfg.seed, SEED_OOD + 2 * i)
        test_copy = is_test_copy(ood_name, name)
        raw = load_ood(ood_name, shape, cfg.root, None if test_copy else cfg.ood_size, subset_seed, cfg.download,
                       verify_checksums=cfg.verify_checksums, digest=digest)
        if test_copy:  # its own subset with ood_size (as any OOD set), else the test set's; the labels follow
            keep = (test_idx if cfg.ood_size is None
                    else subsample_indices(len(raw), min(cfg.ood_size, len(raw)), subset_seed))
            raw, labels = raw[keep], test.labels[keep].clone()
        sets = {}
        if cfg.ood_masking in ("masked", "both"):
            sets[ood_name] = _to_unit(apply_square_mask(raw, m, derive_seed(cfg.seed, SEED_OOD + 2 * i + 1)))
        if cfg.ood_masking in ("unmasked", "both"):
            sets[ood_name + (UNMASKED_SUFFIX if cfg.ood_masking == "both" else "")] = _to_unit(raw.clone())
        ood_x.update(sets)
        if test_copy:
            ood_y.update(dict.fromkeys(sets, labels))
    train_masked = apply_square_mask(train.images, m, derive_seed(cfg.seed, SEED_MASK_TRAIN))
    rate = masking_rate(m, *train.images.shape[2:])
    data = GPEDData(
        train_x=_to_unit(train_masked[idx]),
        train_y=train.labels[idx].clone(),
        distill_x=_to_unit(apply_square_mask(train.images, m, derive_seed(cfg.seed, SEED_MASK_DISTILL))),
        test_x=_to_unit(apply_square_mask(test.images, m, derive_seed(cfg.seed, SEED_MASK_TEST))[test_idx]),
        test_y=test.labels[test_idx].clone(),
        num_outputs=train.num_classes,
        ood_x=ood_x,
        ood_y=ood_y,
        distill_noise_std=cfg.distill_noise_std,
        info={"dataset": name, "labelled_size": int(idx.shape[0]), "mask_size": m, "masking_rate": rate,
              "data_seed": cfg.seed, "distill_noise_std": cfg.distill_noise_std},
        identity=data_identity(cfg, digest.hexdigest()),
    )
    return data.to(device)
