"""What every teacher sampler shares: step size, prior, minibatch, schedule and warm-up.

A sampler is a frozen configuration class (one algorithm per module: :mod:`.sgld`,
:mod:`.sghmc`, :mod:`.sgnht`, :mod:`.baoa`) with the interface the engine calls:

* ``init_state(params)``: the sampler's state beyond theta (momenta, thermostat), zeros-like;
* ``coefficients(N)``: per-chain constants that depend on the labelled set's size N (a batch of
  chains may differ in N and in the prior precision tau, so these travel with each chain);
* ``scales(t)``: host floats for step t, shared by every chain of a batch (no device sync);
* ``update_(params, state, nll_grads, noise, coefficients, scales)``: one step in place, from
  the gradient of the minibatch *mean* NLL and one standard-normal draw per parameter; the
  same code for one chain and, under ``torch.func.vmap``, for many.

:func:`gped_kit.core.samplers.sampler_config` is the one factory over the algorithms (names in
:class:`SamplerName`).

**Step size over time.** ``eta_t = step_size * s(t) * w(t)`` with the schedule
``s(t) = (1 + t / decay_steps) ** -decay_power`` (``schedule="polynomial"``; 1 when constant)
and the optional warm-up ``w(t) = warmup_factor ** (1 - t / warmup_steps)`` for
``t < warmup_steps`` (geometric from ``warmup_factor`` down to 1), 1 afterwards. The warm-up
changes only the path to the posterior: :class:`~gped_kit.engine.config.GPEDConfig` requires it
to end within burn-in, so no sample is drawn at the larger step.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from .options import Option, StepSchedule, check_int, check_positive, parse_option
from .schema import record_fields


class SamplerName(Option):
    """The teacher's SG-MCMC algorithm: the paper's ``sgld`` (Eq. 7) or one of the samplers
    ``posteriors`` offers, in its parameterisation: ``sghmc`` (Chen et al., 2014), ``sgnht``
    (Ding et al., 2014), ``baoa`` (Leimkuhler and Matthews, 2015)."""

    SGLD = "sgld"
    SGHMC = "sghmc"
    SGNHT = "sgnht"
    BAOA = "baoa"


@dataclass(frozen=True)
class SamplerConfig:
    """Fields shared by every teacher sampler (see the module docstring).

    ``step_size`` is the algorithm's own step (eta of Eq. 7 for SGLD, epsilon for the momentum
    samplers); ``prior_precision`` tau of the spherical Gaussian prior N(0, tau^-1 I);
    ``batch_size`` the minibatch size M.
    """

    step_size: float = 4e-6
    prior_precision: float = 10.0
    batch_size: int = 100
    schedule: StepSchedule = StepSchedule.CONSTANT
    decay_steps: float = 1e4
    decay_power: float = 0.55
    warmup_steps: int = 0
    warmup_factor: float = 1.0

    name: ClassVar[SamplerName]
    num_coefficients: ClassVar[int]

    def __post_init__(self) -> None:
        cls = type(self).__name__
        check_positive(f"{cls}.step_size", self.step_size)
        check_positive(f"{cls}.prior_precision", self.prior_precision, allow_zero=True)
        check_int(f"{cls}.batch_size (M)", self.batch_size, 1)
        object.__setattr__(self, "schedule", parse_option(StepSchedule, self.schedule, f"{cls}.schedule"))
        if self.schedule is StepSchedule.POLYNOMIAL and not (self.decay_steps > 0 and 0 < self.decay_power <= 1):
            raise ValueError(
                f"polynomial schedule needs decay_steps > 0 and 0 < decay_power <= 1, got "
                f"decay_steps={self.decay_steps!r}, decay_power={self.decay_power!r}"
            )
        check_int(f"{cls}.warmup_steps", self.warmup_steps, 0)
        check_positive(f"{cls}.warmup_factor", self.warmup_factor)
        if self.warmup_factor < 1.0:
            raise ValueError(f"{cls}.warmup_factor={self.warmup_factor!r}: must be >= 1 (the warm-up starts at "
                             "warmup_factor * step_size and ends at step_size)")

    # ------------------------------------------------------------------ step size over time
    def step_ratio(self, t: int) -> float:
        """``eta_t / step_size`` at iteration ``t``: schedule times warm-up (host float)."""
        ratio = 1.0
        if self.schedule is StepSchedule.POLYNOMIAL:
            ratio = (1.0 + t / self.decay_steps) ** (-self.decay_power)
        if t < self.warmup_steps:
            ratio *= self.warmup_factor ** (1.0 - t / self.warmup_steps)
        return ratio

    def step_size_at(self, t: int) -> float:
        """The step size at iteration ``t`` (a host-side float: no device synchronisation)."""
        return self.step_size * self.step_ratio(t)

    @property
    def varies(self) -> bool:
        """True when the step size changes from step to step."""
        return self.schedule is not StepSchedule.CONSTANT or (self.warmup_steps > 0 and self.warmup_factor != 1.0)

    def shared_fields(self) -> dict[str, Any]:
        """What chains of one batch must share (their step functions read it from the first
        chain's configuration): everything but what :meth:`coefficients` carries per chain."""
        per_chain = set(self.per_chain_fields)
        if self.schedule is StepSchedule.CONSTANT:
            per_chain |= {"decay_steps", "decay_power"}
        if self.warmup_steps == 0:
            per_chain.add("warmup_factor")
        return {"sampler": str(self.name), **{f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                                              if f.name not in per_chain}}

    #: Fields that enter only through :meth:`coefficients` and so may differ within a batch.
    per_chain_fields: ClassVar[tuple[str, ...]] = ("prior_precision",)

    def divergence_hint(self, t: int, num_data: int) -> str:
        """What to change when the chain diverged before step ``t`` (for the engine's error)."""
        return (f"the step size {self.step_size_at(t):g} of {type(self).__name__} is likely too large for "
                f"N={num_data}; lower its step_size")

    def record(self) -> dict:
        """Key record: the non-default fields, with the algorithm's name (SGLD, the paper's and
        the default, records its fields alone, so keys made before other samplers existed stay)."""
        out = record_fields(self)
        if self.name is not SamplerName.SGLD:
            out["sampler"] = str(self.name)
        return out

    # ------------------------------------------------------------------ the algorithm
    def init_state(self, params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:  # pragma: no cover
        raise NotImplementedError

    def coefficients(self, num_data: int) -> tuple[float, ...]:  # pragma: no cover
        raise NotImplementedError

    def scales(self, t: int) -> tuple[float, ...]:  # pragma: no cover
        raise NotImplementedError

    def update_(self, params: dict[str, torch.Tensor], state: dict[str, torch.Tensor],
                nll_grads: dict[str, torch.Tensor], noise: dict[str, torch.Tensor], coefficients: torch.Tensor,
                scales: tuple[float, ...]) -> None:  # pragma: no cover
        raise NotImplementedError


@dataclass(frozen=True)
class MomentumSamplerConfig(SamplerConfig):
    """Shared by the momentum samplers, in the parameterisation of ``posteriors``: friction
    ``alpha``, gradient-noise estimate ``beta``, mass ``sigma`` (momenta m ~ N(0, sigma^2 T)).

    ``posteriors`` targets ``exp(log_post(theta) / T)`` for a log posterior normalised per datum;
    the kit's runs use the Bayes posterior, so ``log_post = -(L(theta) + tau |theta|^2 / (2N))``
    with L the mean NLL, and ``T = 1 / N``. The per-chain coefficients are ``(tau / N, 1 / N)``;
    the momenta start at zero.
    """

    step_size: float = 1e-2
    alpha: float = 0.01
    beta: float = 0.0
    sigma: float = 1.0

    num_coefficients: ClassVar[int] = 2

    def __post_init__(self) -> None:
        super().__post_init__()
        cls = type(self).__name__
        check_positive(f"{cls}.alpha", self.alpha)
        check_positive(f"{cls}.beta", self.beta, allow_zero=True)
        check_positive(f"{cls}.sigma", self.sigma)

    def coefficients(self, num_data: int) -> tuple[float, float]:
        """``(tau / N, T = 1 / N)``."""
        return self.prior_precision / num_data, 1.0 / num_data

    def scales(self, t: int) -> tuple[float]:
        """``(epsilon_t,)``, the step size at step ``t``."""
        return (self.step_size_at(t),)

    def init_state(self, params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Momenta m_0 = 0, one per parameter (keys ``"m:<name>"``)."""
        return {momentum_key(k): torch.zeros_like(v) for k, v in params.items()}


def momentum_key(name: str) -> str:
    """The sampler-state key of the momentum of parameter ``name``."""
    return f"m:{name}"
