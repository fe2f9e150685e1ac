"""Experiment 2's settings (:class:`Experiment2Settings`) and profiles (:data:`PROFILES`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ...core.options import check_int
from ..batching import check_chains_per_batch
from ..claims import THREE_SEEDS, check_seeds
from ..paper import SHORT_PROFILE_WARMUP, ChainSettings


@dataclass(frozen=True)
class Experiment2Settings(ChainSettings):
    """A profile of Experiment 2: the chains (:class:`~gped_kit.experiments.paper.ChainSettings`), the MNIST
    grid (``labelled_sizes`` x ``mask_sizes``), the CIFAR-10 sizes, the masks of the learning-rate schedule
    check, how many chains run as one batch, and the seeds of the grid (``seeds``: one chain per seed and cell,
    so that every trend count comes with its spread over seeds; :data:`~gped_kit.experiments.claims.THREE_SEEDS`
    asks for three)."""

    labelled_sizes: tuple[int, ...] = (10_000, 60_000)
    mask_sizes: tuple[int, ...] = (0, 15, 25)
    cifar_labelled_sizes: tuple[int, ...] = (10_000, 50_000)
    lr_check_masks: tuple[int, ...] = (15,)
    chains_per_batch: int | str = 1
    seeds: tuple[int, ...] = (0,)

    def __post_init__(self) -> None:
        super().__post_init__()
        for name, minimum in (("labelled_sizes", 1), ("mask_sizes", 0), ("cifar_labelled_sizes", 1),
                              ("lr_check_masks", 0)):
            values = tuple(getattr(self, name))
            for i, value in enumerate(values):
                check_int(f"{name}[{i}]", value, minimum)
            object.__setattr__(self, name, values)
        check_chains_per_batch("chains_per_batch", self.chains_per_batch)
        if isinstance(self.seeds, list):  # a notebook parameter (papermill -y "seeds: [0, 1, 2]") is a list
            object.__setattr__(self, "seeds", tuple(self.seeds))
        check_seeds("seeds", self.seeds)


#: The CPU profile: a reduced grid with short chains (T = 5,000, B = 3,000, students updated every 2 steps, eta
#: scaled so that eta N is the paper's at every |D|), masks {0, 15, 25}: no mask, the hardest of the paper's
#: rates and the near-uniform one; the students' learning rate warmed up over 100 updates (a deviation:
#: :data:`~gped_kit.experiments.paper.SHORT_PROFILE_WARMUP`).
DEFAULT = Experiment2Settings(num_iterations=5_000, burn_in=3_000, predictive_thinning=2, entropy_thinning=2,
                              eval_thinning=50, log_every=500, checkpoint_every=1_000, scale_step_size=True,
                              student_lr_warmup=SHORT_PROFILE_WARMUP)

PROFILES: dict[str, Experiment2Settings] = {
    "default": DEFAULT,
    # Appendix A.2 and the full grids (T = 10^6, fixed eta, H = 100 predictive / 10 entropy), for a GPU, with
    # the grid's chains run 24 at a time as one batched computation.
    "paper": Experiment2Settings(num_iterations=1_000_000, burn_in=None, predictive_thinning=100, entropy_thinning=10,
                                 eval_thinning=100, log_every=10_000, checkpoint_every=50_000,
                                 labelled_sizes=(10_000, 20_000, 30_000, 60_000), mask_sizes=(0, 5, 10, 15, 20, 25),
                                 cifar_labelled_sizes=(10_000, 20_000, 50_000), lr_check_masks=(),
                                 chains_per_batch="auto"),
    # Every trend count with its spread over three seeds: the default profile's grid once per seed 0, 1, 2
    # (seed 0's chains are the default's, reused from the store); the default keeps one seed so that
    # `make figures` stays short.
    "seeds": dataclasses.replace(DEFAULT, seeds=THREE_SEEDS),
}
