"""Graph mode: a period of the event schedule captured as a CUDA graph and replayed.

On a GPU one step of the paper's FCNN chain is a few microseconds of arithmetic and dozens of
kernel launches, each costing the host about 20 us of Python and driver time: eager steps are
bound by the host. A CUDA graph records the kernels of P steps once and replays them with one
launch. The engine's events repeat with the period ``P = lcm(eval_thinning, every H)``
(:attr:`EngineSetup.period <gped_kit.engine.setup.EngineSetup>`), so :class:`PeriodGraphs`
captures one graph per *pattern* of events over a period (burn-in: teacher steps only; after
burn-in: teacher steps, the ensemble and each group's distillation at their steps; a cyclical
schedule's phases give a few more) and replays it whenever a period starts with that pattern.

**What makes a step replayable.** Everything it reads that changes with t is on the device:
random numbers come from the chains' generators, registered with the graph so that each replay
draws new ones (CUDA's Philox generators advance their offset per replay); the step-size factors
and Adam's bias corrections are rows of :class:`~gped_kit.engine.values.ValueTable` s, refilled
before each replay with the period's values. What the host decides stays outside the graphs: a
period is replayed only when it holds no log point, checkpoint point or snapshot before its end,
no learning-rate change (the halving schedule) and ends before the run's stop; a sampler whose
varying step size it reads as host floats (``device_scales`` False: none of the kit's four, whose
factors -- SGLD's and the momentum samplers' alike -- are device tables) never replays. Such periods
run eagerly, step by step, as on the CPU; the two a user may not expect (such a sampler, and more
patterns than :data:`MAX_GRAPHS`) are warned about once each (:class:`GraphFallbackWarning`). A replay advances the
state's host counters (:class:`~gped_kit.engine.state.HostState`: t, Adam's step counts, the ensemble's
count, the steps in the running sums) by what the captured period's steps advanced them by.

**First sight of a pattern**: the period runs eagerly on a side stream (CUDA's warm-up before a
capture: libraries initialise their workspaces); the next period with the pattern is captured and
replayed. Graphs share one memory pool. Graph mode changes how steps are launched, not what they
compute: a replayed period equals the same period stepped eagerly, bit for bit (tests, on CUDA).
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

import torch

from .config import GPEDConfig
from .setup import EngineSetup, events, learning_rates
from .state import EngineState, HostState

#: One step of an engine: advances the state it is given (``t`` and every other part) by one iteration.
Step = Callable[[EngineState], None]

#: At most this many patterns are captured per engine; further ones run eagerly (a cyclical
#: schedule with many distinct phase boundaries would otherwise capture a graph per period).
MAX_GRAPHS = 8


class GraphFallbackWarning(UserWarning):
    """Graph mode runs periods eagerly for a reason the user did not ask for and may want to change: a sampler
    whose varying step size its update reads as host floats (``device_scales`` False; every period eager), or
    more event patterns than :data:`MAX_GRAPHS` (the later ones eager). Log, checkpoint and snapshot points and
    learning-rate changes run eagerly by design and are not warned about."""


def sampler_fallback(config: GPEDConfig) -> str | None:
    """Why ``config``'s sampler keeps every period eager under graph mode, or None when it can replay: its
    step size varies and its update reads the factors as host floats (``device_scales`` False). Every sampler
    of the kit (SGLD, SGHMC, SGNHT, BAOA) reads them from a device table and replays."""
    sampler = config.sampler
    if sampler.varies and not sampler.device_scales:
        return (f"the {type(sampler).__name__} sampler's step size varies and its update reads the factors as "
                "host floats (device_scales is False), so no period can be replayed: every step runs eagerly (a "
                "constant step size replays; the kit's samplers read varying factors from device tables)")
    return None


def period_pattern(setup: EngineSetup, state: EngineState, t0: int, stop: int) -> tuple | None:
    """The pattern of events of the period starting at ``t0`` (what a graph of it records), or None
    when the period cannot be replayed (see the module docstring). Host-side only: reads the
    schedule and the state's current learning rates."""
    cfg, period = setup.config, setup.period
    if t0 % period or t0 + period > stop:
        return None
    sampler = cfg.sampler
    if sampler.varies and not sampler.device_scales:
        return None
    end = t0 + period
    pattern = []
    for t in range(t0, end):
        if 0 < t - t0 and (t % cfg.log_every == 0 or t % cfg.checkpoint_every == 0):
            return None  # a log or checkpoint point after step t - 1, inside the period
        step_events = events(setup, t)
        if step_events.snapshot is not None:
            return None
        for key in step_events.groups:
            for j in setup.chains[0].groups[key]:
                if learning_rates(setup, j, t) != state.lr_values[j]:
                    return None
        pattern.append((step_events.accumulate, step_events.groups))
    return tuple(pattern)


class PeriodGraphs:
    """The captured periods of one engine (CUDA), keyed by their event pattern (module docstring)."""

    def __init__(self, setup: EngineSetup) -> None:
        if setup.device.type != "cuda":
            raise ValueError(f"GPEDConfig.graph=True needs a CUDA device, the run is on {setup.device}; "
                             "leave graph at None (on for CUDA only) or set it to False")
        self.setup = setup
        self.graphs: dict[tuple, tuple[Any, HostState]] = {}
        self.warmed: set[tuple] = set()
        self.pool: Any = None
        self.replays = 0
        self.fallbacks: list[str] = []  # the reasons warned about (GraphFallbackWarning), once each
        if (reason := sampler_fallback(setup.config)) is not None:
            self._fall_back(reason)

    def _fall_back(self, reason: str) -> None:
        if reason not in self.fallbacks:
            self.fallbacks.append(reason)
            warnings.warn(f"graph mode: {reason}", GraphFallbackWarning, stacklevel=3)

    def run_period(self, state: EngineState, stop: int, step: Step) -> bool:
        """Run the period starting at ``state``'s step when it can be replayed (warming up, capturing or
        replaying its graph; ``step`` advances a state by one step) and return True, ``state`` advanced
        by the period; return False (nothing done) when it must be stepped eagerly."""
        setup = self.setup
        t0 = state.host.t
        pattern = period_pattern(setup, state, t0, stop)
        if pattern is None:
            return False
        if pattern not in self.graphs and len(self.graphs) >= MAX_GRAPHS:
            self._fall_back(f"{MAX_GRAPHS} event patterns are captured (MAX_GRAPHS); periods of a new pattern, "
                            f"first at step {t0}, run eagerly")
            return False
        setup.values.fill(t0, state.host.adam_steps)  # the period's rows, which the capture recorded
        if pattern not in self.graphs:
            if pattern not in self.warmed:
                self._warm_up(state, step)
                self.warmed.add(pattern)
                return True
            self.graphs[pattern] = self._capture(state, step)
        else:
            state.host = state.host.plus(self.graphs[pattern][1])
        self.graphs[pattern][0].replay()
        self.replays += 1
        return True

    def _warm_up(self, state: EngineState, step: Step) -> None:
        device = self.setup.device
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(self.setup.period):
                step(state)
        torch.cuda.current_stream(device).wait_stream(side)

    def _capture(self, state: EngineState, step: Step) -> tuple[Any, HostState]:
        """Record one period (the kernels are recorded, not run; the replay that follows runs them) and
        what it advances the host state by. The state's host counters advance as the period's steps
        advance them; each step replaces them with a new value, so ``before`` keeps the start's."""
        graph = torch.cuda.CUDAGraph()
        streams = state.streams
        for gen in [*streams.data, *streams.noise, *(g for gens in streams.groups.values() for g in gens)]:
            graph.register_generator_state(gen)
        before = state.host
        try:
            with torch.cuda.graph(graph, pool=self.pool):
                for _ in range(self.setup.period):
                    step(state)
        except Exception as exc:
            state.host = before
            raise RuntimeError(f"capturing the period at step {before.t} as a CUDA graph failed ({exc}); the run is "
                               "unchanged: run it with GPEDConfig(graph=False)") from exc
        if self.pool is None:
            self.pool = graph.pool()
        return graph, state.host.minus(before)
