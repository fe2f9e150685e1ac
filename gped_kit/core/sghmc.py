"""Stochastic gradient Hamiltonian Monte Carlo (Chen, Fox and Guestrin, 2014), in the
parameterisation of ``posteriors.sgmcmc.sghmc``.

With the per-datum log posterior ``log_post(theta) = -(L(theta) + tau |theta|^2 / (2N))`` (L the
minibatch mean NLL), temperature ``T = 1 / N`` (the Bayes posterior), step size epsilon,
friction alpha, gradient-noise estimate beta and mass sigma::

    theta_{t+1} = theta_t + epsilon sigma^-2 m_t
    m_{t+1}     = m_t + epsilon grad log_post(theta_t) - epsilon sigma^-2 alpha m_t
                  + sqrt(epsilon T (2 alpha - epsilon T beta)) xi_t,      xi_t ~ N(0, I)

Both lines read theta_t and m_t (the old momentum moves theta). As epsilon -> 0 the chain leaves
``exp(log_post(theta) / T - |m|^2 / (2 sigma^2 T))`` invariant, i.e. the posterior in theta.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from .flat import units
from .sampler import MomentumSamplerConfig, SamplerName, momenta


@dataclass(frozen=True)
class SGHMCConfig(MomentumSamplerConfig):
    """SGHMC (module docstring); fields as in :class:`~.sampler.MomentumSamplerConfig`."""

    name: ClassVar[SamplerName] = SamplerName.SGHMC

    def update_(self, params: dict[str, torch.Tensor], state: dict[str, torch.Tensor],
                nll_grads: dict[str, torch.Tensor], noise: dict[str, torch.Tensor], coefficients: torch.Tensor,
                scales: tuple[float, ...]) -> None:
        """One SGHMC step in place; ``nll_grads`` and ``noise`` are overwritten (scratch)."""
        sghmc_update_(params, state, nll_grads, noise, coefficients, scales[0], self.alpha, self.beta, self.sigma)


def sghmc_update_(params: dict[str, torch.Tensor], state: dict[str, torch.Tensor],
                  nll_grads: dict[str, torch.Tensor], noise: dict[str, torch.Tensor], coefficients: torch.Tensor,
                  epsilon: float, alpha: float, beta: float, sigma: float,
                  friction: torch.Tensor | float | None = None) -> None:
    """The SGHMC update of the module docstring in place. ``coefficients`` = ``(tau / N, T)``
    per chain; ``friction`` replaces alpha in the friction term only (SGNHT's thermostat xi_t)."""
    prior, temperature = coefficients[0], coefficients[1]
    precision = sigma ** -2
    noise_scale = (temperature * epsilon * (2.0 * alpha - temperature * (epsilon * beta))).sqrt()
    decay = 1.0 - epsilon * precision * (alpha if friction is None else friction)
    with torch.no_grad():
        for theta, grad, m, xi in units(params, nll_grads, momenta(params, state), noise):
            grad.add_(theta * prior)  # -grad log_post = g + (tau / N) theta
            theta.add_(m, alpha=epsilon * precision)
            m.mul_(decay).add_(grad, alpha=-epsilon).add_(xi.mul_(noise_scale))
