"""String options as enums, validated in one place.

Every option of the kit that is a choice among names (estimator, input generator, step-size
schedule, likelihood, ...) is an :class:`Option` enum whose values are the strings users
write (``"U_s"``, ``"perturb"``). :func:`parse_option` turns a user's value into the enum and
raises one kind of error, naming the parameter, the value given and the values allowed, before
any work starts. Because :class:`Option` subclasses ``str``, an option compares equal to its
string and serialises as it (JSON, CSV, configuration keys).
"""

from __future__ import annotations

import math
from enum import Enum
from typing import Any, TypeVar

E = TypeVar("E", bound="Option")


class Option(str, Enum):
    """A named choice; its value is the string users write."""

    def __str__(self) -> str:
        return str(self.value)

    @classmethod
    def allowed(cls) -> list[str]:
        return [m.value for m in cls]


def parse_option(kind: type[E], value: Any, name: str) -> E:
    """``value`` as a member of the option enum ``kind``; ``ValueError`` naming ``name``, the
    value and the allowed values otherwise."""
    if isinstance(value, kind):
        return value
    try:
        return kind(value)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not known; allowed: {kind.allowed()}") from None


# ------------------------------------------------------------------------------ numbers
def check_int(name: str, value: Any, minimum: int) -> int:
    """``value`` if it is an integer (not a bool) >= ``minimum``; ``ValueError`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name}={value!r}: must be an integer >= {minimum}")
    return value


def check_positive(name: str, value: Any, allow_zero: bool = False) -> float:
    """``value`` if it is a finite real number > 0 (>= 0 with ``allow_zero``); ``ValueError`` otherwise."""
    ok = (not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
          and (value >= 0 if allow_zero else value > 0))
    if not ok:
        raise ValueError(f"{name}={value!r}: must be a finite number {'>= 0' if allow_zero else '> 0'}")
    return float(value)


# ------------------------------------------------------------------------------ the kit's options
class Estimator(Option):
    """How a student's targets g_hat are estimated from the chain (Section 3.2).

    ``U_s`` (Eq. 9): the current sample only; ``U_o`` (Eq. 10): a running Monte Carlo mean per
    distillation input; ``U_s+U_o``: U_s on all target columns but the last, U_o on the last
    (Experiment 4's C+1 student, whose entropy column "always" uses U_o).
    """

    U_S = "U_s"
    U_O = "U_o"
    U_S_U_O = "U_s+U_o"

    @property
    def uses_store(self) -> bool:
        """True when the estimator keeps a per-input store over D' (U_o, U_s+U_o)."""
        return self is not Estimator.U_S


class InputGenerator(Option):
    """Where a student's distillation inputs x' come from (Papamakarios' thesis, Section 2.3).

    ``data``: D' as the data configures it (resampled, with the data's ``distill_noise_std``
    perturbation if any); ``resample``: D' resampled without noise; ``perturb``: resampled D'
    plus N(0, std^2) per input element; ``noise``: pure Gaussian noise with D''s overall mean
    and standard deviation, fresh every step.
    """

    DATA = "data"
    RESAMPLE = "resample"
    PERTURB = "perturb"
    NOISE = "noise"


class StepSchedule(Option):
    """The teacher sampler's step size over iterations: ``constant`` (the paper), ``polynomial``
    (eta_t = eta (1 + t / decay_steps)^-decay_power, Welling and Teh's schedule) or ``cyclical``
    (cyclical SG-MCMC, Zhang et al., ICLR 2020: a cosine from eta down to 0 in each of ``cycles``
    cycles, samples kept only in each cycle's final, small-step sampling phase;
    :mod:`gped_kit.core.sampler`)."""

    CONSTANT = "constant"
    POLYNOMIAL = "polynomial"
    CYCLICAL = "cyclical"



class RandomNumbers(Option):
    """Where a chain's per-step random numbers come from: its teacher's minibatch indices, the sampler's noise
    and each distillation group's minibatch indices.

    ``generators`` (the default): each stream its own ``torch.Generator`` (:mod:`gped_kit.engine.streams`), one
    draw per chain and stream a step. ``counter``: Philox-4x32-10 (:mod:`gped_kit.core.philox`) keyed by the seed
    each stream's generator would have had, the step t and the position, each draw one compiled kernel for every
    chain of a batch, and SGLD's noise drawn inside its update (:func:`gped_kit.core.sgld.sgld_counter_update_`):
    no generator state, the same draws for a chain alone or in a batch. The two draw different (equally
    distributed) numbers, so the choice is part of a result's key. The thesis' input generators (noise inputs,
    perturbations, derivative matching's signs) draw from their groups' generators in either mode.
    """

    GENERATORS = "generators"
    COUNTER = "counter"
