"""A 2-D, two-class spiral toy (the Hydra paper's Section 3.1) with a grid for uncertainty maps."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .container import GPEDData
from .transforms import seeded_generator


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


def spiral_data(cfg: SpiralConfig = SpiralConfig()) -> GPEDData:
    """The spiral toy as :class:`~gped_kit.data.container.GPEDData`: 2-D feature vectors, two
    classes, the grid as the unlabelled evaluation set ``"grid"``."""
    gen = seeded_generator(cfg.seed)
    train_x, train_y = spiral_points(cfg.labelled_size, cfg, gen)
    distill_x, _ = spiral_points(cfg.distill_size, cfg, gen)
    test_x, test_y = spiral_points(cfg.test_size, cfg, gen)

    fields = {k: (list(v) if isinstance(v, tuple) else v) for k, v in cfg.__dict__.items()}
    return GPEDData(train_x=train_x, train_y=train_y, distill_x=distill_x, test_x=test_x, test_y=test_y,
                    num_outputs=2, ood_x={"grid": spiral_grid(cfg)},
                    info={"dataset": "spiral", "labelled_size": cfg.labelled_size, "data_seed": cfg.seed},
                    identity=fields)
