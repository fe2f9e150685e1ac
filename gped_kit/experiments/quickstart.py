"""The quickstart (notebook 00): one FCNN chain on MNIST with a predictive and an entropy student."""

from __future__ import annotations

from dataclasses import dataclass

from .paper import ChainSettings


@dataclass(frozen=True)
class QuickstartSettings(ChainSettings):
    """The quickstart's chain (see :class:`~gped_kit.experiments.paper.ChainSettings`)."""


PROFILES: dict[str, QuickstartSettings] = {
    # CPU, about a minute: a short chain, students updated every 2 teacher steps so that they see
    # enough minibatches in 5,000 iterations.
    "default": QuickstartSettings(num_iterations=5_000, burn_in=1_000, predictive_thinning=2, entropy_thinning=2,
                                  eval_thinning=100, log_every=500, checkpoint_every=1_000),
    # Appendix A.2: T = 10^6, B = 1,000, H = 100 (predictive) / 10 (entropy).
    "paper": QuickstartSettings(num_iterations=1_000_000, burn_in=1_000, predictive_thinning=100, entropy_thinning=10,
                                eval_thinning=100, log_every=10_000, checkpoint_every=50_000),
}
