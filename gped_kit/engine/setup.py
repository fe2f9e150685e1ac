"""What an engine fixes when it is built: the chains' layout, data, step functions and event schedule.

:class:`EngineSetup` is the constant half of an engine (the other is its
:class:`~gped_kit.engine.state.EngineState`, which the steps advance): the runs' specs and their
:class:`~gped_kit.engine.layout.ChainLayout`, the data sets on the device, the step functions'
network bundles, the distillation inputs' noise settings, the device-side value tables and the
distillation function of the layout. Made once by :func:`gped_kit.engine.engine.init`.

The event schedule is a function of the setup alone: :func:`events` says what iteration t does
after the teacher's step, :func:`learning_rates` each run's student learning rates at t (host floats).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import torch

from ..core.fused import Fused
from .config import GPEDConfig, GroupKey, student_lr, student_updates
from .layout import ChainLayout
from .sets import ChainSets
from .spec import ChainSpec
from .state import EngineState
from .steps import StudentFns, TeacherFns
from .values import EngineValues


@dataclass(frozen=True)
class StepEvents:
    """The events of iteration t of Algorithm 1 after the teacher's step (:func:`events`):
    ``snapshot``, the index of the snapshot the new sample is kept as (None: not a snapshot step);
    ``accumulate``, whether it joins the teacher ensemble (t > B, t mod ``eval_thinning`` = 0);
    ``groups``, the distillation groups that distil (t > B, t mod H = 0), in the order they run."""

    t: int
    snapshot: int | None
    accumulate: bool
    groups: tuple[GroupKey, ...]


#: One student slot's Adam step: ``update(state, setup, j, grads, chain_axis)`` (the engine's).
Update = Callable[[EngineState, "EngineSetup", int, dict[str, torch.Tensor], bool], None]


class Distillation(Protocol):
    """How a layout's students learn from its teacher chains (:mod:`gped_kit.engine.distill`): one
    distillation group's update of every run's students at step t, each student's Adam step by ``update``."""

    def distil_group(self, state: EngineState, setup: EngineSetup, key: GroupKey, t: int, update: Update) -> None: ...


@dataclass(frozen=True)
class FusedUpdate:
    """An SGLD teacher's update as one compiled loop over the ``(K, P)`` buffer, which the teacher's step calls:
    with counter-based random numbers :func:`~gped_kit.core.sgld.sgld_counter_update_`, its noise drawn inside under
    each teacher chain's key words ``keys`` (``(K, 2)`` int64 on the device, its noise stream's,
    :class:`~gped_kit.engine.streams.CounterStreams`); with the chains' generators
    :func:`~gped_kit.core.sgld.sgld_fused_update_` (``keys`` None), the noise drawn before, the numbers of the
    element-wise update bit for bit."""

    update: Fused
    keys: torch.Tensor | None = None


@dataclass(frozen=True)
class EngineSetup:
    """The constant parts of an engine (module docstring). ``train_sets`` hold D per teacher chain,
    ``distill_sets`` D' per run and ``eval_sets`` the evaluation inputs per teacher chain (the test
    set, then the further sets, at ``eval_slices``); ``test_labels`` each run's test labels;
    ``noise_moments`` the noise generator's per-run (mean, std) of D' (None without it) and
    ``input_noise`` per group the runs with input noise and each run's standard deviation;
    ``period`` the event schedule's period ``lcm(eval_thinning, every H)``; ``values`` the device-side
    values the steps read; ``distillation`` the layout's update of one distillation group (a
    :class:`Distillation`); ``eval_chunk`` the rows of one evaluation forward pass
    (``GPEDConfig.eval_batch_size``, or sized automatically); ``fused_update`` an SGLD teacher's fused update
    (:class:`FusedUpdate`): with counter-based random numbers (``GPEDConfig(random_numbers="counter")``) always, with
    the chains' generators when the ``(K, P)`` buffer is logical and holds at least
    :data:`~gped_kit.core.sgld.FUSED_MIN_ELEMENTS` for the device; None otherwise (the sampler's element-wise
    ``update_``)."""

    chains: tuple[ChainSpec, ...]
    layout: ChainLayout
    device: torch.device
    train_sets: ChainSets
    distill_sets: ChainSets
    eval_sets: ChainSets
    eval_slices: dict[str, slice]
    num_eval: int
    test_labels: list[torch.Tensor]
    noise_moments: torch.Tensor | None
    input_noise: dict[GroupKey, tuple[list[int], torch.Tensor]]
    period: int
    values: EngineValues
    teacher_fns: TeacherFns
    student_fns: list[StudentFns]
    distillation: Distillation
    eval_chunk: int
    fused_update: FusedUpdate | None = None

    @property
    def config(self) -> GPEDConfig:
        """The configuration the runs share (run 0's)."""
        return self.chains[0].config

    @property
    def num_outputs(self) -> int:
        return self.chains[0].data.num_outputs


def events(setup: EngineSetup, t: int) -> StepEvents:
    """What iteration t of Algorithm 1 does after the teacher's step (the same for every chain):
    which snapshot it keeps, whether the sample joins the ensemble, which groups distil. Samples
    are kept after burn-in (t > B) and, with a cyclical step-size schedule, only in the cycles'
    sampling phases (:meth:`~gped_kit.core.sampler.SamplerConfig.in_sampling_phase`)."""
    cfg = setup.config
    ref = setup.chains[0]
    kept = t > cfg.burn_in and cfg.sampler.in_sampling_phase(t)  # the cyclical schedule's exploration keeps none
    return StepEvents(t=t, snapshot=ref.snapshot_at.get(t),
                      accumulate=kept and t % cfg.eval_thinning == 0,
                      groups=tuple(key for key in ref.groups if kept and t % key.thinning == 0))


def learning_rates(setup: EngineSetup, j: int, t: int) -> list[float]:
    """Each run's learning rate of student slot ``j`` at step t (Appendix A.2's halving; host floats)."""
    rates = []
    for c in setup.chains:
        student = c.students[j].config
        update = student_updates(c.config, student.thinning, t) if student.lr_warmup else None
        rates.append(student_lr(student, t, c.config.burn_in, c.steps_per_epoch, update))
    return rates


def step_index_row(setup: EngineSetup, t: int) -> torch.Tensor | None:
    """Step t as a device value (a row of the int64 step table) when the random numbers are counter-based, else
    None."""
    steps = setup.values.steps
    return steps.row(t) if steps is not None else None
