"""The data of one GPED chain: the labelled set D, the distillation set D' and evaluation sets.

:class:`GPEDData` holds tensors on one device, so the sampling loop never waits for a data
loader: D (inputs and labels or regression targets) for the teacher's SGLD minibatches, D'
(inputs only) for the students' distillation minibatches, a labelled test set, and further
evaluation sets (out-of-distribution sets, shifted copies, a grid for uncertainty maps) on which the teacher
ensemble and the students are evaluated too; those sets are unlabelled but for a shifted copy of the test set,
whose labels ``ood_y`` holds. Inputs may be images
``(N, C, H, W)`` or feature vectors ``(N, F)``: the engine only indexes the first axis.

Build it from tensors (:meth:`GPEDData.from_tensors`) or from any ``torch.utils.data.Dataset``
(:meth:`GPEDData.from_datasets`, which reads each set once into tensors), or with the kit's
loaders for the paper's data (:func:`gped_kit.data.experiment.prepare_data`).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

Labelled = tuple[torch.Tensor, torch.Tensor]


@dataclass
class GPEDData:
    """D, D' and the evaluation sets of one chain (see the module docstring).

    ``num_outputs`` is the number of classes (categorical likelihood) or of regression output
    dimensions (Gaussian likelihood); ``ood_y`` holds the labels of those further evaluation sets
    that have them (a rotated copy of the test set: the test set's labels), by the set's name in
    ``ood_x``; ``distill_noise_std`` adds Bayesian Dark Knowledge's Gaussian input noise to every D'
    minibatch; ``info`` holds descriptive columns copied into every result row (e.g. ``dataset``,
    ``labelled_size``, ``masking_rate``); ``identity`` is what identifies the data in result keys (a
    data configuration's fields; None: a checksum of the tensors, :meth:`fingerprint`).
    """

    train_x: torch.Tensor
    train_y: torch.Tensor
    distill_x: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    num_outputs: int
    ood_x: dict[str, torch.Tensor] = field(default_factory=dict)
    distill_noise_std: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)
    identity: Any = None
    ood_y: dict[str, torch.Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ``ValueError`` naming the set and the problem unless the data can be used: rows of
        inputs and labels agree, D and D' are non-empty, every set's inputs have D's shape and dtype,
        ``num_outputs`` is an integer >= 1, integer labels lie in ``[0, num_outputs)``, real-valued
        targets have shape ``(N,)`` (one output) or ``(N, num_outputs)``, and no input or target
        holds a NaN or an infinity. Runs on construction (and on every copy, e.g. :meth:`to`), and
        again when a chain is built from the data, so tensors changed in place after construction
        are caught before any work; one vectorised pass over each tensor."""
        for name in ("train", "test"):
            x, y = getattr(self, f"{name}_x"), getattr(self, f"{name}_y")
            if x.shape[0] != y.shape[0]:
                raise ValueError(f"data: {name}_x has {x.shape[0]} rows but {name}_y has {y.shape[0]}")
        if self.train_x.shape[0] < 1 or self.distill_x.shape[0] < 1:
            raise ValueError("data: the labelled set D and the distillation set D' must be non-empty")
        shapes = {"distill_x": self.distill_x, "test_x": self.test_x,
                  **{f"ood_x[{k!r}]": v for k, v in self.ood_x.items()}}
        for name, x in shapes.items():
            if tuple(x.shape[1:]) != self.input_shape:
                raise ValueError(f"data: {name} has inputs of shape {tuple(x.shape[1:])}, D has {self.input_shape}")
            if x.dtype != self.train_x.dtype:
                raise ValueError(f"data: {name} holds {x.dtype} inputs, D holds {self.train_x.dtype}; give every set "
                                 "D's dtype and scale (e.g. uint8 images divided by 255 as D's were)")
        if isinstance(self.num_outputs, bool) or not isinstance(self.num_outputs, int) or self.num_outputs < 1:
            raise ValueError(f"data: num_outputs={self.num_outputs!r} must be an integer >= 1")
        if not self.distill_noise_std >= 0:
            raise ValueError(f"data: distill_noise_std={self.distill_noise_std!r} must be >= 0")
        for name in ("train_y", "test_y"):
            check_targets(name, getattr(self, name), self.num_outputs)
        for name, y in self.ood_y.items():
            if name not in self.ood_x:
                raise ValueError(f"data: ood_y has labels for {name!r}, which is not an evaluation set in ood_x "
                                 f"(those: {sorted(self.ood_x)})")
            if y.shape[0] != self.ood_x[name].shape[0]:
                raise ValueError(f"data: ood_x[{name!r}] has {self.ood_x[name].shape[0]} rows but ood_y[{name!r}] "
                                 f"has {y.shape[0]}")
            check_targets(f"ood_y[{name!r}]", y, self.num_outputs)
        non_finite = self.non_finite_counts()
        if non_finite:
            raise ValueError(f"data: non-finite values (NaN or infinity) in {describe_counts(non_finite)}; "
                             "every loss and prediction that touches them would be NaN: remove or impute them")

    def non_finite_counts(self, names: Sequence[str] | None = None) -> dict[str, int]:
        """The number of NaN or infinite values in each named set that holds any (``"train_x"``,
        ``"train_y"``, ``"distill_x"``, ``"test_x"``, ``"test_y"``, ``"ood_x['name']"``, ``"ood_y['name']"``; default:
        all of them). Integer tensors hold none."""
        tensors = {"train_x": self.train_x, "train_y": self.train_y, "distill_x": self.distill_x,
                   "test_x": self.test_x, "test_y": self.test_y, **{f"ood_x[{k!r}]": v for k, v in self.ood_x.items()},
                   **{f"ood_y[{k!r}]": v for k, v in self.ood_y.items()}}
        counted: dict[int, int] = {}  # D' is often D's inputs: each tensor is read once
        counts = {}
        for name in tensors if names is None else names:
            t = tensors[name]
            if id(t) not in counted:
                counted[id(t)] = count_non_finite(t)
            counts[name] = counted[id(t)]
        return {name: n for name, n in counts.items() if n}

    @property
    def input_shape(self) -> tuple[int, ...]:
        """The shape of one input (without the batch axis)."""
        return tuple(self.train_x.shape[1:])

    @property
    def num_classes(self) -> int:
        """``num_outputs`` under its classification name."""
        return self.num_outputs

    @property
    def device(self) -> torch.device:
        return self.train_x.device

    def to(self, device: str | torch.device) -> GPEDData:
        """A copy with all tensors on ``device`` (``self`` if they are there already)."""
        device = torch.device(device)
        if self.train_x.device == device:
            return self
        moved = {f.name: getattr(self, f.name).to(device) for f in dataclasses.fields(self)
                 if isinstance(getattr(self, f.name), torch.Tensor)}
        return dataclasses.replace(self, **moved, ood_x={k: v.to(device) for k, v in self.ood_x.items()},
                                   ood_y={k: v.to(device) for k, v in self.ood_y.items()})

    def fingerprint(self) -> Any:
        """What identifies these data in result keys: ``identity`` when given, else the SHA-256 of
        every tensor's bytes (and ``num_outputs`` and the D' noise)."""
        if self.identity is not None:
            return self.identity
        digest = hashlib.sha256()
        for name in ("train_x", "train_y", "distill_x", "test_x", "test_y"):
            _update(digest, name, getattr(self, name))
        for name in sorted(self.ood_x):
            _update(digest, f"ood:{name}", self.ood_x[name])
        for name in sorted(self.ood_y):  # none: the digest of data without such labels, as before
            _update(digest, f"ood_y:{name}", self.ood_y[name])
        return {"sha256": digest.hexdigest(), "num_outputs": self.num_outputs,
                "distill_noise_std": self.distill_noise_std}

    @classmethod
    def from_tensors(cls, train: Labelled, test: Labelled, distill: torch.Tensor | None = None,
                     ood: Mapping[str, torch.Tensor] | None = None, num_outputs: int | None = None,
                     distill_noise_std: float = 0.0, info: Mapping[str, Any] | None = None) -> GPEDData:
        """Data from tensors: ``train = (x, y)`` is D, ``test = (x, y)``, ``distill`` is D'
        (default: D's inputs), ``ood`` further unlabelled evaluation sets. ``num_outputs``
        defaults to ``max(label) + 1`` for integer labels and to the number of target columns for
        real-valued targets."""
        (train_x, train_y), (test_x, test_y) = train, test
        if num_outputs is None:
            num_outputs = infer_num_outputs(train_y)
        base_info = {"labelled_size": int(train_x.shape[0])}
        return cls(train_x, train_y, train_x if distill is None else distill, test_x, test_y, num_outputs,
                   dict(ood or {}), distill_noise_std, {**base_info, **dict(info or {})})

    @classmethod
    def from_datasets(cls, train: Dataset, test: Dataset, distill: Dataset | None = None,
                      ood: Mapping[str, Dataset] | None = None, num_outputs: int | None = None,
                      distill_noise_std: float = 0.0, info: Mapping[str, Any] | None = None,
                      batch_size: int = 1024) -> GPEDData:
        """Data from ``torch.utils.data.Dataset`` objects, read once into tensors. ``train`` and
        ``test`` yield ``(x, y)`` pairs; ``distill`` and the ``ood`` sets yield inputs (or pairs,
        whose labels are dropped)."""
        train_x, train_y = read_dataset(train, batch_size, labelled=True)
        test_x, test_y = read_dataset(test, batch_size, labelled=True)
        distill_x = train_x if distill is None else read_dataset(distill, batch_size, labelled=False)[0]
        ood_x = {name: read_dataset(ds, batch_size, labelled=False)[0] for name, ds in (ood or {}).items()}
        return cls.from_tensors((train_x, train_y), (test_x, test_y), distill_x, ood_x, num_outputs,
                                distill_noise_std, info)


def infer_num_outputs(y: torch.Tensor) -> int:
    """Classes ``max(y) + 1`` for integer labels; columns for real-valued targets (1 for a vector)."""
    if not y.is_floating_point():
        if y.dim() != 1:
            raise ValueError(f"data: integer labels must be a vector (N,), got shape {tuple(y.shape)}")
        return int(y.max()) + 1
    return 1 if y.dim() == 1 else int(y.shape[1])


def check_targets(name: str, y: torch.Tensor, num_outputs: int) -> None:
    """``ValueError`` naming the set unless ``y`` fits ``num_outputs``: integer class labels a vector
    with values in ``[0, num_outputs)``, real-valued targets of shape ``(N,)`` (``num_outputs`` 1)
    or ``(N, num_outputs)``."""
    if y.is_complex():
        raise ValueError(f"data: {name} has complex dtype {y.dtype}; give integer labels or real-valued targets")
    if not y.is_floating_point():
        if y.dim() != 1:
            raise ValueError(f"data: {name} holds integer class labels, which must be a vector (N,), got shape "
                             f"{tuple(y.shape)}")
        if y.numel() == 0:
            return
        low, high = (int(v) for v in torch.aminmax(y.long()))
        if low < 0 or high >= num_outputs:
            outside = int(((y < 0) | (y >= num_outputs)).sum())
            raise ValueError(f"data: {name} holds class labels from {low} to {high}, but num_outputs={num_outputs} "
                             f"allows 0 to {num_outputs - 1} ({outside} label(s) outside); give labels in "
                             "[0, num_outputs) or a larger num_outputs")
        return
    if y.dim() == 1 and num_outputs == 1 or y.dim() == 2 and y.shape[1] == num_outputs:
        return
    raise ValueError(f"data: {name} holds real-valued (regression) targets of shape {tuple(y.shape)}, but "
                     f"num_outputs={num_outputs} needs shape (N, {num_outputs})"
                     + (" or (N,)" if num_outputs == 1 else ""))


def count_non_finite(t: torch.Tensor) -> int:
    """How many entries of ``t`` are NaN or infinite (0 for integer tensors). One reduction when
    there are none: a finite sum means every entry is finite (an overflowing sum of finite values
    falls back to the exact count)."""
    if not (t.is_floating_point() or t.is_complex()) or t.numel() == 0:
        return 0
    if bool(torch.isfinite(t.sum())):
        return 0
    return int(t.numel() - torch.isfinite(t).sum())


def describe_counts(counts: Mapping[str, int]) -> str:
    """``{"train_x": 3}`` -> ``"train_x (3 values)"``, joined by commas."""
    return ", ".join(f"{name} ({n} value{'s' if n != 1 else ''})" for name, n in counts.items())


def read_dataset(dataset: Dataset, batch_size: int, labelled: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """All items of ``dataset`` as tensors via a ``DataLoader``: ``(inputs, labels)`` for pairs
    (``labelled`` requires them), ``(inputs, None)`` otherwise."""
    xs, ys = [], []
    for batch in DataLoader(dataset, batch_size=batch_size, shuffle=False):
        if isinstance(batch, (list, tuple)):
            xs.append(torch.as_tensor(batch[0]))
            if len(batch) > 1:
                ys.append(torch.as_tensor(batch[1]))
        else:
            xs.append(torch.as_tensor(batch))
    if not xs:
        raise ValueError(f"data: the dataset {type(dataset).__name__} is empty")
    if labelled and not ys:
        raise ValueError(f"data: the dataset {type(dataset).__name__} must yield (input, label) pairs")
    x = torch.cat(xs)
    if not x.is_floating_point():
        x = x.float()
    return x, (torch.cat(ys) if ys else None)


def _update(digest: Any, name: str, tensor: torch.Tensor) -> None:
    digest.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype}".encode())
    digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
