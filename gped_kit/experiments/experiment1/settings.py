"""Experiment 1's settings (:class:`Experiment1Settings`) and profiles (:data:`PROFILES`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ...core.options import check_int
from ..batching import check_chains_per_batch
from ..paper import BAOA_SAMPLER, SHORT_PROFILE_WARMUP, ChainSettings


@dataclass(frozen=True)
class Experiment1Settings(ChainSettings):
    """A profile of Experiment 1 (Table 1): the chains (:class:`~gped_kit.experiments.paper.ChainSettings`),
    the seeds every model runs once each (``table1_seeds``, so that ours beside the paper's comes with a
    seed spread) and how many chains run as one batch. ``ablation_at_profile_length``: the U_s - U_o ablation
    (:mod:`~gped_kit.experiments.experiment1.ablation`) runs one FCNN chain of this profile's own length and H
    (seed 0) instead of the fixed 20,000-step chains of three seeds (the paper profile: T = 10^6)."""

    table1_seeds: tuple[int, ...] = (0, 1, 2)
    chains_per_batch: int | str = 1
    ablation_at_profile_length: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        seeds = tuple(self.table1_seeds)
        for i, value in enumerate(seeds):
            check_int(f"table1_seeds[{i}]", value, 0)
        object.__setattr__(self, "table1_seeds", seeds)
        check_chains_per_batch("chains_per_batch", self.chains_per_batch)
        if not isinstance(self.ablation_at_profile_length, bool):
            raise ValueError(f"ablation_at_profile_length={self.ablation_at_profile_length!r}: must be True or False")


#: The CPU profile: short chains (T = 5,000, B = 3,000), students every 2 steps with their learning rate warmed
#: up over 100 updates (a deviation: :data:`~gped_kit.experiments.paper.SHORT_PROFILE_WARMUP`), eta scaled so
#: that eta N is the paper's at every |D|, three seeds.
DEFAULT = Experiment1Settings(num_iterations=5_000, burn_in=3_000, predictive_thinning=2, entropy_thinning=2,
                              eval_thinning=50, log_every=500, checkpoint_every=1_000, scale_step_size=True,
                              student_lr_warmup=SHORT_PROFILE_WARMUP)

PROFILES: dict[str, Experiment1Settings] = {
    "default": DEFAULT,
    # Appendix A.2: T = 10^6, the paper's fixed eta and B, H = 100 (predictive) / 10 (entropy), one seed.
    "paper": Experiment1Settings(num_iterations=1_000_000, burn_in=None, predictive_thinning=100, entropy_thinning=10,
                                 eval_thinning=100, log_every=10_000, checkpoint_every=50_000, table1_seeds=(0,),
                                 chains_per_batch="auto", ablation_at_profile_length=True),
    # Table 1 on a CPU in at most 30 minutes for both models, three seeds: a teacher pooled from 2 BAOA chains
    # of 20,000 steps (constant epsilon 0.2, alpha 0.5), students every H = 2 steps, as notebook 10's "BAOA, 2
    # chains pooled" (there 2 x 24,000 steps), which at equal work (FCNN) comes close to one chain's teacher and
    # entropy MAE in less time, while cyclical step sizes give about twice the entropy MAE (students distil only
    # in the sampling phases) and 4 or 8 shorter chains worse teachers: notebook 10's pooling profile, its numbers
    # in figures/10_samplers_pooling_table.md. 2 x 20,000 rather than 2 x 24,000 steps keeps both models
    # within 30 minutes (measured at 24,000: FCNN ~11 min, CNN-MNIST ~21 min a seed). A student takes
    # (20,000 - 1,000) / 2 = 9,500 updates (one per engine step that distils, fed by both chains), so a U_o
    # student sees each D' input 9,500 x 100 / 60,000 = 16 times.
    # Its students keep the paper's recipe (no warm-up): 9,500 updates each, and its entropy students learn.
    "cpu30": dataclasses.replace(DEFAULT, num_iterations=20_000, burn_in=1_000, log_every=2_000,
                                 checkpoint_every=2_000, scale_step_size=False, sampler=BAOA_SAMPLER, num_chains=2,
                                 student_lr_warmup=0),
}
