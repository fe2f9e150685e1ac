"""BAOA Langevin splitting (Leimkuhler and Matthews, 2015, p. 271), in the parameterisation of
``posteriors.sgmcmc.baoa``.

Same log posterior and ``T = 1 / N`` as :mod:`.sghmc`; with gamma = alpha sigma^-2 one step is
a kick (B), half a drift (A), an exact Ornstein-Uhlenbeck step of the momenta (O), half a drift::

    m'          = m_t + epsilon grad log_post(theta_t)                         (B)
    theta'      = theta_t + (epsilon / 2) sigma^-2 m'                          (A)
    m_{t+1}     = exp(-gamma epsilon) m' + sigma sqrt(T (1 - exp(-2 gamma epsilon))) xi_t   (O)
    theta_{t+1} = theta' + (epsilon / 2) sigma^-2 m_{t+1}                      (A)

xi_t ~ N(0, I), m_0 = 0. The O step is exact for any epsilon, so the friction never overshoots.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from .flat import units
from .sampler import MomentumSamplerConfig, SamplerName, Scales, add_scaled_, momenta


@dataclass(frozen=True)
class BAOAConfig(MomentumSamplerConfig):
    """BAOA (module docstring); fields as in :class:`~.sampler.MomentumSamplerConfig` but ``beta``, which BAOA
    does not read (its O step is exact): only its default 0.0 is allowed, so a result key never records it."""

    name: ClassVar[SamplerName] = SamplerName.BAOA

    def __post_init__(self) -> None:
        """Validate the fields (:class:`~.sampler.MomentumSamplerConfig`); ``ValueError`` for a ``beta`` other
        than its default, which BAOA would ignore while it changed the run's result key."""
        super().__post_init__()
        if self.beta != MomentumSamplerConfig.beta:
            raise ValueError(f"BAOAConfig.beta={self.beta!r} is not read by BAOA (its O step is exact, with no "
                             f"gradient-noise estimate); allowed: the default {MomentumSamplerConfig.beta!r} (leave "
                             "beta out), or use SGHMCConfig / SGNHTConfig, which read it")

    def factors(self, epsilon: float) -> tuple[float, float, float, float, float]:
        """``(epsilon, -epsilon, (epsilon / 2) sigma^-2, exp(-gamma epsilon), 1 - exp(-2 gamma epsilon))`` with
        gamma = alpha sigma^-2: the step, the kick's factor, the half drift, the O step's decay and its noise
        variance over T sigma^2 (:meth:`update_`)."""
        gamma = self.alpha * self.sigma ** -2
        return (epsilon, -epsilon, 0.5 * epsilon * self.sigma ** -2, math.exp(-gamma * epsilon),
                -math.expm1(-2.0 * gamma * epsilon))

    def update_(self, params: dict[str, torch.Tensor], state: dict[str, torch.Tensor],
                nll_grads: dict[str, torch.Tensor], noise: dict[str, torch.Tensor], coefficients: torch.Tensor,
                scales: Scales) -> None:
        """One BAOA step in place; ``nll_grads`` and ``noise`` are overwritten (scratch). ``scales``: host
        floats or a float32 row of :meth:`factors`."""
        neg_epsilon, drift, decay, noise_variance = scales[1], scales[2], scales[3], scales[4]
        prior, temperature = coefficients[0], coefficients[1]
        noise_scale = (temperature * noise_variance).sqrt() * self.sigma
        with torch.no_grad():
            for theta, grad, m, xi in units(params, nll_grads, momenta(params, state), noise):
                grad.add_(theta * prior)
                add_scaled_(m, grad, neg_epsilon)
                add_scaled_(theta, m, drift)
                m.mul_(decay).add_(xi.mul_(noise_scale))
                add_scaled_(theta, m, drift)
