"""A budget for a slice of work: stop a grid of chains cleanly at a checkpoint, before a deadline
or after a number of steps, so that the next slice (on another machine) resumes it.

:func:`~gped_kit.experiments.chains.run_chains` with ``budget=Budget(...)`` checks the budget at
every checkpoint point of a chain (every ``checkpoint_every`` steps) and before it starts a
batch. When the budget is spent, the batch's checkpoints are written at that step and the batch
stops (its tasks get status ``"stopped"``); batches not yet started get ``"not started"``.
Stopping only at checkpoint points, where the uninterrupted run would also have passed without
logging anything extra, is what makes a resumed chain bit-identical to an uninterrupted one
(stopping between them would add a history row and restart the running averages).

The budget is spent by

* ``steps``: engine iterations computed in this slice (a batch of K chains advances all K by one
  per iteration); the slice stops at the first checkpoint point at or after the budget, so the
  stop is deterministic (tests, dry runs);
* ``seconds``: wall time since the budget was made, read from ``clock`` (``time.monotonic`` by
  default; a test passes its own). A batch stops at a checkpoint point when the time left is less
  than the last checkpoint interval took, i.e. when the next checkpoint would most likely come
  after the deadline; a new batch starts only while more time is left than the last interval
  took. So the deadline is kept up to the variation between intervals, plus the work after a
  chain's last step (results, store) and the time to reach a new batch's first checkpoint: choose
  ``checkpoint_every`` so that an interval is a small part of the slice.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ..engine import GPEDEngine
from ..engine.checkpoint import save_checkpoints


class BudgetReached(Exception):
    """Raised inside :meth:`GPEDEngine.run` by :class:`BudgetHook` once the batch's checkpoints at
    ``step`` are written; :func:`~gped_kit.experiments.chains.run_chains` records the batch as stopped."""

    def __init__(self, step: int) -> None:
        super().__init__(f"budget spent: stopped at step {step} (checkpointed)")
        self.step = step


class Budget:
    """Steps and/or seconds a slice may spend (see the module docstring); at least one is given."""

    def __init__(self, seconds: float | None = None, steps: int | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if seconds is None and steps is None:
            raise ValueError("Budget: give seconds, steps or both")
        if seconds is not None and not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds >= 0):
            raise ValueError(f"Budget: seconds={seconds!r} must be a finite number >= 0")
        if steps is not None and not (isinstance(steps, int) and not isinstance(steps, bool) and steps >= 0):
            raise ValueError(f"Budget: steps={steps!r} must be an integer >= 0")
        self.seconds, self.steps, self.clock = seconds, steps, clock
        self.started = clock()
        self.steps_done = 0
        self.last_interval = 0.0  # seconds between the last two checkpoint points of a batch

    def __repr__(self) -> str:
        return (f"Budget(seconds={self.seconds}, steps={self.steps}, steps_done={self.steps_done}, "
                f"elapsed={self.elapsed():.1f})")

    def elapsed(self) -> float:
        return self.clock() - self.started

    def charge(self, steps: int, seconds: float) -> None:
        """``steps`` iterations computed in a checkpoint interval of ``seconds``."""
        self.steps_done += steps
        self.last_interval = seconds

    def spent(self) -> bool:
        """True when no further checkpoint interval fits: the steps are used up, or less time is
        left than the last interval took."""
        if self.steps is not None and self.steps_done >= self.steps:
            return True
        return self.seconds is not None and self.seconds - self.elapsed() <= self.last_interval

    def hook(self, paths: Sequence[str | Path | None]) -> BudgetHook:
        """The engine hook that charges this budget for a batch whose checkpoints go to ``paths``."""
        return BudgetHook(self, paths)


class BudgetHook:
    """Charges a :class:`Budget` at each checkpoint point of a batch and, when it is spent and the
    batch is not finished, writes the batch's checkpoints and raises :class:`BudgetReached`.

    It writes the checkpoints itself because the engine calls hooks in order and the run's own
    checkpoint hook comes after this one."""

    def __init__(self, budget: Budget, paths: Sequence[str | Path | None]) -> None:
        self.budget = budget
        self.paths = list(paths)
        self.step: int | None = None
        self.time = budget.clock()

    def on_log(self, engine: GPEDEngine, rows: list[list[dict]]) -> None:
        pass

    def on_checkpoint(self, engine: GPEDEngine) -> None:
        now = self.budget.clock()
        start = (engine.resumed_from or 0) if self.step is None else self.step
        self.budget.charge(engine.t - start, now - self.time)
        self.step, self.time = engine.t, now
        if not engine.finished and self.budget.spent():
            save_checkpoints(engine, self.paths)
            raise BudgetReached(engine.t)

    def on_end(self, engine: GPEDEngine) -> None:
        pass
