"""SGLD (Eq. 7): known-answer tests that catch a wrong factor on the gradient, the noise or N/M."""

import math

import pytest
import torch
from torch.func import vmap
from torch.nn import functional as F

from gped_kit.core.fused import Fused
from gped_kit.core.sgld import SGLDConfig, sgld_fused_update_, sgld_update_, stationary_variance


def run_chain(theta, mean_nll, config, num_data, steps, seed=0, keep_from=None):
    """Iterate Eq. 7 with ``sgld_update_`` from ``theta`` (one tensor); return the kept samples."""
    gen = torch.Generator().manual_seed(seed)
    coefficients = torch.tensor(config.coefficients(num_data), dtype=theta.dtype)
    kept = []
    for t in range(steps):
        leaf = theta.detach().requires_grad_(True)
        (grad,) = torch.autograd.grad(mean_nll(leaf), leaf)
        noise = torch.randn(theta.shape, generator=gen, dtype=theta.dtype)
        sgld_update_([theta], [grad], [noise], coefficients, config.scales(t))
        if keep_from is not None and t >= keep_from:
            kept.append(theta.clone())
    return torch.stack(kept) if kept else theta


def test_prior_only_chain_has_exact_stationary_variance():
    # 20,000 independent coordinates, prior precision tau, no data term.
    tau, eta = 2.0, 0.1
    draws = run_chain(torch.zeros(20_000), lambda th: (0.0 * th).sum(),
                      SGLDConfig(step_size=eta, prior_precision=tau), num_data=1, steps=400, keep_from=200)
    expected = stationary_variance(tau, eta)  # 0.526; eta on the gradient would give 0.278
    assert expected == pytest.approx(1 / (tau * (1 - eta * tau / 4)))
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
    eta, chains = 2e-3, 4000
    w = torch.zeros(2, chains, dtype=torch.float64)  # one column per chain: the chains decouple
    samples = run_chain(w, lambda ww: ((y[:, None] - X @ ww) ** 2 / (2 * sigma**2)).mean(dim=0).sum(),
                        SGLDConfig(step_size=eta, prior_precision=tau, batch_size=n), num_data=n, steps=1500,
                        seed=2).T
    evals, evecs = torch.linalg.eigh(A)
    exact_cov = evecs @ torch.diag(torch.tensor([stationary_variance(float(a), eta) for a in evals],
                                                dtype=torch.float64)) @ evecs.T
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
    params = [p.detach().clone() for p in net.parameters()]
    loglik = -F.cross_entropy(net(x), y, reduction="sum")
    sum_grads = torch.autograd.grad(loglik, list(net.parameters()))
    mean_grads = [g.detach().clone() for g in torch.autograd.grad(F.cross_entropy(net(x), y), list(net.parameters()))]
    noise = [torch.randn(p.shape) for p in params]
    expected = [p0 + eta / 2 * (-tau * p0 + N / 8 * g) + math.sqrt(eta) * z
                for p0, g, z in zip(params, sum_grads, noise)]
    config = SGLDConfig(step_size=eta, prior_precision=tau, batch_size=8)
    sgld_update_(params, mean_grads, [z.clone() for z in noise], torch.tensor(config.coefficients(N)))
    for p, e in zip(params, expected):
        assert torch.allclose(p, e, atol=1e-6)


def test_update_under_vmap_gives_each_chain_its_own_coefficients():
    configs = [SGLDConfig(step_size=0.2, prior_precision=1.0), SGLDConfig(step_size=0.1, prior_precision=4.0)]
    coefficients = torch.tensor([c.coefficients(10) for c in configs])
    theta, grad, noise = torch.ones(2, 3, 4), torch.full((2, 3, 4), 0.5), torch.full((2, 3, 4), 2.0)

    def update(th, g, z, c):
        sgld_update_([th], [g], [z], c)
        return th

    vmap(update)(theta, grad.clone(), noise.clone(), coefficients)
    for k, c in enumerate(configs):
        eta, tau = c.step_size, c.prior_precision
        expected = 1 - eta / 2 * (10 * 0.5 + tau * 1) + math.sqrt(eta) * 2.0
        assert torch.allclose(theta[k], torch.full((3, 4), expected))


@pytest.mark.parametrize("chains", [1, 3])
@pytest.mark.parametrize("varying", [False, True])
def test_the_fused_update_is_the_element_wise_update_bit_for_bit(chains, varying):
    """sgld_fused_update_, compiled (exact) and eager, moves theta to the very floats of sgld_update_ on the
    concatenated gradient, for one chain (parts without a chain axis) and for a batch with each chain's own
    coefficients, with a constant step and with a schedule's device row. An update summing its terms in another
    order is not bit for bit the same, which shows the comparison can fail."""
    gen = torch.Generator().manual_seed(chains)
    configs = [SGLDConfig(step_size=eta, prior_precision=tau) for eta, tau in ((3e-5, 1.0), (1e-4, 4.0), (7e-6, 0.5))]
    coefficients = torch.tensor([c.coefficients(60_000) for c in configs[:chains]]).T.unsqueeze(-1)
    shapes = [(37, 29), (37,), (11, 37), (11,)]
    parts = [torch.randn(chains, *s, generator=gen) * 10.0 ** torch.randint(-3, 2, (), generator=gen)
             for s in shapes]
    theta = torch.randn(chains, sum(math.prod(s) for s in shapes), generator=gen)
    noise = torch.randn(theta.shape, generator=gen)
    scales = torch.tensor([1.0, 0.37, 0.37 ** 0.5]) if varying else None
    expected = theta.clone()
    grad = torch.cat([p.reshape(chains, -1) for p in parts], dim=1)
    sgld_update_([expected], [grad.clone()], [noise.clone()], coefficients, scales if varying else (1.0, 1.0, 1.0))
    given = parts if chains > 1 else [p[0] for p in parts]
    fused = Fused(sgld_fused_update_, "the fused SGLD update", exact=True)
    for update in (sgld_fused_update_, fused):
        out = theta.clone()
        update(out, given, noise, coefficients, scales)
        assert torch.equal(out, expected)
    assert fused.compiled
    prior, step, scale = (coefficients[i] * (scales[i] if varying else 1.0) for i in range(3))
    other_order = theta + ((grad + theta * prior) * step + noise * scale)
    assert not torch.equal(other_order, expected)


def test_polynomial_schedule_scales_and_validation():
    cfg = SGLDConfig(step_size=1e-3, schedule="polynomial", decay_steps=100, decay_power=0.5)
    assert cfg.step_size_at(0) == pytest.approx(1e-3)
    assert cfg.step_size_at(300) == pytest.approx(1e-3 / 2)
    assert cfg.scales(300) == pytest.approx((1.0, 0.5, math.sqrt(0.5)))
    assert SGLDConfig(step_size=1e-3).step_size_at(10**6) == 1e-3
    assert SGLDConfig(step_size=1e-3).scales(10**6) == (1.0, 1.0, 1.0)
    for bad in (dict(step_size=0.0), dict(step_size=-1e-3), dict(step_size=float("nan")),
                dict(batch_size=0), dict(prior_precision=-1.0), dict(schedule="cosine")):
        with pytest.raises(ValueError, match=next(iter(bad))):
            SGLDConfig(**bad)
    with pytest.raises(ValueError, match="unstable"):
        stationary_variance(2.0, 2.0)
