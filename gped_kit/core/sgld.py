"""Stochastic gradient Langevin dynamics (Welling and Teh, 2011) in the paper's convention.

Eq. 7 of the GPED paper::

    theta_{t+1} = theta_t + (eta_t / 2) * ( grad log p(theta) + (N / M) * sum_{i in S} grad log p(y_i | x_i, theta_t) )
                  + z_t,            z_t ~ N(0, eta_t I)

with a spherical Gaussian prior of mean 0 and precision tau, ``grad log p(theta) = -tau theta``.

**Convention.** ``eta`` multiplies *half* the gradient and is the *variance* of the noise.
Libraries that write ``theta += lr * grad + N(0, 2 lr)`` (e.g. ``posteriors``) use
``lr = eta / 2``. For a full-batch Gaussian target of precision ``a`` the chain's stationary
variance is ``1 / (a (1 - eta a / 4))`` (:func:`stationary_variance`); the tests check exactly
this, which a wrong factor would break.

In terms of the minibatch *mean* negative log-likelihood ``L``,
``(N / M) sum_i grad log p(y_i|x_i, theta) = -N grad L``, so the update is::

    theta <- theta - (eta / 2) (N grad L + tau theta) + sqrt(eta) xi,    xi ~ N(0, I)

i.e. SGD on the mean NLL with learning rate ``eta N / 2`` plus noise. :func:`sgld_update_`
computes it in place, as three multiply-adds per parameter tensor, from three per-chain
coefficients (:meth:`SGLDConfig.coefficients`: ``tau / N``, ``-eta_0 N / 2``, ``sqrt(eta_0)``)
times the schedule's factors at step t (:meth:`SGLDConfig.scales`: ``1``, ``eta_t / eta_0``,
``sqrt(eta_t / eta_0)``, host floats shared by every chain of a batch). With the coefficients
given per chain (a tensor under ``torch.func.vmap``) it is the same formula for a batch of chains.

**Counter-based noise** (``GPEDConfig(random_numbers="counter")``, :class:`~gped_kit.core.options.RandomNumbers`):
:func:`sgld_counter_update_` computes the same Eq. 7 over the batch's flat ``(K, P)`` buffer with xi drawn
inside the update from Philox-4x32-10 (:mod:`.philox`), keyed by each chain's noise seed, the step t and
the element; the engine runs it compiled (:class:`~gped_kit.core.fused.Fused`: one fused loop on the CPU,
Triton kernels on CUDA, from the same code) instead of the per-chain ``normal_`` draws and the six
element-wise kernels of :func:`sgld_update_`.

**Fused** (the engine's update of an SGLD teacher with the default random numbers, over a buffer of at least
:data:`FUSED_MIN_ELEMENTS` for its device): :func:`sgld_fused_update_` computes :func:`sgld_update_`'s numbers bit
for bit in one compiled loop over the ``(K, P)`` buffer, its noise drawn before by the chains' generators.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar, Sequence

import torch

from .flat import units
from .philox import counter_normal
from .sampler import SamplerConfig, SamplerName

#: The smallest ``(K, P)`` buffer (K chains' P parameters) the engine updates with :func:`sgld_fused_update_`, by
#: device type. Compiling the loop for a shape takes seconds. On the CPU the loop saves only passes over memory:
#: 0.1 ms a step for one FCNN chain (478,410 parameters), 1.3 ms for four, 5 ms for twelve; so from 2^21 elements
#: (8 MiB of float32, five FCNN chains). On CUDA it also saves kernel launches (the CPU's count of a step drops by
#: six), so from 2^18 (1 MiB: one FCNN chain). Other devices take the CPU's.
FUSED_MIN_ELEMENTS: dict[str, int] = {"cpu": 2 ** 21, "cuda": 2 ** 18}

#: Number of per-chain coefficients :func:`sgld_update_` takes: (tau / N, -eta N / 2, sqrt(eta)).
NUM_COEFFICIENTS = 3


@dataclass(frozen=True)
class SGLDConfig(SamplerConfig):
    """Hyper-parameters of the SGLD teacher (Appendix A.2 defaults for MNIST).

    ``step_size`` is eta (Eq. 7); with ``schedule="polynomial"`` the step is
    ``eta_t = step_size * (1 + t / decay_steps) ** (-decay_power)`` (Welling and Teh's
    ``a (b + t)^-gamma`` form, normalised so that eta_0 = step_size), and an optional warm-up
    multiplies it (:mod:`.sampler`). ``prior_precision`` is tau; ``batch_size`` is M.
    """

    name: ClassVar[SamplerName] = SamplerName.SGLD
    num_coefficients: ClassVar[int] = NUM_COEFFICIENTS
    device_scales: ClassVar[bool] = True
    per_chain_fields: ClassVar[tuple[str, ...]] = ("step_size", "prior_precision")

    def coefficients(self, num_data: int) -> tuple[float, float, float]:
        """The per-chain coefficients of Eq. 7 for a labelled set of ``num_data`` = N examples:
        ``(tau / N, -eta_0 N / 2, sqrt(eta_0))`` (see :func:`sgld_update_`)."""
        eta = self.step_size
        return self.prior_precision / num_data, -0.5 * eta * num_data, math.sqrt(eta)

    def scales(self, t: int) -> tuple[float, float, float]:
        """The step-size factors at step ``t``: ``(1, eta_t / eta_0, sqrt(eta_t / eta_0))``."""
        if not self.varies:
            return 1.0, 1.0, 1.0
        ratio = self.step_ratio(t)
        return 1.0, ratio, math.sqrt(ratio)

    def divergence_hint(self, t: int, num_data: int) -> str:
        eta = self.step_size_at(t)
        return (f"the step size eta={eta:g} is likely too large for N={num_data} (the gradient step on the mean "
                f"NLL is eta*N/2={eta * num_data / 2:g}); lower GPEDConfig.sampler.step_size")

    def init_state(self, params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Sampler state beyond theta: none for SGLD."""
        return {}

    def update_(self, params: dict[str, torch.Tensor], state: dict[str, torch.Tensor],
                nll_grads: dict[str, torch.Tensor], noise: dict[str, torch.Tensor], coefficients: torch.Tensor,
                scales: tuple[float, ...] | torch.Tensor) -> None:
        """One step of Eq. 7 in place (:func:`sgld_update_`); ``state`` is unused. The mappings are
        per-parameter tensors, or :class:`~gped_kit.core.flat.FlatTensors` of K chains (one update
        over each whole buffer; ``coefficients`` then of shape (3, K, 1))."""
        operands = units(params, nll_grads, noise)
        sgld_update_([o[0] for o in operands], [o[1] for o in operands], [o[2] for o in operands], coefficients,
                     scales)


def sgld_update_(params: Iterable[torch.Tensor], nll_grads: Iterable[torch.Tensor], noise: Iterable[torch.Tensor],
                 coefficients: torch.Tensor, scales: tuple[float, ...] | torch.Tensor = (1.0, 1.0, 1.0)) -> None:
    """Eq. 7 in place: ``theta <- theta + (-eta_t N / 2) (g + (tau / N) theta) + sqrt(eta_t) xi``.

    ``nll_grads`` are the gradients of the minibatch *mean* NLL and ``noise`` standard normal
    draws of the parameters' shapes (both used as scratch space and overwritten);
    ``coefficients`` the three values of :meth:`SGLDConfig.coefficients` as a tensor of shape
    ``(3,)`` (one chain; under ``torch.func.vmap`` each chain has its own); ``scales`` the
    schedule's factors at this step (:meth:`SGLDConfig.scales`; host floats, or the same values as
    a float32 tensor on the device, :mod:`gped_kit.engine.values`). Computed as
    ``g += prior * theta; theta += step * g; theta += scale * xi`` with operations that ``vmap``
    batches natively (each term rounded on its own, as the equation reads: folding the prior into
    one factor ``1 + step * prior`` would round that factor to float32 and bias tau by up to 0.3%).
    """
    prior, step, scale = coefficients[0], coefficients[1], coefficients[2]
    if isinstance(scales, torch.Tensor) or scales[1] != 1.0:  # a tensor: a device-side row (no host read)
        step, scale = step * scales[1], scale * scales[2]
    with torch.no_grad():
        for theta, grad, xi in zip(params, nll_grads, noise):
            grad.add_(theta * prior)
            theta.add_(grad.mul_(step)).add_(xi.mul_(scale))


def fused_min_elements(device: torch.device) -> int:
    """The smallest buffer the engine updates with :func:`sgld_fused_update_` on ``device``
    (:data:`FUSED_MIN_ELEMENTS`)."""
    return FUSED_MIN_ELEMENTS.get(device.type, FUSED_MIN_ELEMENTS["cpu"])


def sgld_fused_update_(theta: torch.Tensor, nll_grad: torch.Tensor | Sequence[torch.Tensor], noise: torch.Tensor,
                       coefficients: torch.Tensor, scales: torch.Tensor | None) -> None:
    """Eq. 7 in place over K chains' flat buffers with given noise, the numbers of :func:`sgld_update_` bit for bit:
    ``theta <- (theta + (g + theta (tau / N)) (-eta_t N / 2)) + xi sqrt(eta_t)``, each product and sum rounded on
    its own, in :func:`sgld_update_`'s order.

    ``theta`` and ``noise`` (standard normals, read only) are ``(K, P)``; ``nll_grad`` the gradient of the minibatch
    *mean* NLL, ``(K, P)`` or its parts in the order of ``theta``'s columns (each ``(K, ...)``, or of one chain's shape
    when K = 1; read only), concatenated inside; ``coefficients`` the per-chain values of
    :meth:`SGLDConfig.coefficients` as ``(3, K, 1)``; ``scales`` the schedule's factors at t as a float32 tensor of
    3 (a device row, :mod:`gped_kit.engine.values`), None for a constant step.

    Compiled (:class:`~gped_kit.core.fused.Fused` with ``exact=True``: no contraction of a product and a sum into
    one rounding, on the CPU or CUDA) it is one loop over the buffer that reads theta, the gradient and the noise
    once and writes theta once, where :func:`sgld_update_` is a ``cat`` and six element-wise kernels, each a pass
    over the ``(K, P)`` buffers; the numbers are the same (``tests/test_sgld.py``)."""
    prior, step_coef, scale = coefficients[0], coefficients[1], coefficients[2]
    if scales is not None:
        step_coef, scale = step_coef * scales[1], scale * scales[2]
    if not isinstance(nll_grad, torch.Tensor):
        nll_grad = torch.cat([g.reshape(theta.shape[0], -1) for g in nll_grad], dim=1)
    with torch.no_grad():
        theta.copy_(theta + (nll_grad + theta * prior) * step_coef + noise * scale)


def sgld_counter_update_(theta: torch.Tensor, nll_grad: torch.Tensor | Sequence[torch.Tensor],
                         coefficients: torch.Tensor, scales: torch.Tensor | None, keys: torch.Tensor,
                         step: torch.Tensor) -> None:
    """Eq. 7 in place over K chains' flat buffers with counter-based noise:
    ``theta <- theta + (-eta_t N / 2) (g + (tau / N) theta) + sqrt(eta_t) xi_t``.

    ``theta`` and ``nll_grad`` are ``(K, P)`` (the gradient of the minibatch *mean* NLL, read only), or
    ``nll_grad`` the gradient's parts in the order of ``theta``'s columns (each ``(K, ...)``, or of one chain's
    shape when K = 1), concatenated inside the update (compiled, no copy of their own);
    ``coefficients`` the three per-chain values of :meth:`SGLDConfig.coefficients` as ``(3, K, 1)``;
    ``scales`` the schedule's factors at t as a float32 tensor of 3 (a device row,
    :mod:`gped_kit.engine.values`), None for a constant step; ``keys`` the chains' ``(K, 2)`` Philox key
    words and ``step`` t as an int64 tensor of one element. Row k of xi_t is
    :func:`~gped_kit.core.philox.counter_normal` of chain k's key at step t: the same for a chain alone or
    in any batch, and nothing the host reads or writes (a CUDA graph replays it with each period's t).
    Compiled, the draw and the update are one loop over the buffer (:class:`~gped_kit.core.fused.Fused`); the
    compiler may contract a product and a sum into one rounding, so compiled and eager results agree to
    float32 round-off (about 1e-7 relative), not bit for bit."""
    prior, step_coef, scale = coefficients[0], coefficients[1], coefficients[2]
    if scales is not None:
        step_coef, scale = step_coef * scales[1], scale * scales[2]
    if not isinstance(nll_grad, torch.Tensor):
        nll_grad = torch.cat([g.reshape(theta.shape[0], -1) for g in nll_grad], dim=1)
    xi = counter_normal(keys, step, theta.shape[1])
    with torch.no_grad():
        theta.add_(step_coef * (nll_grad + prior * theta) + scale * xi)


def stationary_variance(precision: float, step_size: float) -> float:
    """The exact stationary variance of full-batch SGLD (Eq. 7) on a 1-D Gaussian target of
    precision ``precision``: ``1 / (a (1 - eta a / 4))``; it exists for ``0 < eta a < 4``."""
    a, eta = precision, step_size
    if not 0 < eta * a < 4:
        raise ValueError(f"the chain is unstable for eta * a = {eta * a!r}; it needs 0 < eta * a < 4")
    return 1.0 / (a * (1.0 - eta * a / 4.0))
