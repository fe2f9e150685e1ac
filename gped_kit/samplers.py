"""Stochastic gradient Langevin dynamics (Welling and Teh, 2011) in the paper's convention.

Eq. 7 of the GPED paper::

    theta_{t+1} = theta_t + (eta_t / 2) * ( grad log p(theta) + (N / M) * sum_{i in S} grad log p(y_i | x_i, theta_t) )
                  + z_t,            z_t ~ N(0, eta_t I)

with a spherical Gaussian prior of mean 0 and precision tau, ``grad log p(theta) = -tau theta``.

**Convention.** ``eta`` multiplies *half* the gradient and is the *variance* of the noise.
Libraries that write ``theta += lr * grad + N(0, 2 lr)`` use ``lr = eta / 2``. For a full-batch
Gaussian target of precision ``a`` the chain's stationary variance is
``1 / (a (1 - eta a / 4))``; the tests check exactly this, which a wrong factor would break.

In terms of the minibatch *mean* negative log-likelihood ``L``,
``(N / M) sum_i grad log p(y_i|x_i, theta) = -N grad L``, so the update is
``theta -= (eta / 2) (N grad L + tau theta)`` plus noise, i.e. SGD on the mean NLL with
learning rate ``eta N / 2``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch

SCHEDULES = ("constant", "polynomial")


@dataclass(frozen=True)
class SGLDConfig:
    """Hyper-parameters of the SGLD teacher (Appendix A.2 defaults for MNIST).

    ``step_size`` is eta (Eq. 7); with ``schedule="polynomial"`` the step is
    ``eta_t = step_size * (1 + t / decay_steps) ** (-decay_power)`` (Welling and Teh's
    ``a (b + t)^-gamma`` form, normalised so that eta_0 = step_size). ``prior_precision`` is
    tau; ``batch_size`` is M.
    """

    step_size: float = 4e-6
    prior_precision: float = 10.0
    batch_size: int = 100
    schedule: str = "constant"
    decay_steps: float = 1e4
    decay_power: float = 0.55

    def __post_init__(self) -> None:
        if not (self.step_size > 0 and math.isfinite(self.step_size)):
            raise ValueError(f"SGLDConfig.step_size={self.step_size!r}: must be finite and > 0")
        if not self.prior_precision >= 0:
            raise ValueError(f"SGLDConfig.prior_precision={self.prior_precision!r}: must be >= 0")
        if not (isinstance(self.batch_size, int) and self.batch_size >= 1):
            raise ValueError(f"SGLDConfig.batch_size={self.batch_size!r}: must be an integer >= 1")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"SGLDConfig.schedule={self.schedule!r} is not known; allowed: {SCHEDULES}")
        if self.schedule == "polynomial" and not (self.decay_steps > 0 and 0 < self.decay_power <= 1):
            raise ValueError(
                f"polynomial schedule needs decay_steps > 0 and 0 < decay_power <= 1, got "
                f"decay_steps={self.decay_steps!r}, decay_power={self.decay_power!r}"
            )

    def step_size_at(self, t: int) -> float:
        """eta_t for iteration t (a host-side float: no device synchronisation)."""
        if self.schedule == "constant":
            return self.step_size
        return self.step_size * (1.0 + t / self.decay_steps) ** (-self.decay_power)


def sgld_update_(
    params: Sequence[torch.Tensor],
    nll_grads: Sequence[torch.Tensor],
    noise: Sequence[torch.Tensor],
    step_size: float,
    num_data: int,
    prior_precision: float,
) -> None:
    """In-place Eq. 7 given ``nll_grads`` = gradient of the minibatch *mean* NLL and standard
    normal ``noise``: ``theta -= (eta/2) (N grad L + tau theta) - sqrt(eta) xi``.

    ``nll_grads`` and ``noise`` are used as scratch space (overwritten).
    """
    grads = list(nll_grads)
    if prior_precision:
        torch._foreach_add_(grads, list(params), alpha=prior_precision / num_data)
    torch._foreach_add_(list(params), grads, alpha=-0.5 * step_size * num_data)
    torch._foreach_add_(list(params), list(noise), alpha=math.sqrt(step_size))


class SGLD:
    """SGLD sampler over a fixed list of parameter tensors (Eq. 7).

    ``step(mean_nll, t)`` differentiates the minibatch mean NLL, applies the update and
    returns nothing: no value is read back to the host, so the caller's loop never waits for
    the device. Noise comes from ``generator`` (on the parameters' device) for reproducibility.
    """

    def __init__(self, params: Sequence[torch.Tensor], num_data: int, config: SGLDConfig,
                 generator: torch.Generator | None = None) -> None:
        self.params = [p for p in params]
        if not self.params:
            raise ValueError("SGLD needs at least one parameter tensor")
        if num_data < 1:
            raise ValueError(f"SGLD num_data={num_data!r}: must be >= 1 (N = |D|)")
        self.num_data = num_data
        self.config = config
        self.generator = generator
        total = sum(p.numel() for p in self.params)
        first = self.params[0]
        self._noise_flat = torch.empty(total, device=first.device, dtype=first.dtype)
        self._noise = list(torch.split(self._noise_flat, [p.numel() for p in self.params]))
        self._noise = [n.view_as(p) for n, p in zip(self._noise, self.params)]

    def step(self, mean_nll: torch.Tensor, t: int) -> None:
        grads = torch.autograd.grad(mean_nll, self.params)
        self._noise_flat.normal_(generator=self.generator)
        with torch.no_grad():
            sgld_update_(self.params, grads, self._noise, self.config.step_size_at(t),
                         self.num_data, self.config.prior_precision)
