"""Posterior expectations to distil (g) and their online estimators (U_s, U_o).

A :class:`Target` bundles everything the paper pairs with a choice of
``g(y, x, theta)`` (Section 3.2, Appendix A.2): how to compute ``g`` from the teacher's
log-probabilities, the student's output head, and the default loss.

Built-in targets (``C`` classes, ``p = p(y|x, theta)``):

* ``predictive``:  g = p(y|x, theta)                       softmax head, cross-entropy
* ``entropy``:     g = H[p] = -sum_y p log p  (>= 0)       exp head, absolute error.
  The paper writes ``g = sum_y p log p`` (the negative entropy) but distils and reports the
  entropy itself; this is the expected data uncertainty E_theta[H[p(.|x,theta)]].
* ``marginal_variance``: g = p(y|x,theta) (1 - p(y|x,theta)) per class (paper 000, Sec. 3.1);
  identity head followed by ``0.25 * sigmoid`` (values lie in [0, 1/4]), absolute error.
* ``predictive+entropy``: the C+1 target of Experiment 4 (one student, both expectations).
* ``endd``: the EnD2 baseline (Appendix A.3): g = ln pi_T, the log of the teacher sample's
  temperature-scaled (T = 2.5, A.4) and smoothed class distribution; the student is a prior
  network (Dirichlet concentrations through exp) trained with the Dirichlet NLL of Eq. 11.
  Its outputs are the Dirichlet's mean and precision, not an estimate of E[g].

Any callable ``g(log_probs) -> (B, D)`` can be wrapped with :func:`custom_target`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from . import losses
from .models import dirichlet_head, exp_head, softmax_exp_head, softmax_head

TensorFn = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Target:
    """A posterior expectation E_theta[g] and how a student represents and learns it.

    ``g`` maps teacher log-probabilities ``(B, C)`` to per-example values ``(B, D)``;
    ``out_dim(C) = D``; ``link`` maps the student's raw outputs to a prediction of E[g];
    ``loss(target, raw)`` returns per-example losses ``(B,)``; ``predictive_classes`` is True
    when the first C columns of the student's linked output are a predictive distribution
    (then NLL and accuracy are reported); ``estimates_g`` is False when the linked output is
    not an estimate of E[g] (EnD2), so no student-vs-teacher MAE on g is reported.
    """

    name: str
    g: TensorFn
    out_dim: Callable[[int], int]
    link: TensorFn
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    predictive_classes: bool = False
    estimates_g: bool = True


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


def _quarter_sigmoid(raw: torch.Tensor) -> torch.Tensor:
    return 0.25 * torch.sigmoid(raw)


def _predictive_entropy_g(log_probs: torch.Tensor) -> torch.Tensor:
    return torch.cat([predictive_g(log_probs), entropy_g(log_probs)], dim=-1)


def _predictive_entropy_loss(target: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
    return losses.cross_entropy(target[:, :-1], raw[:, :-1]) + losses.absolute_error(
        target[:, -1:], raw[:, -1:].exp()
    )


PREDICTIVE = Target(
    "predictive",
    predictive_g,
    out_dim=lambda c: c,
    link=softmax_head,
    loss=losses.cross_entropy,
    predictive_classes=True,
)
ENTROPY = Target(
    "entropy",
    entropy_g,
    out_dim=lambda c: 1,
    link=exp_head,
    loss=lambda target, raw: losses.absolute_error(target, raw.exp()),
)
MARGINAL_VARIANCE = Target(
    "marginal_variance",
    marginal_variance_g,
    out_dim=lambda c: c,
    link=_quarter_sigmoid,
    loss=lambda target, raw: losses.absolute_error(target, _quarter_sigmoid(raw)),
)
PREDICTIVE_ENTROPY = Target(
    "predictive+entropy",
    _predictive_entropy_g,
    out_dim=lambda c: c + 1,
    link=softmax_exp_head,
    loss=_predictive_entropy_loss,
    predictive_classes=True,
)

ENDD_TEMPERATURE = 2.5  # Appendix A.4: fixed training temperature of the prior networks
ENDD_SMOOTHING = 1e-3  # pi is mixed with the uniform distribution so ln pi stays finite


def endd_target(temperature: float = ENDD_TEMPERATURE, smoothing: float = ENDD_SMOOTHING) -> Target:
    """The EnD2 baseline as a GPED target (paper 003, Appendix A.3-A.4).

    g = ln pi_T with pi_T = (1 - smoothing) softmax(ln p / T) + smoothing / C, the teacher
    sample's class distribution at training temperature T (Malinin et al. heat both the
    ensemble and the prior network; at test time T = 1). The loss is Eq. 11
    (:func:`gped_kit.losses.dirichlet_nll` with alpha = exp(raw / T)); the link is
    :func:`gped_kit.models.dirichlet_head`, outputs ``[alpha/alpha_0, alpha_0]`` at T = 1.
    """
    if not (temperature > 0 and math.isfinite(temperature)):
        raise ValueError(f"endd temperature={temperature!r}: must be finite and > 0")
    if not 0 <= smoothing < 1:
        raise ValueError(f"endd smoothing={smoothing!r}: must lie in [0, 1)")
    name = "endd" if (temperature, smoothing) == (ENDD_TEMPERATURE, ENDD_SMOOTHING) else \
        f"endd-T{temperature:g}-s{smoothing:g}"

    def g(log_probs: torch.Tensor) -> torch.Tensor:
        pi = torch.softmax(log_probs / temperature, dim=-1)
        return (pi * (1 - smoothing) + smoothing / pi.shape[-1]).log()

    return Target(name, g, out_dim=lambda c: c, link=dirichlet_head,
                  loss=lambda target, raw: losses.dirichlet_nll(target, raw, temperature),
                  predictive_classes=True, estimates_g=False)


ENDD = endd_target()

TARGETS: dict[str, Target] = {t.name: t for t in (PREDICTIVE, ENTROPY, MARGINAL_VARIANCE, PREDICTIVE_ENTROPY, ENDD)}


def custom_target(
    name: str,
    g: TensorFn,
    out_dim: int | Callable[[int], int],
    link: TensorFn | None = None,
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
) -> Target:
    """Wrap a user-defined ``g(log_probs) -> (B, D)``; defaults: identity link, absolute error."""
    if not callable(g):
        raise TypeError(f"custom_target g={g!r} must be callable: log_probs (B, C) -> (B, D)")
    dim = out_dim if callable(out_dim) else (lambda c, d=int(out_dim): d)
    link = link or (lambda raw: raw)
    loss = loss or (lambda target, raw, _link=link: losses.absolute_error(target, _link(raw)))
    return Target(name, g, dim, link, loss)


def resolve_target(target: str | Target) -> Target:
    """Look up a built-in target by name, or pass a :class:`Target` through."""
    if isinstance(target, Target):
        return target
    if target not in TARGETS:
        raise ValueError(f"target={target!r} is not known; allowed: {sorted(TARGETS)} or a Target object")
    return TARGETS[target]


# --------------------------------------------------------------------------------------
# Estimators U (Eqs. 9 and 10)
# --------------------------------------------------------------------------------------

ESTIMATORS = ("U_s", "U_o", "U_s+U_o")


class StochasticEstimator:
    """U_s (Eq. 9): the current sample's value, ``g_hat <- g(y, x_i, theta_t)``. Memoryless."""

    name = "U_s"

    def update(self, index: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        return value

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass

    @property
    def nbytes(self) -> int:
        return 0


class OnlineMeanEstimator:
    """U_o (Eq. 10): a per-example running Monte Carlo mean with visit counts ``m_i``.

    Eq. 10, ``g_hat <- (m_i g_hat + g(theta_t)) / (m_i + 1)``, is kept as running sums and
    counts (``g_hat = sum_i / m_i``), which is the same estimate and stays correct when an
    index occurs several times in one minibatch (drawn with replacement): each occurrence is
    one more visit with the same ``theta_t``. Storage is ``|D'| x (D + 1)`` numbers on the
    run's device and grows linearly with |D'|.
    """

    name = "U_o"

    def __init__(self, num_examples: int, dim: int, device: torch.device | str = "cpu",
                 dtype: torch.dtype = torch.float32) -> None:
        if num_examples < 1 or dim < 1:
            raise ValueError(f"U_o store needs num_examples >= 1 and dim >= 1, got {num_examples}, {dim}")
        self.sums = torch.zeros(num_examples, dim, device=device, dtype=dtype)
        self.counts = torch.zeros(num_examples, device=device, dtype=dtype)

    def update(self, index: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        self.sums.index_add_(0, index, value.to(self.sums.dtype))
        self.counts.index_add_(0, index, torch.ones_like(index, dtype=self.counts.dtype))
        return self.sums[index] / self.counts[index].unsqueeze(-1)

    def estimate(self, index: torch.Tensor) -> torch.Tensor:
        """Current estimates for ``index`` (NaN for never-visited examples)."""
        return self.sums[index] / self.counts[index].unsqueeze(-1)

    def state_dict(self) -> dict:
        return {"sums": self.sums, "counts": self.counts}

    def load_state_dict(self, state: dict) -> None:
        self.sums.copy_(state["sums"])
        self.counts.copy_(state["counts"])

    @property
    def nbytes(self) -> int:
        return self.sums.numel() * self.sums.element_size() + self.counts.numel() * self.counts.element_size()


class SplitEstimator:
    """``U_s+U_o``: U_s on all target columns but the last, U_o on the last.

    Experiment 4's GPED student distils the predictive distribution and the expected entropy
    in one C+1 network, and "for distilling entropy ... we always use U_o" (paper 003, Exp. 4):
    its "U_s" students are U_s on the predictive columns and U_o on the entropy column.
    """

    name = "U_s+U_o"

    def __init__(self, num_examples: int, device: torch.device | str = "cpu") -> None:
        self.online = OnlineMeanEstimator(num_examples, 1, device)

    def update(self, index: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        return torch.cat([value[:, :-1], self.online.update(index, value[:, -1:])], dim=-1)

    def state_dict(self) -> dict:
        return self.online.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.online.load_state_dict(state)

    @property
    def nbytes(self) -> int:
        return self.online.nbytes


def make_estimator(name: str, num_examples: int, dim: int, device: torch.device | str = "cpu"):
    """Build ``U_s``, ``U_o`` or ``U_s+U_o`` (:class:`SplitEstimator`, needs ``dim >= 2``) for a
    distillation set of ``num_examples`` and targets of size ``dim``."""
    if name == "U_s":
        return StochasticEstimator()
    if name == "U_o":
        return OnlineMeanEstimator(num_examples, dim, device)
    if name == "U_s+U_o":
        if dim < 2:
            raise ValueError(f"estimator 'U_s+U_o' splits the target's columns and needs dim >= 2, got {dim}; "
                             "use it with the 'predictive+entropy' target")
        return SplitEstimator(num_examples, device)
    raise ValueError(f"estimator={name!r} is not known; allowed: {ESTIMATORS}")


class PosteriorAccumulator:
    """Monte Carlo estimates of E_theta[g(x, theta)] on a fixed input set, without storing samples.

    Used for the teacher ensemble on the test set: after burn-in, every kept sample adds
    ``g`` for each target into running sums (``accumulate``); ``mean(name)`` is the posterior
    expectation estimate (1/S) sum_s g(x, theta_s). The predictive target is always tracked.
    """

    def __init__(self, inputs: torch.Tensor, num_classes: int, targets: Sequence[Target],
                 chunk_size: int = 500) -> None:
        self.inputs = inputs
        self.chunk_size = chunk_size
        self.targets = {t.name: t for t in (PREDICTIVE, *targets)}
        n = inputs.shape[0]
        self.sums = {name: torch.zeros(n, t.out_dim(num_classes), device=inputs.device)
                     for name, t in self.targets.items()}
        self.count = 0

    @torch.no_grad()
    def accumulate(self, log_prob_fn: TensorFn) -> None:
        """Add g(x, theta) for the current sample; ``log_prob_fn(x)`` returns (B, C) log-probs."""
        for start in range(0, self.inputs.shape[0], self.chunk_size):
            log_probs = log_prob_fn(self.inputs[start:start + self.chunk_size])
            for name, target in self.targets.items():
                self.sums[name][start:start + self.chunk_size] += target.g(log_probs)
        self.count += 1

    def mean(self, name: str) -> torch.Tensor:
        if self.count == 0:
            raise RuntimeError("PosteriorAccumulator has no samples yet (still in burn-in?)")
        return self.sums[name] / self.count

    def state_dict(self) -> dict:
        return {"sums": self.sums, "count": self.count}

    def load_state_dict(self, state: dict) -> None:
        for name, value in state["sums"].items():
            self.sums[name].copy_(value)
        self.count = int(state["count"])
