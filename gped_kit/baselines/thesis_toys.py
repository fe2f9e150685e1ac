"""The toy posteriors of Papamakarios' thesis (paper 001, Chapter 3): online vs batch distillation
of an MCMC posterior, the input generator of the distillation inputs, and derivative matching.

Two toys, each small enough to run on a CPU in seconds:

* **Bayesian mixture of Gaussians** (Section 3.2.3, Appendix D). Data from the 1-D, 3-component
  MoG of Eqs. 3.11-3.12 (means -3, 0, 2; variances 2, 5, 1; weights 1/3); the means are unknown,
  with the prior N(0, 100 I) of Eq. 3.13. A **Gibbs sampler** with latent assignments draws the
  means (the thesis used slice sampling; Gibbs is exact here because the model is conditionally
  conjugate, and the tests check it against the exact posterior). The Monte Carlo predictive
  p_MC(x) (Eq. 3.6) is distilled into a 3-component MoG (Eq. 3.14) by **batch EM** (Appendix D.1:
  store S weight samples, draw M data samples from p_MC, fit to convergence) or **online EM**
  (Appendix D.2, Cappé and Moulines 2009: for each minibatch of B chain samples w_s draw one
  x_s ~ p(x|w_s) each and interpolate the sufficient statistics, Eq. D.14, with a learning rate
  decayed linearly from 1 to 0). Distance: KL(p_MC || q) and total variation on a fine grid.
* **2-D Bayesian logistic regression** (Section 3.3.4): p(y=1|x,w) = sigma(w^T x) without bias
  (Eq. 3.41), prior N(0, 100 I) (Eq. 3.42), 24 points (12 per class) drawn from a seed (the thesis'
  points are not published). **Slice sampling** (Neal 2003; univariate updates with linear
  stepping out, started at 0, as the thesis) gives the chain. The compact model is Eq. 3.44, an
  average of S' = 10 logistic regressors, trained by SGD (learning rate decayed linearly to 0)
  with **cross-entropy** (Eq. 3.22) or the **derivative square error** (Eqs. 3.24-3.26, computed
  with :func:`gped_kit.core.losses.input_gradients` and
  :func:`gped_kit.core.losses.derivative_square_error`), **batch** (teacher = p_MC of the stored
  bag of S samples, Eq. 3.43) or **online** (teacher = the current sample's sigma(w_m^T x_m),
  Eq. 3.38: B fresh chain samples per step, nothing stored). The **input generator** p(x) of the
  distillation inputs is a parameter: ``"resample"`` (the 24 data points, resampled),
  ``"perturb"`` (resampled points plus Gaussian noise) or ``"noise"`` (pure Gaussian noise
  N(0, noise_std^2 I); with noise_std = 10 this is the thesis' own Eq. 3.45). Distances from
  p_MC: mean |f - p_MC| and mean Bernoulli KL(p_MC || f), on a grid over the data region and on
  fresh test points from the data distribution.

**Memory** (column ``memory_bytes``) is the sum of ``nbytes`` of the arrays a method holds while
it updates, taken from the arrays themselves: batch = the stored bag of weight
samples (+ the data samples / input minibatch, working statistics and parameters); online = one
minibatch of weight samples (+ its data samples / inputs, statistics and parameters). The chain's
own state and the evaluation are not counted. All randomness comes from ``seed``; results are
deterministic. Tables are tidy: one row per (toy, configuration, method), config columns first.

This module is the numerics only: :func:`run_mog` and :func:`run_logreg` return a
:class:`ToyResult` in memory. Stored runs, profiles and the analysis of the tables are in
:mod:`gped_kit.experiments.thesis`, the figures in :mod:`gped_kit.viz.thesis`.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Literal, Sequence

import numpy as np
import pandas as pd
import torch
from torch.nn import functional as F

from ..core import losses

Mode = Literal["batch", "online"]
Loss = Literal["cross_entropy", "derivative_square_error"]
Generator = Literal["resample", "perturb", "noise"]

#: Distillation modes (Section 3.2.2): the stored bag of samples, or each sample as it comes.
MODES: tuple[Mode, ...] = ("batch", "online")
#: Student losses (Section 3.3): cross-entropy (Eq. 3.22), derivative square error (Eq. 3.24).
LOSSES: tuple[Loss, ...] = ("cross_entropy", "derivative_square_error")
#: Input generators p(x) of the distillation inputs (Section 2.3; Eq. 3.45 for ``noise``).
INPUT_GENERATORS: tuple[Generator, ...] = ("resample", "perturb", "noise")


def _check(name: str, value: Any, ok: bool, allowed: str) -> None:
    if not ok:
        raise ValueError(f"{name}={value!r} is not allowed; allowed: {allowed}")


def _is_int(value: Any, minimum: int) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= minimum


def _is_pos(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def linear_decay(t: int, num_iterations: int, start: float = 1.0) -> float:
    """The thesis' learning rate: ``start`` at iteration 0, decayed linearly to 0 at the last
    iteration ``num_iterations - 1`` (Sections 3.2.3 and 3.3.4)."""
    if num_iterations <= 1:
        return start
    return start * (1.0 - t / (num_iterations - 1))


def _nbytes(*arrays: np.ndarray | torch.Tensor) -> int:
    return int(sum(a.nbytes if isinstance(a, np.ndarray) else a.element_size() * a.nelement() for a in arrays))


# ============================================================================= Bayesian MoG

MOG_TRUE_MEANS = (-3.0, 0.0, 2.0)   # Eq. 3.12
MOG_VARIANCES = (2.0, 5.0, 1.0)     # Eq. 3.12, known
MOG_WEIGHTS = (1 / 3, 1 / 3, 1 / 3)  # Eq. 3.11, known
MOG_PRIOR_VARIANCE = 100.0          # Eq. 3.13


@dataclass(frozen=True)
class MoGConfig:
    """One Bayesian-MoG run (Section 3.2.3).

    ``num_data`` is N; ``num_samples`` S post-burn-in Gibbs sweeps (no thinning, chain started at
    0 as the thesis); batch EM fits ``num_distill_samples`` M draws from p_MC; online EM takes
    ``minibatch_size`` B chain samples (and one data sample each) per iteration, S / B
    iterations. ``grid_limit``/``grid_size`` define the evaluation grid [-L, L].
    """

    num_data: int = 100
    num_samples: int = 10_000
    burn_in: int = 1_000
    num_distill_samples: int = 1_000
    minibatch_size: int = 100
    num_components: int = 3
    em_tol: float = 1e-10
    em_max_iter: int = 10_000
    grid_limit: float = 50.0
    grid_size: int = 4_001
    seed: int = 0

    def __post_init__(self) -> None:
        _check("MoGConfig.num_data", self.num_data, _is_int(self.num_data, 1), "an integer >= 1")
        _check("MoGConfig.num_samples", self.num_samples, _is_int(self.num_samples, 1), "an integer >= 1")
        _check("MoGConfig.burn_in", self.burn_in, _is_int(self.burn_in, 0), "an integer >= 0")
        _check("MoGConfig.num_distill_samples", self.num_distill_samples,
               _is_int(self.num_distill_samples, self.num_components), f"an integer >= {self.num_components}")
        _check("MoGConfig.minibatch_size", self.minibatch_size,
               _is_int(self.minibatch_size, 1) and self.num_samples % self.minibatch_size == 0,
               f"an integer >= 1 dividing num_samples={self.num_samples}")
        _check("MoGConfig.num_components", self.num_components, _is_int(self.num_components, 1), "an integer >= 1")
        _check("MoGConfig.em_tol", self.em_tol, _is_pos(self.em_tol), "a finite number > 0")
        _check("MoGConfig.em_max_iter", self.em_max_iter, _is_int(self.em_max_iter, 1), "an integer >= 1")
        _check("MoGConfig.grid_limit", self.grid_limit, _is_pos(self.grid_limit), "a finite number > 0")
        _check("MoGConfig.grid_size", self.grid_size, _is_int(self.grid_size, 11), "an integer >= 11")
        _check("MoGConfig.seed", self.seed, _is_int(self.seed, 0), "an integer >= 0")


@dataclass(frozen=True)
class MoGParams:
    """A 1-D mixture of Gaussians: weights pi, means mu, variances sigma^2 (Eq. 3.14 / D.1)."""

    weights: np.ndarray
    means: np.ndarray
    variances: np.ndarray

    def log_pdf(self, x: np.ndarray) -> np.ndarray:
        """log p(x | theta) for every entry of ``x``."""
        return _logsumexp(_component_log_pdf(np.asarray(x, float)[:, None], self.means, self.variances)
                          + np.log(self.weights), axis=1)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.weights, self.means, self.variances


def _logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    return np.squeeze(m, axis=axis) + np.log(np.sum(np.exp(a - m), axis=axis))


def _component_log_pdf(x: np.ndarray, means: np.ndarray, variances: np.ndarray) -> np.ndarray:
    return -0.5 * (np.log(2 * np.pi * variances) + (x - means) ** 2 / variances)


def mog_dataset(num_data: int, seed: int = 0, means: Sequence[float] = MOG_TRUE_MEANS,
                variances: Sequence[float] = MOG_VARIANCES, weights: Sequence[float] = MOG_WEIGHTS) -> np.ndarray:
    """N observations from the true MoG (Eqs. 3.11-3.12). Nested: the first N points do not
    depend on ``num_data`` (two seeded streams, components and noise, read in order)."""
    _check("num_data", num_data, _is_int(num_data, 1), "an integer >= 1")
    comp_ss, noise_ss = np.random.SeedSequence([seed, 11]).spawn(2)
    u = np.random.default_rng(comp_ss).random(num_data)
    z = np.searchsorted(np.cumsum(weights), u, side="right").clip(max=len(weights) - 1)
    eps = np.random.default_rng(noise_ss).standard_normal(num_data)
    return np.asarray(means)[z] + np.sqrt(np.asarray(variances))[z] * eps


def mog_gibbs(data: np.ndarray, rng: np.random.Generator, num_samples: int, burn_in: int = 0,
              variances: Sequence[float] = MOG_VARIANCES, weights: Sequence[float] = MOG_WEIGHTS,
              prior_variance: float = MOG_PRIOR_VARIANCE, init: Sequence[float] | None = None
              ) -> Iterator[np.ndarray]:
    """Gibbs sampler of the unknown means w = (m_1..m_K) given ``data`` (Section 3.2.3's model).

    One sweep: (i) every assignment z_n ~ p(z_n = k | x_n, w) proportional to
    pi_k N(x_n | m_k, s_k^2); (ii) every mean from its conjugate conditional
    m_k | z, D ~ N(b_k / a_k, 1 / a_k) with a_k = 1/100 + n_k / s_k^2, b_k = sum_{z_n = k} x_n / s_k^2.
    Yields one sample (a new array of shape (K,)) per sweep after ``burn_in`` sweeps; the chain
    starts at ``init`` (default 0, as the thesis).
    """
    x = np.asarray(data, float)
    var = np.asarray(variances, float)
    k = len(var)
    log_w = np.log(np.asarray(weights, float)) - 0.5 * np.log(2 * np.pi * var)
    m = np.zeros(k) if init is None else np.array(init, float)
    for sweep in range(burn_in + num_samples):
        logits = log_w - 0.5 * (x[:, None] - m) ** 2 / var
        logits -= logits.max(axis=1, keepdims=True)
        probs = np.exp(logits)
        cum = np.cumsum(probs, axis=1)
        u = rng.random(len(x)) * cum[:, -1]
        z = (u[:, None] > cum).sum(axis=1)
        counts = np.bincount(z, minlength=k)
        sums = np.bincount(z, weights=x, minlength=k)
        precision = 1.0 / prior_variance + counts / var
        m = sums / var / precision + rng.standard_normal(k) / np.sqrt(precision)
        if sweep >= burn_in:
            yield m.copy()


def mog_exact_posterior(data: np.ndarray, variances: Sequence[float] = MOG_VARIANCES,
                        weights: Sequence[float] = MOG_WEIGHTS, prior_variance: float = MOG_PRIOR_VARIANCE,
                        max_terms: int = 200_000) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The exact posterior p(w | D) for small N: a mixture over all K^N assignments z of
    independent Gaussians (Section 3.2.3: "a sum of 3^N Gaussians").

    Returns ``(log_weights (Z,), means (Z, K), variances (Z, K))`` of the mixture terms, with
    normalised weights. Raises ValueError when K^N exceeds ``max_terms``.
    """
    x = np.asarray(data, float)
    var = np.asarray(variances, float)
    k, n = len(var), len(x)
    if k ** n > max_terms:
        raise ValueError(f"mog_exact_posterior: K^N = {k}^{n} terms exceeds max_terms={max_terms}; "
                         f"allowed: N <= {int(math.log(max_terms) / math.log(k))}")
    z = np.array(list(itertools.product(range(k), repeat=n)), dtype=int).reshape(-1, n)
    onehot = (z[:, :, None] == np.arange(k)).astype(float)          # (Z, N, K)
    counts = onehot.sum(1)                                          # (Z, K)
    sums = (onehot * x[None, :, None]).sum(1)
    sq = (onehot * (x ** 2)[None, :, None]).sum(1)
    precision = 1.0 / prior_variance + counts / var
    post_mean = sums / var / precision
    # log of p(z) * prod_k integral N(m_k | 0, v0) prod_{z_n = k} N(x_n | m_k, s_k^2) dm_k
    log_ev = (counts * np.log(np.asarray(weights)) - 0.5 * counts * np.log(2 * np.pi * var)
              - 0.5 * sq / var - 0.5 * np.log(prior_variance * precision)
              + 0.5 * precision * post_mean ** 2).sum(1)
    log_ev -= _logsumexp(log_ev, axis=0)
    return log_ev, post_mean, 1.0 / precision


def mog_exact_predictive_pdf(x: np.ndarray, posterior: tuple[np.ndarray, np.ndarray, np.ndarray],
                             variances: Sequence[float] = MOG_VARIANCES, weights: Sequence[float] = MOG_WEIGHTS
                             ) -> np.ndarray:
    """The exact p(x | D) (Eq. 3.1) from :func:`mog_exact_posterior`'s mixture: every term z
    contributes sum_k pi_k N(x | mu_zk, s_k^2 + v_zk)."""
    log_w, means, post_var = posterior
    x = np.asarray(x, float)
    total = np.zeros(len(x))
    for lw, mu, v in zip(log_w, means, post_var):
        total += np.exp(lw) * (np.asarray(weights) * np.exp(_component_log_pdf(
            x[:, None], mu, np.asarray(variances) + v))).sum(1)
    return total


def mog_predictive_pdf(x: np.ndarray, mean_samples: np.ndarray, variances: Sequence[float] = MOG_VARIANCES,
                       weights: Sequence[float] = MOG_WEIGHTS, chunk: int = 500) -> np.ndarray:
    """p_MC(x) = (1/S) sum_s p(x | w_s) (Eq. 3.6) at every entry of ``x``, in chunks of samples."""
    x = np.asarray(x, float)
    var, w = np.asarray(variances, float), np.asarray(weights, float)
    total = np.zeros(len(x))
    for start in range(0, len(mean_samples), chunk):
        m = mean_samples[start:start + chunk]                               # (s, K)
        comp = np.exp(_component_log_pdf(x[None, :, None], m[:, None, :], var))  # (s, G, K)
        total += (comp * w).sum(axis=(0, 2))
    return total / len(mean_samples)


def sample_mog_predictive(mean_samples: np.ndarray, num: int, rng: np.random.Generator,
                          variances: Sequence[float] = MOG_VARIANCES, weights: Sequence[float] = MOG_WEIGHTS
                          ) -> np.ndarray:
    """``num`` exact draws from p_MC (a MoG with S x K components): pick a stored sample s
    uniformly, a component k ~ pi, then x ~ N(m_sk, s_k^2) (batch distillation, step ii)."""
    s = rng.integers(len(mean_samples), size=num)
    k = np.searchsorted(np.cumsum(weights), rng.random(num), side="right").clip(max=len(weights) - 1)
    return mean_samples[s, k] + np.sqrt(np.asarray(variances))[k] * rng.standard_normal(num)


def sample_mog_likelihood(mean_samples: np.ndarray, rng: np.random.Generator,
                          variances: Sequence[float] = MOG_VARIANCES, weights: Sequence[float] = MOG_WEIGHTS
                          ) -> np.ndarray:
    """One x_s ~ p(x | w_s) per row of ``mean_samples`` (online distillation, Section 3.2.2)."""
    num = len(mean_samples)
    k = np.searchsorted(np.cumsum(weights), rng.random(num), side="right").clip(max=len(weights) - 1)
    return mean_samples[np.arange(num), k] + np.sqrt(np.asarray(variances))[k] * rng.standard_normal(num)


# ---- EM (Appendix D)

VARIANCE_FLOOR = 1e-6


def mog_init(x: np.ndarray, num_components: int) -> MoGParams:
    """Deterministic EM start: equal weights, means at the (2k-1)/(2K) quantiles of ``x``,
    every variance the variance of ``x``."""
    q = (2 * np.arange(num_components) + 1) / (2 * num_components)
    return MoGParams(np.full(num_components, 1.0 / num_components), np.quantile(x, q),
                     np.full(num_components, max(float(np.var(x)), VARIANCE_FLOOR)))


def mog_responsibilities(x: np.ndarray, params: MoGParams) -> np.ndarray:
    """<z_in> (Eqs. D.3 / D.10), shape (n, K)."""
    log_r = _component_log_pdf(np.asarray(x, float)[:, None], params.means, params.variances) + np.log(params.weights)
    log_r -= _logsumexp(log_r, axis=1)[:, None]
    return np.exp(log_r)


def mog_statistics(x: np.ndarray, resp: np.ndarray) -> np.ndarray:
    """Sufficient statistics Phi_i1, Phi_i2, Phi_i3 (Eqs. D.4-D.6 / D.11-D.13), shape (K, 3)."""
    x = np.asarray(x, float)
    return np.stack([resp.sum(0), resp.T @ x, resp.T @ x ** 2], axis=1)


def mog_params_from_statistics(stats: np.ndarray) -> MoGParams:
    """M-step (Eqs. D.7-D.9): pi_i = Phi_i1 / sum_j Phi_j1, m_i = Phi_i2 / Phi_i1,
    S_i = Phi_i3 / Phi_i1 - m_i^2 (floored at 1e-6)."""
    phi1 = np.maximum(stats[:, 0], 1e-300)
    means = stats[:, 1] / phi1
    variances = np.maximum(stats[:, 2] / phi1 - means ** 2, VARIANCE_FLOOR)
    return MoGParams(phi1 / phi1.sum(), means, variances)


def batch_em(x: np.ndarray, init: MoGParams, tol: float = 1e-10, max_iter: int = 10_000
             ) -> tuple[MoGParams, int, float]:
    """Batch EM (Appendix D.1) until the mean log-likelihood improves by less than ``tol``.
    Returns (parameters, iterations, final mean log-likelihood)."""
    params, previous = init, -np.inf
    for it in range(1, max_iter + 1):
        params = mog_params_from_statistics(mog_statistics(x, mog_responsibilities(x, params)))
        current = float(params.log_pdf(x).mean())
        if current - previous < tol:
            return params, it, current
        previous = current
    return params, max_iter, previous


class OnlineEM:
    """Online EM of Cappé and Moulines (2009) as in Appendix D.2: for each minibatch the E-step
    (D.10), minibatch statistics (D.11-D.13), the running statistics
    Phi <- (1 - alpha) Phi + alpha Phi' (D.14) and the M-step (D.7-D.9) on them.

    It holds only the running statistics and the parameters; ``peak_bytes`` records the largest
    number of bytes held during a step (minibatch, its responsibilities, statistics, parameters).
    """

    def __init__(self, init: MoGParams) -> None:
        self.params = init
        self.stats: np.ndarray | None = None
        self.steps = 0
        self.peak_bytes = 0

    def step(self, x: np.ndarray, alpha: float, held: Sequence[np.ndarray] = ()) -> MoGParams:
        """One update on the minibatch ``x`` with learning rate ``alpha`` in [0, 1]; ``held``
        lists other arrays the caller keeps for this step (e.g. the weight samples), counted in
        ``peak_bytes``."""
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"OnlineEM.step: alpha={alpha!r}; allowed: 0 <= alpha <= 1")
        resp = mog_responsibilities(x, self.params)
        mini = mog_statistics(x, resp) / len(x)   # per-point averages: independent of B
        self.stats = mini if self.stats is None else (1 - alpha) * self.stats + alpha * mini
        self.params = mog_params_from_statistics(self.stats)
        self.steps += 1
        self.peak_bytes = max(self.peak_bytes, _nbytes(x, resp, mini, self.stats, *self.params.arrays(), *held))
        return self.params


def _grid_kl_tv(p: np.ndarray, q: np.ndarray, grid: np.ndarray) -> tuple[float, float]:
    """KL(p || q) and total variation 0.5 int |p - q| by the trapezoid rule on ``grid``."""
    pos = p > 0
    integrand = np.where(pos, p * (np.log(np.where(pos, p, 1.0)) - np.log(np.maximum(q, 1e-300))), 0.0)
    return float(np.trapezoid(integrand, grid)), float(0.5 * np.trapezoid(np.abs(p - q), grid))


@dataclass
class ToyResult:
    """What a toy run returns: the tidy ``table`` (one row per method), the ``arrays`` the
    figures need (densities on grids, weights, ...), the ``config`` as a dict
    (:func:`config_dict`), and, for a run read through the results store
    (:func:`gped_kit.experiments.thesis.run_toy`), ``status`` (``"ran"`` or ``"reused"``) and the
    store entry's ``key``."""

    table: pd.DataFrame
    arrays: dict[str, np.ndarray]
    config: dict[str, Any]
    status: str = "ran"
    key: str | None = None


def run_mog(config: MoGConfig) -> ToyResult:
    """Batch vs online distillation of one Bayesian-MoG chain (Section 3.2.3).

    The Gibbs chain runs once; while it runs, online EM receives its samples in minibatches of B
    (with one x_s ~ p(x|w_s) each) and keeps nothing else. The chain's samples are also stored, as
    the batch method needs (and as the reference p_MC over all S samples needs); after the chain,
    batch EM fits M draws from p_MC. Both are compared with p_MC on the grid.
    """
    cfg = config
    data_x = mog_dataset(cfg.num_data, cfg.seed)
    chain_ss, batch_ss, online_ss = np.random.SeedSequence([cfg.seed, cfg.num_data, 22]).spawn(3)
    chain = mog_gibbs(data_x, np.random.default_rng(chain_ss), cfg.num_samples, cfg.burn_in)
    online_rng = np.random.default_rng(online_ss)
    num_iterations = cfg.num_samples // cfg.minibatch_size
    bag = np.empty((cfg.num_samples, len(MOG_VARIANCES)))
    online: OnlineEM | None = None
    chain_seconds = online_seconds = 0.0
    for t in range(num_iterations):
        started = time.perf_counter()
        block = np.stack([next(chain) for _ in range(cfg.minibatch_size)])   # online's minibatch of w_s
        chain_seconds += time.perf_counter() - started
        bag[t * cfg.minibatch_size:(t + 1) * cfg.minibatch_size] = block     # kept for batch + reference only
        started = time.perf_counter()
        xs = sample_mog_likelihood(block, online_rng)
        if online is None:
            online = OnlineEM(mog_init(xs, cfg.num_components))
        online.step(xs, linear_decay(t, num_iterations), held=(block,))
        online_seconds += time.perf_counter() - started

    started = time.perf_counter()
    x_m = sample_mog_predictive(bag, cfg.num_distill_samples, np.random.default_rng(batch_ss))
    batch_params, em_iters, _ = batch_em(x_m, mog_init(x_m, cfg.num_components), cfg.em_tol, cfg.em_max_iter)
    batch_seconds = time.perf_counter() - started
    resp = mog_responsibilities(x_m, batch_params)
    batch_bytes = _nbytes(bag, x_m, resp, mog_statistics(x_m, resp), *batch_params.arrays())

    grid = np.linspace(-cfg.grid_limit, cfg.grid_limit, cfg.grid_size)
    p_mc = mog_predictive_pdf(grid, bag)
    true_pdf = np.exp(MoGParams(np.array(MOG_WEIGHTS), np.array(MOG_TRUE_MEANS), np.array(MOG_VARIANCES)).log_pdf(grid))
    densities = {"batch": np.exp(batch_params.log_pdf(grid)), "online": np.exp(online.params.log_pdf(grid))}
    base = dict(toy="mog", num_data=cfg.num_data, num_samples=cfg.num_samples, burn_in=cfg.burn_in, seed=cfg.seed)
    rows = []
    for mode, params, seconds, nbytes, weights_held, data_held in (
            ("batch", batch_params, batch_seconds, batch_bytes, cfg.num_samples, cfg.num_distill_samples),
            ("online", online.params, online_seconds, online.peak_bytes, cfg.minibatch_size, cfg.minibatch_size)):
        kl, tv = _grid_kl_tv(p_mc, densities[mode], grid)
        rows.append({**base, "mode": mode, "minibatch_size": cfg.minibatch_size if mode == "online" else None,
                     "num_distill_samples": cfg.num_distill_samples if mode == "batch" else cfg.num_samples,
                     "em_iterations": em_iters if mode == "batch" else num_iterations,
                     "stored_weight_samples": weights_held, "stored_data_samples": data_held,
                     "memory_bytes": nbytes, "kl_mc_to_student": kl, "tv_mc_student": tv,
                     "chain_seconds": chain_seconds, "distill_seconds": seconds,
                     "student_weights": params.weights.round(4).tolist(),
                     "student_means": params.means.round(4).tolist(),
                     "student_variances": params.variances.round(4).tolist()})
    table = pd.DataFrame(rows)
    hist_edges = np.linspace(-15, 15, 121)
    arrays = {"grid": grid, "p_mc": p_mc, "true_pdf": true_pdf, "batch": densities["batch"],
              "online": densities["online"], "data": data_x, "hist_edges": hist_edges,
              "mean_hist": np.stack([np.histogram(bag[:, k], bins=hist_edges)[0] for k in range(bag.shape[1])])}
    return ToyResult(table, arrays, config_dict(cfg))


# ============================================================================= Bayesian logistic regression

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
    and ``num_test`` fresh points from the data distribution.
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
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("class_mean", "modes", "losses", "generators"):   # lists given: stored as tuples
            if isinstance(getattr(self, name), list):
                object.__setattr__(self, name, tuple(getattr(self, name)))
        _check("LogRegConfig.num_per_class", self.num_per_class, _is_int(self.num_per_class, 1), "an integer >= 1")
        _check("LogRegConfig.class_mean", self.class_mean,
               len(self.class_mean) == 2 and all(math.isfinite(v) for v in self.class_mean), "two finite numbers")
        for name in ("class_std", "prior_variance", "slice_width", "lr", "init_std", "perturb_std", "noise_std",
                     "grid_limit"):
            _check(f"LogRegConfig.{name}", getattr(self, name), _is_pos(getattr(self, name)), "a finite number > 0")
        for name, minimum in (("num_samples", 1), ("burn_in", 0), ("num_components", 1), ("num_iterations", 1),
                              ("batch_size", 1), ("grid_size", 2), ("num_test", 1), ("seed", 0)):
            _check(f"LogRegConfig.{name}", getattr(self, name), _is_int(getattr(self, name), minimum),
                   f"an integer >= {minimum}")
        for name, allowed in (("modes", MODES), ("losses", LOSSES), ("generators", INPUT_GENERATORS)):
            values = getattr(self, name)
            _check(f"LogRegConfig.{name}", values,
                   isinstance(values, (tuple, list)) and len(values) > 0 and all(v in allowed for v in values)
                   and len(set(values)) == len(values), f"a non-empty tuple of distinct values from {allowed}")
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


def _bernoulli_kl(p: np.ndarray, q: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    p, q = np.clip(p, eps, 1 - eps), np.clip(q, eps, 1 - eps)
    return p * np.log(p / q) + (1 - p) * np.log((1 - p) / (1 - q))


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
        self.sample_bytes = max(self.sample_bytes, _nbytes(samples))
        self.input_bytes = max(self.input_bytes, max(_nbytes(v) for v in inputs.values()))

    def memory_bytes(self, k: int) -> int:
        """What student k holds: the teacher's weight samples, one input minibatch, its parameters."""
        return self.sample_bytes + self.input_bytes + _nbytes(self.weights[k])


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
    axis = np.linspace(-cfg.grid_limit, cfg.grid_limit, cfg.grid_size)
    grid_np = np.stack(np.meshgrid(axis, axis, indexing="xy"), -1).reshape(-1, 2)
    with torch.no_grad():
        def predict(weights: torch.Tensor, points: np.ndarray) -> np.ndarray:
            return sigmoid_mixture_log_outputs(weights, torch.tensor(points, dtype=dtype))[:, 1].exp().numpy()

        mc_grid, mc_test = predict(bag_t, grid_np), predict(bag_t, test_np)
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
                rows.append({**base, "mode": mode, "loss": loss, "generator": g,
                             "generator_std": (cfg.perturb_std if g == "perturb" else
                                               cfg.noise_std if g == "noise" else 0.0),
                             "stored_weight_samples": cfg.num_samples if mode == "batch" else cfg.batch_size,
                             "memory_bytes": group.memory_bytes(k),
                             "mean_abs_test": float(np.abs(f_test - mc_test).mean()),
                             "mean_kl_test": float(_bernoulli_kl(mc_test, f_test).mean()),
                             "mean_abs_grid": float(np.abs(f_grid - mc_grid).mean()),
                             "mean_kl_grid": float(_bernoulli_kl(mc_grid, f_grid).mean()),
                             "student_weight_norm": float(w.norm(dim=1).mean()),
                             "chain_seconds": chain_seconds, "train_seconds": group.seconds})
    table = pd.DataFrame(rows)
    keep = np.random.default_rng(0).choice(cfg.num_samples, size=min(cfg.num_samples, 1_000), replace=False)
    arrays = {"data_x": data_np, "data_y": labels, "test_x": test_np, "grid_axis": axis,
              "mc_grid": mc_grid.reshape(cfg.grid_size, cfg.grid_size), "bag_subsample": bag[np.sort(keep)],
              "bag_mean": bag.mean(0), "bag_cov": np.cov(bag.T),
              "student_grids": np.stack(student_grids), "student_weights": np.stack(student_weights)}
    return ToyResult(table, arrays, config_dict(cfg))


def config_dict(config: MoGConfig | LogRegConfig) -> dict[str, Any]:
    """The configuration as JSON data (every field; tuples as lists): :attr:`ToyResult.config`."""
    return json.loads(json.dumps(dataclasses.asdict(config), default=list))
