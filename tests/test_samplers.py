"""SGLD (Eq. 7): known-answer tests that catch a wrong factor on the gradient, the noise or N/M."""

import math

import pytest
import torch
from torch.nn import functional as F

from gped_kit.samplers import SGLD, SGLDConfig, sgld_update_


def stationary_variance(precision: torch.Tensor, eta: float) -> torch.Tensor:
    """Exact stationary variance of theta' = (1 - eta a / 2) theta + sqrt(eta) xi (Eq. 7 on a Gaussian)."""
    return 1.0 / (precision * (1.0 - eta * precision / 4.0))


def test_prior_only_chain_has_exact_stationary_variance():
    # 20,000 independent coordinates, prior precision tau, no data term.
    tau, eta = 2.0, 0.1
    theta = torch.zeros(20_000, requires_grad=True)
    gen = torch.Generator().manual_seed(0)
    sampler = SGLD([theta], num_data=1, config=SGLDConfig(step_size=eta, prior_precision=tau), generator=gen)
    draws = []
    for t in range(400):
        sampler.step((0.0 * theta).sum(), t)
        if t >= 200:
            draws.append(theta.detach().clone())
    draws = torch.stack(draws)
    expected = float(stationary_variance(torch.tensor(tau), eta))  # 0.526; eta on the gradient would give 0.278
    assert draws.mean().abs() < 0.01
    assert draws.var() == pytest.approx(expected, rel=0.03)


def test_bayesian_linear_regression_posterior_is_recovered():
    """Full-batch SGLD on Bayesian linear regression: mean = closed-form posterior mean, covariance =
    the exact stationary covariance of the discretised chain (which tends to the posterior as eta -> 0)."""
    gen = torch.Generator().manual_seed(1)
    n, sigma, tau = 40, 0.5, 1.0
    X = torch.randn(n, 2, generator=gen, dtype=torch.float64)
    y = X @ torch.tensor([1.5, -0.7], dtype=torch.float64) + sigma * torch.randn(n, generator=gen, dtype=torch.float64)
    A = tau * torch.eye(2, dtype=torch.float64) + X.T @ X / sigma**2  # posterior precision
    mu = torch.linalg.solve(A, X.T @ y / sigma**2)
    eta = 2e-3
    chains = 4000
    w = torch.zeros(2, chains, dtype=torch.float64, requires_grad=True)  # one column per chain
    sampler = SGLD([w], num_data=n, config=SGLDConfig(step_size=eta, prior_precision=tau, batch_size=n),
                   generator=torch.Generator().manual_seed(2))
    for t in range(1500):
        mean_nll = ((y[:, None] - X @ w) ** 2 / (2 * sigma**2)).mean(dim=0).sum()  # chains decouple
        sampler.step(mean_nll, t)
    samples = w.detach().T
    evals, evecs = torch.linalg.eigh(A)
    exact_cov = evecs @ torch.diag(stationary_variance(evals, eta)) @ evecs.T
    emp_cov = torch.cov(samples.T)
    assert torch.allclose(samples.mean(0), mu, atol=4 * exact_cov.diag().sqrt().max() / math.sqrt(chains))
    assert torch.allclose(emp_cov, exact_cov, rtol=0.08, atol=0.08 * exact_cov.abs().max())
    assert torch.allclose(emp_cov, torch.linalg.inv(A), rtol=0.15, atol=0.15 * exact_cov.abs().max())


def test_one_step_matches_eq7_on_a_minibatch():
    """theta' = theta + eta/2 (-tau theta + N/M sum_i grad log p(y_i|x_i)) + sqrt(eta) xi, with N != M."""
    torch.manual_seed(0)
    net = torch.nn.Linear(5, 3)
    x, y = torch.randn(8, 5), torch.randint(0, 3, (8,))
    N, eta, tau = 1000, 1e-3, 10.0
    params = list(net.parameters())
    before = [p.detach().clone() for p in params]
    loglik = -F.cross_entropy(net(x), y, reduction="sum")
    grads = torch.autograd.grad(loglik, params)
    gen = torch.Generator().manual_seed(5)
    noise = torch.randn(sum(p.numel() for p in params), generator=torch.Generator().manual_seed(5))
    xi = torch.split(noise, [p.numel() for p in params])
    sampler = SGLD(params, num_data=N, config=SGLDConfig(step_size=eta, prior_precision=tau, batch_size=8), generator=gen)
    sampler.step(F.cross_entropy(net(x), y), t=0)
    for p, p0, g, z in zip(params, before, grads, xi):
        expected = p0 + eta / 2 * (-tau * p0 + N / 8 * g) + math.sqrt(eta) * z.view_as(p0)
        assert torch.allclose(p.detach(), expected, atol=1e-6)


def test_update_function_broadcasts_over_stacked_chains():
    params = [torch.ones(3, 4)]
    sgld_update_(params, [torch.zeros(3, 4)], [torch.zeros(3, 4)], step_size=0.2, num_data=10, prior_precision=1.0)
    assert torch.allclose(params[0], torch.full((3, 4), 1 - 0.1))


def test_polynomial_schedule_and_validation():
    cfg = SGLDConfig(step_size=1e-3, schedule="polynomial", decay_steps=100, decay_power=0.5)
    assert cfg.step_size_at(0) == pytest.approx(1e-3)
    assert cfg.step_size_at(300) == pytest.approx(1e-3 / 2)
    assert SGLDConfig(step_size=1e-3).step_size_at(10**6) == 1e-3
    for bad in (dict(step_size=0.0), dict(step_size=-1e-3), dict(step_size=float("nan")),
                dict(batch_size=0), dict(prior_precision=-1.0), dict(schedule="cosine")):
        with pytest.raises(ValueError, match=next(iter(bad))):
            SGLDConfig(**bad)
