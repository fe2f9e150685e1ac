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
from .sampler import MomentumSamplerConfig, SamplerName, Scales, add_scaled_, momenta


@dataclass(frozen=True)
class SGHMCConfig(MomentumSamplerConfig):
    """SGHMC (module docstring); fields as in :class:`~.sampler.MomentumSamplerConfig`."""

    name: ClassVar[SamplerName] = SamplerName.SGHMC

    def factors(self, epsilon: float) -> tuple[float, float, float, float, float]:
        """``(epsilon, -epsilon, epsilon beta, epsilon sigma^-2, 1 - epsilon sigma^-2 alpha)``: the step, the
        gradient's factor, the noise's correction, theta's drift and the momenta's decay (:func:`sghmc_update_`)."""
        return sghmc_factors(epsilon, self.alpha, self.beta, self.sigma)

    def update_(self, params: dict[str, torch.Tensor], state: dict[str, torch.Tensor],
                nll_grads: dict[str, torch.Tensor], noise: dict[str, torch.Tensor], coefficients: torch.Tensor,
                scales: Scales) -> None:
        """One SGHMC step in place; ``nll_grads`` and ``noise`` are overwritten (scratch)."""
        sghmc_update_(params, state, nll_grads, noise, coefficients, scales, self.alpha)


def sghmc_factors(epsilon: float, alpha: float, beta: float, sigma: float) -> tuple[float, float, float, float, float]:
    """The step-size factors of :func:`sghmc_update_` (host floats, float64): ``(epsilon, -epsilon,
    epsilon beta, epsilon sigma^-2, 1 - epsilon sigma^-2 alpha)``."""
    precision = sigma ** -2
    return epsilon, -epsilon, epsilon * beta, epsilon * precision, 1.0 - epsilon * precision * alpha


def sghmc_update_(params: dict[str, torch.Tensor], state: dict[str, torch.Tensor],
                  nll_grads: dict[str, torch.Tensor], noise: dict[str, torch.Tensor], coefficients: torch.Tensor,
                  scales: Scales, alpha: float, friction: torch.Tensor | None = None) -> None:
    """The SGHMC update of the module docstring in place. ``coefficients`` = ``(tau / N, T)`` per chain;
    ``scales`` the step's factors (:func:`sghmc_factors`: host floats, or the same values as a float32 row on
    the device); ``friction`` replaces alpha in the friction term only (SGNHT's thermostat xi_t), so the
    momenta decay by ``1 - (epsilon sigma^-2) xi_t``. Per element::

        g     <- g + (tau / N) theta                      (-grad log_post)
        theta <- theta + (epsilon sigma^-2) m
        m     <- decay m + (-epsilon) g + sqrt(T epsilon (2 alpha - T (epsilon beta))) xi
    """
    prior, temperature = coefficients[0], coefficients[1]
    epsilon, neg_epsilon, epsilon_beta, drift, decay = scales[0], scales[1], scales[2], scales[3], scales[4]
    noise_scale = (temperature * epsilon * (2.0 * alpha - temperature * epsilon_beta)).sqrt()
    if friction is not None:
        decay = 1.0 - drift * friction
    with torch.no_grad():
        for theta, grad, m, xi in units(params, nll_grads, momenta(params, state), noise):
            grad.add_(theta * prior)  # -grad log_post = g + (tau / N) theta
            add_scaled_(theta, m, drift)
            add_scaled_(m.mul_(decay), grad, neg_epsilon).add_(xi.mul_(noise_scale))
