"""The step functions of Algorithm 1 for one chain; batched by ``torch.func.vmap`` over stacked states.

Each function takes a state from :mod:`gped_kit.engine.state` and the step's inputs (the
minibatch, the random draws, made outside by :mod:`gped_kit.engine.streams`), updates the
state in place and returns it (or the gradients the update needs). The same functions run one chain (with
``Autodiff.AUTOGRAD``) and, wrapped in ``torch.func.vmap``, a batch of chains whose tensors
carry a leading chain axis (with ``Autodiff.FUNCTORCH``). The network-specific parts come in
small frozen bundles (:class:`TeacherFns`, :class:`StudentFns`) built once per batch.

* :func:`teacher_gradients` -- the gradient of the minibatch NLL on D that Eq. 7's step takes (the
  sampler's update follows, over the engine's flat buffer).
* :func:`teacher_statistics` -- the current sample's output statistics (log-probabilities) on
  distillation or evaluation inputs, optionally with the projected input-gradients that
  derivative matching needs.
* :func:`ensemble_step` -- adds g(x, theta_t) for every tracked target to the ensemble's
  running sums on a chunk of the evaluation inputs.
* :func:`distill_gradients` -- Algorithm 1's inner update up to the gradient: the target
  estimates g_hat (Eq. 9 or 10) for the minibatch S' of D', then the gradient of
  ``mean_i l(g_hat_i, f(x_i | phi)) + lambda R(phi)`` (Eq. 8) (+ gamma times the derivative
  square error, thesis Eq. 2.18); the engine's Adam step follows, over its flat buffer.
* :func:`pooled_distill_gradients` -- the same for the students of a pooled teacher, whose
  targets pool the K chains' current samples (Eqs. 9 and 10 over the pooled samples).

The updates (the sampler's, Adam's) run outside ``vmap``, once over each flat ``(K, P)`` buffer
of the engine (:mod:`gped_kit.core.flat`): a handful of kernels per step, not a handful per
parameter tensor.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.func import functional_call
from torch.nn import functional as F

from ..core import losses
from ..core.autodiff import Autodiff, projected_input_gradient, value_and_grad
from ..core.estimators import estimator_update_, pooled_estimator_update_
from ..core.likelihoods import Likelihood
from ..core.options import Estimator
from ..core.sampler import SamplerConfig
from ..core.targets import Target
from .config import Regularizer
from .state import ChainState, EnsembleState, StudentState


@dataclass(frozen=True)
class TeacherFns:
    """The teacher's network skeletons (training / evaluation mode), likelihood and sampler."""

    train: nn.Module
    eval: nn.Module
    likelihood: Likelihood
    sampler: SamplerConfig
    #: the step functions run under ``torch.func.vmap`` over a batch of chains (``Likelihood.mean_nll``'s form)
    vmapped: bool = False


@dataclass(frozen=True)
class StudentFns:
    """A student slot's skeleton, target, estimator, regulariser and derivative-matching weight."""

    train: nn.Module
    target: Target
    estimator: Estimator
    regularizer: Regularizer | None
    reg_weight: float
    derivative_weight: float
    num_classes: int


def teacher_loss(params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor], x: torch.Tensor,
                 y: torch.Tensor, fns: TeacherFns) -> torch.Tensor:
    """The minibatch mean NLL L(theta) of Eq. 7 (the likelihood's ``mean_nll``)."""
    return fns.likelihood.mean_nll(functional_call(fns.train, (params, buffers), (x,)), y, fns.vmapped)


def teacher_gradients(state: ChainState, x: torch.Tensor, y: torch.Tensor, *, fns: TeacherFns,
                      autodiff: Autodiff) -> dict[str, torch.Tensor]:
    """The gradient of the minibatch mean NLL L(theta_t) on ``(x, y)`` (Eq. 7's data term, before
    the prior and the noise: the sampler's update adds them); adds the NLL to ``train_nll_sum``."""
    loss, grads = value_and_grad(teacher_loss, state.params, state.buffers, x, y, fns, mode=autodiff)
    state.train_nll_sum.add_(loss)
    return grads


def teacher_statistics(params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor], x: torch.Tensor, *,
                       fns: TeacherFns) -> torch.Tensor:
    """The current sample's output statistics on ``x`` (log-probabilities for classification), in
    evaluation mode and without gradients."""
    with torch.no_grad():
        return fns.likelihood.statistics(functional_call(fns.eval, (params, buffers), (x,)))


def teacher_statistics_and_gradient(params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor],
                                    x: torch.Tensor, projection: torch.Tensor, *, fns: TeacherFns,
                                    autodiff: Autodiff) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`teacher_statistics` and the teacher's projected input-gradient of its
    log-probabilities ``d/dx sum_c v_c log p_c(x)`` (derivative matching; constants of the student's loss)."""

    def log_probs(inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = F.log_softmax(functional_call(fns.eval, (params, buffers), (inputs,)), dim=-1)
        return out, out

    grad, stats = projected_input_gradient(log_probs, x, projection, autodiff, create_graph=False)
    return stats, grad


def ensemble_step(ensemble: EnsembleState, params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor],
                  x: torch.Tensor, *, start: int, fns: TeacherFns, targets: dict[str, Target]) -> EnsembleState:
    """Add g(x_i, theta_t) of every target in ``targets`` to the ensemble's running sums for the
    evaluation inputs ``x`` (rows ``start`` .. ``start + len(x)``)."""
    stats = teacher_statistics(params, buffers, x, fns=fns)
    with torch.no_grad():
        for name, target in targets.items():
            ensemble.sums[name][start:start + x.shape[0]].add_(target.g(stats))
    return ensemble


def student_loss(params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor], x: torch.Tensor,
                 target_hat: torch.Tensor, projection: torch.Tensor | None, teacher_grad: torch.Tensor | None,
                 fns: StudentFns, autodiff: Autodiff) -> torch.Tensor:
    """Eq. 8's ``mean_i l(g_hat_i, f(x_i | phi)) + lambda R(phi)``, plus the derivative square error
    times gamma when the student matches derivatives."""

    def forward(inputs: torch.Tensor) -> torch.Tensor:
        return functional_call(fns.train, (params, buffers), (inputs,))

    if fns.derivative_weight > 0:
        def log_probs(inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            raw_out = forward(inputs)
            return F.log_softmax(raw_out[:, :fns.num_classes], dim=-1), raw_out

        student_grad, raw = projected_input_gradient(log_probs, x, projection, autodiff, create_graph=True)
        loss = fns.target.loss(target_hat, raw).mean()
        loss = loss + fns.derivative_weight * losses.derivative_square_error(student_grad, teacher_grad).mean()
    else:
        loss = fns.target.loss(target_hat, forward(x)).mean()
    if fns.regularizer is not None:
        loss = loss + fns.reg_weight * fns.regularizer(params, fns.train)
    return loss


def distill_gradients(state: StudentState, x: torch.Tensor, index: torch.Tensor, stats: torch.Tensor,
                      projection: torch.Tensor | None, teacher_grad: torch.Tensor | None, *, fns: StudentFns,
                      autodiff: Autodiff) -> dict[str, torch.Tensor]:
    """Algorithm 1's inner step up to the student's gradient: g(x'_i, theta_t) from the teacher's
    ``stats`` on the distillation inputs ``x`` (indices ``index`` into D'), the estimator's targets
    g_hat (Eqs. 9-10; U_o's store updated in place), and the gradient of Eq. 8's loss at phi
    (:func:`student_gradients`). The Adam step follows (the engine applies it to its flat buffers)."""
    with torch.no_grad():
        target_hat = estimator_update_(fns.estimator, state.store, index, fns.target.g(stats))
    return student_gradients(state, x, target_hat, projection, teacher_grad, fns=fns, autodiff=autodiff)


def pooled_distill_gradients(state: StudentState, x: torch.Tensor, index: torch.Tensor, stats: torch.Tensor,
                             projection: torch.Tensor | None, teacher_grad: torch.Tensor | None, *, fns: StudentFns,
                             autodiff: Autodiff) -> dict[str, torch.Tensor]:
    """:func:`distill_gradients` for one student of a pooled teacher: ``stats`` (K, M', ...) are the
    K chains' current samples' statistics on the same inputs ``x``; g is computed for each (g is per
    example: the K x M' rows go through it at once), the targets g_hat pool them
    (:func:`~gped_kit.core.estimators.pooled_estimator_update_`: U_s their mean, U_o all K samples
    into the running means), then the gradient of the student's loss. ``teacher_grad`` (derivative
    matching) is already the chains' mean. With K = 1 it computes exactly what
    :func:`distill_gradients` does."""
    with torch.no_grad():
        chains, rows = stats.shape[:2]
        values = fns.target.g(stats.reshape(chains * rows, *stats.shape[2:])).reshape(chains, rows, -1)
        target_hat = pooled_estimator_update_(fns.estimator, state.store, index, values)
    return student_gradients(state, x, target_hat, projection, teacher_grad, fns=fns, autodiff=autodiff)


def student_gradients(state: StudentState, x: torch.Tensor, target_hat: torch.Tensor,
                      projection: torch.Tensor | None, teacher_grad: torch.Tensor | None, *, fns: StudentFns,
                      autodiff: Autodiff) -> dict[str, torch.Tensor]:
    """The gradient of Eq. 8's loss towards the targets ``target_hat`` (M', D) at the student's
    phi; adds the loss to ``loss_sum``."""
    loss, grads = value_and_grad(student_loss, state.params, state.buffers, x, target_hat, projection, teacher_grad,
                                 fns, autodiff, mode=autodiff)
    state.loss_sum.add_(loss)
    return grads
