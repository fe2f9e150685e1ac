"""Stochastic gradient Nose-Hoover thermostat (Ding et al., 2014), in the parameterisation of
``posteriors.sgmcmc.sgnht``.

As SGHMC (:mod:`.sghmc`, same log posterior, ``T = 1 / N``), with the friction a thermostat
xi_t that adapts until the momenta's kinetic energy matches the temperature::

    theta_{t+1} = theta_t + epsilon sigma^-2 m_t
    m_{t+1}     = m_t + epsilon grad log_post(theta_t) - epsilon sigma^-2 xi_t m_t
                  + sqrt(epsilon T (2 alpha - epsilon T beta)) zeta_t,      zeta_t ~ N(0, I)
    xi_{t+1}    = xi_t + epsilon (sigma^-2 mean(m_t^2) - T)

(the mean over all d parameters); xi_0 = alpha, m_0 = 0. The thermostat absorbs an unknown
gradient-noise level, so xi settles where it is needed rather than where alpha was guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from .flat import FlatTensors, sum_per_chain
from .sampler import MomentumSamplerConfig, SamplerName, Scales, StateKey, StateKind, momenta
from .sghmc import sghmc_factors, sghmc_update_

#: The sampler-state key of the thermostat xi.
THERMOSTAT_KEY = str(StateKey(StateKind.THERMOSTAT))


@dataclass(frozen=True)
class SGNHTConfig(MomentumSamplerConfig):
    """SGNHT (module docstring); fields as in :class:`~.sampler.MomentumSamplerConfig`, alpha
    also the thermostat's initial value."""

    name: ClassVar[SamplerName] = SamplerName.SGNHT

    def init_state(self, params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Momenta m_0 = 0 and the thermostat xi_0 = alpha."""
        state = super().init_state(params)
        device = next(iter(params.values())).device
        state[THERMOSTAT_KEY] = torch.full((), self.alpha, device=device)
        return state

    def factors(self, epsilon: float) -> tuple[float, float, float, float, float]:
        """SGHMC's factors (:func:`~.sghmc.sghmc_factors`; the momenta's decay there is unused: the thermostat
        replaces alpha)."""
        return sghmc_factors(epsilon, self.alpha, self.beta, self.sigma)

    def update_(self, params: dict[str, torch.Tensor], state: dict[str, torch.Tensor],
                nll_grads: dict[str, torch.Tensor], noise: dict[str, torch.Tensor], coefficients: torch.Tensor,
                scales: Scales) -> None:
        """One SGNHT step in place; ``nll_grads`` and ``noise`` are overwritten (scratch). ``scales``: host
        floats or a float32 row of :meth:`factors`, ``epsilon`` first."""
        epsilon = scales[0]
        xi = state[THERMOSTAT_KEY]
        with torch.no_grad():
            moms = momenta(params, state)
            chain_axis = isinstance(moms, FlatTensors)  # (K, 1) sums, one per chain, from the per-parameter views
            kinetic = (sum(sum_per_chain(m * m, chain_axis) for m in moms.values())
                       / sum(m[0].numel() if chain_axis else m.numel() for m in moms.values()))
            xi_next = xi + epsilon * (kinetic * self.sigma ** -2 - coefficients[1])
        sghmc_update_(params, state, nll_grads, noise, coefficients, scales, self.alpha, friction=xi)
        with torch.no_grad():
            xi.copy_(xi_next)
