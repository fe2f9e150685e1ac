"""Targets g and estimators U_s / U_o (Eqs. 9-10) against closed forms and batch Monte Carlo."""

import pytest
import torch

from gped_kit import targets as T


def dirichlet_draws(alpha, n, seed=0):
    gen = torch.Generator().manual_seed(seed)
    gam = torch._standard_gamma(alpha.expand(n, -1).contiguous(), generator=gen)
    return gam / gam.sum(-1, keepdim=True)


def test_entropy_target_is_positive_entropy_with_zero_convention():
    p = torch.tensor([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.2, 0.3, 0.5]])
    h = T.entropy_g(p.log())
    manual = torch.tensor([0.6931472, 0.0, -(0.2 * 0.2 ** 0 * torch.tensor(0.2).log() + 0.3 * torch.tensor(0.3).log() + 0.5 * torch.tensor(0.5).log())])
    assert h.shape == (3, 1)
    assert torch.allclose(h.squeeze(1), manual, atol=1e-6)
    assert (h >= 0).all()


def test_marginal_variance_and_combined_targets():
    logp = torch.log_softmax(torch.randn(4, 5), -1)
    p = logp.exp()
    assert torch.allclose(T.marginal_variance_g(logp), p * (1 - p))
    both = T.PREDICTIVE_ENTROPY.g(logp)
    assert both.shape == (4, 6) and T.PREDICTIVE_ENTROPY.out_dim(5) == 6
    assert torch.allclose(both[:, :5], p) and torch.allclose(both[:, 5:], T.entropy_g(logp))
    pred = T.PREDICTIVE_ENTROPY.link(torch.randn(4, 6))
    assert torch.allclose(pred[:, :5].sum(-1), torch.ones(4)) and (pred[:, 5] > 0).all()


def test_u_o_equals_batch_monte_carlo_average_with_repeated_indices():
    gen = torch.Generator().manual_seed(0)
    n, dim = 7, 3
    est = T.OnlineMeanEstimator(n, dim)
    seen = {i: [] for i in range(n)}
    for _ in range(50):
        idx = torch.randint(0, n, (5,), generator=gen)  # with replacement: duplicates happen
        values = torch.rand(5, dim, generator=gen)
        out = est.update(idx, values)
        for k, (i, v) in enumerate(zip(idx.tolist(), values)):
            seen[i].append(v)
        for k, i in enumerate(idx.tolist()):
            assert torch.allclose(out[k], torch.stack(seen[i]).mean(0), atol=1e-6)
    assert est.counts.sum() == 250


def test_u_o_matches_eq10_recursion():
    est = T.OnlineMeanEstimator(1, 1)
    g_hat, m = torch.zeros(1), 0
    for v in [0.3, 1.0, -2.0, 0.5]:
        g_hat = (m * g_hat + v) / (m + 1)  # Eq. 10
        m += 1
        out = est.update(torch.tensor([0]), torch.tensor([[v]]))
        assert torch.allclose(out.squeeze(), g_hat)


@pytest.mark.parametrize("target", [T.PREDICTIVE, T.ENTROPY])
def test_estimators_are_unbiased_for_dirichlet_posterior(target):
    """With p ~ Dir(alpha) as 'posterior samples', E[p] = alpha/alpha0 and
    E[H(p)] = psi(alpha0+1) - sum_c alpha_c/alpha0 psi(alpha_c+1) are known exactly."""
    alpha = torch.tensor([2.0, 1.0, 0.5, 4.0], dtype=torch.float64)
    a0 = alpha.sum()
    exact = {"predictive": alpha / a0,
             "entropy": (torch.digamma(a0 + 1) - (alpha / a0 * torch.digamma(alpha + 1)).sum()).reshape(1)}[target.name]
    draws = dirichlet_draws(alpha, 40_000)
    logp = draws.log()
    u_s = T.StochasticEstimator()
    u_o = T.OnlineMeanEstimator(1, target.out_dim(4), dtype=torch.float64)
    singles = []
    for chunk in logp.split(1000):
        g = target.g(chunk)
        singles.append(u_s.update(torch.zeros(len(chunk), dtype=torch.long), g))
        last = u_o.update(torch.zeros(len(chunk), dtype=torch.long), g)
    singles = torch.cat(singles)
    se = singles.std(0) / len(singles) ** 0.5
    assert ((singles.mean(0) - exact).abs() < 4 * se + 1e-9).all()  # U_s unbiased
    assert ((last[-1] - exact).abs() < 4 * se + 1e-9).all()  # U_o converges to the same value
    assert torch.allclose(last[-1], singles.mean(0))  # and equals the batch MC mean


def test_posterior_accumulator_is_the_sample_mean():
    x = torch.randn(6, 3)
    acc = T.PosteriorAccumulator(x, 4, [T.ENTROPY], chunk_size=4)
    weights = [torch.randn(3, 4) for _ in range(5)]
    for w in weights:
        acc.accumulate(lambda inp, w=w: torch.log_softmax(inp @ w, -1))
    probs = torch.stack([torch.softmax(x @ w, -1) for w in weights])
    assert torch.allclose(acc.mean("predictive"), probs.mean(0), atol=1e-6)
    assert torch.allclose(acc.mean("entropy").squeeze(1), torch.special.entr(probs).sum(-1).mean(0), atol=1e-6)
    empty = T.PosteriorAccumulator(x, 4, [])
    with pytest.raises(RuntimeError, match="no samples"):
        empty.mean("predictive")


def test_custom_target_and_resolution_errors():
    tgt = T.custom_target("max_prob", lambda lp: lp.exp().max(-1, keepdim=True).values, out_dim=1)
    assert tgt.out_dim(10) == 1
    raw = torch.zeros(2, 1)
    assert torch.allclose(tgt.loss(torch.ones(2, 1), raw), torch.ones(2))
    assert T.resolve_target(tgt) is tgt and T.resolve_target("entropy") is T.ENTROPY
    with pytest.raises(ValueError, match="target='varience'.*allowed"):
        T.resolve_target("varience")
    with pytest.raises(ValueError, match="estimator='U_x'"):
        T.make_estimator("U_x", 10, 1)
    with pytest.raises(TypeError):
        T.custom_target("bad", g=3, out_dim=1)


def test_endd_target_tempers_smooths_and_links_to_the_dirichlet_mean():
    log_p = torch.log_softmax(torch.randn(5, 4), -1)
    g = T.ENDD.g(log_p)
    pi = torch.softmax(log_p / T.ENDD_TEMPERATURE, -1) * (1 - T.ENDD_SMOOTHING) + T.ENDD_SMOOTHING / 4
    assert torch.allclose(g, pi.log(), atol=1e-6) and torch.allclose(g.exp().sum(-1), torch.ones(5))
    # tempering flattens: the tempered distribution has higher entropy than the original
    assert (T.entropy_g(g) > T.entropy_g(log_p)).all()
    raw = torch.randn(5, 4)
    out = T.ENDD.link(raw)
    assert out.shape == (5, 5) and torch.allclose(out[:, :4], torch.softmax(raw, -1), atol=1e-6)
    assert torch.allclose(out[:, 4], raw.exp().sum(-1))
    assert T.ENDD.predictive_classes and not T.ENDD.estimates_g
    assert T.resolve_target("endd") is T.ENDD and T.endd_target(1.0).name == "endd-T1-s0.001"
    with pytest.raises(ValueError, match="temperature"):
        T.endd_target(0.0)


def test_split_estimator_is_u_s_on_predictive_columns_and_u_o_on_the_last():
    est = T.make_estimator("U_s+U_o", 6, 3)
    idx = torch.tensor([1, 1, 4])
    first = torch.tensor([[0.2, 0.8, 1.0], [0.4, 0.6, 3.0], [0.5, 0.5, 2.0]])
    out = est.update(idx, first)
    assert torch.equal(out[:, :2], first[:, :2])  # U_s: the current sample only
    assert torch.allclose(out[:, 2], torch.tensor([2.0, 2.0, 2.0]))  # U_o: mean of visits (1+3)/2 and 2
    second = torch.tensor([[0.1, 0.9, 5.0]])
    out = est.update(torch.tensor([1]), second)
    assert torch.equal(out[:, :2], second[:, :2]) and torch.allclose(out[:, 2], torch.tensor([3.0]))
    assert est.nbytes == 6 * 4 * 2
    clone = T.make_estimator("U_s+U_o", 6, 3)
    clone.load_state_dict(est.state_dict())
    assert torch.allclose(clone.update(torch.tensor([4]), second)[:, 2], torch.tensor([3.5]))
    with pytest.raises(ValueError, match="dim >= 2"):
        T.make_estimator("U_s+U_o", 6, 1)
