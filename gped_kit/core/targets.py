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

A target also owns how its students are judged and what they say about uncertainty: its test
metrics (:attr:`Target.metrics`, :meth:`Target.evaluate`; :meth:`Target.reports` says which it
gives), its uncertainty decomposition (:meth:`Target.uncertainties`; the ``predictive+entropy``
targets and EnD2) and its estimate of the marginal variance. The engine and the experiments only
call these, so a new target is one definition: its metrics then appear in every run's summary.

The EnD2 baseline is a target too (:mod:`gped_kit.baselines.endd`); any callable
``g(statistics) -> (B, D)`` can be wrapped with :func:`custom_target`.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Callable, NamedTuple, Protocol

import torch
from torch.nn import functional as F

from . import losses, uncertainty
from .likelihoods import regression_moments
from .metrics import accuracy, constant_mae, constant_nll, ece, gaussian_nll, lowest_skill, mae, nll, rmse, zero_mae
from .metrics import skill as skill_score

TensorFn = Callable[[torch.Tensor], torch.Tensor]
#: A decomposition of a student's linked outputs (N, D) for C classes into total, data and knowledge
#: uncertainty (:mod:`gped_kit.core.uncertainty`).
Decomposition = Callable[[torch.Tensor, int], uncertainty.Uncertainties]


# ------------------------------------------------------------------------------ metrics of a student
class MetricInputs(NamedTuple):
    """What a target's test metrics are computed from (all on one device): ``output``, the student's
    linked outputs (N, D); ``labels``, the test labels (N,) or regression targets; ``num_outputs``, C
    classes or D regression dimensions; ``reference``, the teacher ensemble's estimate of E[g] for the
    same target (N, D), None when the chain has none yet; ``teacher_nll``, the teacher ensemble's
    predictive NLL on the test set, None when not available."""

    output: torch.Tensor
    labels: torch.Tensor
    num_outputs: int
    reference: torch.Tensor | None = None
    teacher_nll: float | None = None


class TargetMetrics(Protocol):
    """A target's test metrics: ``names``, every metric it reports when the reference and the teacher's
    NLL are given (in column order); called on :class:`MetricInputs`, it returns those it can compute
    (a subset of ``names``, in that order)."""

    @property
    def names(self) -> tuple[str, ...]: ...

    def __call__(self, inputs: MetricInputs) -> dict[str, float]: ...


@dataclass(frozen=True)
class ClassificationMetrics:
    """Metrics of a categorical target's student (Section 4.2).

    ``predictive``: the first C linked outputs are a predictive distribution; reports
    ``student_nll``, ``student_accuracy``, ``student_ece`` (the expected calibration error,
    :func:`~gped_kit.core.metrics.ece`) and ``nll_gap`` = student NLL - teacher ensemble NLL.
    ``target_mae``: the linked outputs estimate E[g]; reports ``target_mae``, the mean absolute
    error against the ensemble's estimate. ``entropy_mae`` (with ``target_mae``): the last column is
    the expected entropy E[H]; reports its MAE (the paper's "MAE (Entropy)").

    ``skill``: each error beside the best constant prediction's, chosen with hindsight on the test set, and
    the student's skill ``1 - error / constant`` (1 perfect, 0 no better than a constant, :data:`SKILL_FLOOR`):
    ``constant_mae`` (per output the median of the reference, :func:`~gped_kit.core.metrics.constant_mae`)
    and ``skill`` for ``target_mae``; ``entropy_mae_constant``, ``entropy_mae_zero`` (predicting no
    uncertainty, the natural null of an entropy) and ``entropy_mae_skill`` for the entropy column;
    ``student_nll_constant`` (the NLL of the test labels' own frequencies,
    :func:`~gped_kit.core.metrics.constant_nll`) and ``student_nll_skill`` for the predictive.
    """

    predictive: bool = False
    target_mae: bool = True
    entropy_mae: bool = False
    skill: bool = False

    @property
    def names(self) -> tuple[str, ...]:
        p, g, e, k = self.predictive, self.target_mae, self.target_mae and self.entropy_mae, self.skill
        wanted = (("student_nll", p), ("student_accuracy", p), ("student_ece", p), ("target_mae", g),
                  ("entropy_mae", e), ("constant_mae", g and k), ("skill", g and k),
                  ("entropy_mae_constant", e and k), ("entropy_mae_zero", e and k), ("entropy_mae_skill", e and k),
                  ("student_nll_constant", p and k), ("student_nll_skill", p and k), ("nll_gap", p))
        return tuple(name for name, on in wanted if on)

    def __call__(self, inputs: MetricInputs) -> dict[str, float]:
        output, labels, c, reference, teacher_nll = inputs
        out: dict[str, float] = {}
        if self.predictive:
            probs = output[:, :c]
            out["student_nll"] = nll(probs, labels)
            out["student_accuracy"] = accuracy(probs, labels)
            out["student_ece"] = ece(probs, labels)
        if self.target_mae and reference is not None:
            out["target_mae"] = mae(output, reference)
            if self.entropy_mae:
                out["entropy_mae"] = mae(output[:, -1], reference[:, -1])
            if self.skill:
                out["constant_mae"] = constant_mae(reference)
                out["skill"] = skill_score(out["target_mae"], out["constant_mae"])
                if self.entropy_mae:
                    out["entropy_mae_constant"] = constant_mae(reference[:, -1:])
                    out["entropy_mae_zero"] = zero_mae(reference[:, -1:])
                    out["entropy_mae_skill"] = skill_score(out["entropy_mae"], out["entropy_mae_constant"])
        if self.predictive and self.skill:
            out["student_nll_constant"] = constant_nll(labels, c)
            out["student_nll_skill"] = skill_score(out["student_nll"], out["student_nll_constant"])
        if self.predictive and teacher_nll is not None:
            out["nll_gap"] = out["student_nll"] - teacher_nll
        return out


@dataclass(frozen=True)
class RegressionMetrics:
    """Metrics of a Gaussian-likelihood target's student.

    With ``moments`` False the linked outputs are the predictive mean: ``student_rmse`` and
    ``mean_mae`` against the ensemble's E[mu]. With ``moments`` True they are (E[mu], E[mu^2],
    E[sigma^2]) (:func:`regression_moments`): also the Gaussian ``student_nll`` of the predictive
    (variance aleatoric + epistemic), ``epistemic_mae``, ``aleatoric_mae`` and ``nll_gap``. ``skill``: also
    ``constant_mae`` and ``skill`` for ``mean_mae``, as :class:`ClassificationMetrics`, and with ``moments``
    ``epistemic_mae_constant``, ``epistemic_mae_zero``, ``epistemic_mae_skill``, ``aleatoric_mae_constant``
    and ``aleatoric_mae_skill``.
    """

    moments: bool = False
    skill: bool = False

    @property
    def names(self) -> tuple[str, ...]:
        k = ("constant_mae", "skill") if self.skill else ()
        if not self.moments:
            return ("student_rmse", "mean_mae") + k
        if self.skill:
            k += ("epistemic_mae_constant", "epistemic_mae_zero", "epistemic_mae_skill", "aleatoric_mae_constant",
                  "aleatoric_mae_skill")
        return ("student_rmse", "student_nll", "mean_mae", "epistemic_mae", "aleatoric_mae") + k + ("nll_gap",)

    def __call__(self, inputs: MetricInputs) -> dict[str, float]:
        output, labels, _, reference, teacher_nll = inputs
        student = regression_moments(output) if self.moments else None
        mean = student.mean if student is not None else output
        y = labels.reshape(mean.shape)
        out = {"student_rmse": rmse(mean, y)}
        if student is not None:
            out["student_nll"] = gaussian_nll(mean, student.total, y)
        if reference is not None:
            teacher = regression_moments(reference) if student is not None else None
            out["mean_mae"] = mae(mean, reference if teacher is None else teacher.mean)
            if student is not None:
                out["epistemic_mae"] = mae(student.epistemic, teacher.epistemic)
                out["aleatoric_mae"] = mae(student.aleatoric, teacher.aleatoric)
            if self.skill:
                out["constant_mae"] = constant_mae(reference if teacher is None else teacher.mean)
                out["skill"] = skill_score(out["mean_mae"], out["constant_mae"])
                if teacher is not None:
                    out["epistemic_mae_constant"] = constant_mae(teacher.epistemic)
                    out["epistemic_mae_zero"] = zero_mae(teacher.epistemic)
                    out["epistemic_mae_skill"] = skill_score(out["epistemic_mae"], out["epistemic_mae_constant"])
                    out["aleatoric_mae_constant"] = constant_mae(teacher.aleatoric)
                    out["aleatoric_mae_skill"] = skill_score(out["aleatoric_mae"], out["aleatoric_mae_constant"])
        if student is not None and teacher_nll is not None:
            out["nll_gap"] = out["student_nll"] - teacher_nll
        return out


@dataclass(frozen=True)
class CustomMetrics:
    """User-defined metrics: ``fn(inputs) -> {name: value}`` reporting some of ``names``."""

    names: tuple[str, ...]
    fn: Callable[[MetricInputs], dict[str, float]]

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", tuple(self.names))
        if not self.names or not all(isinstance(n, str) and n for n in self.names):
            raise ValueError(f"CustomMetrics names={self.names!r}: give the metric names as non-empty strings")
        if not callable(self.fn):
            raise TypeError(f"CustomMetrics fn={self.fn!r} must be callable: MetricInputs -> dict[str, float]")

    def __call__(self, inputs: MetricInputs) -> dict[str, float]:
        return self.fn(inputs)


#: A student whose ``skill`` over the best constant is below this has learned next to nothing per input:
#: the run warns (:func:`check_skill`).
SKILL_FLOOR = 0.05


class SkillWarning(UserWarning):
    """A student that is no better than the best constant prediction (:func:`check_skill`)."""


def check_skill(label: str, metrics: dict[str, float]) -> str | None:
    """A warning's text when a student's lowest skill (:func:`~gped_kit.core.metrics.lowest_skill`: over
    ``skill`` and every ``<metric>_skill`` it reports) is below :data:`SKILL_FLOOR`, else None."""
    lowest = lowest_skill(metrics)
    if lowest is None or lowest[1] >= SKILL_FLOOR:
        return None
    column, value = lowest
    if column == "skill":  # the skill of target_mae (mean_mae for a regression mean)
        metric, constant = ("target_mae" if "target_mae" in metrics else "mean_mae"), "constant_mae"
    else:
        metric = column[: -len("_skill")]
        constant = f"{metric}_constant"
    error, constant_error = metrics.get(metric, float("nan")), metrics.get(constant, float("nan"))
    return (f"student {label!r} is no better than a constant: its {metric} {error:.4g} against the best "
            f"constant's {constant_error:.4g} (skill {value:.3f} < {SKILL_FLOOR}); it has learned next to nothing per "
            "input: too few student updates, too low a learning rate, an exp head whose first updates overshot "
            "to outputs near 0 where its gradients vanish (StudentConfig.lr_warmup), or a loss that fits the "
            "targets' median (the absolute error) rather than their mean (the squared error, custom_target's "
            "default)")


#: Per likelihood, the metrics of a target that names none, from its flags (see :class:`Target`).
DEFAULT_METRICS: dict[str, Callable[[Target], TargetMetrics]] = {
    "categorical": lambda t: ClassificationMetrics(predictive=t.predictive_classes, target_mae=t.estimates_g,
                                                   entropy_mae=t.entropy_last, skill=True),
    "gaussian": lambda t: RegressionMetrics(skill=True),
}
#: Per likelihood, the metrics :func:`custom_target` gives a user's target by default: the likelihood's,
#: with the skill over the best constant.
SKILL_METRICS: dict[str, TargetMetrics] = {"categorical": ClassificationMetrics(skill=True),
                                          "gaussian": RegressionMetrics(skill=True)}


# ------------------------------------------------------------------------------ targets
@dataclass(frozen=True)
class Target:
    """A posterior expectation E_theta[g] and how a student represents, learns and is judged on it.

    ``g`` maps the teacher's output statistics ``(B, S)`` to per-example values ``(B, D)``;
    ``out_dim(C) = D`` for C likelihood outputs (classes, or regression dimensions);
    ``link`` maps the student's raw outputs to its prediction of E[g] (or, for EnD2, to the
    Dirichlet's mean and precision); ``loss(target, raw)`` returns per-example losses ``(B,)``;
    ``likelihood`` names the teacher likelihood whose statistics ``g`` reads.

    What the target reports: ``metrics`` (:class:`TargetMetrics`: :class:`ClassificationMetrics`,
    :class:`RegressionMetrics` or :class:`CustomMetrics`); left None it is built from
    ``predictive_classes`` (the first C linked outputs are a predictive distribution: NLL,
    accuracy, NLL gap), ``estimates_g`` (False when the linked output is not an estimate of E[g],
    as for EnD2: no ``target_mae``) and ``entropy_last`` (the last column is the expected entropy
    E[H]: ``entropy_mae``) for a categorical target, as :class:`RegressionMetrics` for a Gaussian one.
    ``decomposition`` turns linked outputs into total / data / knowledge uncertainty (None: the
    target has none); ``marginal_variance`` turns them into the student's estimate of the
    per-class marginal variance E[p(y=c|x,theta)(1 - p(y=c|x,theta))] (None: it has none).
    ``at_temperature(output, C, T)`` re-reads a linked output at an evaluation temperature T, and
    ``training_temperature`` is the T the target's loss was trained at (EnD2's prior network,
    :func:`~gped_kit.baselines.endd.endd_target`; None: the target has no temperature).
    ``dtype`` is the precision of the values g and of their running sums (the teacher ensemble's and U_o's
    store): float32, but float64 for the regression targets, whose values lie on the labels' scale and whose
    variance is a difference of second moments (:data:`PREDICTIVE_VARIANCE`).

    A new target is one definition: its metrics then appear in every run's summary and history
    (:meth:`evaluate`), and experiment code asks :meth:`reports` which targets give a metric.
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
    metrics: TargetMetrics | None = None
    decomposition: Decomposition | None = None
    marginal_variance: Callable[[torch.Tensor, int], torch.Tensor] | None = None
    at_temperature: Callable[[torch.Tensor, int, float], torch.Tensor] | None = None
    training_temperature: float | None = None
    dtype: torch.dtype = torch.float32

    def __post_init__(self) -> None:
        if self.dtype not in (torch.float32, torch.float64):
            raise ValueError(f"target {self.name!r}: dtype={self.dtype!r} is not allowed; allowed: torch.float32, "
                             "torch.float64 (the precision of g's values and of their running sums)")
        if (self.at_temperature is None) != (self.training_temperature is None):
            raise ValueError(f"target {self.name!r}: give at_temperature and training_temperature together "
                             "(a target read at temperatures is trained at one), or neither")
        if self.metrics is None:
            if self.likelihood not in DEFAULT_METRICS:
                raise ValueError(f"target {self.name!r}: likelihood={self.likelihood!r} is not known; allowed: "
                                 f"{sorted(DEFAULT_METRICS)} (or give the target's metrics)")
            object.__setattr__(self, "metrics", DEFAULT_METRICS[self.likelihood](self))

    @property
    def metric_names(self) -> tuple[str, ...]:
        """Every test metric a student of this target reports (given the teacher ensemble), in column order."""
        return tuple(self.metrics.names)

    def reports(self, metric: str) -> bool:
        """Whether a student of this target reports ``metric`` (e.g. ``"student_nll"``, ``"entropy_mae"``)."""
        return metric in self.metric_names

    def evaluate(self, output: torch.Tensor, labels: torch.Tensor, num_outputs: int,
                 reference: torch.Tensor | None = None, teacher_nll: float | None = None) -> dict[str, float]:
        """The test metrics of a student's linked ``output`` (N, D) against the test ``labels``, the
        teacher ensemble's estimate of E[g] (``reference``, (N, D)) and its predictive NLL
        (``teacher_nll``); metrics needing an absent input are left out."""
        return self.metrics(MetricInputs(output, labels, num_outputs, reference, teacher_nll))

    @property
    def has_temperature(self) -> bool:
        """Whether a student of this target can be read at other temperatures (``at_temperature``)."""
        return self.at_temperature is not None

    @property
    def has_uncertainties(self) -> bool:
        """Whether a student of this target decomposes its uncertainty (:meth:`uncertainties`)."""
        return self.decomposition is not None

    def uncertainties(self, output: torch.Tensor, num_classes: int) -> uncertainty.Uncertainties:
        """Total, data and knowledge uncertainty of a student's linked ``output`` (N, D) for C =
        ``num_classes`` classes; ``ValueError`` when the target carries no decomposition."""
        if self.decomposition is None:
            raise ValueError(f"target {self.name!r} carries no uncertainty decomposition; targets with one: "
                             f"{sorted(n for n, t in TARGETS.items() if t.has_uncertainties)} and EnD2 "
                             "(gped_kit.baselines.endd)")
        return self.decomposition(output, num_classes)


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
    """The ``predictive_variance`` head: raw (m, log e, log a) -> (m, m^2 + e, a) per dimension, in float64:
    :func:`regression_moments` takes e back as (m^2 + e) - m^2, which float32 would round away wherever e is
    below m^2's spacing (e = 1e-3 at m = 300), and float64 keeps (a float32 m's square is exact in it)."""
    m, log_e, log_a = raw.double().chunk(3, dim=-1)
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
    """g = mu(x, theta) from the Gaussian statistics ``[mu, sigma^2]``, in float64 (:data:`PREDICTIVE_MEAN`)."""
    return stats.chunk(2, dim=-1)[0].double()


def predictive_moments_g(stats: torch.Tensor) -> torch.Tensor:
    """g = (mu, mu^2, sigma^2) from the Gaussian statistics ``[mu, sigma^2]``, in float64: Var[mu] is read
    back as E[mu^2] - E[mu]^2 (:func:`regression_moments`), whose digits a float32 mu^2 and float32 sums
    would lose wherever |E[mu]| is large beside sd(mu) (E[mu] = 100, Var[mu] = 0.01: 60% off)."""
    mean, var = stats.double().chunk(2, dim=-1)
    return torch.cat([mean, mean * mean, var], dim=-1)


def mean_squared_error(target: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
    """The ``predictive_mean`` loss: the squared error of the raw output (the mean) from the target, in the
    output's precision."""
    return losses.squared_error(target.to(raw.dtype), raw)


def centered_moments_loss(target: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
    """The ``predictive_variance`` loss per example: with targets (g_1, g_2, g_3) estimating
    (E[mu], E[mu^2], E[sigma^2]) and student outputs (m, log e, log a),
    ``(m - g_1)^2 + (e - (g_2 - 2 m' g_1 + m'^2))^2 + (a - g_3)^2`` summed over dimensions, where
    m' is m without gradient. Its minimiser is m = E[mu], e = Var[mu], a = E[sigma^2]."""
    m, log_e, log_a = raw.chunk(3, dim=-1)
    g1, g2, g3 = target.chunk(3, dim=-1)
    center = m.detach().to(target.dtype)  # centred in the targets' precision (float64), then the output's
    centered = (g2 - 2 * center * g1 + center * center).to(raw.dtype)
    return losses.squared_error(g1.to(raw.dtype), m) + losses.squared_error(centered, log_e.exp()) + (
        losses.squared_error(g3.to(raw.dtype), log_a.exp()))


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
                  predictive_classes=True, entropy_last=True,
                  decomposition=uncertainty.from_predictive_entropy_output)


PREDICTIVE = Target("predictive", predictive_g, out_dim=lambda c: c, link=softmax_head, loss=losses.cross_entropy,
                    predictive_classes=True)
ENTROPY = entropy_target("absolute")
MARGINAL_VARIANCE = Target("marginal_variance", marginal_variance_g, out_dim=lambda c: c, link=quarter_sigmoid_head,
                           loss=lambda target, raw: losses.absolute_error(target, quarter_sigmoid_head(raw)),
                           marginal_variance=lambda output, num_classes: output)
PREDICTIVE_ENTROPY = predictive_entropy_target("absolute")
PREDICTIVE_MEAN = Target("predictive_mean", predictive_mean_g, out_dim=lambda d: d, link=identity_head,
                         loss=mean_squared_error, likelihood="gaussian", dtype=torch.float64)
PREDICTIVE_VARIANCE = Target("predictive_variance", predictive_moments_g, out_dim=lambda d: 3 * d, link=moments_head,
                             loss=centered_moments_loss, likelihood="gaussian",
                             metrics=RegressionMetrics(moments=True, skill=True), dtype=torch.float64)

TARGETS: dict[str, Target] = {t.name: t for t in (PREDICTIVE, ENTROPY, MARGINAL_VARIANCE, PREDICTIVE_ENTROPY,
                                                  PREDICTIVE_MEAN, PREDICTIVE_VARIANCE, entropy_target("squared"),
                                                  predictive_entropy_target("squared"))}


def custom_target(name: str, g: TensorFn, out_dim: int | Callable[[int], int], link: TensorFn | str | None = None,
                  loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
                  likelihood: str = "categorical", metrics: TargetMetrics | None = None,
                  decomposition: Decomposition | None = None, dtype: torch.dtype = torch.float32) -> Target:
    """Wrap a user-defined ``g(statistics) -> (B, D)``. ``out_dim`` is the width D: an integer >= 1, or a
    callable ``C -> D`` of the number C of classes (or regression outputs). ``link`` is a callable on the
    student's raw outputs or the name of one of the built-in heads (:data:`HEADS`: ``"softmax"``, ``"exp"``,
    ...), resolved to that head; ``loss`` a callable ``(target, raw) -> (B,)``. Anything else raises
    ``TypeError`` (or ``ValueError`` for an integer ``out_dim`` below 1 or an unknown head name) naming the
    parameter, before any run. Defaults: identity link, the squared error, the
    likelihood's default metrics with the student's skill over the best constant (``target_mae``,
    ``constant_mae`` and ``skill`` for a categorical likelihood; ``student_rmse``, ``mean_mae``,
    ``constant_mae`` and ``skill`` for a Gaussian one: the linked output is then the predictive mean), no
    uncertainty decomposition. ``metrics`` replaces them (e.g. :class:`CustomMetrics`). ``dtype``
    torch.float64 keeps g's values and their running sums in double precision: for values far from 0 beside
    their spread, or differences of moments (as :data:`PREDICTIVE_VARIANCE`), or sums over very many samples
    (float32 sums of 10^6 probabilities near 1 lose about 1e-3 of their value; at the default
    ``eval_thinning`` of 100 a chain of 10^6 steps keeps 10^4, where the loss is about 1e-6).

    **Why the squared error.** A student trained on the squared error estimates the conditional *mean*
    of its targets, the posterior expectation E[g] itself; on the absolute error it estimates their
    *median*, which for a sparse expectation (class-probability-like values, most near 0) is a constant
    near 0: such a student learns nothing (its ``skill`` is about 0, and the run warns). The paper's
    absolute error stays the loss of the built-in expected-entropy target, where it works; pass
    ``loss=`` to choose another."""
    if not callable(g):
        raise TypeError(f"custom_target g={g!r} must be callable: statistics (B, S) -> (B, D)")
    if name in TARGETS:
        raise ValueError(f"custom_target name={name!r} is a built-in target's name; choose another")
    dim = out_dim if callable(out_dim) else (lambda c, d=_check_width(out_dim): d)
    link = _resolve_link(link)
    if loss is None:
        loss = lambda target, raw, _link=link: losses.squared_error(target, _link(raw))
    elif not callable(loss):
        raise TypeError(f"custom_target loss={loss!r} is not allowed; allowed: a callable (target, raw) -> (B,) "
                        "per-example losses, or None for the squared error of the linked output")
    if metrics is None and likelihood in SKILL_METRICS:
        metrics = SKILL_METRICS[likelihood]
    return Target(name, g, dim, link, loss, likelihood=likelihood, metrics=metrics, decomposition=decomposition,
                  dtype=dtype)


def _check_width(out_dim: object) -> int:
    """``out_dim`` as an int when it is an integer (not a bool) >= 1; ``TypeError`` / ``ValueError`` naming it
    otherwise."""
    message = (f"custom_target out_dim={out_dim!r} is not allowed; allowed: an integer >= 1 (the width D of g's "
               "values) or a callable C -> D of the number of classes or regression outputs")
    if isinstance(out_dim, bool) or not isinstance(out_dim, numbers.Integral):
        raise TypeError(message)
    if out_dim < 1:
        raise ValueError(message)
    return int(out_dim)


def _resolve_link(link: TensorFn | str | None) -> TensorFn:
    """:func:`custom_target`'s ``link``: a callable as given, a name of :data:`HEADS` as that head, None as the
    identity; ``ValueError`` / ``TypeError`` naming it otherwise."""
    if link is None:
        return identity_head
    message = (f"custom_target link={link!r} is not allowed; allowed: a callable raw -> prediction or a built-in "
               f"head's name {sorted(HEADS)}")
    if isinstance(link, str):
        if link not in HEADS:
            raise ValueError(message)
        return HEADS[link]
    if not callable(link):
        raise TypeError(message)
    return link


def resolve_target(target: str | Target) -> Target:
    """Look up a built-in target by name, or pass a :class:`Target` through."""
    if isinstance(target, Target):
        return target
    if target not in TARGETS:
        raise ValueError(f"target={target!r} is not known; allowed: {sorted(TARGETS)} or a Target object "
                         "(e.g. gped_kit.baselines.endd.endd_target() or custom_target(...))")
    return TARGETS[target]
