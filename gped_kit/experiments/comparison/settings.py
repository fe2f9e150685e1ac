"""The comparison's settings: the MNIST chain with its Hydra (:class:`ComparisonSettings`), the spiral
toy with its own (:class:`SpiralSettings`), the :data:`PROFILES`, the evaluation sets and the names of
the references and of the zero-MU baseline."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ...baselines.hydra import HydraConfig
from ...core.options import check_int, check_positive
from ...core.targets import ENTROPY_LOSSES
from ...data.spiral import SpiralConfig
from ..paper import LONG_NUM_CHAINS, OneThinningSettings, long_sampler, paper_model


@dataclass(frozen=True)
class SpiralSettings:
    """The spiral toy of the comparison: its data (:class:`~gped_kit.data.spiral.SpiralConfig`; the
    notebook's seed replaces ``data.seed``), its chain (T = ``num_iterations``, B = ``burn_in``,
    eta = ``step_size``, S = ``num_snapshots`` kept samples, students every H = ``thinning`` steps)
    and the Hydra trained on its snapshots (:class:`~gped_kit.baselines.hydra.HydraConfig`)."""

    data: SpiralConfig = SpiralConfig()
    num_iterations: int = 6_000
    burn_in: int = 2_000
    step_size: float = 2e-4
    num_snapshots: int = 10
    thinning: int = 2
    hydra: HydraConfig = HydraConfig()

    def __post_init__(self) -> None:
        for name, minimum in (("num_iterations", 1), ("burn_in", 0), ("num_snapshots", 2), ("thinning", 1)):
            check_int(f"spiral.{name}", getattr(self, name), minimum)
        check_positive("spiral.step_size", self.step_size)


@dataclass(frozen=True)
class ComparisonSettings(OneThinningSettings):
    """A profile of the comparison: the MNIST chain (:class:`~gped_kit.experiments.paper.OneThinningSettings`:
    one H for every student), its model, data and kept snapshots S; the KD variants' input noise and
    derivative weight gamma; ``hydra``, the Hydra trained on the MNIST chain's snapshots (paper 002:
    heads, temperature, steps, learning rate; :class:`~gped_kit.baselines.hydra.HydraConfig`);
    ``spiral``, the spiral toy with its own Hydra (:class:`SpiralSettings`); and the loss of the
    ``GPED`` student's entropy column (``"absolute"``, the paper's, or ``"squared"``; the other one,
    and a GPED student updated every step, run beside it as variants, see :func:`comparison_students`)."""

    model: str = "fcnn"
    labelled_size: int = 60_000
    mask_size: int = 0
    num_snapshots: int = 20
    perturb_std: float = 0.3
    derivative_weight: float = 1.0
    hydra: HydraConfig = HydraConfig()
    spiral: SpiralSettings = SpiralSettings()
    gped_entropy_loss: str = "absolute"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.gped_entropy_loss not in ENTROPY_LOSSES:
            raise ValueError(f"gped_entropy_loss={self.gped_entropy_loss!r} is not known; allowed: "
                             f"{sorted(ENTROPY_LOSSES)}")
        if paper_model(self.model).dataset != "mnist":
            raise ValueError(f"model={self.model!r}: the comparison runs on MNIST; allowed: 'fcnn', 'cnn_mnist'")
        check_int("labelled_size", self.labelled_size, 1)
        check_int("mask_size", self.mask_size, 0)
        check_int("num_snapshots", self.num_snapshots, 2)
        for name in ("perturb_std", "derivative_weight"):
            check_positive(name, getattr(self, name), allow_zero=True)
        for name, config, kind in (("hydra", self.hydra, HydraConfig), ("spiral", self.spiral, SpiralSettings)):
            if not isinstance(config, kind):
                raise TypeError(f"{name} must be a {kind.__name__}, got {type(config).__name__}")


#: The CPU profile: one SGLD chain of T = 4,000 on all of MNIST, S = 20 snapshots, students every 2 steps, Hydra
#: and the spiral with their defaults.
DEFAULT = ComparisonSettings(num_iterations=4_000, burn_in=1_000, thinning=2, eval_thinning=50, log_every=500,
                             checkpoint_every=1_000)

PROFILES: dict[str, ComparisonSettings] = {
    "default": DEFAULT,
    # Appendix A.2's chain (T = 10^6, H = 10), S = 50 snapshots, Hydra's paper budget, a long spiral chain.
    "paper": dataclasses.replace(
        DEFAULT, num_iterations=1_000_000, burn_in=None, thinning=10, eval_thinning=100, log_every=10_000,
        checkpoint_every=50_000, num_snapshots=50, hydra=HydraConfig(phase1_steps=20_000, phase2_steps=60_000),
        spiral=dataclasses.replace(DEFAULT.spiral, num_iterations=100_000, burn_in=10_000,
                                   hydra=HydraConfig(phase1_steps=5_000, phase2_steps=20_000))),
    # A teacher near the paper's on a CPU (issue 28): four pooled BAOA chains of 16,000 steps with a
    # cyclical step size (paper.long_sampler); S = 5 snapshots per chain (20 in all, as the default's);
    # GPED's students take (16,000 x 0.3) / H = 2,400 updates, and Hydra the same 2,400 steps (800 + 1,600).
    "long": dataclasses.replace(DEFAULT, num_iterations=16_000, log_every=2_000, checkpoint_every=2_000,
                                sampler=long_sampler(16_000), num_chains=LONG_NUM_CHAINS, num_snapshots=5,
                                hydra=HydraConfig(phase1_steps=800, phase2_steps=1_600)),
}
#: Evaluation sets of the MNIST comparison: the MNIST test set rotated by 60 degrees (labelled; a
#: rotated set like the Hydra paper's Table 1 row "MNIST (rotated)", not its "MNIST (shifted)"
#: row of translated images) and Fashion-MNIST (OOD, when present).
COMPARISON_SHIFT_SETS = ("mnist_rotated60",)
COMPARISON_OOD_SETS = ("fashion_mnist",)
#: The baseline that predicts model uncertainty 0 for every input (a row of :func:`comparison_table`).
ZERO_MU = "Zero MU (baseline)"
#: The references of the comparison: the online Monte Carlo means of the whole chain, and its kept snapshots.
TEACHER, SNAPSHOTS = "Long-chain teacher", "Snapshot ensemble"
