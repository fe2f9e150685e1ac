"""The run loop: steps up to a stop, log points, checkpoint points, graph mode.

:func:`run` advances an :class:`~gped_kit.engine.state.EngineState` step by step (or a period at a
time, replayed as a CUDA graph, :mod:`gped_kit.engine.graphs`) up to ``stop``; after each log point
(every ``log_every`` steps and at ``stop``) it calls ``log`` and hands its rows to ``on_log``, at each
checkpoint point (every ``checkpoint_every`` steps and at ``stop``) it saves the dropout stream into
the state and calls ``on_checkpoint``, and it calls ``on_end`` once when the loop stops (normally or
by an error). Dropout masks are drawn from the global random stream, which the loop sets to the
state's saved one and restores afterwards (``torch.random.fork_rng``). Nothing is read back from the
device between log points.
"""

from __future__ import annotations

import time
from typing import Callable

import torch

from .graphs import PeriodGraphs, Step
from .setup import EngineSetup
from .state import EngineState


def run(state: EngineState, setup: EngineSetup, step: Step, log: Callable[[EngineState], list[list[dict]]],
        stop: int | None = None, graphs: PeriodGraphs | None = None,
        on_log: Callable[[list[list[dict]]], None] = lambda rows: None,
        on_checkpoint: Callable[[], None] = lambda: None, on_end: Callable[[], None] = lambda: None) -> None:
    """Iterate ``state`` up to step ``stop`` (default T) with ``step`` (module docstring)."""
    cfg = setup.config
    stop = cfg.num_iterations if stop is None else min(stop, cfg.num_iterations)
    started = time.perf_counter()
    device = setup.device
    with torch.random.fork_rng(devices=[device.index or 0] if device.type == "cuda" else []):
        set_global_rng(state.dropout_rng, device)
        try:
            while state.host.t < stop:
                if graphs is None or not graphs.run_period(state, stop, step):
                    step(state)
                t = state.host.t
                if t % cfg.log_every == 0 or t == stop:
                    now = time.perf_counter()
                    state.elapsed += now - started
                    started = now
                    on_log(log(state))
                if t % cfg.checkpoint_every == 0 or t == stop:
                    now = time.perf_counter()  # a checkpoint between log points holds the time run so far
                    state.elapsed += now - started
                    started = now
                    state.dropout_rng = global_rng(device)
                    on_checkpoint()
        finally:
            state.dropout_rng = global_rng(device)
            on_end()


def global_rng(device: torch.device) -> dict[str, torch.Tensor]:
    """The global random stream's state (CPU, and the device's on CUDA)."""
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_global_rng(state: dict[str, torch.Tensor], device: torch.device) -> None:
    torch.set_rng_state(state["cpu"].cpu())
    if "cuda" in state and device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda"].cpu(), device)
