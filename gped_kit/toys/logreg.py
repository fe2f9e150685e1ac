"""The 2-D Bayesian logistic regression of Papamakarios' thesis (paper 001, Section 3.3.4).

p(y=1|x,w) = sigma(w^T x) without bias (Eq. 3.41), prior N(0, 100 I) (Eq. 3.42), 24 points (12 per
class) drawn from a seed (the thesis' points are not published). **Slice sampling** (Neal 2003;
univariate updates with linear stepping out, started at 0, as the thesis) gives the chain. The
compact model is Eq. 3.44, an average of S' = 10 logistic regressors, trained by SGD (learning rate
decayed linearly to 0) with **cross-entropy** (Eq. 3.22) or the **derivative square error** (Eqs.
3.24-3.26, computed with :func:`gped_kit.core.losses.input_gradients` and
:func:`gped_kit.core.losses.derivative_square_error`), **batch** (teacher = p_MC of the stored bag
of S samples, Eq. 3.43) or **online** (teacher = the current sample's sigma(w_m^T x_m), Eq. 3.38: B
fresh chain samples per step, nothing stored). The **input generator** p(x) of the distillation
inputs is a parameter: ``"resample"`` (the 24 data points, resampled), ``"perturb"`` (resampled
points plus Gaussian noise) or ``"noise"`` (pure Gaussian noise N(0, noise_std^2 I); with
noise_std = 10 this is the thesis' own Eq. 3.45). Distances from p_MC: mean |f - p_MC| and mean
Bernoulli KL(p_MC || f), on a grid over the data region and on fresh test points from the data
distribution, each with its skill over the best constant prediction (:func:`constant_distances`): a student
counts only where it beats it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
import torch
from torch.nn import functional as F

from ..core import losses, metrics
from ..core.options import check_int, check_positive
from .common import MODES, Mode, ToyResult, array_bytes, config_dict, linear_decay

Loss = Literal["cross_entropy", "derivative_square_error"]
Generator = Literal["resample", "perturb", "noise"]
#: Student losses (Section 3.3): cross-entropy (Eq. 3.22), derivative square error (Eq. 3.24).
LOSSES: tuple[Loss, ...] = ("cross_entropy", "derivative_square_error")
#: Input generators p(x) of the distillation inputs (Section 2.3; Eq. 3.45 for ``noise``).
INPUT_GENERATORS: tuple[Generator, ...] = ("resample", "perturb", "noise")

LOGREG_PRIOR_VARIANCE = 100.0  # Eq. 3.42


@dataclass(frozen=True)
class LogRegConfig:
    """One 2-D Bayesian logistic regression run (Section 3.3.4).

    Data: ``num_per_class`` points per class from N(+-class_mean, class_std^2 I) (y = 1 around
    +class_mean). Chain: slice sampling, ``burn_in`` sweeps from 0, then ``num_samples`` S stored
    for the batch teacher p_MC (Eq. 3.43); the online students keep drawing ``batch_size`` fresh
    samples per iteration (``num_iterations * batch_size`` in all; the first S are the bag).
    Students: Eq. 3.44 with ``num_components`` S' regressors, SGD for ``num_iterations`` on
    minibatches of ``batch_size`` inputs, learning rate ``lr`` decayed linearly to 0, initial
    weights N(0, init_std^2) (the same for every student). One student per (mode, loss,
    generator) in ``modes`` x ``losses`` x ``generators``. ``perturb_std`` / ``noise_std`` set the
    "perturb" / "noise" generators. Evaluation: a ``grid_size``^2 grid on [-grid_limit, grid_limit]^2
    and ``num_test`` fresh points from the data distribution; each student's derivative square error against
    p_MC (:func:`dse_objective`) on ``num_objective_inputs`` fresh inputs of its own generator.
    """

    num_per_class: int = 12
    class_mean: tuple[float, float] = (2.0, 2.0)
    class_std: float = 0.7
    prior_variance: float = LOGREG_PRIOR_VARIANCE
    num_samples: int = 10_000
    burn_in: int = 1_000
    slice_width: float = 5.0
    num_components: int = 10
    num_iterations: int = 5_000
    batch_size: int = 10
    lr: float = 1.0
    init_std: float = 1.0
    modes: tuple[Mode, ...] = MODES
    losses: tuple[Loss, ...] = LOSSES
    generators: tuple[Generator, ...] = INPUT_GENERATORS
    perturb_std: float = 1.0
    noise_std: float = 10.0
    grid_limit: float = 6.0
    grid_size: int = 61
    num_test: int = 1_000
    num_objective_inputs: int = 4_000
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("class_mean", "modes", "losses", "generators"):   # lists given: stored as tuples
            if isinstance(getattr(self, name), list):
                object.__setattr__(self, name, tuple(getattr(self, name)))
        if len(self.class_mean) != 2 or not all(math.isfinite(v) for v in self.class_mean):
            raise ValueError(f"LogRegConfig.class_mean={self.class_mean!r}: must be two finite numbers")
        for name in ("class_std", "prior_variance", "slice_width", "lr", "init_std", "perturb_std", "noise_std",
                     "grid_limit"):
            check_positive(f"LogRegConfig.{name}", getattr(self, name))
        for name, minimum in (("num_per_class", 1), ("num_samples", 1), ("burn_in", 0), ("num_components", 1),
                              ("num_iterations", 1), ("batch_size", 1), ("grid_size", 2), ("num_test", 1),
                              ("num_objective_inputs", 1), ("seed", 0)):
            check_int(f"LogRegConfig.{name}", getattr(self, name), minimum)
        for name, allowed in (("modes", MODES), ("losses", LOSSES), ("generators", INPUT_GENERATORS)):
            values = getattr(self, name)
            if (not isinstance(values, tuple) or not values or any(v not in allowed for v in values)
                    or len(set(values)) != len(values)):
                raise ValueError(f"LogRegConfig.{name}={values!r}: must be a non-empty tuple of distinct values "
                                 f"from {allowed}")
        if "online" in self.modes and self.num_iterations * self.batch_size < self.num_samples:
            raise ValueError(f"LogRegConfig.num_iterations={self.num_iterations!r}: the online students draw "
                             f"num_iterations * batch_size = {self.num_iterations * self.batch_size} chain samples, "
                             f"fewer than num_samples={self.num_samples} (the bag); allowed: num_iterations >= "
                             f"{-(-self.num_samples // self.batch_size)}")


def logreg_dataset(num_per_class: int = 12, class_mean: Sequence[float] = (2.0, 2.0), class_std: float = 0.7,
                   seed: int = 0, stream: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``num_per_class`` 2-D points per class, y = 1 from N(+class_mean, class_std^2 I) and y = 0
    from N(-class_mean, class_std^2 I); returns ``(x (2n, 2), y (2n,))`` with the y = 1 points
    first. ``stream`` selects an independent draw (0: the data set D; 1: the test points)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 33, stream]))
    mean = np.asarray(class_mean, float)
    x1 = mean + class_std * rng.standard_normal((num_per_class, 2))
    x0 = -mean + class_std * rng.standard_normal((num_per_class, 2))
    return np.concatenate([x1, x0]), np.concatenate([np.ones(num_per_class), np.zeros(num_per_class)])


def logreg_log_posterior(x: np.ndarray, y: np.ndarray, prior_variance: float = LOGREG_PRIOR_VARIANCE
                         ) -> Callable[[np.ndarray], float]:
    """Unnormalised log p(w | D) = sum_n log sigma(s_n w^T x_n) - |w|^2 / (2 * 100) with
    s_n = 2 y_n - 1 (Eqs. 3.16, 3.41, 3.42)."""
    signed = (2 * np.asarray(y, float) - 1)[:, None] * np.asarray(x, float)

    def log_density(w: np.ndarray) -> float:
        return float(-np.logaddexp(0.0, -(signed @ w)).sum() - (w @ w) / (2 * prior_variance))

    return log_density


def slice_sampler(log_density: Callable[[np.ndarray], float], x0: Sequence[float], rng: np.random.Generator,
                  width: float = 1.0, max_steps_out: int = 100) -> Iterator[np.ndarray]:
    """Slice sampling (Neal 2003) with univariate updates of each coordinate in turn, linear
    stepping out of an interval of ``width`` (at most ``max_steps_out`` steps) and shrinkage, as
    the thesis used (Sections 3.2.3 and 3.3.4). An infinite generator: one sample (a new array)
    per sweep over the coordinates."""
    x = np.array(x0, float)
    current = log_density(x)
    while True:
        for d in range(len(x)):
            x_d = x[d]
            level = current - rng.standard_exponential()

            def at(v: float) -> float:
                x[d] = v
                return log_density(x)

            left = x_d - width * rng.random()
            right = left + width
            j = int(max_steps_out * rng.random())
            k = max_steps_out - 1 - j
            while j > 0 and at(left) > level:
                left -= width
                j -= 1
            while k > 0 and at(right) > level:
                right += width
                k -= 1
            while True:
                proposal = left + (right - left) * rng.random()
                value = at(proposal)
                if value > level:
                    current = value
                    break
                if proposal < x_d:
                    left = proposal
                else:
                    right = proposal
        yield x.copy()


def logreg_posterior_quadrature(x: np.ndarray, y: np.ndarray, prior_variance: float = LOGREG_PRIOR_VARIANCE,
                                limit: float = 40.0, size: int = 401) -> tuple[np.ndarray, np.ndarray]:
    """The 2-D posterior on a ``size`` x ``size`` grid over [-limit, limit]^2 (a reference for tests):
    returns the grid points ``(P, 2)`` and their normalised weights ``(P,)``; expectations under
    p(w | D) are weighted sums."""
    axis = np.linspace(-limit, limit, size)
    w = np.stack(np.meshgrid(axis, axis, indexing="ij"), -1).reshape(-1, 2)
    signed = (2 * np.asarray(y, float) - 1)[:, None] * np.asarray(x, float)
    log_p = -np.logaddexp(0.0, -(w @ signed.T)).sum(1) - (w ** 2).sum(1) / (2 * prior_variance)
    weights = np.exp(log_p - log_p.max())
    return w, weights / weights.sum()


def sigmoid_mixture_log_outputs(weights: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """log [1 - f(x), f(x)] with f(x) = (1/S) sum_s sigma(w_s^T x) (Eqs. 3.43 / 3.44), shape (n, 2),
    computed stably with logsumexp. ``weights`` (S, 2), ``x`` (n, 2)."""
    z = x @ weights.T
    log_sig = F.logsigmoid(z)              # log sigma(-z) = log sigma(z) - z
    log_s = math.log(weights.shape[0])
    return torch.stack([torch.logsumexp(log_sig - z, 1) - log_s, torch.logsumexp(log_sig, 1) - log_s], 1)


def _students_log_outputs(weights: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Every student's Eq. 3.44 at its own inputs: ``weights`` (K, S', 2), ``x`` (K * B, 2) with
    student k's rows at k*B..(k+1)*B; returns (K * B, 2)."""
    k, s_prime, _ = weights.shape
    z = torch.einsum("kbd,ksd->kbs", x.reshape(k, -1, 2), weights)
    log_s = math.log(s_prime)
    out = torch.stack([torch.logsumexp(F.logsigmoid(-z), 2) - log_s, torch.logsumexp(F.logsigmoid(z), 2) - log_s], -1)
    return out.reshape(-1, 2)


def _pair_log_outputs(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """log [1 - t(x_m, w_m), t(x_m, w_m)] row by row (the online teacher, Eq. 3.36)."""
    z = (x * w).sum(1)
    return torch.stack([F.logsigmoid(-z), F.logsigmoid(z)], 1)


def _teacher_outputs(log_outputs_fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, want_grad: bool
                     ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The teacher's class probabilities (n, 2) and, if ``want_grad``, the input-Jacobian of its
    log probabilities (n, 2, 2) from the same forward pass (:func:`gped_kit.core.losses.input_gradients`,
    no graph kept: the teacher is a constant of the loss)."""
    if not want_grad:
        with torch.no_grad():
            return log_outputs_fn(x).exp(), None
    x = x.detach().requires_grad_(True)
    log_t = log_outputs_fn(x)
    jac = losses.input_gradients(log_t, x)
    return log_t.detach().exp(), jac.detach()


def _generate_inputs(kind: str, n: int, data_x: torch.Tensor, cfg: LogRegConfig, gen: torch.Generator
                     ) -> torch.Tensor:
    """A minibatch from the input generator p(x) of the distillation inputs."""
    if kind == "noise":
        return cfg.noise_std * torch.randn(n, 2, generator=gen, dtype=data_x.dtype)
    x = data_x[torch.randint(len(data_x), (n,), generator=gen)]
    if kind == "perturb":
        x = x + cfg.perturb_std * torch.randn(n, 2, generator=gen, dtype=data_x.dtype)
    return x


def dse_objective(weights: torch.Tensor, x: torch.Tensor, teacher_probs: torch.Tensor,
                  teacher_jacobian: torch.Tensor) -> float:
    """The derivative square error of Eq. 3.24 of a student (``weights`` (S', 2), Eq. 3.44) against a teacher
    at inputs ``x`` (n, 2): the mean over ``x`` of sum_c t_c(x) / 2 ||d/dx log f_c - d/dx log t_c||^2, with the
    teacher's class probabilities ``teacher_probs`` (n, 2) and input-Jacobian of its log probabilities
    ``teacher_jacobian`` (n, 2, 2) (:func:`_teacher_outputs`): the loss a batch DSE student minimises, read at the
    end of training. A DSE student whose objective ends above a cross-entropy student's did not minimise its
    own loss (the optimiser, not the loss, decides their comparison)."""
    x = x.detach().requires_grad_(True)
    jacobian = losses.input_gradients(sigmoid_mixture_log_outputs(weights, x), x)
    scale = teacher_probs.sqrt()[:, :, None]
    return float(0.5 * losses.derivative_square_error(scale * jacobian, scale * teacher_jacobian).mean())


def _bernoulli_kl(p: np.ndarray, q: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    p, q = np.clip(p, eps, 1 - eps), np.clip(q, eps, 1 - eps)
    return p * np.log(p / q) + (1 - p) * np.log((1 - p) / (1 - q))


def constant_distances(p_mc: np.ndarray) -> dict[str, float]:
    """The distances from ``p_mc`` (p(y = 1 | x) at N inputs) of the best constant prediction, chosen with
    hindsight on those inputs: ``kl``, the mean Bernoulli KL(p_MC || c), smallest at c = the mean of p_MC
    (d/dc sum_i KL(p_i || c) = sum_i (c - p_i) / (c (1 - c))); ``abs``, the mean |p_MC - c|, smallest at c =
    its median. A student whose distance is not below these has learnt nothing per input (its skill,
    :func:`gped_kit.core.metrics.skill`, is not above 0)."""
    p_mc = np.asarray(p_mc, float)
    return {"abs": float(np.abs(p_mc - np.median(p_mc)).mean()),
            "kl": float(_bernoulli_kl(p_mc, np.full_like(p_mc, p_mc.mean())).mean())}


class _StudentGroup:
    """The students of one mode, trained together (independent parameters, one summed loss)."""

    def __init__(self, specs: list[tuple[str, str, str]], init: torch.Tensor, cfg: LogRegConfig) -> None:
        self.specs = specs
        self.cfg = cfg
        self.weights = init[: len(specs)].clone().requires_grad_(True)
        self.is_dse = torch.tensor([loss == "derivative_square_error" for _, loss, _ in specs]).repeat_interleave(
            cfg.batch_size)
        self.teacher_needs_grad: dict[str, bool] = {}
        for _, loss, g in specs:   # the teacher runs once per generator and step
            self.teacher_needs_grad[g] = self.teacher_needs_grad.get(g, False) or loss == "derivative_square_error"
        self.seconds = 0.0
        self.sample_bytes = 0
        self.input_bytes = 0

    def step(self, inputs: dict[str, torch.Tensor], teacher: Callable[[str, torch.Tensor, bool], tuple],
             lr: float, samples: torch.Tensor) -> None:
        """One SGD step on every student: cross-entropy (Eq. 3.22) or derivative square error
        (Eq. 3.24, t E_1 + (1 - t) E_0), each averaged over its minibatch, summed over students
        (their parameters are separate, so each gets its own gradient). ``teacher(generator,
        inputs, with_gradients)`` gives the teacher's class probabilities (n, 2) and, if asked,
        its input-Jacobian of the log probabilities (n, 2, 2); ``samples`` are the weight samples
        the teacher holds (the bag or the current minibatch), counted in the memory."""
        x = torch.cat([inputs[g] for _, _, g in self.specs]).requires_grad_(True)
        log_f = _students_log_outputs(self.weights, x)
        need_grad = bool(self.is_dse.any())
        jac_s = losses.input_gradients(log_f, x, None, create_graph=True) if need_grad else None
        teacher_out = {g: teacher(g, inputs[g], self.teacher_needs_grad[g]) for g in self.teacher_needs_grad}
        t_probs, jac_t = [], []
        for (_, _, g) in self.specs:
            probs, jac = teacher_out[g]
            t_probs.append(probs)
            jac_t.append(jac if jac is not None else torch.zeros(len(probs), 2, 2, dtype=probs.dtype))
        t_probs = torch.cat(t_probs)
        per_row = losses.cross_entropy(t_probs, log_f)
        if need_grad:
            scale = t_probs.sqrt()[:, :, None]   # Eq. 3.24: E_1 weighted by t, E_0 by 1 - t
            dse = 0.5 * losses.derivative_square_error(scale * jac_s, scale * torch.cat(jac_t))
            per_row = torch.where(self.is_dse, dse, per_row)
        loss = per_row.reshape(len(self.specs), -1).mean(1).sum()
        (grad,) = torch.autograd.grad(loss, self.weights)
        with torch.no_grad():
            self.weights -= lr * grad
        self.sample_bytes = max(self.sample_bytes, array_bytes(samples))
        self.input_bytes = max(self.input_bytes, max(array_bytes(v) for v in inputs.values()))

    def memory_bytes(self, k: int) -> int:
        """What student k holds: the teacher's weight samples, one input minibatch, its parameters."""
        return self.sample_bytes + self.input_bytes + array_bytes(self.weights[k])


def run_logreg(config: LogRegConfig) -> ToyResult:
    """Batch vs online distillation of a slice-sampling chain into Eq. 3.44 students, with
    cross-entropy or derivative square error and each input generator (Section 3.3.4).

    The chain runs once. While it runs, the online students take B fresh samples per SGD step
    (Eq. 3.39) and keep only them; the first S post-burn-in samples are also stored, forming the
    bag of the batch students (trained after the chain, teacher p_MC of Eq. 3.43) and the
    reference p_MC of every distance.

    Runs with one PyTorch intra-op thread (restored afterwards): every tensor here is tiny, and
    PyTorch's CPU ``logsigmoid`` opens a parallel region even for 10 elements, which costs
    milliseconds per call when the cores are shared (measured: 8 ms against 4 us). The numbers
    do not depend on the thread count (element-wise operations and reductions far below
    PyTorch's parallel grain size).
    """
    with _one_torch_thread():
        return _run_logreg(config)


@contextmanager
def _one_torch_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _run_logreg(config: LogRegConfig) -> ToyResult:
    cfg = config
    dtype = torch.float64
    data_np, labels = logreg_dataset(cfg.num_per_class, cfg.class_mean, cfg.class_std, cfg.seed, stream=0)
    test_np, _ = logreg_dataset(max(1, cfg.num_test // 2), cfg.class_mean, cfg.class_std, cfg.seed, stream=1)
    test_np = test_np[: cfg.num_test]
    data_x = torch.tensor(data_np, dtype=dtype)
    chain_ss, init_ss = np.random.SeedSequence([cfg.seed, 44]).spawn(2)
    chain = slice_sampler(logreg_log_posterior(data_np, labels, cfg.prior_variance), np.zeros(2),
                          np.random.default_rng(chain_ss), width=cfg.slice_width)
    started = time.perf_counter()
    for _ in range(cfg.burn_in):
        next(chain)
    chain_seconds = time.perf_counter() - started
    init_gen = torch.Generator().manual_seed(int(np.random.default_rng(init_ss).integers(2 ** 62)))
    specs_all = [(m, loss, g) for m in cfg.modes for loss in cfg.losses for g in cfg.generators]
    init = cfg.init_std * torch.randn(len(cfg.losses) * len(cfg.generators), cfg.num_components, 2,
                                      generator=init_gen, dtype=dtype)
    groups = {m: _StudentGroup([s for s in specs_all if s[0] == m], init, cfg) for m in cfg.modes}
    input_seeds = {m: 1_000 * cfg.seed + i for i, m in enumerate(MODES)}

    bag = np.empty((cfg.num_samples, 2))
    filled = 0

    def draw_inputs(gen: torch.Generator) -> dict[str, torch.Tensor]:
        return {g: _generate_inputs(g, cfg.batch_size, data_x, cfg, gen) for g in cfg.generators}

    # ---- online: the chain feeds B fresh samples per step; only these are held
    if "online" in groups:
        group = groups["online"]
        gen = torch.Generator().manual_seed(input_seeds["online"])
        for t in range(cfg.num_iterations):
            started = time.perf_counter()
            block_np = np.stack([next(chain) for _ in range(cfg.batch_size)])
            chain_seconds += time.perf_counter() - started
            take = min(cfg.batch_size, cfg.num_samples - filled)
            if take > 0:   # stored for the batch students and the reference only
                bag[filled:filled + take] = block_np[:take]
                filled += take
            started = time.perf_counter()
            block = torch.tensor(block_np, dtype=dtype)

            def online_teacher(g: str, xg: torch.Tensor, want_grad: bool, block=block):
                return _teacher_outputs(lambda xx: _pair_log_outputs(block, xx), xg, want_grad)

            inputs = draw_inputs(gen)
            group.step(inputs, online_teacher, linear_decay(t, cfg.num_iterations, cfg.lr), samples=block)
            group.seconds += time.perf_counter() - started
    started = time.perf_counter()
    while filled < cfg.num_samples:
        bag[filled] = next(chain)
        filled += 1
    chain_seconds += time.perf_counter() - started
    bag_t = torch.tensor(bag, dtype=dtype)

    # ---- batch: teacher p_MC of the stored bag
    if "batch" in groups:
        group = groups["batch"]
        gen = torch.Generator().manual_seed(input_seeds["batch"])

        def batch_teacher(g: str, xg: torch.Tensor, want_grad: bool):
            return _teacher_outputs(lambda xx: sigmoid_mixture_log_outputs(bag_t, xx), xg, want_grad)

        started = time.perf_counter()
        for t in range(cfg.num_iterations):
            inputs = draw_inputs(gen)
            group.step(inputs, batch_teacher, linear_decay(t, cfg.num_iterations, cfg.lr), samples=bag_t)
        group.seconds = time.perf_counter() - started

    # ---- evaluation against p_MC
    objective_gen = torch.Generator().manual_seed(1_000 * cfg.seed + 7)
    objective_inputs = {g: _generate_inputs(g, cfg.num_objective_inputs, data_x, cfg, objective_gen)
                        for g in cfg.generators}
    objective_teacher = {g: _teacher_outputs(lambda xx: sigmoid_mixture_log_outputs(bag_t, xx), x, True)
                         for g, x in objective_inputs.items()}
    objectives = {(mode, k): dse_objective(group.weights[k].detach(), objective_inputs[g], *objective_teacher[g])
                  for mode, group in groups.items() for k, (_, _, g) in enumerate(group.specs)}
    axis = np.linspace(-cfg.grid_limit, cfg.grid_limit, cfg.grid_size)
    grid_np = np.stack(np.meshgrid(axis, axis, indexing="xy"), -1).reshape(-1, 2)
    with torch.no_grad():
        def predict(weights: torch.Tensor, points: np.ndarray) -> np.ndarray:
            return sigmoid_mixture_log_outputs(weights, torch.tensor(points, dtype=dtype))[:, 1].exp().numpy()

        mc_grid, mc_test = predict(bag_t, grid_np), predict(bag_t, test_np)
        constants = {f"constant_{distance}_{where}": value for where, mc in (("test", mc_test), ("grid", mc_grid))
                     for distance, value in constant_distances(mc).items()}
        rows, student_grids, student_weights = [], [], []
        base = dict(toy="logreg", num_data=len(data_np), num_samples=cfg.num_samples, burn_in=cfg.burn_in,
                    num_iterations=cfg.num_iterations, batch_size=cfg.batch_size,
                    num_components=cfg.num_components, seed=cfg.seed)
        for mode, group in groups.items():
            for k, (_, loss, g) in enumerate(group.specs):
                w = group.weights[k].detach()
                f_grid, f_test = predict(w, grid_np), predict(w, test_np)
                student_grids.append(f_grid.reshape(cfg.grid_size, cfg.grid_size))
                student_weights.append(w.numpy())
                distances = {"mean_abs_test": float(np.abs(f_test - mc_test).mean()),
                             "mean_kl_test": float(_bernoulli_kl(mc_test, f_test).mean()),
                             "mean_abs_grid": float(np.abs(f_grid - mc_grid).mean()),
                             "mean_kl_grid": float(_bernoulli_kl(mc_grid, f_grid).mean())}
                skills = {f"{name}_skill": metrics.skill(value, constants[name.replace("mean_", "constant_")])
                          for name, value in distances.items()}
                rows.append({**base, "mode": mode, "loss": loss, "generator": g,
                             "generator_std": (cfg.perturb_std if g == "perturb" else
                                               cfg.noise_std if g == "noise" else 0.0),
                             "stored_weight_samples": cfg.num_samples if mode == "batch" else cfg.batch_size,
                             "memory_bytes": group.memory_bytes(k), **distances, **constants, **skills,
                             "skill": metrics.lowest_known(skills.values()),
                             "student_weight_norm": float(w.norm(dim=1).mean()),
                             "dse_objective": objectives[(mode, k)],
                             "chain_seconds": chain_seconds, "train_seconds": group.seconds})
    table = pd.DataFrame(rows)
    keep = np.random.default_rng(0).choice(cfg.num_samples, size=min(cfg.num_samples, 1_000), replace=False)
    arrays = {"data_x": data_np, "data_y": labels, "test_x": test_np, "grid_axis": axis,
              "mc_grid": mc_grid.reshape(cfg.grid_size, cfg.grid_size), "bag_subsample": bag[np.sort(keep)],
              "bag_mean": bag.mean(0), "bag_cov": np.cov(bag.T),
              "student_grids": np.stack(student_grids), "student_weights": np.stack(student_weights)}
    return ToyResult(table, arrays, config_dict(cfg))
