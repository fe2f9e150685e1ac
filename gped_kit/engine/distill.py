"""Algorithm 1's inner step: one distillation group's update of its students, for every run.

At a step t > B with t mod H = 0, distillation group ``key`` (the students sharing H, M' and their
input generator, :class:`~gped_kit.engine.config.GroupKey`) draws S' (M' inputs of D', or its
generator's: :func:`draw_distill_inputs`), computes the current teacher sample's statistics on it
once, and for each of its students j computes the targets g_hat (U_s: g(x'_i, theta_t), Eq. 9; U_o:
the running mean over the samples current at each visit of x'_i, Eq. 10) and the gradient of
Eq. 8's loss ``mean_i l(g_hat_i, f(x'_i | phi_j)) + lambda R(phi_j)`` (plus gamma times the
derivative square error for derivative matching), then takes one Adam step (``update``: the
engine's, over the slot's flat buffer).

:func:`distill_independent` runs it for independent chains (run r's students learn from chain r;
under vmap for a batch); :func:`distill_pooled` for a pooled teacher, whose K chains' statistics on
the run's one S' all feed the targets (U_s the mean of g over the K samples, U_o all K into the
running means; derivative matching matches the chains' mean input-gradient). The engine picks one,
as a :class:`~gped_kit.engine.setup.Distillation`, when it is built (``EngineSetup.distillation``).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch
from torch.func import vmap

from ..core.options import InputGenerator
from . import steps
from .config import GroupKey
from .setup import EngineSetup, Update, learning_rates, step_index_row
from .state import EngineState


def teacher_map(setup: EngineSetup, fn: Callable, in_dims: tuple) -> Callable:
    """``fn`` for one teacher chain, or vmapped over the chain axis (arguments with in_dim None are shared)."""
    if not setup.layout.batched:
        return fn
    return vmap(fn, in_dims=in_dims, randomness="different")


def one(setup: EngineSetup, x: torch.Tensor) -> torch.Tensor:
    """A per-step input for the teacher's step functions: chain 0's slice when there is one chain."""
    return x if setup.layout.batched else x[0]


def teacher_views(state: EngineState) -> tuple[Any, Any]:
    """The teacher's state and ensemble sums (chain 0's views when there is one chain)."""
    views = state.buffers.teacher_views
    return views if views is not None else (state.chain, state.ensemble)


def student_views(state: EngineState) -> list:
    """The students' states (run 0's views when the students are not batched)."""
    views = state.buffers.student_views
    return views if views is not None else state.students


def draw_distill_inputs(state: EngineState, setup: EngineSetup, key: GroupKey,
                        t: int) -> tuple[torch.Tensor, torch.Tensor]:
    """S' for every run of group ``key`` at step ``t``: indices (R, M') into D' and the inputs x' of the group's
    generator (R, M', ...), R = the number of runs (one S' per pooled teacher). Advances the group's
    random streams (counter-based ones are keyed by t)."""
    idx = state.buffers.group_idx[key]
    R = setup.layout.num_runs
    step_row = step_index_row(setup, t)
    if key.input_generator == InputGenerator.NOISE.value:
        state.streams.group_indices(key, idx, setup.distill_sets, step_row)
        shape = (R, key.batch_size, *setup.chains[0].data.input_shape)
        x = torch.empty(shape, device=setup.device)
        state.streams.group_normal(key, x, range(R))
        moments = setup.noise_moments
        view = (R,) + (1,) * (x.dim() - 1)
        return idx, moments[:, 0].view(view) + moments[:, 1].view(view) * x
    (x,) = state.streams.group_minibatch(key, idx, setup.distill_sets, step_row)
    noisy, scale = setup.input_noise[key]
    if noisy:
        eps = torch.zeros_like(x)
        state.streams.group_normal(key, eps, noisy)
        x = x + scale.view((R,) + (1,) * (x.dim() - 1)) * eps
    return idx, x


def set_lr(state: EngineState, setup: EngineSetup, j: int, t: int) -> None:
    """Each run's learning rate of student slot ``j`` at step t (Appendix A.2's halving), written
    into the state only when it changes (``fill_``: no upload, no synchronisation)."""
    for k, lr in enumerate(learning_rates(setup, j, t)):
        if lr != state.lr_values[j][k]:
            state.students[j].lr[k].fill_(lr)
            state.lr_values[j][k] = lr


class IndependentDistillation:
    """Independent chains: run r's students learn from chain r's current sample."""

    def distil_group(self, state: EngineState, setup: EngineSetup, key: GroupKey, t: int, update: Update) -> None:
        """Group ``key``'s update of every run's students at step t (module docstring)."""
        distill_independent(state, setup, key, t, update)


class PooledDistillation:
    """A pooled teacher: the run's students learn from all K chains' current samples."""

    def distil_group(self, state: EngineState, setup: EngineSetup, key: GroupKey, t: int, update: Update) -> None:
        """Group ``key``'s update of the pooled run's students at step t (:func:`distill_pooled`)."""
        distill_pooled(state, setup, key, t, update)


def distill_independent(state: EngineState, setup: EngineSetup, key: GroupKey, t: int, update: Update) -> None:
    """Group ``key``'s update of every run's students at step t (module docstring), run r's students
    learning from chain r's current sample."""
    layout = setup.layout
    chain, students = teacher_views(state)[0], student_views(state)
    idx, x = draw_distill_inputs(state, setup, key, t)
    mapped = functools.partial(teacher_map, setup)
    projection = teacher_grad = None
    if key.matches_derivatives:  # one Rademacher projection of the class axis per example
        projection = torch.empty(layout.K, key.batch_size, setup.num_outputs, device=setup.device)
        state.streams.group_signs(key, projection)
        fn = functools.partial(steps.teacher_statistics_and_gradient, fns=setup.teacher_fns, autodiff=layout.autodiff)
        stats, teacher_grad = mapped(fn, (0, 0, 0, 0))(chain.params, chain.buffers, one(setup, x),
                                                       one(setup, projection))
    else:
        fn = functools.partial(steps.teacher_statistics, fns=setup.teacher_fns)
        stats = mapped(fn, (0, 0, 0))(chain.params, chain.buffers, one(setup, x))
    for j in setup.chains[0].groups[key]:
        set_lr(state, setup, j, t)
        step = functools.partial(steps.distill_gradients, fns=setup.student_fns[j], autodiff=layout.autodiff)
        if projection is None:
            fn = functools.partial(step, projection=None, teacher_grad=None)
            grads = mapped(fn, (0, 0, 0, 0))(students[j], one(setup, x), one(setup, idx), stats)
        else:
            grads = mapped(step, (0, 0, 0, 0, 0, 0))(students[j], one(setup, x), one(setup, idx), stats,
                                                     one(setup, projection), teacher_grad)
        update(state, setup, j, grads, layout.students_batched)


def teacher_on_inputs(state: EngineState, setup: EngineSetup, fn: Callable, *shared: torch.Tensor) -> Any:
    """``fn(params, buffers, *shared)`` for every teacher chain on the same inputs, with a leading
    chain axis (K, ...) on every output, batched or not."""
    chain = teacher_views(state)[0]
    if setup.layout.batched:
        return vmap(fn, in_dims=(0, 0) + (None,) * len(shared), randomness="different")(
            chain.params, chain.buffers, *shared)
    out = fn(chain.params, chain.buffers, *shared)
    return tuple(v.unsqueeze(0) for v in out) if isinstance(out, tuple) else out.unsqueeze(0)


def distill_pooled(state: EngineState, setup: EngineSetup, key: GroupKey, t: int, update: Update) -> None:
    """Group ``key``'s update of a pooled teacher's students at step t: one S' and x' for the run, the
    K chains' statistics (K, M', ...) on it, each student updated from targets pooled over them
    (:func:`~gped_kit.engine.steps.pooled_distill_gradients`); derivative matching matches the mean
    of the K chains' projected input-gradients (one projection, shared)."""
    layout = setup.layout
    students = student_views(state)
    idx, x = draw_distill_inputs(state, setup, key, t)
    x, idx = x[0], idx[0]
    projection = teacher_grad = None
    if key.matches_derivatives:
        signs = torch.empty(1, key.batch_size, setup.num_outputs, device=setup.device)
        state.streams.group_signs(key, signs)
        projection = signs[0]
        fn = functools.partial(steps.teacher_statistics_and_gradient, fns=setup.teacher_fns, autodiff=layout.autodiff)
        stats, grads = teacher_on_inputs(state, setup, fn, x, projection)
        teacher_grad = grads.mean(0)
    else:
        stats = teacher_on_inputs(state, setup, functools.partial(steps.teacher_statistics, fns=setup.teacher_fns), x)
    for j in setup.chains[0].groups[key]:
        set_lr(state, setup, j, t)
        grads = steps.pooled_distill_gradients(students[j], x, idx, stats, projection, teacher_grad,
                                               fns=setup.student_fns[j], autodiff=layout.student_autodiff)
        update(state, setup, j, grads, False)
