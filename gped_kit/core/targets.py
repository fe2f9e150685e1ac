"""Posterior expectations to distil: the functions g of E_theta[g(y, x, theta)] (Section 3.2).

A :class:`Target` bundles everything the paper pairs with a choice of ``g`` (Section 3.2,
Appendix A.2): how to compute ``g`` from the teacher's output statistics (log-probabilities
for the categorical likelihood, ``[mu, sigma^2]`` for the Gaussian one; see
:mod:`gped_kit.core.likelihoods`), the student's output head (``link``) and the loss.

Built-in targets for classification (``C`` classes, ``p = p(y|x, theta)``):

* ``predictive``:  g = p(y|x, theta)                       softmax head, cross-entropy
* ``entropy``:     g = H[p] = -sum_y p log p  (>= 0)       exp head, absolute error.
  The paper writes ``g = sum_y p log p`` (the negative entropy) but distils and reports the
  entropy itself; this is the expected data uncertainty E_theta[H[p(.|x,theta)]].
* ``marginal_variance``: g = p(y|x,theta) (1 - p(y|x,theta)) per class (paper 000, Sec. 3.1);
  identity head followed by ``0.25 * sigmoid`` (values lie in [0, 1/4]), absolute error.
* ``predictive+entropy``: the C+1 target of Experiment 4 (one student, both expectations).

For regression (Gaussian likelihood, ``D`` output dimensions):

* ``predictive_mean``: g = mu(x, theta); identity head, squared error. E[g] is the posterior
  predictive mean.
* ``predictive_variance``: g = (mu, mu^2, sigma^2) per dimension (3D values). The student
  outputs (m, log e, log a) and predicts (m, m^2 + e, a): m estimates E[mu], e the epistemic
  variance Var[mu] = E[mu^2] - E[mu]^2 (>= 0 by construction) and a the aleatoric variance
  E[sigma^2]; the predictive variance is a + e (:func:`regression_moments`). The loss
  (:func:`centered_moments_loss`) is squared error on m, on a, and on e against the *centred*
  second moment ``g_2 - 2 m g_1 + m^2`` (m held fixed), whose expectation is
  ``Var[mu] + (E[mu] - m)^2``: linear in the targets, so U_s gives unbiased gradients, and well
  conditioned when |E[mu]| >> sd(mu) (fitting m^2 + e to E[mu^2] directly is not: an error d in
  m moves e by 2 |m| d).

The EnD2 baseline is a target too (:mod:`gped_kit.baselines.endd`); any callable
``g(statistics) -> (B, D)`` can be wrapped with :func:`custom_target`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

import torch
from torch.nn import functional as F

from . import losses

TensorFn = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Target:
    """A posterior expectation E_theta[g] and how a student represents and learns it.

    ``g`` maps the teacher's output statistics ``(B, S)`` to per-example values ``(B, D)``;
    ``out_dim(C) = D`` for C likelihood outputs (classes, or regression dimensions);
    ``link`` maps the student's raw outputs to its prediction of E[g] (or, for EnD2, to the
    Dirichlet's mean and precision); ``loss(target, raw)`` returns per-example losses ``(B,)``;
    ``predictive_classes`` is True when the first C columns of the student's linked output are
    a predictive distribution (NLL and accuracy are then reported); ``estimates_g`` is False
    when the linked output is not an estimate of E[g] (EnD2); ``likelihood`` names the teacher
    likelihood whose statistics ``g`` reads; ``entropy_last`` is True when the last column is the
    expected entropy E[H] (its MAE is then reported).
    """

    name: str
    g: TensorFn
    out_dim: Callable[[int], int]
    link: TensorFn
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    predictive_classes: bool = False
    estimates_g: bool = True
    likelihood: str = "categorical"
    entropy_last: bool = False


# ------------------------------------------------------------------------------ output heads
def softmax_head(raw: torch.Tensor) -> torch.Tensor:
    """Class probabilities: the predictive-distribution head."""
    return F.softmax(raw, dim=-1)


def exp_head(raw: torch.Tensor) -> torch.Tensor:
    """A positive output (the expected-entropy head); the raw output is its log."""
    return raw.exp()


def softmax_exp_head(raw: torch.Tensor) -> torch.Tensor:
    """The C+1 head of Experiment 4: softmax over the first C outputs, exp of the last."""
    return torch.cat([F.softmax(raw[:, :-1], dim=-1), raw[:, -1:].exp()], dim=-1)


def quarter_sigmoid_head(raw: torch.Tensor) -> torch.Tensor:
    """Values in (0, 1/4): the marginal-variance head."""
    return 0.25 * torch.sigmoid(raw)


def identity_head(raw: torch.Tensor) -> torch.Tensor:
    return raw


def dirichlet_head(raw: torch.Tensor) -> torch.Tensor:
    """A prior network's head (paper 003, Appendix A.3-A.4): concentrations alpha = exp(raw) (capped
    at exp(:data:`~gped_kit.core.losses.DIRICHLET_MAX_LOG_ALPHA`)), returned as ``[alpha / alpha_0,
    alpha_0]`` (C+1 columns): the Dirichlet's mean, which is the predictive distribution, and its
    precision alpha_0 = sum_c alpha_c. ``alpha`` is their product."""
    alpha = raw.clamp(max=losses.DIRICHLET_MAX_LOG_ALPHA).exp()
    alpha0 = alpha.sum(dim=-1, keepdim=True)
    return torch.cat([alpha / alpha0, alpha0], dim=-1)


def moments_head(raw: torch.Tensor) -> torch.Tensor:
    """The ``predictive_variance`` head: raw (m, log e, log a) -> (m, m^2 + e, a) per dimension."""
    m, log_e, log_a = raw.chunk(3, dim=-1)
    return torch.cat([m, m * m + log_e.exp(), log_a.exp()], dim=-1)


HEADS: dict[str, TensorFn] = {"softmax": softmax_head, "exp": exp_head, "softmax+exp": softmax_exp_head,
                              "quarter_sigmoid": quarter_sigmoid_head, "dirichlet": dirichlet_head,
                              "moments": moments_head, "identity": identity_head}


# ------------------------------------------------------------------------------ g
def predictive_g(log_probs: torch.Tensor) -> torch.Tensor:
    """g = p(y|x, theta): the posterior predictive distribution's integrand."""
    return log_probs.exp()


def entropy_g(log_probs: torch.Tensor) -> torch.Tensor:
    """g = H[p(.|x, theta)] = -sum_y p log p, shape (B, 1); 0 log 0 = 0."""
    return torch.special.entr(log_probs.exp()).sum(dim=-1, keepdim=True)


def marginal_variance_g(log_probs: torch.Tensor) -> torch.Tensor:
    """g = p(y|x, theta) (1 - p(y|x, theta)), the per-class Bernoulli variance (paper 000, Sec. 3.1)."""
    p = log_probs.exp()
    return p * (1.0 - p)


def predictive_entropy_g(log_probs: torch.Tensor) -> torch.Tensor:
    """The C+1 target: ``[p(y|x, theta), H[p]]``."""
    return torch.cat([predictive_g(log_probs), entropy_g(log_probs)], dim=-1)


def predictive_mean_g(stats: torch.Tensor) -> torch.Tensor:
    """g = mu(x, theta) from the Gaussian statistics ``[mu, sigma^2]``."""
    return stats.chunk(2, dim=-1)[0]


def predictive_moments_g(stats: torch.Tensor) -> torch.Tensor:
    """g = (mu, mu^2, sigma^2) from the Gaussian statistics ``[mu, sigma^2]``."""
    mean, var = stats.chunk(2, dim=-1)
    return torch.cat([mean, mean * mean, var], dim=-1)


def centered_moments_loss(target: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
    """The ``predictive_variance`` loss per example: with targets (g_1, g_2, g_3) estimating
    (E[mu], E[mu^2], E[sigma^2]) and student outputs (m, log e, log a),
    ``(m - g_1)^2 + (e - (g_2 - 2 m' g_1 + m'^2))^2 + (a - g_3)^2`` summed over dimensions, where
    m' is m without gradient. Its minimiser is m = E[mu], e = Var[mu], a = E[sigma^2]."""
    m, log_e, log_a = raw.chunk(3, dim=-1)
    g1, g2, g3 = target.chunk(3, dim=-1)
    center = m.detach()
    centered = g2 - 2 * center * g1 + center * center
    return losses.squared_error(g1, m) + losses.squared_error(centered, log_e.exp()) + losses.squared_error(
        g3, log_a.exp())


ENTROPY_LOSSES = {"absolute": losses.absolute_error, "squared": losses.squared_error}


def entropy_target(loss: str = "absolute") -> Target:
    """The expected-entropy target with the paper's absolute error (``"absolute"``, Section 3.2) or the
    squared error (``"squared"``, name ``entropy-sq``). The absolute error is minimised by the
    *median* of the targets, the squared error by their *mean*: with the single-sample (U_s) or
    few-visit (U_o) entropy targets, which are right-skewed, the absolute error fits E[H] low."""
    if loss not in ENTROPY_LOSSES:
        raise ValueError(f"entropy loss={loss!r} is not known; allowed: {sorted(ENTROPY_LOSSES)}")
    fn = ENTROPY_LOSSES[loss]
    return Target("entropy" if loss == "absolute" else "entropy-sq", entropy_g, out_dim=lambda c: 1, link=exp_head,
                  loss=lambda target, raw: fn(target, raw.exp()), entropy_last=True)


def predictive_entropy_target(entropy_loss: str = "absolute") -> Target:
    """The C+1 target of Experiment 4 (predictive and expected entropy in one student): cross-entropy on
    the first C outputs plus the entropy loss of :func:`entropy_target` on the last (name
    ``predictive+entropy``, or ``predictive+entropy-sq`` with the squared error)."""
    if entropy_loss not in ENTROPY_LOSSES:
        raise ValueError(f"entropy_loss={entropy_loss!r} is not known; allowed: {sorted(ENTROPY_LOSSES)}")
    fn = ENTROPY_LOSSES[entropy_loss]

    def loss(target: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
        return losses.cross_entropy(target[:, :-1], raw[:, :-1]) + fn(target[:, -1:], raw[:, -1:].exp())

    name = "predictive+entropy" if entropy_loss == "absolute" else "predictive+entropy-sq"
    return Target(name, predictive_entropy_g, out_dim=lambda c: c + 1, link=softmax_exp_head, loss=loss,
                  predictive_classes=True, entropy_last=True)


PREDICTIVE = Target("predictive", predictive_g, out_dim=lambda c: c, link=softmax_head, loss=losses.cross_entropy,
                    predictive_classes=True)
ENTROPY = entropy_target("absolute")
MARGINAL_VARIANCE = Target("marginal_variance", marginal_variance_g, out_dim=lambda c: c, link=quarter_sigmoid_head,
                           loss=lambda target, raw: losses.absolute_error(target, quarter_sigmoid_head(raw)))
PREDICTIVE_ENTROPY = predictive_entropy_target("absolute")
PREDICTIVE_MEAN = Target("predictive_mean", predictive_mean_g, out_dim=lambda d: d, link=identity_head,
                         loss=losses.squared_error, likelihood="gaussian")
PREDICTIVE_VARIANCE = Target("predictive_variance", predictive_moments_g, out_dim=lambda d: 3 * d, link=moments_head,
                             loss=centered_moments_loss, likelihood="gaussian")

TARGETS: dict[str, Target] = {t.name: t for t in (PREDICTIVE, ENTROPY, MARGINAL_VARIANCE, PREDICTIVE_ENTROPY,
                                                  PREDICTIVE_MEAN, PREDICTIVE_VARIANCE, entropy_target("squared"),
                                                  predictive_entropy_target("squared"))}


class RegressionMoments(NamedTuple):
    """Per-input regression uncertainties from E[mu], E[mu^2], E[sigma^2] (each (B, D))."""

    mean: torch.Tensor
    epistemic: torch.Tensor
    aleatoric: torch.Tensor

    @property
    def total(self) -> torch.Tensor:
        """The predictive variance: aleatoric + epistemic."""
        return self.aleatoric + self.epistemic


def regression_moments(values: torch.Tensor) -> RegressionMoments:
    """Split ``predictive_variance`` values (a teacher ensemble's E[g] or a student's linked output,
    (B, 3D)) into mean, epistemic variance E[mu^2] - E[mu]^2 (floored at 0) and aleatoric variance."""
    mean, second, aleatoric = values.chunk(3, dim=-1)
    return RegressionMoments(mean, (second - mean * mean).clamp_min(0.0), aleatoric)


def custom_target(name: str, g: TensorFn, out_dim: int | Callable[[int], int], link: TensorFn | None = None,
                  loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
                  likelihood: str = "categorical") -> Target:
    """Wrap a user-defined ``g(statistics) -> (B, D)``; defaults: identity link, absolute error."""
    if not callable(g):
        raise TypeError(f"custom_target g={g!r} must be callable: statistics (B, S) -> (B, D)")
    if name in TARGETS:
        raise ValueError(f"custom_target name={name!r} is a built-in target's name; choose another")
    dim = out_dim if callable(out_dim) else (lambda c, d=int(out_dim): d)
    link = link or identity_head
    loss = loss or (lambda target, raw, _link=link: losses.absolute_error(target, _link(raw)))
    return Target(name, g, dim, link, loss, likelihood=likelihood)


def resolve_target(target: str | Target) -> Target:
    """Look up a built-in target by name, or pass a :class:`Target` through."""
    if isinstance(target, Target):
        return target
    if target not in TARGETS:
        raise ValueError(f"target={target!r} is not known; allowed: {sorted(TARGETS)} or a Target object "
                         "(e.g. gped_kit.baselines.endd.endd_target() or custom_target(...))")
    return TARGETS[target]
