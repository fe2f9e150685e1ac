"""One run's part of an engine's state, taken out and put back: what a checkpoint holds.

A batch of K independent chains has K runs, each with its own checkpoint, so that a chain computed
in a batch can be resumed alone or in another batch; a pooled teacher is one run holding all its
chains. :func:`run_state` takes run r's part of an :class:`~gped_kit.engine.state.EngineState` as a
:class:`~gped_kit.engine.state.RunState` (its own copies: the teacher chains the layout gives the
run, :meth:`~gped_kit.engine.layout.ChainLayout.run_chains`, its students' row of each slot, the
host counters, generators, history), and :func:`load_run_states` puts such values back. Continuing
from a run state gives the same numbers as never having stopped, bit for bit.
"""

from __future__ import annotations

from typing import Mapping

import torch

from .evaluate import test_sums
from .setup import EngineSetup
from .state import EngineState, EnsembleRunState, HostState, RunState, StudentRunState, TeacherRunState

Tensors = dict[str, torch.Tensor]


def _own(t: torch.Tensor) -> torch.Tensor:
    """A tensor's own copy (a view would keep, and a checkpoint would save, the whole stacked storage)."""
    return t.detach().clone()


def _take(values: Tensors, index: int | slice) -> Tensors:
    return {n: _own(v[index]) for n, v in values.items()}


def _put(values: Tensors, index: int | slice, saved: Tensors) -> None:
    for n, v in values.items():
        v[index].copy_(saved[n])


def run_state(state: EngineState, setup: EngineSetup, r: int) -> RunState:
    """Run ``r``'s :class:`~gped_kit.engine.state.RunState` now: its own copies of everything it needs to
    continue from the current step. The dropout stream's state is the one the loop saved last (at its
    last checkpoint point or its end), as the loop draws from the global stream while it runs."""
    k, host, chain = setup.layout.run_chains(r), state.host, state.chain
    teacher = TeacherRunState(params=_take(chain.params, k), buffers=_take(chain.buffers, k),
                              sampler=_take(chain.sampler, k), train_nll_sum=_own(chain.train_nll_sum[k]),
                              steps_in_nll_sum=host.steps_in_nll_sum)
    students = tuple(StudentRunState(params=_take(s.params, r), buffers=_take(s.buffers, r),
                                     exp_avg=_take(s.adam.exp_avg, r), exp_avg_sq=_take(s.adam.exp_avg_sq, r),
                                     lr=state.lr_values[j][r], store_sums=_own(s.store.sums[r]),
                                     store_counts=_own(s.store.counts[r]), loss_sum=_own(s.loss_sum[r]),
                                     steps_since_log=host.steps_since_log[j], adam_steps=host.adam_steps[j])
                     for j, s in enumerate(state.students))
    ensemble = EnsembleRunState(sums=_take(state.ensemble.sums, k), count=host.ensemble_count,
                                recent=state.recent.state_dict(r))
    return RunState(t=host.t, elapsed=state.elapsed, history=list(state.history[r]), teacher=teacher,
                    students=students, ensemble=ensemble, generators=setup.layout.generators(state.streams, r),
                    dropout_rng={n: v.clone() for n, v in state.dropout_rng.items()},
                    snapshots=_own(state.snapshots[k]), snapshots_taken=host.snapshots_taken)


def load_run_states(state: EngineState, setup: EngineSetup, states: Mapping[int, RunState]) -> None:
    """Continue each run r of ``states`` from its :class:`~gped_kit.engine.state.RunState` (runs not in it
    keep theirs), so that the engine goes on as the runs that made them would have.

    Every run of a batch must be at the same step (runs not given: at the engine's), and each state
    must come from a run of this kind (pooled or single, the same students); otherwise ``ValueError``
    before anything is changed. The host-side counters shared by the batch (the step, the counts since
    the last log point, Adam's and the ensemble's, the snapshots taken, the dropout stream) are the
    lowest run's; the elapsed time is the longest. ``resumed_from`` records the step."""
    if not states:
        return
    layout = setup.layout
    kind = "pooled" if layout.pooled else "single"
    for r, saved in states.items():
        if not 0 <= r < layout.num_runs:
            raise ValueError(f"load_run_states: run {r} of an engine of {layout.num_runs} runs")
        if saved.pooled != layout.pooled or len(saved.students) != len(state.students):
            raise ValueError(f"load_run_states: run {r}'s state is of a {'pooled' if saved.pooled else 'single'} "
                             f"run with {len(saved.students)} students, this engine's runs are "
                             f"{kind} with {len(state.students)}")
    steps = sorted({s.t for s in states.values()} | ({state.host.t} if len(states) < layout.num_runs else set()))
    if len(steps) != 1:
        raise ValueError(f"the chains would resume at different steps {steps}; all chains of a batch must be at "
                         "the same step (run them separately, or start afresh)")
    for r, saved in states.items():
        _load_run(state, setup, r, saved)
    first = states[min(states)]
    state.host = HostState(t=first.t, steps_in_nll_sum=first.teacher.steps_in_nll_sum,
                           ensemble_count=first.ensemble.count, adam_steps=[s.adam_steps for s in first.students],
                           steps_since_log=[s.steps_since_log for s in first.students],
                           snapshots_taken=first.snapshots_taken)
    state.resumed_from = first.t
    state.elapsed = max(s.elapsed for s in states.values())
    state.dropout_rng = {n: v.cpu() for n, v in first.dropout_rng.items()}


def _load_run(state: EngineState, setup: EngineSetup, r: int, saved: RunState) -> None:
    """Copy run ``r``'s per-run parts of ``saved`` into the state's tensors, generators and history."""
    chain, k, teacher = state.chain, setup.layout.run_chains(r), saved.teacher
    _put(chain.params, k, teacher.params)
    _put(chain.buffers, k, teacher.buffers)
    _put(chain.sampler, k, teacher.sampler)
    chain.train_nll_sum[k].copy_(teacher.train_nll_sum)
    for j, (s, part) in enumerate(zip(state.students, saved.students)):
        _put(s.params, r, part.params)
        _put(s.buffers, r, part.buffers)
        _put(s.adam.exp_avg, r, part.exp_avg)
        _put(s.adam.exp_avg_sq, r, part.exp_avg_sq)
        s.store.sums[r].copy_(part.store_sums)
        s.store.counts[r].copy_(part.store_counts)
        s.loss_sum[r].copy_(part.loss_sum)
        s.lr[r].fill_(part.lr)
        state.lr_values[j][r] = part.lr
    _put(state.ensemble.sums, k, saved.ensemble.sums)
    state.recent.load_state_dict(r, saved.ensemble.recent, test_sums(state, setup))
    setup.layout.load_generators(state.streams, r, saved.generators)
    state.snapshots[k].copy_(saved.snapshots)
    state.history[r] = list(saved.history)
