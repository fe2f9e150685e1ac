"""What every teacher sampler shares: step size, prior, minibatch, schedule and warm-up.

A sampler is a frozen configuration class (one algorithm per module: :mod:`.sgld`,
:mod:`.sghmc`, :mod:`.sgnht`, :mod:`.baoa`) with the interface the engine calls:

* ``init_state(params)``: the sampler's state beyond theta (momenta, thermostat), zeros-like;
* ``coefficients(N)``: per-chain constants that depend on the labelled set's size N (a batch of
  chains may differ in N and in the prior precision tau, so these travel with each chain);
* ``scales(t)``: the factors of step t's update that change with t, host floats computed in
  float64 and shared by every chain of a batch (no device sync); a sampler with ``device_scales``
  (all four) also takes them as a float32 tensor (a row of the engine's
  :class:`~gped_kit.engine.values.ValueTable`, what a captured CUDA graph reads), with the same
  numbers: each factor enters a kernel as ``float32(value)`` either way (:func:`add_scaled_`);
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

**Cyclical schedule** (``schedule="cyclical"``; cyclical SG-MCMC, Zhang, Li, Zhang, Chen and
Wilson, ICLR 2020, Eq. 1). The run's T steps (``horizon``, set by
:class:`~gped_kit.engine.config.GPEDConfig` to its ``num_iterations``) are split into ``cycles``
cycles of L = T / cycles steps; with ``u_t = (t mod L) / L`` the position of step t in its cycle,
``s(t) = max(cycle_floor, (cos(pi u_t) + 1) / 2)``, so ``eta_t = eta_0 / 2 (cos(pi (t mod L) / L) + 1)``
as in the paper (``cycle_floor`` 0). Steps with ``u_t < explore_fraction`` are the cycle's
*exploration* phase (large steps that move the chain to another mode); the rest its *sampling*
phase, the only steps whose samples are kept (:meth:`SamplerConfig.in_sampling_phase`: the
engine adds them to the ensemble and distils from them, and only after burn-in). When cycles
does not divide T the cycles are ``T / cycles`` steps long as a real number (``u_t = (t cycles
mod T) / T``): cycle c starts at step ceil(c T / cycles). Every sampler gets the schedule, times
the warm-up, through ``step_ratio``; the sampling phase is a host-side function of t (no device
synchronisation). ``cycle_floor`` > 0 keeps the end of each cycle from freezing the chain (the
cosine reaches (pi / L)^2 / 4 of eta_0 at a cycle's last step).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, Mapping, Sequence

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
    samplers; eta_0 of a cyclical schedule); ``prior_precision`` tau of the spherical Gaussian
    prior N(0, tau^-1 I); ``batch_size`` the minibatch size M. ``schedule`` and its fields
    (``decay_steps``, ``decay_power`` for ``polynomial``; ``cycles``, ``explore_fraction``,
    ``cycle_floor`` for ``cyclical``), the warm-up (``warmup_steps``, ``warmup_factor``): see the
    module docstring. ``horizon`` is the T the cycles divide; GPEDConfig sets it to its
    ``num_iterations`` (not a key field: T is recorded by the GPEDConfig).
    """

    step_size: float = 4e-6
    prior_precision: float = 10.0
    batch_size: int = 100
    schedule: StepSchedule = StepSchedule.CONSTANT
    decay_steps: float = 1e4
    decay_power: float = 0.55
    warmup_steps: int = 0
    warmup_factor: float = 1.0
    cycles: int = 1
    explore_fraction: float = 0.5
    cycle_floor: float = 0.0
    horizon: int | None = field(default=None, metadata={"key": False})

    name: ClassVar[SamplerName]
    num_coefficients: ClassVar[int]
    #: Whether ``update_`` takes its ``scales`` as a float32 tensor as well as host floats, with the same
    #: numbers (every sampler of the kit: SGLD's factors only multiply tensors, the momentum samplers'
    #: also scale an addend through :func:`add_scaled_`). A sampler without it computes with host
    #: floats: a varying step size then keeps graph mode eager (:mod:`gped_kit.engine.graphs`).
    device_scales: ClassVar[bool] = False

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
        self._check_cycles(cls)

    def _check_cycles(self, cls: str) -> None:
        """Validate the cyclical schedule's fields (see the module docstring)."""
        check_int(f"{cls}.cycles", self.cycles, 1)
        for name in ("explore_fraction", "cycle_floor"):
            value = check_positive(f"{cls}.{name}", getattr(self, name), allow_zero=True)
            if value >= 1.0:
                raise ValueError(f"{cls}.{name}={value!r}: must be in [0, 1) (a fraction of a cycle / of step_size)")
        if self.schedule is not StepSchedule.CYCLICAL:
            defaults = {f.name: f.default for f in dataclasses.fields(SamplerConfig)}
            for name in ("cycles", "explore_fraction", "cycle_floor"):
                if getattr(self, name) != defaults[name]:
                    raise ValueError(f"{cls}.{name}={getattr(self, name)!r} is read only by schedule='cyclical', but "
                                     f"schedule={str(self.schedule)!r}: set schedule='cyclical' or leave {name} out")
        if self.horizon is not None:
            check_int(f"{cls}.horizon (T)", self.horizon, 1)
            if self.schedule is StepSchedule.CYCLICAL and 2 * self.cycles > self.horizon:
                raise ValueError(f"{cls}.cycles={self.cycles} over T={self.horizon} steps: each cycle needs at least "
                                 f"2 steps (an exploration and a sampling step); use cycles <= {self.horizon // 2}")

    # ------------------------------------------------------------------ step size over time
    def cycle_position(self, t: int) -> float:
        """``u_t = (t mod L) / L`` in [0, 1), step t's position in its cycle of L = T / cycles steps
        (computed as ``(t cycles mod T) / T``, exact in integers); cyclical schedule only."""
        if self.schedule is not StepSchedule.CYCLICAL:
            raise ValueError(f"cycle_position: schedule={str(self.schedule)!r} has no cycles")
        if self.horizon is None:
            raise ValueError(f"{type(self).__name__}(schedule='cyclical') needs the run's length T to place its "
                             "cycles: use it inside a GPEDConfig (which sets horizon=num_iterations) or give horizon=T")
        return (t * self.cycles % self.horizon) / self.horizon

    def in_sampling_phase(self, t: int) -> bool:
        """Whether the sample made by step ``t`` may be kept: always, except with the cyclical
        schedule, whose exploration phase (``u_t < explore_fraction``) keeps nothing. A host-side
        function of t (no device synchronisation); burn-in is the engine's to apply."""
        return self.schedule is not StepSchedule.CYCLICAL or self.cycle_position(t) >= self.explore_fraction

    def sampling_phases(self) -> list[range]:
        """The steps of each cycle's sampling phase over ``[0, horizon)``, one range per cycle
        (cyclical schedule only; exactly the steps :meth:`in_sampling_phase` accepts)."""
        T, n = self.horizon, self.cycles
        if self.schedule is not StepSchedule.CYCLICAL or T is None:
            raise ValueError("sampling_phases: needs schedule='cyclical' and its horizon T")
        out = []
        for c in range(n):
            begin, end = -(-c * T // n), -(-(c + 1) * T // n)  # cycle c: steps ceil(cT/n) .. ceil((c+1)T/n) - 1
            start = min(max(math.ceil((c + self.explore_fraction) * T / n), begin), end)
            while start > begin and self.in_sampling_phase(start - 1):  # the float estimate, made exact
                start -= 1
            while start < end and not self.in_sampling_phase(start):
                start += 1
            out.append(range(start, end))
        return out

    def step_ratio(self, t: int) -> float:
        """``eta_t / step_size`` at iteration ``t``: schedule times warm-up (host float)."""
        ratio = 1.0
        if self.schedule is StepSchedule.POLYNOMIAL:
            ratio = (1.0 + t / self.decay_steps) ** (-self.decay_power)
        elif self.schedule is StepSchedule.CYCLICAL:
            ratio = max(self.cycle_floor, 0.5 * (math.cos(math.pi * self.cycle_position(t)) + 1.0))
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
        if self.schedule is not StepSchedule.POLYNOMIAL:
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
                scales: Scales) -> None:  # pragma: no cover
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
    device_scales: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        cls = type(self).__name__
        check_positive(f"{cls}.alpha", self.alpha)
        check_positive(f"{cls}.beta", self.beta, allow_zero=True)
        check_positive(f"{cls}.sigma", self.sigma)

    def coefficients(self, num_data: int) -> tuple[float, float]:
        """``(tau / N, T = 1 / N)``."""
        return self.prior_precision / num_data, 1.0 / num_data

    def scales(self, t: int) -> tuple[float, ...]:
        """The factors of step ``t``'s update (:meth:`factors`) at its step size ``epsilon_t``
        (:meth:`~SamplerConfig.step_size_at`); the first is ``epsilon_t`` itself."""
        return self.factors(self.step_size_at(t))

    def factors(self, epsilon: float) -> tuple[float, ...]:  # pragma: no cover
        """What the update reads that depends on the step size ``epsilon``, computed in float64 on the
        host (``epsilon`` first): the algorithm's own expressions, so that passing them as host floats or
        as a float32 row gives the kernels the operands ``float32(value)`` the update always used."""
        raise NotImplementedError

    def init_state(self, params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Momenta m_0 = 0, one per parameter (keys ``"m:<name>"``)."""
        return {momentum_key(k): torch.zeros_like(v) for k, v in params.items()}


class StateKind(StrEnum):
    """What an entry of a sampler's state holds."""

    #: a parameter's momentum m (or, for the parameter :data:`ALL_PARAMETERS`, every momentum as one flat buffer)
    MOMENTUM = "m"
    #: SGNHT's thermostat xi (one per chain)
    THERMOSTAT = "xi"


#: The parameter name of a state entry that holds every parameter's values as one flat buffer.
ALL_PARAMETERS = "*"


@dataclass(frozen=True)
class StateKey:
    """The typed name of an entry of a sampler's state: its :class:`StateKind` and, for a per-parameter entry,
    the parameter. A state dict, and so a checkpoint, is keyed by the key's text (``str(key)``: ``"m:<name>"``,
    ``"m:*"``, ``"xi"``), which :meth:`parse` reads back; the text is the format checkpoints have always had."""

    kind: StateKind
    param: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", StateKind(self.kind))
        per_parameter = self.kind is StateKind.MOMENTUM
        if per_parameter and not self.param:
            raise ValueError(f"StateKey: a {self.kind.name.lower()} entry names its parameter (param=None given)")
        if not per_parameter and self.param is not None:
            raise ValueError(f"StateKey: a {self.kind.name.lower()} entry has no parameter (param={self.param!r})")

    def __str__(self) -> str:
        return self.kind.value if self.param is None else f"{self.kind.value}:{self.param}"

    @classmethod
    def parse(cls, text: str) -> StateKey:
        """The key whose text is ``text`` (``"m:fc1.weight"``, ``"m:*"``, ``"xi"``); anything else is an error
        naming the kinds allowed."""
        kind, sep, param = str(text).partition(":")
        try:
            return cls(StateKind(kind), param if sep else None)
        except ValueError as exc:
            raise ValueError(f"sampler state key {text!r}: not a key of a sampler's state ({exc}); allowed: "
                             + ", ".join(f"{k.value!r}" + (":<parameter>" if k is StateKind.MOMENTUM else "")
                                         for k in StateKind)) from None


#: The factors an update reads at one step (:meth:`SamplerConfig.scales`): host floats, or the same values as a
#: float32 tensor of one row (a row of the engine's :class:`~gped_kit.engine.values.ValueTable`).
Scales = Sequence[float] | torch.Tensor

#: One factor of :data:`Scales`: a host float, or a 0-d float32 tensor holding ``float32`` of it.
Factor = float | torch.Tensor


def add_scaled_(y: torch.Tensor, x: torch.Tensor, a: Factor) -> torch.Tensor:
    """``y <- y + a x`` in place, each element rounded once: ``y.add_(x, alpha=a)`` for a host float ``a``
    (rounded to y's dtype), ``y.addcmul_(x, a)`` for a 0-d tensor ``a`` holding that rounded value (a factor
    a captured CUDA graph reads from the device). PyTorch's CPU kernels compute both as one fused
    multiply-add per element, in their vector loops and scalar tails alike, so the two give the same numbers
    bit for bit under every CPU capability (default, AVX2, AVX-512; ``tests/test_device_scales.py``); a
    product rounded on its own and then added (``y.add_(x * a)``) differs in the last bit."""
    if isinstance(a, torch.Tensor):
        return y.addcmul_(x, a)
    return y.add_(x, alpha=a)


def momentum_key(name: str) -> str:
    """The sampler-state key (its text) of the momentum of parameter ``name``."""
    return str(StateKey(StateKind.MOMENTUM, name))


#: The sampler-state key of the momenta as one :class:`~gped_kit.core.flat.FlatTensors` (the
#: engine's flat buffers; the per-parameter keys then hold views into it).
FLAT_MOMENTA = str(StateKey(StateKind.MOMENTUM, ALL_PARAMETERS))


def momenta(params: Mapping[str, torch.Tensor], state: Mapping[str, torch.Tensor]) -> Mapping[str, torch.Tensor]:
    """The momenta of ``params`` in ``state``: its flat buffer when it holds one (``FLAT_MOMENTA``),
    otherwise ``name -> state["m:<name>"]``."""
    flat = state.get(FLAT_MOMENTA)
    return flat if flat is not None else {k: state[momentum_key(k)] for k in params}
