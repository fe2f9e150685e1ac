"""The Bayesian mixture of Gaussians of Papamakarios' thesis (paper 001, Section 3.2.3, Appendix D).

Data from the 1-D, 3-component MoG of Eqs. 3.11-3.12 (means -3, 0, 2; variances 2, 5, 1; weights
1/3); the means are unknown, with the prior N(0, 100 I) of Eq. 3.13. A **Gibbs sampler** with latent
assignments draws the means (the thesis used slice sampling; Gibbs is exact here because the model
is conditionally conjugate, and the tests check it against the exact posterior). The Monte Carlo
predictive p_MC(x) (Eq. 3.6) is distilled into a 3-component MoG (Eq. 3.14) by **batch EM**
(Appendix D.1: store S weight samples, draw M data samples from p_MC, fit to convergence) or
**online EM** (Appendix D.2, Cappé and Moulines 2009: for each minibatch of B chain samples w_s draw
one x_s ~ p(x|w_s) each and interpolate the sufficient statistics, Eq. D.14, with a learning rate
decayed linearly from 1 to 0). Distance: KL(p_MC || q) and total variation on a fine grid, each with its
skill over the best constant density on that grid (:func:`constant_density`): a student counts only where it
beats it.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..core import metrics
from ..core.options import check_int, check_positive
from .common import ToyResult, array_bytes, config_dict, linear_decay

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
        for name, minimum in (("num_data", 1), ("num_samples", 1), ("burn_in", 0), ("num_components", 1),
                              ("em_max_iter", 1), ("grid_size", 11), ("seed", 0), ("minibatch_size", 1)):
            check_int(f"MoGConfig.{name}", getattr(self, name), minimum)
        check_int("MoGConfig.num_distill_samples", self.num_distill_samples, self.num_components)
        if self.num_samples % self.minibatch_size:
            raise ValueError(f"MoGConfig.minibatch_size={self.minibatch_size!r}: must divide "
                             f"num_samples={self.num_samples}")
        for name in ("em_tol", "grid_limit"):
            check_positive(f"MoGConfig.{name}", getattr(self, name))


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
    check_int("num_data", num_data, 1)
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
        self.peak_bytes = max(self.peak_bytes, array_bytes(x, resp, mini, self.stats, *self.params.arrays(), *held))
        return self.params


def grid_kl_tv(p: np.ndarray, q: np.ndarray, grid: np.ndarray) -> tuple[float, float]:
    """KL(p || q) and total variation 0.5 int |p - q| by the trapezoid rule on ``grid``."""
    pos = p > 0
    integrand = np.where(pos, p * (np.log(np.where(pos, p, 1.0)) - np.log(np.maximum(q, 1e-300))), 0.0)
    return float(np.trapezoid(integrand, grid)), float(0.5 * np.trapezoid(np.abs(p - q), grid))


def constant_density(grid: np.ndarray) -> np.ndarray:
    """The best constant prediction of a density on ``grid``: the one constant that integrates to 1 over it,
    1 / (grid[-1] - grid[0]). A student no closer to p_MC than it (its skill,
    :func:`gped_kit.core.metrics.skill`, not above 0) has learnt nothing of p_MC's shape."""
    return np.full(len(grid), 1.0 / float(grid[-1] - grid[0]))


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
    batch_bytes = array_bytes(bag, x_m, resp, mog_statistics(x_m, resp), *batch_params.arrays())

    grid = np.linspace(-cfg.grid_limit, cfg.grid_limit, cfg.grid_size)
    p_mc = mog_predictive_pdf(grid, bag)
    true_pdf = np.exp(MoGParams(np.array(MOG_WEIGHTS), np.array(MOG_TRUE_MEANS), np.array(MOG_VARIANCES)).log_pdf(grid))
    densities = {"batch": np.exp(batch_params.log_pdf(grid)), "online": np.exp(online.params.log_pdf(grid))}
    base = dict(toy="mog", num_data=cfg.num_data, num_samples=cfg.num_samples, burn_in=cfg.burn_in, seed=cfg.seed)
    constant_kl, constant_tv = grid_kl_tv(p_mc, constant_density(grid), grid)
    rows = []
    for mode, params, seconds, nbytes, weights_held, data_held in (
            ("batch", batch_params, batch_seconds, batch_bytes, cfg.num_samples, cfg.num_distill_samples),
            ("online", online.params, online_seconds, online.peak_bytes, cfg.minibatch_size, cfg.minibatch_size)):
        kl, tv = grid_kl_tv(p_mc, densities[mode], grid)
        skills = {"kl_mc_to_student_skill": metrics.skill(kl, constant_kl),
                  "tv_mc_student_skill": metrics.skill(tv, constant_tv)}
        rows.append({**base, "mode": mode, "minibatch_size": cfg.minibatch_size if mode == "online" else None,
                     "num_distill_samples": cfg.num_distill_samples if mode == "batch" else cfg.num_samples,
                     "em_iterations": em_iters if mode == "batch" else num_iterations,
                     "stored_weight_samples": weights_held, "stored_data_samples": data_held,
                     "memory_bytes": nbytes, "kl_mc_to_student": kl, "tv_mc_student": tv,
                     "constant_kl": constant_kl, "constant_tv": constant_tv, **skills,
                     "skill": metrics.lowest_known(skills.values()),
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
